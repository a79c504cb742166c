/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_dpop.h: DPoP proofs (RFC 9449).  A client that holds a key
 * signs, for each request, a short JWT naming the method, the URI, the
 * time, a unique id and the hash of its access token, and puts its
 * public key in the proof's header; the access token is bound to that
 * key by its "cnf": {"jkt": thumbprint} claim.  A stolen token is then
 * useless without the key.
 *
 * This unit checks one proof against one request: its key (a public JWK,
 * held to what a JWKS key must be), its signature (cjose, through
 * lessons_token_verify_jws), htm, htu (normalised as RFC 9449 4.3 says,
 * against the URI the server names itself by), iat within a window, ath;
 * and gives the key's RFC 7638 thumbprint and the jti for the caller's
 * binding and replay checks.
 */
#ifndef LESSONS_DPOP_H
#define LESSONS_DPOP_H

#include <jansson.h>
#include "apr_network_io.h"     /* apr_port_t */
#include "apr_pools.h"
#include "keys/lessons_keyset.h"

/* A proof is bounded as a token is (LESSONS_TOKEN_MAX_LEN: an 8192-bit
 * RSA key and signature take under 4 KB); its jti is at most this long,
 * and so is a nonce read from it (the server's are far shorter).
 */
#define LESSONS_DPOP_JTI_MAX      256
#define LESSONS_DPOP_NONCE_MAX    256

/* Bytes of a base64url SHA-256 (a thumbprint, an ath), NUL included. */
#define LESSONS_DPOP_HASH_LEN     44

/* Seconds a proof's iat may be ahead of the server's clock, the
 * section's LessonsJWTLeeway added: a client's clock a little fast, no
 * more.  A proof is kept in the replay table until it is too old, so
 * every second allowed ahead is a second more that each proof holds a
 * slot.
 */
#define LESSONS_DPOP_AHEAD        5

typedef enum {
    LESSONS_DPOP_OK = 0,
    LESSONS_DPOP_MALFORMED,         /* not a JWS, no "jwk" object, claims
                                     * missing or of the wrong type */
    LESSONS_DPOP_BAD_KEY,           /* the jwk: private, weak, another
                                     * curve, not a signing key */
    LESSONS_DPOP_BAD_TYPE,          /* typ is not dpop+jwt */
    LESSONS_DPOP_BAD_ALG,           /* none, HS*, or not the key's */
    LESSONS_DPOP_BAD_SIGNATURE,
    LESSONS_DPOP_BAD_METHOD,        /* htm is not the request's method */
    LESSONS_DPOP_BAD_URI,           /* htu is not the request's URI */
    LESSONS_DPOP_STALE,             /* iat outside the window */
    LESSONS_DPOP_BAD_ATH            /* ath is not the token's hash */
} lessons_dpop_e;

/* The request a proof must be for. */
typedef struct {
    const char *method;             /* as sent: "GET" */
    const char *uri;                /* this server's URI for it
                                     * (lessons_dpop_server_uri):
                                     * scheme://host[:port]/path; a query
                                     * is ignored */
    const char *token;              /* the access token it comes with */
    apr_int64_t now;                /* seconds since the epoch */
    long window;                    /* iat may be this many seconds old */
    long ahead;                     /* ... and this many ahead */
    int nonce_judges;               /* the server asks for nonces: they
                                     * judge freshness (RFC 9449 11.1),
                                     * the iat is not held to the window */
} lessons_dpop_request_t;

/* What a good proof gives the caller. */
typedef struct {
    char jkt[LESSONS_DPOP_HASH_LEN];    /* its key's thumbprint */
    const char *jti;
    apr_int64_t iat;
    const char *nonce;              /* its nonce claim (RFC 9449 8), or
                                     * NULL when it has none; "" when it
                                     * has one that is no short string */
} lessons_dpop_proof_t;

/* Check proof against req.  On OK, *out is filled; else *why (when not
 * NULL) says what failed, for the log (never proof text).
 */
lessons_dpop_e lessons_dpop_check(apr_pool_t *p, const char *proof,
                                  const lessons_dpop_request_t *req,
                                  lessons_dpop_proof_t *out,
                                  const char **why);

/* The RFC 7638 thumbprint of a public JWK (RSA: e, kty, n; EC: crv,
 * kty, x, y; its required members only, in that order, no white space),
 * SHA-256, base64url: 0 and out filled, or -1 (not such a JWK).
 */
int lessons_dpop_thumbprint(const json_t *jwk,
                            char out[LESSONS_DPOP_HASH_LEN]);

/* base64url(SHA-256(data)), no padding (also RFC 8705's x5t#S256 over a
 * certificate's DER, lessons_certbind).  0, or -1.
 */
int lessons_dpop_hash(const void *data, apr_size_t len,
                      char out[LESSONS_DPOP_HASH_LEN]);

/* ath: base64url(SHA-256(token)), RFC 9449 4.2.  0, or -1. */
int lessons_dpop_ath(const char *token, char out[LESSONS_DPOP_HASH_LEN]);

/* A URI as RFC 9449 4.3 compares htu (RFC 3986 6.2.2 and 6.2.3): scheme
 * and host in lower case, the scheme's default port left out, percent-
 * encodings in upper case and unreserved characters decoded, dot
 * segments removed, an empty path made "/", query and fragment dropped.
 * NULL for anything but an absolute http(s) URI with a host and no user
 * information.
 */
const char *lessons_dpop_uri_normalize(apr_pool_t *p, const char *uri);

/* The URI of a request as this server names it, for htu: scheme, host
 * and port as the server knows itself (the caller's: httpd's, never what
 * the client put in the request-target) and the path of target, the
 * request-target as sent -- origin-form ("/path?query") or absolute-form
 * ("https://elsewhere:8443/path?query": only its path is taken), query
 * left out -- normalised as lessons_dpop_uri_normalize.  A host with a
 * ':' and no brackets is an IPv6 address.  NULL when target has no path
 * ("*", authority-form) or these make no URI.
 */
const char *lessons_dpop_server_uri(apr_pool_t *p, const char *scheme,
                                    const char *host, apr_port_t port,
                                    const char *target);

/* Whether htu names uri, both normalised (RFC 9449 4.3): 1, or 0 (also
 * when either is no absolute http(s) URI).
 */
int lessons_dpop_htu_matches(apr_pool_t *p, const char *htu,
                             const char *uri);

/* Whether iat (a proof's, seconds since the epoch) is within req's
 * window: at most req->window seconds before req->now and at most
 * req->ahead after it.  LESSONS_DPOP_OK, or LESSONS_DPOP_STALE.
 */
lessons_dpop_e lessons_dpop_check_iat(const lessons_dpop_request_t *req,
                                      double iat);

/* Until when (seconds since the epoch) a proof of this iat, taken for
 * req, must be kept to be known as used before: the second after it is
 * too old for req's window.  At most req->window + req->ahead + 1
 * seconds after req->now, since iat is at most req->ahead ahead.
 */
apr_int64_t lessons_dpop_kept_until(const lessons_dpop_request_t *req,
                                    apr_int64_t iat);

/* A token's "cnf": {"jkt": ...} (RFC 9449 6.1): the thumbprint, or NULL
 * when it has none (a bearer token), or "" when "cnf" is there but not
 * such an object (a token bound some other way, which DPoP cannot use).
 */
const char *lessons_dpop_token_jkt(const json_t *claims);

/* The algorithms a proof may be signed with, as a challenge's algs
 * names them ("ES256 ES384 ... PS512").
 */
const char *lessons_dpop_algs_text(apr_pool_t *p);

/* Client-safe words for a result (the error_description, the log). */
const char *lessons_dpop_describe(lessons_dpop_e rc);

#endif /* LESSONS_DPOP_H */
