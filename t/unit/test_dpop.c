/* Licensed under the Apache License, Version 2.0.
 *
 * test_dpop.c: lessons_dpop -- RFC 7638 thumbprints and RFC 9449's ath
 * against the RFCs' own examples, htu normalisation, the server's own URI
 * for a request (never an absolute-form target's authority), the iat
 * window (a few seconds ahead at most) and how long a proof is kept, a
 * token's cnf.jkt, and whole proofs made with cjose and fresh keys: a
 * good one passes, and each check refuses what it must.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <openssl/core_names.h>

#include "auth/lessons_dpop.h"
#include "auth/lessons_token.h"

#include "unit_pool.h"
#include "unit_jwt.h"

static int group_setup(void **state)
{
    (void)state;
    if (unit_pool_open() != 0) {
        return -1;
    }
    return 0;
}

/* RFC 7638 3.1's example key and its thumbprint. */
static const char rfc7638_key[] =
    "{\"kty\":\"RSA\",\"n\":\"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78"
    "LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMst"
    "n64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY"
    "368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyr"
    "dkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csF"
    "Cur-kEgU8awapJzKnqDKgw\",\"e\":\"AQAB\",\"alg\":\"RS256\","
    "\"kid\":\"2011-04-29\"}";

static void test_thumbprint_rfc7638(void **state)
{
    json_t *jwk = json_loads(rfc7638_key, 0, NULL);
    char out[LESSONS_DPOP_HASH_LEN];

    (void)state;
    assert_non_null(jwk);
    assert_int_equal(lessons_dpop_thumbprint(jwk, out), 0);
    assert_string_equal(out, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    /* Members beyond the required ones change nothing. */
    json_object_set_new(jwk, "use", json_string("sig"));
    assert_int_equal(lessons_dpop_thumbprint(jwk, out), 0);
    assert_string_equal(out, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
    /* A required member missing, or not a string: none. */
    json_object_del(jwk, "e");
    assert_int_equal(lessons_dpop_thumbprint(jwk, out), -1);
    json_object_set_new(jwk, "e", json_integer(65537));
    assert_int_equal(lessons_dpop_thumbprint(jwk, out), -1);
    json_decref(jwk);
}

/* RFC 9449 4.1's example proof key and 6.1's jkt for it. */
static void test_thumbprint_rfc9449(void **state)
{
    json_t *jwk = json_loads(
        "{\"kty\":\"EC\",\"x\":\"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs\","
        "\"y\":\"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA\",\"crv\":\"P-256\"}",
        0, NULL);
    char out[LESSONS_DPOP_HASH_LEN];

    (void)state;
    assert_int_equal(lessons_dpop_thumbprint(jwk, out), 0);
    assert_string_equal(out, "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I");
    json_object_set_new(jwk, "kty", json_string("OKP"));
    assert_int_equal(lessons_dpop_thumbprint(jwk, out), -1);
    json_decref(jwk);
}

/* RFC 9449 7.1's example access token and its ath. */
static void test_ath_rfc9449(void **state)
{
    char out[LESSONS_DPOP_HASH_LEN];

    (void)state;
    assert_int_equal(lessons_dpop_ath("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_"
                                      "NeO.gxU", out), 0);
    assert_string_equal(out, "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo");
    assert_int_equal(lessons_dpop_ath(NULL, out), -1);
}

static void norm_is(const char *in, const char *want)
{
    const char *got = lessons_dpop_uri_normalize(pool, in);

    if (!want) {
        if (got) {
            fail_msg("%s: normalised to %s, want none", in, got);
        }
        return;
    }
    if (!got || strcmp(got, want) != 0) {
        fail_msg("%s: normalised to %s, want %s", in, got ? got : "(none)",
                 want);
    }
}

static void test_uri_normalize(void **state)
{
    (void)state;
    norm_is("https://server.example.com/token",
            "https://server.example.com/token");
    /* Case of scheme and host, default ports, empty path. */
    norm_is("HTTPS://Server.Example.COM:443", "https://server.example.com/");
    norm_is("http://h:80/x", "http://h/x");
    norm_is("http://h:443/x", "http://h:443/x");
    norm_is("https://h:8443/x", "https://h:8443/x");
    /* Query and fragment are not compared. */
    norm_is("https://h/api/lessons?level=1#top", "https://h/api/lessons");
    /* Percent-encodings: unreserved decoded, the rest in upper case. */
    norm_is("https://h/%7Euser/%61%2f%2F", "https://h/~user/a%2F%2F");
    norm_is("https://h/a%2", NULL);
    norm_is("https://h/a%zz", NULL);
    /* Dot segments. */
    norm_is("https://h/a/./b/../c", "https://h/a/c");
    norm_is("https://h/a/b/..", "https://h/a/");
    norm_is("https://h/../../x", "https://h/x");
    norm_is("https://h/a/%2E%2E/b", "https://h/b");
    /* Paths keep their case. */
    norm_is("https://h/API/Lessons", "https://h/API/Lessons");
    /* IPv6 literals keep their brackets. */
    norm_is("https://[::1]:8443/p", "https://[::1]:8443/p");
    norm_is("http://[2001:DB8::1]/p", "http://[2001:db8::1]/p");
    /* Not an absolute http(s) URI with a host, or with user info. */
    norm_is("ftp://h/x", NULL);
    norm_is("/api/lessons", NULL);
    norm_is("https:///x", NULL);
    norm_is("https://user@h/x", NULL);
    norm_is("https://user:pw@h/x", NULL);
    norm_is(NULL, NULL);
}

static void server_uri_is(const char *scheme, const char *host,
                          apr_port_t port, const char *target,
                          const char *want)
{
    const char *got = lessons_dpop_server_uri(pool, scheme, host, port,
                                              target);

    if (!want) {
        if (got) {
            fail_msg("%s: %s, want none", target ? target : "(null)", got);
        }
        return;
    }
    if (!got || strcmp(got, want) != 0) {
        fail_msg("%s: %s, want %s", target ? target : "(null)",
                 got ? got : "(none)", want);
    }
}

/* The URI htu is compared with: the server's scheme, name and port, the
 * request-target's path.
 */
static void test_server_uri(void **state)
{
    (void)state;
    server_uri_is("http", "127.0.0.1", 8080, "/dpop/api/lessons?x=1",
                  "http://127.0.0.1:8080/dpop/api/lessons");
    server_uri_is("https", "API.example.org", 443, "/api/lessons/./7",
                  "https://api.example.org/api/lessons/7");
    server_uri_is("http", "h", 80, "/%7Euser/a%2f#top",
                  "http://h/~user/a%2F");
    /* absolute-form: its path, never its scheme, host or port. */
    server_uri_is("http", "127.0.0.1", 8080,
                  "https://rs.other.example:8443/dpop/api/lessons?x=1",
                  "http://127.0.0.1:8080/dpop/api/lessons");
    server_uri_is("https", "api.example.org", 443,
                  "http://EVIL.example/api/lessons",
                  "https://api.example.org/api/lessons");
    server_uri_is("https", "h", 443, "https://other.example",
                  "https://h/");
    /* IPv6: as httpd gives it, bracketed or not. */
    server_uri_is("https", "::1", 8443, "/p", "https://[::1]:8443/p");
    server_uri_is("https", "[::1]", 8443, "/p", "https://[::1]:8443/p");
    /* No path (asterisk-form, authority-form), no host, no target. */
    server_uri_is("http", "h", 80, "*", NULL);
    server_uri_is("http", "h", 80, "h:443", NULL);
    server_uri_is("http", "", 80, "/p", NULL);
    server_uri_is("http", "h", 80, NULL, NULL);
    server_uri_is("ftp", "h", 21, "/p", NULL);
    server_uri_is("http", "h", 80, "/a%zz", NULL);
}

/* htu against the server's URI: a proof made for another resource
 * server does not name this one, however the request names it.
 */
static void test_htu_matches(void **state)
{
    const char *mine = lessons_dpop_server_uri(
        pool, "http", "127.0.0.1", 8080,
        "http://rs.other.example:8443/dpop/api/lessons");

    (void)state;
    assert_false(lessons_dpop_htu_matches(
        pool, "http://rs.other.example:8443/dpop/api/lessons", mine));
    assert_true(lessons_dpop_htu_matches(
        pool, "http://127.0.0.1:8080/dpop/api/lessons", mine));
    assert_true(lessons_dpop_htu_matches(
        pool, "HTTP://127.0.0.1:8080/dpop/api/./lessons?q=1", mine));
    assert_false(lessons_dpop_htu_matches(
        pool, "https://127.0.0.1:8080/dpop/api/lessons", mine));
    assert_false(lessons_dpop_htu_matches(
        pool, "http://localhost:8080/dpop/api/lessons", mine));
    assert_false(lessons_dpop_htu_matches(pool, "/dpop/api/lessons", mine));
    assert_false(lessons_dpop_htu_matches(pool, NULL, mine));
    assert_false(lessons_dpop_htu_matches(pool, mine, NULL));
}

/* iat: up to the window old, a few seconds ahead; and a proof is kept
 * until it is too old, so at most window + ahead + 1 seconds.
 */
static void test_iat_window(void **state)
{
    lessons_dpop_request_t req;
    const apr_int64_t now = 1700000000;

    (void)state;
    memset(&req, 0, sizeof(req));
    req.now = now;
    req.window = 60;
    req.ahead = LESSONS_DPOP_AHEAD;
    assert_int_equal(LESSONS_DPOP_AHEAD, 5);
    assert_int_equal(lessons_dpop_check_iat(&req, now), LESSONS_DPOP_OK);
    assert_int_equal(lessons_dpop_check_iat(&req, now - 60),
                     LESSONS_DPOP_OK);
    assert_int_equal(lessons_dpop_check_iat(&req, now - 60.5),
                     LESSONS_DPOP_STALE);
    assert_int_equal(lessons_dpop_check_iat(&req, now - 3600),
                     LESSONS_DPOP_STALE);
    assert_int_equal(lessons_dpop_check_iat(&req, now + 5),
                     LESSONS_DPOP_OK);
    assert_int_equal(lessons_dpop_check_iat(&req, now + 5.5),
                     LESSONS_DPOP_STALE);
    assert_int_equal(lessons_dpop_check_iat(&req, now + 6),
                     LESSONS_DPOP_STALE);
    assert_int_equal(lessons_dpop_check_iat(&req, now + 60),
                     LESSONS_DPOP_STALE);
    /* Kept until the second after it is too old: 66 s at the most. */
    assert_int_equal(lessons_dpop_kept_until(&req, now + 5), now + 66);
    assert_int_equal(lessons_dpop_kept_until(&req, now), now + 61);
    assert_int_equal(lessons_dpop_kept_until(&req, now - 60), now + 1);
    /* LessonsJWTLeeway 30 widens both sides (the module adds it). */
    req.window = 60 + 30;
    req.ahead = LESSONS_DPOP_AHEAD + 30;
    assert_int_equal(lessons_dpop_check_iat(&req, now + 35),
                     LESSONS_DPOP_OK);
    assert_int_equal(lessons_dpop_check_iat(&req, now + 36),
                     LESSONS_DPOP_STALE);
    assert_int_equal(lessons_dpop_check_iat(&req, now - 90),
                     LESSONS_DPOP_OK);
    assert_int_equal(lessons_dpop_check_iat(&req, now - 91),
                     LESSONS_DPOP_STALE);
}

static void test_token_jkt(void **state)
{
    json_t *c;

    (void)state;
    c = json_loads("{\"sub\":\"a\"}", 0, NULL);
    assert_null(lessons_dpop_token_jkt(c));
    json_decref(c);
    c = json_loads("{\"cnf\":{\"jkt\":\"abc\"}}", 0, NULL);
    assert_string_equal(lessons_dpop_token_jkt(c), "abc");
    json_decref(c);
    c = json_loads("{\"cnf\":\"abc\"}", 0, NULL);
    assert_string_equal(lessons_dpop_token_jkt(c), "");
    json_decref(c);
    c = json_loads("{\"cnf\":{\"x5t#S256\":\"abc\"}}", 0, NULL);
    assert_string_equal(lessons_dpop_token_jkt(c), "");
    json_decref(c);
    c = json_loads("{\"cnf\":{\"jkt\":7}}", 0, NULL);
    assert_string_equal(lessons_dpop_token_jkt(c), "");
    json_decref(c);
}

/* --- whole proofs ---------------------------------------------------- */

typedef uj_ec_key_t ec_key_t;
#define ec_key uj_ec_p256

#define URI     "https://api.example.org/api/lessons/7"
#define TOKEN   "an-access-token"

/* A proof signed by signer, naming jwk and typ in its header, with
 * these claims (JSON).
 */
static const char *proof_of(const ec_key_t *signer, const char *jwk,
                            const char *typ, const char *claims)
{
    return lj_token_with(LESSONS_ALG_ES256, signer->priv, strlen(signer->priv),
                         claims, NULL, apr_psprintf(pool,
                         "{\"typ\":\"%s\",\"jwk\":%s}", typ, jwk));
}

static const char *claims_of(const char *htm, const char *htu,
                             apr_int64_t iat, const char *token)
{
    char ath[LESSONS_DPOP_HASH_LEN];

    assert_int_equal(lessons_dpop_ath(token, ath), 0);
    return apr_psprintf(pool, "{\"jti\":\"j-%" APR_INT64_T_FMT "\","
                        "\"htm\":\"%s\",\"htu\":\"%s\",\"iat\":%"
                        APR_INT64_T_FMT ",\"ath\":\"%s\"}", iat, htm, htu,
                        iat, ath);
}

static lessons_dpop_request_t request(apr_int64_t now)
{
    lessons_dpop_request_t req;

    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.uri = URI;
    req.token = TOKEN;
    req.now = now;
    req.window = 60;
    req.ahead = LESSONS_DPOP_AHEAD;
    return req;
}

static lessons_dpop_e check(const char *proof, const lessons_dpop_request_t *req,
                            lessons_dpop_proof_t *out)
{
    const char *why = NULL;
    lessons_dpop_e rc = lessons_dpop_check(pool, proof, req, out, &why);

    assert_true(rc == LESSONS_DPOP_OK || why != NULL);
    return rc;
}

/* Refused before any signature. */
static void test_refused_before_the_signature(void **state)
{
    ec_key_t k = ec_key();
    lessons_dpop_request_t req = request(1700000000);
    lessons_dpop_proof_t out;
    const char *claims = claims_of("GET", URI, 1700000000, TOKEN);
    const char *priv_jwk;

    (void)state;
    assert_int_equal(check("not.a.jws!", &req, &out), LESSONS_DPOP_MALFORMED);
    assert_int_equal(check(NULL, &req, &out), LESSONS_DPOP_MALFORMED);
    /* A JWS without a jwk. */
    assert_int_equal(check(lj_token(LESSONS_ALG_ES256, k.priv, strlen(k.priv),
                                    claims), &req, &out),
                     LESSONS_DPOP_MALFORMED);
    /* A jwk with private material, one on no curve we take, a secret. */
    priv_jwk = apr_psprintf(pool, "%.*s,\"d\":\"AAAA\"}",
                            (int)strlen(k.jwk) - 1, k.jwk);
    assert_int_equal(check(proof_of(&k, priv_jwk, "dpop+jwt", claims), &req,
                           &out), LESSONS_DPOP_BAD_KEY);
    assert_int_equal(check(proof_of(&k, "{\"kty\":\"EC\",\"crv\":\"P-192\","
                                    "\"x\":\"AA\",\"y\":\"AA\"}",
                                    "dpop+jwt", claims), &req, &out),
                     LESSONS_DPOP_BAD_KEY);
    assert_int_equal(check(proof_of(&k, "{\"kty\":\"oct\",\"k\":\"AAAAAAAAAAAAA"
                                    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}",
                                    "dpop+jwt", claims), &req, &out),
                     LESSONS_DPOP_BAD_KEY);
    /* An encryption key is no signing key. */
    assert_int_equal(check(proof_of(&k, apr_psprintf(pool, "%.*s,\"use\":"
                                    "\"enc\"}", (int)strlen(k.jwk) - 1,
                                    k.jwk), "dpop+jwt", claims), &req, &out),
                     LESSONS_DPOP_BAD_KEY);
    /* Another typ. */
    assert_int_equal(check(proof_of(&k, k.jwk, "JWT", claims), &req, &out),
                     LESSONS_DPOP_BAD_TYPE);
}

/* A good proof: OK, with its key's thumbprint, jti and iat. */
static void test_good_proof(void **state)
{
    ec_key_t k = ec_key();
    lessons_dpop_request_t req = request(1700000000);
    lessons_dpop_proof_t out;
    const char *proof = proof_of(&k, k.jwk, "dpop+jwt",
                                 claims_of("GET", URI, 1700000000, TOKEN));
    json_t *jwk = json_loads(k.jwk, 0, NULL);
    char jkt[LESSONS_DPOP_HASH_LEN];

    (void)state;
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_OK);
    assert_int_equal(lessons_dpop_thumbprint(jwk, jkt), 0);
    assert_string_equal(out.jkt, jkt);
    assert_string_equal(out.jti, "j-1700000000");
    assert_int_equal(out.iat, 1700000000);
    /* The same URI written otherwise is the same URI. */
    req.uri = "HTTPS://API.example.org:443/api/lessons/./7?x=1";
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_OK);
    /* The window, both ways: a minute old, a few seconds ahead. */
    req = request(1700000000 + 60);
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_OK);
    req = request(1700000000 + 61);
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_STALE);
    req = request(1700000000 - LESSONS_DPOP_AHEAD);
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_OK);
    req = request(1700000000 - LESSONS_DPOP_AHEAD - 1);
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_STALE);
    req = request(1700000000 - 60);
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_STALE);
    req = request(1700000000 - 61);
    assert_int_equal(check(proof, &req, &out), LESSONS_DPOP_STALE);
    json_decref(jwk);
}

static void test_proof_for_another_request(void **state)
{
    ec_key_t k = ec_key(), other = ec_key();
    lessons_dpop_request_t req = request(1700000000);
    lessons_dpop_proof_t out;
    const char *good = claims_of("GET", URI, 1700000000, TOKEN);
    const char *proof;
    char *tampered;

    (void)state;
    /* Another method, URI (path, host, scheme, port), token. */
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "POST", URI, 1700000000, TOKEN)), &req, &out),
        LESSONS_DPOP_BAD_METHOD);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "get", URI, 1700000000, TOKEN)), &req, &out),
        LESSONS_DPOP_BAD_METHOD);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "GET", "https://api.example.org/api/lessons/8", 1700000000, TOKEN)),
        &req, &out), LESSONS_DPOP_BAD_URI);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "GET", "https://evil.example.org/api/lessons/7", 1700000000, TOKEN)),
        &req, &out), LESSONS_DPOP_BAD_URI);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "GET", "http://api.example.org/api/lessons/7", 1700000000, TOKEN)),
        &req, &out), LESSONS_DPOP_BAD_URI);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "GET", "https://api.example.org:8443/api/lessons/7", 1700000000,
        TOKEN)), &req, &out), LESSONS_DPOP_BAD_URI);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt", claims_of(
        "GET", URI, 1700000000, "another-token")), &req, &out),
        LESSONS_DPOP_BAD_ATH);
    /* Signed by one key, naming another: the named key verifies. */
    assert_int_equal(check(proof_of(&k, other.jwk, "dpop+jwt", good), &req,
                           &out), LESSONS_DPOP_BAD_SIGNATURE);
    /* A changed claim breaks the signature. */
    proof = proof_of(&k, k.jwk, "dpop+jwt", good);
    tampered = apr_pstrdup(pool, proof);
    tampered[strlen(tampered) - 3] =
        tampered[strlen(tampered) - 3] == 'A' ? 'B' : 'A';
    assert_int_equal(check(tampered, &req, &out),
                     LESSONS_DPOP_BAD_SIGNATURE);
    /* Claims missing or of the wrong type. */
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt",
        "{\"htm\":\"GET\",\"htu\":\"" URI "\",\"iat\":1700000000}"), &req,
        &out), LESSONS_DPOP_MALFORMED);
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt",
        "{\"jti\":\"x\",\"htm\":\"GET\",\"htu\":\"" URI "\","
        "\"iat\":\"1700000000\"}"), &req, &out), LESSONS_DPOP_MALFORMED);
    /* Without ath where a token comes with it. */
    assert_int_equal(check(proof_of(&k, k.jwk, "dpop+jwt",
        "{\"jti\":\"x\",\"htm\":\"GET\",\"htu\":\"" URI "\","
        "\"iat\":1700000000}"), &req, &out), LESSONS_DPOP_BAD_ATH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thumbprint_rfc7638),
        cmocka_unit_test(test_thumbprint_rfc9449),
        cmocka_unit_test(test_ath_rfc9449),
        cmocka_unit_test(test_uri_normalize),
        cmocka_unit_test(test_server_uri),
        cmocka_unit_test(test_htu_matches),
        cmocka_unit_test(test_iat_window),
        cmocka_unit_test(test_token_jkt),
        cmocka_unit_test(test_refused_before_the_signature),
        cmocka_unit_test(test_good_proof),
        cmocka_unit_test(test_proof_for_another_request),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
