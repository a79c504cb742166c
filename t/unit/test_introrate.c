/* Licensed under the Apache License, Version 2.0.
 *
 * test_introrate.c: lessons_introrate -- the introspection endpoint's
 * budget of questions (issue 55, item 4): the server's rate and burst,
 * one client's share of it whatever else it does, other clients asking
 * beside a client over its share, the server's budget over every
 * client, Retry-After, refilling with time, a clock that goes back, a
 * table of clients that forgets only the full ones, and setup keeping
 * or laying out anew.  Times are given, not read.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "auth/lessons_introrate.h"

#include "unit_pool.h"

#define SEC     APR_USEC_PER_SEC
#define T0      ((apr_time_t)1000 * SEC)

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* A client by number: an IPv4-mapped address 10.0.x.y. */
static const unsigned char *client(unsigned int i)
{
    static unsigned char c[LESSONS_INTRORATE_CLIENT_LEN];

    memset(c, 0, sizeof(c));
    c[10] = 0xff;
    c[11] = 0xff;
    c[12] = 10;
    c[14] = (unsigned char)(i >> 8);
    c[15] = (unsigned char)i;
    return c;
}

static void *state_of(apr_uint32_t rate, apr_uint32_t client_rate)
{
    void *mem = apr_palloc(pool, lessons_introrate_size());

    assert_int_equal(lessons_introrate_setup(mem, rate, client_rate, 7, T0,
                                             1), 0);
    return mem;
}

static lessons_introrate_e take(void *s, unsigned int c, apr_time_t now)
{
    return lessons_introrate_take(s, client(c), now, NULL);
}

/* Questions client c gets at now, asking until refused (at most 1000). */
static int drain(void *s, unsigned int c, apr_time_t now,
                 lessons_introrate_e *why)
{
    lessons_introrate_e rc;
    int n = 0;

    while ((rc = take(s, c, now)) == LESSONS_INTRORATE_ASK && n < 1000) {
        n++;
    }
    if (why) {
        *why = rc;
    }
    return n;
}

static void test_setup_refused(void **state)
{
    void *mem = apr_palloc(pool, lessons_introrate_size());

    (void)state;
    assert_int_equal(lessons_introrate_setup(mem, 0, 0, 1, T0, 1), -1);
    assert_int_equal(lessons_introrate_setup(mem, 10, 0, 1, T0, 1), -1);
    assert_int_equal(lessons_introrate_setup(mem, 10, 11, 1, T0, 1), -1);
    assert_int_equal(lessons_introrate_setup(mem, LESSONS_INTRORATE_MAX + 1,
                                             1, 1, T0, 1), -1);
    assert_int_equal(lessons_introrate_setup(NULL, 10, 1, 1, T0, 1), -1);
    assert_int_equal(lessons_introrate_size() % 8, 0);
}

/* One client alone, at one instant: its share (a second's worth), then
 * refused as over its share, with a Retry-After of its refill.
 */
static void test_client_share(void **state)
{
    void *s = state_of(20, 5);
    lessons_introrate_e why;
    int retry = 0;

    (void)state;
    assert_int_equal(drain(s, 1, T0, &why), 5);
    assert_int_equal(why, LESSONS_INTRORATE_CLIENT_OVER);
    assert_int_equal(lessons_introrate_take(s, client(1), T0, &retry),
                     LESSONS_INTRORATE_CLIENT_OVER);
    assert_int_equal(retry, 1);
    /* A fifth of a second gives it one more (5 a second). */
    assert_int_equal(take(s, 1, T0 + SEC / 5), LESSONS_INTRORATE_ASK);
    assert_int_equal(take(s, 1, T0 + SEC / 5), LESSONS_INTRORATE_CLIENT_OVER);
}

/* One client flooding at every microsecond it likes never leaves
 * another without its own share, and takes no more than its own over
 * time (whatever tokens it sends: the unit never sees them).
 */
static void test_flood_leaves_others(void **state)
{
    void *s = state_of(20, 5);
    apr_time_t now;
    int flood = 0, good = 0, i;

    (void)state;
    /* Ten seconds, the flood asking 1000 times every 10 ms. */
    for (now = T0; now < T0 + 10 * SEC; now += SEC / 100) {
        for (i = 0; i < 1000; i++) {
            if (take(s, 1, now) == LESSONS_INTRORATE_ASK) {
                flood++;
            }
        }
        /* The other client asks four times a second, within its own
         * share: always answered.
         */
        if ((now - T0) % (SEC / 4) == 0) {
            assert_int_equal(take(s, 2, now), LESSONS_INTRORATE_ASK);
            good++;
        }
    }
    assert_int_equal(good, 40);
    /* Its burst (5) and 5 a second for 10 s, at most. */
    assert_true(flood <= 5 + 5 * 10);
    assert_true(flood >= 5 * 10 - 1);
}

/* Many clients: the server's budget bounds them all (503, its own
 * Retry-After), a burst of one second's worth, then rate a second.
 */
static void test_server_budget(void **state)
{
    void *s = state_of(20, 5);
    lessons_introrate_e why = LESSONS_INTRORATE_ASK;
    apr_time_t now;
    int asked = 0, retry = 0;
    unsigned int c;

    (void)state;
    for (c = 0; c < 10; c++) {
        asked += drain(s, 100 + c, T0, &why);
    }
    assert_int_equal(asked, 20);
    assert_int_equal(why, LESSONS_INTRORATE_SERVER_OVER);
    assert_int_equal(lessons_introrate_take(s, client(200), T0, &retry),
                     LESSONS_INTRORATE_SERVER_OVER);
    assert_int_equal(retry, 1);
    /* Thirty seconds of 50 clients asking all they can, every 50 ms:
     * at most 20 a second.
     */
    asked = 0;
    for (now = T0 + SEC / 20; now <= T0 + 30 * SEC; now += SEC / 20) {
        for (c = 0; c < 50; c++) {
            asked += drain(s, 300 + c, now, NULL);
        }
    }
    assert_true(asked <= 20 * 30 + 1);
    assert_true(asked >= 20 * 30 - 20);
}

/* A clock read a moment earlier by another process fills nothing and
 * takes nothing back; a long idle fills to a second's worth only.
 */
static void test_clock(void **state)
{
    void *s = state_of(10, 10);

    (void)state;
    assert_int_equal(drain(s, 1, T0, NULL), 10);
    assert_int_equal(take(s, 1, T0 - SEC), LESSONS_INTRORATE_CLIENT_OVER);
    assert_int_equal(drain(s, 1, T0 + 3600 * SEC, NULL), 10);
}

/* The table of clients: many clients come and go; one that asked a lot
 * (its bucket empty) is remembered, never made full again by others
 * passing through its set.
 */
static void test_table_keeps_the_busy(void **state)
{
    void *s = state_of(1000000, 2);
    lessons_introrate_stats_t st;
    unsigned int c;

    (void)state;
    assert_int_equal(drain(s, 1, T0, NULL), 2);
    /* 5000 other clients, once each, at the same instant. */
    for (c = 1000; c < 6000; c++) {
        assert_int_equal(take(s, c, T0), LESSONS_INTRORATE_ASK);
    }
    assert_int_equal(take(s, 1, T0), LESSONS_INTRORATE_CLIENT_OVER);
    lessons_introrate_stats(s, &st);
    assert_int_equal(st.rate, 1000000);
    assert_int_equal(st.client_rate, 2);
    assert_int_equal(st.asked, 5002);
    assert_int_equal(st.client_over, 2);   /* drain's, then this */
}

/* setup keeps the state for the same rates (a restart), lays it out
 * anew when fresh or for other rates.
 */
static void test_setup_keeps(void **state)
{
    void *s = state_of(10, 2);

    (void)state;
    assert_int_equal(drain(s, 1, T0, NULL), 2);
    assert_int_equal(lessons_introrate_setup(s, 10, 2, 7, T0, 0), 0);
    assert_int_equal(take(s, 1, T0), LESSONS_INTRORATE_CLIENT_OVER);
    assert_int_equal(lessons_introrate_setup(s, 10, 3, 7, T0, 0), 0);
    assert_int_equal(drain(s, 1, T0, NULL), 3);
    assert_int_equal(lessons_introrate_setup(s, 10, 3, 7, T0, 1), 0);
    assert_int_equal(drain(s, 1, T0, NULL), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_refused),
        cmocka_unit_test(test_client_share),
        cmocka_unit_test(test_flood_leaves_others),
        cmocka_unit_test(test_server_budget),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_table_keeps_the_busy),
        cmocka_unit_test(test_setup_keeps),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
