/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_dpop.c: DPoP (RFC 9449) as httpd meets it.  The gate's
 * decision (lessons_decide) checks a bound token's proof; here are what
 * it needs from httpd: the server's own URI for the request, the
 * request's DPoP headers, and the table of proofs seen, taken once per
 * server (lessons_replay, in shared memory made before the fork and
 * kept across restarts, under a global mutex the Mutex directive can
 * configure); each server's key for DPoP nonces (RFC 9449 8, 9:
 * LessonsJWTDPoPNonceSecretFile's secret, or a random one made once);
 * and RFC 9449's WWW-Authenticate: DPoP challenge.
 */

#include "apr_shm.h"

#include "httpd/mod_lessons.h"
#include "auth/lessons_dpop.h"
#include "auth/lessons_replay.h"

/* What outlives a restart: the table's block and its lock, both on the
 * process pool, so that every generation of children that ever uses the
 * block locks the same lock.  (The key's "-2": until this release only
 * the block was kept, under the key without it, and the lock was made
 * anew on each generation's pconf: during a graceful restart the old
 * children and the new ones took the same table under two locks.)
 */
#define LESSONS_DPOP_KEPT   "mod_lessons-dpop-replay-2"

typedef struct {
    apr_shm_t *shm;
    apr_global_mutex_t *lock;
} lessons_dpop_kept_t;
/* Proofs a server keeps (LessonsJWTDPoPSlots, default 65,536), each
 * until it is too old (at most 66 s with no LessonsJWTLeeway, 126 s with
 * any; 41 s with LessonsJWTDPoPNonce, until its nonce ends): with the
 * default, the first refusal comes with 31,000 of them held at the
 * fewest, so some 350 a second (t/unit/test_replay.c measures it;
 * docs/directives.md quotes it); the tokens of one client hold at most
 * 1/16 of them (lessons_replay.h says who is one client).
 */
const char *lessons_dpop_challenge_value(request_rec *r, const char *error,
                                         const char *description)
{
    const char *value = apr_psprintf(r->pool, "DPoP realm=\"%s\", "
                                     "algs=\"%s\"", lessons_realm(r),
                                     lessons_dpop_algs_text(r->pool));

    if (error) {
        value = apr_psprintf(r->pool, "%s, error=\"%s\", "
                             "error_description=\"%s\"", value, error,
                             description);
    }
    return value;
}

/* The random secret of a server without LessonsJWTDPoPNonceSecretFile:
 * made once in the parent, kept across restarts, so that every process
 * of the server takes the nonces of every other, and a graceful restart
 * does not make its clients' nonces old.
 */
#define LESSONS_NONCE_KEPT  "mod_lessons-dpop-nonce-secret"

typedef struct {
    int made;
    unsigned char secret[LESSONS_NONCE_SECRET_MIN];
} lessons_nonce_kept_t;

/* A key no nonce passes: where nonces are asked and the server has no
 * key (it cannot happen after post_config), every proof is refused
 * rather than taken without its nonce.
 */
static const lessons_nonce_key_t lessons_nonce_none = { NULL, 0, 0 };

/* The mutex of the proofs' table (the Mutex directive names it). */
int lessons_dpop_pre_config(apr_pool_t *pconf)
{
    return ap_mutex_register(pconf, LESSONS_DPOP_MUTEX, NULL,
                             APR_LOCK_DEFAULT, 0) == APR_SUCCESS ? OK : !OK;
}

/* Each server's nonce key, where some section asks for nonces: its
 * LessonsJWTDPoPNonceSecretFile's secret, else the random one.
 */
static int lessons_nonce_post_config(apr_pool_t *pconf, server_rec *s)
{
    server_rec *main_server = s;
    lessons_nonce_kept_t *kept;
    apr_status_t rv;
    int random = 0;

    if (!lessons_dpop_nonce_configured(pconf)) {
        return OK;
    }
    kept = ap_retained_data_get(LESSONS_NONCE_KEPT);
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_NONCE_KEPT, sizeof(*kept));
        kept->made = 0;
    }
    if (!kept->made) {
        rv = apr_generate_random_bytes(kept->secret, sizeof(kept->secret));
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, rv, NULL,
                         LESSONSLOG(00701) "cannot make a random secret "
                         "for DPoP nonces; LessonsJWTDPoPNonceSecretFile "
                         "can name one");
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        kept->made = 1;
    }
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);
        lessons_nonce_key_t *key = apr_pcalloc(pconf, sizeof(*key));

        key->period = LESSONS_NONCE_PERIOD;
        if (sconf->nonce_secret) {
            key->secret = sconf->nonce_secret;
            key->len = sconf->nonce_secret_len;
        }
        else {
            key->secret = kept->secret;
            key->len = sizeof(kept->secret);
            random = 1;
        }
        sconf->nonce_key = key;
    }
    if (random) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, main_server,
                     LESSONSLOG(00702)
                     "DPoP nonces are made with a random secret of this "
                     "server (no LessonsJWTDPoPNonceSecretFile): another "
                     "server behind the same name refuses them");
    }
    return OK;
}

/* The table, once per httpd run (as the metrics' block), and its mutex,
 * for every server.  Only where some section takes DPoP.  The nonces'
 * keys too, where some section asks for nonces.
 */
int lessons_dpop_post_config(apr_pool_t *pconf, server_rec *s)
{
    lessons_dpop_kept_t *kept;
    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    lessons_replay_t *table = NULL;
    int slots = mconf->replay_slots > 0 ? mconf->replay_slots
                                        : LESSONS_DPOP_SLOTS_DEFAULT;
    apr_size_t size = lessons_replay_size(slots);
    int fresh = 0;
    apr_status_t rv;

    if (!lessons_dpop_configured(pconf)
        || ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    if (lessons_nonce_post_config(pconf, s) != OK) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    kept = ap_retained_data_get(LESSONS_DPOP_KEPT);
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_DPOP_KEPT, sizeof(*kept));
    }
    if (lessons_kept_mutex(&kept->lock, LESSONS_DPOP_MUTEX, s)
        != APR_SUCCESS) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    /* A block too small for this build's table (a restart onto a newer
     * module, or a larger LessonsJWTDPoPSlots): another one, the proofs
     * seen so far forgotten once.  Another number of slots in a block
     * large enough is a table made anew in it (lessons_replay_attach).
     */
    if (kept->shm && apr_shm_size_get(kept->shm) < size) {
        apr_shm_destroy(kept->shm);
        kept->shm = NULL;
    }
    if (!kept->shm) {
        rv = apr_shm_create(&kept->shm, size, NULL, s->process->pool);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, rv, NULL,
                         LESSONSLOG(00122) "cannot make the shared memory "
                         "for DPoP proofs seen (%" APR_SIZE_T_FMT " bytes)",
                         size);
            kept->shm = NULL;
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        fresh = 1;
    }
    table = lessons_replay_attach(apr_shm_baseaddr_get(kept->shm),
                                  apr_shm_size_get(kept->shm),
                                  slots, fresh);
    if (!table) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->replay = table;
        sconf->replay_lock = kept->lock;
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

/* An address that stands for any (<VirtualHost *:80>, _default_). */
static int lessons_dpop_wildcard(const apr_sockaddr_t *sa)
{
    static const char zeros[16] = { 0 };

    return sa->ipaddr_len <= (int)sizeof(zeros)
           && memcmp(sa->ipaddr_ptr, zeros, (apr_size_t)sa->ipaddr_len) == 0;
}

/* Does the request's Host name this server: its ServerName or one of
 * its ServerAlias names, or the address a <VirtualHost> is bound to
 * (not a wildcard)?  Only then is it the server's own name.  The
 * address: a virtual host with no ServerName is named by reverse DNS
 * ("localhost" for 127.0.0.1), and clients that know it by its address
 * (http://127.0.0.1:8443/...) would have every proof refused.
 */
static int lessons_dpop_own_host(request_rec *r)
{
    const server_rec *s = r->server;
    const char *host = r->hostname;
    const server_addr_rec *a;
    char ip[64];
    int i;

    if (!host) {
        return 0;
    }
    for (a = s->is_virtual ? s->addrs : NULL; a; a = a->next) {
        if (a->host_addr && !lessons_dpop_wildcard(a->host_addr)
            && apr_sockaddr_ip_getbuf(ip, sizeof(ip), a->host_addr)
               == APR_SUCCESS
            && strcasecmp(host, ip) == 0) {
            return 1;
        }
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

/* The DPoP headers of the request: how many, and the first. */
static int lessons_dpop_count(void *facts, const char *key,
                              const char *value)
{
    lessons_decide_facts_t *f = facts;

    (void)key;
    if (!f->dpop_lines++) {
        f->dpop = value;
    }
    return 1;
}

/* What a DPoP proof is checked against: the server's own URI for the
 * request, and its DPoP headers, as they came.
 */
void lessons_dpop_facts(request_rec *r, lessons_decide_facts_t *facts)
{
    facts->uri = lessons_dpop_request_uri(r);
    facts->dpop = NULL;
    facts->dpop_lines = 0;
    apr_table_do(lessons_dpop_count, facts, r->headers_in, "DPoP", NULL);
}

/* Take a proof in the server's table, under its mutex (the decision's
 * replay callback; baton: the server's config).  -1 when this process
 * cannot reach the table.
 */
static int lessons_dpop_take(void *baton, const unsigned char *key,
                             apr_uint32_t owner, apr_uint32_t group,
                             apr_time_t expires, apr_time_t now)
{
    const lessons_srv_conf *sconf = baton;
    lessons_replay_e seen;

    if (!sconf->replay || !sconf->replay_lock
        || apr_global_mutex_lock(sconf->replay_lock) != APR_SUCCESS) {
        return -1;
    }
    seen = lessons_replay_check_in(sconf->replay, key, owner, group, expires,
                                   now);
    apr_global_mutex_unlock(sconf->replay_lock);
    return (int)seen;
}

/* The server's replay table, for a section that takes DPoP; and its
 * nonce key, where the section asks for nonces.
 */
void lessons_dpop_policy(request_rec *r, lessons_decide_policy_t *policy)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    const lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);

    if (policy->dpop && policy->dpop != LESSONS_DPOP_OFF) {
        policy->replay = lessons_dpop_take;
        policy->replay_baton = sconf;
        policy->replay_share = sconf->replay
                               ? lessons_replay_share(sconf->replay) : 0;
        if (conf->dpop_nonce == LESSONS_NONCE_ON) {
            policy->nonce = sconf->nonce_key ? sconf->nonce_key
                                             : &lessons_nonce_none;
        }
    }
}
