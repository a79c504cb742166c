/* Licensed under the Apache License, Version 2.0.
 *
 * test_inflight.c: lessons_inflight -- two threads asking about one key
 * make one leader, the other waits and is told how the leader's ask went
 * (kept, failed, not kept); two keys make two leaders that never wait
 * for each other; a follower's deadline holds; a full table sends a
 * thread alone; a slot is free again once its waiters have read it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_thread_proc.h"
#include "apr_time.h"

#include "auth/lessons_inflight.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define SOON(ms) (apr_time_now() + apr_time_from_msec(ms))

static unsigned char key_a[LESSONS_INFLIGHT_KEY_LEN] = { 'a' };
static unsigned char key_b[LESSONS_INFLIGHT_KEY_LEN] = { 'b' };

/* A thread that joins once and says what it got and when. */
typedef struct {
    lessons_inflight_t *f;
    const unsigned char *key;
    apr_time_t deadline;
    lessons_inflight_e how;
    int slot;
    apr_time_t at;
    int land_after;                 /* if it leads: land KEPT once this
                                     * many wait for it */
} joiner_t;

static int wait_for(lessons_inflight_t *f, const unsigned char *key, int n);

static void *APR_THREAD_FUNC join(apr_thread_t *t, void *data)
{
    joiner_t *j = data;

    j->how = lessons_inflight_join(j->f, j->key, j->deadline, &j->slot);
    j->at = apr_time_now();
    /* No cmocka assertion on this thread: had the follower not come, it
     * would lead itself, and the main thread's count says so.
     */
    if (j->how == LESSONS_INFLIGHT_LEAD && j->land_after) {
        wait_for(j->f, j->key, j->land_after);
        lessons_inflight_land(j->f, j->slot, LESSONS_INFLIGHT_KEPT);
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static apr_thread_t *start(joiner_t *j, lessons_inflight_t *f,
                           const unsigned char *key, apr_time_t deadline,
                           int land_after)
{
    apr_thread_t *t = NULL;

    memset(j, 0, sizeof(*j));
    j->f = f;
    j->key = key;
    j->deadline = deadline;
    j->how = (lessons_inflight_e)-1;
    j->land_after = land_after;
    assert_int_equal(apr_thread_create(&t, NULL, join, j, pool),
                     APR_SUCCESS);
    return t;
}

static void finish(apr_thread_t *t)
{
    apr_status_t rv;

    assert_int_equal(apr_thread_join(&rv, t), APR_SUCCESS);
}

/* Until n threads wait for key's leader (10 s at most, however busy
 * the machine): no landing comes before its followers joined.  1 if
 * they did.
 */
static int wait_for(lessons_inflight_t *f, const unsigned char *key, int n)
{
    apr_time_t end = SOON(10000);

    while (lessons_inflight_waiting(f, key) < n && apr_time_now() < end) {
        apr_sleep(apr_time_from_msec(5));
    }
    return lessons_inflight_waiting(f, key) == n;
}

static void settle(lessons_inflight_t *f, const unsigned char *key, int n)
{
    assert_true(wait_for(f, key, n));
}

/* One leader lands how; a follower of the same key hears it. */
static void follow(lessons_inflight_e how)
{
    lessons_inflight_t *f = lessons_inflight_make(pool, 4);
    joiner_t j;
    apr_thread_t *t;
    int slot;

    assert_non_null(f);
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(5000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    assert_true(slot >= 0);
    t = start(&j, f, key_a, SOON(15000), 0);
    settle(f, key_a, 1);
    assert_int_equal((int)j.how, -1);      /* still waiting */
    lessons_inflight_land(f, slot, how);
    finish(t);
    assert_int_equal(j.how, how);
    assert_int_equal(j.slot, -1);
    /* The slot is free: the next ask about the key leads again. */
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(5000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    lessons_inflight_land(f, slot, LESSONS_INFLIGHT_KEPT);
}

static void test_one_key_one_leader_follower_takes_it(void **state)
{
    (void)state;
    follow(LESSONS_INFLIGHT_KEPT);
}

static void test_leader_failed_follower_fails(void **state)
{
    (void)state;
    follow(LESSONS_INFLIGHT_FAILED);
}

static void test_not_kept_follower_asks_alone(void **state)
{
    (void)state;
    follow(LESSONS_INFLIGHT_ALONE);
}

/* Two threads at once on one key: exactly one leads (and lands once the
 * other waits), the other takes its answer.
 */
static void test_two_threads_one_leader(void **state)
{
    lessons_inflight_t *f = lessons_inflight_make(pool, 4);
    joiner_t j[2];
    apr_thread_t *t[2];
    int i, leads = 0, kept = 0;

    (void)state;
    assert_non_null(f);
    for (i = 0; i < 2; i++) {
        t[i] = start(&j[i], f, key_a, SOON(15000), 1);
    }
    for (i = 0; i < 2; i++) {
        finish(t[i]);
        leads += j[i].how == LESSONS_INFLIGHT_LEAD;
        kept += j[i].how == LESSONS_INFLIGHT_KEPT;
    }
    assert_int_equal(leads, 1);
    assert_int_equal(kept, 1);
}

/* Two keys: two leaders, neither waits for the other. */
static void test_two_keys_two_leaders(void **state)
{
    lessons_inflight_t *f = lessons_inflight_make(pool, 4);
    joiner_t j;
    apr_thread_t *t;
    apr_time_t t0;
    int slot;

    (void)state;
    assert_non_null(f);
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(5000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    t0 = apr_time_now();
    t = start(&j, f, key_b, SOON(5000), 0);
    finish(t);
    assert_int_equal(j.how, LESSONS_INFLIGHT_LEAD);
    assert_true(j.slot >= 0 && j.slot != slot);
    /* It did not wait for key a's leader (which never landed yet). */
    assert_true(j.at - t0 < apr_time_from_msec(4000));
    lessons_inflight_land(f, j.slot, LESSONS_INFLIGHT_KEPT);
    lessons_inflight_land(f, slot, LESSONS_INFLIGHT_KEPT);
}

/* A leader that never lands: the follower ends at its deadline, LATE. */
static void test_deadline(void **state)
{
    lessons_inflight_t *f = lessons_inflight_make(pool, 4);
    joiner_t j;
    apr_thread_t *t;
    apr_time_t deadline;
    int slot;

    (void)state;
    assert_non_null(f);
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(5000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    deadline = SOON(300);
    t = start(&j, f, key_a, deadline, 0);
    finish(t);
    assert_int_equal(j.how, LESSONS_INFLIGHT_LATE);
    assert_true(j.at >= deadline);
    /* The leader still lands; with no one waiting the slot is free. */
    lessons_inflight_land(f, slot, LESSONS_INFLIGHT_KEPT);
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(5000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    lessons_inflight_land(f, slot, LESSONS_INFLIGHT_KEPT);
}

/* A full table: the next key asks alone, without a slot. */
static void test_full_table_asks_alone(void **state)
{
    lessons_inflight_t *f = lessons_inflight_make(pool, 1);
    int slot, other;

    (void)state;
    assert_non_null(f);
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(5000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    assert_int_equal(lessons_inflight_join(f, key_b, SOON(5000), &other),
                     LESSONS_INFLIGHT_ALONE);
    assert_int_equal(other, -1);
    lessons_inflight_land(f, slot, LESSONS_INFLIGHT_KEPT);
    assert_int_equal(lessons_inflight_join(f, key_b, SOON(5000), &other),
                     LESSONS_INFLIGHT_LEAD);
    lessons_inflight_land(f, other, LESSONS_INFLIGHT_KEPT);
    assert_null(lessons_inflight_make(pool, 0));
}

/* Many followers of one key all hear the one landing. */
static void test_many_followers(void **state)
{
    lessons_inflight_t *f = lessons_inflight_make(pool, 4);
    joiner_t j[8];
    apr_thread_t *t[8];
    int i, slot;

    (void)state;
    assert_non_null(f);
    assert_int_equal(lessons_inflight_join(f, key_a, SOON(15000), &slot),
                     LESSONS_INFLIGHT_LEAD);
    for (i = 0; i < 8; i++) {
        t[i] = start(&j[i], f, key_a, SOON(15000), 0);
    }
    settle(f, key_a, 8);
    lessons_inflight_land(f, slot, LESSONS_INFLIGHT_FAILED);
    for (i = 0; i < 8; i++) {
        finish(t[i]);
        assert_int_equal(j[i].how, LESSONS_INFLIGHT_FAILED);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_key_one_leader_follower_takes_it),
        cmocka_unit_test(test_leader_failed_follower_fails),
        cmocka_unit_test(test_not_kept_follower_asks_alone),
        cmocka_unit_test(test_two_threads_one_leader),
        cmocka_unit_test(test_two_keys_two_leaders),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_full_table_asks_alone),
        cmocka_unit_test(test_many_followers),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
