/* Licensed under the Apache License, Version 2.0.
 *
 * test_engine.c: the database engines' traits (lessons_engine.h): the
 * table and its lookup, how each begins a write and bounds a session,
 * and how each tells faults apart -- SQLite from a real handle's result
 * codes, PostgreSQL from its messages (the one place apr_dbd leaves
 * only those).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include <sqlite3.h>

#include "apr_dbd.h"
#include "apr_env.h"

#include "store/lessons_engine.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

static void test_table(void **state)
{
    const lessons_engine_t *lite = lessons_engine_find("sqlite3");
    const lessons_engine_t *pg = lessons_engine_find("pgsql");
    int i, n = 0;

    (void)state;
    assert_non_null(lite);
    assert_non_null(pg);
    assert_string_equal(lite->driver, "sqlite3");
    assert_string_equal(pg->driver, "pgsql");
    assert_null(lessons_engine_find("mysql"));
    assert_null(lessons_engine_find(NULL));
    assert_null(lessons_engine_find("SQLITE3"));    /* names are exact */
    assert_null(lessons_engine_of(NULL));
    for (i = 0; lessons_engines[i]; i++) {
        const lessons_engine_t *e = lessons_engines[i];

        /* every engine answers what lessons_db.c asks unconditionally */
        assert_non_null(e->driver);
        assert_non_null(e->begin_sql);
        assert_non_null(e->backend);
        assert_non_null(e->fault);
        assert_non_null(e->name);
        assert_ptr_equal(lessons_engine_find(e->driver), e);
        n++;
    }
    assert_int_equal(n, 2);
}

static void test_traits(void **state)
{
    const lessons_engine_t *lite = lessons_engine_find("sqlite3");
    const lessons_engine_t *pg = lessons_engine_find("pgsql");
    const char *err = NULL;

    (void)state;
    /* SQLite takes the write lock up front; writers take turns */
    assert_string_equal(lite->begin_sql, "BEGIN IMMEDIATE");
    assert_true(lite->one_writer);
    assert_false(lite->named_statements);
    assert_null(lite->session_sql);
    assert_int_equal(lite->backend(NULL, &err), 1);
    /* PostgreSQL: row locks, named statements, a bounded session */
    assert_string_equal(pg->begin_sql, "BEGIN");
    assert_false(pg->one_writer);
    assert_true(pg->named_statements);
    /* a key of Idempotency-Key is claimed where writers run side by
     * side, without waiting, for the transaction
     */
    assert_null(lite->claim_sql);
    assert_non_null(pg->claim_sql);
    assert_non_null(strstr(pg->claim_sql, "pg_try_advisory_xact_lock(%lld)"));
    /* the bound, and one plan per statement (not one per execution) */
    assert_string_equal(pg->session_sql(pool, 2500),
                        "SET statement_timeout = 2500; "
                        "SET lock_timeout = 2500; "
                        "SET plan_cache_mode = force_generic_plan");
    /* no connection: down, and says so */
    assert_int_equal(pg->backend(NULL, &err), 0);
    assert_non_null(err);
    assert_null(pg->moved);
}

/* SQLite: from the handle's own result codes. */
static void test_sqlite_faults(void **state)
{
    const lessons_engine_t *lite = lessons_engine_find("sqlite3");
    sqlite3 *db = NULL;
    char *msg = NULL;
    int stale = -1;

    (void)state;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    /* a missing table: no schema, and statements to prepare afresh */
    assert_int_not_equal(sqlite3_exec(db, "SELECT * FROM lessons", NULL,
                                      NULL, &msg), SQLITE_OK);
    assert_int_equal(lite->fault(db, msg, &stale), LESSONS_DB_NO_SCHEMA);
    assert_true(stale);
    sqlite3_free(msg);
    msg = NULL;
    /* a constraint: neither of the above */
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t (x INTEGER NOT NULL);"
                                  "INSERT INTO t VALUES (NULL)", NULL, NULL,
                                  &msg), SQLITE_CONSTRAINT);
    assert_int_equal(lite->fault(db, msg, &stale), LESSONS_DB_ERROR);
    assert_false(stale);
    sqlite3_free(msg);
    /* a read-only handle refuses writes as READONLY, by its code */
    sqlite3_close(db);
    assert_int_equal(sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READONLY,
                                     NULL), SQLITE_OK);
    assert_int_not_equal(sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL,
                                      &msg), SQLITE_OK);
    assert_int_equal(lite->fault(db, msg, &stale), LESSONS_DB_READONLY);
    sqlite3_free(msg);
    /* after a rollback has reset the code, SQLite's fixed texts */
    assert_int_equal(lite->fault(NULL, "database is locked", NULL),
                     LESSONS_DB_TIMEOUT);
    assert_int_equal(lite->fault(NULL, "database or disk is full", NULL),
                     LESSONS_DB_FULL);
    assert_int_equal(lite->fault(NULL, "unable to open database file", NULL),
                     LESSONS_DB_UNAVAILABLE);
    assert_int_equal(lite->fault(NULL, "attempt to write a readonly "
                                 "database", NULL), LESSONS_DB_READONLY);
    assert_int_equal(lite->fault(NULL, NULL, NULL), LESSONS_DB_ERROR);
    /* a restore or a migration expired the statements: 503 and prepare
     * afresh, never a 500
     */
    stale = 0;
    assert_int_equal(lite->fault(NULL, "lessons_update: database schema has "
                                 "changed (driver code 1)", &stale),
                     LESSONS_DB_STALE);
    assert_true(stale);
    assert_int_equal(lite->moved(db), 0);
    assert_string_equal(lite->name(db, pool), "SQLite database (in memory)");
    assert_non_null(strstr(lite->advice(db, pool, LESSONS_DB_NO_SCHEMA),
                           "sql/schema.sqlite.sql"));
    assert_null(lite->advice(db, pool, LESSONS_DB_TIMEOUT));
    sqlite3_close(db);
}

/* PostgreSQL: from the server's and libpq's messages alone. */
static void test_pgsql_faults(void **state)
{
    static const struct {
        const char *err;
        lessons_db_fault_e fault;
        int stale;
    } cases[] = {
        { "lessons_get: server closed the connection unexpectedly",
          LESSONS_DB_UNAVAILABLE, 0 },
        { "FATAL:  terminating connection due to administrator command",
          LESSONS_DB_UNAVAILABLE, 0 },
        { "no connection to the server", LESSONS_DB_UNAVAILABLE, 0 },
        { "FATAL:  the database system is starting up",
          LESSONS_DB_UNAVAILABLE, 0 },
        { "ERROR:  canceling statement due to statement timeout",
          LESSONS_DB_TIMEOUT, 0 },
        { "ERROR:  canceling statement due to lock timeout",
          LESSONS_DB_TIMEOUT, 0 },
        { "ERROR:  cannot execute INSERT in a read-only transaction",
          LESSONS_DB_READONLY, 0 },
        { "ERROR:  could not extend file \"base/1/2\": No space left on "
          "device", LESSONS_DB_FULL, 0 },
        { "ERROR:  relation \"lessons\" does not exist",
          LESSONS_DB_NO_SCHEMA, 0 },
        { "ERROR:  column \"version\" does not exist",
          LESSONS_DB_NO_SCHEMA, 0 },
        { "ERROR:  prepared statement \"lessons_get_1\" does not exist",
          LESSONS_DB_ERROR, 1 },
        { "ERROR:  duplicate key value violates unique constraint",
          LESSONS_DB_ERROR, 0 },
        { NULL, LESSONS_DB_ERROR, 0 },
    };
    const lessons_engine_t *pg = lessons_engine_find("pgsql");
    apr_size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int stale = -1;

        assert_int_equal(pg->fault(NULL, cases[i].err, &stale),
                         cases[i].fault);
        assert_int_equal(stale, cases[i].stale);
    }
    assert_non_null(strstr(pg->advice(NULL, pool, LESSONS_DB_NO_SCHEMA),
                           "sql/schema.pgsql.sql"));
    assert_non_null(strstr(pg->advice(NULL, pool, LESSONS_DB_NO_KEYS),
                           "sql/upgrade-idempotency.pgsql.sql"));
    assert_null(pg->advice(NULL, pool, LESSONS_DB_FULL));
    assert_true(lessons_engine_says("a b c", "b c"));
    assert_false(lessons_engine_says(NULL, "b"));
    assert_false(lessons_engine_says("abc", NULL));
}

/* Start-up: libpq's connect gets a bound (whole seconds, at least one)
 * unless the admin set one; SQLite needs none.
 */
static void test_process_init(void **state)
{
    const lessons_engine_t *pg = lessons_engine_find("pgsql");
    char *v = NULL;

    (void)state;
    assert_null(lessons_engine_find("sqlite3")->process_init);
    assert_non_null(pg->process_init);
    apr_env_delete("PGCONNECT_TIMEOUT", pool);
    pg->process_init(pool, 5000);
    assert_int_equal(apr_env_get(&v, "PGCONNECT_TIMEOUT", pool), APR_SUCCESS);
    assert_string_equal(v, "5");
    apr_env_set("PGCONNECT_TIMEOUT", "", pool);
    pg->process_init(pool, 1500);   /* empty is unset: rounded up */
    apr_env_get(&v, "PGCONNECT_TIMEOUT", pool);
    assert_string_equal(v, "2");
    apr_env_delete("PGCONNECT_TIMEOUT", pool);
    lessons_engines_process_init(pool, 100);
    apr_env_get(&v, "PGCONNECT_TIMEOUT", pool);
    assert_string_equal(v, "1");
    /* the admin's own value stays */
    apr_env_set("PGCONNECT_TIMEOUT", "17", pool);
    lessons_engines_process_init(pool, 5000);
    apr_env_get(&v, "PGCONNECT_TIMEOUT", pool);
    assert_string_equal(v, "17");
    apr_env_delete("PGCONNECT_TIMEOUT", pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_traits),
        cmocka_unit_test(test_sqlite_faults),
        cmocka_unit_test(test_pgsql_faults),
        cmocka_unit_test(test_process_init),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
