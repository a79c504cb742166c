/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_group.h: group commit among the threads of one process.  A
 * thread with a write to make queues it; when no other thread is
 * writing for the group and its write is the oldest queued, it leads: it
 * takes its own write and those queued behind it (at most max) and runs
 * them in one transaction, while the others wait; when its turn to write
 * comes it takes those that queued meanwhile too.  Writes that queue
 * while a transaction commits go in the next one, so one commit (one
 * fsync) answers many requests, and each is answered only after the
 * commit that holds it.
 *
 * The group only hands work around; what a write is and how it is run
 * is the caller's (lessons_store_create_many, lessons_store_update_many).
 */
#ifndef LESSONS_GROUP_H
#define LESSONS_GROUP_H

#include "apr_pools.h"
#include "apr_time.h"

typedef struct lessons_group_t lessons_group_t;

/* One thread's write.  job is the caller's; the rest is the group's. */
typedef struct lessons_group_item_t lessons_group_item_t;
struct lessons_group_item_t {
    void *job;
    lessons_group_item_t *next;     /* in the queue, then in the run */
    int state;
};

typedef enum {
    LESSONS_GROUP_DONE = 0,         /* another thread ran the job */
    LESSONS_GROUP_LEAD,             /* run *run (this item first), then
                                     * call lessons_group_done */
    LESSONS_GROUP_TIMEOUT           /* the deadline came while the job
                                     * was still queued: it is not run */
} lessons_group_e;

/* A group in p (a child's pool) whose runs take at most max jobs; NULL
 * if its lock cannot be made.
 */
lessons_group_t *lessons_group_make(apr_pool_t *p, int max);

/* Queue item and wait until another thread has run it, or until this
 * thread leads.  A job another thread has taken is waited for past the
 * deadline: its memory is that thread's to write until it is done.
 */
lessons_group_e lessons_group_join(lessons_group_t *g,
                                   lessons_group_item_t *item,
                                   apr_time_t deadline,
                                   lessons_group_item_t **run);

/* The leader, its turn to write come (it may have waited for it): add
 * to run the jobs that queued since it took the run, up to max, so that
 * they go in this commit rather than wait for the next.  Returns the
 * run's length.
 */
int lessons_group_top_up(lessons_group_t *g, lessons_group_item_t *run);

/* The leader has run (or given up on) the jobs of run: wake their
 * threads, and let the next leader take what queued meanwhile.
 */
void lessons_group_done(lessons_group_t *g, lessons_group_item_t *run);

/* How a share went, as the leader's send function tells it. */
typedef enum {
    LESSONS_SHARE_NEXT = 0,         /* committed, or failed in a way that
                                     * leaves the next share free to go */
    LESSONS_SHARE_LOST,             /* the connection was lost: no share
                                     * follows on it, the rest are made
                                     * alone, each on its own */
    LESSONS_SHARE_LATE              /* the time bound is used up: the rest
                                     * are answered as timed out */
} lessons_group_share_e;

/* Send count jobs from the first (an index into the run) as one share. */
typedef lessons_group_share_e (*lessons_group_send_fn)(void *baton,
                                                       int first, int count);

/* A leader's run of n jobs, sent in as few shares as most a share
 * allows, of even sizes (9 with most 8 is 5 + 4), so that in a run of
 * several no share holds a job alone: a job alone is its request's own,
 * and its failure is that request's answer, not a reason to make it
 * again.  Shares go one after another until one is LOST or LATE, or
 * deadline has come between two (the first always goes).  Returns
 * NEXT when all were sent, or how they stopped; *sent is the number of
 * jobs sent (those from *sent on were not).
 */
lessons_group_share_e lessons_group_shares(int n, int most,
                                           apr_time_t deadline,
                                           lessons_group_send_fn send,
                                           void *baton, int *sent);

typedef struct {
    apr_uint64_t runs;              /* runs led */
    apr_uint64_t jobs;              /* jobs in them */
    int largest;                    /* jobs in the largest run */
    int waiting;                    /* threads waiting now */
} lessons_group_stats_t;

void lessons_group_stats(lessons_group_t *g, lessons_group_stats_t *st);

#endif /* LESSONS_GROUP_H */
