/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_tokencache.c: a hash table of verified tokens with an LRU
 * list, under one mutex.  Each entry is one malloc (header, token bytes,
 * subject, payload) or two (the payload parsed once, instead of its
 * text), so the bound on entries bounds memory, and a dropped entry
 * really goes rather than waiting for a pool to be cleared.  Frees and
 * mallocs happen outside the lock; under it only links change, and a
 * hit takes a reference to the parsed claims.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "apr_general.h"
#include "apr_ring.h"
#include "apr_strings.h"
#include "apr_thread_mutex.h"
#include "apr_time.h"

#include "auth/lessons_tokencache.h"

typedef struct lessons_tc_entry_t lessons_tc_entry_t;

struct lessons_tc_entry_t {
    lessons_tc_entry_t *chain;          /* next in the bucket */
    APR_RING_ENTRY(lessons_tc_entry_t) lru; /* newest first */
    apr_uint64_t hash;
    unsigned char fp[LESSONS_TOKENCACHE_FP_LEN];
    double expires;                     /* exp + leeway */
    lessons_tokencache_claims_t claims; /* subject, payload point into data;
                                         * parsed is the entry's reference */
    apr_size_t token_len;
    apr_size_t subject_len;
    char data[];                        /* token, subject, NUL, payload */
};

APR_RING_HEAD(lessons_tc_ring, lessons_tc_entry_t);

struct lessons_tokencache_t {
    apr_thread_mutex_t *mutex;
    lessons_tc_entry_t **buckets;
    apr_size_t mask;                    /* buckets - 1, a power of two */
    apr_uint64_t seed;                  /* spreads buckets per process */
    struct lessons_tc_ring lru;         /* hits to the head, evict the tail */
    lessons_tokencache_stats_t stats;
    lessons_tokencache_watch_fn watch;  /* told of stats, lock held */
    void *watch_baton;
};

/* FNV-1a over the token, seeded, then a final mix.  It only picks the
 * bucket: the same token under two policies shares one, and a hit always
 * compares fingerprint and token in full.  Only verified tokens are ever
 * stored, so nobody without a signing key can crowd a bucket; the
 * per-process seed keeps which tokens share one unguessable anyway.
 */
static apr_uint64_t lessons_tc_hash(apr_uint64_t seed, const char *token,
                                    apr_size_t len)
{
    apr_uint64_t h = APR_UINT64_C(14695981039346656037) ^ seed;
    apr_size_t i;

    for (i = 0; i < len; i++) {
        h = (h ^ (unsigned char)token[i]) * APR_UINT64_C(1099511628211);
    }
    h ^= h >> 30;
    h *= APR_UINT64_C(0xbf58476d1ce4e5b9);
    h ^= h >> 27;
    h *= APR_UINT64_C(0x94d049bb133111eb);
    h ^= h >> 31;
    return h;
}

/* Fingerprint and token compared in full, in constant time for a given
 * length: how far a guess matches a cached token must not show in the
 * answer's timing.  (No shortcut on the hash: at most about one entry
 * per bucket, and this way the comparison is what tests exercise.)
 */
static int lessons_tc_match(const lessons_tc_entry_t *e,
                            const unsigned char *fp, const char *token,
                            apr_size_t len)
{
    return e->token_len == len
           && CRYPTO_memcmp(e->fp, fp, LESSONS_TOKENCACHE_FP_LEN) == 0
           && CRYPTO_memcmp(e->data, token, len) == 0;
}

/* Under the lock: the slot that points at the matching entry (or at
 * NULL, the end of the bucket).
 */
static lessons_tc_entry_t **lessons_tc_slot(lessons_tokencache_t *c,
                                            apr_uint64_t h,
                                            const unsigned char *fp,
                                            const char *token,
                                            apr_size_t len)
{
    lessons_tc_entry_t **slot = &c->buckets[h & c->mask];

    while (*slot && !lessons_tc_match(*slot, fp, token, len)) {
        slot = &(*slot)->chain;
    }
    return slot;
}

/* Under the lock: take e out of its bucket and the LRU list. */
static void lessons_tc_remove(lessons_tokencache_t *c, lessons_tc_entry_t *e)
{
    lessons_tc_entry_t **slot = &c->buckets[e->hash & c->mask];

    while (*slot && *slot != e) {
        slot = &(*slot)->chain;
    }
    if (*slot) {
        *slot = e->chain;
    }
    e->chain = NULL;
    APR_RING_REMOVE(e, lru);
    c->stats.entries--;
}

/* An entry taken out of the cache, outside the lock: requests that hit
 * it hold references of their own to its parsed claims.
 */
static void lessons_tc_free(lessons_tc_entry_t *e)
{
    if (e) {
        json_decref(e->claims.parsed);
        free(e);
    }
}

/* The pool is going: no thread uses the cache any more. */
static apr_status_t lessons_tc_cleanup(void *data)
{
    lessons_tokencache_t *c = data;
    lessons_tc_entry_t *e = APR_RING_FIRST(&c->lru), *next;

    while (e != APR_RING_SENTINEL(&c->lru, lessons_tc_entry_t, lru)) {
        next = APR_RING_NEXT(e, lru);
        lessons_tc_free(e);
        e = next;
    }
    APR_RING_INIT(&c->lru, lessons_tc_entry_t, lru);
    c->stats.entries = 0;
    return APR_SUCCESS;
}

lessons_tokencache_t *lessons_tokencache_make(apr_pool_t *p,
                                              apr_size_t max_entries)
{
    lessons_tokencache_t *c;
    apr_size_t n = 1;

    if (!p || max_entries == 0 || max_entries > LESSONS_TOKENCACHE_MAX) {
        return NULL;
    }
    c = apr_pcalloc(p, sizeof(*c));
    if (apr_thread_mutex_create(&c->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS) {
        return NULL;
    }
    while (n < max_entries) {
        n <<= 1;                        /* load factor at most 1 */
    }
    c->buckets = apr_pcalloc(p, n * sizeof(*c->buckets));
    c->mask = n - 1;
    c->stats.max_entries = max_entries;
    APR_RING_INIT(&c->lru, lessons_tc_entry_t, lru);
    /* Without randomness the seed is only less unguessable. */
    if (apr_generate_random_bytes((unsigned char *)&c->seed,
                                  sizeof(c->seed)) != APR_SUCCESS) {
        c->seed = (apr_uint64_t)apr_time_now()
                  ^ (apr_uint64_t)(apr_uintptr_t)c;
    }
    /* Registered after the mutex's own cleanup, so it runs before it. */
    apr_pool_cleanup_register(p, c, lessons_tc_cleanup,
                              apr_pool_cleanup_null);
    return c;
}

int lessons_tokencache_get(lessons_tokencache_t *c, apr_pool_t *p,
                           const unsigned char *fp, const char *token,
                           apr_size_t len, double now,
                           lessons_tokencache_claims_t *claims)
{
    lessons_tc_entry_t **slot, *e, *dead = NULL;
    apr_uint64_t h;

    if (!c || !p || !fp || !token || !claims) {
        return 0;
    }
    h = lessons_tc_hash(c->seed, token, len);
    apr_thread_mutex_lock(c->mutex);
    slot = lessons_tc_slot(c, h, fp, token, len);
    e = *slot;
    if (!e) {
        c->stats.misses++;
        if (c->watch) {
            c->watch(c->watch_baton, &c->stats);
        }
        apr_thread_mutex_unlock(c->mutex);
        return 0;
    }
    c->stats.hits++;
    if (c->watch) {
        c->watch(c->watch_baton, &c->stats);
    }
    *claims = e->claims;
    claims->subject = e->claims.subject
        ? apr_pstrmemdup(p, e->claims.subject, e->subject_len) : NULL;
    /* Copied under the lock: the entry may be freed once it is let go. */
    claims->payload = e->claims.payload
        ? apr_pstrmemdup(p, e->claims.payload, e->claims.payload_len) : NULL;
    claims->payload_len = claims->payload ? e->claims.payload_len : 0;
    claims->parsed = json_incref(e->claims.parsed);
    if (now >= e->expires) {
        lessons_tc_remove(c, e);        /* can never pass again */
        c->stats.expired++;
        dead = e;
    }
    else if (APR_RING_FIRST(&c->lru) != e) {
        APR_RING_REMOVE(e, lru);
        APR_RING_INSERT_HEAD(&c->lru, e, lessons_tc_entry_t, lru);
    }
    apr_thread_mutex_unlock(c->mutex);
    lessons_tc_free(dead);
    return 1;
}

void lessons_tokencache_put(lessons_tokencache_t *c, const unsigned char *fp,
                            const char *token, apr_size_t len,
                            const lessons_tokencache_claims_t *claims,
                            double expires)
{
    lessons_tc_entry_t **slot, *e, *victim = NULL;
    apr_size_t slen, plen;

    if (!c || !fp || !token || !claims || len == 0) {
        return;
    }
    slen = claims->subject ? strlen(claims->subject) : 0;
    plen = claims->payload || claims->parsed ? claims->payload_len : 0;
    /* Big payloads are verified every time rather than held. */
    if (len > APR_SIZE_MAX / 4 || slen > APR_SIZE_MAX / 4
        || plen > LESSONS_TOKENCACHE_PAYLOAD_MAX) {
        return;
    }
    /* Parsed claims stand for the text: only one of them is held. */
    if (claims->parsed || !claims->payload) {
        plen = 0;
    }
    /* Built whole before the lock is taken. */
    e = malloc(sizeof(*e) + len + slen + 1 + plen);
    if (!e) {
        return;
    }
    memset(e, 0, sizeof(*e));
    e->hash = lessons_tc_hash(c->seed, token, len);
    memcpy(e->fp, fp, LESSONS_TOKENCACHE_FP_LEN);
    e->expires = expires;
    e->claims = *claims;
    e->token_len = len;
    e->subject_len = slen;
    memcpy(e->data, token, len);
    if (claims->subject) {
        memcpy(e->data + len, claims->subject, slen);
        e->claims.subject = e->data + len;
    }
    e->data[len + slen] = '\0';
    e->claims.payload = NULL;
    e->claims.payload_len = 0;
    e->claims.parsed = json_incref(claims->parsed);
    if (plen > 0) {
        memcpy(e->data + len + slen + 1, claims->payload, plen);
        e->claims.payload = e->data + len + slen + 1;
        e->claims.payload_len = plen;
    }

    apr_thread_mutex_lock(c->mutex);
    slot = lessons_tc_slot(c, e->hash, fp, token, len);
    if (*slot) {
        victim = e;                     /* another thread stored it first */
    }
    else {
        *slot = e;
        APR_RING_INSERT_HEAD(&c->lru, e, lessons_tc_entry_t, lru);
        c->stats.entries++;
        if (c->stats.entries > c->stats.max_entries) {
            victim = APR_RING_LAST(&c->lru);
            lessons_tc_remove(c, victim);
            c->stats.evictions++;
        }
    }
    apr_thread_mutex_unlock(c->mutex);
    lessons_tc_free(victim);
}

void lessons_tokencache_stats(lessons_tokencache_t *c,
                              lessons_tokencache_stats_t *stats)
{
    if (!stats) {
        return;
    }
    if (!c) {
        memset(stats, 0, sizeof(*stats));
        return;
    }
    apr_thread_mutex_lock(c->mutex);
    *stats = c->stats;
    apr_thread_mutex_unlock(c->mutex);
}

void lessons_tokencache_watch(lessons_tokencache_t *c,
                              lessons_tokencache_watch_fn fn, void *baton)
{
    if (c) {
        apr_thread_mutex_lock(c->mutex);
        c->watch = fn;
        c->watch_baton = baton;
        apr_thread_mutex_unlock(c->mutex);
    }
}
