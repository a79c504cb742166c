/* Licensed under the Apache License, Version 2.0.
 *
 * test_idem.c: lessons_idem -- Idempotency-Key's value (RFC 8941
 * sf-string, bounded), the caller's scope, the request's fingerprint
 * and the claim number.  The digests are stored in the database and
 * compared by every server that shares it, so their encoding is pinned
 * by values computed apart from this code (Python's hashlib over the
 * same length-prefixed fields).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_strings.h"

#include "lessons_idem.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

static void key_ok(const char *field, const char *want)
{
    const char *key = NULL;

    if (lessons_idem_key_parse(pool, field, &key) != LESSONS_IDEM_KEY_OK) {
        print_error("refused: [%s]\n", field);
    }
    assert_int_equal(lessons_idem_key_parse(pool, field, &key),
                     LESSONS_IDEM_KEY_OK);
    assert_non_null(key);
    assert_string_equal(key, want);
}

static void key_refused(const char *field, lessons_idem_key_e want)
{
    const char *key = "untouched";

    assert_int_equal(lessons_idem_key_parse(pool, field, &key), want);
    assert_null(key);
}

static void test_key_strings(void **state)
{
    (void)state;
    key_ok("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
           "8e03978e-40d5-43e8-bc93-6894a57f9324");
    key_ok("\"a\"", "a");
    /* spaces around the item are not part of it; inside they are */
    key_ok("  \"a b\"  ", "a b");
    /* every printable ASCII character; escapes undone */
    key_ok("\"!#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}~\"",
           "!#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}~");
    key_ok("\"say \\\"hi\\\" \\\\o/\"", "say \"hi\" \\o/");
}

static void test_key_not_a_string(void **state)
{
    (void)state;
    key_refused(NULL, LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("   ", LESSONS_IDEM_KEY_NOT_STRING);
    /* a token, as Stripe's clients send it: not an sf-string */
    key_refused("8e03978e-40d5-43e8-bc93-6894a57f9324",
                LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("42", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("?1", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused(":YWJj:", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("(\"a\")", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("'a'", LESSONS_IDEM_KEY_NOT_STRING);
    /* the header twice: httpd joins the fields with ", " */
    key_refused("\"a\", \"b\"", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("\"a\",\"a\"", LESSONS_IDEM_KEY_NOT_STRING);
}

static void test_key_characters(void **state)
{
    (void)state;
    key_refused("\"caf\xc3\xa9\"", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\"a\tb\"", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\"a\x01\"", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\"a\x7f\"", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\"a\\b\"", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\"a\\n\"", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\"abc", LESSONS_IDEM_KEY_UNTERMINATED);
    key_refused("\"abc\\", LESSONS_IDEM_KEY_UNTERMINATED);
    key_refused("\"abc\\\"", LESSONS_IDEM_KEY_UNTERMINATED);
    key_refused("\"", LESSONS_IDEM_KEY_UNTERMINATED);
}

static void test_key_after_the_string(void **state)
{
    (void)state;
    key_refused("\"a\";v=1", LESSONS_IDEM_KEY_PARAMETERS);
    key_refused("\"a\";x", LESSONS_IDEM_KEY_PARAMETERS);
    key_refused("\"a\" x", LESSONS_IDEM_KEY_TRAILING);
    key_refused("\"a\"\"b\"", LESSONS_IDEM_KEY_TRAILING);
    key_refused("\"a\"\t", LESSONS_IDEM_KEY_TRAILING);
}

static void test_key_length(void **state)
{
    char field[2 * LESSONS_IDEM_KEY_MAX + 8];
    char want[LESSONS_IDEM_KEY_MAX + 2];
    int i;

    (void)state;
    key_refused("\"\"", LESSONS_IDEM_KEY_EMPTY);
    key_refused("  \"\"  ", LESSONS_IDEM_KEY_EMPTY);
    /* 255 characters pass, 256 do not */
    memset(want, 'k', LESSONS_IDEM_KEY_MAX);
    want[LESSONS_IDEM_KEY_MAX] = '\0';
    apr_snprintf(field, sizeof(field), "\"%s\"", want);
    key_ok(field, want);
    apr_snprintf(field, sizeof(field), "\"%sk\"", want);
    key_refused(field, LESSONS_IDEM_KEY_TOO_LONG);
    /* counted as characters of the key, escapes undone: 255 escaped
     * quotes are 510 bytes of field and a key of 255
     */
    field[0] = '"';
    for (i = 0; i < LESSONS_IDEM_KEY_MAX; i++) {
        field[1 + 2 * i] = '\\';
        field[2 + 2 * i] = '"';
        want[i] = '"';
    }
    field[1 + 2 * LESSONS_IDEM_KEY_MAX] = '"';
    field[2 + 2 * LESSONS_IDEM_KEY_MAX] = '\0';
    key_ok(field, want);
}

static void test_key_describe(void **state)
{
    int rc;

    (void)state;
    for (rc = LESSONS_IDEM_KEY_OK; rc <= LESSONS_IDEM_KEY_TOO_LONG; rc++) {
        const char *d = lessons_idem_key_describe((lessons_idem_key_e)rc);

        assert_non_null(d);
        assert_true(strlen(d) > 5);
    }
    assert_non_null(strstr(lessons_idem_key_describe(
        LESSONS_IDEM_KEY_TOO_LONG), "255"));
}

static void assert_hex_digest(const char *d)
{
    size_t i;

    assert_non_null(d);
    assert_int_equal(strlen(d), LESSONS_IDEM_DIGEST_HEX);
    for (i = 0; d[i]; i++) {
        assert_non_null(strchr("0123456789abcdef", d[i]));
    }
}

#define ISS "https://auth.example.org"
#define CALLER "43f0dc743ed8e902b88ab9219d4f2cb74b27ab4d335e6af01af3fe6366e78678"

static void test_caller(void **state)
{
    const char *a = lessons_idem_caller(pool, ISS, "anna", NULL);

    (void)state;
    assert_hex_digest(a);
    assert_string_equal(a, CALLER);
    /* the subject names the caller: the user (another claim) does not
     * change it
     */
    assert_string_equal(lessons_idem_caller(pool, ISS, "anna", "a@x.org"),
                        CALLER);
    /* another subject, another issuer, no issuer: another scope */
    assert_string_not_equal(lessons_idem_caller(pool, ISS, "berta", NULL),
                            CALLER);
    assert_string_not_equal(lessons_idem_caller(pool, "https://other.org",
                                                "anna", NULL), CALLER);
    assert_string_not_equal(lessons_idem_caller(pool, NULL, "anna", NULL),
                            CALLER);
    assert_string_not_equal(lessons_idem_caller(pool, "", "anna", NULL),
                            lessons_idem_caller(pool, NULL, "anna", NULL));
    /* without a subject, the user; never the same scope as a subject */
    assert_string_equal(lessons_idem_caller(pool, NULL, NULL, "anna"),
        "8a78b116c47943c50e9893a0fe9f47f87dbf86f477eb06487dd3ed0a10772395");
    assert_string_not_equal(lessons_idem_caller(pool, NULL, NULL, "anna"),
                            lessons_idem_caller(pool, NULL, "anna", NULL));
    assert_string_equal(lessons_idem_caller(pool, NULL, "", "anna"),
                        lessons_idem_caller(pool, NULL, NULL, "anna"));
    /* a token that names nobody has no scope */
    assert_null(lessons_idem_caller(pool, ISS, NULL, NULL));
    assert_null(lessons_idem_caller(pool, ISS, "", ""));
}

#define BODY "{\"levelId\":1,\"title\":\"Hallo\",\"order\":1}"

static const char *fp(const char *method, const char *path,
                      const char *caller, const char *body, size_t len)
{
    const char *d = lessons_idem_fingerprint(pool, method, path, caller,
                                             body, len);

    assert_hex_digest(d);
    return d;
}

static void test_fingerprint(void **state)
{
    const char *a = fp("POST", "/api/lessons", CALLER, BODY, strlen(BODY));

    (void)state;
    assert_string_equal(a,
        "245ddcfe39e11b09e58cca44113cd0ab99aa5cee52b041f752169ed0ef2d00b4");
    /* each part counts */
    assert_string_not_equal(fp("PUT", "/api/lessons", CALLER, BODY,
                               strlen(BODY)), a);
    assert_string_not_equal(fp("POST", "/trail/api/lessons", CALLER, BODY,
                               strlen(BODY)), a);
    assert_string_not_equal(fp("POST", "/api/lessons", "other", BODY,
                               strlen(BODY)), a);
    assert_string_not_equal(fp("POST", "/api/lessons", CALLER, BODY " ",
                               strlen(BODY) + 1), a);
    /* the body's bytes, as many as its length says */
    assert_string_not_equal(fp("POST", "/api/lessons", CALLER, BODY,
                               strlen(BODY) - 1), a);
    assert_string_not_equal(fp("POST", "/api/lessons", CALLER, "a\0b", 3),
                            fp("POST", "/api/lessons", CALLER, "a\0c", 3));
    /* field boundaries: "ab" + "c" is not "a" + "bc" */
    assert_string_not_equal(fp("POST", "/ab", "c", "", 0),
                            fp("POST", "/a", "bc", "", 0));
    assert_string_not_equal(fp("POST", "/a", "b", "", 0),
                            fp("POST", "/a", "", "b", 1));
}

static void test_claim_id(void **state)
{
    const char *key = "8e03978e-40d5-43e8-bc93-6894a57f9324";

    (void)state;
    assert_true(lessons_idem_claim_id(CALLER, key)
                == APR_INT64_C(-427646468093754150));
    assert_true(lessons_idem_claim_id(CALLER, "other")
                != lessons_idem_claim_id(CALLER, key));
    assert_true(lessons_idem_claim_id("other", key)
                != lessons_idem_claim_id(CALLER, key));
    assert_true(lessons_idem_claim_id("ab", "c")
                != lessons_idem_claim_id("a", "bc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_strings),
        cmocka_unit_test(test_key_not_a_string),
        cmocka_unit_test(test_key_characters),
        cmocka_unit_test(test_key_after_the_string),
        cmocka_unit_test(test_key_length),
        cmocka_unit_test(test_key_describe),
        cmocka_unit_test(test_caller),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_claim_id),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
