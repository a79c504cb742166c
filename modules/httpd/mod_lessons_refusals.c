/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_refusals.c: the gate's refusals summed up per section
 * (lessons_refusals) as httpd meets them.  Each refusal has its line at
 * info, which Debian's LogLevel warn hides; so post_config numbers each
 * section that makes a token needed and makes a table of their counts
 * in shared memory, before the fork, found again after a restart
 * (ap_retained_data) like the metrics' block.  Each refused request adds
 * to its section's row as it is logged, and httpd's parent, in its
 * monitor hook, writes one warn line per section at most once a minute
 * with the refusals by reason, to the error log of the section's server.
 *
 * The monitor hook runs in the parent of prefork, worker and event about
 * every ten seconds (ap_wait_or_timeout: every tenth turn of its loop,
 * which sleeps a second), so a line comes 60 to 70 seconds after the
 * first refusal it tells.  A server run with -X has no parent loop, and
 * no such line.
 */

#include "apr_md5.h"
#include "apr_shm.h"

#include "httpd/mod_lessons.h"

#define LESSONS_REFUSALS_KEPT   "mod_lessons-refusals"

/* What the parent keeps across restarts: the table and its memory. */
typedef struct {
    apr_shm_t *shm;
    lessons_refusals_t *table;
} lessons_refusals_kept;

/* This generation's: the table, and what each row is. */
struct lessons_refusals_gen {
    lessons_refusals_t *table;      /* NULL: nothing is counted */
    int rows;
    const char **labels;            /* the section in words */
    server_rec **servers;           /* whose error log tells it */
    apr_pool_t *pool;               /* the monitor's, cleared each time */
};

/* A section in words, for the admin to find it: the section and where
 * it is, and its server; at a server's own level, where it made a
 * token needed.
 */
static const char *lessons_refusals_label(apr_pool_t *p,
                                          const lessons_dir_conf *c)
{
    const ap_directive_t *node = c->node;
    const server_rec *s = c->server;
    const char *host = "the main server";

    if (s && s->is_virtual) {
        /* Its ServerName's port, else its address's (a ServerName
         * without one leaves 0).
         */
        unsigned port = s->port ? s->port
                      : s->addrs ? s->addrs->host_port : 0;

        host = apr_psprintf(p, "virtual host %s%s (%s:%d)",
                            s->server_hostname ? s->server_hostname
                                               : "(unnamed)",
                            port ? apr_psprintf(p, ":%u", port) : "",
                            s->defn_name ? s->defn_name : "(unknown)",
                            s->defn_line_number);
    }
    if (!node || strcasecmp(node->directive, "<VirtualHost") == 0) {
        return apr_psprintf(p, "%s, its own lines (from %s)", host,
                            c->gate_where ? c->gate_where : "(unknown)");
    }
    /* The opener as written: the parsed tree keeps its '>' in args. */
    return apr_psprintf(p, "%s %s (%s:%d), %s", node->directive,
                        node->args ? node->args : ">",
                        node->filename ? node->filename : "(unknown)",
                        node->line_num, host);
}

/* What a section is across reloads, whatever moved around it in the
 * files: its server (by name and the file it is defined in) and its
 * openers from the outermost in, as an MD5 digest in hex (the table
 * keeps keys of a bounded length; a long <If> must not be cut into
 * another's), made unique by the caller.
 */
static const char *lessons_refusals_key(apr_pool_t *p,
                                        const lessons_dir_conf *c)
{
    const server_rec *s = c->server;
    const ap_directive_t *node;
    const char *key = "";
    unsigned char digest[APR_MD5_DIGESTSIZE];
    char *hex = apr_palloc(p, 2 * APR_MD5_DIGESTSIZE + 1);
    int i;

    for (node = c->node; node; node = node->parent) {
        key = apr_pstrcat(p, node->directive, " ",
                          node->args ? node->args : "", key, NULL);
    }
    key = s && s->is_virtual
          ? apr_psprintf(p, "%s:%u %s|%s", s->server_hostname
                         ? s->server_hostname : "", (unsigned)s->port,
                         s->defn_name ? s->defn_name : "", key)
          : apr_pstrcat(p, "main|", key, NULL);
    apr_md5(digest, key, strlen(key));
    for (i = 0; i < APR_MD5_DIGESTSIZE; i++) {
        apr_snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    }
    return hex;
}

/* Each section that made a token needed gets its row (numbered from 1
 * through its mark, which every merge carries), then the table: the one
 * kept from before when it has the same rows (a reload that changed no
 * section: old processes still answering count on into it), else a new
 * one carrying each row the old one had.
 */
void lessons_refusals_post_config(apr_pool_t *pconf, apr_pool_t *ptemp,
                                  server_rec *main_server)
{
    struct lessons_refusals_gen *gen = apr_pcalloc(pconf, sizeof(*gen));
    apr_array_header_t *labels = apr_array_make(pconf, 8,
                                                sizeof(const char *));
    apr_array_header_t *servers = apr_array_make(pconf, 8,
                                                 sizeof(server_rec *));
    apr_array_header_t *keys = apr_array_make(ptemp, 8,
                                              sizeof(const char *));
    apr_hash_t *seen = apr_hash_make(ptemp);
    lessons_refusals_kept *kept;
    apr_shm_t *shm = NULL;
    apr_size_t size;
    apr_status_t rv;
    server_rec *s;
    int i;

    for (s = main_server; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        for (i = 0; i < sconf->sections->nelts; i++) {
            lessons_dir_conf *c =
                APR_ARRAY_IDX(sconf->sections, i, lessons_dir_conf *);

            if (c->refusal_row) {
                const char *key = lessons_refusals_key(ptemp, c);
                int n = (int)(apr_uintptr_t)apr_hash_get(seen, key,
                                                         APR_HASH_KEY_STRING);

                /* Two sections alike: told apart by their order. */
                apr_hash_set(seen, key, APR_HASH_KEY_STRING,
                             (void *)(apr_uintptr_t)(n + 1));
                APR_ARRAY_PUSH(keys, const char *) =
                    n ? apr_psprintf(ptemp, "%s|%d", key, n) : key;
                APR_ARRAY_PUSH(labels, const char *) =
                    lessons_refusals_label(pconf, c);
                APR_ARRAY_PUSH(servers, server_rec *) =
                    c->server ? c->server : main_server;
                *c->refusal_row = labels->nelts;
            }
        }
    }
    gen->rows = labels->nelts;
    gen->labels = (const char **)labels->elts;
    gen->servers = (server_rec **)servers->elts;
    apr_pool_create(&gen->pool, pconf);
    apr_pool_tag(gen->pool, "lessons_refusals");
    for (s = main_server; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->refusals = gen;
    }

    kept = ap_retained_data_get(LESSONS_REFUSALS_KEPT);
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_REFUSALS_KEPT, sizeof(*kept));
    }
    if (kept->table
        && lessons_refusals_same(kept->table,
                                 (const char *const *)keys->elts,
                                 gen->rows)) {
        gen->table = kept->table;
        return;
    }
    size = lessons_refusals_size(gen->rows);
    if (size) {
        rv = apr_shm_create(&shm, size, NULL, main_server->process->pool);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, rv, main_server,
                         LESSONSLOG(00603) "cannot make the shared memory "
                         "of the refusals' summary (%" APR_SIZE_T_FMT
                         " bytes): refused tokens are logged at info only",
                         size);
            return;
        }
        gen->table = lessons_refusals_make(apr_shm_baseaddr_get(shm),
                                           apr_shm_size_get(shm),
                                           (const char *const *)keys->elts,
                                           gen->rows, kept->table, ptemp);
    }
    /* The old processes keep their own mapping of the old table; what
     * they count there from now on is not told.
     */
    if (kept->shm) {
        apr_shm_destroy(kept->shm);
    }
    kept->shm = shm;
    kept->table = gen->table;
}

/* At log time, in the request's process: one refusal of the request's
 * section (its innermost gate's row).
 */
void lessons_refusals_count(request_rec *r, lessons_metrics_refusal_e reason,
                            const char *expected)
{
    const lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);
    const lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);

    if (conf && conf->refusal_row && *conf->refusal_row > 0
        && sconf->refusals) {
        lessons_refusals_add(sconf->refusals->table, *conf->refusal_row - 1,
                             reason, expected, apr_time_now());
    }
}

/* The parent, about every ten seconds: each section's line once its
 * first refusal not yet told is a minute old.
 */
int lessons_refusals_monitor(apr_pool_t *p, server_rec *s)
{
    const lessons_srv_conf *sconf =
        ap_get_module_config(s->module_config, &lessons_module);
    struct lessons_refusals_gen *gen = sconf ? sconf->refusals : NULL;
    apr_time_t now = apr_time_now();
    int i;

    (void)p;
    if (!gen || !gen->table) {
        return DECLINED;
    }
    for (i = 0; i < gen->rows; i++) {
        const char *line = lessons_refusals_due(gen->table, i,
                                                gen->labels[i], gen->pool,
                                                now, LESSONS_REFUSALS_EVERY);

        if (line) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, gen->servers[i],
                         LESSONSLOG(00602) "%s", line);
        }
    }
    apr_pool_clear(gen->pool);
    return DECLINED;
}
