/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_key.h: verification keys.  A key is read and inspected once,
 * at start-up, and from then on it decides which algorithms may use it:
 * a PEM public key is never an HMAC secret, an RSA key never signs ES*,
 * an EC key only its own curve's ES* (the algorithm-confusion attack
 * turns exactly such a mix into a forgery).
 */
#ifndef LESSONS_KEY_H
#define LESSONS_KEY_H

#include <cjose/jwk.h>
#include <jansson.h>
#include <openssl/evp.h>
#include "apr_pools.h"

/* The JWS algorithms (RFC 7518 3.1) a token may be signed with, and
 * none, which is never taken.
 */
typedef enum {
    LESSONS_ALG_NONE = 0,
    LESSONS_ALG_HS256,
    LESSONS_ALG_HS384,
    LESSONS_ALG_HS512,
    LESSONS_ALG_RS256,
    LESSONS_ALG_RS384,
    LESSONS_ALG_RS512,
    LESSONS_ALG_ES256,
    LESSONS_ALG_ES384,
    LESSONS_ALG_ES512,
    LESSONS_ALG_PS256,
    LESSONS_ALG_PS384,
    LESSONS_ALG_PS512,
    LESSONS_ALG_TERM                /* one past the last */
} lessons_alg_t;

#define LESSONS_ALG_INVAL  LESSONS_ALG_TERM     /* not an algorithm */

/* Minimum strengths we accept. */
#define LESSONS_HMAC_MIN_BYTES  32      /* RFC 7518 3.2: key >= hash size */
#define LESSONS_RSA_MIN_BITS    2048

typedef enum {
    LESSONS_KEY_SECRET = 1,         /* shared secret: HS* */
    LESSONS_KEY_RSA,                /* RSA public key: RS* */
    LESSONS_KEY_EC                  /* EC public key: ES* on its curve */
} lessons_key_type_e;

/* A key (the secret, or a public key known by its RFC 7638 form), with
 * what the inspection found, and the same key as the verifier (cjose)
 * takes it.  Read-only once made.
 */
typedef struct {
    lessons_key_type_e type;
    int bits;                       /* RSA modulus bits; 0 otherwise */
    lessons_alg_t ec_alg;               /* EC: the one ES* of its curve */
    const unsigned char *data;      /* a secret's bytes; a public key's
                                     * identity (lessons_key_canon) */
    apr_size_t len;
    const cjose_jwk_t *jwk;         /* for cjose_jws_verify; released
                                     * with the pool the key was made in */
} lessons_key_t;

/* Parse an algorithm as the admin writes it: exactly one of HS256,
 * HS384, HS512, RS256, RS384, RS512, ES256, ES384, ES512, PS256, PS384,
 * PS512, upper case.  Returns LESSONS_ALG_INVAL for anything else,
 * "none" included.
 */
lessons_alg_t lessons_alg_parse(const char *name);

/* Its name as RFC 7518 spells it, or "none". */
const char *lessons_alg_name(lessons_alg_t alg);

/* The ES* of a JWK's curve name ("P-256": ES256), len bytes (the name
 * may hold a NUL); LESSONS_ALG_INVAL for a curve we do not take.
 */
lessons_alg_t lessons_alg_of_crv(const char *crv, size_t len);

/* Is alg one of PS256/384/512 (RSASSA-PSS)? */
int lessons_alg_is_pss(lessons_alg_t alg);

/* The whole of a file (what names it in messages: "key file", "CA
 * file"), NUL-terminated, in p: at most max bytes, a regular file, not
 * empty.  NULL, or why not with the path and the system's words.
 */
const char *lessons_file_read(apr_pool_t *p, const char *path,
                              const char *what, apr_size_t max,
                              const char **data, apr_size_t *len);

/* Read a key file into pool memory.  Trailing CR/LF are dropped, so a
 * secret written by "openssl rand -hex 32 > file" is the 64 hex chars;
 * a DER object (which may end in such a byte) is kept whole.
 * Returns NULL on success or an error message (unreadable, empty,
 * larger than 64 KiB).
 */
const char *lessons_key_read(apr_pool_t *p, const char *path,
                             const unsigned char **key, apr_size_t *len);

/* Why bytes that are public, or a key's own, cannot be a shared secret
 * (PEM text, JSON such as a JWK, an OpenSSH or PuTTY key, anything
 * OpenSSL reads as a DER certificate, public or private key), in p; NULL
 * for bytes that may be one.  An HS* "secret" that is a public key lets
 * anyone who has the key sign tokens.
 */
const char *lessons_key_public_form(apr_pool_t *p, const unsigned char *data,
                                    apr_size_t len);

/* Inspect key bytes and make a key in p.  Anything that looks like PEM
 * must be an RSA or EC public key (a private key, a certificate or
 * another PEM block is refused, never taken as a secret); whatever else
 * lessons_key_public_form names is refused; anything else is a shared
 * secret.
 * Returns NULL with *key set, or a message for the admin.
 */
const char *lessons_key_make(apr_pool_t *p, const unsigned char *data,
                             apr_size_t len, lessons_key_t **key);

/* A public key's identity, the bytes its fingerprints and its set's
 * digest are taken over: RFC 7638's thumbprint input, in p, from its
 * numbers (RSA: a = n, b = e, minimal octets; EC: a = x, b = y, the
 * curve's width; the curve from key->ec_alg).  One text per key, whether
 * it came as PEM or as a JWK.  NULL for a key of another type.
 */
const char *lessons_key_canon(apr_pool_t *p, const lessons_key_t *key,
                              const unsigned char *a, apr_size_t alen,
                              const unsigned char *b, apr_size_t blen);

/* A JWK's public key (RSA or EC) as a key in p: cjose's own import
 * (cjose_jwk_import_json) makes it from jwk, whose members the caller has
 * checked and decoded into a and b as for lessons_key_canon (->data);
 * for EC, cjose checks the point (in range, on the curve, of the curve's
 * order).  key->type, ->bits and ->ec_alg are the caller's.  NULL, or
 * why there is no key.
 */
const char *lessons_key_import_jwk(apr_pool_t *p, json_t *jwk,
                                   const unsigned char *a, apr_size_t alen,
                                   const unsigned char *b, apr_size_t blen,
                                   lessons_key_t *key);

/* A shared secret of len bytes at data (a JWK's "k"), as a key in p,
 * without the inspection lessons_key_make gives key files: the bytes are
 * a secret by the JWK's word.  NULL, or why not.
 */
const char *lessons_key_secret(apr_pool_t *p, const unsigned char *data,
                               apr_size_t len, lessons_key_t *key);

/* How many bytes a signature of alg made with key has (RFC 7518: the
 * hash's for HS*, the modulus's for RS* and PS*, twice a coordinate's
 * for ES*), or 0 when the key does not allow alg.
 */
apr_size_t lessons_key_sig_len(const lessons_key_t *key, lessons_alg_t alg);

/* Does the key allow this algorithm?  The key decides: a secret of at
 * least LESSONS_HMAC_MIN_BYTES only HS*, an RSA key of at least
 * LESSONS_RSA_MIN_BITS only RS* (and PS*), an EC key only the ES* of
 * its curve.
 * Cheap: called wherever a key meets a token.
 */
int lessons_key_allows(const lessons_key_t *key, lessons_alg_t alg);

/* Why the key does not allow alg, for the admin; NULL when it does. */
const char *lessons_key_misfit(apr_pool_t *p, const lessons_key_t *key,
                               lessons_alg_t alg);

/* The private key pkey, whose public half is key (RSA or EC, made by
 * lessons_key_make), as the JWK cjose signs with: the public members and
 * every private one.  Released with p; NULL when pkey lacks a member or
 * key is a secret.  The module only verifies: support/lessons-token signs
 * test tokens with it.
 */
const cjose_jwk_t *lessons_key_signing_jwk(apr_pool_t *p,
                                           const EVP_PKEY *pkey,
                                           const lessons_key_t *key);

/* lessons_key_make then lessons_key_misfit: NULL when the bytes make a
 * key that allows alg, else a message.
 */
const char *lessons_key_check(apr_pool_t *p, lessons_alg_t alg,
                              const unsigned char *key, apr_size_t len);

#endif /* LESSONS_KEY_H */
