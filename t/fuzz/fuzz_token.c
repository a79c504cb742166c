/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_token.c: an Authorization header through the whole token check:
 * bearer parsing, the header, the signature (HS256 and RS256 keys of a
 * real key set, with kids, so that the seeds' valid tokens lead the
 * fuzzer deep), the claims, then the token cache on a second pass and
 * what the gate does with the claims (the user, a dotted lookup, a
 * match), and the issuer a token names before its signature is checked
 * (<LessonsJWTIssuer> blocks).  The clock is fixed, so the seeds stay
 * valid.
 */
#include "fuzz.h"

#include "auth/lessons_claims.h"
#include "keys/lessons_keyset.h"
#include "auth/lessons_token.h"
#include "auth/lessons_tokencache.h"

/* The seeds (t/fuzz/corpus/token) are signed with these: the secret is
 * "fuzz-secret-0123456789abcdefghij", the RSA key t/fuzz/keys/rs.pem's.
 */
#include "fuzz_keys.h"

#define FUZZ_NOW  1700000000

static lessons_token_policy_t policy, other;

/* Two issuers of one section, as <LessonsJWTIssuer> blocks give them. */
static const char *const issuers[] = { "https://idp.example",
                                       "https://other.example" };

static void fuzz_setup(apr_pool_t *p)
{
    lessons_keyset_t *set = NULL;

    if (lessons_keyset_parse_jwks(p, FUZZ_JWKS, strlen(FUZZ_JWKS), &set)) {
        abort();
    }
    fuzz_keep_keys(set);
    memset(&policy, 0, sizeof(policy));
    policy.keys = set;
    policy.algs = LESSONS_ALG_BIT(LESSONS_ALG_HS256)
                  | LESSONS_ALG_BIT(LESSONS_ALG_RS256);
    policy.issuer = "https://idp.example";
    policy.audience = "lessons";
    policy.leeway = 30;
    other = policy;
    other.issuer = issuers[1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const roles[] = { "admin", "editor" };
    apr_pool_t *p;
    lessons_tokencache_t *cache;
    const char *token = NULL, *subject = NULL, *user = NULL;
    json_t *claims = NULL;
    int pass, i = 0;

    apr_pool_create(&p, fuzz_root);
    /* A cache of the input's own, freed with it: the process's lives
     * across requests, which the leak check would count as leaked.
     */
    cache = lessons_tokencache_make(p, 4);
    if (lessons_bearer_parse(p, fuzz_string(p, data, size), &token)
        == LESSONS_BEARER_OK) {
        /* Twice: a miss that may store the token, then a hit. */
        for (pass = 0; pass < 2; pass++) {
            claims = NULL;
            if (lessons_token_verify_claims(p, &policy, cache, token,
                                            FUZZ_NOW, &subject, &claims)
                != LESSONS_TOKEN_OK) {
                break;
            }
            if (claims) {
                lessons_claims_user(p, lessons_claims_get(claims,
                                                          "preferred_username"),
                                    256, &user);
                lessons_claims_match(claims, "realm_access.roles", roles, 2);
                lessons_claims_match(claims, "scope", roles, 2);
            }
            if (subject) {
                lessons_claims_text_check(subject, strlen(subject), 256);
            }
        }
        lessons_token_verify(p, &policy, token, FUZZ_NOW, &subject);
        /* The issuer picked before the signature judges it: a token
         * that verifies under the picked policy names that issuer.
         */
        if (lessons_token_pick_issuer(p, token, issuers, 2, &i)
            == LESSONS_TOKEN_OK
            && lessons_token_verify(p, i ? &other : &policy, token, FUZZ_NOW,
                                    &subject) == LESSONS_TOKEN_OK
            && lessons_token_pick_issuer(p, token, issuers + i, 1, &i)
               != LESSONS_TOKEN_OK) {
            abort();
        }
    }
    apr_pool_destroy(p);
    return 0;
}
