/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_key.c: algorithm names and key checks, run at start-up only.
 * OpenSSL is used to inspect public keys because libjwt 1.10 reports a
 * bad key and a bad signature the same way (EINVAL), so it cannot tell
 * an admin that the key file is wrong.
 */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/core_names.h>

#include "apr_file_io.h"
#include "apr_strings.h"

#include "lessons_key.h"

#define LESSONS_KEY_FILE_MAX  (64 * 1024)

/* Read-only table: the algorithms we accept and what key each needs. */
static const struct {
    const char *name;
    jwt_alg_t alg;
    const char *curve;          /* ES*: OpenSSL group name */
} lessons_algs[] = {
    { "HS256", JWT_ALG_HS256, NULL },
    { "HS384", JWT_ALG_HS384, NULL },
    { "HS512", JWT_ALG_HS512, NULL },
    { "RS256", JWT_ALG_RS256, NULL },
    { "RS384", JWT_ALG_RS384, NULL },
    { "RS512", JWT_ALG_RS512, NULL },
    { "ES256", JWT_ALG_ES256, "prime256v1" },
    { "ES384", JWT_ALG_ES384, "secp384r1" },
    { "ES512", JWT_ALG_ES512, "secp521r1" },
};

#define LESSONS_NALGS (sizeof(lessons_algs) / sizeof(lessons_algs[0]))

jwt_alg_t lessons_alg_parse(const char *name)
{
    size_t i;

    for (i = 0; name && i < LESSONS_NALGS; i++) {
        if (strcmp(name, lessons_algs[i].name) == 0) {
            return lessons_algs[i].alg;
        }
    }
    return JWT_ALG_INVAL;
}

const char *lessons_key_read(apr_pool_t *p, const char *path,
                             const unsigned char **key, apr_size_t *len)
{
    apr_file_t *f;
    apr_finfo_t fi;
    apr_status_t rv;
    apr_size_t n;
    char *buf;
    char err[128];

    rv = apr_file_open(&f, path, APR_FOPEN_READ | APR_FOPEN_BINARY,
                       APR_OS_DEFAULT, p);
    if (rv != APR_SUCCESS) {
        return apr_psprintf(p, "cannot open key file %s: %s", path,
                            apr_strerror(rv, err, sizeof(err)));
    }
    rv = apr_file_info_get(&fi, APR_FINFO_SIZE | APR_FINFO_TYPE, f);
    if (rv != APR_SUCCESS || fi.filetype != APR_REG) {
        apr_file_close(f);
        return apr_psprintf(p, "key file %s is not a regular file", path);
    }
    if (fi.size <= 0 || fi.size > LESSONS_KEY_FILE_MAX) {
        apr_file_close(f);
        return apr_psprintf(p, "key file %s is empty or larger than %d "
                            "bytes", path, LESSONS_KEY_FILE_MAX);
    }
    n = (apr_size_t)fi.size;
    buf = apr_palloc(p, n + 1);
    rv = apr_file_read_full(f, buf, n, &n);
    apr_file_close(f);
    if (rv != APR_SUCCESS) {
        return apr_psprintf(p, "cannot read key file %s: %s", path,
                            apr_strerror(rv, err, sizeof(err)));
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        n--;
    }
    if (n == 0) {
        return apr_psprintf(p, "key file %s holds no key", path);
    }
    buf[n] = '\0';
    *key = (const unsigned char *)buf;
    *len = n;
    return NULL;
}

static int lessons_key_is_pem(const unsigned char *key, apr_size_t len)
{
    static const char marker[] = "-----BEGIN";
    apr_size_t m = sizeof(marker) - 1;
    apr_size_t i;

    for (i = 0; i + m <= len; i++) {
        if (memcmp(key + i, marker, m) == 0) {
            return 1;
        }
    }
    return 0;
}

static const char *lessons_key_check_public(apr_pool_t *p, size_t idx,
                                            const unsigned char *key,
                                            apr_size_t len)
{
    const char *name = lessons_algs[idx].name;
    const char *msg = NULL;
    BIO *bio;
    EVP_PKEY *pkey;
    char group[64];
    size_t glen = 0;

    if (len > (apr_size_t)LESSONS_KEY_FILE_MAX) {
        return "key too large";
    }
    bio = BIO_new_mem_buf(key, (int)len);
    if (!bio) {
        return "out of memory reading the key";
    }
    pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (!pkey) {
        return apr_psprintf(p, "%s needs a PEM public key "
                            "(\"-----BEGIN PUBLIC KEY-----\"); this is not "
                            "one", name);
    }
    if (!lessons_algs[idx].curve) {
        if (!EVP_PKEY_is_a(pkey, "RSA")) {
            msg = apr_psprintf(p, "%s needs an RSA public key", name);
        }
        else if (EVP_PKEY_get_bits(pkey) < LESSONS_RSA_MIN_BITS) {
            msg = apr_psprintf(p, "%s key has %d bits; at least %d are "
                               "required", name, EVP_PKEY_get_bits(pkey),
                               LESSONS_RSA_MIN_BITS);
        }
    }
    else if (!EVP_PKEY_is_a(pkey, "EC")
             || !EVP_PKEY_get_utf8_string_param(pkey,
                                                OSSL_PKEY_PARAM_GROUP_NAME,
                                                group, sizeof(group), &glen)
             || strcmp(group, lessons_algs[idx].curve) != 0) {
        msg = apr_psprintf(p, "%s needs an EC public key on curve %s", name,
                           lessons_algs[idx].curve);
    }
    EVP_PKEY_free(pkey);
    return msg;
}

const char *lessons_key_check(apr_pool_t *p, jwt_alg_t alg,
                              const unsigned char *key, apr_size_t len)
{
    size_t i;

    if (!key || len == 0) {
        return "no key";
    }
    for (i = 0; i < LESSONS_NALGS; i++) {
        if (lessons_algs[i].alg == alg) {
            break;
        }
    }
    if (i == LESSONS_NALGS) {
        return "unsupported algorithm";
    }
    if (alg == JWT_ALG_HS256 || alg == JWT_ALG_HS384
        || alg == JWT_ALG_HS512) {
        /* A PEM here is how algorithm confusion is set up: refuse it. */
        if (lessons_key_is_pem(key, len)) {
            return apr_psprintf(p, "%s needs a shared secret, but the key "
                                "file holds a PEM key", lessons_algs[i].name);
        }
        if (len < LESSONS_HMAC_MIN_BYTES) {
            return apr_psprintf(p, "%s secret has %" APR_SIZE_T_FMT
                                " bytes; at least %d are required",
                                lessons_algs[i].name, len,
                                LESSONS_HMAC_MIN_BYTES);
        }
        return NULL;
    }
    return lessons_key_check_public(p, i, key, len);
}
