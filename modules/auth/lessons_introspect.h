/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_introspect.h: opaque access tokens, asked about at the
 * provider's introspection endpoint (RFC 7662; issue 44, part 3).  The
 * request (a form POST of the token, the client authenticated with
 * client_secret_basic), the answer read into claims, and how long that
 * answer may be reused, keyed by a digest of the token: the token itself
 * is never a key, nor logged.  httpd-free: the glue fetches (lessons_
 * fetch's bounds) and caches; lessons_decide takes the claims through the
 * same checks as a JWT's.
 */
#ifndef LESSONS_INTROSPECT_H
#define LESSONS_INTROSPECT_H

#include <jansson.h>
#include "apr_pools.h"

#include "base/lessons_digest.h"

/* The largest introspection answer read (bytes): an answer is a handful
 * of claims; a provider sending more is refused as broken, not parsed.
 */
#define LESSONS_INTROSPECT_BODY_MAX     (32 * 1024)

/* Seconds an "active": false answer is reused (at most; never longer
 * than the configured bound).  An inactive token rarely turns active
 * (revoked and expired tokens stay so), but may where the provider has
 * just issued it and its store has not caught up, or where its nbf is
 * near: kept briefly, so that a client (or an attacker) repeating a dead
 * or made-up token costs the provider one call per this many seconds,
 * not one per request, while a fresh token is not shut out for long.
 */
#define LESSONS_INTROSPECT_INACTIVE_TTL 10

/* The default and largest LessonsJWTIntrospectCacheMax (seconds): how
 * long a revocation at the provider may go unseen here.
 */
#define LESSONS_INTROSPECT_CACHE_DEFAULT 60
#define LESSONS_INTROSPECT_CACHE_LIMIT   3600

/* Bytes of a cache key (SHA-256). */
#define LESSONS_INTROSPECT_KEY_LEN      LESSONS_DIGEST_LEN

/* The POST an introspection is: its form body and its Authorization. */
typedef struct {
    const char *body;               /* token=...&token_type_hint=
                                     * access_token */
    apr_size_t body_len;
    const char *authorization;      /* "Basic " and base64 of the form-
                                     * encoded id ":" form-encoded secret
                                     * (RFC 6749 2.3.1) */
} lessons_introspect_request_t;

/* Build the request for token (len bytes, at most LESSONS_TOKEN_MAX_LEN)
 * with the client's id and secret.  NULL, or why not (no token, no
 * client, a token too long).  Everything in p.
 */
const char *lessons_introspect_request(apr_pool_t *p, const char *token,
                                       apr_size_t len, const char *client_id,
                                       const char *secret,
                                       lessons_introspect_request_t *out);

/* s (len bytes) as application/x-www-form-urlencoded has it: letters,
 * digits and "*-._" as they are, a space as "+", every other byte as
 * %XX.  In p.
 */
char *lessons_introspect_form_encode(apr_pool_t *p, const char *s,
                                     apr_size_t len);

typedef enum {
    LESSONS_INTROSPECT_ACTIVE = 0,  /* "active": true, claims well-typed */
    LESSONS_INTROSPECT_INACTIVE,    /* "active": false */
    LESSONS_INTROSPECT_MALFORMED,   /* not a JSON object, "active" missing
                                     * or not a JSON boolean ("true", 1) */
    LESSONS_INTROSPECT_TOO_LARGE,   /* over LESSONS_INTROSPECT_BODY_MAX */
    LESSONS_INTROSPECT_BAD_CLAIMS,  /* exp/iat/nbf not numbers, sub/iss/
                                     * scope not strings, aud not a string
                                     * or strings, cnf not an object */
    LESSONS_INTROSPECT_EXPIRED,     /* active, but exp + leeway is past */
    LESSONS_INTROSPECT_NOT_YET      /* active, but nbf - leeway is ahead */
} lessons_introspect_e;

/* What an answer said. */
typedef struct {
    json_t *claims;                 /* the answer's object (the pool holds
                                     * it): scope, sub, aud, iss, cnf and
                                     * the rest, as a JWT's claims; maybe
                                     * the one the process keeps for every
                                     * request with the token: read-only */
    const char *subject;            /* sub, or NULL */
    double exp, iat, nbf;
    int has_exp, has_iat, has_nbf;
} lessons_introspect_result_t;

/* Read an answer (len bytes, need not be NUL-terminated) into *out.
 * ACTIVE only for a JSON object whose "active" is the JSON true and
 * whose claims have their types; INACTIVE for false (out->claims then
 * NULL); else why not.  The claims are not judged here beyond their
 * types (lessons_introspect_judge, then the section's checks).
 */
lessons_introspect_e lessons_introspect_parse(
    apr_pool_t *p, const char *body, apr_size_t len,
    lessons_introspect_result_t *out);

/* lessons_introspect_parse of an answer already decoded (obj: what it
 * was decoded to, or NULL), for one kept decoded: the same verdicts,
 * out->claims is obj itself, never changed here.
 */
lessons_introspect_e lessons_introspect_read(json_t *obj,
                                             lessons_introspect_result_t *out);

/* An ACTIVE answer's times at now (seconds) with leeway: ACTIVE,
 * EXPIRED or NOT_YET.  Any other rc is given back as it is.  RFC 7662
 * leaves the time to the provider; a provider that says "active" for a
 * token past its own exp is not believed.
 */
lessons_introspect_e lessons_introspect_judge(
    lessons_introspect_e rc, const lessons_introspect_result_t *res,
    apr_int64_t now, long leeway);

/* Until when (seconds since the epoch) the answer of rc may be reused,
 * bounded by max_seconds (LessonsJWTIntrospectCacheMax, > 0): ACTIVE
 * until the earlier of its exp and now + max_seconds; INACTIVE for
 * LESSONS_INTROSPECT_INACTIVE_TTL (at most max_seconds); anything else
 * (a broken answer, an expired token) not at all: 0.  An answer is
 * reused while now < the time returned.
 */
apr_int64_t lessons_introspect_cache_until(
    lessons_introspect_e rc, const lessons_introspect_result_t *res,
    apr_int64_t now, long max_seconds);

/* The cache key of token (len bytes) at endpoint for client_id: SHA-256
 * over the three (lessons_digest_fields_md; sha256 fetched once by the
 * caller, or NULL), so that neither the token nor a prefix of it is
 * held, and an answer of one endpoint or client never serves another's
 * section.  0, or -1 (OpenSSL failed).
 */
int lessons_introspect_key(const EVP_MD *sha256, const char *endpoint,
                           const char *client_id, const char *token,
                           apr_size_t len,
                           unsigned char out[LESSONS_INTROSPECT_KEY_LEN]);

/* Whether token is to be introspected rather than verified as a JWT:
 * not three strict base64url segments whose first is a JSON object
 * (lessons_token_peek_header).  1 or 0.
 */
int lessons_introspect_is_opaque(apr_pool_t *p, const char *token);

/* Words for rc, for a refusal and the log; never the token nor a claim. */
const char *lessons_introspect_describe(lessons_introspect_e rc);

#endif /* LESSONS_INTROSPECT_H */
