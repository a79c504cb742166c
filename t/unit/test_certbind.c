/* Licensed under the Apache License, Version 2.0.
 *
 * test_certbind.c: lessons_certbind -- RFC 8705's x5t#S256 of a client
 * certificate as mod_ssl gives it (PEM) and as OpenSSL holds it (X509),
 * and a token's cnf against it: unbound, match, mismatch, no
 * certificate, a malformed cnf.
 *
 * The certificates are self-signed P-256 ones made once with
 *   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
 *       -nodes -keyout a.key -out a.pem -days 36500 -subj "/CN=client A"
 * (and "client B"), their thumbprints with
 *   openssl x509 -in a.pem -outform DER | openssl dgst -sha256 -binary \
 *       | openssl base64 -A | tr '+/' '-_' | tr -d '='
 * so the expected values come from OpenSSL's command line, not from the
 * code under test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "auth/lessons_certbind.h"

static const char cert_a[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfjCCASOgAwIBAgIUJOZF360jmxGpJqsEcARN5VFBnx4wCgYIKoZIzj0EAwIw\n"
    "EzERMA8GA1UEAwwIY2xpZW50IEEwIBcNMjYxMTI4MTQ1NzUwWhgPMjEyNjExMDQx\n"
    "NDU3NTBaMBMxETAPBgNVBAMMCGNsaWVudCBBMFkwEwYHKoZIzj0CAQYIKoZIzj0D\n"
    "AQcDQgAEKYlJDpxhdJTREJryOZc9GL+sxt3HYsvGcWPsK7deXIpy8pzWsRo7edXv\n"
    "yRDh3hXnj3ClirmjQjEWuTFXWzqWoqNTMFEwHQYDVR0OBBYEFD4ZIW+zo44P13Sb\n"
    "rJnO1rvtkLERMB8GA1UdIwQYMBaAFD4ZIW+zo44P13SbrJnO1rvtkLERMA8GA1Ud\n"
    "EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAKcOR12NkG0H5vggtxdQvQ+h\n"
    "rx4wmx2iNvqUFaEh3KPcAiEAzBCNhaRFV0OdmJ0gC9qYd2ZRSe5gsax1cDVEas2s\n"
    "M3c=\n"
    "-----END CERTIFICATE-----\n"
    ;
static const char x5t_a[] = "lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdgMdc";

static const char cert_b[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfDCCASOgAwIBAgIUERzwzj4U4vGi/pq821ZOpAzAz4IwCgYIKoZIzj0EAwIw\n"
    "EzERMA8GA1UEAwwIY2xpZW50IEIwIBcNMjYxMTI4MTQ1NzUwWhgPMjEyNjExMDQx\n"
    "NDU3NTBaMBMxETAPBgNVBAMMCGNsaWVudCBCMFkwEwYHKoZIzj0CAQYIKoZIzj0D\n"
    "AQcDQgAEZkh0MNsKGV9tziSIiSIvyarBHpiGa7R8ZvPICf56EfGHpNBzpYt/l9Oo\n"
    "udLH4VI7PFqh+Ow7FR204tqGdcCCz6NTMFEwHQYDVR0OBBYEFPT473a5+x4pGbBb\n"
    "+1gpnrX+aRZOMB8GA1UdIwQYMBaAFPT473a5+x4pGbBb+1gpnrX+aRZOMA8GA1Ud\n"
    "EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgcB9Zjlv7fIITiXtUzrOqM+Zr\n"
    "ghRjHEvacgzfL0wuTeMCIDUuUqW/WPS3EwxKDOXJTbehHjVyui84KVXFpNDB+ieE\n"
    "-----END CERTIFICATE-----\n"
    ;
static const char x5t_b[] = "X-f500oHIe4RKoqPQW1nZBo7a1oTEXWNUWz-YsFLnh8";

static void test_thumbprint(void **state)
{
    char out[LESSONS_CERTBIND_X5T_LEN];

    (void)state;
    assert_int_equal(lessons_certbind_thumbprint(cert_a, strlen(cert_a),
                                                 out), 0);
    assert_string_equal(out, x5t_a);
    assert_int_equal(lessons_certbind_thumbprint(cert_b, strlen(cert_b),
                                                 out), 0);
    assert_string_equal(out, x5t_b);
}

/* mod_ssl's PEM may come without its last line break; the DER is the
 * same, so is the thumbprint.
 */
static void test_thumbprint_of_the_der(void **state)
{
    char out[LESSONS_CERTBIND_X5T_LEN];

    (void)state;
    assert_int_equal(lessons_certbind_thumbprint(cert_a, strlen(cert_a) - 1,
                                                 out), 0);
    assert_string_equal(out, x5t_a);
}

static void test_thumbprint_not_a_certificate(void **state)
{
    static const char garbage[] =
        "-----BEGIN CERTIFICATE-----\n"
        "bm90IGEgY2VydGlmaWNhdGUsIGp1c3QgdGV4dA==\n"
        "-----END CERTIFICATE-----\n";
    static const char key[] =
        "-----BEGIN PUBLIC KEY-----\n"
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKYlJDpxhdJTREJryOZc9GL+sxt3H\n"
        "YsvGcWPsK7deXIpy8pzWsRo7edXvyRDh3hXnj3ClirmjQjEWuTFXWzqWog==\n"
        "-----END PUBLIC KEY-----\n";
    /* A DER SEQUENCE, but of text: no tbsCertificate inside. */
    static const char sequence[] =
        "-----BEGIN CERTIFICATE-----\n"
        "MAVub3QgYQ==\n"
        "-----END CERTIFICATE-----\n";
    /* A SEQUENCE of a SEQUENCE, with a byte after its end. */
    static const char trailing[] =
        "-----BEGIN CERTIFICATE-----\n"
        "MAIwAAA=\n"
        "-----END CERTIFICATE-----\n";
    char out[LESSONS_CERTBIND_X5T_LEN];

    (void)state;
    assert_int_equal(lessons_certbind_thumbprint(garbage, strlen(garbage),
                                                 out), -1);
    assert_int_equal(lessons_certbind_thumbprint(sequence, strlen(sequence),
                                                 out), -1);
    assert_int_equal(lessons_certbind_thumbprint(trailing, strlen(trailing),
                                                 out), -1);
    assert_int_equal(lessons_certbind_thumbprint(key, strlen(key), out), -1);
    assert_int_equal(lessons_certbind_thumbprint("", 0, out), -1);
    assert_int_equal(lessons_certbind_thumbprint(NULL, 10, out), -1);
    /* Cut short: the certificate's end missing. */
    assert_int_equal(lessons_certbind_thumbprint(cert_a, 200, out), -1);
}

static X509 *x509_of(const char *pem)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)strlen(pem));
    X509 *x;

    assert_non_null(bio);
    x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    BIO_free(bio);
    assert_non_null(x);
    return x;
}

/* The peer certificate as OpenSSL parsed it: the thumbprint openssl's
 * command line gives, and the PEM path's for the same certificate.
 */
static void test_thumbprint_x509(void **state)
{
    const char *pems[] = { cert_a, cert_b };
    const char *want[] = { x5t_a, x5t_b };
    char out[LESSONS_CERTBIND_X5T_LEN], from_pem[LESSONS_CERTBIND_X5T_LEN];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(pems) / sizeof(pems[0]); i++) {
        X509 *x = x509_of(pems[i]);

        memset(out, 'x', sizeof(out));
        assert_int_equal(lessons_certbind_thumbprint_x509(x, out), 0);
        assert_string_equal(out, want[i]);
        assert_int_equal(lessons_certbind_thumbprint(pems[i],
                                                     strlen(pems[i]),
                                                     from_pem), 0);
        assert_string_equal(out, from_pem);
        X509_free(x);
    }
    assert_int_equal(lessons_certbind_thumbprint_x509(NULL, out), -1);
}

static json_t *claims_of(const char *text)
{
    json_t *claims = json_loads(text, JSON_ALLOW_NUL, NULL);

    assert_non_null(claims);
    return claims;
}

static void check(const char *text, const char *x5t, lessons_certbind_e want)
{
    json_t *claims = claims_of(text);

    assert_int_equal(lessons_certbind_check(claims, x5t), want);
    assert_int_equal(lessons_certbind_bound(claims),
                     want != LESSONS_CERTBIND_UNBOUND);
    json_decref(claims);
}

static void test_unbound(void **state)
{
    (void)state;
    check("{\"sub\":\"alice\"}", x5t_a, LESSONS_CERTBIND_UNBOUND);
    check("{\"sub\":\"alice\"}", NULL, LESSONS_CERTBIND_UNBOUND);
    /* Bound to a DPoP key only: not to a certificate. */
    check("{\"cnf\":{\"jkt\":\"NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs\"}}",
          NULL, LESSONS_CERTBIND_UNBOUND);
    check("{\"cnf\":{}}", NULL, LESSONS_CERTBIND_UNBOUND);
}

static void test_match_and_mismatch(void **state)
{
    char bound[128];

    (void)state;
    snprintf(bound, sizeof(bound), "{\"cnf\":{\"x5t#S256\":\"%s\"}}", x5t_a);
    check(bound, x5t_a, LESSONS_CERTBIND_MATCH);
    check(bound, x5t_b, LESSONS_CERTBIND_MISMATCH);
    check(bound, NULL, LESSONS_CERTBIND_NO_CERT);
    /* A thumbprint of another length is another certificate's. */
    check(bound, "lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdgMd",
          LESSONS_CERTBIND_MISMATCH);
    check(bound, "", LESSONS_CERTBIND_MISMATCH);
    /* The padded form is not RFC 8705's. */
    snprintf(bound, sizeof(bound), "{\"cnf\":{\"x5t#S256\":\"%s=\"}}", x5t_a);
    check(bound, x5t_a, LESSONS_CERTBIND_MALFORMED);
}

/* A cnf with both: the certificate part is judged here (DPoP judges
 * the jkt).
 */
static void test_both_bindings(void **state)
{
    char bound[256];

    (void)state;
    snprintf(bound, sizeof(bound), "{\"cnf\":{\"jkt\":"
             "\"NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs\","
             "\"x5t#S256\":\"%s\"}}", x5t_b);
    check(bound, x5t_b, LESSONS_CERTBIND_MATCH);
    check(bound, x5t_a, LESSONS_CERTBIND_MISMATCH);
    check(bound, NULL, LESSONS_CERTBIND_NO_CERT);
}

static void test_malformed(void **state)
{
    (void)state;
    check("{\"cnf\":\"x\"}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":[]}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":null}", NULL, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":{\"x5t#S256\":42}}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":{\"x5t#S256\":null}}", x5t_a,
          LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":{\"x5t#S256\":[\"lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXd"
          "gMdc\"]}}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    /* Wrong lengths, and standard base64's alphabet. */
    check("{\"cnf\":{\"x5t#S256\":\"\"}}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":{\"x5t#S256\":\"lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdg"
          "Md\"}}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":{\"x5t#S256\":\"lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdg"
          "Mdcc\"}}", x5t_a, LESSONS_CERTBIND_MALFORMED);
    check("{\"cnf\":{\"x5t#S256\":\"X+f500oHIe4RKoqPQW1nZBo7a1oTEXWNUWz/YsFL"
          "nh8\"}}", "X+f500oHIe4RKoqPQW1nZBo7a1oTEXWNUWz/YsFLnh8",
          LESSONS_CERTBIND_MALFORMED);
    /* A NUL inside: 43 characters to jansson, fewer to C. */
    check("{\"cnf\":{\"x5t#S256\":\"lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdg"
          "Md\\u0000\"}}", x5t_a, LESSONS_CERTBIND_MALFORMED);
}

/* SSL_CLIENT_VERIFY as mod_ssl reports it: optional_no_ca's waived
 * errors come as FAILED with OpenSSL's text (seen from mod_ssl 2.4.71:
 * "FAILED:self-signed certificate" for a self-signed client certificate
 * under optional_no_ca).
 */
static void test_verified(void **state)
{
    (void)state;
    assert_true(lessons_certbind_verified("SUCCESS"));
    assert_true(lessons_certbind_verified("GENEROUS"));
    assert_true(lessons_certbind_verified("FAILED:self-signed certificate"));
    assert_true(lessons_certbind_verified("FAILED:unable to get local "
                                          "issuer certificate"));
    assert_true(lessons_certbind_verified("FAILED:self-signed certificate "
                                          "in certificate chain"));
    assert_false(lessons_certbind_verified(NULL));
    assert_false(lessons_certbind_verified(""));
    assert_false(lessons_certbind_verified("NONE"));
    assert_false(lessons_certbind_verified("success"));
    assert_false(lessons_certbind_verified("SUCCESSFUL"));
    assert_false(lessons_certbind_verified("FAILED:certificate has "
                                           "expired"));
    assert_false(lessons_certbind_verified("FAILED:certificate revoked"));
    assert_false(lessons_certbind_verified("FAILED:"));
    assert_false(lessons_certbind_verified("FAILED:self-signed "
                                           "certificate!"));
}

/* What a client is told never holds a thumbprint. */
static void test_describe(void **state)
{
    int rc;

    (void)state;
    for (rc = LESSONS_CERTBIND_UNBOUND; rc <= LESSONS_CERTBIND_MALFORMED;
         rc++) {
        const char *text = lessons_certbind_describe(rc);

        assert_non_null(text);
        assert_null(strstr(text, x5t_a));
    }
    assert_non_null(strstr(lessons_certbind_describe(
                               LESSONS_CERTBIND_MISMATCH), "another"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thumbprint),
        cmocka_unit_test(test_thumbprint_of_the_der),
        cmocka_unit_test(test_thumbprint_not_a_certificate),
        cmocka_unit_test(test_thumbprint_x509),
        cmocka_unit_test(test_unbound),
        cmocka_unit_test(test_match_and_mismatch),
        cmocka_unit_test(test_both_bindings),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_verified),
        cmocka_unit_test(test_describe),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
