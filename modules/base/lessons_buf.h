/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_buf.h: text gathered in pool memory as a producer hands it
 * over piece by piece (a keys URL's body from libcurl, a document from
 * jansson's dump), in one pass, with room for a closing NUL.
 */
#ifndef LESSONS_BUF_H
#define LESSONS_BUF_H

#include "apr_pools.h"

typedef struct {
    apr_pool_t *p;
    char *buf;                      /* NULL until the first bytes */
    apr_size_t len;
    apr_size_t cap;
    apr_size_t max;                 /* the most len may reach */
} lessons_buf_t;

/* Append n bytes (room doubles from first, in the pool: what is left
 * behind is less than the final buffer).  0 when they are in, -1 when
 * they would take len past max (nothing is appended then).
 */
int lessons_buf_add(lessons_buf_t *b, const void *data, apr_size_t n,
                    apr_size_t first);

/* The text so far with a NUL after it (not counted in len), in place:
 * no copy.
 */
char *lessons_buf_text(lessons_buf_t *b);

#endif /* LESSONS_BUF_H */
