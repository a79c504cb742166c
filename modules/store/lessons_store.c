/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_store.c: the only place SQL lives.  Every statement is
 * prepared (apr_dbd %d/%lld/%s placeholders, rewritten to ? or $n by the
 * driver), none is ever built from input, and the same text runs on
 * every engine; only the transaction control is plain constant text
 * (how a write transaction begins is the engine's).  Create and update run their write and the
 * read-back of the stored lesson in one transaction, so a write either
 * commits with the lesson it answers or leaves nothing behind.  Where a
 * statement is a round trip (PostgreSQL), both are one statement, which
 * is its own transaction: a data-modifying WITH and the same read.
 */
#include <limits.h>
#include <string.h>
#include <sys/uio.h>

#include "apr_strings.h"

#include "base/lessons_decimal.h"
#include "store/lessons_engine.h"
#include "store/lessons_store.h"

/* Where a statement reads the database's epoch: the engine's epoch_sql
 * takes its place when the statement is prepared.
 */
#define LESSONS_EPOCH "{epoch}"

/* A lesson's columns, from l (a lesson row) and v (its level). */
#define LESSONS_SELECT \
    "SELECT l.id, l.level_id, v.name, v.code, l.title, l.sort_order, " \
    "l.topic, l.description, CASE WHEN l.is_active THEN 1 ELSE 0 END, " \
    "l.version, (SELECT " LESSONS_EPOCH " FROM lessons_database) "

#define LESSONS_COLUMNS \
    LESSONS_SELECT "FROM lessons l JOIN levels v ON v.id = l.level_id "

#define LESSONS_NCOLUMNS 11

/* If-Match, in the WHERE of the write itself: 0 = not asked, else the
 * row's version must be one of the four and the database the tag's.
 */
#define LESSONS_IF_MATCH \
    "(%d = 0 OR (version IN (%lld, %lld, %lld, %lld) " \
    "AND (SELECT " LESSONS_EPOCH " FROM lessons_database) = %s))"

/* Ask for the whole result at once (apr_dbd "random access").  In
 * sequential mode apr_dbd_pgsql only meets a server error while fetching,
 * and get_row then returns -1 -- the same as "no more rows" -- so a
 * failed query would read as an empty list or a missing lesson.
 */
#define LESSONS_FETCH_ALL 1

/* Selecting from levels makes a missing level insert nothing. */
#define LESSONS_INSERT \
    "INSERT INTO lessons (level_id, title, sort_order, topic, " \
    "description, is_active) " \
    "SELECT v.id, %s, %d, %s, %s, (%d = 1) FROM levels v WHERE v.id = %d "

/* LESSONS_INSERT's arguments for in, in its order (*active: the flag as
 * 0/1); one create's share of a batch's arguments too.
 */
#define LESSONS_INSERT_NARGS 6
static void lessons_insert_args(const lessons_input_t *in, int *active,
                                const void **args)
{
    *active = in->is_active ? 1 : 0;
    args[0] = in->title;
    args[1] = &in->order;
    args[2] = in->topic;
    args[3] = in->description;
    args[4] = active;
    args[5] = &in->level_id;
}

/* Writes only the fields sent (each flag 1: take the value, 0: keep the
 * column), so concurrent updates of different fields both land; the
 * level is checked only when it is sent.
 */
#define LESSONS_UPDATE \
    "UPDATE lessons SET " \
    "level_id = CASE WHEN %d = 1 THEN %d ELSE level_id END, " \
    "title = CASE WHEN %d = 1 THEN %s ELSE title END, " \
    "sort_order = CASE WHEN %d = 1 THEN %d ELSE sort_order END, " \
    "topic = CASE WHEN %d = 1 THEN %s ELSE topic END, " \
    "description = CASE WHEN %d = 1 THEN %s ELSE description END, " \
    "is_active = CASE WHEN %d = 1 THEN (%d = 1) ELSE is_active END " \
    "WHERE id = %lld AND " LESSONS_IF_MATCH " " \
    "AND (%d = 0 OR EXISTS (SELECT 1 FROM levels WHERE id = %d)) "

/* The row a write stored (the WITH's l), as LESSONS_COLUMNS gives a
 * lesson: the version its trigger set, the epoch read in the same
 * statement.
 */
#define LESSONS_WRITTEN \
    "RETURNING *) " LESSONS_SELECT "FROM l JOIN levels v ON v.id = l.level_id"

/* "(%d = 1)" turns the 0/1 flag into a boolean on PostgreSQL and stays
 * 0/1 on SQLite, so one statement text serves both.  Ids are %lld
 * (apr_int64_t, bigint on PostgreSQL); levels, orders and flags are %d.
 */
const lessons_statement_t lessons_statements[] = {
    { "lessons_list_all",
      LESSONS_COLUMNS "ORDER BY l.id" },
    { "lessons_list_level",
      LESSONS_COLUMNS "WHERE l.level_id = %d ORDER BY l.id" },
    { "lessons_list_levels",
      LESSONS_COLUMNS "WHERE l.level_id IN (%d, %d) "
      "ORDER BY l.level_id, l.sort_order, l.id" },
    { "lessons_get",
      LESSONS_COLUMNS "WHERE l.id = %lld" },
    { "lessons_create", LESSONS_INSERT "RETURNING id" },
    { "lessons_update", LESSONS_UPDATE },
    { "lessons_delete",
      "DELETE FROM lessons WHERE id = %lld AND " LESSONS_IF_MATCH },
    /* The catalog version: the database's identity and the sum of the
     * striped counters that every change of lessons or levels bumps.
     */
    { "lessons_catalog",
      "SELECT " LESSONS_EPOCH ", "
      "(SELECT sum(c.changes) FROM lessons_catalog c) FROM lessons_database" },
    { NULL, NULL }
};

/* The same writes with their read-back, one statement each, for engines
 * that write_returns (a data-modifying WITH; not SQLite's dialect).
 * Arguments as lessons_create's and lessons_update's.
 */
const lessons_statement_t lessons_statements_returning[] = {
    { "lessons_create_returning", "WITH l AS (" LESSONS_INSERT LESSONS_WRITTEN },
    { "lessons_update_returning", "WITH l AS (" LESSONS_UPDATE LESSONS_WRITTEN },
    { NULL, NULL }
};

/* The keys of retry-safe creates: a caller's key while it lives; the
 * key stored with its create's answer, over an expired one of the same
 * caller and key but never over a live one (0 rows then); a few expired
 * keys removed, oldest first.  Times are seconds since 1970, from the
 * caller, so that one text serves every engine.
 */
const lessons_statement_t lessons_statements_idempotency[] = {
    { "lessons_key_find",
      "SELECT fingerprint, status, lesson_id, location, etag, body "
      "FROM lessons_idempotency "
      "WHERE caller = %s AND idem_key = %s AND expires_at > %lld" },
    { "lessons_key_store",
      "INSERT INTO lessons_idempotency (caller, idem_key, fingerprint, "
      "lesson_id, status, location, etag, body, created_at, expires_at) "
      "VALUES (%s, %s, %s, %lld, %d, %s, %s, %s, %lld, %lld) "
      "ON CONFLICT (caller, idem_key) DO UPDATE SET "
      "fingerprint = excluded.fingerprint, lesson_id = excluded.lesson_id, "
      "status = excluded.status, location = excluded.location, "
      "etag = excluded.etag, body = excluded.body, "
      "created_at = excluded.created_at, expires_at = excluded.expires_at "
      "WHERE lessons_idempotency.expires_at <= %lld" },
    /* The limit is in the text: PostgreSQL's one plan for every value
     * (plan_cache_mode) of a LIMIT argument guesses a tenth of the table
     * and joins it by a scan of the whole; with 4 it looks up 4 keys.
     */
    { "lessons_key_sweep",
      "DELETE FROM lessons_idempotency WHERE (caller, idem_key) IN "
      "(SELECT caller, idem_key FROM lessons_idempotency "
      "WHERE expires_at <= %lld ORDER BY expires_at "
      "LIMIT " APR_STRINGIFY(LESSONS_KEY_SWEEP) ")" },
    { NULL, NULL }
};

#define LESSONS_KEY_CLAIM "lessons_key_claim"

/* A fenced statement's commit waits for the synchronous standbys only
 * with synchronous_commit on: set for its transaction alone (is_local),
 * so a role's or a database's "off" cannot open the fence.  The
 * fence's update joins it, so it is never left unevaluated.
 */
#define LESSONS_FENCE_SYNC \
    "SELECT set_config('synchronous_commit', 'on', true) AS sync"

/* Read leases (docs/scaling.md).  The renewal locks the counters FOR
 * SHARE while it reads them: a write's counter update and a renewal
 * take turns, so every write is either in the renewal's version or
 * commits after the renewal (and then sees its row).  The payloads are
 * "r TERM SERVER" and "a TERM SUM SERVER EPOCH": names and epochs have
 * no spaces.
 */
const lessons_statement_t lessons_statements_leases[] = {
    /* Fenced (lessons_lease_fence in schema.pgsql.sql): the update of
     * a logged row makes the commit wait for the synchronous standbys,
     * so a deposed primary grants no lease.  Only if synchronous_commit
     * is on at the commit: the statement sets it for its own
     * transaction, whatever the role, the database or the session say
     * (the holder's connection once said off, and a resumed old primary
     * granted leases).
     */
    { "lessons_lease_renew",
      "WITH c AS (SELECT changes FROM lessons_catalog FOR SHARE), "
      "s AS (" LESSONS_FENCE_SYNC "), "
      "f AS (UPDATE lessons_lease_fence SET n = n + 1 FROM s WHERE id = 1 "
      "RETURNING n), "
      "r AS (INSERT INTO lessons_leases (server, term, length_ms, peer) "
      "VALUES (%s, nextval('lessons_lease_terms'), %d, %s) "
      "ON CONFLICT (server) DO UPDATE SET term = excluded.term, "
      "length_ms = excluded.length_ms, renewed = now(), "
      "peer = excluded.peer RETURNING term), "
      "n AS (SELECT r.term, pg_notify('lessons_lease', 'r ' || r.term || "
      "' ' || %s) FROM r CROSS JOIN f) "
      "SELECT (SELECT " LESSONS_EPOCH " FROM lessons_database), "
      "(SELECT sum(changes) FROM c), "
      "l.server, l.term, l.length_ms, l.epoch, l.acked, l.peer, n.term "
      "FROM n LEFT JOIN lessons_leases l ON l.server <> %s "
      "AND l.renewed > now() - l.length_ms * interval '1 millisecond'" },
    { "lessons_lease_check",
      "SELECT (SELECT " LESSONS_EPOCH " FROM lessons_database), "
      "(SELECT sum(changes) FROM lessons_catalog), "
      "l.server, l.term, l.length_ms, l.epoch, l.acked, l.peer "
      "FROM (SELECT 1) AS one LEFT JOIN lessons_leases l ON true" },
    /* The same for writers: it tells every listening server that the
     * catalogue moved, to which version ("SUM SERVER EPOCH": the
     * writer's server raised its own version to it, and its holder
     * need not catch up).  Its own transaction, with no data written: no
     * WAL flush under the notification queue's lock, which a NOTIFY in
     * the writes' trigger held through each write's commit.
     */
    { "lessons_lease_check_notify",
      "WITH v AS (SELECT (SELECT " LESSONS_EPOCH " FROM lessons_database) "
      "AS e, (SELECT sum(changes) FROM lessons_catalog) AS s), "
      "n AS (SELECT pg_notify('lessons_catalog', v.s || ' ' || %s || ' ' "
      "|| v.e || %s) FROM v) "
      "SELECT v.e, v.s, l.server, l.term, l.length_ms, l.epoch, l.acked, "
      "l.peer FROM v CROSS JOIN (SELECT 1 FROM n) AS one "
      "LEFT JOIN lessons_leases l ON true" },
    { "lessons_lease_ack",
      "WITH u AS (UPDATE lessons_leases SET epoch = %s, acked = %lld "
      "WHERE server = %s RETURNING term, server) "
      "SELECT u.term, pg_notify('lessons_lease', 'a ' || u.term || ' ' "
      "|| %lld || ' ' || u.server || ' ' || %s) FROM u" },
    { "lessons_lease_release",
      "DELETE FROM lessons_leases WHERE server = %s" },
    /* A server that heard of a change: the version read and recorded as
     * acknowledged in one statement, for a server that stopped serving
     * from its lease before it sent it and installs the version after.
     * The epoch recorded is the one the module makes (the row's and the
     * server's history, %s).
     */
    { "lessons_lease_catch_up",
      "WITH v AS (SELECT (SELECT " LESSONS_EPOCH " FROM lessons_database) "
      "AS e, (SELECT sum(changes) FROM lessons_catalog) AS s), "
      "u AS (UPDATE lessons_leases l SET epoch = v.e || %s, acked = v.s "
      "FROM v WHERE l.server = %s RETURNING l.term, l.epoch, l.acked) "
      "SELECT v.e, v.s, u.term, pg_notify('lessons_lease', 'a ' || u.term "
      "|| ' ' || u.acked || ' ' || %s || ' ' || u.epoch) "
      "FROM v LEFT JOIN u ON true" },
    /* The catalogue version behind the fence, for a server that serves
     * no lease: its commit waits for the synchronous standbys.  A
     * primary that was frozen, deposed meanwhile and resumed (its
     * standbys follow another now) never answers it, and
     * LessonsDBTimeout ends the read: no version from a primary that is
     * no longer one (issue 58).  A transaction ID alone would not do: a
     * commit that wrote no WAL waits for nobody.
     */
    { "lessons_lease_fence",
      "WITH s AS (" LESSONS_FENCE_SYNC "), "
      "f AS (UPDATE lessons_lease_fence SET n = n + 1 FROM s WHERE id = 1 "
      "RETURNING n) "
      "SELECT (SELECT " LESSONS_EPOCH " FROM lessons_database), "
      "(SELECT sum(changes) FROM lessons_catalog), f.n "
      "FROM f" },
    { NULL, NULL }
};


static lessons_store_e lessons_store_fail(const lessons_db_t *db,
                                          apr_pool_t *p, int rv,
                                          const char *what,
                                          const char **err)
{
    const char *msg = apr_dbd_error(db->driver, db->handle, rv);

    *err = apr_psprintf(p, "%s: %s (driver code %d)", what,
                        msg ? msg : "unknown error", rv);
    return LESSONS_STORE_ERROR;
}

static apr_dbd_prepared_t *lessons_store_stmt(const lessons_db_t *db,
                                              apr_pool_t *p,
                                              const char *label,
                                              const char **err)
{
    apr_dbd_prepared_t *stmt = NULL;

    if (db && db->prepared) {
        stmt = apr_hash_get(db->prepared, label, APR_HASH_KEY_STRING);
    }
    if (!stmt) {
        *err = apr_psprintf(p, "statement %s is not prepared on this "
                            "connection", label);
    }
    return stmt;
}

/* A statement's text with epoch_sql wherever it reads the epoch, made
 * in one allocation (a batch's text holds the epoch once per write).
 */
static const char *lessons_store_sql(apr_pool_t *p, const char *sql,
                                     const char *epoch_sql)
{
    const apr_size_t n = sizeof(LESSONS_EPOCH) - 1, m = strlen(epoch_sql);
    apr_size_t count = 0, len = strlen(sql);
    const char *at, *from;
    char *out, *to;

    for (at = strstr(sql, LESSONS_EPOCH); at;
         at = strstr(at + n, LESSONS_EPOCH)) {
        count++;
    }
    to = out = apr_palloc(p, len - count * n + count * m + 1);
    for (from = sql; (at = strstr(from, LESSONS_EPOCH)) != NULL;
         from = at + n) {
        memcpy(to, from, at - from);
        to += at - from;
        memcpy(to, epoch_sql, m);
        to += m;
    }
    memcpy(to, from, strlen(from) + 1);
    return out;
}

/* Prepare one table of statements on the connection, each under its
 * label (and on the server under the label and suffix).
 */
static lessons_store_e lessons_store_prepare_table(
    lessons_db_t *db, apr_pool_t *p, const lessons_statement_t *table,
    const char *suffix, const char *epoch_sql, const char **err)
{
    const lessons_statement_t *s;
    apr_dbd_prepared_t *stmt;
    apr_pool_t *scratch;
    int rv;

    /* The texts are made in a pool (and allocator) of their own, given
     * back once prepared: the connection's pool (p, for its life) keeps
     * only what apr_dbd keeps of each.
     */
    if (apr_pool_create_unmanaged_ex(&scratch, NULL, NULL) != APR_SUCCESS) {
        *err = "out of memory preparing statements";
        return LESSONS_STORE_ERROR;
    }
    for (s = table; s->label; s++) {
        const char *name = suffix ? apr_pstrcat(p, s->label, "_", suffix,
                                                NULL)
                                  : s->label;

        stmt = NULL;
        rv = apr_dbd_prepare(db->driver, p, db->handle,
                             lessons_store_sql(scratch, s->sql, epoch_sql),
                             name, &stmt);
        apr_pool_clear(scratch);
        if (rv != 0 || !stmt) {
            apr_pool_destroy(scratch);
            return lessons_store_fail(db, p, rv, s->label, err);
        }
        apr_hash_set(db->prepared, s->label, APR_HASH_KEY_STRING, stmt);
    }
    apr_pool_destroy(scratch);
    return LESSONS_STORE_OK;
}

/* n writes in one statement, for engines that write_returns: n
 * data-modifying WITHs (each a write's, its own arguments in turn) and
 * their read-backs, each row tagged with its write's place (1..n) in a
 * last column.  A write that stores nothing (a create for a missing
 * level, an update that finds no row to change) gives no row.  Made from
 * the constant texts above, never from input.
 */
static const char *lessons_batch_sql(apr_pool_t *p, const char *write,
                                     int n)
{
    /* 13 pieces per write and 1 between: one allocation, not n. */
    struct iovec v[14 * LESSONS_STORE_BATCH_MAX + 2];
    char at[LESSONS_STORE_BATCH_MAX][8];
    apr_size_t k = 0;
    int i;

#define LESSONS_PIECE(s) (v[k].iov_base = (void *)(s), \
                          v[k].iov_len = strlen(s), k++)
    for (i = 0; i < n && i < LESSONS_STORE_BATCH_MAX; i++) {
        apr_snprintf(at[i], sizeof(at[i]), "%d", i + 1);
        LESSONS_PIECE(i > 0 ? ", l" : "WITH l");
        LESSONS_PIECE(at[i]);
        LESSONS_PIECE(" AS (");
        LESSONS_PIECE(write);
        LESSONS_PIECE("RETURNING *)");
    }
    LESSONS_PIECE(" ");
    for (i = 0; i < n && i < LESSONS_STORE_BATCH_MAX; i++) {
        LESSONS_PIECE(i > 0 ? " UNION ALL " LESSONS_SELECT ", "
                            : LESSONS_SELECT ", ");
        LESSONS_PIECE(at[i]);
        LESSONS_PIECE(" FROM l");
        LESSONS_PIECE(at[i]);
        LESSONS_PIECE(" l JOIN levels v ON v.id = l.level_id");
    }
#undef LESSONS_PIECE
    return apr_pstrcatv(p, v, k, NULL);
}

static const char *lessons_batch_label(apr_pool_t *p, const char *kind,
                                       int n)
{
    return apr_psprintf(p, "lessons_%s_batch_%d", kind, n);
}

/* The batch statements for 2..LESSONS_STORE_BATCH_MAX creates, then as
 * many updates: their labels (the keys of db->prepared) in p, their
 * texts in tmp, to be let go once prepared.
 */
static const lessons_statement_t *lessons_batch_table(apr_pool_t *p,
                                                      apr_pool_t *tmp)
{
    lessons_statement_t *t = apr_pcalloc(tmp, (2 * LESSONS_STORE_BATCH_MAX
                                               - 1) * sizeof(*t));
    lessons_statement_t *u = t + LESSONS_STORE_BATCH_MAX - 1;
    int n;

    for (n = 2; n <= LESSONS_STORE_BATCH_MAX; n++) {
        t[n - 2].label = lessons_batch_label(p, "create", n);
        t[n - 2].sql = lessons_batch_sql(tmp, LESSONS_INSERT, n);
        u[n - 2].label = lessons_batch_label(p, "update", n);
        u[n - 2].sql = lessons_batch_sql(tmp, LESSONS_UPDATE, n);
    }
    return t;                       /* ends with { NULL, NULL } */
}

/* How the engine's statements read the epoch (LESSONS_EPOCH). */
static const char *lessons_store_epoch_sql(const lessons_engine_t *engine)
{
    return engine && engine->epoch_sql ? engine->epoch_sql : "epoch";
}

lessons_store_e lessons_store_prepare(lessons_db_t *db, apr_pool_t *p,
                                      const char *suffix, const char **err)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);
    const char *epoch_sql = lessons_store_epoch_sql(engine);
    lessons_store_e rc;

    if (!db->prepared) {
        db->prepared = apr_hash_make(p);
    }
    rc = lessons_store_prepare_table(db, p, lessons_statements, suffix,
                                     epoch_sql, err);
    if (rc == LESSONS_STORE_OK && engine && engine->write_returns) {
        rc = lessons_store_prepare_table(db, p, lessons_statements_returning,
                                         suffix, epoch_sql, err);
    }
    return rc;
}

/* Statements prepared apart (into fresh's hash, so that one that failed
 * left none of them in db->prepared) join the connection's.
 */
static void lessons_store_merge(lessons_db_t *db, apr_pool_t *p,
                                const lessons_db_t *fresh)
{
    apr_hash_index_t *hi;

    if (!db->prepared) {
        db->prepared = apr_hash_make(p);
    }
    for (hi = apr_hash_first(p, fresh->prepared); hi;
         hi = apr_hash_next(hi)) {
        const void *label;
        void *stmt;

        apr_hash_this(hi, &label, NULL, &stmt);
        apr_hash_set(db->prepared, label, APR_HASH_KEY_STRING, stmt);
    }
}

lessons_store_e lessons_store_prepare_idempotency(lessons_db_t *db,
                                                  apr_pool_t *p,
                                                  const char *suffix,
                                                  const char **err)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);
    lessons_statement_t claim[2] = { { NULL, NULL }, { NULL, NULL } };
    lessons_db_t fresh = *db;
    lessons_store_e rc;

    /* Into a hash of their own first: a statement that fails leaves
     * none of them in db->prepared, whatever went before it.
     */
    fresh.prepared = apr_hash_make(p);
    rc = lessons_store_prepare_table(&fresh, p,
                                     lessons_statements_idempotency, suffix,
                                     "epoch", err);
    if (rc == LESSONS_STORE_OK && engine && engine->claim_sql) {
        claim[0].label = LESSONS_KEY_CLAIM;
        claim[0].sql = engine->claim_sql;
        rc = lessons_store_prepare_table(&fresh, p, claim, suffix, "epoch",
                                         err);
    }
    if (rc == LESSONS_STORE_OK) {
        lessons_store_merge(db, p, &fresh);
    }
    return rc;
}

/* A table of statements prepared apart: into a hash of their own
 * first, so that one that fails leaves none of them in db->prepared.
 */
static lessons_store_e lessons_store_prepare_apart(
    lessons_db_t *db, apr_pool_t *p, const lessons_statement_t *table,
    const char *suffix, const char **err)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);
    lessons_db_t fresh = *db;
    lessons_store_e rc;

    fresh.prepared = apr_hash_make(p);
    rc = lessons_store_prepare_table(&fresh, p, table, suffix,
                                     lessons_store_epoch_sql(engine), err);
    if (rc == LESSONS_STORE_OK) {
        lessons_store_merge(db, p, &fresh);
    }
    return rc;
}

lessons_store_e lessons_store_prepare_batches(lessons_db_t *db,
                                              apr_pool_t *p,
                                              const char *suffix,
                                              const char **err)
{
    lessons_store_e rc;
    apr_pool_t *tmp;

    if (lessons_store_batches_ready(db)) {
        return LESSONS_STORE_OK;
    }
    if (apr_pool_create_unmanaged_ex(&tmp, NULL, NULL) != APR_SUCCESS) {
        *err = "out of memory preparing statements";
        return LESSONS_STORE_ERROR;
    }
    rc = lessons_store_prepare_apart(db, p, lessons_batch_table(p, tmp),
                                     suffix, err);
    apr_pool_destroy(tmp);
    return rc;
}

int lessons_store_batches_ready(const lessons_db_t *db)
{
    const lessons_engine_t *engine = lessons_engine_of(db ? db->driver
                                                          : NULL);

    return !engine || !engine->write_returns
           || (db->prepared
               && apr_hash_get(db->prepared, "lessons_update_batch_2",
                               APR_HASH_KEY_STRING) != NULL);
}

lessons_store_e lessons_store_prepare_leases(lessons_db_t *db,
                                             apr_pool_t *p,
                                             const char *suffix,
                                             const char **err)
{
    return lessons_store_prepare_apart(db, p, lessons_statements_leases,
                                       suffix, err);
}

int lessons_store_leases_ready(const lessons_db_t *db)
{
    return db && db->prepared
           && apr_hash_get(db->prepared, lessons_statements_leases[0].label,
                           APR_HASH_KEY_STRING) != NULL;
}

int lessons_store_idempotency_ready(const lessons_db_t *db)
{
    return db && db->prepared
           && apr_hash_get(db->prepared, lessons_statements_idempotency[0].label,
                           APR_HASH_KEY_STRING) != NULL;
}

/* A whole decimal column value as a 64-bit integer (not through errno,
 * which a signal handler may change meanwhile: lessons_decimal.h).
 */
static int lessons_parse_i64(const char *s, apr_int64_t *out)
{
    return s && lessons_decimal_i64(s, strlen(s), APR_INT64_MIN,
                                    APR_INT64_MAX, out);
}

static int lessons_parse_int(const char *s, int *out)
{
    apr_int64_t v;

    if (!lessons_parse_i64(s, &v) || v < INT_MIN || v > INT_MAX) {
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* The epoch a tag and a catalog version carry: the lessons_database
 * row's, then the server's history where the engine has one.
 */
static const char *lessons_store_epoch(const lessons_db_t *db,
                                       apr_pool_t *p, const char *stored)
{
    return db->identity ? apr_pstrcat(p, stored, db->identity, NULL)
                        : apr_pstrdup(p, stored);
}

/* Does an epoch end with the history of db's server (and hold more)?
 * Any epoch does for an engine without one.
 */
static int lessons_store_epoch_here(const lessons_db_t *db,
                                    const char *epoch)
{
    apr_size_t n, k;

    if (!db->identity) {
        return 1;
    }
    if (!epoch) {
        return 0;
    }
    n = strlen(epoch);
    k = strlen(db->identity);
    return n > k && memcmp(epoch + n - k, db->identity, k) == 0;
}

/* One joined row into a lesson.  Every column is checked: a NULL or a
 * non-integer where an integer belongs means the row is not ours.
 */
static int lessons_row_lesson(const lessons_db_t *db, apr_pool_t *p,
                              apr_dbd_row_t *row, lessons_lesson_t *l)
{
    const char *c[LESSONS_NCOLUMNS];
    int i;

    for (i = 0; i < LESSONS_NCOLUMNS; i++) {
        c[i] = apr_dbd_get_entry(db->driver, row, i);
        if (!c[i]) {
            return 0;
        }
    }
    if (!lessons_parse_i64(c[0], &l->id)
        || !lessons_parse_int(c[1], &l->level_id)
        || !lessons_parse_int(c[5], &l->order)
        || !lessons_parse_int(c[8], &l->is_active)
        || !lessons_parse_i64(c[9], &l->version)) {
        return 0;
    }
    l->epoch = lessons_store_epoch(db, p, c[10]);
    l->level_name = apr_pstrdup(p, c[2]);
    l->level_code = apr_pstrdup(p, c[3]);
    l->title = apr_pstrdup(p, c[4]);
    l->topic = apr_pstrdup(p, c[6]);
    l->description = apr_pstrdup(p, c[7]);
    return 1;
}

/* The numbers of a row's NULL columns ("none": a value did not parse). */
static const char *lessons_row_nulls(const lessons_db_t *db, apr_pool_t *p,
                                     apr_dbd_row_t *row)
{
    const char *nulls = NULL;
    int i;

    for (i = 0; i < LESSONS_NCOLUMNS; i++) {
        if (!apr_dbd_get_entry(db->driver, row, i)) {
            nulls = nulls ? apr_psprintf(p, "%s, %d", nulls, i)
                          : apr_itoa(p, i);
        }
    }
    return nulls ? nulls : "none";
}

/* Run a lesson SELECT and read every row to the end (apr_dbd needs that
 * to release the result), collecting lessons into *out.
 */
static lessons_store_e lessons_store_rows(const lessons_db_t *db,
                                          apr_pool_t *p, const char *label,
                                          const void **args,
                                          apr_array_header_t **out,
                                          const char **err)
{
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    apr_array_header_t *list;
    const char *what = "";
    int rv, bad = 0;

    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    rv = apr_dbd_pbselect(db->driver, p, db->handle, &res, stmt,
                          LESSONS_FETCH_ALL, args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, apr_pstrcat(p, label,
                                  " (select)", NULL), err);
    }
    list = apr_array_make(p, 16, sizeof(lessons_lesson_t));
    while ((rv = apr_dbd_get_row(db->driver, p, res, &row, -1)) == 0) {
        lessons_lesson_t *l = apr_array_push(list);
        if (!lessons_row_lesson(db, p, row, l) && !bad) {
            bad = list->nelts;
            what = lessons_row_nulls(db, p, row);
        }
    }
    if (rv != -1) {
        return lessons_store_fail(db, p, rv, apr_pstrcat(p, label,
                                  " (fetch)", NULL), err);
    }
    if (bad) {
        /* Which row of how many, and which of its columns were NULL
         * (numbers only: never a value), to tell a driver's fault from
         * a schema's.
         */
        *err = apr_psprintf(p, "%s: a row has NULL or malformed columns "
                            "(row %d of %d; NULL: %s)", label, bad,
                            list->nelts, what);
        return LESSONS_STORE_ERROR;
    }
    *out = list;
    return LESSONS_STORE_OK;
}

lessons_store_e lessons_store_list_all(const lessons_db_t *db, apr_pool_t *p,
                                       apr_array_header_t **out,
                                       const char **err)
{
    return lessons_store_rows(db, p, "lessons_list_all", NULL, out, err);
}

lessons_store_e lessons_store_list_level(const lessons_db_t *db,
                                         apr_pool_t *p, int level,
                                         apr_array_header_t **out,
                                         const char **err)
{
    const void *args[] = { &level };

    return lessons_store_rows(db, p, "lessons_list_level", args, out, err);
}

lessons_store_e lessons_store_list_levels(const lessons_db_t *db,
                                          apr_pool_t *p, int first,
                                          int second,
                                          apr_array_header_t **out,
                                          const char **err)
{
    const void *args[] = { &first, &second };

    return lessons_store_rows(db, p, "lessons_list_levels", args, out, err);
}

lessons_store_e lessons_store_get(const lessons_db_t *db, apr_pool_t *p,
                                  apr_int64_t id, lessons_lesson_t *out,
                                  const char **err)
{
    const void *args[] = { &id };
    apr_array_header_t *list = NULL;
    lessons_store_e rc;

    rc = lessons_store_rows(db, p, "lessons_get", args, &list, err);
    if (rc != LESSONS_STORE_OK) {
        return rc;
    }
    if (list->nelts == 0) {
        return LESSONS_STORE_NOT_FOUND;
    }
    *out = APR_ARRAY_IDX(list, 0, lessons_lesson_t);
    return LESSONS_STORE_OK;
}

/* Transactions, as our own BEGIN / COMMIT / ROLLBACK (constant texts).
 * Not apr_dbd_transaction_start: apr_dbd_pgsql (apr-util 1.6.3)
 * dereferences a NULL transaction when BEGIN fails with a result, as it
 * does on a pooled connection whose backend went away, and that kills
 * the httpd child.  The engine says how to begin (SQLite: IMMEDIATE, so
 * the write lock is taken up front and a transaction never fails
 * half-way for want of it).
 */
static lessons_store_e lessons_txn_run(const lessons_db_t *db, apr_pool_t *p,
                                       const char *what, const char *sql,
                                       const char **err)
{
    int rv, nrows = 0;

    rv = apr_dbd_query(db->driver, db->handle, &nrows, sql);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, apr_psprintf(p, "%s (%s)",
                                  what, sql), err);
    }
    return LESSONS_STORE_OK;
}

static lessons_store_e lessons_txn_begin(const lessons_db_t *db,
                                         apr_pool_t *p, const char *what,
                                         const char **err)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);

    return lessons_txn_run(db, p, what, engine ? engine->begin_sql : "BEGIN",
                           err);
}

/* End what lessons_txn_begin began (or tried to): COMMIT when rc is OK,
 * else ROLLBACK, so that nothing is stored unless all of it is.  A failed
 * COMMIT is rolled back too (SQLite keeps the transaction open after a
 * busy COMMIT): the connection never goes back to the pool inside a
 * transaction.  A failed COMMIT, or a failed ROLLBACK after NOT_FOUND or
 * NO_LEVEL, is an ERROR; after a failed BEGIN the ROLLBACK may fail
 * (there is no transaction) and rc stays as it is.
 */
static lessons_store_e lessons_txn_end(const lessons_db_t *db, apr_pool_t *p,
                                       const char *what, lessons_store_e rc,
                                       const char **err)
{
    const char *rollback_err = NULL;

    if (rc == LESSONS_STORE_OK) {
        rc = lessons_txn_run(db, p, what, "COMMIT", err);
        if (rc == LESSONS_STORE_OK) {
            return rc;
        }
    }
    if (lessons_txn_run(db, p, what, "ROLLBACK", &rollback_err)
        != LESSONS_STORE_OK && rc != LESSONS_STORE_ERROR) {
        *err = rollback_err;
        return LESSONS_STORE_ERROR;
    }
    return rc;
}

/* Read back a lesson just written in this transaction: it must be
 * there.
 */
static lessons_store_e lessons_store_read_back(const lessons_db_t *db,
                                               apr_pool_t *p,
                                               const char *what,
                                               apr_int64_t id,
                                               lessons_lesson_t *out,
                                               const char **err)
{
    lessons_store_e rc = lessons_store_get(db, p, id, out, err);

    if (rc == LESSONS_STORE_NOT_FOUND) {
        *err = apr_psprintf(p, "%s: lesson %" APR_INT64_T_FMT " is not "
                            "there after the write", what, id);
        return LESSONS_STORE_ERROR;
    }
    return rc;
}

/* Run a statement that gives at most one row, reading every row (as
 * apr_dbd needs) and keeping the first one's first n columns, copied
 * into p (NULL for a NULL or missing column); *rows says how many rows
 * came back.
 */
static lessons_store_e lessons_store_one(const lessons_db_t *db,
                                         apr_pool_t *p, const char *label,
                                         const void **args,
                                         const char **cols, int n,
                                         int *rows, const char **err)
{
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    int rv, i, ncols;

    for (i = 0; i < n; i++) {
        cols[i] = NULL;
    }
    *rows = 0;
    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    rv = apr_dbd_pbselect(db->driver, p, db->handle, &res, stmt,
                          LESSONS_FETCH_ALL, args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    ncols = apr_dbd_num_cols(db->driver, res);
    while ((rv = apr_dbd_get_row(db->driver, p, res, &row, -1)) == 0) {
        for (i = 0; *rows == 0 && i < n && i < ncols; i++) {
            const char *v = apr_dbd_get_entry(db->driver, row, i);

            cols[i] = v ? apr_pstrdup(p, v) : NULL;
        }
        (*rows)++;
    }
    if (rv != -1) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    return LESSONS_STORE_OK;
}

/* The INSERT ... RETURNING id: no row back means no such level. */
static lessons_store_e lessons_store_insert(const lessons_db_t *db,
                                            apr_pool_t *p,
                                            const lessons_input_t *in,
                                            apr_int64_t *id,
                                            const char **err)
{
    int active, rows = 0;
    const void *args[LESSONS_INSERT_NARGS];
    const char *cols[2];
    lessons_store_e rc;

    lessons_insert_args(in, &active, args);
    rc = lessons_store_one(db, p, "lessons_create", args, cols, 2, &rows,
                           err);
    if (rc != LESSONS_STORE_OK) {
        return rc;
    }
    if (rows == 0) {
        return LESSONS_STORE_NO_LEVEL;
    }
    if (!lessons_parse_i64(cols[0], id)) {
        *err = "lessons_create: RETURNING gave no usable id";
        return LESSONS_STORE_ERROR;
    }
    return LESSONS_STORE_OK;
}

/* Does this connection write and read back in one statement? */
static int lessons_store_write_returns(const lessons_db_t *db)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);

    return engine && engine->write_returns;
}

/* A write that returns the lesson it stored (lessons_statements_
 * returning): at most one row, copied to *out; *rows says how many.
 */
static lessons_store_e lessons_store_written(const lessons_db_t *db,
                                             apr_pool_t *p,
                                             const char *label,
                                             const void **args,
                                             lessons_lesson_t *out,
                                             int *rows, const char **err)
{
    apr_array_header_t *list = NULL;
    lessons_store_e rc = lessons_store_rows(db, p, label, args, &list, err);

    *rows = 0;
    if (rc != LESSONS_STORE_OK) {
        return rc;
    }
    if (list->nelts > 1) {
        *err = apr_psprintf(p, "%s: %d rows written, one expected", label,
                            list->nelts);
        return LESSONS_STORE_ERROR;
    }
    if (list->nelts == 1) {
        *out = APR_ARRAY_IDX(list, 0, lessons_lesson_t);
        *rows = 1;
    }
    return LESSONS_STORE_OK;
}

/* Create in one statement: no row back means no such level. */
static lessons_store_e lessons_store_create_returning(
    const lessons_db_t *db, apr_pool_t *p, const lessons_input_t *in,
    lessons_lesson_t *out, const char **err)
{
    int active, rows = 0;
    const void *args[LESSONS_INSERT_NARGS];
    lessons_store_e rc;

    lessons_insert_args(in, &active, args);
    rc = lessons_store_written(db, p, "lessons_create_returning", args, out,
                               &rows, err);
    if (rc == LESSONS_STORE_OK && rows == 0) {
        return LESSONS_STORE_NO_LEVEL;
    }
    return rc;
}

/* A create needs every field (create-decoded input). */
static int lessons_input_complete(const lessons_input_t *in,
                                  const char **err)
{
    if (!in->title || !in->topic || !in->description) {
        *err = "lessons_create: incomplete input";
        return 0;
    }
    return 1;
}

/* Insert and read back in the transaction that is open: the stored
 * lesson, or NO_LEVEL.
 */
static lessons_store_e lessons_store_insert_read(const lessons_db_t *db,
                                                 apr_pool_t *p,
                                                 const char *what,
                                                 const lessons_input_t *in,
                                                 lessons_lesson_t *out,
                                                 const char **err)
{
    apr_int64_t id = 0;
    lessons_store_e rc = lessons_store_insert(db, p, in, &id, err);

    if (rc == LESSONS_STORE_OK) {
        rc = lessons_store_read_back(db, p, what, id, out, err);
    }
    return rc;
}

lessons_store_e lessons_store_create(const lessons_db_t *db, apr_pool_t *p,
                                     const lessons_input_t *in,
                                     lessons_lesson_t *out,
                                     const char **err)
{
    const char *what = "lessons_create";
    lessons_store_e rc;

    if (!lessons_input_complete(in, err)) {
        return LESSONS_STORE_ERROR;
    }
    if (lessons_store_write_returns(db)) {
        return lessons_store_create_returning(db, p, in, out, err);
    }
    rc = lessons_txn_begin(db, p, what, err);
    if (rc == LESSONS_STORE_OK) {
        rc = lessons_store_insert_read(db, p, what, in, out, err);
    }
    return lessons_txn_end(db, p, what, rc, err);
}

int lessons_store_batch_max(const lessons_db_t *db)
{
    return lessons_store_write_returns(db) ? LESSONS_STORE_BATCH_MAX
                                           : INT_MAX;
}

/* One row of a batch: its create's place (the last column) and lesson,
 * into that job.  0 if the row is not ours (no such place, or a place
 * given twice, or a malformed lesson).
 */
static int lessons_batch_row(const lessons_db_t *db, apr_dbd_row_t *row,
                             lessons_store_write_job_t **jobs, int n)
{
    lessons_store_write_job_t *job;
    int at;

    if (!lessons_parse_int(apr_dbd_get_entry(db->driver, row,
                                             LESSONS_NCOLUMNS), &at)
        || at < 1 || at > n) {
        return 0;
    }
    job = jobs[at - 1];
    if (job->rc == LESSONS_STORE_OK
        || !lessons_row_lesson(db, job->pool, row, &job->out)) {
        return 0;
    }
    job->rc = LESSONS_STORE_OK;
    return 1;
}

/* Rows that are not ours after a statement that committed: the creates
 * may be stored, so none is made again.
 */
static lessons_store_e lessons_batch_unsure(lessons_store_write_job_t **jobs,
                                            int n, const char *why,
                                            const char **err)
{
    int i;

    *err = why;
    for (i = 0; i < n; i++) {
        jobs[i]->rc = LESSONS_STORE_ERROR;
        jobs[i]->fault = LESSONS_DB_ERROR;
        jobs[i]->err = apr_pstrdup(jobs[i]->pool, why);
    }
    return LESSONS_STORE_ERROR;
}

/* Do n writes fit in one batch statement? */
static int lessons_batch_fits(apr_pool_t *p, const char *what, int n,
                              const char **err)
{
    if (n > LESSONS_STORE_BATCH_MAX) {
        *err = apr_psprintf(p, "%s: %d writes, at most %d in one statement",
                            what, n, LESSONS_STORE_BATCH_MAX);
        return 0;
    }
    return 1;
}

/* Run a batch statement and hand each row to its job. */
static lessons_store_e lessons_batch_run(const lessons_db_t *db,
                                         apr_pool_t *p, const char *label,
                                         apr_dbd_prepared_t *stmt,
                                         const void **args,
                                         lessons_store_write_job_t **jobs,
                                         int n, const char **err)
{
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    int rv, bad = 0;

    rv = apr_dbd_pbselect(db->driver, p, db->handle, &res, stmt,
                          LESSONS_FETCH_ALL, args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    while ((rv = apr_dbd_get_row(db->driver, p, res, &row, -1)) == 0) {
        if (!lessons_batch_row(db, row, jobs, n)) {
            bad = 1;
        }
    }
    if (rv != -1 || bad) {
        return lessons_batch_unsure(jobs, n, apr_psprintf(p, "%s: rows "
            "not read, or not the writes' (%d)", label, rv), err);
    }
    return LESSONS_STORE_OK;
}

/* n creates (2..LESSONS_STORE_BATCH_MAX) in one statement. */
static lessons_store_e lessons_store_create_batch(
    const lessons_db_t *db, apr_pool_t *p, lessons_store_write_job_t **jobs,
    int n, const char **err)
{
    const char *label = lessons_batch_label(p, "create", n);
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    const void **args = apr_palloc(p, LESSONS_INSERT_NARGS * n
                                      * sizeof(*args));
    int *active = apr_palloc(p, n * sizeof(*active));
    int i;

    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    for (i = 0; i < n; i++) {
        lessons_insert_args(jobs[i]->in, &active[i],
                            args + LESSONS_INSERT_NARGS * i);
        jobs[i]->rc = LESSONS_STORE_NO_LEVEL;   /* until its row comes */
    }
    return lessons_batch_run(db, p, label, stmt, args, jobs, n, err);
}

lessons_store_e lessons_store_create_many(const lessons_db_t *db,
                                          apr_pool_t *p,
                                          lessons_store_write_job_t **jobs,
                                          int n, const char **err)
{
    const char *what = "lessons_create (group commit)";
    lessons_store_e rc;
    int i;

    for (i = 0; i < n; i++) {
        if (!lessons_input_complete(jobs[i]->in, err)) {
            return LESSONS_STORE_ERROR;
        }
    }
    if (lessons_store_write_returns(db)) {
        if (!lessons_batch_fits(p, what, n, err)) {
            return LESSONS_STORE_ERROR;
        }
        if (n > 1) {
            return lessons_store_create_batch(db, p, jobs, n, err);
        }
        jobs[0]->rc = lessons_store_create_returning(db, jobs[0]->pool,
                                                     jobs[0]->in,
                                                     &jobs[0]->out, err);
        rc = jobs[0]->rc == LESSONS_STORE_NO_LEVEL ? LESSONS_STORE_OK
                                                   : jobs[0]->rc;
        if (rc != LESSONS_STORE_OK) {
            *err = apr_pstrdup(p, *err);    /* job->pool is not ours */
        }
        return rc;
    }
    rc = lessons_txn_begin(db, p, what, err);
    for (i = 0; i < n && rc == LESSONS_STORE_OK; i++) {
        lessons_store_write_job_t *job = jobs[i];

        job->rc = lessons_store_insert_read(db, job->pool, what, job->in,
                                            &job->out, err);
        if (job->rc != LESSONS_STORE_OK && job->rc != LESSONS_STORE_NO_LEVEL) {
            *err = apr_pstrdup(p, *err);    /* job->pool is not ours */
            rc = job->rc;
        }
    }
    return lessons_txn_end(db, p, what, rc, err);
}

/* Claim the key for this transaction where the engine claims keys;
 * *claimed 0 when another transaction holds it.
 */
static lessons_store_e lessons_key_claim(const lessons_db_t *db,
                                         apr_pool_t *p,
                                         const lessons_store_key_t *key,
                                         int *claimed, const char **err)
{
    const lessons_engine_t *engine = lessons_engine_of(db->driver);
    const void *args[] = { &key->claim };
    const char *cols[1];
    int rows = 0;
    lessons_store_e rc;

    *claimed = 1;
    if (!engine || !engine->claim_sql) {
        return LESSONS_STORE_OK;    /* writers take turns */
    }
    rc = lessons_store_one(db, p, LESSONS_KEY_CLAIM, args, cols, 1, &rows,
                           err);
    if (rc == LESSONS_STORE_OK && (rows != 1 || !cols[0])) {
        *err = apr_psprintf(p, LESSONS_KEY_CLAIM ": %d rows, one expected",
                            rows);
        return LESSONS_STORE_ERROR;
    }
    if (rc == LESSONS_STORE_OK) {
        *claimed = strcmp(cols[0], "t") == 0 || strcmp(cols[0], "1") == 0;
    }
    return rc;
}

/* The caller's key, if it is stored and has not expired: *found, with
 * the answer it got and the fingerprint of its request.
 */
static lessons_store_e lessons_key_find(const lessons_db_t *db,
                                        apr_pool_t *p,
                                        const lessons_store_key_t *key,
                                        int *found, const char **fp,
                                        lessons_store_answer_t *ans,
                                        const char **err)
{
    const char *label = lessons_statements_idempotency[0].label;
    const void *args[] = { key->caller, key->key, &key->now };
    const char *cols[6];
    int rows = 0, i;
    lessons_store_e rc = lessons_store_one(db, p, label, args, cols, 6,
                                           &rows, err);

    *found = 0;
    if (rc != LESSONS_STORE_OK || rows == 0) {
        return rc;
    }
    for (i = 0; i < 6; i++) {
        if (!cols[i]) {
            break;
        }
    }
    if (rows != 1 || i < 6 || !lessons_parse_int(cols[1], &ans->status)
        || !lessons_parse_i64(cols[2], &ans->id)) {
        *err = apr_psprintf(p, "%s: %d rows, or a row with NULL or "
                            "malformed columns", label, rows);
        return LESSONS_STORE_ERROR;
    }
    *fp = cols[0];
    ans->location = cols[3];
    ans->etag = cols[4];
    ans->body = cols[5];
    ans->len = strlen(cols[5]);
    *found = 1;
    return LESSONS_STORE_OK;
}

/* Run a statement without results; *nrows says how many rows it
 * changed.
 */
static lessons_store_e lessons_store_run(const lessons_db_t *db,
                                         apr_pool_t *p, const char *label,
                                         const void **args, int *nrows,
                                         const char **err)
{
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    int rv;

    *nrows = 0;
    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    rv = apr_dbd_pbquery(db->driver, p, db->handle, nrows, stmt, args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    return LESSONS_STORE_OK;
}

/* Keep the key with its create's answer; *stored 0 when a live key of
 * the same caller and name is there already.
 */
static lessons_store_e lessons_key_store(const lessons_db_t *db,
                                         apr_pool_t *p,
                                         const lessons_store_key_t *key,
                                         const lessons_store_answer_t *ans,
                                         int *stored, const char **err)
{
    const void *args[] = { key->caller, key->key, key->fingerprint,
                           &ans->id, &ans->status, ans->location, ans->etag,
                           ans->body, &key->now, &key->expires, &key->now };
    int nrows = 0;
    lessons_store_e rc = lessons_store_run(db, p,
                                           lessons_statements_idempotency[1]
                                           .label, args, &nrows, err);

    *stored = rc == LESSONS_STORE_OK && nrows > 0;
    return rc;
}

/* Remove a few expired keys, oldest first. */
static lessons_store_e lessons_key_sweep(const lessons_db_t *db,
                                         apr_pool_t *p,
                                         const lessons_store_key_t *key,
                                         const char **err)
{
    int nrows = 0;
    const void *args[] = { &key->now };

    return lessons_store_run(db, p, lessons_statements_idempotency[2].label,
                             args, &nrows, err);
}

lessons_store_e lessons_store_create_keyed(const lessons_db_t *db,
                                           apr_pool_t *p,
                                           const lessons_input_t *in,
                                           const lessons_store_key_t *key,
                                           lessons_store_answer_fn answer,
                                           void *baton,
                                           lessons_store_key_e *outcome,
                                           lessons_store_answer_t *ans,
                                           const char **err)
{
    const char *what = "lessons_create (Idempotency-Key)";
    const char *fp = NULL;
    lessons_lesson_t l;
    int claimed = 0, found = 0, stored = 0;
    lessons_store_e rc;

    *outcome = LESSONS_KEY_CREATED;
    memset(ans, 0, sizeof(*ans));
    if (!lessons_input_complete(in, err)) {
        return LESSONS_STORE_ERROR;
    }
    rc = lessons_txn_begin(db, p, what, err);
    if (rc == LESSONS_STORE_OK) {
        rc = lessons_key_claim(db, p, key, &claimed, err);
    }
    if (rc == LESSONS_STORE_OK && claimed) {
        rc = lessons_key_find(db, p, key, &found, &fp, ans, err);
    }
    if (rc == LESSONS_STORE_OK && claimed && !found) {
        rc = lessons_store_write_returns(db)
             ? lessons_store_create_returning(db, p, in, &l, err)
             : lessons_store_insert_read(db, p, what, in, &l, err);
        if (rc == LESSONS_STORE_OK && !answer(baton, p, &l, ans)) {
            *err = "lessons_create: the answer could not be built";
            rc = LESSONS_STORE_ERROR;
        }
        if (rc == LESSONS_STORE_OK) {
            rc = lessons_key_store(db, p, key, ans, &stored, err);
        }
        if (rc == LESSONS_STORE_OK && stored) {
            rc = lessons_key_sweep(db, p, key, err);
        }
    }
    if (rc != LESSONS_STORE_OK) {
        return lessons_txn_end(db, p, what, rc, err);
    }
    if (claimed && !found && stored) {
        return lessons_txn_end(db, p, what, rc, err);   /* COMMIT */
    }
    /* Decided without a write (or a live key appeared under ours, which
     * only a transaction that did not claim it could store): nothing of
     * this one is kept.
     */
    *outcome = !claimed || !found ? LESSONS_KEY_IN_FLIGHT
               : strcmp(fp, key->fingerprint) == 0 ? LESSONS_KEY_REPLAYED
               : LESSONS_KEY_REUSED;
    if (*outcome != LESSONS_KEY_REPLAYED) {
        memset(ans, 0, sizeof(*ans));   /* another request's, or unkept */
    }
    rc = lessons_txn_end(db, p, what, LESSONS_STORE_PRECONDITION, err);
    return rc == LESSONS_STORE_PRECONDITION ? LESSONS_STORE_OK : rc;
}

/* The If-Match part of a write's arguments: the flag, four versions
 * (unused ones -1, which no row has) and the epoch.
 */
typedef struct {
    int check;
    apr_int64_t v[LESSONS_IF_MATCH_MAX];
    const char *epoch;
} lessons_match_args_t;

static void lessons_match_args(const lessons_db_t *db, apr_pool_t *p,
                               const lessons_if_match_t *im,
                               lessons_match_args_t *a)
{
    apr_size_t n, k;
    int i;

    a->check = im && im->asked && !im->any ? 1 : 0;
    a->epoch = a->check && im->epoch ? im->epoch : "";
    /* The statement compares the lessons_database row's epoch: a tag
     * from this server's history gives it without the history's digits;
     * one from another history gives what no epoch is.
     */
    if (a->check && db->identity) {
        n = strlen(a->epoch);
        k = strlen(db->identity);
        a->epoch = lessons_store_epoch_here(db, a->epoch)
                   ? apr_pstrmemdup(p, a->epoch, n - k) : "-";
    }
    for (i = 0; i < LESSONS_IF_MATCH_MAX; i++) {
        a->v[i] = a->check && i < im->n ? im->versions[i] : -1;
    }
}

/* Does the stored lesson satisfy If-Match? */
static int lessons_match_ok(const lessons_if_match_t *im,
                            const lessons_lesson_t *l)
{
    int i;

    if (!im || !im->asked || im->any) {
        return 1;
    }
    if (!im->epoch || !l->epoch || strcmp(im->epoch, l->epoch) != 0) {
        return 0;
    }
    for (i = 0; i < im->n && i < LESSONS_IF_MATCH_MAX; i++) {
        if (im->versions[i] == l->version) {
            return 1;
        }
    }
    return 0;
}

#define LESSONS_UPDATE_NARGS 21

/* The arguments of lessons_update (and lessons_update_returning): the
 * values it points at live here, with the caller's id and If-Match.
 */
typedef struct {
    int has_level, level, has_title, has_order, order, has_topic;
    int has_descr, has_active, active;
    const void *args[LESSONS_UPDATE_NARGS];
} lessons_update_args_t;

static int lessons_update_args(lessons_update_args_t *u,
                               const apr_int64_t *id,
                               const lessons_input_t *in,
                               const lessons_match_args_t *m,
                               const char **err)
{
    const void **a = u->args;

    if ((in->has_title && !in->title) || (in->has_topic && !in->topic)
        || (in->has_description && !in->description)) {
        *err = "lessons_update: incomplete input";
        return 0;
    }
    u->has_level = in->has_level_id;
    u->level = u->has_level ? in->level_id : 0;
    u->has_title = in->has_title;
    u->has_order = in->has_order;
    u->order = u->has_order ? in->order : 0;
    u->has_topic = in->has_topic;
    u->has_descr = in->has_description;
    u->has_active = in->has_is_active;
    u->active = u->has_active && in->is_active ? 1 : 0;
    *a++ = &u->has_level;
    *a++ = &u->level;
    *a++ = &u->has_title;
    *a++ = u->has_title ? in->title : "";
    *a++ = &u->has_order;
    *a++ = &u->order;
    *a++ = &u->has_topic;
    *a++ = u->has_topic ? in->topic : "";
    *a++ = &u->has_descr;
    *a++ = u->has_descr ? in->description : "";
    *a++ = &u->has_active;
    *a++ = &u->active;
    *a++ = id;
    *a++ = &m->check;
    *a++ = &m->v[0];
    *a++ = &m->v[1];
    *a++ = &m->v[2];
    *a++ = &m->v[3];
    *a++ = m->epoch;
    *a++ = &u->has_level;
    *a++ = &u->level;
    return 1;
}

/* The UPDATE of the fields sent; *nrows 0 means no such lesson, not in
 * the version If-Match asks, or a levelId that names no level.
 */
static lessons_store_e lessons_store_patch(const lessons_db_t *db,
                                           apr_pool_t *p, apr_int64_t id,
                                           const lessons_input_t *in,
                                           const lessons_match_args_t *m,
                                           int *nrows, const char **err)
{
    const char *label = "lessons_update";
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    lessons_update_args_t u;
    int rv;

    if (!stmt || !lessons_update_args(&u, &id, in, m, err)) {
        return LESSONS_STORE_ERROR;
    }
    *nrows = 0;
    rv = apr_dbd_pbquery(db->driver, p, db->handle, nrows, stmt, u.args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    return LESSONS_STORE_OK;
}

/* Why an update changed nothing, from the lesson as it is now: missing,
 * in another version than If-Match asks, or else the level is.
 */
static lessons_store_e lessons_store_unchanged(const lessons_db_t *db,
                                               apr_pool_t *p,
                                               apr_int64_t id,
                                               const lessons_if_match_t *im,
                                               lessons_lesson_t *out,
                                               const char **err)
{
    lessons_store_e rc = lessons_store_get(db, p, id, out, err);

    if (rc == LESSONS_STORE_OK) {
        rc = lessons_match_ok(im, out) ? LESSONS_STORE_NO_LEVEL
                                       : LESSONS_STORE_PRECONDITION;
    }
    return rc;
}

/* An update in the transaction that is open: the UPDATE, then the
 * lesson it stored, or why it changed nothing.
 */
static lessons_store_e lessons_store_update_txn(const lessons_db_t *db,
                                                apr_pool_t *p,
                                                apr_int64_t id,
                                                const lessons_input_t *in,
                                                const lessons_if_match_t *im,
                                                lessons_lesson_t *out,
                                                const char **err)
{
    lessons_match_args_t m;
    int nrows = 0;
    lessons_store_e rc;

    lessons_match_args(db, p, im, &m);
    rc = lessons_store_patch(db, p, id, in, &m, &nrows, err);
    if (rc == LESSONS_STORE_OK && nrows > 0) {
        return lessons_store_read_back(db, p, "lessons_update", id, out,
                                       err);
    }
    if (rc == LESSONS_STORE_OK) {
        rc = lessons_store_unchanged(db, p, id, im, out, err);
    }
    return rc;
}

lessons_store_e lessons_store_update(const lessons_db_t *db, apr_pool_t *p,
                                     apr_int64_t id,
                                     const lessons_input_t *in,
                                     const lessons_if_match_t *im,
                                     lessons_lesson_t *out,
                                     const char **err)
{
    const char *what = "lessons_update";
    lessons_match_args_t m;
    lessons_update_args_t u;
    int nrows = 0;
    lessons_store_e rc;

    if (lessons_store_write_returns(db)) {
        /* One statement; when it wrote nothing, the lesson read after
         * it says why, as the read in the transaction would (each
         * statement of a READ COMMITTED transaction sees anew).
         */
        lessons_match_args(db, p, im, &m);
        if (!lessons_update_args(&u, &id, in, &m, err)) {
            return LESSONS_STORE_ERROR;
        }
        rc = lessons_store_written(db, p, "lessons_update_returning",
                                   u.args, out, &nrows, err);
        if (rc == LESSONS_STORE_OK && nrows == 0) {
            rc = lessons_store_unchanged(db, p, id, im, out, err);
        }
        return rc;
    }
    rc = lessons_txn_begin(db, p, what, err);
    if (rc == LESSONS_STORE_OK) {
        rc = lessons_store_update_txn(db, p, id, in, im, out, err);
    }
    return lessons_txn_end(db, p, what, rc, err);
}

/* Is rc an update's answer (what it did, or why it did nothing), as
 * opposed to a failure?
 */
static int lessons_update_answered(lessons_store_e rc)
{
    return rc == LESSONS_STORE_OK || rc == LESSONS_STORE_NOT_FOUND
           || rc == LESSONS_STORE_PRECONDITION
           || rc == LESSONS_STORE_NO_LEVEL;
}

/* n updates (2..LESSONS_STORE_BATCH_MAX, distinct ids) in one
 * statement; those that gave no row say why afterwards, each from its
 * lesson as it is now.
 */
static lessons_store_e lessons_store_update_batch(
    const lessons_db_t *db, apr_pool_t *p, lessons_store_write_job_t **jobs,
    int n, const char **err)
{
    const char *label = lessons_batch_label(p, "update", n);
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    lessons_update_args_t *u = apr_palloc(p, n * sizeof(*u));
    lessons_match_args_t *m = apr_palloc(p, n * sizeof(*m));
    const void **args = apr_palloc(p, n * sizeof(u->args));
    const char *why = NULL;
    lessons_store_e rc;
    int i;

    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    for (i = 0; i < n; i++) {
        lessons_match_args(db, p, jobs[i]->im, &m[i]);
        if (!lessons_update_args(&u[i], &jobs[i]->id, jobs[i]->in, &m[i],
                                 err)) {
            return LESSONS_STORE_ERROR;
        }
        memcpy(args + i * LESSONS_UPDATE_NARGS, u[i].args,
               sizeof(u->args));
        jobs[i]->rc = LESSONS_STORE_NOT_FOUND;  /* until its row comes */
    }
    rc = lessons_batch_run(db, p, label, stmt, args, jobs, n, err);
    for (i = 0; i < n && rc == LESSONS_STORE_OK; i++) {
        lessons_store_write_job_t *job = jobs[i];

        if (job->rc == LESSONS_STORE_OK) {
            continue;
        }
        job->rc = lessons_store_unchanged(db, job->pool, job->id, job->im,
                                          &job->out, &why);
        if (!lessons_update_answered(job->rc)) {
            job->rc = LESSONS_STORE_ERROR;      /* made again alone */
        }
    }
    return rc;
}

/* Do the ids of jobs differ (one row, one write in a statement)? */
static int lessons_ids_differ(lessons_store_write_job_t **jobs, int n,
                              apr_pool_t *p, const char **err)
{
    int i, j;

    for (i = 1; i < n; i++) {
        for (j = 0; j < i; j++) {
            if (jobs[i]->id == jobs[j]->id) {
                *err = apr_psprintf(p, "lessons_update (group commit): "
                                    "lesson %" APR_INT64_T_FMT " twice",
                                    jobs[i]->id);
                return 0;
            }
        }
    }
    return 1;
}

lessons_store_e lessons_store_update_many(const lessons_db_t *db,
                                          apr_pool_t *p,
                                          lessons_store_write_job_t **jobs,
                                          int n, const char **err)
{
    const char *what = "lessons_update (group commit)";
    lessons_store_e rc;
    int i;

    if (!lessons_ids_differ(jobs, n, p, err)) {
        return LESSONS_STORE_ERROR;
    }
    if (lessons_store_write_returns(db)) {
        if (!lessons_batch_fits(p, what, n, err)) {
            return LESSONS_STORE_ERROR;
        }
        if (n > 1) {
            return lessons_store_update_batch(db, p, jobs, n, err);
        }
        jobs[0]->rc = lessons_store_update(db, jobs[0]->pool, jobs[0]->id,
                                           jobs[0]->in, jobs[0]->im,
                                           &jobs[0]->out, err);
        if (lessons_update_answered(jobs[0]->rc)) {
            return LESSONS_STORE_OK;
        }
        *err = apr_pstrdup(p, *err);    /* job->pool is not ours */
        return jobs[0]->rc;
    }
    rc = lessons_txn_begin(db, p, what, err);
    for (i = 0; i < n && rc == LESSONS_STORE_OK; i++) {
        lessons_store_write_job_t *job = jobs[i];

        job->rc = lessons_store_update_txn(db, job->pool, job->id, job->in,
                                           job->im, &job->out, err);
        if (!lessons_update_answered(job->rc)) {
            *err = apr_pstrdup(p, *err);    /* job->pool is not ours */
            rc = job->rc;
        }
    }
    return lessons_txn_end(db, p, what, rc, err);
}

lessons_store_e lessons_store_delete(const lessons_db_t *db, apr_pool_t *p,
                                     apr_int64_t id,
                                     const lessons_if_match_t *im,
                                     const char **err)
{
    const char *label = "lessons_delete";
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    lessons_match_args_t m;
    const void *args[] = { &id, &m.check, &m.v[0], &m.v[1], &m.v[2],
                           &m.v[3], NULL };
    int rv, nrows = 0;

    lessons_match_args(db, p, im, &m);
    args[6] = m.epoch;

    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    rv = apr_dbd_pbquery(db->driver, p, db->handle, &nrows, stmt, args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    return nrows > 0 ? LESSONS_STORE_OK : LESSONS_STORE_NOT_FOUND;
}

static lessons_store_e lessons_store_catalog_of(const lessons_db_t *db,
                                                apr_pool_t *p,
                                                const char *label,
                                                lessons_catalog_t *out,
                                                const char **err)
{
    const char *cols[2];            /* the fence's counter (3rd) unread */
    int rows = 0;
    lessons_store_e rc = lessons_store_one(db, p, label, NULL, cols, 2,
                                           &rows, err);

    if (rc != LESSONS_STORE_OK) {
        return rc;
    }
    if (rows != 1 || !cols[0] || !*cols[0]
        || !lessons_parse_i64(cols[1], &out->changes)) {
        /* A schema without its identity row or counters: load it again. */
        *err = apr_psprintf(p, "lessons_catalog: lessons_database has no "
                            "row or lessons_catalog no counters (%d rows): "
                            "load the schema again", rows);
        return LESSONS_STORE_ERROR;
    }
    out->epoch = lessons_store_epoch(db, p, cols[0]);
    return LESSONS_STORE_OK;
}

lessons_store_e lessons_store_catalog(const lessons_db_t *db, apr_pool_t *p,
                                      lessons_catalog_t *out,
                                      const char **err)
{
    return lessons_store_catalog_of(db, p, "lessons_catalog", out, err);
}

lessons_store_e lessons_store_catalog_fenced(const lessons_db_t *db,
                                             apr_pool_t *p,
                                             lessons_catalog_t *out,
                                             const char **err)
{
    return lessons_store_catalog_of(db, p, "lessons_lease_fence", out, err);
}

int lessons_store_catalog_here(const lessons_db_t *db,
                               const lessons_catalog_t *cat)
{
    return lessons_store_epoch_here(db, cat->epoch);
}

const char *lessons_store_catalog_text(apr_pool_t *p,
                                       const lessons_catalog_t *cat)
{
    return apr_psprintf(p, "%s.%" APR_INT64_T_FMT,
                        cat->epoch ? cat->epoch : "", cat->changes);
}

/* ------------------------------------------------------ read leases */

/* A catalogue version from a row's two first columns. */
static int lessons_store_lease_version(const lessons_db_t *db, apr_pool_t *p,
                                       const char *epoch, const char *sum,
                                       lessons_catalog_t *cat)
{
    if (!epoch || !*epoch || !lessons_parse_i64(sum, &cat->changes)) {
        return 0;
    }
    cat->epoch = lessons_store_epoch(db, p, epoch);
    return 1;
}

/* One lease from a check's row (columns 2 to 7); 0 when it has none
 * (the one row of a check with no lease) or is not ours.
 */
static int lessons_store_lease_row(const lessons_db_t *db, apr_pool_t *p,
                                   apr_dbd_row_t *row,
                                   lessons_store_lease_t *out)
{
    const char *c[6];
    int i;

    for (i = 0; i < 6; i++) {
        c[i] = apr_dbd_get_entry(db->driver, row, i + 2);
    }
    if (!c[0] || !*c[0] || !lessons_parse_i64(c[1], &out->term)
        || !lessons_parse_i64(c[2], &out->length_ms)
        || !c[3] || !lessons_parse_i64(c[4], &out->acked)) {
        return 0;
    }
    out->server = apr_pstrdup(p, c[0]);
    out->epoch = apr_pstrdup(p, c[3]);
    out->peer = apr_pstrdup(p, c[5] ? c[5] : "");
    return 1;
}

/* A statement of the check's shape (the renewal's too): on each row the
 * catalogue version (columns 0 and 1, one snapshot's) and a lease
 * (columns 2 to 7; none on the one row of a list with no lease).
 * *first: the first row's column 8, when first is not NULL.  No row, or
 * a first row without a version: the schema is not the module's.
 */
static lessons_store_e lessons_store_lease_list(const lessons_db_t *db,
                                                apr_pool_t *p,
                                                const char *label,
                                                const void **args,
                                                lessons_catalog_t *cat,
                                                apr_array_header_t **leases,
                                                const char **first,
                                                const char **err)
{
    apr_dbd_prepared_t *stmt = lessons_store_stmt(db, p, label, err);
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    int rv, n = 0, bad = 0;

    *leases = apr_array_make(p, 4, sizeof(lessons_store_lease_t));
    if (first) {
        *first = NULL;
    }
    if (!stmt) {
        return LESSONS_STORE_ERROR;
    }
    rv = apr_dbd_pbselect(db->driver, p, db->handle, &res, stmt,
                          LESSONS_FETCH_ALL, args);
    if (rv != 0) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    while ((rv = apr_dbd_get_row(db->driver, p, res, &row, -1)) == 0) {
        lessons_store_lease_t lease;

        if (n++ == 0) {
            bad = !lessons_store_lease_version(db, p,
                                               apr_dbd_get_entry(db->driver,
                                                                 row, 0),
                                               apr_dbd_get_entry(db->driver,
                                                                 row, 1),
                                               cat);
            if (first) {
                const char *c8 = apr_dbd_get_entry(db->driver, row, 8);

                *first = c8 ? apr_pstrdup(p, c8) : NULL;
            }
        }
        if (lessons_store_lease_row(db, p, row, &lease)) {
            *(lessons_store_lease_t *)apr_array_push(*leases) = lease;
        }
    }
    if (rv != -1) {
        return lessons_store_fail(db, p, rv, label, err);
    }
    if (n == 0 || bad) {
        *err = apr_psprintf(p, "%s: no catalogue version (%d rows): load "
                            "the schema again", label, n);
        return LESSONS_STORE_ERROR;
    }
    return LESSONS_STORE_OK;
}

lessons_store_e lessons_store_lease_renew(const lessons_db_t *db,
                                          apr_pool_t *p, const char *server,
                                          int length_ms, const char *peer,
                                          lessons_catalog_t *cat,
                                          apr_int64_t *term,
                                          apr_array_header_t **others,
                                          const char **err)
{
    const void *args[] = { server, &length_ms, peer ? peer : "", server,
                           server };
    const char *label = lessons_statements_leases[0].label;
    const char *got = NULL;
    lessons_store_e rc = lessons_store_lease_list(db, p, label, args, cat,
                                                  others, &got, err);

    if (rc != LESSONS_STORE_OK) {
        return rc;
    }
    if (!lessons_parse_i64(got, term)) {
        *err = apr_psprintf(p, "%s: no term: load the schema again", label);
        return LESSONS_STORE_ERROR;
    }
    return LESSONS_STORE_OK;
}

lessons_store_e lessons_store_lease_check(const lessons_db_t *db,
                                          apr_pool_t *p, const char *notify,
                                          lessons_catalog_t *cat,
                                          apr_array_header_t **leases,
                                          const char **err)
{
    const void *args[] = { notify, db->identity ? db->identity : "" };

    return lessons_store_lease_list(db, p,
                                    lessons_statements_leases[notify ? 2 : 1]
                                        .label,
                                    notify ? args : NULL, cat, leases, NULL,
                                    err);
}

lessons_store_e lessons_store_lease_ack(const lessons_db_t *db,
                                        apr_pool_t *p, const char *server,
                                        const lessons_catalog_t *cat,
                                        int *found, const char **err)
{
    const void *args[] = { cat->epoch, &cat->changes, server,
                           &cat->changes, cat->epoch };
    const char *cols[1];
    int rows = 0;
    lessons_store_e rc = lessons_store_one(db, p,
                                           lessons_statements_leases[3].label,
                                           args, cols, 1, &rows, err);

    *found = rows > 0;
    return rc;
}

lessons_store_e lessons_store_lease_release(const lessons_db_t *db,
                                            apr_pool_t *p,
                                            const char *server,
                                            const char **err)
{
    const void *args[] = { server };
    int nrows = 0;

    return lessons_store_run(db, p, lessons_statements_leases[4].label,
                             args, &nrows, err);
}

lessons_store_e lessons_store_lease_catch_up(const lessons_db_t *db,
                                             apr_pool_t *p,
                                             const char *server,
                                             lessons_catalog_t *cat,
                                             int *found, const char **err)
{
    const char *identity = db->identity ? db->identity : "";
    const void *args[] = { identity, server, server };
    const char *cols[3];
    int rows = 0;
    lessons_store_e rc = lessons_store_one(db, p,
                                           lessons_statements_leases[5].label,
                                           args, cols, 3, &rows, err);

    *found = 0;
    if (rc != LESSONS_STORE_OK) {
        return rc;
    }
    if (rows != 1
        || !lessons_store_lease_version(db, p, cols[0], cols[1], cat)) {
        *err = "lessons_lease_catch_up: no catalogue version: load the "
               "schema again";
        return LESSONS_STORE_ERROR;
    }
    *found = cols[2] != NULL;
    return LESSONS_STORE_OK;
}
