/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_route.c: a request path against the mount point, and the same
 * bytes as a method.
 */
#include "fuzz.h"

#include "api/lessons_route.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    char *path;
    lessons_route_t r;

    apr_pool_create(&p, fuzz_root);
    path = fuzz_string(p, data, size);
    r = lessons_route_match("/api/lessons", path);
    /* A level must fit an int: the handler converts it. */
    if (r.route == LESSONS_ROUTE_LEVEL
        && (r.arg < -2147483647 - 1 || r.arg > 2147483647)) {
        abort();
    }
    lessons_route_allowed(r.route);
    lessons_route_allow_header(r.route);
    lessons_route_match("/", path);
    lessons_route_method(path);
    apr_pool_destroy(p);
    return 0;
}
