/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_dpop.c: one proof against one request.  The proof's key comes
 * from the proof itself, so it is held to everything a JWKS key is
 * (lessons_keyset: public members only, sizes, curves, fitting algs)
 * before cjose verifies anything with it; then the claims are read
 * from the bytes the signature covers.
 */
#include <string.h>

#include "apr_encode.h"
#include "apr_lib.h"
#include "apr_strings.h"
#include "apr_uri.h"
#include <openssl/evp.h>

#include "auth/lessons_dpop.h"
#include "auth/lessons_token.h"

/* base64url(SHA-256(data)), no padding: 43 characters and a NUL. */
int lessons_dpop_hash(const void *data, apr_size_t len,
                             char out[LESSONS_DPOP_HASH_LEN])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    char text[2 * EVP_MAX_MD_SIZE];     /* room for any digest's base64 */
    unsigned int n = 0;
    apr_size_t elen = 0;

    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32
        || apr_encode_base64_binary(text, md, n, APR_ENCODE_BASE64URL
                                    | APR_ENCODE_NOPADDING, &elen)
           != APR_SUCCESS
        || elen >= LESSONS_DPOP_HASH_LEN) {
        return -1;
    }
    memcpy(out, text, elen);
    out[elen] = '\0';
    return 0;
}

int lessons_dpop_ath(const char *token, char out[LESSONS_DPOP_HASH_LEN])
{
    return token ? lessons_dpop_hash(token, strlen(token), out) : -1;
}

int lessons_dpop_thumbprint(const json_t *jwk,
                            char out[LESSONS_DPOP_HASH_LEN])
{
    static const char *const rsa[] = { "e", "kty", "n", NULL };
    static const char *const ec[] = { "crv", "kty", "x", "y", NULL };
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    const char *const *names = !kty ? NULL
                             : strcmp(kty, "RSA") == 0 ? rsa
                             : strcmp(kty, "EC") == 0 ? ec : NULL;
    json_t *canon;
    char *text = NULL;
    int rc = -1;

    if (!names || !(canon = json_object())) {
        return -1;
    }
    /* The required members only; jansson writes them sorted, without
     * white space, as RFC 7638 3 asks.
     */
    for (; *names; names++) {
        json_t *v = json_object_get(jwk, *names);

        if (!json_is_string(v) || json_object_set(canon, *names, v) != 0) {
            goto done;
        }
    }
    text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
    rc = text ? lessons_dpop_hash(text, strlen(text), out) : -1;
done:
    free(text);
    json_decref(canon);
    return rc;
}

const char *lessons_dpop_token_jkt(const json_t *claims)
{
    json_t *cnf = json_object_get(claims, "cnf"), *jkt;

    if (!cnf) {
        return NULL;
    }
    jkt = json_object_get(cnf, "jkt");
    return json_is_object(cnf) && json_is_string(jkt)
           ? json_string_value(jkt) : "";
}

/* --- htu ------------------------------------------------------------ */

static int lessons_unreserved(int c)
{
    return apr_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* Percent-encodings as RFC 3986 6.2.2.1 and 6.2.2.2 have them: an
 * unreserved character decoded, the rest in upper case.  NULL for a
 * broken encoding.
 */
static char *lessons_pct_normalize(apr_pool_t *p, const char *s)
{
    char *out = apr_palloc(p, strlen(s) + 1), *o = out;

    for (; *s; s++) {
        if (*s != '%') {
            *o++ = *s;
            continue;
        }
        if (!apr_isxdigit(s[1]) || !apr_isxdigit(s[2])) {
            return NULL;
        }
        {
            int c = (apr_isdigit(s[1]) ? s[1] - '0'
                                       : apr_toupper(s[1]) - 'A' + 10) * 16
                    + (apr_isdigit(s[2]) ? s[2] - '0'
                                         : apr_toupper(s[2]) - 'A' + 10);

            if (lessons_unreserved(c)) {
                *o++ = (char)c;
            }
            else {
                *o++ = '%';
                *o++ = (char)apr_toupper(s[1]);
                *o++ = (char)apr_toupper(s[2]);
            }
        }
        s += 2;
    }
    *o = '\0';
    return out;
}

/* RFC 3986 5.2.4, remove_dot_segments, on an absolute path. */
static char *lessons_remove_dots(apr_pool_t *p, const char *in)
{
    char *out = apr_palloc(p, strlen(in) + 2);
    apr_size_t n = 0;

    while (*in) {
        if (strncmp(in, "../", 3) == 0) {
            in += 3;
        }
        else if (strncmp(in, "./", 2) == 0) {
            in += 2;
        }
        else if (strncmp(in, "/./", 3) == 0) {
            in += 2;
        }
        else if (strcmp(in, "/.") == 0) {
            in = "/";
        }
        else if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
            in = in[3] ? in + 3 : "/";
            while (n > 0 && out[--n] != '/') {
            }
        }
        else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) {
            in += strlen(in);
        }
        else {
            do {
                out[n++] = *in++;
            } while (*in && *in != '/');
        }
    }
    out[n] = '\0';
    return out;
}

const char *lessons_dpop_uri_normalize(apr_pool_t *p, const char *uri)
{
    apr_uri_t u;
    apr_port_t deflt;
    const char *host, *path;
    char *lower, *h;

    if (!uri || apr_uri_parse(p, uri, &u) != APR_SUCCESS || !u.scheme
        || !u.hostname || !*u.hostname || u.user || u.password) {
        return NULL;
    }
    if (strcasecmp(u.scheme, "https") == 0) {
        deflt = 443;
    }
    else if (strcasecmp(u.scheme, "http") == 0) {
        deflt = 80;
    }
    else {
        return NULL;
    }
    lower = apr_pstrdup(p, u.hostname);
    for (h = lower; *h; h++) {
        *h = (char)apr_tolower(*h);
    }
    host = lower;
    if (strchr(host, ':')) {
        host = apr_pstrcat(p, "[", host, "]", NULL);    /* IPv6 */
    }
    path = lessons_pct_normalize(p, u.path && *u.path ? u.path : "/");
    if (!path || *path != '/') {
        return NULL;
    }
    path = lessons_remove_dots(p, path);
    return apr_psprintf(p, "%s://%s%s%s%s", deflt == 443 ? "https" : "http",
                        host,
                        u.port_str && *u.port_str && u.port != deflt
                            ? ":" : "",
                        u.port_str && *u.port_str && u.port != deflt
                            ? apr_itoa(p, u.port) : "",
                        *path ? path : "/");
}

const char *lessons_dpop_server_uri(apr_pool_t *p, const char *scheme,
                                    const char *host, apr_port_t port,
                                    const char *target)
{
    const char *path;
    apr_size_t len;

    if (!scheme || !host || !*host || !target) {
        return NULL;
    }
    if (*target == '/') {
        len = strcspn(target, "?#");
        path = apr_pstrmemdup(p, target, len);
    }
    else {
        apr_uri_t u;

        /* absolute-form: the path only; the scheme, host and port the
         * client wrote there are not this server's to take.
         */
        if (apr_uri_parse(p, target, &u) != APR_SUCCESS || !u.scheme
            || !u.hostname) {
            return NULL;
        }
        path = u.path && *u.path ? u.path : "/";
    }
    if (strchr(host, ':') && *host != '[') {
        host = apr_pstrcat(p, "[", host, "]", NULL);
    }
    return lessons_dpop_uri_normalize(p, apr_psprintf(p, "%s://%s:%u%s",
                                                      scheme, host,
                                                      (unsigned)port,
                                                      path));
}

int lessons_dpop_htu_matches(apr_pool_t *p, const char *htu,
                             const char *uri)
{
    const char *mine = lessons_dpop_uri_normalize(p, uri);
    const char *theirs = lessons_dpop_uri_normalize(p, htu);

    return mine && theirs && strcmp(mine, theirs) == 0;
}

lessons_dpop_e lessons_dpop_check_iat(const lessons_dpop_request_t *req,
                                      double iat)
{
    return (double)req->now - iat > (double)req->window
           || iat - (double)req->now > (double)req->ahead
           ? LESSONS_DPOP_STALE : LESSONS_DPOP_OK;
}

apr_int64_t lessons_dpop_kept_until(const lessons_dpop_request_t *req,
                                    apr_int64_t iat)
{
    return iat + req->window + 1;
}

/* --- the proof ------------------------------------------------------ */

/* The algorithms a proof may use: asymmetric ones (RFC 9449 4.2), in
 * the order the challenge names them.
 */
static const lessons_alg_t lessons_dpop_alg_list[] = {
    LESSONS_ALG_ES256, LESSONS_ALG_ES384, LESSONS_ALG_ES512,
    LESSONS_ALG_RS256, LESSONS_ALG_RS384, LESSONS_ALG_RS512,
    LESSONS_ALG_PS256, LESSONS_ALG_PS384, LESSONS_ALG_PS512,
};

#define LESSONS_DPOP_NALGS \
    (sizeof(lessons_dpop_alg_list) / sizeof(lessons_dpop_alg_list[0]))

static lessons_algs_t lessons_dpop_algs(void)
{
    lessons_algs_t algs = 0;
    apr_size_t i;

    for (i = 0; i < LESSONS_DPOP_NALGS; i++) {
        algs |= LESSONS_ALG_BIT(lessons_dpop_alg_list[i]);
    }
    return algs;
}

const char *lessons_dpop_algs_text(apr_pool_t *p)
{
    const char *text = NULL;
    apr_size_t i;

    for (i = 0; i < LESSONS_DPOP_NALGS; i++) {
        const char *name = lessons_alg_name(lessons_dpop_alg_list[i]);

        text = text ? apr_pstrcat(p, text, " ", name, NULL) : name;
    }
    return text ? text : "";
}

/* The proof's own key, held to what a key URL's JWK must be. */
static lessons_dpop_e lessons_dpop_key(apr_pool_t *p, json_t *jwk,
                                       const lessons_keyset_t **set,
                                       const char **why)
{
    json_t *doc = json_pack("{s:[O]}", "keys", jwk);
    lessons_keyset_t *made = NULL;
    const char *err;

    if (!doc) {
        *why = "the proof's jwk cannot be read";
        return LESSONS_DPOP_BAD_KEY;
    }
    err = lessons_keyset_from_jwks(p, doc, LESSONS_JWKS_PUBLIC_ONLY
                                           | LESSONS_JWKS_PSS, &made);
    json_decref(doc);
    if (err) {
        *why = apr_pstrcat(p, "the proof's jwk: ", err, NULL);
        return LESSONS_DPOP_BAD_KEY;
    }
    if (made->nkeys != 1 || made->skipped) {
        *why = "the proof's jwk is not a signing key";
        return LESSONS_DPOP_BAD_KEY;
    }
    *set = made;
    return LESSONS_DPOP_OK;
}

static lessons_dpop_e lessons_dpop_signature(lessons_token_e rc)
{
    switch (rc) {
    case LESSONS_TOKEN_OK:              return LESSONS_DPOP_OK;
    case LESSONS_TOKEN_BAD_ALG:         return LESSONS_DPOP_BAD_ALG;
    case LESSONS_TOKEN_BAD_TYPE:        return LESSONS_DPOP_BAD_TYPE;
    case LESSONS_TOKEN_BAD_SIGNATURE:   return LESSONS_DPOP_BAD_SIGNATURE;
    case LESSONS_TOKEN_KEY_MISFIT:      return LESSONS_DPOP_BAD_KEY;
    default:                            return LESSONS_DPOP_MALFORMED;
    }
}

/* A string claim of at most max bytes, no NUL inside: its value, or
 * NULL.
 */
static const char *lessons_dpop_string(json_t *claims, const char *name,
                                       apr_size_t max)
{
    json_t *v = json_object_get(claims, name);
    const char *s = json_string_value(v);

    return s && *s && json_string_length(v) == strlen(s)
           && strlen(s) <= max ? s : NULL;
}

lessons_dpop_e lessons_dpop_check(apr_pool_t *p, const char *proof,
                                  const lessons_dpop_request_t *req,
                                  lessons_dpop_proof_t *out,
                                  const char **why)
{
    const char *sink, *jti, *htm, *htu, *ath;
    const lessons_keyset_t *set = NULL;
    json_t *header, *jwk, *claims = NULL, *iat;
    char hash[LESSONS_DPOP_HASH_LEN];
    lessons_dpop_e rc;

    if (!why) {
        why = &sink;
    }
    *why = NULL;
    memset(out, 0, sizeof(*out));
    header = lessons_token_peek_header(p, proof);
    jwk = header ? json_object_get(header, "jwk") : NULL;
    if (!json_is_object(jwk)) {
        *why = header ? "the proof has no jwk" : "the proof is not a JWS";
        return LESSONS_DPOP_MALFORMED;
    }
    rc = lessons_dpop_key(p, jwk, &set, why);
    if (rc != LESSONS_DPOP_OK) {
        return rc;
    }
    rc = lessons_dpop_signature(lessons_token_verify_jws(
        p, proof, "dpop+jwt", lessons_dpop_algs(), &set->keys[0],
        &claims));
    if (rc != LESSONS_DPOP_OK) {
        *why = lessons_dpop_describe(rc);
        return rc;
    }
    jti = lessons_dpop_string(claims, "jti", LESSONS_DPOP_JTI_MAX);
    htm = lessons_dpop_string(claims, "htm", 64);
    htu = lessons_dpop_string(claims, "htu", LESSONS_TOKEN_MAX_LEN);
    iat = json_object_get(claims, "iat");
    if (!jti || !htm || !htu || !json_is_number(iat)) {
        *why = "the proof lacks jti, htm, htu or a numeric iat";
        return LESSONS_DPOP_MALFORMED;
    }
    if (!req->method || strcmp(htm, req->method) != 0) {
        *why = "htm is not the request's method";
        return LESSONS_DPOP_BAD_METHOD;
    }
    if (!lessons_dpop_htu_matches(p, htu, req->uri)) {
        *why = "htu is not the request's URI";
        return LESSONS_DPOP_BAD_URI;
    }
    if (!req->nonce_judges
        && lessons_dpop_check_iat(req, json_number_value(iat))
           != LESSONS_DPOP_OK) {
        *why = "iat is outside the window";
        return LESSONS_DPOP_STALE;
    }
    if (req->token) {
        ath = lessons_dpop_string(claims, "ath", LESSONS_DPOP_HASH_LEN);
        if (!ath || lessons_dpop_ath(req->token, hash) != 0
            || strcmp(ath, hash) != 0) {
            *why = "ath is not the access token's hash";
            return LESSONS_DPOP_BAD_ATH;
        }
    }
    if (lessons_dpop_thumbprint(jwk, out->jkt) != 0) {
        *why = "the proof's jwk has no thumbprint";
        return LESSONS_DPOP_BAD_KEY;
    }
    out->jti = apr_pstrdup(p, jti);
    out->iat = (apr_int64_t)json_number_value(iat);
    /* Read, not judged: whether nonces are asked for is the caller's. */
    if (json_object_get(claims, "nonce")) {
        const char *nonce = lessons_dpop_string(claims, "nonce",
                                                LESSONS_DPOP_NONCE_MAX);

        out->nonce = nonce ? apr_pstrdup(p, nonce) : "";
    }
    return LESSONS_DPOP_OK;
}

const char *lessons_dpop_describe(lessons_dpop_e rc)
{
    switch (rc) {
    case LESSONS_DPOP_OK:
        return "The DPoP proof is valid";
    case LESSONS_DPOP_MALFORMED:
        return "The DPoP proof is malformed";
    case LESSONS_DPOP_BAD_KEY:
        return "The DPoP proof's key is not accepted";
    case LESSONS_DPOP_BAD_TYPE:
        return "The DPoP proof's type must be dpop+jwt";
    case LESSONS_DPOP_BAD_ALG:
        return "The DPoP proof is signed with an algorithm that is not "
               "accepted";
    case LESSONS_DPOP_BAD_SIGNATURE:
        return "The DPoP proof signature is invalid";
    case LESSONS_DPOP_BAD_METHOD:
        return "The DPoP proof is for another method";
    case LESSONS_DPOP_BAD_URI:
        return "The DPoP proof is for another URI";
    case LESSONS_DPOP_STALE:
        return "The DPoP proof is too old or too new";
    case LESSONS_DPOP_BAD_ATH:
        return "The DPoP proof is for another access token";
    }
    return "The DPoP proof is invalid";
}
