/* Licensed under the Apache License, Version 2.0.
 *
 * test_refusals.c: lessons_refusals -- a section's refusals summed up in
 * one line once the first is a minute old: by reason in plain words,
 * largest first, with what was expected; nothing when nothing was
 * refused or only what is not counted; each refusal told once, across
 * a reload that keeps the table and one that makes it anew; rows apart;
 * forked writers lose nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apr_shm.h"
#include "apr_strings.h"

#include "ops/lessons_refusals.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define T0 ((apr_time_t)1700000000 * APR_USEC_PER_SEC)
#define SEC(s) (T0 + apr_time_from_sec(s))
#define EVERY LESSONS_REFUSALS_EVERY

static const char *const two[] = { "<Location /a> (a.conf:1)",
                                   "<Location /b> (b.conf:9)" };

static lessons_refusals_t *table_of(const char *const *labels, int rows,
                                    lessons_refusals_t *old)
{
    apr_size_t size = lessons_refusals_size(rows);

    return lessons_refusals_make(apr_pcalloc(pool, size), size, labels, rows,
                                 old, pool);
}

static const char *due(lessons_refusals_t *t, int row, apr_time_t now)
{
    return lessons_refusals_due(t, row, two[row], pool, now, EVERY);
}

static void test_the_line(void **state)
{
    lessons_refusals_sum_t sum;

    (void)state;
    memset(&sum, 0, sizeof(sum));
    assert_null(lessons_refusals_line(pool, "x", &sum, EVERY));
    sum.n[LESSONS_REFUSED_EXPIRED] = 2;
    sum.n[LESSONS_REFUSED_AUDIENCE] = 35;
    sum.audience = "lessons-api";
    assert_string_equal(lessons_refusals_line(pool, "<Location /api>", &sum,
                                              apr_time_from_sec(64)),
                        "37 tokens refused in the last 64 seconds by "
                        "<Location /api>: 35 wrong audience (expected "
                        "lessons-api), 2 expired");
    /* Largest first, ties in the reasons' order; several expected
     * values; no token and no keys are never told.
     */
    sum.n[LESSONS_REFUSED_SIGNATURE] = 35;
    sum.n[LESSONS_REFUSED_ISSUER] = 3;
    sum.issuer = "https://idp.example";
    sum.issuers_several = 1;
    sum.n[LESSONS_REFUSED_NO_TOKEN] = 1000;
    sum.n[LESSONS_REFUSED_NO_KEYS] = 1000;
    assert_string_equal(lessons_refusals_line(pool, "s", &sum, EVERY),
                        "75 tokens refused in the last 60 seconds by s: "
                        "35 bad signature, 35 wrong audience (expected "
                        "lessons-api), 3 wrong issuer (expected "
                        "https://idp.example and others), 2 expired");
    memset(&sum, 0, sizeof(sum));
    sum.n[LESSONS_REFUSED_AUDIENCE] = 1;
    assert_string_equal(lessons_refusals_line(pool, "s", &sum, EVERY),
                        "1 token refused in the last 60 seconds by s: "
                        "1 wrong audience");
    sum.n[LESSONS_REFUSED_AUDIENCE] = 0;
    sum.n[LESSONS_REFUSED_NO_TOKEN] = 5;
    assert_null(lessons_refusals_line(pool, "s", &sum, EVERY));
}

/* A minute after the first refusal, one line with everything since;
 * then nothing until more come, and those a minute after their first.
 */
static void test_a_line_a_minute(void **state)
{
    lessons_refusals_t *t = table_of(two, 2, NULL);
    int i;

    (void)state;
    assert_non_null(t);
    assert_null(due(t, 0, SEC(0)));
    for (i = 0; i < 5; i++) {
        lessons_refusals_add(t, 0, LESSONS_REFUSED_AUDIENCE, "lessons-api",
                             SEC(1 + i));
    }
    lessons_refusals_add(t, 0, LESSONS_REFUSED_EXPIRED, NULL, SEC(30));
    lessons_refusals_add(t, 0, LESSONS_REFUSED_EXPIRED, NULL, SEC(59));
    /* not counted: no token, no keys */
    lessons_refusals_add(t, 0, LESSONS_REFUSED_NO_TOKEN, NULL, SEC(2));
    lessons_refusals_add(t, 0, LESSONS_REFUSED_NO_KEYS, NULL, SEC(2));
    assert_null(due(t, 0, SEC(10)));
    assert_null(due(t, 0, SEC(60.9)));
    assert_null(due(t, 1, SEC(70)));            /* the other row: none */
    assert_string_equal(due(t, 0, SEC(70)),
                        "7 tokens refused in the last 69 seconds by "
                        "<Location /a> (a.conf:1): 5 wrong audience "
                        "(expected lessons-api), 2 expired");
    assert_null(due(t, 0, SEC(80)));
    assert_null(due(t, 0, SEC(500)));
    lessons_refusals_add(t, 0, LESSONS_REFUSED_SIGNATURE, NULL, SEC(600));
    assert_null(due(t, 0, SEC(601)));
    assert_null(due(t, 0, SEC(659)));
    assert_string_equal(due(t, 0, SEC(661)),
                        "1 token refused in the last 61 seconds by "
                        "<Location /a> (a.conf:1): 1 bad signature");
    /* Only what is not counted: never a line. */
    lessons_refusals_add(t, 1, LESSONS_REFUSED_NO_TOKEN, NULL, SEC(700));
    assert_null(due(t, 1, SEC(900)));
}

/* Another expected value marks it several; each line starts afresh. */
static void test_expected_values(void **state)
{
    lessons_refusals_t *t = table_of(two, 2, NULL);
    const char *line;

    (void)state;
    lessons_refusals_add(t, 1, LESSONS_REFUSED_AUDIENCE, "api-one", SEC(0));
    lessons_refusals_add(t, 1, LESSONS_REFUSED_AUDIENCE, "api-one", SEC(1));
    lessons_refusals_add(t, 1, LESSONS_REFUSED_AUDIENCE, "api-two", SEC(2));
    lessons_refusals_add(t, 1, LESSONS_REFUSED_ISSUER, "https://i.example",
                         SEC(3));
    line = due(t, 1, SEC(60));
    assert_non_null(line);
    assert_non_null(strstr(line, "3 wrong audience (expected api-one and "
                                 "others), 1 wrong issuer (expected "
                                 "https://i.example)"));
    lessons_refusals_add(t, 1, LESSONS_REFUSED_AUDIENCE, "api-two",
                         SEC(100));
    line = due(t, 1, SEC(160));
    assert_non_null(line);
    assert_non_null(strstr(line, ": 1 wrong audience (expected api-two)"));
    /* A value longer than the slot is cut, and still one value. */
    {
        char big[LESSONS_REFUSALS_EXPECTED * 2];

        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        lessons_refusals_add(t, 1, LESSONS_REFUSED_AUDIENCE, big, SEC(200));
        lessons_refusals_add(t, 1, LESSONS_REFUSED_AUDIENCE, big, SEC(201));
        line = due(t, 1, SEC(260));
        assert_non_null(line);
        assert_null(strstr(line, "others"));
        assert_non_null(strstr(line, apr_pstrndup(pool, big,
                                             LESSONS_REFUSALS_EXPECTED - 1)));
    }
}

/* A reload: the same rows keep the table (lessons_refusals_same); other
 * rows make a new one that carries each kept key's counts, what was
 * told of them and when they began: nothing told twice or lost.
 */
static void test_reloads(void **state)
{
    static const char *const three[] = { "<Location /new> (n.conf:3)",
                                         "<Location /b> (b.conf:9)",
                                         "<Location /a> (a.conf:1)" };
    static const char *const moved[] = { "<Location /b> (b.conf:9)",
                                         "<Location /a> (a.conf:1)" };
    lessons_refusals_t *t = table_of(two, 2, NULL), *n;
    const char *line;

    (void)state;
    assert_true(lessons_refusals_same(t, two, 2));
    assert_false(lessons_refusals_same(t, moved, 2));
    assert_false(lessons_refusals_same(t, three, 3));
    assert_false(lessons_refusals_same(t, two, 1));
    assert_false(lessons_refusals_same(NULL, two, 2));

    lessons_refusals_add(t, 0, LESSONS_REFUSED_EXPIRED, NULL, SEC(0));
    assert_null(due(t, 0, SEC(1)));
    assert_non_null(due(t, 0, SEC(61)));        /* 1 told */
    lessons_refusals_add(t, 0, LESSONS_REFUSED_EXPIRED, NULL, SEC(70));
    lessons_refusals_add(t, 0, LESSONS_REFUSED_AUDIENCE, "aud", SEC(71));
    lessons_refusals_add(t, 1, LESSONS_REFUSED_SIGNATURE, NULL, SEC(72));

    n = table_of(three, 3, t);
    assert_non_null(n);
    assert_true(lessons_refusals_same(n, three, 3));
    /* the old table's writers (old processes) no longer count here */
    lessons_refusals_add(n, 2, LESSONS_REFUSED_EXPIRED, NULL, SEC(80));
    assert_null(lessons_refusals_due(n, 2, three[2], pool, SEC(129), EVERY));
    line = lessons_refusals_due(n, 2, three[2], pool, SEC(130), EVERY);
    assert_string_equal(line, "3 tokens refused in the last 60 seconds by "
                              "<Location /a> (a.conf:1): 2 expired, 1 wrong "
                              "audience (expected aud)");
    line = lessons_refusals_due(n, 1, three[1], pool, SEC(132), EVERY);
    assert_string_equal(line, "1 token refused in the last 60 seconds by "
                              "<Location /b> (b.conf:9): 1 bad signature");
    assert_null(lessons_refusals_due(n, 0, three[0], pool, SEC(200), EVERY));
    assert_null(lessons_refusals_due(n, 2, three[2], pool, SEC(300), EVERY));
}

static void test_bounds(void **state)
{
    char small[8];

    (void)state;
    assert_int_equal(lessons_refusals_size(0), 0);
    assert_null(lessons_refusals_make(NULL, 100, two, 2, NULL, pool));
    assert_null(lessons_refusals_make(small, sizeof(small), two, 2, NULL,
                                      pool));
    assert_null(lessons_refusals_make(small, sizeof(small), two, 0, NULL,
                                      pool));
    /* nothing counted, nothing read, nothing crashes */
    lessons_refusals_add(NULL, 0, LESSONS_REFUSED_EXPIRED, NULL, SEC(0));
    assert_null(lessons_refusals_due(NULL, 0, "x", pool, SEC(0), EVERY));
    {
        lessons_refusals_t *t = table_of(two, 2, NULL);

        lessons_refusals_add(t, 2, LESSONS_REFUSED_EXPIRED, NULL, SEC(0));
        lessons_refusals_add(t, -1, LESSONS_REFUSED_EXPIRED, NULL, SEC(0));
        lessons_refusals_add(t, 0, LESSONS_REFUSED_COUNT, NULL, SEC(0));
        assert_null(due(t, 0, SEC(100)));
        assert_null(due(t, 1, SEC(100)));
        assert_null(lessons_refusals_due(t, 2, "x", pool, SEC(100), EVERY));
    }
    assert_false(lessons_refusals_counted(LESSONS_REFUSED_NO_TOKEN));
    assert_false(lessons_refusals_counted(LESSONS_REFUSED_NO_KEYS));
    assert_true(lessons_refusals_counted(LESSONS_REFUSED_AUDIENCE));
    assert_true(lessons_refusals_counted(LESSONS_REFUSED_SCOPE));
}

/* The module's way: anonymous shared memory made before the fork, every
 * process adding to one row at once.
 */
#define FORKS   4
#define ADDS    20000

static void test_processes_add_up(void **state)
{
    apr_shm_t *shm = NULL;
    lessons_refusals_t *t;
    const char *line;
    int i, status;
    pid_t pids[FORKS];

    (void)state;
    assert_int_equal(apr_shm_create(&shm, lessons_refusals_size(2), NULL,
                                    pool), APR_SUCCESS);
    t = lessons_refusals_make(apr_shm_baseaddr_get(shm),
                              apr_shm_size_get(shm), two, 2, NULL, pool);
    assert_non_null(t);
    for (i = 0; i < FORKS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            int n;

            for (n = 0; n < ADDS; n++) {
                lessons_refusals_add(t, 1, n % 2 ? LESSONS_REFUSED_EXPIRED
                                               : LESSONS_REFUSED_AUDIENCE,
                                     "lessons-api", SEC(n % 7));
            }
            _exit(0);
        }
    }
    for (i = 0; i < FORKS; i++) {
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    line = due(t, 1, SEC(100));
    assert_non_null(line);
    assert_non_null(strstr(line, apr_psprintf(pool, "%d tokens refused",
                                              FORKS * ADDS)));
    /* a tie: in the reasons' order */
    assert_non_null(strstr(line, apr_psprintf(pool, ": %d expired, %d "
                                              "wrong audience (expected "
                                              "lessons-api)", FORKS * ADDS / 2,
                                              FORKS * ADDS / 2)));
    assert_null(due(t, 0, SEC(100)));
    apr_shm_destroy(shm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_line),
        cmocka_unit_test(test_a_line_a_minute),
        cmocka_unit_test(test_expected_values),
        cmocka_unit_test(test_reloads),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_processes_add_up),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
