/* Licensed under the Apache License, Version 2.0.
 *
 * test_group.c: lessons_group -- a job queued while a run is under way
 * goes in the next run, led by the oldest, which takes its own job
 * first and then the others in queue order; a run takes at most max; a queued job leaves at its
 * deadline and is never run after; a leader whose turn to write comes
 * takes what queued meanwhile; a taken job's thread waits for the
 * run past its deadline; a leader's run goes in few shares of even
 * sizes, and none after one that lost its connection or its time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_thread_proc.h"
#include "apr_time.h"

#include "store/lessons_group.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define SOON(ms) (apr_time_now() + apr_time_from_msec(ms))

/* A job: who ran it, and in a run of how many. */
typedef struct {
    int name;
    int ran_by;                     /* the leader's name; 0: not run */
    int run_size;
} job_t;

/* A thread that joins with its job, and runs the run if it leads. */
typedef struct {
    lessons_group_t *g;
    apr_time_t deadline;
    job_t job;
    lessons_group_item_t item;
    lessons_group_e how;
    int order[8];                   /* if it led: the names it ran */
    int n;
    apr_interval_time_t hold;       /* if it leads: its run's length */
} joiner_t;

static void run_all(joiner_t *j, lessons_group_item_t *run)
{
    lessons_group_item_t *i;
    int n = 0;

    for (i = run; i; i = i->next) {
        n++;
    }
    for (i = run; i; i = i->next) {
        job_t *job = i->job;

        job->ran_by = j->job.name;
        job->run_size = n;
        if (j->n < 8) {
            j->order[j->n++] = job->name;
        }
    }
    if (j->hold) {
        apr_sleep(j->hold);
    }
    lessons_group_done(j->g, run);
}

static void *APR_THREAD_FUNC joiner(apr_thread_t *t, void *data)
{
    joiner_t *j = data;
    lessons_group_item_t *run = NULL;

    j->item.job = &j->job;
    j->how = lessons_group_join(j->g, &j->item, j->deadline, &run);
    if (j->how == LESSONS_GROUP_LEAD) {
        run_all(j, run);
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static apr_thread_t *start(joiner_t *j, lessons_group_t *g, int name,
                           apr_time_t deadline)
{
    apr_thread_t *t = NULL;

    memset(j, 0, sizeof(*j));
    j->g = g;
    j->job.name = name;
    j->deadline = deadline;
    assert_int_equal(apr_thread_create(&t, NULL, joiner, j, pool),
                     APR_SUCCESS);
    return t;
}

static void join_thread(apr_thread_t *t)
{
    apr_status_t rv;

    assert_int_equal(apr_thread_join(&rv, t), APR_SUCCESS);
}

/* Until n threads wait in the group (at most 5 s). */
static void until_waiting(lessons_group_t *g, int n)
{
    lessons_group_stats_t st;
    int i;

    for (i = 0; i < 5000; i++) {
        lessons_group_stats(g, &st);
        if (st.waiting >= n) {
            return;
        }
        apr_sleep(apr_time_from_msec(1));
    }
    fail_msg("%d threads never waited", n);
}

static void expect_stats(lessons_group_t *g, int runs, int jobs,
                         int largest)
{
    lessons_group_stats_t st;

    lessons_group_stats(g, &st);
    assert_int_equal(st.runs, runs);
    assert_int_equal(st.jobs, jobs);
    assert_int_equal(st.largest, largest);
}

/* This thread leads a run of its own job (name 1): it holds the group
 * until it calls lessons_group_done on *run.
 */
static void lead_alone(lessons_group_t *g, joiner_t *me,
                       lessons_group_item_t **run)
{
    memset(me, 0, sizeof(*me));
    me->g = g;
    me->job.name = 1;
    me->item.job = &me->job;
    assert_int_equal(lessons_group_join(g, &me->item, SOON(5000), run),
                     LESSONS_GROUP_LEAD);
    assert_ptr_equal(*run, &me->item);
    assert_null((*run)->next);
}

static void test_alone_leads(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 4);
    lessons_group_item_t *run;
    joiner_t me;

    (void)state;
    assert_non_null(g);
    lead_alone(g, &me, &run);
    run_all(&me, run);
    assert_int_equal(me.job.ran_by, 1);
    lead_alone(g, &me, &run);
    run_all(&me, run);
    expect_stats(g, 2, 2, 1);
}

/* Jobs 2 to n + 1 queue, in that order, while run 1 (this thread's) is
 * under way; if top_up, run 1 then takes what it can of them
 * (lessons_group_top_up), and must hold top_up jobs, in queue order;
 * then run 1 ends and the rest run as the group lets them.
 */
static void queue_behind_run_one(lessons_group_t *g, joiner_t *j, int n,
                                 int top_up)
{
    lessons_group_item_t *run, *item;
    joiner_t me;
    apr_thread_t *t[4];
    int i;

    assert_true(n <= 4);
    lead_alone(g, &me, &run);
    for (i = 0; i < n; i++) {
        t[i] = start(&j[i], g, i + 2, SOON(5000));
        until_waiting(g, i + 1);
    }
    if (top_up) {
        assert_int_equal(lessons_group_top_up(g, run), top_up);
        for (item = run, i = 0; item; item = item->next, i++) {
            assert_int_equal(((job_t *)item->job)->name, i + 1);
        }
        assert_int_equal(i, top_up);
    }
    run_all(&me, run);
    for (i = 0; i < n; i++) {
        join_thread(t[i]);
    }
}

static void three_queue_behind_run_one(lessons_group_t *g, joiner_t j[3])
{
    queue_behind_run_one(g, j, 3, 0);
}

/* 2, the oldest, leads the next run, which holds all three in the order
 * they queued; 3 and 4 are told DONE.
 */
static void test_those_who_queue_meanwhile_share_a_run(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 8);
    joiner_t j[3];
    int i;

    (void)state;
    three_queue_behind_run_one(g, j);
    for (i = 0; i < 3; i++) {
        assert_int_equal(j[i].job.run_size, 3);
        assert_int_equal(j[i].job.ran_by, 2);
        assert_int_equal(j[i].how, i == 0 ? LESSONS_GROUP_LEAD
                                          : LESSONS_GROUP_DONE);
    }
    assert_int_equal(j[0].n, 3);
    assert_int_equal(j[0].order[0], 2);
    assert_int_equal(j[0].order[1], 3);
    assert_int_equal(j[0].order[2], 4);
    expect_stats(g, 2, 4, 3);
}

/* max 2: the next run takes 2 and 3, the oldest; 4 then runs alone. */
static void test_a_run_takes_at_most_max(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 2);
    joiner_t j[3];

    (void)state;
    three_queue_behind_run_one(g, j);
    assert_int_equal(j[0].job.run_size, 2);
    assert_int_equal(j[0].job.ran_by, 2);
    assert_int_equal(j[1].job.run_size, 2);
    assert_int_equal(j[1].job.ran_by, 2);
    assert_int_equal(j[2].job.run_size, 1);
    assert_int_equal(j[2].job.ran_by, 4);
    assert_int_equal(j[2].how, LESSONS_GROUP_LEAD);
    expect_stats(g, 3, 4, 2);
}

/* The leader tops its run up when its turn to write comes: jobs 2 and 3,
 * queued after it took its run of one, go in its commit, in queue order,
 * and their threads are told DONE; with max 2 only job 2 does, and job 3
 * leads the next run.
 */
static void test_leader_tops_up_its_run(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 8);
    joiner_t j[2];
    int k;

    (void)state;
    queue_behind_run_one(g, j, 2, 3);
    for (k = 0; k < 2; k++) {
        assert_int_equal(j[k].how, LESSONS_GROUP_DONE);
        assert_int_equal(j[k].job.ran_by, 1);
        assert_int_equal(j[k].job.run_size, 3);
    }
    expect_stats(g, 1, 3, 3);
}

static void test_top_up_takes_at_most_max(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 2);
    joiner_t j[2];

    (void)state;
    queue_behind_run_one(g, j, 2, 2);
    assert_int_equal(j[0].how, LESSONS_GROUP_DONE);
    assert_int_equal(j[0].job.ran_by, 1);
    assert_int_equal(j[1].how, LESSONS_GROUP_LEAD);
    assert_int_equal(j[1].job.ran_by, 3);
    assert_int_equal(j[1].job.run_size, 1);
    expect_stats(g, 2, 3, 2);
}

/* Nothing queued: the run stays as it was. */
static void test_top_up_of_nothing(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 8);
    lessons_group_item_t *run;
    joiner_t me;

    (void)state;
    lead_alone(g, &me, &run);
    assert_int_equal(lessons_group_top_up(g, run), 1);
    assert_null(run->next);
    run_all(&me, run);
    expect_stats(g, 1, 1, 1);
}

/* A job still queued at its deadline leaves, and no later run takes it. */
static void test_queued_job_leaves_at_its_deadline(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 8);
    lessons_group_item_t *run;
    joiner_t me, j;
    apr_thread_t *t;

    (void)state;
    lead_alone(g, &me, &run);
    t = start(&j, g, 2, SOON(100));
    join_thread(t);
    assert_int_equal(j.how, LESSONS_GROUP_TIMEOUT);
    assert_int_equal(j.job.ran_by, 0);
    run_all(&me, run);
    lead_alone(g, &me, &run);       /* asserts a run of its own job only */
    run_all(&me, run);
    assert_int_equal(j.job.ran_by, 0);
}

/* A taken job's thread waits for its run, however long past its
 * deadline: the leader writes into the job until it is done.  Job 2
 * leads a run of 2.5 s that takes job 3, whose deadline is 1.5 s away
 * (room for a busy machine to let the run begin first).
 */
static void test_taken_job_waits_past_its_deadline(void **state)
{
    lessons_group_t *g = lessons_group_make(pool, 8);
    lessons_group_item_t *run;
    joiner_t me, leader, late;
    apr_thread_t *tl, *tj;
    apr_time_t t0;

    (void)state;
    lead_alone(g, &me, &run);
    tl = start(&leader, g, 2, SOON(5000));
    leader.hold = apr_time_from_msec(2500);
    until_waiting(g, 1);
    t0 = apr_time_now();
    tj = start(&late, g, 3, SOON(1500));
    until_waiting(g, 2);
    run_all(&me, run);
    join_thread(tj);
    assert_true(apr_time_now() - t0 >= apr_time_from_msec(2500));
    join_thread(tl);
    assert_int_equal(leader.how, LESSONS_GROUP_LEAD);
    assert_int_equal(late.how, LESSONS_GROUP_DONE);
    assert_int_equal(late.job.ran_by, 2);
}

/* A leader's send function that records each share it is given and
 * answers as told; the share numbered `stop_at` answers `stop`.  If
 * `sleep_ms`, the first share takes that long.
 */
typedef struct {
    int first[16], count[16];
    int shares;
    int stop_at;                    /* 0: none */
    lessons_group_share_e stop;
    int sleep_ms;
} sender_t;

static lessons_group_share_e record_share(void *baton, int first, int count)
{
    sender_t *s = baton;

    assert_true(s->shares < 16);
    s->first[s->shares] = first;
    s->count[s->shares] = count;
    s->shares++;
    if (s->sleep_ms && s->shares == 1) {
        apr_sleep(apr_time_from_msec(s->sleep_ms));
    }
    return s->shares == s->stop_at ? s->stop : LESSONS_SHARE_NEXT;
}

/* Runs n jobs at most `most` a share with all the time there is, and
 * checks the shares' sizes, in order, and that they cover the run.
 */
static void check_shares(int n, int most, int nsizes, ...)
{
    sender_t s;
    va_list ap;
    int i, sent = -1, at = 0;

    memset(&s, 0, sizeof(s));
    assert_int_equal(lessons_group_shares(n, most, SOON(60000), record_share,
                                          &s, &sent), LESSONS_SHARE_NEXT);
    assert_int_equal(sent, n);
    assert_int_equal(s.shares, nsizes);
    va_start(ap, nsizes);
    for (i = 0; i < nsizes; i++) {
        assert_int_equal(s.first[i], at);
        assert_int_equal(s.count[i], va_arg(ap, int));
        at += s.count[i];
    }
    va_end(ap);
    assert_int_equal(at, n);
}

/* As few shares as the cap allows, of even sizes: no share of 1 in a
 * run of several (a lone create's failure is its own answer).
 */
static void test_shares_are_few_and_even(void **state)
{
    (void)state;
    check_shares(1, 8, 1, 1);
    check_shares(8, 8, 1, 8);
    check_shares(9, 8, 2, 5, 4);
    check_shares(16, 8, 2, 8, 8);
    check_shares(17, 8, 3, 6, 6, 5);
    check_shares(25, 8, 4, 7, 6, 6, 6);
    check_shares(12, 0x7fffffff, 1, 12);    /* SQLite: no cap */
    check_shares(3, 0, 3, 1, 1, 1);         /* a cap below 1 is 1 */
}

/* Runs 24 jobs, 8 a share, where share stop_at answers stop: how the
 * run ended, and how many shares and jobs went.
 */
static void check_stop(int stop_at, lessons_group_share_e stop,
                       int shares, int sent_jobs)
{
    sender_t s;
    int sent = -1;

    memset(&s, 0, sizeof(s));
    s.stop_at = stop_at;
    s.stop = stop;
    assert_int_equal(lessons_group_shares(24, 8, SOON(60000), record_share,
                                          &s, &sent), stop);
    assert_int_equal(s.shares, shares);
    assert_int_equal(sent, sent_jobs);
}

/* After a share that lost its connection none follows on it: the rest
 * are left to be made alone.  After one that used up the time bound,
 * none follows either: the rest are late.
 */
static void test_no_share_after_a_lost_one(void **state)
{
    (void)state;
    check_stop(1, LESSONS_SHARE_LOST, 1, 8);
    check_stop(2, LESSONS_SHARE_LOST, 2, 16);
    check_stop(2, LESSONS_SHARE_LATE, 2, 16);
}

/* The first share always goes; no other goes once the deadline has
 * come, and the rest are left as late.
 */
static void test_no_share_past_the_deadline(void **state)
{
    sender_t s;
    int sent = -1;

    (void)state;
    memset(&s, 0, sizeof(s));
    assert_int_equal(lessons_group_shares(16, 8, apr_time_now() - 1,
                                          record_share, &s, &sent),
                     LESSONS_SHARE_LATE);
    assert_int_equal(s.shares, 1);
    assert_int_equal(sent, 8);

    /* The deadline comes while the first share is on its way. */
    memset(&s, 0, sizeof(s));
    s.sleep_ms = 30;
    assert_int_equal(lessons_group_shares(16, 8, SOON(10), record_share,
                                          &s, &sent), LESSONS_SHARE_LATE);
    assert_int_equal(s.shares, 1);
    assert_int_equal(sent, 8);

    /* A run of one share has nothing to stop. */
    memset(&s, 0, sizeof(s));
    assert_int_equal(lessons_group_shares(8, 8, apr_time_now() - 1,
                                          record_share, &s, &sent),
                     LESSONS_SHARE_NEXT);
    assert_int_equal(sent, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone_leads),
        cmocka_unit_test(test_those_who_queue_meanwhile_share_a_run),
        cmocka_unit_test(test_a_run_takes_at_most_max),
        cmocka_unit_test(test_leader_tops_up_its_run),
        cmocka_unit_test(test_top_up_takes_at_most_max),
        cmocka_unit_test(test_top_up_of_nothing),
        cmocka_unit_test(test_queued_job_leaves_at_its_deadline),
        cmocka_unit_test(test_taken_job_waits_past_its_deadline),
        cmocka_unit_test(test_shares_are_few_and_even),
        cmocka_unit_test(test_no_share_after_a_lost_one),
        cmocka_unit_test(test_no_share_past_the_deadline),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
