/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_engine_pgsql.c: PostgreSQL through apr_dbd_pgsql.  Its
 * connection check reconnects a broken connection (PQreset) and reports
 * success: the backend's PID tells that it happened.  Statements and
 * lock waits are bounded by the session (statement_timeout,
 * lock_timeout), so a statement we stopped waiting for never commits
 * later; the session plans each prepared statement once
 * (plan_cache_mode).
 *
 * Faults: apr_dbd_pgsql frees the result before we see it, and with it
 * the SQLSTATE, so the message is all there is.  lessons_pgsql_fault is
 * the one place that reads PostgreSQL's message texts (the server's and
 * libpq's English wording, which the C locale of httpd's children
 * keeps).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include <libpq-fe.h>

#include "apr_env.h"
#include "apr_strings.h"

#include "store/lessons_engine.h"

/* libpq's connect has no limit of its own: bound it (and PQreset's)
 * through PGCONNECT_TIMEOUT (whole seconds, at least 1), unless the
 * admin set it.  Other modules' PostgreSQL connections in this server
 * get it too.
 */
static void lessons_pgsql_process_init(apr_pool_t *p, long timeout_ms)
{
    char *set = NULL;

    if (apr_env_get(&set, "PGCONNECT_TIMEOUT", p) != APR_SUCCESS
        || !set || !*set) {
        apr_env_set("PGCONNECT_TIMEOUT",
                    apr_ltoa(p, timeout_ms > 1000 ? (timeout_ms + 999) / 1000
                                                  : 1), p);
    }
}

/* Whether the server has hung up on an idle connection.  libpq keeps
 * saying CONNECTION_OK until a statement fails on it, so after a
 * database restart or a failover every pooled connection would cost one
 * request a 503.  Idle, the server has nothing to say but a rare
 * ParameterStatus or its last words ("terminating connection ...")
 * before it closes: read what is there (libpq's socket never blocks),
 * twice, so that a close right behind those words is seen too.  One
 * poll of no wait on each request's connection.
 */
static int lessons_pgsql_hung_up(PGconn *conn)
{
    struct pollfd pfd;
    int i;

    for (i = 0; i < 2; i++) {
        pfd.fd = PQsocket(conn);
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (pfd.fd < 0 || poll(&pfd, 1, 0) <= 0) {
            break;
        }
        if (!PQconsumeInput(conn)) {
            break;
        }
    }
    return PQstatus(conn) != CONNECTION_OK;
}

/* A hung-up connection is made again here (PQreset, bounded by
 * PGCONNECT_TIMEOUT), as mod_dbd's check would on its next use: the new
 * backend's PID makes lessons_db prepare afresh.
 */
static long lessons_pgsql_backend(void *native, const char **err)
{
    if (native && lessons_pgsql_hung_up(native)) {
        PQreset(native);
    }
    if (!native || PQstatus(native) != CONNECTION_OK) {
        *err = "the connection to PostgreSQL is down";
        return 0;
    }
    return PQbackendPID(native);
}

/* The bound, and generic plans: PostgreSQL plans a prepared statement
 * anew for each execution while a plan for its values looks cheaper than
 * one for any values, and the update's (CASE on which fields were sent)
 * always does.  Each of our statements finds its rows by a key or an
 * index whatever the values, so one plan serves them all: pgbench ran
 * the update at 6,300 a second with a plan per execution and 9,300 with
 * one (-M prepared -c32), and the API's updates went from 4,200-4,600 to
 * 5,700 a second.  Creates and reads did not change.
 */
static const char *lessons_pgsql_session_sql(apr_pool_t *p, long timeout_ms)
{
    return apr_psprintf(p, "SET statement_timeout = %ld; "
                        "SET lock_timeout = %ld; "
                        "SET plan_cache_mode = force_generic_plan",
                        timeout_ms, timeout_ms);
}

static lessons_db_fault_e lessons_pgsql_fault(void *native, const char *err,
                                              int *stale)
{
    lessons_db_fault_e fault = LESSONS_DB_ERROR;

    if ((native && PQstatus(native) != CONNECTION_OK)
        || lessons_engine_says(err, "server closed the connection")
        || lessons_engine_says(err, "terminating connection")
        || lessons_engine_says(err, "no connection to the server")
        || lessons_engine_says(err, "the database system is")) {
        fault = LESSONS_DB_UNAVAILABLE;
    }
    else if (lessons_engine_says(err, "statement timeout")
             || lessons_engine_says(err, "lock timeout")
             || lessons_engine_says(err, "canceling statement")) {
        fault = LESSONS_DB_TIMEOUT;
    }
    else if (lessons_engine_says(err, "read-only transaction")) {
        fault = LESSONS_DB_READONLY;
    }
    else if (lessons_engine_says(err, "No space left on device")
             || lessons_engine_says(err, "could not extend file")) {
        fault = LESSONS_DB_FULL;
    }
    else if ((lessons_engine_says(err, "relation \"")
              || lessons_engine_says(err, "column \""))
             && lessons_engine_says(err, "does not exist")) {
        fault = LESSONS_DB_NO_SCHEMA;
    }
    /* Statements the server no longer knows: prepare afresh. */
    if (stale) {
        *stale = lessons_engine_says(err, "prepared statement");
    }
    return fault;
}

static const char *lessons_pgsql_name(void *native, apr_pool_t *p)
{
    if (!native) {
        return "PostgreSQL database";
    }
    return apr_psprintf(p, "PostgreSQL database %s on %s:%s",
                        PQdb(native) ? PQdb(native) : "?",
                        PQhost(native) ? PQhost(native) : "?",
                        PQport(native) ? PQport(native) : "?");
}

static const char *lessons_pgsql_advice(void *native, apr_pool_t *p,
                                        lessons_db_fault_e fault)
{
    (void)native;
    (void)p;
    switch (fault) {
    case LESSONS_DB_NO_SCHEMA:
        return "load sql/schema.pgsql.sql into it";
    case LESSONS_DB_NO_KEYS:
        return "load sql/upgrade-idempotency.pgsql.sql into it (loading "
               "sql/schema.pgsql.sql again does the same)";
    default:
        return NULL;
    }
}

/* The database's OID (a database dropped and restored from a dump gets a
 * new one) and the server's current timeline (a promoted standby starts
 * a new one; asynchronous replication may have lost the last commits, so
 * the counters of lessons_catalog can repeat with other content).  The
 * timeline of the WAL file now being written is the promotion's at once,
 * where pg_control_checkpoint() waits for the next checkpoint.  Every
 * role may call these.
 */
#define LESSONS_PGSQL_IDENTITY_SQL \
    "SELECT lpad(to_hex(d.oid::bigint), 8, '0') || CASE WHEN " \
    "pg_is_in_recovery() THEN '00000000' ELSE " \
    "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END " \
    "FROM pg_database d WHERE d.datname = current_database()"

/* The row's xmin: the transaction that wrote it, which only a restore
 * does (pg_restore, psql of a dump, a copy of the table's data): its
 * transaction id is newer than any before it, so the epoch is too.
 */
#define LESSONS_PGSQL_EPOCH_SQL \
    "epoch || lpad(to_hex(xmin::text::bigint), 8, '0')"

/* A transaction-level advisory lock on the key's number, tried without
 * waiting: a second request with the key while the first is in flight
 * is told so (409) instead of waiting on the unique index behind it.
 * Let go at COMMIT or ROLLBACK, whatever ends the transaction.
 */
#define LESSONS_PGSQL_CLAIM_SQL "SELECT pg_try_advisory_xact_lock(%lld)"

/* Read leases: a connection of the holder's own, opened with the
 * parameters of a pooled one (PQconninfo gives what the pool's was made
 * with, the password and a list of hosts included), so that the admin
 * writes them once, in DBDParams.  Quoted as libpq reads them.
 */
static const char *lessons_pgsql_conninfo(void *native, apr_pool_t *p)
{
    PQconninfoOption *opts = native ? PQconninfo(native) : NULL, *o;
    const char *out = "";

    if (!opts) {
        return NULL;
    }
    for (o = opts; o->keyword; o++) {
        const char *v = o->val;
        char *q, *to;

        if (!v || !*v) {
            continue;
        }
        to = q = apr_palloc(p, 2 * strlen(v) + 1);
        for (; *v; v++) {
            if (*v == '\\' || *v == '\'') {
                *to++ = '\\';
            }
            *to++ = *v;
        }
        *to = '\0';
        out = apr_pstrcat(p, out, *out ? " " : "", o->keyword, "='", q, "'",
                          NULL);
    }
    PQconninfoFree(opts);
    return out;
}

static int lessons_pgsql_listen_wait(void *native, int fd,
                                     apr_interval_time_t timeout)
{
    struct pollfd pfd[2];
    int n = 1, rv;

    if (!native || PQstatus(native) != CONNECTION_OK
        || PQsocket(native) < 0) {
        return -1;
    }
    pfd[0].fd = PQsocket(native);
    pfd[0].events = POLLIN;
    pfd[0].revents = 0;
    if (fd >= 0) {
        pfd[1].fd = fd;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        n = 2;
    }
    rv = poll(pfd, n, timeout > 0 ? (int)((timeout + 999) / 1000) : 0);
    if (rv < 0) {
        return errno == EINTR ? 1 : -1;
    }
    return rv > 0;
}

static int lessons_pgsql_notification(void *native, apr_pool_t *p,
                                      const char **channel,
                                      const char **payload)
{
    PGnotify *n;

    if (!native || !PQconsumeInput(native)
        || PQstatus(native) != CONNECTION_OK) {
        return -1;
    }
    n = PQnotifies(native);
    if (!n) {
        return 0;
    }
    *channel = apr_pstrdup(p, n->relname ? n->relname : "");
    *payload = apr_pstrdup(p, n->extra ? n->extra : "");
    PQfreemem(n);
    return 1;
}

static int lessons_pgsql_socket(void *native)
{
    return native ? PQsocket(native) : -1;
}

const lessons_engine_t lessons_engine_pgsql = {
    "pgsql",
    "BEGIN",
    0,                              /* row locks: writers run side by side */
    1,                              /* server-side statement names */
    1,                              /* every read a round trip */
    1,                              /* and every write: one statement */
    lessons_pgsql_process_init,
    lessons_pgsql_backend,
    lessons_pgsql_session_sql,
    NULL,
    NULL,                           /* a statement waits on a lock anyway */
    LESSONS_PGSQL_IDENTITY_SQL,
    LESSONS_PGSQL_EPOCH_SQL,
    lessons_pgsql_fault,
    NULL,
    lessons_pgsql_name,
    lessons_pgsql_advice,
    LESSONS_PGSQL_CLAIM_SQL,
    lessons_pgsql_conninfo,
    lessons_pgsql_listen_wait,
    lessons_pgsql_notification,
    lessons_pgsql_socket,
    NULL,                           /* a read-only server refuses the
                                     * connection (read-write) */
    NULL                            /* read-only is the server's state,
                                     * not the connection's */
};
