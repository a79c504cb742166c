/* Licensed under the Apache License, Version 2.0.
 *
 * test_tokencache.c: lessons_tokencache and lessons_token_verify_cached
 * (issue 7).  A hit needs the same policy and the same whole token; exp,
 * nbf and iat are checked on every hit exactly as a full verify checks
 * them; only OK results are stored; the bound holds; threads share it.
 * Tokens are made as in test_token.c: by cjose, or by hand with HMAC.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"
#include "apr_thread_proc.h"

#include "auth/lessons_token.h"
#include "auth/lessons_tokencache.h"

#define NOW        ((apr_int64_t)1700000000)
#define EXP        (NOW + 3600)
#define ISSUER     "https://auth.example.org"
#define AUDIENCE   "lessons-api"

#include "unit_pool.h"
#include "unit_jwt.h"

static const unsigned char secret[] =
    "k3y-for-unit-tests-only-0123456789abcdefghijklmn";
static const unsigned char other_secret[] =
    "another-key-for-unit-tests-0123456789abcdefghijk";
#define SECRET_LEN (sizeof(secret) - 1)
#define OTHER_LEN  (sizeof(other_secret) - 1)

static const char *rsa_pub, *rsa_priv;
static const char *ec_pub, *ec_priv, *ec2_pub;

/* --------------------------------------------------------------- helpers */

/* HS256 by hand: header and payload JSON as given, HMAC over key. */
static char *hs_token_key(const char *payload, const void *key,
                          size_t keylen)
{
    char *input = apr_pstrcat(pool,
                              b64s("{\"alg\":\"HS256\",\"typ\":\"JWT\"}"),
                              ".", b64s(payload), NULL);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;

    assert_non_null(HMAC(EVP_sha256(), key, (int)keylen,
                         (unsigned char *)input, strlen(input), mac,
                         &maclen));
    return apr_pstrcat(pool, input, ".", b64url(mac, maclen), NULL);
}

static char *hs_token(const char *payload)
{
    return hs_token_key(payload, secret, SECRET_LEN);
}

#define STD_CLAIMS "{\"sub\":\"alice\",\"exp\":1700003600}"

static const lessons_key_t *make_key(const void *data, apr_size_t len)
{
    lessons_key_t *key = NULL;

    /* a copy, so that equal bytes at another address are tested too */
    assert_null(lessons_key_make(pool, apr_pmemdup(pool, data, len), len,
                                 &key));
    assert_non_null(key);
    return key;
}

static lessons_token_policy_t policy(lessons_alg_t alg, const void *key,
                                     apr_size_t len)
{
    lessons_token_policy_t p;

    memset(&p, 0, sizeof(p));
    p.alg = alg;
    p.key = make_key(key, len);
    p.leeway = 0;
    return p;
}

static lessons_token_policy_t hs_policy(void)
{
    return policy(LESSONS_ALG_HS256, secret, SECRET_LEN);
}

static lessons_token_policy_t pem_policy(lessons_alg_t alg, const char *pem)
{
    return policy(alg, pem, strlen(pem));
}

/* verify_cached at now, compare the result; returns the subject. */
static const char *cv_at(const lessons_token_policy_t *p,
                         lessons_tokencache_t *c, const char *token,
                         apr_int64_t now, lessons_token_e expect)
{
    const char *subject = SENTINEL;
    lessons_token_e r = lessons_token_verify_cached(pool, p, c, token, now,
                                                    &subject);

    if (r != expect)
        print_error("expected %s, got %s\n", result_name(expect),
                    result_name(r));
    assert_int_equal(r, expect);
    if (r != LESSONS_TOKEN_OK)
        assert_null(subject);
    return subject;
}

static const char *cv(const lessons_token_policy_t *p,
                      lessons_tokencache_t *c, const char *token,
                      lessons_token_e expect)
{
    return cv_at(p, c, token, NOW, expect);
}

static lessons_tokencache_stats_t stats(lessons_tokencache_t *c)
{
    lessons_tokencache_stats_t s;

    lessons_tokencache_stats(c, &s);
    return s;
}

/* Counters as a test expects them after a step. */
static void expect_stats(lessons_tokencache_t *c, apr_uint64_t hits,
                         apr_uint64_t misses, apr_size_t entries)
{
    lessons_tokencache_stats_t s = stats(c);

    if (s.hits != hits || s.misses != misses || s.entries != entries)
        print_error("hits %lu misses %lu entries %lu, expected %lu %lu %lu\n",
                    (unsigned long)s.hits, (unsigned long)s.misses,
                    (unsigned long)s.entries, (unsigned long)hits,
                    (unsigned long)misses, (unsigned long)entries);
    assert_int_equal(s.hits, hits);
    assert_int_equal(s.misses, misses);
    assert_int_equal(s.entries, entries);
}

static lessons_tokencache_t *new_cache(apr_size_t max)
{
    lessons_tokencache_t *c = lessons_tokencache_make(pool, max);

    assert_non_null(c);
    return c;
}

/* The signature segment of a token, changed in one character (one in
 * the middle, whose bits all count), same length.
 */
static char *tamper_sig(const char *token)
{
    char *t = apr_pstrdup(pool, token);
    char *sig = strrchr(t, '.');

    assert_non_null(sig);
    sig += 1 + strlen(sig + 1) / 2;
    *sig = *sig == 'A' ? 'B' : 'A';
    assert_int_equal(strlen(t), strlen(token));
    return t;
}

/* ------------------------------------------------------------ fixtures */

static int group_setup(void **state)
{
    (void)state;
    if (unit_pool_open() != 0)
        return -1;
    if (make_keypair(EVP_RSA_gen(2048), &rsa_pub, &rsa_priv)
        || make_keypair(EVP_EC_gen("P-256"), &ec_pub, &ec_priv)
        || make_keypair(EVP_EC_gen("P-256"), &ec2_pub, NULL))
        return -1;
    return 0;
}

/* --------------------------------------------------------------- make */

static void test_make(void **state)
{
    lessons_tokencache_stats_t s;

    (void)state;
    assert_null(lessons_tokencache_make(pool, 0));
    assert_null(lessons_tokencache_make(pool, LESSONS_TOKENCACHE_MAX + 1));
    assert_null(lessons_tokencache_make(NULL, 10));
    s = stats(new_cache(10000));
    assert_int_equal(s.max_entries, 10000);
    assert_int_equal(s.entries, 0);
    s = stats(NULL);
    assert_int_equal(s.hits + s.misses + s.entries + s.max_entries, 0);
}

/* No cache: exactly lessons_token_verify. */
static void test_null_cache_is_plain_verify(void **state)
{
    lessons_token_policy_t p = hs_policy();
    const char *good = hs_token(STD_CLAIMS);
    const char *sub;

    (void)state;
    sub = cv(&p, NULL, good, LESSONS_TOKEN_OK);
    assert_string_equal(sub, "alice");
    cv(&p, NULL, tamper_sig(good), LESSONS_TOKEN_BAD_SIGNATURE);
    cv_at(&p, NULL, good, EXP, LESSONS_TOKEN_EXPIRED);
    cv(&p, NULL, NULL, LESSONS_TOKEN_MALFORMED);
    assert_int_equal(lessons_token_verify_cached(pool, &p, NULL, good, NOW,
                                                 NULL), LESSONS_TOKEN_OK);
}

/* ---------------------------------------------------------------- hits */

static void test_second_verify_hits(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token(STD_CLAIMS);
    const char *s1, *s2;

    (void)state;
    s1 = cv(&p, c, t, LESSONS_TOKEN_OK);
    expect_stats(c, 0, 1, 1);
    s2 = cv(&p, c, t, LESSONS_TOKEN_OK);
    expect_stats(c, 1, 1, 1);
    assert_string_equal(s1, "alice");
    assert_string_equal(s2, "alice");
    /* the same token in another buffer is the same token */
    cv(&p, c, apr_pstrdup(pool, t), LESSONS_TOKEN_OK);
    expect_stats(c, 2, 1, 1);
    /* subject may be NULL: the answer is the same */
    assert_int_equal(lessons_token_verify_cached(pool, &p, c, t, NOW, NULL),
                     LESSONS_TOKEN_OK);
    expect_stats(c, 3, 1, 1);
}

/* The watcher sees the counters after every lookup. */
static void token_watcher(void *baton, const lessons_tokencache_stats_t *now)
{
    lessons_tokencache_stats_t *last = baton;

    *last = *now;
}

static void test_watch(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token(STD_CLAIMS);
    lessons_tokencache_stats_t last;

    (void)state;
    memset(&last, 0, sizeof(last));
    lessons_tokencache_watch(c, token_watcher, &last);
    cv(&p, c, t, LESSONS_TOKEN_OK);
    assert_int_equal(last.misses, 1);
    assert_int_equal(last.hits, 0);
    cv(&p, c, t, LESSONS_TOKEN_OK);
    cv(&p, c, t, LESSONS_TOKEN_OK);
    assert_int_equal(last.misses, 1);
    assert_int_equal(last.hits, 2);
    lessons_tokencache_watch(c, NULL, NULL);
    cv(&p, c, t, LESSONS_TOKEN_OK);
    assert_int_equal(last.hits, 2);
    lessons_tokencache_watch(NULL, token_watcher, &last);
}

static void test_hits_rs256_es256(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t rs = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    lessons_token_policy_t es = pem_policy(LESSONS_ALG_ES256, ec_pub);
    const char *trs = lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                               "{\"sub\":\"rsa-user\",\"exp\":1700003600}");
    const char *tes = lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv),
                               "{\"sub\":\"ec-user\",\"exp\":1700003600}");

    (void)state;
    assert_string_equal(cv(&rs, c, trs, LESSONS_TOKEN_OK), "rsa-user");
    assert_string_equal(cv(&es, c, tes, LESSONS_TOKEN_OK), "ec-user");
    expect_stats(c, 0, 2, 2);
    assert_string_equal(cv(&rs, c, trs, LESSONS_TOKEN_OK), "rsa-user");
    assert_string_equal(cv(&es, c, tes, LESSONS_TOKEN_OK), "ec-user");
    expect_stats(c, 2, 2, 2);
}

static void test_hit_without_sub(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token("{\"exp\":1700003600}");

    (void)state;
    assert_null(cv(&p, c, t, LESSONS_TOKEN_OK));
    assert_null(cv(&p, c, t, LESSONS_TOKEN_OK));
    expect_stats(c, 1, 1, 1);
}

/* The subject handed out is the caller's copy: changing it changes
 * nothing the cache holds.
 */
static void test_subject_is_a_copy(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token(STD_CLAIMS);
    char *s;

    (void)state;
    cv(&p, c, t, LESSONS_TOKEN_OK);
    s = (char *)cv(&p, c, t, LESSONS_TOKEN_OK);
    s[0] = 'X';
    assert_string_equal(cv(&p, c, t, LESSONS_TOKEN_OK), "alice");
}

/* ------------------------------------------------------------- the clock */

static void test_expired_refused_from_cache(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token(STD_CLAIMS);

    (void)state;
    cv_at(&p, c, t, NOW, LESSONS_TOKEN_OK);
    cv_at(&p, c, t, EXP - 1, LESSONS_TOKEN_OK);
    expect_stats(c, 1, 1, 1);
    /* exp passes between two calls: a hit, refused, and dropped */
    cv_at(&p, c, t, EXP, LESSONS_TOKEN_EXPIRED);
    expect_stats(c, 2, 1, 0);
    assert_int_equal(stats(c).expired, 1);
    cv_at(&p, c, t, EXP + 86400, LESSONS_TOKEN_EXPIRED);
    expect_stats(c, 2, 2, 0);           /* gone, and not stored again */
}

static void test_expired_with_leeway(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token(STD_CLAIMS);

    (void)state;
    p.leeway = 30;
    cv_at(&p, c, t, NOW, LESSONS_TOKEN_OK);
    cv_at(&p, c, t, EXP + 29, LESSONS_TOKEN_OK);
    expect_stats(c, 1, 1, 1);
    cv_at(&p, c, t, EXP + 30, LESSONS_TOKEN_EXPIRED);
    expect_stats(c, 2, 1, 0);
}

static void test_nbf_on_hit(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token("{\"sub\":\"alice\",\"exp\":1700003600,"
                             "\"nbf\":1700000060}");

    (void)state;
    /* stored when it became valid; the clock then steps back */
    cv_at(&p, c, t, NOW + 60, LESSONS_TOKEN_OK);
    expect_stats(c, 0, 1, 1);
    cv_at(&p, c, t, NOW, LESSONS_TOKEN_NOT_YET_VALID);
    cv_at(&p, c, t, NOW + 59, LESSONS_TOKEN_NOT_YET_VALID);
    expect_stats(c, 2, 1, 1);           /* hits, refused, kept */
    assert_string_equal(cv_at(&p, c, t, NOW + 60, LESSONS_TOKEN_OK),
                        "alice");
    expect_stats(c, 3, 1, 1);
    /* with leeway, under another policy (so a full verify first) */
    p.leeway = 10;
    cv_at(&p, c, t, NOW + 50, LESSONS_TOKEN_OK);
    cv_at(&p, c, t, NOW + 49, LESSONS_TOKEN_NOT_YET_VALID);
    cv_at(&p, c, t, NOW + 50, LESSONS_TOKEN_OK);
    expect_stats(c, 5, 2, 2);
}

/* A hit answers as a full verify at every instant: exp, nbf and iat
 * around their edges, with and without leeway.
 */
static void test_hit_equals_full_verify_over_time(void **state)
{
    static const long leeways[] = { 0, 1, 30 };
    const char *t = hs_token("{\"sub\":\"alice\",\"exp\":1700000100,"
                             "\"nbf\":1700000020,\"iat\":1700000010}");
    size_t i;
    apr_int64_t now;

    (void)state;
    for (i = 0; i < sizeof(leeways) / sizeof(leeways[0]); i++) {
        lessons_tokencache_t *c = new_cache(100);
        lessons_token_policy_t p = hs_policy();
        const char *s1 = NULL, *s2 = NULL;
        apr_uint64_t hits;

        p.leeway = leeways[i];
        /* stored at a time it passes */
        cv_at(&p, c, t, NOW + 50, LESSONS_TOKEN_OK);
        for (now = NOW - 40; now <= NOW + 140; now++) {
            lessons_token_e full = lessons_token_verify(pool, &p, t, now,
                                                        &s1);

            /* a step that expires the entry drops it: put it back */
            if (stats(c).entries == 0)
                cv_at(&p, c, t, NOW + 50, LESSONS_TOKEN_OK);
            hits = stats(c).hits;
            cv_at(&p, c, t, now, full);
            assert_int_equal(stats(c).hits, hits + 1);
            if (full == LESSONS_TOKEN_OK) {
                s2 = cv_at(&p, c, t, now, full);
                assert_string_equal(s1, s2);
            }
        }
    }
}

/* iat in the future after the clock steps back: refused from the cache
 * as a full verify refuses it.
 */
static void test_iat_on_hit(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token("{\"exp\":1700003600,\"iat\":1700000100}");

    (void)state;
    cv_at(&p, c, t, NOW + 100, LESSONS_TOKEN_OK);
    cv_at(&p, c, t, NOW, LESSONS_TOKEN_BAD_IAT);
    expect_stats(c, 1, 1, 1);
}

/* ----------------------------------------------------------- policies */

/* Cached under a, then tried under b: a miss and a full verify, which
 * gives expect; the counters show it was not a hit.
 */
static void cross(lessons_tokencache_t *c, const lessons_token_policy_t *a,
                  const lessons_token_policy_t *b, const char *t,
                  apr_int64_t now, lessons_token_e expect)
{
    lessons_tokencache_stats_t before;

    cv_at(a, c, t, now, LESSONS_TOKEN_OK);
    cv_at(a, c, t, now, LESSONS_TOKEN_OK);          /* a hit under a */
    before = stats(c);
    cv_at(b, c, t, now, expect);
    expect_stats(c, before.hits, before.misses + 1,
                 before.entries + (expect == LESSONS_TOKEN_OK));
}

static void test_policy_other_key(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t a = hs_policy();
    lessons_token_policy_t b = policy(LESSONS_ALG_HS256, other_secret,
                                      OTHER_LEN);
    lessons_token_policy_t ea = pem_policy(LESSONS_ALG_ES256, ec_pub);
    lessons_token_policy_t eb = pem_policy(LESSONS_ALG_ES256, ec2_pub);

    (void)state;
    cross(c, &a, &b, hs_token(STD_CLAIMS), NOW, LESSONS_TOKEN_BAD_SIGNATURE);
    cross(c, &ea, &eb, lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv),
                                STD_CLAIMS), NOW,
          LESSONS_TOKEN_BAD_SIGNATURE);
}

static void test_policy_other_issuer(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t a = hs_policy(), b = a, none = a;
    const char *t = hs_token("{\"sub\":\"alice\",\"exp\":1700003600,"
                             "\"iss\":\"" ISSUER "\"}");

    (void)state;
    a.issuer = ISSUER;
    b.issuer = "https://other.example.org";
    cross(c, &a, &b, t, NOW, LESSONS_TOKEN_BAD_ISSUER);
    /* no issuer required: it verifies, as its own entry */
    none.issuer = NULL;
    cross(c, &a, &none, t, NOW, LESSONS_TOKEN_OK);
}

static void test_policy_other_audience(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t a = hs_policy(), b = a;
    const char *t = hs_token("{\"sub\":\"alice\",\"exp\":1700003600,"
                             "\"aud\":\"" AUDIENCE "\"}");

    (void)state;
    a.audience = AUDIENCE;
    b.audience = "admin-api";
    cross(c, &a, &b, t, NOW, LESSONS_TOKEN_BAD_AUDIENCE);
}

static void test_policy_other_alg(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t a = hs_policy(), b = a;
    lessons_token_policy_t rs = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    lessons_token_policy_t rs384 = pem_policy(LESSONS_ALG_RS384, rsa_pub);

    (void)state;
    b.alg = LESSONS_ALG_HS384;              /* same secret, another alg */
    cross(c, &a, &b, hs_token(STD_CLAIMS), NOW, LESSONS_TOKEN_BAD_ALG);
    cross(c, &rs, &rs384, lj_token(LESSONS_ALG_RS256, rsa_priv,
                                   strlen(rsa_priv), STD_CLAIMS), NOW,
          LESSONS_TOKEN_BAD_ALG);
}

static void test_policy_other_leeway(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t a = hs_policy(), b = a;

    (void)state;
    a.leeway = 300;
    b.leeway = 0;
    cross(c, &a, &b, hs_token(STD_CLAIMS), EXP + 100, LESSONS_TOKEN_EXPIRED);
}

/* Same policy content, other structs and key copies: one entry. */
static void test_policy_same_content_hits(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t a = hs_policy(), b = hs_policy();
    const char *t;

    (void)state;
    assert_ptr_not_equal(a.key, b.key);
    a.issuer = apr_pstrdup(pool, ISSUER);
    b.issuer = apr_pstrdup(pool, ISSUER);
    t = hs_token("{\"sub\":\"alice\",\"exp\":1700003600,"
                 "\"iss\":\"" ISSUER "\"}");
    cv(&a, c, t, LESSONS_TOKEN_OK);
    cv(&b, c, t, LESSONS_TOKEN_OK);
    expect_stats(c, 1, 1, 1);
}

static void test_fingerprint(void **state)
{
    lessons_token_policy_t base = hs_policy(), q;
    unsigned char f0[LESSONS_TOKEN_FP_LEN], f[LESSONS_TOKEN_FP_LEN];
    unsigned char g[LESSONS_TOKEN_FP_LEN];
    static const unsigned char longer[] =
        "k3y-for-unit-tests-only-0123456789abcdefghijklmnX";

    (void)state;
    assert_int_equal(lessons_token_policy_fingerprint(&base, f0), 0);
    q = hs_policy();                    /* equal content, other memory */
    assert_int_equal(lessons_token_policy_fingerprint(&q, f), 0);
    assert_memory_equal(f0, f, sizeof(f));

#define DIFFERS(change) do { \
        q = base; change; \
        assert_int_equal(lessons_token_policy_fingerprint(&q, f), 0); \
        assert_memory_not_equal(f0, f, sizeof(f)); \
    } while (0)
    DIFFERS(q.alg = LESSONS_ALG_HS512);
    DIFFERS(q.key = make_key(other_secret, OTHER_LEN));
    DIFFERS(q.key = make_key(longer, sizeof(longer) - 1));
    DIFFERS(q.issuer = ISSUER);
    DIFFERS(q.issuer = "");
    DIFFERS(q.audience = AUDIENCE);
    DIFFERS(q.audience = "");
    DIFFERS(q.leeway = 1);
    DIFFERS(q.leeway = -1);
#undef DIFFERS

    /* fields cannot slide into each other */
    q = base;
    q.issuer = "ab";
    q.audience = "c";
    assert_int_equal(lessons_token_policy_fingerprint(&q, f), 0);
    q.issuer = "a";
    q.audience = "bc";
    assert_int_equal(lessons_token_policy_fingerprint(&q, g), 0);
    assert_memory_not_equal(f, g, sizeof(f));
    /* ... not even with the bytes a presence mark would be */
    q.issuer = "a";
    q.audience = "\001b";
    assert_int_equal(lessons_token_policy_fingerprint(&q, f), 0);
    q.issuer = "a\001";
    q.audience = "b";
    assert_int_equal(lessons_token_policy_fingerprint(&q, g), 0);
    assert_memory_not_equal(f, g, sizeof(f));
    q.issuer = "x";
    q.audience = NULL;
    assert_int_equal(lessons_token_policy_fingerprint(&q, f), 0);
    q.issuer = NULL;
    q.audience = "x";
    assert_int_equal(lessons_token_policy_fingerprint(&q, g), 0);
    assert_memory_not_equal(f, g, sizeof(f));

    q = base;
    q.key = NULL;
    assert_int_equal(lessons_token_policy_fingerprint(&q, f), -1);
    assert_int_equal(lessons_token_policy_fingerprint(NULL, f), -1);
    assert_int_equal(lessons_token_policy_fingerprint(&base, NULL), -1);
}

/* ------------------------------------------------------- what is stored */

static void test_tampered_is_not_a_hit(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    lessons_token_policy_t rs = pem_policy(LESSONS_ALG_RS256, rsa_pub);
    const char *t = hs_token(STD_CLAIMS);
    const char *trs = lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv),
                               STD_CLAIMS);

    (void)state;
    cv(&p, c, t, LESSONS_TOKEN_OK);
    cv(&rs, c, trs, LESSONS_TOKEN_OK);
    expect_stats(c, 0, 2, 2);
    cv(&p, c, tamper_sig(t), LESSONS_TOKEN_BAD_SIGNATURE);
    cv(&rs, c, tamper_sig(trs), LESSONS_TOKEN_BAD_SIGNATURE);
    expect_stats(c, 0, 4, 2);
    /* the genuine ones still hit */
    cv(&p, c, t, LESSONS_TOKEN_OK);
    cv(&rs, c, trs, LESSONS_TOKEN_OK);
    expect_stats(c, 2, 4, 2);
}

static void test_failures_never_stored(void **state)
{
    lessons_tokencache_t *c = new_cache(100);
    lessons_token_policy_t p = hs_policy();
    const char *bad[9];
    size_t i, round;

    (void)state;
    p.audience = AUDIENCE;
    bad[0] = hs_token_key("{\"sub\":\"x\",\"exp\":1700003600,\"aud\":\""
                          AUDIENCE "\"}", other_secret, OTHER_LEN);
    bad[1] = hs_token("{\"sub\":\"x\",\"exp\":1699999999,\"aud\":\""
                      AUDIENCE "\"}");                          /* expired */
    bad[2] = hs_token("{\"sub\":\"x\",\"exp\":1700003600,\"nbf\":1700000500,"
                      "\"aud\":\"" AUDIENCE "\"}");             /* nbf */
    bad[3] = hs_token("{\"sub\":\"x\",\"exp\":1700003600,\"aud\":\"other\"}");
    bad[4] = hs_token("{\"sub\":\"x\",\"aud\":\"" AUDIENCE "\"}"); /* no exp */
    bad[5] = hs_token("{\"sub\":7,\"exp\":1700003600,\"aud\":\""
                      AUDIENCE "\"}");
    bad[6] = apr_pstrcat(pool, b64s("{\"alg\":\"none\"}"), ".",
                         b64s(STD_CLAIMS), ".x", NULL);
    bad[7] = "not.a.token!";
    bad[8] = "";
    for (round = 0; round < 2; round++) {
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            const char *subject = SENTINEL;

            assert_int_not_equal(lessons_token_verify_cached(pool, &p, c,
                                                             bad[i], NOW,
                                                             &subject),
                                 LESSONS_TOKEN_OK);
            assert_null(subject);
        }
    }
    assert_int_equal(stats(c).entries, 0);
    assert_int_equal(stats(c).hits, 0);
}

/* Bad tokens never evict good ones: only OK results take a place. */
static void test_flood_of_bad_tokens_evicts_nothing(void **state)
{
    lessons_tokencache_t *c = new_cache(4);
    lessons_token_policy_t p = hs_policy();
    const char *good[4];
    int i;

    (void)state;
    for (i = 0; i < 4; i++) {
        good[i] = hs_token(apr_psprintf(pool, "{\"sub\":\"u%d\","
                                        "\"exp\":1700003600}", i));
        cv(&p, c, good[i], LESSONS_TOKEN_OK);
    }
    for (i = 0; i < 500; i++) {
        const char *forged = hs_token_key(
            apr_psprintf(pool, "{\"sub\":\"u%d\",\"exp\":1700003600}", i),
            other_secret, OTHER_LEN);

        const char *expired = hs_token(
            apr_psprintf(pool, "{\"sub\":\"u%d\",\"exp\":%d}", i,
                         1699990000 + i));

        cv(&p, c, forged, LESSONS_TOKEN_BAD_SIGNATURE);
        cv(&p, c, expired, LESSONS_TOKEN_EXPIRED);
    }
    assert_int_equal(stats(c).evictions, 0);
    for (i = 0; i < 4; i++) {
        assert_string_equal(cv(&p, c, good[i], LESSONS_TOKEN_OK),
                            apr_psprintf(pool, "u%d", i));
    }
}

static void test_bound_holds(void **state)
{
    lessons_tokencache_t *c = new_cache(8);
    lessons_token_policy_t p = hs_policy();
    const char *t[50];
    int i;

    (void)state;
    for (i = 0; i < 50; i++) {
        t[i] = hs_token(apr_psprintf(pool, "{\"sub\":\"user-%d\","
                                     "\"exp\":1700003600}", i));
        cv(&p, c, t[i], LESSONS_TOKEN_OK);
        assert_true(stats(c).entries <= 8);
    }
    assert_int_equal(stats(c).entries, 8);
    assert_int_equal(stats(c).evictions, 42);
    /* the newest 8 are there, the first is not */
    for (i = 42; i < 50; i++) {
        assert_string_equal(cv(&p, c, t[i], LESSONS_TOKEN_OK),
                            apr_psprintf(pool, "user-%d", i));
    }
    expect_stats(c, 8, 50, 8);
    cv(&p, c, t[0], LESSONS_TOKEN_OK);
    expect_stats(c, 8, 51, 8);
}

/* Tokens of one length crowded into few buckets: each lookup finds its
 * own entry, by the token's every byte.
 */
static void test_same_length_tokens_kept_apart(void **state)
{
    lessons_tokencache_t *c = new_cache(16);
    lessons_token_policy_t p = hs_policy();
    const char *t[16];
    int i, round;

    (void)state;
    for (i = 0; i < 16; i++) {
        t[i] = hs_token(apr_psprintf(pool, "{\"sub\":\"u-%02d\","
                                     "\"exp\":1700003600}", i));
        assert_int_equal(strlen(t[i]), strlen(t[0]));
        cv(&p, c, t[i], LESSONS_TOKEN_OK);
    }
    for (round = 0; round < 2; round++) {
        for (i = 0; i < 16; i++) {
            assert_string_equal(cv(&p, c, t[i], LESSONS_TOKEN_OK),
                                apr_psprintf(pool, "u-%02d", i));
        }
    }
    expect_stats(c, 32, 16, 16);
}

/* A cache of one entry has one bucket: every lookup is compared with
 * that entry, and a token differing in its first, middle or last
 * character (same length) is not it.
 */
static void test_one_bucket_compares_every_byte(void **state)
{
    lessons_tokencache_t *c = new_cache(1);
    lessons_token_policy_t p = hs_policy();
    const char *t = hs_token(STD_CLAIMS);
    apr_size_t len = strlen(t), at[3];
    int i;

    (void)state;
    at[0] = 0;
    at[1] = len / 2;
    at[2] = len - 1;
    cv(&p, c, t, LESSONS_TOKEN_OK);
    for (i = 0; i < 3; i++) {
        char *u = apr_pstrdup(pool, t);
        const char *subject = SENTINEL;

        /* 'A' and 'g' differ in the top bits, which always count */
        u[at[i]] = u[at[i]] == 'A' ? 'g' : 'A';
        assert_int_not_equal(lessons_token_verify_cached(pool, &p, c, u, NOW,
                                                         &subject),
                             LESSONS_TOKEN_OK);
        assert_null(subject);
    }
    expect_stats(c, 0, 4, 1);
    cv(&p, c, t, LESSONS_TOKEN_OK);
    expect_stats(c, 1, 4, 1);
}

static void test_lru_keeps_used_entries(void **state)
{
    lessons_tokencache_t *c = new_cache(3);
    lessons_token_policy_t p = hs_policy();
    const char *a = hs_token("{\"sub\":\"a\",\"exp\":1700003600}");
    const char *b = hs_token("{\"sub\":\"b\",\"exp\":1700003600}");
    const char *d = hs_token("{\"sub\":\"d\",\"exp\":1700003600}");
    const char *e = hs_token("{\"sub\":\"e\",\"exp\":1700003600}");

    (void)state;
    cv(&p, c, a, LESSONS_TOKEN_OK);
    cv(&p, c, b, LESSONS_TOKEN_OK);
    cv(&p, c, d, LESSONS_TOKEN_OK);
    cv(&p, c, a, LESSONS_TOKEN_OK);     /* a is now the newest */
    cv(&p, c, e, LESSONS_TOKEN_OK);     /* b goes */
    expect_stats(c, 1, 4, 3);
    cv(&p, c, a, LESSONS_TOKEN_OK);
    expect_stats(c, 2, 4, 3);
    cv(&p, c, b, LESSONS_TOKEN_OK);     /* a miss: it was evicted */
    expect_stats(c, 2, 5, 3);
}

/* A cache of its own pool: destroying the pool frees every entry
 * (valgrind's leak check is the judge).
 */
static void test_pool_cleanup_frees(void **state)
{
    apr_pool_t *child = NULL;
    lessons_tokencache_t *c;
    lessons_token_policy_t p = hs_policy();
    int i;

    (void)state;
    assert_int_equal(apr_pool_create(&child, pool), APR_SUCCESS);
    c = lessons_tokencache_make(child, 16);
    assert_non_null(c);
    for (i = 0; i < 20; i++) {
        cv(&p, c, hs_token(apr_psprintf(pool, "{\"sub\":\"%d\","
                                        "\"exp\":1700003600}", i)),
           LESSONS_TOKEN_OK);
    }
    assert_int_equal(stats(c).entries, 16);
    apr_pool_destroy(child);
}

/* -------------------------------------------------------------- claims */

#define RICH_CLAIMS "{\"sub\":\"alice\",\"exp\":1700003600," \
    "\"realm_access\":{\"roles\":[\"admin\",\"user\"]},\"n\":42}"

/* verify_claims at NOW, expecting OK and claims; returns them. */
static json_t *vc(const lessons_token_policy_t *p, lessons_tokencache_t *c,
                  apr_pool_t *rp, const char *token)
{
    const char *subject = SENTINEL;
    json_t *claims = NULL;

    assert_int_equal(lessons_token_verify_claims(rp, p, c, token, NOW,
                                                 &subject, &claims),
                     LESSONS_TOKEN_OK);
    assert_non_null(claims);
    assert_true(json_is_object(claims));
    return claims;
}

/* A miss decodes the claims once; every hit hands out that very object
 * (shared, read-only: nothing is decoded again), with a reference of
 * its own that outlives the entry.
 */
static void test_claims_on_miss_and_hit(void **state)
{
    lessons_tokencache_t *c = new_cache(1);
    lessons_token_policy_t p = hs_policy();
    const char *token = hs_token(RICH_CLAIMS);
    const char *other = hs_token("{\"sub\":\"bob\",\"exp\":1700003600}");
    apr_pool_t *rp;
    json_t *miss, *hit, *want;

    (void)state;
    want = json_loads(RICH_CLAIMS, 0, NULL);
    assert_non_null(want);
    miss = vc(&p, c, pool, token);
    expect_stats(c, 0, 1, 1);
    hit = vc(&p, c, pool, token);
    expect_stats(c, 1, 1, 1);
    assert_ptr_equal(miss, hit);
    assert_true(json_equal(hit, want));
    assert_string_equal(json_string_value(json_object_get(hit, "sub")),
                        "alice");
    /* A request's pool going leaves the entry's object whole... */
    assert_int_equal(apr_pool_create(&rp, pool), APR_SUCCESS);
    hit = vc(&p, c, rp, token);
    apr_pool_destroy(rp);
    assert_true(json_equal(vc(&p, c, pool, token), want));
    /* ...and the entry going (evicted by another token) leaves a
     * request's reference whole.
     */
    assert_int_equal(apr_pool_create(&rp, pool), APR_SUCCESS);
    hit = vc(&p, c, rp, token);
    (void)vc(&p, c, pool, other);
    assert_true(json_equal(hit, want));
    apr_pool_destroy(rp);
    json_decref(want);
}

/* Plain verify_cached on a hit, then claims from the same entry; and
 * claims NULL and subject NULL are both allowed.
 */
static void test_claims_optional(void **state)
{
    lessons_tokencache_t *c = new_cache(8);
    lessons_token_policy_t p = hs_policy();
    const char *token = hs_token(RICH_CLAIMS);
    const char *subject = SENTINEL;
    json_t *claims;

    (void)state;
    assert_string_equal(cv(&p, c, token, LESSONS_TOKEN_OK), "alice");
    assert_string_equal(cv(&p, c, token, LESSONS_TOKEN_OK), "alice");
    assert_int_equal(lessons_token_verify_claims(pool, &p, c, token, NOW,
                                                 &subject, NULL),
                     LESSONS_TOKEN_OK);
    assert_string_equal(subject, "alice");
    claims = NULL;
    assert_int_equal(lessons_token_verify_claims(pool, &p, c, token, NOW,
                                                 NULL, &claims),
                     LESSONS_TOKEN_OK);
    assert_non_null(claims);
    assert_int_equal(json_integer_value(json_object_get(claims, "n")), 42);
    expect_stats(c, 3, 1, 1);
}

/* Refused, from the cache or not: claims stay NULL. */
static void test_claims_null_when_refused(void **state)
{
    lessons_tokencache_t *c = new_cache(8);
    lessons_token_policy_t p = hs_policy();
    const char *token = hs_token(RICH_CLAIMS);
    const char *subject = SENTINEL;
    json_t *claims = (json_t *)SENTINEL;

    (void)state;
    vc(&p, c, pool, token);
    /* a hit that has expired */
    assert_int_equal(lessons_token_verify_claims(pool, &p, c, token,
                                                 EXP + 10, &subject,
                                                 &claims),
                     LESSONS_TOKEN_EXPIRED);
    assert_null(claims);
    assert_null(subject);
    /* a miss with a bad signature */
    claims = (json_t *)SENTINEL;
    assert_int_equal(lessons_token_verify_claims(pool, &p, c,
                                                 tamper_sig(token), NOW,
                                                 &subject, &claims),
                     LESSONS_TOKEN_BAD_SIGNATURE);
    assert_null(claims);
    /* no cache at all */
    claims = (json_t *)SENTINEL;
    assert_int_equal(lessons_token_verify_claims(pool, &p, NULL, "a.b",
                                                 NOW, &subject, &claims),
                     LESSONS_TOKEN_MALFORMED);
    assert_null(claims);
}

/* The claims (and the payload under them) are copies in the caller's
 * pool: the entry going, by eviction, takes nothing the caller holds.
 * valgrind sees a read of a freed entry here.
 */
static void test_claims_survive_eviction(void **state)
{
    lessons_tokencache_t *c = new_cache(1);
    lessons_token_policy_t p = hs_policy();
    const char *a = hs_token(RICH_CLAIMS);
    const char *b = hs_token("{\"sub\":\"bob\",\"exp\":1700003600}");
    apr_pool_t *rp = NULL;
    json_t *hit, *want;

    (void)state;
    assert_int_equal(apr_pool_create(&rp, pool), APR_SUCCESS);
    want = json_loads(RICH_CLAIMS, 0, NULL);
    assert_non_null(want);
    vc(&p, c, rp, a);
    hit = vc(&p, c, rp, a);
    expect_stats(c, 1, 1, 1);
    vc(&p, c, rp, b);                   /* evicts a's entry */
    assert_int_equal(stats(c).evictions, 1);
    assert_true(json_equal(hit, want));
    apr_pool_destroy(rp);               /* and releases every object */
    json_decref(want);
}

/* The cache itself: the payload is copied in on put (from bytes that are
 * not NUL-terminated) and out on get, NUL-terminated, into p.
 */
static void test_cache_payload_copies(void **state)
{
    lessons_tokencache_t *c = new_cache(1);
    unsigned char fp[LESSONS_TOKENCACHE_FP_LEN];
    lessons_tokencache_claims_t in, out;
    char *text = apr_pstrdup(pool, "{\"sub\":\"x\"}TRAILING");
    apr_size_t n = strlen("{\"sub\":\"x\"}");

    (void)state;
    memset(fp, 7, sizeof(fp));
    memset(&in, 0, sizeof(in));
    in.subject = "x";
    in.exp = 1700003600;
    in.payload = text;
    in.payload_len = n;
    lessons_tokencache_put(c, fp, "tok-a", 5, &in, 1700003600);
    memset(text, 'Z', strlen(text));    /* the entry holds its own copy */
    memset(&out, 0, sizeof(out));
    assert_int_equal(lessons_tokencache_get(c, pool, fp, "tok-a", 5, NOW,
                                            &out), 1);
    assert_int_equal(out.payload_len, n);
    assert_string_equal(out.payload, "{\"sub\":\"x\"}");
    assert_string_equal(out.subject, "x");
    /* evict it: the copy from get stays */
    in.payload = "{}";
    in.payload_len = 2;
    lessons_tokencache_put(c, fp, "tok-b", 5, &in, 1700003600);
    assert_int_equal(stats(c).evictions, 1);
    assert_string_equal(out.payload, "{\"sub\":\"x\"}");
    /* no payload: NULL and 0 back */
    in.payload = NULL;
    in.payload_len = 99;
    lessons_tokencache_put(c, fp, "tok-c", 5, &in, 1700003600);
    memset(&out, 0, sizeof(out));
    out.payload = SENTINEL;
    assert_int_equal(lessons_tokencache_get(c, pool, fp, "tok-c", 5, NOW,
                                            &out), 1);
    assert_null(out.payload);
    assert_int_equal(out.payload_len, 0);
}

/* LESSONS_TOKENCACHE_PAYLOAD_MAX bytes are kept, one more is not. */
static void test_cache_payload_bound(void **state)
{
    lessons_tokencache_t *c = new_cache(4);
    unsigned char fp[LESSONS_TOKENCACHE_FP_LEN];
    lessons_tokencache_claims_t in, out;
    char *big = apr_palloc(pool, LESSONS_TOKENCACHE_PAYLOAD_MAX + 1);

    (void)state;
    memset(big, 'p', LESSONS_TOKENCACHE_PAYLOAD_MAX + 1);
    memset(fp, 3, sizeof(fp));
    memset(&in, 0, sizeof(in));
    in.payload = big;
    in.payload_len = LESSONS_TOKENCACHE_PAYLOAD_MAX;
    lessons_tokencache_put(c, fp, "fits", 4, &in, 1700003600);
    in.payload_len = LESSONS_TOKENCACHE_PAYLOAD_MAX + 1;
    lessons_tokencache_put(c, fp, "over", 4, &in, 1700003600);
    assert_int_equal(stats(c).entries, 1);
    memset(&out, 0, sizeof(out));
    assert_int_equal(lessons_tokencache_get(c, pool, fp, "fits", 4, NOW,
                                            &out), 1);
    assert_int_equal(out.payload_len, LESSONS_TOKENCACHE_PAYLOAD_MAX);
    assert_int_equal(strlen(out.payload), LESSONS_TOKENCACHE_PAYLOAD_MAX);
    assert_int_equal(lessons_tokencache_get(c, pool, fp, "over", 4, NOW,
                                            &out), 0);
}

/* A token with a payload over the bound verifies, claims and all, but
 * every time in full: it is never stored.
 */
static void test_big_payload_verified_not_cached(void **state)
{
    lessons_tokencache_t *c = new_cache(8);
    lessons_token_policy_t p = hs_policy();
    char *pad = apr_palloc(pool, 5001);
    const char *token;
    json_t *claims;
    int i;

    (void)state;
    memset(pad, 'x', 5000);
    pad[5000] = '\0';
    token = hs_token(apr_psprintf(pool, "{\"sub\":\"big\",\"exp\":1700003600,"
                                  "\"pad\":\"%s\"}", pad));
    assert_true(strlen(token) <= LESSONS_TOKEN_MAX_LEN);
    for (i = 0; i < 3; i++) {
        claims = vc(&p, c, pool, token);
        assert_string_equal(json_string_value(json_object_get(claims, "pad")),
                            pad);
        assert_string_equal(cv(&p, c, token, LESSONS_TOKEN_OK), "big");
    }
    expect_stats(c, 0, 6, 0);
}

/* ------------------------------------------------------------- threads */

#define NTHREADS   4
#define NVERIFIES  3000
#define NTOKENS    6

typedef struct {
    lessons_tokencache_t *cache;
    const lessons_token_policy_t *policy[NTOKENS];
    const char *token[NTOKENS];
    const char *subject[NTOKENS];       /* NULL: must be refused */
    lessons_token_e expect[NTOKENS];
} shared_t;

typedef struct {
    const shared_t *shared;
    apr_pool_t *pool;                   /* the worker's requests */
    apr_pool_t *tpool;                  /* parent of the thread's own */
    int seed;
    int wrong;
} worker_t;

static void *APR_THREAD_FUNC worker(apr_thread_t *thd, void *data)
{
    worker_t *w = data;
    const shared_t *s = w->shared;
    int i;

    (void)thd;
    for (i = 0; i < NVERIFIES; i++) {
        int k = (i * 7 + w->seed) % NTOKENS;
        const char *subject = SENTINEL;
        lessons_token_e r;

        r = lessons_token_verify_cached(w->pool, s->policy[k], s->cache,
                                        s->token[k], NOW, &subject);
        if (r != s->expect[k]
            || (s->subject[k] ? !subject || strcmp(subject, s->subject[k])
                              : subject != NULL)) {
            w->wrong++;
        }
        if (i % 256 == 255) {
            apr_pool_clear(w->pool);
        }
    }
    return NULL;
}

static void run_threads(apr_size_t max_entries)
{
    shared_t s;
    worker_t w[NTHREADS];
    apr_thread_t *thd[NTHREADS];
    apr_status_t rv;
    lessons_token_policy_t hs = hs_policy();
    lessons_token_policy_t es = pem_policy(LESSONS_ALG_ES256, ec_pub);
    lessons_tokencache_stats_t st;
    int i;

    memset(&s, 0, sizeof(s));
    s.cache = new_cache(max_entries);
    for (i = 0; i < 4; i++) {
        s.policy[i] = &hs;
        s.subject[i] = apr_psprintf(pool, "user-%d", i);
        s.token[i] = hs_token(apr_psprintf(pool, "{\"sub\":\"%s\","
                                           "\"exp\":1700003600}",
                                           s.subject[i]));
        s.expect[i] = LESSONS_TOKEN_OK;
    }
    s.policy[4] = &es;
    s.subject[4] = "ec-user";
    s.token[4] = lj_token(LESSONS_ALG_ES256, ec_priv, strlen(ec_priv),
                          "{\"sub\":\"ec-user\",\"exp\":1700003600}");
    s.expect[4] = LESSONS_TOKEN_OK;
    s.policy[5] = &hs;
    s.subject[5] = NULL;
    s.token[5] = tamper_sig(s.token[0]);
    s.expect[5] = LESSONS_TOKEN_BAD_SIGNATURE;

    for (i = 0; i < NTHREADS; i++) {
        w[i].shared = &s;
        w[i].seed = i;
        w[i].wrong = 0;
        assert_int_equal(apr_pool_create(&w[i].pool, NULL), APR_SUCCESS);
        /* a thread's pool goes at its exit: never under a parent that
         * another thread changes at the same time
         */
        assert_int_equal(apr_pool_create(&w[i].tpool, NULL), APR_SUCCESS);
    }
    for (i = 0; i < NTHREADS; i++) {
        assert_int_equal(apr_thread_create(&thd[i], NULL, worker, &w[i],
                                           w[i].tpool), APR_SUCCESS);
    }
    for (i = 0; i < NTHREADS; i++) {
        assert_int_equal(apr_thread_join(&rv, thd[i]), APR_SUCCESS);
    }
    for (i = 0; i < NTHREADS; i++) {
        apr_pool_destroy(w[i].pool);
        apr_pool_destroy(w[i].tpool);
        assert_int_equal(w[i].wrong, 0);
    }
    st = stats(s.cache);
    assert_int_equal(st.hits + st.misses, NTHREADS * NVERIFIES);
    assert_true(st.entries <= max_entries);
    if (max_entries >= 5) {
        /* the forged token misses every time (a sixth of the calls);
         * each good one at least once, at most once per thread (threads
         * may verify one at the same time)
         */
        assert_int_equal(st.entries, 5);
        assert_true(st.hits > 0);
        assert_true(st.misses >= NTHREADS * NVERIFIES / NTOKENS + 5);
        assert_true(st.misses <= NTHREADS * NVERIFIES / NTOKENS
                                 + 5 * NTHREADS);
        assert_int_equal(st.evictions, 0);
    }
}

static void test_threads_shared_cache(void **state)
{
    (void)state;
    run_threads(100);
}

/* A cache smaller than the working set: evictions under contention. */
static void test_threads_tiny_cache(void **state)
{
    (void)state;
    run_threads(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make),
        cmocka_unit_test(test_null_cache_is_plain_verify),
        cmocka_unit_test(test_second_verify_hits),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_hits_rs256_es256),
        cmocka_unit_test(test_hit_without_sub),
        cmocka_unit_test(test_subject_is_a_copy),
        cmocka_unit_test(test_expired_refused_from_cache),
        cmocka_unit_test(test_expired_with_leeway),
        cmocka_unit_test(test_nbf_on_hit),
        cmocka_unit_test(test_hit_equals_full_verify_over_time),
        cmocka_unit_test(test_iat_on_hit),
        cmocka_unit_test(test_policy_other_key),
        cmocka_unit_test(test_policy_other_issuer),
        cmocka_unit_test(test_policy_other_audience),
        cmocka_unit_test(test_policy_other_alg),
        cmocka_unit_test(test_policy_other_leeway),
        cmocka_unit_test(test_policy_same_content_hits),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_tampered_is_not_a_hit),
        cmocka_unit_test(test_failures_never_stored),
        cmocka_unit_test(test_flood_of_bad_tokens_evicts_nothing),
        cmocka_unit_test(test_bound_holds),
        cmocka_unit_test(test_same_length_tokens_kept_apart),
        cmocka_unit_test(test_one_bucket_compares_every_byte),
        cmocka_unit_test(test_lru_keeps_used_entries),
        cmocka_unit_test(test_pool_cleanup_frees),
        cmocka_unit_test(test_claims_on_miss_and_hit),
        cmocka_unit_test(test_claims_optional),
        cmocka_unit_test(test_claims_null_when_refused),
        cmocka_unit_test(test_claims_survive_eviction),
        cmocka_unit_test(test_cache_payload_copies),
        cmocka_unit_test(test_cache_payload_bound),
        cmocka_unit_test(test_big_payload_verified_not_cached),
        cmocka_unit_test(test_threads_shared_cache),
        cmocka_unit_test(test_threads_tiny_cache),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
