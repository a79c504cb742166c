/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_idem.h: what Idempotency-Key (IETF httpapi draft,
 * draft-ietf-httpapi-idempotency-key-header) needs besides the database:
 * the header's value, one RFC 8941 sf-string or the same key without
 * quotes, read and bounded; the caller a key belongs to; the request's
 * fingerprint; and the number a key's transaction claims it under where
 * writers run side by side.
 * The store keeps the key with the create (lessons_store.h).
 */
#ifndef LESSONS_IDEM_H
#define LESSONS_IDEM_H

#include "apr_pools.h"

/* A key is 1 to this many characters, as the client sent them inside
 * the quotes (escapes undone), or without quotes.  A UUID is 36.
 */
#define LESSONS_IDEM_KEY_MAX     255

/* Callers and fingerprints are SHA-256 digests in lower-case hex. */
#define LESSONS_IDEM_DIGEST_HEX  64

typedef enum {
    LESSONS_IDEM_KEY_OK = 0,
    LESSONS_IDEM_KEY_NOT_STRING,    /* not one key, quoted or not: an
                                     * empty value, a list, two fields,
                                     * an inner list, a byte sequence,
                                     * a boolean */
    LESSONS_IDEM_KEY_BAD_CHAR,      /* a character outside printable
                                     * ASCII, or a backslash before
                                     * anything but '"' or '\' */
    LESSONS_IDEM_KEY_BARE_CHAR,     /* '"', '\'' or '\' in a key
                                     * without quotes: a quoting gone
                                     * wrong, its key a guess */
    LESSONS_IDEM_KEY_UNTERMINATED,  /* no closing quote */
    LESSONS_IDEM_KEY_PARAMETERS,    /* ";name=value" after the key:
                                     * the draft defines none, and one
                                     * we ignored might have meant
                                     * something */
    LESSONS_IDEM_KEY_TRAILING,      /* anything else after the key
                                     * (a space in a bare one) */
    LESSONS_IDEM_KEY_EMPTY,         /* "" */
    LESSONS_IDEM_KEY_TOO_LONG       /* over LESSONS_IDEM_KEY_MAX */
} lessons_idem_key_e;

/* The key in an Idempotency-Key field value (RFC 8941 4.2 for an Item
 * that must be a String, 4.2.5; leading and trailing spaces dropped), or
 * a bare key, the form most clients send: printable ASCII without a
 * space, '"', '\'', '\', ',' or ';', not beginning with '(', ':' or '?'
 * (what RFC 8941 reads as an inner list, a byte sequence, a boolean),
 * the same key as its quoted form.  OK with *key (escapes undone, in p),
 * else why not.
 */
lessons_idem_key_e lessons_idem_key_parse(apr_pool_t *p, const char *field,
                                          const char **key);

/* Why a key was refused, for the log line and the problem's detail
 * (never the key itself).
 */
const char *lessons_idem_key_describe(lessons_idem_key_e rc);

/* The scope a caller's keys live in: a digest of who verified the token
 * (verifier: the keys that vouched for it and the issuer they are for,
 * never a claim), the token's issuer (NULL: none) and subject, or, for
 * a token without a subject, of verifier, issuer and the user the server
 * took from it (LessonsJWTUserClaim), so that two callers' equal keys
 * never meet, and a token verified by one section's keys never claims
 * its way into another's callers.  NULL without a verifier, when the
 * token names no caller at all (no subject, no user), or the digest
 * failed.
 */
const char *lessons_idem_caller(apr_pool_t *p, const char *verifier,
                                const char *issuer, const char *subject,
                                const char *user);

/* The request a key was first sent with: a digest of the method, the
 * path, the caller and the body's bytes.  NULL when the digest failed.
 */
const char *lessons_idem_fingerprint(apr_pool_t *p, const char *method,
                                     const char *path, const char *caller,
                                     const char *body, apr_size_t len);

/* The number a transaction claims a caller's key under (PostgreSQL's
 * advisory locks take one 64-bit number): the first 8 bytes of a digest
 * of caller and key.  0 when the digest failed.
 */
apr_int64_t lessons_idem_claim_id(const char *caller, const char *key);

#endif /* LESSONS_IDEM_H */
