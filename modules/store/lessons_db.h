/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_db.h: a pooled connection made ready for the module, and the
 * faults a statement can meet, told apart.  The per-connection state
 * lives in a pool that lasts as long as the connection (mod_dbd's
 * ap_dbd_t->pool), so it needs no lock and dies with the connection.
 *
 * Why not prepare at config time through mod_dbd: apr_dbd_pgsql's
 * connection check reconnects a broken connection (PQreset) and reports
 * success, and the statements and session settings made on the old
 * backend are gone.  Preparing here, per backend, survives database
 * restarts, and a missing schema is an error of ours to report rather
 * than a connection mod_dbd silently drops.
 */
#ifndef LESSONS_DB_H
#define LESSONS_DB_H

#include "apr_pools.h"
#include "store/lessons_engine.h"
#include "store/lessons_store.h"

/* Make db (driver and handle set) ready for a request.  On the
 * connection's first use, or when PostgreSQL has reconnected underneath
 * (a new backend), apply the session settings and prepare every
 * statement; db->prepared is set either way.  timeout_ms bounds each
 * statement where the engine has session settings for it (PostgreSQL's
 * statement_timeout and lock_timeout; SQLite's own waits are short and
 * bounded by the driver).  conn_pool must live
 * as long as the connection.  On failure *err says why.
 *
 * A SQLite connection that opened its file read-only is opened again
 * once the file can be written (lessons_engine_t's reopen), and
 * db->init_sql is run on the new one as mod_dbd runs DBDInitSQL.
 */
lessons_db_fault_e lessons_db_ready(lessons_db_t *db, apr_pool_t *conn_pool,
                                    long timeout_ms, const char **err);

/* mod_dbd has just made db's connection (its post_connect hook, before
 * DBDInitSQL runs): the engine's settings for the first statements
 * (lessons_engine_t's connected).
 */
void lessons_db_connected(const lessons_db_t *db);

/* Make db (ready, as lessons_db_ready left it) ready for a create with
 * Idempotency-Key: its statements are prepared on the connection the
 * first time one asks, and tried again on each ask after a failure, so
 * that a database without their table serves every other request, and
 * serves these too once the table is there.  NO_KEYS: the table is
 * missing.  The connection's other statements are untouched either way;
 * *err is made in rp (the request's pool: a try costs the connection
 * nothing).
 */
lessons_db_fault_e lessons_db_ready_idempotency(lessons_db_t *db,
                                                apr_pool_t *conn_pool,
                                                apr_pool_t *rp,
                                                const char **err);

/* The statements of shared writes (lessons_store_prepare_batches), the
 * same way: prepared the first time a connection runs a share of
 * several, tried again after a failure.
 */
lessons_db_fault_e lessons_db_ready_batches(lessons_db_t *db,
                                            apr_pool_t *conn_pool,
                                            apr_pool_t *rp,
                                            const char **err);

/* The read leases' statements (lessons_statements_leases), the same
 * way: NO_SCHEMA when the database has no lessons_leases yet.
 */
lessons_db_fault_e lessons_db_ready_leases(lessons_db_t *db,
                                           apr_pool_t *conn_pool,
                                           apr_pool_t *rp, const char **err);

/* What kind of fault a failed statement met (err is the store's message,
 * which carries the driver's).  A fault that leaves the prepared
 * statements unusable makes the next lessons_db_ready prepare again.
 */
lessons_db_fault_e lessons_db_fault(const lessons_db_t *db,
                                    apr_pool_t *conn_pool, const char *err);

/* Why the database reads but cannot be written now, or NULL (the
 * health check's "warn"; lessons_engine.h).
 */
const char *lessons_db_unwritable(const lessons_db_t *db, apr_pool_t *p);

/* The connection's socket (lessons_watch.h), or -1 (SQLite). */
int lessons_db_socket(const lessons_db_t *db);

/* Has the database file been deleted or replaced since it was opened
 * (SQLite)?  Writes into an unlinked file would be acknowledged and
 * lost.  0 for engines without a file.
 */
int lessons_db_moved(const lessons_db_t *db);

/* The database, for log lines: the SQLite file name, or the PostgreSQL
 * host, port and database name.
 */
const char *lessons_db_name(const lessons_db_t *db, apr_pool_t *p);

/* What an admin should read about a fault, beyond the driver's message
 * (for READONLY on SQLite: which of file and directory is not writable).
 */
const char *lessons_db_advice(const lessons_db_t *db, apr_pool_t *p,
                              lessons_db_fault_e fault);

#endif /* LESSONS_DB_H */
