/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_cache.h: a per-process, memory-bounded cache of encoded
 * response bodies (plain, and gzip made once when stored), shared by the
 * threads of a process.  Entries are immutable and reference counted, so
 * a body can go out in a heap bucket without a copy while another thread
 * replaces or evicts its entry: the bytes go when the last reference does.
 */
#ifndef LESSONS_CACHE_H
#define LESSONS_CACHE_H

#include "apr_pools.h"

typedef struct lessons_cache_t lessons_cache_t;
typedef struct lessons_cache_entry_t lessons_cache_entry_t;

typedef struct {
    apr_size_t entries;             /* entries in the cache now */
    apr_size_t bytes;               /* their accounted sizes, <= max_bytes */
    apr_uint64_t hits;
    apr_uint64_t misses;            /* no entry, or a stale one dropped */
    apr_uint64_t evictions;         /* dropped to stay within max_bytes */
    apr_uint32_t live;              /* this cache's entries not yet freed
                                     * (held and dropped ones too) */
} lessons_cache_stats_t;

/* A cache whose struct, lock and index live in a subpool of pchild with
 * its own allocator (the index allocates under the cache's lock only).
 * max_bytes bounds the sum of entry sizes (key, version, etag, bodies and
 * a fixed overhead); bodies of at least gzip_min bytes also get a gzip
 * form when it is smaller.  When pchild is cleared, entries nobody holds
 * are freed; held ones go with their last release.  NULL if the pool or
 * the lock cannot be made.
 */
lessons_cache_t *lessons_cache_make(apr_pool_t *pchild, apr_size_t max_bytes,
                                    apr_size_t gzip_min);

/* The entry for key if its version bytes equal version: a new reference
 * (release it), or NULL.  An entry of another version is dropped.
 */
lessons_cache_entry_t *lessons_cache_get(lessons_cache_t *c,
                                         const void *key, apr_size_t key_len,
                                         const void *version,
                                         apr_size_t version_len);

/* Copy and store an entry, replacing any for key and evicting the least
 * recently used to stay within max_bytes; returns a new reference to it
 * (release it), or NULL when it cannot be stored (larger than max_bytes,
 * out of memory, a NULL argument): the caller then sends its own bytes.
 */
lessons_cache_entry_t *lessons_cache_put(lessons_cache_t *c,
                                         const void *key, apr_size_t key_len,
                                         const void *version,
                                         apr_size_t version_len,
                                         const char *etag,
                                         const char *body, apr_size_t body_len);

/* Drop a reference; the entry is freed with its last one.  NULL is fine. */
void lessons_cache_release(lessons_cache_entry_t *e);

/* One more reference, for a heap bucket made of the body or gzip bytes
 * with lessons_cache_free_body as its free function:
 *   lessons_cache_hold(e);
 *   b = apr_bucket_heap_create(body, len, lessons_cache_free_body, list);
 */
void lessons_cache_hold(lessons_cache_entry_t *e);

/* A bucket free function: data is a pointer lessons_cache_body or
 * lessons_cache_gzip returned; drops the reference hold took.
 */
void lessons_cache_free_body(void *data);

const char *lessons_cache_etag(const lessons_cache_entry_t *e);

/* The plain body (NUL-terminated, the NUL not counted in *len). */
const char *lessons_cache_body(const lessons_cache_entry_t *e,
                               apr_size_t *len);

/* The gzip form (RFC 1952), or NULL (and *len 0) when there is none. */
const char *lessons_cache_gzip(const lessons_cache_entry_t *e,
                               apr_size_t *len);

/* Be told of the counters after every lookup and every store, with the
 * cache's lock held (so calls never overlap, and come in order): for
 * publishing them where other processes read them (lessons_metrics).
 * fn must not call back into the cache.  NULL stops it.
 */
typedef void (*lessons_cache_watch_fn)(void *baton,
                                       const lessons_cache_stats_t *now);
void lessons_cache_watch(lessons_cache_t *c, lessons_cache_watch_fn fn,
                         void *baton);

/* Counters, read under the lock.  A NULL cache reads as all zero. */
void lessons_cache_stats(lessons_cache_t *c, lessons_cache_stats_t *out);

/* The live count of the cache e came from, readable while e is held
 * even after that cache's pool is gone (for tests); 0 for NULL.
 */
apr_uint32_t lessons_cache_live_of(const lessons_cache_entry_t *e);

#endif /* LESSONS_CACHE_H */
