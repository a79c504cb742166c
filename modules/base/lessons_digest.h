/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_digest.h: SHA-256 (OpenSSL) over a tag and length-prefixed
 * fields, so that no two different inputs feed the same bytes ("ab" +
 * "c" is not "a" + "bc", and an absent field is not an empty one).  For
 * digests other code compares or stores: Idempotency-Key's caller and
 * fingerprint (lessons_idem), a DPoP proof's key (lessons_replay).
 */
#ifndef LESSONS_DIGEST_H
#define LESSONS_DIGEST_H

#include <openssl/evp.h>

#include "apr.h"
#include "apr_pools.h"

#define LESSONS_DIGEST_LEN 32

/* One field: its data (NULL: absent) and length. */
typedef struct {
    const void *data;
    apr_size_t len;
} lessons_digest_field_t;

/* SHA-256 of tag and the n fields, each as its length (8 bytes, big-
 * endian; all ones for an absent field) and its bytes.  1, or 0 when
 * OpenSSL failed (its error queue is cleared).
 */
int lessons_digest_fields(const char *tag,
                          const lessons_digest_field_t *fields, int n,
                          unsigned char out[LESSONS_DIGEST_LEN]);

/* The same with sha256, a SHA-256 fetched once (EVP_MD_fetch) by a
 * caller on a hot path: OpenSSL 3 otherwise looks the algorithm up in
 * its provider store on every digest, about as much work as hashing a
 * token.  NULL: as lessons_digest_fields.
 */
int lessons_digest_fields_md(const EVP_MD *sha256, const char *tag,
                             const lessons_digest_field_t *fields, int n,
                             unsigned char out[LESSONS_DIGEST_LEN]);

/* The n bytes of d in lower-case hex, in p (NUL-terminated). */
char *lessons_digest_hex(apr_pool_t *p, const unsigned char *d,
                         apr_size_t n);

#endif /* LESSONS_DIGEST_H */
