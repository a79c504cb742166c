/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_flight.c: shared reads, one flight per server per process.
 * Reads are numbered as they are sent; a thread that asks when `sent`
 * reads have been sent may take only the answer of read sent + 1 or
 * later, whether one is on its way or not: the one on its way, if any,
 * was sent before it asked.  A thread that would send a read sooner than
 * the window after the last one holds the lead until then ("leading");
 * those who ask meanwhile have not been counted into `sent`, so the read
 * it then sends is theirs too.  It sends at once when as many ask for the
 * read as took the last one (at least LESSONS_FLIGHT_SHARE): clients that
 * come back together need not wait out the window.  One that will not
 * come back (its connection closes with that answer) says so
 * (lessons_flight_leave), and is no longer waited for.
 *
 * The bookkeeping is under a mutex; the wait for a read is not.  With a
 * condition variable every woken waiter must take the mutex again, and a
 * read shared by a dozen threads woke them into a queue on it: on two
 * CPUs about three futex calls and two more context switches per GET
 * than the static twin (perf stat, issue 19).  So a waiter sleeps on a
 * bell (a futex word) of its read's parity, and once woken takes the
 * answer from a seqlocked slot without the mutex.  At most two reads are
 * awaited at any time (the one on its way and the next), so the two
 * bells never mix them: landing read n rings bell n & 1 for all its
 * waiters, and wakes one waiter of read n + 1 to lead it.
 */
#include <string.h>

#include "apr_atomic.h"
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"

#include "store/lessons_flight.h"

#if defined(__linux__) && !defined(LESSONS_FLIGHT_NO_FUTEX)
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#define LESSONS_FLIGHT_FUTEX 1
#endif

/* The last answer landed: written under the mutex, read without it. */
typedef struct {
    apr_uint32_t seq;               /* odd while it is written */
    apr_uint64_t number;            /* the read it answers */
    int ok;
    apr_size_t len;
    unsigned char value[LESSONS_FLIGHT_MAX];
} lessons_flight_slot_t;

struct lessons_flight_t {
    apr_thread_mutex_t *mutex;
    apr_thread_cond_t *full;        /* as many ask as the leader waits for */
#ifndef LESSONS_FLIGHT_FUTEX
    apr_thread_mutex_t *bell_mutex; /* the bells without futexes */
    apr_thread_cond_t *bell_cond;
#endif
    apr_uint64_t sent;              /* reads sent so far (the number of
                                     * the newest) */
    apr_uint64_t landed;            /* the number of the newest landed
                                     * (atomic: read without the mutex) */
    apr_uint32_t bell[2];           /* futex words: bell[n & 1] changes
                                     * when read n lands, or when read n
                                     * needs a leader */
    apr_uint32_t sleepers[2];       /* threads on each bell, counted under
                                     * the mutex before they sleep: none,
                                     * and a ring needs no wake (atomic) */
    int flying;                     /* read `sent` is on its way */
    int leading;                    /* a thread waits out the window to
                                     * send the next read */
    apr_interval_time_t window;
    apr_time_t last_sent;
    int asking;                     /* threads that asked for read sent + 1
                                     * (its leader included) */
    int batch;                      /* how many asked for the last read
                                     * sent, less those who left since */
    lessons_flight_slot_t slot;
    apr_uint64_t shared;            /* answers taken from another's read
                                     * (atomic) */
};

/* --- bells: sleep until a word changes, or ring it -------------------- */

#ifdef LESSONS_FLIGHT_FUTEX
static int lessons_flight_bells(lessons_flight_t *f, apr_pool_t *p)
{
    (void)f;
    (void)p;
    return 1;
}

/* Until *bell is no longer ring, a wake, or timeout passes. */
static void lessons_flight_sleep(lessons_flight_t *f, apr_uint32_t *bell,
                                 apr_uint32_t ring,
                                 apr_interval_time_t timeout)
{
    struct timespec ts;

    (void)f;
    ts.tv_sec = (time_t)apr_time_sec(timeout);
    ts.tv_nsec = (long)apr_time_usec(timeout) * 1000L;
    /* EAGAIN (it rang already), EINTR, ETIMEDOUT: the caller looks. */
    (void)syscall(SYS_futex, bell, FUTEX_WAIT_PRIVATE, ring, &ts, NULL, 0);
}

static void lessons_flight_wake(lessons_flight_t *f, apr_uint32_t *bell,
                                int all)
{
    (void)f;
    (void)syscall(SYS_futex, bell, FUTEX_WAKE_PRIVATE, all ? INT_MAX : 1,
                  NULL, NULL, 0);
}
#else
/* Elsewhere: a mutex and condition variable of the bells' own, which
 * the sleepers take again when woken (slower, the same rule).
 */
static int lessons_flight_bells(lessons_flight_t *f, apr_pool_t *p)
{
    return apr_thread_mutex_create(&f->bell_mutex, APR_THREAD_MUTEX_DEFAULT,
                                   p) == APR_SUCCESS
           && apr_thread_cond_create(&f->bell_cond, p) == APR_SUCCESS;
}

static void lessons_flight_sleep(lessons_flight_t *f, apr_uint32_t *bell,
                                 apr_uint32_t ring,
                                 apr_interval_time_t timeout)
{
    apr_thread_mutex_lock(f->bell_mutex);
    if (apr_atomic_read32(bell) == ring) {
        apr_thread_cond_timedwait(f->bell_cond, f->bell_mutex, timeout);
    }
    apr_thread_mutex_unlock(f->bell_mutex);
}

static void lessons_flight_wake(lessons_flight_t *f, apr_uint32_t *bell,
                                int all)
{
    (void)bell;
    (void)all;
    /* The bell changed before this: a sleeper either saw it change or
     * is waiting on the condition when it is broadcast.
     */
    apr_thread_mutex_lock(f->bell_mutex);
    apr_thread_cond_broadcast(f->bell_cond);
    apr_thread_mutex_unlock(f->bell_mutex);
}
#endif

/* --- the slot: one writer (under the mutex), readers without it -------- */

static void lessons_flight_slot_write(lessons_flight_slot_t *s,
                                      apr_uint64_t number, int ok,
                                      const void *value, apr_size_t len)
{
    apr_uint32_t seq = s->seq;

    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    s->number = number;
    s->ok = ok;
    s->len = ok ? len : 0;
    if (ok && len) {
        memcpy(s->value, value, len);
    }
    __atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* The slot's answer if it is read need or later and was not being
 * written meanwhile: 1 (ok says whether it answered), or 0 to look again
 * under the mutex.
 */
static int lessons_flight_slot_read(lessons_flight_slot_t *s,
                                    apr_uint64_t need, int *ok, void *value,
                                    apr_size_t *len)
{
    apr_uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    apr_uint64_t number;
    apr_size_t n;

    if (seq & 1) {
        return 0;
    }
    number = s->number;
    *ok = s->ok;
    n = s->len;
    if (n > LESSONS_FLIGHT_MAX) {
        return 0;                       /* torn: the seq check says so */
    }
    memcpy(value, s->value, n);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq || number < need) {
        return 0;
    }
    *len = n;
    return 1;
}

lessons_flight_t *lessons_flight_make(apr_pool_t *p,
                                      apr_interval_time_t window)
{
    lessons_flight_t *f = apr_pcalloc(p, sizeof(*f));

    f->window = window > 0 ? window : 0;
    if (apr_thread_mutex_create(&f->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS
        || apr_thread_cond_create(&f->full, p) != APR_SUCCESS
        || !lessons_flight_bells(f, p)) {
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

/* An answer taken: SHARED, or ALONE if the read failed. */
static lessons_flight_e lessons_flight_taken(lessons_flight_t *f, int ok)
{
    if (!ok) {
        return LESSONS_FLIGHT_ALONE;
    }
    apr_atomic_inc64(&f->shared);
    return LESSONS_FLIGHT_SHARED;
}

lessons_flight_e lessons_flight_join(lessons_flight_t *f,
                                     apr_time_t deadline, void *value,
                                     apr_size_t *len)
{
    lessons_flight_e rc;
    apr_uint64_t need;
    int ok;

    apr_thread_mutex_lock(f->mutex);
    need = f->sent + 1;
    f->asking++;
    if (f->leading && f->asking >= lessons_flight_enough(f)) {
        apr_thread_cond_signal(f->full);
    }
    for (;;) {
        apr_uint32_t *bell, ring;
        apr_time_t now;

        if (f->landed >= need) {
            /* Sent after this call began: its answer, or read alone.
             * Under the mutex the slot is not being written.
             */
            if (lessons_flight_slot_read(&f->slot, need, &ok, value, len)) {
                rc = lessons_flight_taken(f, ok);
            }
            else {
                rc = LESSONS_FLIGHT_ALONE;  /* cannot be: read alone */
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
            while (now < at && f->asking < lessons_flight_enough(f)) {
                apr_thread_cond_timedwait(f->full, f->mutex, at - now);
                now = apr_time_now();
            }
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
        /* Sleep on the bell of read need, as it is now: a landing or a
         * call to lead changes it under the mutex, so none is missed.
         */
        bell = &f->bell[need & 1];
        ring = apr_atomic_read32(bell);
        apr_atomic_inc32(&f->sleepers[need & 1]);
        apr_thread_mutex_unlock(f->mutex);
        lessons_flight_sleep(f, bell, ring, deadline - now);
        apr_atomic_dec32(&f->sleepers[need & 1]);
        if (__atomic_load_n(&f->landed, __ATOMIC_ACQUIRE) >= need
            && lessons_flight_slot_read(&f->slot, need, &ok, value, len)) {
            return lessons_flight_taken(f, ok);
        }
        apr_thread_mutex_lock(f->mutex);
    }
    apr_thread_mutex_unlock(f->mutex);
    return rc;
}

void lessons_flight_land(lessons_flight_t *f, const void *value,
                         apr_size_t len)
{
    apr_uint64_t n;
    int ok = value != NULL && len <= LESSONS_FLIGHT_MAX, ring, lead;

    apr_thread_mutex_lock(f->mutex);
    n = f->sent;
    lessons_flight_slot_write(&f->slot, n, ok, value, len);
    __atomic_store_n(&f->landed, n, __ATOMIC_RELEASE);
    f->flying = 0;
    apr_atomic_inc32(&f->bell[n & 1]);
    ring = apr_atomic_read32(&f->sleepers[n & 1]) > 0;
    /* Those who asked for read n + 1 sleep on the other bell: one of
     * them must wake to lead it (the rest sleep on until it lands).
     */
    lead = f->asking > 0 && !f->leading;
    if (lead) {
        apr_atomic_inc32(&f->bell[(n + 1) & 1]);
        lead = apr_atomic_read32(&f->sleepers[(n + 1) & 1]) > 0;
    }
    apr_thread_mutex_unlock(f->mutex);
    if (ring) {
        lessons_flight_wake(f, &f->bell[n & 1], 1);
    }
    if (lead) {
        lessons_flight_wake(f, &f->bell[(n + 1) & 1], 0);
    }
}

void lessons_flight_leave(lessons_flight_t *f)
{
    apr_thread_mutex_lock(f->mutex);
    if (f->batch > 0) {
        f->batch--;
    }
    /* A leader holding for it: those who came back may be enough now. */
    if (f->leading && f->asking >= lessons_flight_enough(f)) {
        apr_thread_cond_signal(f->full);
    }
    apr_thread_mutex_unlock(f->mutex);
}

void lessons_flight_stats(lessons_flight_t *f, lessons_flight_stats_t *st)
{
    apr_thread_mutex_lock(f->mutex);
    st->reads = f->sent;
    st->leading = f->leading;
    /* The leader waiting out the window and the threads on the bells. */
    st->waiting = f->leading + (int)apr_atomic_read32(&f->sleepers[0])
                  + (int)apr_atomic_read32(&f->sleepers[1]);
    apr_thread_mutex_unlock(f->mutex);
    st->shared = apr_atomic_read64(&f->shared);
}
