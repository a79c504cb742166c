/* Licensed under the Apache License, Version 2.0.
 *
 * test_token.c: lessons_bearer_parse, lessons_token_verify and
 * lessons_token_describe, checked against lessons_token.h and the attacks
 * listed in the libjwt 1.10 notes (cjose, which verifies now, is held to
 * the same).  Tokens are made by cjose (unit_jwt.h) where it can, and by
 * hand (base64url segments, OpenSSL HMAC and RSASSA-PSS) where it cannot
 * or where the bytes must be exact: alg none, crit, array payloads,
 * tampering.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"

#include "auth/lessons_token.h"

#define NOW        ((apr_int64_t)1700000000)
#define EXP        (NOW + 3600)
#define ISSUER     "https://auth.example.org"
#define AUDIENCE   "lessons-api"

#include "unit_pool.h"
#include "unit_jwt.h"

/* 48-byte HMAC secret and a different one of the same length. */
static const unsigned char secret[] =
    "k3y-for-unit-tests-only-0123456789abcdefghijklmn";
static const unsigned char other_secret[] =
    "another-key-for-unit-tests-0123456789abcdefghijk";
#define SECRET_LEN (sizeof(secret) - 1)

static const char *rsa_pub, *rsa_priv, *rsa2_priv;
static const char *ec_pub, *ec_priv, *ec2_priv;

/* --------------------------------------------------------------- helpers */

/* A token built by hand: header and payload JSON as given, HMAC-signed
 * with md over key (the key need not be a "secret": see confusion).
 */
static char *hmac_token_md(const char *header, const char *payload,
                           const EVP_MD *md, const void *key, size_t keylen)
{
    char *input = apr_pstrcat(pool, b64s(header), ".", b64s(payload), NULL);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;

    assert_non_null(HMAC(md, key, (int)keylen, (unsigned char *)input,
                         strlen(input), mac, &maclen));
    return apr_pstrcat(pool, input, ".", b64url(mac, maclen), NULL);
}

static char *hs256_token(const char *header, const char *payload)
{
    return hmac_token_md(header, payload, EVP_sha256(), secret, SECRET_LEN);
}

#define STD_CLAIMS "{\"sub\":\"alice\",\"exp\":1700003600}"
#define HS256_HEADER "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"

/* A key as start-up makes it: inspected, so it knows what it allows. */
static const lessons_key_t *make_key(const unsigned char *data,
                                     apr_size_t len)
{
    lessons_key_t *key = NULL;

    assert_null(lessons_key_make(pool, data, len, &key));
    assert_non_null(key);
    return key;
}

static lessons_token_policy_t hs_policy(lessons_alg_t alg)
{
    lessons_token_policy_t p;

    memset(&p, 0, sizeof(p));
    p.alg = alg;
    p.key = make_key(secret, SECRET_LEN);
    p.issuer = NULL;
    p.audience = NULL;
    p.leeway = 0;
    return p;
}

static lessons_token_policy_t pem_policy(lessons_alg_t alg, const char *pem)
{
    lessons_token_policy_t p = hs_policy(alg);

    p.key = make_key((const unsigned char *)pem, strlen(pem));
    return p;
}


static const char *verify(const lessons_token_policy_t *p,
                          const char *token, lessons_token_e expect)
{
    return verify_at(p, token, NOW, expect);
}

/* The signature segment of a token. */
static char *sig_of(char *token)
{
    char *dot = strrchr(token, '.');

    assert_non_null(dot);
    return dot + 1;
}

/* ------------------------------------------------------------ fixtures */

static int group_setup(void **state)
{
    (void)state;
    if (unit_pool_open() != 0)
        return -1;
    if (make_keypair(EVP_RSA_gen(2048), &rsa_pub, &rsa_priv)
        || make_keypair(EVP_RSA_gen(2048), NULL, &rsa2_priv)
        || make_keypair(EVP_EC_gen("P-256"), &ec_pub, &ec_priv)
        || make_keypair(EVP_EC_gen("P-256"), NULL, &ec2_priv))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ key sets */

/* A token by cjose with a kid in its header (NULL: none). */
static char *kid_token(lessons_alg_t alg, const void *key, size_t len,
                       const char *kid)
{
    return lj_token_kid(alg, key, len, STD_CLAIMS, kid);
}

/* A set made by hand: each entry a kid (or NULL), its own alg
 * (LESSONS_ALG_NONE for none) and the key's bytes.
 */
typedef struct {
    const char *kid;
    lessons_alg_t alg;
    const void *data;
    size_t len;
} set_entry_t;

static lessons_keyset_t *set_of(const set_entry_t *e, int n,
                                unsigned char digest_byte)
{
    lessons_keyset_t *set = apr_pcalloc(pool, sizeof(*set));
    lessons_jwk_t *keys = apr_pcalloc(pool, sizeof(*keys) * (size_t)n);
    int i;

    for (i = 0; i < n; i++) {
        keys[i].kid = e[i].kid;
        keys[i].alg = e[i].alg;
        keys[i].key = *make_key(e[i].data, e[i].len);
    }
    set->nkeys = n;
    set->keys = keys;
    memset(set->digest, digest_byte, sizeof(set->digest));
    return set;
}

#define RS LESSONS_ALG_BIT(LESSONS_ALG_RS256)
#define ES LESSONS_ALG_BIT(LESSONS_ALG_ES256)
#define HS LESSONS_ALG_BIT(LESSONS_ALG_HS256)

static lessons_keyset_t *mixed_set(void)
{
    const set_entry_t e[] = {
        { "r1", LESSONS_ALG_NONE, rsa_pub, strlen(rsa_pub) },
        { "e1", LESSONS_ALG_ES256, ec_pub, strlen(ec_pub) },
        { "h1", LESSONS_ALG_NONE, secret, SECRET_LEN },
    };

    return set_of(e, 3, 1);
}

static void test_set_kid_picks_its_key(void **state)
{
    lessons_token_policy_t p = set_policy(mixed_set(), RS | ES | HS);

    (void)state;
    verify(&p, kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), "r1"),
           LESSONS_TOKEN_OK);
    verify(&p, kid_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv), "e1"),
           LESSONS_TOKEN_OK);
    verify(&p, kid_token(LESSONS_ALG_HS256, secret, SECRET_LEN, "h1"),
           LESSONS_TOKEN_OK);
    /* the kid's key only: right signature, other key's kid */
    verify(&p, kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), "e1"),
           LESSONS_TOKEN_BAD_ALG);
    verify(&p, kid_token(LESSONS_ALG_RS256, rsa2_priv, strlen(rsa2_priv), "r1"),
           LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_set_without_kid_tries_fitting_keys(void **state)
{
    lessons_token_policy_t p = set_policy(mixed_set(), RS | ES | HS);

    (void)state;
    verify(&p, kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), NULL),
           LESSONS_TOKEN_OK);
    verify(&p, kid_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv), NULL),
           LESSONS_TOKEN_OK);
    verify(&p, kid_token(LESSONS_ALG_ES256, ec2_priv, strlen(ec2_priv), NULL),
           LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_set_unknown_kid(void **state)
{
    lessons_token_policy_t p = set_policy(mixed_set(), RS | ES | HS);
    const set_entry_t loose[] = {
        { NULL, LESSONS_ALG_NONE, rsa_pub, strlen(rsa_pub) },
    };
    lessons_token_policy_t q = set_policy(set_of(loose, 1, 2), RS);

    (void)state;
    verify(&p, kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), "zz"),
           LESSONS_TOKEN_UNKNOWN_KID);
    /* a kid-less key takes tokens whatever kid they name */
    verify(&q, kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), "zz"),
           LESSONS_TOKEN_OK);
}

/* Where the policy names an issuer, a token naming another (or none) is
 * refused for that before its kid is looked up: UNKNOWN_KID, which makes
 * a keys URL or a provider be asked again, never comes for it (issue
 * 40).  Its header is judged first, as before.
 */
static void test_set_other_issuer_before_kid(void **state)
{
    lessons_token_policy_t p = set_policy(mixed_set(), RS | ES | HS);
    const char *other = "{\"iss\":\"https://evil.example.org\","
                        "\"sub\":\"alice\",\"exp\":1700003600}";
    const char *mine = "{\"iss\":\"" ISSUER "\",\"sub\":\"alice\","
                       "\"exp\":1700003600}";
    char *t;

    (void)state;
    p.issuer = ISSUER;
    verify(&p, lj_token_kid(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                            other, "zz"), LESSONS_TOKEN_BAD_ISSUER);
    verify(&p, lj_token_kid(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                            STD_CLAIMS, "zz"), LESSONS_TOKEN_BAD_ISSUER);
    /* the issuer's own token with a kid its set lacks: a rotation */
    verify(&p, lj_token_kid(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                            mine, "zz"), LESSONS_TOKEN_UNKNOWN_KID);
    verify(&p, lj_token_kid(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                            mine, "r1"), LESSONS_TOKEN_OK);
    /* another issuer's token, whatever its signature */
    verify(&p, lj_token_kid(LESSONS_ALG_RS256, rsa2_priv, strlen(rsa2_priv),
                            other, "r1"), LESSONS_TOKEN_BAD_ISSUER);
    /* the header still comes first */
    t = lj_token_kid(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv), other, "zz");
    p.algs = RS;
    verify(&p, t, LESSONS_TOKEN_BAD_ALG);
    /* no issuer in the policy: the kid decides, as before */
    p = set_policy(mixed_set(), RS | ES | HS);
    verify(&p, lj_token_kid(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                            other, "zz"), LESSONS_TOKEN_UNKNOWN_KID);
}

/* The forgery: HS256 keyed with the RSA key's public PEM, naming the RSA
 * key's kid, or none; with HS256 accepted beside a real secret.
 */
static void test_set_rsa_pem_as_hmac_secret(void **state)
{
    lessons_token_policy_t p = set_policy(mixed_set(), RS | ES | HS);
    char *forged_kid, *forged;

    (void)state;
    forged_kid = kid_token(LESSONS_ALG_HS256, rsa_pub, strlen(rsa_pub), "r1");
    forged = kid_token(LESSONS_ALG_HS256, rsa_pub, strlen(rsa_pub), NULL);
    cjose_accepts(forged_kid, rsa_pub, strlen(rsa_pub));
    verify(&p, forged_kid, LESSONS_TOKEN_BAD_ALG);
    verify(&p, forged, LESSONS_TOKEN_BAD_SIGNATURE);
    /* and where HS256 is not accepted at all */
    p.algs = RS | ES;
    verify(&p, forged_kid, LESSONS_TOKEN_BAD_ALG);
    verify(&p, forged, LESSONS_TOKEN_BAD_ALG);
}

static void test_set_key_alg_and_policy_algs(void **state)
{
    const set_entry_t e[] = {
        { "r2", LESSONS_ALG_RS512, rsa_pub, strlen(rsa_pub) },
    };
    lessons_token_policy_t p = set_policy(set_of(e, 1, 3), RS
                                          | LESSONS_ALG_BIT(LESSONS_ALG_RS512));

    (void)state;
    /* the key's own alg rules out RS256 */
    verify(&p, kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), "r2"),
           LESSONS_TOKEN_BAD_ALG);
    verify(&p, kid_token(LESSONS_ALG_RS512, rsa_priv, strlen(rsa_priv), "r2"),
           LESSONS_TOKEN_OK);
    /* the policy's algorithms rule out ES256 whatever the set holds */
    p = set_policy(mixed_set(), RS);
    verify(&p, kid_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv), "e1"),
           LESSONS_TOKEN_BAD_ALG);
}

static void test_set_misfit_and_bad_kid(void **state)
{
    const set_entry_t e[] = {
        { "r1", LESSONS_ALG_NONE, rsa_pub, strlen(rsa_pub) },
    };
    lessons_token_policy_t p = set_policy(set_of(e, 1, 4), HS);
    const char *h, *pl;
    char *t;

    (void)state;
    /* no key of the set allows any accepted algorithm: a server fault */
    verify(&p, kid_token(LESSONS_ALG_HS256, secret, SECRET_LEN, NULL),
           LESSONS_TOKEN_KEY_MISFIT);
    /* a kid that is not a string */
    p = set_policy(mixed_set(), RS);
    h = b64s("{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":7}");
    pl = b64s(STD_CLAIMS);
    t = apr_pstrcat(pool, h, ".", pl, ".", sig_of(kid_token(LESSONS_ALG_RS256,
                    rsa_priv, strlen(rsa_priv), NULL)), NULL);
    verify(&p, t, LESSONS_TOKEN_MALFORMED);
}

/* A key removed from the set: the cached verdict goes with the digest. */
static void test_set_change_drops_cached_tokens(void **state)
{
    const set_entry_t one[] = {
        { "r1", LESSONS_ALG_NONE, rsa_pub, strlen(rsa_pub) },
        { "e1", LESSONS_ALG_NONE, ec_pub, strlen(ec_pub) },
    };
    lessons_tokencache_t *cache = lessons_tokencache_make(pool, 16);
    lessons_token_policy_t before = set_policy(set_of(one, 2, 5), RS | ES);
    lessons_token_policy_t after = set_policy(set_of(one + 1, 1, 6), RS | ES);
    unsigned char fa[LESSONS_TOKEN_FP_LEN], fb[LESSONS_TOKEN_FP_LEN];
    char *t = kid_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), "r1");
    const char *sub = NULL;

    (void)state;
    assert_int_equal(lessons_token_policy_fingerprint(&before, fa), 0);
    assert_int_equal(lessons_token_policy_fingerprint(&after, fb), 0);
    assert_memory_not_equal(fa, fb, sizeof(fa));
    assert_int_equal(lessons_token_verify_cached(pool, &before, cache, t,
                                                 NOW, &sub),
                     LESSONS_TOKEN_OK);
    assert_int_equal(lessons_token_verify_cached(pool, &before, cache, t,
                                                 NOW, &sub),
                     LESSONS_TOKEN_OK);
    assert_int_equal(lessons_token_verify_cached(pool, &after, cache, t,
                                                 NOW, &sub),
                     LESSONS_TOKEN_UNKNOWN_KID);
}

/* ------------------------------------------------------- valid tokens */

static void test_valid_hs256(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub;

    (void)state;
    /* with an iat this time */
    sub = verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                              apr_psprintf(pool, "{\"sub\":\"alice\","
                                           "\"exp\":%" APR_INT64_T_FMT ","
                                           "\"iat\":%" APR_INT64_T_FMT "}",
                                           EXP, NOW)),
                 LESSONS_TOKEN_OK);
    assert_non_null(sub);
    assert_string_equal(sub, "alice");
}

static void test_valid_hs384(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS384);
    const char *sub;

    (void)state;
    sub = verify(&p, lj_token(LESSONS_ALG_HS384, secret, SECRET_LEN,
                              STD_CLAIMS),
                 LESSONS_TOKEN_OK);
    assert_non_null(sub);
    assert_string_equal(sub, "alice");
}

static void test_valid_hs512(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS512);
    const char *sub;

    (void)state;
    sub = verify(&p, lj_token(LESSONS_ALG_HS512, secret, SECRET_LEN,
                              STD_CLAIMS),
                 LESSONS_TOKEN_OK);
    assert_non_null(sub);
    assert_string_equal(sub, "alice");
}

static void test_valid_rs256(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    const char *sub;

    (void)state;
    sub = verify(&p, lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                              STD_CLAIMS), LESSONS_TOKEN_OK);
    assert_non_null(sub);
    assert_string_equal(sub, "alice");
}

static void test_valid_es256(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_ES256, ec_pub);
    const char *sub;

    (void)state;
    sub = verify(&p, lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv),
                              STD_CLAIMS), LESSONS_TOKEN_OK);
    assert_non_null(sub);
    assert_string_equal(sub, "alice");
}

static void test_valid_with_kid_header(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub;

    (void)state;
    sub = verify(&p, lj_token_kid(LESSONS_ALG_HS256, secret, SECRET_LEN,
                                  STD_CLAIMS, "key-1"), LESSONS_TOKEN_OK);
    assert_string_equal(sub, "alice");
}

static void test_subject_copied_into_pool(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub;

    (void)state;
    /* non-ASCII subject survives, and outlives the verifier's objects */
    sub = verify(&p, hs256_token(HS256_HEADER,
                     "{\"sub\":\"j\\u00fcrgen@example.org\",\"exp\":1700003600}"),
                 LESSONS_TOKEN_OK);
    assert_non_null(sub);
    assert_string_equal(sub, "j\xc3\xbcrgen@example.org");
}

static void test_no_sub_ok_null_subject(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub;

    (void)state;
    sub = verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                              "{\"exp\":1700003600}"), LESSONS_TOKEN_OK);
    assert_null(sub);
}

static void test_sub_number_bad_claims(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":42,\"exp\":1700003600}"),
           LESSONS_TOKEN_BAD_CLAIMS);
}

static void test_sub_object_bad_claims(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":{\"name\":\"alice\"},\"exp\":1700003600}"),
           LESSONS_TOKEN_BAD_CLAIMS);
}

/* A NUL inside sub would cut it to another user ("admin"): refused,
 * whichever of the JSON parser (which may refuse NULs itself) or the
 * claim check sees it first.
 */
static void test_sub_nul_refused(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub = SENTINEL;
    lessons_token_e rc;

    (void)state;
    rc = lessons_token_verify(pool, &p, hs256_token(
             "{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
             "{\"sub\":\"admin\\u0000x\",\"exp\":1700003600}"),
             1700000000, &sub);
    assert_int_not_equal(rc, LESSONS_TOKEN_OK);
    assert_true(sub == SENTINEL || sub == NULL);
}

/* ------------------------------------------------------------- exp/nbf */

static void test_exp_missing(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\"}"), LESSONS_TOKEN_NO_EXP);
}

static void test_exp_string_bad_claims(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\",\"exp\":\"1700003600\"}"),
           LESSONS_TOKEN_BAD_CLAIMS);
}

static void test_exp_bool_bad_claims(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\",\"exp\":true}"),
           LESSONS_TOKEN_BAD_CLAIMS);
}

static void test_expired(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);

    (void)state;
    verify_at(&p, t, EXP + 1, LESSONS_TOKEN_EXPIRED);
    verify_at(&p, t, EXP + 86400, LESSONS_TOKEN_EXPIRED);
    verify_at(&p, t, EXP - 1, LESSONS_TOKEN_OK);
}

static void test_expired_at_exp(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    /* RFC 7519 4.1.4: now must be before exp */
    verify_at(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS),
              EXP, LESSONS_TOKEN_EXPIRED);
}

static void test_expired_within_leeway(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    const char *sub;

    (void)state;
    p.leeway = 30;
    sub = verify_at(&p, t, EXP + 10, LESSONS_TOKEN_OK);
    assert_string_equal(sub, "alice");
    verify_at(&p, t, EXP + 29, LESSONS_TOKEN_OK);
    verify_at(&p, t, EXP + 31, LESSONS_TOKEN_EXPIRED);
}

static void test_nbf_future(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\",\"exp\":1700003600,"
                        "\"nbf\":1700000060}"),
           LESSONS_TOKEN_NOT_YET_VALID);
}

static void test_nbf_past_or_now_ok(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\",\"exp\":1700003600,"
                        "\"nbf\":1699999000}"), LESSONS_TOKEN_OK);
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\",\"exp\":1700003600,"
                        "\"nbf\":1700000000}"), LESSONS_TOKEN_OK);
}

static void test_nbf_within_leeway(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                             "{\"sub\":\"alice\",\"exp\":1700003600,"
                             "\"nbf\":1700000020}");

    (void)state;
    p.leeway = 30;
    verify(&p, t, LESSONS_TOKEN_OK);
    p.leeway = 10;
    verify(&p, t, LESSONS_TOKEN_NOT_YET_VALID);
}

static void test_nbf_string_bad_claims(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                        "{\"sub\":\"alice\",\"exp\":1700003600,"
                        "\"nbf\":\"1699999000\"}"),
           LESSONS_TOKEN_BAD_CLAIMS);
}

/* ------------------------------------------------------------ iss, aud */

/* One case: the policy's issuer and audience (NULL: not checked), the
 * claims beside sub and exp, and the verdict.
 */
typedef struct {
    const char *issuer, *audience, *claims;
    lessons_token_e want;
} iss_aud_case_t;

static const iss_aud_case_t iss_aud_cases[] = {
    /* iss: exact, byte for byte */
    { ISSUER, NULL, ",\"iss\":\"" ISSUER "\"", LESSONS_TOKEN_OK },
    { ISSUER, NULL, ",\"iss\":\"https://evil.example.org\"",
      LESSONS_TOKEN_BAD_ISSUER },
    { ISSUER, NULL, ",\"iss\":\"" ISSUER ".evil\"", LESSONS_TOKEN_BAD_ISSUER },
    { ISSUER, NULL, ",\"iss\":\"https://auth.example\"",
      LESSONS_TOKEN_BAD_ISSUER },
    { ISSUER, NULL, ",\"iss\":\"HTTPS://AUTH.EXAMPLE.ORG\"",
      LESSONS_TOKEN_BAD_ISSUER },
    { ISSUER, NULL, "", LESSONS_TOKEN_BAD_ISSUER },             /* missing */
    { NULL, NULL, ",\"iss\":\"anyone\"", LESSONS_TOKEN_OK },   /* unchecked */
    /* aud: a string equal to ours, or an array holding it */
    { NULL, AUDIENCE, ",\"aud\":\"" AUDIENCE "\"", LESSONS_TOKEN_OK },
    { NULL, AUDIENCE, ",\"aud\":[\"other-api\",\"" AUDIENCE "\"]",
      LESSONS_TOKEN_OK },
    { NULL, AUDIENCE, ",\"aud\":[\"" AUDIENCE "\"]", LESSONS_TOKEN_OK },
    { NULL, AUDIENCE, ",\"aud\":\"other-api\"", LESSONS_TOKEN_BAD_AUDIENCE },
    { NULL, AUDIENCE, ",\"aud\":\"" AUDIENCE "-x\"",
      LESSONS_TOKEN_BAD_AUDIENCE },
    { NULL, AUDIENCE, ",\"aud\":[\"other-api\",\"more\"]",
      LESSONS_TOKEN_BAD_AUDIENCE },
    { NULL, AUDIENCE, ",\"aud\":[]", LESSONS_TOKEN_BAD_AUDIENCE },
    { NULL, AUDIENCE, "", LESSONS_TOKEN_BAD_AUDIENCE },         /* missing */
    { NULL, NULL, ",\"aud\":[\"x\",\"y\"]", LESSONS_TOKEN_OK },
};

static void test_iss_aud(void **state)
{
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(iss_aud_cases) / sizeof(iss_aud_cases[0]); i++) {
        const iss_aud_case_t *c = &iss_aud_cases[i];
        lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
        const char *sub;

        p.issuer = c->issuer;
        p.audience = c->audience;
        sub = verify(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                                  apr_pstrcat(pool, "{\"sub\":\"alice\","
                                              "\"exp\":1700003600",
                                              c->claims, "}", NULL)),
                     c->want);
        if (c->want == LESSONS_TOKEN_OK) {
            assert_string_equal(sub, "alice");
        }
    }
}

static void test_iss_and_aud_both_match(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);

    (void)state;
    p.issuer = ISSUER;
    p.audience = AUDIENCE;
    p.leeway = 30;
    verify(&p, lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                        "{\"sub\":\"bob\",\"exp\":1700003600,"
                        "\"nbf\":1700000010,\"iss\":\"" ISSUER "\","
                        "\"aud\":[\"" AUDIENCE "\"]}"), LESSONS_TOKEN_OK);
}

/* ----------------------------------------------------------------- alg */

static void test_alg_none(void **state)
{
    static const char *const headers[] = {
        "{\"alg\":\"none\",\"typ\":\"JWT\"}",
        "{\"alg\":\"None\",\"typ\":\"JWT\"}",
        "{\"alg\":\"NONE\",\"typ\":\"JWT\"}",
        "{\"alg\":\"nOnE\"}",
    };
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        /* with a (useless) signature, so only the alg can be blamed */
        verify(&p, hs256_token(headers[i], STD_CLAIMS), LESSONS_TOKEN_BAD_ALG);
    }
}

static void test_alg_none_unsigned(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = apr_pstrcat(pool, b64s("{\"alg\":\"none\"}"), ".",
                                b64s(STD_CLAIMS), ".", NULL);
    const char *subject = SENTINEL;
    lessons_token_e r = lessons_token_verify(pool, &p, t, NOW, &subject);

    (void)state;
    /* the classic form has an empty signature: either reason will do */
    if (r != LESSONS_TOKEN_BAD_ALG && r != LESSONS_TOKEN_MALFORMED)
        print_error("got %s\n", result_name(r));
    assert_true(r == LESSONS_TOKEN_BAD_ALG || r == LESSONS_TOKEN_MALFORMED);
}

static void test_alg_other_hmac(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t384 = lj_token(LESSONS_ALG_HS384, secret, SECRET_LEN,
                                STD_CLAIMS);

    (void)state;
    cjose_accepts(t384, secret, SECRET_LEN);
    verify(&p, t384, LESSONS_TOKEN_BAD_ALG);
    p.alg = LESSONS_ALG_HS512;
    verify(&p, t384, LESSONS_TOKEN_BAD_ALG);
}

static void test_alg_lowercase(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = hs256_token("{\"alg\":\"hs256\",\"typ\":\"JWT\"}",
                                STD_CLAIMS);

    (void)state;
    /* libjwt 1.10 took "hs256" as HS256 (trap 4).  Ours refuses it
     * before any key, whatever the verifier would make of it.
     */
    verify(&p, t, LESSONS_TOKEN_BAD_ALG);
    verify(&p, hs256_token("{\"alg\":\"Hs256\"}", STD_CLAIMS),
           LESSONS_TOKEN_BAD_ALG);
}

static void test_alg_not_a_string_or_unknown(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, hs256_token("{\"alg\":\"HS256 \"}", STD_CLAIMS),
           LESSONS_TOKEN_BAD_ALG);
    verify(&p, hs256_token("{\"alg\":\"PS256\"}", STD_CLAIMS),
           LESSONS_TOKEN_BAD_ALG);
}

static void test_alg_missing_rejected(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *subject = SENTINEL;
    lessons_token_e r;

    (void)state;
    r = lessons_token_verify(pool, &p,
                             hs256_token("{\"typ\":\"JWT\"}", STD_CLAIMS),
                             NOW, &subject);
    assert_true(r == LESSONS_TOKEN_BAD_ALG || r == LESSONS_TOKEN_MALFORMED);
    r = lessons_token_verify(pool, &p,
                             hs256_token("{\"alg\":256}", STD_CLAIMS),
                             NOW, &subject);
    assert_true(r == LESSONS_TOKEN_BAD_ALG || r == LESSONS_TOKEN_MALFORMED);
}

static void test_alg_confusion(void **state)
{
    /* HS256 keyed with the RSA public key PEM the server holds */
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    const char *t = hmac_token_md(HS256_HEADER, STD_CLAIMS, EVP_sha256(),
                                  rsa_pub, strlen(rsa_pub));

    (void)state;
    cjose_accepts(t, rsa_pub, strlen(rsa_pub));  /* trap 3 */
    verify(&p, t, LESSONS_TOKEN_BAD_ALG);
}

static void test_alg_confusion_es(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_ES256, ec_pub);
    const char *t = hmac_token_md(HS256_HEADER, STD_CLAIMS, EVP_sha256(),
                                  ec_pub, strlen(ec_pub));

    (void)state;
    verify(&p, t, LESSONS_TOKEN_BAD_ALG);
}

/* The key decides: whatever algorithm a configuration merge pairs a
 * key with, a public key never acts as an HMAC secret, and an RSA or EC
 * key only verifies its own family (and curve).  The HS256 tokens here
 * are the forgery: signed with the public PEM's bytes, which cjose
 * alone accepts as an HMAC key.
 */
static void test_key_decides_public_pem_never_hmac(void **state)
{
    lessons_token_policy_t rs = pem_policy(LESSONS_ALG_HS256, rsa_pub);
    lessons_token_policy_t ec = pem_policy(LESSONS_ALG_HS512, ec_pub);
    const char *t = hmac_token_md(HS256_HEADER, STD_CLAIMS, EVP_sha256(),
                                  rsa_pub, strlen(rsa_pub));

    (void)state;
    cjose_accepts(t, rsa_pub, strlen(rsa_pub));
    verify(&rs, t, LESSONS_TOKEN_KEY_MISFIT);
    verify(&ec, hmac_token_md("{\"alg\":\"HS512\"}", STD_CLAIMS,
                              EVP_sha512(), ec_pub, strlen(ec_pub)),
           LESSONS_TOKEN_KEY_MISFIT);
}

static void test_key_decides_family_and_curve(void **state)
{
    lessons_token_policy_t p;

    (void)state;
    p = pem_policy(LESSONS_ALG_RS256, ec_pub);          /* EC key, RS alg */
    verify(&p, lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv),
                        STD_CLAIMS), LESSONS_TOKEN_KEY_MISFIT);
    p = pem_policy(LESSONS_ALG_ES384, ec_pub);          /* P-256 key, ES384 */
    verify(&p, lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv),
                        STD_CLAIMS), LESSONS_TOKEN_KEY_MISFIT);
    p = pem_policy(LESSONS_ALG_ES256, rsa_pub);         /* RSA key, ES alg */
    verify(&p, lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                        STD_CLAIMS), LESSONS_TOKEN_KEY_MISFIT);
    p = hs_policy(LESSONS_ALG_RS256);                   /* secret, RS alg */
    verify(&p, hs256_token(HS256_HEADER, STD_CLAIMS),
           LESSONS_TOKEN_KEY_MISFIT);
}

static void test_key_decides_short_secret_and_no_key(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    p.key = make_key(secret, LESSONS_HMAC_MIN_BYTES - 1);
    verify(&p, lj_token(LESSONS_ALG_HS256, secret, LESSONS_HMAC_MIN_BYTES - 1,
                        STD_CLAIMS), LESSONS_TOKEN_KEY_MISFIT);
    p.key = NULL;
    verify(&p, hs256_token(HS256_HEADER, STD_CLAIMS),
           LESSONS_TOKEN_KEY_MISFIT);
    p = hs_policy(LESSONS_ALG_INVAL);
    verify(&p, hs256_token(HS256_HEADER, STD_CLAIMS),
           LESSONS_TOKEN_KEY_MISFIT);
}

/* typ: absent or "JWT" in any case; RFC 9068's at+jwt only with its
 * claims (test_at_jwt); every other value, or a non-string, is refused
 * by name.
 */
static void test_typ(void **state)
{
    static const char *const good[] = {
        "{\"alg\":\"HS256\"}",
        "{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
        "{\"alg\":\"HS256\",\"typ\":\"jwt\"}",
    };
    static const char *const bad[] = {
        "{\"alg\":\"HS256\",\"typ\":\"JOSE\"}",
        "{\"alg\":\"HS256\",\"typ\":\"\"}",
        "{\"alg\":\"HS256\",\"typ\":123}",
        "{\"alg\":\"HS256\",\"typ\":null}",
        "{\"alg\":\"HS256\",\"typ\":true}",
        "{\"alg\":\"HS256\",\"typ\":[]}",
        "{\"alg\":\"HS256\",\"typ\":{}}",
    };
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        verify(&p, hs256_token(good[i], STD_CLAIMS), LESSONS_TOKEN_OK);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        verify(&p, hs256_token(bad[i], STD_CLAIMS), LESSONS_TOKEN_BAD_TYPE);
    /* at+jwt without RFC 9068's claims: refused all the same */
    verify(&p, hs256_token("{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}",
                           STD_CLAIMS), LESSONS_TOKEN_AT_CLAIMS);
    verify(&p, hs256_token("{\"alg\":\"HS256\","
                           "\"typ\":\"application/at+jwt\"}", STD_CLAIMS),
           LESSONS_TOKEN_AT_CLAIMS);
    assert_string_equal(lessons_token_describe(LESSONS_TOKEN_BAD_TYPE),
                        "unsupported token type");
}

/* RFC 9068 2.2's claims, exp as STD_CLAIMS has it. */
#define AT_CLAIMS_ALL "{\"iss\":\"https://idp\",\"exp\":1700003600," \
    "\"aud\":\"lessons\",\"sub\":\"alice\",\"client_id\":\"app\"," \
    "\"iat\":1699999000,\"jti\":\"j1\"}"

/* LessonsJWTTokenType at+jwt: a JWT-typed (or untyped) token is refused
 * before its signature.
 */
static void test_require_at_jwt_refuses_jwt(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    unsigned char fp_any[LESSONS_TOKEN_FP_LEN], fp_at[LESSONS_TOKEN_FP_LEN];

    (void)state;
    assert_int_equal(lessons_token_policy_fingerprint(&p, fp_any), 0);
    p.require_at_jwt = 1;
    assert_int_equal(lessons_token_policy_fingerprint(&p, fp_at), 0);
    /* a token verified under one never counts under the other */
    assert_memory_not_equal(fp_any, fp_at, LESSONS_TOKEN_FP_LEN);
    verify(&p, hs256_token(HS256_HEADER, AT_CLAIMS_ALL),
           LESSONS_TOKEN_NOT_AT_JWT);
    verify(&p, hs256_token("{\"alg\":\"HS256\"}", AT_CLAIMS_ALL),
           LESSONS_TOKEN_NOT_AT_JWT);
    assert_non_null(strstr(lessons_token_describe(LESSONS_TOKEN_NOT_AT_JWT),
                           "at+jwt"));
}

/* at+jwt and application/at+jwt in any case, with every claim RFC 9068
 * 2.2 asks for, verify (signed by hand, and by cjose); one missing, or
 * iat not a number, is refused with that reason.
 */
static void test_at_jwt(void **state)
{
    static const char *const typs[] = { "at+jwt", "AT+JWT",
                                        "application/at+jwt" };
    static const char *const missing[] = {
        "{\"exp\":1700003600,\"aud\":\"lessons\",\"sub\":\"alice\","
        "\"client_id\":\"app\",\"iat\":1699999000,\"jti\":\"j1\"}",
        "{\"iss\":\"https://idp\",\"exp\":1700003600,\"sub\":\"alice\","
        "\"client_id\":\"app\",\"iat\":1699999000,\"jti\":\"j1\"}",
        "{\"iss\":\"https://idp\",\"exp\":1700003600,\"aud\":\"lessons\","
        "\"client_id\":\"app\",\"iat\":1699999000,\"jti\":\"j1\"}",
        "{\"iss\":\"https://idp\",\"exp\":1700003600,\"aud\":\"lessons\","
        "\"sub\":\"alice\",\"iat\":1699999000,\"jti\":\"j1\"}",
        "{\"iss\":\"https://idp\",\"exp\":1700003600,\"aud\":\"lessons\","
        "\"sub\":\"alice\",\"client_id\":\"app\",\"jti\":\"j1\"}",
        "{\"iss\":\"https://idp\",\"exp\":1700003600,\"aud\":\"lessons\","
        "\"sub\":\"alice\",\"client_id\":\"app\",\"iat\":1699999000}",
    };
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(typs) / sizeof(typs[0]); i++) {
        const char *h = apr_psprintf(pool, "{\"alg\":\"HS256\","
                                     "\"typ\":\"%s\"}", typs[i]);

        p.require_at_jwt = 0;
        sub = verify(&p, hs256_token(h, AT_CLAIMS_ALL), LESSONS_TOKEN_OK);
        assert_string_equal(sub, "alice");
        p.require_at_jwt = 1;
        verify(&p, hs256_token(h, AT_CLAIMS_ALL), LESSONS_TOKEN_OK);
        h = apr_psprintf(pool, "{\"typ\":\"%s\"}", typs[i]);
        sub = verify(&p, lj_token_with(LESSONS_ALG_HS256, secret, SECRET_LEN,
                                       AT_CLAIMS_ALL, NULL, h),
                     LESSONS_TOKEN_OK);
        assert_string_equal(sub, "alice");
    }
    p.require_at_jwt = 0;
    for (i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
        verify(&p, hs256_token("{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}",
                               missing[i]), LESSONS_TOKEN_AT_CLAIMS);
    }
    /* a JWT-typed token needs none of them */
    verify(&p, hs256_token(HS256_HEADER, STD_CLAIMS), LESSONS_TOKEN_OK);
    /* other types stay refused */
    verify(&p, hs256_token("{\"alg\":\"HS256\",\"typ\":\"dpop+jwt\"}",
                           AT_CLAIMS_ALL), LESSONS_TOKEN_BAD_TYPE);
}

/* ------------------------------------------------------------- PS* */

/* A token signed by hand with RSASSA-PSS (RFC 7518 3.5: MGF1 with the
 * same hash, a salt as long as the hash), by OpenSSL alone: not by the
 * library that verifies.
 */
static char *pss_token(const char *header, const char *payload,
                       const EVP_MD *md, const char *priv_pem)
{
    char *input = apr_pstrcat(pool, b64s(header), ".", b64s(payload), NULL);
    BIO *bio = BIO_new_mem_buf(priv_pem, -1);
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_PKEY_CTX *pctx = NULL;
    unsigned char sig[1024];
    size_t siglen = sizeof(sig);

    assert_non_null(key);
    assert_non_null(ctx);
    assert_int_equal(EVP_DigestSignInit(ctx, &pctx, md, NULL, key), 1);
    assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(pctx,
                                                  RSA_PKCS1_PSS_PADDING), 1);
    assert_int_equal(EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx,
                                                      RSA_PSS_SALTLEN_DIGEST),
                     1);
    assert_int_equal(EVP_DigestSign(ctx, sig, &siglen,
                                    (const unsigned char *)input,
                                    strlen(input)), 1);
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    BIO_free(bio);
    return apr_pstrcat(pool, input, ".", b64url(sig, siglen), NULL);
}

#define PS256_HEADER "{\"alg\":\"PS256\",\"typ\":\"JWT\"}"

/* An RSA key takes PS256/384/512 as it takes RS*, from a PEM key or a
 * key set; the wrong key, a flipped signature and a section without PS*
 * are refused.
 */
static void test_pss(void **state)
{
    static const struct { const char *name; lessons_alg_t alg; } ps[] = {
        { "PS256", LESSONS_ALG_PS256 }, { "PS384", LESSONS_ALG_PS384 },
        { "PS512", LESSONS_ALG_PS512 },
    };
    const set_entry_t e[] = { { "r1", LESSONS_ALG_NONE, rsa_pub,
                                strlen(rsa_pub) } };
    lessons_token_policy_t p, sp;
    const EVP_MD *md[3];
    size_t i;
    char *t;

    (void)state;
    md[0] = EVP_sha256();
    md[1] = EVP_sha384();
    md[2] = EVP_sha512();
    sp = set_policy(set_of(e, 1, 7), LESSONS_ALG_BIT(LESSONS_ALG_PS256)
                                     | LESSONS_ALG_BIT(LESSONS_ALG_PS384)
                                     | LESSONS_ALG_BIT(LESSONS_ALG_PS512) | RS);
    for (i = 0; i < 3; i++) {
        const char *h = apr_psprintf(pool, "{\"alg\":\"%s\"}", ps[i].name);

        p = pem_policy(ps[i].alg, rsa_pub);
        t = pss_token(h, STD_CLAIMS, md[i], rsa_priv);
        assert_string_equal(verify(&p, t, LESSONS_TOKEN_OK), "alice");
        assert_string_equal(verify(&sp, t, LESSONS_TOKEN_OK), "alice");
        /* and signed by cjose */
        assert_string_equal(verify(&p, lj_token(ps[i].alg, rsa_priv,
                                                strlen(rsa_priv), STD_CLAIMS),
                                   LESSONS_TOKEN_OK), "alice");
        verify(&p, pss_token(h, STD_CLAIMS, md[i], rsa2_priv),
               LESSONS_TOKEN_BAD_SIGNATURE);
        /* another base64url character: still well formed, not signed */
        sig_of(t)[3] = sig_of(t)[3] == 'A' ? 'B' : 'A';
        verify(&p, t, LESSONS_TOKEN_BAD_SIGNATURE);
    }
    /* the set's RSA key verifies RS256 beside PS* */
    verify(&sp, lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                         STD_CLAIMS), LESSONS_TOKEN_OK);
    /* PS256 where only RS256 is named; PS384 where only PS256 is */
    t = pss_token(PS256_HEADER, STD_CLAIMS, EVP_sha256(), rsa_priv);
    p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    verify(&p, t, LESSONS_TOKEN_BAD_ALG);
    p = pem_policy(LESSONS_ALG_PS256, rsa_pub);
    verify(&p, pss_token("{\"alg\":\"PS384\"}", STD_CLAIMS, EVP_sha384(),
                         rsa_priv), LESSONS_TOKEN_BAD_ALG);
    /* an RS256 signature under a PS256 header is not PSS */
    verify(&p, apr_pstrcat(pool, b64s(PS256_HEADER), ".", b64s(STD_CLAIMS),
                           ".", sig_of(lj_token(LESSONS_ALG_RS256, rsa_priv,
                                                strlen(rsa_priv),
                                                STD_CLAIMS)), NULL),
           LESSONS_TOKEN_BAD_SIGNATURE);
    /* the RSA key's PEM as an HMAC secret under a PS* section */
    verify(&p, hmac_token_md("{\"alg\":\"HS256\"}", STD_CLAIMS, EVP_sha256(),
                             rsa_pub, strlen(rsa_pub)),
           LESSONS_TOKEN_BAD_ALG);
    /* an EC key takes no PS* */
    p = pem_policy(LESSONS_ALG_PS256, ec_pub);
    verify(&p, t, LESSONS_TOKEN_KEY_MISFIT);
}

/* iat: optional; a number no later than now (plus leeway). */
static void test_iat(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, hs256_token(HS256_HEADER, "{\"exp\":1700003600,"
                           "\"iat\":1699999000}"), LESSONS_TOKEN_OK);
    verify(&p, hs256_token(HS256_HEADER, "{\"exp\":1700003600,"
                           "\"iat\":1700000000}"), LESSONS_TOKEN_OK);
    verify(&p, hs256_token(HS256_HEADER, "{\"exp\":1700003600,"
                           "\"iat\":1700000100}"), LESSONS_TOKEN_BAD_IAT);
    verify(&p, hs256_token(HS256_HEADER, "{\"exp\":1700003600,"
                           "\"iat\":\"1699999000\"}"), LESSONS_TOKEN_BAD_IAT);
    verify(&p, hs256_token(HS256_HEADER, "{\"exp\":1700003600,"
                           "\"iat\":null}"), LESSONS_TOKEN_BAD_IAT);
    p.leeway = 200;
    verify(&p, hs256_token(HS256_HEADER, "{\"exp\":1700003600,"
                           "\"iat\":1700000100}"), LESSONS_TOKEN_OK);
}

static void test_rs_header_with_hmac_signature(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    const char *t = hmac_token_md("{\"alg\":\"RS256\",\"typ\":\"JWT\"}",
                                  STD_CLAIMS, EVP_sha256(),
                                  rsa_pub, strlen(rsa_pub));

    (void)state;
    verify(&p, t, LESSONS_TOKEN_BAD_SIGNATURE);
}

/* ----------------------------------------------------------- signature */

static void test_wrong_hmac_key(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_HS256, other_secret,
                        sizeof(other_secret) - 1, STD_CLAIMS),
           LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_wrong_rsa_key(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_RS256, rsa2_priv, strlen(rsa2_priv),
                        STD_CLAIMS), LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_wrong_ec_key(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_ES256, ec_pub);

    (void)state;
    verify(&p, lj_token(LESSONS_ALG_ES256, ec2_priv, strlen(ec2_priv),
                        STD_CLAIMS), LESSONS_TOKEN_BAD_SIGNATURE);
}

static char flip(char c)
{
    return c == 'A' ? 'B' : 'A';
}

static void test_flipped_signature_hs(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    char *sig = sig_of(t);

    (void)state;
    verify(&p, t, LESSONS_TOKEN_OK);
    sig[0] = flip(sig[0]);
    verify(&p, t, LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_flipped_signature_rs(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    char *t = lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                       STD_CLAIMS);
    char *sig = sig_of(t);

    (void)state;
    sig[10] = flip(sig[10]);
    verify(&p, t, LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_flipped_signature_es(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_ES256, ec_pub);
    char *t = lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv), STD_CLAIMS);
    char *sig = sig_of(t);

    (void)state;
    sig[4] = flip(sig[4]);
    verify(&p, t, LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_tampered_payload(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    char *h = apr_pstrndup(pool, t, (apr_size_t)(strchr(t, '.') - t));
    const char *forged = apr_pstrcat(pool, h, ".",
        b64s("{\"sub\":\"admin\",\"exp\":1700003600}"), ".", sig_of(t),
        NULL);

    (void)state;
    verify(&p, forged, LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_empty_signature_rejected(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);

    (void)state;
    *sig_of(t) = '\0';                          /* "h.p." */
    verify(&p, t, LESSONS_TOKEN_MALFORMED);
}

/* ------------------------------------------------------------- syntax */

static void test_padding_appended_rs(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    const char *t = lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                             STD_CLAIMS);
    const char *padded = apr_pstrcat(pool, t, "==", NULL);

    (void)state;
    cjose_accepts(padded, rsa_pub, strlen(rsa_pub));     /* trap 9 */
    verify(&p, padded, LESSONS_TOKEN_MALFORMED);
}

static void test_bang_inserted_rs(void **state)
{
    lessons_token_policy_t p = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    char *t = lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                       STD_CLAIMS);
    char *sig = sig_of(t);
    apr_size_t head = (apr_size_t)(sig - t) + 20;
    const char *bang = apr_pstrcat(pool, apr_pstrndup(pool, t, head), "!",
                                   t + head, NULL);

    (void)state;
    /* libjwt 1.10 took it (trap 9); cjose refuses it itself */
    verify(&p, bang, LESSONS_TOKEN_MALFORMED);
}

static void test_alphabet_in_each_segment(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    static const char bad_chars[] = "+/= !*\t\"";
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    apr_size_t len = strlen(t);
    apr_size_t dot1 = (apr_size_t)(strchr(t, '.') - t);
    apr_size_t dot2 = (apr_size_t)(strrchr(t, '.') - t);
    apr_size_t where[3];
    size_t i, j;

    (void)state;
    where[0] = dot1 / 2;
    where[1] = dot1 + 1 + (dot2 - dot1) / 2;
    where[2] = dot2 + 1 + (len - dot2) / 2;
    for (j = 0; j < 3; j++) {
        for (i = 0; bad_chars[i]; i++) {
            char *m = apr_pstrdup(pool, t);

            m[where[j]] = bad_chars[i];
            verify(&p, m, LESSONS_TOKEN_MALFORMED);
        }
    }
}

static void test_segment_count(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    char *two = apr_pstrndup(pool, t, (apr_size_t)(strrchr(t, '.') - t));

    (void)state;
    verify(&p, two, LESSONS_TOKEN_MALFORMED);
    verify(&p, apr_pstrcat(pool, t, ".", sig_of(t), NULL),
           LESSONS_TOKEN_MALFORMED);
    verify(&p, apr_pstrcat(pool, t, ".", NULL), LESSONS_TOKEN_MALFORMED);
    verify(&p, "abc", LESSONS_TOKEN_MALFORMED);
    verify(&p, "", LESSONS_TOKEN_MALFORMED);
    verify(&p, "..", LESSONS_TOKEN_MALFORMED);
    verify(&p, "...", LESSONS_TOKEN_MALFORMED);
}

static void test_empty_segments(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    char *dot1 = strchr(t, '.'), *dot2 = strrchr(t, '.');
    const char *h = apr_pstrndup(pool, t, (apr_size_t)(dot1 - t));
    const char *pl = apr_pstrndup(pool, dot1 + 1,
                                  (apr_size_t)(dot2 - dot1 - 1));

    (void)state;
    verify(&p, apr_pstrcat(pool, ".", pl, ".", dot2 + 1, NULL),
           LESSONS_TOKEN_MALFORMED);
    verify(&p, apr_pstrcat(pool, h, "..", dot2 + 1, NULL),
           LESSONS_TOKEN_MALFORMED);
    verify(&p, apr_pstrcat(pool, h, ".", pl, ".", NULL),
           LESSONS_TOKEN_MALFORMED);
}

static void test_surrounding_space_malformed(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);

    (void)state;
    verify(&p, apr_pstrcat(pool, " ", t, NULL), LESSONS_TOKEN_MALFORMED);
    verify(&p, apr_pstrcat(pool, t, " ", NULL), LESSONS_TOKEN_MALFORMED);
    verify(&p, apr_pstrcat(pool, t, "\n", NULL), LESSONS_TOKEN_MALFORMED);
}

static void test_header_not_json(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, hs256_token("not json at all", STD_CLAIMS),
           LESSONS_TOKEN_MALFORMED);
    verify(&p, hs256_token("{\"alg\":\"HS256\"", STD_CLAIMS),
           LESSONS_TOKEN_MALFORMED);
}

static void test_header_not_object(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    verify(&p, hs256_token("[\"HS256\"]", STD_CLAIMS),
           LESSONS_TOKEN_MALFORMED);
    verify(&p, hs256_token("\"HS256\"", STD_CLAIMS), LESSONS_TOKEN_MALFORMED);
    verify(&p, hs256_token("42", STD_CLAIMS), LESSONS_TOKEN_MALFORMED);
}

static void test_header_not_base64_json(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);

    (void)state;
    /* valid alphabet, but the header decodes to binary junk */
    verify(&p, apr_pstrcat(pool, "____", strchr(t, '.'), NULL),
           LESSONS_TOKEN_MALFORMED);
}

static void test_crit_header(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = hs256_token(
        "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"crit\":[\"exp\"],"
        "\"exp\":1700003600}", STD_CLAIMS);

    (void)state;
    cjose_accepts(t, secret, SECRET_LEN);       /* trap 8 */
    verify(&p, t, LESSONS_TOKEN_CRIT);
    verify(&p, hs256_token("{\"alg\":\"HS256\",\"crit\":[\"b64\"],"
                           "\"b64\":false}", STD_CLAIMS),
           LESSONS_TOKEN_CRIT);
}

static void test_payload_array(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *t = hs256_token(HS256_HEADER,
                                "[{\"sub\":\"alice\",\"exp\":1700003600}]");

    (void)state;
    cjose_accepts(t, secret, SECRET_LEN);       /* trap 11 */
    verify(&p, t, LESSONS_TOKEN_BAD_CLAIMS);
}

static void test_payload_not_json_rejected(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *subject = SENTINEL;
    lessons_token_e r = lessons_token_verify(pool, &p,
        hs256_token(HS256_HEADER, "sub=alice"), NOW, &subject);

    (void)state;
    assert_int_not_equal(r, LESSONS_TOKEN_OK);
}

/* A valid HS256 token of exactly want bytes, or NULL if that length
 * cannot be reached by padding (base64url never ends 1 mod 4).
 */
static const char *token_of_length(apr_size_t want)
{
    static const char fmt[] =
        "{\"sub\":\"alice\",\"exp\":1700003600,\"pad\":\"%s\"}";
    size_t fixed = strlen(b64s(HS256_HEADER)) + 1 + 1 + 43;
    size_t base = strlen(fmt) - 2;           /* without "%s" */
    size_t n;

    for (n = 0; n < want; n++) {
        if (fixed + ((base + n) * 4 + 2) / 3 == want) {
            char *pad = apr_palloc(pool, n + 1);
            const char *t;

            memset(pad, 'x', n);
            pad[n] = '\0';
            t = hs256_token(HS256_HEADER, apr_psprintf(pool, fmt, pad));
            assert_int_equal(strlen(t), want);
            return t;
        }
    }
    return NULL;
}

static void test_length_limit(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *at = token_of_length(LESSONS_TOKEN_MAX_LEN);
    const char *over = NULL;
    apr_size_t l;

    (void)state;
    assert_non_null(at);
    verify(&p, at, LESSONS_TOKEN_OK);
    for (l = LESSONS_TOKEN_MAX_LEN + 1; !over; l++)
        over = token_of_length(l);
    cjose_accepts(over, secret, SECRET_LEN);
    verify(&p, over, LESSONS_TOKEN_MALFORMED);
    /* far over */
    verify(&p, token_of_length(4 * LESSONS_TOKEN_MAX_LEN),
           LESSONS_TOKEN_MALFORMED);
}

static void test_subject_untouched_on_failure(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *sub;

    (void)state;
    /* whatever the unit does with *subject on failure, it must not hand
     * out the claim of an unverified token */
    sub = verify(&p, lj_token(LESSONS_ALG_HS256, other_secret,
                              sizeof(other_secret) - 1, STD_CLAIMS),
                 LESSONS_TOKEN_BAD_SIGNATURE);
    assert_true(sub == NULL || sub == SENTINEL);
    sub = verify_at(&p, lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                                 STD_CLAIMS), EXP + 100,
                    LESSONS_TOKEN_EXPIRED);
    assert_true(sub == NULL || sub == SENTINEL);
}

/* ------------------------------------------------------------- claims */

/* Without a cache, verify_claims is a full verify that also hands out
 * the payload as an object in p: exactly the signed claims, and nothing
 * from a token that failed.
 */
#define HDR "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"

static void test_verify_claims_no_cache(void **state)
{
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);
    const char *payload = "{\"sub\":\"alice\",\"exp\":1700003600,"
                          "\"realm_access\":{\"roles\":[\"a\",\"b\"]},"
                          "\"n\":42,\"t\":true}";
    const char *subject = SENTINEL;
    json_t *claims = NULL, *want;

    (void)state;
    want = json_loads(payload, 0, NULL);
    assert_non_null(want);
    assert_int_equal(lessons_token_verify_claims(pool, &p, NULL,
                                                 hs256_token(HDR,
                                                             payload),
                                                 NOW, &subject, &claims),
                     LESSONS_TOKEN_OK);
    assert_string_equal(subject, "alice");
    assert_non_null(claims);
    assert_true(json_equal(claims, want));
    json_decref(want);

    /* claims NULL: only the verdict and the subject */
    subject = SENTINEL;
    assert_int_equal(lessons_token_verify_claims(pool, &p, NULL,
                                                 hs256_token(HDR,
                                                             payload),
                                                 NOW, &subject, NULL),
                     LESSONS_TOKEN_OK);
    assert_string_equal(subject, "alice");

    /* refused: claims NULL, whatever it held */
    claims = (json_t *)SENTINEL;
    assert_int_equal(lessons_token_verify_claims(pool, &p, NULL,
                                                 hs256_token(HDR,
                                                             payload),
                                                 EXP + 1, &subject, &claims),
                     LESSONS_TOKEN_EXPIRED);
    assert_null(claims);
    claims = (json_t *)SENTINEL;
    assert_int_equal(lessons_token_verify_claims(pool, &p, NULL,
                         lj_token(LESSONS_ALG_HS256, other_secret,
                                  sizeof(other_secret) - 1, payload),
                         NOW, &subject, &claims),
                     LESSONS_TOKEN_BAD_SIGNATURE);
    assert_null(claims);
    claims = (json_t *)SENTINEL;
    assert_int_equal(lessons_token_verify_claims(pool, NULL, NULL, "x.y.z",
                                                 NOW, &subject, &claims),
                     LESSONS_TOKEN_KEY_MISFIT);
    assert_null(claims);
}

/* ------------------------------------------------------ several issuers */

#define ISSUER_B "https://sso.example.org/realms/teachers"

static const char *const two_issuers[] = { ISSUER, ISSUER_B };

static lessons_token_e pick(const char *token, int *index)
{
    return lessons_token_pick_issuer(pool, token, two_issuers, 2, index);
}

static void test_pick_issuer(void **state)
{
    char *long_payload;
    int i = 7;

    (void)state;
    assert_int_equal(pick(hs256_token(HS256_HEADER, "{\"iss\":\"" ISSUER
                                      "\",\"exp\":1}"), &i),
                     LESSONS_TOKEN_OK);
    assert_int_equal(i, 0);
    assert_int_equal(pick(hs256_token(HS256_HEADER, "{\"iss\":\"" ISSUER_B
                                      "\"}"), &i), LESSONS_TOKEN_OK);
    assert_int_equal(i, 1);
    /* Exact strings only; any other value names no issuer. */
    static const char *const none[] = {
        "{\"sub\":\"x\"}",
        "{\"iss\":null}",
        "{\"iss\":5}",
        "{\"iss\":[\"" ISSUER "\"]}",
        "{\"iss\":{\"" ISSUER "\":1}}",
        "{\"iss\":\"" ISSUER "/\"}",
        "{\"iss\":\"" ISSUER " \"}",
        "{\"iss\":\"HTTPS://auth.example.org\"}",
        "{\"iss\":\"\"}",
    };
    for (size_t n = 0; n < sizeof(none) / sizeof(none[0]); n++) {
        i = 7;
        if (pick(hs256_token(HS256_HEADER, none[n]), &i)
            != LESSONS_TOKEN_UNKNOWN_ISSUER) {
            fail_msg("payload %s picked an issuer", none[n]);
        }
        assert_int_equal(i, -1);
    }
    /* A payload read two ways is no payload: refused as a full verify
     * refuses it, before any issuer is picked.
     */
    assert_int_equal(pick(hs256_token(HS256_HEADER, "{\"iss\":\"" ISSUER_B
                                      "\",\"iss\":\"" ISSUER "\"}"), &i),
                     LESSONS_TOKEN_MALFORMED);
    assert_int_equal(pick(hs256_token(HS256_HEADER, "[{\"iss\":\"" ISSUER
                                      "\"}]"), &i), LESSONS_TOKEN_MALFORMED);
    assert_int_equal(pick(hs256_token(HS256_HEADER, "not json"), &i),
                     LESSONS_TOKEN_MALFORMED);
    assert_int_equal(pick("a.b", &i), LESSONS_TOKEN_MALFORMED);
    assert_int_equal(pick("", &i), LESSONS_TOKEN_MALFORMED);
    assert_int_equal(pick(NULL, &i), LESSONS_TOKEN_MALFORMED);
    assert_int_equal(pick(apr_pstrcat(pool, b64s(HS256_HEADER), ".",
                                      b64s("{\"iss\":\"" ISSUER "\"}"),
                                      ".a+b", NULL), &i),
                     LESSONS_TOKEN_MALFORMED);
    long_payload = apr_psprintf(pool, "{\"iss\":\"" ISSUER "\",\"x\":\"%0*d\"}",
                                LESSONS_TOKEN_MAX_LEN, 0);
    assert_int_equal(pick(hs256_token(HS256_HEADER, long_payload), &i),
                     LESSONS_TOKEN_MALFORMED);
    /* No issuers at all: nothing is named. */
    assert_int_equal(lessons_token_pick_issuer(pool, hs256_token(HS256_HEADER,
                         "{\"iss\":\"" ISSUER "\"}"), two_issuers, 0, &i),
                     LESSONS_TOKEN_UNKNOWN_ISSUER);
}

/* As the module composes them: the issuer the token names picks the
 * policy, and only that policy's keys and algorithms judge it.
 */
static lessons_token_e verify_by_issuer(const lessons_token_policy_t *pols,
                                        const char *token)
{
    const char *subject = NULL;
    lessons_token_e rc;
    int i = -1;

    rc = pick(token, &i);
    if (rc != LESSONS_TOKEN_OK) {
        return rc;
    }
    return lessons_token_verify(pool, &pols[i], token, NOW, &subject);
}

#define CLAIMS_OF(iss) "{\"iss\":\"" iss "\",\"sub\":\"s\",\"exp\":1700003600}"

/* One forgery case: a token cjose signs (alg, key; claims naming an
 * issuer; a kid or none), and what the pick-then-verify must say.
 */
typedef struct {
    lessons_alg_t alg;
    const char **key;               /* a PEM, or NULL: the HMAC secret */
    const char *claims;
    const char *kid;
    lessons_token_e expect;
} cross_case_t;

static void cross_cases(const lessons_token_policy_t *pols,
                        const cross_case_t *c, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const void *key = c[i].key ? (const void *)*c[i].key : secret;
        size_t len = c[i].key ? strlen(*c[i].key) : SECRET_LEN;
        lessons_token_e rc = verify_by_issuer(pols, lj_token_kid(c[i].alg,
                                              key, len, c[i].claims,
                                              c[i].kid));

        if (rc != c[i].expect) {
            fail_msg("case %zu: expected %s, got %s", i,
                     result_name(c[i].expect), result_name(rc));
        }
    }
}

#define A_CLAIMS CLAIMS_OF(ISSUER)
#define B_CLAIMS CLAIMS_OF(ISSUER_B)

/* Issuer A verifies RS256 with the RSA key, issuer B HS256 with the
 * secret: a key of one never verifies a token naming the other.
 */
static void test_issuers_keys_never_cross(void **state)
{
    const cross_case_t cases[] = {
        { LESSONS_ALG_RS256, &rsa_priv, A_CLAIMS, NULL, LESSONS_TOKEN_OK },
        { LESSONS_ALG_HS256, NULL, B_CLAIMS, NULL, LESSONS_TOKEN_OK },
        /* A's key, B's name; B's key, A's name. */
        { LESSONS_ALG_RS256, &rsa_priv, B_CLAIMS, NULL, LESSONS_TOKEN_BAD_ALG },
        { LESSONS_ALG_HS256, NULL, A_CLAIMS, NULL, LESSONS_TOKEN_BAD_ALG },
        /* No iss, or an issuer neither is: refused before any key. */
        { LESSONS_ALG_HS256, NULL, STD_CLAIMS, NULL,
          LESSONS_TOKEN_UNKNOWN_ISSUER },
        { LESSONS_ALG_RS256, &rsa_priv, CLAIMS_OF("https://evil.example"), NULL,
          LESSONS_TOKEN_UNKNOWN_ISSUER },
    };
    lessons_token_policy_t pols[2];

    (void)state;
    pols[0] = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    pols[0].issuer = ISSUER;
    pols[1] = hs_policy(LESSONS_ALG_HS256);
    pols[1].issuer = ISSUER_B;
    cross_cases(pols, cases, sizeof(cases) / sizeof(cases[0]));
    /* The confusion attack against A, in A's name and in B's. */
    assert_int_equal(verify_by_issuer(pols, hmac_token_md(HS256_HEADER,
                                      A_CLAIMS, EVP_sha256(), rsa_pub,
                                      strlen(rsa_pub))),
                     LESSONS_TOKEN_BAD_ALG);
    assert_int_equal(verify_by_issuer(pols, hmac_token_md(HS256_HEADER,
                                      B_CLAIMS, EVP_sha256(), rsa_pub,
                                      strlen(rsa_pub))),
                     LESSONS_TOKEN_BAD_SIGNATURE);
}

/* Each issuer a set with kids: another issuer's kid, or its own kid
 * with another issuer's key, never verifies.
 */
static void test_issuers_kids_never_cross(void **state)
{
    const set_entry_t ea[] = { { "a1", LESSONS_ALG_NONE, ec_pub,
                                 strlen(ec_pub) } };
    const set_entry_t eb[] = { { "b1", LESSONS_ALG_NONE, rsa_pub,
                                 strlen(rsa_pub) } };
    const cross_case_t cases[] = {
        { LESSONS_ALG_ES256, &ec_priv, A_CLAIMS, "a1", LESSONS_TOKEN_OK },
        { LESSONS_ALG_RS256, &rsa_priv, B_CLAIMS, "b1", LESSONS_TOKEN_OK },
        /* B's name with A's kid and A's key: B's set has no such kid. */
        { LESSONS_ALG_ES256, &ec_priv, B_CLAIMS, "a1",
          LESSONS_TOKEN_UNKNOWN_KID },
        /* B's name and kid, signed with A's key. */
        { LESSONS_ALG_ES256, &ec_priv, B_CLAIMS, "b1", LESSONS_TOKEN_BAD_ALG },
        /* B's name, no kid, A's key: B's keys only are tried. */
        { LESSONS_ALG_ES256, &ec_priv, B_CLAIMS, NULL, LESSONS_TOKEN_BAD_ALG },
        { LESSONS_ALG_RS256, &rsa2_priv, B_CLAIMS, NULL,
          LESSONS_TOKEN_BAD_SIGNATURE },
        /* A's name, B's kid, B's key. */
        { LESSONS_ALG_RS256, &rsa_priv, A_CLAIMS, "b1",
          LESSONS_TOKEN_UNKNOWN_KID },
    };
    lessons_token_policy_t pols[2];

    (void)state;
    pols[0] = set_policy(set_of(ea, 1, 0xa), ES | RS);
    pols[0].issuer = ISSUER;
    pols[1] = set_policy(set_of(eb, 1, 0xb), ES | RS);
    pols[1].issuer = ISSUER_B;
    cross_cases(pols, cases, sizeof(cases) / sizeof(cases[0]));
}

/* The verified-token cache per issuer: a token that verified under one
 * issuer's policy is no hit under another's, even with the same keys.
 */
static void test_issuers_cache_apart(void **state)
{
    lessons_tokencache_t *cache = lessons_tokencache_make(pool, 16);
    lessons_token_policy_t a = hs_policy(LESSONS_ALG_HS256), b;
    const char *subject = NULL;
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, A_CLAIMS);

    (void)state;
    a.issuer = ISSUER;
    b = a;
    b.issuer = ISSUER_B;
    assert_int_equal(lessons_token_verify_cached(pool, &a, cache, t, NOW,
                                                 &subject), LESSONS_TOKEN_OK);
    assert_int_equal(lessons_token_verify_cached(pool, &b, cache, t, NOW,
                                                 &subject),
                     LESSONS_TOKEN_BAD_ISSUER);
    b.audience = AUDIENCE;
    b.issuer = ISSUER;
    assert_int_equal(lessons_token_verify_cached(pool, &b, cache, t, NOW,
                                                 &subject),
                     LESSONS_TOKEN_BAD_AUDIENCE);
}

/* ------------------------------------------------------------ describe */

static void test_describe(void **state)
{
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN,
                             "{\"sub\":\"zz-claim-text-zz\","
                             "\"exp\":1700003600}");
    int r;

    (void)state;
    for (r = LESSONS_TOKEN_OK; r <= LESSONS_TOKEN_UNKNOWN_ISSUER; r++) {
        const char *d = lessons_token_describe((lessons_token_e)r);
        const char *c;

        if (!d || !*d)
            print_error("no description for %s\n", result_name(r));
        assert_non_null(d);
        assert_true(strlen(d) > 0);
        assert_null(strstr(d, t));
        assert_null(strstr(d, "zz-claim-text-zz"));
        /* RFC 6750 3: error_description is %x20-21 / %x23-5B / %x5D-7E */
        for (c = d; *c; c++) {
            unsigned char u = (unsigned char)*c;

            assert_true(u >= 0x20 && u <= 0x7e && u != '"' && u != '\\');
        }
    }
}

static void test_describe_failures_differ_from_ok(void **state)
{
    int a, b;

    (void)state;
    /* every failure reason is told apart from success */
    for (a = LESSONS_TOKEN_MALFORMED; a <= LESSONS_TOKEN_UNKNOWN_ISSUER; a++) {
        b = LESSONS_TOKEN_OK;
        assert_string_not_equal(lessons_token_describe((lessons_token_e)a),
                                lessons_token_describe((lessons_token_e)b));
    }
}

/* -------------------------------------------------------------- bearer */

static void bearer(const char *header, lessons_bearer_e expect,
                   const char *expect_token)
{
    const char *tok = SENTINEL;
    lessons_bearer_e r = lessons_bearer_parse(pool, header, &tok);

    if (r != expect)
        print_error("\"%s\": expected %d, got %d\n",
                    header ? header : "(null)", (int)expect, (int)r);
    assert_int_equal(r, expect);
    if (expect == LESSONS_BEARER_OK) {
        assert_non_null(tok);
        assert_true(tok != SENTINEL);
        assert_string_equal(tok, expect_token);
        /* a pool copy, not a pointer into the caller's header */
        assert_true(tok < header || tok > header + strlen(header));
    }
}

static void test_bearer_none(void **state)
{
    (void)state;
    bearer(NULL, LESSONS_BEARER_NONE, NULL);
}

static void test_bearer_other_scheme(void **state)
{
    (void)state;
    bearer("Basic abc", LESSONS_BEARER_OTHER_SCHEME, NULL);
    bearer("Basic YWxhZGRpbjpvcGVuc2VzYW1l", LESSONS_BEARER_OTHER_SCHEME,
           NULL);
    bearer("Bearerabc", LESSONS_BEARER_OTHER_SCHEME, NULL);
    bearer("Bearer2 abc", LESSONS_BEARER_OTHER_SCHEME, NULL);
    bearer("Digest username=\"x\"", LESSONS_BEARER_OTHER_SCHEME, NULL);
}

static void test_bearer_ok(void **state)
{
    (void)state;
    bearer("Bearer abc.def.ghi", LESSONS_BEARER_OK, "abc.def.ghi");
    bearer("bearer  abc.def.ghi", LESSONS_BEARER_OK, "abc.def.ghi");
    bearer("BEARER abc.def.ghi", LESSONS_BEARER_OK, "abc.def.ghi");
    bearer("BeArEr x", LESSONS_BEARER_OK, "x");
    bearer("Bearer a-b_c.d~e+f/g==", LESSONS_BEARER_OK, "a-b_c.d~e+f/g==");
}

static void test_bearer_real_token(void **state)
{
    const char *t = lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, STD_CLAIMS);
    const char *tok = NULL;
    lessons_token_policy_t p = hs_policy(LESSONS_ALG_HS256);

    (void)state;
    assert_int_equal(lessons_bearer_parse(pool,
                                          apr_pstrcat(pool, "Bearer ", t,
                                                      NULL), &tok),
                     LESSONS_BEARER_OK);
    assert_string_equal(tok, t);
    verify(&p, tok, LESSONS_TOKEN_OK);
}

static void test_bearer_malformed(void **state)
{
    (void)state;
    bearer("Bearer", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer ", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer    ", LESSONS_BEARER_MALFORMED, NULL);
    bearer("bearer", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer a b", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer a,b", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer a, Bearer b", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer \"abc\"", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer ab!c", LESSONS_BEARER_MALFORMED, NULL);
}

/* RFC 9449's scheme, parsed as Bearer is; each scheme is the other's
 * "other scheme".
 */
static void test_dpop_scheme(void **state)
{
    const char *tok = SENTINEL;

    (void)state;
    assert_int_equal(lessons_auth_parse(pool, "DPoP abc.def.ghi", "DPoP",
                                        &tok), LESSONS_BEARER_OK);
    assert_string_equal(tok, "abc.def.ghi");
    assert_int_equal(lessons_auth_parse(pool, "dpop  abc.def.ghi ", "DPoP",
                                        &tok), LESSONS_BEARER_OK);
    assert_string_equal(tok, "abc.def.ghi");
    assert_int_equal(lessons_auth_parse(pool, "DPoP a b", "DPoP", &tok),
                     LESSONS_BEARER_MALFORMED);
    assert_int_equal(lessons_auth_parse(pool, "DPoP", "DPoP", &tok),
                     LESSONS_BEARER_MALFORMED);
    assert_int_equal(lessons_auth_parse(pool, "DPoPx abc", "DPoP", &tok),
                     LESSONS_BEARER_OTHER_SCHEME);
    assert_int_equal(lessons_auth_parse(pool, "Bearer abc", "DPoP", &tok),
                     LESSONS_BEARER_OTHER_SCHEME);
    assert_int_equal(lessons_bearer_parse(pool, "DPoP abc", &tok),
                     LESSONS_BEARER_OTHER_SCHEME);
}

static void test_bearer_token68_padding_only_at_end(void **state)
{
    (void)state;
    /* RFC 7235 2.1: token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~"
     * / "+" / "/" ) *"=": "=" only as trailing padding */
    bearer("Bearer abc==", LESSONS_BEARER_OK, "abc==");
    bearer("Bearer =abc", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer ==", LESSONS_BEARER_MALFORMED, NULL);
    bearer("Bearer a=b", LESSONS_BEARER_MALFORMED, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_hs256),
        cmocka_unit_test(test_pss),
        cmocka_unit_test(test_valid_hs384),
        cmocka_unit_test(test_valid_hs512),
        cmocka_unit_test(test_valid_rs256),
        cmocka_unit_test(test_valid_es256),
        cmocka_unit_test(test_valid_with_kid_header),
        cmocka_unit_test(test_subject_copied_into_pool),
        cmocka_unit_test(test_no_sub_ok_null_subject),
        cmocka_unit_test(test_sub_number_bad_claims),
        cmocka_unit_test(test_sub_object_bad_claims),
        cmocka_unit_test(test_sub_nul_refused),
        cmocka_unit_test(test_exp_missing),
        cmocka_unit_test(test_exp_string_bad_claims),
        cmocka_unit_test(test_exp_bool_bad_claims),
        cmocka_unit_test(test_expired),
        cmocka_unit_test(test_expired_at_exp),
        cmocka_unit_test(test_expired_within_leeway),
        cmocka_unit_test(test_nbf_future),
        cmocka_unit_test(test_nbf_past_or_now_ok),
        cmocka_unit_test(test_nbf_within_leeway),
        cmocka_unit_test(test_nbf_string_bad_claims),
        cmocka_unit_test(test_iss_aud),
        cmocka_unit_test(test_iss_and_aud_both_match),
        cmocka_unit_test(test_alg_none),
        cmocka_unit_test(test_alg_none_unsigned),
        cmocka_unit_test(test_alg_other_hmac),
        cmocka_unit_test(test_alg_lowercase),
        cmocka_unit_test(test_alg_not_a_string_or_unknown),
        cmocka_unit_test(test_alg_missing_rejected),
        cmocka_unit_test(test_alg_confusion),
        cmocka_unit_test(test_alg_confusion_es),
        cmocka_unit_test(test_key_decides_public_pem_never_hmac),
        cmocka_unit_test(test_key_decides_family_and_curve),
        cmocka_unit_test(test_key_decides_short_secret_and_no_key),
        cmocka_unit_test(test_typ),
        cmocka_unit_test(test_require_at_jwt_refuses_jwt),
        cmocka_unit_test(test_at_jwt),
        cmocka_unit_test(test_iat),
        cmocka_unit_test(test_rs_header_with_hmac_signature),
        cmocka_unit_test(test_wrong_hmac_key),
        cmocka_unit_test(test_wrong_rsa_key),
        cmocka_unit_test(test_wrong_ec_key),
        cmocka_unit_test(test_flipped_signature_hs),
        cmocka_unit_test(test_flipped_signature_rs),
        cmocka_unit_test(test_flipped_signature_es),
        cmocka_unit_test(test_tampered_payload),
        cmocka_unit_test(test_empty_signature_rejected),
        cmocka_unit_test(test_padding_appended_rs),
        cmocka_unit_test(test_bang_inserted_rs),
        cmocka_unit_test(test_alphabet_in_each_segment),
        cmocka_unit_test(test_segment_count),
        cmocka_unit_test(test_empty_segments),
        cmocka_unit_test(test_surrounding_space_malformed),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_header_not_object),
        cmocka_unit_test(test_header_not_base64_json),
        cmocka_unit_test(test_crit_header),
        cmocka_unit_test(test_payload_array),
        cmocka_unit_test(test_payload_not_json_rejected),
        cmocka_unit_test(test_length_limit),
        cmocka_unit_test(test_subject_untouched_on_failure),
        cmocka_unit_test(test_verify_claims_no_cache),
        cmocka_unit_test(test_pick_issuer),
        cmocka_unit_test(test_issuers_keys_never_cross),
        cmocka_unit_test(test_issuers_kids_never_cross),
        cmocka_unit_test(test_issuers_cache_apart),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_describe_failures_differ_from_ok),
        cmocka_unit_test(test_bearer_none),
        cmocka_unit_test(test_bearer_other_scheme),
        cmocka_unit_test(test_bearer_ok),
        cmocka_unit_test(test_bearer_real_token),
        cmocka_unit_test(test_bearer_malformed),
        cmocka_unit_test(test_bearer_token68_padding_only_at_end),
        cmocka_unit_test(test_dpop_scheme),
        cmocka_unit_test(test_set_kid_picks_its_key),
        cmocka_unit_test(test_set_without_kid_tries_fitting_keys),
        cmocka_unit_test(test_set_unknown_kid),
        cmocka_unit_test(test_set_other_issuer_before_kid),
        cmocka_unit_test(test_set_rsa_pem_as_hmac_secret),
        cmocka_unit_test(test_set_key_alg_and_policy_algs),
        cmocka_unit_test(test_set_misfit_and_bad_kid),
        cmocka_unit_test(test_set_change_drops_cached_tokens),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
