/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_tokencache.h: a per-process cache of verified tokens (issue 7).
 * An RS256 or ES256 token costs a public-key signature check per
 * request; the cache lets each distinct token pay that once per
 * process.
 *
 * An entry is keyed by the verification policy's fingerprint plus the
 * whole token string, and both are compared in full on a hit (never a
 * hash alone).  Only tokens that verified OK are stored, so a bad token
 * can neither poison the cache nor evict a good entry.  The cache stores
 * and finds; deciding (the exp/nbf/iat check on every hit) is
 * lessons_token_verify_cached's job, in lessons_token.c.
 *
 * Thread-safe: one mutex, held only to find, link or unlink an entry.
 */
#ifndef LESSONS_TOKENCACHE_H
#define LESSONS_TOKENCACHE_H

#include "apr_pools.h"

#include <jansson.h>

/* Bytes of a policy fingerprint (SHA-256). */
#define LESSONS_TOKENCACHE_FP_LEN   32

/* The largest max_entries accepted (the bucket table is sized from it). */
#define LESSONS_TOKENCACHE_MAX      (1u << 22)

typedef struct lessons_tokencache_t lessons_tokencache_t;

/* The largest payload an entry keeps (decoded JSON bytes): a token
 * whose payload is longer is still verified, every time, but never
 * stored, so one entry stays below about LESSONS_TOKEN_MAX_LEN plus this.
 */
#define LESSONS_TOKENCACHE_PAYLOAD_MAX  4096

/* What a verification found and a hit must re-check: the time claims as
 * the JSON numbers were (so a hit compares exactly as a full verify),
 * the subject, and the verified claims: as decoded once (parsed), or
 * else as payload text that a hit decodes again (issue 9).
 *
 * parsed is shared by every request that hits the entry, in every
 * thread: it is read, never changed (jansson's reference counts are
 * atomic; its getters do not write).  A request that must change claims
 * changes a json_deep_copy of them.
 */
typedef struct {
    const char *subject;            /* sub, or NULL when the token has none */
    const char *payload;            /* the decoded payload JSON (not NUL-
                                     * terminated when stored; a copy from
                                     * get is), or NULL; not kept when
                                     * parsed is */
    apr_size_t payload_len;         /* its bytes; 0 when payload is NULL */
    json_t *parsed;                 /* the payload's object, read-only: put
                                     * takes a reference of its own, get
                                     * hands one to the caller (who
                                     * releases it); NULL when not kept */
    double exp;                     /* always present in a verified token */
    double nbf;
    double iat;
    int has_nbf;
    int has_iat;
} lessons_tokencache_claims_t;

typedef struct {
    apr_uint64_t hits;              /* lookups that found an entry */
    apr_uint64_t misses;            /* lookups that found none */
    apr_uint64_t evictions;         /* entries dropped to keep the bound */
    apr_uint64_t expired;           /* entries dropped past exp + leeway */
    apr_size_t entries;             /* entries held now */
    apr_size_t max_entries;
} lessons_tokencache_stats_t;

/* A cache of at most max_entries tokens, for one process: make it from
 * the child's pool (child_init), which frees every entry when it goes.
 * Entries are malloc'ed one by one, each at most the size of its token,
 * subject and payload plus a small header.  NULL when max_entries is 0
 * or above LESSONS_TOKENCACHE_MAX, or the mutex cannot be made: callers
 * then verify without a cache.
 */
lessons_tokencache_t *lessons_tokencache_make(apr_pool_t *p,
                                              apr_size_t max_entries);

/* Look up (fp, token).  On a hit returns 1, fills *claims (the subject
 * and the payload copied into p, NUL-terminated, so they outlive the
 * entry; or a reference of the caller's own to the parsed claims, which
 * it must json_decref) and makes the entry the most recently used.  An entry
 * whose expires (exp + leeway, given at put) is at or before now is
 * dropped as it is found, but still reported, so that the caller's own
 * check refuses it with the same code a full verify gives.  Returns 0 on
 * a miss, and for a NULL cache or token.
 */
int lessons_tokencache_get(lessons_tokencache_t *c, apr_pool_t *p,
                           const unsigned char *fp, const char *token,
                           apr_size_t len, double now,
                           lessons_tokencache_claims_t *claims);

/* Store a token that verified OK under the policy whose fingerprint is
 * fp, with its claims (copied; parsed, when given, referenced and then
 * never changed by anyone, and the payload text not kept) and expires,
 * exp plus the policy's leeway: the entry never outlives it.  The least recently used entry
 * goes when the cache is full.  An entry already there is kept.  Does
 * nothing when the cache is NULL, memory runs out, or the payload is
 * longer than LESSONS_TOKENCACHE_PAYLOAD_MAX (payload_len is the
 * measure also when only parsed is kept).
 */
void lessons_tokencache_put(lessons_tokencache_t *c, const unsigned char *fp,
                            const char *token, apr_size_t len,
                            const lessons_tokencache_claims_t *claims,
                            double expires);

/* Be told of the counters after every lookup, with the cache's lock
 * held (calls never overlap): for publishing them where other
 * processes read them (lessons_metrics).  fn must not call back into
 * the cache.  NULL stops it.
 */
typedef void (*lessons_tokencache_watch_fn)(
    void *baton, const lessons_tokencache_stats_t *now);
void lessons_tokencache_watch(lessons_tokencache_t *c,
                              lessons_tokencache_watch_fn fn, void *baton);

/* Counters, for tests and the benchmark; all zero for a NULL cache. */
void lessons_tokencache_stats(lessons_tokencache_t *c,
                              lessons_tokencache_stats_t *stats);

#endif /* LESSONS_TOKENCACHE_H */
