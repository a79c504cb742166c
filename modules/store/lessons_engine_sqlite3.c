/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_engine_sqlite3.c: SQLite through apr_dbd_sqlite3.  One writer
 * at a time (BEGIN IMMEDIATE takes the write lock up front), faults told
 * by SQLite's extended result codes, and a file that can be deleted or
 * replaced under a running server.
 */
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "apr_strings.h"

#include "store/lessons_engine.h"

/* SQLite waits at most this long inside one step while holding
 * apr_dbd's process-wide mutex; the driver then retries with the mutex
 * free (16 times, 100 ms apart), so a locked database answers in about
 * two seconds and never stalls the process's other SQLite requests.
 */
#define LESSONS_SQLITE_BUSY_MS 10

/* A new connection waits up to this long for a lock before its first
 * statements (lessons_sqlite_connected): locks at open and close last
 * milliseconds.
 */
#define LESSONS_SQLITE_CONNECT_BUSY_MS 1000

static long lessons_sqlite_backend(void *native, const char **err)
{
    (void)native;
    (void)err;
    return 1;                       /* a file: never reconnected */
}

static void lessons_sqlite_tune(void *native)
{
    if (native) {
        sqlite3_busy_timeout(native, LESSONS_SQLITE_BUSY_MS);
    }
}

/* A new connection's first statements (DBDInitSQL's PRAGMAs) meet the
 * file locked for a moment when other processes open or close it at the
 * same time: the first reader after the last one closed rebuilds the
 * WAL's index, the last one to close checkpoints, each under an
 * exclusive lock.  Without a wait, preparing the statement fails at
 * once, mod_dbd drops the error, and the connection serves without the
 * admin's settings (a max_page_count, say).  tune() puts the short wait
 * back before the module's first statement.
 */
static void lessons_sqlite_connected(void *native)
{
    if (native) {
        sqlite3_busy_timeout(native, LESSONS_SQLITE_CONNECT_BUSY_MS);
    }
}

static lessons_db_fault_e lessons_sqlite_fault(void *native, const char *err,
                                               int *stale)
{
    sqlite3 *lite = native;
    int code = lite ? sqlite3_extended_errcode(lite) : SQLITE_OK;
    lessons_db_fault_e fault = LESSONS_DB_ERROR;

    if (code == SQLITE_READONLY_DBMOVED) {
        fault = LESSONS_DB_MOVED;
    }
    else {
        switch (code & 0xff) {
        case SQLITE_SCHEMA:
            fault = LESSONS_DB_STALE;
            break;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            fault = LESSONS_DB_TIMEOUT;
            break;
        case SQLITE_READONLY:
            fault = LESSONS_DB_READONLY;
            break;
        case SQLITE_FULL:
            fault = LESSONS_DB_FULL;
            break;
        case SQLITE_CANTOPEN:
        case SQLITE_IOERR:
            fault = LESSONS_DB_UNAVAILABLE;
            break;
        default:
            /* A rollback after the failure has reset the handle's code:
             * the message (SQLite's own fixed texts) still says what it
             * was.
             */
            if (lessons_engine_says(err, "database schema has changed")) {
                fault = LESSONS_DB_STALE;
            }
            else if (lessons_engine_says(err, "no such table")
                || lessons_engine_says(err, "no such column")) {
                fault = LESSONS_DB_NO_SCHEMA;
            }
            else if (lessons_engine_says(err, "database is locked")
                     || lessons_engine_says(err, "database table is locked")) {
                fault = LESSONS_DB_TIMEOUT;
            }
            else if (lessons_engine_says(err, "readonly database")) {
                fault = LESSONS_DB_READONLY;
            }
            else if (lessons_engine_says(err, "database or disk is full")) {
                fault = LESSONS_DB_FULL;
            }
            else if (lessons_engine_says(err, "unable to open database file")
                     || lessons_engine_says(err, "disk I/O error")) {
                fault = LESSONS_DB_UNAVAILABLE;
            }
            break;
        }
    }
    /* Statements a schema change expired, or made before the schema was
     * there: prepare afresh on the next use.
     */
    if (stale) {
        *stale = fault == LESSONS_DB_STALE || fault == LESSONS_DB_NO_SCHEMA
                 || lessons_engine_says(err, "prepared statement");
    }
    return fault;
}

static int lessons_sqlite_moved(void *native)
{
    int moved = 0;

    if (!native || sqlite3_file_control(native, "main",
                                        SQLITE_FCNTL_HAS_MOVED,
                                        &moved) != SQLITE_OK) {
        return 0;
    }
    return moved;
}

static const char *lessons_sqlite_name(void *native, apr_pool_t *p)
{
    const char *file = native ? sqlite3_db_filename(native, "main") : NULL;

    return apr_psprintf(p, "SQLite database %s",
                        file && *file ? file : "(in memory)");
}

/* The directory of file (where SQLite writes its journal) in buf: "/"
 * or "." where the name says no more; NULL when it does not fit.
 */
#define LESSONS_SQLITE_DIR_MAX 4096

static const char *lessons_sqlite_dir(const char *file, char *buf,
                                      apr_size_t size)
{
    const char *slash = strrchr(file, '/');
    apr_size_t n = slash ? (slash == file ? 1 : (apr_size_t)(slash - file))
                         : 0;

    if (n + 2 > size) {
        return NULL;
    }
    if (n) {
        memcpy(buf, file, n);
    }
    else {
        buf[n++] = '.';
    }
    buf[n] = '\0';
    return buf;
}

/* Which permission the server's user lacks on the file or its directory
 * (SQLite writes its journal beside the file), if any.
 */
static const char *lessons_sqlite_permission(apr_pool_t *p, const char *file)
{
    char buf[LESSONS_SQLITE_DIR_MAX];
    const char *dir = lessons_sqlite_dir(file, buf, sizeof(buf));

    if (access(file, F_OK) != 0) {
        return apr_psprintf(p, "the file %s does not exist (load the "
                            "schema to create it)", file);
    }
    if (access(file, R_OK | W_OK) != 0) {
        return apr_psprintf(p, "the server's user lacks read and write "
                            "permission on the file %s", file);
    }
    if (dir && access(dir, W_OK | X_OK) != 0) {
        return apr_psprintf(p, "the server's user lacks write permission "
                            "on the directory %s, where SQLite makes its "
                            "journal", dir);
    }
    return NULL;
}

static const char *lessons_sqlite_unwritable(void *native, apr_pool_t *p)
{
    const char *file = native ? sqlite3_db_filename(native, "main") : NULL;

    if (!file || !*file) {
        return NULL;
    }
    if (sqlite3_db_readonly(native, "main") == 1) {
        return apr_psprintf(p, "this connection has the file %s open "
                            "read-only", file);
    }
    return lessons_sqlite_permission(p, file);
}

/* A connection opened while the file was read-only to the server's
 * user stays read-only after the admin fixes the permissions (SQLite
 * decides once, at open): the file's name to open it again once the
 * file and its directory (the journal's) can be written.  No allocation:
 * the directory's name in a buffer on the stack.
 */
static const char *lessons_sqlite_reopen(void *native)
{
    const char *file = native ? sqlite3_db_filename(native, "main") : NULL;
    char buf[LESSONS_SQLITE_DIR_MAX];
    const char *dir;

    if (!file || !*file || sqlite3_db_readonly(native, "main") != 1
        || access(file, R_OK | W_OK) != 0) {
        return NULL;
    }
    dir = lessons_sqlite_dir(file, buf, sizeof(buf));
    return dir && access(dir, W_OK | X_OK) == 0 ? file : NULL;
}

static const char *lessons_sqlite_advice(void *native, apr_pool_t *p,
                                         lessons_db_fault_e fault)
{
    const char *file = native ? sqlite3_db_filename(native, "main") : NULL;

    switch (fault) {
    case LESSONS_DB_NO_SCHEMA:
        /* A database from before ETags lacks lessons.version and the
         * catalog tables: the same advice, and the upgrade file.
         */
        return "load sql/schema.sqlite.sql into it; one made before ETags "
               "needs sql/upgrade-etags.sqlite.sql first";
    case LESSONS_DB_NO_KEYS:
        return "load sql/upgrade-idempotency.sqlite.sql into it (loading "
               "sql/schema.sqlite.sql again does the same), then apachectl "
               "graceful";
    case LESSONS_DB_MOVED:
        return "the file was deleted or replaced while the server ran; "
               "writes are refused until the server restarts";
    case LESSONS_DB_READONLY:
    case LESSONS_DB_UNAVAILABLE:
        return file && *file ? lessons_sqlite_permission(p, file) : NULL;
    default:
        return NULL;
    }
}

const lessons_engine_t lessons_engine_sqlite3 = {
    "sqlite3",
    "BEGIN IMMEDIATE",              /* the write lock up front */
    1,                              /* one writer: the file's lock */
    0,
    1,                              /* a statement under apr_dbd's
                                     * process-wide lock: sharing it
                                     * saves CPU (make bench) */
    0,                              /* no data-modifying WITH; a write's
                                     * read-back is in-process too */
    NULL,
    lessons_sqlite_backend,
    NULL,
    lessons_sqlite_tune,
    lessons_sqlite_connected,
    /* The schema cookie: sqlite3's .restore (the backup API) sets it one
     * past the database's own, whatever the backup's was.  Read once per
     * connection, not in every statement (the pragma's table form
     * prepares a statement of its own each time: a sixth of a catalogue
     * read's instructions): a cookie that moves makes every statement
     * prepared before it fail with SQLITE_SCHEMA (LESSONS_DB_STALE),
     * and the connection is prepared, and its cookie read, again.
     */
    "PRAGMA schema_version",
    "epoch",
    lessons_sqlite_fault,
    lessons_sqlite_moved,
    lessons_sqlite_name,
    lessons_sqlite_advice,
    NULL,                           /* writers take turns: no claim */
    NULL,                           /* no read leases */
    NULL,
    NULL,
    NULL,                           /* no socket */
    lessons_sqlite_unwritable,
    lessons_sqlite_reopen
};
