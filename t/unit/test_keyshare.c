/* Licensed under the Apache License, Version 2.0.
 *
 * test_keyshare.c: lessons_keyshare -- a server's shared key set
 * documents: claims and leases, the schedule, the unknown-kid allowance,
 * a restart that keeps a slot, and forked readers against a writer that
 * swaps documents, none of them ever seeing half of one.  Times are
 * given, not read, but for the forked test, which only counts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apr_global_mutex.h"
#include "apr_shm.h"
#include "apr_strings.h"

#include "keys/lessons_keyshare.h"

#include "unit_pool.h"

#define S(n)     apr_time_from_sec(n)
#define CAP      4096
#define T0       S(1000000)

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

static const unsigned char ID_A[LESSONS_KEYSHARE_ID_LEN] = { 'a' };
static const unsigned char ID_B[LESSONS_KEYSHARE_ID_LEN] = { 'b' };

/* A fresh block of n slots in the pool's memory. */
static lessons_keyshare_t *fresh(int n, void **base)
{
    apr_size_t size = lessons_keyshare_size(n, CAP);
    lessons_keyshare_t *ks;
    int i;

    *base = apr_palloc(pool, size);
    ks = lessons_keyshare_attach(*base, size, n, CAP, 1, lock, pool);
    assert_non_null(ks);
    for (i = 0; i < n; i++) {
        assert_int_equal(lessons_keyshare_bind(ks, i, ID_A), 0);
    }
    return ks;
}

static const char *doc_of(lessons_keyshare_t *ks, int i)
{
    lessons_keyshare_view_t v;

    assert_int_equal(lessons_keyshare_read(ks, i, 1, pool, &v), APR_SUCCESS);
    return v.doc;
}

static lessons_keyshare_claim_e claim(lessons_keyshare_t *ks,
                                      apr_uint64_t owner, apr_time_t now,
                                      int asked, apr_time_t *when)
{
    return lessons_keyshare_claim(ks, 0, owner, now, asked, S(60), S(15),
                                  when);
}

static lessons_keyshare_publish_e publish(lessons_keyshare_t *ks,
                                          apr_uint64_t owner, apr_time_t now,
                                          const char *doc)
{
    return lessons_keyshare_publish(ks, 0, owner, now, doc,
                                    doc ? strlen(doc) : 0, S(3600), S(60));
}

/* One process fetches while the others are told to wait; what it
 * publishes is what every reader copies; the same bytes again, a
 * failure or a document over the cap keep the last good one.
 */
static void test_claim_and_publish(void **state)
{
    void *base;
    lessons_keyshare_t *ks = fresh(2, &base);
    lessons_keyshare_view_t v;
    apr_time_t when = 0;
    char *big;

    (void)state;
    assert_int_equal(lessons_keyshare_generation(ks, 0), 0);
    assert_int_equal(publish(ks, 7, T0, "{}"), LESSONS_KEYSHARE_NOT_OWNER);
    assert_int_equal(claim(ks, 7, T0, 0, &when), LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(when, T0 + S(15));
    assert_int_equal(claim(ks, 8, T0 + S(1), 0, &when),
                     LESSONS_KEYSHARE_BUSY);
    assert_int_equal(claim(ks, 8, T0 + S(1), 1, &when),
                     LESSONS_KEYSHARE_BUSY);
    assert_int_equal(when, T0 + S(15));
    /* the fetch in flight shows, until it publishes */
    assert_int_equal(lessons_keyshare_read(ks, 0, 0, pool, &v), APR_SUCCESS);
    assert_int_equal(v.lease_until, T0 + S(15));
    assert_int_equal(publish(ks, 8, T0 + S(2), "{\"keys\":[2]}"),
                     LESSONS_KEYSHARE_NOT_OWNER);
    assert_int_equal(publish(ks, 7, T0 + S(2), "{\"keys\":[1]}"),
                     LESSONS_KEYSHARE_NEW);
    assert_int_equal(lessons_keyshare_generation(ks, 0), 1);
    assert_int_equal(lessons_keyshare_generation(ks, 1), 0);
    assert_string_equal(doc_of(ks, 0), "{\"keys\":[1]}");
    assert_int_equal(lessons_keyshare_read(ks, 0, 1, pool, &v), APR_SUCCESS);
    assert_int_equal(v.fetched, T0);
    assert_int_equal(v.changed, T0 + S(2));
    assert_int_equal(v.next_fetch, T0 + S(2) + S(3600));
    assert_int_equal(v.fetches, 1);
    assert_int_equal(v.lease_until, 0);

    /* the same bytes: no new generation */
    assert_int_equal(claim(ks, 8, T0 + S(3600) + S(2), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 8, T0 + S(3600) + S(3), "{\"keys\":[1]}"),
                     LESSONS_KEYSHARE_SAME);
    assert_int_equal(lessons_keyshare_generation(ks, 0), 1);
    /* a failure keeps it, and is retried after min_refresh */
    assert_int_equal(claim(ks, 9, T0 + S(7300), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 9, T0 + S(7301), NULL),
                     LESSONS_KEYSHARE_KEPT);
    assert_string_equal(doc_of(ks, 0), "{\"keys\":[1]}");
    assert_int_equal(lessons_keyshare_read(ks, 0, 0, pool, &v), APR_SUCCESS);
    assert_null(v.doc);
    assert_int_equal(v.failures, 1);
    assert_int_equal(v.lease_until, 0);
    assert_int_equal(v.next_fetch, T0 + S(7301) + S(60));
    /* too big for the slot */
    big = apr_palloc(pool, CAP + 2);
    memset(big, 'x', CAP + 1);
    big[CAP + 1] = '\0';
    assert_int_equal(claim(ks, 9, T0 + S(7400), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 9, T0 + S(7401), big),
                     LESSONS_KEYSHARE_TOO_BIG);
    assert_int_equal(lessons_keyshare_generation(ks, 0), 1);
    /* exactly the cap fits */
    big[CAP] = '\0';
    assert_int_equal(claim(ks, 9, T0 + S(7500), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 9, T0 + S(7501), big), LESSONS_KEYSHARE_NEW);
    assert_int_equal(strlen(doc_of(ks, 0)), CAP);
    assert_int_equal(lessons_keyshare_read(ks, 1, 0, pool, &v), APR_SUCCESS);
    assert_int_equal(v.generation, 0);
    assert_int_equal(lessons_keyshare_read(ks, 2, 0, pool, &v), APR_EINVAL);
}

/* The schedule: nothing is fetched before it is due, whoever asks; an
 * empty slot is fetched at once, and after a failure on the failure's
 * schedule.
 */
static void test_schedule(void **state)
{
    void *base;
    lessons_keyshare_t *ks = fresh(1, &base);
    apr_time_t when = 0;

    (void)state;
    assert_int_equal(claim(ks, 1, T0, 0, &when), LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 1, T0, NULL), LESSONS_KEYSHARE_KEPT);
    assert_int_equal(claim(ks, 2, T0 + S(59), 0, &when),
                     LESSONS_KEYSHARE_NOT_DUE);
    assert_int_equal(when, T0 + S(60));
    assert_int_equal(claim(ks, 2, T0 + S(60), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 2, T0 + S(61), "{}"), LESSONS_KEYSHARE_NEW);
    assert_int_equal(claim(ks, 3, T0 + S(62), 0, &when),
                     LESSONS_KEYSHARE_NOT_DUE);
    assert_int_equal(when, T0 + S(61) + S(3600));
    assert_int_equal(claim(ks, 3, T0 + S(61) + S(3600), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
}

/* A kid the set lacks may fetch once per min_refresh for the whole
 * server; the schedule's fetches do not spend that allowance.
 */
static void test_asked_allowance(void **state)
{
    void *base;
    lessons_keyshare_t *ks = fresh(1, &base);
    lessons_keyshare_view_t v;
    apr_time_t when = 0;

    (void)state;
    assert_int_equal(claim(ks, 1, T0, 0, &when), LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 1, T0 + S(1), "{}"), LESSONS_KEYSHARE_NEW);
    /* the first fetch was the schedule's: a kid may ask at once */
    assert_int_equal(claim(ks, 2, T0 + S(2), 1, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 2, T0 + S(3), "{\"k\":2}"),
                     LESSONS_KEYSHARE_NEW);
    assert_int_equal(claim(ks, 3, T0 + S(4), 1, &when),
                     LESSONS_KEYSHARE_TOO_SOON);
    assert_int_equal(when, T0 + S(62));
    assert_int_equal(claim(ks, 3, T0 + S(62), 1, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 3, T0 + S(63), "{\"k\":2}"),
                     LESSONS_KEYSHARE_SAME);
    assert_int_equal(lessons_keyshare_read(ks, 0, 0, pool, &v), APR_SUCCESS);
    assert_int_equal(v.asked, 2);
    assert_int_equal(v.fetches, 3);
}

/* A lease ends: a process that died while fetching blocks nobody for
 * longer than the lease, and its late publish is ignored.
 */
static void test_lease_expires(void **state)
{
    void *base;
    lessons_keyshare_t *ks = fresh(1, &base);
    apr_time_t when = 0;

    (void)state;
    assert_int_equal(claim(ks, 1, T0, 0, &when), LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(claim(ks, 2, T0 + S(14), 0, &when),
                     LESSONS_KEYSHARE_BUSY);
    assert_int_equal(claim(ks, 2, T0 + S(15), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 1, T0 + S(16), "{\"old\":1}"),
                     LESSONS_KEYSHARE_NOT_OWNER);
    assert_int_equal(publish(ks, 2, T0 + S(16), "{}"), LESSONS_KEYSHARE_NEW);
    assert_string_equal(doc_of(ks, 0), "{}");
    assert_int_equal(claim(ks, 0, T0 + S(20), 1, &when),
                     LESSONS_KEYSHARE_FAILED);
}

/* A restart (the block kept): the same source keeps its document and
 * schedule, and a lease of the old generation is dropped; another source
 * in that slot starts empty; another shape lays the block out anew.
 */
static void test_restart(void **state)
{
    void *base;
    lessons_keyshare_t *ks = fresh(2, &base), *again;
    apr_size_t size = lessons_keyshare_size(2, CAP);
    apr_time_t when = 0;

    (void)state;
    assert_int_equal(claim(ks, 1, T0, 0, &when), LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 1, T0, "{\"a\":1}"), LESSONS_KEYSHARE_NEW);
    assert_int_equal(lessons_keyshare_claim(ks, 1, 1, T0, 0, S(60), S(15),
                                            &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(lessons_keyshare_publish(ks, 1, 1, T0, "{\"b\":1}", 7,
                                              S(3600), S(60)),
                     LESSONS_KEYSHARE_NEW);
    assert_int_equal(claim(ks, 5, T0 + S(3600), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);     /* then the restart */

    again = lessons_keyshare_attach(base, size, 2, CAP, 0, lock, pool);
    assert_non_null(again);
    assert_int_equal(lessons_keyshare_bind(again, 0, ID_A), 1);
    assert_int_equal(lessons_keyshare_bind(again, 1, ID_B), 0);
    assert_int_equal(lessons_keyshare_generation(again, 0), 1);
    assert_string_equal(doc_of(again, 0), "{\"a\":1}");
    assert_int_equal(lessons_keyshare_generation(again, 1), 0);
    assert_null(doc_of(again, 1));
    /* the old generation's lease is gone: the new one fetches now */
    assert_int_equal(claim(again, 6, T0 + S(3601), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);

    /* one more source: a new layout, nothing kept */
    assert_null(lessons_keyshare_attach(base, size, 3, CAP, 0, lock, pool));
    base = apr_pcalloc(pool, lessons_keyshare_size(3, CAP));
    again = lessons_keyshare_attach(base, lessons_keyshare_size(3, CAP), 3,
                                    CAP, 0, lock, pool);
    assert_non_null(again);
    assert_int_equal(lessons_keyshare_bind(again, 0, ID_A), 0);
    assert_int_equal(lessons_keyshare_generation(again, 0), 0);
}

/* A restart keeps a slot's document but not its schedule: the new
 * generation fetches the kept source at once, so that a key the
 * provider removed (a compromised one) stops working within seconds of
 * a reload, not at the next refresh (issue 55 §2).
 */
static void test_restart_fetches_kept_at_once(void **state)
{
    void *base;
    lessons_keyshare_t *ks = fresh(1, &base), *again;
    apr_time_t when = 0;

    (void)state;
    assert_int_equal(claim(ks, 1, T0, 0, &when), LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(ks, 1, T0, "{\"a\":1}"), LESSONS_KEYSHARE_NEW);
    /* before the restart: not due for an hour */
    assert_int_equal(claim(ks, 2, T0 + S(10), 0, &when),
                     LESSONS_KEYSHARE_NOT_DUE);
    assert_true(when == T0 + S(3600));

    again = lessons_keyshare_attach(base, lessons_keyshare_size(1, CAP), 1,
                                    CAP, 0, lock, pool);
    assert_non_null(again);
    assert_int_equal(lessons_keyshare_bind(again, 0, ID_A), 1);
    assert_string_equal(doc_of(again, 0), "{\"a\":1}");  /* still serves */
    assert_int_equal(claim(again, 3, T0 + S(10), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
}

/* A reload gives a slot to another source while a child of the older
 * generation still runs: that child no longer sees the slot's document,
 * and can neither claim the slot nor publish to it, so the new source
 * never gets the old one's keys.
 */
static void test_older_generation_keeps_out(void **state)
{
    void *base;
    lessons_keyshare_t *parent = fresh(1, &base), *old_child, *new_child;
    apr_size_t size = lessons_keyshare_size(1, CAP);
    const unsigned char (*ids)[LESSONS_KEYSHARE_ID_LEN] = &ID_B;
    lessons_keyshare_view_t v;
    apr_time_t when = 0;
    int slot = -1;

    (void)state;
    old_child = lessons_keyshare_attach(base, size, 1, CAP, 0, lock, pool);
    assert_int_equal(lessons_keyshare_expect(old_child, 0, ID_A, pool), 0);
    assert_int_equal(lessons_keyshare_expect(old_child, 1, ID_A, pool), -1);
    assert_int_equal(claim(old_child, 1, T0, 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);
    assert_int_equal(publish(old_child, 1, T0, "{\"a\":1}"),
                     LESSONS_KEYSHARE_NEW);

    /* the reload: source B takes the slot (A is gone from the config) */
    assert_int_equal(lessons_keyshare_assign(parent, ids, 1, &slot), 0);
    assert_int_equal(slot, 0);
    new_child = lessons_keyshare_attach(base, size, 1, CAP, 0, lock, pool);
    assert_int_equal(lessons_keyshare_expect(new_child, 0, ID_B, pool), 0);
    assert_int_equal(lessons_keyshare_generation(new_child, 0), 0);
    assert_int_equal(claim(new_child, 2, T0 + S(1), 0, &when),
                     LESSONS_KEYSHARE_CLAIMED);

    /* the old child: nothing to see, claim or publish */
    assert_int_equal(lessons_keyshare_generation(old_child, 0), 0);
    assert_int_equal(claim(old_child, 3, T0 + S(100), 0, &when),
                     LESSONS_KEYSHARE_FAILED);
    assert_int_equal(publish(old_child, 2, T0 + S(2), "{\"a\":2}"),
                     LESSONS_KEYSHARE_NOT_OWNER);
    assert_int_equal(lessons_keyshare_read(old_child, 0, 1, pool, &v),
                     APR_EINVAL);
    assert_int_equal(publish(new_child, 2, T0 + S(2), "{\"b\":1}"),
                     LESSONS_KEYSHARE_NEW);
    assert_string_equal(doc_of(new_child, 0), "{\"b\":1}");
}

/* ------------------------------------------- forked readers, one writer */

#define READERS     3
#define COPIES      50              /* each reader copies at least this
                                     * many generations... */
#define MAX_WRITES  2000000         /* ... unless the writer gives up */

/* What the writer and its readers share beside the block. */
typedef struct {
    volatile apr_uint64_t stop;     /* the last generation, once known */
    volatile apr_uint32_t copies[READERS];
} race_t;

/* Document g: "g:" then g's letter pattern, of a length that changes
 * with g, so that half of one beside half of another cannot pass.
 */
static apr_size_t make_doc(char *buf, apr_uint64_t g)
{
    apr_size_t len = 64 + (apr_size_t)(g * 37 % (CAP - 128)), i;
    int head = apr_snprintf(buf, 32, "%" APR_UINT64_T_FMT ":", g);

    for (i = (apr_size_t)head; i < len; i++) {
        buf[i] = (char)('a' + (g + i) % 26);
    }
    buf[len] = '\0';
    return len;
}

/* 0 when doc is whole: its generation as written, its length and every
 * byte of it.
 */
static int doc_whole(const char *doc, apr_size_t len, apr_uint64_t gen)
{
    char want[CAP + 1];
    apr_uint64_t g = apr_strtoi64(doc, NULL, 10);

    return g == 0 || g != gen || make_doc(want, g) != len
           || memcmp(want, doc, len) != 0;
}

static int reader(lessons_keyshare_t *ks, race_t *race, int me,
                  apr_pool_t *p)
{
    apr_uint64_t last = 0, g, stop;
    lessons_keyshare_view_t v;

    if (apr_global_mutex_child_init(&lock, apr_global_mutex_lockfile(lock),
                                    p) != APR_SUCCESS) {
        return 2;
    }
    for (;;) {
        stop = __atomic_load_n(&race->stop, __ATOMIC_ACQUIRE);
        g = lessons_keyshare_generation(ks, 0);
        if (g < last) {
            return 3;               /* generations never go back */
        }
        if (g != last) {
            if (lessons_keyshare_read(ks, 0, 1, p, &v) != APR_SUCCESS) {
                return 4;
            }
            if (v.generation < g || doc_whole(v.doc, v.len, v.generation)) {
                return 5;
            }
            last = v.generation;
            __atomic_add_fetch(&race->copies[me], 1, __ATOMIC_RELEASE);
            apr_pool_clear(p);
        }
        if (stop && last >= stop) {
            return 0;
        }
    }
}

/* Readers in other processes copy while one writer swaps documents of
 * changing length under them, until each has copied COPIES
 * generations: no copy is ever half of one and half of another.
 */
static void test_forked_readers_see_whole_documents(void **state)
{
    apr_shm_t *shm, *raceshm;
    lessons_keyshare_t *ks;
    race_t *race;
    apr_size_t size = lessons_keyshare_size(1, CAP);
    pid_t pids[READERS];
    char buf[CAP + 1];
    apr_time_t when;
    apr_uint64_t g;
    int i, status, bad = 0, enough = 0;

    (void)state;
    assert_int_equal(apr_shm_create(&shm, size, NULL, pool), APR_SUCCESS);
    assert_int_equal(apr_shm_create(&raceshm, sizeof(*race), NULL, pool),
                     APR_SUCCESS);
    race = apr_shm_baseaddr_get(raceshm);
    memset(race, 0, sizeof(*race));
    ks = lessons_keyshare_attach(apr_shm_baseaddr_get(shm), size, 1, CAP, 1,
                                 lock, pool);
    assert_non_null(ks);
    assert_int_equal(lessons_keyshare_bind(ks, 0, ID_A), 0);
    for (i = 0; i < READERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            apr_pool_t *p;

            apr_pool_create(&p, NULL);
            _exit(reader(ks, race, i, p));
        }
    }
    for (g = 1; g <= MAX_WRITES && !enough; g++) {
        apr_size_t len = make_doc(buf, g);

        assert_int_equal(lessons_keyshare_claim(ks, 0, 1, T0 + S(g * 4000),
                                                0, S(60), S(15), &when),
                         LESSONS_KEYSHARE_CLAIMED);
        assert_int_equal(lessons_keyshare_publish(ks, 0, 1,
                                                  T0 + S(g * 4000), buf,
                                                  len, S(3600), S(60)),
                         LESSONS_KEYSHARE_NEW);
        for (enough = 1, i = 0; i < READERS; i++) {
            enough &= __atomic_load_n(&race->copies[i], __ATOMIC_ACQUIRE)
                      >= COPIES;
        }
    }
    __atomic_store_n(&race->stop, g - 1, __ATOMIC_RELEASE);
    for (i = 0; i < READERS; i++) {
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_error("reader %d: status %d\n", i, status);
            bad++;
        }
    }
    print_message("%" APR_UINT64_T_FMT " documents written, readers copied "
                  "%u, %u and %u\n", g - 1, race->copies[0],
                  race->copies[1], race->copies[2]);
    assert_int_equal(bad, 0);
    assert_true(enough);
    apr_shm_destroy(raceshm);
    apr_shm_destroy(shm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim_and_publish),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_asked_allowance),
        cmocka_unit_test(test_lease_expires),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_restart_fetches_kept_at_once),
        cmocka_unit_test(test_older_generation_keeps_out),
        cmocka_unit_test(test_forked_readers_see_whole_documents),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
