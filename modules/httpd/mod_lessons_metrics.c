/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_metrics.c: the server's counters (lessons_metrics) as httpd
 * meets them.  The block of shared memory is made by the parent before
 * it forks, on its process pool, and found again after a restart
 * (ap_retained_data), so the counters go on across graceful restarts;
 * each child takes a slot in child_init and gives it back when it ends.
 * Requests are counted as they are logged; the rest where it happens.
 * The "lessons-metrics" handler answers the Prometheus text format, and
 * mod_status's page gets a section (its ?auto form too).  Neither asks
 * the database or takes a lock: they sum the slots as they are.
 */

#include <errno.h>
#include <signal.h>

#include "apr_shm.h"
#include "mod_status.h"

#include "httpd/mod_lessons.h"

#define LESSONS_METRICS_KEY     "mod_lessons-metrics"
#define LESSONS_CT_METRICS      "text/plain; version=0.0.4; charset=utf-8"
/* Slots per ServerLimit process, for the old generation still ending
 * while the new one starts (a graceful restart), and a cap.
 */
#define LESSONS_METRICS_PER_PROCESS  2
#define LESSONS_METRICS_MAX_SLOTS    8192

typedef struct {
    apr_shm_t *shm;
    int slots;
} lessons_metrics_kept;

/* Is the slot's owner still there?  (EPERM: alive, another user's.) */
static int lessons_metrics_alive(void *baton, apr_uint32_t pid)
{
    (void)baton;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* The block, made once per httpd run: the first post_config makes it on
 * the process pool; later ones (restarts) find it.  NULL when it cannot
 * be made (the module then counts nothing, and says so).
 */
lessons_metrics_t *lessons_metrics_block(server_rec *s)
{
    lessons_metrics_kept *kept = ap_retained_data_get(LESSONS_METRICS_KEY);
    int limit = 0, slots, fresh = 0;
    apr_status_t rv;

    ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &limit);
    slots = (limit > 0 ? limit : 1) * LESSONS_METRICS_PER_PROCESS;
    if (slots > LESSONS_METRICS_MAX_SLOTS) {
        slots = LESSONS_METRICS_MAX_SLOTS;
    }
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_METRICS_KEY, sizeof(*kept));
    }
    if (!kept->shm || kept->slots != slots) {
        /* A ServerLimit changed by a full restart: a new block. */
        rv = apr_shm_create(&kept->shm, lessons_metrics_size(slots), NULL,
                            s->process->pool);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, rv, s, LESSONSLOG(00120)
                         "cannot make the shared memory of the metrics "
                         "(%" APR_SIZE_T_FMT " bytes): nothing is counted",
                         lessons_metrics_size(slots));
            kept->shm = NULL;
            return NULL;
        }
        kept->slots = slots;
        fresh = 1;
    }
    return lessons_metrics_attach(apr_shm_baseaddr_get(kept->shm),
                                  apr_shm_size_get(kept->shm), slots, fresh,
                                  apr_time_now());
}

/* Each process's figures, published from the caches' own counters as
 * they change (the watch calls come one at a time, under the cache's
 * lock), as additions to the slot.
 */
typedef struct {
    lessons_metrics_slot_t *slot;
    lessons_cache_stats_t cache;
    lessons_tokencache_stats_t tokens;
} lessons_metrics_pub;

static void lessons_metrics_delta(lessons_metrics_slot_t *slot,
                                  lessons_metrics_id_e id, apr_uint64_t was,
                                  apr_uint64_t now)
{
    if (now > was) {
        lessons_metrics_add(slot, id, now - was);
    }
}

static void lessons_metrics_cache_watch(void *baton,
                                        const lessons_cache_stats_t *now)
{
    lessons_metrics_pub *pub = baton;

    lessons_metrics_delta(pub->slot, LESSONS_M_CACHE_HITS, pub->cache.hits,
                          now->hits);
    lessons_metrics_delta(pub->slot, LESSONS_M_CACHE_MISSES,
                          pub->cache.misses, now->misses);
    lessons_metrics_delta(pub->slot, LESSONS_M_CACHE_EVICTIONS,
                          pub->cache.evictions, now->evictions);
    if (now->bytes != pub->cache.bytes
        || now->entries != pub->cache.entries) {
        lessons_metrics_set(pub->slot, LESSONS_M_CACHE_BYTES, now->bytes);
        lessons_metrics_set(pub->slot, LESSONS_M_CACHE_ENTRIES,
                            now->entries);
    }
    pub->cache = *now;
}

static void lessons_metrics_token_watch(void *baton,
                                        const lessons_tokencache_stats_t *now)
{
    lessons_metrics_pub *pub = baton;

    lessons_metrics_delta(pub->slot, LESSONS_M_TOKEN_HITS, pub->tokens.hits,
                          now->hits);
    lessons_metrics_delta(pub->slot, LESSONS_M_TOKEN_MISSES,
                          pub->tokens.misses, now->misses);
    pub->tokens = *now;
}

static apr_status_t lessons_metrics_release_slot(void *slot)
{
    lessons_metrics_release(slot);
    return APR_SUCCESS;
}

/* child_init, after the caches are made and before the keys' fetchers
 * start: this process's slot, for every server.
 */
void lessons_metrics_child_init(apr_pool_t *pchild, server_rec *s)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    lessons_metrics_slot_t *slot;
    lessons_metrics_pub *pub;

    slot = lessons_metrics_claim(mconf->metrics, (apr_uint32_t)getpid(),
                                 lessons_metrics_alive, NULL);
    if (!slot) {
        if (mconf->metrics) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, LESSONSLOG(00121)
                         "no free slot in the metrics' shared memory: this "
                         "process (%" APR_PID_T_FMT ") counts nothing",
                         getpid());
        }
        return;
    }
    apr_pool_cleanup_register(pchild, slot, lessons_metrics_release_slot,
                              apr_pool_cleanup_null);
    pub = apr_pcalloc(pchild, sizeof(*pub));
    pub->slot = slot;
    lessons_cache_watch(mconf->cache, lessons_metrics_cache_watch, pub);
    lessons_tokencache_watch(mconf->tokens, lessons_metrics_token_watch, pub);
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->metrics_slot = slot;
    }
}

/* This process's slot (NULL: not counting). */
static lessons_metrics_slot_t *lessons_metrics_slot_of(server_rec *s)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(s->module_config, &lessons_module);

    return sconf->metrics_slot;
}

void lessons_count(request_rec *r, lessons_metrics_id_e id)
{
    lessons_metrics_add(lessons_metrics_slot_of(r->server), id, 1);
}

void lessons_count_source(server_rec *s, int source,
                          lessons_metrics_src_e what, apr_uint64_t n)
{
    lessons_metrics_slot_t *slot = lessons_metrics_slot_of(s);

    if (what >= LESSONS_SRC_FETCHED) {        /* the gauges */
        lessons_metrics_source_set(slot, source, what, n);
    }
    else {
        lessons_metrics_source_add(slot, source, what, n);
    }
}

lessons_metrics_fault_e lessons_fault_of(lessons_db_fault_e fault, int lost)
{
    switch (fault) {
    case LESSONS_DB_UNAVAILABLE:
        return lost ? LESSONS_FAULT_OUTCOME_UNKNOWN
                    : LESSONS_FAULT_UNAVAILABLE;
    case LESSONS_DB_READONLY:           return LESSONS_FAULT_READONLY;
    case LESSONS_DB_FULL:               return LESSONS_FAULT_FULL;
    case LESSONS_DB_MOVED:              return LESSONS_FAULT_MOVED;
    case LESSONS_DB_NO_SCHEMA:          return LESSONS_FAULT_NO_SCHEMA;
    case LESSONS_DB_STALE:              return LESSONS_FAULT_STALE;
    default:                            return LESSONS_FAULT_ERROR;
    }
}

/* Which of the API's operations a request asked for. */
static lessons_metrics_op_e lessons_metrics_op(request_rec *r)
{
    const lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);
    lessons_route_t route = lessons_route_match(lessons_base_path(conf),
                                                r->uri);
    unsigned int method = lessons_route_method(r->method);
    int read = method & (LESSONS_METHOD_GET | LESSONS_METHOD_HEAD);

    switch (route.route) {
    case LESSONS_ROUTE_COLLECTION:
        return read ? LESSONS_OP_LIST
             : method == LESSONS_METHOD_POST ? LESSONS_OP_CREATE
             : LESSONS_OP_OTHER;
    case LESSONS_ROUTE_BEGINNER:
        return read ? LESSONS_OP_BEGINNER : LESSONS_OP_OTHER;
    case LESSONS_ROUTE_ADVANCED:
        return read ? LESSONS_OP_ADVANCED : LESSONS_OP_OTHER;
    case LESSONS_ROUTE_LEVEL:
        return read ? LESSONS_OP_LEVEL : LESSONS_OP_OTHER;
    case LESSONS_ROUTE_ITEM:
        return read ? LESSONS_OP_GET
             : method == LESSONS_METHOD_PUT ? LESSONS_OP_UPDATE
             : method == LESSONS_METHOD_DELETE ? LESSONS_OP_DELETE
             : LESSONS_OP_OTHER;
    default:
        return LESSONS_OP_OTHER;
    }
}

/* log_transaction: each API request once, by operation and the status
 * it was answered with; a write answered 2xx is a write committed (the
 * failed-write rule: a write is done and 2xx, or not done and not).
 * The gate's refusals go to their section's summary too, counted or
 * not here.
 */
int lessons_metrics_log(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);
    lessons_metrics_slot_t *slot = lessons_metrics_slot_of(r->server);
    lessons_metrics_op_e op;
    request_rec *last;

    /* The gate's refusals, each once: the request's own, and those of
     * its internal redirects that were decided afresh (one that took its
     * parent's verdict has refusal 0).
     */
    for (last = r; last; last = last->next) {
        lessons_req_state *gate =
            ap_get_module_config(last->request_config, &lessons_module);

        if (gate && gate->refusal > 0) {
            lessons_metrics_add(slot, LESSONS_M_REFUSED + gate->refusal - 1,
                                1);
            lessons_refusals_count(last, gate->refusal - 1,
                                   gate->refusal_expected);
        }
    }
    if (!st || !st->api) {
        return DECLINED;
    }
    for (last = r; last->next; last = last->next) {
        ;                           /* the status sent, as %>s logs it */
    }
    op = lessons_metrics_op(r);
    lessons_metrics_add(slot, lessons_metrics_request_id(op, last->status),
                        1);
    /* A Require jwt-claim line refused it (io.c's 403 and LESSONS00206). */
    if (st->denied_claim && last->status == HTTP_FORBIDDEN) {
        lessons_metrics_add(slot, LESSONS_M_REFUSED + LESSONS_REFUSED_SCOPE,
                            1);
        lessons_refusals_count(r, LESSONS_REFUSED_SCOPE, NULL);
    }
    /* A retry given an earlier create's answer wrote nothing. */
    if (last->status >= 200 && last->status < 300
        && (op == LESSONS_OP_CREATE || op == LESSONS_OP_UPDATE
            || op == LESSONS_OP_DELETE)
        && !apr_table_get(last->headers_out, "Idempotent-Replayed")) {
        lessons_metrics_add(slot, LESSONS_M_WRITES + (op - LESSONS_OP_CREATE),
                            1);
    }
    return DECLINED;
}

/* The whole server's figures now. */
static void lessons_metrics_now(request_rec *r, lessons_metrics_sum_t *sum)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);

    lessons_metrics_read(sconf->metrics, lessons_metrics_alive, NULL, sum);
}

/* The read lease's gauges (LessonsDBLease), read from its block now. */
static const char *lessons_metrics_lease(apr_pool_t *p,
                                         const lessons_srv_conf *sconf)
{
    lessons_lease_state_t st;
    lessons_metrics_lease_t m;

    lessons_lease_state(sconf->lease_block, lessons_lease_clock(), &st);
    m.valid = st.valid;
    m.listening = st.listening;
    m.left = st.left;
    m.run = st.run;
    m.length = (apr_interval_time_t)sconf->lease_length_ms * 1000;
    m.others = st.others;
    m.alone_writes = st.alone_writes;
    m.told_writes = st.told_writes;
    m.held_writes = st.held_writes;
    /* The lease's buckets are the metrics' (a size that differs does
     * not compile).
     */
    {
        typedef char lessons_same_waits[sizeof(m.waits) == sizeof(st.waits)
                                        ? 1 : -1];
        (void)sizeof(lessons_same_waits);
    }
    memcpy(m.waits, st.waits, sizeof(m.waits));
    m.wait_bounds = lessons_lease_wait_bounds;
    m.waited = st.waited;
    return lessons_metrics_lease_prometheus(p, &m);
}

int lessons_metrics_handler(request_rec *r)
{
    lessons_srv_conf *sconf;
    lessons_metrics_sum_t sum;
    const char *body;
    apr_size_t len = 0;

    if (!r->handler || strcmp(r->handler, LESSONS_METRICS_HANDLER) != 0) {
        return DECLINED;
    }
    if (r->method_number != M_GET) {        /* HEAD is M_GET too */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00510)
                      "%s: the metrics take GET and HEAD",
                      lessons_refused(r, HTTP_METHOD_NOT_ALLOWED));
        return lessons_send_read_only(r);
    }
    sconf = ap_get_module_config(r->server->module_config, &lessons_module);
    lessons_metrics_now(r, &sum);
    body = lessons_metrics_prometheus(r->pool, &sum,
                                      (const char *const *)
                                      sconf->metrics_sources->elts,
                                      sconf->metrics_sources->nelts,
                                      apr_time_now(), &len);
    if (sconf->lease_block && body) {
        /* The lease is the server's state now, not a count to sum. */
        body = apr_pstrcat(r->pool, apr_pstrmemdup(r->pool, body, len),
                           lessons_metrics_lease(r->pool, sconf), NULL);
        len = strlen(body);
    }
    apr_table_setn(r->headers_out, "Cache-Control", "no-store");
    return lessons_send(r, HTTP_OK, LESSONS_CT_METRICS, body, len);
}

/* mod_status: a section of the page, or "Key: value" lines for ?auto. */
static int lessons_metrics_status(request_rec *r, int flags)
{
    lessons_metrics_sum_t sum;
    const char *text, *line, *end;

    lessons_metrics_now(r, &sum);
    text = lessons_metrics_status_auto(r->pool, &sum);
    if (flags & AP_STATUS_SHORT) {
        ap_rputs(text, r);
        return OK;
    }
    ap_rputs("<hr />\n<h2>mod_lessons</h2>\n<table>\n", r);
    for (line = text; (end = strchr(line, '\n')) != NULL; line = end + 1) {
        const char *colon = memchr(line, ':', (apr_size_t)(end - line));

        if (colon) {
            ap_rprintf(r, "<tr><th align=\"left\">%s</th><td>%s</td></tr>\n",
                       ap_escape_html(r->pool, apr_pstrmemdup(r->pool, line,
                                      (apr_size_t)(colon - line))),
                       ap_escape_html(r->pool, apr_pstrmemdup(r->pool,
                                      colon + 2,
                                      (apr_size_t)(end - colon - 2))));
        }
    }
    ap_rputs("</table>\n<p>The Prometheus form, with every figure: the "
             "lessons-metrics handler.</p>\n", r);
    return OK;
}

void lessons_metrics_register_hooks(void)
{
    APR_OPTIONAL_HOOK(ap, status_hook, lessons_metrics_status, NULL, NULL,
                      APR_HOOK_MIDDLE);
}
