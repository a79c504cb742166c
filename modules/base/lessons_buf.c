/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_buf.c: a pool buffer that grows by doubling.
 */
#include <string.h>

#include "base/lessons_buf.h"

int lessons_buf_add(lessons_buf_t *b, const void *data, apr_size_t n,
                    apr_size_t first)
{
    if (n > b->max || b->len > b->max - n) {
        return -1;
    }
    if (n + 1 > b->cap - b->len) {      /* and the NUL's room */
        apr_size_t cap = b->cap ? b->cap : (first ? first : 64);
        char *grown;

        while (cap < b->len + n + 1) {
            cap *= 2;                   /* len + n <= max: it ends */
        }
        if (cap > b->max + 1) {
            cap = b->max + 1;
        }
        grown = apr_palloc(b->p, cap);
        if (b->len) {
            memcpy(grown, b->buf, b->len);
        }
        b->buf = grown;
        b->cap = cap;
    }
    if (n) {
        memcpy(b->buf + b->len, data, n);
        b->len += n;
    }
    return 0;
}

char *lessons_buf_text(lessons_buf_t *b)
{
    if (!b->buf) {
        return apr_pcalloc(b->p, 1);    /* nothing added: "" */
    }
    b->buf[b->len] = '\0';              /* the room kept for it */
    return b->buf;
}
