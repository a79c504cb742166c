/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_claims.c: a verified token's claims (any JSON) and what the
 * module does with them: a dotted name looked up and matched (the
 * input, split at 0x01: claims, name, value), the user claim, a claim's
 * environment form and the environment variable's name.
 */
#include "fuzz.h"

#include "auth/lessons_claims.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    char *doc, *rest, *name, *value;
    const char *values[2], *text = NULL;
    json_t *claims, *found;

    apr_pool_create(&p, fuzz_root);
    fuzz_split(p, data, size, &doc, &rest);
    fuzz_split(p, (const uint8_t *)rest, strlen(rest), &name, &value);
    claims = json_loads(doc, JSON_REJECT_DUPLICATES, NULL);
    values[0] = value;
    values[1] = name;
    lessons_claims_match(claims, name, values, 2);
    found = lessons_claims_get(claims, name);
    lessons_claims_text(p, found, 1024, &text);
    /* A value handed over keeps the rule it was checked against, and
     * starts with "[" or "{" exactly when it is an array or an object.
     */
    if (text && (lessons_claims_text_check(text, strlen(text), 1024)
                 != LESSONS_CLAIM_TEXT_OK
                 || (text[0] == '[' || text[0] == '{')
                    != (json_is_array(found) || json_is_object(found)))) {
        abort();
    }
    lessons_claims_user(p, lessons_claims_get(claims, name), 256, &text);
    lessons_claims_env_name(p, name);
    json_decref(claims);
    apr_pool_destroy(p);
    return 0;
}
