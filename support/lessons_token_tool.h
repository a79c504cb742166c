/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_token_tool.h: what lessons-token (support/lessons-token.c) does
 * without a network, apart from its command line, so that the unit tests
 * (t/unit/test_token_tool.c) reach it: the claims of a token, the signing
 * key read from a key file with the module's own key units
 * (lessons_key_read, lessons_key_make: a key the module would refuse is
 * never signed with), the signature (cjose), and the reason a refusal
 * gives (RFC 6750's WWW-Authenticate, RFC 9457's problem document).
 */
#ifndef LESSONS_TOKEN_TOOL_H
#define LESSONS_TOKEN_TOOL_H

#include <cjose/jwk.h>
#include <jansson.h>

#include "apr_pools.h"
#include "apr_tables.h"

#include "keys/lessons_key.h"

/* What a token says besides its signature. */
typedef struct {
    const char *sub;                /* NULL: no sub */
    const char *iss;                /* NULL: no iss */
    const char *aud;                /* NULL: no aud */
    apr_int64_t ttl;                /* seconds from iat to exp, > 0 */
    const apr_array_header_t *claims;
                                    /* more claims, "name=value" each (a
                                     * const char *); a name given twice
                                     * is an array */
} lessons_tool_claims_t;

/* The claims at now: sub, iat, exp and those given, as a new JSON
 * object (json_decref it).  NULL, with *why, when a claim is not
 * name=value, names one the options set (sub, iss, aud, iat, exp), or
 * ttl is not positive.
 */
json_t *lessons_tool_claims(apr_pool_t *p, const lessons_tool_claims_t *c,
                            apr_int64_t now, const char **why);

/* The key that signs *alg, from a key file: HS*, the shared secret as
 * the module reads it (trailing CR/LF dropped, at least 32 bytes); RS*,
 * PS* and ES*, a PEM private key (RSA of at least 2048 bits, EC on the
 * algorithm's curve), unencrypted.  The checks are the module's own
 * (lessons_key_make, lessons_key_misfit; for a private key, on its public
 * half), so what is signed here is a key LessonsJWTKey takes.  *alg
 * LESSONS_ALG_NONE asks for the key's own: HS256 for a secret, RS256 for
 * an RSA key, an EC key's curve's ES*.  NULL with *alg and *jwk (released
 * with p), or why not, naming the file.
 */
const char *lessons_tool_signer(apr_pool_t *p, const char *path,
                                lessons_alg_t *alg, const cjose_jwk_t **jwk);

/* A compact JWS of claims signed with jwk: header alg, typ JWT and kid
 * (when not NULL).  NULL with *token in p, or why not.
 */
const char *lessons_tool_sign(apr_pool_t *p, const cjose_jwk_t *jwk,
                              lessons_alg_t alg, const char *kid,
                              json_t *claims, const char **token);

/* The reason an answer gives, as lines for a terminal: "error: " and
 * "error_description: " from a Bearer (or DPoP) challenge, "title: " and
 * "detail: " from a problem document (a detail equal to the description
 * once).  Control characters are shown as '?'.  Either input may be
 * NULL; "" when neither says anything.
 */
const char *lessons_tool_reason(apr_pool_t *p, const char *www_authenticate,
                                const char *content_type, const char *body,
                                apr_size_t len);

/* s (NULL: "") in p with its control characters shown as '?', so that a
 * server's words cannot write to the terminal.
 */
const char *lessons_tool_printable(apr_pool_t *p, const char *s);

/* The value of parameter name in a challenge ("Bearer realm="x",
 * error="y"), unquoted, or NULL.
 */
const char *lessons_tool_auth_param(apr_pool_t *p, const char *challenge,
                                    const char *name);

#endif /* LESSONS_TOKEN_TOOL_H */
