/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_gate.c: counted slots with a timed wait (APR mutex and
 * condition variable), one gate per server per process.
 */
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"

#include "lessons_gate.h"

struct lessons_gate_t {
    apr_thread_mutex_t *mutex;
    apr_thread_cond_t *cond;
    int slots;                      /* requests that may hold a connection */
    int max_waiting;                /* requests that may wait for one */
    int busy;
    int waiting;
};

lessons_gate_t *lessons_gate_make(apr_pool_t *p, int slots, int max_waiting)
{
    lessons_gate_t *gate = apr_pcalloc(p, sizeof(*gate));

    if (apr_thread_mutex_create(&gate->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS
        || apr_thread_cond_create(&gate->cond, p) != APR_SUCCESS) {
        return NULL;
    }
    gate->slots = slots > 0 ? slots : 1;
    gate->max_waiting = max_waiting > 0 ? max_waiting : 0;
    return gate;
}

void lessons_gate_resize(lessons_gate_t *gate, int slots, int max_waiting)
{
    apr_thread_mutex_lock(gate->mutex);
    gate->slots = slots > 0 ? slots : 1;
    gate->max_waiting = max_waiting > 0 ? max_waiting : 0;
    apr_thread_cond_broadcast(gate->cond);
    apr_thread_mutex_unlock(gate->mutex);
}

lessons_gate_e lessons_gate_enter(lessons_gate_t *gate, apr_time_t deadline)
{
    lessons_gate_e rc = LESSONS_GATE_OK;

    apr_thread_mutex_lock(gate->mutex);
    if (gate->busy >= gate->slots) {
        if (gate->waiting >= gate->max_waiting) {
            rc = LESSONS_GATE_FULL;
        }
        else {
            gate->waiting++;
            while (gate->busy >= gate->slots) {
                apr_time_t now = apr_time_now();

                if (now >= deadline) {
                    rc = LESSONS_GATE_TIMEOUT;
                    break;
                }
                apr_thread_cond_timedwait(gate->cond, gate->mutex,
                                          deadline - now);
            }
            gate->waiting--;
        }
    }
    if (rc == LESSONS_GATE_OK) {
        gate->busy++;
    }
    apr_thread_mutex_unlock(gate->mutex);
    return rc;
}

apr_status_t lessons_gate_leave(void *data)
{
    lessons_gate_t *gate = data;

    apr_thread_mutex_lock(gate->mutex);
    gate->busy--;
    apr_thread_cond_signal(gate->cond);
    apr_thread_mutex_unlock(gate->mutex);
    return APR_SUCCESS;
}
