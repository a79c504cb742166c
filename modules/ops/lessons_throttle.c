/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_throttle.c: a few slots, each the hash of the line it last
 * logged, when, and how many copies it held back since, under a mutex
 * (the threads of a process log at once).
 */
#include <string.h>

#include "apr_hash.h"
#include "apr_thread_mutex.h"

#include "ops/lessons_throttle.h"

struct lessons_throttle_t {
    apr_thread_mutex_t *mutex;
    unsigned int line[LESSONS_THROTTLE_SLOTS];
    apr_time_t last[LESSONS_THROTTLE_SLOTS];
    unsigned long held[LESSONS_THROTTLE_SLOTS];
};

lessons_throttle_t *lessons_throttle_make(apr_pool_t *p)
{
    lessons_throttle_t *t = apr_pcalloc(p, sizeof(*t));

    if (apr_thread_mutex_create(&t->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS) {
        return NULL;
    }
    return t;
}

int lessons_throttle_pass(lessons_throttle_t *t, const char *line,
                          apr_time_t now, unsigned long *left_out)
{
    apr_ssize_t len;
    unsigned int h;
    int i, pass;

    *left_out = 0;
    if (!t || !line) {
        return 1;
    }
    len = (apr_ssize_t)strlen(line);
    h = apr_hashfunc_default(line, &len);
    i = (int)(h % LESSONS_THROTTLE_SLOTS);
    apr_thread_mutex_lock(t->mutex);
    pass = t->line[i] != h || t->last[i] == 0
           || now - t->last[i] >= apr_time_from_sec(1);
    if (pass) {
        *left_out = t->line[i] == h ? t->held[i] : 0;
        t->line[i] = h;
        t->held[i] = 0;
        t->last[i] = now;
    }
    else {
        t->held[i]++;
    }
    apr_thread_mutex_unlock(t->mutex);
    return pass;
}
