/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_nonce.h: DPoP nonces (RFC 9449 8 and 9) that need no shared
 * state.  A nonce names a time slot and carries an HMAC-SHA256 of it
 * under the server's secret:
 *
 *     base64url(slot || HMAC-SHA256(secret, LESSONS_NONCE_LABEL || slot))
 *
 * slot being the time divided by the period (eight bytes, big-endian).
 * Any process, or any server that holds the same secret, checks a nonce
 * by making the MAC again: nothing is stored, nothing is shared but the
 * secret.  A nonce is taken in its own slot and the next one, so it
 * lives between one and two periods; a client that keeps calling is
 * handed the current one with every answer and never sees it end.
 *
 * The unit knows bytes and time, not httpd: the secret comes from the
 * caller (a file read at start-up, or random bytes made once per server).
 */
#ifndef LESSONS_NONCE_H
#define LESSONS_NONCE_H

#include "apr_pools.h"

/* Seconds a slot lasts: a nonce is taken for 20 to 40 seconds after it
 * is made.  Fixed (docs/directives.md, LessonsJWTDPoPNonce): long enough
 * for a client to answer a 401 with it, short enough that a proof held
 * in the replay table for its nonce's life goes in 40 seconds at most.
 */
#define LESSONS_NONCE_PERIOD        20

/* Bytes of a secret: at least this many from a file (256 bits, the
 * MAC's own strength), at most the other; a random one has the least.
 */
#define LESSONS_NONCE_SECRET_MIN    32
#define LESSONS_NONCE_SECRET_MAX    4096

/* The MAC's input starts with this: the same secret used elsewhere
 * (another program's HMAC of eight bytes) makes no nonce of ours.
 */
#define LESSONS_NONCE_LABEL         "mod_lessons DPoP nonce v1"

/* A nonce: 8 bytes of slot and 32 of MAC, base64url without padding,
 * 54 characters; the buffer holds the NUL too.
 */
#define LESSONS_NONCE_TEXT_LEN      54
#define LESSONS_NONCE_SIZE          (LESSONS_NONCE_TEXT_LEN + 1)

/* The server's nonce key. */
typedef struct {
    const unsigned char *secret;
    apr_size_t len;                 /* LESSONS_NONCE_SECRET_MIN at least */
    apr_int64_t period;             /* seconds a slot lasts (> 0) */
} lessons_nonce_key_t;

typedef enum {
    LESSONS_NONCE_OK = 0,
    LESSONS_NONCE_MISSING,          /* the proof has no nonce */
    LESSONS_NONCE_MALFORMED,        /* not a nonce of this form at all */
    LESSONS_NONCE_FORGED,           /* its MAC is not this secret's */
    LESSONS_NONCE_EXPIRED           /* this secret's, of a slot neither
                                     * the current nor the one before */
} lessons_nonce_e;

/* The nonce of now's slot (now: seconds since the epoch) into out, NUL
 * ended: 0, or -1 (no secret, no period, a time before the epoch).
 */
int lessons_nonce_make(const lessons_nonce_key_t *key, apr_int64_t now,
                       char out[LESSONS_NONCE_SIZE]);

/* Whether nonce (NULL: none came) was made with key for now's slot or
 * the one before.  On OK, *ends (when not NULL) is the first second it
 * is no longer taken.  The MAC is compared in constant time, and before
 * the slot is looked at: a nonce of another secret is FORGED whatever
 * its slot.
 */
lessons_nonce_e lessons_nonce_check(const lessons_nonce_key_t *key,
                                    const char *nonce, apr_int64_t now,
                                    apr_int64_t *ends);

/* Whether len bytes at a and b are equal, in a time that depends on len
 * alone (OpenSSL's CRYPTO_memcmp): 1 or 0.
 */
int lessons_nonce_equal(const void *a, const void *b, apr_size_t len);

/* A secret from the file at path, read as a key file is
 * (lessons_key_read: whole, trailing line ends left out), of
 * LESSONS_NONCE_SECRET_MIN to _MAX bytes: NULL with *secret and *len set
 * (in p), or why not.
 */
const char *lessons_nonce_secret_read(apr_pool_t *p, const char *path,
                                      const unsigned char **secret,
                                      apr_size_t *len);

/* Client-safe words for a result (the error_description, the log). */
const char *lessons_nonce_describe(lessons_nonce_e rc);

#endif /* LESSONS_NONCE_H */
