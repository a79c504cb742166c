/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_inflight.h: one question per key at a time in a process (the
 * introspection of a token, keyed by the 32-byte digest of endpoint,
 * client and token).  The first thread to ask about a key leads: it asks
 * the provider and lands what came of it.  Threads that ask about the
 * same key meanwhile wait for that landing, until their own deadline at
 * most, and are told how it went: the answer was kept (look in the
 * process's cache again), the ask failed (answer as it would have), or
 * the answer could not be kept (ask alone).  Keys of different tokens
 * never wait for each other.
 *
 * A fixed table of slots under one mutex, a condition variable per
 * slot.  When every slot is in use, a thread asks alone, as it would
 * without the table: the table bounds memory, never a request.  The
 * unit knows keys, times and outcomes, not httpd, JSON or tokens.
 */
#ifndef LESSONS_INFLIGHT_H
#define LESSONS_INFLIGHT_H

#include "apr_pools.h"
#include "apr_time.h"

#define LESSONS_INFLIGHT_KEY_LEN  32    /* SHA-256 */

typedef struct lessons_inflight_t lessons_inflight_t;

typedef enum {
    LESSONS_INFLIGHT_LEAD = 0,      /* ask, then land (*slot says where) */
    LESSONS_INFLIGHT_KEPT,          /* the leader's answer was kept: take
                                     * it from the cache */
    LESSONS_INFLIGHT_FAILED,        /* the leader's ask failed */
    LESSONS_INFLIGHT_ALONE,         /* ask alone, without landing: every
                                     * slot is in use, or the leader's
                                     * answer could not be kept */
    LESSONS_INFLIGHT_LATE           /* the deadline came first */
} lessons_inflight_e;

/* A table of slots questions in p (a child's pool); NULL if its lock
 * cannot be made.
 */
lessons_inflight_t *lessons_inflight_make(apr_pool_t *p, int slots);

/* Ask about key, waiting until deadline at most.  LEAD sets *slot, which
 * the caller must land exactly once; every other outcome leaves it -1.
 */
lessons_inflight_e lessons_inflight_join(lessons_inflight_t *f,
                                         const unsigned char *key,
                                         apr_time_t deadline, int *slot);

/* What came of the leader's ask: KEPT, FAILED or ALONE.  Wakes the
 * waiters of the slot; the slot is free again once they have read it.
 */
void lessons_inflight_land(lessons_inflight_t *f, int slot,
                           lessons_inflight_e how);

/* How many threads wait for key's leader now (0: none, or no leader). */
int lessons_inflight_waiting(lessons_inflight_t *f, const unsigned char *key);

#endif /* LESSONS_INFLIGHT_H */
