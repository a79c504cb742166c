/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons.c: the Lessons API (German-language lessons) as an httpd
 * handler.  This file is the thin httpd glue: directives, per-directory
 * config, the access checker that verifies the bearer token before any
 * handler runs, and the dispatch from route to store to JSON.  The work
 * itself lives in modules/lessons_*.c, which need no httpd.
 *
 *   LoadModule dbd_module     modules/mod_dbd.so
 *   LoadModule lessons_module modules/mod_lessons.so
 *   DBDriver sqlite3
 *   DBDParams /var/lib/lessons/lessons.db
 *   <Location "/api/lessons">
 *       SetHandler lessons
 *       LessonsJWTAlgorithm HS256
 *       LessonsJWTKeyFile /etc/lessons/jwt.key
 *   </Location>
 */

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"
#include "util_cfgtree.h"
#include "ap_mpm.h"
#include "apr_env.h"
#include "apr_strings.h"
#include "apr_optional.h"
#include "apr_optional_hooks.h"
#include "apr_dbd.h"
#include "mod_dbd.h"

#include "lessons_db.h"
#include "lessons_gate.h"
#include "lessons_throttle.h"

#include "lessons_json.h"
#include "lessons_key.h"
#include "lessons_payload.h"
#include "lessons_route.h"
#include "lessons_store.h"
#include "lessons_token.h"

module AP_MODULE_DECLARE_DATA lessons_module;

/* Our own log tags (APLOGNO numbers belong to httpd's modules). */
#define LESSONSLOG(n) "LESSONS" #n ": "

#define LESSONS_HANDLER          "lessons"
#define LESSONS_DEFAULT_BASE     "/api/lessons"
#define LESSONS_DEFAULT_REALM    "lessons"
#define LESSONS_DEFAULT_MAX_BODY (64 * 1024)
#define LESSONS_MAX_BODY_LIMIT   (16 * 1024 * 1024)
#define LESSONS_MAX_LEEWAY       3600
#define LESSONS_DEFAULT_DB_TIMEOUT 10   /* seconds */
#define LESSONS_MAX_DB_TIMEOUT   300
#define LESSONS_DBD_DEFAULT_MAX  10     /* mod_dbd's DBDMax default */
#define LESSONS_RETRY_AFTER      "5"

#define LESSONS_CT_JSON     "application/json; charset=utf-8"
#define LESSONS_CT_PROBLEM  "application/problem+json"

/* Beginner and advanced are fixed pairs of levels (SPEC rules 1, 2). */
#define LESSONS_BEGINNER_FIRST   1
#define LESSONS_BEGINNER_SECOND  2
#define LESSONS_ADVANCED_FIRST   4
#define LESSONS_ADVANCED_SECOND  5

/* Per-directory config.  NULL / JWT_ALG_INVAL / -1 mean "not set here",
 * so merge can tell an inherited value from a configured one.
 *
 * The algorithm and the key are one setting: a section that sets either
 * takes both from itself when merged (jwt_where says which section), so
 * no merge can pair one section's algorithm with another's key.  A
 * section that sets only one of them is refused at start-up, and would
 * fail closed at request time.
 */
typedef struct {
    int registered;                 /* listed for the start-up check */
    const char *jwt_where;          /* section that set alg and/or key */
    jwt_alg_t alg;
    const char *alg_name;
    const char *key_file;
    const lessons_key_t *key;
    const char *location;           /* plain <Location> path of the section
                                     * that set the key: default base */
    const char *issuer;
    const char *audience;
    long leeway;
    const char *base_path;
    apr_off_t max_body;
} lessons_dir_conf;

/* Per-server config: which sections to check at start-up, the bound on
 * database waits, mod_dbd's acquire, and (per process, made in
 * child_init) the gate in front of the connection pool.
 */
typedef struct {
    apr_array_header_t *sections;   /* lessons_dir_conf *, this server's */
    int db_timeout;                 /* seconds; 0: not set here */
    ap_dbd_t *(*acquire)(request_rec *r);
    int threads;                    /* worker threads per process */
    lessons_gate_t *gate;           /* NULL when one thread per process */
    lessons_throttle_t *throttle;   /* repeated fault lines, per process */
} lessons_srv_conf;

/* Per-request: whether the request is for the API (known from the
 * location walk before translate_name), and the outcome of the token
 * check, so the access checker and the handler never verify twice and
 * never disagree.
 */
typedef struct {
    int api;                        /* SetHandler lessons applies */
    int checked;                    /* the token check has run */
    int status;                     /* OK, or DONE once a refusal is sent */
} lessons_req_state;

static lessons_req_state *lessons_state(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);

    if (!st) {
        st = apr_pcalloc(r->pool, sizeof(*st));
        ap_set_module_config(r->request_config, &lessons_module, st);
    }
    return st;
}

/* ------------------------------------------------------------------ */
/* Configuration                                                        */

static void *lessons_create_dir_conf(apr_pool_t *p, char *dir)
{
    lessons_dir_conf *conf = apr_pcalloc(p, sizeof(*conf));

    (void)dir;
    conf->alg = JWT_ALG_INVAL;
    conf->leeway = -1;
    conf->max_body = -1;
    return conf;
}

static void *lessons_merge_dir_conf(apr_pool_t *p, void *basev, void *addv)
{
    const lessons_dir_conf *base = basev, *add = addv, *jwt;
    lessons_dir_conf *conf = apr_pcalloc(p, sizeof(*conf));

    /* registered describes one section's own record for the start-up
     * check; a merged config is no section, so it stays unset.
     * Algorithm and key come as one: both from add if it set either.
     */
    jwt = add->jwt_where ? add : base;
    conf->jwt_where = jwt->jwt_where;
    conf->alg = jwt->alg;
    conf->alg_name = jwt->alg_name;
    conf->key_file = jwt->key_file;
    conf->key = jwt->key;
    conf->location = add->location ? add->location : base->location;
    conf->issuer = add->issuer ? add->issuer : base->issuer;
    conf->audience = add->audience ? add->audience : base->audience;
    conf->leeway = add->leeway >= 0 ? add->leeway : base->leeway;
    conf->base_path = add->base_path ? add->base_path : base->base_path;
    conf->max_body = add->max_body >= 0 ? add->max_body : base->max_body;
    return conf;
}

static void *lessons_create_srv_conf(apr_pool_t *p, server_rec *s)
{
    lessons_srv_conf *sconf = apr_pcalloc(p, sizeof(*sconf));

    (void)s;
    sconf->sections = apr_array_make(p, 4, sizeof(lessons_dir_conf *));
    return sconf;
}

static void *lessons_merge_srv_conf(apr_pool_t *p, void *basev, void *addv)
{
    const lessons_srv_conf *base = basev, *add = addv;
    lessons_srv_conf *sconf = apr_pcalloc(p, sizeof(*sconf));

    sconf->sections = add->sections;
    sconf->db_timeout = add->db_timeout ? add->db_timeout : base->db_timeout;
    return sconf;
}

static int lessons_db_timeout(const lessons_srv_conf *sconf)
{
    return sconf->db_timeout ? sconf->db_timeout : LESSONS_DEFAULT_DB_TIMEOUT;
}

/* The values in effect, defaults applied: the base path defaults to
 * the <Location> that holds the key, so a second mount point just works.
 */
static const char *lessons_base_path(const lessons_dir_conf *conf)
{
    return conf->base_path ? conf->base_path
         : conf->location ? conf->location : LESSONS_DEFAULT_BASE;
}

static apr_off_t lessons_max_body(const lessons_dir_conf *conf)
{
    return conf->max_body > 0 ? conf->max_body : LESSONS_DEFAULT_MAX_BODY;
}

/* Every Lessons directive lands here first: remember the section for
 * the start-up check, and register our statements with mod_dbd for
 * this server (once), at config time as mod_dbd requires.
 */
static const char *lessons_touch(cmd_parms *cmd, lessons_dir_conf *conf)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);

    if (!APR_RETRIEVE_OPTIONAL_FN(ap_dbd_acquire)) {
        return "mod_lessons needs mod_dbd: load dbd_module before "
               "lessons_module (a2enmod lessons does this)";
    }
    if (!conf->registered) {
        conf->registered = 1;
        APR_ARRAY_PUSH(sconf->sections, lessons_dir_conf *) = conf;
    }
    return NULL;
}

/* The first argument of a directive, unquoted, without the '>' that a
 * section opener keeps in the parsed tree ("<Location /api>").
 */
static const char *lessons_tree_arg(apr_pool_t *p, const ap_directive_t *d)
{
    const char *args = d->args ? d->args : "";
    char *w = ap_getword_conf(p, &args);
    apr_size_t n = strlen(w);

    if (n > 0 && w[n - 1] == '>') {
        w[n - 1] = '\0';
    }
    return w;
}

/* A URL path without trailing slashes ("/" stays "/"), so a Location
 * header is always base + "/" + id.
 */
static const char *lessons_trim_slashes(apr_pool_t *p, const char *arg)
{
    char *path = apr_pstrdup(p, arg);
    apr_size_t n = strlen(path);

    while (n > 1 && path[n - 1] == '/') {
        path[--n] = '\0';
    }
    return path;
}

/* A plain <Location "/path"> around the directive (no regex, no
 * wildcard), without trailing slashes; else NULL.
 */
static const char *lessons_plain_location(cmd_parms *cmd)
{
    const ap_directive_t *sec = cmd->directive->parent;
    const char *path;

    if (!sec || strcasecmp(sec->directive, "<Location") != 0 || !cmd->path
        || strcmp(lessons_tree_arg(cmd->temp_pool, sec), "~") == 0
        || cmd->path[0] != '/' || strpbrk(cmd->path, "*?[\\")) {
        return NULL;
    }
    path = lessons_trim_slashes(cmd->pool, cmd->path);
    return strcmp(path, "/") != 0 ? path : NULL;
}

/* Half of the algorithm/key setting has been given in this section:
 * remember the section, and once both halves are here check that the
 * key allows the algorithm.
 */
static const char *lessons_jwt_part(cmd_parms *cmd, lessons_dir_conf *conf)
{
    const char *err;

    if (!conf->jwt_where) {
        conf->jwt_where = apr_psprintf(cmd->pool, "%s:%d",
                                       cmd->directive->filename,
                                       cmd->directive->line_num);
        conf->location = lessons_plain_location(cmd);
    }
    if (conf->alg != JWT_ALG_INVAL && conf->key) {
        err = lessons_key_misfit(cmd->temp_pool, conf->key, conf->alg);
        if (err) {
            return apr_psprintf(cmd->pool, "%s: key file %s does not fit "
                                "algorithm %s: %s", cmd->cmd->name,
                                conf->key_file, conf->alg_name, err);
        }
    }
    return lessons_touch(cmd, conf);
}

static const char *lessons_set_alg(cmd_parms *cmd, void *dconf,
                                   const char *arg)
{
    lessons_dir_conf *conf = dconf;
    jwt_alg_t alg = lessons_alg_parse(arg);

    if (conf->alg != JWT_ALG_INVAL) {
        return apr_psprintf(cmd->pool, "%s: this section already sets the "
                            "algorithm (%s)", cmd->cmd->name,
                            conf->alg_name);
    }
    if (alg == JWT_ALG_INVAL) {
        return apr_psprintf(cmd->pool, "%s: unknown or unsupported "
                            "algorithm '%s'; use one of HS256, HS384, "
                            "HS512, RS256, RS384, RS512, ES256, ES384, "
                            "ES512", cmd->cmd->name, arg);
    }
    conf->alg = alg;
    conf->alg_name = apr_pstrdup(cmd->pool, arg);
    return lessons_jwt_part(cmd, conf);
}

static const char *lessons_set_key_file(cmd_parms *cmd, void *dconf,
                                        const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *path = ap_server_root_relative(cmd->pool, arg);
    const unsigned char *data = NULL;
    apr_size_t len = 0;
    lessons_key_t *key = NULL;
    const char *err;

    if (conf->key) {
        return apr_psprintf(cmd->pool, "%s: this section already sets the "
                            "key (%s)", cmd->cmd->name, conf->key_file);
    }
    if (!path) {
        return apr_psprintf(cmd->pool, "%s: invalid path '%s'",
                            cmd->cmd->name, arg);
    }
    err = lessons_key_read(cmd->pool, path, &data, &len);
    if (!err) {
        err = lessons_key_make(cmd->pool, data, len, &key);
    }
    if (err) {
        return apr_psprintf(cmd->pool, "%s %s: %s", cmd->cmd->name, path,
                            err);
    }
    conf->key_file = path;
    conf->key = key;
    return lessons_jwt_part(cmd, conf);
}

/* LessonsJWTKey ALG FILE: the one-line form, which no merge can split. */
static const char *lessons_set_key(cmd_parms *cmd, void *dconf,
                                   const char *alg, const char *file)
{
    const char *err = lessons_set_alg(cmd, dconf, alg);

    return err ? err : lessons_set_key_file(cmd, dconf, file);
}

static const char *lessons_set_string(cmd_parms *cmd, void *dconf,
                                      const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *err = ap_set_string_slot(cmd, dconf, arg);

    if (err) {
        return err;
    }
    if (!*arg) {
        return apr_psprintf(cmd->pool, "%s must not be empty",
                            cmd->cmd->name);
    }
    return lessons_touch(cmd, conf);
}

static const char *lessons_set_base_path(cmd_parms *cmd, void *dconf,
                                         const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *path;

    if (arg[0] != '/') {
        return "LessonsBasePath must be a URL path starting with /";
    }
    path = lessons_trim_slashes(cmd->pool, arg);
    if (strcmp(path, "/") == 0) {
        return "LessonsBasePath cannot be /: the API needs a path of its "
               "own, such as /api/lessons";
    }
    conf->base_path = path;
    return lessons_touch(cmd, conf);
}

/* A whole decimal number in [min, max], or an error message. */
static const char *lessons_parse_number(cmd_parms *cmd, const char *arg,
                                        apr_int64_t min, apr_int64_t max,
                                        apr_int64_t *out)
{
    char *end;
    apr_int64_t v;

    errno = 0;
    v = apr_strtoi64(arg, &end, 10);
    if (errno || end == arg || *end || v < min || v > max) {
        return apr_psprintf(cmd->pool, "%s takes a whole number from %"
                            APR_INT64_T_FMT " to %" APR_INT64_T_FMT
                            ", not '%s'", cmd->cmd->name, min, max, arg);
    }
    *out = v;
    return NULL;
}

static const char *lessons_set_leeway(cmd_parms *cmd, void *dconf,
                                      const char *arg)
{
    lessons_dir_conf *conf = dconf;
    apr_int64_t v;
    const char *err = lessons_parse_number(cmd, arg, 0, LESSONS_MAX_LEEWAY,
                                           &v);

    if (err) {
        return err;
    }
    conf->leeway = (long)v;
    return lessons_touch(cmd, conf);
}

static const char *lessons_set_db_timeout(cmd_parms *cmd, void *dconf,
                                          const char *arg)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);
    const char *err = ap_check_cmd_context(cmd, NOT_IN_DIR_LOC_FILE);
    apr_int64_t v;

    (void)dconf;
    if (err) {
        return err;
    }
    err = lessons_parse_number(cmd, arg, 1, LESSONS_MAX_DB_TIMEOUT, &v);
    if (err) {
        return err;
    }
    sconf->db_timeout = (int)v;
    return NULL;
}

static const char *lessons_set_max_body(cmd_parms *cmd, void *dconf,
                                        const char *arg)
{
    lessons_dir_conf *conf = dconf;
    apr_int64_t v;
    const char *err = lessons_parse_number(cmd, arg, 1,
                                           LESSONS_MAX_BODY_LIMIT, &v);

    if (err) {
        return err;
    }
    conf->max_body = (apr_off_t)v;
    return lessons_touch(cmd, conf);
}

static const command_rec lessons_cmds[] = {
    AP_INIT_TAKE2("LessonsJWTKey", lessons_set_key, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "The JWT algorithm (HS256, HS384, HS512, RS256, RS384, "
                  "RS512, ES256, ES384 or ES512) and the file with the "
                  "shared secret (HS*) or PEM public key (RS*, ES*) that "
                  "verifies tokens"),
    AP_INIT_TAKE1("LessonsJWTAlgorithm", lessons_set_alg, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "The JWT algorithm; needs LessonsJWTKeyFile in the same "
                  "section (or use LessonsJWTKey ALG FILE)"),
    AP_INIT_TAKE1("LessonsJWTKeyFile", lessons_set_key_file, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "The key file; needs LessonsJWTAlgorithm in the same "
                  "section (or use LessonsJWTKey ALG FILE)"),
    AP_INIT_TAKE1("LessonsJWTIssuer", lessons_set_string,
                  (void *)APR_OFFSETOF(lessons_dir_conf, issuer),
                  RSRC_CONF | ACCESS_CONF,
                  "Required value of the token's iss claim (default: not "
                  "checked)"),
    AP_INIT_TAKE1("LessonsJWTAudience", lessons_set_string,
                  (void *)APR_OFFSETOF(lessons_dir_conf, audience),
                  RSRC_CONF | ACCESS_CONF,
                  "Value the token's aud claim (string or array) must "
                  "contain (default: not checked)"),
    AP_INIT_TAKE1("LessonsJWTLeeway", lessons_set_leeway, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "Seconds of clock skew allowed on exp and nbf (default 0)"),
    AP_INIT_TAKE1("LessonsBasePath", lessons_set_base_path, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "URL path the API answers under (default: the <Location> "
                  "that sets the key, else /api/lessons)"),
    AP_INIT_TAKE1("LessonsDBTimeout", lessons_set_db_timeout, NULL,
                  RSRC_CONF,
                  "Seconds an API request may wait for the database, the "
                  "wait for a pooled connection included (default 10); "
                  "then it is answered 503"),
    AP_INIT_TAKE1("LessonsMaxBodySize", lessons_set_max_body, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "Largest request body accepted, in bytes (default 65536)"),
    { NULL }
};

/* ------------------------------------------------------------------ */
/* Start-up checks                                                      */

/* Only what can be seen exactly is checked here: each section's own
 * directives, and whether the configuration holds a key at all.  Which
 * sections a request merges (regex sections, <If>, <Directory>) is
 * httpd's to decide and is not imitated; the request-time checks in
 * lessons_authenticate hold whatever the merge produces.
 */

/* The first "SetHandler lessons" in the tree, or NULL. */
static const ap_directive_t *lessons_find_handler(apr_pool_t *p,
                                                  const ap_directive_t *d)
{
    const ap_directive_t *found;

    for (; d; d = d->next) {
        if (strcasecmp(d->directive, "SetHandler") == 0
            && strcasecmp(lessons_tree_arg(p, d), LESSONS_HANDLER) == 0) {
            return d;
        }
        if (d->first_child
            && (found = lessons_find_handler(p, d->first_child))) {
            return found;
        }
    }
    return NULL;
}

static int lessons_check_config(apr_pool_t *pconf, apr_pool_t *plog,
                                apr_pool_t *ptemp, server_rec *s)
{
    const ap_directive_t *handler;
    int rc = OK, keys = 0, i;

    (void)pconf;
    (void)plog;
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        for (i = 0; i < sconf->sections->nelts; i++) {
            const lessons_dir_conf *c =
                APR_ARRAY_IDX(sconf->sections, i, lessons_dir_conf *);

            if (!c->jwt_where) {
                continue;
            }
            if (c->alg != JWT_ALG_INVAL && c->key) {
                keys++;
                continue;
            }
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                         LESSONSLOG(00102) "%s: this section sets %s but "
                         "not %s; algorithm and key are one setting: give "
                         "both in the same section, or use LessonsJWTKey "
                         "ALG FILE", c->jwt_where,
                         c->key ? "LessonsJWTKeyFile" : "LessonsJWTAlgorithm",
                         c->key ? "LessonsJWTAlgorithm" : "LessonsJWTKeyFile");
            rc = !OK;
        }
    }
    handler = lessons_find_handler(ptemp, ap_conftree);
    if (handler && keys == 0) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     LESSONSLOG(00103) "%s:%d: SetHandler lessons, but no "
                     "LessonsJWTKey is configured anywhere; the lessons API "
                     "never runs without token checks", handler->filename,
                     handler->line_num);
        rc = !OK;
    }
    return rc;
}

static int lessons_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                               apr_pool_t *ptemp, server_rec *s)
{
    ap_dbd_t *(*acquire)(request_rec *) =
        APR_RETRIEVE_OPTIONAL_FN(ap_dbd_acquire);

    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    char *set = NULL;

    (void)pconf;
    (void)plog;
    /* libpq's connect has no limit of its own: bound it (and PQreset's)
     * unless the admin already did, before any thread starts.  Other
     * modules' PostgreSQL connections in this server get it too.
     */
    if (apr_env_get(&set, "PGCONNECT_TIMEOUT", ptemp) != APR_SUCCESS
        || !set || !*set) {
        apr_env_set("PGCONNECT_TIMEOUT",
                    apr_itoa(ptemp, lessons_db_timeout(mconf)), ptemp);
    }
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);
        sconf->acquire = acquire;
    }
    return OK;
}

/* How many requests of a process may hold a database connection, and
 * how many may wait for one: never more holders than mod_dbd has
 * connections (DBDMax), and holders and waiters together leave a
 * quarter of the threads free for the rest of the server.
 */
static void lessons_gate_size(int threads, int dbd_max, int *slots,
                              int *waiting)
{
    int limit = threads * 3 / 4 > 1 ? threads * 3 / 4 : 1;

    *slots = dbd_max < limit ? dbd_max : limit;
    *waiting = limit - *slots < *slots ? limit - *slots : *slots;
}

static void lessons_child_init(apr_pool_t *pchild, server_rec *s)
{
    int threads = 1, slots, waiting;

    ap_mpm_query(AP_MPMQ_MAX_THREADS, &threads);
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->threads = threads;
        sconf->throttle = lessons_throttle_make(pchild);
        if (threads > 1) {
            lessons_gate_size(threads, LESSONS_DBD_DEFAULT_MAX, &slots,
                              &waiting);
            sconf->gate = lessons_gate_make(pchild, slots, waiting);
        }
    }
}

/* mod_dbd made a connection: now we know its DBDMax. */
static apr_status_t lessons_dbd_connected(apr_pool_t *p, dbd_cfg_t *cfg,
                                          ap_dbd_t *dbd)
{
    lessons_srv_conf *sconf = cfg && cfg->server
        ? ap_get_module_config(cfg->server->module_config, &lessons_module)
        : NULL;
    int slots, waiting;

    (void)p;
    (void)dbd;
    if (sconf && sconf->gate && cfg->nmax > 0) {
        lessons_gate_size(sconf->threads, cfg->nmax, &slots, &waiting);
        lessons_gate_resize(sconf->gate, slots, waiting);
    }
    return APR_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Responses                                                            */

static int lessons_send(request_rec *r, int status, const char *type,
                        const char *body, apr_size_t len)
{
    r->status = status;
    apr_table_setn(r->headers_out, "X-Content-Type-Options", "nosniff");
    if (type) {
        ap_set_content_type(r, type);
    }
    if (status != HTTP_NO_CONTENT) {
        ap_set_content_length(r, (apr_off_t)len);
    }
    if (len > 0 && !r->header_only) {
        ap_rwrite(body, (int)len, r);
    }
    return OK;
}

static int lessons_send_empty(request_rec *r, int status)
{
    return lessons_send(r, status, NULL, NULL, 0);
}

static int lessons_send_problem(request_rec *r, int status,
                                const char *title, const char *detail,
                                json_t *errors)
{
    apr_size_t len = 0;
    const char *body = lessons_json_problem(r->pool, status, title, detail,
                                            errors, &len);

    if (!body) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    apr_table_setn(r->headers_out, "Cache-Control", "no-store");
    return lessons_send(r, status, LESSONS_CT_PROBLEM, body, len);
}

/* Answer from the access checker: write the problem document ourselves
 * and return DONE, so the client gets problem+json rather than httpd's
 * HTML error page (an ErrorDocument body would be sent as text/html).
 */
static int lessons_error_response(request_rec *r, int status,
                                  const char *detail)
{
    int rc = lessons_send_problem(r, status, NULL, detail, NULL);

    return rc == OK ? DONE : rc;
}

/* ------------------------------------------------------------------ */
/* Authentication                                                       */

/* Log a fault line (its tag included); an identical one at most once a
 * second per process, with the count of those left out.
 */
static void lessons_log_fault(request_rec *r, int level, const char *line)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    unsigned long left = 0;

    if (!lessons_throttle_pass(sconf->throttle, line, apr_time_now(),
                               &left)) {
        return;
    }
    if (left) {
        ap_log_rerror(APLOG_MARK, level, 0, r, "%s (and %lu times in the "
                      "last second)", line, left);
    }
    else {
        ap_log_rerror(APLOG_MARK, level, 0, r, "%s", line);
    }
}

static const char *lessons_realm(request_rec *r)
{
    const char *realm = ap_auth_name(r);

    /* It goes inside a quoted-string: refuse anything needing escapes. */
    if (!realm || !*realm || strpbrk(realm, "\"\\\r\n")) {
        return LESSONS_DEFAULT_REALM;
    }
    return realm;
}

static int lessons_challenge(request_rec *r, int status, const char *error,
                             const char *description)
{
    const char *value = apr_psprintf(r->pool, "Bearer realm=\"%s\"",
                                     lessons_realm(r));

    if (error) {
        value = apr_psprintf(r->pool, "%s, error=\"%s\", "
                             "error_description=\"%s\"", value, error,
                             description);
    }
    apr_table_setn(r->err_headers_out, "WWW-Authenticate", value);
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

/* Verify the request's bearer token once; later calls return the first
 * answer.  OK sets r->user to the token's sub; DONE means the refusal
 * (401, 400 or 500) has been sent.
 */
static int lessons_authenticate(request_rec *r, const lessons_dir_conf *conf)
{
    lessons_req_state *st = lessons_state(r);
    lessons_token_policy_t policy;
    const char *token = NULL, *subject = NULL;
    lessons_token_e rc;

    if (st->checked) {
        return st->status;
    }
    st->checked = 1;

    if (!lessons_configured(conf)) {
        return lessons_misconfigured(r, st, "no LessonsJWTKey in effect");
    }
    if (conf->alg == JWT_ALG_INVAL || !conf->key) {
        return lessons_misconfigured(r, st, apr_psprintf(r->pool,
            "the section at %s sets %s without %s", conf->jwt_where,
            conf->key ? "LessonsJWTKeyFile" : "LessonsJWTAlgorithm",
            conf->key ? "LessonsJWTAlgorithm" : "LessonsJWTKeyFile"));
    }

    switch (lessons_bearer_parse(r->pool,
                                 apr_table_get(r->headers_in,
                                               "Authorization"), &token)) {
    case LESSONS_BEARER_NONE:
    case LESSONS_BEARER_OTHER_SCHEME:
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, LESSONSLOG(00202)
                      "no bearer token");
        return st->status = lessons_challenge(r, HTTP_UNAUTHORIZED, NULL,
            "A bearer token is required.");
    case LESSONS_BEARER_MALFORMED:
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00203)
                      "malformed Authorization header");
        return st->status = lessons_challenge(r, HTTP_BAD_REQUEST,
            "invalid_request", "The Authorization header must be "
            "'Bearer' followed by one token.");
    case LESSONS_BEARER_OK:
        break;
    }

    policy.alg = conf->alg;
    policy.key = conf->key;
    policy.issuer = conf->issuer;
    policy.audience = conf->audience;
    policy.leeway = conf->leeway > 0 ? conf->leeway : 0;
    rc = lessons_token_verify(r->pool, &policy, token,
                              (apr_int64_t)apr_time_sec(r->request_time),
                              &subject);
    if (rc == LESSONS_TOKEN_KEY_MISFIT) {
        return lessons_misconfigured(r, st, apr_psprintf(r->pool,
            "key file %s (section at %s) does not allow algorithm %s",
            conf->key_file, conf->jwt_where, conf->alg_name));
    }
    if (rc != LESSONS_TOKEN_OK) {
        /* The client's fault: info, as every refusal (LogLevel
         * lessons:info shows them).
         */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00204)
                      "token rejected: %s", lessons_token_describe(rc));
        return st->status = lessons_challenge(r, HTTP_UNAUTHORIZED,
            "invalid_token", lessons_token_describe(rc));
    }
    if (subject) {
        r->user = apr_pstrdup(r->pool, subject);
    }
    r->ap_auth_type = "Bearer";
    return st->status = OK;
}

/* Runs for every request where an algorithm and a key are in effect,
 * before authn/authz and before any handler: a request without a valid
 * token stops here.
 */
static int lessons_check_access(request_rec *r)
{
    lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);

    if (!lessons_configured(conf)) {
        return DECLINED;    /* no token policy here; the handler still
                             * refuses to serve without one */
    }
    return lessons_authenticate(r, conf);
}

/* ------------------------------------------------------------------ */
/* Request bodies                                                       */

/* Read the whole body, up to max bytes.  Returns OK; 413 over our cap,
 * for the caller to answer; or, with *read_rv set, the status for the
 * handler to return as it is when httpd could not read the body: its
 * input filter has then chosen the status (AP_FILTER_ERROR: and sent
 * the response), and nothing of ours may be written.
 */
static int lessons_read_body(request_rec *r, apr_off_t max,
                             const char **body, apr_size_t *len,
                             apr_status_t *read_rv)
{
    apr_bucket_brigade *bb;
    const char *cl = apr_table_get(r->headers_in, "Content-Length");
    apr_off_t declared = 0;
    apr_size_t cap = (apr_size_t)max, used = 0, size;
    char *buf;
    int eos = 0;
    apr_status_t rv;

    if (cl && (apr_strtoff(&declared, cl, NULL, 10) != APR_SUCCESS
               || declared < 0)) {
        declared = 0;       /* httpd has vetted it; size the buffer anyway */
    }
    *read_rv = APR_SUCCESS;
    if (declared > max) {
        r->connection->keepalive = AP_CONN_CLOSE;  /* do not drain it */
        return HTTP_REQUEST_ENTITY_TOO_LARGE;
    }
    /* Start with one read's worth and grow as bytes arrive: a client
     * that declares a large body and sends nothing holds no more.
     */
    size = HUGE_STRING_LEN;
    if (declared > 0 && declared < HUGE_STRING_LEN) {
        size = (apr_size_t)declared + 1;
    }
    if (size > cap + 1) {
        size = cap + 1;
    }
    buf = apr_palloc(r->pool, size);
    bb = apr_brigade_create(r->pool, r->connection->bucket_alloc);

    while (!eos) {
        apr_bucket *b;

        rv = ap_get_brigade(r->input_filters, bb, AP_MODE_READBYTES,
                            APR_BLOCK_READ, HUGE_STRING_LEN);
        if (rv != APR_SUCCESS) {
            apr_brigade_destroy(bb);
            *read_rv = rv;
            return ap_map_http_request_error(rv, HTTP_BAD_REQUEST);
        }
        for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb);
             b = APR_BUCKET_NEXT(b)) {
            const char *data;
            apr_size_t n;

            if (APR_BUCKET_IS_EOS(b)) {
                eos = 1;
                break;
            }
            if (APR_BUCKET_IS_METADATA(b)) {
                continue;
            }
            rv = apr_bucket_read(b, &data, &n, APR_BLOCK_READ);
            if (rv != APR_SUCCESS) {
                apr_brigade_destroy(bb);
                *read_rv = rv;
                return ap_map_http_request_error(rv, HTTP_BAD_REQUEST);
            }
            if (n > cap - used) {
                apr_brigade_destroy(bb);
                r->connection->keepalive = AP_CONN_CLOSE;
                return HTTP_REQUEST_ENTITY_TOO_LARGE;
            }
            if (used + n + 1 > size) {
                char *bigger;
                apr_size_t want = size * 2;

                while (want < used + n + 1) {
                    want *= 2;
                }
                if (want > cap + 1) {
                    want = cap + 1;
                }
                bigger = apr_palloc(r->pool, want);
                memcpy(bigger, buf, used);
                buf = bigger;
                size = want;
            }
            memcpy(buf + used, data, n);
            used += n;
        }
        apr_brigade_cleanup(bb);
    }
    apr_brigade_destroy(bb);
    buf[used] = '\0';
    *body = buf;
    *len = used;
    return OK;
}

/* ------------------------------------------------------------------ */
/* Operations                                                           */

/* Everything an operation needs, gathered once by the handler. */
typedef struct {
    request_rec *r;
    const lessons_dir_conf *conf;
    lessons_db_t db;
    apr_pool_t *db_pool;            /* lives as long as the connection */
    lessons_route_t route;
} lessons_ctx;

/* Answer a database fault as what it is: 503 with Retry-After when
 * trying again later can help (down, busy, locked, read-only, full, the
 * file moved), 500 when it cannot (no schema, anything else).  Logged
 * once, with the driver's message; waits that ran out are a warning.
 */
static int lessons_db_answer(lessons_ctx *c, lessons_db_fault_e fault,
                             const char *err, int wrote)
{
    request_rec *r = c->r;
    const char *name = lessons_db_name(&c->db, r->pool);
    const char *advice = lessons_db_advice(&c->db, r->pool, fault);

    err = err ? err : "unknown error";
    switch (fault) {
    case LESSONS_DB_TIMEOUT:
        lessons_log_fault(r, APLOG_WARNING, apr_psprintf(r->pool,
            LESSONSLOG(00303) "%s did not answer within %d s (a lock or a "
            "busy database); answered 503: %s", name,
            lessons_db_timeout(ap_get_module_config(
                r->server->module_config, &lessons_module)), err));
        break;
    case LESSONS_DB_UNAVAILABLE:
    case LESSONS_DB_READONLY:
    case LESSONS_DB_FULL:
    case LESSONS_DB_MOVED:
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00304) "%s cannot serve this request%s%s%s: %s",
            name, advice ? " (" : "", advice ? advice : "",
            advice ? ")" : "", err));
        if (wrote && fault == LESSONS_DB_UNAVAILABLE) {
            /* Never held back: each one is a write to reconcile. */
            ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, LESSONSLOG(00305)
                          "the connection was lost during %s %s: its "
                          "outcome is unknown", r->method, r->uri);
        }
        break;
    case LESSONS_DB_NO_SCHEMA:
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00306) "%s has no lessons schema (%s): %s", name,
            advice, err));
        break;
    default:
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00302) "database error on %s: %s", name, err));
        break;
    }
    if (fault == LESSONS_DB_NO_SCHEMA || fault == LESSONS_DB_ERROR) {
        return lessons_send_problem(r, HTTP_INTERNAL_SERVER_ERROR, NULL,
            "The request could not be completed because of a server "
            "error.", NULL);
    }
    apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
        "The lessons database is unavailable. Try again later.", NULL);
}

/* A 503 before any database work: the pool is exhausted or the wait for
 * it ran out.
 */
static int lessons_db_shed(request_rec *r, const char *why)
{
    lessons_log_fault(r, APLOG_WARNING, apr_psprintf(r->pool,
        LESSONSLOG(00307) "%s; answered 503", why));
    apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
        "The lessons database is busy. Try again later.", NULL);
}

/* Get a pooled connection ready for this request, within the request's
 * time bound.  DECLINED means connected; anything else is the answer.
 */
static int lessons_db_open(lessons_ctx *c)
{
    request_rec *r = c->r;
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    apr_interval_time_t bound = apr_time_from_sec(lessons_db_timeout(sconf));
    apr_time_t deadline = apr_time_now() + bound;
    apr_interval_time_t left;
    lessons_db_fault_e fault;
    const char *err = NULL;
    ap_dbd_t *dbd;

    if (sconf->gate) {
        switch (lessons_gate_enter(sconf->gate, deadline)) {
        case LESSONS_GATE_FULL:
            return lessons_db_shed(r, "every database connection of this "
                                   "process is busy and enough requests "
                                   "wait for one");
        case LESSONS_GATE_TIMEOUT:
            return lessons_db_shed(r, apr_psprintf(r->pool, "waited %d s "
                                   "for a pooled database connection",
                                   lessons_db_timeout(sconf)));
        case LESSONS_GATE_OK:
            /* Runs after mod_dbd's release, which acquire registers
             * later on the same pool.
             */
            apr_pool_cleanup_register(r->pool, sconf->gate,
                                      lessons_gate_leave,
                                      apr_pool_cleanup_null);
            break;
        }
    }
    dbd = sconf->acquire ? sconf->acquire(r) : NULL;
    if (!dbd) {
        lessons_log_fault(r, APLOG_ERR, LESSONSLOG(00301)
                          "no database connection (check DBDriver/DBDParams "
                          "and that the database is up)");
        apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
        return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
            "The lessons database is unavailable. Try again later.", NULL);
    }
    c->db.driver = dbd->driver;
    c->db.handle = dbd->handle;
    c->db_pool = dbd->pool;

    /* The statement gets what is left of the bound; a wait of under a
     * second keeps the session's setting (no extra round trip).
     */
    left = deadline - apr_time_now();
    if (left > bound - apr_time_from_sec(1)) {
        left = bound;
    }
    else if (left < apr_time_from_msec(100)) {
        left = apr_time_from_msec(100);
    }
    fault = lessons_db_ready(&c->db, c->db_pool,
                             (long)apr_time_as_msec(left), &err);
    if (fault != LESSONS_DB_OK) {
        return lessons_db_answer(c, fault, err, 0);
    }
    /* Writes into a deleted or replaced SQLite file would be acknowledged
     * and lost.
     */
    if (r->method_number != M_GET && lessons_db_moved(&c->db)) {
        return lessons_db_answer(c, LESSONS_DB_MOVED,
                                 "the database file has moved", 0);
    }
    return DECLINED;                /* connected: carry on */
}

static int lessons_db_failed(lessons_ctx *c, const char *err)
{
    int wrote = c->r->method_number == M_POST
                || c->r->method_number == M_PUT
                || c->r->method_number == M_DELETE;

    return lessons_db_answer(c, lessons_db_fault(&c->db, c->db_pool, err),
                             err, wrote);
}

static int lessons_send_lesson(lessons_ctx *c, int status,
                               const lessons_lesson_t *l)
{
    apr_size_t len = 0;
    const char *body = lessons_json_lesson_text(c->r->pool, l, &len);

    if (!body) {
        return lessons_db_failed(c, "a stored lesson could not be encoded");
    }
    return lessons_send(c->r, status, LESSONS_CT_JSON, body, len);
}

static int lessons_list(lessons_ctx *c)
{
    apr_array_header_t *list = NULL;
    const char *err = NULL, *body;
    apr_size_t len = 0;
    lessons_store_e rc;
    int done = lessons_db_open(c);

    if (done != DECLINED) {
        return done;
    }
    switch (c->route.route) {
    case LESSONS_ROUTE_BEGINNER:
        rc = lessons_store_list_levels(&c->db, c->r->pool,
                                       LESSONS_BEGINNER_FIRST,
                                       LESSONS_BEGINNER_SECOND, &list, &err);
        break;
    case LESSONS_ROUTE_ADVANCED:
        rc = lessons_store_list_levels(&c->db, c->r->pool,
                                       LESSONS_ADVANCED_FIRST,
                                       LESSONS_ADVANCED_SECOND, &list, &err);
        break;
    case LESSONS_ROUTE_LEVEL:
        rc = lessons_store_list_level(&c->db, c->r->pool, c->route.arg,
                                      &list, &err);
        break;
    default:
        rc = lessons_store_list_all(&c->db, c->r->pool, &list, &err);
        break;
    }
    if (rc != LESSONS_STORE_OK) {
        return lessons_db_failed(c, err);
    }
    body = lessons_json_list_text(c->r->pool, list, &len);
    if (!body) {
        return lessons_db_failed(c, "stored lessons could not be encoded");
    }
    return lessons_send(c->r, HTTP_OK, LESSONS_CT_JSON, body, len);
}

static int lessons_get(lessons_ctx *c)
{
    lessons_lesson_t l;
    const char *err = NULL;
    int done = lessons_db_open(c);

    if (done != DECLINED) {
        return done;
    }
    switch (lessons_store_get(&c->db, c->r->pool, c->route.arg, &l, &err)) {
    case LESSONS_STORE_OK:
        return lessons_send_lesson(c, HTTP_OK, &l);
    case LESSONS_STORE_NOT_FOUND:
        return lessons_send_empty(c->r, HTTP_NOT_FOUND);
    default:
        return lessons_db_failed(c, err);
    }
}

/* Read and decode a create/update body.  Returns DECLINED with *in
 * filled, or the finished response.
 */
static int lessons_decode_body(lessons_ctx *c, lessons_payload_mode_e mode,
                               lessons_input_t *in)
{
    request_rec *r = c->r;
    apr_off_t max = lessons_max_body(c->conf);
    const char *ct = apr_table_get(r->headers_in, "Content-Type");
    const char *body = NULL, *detail = NULL;
    apr_size_t len = 0;
    apr_status_t read_rv;
    json_t *errors = NULL;
    int rc;

    if (!lessons_payload_type_ok(ct)) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00401)
                      "rejected: Content-Type %s is not JSON",
                      ct ? ct : "(none)");
        return lessons_send_problem(r, HTTP_UNSUPPORTED_MEDIA_TYPE, NULL,
            "The request body must be JSON (Content-Type: "
            "application/json).", NULL);
    }
    rc = lessons_read_body(r, max, &body, &len, &read_rv);
    if (read_rv != APR_SUCCESS) {
        /* httpd's status and httpd's error document: write nothing.
         * After AP_FILTER_ERROR the filter's ap_die has set r->status.
         */
        ap_log_rerror(APLOG_MARK, APLOG_INFO,
                      read_rv == AP_FILTER_ERROR ? 0 : read_rv, r,
                      LESSONSLOG(00407) "rejected: request body could not "
                      "be read; httpd answers %d",
                      rc == AP_FILTER_ERROR ? r->status : rc);
        return rc;
    }
    if (rc == HTTP_REQUEST_ENTITY_TOO_LARGE) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00402)
                      "rejected: body larger than %" APR_OFF_T_FMT
                      " bytes", max);
        return lessons_send_problem(r, rc, NULL, apr_psprintf(r->pool,
            "The request body is larger than %" APR_OFF_T_FMT " bytes.",
            max), NULL);
    }
    switch (lessons_payload_decode(r->pool, body, len, mode, in, &errors,
                                   &detail)) {
    case LESSONS_PAYLOAD_OK:
        return DECLINED;
    case LESSONS_PAYLOAD_MALFORMED:
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00404)
                      "rejected: %s", detail);
        return lessons_send_problem(r, HTTP_BAD_REQUEST, NULL, detail, NULL);
    case LESSONS_PAYLOAD_INVALID:
    default:
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00405)
                      "rejected: validation failed on %d field(s)",
                      (int)json_object_size(errors));
        return lessons_send_problem(r, HTTP_BAD_REQUEST,
            "One or more validation errors occurred.", NULL, errors);
    }
}

static int lessons_no_level(lessons_ctx *c, int level)
{
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, LESSONSLOG(00406)
                  "rejected: level %d does not exist", level);
    return lessons_send_problem(c->r, HTTP_BAD_REQUEST,
        "One or more validation errors occurred.", NULL,
        lessons_payload_error(c->r->pool, "levelId",
            apr_psprintf(c->r->pool, "Level %d does not exist.", level)));
}

static int lessons_create(lessons_ctx *c)
{
    request_rec *r = c->r;
    lessons_input_t in;
    lessons_lesson_t l;
    const char *err = NULL;
    int done = lessons_decode_body(c, LESSONS_PAYLOAD_CREATE, &in);

    if (done != DECLINED || (done = lessons_db_open(c)) != DECLINED) {
        return done;
    }
    /* Insert and read-back are one transaction: OK means committed. */
    switch (lessons_store_create(&c->db, r->pool, &in, &l, &err)) {
    case LESSONS_STORE_OK:
        break;
    case LESSONS_STORE_NO_LEVEL:
        return lessons_no_level(c, in.level_id);
    default:
        return lessons_db_failed(c, err);
    }
    apr_table_setn(r->headers_out, "Location",
                   apr_psprintf(r->pool, "%s/%" APR_INT64_T_FMT,
                                lessons_base_path(c->conf), l.id));
    return lessons_send_lesson(c, HTTP_CREATED, &l);
}

static int lessons_update(lessons_ctx *c)
{
    request_rec *r = c->r;
    lessons_input_t in;
    lessons_lesson_t l;
    const char *err = NULL;
    int done = lessons_decode_body(c, LESSONS_PAYLOAD_UPDATE, &in);

    if (done != DECLINED || (done = lessons_db_open(c)) != DECLINED) {
        return done;
    }
    /* One UPDATE of the fields sent and the read-back (levelName and
     * levelCode follow a changed levelId), in one transaction.
     */
    switch (lessons_store_update(&c->db, r->pool, c->route.arg, &in, &l,
                                 &err)) {
    case LESSONS_STORE_OK:
        return lessons_send_lesson(c, HTTP_OK, &l);
    case LESSONS_STORE_NOT_FOUND:
        return lessons_send_empty(r, HTTP_NOT_FOUND);
    case LESSONS_STORE_NO_LEVEL:
        return lessons_no_level(c, in.level_id);
    default:
        return lessons_db_failed(c, err);
    }
}

static int lessons_delete(lessons_ctx *c)
{
    const char *err = NULL;
    int done = lessons_db_open(c);

    if (done != DECLINED) {
        return done;
    }
    switch (lessons_store_delete(&c->db, c->r->pool, c->route.arg, &err)) {
    case LESSONS_STORE_OK:
        return lessons_send_empty(c->r, HTTP_NO_CONTENT);
    case LESSONS_STORE_NOT_FOUND:
        return lessons_send_empty(c->r, HTTP_NOT_FOUND);
    default:
        return lessons_db_failed(c, err);
    }
}

/* ------------------------------------------------------------------ */
/* Handler                                                              */

static int lessons_handler(request_rec *r)
{
    lessons_ctx c;
    unsigned int method, allowed;
    int rc;

    if (!r->handler || strcmp(r->handler, LESSONS_HANDLER) != 0) {
        return DECLINED;
    }
    memset(&c, 0, sizeof(c));
    c.r = r;
    c.conf = ap_get_module_config(r->per_dir_config, &lessons_module);

    /* Fail closed: the access checker has normally answered this
     * already, but "Satisfy Any" or a missing config must not open the
     * API, so the handler insists on a verified token itself.
     */
    rc = lessons_authenticate(r, c.conf);
    if (rc != OK) {
        return rc;
    }

    c.route = lessons_route_match(lessons_base_path(c.conf), r->uri);
    if (c.route.route == LESSONS_ROUTE_NONE) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00501)
                      "no such resource: %s", r->uri);
        return lessons_send_problem(r, HTTP_NOT_FOUND, NULL,
                                    "No such resource.", NULL);
    }
    method = lessons_route_method(r->method);
    allowed = lessons_route_allowed(c.route.route);
    if (!(method & allowed)) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00502)
                      "method %s not allowed on %s", r->method, r->uri);
        apr_table_setn(r->headers_out, "Allow",
                       lessons_route_allow_header(c.route.route));
        return lessons_send_problem(r, HTTP_METHOD_NOT_ALLOWED, NULL,
            apr_psprintf(r->pool, "Allowed methods: %s.",
                         lessons_route_allow_header(c.route.route)), NULL);
    }

    switch (method) {
    case LESSONS_METHOD_OPTIONS:
        apr_table_setn(r->headers_out, "Allow",
                       lessons_route_allow_header(c.route.route));
        return lessons_send_empty(r, HTTP_NO_CONTENT);
    case LESSONS_METHOD_POST:
        return lessons_create(&c);
    case LESSONS_METHOD_PUT:
        return lessons_update(&c);
    case LESSONS_METHOD_DELETE:
        return lessons_delete(&c);
    default:                        /* GET, HEAD */
        return c.route.route == LESSONS_ROUTE_ITEM ? lessons_get(&c)
                                                   : lessons_list(&c);
    }
}

/* Is the request for the API?  Asked at translate_name, when the
 * <Location> walk has run (map_to_storage sees only server defaults).
 */
static int lessons_translate(request_rec *r)
{
    core_dir_config *d = ap_get_core_module_config(r->per_dir_config);
    const char *err = NULL, *handler;

    if (d && d->expr_handler) {
        handler = ap_expr_str_exec(r, d->expr_handler, &err);
        if (!err && handler && strcasecmp(handler, LESSONS_HANDLER) == 0) {
            lessons_state(r)->api = 1;
        }
    }
    return DECLINED;
}

/* The API maps to no file: skip httpd's filesystem walk for it, as
 * mod_proxy does.  That also keeps TRACE (answered by mod_http in this
 * hook) away from the API: it gets the 405 of any unknown method, after
 * the token check, and never echoes the Authorization header.
 */
static int lessons_map_to_storage(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);

    return st && st->api ? OK : DECLINED;
}

static void lessons_register_hooks(apr_pool_t *p)
{
    (void)p;
    ap_hook_check_config(lessons_check_config, NULL, NULL, APR_HOOK_MIDDLE);
    static const char *const before_dbd[] = { "mod_dbd.c", NULL };

    ap_hook_post_config(lessons_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* The gates exist before mod_dbd's child_init connects. */
    ap_hook_child_init(lessons_child_init, NULL, before_dbd,
                       APR_HOOK_MIDDLE);
    APR_OPTIONAL_HOOK(dbd, post_connect, lessons_dbd_connected, NULL, NULL,
                      APR_HOOK_MIDDLE);
    ap_hook_translate_name(lessons_translate, NULL, NULL, APR_HOOK_FIRST);
    ap_hook_map_to_storage(lessons_map_to_storage, NULL, NULL,
                           APR_HOOK_FIRST);
    ap_hook_access_checker(lessons_check_access, NULL, NULL,
                           APR_HOOK_FIRST);
    ap_hook_handler(lessons_handler, NULL, NULL, APR_HOOK_MIDDLE);
}

AP_DECLARE_MODULE(lessons) = {
    STANDARD20_MODULE_STUFF,
    lessons_create_dir_conf,
    lessons_merge_dir_conf,
    lessons_create_srv_conf,
    lessons_merge_srv_conf,
    lessons_cmds,
    lessons_register_hooks,
    AP_MODULE_FLAG_NONE
};
