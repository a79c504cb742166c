/* Licensed under the Apache License, Version 2.0.
 *
 * test_json.c: the wire format of lessons_json.h: lessons in camelCase,
 * lists, RFC 9457 problem documents, compact dumps and pool ownership.
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
#include "apr_tables.h"

#include "base/lessons_json.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

static lessons_lesson_t sample(void)
{
    lessons_lesson_t l;

    l.id = 7;
    l.level_id = 1;
    l.level_name = "Beginner";
    l.level_code = "A1";
    l.title = "Hallo";
    l.order = 2;
    l.topic = "Greetings";
    l.description = "Say hi";
    l.is_active = 1;
    return l;
}

#define SAMPLE_TEXT \
    "{\"id\":7,\"levelId\":1,\"levelName\":\"Beginner\",\"levelCode\":\"A1\"," \
    "\"title\":\"Hallo\",\"order\":2,\"topic\":\"Greetings\"," \
    "\"description\":\"Say hi\",\"isActive\":true}"

/* Parse text as JSON (must succeed); the caller decrefs. */
static json_t *parse(const char *text, apr_size_t len)
{
    json_error_t err;
    json_t *v;

    assert_non_null(text);
    v = json_loadb(text, len, 0, &err);
    if (!v)
        print_error("not JSON (%s): %s\n", err.text, text);
    assert_non_null(v);
    return v;
}

/* ------------------------------------------------------------ lessons */

static void test_lesson_text_exact(void **state)
{
    lessons_lesson_t l = sample();
    apr_size_t len = 0;
    const char *t;

    (void)state;
    t = lessons_json_lesson_text(pool, &l, &len);
    assert_non_null(t);
    assert_string_equal(t, SAMPLE_TEXT);
    assert_int_equal(len, strlen(SAMPLE_TEXT));
}

static void test_lesson_inactive_and_extremes(void **state)
{
    lessons_lesson_t l = sample();
    apr_size_t len = 0;
    const char *t;

    (void)state;
    l.id = 2147483647;
    l.level_id = 6;
    l.level_name = "Proficiency";
    l.level_code = "C2";
    l.title = "T";
    l.order = 0;
    l.topic = "";
    l.description = "";
    l.is_active = 0;
    t = lessons_json_lesson_text(pool, &l, &len);
    assert_non_null(t);
    assert_string_equal(t,
        "{\"id\":2147483647,\"levelId\":6,\"levelName\":\"Proficiency\","
        "\"levelCode\":\"C2\",\"title\":\"T\",\"order\":0,\"topic\":\"\","
        "\"description\":\"\",\"isActive\":false}");
    assert_int_equal(len, strlen(t));
}

/* Ids are 64-bit: exact digits past 2^31 and up to 2^63 - 1, in a lesson
 * and in a list.
 */
static void test_lesson_64_bit_ids(void **state)
{
    static const struct {
        apr_int64_t id;
        const char *text;
    } cases[] = {
        { APR_INT64_C(2147483648), "{\"id\":2147483648," },
        { APR_INT64_C(4294967297), "{\"id\":4294967297," },
        { APR_INT64_C(9000000000000000000), "{\"id\":9000000000000000000," },
        { APR_INT64_MAX, "{\"id\":9223372036854775807," },
    };
    apr_array_header_t *list = apr_array_make(pool, 4,
                                              sizeof(lessons_lesson_t));
    const char *t;
    json_t *v;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lessons_lesson_t l = sample();

        l.id = cases[i].id;
        t = lessons_json_lesson_text(pool, &l, NULL);
        assert_non_null(t);
        assert_memory_equal(t, cases[i].text, strlen(cases[i].text));
        v = lessons_json_lesson(&l);
        assert_non_null(v);
        assert_true(json_integer_value(json_object_get(v, "id"))
                    == cases[i].id);
        json_decref(v);
        *(lessons_lesson_t *)apr_array_push(list) = l;
    }
    t = lessons_json_list_text(pool, list, NULL);
    assert_non_null(t);
    assert_non_null(strstr(t, "[{\"id\":2147483648,"));
    assert_non_null(strstr(t, "},{\"id\":9223372036854775807,"));
}

static void test_lesson_is_active_nonzero_is_true(void **state)
{
    lessons_lesson_t l = sample();
    apr_size_t len = 0;
    const char *t;

    (void)state;
    l.is_active = 5;
    t = lessons_json_lesson_text(pool, &l, &len);
    assert_non_null(t);
    assert_non_null(strstr(t, "\"isActive\":true}"));
}

static void test_lesson_escaping_round_trip(void **state)
{
    static const char title[] = "He said \"hi\" \\ back/slash\n\t\r\x01\x1f";
    static const char topic[] = "\xc3\x9c" "bung \xc3\x9f \xe6\x97\xa5"
                                " \xf0\x9f\x98\x80";      /* Übung ß 日 😀 */
    static const char descr[] = "</script><b>&amp;</b> \x7f end";
    lessons_lesson_t l = sample();
    apr_size_t len = 0, i;
    const char *t;
    json_t *v;

    (void)state;
    l.title = title;
    l.topic = topic;
    l.description = descr;
    t = lessons_json_lesson_text(pool, &l, &len);
    assert_non_null(t);
    assert_int_equal(len, strlen(t));
    /* no raw control characters on the wire */
    for (i = 0; i < len; i++)
        assert_true((unsigned char)t[i] >= 0x20);
    v = parse(t, len);
    assert_string_equal(json_string_value(json_object_get(v, "title")),
                        title);
    assert_string_equal(json_string_value(json_object_get(v, "topic")),
                        topic);
    assert_string_equal(json_string_value(json_object_get(v,
                                                          "description")),
                        descr);
    assert_int_equal(json_integer_value(json_object_get(v, "id")), 7);
    json_decref(v);
}

static void test_lesson_object(void **state)
{
    lessons_lesson_t l = sample();
    json_t *v;
    const char *key;
    json_t *val;
    static const char *const order[] = {
        "id", "levelId", "levelName", "levelCode", "title", "order",
        "topic", "description", "isActive"
    };
    size_t i = 0;

    (void)state;
    v = lessons_json_lesson(&l);
    assert_non_null(v);
    assert_true(json_is_object(v));
    assert_int_equal(json_object_size(v), 9);
    json_object_foreach(v, key, val) {
        assert_true(i < 9);
        assert_string_equal(key, order[i]);
        i++;
    }
    assert_true(json_is_integer(json_object_get(v, "id")));
    assert_int_equal(json_integer_value(json_object_get(v, "id")), 7);
    assert_true(json_is_integer(json_object_get(v, "levelId")));
    assert_int_equal(json_integer_value(json_object_get(v, "levelId")), 1);
    assert_string_equal(json_string_value(json_object_get(v, "levelName")),
                        "Beginner");
    assert_string_equal(json_string_value(json_object_get(v, "levelCode")),
                        "A1");
    assert_string_equal(json_string_value(json_object_get(v, "title")),
                        "Hallo");
    assert_true(json_is_integer(json_object_get(v, "order")));
    assert_int_equal(json_integer_value(json_object_get(v, "order")), 2);
    assert_string_equal(json_string_value(json_object_get(v, "topic")),
                        "Greetings");
    assert_string_equal(json_string_value(json_object_get(v, "description")),
                        "Say hi");
    assert_true(json_is_true(json_object_get(v, "isActive")));
    assert_int_equal(v->refcount, 1);           /* a new reference */
    json_decref(v);
}

static void test_lesson_null_strings(void **state)
{
    int which;

    (void)state;
    for (which = 0; which < 5; which++) {
        lessons_lesson_t l = sample();
        json_t *v;

        switch (which) {
        case 0: l.level_name = NULL; break;
        case 1: l.level_code = NULL; break;
        case 2: l.title = NULL; break;
        case 3: l.topic = NULL; break;
        case 4: l.description = NULL; break;
        }
        v = lessons_json_lesson(&l);
        if (v)
            print_error("string field %d NULL gave an object\n", which);
        assert_null(v);
    }
}

static void test_lesson_invalid_utf8(void **state)
{
    lessons_lesson_t l = sample();
    json_t *v;

    (void)state;
    l.title = "bad \xff byte";
    v = lessons_json_lesson(&l);
    assert_null(v);
    l = sample();
    l.description = "\xc0\xaf";
    assert_null(lessons_json_lesson(&l));
}

/* --------------------------------------------------------------- lists */

static void test_list_empty(void **state)
{
    apr_array_header_t *list = apr_array_make(pool, 0,
                                              sizeof(lessons_lesson_t));
    apr_size_t len = 99;
    const char *t;

    (void)state;
    t = lessons_json_list_text(pool, list, &len);
    assert_non_null(t);
    assert_string_equal(t, "[]");
    assert_int_equal(len, 2);
}

static void test_list_two(void **state)
{
    apr_array_header_t *list = apr_array_make(pool, 2,
                                              sizeof(lessons_lesson_t));
    lessons_lesson_t *a = apr_array_push(list);
    lessons_lesson_t *b;
    apr_size_t len = 0;
    const char *t;

    (void)state;
    *a = sample();
    b = apr_array_push(list);
    *b = sample();
    b->id = 8;
    b->level_id = 2;
    b->level_name = "Elementary";
    b->level_code = "A2";
    b->title = "Tsch\xc3\xbcss";
    b->order = 1;
    b->topic = "";
    b->description = "";
    b->is_active = 0;
    t = lessons_json_list_text(pool, list, &len);
    assert_non_null(t);
    assert_string_equal(t, "[" SAMPLE_TEXT ","
        "{\"id\":8,\"levelId\":2,\"levelName\":\"Elementary\","
        "\"levelCode\":\"A2\",\"title\":\"Tsch\xc3\xbcss\",\"order\":1,"
        "\"topic\":\"\",\"description\":\"\",\"isActive\":false}]");
    assert_int_equal(len, strlen(t));
}

/* ------------------------------------------------------------ problems */

typedef struct {
    int status;
    const char *section;        /* RFC 9110 section */
    const char *reason;
    const char *alt_reason;     /* another accepted wording, or NULL */
} status_case_t;

static const status_case_t statuses[] = {
    { 400, "15.5.1", "Bad Request", NULL },
    { 404, "15.5.5", "Not Found", NULL },
    { 405, "15.5.6", "Method Not Allowed", NULL },
    { 413, "15.5.14", "Content Too Large", "Payload Too Large" },
    { 415, "15.5.16", "Unsupported Media Type", NULL },
    { 500, "15.6.1", "Internal Server Error", NULL },
    { 503, "15.6.4", "Service Unavailable", NULL },
};

static void check_type(json_t *v, const status_case_t *c)
{
    const char *type = json_string_value(json_object_get(v, "type"));
    const char *frag;

    assert_non_null(type);
    assert_true(strncmp(type, "https://", 8) == 0);
    assert_non_null(strstr(type, "9110"));
    frag = strrchr(type, '#');
    assert_non_null(frag);
    if (strcmp(frag + 1, apr_pstrcat(pool, "section-", c->section, NULL)))
        print_error("status %d: type %s\n", c->status, type);
    assert_string_equal(frag + 1,
                        apr_pstrcat(pool, "section-", c->section, NULL));
}

static void test_problem_defaults(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        const status_case_t *c = &statuses[i];
        apr_size_t len = 0;
        const char *t = lessons_json_problem(pool, c->status, NULL, NULL,
                                             NULL, &len);
        json_t *v;
        const char *title;

        assert_non_null(t);
        assert_int_equal(len, strlen(t));
        v = parse(t, len);
        assert_true(json_is_object(v));
        check_type(v, c);
        title = json_string_value(json_object_get(v, "title"));
        assert_non_null(title);
        if (strcmp(title, c->reason)
            && !(c->alt_reason && !strcmp(title, c->alt_reason)))
            print_error("status %d: title \"%s\"\n", c->status, title);
        assert_true(!strcmp(title, c->reason)
                    || (c->alt_reason && !strcmp(title, c->alt_reason)));
        assert_true(json_is_integer(json_object_get(v, "status")));
        assert_int_equal(json_integer_value(json_object_get(v, "status")),
                         c->status);
        assert_null(json_object_get(v, "detail"));
        assert_null(json_object_get(v, "errors"));
        json_decref(v);
    }
}

static void test_problem_title_and_detail(void **state)
{
    apr_size_t len = 0;
    const char *t;
    json_t *v;

    (void)state;
    t = lessons_json_problem(pool, 400, "Malformed JSON",
                             "line 1: \"unexpected\" end <of> input",
                             NULL, &len);
    assert_non_null(t);
    assert_int_equal(len, strlen(t));
    v = parse(t, len);
    check_type(v, &statuses[0]);
    assert_string_equal(json_string_value(json_object_get(v, "title")),
                        "Malformed JSON");
    assert_int_equal(json_integer_value(json_object_get(v, "status")), 400);
    assert_string_equal(json_string_value(json_object_get(v, "detail")),
                        "line 1: \"unexpected\" end <of> input");
    assert_null(json_object_get(v, "errors"));
    json_decref(v);
}

static void test_problem_detail_with_default_title(void **state)
{
    apr_size_t len = 0;
    const char *t;
    json_t *v;

    (void)state;
    t = lessons_json_problem(pool, 503, NULL, "The database is unavailable.",
                             NULL, &len);
    v = parse(t, len);
    check_type(v, &statuses[6]);
    assert_string_equal(json_string_value(json_object_get(v, "title")),
                        "Service Unavailable");
    assert_string_equal(json_string_value(json_object_get(v, "detail")),
                        "The database is unavailable.");
    json_decref(v);
}

static void test_problem_errors(void **state)
{
    json_t *errors = lessons_json_pool_own(pool, json_pack(
        "{s:[s], s:[s,s]}", "title", "The title is required.",
        "levelId", "The levelId must be an integer.", "Second message."));
    apr_size_t len = 0;
    const char *t;
    json_t *v, *e, *m;

    (void)state;
    assert_non_null(errors);
    t = lessons_json_problem(pool, 400,
                             "One or more validation errors occurred.",
                             NULL, errors, &len);
    assert_non_null(t);
    assert_int_equal(len, strlen(t));
    v = parse(t, len);
    check_type(v, &statuses[0]);
    assert_string_equal(json_string_value(json_object_get(v, "title")),
                        "One or more validation errors occurred.");
    assert_int_equal(json_integer_value(json_object_get(v, "status")), 400);
    assert_null(json_object_get(v, "detail"));
    e = json_object_get(v, "errors");
    assert_true(json_is_object(e));
    assert_true(json_equal(e, errors));
    m = json_object_get(e, "levelId");
    assert_int_equal(json_array_size(m), 2);
    assert_string_equal(json_string_value(json_array_get(m, 1)),
                        "Second message.");
    json_decref(v);
}

static void test_problem_all_members(void **state)
{
    json_t *errors = lessons_json_pool_own(pool, json_pack(
        "{s:[s]}", "levelId", "The level 9 does not exist."));
    apr_size_t len = 0;
    const char *t;
    json_t *v;

    (void)state;
    t = lessons_json_problem(pool, 400, "Validation failed", "See errors.",
                             errors, &len);
    v = parse(t, len);
    assert_int_equal(json_object_size(v), 5);
    assert_string_equal(json_string_value(json_object_get(v, "detail")),
                        "See errors.");
    assert_true(json_equal(json_object_get(v, "errors"), errors));
    json_decref(v);
}

static void test_problem_errors_not_consumed(void **state)
{
    json_t *errors = json_pack("{s:[s]}", "title", "Required.");
    apr_pool_t *sub;
    apr_size_t len = 0;
    const char *t;

    (void)state;
    assert_int_equal(apr_pool_create(&sub, pool), APR_SUCCESS);
    assert_int_equal(errors->refcount, 1);
    t = lessons_json_problem(sub, 400, NULL, NULL, errors, &len);
    assert_non_null(t);
    assert_non_null(strstr(t, "\"errors\":{\"title\":[\"Required.\"]}"));
    apr_pool_destroy(sub);
    /* neither stolen nor leaked once the request pool is gone */
    assert_int_equal(errors->refcount, 1);
    json_decref(errors);
}

/* --------------------------------------------------------------- dump */

static void test_dump(void **state)
{
    json_t *v = json_pack("{s:i, s:s, s:[i,b,n], s:{s:s}}", "a", 1, "b", "x",
                          "c", 2, 0, "d", "e", "\xc3\xa9\"");
    apr_size_t len = 0;
    const char *t;

    (void)state;
    assert_non_null(v);
    t = lessons_json_dump(pool, v, &len);
    json_decref(v);
    assert_non_null(t);
    assert_int_equal(len, strlen(t));
    /* compact: no spaces or newlines between tokens */
    assert_null(strchr(t, ' '));
    assert_null(strchr(t, '\n'));
    v = parse(t, len);
    assert_int_equal(json_integer_value(json_object_get(v, "a")), 1);
    assert_string_equal(json_string_value(json_object_get(v, "b")), "x");
    assert_int_equal(json_array_size(json_object_get(v, "c")), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(v, "d"), "e")), "\xc3\xa9\"");
    json_decref(v);
}

static void test_dump_exact(void **state)
{
    json_t *v = json_pack("{s:i,s:s}", "a", 1, "b", "x");
    apr_size_t len = 0;
    const char *t;

    (void)state;
    t = lessons_json_dump(pool, v, &len);
    json_decref(v);
    assert_non_null(t);
    assert_string_equal(t, "{\"a\":1,\"b\":\"x\"}");
    assert_int_equal(len, 15);

    v = json_array();
    t = lessons_json_dump(pool, v, &len);
    json_decref(v);
    assert_string_equal(t, "[]");
    assert_int_equal(len, 2);
}

static void test_dump_null(void **state)
{
    apr_size_t len = 77;

    (void)state;
    assert_null(lessons_json_dump(pool, NULL, &len));
}

static void test_dump_into_pool(void **state)
{
    apr_pool_t *sub;
    json_t *v = json_string("still here");
    apr_size_t len = 0;
    const char *t;

    (void)state;
    assert_int_equal(apr_pool_create(&sub, pool), APR_SUCCESS);
    t = lessons_json_dump(sub, v, &len);
    json_decref(v);                     /* the text does not depend on v */
    assert_string_equal(t, "\"still here\"");
    assert_int_equal(len, 12);
    apr_pool_destroy(sub);
}

/* Documents past the first buffer (a list of 102 lessons is 27 KB):
 * the text grows as jansson writes it and equals jansson's own dump, byte
 * for byte, at every size around the buffer's doublings.
 */
static void test_dump_grows(void **state)
{
    static const apr_size_t sizes[] = { 1, 1020, 1021, 1022, 1023, 1024,
                                        1025, 2046, 2047, 2048, 5000,
                                        30000 };
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *fill = apr_palloc(pool, sizes[i] + 1);
        json_t *v;
        char *want;
        const char *t;
        apr_size_t len = 0;

        memset(fill, 'x', sizes[i]);
        fill[sizes[i]] = '\0';
        fill[0] = '"';                  /* an escape in the stream too */
        v = json_pack("[s,s]", fill, "\xc3\xa4");
        assert_non_null(v);
        want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        t = lessons_json_dump(pool, v, &len);
        json_decref(v);
        assert_non_null(want);
        assert_non_null(t);
        assert_int_equal(len, strlen(want));
        assert_memory_equal(t, want, len + 1);  /* and its NUL */
        free(want);
    }
}

/* ----------------------------------------------------------- pool_own */

static void test_pool_own(void **state)
{
    apr_pool_t *sub;
    json_t *v = json_object();

    (void)state;
    assert_int_equal(apr_pool_create(&sub, pool), APR_SUCCESS);
    json_incref(v);
    assert_int_equal(v->refcount, 2);
    assert_ptr_equal(lessons_json_pool_own(sub, v), v);
    assert_int_equal(v->refcount, 2);           /* not yet */
    apr_pool_clear(sub);
    assert_int_equal(v->refcount, 1);           /* decref'd on clear */
    apr_pool_destroy(sub);
    assert_int_equal(v->refcount, 1);           /* and only once */
    json_decref(v);
}

static void test_pool_own_null(void **state)
{
    apr_pool_t *sub;

    (void)state;
    assert_int_equal(apr_pool_create(&sub, pool), APR_SUCCESS);
    assert_null(lessons_json_pool_own(sub, NULL));
    apr_pool_destroy(sub);                      /* and no crash on clear */
}

static void test_health(void **state)
{
    apr_size_t len = 0;
    const char *pass = lessons_json_health(pool, "pass", &len);
    const char *fail, *warn;

    (void)state;
    assert_non_null(pass);
    assert_int_equal(len, strlen(pass));
    assert_string_equal(pass, "{\"status\":\"pass\"}");
    fail = lessons_json_health(pool, "fail", &len);
    assert_non_null(fail);
    assert_int_equal(len, strlen(fail));
    assert_string_equal(fail, "{\"status\":\"fail\"}");
    warn = lessons_json_health(pool, "warn", &len);
    assert_non_null(warn);
    assert_string_equal(warn, "{\"status\":\"warn\"}");
    assert_string_equal(lessons_json_health(pool, NULL, &len),
                        "{\"status\":\"fail\"}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lesson_text_exact),
        cmocka_unit_test(test_lesson_inactive_and_extremes),
        cmocka_unit_test(test_lesson_64_bit_ids),
        cmocka_unit_test(test_lesson_is_active_nonzero_is_true),
        cmocka_unit_test(test_lesson_escaping_round_trip),
        cmocka_unit_test(test_lesson_object),
        cmocka_unit_test(test_lesson_null_strings),
        cmocka_unit_test(test_lesson_invalid_utf8),
        cmocka_unit_test(test_list_empty),
        cmocka_unit_test(test_list_two),
        cmocka_unit_test(test_problem_defaults),
        cmocka_unit_test(test_problem_title_and_detail),
        cmocka_unit_test(test_problem_detail_with_default_title),
        cmocka_unit_test(test_problem_errors),
        cmocka_unit_test(test_problem_all_members),
        cmocka_unit_test(test_problem_errors_not_consumed),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_dump_exact),
        cmocka_unit_test(test_dump_null),
        cmocka_unit_test(test_dump_into_pool),
        cmocka_unit_test(test_dump_grows),
        cmocka_unit_test(test_pool_own),
        cmocka_unit_test(test_pool_own_null),
        cmocka_unit_test(test_health),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
