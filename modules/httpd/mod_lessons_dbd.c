/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_dbd.c: a pooled mod_dbd connection, made ready within
 * LessonsDBTimeout, and database faults answered as what they are.
 */

#include <sys/stat.h>

#include "http_main.h"                 /* ap_server_conf */
#include "unixd.h"

#include "httpd/mod_lessons.h"

/* A request's watched socket (lessons_watch.h), in its pool. */
typedef struct {
    lessons_watch_t *watch;
    int slot;                       /* -1: not watched */
} lessons_dbd_watched_t;

/* Stop watching the request's connection: 1 when the watch shut it
 * down, the request having run past LessonsDBTimeout.  Before the
 * connection goes back to mod_dbd's pool, whose next user must find it
 * unwatched.
 */
static int lessons_dbd_disarm(lessons_dbd_watched_t *wd)
{
    int fired = lessons_watch_disarm(wd->watch, wd->slot);

    wd->slot = -1;
    return fired;
}

static int lessons_dbd_unwatch(lessons_ctx *c)
{
    return c->watched ? lessons_dbd_disarm(c->watched) : 0;
}

/* A pre-cleanup of the request's pool (the handler's lessons_ctx is
 * gone by then: the pool holds what it needs): it runs before mod_dbd's
 * release (a plain cleanup) and before lessons_dbd_release (a
 * pre-cleanup registered earlier).
 */
static apr_status_t lessons_dbd_unwatch_cleanup(void *data)
{
    (void)lessons_dbd_disarm(data);
    return APR_SUCCESS;
}

/* Watch the connection's socket until the request's deadline (and a
 * little more: the server's statement_timeout, when the server runs,
 * answers first and leaves the connection usable).
 */
static void lessons_dbd_watch(lessons_ctx *c, lessons_srv_conf *sconf,
                              apr_time_t deadline)
{
    lessons_dbd_watched_t *wd = c->watched;
    int fd = lessons_db_socket(&c->db);

    if (!sconf->watch || fd < 0) {
        return;
    }
    if (wd && wd->slot >= 0) {
        wd->slot = lessons_watch_follow(wd->watch, c->db_pool, wd->slot, fd);
        return;
    }
    if (!wd) {
        wd = apr_palloc(c->r->pool, sizeof(*wd));
        wd->watch = sconf->watch;
        wd->slot = -1;
        apr_pool_pre_cleanup_register(c->r->pool, wd,
                                      lessons_dbd_unwatch_cleanup);
        c->watched = wd;
    }
    wd->slot = lessons_watch_arm(wd->watch, c->db_pool, fd,
                                 deadline + LESSONS_WATCH_GRACE);
}

/* Answer a database fault as what it is: 503 with Retry-After when
 * trying again later can help (down, busy, locked, read-only, full, the
 * file moved, the schema changed), 500 when it cannot (no schema,
 * anything else).  Logged once, with the driver's message; waits that
 * ran out are a warning.
 */
int lessons_dbd_answer(lessons_ctx *c, lessons_db_fault_e fault,
                      const char *err, int wrote)
{
    request_rec *r = c->r;
    const char *name = lessons_db_name(&c->db, r->pool);
    const char *advice = lessons_db_advice(&c->db, r->pool, fault);

    err = err ? err : "unknown error";
    if (lessons_dbd_unwatch(c)) {
        /* Whatever the driver made of its socket shut down under it: a
         * write's outcome is unknown, a read ran out of time.
         */
        fault = wrote ? LESSONS_DB_UNAVAILABLE : LESSONS_DB_TIMEOUT;
        err = apr_psprintf(r->pool, "no answer within LessonsDBTimeout, "
                           "its connection was shut down (a server "
                           "frozen or out of reach): %s", err);
    }
    lessons_count(r, fault == LESSONS_DB_TIMEOUT ? LESSONS_M_DB_TIMEOUTS
                     : LESSONS_M_DB_FAULTS + lessons_fault_of(fault, wrote));
    switch (fault) {
    case LESSONS_DB_TIMEOUT:
        lessons_log_fault(r, APLOG_WARNING, apr_psprintf(r->pool,
            LESSONSLOG(00303) "%s did not answer within %d s (a lock or a "
            "busy database); answered 503: %s", name,
            lessons_db_timeout(ap_get_module_config(
                r->server->module_config, &lessons_module)), err));
        break;
    case LESSONS_DB_UNAVAILABLE:
    case LESSONS_DB_READONLY:
    case LESSONS_DB_FULL:
    case LESSONS_DB_MOVED:
        if (wrote && fault == LESSONS_DB_UNAVAILABLE) {
            /* Never held back: each one is a write to reconcile. */
            ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, LESSONSLOG(00305)
                          "%s: the connection was lost during %s %s: its "
                          "outcome is unknown: %s", name, r->method, r->uri,
                          err);
            break;
        }
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00304) "%s cannot serve this request%s%s%s: %s",
            name, advice ? " (" : "", advice ? advice : "",
            advice ? ")" : "", err));
        break;
    case LESSONS_DB_STALE:
        /* Once per pooled connection: apr_dbd_sqlite3 prepares with the
         * legacy interface, which never prepares again by itself.
         */
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, LESSONSLOG(00308)
                      "%s: its schema changed under this connection's "
                      "statements (a restore or a migration); they are "
                      "prepared again for the next request, answered 503: "
                      "%s", name, err);
        break;
    case LESSONS_DB_NO_SCHEMA:
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00306) "%s has no lessons schema (%s): %s", name,
            advice, err));
        break;
    case LESSONS_DB_NO_KEYS:
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00311) "%s has no table for Idempotency-Key, made "
            "before it: creates that send the header answer 500, every "
            "other request is served (%s): %s", name, advice, err));
        break;
    default:
        lessons_log_fault(r, APLOG_ERR, apr_psprintf(r->pool,
            LESSONSLOG(00302) "database error on %s: %s", name, err));
        break;
    }
    lessons_dbd_give_back(c);
    if (c->quiet) {
        return HTTP_SERVICE_UNAVAILABLE;    /* logged; the caller answers */
    }
    if (fault == LESSONS_DB_NO_SCHEMA || fault == LESSONS_DB_NO_KEYS
        || fault == LESSONS_DB_ERROR) {
        return lessons_send_problem(r, HTTP_INTERNAL_SERVER_ERROR, NULL,
            "The request could not be completed because of a server "
            "error.", NULL);
    }
    apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    if (wrote && fault == LESSONS_DB_UNAVAILABLE) {
        /* The client must not take this 503 for "nothing happened". */
        return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
            "The connection to the lessons database was lost while the "
            "change was being committed: it may have been stored. Read "
            "it before trying again.", NULL);
    }
    return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
        "The lessons database is unavailable. Try again later.", NULL);
}

/* A 503 before any database work: the pool is exhausted (counted as
 * shed) or the wait for it ran out (as a timeout).
 */
static int lessons_dbd_shed(lessons_ctx *c, lessons_metrics_id_e counted,
                            const char *why)
{
    request_rec *r = c->r;

    lessons_count(r, counted);
    lessons_log_fault(r, APLOG_WARNING, apr_psprintf(r->pool,
        LESSONSLOG(00307) "%s; answered 503", why));
    if (c->quiet) {
        return HTTP_SERVICE_UNAVAILABLE;
    }
    apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
        "The lessons database is busy. Try again later.", NULL);
}

/* No connection from mod_dbd, or none worth asking for: 503, the log
 * line why.
 */
static int lessons_dbd_unreachable(lessons_ctx *c, const char *why)
{
    request_rec *r = c->r;

    lessons_count(r, LESSONS_M_DB_FAULTS + LESSONS_FAULT_NO_CONNECTION);
    lessons_log_fault(r, APLOG_ERR, why);
    lessons_dbd_give_back(c);
    if (c->quiet) {
        return HTTP_SERVICE_UNAVAILABLE;
    }
    apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    return lessons_send_problem(r, HTTP_SERVICE_UNAVAILABLE, NULL,
        "The lessons database is unavailable. Try again later.", NULL);
}

/* No turn to write within the request's bound: 503.  whom: what it
 * waited for.
 */
int lessons_dbd_writers_shed(lessons_ctx *c, const char *whom)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);

    return lessons_dbd_shed(c, LESSONS_M_DB_TIMEOUTS,
                            apr_psprintf(c->r->pool, "waited %d s for %s",
                                         lessons_db_timeout(sconf), whom));
}

/* A connection taken with ap_dbd_open for a read, and its gate slot:
 * given back as soon as the read's statements are done, not when the
 * request ends, so that a client slow to take its answer (or its 304)
 * holds neither, and a process needs about as many connections as it
 * has reads on their way, not as it has answers being written.
 */
typedef struct {
    server_rec *s;
    ap_dbd_t *dbd;
    void (*close)(server_rec *s, ap_dbd_t *dbd);
    lessons_gate_t *gate;
} lessons_dbd_hold_t;

/* Once, whichever comes first: lessons_dbd_give_back, or the request's
 * end.  A pre-cleanup, because with DBDPersist Off the connection lives
 * in a pool under the request's, which is gone before plain cleanups run.
 */
static apr_status_t lessons_dbd_release(void *data)
{
    lessons_dbd_hold_t *hold = data;

    if (hold->dbd) {
        hold->close(hold->s, hold->dbd);
        hold->dbd = NULL;
    }
    if (hold->gate) {
        lessons_gate_leave(hold->gate);
        hold->gate = NULL;
    }
    return APR_SUCCESS;
}

/* A read may take a connection of its own (ap_dbd_open) unless mod_dbd
 * has already lent this request one (ap_dbd_acquire, by mod_authn_dbd,
 * mod_session_dbd or a dbd RewriteMap, kept until the request ends):
 * then it shares that one, as ap_dbd_acquire would, since a second could
 * wait for ever on a pool whose every connection is held so.  mod_dbd
 * keeps a lent connection in the initial request's config, non-NULL
 * once lent.
 */
static int lessons_dbd_may_lend(request_rec *r, lessons_srv_conf *sconf)
{
    if (!sconf->dbd_open || !sconf->dbd_close || !sconf->dbd_module) {
        return 0;
    }
    while (r->prev || r->main) {
        r = r->prev ? r->prev : r->main;
    }
    return ap_get_module_config(r->request_config, sconf->dbd_module)
           == NULL;
}

/* Give a read's connection and its slot back now (once its statements
 * are done, before any answer goes out); nothing if it holds none.
 */
void lessons_dbd_give_back(lessons_ctx *c)
{
    (void)lessons_dbd_unwatch(c);
    if (c->held) {
        lessons_dbd_hold_t *hold = c->held;

        /* Giving a connection back takes mod_dbd's pool lock, which the
         * request that is getting one may hold for a connection attempt:
         * then the answer goes first, and the connection and its slot
         * come back when the request ends (the cleanup).
         */
        if (!hold->gate || !lessons_gate_connecting(hold->gate)) {
            lessons_dbd_release(hold);
        }
        c->held = NULL;
        memset(&c->db, 0, sizeof(c->db));
        c->db_pool = NULL;
    }
}

/* Get a pooled connection ready for this request, within the request's
 * time bound.  DECLINED means connected; anything else is the answer.
 * Lent (unless mod_dbd has lent this request one already): given back
 * by lessons_dbd_give_back, a read's once its statements are done and a
 * write's before it waits for the other servers' leases, or when the
 * request ends.
 */
int lessons_dbd_open(lessons_ctx *c)
{
    request_rec *r = c->r;
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    apr_interval_time_t bound = apr_time_from_sec(lessons_db_timeout(sconf));
    /* The request's bound, from its first wait (the shared version
     * read's, if it waited for one) on.
     */
    apr_time_t deadline = c->deadline ? c->deadline
                                      : (c->deadline = apr_time_now() + bound);
    apr_interval_time_t left;
    lessons_db_fault_e fault;
    const char *err = NULL;
    lessons_dbd_hold_t *hold = NULL;
    ap_dbd_t *dbd;
    apr_time_t started;
    int waited = 0;

    if (lessons_dbd_may_lend(r, sconf)) {
        hold = apr_pcalloc(r->pool, sizeof(*hold));
        hold->s = r->server;
        hold->close = sconf->dbd_close;
        apr_pool_pre_cleanup_register(r->pool, hold, lessons_dbd_release);
        c->held = hold;
    }
    if (sconf->gate) {
        lessons_gate_e entered = lessons_gate_enter(sconf->gate, deadline,
                                                    &waited);

        if (waited) {
            lessons_count(r, LESSONS_M_DB_WAITS);
        }
        switch (entered) {
        case LESSONS_GATE_FULL:
            return lessons_dbd_shed(c, LESSONS_M_DB_SHEDS,
                                   "the database is not answering: "
                                   "every connection of this process has "
                                   "been held with none given back for "
                                   "the stall bound, and enough requests "
                                   "wait for one");
        case LESSONS_GATE_TIMEOUT:
            return lessons_dbd_shed(c, LESSONS_M_DB_TIMEOUTS,
                                   apr_psprintf(r->pool, "waited %d s "
                                   "for a pooled database connection",
                                   lessons_db_timeout(sconf)));
        case LESSONS_GATE_LATE:         /* not from enter */
        case LESSONS_GATE_OK:
            if (!hold) {
                /* Runs after mod_dbd's release, which acquire registers
                 * later on the same pool.
                 */
                apr_pool_cleanup_register(r->pool, sconf->gate,
                                          lessons_gate_leave,
                                          apr_pool_cleanup_null);
            }
            else {
                hold->gate = sconf->gate;
            }
            break;
        }
    }
    /* mod_dbd makes a connection under its pool's lock, which every
     * other request of the process then waits for without a bound: one
     * request asks at a time, and none that could not finish in time
     * while the database is out of reach (lessons_gate.h).  Timed: an
     * attempt that made no connection (libpq's connect_timeout for each
     * host that does not answer) says how long the next one needs.
     */
    if (sconf->gate) {
        switch (lessons_gate_connect_begin(sconf->gate, deadline)) {
        case LESSONS_GATE_OK:
            break;
        case LESSONS_GATE_LATE:
            return lessons_dbd_unreachable(c, LESSONSLOG(00316)
                "no connection asked for: this process's last attempt "
                "made none, and took longer than is left of this "
                "request's LessonsDBTimeout");
        default:
            return lessons_dbd_shed(c, LESSONS_M_DB_TIMEOUTS,
                apr_psprintf(r->pool, "waited %d s for another request "
                             "of this process to get its database "
                             "connection (mod_dbd makes one at a time)",
                             lessons_db_timeout(sconf)));
        }
    }
    started = apr_time_now();
    if (hold) {
        dbd = sconf->dbd_open(r->pool, r->server);
        hold->dbd = dbd;
    }
    else {
        dbd = sconf->acquire ? sconf->acquire(r) : NULL;
    }
    if (sconf->gate) {
        lessons_gate_connect_end(sconf->gate, dbd != NULL,
                                 apr_time_now() - started);
    }
    if (!dbd) {
        return lessons_dbd_unreachable(c, LESSONSLOG(00301)
                                       "no database connection (check "
                                       "DBDriver/DBDParams and that the "
                                       "database is up)");
    }
    c->db.driver = dbd->driver;
    c->db.handle = dbd->handle;
    c->db.init_sql = sconf->dbd_init_sql;
    c->db_pool = dbd->pool;

    /* The statement gets what is left of the bound; a wait of under a
     * second keeps the session's setting (no extra round trip).
     */
    left = deadline - apr_time_now();
    if (left > bound - apr_time_from_sec(1)) {
        left = bound;
    }
    else if (left < apr_time_from_msec(100)) {
        left = apr_time_from_msec(100);
    }
    /* Watched from before the session's statements: a frozen server
     * holds those too.  Followed after them: they may have made the
     * connection again.
     */
    lessons_dbd_watch(c, sconf, deadline);
    fault = lessons_db_ready(&c->db, c->db_pool,
                             (long)apr_time_as_msec(left), &err);
    if (fault != LESSONS_DB_OK) {
        return lessons_dbd_answer(c, fault, err, 0);
    }
    lessons_dbd_watch(c, sconf, deadline);
    /* Writes into a deleted or replaced SQLite file would be acknowledged
     * and lost.
     */
    if (r->method_number != M_GET && lessons_db_moved(&c->db)) {
        return lessons_dbd_answer(c, LESSONS_DB_MOVED,
                                 "the database file has moved", 0);
    }
    return DECLINED;                /* connected: carry on */
}

int lessons_dbd_failed(lessons_ctx *c, const char *err)
{
    int wrote = c->r->method_number == M_POST
                || c->r->method_number == M_PUT
                || c->r->method_number == M_DELETE;

    return lessons_dbd_answer(c, lessons_db_fault(&c->db, c->db_pool, err),
                             err, wrote);
}

/* The connection (open) made ready for a create with Idempotency-Key:
 * DECLINED, or the answer (500 on a database made before the keys'
 * table, naming the upgrade file once a second).
 */
int lessons_dbd_keys_ready(lessons_ctx *c)
{
    const char *err = NULL;
    lessons_db_fault_e fault = lessons_db_ready_idempotency(&c->db,
                                                            c->db_pool,
                                                            c->r->pool,
                                                            &err);

    return fault == LESSONS_DB_OK ? DECLINED
                                  : lessons_dbd_answer(c, fault, err, 0);
}

/* SQLite writes of this server queue on one mutex, within the request's
 * time bound, instead of inside SQLite (see lessons_post_config).
 * DECLINED: go on (and call lessons_dbd_write_end); else the answer.
 */
int lessons_dbd_write_begin(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);
    const lessons_engine_t *engine = lessons_engine_of(c->db.driver);
    apr_interval_time_t left = c->deadline - apr_time_now();
    apr_status_t rv;

    lessons_srv_conf *mconf =
        ap_get_module_config(ap_server_conf->module_config, &lessons_module);

    if (!sconf->writers || !engine || !engine->one_writer
        || apr_atomic_read32(&mconf->writers_failed)) {
        return DECLINED;
    }
    rv = apr_global_mutex_timedlock(sconf->writers, left > 0 ? left : 0);
    if (rv == APR_ENOTIMPL) {
        rv = apr_global_mutex_lock(sconf->writers);
    }
    if (rv == APR_TIMEUP) {
        return lessons_dbd_writers_shed(c, "the other SQLite writers");
    }
    if (rv != APR_SUCCESS) {
        /* The mutex is only a queue in front of SQLite's own write lock,
         * which still takes writers one at a time: a mutex that fails
         * (EINVAL in a process of the generation before a graceful
         * restart, once its mutex is let go) must not fail the write.
         */
        if (apr_atomic_cas32(&mconf->writers_failed, 1, 0) == 0) {
            ap_log_rerror(APLOG_MARK, APLOG_INFO, rv, c->r,
                          LESSONSLOG(00314) "the SQLite writers' mutex "
                          "failed in this process: its writes queue in "
                          "SQLite instead");
        }
        return DECLINED;
    }
    c->writing = 1;
    return DECLINED;
}

void lessons_dbd_write_end(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);

    if (c->writing) {
        apr_global_mutex_unlock(sconf->writers);
        c->writing = 0;
    }
}

/* Which of mod_dbd's connection pools server s draws from, as a key:
 * servers with the same driver, parameters and pool sizes share one
 * (mod_dbd's post_config groups them so), and must share the gate in
 * front of it, or each virtual host would let DBDMax requests at the
 * same connections and together hold every thread of the process.
 * mod_dbd keeps its configuration first in a per-server record of its
 * own; what is read there is checked (it names one of the servers, main
 * first: a virtual host without DBD directives has the main server's).
 * NULL when it cannot be read: the server gets a gate of its own.  *max
 * is the pool's DBDMax.
 */
const dbd_cfg_t *lessons_dbd_cfg(server_rec *s, server_rec *main,
                                 module *dbd)
{
    dbd_cfg_t *const *first = dbd ? ap_get_module_config(s->module_config,
                                                         dbd)
                                  : NULL;
    const dbd_cfg_t *cfg = first ? *first : NULL;

    while (main && (!cfg || main != cfg->server)) {
        main = main->next;
    }
    return main && cfg->name && cfg->params ? cfg : NULL;
}

const char *lessons_dbd_pool_key(apr_pool_t *p, server_rec *s,
                                 server_rec *main, module *dbd, int *max)
{
    const dbd_cfg_t *cfg = lessons_dbd_cfg(s, main, dbd);

    if (!cfg) {
        return NULL;
    }
#if APR_HAS_THREADS
    *max = cfg->nmax;
    /* DBDPersist unset (-1) is On, and one pool with it. */
    return apr_psprintf(p, "%s\n%s\n%d %d %d %d %d", cfg->name, cfg->params,
                        cfg->persist != 0, cfg->nmin, cfg->nkeep, cfg->nmax,
                        cfg->exptime);
#else
    return NULL;
#endif
}

/* The file an apr_dbd sqlite3 DBDParams names: a path, or a "file:" URI
 * (its query cut); NULL for what cannot be checked here (":memory:", a
 * relative path, a URI with a host or escapes).
 */
static const char *lessons_sqlite_path(apr_pool_t *p, const char *params)
{
    const char *path = params, *q;

    if (strncmp(path, "file:", 5) == 0) {
        path += 5;
        if (strncmp(path, "//", 2) == 0) {
            path += 2;              /* file:///abs: an empty host only */
            if (*path != '/') {
                return NULL;
            }
        }
        q = strchr(path, '?');
        path = q ? apr_pstrmemdup(p, path, (apr_size_t)(q - path)) : path;
        if (strchr(path, '%')) {
            return NULL;
        }
    }
    return *path == '/' ? path : NULL;
}

/* Whether User/Group (uid, gid) may write into what st describes, by
 * its mode bits (ACLs and supplementary groups are not read: this only
 * warns).
 */
static int lessons_user_writes(const struct stat *st, uid_t uid, gid_t gid,
                               int dir)
{
    mode_t need_u = S_IWUSR | (dir ? S_IXUSR : 0),
           need_g = S_IWGRP | (dir ? S_IXGRP : 0),
           need_o = S_IWOTH | (dir ? S_IXOTH : 0);

    if (uid == 0) {
        return 1;
    }
    if (st->st_uid == uid) {
        return (st->st_mode & need_u) == need_u;
    }
    if (st->st_gid == gid) {
        return (st->st_mode & need_g) == need_g;
    }
    return (st->st_mode & need_o) == need_o;
}

/* At configtest and start-up: an SQLite database named by DBDParams
 * that does not exist, or that the serving user (User, Group) cannot
 * write, or whose directory it cannot write (the journal and the WAL
 * are made there), is named now; otherwise it shows only at the first
 * request, as mod_dbd's "unable to open database file" or a 503 for
 * every write.  Each database once.
 */
void lessons_dbd_check_sqlite(apr_pool_t *ptemp, server_rec *main)
{
    module *dbd = ap_find_linked_module("mod_dbd.c");
    apr_hash_t *seen = apr_hash_make(ptemp);
    uid_t uid = ap_unixd_config.user_id;
    gid_t gid = ap_unixd_config.group_id;
    const char *user = ap_unixd_config.user_name ? ap_unixd_config.user_name
                                                 : "(User)";
    server_rec *s;

    for (s = main; s; s = s->next) {
        const dbd_cfg_t *cfg = lessons_dbd_cfg(s, main, dbd);
        const char *path, *dir;
        struct stat st;

        if (!cfg || strcmp(cfg->name, "sqlite3") != 0
            || !(path = lessons_sqlite_path(ptemp, cfg->params))
            || apr_hash_get(seen, path, APR_HASH_KEY_STRING)) {
            continue;
        }
        apr_hash_set(seen, path, APR_HASH_KEY_STRING, path);
        if (stat(path, &st) != 0) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_WARNING,
                         APR_FROM_OS_ERROR(errno), NULL,
                         LESSONSLOG(00109) "DBDParams names the SQLite "
                         "database %s, which cannot be found: every API "
                         "request would fail with mod_dbd's \"unable to open "
                         "database file\", or SQLite would make it empty, "
                         "without the schema; correct the path, or make the "
                         "database (docs/operations.md, SQLite)", path);
            continue;
        }
        if (!lessons_user_writes(&st, uid, gid, 0)) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_WARNING, 0, NULL,
                         LESSONSLOG(00110) "the SQLite database %s is not "
                         "writable by User %s: every write would be answered "
                         "503; give it to that user (chown)", path, user);
        }
        dir = ap_make_dirstr_parent(ptemp, path);
        if (stat(dir, &st) == 0 && !lessons_user_writes(&st, uid, gid, 1)) {
            ap_log_error(APLOG_MARK, APLOG_STARTUP | APLOG_WARNING, 0, NULL,
                         LESSONSLOG(00110) "the directory %s of the SQLite "
                         "database %s is not writable by User %s, and SQLite "
                         "makes its journal there: every write would be "
                         "answered 503; give the directory to that user "
                         "(chown)", dir, path, user);
        }
    }
}
