/* Licensed under the Apache License, Version 2.0.
 *
 * test_db.c: lessons_db against real SQLite files through apr_dbd --
 * statements prepared once per connection, and each fault an admin can
 * meet classified as what it is: no schema (or no table for
 * Idempotency-Key), read-only (and writable again once the file is
 * fixed, without a new pooled connection), locked by another writer
 * (answered within about two seconds), file replaced, and a new
 * connection that meets the file locked for a moment (as after a
 * graceful restart) prepared once the lock is gone (its DBDInitSQL
 * waits the lock out too), and DBDInitSQL run on a connection opened
 * again.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "apr_dbd.h"
#include "apr_file_io.h"
#include "apr_strings.h"
#include "apr_time.h"

#include "store/lessons_db.h"

#include "unit_pool.h"

static const apr_dbd_driver_t *driver;
static const char *dir;

static int group_setup(void **state)
{
    char *tmpl;

    (void)state;
    if (unit_pool_open() != 0 || apr_dbd_init(pool) != APR_SUCCESS
        || apr_dbd_get_driver(pool, "sqlite3", &driver) != APR_SUCCESS) {
        return -1;
    }
    tmpl = apr_pstrdup(pool, "/tmp/lessons-test-db.XXXXXX");
    dir = mkdtemp(tmpl);
    return dir ? 0 : -1;
}

static int group_teardown_dir(void **state)
{
    char *cmd = apr_psprintf(pool, "rm -rf '%s'", dir);

    if (system(cmd) != 0) {
        return -1;
    }
    return group_teardown(state);
}

/* A database file made by the sqlite3 library directly, with our schema
 * (or none), in the directory in.
 */
static const char *make_file_in(const char *in, const char *name,
                                int schema)
{
    const char *path = apr_pstrcat(pool, in, "/", name, NULL);
    char *sql = NULL, *err = NULL;
    apr_size_t len;
    apr_file_t *f;
    apr_finfo_t fi;
    sqlite3 *db;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (schema) {
        assert_int_equal(apr_file_open(&f, LESSONS_SQL_DIR
                                       "/schema.sqlite.sql", APR_FOPEN_READ,
                                       APR_OS_DEFAULT, pool), APR_SUCCESS);
        assert_int_equal(apr_file_info_get(&fi, APR_FINFO_SIZE, f),
                         APR_SUCCESS);
        len = (apr_size_t)fi.size;
        sql = apr_pcalloc(pool, len + 1);
        assert_int_equal(apr_file_read_full(f, sql, len, &len), APR_SUCCESS);
        apr_file_close(f);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, &err), SQLITE_OK);
    }
    else {
        assert_int_equal(sqlite3_exec(db, "VACUUM", NULL, NULL, &err),
                         SQLITE_OK);
    }
    sqlite3_close(db);
    return path;
}

static const char *make_file(const char *name, int schema)
{
    return make_file_in(dir, name, schema);
}

typedef struct {
    lessons_db_t db;
    apr_pool_t *conn_pool;
} conn_t;

static conn_t *open_db(const char *params)
{
    conn_t *c = apr_pcalloc(pool, sizeof(*c));
    const char *err = NULL;

    assert_int_equal(apr_pool_create(&c->conn_pool, pool), APR_SUCCESS);
    c->db.driver = driver;
    assert_int_equal(apr_dbd_open_ex(driver, c->conn_pool, params,
                                     &c->db.handle, &err), APR_SUCCESS);
    return c;
}

static lessons_db_fault_e ready(conn_t *c)
{
    const char *err = NULL;

    return lessons_db_ready(&c->db, c->conn_pool, 10000, &err);
}

/* Run one write through the module's own create statement. */
static lessons_db_fault_e write_one(conn_t *c)
{
    apr_dbd_prepared_t *stmt = apr_hash_get(c->db.prepared, "lessons_delete",
                                            APR_HASH_KEY_STRING);
    apr_int64_t id = 1, none = -1;
    int nrows = 0, rv, no_if_match = 0;
    /* lessons_delete: the id, then the If-Match part, not asked. */
    const void *args[] = { &id, &no_if_match, &none, &none, &none, &none,
                           "" };

    assert_non_null(stmt);
    rv = apr_dbd_pbquery(driver, pool, c->db.handle, &nrows, stmt, args);
    if (rv == 0) {
        return LESSONS_DB_OK;
    }
    return lessons_db_fault(&c->db, c->conn_pool,
                            apr_dbd_error(driver, c->db.handle, rv));
}

static void test_prepared_once_per_connection(void **state)
{
    conn_t *c = open_db(make_file("good.db", 1));
    apr_hash_t *first;

    (void)state;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    first = c->db.prepared;
    assert_non_null(apr_hash_get(first, "lessons_get", APR_HASH_KEY_STRING));
    c->db.prepared = NULL;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_ptr_equal(c->db.prepared, first);
    assert_int_equal(write_one(c), LESSONS_DB_OK);
    assert_false(lessons_db_moved(&c->db));
}

static void test_no_schema(void **state)
{
    conn_t *c = open_db(make_file("empty.db", 0));
    const char *err = NULL;

    (void)state;
    assert_int_equal(lessons_db_ready(&c->db, c->conn_pool, 10000, &err),
                     LESSONS_DB_NO_SCHEMA);
    assert_non_null(strstr(err, "no such table"));
    assert_non_null(strstr(lessons_db_advice(&c->db, pool,
                                             LESSONS_DB_NO_SCHEMA),
                           "schema.sqlite.sql"));
}

/* A database made before Idempotency-Key: the connection is ready and
 * serves as before; the keys' statements are refused as NO_SCHEMA, and
 * asked again each time (never marking the others stale), until the
 * table is there.
 */
static void test_keys_table_missing(void **state)
{
    const char *path = make_file("old.db", 1);
    conn_t *c = open_db(path);
    const char *err = NULL;
    apr_hash_t *first;
    unsigned n;
    sqlite3 *admin;
    int i;

    (void)state;
    assert_int_equal(sqlite3_open(path, &admin), SQLITE_OK);
    assert_int_equal(sqlite3_exec(admin, "DROP TABLE lessons_idempotency",
                                  NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(ready(c), LESSONS_DB_OK);
    first = c->db.prepared;
    n = apr_hash_count(first);
    for (i = 0; i < 3; i++) {
        err = NULL;
        assert_int_equal(lessons_db_ready_idempotency(&c->db, c->conn_pool,
                                                      pool, &err),
                         LESSONS_DB_NO_KEYS);
        assert_non_null(strstr(err, "lessons_idempotency"));
        assert_non_null(strstr(lessons_db_advice(&c->db, pool,
                                                 LESSONS_DB_NO_KEYS),
                               "sql/upgrade-idempotency.sqlite.sql"));
        assert_int_equal(ready(c), LESSONS_DB_OK);
        assert_ptr_equal(c->db.prepared, first);
        assert_int_equal(apr_hash_count(first), n);
        assert_int_equal(write_one(c), LESSONS_DB_OK);
    }
    assert_int_equal(sqlite3_exec(admin, "CREATE TABLE lessons_idempotency "
                                  "(caller, idem_key, fingerprint, lesson_id,"
                                  " status, location, etag, body, "
                                  "created_at, expires_at, PRIMARY KEY "
                                  "(caller, idem_key))", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(admin);
    assert_int_equal(lessons_db_ready_idempotency(&c->db, c->conn_pool,
                                                  pool, &err),
                     LESSONS_DB_OK);
    assert_ptr_equal(c->db.prepared, first);
    assert_int_equal(apr_hash_count(first), n + 3);
    /* asked again: already there */
    assert_int_equal(lessons_db_ready_idempotency(&c->db, c->conn_pool,
                                                  pool, &err),
                     LESSONS_DB_OK);
    assert_int_equal(apr_hash_count(first), n + 3);
}

/* What a server's user meets: run fn as a user that file permissions
 * bind (nobody when the tests run as root, which they bypass), in a
 * child when that needs a change of user.  fn's result, or -1.  No
 * cmocka asserts in fn: a child must not return into the runner.
 */
static int as_bound_user(int (*fn)(const char *), const char *path)
{
    pid_t pid;
    int status = 0;

    if (geteuid() != 0) {
        return fn(path);
    }
    pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            _exit(255);
        }
        _exit(fn(path));
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

/* A file and a directory of their own that the bound user owns, the
 * file read-only to it.
 */
static const char *read_only_file(const char *name)
{
    const char *sub = apr_pstrcat(pool, dir, "/", name, NULL);
    const char *path;

    assert_int_equal(apr_dir_make(sub, APR_FPROT_OS_DEFAULT, pool),
                     APR_SUCCESS);
    path = make_file_in(sub, "ro.db", 1);
    assert_int_equal(chmod(path, 0444), 0);
    if (geteuid() == 0) {
        assert_int_equal(chmod(dir, 0755), 0);  /* mkdtemp's 0700 */
        assert_int_equal(chown(sub, 65534, 65534), 0);
        assert_int_equal(chown(path, 65534, 65534), 0);
    }
    return path;
}

static int write_read_only(const char *path)
{
    conn_t *c = open_db(path);

    if (ready(c) != LESSONS_DB_OK) {
        return 1;
    }
    return write_one(c) == LESSONS_DB_READONLY ? 0 : 2;
}

static void test_read_only(void **state)
{
    (void)state;
    assert_int_equal(as_bound_user(write_read_only,
                                   read_only_file("ro")), 0);
}

/* The admin fixes the file: the connection that opened it read-only
 * writes again, through a handle the module opened in its place, and
 * the pooled handle is left as it was.  Opened read-only by its URI
 * here: a file's permissions bind no root, and who runs the tests may
 * write the file.
 */
static void test_read_only_fixed(void **state)
{
    const char *path = make_file("fixed.db", 1);
    conn_t *c = open_db(apr_psprintf(pool, "file:%s?mode=ro", path));
    apr_dbd_t *pooled = c->db.handle, *own;

    (void)state;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_ptr_not_equal(c->db.handle, pooled);
    assert_int_equal(write_one(c), LESSONS_DB_OK);
    assert_null(lessons_db_unwritable(&c->db, pool));
    assert_int_equal(sqlite3_db_readonly(apr_dbd_native_handle(driver,
                                                               pooled),
                                         "main"), 1);
    /* The next request, lent the pooled handle again: the module's
     * handle, not another one.
     */
    own = c->db.handle;
    c->db.handle = pooled;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_ptr_equal(c->db.handle, own);
    assert_int_equal(write_one(c), LESSONS_DB_OK);
}

/* One number a PRAGMA reads on a handle. */
static sqlite3_int64 pragma_number(apr_dbd_t *handle, const char *sql)
{
    sqlite3 *native = apr_dbd_native_handle(driver, handle);
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 n;

    assert_int_equal(sqlite3_prepare_v2(native, sql, -1, &stmt, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(stmt), SQLITE_ROW);
    n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
}

/* The handle the module opens in place of a read-only one gets
 * DBDInitSQL as mod_dbd runs it: in order, up to the first statement
 * that fails (apr_dbd_sqlite3 counts a PRAGMA's row as a failure).
 */
static void test_read_only_fixed_runs_init_sql(void **state)
{
    const char *path = make_file("fixed-init.db", 1);
    conn_t *c = open_db(apr_psprintf(pool, "file:%s?mode=ro", path));
    apr_array_header_t *init = apr_array_make(pool, 3, sizeof(char *));
    apr_dbd_t *pooled = c->db.handle;

    (void)state;
    APR_ARRAY_PUSH(init, const char *) = "PRAGMA foreign_keys = ON";
    APR_ARRAY_PUSH(init, const char *) = "PRAGMA max_page_count = 4242";
    APR_ARRAY_PUSH(init, const char *) = "PRAGMA cache_size = 77";
    c->db.init_sql = init;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_ptr_not_equal(c->db.handle, pooled);
    assert_int_equal(pragma_number(c->db.handle, "PRAGMA foreign_keys"), 1);
    assert_int_equal(pragma_number(c->db.handle, "PRAGMA max_page_count"),
                     4242);
    assert_int_not_equal(pragma_number(c->db.handle, "PRAGMA cache_size"),
                         77);
    assert_int_equal(pragma_number(pooled, "PRAGMA foreign_keys"), 0);
    assert_int_equal(write_one(c), LESSONS_DB_OK);
}

static void test_missing_file_never_created(void **state)
{
    const char *path = apr_pstrcat(pool, dir, "/missing.db", NULL);
    apr_dbd_t *handle = NULL;
    const char *err = NULL;
    apr_finfo_t fi;

    (void)state;
    assert_int_not_equal(apr_dbd_open_ex(driver, pool,
                                         apr_psprintf(pool, "file:%s?mode=rw",
                                                      path),
                                         &handle, &err), APR_SUCCESS);
    assert_int_not_equal(apr_stat(&fi, path, APR_FINFO_TYPE, pool),
                         APR_SUCCESS);
}

static void test_locked_by_another_writer(void **state)
{
    const char *path = make_file("locked.db", 1);
    conn_t *c = open_db(path);
    sqlite3 *other;
    apr_time_t t0;

    (void)state;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL,
                                  NULL), SQLITE_OK);
    t0 = apr_time_now();
    assert_int_equal(write_one(c), LESSONS_DB_TIMEOUT);
    /* bounded: the driver's retries, never a long busy wait */
    assert_true(apr_time_now() - t0 < apr_time_from_sec(5));
    sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(other);
    assert_int_equal(write_one(c), LESSONS_DB_OK);
}

/* A process that holds an exclusive lock on path (rollback journal:
 * readers wait too) for ms milliseconds, then lets go.  Returns its pid
 * once the lock is held.
 */
static pid_t hold_exclusive(const char *path, int ms)
{
    int ready[2];
    char c = 0;
    pid_t pid;

    assert_int_equal(pipe(ready), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sqlite3 *other;

        close(ready[0]);
        if (sqlite3_open(path, &other) != SQLITE_OK
            || sqlite3_exec(other, "PRAGMA journal_mode = DELETE;"
                            "BEGIN EXCLUSIVE", NULL, NULL, NULL)
               != SQLITE_OK
            || write(ready[1], "x", 1) != 1) {
            _exit(1);
        }
        usleep((useconds_t)ms * 1000);
        sqlite3_exec(other, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(other);
        _exit(0);
    }
    close(ready[1]);
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return pid;
}

static void test_locked_at_connect(void **state)
{
    const char *path = make_file("restart.db", 1);
    conn_t *c;
    apr_time_t t0;
    int status = 0;
    pid_t pid;

    (void)state;
    /* Briefly (a WAL checkpoint or recovery): prepared once it ends. */
    pid = hold_exclusive(path, 150);
    c = open_db(path);
    t0 = apr_time_now();
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_true(apr_time_now() - t0 >= apr_time_from_msec(100));
    assert_non_null(apr_hash_get(c->db.prepared, "lessons_get",
                                 APR_HASH_KEY_STRING));
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(status, 0);

    /* Longer than half the bound: answered as locked, within the bound. */
    pid = hold_exclusive(path, 3000);
    c = open_db(path);
    t0 = apr_time_now();
    {
        const char *err = NULL;

        assert_int_equal(lessons_db_ready(&c->db, c->conn_pool, 1000, &err),
                         LESSONS_DB_TIMEOUT);
    }
    assert_true(apr_time_now() - t0 < apr_time_from_msec(1000));
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(ready(c), LESSONS_DB_OK);
}

/* DBDInitSQL runs on a new connection while another process has the
 * file locked for a moment (the first reader after a restart rebuilds
 * the WAL's index; the last to close checkpoints).  Unhelped, preparing
 * its PRAGMA fails at once and mod_dbd drops the error: the connection
 * serves without the admin's max_page_count (a full disk that is not).
 * Told it is new (mod_dbd's post_connect, before DBDInitSQL), it waits
 * the lock out.
 */
static void test_init_sql_waits_out_a_lock(void **state)
{
    const char *path = make_file("init-locked.db", 1);
    const char *init = "PRAGMA max_page_count = 4242";
    conn_t *plain, *told;
    int status = 0, rows = 0;
    pid_t pid;

    (void)state;
    pid = hold_exclusive(path, 150);
    plain = open_db(path);
    assert_int_not_equal(apr_dbd_query(driver, plain->db.handle, &rows,
                                       init), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_not_equal(pragma_number(plain->db.handle,
                                       "PRAGMA max_page_count"), 4242);

    pid = hold_exclusive(path, 150);
    told = open_db(path);
    lessons_db_connected(&told->db);
    (void)apr_dbd_query(driver, told->db.handle, &rows, init);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(status, 0);
    assert_int_equal(pragma_number(told->db.handle, "PRAGMA max_page_count"),
                     4242);
    /* The module's own statements keep their short wait. */
    assert_int_equal(ready(told), LESSONS_DB_OK);
    assert_int_equal(write_one(told), LESSONS_DB_OK);
}

static void test_file_replaced(void **state)
{
    const char *path = make_file("moved.db", 1);
    const char *old = apr_pstrcat(pool, path, ".old", NULL);
    conn_t *c = open_db(path);

    (void)state;
    assert_int_equal(ready(c), LESSONS_DB_OK);
    assert_false(lessons_db_moved(&c->db));
    assert_int_equal(apr_file_rename(path, old, pool), APR_SUCCESS);
    assert_true(lessons_db_moved(&c->db));
    assert_int_equal(apr_file_copy(old, path, APR_FPROT_FILE_SOURCE_PERMS,
                                   pool), APR_SUCCESS);
    assert_true(lessons_db_moved(&c->db));      /* replaced: still moved */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepared_once_per_connection),
        cmocka_unit_test(test_no_schema),
        cmocka_unit_test(test_keys_table_missing),
        cmocka_unit_test(test_read_only),
        cmocka_unit_test(test_read_only_fixed),
        cmocka_unit_test(test_read_only_fixed_runs_init_sql),
        cmocka_unit_test(test_missing_file_never_created),
        cmocka_unit_test(test_locked_by_another_writer),
        cmocka_unit_test(test_locked_at_connect),
        cmocka_unit_test(test_init_sql_waits_out_a_lock),
        cmocka_unit_test(test_file_replaced),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown_dir);
}
