/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_route.c: request path -> operation.  The path is the decoded
 * r->uri; nothing here allocates, so it is cheap on every request.
 */
#include <limits.h>
#include <string.h>

#include "api/lessons_route.h"
#include "base/lessons_decimal.h"

static int lessons_route_is(const char *s, const char *end, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(end - s) == n && memcmp(s, word, n) == 0;
}

lessons_route_t lessons_route_match(const char *base, const char *path)
{
    lessons_route_t none = { LESSONS_ROUTE_NONE, 0 };
    lessons_route_t r = none;
    const char *rest, *end, *slash;
    size_t blen;

    if (!base || !path) {
        return none;
    }
    blen = strlen(base);
    /* A base configured with a trailing slash names the same mount. */
    while (blen > 1 && base[blen - 1] == '/') {
        blen--;
    }
    if (blen == 0 || strncmp(path, base, blen) != 0) {
        return none;
    }
    rest = path + blen;
    end = rest + strlen(rest);
    if (end > rest && end[-1] == '/') {
        end--;                          /* one trailing slash is fine */
    }
    if (rest == end) {
        r.route = LESSONS_ROUTE_COLLECTION;
        return r;
    }
    if (*rest != '/') {
        return none;                    /* "/api/lessonsX" */
    }
    rest++;
    slash = memchr(rest, '/', (size_t)(end - rest));

    if (!slash) {
        if (lessons_route_is(rest, end, "beginner")) {
            r.route = LESSONS_ROUTE_BEGINNER;
        }
        else if (lessons_route_is(rest, end, "advanced")) {
            r.route = LESSONS_ROUTE_ADVANCED;
        }
        else if (lessons_decimal_i64(rest, (apr_size_t)(end - rest),
                                     APR_INT64_MIN, APR_INT64_MAX,
                                     &r.arg)) {
            r.route = LESSONS_ROUTE_ITEM;
        }
        return r.route == LESSONS_ROUTE_NONE ? none : r;
    }
    if (lessons_route_is(rest, slash, "level")
        && lessons_decimal_i64(slash + 1, (apr_size_t)(end - slash - 1),
                               INT_MIN, INT_MAX, &r.arg)) {
        r.route = LESSONS_ROUTE_LEVEL;
        return r;
    }
    return none;
}

/* Read-only method table: name and bit. */
static const struct {
    const char *name;
    unsigned int bit;
} lessons_methods[] = {
    { "GET",     LESSONS_METHOD_GET },
    { "HEAD",    LESSONS_METHOD_HEAD },
    { "POST",    LESSONS_METHOD_POST },
    { "PUT",     LESSONS_METHOD_PUT },
    { "DELETE",  LESSONS_METHOD_DELETE },
    { "OPTIONS", LESSONS_METHOD_OPTIONS },
};

unsigned int lessons_route_method(const char *method)
{
    size_t i;

    if (!method) {
        return 0;
    }
    for (i = 0; i < sizeof(lessons_methods) / sizeof(lessons_methods[0]);
         i++) {
        if (strcmp(method, lessons_methods[i].name) == 0) {
            return lessons_methods[i].bit;
        }
    }
    return 0;
}

#define LESSONS_READ  (LESSONS_METHOD_GET | LESSONS_METHOD_HEAD \
                       | LESSONS_METHOD_OPTIONS)

unsigned int lessons_route_allowed(lessons_route_e route)
{
    switch (route) {
    case LESSONS_ROUTE_COLLECTION:
        return LESSONS_READ | LESSONS_METHOD_POST;
    case LESSONS_ROUTE_ITEM:
        return LESSONS_READ | LESSONS_METHOD_PUT | LESSONS_METHOD_DELETE;
    case LESSONS_ROUTE_BEGINNER:
    case LESSONS_ROUTE_ADVANCED:
    case LESSONS_ROUTE_LEVEL:
        return LESSONS_READ;
    case LESSONS_ROUTE_NONE:
    default:
        return 0;
    }
}

const char *lessons_route_allow_header(lessons_route_e route)
{
    switch (route) {
    case LESSONS_ROUTE_COLLECTION:
        return "GET, HEAD, POST, OPTIONS";
    case LESSONS_ROUTE_ITEM:
        return "GET, HEAD, PUT, DELETE, OPTIONS";
    case LESSONS_ROUTE_BEGINNER:
    case LESSONS_ROUTE_ADVANCED:
    case LESSONS_ROUTE_LEVEL:
        return "GET, HEAD, OPTIONS";
    case LESSONS_ROUTE_NONE:
    default:
        return "";
    }
}
