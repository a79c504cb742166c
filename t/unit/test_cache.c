/* Licensed under the Apache License, Version 2.0.
 *
 * test_cache.c: lessons_cache -- hits by full key bytes and exact
 * version, replacement, the gzip form, the byte bound and LRU order,
 * references that outlive replacement, eviction and the cache itself,
 * and many threads at once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "apr_atomic.h"
#include "apr_thread_proc.h"

#include "api/lessons_cache.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* Each test's caches live in its own pool, so destroying it checks the
 * cleanup too: afterwards no entry of them may be left alive.  Each
 * cache's count goes with it, so teardown stores and holds a probe entry
 * in each, and counts through that after the pool is gone: the probe
 * must be all that is left (valgrind checks it is then freed, once).
 */
static apr_pool_t *sub;
static lessons_cache_t *made[4];
static int n_made;

static int case_setup(void **state)
{
    (void)state;
    n_made = 0;
    return apr_pool_create(&sub, pool) == APR_SUCCESS ? 0 : -1;
}

static int case_teardown(void **state)
{
    lessons_cache_entry_t *probe[sizeof(made) / sizeof(made[0])];
    int i, rv = 0;

    (void)state;
    for (i = 0; i < n_made; i++) {
        probe[i] = lessons_cache_put(made[i], "\0probe", 6, "", 0, "\"p\"",
                                     "p", 1);
    }
    apr_pool_destroy(sub);
    for (i = 0; i < n_made; i++) {
        apr_uint32_t live = lessons_cache_live_of(probe[i]);

        if (live != 1) {
            fprintf(stderr, "cache %d: %u alive after its pool, not 1\n",
                    i, (unsigned)live);
            rv = -1;
        }
        lessons_cache_release(probe[i]);
    }
    return rv;
}

/* A cache on sub, checked by case_teardown. */
static lessons_cache_t *cache_make(apr_size_t max_bytes, apr_size_t gzip_min)
{
    lessons_cache_t *c = lessons_cache_make(sub, max_bytes, gzip_min);

    assert_non_null(c);
    assert_true(n_made < (int)(sizeof(made) / sizeof(made[0])));
    made[n_made++] = c;
    return c;
}

static lessons_cache_stats_t stats_of(lessons_cache_t *c)
{
    lessons_cache_stats_t st;

    lessons_cache_stats(c, &st);
    return st;
}

#define PUT(c, k, v, etag, body) \
    lessons_cache_put(c, k, sizeof(k) - 1, v, sizeof(v) - 1, etag, \
                      body, strlen(body))
#define GET(c, k, v) \
    lessons_cache_get(c, k, sizeof(k) - 1, v, sizeof(v) - 1)

/* e holds exactly body, then is released. */
static void assert_body_and_release(lessons_cache_entry_t *e,
                                    const char *body)
{
    apr_size_t len = 99;

    assert_non_null(e);
    assert_string_equal(lessons_cache_body(e, &len), body);
    assert_int_equal(len, strlen(body));
    lessons_cache_release(e);
}

static void test_hit_only_for_key_and_exact_version(void **state)
{
    lessons_cache_t *c = cache_make(1 << 20, 1024);
    lessons_cache_entry_t *e;
    lessons_cache_stats_t st;

    (void)state;
    assert_non_null(c);
    assert_null(GET(c, "k1", "v1"));
    e = PUT(c, "k1", "v1", "\"e1\"", "[1]");
    assert_non_null(e);
    assert_string_equal(lessons_cache_etag(e), "\"e1\"");
    lessons_cache_release(e);

    e = GET(c, "k1", "v1");
    assert_non_null(e);
    assert_string_equal(lessons_cache_etag(e), "\"e1\"");
    assert_body_and_release(e, "[1]");
    assert_null(GET(c, "k2", "v1"));
    assert_null(GET(c, "k", "v1"));
    st = stats_of(c);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 3);
    assert_int_equal(st.entries, 1);

    /* a longer version with the same prefix is another version, and
     * asking with it drops the entry: the old version no longer hits
     */
    assert_null(lessons_cache_get(c, "k1", 2, "v1\0", 3));
    assert_int_equal(stats_of(c).entries, 0);
    assert_int_equal(stats_of(c).bytes, 0);
    assert_null(GET(c, "k1", "v1"));

    /* an empty version is a version like any other */
    e = lessons_cache_put(c, "k1", 2, NULL, 0, "\"e\"", "x", 1);
    lessons_cache_release(e);
    assert_body_and_release(lessons_cache_get(c, "k1", 2, "", 0), "x");
    assert_null(GET(c, "k1", "v1"));
}

static void test_keys_compared_by_all_their_bytes(void **state)
{
    lessons_cache_t *c = cache_make(1 << 20, 1024);
    static const struct {
        const char *key;
        apr_size_t len;
        const char *body;
    } k[] = {
        { "a\0b", 3, "ab" }, { "a\0c", 3, "ac" },
        { "a", 1, "a" }, { "a\0", 2, "a0" }, { "", 0, "empty" },
    };
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        lessons_cache_release(lessons_cache_put(c, k[i].key, k[i].len,
                                                "v", 1, "\"e\"", k[i].body,
                                                strlen(k[i].body)));
    }
    assert_int_equal(stats_of(c).entries, sizeof(k) / sizeof(k[0]));
    for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        assert_body_and_release(lessons_cache_get(c, k[i].key, k[i].len,
                                                  "v", 1), k[i].body);
    }
    assert_null(lessons_cache_get(c, "a\0d", 3, "v", 1));
}

static void test_put_replaces(void **state)
{
    lessons_cache_t *c = cache_make(1 << 20, 1024);
    lessons_cache_entry_t *e;

    (void)state;
    lessons_cache_release(PUT(c, "k", "v1", "\"a\"", "first"));
    lessons_cache_release(PUT(c, "k", "v1", "\"b\"", "second"));
    assert_int_equal(stats_of(c).entries, 1);
    e = GET(c, "k", "v1");
    assert_non_null(e);
    assert_string_equal(lessons_cache_etag(e), "\"b\"");
    assert_body_and_release(e, "second");

    lessons_cache_release(PUT(c, "k", "v2", "\"c\"", "third"));
    assert_int_equal(stats_of(c).entries, 1);
    assert_body_and_release(GET(c, "k", "v2"), "third");
    assert_null(GET(c, "k", "v1"));
}

static void test_bad_arguments(void **state)
{
    lessons_cache_t *c = cache_make(1 << 20, 1024);
    char etag[2000];
    lessons_cache_stats_t st;

    (void)state;
    assert_null(lessons_cache_make(NULL, 1, 1));
    assert_null(lessons_cache_put(NULL, "k", 1, "v", 1, "\"e\"", "b", 1));
    assert_null(lessons_cache_put(c, NULL, 1, "v", 1, "\"e\"", "b", 1));
    assert_null(lessons_cache_put(c, "k", 1, NULL, 1, "\"e\"", "b", 1));
    assert_null(lessons_cache_put(c, "k", 1, "v", 1, NULL, "b", 1));
    assert_null(lessons_cache_put(c, "k", 1, "v", 1, "\"e\"", NULL, 1));
    memset(etag, 'e', sizeof(etag) - 1);
    etag[sizeof(etag) - 1] = '\0';
    assert_null(lessons_cache_put(c, "k", 1, "v", 1, etag, "b", 1));
    assert_null(lessons_cache_get(NULL, "k", 1, "v", 1));
    assert_null(lessons_cache_get(c, NULL, 1, "v", 1));
    assert_null(lessons_cache_body(NULL, NULL));
    lessons_cache_release(NULL);
    lessons_cache_hold(NULL);
    lessons_cache_free_body(NULL);
    lessons_cache_stats(NULL, &st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.live, 0);
    assert_int_equal(lessons_cache_live_of(NULL), 0);
    assert_int_equal(stats_of(c).entries, 0);
    assert_int_equal(stats_of(c).live, 0);
}

/* A JSON-like body of exactly len bytes: compresses well. */
static char *json_body(apr_size_t len)
{
    char *b = apr_palloc(sub, len + 1);
    apr_size_t i;

    for (i = 0; i < len; i++) {
        b[i] = "{\"id\":12,\"title\":\"Lesson\"},"[i % 27];
    }
    b[len] = '\0';
    return b;
}

/* 1 when gz inflates (gzip wrapper) to exactly body.  malloc, not a
 * pool: the worker threads call it too.
 */
static int inflates_to(const char *gz, apr_size_t gz_len,
                       const char *body, apr_size_t len)
{
    z_stream zs;
    unsigned char *out = malloc(len + 16);
    int rc, same;

    memset(&zs, 0, sizeof(zs));
    if (!out || inflateInit2(&zs, 15 + 16) != Z_OK) {
        free(out);
        return 0;
    }
    zs.next_in = (Bytef *)gz;
    zs.avail_in = (uInt)gz_len;
    zs.next_out = out;
    zs.avail_out = (uInt)len + 16;
    rc = inflate(&zs, Z_FINISH);
    same = rc == Z_STREAM_END && zs.total_out == len && zs.avail_in == 0
           && memcmp(out, body, len) == 0;
    inflateEnd(&zs);
    free(out);
    return same;
}

static void test_gzip_form(void **state)
{
    lessons_cache_t *c = cache_make(1 << 20, 1024);
    const char *big = json_body(4096), *small = json_body(1023);
    char *noise = apr_palloc(sub, 2048);
    lessons_cache_entry_t *e;
    const char *gz;
    apr_size_t len = 0, i;
    apr_uint32_t x = 12345;

    (void)state;
    e = PUT(c, "big", "v", "\"e\"", big);
    gz = lessons_cache_gzip(e, &len);
    assert_non_null(gz);
    assert_true(len > 18 && len < 4096);
    assert_int_equal((unsigned char)gz[0], 0x1f);   /* a gzip member */
    assert_int_equal((unsigned char)gz[1], 0x8b);
    assert_true(inflates_to(gz, len, big, 4096));
    lessons_cache_release(e);
    /* a hit hands out the same, already compressed form */
    e = GET(c, "big", "v");
    assert_ptr_equal(lessons_cache_gzip(e, NULL), gz);
    lessons_cache_release(e);

    e = PUT(c, "small", "v", "\"e\"", small);
    len = 7;
    assert_null(lessons_cache_gzip(e, &len));
    assert_int_equal(len, 0);
    lessons_cache_release(e);

    /* big enough, but gzip would not be smaller */
    for (i = 0; i < 2048; i++) {
        x = x * 1103515245 + 12345;
        noise[i] = (char)(x >> 23);
    }
    e = lessons_cache_put(c, "noise", 5, "v", 1, "\"e\"", noise, 2048);
    assert_non_null(e);
    assert_null(lessons_cache_gzip(e, NULL));
    assert_memory_equal(lessons_cache_body(e, NULL), noise, 2048);
    lessons_cache_release(e);
}

/* The accounted size of one entry stored alone. */
static apr_size_t size_of(const char *key, const char *body,
                          apr_size_t gzip_min)
{
    apr_pool_t *p;
    lessons_cache_t *c;
    apr_size_t size;

    assert_int_equal(apr_pool_create(&p, pool), APR_SUCCESS);
    c = lessons_cache_make(p, 1 << 20, gzip_min);
    lessons_cache_release(lessons_cache_put(c, key, strlen(key), "v", 1,
                                            "\"e\"", body, strlen(body)));
    size = stats_of(c).bytes;
    apr_pool_destroy(p);
    assert_true(size > strlen(body));
    return size;
}

/* 1 on a hit for key at version "v", the reference released. */
static int hit(lessons_cache_t *c, const char *key)
{
    lessons_cache_entry_t *e = lessons_cache_get(c, key, strlen(key), "v", 1);

    lessons_cache_release(e);
    return e != NULL;
}

static void test_bound_and_lru(void **state)
{
    apr_size_t size = size_of("k0", "body of some lesson", 1024);
    apr_size_t max = 3 * size + size / 2;
    lessons_cache_t *c = cache_make(max, 1024);
    lessons_cache_stats_t st;
    char key[16];
    int i;

    (void)state;
    lessons_cache_release(PUT(c, "kA", "v", "\"e\"", "body of some lesson"));
    lessons_cache_release(PUT(c, "kB", "v", "\"e\"", "body of some lesson"));
    lessons_cache_release(PUT(c, "kC", "v", "\"e\"", "body of some lesson"));
    assert_int_equal(stats_of(c).evictions, 0);
    lessons_cache_release(GET(c, "kA", "v"));     /* A is now the newest */
    lessons_cache_release(PUT(c, "kD", "v", "\"e\"", "body of some lesson"));
    st = stats_of(c);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.bytes, 3 * size);
    assert_false(hit(c, "kB"));
    assert_true(hit(c, "kA"));
    assert_true(hit(c, "kC"));
    assert_true(hit(c, "kD"));

    for (i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "n%03d", i);
        lessons_cache_release(lessons_cache_put(c, key, 4, "v", 1, "\"e\"",
                                                "body of some lesson", 19));
        st = stats_of(c);
        assert_true(st.bytes <= max);
        assert_true(st.entries <= 3);
    }
    assert_int_equal(st.evictions, 1 + 1000);
    assert_int_equal(st.entries, 3);
    /* the newest three are the last three stored */
    assert_true(hit(c, "n999"));
    assert_true(hit(c, "n997"));
    assert_false(hit(c, "n996"));
    /* nothing held: only the cache's own entries are alive */
    assert_int_equal(stats_of(c).live, 3);
}

/* The watcher sees the counters as they are after each lookup and each
 * store: every hit, miss and eviction, in order.
 */
typedef struct {
    int calls;
    lessons_cache_stats_t last;
} watched_t;

static void watcher(void *baton, const lessons_cache_stats_t *now)
{
    watched_t *w = baton;

    w->calls++;
    w->last = *now;
}

static void test_watch(void **state)
{
    apr_size_t size = size_of("k0", "body of some lesson", 1024);
    lessons_cache_t *c = cache_make(2 * size + size / 2, 1024);
    watched_t w;

    (void)state;
    memset(&w, 0, sizeof(w));
    lessons_cache_watch(c, watcher, &w);
    lessons_cache_release(PUT(c, "kA", "v", "\"e\"", "body of some lesson"));
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.last.entries, 1);
    assert_int_equal(w.last.bytes, size);
    assert_false(hit(c, "kB"));
    assert_int_equal(w.calls, 2);
    assert_int_equal(w.last.misses, 1);
    assert_true(hit(c, "kA"));
    assert_int_equal(w.last.hits, 1);
    lessons_cache_release(PUT(c, "kB", "v", "\"e\"", "body of some lesson"));
    lessons_cache_release(PUT(c, "kC", "v", "\"e\"", "body of some lesson"));
    assert_int_equal(w.calls, 5);
    assert_int_equal(w.last.evictions, 1);
    assert_int_equal(w.last.entries, 2);
    /* A stale entry is dropped by the lookup that finds it. */
    lessons_cache_release(GET(c, "kC", "w"));
    assert_int_equal(w.last.entries, 1);
    assert_int_equal(w.last.misses, 2);
    lessons_cache_watch(c, NULL, NULL);
    assert_false(hit(c, "kC"));
    assert_int_equal(w.calls, 6);
    lessons_cache_watch(NULL, watcher, &w);
}

static void test_too_big_is_not_stored(void **state)
{
    const char *body = json_body(2000);
    apr_size_t plain = size_of("k", body, 1 << 20);
    lessons_cache_t *c = cache_make(4096, 1024);
    lessons_cache_t *tight = cache_make(plain, 1024);
    lessons_cache_entry_t *e;

    (void)state;
    lessons_cache_release(PUT(c, "k", "v", "\"e\"", "small"));
    assert_null(lessons_cache_put(c, "k", 1, "v", 1, "\"e\"",
                                  json_body(5000), 5000));
    assert_int_equal(stats_of(c).entries, 1);
    assert_int_equal(stats_of(c).evictions, 0);
    assert_body_and_release(GET(c, "k", "v"), "small");

    /* fits plain but not with its gzip form: stored plain only */
    e = PUT(tight, "k", "v", "\"e\"", body);
    assert_non_null(e);
    assert_null(lessons_cache_gzip(e, NULL));
    assert_int_equal(stats_of(tight).bytes, plain);
    lessons_cache_release(e);
}

static void test_held_entry_outlives_replace_evict_and_cache(void **state)
{
    const char *body = json_body(3000);
    apr_pool_t *p;
    lessons_cache_t *c;
    lessons_cache_entry_t *e, *last, *prev;
    const char *b, *gz;
    apr_size_t len, gz_len, i;
    char key[8];

    (void)state;
    assert_int_equal(apr_pool_create(&p, sub), APR_SUCCESS);
    c = lessons_cache_make(p, 3 * 4096, 1024);
    e = PUT(c, "k", "v", "\"e\"", body);
    b = lessons_cache_body(e, &len);
    gz = lessons_cache_gzip(e, &gz_len);
    assert_non_null(gz);
    /* two buckets: the plain body and the gzip form */
    lessons_cache_hold(e);
    lessons_cache_hold(e);
    lessons_cache_release(e);           /* the handler is done with it */

    lessons_cache_release(PUT(c, "k", "v", "\"e2\"", "replaced"));
    for (i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "x%02u", (unsigned)i);
        lessons_cache_release(lessons_cache_put(c, key, 3, "v", 1, "\"e\"",
                                                body, 3000));
    }
    assert_true(stats_of(c).evictions > 0);
    assert_int_equal(stats_of(c).live, stats_of(c).entries + 1);
    /* valgrind would catch a read of freed bytes here */
    assert_memory_equal(b, body, len);
    assert_true(inflates_to(gz, gz_len, body, 3000));

    lessons_cache_free_body((void *)b);
    assert_int_equal(stats_of(c).live, stats_of(c).entries + 1);
    assert_true(inflates_to(gz, gz_len, body, 3000));
    lessons_cache_free_body((void *)gz);        /* the last reference */
    assert_int_equal(stats_of(c).live, stats_of(c).entries);

    /* two held across the cache's own end: the cleanup frees the rest,
     * each of the two goes with its last release, after the cache
     */
    last = lessons_cache_get(c, "x19", 3, "v", 1);
    prev = lessons_cache_get(c, "x18", 3, "v", 1);
    assert_non_null(last);
    assert_non_null(prev);
    assert_true(stats_of(c).entries > 2);
    assert_int_equal(stats_of(c).live, stats_of(c).entries);
    apr_pool_destroy(p);
    assert_int_equal(lessons_cache_live_of(last), 2);
    assert_int_equal(lessons_cache_live_of(prev), 2);
    lessons_cache_release(prev);
    assert_int_equal(lessons_cache_live_of(last), 1);
    assert_memory_equal(lessons_cache_body(last, NULL), body, 3000);
    /* the last entry and its ledger with it: valgrind checks both are
     * freed, and once
     */
    lessons_cache_release(last);
}

/* --- many threads ------------------------------------------------------ */

#define THREADS 4
#define ROUNDS 20000
#define KEYS 24
#define THREAD_MAX (24 * 1024)

typedef struct {
    lessons_cache_t *c;
    apr_uint32_t seed;
    int failures;
    int hits;
} worker_t;

/* The body every thread stores for key k at version v, so a hit can be
 * checked against what it must be; some big enough for gzip.
 */
static apr_size_t expected(int k, int v, char *buf, apr_size_t size)
{
    apr_size_t len = 100 + (apr_size_t)((k * 397 + v * 131) % 1900), i;
    int n = snprintf(buf, size, "{\"k\":%d,\"v\":%d}", k, v);

    for (i = (apr_size_t)n; i < len; i++) {
        buf[i] = (char)('a' + (i * (apr_size_t)(k + 1)) % 7);
    }
    buf[len] = '\0';
    return len;
}

static void *APR_THREAD_FUNC worker(apr_thread_t *t, void *data)
{
    worker_t *w = data;
    char body[2048], key[8], version[4], etag[16];
    int i;

    for (i = 0; i < ROUNDS; i++) {
        lessons_cache_entry_t *e;
        apr_size_t len, blen, glen;
        const char *b, *gz;
        int k, v;

        w->seed = w->seed * 1103515245 + 12345;
        k = (int)((w->seed >> 16) % KEYS);
        /* now and then a request sees the other version */
        v = (int)((w->seed >> 8) % 16 == 0);
        snprintf(key, sizeof(key), "k%d", k);
        snprintf(version, sizeof(version), "v%d", v);
        snprintf(etag, sizeof(etag), "\"%d-%d\"", k, v);
        len = expected(k, v, body, sizeof(body));
        e = lessons_cache_get(w->c, key, strlen(key), version, 2);
        if (e) {
            w->hits++;
        }
        else {
            e = lessons_cache_put(w->c, key, strlen(key), version, 2, etag,
                                  body, len);
        }
        if (!e) {
            w->failures++;
            continue;
        }
        b = lessons_cache_body(e, &blen);
        gz = lessons_cache_gzip(e, &glen);
        if (blen != len || memcmp(b, body, len) != 0
            || strcmp(lessons_cache_etag(e), etag) != 0
            || (len >= 1024) != (gz != NULL)) {
            w->failures++;
        }
        if (gz && i % 128 == 0 && !inflates_to(gz, glen, body, len)) {
            w->failures++;
        }
        /* half the time a bucket holds it, freed after the handler's
         * release, as when the network is slower than the handler
         */
        if (i % 2) {
            lessons_cache_hold(e);
            lessons_cache_release(e);
            apr_thread_yield();
            if (memcmp(b, body, len) != 0) {
                w->failures++;
            }
            lessons_cache_free_body((void *)(gz && i % 4 == 1 ? gz : b));
        }
        else {
            lessons_cache_release(e);
        }
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static void test_threads(void **state)
{
    lessons_cache_t *c = cache_make(THREAD_MAX, 1024);
    worker_t w[THREADS];
    apr_thread_t *t[THREADS];
    apr_status_t trv;
    lessons_cache_stats_t st;
    int i, hits = 0;

    (void)state;
    for (i = 0; i < THREADS; i++) {
        w[i].c = c;
        w[i].seed = (apr_uint32_t)(i * 7919 + 1);
        w[i].failures = 0;
        w[i].hits = 0;
        assert_int_equal(apr_thread_create(&t[i], NULL, worker, &w[i], sub),
                         APR_SUCCESS);
    }
    for (i = 0; i < THREADS; i++) {
        apr_thread_join(&trv, t[i]);
        assert_int_equal(w[i].failures, 0);
        hits += w[i].hits;
    }
    st = stats_of(c);
    assert_true(st.bytes <= THREAD_MAX);
    assert_true(st.evictions > 0);
    assert_int_equal(st.hits, hits);
    assert_int_equal(st.hits + st.misses, THREADS * ROUNDS);
    /* nobody holds anything: only the cache's own entries are alive */
    assert_int_equal(st.live, st.entries);
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, case_setup, case_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_hit_only_for_key_and_exact_version),
        CASE(test_keys_compared_by_all_their_bytes),
        CASE(test_put_replaces),
        CASE(test_bad_arguments),
        CASE(test_gzip_form),
        CASE(test_bound_and_lru),
        CASE(test_watch),
        CASE(test_too_big_is_not_stored),
        CASE(test_held_entry_outlives_replace_evict_and_cache),
        CASE(test_threads),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
