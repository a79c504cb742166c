/* Licensed under the Apache License, Version 2.0.
 *
 * test_replay.c: lessons_replay -- a proof is taken once within its
 * time and again after it; a full run refuses rather than forgets; a
 * restart keeps the table; and processes racing with one proof on
 * shared memory under a global mutex take it exactly once.
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

#include "lessons_replay.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define T0  ((apr_time_t)1700000000 * APR_USEC_PER_SEC)
#define S(n) apr_time_from_sec(n)

static lessons_replay_t *table(int slots)
{
    apr_size_t size = lessons_replay_size(slots);

    return lessons_replay_attach(apr_palloc(pool, size), size, slots, 1);
}

static void test_keys(void **state)
{
    unsigned char a[LESSONS_REPLAY_KEY_LEN], b[LESSONS_REPLAY_KEY_LEN];

    (void)state;
    assert_int_equal(lessons_replay_key("jkt", "jti-1", a), 0);
    assert_int_equal(lessons_replay_key("jkt", "jti-1", b), 0);
    assert_memory_equal(a, b, sizeof(a));
    assert_int_equal(lessons_replay_key("jkt", "jti-2", b), 0);
    assert_memory_not_equal(a, b, sizeof(a));
    /* The same jti from another key is another proof. */
    assert_int_equal(lessons_replay_key("other", "jti-1", b), 0);
    assert_memory_not_equal(a, b, sizeof(a));
    assert_int_equal(lessons_replay_key("ab", "c", a), 0);
    assert_int_equal(lessons_replay_key("a", "bc", b), 0);
    assert_memory_not_equal(a, b, sizeof(a));
    assert_int_equal(lessons_replay_key(NULL, "x", a), -1);
}

static void test_once_within_its_time(void **state)
{
    lessons_replay_t *t = table(1024);
    unsigned char k[LESSONS_REPLAY_KEY_LEN];

    (void)state;
    assert_int_equal(lessons_replay_key("jkt", "one", k), 0);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(120), T0),
                     LESSONS_REPLAY_NEW);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(121), T0 + S(1)),
                     LESSONS_REPLAY_SEEN);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(239), T0 + S(119)),
                     LESSONS_REPLAY_SEEN);
    /* Its time is over: its slot is free, the key new again (the iat
     * window refuses such a proof before it gets here).
     */
    assert_int_equal(lessons_replay_check(t, k, T0 + S(240), T0 + S(120)),
                     LESSONS_REPLAY_NEW);
    assert_int_equal(lessons_replay_check(NULL, k, T0, T0),
                     LESSONS_REPLAY_FULL);
}

/* Keys whose run starts at one slot: the first four bytes pick it. */
static void key_at(unsigned char k[LESSONS_REPLAY_KEY_LEN], apr_uint32_t at,
                   int n)
{
    memset(k, 0, LESSONS_REPLAY_KEY_LEN);
    memcpy(k, &at, sizeof(at));
    memcpy(k + sizeof(at), &n, sizeof(n));
}

static void test_full_run_refuses(void **state)
{
    lessons_replay_t *t = table(256);
    unsigned char k[LESSONS_REPLAY_KEY_LEN];
    int i;

    (void)state;
    for (i = 0; i < LESSONS_REPLAY_PROBES; i++) {
        key_at(k, 7, i);
        assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                         LESSONS_REPLAY_NEW);
    }
    key_at(k, 7, LESSONS_REPLAY_PROBES);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                     LESSONS_REPLAY_FULL);
    /* Every key of the run is still known as seen. */
    for (i = 0; i < LESSONS_REPLAY_PROBES; i++) {
        key_at(k, 7, i);
        assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0 + S(1)),
                         LESSONS_REPLAY_SEEN);
    }
    /* Once their time is over there is room again. */
    key_at(k, 7, LESSONS_REPLAY_PROBES);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(200), T0 + S(60)),
                     LESSONS_REPLAY_NEW);
    /* A run that wraps round the end of the table. */
    key_at(k, 255, 0);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                     LESSONS_REPLAY_NEW);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                     LESSONS_REPLAY_SEEN);
}

static void test_attach(void **state)
{
    apr_size_t size = lessons_replay_size(64);
    void *mem = apr_palloc(pool, size);
    lessons_replay_t *t;
    unsigned char k[LESSONS_REPLAY_KEY_LEN];

    (void)state;
    assert_int_equal(lessons_replay_size(LESSONS_REPLAY_PROBES - 1), 0);
    assert_null(lessons_replay_attach(mem, size - 1, 64, 1));
    assert_null(lessons_replay_attach(NULL, size, 64, 1));
    t = lessons_replay_attach(mem, size, 64, 1);
    assert_int_equal(lessons_replay_key("jkt", "kept", k), 0);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                     LESSONS_REPLAY_NEW);
    /* A restart keeps what was taken. */
    t = lessons_replay_attach(mem, size, 64, 0);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                     LESSONS_REPLAY_SEEN);
    t = lessons_replay_attach(mem, size, 64, 1);
    assert_int_equal(lessons_replay_check(t, k, T0 + S(60), T0),
                     LESSONS_REPLAY_NEW);
}

/* The module's way: the table in anonymous shared memory and a global
 * mutex, both made before the fork; every process tries the same proofs
 * at once, and each proof is taken by exactly one of them.
 */
#define FORKS   6
#define PROOFS  20000

static void test_processes_take_a_proof_once(void **state)
{
    apr_shm_t *shm = NULL;
    apr_global_mutex_t *lock = NULL;
    lessons_replay_t *t;
    const char *lockfile = apr_psprintf(pool, "/tmp/test_replay.%ld.lock",
                                        (long)getpid());
    int i, status, taken = 0, pipes[FORKS][2], go[2];
    pid_t pids[FORKS];

    (void)state;
    assert_int_equal(apr_shm_create(&shm, lessons_replay_size(65536), NULL,
                                    pool), APR_SUCCESS);
    assert_int_equal(apr_global_mutex_create(&lock, lockfile,
                                             APR_LOCK_DEFAULT, pool),
                     APR_SUCCESS);
    t = lessons_replay_attach(apr_shm_baseaddr_get(shm),
                              apr_shm_size_get(shm), 65536, 1);
    assert_non_null(t);
    assert_int_equal(pipe(go), 0);
    for (i = 0; i < FORKS; i++) {
        assert_int_equal(pipe(pipes[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            unsigned char k[LESSONS_REPLAY_KEY_LEN];
            char c;
            int n, mine = 0;

            apr_global_mutex_child_init(&lock, lockfile, pool);
            /* All start together, when the parent closes the pipe. */
            close(go[1]);
            if (read(go[0], &c, 1) != 0) {
                _exit(1);
            }
            for (n = 0; n < PROOFS; n++) {
                lessons_replay_key("jkt", apr_itoa(pool, n), k);
                apr_global_mutex_lock(lock);
                mine += lessons_replay_check(t, k, T0 + S(60), T0)
                        == LESSONS_REPLAY_NEW;
                apr_global_mutex_unlock(lock);
            }
            if (write(pipes[i][1], &mine, sizeof(mine)) != sizeof(mine)) {
                _exit(1);
            }
            _exit(0);
        }
        close(pipes[i][1]);
    }
    close(go[0]);
    close(go[1]);
    for (i = 0; i < FORKS; i++) {
        int mine = 0;

        assert_int_equal(read(pipes[i][0], &mine, sizeof(mine)),
                         sizeof(mine));
        close(pipes[i][0]);
        taken += mine;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(taken, PROOFS);
    apr_global_mutex_destroy(lock);
    apr_shm_destroy(shm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_once_within_its_time),
        cmocka_unit_test(test_full_run_refuses),
        cmocka_unit_test(test_attach),
        cmocka_unit_test(test_processes_take_a_proof_once),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
