/* Licensed under the Apache License, Version 2.0.
 *
 * test_payload.c: lessons_payload_type_ok, lessons_payload_decode (create
 * and update; blank titles and control characters included) and
 * lessons_payload_error, checked against lessons_payload.h and
 * lessons_lesson.h.
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

#include "api/lessons_payload.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* --------------------------------------------------------------- helpers */

static const char *const known_fields[] = {
    "levelId", "title", "order", "topic", "description", "isActive"
};

static const char *result_name(lessons_payload_e r)
{
    switch (r) {
    case LESSONS_PAYLOAD_OK:        return "OK";
    case LESSONS_PAYLOAD_MALFORMED: return "MALFORMED";
    case LESSONS_PAYLOAD_INVALID:   return "INVALID";
    }
    return "?";
}

typedef struct {
    lessons_payload_e r;
    lessons_input_t in;
    json_t *errors;
    const char *detail;
} decoded_t;

/* Decode len bytes of body; out is prefilled with junk so that every
 * field the decoder is meant to set is seen to be set.
 */
static decoded_t decode_n(const char *body, size_t len,
                          lessons_payload_mode_e mode)
{
    decoded_t d;

    memset(&d.in, 0xa5, sizeof(d.in));
    d.in.has_level_id = d.in.has_title = d.in.has_order = 1;
    d.in.has_topic = d.in.has_description = d.in.has_is_active = 1;
    d.errors = NULL;
    d.detail = NULL;
    d.r = lessons_payload_decode(pool, body, len, mode, &d.in, &d.errors,
                                 &d.detail);
    return d;
}

static decoded_t decode(const char *body, lessons_payload_mode_e mode)
{
    return decode_n(body, strlen(body), mode);
}

static char *dump(const json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    char *out = apr_pstrdup(pool, s ? s : "(null)");

    free(s);
    return out;
}

static void expect_result(const decoded_t *d, lessons_payload_e want,
                          const char *body)
{
    if (d->r != want)
        print_error("body %s: expected %s, got %s (errors %s, detail %s)\n",
                    body, result_name(want), result_name(d->r),
                    dump(d->errors), d->detail ? d->detail : "(null)");
    assert_int_equal(d->r, want);
}

/* The errors object: an object whose keys are exactly the given camelCase
 * fields (NULL-terminated list), each mapped to a non-empty array of
 * non-empty strings.
 */
static void check_errors_exact(const json_t *errors, const char *const *fields)
{
    const char *key;
    json_t *val;
    size_t n = 0, i;

    assert_non_null(errors);
    assert_true(json_is_object(errors));
    for (n = 0; fields[n]; n++) {
        if (!json_object_get(errors, fields[n]))
            print_error("errors %s lacks \"%s\"\n", dump(errors), fields[n]);
        assert_non_null(json_object_get(errors, fields[n]));
    }
    if (json_object_size(errors) != n)
        print_error("errors %s: expected %zu keys\n", dump(errors), n);
    assert_int_equal(json_object_size(errors), n);

    json_object_foreach((json_t *)errors, key, val) {
        int known = 0;

        for (i = 0; i < sizeof(known_fields) / sizeof(known_fields[0]); i++)
            known |= strcmp(key, known_fields[i]) == 0;
        assert_true(known);
        assert_true(json_is_array(val));
        assert_true(json_array_size(val) > 0);
        for (i = 0; i < json_array_size(val); i++) {
            json_t *m = json_array_get(val, i);

            assert_true(json_is_string(m));
            assert_true(json_string_length(m) > 0);
        }
    }
}

#define FIELDS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void expect_invalid(const char *body, lessons_payload_mode_e mode,
                           const char *const *fields)
{
    decoded_t d = decode(body, mode);

    expect_result(&d, LESSONS_PAYLOAD_INVALID, body);
    check_errors_exact(d.errors, fields);
}

static void expect_malformed_n(const char *body, size_t len,
                               lessons_payload_mode_e mode)
{
    decoded_t d = decode_n(body, len, mode);

    expect_result(&d, LESSONS_PAYLOAD_MALFORMED, body);
    assert_non_null(d.detail);
    assert_true(strlen(d.detail) > 0);
}

static void expect_malformed(const char *body, lessons_payload_mode_e mode)
{
    expect_malformed_n(body, strlen(body), mode);
}

static decoded_t expect_ok(const char *body, lessons_payload_mode_e mode)
{
    decoded_t d = decode(body, mode);

    expect_result(&d, LESSONS_PAYLOAD_OK, body);
    return d;
}

#define CREATE LESSONS_PAYLOAD_CREATE
#define UPDATE LESSONS_PAYLOAD_UPDATE

/* repeat a UTF-8 unit n times, in pool */
static char *rep(const char *unit, size_t n)
{
    size_t u = strlen(unit), i;
    char *s = apr_palloc(pool, u * n + 1);

    for (i = 0; i < n; i++)
        memcpy(s + i * u, unit, u);
    s[u * n] = '\0';
    return s;
}

static const char *with_title(const char *title)
{
    return apr_psprintf(pool, "{\"levelId\":1,\"title\":\"%s\",\"order\":1}",
                        title);
}

static const char *with_field(const char *name, const char *json_value)
{
    return apr_psprintf(pool, "{\"levelId\":1,\"title\":\"T\",\"order\":1,"
                        "\"%s\":%s}", name, json_value);
}

/* ----------------------------------------------------------- type_ok */

static void test_type_ok(void **state)
{
    static const char *const good[] = {
        "application/json",
        "Application/JSON; charset=UTF-8",
        "application/problem+json",
        "application/json;charset=utf-8",
        "APPLICATION/JSON",
        "application/json; charset=utf-8",
        "application/vnd.lessons+json",
        "application/merge-patch+json; charset=UTF-8",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (!lessons_payload_type_ok(good[i]))
            print_error("refused \"%s\"\n", good[i]);
        assert_true(lessons_payload_type_ok(good[i]));
    }
}

static void test_type_not_ok(void **state)
{
    static const char *const bad[] = {
        "text/plain",
        "",
        "application/jsonx",
        "application/json; charset=latin1",
        "application/json; charset=iso-8859-1",
        "application/json;charset=utf-16",
        "application/xml",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "text/json",
        "xapplication/json",
        "application/json+xml",
        "application/jsonp",
        "application",
        "json",
    };
    size_t i;

    (void)state;
    assert_false(lessons_payload_type_ok(NULL));
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (lessons_payload_type_ok(bad[i]))
            print_error("accepted \"%s\"\n", bad[i]);
        assert_false(lessons_payload_type_ok(bad[i]));
    }
}

/* ------------------------------------------------------------ create */

static void test_create_full(void **state)
{
    const char *body = "{\"levelId\":2,\"title\":\"Hallo Welt\",\"order\":3,"
                       "\"topic\":\"Greetings\",\"description\":\"Say hi\","
                       "\"isActive\":false}";
    decoded_t d;

    (void)state;
    d = expect_ok(body, CREATE);
    assert_true(d.in.has_level_id && d.in.has_title && d.in.has_order
                && d.in.has_topic && d.in.has_description
                && d.in.has_is_active);
    assert_int_equal(d.in.level_id, 2);
    assert_string_equal(d.in.title, "Hallo Welt");
    assert_int_equal(d.in.order, 3);
    assert_string_equal(d.in.topic, "Greetings");
    assert_string_equal(d.in.description, "Say hi");
    assert_int_equal(d.in.is_active, 0);
}

static void test_create_full_active_true(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"levelId\":6,\"title\":\"x\",\"order\":0,"
                  "\"isActive\":true}", CREATE);
    assert_int_equal(d.in.level_id, 6);
    assert_int_equal(d.in.order, 0);
    assert_true(d.in.is_active);
}

static void test_create_minimal_defaults(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"levelId\":1,\"title\":\"T\",\"order\":0}", CREATE);
    assert_int_equal(d.in.level_id, 1);
    assert_string_equal(d.in.title, "T");
    assert_int_equal(d.in.order, 0);
    assert_non_null(d.in.topic);
    assert_string_equal(d.in.topic, "");
    assert_non_null(d.in.description);
    assert_string_equal(d.in.description, "");
    assert_true(d.in.is_active);
    assert_true(d.in.has_level_id);
    assert_true(d.in.has_title);
    assert_true(d.in.has_order);
    assert_true(d.in.has_topic);
    assert_true(d.in.has_description);
    assert_true(d.in.has_is_active);
}

static void test_create_case_insensitive(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"LevelId\":3,\"TITLE\":\"Upper\",\"Order\":7,"
                  "\"ToPiC\":\"t\",\"DESCRIPTION\":\"d\",\"ISACTIVE\":false}",
                  CREATE);
    assert_int_equal(d.in.level_id, 3);
    assert_string_equal(d.in.title, "Upper");
    assert_int_equal(d.in.order, 7);
    assert_string_equal(d.in.topic, "t");
    assert_string_equal(d.in.description, "d");
    assert_int_equal(d.in.is_active, 0);
}

static void test_create_unknown_ignored(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"id\":99,\"levelId\":1,\"levelName\":\"x\","
                  "\"title\":\"T\",\"order\":1,\"foo\":[1,{\"a\":null}],"
                  "\"bar\":null}", CREATE);
    assert_int_equal(d.in.level_id, 1);
    assert_string_equal(d.in.title, "T");
    assert_int_equal(d.in.order, 1);
}

static void test_create_missing_level_id(void **state)
{
    (void)state;
    expect_invalid("{\"title\":\"T\",\"order\":1}", CREATE,
                   FIELDS("levelId"));
}

static void test_create_missing_title(void **state)
{
    (void)state;
    expect_invalid("{\"levelId\":1,\"order\":1}", CREATE, FIELDS("title"));
}

static void test_create_missing_order(void **state)
{
    (void)state;
    expect_invalid("{\"levelId\":1,\"title\":\"T\"}", CREATE,
                   FIELDS("order"));
}

static void test_create_empty_object(void **state)
{
    (void)state;
    expect_invalid("{}", CREATE, FIELDS("levelId", "title", "order"));
}

static void test_create_level_id_types(void **state)
{
    static const char *const bad[] = {
        "\"1\"", "1.5", "1.0", "1e2", "true", "null", "[1]", "{}"
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *body = apr_psprintf(pool, "{\"levelId\":%s,\"title\":"
                                        "\"T\",\"order\":1}", bad[i]);

        expect_invalid(body, CREATE, FIELDS("levelId"));
    }
}

static void test_create_order_types(void **state)
{
    static const char *const bad[] = {
        "\"1\"", "1.5", "2.0", "true", "false", "null", "[]", "{}"
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *body = apr_psprintf(pool, "{\"levelId\":1,\"title\":"
                                        "\"T\",\"order\":%s}", bad[i]);

        expect_invalid(body, CREATE, FIELDS("order"));
    }
}

static void test_create_string_types(void **state)
{
    static const char *const bad[] = { "5", "true", "null", "[\"x\"]", "{}" };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_invalid(apr_psprintf(pool, "{\"levelId\":1,\"title\":%s,"
                                    "\"order\":1}", bad[i]),
                       CREATE, FIELDS("title"));
        expect_invalid(with_field("topic", bad[i]), CREATE, FIELDS("topic"));
        expect_invalid(with_field("description", bad[i]), CREATE,
                       FIELDS("description"));
    }
}

static void test_create_is_active_types(void **state)
{
    static const char *const bad[] = {
        "\"true\"", "1", "0", "null", "[]", "\"yes\""
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_invalid(with_field("isActive", bad[i]), CREATE,
                       FIELDS("isActive"));
}

static void test_create_level_id_range(void **state)
{
    decoded_t d;

    (void)state;
    expect_invalid("{\"levelId\":0,\"title\":\"T\",\"order\":1}", CREATE,
                   FIELDS("levelId"));
    expect_invalid("{\"levelId\":-1,\"title\":\"T\",\"order\":1}", CREATE,
                   FIELDS("levelId"));
    expect_invalid("{\"levelId\":2147483648,\"title\":\"T\",\"order\":1}",
                   CREATE, FIELDS("levelId"));
    expect_invalid("{\"levelId\":4294967297,\"title\":\"T\",\"order\":1}",
                   CREATE, FIELDS("levelId"));
    d = expect_ok("{\"levelId\":2147483647,\"title\":\"T\",\"order\":1}",
                  CREATE);
    assert_int_equal(d.in.level_id, 2147483647);
}

static void test_create_order_range(void **state)
{
    decoded_t d;

    (void)state;
    expect_invalid("{\"levelId\":1,\"title\":\"T\",\"order\":-1}", CREATE,
                   FIELDS("order"));
    expect_invalid("{\"levelId\":1,\"title\":\"T\",\"order\":2147483648}",
                   CREATE, FIELDS("order"));
    expect_invalid("{\"levelId\":1,\"title\":\"T\",\"order\":-2147483649}",
                   CREATE, FIELDS("order"));
    expect_invalid("{\"levelId\":1,\"title\":\"T\","
                   "\"order\":9223372036854775807}", CREATE,
                   FIELDS("order"));
    d = expect_ok("{\"levelId\":1,\"title\":\"T\",\"order\":2147483647}",
                  CREATE);
    assert_int_equal(d.in.order, 2147483647);
}

static void test_create_title_blank(void **state)
{
    (void)state;
    expect_invalid(with_title(""), CREATE, FIELDS("title"));
    expect_invalid(with_title("   "), CREATE, FIELDS("title"));
    expect_invalid(with_title(" \\t\\r\\n "), CREATE, FIELDS("title"));
}

static void test_create_title_length(void **state)
{
    decoded_t d;

    (void)state;
    /* 200 two-byte characters: 400 bytes, but 200 characters */
    d = expect_ok(with_title(rep("\xc3\xbc", 200)), CREATE);
    assert_string_equal(d.in.title, rep("\xc3\xbc", 200));
    expect_invalid(with_title(rep("\xc3\xbc", 201)), CREATE, FIELDS("title"));
    /* the same through \u escapes */
    expect_ok(with_title(rep("\\u00fc", 200)), CREATE);
    expect_invalid(with_title(rep("\\u00fc", 201)), CREATE, FIELDS("title"));
    /* plain ASCII */
    expect_ok(with_title(rep("a", 200)), CREATE);
    expect_invalid(with_title(rep("a", 201)), CREATE, FIELDS("title"));
    /* four-byte characters count once each (code points) */
    expect_ok(with_title(rep("\xf0\x9f\x98\x80", 200)), CREATE);
    expect_invalid(with_title(rep("\xf0\x9f\x98\x80", 201)), CREATE,
                   FIELDS("title"));
    /* one character is enough */
    d = expect_ok(with_title("\xc3\x9f"), CREATE);
    assert_string_equal(d.in.title, "\xc3\x9f");
}

static void test_create_topic_length(void **state)
{
    decoded_t d;
    const char *ok100 = apr_psprintf(pool, "\"%s\"", rep("\xc3\xa4", 100));

    (void)state;
    d = expect_ok(with_field("topic", ok100), CREATE);
    assert_string_equal(d.in.topic, rep("\xc3\xa4", 100));
    expect_invalid(with_field("topic", apr_psprintf(pool, "\"%s\"",
                                                    rep("\xc3\xa4", 101))),
                   CREATE, FIELDS("topic"));
    expect_ok(with_field("topic", apr_psprintf(pool, "\"%s\"",
                                               rep("t", 100))), CREATE);
    expect_invalid(with_field("topic", apr_psprintf(pool, "\"%s\"",
                                                    rep("t", 101))),
                   CREATE, FIELDS("topic"));
    d = expect_ok(with_field("topic", "\"\""), CREATE);
    assert_string_equal(d.in.topic, "");
}

static void test_create_description_length(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok(with_field("description", apr_psprintf(pool, "\"%s\"",
                  rep("\xe2\x82\xac", 4000))), CREATE);
    assert_int_equal(strlen(d.in.description), 12000);
    expect_invalid(with_field("description", apr_psprintf(pool, "\"%s\"",
                   rep("\xe2\x82\xac", 4001))), CREATE,
                   FIELDS("description"));
    expect_ok(with_field("description", apr_psprintf(pool, "\"%s\"",
              rep("d", 4000))), CREATE);
    expect_invalid(with_field("description", apr_psprintf(pool, "\"%s\"",
                   rep("d", 4001))), CREATE, FIELDS("description"));
    d = expect_ok(with_field("description", "\"   \""), CREATE);
    assert_string_equal(d.in.description, "   ");
}

static void test_create_duplicate_case_mix(void **state)
{
    (void)state;
    expect_invalid("{\"levelId\":1,\"title\":\"a\",\"Title\":\"b\","
                   "\"order\":1}", CREATE, FIELDS("title"));
    expect_invalid("{\"levelId\":1,\"title\":\"a\",\"order\":1,"
                   "\"ORDER\":2}", CREATE, FIELDS("order"));
}

/* A field given twice by the very same name gets the same field error
 * as one given twice in another case (never last-one-wins), on create
 * and update, whatever the key's escapes.
 */
static void test_create_duplicate_exact(void **state)
{
    (void)state;
    expect_invalid("{\"levelId\":1,\"title\":\"a\",\"title\":\"b\","
                   "\"order\":1}", CREATE, FIELDS("title"));
    expect_invalid("{\"order\":1,\"title\":\"a\",\n  \"order\" : 2}", UPDATE,
                   FIELDS("order"));
    expect_invalid("{\"levelId\":1,\"ti\\u0074le\":\"a\",\"title\":\"b\","
                   "\"order\":1}", CREATE, FIELDS("title"));
}

/* What the parser cannot hold is refused with a message that says so,
 * not "not valid JSON": a member the API ignores given twice, a number
 * beyond 64-bit integers or doubles, a NUL in a property name.
 */
static void test_parser_limits_named(void **state)
{
    static const struct {
        const char *body, *says;
    } cases[] = {
        { "{\"title\":\"a\",\"x\":1,\"x\":2}", "more than once" },
        { "{\"title\":\"a\",\"a\\\"b\":1,\"a\\\"b\":2}", "more than once" },
        { "{\"title\":\"a\",\"x\":123456789012345678901234567890}",
          "64 bits" },
        { "{\"title\":\"a\",\"x\":1e999}", "double" },
        { "{\"levelId\":99999999999999999999}", "64 bits" },
        { "{\"title\":\"a\",\"a\\u0000b\":1}", "NUL" },
    };
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        decoded_t d = decode(cases[i].body, UPDATE);

        expect_result(&d, LESSONS_PAYLOAD_MALFORMED, cases[i].body);
        if (!strstr(d.detail, cases[i].says))
            print_error("%s: detail \"%s\" lacks \"%s\"\n", cases[i].body,
                        d.detail, cases[i].says);
        assert_non_null(strstr(d.detail, cases[i].says));
        assert_null(strstr(d.detail, "not valid JSON"));
    }
    /* what is not JSON still says so */
    expect_malformed("{\"title\":", UPDATE);
    assert_non_null(strstr(decode("{\"title\":", UPDATE).detail,
                           "not valid JSON"));
}

static void test_create_multiple_errors(void **state)
{
    (void)state;
    expect_invalid("{\"levelId\":\"x\",\"title\":\"\",\"order\":-1,"
                   "\"topic\":7,\"description\":false,\"isActive\":\"yes\"}",
                   CREATE, FIELDS("levelId", "title", "order", "topic",
                                  "description", "isActive"));
    expect_invalid("{\"levelId\":0,\"isActive\":1}", CREATE,
                   FIELDS("levelId", "title", "order", "isActive"));
}

static void test_create_error_keys_camel_case(void **state)
{
    (void)state;
    /* the client spelled it its way; the error names the wire name */
    expect_invalid("{\"LEVELID\":\"x\",\"Title\":\"T\",\"ORDER\":1,"
                   "\"IsActive\":3}", CREATE, FIELDS("levelId", "isActive"));
}

static void test_create_invalid_utf8(void **state)
{
    (void)state;
    expect_malformed("{\"levelId\":1,\"title\":\"\xff\",\"order\":1}", CREATE);
    /* overlong "/" */
    expect_malformed("{\"levelId\":1,\"title\":\"\xc0\xaf\",\"order\":1}",
                     CREATE);
    /* encoded surrogate */
    expect_malformed("{\"levelId\":1,\"title\":\"\xed\xa0\x80\",\"order\":1}",
                     CREATE);
    /* truncated sequence */
    expect_malformed("{\"levelId\":1,\"title\":\"\xe2\x82\",\"order\":1}",
                     CREATE);
    /* in an ignored property too: the body as a whole is not UTF-8 */
    expect_malformed("{\"levelId\":1,\"title\":\"T\",\"order\":1,"
                     "\"x\":\"\xfe\"}", CREATE);
}

static void test_create_not_object(void **state)
{
    (void)state;
    expect_malformed("[]", CREATE);
    expect_malformed("[{\"levelId\":1,\"title\":\"T\",\"order\":1}]", CREATE);
    expect_malformed("1", CREATE);
    expect_malformed("\"text\"", CREATE);
    expect_malformed("null", CREATE);
    expect_malformed("true", CREATE);
}

static void test_create_not_json(void **state)
{
    (void)state;
    expect_malformed("not json", CREATE);
    expect_malformed("", CREATE);
    expect_malformed("   ", CREATE);
    expect_malformed("{", CREATE);
    expect_malformed("{\"levelId\":1,}", CREATE);
    expect_malformed("{'levelId':1}", CREATE);
    expect_malformed("{\"levelId\":1,\"title\":\"T\",\"order\":1} {}",
                     CREATE);
    expect_malformed("{\"levelId\":1,\"title\":\"T\",\"order\":1}x", CREATE);
}

static void test_create_respects_len(void **state)
{
    static const char body[] =
        "{\"levelId\":1,\"title\":\"T\",\"order\":1}GARBAGE";
    decoded_t d;

    (void)state;
    /* only the first len bytes are the body */
    d = decode_n(body, strlen(body) - 7, CREATE);
    expect_result(&d, LESSONS_PAYLOAD_OK, body);
    assert_string_equal(d.in.title, "T");
    /* and a cut inside the object is malformed */
    expect_malformed_n(body, 10, CREATE);
}

static void test_create_trailing_whitespace_ok(void **state)
{
    (void)state;
    expect_ok(" \n{\"levelId\":1,\"title\":\"T\",\"order\":1}\r\n", CREATE);
}

static void test_create_strings_decoded(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"levelId\":1,\"title\":\"Say \\\"hi\\\"\","
                  "\"order\":1,\"topic\":\"a\\\\b\","
                  "\"description\":\"\\u00dcbung \\ud83d\\ude00\\n\"}",
                  CREATE);
    assert_string_equal(d.in.title, "Say \"hi\"");
    assert_string_equal(d.in.topic, "a\\b");
    assert_string_equal(d.in.description,
                        "\xc3\x9c" "bung \xf0\x9f\x98\x80\n");
}

static void test_create_values_outlive_json(void **state)
{
    decoded_t d;
    char *body = apr_pstrdup(pool, "{\"levelId\":1,\"title\":\"Kept\","
                             "\"order\":1,\"topic\":\"Top\"}");

    (void)state;
    d = decode(body, CREATE);
    expect_result(&d, LESSONS_PAYLOAD_OK, body);
    memset(body, 'Z', strlen(body));             /* caller reuses buffer */
    assert_string_equal(d.in.title, "Kept");
    assert_string_equal(d.in.topic, "Top");
}

/* ------------------------------------------------------------ update */

static void test_update_empty(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{}", UPDATE);
    assert_false(d.in.has_level_id);
    assert_false(d.in.has_title);
    assert_false(d.in.has_order);
    assert_false(d.in.has_topic);
    assert_false(d.in.has_description);
    assert_false(d.in.has_is_active);
}

static void test_update_partial(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"title\":\"New\"}", UPDATE);
    assert_true(d.in.has_title);
    assert_string_equal(d.in.title, "New");
    assert_false(d.in.has_level_id);
    assert_false(d.in.has_order);
    assert_false(d.in.has_topic);
    assert_false(d.in.has_description);
    assert_false(d.in.has_is_active);

    d = expect_ok("{\"isActive\":false,\"ORDER\":0}", UPDATE);
    assert_true(d.in.has_is_active);
    assert_int_equal(d.in.is_active, 0);
    assert_true(d.in.has_order);
    assert_int_equal(d.in.order, 0);
    assert_false(d.in.has_title);
    assert_false(d.in.has_level_id);
    assert_false(d.in.has_topic);
    assert_false(d.in.has_description);

    d = expect_ok("{\"levelId\":5,\"topic\":\"\",\"description\":\"D\"}",
                  UPDATE);
    assert_true(d.in.has_level_id);
    assert_int_equal(d.in.level_id, 5);
    assert_true(d.in.has_topic);
    assert_string_equal(d.in.topic, "");
    assert_true(d.in.has_description);
    assert_string_equal(d.in.description, "D");
    assert_false(d.in.has_title);
    assert_false(d.in.has_order);
    assert_false(d.in.has_is_active);
}

static void test_update_full(void **state)
{
    decoded_t d;

    (void)state;
    d = expect_ok("{\"levelId\":4,\"title\":\"A\",\"order\":2,\"topic\":\"B\","
                  "\"description\":\"C\",\"isActive\":true}", UPDATE);
    assert_true(d.in.has_level_id && d.in.has_title && d.in.has_order
                && d.in.has_topic && d.in.has_description
                && d.in.has_is_active);
    assert_int_equal(d.in.level_id, 4);
    assert_string_equal(d.in.title, "A");
    assert_int_equal(d.in.order, 2);
    assert_string_equal(d.in.topic, "B");
    assert_string_equal(d.in.description, "C");
    assert_true(d.in.is_active);
}

static void test_update_validation(void **state)
{
    (void)state;
    expect_invalid("{\"title\":\"\"}", UPDATE, FIELDS("title"));
    expect_invalid("{\"title\":\"  \"}", UPDATE, FIELDS("title"));
    expect_invalid("{\"title\":null}", UPDATE, FIELDS("title"));
    expect_invalid(apr_psprintf(pool, "{\"title\":\"%s\"}", rep("x", 201)),
                   UPDATE, FIELDS("title"));
    expect_invalid("{\"levelId\":0}", UPDATE, FIELDS("levelId"));
    expect_invalid("{\"levelId\":\"2\"}", UPDATE, FIELDS("levelId"));
    expect_invalid("{\"order\":\"1\"}", UPDATE, FIELDS("order"));
    expect_invalid("{\"order\":-5}", UPDATE, FIELDS("order"));
    expect_invalid("{\"order\":1.5}", UPDATE, FIELDS("order"));
    expect_invalid(apr_psprintf(pool, "{\"topic\":\"%s\"}", rep("t", 101)),
                   UPDATE, FIELDS("topic"));
    expect_invalid(apr_psprintf(pool, "{\"description\":\"%s\"}",
                                rep("d", 4001)),
                   UPDATE, FIELDS("description"));
    expect_invalid("{\"isActive\":\"false\"}", UPDATE, FIELDS("isActive"));
    expect_invalid("{\"title\":\"a\",\"TITLE\":\"b\"}", UPDATE,
                   FIELDS("title"));
    expect_invalid("{\"levelId\":-3,\"Order\":-1,\"topic\":1}", UPDATE,
                   FIELDS("levelId", "order", "topic"));
}

static void test_update_malformed(void **state)
{
    (void)state;
    expect_malformed("[]", UPDATE);
    expect_malformed("", UPDATE);
    expect_malformed("null", UPDATE);
    expect_malformed("{\"title\":\"\xff\"}", UPDATE);
}

/* ------------------------------------- blank titles, control characters */

/* The issue's list: alone, each of these makes a blank title. */
static const unsigned long issue_blanks[] = {
    0x00A0, 0x200B, 0x3000, 0x2028, 0xFEFF, 0x0000, 0x0001, 0x001F, 0x007F,
    0x0080, 0x009F
};

/* Unicode White_Space, every code point of it. */
static const unsigned long white_space[] = {
    0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085, 0x00A0, 0x1680,
    0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
    0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000
};

/* Invisible format characters (Default_Ignorable_Code_Point): the ones
 * the issue names first, then the ends of each other range.
 */
static const unsigned long invisible[] = {
    0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x180E, 0x00AD,
    0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180F, 0x200E,
    0x200F, 0x202A, 0x202E, 0x2061, 0x2064, 0x2066, 0x206F, 0x3164, 0xFE00,
    0xFE0F, 0xFFA0, 0xFFF0, 0xFFF8, 0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A,
    0xE0000, 0xE0001, 0xE007F, 0xE0100, 0xE01EF, 0xE0FFF
};

/* Visible neighbours of the ranges above: each makes a title. */
static const unsigned long visible[] = {
    0x0021, 0x007E, 0x00A1, 0x00AC, 0x00AE, 0x034E, 0x0350, 0x061B, 0x061D,
    0x115E, 0x1161, 0x167F, 0x1681, 0x17B3, 0x17B6, 0x180A, 0x1810, 0x1FFE,
    0x2010, 0x2027, 0x2030, 0x205E, 0x2070, 0x2FFF, 0x3001, 0x3163, 0x3165,
    0xFDFD, 0xFE10, 0xFEFC, 0xFF9F, 0xFFA1, 0xFFFD, 0x1BC9C, 0x1D172,
    0x1D17B, 0x1F600
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A code point as a JSON escape (a surrogate pair above U+FFFF). */
static const char *esc(unsigned long cp)
{
    if (cp < 0x10000)
        return apr_psprintf(pool, "\\u%04lx", cp);
    cp -= 0x10000;
    return apr_psprintf(pool, "\\u%04lx\\u%04lx", 0xD800 + (cp >> 10),
                        0xDC00 + (cp & 0x3FF));
}

/* A code point as raw UTF-8. */
static const char *utf8(unsigned long cp)
{
    char *s = apr_pcalloc(pool, 5);

    if (cp < 0x80) {
        s[0] = (char)cp;
    }
    else if (cp < 0x800) {
        s[0] = (char)(0xC0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3F));
    }
    else if (cp < 0x10000) {
        s[0] = (char)(0xE0 | (cp >> 12));
        s[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F));
    }
    else {
        s[0] = (char)(0xF0 | (cp >> 18));
        s[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        s[3] = (char)(0x80 | (cp & 0x3F));
    }
    return s;
}

/* A body that sends one string field (JSON text, without quotes); create
 * adds the required fields around it.
 */
static const char *one_string(lessons_payload_mode_e mode, const char *field,
                              const char *text)
{
    if (mode == UPDATE)
        return apr_psprintf(pool, "{\"%s\":\"%s\"}", field, text);
    if (strcmp(field, "title") == 0)
        return with_title(text);
    return with_field(field, apr_psprintf(pool, "\"%s\"", text));
}

/* INVALID, with exactly one message, this one, on exactly this field. */
static void expect_message(const char *body, lessons_payload_mode_e mode,
                           const char *field, const char *message)
{
    decoded_t d = decode(body, mode);
    json_t *list;
    const char *got;

    expect_result(&d, LESSONS_PAYLOAD_INVALID, body);
    check_errors_exact(d.errors, FIELDS(field));
    list = json_object_get(d.errors, field);
    got = json_string_value(json_array_get(list, 0));
    if (json_array_size(list) != 1 || strcmp(got, message) != 0)
        print_error("body %s: expected [\"%s\"], got %s\n", body, message,
                    dump(list));
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(got, message);
}

/* What an empty title gets today: the message every blank title must
 * get too.
 */
static const char *empty_title_message(lessons_payload_mode_e mode)
{
    decoded_t d = decode(one_string(mode, "title", ""), mode);
    json_t *list;

    assert_int_equal(d.r, LESSONS_PAYLOAD_INVALID);
    list = json_object_get(d.errors, "title");
    assert_int_equal(json_array_size(list), 1);
    return apr_pstrdup(pool, json_string_value(json_array_get(list, 0)));
}

static void expect_blank_title(const char *text, lessons_payload_mode_e mode)
{
    expect_message(one_string(mode, "title", text), mode, "title",
                   empty_title_message(mode));
}

static void expect_title_ok(const char *text, const char *want,
                            lessons_payload_mode_e mode)
{
    decoded_t d = expect_ok(one_string(mode, "title", text), mode);

    assert_true(d.in.has_title);
    assert_string_equal(d.in.title, want);
}

/* The message a control character gets on a field. */
static const char *control_message(const char *field)
{
    if (strcmp(field, "description") == 0)
        return "The field description must not contain control characters "
               "other than tab, carriage return and line feed.";
    return apr_psprintf(pool, "The field %s must not contain control "
                        "characters.", field);
}

static int is_control(unsigned long cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

static void test_empty_title_message(void **state)
{
    (void)state;
    /* the path a blank title reuses: unchanged */
    assert_string_equal(empty_title_message(CREATE),
                        "The title field is required.");
    assert_string_equal(empty_title_message(UPDATE),
                        "The title field is required.");
}

static void test_blank_title_each_alone(void **state)
{
    static const lessons_payload_mode_e modes[] = { CREATE, UPDATE };
    size_t i, m;

    (void)state;
    for (m = 0; m < COUNT(modes); m++) {
        for (i = 0; i < COUNT(issue_blanks); i++)
            expect_blank_title(esc(issue_blanks[i]), modes[m]);
        for (i = 0; i < COUNT(white_space); i++)
            expect_blank_title(esc(white_space[i]), modes[m]);
        for (i = 0; i < COUNT(invisible); i++)
            expect_blank_title(esc(invisible[i]), modes[m]);
    }
}

static void test_blank_title_each_raw(void **state)
{
    size_t i;

    (void)state;
    /* the same as raw UTF-8 (C0 cannot be raw in JSON, see below) */
    for (i = 0; i < COUNT(issue_blanks); i++)
        if (issue_blanks[i] >= 0x20)
            expect_blank_title(utf8(issue_blanks[i]), CREATE);
    for (i = 0; i < COUNT(white_space); i++)
        if (white_space[i] >= 0x20)
            expect_blank_title(utf8(white_space[i]), UPDATE);
    for (i = 0; i < COUNT(invisible); i++)
        expect_blank_title(utf8(invisible[i]), CREATE);
}

static void test_blank_title_every_control(void **state)
{
    unsigned long cp;

    (void)state;
    for (cp = 0; cp <= 0x9F; cp++) {
        if (!is_control(cp))
            continue;
        expect_blank_title(esc(cp), CREATE);
        expect_blank_title(esc(cp), UPDATE);
        /* twice, and between spaces */
        expect_blank_title(apr_pstrcat(pool, esc(cp), esc(cp), NULL),
                           CREATE);
        expect_blank_title(apr_pstrcat(pool, "  ", esc(cp), " ", NULL),
                           UPDATE);
    }
}

static void test_blank_title_combined(void **state)
{
    const char *all = "", *raw = "";
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(issue_blanks); i++)
        all = apr_pstrcat(pool, all, esc(issue_blanks[i]), NULL);
    expect_blank_title(all, CREATE);
    expect_blank_title(all, UPDATE);
    for (i = 0; i < COUNT(white_space); i++)
        all = apr_pstrcat(pool, all, esc(white_space[i]), NULL);
    for (i = 0; i < COUNT(invisible); i++) {
        all = apr_pstrcat(pool, all, esc(invisible[i]), NULL);
        raw = apr_pstrcat(pool, raw, utf8(invisible[i]), NULL);
    }
    expect_blank_title(all, CREATE);
    expect_blank_title(all, UPDATE);
    expect_blank_title(raw, CREATE);
    /* escaped and raw mixed, twice over */
    expect_blank_title(apr_pstrcat(pool, raw, all, raw, all, NULL), UPDATE);
    /* zero-width characters only: no width, no text */
    expect_blank_title("\\u200b\\u200c\\u200d\\u2060\\ufeff", CREATE);
    expect_blank_title("\xef\xbb\xbf\xe2\x80\x8b", CREATE);
}

static void test_blank_title_spaces_mixed(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(issue_blanks); i++) {
        const char *c = esc(issue_blanks[i]);

        expect_blank_title(apr_pstrcat(pool, " ", c, NULL), CREATE);
        expect_blank_title(apr_pstrcat(pool, c, "   ", NULL), CREATE);
        expect_blank_title(apr_pstrcat(pool, "  ", c, " ", c, "  ", NULL),
                           UPDATE);
    }
    for (i = 0; i < COUNT(invisible); i++)
        expect_blank_title(apr_pstrcat(pool, " ", utf8(invisible[i]), " ",
                                       NULL), CREATE);
    expect_blank_title(" \\t \\u00a0\\u200b \\u3000\\r\\n\\u2028 \\ufeff ",
                       CREATE);
    expect_blank_title(apr_pstrcat(pool, rep(" ", 100), "\\u00a0",
                                   rep(" ", 150), NULL), UPDATE);
}

static void test_blank_title_with_visible(void **state)
{
    const char *esc_all = "", *raw_all = "";
    size_t i;

    (void)state;
    /* every blank that is not a control, around one visible character:
     * accepted, and kept exactly as sent (nothing is trimmed)
     */
    for (i = 0; i < COUNT(white_space); i++) {
        if (!is_control(white_space[i])) {
            esc_all = apr_pstrcat(pool, esc_all, esc(white_space[i]), NULL);
            raw_all = apr_pstrcat(pool, raw_all, utf8(white_space[i]), NULL);
        }
    }
    for (i = 0; i < COUNT(invisible); i++) {
        esc_all = apr_pstrcat(pool, esc_all, esc(invisible[i]), NULL);
        raw_all = apr_pstrcat(pool, raw_all, utf8(invisible[i]), NULL);
    }
    expect_title_ok(apr_pstrcat(pool, esc_all, "a", esc_all, NULL),
                    apr_pstrcat(pool, raw_all, "a", raw_all, NULL), CREATE);
    expect_title_ok(apr_pstrcat(pool, "x", raw_all, NULL),
                    apr_pstrcat(pool, "x", raw_all, NULL), UPDATE);
    expect_title_ok("\\u00a0\\u200b\\u3000\\u2028\\ufeff.\\ufeff",
                    "\xc2\xa0\xe2\x80\x8b\xe3\x80\x80\xe2\x80\xa8\xef\xbb\xbf"
                    ".\xef\xbb\xbf", CREATE);
    expect_title_ok("  \\u00e4  ", "  \xc3\xa4  ", UPDATE);
    /* each visible neighbour of a blank range, alone and among blanks */
    for (i = 0; i < COUNT(visible); i++) {
        expect_title_ok(esc(visible[i]), utf8(visible[i]), CREATE);
        expect_title_ok(utf8(visible[i]), utf8(visible[i]), UPDATE);
        expect_title_ok(apr_pstrcat(pool, "\\u3000", esc(visible[i]),
                                    "\\u200b", NULL),
                        apr_pstrcat(pool, utf8(0x3000), utf8(visible[i]),
                                    utf8(0x200B), NULL), CREATE);
    }
}

static void test_blank_title_length_in_characters(void **state)
{
    (void)state;
    /* an invisible character still counts towards the 200 */
    expect_title_ok(apr_pstrcat(pool, rep("a", 199), "\\u200b", NULL),
                    apr_pstrcat(pool, rep("a", 199), utf8(0x200B), NULL),
                    CREATE);
    expect_invalid(with_title(apr_pstrcat(pool, rep("a", 200), "\\u200b",
                                          NULL)), CREATE, FIELDS("title"));
}

/* Each control code point, escaped, between visible characters, in each
 * string field and both modes: refused naming the field, except tab, CR
 * and LF in description, which are kept exactly.
 */
static void test_control_every_field(void **state)
{
    static const char *const fields[] = { "title", "topic", "description" };
    static const lessons_payload_mode_e modes[] = { CREATE, UPDATE };
    unsigned long cp;
    size_t f, m;

    (void)state;
    for (m = 0; m < COUNT(modes); m++) {
        for (f = 0; f < COUNT(fields); f++) {
            int descr = strcmp(fields[f], "description") == 0;
            const char *msg = control_message(fields[f]);

            for (cp = 0; cp <= 0x9F; cp++) {
                const char *body;
                decoded_t d;

                if (!is_control(cp))
                    continue;
                body = one_string(modes[m], fields[f],
                                  apr_pstrcat(pool, "a", esc(cp), "b", NULL));
                if (!(descr && (cp == '\t' || cp == '\r' || cp == '\n'))) {
                    expect_message(body, modes[m], fields[f], msg);
                    continue;
                }
                d = expect_ok(body, modes[m]);
                assert_true(d.in.has_description);
                assert_int_equal(strlen(d.in.description), 3);
                assert_int_equal(d.in.description[1], (int)cp);
            }
        }
    }
}

static void test_control_raw(void **state)
{
    static const char *const fields[] = { "title", "topic", "description" };
    unsigned long cp;
    size_t f;

    (void)state;
    /* DEL and C1 may be sent unescaped (valid JSON, valid UTF-8) */
    for (f = 0; f < COUNT(fields); f++) {
        const char *msg = control_message(fields[f]);

        for (cp = 0x7F; cp <= 0x9F; cp++)
            expect_message(one_string(CREATE, fields[f],
                                      apr_pstrcat(pool, "x", utf8(cp),
                                                  NULL)),
                           CREATE, fields[f], msg);
    }
    /* a raw C0 byte is not JSON at all: malformed, as before */
    expect_malformed(with_title("a\x01" "b"), CREATE);
    expect_malformed(with_field("description", "\"a\tb\""), CREATE);
}

/* Refused in both modes, with the field's control message. */
static const struct {
    const char *field, *text;
} control_refused[] = {
    /* topic and description may be blank, never control characters */
    { "topic", "\\t" },
    { "topic", "\\u0000" },
    { "topic", "\\u0085" },
    { "description", "\\u0000" },
    { "description", "\\u001b[31m" },
    /* \u0000 is valid JSON: the field is refused, never cut at the NUL */
    { "title", "ab\\u0000" },
    { "title", "\\u0000ab" },
    { "title", "a\\u0000b" },
    { "description", "line\\n\\u0000" },
    /* tab, CR and LF are for description only */
    { "title", "Zeile 1\\nZeile 2" },
    { "title", "a\\tb" },
    { "title", "a\\r" },
    { "topic", "a\\tb" },
    { "topic", "a\\r\\n" },
    { "topic", "\\n" },
};

static void test_control_refused(void **state)
{
    static const lessons_payload_mode_e modes[] = { CREATE, UPDATE };
    size_t i, m;

    (void)state;
    for (i = 0; i < COUNT(control_refused); i++)
        for (m = 0; m < COUNT(modes); m++)
            expect_message(one_string(modes[m], control_refused[i].field,
                                      control_refused[i].text),
                           modes[m], control_refused[i].field,
                           control_message(control_refused[i].field));
}

static void test_control_nul_edges(void **state)
{
    (void)state;
    /* a NUL after 200 characters is still a NUL, not a long title */
    expect_message(with_title(apr_pstrcat(pool, rep("a", 250), "\\u0000",
                                          NULL)), CREATE, "title",
                   control_message("title"));
    /* in a property that is ignored, it does no harm */
    expect_ok("{\"levelId\":1,\"title\":\"T\",\"order\":1,"
              "\"note\":\"a\\u0000b\"}", CREATE);
    /* a NUL in a property name is not supported: malformed */
    expect_malformed("{\"levelId\":1,\"title\":\"T\",\"order\":1,"
                     "\"ti\\u0000tle\":\"x\"}", CREATE);
}

static void test_tab_cr_lf_in_description(void **state)
{
    decoded_t d;

    (void)state;
    /* kept exactly */
    d = expect_ok(with_field("description",
                             "\"Zeile 1\\r\\n\\tZeile 2\\n\\n\\r\""), CREATE);
    assert_string_equal(d.in.description, "Zeile 1\r\n\tZeile 2\n\n\r");
    d = expect_ok("{\"description\":\"\\t\\r\\n\"}", UPDATE);
    assert_string_equal(d.in.description, "\t\r\n");
    /* a title of nothing else is blank, as before */
    expect_blank_title(" \\t\\r\\n ", CREATE);
}

static void test_blank_outside_title(void **state)
{
    decoded_t d;

    (void)state;
    /* blank but not control: fine in topic and description */
    d = expect_ok(with_field("topic", "\"\\u00a0\\u200b\\u3000\""), CREATE);
    assert_string_equal(d.in.topic, "\xc2\xa0\xe2\x80\x8b\xe3\x80\x80");
    d = expect_ok("{\"description\":\"\\u2028\\u2029\\ufeff \"}", UPDATE);
    assert_string_equal(d.in.description,
                        "\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf ");
}

static void test_blank_and_control_together(void **state)
{
    (void)state;
    /* every bad field is named, each with its own message */
    expect_invalid("{\"levelId\":1,\"title\":\"\\u200b\",\"order\":1,"
                   "\"topic\":\"\\u0007\",\"description\":\"\\u0000\"}",
                   CREATE, FIELDS("title", "topic", "description"));
    expect_invalid("{\"title\":\"a\\u0001\",\"description\":\"\\u009b\"}",
                   UPDATE, FIELDS("title", "description"));
    /* a blank title gets the blank message, not the control one */
    expect_blank_title("\\u0000\\u00a0", CREATE);
}

/* ------------------------------------------------------------- error */

static void test_payload_error(void **state)
{
    json_t *e;
    json_t *a;

    (void)state;
    e = lessons_payload_error(pool, "levelId", "The level 9 does not exist.");
    check_errors_exact(e, FIELDS("levelId"));
    a = json_object_get(e, "levelId");
    assert_int_equal(json_array_size(a), 1);
    assert_string_equal(json_string_value(json_array_get(a, 0)),
                        "The level 9 does not exist.");
}

static void test_payload_error_released_with_pool(void **state)
{
    apr_pool_t *sub;
    json_t *e;

    (void)state;
    assert_int_equal(apr_pool_create(&sub, pool), APR_SUCCESS);
    e = lessons_payload_error(sub, "title", "Bad.");
    assert_non_null(e);
    json_incref(e);
    assert_int_equal(e->refcount, 2);
    apr_pool_destroy(sub);
    assert_int_equal(e->refcount, 1);           /* the pool let go */
    json_decref(e);
}

static void test_errors_released_with_pool(void **state)
{
    apr_pool_t *sub;
    lessons_input_t in;
    json_t *errors = NULL;
    const char *detail = NULL;

    (void)state;
    assert_int_equal(apr_pool_create(&sub, pool), APR_SUCCESS);
    assert_int_equal(lessons_payload_decode(sub, "{}", 2, CREATE, &in,
                                            &errors, &detail),
                     LESSONS_PAYLOAD_INVALID);
    assert_non_null(errors);
    json_incref(errors);
    assert_int_equal(errors->refcount, 2);
    apr_pool_destroy(sub);
    assert_int_equal(errors->refcount, 1);
    json_decref(errors);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_ok),
        cmocka_unit_test(test_type_not_ok),
        cmocka_unit_test(test_create_full),
        cmocka_unit_test(test_create_full_active_true),
        cmocka_unit_test(test_create_minimal_defaults),
        cmocka_unit_test(test_create_case_insensitive),
        cmocka_unit_test(test_create_unknown_ignored),
        cmocka_unit_test(test_create_missing_level_id),
        cmocka_unit_test(test_create_missing_title),
        cmocka_unit_test(test_create_missing_order),
        cmocka_unit_test(test_create_empty_object),
        cmocka_unit_test(test_create_level_id_types),
        cmocka_unit_test(test_create_order_types),
        cmocka_unit_test(test_create_string_types),
        cmocka_unit_test(test_create_is_active_types),
        cmocka_unit_test(test_create_level_id_range),
        cmocka_unit_test(test_create_order_range),
        cmocka_unit_test(test_create_title_blank),
        cmocka_unit_test(test_create_title_length),
        cmocka_unit_test(test_create_topic_length),
        cmocka_unit_test(test_create_description_length),
        cmocka_unit_test(test_create_duplicate_case_mix),
        cmocka_unit_test(test_create_duplicate_exact),
        cmocka_unit_test(test_parser_limits_named),
        cmocka_unit_test(test_create_multiple_errors),
        cmocka_unit_test(test_create_error_keys_camel_case),
        cmocka_unit_test(test_create_invalid_utf8),
        cmocka_unit_test(test_create_not_object),
        cmocka_unit_test(test_create_not_json),
        cmocka_unit_test(test_create_respects_len),
        cmocka_unit_test(test_create_trailing_whitespace_ok),
        cmocka_unit_test(test_create_strings_decoded),
        cmocka_unit_test(test_create_values_outlive_json),
        cmocka_unit_test(test_update_empty),
        cmocka_unit_test(test_update_partial),
        cmocka_unit_test(test_update_full),
        cmocka_unit_test(test_update_validation),
        cmocka_unit_test(test_update_malformed),
        cmocka_unit_test(test_empty_title_message),
        cmocka_unit_test(test_blank_title_each_alone),
        cmocka_unit_test(test_blank_title_each_raw),
        cmocka_unit_test(test_blank_title_every_control),
        cmocka_unit_test(test_blank_title_combined),
        cmocka_unit_test(test_blank_title_spaces_mixed),
        cmocka_unit_test(test_blank_title_with_visible),
        cmocka_unit_test(test_blank_title_length_in_characters),
        cmocka_unit_test(test_control_every_field),
        cmocka_unit_test(test_control_raw),
        cmocka_unit_test(test_control_refused),
        cmocka_unit_test(test_control_nul_edges),
        cmocka_unit_test(test_tab_cr_lf_in_description),
        cmocka_unit_test(test_blank_outside_title),
        cmocka_unit_test(test_blank_and_control_together),
        cmocka_unit_test(test_payload_error),
        cmocka_unit_test(test_payload_error_released_with_pool),
        cmocka_unit_test(test_errors_released_with_pool),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
