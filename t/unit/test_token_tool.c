/* Licensed under the Apache License, Version 2.0.
 *
 * test_token_tool.c: lessons-token's parts that need no network
 * (support/lessons_token_tool.c): the claims it puts in a token, the keys
 * it signs with or refuses and why, its tokens verified by the module's
 * own verifier (lessons_token_verify, with the key set the module would
 * make of the public half), and the reason it prints for a refusal.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "apr_strings.h"
#include "apr_tables.h"

#include "keys/lessons_keyset.h"
#include "auth/lessons_token.h"
#include "lessons_token_tool.h"

#include "unit_pool.h"
#include "unit_jwt.h"

#define NOW ((apr_int64_t)1800000000)

/* Key files (paths) and the public PEM the server would have. */
static const char *secret_file, *secret_nl_file, *short_file;
static const char *rsa_file, *rsa_pub, *rsa_pub_file, *rsa1024_file;
static const char *p256_file, *p256_pub, *p384_file, *p384_pub;
static const char *encrypted_file, *empty_file, *json_file;
static char dir[] = "/tmp/lessons-token-tool-XXXXXX";

static const char *write_file(const char *name, const char *text,
                              apr_size_t len)
{
    const char *path = apr_pstrcat(pool, dir, "/", name, NULL);
    FILE *f = fopen(path, "wb");

    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0)
        return NULL;
    return path;
}

static const char *write_text(const char *name, const char *text)
{
    return write_file(name, text, strlen(text));
}

static const char *encrypted_pem(EVP_PKEY *k)
{
    BIO *bio = BIO_new(BIO_s_mem());
    const char *s = NULL;

    if (bio && PEM_write_bio_PrivateKey(bio, k, EVP_aes_128_cbc(),
                                        (unsigned char *)"pass", 4, NULL,
                                        NULL) == 1)
        s = bio_text(bio);
    BIO_free(bio);
    return s;
}

static int group_setup(void **state)
{
    const char *priv = NULL;
    EVP_PKEY *k;

    (void)state;
    if (unit_pool_open() != 0 || !mkdtemp(dir))
        return -1;
    secret_file = write_text("hs.key", "0123456789abcdef0123456789abcdef"
                             "0123456789abcdef0123456789abcdef");
    secret_nl_file = write_text("hs-nl.key", "0123456789abcdef0123456789"
                                "abcdef0123456789abcdef0123456789abcdef"
                                "\r\n");
    short_file = write_text("short.key", "0123456789abcdef0123456789abcde");
    empty_file = write_text("empty.key", "");
    json_file = write_text("jwk.key", "{\"kty\":\"oct\",\"k\":\"AAAA\"}");

    if (make_keypair(EVP_RSA_gen(2048), &rsa_pub, &priv) != 0)
        return -1;
    rsa_file = write_text("rsa.key", priv);
    rsa_pub_file = write_text("rsa.pub", rsa_pub);
    if (!(k = EVP_RSA_gen(2048)) || !(priv = encrypted_pem(k)))
        return -1;
    EVP_PKEY_free(k);
    encrypted_file = write_text("encrypted.key", priv);
    if (make_keypair(EVP_RSA_gen(1024), NULL, &priv) != 0)
        return -1;
    rsa1024_file = write_text("rsa1024.key", priv);
    if (make_keypair(EVP_EC_gen("P-256"), &p256_pub, &priv) != 0)
        return -1;
    p256_file = write_text("p256.key", priv);
    if (make_keypair(EVP_EC_gen("P-384"), &p384_pub, &priv) != 0)
        return -1;
    p384_file = write_text("p384.key", priv);
    return secret_file && secret_nl_file && short_file && empty_file
           && json_file && rsa_file && rsa_pub_file && encrypted_file
           && rsa1024_file && p256_file && p384_file ? 0 : -1;
}

static int group_cleanup(void **state)
{
    const char *names[] = { "hs.key", "hs-nl.key", "short.key", "empty.key",
                            "jwk.key", "rsa.key", "rsa.pub", "encrypted.key",
                            "rsa1024.key", "p256.key", "p384.key", NULL };
    int i;

    for (i = 0; names[i]; i++)
        unlink(apr_pstrcat(pool, dir, "/", names[i], NULL));
    rmdir(dir);
    return group_teardown(state);
}

/* ---------------------------------------------------------------- claims */

static lessons_tool_claims_t claims_of(const char *sub, apr_int64_t ttl)
{
    lessons_tool_claims_t c;

    memset(&c, 0, sizeof(c));
    c.sub = sub;
    c.ttl = ttl;
    return c;
}

static apr_array_header_t *args(const char *a, const char *b,
                                const char *c)
{
    apr_array_header_t *list = apr_array_make(pool, 3, sizeof(const char *));

    if (a)
        APR_ARRAY_PUSH(list, const char *) = a;
    if (b)
        APR_ARRAY_PUSH(list, const char *) = b;
    if (c)
        APR_ARRAY_PUSH(list, const char *) = c;
    return list;
}

static const char *dumped(json_t *claims)
{
    char *text = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
    const char *out = apr_pstrdup(pool, text);

    free(text);
    json_decref(claims);
    return out;
}

static void test_claims_sub_iat_exp(void **state)
{
    lessons_tool_claims_t c = claims_of("alice", 600);
    const char *why = NULL;

    (void)state;
    assert_string_equal(dumped(lessons_tool_claims(pool, &c, NOW, &why)),
                        "{\"exp\":1800000600,\"iat\":1800000000,"
                        "\"sub\":\"alice\"}");
    assert_null(why);
}

static void test_claims_iss_aud_and_more(void **state)
{
    lessons_tool_claims_t c = claims_of("bob", 60);
    const char *why = NULL;

    (void)state;
    c.iss = "https://auth.example.org";
    c.aud = "lessons-api";
    c.claims = args("scope=lessons.read", "tenant=", "scope=lessons.write");
    assert_string_equal(dumped(lessons_tool_claims(pool, &c, NOW, &why)),
                        "{\"aud\":\"lessons-api\",\"exp\":1800000060,"
                        "\"iat\":1800000000,"
                        "\"iss\":\"https://auth.example.org\","
                        "\"scope\":[\"lessons.read\",\"lessons.write\"],"
                        "\"sub\":\"bob\",\"tenant\":\"\"}");
}

static void test_claims_no_sub(void **state)
{
    lessons_tool_claims_t c = claims_of(NULL, 1);
    const char *why = NULL;

    (void)state;
    assert_string_equal(dumped(lessons_tool_claims(pool, &c, NOW, &why)),
                        "{\"exp\":1800000001,\"iat\":1800000000}");
}

static void claims_refused(lessons_tool_claims_t c, const char *expect)
{
    const char *why = NULL;

    assert_null(lessons_tool_claims(pool, &c, NOW, &why));
    assert_non_null(why);
    if (!strstr(why, expect))
        print_error("expected \"%s\" in \"%s\"\n", expect, why);
    assert_non_null(strstr(why, expect));
}

static void test_claims_refused(void **state)
{
    lessons_tool_claims_t c = claims_of("x", 600);

    (void)state;
    c.ttl = 0;
    claims_refused(c, "--ttl must be 1 to");
    c.ttl = -5;
    claims_refused(c, "--ttl must be 1 to");
    c.ttl = (apr_int64_t)1 << 40;
    claims_refused(c, "--ttl must be 1 to");
    c.ttl = 600;
    c.claims = args("scope", NULL, NULL);
    claims_refused(c, "--claim scope: give NAME=VALUE");
    c.claims = args("=x", NULL, NULL);
    claims_refused(c, "--claim =x: give NAME=VALUE");
    c.claims = args("exp=1", NULL, NULL);
    claims_refused(c, "exp is set by its own option");
    c.claims = args("ok=1", "sub=root", NULL);
    claims_refused(c, "sub is set by its own option");
    c.claims = args("name=\xff", NULL, NULL);
    claims_refused(c, "not UTF-8");
}

/* ---------------------------------------------------------------- keys */

/* The policy a server with LessonsJWTKey ALG FILE has, FILE the public
 * half (or the secret), made as the module makes it.
 */
static lessons_token_policy_t server_policy(const char *key_text,
                                            apr_size_t len, lessons_alg_t alg)
{
    lessons_keyset_t *set = NULL;
    const char *msg = lessons_keyset_make(pool, (const unsigned char *)key_text,
                                          len, &set);

    if (msg)
        print_error("lessons_keyset_make: %s\n", msg);
    assert_null(msg);
    return set_policy(set, LESSONS_ALG_BIT(alg));
}

/* make's token for alg from file, verified by the module's verifier. */
static void signs_and_verifies(const char *file, lessons_alg_t want,
                               lessons_alg_t given, const char *key_text,
                               apr_size_t key_len)
{
    lessons_alg_t alg = given;
    const cjose_jwk_t *jwk = NULL;
    lessons_tool_claims_t c = claims_of("carol", 600);
    lessons_token_policy_t policy = server_policy(key_text, key_len, want);
    const char *why = NULL, *token = NULL, *msg;
    json_t *claims;

    msg = lessons_tool_signer(pool, file, &alg, &jwk);
    if (msg)
        print_error("lessons_tool_signer %s: %s\n", file, msg);
    assert_null(msg);
    assert_int_equal(alg, want);
    assert_non_null(jwk);
    claims = lessons_tool_claims(pool, &c, NOW, &why);
    assert_non_null(claims);
    assert_null(lessons_tool_sign(pool, jwk, alg, NULL, claims, &token));
    json_decref(claims);
    assert_non_null(token);
    assert_string_equal(verify_at(&policy, token, NOW + 1, LESSONS_TOKEN_OK),
                        "carol");
    /* Expired at exp, as the server counts. */
    verify_at(&policy, token, NOW + 601, LESSONS_TOKEN_EXPIRED);
}

static void test_sign_hs256_secret(void **state)
{
    static const char secret[] = "0123456789abcdef0123456789abcdef"
                                 "0123456789abcdef0123456789abcdef";

    (void)state;
    signs_and_verifies(secret_file, LESSONS_ALG_HS256, LESSONS_ALG_NONE,
                       secret, sizeof(secret) - 1);
    signs_and_verifies(secret_file, LESSONS_ALG_HS512, LESSONS_ALG_HS512,
                       secret, sizeof(secret) - 1);
}

/* The trailing CR/LF of a key file is not the secret's, as the module
 * reads the same file.
 */
static void test_sign_secret_newline_dropped(void **state)
{
    static const char secret[] = "0123456789abcdef0123456789abcdef"
                                 "0123456789abcdef0123456789abcdef";

    (void)state;
    signs_and_verifies(secret_nl_file, LESSONS_ALG_HS384, LESSONS_ALG_HS384,
                       secret, sizeof(secret) - 1);
}

static void test_sign_rsa(void **state)
{
    (void)state;
    signs_and_verifies(rsa_file, LESSONS_ALG_RS256, LESSONS_ALG_NONE,
                       rsa_pub, strlen(rsa_pub));
    signs_and_verifies(rsa_file, LESSONS_ALG_RS512, LESSONS_ALG_RS512,
                       rsa_pub, strlen(rsa_pub));
    signs_and_verifies(rsa_file, LESSONS_ALG_PS256, LESSONS_ALG_PS256,
                       rsa_pub, strlen(rsa_pub));
}

static void test_sign_ec_by_curve(void **state)
{
    (void)state;
    signs_and_verifies(p256_file, LESSONS_ALG_ES256, LESSONS_ALG_NONE,
                       p256_pub, strlen(p256_pub));
    signs_and_verifies(p384_file, LESSONS_ALG_ES384, LESSONS_ALG_NONE,
                       p384_pub, strlen(p384_pub));
    signs_and_verifies(p384_file, LESSONS_ALG_ES384, LESSONS_ALG_ES384,
                       p384_pub, strlen(p384_pub));
}

/* The header make writes: alg, typ JWT, and the kid given. */
static void test_sign_header_kid(void **state)
{
    lessons_alg_t alg = LESSONS_ALG_NONE;
    const cjose_jwk_t *jwk = NULL;
    lessons_tool_claims_t c = claims_of("dave", 60);
    const char *why = NULL, *token = NULL;
    json_t *claims = lessons_tool_claims(pool, &c, NOW, &why);
    apr_size_t n;
    const char *header;

    (void)state;
    assert_null(lessons_tool_signer(pool, secret_file, &alg, &jwk));
    assert_null(lessons_tool_sign(pool, jwk, alg, "key-1", claims, &token));
    json_decref(claims);
    n = (apr_size_t)(strchr(token, '.') - token);
    header = apr_pdecode_base64(pool, token, (apr_ssize_t)n,
                                APR_ENCODE_BASE64URL, NULL);
    assert_non_null(header);
    assert_string_equal(header, "{\"alg\":\"HS256\",\"typ\":\"JWT\","
                                "\"kid\":\"key-1\"}");
}

static void signer_refuses(const char *file, lessons_alg_t alg,
                           const char *expect)
{
    const cjose_jwk_t *jwk = NULL;
    const char *msg = lessons_tool_signer(pool, file, &alg, &jwk);

    assert_non_null(msg);
    if (!strstr(msg, expect))
        print_error("expected \"%s\" in \"%s\"\n", expect, msg);
    assert_non_null(strstr(msg, expect));
    assert_null(jwk);
}

static void test_signer_refuses(void **state)
{
    (void)state;
    signer_refuses(short_file, LESSONS_ALG_NONE,
                   "HS256 secret has 31 bytes; at least 32 are required");
    signer_refuses(rsa_file, LESSONS_ALG_HS256,
                   "rsa.key: HS256 needs a shared secret, but the file "
                   "holds PEM text");
    signer_refuses(rsa_pub_file, LESSONS_ALG_RS256,
                   "rsa.pub holds a public key: a token is signed with "
                   "the private key");
    signer_refuses(rsa_pub_file, LESSONS_ALG_NONE,
                   "rsa.pub holds a public key");
    signer_refuses(secret_file, LESSONS_ALG_RS256,
                   "hs.key holds no PEM private key");
    signer_refuses(rsa1024_file, LESSONS_ALG_RS256,
                   "RS256 key has 1024 bits; at least 2048 are required");
    signer_refuses(p256_file, LESSONS_ALG_ES384,
                   "ES384 needs an EC public key on curve secp384r1");
    signer_refuses(p256_file, LESSONS_ALG_RS256,
                   "RS256 needs an RSA public key");
    signer_refuses(rsa_file, LESSONS_ALG_ES256,
                   "ES256 needs an EC public key");
    signer_refuses(encrypted_file, LESSONS_ALG_RS256,
                   "encrypted.key is an encrypted private key");
    signer_refuses(empty_file, LESSONS_ALG_HS256, "is empty");
    signer_refuses(json_file, LESSONS_ALG_HS256, "holds JSON");
    signer_refuses("/nonexistent/lessons.key", LESSONS_ALG_HS256,
                   "cannot open key file /nonexistent/lessons.key");
    signer_refuses(dir, LESSONS_ALG_HS256, "is not a regular file");
    signer_refuses(secret_file, LESSONS_ALG_INVAL, "unsupported algorithm");
}

/* ---------------------------------------------------------------- reason */

static void test_reason_bearer_and_problem(void **state)
{
    static const char body[] = "{\"type\":\"about:blank\",\"title\":"
                               "\"Unauthorized\",\"status\":401,\"detail\":"
                               "\"The access token is invalid.\"}";

    (void)state;
    assert_string_equal(
        lessons_tool_reason(pool, "Bearer realm=\"lessons\", error="
                            "\"invalid_token\", error_description=\"The "
                            "access token is invalid.\"",
                            "application/problem+json", body,
                            sizeof(body) - 1),
        "error: invalid_token\n"
        "error_description: The access token is invalid.\n"
        "title: Unauthorized\n");
}

static void test_reason_detail_apart(void **state)
{
    static const char body[] = "{\"title\":\"Service Unavailable\","
                               "\"detail\":\"The database is not "
                               "answering.\"}";

    (void)state;
    assert_string_equal(
        lessons_tool_reason(pool, NULL, "application/problem+json; x=y",
                            body, sizeof(body) - 1),
        "title: Service Unavailable\n"
        "detail: The database is not answering.\n");
    /* Another media type: the body is not read. */
    assert_string_equal(lessons_tool_reason(pool, NULL, "text/html", body,
                                            sizeof(body) - 1), "");
    assert_string_equal(lessons_tool_reason(pool, NULL, NULL, NULL, 0), "");
    /* Not JSON, or not an object, or members of other types. */
    assert_string_equal(lessons_tool_reason(pool, NULL, "application/json",
                                            "<html>", 6), "");
    assert_string_equal(lessons_tool_reason(pool, NULL, "application/json",
                                            "[1]", 3), "");
    assert_string_equal(lessons_tool_reason(pool, NULL, "application/json",
                                            "{\"detail\":5}", 12), "");
}

/* What a server sends is printed without its control characters. */
static void test_reason_control_characters(void **state)
{
    static const char body[] = "{\"detail\":\"a\\u001b[2Jb\\nc\"}";

    (void)state;
    assert_string_equal(
        lessons_tool_reason(pool, "Bearer error=\"x\x07y\"",
                            "application/problem+json", body,
                            sizeof(body) - 1),
        "error: x?y\ndetail: a?[2Jb?c\n");
}

static void test_auth_param(void **state)
{
    const char *ch = "Bearer realm=\"error=\\\"no\\\"\", error=invalid_token,"
                     "error_description=\"say \\\"why\\\", then stop\"";

    (void)state;
    assert_string_equal(lessons_tool_auth_param(pool, ch, "error"),
                        "invalid_token");
    assert_string_equal(lessons_tool_auth_param(pool, ch,
                                                "error_description"),
                        "say \"why\", then stop");
    assert_string_equal(lessons_tool_auth_param(pool, ch, "realm"),
                        "error=\"no\"");
    assert_null(lessons_tool_auth_param(pool, ch, "scope"));
    assert_null(lessons_tool_auth_param(pool, NULL, "error"));
    assert_string_equal(lessons_tool_auth_param(pool, "DPoP algs=\"ES256\", "
                                                "ERROR = \"use_dpop_nonce\"",
                                                "error"),
                        "use_dpop_nonce");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims_sub_iat_exp),
        cmocka_unit_test(test_claims_iss_aud_and_more),
        cmocka_unit_test(test_claims_no_sub),
        cmocka_unit_test(test_claims_refused),
        cmocka_unit_test(test_sign_hs256_secret),
        cmocka_unit_test(test_sign_secret_newline_dropped),
        cmocka_unit_test(test_sign_rsa),
        cmocka_unit_test(test_sign_ec_by_curve),
        cmocka_unit_test(test_sign_header_kid),
        cmocka_unit_test(test_signer_refuses),
        cmocka_unit_test(test_reason_bearer_and_problem),
        cmocka_unit_test(test_reason_detail_apart),
        cmocka_unit_test(test_reason_control_characters),
        cmocka_unit_test(test_auth_param),
    };

    return cmocka_run_group_tests(tests, group_setup, group_cleanup);
}
