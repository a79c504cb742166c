/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_keys.c: keys from an identity provider's JWKS URL
 * (LessonsJWTKeysURL).  Each process keeps the last good key set of each
 * URL and one fetcher thread for it, so no request ever waits on the
 * network but the first ones (before any set) and a token naming a kid
 * the set lacks, which wakes the fetcher at most once per
 * LessonsJWTKeysMinRefresh whatever the traffic.  A set is refcounted:
 * requests hold the one they verified with while the fetcher swaps in
 * the next, and the last holder frees it.
 */

#include "mod_lessons.h"
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"
#include "apr_thread_proc.h"

#define LESSONS_KEYS_SOURCES      "lessons-keys-sources"
#define LESSONS_KEYS_CONNECT_MS   5000
#define LESSONS_KEYS_TOTAL_MS     10000
#define LESSONS_KEYS_REDIRECTS    3
#define LESSONS_KEYS_REFRESH      3600  /* seconds */
#define LESSONS_KEYS_MIN_REFRESH  60
#define LESSONS_KEYS_MAX_WAITERS  8     /* requests of a process that wait
                                         * on one URL's fetch; the rest
                                         * are answered at once */

/* One fetched set, in a pool of its own, freed by its last holder. */
typedef struct {
    apr_pool_t *pool;
    const lessons_keyset_t *set;
    int refs;                       /* the source's own, plus requests' */
} lessons_keys_ref;

struct lessons_keys_src {
    const char *url;
    const char *ca;                 /* LessonsJWTKeysCA's path, or NULL */
    const char *ca_pem;             /* ... its certificates, read at
                                     * start-up (as root) */
    apr_size_t ca_len;
    lessons_algs_t algs;            /* what every key must fit (union of
                                     * the sections using the URL) */
    int refresh, min_refresh;       /* seconds */
    server_rec *s;                  /* for log lines */

    /* Per process, from child_init. */
    apr_thread_mutex_t *lock;
    apr_thread_cond_t *wake;        /* the fetcher has work, or stops */
    apr_thread_cond_t *done;        /* a fetch ended */
    apr_thread_t *thread;
    lessons_keys_ref *current;      /* the last good set, or NULL */
    apr_time_t last_start;          /* when the last fetch began; 0 never */
    apr_time_t next_fetch;          /* when the fetcher fetches anyway */
    unsigned long ended;            /* fetches ended */
    unsigned long installed;        /* sets taken into use */
    int fetching, wanted, stopping;
    int waiters;                    /* requests waiting for a fetch */
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

/* One source per URL, whichever sections name it. */
lessons_keys_src *lessons_keys_src_get(cmd_parms *cmd, const char *url)
{
    apr_array_header_t *list = lessons_keys_sources(cmd->pool);
    lessons_keys_src *src;
    int i;

    for (i = 0; i < list->nelts; i++) {
        src = APR_ARRAY_IDX(list, i, lessons_keys_src *);
        if (strcmp(src->url, url) == 0) {
            return src;
        }
    }
    src = apr_pcalloc(cmd->pool, sizeof(*src));
    src->url = apr_pstrdup(cmd->pool, url);
    src->s = cmd->server;
    APR_ARRAY_PUSH(list, lessons_keys_src *) = src;
    return src;
}

/* A section that uses the source adds its settings (post_config): the
 * shortest intervals win; two different CA files are a conflict.
 */
const char *lessons_keys_src_configure(apr_pool_t *p, lessons_keys_src *src,
                                       const lessons_dir_conf *conf)
{
    if (conf->keys_ca) {
        if (src->ca && strcmp(src->ca, conf->keys_ca) != 0) {
            return apr_psprintf(p, "%s: LessonsJWTKeysCA %s, but another "
                                "section gives %s for %s", conf->jwt_where,
                                conf->keys_ca, src->ca, src->url);
        }
        src->ca = conf->keys_ca;
        src->ca_pem = conf->keys_ca_pem;
        src->ca_len = conf->keys_ca_len;
    }
    if (conf->keys_refresh
        && (!src->refresh || conf->keys_refresh < src->refresh)) {
        src->refresh = conf->keys_refresh;
    }
    if (conf->keys_min_refresh
        && (!src->min_refresh || conf->keys_min_refresh < src->min_refresh)) {
        src->min_refresh = conf->keys_min_refresh;
    }
    src->algs |= conf->algs;
    return NULL;
}

static int lessons_keys_refresh(const lessons_keys_src *src)
{
    return src->refresh ? src->refresh : LESSONS_KEYS_REFRESH;
}

static int lessons_keys_min_refresh(const lessons_keys_src *src)
{
    int min = src->min_refresh ? src->min_refresh : LESSONS_KEYS_MIN_REFRESH;

    return min < lessons_keys_refresh(src) ? min : lessons_keys_refresh(src);
}

/* Drop one hold; the last one frees the set.  Call with the lock held. */
static void lessons_keys_unref(lessons_keys_ref *ref)
{
    if (ref && --ref->refs == 0) {
        apr_pool_destroy(ref->pool);
    }
}

/* Fetch, parse and check a set: the same checks as a key file's.
 * Returns the new set (one hold, the source's), or NULL with *err.
 */
static lessons_keys_ref *lessons_keys_fetch(lessons_keys_src *src,
                                            const char **err,
                                            apr_pool_t *scratch)
{
    lessons_fetch_opts_t opts;
    lessons_keyset_t *set = NULL;
    lessons_keys_ref *ref;
    apr_pool_t *pool;
    char *body = NULL;
    apr_size_t len = 0;

    memset(&opts, 0, sizeof(opts));
    opts.url = src->url;
    opts.ca_pem = src->ca_pem;
    opts.ca_len = src->ca_len;
    opts.connect_timeout_ms = LESSONS_KEYS_CONNECT_MS;
    opts.total_timeout_ms = LESSONS_KEYS_TOTAL_MS;
    opts.max_bytes = LESSONS_JWKS_MAX_BYTES;
    opts.max_redirects = LESSONS_KEYS_REDIRECTS;
    *err = lessons_fetch_get(scratch, &opts, &body, &len);
    if (*err) {
        return NULL;
    }
    /* Unmanaged: it outlives this fetch and is freed from any thread. */
    if (apr_pool_create_unmanaged_ex(&pool, NULL, NULL) != APR_SUCCESS) {
        *err = "out of memory";
        return NULL;
    }
    *err = lessons_keyset_parse_jwks_ex(pool, body, len,
                                        LESSONS_JWKS_PUBLIC_ONLY, &set);
    if (!*err) {
        *err = lessons_keyset_check(scratch, set, src->algs);
    }
    if (*err) {
        *err = apr_pstrcat(scratch, "the key set was refused: ", *err,
                           NULL);
        apr_pool_destroy(pool);
        return NULL;
    }
    ref = apr_pcalloc(pool, sizeof(*ref));
    ref->pool = pool;
    ref->set = set;
    ref->refs = 1;
    return ref;
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

/* The fetcher: fetches when due (first at once, then every refresh,
 * sooner after a failure or when a request wants an unknown kid), never
 * more often than the minimum interval.  The lock is held except while
 * fetching.
 */
static void *APR_THREAD_FUNC lessons_keys_thread(apr_thread_t *thread,
                                                 void *data)
{
    lessons_keys_src *src = data;
    apr_interval_time_t min =
        apr_time_from_sec(lessons_keys_min_refresh(src));
    apr_pool_t *scratch;

    if (apr_pool_create_unmanaged_ex(&scratch, NULL, NULL) != APR_SUCCESS) {
        return NULL;
    }
    apr_thread_mutex_lock(src->lock);
    while (!src->stopping) {
        apr_time_t now = apr_time_now(), due = src->next_fetch;
        lessons_keys_ref *ref;
        const char *err = NULL;

        if (src->wanted && src->last_start + min < due) {
            due = src->last_start + min;
        }
        if (src->last_start && due < src->last_start + min) {
            due = src->last_start + min;
        }
        if (now < due) {
            apr_thread_cond_timedwait(src->wake, src->lock, due - now);
            continue;
        }
        src->fetching = 1;
        src->wanted = 0;
        src->last_start = now;
        apr_thread_mutex_unlock(src->lock);

        ref = lessons_keys_fetch(src, &err, scratch);

        apr_thread_mutex_lock(src->lock);
        if (ref) {
            int same = src->current
                && memcmp(src->current->set->digest, ref->set->digest,
                          sizeof(ref->set->digest)) == 0;

            if (!same) {
                ap_log_error(APLOG_MARK, APLOG_INFO, 0, src->s,
                             LESSONSLOG(00213) "keys URL %s: %d key(s) in "
                             "use (%s), %d skipped", src->url,
                             ref->set->nkeys,
                             lessons_keys_kids(scratch, ref->set),
                             ref->set->skipped);
                if (ref->set->secrets_skipped) {
                    ap_log_error(APLOG_MARK, APLOG_WARNING, 0, src->s,
                                 LESSONSLOG(00219) "keys URL %s: %d \"oct\" "
                                 "key(s) skipped: a shared secret published "
                                 "at a URL is no secret (keys URLs give RSA "
                                 "and EC keys; put secrets in a key file)",
                                 src->url, ref->set->secrets_skipped);
                }
                lessons_keys_unref(src->current);
                src->current = ref;
                src->installed++;
            }
            else {
                lessons_keys_unref(ref);
            }
            src->next_fetch = now
                + apr_time_from_sec(lessons_keys_refresh(src));
        }
        else {
            /* Try again after the minimum interval. */
            src->next_fetch = now + min;
            ap_log_error(APLOG_MARK, src->current ? APLOG_WARNING : APLOG_ERR,
                         0, src->s, LESSONSLOG(00211) "keys URL %s: %s; %s",
                         src->url, err, src->current
                         ? "the last good key set still serves"
                         : "no key set yet: requests get 503 (or the "
                           "LessonsJWTKeyFile keys) until a fetch succeeds");
        }
        src->fetching = 0;
        src->ended++;
        apr_thread_cond_broadcast(src->done);
        apr_pool_clear(scratch);
    }
    apr_thread_mutex_unlock(src->lock);
    apr_pool_destroy(scratch);
    apr_thread_exit(thread, APR_SUCCESS);
    return NULL;
}

/* Child exit: stop the fetcher (a fetch in flight ends within its own
 * time limit) and let go of the set.
 */
static apr_status_t lessons_keys_stop(void *data)
{
    lessons_keys_src *src = data;
    apr_status_t rv;

    apr_thread_mutex_lock(src->lock);
    src->stopping = 1;
    apr_thread_cond_broadcast(src->wake);
    apr_thread_mutex_unlock(src->lock);
    apr_thread_join(&rv, src->thread);
    lessons_keys_unref(src->current);
    src->current = NULL;
    return APR_SUCCESS;
}

void lessons_keys_child_init(apr_pool_t *pchild, server_rec *s)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(s->module_config, &lessons_module);
    int i;

    for (i = 0; sconf->key_sources && i < sconf->key_sources->nelts; i++) {
        lessons_keys_src *src =
            APR_ARRAY_IDX(sconf->key_sources, i, lessons_keys_src *);

        src->current = NULL;
        src->last_start = src->next_fetch = 0;
        src->fetching = src->wanted = src->stopping = src->waiters = 0;
        src->ended = src->installed = 0;
        if (apr_thread_mutex_create(&src->lock, APR_THREAD_MUTEX_DEFAULT,
                                    pchild) != APR_SUCCESS
            || apr_thread_cond_create(&src->wake, pchild) != APR_SUCCESS
            || apr_thread_cond_create(&src->done, pchild) != APR_SUCCESS
            || apr_thread_create(&src->thread, NULL, lessons_keys_thread,
                                 src, pchild) != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, 0, s, LESSONSLOG(00215)
                         "keys URL %s: cannot start its fetcher in this "
                         "process; its requests get 503", src->url);
            src->thread = NULL;
            continue;
        }
        apr_pool_pre_cleanup_register(pchild, src, lessons_keys_stop);
    }
}

/* A request's hold on a set, released with the request. */
typedef struct {
    lessons_keys_src *src;
    lessons_keys_ref *ref;
} lessons_keys_hold;

static apr_status_t lessons_keys_let_go(void *data)
{
    lessons_keys_hold *hold = data;

    apr_thread_mutex_lock(hold->src->lock);
    lessons_keys_unref(hold->ref);
    apr_thread_mutex_unlock(hold->src->lock);
    return APR_SUCCESS;
}

/* Wait (lock held, at most one fetch's time limit) until the fetch in
 * flight, or the next one, has ended.  A slow provider must not hold
 * every thread: past LESSONS_KEYS_MAX_WAITERS, requests go on at once
 * with what they have.
 */
static void lessons_keys_await(lessons_keys_src *src)
{
    apr_time_t deadline =
        apr_time_now() + apr_time_from_msec(LESSONS_KEYS_TOTAL_MS);
    unsigned long ended = src->ended;

    if (src->waiters >= LESSONS_KEYS_MAX_WAITERS) {
        return;
    }
    src->waiters++;
    while (src->ended == ended && !src->stopping) {
        apr_time_t now = apr_time_now();

        if (now >= deadline) {
            break;
        }
        apr_thread_cond_timedwait(src->done, src->lock, deadline - now);
    }
    src->waiters--;
}

/* The source's set for this request, held until the request ends; wait
 * (bounded) while the first fetch is in flight.  NULL when there is none.
 */
static const lessons_keyset_t *lessons_keys_take(request_rec *r,
                                                 lessons_keys_src *src)
{
    lessons_keys_hold *hold;

    if (!src->thread) {
        return NULL;
    }
    apr_thread_mutex_lock(src->lock);
    if (!src->current && (src->fetching || src->ended == 0)) {
        lessons_keys_await(src);    /* the first fetch */
    }
    if (!src->current) {
        apr_thread_mutex_unlock(src->lock);
        return NULL;
    }
    hold = apr_palloc(r->pool, sizeof(*hold));
    hold->src = src;
    hold->ref = src->current;
    hold->ref->refs++;
    apr_thread_mutex_unlock(src->lock);
    apr_pool_cleanup_register(r->pool, hold, lessons_keys_let_go,
                              apr_pool_cleanup_null);
    return hold->ref->set;
}

/* The token policy of a request: policy holds the section's
 * (lessons_policy_of); a keys URL's current set takes the key file's
 * place (which serves until the first fetch succeeds).  OK, or 503
 * (lessons_refuse) when there are no keys yet.
 */
int lessons_keys_policy(request_rec *r, const lessons_dir_conf *conf,
                        lessons_token_policy_t *policy)
{
    const lessons_keyset_t *set;

    if (!conf->keys_url) {
        return OK;
    }
    set = lessons_keys_take(r, conf->keys_url);
    if (set) {
        policy->keys = set;
        policy->fp = NULL;          /* made from this set, per request */
        return OK;
    }
    if (policy->keys) {
        return OK;                  /* LessonsJWTKeyFile's, meanwhile */
    }
    /* A fault (the fetcher's LESSONS00211 line says why): error. */
    lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
        LESSONSLOG(00214) "keys URL %s has not given a key set yet: "
        "answering 503", conf->keys_url->url));
    apr_table_setn(r->err_headers_out, "Retry-After",
                   apr_itoa(r->pool, lessons_keys_min_refresh(conf->keys_url)));
    return lessons_refuse(r, HTTP_SERVICE_UNAVAILABLE,
        "The server cannot verify access tokens yet; try again later.");
}

/* A token named a kid the set lacks: wake the fetcher, unless it ran
 * less than the minimum interval ago, and wait (bounded) for its fetch.
 * 1 when a new set is in use since the request took its own.
 */
int lessons_keys_refetch(request_rec *r, const lessons_dir_conf *conf)
{
    lessons_keys_src *src = conf->keys_url;
    apr_time_t now = apr_time_now();
    unsigned long installed;
    apr_interval_time_t min;

    if (!src || !src->thread) {
        return 0;
    }
    min = apr_time_from_sec(lessons_keys_min_refresh(src));
    apr_thread_mutex_lock(src->lock);
    installed = src->installed;
    if (!src->fetching) {
        if (src->last_start && now < src->last_start + min) {
            apr_time_t next = src->last_start + min;

            apr_thread_mutex_unlock(src->lock);
            /* Fetched recently: not again.  Say when, so that a rotation
             * that outruns the interval can be told from a forged kid.
             */
            ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00218)
                          "keys URL %s: the token's kid is not in the key "
                          "set fetched %" APR_TIME_T_FMT " s ago; the next "
                          "fetch may happen in %" APR_TIME_T_FMT " s "
                          "(LessonsJWTKeysMinRefresh)", src->url,
                          apr_time_sec(now - src->last_start),
                          apr_time_sec(next - now) + 1);
            return 0;
        }
        src->wanted = 1;
        apr_thread_cond_signal(src->wake);
    }
    /* One fetch: the one in flight, or the one just asked for. */
    lessons_keys_await(src);
    installed = src->installed != installed;
    apr_thread_mutex_unlock(src->lock);
    return installed ? 1 : 0;
}
