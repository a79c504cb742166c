/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_key.c: algorithm names, key files, and which algorithms a key
 * allows.  Keys are inspected once, when read, with OpenSSL, and made
 * into the JWK cjose verifies with; lessons_key_allows is then a cheap
 * check made wherever a key meets a token.
 */
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <cjose/jwk.h>

#include "apr_encode.h"
#include "apr_file_io.h"
#include "apr_strings.h"

#include "keys/lessons_key.h"

#define LESSONS_KEY_FILE_MAX  (64 * 1024)

/* Read-only table: the algorithms we accept and what key each needs. */
static const struct {
    const char *name;
    lessons_alg_t alg;
    const char *curve;          /* ES*: OpenSSL group name */
    const char *crv;            /* ES*: the JWK's name of the curve */
} lessons_algs[] = {
    { "HS256", LESSONS_ALG_HS256, NULL, NULL },
    { "HS384", LESSONS_ALG_HS384, NULL, NULL },
    { "HS512", LESSONS_ALG_HS512, NULL, NULL },
    { "RS256", LESSONS_ALG_RS256, NULL, NULL },
    { "RS384", LESSONS_ALG_RS384, NULL, NULL },
    { "RS512", LESSONS_ALG_RS512, NULL, NULL },
    { "ES256", LESSONS_ALG_ES256, "prime256v1", "P-256" },
    { "ES384", LESSONS_ALG_ES384, "secp384r1", "P-384" },
    { "ES512", LESSONS_ALG_ES512, "secp521r1", "P-521" },
    { "PS256", LESSONS_ALG_PS256, NULL, NULL },
    { "PS384", LESSONS_ALG_PS384, NULL, NULL },
    { "PS512", LESSONS_ALG_PS512, NULL, NULL },
};

#define LESSONS_NALGS (sizeof(lessons_algs) / sizeof(lessons_algs[0]))

lessons_alg_t lessons_alg_parse(const char *name)
{
    size_t i;

    for (i = 0; name && i < LESSONS_NALGS; i++) {
        if (strcmp(name, lessons_algs[i].name) == 0) {
            return lessons_algs[i].alg;
        }
    }
    return LESSONS_ALG_INVAL;
}

lessons_alg_t lessons_alg_of_crv(const char *crv, size_t len)
{
    size_t i;

    for (i = 0; crv && i < LESSONS_NALGS; i++) {
        if (lessons_algs[i].crv && strlen(lessons_algs[i].crv) == len
            && memcmp(crv, lessons_algs[i].crv, len) == 0) {
            return lessons_algs[i].alg;
        }
    }
    return LESSONS_ALG_INVAL;
}

const char *lessons_alg_name(lessons_alg_t alg)
{
    size_t i;

    for (i = 0; i < LESSONS_NALGS; i++) {
        if (lessons_algs[i].alg == alg) {
            return lessons_algs[i].name;
        }
    }
    return "none";
}

int lessons_alg_is_pss(lessons_alg_t alg)
{
    return alg == LESSONS_ALG_PS256 || alg == LESSONS_ALG_PS384
           || alg == LESSONS_ALG_PS512;
}

const char *lessons_file_read(apr_pool_t *p, const char *path,
                              const char *what, apr_size_t max,
                              const char **data, apr_size_t *len)
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
        return apr_psprintf(p, "cannot open %s %s: %s", what, path,
                            apr_strerror(rv, err, sizeof(err)));
    }
    rv = apr_file_info_get(&fi, APR_FINFO_SIZE | APR_FINFO_TYPE, f);
    if (rv != APR_SUCCESS || fi.filetype != APR_REG) {
        apr_file_close(f);
        return apr_psprintf(p, "%s %s is not a regular file", what, path);
    }
    if (fi.size <= 0 || (apr_size_t)fi.size > max) {
        apr_file_close(f);
        return apr_psprintf(p, "%s %s is empty or larger than %lu bytes",
                            what, path, (unsigned long)max);
    }
    n = (apr_size_t)fi.size;
    buf = apr_palloc(p, n + 1);
    rv = apr_file_read_full(f, buf, n, &n);
    apr_file_close(f);
    if (rv != APR_SUCCESS) {
        return apr_psprintf(p, "cannot read %s %s: %s", what, path,
                            apr_strerror(rv, err, sizeof(err)));
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return NULL;
}

/* Does the text contain marker?  Keys are bytes, not C strings. */
static int lessons_key_has(const unsigned char *key, apr_size_t len,
                           const char *marker)
{
    apr_size_t m = strlen(marker);
    apr_size_t i;

    for (i = 0; i + m <= len; i++) {
        if (memcmp(key + i, marker, m) == 0) {
            return 1;
        }
    }
    return 0;
}

/* What a DER object at data is, as OpenSSL's own decoders read it: a
 * certificate, a public key (SubjectPublicKeyInfo, or RSA's PKCS#1
 * form), a private key (PKCS#8 or a type's own form) or an encrypted
 * PKCS#8 key, with the command that gives its public key as PEM; NULL
 * when none of them takes the bytes.  Such a file is public or a key's
 * own, and never a shared secret: an HS* "secret" that is a public key
 * lets anyone who has the key sign.
 */
typedef struct {
    const char *what;
    const char *pem;            /* openssl ... -inform DER -in FILE ... */
} lessons_der_t;

static const lessons_der_t lessons_ders[] = {
    { "a DER certificate", "x509 -inform DER -in FILE -pubkey -noout" },
    { "a DER public key", "pkey -pubin -inform DER -in FILE" },
    { "a DER private key", "pkey -inform DER -in FILE -pubout" },
    { "an encrypted DER private key", "pkey -inform DER -in FILE -pubout" },
};

static const lessons_der_t *lessons_key_der(const unsigned char *data,
                                            apr_size_t len)
{
    const unsigned char *in;
    const lessons_der_t *der = NULL;
    X509 *x509;
    X509_SIG *sig;
    EVP_PKEY *pkey;
    long n = (long)len;

    if (len == 0 || len > LESSONS_KEY_FILE_MAX || data[0] != 0x30) {
        return NULL;            /* every one of them is a SEQUENCE */
    }
    ERR_set_mark();             /* failed tries leave no errors behind */
    if ((x509 = d2i_X509(NULL, (in = data, &in), n)) != NULL) {
        X509_free(x509);
        der = &lessons_ders[0];
    }
    else if ((pkey = d2i_PUBKEY(NULL, (in = data, &in), n)) != NULL
             || (pkey = d2i_PublicKey(EVP_PKEY_RSA, NULL, (in = data, &in),
                                      n)) != NULL) {
        EVP_PKEY_free(pkey);
        der = &lessons_ders[1];
    }
    else if ((pkey = d2i_AutoPrivateKey(NULL, (in = data, &in), n))
             != NULL) {
        EVP_PKEY_free(pkey);
        der = &lessons_ders[2];
    }
    else if ((sig = d2i_X509_SIG(NULL, (in = data, &in), n)) != NULL) {
        X509_SIG_free(sig);
        der = &lessons_ders[3];
    }
    ERR_pop_to_mark();
    return der;
}

/* Does the text start with an OpenSSH public key line (authorized_keys
 * and *.pub: "ssh-rsa AAAA... comment", ssh-ed25519, ssh-dss,
 * ecdsa-sha2-*, the sk- forms and their certificates), or is it an
 * RFC 4716 or PuTTY key file?
 */
static int lessons_key_ssh(const unsigned char *data, apr_size_t len)
{
    static const char *const types[] = {
        "ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-sha2-"
    };
    apr_size_t i = 0, j, m;
    size_t t;

    if (lessons_key_has(data, len, "---- BEGIN SSH2 ")
        || lessons_key_has(data, len, "PuTTY-User-Key-File-")) {
        return 1;
    }
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r'
                       || data[i] == '\n')) {
        i++;
    }
    for (t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        m = strlen(types[t]);
        if (len - i <= m || memcmp(data + i, types[t], m) != 0) {
            continue;
        }
        /* the type name, then blanks before the key's base64 */
        for (j = i + m; j < len && data[j] > ' ' && data[j] < 0x7f; j++) {
        }
        if (j > i + m && j < len && (data[j] == ' ' || data[j] == '\t')) {
            return 1;
        }
    }
    return 0;
}

const char *lessons_key_public_form(apr_pool_t *p, const unsigned char *data,
                                    apr_size_t len)
{
    const lessons_der_t *der;
    apr_size_t i = 0;

    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r'
                       || data[i] == '\n')) {
        i++;
    }
    if (lessons_key_has(data, len, "-----BEGIN")) {
        return "it holds PEM text (a key or a certificate)";
    }
    if (i < len && (data[i] == '{' || data[i] == '[')) {
        return "it holds JSON (a JWK?)";
    }
    if (lessons_key_ssh(data, len)) {
        return "it holds an SSH key (ssh-keygen's form); an RS*/ES* key "
               "file takes its public key as PEM: ssh-keygen -e -m PKCS8 "
               "-f FILE";
    }
    if ((der = lessons_key_der(data, len)) != NULL) {
        return apr_psprintf(p, "it holds %s; an RS*/ES* key file takes the "
                            "public key as PEM: openssl %s", der->what,
                            der->pem);
    }
    return NULL;
}

const char *lessons_key_read(apr_pool_t *p, const char *path,
                             const unsigned char **key, apr_size_t *len)
{
    const char *buf, *msg;
    apr_size_t n = 0;

    msg = lessons_file_read(p, path, "key file", LESSONS_KEY_FILE_MAX, &buf,
                            &n);
    if (msg) {
        return msg;
    }
    /* A DER object may end in a byte that reads as a line end: it stays
     * whole, so that lessons_key_make still sees (and refuses) it.
     */
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')
           && !lessons_key_der((const unsigned char *)buf, n)) {
        n--;
    }
    if (n == 0) {
        return apr_psprintf(p, "key file %s holds no key", path);
    }
    *key = (const unsigned char *)apr_pstrmemdup(p, buf, n);
    *len = n;
    return NULL;
}

static size_t lessons_alg_index(lessons_alg_t alg)
{
    size_t i;

    for (i = 0; i < LESSONS_NALGS; i++) {
        if (lessons_algs[i].alg == alg) {
            break;
        }
    }
    return i;
}

/* cjose's JWK of a key lives as long as the key's pool. */
static apr_status_t lessons_key_release(void *jwk)
{
    cjose_jwk_release(jwk);
    return APR_SUCCESS;
}

static const char *lessons_key_hold(apr_pool_t *p, lessons_key_t *key,
                                    cjose_jwk_t *jwk)
{
    if (!jwk) {
        return "the verifier (cjose) cannot take the key";
    }
    key->jwk = jwk;
    apr_pool_cleanup_register(p, jwk, lessons_key_release,
                              apr_pool_cleanup_null);
    return NULL;
}

static const char *lessons_key_b64(apr_pool_t *p, const unsigned char *d,
                                   apr_size_t n)
{
    return apr_pencode_base64_binary(p, d, (apr_ssize_t)n,
                                     APR_ENCODE_BASE64URL
                                     | APR_ENCODE_NOPADDING, NULL);
}

const char *lessons_key_canon(apr_pool_t *p, const lessons_key_t *key,
                              const unsigned char *a, apr_size_t alen,
                              const unsigned char *b, apr_size_t blen)
{
    size_t i = lessons_alg_index(key->ec_alg);

    if (key->type == LESSONS_KEY_RSA) {
        return apr_pstrcat(p, "{\"e\":\"", lessons_key_b64(p, b, blen),
                           "\",\"kty\":\"RSA\",\"n\":\"",
                           lessons_key_b64(p, a, alen), "\"}", NULL);
    }
    if (key->type != LESSONS_KEY_EC || i == LESSONS_NALGS
        || !lessons_algs[i].crv) {
        return NULL;
    }
    return apr_pstrcat(p, "{\"crv\":\"", lessons_algs[i].crv,
                       "\",\"kty\":\"EC\",\"x\":\"",
                       lessons_key_b64(p, a, alen), "\",\"y\":\"",
                       lessons_key_b64(p, b, blen), "\"}", NULL);
}

/* key->data becomes lessons_key_canon's text; 0 when there is none. */
static int lessons_key_set_canon(apr_pool_t *p, lessons_key_t *key,
                                 const unsigned char *a, apr_size_t alen,
                                 const unsigned char *b, apr_size_t blen)
{
    const char *canon = lessons_key_canon(p, key, a, alen, b, blen);

    if (!canon) {
        return 0;
    }
    key->data = (const unsigned char *)canon;
    key->len = strlen(canon);
    return 1;
}

/* A number of pkey (OSSL_PKEY_PARAM_*), big-endian: width bytes, or as
 * many as it has (width 0).  NULL when it has no such number.
 */
static uint8_t *lessons_key_number(apr_pool_t *p, const EVP_PKEY *pkey,
                                   const char *name, int width, size_t *len)
{
    BIGNUM *bn = NULL;
    uint8_t *out = NULL;
    int n;

    if (!EVP_PKEY_get_bn_param(pkey, name, &bn)) {
        return NULL;
    }
    n = width ? width : BN_num_bytes(bn);
    if (n > 0) {
        out = apr_palloc(p, (apr_size_t)n);
        if (BN_bn2binpad(bn, out, n) != n) {
            out = NULL;
        }
    }
    BN_free(bn);
    *len = (size_t)n;
    return out;
}

/* The key as cjose's JWK: RSA's n and e, EC's curve and point, and
 * with_private the private members too (RSA's d and CRT numbers, EC's
 * d), to sign with; NULL when pkey lacks one.  The public numbers become
 * key->data (lessons_key_canon), so that a PEM file and a JWK of one key
 * are one key.
 */
static cjose_jwk_t *lessons_key_jwk(apr_pool_t *p, const EVP_PKEY *pkey,
                                    lessons_key_t *key, int with_private)
{
    cjose_err err;

    if (key->type == LESSONS_KEY_RSA) {
        cjose_jwk_rsa_keyspec rsa;

        memset(&rsa, 0, sizeof(rsa));
        rsa.n = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_RSA_N, 0,
                                   &rsa.nlen);
        rsa.e = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_RSA_E, 0,
                                   &rsa.elen);
        if (with_private) {
            rsa.d = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_RSA_D, 0,
                                       &rsa.dlen);
            rsa.p = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_RSA_FACTOR1,
                                       0, &rsa.plen);
            rsa.q = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_RSA_FACTOR2,
                                       0, &rsa.qlen);
            rsa.dp = lessons_key_number(p, pkey,
                                        OSSL_PKEY_PARAM_RSA_EXPONENT1, 0,
                                        &rsa.dplen);
            rsa.dq = lessons_key_number(p, pkey,
                                        OSSL_PKEY_PARAM_RSA_EXPONENT2, 0,
                                        &rsa.dqlen);
            rsa.qi = lessons_key_number(p, pkey,
                                        OSSL_PKEY_PARAM_RSA_COEFFICIENT1, 0,
                                        &rsa.qilen);
            if (!rsa.d || !rsa.p || !rsa.q || !rsa.dp || !rsa.dq
                || !rsa.qi) {
                return NULL;
            }
        }
        if (!rsa.n || !rsa.e || !lessons_key_set_canon(p, key, rsa.n,
                                                       rsa.nlen, rsa.e,
                                                       rsa.elen)) {
            return NULL;
        }
        return cjose_jwk_create_RSA_spec(&rsa, &err);
    }
    else {
        cjose_jwk_ec_keyspec ec;
        int width = (EVP_PKEY_get_bits(pkey) + 7) / 8;

        memset(&ec, 0, sizeof(ec));
        ec.crv = key->ec_alg == LESSONS_ALG_ES256 ? CJOSE_JWK_EC_P_256
                 : key->ec_alg == LESSONS_ALG_ES384 ? CJOSE_JWK_EC_P_384
                 : CJOSE_JWK_EC_P_521;
        ec.x = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_EC_PUB_X, width,
                                  &ec.xlen);
        ec.y = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_EC_PUB_Y, width,
                                  &ec.ylen);
        if (with_private) {
            ec.d = lessons_key_number(p, pkey, OSSL_PKEY_PARAM_PRIV_KEY,
                                      width, &ec.dlen);
            if (!ec.d) {
                return NULL;
            }
        }
        if (!ec.x || !ec.y || !lessons_key_set_canon(p, key, ec.x, ec.xlen,
                                                     ec.y, ec.ylen)) {
            return NULL;
        }
        return cjose_jwk_create_EC_spec(&ec, &err);
    }
}

/* The PEM must be an RSA or EC public key; fill in what it is. */
static const char *lessons_key_public(apr_pool_t *p, const unsigned char *data,
                                      apr_size_t len, lessons_key_t *key)
{
    const char *msg = NULL;
    BIO *bio;
    EVP_PKEY *pkey;
    char group[64];
    size_t glen = 0, i;

    if (lessons_key_has(data, len, "OPENSSH PRIVATE KEY")) {
        return "the key file holds an OpenSSH private key; give its public "
               "key as PEM (ssh-keygen -e -m PKCS8 -f FILE)";
    }
    if (lessons_key_has(data, len, "PRIVATE KEY")) {
        return "the key file holds a private key; give the public key "
               "(openssl pkey -in private.pem -pubout)";
    }
    if (lessons_key_has(data, len, "CERTIFICATE")) {
        return "the key file holds a certificate; give its public key "
               "(openssl x509 -in cert.pem -pubkey -noout)";
    }
    if (len > (apr_size_t)LESSONS_KEY_FILE_MAX) {
        return "key too large";
    }
    bio = BIO_new_mem_buf(data, (int)len);
    if (!bio) {
        return "out of memory reading the key";
    }
    pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (!pkey) {
        return "the key file holds PEM text that is not a public key "
               "(\"-----BEGIN PUBLIC KEY-----\")";
    }
    if (EVP_PKEY_is_a(pkey, "RSA")) {
        key->type = LESSONS_KEY_RSA;
        key->bits = EVP_PKEY_get_bits(pkey);
    }
    else if (EVP_PKEY_is_a(pkey, "EC")
             && EVP_PKEY_get_utf8_string_param(pkey,
                                               OSSL_PKEY_PARAM_GROUP_NAME,
                                               group, sizeof(group), &glen)) {
        key->type = LESSONS_KEY_EC;
        key->ec_alg = LESSONS_ALG_INVAL;
        for (i = 0; i < LESSONS_NALGS; i++) {
            if (lessons_algs[i].curve
                && strcmp(group, lessons_algs[i].curve) == 0) {
                key->ec_alg = lessons_algs[i].alg;
            }
        }
        if (key->ec_alg == LESSONS_ALG_INVAL) {
            msg = apr_psprintf(p, "EC keys on curve %s are not supported; "
                               "use P-256, P-384 or P-521", group);
        }
    }
    else {
        msg = "the public key is neither RSA nor EC";
    }
    if (!msg) {
        msg = lessons_key_hold(p, key, lessons_key_jwk(p, pkey, key, 0));
    }
    EVP_PKEY_free(pkey);
    return msg;
}

const cjose_jwk_t *lessons_key_signing_jwk(apr_pool_t *p,
                                           const EVP_PKEY *pkey,
                                           const lessons_key_t *key)
{
    lessons_key_t signer = *key;    /* its own key->data and jwk */

    if (key->type != LESSONS_KEY_RSA && key->type != LESSONS_KEY_EC) {
        return NULL;
    }
    return lessons_key_hold(p, &signer, lessons_key_jwk(p, pkey, &signer, 1))
           ? NULL : signer.jwk;
}

const char *lessons_key_make(apr_pool_t *p, const unsigned char *data,
                             apr_size_t len, lessons_key_t **out)
{
    lessons_key_t *key;
    const char *msg;

    if (!data || len == 0) {
        return "no key";
    }
    key = apr_pcalloc(p, sizeof(*key));
    key->data = data;
    key->len = len;
    if (lessons_key_has(data, len, "-----BEGIN")) {
        msg = lessons_key_public(p, data, len, key);
    }
    else if ((msg = lessons_key_public_form(p, data, len)) != NULL) {
        msg = apr_pstrcat(p, "the key file is no shared secret: ", msg,
                          NULL);
    }
    else {
        msg = lessons_key_secret(p, data, len, key);
    }
    if (msg) {
        return msg;
    }
    *out = key;
    return NULL;
}

const char *lessons_key_import_jwk(apr_pool_t *p, json_t *jwk,
                                   const unsigned char *a, apr_size_t alen,
                                   const unsigned char *b, apr_size_t blen,
                                   lessons_key_t *key)
{
    cjose_err err;

    if (!lessons_key_set_canon(p, key, a, alen, b, blen)) {
        return "the key is neither RSA nor EC on a curve we take";
    }
    return lessons_key_hold(p, key,
                            cjose_jwk_import_json((cjose_header_t *)jwk,
                                                  &err));
}

const char *lessons_key_secret(apr_pool_t *p, const unsigned char *data,
                               apr_size_t len, lessons_key_t *key)
{
    cjose_err err;

    memset(key, 0, sizeof(*key));
    key->type = LESSONS_KEY_SECRET;
    key->data = data;
    key->len = len;
    return lessons_key_hold(p, key, cjose_jwk_create_oct_spec(data, len,
                                                              &err));
}

apr_size_t lessons_key_sig_len(const lessons_key_t *key, lessons_alg_t alg)
{
    if (!lessons_key_allows(key, alg)) {
        return 0;
    }
    switch (alg) {
    case LESSONS_ALG_HS256:
        return 32;
    case LESSONS_ALG_HS384:
        return 48;
    case LESSONS_ALG_HS512:
        return 64;
    case LESSONS_ALG_ES256:
        return 64;
    case LESSONS_ALG_ES384:
        return 96;
    case LESSONS_ALG_ES512:
        return 132;
    default:
        return (apr_size_t)(key->bits + 7) / 8;    /* RS*, PS* */
    }
}

int lessons_key_allows(const lessons_key_t *key, lessons_alg_t alg)
{
    if (!key || !key->data || key->len == 0) {
        return 0;
    }
    switch (alg) {
    case LESSONS_ALG_HS256:
    case LESSONS_ALG_HS384:
    case LESSONS_ALG_HS512:
        return key->type == LESSONS_KEY_SECRET
               && key->len >= LESSONS_HMAC_MIN_BYTES;
    case LESSONS_ALG_RS256:
    case LESSONS_ALG_RS384:
    case LESSONS_ALG_RS512:
    case LESSONS_ALG_PS256:
    case LESSONS_ALG_PS384:
    case LESSONS_ALG_PS512:
        return key->type == LESSONS_KEY_RSA
               && key->bits >= LESSONS_RSA_MIN_BITS;
    case LESSONS_ALG_ES256:
    case LESSONS_ALG_ES384:
    case LESSONS_ALG_ES512:
        return key->type == LESSONS_KEY_EC && key->ec_alg == alg;
    default:
        return 0;
    }
}

const char *lessons_key_misfit(apr_pool_t *p, const lessons_key_t *key,
                               lessons_alg_t alg)
{
    size_t i = lessons_alg_index(alg);
    const char *name;

    if (lessons_key_allows(key, alg)) {
        return NULL;
    }
    if (i == LESSONS_NALGS) {
        return "unsupported algorithm";
    }
    if (!key) {
        return "no key";
    }
    name = lessons_algs[i].name;
    if (name[0] == 'H') {
        if (key->type != LESSONS_KEY_SECRET) {
            return apr_psprintf(p, "%s needs a shared secret, but the key "
                                "file holds a PEM public key", name);
        }
        return apr_psprintf(p, "%s secret has %" APR_SIZE_T_FMT " bytes; "
                            "at least %d are required", name, key->len,
                            LESSONS_HMAC_MIN_BYTES);
    }
    if (key->type == LESSONS_KEY_SECRET) {
        return apr_psprintf(p, "%s needs a PEM public key "
                            "(\"-----BEGIN PUBLIC KEY-----\"); this is not "
                            "one", name);
    }
    if (name[0] == 'R' || name[0] == 'P') {
        if (key->type != LESSONS_KEY_RSA) {
            return apr_psprintf(p, "%s needs an RSA public key", name);
        }
        return apr_psprintf(p, "%s key has %d bits; at least %d are "
                            "required", name, key->bits,
                            LESSONS_RSA_MIN_BITS);
    }
    return apr_psprintf(p, "%s needs an EC public key on curve %s", name,
                        lessons_algs[i].curve);
}

const char *lessons_key_check(apr_pool_t *p, lessons_alg_t alg,
                              const unsigned char *data, apr_size_t len)
{
    lessons_key_t *key = NULL;
    const char *msg;

    if (lessons_alg_index(alg) == LESSONS_NALGS) {
        return "unsupported algorithm";
    }
    msg = lessons_key_make(p, data, len, &key);
    return msg ? msg : lessons_key_misfit(p, key, alg);
}
