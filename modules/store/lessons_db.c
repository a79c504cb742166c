/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_db.c: per-connection readiness and fault classification, the
 * same for every engine: the engine (lessons_engine.h) answers what
 * apr_dbd cannot, through the native handle: which backend this is (it
 * changes when the driver reconnects underneath), the session settings
 * a new backend needs, and what a failed statement met.
 */
#include <string.h>

#include "apr_lib.h"
#include "apr_strings.h"

#include "store/lessons_db.h"

#define LESSONS_CONN_KEY "lessons_db_conn"

/* An engine's identity: at most this many hex digits. */
#define LESSONS_IDENTITY_MAX 32

/* One connection's state, in a pool as long-lived as the connection. */
typedef struct {
    long backend;               /* the engine's backend id; 0: nothing
                                 * prepared yet */
    apr_pool_t *pool;           /* this backend's statements */
    apr_hash_t *prepared;       /* label -> apr_dbd_prepared_t * */
    long timeout_ms;            /* session bound applied (0: none yet) */
    unsigned int generation;    /* makes every prepare's names new */
    const char *identity;       /* this backend's history (identity_sql) */
    unsigned int tries[3];      /* statements prepared apart (or tried)
                                 * on this backend, by lessons_apart_e:
                                 * each try's names are new */
    apr_dbd_t *own;             /* opened by the module in place of the
                                 * pooled handle, which was stuck
                                 * read-only (lessons_db_reopen) */
} lessons_conn_t;

/* Statements prepared apart from the others, when first needed. */
typedef enum {
    LESSONS_APART_KEYS = 0,     /* Idempotency-Key's */
    LESSONS_APART_BATCHES,      /* the shared writes' */
    LESSONS_APART_LEASES        /* the read leases' */
} lessons_apart_e;

static void *lessons_db_native(const lessons_db_t *db)
{
    return db && db->driver && db->handle
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

/* The engine's session settings: every statement and lock wait of this
 * backend bounded, so a locked table answers within the bound and the
 * statement, cancelled by the server, can never commit after we have
 * answered.
 */
static lessons_db_fault_e lessons_db_session(lessons_db_t *db,
                                             const lessons_engine_t *engine,
                                             lessons_conn_t *conn,
                                             apr_pool_t *p, long timeout_ms,
                                             const char **err)
{
    int nrows = 0;
    int rv = apr_dbd_query(db->driver, db->handle, &nrows,
                           engine->session_sql(p, timeout_ms));

    if (rv != 0) {
        *err = lessons_db_message(db, p, rv, "setting the session's "
                                  "statement and lock timeouts");
        return lessons_db_fault(db, NULL, *err);
    }
    conn->timeout_ms = timeout_ms;
    return LESSONS_DB_OK;
}

static lessons_db_fault_e lessons_db_prepare(lessons_db_t *db,
                                             const lessons_engine_t *engine,
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
                              engine->named_statements
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

/* The history of the server this backend belongs to, read once per
 * backend: a new backend may be another server (a promoted standby).
 */
static lessons_db_fault_e lessons_db_identity(lessons_db_t *db,
                                              const lessons_engine_t *engine,
                                              lessons_conn_t *conn,
                                              const char **err)
{
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    const char *v = NULL;
    char *id;
    apr_size_t i, n = 0;
    int rv;

    conn->identity = NULL;
    rv = apr_dbd_select(db->driver, conn->pool, db->handle, &res,
                        engine->identity_sql, 1);
    if (rv != 0) {
        *err = lessons_db_message(db, conn->pool, rv, "reading the "
                                  "server's identity");
        return lessons_db_fault(db, NULL, *err);
    }
    if (apr_dbd_get_row(db->driver, conn->pool, res, &row, 1) == 0 && row) {
        v = apr_dbd_get_entry(db->driver, row, 0);
    }
    for (; v && v[n] && n <= LESSONS_IDENTITY_MAX; n++) {
        if (!apr_isxdigit(v[n])) {
            break;
        }
    }
    if (!v || n == 0 || n > LESSONS_IDENTITY_MAX || v[n]) {
        *err = "reading the server's identity: not one value of at most "
               "32 hex digits";
        return LESSONS_DB_ERROR;
    }
    id = apr_pstrmemdup(conn->pool, v, n);
    for (i = 0; i < n; i++) {
        id[i] = apr_tolower(id[i]);
    }
    conn->identity = id;
    return LESSONS_DB_OK;
}

static apr_status_t lessons_db_close_own(void *data)
{
    lessons_db_t *own = data;

    return apr_dbd_close(own->driver, own->handle);
}

void lessons_db_connected(const lessons_db_t *db)
{
    const lessons_engine_t *engine = db ? lessons_engine_of(db->driver)
                                        : NULL;
    void *native = lessons_db_native(db);

    if (engine && engine->connected && native) {
        engine->connected(native);
    }
}

/* A connection that opened its database read-only stays so after the
 * admin fixes the file (SQLite decides at open), and mod_dbd has no way
 * to drop it: apr_dbd_sqlite3's connection check passes while it has a
 * handle.  Once the engine says the database can be written, the module
 * opens it again itself, in the connection's pool, and uses that handle
 * for its statements from then on.  mod_dbd's handle (other modules'
 * statements, DBDPrepareSQL's) stays as it was until mod_dbd ends the
 * connection.  The new one gets what mod_dbd gives each connection it
 * makes: the engine's settings for a new connection, then DBDInitSQL's
 * statements in order, up to the first that fails, whose result is not
 * looked at (apr_dbd_sqlite3 counts a PRAGMA's row as a failure, though
 * the PRAGMA took effect).
 */
static void lessons_db_reopen(lessons_db_t *db,
                              const lessons_engine_t *engine,
                              lessons_conn_t *conn, apr_pool_t *conn_pool)
{
    const char *params;
    lessons_db_t *own;
    apr_pool_t *p;
    apr_dbd_t *handle = NULL;
    const char *err = NULL;
    int i, rows;

    if (conn->own) {
        db->handle = conn->own;
        return;
    }
    params = engine->reopen ? engine->reopen(lessons_db_native(db)) : NULL;
    if (!params || apr_pool_create(&p, conn_pool) != APR_SUCCESS) {
        return;
    }
    if (apr_dbd_open_ex(db->driver, p, params, &handle, &err) != APR_SUCCESS
        || !handle) {
        apr_pool_destroy(p);        /* asked again by the next request */
        return;
    }
    own = apr_pcalloc(p, sizeof(*own));
    own->driver = db->driver;
    own->handle = handle;
    apr_pool_cleanup_register(p, own, lessons_db_close_own,
                              apr_pool_cleanup_null);
    lessons_db_connected(own);
    for (i = 0; db->init_sql && i < db->init_sql->nelts; i++) {
        const char *sql = APR_ARRAY_IDX(db->init_sql, i, const char *);

        if (!sql || apr_dbd_query(db->driver, handle, &rows, sql) != 0) {
            break;
        }
    }
    conn->own = handle;
    conn->backend = 0;              /* prepare everything on it */
    db->handle = handle;
}

/* Where writers take turns on one file (SQLite), a new connection can
 * find it locked for a moment: the last connection of a generation that
 * a graceful restart ended checkpoints the WAL as it closes, and the
 * first one after recovers it, each under an exclusive lock.  Preparing
 * is tried again, a little later each time, for at most half the bound;
 * a lock held longer is answered as before.
 */
static lessons_db_fault_e lessons_db_prepare_patiently(
    lessons_db_t *db, const lessons_engine_t *engine, lessons_conn_t *conn,
    apr_pool_t *conn_pool, long timeout_ms, const char **err)
{
    lessons_db_fault_e rc = lessons_db_prepare(db, engine, conn, conn_pool,
                                               err);
    long nap = 5, slept = 0;

    while (rc == LESSONS_DB_TIMEOUT && engine->one_writer
           && slept + nap <= timeout_ms / 2) {
        apr_sleep(apr_time_from_msec(nap));
        slept += nap;
        nap *= 2;
        rc = lessons_db_prepare(db, engine, conn, conn_pool, err);
    }
    return rc;
}

lessons_db_fault_e lessons_db_ready(lessons_db_t *db, apr_pool_t *conn_pool,
                                    long timeout_ms, const char **err)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);
    lessons_conn_t *conn = lessons_db_conn(conn_pool);
    void *native;
    long backend;
    lessons_db_fault_e rc;

    if (!engine) {
        *err = apr_psprintf(conn_pool, "this build of mod_lessons has no "
                            "engine for the apr_dbd driver %s",
                            db->driver ? apr_dbd_name(db->driver) : "(none)");
        return LESSONS_DB_ERROR;
    }
    lessons_db_reopen(db, engine, conn, conn_pool);
    native = lessons_db_native(db);
    backend = engine->backend(native, err);
    if (!backend) {
        return LESSONS_DB_UNAVAILABLE;
    }
    if (conn->backend != backend) {
        conn->backend = 0;
        conn->timeout_ms = 0;
        conn->prepared = NULL;
    }
    /* The bound first: preparing takes locks too, and waits on a locked
     * table like any statement.
     */
    if (engine->session_sql && conn->timeout_ms != timeout_ms) {
        rc = lessons_db_session(db, engine, conn, conn_pool, timeout_ms, err);
        if (rc != LESSONS_DB_OK) {
            return rc;
        }
    }
    if (!conn->prepared) {
        if (engine->tune) {
            engine->tune(native);
        }
        rc = lessons_db_prepare_patiently(db, engine, conn, conn_pool,
                                          timeout_ms, err);
        if (rc == LESSONS_DB_OK && engine->identity_sql) {
            rc = lessons_db_identity(db, engine, conn, err);
        }
        if (rc != LESSONS_DB_OK) {
            conn->prepared = NULL;
            db->prepared = NULL;
            return rc;
        }
        conn->backend = backend;
    }
    db->prepared = conn->prepared;
    db->identity = conn->identity;
    return LESSONS_DB_OK;
}

/* Statements prepared on a ready connection apart from the others, the
 * first time they are needed: a pool of each try's own, so that a try
 * that fails costs the connection nothing; names of their own (the
 * generation, which, and the try), since a try that failed half-way may
 * have left some on the server.
 */
typedef lessons_store_e (*lessons_db_prepare_fn)(lessons_db_t *db,
                                                 apr_pool_t *p,
                                                 const char *suffix,
                                                 const char **err);

static lessons_db_fault_e lessons_db_ready_apart(lessons_db_t *db,
                                                 apr_pool_t *conn_pool,
                                                 apr_pool_t *rp,
                                                 lessons_apart_e which,
                                                 lessons_db_prepare_fn fn,
                                                 const char **err)
{
    static const char *const what[] = { "Idempotency-Key",
                                        "shared writes", "read leases" };
    static const char *const tag[] = { "k", "b", "l" };
    const lessons_engine_t *engine = lessons_engine_of(db->driver);
    lessons_conn_t *conn = lessons_db_conn(conn_pool);
    apr_pool_t *p;

    if (!engine || !conn->pool || db->prepared != conn->prepared) {
        *err = apr_pstrcat(rp, what[which], ": the connection is not ready",
                           NULL);
        return LESSONS_DB_ERROR;
    }
    if (apr_pool_create(&p, conn->pool) != APR_SUCCESS) {
        *err = "out of memory preparing statements";
        return LESSONS_DB_ERROR;
    }
    conn->tries[which]++;
    if (fn(db, p, engine->named_statements
                  ? apr_psprintf(p, "%u_%s%u", conn->generation, tag[which],
                                 conn->tries[which])
                  : NULL, err) != LESSONS_STORE_OK) {
        *err = apr_pstrdup(rp, *err);
        apr_pool_destroy(p);
        return lessons_db_fault(db, NULL, *err);
    }
    return LESSONS_DB_OK;
}

lessons_db_fault_e lessons_db_ready_idempotency(lessons_db_t *db,
                                                apr_pool_t *conn_pool,
                                                apr_pool_t *rp,
                                                const char **err)
{
    lessons_db_fault_e fault;

    if (lessons_store_idempotency_ready(db)) {
        return LESSONS_DB_OK;
    }
    fault = lessons_db_ready_apart(db, conn_pool, rp, LESSONS_APART_KEYS,
                                   lessons_store_prepare_idempotency, err);
    return fault == LESSONS_DB_NO_SCHEMA ? LESSONS_DB_NO_KEYS : fault;
}

lessons_db_fault_e lessons_db_ready_batches(lessons_db_t *db,
                                            apr_pool_t *conn_pool,
                                            apr_pool_t *rp,
                                            const char **err)
{
    if (lessons_store_batches_ready(db)) {
        return LESSONS_DB_OK;
    }
    return lessons_db_ready_apart(db, conn_pool, rp, LESSONS_APART_BATCHES,
                                  lessons_store_prepare_batches, err);
}

lessons_db_fault_e lessons_db_ready_leases(lessons_db_t *db,
                                           apr_pool_t *conn_pool,
                                           apr_pool_t *rp, const char **err)
{
    if (lessons_store_leases_ready(db)) {
        return LESSONS_DB_OK;
    }
    return lessons_db_ready_apart(db, conn_pool, rp, LESSONS_APART_LEASES,
                                  lessons_store_prepare_leases, err);
}

lessons_db_fault_e lessons_db_fault(const lessons_db_t *db,
                                    apr_pool_t *conn_pool, const char *err)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);
    lessons_db_fault_e fault;
    int stale = 0;

    if (!engine) {
        return LESSONS_DB_ERROR;
    }
    fault = engine->fault(lessons_db_native(db), err, &stale);
    if (conn_pool && stale) {
        lessons_db_conn(conn_pool)->backend = 0;
    }
    return fault;
}

const char *lessons_db_unwritable(const lessons_db_t *db, apr_pool_t *p)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);

    return engine && engine->unwritable
           ? engine->unwritable(lessons_db_native(db), p) : NULL;
}

int lessons_db_socket(const lessons_db_t *db)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);

    return engine && engine->socket ? engine->socket(lessons_db_native(db))
                                    : -1;
}

int lessons_db_moved(const lessons_db_t *db)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);

    return engine && engine->moved
           ? engine->moved(lessons_db_native(db)) : 0;
}

const char *lessons_db_name(const lessons_db_t *db, apr_pool_t *p)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);

    return engine ? engine->name(lessons_db_native(db), p) : "the database";
}

const char *lessons_db_advice(const lessons_db_t *db, apr_pool_t *p,
                              lessons_db_fault_e fault)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);

    return engine && engine->advice
           ? engine->advice(lessons_db_native(db), p, fault) : NULL;
}
