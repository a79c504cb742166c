/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_cors.c: an origin as an admin writes it and as a browser sends
 * it, and a preflight's Access-Control-Request-Headers (the input,
 * split at 0x01).
 */
#include "fuzz.h"

#include "apr_tables.h"
#include "api/lessons_cors.h"

static apr_array_header_t *origins;

static void fuzz_setup(apr_pool_t *p)
{
    const char *norm = NULL;

    origins = apr_array_make(p, 2, sizeof(const char *));
    if (lessons_cors_origin_parse(p, "https://app.example.org", &norm)) {
        abort();
    }
    APR_ARRAY_PUSH(origins, const char *) = norm;
    if (lessons_cors_origin_parse(p, "http://localhost:3000", &norm)) {
        abort();
    }
    APR_ARRAY_PUSH(origins, const char *) = norm;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    char *origin, *headers;
    const char *norm = NULL;

    apr_pool_create(&p, fuzz_root);
    fuzz_split(p, data, size, &origin, &headers);
    /* A parsed origin is normalised: parsing it again gives itself. */
    if (!lessons_cors_origin_parse(p, origin, &norm)) {
        const char *again = NULL;

        if (!norm || lessons_cors_origin_parse(p, norm, &again)
            || strcmp(again, norm) != 0) {
            abort();
        }
    }
    lessons_cors_allowed(origins, origin);
    lessons_cors_header_refused(p, headers);
    apr_pool_destroy(p);
    return 0;
}
