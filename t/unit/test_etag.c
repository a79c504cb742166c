/* Licensed under the Apache License, Version 2.0.
 *
 * test_etag.c: lessons_etag -- the tags made, If-None-Match (weak, "*",
 * lists, mod_deflate's suffix) and If-Match read into what the write's
 * statement checks (strong only, this lesson only, bounded).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "api/lessons_etag.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

static lessons_lesson_t lesson(apr_int64_t id, apr_int64_t version,
                               const char *epoch)
{
    lessons_lesson_t l;

    memset(&l, 0, sizeof(l));
    l.id = id;
    l.version = version;
    l.epoch = epoch;
    return l;
}

static void test_tags_made(void **state)
{
    lessons_catalog_t cat = { "00ff", 42 }, other = { "00fe", 42 };
    lessons_lesson_t l = lesson(7, 3, "00ff");
    const char *a = lessons_etag_list(pool, &cat, "[1]", 3),
               *b = lessons_etag_list(pool, &cat, "[2]", 3);

    (void)state;
    /* A list's tag is its bytes' (and its database's), not the version's. */
    assert_non_null(a);
    assert_int_equal(strlen(a), 35);
    assert_memory_equal(a, "\"C", 2);
    assert_string_equal(a, lessons_etag_list(pool, &cat, "[1]", 3));
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, lessons_etag_list(pool, &other, "[1]", 3));
    assert_string_equal(lessons_etag_lesson(pool, &l), "\"L7.3.00ff\"");
    assert_string_equal(lessons_etag_gzip(pool, "\"L7.3.00ff\""),
                        "\"L7.3.00ff-gz\"");
    l.id = APR_INT64_C(9007199254740993);
    assert_string_equal(lessons_etag_lesson(pool, &l),
                        "\"L9007199254740993.3.00ff\"");
}

static void test_none_match(void **state)
{
    const char *tag = "\"C42.00ff\"";

    (void)state;
    assert_false(lessons_etag_none_match(NULL, tag));
    assert_true(lessons_etag_none_match("\"C42.00ff\"", tag));
    assert_true(lessons_etag_none_match("*", tag));
    assert_true(lessons_etag_none_match(" W/\"C42.00ff\"", tag));
    assert_true(lessons_etag_none_match("\"x\", \"C42.00ff\"", tag));
    assert_true(lessons_etag_none_match("\"x\",W/\"C42.00ff\" ,\"y\"", tag));
    /* mod_deflate's form of the same tag (httpd bug 45023) */
    assert_true(lessons_etag_none_match("\"C42.00ff-gzip\"", tag));
    assert_false(lessons_etag_none_match("\"C41.00ff\"", tag));
    assert_false(lessons_etag_none_match("\"C42.00fe\"", tag));
    assert_false(lessons_etag_none_match("\"C42.00ff-gz\"", tag));
    assert_false(lessons_etag_none_match("\"C42.00f\"", tag));
    assert_false(lessons_etag_none_match("C42.00ff", tag));
    assert_false(lessons_etag_none_match("\"C42.00ff", tag));
    assert_false(lessons_etag_none_match("", tag));
    assert_false(lessons_etag_none_match(", ,", tag));
    /* the gzip form has its own tag */
    assert_true(lessons_etag_none_match("\"C42.00ff-gz\"",
                                        lessons_etag_gzip(pool, tag)));
    assert_false(lessons_etag_none_match("\"C42.00ff\"",
                                         lessons_etag_gzip(pool, tag)));
}

/* RFC 9110: "*" alone or a list of entity-tags.  Anything else is
 * malformed and matches nothing: never "*", never 304, never a write.
 */
static void test_malformed_matches_nothing(void **state)
{
    static const char *const bad[] = {
        "*bogus", "*2iDyz.pp", "**", "*, \"L7.3.00ff\"",
        "\"L7.3.00ff\", *", "\"L7.3.00ff", "L7.3.00ff", "W/L7.3.00ff",
        "\"L7.3.00ff\" x", "\"L7.3\x01.00ff\"", "\"a b\"", "w/\"L7.3.00ff\"",
        "", " ", ",", " , ,",
    };
    const char *tag = "\"L7.3.00ff\"";
    lessons_if_match_t im;
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(lessons_etag_none_match(bad[i], tag));
        lessons_etag_if_match(pool, bad[i], 7, &im);
        assert_true(im.asked);          /* asked, and nothing can match */
        assert_false(im.any);
        assert_int_equal(im.n, 0);
    }
    /* what is well formed still works: OWS, empty members, obs-text */
    assert_true(lessons_etag_none_match(" * ", tag));
    assert_true(lessons_etag_none_match("\t\"x\" ,, \"L7.3.00ff\" ", tag));
    assert_false(lessons_etag_none_match("\"\xe4\", \"y\"", tag));
    lessons_etag_if_match(pool, " * ", 7, &im);
    assert_true(im.any);
    lessons_etag_if_match(pool, ", \"L7.3.00ff\",", 7, &im);
    assert_int_equal(im.n, 1);
}

static void test_if_match_absent_and_any(void **state)
{
    lessons_if_match_t im;

    (void)state;
    lessons_etag_if_match(pool, NULL, 7, &im);
    assert_false(im.asked);
    lessons_etag_if_match(pool, "*", 7, &im);
    assert_true(im.asked);
    assert_true(im.any);
    assert_int_equal(im.n, 0);
}

static void test_if_match_versions(void **state)
{
    lessons_if_match_t im;

    (void)state;
    lessons_etag_if_match(pool, "\"L7.3.00ff\", \"L7.5.00ff-gz\"", 7, &im);
    assert_true(im.asked);
    assert_false(im.any);
    assert_int_equal(im.n, 2);
    assert_true(im.versions[0] == 3);
    assert_true(im.versions[1] == 5);
    assert_string_equal(im.epoch, "00ff");
}

static void test_if_match_skips_what_cannot_match(void **state)
{
    lessons_if_match_t im;

    (void)state;
    /* weak, another lesson, a list tag, malformed: none count */
    lessons_etag_if_match(pool, "W/\"L7.3.00ff\", \"L8.3.00ff\", "
                          "\"C42.00ff\", \"L7.x.00ff\", \"L7.3.\", "
                          "\"L7.3.zz\", L7.3.00ff, \"L7..00ff\"", 7, &im);
    assert_true(im.asked);
    assert_false(im.any);
    assert_int_equal(im.n, 0);
    /* a second database's tag is skipped, the first one's kept */
    lessons_etag_if_match(pool, "\"L7.3.00ff\", \"L7.4.abcd\"", 7, &im);
    assert_int_equal(im.n, 1);
    assert_string_equal(im.epoch, "00ff");
}

static void test_if_match_bounded(void **state)
{
    lessons_if_match_t im;
    const char *h = "\"L7.1.0a\", \"L7.2.0a\", \"L7.3.0a\", \"L7.4.0a\", "
                    "\"L7.5.0a\", \"L7.6.0a\"";

    (void)state;
    lessons_etag_if_match(pool, h, 7, &im);
    assert_int_equal(im.n, LESSONS_IF_MATCH_MAX);
    assert_true(im.versions[LESSONS_IF_MATCH_MAX - 1] == 4);
}

static void test_accepts_gzip(void **state)
{
    (void)state;
    assert_false(lessons_etag_accepts_gzip(NULL));
    assert_false(lessons_etag_accepts_gzip(""));
    assert_false(lessons_etag_accepts_gzip("identity"));
    assert_false(lessons_etag_accepts_gzip("br, deflate"));
    assert_true(lessons_etag_accepts_gzip("gzip"));
    assert_true(lessons_etag_accepts_gzip("GZIP"));
    assert_true(lessons_etag_accepts_gzip("br, gzip, deflate"));
    assert_true(lessons_etag_accepts_gzip("x-gzip"));
    assert_true(lessons_etag_accepts_gzip("gzip;q=0.5"));
    assert_true(lessons_etag_accepts_gzip("gzip; q=0.001"));
    assert_false(lessons_etag_accepts_gzip("gzip;q=0"));
    assert_false(lessons_etag_accepts_gzip("gzip;q=0.000, br"));
    assert_true(lessons_etag_accepts_gzip("*"));
    assert_false(lessons_etag_accepts_gzip("*, gzip;q=0"));
    assert_false(lessons_etag_accepts_gzip("*;q=0"));
    assert_false(lessons_etag_accepts_gzip("gzipx, xgzip"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tags_made),
        cmocka_unit_test(test_none_match),
        cmocka_unit_test(test_malformed_matches_nothing),
        cmocka_unit_test(test_if_match_absent_and_any),
        cmocka_unit_test(test_if_match_versions),
        cmocka_unit_test(test_if_match_skips_what_cannot_match),
        cmocka_unit_test(test_if_match_bounded),
        cmocka_unit_test(test_accepts_gzip),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
