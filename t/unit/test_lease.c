/* Licensed under the Apache License, Version 2.0.
 *
 * test_lease.c: lessons_lease -- a server's read lease as its processes
 * share it: the read path's version valid only until the lease's end,
 * one holder at a time (and the next when it is gone or stale), versions
 * that only move forward within an epoch, checks answering only the asks
 * made before them, and a writer's wait: settled by an acknowledgement
 * in the check or heard later, by a lease's end, never before; the bell
 * moved only by news, and a writer waiting for its turn woken by the
 * answer that settles the round; one whose ask a lead answers (or the
 * next lead will) woken only then; the holder's reads after drops
 * spaced out while no GET takes them.  Times are given, not
 * read, but for the sleeps, which only wait.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apr_atomic.h"
#include "apr_global_mutex.h"
#include "apr_shm.h"
#include "apr_strings.h"

#include "store/lessons_lease.h"

#include "unit_lease.h"
#include "unit_pool.h"

#define MS(n)    apr_time_from_msec(n)
#define T0       apr_time_from_sec(1000000)
#define ME       101u
#define OTHER    202u

static apr_global_mutex_t *lock;

static int group_setup(void **state)
{
    (void)state;
    if (unit_pool_open() != 0) {
        return -1;
    }
    return apr_global_mutex_create(&lock, NULL, APR_LOCK_DEFAULT, pool)
           == APR_SUCCESS ? 0 : -1;
}

static lessons_lease_t *fresh(void)
{
    apr_size_t size = lessons_lease_size();
    lessons_lease_t *l = lessons_lease_attach(apr_palloc(pool, size), size,
                                              lock, 1, pool);

    assert_non_null(l);
    return l;
}

static int alive_never(apr_uint32_t pid)
{
    (void)pid;
    return 0;
}

static int alive_always(apr_uint32_t pid)
{
    (void)pid;
    return 1;
}

static void test_read_path_only_while_the_lease_holds(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 7), got;

    (void)state;
    assert_false(lessons_lease_current(l, T0, &got));
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    /* Installed without a lease: still nothing to serve from. */
    assert_true(lessons_lease_install(l, ME, &v, 0, 0));
    assert_false(lessons_lease_current(l, T0, &got));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    assert_true(lessons_lease_current(l, T0 + MS(899), &got));
    assert_int_equal(got.sum, 7);
    assert_string_equal(got.epoch, "e1");
    assert_false(lessons_lease_current(l, T0 + MS(900), &got));
    /* A lost listener ends it at once. */
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(5000), 0));
    assert_true(lessons_lease_current(l, T0 + MS(1000), &got));
    assert_true(lessons_lease_listening(l, ME, 0));
    assert_false(lessons_lease_current(l, T0 + MS(1000), &got));
}

static void test_no_lease_while_catching_up(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 7), w = version("e1", 8), got;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    /* Read and acknowledged at once: nothing served until installed. */
    assert_true(lessons_lease_refresh(l, ME));
    assert_false(lessons_lease_current(l, T0, &got));
    assert_false(lessons_lease_refresh(l, OTHER));
    assert_true(lessons_lease_install(l, ME, &w, 0, 0));
    assert_true(lessons_lease_current(l, T0, &got));
    assert_int_equal(got.sum, 8);
}

static void test_versions_only_move_forward(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v9 = version("e1", 9), v5 = version("e1", 5),
                            other = version("e2", 1), got;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v9, T0 + MS(900), 0));
    /* An older read landing late does not take the server back. */
    assert_true(lessons_lease_install(l, ME, &v5, 0, 0));
    assert_true(lessons_lease_current(l, T0, &got));
    assert_int_equal(got.sum, 9);
    /* Another epoch (a promoted standby, a restore) replaces it. */
    assert_true(lessons_lease_install(l, ME, &other, 0, 0));
    assert_true(lessons_lease_current(l, T0, &got));
    assert_int_equal(got.sum, 1);
    assert_string_equal(got.epoch, "e2");
}

/* Row i of a list: a server's lease as a renewal read it. */
static void list_row(lessons_lease_check_t *list, int i, const char *name,
                     apr_int64_t term, apr_int64_t length_ms,
                     const char *peer)
{
    apr_cpystrn(list->rows[i].name, name, sizeof(list->rows[i].name));
    list->rows[i].term = term;
    list->rows[i].length_ms = length_ms;
    apr_cpystrn(list->rows[i].peer, peer, sizeof(list->rows[i].peer));
}

/* The renewals' lists of the other leases: none until one is read,
 * then the newest asked for, whatever order they come back in.
 */
static void test_the_newest_list_is_kept(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_state_t st;

    (void)state;
    lessons_lease_state(l, T0, &st);
    assert_int_equal(st.others, -1);
    lessons_lease_listed(l, T0 - MS(300), 3, NULL);
    lessons_lease_state(l, T0, &st);
    assert_int_equal(st.others, 3);
    assert_int_equal(st.list_age, MS(300));
    /* A renewal sent earlier that came back later tells nothing new. */
    lessons_lease_listed(l, T0 - MS(400), 1, NULL);
    lessons_lease_state(l, T0, &st);
    assert_int_equal(st.others, 3);
    assert_int_equal(st.list_age, MS(300));
    lessons_lease_listed(l, T0 - MS(100), 0, NULL);
    lessons_lease_state(l, T0, &st);
    assert_int_equal(st.others, 0);
    assert_int_equal(st.list_age, MS(100));
}

/* The list keeps its rows (what a writer would tell), copied whole and
 * only from the newest list; a list whose rows were not given, or that
 * names more than it holds, is marked overflowing.
 */
static void test_the_list_keeps_its_rows(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *in = apr_pcalloc(pool, sizeof(*in));
    lessons_lease_check_t *out = apr_palloc(pool, sizeof(*out));
    apr_interval_time_t sent;

    (void)state;
    assert_non_null(in);
    assert_non_null(out);
    assert_int_equal(lessons_lease_list(l, &sent, out), -1);
    assert_int_equal(sent, 0);
    in->nrows = 2;
    list_row(in, 0, "b", 7, 2000, "127.0.0.1:9 k");
    list_row(in, 1, "c", 3, 1000, "");
    lessons_lease_listed(l, T0 - MS(200), 2, in);
    memset(out, 0xff, sizeof(*out));
    assert_int_equal(lessons_lease_list(l, &sent, out), 2);
    assert_int_equal(sent, T0 - MS(200));
    assert_int_equal(out->nrows, 2);
    assert_false(out->overflow);
    assert_string_equal(out->rows[0].name, "b");
    assert_int_equal(out->rows[0].term, 7);
    assert_int_equal(out->rows[0].length_ms, 2000);
    assert_string_equal(out->rows[0].peer, "127.0.0.1:9 k");
    assert_string_equal(out->rows[1].name, "c");
    assert_string_equal(out->rows[1].peer, "");
    /* An older list changes nothing. */
    in->nrows = 1;
    in->rows[0].term = 99;
    lessons_lease_listed(l, T0 - MS(300), 1, in);
    assert_int_equal(lessons_lease_list(l, &sent, out), 2);
    assert_int_equal(out->rows[0].term, 7);
    /* Three named, one kept: overflowing. */
    lessons_lease_listed(l, T0 - MS(100), 3, in);
    assert_int_equal(lessons_lease_list(l, &sent, out), 3);
    assert_int_equal(out->nrows, 1);
    assert_true(out->overflow);
    /* Rows not given: none kept, overflowing when any were named. */
    lessons_lease_listed(l, T0 - MS(50), 1, NULL);
    assert_int_equal(lessons_lease_list(l, &sent, out), 1);
    assert_int_equal(out->nrows, 0);
    assert_true(out->overflow);
    lessons_lease_listed(l, T0 - MS(40), 0, NULL);
    assert_int_equal(lessons_lease_list(l, &sent, out), 0);
    assert_false(out->overflow);
}

/* A renewal of a lease L long, sent at T0 + sent ms, back 10 ms later:
 * the end it may serve until (0: not yet).
 */
static apr_interval_time_t renewed(lessons_lease_t *l, apr_uint32_t pid,
                                   int sent)
{
    return lessons_lease_run(l, pid, T0 + MS(sent), T0 + MS(sent + 10),
                             T0 + MS(sent + 900), MS(1000));
}

/* A lease starts in two steps: a run's renewals are served only from
 * the one sent 65% of a lease after the run's first came back; a
 * renewal back after the last lease ended, one too late, a lost
 * listener or a new holder start a run again.
 */
static void test_a_run_serves_only_once_warm(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 4), got;
    lessons_lease_state_t st;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    /* The first came back at 10 ms: served from 660 ms on. */
    assert_int_equal(renewed(l, ME, 0), 0);
    assert_true(lessons_lease_install(l, ME, &v, 0, 0));
    assert_false(lessons_lease_current(l, T0 + MS(20), &got));
    lessons_lease_state(l, T0 + MS(20), &st);
    assert_int_equal(st.run, MS(10));
    assert_false(st.valid);
    assert_int_equal(renewed(l, ME, 333), 0);
    assert_int_equal(renewed(l, ME, 659), 0);
    assert_int_equal(renewed(l, ME, 660), T0 + MS(1560));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(1560), 0));
    assert_true(lessons_lease_current(l, T0 + MS(700), &got));
    lessons_lease_state(l, T0 + MS(700), &st);
    assert_true(st.valid);
    assert_int_equal(st.run, MS(690));
    /* Back after the last lease ended (a pause): a new run, and what
     * was installed is not served.
     */
    assert_int_equal(renewed(l, ME, 1560), 0);
    assert_false(lessons_lease_current(l, T0 + MS(1571), &got));
    lessons_lease_state(l, T0 + MS(1600), &st);
    assert_int_equal(st.run, MS(30));
    assert_int_equal(renewed(l, ME, 1900), 0);
    assert_int_equal(renewed(l, ME, 2220), T0 + MS(3120));
    /* A run whose last lease ended shows none. */
    lessons_lease_state(l, T0 + MS(3120), &st);
    assert_int_equal(st.run, 0);
    /* Too late to hold a lease: the run ends with it. */
    assert_int_equal(lessons_lease_run(l, ME, T0 + MS(2500),
                                       T0 + MS(2600), 0, MS(1000)), 0);
    lessons_lease_state(l, T0 + MS(2600), &st);
    assert_int_equal(st.run, 0);
    assert_int_equal(renewed(l, ME, 2700), 0);
    assert_int_equal(renewed(l, ME, 3360), T0 + MS(4260));
    /* A lost listener ends it. */
    assert_true(lessons_lease_listening(l, ME, 0));
    assert_int_equal(renewed(l, ME, 3700), 0);
    assert_int_equal(renewed(l, ME, 4360), T0 + MS(5260));
    /* Only the holder renews; a new one starts from nothing. */
    assert_int_equal(renewed(l, OTHER, 4700), 0);
    assert_true(lessons_lease_hold(l, OTHER, T0 + MS(9000), MS(3000),
                                   alive_never));
    assert_int_equal(renewed(l, OTHER, 4700), 0);
    assert_int_equal(renewed(l, OTHER, 5000), 0);
    assert_int_equal(renewed(l, OTHER, 5360), T0 + MS(6260));
}

/* A write with no check: only with a listening holder whose last
 * renewal, sent less than fresh before, listed no other lease.  It
 * drops the installed version until one read after it is installed:
 * a read begun before the drop (its generation) serves nothing.
 */
/* Another server's INVALIDATE drops the version whatever the lists
 * say, as a write alone does: the generation moves, a version read
 * before it is not served, the holder is rung once.
 */
/* A write tells the listed servers itself only with a fresh list kept
 * whole whose every row has an address; then it gets the list as a
 * round (its own number and nonce, at the commit) and its own server's
 * version is dropped.
 */
/* lessons_lease_invalidating for a write committed at commit, asking at
 * now, with half a lease of 1 s as fresh; renew as the caller can.
 */
static lessons_lease_tell_e tell_renewing(lessons_lease_t *l, int renew,
                                          apr_interval_time_t commit,
                                          apr_interval_time_t now,
                                          lessons_lease_check_t *out,
                                          unsigned char *nonce, int *ring,
                                          apr_interval_time_t *until)
{
    apr_uint32_t seen = 0;
    apr_interval_time_t u = 0;

    return lessons_lease_invalidating(l, commit, now, MS(500), renew, out,
                                      nonce, ring, &seen,
                                      until ? until : &u);
}

/* The same for a writer that cannot renew holds ahead. */
static lessons_lease_tell_e tell(lessons_lease_t *l,
                                 apr_interval_time_t commit,
                                 apr_interval_time_t now,
                                 lessons_lease_check_t *out,
                                 unsigned char *nonce, int *ring,
                                 apr_interval_time_t *until)
{
    return tell_renewing(l, 0, commit, now, out, nonce, ring, until);
}

static void test_a_write_invalidates_from_a_fresh_list(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *list = apr_pcalloc(pool, sizeof(*list));
    lessons_lease_check_t *out = apr_pcalloc(pool, sizeof(*out)),
                          *next_out = apr_pcalloc(pool, sizeof(*next_out));
    lessons_lease_version_t v = version("e1", 4), got;
    unsigned char nonce[LESSONS_LEASE_NONCE_LEN], next[16];
    lessons_lease_state_t st;
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;
    int ring;

    (void)state;
    list->nrows = 2;
    list_row(list, 0, "b", 3, 1000, "127.0.0.1:9 k");
    list_row(list, 1, "c", 4, 1000, "");
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    /* Not listening; then c has no address (NOTIFY only). */
    lessons_lease_listed(l, T0 - MS(100), 2, list);
    assert_int_equal(tell(l, T0, T0, out, nonce, &ring, NULL),
                     LESSONS_LEASE_TELL_NO);
    assert_true(lessons_lease_listening(l, ME, 1));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    assert_int_equal(tell(l, T0, T0, out, nonce, &ring, NULL),
                     LESSONS_LEASE_TELL_NO);
    apr_cpystrn(list->rows[1].peer, "127.0.0.1:10 k",
                sizeof(list->rows[1].peer));
    /* Named more than it kept; then too old; then none named. */
    lessons_lease_listed(l, T0 - MS(90), 3, list);
    assert_int_equal(tell(l, T0, T0, out, nonce, &ring, NULL),
                     LESSONS_LEASE_TELL_NO);
    lessons_lease_listed(l, T0 - MS(80), 2, list);
    assert_int_equal(tell(l, T0 + MS(420), T0 + MS(420), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_NO);
    assert_true(lessons_lease_current(l, T0, &got));
    assert_int_equal(tell(l, T0 + MS(10), T0 + MS(10), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(ring);
    /* Counted once, as what it was; the refusals count nothing. */
    lessons_lease_state(l, T0 + MS(10), &st);
    assert_true(st.told_writes == 1);
    assert_true(st.alone_writes == 0);
    assert_false(lessons_lease_current(l, T0 + MS(10), &got));
    assert_int_equal(out->nrows, 2);
    assert_true(out->round == 1);
    assert_int_equal(out->at, T0 + MS(10));
    assert_string_equal(out->rows[1].name, "c");
    /* The next round, past the wait: the same block's prefix. */
    assert_int_equal(tell(l, T0 + MS(14), T0 + MS(14), next_out, next,
                          &ring, NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(next_out->round == 2);
    assert_memory_equal(nonce, next, 8);
    assert_int_equal(nonce[15], 1);
    assert_int_equal(next[15], 2);
    /* Settled by both answers, or a lease after the commit. */
    assert_false(lessons_lease_settled(l, out, T0 + MS(11), &until, &bell));
    assert_int_equal(until, T0 + MS(1010));
    lessons_lease_heard_nonce(l, "b", nonce, T0 + MS(12));
    assert_false(lessons_lease_settled(l, out, T0 + MS(13), &until, &bell));
    /* c renewed after the list, heard: no sooner end for a round. */
    lessons_lease_heard(l, "c", 4, NULL, T0 - MS(900));
    assert_false(lessons_lease_settled(l, out, T0 + MS(200), &until,
                                       &bell));
    lessons_lease_heard_nonce(l, "c", nonce, T0 + MS(201));
    assert_true(lessons_lease_settled(l, out, T0 + MS(202), &until, &bell));
}

/* Writes share INVALIDATE rounds: a round drawn after a write's commit
 * covers it; a write whose commit came after the round out waits, a
 * little, for its leader, then leads the next one for every write that
 * came meanwhile.
 */
/* A block whose holder listens, serves, and last listed one server,
 * b, with an address (and c, with one too, when both).
 */
static lessons_lease_t *listening_with(int both)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *list = apr_pcalloc(pool, sizeof(*list));
    lessons_lease_version_t v = version("e1", 4);

    list->nrows = both ? 2 : 1;
    list_row(list, 0, "b", 3, 1000, "127.0.0.1:9 k");
    if (both) {
        list_row(list, 1, "c", 3, 1000, "127.0.0.1:10 k");
    }
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_listening(l, ME, 1));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    lessons_lease_listed(l, T0 - MS(100), list->nrows, list);
    return l;
}

static lessons_lease_t *listening_with_b(void)
{
    return listening_with(0);
}

/* A round l's write leads at at (committed then), its nonce in nonce,
 * done at once: its number.
 */
static apr_uint64_t lead_round(lessons_lease_t *l, apr_interval_time_t at,
                               unsigned char *nonce)
{
    lessons_lease_check_t *out = apr_pcalloc(pool, sizeof(*out));
    int ring;

    assert_non_null(out);
    assert_int_equal(tell(l, at, at, out, nonce, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    lessons_lease_told(l, out->round);
    return out->round;
}

static void test_writes_share_rounds(void **state)
{
    lessons_lease_t *l = listening_with_b();
    lessons_lease_check_t *out = apr_pcalloc(pool, sizeof(*out)),
                          *joined = apr_pcalloc(pool, sizeof(*joined));
    unsigned char nonce[LESSONS_LEASE_NONCE_LEN], nonce2[16];
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;
    lessons_lease_state_t st;
    int ring;

    (void)state;
    /* The first leads round 1, drawn at T0+10. */
    assert_int_equal(tell(l, T0 + MS(10), T0 + MS(10), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 1);
    /* Committed after the draw, while it is out: wait, 3 ms at most. */
    assert_int_equal(tell(l, T0 + MS(10) + 1, T0 + MS(11), out, nonce,
                          &ring, &until), LESSONS_LEASE_TELL_WAIT);
    assert_int_equal(until, T0 + MS(10) + LESSONS_LEASE_ROUND_WAIT);
    /* Committed before the draw: round 1 covers it, as drawn. */
    memset(out, 0, sizeof(*out));
    assert_int_equal(tell(l, T0 + MS(10), T0 + MS(12), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_JOIN);
    assert_false(ring);
    assert_true(out->round == 1);
    assert_int_equal(out->at, T0 + MS(10));
    assert_int_equal(out->nrows, 1);
    assert_string_equal(out->rows[0].name, "b");
    /* Its leader done (an older round's end changes nothing): the one
     * that waited leads round 2, and covers a write committed before.
     */
    lessons_lease_told(l, 7);
    assert_int_equal(tell(l, T0 + MS(11), T0 + MS(12), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_WAIT);
    lessons_lease_told(l, 1);
    assert_int_equal(tell(l, T0 + MS(11), T0 + MS(12), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 2);
    assert_int_equal(tell(l, T0 + MS(12), T0 + MS(12), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_JOIN);
    assert_true(out->round == 2);
    /* Round 2 out past the wait: the next write leads its own. */
    assert_int_equal(tell(l, T0 + MS(13), T0 + MS(15), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 3);
    /* The answer to round 3 settles a joiner of round 2 too. */
    assert_int_equal(tell(l, T0 + MS(12), T0 + MS(16), joined, nonce2,
                          &ring, NULL), LESSONS_LEASE_TELL_JOIN);
    assert_true(joined->round == 3);
    joined->round = 2;
    assert_false(lessons_lease_settled(l, joined, T0 + MS(16), &until,
                                       &bell));
    lessons_lease_heard_nonce(l, "b", nonce, T0 + MS(17));
    assert_true(lessons_lease_settled(l, joined, T0 + MS(17), &until,
                                      &bell));
    assert_true(lessons_lease_settled(l, out, T0 + MS(17), &until, &bell));
    lessons_lease_state(l, T0 + MS(15), &st);
    assert_true(st.told_writes == 6);
}

/* A joined write sleeps on the leaders' word: the answers do not wake it
 * (on two CPUs, once for each server that answered), its leader's end
 * does, even when a later round is open by then.
 */
static void test_a_joined_write_is_rung_by_its_leader(void **state)
{
    lessons_lease_t *l = listening_with_b();
    lessons_lease_check_t *out = apr_pcalloc(pool, sizeof(*out)),
                          *joined = apr_pcalloc(pool, sizeof(*joined));
    unsigned char nonce[LESSONS_LEASE_NONCE_LEN], nonce2[16];
    apr_interval_time_t until = 0, began;
    apr_uint32_t bell = 0, seen;
    int ring;

    (void)state;
    assert_int_equal(tell(l, T0 + MS(10), T0 + MS(10), out, nonce, &ring,
                          NULL), LESSONS_LEASE_TELL_LEAD);
    assert_int_equal(tell(l, T0 + MS(10), T0 + MS(11), joined, nonce2,
                          &ring, NULL), LESSONS_LEASE_TELL_JOIN);
    seen = lessons_lease_tell_seen(l);
    lessons_lease_heard_nonce(l, "b", nonce, T0 + MS(12));
    assert_true(lessons_lease_settled(l, joined, T0 + MS(12), &until,
                                      &bell));
    assert_int_equal(lessons_lease_tell_seen(l), seen);
    /* Round 2 drawn (round 1 out past the wait), then round 1's leader
     * done: round 2 stays open, and the joined write is rung.
     */
    assert_int_equal(tell(l, T0 + MS(14), T0 + MS(14), out, nonce2, &ring,
                          NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 2);
    lessons_lease_told(l, 1);
    assert_true(lessons_lease_tell_seen(l) != seen);
    began = lessons_lease_clock();
    lessons_lease_tell_sleep(l, seen, began + MS(2000));
    assert_true(lessons_lease_clock() - began < MS(1000));
    assert_int_equal(tell(l, T0 + MS(15), T0 + MS(16), out, nonce2, &ring,
                          &until), LESSONS_LEASE_TELL_WAIT);
}

static void test_an_invalidate_drops_the_version(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 4), got;
    apr_uint32_t before, gen;
    int ring;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_listening(l, ME, 1));
    lessons_lease_listed(l, T0 - MS(10), 2, NULL);
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    assert_true(lessons_lease_current(l, T0, &got));
    before = lessons_lease_gen(l);
    assert_true(lessons_lease_drop(l, &ring));
    assert_true(ring);
    assert_false(lessons_lease_current(l, T0, &got));
    assert_true(lessons_lease_drop(l, &ring));
    assert_false(ring);
    assert_true(lessons_lease_install(l, ME, &v, 0, before));
    assert_false(lessons_lease_current(l, T0, &got));
    assert_true(lessons_lease_reread(l, &gen));
    assert_int_equal(gen, before + 2);
    assert_true(lessons_lease_install(l, ME, &v, 0, gen));
    assert_true(lessons_lease_current(l, T0, &got));
}

/* A HOLD drops the version and keeps it dropped for its length on this
 * server's clock: what the holder reads meanwhile is installed, never
 * served, and its read after the hold is.  A later hold moves the end.
 */
static void test_a_hold_keeps_the_drop(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 4), got;
    apr_interval_time_t now = lessons_lease_clock(), until;
    apr_uint32_t gen;
    int ring;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_listening(l, ME, 1));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    assert_true(lessons_lease_current(l, T0, &got));
    assert_int_equal(lessons_lease_held_until(l), 0);
    assert_true(lessons_lease_hold_drop(l, now, &ring));
    assert_true(ring);
    assert_false(lessons_lease_current(l, T0, &got));
    until = lessons_lease_held_until(l);
    assert_int_equal(until, now + LESSONS_LEASE_HOLD);
    /* An older hold's end is not a later one's. */
    assert_true(lessons_lease_hold_drop(l, now - MS(10), &ring));
    assert_false(ring);
    assert_int_equal(lessons_lease_held_until(l), until);
    /* Read during the hold: installed, not served; the drop stays for
     * the read after it.
     */
    assert_false(lessons_lease_reread(l, &gen));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), gen));
    assert_false(lessons_lease_current(l, T0, &got));
    gen = lessons_lease_gen(l);
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), gen));
    assert_false(lessons_lease_current(l, T0, &got));
    while (lessons_lease_clock() < until) {
        apr_sleep(until - lessons_lease_clock());
    }
    assert_true(lessons_lease_reread(l, &gen));
    assert_true(lessons_lease_install(l, ME, &v, 0, gen));
    assert_true(lessons_lease_current(l, T0, &got));
    /* Taken: the next drop rings again. */
    assert_false(lessons_lease_reread(l, &gen));
    assert_true(lessons_lease_drop(l, &ring));
    assert_true(ring);
}

/* The answers to a round that asked for holds answer the writes after
 * it at once while every listed server is held: a write that commits
 * while each holds past now + LESSONS_LEASE_HOLD_MARGIN tells no one
 * and drops only its own server's version.  The first round of a burst
 * asks for none; an INVALIDATE's answer, a HOLD ACK to a round that
 * asked for none or to an older round, or one server's of two holds
 * nothing; the holds are renewed by the write that finds half their
 * length gone and no round open.
 */
static void test_writes_under_holds_tell_no_one(void **state)
{
    lessons_lease_t *l = listening_with(1);
    lessons_lease_check_t *out = apr_pcalloc(pool, sizeof(*out));
    lessons_lease_version_t v = version("e1", 4), got;
    unsigned char n1[LESSONS_LEASE_NONCE_LEN], n2[16], n3[16], n4[16];
    lessons_lease_state_t st;
    apr_interval_time_t t;
    int ring;

    (void)state;
    /* Round 1, the first: no hold asked, none given by its answers. */
    assert_int_equal(tell(l, T0 + MS(10), T0 + MS(10), out, n1, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    assert_false(out->hold);
    lessons_lease_heard_hold(l, "b", n1, T0 + MS(11));
    lessons_lease_heard_hold(l, "c", n1, T0 + MS(11));
    lessons_lease_told(l, out->round);
    /* Round 2, 20 ms later: a burst, holds asked.  b answers. */
    assert_int_equal(tell(l, T0 + MS(30), T0 + MS(30), out, n2, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    assert_true(out->hold);
    assert_true(out->round == 2);
    lessons_lease_heard_hold(l, "b", n2, T0 + MS(31));
    /* c answers its INVALIDATE only (a server that knows no holds). */
    lessons_lease_heard_nonce(l, "c", n2, T0 + MS(31));
    lessons_lease_told(l, out->round);
    /* c holds nothing: a round of its own (b's hold is not both's). */
    assert_int_equal(tell(l, T0 + MS(32), T0 + MS(32), out, n3, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 3);
    /* c's answer to round 2, come after round 3 was drawn: holds
     * nothing (only the newest round's drawing is known).
     */
    lessons_lease_heard_hold(l, "c", n2, T0 + MS(33));
    lessons_lease_told(l, out->round);
    assert_int_equal(tell(l, T0 + MS(40), T0 + MS(40), out, n4, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 4);
    assert_true(out->hold);
    lessons_lease_heard_hold(l, "b", n4, T0 + MS(41));
    lessons_lease_heard_hold(l, "c", n4, T0 + MS(41));
    lessons_lease_told(l, out->round);
    /* Both hold until T0+85 on this clock: the next writes are held,
     * drop this server's version (ringing its holder once), count as
     * such and draw no round.
     */
    assert_true(lessons_lease_reread(l, &(apr_uint32_t){ 0 }));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900),
                                      lessons_lease_gen(l)));
    assert_true(lessons_lease_current(l, T0 + MS(50), &got));
    assert_int_equal(tell(l, T0 + MS(50), T0 + MS(50), out, n1, &ring, NULL),
                     LESSONS_LEASE_TELL_HELD);
    assert_true(ring);
    assert_false(lessons_lease_current(l, T0 + MS(50), &got));
    assert_int_equal(tell(l, T0 + MS(56), T0 + MS(58), out, n1, &ring, NULL),
                     LESSONS_LEASE_TELL_HELD);
    assert_false(ring);
    lessons_lease_state(l, T0 + MS(58), &st);
    assert_true(st.held_writes == 2);
    assert_true(st.told_writes == 4);
    /* Less than half the hold left and no round open: this write
     * renews them, and the writes while it is out are held still.
     */
    assert_int_equal(tell(l, T0 + MS(66), T0 + MS(66), out, n1, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    assert_true(out->hold);
    assert_true(out->round == 5);
    assert_int_equal(tell(l, T0 + MS(80), T0 + MS(83), out, n2, &ring, NULL),
                     LESSONS_LEASE_TELL_HELD);
    /* Within the margin of the end: not held, the open round joined. */
    t = T0 + MS(85) - LESSONS_LEASE_HOLD_MARGIN;
    assert_int_equal(tell(l, T0 + MS(60), t, out, n2, &ring, NULL),
                     LESSONS_LEASE_TELL_JOIN);
    assert_true(out->round == 5);
    /* Round 5 answered: held until T0+111. */
    lessons_lease_heard_hold(l, "b", n1, T0 + MS(84));
    lessons_lease_heard_hold(l, "c", n1, T0 + MS(84));
    lessons_lease_told(l, 5);
    assert_int_equal(tell(l, T0 + MS(85), T0 + MS(85), out, n2, &ring, NULL),
                     LESSONS_LEASE_TELL_HELD);
    /* A list gone stale holds nothing: the write makes its check. */
    assert_int_equal(tell(l, T0 + MS(600), T0 + MS(600), out, n2, &ring,
                          NULL), LESSONS_LEASE_TELL_NO);
}

/* A round l's write leads at at, 20 ms or less after the one before:
 * it asks for holds, and b and c answer them 1 ms later.
 */
static void held_round(lessons_lease_t *l, apr_interval_time_t at,
                       lessons_lease_check_t *out, unsigned char *nonce)
{
    int ring;

    assert_int_equal(tell(l, at, at, out, nonce, &ring, NULL),
                     LESSONS_LEASE_TELL_LEAD);
    assert_true(out->hold);
    lessons_lease_heard_hold(l, "b", nonce, at + MS(1));
    lessons_lease_heard_hold(l, "c", nonce, at + MS(1));
    lessons_lease_told(l, out->round);
}

/* A writer whose answers its server's readers hear renews the holds
 * ahead: the write that finds half of them gone is answered at once and
 * sends the next round's HOLDs (RENEW); the writes within the gap after
 * it are held; with no answer by then, the next renews again.  Only the
 * newest renewal's answers hold, from when it was drawn; no write joins
 * a renewal (no one sends it again), so once the holds end the next
 * write leads a round of its own.
 */
static void test_holds_are_renewed_ahead(void **state)
{
    lessons_lease_t *l = listening_with(1);
    lessons_lease_check_t *out = apr_pcalloc(pool, sizeof(*out));
    unsigned char n1[LESSONS_LEASE_NONCE_LEN], n2[16], n3[16], n4[16];
    lessons_lease_state_t st;
    int ring;

    (void)state;
    (void)lead_round(l, T0 + MS(10), n1);
    held_round(l, T0 + MS(30), out, n2);
    /* Held until T0+75: more than half left, held. */
    assert_int_equal(tell_renewing(l, 1, T0 + MS(40), T0 + MS(40), out, n3,
                                   &ring, NULL), LESSONS_LEASE_TELL_HELD);
    /* Less than half left, no round open: renewed ahead, answered. */
    assert_int_equal(tell_renewing(l, 1, T0 + MS(55), T0 + MS(55), out, n3,
                                   &ring, NULL), LESSONS_LEASE_TELL_RENEW);
    assert_true(out->hold);
    assert_true(out->round == 3);
    assert_int_equal(out->nrows, 2);
    assert_memory_not_equal(n3, n2, LESSONS_LEASE_NONCE_LEN);
    /* Its answers on the way: held. */
    assert_int_equal(tell_renewing(l, 1, T0 + MS(57), T0 + MS(59), out, n4,
                                   &ring, NULL), LESSONS_LEASE_TELL_HELD);
    /* None came within the gap: renewed again. */
    assert_int_equal(tell_renewing(l, 1, T0 + MS(61), T0 + MS(61), out, n4,
                                   &ring, NULL), LESSONS_LEASE_TELL_RENEW);
    assert_true(out->round == 4);
    /* The first renewal's answers, come late, hold nothing. */
    assert_false(lessons_lease_heard_hold(l, "b", n3, T0 + MS(62)));
    assert_false(lessons_lease_heard_hold(l, "c", n3, T0 + MS(62)));
    assert_int_equal(tell_renewing(l, 1, T0 + MS(70), T0 + MS(70), out, n1,
                                   &ring, NULL), LESSONS_LEASE_TELL_RENEW);
    assert_true(out->round == 5);
    /* The newest's answers hold from when it was drawn: T0+115. */
    assert_true(lessons_lease_heard_hold(l, "b", n1, T0 + MS(75)));
    assert_true(lessons_lease_heard_hold(l, "c", n1, T0 + MS(75)));
    assert_false(lessons_lease_heard_hold(l, "c", n1, T0 + MS(76)));
    assert_int_equal(tell_renewing(l, 1, T0 + MS(90), T0 + MS(90), out, n2,
                                   &ring, NULL), LESSONS_LEASE_TELL_HELD);
    assert_int_equal(tell_renewing(l, 1, T0 + MS(100), T0 + MS(100), out, n2,
                                   &ring, NULL), LESSONS_LEASE_TELL_RENEW);
    assert_true(out->round == 6);
    /* Never answered: at the holds' end, a write committed before that
     * renewal leads a round and waits for it (no one sends the renewal
     * again).
     */
    assert_int_equal(tell_renewing(l, 1, T0 + MS(99), T0 + MS(115), out, n3,
                                   &ring, NULL), LESSONS_LEASE_TELL_LEAD);
    assert_true(out->round == 7);
    assert_true(out->hold);
    lessons_lease_state(l, T0 + MS(115), &st);
    assert_true(st.held_writes == 7);
    assert_true(st.told_writes == 3);
}

/* Each write's time on the lease is counted under the first bound it
 * does not pass (bounds inclusive; past the last, the rest), and summed;
 * a time below zero (no clock runs back, but) counts as none.
 */
static void test_write_waits_by_bound(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_state_t st;
    const apr_uint64_t want[LESSONS_LEASE_WAIT_BUCKETS] = {
        3, 1, 1, 0, 0, 1, 1
    };

    (void)state;
    lessons_lease_waited(l, 40);
    lessons_lease_waited(l, 100);
    lessons_lease_waited(l, -3);
    lessons_lease_waited(l, 101);
    lessons_lease_waited(l, MS(5));
    lessons_lease_waited(l, MS(1000));
    lessons_lease_waited(l, MS(2000));
    lessons_lease_state(l, T0, &st);
    assert_memory_equal(st.waits, want, sizeof(want));
    assert_true(st.waited == 40 + 100 + 101 + MS(5) + MS(3000));
}

static void test_a_write_alone_drops_the_version(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 4), w = version("e1", 5), got;
    lessons_lease_state_t st;
    apr_uint32_t before, gen;
    int ring;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    /* No list yet, then no listener: the write checks. */
    assert_false(lessons_lease_alone(l, T0, MS(500), &ring));
    lessons_lease_listed(l, T0 - MS(100), 0, NULL);
    assert_false(lessons_lease_alone(l, T0, MS(500), &ring));
    assert_true(lessons_lease_listening(l, ME, 1));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    /* Another server listed: it checks, and nothing is dropped. */
    lessons_lease_listed(l, T0 - MS(90), 1, NULL);
    assert_false(lessons_lease_alone(l, T0, MS(500), &ring));
    assert_true(lessons_lease_current(l, T0, &got));
    /* Alone, but the list is as old as fresh allows: it checks. */
    lessons_lease_listed(l, T0 - MS(80), 0, NULL);
    assert_false(lessons_lease_alone(l, T0 + MS(420), MS(500), &ring));
    /* A list asked for after now (another clock's): not trusted. */
    assert_false(lessons_lease_alone(l, T0 - MS(81), MS(500), &ring));
    assert_false(ring);
    assert_false(lessons_lease_reread(l, &gen));
    before = lessons_lease_gen(l);
    assert_true(lessons_lease_current(l, T0 + MS(419), &got));
    assert_true(lessons_lease_alone(l, T0 + MS(419), MS(500), &ring));
    assert_true(ring);
    assert_false(lessons_lease_current(l, T0 + MS(420), &got));
    /* The holder is rung once until it takes the reread. */
    assert_true(lessons_lease_alone(l, T0 + MS(419), MS(500), &ring));
    assert_false(ring);
    assert_true(lessons_lease_reread(l, &gen));
    assert_int_equal(gen, before + 2);
    assert_false(lessons_lease_reread(l, &gen));
    /* A version read before the drop, a renewal's or a raise: the
     * lease goes on, nothing is served.
     */
    assert_true(lessons_lease_install(l, ME, &w, T0 + MS(950), before));
    assert_false(lessons_lease_current(l, T0 + MS(420), &got));
    assert_true(lessons_lease_raise(l, &w));
    assert_false(lessons_lease_current(l, T0 + MS(420), &got));
    /* Read after it: served again, until the lease's end. */
    assert_true(lessons_lease_install(l, ME, &w, 0, lessons_lease_gen(l)));
    assert_true(lessons_lease_current(l, T0 + MS(949), &got));
    assert_int_equal(got.sum, 5);
    assert_false(lessons_lease_current(l, T0 + MS(950), &got));
    /* Two drops: a read between them serves nothing. */
    before = lessons_lease_gen(l);
    assert_true(lessons_lease_alone(l, T0 + MS(400), MS(500), &ring));
    assert_true(ring);
    assert_true(lessons_lease_install(l, ME, &w, T0 + MS(990), before + 1));
    assert_true(lessons_lease_alone(l, T0 + MS(401), MS(500), &ring));
    assert_true(lessons_lease_install(l, ME, &w, 0, before + 1));
    assert_false(lessons_lease_current(l, T0 + MS(402), &got));
    assert_true(lessons_lease_install(l, ME, &w, 0, before + 2));
    assert_true(lessons_lease_current(l, T0 + MS(402), &got));
    /* Four writes alone, counted; the ones that checked are not. */
    lessons_lease_state(l, T0 + MS(402), &st);
    assert_true(st.alone_writes == 4);
    assert_true(st.told_writes == 0);
}

static void test_one_holder_and_the_next(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 3), got;

    (void)state;
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    /* Another process waits while the holder beats. */
    assert_false(lessons_lease_hold(l, OTHER, T0 + MS(2000), MS(3000),
                                    alive_always));
    assert_false(lessons_lease_install(l, OTHER, &v, T0 + MS(9000), 0));
    assert_false(lessons_lease_publish(l, OTHER, 0,
                                       apr_pcalloc(pool,
                                           sizeof(lessons_lease_check_t))));
    /* A stale beat: the other takes it, with no lease until it renews. */
    assert_true(lessons_lease_hold(l, OTHER, T0 + MS(3001), MS(3000),
                                   alive_always));
    assert_false(lessons_lease_current(l, T0 + MS(3001), &got));
    /* The old holder, back, changes nothing. */
    assert_false(lessons_lease_hold(l, ME, T0 + MS(3002), MS(3000),
                                    alive_always));
    assert_false(lessons_lease_install(l, ME, &v, T0 + MS(9000), 0));
    assert_false(lessons_lease_current(l, T0 + MS(3002), &got));
    /* A holder whose process is gone is replaced at once. */
    assert_true(lessons_lease_hold(l, ME, T0 + MS(3003), MS(3000),
                                   alive_never));
    lessons_lease_let_go(l, ME);
    assert_true(lessons_lease_hold(l, OTHER, T0 + MS(3004), MS(3000),
                                   alive_always));
}

static lessons_lease_check_t *check_of(const char *epoch, apr_int64_t sum,
                                       apr_interval_time_t at)
{
    lessons_lease_check_t *chk = apr_pcalloc(pool, sizeof(*chk));

    chk->version = version(epoch, sum);
    chk->at = at;
    return chk;
}

static void add_row(lessons_lease_check_t *chk, const char *name,
                    apr_int64_t term, apr_int64_t length_ms,
                    apr_int64_t acked)
{
    lessons_lease_row_t *row = &chk->rows[chk->nrows++];

    apr_cpystrn(row->name, name, sizeof(row->name));
    row->term = term;
    row->length_ms = length_ms;
    row->acked = version(chk->version.epoch, acked);
}

static void test_checks_answer_only_earlier_asks(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 4, T0), *out;
    apr_uint32_t before, ticket;

    (void)state;
    out = apr_pcalloc(pool, sizeof(*out));
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_false(lessons_lease_wanted(l));
    before = lessons_lease_asked(l);        /* a check sent now ... */
    ticket = lessons_lease_ask(l);          /* ... then a write asks */
    assert_true(lessons_lease_wanted(l));
    assert_true(lessons_lease_publish(l, ME, before, chk));
    /* That check was sent before the ask: it answers nothing. */
    assert_false(lessons_lease_answer(l, ticket, lessons_lease_clock(),
                                      out));
    assert_true(lessons_lease_wanted(l));
    assert_true(lessons_lease_publish(l, ME, lessons_lease_asked(l), chk));
    assert_true(lessons_lease_answer(l, ticket, lessons_lease_clock(), out));
    assert_int_equal(out->version.sum, 4);
    assert_false(lessons_lease_wanted(l));
}

/* The holder's process holds the block; a first write asks and leads. */
static apr_uint32_t first_lead(lessons_lease_t *l, lessons_lease_check_t *out,
                               apr_uint32_t *upto)
{
    apr_uint32_t t1;

    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    t1 = lessons_lease_ask(l);
    assert_int_equal(lessons_lease_turn(l, t1, lessons_lease_clock(), out,
                                        upto), LESSONS_LEASE_TURN_LEAD);
    return t1;
}

/* Writers share checks: the first to ask makes one for every ask before
 * it sends it; a later ask waits for the next; an older check that comes
 * back late answers nothing it did not; a leader that never finishes is
 * taken over.
 */
static void test_writers_share_checks(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *c4 = check_of("e1", 4, T0),
                          *c5 = check_of("e1", 5, T0),
                          *c9 = check_of("e1", 9, T0), *out;
    apr_uint32_t t1, t2, t3, t4, upto = 0, upto2 = 0;
    apr_interval_time_t began;

    (void)state;
    out = apr_pcalloc(pool, sizeof(*out));
    t1 = first_lead(l, out, &upto);
    assert_int_equal(upto, t1);
    /* Asked while t1's check is out: it must wait for the next one. */
    t2 = lessons_lease_ask(l);
    assert_int_equal(lessons_lease_turn(l, t2, lessons_lease_clock(), out,
                                        &upto2), LESSONS_LEASE_TURN_NONE);
    lessons_lease_led(l, t1, upto, c4);
    assert_int_equal(lessons_lease_turn(l, t1, lessons_lease_clock(), out,
                                        &upto2), LESSONS_LEASE_TURN_ANSWERED);
    assert_int_equal(out->version.sum, 4);
    assert_int_equal(lessons_lease_turn(l, t2, lessons_lease_clock(), out,
                                        &upto2), LESSONS_LEASE_TURN_LEAD);
    t3 = lessons_lease_ask(l);          /* after t2 read the asks */
    assert_int_equal(upto2, t2);
    lessons_lease_led(l, t2, upto2, c5);
    /* The holder's older check, back late, takes nothing back. */
    assert_true(lessons_lease_publish(l, ME, t1, c9));
    assert_int_equal(lessons_lease_turn(l, t2, lessons_lease_clock(), out,
                                        &upto), LESSONS_LEASE_TURN_ANSWERED);
    assert_int_equal(out->version.sum, 5);
    /* A failed check answers nobody and lets the next lead. */
    assert_int_equal(lessons_lease_turn(l, t3, lessons_lease_clock(), out,
                                        &upto), LESSONS_LEASE_TURN_LEAD);
    lessons_lease_led(l, t3, upto, NULL);
    t4 = lessons_lease_ask(l);
    assert_int_equal(lessons_lease_turn(l, t3, lessons_lease_clock(), out,
                                        &upto), LESSONS_LEASE_TURN_LEAD);
    /* t3 leads again and never finishes: t4 takes over once it is stale,
     * not before.
     */
    began = lessons_lease_clock();
    assert_int_equal(lessons_lease_turn(l, t4, began + MS(2000), out,
                                        &upto2), LESSONS_LEASE_TURN_LEAD);
    assert_true(lessons_lease_clock() - began >= LESSONS_LEASE_LEAD_STALE);
    assert_true(lessons_lease_clock() - began < MS(2000));
    assert_int_equal(upto2, t4);
}

/* Writes in rounds: while the last check's acknowledgements are on
 * their way, a new ask waits for them (a little) instead of leading a
 * check of its own; an acknowledgement, or the round's bound, lets it.
 */
static void test_writers_wait_for_the_round(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *c4, *out;
    lessons_lease_version_t v4 = version("e1", 4);
    apr_uint32_t t1, t2, t3, upto = 0;
    apr_interval_time_t began;

    (void)state;
    out = apr_pcalloc(pool, sizeof(*out));
    t1 = first_lead(l, out, &upto);
    /* Came back "in a second": the round's wait (3 ms) cannot pass
     * between here and the turns below, however busy the machine.
     */
    c4 = check_of("e1", 4, lessons_lease_clock() + MS(1000));
    add_row(c4, "b", 6, 1000, 3);       /* b has not acknowledged 4 */
    lessons_lease_led(l, t1, upto, c4);
    /* No leader, but b's acknowledgement is due: t2 does not lead. */
    t2 = lessons_lease_ask(l);
    assert_int_equal(lessons_lease_turn(l, t2, lessons_lease_clock(), out,
                                        &upto), LESSONS_LEASE_TURN_NONE);
    lessons_lease_heard(l, "b", 6, &v4, lessons_lease_clock());
    assert_int_equal(lessons_lease_turn(l, t2, lessons_lease_clock(), out,
                                        &upto), LESSONS_LEASE_TURN_LEAD);
    assert_int_equal(upto, t2);
    /* A round b never acknowledges holds the next lead for its bound. */
    c4 = check_of("e1", 5, lessons_lease_clock());
    add_row(c4, "b", 6, 1000, 4);
    lessons_lease_led(l, t2, upto, c4);
    t3 = lessons_lease_ask(l);
    began = lessons_lease_clock();
    assert_int_equal(lessons_lease_turn(l, t3, began + MS(2000), out,
                                        &upto), LESSONS_LEASE_TURN_LEAD);
    assert_true(lessons_lease_clock() - c4->at >= LESSONS_LEASE_ROUND_WAIT);
    assert_true(lessons_lease_clock() - began < MS(1000));
}

static void test_settled_by_acks_or_ends(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 10, T0);
    lessons_lease_version_t v10 = version("e1", 10),
                            v9 = version("e1", 9),
                            wrong = version("e0", 99);
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;

    (void)state;
    add_row(chk, "a", 5, 1000, 10);     /* acknowledged in the check */
    add_row(chk, "b", 6, 1000, 9);      /* not yet */
    add_row(chk, "c", 7, 2000, -1);     /* never */
    assert_false(lessons_lease_settled(l, chk, T0 + MS(1), &until, &bell));
    assert_int_equal(until, T0 + MS(1000));
    /* b acknowledges an older version, and one of another epoch. */
    lessons_lease_heard(l, "b", 6, &v9, T0 + MS(2));
    lessons_lease_heard(l, "b", 6, &wrong, T0 + MS(2));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(3), &until, &bell));
    /* c: its renewal heard 500 ms before the check ends 500 ms sooner. */
    lessons_lease_heard(l, "c", 7, NULL, T0 - MS(500));
    lessons_lease_heard(l, "b", 6, &v10, T0 + MS(4));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(5), &until, &bell));
    assert_int_equal(until, T0 + MS(1500));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(1499), &until,
                                       &bell));
    assert_true(lessons_lease_settled(l, chk, T0 + MS(1500), &until,
                                      &bell));
}

/* INVALIDATE rounds: numbered in the order drawn, named by this
 * block's nonces; a row settles when its server acknowledges the round
 * or a later one (each drawn after the earlier round's commit), or when
 * its lease ends; a version never settles it, and a nonce this block
 * did not draw is ignored.
 */
static void test_nonce_rounds_settle_by_their_acks(void **state)
{
    lessons_lease_t *l = listening_with_b();
    lessons_lease_check_t *chk = check_of("e1", 10, T0);
    lessons_lease_check_t *first = check_of("e1", 10, T0);
    unsigned char n1[LESSONS_LEASE_NONCE_LEN], n2[LESSONS_LEASE_NONCE_LEN];
    unsigned char forged[LESSONS_LEASE_NONCE_LEN];
    lessons_lease_version_t v99 = version("e1", 99);
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;

    (void)state;
    assert_true(lead_round(l, T0, n1) == 1);
    assert_true(lead_round(l, T0 + MS(1), n2) == 2);
    assert_memory_equal(n1, n2, 8);
    assert_int_equal(n1[15], 1);
    assert_int_equal(n2[15], 2);
    chk->round = 2;
    add_row(chk, "b", 6, 1000, -1);
    add_row(chk, "c", 7, 2000, -1);
    first->round = 1;
    add_row(first, "c", 7, 2000, -1);
    assert_false(lessons_lease_settled(l, chk, T0 + MS(1), &until, &bell));
    /* A version, however new, is no answer to an INVALIDATE. */
    lessons_lease_heard(l, "b", 6, &v99, T0 + MS(2));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(3), &until, &bell));
    /* b answers the earlier round only: not this one. */
    lessons_lease_heard_nonce(l, "b", n1, T0 + MS(4));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(5), &until, &bell));
    assert_int_equal(until, T0 + MS(1000));
    /* Nonces not drawn here: another prefix, a round not yet drawn. */
    memcpy(forged, n2, sizeof(forged));
    forged[0] ^= 1;
    lessons_lease_heard_nonce(l, "b", forged, T0 + MS(6));
    memcpy(forged, n2, sizeof(forged));
    forged[15] = 3;
    lessons_lease_heard_nonce(l, "b", forged, T0 + MS(6));
    lessons_lease_heard_nonce(l, "c", forged, T0 + MS(6));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(7), &until, &bell));
    lessons_lease_heard_nonce(l, "b", n2, T0 + MS(8));
    /* c: a later round's answer settles the earlier round too. */
    assert_false(lessons_lease_settled(l, first, T0 + MS(9), &until, &bell));
    lessons_lease_heard_nonce(l, "c", n2, T0 + MS(10));
    assert_true(lessons_lease_settled(l, first, T0 + MS(11), &until, &bell));
    assert_true(lessons_lease_settled(l, chk, T0 + MS(11), &until, &bell));
    /* A row never answered settles when its lease ends (a write past
     * the hold b's answer to round 2 gave, which asked for one).
     */
    chk->round = lead_round(l, T0 + MS(1) + LESSONS_LEASE_HOLD, n1);
    assert_true(chk->round == 3);
    assert_false(lessons_lease_settled(l, chk, T0 + MS(1999), &until,
                                       &bell));
    assert_true(lessons_lease_settled(l, chk, T0 + MS(2000), &until, &bell));
}

static void test_own_server_needs_its_install_only(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 10, T0);
    lessons_lease_version_t v9 = version("e1", 9), v10 = version("e1", 10);
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;

    (void)state;
    lessons_lease_name(l, "me");
    add_row(chk, "me", 3, 1000, -1);
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v9, T0 + MS(900), 0));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(1), &until, &bell));
    assert_true(lessons_lease_install(l, ME, &v10, 0, 0));
    assert_true(lessons_lease_settled(l, chk, T0 + MS(2), &until, &bell));
}

/* A writer raises its own server's version to what its check read: the
 * write is served here at once, without the holder catching up, but only
 * within the installed epoch, never past a refresh under way, and never
 * longer than the lease.
 */
static void test_a_writer_raises_its_own_server(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 12, T0);
    lessons_lease_version_t v9 = version("e1", 9), v12 = version("e1", 12),
                            v7 = version("e1", 7), other = version("e2", 30),
                            got;
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;

    (void)state;
    lessons_lease_name(l, "me");
    add_row(chk, "me", 3, 1000, -1);
    /* Nothing installed yet: no epoch to raise within. */
    assert_false(lessons_lease_raise(l, &v12));
    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_install(l, ME, &v9, T0 + MS(900), 0));
    assert_false(lessons_lease_own(l, "me", &v12));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(1), &until, &bell));
    assert_true(lessons_lease_raise(l, &v12));
    assert_true(lessons_lease_current(l, T0 + MS(1), &got));
    assert_int_equal(got.sum, 12);
    assert_true(lessons_lease_settled(l, chk, T0 + MS(1), &until, &bell));
    /* Its holder hears its own server's write as served already; another
     * server's, or a version not yet held, it catches up on.
     */
    assert_true(lessons_lease_own(l, "me", &v12));
    assert_false(lessons_lease_own(l, "them", &v12));
    assert_false(lessons_lease_own(l, "me", &other));
    /* Never back, never across epochs. */
    assert_true(lessons_lease_raise(l, &v7));
    assert_true(lessons_lease_current(l, T0 + MS(2), &got));
    assert_int_equal(got.sum, 12);
    assert_false(lessons_lease_raise(l, &other));
    assert_true(lessons_lease_current(l, T0 + MS(2), &got));
    assert_string_equal(got.epoch, "e1");
    /* A refresh under way stays: nothing served until the install. */
    assert_true(lessons_lease_refresh(l, ME));
    assert_true(lessons_lease_raise(l, &v12));
    assert_false(lessons_lease_current(l, T0 + MS(3), &got));
    /* Nor does a raise lengthen the lease. */
    assert_true(lessons_lease_install(l, ME, &v12, 0, 0));
    assert_false(lessons_lease_current(l, T0 + MS(900), &got));
}

static void test_an_older_renewal_heard_does_not_end_a_newer(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 10, T0);
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;

    (void)state;
    add_row(chk, "d", 8, 1000, -1);
    /* Term 7 was heard long ago; the check's term 8 was not. */
    lessons_lease_heard(l, "d", 7, NULL, T0 - MS(5000));
    assert_false(lessons_lease_settled(l, chk, T0 + MS(10), &until, &bell));
    assert_int_equal(until, T0 + MS(1000));
    assert_true(lessons_lease_settled(l, chk, T0 + MS(1000), &until,
                                      &bell));
}

static void test_overflow_waits_out_the_longest(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 10, T0);
    apr_interval_time_t until = 0;
    apr_uint32_t bell = 0;

    (void)state;
    chk->overflow = 1;
    assert_false(lessons_lease_settled(l, chk, T0 + MS(30000), &until,
                                       &bell));
    assert_int_equal(until, T0 + MS(LESSONS_LEASE_MAX_MS));
}

static void test_covers(void **state)
{
    lessons_lease_version_t a = version("e1", 5), b = version("e1", 6),
                            c = version("e2", 9), none = version("e1", -1);

    (void)state;
    assert_true(lessons_lease_covers(&b, &a));
    assert_true(lessons_lease_covers(&a, &a));
    assert_false(lessons_lease_covers(&a, &b));
    assert_false(lessons_lease_covers(&c, &a));
    assert_false(lessons_lease_covers(&none, &none));
}

/* A block in shared memory, as the server's processes share it. */
static lessons_lease_t *shared_block(void)
{
    apr_shm_t *shm;
    lessons_lease_t *l;

    assert_int_equal(apr_shm_create(&shm, lessons_lease_size(), NULL, pool),
                     APR_SUCCESS);
    l = lessons_lease_attach(apr_shm_baseaddr_get(shm),
                             apr_shm_size_get(shm), lock, 1, pool);
    assert_non_null(l);
    return l;
}

/* A writer in another process sleeps on the bell; what this process
 * hears wakes it well before its deadline.
 */
static void test_heard_wakes_another_process(void **state)
{
    lessons_lease_t *l;
    int status = 0;
    pid_t child;

    (void)state;
    l = shared_block();
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        lessons_lease_check_t *chk = check_of("e1", 3, lessons_lease_clock());
        apr_interval_time_t start = lessons_lease_clock(), until = 0;
        apr_uint32_t bell = 0;

        add_row(chk, "z", 1, 20000, -1);
        while (!lessons_lease_settled(l, chk, lessons_lease_clock(), &until,
                                      &bell)) {
            lessons_lease_sleep(l, bell, until);
        }
        _exit(lessons_lease_clock() - start < apr_time_from_sec(10) ? 0
                                                                    : 1);
    }
    apr_sleep(MS(200));
    {
        lessons_lease_version_t v = version("e1", 3);

        lessons_lease_heard(l, "z", 1, &v, lessons_lease_clock());
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* What a writer's wait could change rings the bell; an answer heard
 * again (a resent datagram's, the same rows in the next check) does not:
 * on two CPUs every ring woke every writer of the server.
 */
static void test_only_news_rings(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_check_t *chk = check_of("e1", 10, T0);
    lessons_lease_version_t v9 = version("e1", 9), v10 = version("e1", 10);
    apr_interval_time_t until = 0;
    apr_uint32_t b0 = 0, b1 = 0;

    (void)state;
    add_row(chk, "b", 6, 1000, 8);
    lessons_lease_heard(l, "b", 6, &v9, T0);
    (void)lessons_lease_settled(l, chk, T0 + MS(1), &until, &b0);
    lessons_lease_heard(l, "b", 6, &v9, T0 + MS(1));       /* again */
    lessons_lease_heard(l, "b", 5, NULL, T0 + MS(1));      /* older term */
    lessons_lease_heard_check(l, chk, T0 + MS(1));         /* nothing new */
    (void)lessons_lease_settled(l, chk, T0 + MS(1), &until, &b1);
    assert_int_equal(b1, b0);
    lessons_lease_heard(l, "b", 6, &v10, T0 + MS(2));
    assert_true(lessons_lease_settled(l, chk, T0 + MS(2), &until, &b1));
    assert_int_not_equal(b1, b0);
}

/* A writer in another process waits for its turn behind a round whose
 * acknowledgement is due; the one that settles the round wakes it, long
 * before the round's wait would have ended.
 */
static void test_the_settling_answer_wakes_a_turn(void **state)
{
    lessons_lease_t *l;
    lessons_lease_check_t *chk, *out;
    lessons_lease_version_t v4 = version("e1", 4);
    apr_uint32_t t1, upto = 0;
    int status = 0;
    pid_t child;

    (void)state;
    l = shared_block();
    out = apr_pcalloc(pool, sizeof(*out));
    t1 = first_lead(l, out, &upto);
    /* The round's wait ends 20 s from now: only a wake ends it sooner. */
    chk = check_of("e1", 4, lessons_lease_clock() + apr_time_from_sec(20));
    add_row(chk, "b", 6, 60000, 3);
    add_row(chk, "c", 7, 60000, 3);
    lessons_lease_led(l, t1, upto, chk);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        apr_interval_time_t start = lessons_lease_clock();
        apr_uint32_t t2 = lessons_lease_ask(l), mine = 0;
        lessons_lease_turn_e turn =
            lessons_lease_turn(l, t2, start + apr_time_from_sec(30), out,
                               &mine);

        _exit(turn == LESSONS_LEASE_TURN_LEAD
              && lessons_lease_clock() - start < apr_time_from_sec(10)
              ? 0 : 1);
    }
    apr_sleep(MS(200));
    /* b's answer leaves c's due: the writer sleeps on; c's settles it. */
    lessons_lease_heard(l, "b", 6, &v4, lessons_lease_clock());
    apr_sleep(MS(100));
    assert_int_equal(waitpid(child, &status, WNOHANG), 0);
    lessons_lease_heard(l, "c", 7, &v4, lessons_lease_clock());
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Zeroed memory a forked writer and this process both see. */
static void *shared_flags(apr_size_t size)
{
    void *f = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    assert_true(f != MAP_FAILED);
    memset(f, 0, size);
    return f;
}

/* A writer whose ask a lead in progress answers sleeps through the
 * lead's answer and every acknowledgement that does not settle the
 * round, and wakes at the one that does (woken at the answer, it would
 * only sleep again, once for each acknowledgement).  A machine so busy
 * that the lead goes stale first proves nothing either way.
 */
typedef struct {
    apr_uint32_t asking, settling;
    apr_interval_time_t led;
} answered_flags_t;

static void test_an_answered_writer_wakes_once_settled(void **state)
{
    lessons_lease_t *l;
    lessons_lease_check_t *chk, *out;
    lessons_lease_version_t v4 = version("e1", 4);
    apr_uint32_t t1, t2, upto = 0;
    answered_flags_t *f;
    int status = 0;
    pid_t child;

    (void)state;
    l = shared_block();
    f = shared_flags(sizeof(*f));
    out = apr_pcalloc(pool, sizeof(*out));
    t2 = lessons_lease_ask(l);              /* asked before the lead */
    f->led = lessons_lease_clock();
    t1 = first_lead(l, out, &upto);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        lessons_lease_turn_e turn;
        apr_uint32_t mine = 0;

        apr_atomic_set32(&f->asking, 1);
        turn = lessons_lease_turn(l, t2,
                                  lessons_lease_clock() + apr_time_from_sec(30),
                                  out, &mine);
        _exit(turn == LESSONS_LEASE_TURN_ANSWERED && out->version.sum == 4
              && (apr_atomic_read32(&f->settling)
                  || lessons_lease_clock() - f->led >= LESSONS_LEASE_LEAD_STALE)
              ? 0 : 1);
    }
    while (!apr_atomic_read32(&f->asking)) {
        apr_sleep(MS(5));
    }
    apr_sleep(MS(50));
    chk = check_of("e1", 4, lessons_lease_clock());
    add_row(chk, "b", 6, 60000, 3);
    add_row(chk, "c", 7, 60000, 3);
    lessons_lease_led(l, t1, upto, chk);
    apr_sleep(MS(50));
    lessons_lease_heard(l, "b", 6, &v4, lessons_lease_clock());
    apr_sleep(MS(50));
    apr_atomic_set32(&f->settling, 1);
    lessons_lease_heard(l, "c", 7, &v4, lessons_lease_clock());
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    munmap(f, sizeof(*f));
}

/* The writers that ask while a round is out wait for the next lead: the
 * first to ask makes it, when the round is settled; the others sleep
 * until that lead's round is settled, and are woken by it, not by a
 * timeout.  (A machine so busy that this took longer than a stale lead
 * proves nothing.)
 */
typedef struct {
    apr_uint32_t asking[2], settling;
    apr_interval_time_t began, returned;
    apr_uint32_t led;
} next_flags_t;

static void test_the_next_lead_answers_the_writers_behind_it(void **state)
{
    lessons_lease_t *l;
    lessons_lease_check_t *chk, *out;
    lessons_lease_version_t v4 = version("e1", 4), v5 = version("e1", 5);
    apr_uint32_t t1, upto = 0;
    apr_interval_time_t far = lessons_lease_clock() + apr_time_from_sec(20),
                        settled_at;
    next_flags_t *f;
    int status = 0, k;
    pid_t child[2];

    (void)state;
    l = shared_block();
    f = shared_flags(sizeof(*f));
    out = apr_pcalloc(pool, sizeof(*out));
    t1 = first_lead(l, out, &upto);
    /* Its round's wait ends only when it is settled. */
    chk = check_of("e1", 4, far);
    add_row(chk, "b", 6, 60000, 3);
    add_row(chk, "c", 7, 60000, 3);
    lessons_lease_led(l, t1, upto, chk);
    f->began = lessons_lease_clock();
    for (k = 0; k < 2; k++) {
        child[k] = fork();
        assert_true(child[k] >= 0);
        if (child[k] == 0) {
            apr_uint32_t t = lessons_lease_ask(l), mine = 0;
            lessons_lease_turn_e turn;

            apr_atomic_set32(&f->asking[k], 1);
            turn = lessons_lease_turn(l, t, lessons_lease_clock()
                                            + apr_time_from_sec(30),
                                      out, &mine);
            if (k == 0) {
                /* The first to ask leads next; its check is out. */
                lessons_lease_check_t *c5 = check_of("e1", 5, far);

                add_row(c5, "b", 6, 60000, 4);
                add_row(c5, "c", 7, 60000, 4);
                lessons_lease_led(l, t, mine, c5);
                _exit(turn == LESSONS_LEASE_TURN_LEAD ? 0 : 1);
            }
            f->returned = lessons_lease_clock();
            _exit(turn == LESSONS_LEASE_TURN_ANSWERED
                  && out->version.sum == 5
                  && (apr_atomic_read32(&f->settling)
                      || f->returned - f->began >= LESSONS_LEASE_LEAD_STALE)
                  ? 0 : 1);
        }
        while (!apr_atomic_read32(&f->asking[k])) {
            apr_sleep(MS(5));
        }
        apr_sleep(MS(50));
    }
    /* The round settles: the first leads, and its check is back. */
    lessons_lease_heard(l, "b", 6, &v4, lessons_lease_clock());
    lessons_lease_heard(l, "c", 7, &v4, lessons_lease_clock());
    assert_int_equal(waitpid(child[0], &status, 0), child[0]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    lessons_lease_heard(l, "b", 6, &v5, lessons_lease_clock());
    apr_atomic_set32(&f->settling, 1);
    lessons_lease_heard(l, "c", 7, &v5, lessons_lease_clock());
    settled_at = lessons_lease_clock();
    assert_int_equal(waitpid(child[1], &status, 0), child[1]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* Woken by the settling, not by looking again after a stale lead. */
    if (settled_at - f->began < MS(300)) {
        assert_true(f->returned - f->began < LESSONS_LEASE_LEAD_STALE);
    }
    munmap(f, sizeof(*f));
}

/* The holder's read after a drop: 10 ms at first and whenever a GET
 * took what it read last; doubled, up to 320 ms, while none did (each
 * read dropped again before anyone used it).  A GET's take is what
 * says so, and each read starts it afresh.
 */
static void test_rereads_back_off_while_no_get_takes_them(void **state)
{
    lessons_lease_t *l = fresh();
    lessons_lease_version_t v = version("e1", 4), got;
    apr_interval_time_t wait = 0;
    apr_uint32_t gen;
    int i, ring;

    (void)state;
    assert_int_equal(lessons_lease_reread_wait(0, 0), MS(10));
    for (i = 0; i < 8; i++) {
        wait = lessons_lease_reread_wait(wait, 0);
    }
    assert_int_equal(wait, MS(320));
    assert_int_equal(lessons_lease_reread_wait(MS(40), 0), MS(80));
    assert_int_equal(lessons_lease_reread_wait(MS(320), 1), MS(10));

    assert_true(lessons_lease_hold(l, ME, T0, MS(3000), alive_always));
    assert_true(lessons_lease_listening(l, ME, 1));
    assert_true(lessons_lease_install(l, ME, &v, T0 + MS(900), 0));
    assert_false(lessons_lease_taken(l));
    /* Past the lease's end nothing is taken. */
    assert_false(lessons_lease_current(l, T0 + MS(900), &got));
    assert_false(lessons_lease_taken(l));
    assert_true(lessons_lease_current(l, T0, &got));
    assert_true(lessons_lease_taken(l));
    assert_true(lessons_lease_drop(l, &ring));
    assert_false(lessons_lease_current(l, T0, &got));
    /* The holder's read starts afresh: dropped again before any GET. */
    assert_true(lessons_lease_reread(l, &gen));
    assert_false(lessons_lease_taken(l));
    assert_true(lessons_lease_install(l, ME, &v, 0, gen));
    assert_true(lessons_lease_drop(l, &ring));
    assert_false(lessons_lease_current(l, T0, &got));
    assert_false(lessons_lease_taken(l));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_path_only_while_the_lease_holds),
        cmocka_unit_test(test_no_lease_while_catching_up),
        cmocka_unit_test(test_versions_only_move_forward),
        cmocka_unit_test(test_the_newest_list_is_kept),
        cmocka_unit_test(test_the_list_keeps_its_rows),
        cmocka_unit_test(test_a_run_serves_only_once_warm),
        cmocka_unit_test(test_a_write_alone_drops_the_version),
        cmocka_unit_test(test_an_invalidate_drops_the_version),
        cmocka_unit_test(test_a_hold_keeps_the_drop),
        cmocka_unit_test(test_writes_under_holds_tell_no_one),
        cmocka_unit_test(test_holds_are_renewed_ahead),
        cmocka_unit_test(test_write_waits_by_bound),
        cmocka_unit_test(test_a_write_invalidates_from_a_fresh_list),
        cmocka_unit_test(test_writes_share_rounds),
        cmocka_unit_test(test_a_joined_write_is_rung_by_its_leader),
        cmocka_unit_test(test_one_holder_and_the_next),
        cmocka_unit_test(test_checks_answer_only_earlier_asks),
        cmocka_unit_test(test_writers_share_checks),
        cmocka_unit_test(test_writers_wait_for_the_round),
        cmocka_unit_test(test_settled_by_acks_or_ends),
        cmocka_unit_test(test_nonce_rounds_settle_by_their_acks),
        cmocka_unit_test(test_own_server_needs_its_install_only),
        cmocka_unit_test(test_a_writer_raises_its_own_server),
        cmocka_unit_test(test_an_older_renewal_heard_does_not_end_a_newer),
        cmocka_unit_test(test_overflow_waits_out_the_longest),
        cmocka_unit_test(test_covers),
        cmocka_unit_test(test_heard_wakes_another_process),
        cmocka_unit_test(test_only_news_rings),
        cmocka_unit_test(test_the_settling_answer_wakes_a_turn),
        cmocka_unit_test(test_an_answered_writer_wakes_once_settled),
        cmocka_unit_test(test_the_next_lead_answers_the_writers_behind_it),
        cmocka_unit_test(test_rereads_back_off_while_no_get_takes_them),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
