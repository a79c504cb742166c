/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_decide.c: the gate's decision (see lessons_decide.h).  The
 * steps, each of which may end in the verdict: is a token needed; can
 * the section verify one at all; is it as strict as every section
 * merged before asked; the Authorization header; the issuer
 * block the token names; the keys (a fetched set, one refetch for a kid
 * the set lacks); the token; DPoP (and its nonce, where asked); the
 * certificate binding; the user; the claims to export.  Only the
 * last step's end is ALLOW.  Where DPoP nonces are asked, the verdict
 * carries the current one.
 */
#include <string.h>

#include "apr_strings.h"

#include "auth/lessons_claims.h"
#include "auth/lessons_decide.h"
#include "auth/lessons_dpop.h"
#include "base/lessons_json.h"

/* The rest of the decision, as the steps hand it on. */
typedef struct {
    apr_pool_t *p;
    const lessons_decide_policy_t *policy;
    const lessons_decide_facts_t *facts;
    lessons_verdict_t *v;
    int mode;                       /* LESSONS_DPOP_* */
} lessons_decision_t;

static void decide_note(lessons_decision_t *d, int tag, const char *text)
{
    lessons_decide_line_t *line;

    if (!d->v->notes) {
        d->v->notes = apr_array_make(d->p, 2, sizeof(*line));
    }
    line = apr_array_push(d->v->notes);
    line->level = LESSONS_DECIDE_INFO;
    line->tag = tag;
    line->fault = 0;
    line->text = text;
}

/* A refusal: its status, words and log line.  A fault of the server,
 * not of the request (500, 503), has no challenge, and its line
 * stands alone (fault).
 */
static lessons_verdict_e decide_verdict(lessons_decision_t *d, int status,
                                        int level, int tag, int fault,
                                        const char *description,
                                        const char *text)
{
    lessons_verdict_t *v = d->v;

    v->kind = LESSONS_VERDICT_REFUSE;
    v->status = status;
    v->challenge = LESSONS_CHALLENGE_NONE;
    v->error = NULL;
    v->description = description;
    v->refusal = -1;
    v->line.level = level;
    v->line.tag = tag;
    v->line.fault = fault;
    v->line.text = text;
    return v->kind;
}

static lessons_verdict_e decide_fault(lessons_decision_t *d, int status,
                                      int level, int tag,
                                      const char *description,
                                      const char *text)
{
    return decide_verdict(d, status, level, tag, 1, description, text);
}

/* A refusal of what the request brought: its line at info, counted as
 * refusal.  The challenge as the section answers it: DPoP's for a
 * request that used DPoP, or where DPoP is required; else Bearer's,
 * and where DPoP is optional DPoP's bare beside it (RFC 6750 3.1: a
 * scheme the request did not try gets no error).
 */
static lessons_verdict_e decide_refuse(lessons_decision_t *d, int status,
                                       int refusal, int tag, const char *error,
                                       const char *description,
                                       const char *text)
{
    lessons_verdict_t *v = d->v;

    decide_verdict(d, status, LESSONS_DECIDE_INFO, tag, 0, description,
                   text);
    v->error = error;
    v->refusal = refusal;
    v->challenge = v->dpop || d->mode == LESSONS_DPOP_REQUIRED
                   ? LESSONS_CHALLENGE_DPOP
                   : d->mode == LESSONS_DPOP_OPTIONAL
                   ? LESSONS_CHALLENGE_BEARER_DPOP
                   : LESSONS_CHALLENGE_BEARER;
    return v->kind;
}

/* The configuration in effect cannot verify tokens (tag 201), or would
 * verify them under settings weaker than the merge chain asked (tag
 * 781): 500.  Start-up refuses every such layout it can see; this
 * holds for the ones only a merge makes.
 */
static lessons_verdict_e decide_misconfigured_as(lessons_decision_t *d,
                                                 int tag, const char *why)
{
    return decide_fault(d, 500, LESSONS_DECIDE_ERR, tag,
                        "The server is misconfigured.",
                        apr_psprintf(d->p, "%s; refusing to serve %s", why,
                                     d->facts->path ? d->facts->path
                                                    : "the request"));
}

static lessons_verdict_e decide_misconfigured(lessons_decision_t *d,
                                              const char *why)
{
    return decide_misconfigured_as(d, 201, why);
}

/* The words of LessonsJWTDPoP's and LessonsJWTCertBound's modes. */
static const char *decide_mode_name(int mode)
{
    static const char *const names[] = { "off", "off", "optional",
                                         "required" };

    return mode >= 0 && mode <= 3 ? names[mode] : "(unknown)";
}

/* One setting weaker in effect than its floor: why, in the words
 * start-up and the request's log line share.
 */
static const char *decide_relaxed_why(apr_pool_t *p, const char *asked,
                                      const char *where, const char *here)
{
    return apr_psprintf(p, "%s at %s, but a section merged after it (an "
                        "inner section, an <If>, or a virtual host under "
                        "the server's lines) leaves %s in effect here; "
                        "what an outer section requires no inner one can "
                        "relax", asked, where ? where : "(unknown)", here);
}

const char *lessons_decide_relaxed(apr_pool_t *p,
                                   const lessons_decide_policy_t *policy)
{
    const lessons_decide_floor_t *floor = &policy->floor;
    int dpop = policy->dpop ? policy->dpop : LESSONS_DPOP_OFF;
    int certbind = policy->certbind ? policy->certbind : LESSONS_CERTBIND_OFF;
    int i;

    if (dpop < floor->dpop) {
        return decide_relaxed_why(p, apr_pstrcat(p, "LessonsJWTDPoP ",
                                                 decide_mode_name(floor->dpop),
                                                 NULL),
                                  floor->dpop_where,
                                  apr_pstrcat(p, "LessonsJWTDPoP ",
                                              decide_mode_name(dpop), NULL));
    }
    if (certbind < floor->certbind) {
        return decide_relaxed_why(p, apr_pstrcat(p, "LessonsJWTCertBound ",
                                                 decide_mode_name(
                                                     floor->certbind), NULL),
                                  floor->certbind_where,
                                  apr_pstrcat(p, "LessonsJWTCertBound ",
                                              decide_mode_name(certbind),
                                              NULL));
    }
    for (i = 0; policy->units && i < policy->nunits; i++) {
        const lessons_token_policy_t *token = &policy->units[i].token;

        if (floor->at_jwt_where && !token->require_at_jwt) {
            return decide_relaxed_why(p, "LessonsJWTTokenType at+jwt",
                                      floor->at_jwt_where,
                                      "LessonsJWTTokenType any");
        }
        /* One audience along the chain: a token for another is for
         * another resource server, and no token names both as a rule.
         */
        if (floor->audience
            && (!token->audience
                || strcmp(token->audience, floor->audience) != 0)) {
            return decide_relaxed_why(p, apr_pstrcat(p, "LessonsJWTAudience ",
                                                     floor->audience, NULL),
                                      floor->audience_where,
                                      token->audience
                                      ? apr_pstrcat(p, "LessonsJWTAudience ",
                                                    token->audience, NULL)
                                      : policy->blocks
                                      ? "an issuer's block without it"
                                      : "no audience");
        }
    }
    return NULL;
}

static lessons_verdict_e decide_token_refused(lessons_decision_t *d,
                                              lessons_token_e rc)
{
    return decide_refuse(d, 401, lessons_refusal_of(rc), 204,
                         "invalid_token", lessons_token_describe(rc),
                         lessons_token_describe(rc));
}

/* The token from the Authorization header into d->v->token: 0, or the
 * refusal (401 without one, 400 for a malformed header).
 */
static int decide_bearer(lessons_decision_t *d)
{
    const char *header = d->facts->authorization, *other;
    lessons_verdict_t *v = d->v;
    lessons_bearer_e rc = lessons_bearer_parse(d->p, header, &v->token);

    /* Where a section takes DPoP, its scheme carries the token too. */
    if (rc == LESSONS_BEARER_OTHER_SCHEME && d->mode != LESSONS_DPOP_OFF) {
        rc = lessons_auth_parse(d->p, header, "DPoP", &v->token);
        v->dpop = rc != LESSONS_BEARER_OTHER_SCHEME;
    }
    /* Where it does not, a DPoP client did send a token, in a scheme not
     * taken here: say that, not that none came.  The token is not looked
     * at, and Bearer's challenge stays bare (RFC 6750 3.1).
     */
    else if (rc == LESSONS_BEARER_OTHER_SCHEME
             && lessons_auth_parse(d->p, header, "DPoP", &other)
                != LESSONS_BEARER_OTHER_SCHEME) {
        return decide_refuse(d, 401, LESSONS_REFUSED_DPOP, 223, NULL,
                             "DPoP is not accepted here: send the access "
                             "token with the Bearer scheme.",
                             "the DPoP scheme, which this section does not "
                             "take (LessonsJWTDPoP off)");
    }
    switch (rc) {
    case LESSONS_BEARER_OK:
        return 0;
    case LESSONS_BEARER_MALFORMED:
        /* Never the header itself: it may hold a token. */
        return decide_refuse(d, 400, LESSONS_REFUSED_BAD_HEADER, 203,
                             "invalid_request",
                             v->dpop ? "The Authorization header must be "
                                       "'DPoP' followed by one token."
                                     : "The Authorization header must be "
                                       "'Bearer' followed by one token.",
                             "malformed Authorization header");
    default:
        /* None, or another scheme: a bearer client sends its token from
         * the first request on.
         */
        return decide_refuse(d, 401, LESSONS_REFUSED_NO_TOKEN, 202, NULL,
                             "A bearer token is required.",
                             "no bearer token");
    }
}

/* The issuers of the section's blocks, in order. */
static const char *const *decide_issuers(lessons_decision_t *d)
{
    const lessons_decide_policy_t *policy = d->policy;
    const char **names = apr_palloc(d->p, sizeof(*names)
                                          * (apr_size_t)policy->nunits);
    int i;

    for (i = 0; i < policy->nunits; i++) {
        names[i] = policy->units[i].issuer;
    }
    return names;
}

/* In a section with <LessonsJWTIssuer> blocks, the block of the issuer
 * the token names (read before its signature, trusted for nothing
 * else: only that issuer's keys are tried, and its iss checked again
 * once they verify).  0 with d->v->unit, or the refusal.
 */
static int decide_block(lessons_decision_t *d)
{
    const lessons_decide_policy_t *policy = d->policy;
    lessons_token_e rc;
    int i = 0;

    if (!policy->blocks) {
        d->v->unit = &policy->units[0];
        return 0;
    }
    rc = lessons_token_pick_issuer(d->p, d->v->token, decide_issuers(d),
                                   policy->nunits, &i);
    if (rc == LESSONS_TOKEN_UNKNOWN_ISSUER) {
        /* Never the iss itself: a claim's value. */
        return decide_refuse(d, 401, LESSONS_REFUSED_UNKNOWN_ISSUER, 222,
                             "invalid_token", lessons_token_describe(rc),
                             apr_psprintf(d->p, "the token names none of "
                                          "the %d issuers of the section "
                                          "at %s", policy->nunits,
                                          policy->where ? policy->where
                                                        : "(unknown)"));
    }
    if (rc != LESSONS_TOKEN_OK || i < 0 || i >= policy->nunits) {
        return decide_token_refused(d, rc != LESSONS_TOKEN_OK
                                       ? rc : LESSONS_TOKEN_MALFORMED);
    }
    d->v->unit = &policy->units[i];
    return 0;
}

/* The unit's keys for this request: a fetched set (held in the pool: a
 * refresh may swap it), else its key file's, which serve until the
 * first fetch.  0, or the refusal (503 while there are none).
 */
static int decide_keys(lessons_decision_t *d)
{
    const lessons_decide_unit_t *unit = d->v->unit;
    lessons_token_policy_t *token = &d->v->policy;
    const lessons_keyset_t *set;

    if (!unit->fetched) {
        return 0;
    }
    set = unit->live ? lessons_keysource_take(unit->live, d->p) : NULL;
    if (set) {
        token->keys = set;
        token->fp = NULL;           /* made from this set, per request */
        return 0;
    }
    if (token->keys || token->key) {
        return 0;                   /* LessonsJWTKeyFile's, meanwhile */
    }
    d->v->retry_after = unit->retry_after > 0 ? unit->retry_after : 1;
    decide_fault(d, 503, LESSONS_DECIDE_ERR, 214,
                 "The server cannot verify access tokens yet; try again "
                 "later.",
                 apr_psprintf(d->p, "%s has not given a key set yet: "
                              "answering 503", unit->keys_name));
    d->v->refusal = LESSONS_REFUSED_NO_KEYS;
    return 1;
}

/* A kid the set lacks may be a rotation: one refetch (at most once per
 * LessonsJWTKeysMinRefresh).  1 when a new set is in use since the
 * request took its own.
 */
static int decide_refetch(lessons_decision_t *d)
{
    const lessons_decide_unit_t *unit = d->v->unit;
    apr_interval_time_t since = 0, until = 0;

    if (!unit->fetched || !unit->live) {
        return 0;
    }
    switch (lessons_keysource_refetch(unit->live, &since, &until)) {
    case LESSONS_KEYSOURCE_NEW:
        return 1;
    case LESSONS_KEYSOURCE_TOO_SOON:
        /* Say when, so that a rotation that outruns the interval can be
         * told from a forged kid.
         */
        decide_note(d, 218, apr_psprintf(d->p, "%s: the token's kid is not "
                    "in the key set fetched %" APR_TIME_T_FMT " s ago; the "
                    "next fetch may happen in %" APR_TIME_T_FMT " s "
                    "(LessonsJWTKeysMinRefresh)", unit->keys_name,
                    apr_time_sec(since), apr_time_sec(until) + 1));
        return 0;
    case LESSONS_KEYSOURCE_BUSY:
        decide_note(d, 220, apr_psprintf(d->p, "%s: the token's kid is not "
                    "in the key set and enough requests wait for the fetch "
                    "already; this one did not wait", unit->keys_name));
        return 0;
    default:
        return 0;
    }
}

/* Whether the claims are decoded: only where something reads them. */
static int decide_wants_claims(const lessons_decision_t *d)
{
    const lessons_decide_policy_t *policy = d->policy;

    return (policy->user_claim && strcmp(policy->user_claim, "sub"))
           || policy->nexport > 0 || d->mode != LESSONS_DPOP_OFF
           || policy->certbind > LESSONS_CERTBIND_OFF;
}

/* The token against the unit's keys, through the process's cache: each
 * distinct token is verified once per process, exp and nbf checked on
 * every request.  0 with *subject, or the refusal.
 */
static int decide_token(lessons_decision_t *d, const char **subject)
{
    lessons_verdict_t *v = d->v;
    const lessons_decide_unit_t *unit = v->unit;
    json_t **claims = decide_wants_claims(d) ? &v->claims : NULL;
    lessons_token_e rc;

    v->claims_done = claims != NULL;
    rc = lessons_token_verify_claims(d->p, &v->policy, d->policy->tokens,
                                     v->token, d->facts->now, subject,
                                     claims);
    if (rc == LESSONS_TOKEN_UNKNOWN_KID && decide_refetch(d)) {
        v->policy = unit->token;
        if (decide_keys(d)) {
            return 1;
        }
        rc = lessons_token_verify_claims(d->p, &v->policy,
                                         d->policy->tokens, v->token,
                                         d->facts->now, subject, claims);
    }
    if (rc == LESSONS_TOKEN_KEY_MISFIT) {
        decide_misconfigured(d, apr_psprintf(d->p, "the keys of %s (section "
                             "at %s) allow none of the algorithms %s",
                             unit->keys_name ? unit->keys_name : "(none)",
                             unit->where ? unit->where : "(an issuer line)",
                             unit->alg_name ? unit->alg_name
                                            : "of a discovered issuer"));
        return 1;
    }
    if (rc != LESSONS_TOKEN_OK) {
        decide_token_refused(d, rc);
        return 1;
    }
    return 0;
}

/* Asking the provider about the token came to nothing: 503, with
 * Retry-After, never an allow.
 */
static int decide_introspect_unavailable(lessons_decision_t *d, int tag,
                                         const lessons_decide_introspection_t
                                         *a, const char *why)
{
    d->v->retry_after = a->retry_after > 0 ? a->retry_after
                                           : LESSONS_RETRY_SECONDS;
    decide_fault(d, 503, LESSONS_DECIDE_ERR, tag, "The server cannot check "
                 "access tokens now; try again later.",
                 apr_psprintf(d->p, "introspection at %s: %s: answered 503",
                              a->endpoint ? a->endpoint : "(no endpoint)",
                              why));
    return 1;
}

/* Nothing was asked, as the budget of questions to the provider
 * (LessonsJWTIntrospectRate) says no: this client has used its share,
 * its fault (429 at info, no challenge: the token may be fine), or the
 * server its budget, a load shed (503 at warning).  Retry-After either
 * way: when a question is there again.
 */
static int decide_introspect_over(lessons_decision_t *d,
                                  const lessons_decide_introspection_t *a)
{
    d->v->retry_after = a->retry_after > 0 ? a->retry_after : 1;
    if (a->over == LESSONS_DECIDE_OVER_CLIENT) {
        decide_verdict(d, 429, LESSONS_DECIDE_INFO, 770, 0, "This client "
                       "has brought more new access tokens than the server "
                       "asks its identity provider about; try again later.",
                       apr_psprintf(d->p, "introspection at %s: %s: "
                                    "answered 429, nothing asked",
                                    a->endpoint ? a->endpoint
                                                : "(no endpoint)",
                                    a->why ? a->why : "over its share"));
        return 1;
    }
    decide_fault(d, 503, LESSONS_DECIDE_WARNING, 771, "The server cannot "
                 "check new access tokens now; try again later.",
                 apr_psprintf(d->p, "introspection at %s: %s: answered 503, "
                              "nothing asked",
                              a->endpoint ? a->endpoint : "(no endpoint)",
                              a->why ? a->why : "over the budget"));
    return 1;
}

/* The provider's word on the request's token (RFC 7662): asked (or
 * taken from the process's cache), judged with the leeway, and its
 * claims put through the checks a JWT's get (issuer, audience, times,
 * sub).  An answer without iss is the issuer's whose endpoint it is.
 * For an opaque token (claims set) 0 with v->claims and *subject; for a
 * JWT asked about again (claims NULL), 0 when the provider still says
 * active.  Else the refusal.
 */
static int decide_introspect(lessons_decision_t *d, const char **subject,
                             int opaque)
{
    const lessons_decide_policy_t *policy = d->policy;
    lessons_verdict_t *v = d->v;
    lessons_decide_introspection_t a;
    lessons_introspect_e rc;
    lessons_token_e trc;
    const char *sub = NULL;

    /* Longer than any token taken here: the client's fault (401), not
     * a question for the provider.
     */
    if (strlen(v->token) > LESSONS_TOKEN_MAX_LEN) {
        decide_token_refused(d, LESSONS_TOKEN_MALFORMED);
        return 1;
    }
    memset(&a, 0, sizeof(a));
    if (policy->introspect(policy->introspect_baton, d->p, v->token,
                           d->facts->now, &a) != 0) {
        if (a.over) {
            return decide_introspect_over(d, &a);
        }
        return decide_introspect_unavailable(d, 742, &a,
                                             a.why ? a.why : "no answer");
    }
    rc = lessons_introspect_judge(a.rc, &a.res, d->facts->now,
                                  policy->leeway);
    switch (rc) {
    case LESSONS_INTROSPECT_ACTIVE:
        break;
    case LESSONS_INTROSPECT_INACTIVE:
        decide_refuse(d, 401, LESSONS_REFUSED_OTHER, 740, "invalid_token",
                      lessons_introspect_describe(rc),
                      apr_psprintf(d->p, "the introspection endpoint %s says "
                                   "the %s is not active", a.endpoint,
                                   opaque ? "token" : "JWT (revoked)"));
        return 1;
    case LESSONS_INTROSPECT_EXPIRED:
    case LESSONS_INTROSPECT_NOT_YET:
        decide_refuse(d, 401, rc == LESSONS_INTROSPECT_EXPIRED
                              ? LESSONS_REFUSED_EXPIRED
                              : LESSONS_REFUSED_NOT_YET_VALID, 741,
                      "invalid_token", lessons_introspect_describe(rc),
                      apr_psprintf(d->p, "the introspection endpoint %s says "
                                   "active, but %s", a.endpoint,
                                   rc == LESSONS_INTROSPECT_EXPIRED
                                   ? "its exp is past" : "its nbf is ahead"));
        return 1;
    default:
        /* The provider's fault, not the client's. */
        return decide_introspect_unavailable(d, 743, &a, apr_psprintf(
            d->p, "an answer that cannot be used (%s)",
            lessons_introspect_describe(rc)));
    }
    if (!opaque) {
        return 0;
    }
    /* The answer may be the one the process keeps for every request
     * with this token: the issuer is added to a copy of its own.
     */
    if (v->policy.issuer && !json_object_get(a.res.claims, "iss")) {
        a.res.claims = lessons_json_pool_own(d->p,
                                             json_deep_copy(a.res.claims));
        if (!a.res.claims
            || json_object_set_new(a.res.claims, "iss",
                                   json_string(v->policy.issuer)) != 0) {
            return decide_introspect_unavailable(d, 743, &a,
                "an answer that could not be copied (out of memory)");
        }
    }
    trc = lessons_token_check_introspected(d->p, &v->policy, a.res.claims,
                                           d->facts->now, &sub);
    if (trc != LESSONS_TOKEN_OK) {
        decide_token_refused(d, trc);
        return 1;
    }
    *subject = sub;
    v->claims = a.res.claims;
    v->claims_done = 1;
    v->introspected = a.endpoint;
    return 0;
}

/* A DPoP refusal (RFC 9449): always DPoP's challenge. */
static int decide_dpop_refuse(lessons_decision_t *d, const char *error,
                              const char *description, const char *why)
{
    decide_refuse(d, 401, LESSONS_REFUSED_DPOP, 240, error, description,
                  why ? why : description);
    d->v->challenge = LESSONS_CHALLENGE_DPOP;
    return 1;
}

/* The request's one DPoP proof, or NULL (none, or several: RFC 9449 4.3
 * takes exactly one, and a header value with a comma, which no JWS
 * holds, is several joined).
 */
static const char *decide_proof(const lessons_decide_facts_t *facts)
{
    if (facts->dpop_lines != 1 || !facts->dpop
        || strchr(facts->dpop, ',')) {
        return NULL;
    }
    return facts->dpop;
}

/* A proof the server cannot check now: 503, never taken unchecked. */
static int decide_dpop_unavailable(lessons_decision_t *d, int level, int tag,
                                   const char *text)
{
    d->v->retry_after = LESSONS_RETRY_SECONDS;
    decide_fault(d, 503, level, tag, "The server cannot check DPoP proofs "
                 "now; try again later.",
                 apr_pstrcat(d->p, text, ": answered 503", NULL));
    return 1;
}

/* Where nonces are asked (LessonsJWTDPoPNonce on), a proof otherwise
 * good must carry one the server made, of this slot or the one before
 * (lessons_nonce): else 401 use_dpop_nonce (RFC 9449 9), and the
 * verdict's nonce goes out in DPoP-Nonce for the client's retry.  Its
 * nonce is checked before the proof is taken, so that one refused for
 * it holds no slot of the replay table.  A proof taken is kept there
 * until its nonce ends (*kept, seconds; the iat is not judged where
 * nonces are): a replay after that is refused for its nonce.
 * 0, or the refusal.
 */
static int decide_nonce(lessons_decision_t *d, const char *nonce,
                        apr_int64_t *kept)
{
    const lessons_decide_policy_t *policy = d->policy;
    apr_int64_t ends = 0;
    lessons_nonce_e rc;

    if (!policy->nonce) {
        return 0;
    }
    rc = lessons_nonce_check(policy->nonce, nonce, d->facts->now, &ends);
    if (rc != LESSONS_NONCE_OK) {
        decide_refuse(d, 401, LESSONS_REFUSED_DPOP, 700, "use_dpop_nonce",
                      lessons_nonce_describe(rc),
                      rc == LESSONS_NONCE_MISSING
                      ? "the DPoP proof has no nonce; the client is given one"
                      : rc == LESSONS_NONCE_EXPIRED
                      ? "the DPoP proof's nonce is of an older slot; the "
                        "client is given the current one"
                      : "the DPoP proof's nonce is not this server's (another "
                        "secret, or no nonce of ours); the client is given "
                        "one");
        d->v->challenge = LESSONS_CHALLENGE_DPOP;
        return 1;
    }
    /* One second more, as for the iat window: the table's clock runs a
     * little after the request's time the nonce was checked at.
     */
    if (ends + 1 < *kept) {
        *kept = ends + 1;
    }
    return 0;
}

/* A claim's text where it is a string, else NULL. */
static const char *decide_claim_text(const json_t *claims, const char *name)
{
    return json_string_value(json_object_get(claims, name));
}

/* Whom a proof counts against in the replay table: the party its token
 * was issued to, as the identity provider names it -- who vouches for
 * the token (the endpoint that answered for it, else its section's
 * keys), its issuer, its client (client_id, RFC 9068 and 8693; else
 * OpenID's azp) and its subject -- never its key, which a client makes
 * for nothing (lessons_replay.h says why).  Tokens that name none of
 * these share one owner per provider.  0, or -1.
 */
static int decide_dpop_owner(const lessons_verdict_t *v, apr_uint32_t *owner,
                             apr_uint32_t *group)
{
    const char *names[4];
    const char *client = decide_claim_text(v->claims, "client_id");

    names[0] = v->introspected ? v->introspected
               : v->unit && v->unit->keys_name ? v->unit->keys_name : "";
    names[1] = decide_claim_text(v->claims, "iss");
    names[2] = client ? client : decide_claim_text(v->claims, "azp");
    names[3] = decide_claim_text(v->claims, "sub");
    /* The group: who vouches, so that a tenant whose own provider signs
     * any number of subjects still fills a quarter of the table at most.
     */
    return lessons_replay_owner(names, 4, owner) != 0
           || lessons_replay_group(names[0], group) != 0 ? -1 : 0;
}

/* The owner holds its share of the replay table already: its own
 * proofs are refused, 429 with Retry-After (RFC 6585 4), every other
 * owner's taken as before.  The client's doing, not the server's: a
 * refusal at info, counted among DPoP's; no challenge, since no other
 * token or proof would pass now.  Its proofs end within the window, so
 * it may try again soon.
 */
static int decide_dpop_over_share(lessons_decision_t *d, apr_uint32_t owner,
                                  int group)
{
    lessons_verdict_t *v = d->v;

    /* The owner's hash names it in the log: its lines can be told from
     * another's, and no claim value is logged.
     */
    decide_verdict(d, 429, LESSONS_DECIDE_INFO, 760, 0,
                   "Too many DPoP proofs from this client within the "
                   "window; try again later.",
                   group
                   ? apr_psprintf(d->p, "the clients of the token's keys "
                                  "(%s) already hold their share of the "
                                  "DPoP proofs seen (a quarter); its "
                                  "client is owner %08x",
                                  v->introspected ? v->introspected
                                  : v->unit && v->unit->keys_name
                                    ? v->unit->keys_name : "none",
                                  (unsigned)owner)
                   : apr_psprintf(d->p, "the token's client (owner %08x) "
                                  "already holds its share of the DPoP "
                                  "proofs seen (%d)", (unsigned)owner,
                                  d->policy->replay_share));
    v->refusal = LESSONS_REFUSED_DPOP;
    v->retry_after = LESSONS_RETRY_SECONDS;
    return 1;
}

/* A token bound to a key (cnf.jkt) needs a proof made with it for this
 * very request, taken once per server; a bound token sent as a bearer
 * token is refused (RFC 9449 7.2), and so is a bearer token where DPoP
 * is required.  0, or the refusal.
 */
static int decide_dpop(lessons_decision_t *d)
{
    const lessons_decide_policy_t *policy = d->policy;
    lessons_verdict_t *v = d->v;
    const char *jkt, *proof, *why = NULL;
    lessons_dpop_request_t req;
    lessons_dpop_proof_t out;
    unsigned char key[LESSONS_REPLAY_KEY_LEN];
    apr_int64_t kept;
    apr_uint32_t owner, group;
    lessons_dpop_e rc;
    long leeway;
    int seen, by_cert;

    if (d->mode == LESSONS_DPOP_OFF) {
        return 0;
    }
    /* Whether the token is bound is in its claims: without them,
     * nothing is known, and nothing is taken.
     */
    if (!v->claims) {
        return decide_dpop_refuse(d, "invalid_token", "The access token's "
                                  "claims could not be read", NULL);
    }
    jkt = lessons_dpop_token_jkt(v->claims);
    /* A token bound to a client certificate and to no DPoP key, where
     * certificates are looked at, is judged by its certificate
     * (decide_certbind): bound one way, judged that way.  Where they are
     * not, it is bound in a way DPoP cannot use, and refused.
     */
    by_cert = policy->certbind > LESSONS_CERTBIND_OFF
              && lessons_certbind_bound(v->claims);
    if (!v->dpop) {
        if (jkt && (*jkt || !by_cert)) {
            return decide_dpop_refuse(d, "invalid_token", "The access "
                                      "token is bound to a DPoP key: send "
                                      "it with Authorization: DPoP and a "
                                      "proof", NULL);
        }
        if (d->mode == LESSONS_DPOP_REQUIRED && !by_cert) {
            return decide_dpop_refuse(d, "invalid_token", "This resource "
                                      "takes DPoP-bound access tokens only",
                                      NULL);
        }
        return 0;
    }
    if (!jkt || !*jkt) {
        return decide_dpop_refuse(d, "invalid_token", "The access token is "
                                  "not bound to a DPoP key", NULL);
    }
    proof = decide_proof(d->facts);
    if (!proof) {
        return decide_dpop_refuse(d, "invalid_dpop_proof", "Exactly one "
                                  "DPoP header with a proof is required",
                                  NULL);
    }
    memset(&req, 0, sizeof(req));
    req.method = d->facts->method;
    req.uri = d->facts->uri;
    req.token = v->token;
    req.now = d->facts->now;
    leeway = policy->leeway < 0 ? 0
             : policy->leeway < LESSONS_DPOP_LEEWAY_MAX ? policy->leeway
             : LESSONS_DPOP_LEEWAY_MAX;
    req.window = LESSONS_DPOP_WINDOW + leeway;
    req.ahead = LESSONS_DPOP_AHEAD + leeway;
    /* Where nonces are asked, the nonce judges freshness on the
     * server's clock (RFC 9449 11.1): a client whose clock is off gets
     * use_dpop_nonce for a proof without one, then is taken with it.
     */
    req.nonce_judges = policy->nonce != NULL;
    rc = lessons_dpop_check(d->p, proof, &req, &out, &why);
    if (rc != LESSONS_DPOP_OK) {
        return decide_dpop_refuse(d, "invalid_dpop_proof",
                                  lessons_dpop_describe(rc), why);
    }
    if (strcmp(out.jkt, jkt) != 0) {
        return decide_dpop_refuse(d, "invalid_dpop_proof", "The DPoP proof "
                                  "is made with another key than the "
                                  "access token's", NULL);
    }
    /* Kept until the iat window ends; with nonces, until the nonce does
     * (decide_nonce), whatever the iat says.
     */
    kept = policy->nonce ? APR_INT64_MAX : lessons_dpop_kept_until(&req, out.iat);
    if (decide_nonce(d, out.nonce, &kept)) {
        return 1;
    }
    if (!policy->replay || lessons_replay_key(jkt, out.jti, key) != 0
        || decide_dpop_owner(v, &owner, &group) != 0
        || (seen = policy->replay(policy->replay_baton, key, owner, group,
                                  apr_time_from_sec(kept),
                                  d->facts->clock)) < 0) {
        return decide_dpop_unavailable(d, LESSONS_DECIDE_ERR, 241,
                                       "the DPoP proofs seen cannot be read "
                                       "in this process");
    }
    switch (seen) {
    case LESSONS_REPLAY_NEW:
        return 0;
    case LESSONS_REPLAY_SEEN:
        return decide_dpop_refuse(d, "invalid_dpop_proof", "The DPoP proof "
                                  "has been used before", NULL);
    case LESSONS_REPLAY_OVER_SHARE:
    case LESSONS_REPLAY_OVER_GROUP:
        return decide_dpop_over_share(d, owner,
                                      seen == LESSONS_REPLAY_OVER_GROUP);
    default:
        return decide_dpop_unavailable(d, LESSONS_DECIDE_WARNING, 242,
                                       "too many DPoP proofs within the "
                                       "window to keep one more");
    }
}

/* LessonsJWTCertBound (RFC 8705 3): a token bound to a certificate
 * (cnf x5t#S256) is taken only on a connection whose verified client
 * certificate has that thumbprint, on every request (a token the cache
 * verified before came, maybe, on another connection); where binding is
 * required, a token bound to nothing (neither a certificate nor, with
 * DPoP, a key) is refused.  A token bound both ways is judged both ways:
 * its DPoP proof has passed by now.  Off: cnf x5t#S256 is not looked at,
 * as by a server that does not know it.  0, or the refusal; never a
 * thumbprint in the words or the log line.
 */
static int decide_certbind(lessons_decision_t *d)
{
    const lessons_decide_facts_t *facts = d->facts;
    lessons_verdict_t *v = d->v;
    int mode = d->policy->certbind;
    lessons_certbind_e rc;

    if (mode != LESSONS_CERTBIND_OPTIONAL
        && mode != LESSONS_CERTBIND_REQUIRED) {
        return 0;
    }
    if (!v->claims) {
        decide_refuse(d, 401, LESSONS_REFUSED_OTHER, 720, "invalid_token",
                      "The access token's claims could not be read",
                      "the token's claims could not be read to check its "
                      "certificate binding");
        return 1;
    }
    if (!lessons_certbind_bound(v->claims)) {
        /* v->dpop: sent with DPoP, and its proof for its key passed. */
        if (mode == LESSONS_CERTBIND_REQUIRED && !v->dpop) {
            decide_refuse(d, 401, LESSONS_REFUSED_OTHER, 721,
                          "invalid_token", "This resource takes "
                          "sender-constrained access tokens only (bound "
                          "to a client certificate or a DPoP key)",
                          "a token bound to no client certificate nor "
                          "DPoP key (LessonsJWTCertBound required)");
            return 1;
        }
        return 0;
    }
    rc = lessons_certbind_check(v->claims, facts->cert
                                           ? facts->cert(facts->cert_baton)
                                           : NULL);
    if (rc == LESSONS_CERTBIND_MATCH) {
        return 0;
    }
    decide_refuse(d, 401, LESSONS_REFUSED_OTHER, 722, "invalid_token",
                  lessons_certbind_describe(rc),
                  rc == LESSONS_CERTBIND_NO_CERT
                  ? "a token bound to a client certificate, on a "
                    "connection without a verified one"
                  : rc == LESSONS_CERTBIND_MISMATCH
                  ? "a token bound to another client certificate than "
                    "the connection's"
                  : "a token whose cnf claim is not an object with a "
                    "thumbprint (x5t#S256) of 43 base64url characters");
    return 1;
}

/* The user, from the verified token's user claim (subject when it is
 * sub); where the section takes several issuers, qualified with the
 * issuer of the block that verified it.  The user goes into logs,
 * REMOTE_USER and headers an admin builds from it: a claim that cannot
 * be one as it is refuses the token (401), rather than making it
 * someone else by cleaning or cutting it.  No claim: no user.
 */
static int decide_user(lessons_decision_t *d, const char *subject)
{
    const lessons_decide_policy_t *policy = d->policy;
    lessons_verdict_t *v = d->v;
    const char *user = NULL;
    lessons_claim_text_e urc;

    if (policy->user_claim && strcmp(policy->user_claim, "sub")) {
        urc = lessons_claims_user(d->p, lessons_claims_get(
                                      v->claims, policy->user_claim),
                                  LESSONS_USER_MAX, &user);
    }
    else {
        urc = subject ? lessons_claims_text_check(subject, strlen(subject),
                                                  LESSONS_USER_MAX)
                      : LESSONS_CLAIM_TEXT_ABSENT;
        user = subject;
    }
    /* Two issuers' "alice" are two users: "alice@" and the issuer. */
    if (urc == LESSONS_CLAIM_TEXT_OK && policy->blocks) {
        urc = lessons_claims_qualify(d->p, user, v->unit->issuer,
                                     decide_issuers(d), policy->nunits,
                                     &user);
    }
    if (urc != LESSONS_CLAIM_TEXT_OK && urc != LESSONS_CLAIM_TEXT_ABSENT) {
        decide_refuse(d, 401, LESSONS_REFUSED_USER_CLAIM, 217,
                      "invalid_token", "The access token's user claim "
                      "cannot be used as a user name.",
                      apr_psprintf(d->p, "the user claim %s %s (%s)",
                                   policy->user_claim ? policy->user_claim
                                                      : "sub",
                                   lessons_claims_text_describe(urc),
                                   urc == LESSONS_CLAIM_TEXT_OTHER_ISSUER
                                   ? apr_pstrcat(d->p, "issuer names with "
                                                 "\"@\" in the section at ",
                                                 policy->where
                                                 ? policy->where
                                                 : "(unknown)", NULL)
                                   : apr_psprintf(d->p, "at most %d bytes, "
                                                  "no control characters",
                                                  LESSONS_USER_MAX)));
        return 1;
    }
    v->user = urc == LESSONS_CLAIM_TEXT_OK ? user : NULL;
    return 0;
}

/* LessonsJWTExportClaims: each claim the token has whose text keeps the
 * rule of lessons_claims_text; one it lacks is left out, and so is one
 * that breaks the rule, with a note naming it (never its value).
 */
static void decide_exports(lessons_decision_t *d)
{
    const lessons_decide_policy_t *policy = d->policy;
    lessons_verdict_t *v = d->v;
    int i;

    for (i = 0; v->claims && i < policy->nexport; i++) {
        const char *name = policy->export_claims[i], *text = NULL;
        lessons_decide_export_t *out;
        lessons_claim_text_e rc;

        rc = lessons_claims_text(d->p, lessons_claims_get(v->claims, name),
                                 LESSONS_CLAIM_MAX, &text);
        if (rc == LESSONS_CLAIM_TEXT_OK && text
            && (name = lessons_claims_env_name(d->p, name)) != NULL) {
            if (!v->exports) {
                v->exports = apr_array_make(d->p, policy->nexport,
                                            sizeof(*out));
            }
            out = apr_array_push(v->exports);
            out->name = name;
            out->value = text;
        }
        else if (rc != LESSONS_CLAIM_TEXT_OK
                 && rc != LESSONS_CLAIM_TEXT_ABSENT) {
            decide_note(d, 216, apr_psprintf(d->p, "claim %s not exported: "
                        "it %s%s", name, lessons_claims_text_describe(rc),
                        rc == LESSONS_CLAIM_TEXT_LIST ? ""
                        : apr_psprintf(d->p, " (at most %d bytes, no control "
                                       "characters)", LESSONS_CLAIM_MAX)));
        }
    }
}

/* Where nonces are asked, the current one goes with every answer in the
 * DPoP scheme (RFC 9449 8.2: a 2xx may carry the next one; 9: a 401
 * with use_dpop_nonce must) and with every DPoP challenge, so that a
 * client has it before it needs it.  One HMAC; no state.
 */
static void decide_give_nonce(lessons_decision_t *d)
{
    lessons_verdict_t *v = d->v;
    char *nonce;

    if (!d->policy->nonce || d->mode == LESSONS_DPOP_OFF
        || !((v->kind == LESSONS_VERDICT_ALLOW && v->dpop)
             || (v->kind == LESSONS_VERDICT_REFUSE
                 && v->challenge == LESSONS_CHALLENGE_DPOP))) {
        return;
    }
    nonce = apr_palloc(d->p, LESSONS_NONCE_SIZE);
    if (lessons_nonce_make(d->policy->nonce, d->facts->now, nonce) == 0) {
        v->nonce = nonce;
    }
}

/* A unit with no key at all (nor keys to fetch): only a provider that
 * introspects can speak for a token there.
 */
static int decide_keyless(const lessons_decide_unit_t *unit)
{
    return !unit->fetched && !unit->token.key && !unit->token.keys;
}

/* The steps, in order, to the verdict. */
static lessons_verdict_e decide_steps(lessons_decision_t *d)
{
    const lessons_decide_policy_t *policy = d->policy;
    lessons_verdict_t *v = d->v;
    apr_pool_t *p = d->p;
    const char *subject = NULL, *why;

    if (!policy->needed) {
        return v->kind = LESSONS_VERDICT_NOT_NEEDED;
    }
    /* From here on a token is needed: every way out but the last one is
     * a refusal.  Whatever the merge left must verify, or nothing does.
     */
    if (policy->broken || !policy->units || policy->nunits < 1) {
        return decide_misconfigured(d, policy->broken
                                    ? policy->broken
                                    : apr_psprintf(p, "a token is needed "
                                                   "here (from %s on), but "
                                                   "no key is in effect",
                                                   policy->needed));
    }
    /* What the chain required outside holds inside, whatever section
     * the request merged last (issue 55).
     */
    if ((why = lessons_decide_relaxed(p, policy)) != NULL) {
        return decide_misconfigured_as(d, 781, why);
    }
    if (decide_bearer(d)) {
        return v->kind;
    }
    /* A token that is no JWT, where the section asks the provider, and
     * every token where it has no key besides: the answer's claims take
     * the JWT's path from DPoP on.  (A section of several issuers has no
     * one provider to ask: never there.)
     */
    if (policy->introspect && !policy->blocks
        && (decide_keyless(&policy->units[0])
            || lessons_introspect_is_opaque(p, v->token))) {
        v->unit = &policy->units[0];
        if (v->unit->broken) {
            return decide_misconfigured(d, v->unit->broken);
        }
        v->policy = v->unit->token;
        if (decide_introspect(d, &subject, 1) || decide_dpop(d)
            || decide_certbind(d) || decide_user(d, subject)) {
            return v->kind;
        }
        decide_exports(d);
        return v->kind = LESSONS_VERDICT_ALLOW;
    }
    if (decide_block(d)) {
        return v->kind;
    }
    if (v->unit->broken) {
        return decide_misconfigured(d, v->unit->broken);
    }
    v->policy = v->unit->token;
    if (decide_keys(d) || decide_token(d, &subject)
        || (policy->introspect && policy->introspect_jwt
            && decide_introspect(d, &subject, 0))
        || decide_dpop(d) || decide_certbind(d) || decide_user(d, subject)) {
        return v->kind;
    }
    decide_exports(d);
    return v->kind = LESSONS_VERDICT_ALLOW;
}

lessons_verdict_e lessons_decide(apr_pool_t *p,
                                 const lessons_decide_policy_t *policy,
                                 const lessons_decide_facts_t *facts,
                                 lessons_verdict_t *v)
{
    lessons_decision_t d;

    memset(v, 0, sizeof(*v));
    v->refusal = -1;
    d.p = p;
    d.policy = policy;
    d.facts = facts;
    d.v = v;
    d.mode = policy->dpop ? policy->dpop : LESSONS_DPOP_OFF;
    decide_steps(&d);
    decide_give_nonce(&d);
    return v->kind;
}

lessons_metrics_refusal_e lessons_refusal_of(lessons_token_e rc)
{
    switch (rc) {
    case LESSONS_TOKEN_MALFORMED:       return LESSONS_REFUSED_MALFORMED;
    case LESSONS_TOKEN_BAD_ALG:         return LESSONS_REFUSED_ALGORITHM;
    case LESSONS_TOKEN_CRIT:            return LESSONS_REFUSED_CRIT;
    case LESSONS_TOKEN_BAD_SIGNATURE:   return LESSONS_REFUSED_SIGNATURE;
    case LESSONS_TOKEN_BAD_CLAIMS:
    case LESSONS_TOKEN_AT_CLAIMS:       return LESSONS_REFUSED_CLAIMS;
    case LESSONS_TOKEN_NO_EXP:          return LESSONS_REFUSED_NO_EXP;
    case LESSONS_TOKEN_EXPIRED:         return LESSONS_REFUSED_EXPIRED;
    case LESSONS_TOKEN_NOT_YET_VALID:   return LESSONS_REFUSED_NOT_YET_VALID;
    case LESSONS_TOKEN_BAD_ISSUER:      return LESSONS_REFUSED_ISSUER;
    case LESSONS_TOKEN_BAD_AUDIENCE:    return LESSONS_REFUSED_AUDIENCE;
    case LESSONS_TOKEN_BAD_TYPE:
    case LESSONS_TOKEN_NOT_AT_JWT:      return LESSONS_REFUSED_TYPE;
    case LESSONS_TOKEN_BAD_IAT:         return LESSONS_REFUSED_IAT;
    case LESSONS_TOKEN_UNKNOWN_KID:     return LESSONS_REFUSED_UNKNOWN_KID;
    case LESSONS_TOKEN_UNKNOWN_ISSUER:  return LESSONS_REFUSED_UNKNOWN_ISSUER;
    default:                            return LESSONS_REFUSED_OTHER;
    }
}
