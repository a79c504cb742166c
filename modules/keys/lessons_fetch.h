/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_fetch.h: one bounded HTTPS GET of a JWKS (or of a provider's
 * metadata), or POST of a token to introspect, with libcurl.  TLS is
 * verified (the system's CAs, or exactly the admin's, held in memory),
 * time and size are capped, no proxy from the environment is used (only
 * the one the admin named, as a CONNECT tunnel), and a redirect is
 * followed only to the same scheme, host and port.
 * httpd-free: the caller decides when to fetch and what to keep.
 */
#ifndef LESSONS_FETCH_H
#define LESSONS_FETCH_H

#include "apr_pools.h"

typedef struct {
    const char *url;                /* https:// (http:// only when
                                     * allow_http, for tests on loopback) */
    const char *ca_pem;             /* the PEM certificates to trust, and
                                     * nothing else; NULL: the system's */
    apr_size_t ca_len;
    long connect_timeout_ms;        /* > 0 */
    long total_timeout_ms;          /* > 0, the whole fetch, redirects
                                     * included */
    apr_size_t max_bytes;           /* body cap: more is an error */
    int max_redirects;              /* same-origin redirects followed */
    int allow_http;
    const char *proxy;              /* http://host:port of an outgoing
                                     * proxy (lessons_fetch_check_proxy),
                                     * every fetch a CONNECT tunnel
                                     * through it; NULL: straight to the
                                     * server.  Never the environment's */
} lessons_fetch_opts_t;

/* Call once per process before any thread fetches (curl_global_init is
 * not thread-safe): from post_config, before children are made.
 * Returns NULL or a message.
 */
const char *lessons_fetch_global_init(void);

/* Is url one lessons_fetch_get would try (https, or http when
 * allow_http; a host; no user info)?  NULL, or a message for configtest.
 */
const char *lessons_fetch_check_url(apr_pool_t *p, const char *url,
                                    int allow_http);

/* Is url an outgoing proxy lessons_fetch_get would use: http://host:port
 * with the port spelt out, no path but "/", no query, fragment, user
 * name or password?  NULL, or a message for configtest.
 */
const char *lessons_fetch_check_proxy(apr_pool_t *p, const char *url);

/* Are a and b URLs (as lessons_fetch_check_url takes them) of one
 * origin: scheme, host (case aside) and port, the default port spelt
 * out or not?  1 or 0 (either not a URL taken).
 */
int lessons_fetch_same_origin(apr_pool_t *p, const char *a, const char *b,
                              int allow_http);

/* GET opts->url.  On success returns NULL with *body (NUL-terminated,
 * in p) and *len; the final status must be 200.  Otherwise a one-line
 * message for the error log (curl's own words, the status, "larger
 * than N bytes", "redirect to another origin ..."; "(through the proxy
 * http://host:port)" after a failure to reach the server when one was
 * named), never the body.
 * Thread-safe: one easy handle per call.
 */
const char *lessons_fetch_get(apr_pool_t *p, const lessons_fetch_opts_t *opts,
                              char **body, apr_size_t *len);

/* lessons_fetch_get, and *status (when not NULL) gets the last HTTP
 * status the server answered (0 when none answered: no connection, TLS,
 * a timeout), so that a caller can tell "not here" (a 404) from "not
 * reachable" and try another URL only for the former.
 */
const char *lessons_fetch_get_ex(apr_pool_t *p,
                                 const lessons_fetch_opts_t *opts,
                                 char **body, apr_size_t *len, long *status);

/* POST form (form_len bytes, application/x-www-form-urlencoded) to
 * opts->url, with "Authorization: " authorization (NULL: none), Accept:
 * application/json, within the same bounds as a GET (TLS against the
 * given CAs only, the named proxy or none, the time and size caps).  No
 * redirect is followed: opts->max_redirects must be 0.  As
 * lessons_fetch_get_ex otherwise (the body of a 200 only; *status the
 * last status).  For RFC 7662 introspection.
 */
const char *lessons_fetch_post(apr_pool_t *p, const lessons_fetch_opts_t *opts,
                               const char *form, apr_size_t form_len,
                               const char *authorization, char **body,
                               apr_size_t *len, long *status);

/* Is pem (len bytes, a CA file's text) one or more PEM certificates?
 * NULL with *count set, or why not ("it holds no certificate", or
 * OpenSSL's words for one that cannot be read), for configtest.
 */
const char *lessons_fetch_ca_check(apr_pool_t *p, const char *pem,
                                   apr_size_t len, int *count);

#endif /* LESSONS_FETCH_H */
