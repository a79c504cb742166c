/* Licensed under the Apache License, Version 2.0.
 *
 * test_jws.c: the signature check under lessons_token_verify and
 * lessons_token_verify_jws (cjose, behind our own length check): RFC
 * 7515 Appendix A's examples verify with their own keys and with no
 * other, and known-bad signatures are refused, each with the code its
 * refusal has: the wrong length for the algorithm, ECDSA r or s out of
 * [1, n-1], RSA signatures of the wrong length or value, another
 * algorithm's, and signatures past the token cap.  Our own tokens are
 * signed here with OpenSSL, so that each signature's bytes are known.
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
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>

#include "apr_encode.h"
#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"

#include "keys/lessons_keyset.h"
#include "auth/lessons_token.h"

#include "unit_pool.h"
#include "unit_jwt.h"

#define BIT(alg)  LESSONS_ALG_BIT(alg)

/* ------------------------------------------------------ RFC 7515 App. A */

/* The JWS Compact Serializations of A.1.1, A.2.1 and A.3.1 verbatim,
 * broken into lines where the RFC breaks them.  All three sign one
 * payload, {"iss":"joe",\r\n "exp":1300819380,\r\n
 * "http://example.com/is_root":true}; A.1's header is {"typ":"JWT",\r\n
 * "alg":"HS256"}, A.2's {"alg":"RS256"}, A.3's {"alg":"ES256"}.
 */
static const char a1_jws[] =
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9."
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
    "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
    "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";

static const char a2_jws[] =
    "eyJhbGciOiJSUzI1NiJ9."
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
    "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
    "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7"
    "AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4"
    "BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K"
    "0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqv"
    "hJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrB"
    "p0igcN_IoypGlUPQGe77Rw";

static const char a3_jws[] =
    "eyJhbGciOiJFUzI1NiJ9."
    "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFt"
    "cGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
    "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSA"
    "pmWQxfKTUJqPP3-Kg6NU1Q";

/* Their keys, as JWK sets: A.1's "k"; A.2's "n" and "e" and A.3's "crv",
 * "x" and "y" (the private members left out: a key set refuses them).
 */
static const char a1_jwks[] =
    "{\"keys\":[{\"kty\":\"oct\",\"k\":"
    "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0i"
    "PS4hcgUuTwjAzZr1Z9CAow\"}]}";

static const char a2_jwks[] =
    "{\"keys\":[{\"kty\":\"RSA\",\"n\":"
    "\"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp"
    "-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOW"
    "vG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUs"
    "LA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9k"
    "G4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2"
    "PAcDTW9gb54h4FRWyuXpoQ\",\"e\":\"AQAB\"}]}";

static const char a3_jwks[] =
    "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\","
    "\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\","
    "\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\"}]}";

/* Keys of the same types with other values: A.1's "k" with its first
 * character changed, A.2's "n" with one in its middle changed (still
 * 2048 bits, still odd).  A.3's other key is a generated P-256 one.
 */
static const char a1_other_jwks[] =
    "{\"keys\":[{\"kty\":\"oct\",\"k\":"
    "\"ByM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0i"
    "PS4hcgUuTwjAzZr1Z9CAow\"}]}";

static const char a2_other_jwks[] =
    "{\"keys\":[{\"kty\":\"RSA\",\"n\":"
    "\"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp"
    "-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOW"
    "vG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUs"
    "LA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9A"
    "G4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2"
    "PAcDTW9gb54h4FRWyuXpoQ\",\"e\":\"AQAB\"}]}";

/* The payload's exp, and a clock before it. */
#define RFC_EXP  ((apr_int64_t)1300819380)
#define RFC_NOW  (RFC_EXP - 60)

/* ------------------------------------------------------ our own tokens */

#define NOW     ((apr_int64_t)1700000000)
#define CLAIMS  "{\"sub\":\"alice\",\"exp\":1700003600}"

/* A 48-byte HMAC secret. */
static const unsigned char secret[] =
    "k3y-for-jws-unit-tests-only-0123456789abcdefghij";
#define SECRET_LEN (sizeof(secret) - 1)

/* The order n of P-256's base point (FIPS 186-4 D.1.2.3), compared with
 * OpenSSL's in group_setup.
 */
static const unsigned char p256_order[32] = {
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84,
    0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51
};

/* Generated keys, each also as a set of one key, and tokens signed
 * with them: HS256 (secret), RS256 (2048 bits), ES256 and ES384.
 */
static EVP_PKEY *rsa_key, *p256_key, *p384_key;
static const lessons_keyset_t *hs_set, *rsa_set, *p256_set, *p384_set;
static const char *hs_tok, *rs_tok, *es_tok, *es384_tok;

/* ------------------------------------------------------------- helpers */

/* A set made from a JWKS document, or fail. */
static const lessons_keyset_t *jwks(const char *json)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_parse_jwks(pool, json, strlen(json),
                                                &set);

    if (msg)
        print_error("JWKS refused: %s\n", msg);
    assert_null(msg);
    assert_non_null(set);
    assert_int_equal(set->nkeys, 1);
    return set;
}

/* A set made from a key file's bytes (a secret or a PEM public key). */
static const lessons_keyset_t *key_file(const void *data, size_t len)
{
    lessons_keyset_t *set = NULL;

    if (lessons_keyset_make(pool, data, len, &set) != NULL || !set)
        return NULL;
    return set;
}


/* lessons_token_verify_jws (typ JWT), compared with expect; returns the
 * payload (NULL unless OK, whatever *payload held before).
 */
static json_t *verify_jws(const char *jws, lessons_algs_t algs,
                          const lessons_jwk_t *key, lessons_token_e expect)
{
    json_t *before = json_object();
    json_t *payload = before;
    lessons_token_e r;

    r = lessons_token_verify_jws(pool, jws, "JWT", algs, key, &payload);
    json_decref(before);
    if (r != expect)
        print_error("lessons_token_verify_jws: expected %s, got %s\n",
                    result_name(expect), result_name(r));
    assert_int_equal(r, expect);
    if (r == LESSONS_TOKEN_OK)
        assert_non_null(payload);
    else
        assert_null(payload);
    return payload;
}

/* One of our tokens judged both ways in, with the set's one key and alg
 * alone: as an access token at NOW, and as a JWS of typ JWT.
 */
static void judge(const lessons_keyset_t *set, lessons_alg_t alg,
                  const char *token, lessons_token_e expect)
{
    lessons_token_policy_t pol = set_policy(set, BIT(alg));
    const char *subject = verify_at(&pol, token, NOW, expect);

    if (expect == LESSONS_TOKEN_OK) {
        assert_non_null(subject);
        assert_string_equal(subject, "alice");
    }
    verify_jws(token, BIT(alg), &set->keys[0], expect);
}

/* The decoded signature of a token; *len its bytes. */
static unsigned char *sig_of(const char *token, apr_size_t *len)
{
    const char *dot = strrchr(token, '.');
    const unsigned char *raw;
    unsigned char *copy;

    assert_non_null(dot);
    raw = apr_pdecode_base64_binary(pool, dot + 1, APR_ENCODE_STRING,
                                    APR_ENCODE_BASE64URL, len);
    assert_non_null(raw);
    /* room for the cases below to append to it */
    copy = apr_pcalloc(pool, *len + 8);
    memcpy(copy, raw, *len);
    return copy;
}

/* The token with its signature segment replaced by len bytes at sig,
 * base64url-encoded without padding.
 */
static const char *with_sig(const char *token, const void *sig,
                            apr_size_t len)
{
    const char *dot = strrchr(token, '.');

    assert_non_null(dot);
    return apr_pstrcat(pool,
                       apr_pstrmemdup(pool, token,
                                      (apr_size_t)(dot - token) + 1),
                       b64url(sig, len), NULL);
}

/* The token's header and payload with a signature segment of n 'A's. */
static const char *with_sig_chars(const char *token, apr_size_t n)
{
    const char *dot = strrchr(token, '.');
    apr_size_t head = (apr_size_t)(dot - token) + 1;
    char *s = apr_palloc(pool, head + n + 1);

    memcpy(s, token, head);
    memset(s + head, 'A', n);
    s[head + n] = '\0';
    return s;
}

/* The PEM text of a key's public half. */
static const char *public_pem(EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    const char *pem = NULL;

    if (b && PEM_write_bio_PUBKEY(b, k) == 1)
        pem = bio_text(b);
    BIO_free(b);
    return pem;
}

/* A set of the public half of k, or NULL. */
static const lessons_keyset_t *public_set(EVP_PKEY *k)
{
    const char *pem = k ? public_pem(k) : NULL;

    return pem ? key_file(pem, strlen(pem)) : NULL;
}

static int group_setup(void **state)
{
    EC_GROUP *g;
    unsigned char order[32];
    int same;

    (void)state;
    if (unit_pool_open() != 0)
        return -1;
    g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    same = g && BN_bn2binpad(EC_GROUP_get0_order(g), order, 32) == 32
           && memcmp(order, p256_order, 32) == 0;
    EC_GROUP_free(g);
    if (!same)
        return -1;
    rsa_key = EVP_RSA_gen(2048);
    p256_key = EVP_EC_gen("P-256");
    p384_key = EVP_EC_gen("P-384");
    hs_set = key_file(secret, SECRET_LEN);
    rsa_set = public_set(rsa_key);
    p256_set = public_set(p256_key);
    p384_set = public_set(p384_key);
    if (!hs_set || !rsa_set || !p256_set || !p384_set)
        return -1;
    return 0;
}

static int jws_teardown(void **state)
{
    EVP_PKEY_free(rsa_key);
    EVP_PKEY_free(p256_key);
    EVP_PKEY_free(p384_key);
    return group_teardown(state);
}

/* A token of CLAIMS with the header {"alg":alg,"typ":"JWT"}, signed as
 * RFC 7518 3 says: with key (NULL: an HMAC with secret) and md; width
 * not 0 for ECDSA, whose DER signature becomes r and s as width-byte
 * big-endian numbers (3.4).
 */
static const char *sign_token(const char *alg, EVP_PKEY *key,
                              const EVP_MD *md, int width)
{
    const char *input = apr_pstrcat(
        pool, b64s(apr_psprintf(pool, "{\"alg\":\"%s\",\"typ\":\"JWT\"}",
                                alg)),
        ".", b64s(CLAIMS), NULL);
    unsigned char der[1024], sig[1024];
    const unsigned char *d = der;
    size_t n = sizeof(der);
    unsigned int maclen = 0;
    EVP_MD_CTX *ctx;
    ECDSA_SIG *es;

    if (!key) {
        assert_non_null(HMAC(md, secret, (int)SECRET_LEN,
                             (const unsigned char *)input, strlen(input),
                             sig, &maclen));
        return apr_pstrcat(pool, input, ".", b64url(sig, maclen), NULL);
    }
    ctx = EVP_MD_CTX_new();
    assert_non_null(ctx);
    assert_int_equal(EVP_DigestSignInit(ctx, NULL, md, NULL, key), 1);
    assert_int_equal(EVP_DigestSign(ctx, der, &n,
                                    (const unsigned char *)input,
                                    strlen(input)), 1);
    EVP_MD_CTX_free(ctx);
    if (!width)
        return apr_pstrcat(pool, input, ".", b64url(der, n), NULL);
    es = d2i_ECDSA_SIG(NULL, &d, (long)n);
    assert_non_null(es);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, width), width);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + width, width),
                     width);
    ECDSA_SIG_free(es);
    return apr_pstrcat(pool, input, ".", b64url(sig, (size_t)width * 2),
                       NULL);
}

/* The tokens, made once, inside a test (sign_token asserts). */
static void make_tokens(void)
{
    if (hs_tok)
        return;
    hs_tok = sign_token("HS256", NULL, EVP_sha256(), 0);
    rs_tok = sign_token("RS256", rsa_key, EVP_sha256(), 0);
    es_tok = sign_token("ES256", p256_key, EVP_sha256(), 32);
    es384_tok = sign_token("ES384", p384_key, EVP_sha384(), 48);
}

/* ------------------------------------------------------- RFC 7515 tests */

/* A vector verifies with its key at RFC_NOW: no subject (the payload
 * has no sub), its three claims as signed; expired at exp; and a
 * policy that names "joe" as its issuer takes it too.
 */
static void rfc_verifies(const char *jws, const char *jwks_json,
                         lessons_alg_t alg)
{
    lessons_token_policy_t pol = set_policy(jwks(jwks_json), BIT(alg));
    const char *subject = SENTINEL;
    json_t *claims = NULL, *iss;

    assert_null(verify_at(&pol, jws, RFC_NOW, LESSONS_TOKEN_OK));
    assert_int_equal(lessons_token_verify_claims(pool, &pol, NULL, jws,
                                                 RFC_NOW, &subject, &claims),
                     LESSONS_TOKEN_OK);
    assert_null(subject);
    assert_non_null(claims);
    assert_int_equal(json_object_size(claims), 3);
    iss = json_object_get(claims, "iss");
    assert_true(json_is_string(iss));
    assert_string_equal(json_string_value(iss), "joe");
    assert_true(json_is_integer(json_object_get(claims, "exp")));
    assert_true(json_integer_value(json_object_get(claims, "exp"))
                == RFC_EXP);
    assert_true(json_is_true(json_object_get(claims,
                                             "http://example.com/is_root")));
    verify_at(&pol, jws, RFC_EXP, LESSONS_TOKEN_EXPIRED);
    pol.issuer = "joe";
    verify_at(&pol, jws, RFC_NOW, LESSONS_TOKEN_OK);
}

/* The vector with one character of its payload segment changed: the 'z'
 * that makes exp 1300819380 made a '5', which makes it 1900819380 (one
 * decoded byte; the payload is still a JSON object, so only the
 * signature can refuse it).
 */
static const char *tampered(const char *jws)
{
    char *t = apr_pstrdup(pool, jws);
    char *payload = strchr(t, '.') + 1;

    assert_int_equal(payload[31], 'z');
    payload[31] = '5';
    return t;
}

static void rfc_refused(const char *jws, const lessons_keyset_t *set,
                        const lessons_keyset_t *other, lessons_alg_t alg)
{
    lessons_token_policy_t pol = set_policy(set, BIT(alg));

    verify_at(&pol, tampered(jws), RFC_NOW, LESSONS_TOKEN_BAD_SIGNATURE);
    pol.keys = other;
    verify_at(&pol, jws, RFC_NOW, LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_rfc7515_a1_hs256(void **state)
{
    json_t *payload;

    (void)state;
    rfc_verifies(a1_jws, a1_jwks, LESSONS_ALG_HS256);
    rfc_refused(a1_jws, jwks(a1_jwks), jwks(a1_other_jwks),
                LESSONS_ALG_HS256);
    /* Its header has "typ": "JWT" (after a CRLF), so it is a JWS of that
     * type as well.
     */
    payload = verify_jws(a1_jws, BIT(LESSONS_ALG_HS256),
                         &jwks(a1_jwks)->keys[0], LESSONS_TOKEN_OK);
    assert_string_equal(json_string_value(json_object_get(payload, "iss")),
                        "joe");
    verify_jws(tampered(a1_jws), BIT(LESSONS_ALG_HS256),
               &jwks(a1_jwks)->keys[0], LESSONS_TOKEN_BAD_SIGNATURE);
    verify_jws(a1_jws, BIT(LESSONS_ALG_HS256), &jwks(a1_other_jwks)->keys[0],
               LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_rfc7515_a2_rs256(void **state)
{
    (void)state;
    rfc_verifies(a2_jws, a2_jwks, LESSONS_ALG_RS256);
    rfc_refused(a2_jws, jwks(a2_jwks), jwks(a2_other_jwks), LESSONS_ALG_RS256);
    rfc_refused(a2_jws, jwks(a2_jwks), rsa_set, LESSONS_ALG_RS256);
    /* No "typ" in its header: as a JWS of typ JWT it is refused before
     * any key is tried.
     */
    verify_jws(a2_jws, BIT(LESSONS_ALG_RS256), &jwks(a2_jwks)->keys[0],
               LESSONS_TOKEN_BAD_TYPE);
}

static void test_rfc7515_a3_es256(void **state)
{
    (void)state;
    rfc_verifies(a3_jws, a3_jwks, LESSONS_ALG_ES256);
    rfc_refused(a3_jws, jwks(a3_jwks), p256_set, LESSONS_ALG_ES256);
    verify_jws(a3_jws, BIT(LESSONS_ALG_ES256), &jwks(a3_jwks)->keys[0],
               LESSONS_TOKEN_BAD_TYPE);
}

/* The JWK of a one-key set's document: its "keys" array's member. */
static const char *jwk_of(const char *jwks_json)
{
    apr_size_t skip = strlen("{\"keys\":[");

    return apr_pstrmemdup(pool, jwks_json + skip,
                          strlen(jwks_json) - skip - strlen("]}"));
}

/* A.2's and A.3's keys in one set: a token without a kid is tried with
 * the key that allows its algorithm, and an algorithm the policy does
 * not accept is refused at the header, though a key of the set would
 * verify it.
 */
static void test_rfc7515_two_keys(void **state)
{
    const char *both = apr_pstrcat(pool, "{\"keys\":[", jwk_of(a2_jwks), ",",
                                   jwk_of(a3_jwks), "]}", NULL);
    lessons_keyset_t *set = NULL;
    lessons_token_policy_t pol;

    (void)state;
    assert_null(lessons_keyset_parse_jwks(pool, both, strlen(both), &set));
    assert_non_null(set);
    assert_int_equal(set->nkeys, 2);
    pol = set_policy(set, BIT(LESSONS_ALG_RS256) | BIT(LESSONS_ALG_ES256));
    verify_at(&pol, a2_jws, RFC_NOW, LESSONS_TOKEN_OK);
    verify_at(&pol, a3_jws, RFC_NOW, LESSONS_TOKEN_OK);
    verify_at(&pol, a1_jws, RFC_NOW, LESSONS_TOKEN_BAD_ALG);
    pol.algs = BIT(LESSONS_ALG_RS256);
    verify_at(&pol, a2_jws, RFC_NOW, LESSONS_TOKEN_OK);
    verify_at(&pol, a3_jws, RFC_NOW, LESSONS_TOKEN_BAD_ALG);
}

/* ------------------------------------------------- known-bad signatures */

/* Every signature below is of a token that verifies as made (checked
 * first), with its signature bytes replaced.  lessons_signature_check
 * refuses any signature that is not exactly lessons_key_sig_len bytes
 * before cjose sees it; the rest are cjose's (OpenSSL's) to refuse.
 */

/* One token, one spelling: a segment whose last character carries bits
 * past its bytes (RFC 4648 3.5) decodes to the same bytes, so it would
 * verify as another token (another cache entry, another DPoP replay key).
 * Only the canonical spelling is taken.
 */
static void test_one_spelling(void **state)
{
    lessons_token_policy_t pol = set_policy(jwks(a1_jwks),
                                            BIT(LESSONS_ALG_HS256));
    char *t = apr_pstrdup(pool, a1_jws);
    size_t n = strlen(t);
    char *pay_end = strrchr(t, '.') - 1;
    const char *c;

    (void)state;
    verify_at(&pol, t, RFC_NOW, LESSONS_TOKEN_OK);
    /* The signature's 43 characters end in 'k' (0b100100): 'l', 'm' and
     * 'n' spell the same 32 bytes.
     */
    assert_int_equal(t[n - 1], 'k');
    for (c = "lmn"; *c; c++) {
        t[n - 1] = *c;
        verify_at(&pol, t, RFC_NOW, LESSONS_TOKEN_MALFORMED);
    }
    t[n - 1] = 'k';
    /* The payload's last character 'Q' (0b010000) ends a 4k + 2 group:
     * 'R' spells the same bytes.
     */
    assert_int_equal(*pay_end, 'Q');
    *pay_end = 'R';
    verify_at(&pol, t, RFC_NOW, LESSONS_TOKEN_MALFORMED);
    *pay_end = 'Q';
    verify_at(&pol, t, RFC_NOW, LESSONS_TOKEN_OK);
}

static void test_hs256_signature_lengths(void **state)
{
    apr_size_t n;
    unsigned char *sig;

    (void)state;
    make_tokens();
    judge(hs_set, LESSONS_ALG_HS256, hs_tok, LESSONS_TOKEN_OK);
    sig = sig_of(hs_tok, &n);
    assert_int_equal(n, 32);
    /* 31 bytes (the last dropped): our length check.  cjose alone
     * compares 32 bytes of a 31-byte signature (one byte it never
     * decoded) before it looks at the length, and refuses it then.
     */
    judge(hs_set, LESSONS_ALG_HS256, with_sig(hs_tok, sig, 31),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* 33 bytes (the right 32 and one more): our length check; cjose
     * alone refuses it too, after comparing the first 32.
     */
    sig[32] = 0x00;
    judge(hs_set, LESSONS_ALG_HS256, with_sig(hs_tok, sig, 33),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* One byte: our length check.  cjose alone would compare 32 bytes
     * here too, reading past the end of the buffer it decoded into.
     */
    judge(hs_set, LESSONS_ALG_HS256, with_sig(hs_tok, sig, 1),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* A segment of 45 characters (the right 43 and "AA") encodes no
     * byte string at all (4k+1 characters): cjose_jws_import refuses
     * it, so it is MALFORMED, before any key.
     */
    judge(hs_set, LESSONS_ALG_HS256, apr_pstrcat(pool, hs_tok, "AA", NULL),
          LESSONS_TOKEN_MALFORMED);
}

/* ES256 signatures of the wrong length.  cjose splits whatever it gets
 * into two halves and reads each as a number, so a signature whose
 * halves still hold the right r and s verifies there at any length:
 * only our length check refuses them.
 */
static void test_es256_signature_lengths(void **state)
{
    unsigned char buf[160];
    apr_size_t n;
    unsigned char *sig;

    (void)state;
    make_tokens();
    judge(p256_set, LESSONS_ALG_ES256, es_tok, LESSONS_TOKEN_OK);
    sig = sig_of(es_tok, &n);
    assert_int_equal(n, 64);
    /* 63 bytes (the last dropped). */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, sig, 63),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* 65 bytes: the right 64 and one more.  cjose takes halves of 32
     * (65 / 2) and never reads the last byte: it alone accepts this.
     */
    memcpy(buf, sig, 64);
    buf[64] = 0x00;
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 65),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* 66 bytes: 0x00 r 0x00 s, the very same numbers; cjose alone
     * accepts this too.
     */
    memset(buf, 0, sizeof(buf));
    memcpy(buf + 1, sig, 32);
    memcpy(buf + 34, sig + 32, 32);
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 66),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* 128 bytes: r and s each padded to 64 with zeros; the same. */
    memset(buf, 0, sizeof(buf));
    memcpy(buf + 32, sig, 32);
    memcpy(buf + 96, sig + 32, 32);
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 128),
          LESSONS_TOKEN_BAD_SIGNATURE);
}

/* ES256 signatures of the right length whose r or s is out of [1, n-1]
 * (RFC 7518 3.4, FIPS 186-4 6.4): our length check lets them by, and
 * cjose (OpenSSL's ECDSA_do_verify) refuses them.
 */
static void test_es256_r_s_out_of_range(void **state)
{
    unsigned char buf[64];
    apr_size_t n;
    unsigned char *sig;

    (void)state;
    make_tokens();
    sig = sig_of(es_tok, &n);
    assert_int_equal(n, 64);

    memcpy(buf, sig, 64);
    memset(buf, 0, 32);                         /* r = 0 */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);

    memcpy(buf, sig, 64);
    memset(buf + 32, 0, 32);                    /* s = 0 */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);

    memset(buf, 0, 64);                         /* r = s = 0 */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);

    memcpy(buf, sig, 64);
    memcpy(buf, p256_order, 32);                /* r = n */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);

    memcpy(buf, sig, 64);
    memcpy(buf + 32, p256_order, 32);           /* s = n */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);

    memcpy(buf, sig, 64);
    memcpy(buf, p256_order, 32);
    buf[31]++;                                  /* r = n + 1 (no carry:
                                                 * n ends in 0x51) */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);

    memcpy(buf, sig, 64);
    memset(buf, 0xff, 32);                      /* r = 2^256 - 1 > n */
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, buf, 64),
          LESSONS_TOKEN_BAD_SIGNATURE);
}

/* RS256 signatures: one byte short (our length check; OpenSSL's
 * RSA_verify also insists on the modulus's length), and of the
 * modulus's length but all zeros (0^e is no PKCS #1 v1.5 block) or all
 * 0xFF (more than the modulus): cjose (OpenSSL) refuses those.
 */
static void test_rs256_bad_signatures(void **state)
{
    lessons_token_policy_t pol = set_policy(jwks(a2_jwks),
                                            BIT(LESSONS_ALG_RS256));
    unsigned char buf[256];
    apr_size_t n;
    unsigned char *sig;

    (void)state;
    make_tokens();
    judge(rsa_set, LESSONS_ALG_RS256, rs_tok, LESSONS_TOKEN_OK);
    sig = sig_of(rs_tok, &n);
    assert_int_equal(n, 256);
    judge(rsa_set, LESSONS_ALG_RS256, with_sig(rs_tok, sig, 255),
          LESSONS_TOKEN_BAD_SIGNATURE);
    memset(buf, 0x00, sizeof(buf));
    judge(rsa_set, LESSONS_ALG_RS256, with_sig(rs_tok, buf, 256),
          LESSONS_TOKEN_BAD_SIGNATURE);
    memset(buf, 0xff, sizeof(buf));
    judge(rsa_set, LESSONS_ALG_RS256, with_sig(rs_tok, buf, 256),
          LESSONS_TOKEN_BAD_SIGNATURE);
    /* The A.2 vector's own signature one byte short, with its key. */
    sig = sig_of(a2_jws, &n);
    assert_int_equal(n, 256);
    verify_at(&pol, with_sig(a2_jws, sig, 255), RFC_NOW,
              LESSONS_TOKEN_BAD_SIGNATURE);
}

/* An ES384 token for a key that is P-256's: its header names an
 * algorithm that key does not allow, so it is BAD_ALG whether or not the
 * policy accepts ES384 (no key of the set may try it), and as a JWS.
 * ES384's signature under an ES256 header is 96 bytes where 64 belong:
 * BAD_SIGNATURE, by our length check.
 */
static void test_es384_for_es256_key(void **state)
{
    lessons_token_policy_t pol = set_policy(p256_set, BIT(LESSONS_ALG_ES256));
    apr_size_t n;
    unsigned char *sig;

    (void)state;
    make_tokens();
    judge(p384_set, LESSONS_ALG_ES384, es384_tok, LESSONS_TOKEN_OK);
    /* The policy does not accept ES384: the header is refused. */
    verify_at(&pol, es384_tok, NOW, LESSONS_TOKEN_BAD_ALG);
    /* It does, but its one key allows ES256 alone: no key to try. */
    pol.algs |= BIT(LESSONS_ALG_ES384);
    verify_at(&pol, es384_tok, NOW, LESSONS_TOKEN_BAD_ALG);
    verify_jws(es384_tok, BIT(LESSONS_ALG_ES256) | BIT(LESSONS_ALG_ES384),
               &p256_set->keys[0], LESSONS_TOKEN_BAD_ALG);
    /* And the other way round: an ES256 token for the P-384 key. */
    pol = set_policy(p384_set,
                     BIT(LESSONS_ALG_ES256) | BIT(LESSONS_ALG_ES384));
    verify_at(&pol, es_tok, NOW, LESSONS_TOKEN_BAD_ALG);

    sig = sig_of(es384_tok, &n);
    assert_int_equal(n, 96);
    judge(p256_set, LESSONS_ALG_ES256, with_sig(es_tok, sig, 96),
          LESSONS_TOKEN_BAD_SIGNATURE);
}

/* ------------------------------------------------------------ the cap */

/* A signature segment longer than the token cap makes the token longer
 * than it: MALFORMED, before any decoding.  Just under the cap the token
 * is decoded and its signature (thousands of bytes) refused by our
 * length check, for each kind of key.
 */
static void test_signature_past_cap(void **state)
{
    const char *toks[3];
    const lessons_keyset_t *sets[3];
    lessons_alg_t algs[3] = { LESSONS_ALG_HS256, LESSONS_ALG_RS256,
                              LESSONS_ALG_ES256 };
    const char *t;
    apr_size_t head, n;
    int i;

    (void)state;
    make_tokens();
    toks[0] = hs_tok;
    toks[1] = rs_tok;
    toks[2] = es_tok;
    sets[0] = hs_set;
    sets[1] = rsa_set;
    sets[2] = p256_set;
    for (i = 0; i < 3; i++) {
        head = (apr_size_t)(strrchr(toks[i], '.') - toks[i]) + 1;

        /* The segment alone past the cap. */
        t = with_sig_chars(toks[i], LESSONS_TOKEN_MAX_LEN + 4);
        judge(sets[i], algs[i], t, LESSONS_TOKEN_MALFORMED);
        /* The whole token one past the cap. */
        t = with_sig_chars(toks[i], LESSONS_TOKEN_MAX_LEN - head + 1);
        assert_int_equal(strlen(t), LESSONS_TOKEN_MAX_LEN + 1);
        judge(sets[i], algs[i], t, LESSONS_TOKEN_MALFORMED);
        /* At the cap (or one under, where the cap's length would be
         * 4k+1 characters, which encode nothing).
         */
        n = LESSONS_TOKEN_MAX_LEN - head;
        if (n % 4 == 1)
            n--;
        t = with_sig_chars(toks[i], n);
        assert_true(strlen(t) <= LESSONS_TOKEN_MAX_LEN);
        judge(sets[i], algs[i], t, LESSONS_TOKEN_BAD_SIGNATURE);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc7515_a1_hs256),
        cmocka_unit_test(test_rfc7515_a2_rs256),
        cmocka_unit_test(test_rfc7515_a3_es256),
        cmocka_unit_test(test_rfc7515_two_keys),
        cmocka_unit_test(test_one_spelling),
        cmocka_unit_test(test_hs256_signature_lengths),
        cmocka_unit_test(test_es256_signature_lengths),
        cmocka_unit_test(test_es256_r_s_out_of_range),
        cmocka_unit_test(test_rs256_bad_signatures),
        cmocka_unit_test(test_es384_for_es256_key),
        cmocka_unit_test(test_signature_past_cap),
    };

    return cmocka_run_group_tests(tests, group_setup, jws_teardown);
}
