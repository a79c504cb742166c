/* Licensed under the Apache License, Version 2.0.
 *
 * test_keysource.c: lessons_keysource -- the fetcher thread, the last
 * good set, the refetch limit and the holds on a set, with a fetch of
 * our own in place of the network.  Intervals are tens of milliseconds;
 * every wait for the thread polls up to a generous deadline, so a busy
 * machine makes the tests slower, not red.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "apr_strings.h"
#include "apr_thread_mutex.h"
#include "apr_thread_proc.h"

#include "keys/lessons_keysource.h"

#include "unit_pool.h"

#define MS(n)     ((apr_interval_time_t)(n) * 1000)
#define DEADLINE  MS(10000)         /* the longest any poll waits */

/* A 32-byte secret, base64url: "0123456789abcdef" twice. */
#define SECRET "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"

/* What our fetch serves, under its own lock. */
typedef struct {
    apr_thread_mutex_t *lock;
    const char *kid;                /* the set: one secret with this kid */
    const char *fail;               /* or this error */
    apr_interval_time_t delay;      /* each fetch takes this long */
    int pad;                        /* the document padded to this size */
    int calls;                      /* fetches begun */
    int freed;                      /* sets freed */
    int reports_new, reports_failed, last_serving;
    const char *last_err;
    int done_ok, done_failed, done_asked, done_keys;   /* opts.done */
} fake_t;

static fake_t fake;

static apr_status_t fake_freed(void *data)
{
    (void)data;
    apr_thread_mutex_lock(fake.lock);
    fake.freed++;
    apr_thread_mutex_unlock(fake.lock);
    return APR_SUCCESS;
}

static const char *fake_fetch(void *baton, apr_pool_t *set_pool,
                              apr_pool_t *scratch,
                              const lessons_keyset_t **set,
                              const char **doc, apr_size_t *len)
{
    fake_t *f = baton;
    const char *kid, *fail, *err;
    apr_interval_time_t delay;
    lessons_keyset_t *made = NULL;
    char *json;

    apr_thread_mutex_lock(f->lock);
    f->calls++;
    kid = f->kid;
    fail = f->fail;
    delay = f->delay;
    apr_thread_mutex_unlock(f->lock);
    if (delay) {
        apr_sleep(delay);
    }
    if (fail) {
        return apr_pstrdup(scratch, fail);
    }
    json = apr_psprintf(scratch, "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"%s\","
                        "\"k\":\"" SECRET "\"}]%*s}", kid,
                        f->pad > 64 ? f->pad - 64 : 0, "");
    err = lessons_keyset_parse_jwks(set_pool, json, strlen(json), &made);
    if (err) {
        return err;
    }
    apr_pool_cleanup_register(set_pool, NULL, fake_freed,
                              apr_pool_cleanup_null);
    *set = made;
    *doc = json;
    *len = strlen(json);
    return NULL;
}

static void fake_report(void *baton, const lessons_keyset_t *set,
                        const char *err, int serving, apr_pool_t *scratch)
{
    fake_t *f = baton;

    (void)scratch;
    /* Called with the source's lock: the fake's own is a different one. */
    apr_thread_mutex_lock(f->lock);
    if (set) {
        f->reports_new++;
    }
    else {
        f->reports_failed++;
        f->last_err = err ? apr_pstrdup(pool, err) : NULL;
        f->last_serving = serving;
    }
    apr_thread_mutex_unlock(f->lock);
}

static void fake_done(void *baton, int ok, int asked,
                      const lessons_keyset_t *set)
{
    fake_t *f = baton;

    apr_thread_mutex_lock(f->lock);
    f->done_ok += ok;
    f->done_failed += !ok;
    f->done_asked += asked;
    f->done_keys = set ? set->nkeys : -1;
    apr_thread_mutex_unlock(f->lock);
}

static void fake_set(const char *kid, const char *fail,
                     apr_interval_time_t delay)
{
    apr_thread_mutex_lock(fake.lock);
    fake.kid = kid;
    fake.fail = fail;
    fake.delay = delay;
    apr_thread_mutex_unlock(fake.lock);
}

static int fake_read(const int *field)
{
    int v;

    apr_thread_mutex_lock(fake.lock);
    v = *field;
    apr_thread_mutex_unlock(fake.lock);
    return v;
}

static lessons_keysource_opts_t opts_of(apr_interval_time_t refresh,
                                        apr_interval_time_t min_refresh)
{
    lessons_keysource_opts_t o;

    memset(&o, 0, sizeof(o));
    o.refresh = refresh;
    o.min_refresh = min_refresh;
    o.wait = DEADLINE;
    o.max_waiters = 8;
    o.fetch = fake_fetch;
    o.fetch_baton = &fake;
    o.report = fake_report;
    o.done = fake_done;
    o.report_baton = &fake;
    return o;
}

/* Each test: a fresh fake, and a pool the source lives in. */
static int setup(void **state)
{
    apr_pool_t *p;

    memset(&fake, 0, sizeof(fake));
    if (apr_pool_create(&p, pool) != APR_SUCCESS
        || apr_thread_mutex_create(&fake.lock, APR_THREAD_MUTEX_DEFAULT,
                                   pool) != APR_SUCCESS) {
        return -1;
    }
    fake.kid = "k1";
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    apr_pool_destroy(*state);
    return 0;
}

static lessons_keysource_t *start(void **state, apr_interval_time_t refresh,
                                  apr_interval_time_t min_refresh)
{
    lessons_keysource_opts_t o = opts_of(refresh, min_refresh);
    lessons_keysource_t *src = NULL;

    assert_int_equal(lessons_keysource_start(&src, &o, *state),
                     APR_SUCCESS);
    assert_non_null(src);
    return src;
}

static lessons_keysource_stats_t stats_of(lessons_keysource_t *src)
{
    lessons_keysource_stats_t st;

    lessons_keysource_stats(src, &st);
    return st;
}

/* Poll until the source has ended n fetches. */
static void await_fetches(lessons_keysource_t *src, unsigned long n)
{
    apr_time_t end = apr_time_now() + DEADLINE;

    while (stats_of(src).fetches < n && apr_time_now() < end) {
        apr_sleep(MS(5));
    }
    assert_true(stats_of(src).fetches >= n);
}

static const char *kid_of(const lessons_keyset_t *set)
{
    assert_non_null(set);
    assert_int_equal(set->nkeys, 1);
    return set->keys[0].kid;
}

/* A lazy source stays off the network until someone needs its keys:
 * the first take starts the first fetch and waits for it; a refetch
 * wakes one the same way; stopping one that never fetched ends its
 * thread.
 */
static void test_lazy_source(void **state)
{
    lessons_keysource_opts_t o = opts_of(MS(60000), MS(10));
    lessons_keysource_t *src = NULL, *other = NULL, *never = NULL;
    apr_pool_t *holder;

    o.lazy = 1;
    assert_int_equal(lessons_keysource_start(&src, &o, *state), APR_SUCCESS);
    assert_int_equal(lessons_keysource_start(&other, &o, *state),
                     APR_SUCCESS);
    assert_int_equal(lessons_keysource_start(&never, &o, *state),
                     APR_SUCCESS);     /* teardown stops it asleep */
    apr_sleep(MS(50));
    assert_int_equal(fake_read(&fake.calls), 0);
    assert_int_equal(stats_of(src).fetches, 0);
    assert_int_equal(apr_pool_create(&holder, *state), APR_SUCCESS);
    assert_string_equal(kid_of(lessons_keysource_take(src, holder)), "k1");
    assert_int_equal(stats_of(src).fetches, 1);
    assert_int_equal(stats_of(other).fetches, 0);
    assert_int_equal(lessons_keysource_refetch(other, NULL, NULL),
                     LESSONS_KEYSOURCE_NEW);
    assert_int_equal(stats_of(other).fetches, 1);
    assert_int_equal(fake_read(&fake.calls), 2);
    assert_int_equal(stats_of(never).fetches, 0);
    apr_pool_destroy(holder);
}

/* What a health check asks: the state, at once, whatever the fetch is
 * doing; it neither waits for a fetch in flight nor wakes a lazy
 * source.  No set until one is installed; the error of the last fetch
 * (a failed first one, or one after a good set: the set still held);
 * when the set in use was installed, unchanged by a failure.
 */
static void test_state_does_not_wait(void **state)
{
    lessons_keysource_opts_t o = opts_of(MS(60000), MS(20));
    lessons_keysource_t *src = NULL, *lazy = NULL;
    lessons_keysource_state_t st;
    apr_time_t before, installed;
    apr_pool_t *req;

    apr_pool_create(&req, pool);
    o.lazy = 1;
    assert_int_equal(lessons_keysource_start(&lazy, &o, *state),
                     APR_SUCCESS);
    fake_set("k1", "HTTP 503", MS(2000));
    src = start(state, MS(60000), MS(20));
    before = apr_time_now();
    lessons_keysource_state(src, req, &st);
    assert_true(apr_time_now() - before < MS(1500));
    assert_false(st.held);
    assert_int_equal(st.installed, 0);
    assert_int_equal(st.fetches, 0);
    assert_null(st.last_err);
    assert_false(st.dormant);

    /* Asking a lazy source does not start its fetch. */
    lessons_keysource_state(lazy, req, &st);
    assert_true(st.dormant);
    assert_int_equal(st.fetches, 0);
    apr_sleep(MS(50));
    assert_int_equal(stats_of(lazy).fetches, 0);

    /* The first fetch failed: no set, and why. */
    await_fetches(src, 1);
    lessons_keysource_state(src, req, &st);
    assert_false(st.held);
    assert_int_equal(st.installed, 0);
    assert_true(st.fetches >= 1);
    assert_non_null(st.last_err);
    assert_string_equal(st.last_err, "HTTP 503");

    /* The provider is back: once a fetch has begun since (a retry after
     * min_refresh), a set, since when, and no error.
     */
    before = apr_time_now();
    fake_set("k1", NULL, 0);
    st.held = 0;
    while (!st.held && apr_time_now() < before + DEADLINE) {
        apr_sleep(MS(5));
        lessons_keysource_state(src, req, &st);
    }
    assert_true(st.held);
    assert_true(st.installed >= before);
    assert_true(st.installed <= apr_time_now());
    assert_null(st.last_err);
    installed = st.installed;

    /* It fails again: the set is still held, installed as before, and
     * the error is the new one.
     */
    fake_set("k2", "connection refused", 0);
    apr_sleep(MS(30));              /* past min_refresh */
    assert_int_equal(lessons_keysource_refetch(src, NULL, NULL),
                     LESSONS_KEYSOURCE_SAME);
    lessons_keysource_state(src, req, &st);
    assert_true(st.held);
    assert_int_equal(st.installed, installed);
    assert_non_null(st.last_err);
    assert_string_equal(st.last_err, "connection refused");
    apr_pool_destroy(req);
}

/* The first take waits for the first fetch and gets its set. */
static void test_first_take_waits_for_first_fetch(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *req;

    fake_set("k1", NULL, MS(100));
    src = start(state, MS(60000), MS(60000));
    apr_pool_create(&req, pool);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k1");
    assert_int_equal(stats_of(src).fetches, 1);
    assert_int_equal(stats_of(src).installed, 1);
    assert_int_equal(fake_read(&fake.reports_new), 1);
    apr_pool_destroy(req);
}

/* A first fetch that fails: take returns NULL once it has ended (not
 * after the whole wait), and the report says no set serves.
 */
static void test_first_fetch_fails(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *req;
    apr_time_t before;

    fake_set("k1", "connection refused", 0);
    src = start(state, MS(60000), MS(60000));
    apr_pool_create(&req, pool);
    before = apr_time_now();
    assert_null(lessons_keysource_take(src, req));
    assert_true(apr_time_now() - before < DEADLINE);
    assert_int_equal(stats_of(src).fetches, 1);
    assert_int_equal(stats_of(src).holds, 0);
    assert_int_equal(fake_read(&fake.reports_failed), 1);
    assert_int_equal(fake_read(&fake.last_serving), 0);
    assert_string_equal(fake.last_err, "connection refused");
    /* Later takes do not wait for a fetch that is not due. */
    before = apr_time_now();
    assert_null(lessons_keysource_take(src, req));
    assert_true(apr_time_now() - before < MS(1000));
    assert_int_equal(fake_read(&fake.calls), 1);
    apr_pool_destroy(req);
}

/* The last good set serves while later fetches fail. */
static void test_last_good_set_serves(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *req;

    src = start(state, MS(30), MS(30));
    apr_pool_create(&req, pool);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k1");
    fake_set("k2", "HTTP 500", 0);
    await_fetches(src, 3);          /* two failures, by the refresh */
    assert_int_equal(stats_of(src).installed, 1);
    assert_true(fake_read(&fake.reports_failed) >= 1);
    assert_int_equal(fake_read(&fake.last_serving), 1);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k1");
    /* The provider is back: the fetcher retries and takes the new set. */
    fake_set("k2", NULL, 0);
    await_fetches(src, stats_of(src).fetches + 2);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k2");
    apr_pool_destroy(req);
}

/* A failed fetch is retried after min_refresh, not after refresh. */
static void test_failure_retried_at_min_refresh(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *req;

    fake_set("k1", "timed out", 0);
    src = start(state, MS(600000), MS(30));
    apr_pool_create(&req, pool);
    assert_null(lessons_keysource_take(src, req));
    fake_set("k1", NULL, 0);
    await_fetches(src, 2);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k1");
    apr_pool_destroy(req);
}

/* The same set fetched again is not installed, nor reported, and is
 * freed at once; stopping frees the rest: every set made, once.
 */
static void test_same_set_is_not_new(void **state)
{
    lessons_keysource_opts_t o = opts_of(MS(20), MS(20));
    lessons_keysource_t *src;
    apr_pool_t *p, *req;

    (void)state;
    apr_pool_create(&p, pool);
    assert_int_equal(lessons_keysource_start(&src, &o, p), APR_SUCCESS);
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    await_fetches(src, 4);
    assert_int_equal(stats_of(src).installed, 1);
    assert_int_equal(fake_read(&fake.reports_new), 1);
    assert_true(fake_read(&fake.freed) <= fake_read(&fake.calls) - 1);
    apr_pool_destroy(req);
    apr_pool_destroy(p);
    assert_int_equal(fake_read(&fake.freed), fake_read(&fake.calls));
}

/* The schedule's fetches (the first one included: a start or a reload)
 * do not spend the unknown-kid allowance: the first refetch fetches.
 * Within min_refresh of it, a refetch does not fetch, and says how long
 * ago and how long until the next may.
 */
static void test_refetch_limit(void **state)
{
    lessons_keysource_t *src;
    apr_interval_time_t since = -1, until = -1;
    apr_pool_t *req;
    int i;

    src = start(state, MS(600000), MS(600000));
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    fake_set("k2", NULL, 0);
    assert_int_equal(lessons_keysource_refetch(src, &since, &until),
                     LESSONS_KEYSOURCE_NEW);
    assert_int_equal(fake_read(&fake.calls), 2);
    fake_set("k3", NULL, 0);
    for (i = 0; i < 100; i++) {
        assert_int_equal(lessons_keysource_refetch(src, &since, &until),
                         LESSONS_KEYSOURCE_TOO_SOON);
    }
    assert_int_equal(fake_read(&fake.calls), 2);
    assert_true(since >= 0 && since < MS(600000));
    assert_true(until > 0 && until <= MS(600000));
    assert_true(since + until <= MS(600000) + MS(1));
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k2");
    apr_pool_destroy(req);
}

/* Past min_refresh a refetch fetches once and waits for it: NEW when
 * the set changed, SAME when it did not.
 */
static void test_refetch_after_interval(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *req;

    src = start(state, MS(600000), MS(50));
    apr_pool_create(&req, pool);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k1");
    apr_sleep(MS(60));
    assert_int_equal(lessons_keysource_refetch(src, NULL, NULL),
                     LESSONS_KEYSOURCE_SAME);
    assert_int_equal(fake_read(&fake.calls), 2);
    fake_set("k2", NULL, 0);
    apr_sleep(MS(60));
    assert_int_equal(lessons_keysource_refetch(src, NULL, NULL),
                     LESSONS_KEYSOURCE_NEW);
    assert_int_equal(fake_read(&fake.calls), 3);
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k2");
    apr_pool_destroy(req);
}

/* done hears of every fetch, where report hears only of changes and
 * failures: a good fetch of the same set, a failed one (the last good
 * set still in use), and which of them a refetch asked for.
 */
static void test_done_counts_every_fetch(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *req;

    src = start(state, MS(600000), MS(50));
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    assert_int_equal(fake_read(&fake.done_ok), 1);
    assert_int_equal(fake_read(&fake.done_asked), 0);
    assert_int_equal(fake_read(&fake.done_keys), 1);
    apr_sleep(MS(60));
    assert_int_equal(lessons_keysource_refetch(src, NULL, NULL),
                     LESSONS_KEYSOURCE_SAME);
    assert_int_equal(fake_read(&fake.done_ok), 2);
    assert_int_equal(fake_read(&fake.done_asked), 1);
    assert_int_equal(fake_read(&fake.reports_new), 1);
    fake_set("k1", "provider down", 0);
    apr_sleep(MS(60));
    assert_int_equal(lessons_keysource_refetch(src, NULL, NULL),
                     LESSONS_KEYSOURCE_SAME);
    assert_int_equal(fake_read(&fake.done_ok), 2);
    assert_int_equal(fake_read(&fake.done_failed), 1);
    assert_int_equal(fake_read(&fake.done_asked), 2);
    assert_int_equal(fake_read(&fake.done_keys), 1);
    apr_pool_destroy(req);
}

/* min_refresh above refresh is capped at refresh. */
static void test_min_refresh_capped(void **state)
{
    lessons_keysource_t *src;
    apr_interval_time_t since = 0, until = 0;
    apr_pool_t *req;

    src = start(state, MS(2000), MS(600000));
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    assert_int_equal(lessons_keysource_refetch(src, &since, &until),
                     LESSONS_KEYSOURCE_SAME);
    assert_int_equal(lessons_keysource_refetch(src, &since, &until),
                     LESSONS_KEYSOURCE_TOO_SOON);
    assert_true(until <= MS(2000));
    await_fetches(src, 3);          /* the refresh still comes */
    apr_pool_destroy(req);
}

/* A held set outlives its replacement; the last holder frees it. */
static void test_holds_keep_a_replaced_set(void **state)
{
    lessons_keysource_t *src;
    const lessons_keyset_t *old;
    apr_pool_t *req1, *req2, *req3;

    src = start(state, MS(600000), MS(20));
    apr_pool_create(&req1, pool);
    apr_pool_create(&req2, pool);
    apr_pool_create(&req3, pool);
    old = lessons_keysource_take(src, req1);
    assert_ptr_equal(lessons_keysource_take(src, req2), old);
    assert_int_equal(stats_of(src).holds, 3);   /* the source's + 2 */

    fake_set("k2", NULL, 0);
    apr_sleep(MS(30));
    assert_int_equal(lessons_keysource_refetch(src, NULL, NULL),
                     LESSONS_KEYSOURCE_NEW);
    assert_int_equal(stats_of(src).holds, 1);   /* the new set's own */
    assert_int_equal(fake_read(&fake.freed), 0);
    /* The old set is whole while held. */
    assert_string_equal(kid_of(old), "k1");
    assert_memory_equal(old->keys[0].key.data,
                        "0123456789abcdef0123456789abcdef", 32);
    apr_pool_destroy(req1);
    assert_int_equal(fake_read(&fake.freed), 0);
    apr_pool_destroy(req2);
    assert_int_equal(fake_read(&fake.freed), 1);

    assert_string_equal(kid_of(lessons_keysource_take(src, req3)), "k2");
    assert_int_equal(stats_of(src).holds, 2);
    apr_pool_clear(req3);
    assert_int_equal(stats_of(src).holds, 1);
    apr_pool_destroy(req3);
}

/* Stopping (the pool's cleanup) lets go of the source's set; a holder
 * that outlives the source would be a caller's bug, so none does here.
 */
static void test_stop_frees_the_set(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *p, *req;

    (void)state;
    apr_pool_create(&p, pool);
    {
        lessons_keysource_opts_t o = opts_of(MS(600000), MS(600000));

        assert_int_equal(lessons_keysource_start(&src, &o, p), APR_SUCCESS);
    }
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    apr_pool_destroy(req);
    assert_int_equal(fake_read(&fake.freed), 0);
    apr_pool_destroy(p);
    assert_int_equal(fake_read(&fake.freed), 1);
}

/* Stopping while a fetch is in flight waits for it, then frees. */
static void test_stop_during_fetch(void **state)
{
    lessons_keysource_t *src;
    apr_pool_t *p;
    apr_time_t end = apr_time_now() + DEADLINE;

    (void)state;
    fake_set("k1", NULL, MS(200));
    apr_pool_create(&p, pool);
    {
        lessons_keysource_opts_t o = opts_of(MS(600000), MS(600000));

        assert_int_equal(lessons_keysource_start(&src, &o, p), APR_SUCCESS);
    }
    while (fake_read(&fake.calls) == 0 && apr_time_now() < end) {
        apr_sleep(MS(5));
    }
    assert_int_equal(fake_read(&fake.calls), 1);
    apr_pool_destroy(p);            /* joins the thread */
    assert_int_equal(fake_read(&fake.freed), 1);
}

/* Many requests with an unknown kid at once: one fetch. */
typedef struct {
    lessons_keysource_t *src;
    lessons_keysource_refetch_e got;
} racer_t;

static void *APR_THREAD_FUNC racer(apr_thread_t *t, void *data)
{
    racer_t *r = data;

    r->got = lessons_keysource_refetch(r->src, NULL, NULL);
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static void run_racers(lessons_keysource_t *src, racer_t *racers, int n)
{
    apr_thread_t *threads[32];
    apr_status_t rv;
    int i;

    assert_true(n <= 32);
    for (i = 0; i < n; i++) {
        racers[i].src = src;
        racers[i].got = -1;
        assert_int_equal(apr_thread_create(&threads[i], NULL, racer,
                                           &racers[i], pool), APR_SUCCESS);
    }
    for (i = 0; i < n; i++) {
        apr_thread_join(&rv, threads[i]);
    }
}

static void test_racing_refetches_fetch_once(void **state)
{
    lessons_keysource_t *src;
    racer_t racers[6];
    apr_pool_t *req;
    int i, new = 0;

    src = start(state, MS(600000), MS(100));
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    fake_set("k2", NULL, MS(50));
    apr_sleep(MS(120));
    run_racers(src, racers, 6);
    for (i = 0; i < 6; i++) {
        assert_true(racers[i].got == LESSONS_KEYSOURCE_NEW
                    || racers[i].got == LESSONS_KEYSOURCE_TOO_SOON);
        new += racers[i].got == LESSONS_KEYSOURCE_NEW;
    }
    assert_true(new >= 1);
    assert_int_equal(fake_read(&fake.calls), 2);
    assert_int_equal(stats_of(src).installed, 2);
    apr_pool_destroy(req);
}

/* A slow provider holds at most max_waiters callers; the rest go on at
 * once with what there is.
 */
static void test_waiters_are_bounded(void **state)
{
    lessons_keysource_opts_t o = opts_of(MS(600000), MS(10));
    lessons_keysource_t *src;
    racer_t racers[6];
    apr_pool_t *req;
    apr_time_t end;
    int i, waited = 0, busy = 0, late = 0;

    o.max_waiters = 2;
    assert_int_equal(lessons_keysource_start(&src, &o, *state),
                     APR_SUCCESS);
    apr_pool_create(&req, pool);
    assert_non_null(lessons_keysource_take(src, req));
    apr_sleep(MS(20));
    fake_set("k2", NULL, MS(1500));
    /* One refetch starts the slow fetch; the others find it in flight. */
    run_racers(src, racers, 6);
    for (i = 0; i < 6; i++) {
        waited += racers[i].got == LESSONS_KEYSOURCE_NEW;
        busy += racers[i].got == LESSONS_KEYSOURCE_BUSY;
        /* one that came after the slow fetch ended waits for its own */
        late += racers[i].got == LESSONS_KEYSOURCE_SAME;
    }
    /* Only those that waited saw the new set; the others say they did
     * not wait.
     */
    assert_true(waited >= 1 && waited <= 2);
    assert_int_equal(waited + busy + late, 6);
    assert_true(busy >= 4 - late);
    assert_int_equal(stats_of(src).waiters, 0);
    end = apr_time_now() + DEADLINE;
    while (stats_of(src).installed < 2 && apr_time_now() < end) {
        apr_sleep(MS(5));
    }
    assert_string_equal(kid_of(lessons_keysource_take(src, req)), "k2");
    apr_pool_destroy(req);
}

/* Bad options are refused, not started. */
static void test_bad_options(void **state)
{
    lessons_keysource_opts_t o = opts_of(MS(1000), MS(1000));
    lessons_keysource_t *src = (void *)1;

    o.fetch = NULL;
    assert_int_equal(lessons_keysource_start(&src, &o, *state), APR_EINVAL);
    assert_null(src);
    o = opts_of(0, MS(1000));
    assert_int_equal(lessons_keysource_start(&src, &o, *state), APR_EINVAL);
    o = opts_of(MS(1000), 0);
    assert_int_equal(lessons_keysource_start(&src, &o, *state), APR_EINVAL);
}

/* The keys URL fetch refuses what lessons_fetch refuses (plain http),
 * before any network, in its own words.
 */
static void test_fetch_url_refuses_http(void **state)
{
    lessons_keysource_url_t url;
    const lessons_keyset_t *set = NULL;
    const char *err, *doc = NULL;
    apr_size_t len = 0;

    memset(&url, 0, sizeof(url));
    url.url = "http://127.0.0.1:1/jwks.json";
    url.algs = LESSONS_ALG_BIT(LESSONS_ALG_RS256);
    url.connect_timeout_ms = 1000;
    url.total_timeout_ms = 1000;
    err = lessons_keysource_fetch_url(&url, *state, *state, &set, &doc,
                                      &len);
    assert_non_null(err);
    assert_null(set);
    assert_null(doc);
}

/* ------------------------------------- one slot, several processes */

/* The fake's document parsed as another process would. */
static const char *fake_parse(void *baton, apr_pool_t *set_pool,
                              apr_pool_t *scratch, const char *doc,
                              apr_size_t len, const lessons_keyset_t **set)
{
    lessons_keyset_t *made = NULL;
    const char *err;

    (void)baton;
    (void)scratch;
    err = lessons_keyset_parse_jwks(set_pool, doc, len, &made);
    if (!err) {
        apr_pool_cleanup_register(set_pool, NULL, fake_freed,
                                  apr_pool_cleanup_null);
        *set = made;
    }
    return err;
}

/* A block of one slot in p, as post_config makes the server's. */
static lessons_keyshare_t *one_slot(apr_pool_t *p)
{
    static const unsigned char id[LESSONS_KEYSHARE_ID_LEN] = { 's' };
    apr_size_t size = lessons_keyshare_size(1, 4096);
    apr_global_mutex_t *lock;
    lessons_keyshare_t *ks;

    assert_int_equal(apr_global_mutex_create(&lock, NULL, APR_LOCK_DEFAULT,
                                             p), APR_SUCCESS);
    ks = lessons_keyshare_attach(apr_pcalloc(p, size), size, 1, 4096, 1,
                                 lock, p);
    assert_non_null(ks);
    assert_int_equal(lessons_keyshare_bind(ks, 0, id), 0);
    return ks;
}

/* A source on ks, as a process of the server starts one. */
static lessons_keysource_t *start_on(void **state, lessons_keyshare_t *ks,
                                     int lazy)
{
    lessons_keysource_opts_t o = opts_of(MS(600000), MS(600000));
    lessons_keysource_t *src = NULL;

    o.share = ks;
    o.slot = 0;
    o.parse = fake_parse;
    o.lazy = lazy;
    assert_int_equal(lessons_keysource_start(&src, &o, *state),
                     APR_SUCCESS);
    return src;
}

/* A second process (a new child) serves the set the first fetched,
 * without a fetch of its own, and without waiting.
 */
static void test_shared_new_child_adopts(void **state)
{
    lessons_keyshare_t *ks = one_slot(*state);
    lessons_keysource_t *a = start_on(state, ks, 0), *b;
    apr_pool_t *req;

    apr_pool_create(&req, pool);
    assert_string_equal(kid_of(lessons_keysource_take(a, req)), "k1");
    b = start_on(state, ks, 0);
    assert_string_equal(kid_of(lessons_keysource_take(b, req)), "k1");
    assert_int_equal(fake_read(&fake.calls), 1);
    assert_int_equal(fake_read(&fake.reports_new), 1);
    /* even with the provider down; and before it takes the set, a
     * process counts it as held (the health check asks so)
     */
    fake_set("k1", "provider down", 0);
    {
        lessons_keysource_t *c = start_on(state, ks, 1);
        lessons_keysource_state_t st;

        lessons_keysource_state(c, req, &st);
        assert_true(st.held);
        assert_true(st.installed > 0);
        assert_string_equal(kid_of(lessons_keysource_take(c, req)), "k1");
    }
    assert_int_equal(fake_read(&fake.calls), 1);
    apr_pool_destroy(req);
}

/* The unknown-kid allowance is the server's: one process's refetch
 * gives the other the new set at once, and the other may not fetch
 * again within min_refresh.
 */
static void test_shared_refetch_once_per_server(void **state)
{
    lessons_keyshare_t *ks = one_slot(*state);
    lessons_keysource_t *a = start_on(state, ks, 0), *b;
    apr_interval_time_t since = -1, until = -1;
    apr_pool_t *req;

    apr_pool_create(&req, pool);
    assert_string_equal(kid_of(lessons_keysource_take(a, req)), "k1");
    b = start_on(state, ks, 0);
    assert_string_equal(kid_of(lessons_keysource_take(b, req)), "k1");
    fake_set("k2", NULL, 0);
    assert_int_equal(lessons_keysource_refetch(b, NULL, NULL),
                     LESSONS_KEYSOURCE_NEW);
    assert_int_equal(fake_read(&fake.calls), 2);
    /* a: the new set, by the slot, with no fetch */
    assert_int_equal(lessons_keysource_refetch(a, NULL, NULL),
                     LESSONS_KEYSOURCE_NEW);
    assert_string_equal(kid_of(lessons_keysource_take(a, req)), "k2");
    fake_set("k3", NULL, 0);
    assert_int_equal(lessons_keysource_refetch(a, &since, &until),
                     LESSONS_KEYSOURCE_TOO_SOON);
    assert_true(until > 0 && until <= MS(600000));
    assert_int_equal(lessons_keysource_refetch(b, NULL, NULL),
                     LESSONS_KEYSOURCE_TOO_SOON);
    assert_int_equal(fake_read(&fake.calls), 2);
    apr_pool_destroy(req);
}

/* A document over the slot's room is refused, with the reason, and
 * nothing is published.
 */
static void test_shared_too_big(void **state)
{
    lessons_keyshare_t *ks = one_slot(*state);
    lessons_keysource_t *a;
    apr_pool_t *req;

    fake.pad = 5000;                /* the slot holds 4096 */
    a = start_on(state, ks, 0);
    apr_pool_create(&req, pool);
    assert_null(lessons_keysource_take(a, req));
    assert_int_equal(fake_read(&fake.reports_failed), 1);
    assert_non_null(strstr(fake.last_err, "does not fit the shared block"));
    assert_int_equal(lessons_keyshare_generation(ks, 0), 0);
    apr_pool_destroy(req);
}

/* One process (*a) starts a fetch that takes 200 ms and gives k1, or
 * fails with fail; a second process starts while it is under way and
 * takes a set in req: what it got, and how long the take waited.
 */
static const lessons_keyset_t *take_beside_a_fetch(void **state,
                                                   const char *fail,
                                                   lessons_keysource_t **a,
                                                   apr_pool_t *req,
                                                   apr_interval_time_t *took)
{
    lessons_keyshare_t *ks = one_slot(*state);
    const lessons_keyset_t *set;
    lessons_keysource_t *b;
    apr_time_t began;

    fake_set("k1", fail, MS(200));
    *a = start_on(state, ks, 0);
    apr_sleep(MS(50));              /* a's fetch is under way */
    b = start_on(state, ks, 0);
    began = apr_time_now();
    set = lessons_keysource_take(b, req);
    *took = apr_time_now() - began;
    return set;
}

/* While one process fetches (a slow provider), another that has no set
 * waits for that fetch rather than making its own, and its wait ends
 * as soon as it has that set, whichever of its threads took it: the
 * fetcher thread often adopts it first, and the request then waited
 * until its deadline (10 s in a prefork child, t/api/storm.t).  Which
 * thread comes first is the scheduler's: several rounds, each bounded
 * well below the wait.
 */
static void test_shared_wait_for_another_fetch(void **state)
{
    int round;

    for (round = 0; round < 8; round++) {
        lessons_keysource_t *a;
        apr_interval_time_t took;
        apr_pool_t *req;

        apr_pool_create(&req, pool);
        assert_string_equal(kid_of(take_beside_a_fetch(state, NULL, &a, req,
                                                       &took)), "k1");
        assert_true(took < DEADLINE / 2);
        assert_string_equal(kid_of(lessons_keysource_take(a, req)), "k1");
        apr_pool_destroy(req);
    }
    assert_int_equal(fake_read(&fake.calls), 8);
}

/* And when that other process's fetch fails, the wait ends with it
 * (no set: the request's 503 at once), not at the wait's deadline.
 */
static void test_shared_wait_ends_with_a_failed_fetch(void **state)
{
    int round;

    for (round = 0; round < 4; round++) {
        lessons_keysource_t *a;
        apr_interval_time_t took;
        apr_pool_t *req;

        apr_pool_create(&req, pool);
        assert_null(take_beside_a_fetch(state, "provider down", &a, req,
                                        &took));
        assert_true(took < DEADLINE / 2);
        apr_pool_destroy(req);
    }
    assert_int_equal(fake_read(&fake.calls), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lazy_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_does_not_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_first_take_waits_for_first_fetch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_fetch_fails,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_good_set_serves,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_retried_at_min_refresh,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_set_is_not_new,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_refetch_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refetch_after_interval,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_counts_every_fetch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_min_refresh_capped,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_holds_keep_a_replaced_set,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_frees_the_set,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_during_fetch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_racing_refetches_fetch_once,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiters_are_bounded,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_url_refuses_http,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_new_child_adopts,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_refetch_once_per_server,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_wait_for_another_fetch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_wait_ends_with_a_failed_fetch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_too_big,
                                        setup, teardown),
    };

    if (unit_pool_open() != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
