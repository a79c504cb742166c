/* Licensed under the Apache License, Version 2.0.
 *
 * test_flight.c: lessons_flight -- a thread takes only the answer of a
 * read sent after it asked (never one on its way, never one that
 * landed before); those that ask together share one; a failed read
 * sends its waiters to read alone; the deadline holds; a window spaces
 * the reads, for a lone client too, and those who ask together send
 * theirs before it ends, without waiting for one who left; many threads
 * asking at once are never left asleep and never see a torn answer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "apr_atomic.h"
#include "apr_thread_proc.h"
#include "apr_time.h"

#include "store/lessons_flight.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define SOON(ms) (apr_time_now() + apr_time_from_msec(ms))

/* A thread that asks once and says what it got. */
typedef struct {
    lessons_flight_t *f;
    apr_time_t deadline;
    lessons_flight_e how;
    char value[LESSONS_FLIGHT_MAX];
    apr_size_t len;
    int lead_lands;                 /* if it leads: 1 land "lead", 2 land
                                     * a failure, 3 land too much */
    apr_time_t at;                  /* when the join returned */
} asker_t;

static void *APR_THREAD_FUNC ask(apr_thread_t *t, void *data)
{
    asker_t *a = data;

    a->how = lessons_flight_join(a->f, a->deadline, a->value, &a->len);
    a->at = apr_time_now();
    static const char big[LESSONS_FLIGHT_MAX + 1];

    if (a->how == LESSONS_FLIGHT_LEAD && a->lead_lands == 1) {
        lessons_flight_land(a->f, "lead", 5);
    }
    else if (a->how == LESSONS_FLIGHT_LEAD && a->lead_lands == 2) {
        lessons_flight_land(a->f, NULL, 0);
    }
    else if (a->how == LESSONS_FLIGHT_LEAD && a->lead_lands == 3) {
        lessons_flight_land(a->f, big, sizeof(big));
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

/* An asker of f until deadline, landing as lands says if it leads. */
static void asker_init(asker_t *a, lessons_flight_t *f, apr_time_t deadline,
                       int lands)
{
    memset(a, 0, sizeof(*a));
    a->f = f;
    a->deadline = deadline;
    a->lead_lands = lands;
}

static apr_thread_t *start(asker_t *a)
{
    apr_thread_t *t = NULL;

    assert_int_equal(apr_thread_create(&t, NULL, ask, a, pool), APR_SUCCESS);
    return t;
}

static void join_thread(apr_thread_t *t)
{
    apr_status_t rv;

    assert_int_equal(apr_thread_join(&rv, t), APR_SUCCESS);
}

/* Until n threads wait in the flight (at most 5 s). */
static void until_waiting(lessons_flight_t *f, int n)
{
    lessons_flight_stats_t st;
    int i;

    for (i = 0; i < 5000; i++) {
        lessons_flight_stats(f, &st);
        if (st.waiting >= n) {
            return;
        }
        apr_sleep(apr_time_from_msec(1));
    }
    fail_msg("%d threads never waited", n);
}

/* Alone, every ask leads: an answer that landed before is never
 * taken, however recent.
 */
static void test_alone_every_ask_reads(void **state)
{
    lessons_flight_t *f = lessons_flight_make(pool, 0);
    lessons_flight_stats_t st;
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;
    int i;

    (void)state;
    assert_non_null(f);
    for (i = 0; i < 3; i++) {
        assert_int_equal(lessons_flight_join(f, SOON(1000), v, &len),
                         LESSONS_FLIGHT_LEAD);
        lessons_flight_land(f, "x", 2);
    }
    lessons_flight_stats(f, &st);
    assert_int_equal(st.reads, 3);
    assert_int_equal(st.shared, 0);
}

/* B asks while A's read is on its way: it must not take A's answer,
 * and reads itself once A's has landed.
 */
static void test_never_a_read_sent_before(void **state)
{
    lessons_flight_t *f = lessons_flight_make(pool, 0);
    asker_t b;
    apr_thread_t *t;
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;

    (void)state;
    assert_int_equal(lessons_flight_join(f, SOON(1000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    asker_init(&b, f, SOON(5000), 0);
    t = start(&b);
    until_waiting(f, 1);
    lessons_flight_land(f, "old", 4);
    join_thread(t);
    assert_int_equal(b.how, LESSONS_FLIGHT_LEAD);
    lessons_flight_land(f, "new", 4);
}

/* Read 1 is on its way (this thread leads it) when b and c ask, each
 * landing its own read as lands says if it leads; then read 1 lands and
 * both are done.
 */
static lessons_flight_t *two_ask_during_read_one(int lands, asker_t *b,
                                                 asker_t *c)
{
    lessons_flight_t *f = lessons_flight_make(pool, 0);
    apr_thread_t *tb, *tc;
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;

    assert_int_equal(lessons_flight_join(f, SOON(1000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    asker_init(b, f, SOON(5000), lands);
    *c = *b;
    tb = start(b);
    tc = start(c);
    until_waiting(f, 2);
    lessons_flight_land(f, "old", 4);
    join_thread(tb);
    join_thread(tc);
    return f;
}

/* B and C ask while A's read is on its way: after it lands, one of
 * them reads and the other takes that read's answer.
 */
static void test_those_who_ask_together_share(void **state)
{
    lessons_flight_stats_t st;
    asker_t b, c, *shared;
    lessons_flight_t *f = two_ask_during_read_one(1, &b, &c);

    (void)state;
    assert_true((b.how == LESSONS_FLIGHT_LEAD && c.how == LESSONS_FLIGHT_SHARED)
                || (c.how == LESSONS_FLIGHT_LEAD
                    && b.how == LESSONS_FLIGHT_SHARED));
    shared = b.how == LESSONS_FLIGHT_SHARED ? &b : &c;
    assert_int_equal(shared->len, 5);
    assert_string_equal(shared->value, "lead");
    lessons_flight_stats(f, &st);
    assert_int_equal(st.reads, 2);
    assert_int_equal(st.shared, 1);
}

/* Two ask while read 1 is on its way; one of them sends read 2, which
 * fails (lands = 2) or answers more than can be shared (lands = 3):
 * the other, which waited for it, reads alone.  The next ask leads.
 */
static void one_fails(int lands)
{
    asker_t b, c;
    lessons_flight_t *f = two_ask_during_read_one(lands, &b, &c);
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;

    assert_true((b.how == LESSONS_FLIGHT_LEAD && c.how == LESSONS_FLIGHT_ALONE)
                || (c.how == LESSONS_FLIGHT_LEAD
                    && b.how == LESSONS_FLIGHT_ALONE));
    assert_int_equal(lessons_flight_join(f, SOON(1000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    lessons_flight_land(f, "x", 2);
}

static void test_failed_read_sends_waiters_alone(void **state)
{
    (void)state;
    one_fails(2);
}

static void test_too_large_is_not_shared(void **state)
{
    (void)state;
    one_fails(3);
}

/* A read that never lands: the waiter leaves at its deadline, alone. */
static void test_deadline(void **state)
{
    lessons_flight_t *f = lessons_flight_make(pool, 0);
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;
    apr_time_t t0;

    (void)state;
    assert_int_equal(lessons_flight_join(f, SOON(1000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    t0 = apr_time_now();
    assert_int_equal(lessons_flight_join(f, SOON(100), v, &len),
                     LESSONS_FLIGHT_ALONE);
    assert_true(apr_time_now() - t0 >= apr_time_from_msec(90));
    lessons_flight_land(f, "x", 2);
}

/* Until a thread holds the lead of read 2, or has sent it (at most
 * 5 s).
 */
static void until_leading(lessons_flight_t *f)
{
    lessons_flight_stats_t st;
    int i;

    for (i = 0; i < 5000; i++) {
        lessons_flight_stats(f, &st);
        if (st.leading || st.reads >= 2) {
            return;
        }
        apr_sleep(apr_time_from_msec(1));
    }
    fail_msg("no thread took the lead");
}

/* Read 1, led here, lands while a (landing "lead" if it leads) waits:
 * the flight is contended.  Returns a's thread, which leads read 2 by
 * then (so that an asker started next cannot take the lead first).
 */
static apr_thread_t *contended(lessons_flight_t *f, asker_t *a,
                               apr_time_t deadline)
{
    apr_thread_t *t;
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;

    assert_int_equal(lessons_flight_join(f, SOON(5000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    asker_init(a, f, deadline, 1);
    t = start(a);
    until_waiting(f, 1);
    lessons_flight_land(f, "old", 4);
    until_leading(f);
    return t;
}

/* With a window, when others waited as a read landed, the next is sent
 * no sooner than the window after it: a holds the lead until then, and
 * b, asking meanwhile, takes the answer of a's read (sent after b
 * asked).
 */
static void test_window_spaces_contended_reads(void **state)
{
    /* b must ask within the window: three seconds leave room for a busy
     * machine's scheduling (one was missed about once in ten runs
     * beside the integration suites).
     */
    apr_interval_time_t w = apr_time_from_sec(3);
    lessons_flight_t *f = lessons_flight_make(pool, w);
    lessons_flight_stats_t st;
    apr_time_t before = apr_time_now();
    asker_t a, b;
    apr_thread_t *ta = contended(f, &a, SOON(10000)), *tb;

    (void)state;
    asker_init(&b, f, SOON(10000), 0);
    tb = start(&b);
    join_thread(ta);
    join_thread(tb);
    assert_int_equal(a.how, LESSONS_FLIGHT_LEAD);
    assert_true(a.at - before >= w);
    assert_int_equal(b.how, LESSONS_FLIGHT_SHARED);
    assert_string_equal(b.value, "lead");
    lessons_flight_stats(f, &st);
    assert_int_equal(st.reads, 2);
    assert_int_equal(st.shared, 1);
}

/* A window longer than the asker's deadline: it leads at the deadline,
 * not later.
 */
static void test_window_ends_at_the_deadline(void **state)
{
    lessons_flight_t *f = lessons_flight_make(pool, apr_time_from_sec(60));
    asker_t a;
    apr_time_t deadline = SOON(300);
    apr_thread_t *t = contended(f, &a, deadline);

    (void)state;
    join_thread(t);
    assert_int_equal(a.how, LESSONS_FLIGHT_LEAD);
    assert_true(a.at >= deadline);
}

/* One client at a time, sooner than the window after the last read:
 * its read waits for the window (a process's reads stay one per window
 * however its requests come), not for its deadline.
 */
static void test_window_bounds_a_lone_client(void **state)
{
    apr_interval_time_t w = apr_time_from_msec(300);
    lessons_flight_t *f = lessons_flight_make(pool, w);
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;
    apr_time_t t0 = apr_time_now(), deadline;

    (void)state;
    assert_int_equal(lessons_flight_join(f, SOON(5000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    lessons_flight_land(f, "x", 2);
    deadline = SOON(10000);
    assert_int_equal(lessons_flight_join(f, deadline, v, &len),
                     LESSONS_FLIGHT_LEAD);
    assert_true(apr_time_now() - t0 >= w);
    assert_true(apr_time_now() < deadline);
    lessons_flight_land(f, "y", 2);
}

/* A client that comes a window or more after the last read sends its
 * own at once.
 */
static void test_a_client_after_the_window_reads_at_once(void **state)
{
    apr_interval_time_t w = apr_time_from_sec(2);
    lessons_flight_t *f = lessons_flight_make(pool, w);
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;
    apr_time_t t0;

    (void)state;
    assert_int_equal(lessons_flight_join(f, SOON(5000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    lessons_flight_land(f, "x", 2);
    apr_sleep(w + apr_time_from_msec(100));
    t0 = apr_time_now();
    assert_int_equal(lessons_flight_join(f, SOON(10000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    assert_true(apr_time_now() - t0 < w - apr_time_from_msec(500));
    lessons_flight_land(f, "y", 2);
}

/* Read 1 (led here) is on its way while n askers ask (each landing
 * "lead" if it leads), then lands.  With a window of a minute, returns
 * when all n are done.
 */
static lessons_flight_t *n_ask_during_read_one(int n, asker_t *a)
{
    lessons_flight_t *f = lessons_flight_make(pool, apr_time_from_sec(60));
    apr_thread_t *t[8];
    char v[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;
    int i;

    assert_int_equal(lessons_flight_join(f, SOON(5000), v, &len),
                     LESSONS_FLIGHT_LEAD);
    for (i = 0; i < n; i++) {
        asker_init(&a[i], f, SOON(10000), 1);
        t[i] = start(&a[i]);
    }
    until_waiting(f, n);
    lessons_flight_land(f, "old", 4);
    for (i = 0; i < n; i++) {
        join_thread(t[i]);
    }
    return f;
}

/* n askers, done: one led the read f sent as its reads-th, the others
 * took its answer, and none waited until 5 s after before.
 */
static void one_read_shared_soon(lessons_flight_t *f, const asker_t *a,
                                 int n, apr_time_t before,
                                 apr_uint64_t reads)
{
    lessons_flight_stats_t st;
    int i, leads = 0, shared = 0;

    for (i = 0; i < n; i++) {
        leads += a[i].how == LESSONS_FLIGHT_LEAD;
        if (a[i].how == LESSONS_FLIGHT_SHARED) {
            shared++;
            assert_string_equal(a[i].value, "lead");
        }
        assert_true(a[i].at - before < apr_time_from_sec(5));
    }
    assert_int_equal(leads, 1);
    assert_int_equal(shared, n - 1);
    lessons_flight_stats(f, &st);
    assert_int_equal(st.reads, reads);
}

/* Four ask together while a read is on its way (as many as a read
 * sent ahead of the window must serve): the next read goes at once,
 * not a window later, and the other three take its answer.
 */
static void test_enough_askers_send_before_the_window(void **state)
{
    asker_t a[4];
    apr_time_t before = apr_time_now();
    lessons_flight_t *f = n_ask_during_read_one(4, a);

    (void)state;
    one_read_shared_soon(f, a, 4, before, 2);
}

/* After a read that six shared, the next goes ahead of the window only
 * once six ask again: five that ask (more than LESSONS_FLIGHT_SHARE)
 * wait it out -- here until the deadline, which comes first -- and share
 * the read sent then.
 */
static void test_fewer_than_the_last_batch_wait(void **state)
{
    asker_t a[6], b[5];
    apr_thread_t *t[5];
    apr_time_t deadline;
    int i, leads = 0, shared = 0;

    (void)state;
    n_ask_during_read_one(6, a);
    deadline = SOON(300);
    /* b[0] asks first and leads; the others' deadlines come later. */
    for (i = 0; i < 5; i++) {
        asker_init(&b[i], a[0].f, i ? SOON(10000) : deadline, 1);
        t[i] = start(&b[i]);
        if (!i) {
            until_waiting(b[0].f, 1);
        }
    }
    for (i = 0; i < 5; i++) {
        join_thread(t[i]);
        leads += b[i].how == LESSONS_FLIGHT_LEAD;
        shared += b[i].how == LESSONS_FLIGHT_SHARED;
    }
    assert_int_equal(b[0].how, LESSONS_FLIGHT_LEAD);
    assert_true(b[0].at >= deadline);
    assert_int_equal(leads, 1);
    assert_int_equal(shared, 4);
}

/* Five ask again after a read that six shared, a window of a minute:
 * the next read waits for all six (test_fewer_than_the_last_batch_wait)
 * unless one of the six left; *left says when the sixth left, before
 * they asked (0) or while their leader holds the lead for it (1).  It
 * goes then, not at the deadline ten seconds later, and the other four
 * share it.
 */
static void five_of_six_come_back(int left)
{
    asker_t a[6], b[5];
    apr_thread_t *t[5];
    lessons_flight_t *f;
    lessons_flight_stats_t st;
    apr_time_t before;
    int i;

    f = n_ask_during_read_one(6, a);
    if (!left) {
        lessons_flight_leave(f);
    }
    for (i = 0; i < 5; i++) {
        asker_init(&b[i], f, SOON(10000), 1);
        t[i] = start(&b[i]);
    }
    if (left) {
        until_waiting(f, 5);
        lessons_flight_stats(f, &st);
        assert_int_equal(st.reads, 2);  /* held for the sixth */
        assert_int_equal(st.leading, 1);
    }
    before = apr_time_now();
    if (left) {
        lessons_flight_leave(f);
    }
    for (i = 0; i < 5; i++) {
        join_thread(t[i]);
    }
    one_read_shared_soon(f, b, 5, before, 3);
}

/* A client whose connection closed with its answer (httpd's
 * MaxKeepAliveRequests) left before the others came back.
 */
static void test_one_who_left_is_not_waited_for(void **state)
{
    (void)state;
    five_of_six_come_back(0);
}

/* It left while the others, back already, waited for it. */
static void test_a_leave_sends_the_held_read(void **state)
{
    (void)state;
    five_of_six_come_back(1);
}

/* Many threads, each asking again and again, window 0: the leader of a
 * read takes a number (after its join returned), "reads" for a moment
 * and lands the number and its complement.  No one is left asleep (each
 * join ends long before its deadline, none alone), every shared answer
 * is whole (never half of one landing and half of the next) and newer
 * than anything landed before its join began, and reads are shared.
 */
#define MANY_THREADS 32
#define MANY_JOINS 300

typedef struct {
    lessons_flight_t *f;
    volatile apr_uint64_t *numbers;
    int alone, torn, stale, shared;
    apr_interval_time_t longest;
} many_t;

static void *APR_THREAD_FUNC ask_many(apr_thread_t *t, void *data)
{
    many_t *m = data;
    apr_uint64_t got[2], before;
    apr_size_t len;
    int i;

    for (i = 0; i < MANY_JOINS; i++) {
        apr_time_t t0 = apr_time_now();
        lessons_flight_e how;

        before = apr_atomic_read64(m->numbers);
        len = 0;
        how = lessons_flight_join(m->f, SOON(3000), got, &len);
        if (apr_time_now() - t0 > m->longest) {
            m->longest = apr_time_now() - t0;
        }
        if (how == LESSONS_FLIGHT_LEAD) {
            got[0] = apr_atomic_inc64(m->numbers) + 1;
            got[1] = ~got[0];
            apr_sleep(50);
            lessons_flight_land(m->f, got, sizeof(got));
        }
        else if (how == LESSONS_FLIGHT_SHARED) {
            m->shared++;
            m->torn += len != sizeof(got) || got[1] != ~got[0];
            m->stale += got[0] <= before;
        }
        else {
            m->alone++;
        }
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static void test_many_askers_none_left_asleep(void **state)
{
    lessons_flight_t *f = lessons_flight_make(pool, 0);
    volatile apr_uint64_t numbers = 0;
    many_t m[MANY_THREADS];
    apr_thread_t *t[MANY_THREADS];
    apr_interval_time_t longest = 0;
    int i, alone = 0, torn = 0, stale = 0, shared = 0;

    (void)state;
    for (i = 0; i < MANY_THREADS; i++) {
        memset(&m[i], 0, sizeof(m[i]));
        m[i].f = f;
        m[i].numbers = &numbers;
        assert_int_equal(apr_thread_create(&t[i], NULL, ask_many, &m[i],
                                           pool), APR_SUCCESS);
    }
    for (i = 0; i < MANY_THREADS; i++) {
        join_thread(t[i]);
        alone += m[i].alone;
        torn += m[i].torn;
        stale += m[i].stale;
        shared += m[i].shared;
        if (m[i].longest > longest) {
            longest = m[i].longest;
        }
    }
    assert_int_equal(alone, 0);
    assert_int_equal(torn, 0);
    assert_int_equal(stale, 0);
    assert_true(shared > 0);
    /* A thread left asleep would wait for its deadline (3 s). */
    assert_true(longest < apr_time_from_msec(2500));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone_every_ask_reads),
        cmocka_unit_test(test_never_a_read_sent_before),
        cmocka_unit_test(test_those_who_ask_together_share),
        cmocka_unit_test(test_failed_read_sends_waiters_alone),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_window_spaces_contended_reads),
        cmocka_unit_test(test_window_ends_at_the_deadline),
        cmocka_unit_test(test_window_bounds_a_lone_client),
        cmocka_unit_test(test_a_client_after_the_window_reads_at_once),
        cmocka_unit_test(test_enough_askers_send_before_the_window),
        cmocka_unit_test(test_fewer_than_the_last_batch_wait),
        cmocka_unit_test(test_one_who_left_is_not_waited_for),
        cmocka_unit_test(test_a_leave_sends_the_held_read),
        cmocka_unit_test(test_too_large_is_not_shared),
        cmocka_unit_test(test_many_askers_none_left_asleep),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
