/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_inflight.c: one question per key at a time in a process; see
 * lessons_inflight.h.
 */
#include <string.h>

#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"

#include "auth/lessons_inflight.h"

typedef enum {
    LESSONS_INFLIGHT_FREE = 0,
    LESSONS_INFLIGHT_ASKING,        /* a leader asks */
    LESSONS_INFLIGHT_LANDED         /* its waiters read how it went */
} lessons_inflight_state_e;

typedef struct {
    unsigned char key[LESSONS_INFLIGHT_KEY_LEN];
    lessons_inflight_state_e state;
    int waiters;
    lessons_inflight_e how;         /* when LANDED */
    apr_thread_cond_t *landed;
} lessons_inflight_slot_t;

struct lessons_inflight_t {
    apr_thread_mutex_t *lock;
    int nslots;
    lessons_inflight_slot_t *slots;
};

lessons_inflight_t *lessons_inflight_make(apr_pool_t *p, int slots)
{
    lessons_inflight_t *f;
    int i;

    if (slots < 1) {
        return NULL;
    }
    f = apr_pcalloc(p, sizeof(*f));
    if (apr_thread_mutex_create(&f->lock, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS) {
        return NULL;
    }
    f->nslots = slots;
    f->slots = apr_pcalloc(p, sizeof(*f->slots) * (apr_size_t)slots);
    for (i = 0; i < slots; i++) {
        if (apr_thread_cond_create(&f->slots[i].landed, p) != APR_SUCCESS) {
            return NULL;
        }
    }
    return f;
}

/* Wait, with the lock held, for the slot's leader to land, until
 * deadline at most; how it went, or LATE.
 */
static lessons_inflight_e lessons_inflight_wait(lessons_inflight_t *f,
                                                lessons_inflight_slot_t *s,
                                                apr_time_t deadline)
{
    lessons_inflight_e how = LESSONS_INFLIGHT_LATE;
    apr_time_t now;

    s->waiters++;
    while (s->state == LESSONS_INFLIGHT_ASKING) {
        now = apr_time_now();
        if (now >= deadline) {
            break;
        }
        /* A spurious wake or a time-out only goes round again. */
        apr_thread_cond_timedwait(s->landed, f->lock, deadline - now);
    }
    if (s->state == LESSONS_INFLIGHT_LANDED) {
        how = s->how;
    }
    s->waiters--;
    /* The last to read a landing frees the slot. */
    if (s->state == LESSONS_INFLIGHT_LANDED && s->waiters == 0) {
        s->state = LESSONS_INFLIGHT_FREE;
    }
    return how;
}

lessons_inflight_e lessons_inflight_join(lessons_inflight_t *f,
                                         const unsigned char *key,
                                         apr_time_t deadline, int *slot)
{
    lessons_inflight_slot_t *free_slot = NULL, *s;
    lessons_inflight_e how;
    int i;

    *slot = -1;
    if (!f || apr_thread_mutex_lock(f->lock) != APR_SUCCESS) {
        return LESSONS_INFLIGHT_ALONE;
    }
    for (i = 0; i < f->nslots; i++) {
        s = &f->slots[i];
        /* Only a question still on its way is joined: one that landed
         * was answered before this thread asked (its answer, if kept,
         * was looked for already).
         */
        if (s->state == LESSONS_INFLIGHT_ASKING
            && memcmp(s->key, key, LESSONS_INFLIGHT_KEY_LEN) == 0) {
            how = lessons_inflight_wait(f, s, deadline);
            apr_thread_mutex_unlock(f->lock);
            return how;
        }
        if (!free_slot && s->state == LESSONS_INFLIGHT_FREE) {
            free_slot = s;
            *slot = i;
        }
    }
    if (!free_slot) {
        apr_thread_mutex_unlock(f->lock);
        return LESSONS_INFLIGHT_ALONE;
    }
    memcpy(free_slot->key, key, LESSONS_INFLIGHT_KEY_LEN);
    free_slot->state = LESSONS_INFLIGHT_ASKING;
    free_slot->waiters = 0;
    apr_thread_mutex_unlock(f->lock);
    return LESSONS_INFLIGHT_LEAD;
}

void lessons_inflight_land(lessons_inflight_t *f, int slot,
                           lessons_inflight_e how)
{
    lessons_inflight_slot_t *s;

    if (!f || slot < 0 || slot >= f->nslots) {
        return;
    }
    s = &f->slots[slot];
    /* The lock cannot fail once made (a default mutex); were it to, the
     * waiters would end at their deadline.
     */
    if (apr_thread_mutex_lock(f->lock) != APR_SUCCESS) {
        return;
    }
    if (s->state == LESSONS_INFLIGHT_ASKING) {
        s->how = how;
        s->state = s->waiters ? LESSONS_INFLIGHT_LANDED
                              : LESSONS_INFLIGHT_FREE;
        apr_thread_cond_broadcast(s->landed);
    }
    apr_thread_mutex_unlock(f->lock);
}

int lessons_inflight_waiting(lessons_inflight_t *f, const unsigned char *key)
{
    int i, n = 0;

    if (!f || apr_thread_mutex_lock(f->lock) != APR_SUCCESS) {
        return 0;
    }
    for (i = 0; i < f->nslots; i++) {
        if (f->slots[i].state == LESSONS_INFLIGHT_ASKING
            && memcmp(f->slots[i].key, key, LESSONS_INFLIGHT_KEY_LEN) == 0) {
            n = f->slots[i].waiters;
            break;
        }
    }
    apr_thread_mutex_unlock(f->lock);
    return n;
}
