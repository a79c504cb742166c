/* Licensed under the Apache License, Version 2.0.
 *
 * test_cors.c: LessonsCORSOrigins' origins (lessons_cors.h): what the
 * admin may write, how it is normalised, which request origins match,
 * and which preflight header lists the API accepts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_tables.h"
#include "unit_pool.h"
#include "api/lessons_cors.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

static const char *norm_of(const char *origin)
{
    const char *norm = NULL;

    if (lessons_cors_origin_parse(pool, origin, &norm) != NULL) {
        return NULL;
    }
    return norm;
}

static void test_parse_good(void **state)
{
    (void)state;
    assert_string_equal(norm_of("https://app.example.org"),
                        "https://app.example.org");
    assert_string_equal(norm_of("HTTPS://App.Example.ORG"),
                        "https://app.example.org");
    assert_string_equal(norm_of("http://localhost:3000"),
                        "http://localhost:3000");
    assert_string_equal(norm_of("https://app.example.org:443"),
                        "https://app.example.org");
    assert_string_equal(norm_of("http://a.example:80"), "http://a.example");
    assert_string_equal(norm_of("http://a.example:443"),
                        "http://a.example:443");
    assert_string_equal(norm_of("*"), "*");
}

static void test_parse_bad(void **state)
{
    static const char *const bad[] = {
        "", "app.example.org", "ftp://app.example.org", "https://",
        "https://app.example.org/", "https://app.example.org/path",
        "https://user@app.example.org", "https://app.example.org:",
        "https://app.example.org:0", "https://app.example.org:65536",
        "https://app.example.org:123456", "https://app.example.org:8a",
        "https://app.example.org:08", "https://app.example.org:1:2",
        "https://.example.org", "https://-a.example", "https://:443",
        "https://app.example.org?x", "https://app example.org", "**",
        "null", NULL
    };
    const char *norm = (const char *)1;
    int i;

    (void)state;
    for (i = 0; bad[i]; i++) {
        assert_non_null(lessons_cors_origin_parse(pool, bad[i], &norm));
        assert_null(norm);
    }
    assert_non_null(lessons_cors_origin_parse(pool, NULL, &norm));
}

static apr_array_header_t *list_of(const char *a, const char *b)
{
    apr_array_header_t *l = apr_array_make(pool, 2, sizeof(const char *));

    APR_ARRAY_PUSH(l, const char *) = norm_of(a);
    if (b) {
        APR_ARRAY_PUSH(l, const char *) = norm_of(b);
    }
    return l;
}

static void test_allowed(void **state)
{
    apr_array_header_t *l = list_of("https://app.example.org",
                                    "http://localhost:3000");

    (void)state;
    assert_true(lessons_cors_allowed(l, "https://app.example.org"));
    assert_true(lessons_cors_allowed(l, "http://localhost:3000"));
    assert_false(lessons_cors_allowed(l, "http://app.example.org"));
    assert_false(lessons_cors_allowed(l, "https://app.example.org:8443"));
    assert_false(lessons_cors_allowed(l, "https://app.example.org.evil"));
    assert_false(lessons_cors_allowed(l, "https://evil.example"));
    assert_false(lessons_cors_allowed(l, "https://app.example.or"));
    assert_false(lessons_cors_allowed(l, "null"));
    assert_false(lessons_cors_allowed(l, ""));
    assert_false(lessons_cors_allowed(l, NULL));
    assert_false(lessons_cors_allowed(NULL, "https://app.example.org"));
}

static void test_allowed_any(void **state)
{
    apr_array_header_t *l = list_of("*", NULL);

    (void)state;
    assert_true(lessons_cors_allowed(l, "https://anything.example"));
    assert_false(lessons_cors_allowed(l, "null"));
    assert_false(lessons_cors_allowed(l, NULL));
}

static void test_headers(void **state)
{
    /* what is asked for, and the first name refused (NULL: none) */
    static const struct {
        const char *requested, *refused;
    } cases[] = {
        { NULL, NULL },
        { "", NULL },
        { "authorization", NULL },
        { "authorization,content-type", NULL },
        { " Authorization , If-Match ,if-none-match ", NULL },
        { "content-type, Idempotency-Key", NULL },
        { "authorization, DPoP", NULL },    /* a browser's DPoP proofs */
        { "dpop-nonce", "dpop-nonce" },     /* a response header only */
        /* every header a preflight's answer names is taken when asked */
        { LESSONS_CORS_ALLOW_HEADERS, NULL },
        { "idempotency-keys", "idempotency-keys" },
        { "authorization,x-evil", "x-evil" },
        { "cookie", "cookie" },
        { "authorizatio", "authorizatio" },
        { "authorization-x", "authorization-x" },
        /* the first one refused, without the spaces around it */
        { "If-Match,  X-Trace-Id , Cookie", "X-Trace-Id" },
    };
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = lessons_cors_header_refused(pool,
                                                      cases[i].requested);

        if (cases[i].refused) {
            assert_non_null(got);
            assert_string_equal(got, cases[i].refused);
        }
        else {
            assert_null(got);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_allowed),
        cmocka_unit_test(test_allowed_any),
        cmocka_unit_test(test_headers),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
