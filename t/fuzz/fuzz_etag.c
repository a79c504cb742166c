/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_etag.c: If-None-Match, If-Match and Accept-Encoding fields (the
 * input, split at 0x01: the conditional field, then Accept-Encoding),
 * against the tags the module makes.
 */
#include "fuzz.h"

#include "api/lessons_etag.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    char *cond, *accept;
    lessons_if_match_t im;

    apr_pool_create(&p, fuzz_root);
    fuzz_split(p, data, size, &cond, &accept);
    lessons_etag_none_match(cond, "\"l42.7.ab\"");
    lessons_etag_none_match(cond, lessons_etag_gzip(p, "\"l42.7.ab\""));
    memset(&im, 0, sizeof(im));
    lessons_etag_if_match(p, cond, 42, &im);
    lessons_etag_accepts_gzip(accept);
    lessons_etag_accepts_gzip(cond);
    apr_pool_destroy(p);
    return 0;
}
