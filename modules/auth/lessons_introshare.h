/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_introshare.h: introspection answers shared by a server's
 * processes (issue 44, part 3), as key sets are (lessons_keyshare).  One
 * block of shared memory, made before the fork and kept across restarts,
 * holds a fixed number of entries: the 32-byte digest an answer is keyed
 * by (lessons_introspect_key: endpoint, client, token), until when it
 * may be served, when it was stored, and the answer as compact JSON of
 * at most a fixed number of bytes.  Never the token: only its digest.
 *
 * The table is set-associative: a key's first 8 bytes (a digest's, so
 * evenly spread) choose a set of LESSONS_INTROSHARE_WAYS entries, and
 * only that set is searched.  A new answer takes, in its set, the
 * entry of the same key, else an empty or expired one, else the oldest
 * "active": false answer, else (an active answer only) the oldest
 * stored.  An inactive answer never takes an active one's place (issue
 * 55, item 4): a client sending random strings fills, at most, the
 * room no held token uses, and a known-good token keeps being served
 * from the table while it floods.  A key is compared in full: two keys
 * in one set never serve each other's answers.
 *
 * The same block holds the server's budget of questions to the
 * provider (lessons_introrate: LessonsJWTIntrospectRate), under the
 * same lock, so that the bound is the server's, not each process's.
 *
 * Every lookup and store is made under one cross-process lock, held
 * only to search a set and copy at most one answer.  The unit knows
 * times (seconds), bytes and the lock, not httpd, JSON or tokens.
 */
#ifndef LESSONS_INTROSHARE_H
#define LESSONS_INTROSHARE_H

#include "apr_global_mutex.h"
#include "apr_pools.h"

#include "auth/lessons_introrate.h"

#define LESSONS_INTROSHARE_KEY_LEN  32      /* SHA-256 */
#define LESSONS_INTROSHARE_WAYS     8       /* entries searched per key */
#define LESSONS_INTROSHARE_MAX      (1u << 20)  /* the most entries */

typedef struct lessons_introshare lessons_introshare_t;

/* The bytes a table of entries entries (rounded up to whole sets) of
 * cap answer bytes each needs; 0 when entries is 0 or over
 * LESSONS_INTROSHARE_MAX, or cap is 0 or over 1 MiB.
 */
apr_size_t lessons_introshare_size(apr_uint32_t entries, apr_size_t cap);

/* The questions' budget the table holds (lessons_introrate_setup). */
typedef struct {
    apr_uint32_t rate;              /* questions a second, the server's */
    apr_uint32_t client_rate;       /* ... and one client's */
    apr_uint64_t seed;              /* chooses the clients' sets */
    apr_time_t now;                 /* buckets laid out anew are full
                                     * from then */
} lessons_introshare_budget_t;

/* The table at base (size bytes, from lessons_introshare_size) in p:
 * laid out anew when fresh or when what is there was laid out for
 * another shape, else kept as it is (a restart); its budget anew too
 * then, or when its rates changed.  lock guards it in every process
 * (apr_global_mutex_child_init in children).  NULL when the shape or
 * the rates are refused or size is too small.
 */
lessons_introshare_t *lessons_introshare_attach(
    void *base, apr_size_t size, apr_uint32_t entries, apr_size_t cap,
    const lessons_introshare_budget_t *budget, int fresh,
    apr_global_mutex_t *lock, apr_pool_t *p);

/* May client (LESSONS_INTRORATE_CLIENT_LEN bytes) ask the provider one
 * question at now (microseconds)?  lessons_introrate_take under the
 * lock: a lessons_introrate_e, or -1 when the lock failed.
 */
int lessons_introshare_take(lessons_introshare_t *t,
                            const unsigned char *client, apr_time_t now,
                            int *retry_after);

/* The answer stored under key, served while now < its until and now <
 * its time of storing + max_age (seconds: the asking section's bound,
 * which may be lower than the one it was stored under, by another
 * section or before a reload).  On a hit, 1, with *answer (in p,
 * NUL-ended), *len, *until and *stored (when it was stored); an expired
 * entry is emptied as it is found (one only older than max_age is kept
 * for askers of a longer bound).  0: none.  -1: the lock failed.
 */
int lessons_introshare_get(lessons_introshare_t *t,
                           const unsigned char key[LESSONS_INTROSHARE_KEY_LEN],
                           apr_int64_t now, apr_int64_t max_age,
                           apr_pool_t *p, const char **answer,
                           apr_size_t *len, apr_int64_t *until,
                           apr_int64_t *stored);

typedef enum {
    LESSONS_INTROSHARE_STORED = 0,  /* in an empty, expired or the same
                                     * key's entry */
    LESSONS_INTROSHARE_EVICTED,     /* in place of the set's oldest
                                     * answer, still live */
    LESSONS_INTROSHARE_TOO_BIG,     /* over the cap: not shared (an older
                                     * answer of the key is dropped) */
    LESSONS_INTROSHARE_NOT_KEPT,    /* until is not after now */
    LESSONS_INTROSHARE_CROWDED,     /* inactive, and its set holds live
                                     * active answers only: not kept */
    LESSONS_INTROSHARE_LOCK_FAILED
} lessons_introshare_put_e;

/* Store answer (len bytes) under key at now, to be served until until
 * (seconds, > now); inactive: it is an "active": false answer, which
 * never takes an active answer's place.
 */
lessons_introshare_put_e lessons_introshare_put(
    lessons_introshare_t *t,
    const unsigned char key[LESSONS_INTROSHARE_KEY_LEN], apr_int64_t now,
    apr_int64_t until, const char *answer, apr_size_t len, int inactive);

/* The table's counters, for the server (every process's). */
typedef struct {
    apr_uint32_t entries;           /* the table's entries */
    apr_size_t cap;                 /* bytes an answer may have */
    apr_uint64_t hits, misses;
    apr_uint64_t stored;            /* answers stored */
    apr_uint64_t evicted;           /* live answers dropped for room */
    apr_uint64_t too_big;           /* answers over cap, not shared */
    apr_uint64_t held;              /* entries holding an answer now
                                     * (expired ones not yet reused
                                     * among them) */
    apr_uint64_t crowded;           /* inactive answers not kept: no room
                                     * but active answers' */
    lessons_introrate_stats_t budget;   /* the questions' budget */
} lessons_introshare_stats_t;

/* Copy the counters into *st under the lock.  APR_SUCCESS, or the
 * lock's failure.
 */
apr_status_t lessons_introshare_stats(lessons_introshare_t *t,
                                      lessons_introshare_stats_t *st);

#endif /* LESSONS_INTROSHARE_H */
