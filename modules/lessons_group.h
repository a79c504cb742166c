/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_group.h: group commit among the threads of one process.  A
 * thread with a write to make queues it; when no other thread is
 * writing for the group and its write is the oldest queued, it leads: it
 * takes its own write and those queued behind it (at most max) and runs
 * them in one transaction, while the others wait.  Writes that queue while a transaction commits go in the
 * next one, so one commit (one fsync) answers many requests, and each is
 * answered only after the commit that holds it.
 *
 * The group only hands work around; what a write is and how it is run
 * is the caller's (lessons_store_create_many).
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

/* The leader has run (or given up on) the jobs of run: wake their
 * threads, and let the next leader take what queued meanwhile.
 */
void lessons_group_done(lessons_group_t *g, lessons_group_item_t *run);

typedef struct {
    apr_uint64_t runs;              /* runs led */
    apr_uint64_t jobs;              /* jobs in them */
    int largest;                    /* jobs in the largest run */
    int waiting;                    /* threads waiting now */
} lessons_group_stats_t;

void lessons_group_stats(lessons_group_t *g, lessons_group_stats_t *st);

#endif /* LESSONS_GROUP_H */
