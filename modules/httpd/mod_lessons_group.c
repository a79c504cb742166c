/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_group.c: group commit.  The creates of one process that
 * arrive together share one transaction and one flush to disk, and so do
 * its updates (lessons_group): on SQLite (one writer) a transaction of
 * their statements, on PostgreSQL one statement of up to
 * LESSONS_STORE_BATCH_MAX; each is answered after the commit that holds
 * it.  A write the group could not make is made alone by its own
 * request, as without the group.
 */

#include "httpd/mod_lessons.h"

const lessons_write_kind_t lessons_write_creates = {
    "create(s)", 0, lessons_store_create_many
};

/* An update's statement finds its row by id: two updates of one lesson
 * never share one (which of them lands would be the database's pick),
 * and a share locks its rows in id order, so two shares never wait on
 * each other's.
 */
const lessons_write_kind_t lessons_write_updates = {
    "update(s)", 1, lessons_store_update_many
};

/* Does the engine put writes that arrive together in one transaction:
 * SQLite in one of its own (its writers take turns anyway), PostgreSQL
 * in one statement?  An engine known not to turns the groups off.
 */
int lessons_writes_group(lessons_srv_conf *sconf,
                         const lessons_engine_t *engine)
{
    if (engine && !engine->one_writer && !engine->write_returns) {
        apr_atomic_set32(&sconf->group_off, 1);
        return 0;
    }
    return engine != NULL;
}

/* This request's connection (opened here unless it is already) for a
 * write alone: DECLINED, or the answer.  A connection that shows an
 * engine that does not group writes turns the groups off.  Lent, not
 * kept to the request's end: a write that waits for the other servers'
 * leases (lessons_lease_settle) gives it back first.
 */
int lessons_write_open(lessons_ctx *c, lessons_srv_conf *sconf)
{
    int done;

    if (!c->db.driver && (done = lessons_dbd_open(c)) != DECLINED) {
        return done;
    }
    lessons_writes_group(sconf, lessons_engine_of(c->db.driver));
    return DECLINED;
}

/* This request's turn to write alone, on its connection (opened here
 * unless it is already): DECLINED, or the answer.  Call
 * lessons_dbd_write_end after the write.
 */
int lessons_write_alone(lessons_ctx *c, lessons_srv_conf *sconf)
{
    int done = lessons_write_open(c, sconf);

    return done != DECLINED ? done : lessons_dbd_write_begin(c);
}

/* Jobs not to be made again: each request answers fault, with err. */
static void lessons_jobs_answer(lessons_ctx *c,
                                lessons_store_write_job_t **jobs, int n,
                                lessons_db_fault_e fault, const char *err)
{
    const char *name = lessons_db_name(&c->db, c->r->pool);

    while (n > 0) {
        lessons_store_write_job_t *job = jobs[--n];

        job->rc = LESSONS_STORE_ERROR;
        job->fault = fault;
        job->err = apr_pstrcat(job->pool, name, ": ", err, NULL);
    }
}

/* A leader's run, as its shares go (lessons_group_shares). */
typedef struct {
    lessons_ctx *c;
    const lessons_write_kind_t *kind;
    lessons_store_write_job_t **jobs;
    int n;
    int failed;                     /* the leader's own write alone */
    const char *err;
} lessons_lead_t;

/* A share that failed: nothing of it was kept, and each request makes
 * its own write alone.  Not on PostgreSQL when the connection was lost
 * on the way (whether the share committed is unknown) or the share
 * waited out the time bound (which the writes share): each request
 * answers that, as it would alone.  Which of the two, or LESSONS_DB_OK.
 */
static lessons_db_fault_e lessons_write_unkept(lessons_lead_t *lead,
                                               lessons_store_write_job_t
                                                   **jobs, int n)
{
    lessons_ctx *c = lead->c;
    const lessons_engine_t *engine = lessons_engine_of(c->db.driver);
    const char *err = lead->err ? lead->err : "unknown error";
    lessons_db_fault_e fault = LESSONS_DB_OK;
    int i;

    if (engine && engine->write_returns) {
        fault = lessons_db_fault(&c->db, NULL, err);
        if (fault != LESSONS_DB_UNAVAILABLE && fault != LESSONS_DB_TIMEOUT) {
            fault = LESSONS_DB_OK;
        }
    }
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, c->r, LESSONSLOG(00310)
                  "a group commit of %d %s failed, each is %s: %s",
                  n, lead->kind->what,
                  fault == LESSONS_DB_UNAVAILABLE ? "answered as unknown"
                  : fault == LESSONS_DB_TIMEOUT ? "answered as timed out"
                  : "made alone", err);
    if (fault != LESSONS_DB_OK) {
        lessons_jobs_answer(c, jobs, n, fault, err);
    }
    else {
        for (i = 0; i < n; i++) {
            jobs[i]->rc = LESSONS_STORE_ERROR;
        }
    }
    return fault;
}

static lessons_group_share_e lessons_lead_send(void *baton, int first,
                                               int count)
{
    lessons_lead_t *lead = baton;
    lessons_store_write_job_t **jobs = lead->jobs + first;
    lessons_db_fault_e fault;

    if (lead->kind->many(&lead->c->db, lead->c->r->pool, jobs, count,
                         &lead->err) == LESSONS_STORE_OK) {
        /* Committed by now: a round of INVALIDATEs drawn after this
         * tells the other servers of every write of the share, however
         * late each request comes to wait for one (lessons_lease_settle).
         */
        apr_interval_time_t committed = lessons_lease_clock();
        int i;

        for (i = 0; i < count; i++) {
            jobs[i]->committed = committed;
        }
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, lead->c->r,
                      LESSONSLOG(00309) "%d %s in one transaction",
                      count, lead->kind->what);
        return LESSONS_SHARE_NEXT;
    }
    if (lead->n == 1) {
        /* The leader's own write alone: its failure is this request's
         * answer, as without the group (made again, the same write
         * would run twice and be logged twice).
         */
        lead->failed = 1;
        return LESSONS_SHARE_NEXT;
    }
    if (jobs[0]->fault != LESSONS_DB_OK) {
        return LESSONS_SHARE_NEXT;  /* answered already: not made again */
    }
    fault = lessons_write_unkept(lead, jobs, count);
    return fault == LESSONS_DB_UNAVAILABLE ? LESSONS_SHARE_LOST
           : fault == LESSONS_DB_TIMEOUT ? LESSONS_SHARE_LATE
           : LESSONS_SHARE_NEXT;
}

/* A job and its place in the run (the leader's is 0). */
typedef struct {
    lessons_store_write_job_t *job;
    int at;
} lessons_placed_job_t;

static int lessons_placed_by_id(const void *a, const void *b)
{
    const lessons_placed_job_t *x = a, *y = b;

    if (x->job->id != y->job->id) {
        return x->job->id < y->job->id ? -1 : 1;
    }
    return x->at - y->at;
}

/* The run's jobs in lead->jobs, in the order they go: for a kind that
 * writes by id, in id order, and only the first of each lesson's (the
 * leader's own first of all); the others stay as they are (rc ERROR, no
 * fault), made alone by their own requests.
 */
static void lessons_lead_jobs(lessons_lead_t *lead, apr_pool_t *p,
                              lessons_group_item_t *run)
{
    lessons_placed_job_t *placed;
    lessons_group_item_t *item;
    int n = 0, i;

    for (item = run; item; item = item->next) {
        n++;
    }
    lead->jobs = apr_palloc(p, n * sizeof(*lead->jobs));
    placed = apr_palloc(p, n * sizeof(*placed));
    for (item = run, i = 0; item; item = item->next, i++) {
        placed[i].job = item->job;
        placed[i].at = i;
    }
    if (lead->kind->by_id) {
        qsort(placed, n, sizeof(*placed), lessons_placed_by_id);
    }
    lead->n = 0;
    for (i = 0; i < n; i++) {
        if (lead->kind->by_id && lead->n > 0
            && lead->jobs[lead->n - 1]->id == placed[i].job->id) {
            continue;
        }
        lead->jobs[lead->n++] = placed[i].job;
    }
}

/* Are the statements of shared writes ready on the leader's connection
 * (prepared there the first time it leads a run of several)?  If they
 * cannot be, every job of the run is made alone by its own request, the
 * leader's too, as without the group.
 */
static int lessons_lead_ready(lessons_lead_t *lead)
{
    lessons_ctx *c = lead->c;
    const char *err = NULL;

    if (lead->n < 2
        || lessons_db_ready_batches(&c->db, c->db_pool, c->r->pool, &err)
           == LESSONS_DB_OK) {
        return 1;
    }
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, c->r, LESSONSLOG(00312)
                  "a group commit of %d %s could not prepare its "
                  "statements, each is made alone: %s", lead->n,
                  lead->kind->what, err ? err : "unknown error");
    return 0;
}

/* Lead a group commit: run the jobs of run on this request's connection
 * (under the writers' mutex where writers take turns), in as few
 * transactions as the engine allows (lessons_store_batch_max), as
 * lessons_group_shares sends them.  A job left as it was (rc ERROR, no
 * fault) is made alone by its own request, as without the group: so are
 * those after a share that lost the connection; those after a share that
 * used up the time bound are answered as timed out.  DECLINED, or this
 * request's answer when it has no connection or no turn to write, or its
 * write alone failed.
 */
static int lessons_write_lead(lessons_ctx *c, lessons_srv_conf *sconf,
                              lessons_group_t *group,
                              const lessons_write_kind_t *kind,
                              lessons_group_item_t *run)
{
    request_rec *r = c->r;
    lessons_lead_t lead;
    int done, sent;

    memset(&lead, 0, sizeof(lead));
    lead.c = c;
    lead.kind = kind;
    done = lessons_dbd_open(c);
    if (done == DECLINED
        && lessons_writes_group(sconf, lessons_engine_of(c->db.driver))
        && (done = lessons_dbd_write_begin(c)) == DECLINED) {
        /* The pooled connection, and where writers take turns (SQLite,
         * across processes) the turn, may have been long in coming: what
         * queued meanwhile goes in this commit.
         */
        lessons_group_top_up(group, run);
        lessons_lead_jobs(&lead, r->pool, run);
        if (lessons_lead_ready(&lead)
            && lessons_group_shares(lead.n, lessons_store_batch_max(&c->db),
                                    c->deadline, lessons_lead_send, &lead,
                                    &sent) == LESSONS_SHARE_LATE
            && sent < lead.n) {
            ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, LESSONSLOG(00313)
                          "a group commit of %d %s was not sent, each is "
                          "answered as timed out", lead.n - sent,
                          kind->what);
            lessons_jobs_answer(c, lead.jobs + sent, lead.n - sent,
                                LESSONS_DB_TIMEOUT,
                                "not sent: the group commit's time bound "
                                "was used up by the shares before it");
        }
        lessons_dbd_write_end(c);
    }
    lessons_group_done(group, run);
    /* Answered outside the writers' mutex and the group: a slow client
     * never holds the other writers up.
     */
    return lead.failed ? lessons_dbd_failed(c, lead.err) : done;
}

static apr_status_t lessons_job_pool_destroy(void *pool)
{
    apr_pool_destroy(pool);
    return APR_SUCCESS;
}

int lessons_write_grouped(lessons_ctx *c, lessons_srv_conf *sconf,
                          lessons_group_t *group,
                          const lessons_write_kind_t *kind,
                          lessons_store_write_job_t *job)
{
    request_rec *r = c->r;
    lessons_group_item_t item, *run = NULL;
    int done = DECLINED;

    job->rc = LESSONS_STORE_ERROR;
    job->fault = LESSONS_DB_OK;
    /* The answer is copied into a pool of the job's own, since another
     * request's thread writes it: from the process's locked allocator
     * (sconf->jobs), or one of its own.
     */
    if (apr_pool_create_unmanaged_ex(&job->pool, NULL, sconf->jobs)
        != APR_SUCCESS) {
        return DECLINED;
    }
    apr_pool_cleanup_register(r->pool, job->pool, lessons_job_pool_destroy,
                              apr_pool_cleanup_null);
    memset(&item, 0, sizeof(item));
    item.job = job;
    if (!c->deadline) {
        c->deadline = apr_time_now()
                      + apr_time_from_sec(lessons_db_timeout(sconf));
    }
    switch (lessons_group_join(group, &item, c->deadline, &run)) {
    case LESSONS_GROUP_TIMEOUT:
        /* On PostgreSQL too: the group's leader did not finish. */
        return lessons_dbd_writers_shed(c, "the writes grouped with it");
    case LESSONS_GROUP_LEAD:
        done = lessons_write_lead(c, sconf, group, kind, run);
        break;
    case LESSONS_GROUP_DONE:
        break;
    }
    if (done == DECLINED && job->rc == LESSONS_STORE_ERROR
        && job->fault != LESSONS_DB_OK) {
        return lessons_dbd_answer(c, job->fault, job->err, 1);
    }
    c->committed = job->rc != LESSONS_STORE_ERROR ? job->committed : 0;
    return done;
}
