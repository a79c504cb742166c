/* Licensed under the Apache License, Version 2.0.
 *
 * test_claims.c: lessons_claims_get, _match, _text and _env_name
 * (issue 9) against lessons_claims.h: dotted names, the literal-key
 * rule, arrays, numbers, booleans, missing claims, non-string members,
 * control characters and UTF-8-safe cutting.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"

#include "auth/lessons_claims.h"
#include "base/lessons_json.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* A JSON value from text, released with the group's pool.  NULs are
 * allowed here (lessons_token's decoder refuses them) to show that a
 * string holding one is still handled safely.
 */
static json_t *js(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);

    if (!v) {
        fail_msg("bad test JSON %s: %s", text, err.text);
    }
    return lessons_json_pool_own(pool, v);
}

static const char *const *vals(int n, ...)
{
    const char **v = apr_pcalloc(pool, sizeof(*v) * (apr_size_t)(n + 1));
    va_list ap;
    int i;

    va_start(ap, n);
    for (i = 0; i < n; i++) {
        v[i] = va_arg(ap, const char *);
    }
    va_end(ap);
    return v;
}

/* --------------------------------------------------------------- get */

static const char *const KC =
    "{\"sub\":\"alice\",\"realm_access\":{\"roles\":[\"admin\",\"user\"],"
    "\"deep\":{\"x\":{\"y\":\"z\"}}},\"n\":42,\"f\":1.5,\"t\":true,"
    "\"no\":false,\"nil\":null,\"e\":\"\",\"arr\":[1,\"two\",true,null],"
    "\"objs\":[{\"a\":1},\"b\"],\"nested\":[[\"x\"]],"
    "\"https://example.org/claims.roles\":[\"editor\"],"
    "\"a.b\":\"literal\",\"a\":{\"b\":\"nested\",\"c\":\"only-nested\"},"
    "\"uni\":\"gr\\u00fc\\u00dfe \\u20ac\\ud83d\\ude00\","
    "\"ctl\":\"a\\nb\\tc\\u0000d\\u007fe\\u001ff\","
    "\"nul\":\"admin\\u0000x\"}";

static void test_get_top_level(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_string_equal(json_string_value(lessons_claims_get(c, "sub")),
                        "alice");
    assert_int_equal(json_integer_value(lessons_claims_get(c, "n")), 42);
    assert_true(json_is_null(lessons_claims_get(c, "nil")));
    assert_true(json_is_false(lessons_claims_get(c, "no")));
}

static void test_get_nested(void **state)
{
    json_t *c = js(KC), *r;

    (void)state;
    r = lessons_claims_get(c, "realm_access.roles");
    assert_true(json_is_array(r));
    assert_int_equal(json_array_size(r), 2);
    assert_string_equal(json_string_value(
                            lessons_claims_get(c, "realm_access.deep.x.y")),
                        "z");
    assert_true(json_is_object(lessons_claims_get(c, "realm_access.deep")));
    assert_string_equal(json_string_value(lessons_claims_get(c, "a.c")),
                        "only-nested");
}

static void test_get_literal_dot_wins(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_string_equal(json_string_value(lessons_claims_get(c, "a.b")),
                        "literal");
    assert_true(json_is_array(
        lessons_claims_get(c, "https://example.org/claims.roles")));
}

static void test_get_missing(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_null(lessons_claims_get(c, "missing"));
    assert_null(lessons_claims_get(c, "realm_access.missing"));
    assert_null(lessons_claims_get(c, "realm_access.roles.0"));  /* array */
    assert_null(lessons_claims_get(c, "sub.x"));        /* through a string */
    assert_null(lessons_claims_get(c, "n.x"));
    assert_null(lessons_claims_get(c, "nil.x"));
    assert_null(lessons_claims_get(c, "realm_access..roles"));
    assert_null(lessons_claims_get(c, ".sub"));
    assert_null(lessons_claims_get(c, "realm_access."));
    assert_null(lessons_claims_get(c, "."));
    assert_null(lessons_claims_get(c, ""));
    assert_null(lessons_claims_get(c, "realm_access.deep.x.y.z"));
    assert_null(lessons_claims_get(NULL, "sub"));
    assert_null(lessons_claims_get(c, NULL));
    assert_null(lessons_claims_get(js("[1,2]"), "0"));
    assert_null(lessons_claims_get(js("\"sub\""), "sub"));
}

/* A key is not a prefix: "su" is not "sub", "realm" is not reached. */
static void test_get_exact_parts(void **state)
{
    json_t *c = js("{\"sub\":\"x\",\"ab\":{\"cd\":1}}");

    (void)state;
    assert_null(lessons_claims_get(c, "su"));
    assert_null(lessons_claims_get(c, "subx"));
    assert_null(lessons_claims_get(c, "a.cd"));
    assert_null(lessons_claims_get(c, "ab.c"));
    assert_non_null(lessons_claims_get(c, "ab.cd"));
}

/* ------------------------------------------------------------- match */

static void test_match_string(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_true(lessons_claims_match(c, "sub", vals(1, "alice"), 1));
    assert_true(lessons_claims_match(c, "sub", vals(3, "bob", "carol",
                                                     "alice"), 3));
    assert_false(lessons_claims_match(c, "sub", vals(1, "Alice"), 1));
    assert_false(lessons_claims_match(c, "sub", vals(1, "alic"), 1));
    assert_false(lessons_claims_match(c, "sub", vals(1, "alicex"), 1));
    assert_false(lessons_claims_match(c, "sub", vals(1, ""), 1));
    assert_true(lessons_claims_match(c, "e", vals(1, ""), 1));
}

static void test_match_array(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_true(lessons_claims_match(c, "realm_access.roles",
                                     vals(1, "admin"), 1));
    assert_true(lessons_claims_match(c, "realm_access.roles",
                                     vals(2, "ops", "user"), 2));
    assert_false(lessons_claims_match(c, "realm_access.roles",
                                      vals(2, "ops", "adm"), 2));
    assert_true(lessons_claims_match(c, "https://example.org/claims.roles",
                                     vals(1, "editor"), 1));
    assert_false(lessons_claims_match(js("{\"r\":[]}"), "r",
                                      vals(1, ""), 1));
}

static void test_match_numbers_booleans(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_true(lessons_claims_match(c, "n", vals(1, "42"), 1));
    assert_false(lessons_claims_match(c, "n", vals(1, "42.0"), 1));
    assert_false(lessons_claims_match(c, "n", vals(1, "4"), 1));
    assert_true(lessons_claims_match(c, "f", vals(1, "1.5"), 1));
    assert_true(lessons_claims_match(c, "t", vals(1, "true"), 1));
    assert_false(lessons_claims_match(c, "t", vals(1, "True"), 1));
    assert_false(lessons_claims_match(c, "t", vals(1, "1"), 1));
    assert_true(lessons_claims_match(c, "no", vals(1, "false"), 1));
    /* array members by their JSON text too */
    assert_true(lessons_claims_match(c, "arr", vals(1, "1"), 1));
    assert_true(lessons_claims_match(c, "arr", vals(1, "two"), 1));
    assert_true(lessons_claims_match(c, "arr", vals(1, "true"), 1));
    /* a string "42" is not the number, and the reverse */
    assert_false(lessons_claims_match(c, "sub", vals(1, "\"alice\""), 1));
    assert_true(lessons_claims_match(js("{\"s\":\"42\"}"), "s",
                                     vals(1, "42"), 1));
}

static void test_match_scope_words(void **state)
{
    json_t *c = js("{\"scope\":\"openid lessons:read  lessons:write\","
                   "\"scp\":\"Lessons.Read\",\"other\":\"a b\","
                   "\"nested\":{\"scope\":\"x y\"},"
                   "\"nul\":{\"scope\":\"a\\u0000b c\"}}");
    json_t *arr = js("{\"scope\":[\"lessons:read lessons:write\"]}");

    (void)state;
    /* RFC 9068: a space-separated string; a value is one word of it */
    assert_true(lessons_claims_match(c, "scope", vals(1, "lessons:read"), 1));
    assert_true(lessons_claims_match(c, "scope", vals(1, "lessons:write"), 1));
    assert_true(lessons_claims_match(c, "scope", vals(1, "openid"), 1));
    assert_true(lessons_claims_match(c, "scp", vals(1, "Lessons.Read"), 1));
    assert_false(lessons_claims_match(c, "scope", vals(1, "lessons"), 1));
    assert_false(lessons_claims_match(c, "scope", vals(1, "lessons:rea"), 1));
    assert_false(lessons_claims_match(c, "scope", vals(1, "read"), 1));
    assert_false(lessons_claims_match(c, "scope", vals(1, ""), 1));
    assert_false(lessons_claims_match(c, "scope",
                                      vals(1, "openid lessons:read"), 1));
    assert_false(lessons_claims_match(c, "scp", vals(1, "lessons.read"), 1));
    /* only scope and scp, and only at the top level */
    assert_false(lessons_claims_match(c, "other", vals(1, "a"), 1));
    assert_true(lessons_claims_match(c, "other", vals(1, "a b"), 1));
    assert_false(lessons_claims_match(c, "nested.scope", vals(1, "x"), 1));
    /* an array scope is an array: whole members */
    assert_false(lessons_claims_match(arr, "scope", vals(1, "lessons:read"), 1));
    assert_true(lessons_claims_match(arr, "scope",
                                     vals(1, "lessons:read lessons:write"), 1));
}

static void test_match_never(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_false(lessons_claims_match(c, "missing", vals(1, "x"), 1));
    assert_false(lessons_claims_match(c, "nil", vals(1, "null"), 1));
    assert_false(lessons_claims_match(c, "nil", vals(1, ""), 1));
    assert_false(lessons_claims_match(c, "arr", vals(1, "null"), 1));
    assert_false(lessons_claims_match(c, "realm_access", vals(1, "roles"), 1));
    assert_false(lessons_claims_match(c, "objs", vals(1, "{\"a\":1}"), 1));
    assert_true(lessons_claims_match(c, "objs", vals(1, "b"), 1));
    assert_false(lessons_claims_match(c, "nested", vals(1, "x"), 1));
    assert_false(lessons_claims_match(c, "nested", vals(1, "[\"x\"]"), 1));
    /* an embedded NUL never matches the text before it */
    assert_false(lessons_claims_match(c, "nul", vals(1, "admin"), 1));
    /* argument edges */
    assert_false(lessons_claims_match(c, "sub", vals(1, "alice"), 0));
    assert_false(lessons_claims_match(c, "sub", vals(1, "alice"), -1));
    assert_false(lessons_claims_match(c, "sub", NULL, 1));
    assert_false(lessons_claims_match(c, NULL, vals(1, "alice"), 1));
    assert_false(lessons_claims_match(NULL, "sub", vals(1, "alice"), 1));
    assert_true(lessons_claims_match(c, "sub", vals(2, NULL, "alice"), 2));
    /* only the first nvalues count */
    assert_false(lessons_claims_match(c, "sub", vals(2, "bob", "alice"), 1));
}

/* -------------------------------------------------------------- text */

#define BIG ((apr_size_t)4096)

static const char *text_of(json_t *c, const char *name, apr_size_t max)
{
    const char *text = "unset";

    lessons_claims_text(pool, lessons_claims_get(c, name), max, &text);
    return text;
}

static lessons_claim_text_e rule_of(json_t *c, const char *name,
                                    apr_size_t max)
{
    const char *text = "unset";
    lessons_claim_text_e rc;

    rc = lessons_claims_text(pool, lessons_claims_get(c, name), max, &text);
    /* the text is handed over exactly when the rule holds */
    assert_true((rc == LESSONS_CLAIM_TEXT_OK) == (text != NULL));
    return rc;
}

static void test_text_scalars(void **state)
{
    json_t *c = js(KC);
    const char *t = "unset";

    (void)state;
    assert_string_equal(text_of(c, "sub", BIG), "alice");
    assert_string_equal(text_of(c, "n", BIG), "42");
    assert_string_equal(text_of(c, "f", BIG), "1.5");
    assert_string_equal(text_of(c, "t", BIG), "true");
    assert_string_equal(text_of(c, "no", BIG), "false");
    assert_string_equal(text_of(c, "nil", BIG), "");
    assert_string_equal(text_of(c, "e", BIG), "");
    assert_string_equal(text_of(c, "uni", BIG),
                        "gr\xc3\xbc\xc3\x9f" "e \xe2\x82\xac\xf0\x9f\x98\x80");
    assert_int_equal(rule_of(c, "missing", BIG), LESSONS_CLAIM_TEXT_ABSENT);
    assert_null(text_of(c, "missing", BIG));
    assert_int_equal(lessons_claims_text(NULL, lessons_claims_get(c, "sub"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_ABSENT);
    assert_null(t);
    assert_int_equal(lessons_claims_text(pool, lessons_claims_get(c, "sub"),
                                         BIG, NULL),
                     LESSONS_CLAIM_TEXT_ABSENT);
}

/* Arrays are their compact JSON text, members exactly as the token has
 * them (issue 55): the first character tells an array from a string.
 */
static void test_text_arrays(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_string_equal(text_of(c, "realm_access.roles", BIG),
                        "[\"admin\",\"user\"]");
    assert_string_equal(text_of(js("{\"a\":[1,\"two\",true,1.5]}"), "a",
                                BIG), "[1,\"two\",true,1.5]");
    assert_string_equal(text_of(js("{\"a\":[]}"), "a", BIG), "[]");
    assert_string_equal(text_of(js("{\"a\":[\"x\"]}"), "a", BIG), "[\"x\"]");
    /* what a comma join could not say, JSON says exactly */
    assert_string_equal(text_of(js("{\"a\":[\"x,admin\",\"user\"]}"), "a",
                                BIG), "[\"x,admin\",\"user\"]");
    assert_string_equal(text_of(js("{\"a\":[\"\",null]}"), "a", BIG),
                        "[\"\",null]");
    assert_string_equal(text_of(c, "arr", BIG), "[1,\"two\",true,null]");
    assert_string_equal(text_of(c, "objs", BIG), "[{\"a\":1},\"b\"]");
    assert_string_equal(text_of(c, "nested", BIG), "[[\"x\"]]");
    /* control characters inside are JSON escapes, not raw bytes */
    assert_string_equal(text_of(js("{\"a\":[\"ok\",\"x\\ny\"]}"), "a",
                                BIG), "[\"ok\",\"x\\ny\"]");
}

/* ["user","admin"] and "user,admin" never give one text; a string that
 * would read as JSON text is not handed over.
 */
static void test_text_array_or_string(void **state)
{
    json_t *c = js("{\"arr\":[\"user\",\"admin\"],\"str\":\"user,admin\","
                   "\"one\":[\"admin\"],\"admin\":\"admin\","
                   "\"fake\":\"[\\\"user\\\",\\\"admin\\\"]\","
                   "\"obj\":\"{\\\"a\\\":1}\",\"mid\":\"a[b]{c}\"}");

    (void)state;
    assert_string_equal(text_of(c, "arr", BIG), "[\"user\",\"admin\"]");
    assert_string_equal(text_of(c, "str", BIG), "user,admin");
    assert_string_equal(text_of(c, "one", BIG), "[\"admin\"]");
    assert_string_equal(text_of(c, "admin", BIG), "admin");
    assert_int_equal(rule_of(c, "fake", BIG), LESSONS_CLAIM_TEXT_LIST);
    assert_int_equal(rule_of(c, "obj", BIG), LESSONS_CLAIM_TEXT_LIST);
    assert_string_equal(text_of(c, "mid", BIG), "a[b]{c}");
    assert_string_equal(lessons_claims_text_describe(LESSONS_CLAIM_TEXT_LIST),
                        "is a string that starts with \"[\" or \"{\", and "
                        "would read as an array's or an object's JSON text");
    /* a user name is no export: "[admin]" is a name like any other */
    {
        const char *t = NULL;

        assert_int_equal(lessons_claims_user(pool, js("\"[admin]\""), BIG,
                                             &t), LESSONS_CLAIM_TEXT_OK);
        assert_string_equal(t, "[admin]");
    }
}

static void test_text_objects(void **state)
{
    json_t *c = js(KC);

    (void)state;
    assert_string_equal(text_of(c, "realm_access.deep", BIG),
                        "{\"x\":{\"y\":\"z\"}}");
    assert_string_equal(text_of(c, "a", BIG),
                        "{\"b\":\"nested\",\"c\":\"only-nested\"}");
    /* control characters inside JSON are escapes, not raw bytes */
    assert_string_equal(text_of(js("{\"o\":{\"k\":\"a\\nb\"}}"), "o", BIG),
                        "{\"k\":\"a\\nb\"}");
}

/* A control character anywhere: nothing handed over, never a cleaned
 * value (which would be another user, or another claim).
 */
static void test_text_control_chars(void **state)
{
    json_t *c = js(KC);
    static const char *const bad[] = {
        "{\"s\":\"mallory\\r\\nX-Admin: true\"}",
        "{\"s\":\"a\\u0000b\"}",
        "{\"s\":\"\\u001b[31m\"}",
        "{\"s\":\"tab\\there\"}",
        "{\"s\":\"del\\u007f\"}",
        "{\"s\":\"c1\\u0085nel\"}",          /* NEL, C1 */
        "{\"s\":\"c1\\u009f\"}",
        "{\"s\":[\"ok\",\"x\\u0085y\"]}",    /* C1 in a member */
    };
    apr_size_t i;

    (void)state;
    assert_int_equal(rule_of(c, "ctl", BIG), LESSONS_CLAIM_TEXT_CONTROL);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(rule_of(js(bad[i]), "s", BIG),
                         LESSONS_CLAIM_TEXT_CONTROL);
        assert_null(text_of(js(bad[i]), "s", BIG));
    }
    /* U+00A0 and above are not control characters; neither is a JSON
     * escape inside an object's text
     */
    assert_string_equal(text_of(js("{\"s\":\"\\u00a0\"}"), "s", BIG),
                        "\xc2\xa0");
    assert_string_equal(text_of(js("{\"s\":\"\\u0100\"}"), "s", BIG),
                        "\xc4\x80");
    assert_string_equal(text_of(js("{\"o\":{\"k\":\"a\\nb\"}}"), "o", BIG),
                        "{\"k\":\"a\\nb\"}");
    /* the rule alone, on bytes */
    assert_int_equal(lessons_claims_text_check("a\xc2", 2, BIG),
                     LESSONS_CLAIM_TEXT_OK);
    assert_int_equal(lessons_claims_text_check("a\xc2\x80", 3, BIG),
                     LESSONS_CLAIM_TEXT_CONTROL);
    assert_int_equal(lessons_claims_text_check(NULL, 0, BIG),
                     LESSONS_CLAIM_TEXT_ABSENT);
}

/* Over the cap: nothing handed over, never a cut value. */
static void test_text_too_long(void **state)
{
    json_t *c = js(KC);
    /* "gr" + U+00FC (2) + U+00DF (2) + "e " + U+20AC (3) + U+1F600 (4) */
    const char *full = "gr\xc3\xbc\xc3\x9f" "e \xe2\x82\xac\xf0\x9f\x98\x80";
    apr_size_t max;

    (void)state;
    assert_int_equal(strlen(full), 15);
    assert_string_equal(text_of(c, "uni", 15), full);
    for (max = 0; max < 15; max++) {
        assert_int_equal(rule_of(c, "uni", max),
                         LESSONS_CLAIM_TEXT_TOO_LONG);
    }
    assert_int_equal(rule_of(c, "sub", 5), LESSONS_CLAIM_TEXT_OK);
    assert_int_equal(rule_of(c, "sub", 4), LESSONS_CLAIM_TEXT_TOO_LONG);
    /* ["admin","user"] is 16 bytes */
    assert_int_equal(rule_of(c, "realm_access.roles", 16),
                     LESSONS_CLAIM_TEXT_OK);
    assert_int_equal(rule_of(c, "realm_access.roles", 15),
                     LESSONS_CLAIM_TEXT_TOO_LONG);
}

static void test_text_long(void **state)
{
    apr_size_t n = 10000, i;
    char *s = apr_palloc(pool, n + 1);
    json_t *v;
    const char *t = "unset";

    (void)state;
    for (i = 0; i < n; i++) {
        s[i] = (char)('a' + i % 26);
    }
    s[n] = '\0';
    v = lessons_json_pool_own(pool, json_string(s));
    assert_non_null(v);
    assert_int_equal(lessons_claims_text(pool, v, 4096, &t),
                     LESSONS_CLAIM_TEXT_TOO_LONG);
    assert_null(t);
    assert_int_equal(lessons_claims_text(pool, v, 20000, &t),
                     LESSONS_CLAIM_TEXT_OK);
    assert_string_equal(t, s);
}

/* A user name is a string or an integer, under the same rule. */
static void test_user(void **state)
{
    json_t *c = js("{\"s\":\"alice\",\"i\":42,\"f\":1.5,\"b\":true,"
                   "\"n\":null,\"a\":[\"x\"],\"o\":{},\"nl\":\"a\\nb\","
                   "\"big\":\"abcdefghij\"}");
    const char *t = "unset";

    (void)state;
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "s"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_OK);
    assert_string_equal(t, "alice");
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "i"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_OK);
    assert_string_equal(t, "42");
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "f"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_NOT_NAME);
    assert_null(t);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "b"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_NOT_NAME);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "n"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_NOT_NAME);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "a"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_NOT_NAME);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "o"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_NOT_NAME);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "nl"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_CONTROL);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "big"),
                                         9, &t), LESSONS_CLAIM_TEXT_TOO_LONG);
    assert_null(t);
    assert_int_equal(lessons_claims_user(pool, lessons_claims_get(c, "no"),
                                         BIG, &t), LESSONS_CLAIM_TEXT_ABSENT);
    assert_string_equal(lessons_claims_text_describe(
                            LESSONS_CLAIM_TEXT_CONTROL),
                        "holds a control character");
}

/* ----------------------------------------------------------- qualify */

/* user@issuer, and never one name for two (issuer, user) pairs of a
 * section (issue 40), whatever "@" the users and issuers hold.
 */
typedef struct {
    const char *user, *issuer;
    int plain;                      /* issuers without "@", else with */
    int n;                          /* how many of them */
    lessons_claim_text_e want;
    const char *name;
} qualify_case_t;

static const char *const QPLAIN[] = { "https://a.example.org",
                                      "https://sso.example.org/realms/b" };
static const char *const QAT[] = { "b", "a@b", "x" };

static const qualify_case_t qualify_cases[] = {
    { "alice", "https://a.example.org", 1, 2, LESSONS_CLAIM_TEXT_OK,
      "alice@https://a.example.org" },
    { "alice", "https://sso.example.org/realms/b", 1, 2,
      LESSONS_CLAIM_TEXT_OK, "alice@https://sso.example.org/realms/b" },
    /* a user with "@" (an e-mail address) is no trouble where issuers
     * hold none: the name's last "@" starts the issuer
     */
    { "bob@https://a.example.org", "https://sso.example.org/realms/b", 1, 2,
      LESSONS_CLAIM_TEXT_OK,
      "bob@https://a.example.org@https://sso.example.org/realms/b" },
    { "", "https://a.example.org", 1, 2, LESSONS_CLAIM_TEXT_OK,
      "@https://a.example.org" },
    /* issuers "b" and "a@b": "x@a" of b and "x" of a@b would both be
     * "x@a@b", which belongs to the longer issuer: refused to b
     */
    { "x@a", "b", 0, 3, LESSONS_CLAIM_TEXT_OTHER_ISSUER, NULL },
    { "x", "a@b", 0, 3, LESSONS_CLAIM_TEXT_OK, "x@a@b" },
    { "@a", "b", 0, 3, LESSONS_CLAIM_TEXT_OTHER_ISSUER, NULL },
    { "", "a@b", 0, 3, LESSONS_CLAIM_TEXT_OK, "@a@b" },
    /* ... and b's other users are b's */
    { "x", "b", 0, 3, LESSONS_CLAIM_TEXT_OK, "x@b" },
    { "a", "b", 0, 3, LESSONS_CLAIM_TEXT_OK, "a@b" },
    { "x@c", "a@b", 0, 3, LESSONS_CLAIM_TEXT_OK, "x@c@a@b" },
    { "y@a", "x", 0, 3, LESSONS_CLAIM_TEXT_OK, "y@a@x" },
    /* one issuer: nothing to tell apart */
    { "x@a", "b", 0, 1, LESSONS_CLAIM_TEXT_OK, "x@a@b" },
    { NULL, "b", 0, 3, LESSONS_CLAIM_TEXT_ABSENT, NULL },
};

static void test_qualify(void **state)
{
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(qualify_cases) / sizeof(qualify_cases[0]); i++) {
        const qualify_case_t *c = &qualify_cases[i];
        const char *name = "unset";

        assert_int_equal(lessons_claims_qualify(pool, c->user, c->issuer,
                                                c->plain ? QPLAIN : QAT,
                                                c->n, &name), c->want);
        if (c->name) {
            assert_string_equal(name, c->name);
        }
        else {
            assert_null(name);
        }
    }
}

/* Over every pair of users from a small alphabet with "@" and every
 * issuer of a list with "@" in names: two names handed out are equal
 * only for the same (issuer, user).
 */
static void test_qualify_never_merges(void **state)
{
    const char *const iss[] = { "b", "a@b", "@b", "b@", "a", "@" };
    const char *const users[] = { "", "a", "x", "x@a", "x@a@b", "@", "a@",
                                  "@a", "x@", "b", "@b", "x@@a" };
    const int ni = (int)(sizeof(iss) / sizeof(iss[0]));
    const int nu = (int)(sizeof(users) / sizeof(users[0]));
    const char **got = apr_pcalloc(pool, sizeof(*got) * (apr_size_t)(ni * nu));
    int i, u, j, handed = 0;

    (void)state;
    for (i = 0; i < ni; i++) {
        for (u = 0; u < nu; u++) {
            if (lessons_claims_qualify(pool, users[u], iss[i], iss, ni,
                                       &got[i * nu + u])
                != LESSONS_CLAIM_TEXT_OK) {
                got[i * nu + u] = NULL;
            }
            handed += got[i * nu + u] != NULL;
        }
    }
    /* most are handed out: only names a longer issuer ends are not */
    assert_true(handed > ni * nu / 2);
    for (i = 0; i < ni * nu; i++) {
        for (j = i + 1; j < ni * nu; j++) {
            if (got[i] && got[j] && strcmp(got[i], got[j]) == 0) {
                fail_msg("%s and %s of %s both give %s", users[i % nu],
                         users[j % nu], iss[i / nu], got[i]);
            }
        }
    }
}

/* ---------------------------------------------------------- env name */

static void test_env_name(void **state)
{
    (void)state;
    assert_string_equal(lessons_claims_env_name(pool, "sub"),
                        "JWT_CLAIM_sub");
    assert_string_equal(lessons_claims_env_name(pool, "realm_access.roles"),
                        "JWT_CLAIM_realm_access_roles");
    assert_string_equal(lessons_claims_env_name(pool, "Mixed_Case09"),
                        "JWT_CLAIM_Mixed_Case09");
    assert_string_equal(lessons_claims_env_name(pool,
                            "https://example.org/claims.roles"),
                        "JWT_CLAIM_https___example_org_claims_roles");
    assert_string_equal(lessons_claims_env_name(pool, "a-b c=d;e\nf$"),
                        "JWT_CLAIM_a_b_c_d_e_f_");
    /* each byte of a non-ASCII name: U+00FC is two */
    assert_string_equal(lessons_claims_env_name(pool, "gr\xc3\xbc"),
                        "JWT_CLAIM_gr__");
    assert_string_equal(lessons_claims_env_name(pool, "\x7f\x80\xff"),
                        "JWT_CLAIM____");
    assert_string_equal(lessons_claims_env_name(pool, "."), "JWT_CLAIM__");
    assert_null(lessons_claims_env_name(pool, ""));
    assert_null(lessons_claims_env_name(pool, NULL));
    assert_null(lessons_claims_env_name(NULL, "sub"));
}

/* Names that collide: documented, so configuration can refuse them. */
static void test_env_name_collisions(void **state)
{
    (void)state;
    assert_string_equal(lessons_claims_env_name(pool, "a.b"),
                        lessons_claims_env_name(pool, "a_b"));
    assert_string_equal(lessons_claims_env_name(pool, "a-b"),
                        lessons_claims_env_name(pool, "a_b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_top_level),
        cmocka_unit_test(test_get_nested),
        cmocka_unit_test(test_get_literal_dot_wins),
        cmocka_unit_test(test_get_missing),
        cmocka_unit_test(test_get_exact_parts),
        cmocka_unit_test(test_match_string),
        cmocka_unit_test(test_match_array),
        cmocka_unit_test(test_match_numbers_booleans),
        cmocka_unit_test(test_match_scope_words),
        cmocka_unit_test(test_match_never),
        cmocka_unit_test(test_text_scalars),
        cmocka_unit_test(test_text_arrays),
        cmocka_unit_test(test_text_array_or_string),
        cmocka_unit_test(test_text_objects),
        cmocka_unit_test(test_text_control_chars),
        cmocka_unit_test(test_text_too_long),
        cmocka_unit_test(test_user),
        cmocka_unit_test(test_text_long),
        cmocka_unit_test(test_qualify),
        cmocka_unit_test(test_qualify_never_merges),
        cmocka_unit_test(test_env_name),
        cmocka_unit_test(test_env_name_collisions),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
