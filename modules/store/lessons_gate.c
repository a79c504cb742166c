/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_gate.c: counted slots with a timed wait (APR mutex and
 * condition variable), one gate per server per process.  The database
 * counts as answering while slots come back: the gate remembers when it
 * last made progress (a slot given back, or the gate filling up).  The
 * turn to ask mod_dbd for a connection is a flag under the same mutex,
 * with a condition of its own.
 */
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"

#include "store/lessons_gate.h"

struct lessons_gate_t {
    apr_thread_mutex_t *mutex;
    apr_thread_cond_t *cond;
    int slots;                      /* requests that may hold a connection */
    int max_waiting;                /* requests that may wait while stalled */
    apr_interval_time_t stall;      /* no progress this long: stalled */
    apr_time_t progress;            /* a slot given back, or the gate
                                     * filled up */
    int busy;
    int waiting;
    apr_thread_cond_t *turn;        /* the turn to connect came back */
    int connecting;                 /* a request has the turn */
    apr_interval_time_t failed;     /* the last attempt made no connection
                                     * after this long; 0: it made one */
};

lessons_gate_t *lessons_gate_make(apr_pool_t *p, int slots, int max_waiting,
                                  apr_interval_time_t stall)
{
    lessons_gate_t *gate = apr_pcalloc(p, sizeof(*gate));

    if (apr_thread_mutex_create(&gate->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS
        || apr_thread_cond_create(&gate->cond, p) != APR_SUCCESS
        || apr_thread_cond_create(&gate->turn, p) != APR_SUCCESS) {
        return NULL;
    }
    gate->slots = slots > 0 ? slots : 1;
    gate->max_waiting = max_waiting > 0 ? max_waiting : 0;
    gate->stall = stall > 0 ? stall : 0;
    return gate;
}

void lessons_gate_resize(lessons_gate_t *gate, int slots, int max_waiting)
{
    apr_thread_mutex_lock(gate->mutex);
    gate->slots = slots > 0 ? slots : 1;
    gate->max_waiting = max_waiting > 0 ? max_waiting : 0;
    gate->progress = apr_time_now();    /* busy may now exceed slots */
    apr_thread_cond_broadcast(gate->cond);
    apr_thread_mutex_unlock(gate->mutex);
}

/* Every slot held, and none given back for the stall bound.  Lock held. */
static int gate_stalled(const lessons_gate_t *gate, apr_time_t now)
{
    return gate->busy >= gate->slots && now - gate->progress >= gate->stall;
}

lessons_gate_e lessons_gate_enter(lessons_gate_t *gate, apr_time_t deadline,
                                  int *waited)
{
    lessons_gate_e rc = LESSONS_GATE_OK;

    if (waited) {
        *waited = 0;
    }
    apr_thread_mutex_lock(gate->mutex);
    if (gate->busy >= gate->slots) {
        if (gate->waiting >= gate->max_waiting
            && gate_stalled(gate, apr_time_now())) {
            rc = LESSONS_GATE_FULL;
        }
        else {
            if (waited) {
                *waited = 1;
            }
            gate->waiting++;
            while (gate->busy >= gate->slots) {
                apr_time_t now = apr_time_now(), wake = deadline;

                if (now >= deadline) {
                    rc = LESSONS_GATE_TIMEOUT;
                    break;
                }
                /* Past the room, a waiter leaves once the gate stalls,
                 * rather than holding its thread until the deadline.
                 */
                if (gate->waiting > gate->max_waiting) {
                    if (gate_stalled(gate, now)) {
                        rc = LESSONS_GATE_FULL;
                        break;
                    }
                    if (gate->progress + gate->stall < wake) {
                        wake = gate->progress + gate->stall;
                    }
                }
                apr_thread_cond_timedwait(gate->cond, gate->mutex,
                                          wake > now ? wake - now : 1);
            }
            gate->waiting--;
        }
    }
    if (rc == LESSONS_GATE_OK && ++gate->busy == gate->slots) {
        gate->progress = apr_time_now();    /* full from now on */
    }
    apr_thread_mutex_unlock(gate->mutex);
    return rc;
}

apr_status_t lessons_gate_leave(void *data)
{
    lessons_gate_t *gate = data;

    apr_thread_mutex_lock(gate->mutex);
    gate->busy--;
    gate->progress = apr_time_now();
    apr_thread_cond_signal(gate->cond);
    apr_thread_mutex_unlock(gate->mutex);
    return APR_SUCCESS;
}

lessons_gate_e lessons_gate_connect_begin(lessons_gate_t *gate,
                                          apr_time_t deadline)
{
    lessons_gate_e rc = LESSONS_GATE_OK;
    apr_time_t now;

    apr_thread_mutex_lock(gate->mutex);
    while (gate->connecting) {
        now = apr_time_now();
        if (now >= deadline) {
            rc = LESSONS_GATE_TIMEOUT;
            break;
        }
        apr_thread_cond_timedwait(gate->turn, gate->mutex, deadline - now);
    }
    if (rc == LESSONS_GATE_OK && gate->failed > 0
        && deadline - apr_time_now() < gate->failed) {
        rc = LESSONS_GATE_LATE;
        apr_thread_cond_signal(gate->turn);     /* pass the turn on */
    }
    if (rc == LESSONS_GATE_OK) {
        gate->connecting = 1;
    }
    apr_thread_mutex_unlock(gate->mutex);
    return rc;
}

void lessons_gate_connect_end(lessons_gate_t *gate, int made,
                              apr_interval_time_t took)
{
    apr_thread_mutex_lock(gate->mutex);
    gate->connecting = 0;
    gate->failed = made ? 0 : (took > 0 ? took : 1);
    apr_thread_cond_signal(gate->turn);
    apr_thread_mutex_unlock(gate->mutex);
}

int lessons_gate_connecting(lessons_gate_t *gate)
{
    int connecting;

    apr_thread_mutex_lock(gate->mutex);
    connecting = gate->connecting;
    apr_thread_mutex_unlock(gate->mutex);
    return connecting;
}
