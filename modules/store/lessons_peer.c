/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_peer.c: read leases' datagrams (lessons_peer.h).  The MAC is
 * OpenSSL's HMAC, its comparison CRYPTO_memcmp; the hex is APR's.  A
 * datagram's bytes are read only within its length, and its fields only
 * once its tag is good.
 */
#include <string.h>

#include "apr_escape.h"
#include "apr_strings.h"
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/lessons_decimal.h"
#include "store/lessons_peer.h"

#define LESSONS_PEER_MAGIC     "LP1 "
#define LESSONS_PEER_MAGIC_LEN (sizeof(LESSONS_PEER_MAGIC) - 1)
/* "LP1 K " before the name */
#define LESSONS_PEER_HEAD_LEN  (LESSONS_PEER_MAGIC_LEN + 2)
/* The shortest datagram: "LP1 R n 0 e\n" and its tag. */
#define LESSONS_PEER_MIN       (LESSONS_PEER_HEAD_LEN + 6 + LESSONS_PEER_TAG_LEN)
/* An int64's digits at most, and one more to see a longer one. */
#define LESSONS_PEER_SUM_MAX   21

/* Printable ASCII but the space, whatever the locale: the fields are
 * split at spaces.
 */
static int lessons_peer_printable(char c)
{
    return (unsigned char)c > 0x20 && (unsigned char)c < 0x7f;
}

/* The length of the field at s (n bytes at most) that stop ends: 1 to
 * max - 1 printable characters (it fits an array of max with its NUL),
 * or 0.  Nothing is read past stop or past n bytes.
 */
static apr_size_t lessons_peer_field(const char *s, apr_size_t n, char stop,
                                     apr_size_t max)
{
    apr_size_t i;

    for (i = 0; i < n && i < max; i++) {
        if (s[i] == stop) {
            return i;
        }
        if (!lessons_peer_printable(s[i])) {
            return 0;
        }
    }
    return 0;
}

/* HMAC-SHA256(key, the n bytes at body) into tag: 1, or 0 (OpenSSL's
 * error queue cleared).
 */
static int lessons_peer_tag(const unsigned char key[LESSONS_PEER_KEY_LEN],
                            const char *body, apr_size_t n,
                            unsigned char tag[LESSONS_PEER_TAG_LEN])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (!HMAC(EVP_sha256(), key, LESSONS_PEER_KEY_LEN,
              (const unsigned char *)body, n, md, &mdlen)
        || mdlen != LESSONS_PEER_TAG_LEN) {
        ERR_clear_error();
        return 0;
    }
    memcpy(tag, md, LESSONS_PEER_TAG_LEN);
    return 1;
}

/* A kind's letter on the wire, and back. */
static const char lessons_peer_letters[] = "RAINHO";

static char lessons_peer_letter(lessons_peer_kind_e kind)
{
    return (unsigned)kind < sizeof(lessons_peer_letters) - 1
           ? lessons_peer_letters[kind] : '\0';
}

static int lessons_peer_kind_of(char c, lessons_peer_kind_e *kind)
{
    const char *at = c ? strchr(lessons_peer_letters, c) : NULL;

    if (!at) {
        return 0;
    }
    *kind = (lessons_peer_kind_e)(at - lessons_peer_letters);
    return 1;
}

static int lessons_peer_has_nonce(lessons_peer_kind_e kind)
{
    return kind == LESSONS_PEER_INVALIDATE || kind == LESSONS_PEER_NONCE_ACK
           || kind == LESSONS_PEER_HOLD || kind == LESSONS_PEER_HOLD_ACK;
}

/* The hexlen lower-case hex digits at hex as bytes into out (hexlen / 2
 * of them): 1, or 0 (out untouched).  apr takes upper case and an odd
 * length too: one spelling here, the one apr_escape_hex writes.
 */
static int lessons_peer_unhex(const char *hex, apr_size_t hexlen,
                              unsigned char *out)
{
    unsigned char b[LESSONS_PEER_KEY_LEN];
    apr_size_t i, len = 0;
    int ok;

    if (hexlen == 0 || hexlen % 2 || hexlen / 2 > sizeof(b)) {
        return 0;
    }
    for (i = 0; i < hexlen; i++) {
        if (!((hex[i] >= '0' && hex[i] <= '9')
              || (hex[i] >= 'a' && hex[i] <= 'f'))) {
            return 0;
        }
    }
    ok = apr_unescape_hex(b, hex, hexlen, 0, &len) == APR_SUCCESS
         && len == hexlen / 2;
    if (ok) {
        memcpy(out, b, len);
    }
    OPENSSL_cleanse(b, sizeof(b));
    return ok;
}

/* The body (text up to its newline) and tag of a datagram into out:
 * its length, or 0 when it does not fit.
 */
static apr_size_t lessons_peer_seal(char *out, apr_size_t outlen,
                                    const char *body, apr_size_t n,
                                    const unsigned char
                                    key[LESSONS_PEER_KEY_LEN])
{
    if (n + LESSONS_PEER_TAG_LEN > LESSONS_PEER_MAX
        || n + LESSONS_PEER_TAG_LEN > outlen) {
        return 0;
    }
    memcpy(out, body, n);
    if (!lessons_peer_tag(key, body, n, (unsigned char *)out + n)) {
        return 0;
    }
    return n + LESSONS_PEER_TAG_LEN;
}

/* The head of the body (n bytes at s), "LP1 K name ": *kind and name,
 * and the offset after it, or 0 (name untouched).
 */
static apr_size_t lessons_peer_head(const char *s, apr_size_t n,
                                    lessons_peer_kind_e *kind,
                                    char name[LESSONS_LEASE_NAME_MAX])
{
    apr_size_t len;

    if (n <= LESSONS_PEER_HEAD_LEN
        || memcmp(s, LESSONS_PEER_MAGIC, LESSONS_PEER_MAGIC_LEN) != 0
        || !lessons_peer_kind_of(s[LESSONS_PEER_MAGIC_LEN], kind)
        || s[LESSONS_PEER_MAGIC_LEN + 1] != ' ') {
        return 0;
    }
    len = lessons_peer_field(s + LESSONS_PEER_HEAD_LEN,
                             n - LESSONS_PEER_HEAD_LEN, ' ',
                             LESSONS_LEASE_NAME_MAX);
    if (len == 0) {
        return 0;
    }
    memcpy(name, s + LESSONS_PEER_HEAD_LEN, len);
    name[len] = '\0';
    return LESSONS_PEER_HEAD_LEN + len + 1;
}

/* The n digits at s as a sum: no sign and no leading zero, so that a
 * version has one spelling.
 */
static int lessons_peer_sum(const char *s, apr_size_t n, apr_int64_t *sum)
{
    if (n == 0 || s[0] < '0' || s[0] > '9' || (s[0] == '0' && n > 1)) {
        return 0;
    }
    return lessons_decimal_i64(s, n, 0, APR_INT64_MAX, sum);
}

apr_size_t lessons_peer_encode(char *out, apr_size_t outlen,
                               lessons_peer_kind_e kind, const char *name,
                               const lessons_lease_version_t *v,
                               const unsigned char key[LESSONS_PEER_KEY_LEN])
{
    /* The longest body (about 200 bytes) fits; were LESSONS_PEER_MAX
     * ever smaller, the truncated body would not fit below.
     */
    char body[LESSONS_PEER_MAX];
    apr_size_t n;

    if (!out || !name || !v || !key
        || (kind != LESSONS_PEER_RAISE && kind != LESSONS_PEER_ACK)
        || v->sum < 0
        || !lessons_peer_field(name, LESSONS_LEASE_NAME_MAX, '\0',
                               LESSONS_LEASE_NAME_MAX)
        || !lessons_peer_field(v->epoch, sizeof(v->epoch), '\0',
                               sizeof(v->epoch))) {
        return 0;
    }
    n = (apr_size_t)apr_snprintf(body, sizeof(body),
                                 LESSONS_PEER_MAGIC "%c %s %" APR_INT64_T_FMT
                                 " %s\n",
                                 lessons_peer_letter(kind),
                                 name, v->sum, v->epoch);
    return lessons_peer_seal(out, outlen, body, n, key);
}

apr_size_t lessons_peer_encode_nonce(char *out, apr_size_t outlen,
                                     lessons_peer_kind_e kind,
                                     const char *name,
                                     const unsigned char
                                     nonce[LESSONS_PEER_NONCE_LEN],
                                     const unsigned char
                                     key[LESSONS_PEER_KEY_LEN])
{
    char body[LESSONS_PEER_MAX];
    char hex[2 * LESSONS_PEER_NONCE_LEN + 1];
    apr_size_t n, len = 0;

    if (!out || !name || !nonce || !key || !lessons_peer_has_nonce(kind)
        || !lessons_peer_field(name, LESSONS_LEASE_NAME_MAX, '\0',
                               LESSONS_LEASE_NAME_MAX)
        || apr_escape_hex(hex, nonce, LESSONS_PEER_NONCE_LEN, 0, &len)
           != APR_SUCCESS
        || len != sizeof(hex)) {
        return 0;
    }
    n = (apr_size_t)apr_snprintf(body, sizeof(body),
                                 LESSONS_PEER_MAGIC "%c %s %s\n",
                                 lessons_peer_letter(kind), name, hex);
    return lessons_peer_seal(out, outlen, body, n, key);
}

lessons_peer_status_e lessons_peer_decode(const char *in, apr_size_t len,
                                          const unsigned char
                                          key[LESSONS_PEER_KEY_LEN],
                                          lessons_peer_msg_t *out)
{
    unsigned char tag[LESSONS_PEER_TAG_LEN];
    lessons_peer_msg_t m;
    apr_size_t n, off, flen;

    if (!in || !key || !out || len < LESSONS_PEER_MIN
        || len > LESSONS_PEER_MAX) {
        return LESSONS_PEER_MALFORMED;
    }
    /* The tag first: until it is good, the body is anyone's. */
    n = len - LESSONS_PEER_TAG_LEN;
    if (!lessons_peer_tag(key, in, n, tag)) {
        return LESSONS_PEER_FAILED;
    }
    if (CRYPTO_memcmp(tag, in + n, LESSONS_PEER_TAG_LEN) != 0) {
        return LESSONS_PEER_BAD_TAG;
    }
    memset(&m, 0, sizeof(m));
    off = lessons_peer_head(in, n, &m.kind, m.name);
    if (off == 0) {
        return LESSONS_PEER_MALFORMED;
    }
    if (lessons_peer_has_nonce(m.kind)) {
        /* The nonce ends the body: nothing after its newline. */
        if (off + 2 * LESSONS_PEER_NONCE_LEN + 1 != n
            || in[n - 1] != '\n'
            || !lessons_peer_unhex(in + off, 2 * LESSONS_PEER_NONCE_LEN,
                                   m.nonce)) {
            return LESSONS_PEER_MALFORMED;
        }
        *out = m;
        return LESSONS_PEER_OK;
    }
    flen = lessons_peer_field(in + off, n - off, ' ', LESSONS_PEER_SUM_MAX);
    if (!lessons_peer_sum(in + off, flen, &m.version.sum)) {
        return LESSONS_PEER_MALFORMED;
    }
    off += flen + 1;
    flen = lessons_peer_field(in + off, n - off, '\n',
                              sizeof(m.version.epoch));
    /* The epoch ends the body: nothing after its newline. */
    if (flen == 0 || off + flen + 1 != n) {
        return LESSONS_PEER_MALFORMED;
    }
    memcpy(m.version.epoch, in + off, flen);
    m.version.epoch[flen] = '\0';
    *out = m;
    return LESSONS_PEER_OK;
}

int lessons_peer_name(const char *in, apr_size_t len,
                      char name[LESSONS_LEASE_NAME_MAX])
{
    lessons_peer_kind_e kind;

    return in && name && len >= LESSONS_PEER_MIN && len <= LESSONS_PEER_MAX
           && lessons_peer_head(in, len - LESSONS_PEER_TAG_LEN, &kind,
                                name) != 0;
}

int lessons_peer_key_hex(const unsigned char key[LESSONS_PEER_KEY_LEN],
                         char hex[LESSONS_PEER_KEY_HEX + 1])
{
    apr_size_t len = 0;

    /* apr's length counts the NUL. */
    return key && hex
           && apr_escape_hex(hex, key, LESSONS_PEER_KEY_LEN, 0, &len)
              == APR_SUCCESS
           && len == LESSONS_PEER_KEY_HEX + 1;
}

int lessons_peer_key_from_hex(const char *hex,
                              unsigned char key[LESSONS_PEER_KEY_LEN])
{
    /* Exactly 64 digits, nothing read past the NUL of a shorter one. */
    return hex && key
           && strnlen(hex, LESSONS_PEER_KEY_HEX + 1) == LESSONS_PEER_KEY_HEX
           && lessons_peer_unhex(hex, LESSONS_PEER_KEY_HEX, key);
}
