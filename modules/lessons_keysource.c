/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keysource.c: the fetcher thread, the last good set and the
 * holds on it (lessons_keysource.h).  One mutex guards the source; the
 * thread lets go of it only while it fetches.
 */
#include <string.h>

#include "apr_strings.h"
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"
#include "apr_thread_proc.h"

#include "lessons_fetch.h"
#include "lessons_keysource.h"

/* The longest last fetch error lessons_keysource_state gives (longer
 * ones are cut: the fetcher's own log line has it whole).
 */
#define LESSONS_KEYSOURCE_ERR_LEN   512

/* One fetched set, in a pool of its own, freed by its last holder. */
typedef struct {
    apr_pool_t *pool;
    const lessons_keyset_t *set;
    int refs;                       /* the source's own, plus holders' */
} lessons_keysource_ref;

struct lessons_keysource {
    lessons_keysource_opts_t opts;
    apr_thread_mutex_t *lock;
    apr_thread_cond_t *wake;        /* the fetcher has work, or stops */
    apr_thread_cond_t *done;        /* a fetch ended */
    apr_thread_t *thread;
    lessons_keysource_ref *current; /* the last good set, or NULL */
    apr_time_t last_start;          /* when the last fetch began; 0 never */
    apr_time_t next_fetch;          /* when the fetcher fetches anyway */
    unsigned long ended;            /* fetches ended */
    unsigned long installed;        /* sets taken into use */
    int fetching, wanted, stopping;
    int refetch;                    /* wanted by a kid the set lacks (not
                                     * by a lazy source's first take) */
    int dormant;                    /* lazy, and nobody has asked yet */
    int waiters;                    /* holders waiting for a fetch */
    apr_time_t installed_at;        /* when current was taken into use */
    char last_err[LESSONS_KEYSOURCE_ERR_LEN];   /* the last fetch's error
                                     * ("": it gave a set), for
                                     * lessons_keysource_state */
};

/* Drop one hold; the last one frees the set.  Call with the lock held. */
static void keysource_unref(lessons_keysource_ref *ref)
{
    if (ref && --ref->refs == 0) {
        apr_pool_destroy(ref->pool);
    }
}

/* One fetch through opts.fetch: a set with one hold (the source's), or
 * NULL with *err.
 */
static lessons_keysource_ref *keysource_fetch(lessons_keysource_t *src,
                                              const char **err,
                                              apr_pool_t *scratch)
{
    const lessons_keyset_t *set = NULL;
    lessons_keysource_ref *ref;
    apr_pool_t *pool;

    /* Unmanaged: it outlives this fetch and is freed from any thread. */
    if (apr_pool_create_unmanaged_ex(&pool, NULL, NULL) != APR_SUCCESS) {
        *err = "out of memory";
        return NULL;
    }
    *err = src->opts.fetch(src->opts.fetch_baton, pool, scratch, &set);
    if (!*err && !set) {
        *err = "the fetch gave no key set";
    }
    if (*err) {
        apr_pool_destroy(pool);
        return NULL;
    }
    ref = apr_pcalloc(pool, sizeof(*ref));
    ref->pool = pool;
    ref->set = set;
    ref->refs = 1;
    return ref;
}

/* When the fetcher fetches next: at next_fetch, or at once when a
 * holder wants it, but never sooner than min_refresh after the last.
 */
static apr_time_t keysource_due(const lessons_keysource_t *src)
{
    apr_time_t due = src->wanted ? 0 : src->next_fetch;

    if (src->last_start && due < src->last_start + src->opts.min_refresh) {
        due = src->last_start + src->opts.min_refresh;
    }
    return due;
}

/* Take a fetch's outcome into the source.  Lock held. */
static void keysource_install(lessons_keysource_t *src,
                              lessons_keysource_ref *ref, const char *err,
                              apr_time_t started, apr_pool_t *scratch)
{
    if (ref) {
        int same = src->current
                   && lessons_keyset_same(src->current->set, ref->set);

        if (same) {
            keysource_unref(ref);
        }
        else {
            if (src->opts.report) {
                src->opts.report(src->opts.report_baton, ref->set, NULL, 1,
                                 scratch);
            }
            keysource_unref(src->current);
            src->current = ref;
            src->installed++;
            src->installed_at = apr_time_now();
        }
        src->last_err[0] = '\0';
        src->next_fetch = started + src->opts.refresh;
    }
    else {
        apr_cpystrn(src->last_err, err ? err : "the fetch failed",
                    sizeof(src->last_err));
        /* Try again after the minimum interval. */
        src->next_fetch = started + src->opts.min_refresh;
        if (src->opts.report) {
            src->opts.report(src->opts.report_baton, NULL, err,
                             src->current != NULL, scratch);
        }
    }
}

static void *APR_THREAD_FUNC keysource_thread(apr_thread_t *thread,
                                              void *data)
{
    lessons_keysource_t *src = data;
    apr_pool_t *scratch;

    if (apr_pool_create_unmanaged_ex(&scratch, NULL, NULL) != APR_SUCCESS) {
        apr_thread_exit(thread, APR_ENOMEM);
        return NULL;
    }
    apr_thread_mutex_lock(src->lock);
    while (!src->stopping) {
        apr_time_t now = apr_time_now(), due = keysource_due(src);
        lessons_keysource_ref *ref;
        const char *err = NULL;
        int asked;

        if (src->dormant && !src->wanted) {
            apr_thread_cond_wait(src->wake, src->lock);
            continue;
        }
        if (now < due) {
            apr_thread_cond_timedwait(src->wake, src->lock, due - now);
            continue;
        }
        src->dormant = 0;
        src->fetching = 1;
        asked = src->refetch;
        src->wanted = 0;
        src->refetch = 0;
        src->last_start = now;
        apr_thread_mutex_unlock(src->lock);

        ref = keysource_fetch(src, &err, scratch);

        apr_thread_mutex_lock(src->lock);
        keysource_install(src, ref, err, now, scratch);
        if (src->opts.done) {
            src->opts.done(src->opts.report_baton, ref != NULL, asked,
                           src->current ? src->current->set : NULL);
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

/* Stop the fetcher and let go of the set (the pool's pre-cleanup: the
 * mutex and conditions, made in the same pool, are still there).
 */
static apr_status_t keysource_stop(void *data)
{
    lessons_keysource_t *src = data;
    apr_status_t rv;

    apr_thread_mutex_lock(src->lock);
    src->stopping = 1;
    apr_thread_cond_broadcast(src->wake);
    apr_thread_cond_broadcast(src->done);
    apr_thread_mutex_unlock(src->lock);
    apr_thread_join(&rv, src->thread);
    apr_thread_mutex_lock(src->lock);
    keysource_unref(src->current);
    src->current = NULL;
    apr_thread_mutex_unlock(src->lock);
    return APR_SUCCESS;
}

apr_interval_time_t lessons_keysource_min_refresh(apr_interval_time_t refresh,
                                                  apr_interval_time_t min_refresh)
{
    return min_refresh < refresh ? min_refresh : refresh;
}

apr_status_t lessons_keysource_start(lessons_keysource_t **srcp,
                                     const lessons_keysource_opts_t *opts,
                                     apr_pool_t *p)
{
    lessons_keysource_t *src = apr_pcalloc(p, sizeof(*src));
    apr_status_t rv;

    *srcp = NULL;
    if (!opts->fetch || opts->refresh <= 0 || opts->min_refresh <= 0) {
        return APR_EINVAL;
    }
    src->opts = *opts;
    src->dormant = opts->lazy;
    src->opts.min_refresh = lessons_keysource_min_refresh(opts->refresh,
                                                          opts->min_refresh);
    if ((rv = apr_thread_mutex_create(&src->lock, APR_THREAD_MUTEX_DEFAULT,
                                      p)) != APR_SUCCESS
        || (rv = apr_thread_cond_create(&src->wake, p)) != APR_SUCCESS
        || (rv = apr_thread_cond_create(&src->done, p)) != APR_SUCCESS
        || (rv = apr_thread_create(&src->thread, NULL, keysource_thread,
                                   src, p)) != APR_SUCCESS) {
        return rv;
    }
    apr_pool_pre_cleanup_register(p, src, keysource_stop);
    *srcp = src;
    return APR_SUCCESS;
}

/* Wait (lock held, at most opts.wait) until the fetch in flight, or the
 * next one, has ended.  A slow provider must not hold every thread:
 * past max_waiters, callers go on at once with what there is (0).
 */
static int keysource_await(lessons_keysource_t *src)
{
    apr_time_t deadline = apr_time_now() + src->opts.wait;
    unsigned long ended = src->ended;

    if (src->waiters >= src->opts.max_waiters) {
        return 0;
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
    return 1;
}

/* A holder's hold on a set, let go with the holder's pool. */
typedef struct {
    lessons_keysource_t *src;
    lessons_keysource_ref *ref;
} lessons_keysource_hold;

static apr_status_t keysource_let_go(void *data)
{
    lessons_keysource_hold *hold = data;

    apr_thread_mutex_lock(hold->src->lock);
    keysource_unref(hold->ref);
    apr_thread_mutex_unlock(hold->src->lock);
    return APR_SUCCESS;
}

const lessons_keyset_t *lessons_keysource_take(lessons_keysource_t *src,
                                               apr_pool_t *holder)
{
    lessons_keysource_hold *hold;

    apr_thread_mutex_lock(src->lock);
    if (!src->current && !src->fetching && src->ended == 0) {
        src->wanted = 1;            /* a lazy source's first fetch */
        apr_thread_cond_signal(src->wake);
    }
    if (!src->current && (src->fetching || src->ended == 0)) {
        keysource_await(src);       /* the first fetch */
    }
    if (!src->current) {
        apr_thread_mutex_unlock(src->lock);
        return NULL;
    }
    hold = apr_palloc(holder, sizeof(*hold));
    hold->src = src;
    hold->ref = src->current;
    hold->ref->refs++;
    apr_thread_mutex_unlock(src->lock);
    apr_pool_cleanup_register(holder, hold, keysource_let_go,
                              apr_pool_cleanup_null);
    return hold->ref->set;
}

lessons_keysource_refetch_e
lessons_keysource_refetch(lessons_keysource_t *src,
                          apr_interval_time_t *since,
                          apr_interval_time_t *until)
{
    apr_time_t now = apr_time_now();
    unsigned long installed;
    int waited;

    apr_thread_mutex_lock(src->lock);
    installed = src->installed;
    if (!src->fetching) {
        if (src->last_start
            && now < src->last_start + src->opts.min_refresh) {
            if (since) {
                *since = now - src->last_start;
            }
            if (until) {
                *until = src->last_start + src->opts.min_refresh - now;
            }
            apr_thread_mutex_unlock(src->lock);
            return LESSONS_KEYSOURCE_TOO_SOON;
        }
        src->wanted = 1;
        src->refetch = 1;
        apr_thread_cond_signal(src->wake);
    }
    /* One fetch: the one in flight, or the one just asked for. */
    waited = keysource_await(src);
    installed = src->installed != installed;
    apr_thread_mutex_unlock(src->lock);
    if (installed) {
        return LESSONS_KEYSOURCE_NEW;
    }
    return waited ? LESSONS_KEYSOURCE_SAME : LESSONS_KEYSOURCE_BUSY;
}

void lessons_keysource_stats(lessons_keysource_t *src,
                             lessons_keysource_stats_t *stats)
{
    apr_thread_mutex_lock(src->lock);
    stats->fetches = src->ended;
    stats->installed = src->installed;
    stats->holds = src->current ? src->current->refs : 0;
    stats->waiters = src->waiters;
    apr_thread_mutex_unlock(src->lock);
}

void lessons_keysource_state(lessons_keysource_t *src, apr_pool_t *p,
                             lessons_keysource_state_t *state)
{
    apr_thread_mutex_lock(src->lock);
    state->held = src->current != NULL;
    state->installed = src->current ? src->installed_at : 0;
    state->fetches = src->ended;
    state->fetching = src->fetching;
    state->dormant = src->dormant && !src->wanted;
    state->last_err = src->last_err[0] ? apr_pstrdup(p, src->last_err)
                                       : NULL;
    apr_thread_mutex_unlock(src->lock);
}

const char *lessons_keysource_fetch_url(void *baton, apr_pool_t *set_pool,
                                        apr_pool_t *scratch,
                                        const lessons_keyset_t **set)
{
    const lessons_keysource_url_t *url = baton;
    lessons_fetch_opts_t opts;
    char *body = NULL;
    apr_size_t len = 0;
    const char *err;

    memset(&opts, 0, sizeof(opts));
    opts.url = url->url;
    opts.ca_pem = url->ca_pem;
    opts.ca_len = url->ca_len;
    opts.proxy = url->proxy;
    opts.connect_timeout_ms = url->connect_timeout_ms;
    opts.total_timeout_ms = url->total_timeout_ms;
    opts.max_bytes = LESSONS_JWKS_MAX_BYTES;
    opts.max_redirects = url->max_redirects;
    err = lessons_fetch_get(scratch, &opts, &body, &len);
    if (err) {
        return err;
    }
    return lessons_keysource_parse(set_pool, scratch, body, len, url->algs,
                                   url->jwks_flags, set);
}

const char *lessons_keysource_parse(apr_pool_t *set_pool, apr_pool_t *scratch,
                                    const char *body, apr_size_t len,
                                    lessons_algs_t algs, int jwks_flags,
                                    const lessons_keyset_t **set)
{
    lessons_keyset_t *made = NULL;
    const char *err;

    /* Key by key: what does not fit is skipped, the rest serve; the
     * check after it only holds that line (every key left fits).
     */
    err = lessons_keyset_parse_fetched(set_pool, body, len, jwks_flags, algs,
                                       &made);
    if (!err) {
        err = lessons_keyset_check(scratch, made, algs);
    }
    if (err) {
        return apr_pstrcat(scratch, "the key set was refused: ", err, NULL);
    }
    *set = made;
    return NULL;
}
