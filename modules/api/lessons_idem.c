/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_idem.c: Idempotency-Key's value, its caller, the request's
 * fingerprint and the key's claim number.  Digests are lessons_digest's
 * SHA-256 over length-prefixed fields, so that no two different inputs
 * feed the same bytes ("ab" + "c" is not "a" + "bc").
 */
#include <string.h>

#include "apr_general.h"
#include "apr_strings.h"

#include "base/lessons_digest.h"
#include "api/lessons_idem.h"

#define LESSONS_IDEM_SHA256 LESSONS_DIGEST_LEN

static const char *lessons_idem_hex(apr_pool_t *p,
                                    const lessons_digest_field_t *fields,
                                    int n, const char *tag)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char d[LESSONS_IDEM_SHA256];
    char *hex;
    int i;

    if (!lessons_digest_fields(tag, fields, n, d)) {
        return NULL;
    }
    hex = apr_palloc(p, LESSONS_IDEM_DIGEST_HEX + 1);
    for (i = 0; i < LESSONS_IDEM_SHA256; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 0x0f];
    }
    hex[LESSONS_IDEM_DIGEST_HEX] = '\0';
    return hex;
}

static lessons_digest_field_t lessons_idem_text(const char *s)
{
    lessons_digest_field_t f = { s, s ? strlen(s) : 0 };

    return f;
}

/* RFC 8941 4.2.5, after the opening quote: printable ASCII, with '\'
 * before '"' or '\' only, up to the closing quote.  *end is past it.
 */
static lessons_idem_key_e lessons_idem_string(apr_pool_t *p, const char *s,
                                              const char **key,
                                              const char **end)
{
    char *out = apr_palloc(p, strlen(s) + 1);
    apr_size_t n = 0;

    for (;;) {
        unsigned char c = (unsigned char)*s++;

        if (c == '\0') {
            return LESSONS_IDEM_KEY_UNTERMINATED;
        }
        if (c == '"') {
            break;
        }
        if (c == '\\') {
            c = (unsigned char)*s++;
            if (c != '"' && c != '\\') {
                return c ? LESSONS_IDEM_KEY_BAD_CHAR
                         : LESSONS_IDEM_KEY_UNTERMINATED;
            }
        }
        else if (c < 0x20 || c > 0x7e) {
            return LESSONS_IDEM_KEY_BAD_CHAR;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    *key = out;
    *end = s;
    if (n == 0) {
        return LESSONS_IDEM_KEY_EMPTY;
    }
    return n > LESSONS_IDEM_KEY_MAX ? LESSONS_IDEM_KEY_TOO_LONG
                                    : LESSONS_IDEM_KEY_OK;
}

/* A key without quotes, as Stripe's and most clients send it: printable
 * ASCII up to a space, ';', ',' or the end, taken as the key its quoted
 * form names.  Refused where that would be a guess: a quote, an
 * apostrophe or a backslash (a quoting gone wrong: which characters are
 * the key?), and what RFC 8941 reads as another item whose value is not
 * its text: an inner list '(', a byte sequence ':', a boolean '?'.
 * *end is past the key.
 */
static lessons_idem_key_e lessons_idem_bare(apr_pool_t *p, const char *s,
                                            const char **key,
                                            const char **end)
{
    apr_size_t n = 0;
    unsigned char c;

    if (*s == '\0' || *s == '(' || *s == ':' || *s == '?') {
        return LESSONS_IDEM_KEY_NOT_STRING;
    }
    for (;;) {
        c = (unsigned char)s[n];
        if (c <= 0x20 || c > 0x7e || c == ',' || c == ';') {
            break;
        }
        if (c == '"' || c == '\'' || c == '\\') {
            return LESSONS_IDEM_KEY_BARE_CHAR;
        }
        n++;
    }
    if (c != '\0' && c != ' ' && c != ',' && c != ';') {
        return LESSONS_IDEM_KEY_BAD_CHAR;
    }
    if (n == 0) {
        return LESSONS_IDEM_KEY_NOT_STRING;     /* ",..." or ";..." */
    }
    if (n > LESSONS_IDEM_KEY_MAX) {
        return LESSONS_IDEM_KEY_TOO_LONG;
    }
    *key = apr_pstrmemdup(p, s, n);
    *end = s + n;
    return LESSONS_IDEM_KEY_OK;
}

lessons_idem_key_e lessons_idem_key_parse(apr_pool_t *p, const char *field,
                                          const char **key)
{
    const char *s = field ? field : "", *end = NULL, *k = NULL;
    lessons_idem_key_e rc;

    *key = NULL;
    while (*s == ' ') {
        s++;
    }
    rc = *s == '"' ? lessons_idem_string(p, s + 1, &k, &end)
                   : lessons_idem_bare(p, s, &k, &end);
    if (rc != LESSONS_IDEM_KEY_OK) {
        return rc;
    }
    if (*end == ';') {
        return LESSONS_IDEM_KEY_PARAMETERS;
    }
    while (*end == ' ') {
        end++;
    }
    if (*end) {
        /* "a", "b": two fields of the header, or a list. */
        return *end == ',' ? LESSONS_IDEM_KEY_NOT_STRING
                           : LESSONS_IDEM_KEY_TRAILING;
    }
    *key = k;
    return LESSONS_IDEM_KEY_OK;
}

const char *lessons_idem_key_describe(lessons_idem_key_e rc)
{
    switch (rc) {
    case LESSONS_IDEM_KEY_OK:
        return "a valid key";
    case LESSONS_IDEM_KEY_NOT_STRING:
        return "not one key, quoted or not: an empty value, a list, the "
               "header given more than once, or what RFC 8941 reads as "
               "an inner list '(', a byte sequence ':' or a boolean '?'";
    case LESSONS_IDEM_KEY_BAD_CHAR:
        return "a character outside printable ASCII, or a backslash "
               "before anything but '\"' or '\\'";
    case LESSONS_IDEM_KEY_BARE_CHAR:
        return "a quote, an apostrophe or a backslash in a key without "
               "quotes";
    case LESSONS_IDEM_KEY_UNTERMINATED:
        return "no closing quote";
    case LESSONS_IDEM_KEY_PARAMETERS:
        return "parameters (';') after the key, which the API defines "
               "none of";
    case LESSONS_IDEM_KEY_TRAILING:
        return "something after the key: a space in a key without "
               "quotes, or anything after the closing quote";
    case LESSONS_IDEM_KEY_EMPTY:
        return "an empty key";
    case LESSONS_IDEM_KEY_TOO_LONG:
        return "longer than " APR_STRINGIFY(LESSONS_IDEM_KEY_MAX)
               " characters";
    }
    return "not a valid key";
}

const char *lessons_idem_caller(apr_pool_t *p, const char *verifier,
                                const char *issuer, const char *subject,
                                const char *user)
{
    lessons_digest_field_t f[4];

    if (!verifier || !*verifier
        || ((!subject || !*subject) && (!user || !*user))) {
        return NULL;
    }
    /* The verifier first: what a token claims (its iss) names a caller
     * only among the tokens of the keys that vouched for it.  Which of
     * the two names the caller is part of the scope: a subject "x" is
     * not the user "x" of a token without a subject.
     */
    f[0] = lessons_idem_text(verifier);
    f[1] = lessons_idem_text(issuer);
    f[2] = lessons_idem_text(subject && *subject ? subject : NULL);
    f[3] = lessons_idem_text(subject && *subject ? NULL : user);
    return lessons_idem_hex(p, f, 4, "mod_lessons idempotency caller 2");
}

const char *lessons_idem_fingerprint(apr_pool_t *p, const char *method,
                                     const char *path, const char *caller,
                                     const char *body, apr_size_t len)
{
    lessons_digest_field_t f[4];

    f[0] = lessons_idem_text(method ? method : "");
    f[1] = lessons_idem_text(path ? path : "");
    f[2] = lessons_idem_text(caller ? caller : "");
    f[3].data = body ? body : "";
    f[3].len = body ? len : 0;
    return lessons_idem_hex(p, f, 4, "mod_lessons idempotency request 1");
}

apr_int64_t lessons_idem_claim_id(const char *caller, const char *key)
{
    lessons_digest_field_t f[2];
    unsigned char d[LESSONS_IDEM_SHA256];
    apr_uint64_t v = 0;
    int i;

    f[0] = lessons_idem_text(caller ? caller : "");
    f[1] = lessons_idem_text(key ? key : "");
    if (!lessons_digest_fields("mod_lessons idempotency claim 1", f, 2, d)) {
        return 0;
    }
    for (i = 0; i < 8; i++) {
        v = (v << 8) | d[i];
    }
    return (apr_int64_t)v;
}
