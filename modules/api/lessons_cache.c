/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_cache.c: an apr_hash index over malloc'd, reference counted
 * entries, with an LRU list, under one mutex.  An entry is one malloc
 * (header, then the body, key, version and etag) plus one for its gzip
 * form; a copy of the entry pointer sits right before each body's bytes,
 * which is how a bucket's free function, given only the bytes, finds
 * the reference to drop.  Copying, compressing and freeing all happen
 * outside the lock; under it only links and counters change.  Each
 * cache counts its live entries in a small malloc'd ledger that it and
 * each of its entries hold a reference to, so the count stays readable
 * (through a held entry) after the cache's pool is gone.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST
#include <zlib.h>

#include "apr_allocator.h"
#include "apr_atomic.h"
#include "apr_hash.h"
#include "apr_ring.h"
#include "apr_thread_mutex.h"

#include "api/lessons_cache.h"

/* What an entry costs beyond its mallocs' payloads: the apr_hash entry
 * and malloc's own headers, so many tiny entries still stay bounded.
 */
#define LESSONS_CACHE_OVERHEAD 64

/* An ETag is a quoted digest; anything longer is a caller's bug. */
#define LESSONS_CACHE_ETAG_MAX 1024

/* Bytes before each body (plain and gzip) holding the entry pointer,
 * read and written with memcpy so no alignment is assumed.
 */
#define BACK sizeof(lessons_cache_entry_t *)

/* Outlives its cache while any of the cache's entries is alive. */
typedef struct {
    volatile apr_uint32_t refs;           /* the cache's one + an entry's */
    volatile apr_uint32_t live;           /* entries not yet freed */
} lessons_cache_ledger_t;

struct lessons_cache_entry_t {
    APR_RING_ENTRY(lessons_cache_entry_t) lru; /* the cache's LRU ring;
                                           * once unlinked, a dropped one */
    volatile apr_uint32_t refs;           /* the cache's one + holders' */
    lessons_cache_ledger_t *ledger;       /* its cache's; one reference */
    apr_size_t size;                      /* accounted against max_bytes */
    const char *key, *version, *etag;     /* all point into data */
    apr_size_t key_len, version_len, body_len, gzip_len;
    char *gzip;                           /* own malloc, past its BACK */
    char data[];                          /* BACK, body, NUL, key, version,
                                           * etag, NUL */
};

/* Newest first: hits move to the head, eviction takes the tail. */
APR_RING_HEAD(lessons_cache_ring, lessons_cache_entry_t);

struct lessons_cache_t {
    apr_thread_mutex_t *mutex;
    apr_hash_t *index;                    /* full key bytes -> entry */
    struct lessons_cache_ring lru;
    apr_size_t max_bytes, gzip_min;
    lessons_cache_stats_t stats;          /* all but live */
    lessons_cache_ledger_t *ledger;       /* one reference, until cleanup */
    lessons_cache_watch_fn watch;         /* told of stats, lock held */
    void *watch_baton;
};

static void cache_told(lessons_cache_t *c)
{
    if (c->watch) {
        c->watch(c->watch_baton, &c->stats);
    }
}

static void ledger_release(lessons_cache_ledger_t *l)
{
    if (apr_atomic_dec32(&l->refs) == 0) {
        free(l);
    }
}

static void entry_free(lessons_cache_entry_t *e)
{
    lessons_cache_ledger_t *l = e->ledger;

    if (e->gzip) {
        free(e->gzip - BACK);
    }
    free(e);
    apr_atomic_dec32(&l->live);
    ledger_release(l);
}

void lessons_cache_release(lessons_cache_entry_t *e)
{
    if (e && apr_atomic_dec32(&e->refs) == 0) {
        entry_free(e);
    }
}

void lessons_cache_hold(lessons_cache_entry_t *e)
{
    if (e) {
        apr_atomic_inc32(&e->refs);
    }
}

void lessons_cache_free_body(void *data)
{
    lessons_cache_entry_t *e;

    if (data) {
        memcpy(&e, (char *)data - BACK, BACK);
        lessons_cache_release(e);
    }
}

const char *lessons_cache_etag(const lessons_cache_entry_t *e)
{
    return e ? e->etag : NULL;
}

const char *lessons_cache_body(const lessons_cache_entry_t *e,
                               apr_size_t *len)
{
    if (len) {
        *len = e ? e->body_len : 0;
    }
    return e ? e->data + BACK : NULL;
}

const char *lessons_cache_gzip(const lessons_cache_entry_t *e,
                               apr_size_t *len)
{
    if (len) {
        *len = e && e->gzip ? e->gzip_len : 0;
    }
    return e ? e->gzip : NULL;
}

#define LRU_EMPTY(c)  APR_RING_EMPTY(&(c)->lru, lessons_cache_entry_t, lru)
#define LRU_OLDEST(c) APR_RING_LAST(&(c)->lru)

/* Under the lock: out of the index and the LRU ring, onto the dropped
 * ring, whose cache references the caller drops after unlocking (a free
 * may be big).
 */
static void entry_unlink(lessons_cache_t *c, lessons_cache_entry_t *e,
                         struct lessons_cache_ring *dropped)
{
    apr_hash_set(c->index, e->key, (apr_ssize_t)e->key_len, NULL);
    APR_RING_REMOVE(e, lru);
    c->stats.bytes -= e->size;
    c->stats.entries--;
    APR_RING_INSERT_TAIL(dropped, e, lessons_cache_entry_t, lru);
}

static void release_dropped(struct lessons_cache_ring *dropped)
{
    lessons_cache_entry_t *e = APR_RING_FIRST(dropped), *next;

    while (e != APR_RING_SENTINEL(dropped, lessons_cache_entry_t, lru)) {
        next = APR_RING_NEXT(e, lru);
        lessons_cache_release(e);
        e = next;
    }
}

static apr_status_t cache_cleanup(void *data)
{
    lessons_cache_t *c = data;
    struct lessons_cache_ring dropped;

    APR_RING_INIT(&dropped, lessons_cache_entry_t, lru);
    /* Registered after the mutex, so this runs before it is destroyed. */
    apr_thread_mutex_lock(c->mutex);
    while (!LRU_EMPTY(c)) {
        entry_unlink(c, LRU_OLDEST(c), &dropped);
    }
    apr_thread_mutex_unlock(c->mutex);
    release_dropped(&dropped);
    /* Freed here unless a held entry still counts in it. */
    ledger_release(c->ledger);
    c->ledger = NULL;
    return APR_SUCCESS;
}

lessons_cache_t *lessons_cache_make(apr_pool_t *pchild, apr_size_t max_bytes,
                                    apr_size_t gzip_min)
{
    apr_allocator_t *allocator;
    apr_pool_t *p;
    lessons_cache_t *c;

    /* apr_hash_set allocates at request time, from any thread: give it a
     * pool (and allocator) of its own that only our mutex guards, rather
     * than pchild, which nothing makes safe to share between threads.
     */
    if (!pchild || apr_allocator_create(&allocator) != APR_SUCCESS) {
        return NULL;
    }
    if (apr_pool_create_ex(&p, pchild, NULL, allocator) != APR_SUCCESS) {
        apr_allocator_destroy(allocator);
        return NULL;
    }
    apr_allocator_owner_set(allocator, p);
    c = apr_pcalloc(p, sizeof(*c));
    if (apr_thread_mutex_create(&c->mutex, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS) {
        apr_pool_destroy(p);
        return NULL;
    }
    c->ledger = malloc(sizeof(*c->ledger));
    if (!c->ledger) {
        apr_pool_destroy(p);
        return NULL;
    }
    c->ledger->refs = 1;                /* the cache's */
    c->ledger->live = 0;
    c->index = apr_hash_make(p);
    APR_RING_INIT(&c->lru, lessons_cache_entry_t, lru);
    /* Room to add an entry's parts without overflowing apr_size_t. */
    c->max_bytes = max_bytes < APR_SIZE_MAX / 8 ? max_bytes
                                                : APR_SIZE_MAX / 8;
    c->gzip_min = gzip_min;
    /* On p, not pchild: subpools go before their parent's cleanups run. */
    apr_pool_cleanup_register(p, c, cache_cleanup, apr_pool_cleanup_null);
    return c;
}

/* The gzip form of body in its own malloc after a BACK, or NULL when
 * zlib fails or it would not be smaller.  Done once, outside the lock.
 */
static char *gzip_make(const char *body, apr_size_t len, apr_size_t *out)
{
    z_stream zs;
    uLong bound;
    char *blk = NULL, *shrunk;

    if (len > UINT_MAX / 2) {
        return NULL;                    /* avail_in is a uInt */
    }
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        return NULL;
    }
    bound = deflateBound(&zs, (uLong)len);
    blk = malloc(BACK + bound);
    if (blk) {
        zs.next_in = (const Bytef *)body;
        zs.avail_in = (uInt)len;
        zs.next_out = (Bytef *)blk + BACK;
        zs.avail_out = (uInt)bound;
        if (deflate(&zs, Z_FINISH) != Z_STREAM_END || zs.total_out >= len) {
            free(blk);
            blk = NULL;
        }
    }
    deflateEnd(&zs);
    if (!blk) {
        return NULL;
    }
    *out = zs.total_out;
    /* deflateBound is about the body's size: give the slack back. */
    shrunk = realloc(blk, BACK + *out);
    return shrunk ? shrunk : blk;
}

lessons_cache_entry_t *lessons_cache_get(lessons_cache_t *c,
                                         const void *key, apr_size_t key_len,
                                         const void *version,
                                         apr_size_t version_len)
{
    lessons_cache_entry_t *e;
    struct lessons_cache_ring dropped;

    if (!c || (!key && key_len) || (!version && version_len)) {
        return NULL;
    }
    APR_RING_INIT(&dropped, lessons_cache_entry_t, lru);
    apr_thread_mutex_lock(c->mutex);
    e = apr_hash_get(c->index, key ? key : "", (apr_ssize_t)key_len);
    if (e && (e->version_len != version_len
              || (version_len && memcmp(e->version, version, version_len)))) {
        /* Stale: whoever asks next has the newer version too. */
        entry_unlink(c, e, &dropped);
        e = NULL;
    }
    if (e) {
        if (APR_RING_FIRST(&c->lru) != e) {
            APR_RING_REMOVE(e, lru);
            APR_RING_INSERT_HEAD(&c->lru, e, lessons_cache_entry_t, lru);
        }
        apr_atomic_inc32(&e->refs);
        c->stats.hits++;
    }
    else {
        c->stats.misses++;
    }
    cache_told(c);
    apr_thread_mutex_unlock(c->mutex);
    release_dropped(&dropped);
    return e;
}

lessons_cache_entry_t *lessons_cache_put(lessons_cache_t *c,
                                         const void *key, apr_size_t key_len,
                                         const void *version,
                                         apr_size_t version_len,
                                         const char *etag,
                                         const char *body, apr_size_t body_len)
{
    lessons_cache_entry_t *e, *old;
    struct lessons_cache_ring dropped;
    apr_size_t etag_len, alloc;
    char *p;

    if (!c || !etag || (!key && key_len) || (!version && version_len)
        || (!body && body_len)) {
        return NULL;
    }
    etag_len = strnlen(etag, LESSONS_CACHE_ETAG_MAX);
    if (etag_len >= LESSONS_CACHE_ETAG_MAX || key_len > c->max_bytes
        || version_len > c->max_bytes || body_len > c->max_bytes) {
        return NULL;
    }
    alloc = sizeof(*e) + BACK + body_len + 1 + key_len + version_len
            + etag_len + 1;
    if (alloc + LESSONS_CACHE_OVERHEAD > c->max_bytes
        || !(e = malloc(alloc))) {
        return NULL;                    /* before compressing for nothing */
    }
    memset(e, 0, sizeof(*e));
    e->ledger = c->ledger;
    apr_atomic_inc32(&e->ledger->refs);
    apr_atomic_inc32(&e->ledger->live);
    memcpy(e->data, &e, BACK);
    p = e->data + BACK;
    if (body_len) {
        memcpy(p, body, body_len);
    }
    p[body_len] = '\0';
    p += body_len + 1;
    e->key = p;
    if (key_len) {
        memcpy(p, key, key_len);
    }
    p += key_len;
    e->version = p;
    if (version_len) {
        memcpy(p, version, version_len);
    }
    p += version_len;
    e->etag = p;
    memcpy(p, etag, etag_len);
    p[etag_len] = '\0';
    e->key_len = key_len;
    e->version_len = version_len;
    e->body_len = body_len;
    e->size = alloc + LESSONS_CACHE_OVERHEAD;
    if (body_len >= c->gzip_min) {
        char *blk = gzip_make(body, body_len, &e->gzip_len);

        /* Over the bound with it but not without: keep the plain form. */
        if (blk && e->size + BACK + e->gzip_len > c->max_bytes) {
            free(blk);
            blk = NULL;
        }
        if (blk) {
            memcpy(blk, &e, BACK);
            e->gzip = blk + BACK;
            e->size += BACK + e->gzip_len;
        }
        else {
            e->gzip_len = 0;
        }
    }
    e->refs = 2;                        /* the cache's, and the caller's */

    APR_RING_INIT(&dropped, lessons_cache_entry_t, lru);
    apr_thread_mutex_lock(c->mutex);
    /* Unlink the old one first: apr_hash_set on a present key would keep
     * the old entry's key pointer, freed with it.
     */
    old = apr_hash_get(c->index, e->key, (apr_ssize_t)key_len);
    if (old) {
        entry_unlink(c, old, &dropped);
    }
    while (!LRU_EMPTY(c) && c->stats.bytes + e->size > c->max_bytes) {
        entry_unlink(c, LRU_OLDEST(c), &dropped);
        c->stats.evictions++;
    }
    apr_hash_set(c->index, e->key, (apr_ssize_t)key_len, e);
    APR_RING_INSERT_HEAD(&c->lru, e, lessons_cache_entry_t, lru);
    c->stats.bytes += e->size;
    c->stats.entries++;
    cache_told(c);
    apr_thread_mutex_unlock(c->mutex);
    release_dropped(&dropped);
    return e;
}

void lessons_cache_watch(lessons_cache_t *c, lessons_cache_watch_fn fn,
                         void *baton)
{
    if (c) {
        apr_thread_mutex_lock(c->mutex);
        c->watch = fn;
        c->watch_baton = baton;
        apr_thread_mutex_unlock(c->mutex);
    }
}

void lessons_cache_stats(lessons_cache_t *c, lessons_cache_stats_t *out)
{
    if (!out) {
        return;
    }
    if (c) {
        apr_thread_mutex_lock(c->mutex);
        *out = c->stats;
        apr_thread_mutex_unlock(c->mutex);
        out->live = apr_atomic_read32(&c->ledger->live);
    }
    else {
        memset(out, 0, sizeof(*out));
    }
}

apr_uint32_t lessons_cache_live_of(const lessons_cache_entry_t *e)
{
    return e ? apr_atomic_read32(&e->ledger->live) : 0;
}
