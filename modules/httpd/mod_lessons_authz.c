/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_authz.c: `Require jwt-claim NAME VALUE...`, an authz
 * provider of mod_authz_core, so claims compose with <RequireAll>,
 * <RequireAny>, <LimitExcept> and every other provider.  The token was
 * verified by the access checker (which runs first); this only reads
 * its claims.  A refusal leaves the status to mod_authz_core (403);
 * lessons_insert_error_filter dresses httpd's error response with
 * problem+json and RFC 6750's insufficient_scope challenge.
 */

#include "httpd/mod_lessons.h"

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
    int rc;

    (void)require_line;
    if (!req) {
        return AUTHZ_GENERAL_ERROR;
    }
    rc = lessons_gate(r);
    if (rc == DECLINED) {
        /* No token policy here: nothing verified, nothing to read. */
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00207) "Require jwt-claim %s applies to %s, but no "
            "LessonsJWTKey is in effect there", req->name, r->uri));
        return AUTHZ_GENERAL_ERROR;
    }
    if (rc != OK) {
        return AUTHZ_DENIED;        /* refused already (401/400/500) */
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

const authz_provider lessons_authz_claim_provider = {
    &lessons_authz_check,
    &lessons_authz_parse
};

/* A verified token is the authentication: mod_authz_core's second pass
 * (after a provider such as valid-user asked for a user) must not fall
 * to mod_authn_core, which knows no AuthType and would leave r->user
 * unset (a 500).  A token without a user claim is an anonymous caller.
 */
int lessons_check_user_id(request_rec *r)
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
