/* Licensed under the Apache License, Version 2.0.
 *
 * test_gate.c: lessons_gate -- slots, the deadline, nobody shed while
 * slots come back, shedding once none has come back for the stall
 * bound, and no connection attempt that would outlast the deadline
 * while the database is out of reach.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_thread_proc.h"
#include "apr_time.h"

#include "store/lessons_gate.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define SOON(ms) (apr_time_now() + apr_time_from_msec(ms))

#define MS(n) apr_time_from_msec(n)

static void test_slots_then_timeout(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 2, 1, MS(60000));
    apr_time_t t0;
    int waited = -1;

    (void)state;
    assert_non_null(gate);
    assert_int_equal(lessons_gate_enter(gate, SOON(0), &waited),
                     LESSONS_GATE_OK);
    assert_int_equal(waited, 0);
    assert_int_equal(lessons_gate_enter(gate, SOON(0), NULL), LESSONS_GATE_OK);
    t0 = apr_time_now();
    assert_int_equal(lessons_gate_enter(gate, SOON(100), &waited),
                     LESSONS_GATE_TIMEOUT);
    assert_int_equal(waited, 1);
    /* it waited for the deadline, and not much past it */
    assert_true(apr_time_now() - t0 >= MS(90));
    lessons_gate_leave(gate);
    assert_int_equal(lessons_gate_enter(gate, SOON(0), &waited),
                     LESSONS_GATE_OK);
    assert_int_equal(waited, 0);
    lessons_gate_leave(gate);
    lessons_gate_leave(gate);
}

typedef struct {
    lessons_gate_t *gate;
    apr_interval_time_t deadline, hold;
    int rounds;
    int ok, full, timeout;
    apr_interval_time_t took;       /* of the last enter */
    apr_time_t end;                 /* when the last enter returned */
} client_t;

/* A request: enter, hold the slot a while, leave; rounds times. */
static void *APR_THREAD_FUNC client(apr_thread_t *t, void *data)
{
    client_t *c = data;
    int i;

    for (i = 0; i < c->rounds; i++) {
        apr_time_t t0 = apr_time_now();
        lessons_gate_e rc = lessons_gate_enter(c->gate,
                                               apr_time_now() + c->deadline,
                                               NULL);

        c->end = apr_time_now();
        c->took = c->end - t0;
        if (rc == LESSONS_GATE_OK) {
            c->ok++;
            apr_sleep(c->hold);
            lessons_gate_leave(c->gate);
        }
        else if (rc == LESSONS_GATE_FULL) {
            c->full++;
        }
        else {
            c->timeout++;
        }
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static void run_clients(client_t *c, int n)
{
    apr_thread_t *threads[32];
    apr_status_t rv;
    int i;

    assert_true(n <= 32);
    for (i = 0; i < n; i++) {
        assert_int_equal(apr_thread_create(&threads[i], NULL, client, &c[i],
                                           pool), APR_SUCCESS);
    }
    for (i = 0; i < n; i++) {
        apr_thread_join(&rv, threads[i]);
    }
}

/* A database that answers sheds nobody, however many wait: 24 clients
 * on 2 slots with no waiting room, each holding 2 ms, all get in.
 */
static void test_answering_database_sheds_nobody(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 2, 0, MS(1000));
    client_t c[24];
    int i, ok = 0;

    (void)state;
    memset(c, 0, sizeof(c));
    for (i = 0; i < 24; i++) {
        c[i].gate = gate;
        c[i].deadline = MS(30000);
        c[i].hold = MS(2);
        c[i].rounds = 20;
    }
    run_clients(c, 24);
    for (i = 0; i < 24; i++) {
        assert_int_equal(c[i].full, 0);
        assert_int_equal(c[i].timeout, 0);
        ok += c[i].ok;
    }
    assert_int_equal(ok, 24 * 20);
}

/* A database that stops answering: once no slot has come back for the
 * stall bound, waiters past the room leave with FULL (not at their
 * deadline), those within it keep waiting, and newcomers are shed at
 * once; a slot given back lets a waiter in.
 */
static void test_stalled_database_sheds(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 1, 1, MS(150));
    client_t c[3];
    apr_thread_t *threads[3];
    apr_status_t rv;
    apr_time_t t0, filled = apr_time_now();
    int i, full = 0, ok = 0, waited = -1;

    (void)state;
    memset(c, 0, sizeof(c));
    assert_int_equal(lessons_gate_enter(gate, SOON(0), NULL), LESSONS_GATE_OK);
    for (i = 0; i < 3; i++) {
        c[i].gate = gate;
        c[i].deadline = MS(20000);
        c[i].hold = 0;
        c[i].rounds = 1;
        assert_int_equal(apr_thread_create(&threads[i], NULL, client, &c[i],
                                           pool), APR_SUCCESS);
    }
    /* Two of the three leave with FULL after the stall bound. */
    t0 = apr_time_now();
    while (apr_time_now() - t0 < MS(10000)) {
        full = c[0].full + c[1].full + c[2].full;
        if (full == 2) {
            break;
        }
        apr_sleep(MS(5));
    }
    assert_int_equal(full, 2);
    for (i = 0; i < 3; i++) {
        if (c[i].full) {
            assert_true(c[i].end - filled >= MS(150));
            assert_true(c[i].took < MS(10000));
        }
    }
    /* A newcomer is turned away at once, whatever its deadline. */
    t0 = apr_time_now();
    assert_int_equal(lessons_gate_enter(gate, SOON(60000), &waited),
                     LESSONS_GATE_FULL);
    assert_int_equal(waited, 0);
    assert_true(apr_time_now() - t0 < MS(1000));
    /* The slot comes back: the one waiter within the room gets it. */
    lessons_gate_leave(gate);
    for (i = 0; i < 3; i++) {
        apr_thread_join(&rv, threads[i]);
        ok += c[i].ok;
    }
    assert_int_equal(ok, 1);
}

/* Without waiting room, a request waits for the stall bound, not for
 * its deadline; a resize (DBDMax learnt later) makes room.
 */
static void test_no_waiting_room_sheds_at_stall(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 1, 0, MS(100));
    apr_time_t t0;
    int waited = -1;

    (void)state;
    assert_int_equal(lessons_gate_enter(gate, SOON(0), NULL), LESSONS_GATE_OK);
    t0 = apr_time_now();
    assert_int_equal(lessons_gate_enter(gate, SOON(60000), &waited),
                     LESSONS_GATE_FULL);
    assert_int_equal(waited, 1);    /* it waited, then the gate stalled */
    assert_true(apr_time_now() - t0 >= MS(90));
    assert_true(apr_time_now() - t0 < MS(10000));
    lessons_gate_resize(gate, 2, 0);
    assert_int_equal(lessons_gate_enter(gate, SOON(0), NULL), LESSONS_GATE_OK);
    lessons_gate_leave(gate);
    lessons_gate_leave(gate);
}

/* Ask for the turn with left ms before the deadline; given it, give it
 * back as an attempt that made a connection (made) or not, after took
 * ms.
 */
static lessons_gate_e attempt(lessons_gate_t *gate, int left, int made,
                              int took)
{
    lessons_gate_e rc = lessons_gate_connect_begin(gate, SOON(left));

    if (rc == LESSONS_GATE_OK) {
        assert_true(lessons_gate_connecting(gate));
        lessons_gate_connect_end(gate, made, MS(took));
    }
    assert_false(lessons_gate_connecting(gate));
    return rc;
}

/* The last connection attempt made none after 2 s: a request with 1 s
 * left does not try; one with 3 s left does.  A connection made clears
 * it.
 */
static void test_out_of_reach_no_late_attempt(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 1, 1, MS(60000));

    (void)state;
    assert_non_null(gate);
    assert_int_equal(attempt(gate, 1000, 1, 2000), LESSONS_GATE_OK);
    assert_int_equal(attempt(gate, 3000, 0, 2000), LESSONS_GATE_OK);
    assert_int_equal(attempt(gate, 1000, 1, 1), LESSONS_GATE_LATE);
    assert_int_equal(attempt(gate, 3000, 1, 2500), LESSONS_GATE_OK);
    assert_int_equal(attempt(gate, 1000, 1, 1), LESSONS_GATE_OK);
}

typedef struct {
    lessons_gate_t *gate;
    apr_interval_time_t deadline;
    lessons_gate_e rc;
    apr_interval_time_t took;
} asker_t;

/* A request's turn to connect: taken, given back at once as made. */
static void *APR_THREAD_FUNC asker(apr_thread_t *t, void *data)
{
    asker_t *a = data;
    apr_time_t t0 = apr_time_now();

    a->rc = lessons_gate_connect_begin(a->gate, t0 + a->deadline);
    a->took = apr_time_now() - t0;
    if (a->rc == LESSONS_GATE_OK) {
        lessons_gate_connect_end(a->gate, 1, MS(1));
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

/* One asks at a time: while one connects (the pool's lock held), the
 * others wait, until their deadline at most; one that would start too
 * late passes the turn on, so that the next with time enough gets it
 * at once, not at its deadline.
 */
static void test_one_connects_at_a_time(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 4, 4, MS(60000));
    apr_thread_t *threads[3];
    asker_t a[3];
    apr_status_t rv;
    int i;

    (void)state;
    memset(a, 0, sizeof(a));
    assert_int_equal(lessons_gate_connect_begin(gate, SOON(5000)),
                     LESSONS_GATE_OK);
    a[0].deadline = MS(150);        /* gone before the turn comes back */
    a[1].deadline = MS(1100);       /* under 1 s left when it comes */
    a[2].deadline = MS(8000);
    for (i = 0; i < 3; i++) {
        a[i].gate = gate;
        assert_int_equal(apr_thread_create(&threads[i], NULL, asker, &a[i],
                                           pool), APR_SUCCESS);
        apr_sleep(MS(100));         /* in this order */
    }
    apr_sleep(MS(100));
    lessons_gate_connect_end(gate, 0, MS(1000));
    for (i = 0; i < 3; i++) {
        apr_thread_join(&rv, threads[i]);
    }
    assert_int_equal(a[0].rc, LESSONS_GATE_TIMEOUT);
    assert_true(a[0].took >= MS(140) && a[0].took < MS(1000));
    assert_int_equal(a[1].rc, LESSONS_GATE_LATE);
    assert_int_equal(a[2].rc, LESSONS_GATE_OK);
    assert_true(a[2].took < MS(3000));
    assert_false(lessons_gate_connecting(gate));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_then_timeout),
        cmocka_unit_test(test_answering_database_sheds_nobody),
        cmocka_unit_test(test_stalled_database_sheds),
        cmocka_unit_test(test_no_waiting_room_sheds_at_stall),
        cmocka_unit_test(test_out_of_reach_no_late_attempt),
        cmocka_unit_test(test_one_connects_at_a_time),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
