/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_flight.c: shared reads (APR mutex and condition variable), one
 * flight per server per process.  Reads are numbered as they are sent;
 * a thread that asks when `sent` reads have been sent may take only the
 * answer of read sent + 1 or later, whether one is on its way or not:
 * the one on its way, if any, was sent before it asked.  A thread that
 * would send a read sooner than the window after the last one holds the
 * lead until then ("leading"); those who ask meanwhile have not been
 * counted into `sent`, so the read it then sends is theirs too.  It sends
 * at once when as many ask for the read as took the last one (at least
 * LESSONS_FLIGHT_SHARE): clients that come back together need not wait
 * out the window.
 */
#include <string.h>

#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"

#include "lessons_flight.h"

struct lessons_flight_t {
    apr_thread_mutex_t *mutex;
    apr_thread_cond_t *cond;        /* a read landed */
    apr_thread_cond_t *full;        /* as many ask as the leader waits for */
    apr_uint64_t sent;              /* reads sent so far (the number of
                                     * the newest) */
    apr_uint64_t landed;            /* the number of the newest landed */
    int flying;                     /* read `sent` is on its way */
    int leading;                    /* a thread waits out the window to
                                     * send the next read */
    apr_interval_time_t window;
    apr_time_t last_sent;
    int asking;                     /* threads that asked for read sent + 1
                                     * (its leader included) */
    int batch;                      /* how many asked for the last read
                                     * sent */
    int ok;                         /* the landed read answered */
    apr_size_t len;
    unsigned char value[LESSONS_FLIGHT_MAX];
    apr_uint64_t shared;            /* answers taken from another's read */
    int waiting;
};

lessons_flight_t *lessons_flight_make(apr_pool_t *p,
                                      apr_interval_time_t window)
{
    lessons_flight_t *f = apr_pcalloc(p, sizeof(*f));

    f->window = window > 0 ? window : 0;
    if (apr_thread_mutex_create(&f->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS
        || apr_thread_cond_create(&f->cond, p) != APR_SUCCESS
        || apr_thread_cond_create(&f->full, p) != APR_SUCCESS) {
        return NULL;
    }
    return f;
}

/* How many must ask for the next read before its leader sends it ahead
 * of the window: as many as asked for the last one, and no fewer than
 * LESSONS_FLIGHT_SHARE.
 */
static int lessons_flight_enough(const lessons_flight_t *f)
{
    return f->batch > LESSONS_FLIGHT_SHARE ? f->batch : LESSONS_FLIGHT_SHARE;
}

lessons_flight_e lessons_flight_join(lessons_flight_t *f,
                                     apr_time_t deadline, void *value,
                                     apr_size_t *len)
{
    lessons_flight_e rc;
    apr_uint64_t need;

    apr_thread_mutex_lock(f->mutex);
    need = f->sent + 1;
    f->asking++;
    if (f->leading && f->asking >= lessons_flight_enough(f)) {
        apr_thread_cond_signal(f->full);
    }
    for (;;) {
        apr_time_t now;

        if (f->landed >= need) {
            /* Sent after this call began: its answer, or read alone. */
            rc = f->ok ? LESSONS_FLIGHT_SHARED : LESSONS_FLIGHT_ALONE;
            if (f->ok) {
                memcpy(value, f->value, f->len);
                *len = f->len;
                f->shared++;
            }
            break;
        }
        now = apr_time_now();
        if (!f->flying && !f->leading) {
            apr_time_t at = f->last_sent + f->window;

            if (at > deadline) {
                at = deadline;
            }
            /* Hold the lead until the window is over, or until enough
             * ask to share the read.
             */
            f->leading = 1;
            f->waiting++;
            while (now < at && f->asking < lessons_flight_enough(f)) {
                apr_thread_cond_timedwait(f->full, f->mutex, at - now);
                now = apr_time_now();
            }
            f->waiting--;
            f->leading = 0;
            f->sent++;                  /* >= need: sent after the call */
            f->flying = 1;
            f->last_sent = now;
            f->batch = f->asking;
            f->asking = 0;
            rc = LESSONS_FLIGHT_LEAD;
            break;
        }
        if (now >= deadline) {
            if (need == f->sent + 1) {
                f->asking--;            /* its read is not sent yet */
            }
            rc = LESSONS_FLIGHT_ALONE;
            break;
        }
        f->waiting++;
        apr_thread_cond_timedwait(f->cond, f->mutex, deadline - now);
        f->waiting--;
    }
    apr_thread_mutex_unlock(f->mutex);
    return rc;
}

void lessons_flight_land(lessons_flight_t *f, const void *value,
                         apr_size_t len)
{
    apr_thread_mutex_lock(f->mutex);
    f->ok = value != NULL && len <= LESSONS_FLIGHT_MAX;
    f->len = f->ok ? len : 0;
    if (f->ok && len) {
        memcpy(f->value, value, len);
    }
    f->landed = f->sent;
    f->flying = 0;
    apr_thread_cond_broadcast(f->cond);
    apr_thread_mutex_unlock(f->mutex);
}

void lessons_flight_stats(lessons_flight_t *f, lessons_flight_stats_t *st)
{
    apr_thread_mutex_lock(f->mutex);
    st->reads = f->sent;
    st->shared = f->shared;
    st->waiting = f->waiting;
    apr_thread_mutex_unlock(f->mutex);
}
