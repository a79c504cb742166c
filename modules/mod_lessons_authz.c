/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_authz.c: `Require jwt-claim NAME VALUE...`, an authz
 * provider of mod_authz_core, so claims compose with <RequireAll>,
 * <RequireAny>, <LimitExcept> and every other provider.  The token was
 * verified by the access checker (which runs first); this only reads
 * its claims.  A refusal leaves the status to mod_authz_core (403) and
 * only dresses httpd's error response: problem+json and RFC 6750's
 * insufficient_scope challenge.
 */

#include "mod_lessons.h"
#include "mod_auth.h"

#define LESSONS_FORBIDDEN_FILTER  "LESSONS_FORBIDDEN"

/* One parsed Require line. */
typedef struct {
    const char *name;               /* dotted claim name */
    const char *const *values;
    int nvalues;
} lessons_claim_require_t;

static const char *lessons_authz_parse(cmd_parms *cmd,
                                       const char *require_line,
                                       const void **parsed)
{
    lessons_claim_require_t *req;
    apr_array_header_t *values;
    const char *word;

    req = apr_pcalloc(cmd->pool, sizeof(*req));
    req->name = ap_getword_conf(cmd->pool, &require_line);
    if (!*req->name) {
        return "Require jwt-claim needs a claim name and at least one "
               "value, as in: Require jwt-claim role editor admin";
    }
    values = apr_array_make(cmd->pool, 4, sizeof(const char *));
    while (*(word = ap_getword_conf(cmd->pool, &require_line))) {
        APR_ARRAY_PUSH(values, const char *) = word;
    }
    if (values->nelts == 0) {
        return apr_psprintf(cmd->pool, "Require jwt-claim %s: no value "
                            "given; name at least one value the claim "
                            "must equal or contain", req->name);
    }
    req->values = (const char *const *)values->elts;
    req->nvalues = values->nelts;
    *parsed = req;
    return NULL;
}

static authz_status lessons_authz_check(request_rec *r,
                                        const char *require_line,
                                        const void *parsed)
{
    const lessons_claim_require_t *req = parsed;
    lessons_req_state *st = lessons_state(r);
    json_t *claims;

    (void)require_line;
    if (!req) {
        return AUTHZ_GENERAL_ERROR;
    }
    if (!st->checked) {
        /* No token policy here: nothing verified, nothing to read. */
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00207) "Require jwt-claim %s applies to %s, but no "
            "LessonsJWTKey is in effect there", req->name, r->uri));
        return AUTHZ_GENERAL_ERROR;
    }
    if (st->status != OK) {
        return AUTHZ_DENIED;        /* already refused (401/400/500) */
    }
    claims = lessons_request_claims(r);
    if (!claims) {
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00208) "Require jwt-claim %s: the verified token's "
            "claims could not be read", req->name));
        return AUTHZ_GENERAL_ERROR;
    }
    if (lessons_claims_match(claims, req->name, req->values,
                             req->nvalues)) {
        return AUTHZ_GRANTED;
    }
    /* Only the name: a claim's value is not the log's to keep. */
    if (!st->denied_claim) {
        st->denied_claim = req->name;
    }
    return AUTHZ_DENIED;
}

static const authz_provider lessons_authz_claim_provider = {
    &lessons_authz_check,
    &lessons_authz_parse
};

/* Replaces the body of httpd's 403 page with problem+json, and adds the
 * insufficient_scope challenge when a claim refused; httpd has already
 * swapped err_headers_out into headers_out.
 */
static apr_status_t lessons_forbidden_filter(ap_filter_t *f,
                                             apr_bucket_brigade *bb)
{
    request_rec *r = f->r;
    lessons_req_state *st = lessons_state(r);
    apr_bucket *b, *next;

    for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb);
         b = next) {
        next = APR_BUCKET_NEXT(b);
        if (!APR_BUCKET_IS_METADATA(b)) {
            apr_bucket_delete(b);
        }
    }
    if (!f->ctx) {
        const char *detail = st->denied_claim
            ? "The access token lacks a claim this request requires."
            : "The server's access rules refuse this request.";
        apr_size_t len = 0;
        const char *body = lessons_json_problem(r->pool, HTTP_FORBIDDEN,
                                                NULL, detail, NULL, &len);

        f->ctx = f;                 /* the body goes out once */
        if (body) {
            if (st->denied_claim) {
                apr_table_setn(r->headers_out, "WWW-Authenticate",
                               lessons_challenge_value(r,
                                   "insufficient_scope", detail));
            }
            apr_table_setn(r->headers_out, "Cache-Control", "no-store");
            apr_table_setn(r->headers_out, "X-Content-Type-Options",
                           "nosniff");
            ap_set_content_type(r, LESSONS_CT_PROBLEM);
            ap_set_content_length(r, (apr_off_t)len);
            if (!r->header_only) {
                APR_BRIGADE_INSERT_HEAD(bb, apr_bucket_pool_create(
                    body, len, r->pool, bb->bucket_alloc));
            }
        }
    }
    return ap_pass_brigade(f->next, bb);
}

/* httpd is about to send its error page: a 403 on the API, or one that a
 * Require jwt-claim line took part in, goes out as problem+json.
 */
static void lessons_insert_error_filter(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);

    if (!st || r->status != HTTP_FORBIDDEN || st->forbidden_sent
        || !(st->denied_claim || st->api)) {
        return;
    }
    st->forbidden_sent = 1;
    if (st->denied_claim) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00206)
                      "%s: the token lacks a required value of claim %s",
                      lessons_refused(r, HTTP_FORBIDDEN), st->denied_claim);
    }
    ap_add_output_filter(LESSONS_FORBIDDEN_FILTER, NULL, r, r->connection);
}

/* A verified token is the authentication: mod_authz_core's second pass
 * (after a provider such as valid-user asked for a user) must not fall
 * to mod_authn_core, which knows no AuthType and would leave r->user
 * unset (a 500).  A token without a user claim is an anonymous caller.
 */
static int lessons_check_user_id(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);

    if (!st || !st->checked || st->status != OK) {
        return DECLINED;
    }
    if (!r->user) {
        r->user = "";
    }
    return OK;
}

void lessons_authz_register(apr_pool_t *p)
{
    ap_register_auth_provider(p, AUTHZ_PROVIDER_GROUP, "jwt-claim",
                              AUTHZ_PROVIDER_VERSION,
                              &lessons_authz_claim_provider,
                              AP_AUTH_INTERNAL_PER_CONF);
    ap_hook_check_authn(lessons_check_user_id, NULL, NULL, APR_HOOK_FIRST,
                        AP_AUTH_INTERNAL_PER_CONF);
    ap_hook_insert_error_filter(lessons_insert_error_filter, NULL, NULL,
                                APR_HOOK_MIDDLE);
    ap_register_output_filter(LESSONS_FORBIDDEN_FILTER,
                              lessons_forbidden_filter, NULL,
                              AP_FTYPE_CONTENT_SET);
}
