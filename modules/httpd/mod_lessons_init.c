/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_init.c: process life.  The start-up checks (configtest
 * included) over every section the directives recorded, the writers'
 * mutex, post_config's per-server setup, and in each child the
 * per-process state (caches, the connection gate, the keys fetchers)
 * and the pool's size once mod_dbd connects.
 */

#include "httpd/mod_lessons.h"
#include "http_main.h"                 /* ap_server_conf */

/* Checked here: each section's own directives, whether the
 * configuration holds a key at all, and the merges that can be seen
 * from the configuration alone (lessons_check_merges).  Which sections
 * a request merges (regex sections, <If> conditions) is httpd's to
 * decide; the request-time check (lessons_gate_policy) holds whatever
 * the merge produces.
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

/* The keys URL or discovered issuer of a section, with the algorithms
 * its keys must fit, told to its source (eager: this section surely
 * takes its keys).  OK, or !OK after an emerg line.
 */
static int lessons_configure_source(apr_pool_t *ptemp, lessons_keys_src *src,
                                    const lessons_dir_conf *c, int eager)
{
    lessons_algs_t algs = c->algs;
    const char *err;

    if (!algs && lessons_keys_src_issuer(src)) {
        algs = lessons_discovery_algs();
    }
    err = lessons_keys_src_configure(ptemp, src, c, algs, eager);
    if (err) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0,
                     NULL, LESSONSLOG(00106) "%s", err);
        return !OK;
    }
    return OK;
}

static int lessons_check_section(apr_pool_t *ptemp, lessons_dir_conf *c,
                                 int *keys);

/* Does a section among these with a key of its own reach where c's
 * requests are?  Then a merge may pair them with that key, and c's
 * issuer would only name the iss to check.  A reach is told for a plain
 * <Location> only; any other kind of section (server level, a regex,
 * <If>, <Directory>) may reach anywhere.
 */
static int lessons_key_may_reach(const lessons_dir_conf *c,
                                 const apr_array_header_t *sections)
{
    int i;

    for (i = 0; sections && i < sections->nelts; i++) {
        const lessons_dir_conf *k = APR_ARRAY_IDX(sections, i,
                                                  lessons_dir_conf *);

        if (k == c || (!k->jwt_where && !k->issuers)) {
            continue;
        }
        if (!k->reach || !c->reach
            || strncmp(c->reach, k->reach, strlen(k->reach)) == 0) {
            return 1;
        }
    }
    return 0;
}

/* An issuer alone surely serves its keys, so they are fetched at start
 * (the health check then tells from the first second whether they do),
 * unless a key of its server's, or of the main server's, may reach its
 * requests: then they are fetched when a request first needs them.
 */
static int lessons_issuer_surely_serves(const lessons_dir_conf *c)
{
    const lessons_srv_conf *own = ap_get_module_config(
        c->server->module_config, &lessons_module);
    const lessons_srv_conf *main_conf = ap_get_module_config(
        ap_server_conf->module_config, &lessons_module);

    return !lessons_key_may_reach(c, own->sections)
           && (c->server == ap_server_conf
               || !lessons_key_may_reach(c, main_conf->sections));
}

/* A section with <LessonsJWTIssuer> blocks: each block as a section of
 * its own (the directives saw to it that the section sets no key,
 * issuer or audience beside them); keys settings belong in the block
 * whose keys they fetch.
 */
static int lessons_check_blocks(apr_pool_t *ptemp, lessons_dir_conf *c,
                                int *keys)
{
    int rc = OK, blocks = 0, i;

    if (c->keys_ca || c->keys_proxy || c->keys_refresh
        || c->keys_min_refresh) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0,
                     NULL, LESSONSLOG(00111) "%s: LessonsJWTKeysCA, "
                     "LessonsJWTKeysProxy, LessonsJWTKeysRefresh and "
                     "LessonsJWTKeysMinRefresh "
                     "beside <LessonsJWTIssuer> blocks: put them in the "
                     "block of the issuer whose keys they fetch",
                     c->keys_where);
        rc = !OK;
    }
    for (i = 0; i < c->issuers->nelts; i++) {
        if (lessons_check_section(ptemp, APR_ARRAY_IDX(c->issuers, i,
                                                       lessons_dir_conf *),
                                  &blocks) != OK) {
            rc = !OK;
        }
    }
    (*keys)++;
    return rc;
}

/* One section's (or block's) start-up checks: keys URL settings beside
 * their URL (or issuer to discover), keys from a URL not asked for HMAC
 * alone, algorithm and key together.  LessonsJWTAlgorithm beside an
 * issuer that can be discovered, and no key, takes the issuer's keys.
 * OK, or !OK after an emerg line; *keys counts the sections that verify
 * tokens.
 */
static int lessons_check_section(apr_pool_t *ptemp, lessons_dir_conf *c,
                                 int *keys)
{
    int rc = OK;

    if (c->issuers) {
        return lessons_check_blocks(ptemp, c, keys);
    }
    if (c->algs && !c->keyset && !c->keys_url && c->issuer_src) {
        c->keys_url = c->issuer_src;
    }
    /* Keys URL settings belong to the URL's own section; each
     * URL's source takes its sections' settings (here, so that
     * configtest sees a conflict).
     */
    if ((c->keys_refresh || c->keys_min_refresh
         || ((c->keys_ca || c->keys_proxy)
             && !(c->introspect && c->introspect->section == c)))
        && !c->keys_url && !c->issuer_src) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0,
                     NULL, LESSONSLOG(00105) "%s: LessonsJWTKeysCA, "
                     "LessonsJWTKeysProxy, LessonsJWTKeysRefresh and "
                     "LessonsJWTKeysMin"
                     "Refresh need LessonsJWTKeysURL in the same section "
                     "(or an https:// LessonsJWTIssuer whose keys are "
                     "discovered); LessonsJWTKeysCA and LessonsJWTKeysProxy "
                     "also serve LessonsJWTIntrospect in its section",
                     c->keys_where ? c->keys_where : "a section");
        rc = !OK;
    }
    /* A keys URL gives public keys only: a section that takes
     * nothing but HMAC from one could verify no token.
     */
    if (c->keys_url && lessons_algs_hmac_only(c->algs)) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0,
                     NULL, LESSONSLOG(00108) "%s: a keys URL gives "
                     "public keys only (RSA, EC): %s can verify no token "
                     "with it%s; a shared secret belongs in a key file "
                     "(LessonsJWTKey HS256 FILE)", c->jwt_where,
                     c->alg_name, lessons_keys_src_issuer(c->keys_url)
                     ? " (nor with the keys discovered from the issuer)"
                     : "");
        rc = !OK;
    }
    if (c->keys_url && lessons_configure_source(ptemp, c->keys_url, c, 1)
                       != OK) {
        rc = !OK;
    }
    if (!c->jwt_where) {
        /* An issuer alone: its keys serve where no key is in effect. */
        if (c->issuer_src) {
            (*keys)++;
            if (lessons_configure_source(ptemp, c->issuer_src, c,
                                         lessons_issuer_surely_serves(c))
                != OK) {
                rc = !OK;
            }
        }
        return rc;
    }
    /* A block's discovered keys need no algorithm named. */
    if ((c->algs || lessons_keys_src_issuer(c->keys_url))
        && (c->keyset || c->keys_url)) {
        (*keys)++;
        return rc;
    }
    ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                 LESSONSLOG(00102) "%s: this section sets %s but "
                 "not %s; algorithm and key are one setting: give "
                 "both in the same section, or use LessonsJWTKey "
                 "ALG FILE", c->jwt_where,
                 c->algs ? "LessonsJWTAlgorithm"
                         : c->keys_url ? "LessonsJWTKeysURL"
                                       : "LessonsJWTKeyFile",
                 c->algs ? "LessonsJWTKeyFile, LessonsJWTKeysURL or an "
                           "https:// LessonsJWTIssuer to discover"
                         : "LessonsJWTAlgorithm");
    return !OK;
}

/* A section's kind and plain path ("<Location", "/api"), NULL for a
 * regex section, a wildcard or anything but <Location> and <Directory>.
 */
static const char *lessons_plain_path(apr_pool_t *p,
                                      const ap_directive_t *node,
                                      const char *kind)
{
    const char *path;

    if (!node || strcasecmp(node->directive, kind) != 0) {
        return NULL;
    }
    path = lessons_tree_arg(p, node);
    if (*path != '/' || strpbrk(path, "*?[~")) {
        return NULL;
    }
    return lessons_trim_slashes(p, path);
}

/* Does a request under path also match the section at outer (the same
 * path, or one below it)?
 */
static int lessons_path_within(const char *outer, const char *path)
{
    apr_size_t n = strlen(outer);

    return strncmp(outer, path, n) == 0
           && (path[n] == '\0' || path[n] == '/' || outer[n - 1] == '/');
}

/* The plain path of the nearest section of this kind at or around node. */
static const char *lessons_path_around(apr_pool_t *p,
                                       const ap_directive_t *node,
                                       const char *kind)
{
    const char *path;

    for (; node; node = node->parent) {
        if ((path = lessons_plain_path(p, node, kind)) != NULL) {
            return path;
        }
    }
    return NULL;
}

/* Is section node around (or equal to) the node of c? */
static int lessons_node_around(const ap_directive_t *node,
                               const lessons_dir_conf *c)
{
    const ap_directive_t *d;

    for (d = c->node; d; d = d->parent) {
        if (d == node) {
            return 1;
        }
    }
    return 0;
}

/* Merge into *merged every section of the list, in list order, that a
 * request for c also merges, as far as the configuration shows it:
 * kind "<Directory" or "<Location" with a plain path at or around c's,
 * or (kind NULL) a section c is nested in.
 */
static void lessons_merge_seen(apr_pool_t *p, lessons_dir_conf **merged,
                               const apr_array_header_t *list,
                               const lessons_dir_conf *c, const char *kind)
{
    const char *at = kind ? lessons_path_around(p, c->node, kind) : NULL;
    const char *path;
    int i;

    for (i = 0; i < list->nelts; i++) {
        const lessons_dir_conf *e = APR_ARRAY_IDX(list, i,
                                                  lessons_dir_conf *);

        if (e == c || !e->node
            || strcasecmp(e->node->directive, "<VirtualHost") == 0) {
            continue;
        }
        if (kind ? (at && (path = lessons_plain_path(p, e->node, kind))
                    && lessons_path_within(path, at))
                 : (lessons_node_around(e->node, c)
                    && !lessons_plain_path(p, e->node, "<Location")
                    && !lessons_plain_path(p, e->node, "<Directory"))) {
            *merged = lessons_merge_dir_conf(p, *merged, (void *)e);
        }
    }
}

/* The merges start-up can see (issue: a gate no nesting can open): for
 * each section, the server's level, the <Directory> and <Location>
 * sections at or around its path, the sections it is nested in, then
 * the section itself.  Where that needs a token and leaves nothing that
 * can verify one, or leaves a sender constraint, token type or audience
 * weaker than a section merged before it required, the section is
 * refused, naming it.  Merges that only
 * a request decides (regex sections, <If> conditions) are left to the
 * request-time check, which fails closed.
 */
static int lessons_check_merges(apr_pool_t *ptemp, server_rec *main_server)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(main_server->module_config, &lessons_module);
    lessons_token_policy_t policy;
    lessons_decide_policy_t decide;
    lessons_keys_src *src;
    server_rec *s;
    int rc = OK, i;

    for (s = main_server; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        for (i = 0; i < sconf->sections->nelts; i++) {
            lessons_dir_conf *c = APR_ARRAY_IDX(sconf->sections, i,
                                                lessons_dir_conf *);
            lessons_dir_conf *merged;
            const char *why, *tag, *fix;
            int top = !c->node
                      || strcasecmp(c->node->directive, "<VirtualHost") == 0;

            if (top && !s->is_virtual) {
                continue;           /* nothing is merged before it */
            }
            merged = ap_get_module_config(top ? main_server->lookup_defaults
                                              : s->lookup_defaults,
                                          &lessons_module);
            if (!top) {
                if (s->is_virtual) {
                    lessons_merge_seen(ptemp, &merged, mconf->sections, c,
                                       "<Directory");
                }
                lessons_merge_seen(ptemp, &merged, sconf->sections, c,
                                   "<Directory");
                if (s->is_virtual) {
                    lessons_merge_seen(ptemp, &merged, mconf->sections, c,
                                       "<Location");
                }
                lessons_merge_seen(ptemp, &merged, sconf->sections, c,
                                   "<Location");
                lessons_merge_seen(ptemp, &merged, sconf->sections, c, NULL);
            }
            merged = lessons_merge_dir_conf(ptemp, merged, c);
            if (!lessons_token_required(merged)) {
                continue;
            }
            tag = LESSONSLOG(00112);
            fix = "give it keys that verify (LessonsJWTKey, or an https:// "
                  "LessonsJWTIssuer whose keys are discovered)";
            why = lessons_gate_policy(ptemp, merged, &policy, &src);
            if (!why) {
                /* What an outer section required, this one cannot
                 * relax.
                 */
                lessons_decide_policy_of(ptemp, merged, &decide);
                why = lessons_decide_relaxed(ptemp, &decide);
                tag = LESSONSLOG(00780);
                fix = "set it here as strictly, or no stricter outside";
            }
            if (why) {
                ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0,
                             NULL, "%s%s:%d: %s; every request this section "
                             "applies to would be refused (500): %s", tag,
                             c->node ? c->node->filename : "(server)",
                             c->node ? c->node->line_num : 0, why, fix);
                rc = !OK;
            }
        }
    }
    return rc;
}

/* The SSLEngine in force among the directives from first on (the last
 * one, as mod_ssl takes it), looking inside conditional blocks
 * (<IfModule>, <IfDefine>, ...; whether mod_ssl is loaded at all is
 * checked apart): 1 on, 0 off or optional (RFC 2817 upgrades, which no
 * client certificate comes with), -1 none.
 */
static int lessons_ssl_engine(const ap_directive_t *first)
{
    const ap_directive_t *d;
    int on = -1, inner;

    for (d = first; d; d = d->next) {
        if (strcasecmp(d->directive, "SSLEngine") == 0 && d->args) {
            on = strncasecmp(d->args, "on", 2) == 0
                 && (!d->args[2] || apr_isspace(d->args[2]));
        }
        else if (strncasecmp(d->directive, "<If", 3) == 0
                 && d->directive[3] && d->first_child
                 && (inner = lessons_ssl_engine(d->first_child)) >= 0) {
            on = inner;
        }
    }
    return on;
}

/* Whether some <VirtualHost> among the directives from first on (inside
 * conditional blocks too) has SSLEngine on.
 */
static int lessons_ssl_vhost(const ap_directive_t *first)
{
    const ap_directive_t *d;

    for (d = first; d; d = d->next) {
        if (strcasecmp(d->directive, "<VirtualHost") == 0) {
            if (lessons_ssl_engine(d->first_child) > 0) {
                return 1;
            }
        }
        else if (strncasecmp(d->directive, "<If", 3) == 0
                 && d->directive[3] && lessons_ssl_vhost(d->first_child)) {
            return 1;
        }
    }
    return 0;
}

/* LessonsJWTCertBound required where no client certificate can come:
 * mod_ssl not loaded, or no SSLEngine on in the section's virtual host
 * (its own, or the main server's, which mod_ssl merges into it); a
 * section outside any virtual host serves every one of them, and is
 * taken where one has SSLEngine on.  What
 * the configuration tree shows is all httpd lets a module see: a
 * certificate checked by a proxy in front (a TLS-terminating one) is
 * invisible here, and so refused.  OK, or !OK after an emerg line.
 */
static int lessons_check_certbind(apr_pool_t *ptemp,
                                  const lessons_dir_conf *c)
{
    const ap_directive_t *vhost = c->node;
    int on = -1;

    if (c->certbind != LESSONS_CERTBIND_REQUIRED) {
        return OK;
    }
    while (vhost && strcasecmp(vhost->directive, "<VirtualHost") != 0) {
        vhost = vhost->parent;
    }
    if (ap_find_linked_module("mod_ssl.c")) {
        on = vhost ? lessons_ssl_engine(vhost->first_child) : -1;
        if (on < 0) {
            on = lessons_ssl_engine(ap_conftree);
        }
        if (on > 0 || (!vhost && lessons_ssl_vhost(ap_conftree))) {
            return OK;
        }
    }
    ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                 LESSONSLOG(00726) "%s: LessonsJWTCertBound required, but "
                 "%s: no client certificate can be verified here, so no "
                 "token would ever be taken (behind a TLS-terminating "
                 "proxy the binding cannot be checked)",
                 c->certbind_where ? c->certbind_where : "a section",
                 !ap_find_linked_module("mod_ssl.c")
                 ? "mod_ssl is not loaded"
                 : vhost ? apr_psprintf(ptemp, "SSLEngine is not on in "
                                        "its <VirtualHost> (%s:%d)",
                                        vhost->filename, vhost->line_num)
                         : "SSLEngine is not on in the main server nor in "
                           "any virtual host");
    return !OK;
}

int lessons_check_config(apr_pool_t *pconf, apr_pool_t *plog,
                         apr_pool_t *ptemp, server_rec *s)
{
    const ap_directive_t *handler;
    server_rec *first = s;
    int rc = OK, keys = 0, i;

    (void)pconf;
    (void)plog;
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        for (i = 0; i < sconf->sections->nelts; i++) {
            lessons_dir_conf *c = APR_ARRAY_IDX(sconf->sections, i,
                                                lessons_dir_conf *);

            if (lessons_check_section(ptemp, c, &keys) != OK) {
                rc = !OK;
            }
            if (lessons_check_certbind(ptemp, c) != OK) {
                rc = !OK;
            }
            if (lessons_introspect_check(ptemp, c) != OK) {
                rc = !OK;
            }
            else if (c->introspect && c->introspect->section == c
                     && !c->jwt_where && !c->issuer_src) {
                keys++;             /* a provider that answers for tokens */
            }
        }
    }
    if (rc == OK && lessons_check_merges(ptemp, first) != OK) {
        rc = !OK;
    }
    handler = lessons_find_handler(ptemp, ap_conftree);
    if (handler) {
        lessons_dbd_check_sqlite(ptemp, first);
    }
    if (handler && keys == 0) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     LESSONSLOG(00103) "%s:%d: SetHandler lessons, but no "
                     "LessonsJWTKey is configured anywhere (nor an https:// "
                     "LessonsJWTIssuer whose keys can be discovered); the "
                     "lessons API never runs without token checks",
                     handler->filename,
                     handler->line_num);
        rc = !OK;
    }
    return rc;
}

/* The mutex that takes SQLite writers of this server one at a time
 * (the Mutex directive can choose its mechanism and lock file).
 */
int lessons_pre_config(apr_pool_t *pconf, apr_pool_t *plog,
                       apr_pool_t *ptemp)
{
    (void)plog;
    (void)ptemp;
    lessons_keep_libraries();
    if (ap_mutex_register(pconf, LESSONS_WRITE_MUTEX, NULL,
                          APR_LOCK_DEFAULT, 0) != APR_SUCCESS
        || lessons_keys_pre_config(pconf) != OK
        || lessons_introspect_pre_config(pconf) != OK) {
        return !OK;
    }
    return lessons_dpop_pre_config(pconf);
}

int lessons_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                        apr_pool_t *ptemp, server_rec *s)
{
    lessons_token_policy_t policy;
    apr_global_mutex_t *writers = NULL;
    apr_status_t rv;
    ap_dbd_t *(*acquire)(request_rec *) =
        APR_RETRIEVE_OPTIONAL_FN(ap_dbd_acquire);
    ap_dbd_t *(*dbd_open)(apr_pool_t *, server_rec *) =
        APR_RETRIEVE_OPTIONAL_FN(ap_dbd_open);
    void (*dbd_close)(server_rec *, ap_dbd_t *) =
        APR_RETRIEVE_OPTIONAL_FN(ap_dbd_close);
    module *dbd_module = ap_find_linked_module("mod_dbd.c");

    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    server_rec *main_server = s;
    const dbd_cfg_t *dbd_cfg;
    lessons_metrics_t *metrics;
    apr_array_header_t *sources;

    (void)plog;
    /* SQLite lets one writer in at a time and makes the others wait
     * inside apr_dbd's process-wide lock (then sleep 100 ms): writers
     * that queue here instead, across the server's processes, never
     * meet a busy database of ours.  One mutex for the server's life,
     * kept across restarts: the generations a graceful restart overlaps
     * write to one file and queue together, and none is let go under
     * children still starting (APR counts a child's use only from its
     * child_init, so a restart that came first destroyed a pconf mutex
     * those children then failed to lock, EINVAL).
     */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        apr_global_mutex_t **kept;

        kept = ap_retained_data_get(LESSONS_WRITERS_KEPT);
        if (!kept) {
            kept = ap_retained_data_create(LESSONS_WRITERS_KEPT,
                                           sizeof(*kept));
        }
        rv = lessons_kept_mutex(kept, LESSONS_WRITE_MUTEX, s);
        if (rv != APR_SUCCESS) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        writers = *kept;
    }
    /* What each engine's driver leaves unbounded, before any thread. */
    lessons_engines_process_init(ptemp,
                                 1000L * lessons_db_timeout(mconf));
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);
        int i;

        /* Each section's token policy fingerprint, once (the token
         * cache's key); merges keep it only where nothing changed.
         */
        for (i = 0; i < sconf->sections->nelts; i++) {
            lessons_dir_conf *c =
                APR_ARRAY_IDX(sconf->sections, i, lessons_dir_conf *);

            lessons_policy_of(c, &policy);
            c->has_fp = c->algs && c->keyset && !c->keys_url
                        && lessons_token_policy_fingerprint(&policy, c->fp)
                           == 0;
        }
        sconf->acquire = acquire;
        sconf->dbd_open = dbd_open;
        sconf->dbd_close = dbd_close;
        sconf->dbd_module = dbd_module;
        dbd_cfg = lessons_dbd_cfg(s, main_server, dbd_module);
        sconf->dbd_init_sql = dbd_cfg ? dbd_cfg->init_queries : NULL;
        sconf->writers = writers;
    }
    /* The counters, kept across restarts, and the keys URLs in them. */
    metrics = ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG
              ? lessons_metrics_block(main_server) : NULL;
    mconf->key_sources = lessons_keys_sources(pconf);
    lessons_keys_share_alike(pconf, mconf->key_sources);
    sources = metrics ? lessons_keys_metrics(pconf, mconf->key_sources,
                                             metrics)
                      : apr_array_make(pconf, 1, sizeof(const char *));
    for (s = main_server; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->metrics = metrics;
        sconf->metrics_sources = sources;
    }
    /* Refusals by section, for the parent's warn line a minute. */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        lessons_refusals_post_config(pconf, ptemp, main_server);
    }
    /* DPoP proofs seen, where some section takes DPoP. */
    if (lessons_dpop_post_config(pconf, main_server) != OK) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    /* Keys URLs: their shared sets, and curl's global state, once,
     * before any thread.
     */
    if (lessons_keys_post_config(pconf, main_server) != OK) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    /* Introspection answers shared by the server's processes. */
    lessons_introspect_post_config(pconf, main_server);
    /* Read leases: a block per PostgreSQL pool, before the fork. */
    if (lessons_lease_post_config(pconf, main_server) != OK) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    if (mconf->key_sources->nelts || lessons_introspect_configured(pconf)) {
        const char *err = lessons_fetch_global_init();

        if (err) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                         LESSONSLOG(00107) "keys URLs: %s", err);
            return HTTP_INTERNAL_SERVER_ERROR;
        }
    }
    return OK;
}

/* How many requests of a process may hold a database connection, and
 * how many may wait for one once the database stops answering: never
 * more holders than mod_dbd has connections (DBDMax), and holders and
 * those waiters together leave a quarter of the threads free for the
 * rest of the server.  While the database answers, everybody may wait.
 */
static void lessons_gate_size(int threads, int dbd_max, int *slots,
                              int *waiting)
{
    int limit = threads * 3 / 4 > 1 ? threads * 3 / 4 : 1;

    *slots = dbd_max < limit ? dbd_max : limit;
    *waiting = limit - *slots < *slots ? limit - *slots : *slots;
}

/* How long every connection of a process may be held with none given
 * back before the database counts as not answering: LESSONS_GATE_STALL,
 * or half of LessonsDBTimeout when that is shorter, so that a stalled
 * gate sheds well before its waiters' deadline.
 */
apr_interval_time_t lessons_gate_stall(const lessons_srv_conf *sconf)
{
    apr_interval_time_t half = apr_time_from_sec(lessons_db_timeout(sconf)) / 2;

    return half < LESSONS_GATE_STALL ? half : LESSONS_GATE_STALL;
}


/* The allocator of the process's write jobs (lessons_write_grouped): a
 * job's pool is filled by whichever thread leads its group, so it cannot
 * be a subpool of its request's, whose allocator the request's thread
 * owns.  A pool with an allocator of its own maps its first block and
 * unmaps it when destroyed: two system calls and two page faults a
 * write.  One allocator with a mutex keeps the blocks for the next job
 * (at most LESSONS_JOBS_MAX_FREE of them idle).  NULL if it cannot be
 * made: each job then has its own, as before.
 */
#define LESSONS_JOBS_MAX_FREE (256 * 1024)

static apr_status_t lessons_jobs_destroy(void *data)
{
    apr_allocator_destroy(data);
    return APR_SUCCESS;
}

static apr_allocator_t *lessons_jobs_make(apr_pool_t *pchild)
{
    apr_allocator_t *a = NULL;
    apr_thread_mutex_t *lock = NULL;

    if (apr_thread_mutex_create(&lock, APR_THREAD_MUTEX_DEFAULT, pchild)
        != APR_SUCCESS
        || apr_allocator_create(&a) != APR_SUCCESS) {
        return NULL;
    }
    apr_allocator_mutex_set(a, lock);
    apr_allocator_max_free_set(a, LESSONS_JOBS_MAX_FREE);
    /* Registered after the mutex: cleanups run in reverse, so the
     * allocator goes first.
     */
    apr_pool_cleanup_register(pchild, a, lessons_jobs_destroy,
                              apr_pool_cleanup_null);
    return a;
}

void lessons_child_init(apr_pool_t *pchild, server_rec *s)
{
    server_rec *main = s;
    lessons_cache_t *cache = NULL;
    lessons_tokencache_t *tokens = NULL;
    apr_global_mutex_t *writers = NULL;
    apr_allocator_t *jobs = NULL;
    apr_hash_t *gates = apr_hash_make(pchild);
    lessons_srv_conf *mconf;
    lessons_watch_t *watch;
    int threads = 1, slots, waiting;

    ap_mpm_query(AP_MPMQ_MAX_THREADS, &threads);
    if (threads > 1) {
        jobs = lessons_jobs_make(pchild);
    }
    /* One watch for the process: each worker thread has at most one
     * connection in use at a time, and so has each read lease's holder.
     */
    mconf = ap_get_module_config(main->module_config, &lessons_module);
    watch = lessons_watch_make(pchild, (threads > 1 ? threads : 1)
                                       + mconf->leases);
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->threads = threads;
        sconf->throttle = lessons_throttle_make(pchild);
        sconf->watch = watch;
        /* One response cache and one token cache per process, shared by
         * every virtual host (their keys say whose each entry is).
         */
        if (s == main) {
            apr_off_t size = sconf->cache_size >= 0
                             ? sconf->cache_size : LESSONS_DEFAULT_CACHE;

            cache = size > 0 ? lessons_cache_make(pchild, (apr_size_t)size,
                                                  LESSONS_GZIP_MIN)
                             : NULL;
            tokens = lessons_tokencache_make(pchild, LESSONS_TOKEN_CACHE);
        }
        sconf->cache = cache;
        sconf->tokens = tokens;
        /* One writers' mutex for the server, opened once per child. */
        if (s == main && sconf->writers
            && apr_global_mutex_child_init(&sconf->writers,
                   apr_global_mutex_lockfile(sconf->writers), pchild)
               != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, LESSONSLOG(00104)
                         "cannot open the SQLite writers' mutex in this "
                         "process: writes queue in SQLite instead");
            sconf->writers = NULL;
        }
        if (s == main) {
            writers = sconf->writers;
        }
        sconf->writers = writers;
        if (threads > 1) {
            int max = LESSONS_DBD_DEFAULT_MAX;
            const char *pool = lessons_dbd_pool_key(pchild, s, main,
                                                    sconf->dbd_module, &max);

            sconf->gate = pool ? apr_hash_get(gates, pool,
                                              APR_HASH_KEY_STRING)
                               : NULL;
            if (!sconf->gate) {
                lessons_gate_size(threads, max, &slots, &waiting);
                sconf->gate = lessons_gate_make(pchild, slots, waiting,
                                                lessons_gate_stall(sconf));
                if (pool && sconf->gate) {
                    apr_hash_set(gates, pool, APR_HASH_KEY_STRING,
                                 sconf->gate);
                }
            }
            sconf->flight = lessons_flight_make(pchild,
                                                lessons_share_window(sconf));
            sconf->group = lessons_group_make(pchild, threads);
            sconf->update_group = lessons_group_make(pchild, threads);
            sconf->jobs = jobs;
        }
    }
    lessons_metrics_child_init(pchild, main);
    lessons_dpop_child_init(pchild, main);
    lessons_keys_child_init(pchild, main);
    lessons_introspect_child_init(pchild, main);
    lessons_lease_child_init(pchild, main);
}

/* mod_dbd made a connection: now we know its DBDMax.  Its DBDInitSQL
 * runs next: the engine lets those statements wait out a moment's lock.
 */
apr_status_t lessons_dbd_connected(apr_pool_t *p, dbd_cfg_t *cfg,
                                   ap_dbd_t *dbd)
{
    lessons_srv_conf *sconf = cfg && cfg->server
        ? ap_get_module_config(cfg->server->module_config, &lessons_module)
        : NULL;
    int slots, waiting;

    (void)p;
    if (dbd) {
        lessons_db_t db = { dbd->driver, dbd->handle, NULL, NULL, NULL };

        lessons_db_connected(&db);
    }
    if (sconf && sconf->gate && cfg->nmax > 0) {
        lessons_gate_size(sconf->threads, cfg->nmax, &slots, &waiting);
        lessons_gate_resize(sconf->gate, slots, waiting);
        ap_log_error(APLOG_MARK, APLOG_TRACE1, 0, cfg->server,
                     LESSONSLOG(00124) "a pooled connection made: up to %d "
                     "requests of this process hold one at a time (DBDMax "
                     "%d)", slots, cfg->nmax);
    }
    return APR_SUCCESS;
}
