/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_engine.h: what the module must know of each database engine,
 * in one table of traits that the store (lessons_store.c), the
 * connection's readiness (lessons_db.c) and the pool's glue
 * (mod_lessons_dbd.c) ask.  apr_dbd runs the statements; an engine says
 * only what apr_dbd leaves to its native handle: which backend a pooled
 * connection is, the session settings a new backend needs, how a write
 * transaction begins, whether writers of every process take turns, what
 * fault a failed statement met, and what the process must set before
 * any connection.
 *
 * Adding an engine: a lessons_engine_NAME.c that defines
 * lessons_engine_NAME, its row in lessons_engine.c, its tests in
 * t/unit/test_engine.c, and its name in the Makefile's ENGINES.
 */
#ifndef LESSONS_ENGINE_H
#define LESSONS_ENGINE_H

#include "apr_pools.h"
#include "apr_dbd.h"

typedef enum {
    LESSONS_DB_OK = 0,
    LESSONS_DB_UNAVAILABLE,         /* down, unreachable, connection lost */
    LESSONS_DB_TIMEOUT,             /* waited too long: a lock, a busy db */
    LESSONS_DB_READONLY,            /* file, directory or server read-only */
    LESSONS_DB_FULL,                /* disk full */
    LESSONS_DB_MOVED,               /* SQLite file deleted or replaced */
    LESSONS_DB_NO_SCHEMA,           /* our tables are missing */
    LESSONS_DB_STALE,               /* the schema changed under the
                                     * connection's statements (a restore,
                                     * a migration): prepared afresh for
                                     * the next request */
    LESSONS_DB_NO_KEYS,             /* the table of Idempotency-Key is
                                     * missing: a database made before it
                                     * (everything else is served) */
    LESSONS_DB_ERROR                /* anything else */
} lessons_db_fault_e;

/* Every function gets apr_dbd's native handle (apr_dbd_native_handle):
 * a sqlite3 *, a PGconn *.
 */
typedef struct {
    const char *driver;             /* apr_dbd's name: "sqlite3", "pgsql" */
    const char *begin_sql;          /* how a write transaction begins */
    int one_writer;                 /* writers of every process take turns
                                     * (mod_lessons' writers' lock) */
    int named_statements;           /* prepared statements have names on
                                     * the server: each prepare of a
                                     * backend needs names of its own */
    int share_reads;                /* the threads of a process share the
                                     * catalog version's read
                                     * (lessons_flight): a round trip to a
                                     * server, or a statement under
                                     * apr_dbd's lock */
    int write_returns;              /* a round trip too: a write and the
                                     * lesson it stored come back from one
                                     * statement, its own transaction
                                     * (lessons_statements_returning) */

    /* Once at start-up, before any thread or connection: bound what the
     * driver leaves unbounded (connecting) by timeout_ms, unless the
     * admin already did (NULL: nothing to do).
     */
    void (*process_init)(apr_pool_t *p, long timeout_ms);

    /* Which backend the connection is now; another value than last time
     * means the driver reconnected underneath, and statements and
     * settings are gone.  0 when the connection is down (*err says so).
     */
    long (*backend)(void *native, const char **err);

    /* Readiness of a new backend: session settings as one SQL text for
     * a statement and lock bound of timeout_ms (NULL: none), and a tune
     * of the handle itself (NULL: none).
     */
    const char *(*session_sql)(apr_pool_t *p, long timeout_ms);
    void (*tune)(void *native);

    /* A connection just made, before anything runs on it (mod_dbd's
     * DBDInitSQL first, which mod_dbd runs once and whose failure it
     * neither logs nor acts on): let its statements wait out a lock
     * another connection holds for a moment (NULL: nothing to do).
     */
    void (*connected)(void *native);

    /* Once per backend: one row, one column of hex digits that changes
     * when the server's history does (a promoted standby, a database
     * re-created from a dump), though the lessons_database row, copied
     * along, does not.  It is appended to the epoch of every ETag and
     * catalog version read on that backend (NULL: nothing beyond the
     * epoch row).
     */
    const char *identity_sql;

    /* The database's epoch, read on every statement that carries one:
     * an SQL expression over lessons_database's one row that gives hex
     * digits, its epoch column and what a restore in place changes (the
     * row and the counters come back from the backup as they were, so
     * the counters could reach the same numbers with other content).
     */
    const char *epoch_sql;

    /* What fault a failed statement met; err is the store's message,
     * which carries the driver's.  *stale is set when the backend's
     * prepared statements can no longer be used (prepare afresh).
     */
    lessons_db_fault_e (*fault)(void *native, const char *err, int *stale);

    /* The file was deleted or replaced while open (NULL: never). */
    int (*moved)(void *native);

    /* The database, for log lines. */
    const char *(*name)(void *native, apr_pool_t *p);

    /* What an admin should read about a fault beyond the driver's words
     * (the schema file to load, a permission missing), or NULL.
     */
    const char *(*advice)(void *native, apr_pool_t *p,
                          lessons_db_fault_e fault);

    /* Where writers run side by side (not one_writer): a statement that
     * claims an Idempotency-Key for the transaction it runs in, without
     * waiting for another transaction that holds it, and keeps it until
     * that ends; %lld is the key's number (lessons_idem_claim_id), the
     * one row's one column true when claimed.  NULL where writers take
     * turns: the key's first request has committed or failed before a
     * second can look.
     */
    const char *claim_sql;

    /* Read leases (docs/scaling.md): what a listening connection of its
     * own needs beyond apr_dbd.  NULL where the engine has none (SQLite:
     * one machine, every process reads the file itself).
     *
     * The parameters that open a connection like this one (apr_dbd's
     * params for the same driver), or NULL.
     */
    const char *(*conninfo)(void *native, apr_pool_t *p);

    /* Wait until the connection has something to read or fd is
     * readable, timeout at most: 1 something came, 0 the time is up, -1
     * the connection is lost.
     */
    int (*listen_wait)(void *native, int fd, apr_interval_time_t timeout);

    /* The next notification the connection received: 1 with *channel
     * and *payload (copied into p), 0 none, -1 the connection is lost.
     */
    int (*notification)(void *native, apr_pool_t *p, const char **channel,
                        const char **payload);

    /* The connection's socket, for the client side of LessonsDBTimeout
     * (lessons_watch.h), or -1; NULL where the engine has none (SQLite:
     * a file, whose waits its busy timeout bounds).
     */
    int (*socket)(void *native);

    /* Why the database reads but cannot be written by this connection
     * now (SQLite: opened read-only, or the file or its directory not
     * writable by the server's user), or NULL; NULL where the engine
     * cannot tell.
     */
    const char *(*unwritable)(void *native, apr_pool_t *p);

    /* The parameters that open this connection's database again,
     * writable, when the connection opened it read-only and it can be
     * written now (SQLite: the file's permissions were fixed), or NULL;
     * allocates nothing (asked before every statement of a connection
     * in that state).  NULL where a connection is never stuck so.
     */
    const char *(*reopen)(void *native);
} lessons_engine_t;

/* The engine of an apr_dbd driver name, or NULL when this build has
 * none for it.
 */
const lessons_engine_t *lessons_engine_find(const char *driver);

/* The engine of an apr_dbd driver, or NULL. */
const lessons_engine_t *lessons_engine_of(const apr_dbd_driver_t *driver);

/* Every engine of this build, ending with NULL (for messages). */
extern const lessons_engine_t *const lessons_engines[];

/* Every engine's process_init, in the order of lessons_engines. */
void lessons_engines_process_init(apr_pool_t *p, long timeout_ms);

/* 1 when err (a driver's message) holds part: the one way left where
 * apr_dbd keeps only the message.
 */
int lessons_engine_says(const char *err, const char *part);

#endif /* LESSONS_ENGINE_H */
