/* Licensed under the Apache License, Version 2.0.
 *
 * test_idem.c: lessons_idem -- Idempotency-Key's value (RFC 8941
 * sf-string or the same key bare, bounded), the caller's scope, the request's fingerprint
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

#include "api/lessons_idem.h"

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

/* A key without quotes, as Stripe's and most clients send it: itself,
 * the same key as its quoted form (a bare key holds nothing to escape).
 */
static void bare_ok(const char *bare)
{
    key_ok(bare, bare);
    key_ok(apr_pstrcat(pool, "\"", bare, "\"", NULL), bare);
}

static void test_key_bare(void **state)
{
    char field[LESSONS_IDEM_KEY_MAX + 8];
    char want[LESSONS_IDEM_KEY_MAX + 2];

    (void)state;
    bare_ok("8e03978e-40d5-43e8-bc93-6894a57f9324");
    bare_ok("k");
    /* a number, a token, base64 with its padding: their text */
    bare_ok("42");
    bare_ok("order:42/create");
    bare_ok("YWJj+/==");
    bare_ok("*a");
    /* '(' ':' '?' are refused at the start only */
    bare_ok("a(b)c:d?e");
    /* every printable ASCII character a bare key may hold */
    bare_ok("!#$%&()*+-./09:<=>?@AZ[]^_`az{|}~");
    /* spaces around it are not part of it, as around a quoted one */
    key_ok("  k-1  ", "k-1");
    /* 255 characters pass, 256 do not */
    memset(want, 'k', LESSONS_IDEM_KEY_MAX);
    want[LESSONS_IDEM_KEY_MAX] = '\0';
    key_ok(want, want);
    apr_snprintf(field, sizeof(field), "%sk", want);
    key_refused(field, LESSONS_IDEM_KEY_TOO_LONG);
}

static void test_key_bare_refused(void **state)
{
    (void)state;
    /* a space inside: two tokens, or a key to guess at */
    key_refused("a b", LESSONS_IDEM_KEY_TRAILING);
    key_refused("8e03978e 40d5", LESSONS_IDEM_KEY_TRAILING);
    /* a list, or the header twice */
    key_refused("a,b", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("a, b", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("a, \"b\"", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("\"a\", b", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused(",a", LESSONS_IDEM_KEY_NOT_STRING);
    /* parameters */
    key_refused("a;v=1", LESSONS_IDEM_KEY_PARAMETERS);
    key_refused("a;", LESSONS_IDEM_KEY_PARAMETERS);
    key_refused(";v=1", LESSONS_IDEM_KEY_NOT_STRING);
    /* quotes half done, quoted the wrong way, escapes outside quotes */
    key_refused("a\"", LESSONS_IDEM_KEY_BARE_CHAR);
    key_refused("a\"b\"", LESSONS_IDEM_KEY_BARE_CHAR);
    key_refused("'a'", LESSONS_IDEM_KEY_BARE_CHAR);
    key_refused("it's", LESSONS_IDEM_KEY_BARE_CHAR);
    key_refused("a\\b", LESSONS_IDEM_KEY_BARE_CHAR);
    key_refused("\\\"a\\\"", LESSONS_IDEM_KEY_BARE_CHAR);
    /* outside printable ASCII */
    key_refused("caf\xc3\xa9", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("\xc3\xa9", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("a\tb", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("a\x7f", LESSONS_IDEM_KEY_BAD_CHAR);
    key_refused("a\x01", LESSONS_IDEM_KEY_BAD_CHAR);
    /* what RFC 8941 reads as another item, whose value is not its text:
     * a byte sequence, an inner list, a boolean
     */
    key_refused(":abc=:", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused(":YWJj", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("(a)", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("(a b)", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("?0", LESSONS_IDEM_KEY_NOT_STRING);
}

static void test_key_not_a_string(void **state)
{
    (void)state;
    key_refused(NULL, LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("   ", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("?1", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused(":YWJj:", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("(\"a\")", LESSONS_IDEM_KEY_NOT_STRING);
    key_refused("'a'", LESSONS_IDEM_KEY_BARE_CHAR);
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
/* A caller's digest, as the fingerprint and claim number take it. */
#define CALLER "43f0dc743ed8e902b88ab9219d4f2cb74b27ab4d335e6af01af3fe6366e78678"
/* Who verified the token (lessons_request_verifier). */
#define ANY "key file /etc/lessons/jwt.key for any issuer"
#define BLOCK "key file /etc/lessons/jwt.key for " ISS

static const char *caller(const char *verifier, const char *issuer,
                          const char *subject, const char *user)
{
    const char *d = lessons_idem_caller(pool, verifier, issuer, subject,
                                        user);

    assert_hex_digest(d);
    return d;
}

static void test_caller(void **state)
{
    const char *a = caller(ANY, ISS, "anna", NULL);

    (void)state;
    assert_string_equal(a,
        "852570bda16f57cba5a9361c2a61896485ec64a7c9970393a03dbcf66565705e");
    /* the subject names the caller: the user (another claim) does not
     * change it
     */
    assert_string_equal(caller(ANY, ISS, "anna", "a@x.org"), a);
    /* another subject, another issuer, no issuer: another scope */
    assert_string_not_equal(caller(ANY, ISS, "berta", NULL), a);
    assert_string_not_equal(caller(ANY, "https://other.org", "anna", NULL),
                            a);
    assert_string_not_equal(caller(ANY, NULL, "anna", NULL), a);
    assert_string_not_equal(caller(ANY, "", "anna", NULL),
                            caller(ANY, NULL, "anna", NULL));
    /* without a subject, the user; never the same scope as a subject */
    assert_string_equal(caller(ANY, NULL, NULL, "anna"),
        "794be5b65690240f3a2db3aa09b62257cd62c766c097435fdc9dee34313d2400");
    assert_string_not_equal(caller(ANY, NULL, NULL, "anna"),
                            caller(ANY, NULL, "anna", NULL));
    assert_string_equal(caller(ANY, NULL, "", "anna"),
                        caller(ANY, NULL, NULL, "anna"));
    /* a token that names nobody has no scope */
    assert_null(lessons_idem_caller(pool, ANY, ISS, NULL, NULL));
    assert_null(lessons_idem_caller(pool, ANY, ISS, "", ""));
}

/* Issue 40: the same claims verified by other keys, or by the same keys
 * for another issuer, are another caller; a token never claims its way
 * into the callers of keys that did not verify it.
 */
static void test_caller_verifier(void **state)
{
    const char *a = caller(BLOCK, ISS, "anna", NULL);

    (void)state;
    assert_string_equal(caller(BLOCK, ISS, "anna", NULL), a);
    assert_string_not_equal(caller(ANY, ISS, "anna", NULL), a);
    assert_string_not_equal(caller("key file /etc/lessons/other.pem for "
                                   "any issuer", ISS, "anna", NULL), a);
    assert_string_not_equal(caller("keys URL https://idp.example/certs for "
                                   ISS, ISS, "anna", NULL), a);
    assert_string_not_equal(caller(BLOCK, ISS, NULL, "anna"),
                            caller(ANY, ISS, NULL, "anna"));
    /* field boundaries: the verifier never runs into the issuer */
    assert_string_not_equal(caller("ab", "c", "anna", NULL),
                            caller("a", "bc", "anna", NULL));
    /* the old scope (issuer and subject alone) is none of these */
    assert_string_not_equal(a, CALLER);
    assert_string_not_equal(caller(ANY, ISS, "anna", NULL), CALLER);
    /* no verifier: no scope, never a shared one */
    assert_null(lessons_idem_caller(pool, NULL, ISS, "anna", NULL));
    assert_null(lessons_idem_caller(pool, "", ISS, "anna", NULL));
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
        cmocka_unit_test(test_key_bare),
        cmocka_unit_test(test_key_bare_refused),
        cmocka_unit_test(test_key_not_a_string),
        cmocka_unit_test(test_key_characters),
        cmocka_unit_test(test_key_after_the_string),
        cmocka_unit_test(test_key_length),
        cmocka_unit_test(test_key_describe),
        cmocka_unit_test(test_caller),
        cmocka_unit_test(test_caller_verifier),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_claim_id),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
