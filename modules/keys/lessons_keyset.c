/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keyset.c: key sets from a key file or a JWKS (RFC 7517).  Each
 * JWK is checked strictly once, when the set is made: canonical
 * base64url members, sane sizes, a point on its curve, no private
 * material, an "alg" that fits the key.  RSA and EC keys are then made
 * by cjose's own JWK import, from the checked members.
 */
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "apr_encode.h"
#include "apr_strings.h"

#include "keys/lessons_keyset.h"

/* The field primes of the curves we take, big-endian: a coordinate must
 * be below its curve's (SEC 1 2.3.5), which cjose's import leaves to
 * OpenSSL's EC_POINT_set_affine_coordinates, and that reduces modulo p.
 */
static const unsigned char lessons_p256[32] = {
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};
static const unsigned char lessons_p384[48] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
};
static const unsigned char lessons_p521[66] = {
    0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff,
};

/* The field of each curve we take, by its ES* (lessons_key.c names the
 * curves): its length (RFC 7518 6.2.1.2: x and y are exactly this many
 * octets) and prime.
 */
static const struct {
    lessons_alg_t alg;
    apr_size_t bytes;
    const unsigned char *prime;
} lessons_curves[] = {
    { LESSONS_ALG_ES256, 32, lessons_p256 },
    { LESSONS_ALG_ES384, 48, lessons_p384 },
    { LESSONS_ALG_ES512, 66, lessons_p521 },
};

#define LESSONS_NCURVES (sizeof(lessons_curves) / sizeof(lessons_curves[0]))

/* RSA exponents: at least 65537 (FIPS 186-5) and at most 64 bits, the
 * largest OpenSSL uses with a modulus over 3072 bits.
 */
#define LESSONS_RSA_MIN_E     65537UL
#define LESSONS_RSA_MAX_E_BITS  64

/* ------------------------------------------------------------ base64url */

/* Decode a JWK member that must be canonical base64url (RFC 7515 2):
 * only the URL alphabet, no padding, no leftover bits.  apr decodes;
 * encoding the result again and comparing proves the text is the one
 * way of writing those bytes.  NULL, or why not.
 */
static const char *lessons_b64url(apr_pool_t *p, json_t *v,
                                  const unsigned char **out, apr_size_t *olen)
{
    const char *s = json_string_value(v);
    size_t slen = json_string_length(v);
    const unsigned char *raw;
    const char *again;
    apr_size_t rlen = 0, alen = 0;
    size_t i;

    if (!s || slen == 0) {
        return "is empty";
    }
    for (i = 0; i < slen; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
              || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
            return c == '=' ? "is padded (base64url has no \"=\")"
                            : "holds characters outside base64url";
        }
    }
    raw = apr_pdecode_base64_binary(p, s, (apr_ssize_t)slen,
                                    APR_ENCODE_BASE64URL, &rlen);
    if (!raw || rlen == 0) {
        return "is not valid base64url";
    }
    again = apr_pencode_base64_binary(p, raw, (apr_ssize_t)rlen,
                                      APR_ENCODE_BASE64URL, &alen);
    if (!again || alen != slen || memcmp(again, s, slen) != 0) {
        return "is not canonical base64url (leftover bits)";
    }
    *out = raw;
    *olen = rlen;
    return NULL;
}

/* Untrusted text (from a JWKS someone else serves) as it may appear in
 * a log line: printable ASCII only, at most max characters.
 */
static const char *lessons_printable(apr_pool_t *p, const char *s,
                                     apr_size_t max)
{
    apr_size_t n = strlen(s), i;
    char *t;

    if (n > max) {
        n = max;
    }
    t = apr_pstrmemdup(p, s, n);
    for (i = 0; i < n; i++) {
        if ((unsigned char)t[i] < 0x20 || (unsigned char)t[i] > 0x7e) {
            t[i] = '?';
        }
    }
    return strlen(s) > max ? apr_pstrcat(p, t, "...", NULL) : t;
}

#define LESSONS_SHOW_MAX  40

/* ------------------------------------------------------------- one key */

/* What is known of the JWK being read, for messages. */
typedef struct {
    apr_pool_t *p;                  /* the set's pool */
    apr_pool_t *tmp;                /* scratch, gone when the set is made */
    int index;
    const char *kid;                /* in p, or NULL */
    int public_only;                /* oct keys are skipped, not read */
    int pss;                        /* PS* keys are read, not skipped */
    int secrets;                    /* ... and counted here */
    int fatal;                      /* the last refusal was of the whole
                                     * set, even where keys are judged one
                                     * by one (private material) */
} lessons_jwk_ctx_t;

static const char *lessons_jwk_err(const lessons_jwk_ctx_t *c,
                                   const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "key 2 (kid "abc"): what" */
static const char *lessons_jwk_err(const lessons_jwk_ctx_t *c,
                                   const char *fmt, ...)
{
    va_list ap;
    const char *what;

    va_start(ap, fmt);
    what = apr_pvsprintf(c->tmp, fmt, ap);
    va_end(ap);
    if (c->kid) {
        return apr_psprintf(c->p, "key %d (kid \"%s\"): %s", c->index,
                            c->kid, what);
    }
    return apr_psprintf(c->p, "key %d: %s", c->index, what);
}

/* A member that must be a canonical base64url string. */
static const char *lessons_jwk_bytes(const lessons_jwk_ctx_t *c, json_t *jwk,
                                     const char *name,
                                     const unsigned char **out,
                                     apr_size_t *len)
{
    json_t *v = json_object_get(jwk, name);
    const char *why;

    if (!v) {
        return lessons_jwk_err(c, "\"%s\" is missing", name);
    }
    if (!json_is_string(v)) {
        return lessons_jwk_err(c, "\"%s\" is not a string", name);
    }
    why = lessons_b64url(c->tmp, v, out, len);
    return why ? lessons_jwk_err(c, "\"%s\" %s", name, why) : NULL;
}

/* The key from the checked members (a, b: RSA n, e; EC x, y) by cjose's
 * own import.
 */
static const char *lessons_jwk_import(const lessons_jwk_ctx_t *c,
                                      json_t *jwk,
                                      const unsigned char *a, apr_size_t alen,
                                      const unsigned char *b, apr_size_t blen,
                                      const char *refused, lessons_key_t *out)
{
    if (lessons_key_import_jwk(c->p, jwk, a, alen, b, blen, out)) {
        return lessons_jwk_err(c, "%s", refused);
    }
    return NULL;
}

static const char *lessons_jwk_rsa(const lessons_jwk_ctx_t *c, json_t *jwk,
                                   lessons_key_t *out)
{
    const unsigned char *n, *e;
    apr_size_t nlen = 0, elen = 0;
    BIGNUM *bn = NULL, *be = NULL;
    const char *msg = NULL;
    int nbits = 0, ebits;

    if ((msg = lessons_jwk_bytes(c, jwk, "n", &n, &nlen))
        || (msg = lessons_jwk_bytes(c, jwk, "e", &e, &elen))) {
        return msg;
    }
    if (nlen > INT_MAX || elen > INT_MAX) {
        return lessons_jwk_err(c, "RSA members too large");
    }
    /* RFC 7518 6.3.1: the minimal octets, so no leading zero. */
    if (n[0] == 0) {
        return lessons_jwk_err(c, "RSA modulus \"n\" starts with a zero "
                               "octet");
    }
    if (e[0] == 0) {
        return lessons_jwk_err(c, "RSA exponent \"e\" starts with a zero "
                               "octet");
    }
    bn = BN_bin2bn(n, (int)nlen, NULL);
    be = BN_bin2bn(e, (int)elen, NULL);
    if (!bn || !be) {
        msg = lessons_jwk_err(c, "out of memory");
        goto done;
    }
    nbits = BN_num_bits(bn);
    ebits = BN_num_bits(be);
    if (nbits < LESSONS_RSA_MIN_BITS) {
        msg = lessons_jwk_err(c, "RSA modulus of %d bits, at least %d "
                              "needed", nbits, LESSONS_RSA_MIN_BITS);
    }
    else if (nbits > LESSONS_RSA_MAX_BITS) {
        msg = lessons_jwk_err(c, "RSA modulus of %d bits, at most %d "
                              "allowed", nbits, LESSONS_RSA_MAX_BITS);
    }
    else if (!BN_is_odd(bn)) {
        msg = lessons_jwk_err(c, "RSA modulus is even");
    }
    else if (!BN_is_odd(be)) {
        msg = lessons_jwk_err(c, "RSA exponent is even");
    }
    else if (ebits > LESSONS_RSA_MAX_E_BITS) {
        msg = lessons_jwk_err(c, "RSA exponent of %d bits, at most %d "
                              "allowed", ebits, LESSONS_RSA_MAX_E_BITS);
    }
    else if (BN_get_word(be) < LESSONS_RSA_MIN_E) {
        msg = lessons_jwk_err(c, "RSA exponent %lu is too small, at least "
                              "%lu needed", (unsigned long)BN_get_word(be),
                              LESSONS_RSA_MIN_E);
    }
done:
    BN_free(bn);
    BN_free(be);
    ERR_clear_error();
    if (msg) {
        return msg;
    }
    memset(out, 0, sizeof(*out));
    out->type = LESSONS_KEY_RSA;
    out->bits = nbits;
    return lessons_jwk_import(c, jwk, n, nlen, e, elen,
                              "the verifier (cjose) does not take \"n\" "
                              "and \"e\" as an RSA key", out);
}

static const char *lessons_jwk_ec(const lessons_jwk_ctx_t *c, json_t *jwk,
                                  lessons_key_t *out)
{
    json_t *crv = json_object_get(jwk, "crv");
    const unsigned char *x, *y;
    apr_size_t xlen = 0, ylen = 0, size;
    const char *msg;
    lessons_alg_t alg;
    size_t i;

    if (!crv) {
        return lessons_jwk_err(c, "\"crv\" is missing");
    }
    if (!json_is_string(crv)) {
        return lessons_jwk_err(c, "\"crv\" is not a string");
    }
    alg = lessons_alg_of_crv(json_string_value(crv), json_string_length(crv));
    for (i = 0; i < LESSONS_NCURVES; i++) {
        if (lessons_curves[i].alg == alg) {
            break;
        }
    }
    if (i == LESSONS_NCURVES) {
        return lessons_jwk_err(c, "EC curve \"%s\" is not supported; "
                               "P-256, P-384 and P-521 are",
                               lessons_printable(c->tmp,
                                                 json_string_value(crv),
                                                 LESSONS_SHOW_MAX));
    }
    size = lessons_curves[i].bytes;
    if ((msg = lessons_jwk_bytes(c, jwk, "x", &x, &xlen))
        || (msg = lessons_jwk_bytes(c, jwk, "y", &y, &ylen))) {
        return msg;
    }
    if (xlen != size || ylen != size) {
        return lessons_jwk_err(c, "EC %s coordinates must be %d octets, "
                               "\"x\" has %d and \"y\" %d",
                               json_string_value(crv), (int)size, (int)xlen,
                               (int)ylen);
    }
    if (memcmp(x, lessons_curves[i].prime, size) >= 0
        || memcmp(y, lessons_curves[i].prime, size) >= 0) {
        return lessons_jwk_err(c, "the point (x, y) is not on the curve: "
                               "a coordinate is not below the field's "
                               "prime");
    }
    memset(out, 0, sizeof(*out));
    out->type = LESSONS_KEY_EC;
    out->ec_alg = alg;
    return lessons_jwk_import(c, jwk, x, xlen, y, ylen,
                              "the point (x, y) is not on the curve", out);
}

static const char *lessons_jwk_oct(const lessons_jwk_ctx_t *c, json_t *jwk,
                                   lessons_key_t *out)
{
    const unsigned char *k;
    apr_size_t klen = 0;
    const char *msg;

    if ((msg = lessons_jwk_bytes(c, jwk, "k", &k, &klen))) {
        return msg;
    }
    if (klen < LESSONS_HMAC_MIN_BYTES) {
        return lessons_jwk_err(c, "secret of %d bytes, at least %d needed",
                               (int)klen, LESSONS_HMAC_MIN_BYTES);
    }
    /* Built here, not by lessons_key_make: these bytes are a secret by
     * the JWK's word, and random bytes may happen to look like JSON or
     * hold "-----BEGIN".
     */
    msg = lessons_key_secret(c->p, apr_pmemdup(c->p, k, klen), klen, out);
    return msg ? lessons_jwk_err(c, "%s", msg) : NULL;
}

/* A few words on what a key is, for messages. */
static const char *lessons_key_what(apr_pool_t *p, const lessons_key_t *key)
{
    switch (key->type) {
    case LESSONS_KEY_SECRET:
        return apr_psprintf(p, "a shared secret of %" APR_SIZE_T_FMT
                            " bytes", key->len);
    case LESSONS_KEY_RSA:
        return apr_psprintf(p, "an RSA key of %d bits", key->bits);
    case LESSONS_KEY_EC:
        switch (key->ec_alg) {
        case LESSONS_ALG_ES256:
            return "an EC P-256 key";
        case LESSONS_ALG_ES384:
            return "an EC P-384 key";
        case LESSONS_ALG_ES512:
            return "an EC P-521 key";
        default:
            return "an EC key";
        }
    }
    return "a key";
}

/* The string member name of jwk: 1 (in *s), 0 absent, -1 not a string. */
static int lessons_jwk_string(json_t *jwk, const char *name, const char **s)
{
    json_t *v = json_object_get(jwk, name);

    *s = NULL;
    if (!v) {
        return 0;
    }
    if (!json_is_string(v)) {
        return -1;
    }
    *s = json_string_value(v);
    return 1;
}

/* Members that only a private key has (RFC 7518 6.3.2, 6.2.2). */
static const char *const lessons_private_members[] = {
    "d", "p", "q", "dp", "dq", "qi", "oth"
};

/* The JWK's "kid", when it has one, into c->kid: a string of
 * 1..LESSONS_KID_MAX_LEN printable ASCII characters.  NULL, or why not.
 */
static const char *lessons_jwk_kid(lessons_jwk_ctx_t *c, json_t *obj)
{
    const char *kid;
    size_t i, n;
    int r = lessons_jwk_string(obj, "kid", &kid);

    if (r < 0) {
        return lessons_jwk_err(c, "\"kid\" is not a string");
    }
    if (r == 0) {
        return NULL;
    }
    n = json_string_length(json_object_get(obj, "kid"));
    if (n == 0) {
        return lessons_jwk_err(c, "\"kid\" is empty");
    }
    if (n > LESSONS_KID_MAX_LEN) {
        return lessons_jwk_err(c, "\"kid\" is longer than %d characters",
                               LESSONS_KID_MAX_LEN);
    }
    for (i = 0; i < n; i++) {
        if ((unsigned char)kid[i] < 0x20 || (unsigned char)kid[i] > 0x7e) {
            return lessons_jwk_err(c, "\"kid\" holds characters other "
                                   "than printable ASCII");
        }
    }
    c->kid = apr_pstrmemdup(c->p, kid, n);
    return NULL;
}

/* A published private key is refused whatever it is for: its owner has
 * a leak to fix, and it must not look like a working set.
 */
static const char *lessons_jwk_no_private(lessons_jwk_ctx_t *c, json_t *obj,
                                          const char *kty)
{
    size_t i, n = strcmp(kty, "RSA") == 0
                  ? sizeof(lessons_private_members)
                    / sizeof(lessons_private_members[0]) : 1;

    for (i = 0; i < n; i++) {
        if (json_object_get(obj, lessons_private_members[i])) {
            c->fatal = 1;
            return lessons_jwk_err(c, "holds private key material (\"%s\"); "
                                   "publish only the public key",
                                   lessons_private_members[i]);
        }
    }
    return NULL;
}

/* Why a well-formed JWK is not for us (another use, an algorithm or
 * type we do not verify, a secret from a keys URL), or NULL; sets
 * jwk->alg from its "alg".
 */
static const char *lessons_jwk_not_ours(lessons_jwk_ctx_t *c,
                                        const char *use, const char *alg,
                                        const char *kty, lessons_jwk_t *jwk)
{
    if (use && strcmp(use, "sig") != 0) {
        return apr_psprintf(c->tmp, "\"use\" is \"%s\"",
                            lessons_printable(c->tmp, use, LESSONS_SHOW_MAX));
    }
    jwk->alg = LESSONS_ALG_NONE;
    if (alg) {
        jwk->alg = lessons_alg_parse(alg);
        if (jwk->alg == LESSONS_ALG_INVAL) {
            jwk->alg = LESSONS_ALG_NONE;
        }
        if (jwk->alg == LESSONS_ALG_NONE
            || (lessons_alg_is_pss(jwk->alg) && !c->pss)) {
            jwk->alg = LESSONS_ALG_NONE;
            return apr_psprintf(c->tmp, "\"alg\" \"%s\" is not one we "
                                "verify", lessons_printable(c->tmp, alg,
                                                            LESSONS_SHOW_MAX));
        }
    }
    if (strcmp(kty, "RSA") != 0 && strcmp(kty, "EC") != 0
        && strcmp(kty, "oct") != 0) {
        return apr_psprintf(c->tmp, "\"kty\" \"%s\" is not one we verify",
                            lessons_printable(c->tmp, kty, LESSONS_SHOW_MAX));
    }
    /* A secret that was published is no secret: a keys URL (which any
     * client can read) gives public keys only.
     */
    if (c->public_only && strcmp(kty, "oct") == 0) {
        c->secrets++;
        return "an \"oct\" key (a shared secret) from a keys URL, "
               "which anyone can read, is no secret";
    }
    return NULL;
}

/* RFC 7517 4.3: a "key_ops", when present, must hold "verify", which is
 * what a key checking signatures does.
 */
static const char *lessons_jwk_key_ops(lessons_jwk_ctx_t *c, json_t *obj)
{
    json_t *v = json_object_get(obj, "key_ops"), *op;
    size_t i;
    int verify = 0;

    if (!v) {
        return NULL;
    }
    if (!json_is_array(v)) {
        return lessons_jwk_err(c, "\"key_ops\" is not an array");
    }
    json_array_foreach(v, i, op) {
        if (!json_is_string(op)) {
            return lessons_jwk_err(c, "\"key_ops\" holds a value that is "
                                   "not a string");
        }
        verify |= strcmp(json_string_value(op), "verify") == 0;
    }
    return verify ? NULL
                  : lessons_jwk_err(c, "\"key_ops\" does not hold \"verify\"");
}

/* Read one JWK.  Returns NULL and *skip (a reason, in c->tmp) for a key
 * that is not for us, NULL and *jwk filled for a usable one, or a
 * message that refuses the whole set.
 */
static const char *lessons_jwk_read(lessons_jwk_ctx_t *c, json_t *obj,
                                    lessons_jwk_t *jwk, const char **skip)
{
    const char *kty, *use, *alg;
    const char *msg;
    int r;

    *skip = NULL;
    c->kid = NULL;
    if (!json_is_object(obj)) {
        return lessons_jwk_err(c, "not a JSON object");
    }
    if ((msg = lessons_jwk_kid(c, obj)) != NULL) {
        return msg;
    }
    r = lessons_jwk_string(obj, "kty", &kty);
    if (r == 0) {
        return lessons_jwk_err(c, "\"kty\" is missing");
    }
    if (r < 0) {
        return lessons_jwk_err(c, "\"kty\" is not a string");
    }
    if ((msg = lessons_jwk_no_private(c, obj, kty)) != NULL) {
        return msg;
    }
    if (lessons_jwk_string(obj, "use", &use) < 0) {
        return lessons_jwk_err(c, "\"use\" is not a string");
    }
    if (lessons_jwk_string(obj, "alg", &alg) < 0) {
        return lessons_jwk_err(c, "\"alg\" is not a string");
    }
    if (alg && strcasecmp(alg, "none") == 0) {
        return lessons_jwk_err(c, "\"alg\" is \"%s\"",
                               lessons_printable(c->tmp, alg, 4));
    }
    if ((*skip = lessons_jwk_not_ours(c, use, alg, kty, jwk)) != NULL) {
        return NULL;
    }
    if ((msg = lessons_jwk_key_ops(c, obj)) != NULL) {
        return msg;
    }

    jwk->kid = c->kid;
    if (kty[0] == 'R') {
        msg = lessons_jwk_rsa(c, obj, &jwk->key);
    }
    else if (kty[0] == 'E') {
        msg = lessons_jwk_ec(c, obj, &jwk->key);
    }
    else {
        msg = lessons_jwk_oct(c, obj, &jwk->key);
    }
    if (msg) {
        return msg;
    }
    if (jwk->alg != LESSONS_ALG_NONE && !lessons_key_allows(&jwk->key, jwk->alg)) {
        return lessons_jwk_err(c, "\"alg\" %s does not fit %s",
                               lessons_alg_name(jwk->alg),
                               lessons_key_what(c->tmp, &jwk->key));
    }
    return NULL;
}

/* -------------------------------------------------------------- digest */

static int lessons_digest_u64(EVP_MD_CTX *md, apr_uint64_t v)
{
    unsigned char b[8];
    int i;

    for (i = 7; i >= 0; i--) {
        b[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    return EVP_DigestUpdate(md, b, sizeof(b));
}

/* Length-prefixed fields, so no two different sets feed the same bytes. */
static const char *lessons_keyset_digest(lessons_keyset_t *set)
{
    static const char tag[] = "mod_lessons key set 1";
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int dlen = 0;
    int ok, i;

    ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL)
         && EVP_DigestUpdate(md, tag, sizeof(tag))
         && lessons_digest_u64(md, (apr_uint64_t)set->nkeys);
    for (i = 0; ok && i < set->nkeys; i++) {
        const lessons_jwk_t *k = &set->keys[i];
        apr_size_t kidlen = k->kid ? strlen(k->kid) : 0;

        ok = lessons_digest_u64(md, k->kid ? 1 : 0)
             && lessons_digest_u64(md, kidlen)
             && (kidlen == 0 || EVP_DigestUpdate(md, k->kid, kidlen))
             && lessons_digest_u64(md, (apr_uint64_t)(apr_int64_t)k->alg)
             && lessons_digest_u64(md, (apr_uint64_t)k->key.type)
             && lessons_digest_u64(md, k->key.len)
             && EVP_DigestUpdate(md, k->key.data, k->key.len);
    }
    ok = ok && EVP_DigestFinal_ex(md, set->digest, &dlen)
         && dlen == LESSONS_KEYSET_DIGEST_LEN;
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok ? NULL : "cannot compute the key set's digest";
}

/* ---------------------------------------------------------------- sets */

static const char *lessons_algs_names(apr_pool_t *p, lessons_algs_t algs);
static int lessons_jwk_fits(const lessons_jwk_t *k, lessons_algs_t algs);
static const char *lessons_jwk_misfit(apr_pool_t *p, const lessons_jwk_t *k,
                                      const char *who, const char *names);

/* Read key i into jwk: NULL with *skip (why it is left out, in p) or
 * without (usable), or a refusal of the whole set.  Leniently (a
 * provider's set), a key's own faults and a key fitting none of algs
 * (when given) are skips too.
 */
static const char *lessons_jwks_key(lessons_jwk_ctx_t *c, json_t *obj,
                                    int lenient, lessons_algs_t algs,
                                    const char *names, lessons_jwk_t *jwk,
                                    const char **skip)
{
    const char *msg;

    c->fatal = 0;
    msg = lessons_jwk_read(c, obj, jwk, skip);
    if (msg) {
        if (!lenient || c->fatal) {
            return msg;
        }
        *skip = msg;
        return NULL;
    }
    if (*skip) {
        *skip = lessons_jwk_err(c, "%s", *skip);
    }
    else if (lenient && names && !lessons_jwk_fits(jwk, algs)) {
        *skip = lessons_jwk_err(c, "%s", lessons_jwk_misfit(c->tmp, jwk,
                                                           "it", names));
    }
    return NULL;
}

static const char *lessons_jwks_from_root(apr_pool_t *p, apr_pool_t *tmp,
                                          json_t *root, int flags,
                                          lessons_algs_t algs,
                                          lessons_keyset_t **out)
{
    json_t *keys;
    lessons_jwk_t *list;
    lessons_jwk_skip_t *skips;
    lessons_keyset_t *set;
    lessons_jwk_ctx_t c;
    const char *msg, *skip, *names;
    int lenient = (flags & LESSONS_JWKS_LENIENT) != 0;
    size_t i, n;
    int j;

    if (!json_is_object(root)) {
        return "the JWKS is not a JSON object";
    }
    keys = json_object_get(root, "keys");
    if (!keys) {
        return "the JWKS has no \"keys\" member";
    }
    if (!json_is_array(keys)) {
        return "the JWKS \"keys\" member is not an array";
    }
    n = json_array_size(keys);
    if (n == 0) {
        return "the JWKS holds no keys";
    }
    if (n > LESSONS_JWKS_MAX_KEYS) {
        return apr_psprintf(p, "the JWKS holds %d keys, at most %d allowed",
                            (int)n, LESSONS_JWKS_MAX_KEYS);
    }
    names = algs ? lessons_algs_names(tmp, algs) : NULL;
    set = apr_pcalloc(p, sizeof(*set));
    list = apr_pcalloc(p, n * sizeof(*list));
    skips = apr_pcalloc(p, n * sizeof(*skips));
    memset(&c, 0, sizeof(c));
    c.p = p;
    c.tmp = tmp;
    c.public_only = (flags & LESSONS_JWKS_PUBLIC_ONLY) != 0;
    c.pss = (flags & LESSONS_JWKS_PSS) != 0;
    for (i = 0; i < n; i++) {
        lessons_jwk_t *jwk = &list[set->nkeys];

        c.index = (int)i;
        msg = lessons_jwks_key(&c, json_array_get(keys, i), lenient, algs,
                               names, jwk, &skip);
        if (msg) {
            return msg;
        }
        if (skip) {
            skips[set->skipped].kid = c.kid;
            skips[set->skipped].why = skip;
            set->skipped++;
            memset(jwk, 0, sizeof(*jwk));
            continue;
        }
        for (j = 0; jwk->kid && j < set->nkeys; j++) {
            if (list[j].kid && strcmp(list[j].kid, jwk->kid) == 0) {
                return lessons_jwk_err(&c, "another key has the same kid");
            }
        }
        set->nkeys++;
    }
    if (set->nkeys == 0) {
        return apr_psprintf(p, "the JWKS holds no key we can verify with "
                            "(%d skipped; first: %s)", set->skipped,
                            skips[0].why);
    }
    set->keys = list;
    set->skips = skips;
    set->secrets_skipped = c.secrets;
    msg = lessons_keyset_digest(set);
    if (msg) {
        return msg;
    }
    *out = set;
    return NULL;
}

/* A parsed JWKS into a set in p, with a scratch pool of its own. */
static const char *lessons_jwks_root(apr_pool_t *p, json_t *root, int flags,
                                     lessons_algs_t algs,
                                     lessons_keyset_t **set)
{
    apr_pool_t *tmp;
    const char *msg;

    if (apr_pool_create(&tmp, p) != APR_SUCCESS) {
        return "out of memory";
    }
    msg = lessons_jwks_from_root(p, tmp, root, flags, algs, set);
    apr_pool_destroy(tmp);
    return msg;
}

/* Parse text: empty, too large or not JSON is refused here. */
static const char *lessons_jwks_load(apr_pool_t *p, const char *json,
                                     apr_size_t len, int flags,
                                     lessons_algs_t algs,
                                     lessons_keyset_t **set)
{
    json_error_t err;
    json_t *root;
    const char *msg;

    if (!json || len == 0) {
        return "the JWKS is empty";
    }
    if (len > LESSONS_JWKS_MAX_BYTES) {
        return apr_psprintf(p, "the JWKS is larger than %d bytes",
                            LESSONS_JWKS_MAX_BYTES);
    }
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        return apr_psprintf(p, "the JWKS is not valid JSON: %s (line %d, "
                            "column %d)",
                            lessons_printable(p, err.text,
                                              JSON_ERROR_TEXT_LENGTH),
                            err.line, err.column);
    }
    msg = lessons_jwks_root(p, root, flags, algs, set);
    json_decref(root);
    return msg;
}

const char *lessons_keyset_from_jwks(apr_pool_t *p, json_t *root, int flags,
                                     lessons_keyset_t **set)
{
    return lessons_jwks_root(p, root, flags, 0, set);
}

const char *lessons_keyset_parse_jwks(apr_pool_t *p, const char *json,
                                      apr_size_t len, lessons_keyset_t **set)
{
    return lessons_jwks_load(p, json, len, 0, 0, set);
}

const char *lessons_keyset_parse_jwks_ex(apr_pool_t *p, const char *json,
                                         apr_size_t len, int flags,
                                         lessons_keyset_t **set)
{
    return lessons_jwks_load(p, json, len, flags, 0, set);
}

const char *lessons_keyset_parse_fetched(apr_pool_t *p, const char *json,
                                         apr_size_t len, int flags,
                                         lessons_algs_t algs,
                                         lessons_keyset_t **set)
{
    return lessons_jwks_load(p, json, len, flags | LESSONS_JWKS_PUBLIC_ONLY
                                          | LESSONS_JWKS_LENIENT, algs, set);
}

const char *lessons_keyset_from_key(apr_pool_t *p, const lessons_key_t *key,
                                    lessons_keyset_t **out)
{
    lessons_keyset_t *set;
    lessons_jwk_t *jwk;
    const char *msg;

    if (!key || !key->data || key->len == 0) {
        return "no key";
    }
    set = apr_pcalloc(p, sizeof(*set));
    jwk = apr_pcalloc(p, sizeof(*jwk));
    jwk->kid = NULL;
    jwk->alg = LESSONS_ALG_NONE;
    jwk->key = *key;
    set->nkeys = 1;
    set->keys = jwk;
    msg = lessons_keyset_digest(set);
    if (msg) {
        return msg;
    }
    *out = set;
    return NULL;
}

const char *lessons_keyset_make(apr_pool_t *p, const unsigned char *data,
                                apr_size_t len, lessons_keyset_t **set)
{
    return lessons_keyset_make_ex(p, data, len, 0, set);
}

const char *lessons_keyset_make_ex(apr_pool_t *p, const unsigned char *data,
                                   apr_size_t len, int flags,
                                   lessons_keyset_t **set)
{
    lessons_key_t *key = NULL;
    json_t *root;
    apr_size_t i = 0;
    const char *msg;
    int jwks;

    if (!data || len == 0) {
        return "no key";
    }
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r'
                       || data[i] == '\n')) {
        i++;
    }
    if (i < len && data[i] == '{') {
        if (len > LESSONS_JWKS_MAX_BYTES) {
            return lessons_keyset_parse_jwks_ex(p, (const char *)data, len,
                                                flags, set);
        }
        /* A JWKS by its "keys"; JSON that fails to parse gets the
         * parser's words.  Any other JSON (a lone JWK) is refused by
         * lessons_key_make.
         */
        root = json_loadb((const char *)data, len, 0, NULL);
        jwks = !root || json_object_get(root, "keys") != NULL;
        json_decref(root);
        if (jwks) {
            return lessons_jwks_load(p, (const char *)data, len, flags, 0,
                                     set);
        }
    }
    msg = lessons_key_make(p, data, len, &key);
    if (msg) {
        return msg;
    }
    return lessons_keyset_from_key(p, key, set);
}

/* ------------------------------------------------------------- lookups */

int lessons_algs_hmac_only(lessons_algs_t algs)
{
    return algs && !(algs & ~(LESSONS_ALG_BIT(LESSONS_ALG_HS256)
                              | LESSONS_ALG_BIT(LESSONS_ALG_HS384)
                              | LESSONS_ALG_BIT(LESSONS_ALG_HS512)));
}

int lessons_algs_name_pss(lessons_algs_t algs)
{
    int a;

    for (a = LESSONS_ALG_HS256; a < LESSONS_ALG_TERM; a++) {
        if ((algs & LESSONS_ALG_BIT(a)) && lessons_alg_is_pss((lessons_alg_t)a)) {
            return 1;
        }
    }
    return 0;
}

int lessons_jwk_allows(const lessons_jwk_t *jwk, lessons_alg_t alg)
{
    if (!jwk) {
        return 0;
    }
    if (jwk->alg != LESSONS_ALG_NONE && jwk->alg != alg) {
        return 0;
    }
    return lessons_key_allows(&jwk->key, alg);
}

/* The names of algs, "RS256, ES256", or NULL for none. */
static const char *lessons_algs_names(apr_pool_t *p, lessons_algs_t algs)
{
    const char *names = NULL;
    int a;

    for (a = LESSONS_ALG_HS256; a < LESSONS_ALG_TERM; a++) {
        if (algs & LESSONS_ALG_BIT(a)) {
            names = names ? apr_pstrcat(p, names, ", ", lessons_alg_name(
                                            (lessons_alg_t)a), NULL)
                          : lessons_alg_name((lessons_alg_t)a);
        }
    }
    return names;
}

static int lessons_jwk_fits(const lessons_jwk_t *k, lessons_algs_t algs)
{
    int a;

    for (a = LESSONS_ALG_HS256; a < LESSONS_ALG_TERM; a++) {
        if ((algs & LESSONS_ALG_BIT(a))
            && lessons_jwk_allows(k, (lessons_alg_t)a)) {
            return 1;
        }
    }
    return 0;
}

/* Why k (called who) fits none of the algorithms named names. */
static const char *lessons_jwk_misfit(apr_pool_t *p, const lessons_jwk_t *k,
                                      const char *who, const char *names)
{
    const char *hint = "";

    if (k->alg != LESSONS_ALG_NONE) {
        return apr_psprintf(p, "%s is for %s only (its \"alg\"), which "
                            "is not among %s", who,
                            lessons_alg_name(k->alg), names);
    }
    if (k->key.type == LESSONS_KEY_SECRET
        && k->key.len < LESSONS_HMAC_MIN_BYTES) {
        hint = apr_psprintf(p, "; a secret needs at least %d bytes",
                            LESSONS_HMAC_MIN_BYTES);
    }
    else if (k->key.type == LESSONS_KEY_RSA
             && k->key.bits < LESSONS_RSA_MIN_BITS) {
        hint = apr_psprintf(p, "; an RSA key needs at least %d bits",
                            LESSONS_RSA_MIN_BITS);
    }
    return apr_psprintf(p, "%s (%s) fits none of %s%s", who,
                        lessons_key_what(p, &k->key), names, hint);
}

const char *lessons_keyset_check(apr_pool_t *p, const lessons_keyset_t *set,
                                 lessons_algs_t algs)
{
    const char *names = lessons_algs_names(p, algs), *who;
    int i;

    if (!set || set->nkeys < 1 || !set->keys) {
        return "no key";
    }
    if (!names) {
        return "no algorithm to check the keys against";
    }
    for (i = 0; i < set->nkeys; i++) {
        const lessons_jwk_t *k = &set->keys[i];

        if (lessons_jwk_fits(k, algs)) {
            continue;
        }
        who = k->kid ? apr_psprintf(p, "the key with kid \"%s\"", k->kid)
              : set->nkeys == 1 ? "the key"
              : apr_psprintf(p, "usable key %d of %d (no kid)", i + 1,
                             set->nkeys);
        return lessons_jwk_misfit(p, k, who, names);
    }
    return NULL;
}

int lessons_keyset_same(const lessons_keyset_t *a, const lessons_keyset_t *b)
{
    int i;

    if (!a || !b || memcmp(a->digest, b->digest, sizeof(a->digest)) != 0
        || a->skipped != b->skipped || !a->skips != !b->skips) {
        return 0;
    }
    for (i = 0; a->skips && i < a->skipped; i++) {
        if (strcmp(a->skips[i].why, b->skips[i].why) != 0) {
            return 0;
        }
    }
    return 1;
}

const lessons_jwk_t *lessons_keyset_find(const lessons_keyset_t *set,
                                         const char *kid)
{
    int i;

    if (!set || !kid) {
        return NULL;
    }
    for (i = 0; i < set->nkeys; i++) {
        if (set->keys[i].kid && strcmp(set->keys[i].kid, kid) == 0) {
            return &set->keys[i];
        }
    }
    return NULL;
}
