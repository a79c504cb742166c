/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keysource.h: a key set that changes while the server runs
 * (LessonsJWTKeysURL, a discovered issuer).  A source keeps the last good
 * set and one fetcher thread, so that no request waits on the network but
 * the first ones (before any set) and a token naming a kid the set lacks.
 * Sets are refcounted: a request holds the one it verified with while
 * the fetcher swaps in the next, and the last holder frees it.
 *
 * A source is one process's view of a slot of a lessons_keyshare block
 * (issue 42): the server's processes share one document per source.
 * Whichever process holds the slot's lease fetches, for all of them; the
 * others adopt what it published (parse the same bytes), at once when a
 * request sees the generation move.  So a new child serves from the
 * shared set without waiting, the provider sees about one fetch per
 * refresh per server, and the unknown-kid allowance (one fetch per
 * min_refresh) is the server's, spent only by fetches a kid asked for.
 * Without a block (opts.share NULL) the source makes one of its own.
 *
 * What a fetch does is the caller's (lessons_keysource_fetch_url for a
 * keys URL; a test gives its own), and so is what a report is logged as:
 * this unit knows threads, times and sets, not httpd.
 *
 * A key file's set (lessons_keyset_make) needs none of this: it is read
 * once at start-up and never changes.
 */
#ifndef LESSONS_KEYSOURCE_H
#define LESSONS_KEYSOURCE_H

#include "apr_pools.h"
#include "apr_time.h"
#include "keys/lessons_keyset.h"
#include "keys/lessons_keyshare.h"

typedef struct lessons_keysource lessons_keysource_t;

/* Make a set in set_pool (which the source owns and frees with the set),
 * and give the JWKS document it was made of (*doc, *len, in scratch),
 * which the other processes will parse; NULL, or why there is none.
 * Called by the fetcher thread, without the source's lock: it may take
 * as long as its own time limit.
 */
typedef const char *(*lessons_keysource_fetch_fn)(void *baton,
                                                  apr_pool_t *set_pool,
                                                  apr_pool_t *scratch,
                                                  const lessons_keyset_t **set,
                                                  const char **doc,
                                                  apr_size_t *len);

/* Make a set in set_pool of a document another process fetched (the
 * same rules as the fetch's); NULL, or why not.
 */
typedef const char *(*lessons_keysource_parse_fn)(void *baton,
                                                  apr_pool_t *set_pool,
                                                  apr_pool_t *scratch,
                                                  const char *doc,
                                                  apr_size_t len,
                                                  const lessons_keyset_t **set);

/* What the fetcher did, for the log: set is a set taken into use (it
 * differs from the one before); or err says why a fetch failed, and
 * serving whether a last good set still serves.  A fetch that gave the
 * same set again is not reported.  Called by the fetcher thread, with
 * the source's lock held: it must not call back into the source.
 */
typedef void (*lessons_keysource_report_fn)(void *baton,
                                            const lessons_keyset_t *set,
                                            const char *err, int serving,
                                            apr_pool_t *scratch);

/* After every fetch, good or not, with the source's lock held (after
 * report, and with the same baton): ok says whether it gave a good set
 * (a new one or the same again), asked whether a request woke it (a kid
 * the set lacked), set is the set in use now (NULL: none yet).  For
 * figures that must count every fetch, such as lessons_metrics's.
 */
typedef void (*lessons_keysource_done_fn)(void *baton, int ok, int asked,
                                          const lessons_keyset_t *set);

/* This process took into use a set another process of the server
 * fetched (report and done are the fetching process's).  With the
 * source's lock held, and report's baton.
 */
typedef void (*lessons_keysource_adopted_fn)(void *baton,
                                             const lessons_keyset_t *set);

typedef struct {
    apr_interval_time_t refresh;    /* fetch anyway this often */
    apr_interval_time_t min_refresh;/* never fetch more often than this
                                     * (capped at refresh); also the wait
                                     * after a failed fetch */
    apr_interval_time_t wait;       /* the longest a request waits for a
                                     * fetch (the fetch's own limit) */
    int max_waiters;                /* requests that may wait at once; the
                                     * rest go on with what there is */
    int lazy;                       /* the first fetch waits for the first
                                     * take or refetch (a source that may
                                     * never be needed stays off the
                                     * network); then as any other */
    lessons_keysource_fetch_fn fetch;
    void *fetch_baton;
    lessons_keysource_parse_fn parse;       /* needed with share */
    void *parse_baton;
    lessons_keyshare_t *share;              /* the server's block, made
                                             * before the fork; NULL: one
                                             * of the source's own */
    int slot;                               /* the source's slot in it */
    lessons_keysource_report_fn report;     /* may be NULL */
    lessons_keysource_done_fn done;         /* may be NULL */
    lessons_keysource_adopted_fn adopted;   /* may be NULL */
    void *report_baton;                     /* report's and done's */
} lessons_keysource_opts_t;

/* The min_refresh a source keeps: the one given, never above refresh
 * (a source fetches at least every refresh, whatever else).
 */
apr_interval_time_t lessons_keysource_min_refresh(apr_interval_time_t refresh,
                                                  apr_interval_time_t min_refresh);

/* Start a source: its fetcher thread fetches at once (opts.lazy: at the
 * first take or refetch).  opts is copied.
 * The source stops (the thread is joined, a fetch in flight ends within
 * its own limit, the set is let go) when p is cleared or destroyed.
 */
apr_status_t lessons_keysource_start(lessons_keysource_t **src,
                                     const lessons_keysource_opts_t *opts,
                                     apr_pool_t *p);

/* The current set, held until holder is cleared or destroyed; while the
 * first fetch has not ended, wait for it (bounded by opts.wait; a lazy
 * source's first fetch begins here).  NULL when there is no set yet.
 */
const lessons_keyset_t *lessons_keysource_take(lessons_keysource_t *src,
                                               apr_pool_t *holder);

typedef enum {
    LESSONS_KEYSOURCE_NEW = 0,      /* a new set is in use since the
                                     * caller took its own: take again */
    LESSONS_KEYSOURCE_SAME,         /* fetched (or waited for a fetch in
                                     * flight); the set did not change */
    LESSONS_KEYSOURCE_TOO_SOON,     /* the last fetch began less than
                                     * min_refresh ago: not again */
    LESSONS_KEYSOURCE_BUSY          /* max_waiters wait already: the
                                     * caller went on without waiting */
} lessons_keysource_refetch_e;

/* A token named a kid the set lacks: wake the fetcher unless it began a
 * fetch less than min_refresh ago, and wait (bounded) for the fetch.
 * With TOO_SOON, *since and *until (when not NULL) say how long ago the
 * last fetch began and how long until the next may.
 */
lessons_keysource_refetch_e
lessons_keysource_refetch(lessons_keysource_t *src,
                          apr_interval_time_t *since,
                          apr_interval_time_t *until);

/* What the source has done so far (for tests and the log). */
typedef struct {
    unsigned long fetches;          /* fetches ended, good or not */
    unsigned long installed;        /* sets taken into use */
    int holds;                      /* holds on the current set, its own
                                     * included; 0 when there is none */
    int waiters;                    /* requests waiting now */
} lessons_keysource_stats_t;

void lessons_keysource_stats(lessons_keysource_t *src,
                             lessons_keysource_stats_t *stats);

/* Where the source stands now, without waiting for anything and
 * without starting a fetch (a health check asks this; it must neither
 * block on a slow provider nor wake a lazy source).
 */
typedef struct {
    int held;                       /* a set is in use, or another
                                     * process of the server published
                                     * one this process takes next */
    apr_time_t installed;           /* when it was taken into use; 0:
                                     * none */
    unsigned long fetches;          /* fetches ended, good or not */
    int fetching;                   /* a fetch is in flight */
    int dormant;                    /* lazy, and nobody has asked yet */
    const char *last_err;           /* why the last fetch failed (in p),
                                     * NULL when it gave a set or none
                                     * has ended */
} lessons_keysource_state_t;

void lessons_keysource_state(lessons_keysource_t *src, apr_pool_t *p,
                             lessons_keysource_state_t *state);

/* A keys URL, as lessons_keysource_fetch_url fetches it. */
typedef struct {
    const char *url;
    const char *ca_pem;             /* the only CAs to trust, or NULL for
                                     * the system's */
    apr_size_t ca_len;
    const char *proxy;              /* http://host:port to fetch through
                                     * (a CONNECT tunnel), or NULL */
    lessons_algs_t algs;            /* a key that fits none is skipped */
    int jwks_flags;                 /* LESSONS_JWKS_PSS where a section
                                     * names PS* */
    long connect_timeout_ms, total_timeout_ms;
    int max_redirects;
} lessons_keysource_url_t;

/* fetch for a keys URL (baton: a lessons_keysource_url_t): GET it
 * (lessons_fetch_get) and parse it (lessons_keysource_parse_url).
 */
const char *lessons_keysource_fetch_url(void *baton, apr_pool_t *set_pool,
                                        apr_pool_t *scratch,
                                        const lessons_keyset_t **set,
                                        const char **doc, apr_size_t *len);

/* parse for a keys URL's or discovered issuer's document (baton: a
 * lessons_keysource_url_t, its algs and jwks_flags): as
 * lessons_keysource_parse.
 */
const char *lessons_keysource_parse_url(void *baton, apr_pool_t *set_pool,
                                        apr_pool_t *scratch, const char *doc,
                                        apr_size_t len,
                                        const lessons_keyset_t **set);

/* A fetched JWKS (len bytes) as every fetched set is taken, key by key
 * (lessons_keyset_parse_fetched): public keys only (oct keys skipped),
 * jwks_flags as lessons_keyset_parse_jwks_ex's, a key that fails its
 * checks or fits none of algs skipped with its reason in set->skips.
 * NULL with *set made in set_pool, or "the key set was refused: ..." (in
 * scratch).
 */
const char *lessons_keysource_parse(apr_pool_t *set_pool, apr_pool_t *scratch,
                                    const char *body, apr_size_t len,
                                    lessons_algs_t algs, int jwks_flags,
                                    const lessons_keyset_t **set);

#endif /* LESSONS_KEYSOURCE_H */
