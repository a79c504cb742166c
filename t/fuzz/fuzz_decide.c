/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_decide.c: the gate's whole decision (lessons_decide) under every
 * kind of policy a merge can leave, held to what lessons_decide.h
 * promises: a policy that needs a token never allows a request without
 * one that verifies under the keys of one of its own units, whatever
 * else it says (broken, no unit, no key, no key set yet).
 *
 * The input's first four bytes (FUZZ_SEL_LEN) choose the policy and
 * the shape of the request (LLVMFuzzerTestOneInput lays them out, and
 * half the mutations flip them alone); the rest is the Authorization
 * header, the DPoP header, the method and the URI, split at 0x01.  The
 * policies are made once, from the real keys of fuzz_keys.h (an HS256
 * secret "hs" and the RSA key "rs"), with one issuer
 * ("https://idp.example") or two <LessonsJWTIssuer> blocks (and
 * "https://other.example", RS256 only), so that the seeds' valid tokens
 * (t/fuzz/corpus/decide) are allowed and the fuzzer starts deep.  The
 * clock is fixed, so the seeds stay valid.  Each request is decided
 * without a token cache, then twice through one.
 *
 * Checked on every input, with abort():
 *   a verdict is NOT_NEEDED exactly when the policy needs no token;
 *   ALLOW only for the token of the Authorization header that
 *     lessons_token_verify (no cache) accepts under the verdict's
 *     policy, which is its unit's (the unit one of the policy's, neither
 *     it nor the policy broken; its keys, or its fetcher's set); the
 *     DPoP scheme only where the section takes it, a proof taken from
 *     the replay table, a bound token never as a bearer token, a token
 *     bound to a certificate only with that certificate and, where
 *     binding is required, none bound to nothing (LessonsJWTCertBound),
 *     a user and exports that keep the text rule;
 *   REFUSE with a status of 400, 401, 403, 429, 500 or 503, a
 *     description and a log line, a challenge exactly for what is
 *     neither a fault nor a client over its share of the DPoP proofs
 *     seen (429, with Retry-After), and neither holding a JWT-shaped
 *     token of the request;
 *   where the section introspects (LessonsJWTIntrospect), an opaque
 *     token (or, with no key, any token) ALLOWed only when the provider
 *     (an answer from the input, or none: down) said active, the JSON
 *     true, its times good, and its claims pass the JWT's checks under
 *     the unit's policy, then the same DPoP, binding, user and export
 *     rules; a JWT with LessonsJWTIntrospectJWT only when it verifies
 *     and the provider said active;
 *   a good bearer token, where nothing but the token is asked, is
 *     allowed, by the unit of the issuer it names (so that the checks
 *     above are not met by refusing all);
 *   what the merge chain required (the policy's floor: DPoP,
 *     certificate binding, at+jwt, one audience) is never relaxed: no
 *     ALLOW where the settings in effect are weaker than the floor, and
 *     an ALLOW's own policy is at least as strict (issue 55);
 *   the three decisions agree (a cache hit judges as a full verify);
 *   tenants (issue 55 §1, layout FUZZ_TENANTS): three sections name one
 *     keys URL, each with a CA (the provider's, an attacker's, none: the
 *     system's), a proxy (none, an honest one, the attacker's) and
 *     algorithms drawn from the input; lessons_keytrust_share says which
 *     fetch serves the request's section, and that fetch's set is what
 *     its own trust reaches (the attacker's proxy: the attacker's set,
 *     which holds "rs"; else the provider's, "rs" under another
 *     modulus; its CA not the server's: no set).  A token is ALLOWed by
 *     its keys only where the section's own trust reaches "rs", and a
 *     good bearer token is ALLOWed there.
 */
#include "fuzz.h"

#include "apr_strings.h"

#include "auth/lessons_certbind.h"
#include "auth/lessons_claims.h"
#include "auth/lessons_decide.h"
#include "auth/lessons_dpop.h"
#include "auth/lessons_introspect.h"
#include "keys/lessons_keyset.h"
#include "keys/lessons_keysource.h"
#include "keys/lessons_keytrust.h"
#include "auth/lessons_replay.h"
#include "auth/lessons_token.h"
#include "auth/lessons_tokencache.h"

#include "fuzz_keys.h"

/* The fetcher's pools are unmanaged: APR's allocator keeps its nodes in
 * memory of its own (mmap), which the leak check does not read, so their
 * allocators would count as leaked at every check while the fetcher
 * runs.  They are told apart, and only they.
 */
#define FUZZ_NOT_LEAKED(pool) FUZZ_KEEP(apr_pool_allocator_get(pool))

#define FUZZ_NOW      1700000000
/* The connection's client certificate, where the input gives one. */
#define FUZZ_X5T      "lwHi5vSo1n3enaiJlcT1HpwWcy0FkQQ2p4K1XXdgMdc"
#define FUZZ_ISS_A    "https://idp.example"
#define FUZZ_ISS_B    "https://other.example"
#define FUZZ_URI      "https://api.example/api/lessons/7"
#define FUZZ_SEL_LEN  4
#define FUZZ_SLOTS    64

/* The layouts a merge can leave (the policy byte s[1], modulo). */
enum {
    FUZZ_SINGLE_SET = 0,    /* the section's key file: the whole set */
    FUZZ_SINGLE_KEY,        /* one HS256 secret, one algorithm */
    FUZZ_BLOCKS,            /* two issuer blocks: A (set), B (rs only) */
    FUZZ_FETCHED_NONE,      /* a keys URL whose fetcher could not start,
                             * no key file */
    FUZZ_FETCHED_FILE,      /* ... with a key file's set meanwhile */
    FUZZ_NO_KEY,            /* no key at all (what a merge may leave) */
    FUZZ_BLOCKS_FETCHED,    /* blocks, B fetched without a set */
    FUZZ_NO_UNITS,          /* needed, and no unit */
    FUZZ_LIVE,              /* a keys URL with a running fetcher */
    FUZZ_BLOCKS_NO_KEY,     /* blocks, B without a key */
    FUZZ_BLOCKS_LIVE,       /* blocks, B's keys from a running fetcher */
    FUZZ_ANY_ISSUER,        /* the whole set, no issuer nor audience */
    FUZZ_TENANTS,           /* a keys URL named by three sections, each
                             * with its own trust (fuzz_tenants) */
    FUZZ_LAYOUTS
};

static const char *const fuzz_issuers[] = { FUZZ_ISS_A, FUZZ_ISS_B };
static lessons_decide_unit_t layouts[FUZZ_LAYOUTS][2];
static int layout_units[FUZZ_LAYOUTS];
static int layout_blocks[FUZZ_LAYOUTS];
static lessons_keyset_t *set_all, *set_rs;
static lessons_keysource_t *live, *live_alt;
static apr_pool_t *live_pool, *live_alt_pool;
static char *jwks_alt;              /* FUZZ_JWKS with "rs" under another
                                     * modulus: the provider's, where the
                                     * attacker holds "rs" (fuzz_tenants) */
static void *replay_mem;
static apr_size_t replay_size;

/* The fetcher's set: the public keys of its JWKS (the baton, else
 * FUZZ_JWKS: rs), as a keys URL gives them.
 */
static const char *fuzz_fetch(void *baton, apr_pool_t *set_pool,
                              apr_pool_t *scratch,
                              const lessons_keyset_t **set,
                              const char **doc, apr_size_t *len)
{
    const char *jwks = baton ? baton : FUZZ_JWKS;
    const char *msg;

    FUZZ_NOT_LEAKED(set_pool);
    FUZZ_NOT_LEAKED(scratch);
    msg = lessons_keysource_parse(set_pool, scratch, jwks, strlen(jwks),
                                  LESSONS_ALG_BIT(LESSONS_ALG_RS256), 0, set);
    fuzz_keep_keys(msg ? NULL : *set);
    *doc = jwks;
    *len = strlen(jwks);
    return msg;
}

static lessons_decide_unit_t fuzz_unit(const char *issuer,
                                       const lessons_keyset_t *keys,
                                       lessons_algs_t algs)
{
    lessons_decide_unit_t u;

    memset(&u, 0, sizeof(u));
    u.token.keys = keys;
    u.token.algs = algs;
    u.token.issuer = issuer;
    u.token.audience = "lessons";
    u.keys_name = "the key file fuzz-keys";
    u.where = "fuzz-conf:1";
    u.alg_name = "HS256 RS256";
    u.retry_after = 7;
    return u;
}

/* The fetcher's thread ends before the leak check at exit, which
 * would count its pool.
 */
static void fuzz_stop(void)
{
    apr_pool_destroy(live_alt_pool);
    apr_pool_destroy(live_pool);
}

/* A fetcher that has its set (of jwks: NULL for FUZZ_JWKS), and is never
 * asked again: its first and only fetch ends here, before any input.
 */
static void fuzz_start_live(apr_pool_t *p, const char *jwks,
                            lessons_keysource_t **src, apr_pool_t **pool)
{
    lessons_keysource_opts_t o;
    apr_pool_t *hold;

    memset(&o, 0, sizeof(o));
    o.refresh = apr_time_from_sec(86400);
    o.min_refresh = apr_time_from_sec(86400);
    o.wait = apr_time_from_sec(5);
    o.max_waiters = 2;
    o.fetch = fuzz_fetch;
    o.fetch_baton = (void *)jwks;
    if (apr_pool_create(pool, p) != APR_SUCCESS
        || lessons_keysource_start(src, &o, *pool) != APR_SUCCESS
        || apr_pool_create(&hold, p) != APR_SUCCESS
        || !lessons_keysource_take(*src, hold)) {
        abort();
    }
    apr_pool_destroy(hold);
}

static void fuzz_setup(apr_pool_t *p)
{
    const lessons_algs_t both = LESSONS_ALG_BIT(LESSONS_ALG_HS256)
                                | LESSONS_ALG_BIT(LESSONS_ALG_RS256);
    const lessons_algs_t rs = LESSONS_ALG_BIT(LESSONS_ALG_RS256);
    lessons_decide_unit_t *u;
    char *n;
    int i;

    if (lessons_keyset_parse_jwks(p, FUZZ_JWKS, strlen(FUZZ_JWKS), &set_all)
        || lessons_keyset_parse_jwks_ex(p, FUZZ_JWKS, strlen(FUZZ_JWKS),
                                        LESSONS_JWKS_PUBLIC_ONLY, &set_rs)
        || set_all->nkeys != 2 || set_rs->nkeys != 1) {
        abort();
    }
    fuzz_keep_keys(set_all);
    fuzz_keep_keys(set_rs);
    /* The provider's "rs" (fuzz_tenants): one digit of its modulus
     * changed, well inside it (its size and parity kept).
     */
    jwks_alt = apr_pstrdup(p, FUZZ_JWKS);
    n = strstr(jwks_alt, "\"n\":\"");
    if (!n || strlen(n) < 80) {
        abort();
    }
    n[60] = n[60] == 'A' ? 'B' : 'A';
    fuzz_start_live(p, NULL, &live, &live_pool);
    fuzz_start_live(p, jwks_alt, &live_alt, &live_alt_pool);
    if (atexit(fuzz_stop) != 0) {
        abort();
    }
    replay_size = lessons_replay_size(FUZZ_SLOTS);
    replay_mem = apr_palloc(p, replay_size);

    for (i = 0; i < FUZZ_LAYOUTS; i++) {
        layout_units[i] = 1;
        layouts[i][0] = fuzz_unit(FUZZ_ISS_A, set_all, both);
    }
    u = layouts[FUZZ_SINGLE_KEY];
    u->token.keys = NULL;
    u->token.algs = 0;
    u->token.alg = LESSONS_ALG_HS256;
    u->token.key = &set_all->keys[0].key;   /* "hs" */
    u->alg_name = "HS256";

    u = layouts[FUZZ_FETCHED_NONE];
    u->fetched = 1;
    u->token.keys = NULL;
    u->keys_name = "keys URL https://idp.example/certs";
    layouts[FUZZ_FETCHED_FILE][0].fetched = 1;
    layouts[FUZZ_NO_KEY][0].token.keys = NULL;
    layout_units[FUZZ_NO_UNITS] = 0;
    u = layouts[FUZZ_LIVE];
    u->fetched = 1;
    u->live = live;
    u->token.keys = NULL;
    u->token.algs = rs;
    u->keys_name = "keys URL https://idp.example/certs";
    layouts[FUZZ_TENANTS][0] = layouts[FUZZ_LIVE][0];
    u = layouts[FUZZ_ANY_ISSUER];
    u->token.issuer = NULL;
    u->token.audience = NULL;

    for (i = FUZZ_BLOCKS; i < FUZZ_LAYOUTS; i++) {
        if (i != FUZZ_BLOCKS && i != FUZZ_BLOCKS_FETCHED
            && i != FUZZ_BLOCKS_NO_KEY && i != FUZZ_BLOCKS_LIVE) {
            continue;
        }
        layout_units[i] = 2;
        layout_blocks[i] = 1;
        layouts[i][0].issuer = FUZZ_ISS_A;
        layouts[i][1] = fuzz_unit(FUZZ_ISS_B, set_rs, rs);
        layouts[i][1].issuer = FUZZ_ISS_B;
        layouts[i][1].where = "fuzz-conf:2";
    }
    u = &layouts[FUZZ_BLOCKS_FETCHED][1];
    u->fetched = 1;
    u->token.keys = NULL;
    u = &layouts[FUZZ_BLOCKS_NO_KEY][1];
    u->token.keys = NULL;
    u = &layouts[FUZZ_BLOCKS_LIVE][1];
    u->fetched = 1;
    u->live = live;
    u->token.keys = NULL;
}

/* The replay table the glue asks under its mutex: a real one, and
 * whether it took a proof.
 */
typedef struct {
    lessons_replay_t *table;
    int taken;
} fuzz_replay_t;

static int fuzz_replay(void *baton, const unsigned char *key,
                       apr_uint32_t owner, apr_uint32_t group,
                       apr_time_t expires, apr_time_t now)
{
    fuzz_replay_t *r = baton;
    lessons_replay_e rc = lessons_replay_check_in(r->table, key, owner, group,
                                                  expires, now);

    r->taken += rc == LESSONS_REPLAY_NEW;
    return (int)rc;
}

/* The claim text rule: no control character, at most max bytes. */
static int fuzz_text_ok(const char *s, apr_size_t max)
{
    return s && lessons_claims_text_check(s, strlen(s), max)
                == LESSONS_CLAIM_TEXT_OK;
}

static int fuzz_same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The token the Authorization header holds in a section of this DPoP
 * mode (and whether in the DPoP scheme), or NULL.
 */
static const char *fuzz_header_token(apr_pool_t *p, const char *header,
                                     int mode, int *dpop)
{
    const char *token = NULL;

    *dpop = 0;
    if (lessons_bearer_parse(p, header, &token) == LESSONS_BEARER_OK) {
        return token;
    }
    if ((mode == LESSONS_DPOP_OPTIONAL || mode == LESSONS_DPOP_REQUIRED)
        && lessons_auth_parse(p, header, "DPoP", &token)
           == LESSONS_BEARER_OK) {
        *dpop = 1;
        return token;
    }
    return NULL;
}

/* The provider the decision may ask: its answer is the input's last
 * field (or none: the provider down), and what it said last, judged.
 */
typedef struct {
    const char *answer;
    int calls;
    lessons_introspect_e said;
    long leeway;
} fuzz_idp_t;

static int fuzz_introspect(void *baton, apr_pool_t *p, const char *token,
                           apr_int64_t now,
                           lessons_decide_introspection_t *out)
{
    fuzz_idp_t *idp = baton;

    (void)token;
    idp->calls++;
    idp->said = LESSONS_INTROSPECT_MALFORMED;
    out->endpoint = FUZZ_ISS_A "/introspect";
    if (!idp->answer) {
        out->why = "timed out";
        return -1;
    }
    out->rc = lessons_introspect_parse(p, idp->answer, strlen(idp->answer),
                                       &out->res);
    idp->said = lessons_introspect_judge(out->rc, &out->res, now,
                                         idp->leeway);
    return 0;
}

/* Is anything in effect weaker than the floor?  Worked out here from
 * the fields, not by lessons_decide_relaxed.
 */
static int fuzz_relaxed(const lessons_decide_policy_t *policy)
{
    const lessons_decide_floor_t *fl = &policy->floor;
    int i;

    if ((policy->dpop ? policy->dpop : LESSONS_DPOP_OFF) < fl->dpop
        || (policy->certbind ? policy->certbind : LESSONS_CERTBIND_OFF)
           < fl->certbind) {
        return 1;
    }
    for (i = 0; policy->units && i < policy->nunits; i++) {
        const lessons_token_policy_t *t = &policy->units[i].token;

        if ((fl->at_jwt_where && !t->require_at_jwt)
            || (fl->audience && !fuzz_same_str(fl->audience, t->audience))) {
            return 1;
        }
    }
    return 0;
}

/* What ALLOW must be. */
static void fuzz_check_allow(apr_pool_t *p,
                             const lessons_decide_policy_t *policy,
                             const lessons_decide_facts_t *facts,
                             const lessons_verdict_t *v,
                             const fuzz_replay_t *replay)
{
    const lessons_decide_unit_t *unit = v->unit;
    const lessons_token_policy_t *mine, *used = &v->policy;
    const char *token, *subject = NULL, *name;
    json_t *claims = NULL;
    int mode = policy->dpop ? policy->dpop : LESSONS_DPOP_OFF;
    int dpop, i;

    if (!policy->needed || policy->broken || !policy->units
        || policy->nunits < 1 || !unit || unit < policy->units
        || unit >= policy->units + policy->nunits || unit->broken
        || fuzz_relaxed(policy)) {
        abort();
    }
    /* As strict as the chain asked, in what this token met. */
    if ((policy->floor.at_jwt_where && !used->require_at_jwt)
        || (policy->floor.audience
            && !fuzz_same_str(used->audience, policy->floor.audience))) {
        abort();
    }
    token = fuzz_header_token(p, facts->authorization, mode, &dpop);
    if (!token || !v->token || strcmp(token, v->token) != 0
        || dpop != !!v->dpop) {
        abort();
    }
    /* The provider's word: asked, active, and its claims as a JWT's
     * would be checked; from there on, the rules below.
     */
    if (v->introspected || (policy->introspect && policy->introspect_jwt)) {
        const fuzz_idp_t *idp = policy->introspect_baton;

        if (!policy->introspect || policy->blocks || !idp || idp->calls < 1
            || idp->said != LESSONS_INTROSPECT_ACTIVE) {
            abort();
        }
    }
    if (v->introspected) {
        if (!v->claims || unit != &policy->units[0]
            || lessons_token_check_introspected(p, used, v->claims,
                                                facts->now, &subject)
               != LESSONS_TOKEN_OK) {
            abort();
        }
        claims = v->claims;
        goto bound;
    }
    /* The policy it verified under is its unit's: only the keys may be
     * its fetcher's set.
     */
    mine = &unit->token;
    if (used->alg != mine->alg || used->key != mine->key
        || used->algs != mine->algs || used->leeway != mine->leeway
        || used->require_at_jwt != mine->require_at_jwt
        || !fuzz_same_str(used->issuer, mine->issuer)
        || !fuzz_same_str(used->audience, mine->audience)
        || (used->keys != mine->keys
            && !(unit->fetched && unit->live && used->keys))) {
        abort();
    }
    if (lessons_token_verify(p, used, token, facts->now, &subject)
        != LESSONS_TOKEN_OK) {
        abort();
    }
    /* A block verifies only the tokens naming its issuer. */
    if (policy->blocks
        && (!unit->issuer
            || lessons_token_pick_issuer(p, token, &unit->issuer, 1, &i)
               != LESSONS_TOKEN_OK)) {
        abort();
    }
    /* DPoP: the scheme only where the section takes it, with the one
     * proof the table took; a token bound to a DPoP key never as a
     * bearer token, and where DPoP is on, no bearer token bound in
     * another way DPoP cannot use nor (required) an unbound one: only a
     * token bound to a certificate where certificates are judged (the
     * check below holds it to its certificate).
     */
    if (lessons_token_verify_claims(p, used, NULL, token, facts->now,
                                    &subject, &claims) != LESSONS_TOKEN_OK
        || !claims) {
        abort();
    }
bound:
    if (v->dpop) {
        if (facts->dpop_lines != 1 || !facts->dpop || !policy->replay
            || replay->taken != 1
            || !lessons_dpop_token_jkt(claims)) {
            abort();
        }
    }
    else if (mode == LESSONS_DPOP_REQUIRED
             || mode == LESSONS_DPOP_OPTIONAL) {
        const char *jkt = lessons_dpop_token_jkt(claims);
        int by_cert = policy->certbind > LESSONS_CERTBIND_OFF
                      && lessons_certbind_bound(claims);

        if ((jkt && (*jkt || !by_cert))
            || (mode == LESSONS_DPOP_REQUIRED && !by_cert)) {
            abort();
        }
    }
    /* Certificate binding: a bound token only on a connection with its
     * certificate; where required, an unbound one only as a proved DPoP
     * token.
     */
    if (policy->certbind == LESSONS_CERTBIND_OPTIONAL
        || policy->certbind == LESSONS_CERTBIND_REQUIRED) {
        lessons_certbind_e bound = lessons_certbind_check(
            claims, facts->cert ? facts->cert(facts->cert_baton) : NULL);

        if ((bound != LESSONS_CERTBIND_UNBOUND
             && bound != LESSONS_CERTBIND_MATCH)
            || (policy->certbind == LESSONS_CERTBIND_REQUIRED
                && bound == LESSONS_CERTBIND_UNBOUND && !v->dpop)) {
            abort();
        }
    }
    if (v->user && !fuzz_text_ok(v->user, (apr_size_t)-1)) {
        abort();
    }
    for (i = 0; v->exports && i < v->exports->nelts; i++) {
        const lessons_decide_export_t *e =
            &APR_ARRAY_IDX(v->exports, i, lessons_decide_export_t);

        name = e->name;
        if (!name || strncmp(name, LESSONS_CLAIMS_ENV_PREFIX,
                             strlen(LESSONS_CLAIMS_ENV_PREFIX)) != 0
            || !e->value || !fuzz_text_ok(e->value, LESSONS_CLAIM_MAX)) {
            abort();
        }
    }
}

/* What REFUSE must be. */
static void fuzz_check_refuse(const lessons_decide_facts_t *facts,
                              const lessons_verdict_t *v)
{
    const char *auth = facts->authorization, *token;

    if ((v->status != 400 && v->status != 401 && v->status != 403
         && v->status != 429 && v->status != 500 && v->status != 503)
        || !v->description || !v->line.text
        || v->refusal < -1 || v->refusal >= LESSONS_REFUSED_COUNT
        || (v->status >= 500 || v->status == 429)
           != (v->challenge == LESSONS_CHALLENGE_NONE)
        || (v->status >= 500) != !!v->line.fault
        || (v->status == 429 && (v->retry_after <= 0
                                 || v->refusal != LESSONS_REFUSED_DPOP))) {
        abort();
    }
    /* No token in what is logged or answered: one that looks like a
     * JWT (two dots, long enough not to be a word of the text).
     */
    token = auth ? strrchr(auth, ' ') : NULL;
    if (token && strlen(++token) >= 24 && strchr(token, '.')
        && strchr(token, '.') != strrchr(token, '.')
        && (strstr(v->line.text, token) || strstr(v->description, token))) {
        abort();
    }
}

/* The verdict as a few numbers, to compare two decisions. */
static int fuzz_same_verdict(const lessons_verdict_t *a,
                             const lessons_verdict_t *b)
{
    return a->kind == b->kind && a->status == b->status
           && a->refusal == b->refusal && a->line.tag == b->line.tag
           && a->unit == b->unit && fuzz_same_str(a->user, b->user);
}

/* Half the mutations flip a bit or two of the selector alone: the
 * seeds' tokens are valid only as they are, and a mutation anywhere in
 * an input of some 500 bytes would seldom try one under another policy.
 */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed)
{
    if (size < FUZZ_SEL_LEN || seed % 2) {
        return LLVMFuzzerMutate(data, size, max_size);
    }
    data[(seed >> 1) % FUZZ_SEL_LEN] ^= (uint8_t)(1u << (seed >> 3) % 8);
    if (seed & 0x40) {
        data[(seed >> 7) % FUZZ_SEL_LEN] ^= (uint8_t)(1u << (seed >> 9) % 8);
    }
    return size;
}

/* One decision of the request, checked: the replay table fresh, so that
 * decisions of one input can be compared.
 */
static void fuzz_decide_once(apr_pool_t *p,
                             const lessons_decide_policy_t *policy,
                             const lessons_decide_facts_t *facts,
                             fuzz_replay_t *replay, lessons_verdict_t *v)
{
    replay->table = lessons_replay_attach(replay_mem, replay_size,
                                          FUZZ_SLOTS, 1);
    replay->taken = 0;
    if (!replay->table) {
        abort();
    }
    if (lessons_decide(p, policy, facts, v) != v->kind) {
        abort();
    }
    switch (v->kind) {
    case LESSONS_VERDICT_NOT_NEEDED:
        if (policy->needed) {
            abort();
        }
        break;
    case LESSONS_VERDICT_ALLOW:
        fuzz_check_allow(p, policy, facts, v, replay);
        break;
    case LESSONS_VERDICT_REFUSE:
        fuzz_check_refuse(facts, v);
        break;
    default:
        abort();
    }
    if (!policy->needed && v->kind != LESSONS_VERDICT_NOT_NEEDED) {
        abort();
    }
}

/* A good bearer token where nothing else is asked is allowed, by the
 * unit of the issuer it names.
 */
static void fuzz_check_good_token(apr_pool_t *p,
                                  const lessons_decide_policy_t *policy,
                                  const lessons_decide_facts_t *facts,
                                  int layout, const lessons_verdict_t *v)
{
    const lessons_decide_unit_t *units = policy->units;
    const char *token, *subject = NULL;
    int i = 0, dpop;

    token = fuzz_header_token(p, facts->authorization, LESSONS_DPOP_OFF,
                              &dpop);
    if (!token || !policy->needed || policy->broken || fuzz_relaxed(policy)
        || (layout != FUZZ_SINGLE_SET && layout != FUZZ_SINGLE_KEY
            && layout != FUZZ_ANY_ISSUER && layout != FUZZ_BLOCKS)
        || (policy->dpop != 0 && policy->dpop != LESSONS_DPOP_OFF)
        || policy->certbind > LESSONS_CERTBIND_OFF || policy->introspect
        || (policy->user_claim && strcmp(policy->user_claim, "sub"))) {
        return;
    }
    if ((!policy->blocks
         || lessons_token_pick_issuer(p, token, fuzz_issuers, 2, &i)
            == LESSONS_TOKEN_OK)
        && !units[i].broken
        && lessons_token_verify(p, &units[i].token, token, FUZZ_NOW,
                                &subject) == LESSONS_TOKEN_OK
        && (!subject || fuzz_text_ok(subject, LESSONS_USER_MAX))
        && (v->kind != LESSONS_VERDICT_ALLOW || v->unit != &units[i])) {
        abort();
    }
}

/* Tenants (issue 55 §1): three sections name one keys URL, each with
 * its own trust drawn from h (CA: none, the provider's, the attacker's;
 * proxy: none, honest, the attacker's; algorithms), one of them (by h)
 * the request's.  The request's unit takes the fetch lessons_keytrust_share
 * gives it: the fetch of the first section alike, made with that
 * section's trust (the attacker's proxy reaches the attacker, whose set
 * holds "rs"; anything else the provider, whose "rs" has another
 * modulus; a CA that did not sign the server reached: no set).  Returns
 * whether the request's section's OWN trust reaches "rs": only then may
 * a token pass by its keys.
 */
static int fuzz_tenants(apr_uint32_t h, lessons_decide_unit_t *unit)
{
    static const char *const cas[] = { NULL, "CA of the provider",
                                       "CA of the attacker" };
    static const char *const proxies[] = { NULL, "http://honest:3128",
                                           "http://attacker:3128" };
    lessons_keytrust_t t[3];
    const lessons_keytrust_t *tp[3];
    int same[3], ca[3], proxy[3], k, me, by;

    for (k = 0; k < 3; k++) {
        ca[k] = (int)(h % 3);
        h /= 3;
        proxy[k] = (int)(h % 3);
        h /= 3;
        memset(&t[k], 0, sizeof(t[k]));
        t[k].url = "https://idp.example/certs";
        t[k].ca_pem = cas[ca[k]];
        t[k].ca_len = cas[ca[k]] ? strlen(cas[ca[k]]) : 0;
        t[k].proxy = proxies[proxy[k]];
        t[k].algs = LESSONS_ALG_BIT(LESSONS_ALG_RS256)
                    | (h & 1 ? LESSONS_ALG_BIT(LESSONS_ALG_ES256) : 0);
        h >>= 1;
        tp[k] = &t[k];
    }
    me = (int)(h % 3);                  /* the request's section */
    lessons_keytrust_share(tp, NULL, 3, same);
    /* The fetch serving it, made with its first's trust. */
    by = same[me] < 0 ? me : same[me];
    unit->fetched = 1;
    unit->live = NULL;                          /* no set: 503 */
    if (proxy[by] == 2 && ca[by] == 2) {
        unit->live = live;                      /* the attacker's rs */
    }
    else if (proxy[by] != 2 && ca[by] == 1) {
        unit->live = live_alt;                  /* the provider's */
    }
    return proxy[me] == 2 && ca[me] == 2;
}

/* FNV-1a over the request's bytes: the tenants' trust. */
static apr_uint32_t fuzz_hash(const uint8_t *data, size_t size)
{
    apr_uint32_t h = 2166136261u;

    while (size--) {
        h = (h ^ *data++) * 16777619u;
    }
    return h;
}

/* Where the request's own trust does not reach "rs", no token passes by
 * its keys; where it does, a good bearer token with nothing else asked
 * passes.
 */
static void fuzz_check_tenants(apr_pool_t *p,
                               const lessons_decide_policy_t *policy,
                               const lessons_decide_facts_t *facts,
                               int reaches_rs, const lessons_verdict_t *v)
{
    lessons_token_policy_t own = policy->units[0].token;
    const char *token, *subject = NULL;
    int dpop;

    if (v->kind == LESSONS_VERDICT_ALLOW && !v->introspected
        && !reaches_rs) {
        abort();
    }
    token = fuzz_header_token(p, facts->authorization, LESSONS_DPOP_OFF,
                              &dpop);
    own.keys = set_rs;
    if (reaches_rs && token && policy->needed && !policy->broken
        && !policy->units[0].broken && !fuzz_relaxed(policy)
        && (policy->dpop == 0 || policy->dpop == LESSONS_DPOP_OFF)
        && policy->certbind <= LESSONS_CERTBIND_OFF && !policy->introspect
        && (!policy->user_claim || !strcmp(policy->user_claim, "sub"))
        && lessons_token_verify(p, &own, token, FUZZ_NOW, &subject)
           == LESSONS_TOKEN_OK
        && (!subject || fuzz_text_ok(subject, LESSONS_USER_MAX))
        && v->kind != LESSONS_VERDICT_ALLOW) {
        abort();
    }
}

/* The facts' certificate: the baton is its thumbprint, or NULL. */
static const char *fuzz_cert(void *baton)
{
    return baton;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const exports[] = { "groups", "email",
                                           "realm_access.roles" };
    static const char *const user_claims[] = { NULL, "sub", "email",
                                               "preferred_username" };
    uint8_t s[FUZZ_SEL_LEN] = { 0 };
    int reaches_rs = 0;
    lessons_decide_unit_t units[2];
    lessons_decide_policy_t policy;
    lessons_decide_facts_t facts;
    lessons_verdict_t v, again;
    fuzz_replay_t replay;
    fuzz_idp_t idp;
    apr_pool_t *p;
    char *auth, *dpop, *method, *uri, *rest, *answer;
    int layout, pass;

    memcpy(s, data, size < FUZZ_SEL_LEN ? size : FUZZ_SEL_LEN);
    data += size < FUZZ_SEL_LEN ? size : FUZZ_SEL_LEN;
    size -= size < FUZZ_SEL_LEN ? size : FUZZ_SEL_LEN;
    apr_pool_create(&p, fuzz_root);

    /* The request: Authorization, DPoP, method, URI; s[0] bits 4-7. */
    fuzz_split(p, data, size, &auth, &rest);
    fuzz_split(p, (const uint8_t *)rest, strlen(rest), &dpop, &rest);
    fuzz_split(p, (const uint8_t *)rest, strlen(rest), &method, &rest);
    fuzz_split(p, (const uint8_t *)rest, strlen(rest), &uri, &answer);
    memset(&facts, 0, sizeof(facts));
    facts.method = *method ? method : "GET";
    facts.path = "/api/lessons/7";
    facts.uri = *uri ? uri : FUZZ_URI;
    facts.authorization = s[0] & 0x10 ? NULL : auth;
    facts.dpop = s[0] & 0x20 ? NULL : dpop;
    facts.dpop_lines = facts.dpop ? s[0] >> 6 : 0;
    facts.now = FUZZ_NOW;
    facts.clock = apr_time_from_sec(FUZZ_NOW);

    /* The policy:
     *   s[0] bits 0-1   needed (0: none)
     *   s[0] bits 2-3   1: the policy broken, 2: a unit broken
     *   s[1]            the layout (modulo FUZZ_LAYOUTS)
     *   s[2] bits 0-1   dpop: 0, OFF, OPTIONAL, REQUIRED
     *   s[2] bits 2-3   user claim: none, sub, email, preferred_username
     *   s[2] bit 4      export claims
     *   s[2] bit 5      a replay table (else none)
     *   s[2] bit 7      which block is broken
     *   s[3] bit 0      leeway 30 s
     *   s[3] bits 1-2   certbind: 0, OFF, OPTIONAL, REQUIRED
     *   s[3] bit 3      the connection has a certificate (FUZZ_X5T)
     *   s[3] bit 4      introspection (the answer: the input's last field)
     *   s[3] bit 5      ... the provider down (no answer)
     *   s[3] bit 6      ... JWTs asked about too (LessonsJWTIntrospectJWT)
     *   s[2] bit 6,     the floor (what the merge chain required): none;
     *   s[3] bit 7        DPoP and binding optional; DPoP required and
     *                     at+jwt (every unit at+jwt where the layout's
     *                     number is odd); binding required and the
     *                     units' audience, or another where the
     *                     layout's number halved is odd
     */
    layout = s[1] % FUZZ_LAYOUTS;
    units[0] = layouts[layout][0];
    units[1] = layouts[layout][1];
    memset(&policy, 0, sizeof(policy));
    policy.needed = s[0] & 0x03 ? "fuzz-conf:1" : NULL;
    policy.broken = (s[0] >> 2 & 3) == 1 ? "a section merged after it "
                                           "left no key" : NULL;
    if ((s[0] >> 2 & 3) == 2) {
        units[layout_units[layout] == 2 ? s[2] >> 7 : 0].broken =
            "its keys do not verify";
    }
    if (layout == FUZZ_TENANTS) {
        reaches_rs = fuzz_tenants(fuzz_hash(data, size), &units[0]);
    }
    policy.units = layout_units[layout] ? units : NULL;
    policy.nunits = layout_units[layout];
    policy.blocks = layout_blocks[layout];
    policy.where = "fuzz-conf:1";
    policy.dpop = s[2] & 3;
    policy.certbind = s[3] >> 1 & 3;
    facts.cert = fuzz_cert;
    facts.cert_baton = s[3] & 0x08 ? (void *)FUZZ_X5T : NULL;
    policy.leeway = s[3] & 1 ? 30 : 0;
    units[0].token.leeway = units[1].token.leeway = policy.leeway;
    policy.user_claim = user_claims[s[2] >> 2 & 3];
    policy.export_claims = s[2] & 0x10 ? exports : NULL;
    policy.nexport = s[2] & 0x10 ? 3 : 0;
    policy.replay = s[2] & 0x20 ? fuzz_replay : NULL;
    policy.replay_baton = &replay;
    policy.replay_share = FUZZ_SLOTS / LESSONS_REPLAY_SHARE;
    switch ((s[2] >> 6 & 1) | (s[3] >> 6 & 2)) {
    case 1:
        policy.floor.dpop = LESSONS_DPOP_OPTIONAL;
        policy.floor.dpop_where = "fuzz-conf:3";
        policy.floor.certbind = LESSONS_CERTBIND_OPTIONAL;
        policy.floor.certbind_where = "fuzz-conf:4";
        break;
    case 2:
        policy.floor.dpop = LESSONS_DPOP_REQUIRED;
        policy.floor.dpop_where = "fuzz-conf:3";
        policy.floor.at_jwt_where = "fuzz-conf:5";
        units[0].token.require_at_jwt = units[1].token.require_at_jwt =
            layout % 2;
        break;
    case 3:
        policy.floor.certbind = LESSONS_CERTBIND_REQUIRED;
        policy.floor.certbind_where = "fuzz-conf:4";
        policy.floor.audience = layout / 2 % 2 ? "reports" : "lessons";
        policy.floor.audience_where = "fuzz-conf:6";
        break;
    default:
        break;
    }
    memset(&idp, 0, sizeof(idp));
    idp.answer = s[3] & 0x20 ? NULL : answer;
    idp.leeway = policy.leeway;
    if (s[3] & 0x10) {
        policy.introspect = fuzz_introspect;
        policy.introspect_baton = &idp;
        policy.introspect_jwt = !!(s[3] & 0x40);
    }

    /* Without a token cache, then twice through one (a miss that may
     * store the token, then a hit): the same verdict each time.
     */
    fuzz_decide_once(p, &policy, &facts, &replay, &v);
    fuzz_check_good_token(p, &policy, &facts, layout, &v);
    if (layout == FUZZ_TENANTS) {
        fuzz_check_tenants(p, &policy, &facts, reaches_rs, &v);
    }
    policy.tokens = lessons_tokencache_make(p, 4);
    for (pass = 0; pass < 2; pass++) {
        fuzz_decide_once(p, &policy, &facts, &replay, &again);
        if (!fuzz_same_verdict(&v, &again)) {
            abort();
        }
    }
    apr_pool_destroy(p);
    return 0;
}
