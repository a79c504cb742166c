/* Licensed under the Apache License, Version 2.0.
 *
 * test_jwtcaps.c: lessons_jwtcaps -- what the probe finds agrees with
 * the libjwt built against where its history decides it (the typ check
 * gone in 1.12.0; PS* unknown before 1.16.0), and says it in words.
 * Whether 1.16 and later verify PS* depends on libjwt's crypto backend
 * (the OpenSSL build before 1.18.1 does not): not assumed either way.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lessons_jwtcaps.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* The built-against version as major * 10000 + minor * 100 + patch. */
static int built_version(void)
{
    int major = 0, minor = 0, patch = 0;

    if (sscanf(lessons_jwtcaps_built_with(), "%d.%d.%d", &major, &minor,
               &patch) < 2) {
        return -1;
    }
    return major * 10000 + minor * 100 + patch;
}

static void test_probe_agrees_with_the_version(void **state)
{
    unsigned caps = lessons_jwtcaps_probe();
    int v = built_version();

    (void)state;
    assert_true(v > 0);                 /* the Makefile passed it */
    if (v < 11200) {
        assert_false(caps & LESSONS_JWTCAP_TYPED);
    }
    else {
        assert_true(caps & LESSONS_JWTCAP_TYPED);
    }
    if (v < 11600) {
        assert_false(caps & LESSONS_JWTCAP_PSS);
    }
    /* the same answer every time: nothing in the probe is random */
    assert_int_equal(lessons_jwtcaps_probe(), caps);
}

static void test_describe(void **state)
{
    const char *all = lessons_jwtcaps_describe(pool, LESSONS_JWTCAP_TYPED
                                                     | LESSONS_JWTCAP_PSS);
    const char *none = lessons_jwtcaps_describe(pool, 0);

    (void)state;
    assert_non_null(strstr(all, lessons_jwtcaps_built_with()));
    assert_non_null(strstr(all, "at+jwt tokens verified"));
    assert_non_null(strstr(all, "PS256/384/512 verified"));
    assert_non_null(strstr(none, "at+jwt tokens refused"));
    assert_non_null(strstr(none, "PS256/384/512 refused"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_agrees_with_the_version),
        cmocka_unit_test(test_describe),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
