/* Licensed under the Apache License, Version 2.0.
 *
 * test_decide.c: lessons_decide, the gate's whole decision, against
 * lessons_decide.h with real keys (an HS256 secret, RSA key pairs), real
 * key sets, a real token cache, a real key source and a real replay
 * table: no token needed; a broken policy refuses (500) whatever the
 * token; each refusal its status, challenge, error, reason and log tag;
 * a good token allowed with its user, unit and exports; issuer blocks;
 * fetched keys not there yet (503); the user claim; DPoP, with proofs
 * signed by cjose, and its nonces (LessonsJWTDPoPNonce); certificate-bound
 * tokens (RFC 8705), on every request and beside DPoP; opaque tokens
 * by introspection (RFC 7662), their answers' claims on the JWT's path.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <openssl/core_names.h>

#include "auth/lessons_claims.h"
#include "auth/lessons_decide.h"
#include "base/lessons_json.h"
#include "auth/lessons_dpop.h"
#include "auth/lessons_nonce.h"
#include "keys/lessons_keyset.h"
#include "auth/lessons_replay.h"
#include "auth/lessons_token.h"
#include "auth/lessons_tokencache.h"

#include "unit_pool.h"
#include "unit_jwt.h"

#define NOW        ((apr_int64_t)1700000000)
#define ISS_A      "https://a.example.org"
#define ISS_B      "https://sso.example.org/realms/b"
#define ISS_C      "https://c.example.org"
#define AUD        "lessons-api"
#define URI        "https://api.example.org/api/lessons/7"

static const unsigned char secret[] =
    "k3y-for-decide-tests-only-0123456789abcdefghijkl";
static const unsigned char other_secret[] =
    "another-key-for-decide-tests-0123456789abcdefghi";
#define SECRET_LEN (sizeof(secret) - 1)

static const char *rsa_pub, *rsa_priv, *rsa2_priv;
static const lessons_key_t *hs_key;
static lessons_keyset_t *rs_set;

/* ------------------------------------------------------------- helpers */

static int group_setup(void **state)
{
    lessons_key_t *k = NULL;

    (void)state;
    if (unit_pool_open() != 0
        || make_keypair(EVP_RSA_gen(2048), &rsa_pub, &rsa_priv)
        || make_keypair(EVP_RSA_gen(2048), NULL, &rsa2_priv)
        || lessons_key_make(pool, secret, SECRET_LEN, &k)) {
        return -1;
    }
    hs_key = k;
    if (lessons_keyset_make(pool, (const unsigned char *)rsa_pub,
                            strlen(rsa_pub), &rs_set)) {
        return -1;
    }
    return 0;
}

/* The section's own unit: issuer A's HS256 secret as one key. */
static lessons_decide_unit_t unit_hs(void)
{
    lessons_decide_unit_t u;

    memset(&u, 0, sizeof(u));
    u.token.alg = LESSONS_ALG_HS256;
    u.token.key = hs_key;
    u.token.issuer = ISS_A;
    u.token.audience = AUD;
    u.keys_name = "/etc/lessons/jwt.key";
    u.where = "lessons.conf:10";
    u.alg_name = "HS256";
    return u;
}

/* Issuer B's RSA public key as a key set (a block, with its issuer). */
static lessons_decide_unit_t unit_rs(void)
{
    lessons_decide_unit_t u;

    memset(&u, 0, sizeof(u));
    u.issuer = ISS_B;
    u.token.keys = rs_set;
    u.token.algs = LESSONS_ALG_BIT(LESSONS_ALG_RS256);
    u.token.issuer = ISS_B;
    u.token.audience = AUD;
    u.keys_name = "/etc/lessons/b.pem";
    u.where = "lessons.conf:20";
    u.alg_name = "RS256";
    return u;
}

static lessons_decide_policy_t policy_of(const lessons_decide_unit_t *units,
                                         int n)
{
    lessons_decide_policy_t p;

    memset(&p, 0, sizeof(p));
    p.needed = "lessons.conf:10";
    p.units = units;
    p.nunits = n;
    p.where = "lessons.conf:10";
    return p;
}

static lessons_decide_facts_t facts_of(const char *authorization)
{
    lessons_decide_facts_t f;

    memset(&f, 0, sizeof(f));
    f.method = "GET";
    f.path = "/api/lessons/7";
    f.uri = URI;
    f.authorization = authorization;
    f.now = NOW;
    f.clock = apr_time_from_sec(NOW);
    return f;
}

/* Claims as JSON: issuer, subject, and more members (",..." or ""). */
static const char *claims_with(const char *iss, const char *more)
{
    return apr_psprintf(pool, "{\"iss\":\"%s\",\"aud\":\"" AUD "\","
                        "\"sub\":\"alice\",\"exp\":%" APR_INT64_T_FMT
                        ",\"iat\":%" APR_INT64_T_FMT "%s}", iss, NOW + 3600,
                        NOW - 10, more);
}

static const char *hs_token(const char *claims)
{
    return lj_token(LESSONS_ALG_HS256, secret, SECRET_LEN, claims);
}

static const char *rs_token(const char *claims)
{
    return lj_token(LESSONS_ALG_RS256, rsa_priv, strlen(rsa_priv), claims);
}

/* Signed by an RSA key no unit has. */
static const char *other_rs_token(const char *claims)
{
    return lj_token(LESSONS_ALG_RS256, rsa2_priv, strlen(rsa2_priv), claims);
}

static const char *bearer(const char *token)
{
    return apr_pstrcat(pool, "Bearer ", token, NULL);
}

static const char *verdict_name(lessons_verdict_e k)
{
    return k == LESSONS_VERDICT_NOT_NEEDED ? "NOT_NEEDED"
           : k == LESSONS_VERDICT_ALLOW ? "ALLOW"
           : k == LESSONS_VERDICT_REFUSE ? "REFUSE" : "?";
}

/* Decide, and hold what every verdict must: the return is v->kind; a
 * refusal has a description and a log line, and neither holds the
 * token the request came with.
 */
static lessons_verdict_t decide(const lessons_decide_policy_t *policy,
                                const lessons_decide_facts_t *facts)
{
    lessons_verdict_t v;
    lessons_verdict_e kind;
    const char *token = NULL;

    memset(&v, 0, sizeof(v));
    kind = lessons_decide(pool, policy, facts, &v);
    assert_int_equal(kind, v.kind);
    if (v.kind == LESSONS_VERDICT_REFUSE) {
        assert_non_null(v.description);
        assert_non_null(v.line.text);
        if (facts->authorization
            && (token = strchr(facts->authorization, ' ')) != NULL
            && strlen(token + 1) > 8) {
            assert_null(strstr(v.line.text, token + 1));
            assert_null(strstr(v.description, token + 1));
        }
    }
    return v;
}

/* The same for a request with nothing but this Authorization header. */
static lessons_verdict_t decide_auth(const lessons_decide_policy_t *policy,
                                     const char *authorization)
{
    lessons_decide_facts_t f = facts_of(authorization);

    return decide(policy, &f);
}

#define NO_ERROR  NULL

/* A refusal, as each field must be. */
static void is_refusal(const lessons_verdict_t *v, int status,
                       lessons_challenge_e challenge, const char *error,
                       int refusal, int tag)
{
    if (v->kind != LESSONS_VERDICT_REFUSE) {
        fail_msg("want a refusal %d (tag %d), got %s", status, tag,
                 verdict_name(v->kind));
    }
    if (v->status != status || v->line.tag != tag) {
        fail_msg("want %d with tag %d, got %d with tag %d: %s", status, tag,
                 v->status, v->line.tag, v->line.text);
    }
    assert_int_equal(v->challenge, challenge);
    if (error) {
        assert_non_null(v->error);
        assert_string_equal(v->error, error);
    }
    else {
        assert_null(v->error);
    }
    assert_int_equal(v->refusal, refusal);
    /* A fault (5xx) stands alone and has no challenge; a refusal is the
     * client's, logged at info.
     */
    if (status >= 500) {
        assert_true(v->line.fault);
        assert_int_equal(v->challenge, LESSONS_CHALLENGE_NONE);
    }
    else {
        assert_false(v->line.fault);
        assert_int_equal(v->line.level, LESSONS_DECIDE_INFO);
    }
}

/* A bearer token refused for what it is: RFC 6750's invalid_token. */
static void is_token_refused(const lessons_verdict_t *v, int refusal)
{
    is_refusal(v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token", refusal,
               204);
}

/* A DPoP refusal (RFC 9449): DPoP's challenge with its error. */
static void is_dpop_refused(const lessons_verdict_t *v, const char *error)
{
    is_refusal(v, 401, LESSONS_CHALLENGE_DPOP, error, LESSONS_REFUSED_DPOP,
               240);
}

/* A client over its share of the replay table: 429, no challenge,
 * counted among DPoP's refusals, at info, with Retry-After.
 */
static void is_over_share(const lessons_verdict_t *v)
{
    is_refusal(v, 429, LESSONS_CHALLENGE_NONE, NO_ERROR,
               LESSONS_REFUSED_DPOP, 760);
    assert_int_equal(v->line.level, LESSONS_DECIDE_INFO);
    assert_false(v->line.fault);
    assert_true(v->retry_after > 0);
}

/* A server fault: 500, no challenge, the misconfiguration's line. */
static void is_misconfigured(const lessons_verdict_t *v)
{
    is_refusal(v, 500, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 201);
    assert_int_equal(v->line.level, LESSONS_DECIDE_ERR);
}

static void is_allowed(const lessons_verdict_t *v, const char *token,
                       const lessons_decide_unit_t *unit, const char *user,
                       apr_int64_t now)
{
    const char *subject = NULL;

    if (v->kind != LESSONS_VERDICT_ALLOW) {
        fail_msg("want ALLOW, got %s %d (tag %d: %s)", verdict_name(v->kind),
                 v->status, v->line.tag,
                 v->line.text ? v->line.text : "");
    }
    assert_non_null(v->token);
    assert_string_equal(v->token, token);
    assert_ptr_equal(v->unit, unit);
    if (user) {
        assert_non_null(v->user);
        assert_string_equal(v->user, user);
    }
    else {
        assert_null(v->user);
    }
    /* The policy it verified under verifies it. */
    assert_int_equal(lessons_token_verify(pool, &v->policy, v->token, now,
                                          &subject), LESSONS_TOKEN_OK);
}

/* --------------------------------------------------------- not needed */

static void test_not_needed(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *const headers[] = {
        NULL, "Bearer a b", "DPoP x", "Basic YWxhZGRpbg==", "Bearer x.y.z",
        NULL
    };
    lessons_decide_facts_t f;
    lessons_verdict_t v;
    int i;

    (void)state;
    p.needed = NULL;
    for (i = 0; i < (int)(sizeof(headers) / sizeof(headers[0])); i++) {
        f = facts_of(i == 5 ? bearer(hs_token(claims_with(ISS_A, "")))
                            : headers[i]);
        v = decide(&p, &f);
        assert_int_equal(v.kind, LESSONS_VERDICT_NOT_NEEDED);
    }
    /* Whatever else the policy says: broken, no unit, DPoP. */
    p.broken = "a section merged after took the keys away";
    p.dpop = LESSONS_DPOP_REQUIRED;
    f = facts_of("Bearer a b");
    v = decide(&p, &f);
    assert_int_equal(v.kind, LESSONS_VERDICT_NOT_NEEDED);
    p.units = NULL;
    p.nunits = 0;
    v = decide(&p, &f);
    assert_int_equal(v.kind, LESSONS_VERDICT_NOT_NEEDED);
}

/* ------------------------------------------------------------ broken */

/* A policy that needs a token but cannot verify one refuses every
 * request with 500, a good token's too.
 */
static void test_broken(void **state)
{
    lessons_decide_unit_t u = unit_hs(), blocks[2];
    lessons_decide_policy_t p;
    const char *good = bearer(hs_token(claims_with(ISS_A, "")));
    lessons_decide_facts_t f = facts_of(good), none = facts_of(NULL);
    lessons_verdict_t v;

    (void)state;
    /* Premise: the same policy, unbroken, allows it. */
    p = policy_of(&u, 1);
    v = decide(&p, &f);
    is_allowed(&v, good + 7, &u, "alice", NOW);

    /* No unit at all. */
    p = policy_of(NULL, 0);
    is_misconfigured((v = decide(&p, &f), &v));
    is_misconfigured((v = decide(&p, &none), &v));
    p = policy_of(&u, 0);
    is_misconfigured((v = decide(&p, &f), &v));

    /* The merge broke the section. */
    p = policy_of(&u, 1);
    p.broken = "the section at lessons.conf:30 sets LessonsJWTAlgorithm "
               "without a key";
    v = decide(&p, &f);
    is_misconfigured(&v);
    assert_non_null(strstr(v.line.text, "without a key"));
    is_misconfigured((v = decide(&p, &none), &v));
    p.dpop = LESSONS_DPOP_OPTIONAL;
    is_misconfigured((v = decide(&p, &f), &v));

    /* Its one unit is broken: a token is refused (500) once read; a
     * request without one is refused either way.
     */
    u.broken = "the keys discovered from https://x are in effect where "
               "LessonsJWTIssuer is https://y";
    p = policy_of(&u, 1);
    is_misconfigured((v = decide(&p, &f), &v));
    v = decide(&p, &none);
    assert_int_equal(v.kind, LESSONS_VERDICT_REFUSE);

    /* A broken block refuses the tokens it is picked for. */
    blocks[0] = unit_hs();
    blocks[0].issuer = ISS_A;
    blocks[1] = unit_rs();
    blocks[1].broken = "block B cannot verify";
    p = policy_of(blocks, 2);
    p.blocks = 1;
    f = facts_of(bearer(rs_token(claims_with(ISS_B, ""))));
    is_misconfigured((v = decide(&p, &f), &v));
    /* ... and the other block's still pass. */
    f = facts_of(good);
    v = decide(&p, &f);
    is_allowed(&v, good + 7, &blocks[0], "alice@" ISS_A, NOW);
}

/* A setting in effect weaker than the merge chain asked (issue 55):
 * 500 with LESSONS00781 for every request, a good token's and no
 * token's alike; as strict or stricter decides as before.
 */
static void is_relaxed(const lessons_verdict_t *v, const char *asked,
                       const char *here)
{
    is_refusal(v, 500, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 781);
    assert_int_equal(v->line.level, LESSONS_DECIDE_ERR);
    assert_non_null(strstr(v->line.text, asked));
    assert_non_null(strstr(v->line.text, here));
}

static void test_relaxed(void **state)
{
    lessons_decide_unit_t u = unit_hs(), blocks[2];
    lessons_decide_policy_t p;
    const char *plain = hs_token(claims_with(ISS_A, ""));
    const char *good = bearer(plain);
    lessons_decide_facts_t f = facts_of(good), none = facts_of(NULL);
    lessons_verdict_t v;

    (void)state;
    /* DPoP: off < optional < required; not set is off. */
    p = policy_of(&u, 1);
    p.floor.dpop = LESSONS_DPOP_REQUIRED;
    p.floor.dpop_where = "lessons.conf:10";
    p.dpop = LESSONS_DPOP_OFF;
    v = decide(&p, &f);
    is_relaxed(&v, "LessonsJWTDPoP required at lessons.conf:10",
               "leaves LessonsJWTDPoP off in effect");
    is_relaxed((v = decide(&p, &none), &v), "required", "off");
    p.dpop = 0;
    is_relaxed((v = decide(&p, &f), &v), "required", "off");
    p.dpop = LESSONS_DPOP_OPTIONAL;
    is_relaxed((v = decide(&p, &f), &v), "required", "optional");
    p.floor.dpop = LESSONS_DPOP_OPTIONAL;
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);
    p.floor.dpop = LESSONS_DPOP_OFF;
    p.dpop = 0;
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);

    /* LessonsJWTCertBound, the same way. */
    p = policy_of(&u, 1);
    p.floor.certbind = LESSONS_CERTBIND_OPTIONAL;
    p.floor.certbind_where = "lessons.conf:11";
    is_relaxed((v = decide(&p, &f), &v),
               "LessonsJWTCertBound optional at lessons.conf:11",
               "LessonsJWTCertBound off");
    p.certbind = LESSONS_CERTBIND_OFF;
    is_relaxed((v = decide(&p, &f), &v), "optional", "off");
    p.certbind = LESSONS_CERTBIND_OPTIONAL;
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);

    /* at+jwt, once asked, of every unit. */
    p = policy_of(&u, 1);
    p.floor.at_jwt_where = "lessons.conf:12";
    is_relaxed((v = decide(&p, &f), &v),
               "LessonsJWTTokenType at+jwt at lessons.conf:12",
               "LessonsJWTTokenType any");
    u.token.require_at_jwt = 1;
    v = decide(&p, &f);
    is_token_refused(&v, LESSONS_REFUSED_TYPE);     /* judged, not broken */
    u.token.require_at_jwt = 0;

    /* One audience along the chain. */
    p = policy_of(&u, 1);
    p.floor.audience = "reports";
    p.floor.audience_where = "lessons.conf:13";
    is_relaxed((v = decide(&p, &f), &v),
               "LessonsJWTAudience reports at lessons.conf:13",
               "LessonsJWTAudience " AUD);
    p.floor.audience = AUD;
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);
    u.token.audience = NULL;
    is_relaxed((v = decide(&p, &f), &v), "LessonsJWTAudience " AUD,
               "no audience");
    u.token.audience = AUD;

    /* Blocks: each must name it; one without it breaks the section, for
     * the other block's tokens too.
     */
    blocks[0] = unit_hs();
    blocks[0].issuer = ISS_A;
    blocks[1] = unit_rs();
    blocks[1].issuer = ISS_B;
    p = policy_of(blocks, 2);
    p.blocks = 1;
    p.floor.audience = AUD;
    p.floor.audience_where = "lessons.conf:13";
    v = decide(&p, &f);
    is_allowed(&v, plain, &blocks[0], "alice@" ISS_A, NOW);
    blocks[1].token.audience = NULL;
    is_relaxed((v = decide(&p, &f), &v), AUD,
               "an issuer's block without it");
    /* Start-up's words (lessons_decide_relaxed) are the log line's. */
    assert_non_null(lessons_decide_relaxed(pool, &p));
    assert_memory_equal(v.line.text, lessons_decide_relaxed(pool, &p),
                        strlen(lessons_decide_relaxed(pool, &p)));
    blocks[1].token.audience = AUD;
    assert_null(lessons_decide_relaxed(pool, &p));
}

/* A key that allows none of the unit's algorithms: the server's fault. */
static void test_key_misfit(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *token = rs_token(claims_with(ISS_A, ""));
    lessons_decide_facts_t f = facts_of(bearer(token));
    lessons_verdict_t v;

    (void)state;
    u.token.alg = LESSONS_ALG_RS256;
    v = decide(&p, &f);
    is_misconfigured(&v);
}

/* ------------------------------------------------- the request's header */

static void test_no_token(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    lessons_decide_facts_t f = facts_of(NULL);
    lessons_verdict_t v;

    (void)state;
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, NO_ERROR,
               LESSONS_REFUSED_NO_TOKEN, 202);
    /* Another scheme is no token of ours. */
    f = facts_of("Basic YWxhZGRpbjpvcGVuc2VzYW1l");
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, NO_ERROR,
               LESSONS_REFUSED_NO_TOKEN, 202);
    p.dpop = LESSONS_DPOP_OFF;
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, NO_ERROR,
               LESSONS_REFUSED_NO_TOKEN, 202);
    /* Where DPoP is optional, both challenges; required, DPoP's. */
    f = facts_of(NULL);
    p.dpop = LESSONS_DPOP_OPTIONAL;
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER_DPOP, NO_ERROR,
               LESSONS_REFUSED_NO_TOKEN, 202);
    p.dpop = LESSONS_DPOP_REQUIRED;
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_DPOP, NO_ERROR,
               LESSONS_REFUSED_NO_TOKEN, 202);
}

static void test_malformed_header(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *const bad[] = { "Bearer a b", "Bearer", "Bearer ",
                                "bearer a,b", "Bearer \x01" };
    lessons_decide_facts_t f;
    lessons_verdict_t v;
    int i;

    (void)state;
    for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
        f = facts_of(bad[i]);
        v = decide(&p, &f);
        is_refusal(&v, 400, LESSONS_CHALLENGE_BEARER, "invalid_request",
                   LESSONS_REFUSED_BAD_HEADER, 203);
    }
    /* The DPoP scheme, where it is taken, the same (DPoP's challenge). */
    p.dpop = LESSONS_DPOP_OPTIONAL;
    f = facts_of("DPoP a b");
    v = decide(&p, &f);
    is_refusal(&v, 400, LESSONS_CHALLENGE_DPOP, "invalid_request",
               LESSONS_REFUSED_BAD_HEADER, 203);
    assert_non_null(strstr(v.description, "DPoP"));
}

/* The DPoP scheme where the section does not take it: said so, and the
 * token is not looked at.
 */
static void test_dpop_scheme_not_taken(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *good = hs_token(claims_with(ISS_A, ""));
    const char *const headers[] = { "DPoP x", "dpop x.y.z", NULL };
    const int modes[] = { 0, LESSONS_DPOP_OFF };
    lessons_decide_facts_t f;
    lessons_verdict_t v;
    int i, m;

    (void)state;
    for (m = 0; m < 2; m++) {
        p.dpop = modes[m];
        for (i = 0; i < 3; i++) {
            f = facts_of(headers[i] ? headers[i]
                                    : apr_pstrcat(pool, "DPoP ", good,
                                                  NULL));
            v = decide(&p, &f);
            is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, NO_ERROR,
                       LESSONS_REFUSED_DPOP, 223);
            assert_non_null(strstr(v.description,
                                   "DPoP is not accepted here"));
        }
    }
}

/* ------------------------------------------------------------- tokens */

static void test_good_token(void **state)
{
    lessons_decide_unit_t u = unit_hs(), r = unit_rs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *token = hs_token(claims_with(ISS_A, ""));
    lessons_decide_facts_t f = facts_of(bearer(token));
    lessons_verdict_t v;

    (void)state;
    v = decide(&p, &f);
    is_allowed(&v, token, &u, "alice", NOW);
    assert_false(v.dpop);
    /* The scheme is case-insensitive. */
    v = decide_auth(&p, apr_pstrcat(pool, "bEARER ", token, NULL));
    is_allowed(&v, token, &u, "alice", NOW);
    /* user_claim "sub" is the subject. */
    p.user_claim = "sub";
    v = decide(&p, &f);
    is_allowed(&v, token, &u, "alice", NOW);

    /* An RSA key set. */
    r.issuer = NULL;
    p = policy_of(&r, 1);
    token = rs_token(claims_with(ISS_B, ""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &r, "alice", NOW);

    /* A token without sub: allowed, no user. */
    token = rs_token("{\"iss\":\"" ISS_B "\",\"aud\":\"" AUD "\","
                     "\"exp\":1700003600}");
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &r, NULL, NOW);
}

static void test_refused_tokens(void **state)
{
    lessons_decide_unit_t u = unit_hs(), r = unit_rs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    lessons_verdict_t v;
    const char *token;

    (void)state;
    /* Expired, and only just (the leeway is the unit's). */
    token = hs_token(apr_psprintf(pool, "{\"iss\":\"" ISS_A "\",\"aud\":\""
                                  AUD "\",\"sub\":\"alice\",\"exp\":%"
                                  APR_INT64_T_FMT "}", NOW - 1));
    v = decide_auth(&p, bearer(token));
    is_token_refused(&v, LESSONS_REFUSED_EXPIRED);
    assert_string_equal(v.description,
                        lessons_token_describe(LESSONS_TOKEN_EXPIRED));
    u.token.leeway = 30;
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "alice", NOW);
    u.token.leeway = 0;

    /* Signed with another secret. */
    token = lj_token(LESSONS_ALG_HS256, other_secret, SECRET_LEN,
                     claims_with(ISS_A, ""));
    v = decide_auth(&p, bearer(token));
    is_token_refused(&v, LESSONS_REFUSED_SIGNATURE);

    /* Another issuer, another audience. */
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_C, ""))));
    is_token_refused(&v, LESSONS_REFUSED_ISSUER);
    v = decide_auth(&p, bearer(hs_token("{\"iss\":\"" ISS_A "\","
                                        "\"aud\":\"other\",\"sub\":\"alice\","
                                        "\"exp\":1700003600}")));
    is_token_refused(&v, LESSONS_REFUSED_AUDIENCE);

    /* Not a JWT at all; an algorithm the unit does not take. */
    v = decide_auth(&p, "Bearer x.y.z");
    is_token_refused(&v, LESSONS_REFUSED_MALFORMED);
    v = decide_auth(&p, bearer(rs_token(claims_with(ISS_A, ""))));
    is_token_refused(&v, LESSONS_REFUSED_ALGORITHM);

    /* Another RSA key than the set's. */
    r.issuer = NULL;
    p = policy_of(&r, 1);
    token = bearer(other_rs_token(claims_with(ISS_B, "")));
    v = decide_auth(&p, token);
    is_token_refused(&v, LESSONS_REFUSED_SIGNATURE);

    /* Where DPoP is optional, a bearer token's error is in Bearer's
     * challenge, DPoP's beside it bare.
     */
    p.dpop = LESSONS_DPOP_OPTIONAL;
    v = decide_auth(&p, token);
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER_DPOP, "invalid_token",
               LESSONS_REFUSED_SIGNATURE, 204);
}

/* A kid the key file's set does not have, and no keys URL to ask. */
static void test_unknown_kid(void **state)
{
    static const char jwks[] =
        "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"hs\",\"alg\":\"HS256\","
        "\"k\":\"azN5LWZvci1kZWNpZGUtdGVzdHMtb25seS0wMTIzNDU2Nzg5YWJjZGVmZ2"
        "hpamts\"}]}";
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    lessons_keyset_t *set = NULL;
    lessons_verdict_t v;
    const char *token;

    (void)state;
    assert_null(lessons_keyset_parse_jwks(pool, jwks, strlen(jwks), &set));
    u.token.key = NULL;
    u.token.keys = set;
    u.token.algs = LESSONS_ALG_BIT(LESSONS_ALG_HS256);
    token = lj_token_kid(LESSONS_ALG_HS256, secret, SECRET_LEN,
                         claims_with(ISS_A, ""), "hs");
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "alice", NOW);
    v = decide_auth(&p, bearer(lj_token_kid(LESSONS_ALG_HS256, secret,
                                            SECRET_LEN,
                                            claims_with(ISS_A, ""),
                                            "gone")));
    is_token_refused(&v, LESSONS_REFUSED_UNKNOWN_KID);
}

/* Through the process's token cache: the second decision is a hit, and
 * the clock is still checked on it.
 */
static void test_token_cache(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *token = hs_token(claims_with(ISS_A, ""));
    lessons_decide_facts_t f = facts_of(bearer(token));
    lessons_tokencache_stats_t st;
    lessons_verdict_t v;

    (void)state;
    p.tokens = lessons_tokencache_make(pool, 16);
    assert_non_null(p.tokens);
    v = decide(&p, &f);
    is_allowed(&v, token, &u, "alice", NOW);
    v = decide(&p, &f);
    is_allowed(&v, token, &u, "alice", NOW);
    lessons_tokencache_stats(p.tokens, &st);
    assert_true(st.hits >= 1);
    assert_int_equal(st.entries, 1);
    /* An hour later, the cached token has expired. */
    f.now = NOW + 3600;
    f.clock = apr_time_from_sec(f.now);
    v = decide(&p, &f);
    is_token_refused(&v, LESSONS_REFUSED_EXPIRED);
    /* A bad token through the cache is refused and not kept. */
    f = facts_of(bearer(lj_token(LESSONS_ALG_HS256, other_secret, SECRET_LEN,
                                 claims_with(ISS_A, ""))));
    v = decide(&p, &f);
    is_token_refused(&v, LESSONS_REFUSED_SIGNATURE);
    lessons_tokencache_stats(p.tokens, &st);
    assert_true(st.entries <= 1);
}

/* ------------------------------------------------------------- blocks */

static void test_blocks(void **state)
{
    static const char *const issuers[] = { ISS_A, ISS_B };
    lessons_decide_unit_t units[2];
    lessons_decide_policy_t p;
    lessons_verdict_t v;
    const char *token, *name = NULL;

    (void)state;
    units[0] = unit_hs();
    units[0].issuer = ISS_A;
    units[1] = unit_rs();
    p = policy_of(units, 2);
    p.blocks = 1;

    /* Issuer B's token, verified by B's key: B's user. */
    assert_int_equal(lessons_claims_qualify(pool, "alice", ISS_B, issuers, 2,
                                            &name), LESSONS_CLAIM_TEXT_OK);
    assert_string_equal(name, "alice@" ISS_B);
    token = rs_token(claims_with(ISS_B, ""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &units[1], name, NOW);
    assert_string_equal(v.policy.issuer, ISS_B);
    /* Issuer A's, by A's. */
    token = hs_token(claims_with(ISS_A, ""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &units[0], "alice@" ISS_A, NOW);

    /* Naming B, signed with A's secret: B's keys judge it. */
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_B, ""))));
    is_token_refused(&v, LESSONS_REFUSED_ALGORITHM);
    /* Naming B, signed by another RSA key. */
    v = decide_auth(&p, bearer(other_rs_token(claims_with(ISS_B, ""))));
    is_token_refused(&v, LESSONS_REFUSED_SIGNATURE);

    /* An issuer of no block, and none at all. */
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_C, ""))));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_UNKNOWN_ISSUER, 222);
    v = decide_auth(&p, bearer(hs_token("{\"sub\":\"alice\","
                                        "\"exp\":1700003600}")));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_UNKNOWN_ISSUER, 222);
    /* Not a token: malformed, as a full verify says. */
    v = decide_auth(&p, "Bearer x.y.z");
    is_token_refused(&v, LESSONS_REFUSED_MALFORMED);

    /* user_claim email, qualified as well. */
    p.user_claim = "email";
    token = rs_token(claims_with(ISS_B, ",\"email\":\"al@b.example\""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &units[1], "al@b.example@" ISS_B, NOW);
}

/* -------------------------------------------------------- fetched keys */

/* A keys URL's fetcher that could not start, or has no set yet. */
static void test_fetched_no_set(void **state)
{
    lessons_decide_unit_t u = unit_rs();
    lessons_decide_policy_t p;
    const char *token = rs_token(claims_with(ISS_B, ""));
    lessons_decide_facts_t f = facts_of(bearer(token));
    lessons_verdict_t v;

    (void)state;
    u.issuer = NULL;
    u.fetched = 1;
    u.live = NULL;
    u.token.keys = NULL;
    u.keys_name = "keys URL https://sso.example.org/certs";
    u.retry_after = 42;
    p = policy_of(&u, 1);
    v = decide(&p, &f);
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR,
               LESSONS_REFUSED_NO_KEYS, 214);
    assert_int_equal(v.retry_after, 42);
    assert_int_equal(v.line.level, LESSONS_DECIDE_ERR);
    /* The key file's keys serve meanwhile. */
    u.token.keys = rs_set;
    v = decide(&p, &f);
    is_allowed(&v, token, &u, "alice", NOW);
    assert_int_equal(v.retry_after, 0);
    /* In a block too. */
    u.issuer = ISS_B;
    u.token.keys = NULL;
    p.blocks = 1;
    v = decide(&p, &f);
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR,
               LESSONS_REFUSED_NO_KEYS, 214);
    assert_int_equal(v.retry_after, 42);
}

/* A fetcher with a set: its keys verify, held for the request. */
static const char *fetch_rs(void *baton, apr_pool_t *set_pool,
                            apr_pool_t *scratch, const lessons_keyset_t **set,
                            const char **doc, apr_size_t *len)
{
    lessons_keyset_t *s = NULL;
    const char *why;

    (void)baton;
    (void)scratch;
    why = lessons_keyset_make(set_pool, (const unsigned char *)rsa_pub,
                              strlen(rsa_pub), &s);
    *set = s;
    *doc = rsa_pub;
    *len = strlen(rsa_pub);
    return why;
}

static void test_fetched_live(void **state)
{
    lessons_decide_unit_t u = unit_rs();
    lessons_decide_policy_t p;
    const char *token = rs_token(claims_with(ISS_B, ""));
    lessons_decide_facts_t f = facts_of(bearer(token));
    lessons_keysource_opts_t o;
    lessons_keysource_t *src = NULL;
    lessons_keysource_stats_t st;
    lessons_verdict_t v;
    apr_pool_t *sp, *rp;

    (void)state;
    assert_int_equal(apr_pool_create(&sp, pool), APR_SUCCESS);
    memset(&o, 0, sizeof(o));
    o.refresh = apr_time_from_sec(3600);
    o.min_refresh = apr_time_from_sec(3600);
    o.wait = apr_time_from_sec(5);
    o.max_waiters = 4;
    o.fetch = fetch_rs;
    assert_int_equal(lessons_keysource_start(&src, &o, sp), APR_SUCCESS);
    u.issuer = NULL;
    u.fetched = 1;
    u.live = src;
    u.token.keys = NULL;
    u.keys_name = "keys URL https://sso.example.org/certs";
    p = policy_of(&u, 1);
    assert_int_equal(apr_pool_create(&rp, pool), APR_SUCCESS);
    memset(&v, 0, sizeof(v));
    assert_int_equal(lessons_decide(rp, &p, &f, &v), LESSONS_VERDICT_ALLOW);
    is_allowed(&v, token, &u, "alice", NOW);
    assert_non_null(v.policy.keys);
    /* The request holds the set until its pool goes. */
    lessons_keysource_stats(src, &st);
    assert_true(st.holds >= 2);
    apr_pool_destroy(rp);
    lessons_keysource_stats(src, &st);
    assert_int_equal(st.holds, 1);
    apr_pool_destroy(sp);
}

/* ---------------------------------------------------------- user claim */

static void test_user_claim(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    lessons_verdict_t v;
    const char *token;

    (void)state;
    p.user_claim = "email";
    token = hs_token(claims_with(ISS_A, ",\"email\":\"alice@example.org\""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "alice@example.org", NOW);
    /* An integer is a name too. */
    token = hs_token(claims_with(ISS_A, ",\"email\":12345"));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "12345", NOW);
    /* Absent: no user, not a refusal. */
    token = hs_token(claims_with(ISS_A, ""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, NULL, NOW);
    /* A control character, or not a name: refused, never cleaned (and
     * never in the log).
     */
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_A, ",\"email\":"
                                                    "\"eve\\nadmin\""))));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_USER_CLAIM, 217);
    assert_null(strstr(v.line.text, "admin"));
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_A,
                                                    ",\"email\":[\"a\"]"))));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_USER_CLAIM, 217);
    /* sub with a control character, the default claim. */
    p.user_claim = NULL;
    v = decide_auth(&p, bearer(hs_token("{\"iss\":\"" ISS_A "\",\"aud\":\""
                                        AUD "\",\"sub\":\"a\\u0007b\","
                                        "\"exp\":1700003600}")));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_USER_CLAIM, 217);
}

/* ------------------------------------------------------------- exports */

static const char *export_of(const lessons_verdict_t *v, const char *name)
{
    int i;

    for (i = 0; v->exports && i < v->exports->nelts; i++) {
        const lessons_decide_export_t *e =
            &APR_ARRAY_IDX(v->exports, i, lessons_decide_export_t);

        assert_non_null(e->name);
        assert_non_null(e->value);
        if (strcmp(e->name, name) == 0) {
            return e->value;
        }
    }
    return NULL;
}

static const lessons_decide_line_t *note_of(const lessons_verdict_t *v,
                                            int tag)
{
    int i;

    for (i = 0; v->notes && i < v->notes->nelts; i++) {
        const lessons_decide_line_t *l =
            &APR_ARRAY_IDX(v->notes, i, lessons_decide_line_t);

        assert_non_null(l->text);
        if (l->tag == tag) {
            return l;
        }
    }
    return NULL;
}

static void test_exports(void **state)
{
    static const char *const names[] = { "role", "groups", "missing" };
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *role_env = lessons_claims_env_name(pool, "role");
    const char *groups_env = lessons_claims_env_name(pool, "groups");
    const lessons_decide_line_t *note;
    lessons_verdict_t v;
    const char *token;

    (void)state;
    assert_string_equal(role_env, "JWT_CLAIM_role");
    p.export_claims = names;
    p.nexport = 3;
    token = hs_token(claims_with(ISS_A, ",\"role\":\"admin\","
                                 "\"groups\":[\"a\",\"b\"]"));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "alice", NOW);
    assert_non_null(export_of(&v, role_env));
    assert_string_equal(export_of(&v, role_env), "admin");
    assert_non_null(export_of(&v, groups_env));
    assert_string_equal(export_of(&v, groups_env), "[\"a\",\"b\"]");
    /* One the token lacks is left out, without a note. */
    assert_null(export_of(&v, "JWT_CLAIM_missing"));
    assert_null(note_of(&v, 216));
    assert_non_null(v.claims);

    /* A string that would read as an array's JSON text: not
     * exported, a note naming it (not its value); the rest are.
     */
    token = hs_token(claims_with(ISS_A, ",\"role\":\"admin\","
                                 "\"groups\":\"[\\\"secret\\\"]\""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "alice", NOW);
    assert_string_equal(export_of(&v, role_env), "admin");
    assert_null(export_of(&v, groups_env));
    note = note_of(&v, 216);
    assert_non_null(note);
    assert_non_null(strstr(note->text, "groups"));
    assert_null(strstr(note->text, "secret"));
    assert_int_equal(note->level, LESSONS_DECIDE_INFO);
    assert_false(note->fault);
    /* A control character: the same. */
    token = hs_token(claims_with(ISS_A, ",\"role\":\"ad\\u0001min\""));
    v = decide_auth(&p, bearer(token));
    is_allowed(&v, token, &u, "alice", NOW);
    assert_null(export_of(&v, role_env));
    assert_non_null(note_of(&v, 216));
}

/* ---------------------------------------------------------------- DPoP */

typedef struct {
    const char *priv;               /* PEM */
    const char *jwk;                /* its public JWK, as JSON text */
    char jkt[LESSONS_DPOP_HASH_LEN];
} ec_key_t;

static ec_key_t ec_key(void)
{
    uj_ec_key_t k = uj_ec_p256();
    json_t *jwk = json_loads(k.jwk, 0, NULL);
    ec_key_t out;

    out.priv = k.priv;
    out.jwk = k.jwk;
    assert_non_null(jwk);
    assert_int_equal(lessons_dpop_thumbprint(jwk, out.jkt), 0);
    json_decref(jwk);
    return out;
}

/* A proof for GET URI at iat, with jti, for token. */
static const char *proof_for(const ec_key_t *k, const char *token,
                             apr_int64_t iat, const char *jti)
{
    char ath[LESSONS_DPOP_HASH_LEN];

    assert_int_equal(lessons_dpop_ath(token, ath), 0);
    return lj_token_with(LESSONS_ALG_ES256, k->priv, strlen(k->priv),
                         apr_psprintf(pool, "{\"jti\":\"%s\",\"htm\":\"GET\","
                                      "\"htu\":\"" URI "\",\"iat\":%"
                                      APR_INT64_T_FMT ",\"ath\":\"%s\"}",
                                      jti, iat, ath),
                         NULL, apr_psprintf(pool, "{\"typ\":\"dpop+jwt\","
                                            "\"jwk\":%s}", k->jwk));
}

/* A token bound to k (cnf.jkt). */
static const char *bound_token(const ec_key_t *k)
{
    return hs_token(claims_with(ISS_A, apr_psprintf(pool, ",\"cnf\":"
                                                    "{\"jkt\":\"%s\"}",
                                                    k->jkt)));
}

/* The replay table the glue asks under its mutex: here a real one, in
 * memory of its own, and how often it was asked.
 */
typedef struct {
    lessons_replay_t *table;
    int calls;
    int answer;                     /* >= 0: say this instead of asking */
    apr_time_t expires;             /* the last proof's, as asked */
} replay_box_t;

static int replay_take(void *baton, const unsigned char *key,
                       apr_uint32_t owner, apr_uint32_t group,
                       apr_time_t expires, apr_time_t now)
{
    replay_box_t *box = baton;

    box->calls++;
    box->expires = expires;
    if (box->answer >= 0) {
        return box->answer;
    }
    return (int)lessons_replay_check_in(box->table, key, owner, group,
                                        expires, now);
}

static void test_dpop_refusals(void **state)
{
    ec_key_t k = ec_key();
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = bound_token(&k);
    const char *plain = hs_token(claims_with(ISS_A, ""));
    const char *proof = proof_for(&k, bound, NOW, "j-1");
    lessons_decide_facts_t f;
    lessons_verdict_t v;
    replay_box_t box = { NULL, 0, LESSONS_REPLAY_NEW, 0 };

    (void)state;
    p.replay = replay_take;
    p.replay_baton = &box;
    p.dpop = LESSONS_DPOP_OPTIONAL;

    /* A bound token sent as a bearer token: no bearer token. */
    f = facts_of(bearer(bound));
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_token");
    /* Even with a proof beside it. */
    f.dpop = proof;
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_token");
    /* An unbound one: a bearer token, where DPoP is optional. */
    f = facts_of(bearer(plain));
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);
    assert_false(v.dpop);
    /* ... and refused where it is required. */
    p.dpop = LESSONS_DPOP_REQUIRED;
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_token");
    p.dpop = LESSONS_DPOP_OPTIONAL;

    /* The DPoP scheme with an unbound token. */
    f = facts_of(apr_pstrcat(pool, "DPoP ", plain, NULL));
    f.dpop = proof;
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_token");

    /* The DPoP scheme, a bound token, and no proof, or two. */
    f = facts_of(apr_pstrcat(pool, "DPoP ", bound, NULL));
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    f.dpop = proof;
    f.dpop_lines = 2;
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    /* httpd's join of two lines: a comma no JWS holds. */
    f.dpop = apr_pstrcat(pool, proof, ", ", proof, NULL);
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    /* Not a proof; a proof for another token. */
    f.dpop = "not.a.proof";
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    f.dpop = proof_for(&k, plain, NOW, "j-2");
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    /* None of these reached the replay table. */
    assert_int_equal(box.calls, 0);
}

/* A good proof: allowed once, then refused as replayed. */
static void test_dpop_good_proof(void **state)
{
    ec_key_t k = ec_key(), other = ec_key();
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = bound_token(&k);
    const char *auth = apr_pstrcat(pool, "DPoP ", bound, NULL);
    apr_size_t size = lessons_replay_size(64);
    void *mem = malloc(size);
    replay_box_t box = { NULL, 0, -1, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;

    (void)state;
    assert_non_null(mem);
    box.table = lessons_replay_attach(mem, size, 64, 1);
    assert_non_null(box.table);
    p.dpop = LESSONS_DPOP_REQUIRED;
    p.replay = replay_take;
    p.replay_baton = &box;
    p.replay_share = lessons_replay_share(box.table);
    f = facts_of(auth);
    f.dpop = proof_for(&k, bound, NOW, "j-1");
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_true(v.dpop);
    assert_int_equal(box.calls, 1);
    /* The same proof again. */
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    assert_int_equal(box.calls, 2);
    /* Another jti is another proof. */
    f.dpop = proof_for(&k, bound, NOW, "j-2");
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    /* A proof made with another key than the token's. */
    f.dpop = proof_for(&other, bound, NOW, "j-3");
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    assert_int_equal(box.calls, 3);
    /* A proof too old. */
    f.dpop = proof_for(&k, bound, NOW - LESSONS_DPOP_WINDOW - 1, "j-4");
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    /* The table full: 503, the proof not taken. */
    box.answer = LESSONS_REPLAY_FULL;
    f.dpop = proof_for(&k, bound, NOW, "j-5");
    v = decide(&p, &f);
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 242);
    /* The client holds its share: its doing, 429 (no challenge: no
     * other token or proof would pass now).
     */
    box.answer = LESSONS_REPLAY_OVER_SHARE;
    v = decide(&p, &f);
    is_over_share(&v);
    /* The table cannot be asked. */
    box.answer = -1;
    p.replay = NULL;
    v = decide(&p, &f);
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 241);
    free(mem);
}

/* A token bound to k for sub, of client (NULL: no client_id). */
static const char *client_token(const ec_key_t *k, const char *client,
                                const char *sub)
{
    return hs_token(apr_psprintf(pool, "{\"iss\":\"" ISS_A "\",\"aud\":"
                                 "\"" AUD "\",\"sub\":\"%s\",\"exp\":%"
                                 APR_INT64_T_FMT ",\"iat\":%" APR_INT64_T_FMT
                                 "%s,\"cnf\":{\"jkt\":\"%s\"}}", sub,
                                 NOW + 3600, NOW - 10,
                                 client ? apr_psprintf(pool, ",\"client_id\":"
                                                       "\"%s\"", client)
                                        : "", k->jkt));
}

/* Issue 55: a client makes keys for nothing, and gets a bound token for
 * each from its provider; the replay table's share is the client's, not
 * the key's.  One user of one application, 40 keys and tokens, 3 fresh
 * proofs each: its first share of them (64 of a table of 1,024) taken,
 * the rest 429 with Retry-After, whatever the key; another user of the
 * same application, and the same user of another, each still taken.
 */
static void test_dpop_one_client_many_keys(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    apr_size_t size = lessons_replay_size(1024);
    void *mem = malloc(size);
    replay_box_t box = { NULL, 0, -1, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;
    const char *tok;
    ec_key_t k;
    int key, n, taken = 0, over = 0, share;

    (void)state;
    assert_non_null(mem);
    box.table = lessons_replay_attach(mem, size, 1024, 1);
    assert_non_null(box.table);
    share = lessons_replay_share(box.table);
    assert_int_equal(share, 64);
    p.dpop = LESSONS_DPOP_REQUIRED;
    p.replay = replay_take;
    p.replay_baton = &box;
    p.replay_share = share;
    for (key = 0; key < 40; key++) {
        k = ec_key();
        tok = client_token(&k, "school-app", "mallory");
        for (n = 0; n < 3; n++) {
            f = facts_of(apr_pstrcat(pool, "DPoP ", tok, NULL));
            f.dpop = proof_for(&k, tok, NOW, apr_psprintf(pool, "m-%d-%d",
                                                          key, n));
            f.dpop_lines = 1;
            v = decide(&p, &f);
            if (v.kind == LESSONS_VERDICT_ALLOW) {
                taken++;
            }
            else {
                is_over_share(&v);
                over++;
            }
        }
    }
    assert_int_equal(taken, share);
    assert_int_equal(over, 40 * 3 - share);
    /* Others are taken: another user of the application, the same user
     * of another, a token naming no client.
     */
    k = ec_key();
    for (n = 0; n < 3; n++) {
        const char *others[3];
        int i;

        others[0] = client_token(&k, "school-app", "alice");
        others[1] = client_token(&k, "another-app", "mallory");
        others[2] = client_token(&k, NULL, "mallory");
        for (i = 0; i < 3; i++) {
            f = facts_of(apr_pstrcat(pool, "DPoP ", others[i], NULL));
            f.dpop = proof_for(&k, others[i], NOW,
                               apr_psprintf(pool, "o-%d-%d", i, n));
            f.dpop_lines = 1;
            v = decide(&p, &f);
            assert_int_equal(v.kind, LESSONS_VERDICT_ALLOW);
        }
    }
    free(mem);
}

/* LessonsJWTLeeway widens a proof's iat window by at most
 * LESSONS_DPOP_LEEWAY_MAX on each side: with a leeway of 600 s, a proof
 * 40 s ahead is refused, and one at the edge is kept no longer than the
 * widest window allows (126 s), never the leeway's 20 minutes.
 */
static void test_dpop_leeway_bounded(void **state)
{
    ec_key_t k = ec_key();
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = bound_token(&k);
    replay_box_t box = { NULL, 0, LESSONS_REPLAY_NEW, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;

    (void)state;
    p.dpop = LESSONS_DPOP_REQUIRED;
    p.replay = replay_take;
    p.replay_baton = &box;
    p.leeway = 600;
    f = facts_of(apr_pstrcat(pool, "DPoP ", bound, NULL));
    f.dpop_lines = 1;
    f.dpop = proof_for(&k, bound, NOW + LESSONS_DPOP_AHEAD
                                  + LESSONS_DPOP_LEEWAY_MAX + 1, "l-1");
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    f.dpop = proof_for(&k, bound, NOW - LESSONS_DPOP_WINDOW
                                  - LESSONS_DPOP_LEEWAY_MAX - 1, "l-2");
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    assert_int_equal(box.calls, 0);
    f.dpop = proof_for(&k, bound, NOW + LESSONS_DPOP_AHEAD
                                  + LESSONS_DPOP_LEEWAY_MAX, "l-3");
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_int_equal(box.expires, apr_time_from_sec(NOW + 126));
    assert_int_equal(LESSONS_DPOP_WINDOW + LESSONS_DPOP_AHEAD
                     + 2 * LESSONS_DPOP_LEEWAY_MAX + 1, 126);
}

/* A proof for GET URI at iat, with jti, for token, with a nonce claim
 * (JSON text: "\"...\"" or another value).
 */
static const char *proof_nonce(const ec_key_t *k, const char *token,
                               apr_int64_t iat, const char *jti,
                               const char *nonce_json)
{
    char ath[LESSONS_DPOP_HASH_LEN];

    assert_int_equal(lessons_dpop_ath(token, ath), 0);
    return lj_token_with(LESSONS_ALG_ES256, k->priv, strlen(k->priv),
                         apr_psprintf(pool, "{\"jti\":\"%s\",\"htm\":\"GET\","
                                      "\"htu\":\"" URI "\",\"iat\":%"
                                      APR_INT64_T_FMT ",\"ath\":\"%s\","
                                      "\"nonce\":%s}",
                                      jti, iat, ath, nonce_json),
                         NULL, apr_psprintf(pool, "{\"typ\":\"dpop+jwt\","
                                            "\"jwk\":%s}", k->jwk));
}

static const char *nonce_at(const lessons_nonce_key_t *key, apr_int64_t t)
{
    char *n = apr_palloc(pool, LESSONS_NONCE_SIZE);

    assert_int_equal(lessons_nonce_make(key, t, n), 0);
    return apr_psprintf(pool, "\"%s\"", n);
}

/* A refusal for the nonce: DPoP's challenge, use_dpop_nonce (RFC 9449
 * 9), its own log tag, and the current nonce to send; the proof is not
 * taken in the replay table.
 */
static void is_nonce_refused(const lessons_verdict_t *v,
                             const lessons_nonce_key_t *key)
{
    char want[LESSONS_NONCE_SIZE];

    is_refusal(v, 401, LESSONS_CHALLENGE_DPOP, "use_dpop_nonce",
               LESSONS_REFUSED_DPOP, 700);
    assert_int_equal(lessons_nonce_make(key, NOW, want), 0);
    assert_non_null(v->nonce);
    assert_string_equal(v->nonce, want);
    assert_non_null(strstr(v->description, "DPoP-Nonce"));
}

static void test_dpop_nonce(void **state)
{
    static const unsigned char ns[] = "nonce-secret-of-decide-tests-0123456789";
    static const unsigned char other[] = "nonce-secret-of-another-server-0123456";
    const lessons_nonce_key_t key = { ns, sizeof(ns) - 1, 20 };
    const lessons_nonce_key_t key_other = { other, sizeof(other) - 1, 20 };
    ec_key_t k = ec_key();
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = bound_token(&k);
    const char *plain = hs_token(claims_with(ISS_A, ""));
    const char *auth = apr_pstrcat(pool, "DPoP ", bound, NULL);
    apr_size_t size = lessons_replay_size(64);
    void *mem = malloc(size);
    replay_box_t box = { NULL, 0, -1, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;
    char want[LESSONS_NONCE_SIZE];

    (void)state;
    assert_int_equal(NOW % 20, 0);      /* NOW starts a slot */
    assert_non_null(mem);
    box.table = lessons_replay_attach(mem, size, 64, 1);
    assert_non_null(box.table);
    assert_int_equal(lessons_nonce_make(&key, NOW, want), 0);
    p.dpop = LESSONS_DPOP_REQUIRED;
    p.replay = replay_take;
    p.replay_baton = &box;
    p.replay_share = lessons_replay_share(box.table);

    /* Nonces not asked: a proof without one is taken, as before, and no
     * nonce is given.
     */
    f = facts_of(auth);
    f.dpop = proof_for(&k, bound, NOW, "n-0");
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_null(v.nonce);
    assert_int_equal(box.expires,
                     apr_time_from_sec(NOW + LESSONS_DPOP_WINDOW + 1));

    p.nonce = &key;
    box.calls = 0;
    /* No nonce: 401 use_dpop_nonce with the current one, not taken. */
    f.dpop = proof_for(&k, bound, NOW, "n-1");
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    /* Another server's secret, an old slot, garbage, not a string. */
    f.dpop = proof_nonce(&k, bound, NOW, "n-2", nonce_at(&key_other, NOW));
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    f.dpop = proof_nonce(&k, bound, NOW, "n-3", nonce_at(&key, NOW - 21));
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    f.dpop = proof_nonce(&k, bound, NOW, "n-4", "\"garbage\"");
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    f.dpop = proof_nonce(&k, bound, NOW, "n-5", "12345");
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    assert_int_equal(box.calls, 0);

    /* The nonce given: taken, and the current one given again (2xx). */
    f.dpop = proof_nonce(&k, bound, NOW, "n-6", nonce_at(&key, NOW + 5));
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_non_null(v.nonce);
    assert_string_equal(v.nonce, want);
    assert_int_equal(box.calls, 1);
    /* Kept until its nonce ends (NOW + 40) and a second, not for the
     * iat window's 61 seconds.
     */
    assert_int_equal(box.expires, apr_time_from_sec(NOW + 41));
    /* Replayed: the table refuses it as before. */
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    assert_non_null(v.nonce);
    /* The slot before's nonce: taken, kept until it ends (NOW + 20). */
    f.dpop = proof_nonce(&k, bound, NOW, "n-7", nonce_at(&key, NOW - 1));
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_int_equal(box.expires, apr_time_from_sec(NOW + 21));
    /* The nonce judges freshness (RFC 9449 11.1), not the client's
     * clock: a clock 90 s behind or ahead gets use_dpop_nonce for a
     * proof without a nonce (never invalid_dpop_proof, after which
     * clients do not retry), and is taken with one, kept until the
     * nonce ends whatever its iat says (the client's share of the
     * table allows one more proof here).
     */
    f.dpop = proof_for(&k, bound, NOW - 90, "n-8a");
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    f.dpop = proof_nonce(&k, bound, NOW - 90, "n-8", nonce_at(&key, NOW));
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_int_equal(box.expires, apr_time_from_sec(NOW + 41));
    f.dpop = proof_for(&k, bound, NOW + 90, "n-8b");
    v = decide(&p, &f);
    is_nonce_refused(&v, &key);
    /* A proof refused for something else: its own error, with the
     * nonce all the same (a DPoP challenge).
     */
    f.dpop = proof_nonce(&k, plain, NOW, "n-9", nonce_at(&key, NOW));
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");
    assert_non_null(v.nonce);
    /* No token where DPoP is required: DPoP's challenge, the nonce. */
    f = facts_of(NULL);
    v = decide(&p, &f);
    assert_int_equal(v.challenge, LESSONS_CHALLENGE_DPOP);
    assert_non_null(v.nonce);
    /* Optional: a bearer token is taken as ever, without a nonce. */
    p.dpop = LESSONS_DPOP_OPTIONAL;
    f = facts_of(bearer(plain));
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);
    assert_null(v.nonce);
    /* DPoP off: the nonce key changes nothing. */
    p.dpop = LESSONS_DPOP_OFF;
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);
    assert_null(v.nonce);
    free(mem);
}

/* No replay table in this process: a proof that passes otherwise gets
 * 503, never taken unchecked.
 */
static int replay_fails(void *baton, const unsigned char *key,
                        apr_uint32_t owner, apr_uint32_t group,
                        apr_time_t expires, apr_time_t now)
{
    (void)baton;
    (void)key;
    (void)owner;
    (void)group;
    (void)expires;
    (void)now;
    return -1;
}

static void test_dpop_no_table(void **state)
{
    ec_key_t k = ec_key();
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = bound_token(&k);
    lessons_decide_facts_t f = facts_of(apr_pstrcat(pool, "DPoP ", bound,
                                                    NULL));
    lessons_verdict_t v;

    (void)state;
    p.dpop = LESSONS_DPOP_OPTIONAL;
    f.dpop = proof_for(&k, bound, NOW, "j-1");
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 241);
    assert_int_equal(v.line.level, LESSONS_DECIDE_ERR);
    assert_true(v.retry_after > 0);
    p.replay = replay_fails;
    v = decide(&p, &f);
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 241);
}

/* ------------------------------------------------ certificate binding */

/* Thumbprints of two client certificates (test_certbind.c's A and B). */
#define X5T_A "lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdgMdc"
#define X5T_B "X-f500oHIe4RKoqPQW1nZBo7a1oTEXWNUWz-YsFLnh8"

/* The connection's certificate as the glue gives it, and how often the
 * decision asked for it.
 */
typedef struct {
    const char *x5t;
    int calls;
} cert_box_t;

static const char *cert_of(void *baton)
{
    cert_box_t *box = baton;

    box->calls++;
    return box->x5t;
}

static lessons_decide_facts_t facts_cert(const char *authorization,
                                         cert_box_t *box)
{
    lessons_decide_facts_t f = facts_of(authorization);

    f.cert = cert_of;
    f.cert_baton = box;
    return f;
}

static const char *cert_token(const char *cnf)
{
    return hs_token(claims_with(ISS_A, apr_psprintf(pool, ",\"cnf\":%s",
                                                    cnf)));
}

/* A refusal for the binding: Bearer's invalid_token, neither thumbprint
 * in the words or the line.
 */
static void is_cert_refused(const lessons_verdict_t *v, int tag,
                            const char *says)
{
    is_refusal(v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_OTHER, tag);
    assert_non_null(strstr(v->description, says));
    assert_null(strstr(v->description, X5T_A));
    assert_null(strstr(v->description, X5T_B));
    assert_null(strstr(v->line.text, X5T_A));
    assert_null(strstr(v->line.text, X5T_B));
}

static void test_certbind_optional(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = cert_token("{\"x5t#S256\":\"" X5T_A "\"}");
    const char *plain = hs_token(claims_with(ISS_A, ""));
    cert_box_t box = { X5T_A, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;

    (void)state;
    p.certbind = LESSONS_CERTBIND_OPTIONAL;
    f = facts_cert(bearer(bound), &box);
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_int_equal(box.calls, 1);
    /* Another certificate, none verified, no way to ask at all. */
    box.x5t = X5T_B;
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "another client certificate");
    box.x5t = NULL;
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "presented none");
    f = facts_of(bearer(bound));
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "presented none");
    /* An unbound token is a bearer token, and the certificate is not
     * read for it.
     */
    box.calls = 0;
    box.x5t = X5T_A;
    f = facts_cert(bearer(plain), &box);
    v = decide(&p, &f);
    is_allowed(&v, plain, &u, "alice", NOW);
    assert_int_equal(box.calls, 0);
    /* A cnf that cannot be read is not taken, whatever the certificate. */
    f = facts_cert(bearer(cert_token("\"" X5T_A "\"")), &box);
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "malformed");
    f = facts_cert(bearer(cert_token("{\"x5t#S256\":\"" X5T_A "=\"}")),
                   &box);
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "malformed");
    /* Off, or not set: cnf x5t#S256 is not looked at (RFC 8705 3: a
     * server that does not know the binding takes a bearer token).
     */
    box.calls = 0;
    box.x5t = X5T_B;
    f = facts_cert(bearer(bound), &box);
    p.certbind = LESSONS_CERTBIND_OFF;
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    p.certbind = 0;
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    assert_int_equal(box.calls, 0);
}

/* The token cache verifies a token once per process; its binding is
 * checked against each request's own connection all the same.
 */
static void test_certbind_cached(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = cert_token("{\"x5t#S256\":\"" X5T_A "\"}");
    cert_box_t box = { X5T_A, 0 };
    lessons_decide_facts_t f = facts_cert(bearer(bound), &box);
    lessons_tokencache_stats_t st;
    lessons_verdict_t v;

    (void)state;
    p.certbind = LESSONS_CERTBIND_OPTIONAL;
    p.tokens = lessons_tokencache_make(pool, 16);
    assert_non_null(p.tokens);
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    box.x5t = X5T_B;
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "another client certificate");
    box.x5t = NULL;
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "presented none");
    box.x5t = X5T_A;
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    lessons_tokencache_stats(p.tokens, &st);
    assert_true(st.hits >= 3);
    assert_int_equal(box.calls, 4);
}

/* Required: bound to nothing is refused; bound to a certificate, or to
 * a DPoP key (proved), is taken; bound both ways, judged both ways.
 */
static void test_certbind_required(void **state)
{
    ec_key_t k = ec_key();
    lessons_decide_unit_t u = unit_hs();
    lessons_decide_policy_t p = policy_of(&u, 1);
    const char *bound = cert_token("{\"x5t#S256\":\"" X5T_A "\"}");
    const char *plain = hs_token(claims_with(ISS_A, ""));
    const char *jkt_only = bound_token(&k);
    const char *both = cert_token(apr_psprintf(pool, "{\"jkt\":\"%s\","
                                               "\"x5t#S256\":\"" X5T_A
                                               "\"}", k.jkt));
    replay_box_t rbox = { NULL, 0, LESSONS_REPLAY_NEW, 0 };
    cert_box_t box = { X5T_A, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;

    (void)state;
    p.certbind = LESSONS_CERTBIND_REQUIRED;
    p.replay = replay_take;
    p.replay_baton = &rbox;
    f = facts_cert(bearer(plain), &box);
    v = decide(&p, &f);
    is_cert_refused(&v, 721, "sender-constrained");
    f = facts_cert(bearer(bound), &box);
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    /* DPoP off: a token bound to a key only is bound to nothing here. */
    f = facts_cert(bearer(jkt_only), &box);
    v = decide(&p, &f);
    is_cert_refused(&v, 721, "sender-constrained");
    /* DPoP on: the same token with its proof is sender-constrained. */
    p.dpop = LESSONS_DPOP_OPTIONAL;
    f = facts_cert(apr_pstrcat(pool, "DPoP ", jkt_only, NULL), &box);
    f.dpop = proof_for(&k, jkt_only, NOW, "c-1");
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_allowed(&v, jkt_only, &u, "alice", NOW);
    assert_true(v.dpop);
    /* Both ways: the proof and the certificate must both hold. */
    f = facts_cert(apr_pstrcat(pool, "DPoP ", both, NULL), &box);
    f.dpop = proof_for(&k, both, NOW, "c-2");
    f.dpop_lines = 1;
    v = decide(&p, &f);
    is_allowed(&v, both, &u, "alice", NOW);
    box.x5t = X5T_B;
    f.dpop = proof_for(&k, both, NOW, "c-3");
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_DPOP, "invalid_token",
               LESSONS_REFUSED_OTHER, 722);
    /* ... and a good certificate does not stand in for a missing proof. */
    box.x5t = X5T_A;
    f.dpop = NULL;
    f.dpop_lines = 0;
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_dpop_proof");

    /* DPoP optional, then required: a token bound to a certificate
     * only is judged by its certificate, not refused as a bearer token;
     * an unbound one still is where DPoP is required, and so is the
     * bound one with another certificate.
     */
    f = facts_cert(bearer(bound), &box);
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    p.dpop = LESSONS_DPOP_REQUIRED;
    f = facts_cert(bearer(bound), &box);
    v = decide(&p, &f);
    is_allowed(&v, bound, &u, "alice", NOW);
    box.x5t = X5T_B;
    v = decide(&p, &f);
    is_refusal(&v, 401, LESSONS_CHALLENGE_DPOP, "invalid_token",
               LESSONS_REFUSED_OTHER, 722);
    box.x5t = X5T_A;
    f = facts_cert(bearer(plain), &box);
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_token");
    /* ... and where certificates are not looked at, it is a bearer
     * token, which DPoP required refuses.
     */
    p.certbind = LESSONS_CERTBIND_OFF;
    f = facts_cert(bearer(bound), &box);
    v = decide(&p, &f);
    is_dpop_refused(&v, "invalid_token");
}

/* ------------------------------------------------------ introspection */

#define OPAQUE   "2YotnFZFEjr1zCsicMWpAA"
#define OPAQUE_2 "tGzv3JOkF0XG5Qx2TlKWIA"
#define IEP      "https://a.example.org/introspect"

/* The provider as the glue would ask it: each token its answer (NULL:
 * no answer at all, the provider down), and what was asked.
 */
typedef struct {
    const char *token[4];
    const char *answer[4];
    int n;
    int calls;
    const char *asked;
    json_t *kept;                   /* a decoded answer the process keeps
                                     * for every token, as a cache hit
                                     * hands it out, or NULL */
} fake_idp_t;

static int fake_introspect(void *baton, apr_pool_t *p, const char *token,
                           apr_int64_t now, lessons_decide_introspection_t *out)
{
    fake_idp_t *idp = baton;
    int i;

    (void)now;
    idp->calls++;
    idp->asked = token;
    out->endpoint = IEP;
    if (idp->kept) {
        out->rc = lessons_introspect_read(
            lessons_json_pool_own(p, json_incref(idp->kept)), &out->res);
        return 0;
    }
    for (i = 0; i < idp->n; i++) {
        if (strcmp(idp->token[i], token) == 0) {
            if (!idp->answer[i]) {
                out->why = "timed out (limit 5000 ms)";
                return -1;
            }
            out->rc = lessons_introspect_parse(p, idp->answer[i],
                                               strlen(idp->answer[i]),
                                               &out->res);
            return 0;
        }
    }
    out->rc = lessons_introspect_parse(p, "{\"active\":false}", 16,
                                       &out->res);
    return 0;
}

static lessons_decide_policy_t policy_introspect(
    const lessons_decide_unit_t *u, fake_idp_t *idp)
{
    lessons_decide_policy_t p = policy_of(u, 1);

    p.introspect = fake_introspect;
    p.introspect_baton = idp;
    return p;
}

static const char *active_with(const char *more)
{
    return apr_psprintf(pool, "{\"active\":true,\"iss\":\"" ISS_A "\","
                        "\"aud\":\"" AUD "\",\"sub\":\"alice\",\"scope\":"
                        "\"lessons:read\",\"exp\":%" APR_INT64_T_FMT "%s}",
                        NOW + 600, more);
}

static void is_introspected(const lessons_verdict_t *v, const char *token,
                            const lessons_decide_unit_t *u, const char *user)
{
    if (v->kind != LESSONS_VERDICT_ALLOW) {
        fail_msg("want ALLOW, got %s %d (tag %d: %s)", verdict_name(v->kind),
                 v->status, v->line.tag,
                 v->line.text ? v->line.text : "");
    }
    assert_string_equal(v->token, token);
    assert_ptr_equal(v->unit, u);
    assert_string_equal(v->user, user);
    assert_true(v->claims_done);
    assert_non_null(v->claims);
    assert_non_null(v->introspected);
    assert_string_equal(v->introspected, IEP);
}

static void test_introspect_opaque(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    fake_idp_t idp = { { OPAQUE, OPAQUE_2 }, { NULL, NULL }, 2, 0, NULL,
                       NULL };
    lessons_decide_policy_t p = policy_introspect(&u, &idp);
    const char *names[] = { "scope" };
    lessons_verdict_t v;

    (void)state;
    idp.answer[0] = active_with("");
    idp.answer[1] = apr_psprintf(pool, "{\"active\":true,\"iss\":\"" ISS_A
                                 "\",\"aud\":\"" AUD "\",\"sub\":\"bob\","
                                 "\"scope\":\"lessons:write\"}");
    p.export_claims = names;
    p.nexport = 1;
    v = decide_auth(&p, bearer(OPAQUE));
    is_introspected(&v, OPAQUE, &u, "alice");
    assert_string_equal(idp.asked, OPAQUE);
    assert_string_equal(json_string_value(json_object_get(v.claims,
                                                          "scope")),
                        "lessons:read");
    assert_non_null(v.exports);
    assert_string_equal(APR_ARRAY_IDX(v.exports, 0,
                                      lessons_decide_export_t).value,
                        "lessons:read");
    /* Two tokens, two answers: each its own (no exp: the answer alone). */
    v = decide_auth(&p, bearer(OPAQUE_2));
    is_introspected(&v, OPAQUE_2, &u, "bob");
    assert_string_equal(json_string_value(json_object_get(v.claims,
                                                          "scope")),
                        "lessons:write");
    /* A JWT is verified, not asked about (LessonsJWTIntrospectJWT off). */
    idp.calls = 0;
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_A, ""))));
    assert_int_equal(v.kind, LESSONS_VERDICT_ALLOW);
    assert_null(v.introspected);
    assert_int_equal(idp.calls, 0);
    /* Without introspection an opaque token is a malformed JWT. */
    p.introspect = NULL;
    v = decide_auth(&p, bearer(OPAQUE));
    is_token_refused(&v, LESSONS_REFUSED_MALFORMED);
    assert_int_equal(idp.calls, 0);
}

static void test_introspect_refused(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    fake_idp_t idp = { { OPAQUE }, { NULL }, 1, 0, NULL, NULL };
    lessons_decide_policy_t p = policy_introspect(&u, &idp);
    lessons_verdict_t v;

    (void)state;
    /* Inactive. */
    idp.answer[0] = "{\"active\":false}";
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_OTHER, 740);
    assert_non_null(strstr(v.description, "not active"));
    /* Active by the provider's word, but past its exp. */
    idp.answer[0] = apr_psprintf(pool, "{\"active\":true,\"exp\":%"
                                 APR_INT64_T_FMT "}", NOW - 5);
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_EXPIRED, 741);
    /* The section's audience and issuer hold as for a JWT. */
    idp.answer[0] = "{\"active\":true,\"iss\":\"" ISS_A "\",\"aud\":\"x\"}";
    v = decide_auth(&p, bearer(OPAQUE));
    is_token_refused(&v, LESSONS_REFUSED_AUDIENCE);
    idp.answer[0] = "{\"active\":true,\"iss\":\"" ISS_C "\",\"aud\":\""
                    AUD "\"}";
    v = decide_auth(&p, bearer(OPAQUE));
    is_token_refused(&v, LESSONS_REFUSED_ISSUER);
    /* No iss: the endpoint's issuer's, whose endpoint it is. */
    idp.answer[0] = "{\"active\":true,\"aud\":\"" AUD "\",\"sub\":\"al\"}";
    v = decide_auth(&p, bearer(OPAQUE));
    is_introspected(&v, OPAQUE, &u, "al");
    assert_string_equal(json_string_value(json_object_get(v.claims, "iss")),
                        ISS_A);
    /* "active":"true", garbage: the provider's fault, 503, never 200. */
    idp.answer[0] = "{\"active\":\"true\",\"aud\":\"" AUD "\"}";
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 743);
    assert_int_equal(v.retry_after, LESSONS_RETRY_SECONDS);
    idp.answer[0] = "<html>";
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 743);
    /* Too long to be a token here: 401, the provider never asked. */
    {
        char *big = apr_palloc(pool, LESSONS_TOKEN_MAX_LEN + 2);

        memset(big, 'A', LESSONS_TOKEN_MAX_LEN + 1);
        big[LESSONS_TOKEN_MAX_LEN + 1] = '\0';
        idp.calls = 0;
        v = decide_auth(&p, bearer(big));
        is_token_refused(&v, LESSONS_REFUSED_MALFORMED);
        assert_int_equal(idp.calls, 0);
    }
    /* The provider down or slow: 503 with Retry-After. */
    idp.answer[0] = NULL;
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 742);
    assert_int_equal(v.retry_after, LESSONS_RETRY_SECONDS);
    assert_non_null(strstr(v.line.text, IEP));
    assert_non_null(strstr(v.line.text, "timed out"));
}

/* LessonsJWTIntrospectRate said no, so nothing was asked (issue 55,
 * item 4): a client over its share is told 429 at info, without a
 * challenge (its token may be fine); the server over its budget is a
 * load shed, 503 at warning; both with the budget's Retry-After.
 */
typedef struct {
    int over;                       /* LESSONS_DECIDE_OVER_* */
    int retry;                      /* its Retry-After */
    int calls;
} fake_budget_t;

static int fake_over(void *baton, apr_pool_t *p, const char *token,
                     apr_int64_t now, lessons_decide_introspection_t *out)
{
    fake_budget_t *b = baton;

    (void)p;
    (void)token;
    (void)now;
    b->calls++;
    out->endpoint = IEP;
    out->over = b->over;
    out->retry_after = b->retry;
    out->why = "over";
    return -1;
}

static void test_introspect_over(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    fake_budget_t idp = { LESSONS_DECIDE_OVER_CLIENT, 3, 0 };
    lessons_decide_policy_t p = policy_of(&u, 1);
    lessons_verdict_t v;

    (void)state;
    p.introspect = fake_over;
    p.introspect_baton = &idp;
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 429, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 770);
    assert_int_equal(v.line.level, LESSONS_DECIDE_INFO);
    assert_int_equal(v.line.fault, 0);
    assert_int_equal(v.retry_after, 3);
    assert_non_null(strstr(v.line.text, "nothing asked"));
    idp.over = LESSONS_DECIDE_OVER_SERVER;
    idp.retry = 0;
    v = decide_auth(&p, bearer(OPAQUE));
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 771);
    assert_int_equal(v.line.level, LESSONS_DECIDE_WARNING);
    assert_int_equal(v.retry_after, 1);
    /* A JWT that verifies is not asked about: the budget is not met. */
    idp.calls = 0;
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_A, ""))));
    assert_int_equal(v.kind, LESSONS_VERDICT_ALLOW);
    assert_int_equal(idp.calls, 0);
}

/* A kept answer is shared by every request with its token (the
 * process's cache hands out the object it decoded once): the gate reads
 * it, and the issuer it adds to an answer without one goes into a copy
 * of the request's own.
 */
static void test_introspect_kept_answer(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    fake_idp_t idp = { { OPAQUE }, { NULL }, 1, 0, NULL, NULL };
    lessons_decide_policy_t p = policy_introspect(&u, &idp);
    const char *text = "{\"active\":true,\"aud\":\"" AUD "\","
                       "\"sub\":\"al\"}";
    json_t *want = json_loads(text, 0, NULL);
    lessons_verdict_t v;
    int round;

    (void)state;
    idp.kept = json_loads(text, 0, NULL);
    assert_non_null(idp.kept);
    for (round = 0; round < 2; round++) {
        v = decide_auth(&p, bearer(OPAQUE));
        is_introspected(&v, OPAQUE, &u, "al");
        assert_string_equal(json_string_value(json_object_get(v.claims,
                                                              "iss")),
                            ISS_A);
        assert_ptr_not_equal(v.claims, idp.kept);
        assert_null(json_object_get(idp.kept, "iss"));
        assert_true(json_equal(idp.kept, want));
    }
    /* With its own iss the kept object itself is read, unchanged. */
    json_decref(idp.kept);
    idp.kept = json_loads(active_with(""), 0, NULL);
    json_decref(want);
    want = json_deep_copy(idp.kept);
    v = decide_auth(&p, bearer(OPAQUE));
    is_introspected(&v, OPAQUE, &u, "alice");
    assert_ptr_equal(v.claims, idp.kept);
    assert_true(json_equal(idp.kept, want));
    json_decref(idp.kept);
    json_decref(want);
}

/* cnf in an answer binds the token as in a JWT: DPoP's jkt, a client
 * certificate's x5t#S256.
 */
static void test_introspect_bound(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    fake_idp_t idp = { { OPAQUE }, { NULL }, 1, 0, NULL, NULL };
    lessons_decide_policy_t p = policy_introspect(&u, &idp);
    cert_box_t box = { X5T_A, 0 };
    lessons_decide_facts_t f;
    lessons_verdict_t v;

    (void)state;
    idp.answer[0] = active_with(",\"cnf\":{\"x5t#S256\":\"" X5T_A "\"}");
    p.certbind = LESSONS_CERTBIND_OPTIONAL;
    f = facts_cert(bearer(OPAQUE), &box);
    v = decide(&p, &f);
    is_introspected(&v, OPAQUE, &u, "alice");
    box.x5t = X5T_B;
    v = decide(&p, &f);
    is_cert_refused(&v, 722, "another client certificate");
    /* Bound to a DPoP key: sent as a bearer token, refused. */
    p.certbind = 0;
    p.dpop = LESSONS_DPOP_OPTIONAL;
    idp.answer[0] = active_with(",\"cnf\":{\"jkt\":\"0ZcOCORZNYy-DWpqq30j"
                                "ZyJGHTN0d2HglBV3uiguA4I\"}");
    v = decide_auth(&p, bearer(OPAQUE));
    is_dpop_refused(&v, "invalid_token");
    /* Where DPoP is required, an unbound opaque token is refused too. */
    p.dpop = LESSONS_DPOP_REQUIRED;
    idp.answer[0] = active_with("");
    v = decide_auth(&p, bearer(OPAQUE));
    is_dpop_refused(&v, "invalid_token");
}

/* LessonsJWTIntrospectJWT: a JWT that verified is asked about too, and a
 * revoked one refused; a JWT that does not verify is never sent out.
 */
static void test_introspect_jwt(void **state)
{
    lessons_decide_unit_t u = unit_hs();
    const char *jwt = hs_token(claims_with(ISS_A, ""));
    fake_idp_t idp = { { NULL }, { NULL }, 1, 0, NULL, NULL };
    lessons_decide_policy_t p = policy_introspect(&u, &idp);
    lessons_verdict_t v;

    (void)state;
    idp.token[0] = jwt;
    idp.answer[0] = active_with("");
    p.introspect_jwt = 1;
    v = decide_auth(&p, bearer(jwt));
    is_allowed(&v, jwt, &u, "alice", NOW);
    assert_int_equal(idp.calls, 1);
    assert_null(v.introspected);
    idp.answer[0] = "{\"active\":false}";
    v = decide_auth(&p, bearer(jwt));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_OTHER, 740);
    idp.answer[0] = NULL;
    v = decide_auth(&p, bearer(jwt));
    is_refusal(&v, 503, LESSONS_CHALLENGE_NONE, NO_ERROR, -1, 742);
    idp.calls = 0;
    v = decide_auth(&p, bearer(hs_token(claims_with(ISS_C, ""))));
    is_token_refused(&v, LESSONS_REFUSED_ISSUER);
    assert_int_equal(idp.calls, 0);
}

/* A section with no key, only a provider: every token is asked about,
 * a JWT too (no key could verify it here); without the provider the
 * same section is broken, never open.
 */
static void test_introspect_keyless(void **state)
{
    lessons_decide_unit_t u;
    const char *jwt = hs_token(claims_with(ISS_A, ""));
    fake_idp_t idp = { { NULL }, { NULL }, 1, 0, NULL, NULL };
    lessons_decide_policy_t p;
    lessons_verdict_t v;

    (void)state;
    memset(&u, 0, sizeof(u));
    u.token.issuer = ISS_A;
    u.token.audience = AUD;
    p = policy_introspect(&u, &idp);
    idp.token[0] = jwt;
    idp.answer[0] = active_with("");
    v = decide_auth(&p, bearer(jwt));
    is_introspected(&v, jwt, &u, "alice");
    assert_int_equal(idp.calls, 1);
    idp.answer[0] = "{\"active\":false}";
    v = decide_auth(&p, bearer(jwt));
    is_refusal(&v, 401, LESSONS_CHALLENGE_BEARER, "invalid_token",
               LESSONS_REFUSED_OTHER, 740);
    p.introspect = NULL;
    v = decide_auth(&p, bearer(jwt));
    assert_int_equal(v.kind, LESSONS_VERDICT_REFUSE);
    assert_int_not_equal(v.status, 200);
}

/* ------------------------------------------------------------ refusal_of */

static void test_refusal_of(void **state)
{
    (void)state;
    assert_int_equal(lessons_refusal_of(LESSONS_TOKEN_EXPIRED),
                     LESSONS_REFUSED_EXPIRED);
    assert_int_equal(lessons_refusal_of(LESSONS_TOKEN_BAD_SIGNATURE),
                     LESSONS_REFUSED_SIGNATURE);
    assert_int_equal(lessons_refusal_of(LESSONS_TOKEN_BAD_ISSUER),
                     LESSONS_REFUSED_ISSUER);
    assert_int_equal(lessons_refusal_of(LESSONS_TOKEN_UNKNOWN_ISSUER),
                     LESSONS_REFUSED_UNKNOWN_ISSUER);
    assert_int_equal(lessons_refusal_of(LESSONS_TOKEN_MALFORMED),
                     LESSONS_REFUSED_MALFORMED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_needed),
        cmocka_unit_test(test_broken),
        cmocka_unit_test(test_relaxed),
        cmocka_unit_test(test_key_misfit),
        cmocka_unit_test(test_no_token),
        cmocka_unit_test(test_malformed_header),
        cmocka_unit_test(test_dpop_scheme_not_taken),
        cmocka_unit_test(test_good_token),
        cmocka_unit_test(test_refused_tokens),
        cmocka_unit_test(test_unknown_kid),
        cmocka_unit_test(test_token_cache),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_fetched_no_set),
        cmocka_unit_test(test_fetched_live),
        cmocka_unit_test(test_user_claim),
        cmocka_unit_test(test_exports),
        cmocka_unit_test(test_dpop_refusals),
        cmocka_unit_test(test_dpop_good_proof),
        cmocka_unit_test(test_dpop_one_client_many_keys),
        cmocka_unit_test(test_dpop_leeway_bounded),
        cmocka_unit_test(test_dpop_nonce),
        cmocka_unit_test(test_dpop_no_table),
        cmocka_unit_test(test_certbind_optional),
        cmocka_unit_test(test_certbind_cached),
        cmocka_unit_test(test_certbind_required),
        cmocka_unit_test(test_introspect_opaque),
        cmocka_unit_test(test_introspect_over),
        cmocka_unit_test(test_introspect_refused),
        cmocka_unit_test(test_introspect_kept_answer),
        cmocka_unit_test(test_introspect_bound),
        cmocka_unit_test(test_introspect_jwt),
        cmocka_unit_test(test_introspect_keyless),
        cmocka_unit_test(test_refusal_of),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
