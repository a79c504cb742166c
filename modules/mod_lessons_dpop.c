/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_dpop.c: DPoP (RFC 9449) as httpd meets it.  The gate asks
 * here once the access token has verified: a token bound to a key
 * (cnf.jkt) needs a proof made with that key for this very request
 * (lessons_dpop), taken once per server (lessons_replay, in shared
 * memory made before the fork and kept across restarts, under a global
 * mutex the Mutex directive can configure); a bound token sent as a
 * bearer token is refused, and so is a bearer token where a section
 * requires DPoP.  Refusals carry RFC 9449's WWW-Authenticate: DPoP
 * challenge.
 */

#include "apr_shm.h"

#include "mod_lessons.h"
#include "lessons_dpop.h"
#include "lessons_replay.h"

#define LESSONS_DPOP_KEPT   "mod_lessons-dpop-replay"
/* Proofs a server keeps, each until it is too old (at most 66 s with no
 * LessonsJWTLeeway): the first refusal comes with 31,000 of them held at
 * the fewest, so some 350 a second (t/unit/test_replay.c measures it;
 * DIRECTIVES.md quotes it); one key holds at most 1/16 of them.
 */
#define LESSONS_DPOP_SLOTS  65536

const char *lessons_dpop_challenge_value(request_rec *r, const char *error,
                                         const char *description)
{
    const lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    const char *value = apr_psprintf(r->pool, "DPoP realm=\"%s\", "
                                     "algs=\"%s\"", lessons_realm(r),
                                     lessons_dpop_algs_text(r->pool,
                                                            sconf->jwt_caps));

    if (error) {
        value = apr_psprintf(r->pool, "%s, error=\"%s\", "
                             "error_description=\"%s\"", value, error,
                             description);
    }
    return value;
}

/* The mutex of the proofs' table (the Mutex directive names it). */
int lessons_dpop_pre_config(apr_pool_t *pconf)
{
    return ap_mutex_register(pconf, LESSONS_DPOP_MUTEX, NULL,
                             APR_LOCK_DEFAULT, 0) == APR_SUCCESS ? OK : !OK;
}

/* The table, once per httpd run (as the metrics' block), and its mutex,
 * for every server.  Only where some section takes DPoP.
 */
int lessons_dpop_post_config(apr_pool_t *pconf, server_rec *s)
{
    apr_shm_t **kept;
    lessons_replay_t *table = NULL;
    apr_global_mutex_t *lock = NULL;
    apr_size_t size = lessons_replay_size(LESSONS_DPOP_SLOTS);
    int fresh = 0;
    apr_status_t rv;

    if (!lessons_dpop_configured(pconf)
        || ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    kept = ap_retained_data_get(LESSONS_DPOP_KEPT);
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_DPOP_KEPT, sizeof(*kept));
    }
    /* A block too small for this build's table (a restart onto a newer
     * module): another one, the proofs seen so far forgotten once.
     */
    if (*kept && apr_shm_size_get(*kept) < size) {
        apr_shm_destroy(*kept);
        *kept = NULL;
    }
    if (!*kept) {
        rv = apr_shm_create(kept, size, NULL, s->process->pool);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, rv, NULL,
                         LESSONSLOG(00122) "cannot make the shared memory "
                         "for DPoP proofs seen (%" APR_SIZE_T_FMT " bytes)",
                         size);
            *kept = NULL;
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        fresh = 1;
    }
    table = lessons_replay_attach(apr_shm_baseaddr_get(*kept),
                                  apr_shm_size_get(*kept),
                                  LESSONS_DPOP_SLOTS, fresh);
    rv = ap_global_mutex_create(&lock, NULL, LESSONS_DPOP_MUTEX, NULL, s,
                                pconf, 0);
    if (!table || rv != APR_SUCCESS) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->replay = table;
        sconf->replay_lock = lock;
    }
    return OK;
}

void lessons_dpop_child_init(apr_pool_t *pchild, server_rec *s)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    apr_global_mutex_t *lock = mconf->replay_lock;

    if (lock && apr_global_mutex_child_init(&lock,
                    apr_global_mutex_lockfile(lock), pchild)
                != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, LESSONSLOG(00123)
                     "cannot open the DPoP proofs' mutex in this process: "
                     "its DPoP requests get 503");
        lock = NULL;
    }
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->replay_lock = lock;
    }
}

/* Does the request's Host name this server: its ServerName or one of
 * its ServerAlias names?  Only then is it the server's own name.
 */
static int lessons_dpop_own_host(request_rec *r)
{
    const server_rec *s = r->server;
    const char *host = r->hostname;
    int i;

    if (!host) {
        return 0;
    }
    if (s->server_hostname && strcasecmp(host, s->server_hostname) == 0) {
        return 1;
    }
    for (i = 0; s->names && i < s->names->nelts; i++) {
        if (strcasecmp(host, APR_ARRAY_IDX(s->names, i, const char *)) == 0) {
            return 1;
        }
    }
    for (i = 0; s->wild_names && i < s->wild_names->nelts; i++) {
        if (ap_strcasecmp_match(host, APR_ARRAY_IDX(s->wild_names, i,
                                                    const char *)) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The URI htu must name: this server's, as httpd names itself in the
 * URLs it makes -- its scheme, and its name and port for this request
 * (ServerName with UseCanonicalName On; else the Host the request came
 * with, where that names this server: its ServerName or a ServerAlias,
 * on ServerName's port or the one the request came in on) -- and the
 * path of the request-target, its query left out.  Whatever else a
 * client writes, a Host naming another server or port, or a
 * request-target in absolute-form (GET https://elsewhere:8443/path),
 * gives only the path: the server is then named as UseCanonicalName On
 * names it, by its ServerName and port, never by the client.
 */
static const char *lessons_dpop_request_uri(request_rec *r)
{
    const char *target = r->unparsed_uri ? r->unparsed_uri : r->uri;
    apr_port_t port = ap_get_server_port(r);
    apr_port_t own = r->server->port ? r->server->port : ap_default_port(r);
    const apr_sockaddr_t *local = r->connection->local_addr;

    if ((target && *target != '/') || !lessons_dpop_own_host(r)
        || (port != own && (!local || port != local->port))) {
        return lessons_dpop_server_uri(r->pool, ap_http_scheme(r),
                                       r->server->server_hostname, own,
                                       target);
    }
    return lessons_dpop_server_uri(r->pool, ap_http_scheme(r),
                                   ap_get_server_name_for_url(r), port,
                                   target);
}

static int lessons_dpop_refuse(request_rec *r, const char *error,
                               const char *description, const char *detail)
{
    lessons_count(r, LESSONS_M_REFUSED + LESSONS_REFUSED_DPOP);
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00240)
                  "%s: %s", lessons_refused(r, HTTP_UNAUTHORIZED),
                  detail ? detail : description);
    apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                   lessons_dpop_challenge_value(r, error, description));
    return lessons_refuse(r, HTTP_UNAUTHORIZED, description);
}

/* The proofs seen cannot be asked (a fault, or a full table): 503, never
 * a proof taken unchecked.
 */
static int lessons_dpop_unavailable(request_rec *r, int level,
                                    const char *line)
{
    lessons_log_fault(r, level, apr_pstrcat(r->pool, line, ": answered 503",
                                            NULL));
    apr_table_setn(r->err_headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    return lessons_refuse(r, HTTP_SERVICE_UNAVAILABLE, "The server cannot "
                          "check DPoP proofs now; try again later.");
}

/* The one DPoP header of the request, or NULL (none, or more than one:
 * RFC 9449 4.3 takes exactly one).
 */
static int lessons_dpop_count(void *count, const char *key,
                              const char *value)
{
    (void)key;
    (void)value;
    (*(int *)count)++;
    return 1;
}

static const char *lessons_dpop_header(request_rec *r)
{
    const char *proof;
    int n = 0;

    apr_table_do(lessons_dpop_count, &n, r->headers_in, "DPoP", NULL);
    proof = n == 1 ? apr_table_get(r->headers_in, "DPoP") : NULL;
    /* httpd joins repeated header lines with ", ", and no JWS holds a
     * comma: such a value is several proofs.
     */
    return proof && !strchr(proof, ',') ? proof : NULL;
}

int lessons_dpop_gate(request_rec *r, int mode, int dpop_scheme,
                      const char *token, json_t *claims, long leeway)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    const char *jkt = lessons_dpop_token_jkt(claims), *proof, *why = NULL;
    lessons_dpop_request_t req;
    lessons_dpop_proof_t out;
    unsigned char key[LESSONS_REPLAY_KEY_LEN];
    apr_uint32_t owner;
    lessons_replay_e seen;
    lessons_dpop_e rc;

    /* Whether the token is bound is in its claims: without them,
     * nothing is known, and nothing is taken.
     */
    if (!claims) {
        return lessons_dpop_refuse(r, "invalid_token", "The access token's "
                                   "claims could not be read", NULL);
    }
    if (!dpop_scheme) {
        /* RFC 9449 7.2: a bound token is no bearer token. */
        if (jkt) {
            return lessons_dpop_refuse(r, "invalid_token", "The access "
                                       "token is bound to a DPoP key: send "
                                       "it with Authorization: DPoP and a "
                                       "proof", NULL);
        }
        if (mode == LESSONS_DPOP_REQUIRED) {
            return lessons_dpop_refuse(r, "invalid_token", "This resource "
                                       "takes DPoP-bound access tokens "
                                       "only", NULL);
        }
        return OK;
    }
    if (!jkt || !*jkt) {
        return lessons_dpop_refuse(r, "invalid_token",
                                   "The access token is not bound to a DPoP "
                                   "key", NULL);
    }
    proof = lessons_dpop_header(r);
    if (!proof) {
        return lessons_dpop_refuse(r, "invalid_dpop_proof", "Exactly one "
                                   "DPoP header with a proof is required",
                                   NULL);
    }
    memset(&req, 0, sizeof(req));
    req.method = r->method;
    req.uri = lessons_dpop_request_uri(r);
    req.token = token;
    req.now = (apr_int64_t)apr_time_sec(r->request_time);
    req.window = LESSONS_DPOP_WINDOW + leeway;
    req.ahead = LESSONS_DPOP_AHEAD + leeway;
    req.caps = sconf->jwt_caps;
    rc = lessons_dpop_check(r->pool, proof, &req, &out, &why);
    if (rc != LESSONS_DPOP_OK) {
        return lessons_dpop_refuse(r, "invalid_dpop_proof",
                                   lessons_dpop_describe(rc), why);
    }
    if (strcmp(out.jkt, jkt) != 0) {
        return lessons_dpop_refuse(r, "invalid_dpop_proof", "The DPoP proof "
                                   "is made with another key than the access "
                                   "token's", NULL);
    }
    if (!sconf->replay || !sconf->replay_lock
        || lessons_replay_key(jkt, out.jti, key) != 0
        || lessons_replay_owner(jkt, &owner) != 0
        || apr_global_mutex_lock(sconf->replay_lock) != APR_SUCCESS) {
        return lessons_dpop_unavailable(r, APLOG_ERR, LESSONSLOG(00241)
                                        "the DPoP proofs seen cannot be "
                                        "read in this process");
    }
    seen = lessons_replay_check(sconf->replay, key, owner,
                                apr_time_from_sec(
                                    lessons_dpop_kept_until(&req, out.iat)),
                                apr_time_now());
    apr_global_mutex_unlock(sconf->replay_lock);
    if (seen == LESSONS_REPLAY_SEEN) {
        return lessons_dpop_refuse(r, "invalid_dpop_proof", "The DPoP proof "
                                   "has been used before", NULL);
    }
    if (seen == LESSONS_REPLAY_OVER_SHARE) {
        /* The client's doing, not the server's: its own proofs are
         * refused (401, as any proof that cannot be taken, logged at
         * info), every other key's are taken as before.  Its proofs
         * end within the window, so it may try again soon.
         */
        apr_table_setn(r->err_headers_out, "Retry-After",
                       LESSONS_RETRY_AFTER);
        return lessons_dpop_refuse(r, "invalid_dpop_proof", "Too many DPoP "
                                   "proofs made with this key within the "
                                   "window; try again later",
                                   apr_psprintf(r->pool, "the key already "
                                                "holds its share of the "
                                                "DPoP proofs seen (%d)",
                                                lessons_replay_share(
                                                    sconf->replay)));
    }
    if (seen == LESSONS_REPLAY_FULL) {
        return lessons_dpop_unavailable(r, APLOG_WARNING, LESSONSLOG(00242)
                                        "too many DPoP proofs within the "
                                        "window to keep one more");
    }
    return OK;
}
