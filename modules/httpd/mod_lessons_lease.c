/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_lease.c: read leases on PostgreSQL (LessonsDBLease; the
 * design is docs/scaling.md's "Read leases").  Made in post_config, one
 * per mod_dbd pool of PostgreSQL: a block of shared memory
 * (lessons_lease.h), its lock, and a pipe that wakes the holder.  In
 * each child a thread waits to be the server's holder; the holder keeps
 * a connection of its own that LISTENs, renews the lease, installs each
 * version it reads before acknowledging it, and answers the writers'
 * checks.  The read path takes the installed version while the lease
 * is valid (no statement); a write, once committed, waits for the
 * acknowledgements (or the leases' ends) before its client hears of it.
 */

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "apr_shm.h"
#include "apr_thread_proc.h"

#include "httpd/mod_lessons.h"
#include "store/lessons_peer.h"

/* A process that does not hold the lease looks again this often; the
 * holder beats at least this often.
 */
#define LESSONS_LEASE_TICK        apr_time_from_msec(100)
/* A writer waits this long for its holder's check, then checks alone. */
#define LESSONS_LEASE_ASK_WAIT    apr_time_from_sec(1)
/* A writer checking alone reads the acknowledgements again this often. */
#define LESSONS_LEASE_POLL        apr_time_from_msec(2)
/* A holder told of its own server's write waits this long for the
 * writer to raise the version itself (it hears the notification about
 * when the writer reads its check), then catches up anyway.
 */
#define LESSONS_LEASE_OWN_WAIT    apr_time_from_msec(5)
/* A holder that cannot connect tries again after this, doubling. */
#define LESSONS_LEASE_RETRY_MIN   apr_time_from_msec(250)
#define LESSONS_LEASE_RETRY_MAX   apr_time_from_sec(5)

typedef struct lessons_lease_srv lessons_lease_srv;

struct lessons_lease_srv {
    server_rec *s;                  /* whose mod_dbd pool it copies */
    const char *name;               /* this server's row: host, parent's
                                     * pid, generation, pool */
    int length_ms;
    apr_shm_t *shm;
    apr_global_mutex_t *lock;
    lessons_lease_t *block;
    apr_file_t *bell_in;            /* the holder's doorbell */
    apr_file_t *bell_out;
    /* LessonsDBLeasePeer: this server's datagrams' key (made in the
     * parent, each generation its own) and its row's "ADDRESS:PORT KEY";
     * NULL: by NOTIFY.
     */
    unsigned char key[LESSONS_PEER_KEY_LEN];
    const char *peer;
    int peer_fd;                    /* the parent's socket, -1: none */
    /* Each child's own (its copy of this struct). */
    apr_thread_t *thread;
    volatile apr_uint32_t stop;
};

/* The holder's connection and what it recorded. */
typedef struct {
    lessons_lease_srv *ls;
    apr_pool_t *parent;             /* the thread's */
    apr_pool_t *pool;               /* the connection's, NULL: none */
    lessons_db_t db;
    const lessons_engine_t *engine;
    apr_uint32_t pid;
    lessons_lease_version_t acked;  /* what this holder recorded */
    apr_interval_time_t renew_at;
    apr_interval_time_t retry_at;
    apr_interval_time_t retry;
    int need_check;
    int poked;                      /* a writer rang for a check */
    apr_interval_time_t reread_at;  /* read the version again after a
                                     * write that made no check, 0: no */
    apr_interval_time_t reread_wait;    /* how long after its ring */
    lessons_lease_version_t own;    /* its own writers' newest version */
    apr_interval_time_t own_until;  /* 0: none awaited */
    int warned;                     /* the schema's warning, once */
    int slot;                       /* its socket's in the watch, or -1 */
    lessons_lease_check_t chk;
    lessons_lease_check_t list;     /* the other leases a renewal read */
} lessons_holder_t;

/* ------------------------------------------------------ configuration */

/* LessonsDBLease off|SECONDS: the read lease's length, in seconds with
 * up to three decimals, LESSONS_LEASE_MIN_MS to LESSONS_LEASE_MAX_MS.
 * Main server only: one lease per database for the whole server, so
 * that no virtual host of it writes without waiting for another's.
 */
const char *lessons_set_db_lease(cmd_parms *cmd, void *dconf,
                                 const char *arg)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    char *end = NULL;
    double secs;

    (void)dconf;
    if (err) {
        return err;
    }
    if (strcasecmp(arg, "off") == 0) {
        sconf->lease_ms = 0;
        return NULL;
    }
    errno = 0;
    secs = strtod(arg, &end);
    if (errno || !end || end == arg || *end || secs != secs
        || secs * 1000.0 < LESSONS_LEASE_MIN_MS
        || secs * 1000.0 > LESSONS_LEASE_MAX_MS) {
        return apr_psprintf(cmd->pool, "%s: '%s' is not off or a number of "
                            "seconds from 0.1 to %d", cmd->cmd->name, arg,
                            LESSONS_LEASE_MAX_MS / 1000);
    }
    sconf->lease_ms = (int)(secs * 1000.0 + 0.5);
    return NULL;
}

/* LessonsDBLeasePeer off|ADDRESS:PORT: where the other servers reach
 * this one by datagram (mod_lessons_peer.c).  Main server only, as the
 * lease itself.
 */
const char *lessons_set_db_lease_peer(cmd_parms *cmd, void *dconf,
                                      const char *arg)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    (void)dconf;
    if (err) {
        return err;
    }
    if (strcasecmp(arg, "off") == 0) {
        sconf->lease_peer = "";
        return NULL;
    }
    if ((err = lessons_peer_check_address(cmd->temp_pool, arg)) != NULL) {
        return apr_psprintf(cmd->pool, "%s: '%s' %s", cmd->cmd->name, arg,
                            err);
    }
    sconf->lease_peer = arg;
    return NULL;
}

/* ------------------------------------------------------ the parent */

static lessons_lease_srv *lessons_lease_make(apr_pool_t *pconf,
                                             server_rec *s,
                                             const char *name, int length_ms)
{
    lessons_lease_srv *ls = apr_pcalloc(pconf, sizeof(*ls));
    apr_status_t rv;

    ls->s = s;
    ls->name = name;
    ls->length_ms = length_ms;
    ls->peer_fd = -1;
    if ((rv = apr_shm_create(&ls->shm, lessons_lease_size(), NULL, pconf))
        != APR_SUCCESS
        || (rv = apr_global_mutex_create(&ls->lock, NULL, APR_LOCK_DEFAULT,
                                         pconf)) != APR_SUCCESS
        || (rv = apr_file_pipe_create_ex(&ls->bell_in, &ls->bell_out,
                                         APR_FULL_NONBLOCK, pconf))
           != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s, LESSONSLOG(00797)
                     "LessonsDBLease: cannot make the lease's shared memory, "
                     "lock or pipe");
        return NULL;
    }
    ls->block = lessons_lease_attach(apr_shm_baseaddr_get(ls->shm),
                                     apr_shm_size_get(ls->shm), ls->lock, 1,
                                     pconf);
    if (!ls->block) {
        return NULL;
    }
    lessons_lease_name(ls->block, name);
    /* Held from the start: a server restarted within a hold it answered
     * before (under its last generation's name) serves no version read
     * before that hold ends.
     */
    {
        int ring;

        (void)lessons_lease_hold_drop(ls->block, lessons_lease_clock(),
                                      &ring);
    }
    return ls;
}

/* One lease per PostgreSQL pool of the server: virtual hosts that share
 * mod_dbd's pool share it.  Every generation has blocks of its own (a
 * row of its own in lessons_leases): the children of the last one keep
 * theirs until they are gone.
 */
int lessons_lease_post_config(apr_pool_t *pconf, server_rec *main)
{
    lessons_srv_conf *mconf =
        ap_get_module_config(main->module_config, &lessons_module);
    apr_hash_t *pools = apr_hash_make(pconf);
    char host[APRMAXHOSTLEN + 1];
    int generation = 0, n = 0, max = 0;
    server_rec *s;
    char *c;

    for (s = main; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        sconf->lease = NULL;
        sconf->lease_block = NULL;
        sconf->lease_length_ms = 0;
    }
    mconf->leases = 0;
    if (mconf->lease_ms <= 0) {
        return OK;
    }
    if (apr_gethostname(host, sizeof(host), pconf) != APR_SUCCESS) {
        apr_cpystrn(host, "localhost", sizeof(host));
    }
    for (c = host; *c; c++) {
        if (!apr_isgraph(*c)) {
            *c = '_';
        }
    }
    ap_mpm_query(AP_MPMQ_GENERATION, &generation);
    for (s = main; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);
        const dbd_cfg_t *cfg = lessons_dbd_cfg(s, main, sconf->dbd_module);
        const char *key = lessons_dbd_pool_key(pconf, s, main,
                                               sconf->dbd_module, &max);
        lessons_lease_srv *ls;

        if (!cfg || !key || strcmp(cfg->name, "pgsql") != 0) {
            continue;
        }
        ls = apr_hash_get(pools, key, APR_HASH_KEY_STRING);
        if (!ls) {
            const char *name = apr_psprintf(pconf, "%s/%" APR_PID_T_FMT
                                            "/%d/%d", host, getpid(),
                                            generation, n++);

            ls = lessons_lease_make(pconf, s, name, mconf->lease_ms);
            if (!ls) {
                return HTTP_INTERNAL_SERVER_ERROR;
            }
            apr_hash_set(pools, key, APR_HASH_KEY_STRING, ls);
        }
        sconf->lease = ls;
    }
    mconf->leases = n;
    if (n > 0 && mconf->lease_peer && *mconf->lease_peer) {
        int fd = lessons_peer_listen(pconf, main, mconf->lease_peer);
        apr_hash_index_t *hi;

        if (fd < 0) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        for (hi = apr_hash_first(pconf, pools); hi; hi = apr_hash_next(hi)) {
            lessons_lease_srv *ls = apr_hash_this_val(hi);
            char hex[LESSONS_PEER_KEY_HEX + 1];
            apr_status_t rv = apr_generate_random_bytes(ls->key,
                                                        sizeof(ls->key));

            if (rv != APR_SUCCESS || !lessons_peer_key_hex(ls->key, hex)) {
                ap_log_error(APLOG_MARK, APLOG_CRIT, rv, main,
                             LESSONSLOG(00787) "LessonsDBLeasePeer: cannot "
                             "make a key");
                return HTTP_INTERNAL_SERVER_ERROR;
            }
            ls->peer = apr_pstrcat(pconf, mconf->lease_peer, " ", hex, NULL);
            ls->peer_fd = fd;
        }
    }
    if (n == 0) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, main, LESSONSLOG(00793)
                     "LessonsDBLease: no server here uses PostgreSQL "
                     "(DBDriver pgsql): there is no lease to hold");
    }
    return OK;
}

/* ------------------------------------------------------ the holder */

static int lessons_lease_alive(apr_uint32_t pid)
{
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* A version as the block keeps it; 0 when its epoch does not fit (it
 * is then neither installed nor trusted: today's are at most 56 bytes).
 */
static int lessons_lease_version_of(const lessons_catalog_t *cat,
                                    lessons_lease_version_t *v)
{
    const char *epoch = cat->epoch ? cat->epoch : "";

    memset(v, 0, sizeof(*v));
    v->sum = cat->changes;
    apr_cpystrn(v->epoch, epoch, sizeof(v->epoch));
    return strlen(epoch) < sizeof(v->epoch);
}

/* The connection is gone, or this thread no longer holds the block:
 * the lease ends first (if it is still ours), then the connection.
 */
static void lessons_holder_close(lessons_holder_t *h)
{
    lessons_lease_listening(h->ls->block, h->pid, 0);
    if (h->pool) {
        apr_pool_destroy(h->pool);
        h->pool = NULL;
    }
    memset(&h->db, 0, sizeof(h->db));
    memset(&h->acked, 0, sizeof(h->acked));
    h->acked.sum = -1;
    h->own_until = 0;               /* the next renewal installs anew */
}

static apr_status_t lessons_holder_disconnect(void *data)
{
    lessons_holder_t *h = data;

    if (h->db.handle) {
        apr_dbd_close(h->db.driver, h->db.handle);
    }
    return APR_SUCCESS;
}

/* The holder's statements are watched as a request's are (lessons_watch):
 * a server that stops answering without closing anything (frozen, or a
 * deposed primary whose commits wait for standbys that follow another
 * now: statement_timeout ends before a commit) would hold the thread
 * for good, and a process alone in its server would never hold a lease
 * again.  Shut down at LessonsDBTimeout, the connection goes (LESSONS00791)
 * and a new one is made.
 */
static void lessons_holder_watch(lessons_holder_t *h)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(h->ls->s->module_config, &lessons_module);

    h->slot = sconf->watch
              ? lessons_watch_arm(sconf->watch, h->pool,
                                  lessons_db_socket(&h->db),
                                  apr_time_now()
                                  + apr_time_from_sec(
                                        lessons_db_timeout(sconf))
                                  + LESSONS_WATCH_GRACE)
              : -1;
}

/* 1 when the watch shut the connection down. */
static int lessons_holder_unwatch(lessons_holder_t *h)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(h->ls->s->module_config, &lessons_module);
    int fired = sconf->watch && h->slot >= 0
                ? lessons_watch_disarm(sconf->watch, h->slot) : 0;

    h->slot = -1;
    return fired;
}

/* A connection of the holder's own, with the parameters of a pooled
 * one, ready and listening.  0: not now (logged), try again later.
 */
static int lessons_holder_connect(lessons_holder_t *h)
{
    lessons_lease_srv *ls = h->ls;
    lessons_srv_conf *sconf =
        ap_get_module_config(ls->s->module_config, &lessons_module);
    long timeout_ms = ls->length_ms / 2 > 50 ? ls->length_ms / 2 : 50;
    const apr_dbd_driver_t *driver;
    const char *params = NULL, *err = NULL;
    lessons_db_fault_e fault;
    apr_dbd_t *handle = NULL;
    apr_time_t started = 0;
    ap_dbd_t *dbd;
    int nrows = 0, rv;

    if (apr_pool_create(&h->pool, h->parent) != APR_SUCCESS) {
        h->pool = NULL;
        return 0;
    }
    /* The pooled connection is asked for in turn with the requests
     * (lessons_gate.h): mod_dbd makes one under its pool's lock.
     */
    if (sconf->gate) {
        if (lessons_gate_connect_begin(sconf->gate, apr_time_now()
                                       + apr_time_from_msec(timeout_ms))
            != LESSONS_GATE_OK) {
            err = "no pooled connection to copy (another is being made, "
                  "or the last attempt made none)";
            goto failed;
        }
        started = apr_time_now();
    }
    dbd = sconf->dbd_open ? sconf->dbd_open(h->pool, ls->s) : NULL;
    if (sconf->gate) {
        lessons_gate_connect_end(sconf->gate, dbd != NULL,
                                 apr_time_now() - started);
    }
    if (!dbd) {
        err = "no pooled connection to copy";
        goto failed;
    }
    driver = dbd->driver;
    h->engine = lessons_engine_of(driver);
    if (h->engine && h->engine->conninfo) {
        params = h->engine->conninfo(apr_dbd_native_handle(driver,
                                                           dbd->handle),
                                     h->pool);
    }
    sconf->dbd_close(ls->s, dbd);
    if (!params || !h->engine->listen_wait || !h->engine->notification) {
        err = "this driver has no read leases";
        goto failed;
    }
    rv = apr_dbd_open_ex(driver, h->pool, params, &handle, &err);
    if (rv != APR_SUCCESS || !handle) {
        if (!err) {
            err = "cannot connect";
        }
        goto failed;
    }
    h->db.driver = driver;
    h->db.handle = handle;
    apr_pool_cleanup_register(h->pool, h, lessons_holder_disconnect,
                              apr_pool_cleanup_null);
    lessons_holder_watch(h);
    fault = lessons_db_ready(&h->db, h->pool, timeout_ms, &err);
    if (fault == LESSONS_DB_OK) {
        fault = lessons_db_ready_leases(&h->db, h->pool, h->pool, &err);
    }
    if (fault == LESSONS_DB_NO_SCHEMA) {
        if (!h->warned) {
            h->warned = 1;
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s,
                         LESSONSLOG(00792) "LessonsDBLease: the database "
                         "lacks the lessons_leases or lessons_lease_fence "
                         "table, or lessons_leases.peer: GETs read the "
                         "catalogue version as without the directive (load "
                         "sql/upgrade-leases.pgsql.sql): %s", err);
        }
        goto quiet;
    }
    if (fault != LESSONS_DB_OK) {
        goto failed;
    }
    if ((rv = apr_dbd_query(driver, handle, &nrows,
                            "SET application_name = 'mod_lessons lease'; "
                            "LISTEN lessons_catalog; LISTEN lessons_lease"))
        != 0) {
        err = apr_dbd_error(driver, handle, rv);
        goto failed;
    }
    if (lessons_holder_unwatch(h)) {
        err = "no answer within LessonsDBTimeout";
        goto failed;
    }
    if (!lessons_lease_listening(ls->block, h->pid, 1)) {
        goto quiet;
    }
    h->warned = 0;
    h->renew_at = 0;
    h->need_check = 1;
    h->retry = LESSONS_LEASE_RETRY_MIN;
    ap_log_error(APLOG_MARK, APLOG_INFO, 0, ls->s, LESSONSLOG(00790)
                 "LessonsDBLease: listening as %s on %s (process %"
                 APR_PID_T_FMT ")", ls->name,
                 lessons_db_name(&h->db, h->pool), getpid());
    return 1;

failed:
    ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s, LESSONSLOG(00791)
                 "LessonsDBLease: no listening connection (%s): GETs read "
                 "the catalogue version until there is one",
                 err ? err : "unknown error");
quiet:
    (void)lessons_holder_unwatch(h);
    lessons_holder_close(h);
    return 0;
}

/* A check's answer from the store's rows, taken at at.  A row that
 * does not fit (a name or epoch too long, too many rows) makes the
 * writer wait out the longest lease there is.
 */
static void lessons_lease_check_fill(lessons_lease_check_t *chk,
                                     const lessons_catalog_t *cat,
                                     const apr_array_header_t *rows,
                                     apr_interval_time_t at)
{
    int i;

    chk->overflow = !lessons_lease_version_of(cat, &chk->version);
    chk->round = 0;         /* a check, settled by versions */
    chk->at = at;
    chk->hold = 0;
    chk->nrows = 0;
    for (i = 0; rows && i < rows->nelts; i++) {
        const lessons_store_lease_t *l =
            &APR_ARRAY_IDX(rows, i, lessons_store_lease_t);
        lessons_lease_row_t *row;

        if (chk->nrows >= LESSONS_LEASE_ROWS
            || strlen(l->server) >= sizeof(row->name)
            || strlen(l->epoch) >= sizeof(row->acked.epoch)) {
            chk->overflow = 1;
            continue;
        }
        row = &chk->rows[chk->nrows++];
        memset(row, 0, sizeof(*row));
        apr_cpystrn(row->name, l->server, sizeof(row->name));
        row->term = l->term;
        row->length_ms = l->length_ms;
        row->acked.sum = l->acked;
        apr_cpystrn(row->acked.epoch, l->epoch, sizeof(row->acked.epoch));
        /* Too long for the row: none (it is waited for as without). */
        if (l->peer && strlen(l->peer) < sizeof(row->peer)) {
            apr_cpystrn(row->peer, l->peer, sizeof(row->peer));
        }
    }
}

/* Record v as acknowledged (installed already), once per version. */
static int lessons_holder_ack(lessons_holder_t *h, apr_pool_t *p,
                              const lessons_catalog_t *cat,
                              const lessons_lease_version_t *v)
{
    const char *err = NULL;
    int found = 0;

    if (lessons_lease_covers(&h->acked, v)) {
        return 1;
    }
    if (lessons_store_lease_ack(&h->db, p, h->ls->name, cat, &found, &err)
        != LESSONS_STORE_OK) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, h->ls->s,
                     LESSONSLOG(00791) "LessonsDBLease: acknowledging: %s",
                     err ? err : "unknown error");
        return 0;
    }
    if (!found) {
        /* The row was removed (by hand): renew it now. */
        h->renew_at = 0;
        return 1;
    }
    memcpy(&h->acked, v, sizeof(*v));
    return 1;
}

/* Renew the lease: valid from before the statement was sent until 90%
 * of its length later (clocks that run apart by up to a tenth).
 */
static int lessons_holder_renew(lessons_holder_t *h, apr_pool_t *p)
{
    lessons_lease_srv *ls = h->ls;
    apr_interval_time_t t0 = lessons_lease_clock(), end, now;
    apr_int64_t longest = ls->length_ms;
    apr_uint32_t gen;
    lessons_lease_version_t v;
    lessons_catalog_t cat;
    apr_array_header_t *others = NULL;
    apr_int64_t term = 0;
    const char *err = NULL;
    int i;

    /* The renewal reads the version again as a reread would: a drop's
     * ring that went to no holder (one connecting, or gone) is taken
     * here, and the next drop rings again.
     */
    (void)lessons_lease_reread(ls->block, &gen);
    if (lessons_store_lease_renew(&h->db, p, ls->name, ls->length_ms,
                                  ls->peer, &cat, &term, &others, &err)
        != LESSONS_STORE_OK) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s, LESSONSLOG(00791)
                     "LessonsDBLease: renewing: %s",
                     err ? err : "unknown error");
        return 0;
    }
    now = lessons_lease_clock();
    end = t0 + apr_time_from_msec(ls->length_ms) * 9 / 10;
    lessons_lease_check_fill(&h->list, &cat, others, t0);
    lessons_lease_listed(ls->block, t0, others ? others->nelts : 0,
                         &h->list);
    if (!lessons_lease_version_of(&cat, &v)) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s, LESSONSLOG(00791)
                     "LessonsDBLease: the catalogue's epoch is longer than "
                     "%d bytes: no lease", LESSONS_LEASE_EPOCH_MAX - 1);
        return 0;
    }
    if (now >= end) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s, LESSONSLOG(00796)
                     "LessonsDBLease: a renewal took %" APR_TIME_T_FMT
                     " ms, longer than the lease: no lease",
                     apr_time_as_msec(now - t0));
        end = 0;
    }
    /* Served only once the run is old enough for every writer's list
     * to hold this server's row (0 until then): a writer with no check
     * trusts a list for half of its own lease, so the longest listed
     * counts (servers of one database should share a length).
     */
    for (i = 0; others && i < others->nelts; i++) {
        const lessons_store_lease_t *o =
            &APR_ARRAY_IDX(others, i, lessons_store_lease_t);

        if (o->length_ms > longest && o->length_ms <= LESSONS_LEASE_MAX_MS) {
            longest = o->length_ms;
        }
    }
    end = lessons_lease_run(ls->block, h->pid, t0, now, end,
                            apr_time_from_msec(longest));
    if (!lessons_lease_install(ls->block, h->pid, &v, end, gen)) {
        return 0;
    }
    h->renew_at = t0 + apr_time_from_msec(ls->length_ms) / 3;
    return lessons_holder_ack(h, p, &cat, &v);
}

/* A check: the version and every lease of one snapshot, read after the
 * asks it answers; the version installed, then acknowledged.  Asked by
 * writers, it tells every listening server that the catalogue moved.
 */
static int lessons_holder_check(lessons_holder_t *h, apr_pool_t *p)
{
    lessons_lease_srv *ls = h->ls;
    apr_uint32_t asked = lessons_lease_asked(ls->block);
    apr_uint32_t gen = lessons_lease_gen(ls->block);
    int notify = lessons_lease_wanted(ls->block);
    lessons_lease_check_t *chk = &h->chk;
    apr_array_header_t *rows = NULL;
    lessons_catalog_t cat;
    const char *err = NULL;
    int tries;

    /* With datagrams the writer that asked tells the others: a check
     * that notifies no one, again with NOTIFY when a listed server
     * hears only so.
     */
    for (tries = ls->peer ? 0 : 1; tries < 2; tries++) {
        if (lessons_store_lease_check(&h->db, p,
                                      notify && tries ? ls->name : NULL,
                                      &cat, &rows, &err)
            != LESSONS_STORE_OK) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s,
                         LESSONSLOG(00791) "LessonsDBLease: checking: %s",
                         err ? err : "unknown error");
            return 0;
        }
        lessons_lease_check_fill(chk, &cat, rows, lessons_lease_clock());
        if (!notify || !lessons_peer_round_needs_notify(chk, ls->name)) {
            break;
        }
    }
    if (!lessons_lease_install(ls->block, h->pid, &chk->version, 0, gen)) {
        return 0;
    }
    lessons_lease_heard_check(ls->block, chk, chk->at);
    lessons_lease_publish(ls->block, h->pid, asked, chk);
    return lessons_holder_ack(h, p, &cat, &chk->version);
}

/* A write here made no check and dropped the installed version: read
 * it again (a plain read; nobody waits for an acknowledgement), served
 * unless another write dropped it meanwhile (that one rang again).
 */
static int lessons_holder_reread(lessons_holder_t *h, apr_pool_t *p)
{
    lessons_lease_srv *ls = h->ls;
    apr_array_header_t *rows = NULL;
    lessons_lease_version_t v;
    lessons_catalog_t cat;
    const char *err = NULL;
    apr_uint32_t gen;

    if (!lessons_lease_reread(ls->block, &gen)) {
        /* Held: read once the hold ends (a later one moves it on). */
        apr_interval_time_t held = lessons_lease_held_until(ls->block);

        if (held > lessons_lease_clock()) {
            h->reread_at = held;
        }
        return 1;
    }
    if (lessons_store_lease_check(&h->db, p, NULL, &cat, &rows, &err)
        != LESSONS_STORE_OK) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s, LESSONSLOG(00791)
                     "LessonsDBLease: reading the version: %s",
                     err ? err : "unknown error");
        return 0;
    }
    return lessons_lease_version_of(&cat, &v)
           && lessons_lease_install(ls->block, h->pid, &v, 0, gen);
}

/* Told of a change and asked by no writer here: catch up in one
 * statement.  GETs read the version from the database from before it is
 * sent until what it read is installed, since its acknowledgement may
 * be seen by a writer first.
 */
static int lessons_holder_catch_up(lessons_holder_t *h, apr_pool_t *p)
{
    lessons_lease_srv *ls = h->ls;
    lessons_lease_version_t v;
    lessons_catalog_t cat;
    const char *err = NULL;
    apr_uint32_t gen;
    int found = 0;

    if (!lessons_lease_refresh(ls->block, h->pid)) {
        return 0;
    }
    gen = lessons_lease_gen(ls->block);
    if (lessons_store_lease_catch_up(&h->db, p, ls->name, &cat, &found, &err)
        != LESSONS_STORE_OK) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s, LESSONSLOG(00791)
                     "LessonsDBLease: catching up: %s",
                     err ? err : "unknown error");
        return 0;
    }
    if (!lessons_lease_version_of(&cat, &v)
        || !lessons_lease_install(ls->block, h->pid, &v, 0, gen)) {
        return 0;
    }
    if (found) {
        memcpy(&h->acked, &v, sizeof(v));
    }
    else {
        h->renew_at = 0;            /* the row was removed: renew now */
    }
    return 1;
}

/* A notification: a change somewhere (check), or another server's
 * renewal ("r TERM NAME") or acknowledgement ("a TERM SUM NAME EPOCH").
 */
static void lessons_holder_heard(lessons_holder_t *h, apr_pool_t *p,
                                 const char *channel, const char *payload)
{
    char *copy, *state = NULL, *kind, *term, *sum = NULL, *name, *epoch;
    lessons_lease_version_t v;
    apr_int64_t t;

    copy = apr_pstrdup(p, payload ? payload : "");
    if (strcmp(channel, "lessons_catalog") == 0) {
        /* "SUM SERVER EPOCH": a write of this server raised its version
         * itself; any other (or an older module's "") is caught up on.
         */
        sum = apr_strtok(copy, " ", &state);
        name = apr_strtok(NULL, " ", &state);
        epoch = apr_strtok(NULL, " ", &state);
        memset(&v, 0, sizeof(v));
        if (!sum || !name || !epoch || strlen(epoch) >= sizeof(v.epoch)) {
            h->need_check = 1;
            return;
        }
        v.sum = apr_atoi64(sum);
        apr_cpystrn(v.epoch, epoch, sizeof(v.epoch));
        if (strcmp(name, h->ls->name) != 0) {
            h->need_check = 1;
        }
        else if (!lessons_lease_own(h->ls->block, name, &v)) {
            /* The writer may not have raised it yet. */
            if (h->own_until == 0 || !lessons_lease_covers(&h->own, &v)) {
                memcpy(&h->own, &v, sizeof(v));
            }
            if (h->own_until == 0) {
                h->own_until = lessons_lease_clock()
                               + LESSONS_LEASE_OWN_WAIT;
            }
        }
        return;
    }
    if (strcmp(channel, "lessons_lease") != 0) {
        return;
    }
    kind = apr_strtok(copy, " ", &state);
    term = apr_strtok(NULL, " ", &state);
    if (kind && strcmp(kind, "a") == 0) {
        sum = apr_strtok(NULL, " ", &state);
    }
    name = apr_strtok(NULL, " ", &state);
    epoch = sum ? apr_strtok(NULL, " ", &state) : NULL;
    if (!kind || !term || !name || (sum && !epoch)) {
        return;
    }
    t = apr_atoi64(term);
    if (!sum) {
        lessons_lease_heard(h->ls->block, name, t, NULL,
                            lessons_lease_clock());
        return;
    }
    memset(&v, 0, sizeof(v));
    v.sum = apr_atoi64(sum);
    if (strlen(epoch) >= sizeof(v.epoch)) {
        return;
    }
    apr_cpystrn(v.epoch, epoch, sizeof(v.epoch));
    lessons_lease_heard(h->ls->block, name, t, &v, lessons_lease_clock());
}

/* Every notification libpq has: read off the socket, or kept from
 * while a statement ran (the socket then shows nothing more).  The
 * number taken, or -1 when the connection is lost.
 */
static int lessons_holder_hear(lessons_holder_t *h, apr_pool_t *p)
{
    const char *channel, *payload;
    int rv, n = 0;

    while ((rv = h->engine->notification(
                apr_dbd_native_handle(h->db.driver, h->db.handle), p,
                &channel, &payload)) == 1) {
        lessons_holder_heard(h, p, channel, payload);
        n++;
    }
    return rv < 0 ? -1 : n;
}

/* Renew when due, check when asked or told of a change, then wait for
 * the next of these (unwatched: the wait has its own bound, and a
 * notification may be long in coming).  0 when the connection must go.
 */
static int lessons_holder_steps(lessons_holder_t *h, apr_pool_t *p)
{
    lessons_lease_srv *ls = h->ls;
    apr_interval_time_t now = lessons_lease_clock(), wait;
    apr_os_file_t fd = -1;
    char drain[64];
    apr_size_t n;
    int rv;

    if (now >= h->renew_at && !lessons_holder_renew(h, p)) {
        return 0;
    }
    if (h->own_until
        && (lessons_lease_own(ls->block, ls->name, &h->own)
            || now >= h->own_until)) {
        /* Raised by its writer, or not in time (a writer killed between
         * its check and the raise): then caught up on.
         */
        h->need_check |= !lessons_lease_own(ls->block, ls->name, &h->own);
        h->own_until = 0;
    }
    if (h->reread_at && now >= h->reread_at) {
        h->reread_at = 0;
        if (!lessons_holder_reread(h, p)) {
            return 0;
        }
    }
    if (h->poked && !lessons_lease_wanted(ls->block)) {
        h->poked = 0;               /* a writer's check answered it */
    }
    if (h->poked) {
        h->poked = 0;
        h->need_check = 0;
        if (!lessons_holder_check(h, p)) {
            return 0;
        }
    }
    else if (h->need_check) {
        h->need_check = 0;
        if (!lessons_holder_catch_up(h, p)) {
            return 0;
        }
    }
    /* What came while the statements ran: the socket will not say. */
    if ((rv = lessons_holder_hear(h, p)) != 0) {
        return rv > 0;
    }
    now = lessons_lease_clock();
    wait = h->renew_at - now;
    if (wait > LESSONS_LEASE_TICK) {
        wait = LESSONS_LEASE_TICK;
    }
    if (h->own_until && h->own_until - now < wait) {
        wait = h->own_until - now;
    }
    if (h->reread_at && h->reread_at - now < wait) {
        wait = h->reread_at - now;
    }
    apr_os_file_get(&fd, ls->bell_in);
    if (lessons_holder_unwatch(h)) {
        return 0;
    }
    rv = h->engine->listen_wait(apr_dbd_native_handle(h->db.driver,
                                                      h->db.handle),
                                fd, wait > 0 ? wait : 0);
    lessons_holder_watch(h);
    if (rv < 0) {
        return 0;
    }
    /* A writer without a connection asks this holder for its check
     * (the others make theirs themselves): "w".  A write that made no
     * check dropped the installed version: "d", read it again a little
     * later, once for the writes of a burst, and later still while no
     * GET takes what it read before a write drops it again.
     */
    do {
        apr_size_t i;

        n = sizeof(drain);
        if (apr_file_read(ls->bell_in, drain, &n) != APR_SUCCESS) {
            break;
        }
        for (i = 0; i < n; i++) {
            if (drain[i] != 'd') {
                h->poked = 1;
            }
            else if (!h->reread_at) {
                h->reread_wait = lessons_lease_reread_wait(
                    h->reread_wait, lessons_lease_taken(ls->block));
                h->reread_at = lessons_lease_clock() + h->reread_wait;
            }
        }
    } while (n == sizeof(drain));
    return lessons_holder_hear(h, p) >= 0;
}

/* One turn of a holder with a connection: 0 when the connection must
 * go.
 */
static int lessons_holder_turn(lessons_holder_t *h, apr_pool_t *p)
{
    int ok;

    lessons_holder_watch(h);
    ok = lessons_holder_steps(h, p);
    return lessons_holder_unwatch(h) ? 0 : ok;
}

static void *APR_THREAD_FUNC lessons_lease_thread(apr_thread_t *thread,
                                                  void *data)
{
    lessons_lease_srv *ls = data;
    lessons_holder_t *h;
    apr_pool_t *tp, *p;
    apr_interval_time_t stale = 3 * apr_time_from_msec(ls->length_ms)
                                + apr_time_from_sec(1);

    tp = apr_thread_pool_get(thread);
    h = apr_pcalloc(tp, sizeof(*h));
    h->ls = ls;
    h->parent = tp;
    h->pid = (apr_uint32_t)getpid();
    h->acked.sum = -1;
    h->retry = LESSONS_LEASE_RETRY_MIN;
    h->slot = -1;
    /* mod_dbd makes its pool in its own child_init, which may run after
     * ours: the first connection is tried a tick later.
     */
    h->retry_at = lessons_lease_clock() + LESSONS_LEASE_TICK;
    apr_pool_create(&p, tp);
    while (!apr_atomic_read32(&ls->stop)) {
        apr_interval_time_t now = lessons_lease_clock();

        apr_pool_clear(p);
        if (!lessons_lease_hold(ls->block, h->pid, now, stale,
                                lessons_lease_alive)) {
            if (h->pool) {
                lessons_holder_close(h);
            }
            apr_sleep(LESSONS_LEASE_TICK);
            continue;
        }
        if (!h->pool) {
            if (now < h->retry_at) {
                apr_sleep(LESSONS_LEASE_TICK);
                continue;
            }
            if (!lessons_holder_connect(h)) {
                h->retry_at = now + h->retry;
                h->retry = h->retry * 2 < LESSONS_LEASE_RETRY_MAX
                           ? h->retry * 2 : LESSONS_LEASE_RETRY_MAX;
                continue;
            }
        }
        if (!lessons_holder_turn(h, p)) {
            ap_log_error(APLOG_MARK, APLOG_WARNING, 0, ls->s,
                         LESSONSLOG(00791) "LessonsDBLease: the listening "
                         "connection is lost: GETs read the catalogue "
                         "version until there is a new lease");
            lessons_holder_close(h);
        }
    }
    /* Stopping: the lease ends here first, then the row goes, so that
     * writers stop waiting for this server.
     */
    if (h->pool) {
        const char *err = NULL;

        lessons_lease_let_go(ls->block, h->pid);
        apr_pool_clear(p);
        (void)lessons_store_lease_release(&h->db, p, ls->name, &err);
        lessons_holder_close(h);
    }
    else {
        lessons_lease_let_go(ls->block, h->pid);
    }
    apr_thread_exit(thread, APR_SUCCESS);
    return NULL;
}

static apr_status_t lessons_lease_stop(void *data)
{
    lessons_lease_srv *ls = data;
    apr_status_t rv;
    apr_size_t n = 1;

    if (ls->thread) {
        apr_atomic_set32(&ls->stop, 1);
        (void)apr_file_write(ls->bell_out, "x", &n);
        apr_thread_join(&rv, ls->thread);
        ls->thread = NULL;
    }
    return APR_SUCCESS;
}

void lessons_lease_child_init(apr_pool_t *pchild, server_rec *main)
{
    apr_hash_t *seen = apr_hash_make(pchild);
    lessons_peer_child_t *peers = NULL;
    server_rec *s;
    apr_status_t rv;

    for (s = main; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);
        lessons_lease_srv *ls = sconf->lease;

        if (!ls || apr_hash_get(seen, &ls, sizeof(ls))) {
            continue;
        }
        apr_hash_set(seen, apr_pmemdup(pchild, &ls, sizeof(ls)), sizeof(ls),
                     ls);
        rv = apr_global_mutex_child_init(&ls->lock,
                                         apr_global_mutex_lockfile(ls->lock),
                                         pchild);
        ls->block = rv == APR_SUCCESS
                    ? lessons_lease_attach(apr_shm_baseaddr_get(ls->shm),
                                           apr_shm_size_get(ls->shm),
                                           ls->lock, 0, pchild)
                    : NULL;
        ls->stop = 0;
        ls->thread = NULL;
        if (!ls->block
            || (rv = apr_thread_create(&ls->thread, NULL,
                                       lessons_lease_thread, ls, pchild))
               != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_ERR, rv, s, LESSONSLOG(00797)
                         "LessonsDBLease: cannot open the lease in this "
                         "process: its GETs read the catalogue version");
            sconf->lease = NULL;
            continue;
        }
        apr_pool_pre_cleanup_register(pchild, ls, lessons_lease_stop);
        if (ls->peer_fd >= 0) {
            if (!peers) {
                peers = lessons_peer_child_make(pchild, main, ls->peer_fd);
            }
            lessons_peer_child_add(peers, ls->name, ls->block, ls->key,
                                   ls->bell_out);
        }
    }
    if (peers && (rv = lessons_peer_child_start(pchild, peers))
                 != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, main, LESSONSLOG(00788)
                     "LessonsDBLeasePeer: cannot start this process's "
                     "reader: other servers' writes wait for another "
                     "process of this server to answer them");
    }
    /* Virtual hosts of a pool whose lease could not be opened. */
    for (s = main; s; s = s->next) {
        lessons_srv_conf *sconf =
            ap_get_module_config(s->module_config, &lessons_module);

        if (sconf->lease && !sconf->lease->block) {
            sconf->lease = NULL;
        }
        sconf->lease_block = sconf->lease ? sconf->lease->block : NULL;
        sconf->lease_length_ms = sconf->lease ? sconf->lease->length_ms : 0;
    }
}

/* ------------------------------------------------------ the read path */

int lessons_lease_catalog(request_rec *r, const lessons_srv_conf *sconf,
                          lessons_catalog_t *cat)
{
    lessons_lease_version_t v;

    if (!sconf->lease) {
        return 0;
    }
    if (!lessons_lease_current(sconf->lease->block, lessons_lease_clock(),
                               &v)) {
        if (APLOGrtrace2(r)) {
            lessons_lease_state_t st;

            lessons_lease_state(sconf->lease->block, lessons_lease_clock(),
                                &st);
            ap_log_rerror(APLOG_MARK, APLOG_TRACE2, 0, r, LESSONSLOG(00798)
                          "LessonsDBLease: no valid lease (holder %u, %s, "
                          "version %" APR_INT64_T_FMT ")", st.holder,
                          st.listening ? "listening" : "not listening",
                          st.version.sum);
        }
        return 0;
    }
    cat->changes = v.sum;
    cat->epoch = apr_pstrdup(r->pool, v.epoch);
    return 1;
}

/* ------------------------------------------------------ the writers */

typedef enum {
    LESSONS_ALONE_OK = 0,
    LESSONS_ALONE_NONE,             /* the database has no leases table */
    LESSONS_ALONE_NO_CONNECTION,    /* the write was another's share */
    LESSONS_ALONE_FAILED
} lessons_alone_e;

/* A check made by the writer itself, on the connection its write used:
 * its holder does not listen (or did not answer in time).  Never a
 * connection of its own: mod_dbd's pool waits without a bound when its
 * connections are all taken, as they may be while the database is in
 * trouble.
 */
static lessons_alone_e lessons_lease_check_alone(lessons_ctx *c,
                                                 const char *notify,
                                                 lessons_lease_check_t *chk,
                                                 const char **err)
{
    apr_pool_t *p = c->r->pool;
    apr_array_header_t *rows = NULL;
    lessons_catalog_t cat;
    lessons_db_fault_e fault;

    if (!c->db.handle || !c->db_pool) {
        return LESSONS_ALONE_NO_CONNECTION;
    }
    fault = lessons_db_ready_leases(&c->db, c->db_pool, p, err);
    if (fault == LESSONS_DB_NO_SCHEMA) {
        return LESSONS_ALONE_NONE;
    }
    if (fault != LESSONS_DB_OK) {
        return LESSONS_ALONE_FAILED;
    }
    if (lessons_store_lease_check(&c->db, p, notify, &cat, &rows, err)
        != LESSONS_STORE_OK) {
        (void)lessons_db_fault(&c->db, c->db_pool, *err);
        return LESSONS_ALONE_FAILED;
    }
    lessons_lease_check_fill(chk, &cat, rows, lessons_lease_clock());
    return LESSONS_ALONE_OK;
}

/* A write that waited over half a lease for the other servers: said
 * once, at info.
 */
static void lessons_lease_log_wait(request_rec *r,
                                   const lessons_lease_srv *ls,
                                   apr_interval_time_t waited)
{
    if (waited > apr_time_from_msec(ls->length_ms) / 2) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00794)
                      "LessonsDBLease: the write waited %" APR_TIME_T_FMT
                      " ms for the leases of other servers (one that does "
                      "not answer is waited out)",
                      apr_time_as_msec(waited));
    }
}

/* A write whose server's last list is fresh and names only servers
 * with an address (docs/scaling.md, "The check off the write's path",
 * step 3): no statement; the listed servers told by an INVALIDATE
 * round drawn after the commit, this write's own or one it shares
 * (lessons_lease_invalidating), and the wait for each one's answer or
 * the end of its lease.  0 when the list does not allow it (the write
 * makes its check).
 */
static int lessons_lease_invalidate(lessons_ctx *c, lessons_lease_srv *ls,
                                    lessons_lease_check_t *chk,
                                    apr_interval_time_t start)
{
    /* A round drawn after the write came back tells of it: for a write
     * of another's group commit, that is before this request woke.
     */
    apr_interval_time_t commit = c->committed > 0 && c->committed <= start
                                 ? c->committed : start;
    request_rec *r = c->r;
    unsigned char *nonce = apr_palloc(r->pool, LESSONS_LEASE_NONCE_LEN);
    lessons_peer_round_t *round = NULL;
    lessons_lease_tell_e how;
    apr_interval_time_t now = start, until = 0;
    apr_uint32_t bell = 0;
    apr_size_t one = 1;
    int ring = 0;

    for (;;) {
        how = lessons_lease_invalidating(ls->block, commit, now,
                                         apr_time_from_msec(ls->length_ms)
                                         / 2, ls->peer_fd >= 0, chk, nonce,
                                         &ring, &bell, &until);
        if (how != LESSONS_LEASE_TELL_WAIT) {
            break;
        }
        lessons_lease_tell_sleep(ls->block, bell, until);
        now = lessons_lease_clock();
    }
    if (how == LESSONS_LEASE_TELL_NO) {
        return 0;
    }
    if (how == LESSONS_LEASE_TELL_HELD || how == LESSONS_LEASE_TELL_RENEW) {
        int sent = how == LESSONS_LEASE_TELL_RENEW
                   ? lessons_peer_renew(r->pool, ls->peer_fd, ls->name, chk,
                                        nonce)
                   : 0;

        if (ring) {
            (void)apr_file_write(ls->bell_out, "d", &one);
        }
        ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, LESSONSLOG(00799)
                      "LessonsDBLease: the write made no check and told no "
                      "one: every listed server holds its drop past it%s",
                      how == LESSONS_LEASE_TELL_RENEW
                      ? apr_psprintf(r->pool, " (it renewed the holds of "
                                     "%d server(s) ahead)", sent)
                      : "");
        return 1;
    }
    lessons_dbd_give_back(c);
    if (how == LESSONS_LEASE_TELL_LEAD) {
        round = lessons_peer_round_start(r->pool, ls->name, chk, nonce);
    }
    /* After the INVALIDATEs: the holder reads 10 ms later anyway. */
    if (ring) {
        (void)apr_file_write(ls->bell_out, "d", &one);
    }
    for (;;) {
        apr_uint32_t seen = lessons_lease_tell_seen(ls->block);

        now = lessons_lease_clock();
        if (lessons_lease_settled(ls->block, chk, now, &until, &bell)) {
            break;
        }
        if (round) {
            lessons_peer_round_wait(round, ls->block, bell, until);
        }
        else {
            /* Woken by the leader's lessons_lease_told, or by a later
             * round's (an answer to it settles this one too).
             */
            lessons_lease_tell_sleep(ls->block, seen, until);
        }
    }
    if (how == LESSONS_LEASE_TELL_LEAD) {
        lessons_lease_told(ls->block, chk->round);
    }
    ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, LESSONSLOG(00799)
                  "LessonsDBLease: the write made no check: it told %d "
                  "listed server(s)%s, %d answered, in %" APR_TIME_T_FMT
                  " us", chk->nrows,
                  how == LESSONS_LEASE_TELL_JOIN ? " in another's round" : "",
                  round ? lessons_peer_round_answered(round) : 0,
                  now - start);
    lessons_lease_log_wait(r, ls, now - start);
    return 1;
}

/* lessons_lease_settle's work for a write that came back at start. */
static void lessons_lease_settle_from(lessons_ctx *c, lessons_lease_srv *ls,
                                      apr_interval_time_t start)
{
    request_rec *r = c->r;
    lessons_lease_check_t *chk, *later = NULL;
    apr_interval_time_t checked, now, until = 0;
    apr_uint32_t bell = 0;
    const char *err = NULL;
    const char *via = "";
    lessons_peer_round_t *round = NULL;
    int asked = 0, alone, send = 0, ring = 0;

    if (lessons_lease_alone(ls->block, start,
                            apr_time_from_msec(ls->length_ms) / 2, &ring)) {
        /* No other server held a lease at the last renewal, which is
         * recent: none to tell, none to wait for.  This server's GETs
         * read the version until its holder reads one again.
         */
        apr_size_t n = 1;

        if (ring) {
            (void)apr_file_write(ls->bell_out, "d", &n);
        }
        ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, LESSONSLOG(00799)
                      "LessonsDBLease: the write made no check: no other "
                      "server held a lease at the last renewal");
        return;
    }
    chk = apr_palloc(r->pool, sizeof(*chk));
    if (ls->peer && lessons_lease_invalidate(c, ls, chk, start)) {
        return;
    }
    if (lessons_lease_has_listener(ls->block)) {
        /* The writes of this server share checks (lessons_lease_turn):
         * the one whose turn it is makes the check on its own connection
         * (one round trip, no holder to wake), or, with none of its own
         * (another's share of a grouped commit), has the holder make it.
         * The acknowledgements come through the holder either way.
         */
        apr_uint32_t ticket = lessons_lease_ask(ls->block), upto = 0;

        switch (lessons_lease_turn(ls->block, ticket,
                                   start + LESSONS_LEASE_ASK_WAIT, chk,
                                   &upto)) {
        case LESSONS_LEASE_TURN_ANSWERED:
            via = " (shared)";
            asked = 1;
            break;
        case LESSONS_LEASE_TURN_LEAD:
            if (c->db.handle && c->db_pool) {
                /* With datagrams, a check that notifies no one; again
                 * with NOTIFY when a listed server hears only so.
                 */
                lessons_alone_e a =
                    lessons_lease_check_alone(c, ls->peer ? NULL : ls->name,
                                              chk, &err);

                if (a == LESSONS_ALONE_OK && ls->peer
                    && lessons_peer_round_needs_notify(chk, ls->name)) {
                    a = lessons_lease_check_alone(c, ls->name, chk, &err);
                }
                if (a == LESSONS_ALONE_OK) {
                    lessons_lease_heard_check(ls->block, chk, chk->at);
                    lessons_lease_led(ls->block, ticket, upto, chk);
                    asked = 1;
                    send = ls->peer != NULL;
                    break;
                }
            }
            else {
                apr_size_t n = 1;

                via = " (by the holder)";
                (void)apr_file_write(ls->bell_out, "w", &n);
                asked = lessons_lease_answer(ls->block, ticket,
                                             start + LESSONS_LEASE_ASK_WAIT,
                                             chk);
                send = asked && ls->peer != NULL;
            }
            /* The holder's check answered the others too (or nothing
             * did: they take their turn).
             */
            lessons_lease_led(ls->block, ticket, upto, NULL);
            err = NULL;
            break;
        case LESSONS_LEASE_TURN_NONE:
            break;
        }
    }
    /* This server serves the write from now on: its holder need not
     * catch up on it (lessons_holder_heard).
     */
    if (asked && !chk->overflow) {
        (void)lessons_lease_raise(ls->block, &chk->version);
    }
    /* The round's leader tells the servers with an address itself, and
     * hears their answers for every write of the round.
     */
    if (send) {
        round = lessons_peer_round_start(r->pool, ls->name, chk, NULL);
    }
    checked = lessons_lease_clock();
    alone = !asked;
    if (alone) {
        switch (lessons_lease_check_alone(c, ls->name, chk, &err)) {
        case LESSONS_ALONE_NONE:
            return;
        case LESSONS_ALONE_NO_CONNECTION:
        case LESSONS_ALONE_FAILED:
            /* Nobody to ask: wait out a lease of this server's length,
             * which every server of the database should share.
             */
            ap_log_rerror(APLOG_MARK, err ? APLOG_ERR : APLOG_INFO, 0, r,
                          LESSONSLOG(00795) "LessonsDBLease: the write is "
                          "committed, and with no check (%s) it waits out a "
                          "lease (%d ms) before it is answered",
                          err ? err : "the server's listening connection "
                          "is down", ls->length_ms);
            lessons_dbd_give_back(c);
            apr_sleep(apr_time_from_msec(ls->length_ms));
            return;
        case LESSONS_ALONE_OK:
            break;
        }
        later = apr_palloc(r->pool, sizeof(*later));
    }
    else {
        /* The wait needs no connection: one held through it (up to a
         * lease, for a server that does not answer) would keep this
         * process's reads waiting at the gate for it.
         */
        lessons_dbd_give_back(c);
    }
    for (;;) {
        now = lessons_lease_clock();
        if (lessons_lease_settled(ls->block, chk, now, &until, &bell)) {
            break;
        }
        if (!alone) {
            if (round) {
                lessons_peer_round_wait(round, ls->block, bell, until);
            }
            else {
                lessons_lease_sleep(ls->block, bell, until);
            }
            continue;
        }
        /* Alone: the acknowledgements from a later read (its leases
         * granted after the write hold it already).
         */
        apr_sleep(until - now < LESSONS_LEASE_POLL ? until - now
                                                   : LESSONS_LEASE_POLL);
        if (lessons_lease_check_alone(c, NULL, later, &err)
            == LESSONS_ALONE_OK) {
            lessons_lease_heard_check(ls->block, later, later->at);
        }
    }
    now = lessons_lease_clock();
    ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, LESSONSLOG(00799)
                  "LessonsDBLease: the write's check came in %" APR_TIME_T_FMT
                  " us%s, the acknowledgements %" APR_TIME_T_FMT " us later"
                  " (%d by datagram)",
                  checked - start, alone ? " (alone)" : via, now - checked,
                  round ? lessons_peer_round_answered(round) : 0);
    lessons_lease_log_wait(r, ls, now - start);
}

void lessons_lease_settle(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);
    lessons_lease_srv *ls = sconf->lease;
    apr_interval_time_t start;

#if defined(LESSONS_BREAK_LEASE) && LESSONS_BREAK_LEASE == 2
    /* Broken on purpose (make lease-broken): no wait for anyone. */
    return;
#endif
    if (!ls) {
        return;
    }
    start = lessons_lease_clock();
    lessons_lease_settle_from(c, ls, start);
    /* Counted whichever way it went (lessons_db_lease_write_wait_seconds). */
    lessons_lease_waited(ls->block, lessons_lease_clock() - start);
}
