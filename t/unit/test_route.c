/* Licensed under the Apache License, Version 2.0.
 *
 * test_route.c: lessons_route_match, lessons_route_method and the allowed
 * method sets, checked against lessons_route.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <limits.h>
#include <string.h>
#include <cmocka.h>

#include "api/lessons_route.h"

#define BASE "/api/lessons"

typedef struct {
    const char *base;
    const char *path;
    lessons_route_e route;
    long long arg;
} route_case_t;

static void test_match(void **state)
{
    const route_case_t *c = *state;
    lessons_route_t r = lessons_route_match(c->base, c->path);

    if (r.route != c->route || r.arg != c->arg) {
        print_error("base \"%s\" path \"%s\": expected route %d arg %lld, "
                    "got route %d arg %lld\n", c->base, c->path,
                    (int)c->route, c->arg, (int)r.route, (long long)r.arg);
    }
    assert_int_equal(r.route, c->route);
    assert_int_equal(r.arg, c->arg);
}

/* One cmocka test per path, named after it. */
#define M(path, route, arg) \
    { "match " path, test_match, NULL, NULL, \
      &(route_case_t){ BASE, path, route, arg } }
#define MB(base, path, route, arg) \
    { "match [" base "] " path, test_match, NULL, NULL, \
      &(route_case_t){ base, path, route, arg } }
#define NONE(path) M(path, LESSONS_ROUTE_NONE, 0)

typedef struct {
    const char *name;
    unsigned int bit;
} method_case_t;

static void test_method(void **state)
{
    const method_case_t *c = *state;

    assert_int_equal(lessons_route_method(c->name), c->bit);
}

#define METHOD(name, bit) \
    { "method \"" name "\"", test_method, NULL, NULL, \
      &(method_case_t){ name, bit } }

static void test_method_bits_distinct(void **state)
{
    static const char *const names[] = {
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"
    };
    unsigned int seen = 0;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        unsigned int b = lessons_route_method(names[i]);

        assert_int_not_equal(b, 0);
        assert_int_equal(b & (b - 1), 0);       /* exactly one bit */
        assert_int_equal(seen & b, 0);
        seen |= b;
    }
    assert_int_equal(seen, 0x3f);
}

typedef struct {
    lessons_route_e route;
    unsigned int mask;
    const char *header;
} allowed_case_t;

static void test_allowed(void **state)
{
    const allowed_case_t *c = *state;
    const char *h = lessons_route_allow_header(c->route);

    assert_int_equal(lessons_route_allowed(c->route), c->mask);
    assert_non_null(h);
    assert_string_equal(h, c->header);
}

#define ALLOWED(route, mask, header) \
    { "allowed " #route, test_allowed, NULL, NULL, \
      &(allowed_case_t){ route, mask, header } }

#define M_GET     LESSONS_METHOD_GET
#define M_HEAD    LESSONS_METHOD_HEAD
#define M_POST    LESSONS_METHOD_POST
#define M_PUT     LESSONS_METHOD_PUT
#define M_DELETE  LESSONS_METHOD_DELETE
#define M_OPTIONS LESSONS_METHOD_OPTIONS

/* The header and the mask must agree for every route: each method named
 * in the Allow header is in the mask and the other way round.
 */
static void test_allowed_header_matches_mask(void **state)
{
    static const char *const names[] = {
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"
    };
    lessons_route_e r;

    (void)state;
    for (r = LESSONS_ROUTE_NONE; r <= LESSONS_ROUTE_ITEM; r++) {
        unsigned int mask = lessons_route_allowed(r);
        const char *h = lessons_route_allow_header(r);
        size_t i;

        assert_non_null(h);
        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            unsigned int bit = lessons_route_method(names[i]);
            /* whole-word search in "A, B, C" */
            size_t n = strlen(names[i]);
            const char *s = h;
            int found = 0;

            while ((s = strstr(s, names[i])) != NULL) {
                if ((s == h || s[-1] == ' ')
                    && (s[n] == '\0' || s[n] == ',')) {
                    found = 1;
                    break;
                }
                s += n;
            }
            assert_int_equal(found, (mask & bit) != 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* the collection */
        M("/api/lessons", LESSONS_ROUTE_COLLECTION, 0),
        M("/api/lessons/", LESSONS_ROUTE_COLLECTION, 0),
        /* fixed lists */
        M("/api/lessons/beginner", LESSONS_ROUTE_BEGINNER, 0),
        M("/api/lessons/beginner/", LESSONS_ROUTE_BEGINNER, 0),
        M("/api/lessons/advanced", LESSONS_ROUTE_ADVANCED, 0),
        M("/api/lessons/advanced/", LESSONS_ROUTE_ADVANCED, 0),
        /* by level */
        M("/api/lessons/level/3", LESSONS_ROUTE_LEVEL, 3),
        M("/api/lessons/level/3/", LESSONS_ROUTE_LEVEL, 3),
        M("/api/lessons/level/-1", LESSONS_ROUTE_LEVEL, -1),
        M("/api/lessons/level/0", LESSONS_ROUTE_LEVEL, 0),
        M("/api/lessons/level/2147483647", LESSONS_ROUTE_LEVEL, INT_MAX),
        M("/api/lessons/level/-2147483648", LESSONS_ROUTE_LEVEL, INT_MIN),
        /* items */
        M("/api/lessons/42", LESSONS_ROUTE_ITEM, 42),
        M("/api/lessons/42/", LESSONS_ROUTE_ITEM, 42),
        M("/api/lessons/-1", LESSONS_ROUTE_ITEM, -1),
        M("/api/lessons/0", LESSONS_ROUTE_ITEM, 0),
        M("/api/lessons/07", LESSONS_ROUTE_ITEM, 7),
        M("/api/lessons/2147483647", LESSONS_ROUTE_ITEM, INT_MAX),
        M("/api/lessons/-2147483648", LESSONS_ROUTE_ITEM, INT_MIN),
        /* ids are 64-bit */
        M("/api/lessons/2147483648", LESSONS_ROUTE_ITEM, 2147483648LL),
        M("/api/lessons/2147483648/", LESSONS_ROUTE_ITEM, 2147483648LL),
        M("/api/lessons/4294967297", LESSONS_ROUTE_ITEM, 4294967297LL),
        M("/api/lessons/-2147483649", LESSONS_ROUTE_ITEM, -2147483649LL),
        M("/api/lessons/99999999999", LESSONS_ROUTE_ITEM, 99999999999LL),
        M("/api/lessons/9000000000000000000", LESSONS_ROUTE_ITEM,
          9000000000000000000LL),
        M("/api/lessons/9223372036854775807", LESSONS_ROUTE_ITEM, LLONG_MAX),
        M("/api/lessons/9223372036854775807/", LESSONS_ROUTE_ITEM,
          LLONG_MAX),
        M("/api/lessons/0009223372036854775807", LESSONS_ROUTE_ITEM,
          LLONG_MAX),
        M("/api/lessons/-9223372036854775808", LESSONS_ROUTE_ITEM,
          LLONG_MIN),
        /* nothing */
        NONE("/api/lessonsX"),
        NONE("/api/lessons1"),
        NONE("/api/lesson"),
        NONE("/api"),
        NONE("/api/"),
        NONE("/api/lessons//"),
        NONE("/api/lessons//1"),
        NONE("/api/lessons/1//"),
        NONE("/api/lessons/1/2"),
        NONE("/api/lessons/abc"),
        NONE("/api/lessons/1.5"),
        NONE("/api/lessons/07x"),
        NONE("/api/lessons/x7"),
        NONE("/api/lessons/+1"),
        NONE("/api/lessons/-"),
        NONE("/api/lessons/--1"),
        NONE("/api/lessons/ 1"),
        NONE("/api/lessons/1 "),
        NONE("/api/lessons/0x10"),
        /* past 64 bits */
        NONE("/api/lessons/9223372036854775808"),
        NONE("/api/lessons/9223372036854775808/"),
        NONE("/api/lessons/9223372036854775809"),
        NONE("/api/lessons/-9223372036854775809"),
        NONE("/api/lessons/18446744073709551615"),
        NONE("/api/lessons/18446744073709551617"),  /* wraps to 1 */
        NONE("/api/lessons/36893488147419103233"),  /* wraps to 1 */
        NONE("/api/lessons/99999999999999999999999999999999999999999"),
        NONE("/api/lessons/-/"),
        NONE("/api/lessons/level"),
        NONE("/api/lessons/level/"),
        NONE("/api/lessons/level/x"),
        NONE("/api/lessons/level/1.5"),
        NONE("/api/lessons/level/99999999999"),
        NONE("/api/lessons/level/2147483648"),   /* levels stay int */
        NONE("/api/lessons/level/-2147483649"),
        NONE("/api/lessons/level/4294967297"),   /* wraps to 1 */
        NONE("/api/lessons/level/9223372036854775808"),
        NONE("/api/lessons/level/-"),
        NONE("/api/lessons/level/3/4"),
        NONE("/api/lessons/level//3"),
        NONE("/api/lessons/level/3//"),
        NONE("/api/lessons/beginner/1"),
        NONE("/api/lessons/beginnerx"),
        NONE("/api/lessons/beginner//"),
        NONE("/api/lessons/advanced/1"),
        NONE("/api/lessons/Beginner"),
        NONE("/"),
        NONE(""),
        /* other mount points */
        MB("/v2/lessons", "/v2/lessons", LESSONS_ROUTE_COLLECTION, 0),
        MB("/v2/lessons", "/v2/lessons/5", LESSONS_ROUTE_ITEM, 5),
        MB("/v2/lessons", "/v2/lessons/level/6", LESSONS_ROUTE_LEVEL, 6),
        MB("/v2/lessons", "/v2/lessons/advanced", LESSONS_ROUTE_ADVANCED, 0),
        MB("/v2/lessons", "/api/lessons", LESSONS_ROUTE_NONE, 0),
        MB("/v2/lessons", "/api/lessons/5", LESSONS_ROUTE_NONE, 0),
        MB("/other", "/api/lessons/5", LESSONS_ROUTE_NONE, 0),
        MB("/api/lessons/v2", "/api/lessons/5", LESSONS_ROUTE_NONE, 0),

        /* methods, case-sensitive */
        METHOD("GET", LESSONS_METHOD_GET),
        METHOD("HEAD", LESSONS_METHOD_HEAD),
        METHOD("POST", LESSONS_METHOD_POST),
        METHOD("PUT", LESSONS_METHOD_PUT),
        METHOD("DELETE", LESSONS_METHOD_DELETE),
        METHOD("OPTIONS", LESSONS_METHOD_OPTIONS),
        METHOD("get", 0),
        METHOD("Get", 0),
        METHOD("head", 0),
        METHOD("delete", 0),
        METHOD("PATCH", 0),
        METHOD("TRACE", 0),
        METHOD("CONNECT", 0),
        METHOD("GETX", 0),
        METHOD("GE", 0),
        METHOD("GET ", 0),
        METHOD(" GET", 0),
        METHOD("", 0),
        cmocka_unit_test(test_method_bits_distinct),

        /* allowed sets */
        ALLOWED(LESSONS_ROUTE_COLLECTION, M_GET | M_HEAD | M_POST | M_OPTIONS,
                "GET, HEAD, POST, OPTIONS"),
        ALLOWED(LESSONS_ROUTE_ITEM,
                M_GET | M_HEAD | M_PUT | M_DELETE | M_OPTIONS,
                "GET, HEAD, PUT, DELETE, OPTIONS"),
        ALLOWED(LESSONS_ROUTE_BEGINNER, M_GET | M_HEAD | M_OPTIONS,
                "GET, HEAD, OPTIONS"),
        ALLOWED(LESSONS_ROUTE_ADVANCED, M_GET | M_HEAD | M_OPTIONS,
                "GET, HEAD, OPTIONS"),
        ALLOWED(LESSONS_ROUTE_LEVEL, M_GET | M_HEAD | M_OPTIONS,
                "GET, HEAD, OPTIONS"),
        ALLOWED(LESSONS_ROUTE_NONE, 0, ""),
        cmocka_unit_test(test_allowed_header_matches_mask),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
