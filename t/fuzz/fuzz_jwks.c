/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_jwks.c: the bytes of a key file or a fetched key set: a JWKS
 * parsed as a file's and as a keys URL's (public keys only, PS* keys
 * read as where a section names them) and key by key as a provider's
 * (lessons_keyset_parse_fetched: what is left must fit), each JWK
 * checked and imported by cjose, a secret or a PEM public key
 * (lessons_keyset_make), then the set checked against every algorithm
 * and looked up by kid.
 */
#include "fuzz.h"

#include "keys/lessons_keyset.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

static void use_set(apr_pool_t *p, const lessons_keyset_t *set)
{
    lessons_algs_t all = 0;
    int i;

    for (i = LESSONS_ALG_HS256; i < LESSONS_ALG_TERM; i++) {     /* PS* too */
        all |= LESSONS_ALG_BIT(i);
    }
    lessons_keyset_check(p, set, all);
    lessons_keyset_check(p, set, LESSONS_ALG_BIT(LESSONS_ALG_RS256));
    for (i = 0; i < set->nkeys; i++) {
        lessons_jwk_allows(&set->keys[i], LESSONS_ALG_ES256);
        if (set->keys[i].kid) {
            lessons_keyset_find(set, set->keys[i].kid);
        }
    }
    lessons_keyset_find(set, "rs");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    lessons_keyset_t *set;
    char *text;

    apr_pool_create(&p, fuzz_root);
    text = fuzz_string(p, data, size);
    set = NULL;
    if (!lessons_keyset_parse_jwks(p, text, size, &set) && set) {
        use_set(p, set);
    }
    set = NULL;
    if (!lessons_keyset_parse_jwks_ex(p, text, size, LESSONS_JWKS_PUBLIC_ONLY
                                      | LESSONS_JWKS_PSS, &set) && set) {
        use_set(p, set);
    }
    /* A provider's set, key by key: whatever is left fits the section's
     * algorithms, and a key that is read strictly is never skipped.
     */
    set = NULL;
    if (!lessons_keyset_parse_fetched(p, text, size, LESSONS_JWKS_PSS,
                                      LESSONS_ALG_BIT(LESSONS_ALG_RS256)
                                      | LESSONS_ALG_BIT(LESSONS_ALG_ES256),
                                      &set) && set) {
        if (set->nkeys < 1
            || lessons_keyset_check(p, set,
                                    LESSONS_ALG_BIT(LESSONS_ALG_RS256)
                                    | LESSONS_ALG_BIT(LESSONS_ALG_ES256))) {
            abort();
        }
        use_set(p, set);
    }
    set = NULL;
    if (!lessons_keyset_make(p, data, size, &set) && set) {
        use_set(p, set);
    }
    apr_pool_destroy(p);
    return 0;
}
