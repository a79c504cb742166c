/* Licensed under the Apache License, Version 2.0.
 *
 * test_throttle.c: lessons_throttle -- an identical line once a second,
 * the count of those held back, different lines independent.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ops/lessons_throttle.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define SEC(s) ((apr_time_t)1700000000 * APR_USEC_PER_SEC \
                + (apr_time_t)((s) * APR_USEC_PER_SEC))

static void test_once_a_second_with_count(void **state)
{
    lessons_throttle_t *t = lessons_throttle_make(pool);
    unsigned long left = 99;

    (void)state;
    assert_non_null(t);
    assert_true(lessons_throttle_pass(t, "db down", SEC(0), &left));
    assert_int_equal(left, 0);
    assert_false(lessons_throttle_pass(t, "db down", SEC(0.1), &left));
    assert_false(lessons_throttle_pass(t, "db down", SEC(0.9), &left));
    /* another kind is not held back */
    assert_true(lessons_throttle_pass(t, "db full", SEC(0.9), &left));
    assert_int_equal(left, 0);
    assert_true(lessons_throttle_pass(t, "db down", SEC(1.0), &left));
    assert_int_equal(left, 2);
    assert_true(lessons_throttle_pass(t, "db down", SEC(5), &left));
    assert_int_equal(left, 0);
}

static void test_null_passes(void **state)
{
    unsigned long left = 7;

    (void)state;
    assert_true(lessons_throttle_pass(NULL, "x", SEC(0), &left));
    assert_int_equal(left, 0);
    assert_true(lessons_throttle_pass(lessons_throttle_make(pool), NULL,
                                      SEC(0), &left));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_a_second_with_count),
        cmocka_unit_test(test_null_passes),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
