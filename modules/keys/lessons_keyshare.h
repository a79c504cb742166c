/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keyshare.h: the key set documents of a server's key sources
 * (keys URLs, discovered issuers), shared by all its processes (issue
 * 42).  One block of shared memory, made before the fork and kept across
 * restarts, holds a slot per source: the last good JWKS document as
 * fetched, a generation that grows with each new one, the fetch schedule
 * and a lease, so that one process fetches for the server while the
 * others adopt what it published.
 *
 * Every change to a slot, and every copy of its document, is made under
 * one cross-process lock, so no reader sees half a document; a request's
 * only cost is an atomic read of the generation, and a process copies
 * and parses a document once per generation.  The lock is never held
 * over the network.
 *
 * The unit knows times, bytes and the lock, not httpd, sets or curl.
 */
#ifndef LESSONS_KEYSHARE_H
#define LESSONS_KEYSHARE_H

#include "apr_global_mutex.h"
#include "apr_pools.h"
#include "apr_time.h"

#define LESSONS_KEYSHARE_ID_LEN  32     /* a source's identity (SHA-256) */

typedef struct lessons_keyshare lessons_keyshare_t;

/* The bytes a block of nslots slots of cap document bytes each needs. */
apr_size_t lessons_keyshare_size(int nslots, apr_size_t cap);

/* The block at base (size bytes, from lessons_keyshare_size) in p:
 * laid out anew when fresh or when what is there was laid out for
 * another shape, else kept as it is (a restart).  lock guards it in
 * every process (apr_global_mutex_child_init in children).  NULL when
 * size is too small.
 */
lessons_keyshare_t *lessons_keyshare_attach(void *base, apr_size_t size,
                                            int nslots, apr_size_t cap,
                                            int fresh,
                                            apr_global_mutex_t *lock,
                                            apr_pool_t *p);

/* Give slot i to the source whose identity is id (what decides how its
 * document is fetched and read: URL, issuer or not, CA, algorithms).
 * A slot that held another source's document is emptied; one that held
 * this source's (a restart with the same settings) keeps its document
 * and counts, and is due for a fetch at once.  In the parent, before the fork.  1 kept, 0
 * emptied, -1 no such slot or the lock failed.
 */
int lessons_keyshare_bind(lessons_keyshare_t *ks, int i,
                          const unsigned char id[LESSONS_KEYSHARE_ID_LEN]);

/* Give each of n sources (ids[k]) a slot, in slots[k]: the slot that
 * held its document before (a restart) when there is one, else one that
 * no source of ids holds, emptied.  In the parent, before the fork, with
 * n at most the block's slots.  The number of sources that kept their
 * slot, or -1 (too many sources, the lock failed).
 */
int lessons_keyshare_assign(lessons_keyshare_t *ks,
                            const unsigned char (*ids)[LESSONS_KEYSHARE_ID_LEN],
                            int n, int *slots);

/* This process uses slot i for the source whose identity is id (in
 * child_init, after lessons_keyshare_assign gave it in the parent):
 * from then on, if a later reload gives the slot to another source, this
 * process (a child of the older generation, still ending its requests)
 * reads generation 0 from it, cannot claim it (FAILED) or publish to it
 * (NOT_OWNER), and copies nothing from it (APR_EINVAL).  0, or -1 for
 * no such slot.
 */
int lessons_keyshare_expect(lessons_keyshare_t *ks, int i,
                            const unsigned char id[LESSONS_KEYSHARE_ID_LEN],
                            apr_pool_t *p);

/* The slot's generation: 0 while it holds no document.  Lock-free. */
apr_uint64_t lessons_keyshare_generation(lessons_keyshare_t *ks, int i);

typedef enum {
    LESSONS_KEYSHARE_CLAIMED = 0,   /* the caller fetches now, and must
                                     * publish, good or not */
    LESSONS_KEYSHARE_NOT_DUE,       /* nothing to do until *when */
    LESSONS_KEYSHARE_BUSY,          /* another process fetches (its lease
                                     * ends at *when) */
    LESSONS_KEYSHARE_TOO_SOON,      /* asked: a kid asked for a fetch
                                     * less than min_refresh ago (the next
                                     * may begin at *when) */
    LESSONS_KEYSHARE_FAILED         /* the lock failed, or the slot is no
                                     * longer this process's source's */
} lessons_keyshare_claim_e;

/* Ask to fetch for slot i at now.  Scheduled (asked 0): when the
 * schedule says so (at once for an empty slot).  Asked (a token named a
 * kid the set lacks): when no asked fetch began within min_refresh, a
 * reload's fetches and the schedule's not counting.  Either way only one
 * process at a time holds the lease, for at most lease (a process that
 * dies with it holds nothing after that).  owner names the claimant for
 * lessons_keyshare_publish.
 */
lessons_keyshare_claim_e lessons_keyshare_claim(lessons_keyshare_t *ks,
                                                int i, apr_uint64_t owner,
                                                apr_time_t now, int asked,
                                                apr_interval_time_t min_refresh,
                                                apr_interval_time_t lease,
                                                apr_time_t *when);

typedef enum {
    LESSONS_KEYSHARE_NEW = 0,       /* a new document, generation + 1 */
    LESSONS_KEYSHARE_SAME,          /* the same bytes again: kept */
    LESSONS_KEYSHARE_KEPT,          /* the fetch failed: the last good
                                     * document (if any) is kept */
    LESSONS_KEYSHARE_TOO_BIG,       /* over the slot's cap: refused, the
                                     * last good one kept */
    LESSONS_KEYSHARE_NOT_OWNER,     /* the lease had passed to another */
    LESSONS_KEYSHARE_LOCK_FAILED
} lessons_keyshare_publish_e;

/* The end of a claimed fetch: doc (len bytes) when it gave a good set,
 * NULL when it failed.  The next scheduled fetch is due refresh after
 * now when good, min_refresh after now when not.
 */
lessons_keyshare_publish_e lessons_keyshare_publish(lessons_keyshare_t *ks,
                                                    int i, apr_uint64_t owner,
                                                    apr_time_t now,
                                                    const char *doc,
                                                    apr_size_t len,
                                                    apr_interval_time_t refresh,
                                                    apr_interval_time_t min_refresh);

/* What a slot holds, copied out under the lock. */
typedef struct {
    apr_uint64_t generation;        /* 0: no document yet */
    const char *doc;                /* in the caller's pool, NUL-ended */
    apr_size_t len;
    apr_time_t fetched;             /* when the document's fetch began */
    apr_time_t changed;             /* when it became this generation */
    apr_time_t last_fetch;          /* when the last fetch (any) began */
    apr_time_t next_fetch;          /* when the schedule fetches next */
    apr_uint64_t fetches;           /* fetches ended, for the server */
    apr_uint64_t failures;          /* ... of them failed */
    apr_uint64_t asked;             /* ... of them a kid asked for */
    apr_time_t lease_until;         /* a fetch in flight holds the slot
                                     * until then; 0: none in flight */
} lessons_keyshare_view_t;

/* Copy slot i (its document only when with_doc) into *view, in p. */
apr_status_t lessons_keyshare_read(lessons_keyshare_t *ks, int i,
                                   int with_doc, apr_pool_t *p,
                                   lessons_keyshare_view_t *view);

#endif /* LESSONS_KEYSHARE_H */
