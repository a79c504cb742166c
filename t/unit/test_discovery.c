/* Licensed under the Apache License, Version 2.0.
 *
 * test_discovery.c: lessons_discovery against lessons_discovery.h --
 * which issuers can be discovered, where their metadata is looked for,
 * what a metadata document must say (its issuer byte for byte, a
 * jwks_uri a keys URL could be, no member twice), and one fetch end to
 * end with a GET of our own in place of the network: the OpenID place
 * first, RFC 8414's after a 404 only, a jwks_uri that moves followed,
 * nothing of a document for another issuer used.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_strings.h"

#include "keys/lessons_discovery.h"

#include "unit_pool.h"

#define ISS      "https://sso.example.org/realms/school"
#define OPENID   ISS "/.well-known/openid-configuration"
#define OAUTH    "https://sso.example.org/.well-known/oauth-authorization-" \
                 "server/realms/school"
#define JWKS     ISS "/protocol/openid-connect/certs"

/* Two P-256 public keys. */
#define EC1 "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"k1\"," \
    "\"x\":\"kOMXLLArKeI6gZvRvmV2HDJ33GCLVTNaZywLe0aZy5A\"," \
    "\"y\":\"zCG8CT5X_hiry5qpzgFXAE0gKKjOGoYK_7hHRtIKANo\"}"
#define EC2 "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"k2\"," \
    "\"x\":\"-6QtcuX9OuR-rrQnozz6_KELtWMIazi5MW8T3mu44Hk\"," \
    "\"y\":\"oVNf_HGL4sLF1_W5caJBm3TuU4wd_KvuO4n8xXEvjrQ\"}"
#define OCT "{\"kty\":\"oct\",\"kid\":\"s\"," \
    "\"k\":\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}"

#define B(a) LESSONS_ALG_BIT(LESSONS_ALG_##a)

#define assert_has(s, sub) do { \
        const char *s_ = (s); \
        if (s_ == NULL || strstr(s_, (sub)) == NULL) \
            fail_msg("\"%s\" does not contain \"%s\"", s_ ? s_ : "(null)", (sub)); \
    } while (0)

static const char *meta(const char *issuer, const char *jwks_uri)
{
    return apr_psprintf(pool, "{\"issuer\":\"%s\",\"jwks_uri\":\"%s\","
                        "\"id_token_signing_alg_values_supported\":"
                        "[\"HS256\"]}", issuer, jwks_uri);
}

/* --------------------------------------------------------- issuers */

static void test_check_issuer(void **state)
{
    char *longer;

    (void)state;
    assert_null(lessons_discovery_check_issuer(pool, ISS));
    assert_null(lessons_discovery_check_issuer(pool, ISS "/"));
    assert_null(lessons_discovery_check_issuer(pool, "https://accounts.google.com"));
    assert_null(lessons_discovery_check_issuer(pool, "https://127.0.0.1:8443"));
    assert_has(lessons_discovery_check_issuer(pool, "http://sso.example.org"),
               "https");
    assert_has(lessons_discovery_check_issuer(pool, ISS "?tenant=a"), "query");
    assert_has(lessons_discovery_check_issuer(pool, ISS "#x"), "fragment");
    assert_has(lessons_discovery_check_issuer(pool, "https://u:p@sso.example.org"),
               "user");
    assert_has(lessons_discovery_check_issuer(pool, ISS " "), "space");
    assert_has(lessons_discovery_check_issuer(pool, ISS "\n"), "control");
    assert_non_null(lessons_discovery_check_issuer(pool, "lessons-dev"));
    assert_non_null(lessons_discovery_check_issuer(pool, "https:/sso.example.org"));
    assert_non_null(lessons_discovery_check_issuer(pool, ""));
    assert_non_null(lessons_discovery_check_issuer(pool, NULL));
    longer = apr_pstrcat(pool, "https://sso.example.org/",
                         apr_psprintf(pool, "%0*d", LESSONS_DISCOVERY_URI_MAX, 0),
                         NULL);
    assert_has(lessons_discovery_check_issuer(pool, longer), "longer");
}

static void test_urls(void **state)
{
    const char *openid, *oauth;

    (void)state;
    lessons_discovery_urls(pool, ISS, &openid, &oauth);
    assert_string_equal(openid, OPENID);
    assert_string_equal(oauth, OAUTH);
    /* A terminating slash is dropped first (both specifications). */
    lessons_discovery_urls(pool, ISS "/", &openid, &oauth);
    assert_string_equal(openid, OPENID);
    assert_string_equal(oauth, OAUTH);
    lessons_discovery_urls(pool, "https://accounts.google.com", &openid, &oauth);
    assert_string_equal(openid, "https://accounts.google.com"
                                "/.well-known/openid-configuration");
    assert_string_equal(oauth, "https://accounts.google.com"
                               "/.well-known/oauth-authorization-server");
    lessons_discovery_urls(pool, "https://127.0.0.1:8443/", &openid, &oauth);
    assert_string_equal(openid, "https://127.0.0.1:8443"
                                "/.well-known/openid-configuration");
    assert_string_equal(oauth, "https://127.0.0.1:8443"
                               "/.well-known/oauth-authorization-server");
}

/* -------------------------------------------------------- documents */

static lessons_discovery_e parse(const char *doc, const char **uri,
                                 const char **err)
{
    return lessons_discovery_parse(pool, doc, strlen(doc), ISS, uri, err);
}

static void test_parse_good(void **state)
{
    const char *uri = NULL, *err = NULL;

    (void)state;
    assert_int_equal(parse(meta(ISS, JWKS), &uri, &err),
                     LESSONS_DISCOVERY_OK);
    assert_string_equal(uri, JWKS);
    assert_null(err);
    /* Keys on another origin: the metadata came from the issuer's. */
    assert_int_equal(parse(meta(ISS, "https://www.googleapis.com/oauth2/v3/certs"),
                           &uri, &err), LESSONS_DISCOVERY_OK);
    assert_string_equal(uri, "https://www.googleapis.com/oauth2/v3/certs");
    /* Members of other types and unknown ones are nobody's business. */
    assert_int_equal(parse(apr_psprintf(pool, "{\"x\":[1,{}],\"issuer\":\"%s\","
                                        "\"jwks_uri\":\"%s\",\"y\":null}",
                                        ISS, JWKS), &uri, &err),
                     LESSONS_DISCOVERY_OK);
}

static void test_parse_mismatch(void **state)
{
    const char *uri = "x", *err = NULL;
    char *long_iss;

    (void)state;
    assert_int_equal(parse(meta("https://sso.example.org/realms/other", JWKS),
                           &uri, &err), LESSONS_DISCOVERY_MISMATCH);
    assert_null(uri);
    assert_has(err, "https://sso.example.org/realms/other");
    assert_has(err, "RFC 8414");
    /* Byte for byte: a slash, the case, a prefix, an escaped NUL. */
    assert_int_equal(parse(meta(ISS "/", JWKS), &uri, &err),
                     LESSONS_DISCOVERY_MISMATCH);
    assert_int_equal(parse(meta("https://SSO.example.org/realms/school", JWKS),
                           &uri, &err), LESSONS_DISCOVERY_MISMATCH);
    assert_int_equal(parse(meta("https://sso.example.org/realms/schoo", JWKS),
                           &uri, &err), LESSONS_DISCOVERY_MISMATCH);
    assert_int_equal(parse(meta(ISS "\\u0000x", JWKS), &uri, &err),
                     LESSONS_DISCOVERY_MALFORMED);  /* jansson: no NUL */
    /* What is quoted of the provider's issuer is bounded. */
    long_iss = apr_psprintf(pool, "https://x/%0*d", 1000, 0);
    assert_int_equal(parse(meta(long_iss, JWKS), &uri, &err),
                     LESSONS_DISCOVERY_MISMATCH);
    assert_true(strlen(err) < 400);
}

static void test_parse_malformed(void **state)
{
    static const char *const bad[][2] = {
        { "not json", "not JSON" },
        { "[]", "not a JSON object" },
        { "\"" ISS "\"", "JSON" },
        { "{\"jwks_uri\":\"" JWKS "\"}", "no issuer" },
        { "{\"issuer\":1,\"jwks_uri\":\"" JWKS "\"}", "issuer is not a string" },
        { "{\"issuer\":\"" ISS "\"}", "no jwks_uri" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":[\"" JWKS "\"]}",
          "jwks_uri is not a string" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"http://x/jwks\"}", "https" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"/certs\"}", "keys URL" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://u:p@x/jwks\"}", "user" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://x/jwks#a\"}", "fragment" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://x/j wks\"}", "space" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"https://x/\\u0000\"}", "JSON" },
        { "{\"issuer\":\"" ISS "\",\"issuer\":\"" ISS "\",\"jwks_uri\":\""
          JWKS "\"}", "twice" },
        { "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"" JWKS "\",\"jwks_uri\":\""
          "https://evil.example/jwks\"}", "twice" },
    };
    const char *uri, *err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uri = "x";
        err = NULL;
        if (parse(bad[i][0], &uri, &err) != LESSONS_DISCOVERY_MALFORMED) {
            fail_msg("case %zu (%s) not refused as malformed", i, bad[i][0]);
        }
        assert_null(uri);
        assert_has(err, bad[i][1]);
        /* The document is never quoted. */
        assert_null(strstr(err, "evil"));
    }
}

static void test_parse_size(void **state)
{
    char *big;
    const char *uri, *err;
    apr_size_t n = LESSONS_DISCOVERY_MAX_BYTES + 1;

    (void)state;
    big = apr_palloc(pool, n + 1);
    memset(big, ' ', n);
    big[n] = '\0';
    memcpy(big, meta(ISS, JWKS), strlen(meta(ISS, JWKS)));
    assert_int_equal(lessons_discovery_parse(pool, big, n, ISS, &uri, &err),
                     LESSONS_DISCOVERY_MALFORMED);
    assert_has(err, "larger");
    /* Padding within the bound is still a document. */
    assert_int_equal(lessons_discovery_parse(pool, big, n - 1, ISS, &uri,
                                             &err), LESSONS_DISCOVERY_OK);
}

/* ------------------------------------------------- fetch, end to end */

#define MAX_PAGES 8

/* RFC 8414's introspection_endpoint: read as jwks_uri is (the issuer
 * byte for byte first), and only on the issuer's own origin.
 */
static void test_parse_introspection(void **state)
{
    const char *uri = NULL, *err = NULL;
    const char *want = "https://sso.example.org/realms/school/introspect";
    const char *ep;

    (void)state;
    ep = apr_psprintf(pool, "{\"issuer\":\"%s\",\"jwks_uri\":\"%s\","
                      "\"introspection_endpoint\":\"%s\"}", ISS, JWKS, want);
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err), LESSONS_DISCOVERY_OK);
    assert_string_equal(uri, want);
    /* The default port spelt out is the same origin. */
    ep = "{\"issuer\":\"" ISS "\",\"introspection_endpoint\":"
         "\"https://SSO.example.org:443/i\"}";
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err), LESSONS_DISCOVERY_OK);
    assert_string_equal(uri, "https://SSO.example.org:443/i");
    /* Another host, port or scheme: refused, and said so. */
    ep = "{\"issuer\":\"" ISS "\",\"introspection_endpoint\":"
         "\"https://evil.example/introspect\"}";
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err),
                     LESSONS_DISCOVERY_MALFORMED);
    assert_null(uri);
    assert_has(err, "not on the issuer's origin");
    ep = "{\"issuer\":\"" ISS "\",\"introspection_endpoint\":"
         "\"https://sso.example.org:8443/i\"}";
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err),
                     LESSONS_DISCOVERY_MALFORMED);
    ep = "{\"issuer\":\"" ISS "\",\"introspection_endpoint\":"
         "\"http://sso.example.org/i\"}";
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err),
                     LESSONS_DISCOVERY_MALFORMED);
    /* None named; another issuer's document. */
    ep = "{\"issuer\":\"" ISS "\",\"jwks_uri\":\"" JWKS "\"}";
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err),
                     LESSONS_DISCOVERY_MALFORMED);
    assert_has(err, "no introspection_endpoint");
    ep = "{\"issuer\":\"https://sso.example.org/\","
         "\"introspection_endpoint\":\"https://sso.example.org/i\"}";
    assert_int_equal(lessons_discovery_parse_introspection(pool, ep,
                         strlen(ep), ISS, &uri, &err),
                     LESSONS_DISCOVERY_MISMATCH);
}

/* What our GET serves: url -> status and body; status 0 is "cannot
 * connect".  It records the URLs asked, in order, and their options.
 */
typedef struct {
    struct { const char *url; long status; const char *body; } page[MAX_PAGES];
    int npages;
    const char *asked[16];
    apr_size_t max_bytes[16];
    int nasked;
    const char *ca_pem;
    apr_interval_time_t sleep;      /* each GET takes this long */
} fake_web_t;

static fake_web_t web;

static void serve(const char *url, long status, const char *body)
{
    int i;

    for (i = 0; i < web.npages; i++) {
        if (strcmp(web.page[i].url, url) == 0) {
            break;
        }
    }
    assert_true(i < MAX_PAGES);
    web.page[i].url = url;
    web.page[i].status = status;
    web.page[i].body = body;
    if (i == web.npages) {
        web.npages++;
    }
}

static const char *fake_get(void *baton, apr_pool_t *p,
                            const lessons_fetch_opts_t *o, char **body,
                            apr_size_t *len, long *status)
{
    int i;

    (void)baton;
    if (web.nasked < 16) {
        web.max_bytes[web.nasked] = o->max_bytes;
        web.asked[web.nasked++] = apr_pstrdup(pool, o->url);
    }
    web.ca_pem = o->ca_pem;
    if (web.sleep) {
        apr_sleep(web.sleep);
    }
    *status = 0;
    for (i = 0; i < web.npages; i++) {
        if (strcmp(web.page[i].url, o->url) == 0) {
            *status = web.page[i].status;
            if (*status == 200) {
                *body = apr_pstrdup(p, web.page[i].body);
                *len = strlen(*body);
                return NULL;
            }
            return apr_psprintf(p, "HTTP status %ld, not 200", *status);
        }
    }
    return "Couldn't connect to server";
}

static lessons_discovery_t disc;

static int fetch_setup(void **state)
{
    (void)state;
    memset(&web, 0, sizeof(web));
    memset(&disc, 0, sizeof(disc));
    disc.fetch.url = ISS;
    disc.fetch.ca_pem = "-----BEGIN CERTIFICATE-----";
    disc.fetch.ca_len = 27;
    disc.fetch.algs = B(RS256) | B(ES256);
    disc.fetch.connect_timeout_ms = 1000;
    disc.fetch.total_timeout_ms = 10000;
    disc.fetch.max_redirects = 3;
    disc.get = fake_get;
    return 0;
}

static const char *fetch(const lessons_keyset_t **set)
{
    const char *doc = NULL, *err;
    apr_size_t len = 0;

    *set = NULL;
    err = lessons_discovery_fetch(&disc, pool, pool, set, &doc, &len);
    /* A set comes with the document it was made of, for the other
     * processes; parsed again, it is the same set.
     */
    if (!err) {
        const lessons_keyset_t *again = NULL;

        assert_non_null(doc);
        assert_null(lessons_keysource_parse_url(&disc.fetch, pool, pool, doc,
                                                len, &again));
        assert_true(lessons_keyset_same(*set, again));
    }
    return err;
}

/* The endpoint fetched as the keys' metadata is: the same places, the
 * same CA, and a document naming another origin refused.
 */
static void test_fetch_introspection(void **state)
{
    const char *ep = NULL;

    (void)state;
    serve(OPENID, 404, "");
    serve(OAUTH, 200, "{\"issuer\":\"" ISS "\",\"introspection_endpoint\":"
                      "\"https://sso.example.org/i\"}");
    assert_null(lessons_discovery_introspection(&disc, pool, &ep));
    assert_string_equal(ep, "https://sso.example.org/i");
    assert_int_equal(web.nasked, 2);
    assert_ptr_equal(web.ca_pem, disc.fetch.ca_pem);
    serve(OAUTH, 200, "{\"issuer\":\"" ISS "\",\"introspection_endpoint\":"
                      "\"https://other.example/i\"}");
    assert_has(lessons_discovery_introspection(&disc, pool, &ep),
               "not on the issuer's origin");
    assert_null(ep);
    serve(OAUTH, 503, "");
    assert_non_null(lessons_discovery_introspection(&disc, pool, &ep));
    assert_int_equal(disc.last, LESSONS_DISCOVERY_UNREACHABLE);
}

static void test_fetch_openid(void **state)
{
    const lessons_keyset_t *set;

    (void)state;
    serve(OPENID, 200, meta(ISS, JWKS));
    serve(JWKS, 200, "{\"keys\":[" EC1 "]}");
    assert_null(fetch(&set));
    assert_non_null(set);
    assert_int_equal(set->nkeys, 1);
    assert_string_equal(set->keys[0].kid, "k1");
    assert_int_equal(disc.last, LESSONS_DISCOVERY_OK);
    assert_string_equal(disc.jwks_uri, JWKS);
    assert_int_equal(web.nasked, 2);
    assert_string_equal(web.asked[0], OPENID);
    assert_string_equal(web.asked[1], JWKS);
    /* Each GET within its own bound, with the named CA. */
    assert_int_equal(web.max_bytes[0], LESSONS_DISCOVERY_MAX_BYTES);
    assert_int_equal(web.max_bytes[1], LESSONS_JWKS_MAX_BYTES);
    assert_ptr_equal(web.ca_pem, disc.fetch.ca_pem);
}

/* A provider that serves RFC 8414's metadata only: asked after the
 * OpenID place's 404, and first from then on.
 */
static void test_fetch_rfc8414(void **state)
{
    const lessons_keyset_t *set;
    const char *oauth_meta = meta(ISS, JWKS);

    (void)state;
    serve(OPENID, 404, NULL);
    serve(OAUTH, 200, oauth_meta);
    serve(JWKS, 200, "{\"keys\":[" EC1 "]}");
    assert_null(fetch(&set));
    assert_int_equal(web.nasked, 3);
    assert_string_equal(web.asked[0], OPENID);
    assert_string_equal(web.asked[1], OAUTH);
    assert_string_equal(web.asked[2], JWKS);
    web.nasked = 0;
    assert_null(fetch(&set));
    assert_int_equal(web.nasked, 2);
    assert_string_equal(web.asked[0], OAUTH);
    /* Gone from there: the OpenID place is asked again. */
    serve(OAUTH, 404, NULL);
    serve(OPENID, 200, meta(ISS, JWKS));
    web.nasked = 0;
    assert_null(fetch(&set));
    assert_int_equal(web.nasked, 3);
    assert_string_equal(web.asked[1], OPENID);
}

static void test_fetch_unreachable(void **state)
{
    const lessons_keyset_t *set;
    const char *err;

    (void)state;
    /* Not reachable at all: one GET, no second place, no keys. */
    err = fetch(&set);
    assert_has(err, "metadata " OPENID ": Couldn't connect");
    assert_null(set);
    assert_int_equal(web.nasked, 1);
    assert_int_equal(disc.last, LESSONS_DISCOVERY_UNREACHABLE);
    /* Both places answer, neither has it: both named. */
    serve(OPENID, 404, NULL);
    serve(OAUTH, 500, NULL);
    web.nasked = 0;
    err = fetch(&set);
    assert_has(err, OPENID ": HTTP status 404");
    assert_has(err, OAUTH ": HTTP status 500");
    assert_int_equal(web.nasked, 2);
    assert_int_equal(disc.last, LESSONS_DISCOVERY_UNREACHABLE);
}

/* Metadata for another issuer: nothing of it is used, not its keys. */
static void test_fetch_mismatch(void **state)
{
    const lessons_keyset_t *set;
    const char *err;

    (void)state;
    serve(OPENID, 200, meta("https://evil.example.org", "https://evil.example.org/jwks"));
    serve("https://evil.example.org/jwks", 200, "{\"keys\":[" EC2 "]}");
    err = fetch(&set);
    assert_has(err, "refused");
    assert_has(err, "https://evil.example.org");
    assert_null(set);
    assert_int_equal(disc.last, LESSONS_DISCOVERY_MISMATCH);
    assert_int_equal(web.nasked, 1);
    assert_string_equal(disc.jwks_uri, "");
    /* Not even from RFC 8414's place: the first document counted. */
    serve(OAUTH, 200, meta(ISS, JWKS));
    web.nasked = 0;
    assert_non_null(fetch(&set));
    assert_int_equal(web.nasked, 1);
}

/* The provider moves its keys: the next fetch goes where it now says. */
static void test_fetch_moved_jwks_uri(void **state)
{
    const lessons_keyset_t *set;
    const char *moved = "https://keys.example.net/school/jwks";

    (void)state;
    serve(OPENID, 200, meta(ISS, JWKS));
    serve(JWKS, 200, "{\"keys\":[" EC1 "]}");
    serve(moved, 200, "{\"keys\":[" EC2 "]}");
    assert_null(fetch(&set));
    assert_string_equal(set->keys[0].kid, "k1");
    serve(OPENID, 200, meta(ISS, moved));
    web.nasked = 0;
    assert_null(fetch(&set));
    assert_string_equal(set->keys[0].kid, "k2");
    assert_string_equal(web.asked[1], moved);
    assert_string_equal(disc.jwks_uri, moved);
}

static void test_fetch_keys_refused(void **state)
{
    const lessons_keyset_t *set;
    const char *err;

    (void)state;
    serve(OPENID, 200, meta(ISS, JWKS));
    /* A secret published with the keys is skipped: none is left. */
    serve(JWKS, 200, "{\"keys\":[" OCT "]}");
    err = fetch(&set);
    assert_has(err, "keys " JWKS ": the key set was refused");
    assert_null(set);
    assert_int_equal(disc.last, LESSONS_DISCOVERY_KEYS);
    assert_string_equal(disc.jwks_uri, JWKS);
    /* A key no algorithm of the issuer fits. */
    disc.fetch.algs = B(RS256);
    serve(JWKS, 200, "{\"keys\":[" EC1 "]}");
    assert_has(fetch(&set), "the key set was refused");
    serve(JWKS, 404, NULL);
    assert_has(fetch(&set), "keys " JWKS ": HTTP status 404");
    assert_int_equal(disc.last, LESSONS_DISCOVERY_KEYS);
}

/* One deadline for the metadata and the keys. */
static void test_fetch_one_deadline(void **state)
{
    const lessons_keyset_t *set;

    (void)state;
    serve(OPENID, 200, meta(ISS, JWKS));
    serve(JWKS, 200, "{\"keys\":[" EC1 "]}");
    disc.fetch.total_timeout_ms = 20;
    web.sleep = apr_time_from_msec(60);
    assert_has(fetch(&set), "timed out");
    assert_int_equal(web.nasked, 1);
    assert_null(set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_issuer),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_mismatch),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_introspection),
        cmocka_unit_test_setup(test_fetch_introspection, fetch_setup),
        cmocka_unit_test_setup(test_fetch_openid, fetch_setup),
        cmocka_unit_test_setup(test_fetch_rfc8414, fetch_setup),
        cmocka_unit_test_setup(test_fetch_unreachable, fetch_setup),
        cmocka_unit_test_setup(test_fetch_mismatch, fetch_setup),
        cmocka_unit_test_setup(test_fetch_moved_jwks_uri, fetch_setup),
        cmocka_unit_test_setup(test_fetch_keys_refused, fetch_setup),
        cmocka_unit_test_setup(test_fetch_one_deadline, fetch_setup),
    };

    if (unit_pool_open() != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
