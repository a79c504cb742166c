/* Licensed under the Apache License, Version 2.0.
 *
 * test_keytrust.c: lessons_keytrust -- which key sources may share a
 * fetch (issue 55 §1): alike in URL, CA certificates, proxy and
 * algorithms; "none" (the system's CAs, no proxy) never matches a value;
 * one CA file's certificates under two paths are alike; a group shares
 * its first, never a chain; a source no section uses is left out.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "keys/lessons_keytrust.h"

#define URL  "https://idp.example/jwks"
#define CA_A "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
#define CA_B "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n"
#define RS   LESSONS_ALG_BIT(LESSONS_ALG_RS256)
#define ES   LESSONS_ALG_BIT(LESSONS_ALG_ES256)

static lessons_keytrust_t trust(const char *ca, const char *proxy,
                                lessons_algs_t algs)
{
    lessons_keytrust_t t;

    memset(&t, 0, sizeof(t));
    t.url = URL;
    t.ca_pem = ca;
    t.ca_len = ca ? strlen(ca) : 0;
    t.proxy = proxy;
    t.algs = algs;
    return t;
}

static void test_alike(void **state)
{
    lessons_keytrust_t a = trust(NULL, NULL, RS), b = trust(NULL, NULL, RS);
    char copy[sizeof(CA_A)];

    (void)state;
    assert_true(lessons_keytrust_alike(&a, &b));
    /* the victim (none) and tenant (a CA, a proxy) */
    b = trust(CA_B, "http://127.0.0.1:3128", RS);
    assert_false(lessons_keytrust_alike(&a, &b));
    assert_false(lessons_keytrust_alike(&b, &a));
    b = trust(CA_A, NULL, RS);
    assert_false(lessons_keytrust_alike(&a, &b));    /* none vs a CA */
    b = trust(NULL, "http://127.0.0.1:3128", RS);
    assert_false(lessons_keytrust_alike(&a, &b));    /* direct vs proxy */
    b = trust(NULL, NULL, RS | ES);
    assert_false(lessons_keytrust_alike(&a, &b));    /* other algorithms */
    b = trust(NULL, NULL, RS);
    b.discover = 1;
    assert_false(lessons_keytrust_alike(&a, &b));    /* an issuer */
    b = trust(NULL, NULL, RS);
    b.url = URL "?x";
    assert_false(lessons_keytrust_alike(&a, &b));
    /* one CA file's certificates, read from two paths: alike */
    memcpy(copy, CA_A, sizeof(copy));
    a = trust(CA_A, "http://p:1", RS);
    b = trust(copy, "http://p:1", RS);
    assert_true(lessons_keytrust_alike(&a, &b));
    b = trust(CA_B, "http://p:1", RS);
    assert_false(lessons_keytrust_alike(&a, &b));    /* same length */
    b = trust(CA_A, "http://p:2", RS);
    assert_false(lessons_keytrust_alike(&a, &b));
    /* the CA's length counts: a prefix is another CA */
    b = trust(CA_A, "http://p:1", RS);
    b.ca_len--;
    assert_false(lessons_keytrust_alike(&a, &b));
}

static void test_share(void **state)
{
    lessons_keytrust_t t[6];
    const lessons_keytrust_t *tp[6];
    int used[6] = { 1, 1, 1, 1, 0, 1 }, same[6], i;

    (void)state;
    t[0] = trust(NULL, NULL, RS);                    /* victim */
    t[1] = trust(CA_B, "http://evil:3128", RS);      /* tenant */
    t[2] = trust(NULL, NULL, RS);                    /* like the victim */
    t[3] = trust(CA_B, "http://evil:3128", RS);      /* like the tenant */
    t[4] = trust(NULL, NULL, RS);                    /* unused */
    t[5] = trust(NULL, NULL, RS);                    /* like the victim */
    for (i = 0; i < 6; i++) {
        tp[i] = &t[i];
    }
    lessons_keytrust_share(tp, used, 6, same);
    assert_int_equal(same[0], -1);
    assert_int_equal(same[1], -1);
    assert_int_equal(same[2], 0);
    assert_int_equal(same[3], 1);
    assert_int_equal(same[4], -1);
    assert_int_equal(same[5], 0);                    /* the first, no chain */
    /* without a used list, all are used */
    lessons_keytrust_share(tp, NULL, 6, same);
    assert_int_equal(same[4], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alike),
        cmocka_unit_test(test_share),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
