/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_jwtcaps.c: the known-answer tokens that say what the libjwt in
 * use verifies.  Read-only tables; nothing here is a secret: the RSA key
 * is public, and the HMAC secret signs only the probe.
 */
#include <string.h>

#include <jwt.h>

#include "apr_strings.h"

#include "lessons_jwtcaps.h"

#ifndef LESSONS_LIBJWT_VERSION
#define LESSONS_LIBJWT_VERSION "unknown"
#endif

/* HS256 with "typ": "at+jwt" (RFC 9068), signed with the secret below. */
static const char lessons_probe_typed[] =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6ImF0K2p3dCJ9.eyJzdWIiOiJsZXNzb25zLXB"
    "yb2JlIn0._w_rQqESpcWUNO_Q4jrFuavZGgY2pcfmMALvqUuY7UQ";
static const char lessons_probe_secret[] =
    "lessons-probe-secret-0123456789abcdef";

/* PS256 (RSASSA-PSS, SHA-256, salt 32), signed with the private half of
 * this 2048-bit key, which was thrown away.
 */
static const char lessons_probe_pss[] =
    "eyJhbGciOiJQUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJsZXNzb25zLXByb2J"
    "lIn0.ZDeFRhoPu7qSR-O48aZ70vgDtF525KSh09nkWzAsTlui18GTUNsMQkdj-g_"
    "6TTS9WQqBp1TbgJTLJYq79N3Lxa7QzidMCDlxJm9morFMb83oz5cJD6daXhrlk61"
    "Chy2bcS74WUnGH-cDar4s6scUuvwFEXbhukI9pnxiXkwSx8Q6LV31t6MSSWG_koE"
    "ryqYEJXwppTF1BWDVZFMMab2xZecTQuT3Eh9s8olIfbG7SX1RKmP8LmII9LLVanw"
    "aPwJP5suJYCBOyonPb6Gu6UWEp-jl_uxMS94DQQOvjWnrELH4S_nrM8OlszvN5r_"
    "2xKaBwfAx27TDmBniibS2AaVPFA";
static const char lessons_probe_rsa_pem[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAs3+fvcaH9kX/BZjK/rw/\n"
    "9BJwbbUvTQ32LkrGX57a6AHoe9LSOWW4CZ6jq8vKDf3zVF5b1K1ARv/RRmEAG3pg\n"
    "ifVNUtT/EqdEzM6J1K7vXAmZ3UbEYfdMX178/AQXBlV1026btxTd28Nz+GwZlfb0\n"
    "UkTAxHWZN7OKIgHo2ueJJwT288J6VGADqLb6kBQTE7JYlS9WkAh1ZHXCdjx3ti1s\n"
    "ry+0dJ2JRV0rpmuRQPZADFyaBpy6BBqcKQr5Vwm8X3lyKVc4gauov9/gs7lMGyJq\n"
    "qQnH385O28bMPaFeNWM371yQZEzatyiKvExPPPyXUI+z5SRMgmXzGWt9y6UHWHvt\n"
    "6QIDAQAB\n"
    "-----END PUBLIC KEY-----\n";

/* 1 when libjwt verifies token with key, as alg. */
static int lessons_probe(const char *token, const char *key,
                         apr_size_t key_len, const char *alg)
{
    jwt_t *jwt = NULL;
    const char *got;
    int ok = 0;

    if (jwt_decode(&jwt, token, (const unsigned char *)key,
                   (int)key_len) == 0 && jwt) {
        got = jwt_alg_str(jwt_get_alg(jwt));
        ok = got && strcmp(got, alg) == 0;
    }
    jwt_free(jwt);
    return ok;
}

unsigned lessons_jwtcaps_probe(void)
{
    unsigned caps = 0;

    if (lessons_probe(lessons_probe_typed, lessons_probe_secret,
                      sizeof(lessons_probe_secret) - 1, "HS256")) {
        caps |= LESSONS_JWTCAP_TYPED;
    }
    if (lessons_probe(lessons_probe_pss, lessons_probe_rsa_pem,
                      sizeof(lessons_probe_rsa_pem) - 1, "PS256")) {
        caps |= LESSONS_JWTCAP_PSS;
    }
    return caps;
}

const char *lessons_jwtcaps_built_with(void)
{
    return LESSONS_LIBJWT_VERSION;
}

const char *lessons_jwtcaps_describe(apr_pool_t *p, unsigned caps)
{
    return apr_psprintf(p, "libjwt %s: at+jwt tokens %s, PS256/384/512 %s",
                        LESSONS_LIBJWT_VERSION,
                        caps & LESSONS_JWTCAP_TYPED ? "verified" : "refused",
                        caps & LESSONS_JWTCAP_PSS ? "verified" : "refused");
}
