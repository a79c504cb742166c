/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_payload.c: a create or update body, decoded and validated in
 * both modes, and the same bytes as a Content-Type.
 */
#include "fuzz.h"

#include "api/lessons_payload.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    lessons_input_t in;
    json_t *errors = NULL;
    const char *detail = NULL;
    lessons_payload_e rc;

    apr_pool_create(&p, fuzz_root);
    rc = lessons_payload_decode(p, (const char *)data, size,
                                LESSONS_PAYLOAD_CREATE, &in, &errors,
                                &detail);
    /* What the handler relies on: OK fills every required field. */
    if (rc == LESSONS_PAYLOAD_OK && (!in.title || !in.topic
                                     || !in.description)) {
        abort();
    }
    if (rc == LESSONS_PAYLOAD_INVALID && !json_is_object(errors)) {
        abort();
    }
    errors = NULL;
    lessons_payload_decode(p, (const char *)data, size,
                           LESSONS_PAYLOAD_UPDATE, &in, &errors, &detail);
    lessons_payload_type_ok(fuzz_string(p, data, size));
    apr_pool_destroy(p);
    return 0;
}
