/* Licensed under the Apache License, Version 2.0.
 *
 * test_introshare.c: lessons_introshare -- introspection answers shared
 * by a server's processes: store and lookup, expiry (the answer's own
 * and a lowered bound), eviction (expired first, then the oldest),
 * answers over the cap, keys of one set never serving each other, a
 * restart that keeps the table, and another process's store seen by a
 * forked reader; "active": false answers never taking an active one's
 * place, and the questions' budget held in the block, one for every
 * process (issue 55, item 4).  Times are given, not read.
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

#include "auth/lessons_introshare.h"

#include "unit_pool.h"

#define CAP     64
#define T0      1000000
#define AGE     3600

static apr_global_mutex_t *lock;

/* 10 questions a second, 4 of them one client's. */
static const lessons_introshare_budget_t budget = { 10, 4, 42, 0 };

static int group_setup(void **state)
{
    (void)state;
    if (unit_pool_open() != 0) {
        return -1;
    }
    return apr_global_mutex_create(&lock, NULL, APR_LOCK_DEFAULT, pool)
           == APR_SUCCESS ? 0 : -1;
}

/* A fresh table of n entries in the pool's memory. */
static lessons_introshare_t *fresh(apr_uint32_t n, void **base)
{
    apr_size_t size = lessons_introshare_size(n, CAP);
    lessons_introshare_t *t;

    assert_true(size > 0);
    *base = apr_palloc(pool, size);
    t = lessons_introshare_attach(*base, size, n, CAP, &budget, 1, lock,
                                  pool);
    assert_non_null(t);
    return t;
}

/* Key number i, in the set its first 8 bytes choose: with one set (at
 * most LESSONS_INTROSHARE_WAYS entries) every key meets every other.
 * The last byte tells keys apart that share all the rest.
 */
static void key_of(unsigned char key[LESSONS_INTROSHARE_KEY_LEN],
                   unsigned int i)
{
    memset(key, 0x5a, LESSONS_INTROSHARE_KEY_LEN);
    key[LESSONS_INTROSHARE_KEY_LEN - 1] = (unsigned char)i;
    key[LESSONS_INTROSHARE_KEY_LEN - 2] = (unsigned char)(i >> 8);
}

/* Key number i, spread over the sets: its first byte chooses one. */
static void key_spread(unsigned char key[LESSONS_INTROSHARE_KEY_LEN],
                       unsigned int i)
{
    key_of(key, i);
    key[0] = (unsigned char)i;
}

static lessons_introshare_put_e put(lessons_introshare_t *t, unsigned int i,
                                    apr_int64_t now, apr_int64_t until,
                                    const char *answer)
{
    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];

    key_of(key, i);
    return lessons_introshare_put(t, key, now, until, answer,
                                  strlen(answer), 0);
}

/* The answer of key i at now, or NULL. */
static const char *get(lessons_introshare_t *t, unsigned int i,
                       apr_int64_t now)
{
    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];
    const char *answer;
    apr_size_t len;
    apr_int64_t until, stored;
    int rc;

    key_of(key, i);
    rc = lessons_introshare_get(t, key, now, AGE, pool, &answer, &len,
                                &until, &stored);
    assert_true(rc == 0 || rc == 1);
    if (!rc) {
        assert_null(answer);
        return NULL;
    }
    assert_int_equal(len, strlen(answer));
    assert_true(until > now);
    return answer;
}

static void test_shape(void **state)
{
    (void)state;
    assert_int_equal(lessons_introshare_size(0, CAP), 0);
    assert_int_equal(lessons_introshare_size(8, 0), 0);
    assert_int_equal(lessons_introshare_size(LESSONS_INTROSHARE_MAX + 1,
                                             CAP), 0);
    /* Rounded up to whole sets. */
    assert_int_equal(lessons_introshare_size(1, CAP),
                     lessons_introshare_size(LESSONS_INTROSHARE_WAYS, CAP));
    assert_true(lessons_introshare_size(LESSONS_INTROSHARE_WAYS + 1, CAP)
                > lessons_introshare_size(LESSONS_INTROSHARE_WAYS, CAP));
    assert_null(lessons_introshare_attach(apr_palloc(pool, 64), 64, 8, CAP,
                                          &budget, 1, lock, pool));
}

static void test_store_and_lookup(void **state)
{
    lessons_introshare_stats_t st;
    void *base;
    lessons_introshare_t *t = fresh(64, &base);
    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];
    const char *answer;
    apr_size_t len;
    apr_int64_t until, stored;

    (void)state;
    assert_null(get(t, 1, T0));
    assert_int_equal(put(t, 1, T0, T0 + 60, "{\"active\":true}"),
                     LESSONS_INTROSHARE_STORED);
    key_of(key, 1);
    assert_int_equal(lessons_introshare_get(t, key, T0 + 1, AGE, pool,
                                            &answer, &len,
                                            &until, &stored), 1);
    assert_string_equal(answer, "{\"active\":true}");
    assert_int_equal(len, 15);
    assert_int_equal(until, T0 + 60);
    assert_int_equal(stored, T0);
    /* A newer answer of the same key takes its entry. */
    assert_int_equal(put(t, 1, T0 + 2, T0 + 10, "{\"active\":false}"),
                     LESSONS_INTROSHARE_STORED);
    assert_string_equal(get(t, 1, T0 + 3), "{\"active\":false}");
    assert_int_equal(lessons_introshare_stats(t, &st), APR_SUCCESS);
    assert_int_equal(st.entries, 64);
    assert_int_equal(st.cap, CAP);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.stored, 2);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 1);
    /* No answer that is over before it is stored. */
    assert_int_equal(put(t, 2, T0, T0, "{}"), LESSONS_INTROSHARE_NOT_KEPT);
    assert_null(get(t, 2, T0));
}

static void test_expiry(void **state)
{
    lessons_introshare_stats_t st;
    void *base;
    lessons_introshare_t *t = fresh(64, &base);
    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];
    const char *answer;
    apr_size_t len;
    apr_int64_t until, stored;

    (void)state;
    assert_int_equal(put(t, 1, T0, T0 + 10, "{\"active\":false}"),
                     LESSONS_INTROSHARE_STORED);
    assert_non_null(get(t, 1, T0 + 9));
    assert_null(get(t, 1, T0 + 10));            /* served while now < */
    assert_int_equal(lessons_introshare_stats(t, &st), APR_SUCCESS);
    assert_int_equal(st.held, 0);               /* emptied as found */
    assert_null(get(t, 1, T0 + 9));             /* and gone for good */

    /* A lower bound than the one it was stored under (another
     * section's, or a reload's).
     */
    assert_int_equal(put(t, 2, T0, T0 + 3600, "{\"active\":true}"),
                     LESSONS_INTROSHARE_STORED);
    key_of(key, 2);
    assert_int_equal(lessons_introshare_get(t, key, T0 + 59, 60, pool,
                                            &answer, &len,
                                            &until, &stored), 1);
    assert_int_equal(stored, T0);
    assert_int_equal(lessons_introshare_get(t, key, T0 + 60, 60, pool,
                                            &answer, &len,
                                            &until, &stored), 0);
    assert_null(answer);
    /* ... still there for an asker of a longer bound. */
    assert_string_equal(get(t, 2, T0 + 61), "{\"active\":true}");
}

/* A full set takes an expired entry before any live one, and only
 * then drops the oldest answer stored.
 */
static void test_eviction(void **state)
{
    lessons_introshare_stats_t st;
    void *base;
    lessons_introshare_t *t = fresh(LESSONS_INTROSHARE_WAYS, &base);
    unsigned int i;

    (void)state;
    for (i = 0; i < LESSONS_INTROSHARE_WAYS; i++) {
        /* Key 3 expires first; key 0 is the oldest. */
        assert_int_equal(put(t, i, T0 + i, i == 3 ? T0 + 20 : T0 + 100,
                             apr_psprintf(pool, "answer %u", i)),
                         LESSONS_INTROSHARE_STORED);
    }
    assert_int_equal(put(t, 100, T0 + 30, T0 + 100, "answer 100"),
                     LESSONS_INTROSHARE_STORED);
    for (i = 0; i < LESSONS_INTROSHARE_WAYS; i++) {
        if (i == 3) {
            assert_null(get(t, i, T0 + 31));
        }
        else {
            assert_string_equal(get(t, i, T0 + 31),
                                apr_psprintf(pool, "answer %u", i));
        }
    }
    assert_string_equal(get(t, 100, T0 + 31), "answer 100");
    /* Full of live answers: the oldest stored goes (key 0), then the
     * next oldest (key 1), whatever their lifetimes.
     */
    assert_int_equal(put(t, 101, T0 + 32, T0 + 100, "answer 101"),
                     LESSONS_INTROSHARE_EVICTED);
    assert_null(get(t, 0, T0 + 33));
    assert_string_equal(get(t, 1, T0 + 33), "answer 1");
    assert_int_equal(put(t, 102, T0 + 34, T0 + 100, "answer 102"),
                     LESSONS_INTROSHARE_EVICTED);
    assert_null(get(t, 1, T0 + 35));
    assert_string_equal(get(t, 101, T0 + 35), "answer 101");
    assert_string_equal(get(t, 102, T0 + 35), "answer 102");
    assert_int_equal(lessons_introshare_stats(t, &st), APR_SUCCESS);
    assert_int_equal(st.evicted, 2);
    assert_int_equal(st.held, LESSONS_INTROSHARE_WAYS);
}

static void test_too_big(void **state)
{
    lessons_introshare_stats_t st;
    void *base;
    lessons_introshare_t *t = fresh(64, &base);
    char big[CAP + 2];

    (void)state;
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(put(t, 1, T0, T0 + 60, "{\"active\":true}"),
                     LESSONS_INTROSHARE_STORED);
    /* A newer answer of key 1 that does not fit: not shared, and the
     * older one no longer served in its place.
     */
    assert_int_equal(put(t, 1, T0 + 1, T0 + 60, big),
                     LESSONS_INTROSHARE_TOO_BIG);
    assert_null(get(t, 1, T0 + 2));
    /* Exactly the cap fits. */
    big[CAP] = '\0';
    assert_int_equal(put(t, 2, T0, T0 + 60, big), LESSONS_INTROSHARE_STORED);
    assert_string_equal(get(t, 2, T0 + 1), big);
    assert_int_equal(lessons_introshare_stats(t, &st), APR_SUCCESS);
    assert_int_equal(st.too_big, 1);
    assert_int_equal(st.held, 1);
}

/* Keys that fall in one set and differ in one byte, or in their first
 * byte only (the set's choice), never serve each other's answers.
 */
static void test_keys_never_mixed(void **state)
{
    void *base;
    lessons_introshare_t *t = fresh(LESSONS_INTROSHARE_WAYS * 4, &base);
    unsigned char a[LESSONS_INTROSHARE_KEY_LEN], b[LESSONS_INTROSHARE_KEY_LEN];
    const char *answer;
    apr_size_t len;
    apr_int64_t until, stored;
    unsigned int i;

    (void)state;
    for (i = 0; i < LESSONS_INTROSHARE_WAYS; i++) {
        assert_int_equal(put(t, i, T0, T0 + 60,
                             apr_psprintf(pool, "answer of %u", i)),
                         LESSONS_INTROSHARE_STORED);
    }
    for (i = 0; i < LESSONS_INTROSHARE_WAYS; i++) {
        assert_string_equal(get(t, i, T0 + 1),
                            apr_psprintf(pool, "answer of %u", i));
    }
    /* Same set, never stored. */
    assert_null(get(t, 256, T0 + 1));
    assert_null(get(t, LESSONS_INTROSHARE_WAYS, T0 + 1));
    /* Every byte counts, not only the set's 8. */
    key_of(a, 1);
    memcpy(b, a, sizeof(b));
    b[LESSONS_INTROSHARE_KEY_LEN / 2] ^= 1;
    assert_int_equal(lessons_introshare_get(t, b, T0 + 1, AGE, pool,
                                            &answer, &len,
                                            &until, &stored), 0);
    b[LESSONS_INTROSHARE_KEY_LEN / 2] ^= 1;
    b[0] ^= 0x80;
    assert_int_equal(lessons_introshare_get(t, b, T0 + 1, AGE, pool,
                                            &answer, &len,
                                            &until, &stored), 0);
    assert_int_equal(lessons_introshare_get(t, a, T0 + 1, AGE, pool,
                                            &answer, &len,
                                            &until, &stored), 1);
    assert_string_equal(answer, "answer of 1");
}

/* A restart with the same shape keeps the answers; another shape, or a
 * fresh block, starts empty.
 */
static void test_restart(void **state)
{
    apr_size_t size = lessons_introshare_size(64, CAP);
    void *base;
    lessons_introshare_t *t = fresh(64, &base);

    (void)state;
    assert_int_equal(put(t, 1, T0, T0 + 60, "kept"),
                     LESSONS_INTROSHARE_STORED);
    t = lessons_introshare_attach(base, size, 64, CAP, &budget, 0, lock,
                                  pool);
    assert_non_null(t);
    assert_string_equal(get(t, 1, T0 + 1), "kept");
    t = lessons_introshare_attach(base, size, 64, CAP - 8, &budget, 0, lock,
                                  pool);
    assert_non_null(t);
    assert_null(get(t, 1, T0 + 1));
    assert_int_equal(put(t, 1, T0, T0 + 60, "again"),
                     LESSONS_INTROSHARE_STORED);
    t = lessons_introshare_attach(base, size, 64, CAP - 8, &budget, 1, lock,
                                  pool);
    assert_null(get(t, 1, T0 + 1));
}

/* What one process stores, a process forked before it is served (the
 * block made before the fork, as httpd's children have it), and what
 * that one stores the parent serves.
 */
static void test_another_process(void **state)
{
    apr_size_t size = lessons_introshare_size(256, CAP);
    apr_shm_t *shm;
    lessons_introshare_t *t;
    unsigned int i;
    pid_t pid;
    int status;

    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];
    const char *answer, *s;
    apr_size_t len;
    apr_int64_t until, stored;

    (void)state;
    assert_int_equal(apr_shm_create(&shm, size, NULL, pool), APR_SUCCESS);
    t = lessons_introshare_attach(apr_shm_baseaddr_get(shm), size, 256, CAP,
                                  &budget, 1, lock, pool);
    assert_non_null(t);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (i = 0; i < 100; i++) {
            key_spread(key, i);
            s = apr_psprintf(pool, "child %u", i);
            if (lessons_introshare_put(t, key, T0, T0 + 60, s, strlen(s), 0)
                != LESSONS_INTROSHARE_STORED) {
                _exit(1);
            }
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (i = 0; i < 100; i++) {
        key_spread(key, i);
        assert_int_equal(lessons_introshare_get(t, key, T0 + 1, AGE, pool,
                                                &answer, &len,
                                                &until, &stored), 1);
        assert_string_equal(answer, apr_psprintf(pool, "child %u", i));
    }
    apr_shm_destroy(shm);
}

/* Store an "active": false answer of key i at now, for 10 s. */
static lessons_introshare_put_e put_dead(lessons_introshare_t *t,
                                         unsigned int i, apr_int64_t now)
{
    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];
    static const char dead[] = "{\"active\":false}";

    key_of(key, i);
    return lessons_introshare_put(t, key, now, now + 10, dead,
                                  sizeof(dead) - 1, 1);
}

/* A flood of "active": false answers (random strings a client sent)
 * never takes the place of an active answer: with the set full of
 * active answers an inactive one is not kept (CROWDED); among inactive
 * ones it takes the oldest inactive; an active answer takes an inactive
 * one's place before any active one's.
 */
static void test_inactive_never_evicts_active(void **state)
{
    lessons_introshare_stats_t st;
    void *base;
    lessons_introshare_t *t = fresh(LESSONS_INTROSHARE_WAYS, &base);
    unsigned int i;

    (void)state;
    /* Two held tokens, then the flood fills the rest and goes on. */
    assert_int_equal(put(t, 0, T0, T0 + 60, "good 0"),
                     LESSONS_INTROSHARE_STORED);
    assert_int_equal(put(t, 1, T0, T0 + 60, "good 1"),
                     LESSONS_INTROSHARE_STORED);
    for (i = 1000; i < 1200; i++) {
        assert_int_equal(put_dead(t, i, T0 + 1),
                         i < 1000 + LESSONS_INTROSHARE_WAYS - 2
                         ? LESSONS_INTROSHARE_STORED
                         : LESSONS_INTROSHARE_EVICTED);
        assert_string_equal(get(t, 0, T0 + 1), "good 0");
        assert_string_equal(get(t, 1, T0 + 1), "good 1");
    }
    /* The newest inactive answers are there: they took the oldest. */
    assert_non_null(get(t, 1199, T0 + 1));
    assert_null(get(t, 1000, T0 + 1));
    /* A new active answer takes an inactive one's place. */
    for (i = 2; i < LESSONS_INTROSHARE_WAYS; i++) {
        assert_int_equal(put(t, i, T0 + 2, T0 + 60,
                             apr_psprintf(pool, "good %u", i)),
                         LESSONS_INTROSHARE_EVICTED);
    }
    /* Full of active answers: an inactive one is not kept. */
    assert_int_equal(put_dead(t, 2000, T0 + 3), LESSONS_INTROSHARE_CROWDED);
    assert_null(get(t, 2000, T0 + 3));
    for (i = 0; i < LESSONS_INTROSHARE_WAYS; i++) {
        assert_string_equal(get(t, i, T0 + 3),
                            apr_psprintf(pool, "good %u", i));
    }
    assert_int_equal(lessons_introshare_stats(t, &st), APR_SUCCESS);
    assert_int_equal(st.crowded, 1);
    /* An active answer still makes room among active ones. */
    assert_int_equal(put(t, 50, T0 + 4, T0 + 60, "good 50"),
                     LESSONS_INTROSHARE_EVICTED);
    assert_null(get(t, 0, T0 + 4));
}

/* The budget is in the block: what a forked process takes, the parent
 * cannot take again; a restart with the same rates keeps it, new rates
 * lay it out anew.
 */
static void test_budget_shared(void **state)
{
    apr_size_t size = lessons_introshare_size(64, CAP);
    unsigned char a[LESSONS_INTRORATE_CLIENT_LEN] = { 1 };
    unsigned char b[LESSONS_INTRORATE_CLIENT_LEN] = { 2 };
    lessons_introshare_budget_t other = budget;
    lessons_introshare_stats_t st;
    apr_shm_t *shm;
    lessons_introshare_t *t;
    pid_t pid;
    int status, i, retry = 0;

    (void)state;
    assert_int_equal(apr_shm_create(&shm, size, NULL, pool), APR_SUCCESS);
    t = lessons_introshare_attach(apr_shm_baseaddr_get(shm), size, 64, CAP,
                                  &budget, 1, lock, pool);
    assert_non_null(t);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Client a's share (4), and 3 of the server's 10 for b. */
        for (i = 0; i < 4; i++) {
            if (lessons_introshare_take(t, a, 0, NULL)
                != LESSONS_INTRORATE_ASK) {
                _exit(1);
            }
        }
        for (i = 0; i < 3; i++) {
            if (lessons_introshare_take(t, b, 0, NULL)
                != LESSONS_INTRORATE_ASK) {
                _exit(2);
            }
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(lessons_introshare_take(t, a, 0, &retry),
                     LESSONS_INTRORATE_CLIENT_OVER);
    assert_true(retry >= 1);
    assert_int_equal(lessons_introshare_take(t, b, 0, NULL),
                     LESSONS_INTRORATE_ASK);
    assert_int_equal(lessons_introshare_take(t, b, 0, NULL),
                     LESSONS_INTRORATE_CLIENT_OVER);
    assert_int_equal(lessons_introshare_stats(t, &st), APR_SUCCESS);
    assert_int_equal(st.budget.asked, 8);
    assert_int_equal(st.budget.client_over, 2);
    /* A restart with the same rates keeps what was used. */
    t = lessons_introshare_attach(apr_shm_baseaddr_get(shm), size, 64, CAP,
                                  &budget, 0, lock, pool);
    assert_non_null(t);
    assert_int_equal(lessons_introshare_take(t, a, 0, NULL),
                     LESSONS_INTRORATE_CLIENT_OVER);
    /* Other rates: laid out anew, full. */
    other.client_rate = 5;
    t = lessons_introshare_attach(apr_shm_baseaddr_get(shm), size, 64, CAP,
                                  &other, 0, lock, pool);
    assert_non_null(t);
    assert_int_equal(lessons_introshare_take(t, a, 0, NULL),
                     LESSONS_INTRORATE_ASK);
    /* Rates refused: no table. */
    other.client_rate = 11;
    assert_null(lessons_introshare_attach(apr_shm_baseaddr_get(shm), size,
                                          64, CAP, &other, 0, lock, pool));
    apr_shm_destroy(shm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_store_and_lookup),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_eviction),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_keys_never_mixed),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_another_process),
        cmocka_unit_test(test_inactive_never_evicts_active),
        cmocka_unit_test(test_budget_shared),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
