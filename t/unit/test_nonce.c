/* Licensed under the Apache License, Version 2.0.
 *
 * test_nonce.c: lessons_nonce -- DPoP nonces from a time slot and a
 * secret.  A nonce made is taken back in its slot and the next, not
 * before nor after; the slot's edges fall where the period says; a
 * nonce of another secret, or garbage, a truncated or lengthened one,
 * one with a bit changed, is refused; the MAC is HMAC-SHA256 as RFC
 * 4231 has it (checked against an independent computation with
 * OpenSSL's EVP_MAC); the comparison is CRYPTO_memcmp's; secret files
 * are read as the keys are.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <setjmp.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "apr_encode.h"
#include "apr_file_io.h"
#include "apr_strings.h"
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include "auth/lessons_nonce.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* 32 bytes each (the NUL of the literal is not part of the secret). */
static const unsigned char secret_a[] = "0123456789abcdef0123456789abcdef";
static const unsigned char secret_b[] = "0123456789abcdef0123456789abcdeF";
#define SECRET_LEN 32

static const lessons_nonce_key_t key_a = { secret_a, SECRET_LEN, 20 };
static const lessons_nonce_key_t key_b = { secret_b, SECRET_LEN, 20 };

/* 2026-11-28 12:00:00 UTC, the start of a slot (a multiple of 20). */
#define T0 APR_INT64_C(1795867200)

static void test_round_trip(void **state)
{
    char n[LESSONS_NONCE_SIZE];
    apr_int64_t ends = 0;
    apr_size_t i;

    (void)state;
    assert_int_equal(T0 % 20, 0);
    assert_int_equal(lessons_nonce_make(&key_a, T0 + 7, n), 0);
    assert_int_equal(strlen(n), LESSONS_NONCE_TEXT_LEN);
    /* base64url, no padding: what RFC 9449's NQCHAR allows, and what a
     * header carries as it is.
     */
    for (i = 0; n[i]; i++) {
        assert_true((n[i] >= 'A' && n[i] <= 'Z') || (n[i] >= 'a' && n[i] <= 'z')
                    || (n[i] >= '0' && n[i] <= '9') || n[i] == '-'
                    || n[i] == '_');
    }
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 7, &ends),
                     LESSONS_NONCE_OK);
    assert_int_equal(ends, T0 + 40);
    /* ends may be NULL. */
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 7, NULL),
                     LESSONS_NONCE_OK);
}

static void test_same_slot_same_nonce(void **state)
{
    char a[LESSONS_NONCE_SIZE], b[LESSONS_NONCE_SIZE];

    (void)state;
    /* No state: every process (and every server with the secret) makes
     * the same nonce in a slot, and another in the next.
     */
    assert_int_equal(lessons_nonce_make(&key_a, T0, a), 0);
    assert_int_equal(lessons_nonce_make(&key_a, T0 + 19, b), 0);
    assert_string_equal(a, b);
    assert_int_equal(lessons_nonce_make(&key_a, T0 + 20, b), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(lessons_nonce_make(&key_a, T0 - 1, b), 0);
    assert_string_not_equal(a, b);
}

static void test_slot_edges(void **state)
{
    char n[LESSONS_NONCE_SIZE];
    apr_int64_t ends = 0;

    (void)state;
    /* Made in the last second of the slot before T0's. */
    assert_int_equal(lessons_nonce_make(&key_a, T0 - 1, n), 0);
    /* Its own slot, from its first second ... */
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 - 20, &ends),
                     LESSONS_NONCE_OK);
    assert_int_equal(ends, T0 + 20);
    /* ... but not the second before it (a nonce of the future). */
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 - 21, NULL),
                     LESSONS_NONCE_EXPIRED);
    /* The next slot, as the previous one, to its last second ... */
    assert_int_equal(lessons_nonce_check(&key_a, n, T0, &ends),
                     LESSONS_NONCE_OK);
    assert_int_equal(ends, T0 + 20);
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 19, NULL),
                     LESSONS_NONCE_OK);
    /* ... and not one second more. */
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 20, NULL),
                     LESSONS_NONCE_EXPIRED);
}

static void test_previous_taken_older_refused(void **state)
{
    char n[LESSONS_NONCE_SIZE];
    int back;

    (void)state;
    assert_int_equal(lessons_nonce_make(&key_a, T0 + 5, n), 0);
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 5 + 20, NULL),
                     LESSONS_NONCE_OK);
    for (back = 2; back < 50; back++) {
        assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 5 + 20 * back,
                                             NULL),
                         LESSONS_NONCE_EXPIRED);
    }
    /* A day, a year later. */
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 86400, NULL),
                     LESSONS_NONCE_EXPIRED);
    assert_int_equal(lessons_nonce_check(&key_a, n, T0 + 365 * 86400, NULL),
                     LESSONS_NONCE_EXPIRED);
}

static void test_other_period(void **state)
{
    const lessons_nonce_key_t key_60 = { secret_a, SECRET_LEN, 60 };
    char n[LESSONS_NONCE_SIZE];
    apr_int64_t ends = 0;

    (void)state;
    /* The period given is the one used: 60 s slots. */
    assert_int_equal(lessons_nonce_make(&key_60, T0, n), 0);
    assert_int_equal(lessons_nonce_check(&key_60, n, T0 + 119, &ends),
                     LESSONS_NONCE_OK);
    assert_int_equal(ends, T0 + 120);
    assert_int_equal(lessons_nonce_check(&key_60, n, T0 + 120, NULL),
                     LESSONS_NONCE_EXPIRED);
    /* The fixed period of the module. */
    assert_int_equal(LESSONS_NONCE_PERIOD, 20);
}

static void test_other_secret_refused(void **state)
{
    char n[LESSONS_NONCE_SIZE];
    lessons_nonce_key_t longer = { secret_a, SECRET_LEN, 20 };
    unsigned char more[33];

    (void)state;
    assert_int_equal(lessons_nonce_make(&key_b, T0, n), 0);
    assert_int_equal(lessons_nonce_check(&key_a, n, T0, NULL),
                     LESSONS_NONCE_FORGED);
    /* Also of a slot long gone: the MAC is judged first. */
    assert_int_equal(lessons_nonce_make(&key_b, T0 - 86400, n), 0);
    assert_int_equal(lessons_nonce_check(&key_a, n, T0, NULL),
                     LESSONS_NONCE_FORGED);
    /* A secret that only starts the same. */
    memcpy(more, secret_a, SECRET_LEN);
    more[32] = 'x';
    longer.secret = more;
    longer.len = sizeof(more);
    assert_int_equal(lessons_nonce_make(&longer, T0, n), 0);
    assert_int_equal(lessons_nonce_check(&key_a, n, T0, NULL),
                     LESSONS_NONCE_FORGED);
}

/* HMAC-SHA256 computed apart from the unit (EVP_MAC, not HMAC()), over
 * the label and the slot: the nonce is exactly what lessons_nonce.h
 * says, so that another implementation holding the secret (a second
 * server of another build, a test) can make and check them.
 */
static void test_layout(void **state)
{
    unsigned char in[64], mac[32], raw[40];
    char want[64], n[LESSONS_NONCE_SIZE];
    apr_uint64_t slot = (apr_uint64_t)(T0 / 20);
    apr_size_t label = strlen(LESSONS_NONCE_LABEL), maclen = 0, len = 0;
    EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                         (char *)"SHA256", 0),
        OSSL_PARAM_construct_end()
    };
    int i;

    (void)state;
    assert_non_null(ctx);
    memcpy(in, LESSONS_NONCE_LABEL, label);
    for (i = 7; i >= 0; i--) {
        raw[i] = (unsigned char)(slot & 0xff);
        slot >>= 8;
    }
    memcpy(in + label, raw, 8);
    assert_int_equal(EVP_MAC_init(ctx, secret_a, SECRET_LEN, params),
                     1);
    assert_int_equal(EVP_MAC_update(ctx, in, label + 8), 1);
    assert_int_equal(EVP_MAC_final(ctx, mac, &maclen, sizeof(mac)), 1);
    assert_int_equal(maclen, 32);
    memcpy(raw + 8, mac, 32);
    assert_int_equal(apr_encode_base64(want, (const char *)raw, 40,
                                       APR_ENCODE_BASE64URL
                                       | APR_ENCODE_NOPADDING, &len),
                     APR_SUCCESS);
    assert_int_equal(lessons_nonce_make(&key_a, T0 + 3, n), 0);
    assert_string_equal(n, want);
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(hmac);
}

static void test_garbage_refused(void **state)
{
    char n[LESSONS_NONCE_SIZE], buf[2 * LESSONS_NONCE_SIZE];
    size_t i;

    (void)state;
    assert_int_equal(lessons_nonce_make(&key_a, T0, n), 0);
    assert_int_equal(lessons_nonce_check(&key_a, NULL, T0, NULL),
                     LESSONS_NONCE_MISSING);
    assert_int_equal(lessons_nonce_check(&key_a, "", T0, NULL),
                     LESSONS_NONCE_MISSING);
    assert_int_equal(lessons_nonce_check(&key_a, "garbage", T0, NULL),
                     LESSONS_NONCE_MALFORMED);
    /* Truncated, to every length. */
    for (i = 1; i < LESSONS_NONCE_TEXT_LEN; i++) {
        memcpy(buf, n, i);
        buf[i] = '\0';
        assert_int_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                         LESSONS_NONCE_MALFORMED);
    }
    /* Lengthened. */
    apr_snprintf(buf, sizeof(buf), "%sA", n);
    assert_int_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                     LESSONS_NONCE_MALFORMED);
    apr_snprintf(buf, sizeof(buf), "%s%s", n, n);
    assert_int_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                     LESSONS_NONCE_MALFORMED);
    /* Padded, or in base64's other alphabet. */
    apr_snprintf(buf, sizeof(buf), "%s==", n);
    assert_int_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                     LESSONS_NONCE_MALFORMED);
    memcpy(buf, n, sizeof(n));
    buf[10] = '+';
    assert_int_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                     LESSONS_NONCE_MALFORMED);
    buf[10] = ' ';
    assert_int_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                     LESSONS_NONCE_MALFORMED);
    /* Every character changed in turn: never taken.  In the slot's part
     * the MAC no longer fits; in the MAC's, it is not this one.
     */
    for (i = 0; i < LESSONS_NONCE_TEXT_LEN; i++) {
        lessons_nonce_e rc;

        memcpy(buf, n, sizeof(n));
        buf[i] = buf[i] == 'A' ? 'B' : 'A';
        rc = lessons_nonce_check(&key_a, buf, T0, NULL);
        assert_true(rc == LESSONS_NONCE_FORGED
                    || rc == LESSONS_NONCE_MALFORMED);
    }
    /* The last character holds 2 bits of the MAC and 4 unused ones: a
     * letter for the same bits written otherwise is not taken either.
     */
    memcpy(buf, n, sizeof(n));
    buf[LESSONS_NONCE_TEXT_LEN - 1] =
        buf[LESSONS_NONCE_TEXT_LEN - 1] == 'A' ? 'B' : 'A';
    assert_int_not_equal(lessons_nonce_check(&key_a, buf, T0, NULL),
                         LESSONS_NONCE_OK);
}

static void test_no_key_no_nonce(void **state)
{
    const lessons_nonce_key_t none = { NULL, 0, 0 };
    const lessons_nonce_key_t short_secret = { secret_a, 16, 20 };
    const lessons_nonce_key_t no_period = { secret_a, SECRET_LEN, 0 };
    char n[LESSONS_NONCE_SIZE];
    char good[LESSONS_NONCE_SIZE];

    (void)state;
    assert_int_equal(lessons_nonce_make(&key_a, T0, good), 0);
    /* A key that cannot make nonces takes none: fail closed. */
    assert_int_equal(lessons_nonce_make(&none, T0, n), -1);
    assert_int_equal(lessons_nonce_make(&short_secret, T0, n), -1);
    assert_int_equal(lessons_nonce_make(&no_period, T0, n), -1);
    assert_int_equal(lessons_nonce_make(NULL, T0, n), -1);
    assert_int_equal(lessons_nonce_make(&key_a, -1, n), -1);
    assert_int_equal(lessons_nonce_check(&none, good, T0, NULL),
                     LESSONS_NONCE_FORGED);
    assert_int_equal(lessons_nonce_check(&short_secret, good, T0, NULL),
                     LESSONS_NONCE_FORGED);
    assert_int_equal(lessons_nonce_check(NULL, good, T0, NULL),
                     LESSONS_NONCE_FORGED);
}

/* The comparison: right at every byte (a difference in the first, the
 * last, or any one byte between), over any length.  That it takes the
 * same time whatever the bytes is CRYPTO_memcmp's promise, which a
 * timing test on a shared machine could not show without flaking.
 */
static void test_constant_time_equal(void **state)
{
    unsigned char a[32], b[32];
    apr_size_t i;

    (void)state;
    memset(a, 0x5a, sizeof(a));
    memcpy(b, a, sizeof(a));
    assert_int_equal(lessons_nonce_equal(a, b, sizeof(a)), 1);
    assert_int_equal(lessons_nonce_equal(a, b, 0), 1);
    for (i = 0; i < sizeof(a); i++) {
        memcpy(b, a, sizeof(a));
        b[i] ^= 0x01;
        assert_int_equal(lessons_nonce_equal(a, b, sizeof(a)), 0);
        b[i] ^= 0x81;           /* the high bit alone */
        assert_int_equal(lessons_nonce_equal(a, b, sizeof(a)), 0);
        /* Only the bytes asked are compared. */
        assert_int_equal(lessons_nonce_equal(a, b, i), 1);
    }
}

/* The secret file: read whole, line ends at its end left out, 32 bytes
 * at least.
 */
static const char *write_file(const char *name, const char *text,
                              apr_size_t len)
{
    const char *dir = NULL;
    const char *path;
    apr_file_t *f;
    apr_size_t n = len;

    assert_int_equal(apr_temp_dir_get(&dir, pool), APR_SUCCESS);
    path = apr_psprintf(pool, "%s/test_nonce.%ld.%s", dir, (long)getpid(),
                        name);
    assert_int_equal(apr_file_open(&f, path, APR_FOPEN_WRITE
                                   | APR_FOPEN_CREATE | APR_FOPEN_TRUNCATE
                                   | APR_FOPEN_BINARY, APR_FPROT_UREAD
                                   | APR_FPROT_UWRITE, pool),
                     APR_SUCCESS);
    assert_int_equal(apr_file_write_full(f, text, len, &n), APR_SUCCESS);
    apr_file_close(f);
    return path;
}

static void test_secret_file(void **state)
{
    const unsigned char *secret = NULL;
    apr_size_t len = 0;
    const char *path, *err;

    (void)state;
    path = write_file("good", "0123456789abcdef0123456789abcdef\n", 33);
    assert_null(lessons_nonce_secret_read(pool, path, &secret, &len));
    assert_int_equal(len, 32);
    assert_memory_equal(secret, secret_a, 32);
    apr_file_remove(path, pool);

    path = write_file("crlf", "0123456789abcdef0123456789abcdef\r\n", 34);
    assert_null(lessons_nonce_secret_read(pool, path, &secret, &len));
    assert_int_equal(len, 32);
    apr_file_remove(path, pool);

    path = write_file("short", "0123456789abcdef0123456789abcde\n", 32);
    err = lessons_nonce_secret_read(pool, path, &secret, &len);
    assert_non_null(err);
    assert_non_null(strstr(err, "31 bytes"));
    apr_file_remove(path, pool);

    path = write_file("empty", "", 0);
    assert_non_null(lessons_nonce_secret_read(pool, path, &secret, &len));
    apr_file_remove(path, pool);

    /* a public key is no secret: whoever has it would mint nonces */
    {
        static const char ssh[] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq"
                                  "PnNsmy0Vk+Wrqgi0NW6XmRKsPiYO6jk+3+/pjg9s"
                                  "B admin@host\n";

        path = write_file("ssh", ssh, sizeof(ssh) - 1);
        err = lessons_nonce_secret_read(pool, path, &secret, &len);
        assert_non_null(err);
        assert_non_null(strstr(err, "no secret: it holds an SSH key"));
        apr_file_remove(path, pool);
    }

    err = lessons_nonce_secret_read(pool, "/nonexistent/nonce.secret",
                                    &secret, &len);
    assert_non_null(err);
    assert_non_null(strstr(err, "cannot open"));
}

static void test_describe(void **state)
{
    (void)state;
    assert_non_null(strstr(lessons_nonce_describe(LESSONS_NONCE_MISSING),
                           "DPoP-Nonce"));
    assert_non_null(strstr(lessons_nonce_describe(LESSONS_NONCE_EXPIRED),
                           "DPoP-Nonce"));
    assert_non_null(strstr(lessons_nonce_describe(LESSONS_NONCE_FORGED),
                           "DPoP-Nonce"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_same_slot_same_nonce),
        cmocka_unit_test(test_slot_edges),
        cmocka_unit_test(test_previous_taken_older_refused),
        cmocka_unit_test(test_other_period),
        cmocka_unit_test(test_other_secret_refused),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(test_no_key_no_nonce),
        cmocka_unit_test(test_constant_time_equal),
        cmocka_unit_test(test_secret_file),
        cmocka_unit_test(test_describe),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
