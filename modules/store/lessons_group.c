/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_group.c: group commit (APR mutex and condition variable), one
 * group per server per process.  Jobs queue in arrival order, and the
 * oldest leads the next run: it takes its own and those behind it.
 */
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"

#include "store/lessons_group.h"

enum { QUEUED = 1, TAKEN, DONE };

struct lessons_group_t {
    apr_thread_mutex_t *mutex;
    apr_thread_cond_t *cond;
    int max;
    int leading;                    /* a run is under way */
    lessons_group_item_t *head, *tail;
    apr_uint64_t runs, jobs;
    int largest;
    int waiting;
};

lessons_group_t *lessons_group_make(apr_pool_t *p, int max)
{
    lessons_group_t *g = apr_pcalloc(p, sizeof(*g));

    if (apr_thread_mutex_create(&g->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS
        || apr_thread_cond_create(&g->cond, p) != APR_SUCCESS) {
        return NULL;
    }
    g->max = max > 0 ? max : 1;
    return g;
}

/* Take item out of the queue (it is in it). */
static void lessons_group_unqueue(lessons_group_t *g,
                                  lessons_group_item_t *item)
{
    lessons_group_item_t **at = &g->head, *prev = NULL;

    while (*at && *at != item) {
        prev = *at;
        at = &(*at)->next;
    }
    if (*at) {
        *at = item->next;
        if (g->tail == item) {
            g->tail = prev;
        }
    }
    item->next = NULL;
}

/* Move jobs from the queue's head to the end of a run of n whose last
 * is last, up to max in all; the run's new length.
 */
static int lessons_group_append(lessons_group_t *g,
                                lessons_group_item_t *last, int n)
{
    int added = 0;

    while (g->head && n + added < g->max) {
        lessons_group_item_t *next = g->head;

        lessons_group_unqueue(g, next);
        next->state = TAKEN;
        last->next = next;
        last = next;
        added++;
    }
    g->jobs += added;
    if (n + added > g->largest) {
        g->largest = n + added;
    }
    return n + added;
}

/* Lead: item (the oldest), then those behind it, up to max. */
static lessons_group_item_t *lessons_group_take(lessons_group_t *g,
                                                lessons_group_item_t *item)
{
    lessons_group_unqueue(g, item);
    item->state = TAKEN;
    g->leading = 1;
    g->runs++;
    g->jobs++;
    lessons_group_append(g, item, 1);
    return item;
}

lessons_group_e lessons_group_join(lessons_group_t *g,
                                   lessons_group_item_t *item,
                                   apr_time_t deadline,
                                   lessons_group_item_t **run)
{
    lessons_group_e rc;

    *run = NULL;
    apr_thread_mutex_lock(g->mutex);
    item->next = NULL;
    item->state = QUEUED;
    if (g->tail) {
        g->tail->next = item;
    }
    else {
        g->head = item;
    }
    g->tail = item;
    for (;;) {
        apr_time_t now;

        if (item->state == DONE) {
            rc = LESSONS_GROUP_DONE;
            break;
        }
        if (item->state == QUEUED && !g->leading && g->head == item) {
            *run = lessons_group_take(g, item);
            rc = LESSONS_GROUP_LEAD;
            break;
        }
        g->waiting++;
        if (item->state == TAKEN) {
            apr_thread_cond_wait(g->cond, g->mutex);
        }
        else if ((now = apr_time_now()) < deadline) {
            apr_thread_cond_timedwait(g->cond, g->mutex, deadline - now);
        }
        else {
            g->waiting--;
            lessons_group_unqueue(g, item);
            apr_thread_cond_broadcast(g->cond);     /* a new oldest? */
            rc = LESSONS_GROUP_TIMEOUT;
            break;
        }
        g->waiting--;
    }
    apr_thread_mutex_unlock(g->mutex);
    return rc;
}

int lessons_group_top_up(lessons_group_t *g, lessons_group_item_t *run)
{
    lessons_group_item_t *last = run;
    int n = 1;

    apr_thread_mutex_lock(g->mutex);
    while (last->next) {
        last = last->next;
        n++;
    }
    n = lessons_group_append(g, last, n);
    apr_thread_mutex_unlock(g->mutex);
    return n;
}

void lessons_group_done(lessons_group_t *g, lessons_group_item_t *run)
{
    apr_thread_mutex_lock(g->mutex);
    while (run) {
        lessons_group_item_t *next = run->next;

        run->next = NULL;
        run->state = DONE;
        run = next;
    }
    g->leading = 0;
    apr_thread_cond_broadcast(g->cond);
    apr_thread_mutex_unlock(g->mutex);
}

lessons_group_share_e lessons_group_shares(int n, int most,
                                           apr_time_t deadline,
                                           lessons_group_send_fn send,
                                           void *baton, int *sent)
{
    lessons_group_share_e how = LESSONS_SHARE_NEXT;
    int shares, i = 0, j, k;

    if (most < 1) {
        most = 1;
    }
    shares = n / most + (n % most != 0);
    /* The first `n % shares` shares take one job more than the rest. */
    for (j = 0; i < n && how == LESSONS_SHARE_NEXT; i += k, j++) {
        if (i > 0 && apr_time_now() >= deadline) {
            how = LESSONS_SHARE_LATE;
            break;
        }
        k = n / shares + (j < n % shares);
        how = send(baton, i, k);
    }
    *sent = i;
    return how;
}

void lessons_group_stats(lessons_group_t *g, lessons_group_stats_t *st)
{
    apr_thread_mutex_lock(g->mutex);
    st->runs = g->runs;
    st->jobs = g->jobs;
    st->largest = g->largest;
    st->waiting = g->waiting;
    apr_thread_mutex_unlock(g->mutex);
}
