/* Licensed under the Apache License, Version 2.0.
 *
 * unit_jwt.h: what the token tests share to make keys and tokens by
 * hand: PEM text of a fresh key pair, base64url segments (apr's encoder,
 * unpadded), tokens signed by libjwt, and the names of lessons_token_e
 * for failure messages.
 * Header only, like unit_pool.h, whose pool it uses: include that and
 * lessons_token.h first.
 */
#ifndef UNIT_JWT_H
#define UNIT_JWT_H

#include <stdlib.h>
#include <string.h>

#include <jwt.h>
#include <openssl/bio.h>
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

/* A token made by libjwt: grants as JSON (or NULL), a kid in its header
 * (NULL: none) and more header members as JSON (NULL: none), signed
 * with alg and key.
 */
static inline char *lj_token_with(jwt_alg_t alg, const void *key,
                                  size_t keylen, const char *grants,
                                  const char *kid, const char *headers)
{
    jwt_t *jwt = NULL;
    char *s, *out;

    assert_int_equal(jwt_new(&jwt), 0);
    if (grants)
        assert_int_equal(jwt_add_grants_json(jwt, grants), 0);
    if (kid)
        assert_int_equal(jwt_add_header(jwt, "kid", kid), 0);
    if (headers)
        assert_int_equal(jwt_add_headers_json(jwt, headers), 0);
    assert_int_equal(jwt_set_alg(jwt, alg, key, (int)keylen), 0);
    s = jwt_encode_str(jwt);
    assert_non_null(s);
    out = apr_pstrdup(pool, s);
    free(s);
    jwt_free(jwt);
    return out;
}

static inline char *lj_token_kid(jwt_alg_t alg, const void *key,
                                 size_t keylen, const char *grants,
                                 const char *kid)
{
    return lj_token_with(alg, key, keylen, grants, kid, NULL);
}

/* The same without a kid. */
static inline char *lj_token(jwt_alg_t alg, const void *key, size_t keylen,
                             const char *grants)
{
    return lj_token_kid(alg, key, keylen, grants, NULL);
}

/* What a subject out-parameter holds before the call: it must change. */
#define SENTINEL ((const char *)"sentinel")

#endif /* UNIT_JWT_H */
