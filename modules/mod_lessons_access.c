/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_access.c: the token gate.  Wherever a key is in force, the
 * request's bearer token is checked once, in the access checker, before
 * any handler (the API's, CGI, proxy, static files, another module's).
 * httpd's merge of Satisfy, Require and Order decides which access hooks
 * run, so the gate is asked again where that merge cannot skip it:
 * access_checker_ex (which Satisfy Any reaches) and fixups (which every
 * request reaches).  A refusal is a status returned to httpd, so nothing
 * after the gate runs, and the body comes from httpd's error path.
 */

#include "mod_lessons.h"

/* How long a refusal's body is drained at most (a read already
 * waiting still ends at httpd's Timeout).
 */
#define LESSONS_DRAIN_TIME  apr_time_from_sec(5)

/* HTTP/2: answering before the request's DATA arrived makes mod_http2
 * end the stream with RST_STREAM(NO_ERROR) after the answer (RFC 9113
 * 8.1 allows it), and curl 7.88 (Debian 12) then loses the answer: 17
 * of 60 POSTs without a token got no 401.  A body the API would take
 * anyway (a Content-Length within LessonsMaxBodySize) is read and
 * dropped first, as httpd drops it after answering over HTTP/1.1
 * (ap_discard_request_body does nothing on HTTP/2's connections);
 * larger or unsized ones are left as they are.  Dropped as it comes, one
 * read at a time, never gathered: a refusal holds a read's worth, not
 * the body (8 MiB POSTs without a token, ten at a time, raised a child's
 * peak by 85 MiB when it was gathered, by 7 MiB since: t/api/drain.t),
 * and the draining stops after LESSONS_DRAIN_TIME.
 */
static void lessons_drain_small_body(request_rec *r)
{
    const char *cl = apr_table_get(r->headers_in, "Content-Length");
    apr_bucket_brigade *bb;
    apr_off_t len, max, seen = 0, n;
    apr_time_t until;
    char *end;
    int eos = 0;

    if (r->proto_num < 2000 || r->main || lessons_state(r)->body_read || !cl
        || apr_strtoff(&len, cl, &end, 10) != APR_SUCCESS || *end
        || len <= 0) {
        return;
    }
    max = lessons_max_body(ap_get_module_config(r->per_dir_config,
                                                &lessons_module));
    if (len > max) {
        return;
    }
    lessons_state(r)->body_read = 1;
    until = apr_time_now() + LESSONS_DRAIN_TIME;
    bb = apr_brigade_create(r->pool, r->connection->bucket_alloc);
    while (!eos && seen <= max && apr_time_now() < until
           && ap_get_brigade(r->input_filters, bb, AP_MODE_READBYTES,
                             APR_BLOCK_READ, HUGE_STRING_LEN)
              == APR_SUCCESS
           && apr_brigade_length(bb, 1, &n) == APR_SUCCESS) {
        eos = !APR_BRIGADE_EMPTY(bb)
              && APR_BUCKET_IS_EOS(APR_BRIGADE_LAST(bb));
        seen += n;
        apr_brigade_cleanup(bb);
    }
    apr_brigade_destroy(bb);
}

/* The section's LessonsJWTDPoP, off where it says nothing. */
static int lessons_dpop_mode(const lessons_dir_conf *conf)
{
    return conf && conf->dpop ? conf->dpop : LESSONS_DPOP_OFF;
}

/* A refusal with its challenge: Bearer's (RFC 6750), or DPoP's (RFC
 * 9449 7.1) for a request that came with DPoP and where a section
 * requires it.  Where DPoP is optional, a request that did not use it
 * gets both: the error in Bearer's, the scheme it used, and DPoP's bare
 * (realm and algs), as RFC 6750 3.1 answers a scheme the request did
 * not try; an error there would say that a DPoP token failed.
 */
static int lessons_challenge(request_rec *r, int status, const char *error,
                             const char *description)
{
    int mode = lessons_dpop_mode(ap_get_module_config(r->per_dir_config,
                                                      &lessons_module));

    if (lessons_state(r)->dpop || mode == LESSONS_DPOP_REQUIRED) {
        apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                       lessons_dpop_challenge_value(r, error, description));
    }
    else {
        apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                       lessons_challenge_value(r, error, description));
        if (mode == LESSONS_DPOP_OPTIONAL) {
            apr_table_addn(r->err_headers_out, "WWW-Authenticate",
                           lessons_dpop_challenge_value(r, NULL, NULL));
        }
    }
    lessons_drain_small_body(r);
    return lessons_refuse(r, status, description);
}

/* The request fails closed with 500: the configuration in effect cannot
 * verify tokens.  Start-up refuses every such configuration it can see;
 * this is what holds for the ones only a merge produces.
 */
static int lessons_misconfigured(request_rec *r, const char *why)
{
    lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool, LESSONSLOG(00201)
                      "%s; refusing to serve %s", why, r->uri));
    lessons_drain_small_body(r);
    return lessons_refuse(r, HTTP_INTERNAL_SERVER_ERROR,
                          "The server is misconfigured.");
}

/* LessonsJWTExportClaims: each claim the token has, as JWT_CLAIM_<name>,
 * when it keeps the rule of lessons_claims_text (no control character,
 * at most LESSONS_CLAIM_MAX bytes, a list only where its commas give
 * its members back); one it lacks is left unset, and so is one that
 * breaks the rule, with an info line naming it (never its value).
 */
static void lessons_export_claims(request_rec *r,
                                  const lessons_dir_conf *conf,
                                  json_t *claims)
{
    int i;

    for (i = 0; claims && conf->export_claims
                && i < conf->export_claims->nelts; i++) {
        const char *name = APR_ARRAY_IDX(conf->export_claims, i,
                                         const char *);
        const char *text = NULL;
        lessons_claim_text_e rc;

        rc = lessons_claims_text(r->pool, lessons_claims_get(claims, name),
                                 LESSONS_CLAIM_MAX, &text);
        if (rc == LESSONS_CLAIM_TEXT_OK) {
            apr_table_setn(r->subprocess_env,
                           lessons_claims_env_name(r->pool, name), text);
        }
        else if (rc != LESSONS_CLAIM_TEXT_ABSENT) {
            ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00216)
                          "claim %s not exported: it %s%s", name,
                          lessons_claims_text_describe(rc),
                          rc == LESSONS_CLAIM_TEXT_LIST ? ""
                          : apr_psprintf(r->pool, " (at most %d bytes, no "
                                         "control characters)",
                                         LESSONS_CLAIM_MAX));
        }
    }
}

/* The token against a policy, through the process's verified-token
 * cache.
 */
static lessons_token_e lessons_verify(request_rec *r,
                                      const lessons_token_policy_t *policy,
                                      const char *token,
                                      const char **subject, json_t **claims)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);

    return lessons_token_verify_claims(r->pool, policy, sconf->tokens, token,
                                       (apr_int64_t)apr_time_sec(
                                           r->request_time),
                                       subject, claims);
}

/* The request's bearer token into *token: OK, or the refusal (401
 * without one, 400 for a malformed Authorization header).
 */
static int lessons_bearer_of(request_rec *r, const lessons_dir_conf *conf,
                             const char **token)
{
    const char *header = apr_table_get(r->headers_in, "Authorization");
    lessons_bearer_e rc = lessons_bearer_parse(r->pool, header, token);
    const char *other;

    /* Where a section takes DPoP, its scheme carries the token too. */
    if (rc == LESSONS_BEARER_OTHER_SCHEME
        && lessons_dpop_mode(conf) != LESSONS_DPOP_OFF) {
        rc = lessons_auth_parse(r->pool, header, "DPoP", token);
        lessons_state(r)->dpop = rc != LESSONS_BEARER_OTHER_SCHEME;
    }
    /* Where it does not, a DPoP client did send a token, in a scheme not
     * taken here: say that, not that none came.  Bearer's challenge stays
     * bare (RFC 6750 3.1: a scheme the server does not support is no
     * error of a bearer token), and the token is not looked at.
     */
    else if (rc == LESSONS_BEARER_OTHER_SCHEME
             && lessons_auth_parse(r->pool, header, "DPoP", &other)
                != LESSONS_BEARER_OTHER_SCHEME) {
        lessons_count(r, LESSONS_M_REFUSED + LESSONS_REFUSED_DPOP);
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00223)
                      "%s: the DPoP scheme, which this section does not "
                      "take (LessonsJWTDPoP off)",
                      lessons_refused(r, HTTP_UNAUTHORIZED));
        return lessons_challenge(r, HTTP_UNAUTHORIZED, NULL,
                                 "DPoP is not accepted here: send the "
                                 "access token with the Bearer scheme.");
    }
    switch (rc) {
    case LESSONS_BEARER_NONE:
    case LESSONS_BEARER_OTHER_SCHEME:
        /* A refusal like any other: info.  A bearer client sends its
         * token from the first request on.
         */
        lessons_count(r, LESSONS_M_REFUSED + LESSONS_REFUSED_NO_TOKEN);
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00202)
                      "%s: no bearer token",
                      lessons_refused(r, HTTP_UNAUTHORIZED));
        return lessons_challenge(r, HTTP_UNAUTHORIZED, NULL,
                                 "A bearer token is required.");
    case LESSONS_BEARER_MALFORMED:
        /* Never the header itself: it may hold a token. */
        lessons_count(r, LESSONS_M_REFUSED + LESSONS_REFUSED_BAD_HEADER);
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00203)
                      "%s: malformed Authorization header",
                      lessons_refused(r, HTTP_BAD_REQUEST));
        return lessons_challenge(r, HTTP_BAD_REQUEST, "invalid_request",
                                 lessons_state(r)->dpop
                                 ? "The Authorization header must be "
                                   "'DPoP' followed by one token."
                                 : "The Authorization header must be "
                                   "'Bearer' followed by one token.");
    case LESSONS_BEARER_OK:
        break;
    }
    return OK;
}

/* The issuers of a section's <LessonsJWTIssuer> blocks, in order. */
static const char *const *lessons_issuer_names(request_rec *r,
                                               const lessons_dir_conf *conf)
{
    int n = conf->issuers->nelts, i;
    const char **names = apr_palloc(r->pool, sizeof(*names) * (apr_size_t)n);

    for (i = 0; i < n; i++) {
        names[i] = APR_ARRAY_IDX(conf->issuers, i, lessons_dir_conf *)->issuer;
    }
    return names;
}

/* r->user from the verified token's user claim (subject when it is sub,
 * else from claims); where the section takes several issuers (unit is
 * then the block of the token's), qualified with its issuer.  The user
 * goes into logs, REMOTE_USER and headers an admin builds from it: a
 * claim that cannot be one as it is refuses the token (401), rather than
 * making it someone else by cleaning or cutting it.  A token without the
 * claim leaves the user unset.
 */
static int lessons_set_user(request_rec *r, const lessons_dir_conf *conf,
                            const lessons_dir_conf *unit,
                            const char *subject, json_t *claims)
{
    const char *user = NULL;
    lessons_claim_text_e urc;

    if (conf->user_claim && strcmp(conf->user_claim, "sub")) {
        urc = lessons_claims_user(r->pool,
                                  lessons_claims_get(claims,
                                                     conf->user_claim),
                                  LESSONS_USER_MAX, &user);
    }
    else {
        urc = subject ? lessons_claims_text_check(subject, strlen(subject),
                                                  LESSONS_USER_MAX)
                      : LESSONS_CLAIM_TEXT_ABSENT;
        user = subject;
    }
    /* Two issuers' "alice" are two users: "alice@" and the issuer. */
    if (urc == LESSONS_CLAIM_TEXT_OK && conf->issuers && unit != conf) {
        urc = lessons_claims_qualify(r->pool, user, unit->issuer,
                                     lessons_issuer_names(r, conf),
                                     conf->issuers->nelts, &user);
    }
    if (urc != LESSONS_CLAIM_TEXT_OK && urc != LESSONS_CLAIM_TEXT_ABSENT) {
        lessons_count(r, LESSONS_M_REFUSED + LESSONS_REFUSED_USER_CLAIM);
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00217)
                      "%s: the user claim %s %s (%s)",
                      lessons_refused(r, HTTP_UNAUTHORIZED),
                      conf->user_claim ? conf->user_claim : "sub",
                      lessons_claims_text_describe(urc),
                      urc == LESSONS_CLAIM_TEXT_OTHER_ISSUER
                      ? apr_pstrcat(r->pool, "issuer names with \"@\" in "
                                    "the section at ", conf->jwt_where, NULL)
                      : apr_psprintf(r->pool, "at most %d bytes, no control "
                                     "characters", LESSONS_USER_MAX));
        return lessons_challenge(r, HTTP_UNAUTHORIZED, "invalid_token",
                                 "The access token's user claim cannot "
                                 "be used as a user name.");
    }
    if (urc == LESSONS_CLAIM_TEXT_OK) {
        r->user = apr_pstrdup(r->pool, user);
    }
    return OK;
}

/* A token refused for what it is (RFC 6750 invalid_token): 401. */
static int lessons_token_refused(request_rec *r, lessons_token_e rc)
{
    lessons_count(r, LESSONS_M_REFUSED + lessons_refusal_of(rc));
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00204)
                  "%s: %s", lessons_refused(r, HTTP_UNAUTHORIZED),
                  lessons_token_describe(rc));
    return lessons_challenge(r, HTTP_UNAUTHORIZED, "invalid_token",
                             lessons_token_describe(rc));
}

/* In a section with <LessonsJWTIssuer> blocks, the block of the issuer
 * the token names (read before its signature, trusted for nothing
 * else: only that issuer's keys will be tried, and its iss checked
 * again once they verify).  OK with *unit, or the refusal.
 */
static int lessons_block_of(request_rec *r, const lessons_dir_conf *conf,
                            const char *token, const lessons_dir_conf **unit)
{
    int n = conf->issuers->nelts, i;
    lessons_token_e rc;

    rc = lessons_token_pick_issuer(r->pool, token,
                                   lessons_issuer_names(r, conf), n, &i);
    if (rc == LESSONS_TOKEN_UNKNOWN_ISSUER) {
        /* Never the iss itself: a claim's value. */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00222)
                      "%s: the token names none of the %d issuers of the "
                      "section at %s", lessons_refused(r, HTTP_UNAUTHORIZED),
                      n, conf->jwt_where);
        return lessons_challenge(r, HTTP_UNAUTHORIZED, "invalid_token",
                                 lessons_token_describe(rc));
    }
    if (rc != LESSONS_TOKEN_OK) {
        return lessons_token_refused(r, rc);
    }
    *unit = APR_ARRAY_IDX(conf->issuers, i, lessons_dir_conf *);
    return OK;
}

/* Verify the request's bearer token.  OK sets r->user to the user
 * claim; anything else is the refusal's status (401, 400, 500, 503),
 * its body left to httpd's error path.
 */
static int lessons_authenticate(request_rec *r, const lessons_dir_conf *conf,
                                lessons_req_state *st)
{
    const lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    const lessons_dir_conf *unit = conf;
    lessons_token_policy_t policy;
    lessons_keys_src *src = NULL;
    const char *token = NULL, *subject = NULL, *why;
    json_t *claims = NULL;
    int want_claims, rc;

    /* Whatever the merge left must verify; else nothing passes. */
    why = lessons_gate_policy(r->pool, conf, sconf->jwt_caps, &policy, &src);
    if (why) {
        return lessons_misconfigured(r, why);
    }

    rc = lessons_bearer_of(r, conf, &token);
    if (rc != OK) {
        return rc;
    }
    if (conf->issuers) {
        rc = lessons_block_of(r, conf, token, &unit);
        if (rc != OK) {
            return rc;
        }
        why = lessons_unit_policy(r->pool, conf, unit, sconf->jwt_caps,
                                  &policy, &src);
        if (why) {
            return lessons_misconfigured(r, why);
        }
    }

    /* A keys URL's set is held for the request: a refresh may swap it. */
    rc = lessons_keys_policy(r, src, &policy);
    if (rc != OK) {
        return rc;
    }
    /* Each distinct token is verified once per process; exp and nbf
     * are still checked against the clock on every request.  The claims
     * are decoded only where a directive asks for them.
     */
    want_claims = (conf->user_claim && strcmp(conf->user_claim, "sub"))
                  || (conf->export_claims && conf->export_claims->nelts)
                  || lessons_dpop_mode(conf) != LESSONS_DPOP_OFF;
    rc = lessons_verify(r, &policy, token, &subject,
                        want_claims ? &claims : NULL);
    /* A kid the set lacks may be a rotation: one refetch (at most once
     * per LessonsJWTKeysMinRefresh), then judge it again.
     */
    if (rc == LESSONS_TOKEN_UNKNOWN_KID && lessons_keys_refetch(r, src)
        && !lessons_unit_policy(r->pool, conf, unit, sconf->jwt_caps,
                                &policy, &src)
        && lessons_keys_policy(r, src, &policy) == OK) {
        rc = lessons_verify(r, &policy, token, &subject,
                            want_claims ? &claims : NULL);
    }
    if (rc == LESSONS_TOKEN_KEY_MISFIT) {
        return lessons_misconfigured(r, apr_psprintf(r->pool,
            "the keys of %s (section at %s) allow none of the algorithms %s",
            src ? lessons_keys_src_label(r->pool, src) : unit->key_file,
            unit->jwt_where ? unit->jwt_where : "(an issuer line)",
            unit->alg_name ? unit->alg_name : "of a discovered issuer"));
    }
    if (rc != LESSONS_TOKEN_OK) {
        return lessons_token_refused(r, rc);
    }
    /* A token bound to a key needs a proof made with it (RFC 9449). */
    if (lessons_dpop_mode(conf) != LESSONS_DPOP_OFF) {
        rc = lessons_dpop_gate(r, lessons_dpop_mode(conf),
                               lessons_state(r)->dpop, token, claims,
                               conf->leeway > 0 ? conf->leeway : 0);
        if (rc != OK) {
            lessons_drain_small_body(r);
            return rc;
        }
    }
    rc = lessons_set_user(r, conf, unit, subject, claims);
    if (rc != OK) {
        return rc;
    }
    lessons_export_claims(r, conf, claims);
    r->ap_auth_type = lessons_state(r)->dpop ? "DPoP" : "Bearer";
    st->token = token;
    st->unit = unit;
    st->src = src;
    st->policy = policy;
    if (want_claims) {
        st->claims = claims;
        st->claims_done = 1;
    }
    return OK;
}

/* The gate's verdict for this request, worked out once: OK, or the
 * refusal's status.  A subrequest or internal redirect under the same
 * merged configuration takes its parent's verdict, as httpd itself
 * skips their access checks (AP_AUTH_INTERNAL_PER_CONF); any other
 * request is checked afresh.  DECLINED where no key is in force.
 */
int lessons_gate(request_rec *r)
{
    lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);
    lessons_req_state *st, *from = NULL;

    if (!lessons_token_required(conf)) {
        return DECLINED;            /* costs the rest of the server nothing */
    }
    st = lessons_state(r);
    if (st->checked) {
        return st->status;
    }
    st->checked = 1;
    if (r->prev && r->prev->per_dir_config == r->per_dir_config) {
        from = ap_get_module_config(r->prev->request_config,
                                    &lessons_module);
    }
    else if (r->main && r->main->per_dir_config == r->per_dir_config) {
        from = ap_get_module_config(r->main->request_config,
                                    &lessons_module);
    }
    if (from && from->checked) {
        st->status = from->status;
        st->token = from->token;
        st->unit = from->unit;
        st->src = from->src;
        st->policy = from->policy;
        st->claims = from->claims;
        st->claims_done = from->claims_done;
        if (st->status != OK) {
            lessons_refuse(r, from->problem_status, from->problem_detail);
        }
        return st->status;
    }
    return st->status = lessons_authenticate(r, conf, st);
}

/* The verified token's claims, for Require jwt-claim: decoded on first
 * use (a token cache hit, so no second signature check).  NULL unless
 * the request's token verified.
 */
json_t *lessons_request_claims(request_rec *r)
{
    lessons_req_state *st = lessons_state(r);
    const char *subject = NULL;

    if (!st->checked || st->status != OK || !st->token) {
        return NULL;
    }
    if (!st->claims_done) {
        st->claims_done = 1;
        if (lessons_verify(r, &st->policy, st->token, &subject,
                           &st->claims) != LESSONS_TOKEN_OK) {
            st->claims = NULL;
        }
    }
    return st->claims;
}

/* Who vouched for the request's verified token: the source of the keys
 * that verified it (a key file, a keys URL, an issuer's discovered
 * keys) and the issuer they are for, never a claim the token makes.
 * The same for every token those keys verify; two sections or blocks
 * with other keys or another issuer never share it.  NULL unless the
 * request's token verified.
 */
const char *lessons_request_verifier(request_rec *r)
{
    lessons_req_state *st = lessons_state(r);

    if (!st->checked || st->status != OK || !st->token || !st->unit) {
        return NULL;
    }
    return apr_pstrcat(r->pool, st->src ? lessons_keys_src_label(r->pool,
                                                                 st->src)
                                        : apr_pstrcat(r->pool, "key file ",
                                                      st->unit->key_file
                                                      ? st->unit->key_file
                                                      : "", NULL),
                       st->policy.issuer ? " for " : " for any issuer",
                       st->policy.issuer ? st->policy.issuer : "", NULL);
}

/* The gate where a key must be in force (the API's handler): no key
 * here is a misconfiguration, answered 500.
 */
int lessons_gate_required(request_rec *r)
{
    int rc = lessons_gate(r);

    if (rc == DECLINED) {
        return lessons_misconfigured(r, "no LessonsJWTKey in effect");
    }
    return rc;
}

/* access_checker, first: the gate, before authn, authz and any handler
 * (and before the other access checkers, so that a missing token is a
 * 401 rather than their 403).
 */
int lessons_check_access(request_rec *r)
{
    return lessons_gate(r);
}

/* access_checker, last: under Satisfy Any httpd admits a request once
 * every access checker says OK, and then runs no authz at all, so a
 * failing Require jwt-claim would count for nothing.  Once the others
 * have run, our OK is withheld (the token is good, but the Require
 * lines have not spoken yet): httpd goes on to access_checker_ex and
 * authz, where they decide, and mod_access_compat's Allow lines cannot
 * stand in for them.
 */
int lessons_check_access_any(request_rec *r)
{
    if (lessons_gate(r) == OK && ap_satisfies(r) == SATISFY_ANY) {
        return HTTP_UNAUTHORIZED;
    }
    return DECLINED;
}

/* access_checker_ex, which Satisfy Any reaches even when the access
 * checkers refused, and fixups, which every request reaches before its
 * handler whatever the access phases did: a refused token stays refused;
 * a good one leaves the decision to the Require lines (mod_authz_core,
 * after us) and to the handler.
 */
int lessons_check_gate_again(request_rec *r)
{
    int rc = lessons_gate(r);

    return rc == OK ? DECLINED : rc;
}
