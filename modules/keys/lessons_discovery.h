/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_discovery.h: an identity provider named by its issuer alone
 * (issue 20).  Its metadata -- OpenID Connect Discovery 1.0's
 * /.well-known/openid-configuration, or RFC 8414's
 * /.well-known/oauth-authorization-server -- names its jwks_uri.  The
 * document counts only when its "issuer" is the configured one, byte for
 * byte (RFC 8414 3.3: otherwise none of it may be used); the keys are
 * then fetched from that jwks_uri exactly as a keys URL's are.  One fetch
 * (lessons_discovery_fetch, a lessons_keysource fetch function) does
 * both, every time, so a provider that moves its jwks_uri is followed at
 * the next refresh or unknown kid.
 *
 * The jwks_uri may name another origin than the issuer (Google serves
 * its keys from www.googleapis.com): the metadata came over verified
 * HTTPS from the issuer's own origin, which is the trust OpenID Connect
 * builds on.  Each GET still follows redirects only within its own
 * origin (lessons_fetch).
 *
 * httpd-free: the GETs go through lessons_fetch_get_ex, or a function a
 * test gives in its place.
 */
#ifndef LESSONS_DISCOVERY_H
#define LESSONS_DISCOVERY_H

#include "apr_pools.h"
#include "keys/lessons_fetch.h"
#include "keys/lessons_keyset.h"
#include "keys/lessons_keysource.h"

/* The largest metadata document read, and the longest issuer or
 * jwks_uri taken (bytes).
 */
#define LESSONS_DISCOVERY_MAX_BYTES  (64 * 1024)
#define LESSONS_DISCOVERY_URI_MAX    2048

/* Can issuer be discovered?  An https URL written out as a keys URL must
 * be (lessons_fetch_check_url: a host, no user name or password), with
 * no query or fragment (RFC 8414 2, OpenID Connect Discovery 2), no
 * space or control character, at most LESSONS_DISCOVERY_URI_MAX bytes.
 * NULL, or why not (for configtest).
 */
const char *lessons_discovery_check_issuer(apr_pool_t *p, const char *issuer);

/* Where the metadata of an issuer (one lessons_discovery_check_issuer
 * took) is looked for, in p: OpenID Connect's place (the issuer, then
 * "/.well-known/openid-configuration") and RFC 8414's (its well-known
 * path inserted between the host and the issuer's path).  A terminating
 * "/" of the issuer is dropped first, as both say.
 */
void lessons_discovery_urls(apr_pool_t *p, const char *issuer,
                            const char **openid, const char **oauth);

typedef enum {
    LESSONS_DISCOVERY_OK = 0,
    LESSONS_DISCOVERY_UNREACHABLE,  /* no metadata could be fetched */
    LESSONS_DISCOVERY_MALFORMED,    /* not a JSON object, a member twice,
                                     * no string issuer or jwks_uri, or a
                                     * jwks_uri no keys URL could be */
    LESSONS_DISCOVERY_MISMATCH,     /* it names another issuer */
    LESSONS_DISCOVERY_KEYS          /* the jwks_uri's key set could not
                                     * be fetched, or was refused */
} lessons_discovery_e;

/* A metadata document of len bytes, fetched for issuer: its jwks_uri
 * (a copy in p), or why not in *err (in p; it quotes nothing of the
 * document but, for MISMATCH, the first 256 bytes of the issuer it
 * names).
 */
lessons_discovery_e lessons_discovery_parse(apr_pool_t *p, const char *doc,
                                            apr_size_t len,
                                            const char *issuer,
                                            const char **jwks_uri,
                                            const char **err);

/* A metadata document as lessons_discovery_parse reads it, for its
 * "introspection_endpoint" (RFC 8414 2, RFC 7662 4) in place of its
 * jwks_uri, which must moreover be on the issuer's origin (scheme, host
 * and port): the endpoint is given the client's secret and every token,
 * and its answer opens the gate, so a document naming another origin is
 * refused (MALFORMED, *err saying so).
 */
lessons_discovery_e lessons_discovery_parse_introspection(
    apr_pool_t *p, const char *doc, apr_size_t len, const char *issuer,
    const char **endpoint, const char **err);

/* A GET as lessons_fetch_get_ex does it. */
typedef const char *(*lessons_discovery_get_fn)(void *baton, apr_pool_t *p,
                                                const lessons_fetch_opts_t *o,
                                                char **body, apr_size_t *len,
                                                long *status);

/* One discovered issuer, as its fetcher keeps it (the baton of
 * lessons_discovery_fetch).  The first part is the caller's; the rest
 * is written by each fetch, and read by the source's report, which runs
 * on the same thread right after it.
 */
typedef struct {
    lessons_keysource_url_t fetch;  /* url: the issuer (one that
                                     * lessons_discovery_check_issuer
                                     * took); the CAs (for both GETs), the
                                     * algorithms every key must fit, the
                                     * JWKS flags, and the bounds, with
                                     * total_timeout_ms for the whole
                                     * fetch (the metadata from one or two
                                     * places, then the keys) and
                                     * max_redirects per GET, within its
                                     * own origin */
    lessons_discovery_get_fn get;   /* NULL: lessons_fetch_get_ex */
    void *get_baton;

    lessons_discovery_e last;       /* what the last fetch came to */
    int oauth_first;                /* RFC 8414's place answered last:
                                     * it is asked first */
    char jwks_uri[LESSONS_DISCOVERY_URI_MAX + 1];
                                    /* the last metadata's jwks_uri, or
                                     * "" */
} lessons_discovery_t;

/* lessons_keysource fetch function (baton: a lessons_discovery_t): the
 * metadata from OpenID Connect's place, or from RFC 8414's when the
 * first answered with a status other than 200; checked with
 * lessons_discovery_parse; then the jwks_uri's key set, with public keys
 * only, each fitting algs, as lessons_keysource_fetch_url takes one.
 * Sets last (and jwks_uri once the metadata named one).  *doc: the
 * keys' document (what the server's other processes parse, with
 * lessons_keysource_parse_url and the baton's fetch member).
 */
const char *lessons_discovery_fetch(void *baton, apr_pool_t *set_pool,
                                    apr_pool_t *scratch,
                                    const lessons_keyset_t **set,
                                    const char **doc, apr_size_t *len);

/* The introspection endpoint of d's issuer: its metadata fetched as
 * lessons_discovery_fetch fetches it (the same places, bounds and
 * order), read with lessons_discovery_parse_introspection.  NULL with
 * *endpoint (in p), or why not (in p).  Sets d->last and oauth_first;
 * one caller at a time per d.
 */
const char *lessons_discovery_introspection(lessons_discovery_t *d,
                                            apr_pool_t *p,
                                            const char **endpoint);

#endif /* LESSONS_DISCOVERY_H */
