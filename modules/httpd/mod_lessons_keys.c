/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_keys.c: keys from an identity provider's JWKS URL
 * (LessonsJWTKeysURL), or from the jwks_uri its metadata names
 * (LessonsJWTIssuer with no key: lessons_discovery), as httpd meets them:
 * one source per section that names a URL or issuer, with that section's
 * own trust (its CA file or the system's CAs, its proxy or none, its
 * algorithms); sources alike in all of these fetch once (the later point
 * at the first, lessons_keys_share_alike), so that a virtual host never
 * fetches through another's proxy nor trusts another's CA.  Each is
 * started in each process (child_init), and a request's policy takes
 * the source's current set.  The fetcher itself (thread, last good set, refetch limit,
 * holds) is lessons_keysource.c; here it gets its settings and its log
 * lines.
 */

#include <openssl/evp.h>

#include "httpd/mod_lessons.h"
#include "http_main.h"                 /* ap_server_conf */

#include "keys/lessons_keysource.h"
#include "keys/lessons_keyshare.h"
#include "keys/lessons_keytrust.h"

#include "apr_shm.h"

#define LESSONS_KEYS_SOURCES      "lessons-keys-sources"
#define LESSONS_KEYS_CONNECT_MS   5000
#define LESSONS_KEYS_TOTAL_MS     10000
#define LESSONS_KEYS_REDIRECTS    3
#define LESSONS_KEYS_REFRESH      3600  /* seconds */
#define LESSONS_KEYS_MIN_REFRESH  60
#define LESSONS_KEYS_MAX_WAITERS  8     /* requests of a process that wait
                                         * on one URL's fetch; the rest
                                         * are answered at once */
#define LESSONS_KEYS_KEPT         "mod_lessons-keys"
#define LESSONS_KEYS_SHARED_CAP   (64 * 1024)   /* a source's JWKS in the
                                         * shared block: over it, refused
                                         * (LESSONS00211) */
#define LESSONS_KEYS_MIN_SLOTS    8     /* room to add sources without a
                                         * new block at the next restart */

/* The server's shared key set documents (lessons_keyshare), made once
 * per httpd run and kept across restarts with their lock, as the
 * metrics' block is: a reload keeps the sets, their schedule and the
 * unknown-kid allowance, and the children of the old generation and of
 * the new one share one lock.
 */
typedef struct {
    apr_shm_t *shm;
    apr_global_mutex_t *lock;
    int nslots;
} lessons_keys_kept;

struct lessons_keys_src {
    const char *url;                /* the keys URL, or the issuer */
    const char *label;              /* how the log names it */
    int discover;                   /* url is an issuer: its metadata
                                     * names the keys URL */
    int used;                       /* some section may take its keys (an
                                     * issuer beside a key file never
                                     * does): else no fetcher at all */
    int eager;                      /* some section surely takes its keys:
                                     * the first fetch at child start
                                     * (else at the first request that
                                     * needs them) */
    int bare;                       /* some section takes its keys with no
                                     * key file beside them: it answers
                                     * 503 while there is no set (the
                                     * health check asks these) */
    const lessons_dir_conf *owner;  /* the section whose settings these
                                     * are (configure), NULL: none yet */
    lessons_keys_src *same;         /* an earlier source alike in all
                                     * that decides its fetch and trust,
                                     * which fetches for this one; NULL:
                                     * it fetches for itself */
    const char *ca;                 /* LessonsJWTKeysCA's path, or NULL:
                                     * the system's CAs */
    const char *proxy;              /* LessonsJWTKeysProxy, or NULL:
                                     * straight to the provider */
    const char *ca_pem;             /* ... its certificates, read at
                                     * start-up (as root) */
    apr_size_t ca_len;
    lessons_algs_t algs;            /* what every key must fit (its
                                     * section's algorithms) */
    int refresh, min_refresh;       /* seconds */
    server_rec *s;                  /* for log lines */
    const char *metrics_name;       /* how the metrics name it: the URL,
                                     * with its section where another
                                     * source fetches the same URL */
    int metrics_source;             /* its index in the metrics, -1: none */
    int slot;                       /* its slot in the shared block (from
                                     * post_config), -1: none */
    unsigned char id[LESSONS_KEYSHARE_ID_LEN];  /* its identity there */

    /* Per process, from child_init: NULL when it could not start. */
    lessons_keysource_url_t fetch;
    lessons_discovery_t discovery;  /* (discover) */
    lessons_keysource_t *live;
    unsigned char in_use[LESSONS_KEYSET_DIGEST_LEN];    /* the set in use,
                                     * by its digest (has_in_use), for the
                                     * metrics' "installed" time */
    int has_in_use;
    volatile apr_uint32_t unhealthy;    /* the health check has logged
                                     * that this source fails it */
};

/* Every source of the configuration, kept on pconf (no globals). */
apr_array_header_t *lessons_keys_sources(apr_pool_t *pconf)
{
    void *data = NULL;
    apr_array_header_t *list;

    apr_pool_userdata_get(&data, LESSONS_KEYS_SOURCES, pconf);
    if (data) {
        return data;
    }
    list = apr_array_make(pconf, 2, sizeof(lessons_keys_src *));
    apr_pool_userdata_set(list, LESSONS_KEYS_SOURCES, apr_pool_cleanup_null,
                          pconf);
    return list;
}

/* A source for the URL (or issuer) a section names: each directive gets
 * its own, configured by its own section alone; which of them can share
 * a fetch is decided once every section is known (share_alike).
 */
lessons_keys_src *lessons_keys_src_get(cmd_parms *cmd, const char *url,
                                       int discover)
{
    apr_array_header_t *list = lessons_keys_sources(cmd->pool);
    lessons_keys_src *src;

    src = apr_pcalloc(cmd->pool, sizeof(*src));
    src->metrics_source = -1;
    src->slot = -1;
    src->url = apr_pstrdup(cmd->pool, url);
    src->discover = discover;
    src->label = apr_pstrcat(cmd->pool, discover ? "issuer " : "keys URL ",
                             url, NULL);
    src->s = cmd->server;
    APR_ARRAY_PUSH(list, lessons_keys_src *) = src;
    return src;
}

/* The source that fetches for src: itself, or the earlier one alike. */
static lessons_keys_src *lessons_keys_fetcher(lessons_keys_src *src)
{
    return src->same ? src->same : src;
}

/* The issuer a discovered source's keys are for (NULL for a keys URL):
 * they never verify a token naming another.
 */
const char *lessons_keys_src_issuer(const lessons_keys_src *src)
{
    return src && src->discover ? src->url : NULL;
}

/* How a source is named in the log. */
const char *lessons_keys_src_label(const lessons_keys_src *src)
{
    return src->label;
}

/* The section (or block) that named the source gives its settings, at
 * start-up: its CA file (or none: the system's CAs), its proxy (or none:
 * direct), its algorithms, its intervals; eager when it surely takes
 * these keys.  Nothing of another section's is ever merged in: a source
 * is what its own section says.
 */
const char *lessons_keys_src_configure(apr_pool_t *p, lessons_keys_src *src,
                                       const lessons_dir_conf *conf,
                                       lessons_algs_t algs, int eager)
{
    if (src->owner && src->owner != conf) {
        /* Never met: a directive's source belongs to its section. */
        return apr_psprintf(p, "%s: %s is configured by two sections",
                            conf->keys_where ? conf->keys_where
                                             : conf->jwt_where,
                            lessons_keys_src_label(src));
    }
    src->owner = conf;
    src->ca = conf->keys_ca;
    src->ca_pem = conf->keys_ca_pem;
    src->ca_len = conf->keys_ca_len;
    src->proxy = conf->keys_proxy;
    src->refresh = conf->keys_refresh;
    src->min_refresh = conf->keys_min_refresh;
    src->algs |= algs;
    src->used = 1;
    src->eager |= eager;
    src->bare |= !conf->keyset;
    return NULL;
}

/* Each source's index in the metrics (post_config, in the parent, after
 * share_alike), and their names as the metrics give them, for the
 * handler: those that fetch, by their metrics name.
 */
apr_array_header_t *lessons_keys_metrics(apr_pool_t *p,
                                         apr_array_header_t *sources,
                                         lessons_metrics_t *m)
{
    apr_array_header_t *names = apr_array_make(p, sources->nelts + 1,
                                               sizeof(const char *));
    int i;

    for (i = 0; i < sources->nelts; i++) {
        lessons_keys_src *src = APR_ARRAY_IDX(sources, i, lessons_keys_src *);

        if (src->used) {
            APR_ARRAY_PUSH(names, const char *) = src->metrics_name;
        }
    }
    for (i = 0; i < sources->nelts; i++) {
        lessons_keys_src *src = APR_ARRAY_IDX(sources, i, lessons_keys_src *);

        if (src->used) {
            src->metrics_source = lessons_metrics_source(
                m, src->metrics_name, (const char *const *)names->elts,
                names->nelts);
        }
    }
    return names;
}

static int lessons_keys_refresh(const lessons_keys_src *src)
{
    return src->refresh ? src->refresh : LESSONS_KEYS_REFRESH;
}

/* In seconds, as the source keeps it (at most the refresh). */
static int lessons_keys_min_refresh(const lessons_keys_src *src)
{
    int min = src->min_refresh ? src->min_refresh : LESSONS_KEYS_MIN_REFRESH;

    return (int)apr_time_sec(lessons_keysource_min_refresh(
        apr_time_from_sec(lessons_keys_refresh(src)),
        apr_time_from_sec(min)));
}

/* The kids of a set, for the log. */
static const char *lessons_keys_kids(apr_pool_t *p,
                                     const lessons_keyset_t *set)
{
    const char *kids = "";
    int i;

    for (i = 0; i < set->nkeys; i++) {
        kids = apr_pstrcat(p, kids, i ? ", " : "",
                           set->keys[i].kid ? set->keys[i].kid : "(no kid)",
                           NULL);
    }
    return kids;
}

/* The fetcher's reports, as log lines. */
static void lessons_keys_report(void *baton, const lessons_keyset_t *set,
                                const char *err, int serving,
                                apr_pool_t *scratch)
{
    lessons_keys_src *src = baton;
    const char *label = lessons_keys_src_label(src);
    int i;
    const char *then = serving
        ? "the last good key set still serves"
        : "no key set yet: requests get 503 (or the LessonsJWTKeyFile "
          "keys) until a fetch succeeds";

    if (!set && src->discover
        && src->discovery.last == LESSONS_DISCOVERY_MISMATCH) {
        /* Not the provider we were told of, or it was misconfigured:
         * RFC 8414 3.3 says none of its metadata may be used.
         */
        ap_log_error(APLOG_MARK, serving ? APLOG_WARNING : APLOG_ERR, 0,
                     src->s, LESSONSLOG(00221) "%s: %s; %s", label, err,
                     then);
        return;
    }
    if (!set) {
        ap_log_error(APLOG_MARK, serving ? APLOG_WARNING : APLOG_ERR, 0,
                     src->s, LESSONSLOG(00211) "%s: %s; %s", label, err,
                     then);
        return;
    }
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, src->s, LESSONSLOG(00213)
                 "%s: %d key(s) in use (%s), %d skipped%s%s", label,
                 set->nkeys, lessons_keys_kids(scratch, set), set->skipped,
                 src->discover ? ", from " : "",
                 src->discover ? src->discovery.jwks_uri : "");
    /* One line per key left out, so that an admin sees which of the
     * provider's keys this section will not take, and why.
     */
    for (i = 0; set->skips && i < set->skipped; i++) {
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, src->s, LESSONSLOG(00212)
                     "%s: skipped %s", label, set->skips[i].why);
    }
    if (set->secrets_skipped) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, src->s, LESSONSLOG(00219)
                     "%s: %d \"oct\" key(s) skipped: a shared secret "
                     "published at a URL is no secret (keys URLs give RSA "
                     "and EC keys; put secrets in a key file)", label,
                     set->secrets_skipped);
    }
}

/* Every fetch, for the metrics: failures, refetches a kid asked for,
 * and when this process last had a good set, and its keys; whether it
 * holds a set at all, and since when (a set is new when its digest
 * differs from the one before: the source never installs the same set
 * twice in a row).
 */
/* What this process holds, for the metrics: since when its set is in
 * use, or that it has none.
 */
static void lessons_keys_held(lessons_keys_src *src,
                              const lessons_keyset_t *set)
{
    if (set && (!src->has_in_use
                || memcmp(src->in_use, set->digest,
                          sizeof(src->in_use)) != 0)) {
        memcpy(src->in_use, set->digest, sizeof(src->in_use));
        src->has_in_use = 1;
        lessons_count_source(src->s, src->metrics_source,
                             LESSONS_SRC_INSTALLED,
                             (apr_uint64_t)apr_time_now());
    }
    lessons_count_source(src->s, src->metrics_source, LESSONS_SRC_NO_SET,
                         set ? 0 : 1);
}

static void lessons_keys_done(void *baton, int ok, int asked,
                              const lessons_keyset_t *set)
{
    lessons_keys_src *src = baton;

    if (!ok) {
        lessons_count_source(src->s, src->metrics_source,
                             LESSONS_SRC_FAILURES, 1);
    }
    if (asked) {
        lessons_count_source(src->s, src->metrics_source,
                             LESSONS_SRC_REFETCHES, 1);
    }
    if (ok && set) {
        lessons_count_source(src->s, src->metrics_source,
                             LESSONS_SRC_FETCHED,
                             (apr_uint64_t)apr_time_now());
        lessons_count_source(src->s, src->metrics_source, LESSONS_SRC_KEYS,
                             (apr_uint64_t)set->nkeys);
    }
    lessons_keys_held(src, set);
}

/* A set another process of the server fetched is in use here. */
static void lessons_keys_adopted(void *baton, const lessons_keyset_t *set)
{
    lessons_keys_src *src = baton;

    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, src->s, LESSONSLOG(00224)
                 "%s: %d key(s) in use, as another process of the server "
                 "fetched them", src->label, set->nkeys);
    lessons_keys_held(src, set);
}

/* A provider's PS* keys are read only for sections that name PS*; for
 * the others they are skipped, as keys of an algorithm the section does
 * not take, rather than refusing the provider's whole set.
 */
static int lessons_keys_jwks_flags(const lessons_keys_src *src)
{
    return lessons_algs_name_pss(src->algs) ? LESSONS_JWKS_PSS : 0;
}

/* A keys URL's fetch, or a discovered issuer's (whose url is the
 * issuer: the metadata and the keys within the one bound a keys URL's
 * fetch has), in this process.
 */
static void lessons_keys_fetch_init(lessons_keys_src *src)
{
    memset(&src->fetch, 0, sizeof(src->fetch));
    src->fetch.url = src->url;
    src->fetch.ca_pem = src->ca_pem;
    src->fetch.ca_len = src->ca_len;
    src->fetch.proxy = src->proxy;
    src->fetch.algs = src->algs;
    src->fetch.jwks_flags = lessons_keys_jwks_flags(src);
    src->fetch.connect_timeout_ms = LESSONS_KEYS_CONNECT_MS;
    src->fetch.total_timeout_ms = LESSONS_KEYS_TOTAL_MS;
    src->fetch.max_redirects = LESSONS_KEYS_REDIRECTS;
    memset(&src->discovery, 0, sizeof(src->discovery));
    src->discovery.fetch = src->fetch;
}

/* A source's identity in the shared block: what decides how its
 * document is fetched and read.  A restart that changes any of it
 * starts that source's slot empty.
 */
static void lessons_keys_identity(const lessons_keys_src *src,
                                  unsigned char id[LESSONS_KEYSHARE_ID_LEN])
{
    static const char tag[] = "mod_lessons key source 2";
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char nums[64];
    unsigned int len = 0;
    int ok;

    /* The CA's presence and length too: no CA (the system's) and any
     * CA file never hash alike.
     */
    apr_snprintf(nums, sizeof(nums), "%d|%d|%" APR_UINT64_T_FMT "|%d|%"
                 APR_SIZE_T_FMT, src->discover, lessons_keys_jwks_flags(src),
                 (apr_uint64_t)src->algs, src->ca_pem != NULL,
                 src->ca_pem ? src->ca_len : 0);
    ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL)
         && EVP_DigestUpdate(md, tag, sizeof(tag))
         && EVP_DigestUpdate(md, src->url, strlen(src->url) + 1)
         && EVP_DigestUpdate(md, nums, strlen(nums) + 1)
         && EVP_DigestUpdate(md, src->proxy ? src->proxy : "",
                             src->proxy ? strlen(src->proxy) + 1 : 1)
         && (!src->ca_pem
             || EVP_DigestUpdate(md, src->ca_pem, src->ca_len))
         && EVP_DigestFinal_ex(md, id, &len)
         && len == LESSONS_KEYSHARE_ID_LEN;
    EVP_MD_CTX_free(md);
    if (!ok) {
        /* Never matches a kept slot: the source starts empty. */
        memset(id, 0, LESSONS_KEYSHARE_ID_LEN);
        apr_cpystrn((char *)id, src->url, LESSONS_KEYSHARE_ID_LEN);
    }
}

/* Sources alike in everything that decides what they fetch and whom
 * they trust (lessons_keytrust_alike) fetch once: each later one points
 * at the first (same) and gives it its needs (eager, bare, the shortest
 * intervals).  Sources that differ in any of these never share a fetch,
 * a slot or a set; where two such fetch one URL, the log and the metrics
 * name each with its section.  In post_config, once every section has
 * configured its sources; before the metrics and the shared slots.
 */
void lessons_keys_share_alike(apr_pool_t *pconf, apr_array_header_t *list)
{
    int n = list->nelts, i, j;
    lessons_keytrust_t *trust = apr_pcalloc(pconf, (n + 1) * sizeof(*trust));
    const lessons_keytrust_t **tp = apr_pcalloc(pconf, (n + 1) * sizeof(*tp));
    int *used = apr_pcalloc(pconf, (n + 1) * sizeof(*used));
    int *same = apr_pcalloc(pconf, (n + 1) * sizeof(*same));

    for (i = 0; i < n; i++) {
        lessons_keys_src *src = APR_ARRAY_IDX(list, i, lessons_keys_src *);

        src->same = NULL;
        src->metrics_name = src->url;
        trust[i].url = src->url;
        trust[i].discover = src->discover;
        trust[i].ca_pem = src->ca_pem;
        trust[i].ca_len = src->ca_len;
        trust[i].proxy = src->proxy;
        trust[i].algs = src->algs;
        tp[i] = &trust[i];
        used[i] = src->used;
        if (src->used) {
            lessons_keys_identity(src, src->id);
        }
    }
    lessons_keytrust_share(tp, used, n, same);
    for (i = 0; i < n; i++) {
        lessons_keys_src *src = APR_ARRAY_IDX(list, i, lessons_keys_src *);
        lessons_keys_src *first;
        const char *where;
        int named = 0;

        if (same[i] >= 0) {
            first = APR_ARRAY_IDX(list, same[i], lessons_keys_src *);
            src->same = first;
            first->eager |= src->eager;
            first->bare |= src->bare;
            if (src->refresh
                && (!first->refresh || src->refresh < first->refresh)) {
                first->refresh = src->refresh;
            }
            if (src->min_refresh && (!first->min_refresh
                                     || src->min_refresh
                                        < first->min_refresh)) {
                first->min_refresh = src->min_refresh;
            }
            continue;
        }
        /* Another source fetching the same URL with other trust before
         * this one: the log and the metrics name this one's section.
         */
        for (j = 0; used[i] && j < i && !named; j++) {
            named = used[j] && same[j] < 0
                    && trust[j].discover == trust[i].discover
                    && strcmp(trust[j].url, trust[i].url) == 0;
        }
        if (named) {
            where = src->owner && src->owner->keys_where
                    ? src->owner->keys_where
                    : src->owner && src->owner->jwt_where
                      ? src->owner->jwt_where : "a section";
            src->label = apr_psprintf(pconf, "%s (as %s names it)",
                                      src->label, where);
            src->metrics_name = apr_psprintf(pconf, "%s (%s)", src->url,
                                             where);
        }
    }
    /* Those fetched for have no fetcher, no slot, no health of their own:
     * their first's is theirs.
     */
    for (i = 0; i < n; i++) {
        if (same[i] >= 0) {
            APR_ARRAY_IDX(list, i, lessons_keys_src *)->used = 0;
        }
    }
}

int lessons_keys_pre_config(apr_pool_t *pconf)
{
    return ap_mutex_register(pconf, LESSONS_KEYS_MUTEX, NULL,
                             APR_LOCK_DEFAULT, 0) == APR_SUCCESS ? OK : !OK;
}

/* How many of a process's requests may wait for one source's fetch: a
 * quarter of its threads (Debian's event MPM: 6 of 25), at least one,
 * at most LESSONS_KEYS_MAX_WAITERS; the rest are answered at once, and
 * the other sections and virtual hosts keep their threads.
 */
static int lessons_keys_max_waiters(void)
{
    int threads = 0;

    if (ap_mpm_query(AP_MPMQ_MAX_THREADS, &threads) != APR_SUCCESS
        || threads < 1) {
        threads = 1;
    }
    threads /= 4;
    return threads < 1 ? 1 : threads > LESSONS_KEYS_MAX_WAITERS
                                     ? LESSONS_KEYS_MAX_WAITERS : threads;
}

/* The shared block and its lock, kept across restarts (made anew when
 * it has too few slots), and every used source's slot in it.
 */
int lessons_keys_post_config(apr_pool_t *pconf, server_rec *s)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(s->module_config, &lessons_module);
    apr_array_header_t *list = sconf->key_sources;
    lessons_keys_kept *kept;
    lessons_keyshare_t *ks;
    unsigned char (*ids)[LESSONS_KEYSHARE_ID_LEN];
    lessons_keys_src **used;
    int *slots, n = 0, i, nslots, fresh = 0, kept_sets;
    apr_status_t rv;

    for (i = 0; list && i < list->nelts; i++) {
        n += APR_ARRAY_IDX(list, i, lessons_keys_src *)->used;
    }
    if (!n || ap_state_query(AP_SQ_MAIN_STATE)
              == AP_SQ_MS_CREATE_PRE_CONFIG) {
        return OK;
    }
    kept = ap_retained_data_get(LESSONS_KEYS_KEPT);
    if (!kept) {
        kept = ap_retained_data_create(LESSONS_KEYS_KEPT, sizeof(*kept));
    }
    if (lessons_kept_mutex(&kept->lock, LESSONS_KEYS_MUTEX, s)
        != APR_SUCCESS) {
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    nslots = n * 2 > LESSONS_KEYS_MIN_SLOTS ? n * 2 : LESSONS_KEYS_MIN_SLOTS;
    if (kept->shm && kept->nslots < n) {
        apr_shm_destroy(kept->shm);
        kept->shm = NULL;
    }
    if (!kept->shm) {
        apr_size_t size = lessons_keyshare_size(nslots,
                                                LESSONS_KEYS_SHARED_CAP);

        rv = apr_shm_create(&kept->shm, size, NULL, s->process->pool);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, rv, NULL,
                         LESSONSLOG(00127) "cannot make the shared memory "
                         "for key sets (%" APR_SIZE_T_FMT " bytes)", size);
            kept->shm = NULL;
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        kept->nslots = nslots;
        fresh = 1;
    }
    ks = lessons_keyshare_attach(apr_shm_baseaddr_get(kept->shm),
                                 apr_shm_size_get(kept->shm), kept->nslots,
                                 LESSONS_KEYS_SHARED_CAP, fresh, kept->lock,
                                 pconf);
    ids = apr_pcalloc(pconf, (apr_size_t)n * sizeof(*ids));
    used = apr_pcalloc(pconf, (apr_size_t)n * sizeof(*used));
    slots = apr_pcalloc(pconf, (apr_size_t)n * sizeof(*slots));
    for (i = 0, n = 0; i < list->nelts; i++) {
        lessons_keys_src *src = APR_ARRAY_IDX(list, i, lessons_keys_src *);

        if (src->used) {
            memcpy(ids[n], src->id, LESSONS_KEYSHARE_ID_LEN);
            used[n++] = src;
        }
    }
    kept_sets = ks ? lessons_keyshare_assign(ks, ids, n, slots) : -1;
    if (kept_sets < 0) {
        ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_EMERG, 0, NULL,
                     LESSONSLOG(00128) "cannot lay out the shared memory "
                     "for key sets");
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    for (i = 0; i < n; i++) {
        used[i]->slot = slots[i];
    }
    ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, s, LESSONSLOG(00129)
                 "key sets: %d source(s) in %d shared slot(s) of %d bytes, "
                 "%d kept from before", n, kept->nslots,
                 LESSONS_KEYS_SHARED_CAP, kept_sets);
    for (; s; s = s->next) {
        lessons_srv_conf *vconf =
            ap_get_module_config(s->module_config, &lessons_module);

        vconf->keys_shm = kept->shm;
        vconf->keys_lock = kept->lock;
        vconf->keys_slots = kept->nslots;
    }
    return OK;
}

void lessons_keys_child_init(apr_pool_t *pchild, server_rec *s)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(s->module_config, &lessons_module);
    lessons_keyshare_t *ks = NULL;
    apr_global_mutex_t *lock = sconf->keys_lock;
    int i;

    if (sconf->keys_shm && lock
        && apr_global_mutex_child_init(&lock,
                                       apr_global_mutex_lockfile(lock),
                                       pchild) == APR_SUCCESS) {
        ks = lessons_keyshare_attach(apr_shm_baseaddr_get(sconf->keys_shm),
                                     apr_shm_size_get(sconf->keys_shm),
                                     sconf->keys_slots,
                                     LESSONS_KEYS_SHARED_CAP, 0, lock,
                                     pchild);
    }
    for (i = 0; sconf->key_sources && i < sconf->key_sources->nelts; i++) {
        lessons_keys_src *src =
            APR_ARRAY_IDX(sconf->key_sources, i, lessons_keys_src *);
        lessons_keysource_opts_t opts;

        src->live = NULL;
        if (!src->used) {
            continue;
        }
        memset(&opts, 0, sizeof(opts));
        lessons_keys_fetch_init(src);
        opts.fetch = src->discover ? lessons_discovery_fetch
                                   : lessons_keysource_fetch_url;
        opts.fetch_baton = src->discover ? (void *)&src->discovery
                                         : (void *)&src->fetch;
        opts.refresh = apr_time_from_sec(lessons_keys_refresh(src));
        opts.min_refresh = apr_time_from_sec(lessons_keys_min_refresh(src));
        opts.wait = apr_time_from_msec(LESSONS_KEYS_TOTAL_MS);
        opts.max_waiters = lessons_keys_max_waiters();
        opts.report = lessons_keys_report;
        opts.done = lessons_keys_done;
        opts.adopted = lessons_keys_adopted;
        opts.report_baton = src;
        opts.parse = lessons_keysource_parse_url;
        opts.parse_baton = src->discover ? (void *)&src->discovery.fetch
                                         : (void *)&src->fetch;
        /* Bound to its own source: after a reload that gives the slot
         * to another, this process (then of the older generation) leaves
         * it alone.
         */
        if (ks && src->slot >= 0
            && lessons_keyshare_expect(ks, src->slot, src->id, pchild) != 0) {
            src->slot = -1;
        }
        if (!ks || src->slot < 0) {
            /* No shared block: this process fetches for itself. */
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, LESSONSLOG(00225)
                         "%s: no shared key set in this process; it fetches "
                         "its own", lessons_keys_src_label(src));
        }
        opts.share = ks && src->slot >= 0 ? ks : NULL;
        opts.slot = src->slot;
        /* A lazy source that kept a set across the restart was needed
         * before: it fetches at once like an eager one, rather than
         * serve the kept set until a request wakes it.
         */
        opts.lazy = !src->eager
                    && !(opts.share
                         && lessons_keyshare_generation(ks, src->slot) > 0);
        if (lessons_keysource_start(&src->live, &opts, pchild)
            != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, LESSONSLOG(00215)
                         "%s: cannot start its fetcher in this process; its "
                         "requests get 503",
                         lessons_keys_src_label(src));
            src->live = NULL;
        }
    }
}

/* A section's or block's keys from src in this process, for the gate's
 * decision (lessons_decide: it takes the current set, and asks for a
 * refetch when a token names a kid the set lacks).
 */
void lessons_keys_unit(lessons_keys_src *src, lessons_decide_unit_t *unit)
{
    src = lessons_keys_fetcher(src);
    unit->fetched = 1;
    unit->live = src->live;
    unit->keys_name = src->label;
    unit->retry_after = lessons_keys_min_refresh(src);
}

/* The health check's question about keys, in this process, without
 * waiting for a fetch and without starting one: does every source a
 * section takes its keys from with no key file beside them (bare) hold
 * a usable set?  One that holds none fails it, from the first second:
 * still at its first fetch (quietly: a balancer should not send requests
 * that would wait for it), or its fetches ended without a set (refused,
 * failed), or its fetcher could not start (logged: every request that
 * section gates gets 503).  Not a lazy one nobody has needed yet, nor
 * one whose sections all have a key file beside it (the file's keys
 * serve meanwhile).  Each source's change of state is logged once,
 * whatever the number of health requests.  Every virtual host's
 * sources count: they are the process's.
 */
int lessons_keys_health(request_rec *r)
{
    lessons_srv_conf *mconf = ap_get_module_config(
        ap_server_conf->module_config, &lessons_module);
    apr_array_header_t *list = mconf->key_sources;
    int i, pass = 1;

    for (i = 0; list && i < list->nelts; i++) {
        lessons_keys_src *src = APR_ARRAY_IDX(list, i, lessons_keys_src *);
        lessons_keysource_state_t st;
        const char *why = NULL;

        if (!src->used || !src->bare) {
            continue;
        }
        if (!src->live) {
            why = "its fetcher did not start";
        }
        else {
            lessons_keysource_state(src->live, r->pool, &st);
            if (!st.held && st.fetches == 0 && !st.dormant) {
                pass = 0;               /* its first fetch in flight */
                continue;
            }
            if (!st.held && st.fetches > 0) {
                why = st.last_err ? st.last_err : "no key set";
            }
        }
        if (why) {
            pass = 0;
            if (apr_atomic_cas32(&src->unhealthy, 1, 0) == 0) {
                ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, LESSONSLOG(00230)
                              "the health check fails: %s has no usable "
                              "key set (%s); the requests it gates get 503 "
                              "until a fetch gives one",
                              src->label, why);
            }
        }
        else if (apr_atomic_cas32(&src->unhealthy, 0, 1) == 1) {
            ap_log_rerror(APLOG_MARK, APLOG_NOTICE, 0, r, LESSONSLOG(00231)
                          "the health check no longer fails for %s: it "
                          "holds a usable key set", src->label);
        }
    }
    return pass;
}
