/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_access.c: the bearer token, checked in the access checker
 * before any handler runs; the handler asks again, so the API fails
 * closed whatever the authz configuration says.
 */

#include "mod_lessons.h"

static const char *lessons_realm(request_rec *r)
{
    const char *realm = ap_auth_name(r);

    /* It goes inside a quoted-string: refuse anything needing escapes. */
    if (!realm || !*realm || strpbrk(realm, "\"\\\r\n")) {
        return LESSONS_DEFAULT_REALM;
    }
    return realm;
}

/* RFC 6750 3: the challenge, with an error code when there is one. */
const char *lessons_challenge_value(request_rec *r, const char *error,
                                    const char *description)
{
    const char *value = apr_psprintf(r->pool, "Bearer realm=\"%s\"",
                                     lessons_realm(r));

    if (error) {
        value = apr_psprintf(r->pool, "%s, error=\"%s\", "
                             "error_description=\"%s\"", value, error,
                             description);
    }
    return value;
}

static int lessons_challenge(request_rec *r, int status, const char *error,
                             const char *description)
{
    apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                   lessons_challenge_value(r, error, description));
    return lessons_error_response(r, status, description);
}

/* Is a token policy in effect here at all (complete or not)? */
static int lessons_configured(const lessons_dir_conf *conf)
{
    return conf->jwt_where != NULL;
}

/* The request fails closed with 500: the configuration in effect cannot
 * verify tokens.  Start-up refuses every such configuration it can see;
 * this is what holds for the ones only a merge produces.
 */
static int lessons_misconfigured(request_rec *r, lessons_req_state *st,
                                 const char *why)
{
    lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool, LESSONSLOG(00201)
                      "%s; refusing to serve %s", why, r->uri));
    return st->status = lessons_error_response(r,
        HTTP_INTERNAL_SERVER_ERROR, "The server is misconfigured.");
}

/* LessonsJWTExportClaims: each claim the token has, as JWT_CLAIM_<name>
 * (capped, control characters gone); one it lacks is left unset.
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
        const char *text = lessons_claims_text(r->pool,
                                               lessons_claims_get(claims,
                                                                  name),
                                               LESSONS_CLAIM_MAX);

        if (text) {
            apr_table_setn(r->subprocess_env,
                           lessons_claims_env_name(r->pool, name), text);
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

/* Verify the request's bearer token once; later calls return the first
 * answer.  OK sets r->user to the token's sub; DONE means the refusal
 * (401, 400 or 500) has been sent.
 */
int lessons_authenticate(request_rec *r, const lessons_dir_conf *conf)
{
    lessons_req_state *st = lessons_state(r);
    lessons_token_policy_t policy;
    const char *token = NULL, *subject = NULL;
    json_t *claims = NULL;
    int want_claims;
    lessons_token_e rc;

    if (st->checked) {
        return st->status;
    }
    st->checked = 1;

    if (!lessons_configured(conf)) {
        return lessons_misconfigured(r, st, "no LessonsJWTKey in effect");
    }
    if (!conf->algs || !(conf->keyset || conf->keys_url)) {
        return lessons_misconfigured(r, st, apr_psprintf(r->pool,
            "the section at %s sets %s without %s", conf->jwt_where,
            conf->algs ? "LessonsJWTAlgorithm" : "its key",
            conf->algs ? "a key" : "LessonsJWTAlgorithm"));
    }

    switch (lessons_bearer_parse(r->pool,
                                 apr_table_get(r->headers_in,
                                               "Authorization"), &token)) {
    case LESSONS_BEARER_NONE:
    case LESSONS_BEARER_OTHER_SCHEME:
        /* A refusal like any other (decisions.md): info.  A bearer
         * client sends its token from the first request on.
         */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00202)
                      "%s: no bearer token",
                      lessons_refused(r, HTTP_UNAUTHORIZED));
        return st->status = lessons_challenge(r, HTTP_UNAUTHORIZED, NULL,
            "A bearer token is required.");
    case LESSONS_BEARER_MALFORMED:
        /* Never the header itself: it may hold a token. */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00203)
                      "%s: malformed Authorization header",
                      lessons_refused(r, HTTP_BAD_REQUEST));
        return st->status = lessons_challenge(r, HTTP_BAD_REQUEST,
            "invalid_request", "The Authorization header must be "
            "'Bearer' followed by one token.");
    case LESSONS_BEARER_OK:
        break;
    }

    /* A keys URL's set is held for the request: a refresh may swap it. */
    rc = lessons_keys_policy(r, conf, &policy);
    if (rc != OK) {
        return st->status = rc;
    }
    /* Each distinct token is verified once per process; exp and nbf
     * are still checked against the clock on every request.
     */
    /* The claims are decoded only where a directive asks for them. */
    want_claims = (conf->user_claim && strcmp(conf->user_claim, "sub"))
                  || (conf->export_claims && conf->export_claims->nelts);
    rc = lessons_verify(r, &policy, token, &subject,
                        want_claims ? &claims : NULL);
    /* A kid the set lacks may be a rotation: one refetch (at most once
     * per LessonsJWTKeysMinRefresh), then judge it again.
     */
    if (rc == LESSONS_TOKEN_UNKNOWN_KID && lessons_keys_refetch(r, conf)
        && lessons_keys_policy(r, conf, &policy) == OK) {
        rc = lessons_verify(r, &policy, token, &subject,
                            want_claims ? &claims : NULL);
    }
    if (rc == LESSONS_TOKEN_KEY_MISFIT) {
        return lessons_misconfigured(r, st, apr_psprintf(r->pool,
            "the keys of %s (section at %s) allow none of the algorithms "
            "%s", conf->key_file ? conf->key_file : "the keys URL",
            conf->jwt_where, conf->alg_name));
    }
    if (rc != LESSONS_TOKEN_OK) {
        /* The client's fault: info, as every refusal (LogLevel
         * lessons:info shows them).
         */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00204)
                      "%s: %s", lessons_refused(r, HTTP_UNAUTHORIZED),
                      lessons_token_describe(rc));
        return st->status = lessons_challenge(r, HTTP_UNAUTHORIZED,
            "invalid_token", lessons_token_describe(rc));
    }
    if (want_claims && conf->user_claim && strcmp(conf->user_claim, "sub")) {
        subject = lessons_claims_text(r->pool,
                                      lessons_claims_get(claims,
                                                         conf->user_claim),
                                      LESSONS_USER_MAX);
    }
    if (subject) {
        r->user = apr_pstrdup(r->pool, subject);
    }
    lessons_export_claims(r, conf, claims);
    r->ap_auth_type = "Bearer";
    st->token = token;
    st->policy = policy;
    if (want_claims) {
        st->claims = claims;
        st->claims_done = 1;
    }
    return st->status = OK;
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

/* Runs for every request where an algorithm and a key are in effect,
 * before authn/authz and before any handler: a request without a valid
 * token stops here.
 */
int lessons_check_access(request_rec *r)
{
    lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);

    int rc;

    if (!lessons_configured(conf)) {
        return DECLINED;    /* no token policy here; the handler still
                             * refuses to serve without one */
    }
    /* Before the token: a preflight carries none, and a refusal must
     * carry the CORS headers for a browser to read it.
     */
    rc = lessons_cors(r, conf);
    if (rc != DECLINED) {
        return rc;
    }
    return lessons_authenticate(r, conf);
}
