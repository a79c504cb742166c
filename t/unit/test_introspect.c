/* Licensed under the Apache License, Version 2.0.
 *
 * test_introspect.c: lessons_introspect -- RFC 7662's request (form body,
 * client_secret_basic with RFC 6749 2.3.1's form-encoding), its answer
 * (active only for the JSON true; claims typed), how long an answer is
 * reused, and the cache key (a digest, never the token).
 *
 * The expected Basic credentials come from Python, not from the code
 * under test:
 *   u = quote_plus('my client', safe='*-._') + ':' \
 *       + quote_plus('p@ss:w\u00f6rd+/', safe='*-._')
 *   base64.b64encode(u.encode())
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "apr_strings.h"

#include "auth/lessons_introspect.h"
#include "auth/lessons_token.h"
#include "unit_pool.h"

#define NOW 1800000000

static lessons_introspect_e parse(const char *body,
                                  lessons_introspect_result_t *res)
{
    return lessons_introspect_parse(pool, body, strlen(body), res);
}

static void test_request(void **state)
{
    lessons_introspect_request_t req;

    (void)state;
    assert_null(lessons_introspect_request(pool, "a b+c/=~", 8, "my client",
                                           "p@ss:w\xc3\xb6rd+/", &req));
    assert_string_equal(req.body, "token=a+b%2Bc%2F%3D%7E"
                                  "&token_type_hint=access_token");
    assert_int_equal(req.body_len, strlen(req.body));
    assert_string_equal(req.authorization,
                        "Basic bXkrY2xpZW50OnAlNDBzcyUzQXclQzMlQjZyZCUyQiUyRg"
                        "==");
}

static void test_request_refused(void **state)
{
    lessons_introspect_request_t req;
    char *big = apr_palloc(pool, LESSONS_TOKEN_MAX_LEN + 2);

    (void)state;
    memset(big, 'a', LESSONS_TOKEN_MAX_LEN + 1);
    big[LESSONS_TOKEN_MAX_LEN + 1] = '\0';
    assert_non_null(lessons_introspect_request(pool, "", 0, "c", "s", &req));
    assert_non_null(lessons_introspect_request(pool, "t", 1, NULL, "s",
                                               &req));
    assert_non_null(lessons_introspect_request(pool, "t", 1, "", "s", &req));
    assert_non_null(lessons_introspect_request(pool, "t", 1, "c", NULL,
                                               &req));
    assert_non_null(lessons_introspect_request(pool, big,
                                               LESSONS_TOKEN_MAX_LEN + 1,
                                               "c", "s", &req));
    assert_null(req.body);
    assert_null(lessons_introspect_request(pool, big, LESSONS_TOKEN_MAX_LEN,
                                           "c", "s", &req));
}

static void test_active(void **state)
{
    lessons_introspect_result_t res;

    (void)state;
    assert_int_equal(parse("{\"active\":true,\"sub\":\"alice\",\"scope\":"
                           "\"lessons:read lessons:write\",\"aud\":[\"api\","
                           "\"other\"],\"iss\":\"https://idp.example\","
                           "\"exp\":1800000600,\"iat\":1799999990.5,"
                           "\"cnf\":{\"jkt\":\"x\"},\"client_id\":\"c\"}",
                           &res), LESSONS_INTROSPECT_ACTIVE);
    assert_non_null(res.claims);
    assert_string_equal(res.subject, "alice");
    assert_string_equal(json_string_value(json_object_get(res.claims,
                                                          "scope")),
                        "lessons:read lessons:write");
    assert_true(json_is_object(json_object_get(res.claims, "cnf")));
    assert_true(res.has_exp);
    assert_true(res.has_iat);
    assert_false(res.has_nbf);
    assert_true(res.exp == 1800000600.0);
    assert_int_equal(lessons_introspect_judge(LESSONS_INTROSPECT_ACTIVE,
                                              &res, NOW, 0),
                     LESSONS_INTROSPECT_ACTIVE);
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_ACTIVE, &res, NOW, 60),
                     NOW + 60);
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_ACTIVE, &res, NOW, 3600),
                     1800000600);
}

static void test_inactive(void **state)
{
    lessons_introspect_result_t res;

    (void)state;
    /* RFC 7662 2.2: an inactive answer may say nothing else, and what it
     * says besides is not read.
     */
    assert_int_equal(parse("{\"active\":false,\"sub\":\"alice\"}", &res),
                     LESSONS_INTROSPECT_INACTIVE);
    assert_null(res.claims);
    assert_null(res.subject);
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_INACTIVE, &res, NOW, 60),
                     NOW + LESSONS_INTROSPECT_INACTIVE_TTL);
    /* Never past the configured bound. */
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_INACTIVE, &res, NOW, 3),
                     NOW + 3);
}

static void test_active_not_true(void **state)
{
    lessons_introspect_result_t res;

    (void)state;
    assert_int_equal(parse("{\"sub\":\"alice\",\"exp\":1800000600}", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("{\"active\":\"true\",\"sub\":\"alice\"}", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("{\"active\":1}", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("{\"active\":null}", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("{\"active\":[true]}", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_null(res.claims);
    /* A malformed answer is never reused. */
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_MALFORMED, &res, NOW, 60), 0);
}

static void test_expired(void **state)
{
    lessons_introspect_result_t res;
    lessons_introspect_e rc;

    (void)state;
    rc = parse("{\"active\":true,\"exp\":1799999990}", &res);
    assert_int_equal(rc, LESSONS_INTROSPECT_ACTIVE);
    assert_int_equal(lessons_introspect_judge(rc, &res, NOW, 0),
                     LESSONS_INTROSPECT_EXPIRED);
    /* Within the leeway it is still taken... */
    assert_int_equal(lessons_introspect_judge(rc, &res, NOW, 30),
                     LESSONS_INTROSPECT_ACTIVE);
    /* ...but never kept: exp is where the provider stops vouching. */
    assert_int_equal(lessons_introspect_cache_until(rc, &res, NOW, 60), 0);
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_EXPIRED, &res, NOW, 60), 0);
    rc = parse("{\"active\":true,\"nbf\":1800000100}", &res);
    assert_int_equal(lessons_introspect_judge(rc, &res, NOW, 60),
                     LESSONS_INTROSPECT_NOT_YET);
    assert_int_equal(lessons_introspect_judge(rc, &res, NOW, 100),
                     LESSONS_INTROSPECT_ACTIVE);
}

static void test_far_exp_capped(void **state)
{
    lessons_introspect_result_t res;
    lessons_introspect_e rc;

    (void)state;
    rc = parse("{\"active\":true,\"exp\":4000000000}", &res);
    assert_int_equal(rc, LESSONS_INTROSPECT_ACTIVE);
    assert_int_equal(lessons_introspect_cache_until(rc, &res, NOW, 120),
                     NOW + 120);
    /* A bound past the limit is held to the limit. */
    assert_int_equal(lessons_introspect_cache_until(rc, &res, NOW, 86400),
                     NOW + LESSONS_INTROSPECT_CACHE_LIMIT);
    /* No exp: the bound alone. */
    rc = parse("{\"active\":true}", &res);
    assert_int_equal(rc, LESSONS_INTROSPECT_ACTIVE);
    assert_int_equal(lessons_introspect_cache_until(rc, &res, NOW, 45),
                     NOW + 45);
    /* No bound: nothing kept. */
    assert_int_equal(lessons_introspect_cache_until(rc, &res, NOW, 0), 0);
}

static void test_garbage(void **state)
{
    lessons_introspect_result_t res;

    (void)state;
    assert_int_equal(parse("", &res), LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("<html>503</html>", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("[true]", &res), LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("true", &res), LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(parse("{\"active\":true", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    /* A second "active" may not overrule the first. */
    assert_int_equal(parse("{\"active\":false,\"active\":true}", &res),
                     LESSONS_INTROSPECT_MALFORMED);
    assert_int_equal(lessons_introspect_parse(pool, NULL, 0, &res),
                     LESSONS_INTROSPECT_MALFORMED);
    /* Not NUL-terminated: only len bytes are read. */
    assert_int_equal(lessons_introspect_parse(pool, "{\"active\":true}xyz",
                                              15, &res),
                     LESSONS_INTROSPECT_ACTIVE);
}

static void test_bad_claims(void **state)
{
    lessons_introspect_result_t res;

    (void)state;
    assert_int_equal(parse("{\"active\":true,\"exp\":\"1800000600\"}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_int_equal(parse("{\"active\":true,\"iat\":null}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_int_equal(parse("{\"active\":true,\"nbf\":[1]}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_int_equal(parse("{\"active\":true,\"sub\":7}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_int_equal(parse("{\"active\":true,\"scope\":[\"a\"]}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_int_equal(parse("{\"active\":true,\"aud\":[\"a\",1]}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_int_equal(parse("{\"active\":true,\"cnf\":\"x5t\"}", &res),
                     LESSONS_INTROSPECT_BAD_CLAIMS);
    assert_null(res.claims);
    assert_int_equal(lessons_introspect_cache_until(
                         LESSONS_INTROSPECT_BAD_CLAIMS, &res, NOW, 60), 0);
}

static void test_oversized(void **state)
{
    lessons_introspect_result_t res;
    apr_size_t n = LESSONS_INTROSPECT_BODY_MAX + 1, pad;
    char *body = apr_palloc(pool, n + 1);

    (void)state;
    /* A well-formed, active answer, one byte over the cap. */
    pad = n - strlen("{\"active\":true,\"x\":\"\"}");
    memcpy(body, "{\"active\":true,\"x\":\"", 20);
    memset(body + 20, 'a', pad);
    memcpy(body + 20 + pad, "\"}", 3);
    assert_int_equal(strlen(body), n);
    assert_int_equal(lessons_introspect_parse(pool, body, n, &res),
                     LESSONS_INTROSPECT_TOO_LARGE);
    assert_null(res.claims);
    assert_int_equal(lessons_introspect_parse(pool, body + 1, n - 1, &res),
                     LESSONS_INTROSPECT_MALFORMED);
}

static void test_key(void **state)
{
    unsigned char a[LESSONS_INTROSPECT_KEY_LEN], b[LESSONS_INTROSPECT_KEY_LEN];
    unsigned char c[LESSONS_INTROSPECT_KEY_LEN], d[LESSONS_INTROSPECT_KEY_LEN];
    const char *u = "https://idp.example/introspect";

    (void)state;
    assert_int_equal(lessons_introspect_key(NULL, u, "c", "tokenA", 6, a), 0);
    assert_int_equal(lessons_introspect_key(NULL, u, "c", "tokenB", 6, b), 0);
    assert_memory_not_equal(a, b, sizeof(a));
    assert_int_equal(lessons_introspect_key(NULL, u, "c", "tokenA", 6, c), 0);
    assert_memory_equal(a, c, sizeof(a));
    /* Another client or endpoint: another key. */
    assert_int_equal(lessons_introspect_key(NULL, u, "d", "tokenA", 6, d), 0);
    assert_memory_not_equal(a, d, sizeof(a));
    assert_int_equal(lessons_introspect_key(NULL, "https://other.example/i",
                                            "c", "tokenA", 6, d), 0);
    assert_memory_not_equal(a, d, sizeof(a));
    /* A prefix is another token. */
    assert_int_equal(lessons_introspect_key(NULL, u, "c", "tokenA", 5, d), 0);
    assert_memory_not_equal(a, d, sizeof(a));
    /* A SHA-256 fetched once makes the very same key. */
    {
        EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);

        assert_non_null(md);
        assert_int_equal(lessons_introspect_key(md, u, "c", "tokenA", 6, d),
                         0);
        assert_memory_equal(a, d, sizeof(a));
        EVP_MD_free(md);
    }
    /* The token's bytes are not in the key. */
    assert_null(memmem(a, sizeof(a), "token", 5));
    /* The key as the cache names it: hex, 64 characters. */
    assert_string_equal(lessons_digest_hex(pool,
                                           (const unsigned char *)"\0\xab\xff",
                                           3), "00abff");
    assert_int_equal(strlen(lessons_digest_hex(pool, a, sizeof(a))), 64);
}

static void test_opaque(void **state)
{
    (void)state;
    assert_true(lessons_introspect_is_opaque(pool, "2YotnFZFEjr1zCsicMWpAA"));
    assert_true(lessons_introspect_is_opaque(pool, "a.b"));
    assert_true(lessons_introspect_is_opaque(pool, "a.b.c"));
    assert_true(lessons_introspect_is_opaque(pool, ""));
    /* {"alg":"none"} . {} . (empty): a JWS's shape, a JWT to verify. */
    assert_false(lessons_introspect_is_opaque(pool,
                                              "eyJhbGciOiJub25lIn0.e30.AAAA"));
}

static void test_describe(void **state)
{
    int rc;

    (void)state;
    for (rc = LESSONS_INTROSPECT_ACTIVE; rc <= LESSONS_INTROSPECT_NOT_YET;
         rc++) {
        assert_non_null(lessons_introspect_describe(rc));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_request_refused),
        cmocka_unit_test(test_active),
        cmocka_unit_test(test_inactive),
        cmocka_unit_test(test_active_not_true),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_far_exp_capped),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_bad_claims),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_opaque),
        cmocka_unit_test(test_describe),
    };

    if (unit_pool_open() != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
