/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_fetch.c: one bounded HTTPS GET of a JWKS (or of a provider's
 * metadata) with libcurl.
 *
 * Every limit is ours, not libcurl's defaults: TLS peer and host are
 * verified, only https (and http when the caller allows it) may be
 * spoken, the whole fetch has one deadline (redirects included), the body
 * has a cap, and redirects are followed by hand, each one only when it
 * stays on the scheme, host and port we started from -- a JWKS that may
 * move to another origin would let whoever controls that origin sign
 * tokens.  Messages never quote the body, and name URLs only by their
 * origin: the caller prefixes its own URL.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "apr_strings.h"
#include "apr_time.h"

#include "base/lessons_buf.h"
#include "keys/lessons_fetch.h"

#define LESSONS_FETCH_UA      "mod_lessons"
#define LESSONS_FETCH_ACCEPT  "Accept: application/jwk-set+json, application/json"

/* ------------------------------------------------------------ globals */

const char *lessons_fetch_global_init(void)
{
    /* Called once from post_config, before any thread exists; httpd
     * runs post_config twice at start-up, hence the flag. */
    static int done;
    static CURLcode rc;
    static char msg[160];

    if (!done) {
        rc = curl_global_init(CURL_GLOBAL_DEFAULT);
        done = 1;
        if (rc != CURLE_OK) {
            apr_snprintf(msg, sizeof(msg), "cannot start libcurl: %s",
                         curl_easy_strerror(rc));
        }
    }
    return rc == CURLE_OK ? NULL : msg;
}

/* ---------------------------------------------------------------- URLs */

/* The origin of a URL: lower-case scheme, host, port (the scheme's
 * default when the URL names none).  NULL, or a message. */
typedef struct {
    char scheme[16];
    char host[256];
    long port;
} lessons_origin_t;

static const char *url_part(apr_pool_t *p, CURLU *u, CURLUPart what,
                            unsigned int flags, char **out)
{
    char *s = NULL;
    CURLUcode rc = curl_url_get(u, what, &s, flags);

    *out = NULL;
    if (rc != CURLUE_OK) {
        return curl_url_strerror(rc);
    }
    *out = apr_pstrdup(p, s);
    curl_free(s);
    return NULL;
}

/* Parse url and check it against the rules of lessons_fetch_check_url;
 * fill *o when o is not NULL. */
static const char *url_parse(apr_pool_t *p, const char *url, int allow_http,
                             lessons_origin_t *o)
{
    CURLU *u;
    CURLUcode rc;
    char *scheme, *host, *port, *user, *pass, *c;
    const char *err = NULL;

    if (url == NULL || *url == '\0') {
        return "the URL is empty";
    }
    /* curl reads "https:/host" and "https:///host" as https://host/;
     * a URL that means what it says spells its authority out. */
    {
        const char *c2 = strstr(url, "://");

        if (c2 == NULL || c2[3] == '\0' || c2[3] == '/'
            || strspn(url, "abcdefghijklmnopqrstuvwxyz"
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
               != (apr_size_t)(c2 - url)) {
            return "the URL must be scheme://host/...";
        }
    }
    u = curl_url();
    if (u == NULL) {
        return "out of memory parsing the URL";
    }
    /* No flags: a scheme is required and spaces are refused. */
    rc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (rc != CURLUE_OK) {
        err = apr_psprintf(p, "the URL cannot be parsed: %s",
                           curl_url_strerror(rc));
        goto done;
    }
    if (url_part(p, u, CURLUPART_SCHEME, 0, &scheme) != NULL
        || scheme == NULL) {
        err = "the URL has no scheme";
        goto done;
    }
    if (strcasecmp(scheme, "https") != 0
        && !(allow_http && strcasecmp(scheme, "http") == 0)) {
        err = apr_psprintf(p, "the URL's scheme must be https%s, not %s",
                           allow_http ? " or http" : "", scheme);
        goto done;
    }
    if (url_part(p, u, CURLUPART_HOST, 0, &host) != NULL
        || host == NULL || *host == '\0') {
        err = "the URL has no host";
        goto done;
    }
    /* A password in a configuration file and in every log line that
     * names the URL: refused, whatever the part. */
    url_part(p, u, CURLUPART_USER, 0, &user);
    url_part(p, u, CURLUPART_PASSWORD, 0, &pass);
    if (user != NULL || pass != NULL) {
        err = "the URL must not hold a user name or password";
        goto done;
    }
    if (o != NULL) {
        if (url_part(p, u, CURLUPART_PORT, CURLU_DEFAULT_PORT, &port) != NULL
            || port == NULL) {
            err = "the URL has no port";
            goto done;
        }
        apr_cpystrn(o->scheme, scheme, sizeof(o->scheme));
        for (c = o->scheme; *c; c++) {
            if (*c >= 'A' && *c <= 'Z') {
                *c = (char)(*c - 'A' + 'a');
            }
        }
        if (strlen(host) >= sizeof(o->host)) {
            err = "the URL's host name is too long";
            goto done;
        }
        apr_cpystrn(o->host, host, sizeof(o->host));
        o->port = strtol(port, NULL, 10);
    }
done:
    curl_url_cleanup(u);
    return err;
}

const char *lessons_fetch_check_url(apr_pool_t *p, const char *url,
                                    int allow_http)
{
    return url_parse(p, url, allow_http, NULL);
}

const char *lessons_fetch_check_proxy(apr_pool_t *p, const char *url)
{
    CURLU *u;
    CURLUcode rc;
    char *host, *port, *user, *pass, *path, *query, *frag;
    const char *err = NULL;
    long n;

    if (url == NULL || *url == '\0') {
        return "the proxy URL is empty";
    }
    /* A proxy spoken to in plain HTTP, which only ever sees CONNECT
     * host:port: the TLS to the provider runs inside the tunnel, so the
     * proxy needs no trust of ours and sees no keys in clear.
     */
    if (strncasecmp(url, "http://", 7) != 0) {
        return "the proxy must be given as http://host:port";
    }
    if (url[7] == '\0' || url[7] == '/') {
        return "the proxy URL has no host";
    }
    u = curl_url();
    if (u == NULL) {
        return "out of memory parsing the URL";
    }
    rc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (rc != CURLUE_OK) {
        err = apr_psprintf(p, "the proxy URL cannot be parsed: %s",
                           curl_url_strerror(rc));
        goto done;
    }
    if (url_part(p, u, CURLUPART_HOST, 0, &host) != NULL
        || host == NULL || *host == '\0') {
        err = "the proxy URL has no host";
        goto done;
    }
    /* Its password would be in every log line naming the proxy. */
    url_part(p, u, CURLUPART_USER, 0, &user);
    url_part(p, u, CURLUPART_PASSWORD, 0, &pass);
    if (user != NULL || pass != NULL) {
        err = "the proxy URL must not hold a user name or password";
        goto done;
    }
    /* No default: port 80 is rarely a proxy's, and a guess is not what
     * the admin meant. */
    if (url_part(p, u, CURLUPART_PORT, 0, &port) != NULL || port == NULL
        || (n = strtol(port, NULL, 10)) < 1 || n > 65535) {
        err = "the proxy URL must name its port (http://host:port)";
        goto done;
    }
    /* A proxy is a host and a port; anything more would be dropped by
     * libcurl without a word. */
    url_part(p, u, CURLUPART_PATH, 0, &path);
    url_part(p, u, CURLUPART_QUERY, 0, &query);
    url_part(p, u, CURLUPART_FRAGMENT, 0, &frag);
    if ((path != NULL && strcmp(path, "/") != 0) || query != NULL
        || frag != NULL) {
        err = "the proxy URL must be http://host:port, without a path, "
              "query or fragment";
        goto done;
    }
done:
    curl_url_cleanup(u);
    return err;
}

static int same_origin(const lessons_origin_t *a, const lessons_origin_t *b)
{
    return strcmp(a->scheme, b->scheme) == 0
           && strcasecmp(a->host, b->host) == 0
           && a->port == b->port;
}

int lessons_fetch_same_origin(apr_pool_t *p, const char *a, const char *b,
                              int allow_http)
{
    lessons_origin_t oa, ob;

    return url_parse(p, a, allow_http, &oa) == NULL
           && url_parse(p, b, allow_http, &ob) == NULL
           && same_origin(&oa, &ob);
}

/* --------------------------------------------------------------- body */

typedef struct {
    lessons_buf_t text;             /* max: the keys' byte cap */
    int too_big;
} lessons_body_t;

/* Stops the transfer (returning less than given) once the body would
 * pass the cap: a Content-Length may lie or be absent. */
static size_t body_write(char *data, size_t size, size_t nmemb, void *arg)
{
    lessons_body_t *b = arg;
    apr_size_t n = size * nmemb;

    if (n == 0) {
        return 0;
    }
    if (lessons_buf_add(&b->text, data, n, 4096) != 0) {
        b->too_big = 1;
        return 0;
    }
    return n;
}

/* -------------------------------------------------------------- fetch */

static const char *origin_text(apr_pool_t *p, const lessons_origin_t *o)
{
    return apr_psprintf(p, "%s://%s:%ld", o->scheme, o->host, o->port);
}

/* The words for a failed transfer: ours for the cap and the deadline,
 * else curl's error buffer, else curl's name of the code. */
static const char *curl_failure(apr_pool_t *p, CURLcode rc,
                                const lessons_body_t *b, const char *errbuf,
                                const lessons_fetch_opts_t *opts)
{
    const char *words = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    /* curl's words for a proxy that is down name only its address. */
    const char *via = opts->proxy
        ? apr_psprintf(p, " (through the proxy %s)", opts->proxy) : "";

    if (b->too_big || rc == CURLE_FILESIZE_EXCEEDED) {
        return apr_psprintf(p, "the response is larger than %" APR_SIZE_T_FMT
                            " bytes", opts->max_bytes);
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        return apr_psprintf(p, "timed out (limit %ld ms): %s%s",
                            opts->total_timeout_ms, words, via);
    }
    return apr_psprintf(p, "%s%s", words, via);
}

/* Everything that stays the same for every hop: TLS verified against
 * the given CAs only, the admin's proxy or none, the protocols, the
 * caps, the headers and where the body goes.
 */
static void fetch_setup(CURL *h, const lessons_fetch_opts_t *opts,
                        struct curl_slist *hdrs, lessons_body_t *b,
                        char *errbuf)
{
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (opts->ca_pem != NULL) {
        /* Exactly the admin's CAs, from memory: libcurl's built-in bundle
         * and directory (the system's) are switched off, and OpenSSL's
         * environment (SSL_CERT_FILE, SSL_CERT_DIR) is never consulted,
         * since a CA is given.
         */
        struct curl_blob blob;

        blob.data = (void *)opts->ca_pem;
        blob.len = opts->ca_len;
        blob.flags = CURL_BLOB_COPY;
        curl_easy_setopt(h, CURLOPT_CAINFO, NULL);
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (opts->proxy != NULL) {
        /* The admin's proxy, as a CONNECT tunnel whatever the scheme:
         * TLS (verified as above, against the same CAs) runs from us to
         * the server inside it, and the proxy sees host:port only.  ""
         * for NOPROXY: no_proxy from the environment never sends a
         * fetch around it.
         */
        curl_easy_setopt(h, CURLOPT_PROXY, opts->proxy);
        curl_easy_setopt(h, CURLOPT_PROXYTYPE, (long)CURLPROXY_HTTP);
        curl_easy_setopt(h, CURLOPT_HTTPPROXYTUNNEL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "");
    }
    else {
        /* Never a proxy the admin did not name for this fetch: ""
         * switches off http_proxy, https_proxy and all_proxy from the
         * environment.
         */
        curl_easy_setopt(h, CURLOPT_PROXY, "");
    }
#if LIBCURL_VERSION_NUM >= 0x075500     /* 7.85: the string form */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR,
                     opts->allow_http ? "http,https" : "https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS,
                     opts->allow_http ? (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)
                                      : (long)CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)opts->max_bytes);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_USERAGENT, LESSONS_FETCH_UA);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

/* A hop answered status, not 200: NULL with *url set to the redirect's
 * target when it may be followed (a redirect status with a Location of
 * the same origin, within max_redirects), else why not.
 */
/* An error answer's own word for what went wrong: the "error" member of
 * a JSON body (RFC 6749 5.2, RFC 7662 2.3: oidc-provider's
 * unsupported_token_type for a JWT), appended to err as the provider
 * said it, when it is short printable ASCII; err alone otherwise.
 */
#define LESSONS_FETCH_ERROR_CODE_MAX 64

static const char *fetch_error_code(apr_pool_t *p, const char *err,
                                    const char *text, apr_size_t len)
{
    json_t *doc = text && len ? json_loadb(text, len, 0, NULL) : NULL;
    const char *code = json_is_object(doc)
                       ? json_string_value(json_object_get(doc, "error"))
                       : NULL;
    apr_size_t i, n = code ? strlen(code) : 0;

    for (i = 0; i < n; i++) {
        if (code[i] < 0x20 || code[i] > 0x7e || code[i] == '"'
            || code[i] == '\\') {
            break;
        }
    }
    if (n > 0 && n <= LESSONS_FETCH_ERROR_CODE_MAX && i == n) {
        err = apr_psprintf(p, "%s (error \"%s\")", err, code);
    }
    json_decref(doc);
    return err;
}

static const char *fetch_follow(apr_pool_t *p, CURL *h, long status,
                                const lessons_fetch_opts_t *opts,
                                const lessons_origin_t *origin, int hops,
                                const char **url)
{
    lessons_origin_t next;
    char *location = NULL;
    const char *err;

    if (status < 300 || status > 399
        || status == 304 || status == 305 || status == 306) {
        return apr_psprintf(p, "HTTP status %ld, not 200%s", status,
                            hops ? apr_psprintf(p, " (after %d redirect%s)",
                                                hops, hops == 1 ? "" : "s")
                                 : "");
    }
    /* curl resolves Location against the URL it used. */
    curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &location);
    if (location == NULL) {
        return apr_psprintf(p, "HTTP status %ld without a usable Location",
                            status);
    }
    if (hops >= opts->max_redirects) {
        return apr_psprintf(p, "more than %d redirect%s (HTTP status %ld)",
                            opts->max_redirects,
                            opts->max_redirects == 1 ? "" : "s", status);
    }
    err = url_parse(p, location, opts->allow_http, &next);
    if (err != NULL) {
        return apr_psprintf(p, "redirect refused: %s", err);
    }
    if (!same_origin(origin, &next)) {
        return apr_psprintf(p, "redirect to another origin refused: %s "
                            "(from %s)", origin_text(p, &next),
                            origin_text(p, origin));
    }
    *url = apr_pstrdup(p, location);        /* location is the handle's */
    return NULL;
}

/* What a POST adds to a fetch (lessons_fetch_post), or NULL for a GET. */
typedef struct {
    const char *form;
    apr_size_t form_len;
    const char *authorization;
} lessons_fetch_post_t;

/* The headers of a fetch: a GET's Accept; a POST's Accept, form type,
 * credentials, and no "Expect: 100-continue" (a round trip more, for a
 * body of a few kilobytes at most).  NULL when memory ran out.
 */
static struct curl_slist *fetch_headers(apr_pool_t *p,
                                        const lessons_fetch_post_t *post)
{
    struct curl_slist *hdrs, *next;

    if (post == NULL) {
        return curl_slist_append(NULL, LESSONS_FETCH_ACCEPT);
    }
    hdrs = curl_slist_append(NULL, "Accept: application/json");
    if (hdrs == NULL) {
        return NULL;
    }
    if ((next = curl_slist_append(hdrs, "Content-Type: "
                                  "application/x-www-form-urlencoded"))
        == NULL
        || (next = curl_slist_append(hdrs, "Expect:")) == NULL
        || (post->authorization != NULL
            && (next = curl_slist_append(hdrs, apr_pstrcat(
                    p, "Authorization: ", post->authorization, NULL)))
               == NULL)) {
        curl_slist_free_all(hdrs);
        return NULL;
    }
    return hdrs;
}

static const char *fetch_run(apr_pool_t *p, const lessons_fetch_opts_t *opts,
                             const lessons_fetch_post_t *post,
                             char **body, apr_size_t *len, long *status)
{
    CURL *h;
    struct curl_slist *hdrs = NULL;
    lessons_origin_t origin;
    lessons_body_t b;
    char errbuf[CURL_ERROR_SIZE];
    const char *err = NULL;
    const char *url;
    apr_time_t deadline;
    int hops = 0;

    *body = NULL;
    *len = 0;
    if (status) {
        *status = 0;
    }
    if (opts == NULL || opts->connect_timeout_ms <= 0
        || opts->total_timeout_ms <= 0 || opts->max_bytes == 0
        || opts->max_redirects < 0) {
        return "fetch options out of range";
    }
    err = url_parse(p, opts->url, opts->allow_http, &origin);
    if (err != NULL) {
        return err;
    }
    if (opts->proxy != NULL
        && (err = lessons_fetch_check_proxy(p, opts->proxy)) != NULL) {
        return err;
    }
    h = curl_easy_init();
    if (h == NULL) {
        return "cannot make a libcurl handle";
    }
    hdrs = fetch_headers(p, post);
    if (hdrs == NULL) {
        curl_easy_cleanup(h);
        return "out of memory";
    }
    memset(&b, 0, sizeof(b));
    b.text.p = p;
    b.text.max = opts->max_bytes;
    fetch_setup(h, opts, hdrs, &b, errbuf);
    if (post != NULL) {
        /* After fetch_setup's HTTPGET: the last method set wins.  The
         * body is the caller's, kept until the handle is gone.
         */
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)post->form_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, post->form);
    }

    deadline = apr_time_now() + apr_time_from_msec(opts->total_timeout_ms);
    url = opts->url;
    for (;;) {
        CURLcode rc;
        long code = 0, left, connect;

        /* One deadline for all hops. */
        left = (long)apr_time_as_msec(deadline - apr_time_now());
        if (left <= 0) {
            err = apr_psprintf(p, "timed out (limit %ld ms) after %d "
                               "redirect%s", opts->total_timeout_ms, hops,
                               hops == 1 ? "" : "s");
            break;
        }
        connect = opts->connect_timeout_ms < left ? opts->connect_timeout_ms
                                                  : left;
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect);
        curl_easy_setopt(h, CURLOPT_URL, url);
        b.text.len = 0;
        b.too_big = 0;
        errbuf[0] = '\0';

        rc = curl_easy_perform(h);
        if (rc != CURLE_OK) {
            err = curl_failure(p, rc, &b, errbuf, opts);
            break;
        }
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (status) {
            *status = code;
        }
        if (code == 200) {
            *body = lessons_buf_text(&b.text);
            *len = b.text.len;
            break;
        }
        err = fetch_follow(p, h, code, opts, &origin, hops, &url);
        if (err != NULL) {
            if (code >= 400) {
                err = fetch_error_code(p, err, b.text.buf, b.text.len);
            }
            break;
        }
        hops++;
    }

    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return err;
}

const char *lessons_fetch_get_ex(apr_pool_t *p,
                                 const lessons_fetch_opts_t *opts,
                                 char **body, apr_size_t *len, long *status)
{
    return fetch_run(p, opts, NULL, body, len, status);
}

const char *lessons_fetch_post(apr_pool_t *p, const lessons_fetch_opts_t *opts,
                               const char *form, apr_size_t form_len,
                               const char *authorization, char **body,
                               apr_size_t *len, long *status)
{
    lessons_fetch_post_t post;

    *body = NULL;
    *len = 0;
    if (status) {
        *status = 0;
    }
    if (form == NULL) {
        return "no form to post";
    }
    /* A redirect of a POST would carry the credentials, or lose the
     * body (303): never followed.
     */
    if (opts != NULL && opts->max_redirects != 0) {
        return "a POST follows no redirect (max_redirects must be 0)";
    }
    post.form = form;
    post.form_len = form_len;
    post.authorization = authorization;
    return fetch_run(p, opts, &post, body, len, status);
}

const char *lessons_fetch_get(apr_pool_t *p, const lessons_fetch_opts_t *opts,
                              char **body, apr_size_t *len)
{
    return lessons_fetch_get_ex(p, opts, body, len, NULL);
}

const char *lessons_fetch_ca_check(apr_pool_t *p, const char *pem,
                                   apr_size_t len, int *count)
{
    BIO *bio;
    X509 *cert;
    int n = 0;
    unsigned long e;

    *count = 0;
    if (!pem || len == 0 || len > (apr_size_t)INT_MAX) {
        return "it is empty";
    }
    bio = BIO_new_mem_buf(pem, (int)len);
    if (!bio) {
        return "out of memory";
    }
    ERR_clear_error();
    while ((cert = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        X509_free(cert);
        n++;
    }
    BIO_free(bio);
    /* The loop ends at the end of the text (PEM_R_NO_START_LINE) or at a
     * certificate that is not one.
     */
    e = ERR_peek_last_error();
    ERR_clear_error();
    if (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM
               && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
        char buf[256];

        ERR_error_string_n(e, buf, sizeof(buf));
        return apr_psprintf(p, "a certificate in it cannot be read (%s)",
                            buf);
    }
    if (n == 0) {
        return "it holds no certificate (-----BEGIN CERTIFICATE-----)";
    }
    *count = n;
    return NULL;
}
