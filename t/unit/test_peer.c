/* Licensed under the Apache License, Version 2.0.
 *
 * test_peer.c: lessons_peer -- read leases' datagrams: each kind comes
 * back as it was sent (a version, or an INVALIDATE's nonce, whose
 * digits have one spelling); a changed bit, another key, a cut datagram or
 * a longer one is refused; encode refuses fields the wire cannot carry,
 * and decode, under a good tag, bodies not of the one spelling (a sign,
 * an overflow, a leading zero, junk); the name read before the check;
 * keys as 64 lower-case hex digits, and nothing else.  Cut datagrams
 * are copied to buffers of their own length, so that a read past it is
 * seen (valgrind, ASan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "apr_strings.h"
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "store/lessons_peer.h"

#include "unit_lease.h"
#include "unit_pool.h"

static const unsigned char KEY[LESSONS_PEER_KEY_LEN] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87,
    0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0xff
};

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

/* A string of n copies of c, in the pool. */
static char *repeat(char c, apr_size_t n)
{
    char *s = apr_palloc(pool, n + 1);

    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* A datagram of kind for name at v under KEY, into out: its length. */
static apr_size_t datagram(char out[LESSONS_PEER_MAX],
                           lessons_peer_kind_e kind, const char *name,
                           const lessons_lease_version_t *v)
{
    apr_size_t n = lessons_peer_encode(out, LESSONS_PEER_MAX, kind, name, v,
                                       KEY);

    assert_true(n > LESSONS_PEER_TAG_LEN);
    assert_true(n <= LESSONS_PEER_MAX);
    return n;
}

/* body and its tag under KEY, as a peer with the key would send them,
 * whatever body says: its length.
 */
static apr_size_t signed_body(char out[LESSONS_PEER_MAX], const char *body)
{
    apr_size_t n = strlen(body);
    unsigned int mdlen = 0;

    assert_true(n + LESSONS_PEER_TAG_LEN <= LESSONS_PEER_MAX);
    memcpy(out, body, n);
    assert_non_null(HMAC(EVP_sha256(), KEY, sizeof(KEY),
                         (const unsigned char *)body, n,
                         (unsigned char *)out + n, &mdlen));
    assert_int_equal(mdlen, LESSONS_PEER_TAG_LEN);
    return n + LESSONS_PEER_TAG_LEN;
}

static lessons_peer_status_e decode_copy(const char *in, apr_size_t len,
                                         const unsigned char *key,
                                         lessons_peer_msg_t *m)
{
    /* A buffer of exactly len bytes: a read past it is an error to
     * valgrind and ASan.
     */
    char *copy = malloc(len ? len : 1);
    lessons_peer_status_e st;

    assert_non_null(copy);
    memcpy(copy, in, len);
    st = lessons_peer_decode(copy, len, key, m);
    free(copy);
    return st;
}

/* Each of the n bodies, under a good tag (a key holder's bug, or
 * another version of the format), is malformed, and the message is
 * left as it was.
 */
static void assert_all_malformed(const char *const *bodies, apr_size_t n)
{
    char buf[LESSONS_PEER_MAX];
    lessons_peer_msg_t m, before;
    apr_size_t i, len;

    memset(&m, 0x5a, sizeof(m));
    before = m;
    for (i = 0; i < n; i++) {
        len = signed_body(buf, bodies[i]);
        if (decode_copy(buf, len, KEY, &m) != LESSONS_PEER_MALFORMED) {
            fail_msg("accepted: %s", bodies[i]);
        }
        assert_memory_equal(&m, &before, sizeof(m));
    }
}

static void test_both_kinds_round_trip(void **state)
{
    const lessons_peer_kind_e kinds[] = { LESSONS_PEER_RAISE,
                                          LESSONS_PEER_ACK };
    const char *longest = repeat('n', LESSONS_LEASE_NAME_MAX - 1);
    const lessons_lease_version_t vs[] = {
        version("0000abcd0000000100000a2f", 42),
        version("e", 0),
        version(repeat('e', LESSONS_LEASE_EPOCH_MAX - 1), APR_INT64_MAX),
    };
    const char *names[] = { "web1/1234/1/0", "n", longest };
    char buf[LESSONS_PEER_MAX];
    apr_size_t k, i;

    (void)state;
    for (k = 0; k < 2; k++) {
        for (i = 0; i < 3; i++) {
            lessons_peer_msg_t m;
            apr_size_t n = datagram(buf, kinds[k], names[i], &vs[i]);

            memset(&m, 0x5a, sizeof(m));
            assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_OK);
            assert_int_equal(m.kind, kinds[k]);
            assert_string_equal(m.name, names[i]);
            assert_true(m.version.sum == vs[i].sum);
            assert_string_equal(m.version.epoch, vs[i].epoch);
        }
    }
    /* The text as documented, the tag after it. */
    {
        lessons_lease_version_t v = version("ep", 7);
        const char *body = "LP1 A web1 7 ep\n";
        apr_size_t n = datagram(buf, LESSONS_PEER_ACK, "web1", &v);

        assert_int_equal(n, strlen(body) + LESSONS_PEER_TAG_LEN);
        assert_memory_equal(buf, body, strlen(body));
    }
}

/* An INVALIDATE and its NONCE ACK, a HOLD and its HOLD ACK: the nonce
 * comes back as it went, the text is as documented, no kind is made by
 * another's encoder or passes for another, and under a good tag only
 * the one spelling is taken.
 */
static void test_nonce_kinds_round_trip(void **state)
{
    const lessons_peer_kind_e kinds[] = { LESSONS_PEER_INVALIDATE,
                                          LESSONS_PEER_NONCE_ACK,
                                          LESSONS_PEER_HOLD,
                                          LESSONS_PEER_HOLD_ACK };
    const char other[] = { 'N', 'O', 'I', 'N' };
    unsigned char nonce[LESSONS_PEER_NONCE_LEN];
    lessons_lease_version_t v = version("e", 1);
    const char *body = "LP1 I web1 000102030405060708090a0b0c0d0e0f\n";
    const char *bad[] = {
        "LP1 I n 000102030405060708090A0B0C0D0E0F\n",
        "LP1 I n 000102030405060708090a0b0c0d0e0\n",
        "LP1 I n 000102030405060708090a0b0c0d0e0f0\n",
        "LP1 I n 000102030405060708090a0b0c0d0e0f \n",
        "LP1 I n 000102030405060708090a0b0c0d0e0f\nx",
        "LP1 I n 000102030405060708090a0b0c0d0e0f",
        "LP1 N n 1 e\n",
        "LP1 N n 0001020304050607 08090a0b0c0d0e0f\n",
        "LP1 I n  000102030405060708090a0b0c0d0e0f\n",
        "LP1 R n 000102030405060708090a0b0c0d0e0f\n",
        "LP1 A n 11111111111111111111111111111111\n",
        "LP1 H n 000102030405060708090a0b0c0d0e0\n",
        "LP1 H n 1 e\n",
        "LP1 X n 000102030405060708090a0b0c0d0e0f\n",
    };
    char buf[LESSONS_PEER_MAX];
    lessons_peer_msg_t m;
    apr_size_t k, i, n;

    (void)state;
    for (i = 0; i < sizeof(nonce); i++) {
        nonce[i] = (unsigned char)i;
    }
    for (k = 0; k < 4; k++) {
        n = lessons_peer_encode_nonce(buf, sizeof(buf), kinds[k], "web1",
                                      nonce, KEY);
        assert_true(n > LESSONS_PEER_TAG_LEN);
        memset(&m, 0x5a, sizeof(m));
        assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_OK);
        assert_int_equal(m.kind, kinds[k]);
        assert_string_equal(m.name, "web1");
        assert_memory_equal(m.nonce, nonce, sizeof(nonce));
        assert_true(m.version.sum == 0);
        assert_string_equal(m.version.epoch, "");
        /* The kind is under the tag: an INVALIDATE sent back is no
         * NONCE ACK, a NONCE ACK no HOLD ACK, and no HOLD passes for an
         * INVALIDATE.
         */
        buf[4] = other[k];
        assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_BAD_TAG);
    }
    n = lessons_peer_encode_nonce(buf, sizeof(buf), LESSONS_PEER_INVALIDATE,
                                  "web1", nonce, KEY);
    assert_int_equal(n, strlen(body) + LESSONS_PEER_TAG_LEN);
    assert_memory_equal(buf, body, strlen(body));
    n = lessons_peer_encode_nonce(buf, sizeof(buf), LESSONS_PEER_HOLD,
                                  "web1", nonce, KEY);
    assert_int_equal(n, strlen(body) + LESSONS_PEER_TAG_LEN);
    assert_memory_equal(buf, "LP1 H web1 ", 11);
    assert_memory_equal(buf + 11, body + 11, strlen(body) - 11);
    /* Each encoder makes only its own kinds. */
    assert_int_equal(lessons_peer_encode_nonce(buf, sizeof(buf),
                                               LESSONS_PEER_RAISE, "web1",
                                               nonce, KEY), 0);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf),
                                         LESSONS_PEER_INVALIDATE, "web1",
                                         &v, KEY), 0);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf),
                                         LESSONS_PEER_HOLD, "web1", &v, KEY),
                     0);
    assert_int_equal(lessons_peer_encode_nonce(buf, sizeof(buf),
                                               LESSONS_PEER_NONCE_ACK,
                                               "a b", nonce, KEY), 0);
    assert_int_equal(lessons_peer_encode_nonce(buf, 40,
                                               LESSONS_PEER_NONCE_ACK,
                                               "web1", nonce, KEY), 0);
    assert_all_malformed(bad, sizeof(bad) / sizeof(bad[0]));
}

static void test_a_changed_bit_is_a_bad_tag(void **state)
{
    lessons_lease_version_t v = version("0000abcd00000001", 123456789);
    char buf[LESSONS_PEER_MAX];
    apr_size_t n = datagram(buf, LESSONS_PEER_RAISE, "web2/99/1/0", &v);
    apr_size_t i;
    int b;

    (void)state;
    for (i = 0; i < n; i++) {
        for (b = 0; b < 8; b++) {
            lessons_peer_msg_t m;

            buf[i] ^= (char)(1 << b);
            assert_int_equal(decode_copy(buf, n, KEY, &m),
                             LESSONS_PEER_BAD_TAG);
            buf[i] ^= (char)(1 << b);
        }
    }
    {
        lessons_peer_msg_t m;

        assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_OK);
    }
}

static void test_another_key_is_a_bad_tag(void **state)
{
    lessons_lease_version_t v = version("e1", 5);
    unsigned char other[LESSONS_PEER_KEY_LEN];
    char buf[LESSONS_PEER_MAX];
    apr_size_t n = datagram(buf, LESSONS_PEER_ACK, "web3", &v);
    lessons_peer_msg_t m;
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(other); i++) {
        memcpy(other, KEY, sizeof(other));
        other[i] ^= 0x80;
        assert_int_equal(decode_copy(buf, n, other, &m),
                         LESSONS_PEER_BAD_TAG);
    }
    memset(other, 0, sizeof(other));
    assert_int_equal(decode_copy(buf, n, other, &m), LESSONS_PEER_BAD_TAG);
}

static void test_cut_or_longer_datagrams_are_refused(void **state)
{
    lessons_lease_version_t v = version(repeat('e', 40), 99);
    char buf[LESSONS_PEER_MAX + 8];
    apr_size_t n = datagram(buf, LESSONS_PEER_RAISE, "web4/1/1/0", &v);
    lessons_peer_msg_t m, before;
    apr_size_t len;

    (void)state;
    memset(&m, 0x5a, sizeof(m));
    before = m;
    for (len = 0; len < n; len++) {
        lessons_peer_status_e st = decode_copy(buf, len, KEY, &m);

        assert_true(st == LESSONS_PEER_MALFORMED
                    || st == LESSONS_PEER_BAD_TAG);
        assert_memory_equal(&m, &before, sizeof(m));
    }
    assert_int_equal(decode_copy(buf, 0, KEY, &m), LESSONS_PEER_MALFORMED);
    /* Longer: junk after the tag, and a datagram past the maximum. */
    memset(buf + n, 'x', sizeof(buf) - n);
    assert_int_equal(decode_copy(buf, n + 1, KEY, &m), LESSONS_PEER_BAD_TAG);
    assert_int_equal(decode_copy(buf, LESSONS_PEER_MAX + 1, KEY, &m),
                     LESSONS_PEER_MALFORMED);
    assert_memory_equal(&m, &before, sizeof(m));
    assert_int_equal(lessons_peer_decode(NULL, n, KEY, &m),
                     LESSONS_PEER_MALFORMED);
    assert_int_equal(lessons_peer_decode(buf, n, NULL, &m),
                     LESSONS_PEER_MALFORMED);
    assert_int_equal(lessons_peer_decode(buf, n, KEY, NULL),
                     LESSONS_PEER_MALFORMED);
}

static void test_encode_refuses_what_the_wire_cannot_carry(void **state)
{
    lessons_lease_version_t v = version("e1", 1), bad;
    char buf[LESSONS_PEER_MAX];
    apr_size_t n;
    const char *names[] = {
        "", "a b", "a\tb", "a\nb", "a\x7f", "caf\xc3\xa9",
        repeat('n', LESSONS_LEASE_NAME_MAX),
    };
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_int_equal(lessons_peer_encode(buf, sizeof(buf),
                                             LESSONS_PEER_RAISE, names[i],
                                             &v, KEY), 0);
    }
    /* An epoch that fills its array, with no NUL in it. */
    bad = v;
    memset(bad.epoch, 'e', sizeof(bad.epoch));
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", &bad, KEY), 0);
    bad = version("", 1);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", &bad, KEY), 0);
    bad = version("e 1", 1);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", &bad, KEY), 0);
    bad = version("e1", -1);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", &bad, KEY), 0);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf),
                                         (lessons_peer_kind_e)7, "n", &v,
                                         KEY), 0);
    assert_int_equal(lessons_peer_encode(NULL, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", &v, KEY), 0);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         NULL, &v, KEY), 0);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", NULL, KEY), 0);
    assert_int_equal(lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK,
                                         "n", &v, NULL), 0);
    /* Room: exactly enough, or one byte short. */
    n = lessons_peer_encode(buf, sizeof(buf), LESSONS_PEER_ACK, "n", &v, KEY);
    assert_true(n > 0);
    assert_int_equal(lessons_peer_encode(buf, n, LESSONS_PEER_ACK, "n", &v,
                                         KEY), n);
    assert_int_equal(lessons_peer_encode(buf, n - 1, LESSONS_PEER_ACK, "n",
                                         &v, KEY), 0);
}

static void test_decode_takes_one_spelling_only(void **state)
{
    /* Under a good tag (a key holder's bug, or another version of the
     * format): each is malformed.
     */
    const char *bodies[] = {
        "LP1 R n +1 e\n",
        "LP1 R n -1 e\n",
        "LP1 R n -0 e\n",
        "LP1 R n 9223372036854775808 e\n",
        "LP1 R n 99999999999999999999 e\n",
        "LP1 R n 007 e\n",
        "LP1 R n 00 e\n",
        "LP1 R n 1x e\n",
        "LP1 R n 0x1 e\n",
        "LP1 R n  1 e\n",
        "LP1 R n 1  e\n",
        "LP1 R n 1 e \n",
        "LP1 R n 1 e\nx",
        "LP1 R n 1 e\n\n",
        "LP1 R n 1 e",
        "LP1 R n 1 e f\n",
        "LP1 R n 1\n",
        "LP1 R n e\n",
        "LP1 R  n 1 e\n",
        "LP1 X n 1 e\n",
        "LP1 r n 1 e\n",
        "LP1 RA n 1 e\n",
        "LP2 R n 1 e\n",
        "lp1 R n 1 e\n",
        "LP1 R n\t 1 e\n",
        "LP1 R n 1 e\r\n",
        "LP1 R n 1 \xc3\xa9\n",
    };
    char buf[LESSONS_PEER_MAX];
    lessons_peer_msg_t m;
    apr_size_t n;

    (void)state;
    assert_all_malformed(bodies, sizeof(bodies) / sizeof(bodies[0]));
    /* Fields one longer than their arrays, and the largest sum. */
    n = signed_body(buf, apr_pstrcat(pool, "LP1 R ",
                                     repeat('n', LESSONS_LEASE_NAME_MAX),
                                     " 1 e\n", NULL));
    assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_MALFORMED);
    n = signed_body(buf, apr_pstrcat(pool, "LP1 R n 1 ",
                                     repeat('e', LESSONS_LEASE_EPOCH_MAX),
                                     "\n", NULL));
    assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_MALFORMED);
    n = signed_body(buf, "LP1 A n 9223372036854775807 e\n");
    assert_int_equal(decode_copy(buf, n, KEY, &m), LESSONS_PEER_OK);
    assert_true(m.version.sum == APR_INT64_MAX);
    assert_int_equal(m.kind, LESSONS_PEER_ACK);
}

static void test_the_name_before_the_check(void **state)
{
    lessons_lease_version_t v = version("e1", 3);
    const char *longest = repeat('n', LESSONS_LEASE_NAME_MAX - 1);
    char buf[LESSONS_PEER_MAX + 1], name[LESSONS_LEASE_NAME_MAX];
    apr_size_t n, len;
    const char *garbage[] = {
        "", "LP1", "LP1 R ", "LP1 R n", "LP2 R n 1 e\n", "LP1 X n 1 e\n",
        "LP1 R  n 1 e\n", "LP1 R n\x01 1 e\n", "GET / HTTP/1.1\r\n",
    };
    apr_size_t i;

    (void)state;
    n = datagram(buf, LESSONS_PEER_RAISE, "web5/7/2/1", &v);
    assert_true(lessons_peer_name(buf, n, name));
    assert_string_equal(name, "web5/7/2/1");
    n = datagram(buf, LESSONS_PEER_ACK, longest, &v);
    assert_true(lessons_peer_name(buf, n, name));
    assert_string_equal(name, longest);
    /* Untrusted: read whatever the tag says, until decode checks it. */
    buf[n - 1] ^= 1;
    assert_true(lessons_peer_name(buf, n, name));
    /* Cut: refused, or the name, never a read past the bytes given. */
    n = datagram(buf, LESSONS_PEER_RAISE, "web5", &v);
    for (len = 0; len < n; len++) {
        char *copy = malloc(len ? len : 1);

        assert_non_null(copy);
        memcpy(copy, buf, len);
        apr_cpystrn(name, "-", sizeof(name));
        if (lessons_peer_name(copy, len, name)) {
            assert_string_equal(name, "web5");
        }
        free(copy);
    }
    for (i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        /* Padded with a tag's length of bytes, so that only the head
         * can be wrong.
         */
        memset(buf, 'x', sizeof(buf));
        memcpy(buf, garbage[i], strlen(garbage[i]));
        assert_false(lessons_peer_name(buf,
                                       strlen(garbage[i])
                                       + LESSONS_PEER_TAG_LEN, name));
    }
    memset(buf, 'x', sizeof(buf));
    memcpy(buf, "LP1 R n 1 e\n", 12);
    assert_true(lessons_peer_name(buf, 12 + LESSONS_PEER_TAG_LEN, name));
    assert_false(lessons_peer_name(buf, LESSONS_PEER_MAX + 1, name));
    assert_false(lessons_peer_name(NULL, 44, name));
    assert_false(lessons_peer_name(buf, 44, NULL));
    n = signed_body(buf, apr_pstrcat(pool, "LP1 R ",
                                     repeat('n', LESSONS_LEASE_NAME_MAX),
                                     " 1 e\n", NULL));
    assert_false(lessons_peer_name(buf, n, name));
}

static void test_keys_in_hex(void **state)
{
    char hex[LESSONS_PEER_KEY_HEX + 1];
    unsigned char key[LESSONS_PEER_KEY_LEN], before[LESSONS_PEER_KEY_LEN];
    char *s;
    const char *bad[] = {
        NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    };
    apr_size_t i;

    (void)state;
    assert_true(lessons_peer_key_hex(KEY, hex));
    assert_string_equal(hex, "000102030405060708090a0b0c0d0e0f"
                             "f0e1d2c3b4a5968778695a4b3c2d1eff");
    memset(key, 0, sizeof(key));
    assert_true(lessons_peer_key_from_hex(hex, key));
    assert_memory_equal(key, KEY, sizeof(key));

    bad[0] = apr_pstrndup(pool, hex, LESSONS_PEER_KEY_HEX - 1);
    bad[1] = apr_pstrcat(pool, hex, "0", NULL);
    s = apr_pstrdup(pool, hex);
    s[20] = 'F';
    bad[2] = s;
    s = apr_pstrdup(pool, hex);
    s[63] = 'g';
    bad[3] = s;
    s = apr_pstrdup(pool, hex);
    s[0] = ' ';
    bad[4] = s;
    s = apr_pstrcat(pool, hex, "\n", NULL);
    bad[5] = s;
    bad[6] = "";
    memset(before, 0xa5, sizeof(before));
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(key, before, sizeof(key));
        if (lessons_peer_key_from_hex(bad[i], key)) {
            fail_msg("accepted: \"%s\"", bad[i]);
        }
        assert_memory_equal(key, before, sizeof(key));
    }
    /* Upper case through and through, as apr alone would take it. */
    assert_false(lessons_peer_key_from_hex(
        "000102030405060708090A0B0C0D0E0FF0E1D2C3B4A5968778695A4B3C2D1EFF",
        key));
    assert_false(lessons_peer_key_from_hex(NULL, key));
    assert_false(lessons_peer_key_from_hex(hex, NULL));
    assert_false(lessons_peer_key_hex(NULL, hex));
    assert_false(lessons_peer_key_hex(KEY, NULL));
}

/* The key as its row gives it works as the key it came from. */
static void test_a_key_from_its_row_checks(void **state)
{
    lessons_lease_version_t v = version("e9", 11);
    char hex[LESSONS_PEER_KEY_HEX + 1], buf[LESSONS_PEER_MAX];
    unsigned char key[LESSONS_PEER_KEY_LEN];
    lessons_peer_msg_t m;
    apr_size_t n = datagram(buf, LESSONS_PEER_RAISE, "web6", &v);

    (void)state;
    assert_true(lessons_peer_key_hex(KEY, hex));
    assert_true(lessons_peer_key_from_hex(hex, key));
    assert_int_equal(decode_copy(buf, n, key, &m), LESSONS_PEER_OK);
    assert_int_equal(m.kind, LESSONS_PEER_RAISE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_both_kinds_round_trip),
        cmocka_unit_test(test_nonce_kinds_round_trip),
        cmocka_unit_test(test_a_changed_bit_is_a_bad_tag),
        cmocka_unit_test(test_another_key_is_a_bad_tag),
        cmocka_unit_test(test_cut_or_longer_datagrams_are_refused),
        cmocka_unit_test(test_encode_refuses_what_the_wire_cannot_carry),
        cmocka_unit_test(test_decode_takes_one_spelling_only),
        cmocka_unit_test(test_the_name_before_the_check),
        cmocka_unit_test(test_keys_in_hex),
        cmocka_unit_test(test_a_key_from_its_row_checks),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
