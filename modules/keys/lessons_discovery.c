/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_discovery.c: an issuer's metadata, its jwks_uri and the key
 * set there (lessons_discovery.h).  The document is parsed with jansson
 * (duplicate members refused, as in a token), and only two members are
 * read: "issuer", compared byte for byte, and "jwks_uri".  Everything
 * else a provider publishes (id_token_signing_alg_values_supported
 * included, which is about ID tokens, not access tokens) is ignored.
 */
#include <string.h>

#include <jansson.h>

#include "apr_strings.h"
#include "apr_time.h"

#include "keys/lessons_discovery.h"
#include "keys/lessons_keysource.h"

#define LESSONS_OPENID_PATH  "/.well-known/openid-configuration"
#define LESSONS_OAUTH_PATH   "/.well-known/oauth-authorization-server"
#define LESSONS_QUOTE_MAX    256    /* bytes of a provider's issuer quoted */

/* No byte a URL written out needs no escape for: controls, space, DEL. */
static int lessons_has_blank(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s == 0x7f) {
            return 1;
        }
    }
    return 0;
}

/* A URL the fetcher may GET: the keys URL rules, no blank, bounded. */
static const char *lessons_discovery_url_ok(apr_pool_t *p, const char *url)
{
    if (strlen(url) > LESSONS_DISCOVERY_URI_MAX) {
        return apr_psprintf(p, "it is longer than %d bytes",
                            LESSONS_DISCOVERY_URI_MAX);
    }
    if (lessons_has_blank(url)) {
        return "it holds a space or a control character";
    }
    if (strchr(url, '#')) {
        return "it has a fragment (#...)";
    }
    return lessons_fetch_check_url(p, url, 0);
}

const char *lessons_discovery_check_issuer(apr_pool_t *p, const char *issuer)
{
    const char *err;

    if (!issuer || !*issuer) {
        return "the issuer is empty";
    }
    err = lessons_discovery_url_ok(p, issuer);
    if (!err && strchr(issuer, '?')) {
        err = "it has a query (?...)";
    }
    return err ? apr_pstrcat(p, "an issuer whose metadata can be fetched "
                             "is an https:// URL without a query or "
                             "fragment: ", err, NULL)
               : NULL;
}

void lessons_discovery_urls(apr_pool_t *p, const char *issuer,
                            const char **openid, const char **oauth)
{
    const char *auth, *path;
    apr_size_t n = strlen(issuer);

    while (n > 0 && issuer[n - 1] == '/') {
        n--;
    }
    issuer = apr_pstrmemdup(p, issuer, n);
    *openid = apr_pstrcat(p, issuer, LESSONS_OPENID_PATH, NULL);
    /* check_issuer took it: scheme://authority[/path] */
    auth = strstr(issuer, "://");
    path = auth ? strchr(auth + 3, '/') : NULL;
    if (!path) {
        *oauth = apr_pstrcat(p, issuer, LESSONS_OAUTH_PATH, NULL);
        return;
    }
    *oauth = apr_pstrcat(p, apr_pstrmemdup(p, issuer,
                                           (apr_size_t)(path - issuer)),
                         LESSONS_OAUTH_PATH, path, NULL);
}

/* The URL member name of a metadata document fetched for issuer: as
 * lessons_discovery_parse reads its jwks_uri.
 */
static lessons_discovery_e lessons_discovery_member(apr_pool_t *p,
                                                    const char *doc,
                                                    apr_size_t len,
                                                    const char *issuer,
                                                    const char *name,
                                                    const char **jwks_uri,
                                                    const char **err)
{
    json_error_t jerr;
    json_t *root, *iss, *uri;
    const char *why;
    lessons_discovery_e rc = LESSONS_DISCOVERY_MALFORMED;

    *jwks_uri = NULL;
    *err = NULL;
    if (!doc || len > LESSONS_DISCOVERY_MAX_BYTES) {
        *err = apr_psprintf(p, "the metadata is larger than %d bytes",
                            LESSONS_DISCOVERY_MAX_BYTES);
        return rc;
    }
    /* The words are ours: jansson's would quote the document. */
    root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        *err = json_error_code(&jerr) == json_error_duplicate_key
               ? "the metadata has a member twice"
               : apr_psprintf(p, "the metadata is not JSON (line %d, "
                              "column %d)", jerr.line, jerr.column);
        return rc;
    }
    if (!json_is_object(root)) {
        *err = "the metadata is not a JSON object";
        goto done;
    }
    iss = json_object_get(root, "issuer");
    uri = json_object_get(root, name);
    if (!json_is_string(iss)) {
        *err = iss ? "the metadata's issuer is not a string"
                   : "the metadata has no issuer";
        goto done;
    }
    /* Byte for byte, its length included: an escaped NUL cuts nothing. */
    if (json_string_length(iss) != strlen(issuer)
        || memcmp(json_string_value(iss), issuer, strlen(issuer)) != 0) {
        rc = LESSONS_DISCOVERY_MISMATCH;
        *err = apr_psprintf(p, "the metadata names the issuer \"%.*s%s\", "
                            "not this one (RFC 8414 3.3)", LESSONS_QUOTE_MAX,
                            json_string_value(iss),
                            json_string_length(iss) > LESSONS_QUOTE_MAX
                            ? "..." : "");
        goto done;
    }
    if (!json_is_string(uri)) {
        *err = uri ? apr_psprintf(p, "the metadata's %s is not a string",
                                  name)
                   : apr_psprintf(p, "the metadata has no %s", name);
        goto done;
    }
    if (json_string_length(uri) != strlen(json_string_value(uri))) {
        *err = apr_psprintf(p, "the metadata's %s holds a NUL", name);
        goto done;
    }
    why = lessons_discovery_url_ok(p, json_string_value(uri));
    if (why) {
        *err = apr_psprintf(p, "the metadata's %s cannot be %s: %s", name,
                            strcmp(name, "jwks_uri") == 0 ? "a keys URL"
                                                         : "fetched", why);
        goto done;
    }
    *jwks_uri = apr_pstrdup(p, json_string_value(uri));
    rc = LESSONS_DISCOVERY_OK;
done:
    json_decref(root);
    return rc;
}

lessons_discovery_e lessons_discovery_parse(apr_pool_t *p, const char *doc,
                                            apr_size_t len,
                                            const char *issuer,
                                            const char **jwks_uri,
                                            const char **err)
{
    return lessons_discovery_member(p, doc, len, issuer, "jwks_uri",
                                    jwks_uri, err);
}

lessons_discovery_e lessons_discovery_parse_introspection(
    apr_pool_t *p, const char *doc, apr_size_t len, const char *issuer,
    const char **endpoint, const char **err)
{
    lessons_discovery_e rc;

    rc = lessons_discovery_member(p, doc, len, issuer,
                                  "introspection_endpoint", endpoint, err);
    if (rc != LESSONS_DISCOVERY_OK) {
        return rc;
    }
    /* Unlike the keys (public, and checked by their signatures), the
     * endpoint is sent the client's secret and every token, and its
     * word opens the gate: only the issuer's own origin is asked.
     */
    if (!lessons_fetch_same_origin(p, *endpoint, issuer, 0)) {
        *err = apr_psprintf(p, "the metadata's introspection_endpoint %.*s "
                            "is not on the issuer's origin: refused",
                            LESSONS_QUOTE_MAX, *endpoint);
        *endpoint = NULL;
        return LESSONS_DISCOVERY_MALFORMED;
    }
    return LESSONS_DISCOVERY_OK;
}

/* One GET within the fetch's deadline. */
static const char *lessons_discovery_get(lessons_discovery_t *d,
                                         apr_pool_t *p, const char *url,
                                         apr_size_t max_bytes,
                                         apr_time_t deadline, char **body,
                                         apr_size_t *len, long *status)
{
    lessons_fetch_opts_t opts;
    long left = (long)apr_time_as_msec(deadline - apr_time_now());

    *status = 0;
    if (left <= 0) {
        return apr_psprintf(p, "timed out (limit %ld ms for the metadata "
                            "and the keys)", d->fetch.total_timeout_ms);
    }
    memset(&opts, 0, sizeof(opts));
    opts.url = url;
    opts.ca_pem = d->fetch.ca_pem;
    opts.ca_len = d->fetch.ca_len;
    opts.proxy = d->fetch.proxy;
    opts.connect_timeout_ms = d->fetch.connect_timeout_ms < left
                              ? d->fetch.connect_timeout_ms : left;
    opts.total_timeout_ms = left;
    opts.max_bytes = max_bytes;
    opts.max_redirects = d->fetch.max_redirects;
    return d->get ? d->get(d->get_baton, p, &opts, body, len, status)
                  : lessons_fetch_get_ex(p, &opts, body, len, status);
}

/* The metadata, from the place that answered last first; the other is
 * asked only when the first answered with a status (a 404: not there),
 * not when it could not be reached.  NULL with *jwks_uri, or why not.
 */
static const char *lessons_discovery_document(lessons_discovery_t *d,
                                              apr_pool_t *scratch,
                                              apr_time_t deadline,
                                              char **body, apr_size_t *len,
                                              const char **from)
{
    const char *urls[2], *errs[2] = { NULL, NULL };
    long status = 0;
    int i, at = 0;

    lessons_discovery_urls(scratch, d->fetch.url, &urls[0], &urls[1]);
    for (i = 0; i < 2; i++) {
        at = d->oauth_first ? 1 - i : i;
        errs[i] = lessons_discovery_get(d, scratch, urls[at],
                                        LESSONS_DISCOVERY_MAX_BYTES,
                                        deadline, body, len, &status);
        if (!errs[i]) {
            break;
        }
        errs[i] = apr_psprintf(scratch, "metadata %s: %s", urls[at],
                               errs[i]);
        if (status == 0) {
            break;
        }
    }
    if (i == 2 || errs[i]) {
        d->last = LESSONS_DISCOVERY_UNREACHABLE;
        return errs[1] ? apr_pstrcat(scratch, errs[0], "; ", errs[1], NULL)
                       : errs[0];
    }
    d->oauth_first = at == 1;
    *from = urls[at];
    return NULL;
}

/* The metadata's jwks_uri (lessons_discovery_document): NULL with
 * *jwks_uri, or why not.
 */
static const char *lessons_discovery_metadata(lessons_discovery_t *d,
                                              apr_pool_t *scratch,
                                              apr_time_t deadline,
                                              const char **jwks_uri)
{
    const char *from = NULL, *err;
    char *body = NULL;
    apr_size_t len = 0;

    err = lessons_discovery_document(d, scratch, deadline, &body, &len,
                                     &from);
    if (err) {
        return err;
    }
    d->last = lessons_discovery_parse(scratch, body, len, d->fetch.url,
                                      jwks_uri, &err);
    if (d->last != LESSONS_DISCOVERY_OK) {
        return apr_psprintf(scratch, "metadata %s refused: %s", from, err);
    }
    return NULL;
}

const char *lessons_discovery_introspection(lessons_discovery_t *d,
                                            apr_pool_t *p,
                                            const char **endpoint)
{
    apr_time_t deadline = apr_time_now()
                          + apr_time_from_msec(d->fetch.total_timeout_ms);
    const char *from = NULL, *err;
    char *body = NULL;
    apr_size_t len = 0;

    *endpoint = NULL;
    err = lessons_discovery_document(d, p, deadline, &body, &len, &from);
    if (err) {
        return err;
    }
    d->last = lessons_discovery_parse_introspection(p, body, len,
                                                    d->fetch.url, endpoint,
                                                    &err);
    if (d->last != LESSONS_DISCOVERY_OK) {
        return apr_psprintf(p, "metadata %s refused: %s", from, err);
    }
    return NULL;
}

const char *lessons_discovery_fetch(void *baton, apr_pool_t *set_pool,
                                    apr_pool_t *scratch,
                                    const lessons_keyset_t **set,
                                    const char **doc, apr_size_t *doclen)
{
    lessons_discovery_t *d = baton;
    apr_time_t deadline = apr_time_now()
                          + apr_time_from_msec(d->fetch.total_timeout_ms);
    const char *jwks_uri = NULL, *err;
    char *body = NULL;
    apr_size_t len = 0;
    long status = 0;

    err = lessons_discovery_metadata(d, scratch, deadline, &jwks_uri);
    if (err) {
        return err;
    }
    apr_cpystrn(d->jwks_uri, jwks_uri, sizeof(d->jwks_uri));
    d->last = LESSONS_DISCOVERY_KEYS;
    err = lessons_discovery_get(d, scratch, jwks_uri, LESSONS_JWKS_MAX_BYTES,
                                deadline, &body, &len, &status);
    if (!err) {
        *doc = body;
        *doclen = len;
        err = lessons_keysource_parse(set_pool, scratch, body, len,
                                      d->fetch.algs, d->fetch.jwks_flags,
                                      set);
    }
    if (err) {
        return apr_psprintf(scratch, "keys %s: %s", jwks_uri, err);
    }
    d->last = LESSONS_DISCOVERY_OK;
    return NULL;
}
