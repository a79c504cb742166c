/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_claims.h: reading a verified token's claims (issue 9), for
 * `Require jwt-claim NAME VALUE...`, LessonsJWTUserClaim and
 * LessonsJWTExportClaims.  Pure functions over the jansson object that
 * lessons_token_verify_claims hands out; nothing here verifies anything,
 * so only ever pass claims from a token that verified OK.
 */
#ifndef LESSONS_CLAIMS_H
#define LESSONS_CLAIMS_H

#include <jansson.h>
#include "apr_pools.h"

/* Prefix of an exported claim's environment variable. */
#define LESSONS_CLAIMS_ENV_PREFIX  "JWT_CLAIM_"

/* The claim called dotted, or NULL when absent (or claims is not an
 * object, or either argument is NULL).  A dot reaches into nested
 * objects: "realm_access.roles" is claims.realm_access.roles.  A key
 * that exists literally at the top level wins over the nested walk
 * ({"a.b":1,"a":{"b":2}} gives 1 for "a.b"); below the top level every
 * dot separates names.  An empty part ("a..b", ".a", "a.") matches
 * nothing nested.  Borrowed reference: valid while claims is.
 */
json_t *lessons_claims_get(json_t *claims, const char *dotted);

/* 1 when the claim name (as lessons_claims_get finds it) equals one of
 * values: a string equal byte for byte (an embedded NUL never matches),
 * a number or boolean whose compact JSON text equals the value ("42",
 * "1.5", "true"), or an array with such a member; anything else (null,
 * objects, nested arrays, a missing claim) is 0.  NULL entries of values
 * are skipped; nvalues <= 0 is 0.  The top-level "scope" and "scp"
 * claims, when strings, are space-separated lists (RFC 8693 4.2, RFC
 * 9068 2.2.3; Keycloak and Entra ID issue them so): a value matches one
 * word of them.
 */
int lessons_claims_match(json_t *claims, const char *name,
                         const char *const *values, int nvalues);

/* Whether a value may be handed to httpd (r->user, an environment
 * variable, a note, a log line): the one rule for every value the module
 * takes from a token.  It may hold no control character (U+0000-U+001F,
 * U+007F-U+009F: a NUL would end it early, a line break would start a
 * new header or log line) and be at most max bytes.  Nothing is cleaned
 * or cut: a value that breaks the rule is not handed over at all, so
 * that who the user is, or what a claim says, never silently changes.
 */
typedef enum {
    LESSONS_CLAIM_TEXT_OK = 0,
    LESSONS_CLAIM_TEXT_ABSENT,      /* no such claim (or NULL arguments) */
    LESSONS_CLAIM_TEXT_CONTROL,     /* holds a control character */
    LESSONS_CLAIM_TEXT_TOO_LONG,    /* over max bytes */
    LESSONS_CLAIM_TEXT_NOT_NAME,    /* a user name must be a string or an
                                     * integer */
    LESSONS_CLAIM_TEXT_LIST,        /* a string that would read as an
                                     * array's or object's JSON text */
    LESSONS_CLAIM_TEXT_OTHER_ISSUER,/* a qualified user name that reads as
                                     * a user of another issuer too */
    LESSONS_CLAIM_TEXT_NO_MEMORY
} lessons_claim_text_e;

/* The rule alone, on len bytes at text. */
lessons_claim_text_e lessons_claims_text_check(const char *text,
                                               apr_size_t len,
                                               apr_size_t max);

/* The export form of a claim value, in p, into *text when the rule
 * holds (*text is NULL otherwise):
 *   string             as it is; one that starts with "[" or "{" is
 *                      LESSONS_CLAIM_TEXT_LIST (it would read as an
 *                      array or an object)
 *   number, boolean    its JSON text ("42", "1.5", "true")
 *   null               ""
 *   array, object      its compact JSON text (["user","admin"], [],
 *                      {"a":1}): the only texts that start with "[" or
 *                      "{", so that a reader tells an array from a
 *                      string by the first character
 */
lessons_claim_text_e lessons_claims_text(apr_pool_t *p, json_t *value,
                                         apr_size_t max, const char **text);

/* A user name from a claim: a string or an integer (its decimal text),
 * under the same rule; anything else is LESSONS_CLAIM_TEXT_NOT_NAME.
 */
lessons_claim_text_e lessons_claims_user(apr_pool_t *p, json_t *value,
                                         apr_size_t max, const char **text);

/* In a section that accepts several issuers, the user name of user
 * (a name under the rule above) from the issuer its token was verified
 * for: "user@issuer", into *name in p.  Never the same string for two
 * (issuer, user) pairs of one section: a name that also ends with "@"
 * and a longer one of the n issuers (which only issuers holding an "@"
 * can make: "x@a" of issuer "b" beside issuer "a@b") reads as that
 * issuer's, and is LESSONS_CLAIM_TEXT_OTHER_ISSUER, *name NULL.
 */
lessons_claim_text_e lessons_claims_qualify(apr_pool_t *p, const char *user,
                                            const char *issuer,
                                            const char *const *issuers,
                                            int n, const char **name);

/* Why a value was not handed over, for a log line or a 401's
 * description ("holds a control character", ...).
 */
const char *lessons_claims_text_describe(lessons_claim_text_e rc);

/* "JWT_CLAIM_" + name, every byte outside [A-Za-z0-9_] turned into '_'
 * ("realm_access.roles" -> "JWT_CLAIM_realm_access_roles"; each byte of
 * a non-ASCII character becomes one '_').  Different names can give one
 * variable ("a.b", "a-b", "a_b"): configuration should refuse such a
 * pair.  NULL for a NULL or empty name.
 */
const char *lessons_claims_env_name(apr_pool_t *p, const char *name);

#endif /* LESSONS_CLAIMS_H */
