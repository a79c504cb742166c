/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_token.c: bearer extraction and JWT verification.
 *
 * cjose verifies signatures and nothing else, and leaves to its caller
 * what a JOSE library must not be trusted with: which algorithm a key
 * may verify, and the signature's length.  So: bound the length, insist
 * on three strict base64url segments, pin the header alg ourselves to
 * one the key allows, check the signature's length for that alg and
 * key, let cjose check the signature, then decode and check the claims
 * here with jansson.
 *
 * lessons_token_verify_cached puts lessons_tokencache in front of that:
 * keyed by a fingerprint of the policy (computed here, per call) and the
 * whole token, with the clock checks of every hit done by the same code
 * as a full verify's.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "apr_encode.h"
#include "apr_strings.h"
#include <jansson.h>
#include <openssl/evp.h>
#include <cjose/jws.h>

#include "base/lessons_json.h"
#include "auth/lessons_token.h"

/* The characters of a token, one table lookup each (every request
 * reads its whole token): B64URL, base64url's alphabet (a JWT's
 * segments); B64TOKEN, RFC 6750's b64token, which adds ".", "~", "+"
 * and "/".
 */
#define B64URL    1
#define B64TOKEN  2
#define B64BOTH   (B64URL | B64TOKEN)
static const unsigned char lessons_token_chars[256] = {
    ['A'] = B64BOTH, ['B'] = B64BOTH, ['C'] = B64BOTH, ['D'] = B64BOTH,
    ['E'] = B64BOTH, ['F'] = B64BOTH, ['G'] = B64BOTH, ['H'] = B64BOTH,
    ['I'] = B64BOTH, ['J'] = B64BOTH, ['K'] = B64BOTH, ['L'] = B64BOTH,
    ['M'] = B64BOTH, ['N'] = B64BOTH, ['O'] = B64BOTH, ['P'] = B64BOTH,
    ['Q'] = B64BOTH, ['R'] = B64BOTH, ['S'] = B64BOTH, ['T'] = B64BOTH,
    ['U'] = B64BOTH, ['V'] = B64BOTH, ['W'] = B64BOTH, ['X'] = B64BOTH,
    ['Y'] = B64BOTH, ['Z'] = B64BOTH,
    ['a'] = B64BOTH, ['b'] = B64BOTH, ['c'] = B64BOTH, ['d'] = B64BOTH,
    ['e'] = B64BOTH, ['f'] = B64BOTH, ['g'] = B64BOTH, ['h'] = B64BOTH,
    ['i'] = B64BOTH, ['j'] = B64BOTH, ['k'] = B64BOTH, ['l'] = B64BOTH,
    ['m'] = B64BOTH, ['n'] = B64BOTH, ['o'] = B64BOTH, ['p'] = B64BOTH,
    ['q'] = B64BOTH, ['r'] = B64BOTH, ['s'] = B64BOTH, ['t'] = B64BOTH,
    ['u'] = B64BOTH, ['v'] = B64BOTH, ['w'] = B64BOTH, ['x'] = B64BOTH,
    ['y'] = B64BOTH, ['z'] = B64BOTH,
    ['0'] = B64BOTH, ['1'] = B64BOTH, ['2'] = B64BOTH, ['3'] = B64BOTH,
    ['4'] = B64BOTH, ['5'] = B64BOTH, ['6'] = B64BOTH, ['7'] = B64BOTH,
    ['8'] = B64BOTH, ['9'] = B64BOTH,
    ['-'] = B64BOTH, ['_'] = B64BOTH,
    ['.'] = B64TOKEN, ['~'] = B64TOKEN, ['+'] = B64TOKEN, ['/'] = B64TOKEN
};

/* RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
 * "/" ) *"=" -- padding only at the end.
 */
static int lessons_is_b64token(const char *s, const char *end)
{
    const char *pad = end;

    while (pad > s && pad[-1] == '=') {
        pad--;
    }
    if (pad == s) {
        return 0;
    }
    for (; s < pad; s++) {
        if (!(lessons_token_chars[(unsigned char)*s] & B64TOKEN)) {
            return 0;
        }
    }
    return 1;
}

static int lessons_is_b64url(int c)
{
    return lessons_token_chars[(unsigned char)c] & B64URL;
}

lessons_bearer_e lessons_auth_parse(apr_pool_t *p, const char *header,
                                    const char *scheme, const char **token)
{
    apr_size_t n = strlen(scheme);
    const char *s, *end;

    *token = NULL;
    if (!header) {
        return LESSONS_BEARER_NONE;
    }
    s = header;
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    if (strncasecmp(s, scheme, n) != 0
        || (s[n] != '\0' && s[n] != ' ' && s[n] != '\t')) {
        return *s ? LESSONS_BEARER_OTHER_SCHEME : LESSONS_BEARER_NONE;
    }
    s += n;
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    if (end == s) {
        return LESSONS_BEARER_MALFORMED;
    }
    if (!lessons_is_b64token(s, end)) {
        return LESSONS_BEARER_MALFORMED;       /* two tokens, commas ... */
    }
    *token = apr_pstrmemdup(p, s, (apr_size_t)(end - s));
    return LESSONS_BEARER_OK;
}

lessons_bearer_e lessons_bearer_parse(apr_pool_t *p, const char *header,
                                      const char **token)
{
    return lessons_auth_parse(p, header, "Bearer", token);
}

/* Decode one base64url segment and parse it as a JSON object; NULL when
 * it is not one.  The caller owns the reference.  *text (when text is
 * not NULL) gets the decoded bytes, in p, and *text_len their length.
 */
static json_t *lessons_segment_object(apr_pool_t *p, const char *seg,
                                      apr_size_t len, const char **text,
                                      apr_size_t *text_len)
{
    apr_size_t dlen = 0;
    const char *raw;
    json_t *obj;

    raw = apr_pdecode_base64(p, seg, (apr_ssize_t)len, APR_ENCODE_BASE64URL,
                             &dlen);
    if (!raw) {
        return NULL;
    }
    obj = json_loadb(raw, dlen, JSON_REJECT_DUPLICATES, NULL);
    if (obj && !json_is_object(obj)) {
        json_decref(obj);
        return NULL;
    }
    if (obj && text && text_len) {
        *text = raw;
        *text_len = dlen;
    }
    return obj;
}

/* exp/nbf/iat: absent (0), a number (1, *v set), or another type (-1). */
static int lessons_claim_time(json_t *claims, const char *name, double *v)
{
    json_t *c = json_object_get(claims, name);

    if (!c) {
        return 0;
    }
    if (!json_is_number(c)) {
        return -1;
    }
    *v = json_number_value(c);
    return 1;
}

/* The time claims as found: each absent (0), a number (1) or another
 * type (-1).
 */
typedef struct {
    int has_exp, has_nbf, has_iat;
    double exp, nbf, iat;
} lessons_times_t;

/* The one place exp, nbf and iat meet the clock: a full verify and a
 * cache hit both come here, so both answer alike.
 */
static lessons_token_e lessons_check_times(const lessons_token_policy_t *pol,
                                           const lessons_times_t *t,
                                           apr_int64_t now)
{
    if (t->has_exp == 0) {
        return LESSONS_TOKEN_NO_EXP;
    }
    if (t->has_exp < 0) {
        return LESSONS_TOKEN_BAD_CLAIMS;
    }
    /* RFC 7519 4.1.4: reject at or after exp. */
    if ((double)now >= t->exp + (double)pol->leeway) {
        return LESSONS_TOKEN_EXPIRED;
    }
    if (t->has_nbf < 0) {
        return LESSONS_TOKEN_BAD_CLAIMS;
    }
    if (t->has_nbf > 0 && (double)now + (double)pol->leeway < t->nbf) {
        return LESSONS_TOKEN_NOT_YET_VALID;
    }
    if (t->has_iat < 0
        || (t->has_iat > 0 && (double)now + (double)pol->leeway < t->iat)) {
        return LESSONS_TOKEN_BAD_IAT;           /* issued in the future */
    }
    return LESSONS_TOKEN_OK;
}

static int lessons_audience_ok(json_t *aud, const char *want)
{
    size_t i;
    json_t *v;

    if (json_is_string(aud)) {
        return strcmp(json_string_value(aud), want) == 0;
    }
    if (json_is_array(aud)) {
        json_array_foreach(aud, i, v) {
            if (json_is_string(v) && strcmp(json_string_value(v), want) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* RFC 9068 2.2: what an at+jwt must carry beyond exp, which every token
 * must (its types are checked where each is used, or here: a time).
 */
static int lessons_at_claims_ok(json_t *claims, const lessons_times_t *t)
{
    static const char *const required[] = { "iss", "aud", "sub",
                                            "client_id", "jti" };
    size_t i;

    for (i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (!json_object_get(claims, required[i])) {
            return 0;
        }
    }
    return t->has_iat > 0;
}

/* Is iss the policy's issuer (a string equal byte for byte), or does
 * the policy require none?
 */
static int lessons_issuer_ok(const lessons_token_policy_t *pol,
                             json_t *claims)
{
    json_t *iss = json_object_get(claims, "iss");

    return !pol->issuer
           || (json_is_string(iss)
               && strcmp(json_string_value(iss), pol->issuer) == 0);
}

/* On OK, *found holds what a cache hit must check again.  at: 1 for an
 * at+jwt (RFC 9068 2.2's claims required), 0 for any JWT, -1 for an
 * introspection answer (exp may be absent).
 */
static lessons_token_e lessons_check_claims(apr_pool_t *p,
                                            const lessons_token_policy_t *pol,
                                            json_t *claims, int at,
                                            apr_int64_t now,
                                            const char **subject,
                                            lessons_tokencache_claims_t *found)
{
    lessons_times_t t;
    lessons_token_e rc;
    json_t *sub;

    memset(&t, 0, sizeof(t));
    t.has_exp = lessons_claim_time(claims, "exp", &t.exp);
    t.has_nbf = lessons_claim_time(claims, "nbf", &t.nbf);
    t.has_iat = lessons_claim_time(claims, "iat", &t.iat);
    /* An introspection answer may leave exp out (RFC 7662 2.2: the
     * provider said "active" now, which is what exp says of a JWT).
     */
    if (at < 0 && t.has_exp == 0) {
        t.has_exp = 1;
        t.exp = HUGE_VAL;
    }
    rc = lessons_check_times(pol, &t, now);
    if (rc != LESSONS_TOKEN_OK) {
        return rc;
    }
    if (at > 0 && !lessons_at_claims_ok(claims, &t)) {
        return LESSONS_TOKEN_AT_CLAIMS;
    }
    if (!lessons_issuer_ok(pol, claims)) {
        return LESSONS_TOKEN_BAD_ISSUER;
    }
    if (pol->audience
        && !lessons_audience_ok(json_object_get(claims, "aud"),
                                pol->audience)) {
        return LESSONS_TOKEN_BAD_AUDIENCE;
    }
    sub = json_object_get(claims, "sub");
    /* A NUL inside would cut the C string: another user, silently. */
    if (sub && (!json_is_string(sub)
                || strlen(json_string_value(sub))
                   != json_string_length(sub))) {
        return LESSONS_TOKEN_BAD_CLAIMS;
    }
    *subject = sub ? apr_pstrdup(p, json_string_value(sub)) : NULL;
    found->subject = *subject;
    found->exp = t.exp;
    found->nbf = t.nbf;
    found->iat = t.iat;
    found->has_nbf = t.has_nbf > 0;
    found->has_iat = t.has_iat > 0;
    return LESSONS_TOKEN_OK;
}

/* The algorithms a policy accepts. */
static lessons_algs_t lessons_policy_algs(const lessons_token_policy_t *pol)
{
    return pol->keys ? pol->algs : LESSONS_ALG_BIT(pol->alg);
}

/* Can the policy verify anything at all: does some key of it allow some
 * algorithm it accepts?  Else it is a server fault (KEY_MISFIT).
 */
static int lessons_policy_usable(const lessons_token_policy_t *pol)
{
    int i, a;

    if (!pol) {
        return 0;
    }
    if (!pol->keys) {
        return lessons_key_allows(pol->key, pol->alg);
    }
    for (i = 0; i < pol->keys->nkeys; i++) {
        for (a = LESSONS_ALG_HS256; a < LESSONS_ALG_TERM; a++) {
            if ((pol->algs & LESSONS_ALG_BIT(a))
                && lessons_jwk_allows(&pol->keys->keys[i], (lessons_alg_t)a)) {
                return 1;
            }
        }
    }
    return 0;
}

/* The keys a token signed with alg (and naming kid, or not) may be
 * checked against, at most LESSONS_TOKEN_MAX_TRIES: its kid's key alone,
 * which must allow alg (or the set's kid-less keys, when the set has no
 * such kid); without a kid, every key that allows alg.
 */
static lessons_token_e lessons_pick_keys(const lessons_token_policy_t *pol,
                                         lessons_alg_t alg, const char *kid,
                                         const lessons_key_t **tries,
                                         int *ntries)
{
    const lessons_jwk_t *named;
    int i;

    *ntries = 0;
    if (!pol->keys) {
        if (!lessons_key_allows(pol->key, alg)) {
            return LESSONS_TOKEN_BAD_ALG;
        }
        tries[(*ntries)++] = pol->key;
        return LESSONS_TOKEN_OK;
    }
    named = kid ? lessons_keyset_find(pol->keys, kid) : NULL;
    if (named) {
        if (!lessons_jwk_allows(named, alg)) {
            return LESSONS_TOKEN_BAD_ALG;   /* e.g. HS256 on an RSA kid */
        }
        tries[(*ntries)++] = &named->key;
        return LESSONS_TOKEN_OK;
    }
    for (i = 0; i < pol->keys->nkeys
                && *ntries < LESSONS_TOKEN_MAX_TRIES; i++) {
        const lessons_jwk_t *k = &pol->keys->keys[i];

        if ((!kid || !k->kid) && lessons_jwk_allows(k, alg)) {
            tries[(*ntries)++] = &k->key;
        }
    }
    if (*ntries == 0) {
        return kid ? LESSONS_TOKEN_UNKNOWN_KID : LESSONS_TOKEN_BAD_ALG;
    }
    return LESSONS_TOKEN_OK;
}

/* A token's shape: 1..LESSONS_TOKEN_MAX_LEN characters of base64url in
 * three non-empty segments; dot[] gets the two dots.
 */
/* The value of a base64url character (lessons_is_b64url holds). */
static unsigned lessons_b64url_value(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned)(c - 'A')
           : c >= 'a' && c <= 'z' ? (unsigned)(c - 'a') + 26
           : c >= '0' && c <= '9' ? (unsigned)(c - '0') + 52
           : c == '-' ? 62 : 63;
}

/* A segment of n characters ending at end is the one spelling of its
 * bytes: no length a decoder must guess at (4k + 1), and the bits its
 * last character carries past the bytes all zero (RFC 4648 3.5).  Else
 * one token would have up to sixteen spellings, each its own token (a
 * cache entry, a DPoP proof's replay key).
 */
static int lessons_b64url_canonical(const char *end, apr_size_t n)
{
    unsigned last = n ? lessons_b64url_value((unsigned char)end[-1]) : 0;

    switch (n % 4) {
    case 1:
        return 0;
    case 2:
        return (last & 0x0F) == 0;
    case 3:
        return (last & 0x03) == 0;
    default:
        return 1;
    }
}

static lessons_token_e lessons_token_shape(const char *token,
                                           const char *dot[2])
{
    apr_size_t len, i;
    int ndots = 0;

    if (!token) {
        return LESSONS_TOKEN_MALFORMED;
    }
    len = strlen(token);
    if (len == 0 || len > LESSONS_TOKEN_MAX_LEN) {
        return LESSONS_TOKEN_MALFORMED;
    }
    for (i = 0; i < len; i++) {
        if (token[i] == '.') {
            if (ndots == 2) {
                return LESSONS_TOKEN_MALFORMED;
            }
            dot[ndots++] = token + i;
        }
        else if (!lessons_is_b64url((unsigned char)token[i])) {
            return LESSONS_TOKEN_MALFORMED;
        }
    }
    if (ndots != 2 || dot[0] == token || dot[1] == dot[0] + 1
        || dot[1] == token + len - 1
        || !lessons_b64url_canonical(dot[0], (apr_size_t)(dot[0] - token))
        || !lessons_b64url_canonical(dot[1],
                                     (apr_size_t)(dot[1] - dot[0] - 1))
        || !lessons_b64url_canonical(token + len,
                                     (apr_size_t)(token + len - dot[1] - 1))) {
        return LESSONS_TOKEN_MALFORMED;
    }
    return LESSONS_TOKEN_OK;
}

/* Is typ (a header's "typ") the media type want?  RFC 7515 4.1.9. */
static int lessons_typ_is(json_t *typ, const char *want)
{
    const char *s = json_is_string(typ) ? json_string_value(typ) : NULL;

    if (!s) {
        return 0;
    }
    if (strncasecmp(s, "application/", 12) == 0) {
        s += 12;
    }
    return strcasecmp(s, want) == 0;
}

/* The header's "typ": 0 for none or JWT, 1 for RFC 9068's at+jwt
 * (media types compare case-insensitively, "application/" may be left
 * out: RFC 7515 4.1.9), -1 for anything else.
 */
static int lessons_typ_kind(json_t *typ)
{
    const char *s;

    if (!typ) {
        return 0;
    }
    if (!json_is_string(typ)) {
        return -1;
    }
    s = json_string_value(typ);
    if (strcasecmp(s, "JWT") == 0) {
        return 0;
    }
    return lessons_typ_is(typ, "at+jwt") ? 1 : -1;
}

/* What the header may say, before any key is tried: an algorithm of the
 * policy (*talg), no "crit", a "typ" the policy takes (*at: 1
 * for at+jwt), a string "kid" if any (*kid, or NULL).
 */
static lessons_token_e lessons_header_check(const lessons_token_policy_t *pol,
                                            json_t *header, lessons_alg_t *talg,
                                            int *at, const char **kid)
{
    json_t *alg = json_object_get(header, "alg");
    json_t *k;

    *talg = json_is_string(alg) ? lessons_alg_parse(json_string_value(alg))
                                : LESSONS_ALG_INVAL;
    if (*talg == LESSONS_ALG_INVAL
        || !(lessons_policy_algs(pol) & LESSONS_ALG_BIT(*talg))) {
        return LESSONS_TOKEN_BAD_ALG;
    }
    if (json_object_get(header, "crit")) {
        return LESSONS_TOKEN_CRIT;              /* RFC 7515 4.1.11 */
    }
    /* JWT (or none), or RFC 9068's at+jwt; any other typ is not an
     * access token (an ID token, a DPoP proof, a logout token).
     */
    *at = lessons_typ_kind(json_object_get(header, "typ"));
    if (*at < 0) {
        return LESSONS_TOKEN_BAD_TYPE;
    }
    if (pol->require_at_jwt && !*at) {
        return LESSONS_TOKEN_NOT_AT_JWT;
    }
    k = json_object_get(header, "kid");
    if (k && !json_is_string(k)) {
        return LESSONS_TOKEN_MALFORMED;
    }
    *kid = k ? json_string_value(k) : NULL;
    return LESSONS_TOKEN_OK;
}

/* The bytes of the signature segment (strict base64url, no padding:
 * lessons_token_shape), from its length alone.
 */
static apr_size_t lessons_sig_bytes(const char *token)
{
    const char *sig = strrchr(token, '.');
    apr_size_t n = sig ? strlen(sig + 1) : 0;

    return n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
}

/* cjose checks the signature with each key in turn, by the header's
 * algorithm (talg, which each key allows: lessons_pick_keys).  A
 * signature not exactly as long as the algorithm's and the key's is
 * refused first: cjose reads an HMAC's as long as the hash, and splits
 * an ECDSA one in halves of any length.
 */
static lessons_token_e lessons_signature_check(const char *token,
                                               const lessons_key_t *const *tries,
                                               int ntries, lessons_alg_t talg)
{
    apr_size_t sig_len = lessons_sig_bytes(token);
    cjose_jws_t *jws;
    cjose_err err;
    int i, ok = 0;

    jws = cjose_jws_import(token, strlen(token), &err);
    if (!jws) {
        return LESSONS_TOKEN_MALFORMED;
    }
    for (i = 0; i < ntries && !ok; i++) {
        ok = tries[i]->jwk && sig_len == lessons_key_sig_len(tries[i], talg)
             && cjose_jws_verify(jws, tries[i]->jwk, &err);
    }
    cjose_jws_release(jws);
    return ok ? LESSONS_TOKEN_OK : LESSONS_TOKEN_BAD_SIGNATURE;
}

/* lessons_token_verify, also giving what a cache entry keeps and, when
 * out is not NULL, on OK the claims object itself, owned by p.
 */
static lessons_token_e lessons_verify_full(apr_pool_t *p,
                                           const lessons_token_policy_t *pol,
                                           const char *token, apr_int64_t now,
                                           const char **subject,
                                           lessons_tokencache_claims_t *found,
                                           json_t **out)
{
    const char *dot[2] = { NULL, NULL };
    const char *kid = NULL;
    json_t *header = NULL, *claims = NULL;
    const lessons_key_t *tries[LESSONS_TOKEN_MAX_TRIES];
    int ntries = 0;
    lessons_alg_t talg;
    int at = 0;
    lessons_token_e rc;

    *subject = NULL;
    /* The key decides which algorithms may use it, whatever the
     * configuration merge paired it with: never decode keyless, and
     * never let a public key act as an HMAC secret.
     */
    if (!lessons_policy_usable(pol)) {
        return LESSONS_TOKEN_KEY_MISFIT;
    }
    rc = lessons_token_shape(token, dot);
    if (rc != LESSONS_TOKEN_OK) {
        return rc;
    }
    header = lessons_segment_object(p, token, (apr_size_t)(dot[0] - token),
                                    NULL, NULL);
    if (!header) {
        return LESSONS_TOKEN_MALFORMED;
    }
    rc = lessons_header_check(pol, header, &talg, &at, &kid);
    if (rc != LESSONS_TOKEN_OK) {
        goto done;
    }
    /* The signature covers these exact bytes; claims are read from
     * them rather than through a JOSE library's getters, and trusted only
     * once it has verified.  A token of another issuer can never pass
     * here: refused before any key is looked for, so that its kid,
     * unknown to this issuer's set, never makes a keys URL or a provider
     * be asked again.
     */
    found->payload = NULL;
    found->payload_len = 0;
    claims = lessons_segment_object(p, dot[0] + 1,
                                    (apr_size_t)(dot[1] - dot[0] - 1),
                                    &found->payload, &found->payload_len);
    if (claims && !lessons_issuer_ok(pol, claims)) {
        rc = LESSONS_TOKEN_BAD_ISSUER;
    }
    if (rc == LESSONS_TOKEN_OK) {
        rc = lessons_pick_keys(pol, talg, kid, tries, &ntries);
    }
    if (rc == LESSONS_TOKEN_OK) {
        rc = lessons_signature_check(token, tries, ntries, talg);
    }
    if (rc != LESSONS_TOKEN_OK) {
        goto done;
    }
    if (!claims) {
        rc = LESSONS_TOKEN_BAD_CLAIMS;
        goto done;
    }
    rc = lessons_check_claims(p, pol, claims, at, now, subject, found);
    if (rc == LESSONS_TOKEN_OK) {
        /* What it parsed goes to the cache (whose hits then decode
         * nothing) and, asked for, to the caller: never changed again,
         * by either.
         */
        found->parsed = lessons_json_pool_own(p, claims);
        if (out) {
            *out = claims;
        }
        claims = NULL;
    }

done:
    json_decref(claims);
    json_decref(header);
    return rc;
}

lessons_token_e lessons_token_check_introspected(apr_pool_t *p,
    const lessons_token_policy_t *policy, json_t *claims, apr_int64_t now,
    const char **subject)
{
    lessons_tokencache_claims_t found;

    *subject = NULL;
    if (!json_is_object(claims)) {
        return LESSONS_TOKEN_BAD_CLAIMS;
    }
    memset(&found, 0, sizeof(found));
    return lessons_check_claims(p, policy, claims, -1, now, subject, &found);
}

lessons_token_e lessons_token_pick_issuer(apr_pool_t *p, const char *token,
                                          const char *const *issuers, int n,
                                          int *index)
{
    const char *dot[2] = { NULL, NULL };
    json_t *claims, *iss;
    lessons_token_e rc;
    int i;

    *index = -1;
    rc = lessons_token_shape(token, dot);
    if (rc != LESSONS_TOKEN_OK) {
        return rc;
    }
    claims = lessons_segment_object(p, dot[0] + 1,
                                    (apr_size_t)(dot[1] - dot[0] - 1),
                                    NULL, NULL);
    if (!claims) {
        return LESSONS_TOKEN_MALFORMED;
    }
    rc = LESSONS_TOKEN_UNKNOWN_ISSUER;
    iss = json_object_get(claims, "iss");
    for (i = 0; json_is_string(iss) && i < n; i++) {
        if (strcmp(json_string_value(iss), issuers[i]) == 0) {
            *index = i;
            rc = LESSONS_TOKEN_OK;
            break;
        }
    }
    json_decref(claims);
    return rc;
}

lessons_token_e lessons_token_verify(apr_pool_t *p,
                                     const lessons_token_policy_t *pol,
                                     const char *token, apr_int64_t now,
                                     const char **subject)
{
    lessons_tokencache_claims_t found;

    memset(&found, 0, sizeof(found));
    return lessons_verify_full(p, pol, token, now, subject, &found, NULL);
}

/* v as 8 bytes, big-endian. */
static void lessons_be64(unsigned char n[8], apr_uint64_t v)
{
    int i;

    for (i = 7; i >= 0; i--) {
        n[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

/* Fingerprint input, gathered in a buffer and hashed in one call where
 * it fits (a keys URL's or an issuer's policy is hashed per request, and
 * each EVP_DigestUpdate costs more than the bytes it hashes), handed to
 * the digest in pieces where it does not (a single key's PEM, hashed
 * once at start-up).  The bytes hashed are the same either way.
 */
typedef struct {
    EVP_MD_CTX *ctx;                /* NULL until the buffer overflows */
    apr_size_t n;
    int ok;
    unsigned char buf[512];
} lessons_fp_t;

static void lessons_fp_put(lessons_fp_t *f, const void *data, apr_size_t len)
{
    if (!f->ok || len == 0) {
        return;
    }
    if (f->n + len <= sizeof(f->buf)) {
        memcpy(f->buf + f->n, data, len);
        f->n += len;
        return;
    }
    if (!f->ctx && (!(f->ctx = EVP_MD_CTX_new())
                    || EVP_DigestInit_ex(f->ctx, EVP_sha256(), NULL) != 1)) {
        f->ok = 0;
        return;
    }
    f->ok = EVP_DigestUpdate(f->ctx, f->buf, f->n) == 1
            && EVP_DigestUpdate(f->ctx, data, len) == 1;
    f->n = 0;
}

/* Every field length-prefixed (8 bytes, big-endian), so no two policies
 * encode alike ("ab"+"c" is not "a"+"bc").
 */
static void lessons_fp_field(lessons_fp_t *f, const void *data,
                             apr_size_t len)
{
    unsigned char n[8];

    lessons_be64(n, (apr_uint64_t)len);
    lessons_fp_put(f, n, sizeof(n));
    lessons_fp_put(f, data, len);
}

/* A string that may be absent: a presence byte, then the string. */
static void lessons_fp_string(lessons_fp_t *f, const char *s)
{
    unsigned char present = s ? 1 : 0;

    lessons_fp_field(f, &present, 1);
    if (s) {
        lessons_fp_field(f, s, strlen(s));
    }
}

static void lessons_fp_number(lessons_fp_t *f, apr_int64_t value)
{
    unsigned char n[8];

    lessons_be64(n, (apr_uint64_t)value);
    lessons_fp_field(f, n, sizeof(n));
}

int lessons_token_policy_fingerprint(const lessons_token_policy_t *pol,
                                     unsigned char fp[LESSONS_TOKEN_FP_LEN])
{
    static const char tag[] = "mod_lessons token policy 1";
    lessons_fp_t f;
    unsigned int n = 0;

    if (!pol || !fp || (pol->keys ? pol->keys->nkeys < 1
                                  : !pol->key || !pol->key->data)) {
        return -1;
    }
    f.ctx = NULL;
    f.n = 0;
    f.ok = 1;
    /* Whatever can change a verdict belongs in the fingerprint: for a
     * set, its digest covers every key's kid, alg and bytes.
     */
    lessons_fp_field(&f, tag, sizeof(tag) - 1);
    if (pol->keys) {
        lessons_fp_number(&f, -1);
        lessons_fp_number(&f, (apr_int64_t)pol->algs);
        lessons_fp_field(&f, pol->keys->digest, sizeof(pol->keys->digest));
    }
    else {
        lessons_fp_number(&f, (apr_int64_t)pol->alg);
        lessons_fp_field(&f, pol->key->data, pol->key->len);
    }
    lessons_fp_string(&f, pol->issuer);
    lessons_fp_string(&f, pol->audience);
    lessons_fp_number(&f, (apr_int64_t)pol->leeway);
    lessons_fp_number(&f, (apr_int64_t)pol->require_at_jwt);
    if (f.ok && !f.ctx) {
        f.ok = EVP_Digest(f.buf, f.n, fp, &n, EVP_sha256(), NULL) == 1;
    }
    else if (f.ok) {
        f.ok = EVP_DigestUpdate(f.ctx, f.buf, f.n) == 1
               && EVP_DigestFinal_ex(f.ctx, fp, &n) == 1;
    }
    EVP_MD_CTX_free(f.ctx);
    return f.ok && n == LESSONS_TOKEN_FP_LEN ? 0 : -1;
}

/* The claims of a hit: the entry's parsed object (the reference get
 * gave, released with p), else decoded from the payload text it kept;
 * NULL when there is neither or it will not parse (then the caller
 * verifies in full).
 */
static json_t *lessons_cached_claims(apr_pool_t *p,
                                     const lessons_tokencache_claims_t *found)
{
    json_t *obj;

    if (found->parsed) {
        return found->parsed;
    }
    if (!found->payload) {
        return NULL;
    }
    obj = json_loadb(found->payload, found->payload_len,
                     JSON_REJECT_DUPLICATES, NULL);
    if (obj && !json_is_object(obj)) {
        json_decref(obj);
        return NULL;
    }
    return lessons_json_pool_own(p, obj);
}

lessons_token_e lessons_token_verify_claims(apr_pool_t *p,
                                            const lessons_token_policy_t *pol,
                                            lessons_tokencache_t *cache,
                                            const char *token,
                                            apr_int64_t now,
                                            const char **subject,
                                            json_t **claims)
{
    unsigned char fp[LESSONS_TOKEN_FP_LEN];
    lessons_tokencache_claims_t found;
    lessons_times_t t;
    const char *sink = NULL;
    json_t *obj;
    apr_size_t len;
    lessons_token_e rc;

    if (!subject) {
        subject = &sink;
    }
    *subject = NULL;
    if (claims) {
        *claims = NULL;
    }
    memset(&found, 0, sizeof(found));
    /* Whatever the full verify refuses before reading the token, it
     * refuses here too, with its own code: no lookup for those.
     */
    if (!cache || !lessons_policy_usable(pol) || !token) {
        return lessons_verify_full(p, pol, token, now, subject, &found,
                                   claims);
    }
    len = strnlen(token, LESSONS_TOKEN_MAX_LEN + 1);
    if (len == 0 || len > LESSONS_TOKEN_MAX_LEN) {
        return lessons_verify_full(p, pol, token, now, subject, &found,
                                   claims);
    }
    /* A SHA-256 over the key costs about as much as the rest of a hit:
     * callers that made it once for this policy hand it in.
     */
    if (pol->fp) {
        memcpy(fp, pol->fp, LESSONS_TOKEN_FP_LEN);
    }
    else if (lessons_token_policy_fingerprint(pol, fp) != 0) {
        return lessons_verify_full(p, pol, token, now, subject, &found,
                                   claims);
    }
    if (lessons_tokencache_get(cache, p, fp, token, len, (double)now,
                               &found)) {
        lessons_json_pool_own(p, found.parsed);
        /* Same policy, same bytes: signature, alg, typ, iss, aud and sub
         * were settled when it was stored; only the clock has moved.
         */
        memset(&t, 0, sizeof(t));
        t.has_exp = 1;
        t.exp = found.exp;
        t.has_nbf = found.has_nbf;
        t.nbf = found.nbf;
        t.has_iat = found.has_iat;
        t.iat = found.iat;
        rc = lessons_check_times(pol, &t, now);
        if (rc != LESSONS_TOKEN_OK) {
            return rc;
        }
        /* Claims only when asked for: a plain hit parses nothing. */
        obj = claims ? lessons_cached_claims(p, &found) : NULL;
        if (!claims || obj) {
            *subject = found.subject;
            if (claims) {
                *claims = obj;
            }
            return rc;
        }
        /* No usable text kept: verify in full, as on a miss. */
        memset(&found, 0, sizeof(found));
    }
    rc = lessons_verify_full(p, pol, token, now, subject, &found, claims);
    if (rc == LESSONS_TOKEN_OK) {
        lessons_tokencache_put(cache, fp, token, len, &found,
                               found.exp + (double)pol->leeway);
    }
    return rc;
}

lessons_token_e lessons_token_verify_cached(apr_pool_t *p,
                                            const lessons_token_policy_t *pol,
                                            lessons_tokencache_t *cache,
                                            const char *token,
                                            apr_int64_t now,
                                            const char **subject)
{
    return lessons_token_verify_claims(p, pol, cache, token, now, subject,
                                       NULL);
}

json_t *lessons_token_peek_header(apr_pool_t *p, const char *jws)
{
    const char *dot[2] = { NULL, NULL };

    if (lessons_token_shape(jws, dot) != LESSONS_TOKEN_OK) {
        return NULL;
    }
    return lessons_json_pool_own(p, lessons_segment_object(
        p, jws, (apr_size_t)(dot[0] - jws), NULL, NULL));
}

lessons_token_e lessons_token_verify_jws(apr_pool_t *p, const char *jws,
                                         const char *typ,
                                         lessons_algs_t algs,
                                         const lessons_jwk_t *key,
                                         json_t **payload)
{
    const char *dot[2] = { NULL, NULL };
    const lessons_key_t *tries[1];
    json_t *header = NULL, *alg;
    lessons_alg_t talg;
    lessons_token_e rc;

    *payload = NULL;
    if (!key || !typ) {
        return LESSONS_TOKEN_KEY_MISFIT;
    }
    rc = lessons_token_shape(jws, dot);
    if (rc != LESSONS_TOKEN_OK) {
        return rc;
    }
    header = lessons_segment_object(p, jws, (apr_size_t)(dot[0] - jws),
                                    NULL, NULL);
    if (!header) {
        return LESSONS_TOKEN_MALFORMED;
    }
    alg = json_object_get(header, "alg");
    talg = json_is_string(alg) ? lessons_alg_parse(json_string_value(alg))
                               : LESSONS_ALG_INVAL;
    if (talg == LESSONS_ALG_INVAL || !(algs & LESSONS_ALG_BIT(talg))
        || !lessons_jwk_allows(key, talg)) {
        rc = LESSONS_TOKEN_BAD_ALG;
    }
    else if (json_object_get(header, "crit")) {
        rc = LESSONS_TOKEN_CRIT;
    }
    else if (!lessons_typ_is(json_object_get(header, "typ"), typ)) {
        rc = LESSONS_TOKEN_BAD_TYPE;
    }
    else {
        tries[0] = &key->key;
        rc = lessons_signature_check(jws, tries, 1, talg);
    }
    if (rc == LESSONS_TOKEN_OK) {
        *payload = lessons_json_pool_own(p, lessons_segment_object(
            p, dot[0] + 1, (apr_size_t)(dot[1] - dot[0] - 1), NULL, NULL));
        if (!*payload) {
            rc = LESSONS_TOKEN_BAD_CLAIMS;
        }
    }
    json_decref(header);
    return rc;
}

const char *lessons_token_describe(lessons_token_e result)
{
    switch (result) {
    case LESSONS_TOKEN_OK:
        return "The access token is valid";
    case LESSONS_TOKEN_MALFORMED:
        return "The access token is malformed";
    case LESSONS_TOKEN_BAD_ALG:
        return "The access token is signed with an algorithm that is not "
               "accepted";
    case LESSONS_TOKEN_CRIT:
        return "The access token has critical header parameters that are "
               "not supported";
    case LESSONS_TOKEN_BAD_SIGNATURE:
        return "The access token signature is invalid";
    case LESSONS_TOKEN_BAD_CLAIMS:
        return "The access token claims are malformed";
    case LESSONS_TOKEN_NO_EXP:
        return "The access token has no expiry time";
    case LESSONS_TOKEN_EXPIRED:
        return "The access token has expired";
    case LESSONS_TOKEN_NOT_YET_VALID:
        return "The access token is not valid yet";
    case LESSONS_TOKEN_BAD_ISSUER:
        return "The access token issuer is not accepted here";
    case LESSONS_TOKEN_BAD_AUDIENCE:
        return "The access token audience is not accepted";
    case LESSONS_TOKEN_KEY_MISFIT:
        return "The server cannot verify access tokens";
    case LESSONS_TOKEN_BAD_TYPE:
        return "unsupported token type";
    case LESSONS_TOKEN_NOT_AT_JWT:
        return "The access token type must be at+jwt";
    case LESSONS_TOKEN_AT_CLAIMS:
        return "The access token lacks a claim an at+jwt token must have "
               "(iss, exp, aud, sub, client_id, iat, jti)";
    case LESSONS_TOKEN_BAD_IAT:
        return "The access token issue time is invalid";
    case LESSONS_TOKEN_UNKNOWN_KID:
        return "The access token names a key the server does not know";
    case LESSONS_TOKEN_UNKNOWN_ISSUER:
        return "The access token names no issuer accepted here";
    }
    return "The access token is invalid";
}
