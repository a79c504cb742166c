/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_key.h: the configured algorithm and key, checked once at
 * start-up so a bad configuration stops the server instead of letting
 * every request fail (or worse, pass).
 */
#ifndef LESSONS_KEY_H
#define LESSONS_KEY_H

#include <jwt.h>
#include "apr_pools.h"

/* Minimum strengths we accept. */
#define LESSONS_HMAC_MIN_BYTES  32      /* RFC 7518 3.2: key >= hash size */
#define LESSONS_RSA_MIN_BITS    2048

/* Parse an algorithm as the admin writes it: exactly one of HS256,
 * HS384, HS512, RS256, RS384, RS512, ES256, ES384, ES512 (upper case).
 * Returns JWT_ALG_INVAL for anything else, "none" included.
 */
jwt_alg_t lessons_alg_parse(const char *name);

/* Read a key file into pool memory.  Trailing CR/LF are dropped, so a
 * secret written by "openssl rand -hex 32 > file" is the 64 hex chars.
 * Returns NULL on success or an error message (unreadable, empty,
 * larger than 64 KiB).
 */
const char *lessons_key_read(apr_pool_t *p, const char *path,
                             const unsigned char **key, apr_size_t *len);

/* Check that the key fits the algorithm: HS* a secret of at least
 * LESSONS_HMAC_MIN_BYTES that is not a PEM block; RS* a PEM RSA public
 * key of at least LESSONS_RSA_MIN_BITS; ES* a PEM EC public key on the
 * algorithm's curve (P-256, P-384, P-521).  Returns NULL when it fits,
 * else a message for the admin.
 */
const char *lessons_key_check(apr_pool_t *p, jwt_alg_t alg,
                              const unsigned char *key, apr_size_t len);

#endif /* LESSONS_KEY_H */
