/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_introrate.h: how often the introspection endpoint may be asked
 * (issue 55, item 4).  Every token no cache answers is one POST to the
 * provider with the server's client credentials: a client sending
 * random strings would otherwise drive the provider as fast as it can
 * send them, until the provider rate-limits the server's client and
 * every token of every client gets 503.  So the questions have a budget
 * the admin reads in LessonsJWTIntrospectRate:
 *
 *   - the server's: at most rate questions a second, with a burst of one
 *     second's worth (a token bucket);
 *   - each client's: at most client_rate of those a second, also with a
 *     burst of one second's worth.  A client is its address (r->
 *     useragent_ip, which mod_remoteip sets behind a proxy): an IPv4
 *     address, or an IPv6 address's /64 (one host's addresses are one
 *     client); the caller makes those bytes.
 *
 * A question is taken from both buckets or from none: over its own
 * share, a client is told so (429) and asks nothing; within its share
 * but over the server's budget (many clients at once), 503.  Either way
 * with the seconds until a question is there again.  With client_rate
 * below rate, one client, whatever the number of tokens or random
 * strings it sends, leaves rate - client_rate questions a second to the
 * others.
 *
 * Clients are kept in a fixed table (LESSONS_INTRORATE_SETS sets of
 * LESSONS_INTRORATE_WAYS), chosen by a seeded hash of their bytes and
 * compared in full.  A new client takes, in its set, the entry whose
 * bucket is the fullest: a full bucket says nothing a new entry would
 * not (a new client starts full), so only a client that asked a lot
 * lately is remembered, and forgetting one only ever gives it its burst
 * again.  The server's bucket bounds every client however the table
 * goes.
 *
 * The state is plain memory with no pointers (the caller places it: in
 * shared memory for the server, or a process's), and no lock: the
 * caller holds one.  Times are microseconds (apr_time_t), given.
 */
#ifndef LESSONS_INTRORATE_H
#define LESSONS_INTRORATE_H

#include "apr.h"
#include "apr_time.h"

#define LESSONS_INTRORATE_CLIENT_LEN 16     /* an IPv6 address's bytes */
#define LESSONS_INTRORATE_SETS       64
#define LESSONS_INTRORATE_WAYS       4      /* clients searched per set */
#define LESSONS_INTRORATE_MAX        1000000    /* questions a second */

/* The bytes the state takes (a multiple of 8). */
apr_size_t lessons_introrate_size(void);

/* Lay out the state at mem for rate questions a second, client_rate of
 * them per client (1 <= client_rate <= rate <= LESSONS_INTRORATE_MAX),
 * both buckets full at now: anew when fresh, or when what is there was
 * laid out for other rates; else kept as it is (a restart keeps how
 * much each client has used).  seed chooses the clients' sets.  0, or
 * -1 when the rates are refused.
 */
int lessons_introrate_setup(void *mem, apr_uint32_t rate,
                            apr_uint32_t client_rate, apr_uint64_t seed,
                            apr_time_t now, int fresh);

typedef enum {
    LESSONS_INTRORATE_ASK = 0,      /* one question taken: ask */
    LESSONS_INTRORATE_CLIENT_OVER,  /* the client has used its share */
    LESSONS_INTRORATE_SERVER_OVER   /* the server has used its budget */
} lessons_introrate_e;

/* May client (LESSONS_INTRORATE_CLIENT_LEN bytes) ask one question at
 * now?  ASK takes it from both buckets; otherwise nothing is taken and
 * *retry_after (if given) is the whole seconds, at least 1, until the
 * bucket that said no has a question again.
 */
lessons_introrate_e lessons_introrate_take(void *mem,
                                           const unsigned char *client,
                                           apr_time_t now, int *retry_after);

/* The counters since the state was laid out. */
typedef struct {
    apr_uint32_t rate, client_rate;
    apr_uint64_t asked;             /* questions taken */
    apr_uint64_t client_over;       /* refused: a client over its share */
    apr_uint64_t server_over;       /* refused: the server's budget */
} lessons_introrate_stats_t;

void lessons_introrate_stats(const void *mem, lessons_introrate_stats_t *st);

#endif /* LESSONS_INTRORATE_H */
