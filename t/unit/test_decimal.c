/* Licensed under the Apache License, Version 2.0.
 *
 * test_decimal.c: lessons_decimal_i64, and that what it reads does not
 * depend on errno, which a signal handler may change at any moment (as
 * prefork's does on every graceful restart: the restart storm's rare
 * 500).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/lessons_decimal.h"
#include "api/lessons_route.h"

static int parses(const char *s, apr_int64_t min, apr_int64_t max,
                  apr_int64_t *out)
{
    return lessons_decimal_i64(s, strlen(s), min, max, out);
}

static void test_whole_numbers(void **state)
{
    apr_int64_t v = 0;

    (void)state;
    assert_true(parses("0", APR_INT64_MIN, APR_INT64_MAX, &v));
    assert_true(v == 0);
    assert_true(parses("45", APR_INT64_MIN, APR_INT64_MAX, &v));
    assert_true(v == 45);
    assert_true(parses("-7", APR_INT64_MIN, APR_INT64_MAX, &v));
    assert_true(v == -7);
    assert_true(parses("007", APR_INT64_MIN, APR_INT64_MAX, &v));
    assert_true(v == 7);
    assert_true(parses("9223372036854775807", APR_INT64_MIN,
                       APR_INT64_MAX, &v));
    assert_true(v == APR_INT64_MAX);
    assert_true(parses("-9223372036854775808", APR_INT64_MIN,
                       APR_INT64_MAX, &v));
    assert_true(v == APR_INT64_MIN);
    /* Only the n bytes given. */
    assert_true(lessons_decimal_i64("12/3", 2, 0, 100, &v));
    assert_true(v == 12);
}

static void test_not_whole_numbers(void **state)
{
    static const char *const bad[] = {
        "", "-", "+1", " 1", "1 ", "1a", "0x10", "1.5", "--1", "1-",
        "9223372036854775808", "-9223372036854775809",
        "99999999999999999999999", NULL
    };
    apr_int64_t v = 42;
    int i;

    (void)state;
    for (i = 0; bad[i]; i++) {
        if (parses(bad[i], APR_INT64_MIN, APR_INT64_MAX, &v)) {
            print_error("\"%s\" parsed as %lld\n", bad[i], (long long)v);
        }
        assert_false(parses(bad[i], APR_INT64_MIN, APR_INT64_MAX, &v));
        assert_true(v == 42);
    }
    assert_false(lessons_decimal_i64(NULL, 0, 0, 1, &v));
    assert_false(lessons_decimal_i64("5", 0, 0, 9, &v));
}

static void test_bounds(void **state)
{
    apr_int64_t v = 0;

    (void)state;
    assert_true(parses("2147483647", -2147483647 - 1, 2147483647, &v));
    assert_false(parses("2147483648", -2147483647 - 1, 2147483647, &v));
    assert_false(parses("-2147483649", -2147483647 - 1, 2147483647, &v));
    assert_false(parses("3", 4, 5, &v));
}

/* What prefork's SIGUSR1 handler does to errno the second time it runs:
 * it closes its listeners again, and close fails with EBADF.
 */
static void close_again(int sig)
{
    (void)sig;
    (void)close(-1);
}

/* Numbers read while signals that set errno come every 20 us: each must
 * read right.  Reading errno after apr_strtoi64 failed here thousands of
 * times in a second.
 */
static void test_a_signal_that_sets_errno_changes_nothing(void **state)
{
    struct sigaction sa, old;
    struct itimerval every = { { 0, 20 }, { 0, 20 } }, off = { { 0, 0 },
                                                               { 0, 0 } };
    long i, wrong = 0, n = 2000000;

    (void)state;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = close_again;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    assert_int_equal(setitimer(ITIMER_REAL, &every, NULL), 0);
    for (i = 0; i < n; i++) {
        apr_int64_t v = 0;
        lessons_route_t r = lessons_route_match("/api/lessons",
                                                "/api/lessons/45");

        if (!parses("45", APR_INT64_MIN, APR_INT64_MAX, &v) || v != 45
            || r.route != LESSONS_ROUTE_ITEM || r.arg != 45) {
            wrong++;
        }
    }
    assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
    assert_int_equal(sigaction(SIGALRM, &old, NULL), 0);
    assert_int_equal(wrong, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_numbers),
        cmocka_unit_test(test_not_whole_numbers),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_a_signal_that_sets_errno_changes_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
