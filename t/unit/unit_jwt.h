/* Licensed under the Apache License, Version 2.0.
 *
 * unit_jwt.h: what the token tests share to make keys and tokens by
 * hand: PEM text of a fresh key pair, base64url segments (apr's encoder,
 * unpadded), tokens signed by cjose (the library the module verifies
 * with, but through its signing half), and the names of lessons_token_e
 * for failure messages.
 * Header only, like unit_pool.h, whose pool it uses: include that and
 * lessons_token.h first.
 */
#ifndef UNIT_JWT_H
#define UNIT_JWT_H

#include <stdlib.h>
#include <string.h>

#include <cjose/jwk.h>
#include <cjose/jws.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "apr_encode.h"
#include "apr_strings.h"

static inline const char *bio_text(BIO *bio)
{
    char *data = NULL;
    long n = BIO_get_mem_data(bio, &data);

    return apr_pstrmemdup(pool, data, (apr_size_t)n);
}

/* The public and private PEM of k (either may be NULL: not wanted);
 * frees k.  0 on success.
 */
static inline int make_keypair(EVP_PKEY *k, const char **pub,
                               const char **priv)
{
    BIO *b1 = BIO_new(BIO_s_mem()), *b2 = BIO_new(BIO_s_mem());
    int ok = k && b1 && b2
             && PEM_write_bio_PUBKEY(b1, k) == 1
             && PEM_write_bio_PrivateKey(b2, k, NULL, NULL, 0, NULL,
                                         NULL) == 1;

    if (ok) {
        if (pub)
            *pub = bio_text(b1);
        if (priv)
            *priv = bio_text(b2);
    }
    BIO_free(b1);
    BIO_free(b2);
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

static inline char *b64url(const void *data, size_t len)
{
    return (char *)apr_pencode_base64_binary(pool, data, (apr_ssize_t)len,
        APR_ENCODE_BASE64URL | APR_ENCODE_NOPADDING, NULL);
}

static inline char *b64s(const char *s)
{
    return b64url(s, strlen(s));
}

static inline const char *result_name(lessons_token_e r)
{
    static const char *const names[] = {
        "OK", "MALFORMED", "BAD_ALG", "CRIT", "BAD_SIGNATURE", "BAD_CLAIMS",
        "NO_EXP", "EXPIRED", "NOT_YET_VALID", "BAD_ISSUER", "BAD_AUDIENCE",
        "KEY_MISFIT", "BAD_TYPE", "NOT_AT_JWT", "AT_CLAIMS", "BAD_IAT",
        "UNKNOWN_KID", "UNKNOWN_ISSUER"
    };

    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

/* A number of pkey (OSSL_PKEY_PARAM_*), big-endian in the pool: width
 * bytes, or as many as it has (width 0).
 */
static inline uint8_t *uj_number(EVP_PKEY *pkey, const char *name,
                                 int width, size_t *len)
{
    BIGNUM *bn = NULL;
    uint8_t *out;
    int n;

    assert_true(EVP_PKEY_get_bn_param(pkey, name, &bn));
    n = width ? width : BN_num_bytes(bn);
    out = apr_palloc(pool, (apr_size_t)n);
    assert_int_equal(BN_bn2binpad(bn, out, n), n);
    BN_free(bn);
    *len = (size_t)n;
    return out;
}

/* The key a test signs with as cjose's JWK: the bytes themselves for
 * HS* (whatever they are: the confusion tests key HMAC with PEM text),
 * else the private key of a PEM (RSA or EC), every private member.
 */
static inline cjose_jwk_t *uj_signing_jwk(lessons_alg_t alg, const void *key,
                                          size_t keylen)
{
    cjose_jwk_t *jwk = NULL;
    cjose_err err;
    EVP_PKEY *pkey;
    BIO *bio;

    memset(&err, 0, sizeof(err));
    if (alg == LESSONS_ALG_HS256 || alg == LESSONS_ALG_HS384
        || alg == LESSONS_ALG_HS512) {
        jwk = cjose_jwk_create_oct_spec(key, keylen, &err);
        if (!jwk)
            print_error("cjose oct key: %s\n", err.message);
        assert_non_null(jwk);
        return jwk;
    }
    bio = BIO_new_mem_buf(key, (int)keylen);
    assert_non_null(bio);
    pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    assert_non_null(pkey);
    if (EVP_PKEY_is_a(pkey, "RSA")) {
        cjose_jwk_rsa_keyspec rsa;

        memset(&rsa, 0, sizeof(rsa));
        rsa.n = uj_number(pkey, OSSL_PKEY_PARAM_RSA_N, 0, &rsa.nlen);
        rsa.e = uj_number(pkey, OSSL_PKEY_PARAM_RSA_E, 0, &rsa.elen);
        rsa.d = uj_number(pkey, OSSL_PKEY_PARAM_RSA_D, 0, &rsa.dlen);
        rsa.p = uj_number(pkey, OSSL_PKEY_PARAM_RSA_FACTOR1, 0, &rsa.plen);
        rsa.q = uj_number(pkey, OSSL_PKEY_PARAM_RSA_FACTOR2, 0, &rsa.qlen);
        rsa.dp = uj_number(pkey, OSSL_PKEY_PARAM_RSA_EXPONENT1, 0,
                           &rsa.dplen);
        rsa.dq = uj_number(pkey, OSSL_PKEY_PARAM_RSA_EXPONENT2, 0,
                           &rsa.dqlen);
        rsa.qi = uj_number(pkey, OSSL_PKEY_PARAM_RSA_COEFFICIENT1, 0,
                           &rsa.qilen);
        jwk = cjose_jwk_create_RSA_spec(&rsa, &err);
    }
    else if (EVP_PKEY_is_a(pkey, "EC")) {
        cjose_jwk_ec_keyspec ec;
        int bits = EVP_PKEY_get_bits(pkey), width = (bits + 7) / 8;

        memset(&ec, 0, sizeof(ec));
        ec.crv = bits == 256 ? CJOSE_JWK_EC_P_256
                 : bits == 384 ? CJOSE_JWK_EC_P_384 : CJOSE_JWK_EC_P_521;
        ec.d = uj_number(pkey, OSSL_PKEY_PARAM_PRIV_KEY, width, &ec.dlen);
        ec.x = uj_number(pkey, OSSL_PKEY_PARAM_EC_PUB_X, width, &ec.xlen);
        ec.y = uj_number(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, width, &ec.ylen);
        jwk = cjose_jwk_create_EC_spec(&ec, &err);
    }
    EVP_PKEY_free(pkey);
    if (!jwk)
        print_error("cjose private key: %s\n",
                    err.message ? err.message : "not RSA or EC");
    assert_non_null(jwk);
    return jwk;
}

/* A token signed by cjose: grants as JSON (or NULL: {}), a kid in its
 * header (NULL: none) and more header members as JSON (NULL: none),
 * signed with alg and key (the secret's bytes for HS*, else a private
 * PEM).  As libjwt made them: "typ": "JWT" unless headers name another,
 * "alg" always alg's own, JSON compact with sorted keys.
 */
static inline char *lj_token_with(lessons_alg_t alg, const void *key,
                                  size_t keylen, const char *grants,
                                  const char *kid, const char *headers)
{
    cjose_jwk_t *jwk = uj_signing_jwk(alg, key, keylen);
    json_t *hdr = json_object(), *claims, *more;
    cjose_jws_t *jws;
    const char *ser = NULL;
    char *payload, *out;
    cjose_err err;

    memset(&err, 0, sizeof(err));
    assert_non_null(hdr);
    assert_int_equal(json_object_set_new(hdr, "typ", json_string("JWT")), 0);
    if (kid)
        assert_int_equal(json_object_set_new(hdr, "kid", json_string(kid)),
                         0);
    if (headers) {
        more = json_loads(headers, 0, NULL);
        assert_true(json_is_object(more));
        assert_int_equal(json_object_update(hdr, more), 0);
        json_decref(more);
    }
    assert_int_equal(json_object_set_new(hdr, "alg",
                                         json_string(lessons_alg_name(alg))),
                     0);
    claims = json_loads(grants ? grants : "{}", 0, NULL);
    assert_true(json_is_object(claims));
    payload = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(payload);
    json_decref(claims);

    jws = cjose_jws_sign(jwk, hdr, (const uint8_t *)payload,
                         strlen(payload), &err);
    if (!jws)
        print_error("cjose_jws_sign %s: %s\n", lessons_alg_name(alg),
                    err.message ? err.message : "?");
    assert_non_null(jws);
    assert_true(cjose_jws_export(jws, &ser, &err));
    out = apr_pstrdup(pool, ser);
    cjose_jws_release(jws);
    cjose_jwk_release(jwk);
    json_decref(hdr);
    free(payload);
    return out;
}

static inline char *lj_token_kid(lessons_alg_t alg, const void *key,
                                 size_t keylen, const char *grants,
                                 const char *kid)
{
    return lj_token_with(alg, key, keylen, grants, kid, NULL);
}

/* The same without a kid. */
static inline char *lj_token(lessons_alg_t alg, const void *key,
                             size_t keylen, const char *grants)
{
    return lj_token_kid(alg, key, keylen, grants, NULL);
}

/* Premise check: cjose alone (the module's verifier, without any of the
 * module's own checks) accepts this token with this key, taken as the
 * token's alg says, as libjwt took any key: the bytes as an HMAC secret
 * for HS* (whatever they are), else a public PEM.  What the module
 * refuses on top of that is the module's doing.
 */
static inline void cjose_accepts(const char *token, const void *key,
                                 size_t len)
{
    lessons_key_t *k = NULL;
    cjose_jwk_t *jwk = NULL;
    cjose_jws_t *jws;
    cjose_err err;
    const char *alg;
    bool ok;

    memset(&err, 0, sizeof(err));
    jws = cjose_jws_import(token, strlen(token), &err);
    if (!jws)
        print_error("cjose_jws_import: %s\n", err.message);
    assert_non_null(jws);
    alg = json_string_value(json_object_get(
              cjose_jws_get_protected(jws), "alg"));
    assert_non_null(alg);
    if (alg[0] == 'H' || alg[0] == 'h') {
        jwk = cjose_jwk_create_oct_spec(key, len, &err);
        assert_non_null(jwk);
    }
    else {
        assert_null(lessons_key_make(pool, key, len, &k));
        assert_non_null(k);
        assert_non_null(k->jwk);
    }
    ok = cjose_jws_verify(jws, jwk ? jwk : k->jwk, &err);
    if (!ok)
        print_error("cjose_jws_verify: %s\n", err.message);
    assert_true(ok);
    cjose_jws_release(jws);
    if (jwk)
        cjose_jwk_release(jwk);
}

/* A policy of one key set and its algorithms; no issuer, audience or
 * leeway.
 */
static inline lessons_token_policy_t set_policy(const lessons_keyset_t *set,
                                                lessons_algs_t algs)
{
    lessons_token_policy_t p;

    memset(&p, 0, sizeof(p));
    p.keys = set;
    p.algs = algs;
    return p;
}

/* What a subject out-parameter holds before the call: it must change. */
#define SENTINEL ((const char *)"sentinel")

/* lessons_token_verify at now, compared with expect; returns the
 * subject, which a refusal leaves NULL.
 */
static inline const char *verify_at(const lessons_token_policy_t *p,
                                    const char *token, apr_int64_t now,
                                    lessons_token_e expect)
{
    const char *subject = SENTINEL;
    lessons_token_e r = lessons_token_verify(pool, p, token, now, &subject);

    if (r != expect)
        print_error("lessons_token_verify: expected %s, got %s\n",
                    result_name(expect), result_name(r));
    assert_int_equal(r, expect);
    if (r != LESSONS_TOKEN_OK)
        assert_null(subject);
    return subject;
}

/* A fresh P-256 key: its private PEM, to sign proofs with, and its
 * public JWK as JSON text.
 */
typedef struct {
    const char *priv;
    const char *jwk;
} uj_ec_key_t;

static inline const char *uj_bn_b64(const BIGNUM *bn, int size)
{
    unsigned char buf[66];

    assert_true(size <= (int)sizeof(buf));
    assert_int_equal(BN_bn2binpad(bn, buf, size), size);
    return b64url(buf, (size_t)size);
}

static inline uj_ec_key_t uj_ec_p256(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    BIGNUM *x = NULL, *y = NULL;
    uj_ec_key_t out = { NULL, NULL };

    assert_non_null(k);
    assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, &x),
                     1);
    assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, &y),
                     1);
    out.jwk = apr_psprintf(pool, "{\"kty\":\"EC\",\"crv\":\"P-256\","
                           "\"x\":\"%s\",\"y\":\"%s\"}", uj_bn_b64(x, 32),
                           uj_bn_b64(y, 32));
    BN_free(x);
    BN_free(y);
    assert_int_equal(make_keypair(k, NULL, &out.priv), 0);
    return out;
}

#endif /* UNIT_JWT_H */
