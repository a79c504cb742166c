/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_metrics.h: the server's counters, whole-server, in one block
 * of shared memory that every process of the server maps (made before
 * the processes are forked, kept across restarts).  As httpd's
 * scoreboard does, each process writes only its own slot, so the
 * threads of one process are the only writers of a cache line, and a
 * reader (the lessons-metrics handler, mod_status) sums the slots.
 *
 * A slot's counters outlive its process: the next process to take the
 * slot adds to them, so a total never goes down while the server runs.
 * Gauges (bytes held, keys in a set) are the live processes' only.
 *
 * The unit knows memory, numbers and the text formats, not httpd: the
 * caller makes the memory (apr_shm) and says which pids are alive.
 */
#ifndef LESSONS_METRICS_H
#define LESSONS_METRICS_H

#include "apr_pools.h"
#include "apr_time.h"

/* What a request did, by operation: the eight of the API, and the rest
 * (no such resource, a method the resource does not take, OPTIONS).
 */
typedef enum {
    LESSONS_OP_LIST = 0,
    LESSONS_OP_GET,
    LESSONS_OP_BEGINNER,
    LESSONS_OP_ADVANCED,
    LESSONS_OP_LEVEL,
    LESSONS_OP_CREATE,
    LESSONS_OP_UPDATE,
    LESSONS_OP_DELETE,
    LESSONS_OP_OTHER,
    LESSONS_OP_COUNT
} lessons_metrics_op_e;

/* Status classes: 1xx and 2xx count as 2xx (the API sends no 1xx). */
#define LESSONS_CLASS_COUNT 4

/* Why the gate refused a request. */
typedef enum {
    LESSONS_REFUSED_NO_TOKEN = 0,   /* none, or another scheme: 401 */
    LESSONS_REFUSED_BAD_HEADER,     /* malformed Authorization: 400 */
    LESSONS_REFUSED_MALFORMED,      /* the token itself: 401 from here */
    LESSONS_REFUSED_ALGORITHM,
    LESSONS_REFUSED_CRIT,
    LESSONS_REFUSED_SIGNATURE,
    LESSONS_REFUSED_CLAIMS,
    LESSONS_REFUSED_NO_EXP,
    LESSONS_REFUSED_EXPIRED,
    LESSONS_REFUSED_NOT_YET_VALID,
    LESSONS_REFUSED_ISSUER,
    LESSONS_REFUSED_AUDIENCE,
    LESSONS_REFUSED_TYPE,
    LESSONS_REFUSED_IAT,
    LESSONS_REFUSED_UNKNOWN_KID,
    LESSONS_REFUSED_UNKNOWN_ISSUER, /* iss names no issuer of the section */
    LESSONS_REFUSED_USER_CLAIM,     /* the user claim is no user name */
    LESSONS_REFUSED_OTHER,          /* a token refusal not named above */
    LESSONS_REFUSED_SCOPE,          /* Require jwt-claim: 403 */
    LESSONS_REFUSED_NO_KEYS,        /* no key set yet: 503 */
    LESSONS_REFUSED_DPOP,           /* a DPoP proof, or its absence, or a
                                     * bound token as a bearer token */
    LESSONS_REFUSED_COUNT
} lessons_metrics_refusal_e;

/* Database faults, by what they were. */
typedef enum {
    LESSONS_FAULT_NO_CONNECTION = 0,/* mod_dbd gave none */
    LESSONS_FAULT_UNAVAILABLE,      /* down, unreachable, connection lost */
    LESSONS_FAULT_READONLY,
    LESSONS_FAULT_FULL,
    LESSONS_FAULT_MOVED,
    LESSONS_FAULT_NO_SCHEMA,
    LESSONS_FAULT_STALE,            /* the schema changed underneath */
    LESSONS_FAULT_OUTCOME_UNKNOWN,  /* lost during a write's commit */
    LESSONS_FAULT_ERROR,            /* anything else */
    LESSONS_FAULT_COUNT
} lessons_metrics_fault_e;

/* Every number a slot holds, one index each. */
typedef enum {
    LESSONS_M_REQUESTS = 0,         /* + op * CLASS_COUNT + class */
    LESSONS_M_CACHE_HITS = LESSONS_M_REQUESTS
                           + LESSONS_OP_COUNT * LESSONS_CLASS_COUNT,
    LESSONS_M_CACHE_MISSES,
    LESSONS_M_CACHE_EVICTIONS,
    LESSONS_M_TOKEN_HITS,
    LESSONS_M_TOKEN_MISSES,
    LESSONS_M_REFUSED,              /* + reason */
    LESSONS_M_DB_WAITS = LESSONS_M_REFUSED + LESSONS_REFUSED_COUNT,
    LESSONS_M_DB_TIMEOUTS,
    LESSONS_M_DB_SHEDS,
    LESSONS_M_DB_FAULTS,            /* + fault */
    LESSONS_M_WRITES = LESSONS_M_DB_FAULTS + LESSONS_FAULT_COUNT,
                                    /* + 0 create, 1 update, 2 delete */
    LESSONS_M_KEYS = LESSONS_M_WRITES + 3,
                                    /* Idempotency-Key: + outcome */
    LESSONS_M_CATALOG = LESSONS_M_KEYS + 5,
                                    /* a GET's catalogue version: + 0 a
                                     * statement of its own (or led for
                                     * its process), 1 a read lease's */
    LESSONS_M_COUNTERS = LESSONS_M_CATALOG + 2,
    /* Gauges: this process's value now, not added up over its life. */
    LESSONS_M_CACHE_BYTES = LESSONS_M_COUNTERS,
    LESSONS_M_CACHE_ENTRIES,
    LESSONS_M_COUNT
} lessons_metrics_id_e;

/* What became of a create's Idempotency-Key (LESSONS_M_KEYS + it). */
typedef enum {
    LESSONS_KEY_OUTCOME_STORED = 0, /* a create committed with its key */
    LESSONS_KEY_OUTCOME_REPLAYED,   /* a retry given the first answer */
    LESSONS_KEY_OUTCOME_REUSED,     /* the key with another request: 422 */
    LESSONS_KEY_OUTCOME_IN_FLIGHT,  /* the first still running: 409 */
    LESSONS_KEY_OUTCOME_REFUSED     /* no key (its form, PUT, DELETE): 400 */
} lessons_metrics_key_e;

/* Key sources (keys URLs) a block tells apart; more are not counted. */
#define LESSONS_METRICS_SOURCES     16
#define LESSONS_METRICS_SOURCE_LEN  512     /* a source's name, NUL incl. */

/* What a slot keeps of each key source. */
typedef enum {
    LESSONS_SRC_FAILURES = 0,       /* counter: fetches that failed */
    LESSONS_SRC_REFETCHES,          /* counter: refetches for an unknown
                                     * kid */
    LESSONS_SRC_FETCHED,            /* gauge (this one and the rest):
                                     * when this process last fetched a
                                     * good set (apr_time_t) */
    LESSONS_SRC_KEYS,               /* gauge: keys in its set */
    LESSONS_SRC_INSTALLED,          /* gauge: when the set it uses was
                                     * taken into use (apr_time_t); 0:
                                     * it has none */
    LESSONS_SRC_NO_SET,             /* gauge: 1 when its fetches have
                                     * ended and it has no set */
    LESSONS_SRC_COUNT
} lessons_metrics_src_e;

typedef struct lessons_metrics_t lessons_metrics_t;
typedef struct lessons_metrics_slot_t lessons_metrics_slot_t;

/* Bytes of a block with this many slots. */
apr_size_t lessons_metrics_size(int slots);

/* A block in mem (size bytes, from lessons_metrics_size): a new one when
 * fresh is set (every number zero, started now), else the one already
 * there (a restart).  NULL when mem is NULL or too small for slots.
 */
lessons_metrics_t *lessons_metrics_attach(void *mem, apr_size_t size,
                                          int slots, int fresh,
                                          apr_time_t now);

/* A slot for process pid: a free one, else one whose owner is dead
 * (alive(baton, owner) says 0).  Its counters go on from where the
 * last owner left them; its gauges start at zero.  NULL when every
 * slot has a live owner: that process counts nothing.
 */
lessons_metrics_slot_t *lessons_metrics_claim(lessons_metrics_t *m,
                                              apr_uint32_t pid,
                                              int (*alive)(void *baton,
                                                           apr_uint32_t pid),
                                              void *baton);

/* The process is ending: its gauges go to zero, its counters stay. */
void lessons_metrics_release(lessons_metrics_slot_t *slot);

/* Count n more (atomically: the threads of a process share a slot).
 * A NULL slot counts nothing, so callers need not ask.
 */
void lessons_metrics_add(lessons_metrics_slot_t *slot,
                         lessons_metrics_id_e id, apr_uint64_t n);

/* Set a gauge of the slot. */
void lessons_metrics_set(lessons_metrics_slot_t *slot,
                         lessons_metrics_id_e id, apr_uint64_t value);

/* The request counter of an operation and a final HTTP status. */
lessons_metrics_id_e lessons_metrics_request_id(lessons_metrics_op_e op,
                                                int status);

/* A key source's index by name, taken if new (in the parent, before the
 * processes start: not thread-safe).  A name kept from an earlier
 * configuration keeps its index and counters.  When every index is
 * taken, one whose name is not in keep (the names of this
 * configuration, nkeep of them) is cleared and reused; -1 when there is
 * none (that source is not counted) or the name is too long.
 */
int lessons_metrics_source(lessons_metrics_t *m, const char *name,
                           const char *const *keep, int nkeep);

void lessons_metrics_source_add(lessons_metrics_slot_t *slot, int source,
                                lessons_metrics_src_e what, apr_uint64_t n);
void lessons_metrics_source_set(lessons_metrics_slot_t *slot, int source,
                                lessons_metrics_src_e what,
                                apr_uint64_t value);

/* The sum over every slot (gauges: over live slots only), and the
 * sources' figures, as one snapshot for the formats below.
 */
typedef struct {
    apr_uint64_t v[LESSONS_M_COUNT];
    int processes;                  /* slots with a live owner */
    int slots;
    apr_time_t started;             /* when the block was made */
    struct {
        const char *name;           /* NULL: index unused */
        apr_uint64_t failures, refetches;
        apr_time_t last_fetched;    /* newest good fetch of any process,
                                     * 0: none yet */
        apr_time_t oldest_in_use;   /* the oldest set a live process
                                     * uses was fetched then; 0: none */
        apr_uint64_t keys;          /* keys in the newest set */
        int held;                   /* some live process holds a set,
                                     * and none has ended its fetches
                                     * without one */
        apr_time_t installed;       /* the newest set a live process
                                     * holds was taken into use then; 0:
                                     * none holds one */
    } src[LESSONS_METRICS_SOURCES];
} lessons_metrics_sum_t;

void lessons_metrics_read(lessons_metrics_t *m,
                          int (*alive)(void *baton, apr_uint32_t pid),
                          void *baton, lessons_metrics_sum_t *sum);

/* The Prometheus text exposition format (version 0.0.4), in p: every
 * family with HELP and TYPE, every label combination (zeros included),
 * the sources named in names (count of them) only.  now gives the sets'
 * ages.
 */
const char *lessons_metrics_prometheus(apr_pool_t *p,
                                       const lessons_metrics_sum_t *sum,
                                       const char *const *names, int count,
                                       apr_time_t now, apr_size_t *len);

/* The read lease's figures (LessonsDBLease), as the handler reads them
 * from the server's lease block now.
 */
#define LESSONS_METRICS_LEASE_WAITS 7
typedef struct {
    int valid;                      /* 0 or 1 */
    int listening;                  /* 0 or 1 */
    apr_interval_time_t left;       /* until the lease ends */
    apr_interval_time_t run;        /* renewed without a break, 0: not */
    apr_interval_time_t length;     /* the directive's */
    int others;                     /* other servers with a lease in the
                                     * holder's last list, -1: no list
                                     * yet (no sample) */
    apr_uint64_t alone_writes;      /* writes that made no check: no
                                     * other lease listed */
    apr_uint64_t told_writes;       /* writes that made no check: each
                                     * listed server told by datagram */
    apr_uint64_t held_writes;       /* writes that made no check and
                                     * told no one: every listed server
                                     * held its drop */
    /* How long writes took on the lease after their commit: counts by
     * upper bound (microseconds, inclusive; the last count has none),
     * not summed up, and their sum.
     */
    apr_uint64_t waits[LESSONS_METRICS_LEASE_WAITS];
    const apr_interval_time_t *wait_bounds;
    apr_interval_time_t waited;
} lessons_metrics_lease_t;

/* Those figures in the same format, to follow lessons_metrics_
 * prometheus's text.  The gauges are the server's state now; the
 * counters are kept in the lease block, and start again with it.
 */
const char *lessons_metrics_lease_prometheus(apr_pool_t *p,
                                             const lessons_metrics_lease_t
                                             *lease);

/* The same figures, fewer of them, as mod_status's "Key: value" lines
 * (its ?auto form).
 */
const char *lessons_metrics_status_auto(apr_pool_t *p,
                                        const lessons_metrics_sum_t *sum);

/* Labels, for the formats and the tests. */
const char *lessons_metrics_op_name(lessons_metrics_op_e op);
const char *lessons_metrics_refusal_name(lessons_metrics_refusal_e reason);
const char *lessons_metrics_fault_name(lessons_metrics_fault_e fault);

#endif /* LESSONS_METRICS_H */
