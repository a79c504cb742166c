/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_flight.h: one read of a small value (the catalog version)
 * shared by the threads of a process that ask for it together.  Every
 * GET must see each write that committed before it arrived, on any
 * server; so a thread may take the answer of a read only if that read
 * was sent after the thread asked.  Threads that ask while a read is on
 * its way wait for it to land and share the next one; of those, the
 * first to wake sends it.  With 32 clients on one database, most GETs
 * then wait for a read instead of making one.
 *
 * A window spaces the reads: the next is sent no sooner than the window
 * after the last, and whoever asks meanwhile shares it, for at most a
 * window more latency; the rule holds (the read is still sent after they
 * asked).  The next read goes before the window is over once as many ask
 * for it as took the last one (and at least LESSONS_FLIGHT_SHARE): clients
 * that come back together (a pool, a load balancer's connections) share
 * a read without waiting out the window.  So each read comes a window
 * after the last or serves LESSONS_FLIGHT_SHARE asks or more: a process
 * sends at most one per window plus one per LESSONS_FLIGHT_SHARE asks,
 * however its requests arrive (many at once, or one after another).  A
 * request that comes a window or more after the last read sends its own
 * at once.
 *
 * A client that shared a read and will not ask again (its connection
 * closes with this answer: httpd's MaxKeepAliveRequests, Connection:
 * close) leaves: the next read no longer waits for it.  Otherwise each
 * connection that ends costs the clients left a whole window, when the
 * one that left was counted among those expected back.
 */
#ifndef LESSONS_FLIGHT_H
#define LESSONS_FLIGHT_H

#include "apr_pools.h"
#include "apr_time.h"

#define LESSONS_FLIGHT_MAX  128     /* bytes of a shared answer */
#define LESSONS_FLIGHT_SHARE  4     /* a read sent ahead of the window
                                     * serves at least this many: 0.25
                                     * reads per GET at most (issue 19) */

typedef struct lessons_flight_t lessons_flight_t;

typedef enum {
    LESSONS_FLIGHT_SHARED = 0,      /* *value holds a read sent after the
                                     * call began */
    LESSONS_FLIGHT_LEAD,            /* make the read, then land it */
    LESSONS_FLIGHT_ALONE            /* read alone, without landing: the
                                     * read this waited for failed, or the
                                     * deadline came first */
} lessons_flight_e;

/* A flight in p (a child's pool), its reads at least window apart (0:
 * each sent as soon as the one before it lands); NULL if its lock
 * cannot be made.
 */
lessons_flight_t *lessons_flight_make(apr_pool_t *p,
                                      apr_interval_time_t window);

/* Ask for the value, waiting until deadline at most.  SHARED copies it
 * into value (room for LESSONS_FLIGHT_MAX bytes) and sets *len.  After
 * LEAD the caller must call lessons_flight_land, whatever happens.
 */
lessons_flight_e lessons_flight_join(lessons_flight_t *f,
                                     apr_time_t deadline, void *value,
                                     apr_size_t *len);

/* The leader's answer: the value read (len at most LESSONS_FLIGHT_MAX),
 * or NULL when the read failed (those waiting then read alone).
 */
void lessons_flight_land(lessons_flight_t *f, const void *value,
                         apr_size_t len);

/* One who asked for the last read sent will not ask again: the next read
 * waits for one fewer (a leader holding for it sends at once if those
 * who asked are now enough).  Told for a read already followed by
 * another, the next read goes one asker early, never later.
 */
void lessons_flight_leave(lessons_flight_t *f);

/* What the flight has done so far (for tests and the log). */
typedef struct {
    apr_uint64_t reads;             /* reads sent */
    apr_uint64_t shared;            /* answers taken from another's read */
    int waiting;                    /* threads waiting now */
    int leading;                    /* one of them holds the lead,
                                     * waiting out the window */
} lessons_flight_stats_t;

void lessons_flight_stats(lessons_flight_t *f, lessons_flight_stats_t *st);

#endif /* LESSONS_FLIGHT_H */
