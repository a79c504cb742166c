/* Licensed under the Apache License, Version 2.0.
 *
 * test_metrics.c: lessons_metrics -- slots per process in one block,
 * counters that outlive their process, gauges of live processes only,
 * key sources by name, and the two text formats.  The block is made as
 * the module makes it (anonymous shared memory) and written by forked
 * processes and by threads, so the sums prove the atomics.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apr_shm.h"
#include "apr_strings.h"
#include "apr_thread_proc.h"

#include "ops/lessons_metrics.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define T0 ((apr_time_t)1700000000 * APR_USEC_PER_SEC)

/* Which pids a test calls alive: all but those in dead[]. */
static apr_uint32_t dead[4];

static int test_alive(void *baton, apr_uint32_t pid)
{
    int i;

    (void)baton;
    for (i = 0; i < 4; i++) {
        if (dead[i] == pid) {
            return 0;
        }
    }
    return 1;
}

static lessons_metrics_t *block(int slots)
{
    apr_size_t size = lessons_metrics_size(slots);
    void *mem = apr_palloc(pool, size);

    memset(dead, 0, sizeof(dead));
    return lessons_metrics_attach(mem, size, slots, 1, T0);
}

static void test_attach(void **state)
{
    apr_size_t size = lessons_metrics_size(3);
    void *mem = apr_palloc(pool, size);
    lessons_metrics_t *m;
    lessons_metrics_slot_t *s;
    lessons_metrics_sum_t sum;

    (void)state;
    assert_int_equal(lessons_metrics_size(0), 0);
    assert_null(lessons_metrics_attach(NULL, size, 3, 1, T0));
    assert_null(lessons_metrics_attach(mem, size - 1, 3, 1, T0));
    memset(mem, 0xab, size);
    m = lessons_metrics_attach(mem, size, 3, 1, T0);
    assert_non_null(m);
    lessons_metrics_read(m, NULL, NULL, &sum);
    assert_int_equal(sum.slots, 3);
    assert_int_equal(sum.processes, 0);
    assert_true(sum.started == T0);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 0);

    s = lessons_metrics_claim(m, 100, NULL, NULL);
    lessons_metrics_add(s, LESSONS_M_CACHE_HITS, 5);
    /* A restart attaches to the block as it is: nothing starts over. */
    m = lessons_metrics_attach(mem, size, 3, 0, T0 + 7);
    lessons_metrics_read(m, NULL, NULL, &sum);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 5);
    assert_true(sum.started == T0);
    /* Another layout is a new block. */
    m = lessons_metrics_attach(mem, size, 2, 0, T0 + 9);
    lessons_metrics_read(m, NULL, NULL, &sum);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 0);
    assert_int_equal(sum.slots, 2);
    assert_true(sum.started == T0 + 9);
}

static void test_claim_and_carry(void **state)
{
    lessons_metrics_t *m = block(2);
    lessons_metrics_slot_t *a, *b, *c;
    lessons_metrics_sum_t sum;

    (void)state;
    assert_null(lessons_metrics_claim(m, 0, test_alive, NULL));
    a = lessons_metrics_claim(m, 11, test_alive, NULL);
    b = lessons_metrics_claim(m, 12, test_alive, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    /* Full, every owner alive: the third process counts nothing. */
    assert_null(lessons_metrics_claim(m, 13, test_alive, NULL));
    lessons_metrics_add(NULL, LESSONS_M_CACHE_HITS, 1);

    lessons_metrics_add(a, LESSONS_M_CACHE_HITS, 3);
    lessons_metrics_set(a, LESSONS_M_CACHE_BYTES, 1000);
    lessons_metrics_add(b, LESSONS_M_CACHE_HITS, 4);
    lessons_metrics_set(b, LESSONS_M_CACHE_BYTES, 500);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.processes, 2);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 7);
    assert_int_equal(sum.v[LESSONS_M_CACHE_BYTES], 1500);

    /* 11 crashed: its counts still count, its gauges no more. */
    dead[0] = 11;
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.processes, 1);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 7);
    assert_int_equal(sum.v[LESSONS_M_CACHE_BYTES], 500);
    /* ... and its slot goes to the next process, which adds on. */
    c = lessons_metrics_claim(m, 13, test_alive, NULL);
    assert_ptr_equal(c, a);
    lessons_metrics_add(c, LESSONS_M_CACHE_HITS, 1);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 8);
    assert_int_equal(sum.v[LESSONS_M_CACHE_BYTES], 500);

    /* A clean exit gives the slot back with its counters. */
    lessons_metrics_release(b);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.processes, 1);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 8);
    assert_int_equal(sum.v[LESSONS_M_CACHE_BYTES], 0);
    assert_ptr_equal(lessons_metrics_claim(m, 14, test_alive, NULL), b);
}

static void test_ids_and_kinds(void **state)
{
    lessons_metrics_t *m = block(1);
    lessons_metrics_slot_t *s = lessons_metrics_claim(m, 1, NULL, NULL);
    lessons_metrics_sum_t sum;

    (void)state;
    assert_int_equal(lessons_metrics_request_id(LESSONS_OP_LIST, 200),
                     LESSONS_M_REQUESTS);
    assert_int_equal(lessons_metrics_request_id(LESSONS_OP_GET, 304),
                     LESSONS_M_REQUESTS + LESSONS_CLASS_COUNT + 1);
    assert_int_equal(lessons_metrics_request_id(LESSONS_OP_CREATE, 201),
                     LESSONS_M_REQUESTS + 5 * LESSONS_CLASS_COUNT);
    assert_int_equal(lessons_metrics_request_id(LESSONS_OP_DELETE, 412),
                     LESSONS_M_REQUESTS + 7 * LESSONS_CLASS_COUNT + 2);
    assert_int_equal(lessons_metrics_request_id(LESSONS_OP_OTHER, 503),
                     LESSONS_M_REQUESTS + 8 * LESSONS_CLASS_COUNT + 3);
    assert_int_equal(lessons_metrics_request_id(LESSONS_OP_COUNT, 200),
                     lessons_metrics_request_id(LESSONS_OP_OTHER, 200));
    /* A gauge is never added to, a counter never set. */
    lessons_metrics_add(s, LESSONS_M_CACHE_BYTES, 5);
    lessons_metrics_set(s, LESSONS_M_CACHE_HITS, 5);
    lessons_metrics_add(s, LESSONS_M_COUNT, 5);
    lessons_metrics_read(m, NULL, NULL, &sum);
    assert_int_equal(sum.v[LESSONS_M_CACHE_BYTES], 0);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 0);
    assert_string_equal(lessons_metrics_op_name(LESSONS_OP_ADVANCED),
                        "advanced");
    assert_null(lessons_metrics_op_name(LESSONS_OP_COUNT));
    assert_string_equal(lessons_metrics_refusal_name(LESSONS_REFUSED_NO_KEYS),
                        "no_keys");
    assert_string_equal(
        lessons_metrics_fault_name(LESSONS_FAULT_OUTCOME_UNKNOWN),
        "outcome_unknown");
}

static void test_sources(void **state)
{
    lessons_metrics_t *m = block(2);
    lessons_metrics_slot_t *a = lessons_metrics_claim(m, 21, test_alive,
                                                      NULL);
    lessons_metrics_slot_t *b = lessons_metrics_claim(m, 22, test_alive,
                                                      NULL);
    char name[LESSONS_METRICS_SOURCE_LEN + 1];
    lessons_metrics_sum_t sum;
    int i, x, y;

    (void)state;
    x = lessons_metrics_source(m, "https://idp.example/a", NULL, 0);
    y = lessons_metrics_source(m, "https://idp.example/b", NULL, 0);
    assert_int_equal(x, 0);
    assert_int_equal(y, 1);
    assert_int_equal(lessons_metrics_source(m, "https://idp.example/a",
                                            NULL, 0), x);
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(lessons_metrics_source(m, name, NULL, 0), -1);
    assert_int_equal(lessons_metrics_source(m, "", NULL, 0), -1);

    lessons_metrics_source_add(a, x, LESSONS_SRC_FAILURES, 2);
    lessons_metrics_source_add(b, x, LESSONS_SRC_FAILURES, 1);
    lessons_metrics_source_add(b, x, LESSONS_SRC_REFETCHES, 4);
    lessons_metrics_source_set(a, x, LESSONS_SRC_FETCHED, T0 + 10);
    lessons_metrics_source_set(a, x, LESSONS_SRC_KEYS, 2);
    lessons_metrics_source_set(b, x, LESSONS_SRC_FETCHED, T0 + 30);
    lessons_metrics_source_set(b, x, LESSONS_SRC_KEYS, 3);
    /* a holds a set since T0 + 5; b's fetches ended without one. */
    lessons_metrics_source_set(a, x, LESSONS_SRC_INSTALLED, T0 + 5);
    lessons_metrics_source_set(b, x, LESSONS_SRC_NO_SET, 1);
    lessons_metrics_source_add(a, LESSONS_METRICS_SOURCES,
                               LESSONS_SRC_FAILURES, 9);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_string_equal(sum.src[x].name, "https://idp.example/a");
    assert_int_equal(sum.src[x].failures, 3);
    assert_int_equal(sum.src[x].refetches, 4);
    assert_true(sum.src[x].last_fetched == T0 + 30);
    assert_true(sum.src[x].oldest_in_use == T0 + 10);
    assert_int_equal(sum.src[x].keys, 3);
    assert_true(sum.src[y].last_fetched == 0);
    assert_true(sum.src[y].oldest_in_use == 0);
    assert_int_equal(sum.src[x].held, 0);
    assert_true(sum.src[x].installed == T0 + 5);
    assert_int_equal(sum.src[y].held, 0);
    assert_true(sum.src[y].installed == 0);
    assert_null(sum.src[2].name);

    /* b gets a newer set: held, since b's. */
    lessons_metrics_source_set(b, x, LESSONS_SRC_INSTALLED, T0 + 40);
    lessons_metrics_source_set(b, x, LESSONS_SRC_NO_SET, 0);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.src[x].held, 1);
    assert_true(sum.src[x].installed == T0 + 40);

    /* b exits: a's set is all that is in use; the last fetch stays. */
    lessons_metrics_release(b);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_true(sum.src[x].last_fetched == T0 + 30);
    assert_true(sum.src[x].oldest_in_use == T0 + 10);
    assert_int_equal(sum.src[x].keys, 2);
    assert_int_equal(sum.src[x].failures, 3);
    assert_int_equal(sum.src[x].held, 1);
    assert_true(sum.src[x].installed == T0 + 5);
    /* A process that ends takes its "no set" with it: b's slot, claimed
     * again, starts with none of its gauges.
     */
    lessons_metrics_source_set(a, x, LESSONS_SRC_NO_SET, 1);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.src[x].held, 0);
    lessons_metrics_source_set(a, x, LESSONS_SRC_NO_SET, 0);
    b = lessons_metrics_claim(m, 23, test_alive, NULL);
    assert_non_null(b);
    lessons_metrics_read(m, test_alive, NULL, &sum);
    assert_int_equal(sum.src[x].held, 1);
    assert_true(sum.src[x].installed == T0 + 5);

    /* Full: a name of this configuration takes the index of one that
     * is not, with nothing of the old one's figures.
     */
    for (i = 2; i < LESSONS_METRICS_SOURCES - 1; i++) {
        assert_int_equal(lessons_metrics_source(
            m, apr_psprintf(pool, "https://idp.example/%d", i), NULL, 0), i);
    }
    assert_int_equal(lessons_metrics_source(m, "https://idp.example/keep",
                                            NULL, 0),
                     LESSONS_METRICS_SOURCES - 1);
    {
        const char *now_kept[2] = { "https://idp.example/a",
                                    "https://idp.example/keep" };

        i = lessons_metrics_source(m, "https://idp.example/new", now_kept,
                                   2);
        assert_int_equal(i, y);     /* b: the first not kept */
        lessons_metrics_read(m, test_alive, NULL, &sum);
        assert_string_equal(sum.src[i].name, "https://idp.example/new");
        assert_int_equal(sum.src[i].failures, 0);
        assert_int_equal(sum.src[x].failures, 3);
    }
    {
        const char *all[LESSONS_METRICS_SOURCES];

        for (i = 0; i < LESSONS_METRICS_SOURCES; i++) {
            all[i] = sum.src[i].name;
        }
        assert_int_equal(lessons_metrics_source(m, "https://idp.example/z",
                                                all,
                                                LESSONS_METRICS_SOURCES),
                         -1);
    }
}

/* Every line of the exposition is a comment or "name{labels} value". */
static void assert_exposition(const char *text)
{
    const char *line = text;

    while (*line) {
        const char *end = strchr(line, '\n');
        char *copy, *sp;

        assert_non_null(end);
        copy = apr_pstrndup(pool, line, (apr_size_t)(end - line));
        if (copy[0] != '#') {
            sp = strrchr(copy, ' ');
            assert_non_null(sp);
            assert_true(strspn(sp + 1, "0123456789.") == strlen(sp + 1));
            assert_true(strncmp(copy, "lessons_", 8) == 0);
        }
        line = end + 1;
    }
}

static void test_prometheus(void **state)
{
    lessons_metrics_t *m = block(2);
    lessons_metrics_slot_t *s = lessons_metrics_claim(m, 5, NULL, NULL);
    const char *names[2] = { "https://idp.example/a\"b\\c", "https://gone" };
    lessons_metrics_sum_t sum;
    apr_size_t len = 0;
    const char *text;
    int x;

    (void)state;
    x = lessons_metrics_source(m, names[0], NULL, 0);
    lessons_metrics_add(s, lessons_metrics_request_id(LESSONS_OP_GET, 200),
                        41);
    lessons_metrics_add(s, lessons_metrics_request_id(LESSONS_OP_CREATE,
                                                      503), 2);
    lessons_metrics_add(s, LESSONS_M_REFUSED + LESSONS_REFUSED_EXPIRED, 6);
    lessons_metrics_add(s, LESSONS_M_DB_FAULTS + LESSONS_FAULT_FULL, 1);
    lessons_metrics_add(s, LESSONS_M_WRITES + 1, 9);
    lessons_metrics_set(s, LESSONS_M_CACHE_BYTES, 12345);
    lessons_metrics_source_set(s, x, LESSONS_SRC_FETCHED, T0 + 1500000);
    lessons_metrics_source_set(s, x, LESSONS_SRC_KEYS, 2);
    lessons_metrics_source_add(s, x, LESSONS_SRC_FAILURES, 1);
    lessons_metrics_source_set(s, x, LESSONS_SRC_INSTALLED, T0 + 1250000);
    lessons_metrics_read(m, NULL, NULL, &sum);
    text = lessons_metrics_prometheus(pool, &sum, names, 2,
                                      T0 + 61500000, &len);
    assert_int_equal(len, strlen(text));
    assert_exposition(text);
    assert_non_null(strstr(text, "# TYPE lessons_requests_total counter\n"));
    assert_non_null(strstr(text, "lessons_requests_total{operation=\"get\","
                                 "status=\"2xx\"} 41\n"));
    assert_non_null(strstr(text, "lessons_requests_total{operation=\"get\","
                                 "status=\"4xx\"} 0\n"));
    assert_non_null(strstr(text, "lessons_requests_total{operation="
                                 "\"create\",status=\"5xx\"} 2\n"));
    assert_non_null(strstr(text, "lessons_token_refusals_total{reason="
                                 "\"expired\"} 6\n"));
    assert_non_null(strstr(text, "lessons_db_faults_total{class=\"full\"} "
                                 "1\n"));
    assert_non_null(strstr(text, "lessons_writes_total{operation="
                                 "\"update\"} 9\n"));
    assert_non_null(strstr(text, "# TYPE lessons_response_cache_bytes "
                                 "gauge\nlessons_response_cache_bytes "
                                 "12345\n"));
    /* A name with " and \ is escaped; one the block lacks is left out. */
    assert_non_null(strstr(text, "lessons_keys{source=\"https://idp.example"
                                 "/a\\\"b\\\\c\"} 2\n"));
    assert_non_null(strstr(text, "lessons_keys_age_seconds{source=\"https:"
                                 "//idp.example/a\\\"b\\\\c\"} 60.000\n"));
    assert_non_null(strstr(text, "lessons_keys_last_fetch_timestamp_seconds"
                                 "{source=\"https://idp.example/a\\\"b\\\\c"
                                 "\"} 1700000001.500\n"));
    assert_non_null(strstr(text, "lessons_keys_fetch_failures_total{source"
                                 "=\"https://idp.example/a\\\"b\\\\c\"} 1\n"));
    assert_non_null(strstr(text, "# TYPE lessons_keys_set_held gauge\n"
                                 "lessons_keys_set_held{source=\"https://"
                                 "idp.example/a\\\"b\\\\c\"} 1\n"));
    assert_non_null(strstr(text, "# TYPE lessons_keys_set_installed_"
                                 "timestamp_seconds gauge\n"
                                 "lessons_keys_set_installed_timestamp_"
                                 "seconds{source=\"https://idp.example/a"
                                 "\\\"b\\\\c\"} 1700000001.250\n"));
    assert_null(strstr(text, "gone"));
    assert_non_null(strstr(text, "lessons_processes 1\n"));
    assert_non_null(strstr(text, "lessons_metrics_start_time_seconds "
                                 "1700000000.000\n"));
}

/* The read lease's gauges, as the handler appends them. */
static void test_lease_prometheus(void **state)
{
    const char *text;

    lessons_metrics_lease_t m = { 1, 0, 2345678, 7654321,
                                  10 * APR_USEC_PER_SEC, 3, 41, 7, 9,
                                  { 0 }, NULL, 0 };

    (void)state;
    text = lessons_metrics_lease_prometheus(pool, &m);
    assert_exposition(text);
    assert_non_null(strstr(text, "# TYPE lessons_db_lease_unchecked_writes_"
                                 "total counter\n"
                                 "lessons_db_lease_unchecked_writes_total"
                                 "{how=\"alone\"} 41\n"
                                 "lessons_db_lease_unchecked_writes_total"
                                 "{how=\"told\"} 7\n"
                                 "lessons_db_lease_unchecked_writes_total"
                                 "{how=\"held\"} 9\n"));
    assert_non_null(strstr(text, "# TYPE lessons_db_lease_other_servers "
                                 "gauge\nlessons_db_lease_other_servers "
                                 "3\n"));
    assert_non_null(strstr(text, "# TYPE lessons_db_lease_valid gauge\n"
                                 "lessons_db_lease_valid 1\n"));
    assert_non_null(strstr(text, "lessons_db_lease_listening 0\n"));
    assert_non_null(strstr(text, "lessons_db_lease_remaining_seconds "
                                 "2.346\n"));
    assert_non_null(strstr(text, "lessons_db_lease_length_seconds "
                                 "10.000\n"));
    assert_non_null(strstr(text, "# TYPE lessons_db_lease_run_seconds "
                                 "gauge\nlessons_db_lease_run_seconds "
                                 "7.654\n"));
    /* Without the lease's bounds: no histogram. */
    assert_null(strstr(text, "lessons_db_lease_write_wait_seconds"));
    /* No list read yet: no sample to mistake for none. */
    m = (lessons_metrics_lease_t){ 0, 1, 0, 0, 10 * APR_USEC_PER_SEC, -1,
                                   0, 0, 0, { 0 }, NULL, 0 };
    text = lessons_metrics_lease_prometheus(pool, &m);
    assert_exposition(text);
    assert_null(strstr(text, "lessons_db_lease_other_servers"));
}

/* The writes' times on the lease as a Prometheus histogram: the counts
 * summed up bound by bound, +Inf last and equal to the count.
 */
static void test_lease_waits_prometheus(void **state)
{
    static const apr_interval_time_t bounds[LESSONS_METRICS_LEASE_WAITS
                                            - 1] = {
        100, 1000, 5000, 25000, 100000, 1000000
    };
    lessons_metrics_lease_t m = { 1, 1, 0, 0, APR_USEC_PER_SEC, 2, 0, 0, 0,
                                  { 3, 1, 1, 0, 0, 0, 1 }, bounds,
                                  2005241 };
    const char *text;

    (void)state;
    text = lessons_metrics_lease_prometheus(pool, &m);
    assert_exposition(text);
    assert_non_null(strstr(text,
        "# TYPE lessons_db_lease_write_wait_seconds histogram\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"0.0001\"} 3\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"0.001\"} 4\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"0.005\"} 5\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"0.025\"} 5\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"0.1\"} 5\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"1\"} 5\n"
        "lessons_db_lease_write_wait_seconds_bucket{le=\"+Inf\"} 6\n"
        "lessons_db_lease_write_wait_seconds_sum 2.005241\n"
        "lessons_db_lease_write_wait_seconds_count 6\n"));
}

static void test_status_auto(void **state)
{
    lessons_metrics_t *m = block(1);
    lessons_metrics_slot_t *s = lessons_metrics_claim(m, 5, NULL, NULL);
    lessons_metrics_sum_t sum;
    const char *text;

    (void)state;
    lessons_metrics_add(s, lessons_metrics_request_id(LESSONS_OP_GET, 200),
                        3);
    lessons_metrics_add(s, lessons_metrics_request_id(LESSONS_OP_LIST, 401),
                        2);
    lessons_metrics_add(s, LESSONS_M_REFUSED + LESSONS_REFUSED_NO_TOKEN, 2);
    lessons_metrics_add(s, LESSONS_M_WRITES, 1);
    lessons_metrics_add(s, LESSONS_M_WRITES + 2, 1);
    lessons_metrics_read(m, NULL, NULL, &sum);
    text = lessons_metrics_status_auto(pool, &sum);
    assert_non_null(strstr(text, "LessonsRequests: 5\n"));
    assert_non_null(strstr(text, "LessonsRequests2xx: 3\n"));
    assert_non_null(strstr(text, "LessonsRequests4xx: 2\n"));
    assert_non_null(strstr(text, "LessonsTokenRefusals: 2\n"));
    assert_non_null(strstr(text, "LessonsWrites: 2\n"));
    assert_non_null(strstr(text, "LessonsProcesses: 1\n"));
}

/* The module's way: anonymous shared memory, made before the fork. */
#define FORKS   4
#define ADDS    20000

static void test_processes_share_one_block(void **state)
{
    apr_shm_t *shm = NULL;
    lessons_metrics_t *m;
    lessons_metrics_sum_t sum;
    int i, status;
    pid_t pids[FORKS];

    (void)state;
    assert_int_equal(apr_shm_create(&shm, lessons_metrics_size(FORKS), NULL,
                                    pool), APR_SUCCESS);
    m = lessons_metrics_attach(apr_shm_baseaddr_get(shm),
                               apr_shm_size_get(shm), FORKS, 1, T0);
    assert_non_null(m);
    for (i = 0; i < FORKS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            lessons_metrics_slot_t *s =
                lessons_metrics_claim(m, (apr_uint32_t)getpid(), NULL, NULL);
            int n;

            for (n = 0; s && n < ADDS; n++) {
                lessons_metrics_add(s, LESSONS_M_TOKEN_HITS, 1);
            }
            lessons_metrics_release(s);
            _exit(s ? 0 : 1);
        }
    }
    for (i = 0; i < FORKS; i++) {
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    lessons_metrics_read(m, NULL, NULL, &sum);
    assert_int_equal(sum.v[LESSONS_M_TOKEN_HITS], FORKS * ADDS);
    assert_int_equal(sum.processes, 0);
    apr_shm_destroy(shm);
}

static void *APR_THREAD_FUNC adder(apr_thread_t *t, void *data)
{
    int n;

    for (n = 0; n < ADDS; n++) {
        lessons_metrics_add(data, LESSONS_M_CACHE_HITS, 1);
    }
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static void test_threads_share_one_slot(void **state)
{
    lessons_metrics_t *m = block(1);
    lessons_metrics_slot_t *s = lessons_metrics_claim(m, 9, NULL, NULL);
    apr_thread_t *t[4];
    apr_status_t rv;
    lessons_metrics_sum_t sum;
    int i;

    (void)state;
    for (i = 0; i < 4; i++) {
        assert_int_equal(apr_thread_create(&t[i], NULL, adder, s, pool),
                         APR_SUCCESS);
    }
    for (i = 0; i < 4; i++) {
        apr_thread_join(&rv, t[i]);
    }
    lessons_metrics_read(m, NULL, NULL, &sum);
    assert_int_equal(sum.v[LESSONS_M_CACHE_HITS], 4 * ADDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attach),
        cmocka_unit_test(test_claim_and_carry),
        cmocka_unit_test(test_ids_and_kinds),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_prometheus),
        cmocka_unit_test(test_lease_prometheus),
        cmocka_unit_test(test_lease_waits_prometheus),
        cmocka_unit_test(test_status_auto),
        cmocka_unit_test(test_processes_share_one_block),
        cmocka_unit_test(test_threads_share_one_slot),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
