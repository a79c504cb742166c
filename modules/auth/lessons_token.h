/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_token.h: bearer token extraction (RFC 6750) and JWT
 * verification on top of cjose, which checks signatures only:
 * algorithm pinning, segment syntax, signature length and every claim
 * are checked here.
 */
#ifndef LESSONS_TOKEN_H
#define LESSONS_TOKEN_H

#include <jansson.h>
#include "apr_pools.h"
#include "keys/lessons_key.h"
#include "keys/lessons_keyset.h"
#include "auth/lessons_tokencache.h"

/* Longer tokens are refused before anything decodes them. */
#define LESSONS_TOKEN_MAX_LEN  8192

/* Kid-less tokens are tried against at most this many keys of a set. */
#define LESSONS_TOKEN_MAX_TRIES  8

/* Either one key and one algorithm (keys NULL: alg and key), or a key
 * set and the algorithms accepted with it (keys and algs).  Each key
 * decides which algorithms may use it, whatever the policy says.
 */
typedef struct {
    lessons_alg_t alg;                  /* one key: the only algorithm */
    const lessons_key_t *key;       /* one key: must allow alg */
    const lessons_keyset_t *keys;   /* a set: a token with a kid is
                                     * checked against that key only (or,
                                     * when the set has no such kid, its
                                     * kid-less keys); one without against
                                     * the keys that fit its alg */
    lessons_algs_t algs;            /* a set: the accepted algorithms */
    const char *issuer;             /* required iss, or NULL */
    const char *audience;           /* required aud member, or NULL */
    long leeway;                    /* clock skew allowed, seconds */
    int require_at_jwt;             /* only "typ": "at+jwt" (RFC 9068
                                     * 4), never a JWT that may be an
                                     * ID token */
    const unsigned char *fp;        /* its fingerprint, when the caller
                                     * made it once for these very values
                                     * (LESSONS_TOKEN_FP_LEN bytes); NULL:
                                     * lessons_token_verify_cached makes
                                     * it on every call */
} lessons_token_policy_t;

typedef enum {
    LESSONS_BEARER_NONE = 0,        /* no Authorization header */
    LESSONS_BEARER_OTHER_SCHEME,    /* e.g. Basic: not ours to judge */
    LESSONS_BEARER_MALFORMED,       /* "Bearer" but no single token */
    LESSONS_BEARER_OK
} lessons_bearer_e;

/* Extract the token from an Authorization header value.  The scheme is
 * case-insensitive; exactly one token of token68 characters must follow
 * after spaces.  *token points into a pool copy.
 */
lessons_bearer_e lessons_bearer_parse(apr_pool_t *p, const char *header,
                                      const char **token);

/* The same for another scheme that carries one token68, as RFC 9449's
 * "DPoP" does (schemes compare case-insensitively).
 */
lessons_bearer_e lessons_auth_parse(apr_pool_t *p, const char *header,
                                    const char *scheme, const char **token);

typedef enum {
    LESSONS_TOKEN_OK = 0,
    LESSONS_TOKEN_MALFORMED,        /* length, segments, alphabet, header */
    LESSONS_TOKEN_BAD_ALG,          /* header alg is not the configured one */
    LESSONS_TOKEN_CRIT,             /* a crit header we cannot honour */
    LESSONS_TOKEN_BAD_SIGNATURE,    /* of the wrong length, or cjose
                                     * refused it */
    LESSONS_TOKEN_BAD_CLAIMS,       /* payload not an object, wrong types */
    LESSONS_TOKEN_NO_EXP,           /* exp missing */
    LESSONS_TOKEN_EXPIRED,
    LESSONS_TOKEN_NOT_YET_VALID,    /* nbf in the future */
    LESSONS_TOKEN_BAD_ISSUER,
    LESSONS_TOKEN_BAD_AUDIENCE,
    LESSONS_TOKEN_KEY_MISFIT,       /* the server's key does not allow the
                                     * policy's alg: a server fault, 500 */
    LESSONS_TOKEN_BAD_TYPE,         /* typ neither absent nor "JWT", nor
                                     * "at+jwt" */
    LESSONS_TOKEN_NOT_AT_JWT,       /* the policy requires typ at+jwt */
    LESSONS_TOKEN_AT_CLAIMS,        /* an at+jwt without a claim RFC 9068
                                     * 2.2 requires */
    LESSONS_TOKEN_BAD_IAT,          /* iat not a number, or in the future */
    LESSONS_TOKEN_UNKNOWN_KID,      /* a kid the key set does not have (a
                                     * keys URL may fetch the set again) */
    LESSONS_TOKEN_UNKNOWN_ISSUER    /* iss names none of the issuers a
                                     * section accepts (or is absent) */
} lessons_token_e;

/* Verify a compact JWS against the policy at time now (seconds since
 * the epoch).  On LESSONS_TOKEN_OK, *subject is the sub claim copied
 * into p, or NULL when the token has none (sub, if present, must be a
 * string).  Nothing from the token is trusted before this returns OK.
 * Where the policy names an issuer, a token whose payload names another
 * (or none) is LESSONS_TOKEN_BAD_ISSUER once its header has passed,
 * before any key is looked for: never LESSONS_TOKEN_UNKNOWN_KID, which
 * makes a keys URL be asked again.
 */
lessons_token_e lessons_token_verify(apr_pool_t *p,
                                     const lessons_token_policy_t *policy,
                                     const char *token, apr_int64_t now,
                                     const char **subject);

/* Which of n issuers (exact strings) a token names: read from its
 * payload before any signature is checked, only to choose the policy
 * that judges it, never to trust it (that policy's issuer is checked
 * again on the verified payload, and only that issuer's keys are
 * tried).  LESSONS_TOKEN_OK with *index; LESSONS_TOKEN_MALFORMED for
 * what a full verify refuses as malformed (length, segments, alphabet; a
 * payload that is not a JSON object, or has a member twice);
 * LESSONS_TOKEN_UNKNOWN_ISSUER when iss is absent, not a string, or none
 * of them.
 */
lessons_token_e lessons_token_pick_issuer(apr_pool_t *p, const char *token,
                                          const char *const *issuers, int n,
                                          int *index);

/* Bytes of a policy fingerprint. */
#define LESSONS_TOKEN_FP_LEN  LESSONS_TOKENCACHE_FP_LEN

/* The policy's fingerprint: SHA-256 over the algorithm, the key bytes
 * (for a set: the algorithms and the set's digest), the issuer, the
 * audience and the leeway, each length-prefixed (and
 * NULL told apart from ""), so two policies that could judge one token
 * differently never share it.  Cheap (one hash over the key's bytes):
 * lessons_token_verify_cached computes it on every call from the policy
 * it is given, so a fingerprint cannot go stale when a key changes and
 * callers have nothing to fill in.  Returns 0, or -1 when the policy has
 * no key or the hash fails.
 */
int lessons_token_policy_fingerprint(const lessons_token_policy_t *policy,
                                     unsigned char fp[LESSONS_TOKEN_FP_LEN]);

/* lessons_token_verify through a per-process cache of tokens that
 * verified OK (cache NULL: no cache, exactly lessons_token_verify).  A
 * hit needs the same policy fingerprint and the same whole token; its
 * exp, nbf and iat are then checked against now with the policy's leeway
 * as a full verify checks them (LESSONS_TOKEN_EXPIRED,
 * LESSONS_TOKEN_NOT_YET_VALID, LESSONS_TOKEN_BAD_IAT), and an expired
 * entry is dropped.  A miss is a full verify; only an OK result is
 * stored (with its payload text, for lessons_token_verify_claims; not at
 * all when that is over LESSONS_TOKENCACHE_PAYLOAD_MAX bytes).  *subject
 * as for lessons_token_verify (copied into p).
 */
lessons_token_e lessons_token_verify_cached(
    apr_pool_t *p, const lessons_token_policy_t *policy,
    lessons_tokencache_t *cache, const char *token, apr_int64_t now,
    const char **subject);

/* As lessons_token_verify_cached, and *claims (claims may be NULL to
 * skip) gets the verified claims as a jansson object held for p
 * (released by a cleanup on p, as lessons_json_pool_own); NULL unless
 * the result is OK.  The object is the one the cache keeps: shared with
 * every request that presents the token, in every thread, so read and
 * never changed (a caller that must change claims changes a
 * json_deep_copy).  A hit decodes nothing.  A token whose payload exceeds LESSONS_TOKENCACHE_PAYLOAD_MAX
 * bytes is verified in full on every call and never cached.
 */
lessons_token_e lessons_token_verify_claims(
    apr_pool_t *p, const lessons_token_policy_t *policy,
    lessons_tokencache_t *cache, const char *token, apr_int64_t now,
    const char **subject, json_t **claims);

/* The header of a compact JWS, decoded but not verified (a DPoP proof
 * carries the key that verifies it there): an object owned by p, or NULL
 * when the JWS is not three strict base64url segments (at most
 * LESSONS_TOKEN_MAX_LEN) or its header not a JSON object.  Nothing in it
 * is to be trusted before lessons_token_verify_jws says OK.
 */
json_t *lessons_token_peek_header(apr_pool_t *p, const char *jws);

/* The claims of an introspection answer (RFC 7662) judged as a verified
 * JWT's are: exp (where given; an answer may leave it out), nbf and iat
 * with the leeway, the issuer, the audience, sub a string without NUL.
 * The token type is not asked (an opaque token has no typ, nor RFC
 * 9068's claims).  On OK, *subject as for lessons_token_verify.
 */
lessons_token_e lessons_token_check_introspected(apr_pool_t *p,
    const lessons_token_policy_t *policy, json_t *claims, apr_int64_t now,
    const char **subject);

/* A compact JWS that is not an access token (RFC 9449's DPoP proof):
 * the shape of a token; a header whose "typ" is typ (a media type,
 * compared case-insensitively, "application/" may be left out), whose
 * "alg" is one of algs that key allows, without "crit"; and its
 * signature verified (cjose) with key.  On OK, *payload is its claims
 * object, owned by p; no claim is checked here: they are the caller's.
 */
lessons_token_e lessons_token_verify_jws(apr_pool_t *p, const char *jws,
                                         const char *typ,
                                         lessons_algs_t algs,
                                         const lessons_jwk_t *key,
                                         json_t **payload);

/* A fixed, client-safe description of a result, for the
 * error_description attribute and the problem detail.  Never contains
 * token or claim text.
 */
const char *lessons_token_describe(lessons_token_e result);

#endif /* LESSONS_TOKEN_H */
