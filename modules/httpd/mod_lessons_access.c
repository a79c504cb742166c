/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_access.c: the token gate.  Wherever a key is in force, the
 * request's bearer token is checked once, in the access checker, before
 * any handler (the API's, CGI, proxy, static files, another module's).
 * httpd's merge of Satisfy, Require and Order decides which access hooks
 * run, so the gate is asked again where that merge cannot skip it:
 * access_checker_ex (which Satisfy Any reaches) and fixups (which every
 * request reaches).  What the gate decides is lessons_decide's, an
 * httpd-free unit: here it gets the request's facts and the section's
 * policy, and its verdict is applied.  A refusal is a status returned to
 * httpd, so nothing after the gate runs, and the body comes from httpd's
 * error path.
 */

#include "httpd/mod_lessons.h"

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

/* A verdict's log line: a refusal's after what was refused and who
 * asked, a fault's alone (and throttled).
 */
static void lessons_log_line(request_rec *r, int status,
                             const lessons_decide_line_t *line)
{
    if (line->fault) {
        lessons_log_fault(r, line->level, apr_psprintf(r->pool,
                          "LESSONS%05d: %s", line->tag, line->text));
    }
    else {
        ap_log_rerror(APLOG_MARK, line->level, 0, r, "LESSONS%05d: %s: %s",
                      line->tag, lessons_refused(r, status), line->text);
    }
}

/* Where the section asks for DPoP nonces, the current one (RFC 9449 8.1
 * and 9): in err_headers_out, so that whatever answers the request (the
 * API's 2xx, a 304, httpd's own error page, the 401 itself) carries it.
 */
static void lessons_give_nonce(request_rec *r, const lessons_verdict_t *v)
{
    if (v->nonce) {
        apr_table_setn(r->err_headers_out, "DPoP-Nonce", v->nonce);
    }
}

/* What the section expected where the token named something else, for
 * the refusals' summary: the audience or the issuer it verified under.
 */
static const char *lessons_refusal_expected(const lessons_verdict_t *v)
{
    switch (v->refusal) {
    case LESSONS_REFUSED_AUDIENCE:
        return v->unit ? v->policy.audience : NULL;
    case LESSONS_REFUSED_ISSUER:
        return v->unit ? v->policy.issuer : NULL;
    default:
        return NULL;
    }
}

/* A refusal as httpd sends it: its challenge (Bearer's, RFC 6750, or
 * DPoP's, RFC 9449 7.1, or Bearer's with DPoP's bare beside it) and
 * Retry-After in err_headers_out, the body drained, the status back to
 * httpd, and the reason kept to be counted once, at log time.
 */
static int lessons_refuse_verdict(request_rec *r, const lessons_verdict_t *v)
{
    lessons_req_state *st = lessons_state(r);

    lessons_log_line(r, v->status, &v->line);
    switch (v->challenge) {
    case LESSONS_CHALLENGE_DPOP:
        apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                       lessons_dpop_challenge_value(r, v->error,
                                                    v->description));
        break;
    case LESSONS_CHALLENGE_BEARER_DPOP:
    case LESSONS_CHALLENGE_BEARER:
        apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                       lessons_challenge_value(r, v->error, v->description));
        if (v->challenge == LESSONS_CHALLENGE_BEARER_DPOP) {
            apr_table_addn(r->err_headers_out, "WWW-Authenticate",
                           lessons_dpop_challenge_value(r, NULL, NULL));
        }
        break;
    default:
        break;
    }
    if (v->retry_after > 0) {
        apr_table_setn(r->err_headers_out, "Retry-After",
                       apr_itoa(r->pool, v->retry_after));
    }
    lessons_give_nonce(r, v);
    st->refusal = v->refusal >= 0 ? v->refusal + 1 : 0;
    st->refusal_expected = lessons_refusal_expected(v);
    lessons_drain_small_body(r);
    return lessons_refuse(r, v->status, v->description);
}

/* An allowed request: the user, the exported claims, the scheme, and
 * what later phases ask of the token (lessons_request_claims,
 * lessons_request_verifier).
 */
static int lessons_allow_verdict(request_rec *r, const lessons_verdict_t *v,
                                 lessons_req_state *st)
{
    int i;

    if (v->user) {
        r->user = apr_pstrdup(r->pool, v->user);
    }
    for (i = 0; v->exports && i < v->exports->nelts; i++) {
        const lessons_decide_export_t *e =
            &APR_ARRAY_IDX(v->exports, i, lessons_decide_export_t);

        apr_table_setn(r->subprocess_env, e->name, e->value);
    }
    lessons_give_nonce(r, v);
    r->ap_auth_type = v->dpop ? "DPoP" : "Bearer";
    st->passed.dpop = v->dpop;
    st->passed.token = v->token;
    st->passed.unit = v->unit;
    st->passed.policy = v->policy;
    st->passed.claims = v->claims;
    st->passed.claims_done = v->claims_done;
    st->passed.introspected = v->introspected;
    return OK;
}

/* The gate's decision for this request (lessons_decide): the facts from
 * httpd, the policy from the merged section, the verdict applied.
 */
static int lessons_decide_request(request_rec *r, lessons_dir_conf *conf,
                                  lessons_req_state *st)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    lessons_decide_policy_t policy;
    lessons_decide_facts_t facts;
    lessons_verdict_t v;
    int i;

    lessons_decide_policy_of(r->pool, conf, &policy);
    if (policy.needed) {
        policy.tokens = sconf->tokens;
        lessons_dpop_policy(r, &policy);
        lessons_introspect_policy(r, conf, &policy);
        memset(&facts, 0, sizeof(facts));
        facts.method = r->method;
        facts.path = r->uri;
        facts.authorization = apr_table_get(r->headers_in, "Authorization");
        /* One clock per request: the replay table keeps a proof for a
         * window judged at this instant, so exp, nbf, iat and the nonce
         * are judged at it too.  r->request_time (the request line's
         * arrival) would let a client that trickles its headers for
         * half a minute replay a proof the table has dropped, or pass
         * a token that expired while its headers came.
         */
        st->judged = apr_time_now();
        facts.clock = st->judged;
        facts.now = (apr_int64_t)apr_time_sec(st->judged);
        if (policy.dpop && policy.dpop != LESSONS_DPOP_OFF) {
            lessons_dpop_facts(r, &facts);
        }
        /* Read (lessons_tls_client_x5t) only when a token's binding is
         * checked.
         */
        if (policy.certbind > LESSONS_CERTBIND_OFF) {
            facts.cert = lessons_tls_client_x5t;
            facts.cert_baton = r;
        }
    }
    lessons_decide(r->pool, &policy, &facts, &v);
    for (i = 0; v.notes && i < v.notes->nelts; i++) {
        const lessons_decide_line_t *note =
            &APR_ARRAY_IDX(v.notes, i, lessons_decide_line_t);

        ap_log_rerror(APLOG_MARK, note->level, 0, r, "LESSONS%05d: %s",
                      note->tag, note->text);
    }
    switch (v.kind) {
    case LESSONS_VERDICT_ALLOW:
        return lessons_allow_verdict(r, &v, st);
    case LESSONS_VERDICT_REFUSE:
        return lessons_refuse_verdict(r, &v);
    default:
        return DECLINED;
    }
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
    lessons_req_state *st = lessons_state(r), *from = NULL;

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
        st->passed = from->passed;
        st->judged = from->judged;
        if (st->status != OK && st->status != DECLINED) {
            lessons_refuse(r, from->problem_status, from->problem_detail);
        }
        return st->status;
    }
    return st->status = lessons_decide_request(r, conf, st);
}

/* The verified token's claims, for Require jwt-claim: decoded on first
 * use (a token cache hit, so no second signature check).  NULL unless
 * the request's token verified.
 */
json_t *lessons_request_claims(request_rec *r)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    lessons_req_state *st = lessons_state(r);
    lessons_passed_t *passed = &st->passed;
    const char *subject = NULL;

    if (!st->checked || st->status != OK || !passed->token) {
        return NULL;
    }
    if (!passed->claims_done) {
        passed->claims_done = 1;
        if (lessons_token_verify_claims(r->pool, &passed->policy,
                                        sconf->tokens, passed->token,
                                        (apr_int64_t)apr_time_sec(
                                            st->judged),
                                        &subject, &passed->claims)
            != LESSONS_TOKEN_OK) {
            passed->claims = NULL;
        }
    }
    return passed->claims;
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
    const lessons_passed_t *passed = &st->passed;
    const char *issuer = passed->policy.issuer;

    if (!st->checked || st->status != OK || !passed->token
        || !passed->unit) {
        return NULL;
    }
    /* An opaque token: the endpoint that vouched for it. */
    if (passed->introspected) {
        return apr_pstrcat(r->pool, "introspection endpoint ",
                           passed->introspected,
                           issuer ? " for " : " for any issuer",
                           issuer ? issuer : "", NULL);
    }
    return apr_pstrcat(r->pool, passed->unit->fetched ? "" : "key file ",
                       passed->unit->keys_name ? passed->unit->keys_name
                                               : "",
                       issuer ? " for " : " for any issuer",
                       issuer ? issuer : "", NULL);
}

/* The gate where a key must be in force (the API's handler): no key
 * here is a misconfiguration, answered 500.
 */
int lessons_gate_required(request_rec *r)
{
    int rc = lessons_gate(r);

    if (rc == DECLINED) {
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
                          LESSONSLOG(00201) "no LessonsJWTKey in effect; "
                          "refusing to serve %s", r->uri));
        lessons_drain_small_body(r);
        return lessons_refuse(r, HTTP_INTERNAL_SERVER_ERROR,
                              "The server is misconfigured.");
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
