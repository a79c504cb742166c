/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_throttle.h: an identical log line at most once a second per
 * process, with a count of those left out.  A database that is down
 * fails every request; its error log should say so once a second, not
 * a thousand times.
 */
#ifndef LESSONS_THROTTLE_H
#define LESSONS_THROTTLE_H

#include "apr_pools.h"
#include "apr_time.h"

#define LESSONS_THROTTLE_SLOTS 32

typedef struct lessons_throttle_t lessons_throttle_t;

/* A throttle in p (a child's pool); NULL if its lock cannot be made. */
lessons_throttle_t *lessons_throttle_make(apr_pool_t *p);

/* May this line be logged at now?  1 with *left_out set to the copies
 * held back since it was last logged, or 0 to hold it back.  Lines are
 * told apart by a hash into a few slots: two lines that share a slot
 * only make each other pass more often.  A NULL throttle passes all.
 */
int lessons_throttle_pass(lessons_throttle_t *t, const char *line,
                          apr_time_t now, unsigned long *left_out);

#endif /* LESSONS_THROTTLE_H */
