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
 *
 * Past the gate, a request asks mod_dbd for a connection.  mod_dbd's
 * pool (apr_reslist) makes a connection while it holds the pool's lock,
 * and every other request of the process that asks for a connection or
 * gives one back waits behind it with no bound: with a database out of
 * reach, libpq's connect_timeout for each host that does not answer,
 * one attempt after another.  So requests ask one at a time here, each
 * waiting until its deadline at most; and while the database is out of
 * reach (the last attempt made no connection), a request with less time
 * left than that attempt took does not try at all.
 */
#ifndef LESSONS_GATE_H
#define LESSONS_GATE_H

#include "apr_pools.h"
#include "apr_time.h"

typedef struct lessons_gate_t lessons_gate_t;

typedef enum {
    LESSONS_GATE_OK = 0,            /* a slot is held: call leave */
    LESSONS_GATE_TIMEOUT,           /* no slot before the deadline */
    LESSONS_GATE_FULL,              /* the database is not answering and
                                     * enough wait already: shed */
    LESSONS_GATE_LATE               /* the last connection attempt made
                                     * none, and took longer than is left */
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

/* The turn to ask mod_dbd for a connection, waiting until deadline at
 * most: OK (then call connect_end), TIMEOUT or LATE.
 */
lessons_gate_e lessons_gate_connect_begin(lessons_gate_t *gate,
                                          apr_time_t deadline);

/* The turn given back: the connection was made (1) or not (0), after
 * took.  A connection made clears what a failure recorded.
 */
void lessons_gate_connect_end(lessons_gate_t *gate, int made,
                              apr_interval_time_t took);

/* 1 while a request has the turn to ask for a connection: giving one
 * back now could wait behind the connection being made.
 */
int lessons_gate_connecting(lessons_gate_t *gate);

/* Give the slot back (a pool cleanup: data is the gate). */
apr_status_t lessons_gate_leave(void *gate);

#endif /* LESSONS_GATE_H */
