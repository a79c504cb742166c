/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_nonce.c: DPoP nonces from a time slot and a secret (see
 * lessons_nonce.h).  The MAC is OpenSSL's HMAC, its comparison OpenSSL's
 * CRYPTO_memcmp; nothing here is stored between calls.
 */
#include <string.h>

#include "apr_encode.h"
#include "apr_lib.h"
#include "apr_strings.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth/lessons_nonce.h"
#include "keys/lessons_key.h"

#define LESSONS_NONCE_SLOT_LEN  8
#define LESSONS_NONCE_MAC_LEN   32
#define LESSONS_NONCE_RAW_LEN   (LESSONS_NONCE_SLOT_LEN + LESSONS_NONCE_MAC_LEN)

int lessons_nonce_equal(const void *a, const void *b, apr_size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}

/* The slot's eight bytes, big-endian. */
static void lessons_nonce_slot_bytes(apr_uint64_t slot,
                                     unsigned char out[LESSONS_NONCE_SLOT_LEN])
{
    int i;

    for (i = LESSONS_NONCE_SLOT_LEN - 1; i >= 0; i--) {
        out[i] = (unsigned char)(slot & 0xff);
        slot >>= 8;
    }
}

/* HMAC-SHA256(secret, label || slot bytes): 0, or -1. */
static int lessons_nonce_mac(const lessons_nonce_key_t *key,
                             const unsigned char slot[LESSONS_NONCE_SLOT_LEN],
                             unsigned char mac[LESSONS_NONCE_MAC_LEN])
{
    unsigned char in[sizeof(LESSONS_NONCE_LABEL) - 1 + LESSONS_NONCE_SLOT_LEN];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    memcpy(in, LESSONS_NONCE_LABEL, sizeof(LESSONS_NONCE_LABEL) - 1);
    memcpy(in + sizeof(LESSONS_NONCE_LABEL) - 1, slot,
           LESSONS_NONCE_SLOT_LEN);
    if (!HMAC(EVP_sha256(), key->secret, (int)key->len, in, sizeof(in), md,
              &n) || n != LESSONS_NONCE_MAC_LEN) {
        return -1;
    }
    memcpy(mac, md, LESSONS_NONCE_MAC_LEN);
    return 0;
}

static int lessons_nonce_usable(const lessons_nonce_key_t *key)
{
    return key && key->secret && key->len >= LESSONS_NONCE_SECRET_MIN
           && key->len <= LESSONS_NONCE_SECRET_MAX && key->period > 0;
}

int lessons_nonce_make(const lessons_nonce_key_t *key, apr_int64_t now,
                       char out[LESSONS_NONCE_SIZE])
{
    unsigned char raw[LESSONS_NONCE_RAW_LEN];
    char text[LESSONS_NONCE_SIZE + 4];  /* room for apr's own NUL */
    apr_size_t len = 0;

    if (!lessons_nonce_usable(key) || now < 0) {
        return -1;
    }
    lessons_nonce_slot_bytes((apr_uint64_t)(now / key->period), raw);
    if (lessons_nonce_mac(key, raw, raw + LESSONS_NONCE_SLOT_LEN) != 0
        || apr_encode_base64(text, (const char *)raw, sizeof(raw),
                             APR_ENCODE_BASE64URL | APR_ENCODE_NOPADDING,
                             &len) != APR_SUCCESS
        || len != LESSONS_NONCE_TEXT_LEN) {
        return -1;
    }
    memcpy(out, text, LESSONS_NONCE_TEXT_LEN);
    out[LESSONS_NONCE_TEXT_LEN] = '\0';
    return 0;
}

lessons_nonce_e lessons_nonce_check(const lessons_nonce_key_t *key,
                                    const char *nonce, apr_int64_t now,
                                    apr_int64_t *ends)
{
    unsigned char raw[LESSONS_NONCE_RAW_LEN + 4];  /* apr writes a NUL */
    unsigned char mac[LESSONS_NONCE_MAC_LEN];
    char again[LESSONS_NONCE_SIZE + 4];
    apr_uint64_t slot = 0, current;
    apr_size_t i, len = 0;

    if (!nonce || !*nonce) {
        return LESSONS_NONCE_MISSING;
    }
    if (!lessons_nonce_usable(key) || now < 0) {
        return LESSONS_NONCE_FORGED;    /* nothing can be checked: taken
                                         * as none of ours */
    }
    /* Exactly our length, base64url's alphabet only, and the one way of
     * writing those bytes (no other letter for the last bits).
     */
    for (i = 0; nonce[i] && i <= LESSONS_NONCE_TEXT_LEN; i++) {
        if (!apr_isalnum(nonce[i]) && nonce[i] != '-' && nonce[i] != '_') {
            return LESSONS_NONCE_MALFORMED;
        }
    }
    if (i != LESSONS_NONCE_TEXT_LEN
        || apr_decode_base64_binary(raw, nonce, LESSONS_NONCE_TEXT_LEN,
                                    APR_ENCODE_BASE64URL, &len)
           != APR_SUCCESS
        || len != LESSONS_NONCE_RAW_LEN
        || apr_encode_base64(again, (const char *)raw, LESSONS_NONCE_RAW_LEN,
                             APR_ENCODE_BASE64URL | APR_ENCODE_NOPADDING,
                             &len) != APR_SUCCESS
        || len != LESSONS_NONCE_TEXT_LEN
        || memcmp(again, nonce, LESSONS_NONCE_TEXT_LEN) != 0) {
        return LESSONS_NONCE_MALFORMED;
    }
    if (lessons_nonce_mac(key, raw, mac) != 0
        || !lessons_nonce_equal(mac, raw + LESSONS_NONCE_SLOT_LEN,
                                LESSONS_NONCE_MAC_LEN)) {
        return LESSONS_NONCE_FORGED;
    }
    for (i = 0; i < LESSONS_NONCE_SLOT_LEN; i++) {
        slot = (slot << 8) | raw[i];
    }
    current = (apr_uint64_t)(now / key->period);
    if (slot != current && slot + 1 != current) {
        return LESSONS_NONCE_EXPIRED;
    }
    if (ends) {
        *ends = (apr_int64_t)(slot + 2) * key->period;
    }
    return LESSONS_NONCE_OK;
}

const char *lessons_nonce_secret_read(apr_pool_t *p, const char *path,
                                      const unsigned char **secret,
                                      apr_size_t *len)
{
    const unsigned char *bytes = NULL;
    apr_size_t n = 0;
    const char *msg = lessons_key_read(p, path, &bytes, &n);

    /* Read as an HS* key file is (trailing line ends left out). */
    if (msg) {
        return msg;
    }
    if ((msg = lessons_key_public_form(p, bytes, n)) != NULL) {
        return apr_psprintf(p, "secret file %s is no secret: %s", path,
                            msg);
    }
    if (n < LESSONS_NONCE_SECRET_MIN || n > LESSONS_NONCE_SECRET_MAX) {
        return apr_psprintf(p, "secret file %s holds %lu bytes: it needs "
                            "%d to %d (openssl rand -base64 48 makes one)",
                            path, (unsigned long)n, LESSONS_NONCE_SECRET_MIN,
                            LESSONS_NONCE_SECRET_MAX);
    }
    *secret = bytes;
    *len = n;
    return NULL;
}

const char *lessons_nonce_describe(lessons_nonce_e rc)
{
    switch (rc) {
    case LESSONS_NONCE_OK:
        return "The DPoP nonce is current";
    case LESSONS_NONCE_MISSING:
        return "The DPoP proof must carry the nonce of this answer's "
               "DPoP-Nonce header";
    case LESSONS_NONCE_MALFORMED:
    case LESSONS_NONCE_FORGED:
        return "The DPoP proof's nonce is not one this server gave: use "
               "the nonce of this answer's DPoP-Nonce header";
    case LESSONS_NONCE_EXPIRED:
        return "The DPoP proof's nonce is no longer current: use the nonce "
               "of this answer's DPoP-Nonce header";
    }
    return "The DPoP nonce is invalid";
}
