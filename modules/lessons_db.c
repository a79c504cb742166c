/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_db.c: per-connection readiness and fault classification.
 * apr_dbd hides what went wrong behind a message, so the native handles
 * answer the questions it cannot: which PostgreSQL backend this is
 * (PQbackendPID changes when the driver reconnects underneath), whether
 * the connection is still up, and SQLite's extended error codes.
 */
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "apr_strings.h"

#include "lessons_db.h"

#define LESSONS_CONN_KEY "lessons_db_conn"

/* SQLite waits at most this long inside one step while holding
 * apr_dbd's process-wide mutex; the driver then retries with the mutex
 * free (16 times, 100 ms apart), so a locked database answers in about
 * two seconds and never stalls the process's other SQLite requests.
 */
#define LESSONS_SQLITE_BUSY_MS 10

/* One connection's state, in a pool as long-lived as the connection. */
typedef struct {
    long backend;               /* PostgreSQL backend PID (SQLite: 1);
                                 * 0: nothing prepared yet */
    apr_pool_t *pool;           /* this backend's statements */
    apr_hash_t *prepared;       /* label -> apr_dbd_prepared_t * */
    long timeout_ms;            /* statement timeout applied (pgsql) */
    unsigned int generation;    /* makes every prepare's labels new */
} lessons_conn_t;

static int lessons_db_is(const lessons_db_t *db, const char *name)
{
    return db && db->driver && strcmp(apr_dbd_name(db->driver), name) == 0;
}

static PGconn *lessons_db_pg(const lessons_db_t *db)
{
    return lessons_db_is(db, "pgsql")
           ? apr_dbd_native_handle(db->driver, db->handle) : NULL;
}

static sqlite3 *lessons_db_sqlite(const lessons_db_t *db)
{
    return lessons_db_is(db, "sqlite3")
           ? apr_dbd_native_handle(db->driver, db->handle) : NULL;
}

static lessons_conn_t *lessons_db_conn(apr_pool_t *conn_pool)
{
    void *data = NULL;
    lessons_conn_t *conn;

    apr_pool_userdata_get(&data, LESSONS_CONN_KEY, conn_pool);
    if (data) {
        return data;
    }
    conn = apr_pcalloc(conn_pool, sizeof(*conn));
    apr_pool_userdata_setn(conn, LESSONS_CONN_KEY, NULL, conn_pool);
    return conn;
}

static const char *lessons_db_message(const lessons_db_t *db, apr_pool_t *p,
                                      int rv, const char *what)
{
    const char *msg = apr_dbd_error(db->driver, db->handle, rv);

    return apr_psprintf(p, "%s: %s (driver code %d)", what,
                        msg ? msg : "unknown error", rv);
}

/* PostgreSQL: bound every statement and lock wait of this backend, so a
 * locked table answers within the bound and the statement, cancelled by
 * the server, can never commit after we have answered.
 */
static lessons_db_fault_e lessons_db_set_timeout(lessons_db_t *db,
                                                 lessons_conn_t *conn,
                                                 apr_pool_t *p,
                                                 long timeout_ms,
                                                 const char **err)
{
    int nrows = 0;
    int rv = apr_dbd_query(db->driver, db->handle, &nrows,
                           apr_psprintf(p, "SET statement_timeout = %ld; "
                                        "SET lock_timeout = %ld",
                                        timeout_ms, timeout_ms));

    if (rv != 0) {
        *err = lessons_db_message(db, p, rv, "setting statement_timeout");
        return lessons_db_fault(db, NULL, *err);
    }
    conn->timeout_ms = timeout_ms;
    return LESSONS_DB_OK;
}

static lessons_db_fault_e lessons_db_prepare(lessons_db_t *db,
                                             lessons_conn_t *conn,
                                             apr_pool_t *conn_pool,
                                             const char **err)
{
    if (conn->pool) {
        apr_pool_destroy(conn->pool);
    }
    conn->prepared = NULL;
    if (apr_pool_create(&conn->pool, conn_pool) != APR_SUCCESS) {
        conn->pool = NULL;
        *err = "out of memory preparing statements";
        return LESSONS_DB_ERROR;
    }
    conn->generation++;
    db->prepared = NULL;
    /* A server-side name of its own each time: an earlier attempt on this
     * backend may have left some of ours behind.
     */
    if (lessons_store_prepare(db, conn->pool,
                              lessons_db_pg(db)
                              ? apr_psprintf(conn->pool, "%u",
                                             conn->generation)
                              : NULL, err) != LESSONS_STORE_OK) {
        *err = apr_pstrdup(conn_pool, *err);
        apr_pool_destroy(conn->pool);
        conn->pool = NULL;
        db->prepared = NULL;
        return lessons_db_fault(db, NULL, *err);
    }
    conn->prepared = db->prepared;
    return LESSONS_DB_OK;
}

lessons_db_fault_e lessons_db_ready(lessons_db_t *db, apr_pool_t *conn_pool,
                                    long timeout_ms, const char **err)
{
    lessons_conn_t *conn = lessons_db_conn(conn_pool);
    PGconn *pg = lessons_db_pg(db);
    sqlite3 *lite = lessons_db_sqlite(db);
    long backend = 1;
    lessons_db_fault_e rc;

    if (pg) {
        if (PQstatus(pg) != CONNECTION_OK) {
            *err = "the connection to PostgreSQL is down";
            return LESSONS_DB_UNAVAILABLE;
        }
        backend = PQbackendPID(pg);
    }
    if (conn->backend != backend) {
        conn->backend = 0;
        conn->timeout_ms = 0;
        conn->prepared = NULL;
    }
    /* The bound first: preparing takes locks too, and waits on a locked
     * table like any statement.
     */
    if (pg && conn->timeout_ms != timeout_ms) {
        rc = lessons_db_set_timeout(db, conn, conn_pool, timeout_ms, err);
        if (rc != LESSONS_DB_OK) {
            return rc;
        }
    }
    if (!conn->prepared) {
        if (lite) {
            sqlite3_busy_timeout(lite, LESSONS_SQLITE_BUSY_MS);
        }
        rc = lessons_db_prepare(db, conn, conn_pool, err);
        if (rc != LESSONS_DB_OK) {
            return rc;
        }
        conn->backend = backend;
    }
    db->prepared = conn->prepared;
    return LESSONS_DB_OK;
}

static int lessons_has(const char *s, const char *part)
{
    return s && strstr(s, part) != NULL;
}

static lessons_db_fault_e lessons_db_pg_fault(PGconn *pg, const char *err)
{
    if (PQstatus(pg) != CONNECTION_OK
        || lessons_has(err, "server closed the connection")
        || lessons_has(err, "terminating connection")
        || lessons_has(err, "no connection to the server")
        || lessons_has(err, "the database system is")) {
        return LESSONS_DB_UNAVAILABLE;
    }
    if (lessons_has(err, "statement timeout")
        || lessons_has(err, "lock timeout")
        || lessons_has(err, "canceling statement")) {
        return LESSONS_DB_TIMEOUT;
    }
    if (lessons_has(err, "read-only transaction")) {
        return LESSONS_DB_READONLY;
    }
    if (lessons_has(err, "No space left on device")
        || lessons_has(err, "could not extend file")) {
        return LESSONS_DB_FULL;
    }
    if ((lessons_has(err, "relation \"") || lessons_has(err, "column \""))
        && lessons_has(err, "does not exist")) {
        return LESSONS_DB_NO_SCHEMA;
    }
    return LESSONS_DB_ERROR;
}

static lessons_db_fault_e lessons_db_sqlite_fault(sqlite3 *lite,
                                                  const char *err)
{
    int code = sqlite3_extended_errcode(lite);

    if (code == SQLITE_READONLY_DBMOVED) {
        return LESSONS_DB_MOVED;
    }
    switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return LESSONS_DB_TIMEOUT;
    case SQLITE_READONLY:
        return LESSONS_DB_READONLY;
    case SQLITE_FULL:
        return LESSONS_DB_FULL;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
        return LESSONS_DB_UNAVAILABLE;
    default:
        break;
    }
    /* A rollback after the failure has reset the handle's code: the
     * message (SQLite's own, fixed texts) still says what it was.
     */
    if (lessons_has(err, "no such table") || lessons_has(err, "no such column")) {
        return LESSONS_DB_NO_SCHEMA;
    }
    if (lessons_has(err, "database is locked")
        || lessons_has(err, "database table is locked")) {
        return LESSONS_DB_TIMEOUT;
    }
    if (lessons_has(err, "readonly database")) {
        return LESSONS_DB_READONLY;
    }
    if (lessons_has(err, "database or disk is full")) {
        return LESSONS_DB_FULL;
    }
    if (lessons_has(err, "unable to open database file")
        || lessons_has(err, "disk I/O error")) {
        return LESSONS_DB_UNAVAILABLE;
    }
    return LESSONS_DB_ERROR;
}

lessons_db_fault_e lessons_db_fault(const lessons_db_t *db,
                                    apr_pool_t *conn_pool, const char *err)
{
    PGconn *pg = lessons_db_pg(db);
    sqlite3 *lite = lessons_db_sqlite(db);
    lessons_db_fault_e fault = pg ? lessons_db_pg_fault(pg, err)
                             : lite ? lessons_db_sqlite_fault(lite, err)
                             : LESSONS_DB_ERROR;

    /* Statements the server no longer knows (or, in SQLite, that a schema
     * change expired): prepare afresh on the next use.
     */
    if (conn_pool && (lessons_has(err, "prepared statement")
                      || (lite && (sqlite3_errcode(lite) == SQLITE_SCHEMA
                                   || fault == LESSONS_DB_NO_SCHEMA)))) {
        lessons_db_conn(conn_pool)->backend = 0;
    }
    return fault;
}

int lessons_db_moved(const lessons_db_t *db)
{
    sqlite3 *lite = lessons_db_sqlite(db);
    int moved = 0;

    if (!lite || sqlite3_file_control(lite, "main", SQLITE_FCNTL_HAS_MOVED,
                                      &moved) != SQLITE_OK) {
        return 0;
    }
    return moved;
}

const char *lessons_db_name(const lessons_db_t *db, apr_pool_t *p)
{
    PGconn *pg = lessons_db_pg(db);
    sqlite3 *lite = lessons_db_sqlite(db);
    const char *file;

    if (pg) {
        return apr_psprintf(p, "PostgreSQL database %s on %s:%s",
                            PQdb(pg) ? PQdb(pg) : "?",
                            PQhost(pg) ? PQhost(pg) : "?",
                            PQport(pg) ? PQport(pg) : "?");
    }
    if (lite) {
        file = sqlite3_db_filename(lite, "main");
        return apr_psprintf(p, "SQLite database %s",
                            file && *file ? file : "(in memory)");
    }
    return "the database";
}

/* SQLite: which permission the server's user lacks on the file or its
 * directory (SQLite writes its journal beside the file), if any.
 */
static const char *lessons_db_permission(apr_pool_t *p, const char *file)
{
    const char *slash = strrchr(file, '/');
    const char *dir = slash ? (slash == file ? "/"
                               : apr_pstrmemdup(p, file,
                                                (apr_size_t)(slash - file)))
                            : ".";

    if (access(file, F_OK) != 0) {
        return apr_psprintf(p, "the file %s does not exist (load the "
                            "schema to create it)", file);
    }
    if (access(file, R_OK | W_OK) != 0) {
        return apr_psprintf(p, "the server's user lacks read and write "
                            "permission on the file %s", file);
    }
    if (access(dir, W_OK | X_OK) != 0) {
        return apr_psprintf(p, "the server's user lacks write permission "
                            "on the directory %s, where SQLite makes its "
                            "journal", dir);
    }
    return NULL;
}

const char *lessons_db_advice(const lessons_db_t *db, apr_pool_t *p,
                              lessons_db_fault_e fault)
{
    sqlite3 *lite = lessons_db_sqlite(db);
    const char *file = lite ? sqlite3_db_filename(lite, "main") : NULL;

    switch (fault) {
    case LESSONS_DB_NO_SCHEMA:
        /* A database from before ETags lacks lessons.version and the
         * catalog tables: the same advice, and the upgrade file.
         */
        return lite ? "load sql/schema.sqlite.sql into it; one made "
                      "before ETags needs sql/upgrade-etags.sqlite.sql "
                      "first"
                    : "load sql/schema.pgsql.sql into it";
    case LESSONS_DB_MOVED:
        return "the file was deleted or replaced while the server ran; "
               "writes are refused until the server restarts";
    case LESSONS_DB_READONLY:
    case LESSONS_DB_UNAVAILABLE:
        return file && *file ? lessons_db_permission(p, file) : NULL;
    default:
        return NULL;
    }
}
