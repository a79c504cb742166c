/* Licensed under the Apache License, Version 2.0.
 *
 * test_gate.c: lessons_gate -- slots, a bounded number of waiters, the
 * deadline, and a waiter woken when a slot is given back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "apr_thread_proc.h"
#include "apr_time.h"

#include "lessons_gate.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define SOON(ms) (apr_time_now() + apr_time_from_msec(ms))

static void test_slots_then_timeout(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 2, 1);
    apr_time_t t0;

    (void)state;
    assert_non_null(gate);
    assert_int_equal(lessons_gate_enter(gate, SOON(0)), LESSONS_GATE_OK);
    assert_int_equal(lessons_gate_enter(gate, SOON(0)), LESSONS_GATE_OK);
    t0 = apr_time_now();
    assert_int_equal(lessons_gate_enter(gate, SOON(100)),
                     LESSONS_GATE_TIMEOUT);
    /* it waited for the deadline, and not much past it */
    assert_true(apr_time_now() - t0 >= apr_time_from_msec(90));
    lessons_gate_leave(gate);
    assert_int_equal(lessons_gate_enter(gate, SOON(0)), LESSONS_GATE_OK);
    lessons_gate_leave(gate);
    lessons_gate_leave(gate);
}

typedef struct {
    lessons_gate_t *gate;
    lessons_gate_e rc;
} waiter_t;

static void *APR_THREAD_FUNC wait_for_slot(apr_thread_t *t, void *data)
{
    waiter_t *w = data;

    w->rc = lessons_gate_enter(w->gate, SOON(5000));
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static void test_full_when_enough_wait_and_leave_wakes(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 1, 1);
    waiter_t w = { NULL, LESSONS_GATE_FULL };
    apr_thread_t *thread;
    apr_status_t trv;
    int i;

    (void)state;
    w.gate = gate;
    assert_int_equal(lessons_gate_enter(gate, SOON(0)), LESSONS_GATE_OK);
    assert_int_equal(apr_thread_create(&thread, NULL, wait_for_slot, &w,
                                       pool), APR_SUCCESS);
    /* once the other thread waits, a third request is turned away at
     * once, whatever its deadline
     */
    for (i = 0; i < 500; i++) {
        if (lessons_gate_enter(gate, SOON(0)) == LESSONS_GATE_FULL)
            break;
        apr_sleep(apr_time_from_msec(2));
    }
    assert_true(i < 500);
    assert_int_equal(lessons_gate_enter(gate, SOON(60000)),
                     LESSONS_GATE_FULL);
    lessons_gate_leave(gate);           /* wakes the waiter */
    apr_thread_join(&trv, thread);
    assert_int_equal(w.rc, LESSONS_GATE_OK);
    lessons_gate_leave(gate);
}

static void test_no_waiting_room_sheds_at_once(void **state)
{
    lessons_gate_t *gate = lessons_gate_make(pool, 1, 0);

    (void)state;
    assert_int_equal(lessons_gate_enter(gate, SOON(0)), LESSONS_GATE_OK);
    assert_int_equal(lessons_gate_enter(gate, SOON(60000)),
                     LESSONS_GATE_FULL);
    lessons_gate_resize(gate, 2, 0);    /* DBDMax learnt later */
    assert_int_equal(lessons_gate_enter(gate, SOON(0)), LESSONS_GATE_OK);
    lessons_gate_leave(gate);
    lessons_gate_leave(gate);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_then_timeout),
        cmocka_unit_test(test_full_when_enough_wait_and_leave_wakes),
        cmocka_unit_test(test_no_waiting_room_sheds_at_once),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
