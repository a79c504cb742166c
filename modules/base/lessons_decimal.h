/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_decimal.h: whole decimal numbers read from text that is not
 * ours (a database column, a request's path), without errno.
 *
 * strtoll and apr_strtoi64 tell an overflow only through errno, and in
 * an httpd child errno can change between any two instructions: prefork
 * answers each graceful restart's SIGUSR1 by closing its listeners again
 * in the signal handler, and a second restart's close fails with EBADF
 * and leaves it so.  A valid lesson id then read as an overflow, and a
 * list was answered 500 (the restart storm, t/api/storm.t).
 */
#ifndef LESSONS_DECIMAL_H
#define LESSONS_DECIMAL_H

#include "apr.h"

/* The n bytes at s as an optional '-' and one or more digits, nothing
 * else, within [min, max]: 1 and *out, or 0 (*out untouched).
 */
int lessons_decimal_i64(const char *s, apr_size_t n, apr_int64_t min,
                        apr_int64_t max, apr_int64_t *out);

#endif /* LESSONS_DECIMAL_H */
