/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_introspect.c: opaque access tokens asked about at the
 * provider's introspection endpoint (RFC 7662; issue 44, part 3), as
 * httpd meets them: the start-up check of LessonsJWTIntrospect and its
 * client, the process's cache of answers (child_init, reached through
 * the server config), and the gate's question (lessons_decide's
 * introspect function).  The request, the answer and how long it is
 * kept are lessons_introspect's; the POST is lessons_fetch's, with the
 * keys URL's kind of bounds: TLS against LessonsJWTKeysCA only (else
 * the system's CAs), LessonsJWTKeysProxy or no proxy, time and size
 * capped, no redirect.
 *
 * Answers are shared by the server's processes as key sets are
 * (lessons_introshare: a table in shared memory made before the fork,
 * kept across restarts, sized by LessonsJWTIntrospectShared): an answer
 * any process had is served by every other until it ends, without
 * asking the provider again.  In front of it each process keeps its own
 * (a lessons_tokencache), which answers a token it met without taking
 * the server-wide lock.  Without the shared table (0, or the memory or
 * its lock could not be had: logged once) each process keeps only its
 * own.  An entry is keyed by SHA-256 of the endpoint, the client and the
 * token: the token itself is neither a key nor kept, nor logged.
 *
 * Where neither has an answer, the provider is asked once per token at a
 * time in a process (lessons_inflight, made in child_init): requests that
 * bring the token meanwhile wait for that answer and take it from the
 * process's cache, or fail as it failed, rather than each asking.
 *
 * A question is asked only within the budget of LessonsJWTIntrospectRate
 * (issue 55, item 4; lessons_introrate): so many a second for the whole
 * server, so many of them for one client (its address, an IPv6 /64).
 * Without it one client sending random strings made one POST with the
 * server's credentials per string, until the provider throttled the
 * server's client and every client's new token got 503.  Now that
 * client gets 429 at once, asking nothing, past its share; many clients
 * past the server's budget get 503; both with Retry-After.  The budget
 * lives in the shared table's block, under its lock, so it is the
 * server's; where answers are not shared each process keeps one of its
 * own (struct lessons_introspect_own), and the bound is per process.
 * Only questions count: answers from either cache, and requests that
 * wait for another's question, cost nothing.  With that, "active":
 * false answers (the flood's) never take an active answer's place in
 * the shared table (lessons_introshare), so the tokens clients hold
 * keep being served from it while someone floods.
 */

#include "httpd/mod_lessons.h"

#include "auth/lessons_introshare.h"
#include "auth/lessons_introspect.h"
#include "base/lessons_digest.h"

#include "apr_shm.h"

#if APR_HAVE_NETINET_IN_H
#include <netinet/in.h>
#endif

#define LESSONS_INTROSPECT_SEEN        "lessons-introspect-seen"
#define LESSONS_INTROSPECT_CONNECT_MS  2000
#define LESSONS_INTROSPECT_TOTAL_MS    5000  /* a request waits this long
                                              * at most for an answer */
#define LESSONS_INTROSPECT_DISCOVER_MS 5000
#define LESSONS_INTROSPECT_RETRY       5     /* seconds between discovery
                                              * attempts that failed */
#define LESSONS_INTROSPECT_ENTRIES     10000 /* answers kept per process */
#define LESSONS_INTROSPECT_SHARED_CAP  2048  /* bytes of one shared answer
                                              * (compact JSON): a longer
                                              * one is kept per process
                                              * only */
#define LESSONS_INTROSPECT_KEPT        "mod_lessons-introspect"
#define LESSONS_INTROSPECT_INFLIGHT    64    /* tokens asked about at once
                                              * with one question each, per
                                              * process; more ask alone */

/* The shared table's memory and lock, made once per httpd run and kept
 * across restarts (as the key sets' are): a graceful restart keeps the
 * answers, and children of the old generation and of the new one share
 * one lock.
 */
typedef struct {
    apr_shm_t *shm;
    apr_global_mutex_t *lock;
    apr_uint32_t entries;
} lessons_introspect_kept;

/* What the server's processes share, set on every server's config by
 * post_config; table is this process's view, from child_init.
 */
struct lessons_introspect_share {
    apr_shm_t *shm;
    apr_global_mutex_t *lock;
    apr_uint32_t entries;
    lessons_introshare_budget_t budget;
    lessons_introshare_t *table;    /* NULL: this process keeps its own
                                     * answers only */
    volatile apr_uint32_t failed;   /* a lookup's lock failed: logged */
};

/* A process's own budget of questions, where answers are not shared;
 * NULL where its lock could not be made (then nothing is asked: 503).
 */
struct lessons_introspect_own {
    void *state;                    /* lessons_introrate's */
    apr_thread_mutex_t *lock;
};

/* LessonsJWTIntrospectRate as in force: the server's rate and one
 * client's part (a LESSONS_INTROSPECT_RATE_SHARE-th by default).
 */
static void lessons_introspect_rates(const lessons_srv_conf *mconf,
                                     apr_uint32_t *rate,
                                     apr_uint32_t *client_rate)
{
    *rate = mconf->introspect_rate > 0
            ? (apr_uint32_t)mconf->introspect_rate
            : LESSONS_INTROSPECT_RATE_DEFAULT;
    *client_rate = mconf->introspect_client_rate > 0
                   ? (apr_uint32_t)mconf->introspect_client_rate
                   : *rate / LESSONS_INTROSPECT_RATE_SHARE;
    if (*client_rate < 1) {
        *client_rate = 1;
    }
}

/* Some section introspects (post_config starts libcurl then). */
void lessons_introspect_note(apr_pool_t *pconf)
{
    apr_pool_userdata_setn((void *)1, LESSONS_INTROSPECT_SEEN, NULL, pconf);
}

int lessons_introspect_configured(apr_pool_t *pconf)
{
    void *seen = NULL;

    apr_pool_userdata_get(&seen, LESSONS_INTROSPECT_SEEN, pconf);
    return seen != NULL;
}

/* A section's own introspection settings at start-up: an endpoint and
 * a client, both; discover only beside an https:// LessonsJWTIssuer in
 * the same section; never beside <LessonsJWTIssuer> blocks (no one
 * provider to ask).  Takes the section's CA and proxy.  OK, or !OK
 * after an emerg line.
 */
int lessons_introspect_check(apr_pool_t *ptemp, lessons_dir_conf *c)
{
    lessons_introspect_src *src = c->introspect;
    const char *err = NULL;

    if (!src || src->section != c) {
        return OK;
    }
    if (!src->where) {
        err = apr_psprintf(ptemp, "%s: LessonsJWTIntrospectClient without "
                           "LessonsJWTIntrospect in the same section",
                           src->client_where);
    }
    else if (!src->client_id || !src->secret) {
        err = apr_psprintf(ptemp, "%s: LessonsJWTIntrospect needs "
                           "LessonsJWTIntrospectClient ID SECRET-FILE in the "
                           "same section: the endpoint answers "
                           "authenticated clients only (RFC 7662 2.1)",
                           src->where);
    }
    else if (c->issuers) {
        err = apr_psprintf(ptemp, "%s: LessonsJWTIntrospect beside "
                           "<LessonsJWTIssuer> blocks: an opaque token names "
                           "no issuer, so there is no one provider to ask",
                           src->where);
    }
    else if (!src->url && (!c->issuer
                           || lessons_discovery_check_issuer(ptemp,
                                                             c->issuer))) {
        err = apr_psprintf(ptemp, "%s: LessonsJWTIntrospect discover needs "
                           "an https:// LessonsJWTIssuer in the same "
                           "section, whose metadata names the endpoint",
                           src->where);
    }
    if (err) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     LESSONSLOG(00744) "%s", err);
        return !OK;
    }
    src->issuer = c->issuer;
    src->ca_pem = c->keys_ca_pem;
    src->ca_len = c->keys_ca_len;
    src->proxy = c->keys_proxy;
    return OK;
}

int lessons_introspect_pre_config(apr_pool_t *pconf)
{
    return ap_mutex_register(pconf, LESSONS_INTROSPECT_MUTEX, NULL,
                             APR_LOCK_DEFAULT, 0) == APR_SUCCESS ? OK : !OK;
}

/* The shared table and its lock, where some section introspects and
 * LessonsJWTIntrospectShared is not 0: kept across restarts, made anew
 * when its size changed.  What cannot be made leaves each process its
 * own answers, said once here: never a reason not to start.
 */
int lessons_introspect_post_config(apr_pool_t *pconf, server_rec *s)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    struct lessons_introspect_share *share = NULL;
    lessons_introspect_kept *kept;
    lessons_introshare_budget_t budget;
    apr_uint32_t entries;
    apr_size_t size;
    apr_status_t rv;
    int fresh = 0;

    if (!lessons_introspect_configured(pconf)
        || ap_state_query(AP_SQ_MAIN_STATE) == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    memset(&budget, 0, sizeof(budget));
    lessons_introspect_rates(mconf, &budget.rate, &budget.client_rate);
    budget.now = apr_time_now();
    if (apr_generate_random_bytes((unsigned char *)&budget.seed,
                                  sizeof(budget.seed)) != APR_SUCCESS) {
        budget.seed = (apr_uint64_t)budget.now;
    }
    entries = mconf->introspect_shared >= 0
              ? (apr_uint32_t)mconf->introspect_shared
              : LESSONS_INTROSPECT_SHARED_DEFAULT;
    if (entries == 0) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s, LESSONSLOG(00746)
                     "introspection answers: not shared "
                     "(LessonsJWTIntrospectShared 0): each process asks "
                     "for itself");
        goto done;
    }
    size = lessons_introshare_size(entries, LESSONS_INTROSPECT_SHARED_CAP);
    kept = ap_retained_data_get(LESSONS_INTROSPECT_KEPT);
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_INTROSPECT_KEPT,
                                       sizeof(*kept));
    }
    rv = lessons_kept_mutex(&kept->lock, LESSONS_INTROSPECT_MUTEX, s);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s, LESSONSLOG(00747)
                     "introspection answers: cannot make the lock of the "
                     "shared table; each process keeps its own answers and "
                     "asks for itself");
        goto done;
    }
    if (kept->shm && kept->entries != entries) {
        apr_shm_destroy(kept->shm);
        kept->shm = NULL;
    }
    if (!kept->shm) {
        rv = size ? apr_shm_create(&kept->shm, size, NULL, s->process->pool)
                  : APR_EINVAL;
        if (rv != APR_SUCCESS) {
            kept->shm = NULL;
            ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s, LESSONSLOG(00747)
                         "introspection answers: cannot make the shared "
                         "memory of %u entries (%" APR_SIZE_T_FMT " bytes); "
                         "each process keeps its own answers and asks for "
                         "itself", entries, size);
            goto done;
        }
        kept->entries = entries;
        fresh = 1;
    }
    /* Laid out here, before any child: a child only attaches. */
    if (!lessons_introshare_attach(apr_shm_baseaddr_get(kept->shm),
                                   apr_shm_size_get(kept->shm), entries,
                                   LESSONS_INTROSPECT_SHARED_CAP, &budget,
                                   fresh, kept->lock, pconf)) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, LESSONSLOG(00747)
                     "introspection answers: cannot lay out the shared "
                     "table; each process keeps its own answers");
        goto done;
    }
    share = apr_pcalloc(pconf, sizeof(*share));
    share->shm = kept->shm;
    share->lock = kept->lock;
    share->entries = entries;
    share->budget = budget;
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s, LESSONSLOG(00748)
                 "introspection answers: %u shared entries of at most %d "
                 "bytes (%" APR_SIZE_T_FMT " bytes), %s", entries,
                 LESSONS_INTROSPECT_SHARED_CAP, size,
                 fresh ? "new" : "kept from before");
done:
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, s, LESSONSLOG(00772)
                 "introspection: at most %u questions a second to the "
                 "provider, %u of them for one client (LessonsJWTIntrospect"
                 "Rate), %s", budget.rate, budget.client_rate,
                 share ? "for the whole server" : "for each process");
    for (; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->introspect_share = share;
    }
    return OK;
}

/* This process's view of the shared table, if there is one. */
static void lessons_introspect_share_open(apr_pool_t *pchild, server_rec *s)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    struct lessons_introspect_share *share = mconf->introspect_share;
    apr_global_mutex_t *lock;
    apr_status_t rv;

    if (!share) {
        return;
    }
    lock = share->lock;
    rv = apr_global_mutex_child_init(&lock, apr_global_mutex_lockfile(lock),
                                     pchild);
    if (rv == APR_SUCCESS) {
        share->table = lessons_introshare_attach(
            apr_shm_baseaddr_get(share->shm), apr_shm_size_get(share->shm),
            share->entries, LESSONS_INTROSPECT_SHARED_CAP, &share->budget, 0,
            lock, pchild);
    }
    if (!share->table) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s, LESSONSLOG(00749)
                     "introspection answers: this process cannot open the "
                     "shared table; it keeps its own answers and asks for "
                     "itself");
    }
}

/* Where the server's table is not open here, the process's own budget;
 * NULL (nothing asked, 503, said once here) when its lock cannot be
 * made, never an unbounded provider.
 */
static struct lessons_introspect_own *lessons_introspect_own_make(
    apr_pool_t *pchild, server_rec *s)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(s->module_config, &lessons_module);
    struct lessons_introspect_own *own = apr_pcalloc(pchild, sizeof(*own));
    apr_uint32_t rate, client_rate;

    if (mconf->introspect_share && mconf->introspect_share->table) {
        return NULL;
    }
    lessons_introspect_rates(mconf, &rate, &client_rate);
    own->state = apr_pcalloc(pchild, lessons_introrate_size());
    if (lessons_introrate_setup(own->state, rate, client_rate,
                                (apr_uint64_t)getpid(), apr_time_now(), 1)
        != 0
        || apr_thread_mutex_create(&own->lock, APR_THREAD_MUTEX_DEFAULT,
                                   pchild) != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, LESSONSLOG(00773)
                     "introspection: this process cannot make its budget "
                     "of questions; it asks the provider nothing (503)");
        return NULL;
    }
    return own;
}

static apr_status_t lessons_introspect_md_free(void *md)
{
    EVP_MD_free(md);
    return APR_SUCCESS;
}

/* Every section's own record, on each server. */
void lessons_introspect_child_init(apr_pool_t *pchild, server_rec *s)
{
    lessons_tokencache_t *cache = NULL;
    lessons_inflight_t *inflight = NULL;
    struct lessons_introspect_own *own = NULL;
    EVP_MD *sha256 = NULL;
    server_rec *v;
    int i, any = 0;

    for (v = s; v; v = v->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(v->module_config, &lessons_module);

        for (i = 0; i < sconf->sections->nelts; i++) {
            lessons_dir_conf *c = APR_ARRAY_IDX(sconf->sections, i,
                                                lessons_dir_conf *);
            lessons_introspect_src *src = c->introspect;

            if (!src || src->section != c) {
                continue;
            }
            any = 1;
            if (apr_thread_mutex_create(&src->lock, APR_THREAD_MUTEX_DEFAULT,
                                        pchild) != APR_SUCCESS) {
                /* Without it nothing is discovered: every opaque token
                 * there is 503, never let through.
                 */
                src->lock = NULL;
            }
        }
    }
    if (any) {
        cache = lessons_tokencache_make(pchild, LESSONS_INTROSPECT_ENTRIES);
        lessons_introspect_share_open(pchild, s);
        own = lessons_introspect_own_make(pchild, s);
        /* Without it each request asks for itself, as before. */
        inflight = lessons_inflight_make(pchild, LESSONS_INTROSPECT_INFLIGHT);
        if (!inflight) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s, LESSONSLOG(00753)
                         "introspection: this process cannot make its table "
                         "of questions on their way; each request asks the "
                         "provider for itself");
        }
        /* Without it each digest fetches its own: slower, as safe. */
        sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
        if (sha256) {
            apr_pool_cleanup_register(pchild, sha256,
                                      lessons_introspect_md_free,
                                      apr_pool_cleanup_null);
        }
    }
    for (v = s; v; v = v->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(v->module_config, &lessons_module);

        sconf->introspected = cache;
        sconf->introspect_sha256 = sha256;
        sconf->introspect_inflight = inflight;
        sconf->introspect_own = own;
    }
}

/* What the gate's question needs. */
typedef struct {
    request_rec *r;
    lessons_introspect_src *src;
    lessons_tokencache_t *cache;
    lessons_inflight_t *inflight;   /* the process's, or NULL */
    const EVP_MD *sha256;           /* the process's, or NULL */
    struct lessons_introspect_share *share;     /* or NULL */
    struct lessons_introspect_own *own;     /* or NULL */
    long cache_max;                 /* seconds */
    unsigned char client[LESSONS_INTRORATE_CLIENT_LEN];  /* who asks */
} lessons_introspect_ask_t;

/* The endpoint to ask: the configured one, or the issuer's metadata's
 * (fetched once per process, again at most every
 * LESSONS_INTROSPECT_RETRY seconds while it fails).  NULL with *why.
 */
static const char *lessons_introspect_endpoint(lessons_introspect_ask_t *a,
                                               const char **why)
{
    lessons_introspect_src *src = a->src;
    const char *endpoint = NULL, *err;
    apr_time_t now = apr_time_now();

    if (src->url) {
        return src->url;
    }
    if (!src->lock) {
        *why = "the process could not make the discovery's lock";
        return NULL;
    }
    apr_thread_mutex_lock(src->lock);
    if (src->endpoint) {
        endpoint = src->endpoint;
    }
    else if (src->failed
             && now - src->failed
                < apr_time_from_sec(LESSONS_INTROSPECT_RETRY)) {
        *why = apr_psprintf(a->r->pool, "the issuer's metadata could not "
                            "be read %" APR_TIME_T_FMT " s ago (retried "
                            "every %d s)", apr_time_sec(now - src->failed),
                            LESSONS_INTROSPECT_RETRY);
    }
    else {
        memset(&src->discovery, 0, sizeof(src->discovery));
        src->discovery.fetch.url = src->issuer;
        src->discovery.fetch.ca_pem = src->ca_pem;
        src->discovery.fetch.ca_len = src->ca_len;
        src->discovery.fetch.proxy = src->proxy;
        src->discovery.fetch.connect_timeout_ms = LESSONS_INTROSPECT_CONNECT_MS;
        src->discovery.fetch.total_timeout_ms = LESSONS_INTROSPECT_DISCOVER_MS;
        src->discovery.fetch.max_redirects = 3;
        err = lessons_discovery_introspection(&src->discovery, a->r->pool,
                                              &endpoint);
        if (err) {
            src->failed = now;
            endpoint = NULL;
            *why = apr_pstrcat(a->r->pool, "discovery: ", err, NULL);
        }
        else {
            /* No allocation from the child's pool on a request's
             * thread: the endpoint (at most LESSONS_DISCOVERY_URI_MAX
             * bytes, lessons_discovery took no longer) is kept in place.
             */
            apr_cpystrn(src->endpoint_buf, endpoint,
                        sizeof(src->endpoint_buf));
            src->endpoint = endpoint = src->endpoint_buf;
            src->failed = 0;
            ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, a->r, LESSONSLOG(00745)
                          "issuer %s: introspection endpoint %s (from its "
                          "metadata)", src->issuer, endpoint);
        }
    }
    apr_thread_mutex_unlock(src->lock);
    return endpoint;
}

/* The shared table's lock failed in this process: said once; the
 * process goes on with its own answers and the provider.
 */
static void lessons_introspect_share_failed(lessons_introspect_ask_t *a)
{
    if (apr_atomic_cas32(&a->share->failed, 1, 0) == 0) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, a->r, LESSONSLOG(00750)
                      "introspection answers: the shared table's lock "
                      "failed; this process asks the provider for what "
                      "the table would have answered");
    }
}

/* Keep an answer (compact JSON, len bytes, and parsed, what it decodes
 * to, or NULL), had at stored, until until: in this process (decoded,
 * where parsed is given: a hit then decodes nothing), and where shared,
 * in the server's table (as text).  The entry's iat holds stored, for
 * the bound of a section that asks later.
 */
static void lessons_introspect_keep(lessons_introspect_ask_t *a,
                                    const unsigned char *key,
                                    const char *name, const char *answer,
                                    apr_size_t len, json_t *parsed,
                                    apr_int64_t now, apr_int64_t stored,
                                    apr_int64_t until, int shared,
                                    int inactive)
{
    lessons_tokencache_claims_t kept;

    memset(&kept, 0, sizeof(kept));
    kept.payload = answer;
    kept.payload_len = len;
    kept.parsed = parsed;
    kept.exp = (double)until;
    kept.iat = (double)stored;
    kept.has_iat = 1;
    lessons_tokencache_put(a->cache, key, name, strlen(name), &kept,
                           (double)until);
    if (!shared || !a->share || !a->share->table) {
        return;
    }
    switch (lessons_introshare_put(a->share->table, key, now, until, answer,
                                   len, inactive)) {
    case LESSONS_INTROSHARE_TOO_BIG:
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, a->r, LESSONSLOG(00751)
                      "introspection answer %.16s...: %" APR_SIZE_T_FMT
                      " bytes, over the shared table's %d: not shared, "
                      "kept in this process only", name, len,
                      LESSONS_INTROSPECT_SHARED_CAP);
        break;
    case LESSONS_INTROSHARE_LOCK_FAILED:
        lessons_introspect_share_failed(a);
        break;
    default:
        break;
    }
}

/* The process's cache: an answer for key kept within this section's
 * bound puts the reading in out; 1 then, else 0.
 */
static int lessons_introspect_cached(lessons_introspect_ask_t *a,
                                     apr_pool_t *p, const unsigned char *key,
                                     const char *name, apr_int64_t now,
                                     lessons_decide_introspection_t *out)
{
    lessons_tokencache_claims_t kept;
    int got;

    memset(&kept, 0, sizeof(kept));
    got = lessons_tokencache_get(a->cache, p, key, name, strlen(name),
                                 (double)now, &kept);
    lessons_json_pool_own(p, kept.parsed);
    if (got && (kept.parsed || kept.payload) && (double)now < kept.exp
        && kept.has_iat && (double)now < kept.iat + (double)a->cache_max) {
        out->rc = kept.parsed
                  ? lessons_introspect_read(kept.parsed, &out->res)
                  : lessons_introspect_parse(p, kept.payload,
                                             kept.payload_len, &out->res);
        return 1;
    }
    return 0;
}

/* The provider's answer about token: read into out and kept while
 * lessons_introspect_cache_until says (*kept then set).  0, or -1 with
 * out->why.
 */
static int lessons_introspect_provider(lessons_introspect_ask_t *a,
                                       apr_pool_t *p, const char *token,
                                       const unsigned char *key,
                                       const char *name, apr_int64_t now,
                                       lessons_decide_introspection_t *out,
                                       int *kept)
{
    lessons_introspect_src *src = a->src;
    lessons_introspect_request_t req;
    lessons_fetch_opts_t opts;
    const char *err, *answer;
    char *body = NULL;
    apr_size_t len = 0, alen = 0;
    apr_int64_t until;
    long status = 0;

    *kept = 0;
    err = lessons_introspect_request(p, token, strlen(token), src->client_id,
                                     src->secret, &req);
    if (err) {
        out->why = err;
        return -1;
    }
    memset(&opts, 0, sizeof(opts));
    opts.url = out->endpoint;
    opts.ca_pem = src->ca_pem;
    opts.ca_len = src->ca_len;
    opts.proxy = src->proxy;
    opts.connect_timeout_ms = LESSONS_INTROSPECT_CONNECT_MS;
    opts.total_timeout_ms = LESSONS_INTROSPECT_TOTAL_MS;
    opts.max_bytes = LESSONS_INTROSPECT_BODY_MAX;
    opts.max_redirects = 0;
    opts.allow_http = src->allow_http;
    err = lessons_fetch_post(p, &opts, req.body, req.body_len,
                             req.authorization, &body, &len, &status);
    if (err) {
        if (status == 401) {
            out->why = apr_pstrcat(p, err, " (the client id and secret of ",
                                   src->client_where, " were refused)",
                                   NULL);
        }
        else if (status == 400) {
            /* RFC 7662 has no 400 for a token it cannot read (it answers
             * inactive), but providers do: oidc-provider's
             * unsupported_token_type for every JWT.  err carries the
             * answer's own error code when it gave one.
             */
            out->why = apr_pstrcat(p, err,
                                   strstr(err, "\"unsupported_token_type\"")
                                   ? " (the provider does not introspect "
                                     "this kind of token: for JWTs, leave "
                                     "LessonsJWTIntrospectJWT off behind it)"
                                   : " (the provider would not answer about "
                                     "this token, as oidc-provider's 400 "
                                     "unsupported_token_type does for a "
                                     "JWT: behind such a provider, leave "
                                     "LessonsJWTIntrospectJWT off)", NULL);
        }
        else {
            out->why = err;
        }
        return -1;
    }
    out->rc = lessons_introspect_parse(p, body, len, &out->res);
    until = lessons_introspect_cache_until(
        lessons_introspect_judge(out->rc, &out->res, now, 0), &out->res, now,
        a->cache_max);
    if (until > now) {
        /* What is kept is what was read: the claims' object (before the
         * gate adds to it), or for a token not active, only that.
         */
        if (out->rc == LESSONS_INTROSPECT_INACTIVE) {
            answer = "{\"active\":false}";
            alen = strlen(answer);
        }
        else {
            answer = lessons_json_dump(p, out->res.claims, &alen);
        }
        if (answer) {
            lessons_introspect_keep(a, key, name, answer, alen,
                                    out->res.claims, now, now, until, 1,
                                    out->rc == LESSONS_INTROSPECT_INACTIVE);
            *kept = 1;
        }
    }
    return 0;
}

/* May this request's client have a question asked now (lessons_
 * introrate: the server's table, else the process's own budget)?  0:
 * ask; -1 with out->over (or only out->why: the budget could not be
 * read) and out->retry_after: ask nothing.
 */
static int lessons_introspect_admit(lessons_introspect_ask_t *a,
                                    lessons_decide_introspection_t *out)
{
    int rc = -1, retry = 0;

    if (a->share && a->share->table) {
        rc = lessons_introshare_take(a->share->table, a->client,
                                     apr_time_now(), &retry);
        if (rc < 0) {
            lessons_introspect_share_failed(a);
        }
    }
    else if (a->own) {
        apr_thread_mutex_lock(a->own->lock);
        rc = (int)lessons_introrate_take(a->own->state, a->client,
                                         apr_time_now(), &retry);
        apr_thread_mutex_unlock(a->own->lock);
    }
    switch (rc) {
    case LESSONS_INTRORATE_ASK:
        return 0;
    case LESSONS_INTRORATE_CLIENT_OVER:
        out->over = LESSONS_DECIDE_OVER_CLIENT;
        out->why = apr_psprintf(a->r->pool, "client %s has used its share "
                                "of LessonsJWTIntrospectRate",
                                a->r->useragent_ip);
        break;
    case LESSONS_INTRORATE_SERVER_OVER:
        out->over = LESSONS_DECIDE_OVER_SERVER;
        out->why = "the server has used its LessonsJWTIntrospectRate "
                   "budget";
        break;
    default:
        out->why = "the budget of questions (LessonsJWTIntrospectRate) "
                   "could not be read";
        break;
    }
    out->retry_after = retry;
    return -1;
}

/* Another request of this process may be asking about key now: wait for
 * it (until this request's own bound on the provider's answer) and take
 * how it went.  1: out holds the answer it kept; -1: its ask failed (out
 * ->why), so does this one, without a burst at a provider that is down;
 * 0: ask, leading where *slot >= 0 (land it).
 */
static int lessons_introspect_follow(lessons_introspect_ask_t *a,
                                     apr_pool_t *p, const unsigned char *key,
                                     const char *name, apr_int64_t now,
                                     lessons_decide_introspection_t *out,
                                     int *slot)
{
    apr_time_t deadline = apr_time_now()
                          + apr_time_from_msec(LESSONS_INTROSPECT_TOTAL_MS);

    switch (lessons_inflight_join(a->inflight, key, deadline, slot)) {
    case LESSONS_INFLIGHT_KEPT:
        if (lessons_introspect_cached(a, p, key, name, now, out)) {
            ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, a->r, LESSONSLOG(00754)
                          "introspection answer %.16s...: the one another "
                          "request of this process just had", name);
            return 1;
        }
        /* Gone from the cache meanwhile, or past this section's bound. */
        return 0;
    case LESSONS_INFLIGHT_FAILED:
        out->why = "another request asking about the same token at the "
                   "same time had no answer";
        return -1;
    case LESSONS_INFLIGHT_LATE:
        out->why = apr_psprintf(p, "another request asking about the same "
                                "token had no answer within %d ms",
                                LESSONS_INTROSPECT_TOTAL_MS);
        return -1;
    default:
        return 0;
    }
}

/* lessons_decide_introspect_fn: the process's cache, else the server's
 * shared table, else the provider, asked once at a time per token in
 * this process (lessons_inflight).  An answer is kept while
 * lessons_introspect_cache_until says: decoded in this process (a hit
 * shares the object, read-only), as compact JSON in the table; the
 * entry's exp holds that time.  One endpoint and client may serve
 * sections of different LessonsJWTIntrospectCacheMax (one key): an
 * answer is served to a section only within its own bound from when it
 * was had.
 */
static int lessons_introspect_ask(void *baton, apr_pool_t *p,
                                  const char *token, apr_int64_t now,
                                  lessons_decide_introspection_t *out)
{
    lessons_introspect_ask_t *a = baton;
    lessons_introspect_src *src = a->src;
    unsigned char key[LESSONS_INTROSPECT_KEY_LEN];
    const char *name, *why = NULL, *answer;
    apr_size_t alen = 0;
    apr_int64_t until, stored;
    int got, rc, kept, slot = -1;

    out->endpoint = lessons_introspect_endpoint(a, &why);
    if (!out->endpoint) {
        out->endpoint = src->issuer;
        out->why = why;
        return -1;
    }
    if (lessons_introspect_key(a->sha256, out->endpoint, src->client_id,
                               token,
                               strlen(token), key) != 0) {
        out->why = "the token's digest could not be made";
        return -1;
    }
    name = lessons_digest_hex(p, key, sizeof(key));
    if (lessons_introspect_cached(a, p, key, name, now, out)) {
        return 0;
    }
    if (a->share && a->share->table) {
        got = lessons_introshare_get(a->share->table, key, now, a->cache_max,
                                     p, &answer, &alen, &until, &stored);
        if (got < 0) {
            lessons_introspect_share_failed(a);
        }
        else if (got > 0) {
            ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, a->r, LESSONSLOG(00752)
                          "introspection answer %.16s...: from the server's "
                          "shared table, for %" APR_INT64_T_FMT " s more",
                          name, until - now);
            out->rc = lessons_introspect_parse(p, answer, alen, &out->res);
            lessons_introspect_keep(a, key, name, answer, alen,
                                    out->res.claims, now, stored, until, 0,
                                    out->rc == LESSONS_INTROSPECT_INACTIVE);
            return 0;
        }
    }
    rc = lessons_introspect_follow(a, p, key, name, now, out, &slot);
    if (rc != 0) {
        return rc > 0 ? 0 : -1;
    }
    if (lessons_introspect_admit(a, out) != 0) {
        /* Those waiting for this question ask for themselves, each
         * within its own client's share.
         */
        if (slot >= 0) {
            lessons_inflight_land(a->inflight, slot, LESSONS_INFLIGHT_ALONE);
        }
        return -1;
    }
    rc = lessons_introspect_provider(a, p, token, key, name, now, out, &kept);
    if (slot >= 0) {
        lessons_inflight_land(a->inflight, slot,
                              rc != 0 ? LESSONS_INFLIGHT_FAILED
                              : kept ? LESSONS_INFLIGHT_KEPT
                              : LESSONS_INFLIGHT_ALONE);
    }
    return rc;
}

/* Who the request's client is, for its share of the questions: the
 * address it came from (mod_remoteip's, behind a proxy), an IPv4 one
 * as an IPv4-mapped IPv6 address, an IPv6 one as its /64 (a host has
 * a whole /64 to pick from).
 */
static void lessons_introspect_client(request_rec *r, unsigned char *out)
{
    const apr_sockaddr_t *sa = r->useragent_addr;

    memset(out, 0, LESSONS_INTRORATE_CLIENT_LEN);
    if (!sa) {
        return;
    }
#if APR_HAVE_IPV6
    if (sa->family == AF_INET6) {
        const unsigned char *b =
            (const unsigned char *)&sa->sa.sin6.sin6_addr;

        if (IN6_IS_ADDR_V4MAPPED(&sa->sa.sin6.sin6_addr)) {
            memcpy(out, b, LESSONS_INTRORATE_CLIENT_LEN);
        }
        else {
            memcpy(out, b, 8);
        }
        return;
    }
#endif
    if (sa->family == AF_INET) {
        out[10] = 0xff;
        out[11] = 0xff;
        memcpy(out + 12, &sa->sa.sin.sin_addr, 4);
    }
}

/* Where the merged section introspects, the gate's question. */
void lessons_introspect_policy(request_rec *r, const lessons_dir_conf *conf,
                               lessons_decide_policy_t *policy)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    lessons_introspect_ask_t *a;

    if (!conf->introspect || !conf->introspect->where) {
        return;
    }
    a = apr_pcalloc(r->pool, sizeof(*a));
    a->r = r;
    a->src = conf->introspect;
    a->cache = sconf->introspected;
    a->sha256 = sconf->introspect_sha256;
    a->inflight = sconf->introspect_inflight;
    a->share = sconf->introspect_share;
    a->own = sconf->introspect_own;
    lessons_introspect_client(r, a->client);
    a->cache_max = conf->introspect_cache_max > 0
                   ? conf->introspect_cache_max
                   : LESSONS_INTROSPECT_CACHE_DEFAULT;
    policy->introspect = lessons_introspect_ask;
    policy->introspect_baton = a;
    policy->introspect_jwt = conf->introspect_jwt == 2;
}
