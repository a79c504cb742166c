/* Licensed under the Apache License, Version 2.0.
 *
 * test_jwks.c: lessons_keyset_make, _parse_jwks, _from_key, _check,
 * _find and lessons_jwk_allows against lessons_keyset.h.  Keys are made
 * by OpenSSL at start-up and their JWK members exported (big-endian
 * bytes, base64url by apr_encode), so every set here holds real keys;
 * tokens signed by cjose with the private keys prove that the PEM made
 * from a JWK is that very key.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "apr_encode.h"
#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"
#include "apr_tables.h"

#include "keys/lessons_keyset.h"

#include "unit_pool.h"
#include "auth/lessons_token.h"
#include "unit_jwt.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* A generated key: its PEM texts and its JWK members. */
typedef struct {
    const char *pub, *priv;         /* PEM */
    const char *n, *e;              /* RSA, base64url */
    const char *crv, *x, *y;        /* EC, base64url */
    const char *members;            /* "kty":...,... (no braces) */
} test_key_t;

static test_key_t rsa1, rsa2, rsa1024, p256, p256b, p384, p521;
static unsigned char oct_bytes[32], oct2_bytes[48];
static const char *oct_k, *oct2_k;

/* ---------------------------------------------------------------- keys */

static int pems(EVP_PKEY *k, test_key_t *t)
{
    BIO *b1 = BIO_new(BIO_s_mem()), *b2 = BIO_new(BIO_s_mem());
    int ok = b1 && b2 && PEM_write_bio_PUBKEY(b1, k) == 1
             && PEM_write_bio_PrivateKey(b2, k, NULL, NULL, 0, NULL,
                                         NULL) == 1;

    if (ok) {
        t->pub = bio_text(b1);
        t->priv = bio_text(b2);
    }
    BIO_free(b1);
    BIO_free(b2);
    return ok ? 0 : -1;
}

/* A BIGNUM parameter as big-endian bytes (padded to pad, if not 0),
 * base64url.
 */
static const char *bn_param(EVP_PKEY *k, const char *name, int pad)
{
    BIGNUM *bn = NULL;
    unsigned char *buf;
    int len;
    const char *s = NULL;

    if (!EVP_PKEY_get_bn_param(k, name, &bn))
        return NULL;
    len = pad ? pad : BN_num_bytes(bn);
    buf = apr_palloc(pool, (apr_size_t)len);
    if (BN_bn2binpad(bn, buf, len) == len)
        s = b64url(buf, (size_t)len);
    BN_free(bn);
    return s;
}

static int rsa_key(int bits, test_key_t *t)
{
    EVP_PKEY *k = EVP_RSA_gen((unsigned)bits);
    int rc = -1;

    if (k && pems(k, t) == 0) {
        t->n = bn_param(k, OSSL_PKEY_PARAM_RSA_N, 0);
        t->e = bn_param(k, OSSL_PKEY_PARAM_RSA_E, 0);
        t->members = apr_psprintf(pool, "\"kty\":\"RSA\",\"n\":\"%s\","
                                  "\"e\":\"%s\"", t->n, t->e);
        rc = t->n && t->e ? 0 : -1;
    }
    EVP_PKEY_free(k);
    return rc;
}

static int ec_key(const char *crv, int size, test_key_t *t)
{
    EVP_PKEY *k = EVP_EC_gen(crv);
    int rc = -1;

    if (k && pems(k, t) == 0) {
        t->crv = crv;
        t->x = bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, size);
        t->y = bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, size);
        t->members = apr_psprintf(pool, "\"kty\":\"EC\",\"crv\":\"%s\","
                                  "\"x\":\"%s\",\"y\":\"%s\"", crv, t->x,
                                  t->y);
        rc = t->x && t->y ? 0 : -1;
    }
    EVP_PKEY_free(k);
    return rc;
}

static int group_setup(void **state)
{
    (void)state;
    if (unit_pool_open() != 0)
        return -1;
    if (rsa_key(2048, &rsa1) || rsa_key(2048, &rsa2)
        || rsa_key(1024, &rsa1024)
        || ec_key("P-256", 32, &p256) || ec_key("P-256", 32, &p256b)
        || ec_key("P-384", 48, &p384) || ec_key("P-521", 66, &p521))
        return -1;
    if (RAND_bytes(oct_bytes, sizeof(oct_bytes)) != 1
        || RAND_bytes(oct2_bytes, sizeof(oct2_bytes)) != 1)
        return -1;
    oct_k = b64url(oct_bytes, sizeof(oct_bytes));
    oct2_k = b64url(oct2_bytes, sizeof(oct2_bytes));
    return 0;
}

/* ------------------------------------------------------------- helpers */

/* {"keys":[{members}]} */
static const char *one(const char *members)
{
    return apr_psprintf(pool, "{\"keys\":[{%s}]}", members);
}

static const char *oct_members(const char *k)
{
    return apr_psprintf(pool, "\"kty\":\"oct\",\"k\":\"%s\"", k);
}

/* A set parsed with flags (lessons_keyset_parse_jwks_ex), or fail. */
static lessons_keyset_t *parse_ok_ex(const char *json, int flags)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_parse_jwks_ex(pool, json, strlen(json),
                                                   flags, &set);

    if (msg)
        print_error("unexpected message: %s\n", msg);
    assert_null(msg);
    assert_non_null(set);
    assert_true(set->nkeys >= 1);
    return set;
}

static const lessons_keyset_t *parse_ok(const char *json)
{
    return parse_ok_ex(json, 0);
}

/* NULL when json is refused with a message holding want; else why not. */
static const char *refused(const char *json, apr_size_t len,
                           const char *want)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_parse_jwks(pool, json, len, &set);

    if (!msg)
        return "accepted";
    if (set)
        return "set made anyway";
    if (!strstr(msg, want))
        return apr_psprintf(pool, "message \"%s\" lacks \"%s\"", msg, want);
    return NULL;
}

static void parse_fails(const char *json, const char *want)
{
    const char *why = refused(json, strlen(json), want);

    if (why)
        print_error("%s\n", why);
    assert_null(why);
}

/* A key made from its JWK is the key its PEM file makes: the same
 * identity (RFC 7638's thumbprint input), which must be that text.
 */
static void same_pem(const lessons_jwk_t *jwk, const char *pub)
{
    lessons_key_t *file = NULL;

    assert_null(lessons_key_make(pool, (const unsigned char *)pub,
                                 strlen(pub), &file));
    assert_int_equal(jwk->key.len, file->len);
    assert_memory_equal(jwk->key.data, file->data, file->len);
    assert_int_equal(jwk->key.data[0], '{');
    assert_non_null(strstr((const char *)file->data, "\"kty\":\""));
}

/* The base64url text with its last character moved one place on in the
 * alphabet: the same length, but bits past the data now set.
 */
static const char *leftover(const char *s)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char *t = apr_pstrdup(pool, s);
    size_t n = strlen(t);
    const char *at = strchr(alphabet, t[n - 1]);

    t[n - 1] = alphabet[(at - alphabet + 1) % 64];
    return t;
}

/* Bytes of a base64url text, and bytes back to it. */
static unsigned char *unb64(const char *s, apr_size_t *len)
{
    return (unsigned char *)apr_pdecode_base64_binary(pool, s,
        APR_ENCODE_STRING, APR_ENCODE_BASE64URL, len);
}

/* ---------------------------------------------------------- good sets */

static void test_rsa_key(void **state)
{
    const lessons_keyset_t *set;

    (void)state;
    set = parse_ok(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"r1\","
                                "\"alg\":\"RS256\",\"use\":\"sig\"}]}",
                                rsa1.members));
    assert_int_equal(set->nkeys, 1);
    assert_int_equal(set->skipped, 0);
    assert_string_equal(set->keys[0].kid, "r1");
    assert_int_equal(set->keys[0].alg, LESSONS_ALG_RS256);
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_RSA);
    assert_int_equal(set->keys[0].key.bits, 2048);
    same_pem(&set->keys[0], rsa1.pub);
}

static void test_ec_keys(void **state)
{
    const test_key_t *keys[] = { &p256, &p384, &p521 };
    const lessons_alg_t algs[] = { LESSONS_ALG_ES256, LESSONS_ALG_ES384,
                                   LESSONS_ALG_ES512 };
    const lessons_keyset_t *set;
    size_t i;

    (void)state;
    for (i = 0; i < N(keys); i++) {
        set = parse_ok(one(keys[i]->members));
        assert_int_equal(set->nkeys, 1);
        assert_null(set->keys[0].kid);
        assert_int_equal(set->keys[0].alg, LESSONS_ALG_NONE);
        assert_int_equal(set->keys[0].key.type, LESSONS_KEY_EC);
        assert_int_equal(set->keys[0].key.ec_alg, algs[i]);
        same_pem(&set->keys[0], keys[i]->pub);
    }
}

static void test_oct_key(void **state)
{
    const lessons_keyset_t *set;

    (void)state;
    set = parse_ok(apr_psprintf(pool, "{\"keys\":[{%s,\"alg\":\"HS256\","
                                "\"kid\":\"h\",\"key_ops\":[\"sign\","
                                "\"verify\"]}]}", oct_members(oct_k)));
    assert_int_equal(set->nkeys, 1);
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_SECRET);
    assert_int_equal(set->keys[0].key.len, sizeof(oct_bytes));
    assert_memory_equal(set->keys[0].key.data, oct_bytes, sizeof(oct_bytes));
    assert_int_equal(set->keys[0].alg, LESSONS_ALG_HS256);
}

/* From a keys URL (LESSONS_JWKS_PUBLIC_ONLY) an oct key is skipped and
 * counted: a secret anyone can read is none.  A file's set keeps it.
 */
static void test_oct_key_from_url(void **state)
{
    const char *json = apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"h\","
                                    "\"alg\":\"HS256\"},{%s,\"kid\":\"r\"}]}",
                                    oct_members(oct_k), rsa1.members);
    const char *only = apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"h\"}]}",
                                    oct_members(oct_k));
    lessons_keyset_t *set;
    const char *msg;

    (void)state;
    set = parse_ok_ex(json, LESSONS_JWKS_PUBLIC_ONLY);
    assert_int_equal(set->nkeys, 1);
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_RSA);
    assert_null(lessons_keyset_find(set, "h"));
    assert_int_equal(set->secrets_skipped, 1);
    assert_int_equal(set->skipped, 1);
    /* nothing but a secret: no key left, refused */
    set = NULL;
    msg = lessons_keyset_parse_jwks_ex(pool, only, strlen(only),
                                       LESSONS_JWKS_PUBLIC_ONLY, &set);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "no key we can verify with"));
    assert_non_null(strstr(msg, "no secret"));
    assert_null(set);
    /* a key file's JWKS keeps both */
    set = (lessons_keyset_t *)parse_ok(json);
    assert_int_equal(set->nkeys, 2);
    assert_int_equal(set->secrets_skipped, 0);
    assert_non_null(lessons_keyset_find(set, "h"));
}

/* Raw secret bytes that would look like PEM or JSON in a key file are
 * still a secret when a JWK says so.
 */
static void test_oct_key_that_looks_like_pem(void **state)
{
    static const char text[] = "{ -----BEGIN PUBLIC KEY----- 0123456789";
    const lessons_keyset_t *set;

    (void)state;
    set = parse_ok(one(oct_members(b64url(text, strlen(text)))));
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_SECRET);
    assert_int_equal(set->keys[0].key.len, strlen(text));
    assert_memory_equal(set->keys[0].key.data, text, strlen(text));
}

static void test_mixed_set_and_find(void **state)
{
    const lessons_keyset_t *set;
    const lessons_jwk_t *k;

    (void)state;
    set = parse_ok(apr_psprintf(pool,
        "{\"keys\":[{%s,\"kid\":\"rsa-1\",\"alg\":\"RS256\"},"
        "{%s,\"kid\":\"ec-1\",\"use\":\"sig\"},"
        "{%s,\"kid\":\"rsa-2\"},{%s,\"kid\":\"ec-384\",\"alg\":\"ES384\"},"
        "{%s}],\"other\":\"ignored\"}",
        rsa1.members, p256.members, rsa2.members, p384.members,
        p521.members));
    assert_int_equal(set->nkeys, 5);
    assert_int_equal(set->skipped, 0);
    k = lessons_keyset_find(set, "ec-1");
    assert_non_null(k);
    assert_int_equal(k->key.type, LESSONS_KEY_EC);
    same_pem(k, p256.pub);
    k = lessons_keyset_find(set, "rsa-2");
    assert_non_null(k);
    same_pem(k, rsa2.pub);
    assert_ptr_equal(lessons_keyset_find(set, "rsa-1"), &set->keys[0]);
    assert_null(lessons_keyset_find(set, "rsa-3"));
    assert_null(lessons_keyset_find(set, "RSA-1"));
    assert_null(lessons_keyset_find(set, ""));
    assert_null(lessons_keyset_find(set, NULL));
    assert_null(lessons_keyset_find(NULL, "rsa-1"));
    assert_null(set->keys[4].kid);
    same_pem(&set->keys[4], p521.pub);
}

/* Keycloak's certs endpoint: an RS256 signing key and an RSA-OAEP
 * encryption key, each with x5c/x5t; others publish EdDSA or PS256.
 * Only the signing key is ours; the rest are skipped, not refused.
 */
static void test_keycloak_like_set(void **state)
{
    const lessons_keyset_t *set;

    (void)state;
    set = parse_ok(apr_psprintf(pool,
        "{\"keys\":["
        "{\"kid\":\"enc-kid\",\"kty\":\"RSA\",\"alg\":\"RSA-OAEP\","
        "\"use\":\"enc\",\"n\":\"%s\",\"e\":\"%s\",\"x5c\":[\"MIIB\"],"
        "\"x5t\":\"abc\",\"x5t#S256\":\"def\"},"
        "{\"kid\":\"sig-kid\",\"kty\":\"RSA\",\"alg\":\"RS256\","
        "\"use\":\"sig\",\"n\":\"%s\",\"e\":\"%s\",\"x5c\":[\"MIIB\"],"
        "\"x5t\":\"abc\",\"x5t#S256\":\"def\"},"
        "{\"kid\":\"ed\",\"kty\":\"OKP\",\"crv\":\"Ed25519\","
        "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"},"
        "{\"kid\":\"ps\",%s,\"alg\":\"PS256\"},"
        "{\"kid\":\"es256k\",\"kty\":\"EC\",\"crv\":\"secp256k1\","
        "\"alg\":\"ES256K\",\"x\":\"AA\",\"y\":\"AA\"},"
        "{\"kid\":\"enc-ec\",%s,\"use\":\"enc\",\"alg\":\"ECDH-ES\"}]}",
        rsa2.n, rsa2.e, rsa1.n, rsa1.e, rsa2.members, p256.members));
    assert_int_equal(set->nkeys, 1);
    assert_int_equal(set->skipped, 5);
    assert_string_equal(set->keys[0].kid, "sig-kid");
    same_pem(&set->keys[0], rsa1.pub);
    assert_null(lessons_keyset_find(set, "enc-kid"));
}

/* A PS256 key is read only with LESSONS_JWKS_PSS (a section that names
 * PS*); it is an RSA key like any other, and its "alg" must fit its
 * type.
 */
static void test_pss_key_with_the_flag(void **state)
{
    const char *json = apr_psprintf(pool, "{\"keys\":[{\"kid\":\"ps\",%s,"
                                    "\"alg\":\"PS256\"},{\"kid\":\"rs\",%s}]}",
                                    rsa2.members, rsa1.members);
    const char *ec = apr_psprintf(pool, "{\"keys\":[{\"kid\":\"ps\",%s,"
                                  "\"alg\":\"PS384\"}]}", p256.members);
    lessons_keyset_t *set;

    (void)state;
    set = parse_ok_ex(json, LESSONS_JWKS_PUBLIC_ONLY);
    assert_int_equal(set->nkeys, 1);                /* without: skipped */
    assert_int_equal(set->skipped, 1);
    assert_null(lessons_keyset_find(set, "ps"));
    set = parse_ok_ex(json, LESSONS_JWKS_PUBLIC_ONLY | LESSONS_JWKS_PSS);
    assert_int_equal(set->nkeys, 2);
    assert_int_equal(set->skipped, 0);
    assert_non_null(lessons_keyset_find(set, "ps"));
    assert_int_equal(lessons_keyset_find(set, "ps")->alg, LESSONS_ALG_PS256);
    assert_true(lessons_jwk_allows(lessons_keyset_find(set, "ps"),
                                   LESSONS_ALG_PS256));
    assert_false(lessons_jwk_allows(lessons_keyset_find(set, "ps"),
                                    LESSONS_ALG_RS256));
    assert_true(lessons_jwk_allows(lessons_keyset_find(set, "rs"),
                                   LESSONS_ALG_PS512));
    same_pem(lessons_keyset_find(set, "ps"), rsa2.pub);
    /* a PS* "alg" on an EC key is refused, as RS256 on one would be */
    set = NULL;
    assert_non_null(lessons_keyset_parse_jwks_ex(pool, ec, strlen(ec),
                                                 LESSONS_JWKS_PSS, &set));
    assert_null(set);
    assert_true(lessons_algs_name_pss(LESSONS_ALG_BIT(LESSONS_ALG_RS256)
                                      | LESSONS_ALG_BIT(LESSONS_ALG_PS384)));
    assert_false(lessons_algs_name_pss(0));
    assert_false(lessons_algs_name_pss(LESSONS_ALG_BIT(LESSONS_ALG_RS256)
                                       | LESSONS_ALG_BIT(LESSONS_ALG_ES512)
                                       | LESSONS_ALG_BIT(LESSONS_ALG_HS256)));
    /* HMAC alone: what no keys URL or discovered issuer can serve. */
    assert_true(lessons_algs_hmac_only(LESSONS_ALG_BIT(LESSONS_ALG_HS256)
                                       | LESSONS_ALG_BIT(LESSONS_ALG_HS512)));
    assert_false(lessons_algs_hmac_only(LESSONS_ALG_BIT(LESSONS_ALG_HS256)
                                        | LESSONS_ALG_BIT(LESSONS_ALG_RS256)));
    assert_false(lessons_algs_hmac_only(0));
}

static void test_from_key(void **state)
{
    lessons_key_t *key = NULL;
    lessons_keyset_t *set = NULL;

    (void)state;
    assert_null(lessons_key_make(pool, (const unsigned char *)rsa1.pub,
                                 strlen(rsa1.pub), &key));
    assert_null(lessons_keyset_from_key(pool, key, &set));
    assert_non_null(set);
    assert_int_equal(set->nkeys, 1);
    assert_int_equal(set->skipped, 0);
    assert_null(set->keys[0].kid);
    assert_int_equal(set->keys[0].alg, LESSONS_ALG_NONE);
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_RSA);
    same_pem(&set->keys[0], rsa1.pub);

    set = NULL;
    assert_non_null(lessons_keyset_from_key(pool, NULL, &set));
    assert_null(set);
}

static const lessons_keyset_t *made(const char *data, size_t len)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_make(pool, (const unsigned char *)data,
                                          len, &set);

    if (msg)
        print_error("unexpected message: %s\n", msg);
    assert_null(msg);
    assert_non_null(set);
    return set;
}

static void make_fails(const char *data, const char *want)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_make(pool, (const unsigned char *)data,
                                          strlen(data), &set);

    assert_non_null(msg);
    if (!strstr(msg, want))
        print_error("message \"%s\" lacks \"%s\"\n", msg, want);
    assert_non_null(strstr(msg, want));
    assert_null(set);
}

static void test_make_detects_the_form(void **state)
{
    static const char secret[] = "0123456789abcdef0123456789abcdef";
    const lessons_keyset_t *set;
    const char *text;

    (void)state;
    /* a JWKS, after white space */
    text = apr_psprintf(pool, " \n\t{\"keys\":[{%s,\"kid\":\"a\"},"
                        "{%s,\"kid\":\"b\"}]}\n", rsa1.members,
                        p384.members);
    set = made(text, strlen(text));
    assert_int_equal(set->nkeys, 2);
    assert_string_equal(set->keys[1].kid, "b");
    assert_int_equal(set->keys[1].key.ec_alg, LESSONS_ALG_ES384);

    /* a PEM public key */
    set = made(rsa2.pub, strlen(rsa2.pub) - 1);
    assert_int_equal(set->nkeys, 1);
    assert_null(set->keys[0].kid);
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_RSA);
    set = made(p521.pub, strlen(p521.pub));
    assert_int_equal(set->keys[0].key.ec_alg, LESSONS_ALG_ES512);

    /* a secret */
    set = made(secret, strlen(secret));
    assert_int_equal(set->keys[0].key.type, LESSONS_KEY_SECRET);
    assert_int_equal(set->keys[0].key.len, strlen(secret));

    /* a lone JWK, JSON that is not a JWKS, and broken JWKS */
    make_fails(apr_psprintf(pool, "{%s}", rsa1.members), "JWK");
    make_fails("[{\"keys\":[]}]", "JSON");
    make_fails("{\"keys\":[", "not valid JSON");
    make_fails(apr_psprintf(pool, "{\"keys\":[{%s}],\"keys\":[]}",
                            rsa1.members), "not valid JSON");
    make_fails("{\"keys\":[]}", "no keys");
    make_fails(rsa1.priv, "private key");
    make_fails("", "no key");
}

/* ------------------------------------------------------------- digest */

static const unsigned char *digest_of(const char *json)
{
    return parse_ok(json)->digest;
}

#define KID_ALG(m, kid, alg) \
    apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"%s\",\"alg\":\"%s\"}," \
                 "{%s}]}", (m), (kid), (alg), oct_members(oct_k))

static void test_digest(void **state)
{
    const unsigned char *base, *d;
    lessons_keyset_t *a = NULL, *b = NULL;
    const char *text = KID_ALG(rsa1.members, "k1", "RS256");

    (void)state;
    base = digest_of(text);
    /* equal sets, parsed twice, and with a skipped key or other member
     * order: same digest */
    assert_memory_equal(digest_of(text), base, LESSONS_KEYSET_DIGEST_LEN);
    assert_memory_equal(digest_of(apr_psprintf(pool,
        "{\"keys\":[{\"alg\":\"RS256\",\"kid\":\"k1\",%s},"
        "{\"kty\":\"RSA\",\"use\":\"enc\",\"n\":\"x\"},{%s}]}",
        rsa1.members, oct_members(oct_k))), base,
        LESSONS_KEYSET_DIGEST_LEN);

    /* any kid, alg or key different: another digest */
    d = digest_of(KID_ALG(rsa1.members, "k2", "RS256"));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    d = digest_of(KID_ALG(rsa1.members, "k1", "RS384"));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    d = digest_of(KID_ALG(rsa2.members, "k1", "RS256"));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    d = digest_of(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"k1\"},{%s}]}",
                               rsa1.members, oct_members(oct_k)));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    d = digest_of(apr_psprintf(pool, "{\"keys\":[{%s,\"alg\":\"RS256\"},"
                               "{%s}]}", rsa1.members, oct_members(oct_k)));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    d = digest_of(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"k1\","
                               "\"alg\":\"RS256\"},{%s}]}", rsa1.members,
                               oct_members(oct2_k)));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    d = digest_of(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"k1\","
                               "\"alg\":\"RS256\"}]}", rsa1.members));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);
    /* kid and alg moved between keys, or the order changed */
    d = digest_of(apr_psprintf(pool, "{\"keys\":[{%s},{%s,\"kid\":\"k1\","
                               "\"alg\":\"RS256\"}]}", oct_members(oct_k),
                               rsa1.members));
    assert_memory_not_equal(d, base, LESSONS_KEYSET_DIGEST_LEN);

    /* a file's key and the same key made twice: equal; other: not */
    assert_null(lessons_keyset_make(pool, (const unsigned char *)rsa1.pub,
                                    strlen(rsa1.pub), &a));
    assert_null(lessons_keyset_make(pool, (const unsigned char *)rsa1.pub,
                                    strlen(rsa1.pub), &b));
    assert_memory_equal(a->digest, b->digest, LESSONS_KEYSET_DIGEST_LEN);
    assert_null(lessons_keyset_make(pool, (const unsigned char *)rsa2.pub,
                                    strlen(rsa2.pub), &b));
    assert_memory_not_equal(a->digest, b->digest, LESSONS_KEYSET_DIGEST_LEN);
    /* the JWK form of the same key without kid or alg judges alike */
    assert_memory_equal(digest_of(one(rsa1.members)), a->digest,
                        LESSONS_KEYSET_DIGEST_LEN);
}

/* ------------------------------------------------------ allows, check */

static void test_jwk_allows(void **state)
{
    static const lessons_alg_t all[] = {
        LESSONS_ALG_NONE, LESSONS_ALG_HS256, LESSONS_ALG_HS384,
        LESSONS_ALG_HS512, LESSONS_ALG_RS256, LESSONS_ALG_RS384,
        LESSONS_ALG_RS512, LESSONS_ALG_ES256, LESSONS_ALG_ES384,
        LESSONS_ALG_ES512, LESSONS_ALG_INVAL
    };
    const lessons_keyset_t *set;
    /* per key, the algorithms it allows, as a bit set */
    static const unsigned want[] = {
        1u << 4,                                /* RSA, alg RS256 */
        (1u << 4) | (1u << 5) | (1u << 6),      /* RSA, no alg */
        1u << 8,                                /* P-384 */
        1u << 7,                                /* P-256, alg ES256 */
        (1u << 1) | (1u << 2) | (1u << 3),      /* oct, no alg */
        1u << 3,                                /* oct, alg HS512 */
    };
    size_t i, j;

    (void)state;
    set = parse_ok(apr_psprintf(pool, "{\"keys\":["
        "{%s,\"alg\":\"RS256\"},{%s},{%s},{%s,\"alg\":\"ES256\"},{%s},"
        "{%s,\"alg\":\"HS512\"}]}", rsa1.members, rsa2.members,
        p384.members, p256.members, oct_members(oct_k),
        oct_members(oct2_k)));
    assert_int_equal(set->nkeys, (int)N(want));
    for (i = 0; i < N(want); i++) {
        for (j = 0; j < N(all); j++) {
            int expect = (want[i] >> j) & 1;

            if (lessons_jwk_allows(&set->keys[i], all[j]) != expect)
                print_error("key %d, alg %d: expected %d\n", (int)i,
                            (int)all[j], expect);
            assert_int_equal(lessons_jwk_allows(&set->keys[i], all[j]),
                             expect);
        }
    }
    assert_false(lessons_jwk_allows(NULL, LESSONS_ALG_RS256));
}

static void check_fails(const lessons_keyset_t *set, lessons_algs_t algs,
                        const char *want)
{
    const char *msg = lessons_keyset_check(pool, set, algs);

    assert_non_null(msg);
    if (!strstr(msg, want))
        print_error("message \"%s\" lacks \"%s\"\n", msg, want);
    assert_non_null(strstr(msg, want));
}

#define B(a) LESSONS_ALG_BIT(LESSONS_ALG_##a)

static void test_check(void **state)
{
    const lessons_keyset_t *rs, *mixed, *pinned, *weak;
    lessons_key_t *key = NULL;
    lessons_keyset_t *set = NULL;

    (void)state;
    rs = parse_ok(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"a\"},"
                               "{%s,\"kid\":\"b\"}]}", rsa1.members,
                               rsa2.members));
    assert_null(lessons_keyset_check(pool, rs, B(RS256)));
    assert_null(lessons_keyset_check(pool, rs, B(RS512) | B(ES256)));
    check_fails(rs, B(ES256), "the key with kid \"a\"");
    check_fails(rs, B(HS256) | B(ES384), "fits none of HS256, ES384");
    check_fails(rs, 0, "no algorithm");
    check_fails(rs, LESSONS_ALG_BIT(LESSONS_ALG_NONE), "no algorithm");

    mixed = parse_ok(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"r\"},"
                                  "{%s,\"kid\":\"e\"}]}", rsa1.members,
                                  p256.members));
    assert_null(lessons_keyset_check(pool, mixed, B(RS256) | B(ES256)));
    check_fails(mixed, B(RS256), "kid \"e\"");
    check_fails(mixed, B(RS256) | B(ES384), "kid \"e\"");
    check_fails(mixed, B(ES256), "kid \"r\"");

    pinned = parse_ok(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"p\","
                                   "\"alg\":\"RS384\"}]}", rsa1.members));
    assert_null(lessons_keyset_check(pool, pinned, B(RS384)));
    assert_null(lessons_keyset_check(pool, pinned, B(RS256) | B(RS384)));
    check_fails(pinned, B(RS256), "RS384 only");

    /* from_key takes what lessons_key_make took; check says it is weak */
    assert_null(lessons_key_make(pool, (const unsigned char *)"short", 5,
                                 &key));
    assert_null(lessons_keyset_from_key(pool, key, &set));
    weak = set;
    check_fails(weak, B(HS256), "at least 32 bytes");
    set = NULL;
    assert_null(lessons_keyset_make(pool,
                                    (const unsigned char *)rsa1024.pub,
                                    strlen(rsa1024.pub), &set));
    check_fails(set, B(RS256), "at least 2048 bits");
    check_fails(NULL, B(RS256), "no key");
}

/* ------------------------------------------------------- hostile sets */

typedef struct {
    const char *name;
    const char *json;
    apr_size_t len;                 /* 0: strlen(json) */
    const char *want;               /* in the message */
} hostile_t;

static apr_array_header_t *cases;

static void add(const char *name, const char *json, const char *want)
{
    hostile_t *h = apr_array_push(cases);

    h->name = name;
    h->json = json;
    h->len = 0;
    h->want = want;
}

/* {"keys":[{members,extra}]} with the members as printf arguments. */
static const char *jwk1(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static const char *jwk1(const char *fmt, ...)
{
    va_list ap;
    const char *m;

    va_start(ap, fmt);
    m = apr_pvsprintf(pool, fmt, ap);
    va_end(ap);
    return one(m);
}

static const char *rsa_ne(const char *n, const char *e)
{
    return jwk1("\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\"", n, e);
}

static const char *ec_xy(const char *crv, const char *x, const char *y)
{
    return jwk1("\"kty\":\"EC\",\"crv\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"",
                crv, x, y);
}

/* A point of curve nid with a small x (the first x from 1 up that is on
 * the curve), as base64url x and y of width octets; and in *x_plus_p,
 * x + p, which still fits: the same point to anyone who reduces modulo
 * p first.
 */
static void small_x_point(int nid, int width, const char **x,
                          const char **y, const char **x_plus_p)
{
    EC_GROUP *g = EC_GROUP_new_by_curve_name(nid);
    EC_POINT *pt = g ? EC_POINT_new(g) : NULL;
    BIGNUM *bx = BN_new(), *by = BN_new(), *p = BN_new();
    unsigned char buf[66];

    assert_non_null(pt);
    assert_true(width <= (int)sizeof(buf));
    assert_int_equal(EC_GROUP_get_curve(g, p, NULL, NULL, NULL), 1);
    assert_int_equal(BN_set_word(bx, 1), 1);
    while (EC_POINT_set_compressed_coordinates(g, pt, bx, 0, NULL) != 1) {
        assert_int_equal(BN_add_word(bx, 1), 1);
    }
    ERR_clear_error();
    assert_int_equal(EC_POINT_get_affine_coordinates(g, pt, bx, by, NULL), 1);
    assert_int_equal(BN_bn2binpad(bx, buf, width), width);
    *x = b64url(buf, (size_t)width);
    assert_int_equal(BN_bn2binpad(by, buf, width), width);
    *y = b64url(buf, (size_t)width);
    assert_int_equal(BN_add(bx, bx, p), 1);
    assert_int_equal(BN_bn2binpad(bx, buf, width), width);
    *x_plus_p = b64url(buf, (size_t)width);
    BN_free(bx);
    BN_free(by);
    BN_free(p);
    EC_POINT_free(pt);
    EC_GROUP_free(g);
}

/* Coordinates must be below the field prime: x + p names the same point
 * modulo p, and is refused on every curve; the point itself is taken.
 */
static void test_ec_coordinate_not_reduced(void **state)
{
    static const struct {
        const char *crv;
        int nid, width;
    } curves[] = {
        { "P-256", NID_X9_62_prime256v1, 32 },
        { "P-384", NID_secp384r1, 48 },
        { "P-521", NID_secp521r1, 66 },
    };
    const char *x, *y, *x_plus_p, *good;
    lessons_keyset_t *set;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(curves) / sizeof(curves[0]); i++) {
        small_x_point(curves[i].nid, curves[i].width, &x, &y, &x_plus_p);
        good = ec_xy(curves[i].crv, x, y);
        set = NULL;
        assert_null(lessons_keyset_parse_jwks(pool, good, strlen(good),
                                              &set));
        assert_int_equal(set->nkeys, 1);
        parse_fails(ec_xy(curves[i].crv, x_plus_p, y),
                    "not below the field's prime");
    }
}

static void hostile_cases(void)
{
    unsigned char *b, *big, *bad_y;
    apr_size_t len = 0, ylen = 0;
    char *kid257, *huge, *many;
    hostile_t *h;
    int i;

    cases = apr_array_make(pool, 100, sizeof(hostile_t));

    /* document shape */
    add("invalid JSON", "{\"keys\":[{\"kty\":\"RSA\"", "not valid JSON");
    add("trailing garbage", "{\"keys\":[]} x", "not valid JSON");
    add("duplicate top member", "{\"keys\":[],\"keys\":[]}",
        "not valid JSON");
    add("duplicate JWK member",
        apr_psprintf(pool, "{\"keys\":[{%s,\"kty\":\"EC\"}]}", rsa1.members),
        "not valid JSON");
    add("not an object", "[]", "not a JSON object");
    add("a string", "\"keys\"", "not valid JSON");
    add("no keys member", "{\"key\":[]}", "no \"keys\"");
    add("keys not an array", "{\"keys\":{}}", "not an array");
    add("keys a string", "{\"keys\":\"[]\"}", "not an array");
    add("empty keys", "{\"keys\":[]}", "no keys");
    add("key not an object", "{\"keys\":[1]}", "key 0: not a JSON object");
    add("key an array", apr_psprintf(pool, "{\"keys\":[{%s},[]]}",
                                     rsa1.members),
        "key 1: not a JSON object");
    add("NUL in a string",
        "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"a\\u0000b\"}]}",
        "not valid JSON");

    /* kid */
    add("duplicate kid",
        apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"same\"},"
                     "{%s,\"kid\":\"same\"}]}", rsa1.members, p256.members),
        "key 1 (kid \"same\"): another key has the same kid");
    add("empty kid", jwk1("%s,\"kid\":\"\"", rsa1.members),
        "\"kid\" is empty");
    add("numeric kid", jwk1("%s,\"kid\":7", rsa1.members),
        "\"kid\" is not a string");
    add("null kid", jwk1("%s,\"kid\":null", rsa1.members),
        "\"kid\" is not a string");
    kid257 = apr_palloc(pool, 258);
    memset(kid257, 'k', 257);
    kid257[257] = '\0';
    add("kid too long", jwk1("%s,\"kid\":\"%s\"", rsa1.members, kid257),
        "longer than 256");
    add("kid with a newline", jwk1("%s,\"kid\":\"a\\nb\"", rsa1.members),
        "printable");
    add("kid not ASCII", jwk1("%s,\"kid\":\"\\u00e9\"", rsa1.members),
        "printable");

    /* kty, use, alg, key_ops */
    add("missing kty", jwk1("\"n\":\"%s\",\"e\":\"%s\"", rsa1.n, rsa1.e),
        "\"kty\" is missing");
    add("numeric kty", jwk1("\"kty\":1,\"k\":\"%s\"", oct_k),
        "\"kty\" is not a string");
    add("wrong kty only", jwk1("\"kty\":\"rsa\",\"n\":\"%s\",\"e\":\"%s\"",
                               rsa1.n, rsa1.e),
        "no key we can verify with");
    add("OKP only", jwk1("\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":"
                         "\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\""),
        "no key we can verify with");
    add("only enc keys",
        apr_psprintf(pool, "{\"keys\":[{%s,\"use\":\"enc\",\"kid\":\"e1\"},"
                     "{%s,\"alg\":\"RSA-OAEP-256\"}]}", rsa1.members,
                     rsa2.members),
        "(2 skipped; first: key 0 (kid \"e1\"): \"use\" is \"enc\")");
    add("use with control characters",
        jwk1("%s,\"use\":\"x\\u0001\\ny\"", rsa1.members),
        "\"use\" is \"x??y\")");
    add("crv with a newline", ec_xy("P-256\\nX", p256.x, p256.y),
        "curve \"P-256?X\" is not");
    add("raw control byte in the text", "{\"keys\":[\x01]}",
        "invalid token near '?'");
    add("use not a string", jwk1("%s,\"use\":[\"sig\"]", rsa1.members),
        "\"use\" is not a string");
    add("alg not a string", jwk1("%s,\"alg\":256", rsa1.members),
        "\"alg\" is not a string");
    add("alg none", jwk1("%s,\"alg\":\"none\"", oct_members(oct_k)),
        "\"alg\" is \"none\"");
    add("alg NoNe", jwk1("%s,\"alg\":\"NoNe\"", rsa1.members),
        "\"alg\" is \"NoNe\"");
    add("alg none on an enc key",
        jwk1("%s,\"alg\":\"none\",\"use\":\"enc\"", rsa1.members),
        "\"alg\" is \"none\"");
    add("RS256 on an EC key", jwk1("%s,\"alg\":\"RS256\"", p256.members),
        "\"alg\" RS256 does not fit an EC P-256 key");
    add("ES384 on a P-256 key", jwk1("%s,\"alg\":\"ES384\"", p256.members),
        "\"alg\" ES384 does not fit an EC P-256 key");
    add("ES512 on a P-384 key", jwk1("%s,\"alg\":\"ES512\"", p384.members),
        "does not fit an EC P-384 key");
    add("HS256 on an RSA key", jwk1("%s,\"alg\":\"HS256\"", rsa1.members),
        "\"alg\" HS256 does not fit an RSA key of 2048 bits");
    add("ES256 on an RSA key", jwk1("%s,\"alg\":\"ES256\"", rsa1.members),
        "does not fit an RSA key");
    add("RS256 on an oct key",
        jwk1("%s,\"alg\":\"RS256\"", oct_members(oct_k)),
        "does not fit a shared secret");
    add("key_ops without verify",
        jwk1("%s,\"key_ops\":[\"sign\",\"encrypt\"]", rsa1.members),
        "\"key_ops\" does not hold \"verify\"");
    add("key_ops empty", jwk1("%s,\"key_ops\":[]", p256.members),
        "\"key_ops\" does not hold \"verify\"");
    add("key_ops a string", jwk1("%s,\"key_ops\":\"verify\"", rsa1.members),
        "\"key_ops\" is not an array");
    add("key_ops with a number", jwk1("%s,\"key_ops\":[\"verify\",1]",
                                      rsa1.members),
        "not a string");

    /* private material */
    add("RSA d", jwk1("%s,\"d\":\"%s\"", rsa1.members, rsa2.n),
        "private key material (\"d\")");
    add("RSA p", jwk1("%s,\"p\":\"AQAB\"", rsa1.members), "(\"p\")");
    add("RSA q", jwk1("%s,\"q\":\"AQAB\"", rsa1.members), "(\"q\")");
    add("RSA dp", jwk1("%s,\"dp\":\"AQAB\"", rsa1.members), "(\"dp\")");
    add("RSA dq", jwk1("%s,\"dq\":\"AQAB\"", rsa1.members), "(\"dq\")");
    add("RSA qi", jwk1("%s,\"qi\":\"AQAB\"", rsa1.members), "(\"qi\")");
    add("RSA oth", jwk1("%s,\"oth\":[]", rsa1.members), "(\"oth\")");
    add("EC d", jwk1("%s,\"d\":\"%s\"", p256.members, p256b.x), "(\"d\")");
    add("d on an enc key", jwk1("%s,\"use\":\"enc\",\"d\":\"AQAB\"",
                                rsa1.members), "(\"d\")");
    add("d on an OKP key", jwk1("\"kty\":\"OKP\",\"crv\":\"Ed25519\","
                                "\"x\":\"AQAB\",\"d\":\"AQAB\""), "(\"d\")");

    /* RSA members */
    add("missing n", jwk1("\"kty\":\"RSA\",\"e\":\"%s\"", rsa1.e),
        "\"n\" is missing");
    add("missing e", jwk1("\"kty\":\"RSA\",\"n\":\"%s\"", rsa1.n),
        "\"e\" is missing");
    add("numeric e", jwk1("\"kty\":\"RSA\",\"n\":\"%s\",\"e\":65537",
                          rsa1.n), "\"e\" is not a string");
    add("n an array", jwk1("\"kty\":\"RSA\",\"n\":[\"%s\"],\"e\":\"%s\"",
                           rsa1.n, rsa1.e), "\"n\" is not a string");
    add("empty n", rsa_ne("", rsa1.e), "\"n\" is empty");
    add("padded n", rsa_ne(apr_pstrcat(pool, rsa1.n, "==", NULL), rsa1.e),
        "\"n\" is padded");
    add("padded e", rsa_ne(rsa1.n, "AQAB=="), "\"e\" is padded");
    add("standard base64 n",
        rsa_ne(apr_pstrcat(pool, "+/", rsa1.n + 2, NULL), rsa1.e),
        "\"n\" holds characters outside base64url");
    add("space in n",
        rsa_ne(apr_pstrcat(pool, "AQAB ", rsa1.n + 5, NULL), rsa1.e),
        "outside base64url");
    add("leftover bits in n", rsa_ne(leftover(rsa1.n), rsa1.e),
        "\"n\" is not canonical");
    add("leftover bits in e", rsa_ne(rsa1.n, "AR"), "\"e\" is not canonical");
    add("impossible length", rsa_ne(rsa1.n, "AQABA"), "\"e\" is not");
    b = unb64(rsa1.n, &len);
    big = apr_palloc(pool, len + 1);
    big[0] = 0;
    memcpy(big + 1, b, len);
    add("leading zero in n", rsa_ne(b64url(big, len + 1), rsa1.e),
        "\"n\" starts with a zero octet");
    add("leading zero in e", rsa_ne(rsa1.n, "AAEAAQ"),
        "\"e\" starts with a zero octet");
    add("1024-bit RSA", one(rsa1024.members),
        "key 0: RSA modulus of 1024 bits, at least 2048 needed");
    big = apr_palloc(pool, 2048);
    memset(big, 0xa5, 2048);
    big[0] = 0xc3;
    big[2047] = 0x01;
    add("16384-bit modulus", rsa_ne(b64url(big, 2048), rsa1.e),
        "RSA modulus of 16384 bits, at most 8192 allowed");
    add("8200-bit modulus", rsa_ne(b64url(big, 1025), rsa1.e),
        "RSA modulus of 8200 bits");
    b = unb64(rsa1.n, &len);
    b[len - 1] &= 0xfe;
    add("even modulus", rsa_ne(b64url(b, len), rsa1.e), "modulus is even");
    add("e = 65538", rsa_ne(rsa1.n, b64url("\x01\x00\x02", 3)),
        "exponent is even");
    add("e = 1", rsa_ne(rsa1.n, "AQ"), "RSA exponent 1 is too small");
    add("e = 3", rsa_ne(rsa1.n, "Aw"), "RSA exponent 3 is too small");
    add("e of 72 bits", rsa_ne(rsa1.n, b64url("\x80\0\0\0\0\0\0\0\x01", 9)),
        "RSA exponent of 72 bits");

    /* EC members */
    add("missing crv", jwk1("\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"",
                            p256.x, p256.y), "\"crv\" is missing");
    add("numeric crv", jwk1("\"kty\":\"EC\",\"crv\":256,\"x\":\"%s\","
                            "\"y\":\"%s\"", p256.x, p256.y),
        "\"crv\" is not a string");
    add("unknown crv P-192", ec_xy("P-192", p256.x, p256.y),
        "curve \"P-192\" is not supported");
    add("crv in lower case", ec_xy("p-256", p256.x, p256.y),
        "not supported");
    add("secp256k1 without alg", ec_xy("secp256k1", p256.x, p256.y),
        "not supported");
    add("missing x", jwk1("\"kty\":\"EC\",\"crv\":\"P-256\",\"y\":\"%s\"",
                          p256.y), "\"x\" is missing");
    add("missing y", jwk1("\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\"",
                          p256.x), "\"y\" is missing");
    add("y a number", jwk1("\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\","
                           "\"y\":1", p256.x), "\"y\" is not a string");
    add("leftover bits in x", ec_xy("P-256", leftover(p256.x), p256.y),
        "\"x\" is not canonical");
    add("padded y", ec_xy("P-256", p256.x,
                          apr_pstrcat(pool, p256.y, "=", NULL)),
        "\"y\" is padded");
    add("x too short", ec_xy("P-256", p256.x + 4, p256.y),
        "coordinates must be 32 octets");
    add("P-384 coordinates on P-256", ec_xy("P-256", p384.x, p384.y),
        "\"x\" has 48");
    add("P-256 coordinates on P-521", ec_xy("P-521", p256.x, p256.y),
        "must be 66 octets");
    bad_y = unb64(p256.y, &ylen);
    bad_y[ylen - 1] ^= 0x01;
    add("point not on the curve", ec_xy("P-256", p256.x,
                                        b64url(bad_y, ylen)),
        "not on the curve");
    add("x of one curve, y of another key", ec_xy("P-384", p384.x, p384.x),
        "not on the curve");
    big = apr_palloc(pool, 32);
    memset(big, 0xff, 32);
    add("x beyond the field", ec_xy("P-256", b64url(big, 32), p256.y),
        "not on the curve");
    memset(big, 0, 32);
    add("point at zero", ec_xy("P-256", b64url(big, 32), b64url(big, 32)),
        "not on the curve");

    /* oct members */
    add("missing k", jwk1("\"kty\":\"oct\",\"alg\":\"HS256\""),
        "\"k\" is missing");
    add("k an object", jwk1("\"kty\":\"oct\",\"k\":{}"),
        "\"k\" is not a string");
    add("short secret", one(oct_members(b64url(oct_bytes, 31))),
        "secret of 31 bytes, at least 32 needed");
    add("padded k", one(oct_members(apr_pstrcat(pool, oct_k, "=", NULL))),
        "\"k\" is padded");

    /* bounds */
    many = apr_pstrdup(pool, "{\"keys\":[");
    for (i = 0; i <= LESSONS_JWKS_MAX_KEYS; i++) {
        many = apr_psprintf(pool, "%s%s{%s,\"kid\":\"k%d\"}", many,
                            i ? "," : "", oct_members(oct_k), i);
    }
    many = apr_pstrcat(pool, many, "]}", NULL);
    add("65 keys", many, "holds 65 keys, at most 64");
    huge = apr_palloc(pool, LESSONS_JWKS_MAX_BYTES + 64);
    i = apr_snprintf(huge, 64, "{\"keys\":[{%s}],\"pad\":\"", "");
    memset(huge + i, 'x', LESSONS_JWKS_MAX_BYTES - (apr_size_t)i);
    memcpy(huge + LESSONS_JWKS_MAX_BYTES - 1, "\"}", 3);
    add("256 KiB + 1", huge, "larger than 262144 bytes");
    add("empty text", "", "empty");
    h = apr_array_push(cases);
    h->name = "NUL in the text";
    h->json = "{\"keys\":[]}\0";
    h->len = 12;
    h->want = "not valid JSON";
}

static void test_hostile_sets(void **state)
{
    int i, bad = 0;

    (void)state;
    hostile_cases();
    assert_true(cases->nelts >= 25);
    for (i = 0; i < cases->nelts; i++) {
        const hostile_t *h = &APR_ARRAY_IDX(cases, i, hostile_t);
        const char *why = refused(h->json, h->len ? h->len : strlen(h->json),
                                  h->want);

        if (why) {
            print_error("%s: %s\n", h->name, why);
            bad++;
        }
    }
    print_message("%d hostile sets refused\n", cases->nelts - bad);
    assert_int_equal(bad, 0);
}

/* A usable key beside a hostile one still fails the whole set. */
static void test_one_bad_key_refuses_the_set(void **state)
{
    (void)state;
    parse_fails(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"good\"},"
                             "{%s,\"kid\":\"bad\"}]}", rsa1.members,
                             rsa1024.members),
                "key 1 (kid \"bad\"): RSA modulus of 1024 bits, at least "
                "2048 needed");
}

/* --------------------------------------- a provider's set, key by key */

/* lessons_keyset_parse_fetched with algs: the set, or fail the test. */
static const lessons_keyset_t *fetched_ok(const char *json,
                                          lessons_algs_t algs)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_parse_fetched(pool, json, strlen(json),
                                                   0, algs, &set);

    if (msg)
        print_error("refused: %s\n", msg);
    assert_null(msg);
    assert_non_null(set);
    return set;
}

static void fetched_fails(const char *json, lessons_algs_t algs,
                          const char *want)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_parse_fetched(pool, json, strlen(json),
                                                   0, algs, &set);

    if (!msg || !strstr(msg, want))
        print_error("message \"%s\" lacks \"%s\"\n", msg ? msg : "(none)",
                    want);
    assert_non_null(msg);
    assert_non_null(strstr(msg, want));
}

/* The skip of key kid (NULL: the one without) says want. */
static void skipped_for(const lessons_keyset_t *set, const char *kid,
                        const char *want)
{
    int i;

    for (i = 0; i < set->skipped; i++) {
        const lessons_jwk_skip_t *k = &set->skips[i];

        if (kid ? k->kid && strcmp(k->kid, kid) == 0 : !k->kid) {
            if (!strstr(k->why, want))
                print_error("skip of %s: \"%s\" lacks \"%s\"\n",
                            kid ? kid : "(no kid)", k->why, want);
            assert_non_null(strstr(k->why, want));
            return;
        }
    }
    print_error("no skip of %s\n", kid ? kid : "(no kid)");
    fail();
}

/* What providers publish beside the signing keys a section takes (an
 * ES256 key while it moves from RS256, an encryption key, keys of other
 * types and curves, a short RSA key) is skipped, each with its reason;
 * the RS256 key serves.  The same set read as a key file is refused.
 */
static void test_fetched_key_by_key(void **state)
{
    const lessons_keyset_t *set;
    const char *doc;

    (void)state;
    doc = apr_psprintf(pool, "{\"keys\":["
        "{%s,\"kid\":\"es\",\"alg\":\"ES256\"},"
        "{%s,\"kid\":\"enc\",\"use\":\"enc\",\"alg\":\"RSA-OAEP\"},"
        "{%s,\"kid\":\"rs\",\"alg\":\"RS256\",\"use\":\"sig\"},"
        "{%s,\"kid\":\"short\"},"
        "{\"kty\":\"EC\",\"kid\":\"p192\",\"crv\":\"P-192\",\"x\":\"AA\","
        "\"y\":\"AA\"},"
        "{%s,\"kid\":\"ops\",\"key_ops\":[\"encrypt\"]},"
        "{\"kty\":\"OKP\",\"kid\":\"ed\",\"crv\":\"Ed25519\",\"x\":\"AA\"},"
        "{%s,\"kid\":7},"
        "{%s,\"kid\":\"p384\"}]}",
        p256.members, rsa2.members, rsa1.members, rsa1024.members,
        rsa2.members, rsa2.members, p384.members);
    set = fetched_ok(doc, B(RS256));
    assert_int_equal(set->nkeys, 1);
    assert_string_equal(set->keys[0].kid, "rs");
    assert_int_equal(set->skipped, 8);
    skipped_for(set, "es", "ES256 only");
    skipped_for(set, "enc", "\"use\" is \"enc\"");
    skipped_for(set, "short", "RSA modulus of 1024 bits");
    skipped_for(set, "p192", "not supported");
    skipped_for(set, "ops", "\"key_ops\" does not hold \"verify\"");
    skipped_for(set, "ed", "\"kty\" \"OKP\"");
    skipped_for(set, NULL, "\"kid\" is not a string");
    skipped_for(set, "p384", "fits none of RS256");
    assert_null(lessons_keyset_find(set, "es"));
    assert_non_null(lessons_keyset_find(set, "rs"));

    /* as a key file's set: refused at the first key that fails */
    parse_fails(doc, "kid \"short\"): RSA modulus of 1024 bits");
    /* where the section takes ES256 too, that key serves as well */
    set = fetched_ok(doc, B(RS256) | B(ES256));
    assert_int_equal(set->nkeys, 2);
    assert_non_null(lessons_keyset_find(set, "es"));
    skipped_for(set, "p384", "fits none of RS256, ES256");
}

/* What still refuses a provider's whole set: private material in any
 * key, two usable keys under one kid, nothing left to verify with.  A
 * skipped key may share a usable key's kid.
 */
static void test_fetched_whole_set_refusals(void **state)
{
    const lessons_keyset_t *set;

    (void)state;
    fetched_fails(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"rs\"},"
                               "{%s,\"kid\":\"leak\",\"d\":\"AA\"}]}",
                               rsa1.members, p256.members),
                  B(RS256), "private key material (\"d\")");
    fetched_fails(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"k\"},"
                               "{%s,\"kid\":\"k\"}]}", rsa1.members,
                               rsa2.members),
                  B(RS256), "another key has the same kid");
    fetched_fails(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"rs\"},"
                               "{%s,\"kid\":\"es\"}]}", rsa1.members,
                               p256.members),
                  B(ES384), "holds no key we can verify with (2 skipped; "
                            "first: key 0 (kid \"rs\")");
    fetched_fails("{\"keys\":[]}", B(RS256), "holds no keys");
    set = fetched_ok(apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"k\","
                                  "\"use\":\"enc\"},{%s,\"kid\":\"k\"}]}",
                                  rsa2.members, rsa1.members), B(RS256));
    assert_int_equal(set->nkeys, 1);
    assert_int_equal(set->skipped, 1);
}

/* The same keys with other keys left out: another set for the log (the
 * fetcher reports it), the same one for the token cache (digest).
 */
static void test_same_set(void **state)
{
    const char *plain = apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"rs\"}]}",
                                     rsa1.members);
    const char *more = apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"rs\"},"
                                    "{%s,\"kid\":\"e\",\"use\":\"enc\"}]}",
                                    rsa1.members, rsa2.members);
    const char *other = apr_psprintf(pool, "{\"keys\":[{%s,\"kid\":\"rs\"},"
                                     "{%s,\"kid\":\"e\",\"alg\":\"RS512\"}]}",
                                     rsa1.members, rsa2.members);
    const lessons_keyset_t *a = fetched_ok(plain, B(RS256));
    const lessons_keyset_t *b = fetched_ok(plain, B(RS256));
    const lessons_keyset_t *c = fetched_ok(more, B(RS256));
    const lessons_keyset_t *d = fetched_ok(other, B(RS256));

    (void)state;
    assert_true(lessons_keyset_same(a, b));
    assert_false(lessons_keyset_same(a, c));
    assert_false(lessons_keyset_same(c, d));
    assert_true(lessons_keyset_same(c, fetched_ok(more, B(RS256))));
    assert_memory_equal(a->digest, c->digest, LESSONS_KEYSET_DIGEST_LEN);
    assert_memory_equal(c->digest, d->digest, LESSONS_KEYSET_DIGEST_LEN);
    assert_false(lessons_keyset_same(a, NULL));
}

/* ---------------------------------------------- cjose signs, we verify */

/* Does cjose verify token with the key as the set holds it: its bytes
 * (the secret, or the key's RFC 7638 JSON imported by cjose anew), and
 * its own JWK?  Both must say the same.
 */
static int verifies(const char *token, const lessons_jwk_t *k)
{
    cjose_jwk_t *oct = NULL;
    const cjose_jwk_t *jwk;
    cjose_jws_t *jws;
    cjose_err err;
    uint8_t *plain = NULL;
    size_t plainlen = 0;
    json_t *claims;
    int ok, own;

    assert_true(k->key.len > 0);
    assert_non_null(k->key.jwk);
    if (k->key.type == LESSONS_KEY_SECRET) {
        oct = cjose_jwk_create_oct_spec(k->key.data, k->key.len, &err);
        assert_non_null(oct);
        jwk = oct;
    }
    else {
        oct = cjose_jwk_import((const char *)k->key.data, k->key.len, &err);
        assert_non_null(oct);
        jwk = oct;
    }
    jws = cjose_jws_import(token, strlen(token), &err);
    assert_non_null(jws);
    ok = cjose_jws_verify(jws, jwk, &err);
    own = cjose_jws_verify(jws, k->key.jwk, &err);
    assert_int_equal(ok, own);
    if (ok) {
        assert_true(cjose_jws_get_plaintext(jws, &plain, &plainlen, &err));
        claims = json_loadb((const char *)plain, plainlen, 0, NULL);
        assert_non_null(claims);
        assert_string_equal(json_string_value(json_object_get(claims,
                                                              "sub")),
                            "alice");
        json_decref(claims);
    }
    cjose_jws_release(jws);
    if (oct)
        cjose_jwk_release(oct);
    return ok;
}

static void test_tokens_verify_with_jwk_keys(void **state)
{
    const lessons_keyset_t *set;
    const lessons_jwk_t *r1, *r2, *e256, *e256b, *e384, *e521, *h;
    char *t;

    (void)state;
    set = parse_ok(apr_psprintf(pool, "{\"keys\":["
        "{%s,\"kid\":\"r1\"},{%s,\"kid\":\"r2\"},{%s,\"kid\":\"e256\"},"
        "{%s,\"kid\":\"e256b\"},{%s,\"kid\":\"e384\"},{%s,\"kid\":\"e521\"},"
        "{%s,\"kid\":\"h\"}]}", rsa1.members, rsa2.members, p256.members,
        p256b.members, p384.members, p521.members, oct_members(oct_k)));
    r1 = lessons_keyset_find(set, "r1");
    r2 = lessons_keyset_find(set, "r2");
    e256 = lessons_keyset_find(set, "e256");
    e256b = lessons_keyset_find(set, "e256b");
    e384 = lessons_keyset_find(set, "e384");
    e521 = lessons_keyset_find(set, "e521");
    h = lessons_keyset_find(set, "h");
    assert_true(r1 && r2 && e256 && e256b && e384 && e521 && h);

    t = lj_token(LESSONS_ALG_RS256, rsa1.priv, strlen(rsa1.priv),
                 "{\"sub\":\"alice\"}");
    assert_true(verifies(t, r1));
    assert_false(verifies(t, r2));
    t = lj_token(LESSONS_ALG_RS512, rsa2.priv, strlen(rsa2.priv),
                 "{\"sub\":\"alice\"}");
    assert_true(verifies(t, r2));
    assert_false(verifies(t, r1));

    t = lj_token(LESSONS_ALG_ES256, p256.priv, strlen(p256.priv),
                 "{\"sub\":\"alice\"}");
    assert_true(verifies(t, e256));
    assert_false(verifies(t, e256b));
    t = lj_token(LESSONS_ALG_ES384, p384.priv, strlen(p384.priv),
                 "{\"sub\":\"alice\"}");
    assert_true(verifies(t, e384));
    t = lj_token(LESSONS_ALG_ES512, p521.priv, strlen(p521.priv),
                 "{\"sub\":\"alice\"}");
    assert_true(verifies(t, e521));
    assert_false(verifies(t, e256));

    t = lj_token(LESSONS_ALG_HS256, oct_bytes, sizeof(oct_bytes),
                 "{\"sub\":\"alice\"}");
    assert_true(verifies(t, h));
    t = lj_token(LESSONS_ALG_HS256, oct2_bytes, sizeof(oct_bytes),
                 "{\"sub\":\"alice\"}");
    assert_false(verifies(t, h));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rsa_key),
        cmocka_unit_test(test_ec_keys),
        cmocka_unit_test(test_ec_coordinate_not_reduced),
        cmocka_unit_test(test_fetched_key_by_key),
        cmocka_unit_test(test_fetched_whole_set_refusals),
        cmocka_unit_test(test_same_set),
        cmocka_unit_test(test_oct_key),
        cmocka_unit_test(test_oct_key_from_url),
        cmocka_unit_test(test_oct_key_that_looks_like_pem),
        cmocka_unit_test(test_mixed_set_and_find),
        cmocka_unit_test(test_keycloak_like_set),
        cmocka_unit_test(test_from_key),
        cmocka_unit_test(test_make_detects_the_form),
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_jwk_allows),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_hostile_sets),
        cmocka_unit_test(test_pss_key_with_the_flag),
        cmocka_unit_test(test_one_bad_key_refuses_the_set),
        cmocka_unit_test(test_tokens_verify_with_jwk_keys),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
