/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keyset.h: the keys a policy verifies with.  A key file holds a
 * secret, a PEM public key or a JWKS document (RFC 7517, detected by
 * content); a keys URL serves a JWKS.  Either becomes a read-only key
 * set, inspected once when it is made: each key says which algorithms
 * may use it (its type, its curve, its own "alg"), so no token header
 * can make an RSA or EC key act as an HMAC secret.
 */
#ifndef LESSONS_KEYSET_H
#define LESSONS_KEYSET_H

#include "apr_pools.h"
#include "keys/lessons_key.h"

/* Bounds on what a JWKS may hold, whoever serves it. */
#define LESSONS_JWKS_MAX_BYTES   (256 * 1024)
#define LESSONS_JWKS_MAX_KEYS    64
#define LESSONS_RSA_MAX_BITS     8192
#define LESSONS_KID_MAX_LEN      256

/* Bytes of a key set's digest. */
#define LESSONS_KEYSET_DIGEST_LEN  32

/* A set of algorithms: bit (1u << alg) per lessons_alg_t. */
typedef unsigned int lessons_algs_t;
#define LESSONS_ALG_BIT(alg)  (1u << (unsigned)(alg))

/* One usable key of a set. */
typedef struct {
    const char *kid;                /* its "kid", or NULL (a PEM or secret
                                     * file, or a JWK without one) */
    lessons_alg_t alg;              /* its own "alg", or LESSONS_ALG_NONE
                                     * when it names none (its type
                                     * decides) */
    lessons_key_t key;              /* the secret, or the public key
                                     * (its RFC 7638 form as data), and
                                     * cjose's JWK */
} lessons_jwk_t;

/* A JWK a set left out, and why ("key 2 (kid "abc"): ..."). */
typedef struct {
    const char *kid;                /* its kid, or NULL (none, or one we
                                     * would not read) */
    const char *why;
} lessons_jwk_skip_t;

typedef struct {
    int nkeys;                      /* >= 1 in every set that was made */
    const lessons_jwk_t *keys;
    const lessons_jwk_skip_t *skips;/* the skipped keys, skipped of them */
    int skipped;                    /* JWKs left out as not for us: "use"
                                     * other than "sig", an encryption
                                     * "alg", a kty we do not verify;
                                     * and secrets_skipped; and with
                                     * LESSONS_JWKS_LENIENT, keys that fail
                                     * their checks or fit no algorithm */
    int secrets_skipped;            /* oct keys left out of a keys URL's
                                     * set (LESSONS_JWKS_PUBLIC_ONLY) */
    unsigned char digest[LESSONS_KEYSET_DIGEST_LEN];
                                    /* SHA-256 over every key's kid, alg,
                                     * type and bytes, in order: two sets
                                     * that could judge a token
                                     * differently never share it */
} lessons_keyset_t;

/* Make a set from the bytes of a key file: a JWKS when the bytes are a
 * JSON object with a "keys" member, else exactly one key through
 * lessons_key_make (a secret or a PEM public key; a lone JWK is still
 * refused there).  Returns NULL with *set made in p, or a message for
 * the admin naming what is wrong (which key, by index and kid).
 */
const char *lessons_keyset_make(apr_pool_t *p, const unsigned char *data,
                                apr_size_t len, lessons_keyset_t **set);

/* The same with lessons_keyset_parse_jwks_ex's flags for a JWKS. */
const char *lessons_keyset_make_ex(apr_pool_t *p, const unsigned char *data,
                                   apr_size_t len, int flags,
                                   lessons_keyset_t **set);

/* Parse a JWKS document (a file's, or one fetched from a URL) into a
 * set in p.  Refused, with a message: not a JSON object with a "keys"
 * array; more than LESSONS_JWKS_MAX_BYTES or LESSONS_JWKS_MAX_KEYS;
 * no usable key; two keys with one kid; a kid that is not a string of
 * 1..LESSONS_KID_MAX_LEN printable characters; private key material
 * (RSA "d", "p", "q", "dp", "dq", "qi", "oth"; EC "d"); members missing,
 * of the wrong type or not canonical base64url (padding, other
 * characters, leftover bits, RSA "n"/"e" with a leading zero octet);
 * RSA under LESSONS_RSA_MIN_BITS or over LESSONS_RSA_MAX_BITS bits, or
 * an even or tiny exponent; EC on a curve other than P-256, P-384,
 * P-521, coordinates of the wrong length, or a point not on the curve;
 * oct under LESSONS_HMAC_MIN_BYTES; an "alg" of "none" or one that does
 * not fit the key's type and curve; a "use" that is not a string;
 * "key_ops" without "verify".  Skipped (counted in skipped, not an
 * error): "use" other than "sig", an "alg" that is not a JWS algorithm
 * we verify (RSA-OAEP, EdDSA...; PS256/384/512 without
 * LESSONS_JWKS_PSS), a kty other than RSA, EC and oct.
 */
const char *lessons_keyset_parse_jwks(apr_pool_t *p, const char *json,
                                      apr_size_t len, lessons_keyset_t **set);

/* The same with flags: LESSONS_JWKS_PUBLIC_ONLY skips "oct" keys (shared
 * secrets) as well, counting them in secrets_skipped: for a keys URL,
 * whose set anyone can read.  LESSONS_JWKS_PSS reads keys whose "alg" is
 * PS256/384/512, for a section that names them.  A
 * set left with no key is refused.
 */
#define LESSONS_JWKS_PUBLIC_ONLY  1
#define LESSONS_JWKS_PSS          2
#define LESSONS_JWKS_LENIENT      4
const char *lessons_keyset_parse_jwks_ex(apr_pool_t *p, const char *json,
                                         apr_size_t len, int flags,
                                         lessons_keyset_t **set);

/* The same for a JWKS already parsed (a DPoP proof's "jwk", wrapped):
 * root is only read.
 */
const char *lessons_keyset_from_jwks(apr_pool_t *p, json_t *root, int flags,
                                     lessons_keyset_t **set);

/* A JWKS a provider serves (a keys URL's, a discovered issuer's), judged
 * key by key: public keys only (LESSONS_JWKS_PUBLIC_ONLY and
 * LESSONS_JWKS_LENIENT with flags).  A key that fails its own checks
 * (sizes, curve, members, kid, key_ops) or fits none of algs is skipped
 * with its reason in set->skips, and the others serve: providers publish
 * encryption keys and keys of other algorithms beside the signing keys a
 * section takes.  The whole set is still refused when it is not a JWKS
 * within bounds, when a key holds private material (a leak that must not
 * look like a working set), when two usable keys share a kid (a token
 * naming it would be ambiguous), and when no key is left.
 */
const char *lessons_keyset_parse_fetched(apr_pool_t *p, const char *json,
                                         apr_size_t len, int flags,
                                         lessons_algs_t algs,
                                         lessons_keyset_t **set);

/* Are a and b the same set: the same keys (digest) and the same keys
 * left out for the same reasons?  A fetch that changes only what was
 * skipped is news for the log, not for the token cache.
 */
int lessons_keyset_same(const lessons_keyset_t *a, const lessons_keyset_t *b);

/* Does algs hold PS256, PS384 or PS512? */
int lessons_algs_name_pss(lessons_algs_t algs);

/* Does algs hold HS* and nothing else (so no key a provider publishes,
 * public keys only, can verify with it)?
 */
int lessons_algs_hmac_only(lessons_algs_t algs);

/* A set of exactly one key (no kid, no alg of its own). */
const char *lessons_keyset_from_key(apr_pool_t *p, const lessons_key_t *key,
                                    lessons_keyset_t **set);

/* Does this key allow alg?  Its type decides (lessons_key_allows), and
 * its own "alg", when it has one, must be alg.  Cheap.
 */
int lessons_jwk_allows(const lessons_jwk_t *jwk, lessons_alg_t alg);

/* NULL when every key of the set fits at least one of algs (and algs is
 * not empty); else a message naming the first key that fits none, for
 * configtest and for refusing a fetched set.
 */
const char *lessons_keyset_check(apr_pool_t *p, const lessons_keyset_t *set,
                                 lessons_algs_t algs);

/* The key with this kid, or NULL. */
const lessons_jwk_t *lessons_keyset_find(const lessons_keyset_t *set,
                                         const char *kid);

#endif /* LESSONS_KEYSET_H */
