/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_token_tool.c: the claims, the signing key, the signature and a
 * refusal's reason for lessons-token.  Keys are read by the module's own
 * units (build/liblessons.a): the same file rules (size, trailing CR/LF),
 * the same refusals (short secrets, small RSA keys, other curves), so the
 * tool never signs with a key the server would not verify with.  What
 * the module never does, reading a private key, is here, with OpenSSL;
 * the signature is cjose's, the library the module verifies with.
 */
#include <string.h>

#include <cjose/jws.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "apr_lib.h"
#include "apr_strings.h"

#include "lessons_token_tool.h"

/* A token valid for longer than this is not a test token. */
#define LESSONS_TOOL_MAX_TTL  (10 * 366 * 86400)

/* The claims the options set, which --claim may not set again. */
static const char *const lessons_tool_own_claims[] = {
    "sub", "iss", "aud", "iat", "exp", NULL
};

/* Adds value under name: a second value makes the member an array. */
static const char *lessons_tool_add_claim(apr_pool_t *p, json_t *claims,
                                          const char *name, const char *value)
{
    json_t *v = json_string(value), *old = json_object_get(claims, name);
    json_t *list;

    if (!v) {
        return apr_psprintf(p, "the value of claim %s is not UTF-8", name);
    }
    if (!old) {
        return json_object_set_new(claims, name, v) == 0
               ? NULL : apr_psprintf(p, "claim %s is not UTF-8", name);
    }
    if (json_is_array(old)) {
        json_array_append_new(old, v);
        return NULL;
    }
    list = json_array();
    json_array_append(list, old);
    json_array_append_new(list, v);
    json_object_set_new(claims, name, list);
    return NULL;
}

json_t *lessons_tool_claims(apr_pool_t *p, const lessons_tool_claims_t *c,
                            apr_int64_t now, const char **why)
{
    json_t *claims;
    const char *msg = NULL;
    int i, j;

    if (c->ttl <= 0 || c->ttl > LESSONS_TOOL_MAX_TTL) {
        *why = apr_psprintf(p, "--ttl must be 1 to %d seconds",
                            LESSONS_TOOL_MAX_TTL);
        return NULL;
    }
    claims = json_object();
    if (!claims) {
        *why = "out of memory";
        return NULL;
    }
    json_object_set_new(claims, "iat", json_integer((json_int_t)now));
    json_object_set_new(claims, "exp",
                        json_integer((json_int_t)(now + c->ttl)));
    if (c->sub) {
        msg = lessons_tool_add_claim(p, claims, "sub", c->sub);
    }
    if (!msg && c->iss) {
        msg = lessons_tool_add_claim(p, claims, "iss", c->iss);
    }
    if (!msg && c->aud) {
        msg = lessons_tool_add_claim(p, claims, "aud", c->aud);
    }
    for (i = 0; !msg && c->claims && i < c->claims->nelts; i++) {
        const char *arg = APR_ARRAY_IDX(c->claims, i, const char *);
        const char *eq = arg ? strchr(arg, '=') : NULL;
        const char *name;

        if (!eq || eq == arg) {
            msg = apr_psprintf(p, "--claim %s: give NAME=VALUE",
                               arg ? arg : "");
            break;
        }
        name = apr_pstrmemdup(p, arg, (apr_size_t)(eq - arg));
        for (j = 0; lessons_tool_own_claims[j]; j++) {
            if (strcmp(name, lessons_tool_own_claims[j]) == 0) {
                msg = apr_psprintf(p, "--claim %s: %s is set by its own "
                                   "option (--sub, --iss, --aud, --ttl)",
                                   arg, name);
            }
        }
        if (!msg) {
            msg = lessons_tool_add_claim(p, claims, name, eq + 1);
        }
    }
    if (msg) {
        json_decref(claims);
        *why = msg;
        return NULL;
    }
    return claims;
}

static int lessons_tool_has(const unsigned char *data, apr_size_t len,
                            const char *marker)
{
    return memmem(data, len, marker, strlen(marker)) != NULL;
}

/* A passphrase is never asked for: the tool runs in scripts too. */
static int lessons_tool_no_passphrase(char *buf, int size, int rwflag,
                                      void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* The public half as the module reads a key file: its type, size and
 * curve, and the module's refusals.
 */
static const char *lessons_tool_public(apr_pool_t *p, EVP_PKEY *pkey,
                                       lessons_key_t **pub)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *pem = NULL;
    long n;
    const char *msg;

    if (!bio || PEM_write_bio_PUBKEY(bio, pkey) != 1) {
        BIO_free(bio);
        return "its public key cannot be written";
    }
    n = BIO_get_mem_data(bio, &pem);
    msg = lessons_key_make(p, (const unsigned char *)
                           apr_pstrmemdup(p, pem, (apr_size_t)n),
                           (apr_size_t)n, pub);
    BIO_free(bio);
    return msg;
}

static const char *lessons_tool_private(apr_pool_t *p, const char *path,
                                        const unsigned char *data,
                                        apr_size_t len, lessons_alg_t *alg,
                                        const cjose_jwk_t **out)
{
    BIO *bio;
    EVP_PKEY *pkey;
    lessons_key_t *pub = NULL;
    const cjose_jwk_t *jwk = NULL;
    const char *msg;

    if (lessons_tool_has(data, len, "ENCRYPTED")) {
        return apr_psprintf(p, "%s is an encrypted private key: give it "
                            "unencrypted (openssl pkey -in %s -out FILE), "
                            "in a file only you can read", path, path);
    }
    bio = BIO_new_mem_buf(data, (int)len);
    if (!bio) {
        return "out of memory";
    }
    pkey = PEM_read_bio_PrivateKey(bio, NULL, lessons_tool_no_passphrase,
                                   NULL);
    BIO_free(bio);
    ERR_clear_error();
    if (!pkey) {
        if (lessons_tool_has(data, len, "PUBLIC KEY")
            || lessons_tool_has(data, len, "CERTIFICATE")) {
            return apr_psprintf(p, "%s holds a public key: a token is "
                                "signed with the private key (the server "
                                "has the public one)", path);
        }
        return apr_psprintf(p, "%s holds no PEM private key (\"-----BEGIN "
                            "PRIVATE KEY-----\")", path);
    }
    msg = lessons_tool_public(p, pkey, &pub);
    if (!msg && *alg == LESSONS_ALG_NONE) {
        *alg = pub->type == LESSONS_KEY_RSA ? LESSONS_ALG_RS256 : pub->ec_alg;
    }
    if (!msg) {
        msg = lessons_key_misfit(p, pub, *alg);
    }
    if (!msg) {
        jwk = lessons_key_signing_jwk(p, pkey, pub);
        if (!jwk) {
            msg = "cjose cannot take the private key";
        }
    }
    EVP_PKEY_free(pkey);
    if (msg) {
        return apr_psprintf(p, "%s: %s", path, msg);
    }
    *out = jwk;
    return NULL;
}

const char *lessons_tool_signer(apr_pool_t *p, const char *path,
                                lessons_alg_t *alg, const cjose_jwk_t **jwk)
{
    const unsigned char *data = NULL;
    apr_size_t len = 0;
    lessons_key_t *key = NULL;
    const char *msg;
    int pem;

    if (*alg == LESSONS_ALG_INVAL) {
        return "unsupported algorithm";
    }
    msg = lessons_key_read(p, path, &data, &len);
    if (msg) {
        return msg;
    }
    pem = lessons_tool_has(data, len, "-----BEGIN");
    if (*alg == LESSONS_ALG_NONE && !pem) {
        *alg = LESSONS_ALG_HS256;
    }
    if (*alg != LESSONS_ALG_NONE && lessons_alg_name(*alg)[0] != 'H') {
        return lessons_tool_private(p, path, data, len, alg, jwk);
    }
    if (pem) {
        if (*alg == LESSONS_ALG_NONE) {
            return lessons_tool_private(p, path, data, len, alg, jwk);
        }
        return apr_psprintf(p, "%s: %s needs a shared secret, but the file "
                            "holds PEM text (RS*, PS* and ES* sign with a "
                            "private key)", path, lessons_alg_name(*alg));
    }
    msg = lessons_key_make(p, data, len, &key);
    if (!msg) {
        msg = lessons_key_misfit(p, key, *alg);
    }
    if (msg) {
        return apr_psprintf(p, "%s: %s", path, msg);
    }
    *jwk = key->jwk;
    return NULL;
}

const char *lessons_tool_sign(apr_pool_t *p, const cjose_jwk_t *jwk,
                              lessons_alg_t alg, const char *kid,
                              json_t *claims, const char **token)
{
    json_t *hdr = json_object();
    cjose_jws_t *jws = NULL;
    const char *ser = NULL, *msg = NULL;
    char *payload = NULL;
    cjose_err err;

    memset(&err, 0, sizeof(err));
    if (!hdr || json_object_set_new(hdr, "alg",
                                    json_string(lessons_alg_name(alg)))
        || json_object_set_new(hdr, "typ", json_string("JWT"))
        || (kid && json_object_set_new(hdr, "kid", json_string(kid)))) {
        msg = kid ? "the kid is not UTF-8" : "out of memory";
    }
    if (!msg) {
        payload = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
        if (!payload) {
            msg = "the claims cannot be written as JSON";
        }
    }
    if (!msg) {
        jws = cjose_jws_sign(jwk, (cjose_header_t *)hdr,
                             (const uint8_t *)payload, strlen(payload), &err);
        if (!jws || !cjose_jws_export(jws, &ser, &err)) {
            msg = apr_psprintf(p, "cjose cannot sign %s: %s",
                               lessons_alg_name(alg),
                               err.message ? err.message : "no reason");
        }
        else {
            *token = apr_pstrdup(p, ser);
        }
    }
    cjose_jws_release(jws);
    free(payload);
    json_decref(hdr);
    return msg;
}

/* A quoted-string (RFC 9110 5.6.4) or token at s, unquoted, in p. */
static const char *lessons_tool_param_value(apr_pool_t *p, const char *s)
{
    apr_size_t n = 0;
    char *out;

    if (*s != '"') {
        while (s[n] && s[n] != ',' && s[n] != ' ' && s[n] != '\t') {
            n++;
        }
        return apr_pstrmemdup(p, s, n);
    }
    s++;
    out = apr_palloc(p, strlen(s) + 1);
    while (*s && *s != '"') {
        if (*s == '\\' && s[1]) {
            s++;
        }
        out[n++] = *s++;
    }
    out[n] = '\0';
    return out;
}

const char *lessons_tool_auth_param(apr_pool_t *p, const char *challenge,
                                    const char *name)
{
    apr_size_t n = strlen(name);
    const char *c = challenge;

    while (c && *c) {
        if (*c == '"') {            /* a quoted value: never a name */
            for (c++; *c && *c != '"'; c++) {
                if (*c == '\\' && c[1]) {
                    c++;
                }
            }
            c += *c ? 1 : 0;
            continue;
        }
        if ((c == challenge || c[-1] == ' ' || c[-1] == ','
             || c[-1] == '\t') && strncasecmp(c, name, n) == 0) {
            const char *v = c + n;

            while (*v == ' ' || *v == '\t') {
                v++;
            }
            if (*v == '=') {
                v++;
                while (*v == ' ' || *v == '\t') {
                    v++;
                }
                return lessons_tool_param_value(p, v);
            }
        }
        c++;
    }
    return NULL;
}

const char *lessons_tool_printable(apr_pool_t *p, const char *s)
{
    char *out = apr_pstrdup(p, s ? s : "");
    char *c;

    for (c = out; *c; c++) {
        if (apr_iscntrl((unsigned char)*c)) {
            *c = '?';
        }
    }
    return out;
}

/* One line of output: our label, then the server's words made printable. */
static const char *lessons_tool_line(apr_pool_t *p, const char *label,
                                     const char *text)
{
    return apr_pstrcat(p, label, ": ", lessons_tool_printable(p, text), "\n",
                       NULL);
}

/* Is this media type (parameters aside) JSON's or a problem's? */
static int lessons_tool_is_json(const char *type)
{
    static const char *const types[] = {
        "application/problem+json", "application/json", NULL
    };
    int i;

    for (i = 0; type && types[i]; i++) {
        apr_size_t n = strlen(types[i]);

        if (strncasecmp(type, types[i], n) == 0
            && (type[n] == '\0' || type[n] == ';' || type[n] == ' ')) {
            return 1;
        }
    }
    return 0;
}

static const char *lessons_tool_member(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);

    return json_is_string(v) && json_string_length(v) > 0
           ? json_string_value(v) : NULL;
}

const char *lessons_tool_reason(apr_pool_t *p, const char *www_authenticate,
                                const char *content_type, const char *body,
                                apr_size_t len)
{
    const char *error = lessons_tool_auth_param(p, www_authenticate,
                                                "error");
    const char *desc = lessons_tool_auth_param(p, www_authenticate,
                                               "error_description");
    const char *out = "";
    json_t *doc = NULL;

    if (error) {
        out = apr_pstrcat(p, out, lessons_tool_line(p, "error", error), NULL);
    }
    if (desc) {
        out = apr_pstrcat(p, out,
                          lessons_tool_line(p, "error_description", desc),
                          NULL);
    }
    if (body && len > 0 && lessons_tool_is_json(content_type)) {
        doc = json_loadb(body, len, 0, NULL);
    }
    if (json_is_object(doc)) {
        const char *title = lessons_tool_member(doc, "title");
        const char *detail = lessons_tool_member(doc, "detail");

        if (title) {
            out = apr_pstrcat(p, out, lessons_tool_line(p, "title", title),
                              NULL);
        }
        if (detail && !(desc && strcmp(desc, detail) == 0)) {
            out = apr_pstrcat(p, out, lessons_tool_line(p, "detail", detail),
                              NULL);
        }
    }
    json_decref(doc);
    return out;
}
