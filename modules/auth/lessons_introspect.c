/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_introspect.c: RFC 7662 introspection's request, answer and
 * cache lifetime (see lessons_introspect.h).
 */
#include <math.h>
#include <string.h>

#include <openssl/evp.h>

#include "apr_strings.h"

#include "base/lessons_json.h"
#include "auth/lessons_introspect.h"
#include "auth/lessons_token.h"

static const char lessons_hex[] = "0123456789ABCDEF";

char *lessons_introspect_form_encode(apr_pool_t *p, const char *s,
                                     apr_size_t len)
{
    char *out = apr_palloc(p, len * 3 + 1), *o = out;
    apr_size_t i;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
            || (c >= '0' && c <= '9') || c == '*' || c == '-' || c == '.'
            || c == '_') {
            *o++ = (char)c;
        }
        else if (c == ' ') {
            *o++ = '+';
        }
        else {
            *o++ = '%';
            *o++ = lessons_hex[c >> 4];
            *o++ = lessons_hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

const char *lessons_introspect_request(apr_pool_t *p, const char *token,
                                       apr_size_t len, const char *client_id,
                                       const char *secret,
                                       lessons_introspect_request_t *out)
{
    const char *user;
    unsigned char *b64;
    apr_size_t ulen;

    memset(out, 0, sizeof(*out));
    if (!token || len == 0) {
        return "no token";
    }
    if (len > LESSONS_TOKEN_MAX_LEN) {
        return apr_psprintf(p, "the token is longer than %d bytes",
                            LESSONS_TOKEN_MAX_LEN);
    }
    if (!client_id || !*client_id || !secret) {
        return "no client id and secret to authenticate with";
    }
    out->body = apr_pstrcat(p, "token=",
                            lessons_introspect_form_encode(p, token, len),
                            "&token_type_hint=access_token", NULL);
    out->body_len = strlen(out->body);
    /* RFC 6749 2.3.1: each form-encoded first, then joined by ":" (an id
     * holding ":" stays one id) and base64'd as RFC 7617 has it.
     */
    user = apr_pstrcat(p, lessons_introspect_form_encode(p, client_id,
                                                         strlen(client_id)),
                       ":", lessons_introspect_form_encode(p, secret,
                                                           strlen(secret)),
                       NULL);
    ulen = strlen(user);
    b64 = apr_palloc(p, 4 * ((ulen + 2) / 3) + 1);
    EVP_EncodeBlock(b64, (const unsigned char *)user, (int)ulen);
    out->authorization = apr_pstrcat(p, "Basic ", (const char *)b64, NULL);
    return NULL;
}

/* A time claim: absent, or a JSON number (integer or real, finite).
 * 0, or -1 (there and not a number).
 */
static int lessons_introspect_time(json_t *claims, const char *name,
                                   double *value, int *has)
{
    json_t *v = json_object_get(claims, name);

    *has = 0;
    *value = 0;
    if (!v) {
        return 0;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        return -1;
    }
    *value = json_number_value(v);
    *has = 1;
    return 0;
}

/* A string claim: absent or a string. */
static int lessons_introspect_string(json_t *claims, const char *name)
{
    json_t *v = json_object_get(claims, name);

    return !v || json_is_string(v) ? 0 : -1;
}

/* aud: absent, a string, or an array of strings (RFC 7519 4.1.3). */
static int lessons_introspect_aud(json_t *claims)
{
    json_t *v = json_object_get(claims, "aud"), *each;
    size_t i;

    if (!v || json_is_string(v)) {
        return 0;
    }
    if (!json_is_array(v)) {
        return -1;
    }
    json_array_foreach(v, i, each) {
        if (!json_is_string(each)) {
            return -1;
        }
    }
    return 0;
}

lessons_introspect_e lessons_introspect_parse(
    apr_pool_t *p, const char *body, apr_size_t len,
    lessons_introspect_result_t *out)
{
    json_t *obj;

    memset(out, 0, sizeof(*out));
    if (len > LESSONS_INTROSPECT_BODY_MAX) {
        return LESSONS_INTROSPECT_TOO_LARGE;
    }
    if (!body || len == 0) {
        return LESSONS_INTROSPECT_MALFORMED;
    }
    obj = lessons_json_pool_own(p, json_loadb(body, len,
                                              JSON_REJECT_DUPLICATES, NULL));
    return lessons_introspect_read(obj, out);
}

lessons_introspect_e lessons_introspect_read(json_t *obj,
                                             lessons_introspect_result_t *out)
{
    json_t *active, *cnf;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(obj)) {
        return LESSONS_INTROSPECT_MALFORMED;
    }
    /* Only the JSON true: a string "true", a 1, a null are a provider's
     * mistake, and a mistake never opens the gate.
     */
    active = json_object_get(obj, "active");
    if (json_is_false(active)) {
        return LESSONS_INTROSPECT_INACTIVE;
    }
    if (!json_is_true(active)) {
        return LESSONS_INTROSPECT_MALFORMED;
    }
    cnf = json_object_get(obj, "cnf");
    if (lessons_introspect_time(obj, "exp", &out->exp, &out->has_exp)
        || lessons_introspect_time(obj, "iat", &out->iat, &out->has_iat)
        || lessons_introspect_time(obj, "nbf", &out->nbf, &out->has_nbf)
        || lessons_introspect_string(obj, "sub")
        || lessons_introspect_string(obj, "iss")
        || lessons_introspect_string(obj, "scope")
        || lessons_introspect_string(obj, "client_id")
        || lessons_introspect_aud(obj) || (cnf && !json_is_object(cnf))) {
        return LESSONS_INTROSPECT_BAD_CLAIMS;
    }
    out->claims = obj;
    out->subject = json_string_value(json_object_get(obj, "sub"));
    return LESSONS_INTROSPECT_ACTIVE;
}

lessons_introspect_e lessons_introspect_judge(
    lessons_introspect_e rc, const lessons_introspect_result_t *res,
    apr_int64_t now, long leeway)
{
    double t = (double)now, slack = leeway > 0 ? (double)leeway : 0;

    if (rc != LESSONS_INTROSPECT_ACTIVE) {
        return rc;
    }
    if (res->has_exp && res->exp + slack <= t) {
        return LESSONS_INTROSPECT_EXPIRED;
    }
    if (res->has_nbf && res->nbf - slack > t) {
        return LESSONS_INTROSPECT_NOT_YET;
    }
    return rc;
}

apr_int64_t lessons_introspect_cache_until(
    lessons_introspect_e rc, const lessons_introspect_result_t *res,
    apr_int64_t now, long max_seconds)
{
    apr_int64_t bound;

    if (max_seconds <= 0) {
        return 0;
    }
    if (max_seconds > LESSONS_INTROSPECT_CACHE_LIMIT) {
        max_seconds = LESSONS_INTROSPECT_CACHE_LIMIT;
    }
    bound = now + max_seconds;
    if (rc == LESSONS_INTROSPECT_INACTIVE) {
        return now + (max_seconds < LESSONS_INTROSPECT_INACTIVE_TTL
                      ? max_seconds : LESSONS_INTROSPECT_INACTIVE_TTL);
    }
    if (rc != LESSONS_INTROSPECT_ACTIVE) {
        return 0;
    }
    /* exp is where the provider itself stops saying active: never kept
     * past it, the leeway not added.
     */
    if (res->has_exp) {
        if (res->exp <= (double)now) {
            return 0;
        }
        if (res->exp < (double)bound) {
            return (apr_int64_t)res->exp;  /* exp > now >= 0 */
        }
    }
    return bound;
}

int lessons_introspect_key(const EVP_MD *sha256, const char *endpoint,
                           const char *client_id, const char *token,
                           apr_size_t len,
                           unsigned char out[LESSONS_INTROSPECT_KEY_LEN])
{
    lessons_digest_field_t f[3];

    f[0].data = endpoint;
    f[0].len = endpoint ? strlen(endpoint) : 0;
    f[1].data = client_id;
    f[1].len = client_id ? strlen(client_id) : 0;
    f[2].data = token;
    f[2].len = token ? len : 0;
    return lessons_digest_fields_md(sha256, "lessons introspection answer",
                                    f, 3, out) ? 0 : -1;
}

int lessons_introspect_is_opaque(apr_pool_t *p, const char *token)
{
    return lessons_token_peek_header(p, token) == NULL;
}

const char *lessons_introspect_describe(lessons_introspect_e rc)
{
    switch (rc) {
    case LESSONS_INTROSPECT_ACTIVE:
        return "The access token is active.";
    case LESSONS_INTROSPECT_INACTIVE:
        return "The access token is not active.";
    case LESSONS_INTROSPECT_EXPIRED:
        return "The access token has expired.";
    case LESSONS_INTROSPECT_NOT_YET:
        return "The access token is not valid yet.";
    case LESSONS_INTROSPECT_TOO_LARGE:
        return "The token's introspection answer is too large.";
    case LESSONS_INTROSPECT_BAD_CLAIMS:
        return "The token's introspection answer has claims of the wrong "
               "type.";
    default:
        return "The token's introspection answer cannot be read.";
    }
}
