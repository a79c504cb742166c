/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keysource.c: the fetcher thread, the last good set and the
 * holds on it, over a lessons_keyshare slot (lessons_keysource.h).  One
 * mutex guards the source; the thread lets go of it while it fetches,
 * and any thread lets go of it while it parses a document another
 * process published.
 */
#include <string.h>
#include <unistd.h>

#include "apr_strings.h"
#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"
#include "apr_thread_proc.h"

#include "keys/lessons_fetch.h"
#include "keys/lessons_keysource.h"

/* The longest last fetch error lessons_keysource_state gives (longer
 * ones are cut: the fetcher's own log line has it whole).
 */
#define LESSONS_KEYSOURCE_ERR_LEN   512

/* How often a process looks at the shared slot while it waits for
 * another process's fetch (or has no set): the wait ends this much
 * after the other's document is published, at most.
 */
#define LESSONS_KEYSOURCE_POLL      apr_time_from_msec(100)

/* A lease outlives the fetch's own bound by this much, so that only a
 * process that died mid-fetch ever loses it.
 */
#define LESSONS_KEYSOURCE_LEASE_PAD apr_time_from_sec(5)

/* The document of a source of its own (no shared block): as large as a
 * JWKS may be.
 */
#define LESSONS_KEYSOURCE_OWN_CAP   LESSONS_JWKS_MAX_BYTES

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
    apr_thread_cond_t *done;        /* a fetch ended, or a set came */
    apr_thread_t *thread;
    lessons_keysource_ref *current; /* the last good set, or NULL */
    apr_uint64_t gen;               /* the slot's generation current is
                                     * of (0: none) */
    apr_uint64_t bad_gen;           /* a generation this process could
                                     * not parse: not tried again */
    apr_uint64_t owner;             /* this process's claims: pid << 32 */
    apr_uint32_t claims;
    apr_uint64_t handed;            /* a claim a request made, for the
                                     * fetcher to fetch under (0: none) */
    apr_time_t last_start;          /* when this process's last fetch
                                     * began; 0 never */
    unsigned long ended;            /* this process's fetches ended */
    unsigned long installed;        /* sets taken into use */
    unsigned long passes;           /* the fetcher's rounds: one that
                                     * fetched nothing still ends a wait
                                     * for "the first fetch" */
    int fetching, wanted, stopping, adopting;
    int dormant;                    /* lazy, and nobody has asked yet */
    int waiters;                    /* holders waiting for a fetch */
    apr_time_t busy_until;          /* another process's lease on the
                                     * fetch, as the last round saw it */
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

/* A set made of the fetch (doc) or of a published document (doc given:
 * parse): with one hold (the source's), or NULL with *err.
 */
static lessons_keysource_ref *keysource_make(lessons_keysource_t *src,
                                             const char *doc, apr_size_t len,
                                             const char **fetched,
                                             apr_size_t *fetched_len,
                                             const char **err,
                                             apr_pool_t *scratch)
{
    const lessons_keyset_t *set = NULL;
    lessons_keysource_ref *ref;
    apr_pool_t *pool;

    /* Unmanaged: it outlives this call and is freed from any thread. */
    if (apr_pool_create_unmanaged_ex(&pool, NULL, NULL) != APR_SUCCESS) {
        *err = "out of memory";
        return NULL;
    }
    if (doc) {
        *err = src->opts.parse
               ? src->opts.parse(src->opts.parse_baton, pool, scratch, doc,
                                 len, &set)
               : "no parser for a shared document";
    }
    else {
        *err = src->opts.fetch(src->opts.fetch_baton, pool, scratch, &set,
                               fetched, fetched_len);
        if (!*err && (!*fetched || !*fetched_len)) {
            *err = "the fetch gave no document";
        }
    }
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

/* ref becomes current (of generation gen).  Lock held. */
static void keysource_swap(lessons_keysource_t *src,
                           lessons_keysource_ref *ref, apr_uint64_t gen)
{
    keysource_unref(src->current);
    src->current = ref;
    src->gen = gen;
    src->installed++;
    src->installed_at = apr_time_now();
}

/* Take this process's own fetch into the source.  Lock held. */
static void keysource_install(lessons_keysource_t *src,
                              lessons_keysource_ref *ref, const char *err,
                              apr_uint64_t gen, apr_pool_t *scratch)
{
    if (ref) {
        int same = src->current
                   && lessons_keyset_same(src->current->set, ref->set);

        if (same) {
            keysource_unref(ref);
            src->gen = gen;
        }
        else {
            if (src->opts.report) {
                src->opts.report(src->opts.report_baton, ref->set, NULL, 1,
                                 scratch);
            }
            keysource_swap(src, ref, gen);
        }
        src->last_err[0] = '\0';
    }
    else {
        apr_cpystrn(src->last_err, err ? err : "the fetch failed",
                    sizeof(src->last_err));
        if (src->opts.report) {
            src->opts.report(src->opts.report_baton, NULL, err,
                             src->current != NULL, scratch);
        }
    }
}

/* The slot holds a generation this process has not taken: copy its
 * document and parse it, without the source's lock (held on entry and
 * on return), and take it into use.  One thread at a time; 1 when a set
 * of a newer generation is now current.
 */
static int keysource_adopt(lessons_keysource_t *src, apr_pool_t *scratch)
{
    lessons_keyshare_view_t view;
    lessons_keysource_ref *ref = NULL;
    const char *err = NULL;
    int taken = 0;

    if (src->adopting) {
        return 0;
    }
    src->adopting = 1;
    apr_thread_mutex_unlock(src->lock);
    if (lessons_keyshare_read(src->opts.share, src->opts.slot, 1, scratch,
                              &view) == APR_SUCCESS && view.generation) {
        ref = keysource_make(src, view.doc, view.len, NULL, NULL, &err,
                             scratch);
    }
    apr_thread_mutex_lock(src->lock);
    src->adopting = 0;
    if (ref && view.generation > src->gen) {
        if (src->current
            && lessons_keyset_same(src->current->set, ref->set)) {
            keysource_unref(ref);
            src->gen = view.generation;
        }
        else {
            keysource_swap(src, ref, view.generation);
            if (src->opts.adopted) {
                src->opts.adopted(src->opts.report_baton, ref->set);
            }
            taken = 1;
        }
        src->last_err[0] = '\0';
    }
    else {
        keysource_unref(ref);
        if (!ref && view.generation > src->gen) {
            /* Another process took it, so this one should too: the
             * same settings parse the same bytes.  Not tried again.
             */
            src->bad_gen = view.generation;
            apr_cpystrn(src->last_err, err ? err : "the shared key set "
                        "could not be read", sizeof(src->last_err));
        }
    }
    apr_thread_cond_broadcast(src->done);
    return taken;
}

/* A newer generation is published and not yet tried here.  Lock-free. */
static int keysource_behind(lessons_keysource_t *src)
{
    apr_uint64_t g = lessons_keyshare_generation(src->opts.share,
                                                 src->opts.slot);

    return g > src->gen && g != src->bad_gen;
}

/* Take what the slot holds if it is newer, or wait while another thread
 * of this process does.  Lock held.
 */
static void keysource_catch_up(lessons_keysource_t *src, apr_pool_t *scratch)
{
    while (!src->stopping && keysource_behind(src)) {
        if (!src->adopting) {
            keysource_adopt(src, scratch);
            return;
        }
        apr_thread_cond_timedwait(src->done, src->lock,
                                  LESSONS_KEYSOURCE_POLL);
    }
}

static apr_uint64_t keysource_owner(lessons_keysource_t *src)
{
    src->claims = (src->claims + 1) & 0xffff;
    if (src->claims == 0) {
        src->claims = 1;
    }
    return src->owner | src->claims;
}

static apr_interval_time_t keysource_lease(const lessons_keysource_t *src)
{
    return src->opts.wait + LESSONS_KEYSOURCE_LEASE_PAD;
}

/* One fetch under the lease owner holds, and its outcome published for
 * the server and taken here.  Lock held on entry and on return.
 */
static void keysource_fetch_now(lessons_keysource_t *src, apr_uint64_t owner,
                                int asked, apr_time_t started,
                                apr_pool_t *scratch)
{
    lessons_keysource_ref *ref;
    lessons_keyshare_publish_e pub;
    const char *err = NULL, *doc = NULL;
    apr_size_t len = 0;

    src->dormant = 0;
    src->fetching = 1;
    src->wanted = 0;
    src->last_start = started;
    apr_thread_mutex_unlock(src->lock);

    ref = keysource_make(src, NULL, 0, &doc, &len, &err, scratch);
    pub = lessons_keyshare_publish(src->opts.share, src->opts.slot, owner,
                                   apr_time_now(), ref ? doc : NULL,
                                   ref ? len : 0, src->opts.refresh,
                                   src->opts.min_refresh);
    if (ref && pub == LESSONS_KEYSHARE_TOO_BIG) {
        err = apr_psprintf(scratch, "the key set was refused: its document "
                           "(%" APR_SIZE_T_FMT " bytes) does not fit the "
                           "shared block's room for one key source",
                           len);
        keysource_unref(ref);
        ref = NULL;
    }

    apr_thread_mutex_lock(src->lock);
    /* Published (or the same bytes were there): this set is of the
     * slot's generation.  Otherwise (the lease had passed on) it serves
     * here until the slot's next generation is adopted.
     */
    keysource_install(src, ref, err,
                      pub == LESSONS_KEYSHARE_NEW
                      || pub == LESSONS_KEYSHARE_SAME
                      ? lessons_keyshare_generation(src->opts.share,
                                                    src->opts.slot)
                      : src->gen, scratch);
    if (src->opts.done) {
        src->opts.done(src->opts.report_baton, ref != NULL, asked,
                       src->current ? src->current->set : NULL);
    }
    src->fetching = 0;
    src->ended++;
    apr_thread_cond_broadcast(src->done);
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
        apr_time_t now = apr_time_now(), when = 0;
        lessons_keyshare_claim_e rc;
        apr_uint64_t owner;
        apr_interval_time_t nap;

        apr_pool_clear(scratch);
        if (keysource_behind(src)) {
            keysource_catch_up(src, scratch);
            continue;
        }
        if (src->handed) {              /* a request's claim */
            owner = src->handed;
            src->handed = 0;
            keysource_fetch_now(src, owner, 1, now, scratch);
            continue;
        }
        if (src->dormant && !src->wanted) {
            apr_thread_cond_wait(src->wake, src->lock);
            continue;
        }
        /* The schedule's turn (a kid's refetch claims for itself, and
         * hands the claim over).
         */
        owner = keysource_owner(src);
        rc = lessons_keyshare_claim(src->opts.share, src->opts.slot, owner,
                                    now, 0, src->opts.min_refresh,
                                    keysource_lease(src), &when);
        if (rc == LESSONS_KEYSHARE_CLAIMED) {
            keysource_fetch_now(src, owner, 0, now, scratch);
            continue;
        }
        /* Nothing to fetch here now: whoever waited for this round
         * learns so; another process's document is adopted when it
         * comes (polled while someone waits or no set is held).
         */
        src->wanted = 0;
        src->busy_until = rc == LESSONS_KEYSHARE_BUSY ? when : 0;
        src->passes++;
        apr_thread_cond_broadcast(src->done);
        nap = when > now ? when - now : LESSONS_KEYSOURCE_POLL;
        if (rc == LESSONS_KEYSHARE_FAILED
            || ((src->waiters || !src->current)
                && nap > LESSONS_KEYSOURCE_POLL)) {
            nap = LESSONS_KEYSOURCE_POLL;
        }
        apr_thread_cond_timedwait(src->wake, src->lock, nap);
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

/* A block of one slot for a source that has no server's block. */
static apr_status_t keysource_own_share(lessons_keysource_t *src,
                                        apr_pool_t *p)
{
    static const unsigned char id[LESSONS_KEYSHARE_ID_LEN] = { 0 };
    apr_size_t size = lessons_keyshare_size(1, LESSONS_KEYSOURCE_OWN_CAP);
    apr_global_mutex_t *lock;
    apr_status_t rv;

    rv = apr_global_mutex_create(&lock, NULL, APR_LOCK_DEFAULT, p);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    src->opts.share = lessons_keyshare_attach(apr_pcalloc(p, size), size, 1,
                                              LESSONS_KEYSOURCE_OWN_CAP, 1,
                                              lock, p);
    src->opts.slot = 0;
    if (!src->opts.share
        || lessons_keyshare_bind(src->opts.share, 0, id) < 0) {
        return APR_EGENERAL;
    }
    return APR_SUCCESS;
}

apr_status_t lessons_keysource_start(lessons_keysource_t **srcp,
                                     const lessons_keysource_opts_t *opts,
                                     apr_pool_t *p)
{
    lessons_keysource_t *src = apr_pcalloc(p, sizeof(*src));
    apr_status_t rv;

    *srcp = NULL;
    if (!opts->fetch || opts->refresh <= 0 || opts->min_refresh <= 0
        || (opts->share && !opts->parse)) {
        return APR_EINVAL;
    }
    src->opts = *opts;
    src->dormant = opts->lazy;
    /* Claims name the process and the source: two sources of one
     * process (or a test's) never take each other's lease.
     */
    src->owner = ((apr_uint64_t)(apr_uint32_t)getpid() << 32)
                 | ((apr_uint64_t)((apr_uintptr_t)src >> 4) & 0xffff) << 16;
    src->opts.min_refresh = lessons_keysource_min_refresh(opts->refresh,
                                                          opts->min_refresh);
    if ((!src->opts.share
         && (rv = keysource_own_share(src, p)) != APR_SUCCESS)
        || (rv = apr_thread_mutex_create(&src->lock, APR_THREAD_MUTEX_DEFAULT,
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

/* Wait (lock held, at most opts.wait) until this process's fetch in
 * flight, or the fetcher's next round, has ended, or a set came from
 * another process.  A slow provider must not hold every thread: past
 * max_waiters, callers go on at once with what there is (0).
 */
static int keysource_await(lessons_keysource_t *src)
{
    apr_time_t deadline = apr_time_now() + src->opts.wait;
    unsigned long ended = src->ended, passes = src->passes;
    unsigned long installed = src->installed;

    if (src->waiters >= src->opts.max_waiters) {
        return 0;
    }
    src->waiters++;
    apr_thread_cond_signal(src->wake);  /* shorten the fetcher's nap */
    while (src->ended == ended && src->installed == installed
           && (src->passes == passes || src->fetching) && !src->stopping) {
        apr_time_t now = apr_time_now();

        if (now >= deadline) {
            break;
        }
        apr_thread_cond_timedwait(src->done, src->lock, deadline - now);
    }
    src->waiters--;
    return 1;
}

/* Some process's fetch still holds src's slot (also when the slot
 * cannot be read: then the wait keeps its bounds).
 */
static int keysource_slot_fetching(lessons_keysource_t *src,
                                   apr_pool_t *scratch)
{
    lessons_keyshare_view_t view;

    return lessons_keyshare_read(src->opts.share, src->opts.slot, 0, scratch,
                                 &view) != APR_SUCCESS
           || view.lease_until > apr_time_now();
}

/* Another process fetches (its lease ends at until): wait, at most
 * opts.wait, for its document, adopting it.  The wait ends too when
 * another thread of this process (its fetcher, most often) took that
 * generation first, or found it unreadable, and when that fetch ended
 * with nothing newer (it failed) or its lease ran out.  Lock held.
 */
static void keysource_await_other(lessons_keysource_t *src, apr_time_t until,
                                  apr_pool_t *scratch)
{
    apr_time_t deadline = apr_time_now() + src->opts.wait;
    apr_uint64_t gen = src->gen, bad_gen = src->bad_gen;

    if (until < deadline) {
        deadline = until;
    }
    while (!src->stopping && src->gen == gen && src->bad_gen == bad_gen
           && apr_time_now() < deadline) {
        if (keysource_behind(src) || !keysource_slot_fetching(src, scratch)) {
            /* (A document published as the fetch ended is taken.) */
            keysource_catch_up(src, scratch);
            return;
        }
        apr_thread_cond_timedwait(src->done, src->lock,
                                  LESSONS_KEYSOURCE_POLL);
    }
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
    /* Needed now: this process keeps the schedule too (whichever
     * process's turn it is fetches), so the set stays fresh when the one
     * that fetched it is gone.
     */
    if (src->dormant) {
        src->dormant = 0;
        apr_thread_cond_signal(src->wake);
    }
    /* A set another process published is taken at once: a new child
     * serves from it without a fetch of its own.
     */
    keysource_catch_up(src, holder);
    if (!src->current) {
        src->wanted = 1;            /* a round: fetch now if it is time */
        apr_thread_cond_signal(src->wake);
        /* At most max_waiters wait, whoever fetches: past them a request
         * goes on at once, with no set (a 503), rather than hold a thread
         * of this process (another process's fetch of a provider that
         * never answers held every one for 10 s).
         */
        if (keysource_await(src)) {
            if (!src->current && src->fetching) {
                keysource_await(src);   /* the fetch that round began */
            }
            if (!src->current && src->busy_until > apr_time_now()
                && src->waiters < src->opts.max_waiters) {
                src->waiters++;
                keysource_await_other(src, src->busy_until, holder);
                src->waiters--;
            }
        }
        keysource_catch_up(src, holder);
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
    apr_time_t now = apr_time_now(), when = 0;
    unsigned long installed;
    lessons_keyshare_claim_e rc;
    apr_uint64_t owner;
    apr_pool_t *scratch = NULL;
    int waited = 1;

    apr_thread_mutex_lock(src->lock);
    installed = src->installed;
    if (apr_pool_create_unmanaged_ex(&scratch, NULL, NULL) != APR_SUCCESS) {
        apr_thread_mutex_unlock(src->lock);
        return LESSONS_KEYSOURCE_BUSY;
    }
    /* Another process may have fetched the set that has this kid. */
    keysource_catch_up(src, scratch);
    if (src->installed != installed) {
        goto done;
    }
    if (src->fetching || src->handed) {
        waited = keysource_await(src);
        goto done;
    }
    owner = keysource_owner(src);
    rc = lessons_keyshare_claim(src->opts.share, src->opts.slot, owner, now,
                                1, src->opts.min_refresh,
                                keysource_lease(src), &when);
    switch (rc) {
    case LESSONS_KEYSHARE_CLAIMED:
        src->handed = owner;        /* the fetcher fetches under it */
        apr_thread_cond_signal(src->wake);
        waited = keysource_await(src);
        if (src->fetching) {
            waited = keysource_await(src);
        }
        break;
    case LESSONS_KEYSHARE_TOO_SOON:
        if (since) {
            *since = src->opts.min_refresh - (when - now);
        }
        if (until) {
            *until = when - now;
        }
        apr_thread_mutex_unlock(src->lock);
        apr_pool_destroy(scratch);
        return LESSONS_KEYSOURCE_TOO_SOON;
    case LESSONS_KEYSHARE_BUSY:
        if (src->waiters >= src->opts.max_waiters) {
            waited = 0;
            break;
        }
        src->waiters++;
        keysource_await_other(src, when, scratch);
        src->waiters--;
        break;
    default:
        waited = 0;
        break;
    }
done:
    installed = src->installed != installed;
    apr_thread_mutex_unlock(src->lock);
    apr_pool_destroy(scratch);
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
    lessons_keyshare_view_t view;

    lessons_keyshare_read(src->opts.share, src->opts.slot, 0, p, &view);
    apr_thread_mutex_lock(src->lock);
    /* A set another process published counts as held: this process takes
     * it at its next request, without the network.
     */
    state->held = src->current != NULL
                  || (view.generation && view.generation != src->bad_gen);
    state->installed = src->current ? src->installed_at
                       : state->held ? view.changed : 0;
    /* The server's fetches: one process fetches for all of them. */
    state->fetches = src->ended > view.fetches ? src->ended
                                               : (unsigned long)view.fetches;
    state->fetching = src->fetching;
    state->dormant = src->dormant && !src->wanted && !view.generation;
    state->last_err = src->last_err[0] ? apr_pstrdup(p, src->last_err)
                                       : NULL;
    apr_thread_mutex_unlock(src->lock);
}

const char *lessons_keysource_fetch_url(void *baton, apr_pool_t *set_pool,
                                        apr_pool_t *scratch,
                                        const lessons_keyset_t **set,
                                        const char **doc, apr_size_t *doclen)
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
    *doc = body;
    *doclen = len;
    return lessons_keysource_parse(set_pool, scratch, body, len, url->algs,
                                   url->jwks_flags, set);
}

const char *lessons_keysource_parse_url(void *baton, apr_pool_t *set_pool,
                                        apr_pool_t *scratch, const char *doc,
                                        apr_size_t len,
                                        const lessons_keyset_t **set)
{
    const lessons_keysource_url_t *url = baton;

    return lessons_keysource_parse(set_pool, scratch, doc, len, url->algs,
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
