/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_gate.h: a bounded, timed wait for one of a process's pooled
 * database connections.  mod_dbd waits for a free connection without
 * any limit, so with a stuck database every worker thread of a process
 * would pile up there and the whole server would stop answering.  The
 * gate lets at most as many requests through as there are connections
 * (so mod_dbd never makes anybody wait) and lets the others wait until
 * their deadline.
 *
 * It turns requests away at once only when the database is not
 * answering: every slot is held and none has been given back for the
 * stall bound.  Then at most max_waiting requests keep waiting (the
 * others leave at once, those already waiting included), so the
 * process keeps threads for the rest of the server.  A database that
 * answers, however busy, sheds nobody: its requests wait their turn.
 */
#ifndef LESSONS_GATE_H
#define LESSONS_GATE_H

#include "apr_pools.h"
#include "apr_time.h"

typedef struct lessons_gate_t lessons_gate_t;

typedef enum {
    LESSONS_GATE_OK = 0,            /* a slot is held: call leave */
    LESSONS_GATE_TIMEOUT,           /* no slot before the deadline */
    LESSONS_GATE_FULL               /* the database is not answering and
                                     * enough wait already: shed */
} lessons_gate_e;

/* A gate with slots places, room for max_waiting waiters while stalled,
 * and the stall bound, living in p (a child's pool).  Returns NULL if
 * the locks cannot be made.
 */
lessons_gate_t *lessons_gate_make(apr_pool_t *p, int slots, int max_waiting,
                                  apr_interval_time_t stall);

/* Change the number of slots (mod_dbd reports DBDMax once it connects). */
void lessons_gate_resize(lessons_gate_t *gate, int slots, int max_waiting);

/* Take a slot, waiting until deadline at most.  *waited (when not
 * NULL) says whether it waited for one (every slot taken on arrival,
 * and not shed at once).
 */
lessons_gate_e lessons_gate_enter(lessons_gate_t *gate, apr_time_t deadline,
                                  int *waited);

/* Give the slot back (a pool cleanup: data is the gate). */
apr_status_t lessons_gate_leave(void *gate);

#endif /* LESSONS_GATE_H */
