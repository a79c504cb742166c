/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_watch.h: the client side of LessonsDBTimeout.  The database's
 * own bound (statement_timeout) needs a database that runs: a primary
 * that is frozen (SIGSTOP, a VM paused, a partition that drops nothing
 * but answers nothing) keeps the statement, and libpq waits for its
 * answer without any limit.  A process's watch holds the socket of each
 * connection a request has in use, with the request's deadline; one
 * thread shuts down (shutdown(2), never close: the descriptor stays the
 * connection's) every socket whose deadline has passed, so the blocked
 * call returns at once with the connection lost, and the request is
 * answered 503.  The connection is made again on its next use.
 *
 * The watch holds a duplicate of each socket it is given (F_DUPFD):
 * shutting that down reaches the connection's socket while the
 * connection has it, and only a closed one once the connection has
 * been made again (libpq's PQreset closes the old socket), never
 * another socket that took the old number.  A connection that lives
 * longer than a request (mod_dbd's pooled ones, the lease holder's)
 * keeps its duplicate in its own pool: arming it again is one fstat(2),
 * not a duplicate and a close for every statement.
 */
#ifndef LESSONS_WATCH_H
#define LESSONS_WATCH_H

#include "apr_pools.h"
#include "apr_time.h"

typedef struct lessons_watch_t lessons_watch_t;

/* A watch of slots sockets at most, and its thread, living in p (a
 * child's pool: its cleanup stops the thread).  NULL if it cannot be
 * made; then nothing is watched.
 */
lessons_watch_t *lessons_watch_make(apr_pool_t *p, int slots);

/* Watch fd until deadline: the slot to disarm, or -1 when fd is not a
 * socket to watch (negative) or every slot is taken (the request then
 * has the database's bound alone).  conn_pool: the connection's own
 * pool, which keeps the duplicate until the pool goes or fd is another
 * socket; NULL: a duplicate for this arm alone.  The slot must be
 * disarmed before conn_pool goes (if not, it is never swept).
 */
int lessons_watch_arm(lessons_watch_t *w, apr_pool_t *conn_pool, int fd,
                      apr_time_t deadline);

/* The connection of slot may have been made again: watch fd instead if
 * it is another socket (slot, or -1 as arm says).
 */
int lessons_watch_follow(lessons_watch_t *w, apr_pool_t *conn_pool,
                         int slot, int fd);

/* Stop watching slot (nothing for -1): 1 when its socket was shut
 * down, 0 when not.
 */
int lessons_watch_disarm(lessons_watch_t *w, int slot);

/* How many sockets the watch has shut down since it was made. */
apr_uint64_t lessons_watch_fired(lessons_watch_t *w);

#endif /* LESSONS_WATCH_H */
