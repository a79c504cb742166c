/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_store.h: every SQL statement the module runs, and the
 * operations over them through apr_dbd prepared statements.  The same
 * SQL serves sqlite3 and pgsql.  The handle comes from mod_dbd in the
 * server and from apr_dbd_open in the unit tests.
 */
#ifndef LESSONS_STORE_H
#define LESSONS_STORE_H

#include "apr_pools.h"
#include "apr_hash.h"
#include "apr_tables.h"
#include "apr_dbd.h"
#include "store/lessons_engine.h"
#include "base/lessons_lesson.h"

/* A connection and its prepared statements (label -> apr_dbd_prepared_t*,
 * the way mod_dbd's ap_dbd_t keeps them).
 */
typedef struct {
    const apr_dbd_driver_t *driver;
    apr_dbd_t *handle;
    apr_hash_t *prepared;
    const char *identity;       /* hex digits the server's history adds to
                                 * the epoch (lessons_engine_t's
                                 * identity_sql), or NULL */
    const apr_array_header_t *init_sql; /* mod_dbd's DBDInitSQL (char *
                                 * each), for a connection the module
                                 * opens itself (lessons_db_ready), or
                                 * NULL */
} lessons_db_t;

/* The statements, prepared on each connection when it is first used
 * (lessons_db_ready), never at config time.  Read-only; ends with a
 * { NULL, NULL } entry.
 */
typedef struct {
    const char *label;
    const char *sql;
} lessons_statement_t;

extern const lessons_statement_t lessons_statements[];

/* Create and update with their read-back in one statement, prepared too
 * where the engine write_returns.
 */
extern const lessons_statement_t lessons_statements_returning[];

typedef enum {
    LESSONS_STORE_OK = 0,
    LESSONS_STORE_NOT_FOUND,        /* no lesson with that id */
    LESSONS_STORE_NO_LEVEL,         /* the level id does not exist */
    LESSONS_STORE_PRECONDITION,     /* If-Match names another version */
    LESSONS_STORE_ERROR             /* database error: *err says which */
} lessons_store_e;

/* What If-Match asks of a write, from the tags that name this lesson
 * in this database (the handler parses them).  asked 0: no If-Match;
 * any: "*" (the lesson must exist); else the row's version must be one
 * of versions[0..n) and the database's identity epoch.
 */
#define LESSONS_IF_MATCH_MAX 4

typedef struct {
    int asked;
    int any;
    int n;
    apr_int64_t versions[LESSONS_IF_MATCH_MAX];
    const char *epoch;
} lessons_if_match_t;

/* The catalog version: the database's identity and a count that moves
 * in the same transaction as every change of lessons or levels.  Equal
 * versions mean the same committed data.
 */
typedef struct {
    const char *epoch;
    apr_int64_t changes;
} lessons_catalog_t;

lessons_store_e lessons_store_catalog(const lessons_db_t *db, apr_pool_t *p,
                                      lessons_catalog_t *out,
                                      const char **err);

/* The same behind a fence (a connection with the read leases'
 * statements, PostgreSQL): answered only by a primary whose synchronous
 * standbys still follow it, never by one deposed while it was frozen.
 */
lessons_store_e lessons_store_catalog_fenced(const lessons_db_t *db,
                                             apr_pool_t *p,
                                             lessons_catalog_t *out,
                                             const char **err);

/* Was cat read from the server db's connection belongs to?  Its epoch
 * ends with the server's history (PostgreSQL: the timeline, which a
 * promotion moves on), so a version read on one server does not name
 * what another's connection would read: a primary deposed while frozen
 * and resumed still answers on the connections pooled before.  Always
 * 1 for an engine without a history (SQLite: one file).
 */
int lessons_store_catalog_here(const lessons_db_t *db,
                               const lessons_catalog_t *cat);

/* The catalog version as text ("<epoch>.<changes>"): what the response
 * cache compares.
 */
const char *lessons_store_catalog_text(apr_pool_t *p,
                                       const lessons_catalog_t *cat);

/* Prepare every statement on db->handle into db->prepared (made in p if
 * NULL), keyed by label.  A suffix, if given, makes the server-side names
 * label_suffix (PostgreSQL keeps names per session).  lessons_db_ready
 * calls it for the module; tests call it directly.
 */
lessons_store_e lessons_store_prepare(lessons_db_t *db, apr_pool_t *p,
                                      const char *suffix, const char **err);

/* Lists fill *out with lessons_lesson_t, allocated in p. */
lessons_store_e lessons_store_list_all(const lessons_db_t *db, apr_pool_t *p,
                                       apr_array_header_t **out,
                                       const char **err);        /* by id */
lessons_store_e lessons_store_list_level(const lessons_db_t *db,
                                         apr_pool_t *p, int level,
                                         apr_array_header_t **out,
                                         const char **err);      /* by id */
/* Two levels, by level id, then order, then id (beginner, advanced). */
lessons_store_e lessons_store_list_levels(const lessons_db_t *db,
                                          apr_pool_t *p, int first,
                                          int second,
                                          apr_array_header_t **out,
                                          const char **err);

lessons_store_e lessons_store_get(const lessons_db_t *db, apr_pool_t *p,
                                  apr_int64_t id, lessons_lesson_t *out,
                                  const char **err);

/* Create and update run in one transaction (BEGIN IMMEDIATE on sqlite3):
 * the write, then the read-back of the stored lesson into *out (joined
 * with its level, as lessons_store_get gives it).  OK means committed,
 * with *out as stored.  Any other result means rolled back, nothing
 * written -- save a connection lost during COMMIT itself, whose outcome
 * no client can know (*err then names COMMIT).  Either way the
 * connection is left outside any transaction.
 */

/* Insert a complete input (create-decoded).  NO_LEVEL: the level does not
 * exist.
 */
lessons_store_e lessons_store_create(const lessons_db_t *db, apr_pool_t *p,
                                     const lessons_input_t *in,
                                     lessons_lesson_t *out,
                                     const char **err);

/* One write of a group commit (lessons_group), a create or an update:
 * its input, and the pool its answer is copied into (the job's own: the
 * thread that runs it is not the one that asked).
 */
typedef struct {
    const lessons_input_t *in;
    apr_int64_t id;                 /* an update's lesson */
    const lessons_if_match_t *im;   /* an update's If-Match, or NULL */
    apr_pool_t *pool;
    lessons_store_e rc;             /* once run: a create's OK or NO_LEVEL,
                                     * an update's as lessons_store_update
                                     * answers (OK, NOT_FOUND, PRECONDITION
                                     * or NO_LEVEL) */
    lessons_lesson_t out;
    lessons_db_fault_e fault;       /* not OK: ended without an answer,
                                     * and not to be made again alone (it
                                     * may be stored, or its time is up):
                                     * answered as this fault, with err
                                     * (in pool) */
    const char *err;
    apr_interval_time_t committed;  /* once run and kept: when the
                                     * statement that held it came back,
                                     * on the lease's clock (set by the
                                     * group's leader) */
} lessons_store_write_job_t;

/* The most writes one lessons_store_create_many (or _update_many) may
 * take on db's engine: any number in one transaction where a transaction
 * is local (SQLite), LESSONS_STORE_BATCH_MAX where they go in one
 * statement (write_returns: one round trip, its own transaction, with a
 * prepared text per count).
 */
#define LESSONS_STORE_BATCH_MAX 8
int lessons_store_batch_max(const lessons_db_t *db);

/* Run n creates (complete inputs, n at most lessons_store_batch_max) in
 * one transaction: one commit, one WAL flush, for all of them -- on
 * SQLite a transaction of their statements, where a write returns the
 * lesson it stored (PostgreSQL) one statement of n data-modifying WITHs.
 * OK: committed, each job's rc and out say what it did.  Else nothing
 * of any job was kept (*err says why) -- save a connection lost on the
 * way, whose outcome no client can know (as a create alone's COMMIT):
 * a failed statement ends the transaction, so no job is kept apart from
 * the others.
 */
lessons_store_e lessons_store_create_many(const lessons_db_t *db,
                                          apr_pool_t *p,
                                          lessons_store_write_job_t **jobs,
                                          int n, const char **err);

/* Write only the fields sent (has_*) to lesson id, in one statement,
 * so concurrent updates of different fields never undo each other; the
 * level is checked only when levelId is sent, If-Match (im, may be NULL)
 * in the same statement.  NOT_FOUND: no lesson with that id;
 * PRECONDITION: it exists in another version; NO_LEVEL: the lesson
 * exists (in the version asked) but the level does not.
 */
lessons_store_e lessons_store_update(const lessons_db_t *db, apr_pool_t *p,
                                     apr_int64_t id,
                                     const lessons_input_t *in,
                                     const lessons_if_match_t *im,
                                     lessons_lesson_t *out,
                                     const char **err);

/* Run n updates (jobs with distinct ids, n at most
 * lessons_store_batch_max) in one transaction, as lessons_store_create_
 * many runs creates: on SQLite a transaction of their statements, where
 * a write returns the lesson it stored one statement of n data-modifying
 * WITHs, locking their rows in the order given (give them by id, so that
 * two runs never wait on each other).  OK: committed, each job's rc says
 * what it did (an update that changed nothing says why, from the lesson
 * as it is after the commit: its rc ERROR with no fault when that read
 * failed, to be made again alone).  Else nothing of any job was kept,
 * save a connection lost on the way.
 */
lessons_store_e lessons_store_update_many(const lessons_db_t *db,
                                          apr_pool_t *p,
                                          lessons_store_write_job_t **jobs,
                                          int n, const char **err);

/* NOT_FOUND: no lesson with that id, or (with If-Match) not in the
 * version asked: the statement cannot tell, and both answer 412 then.
 */
lessons_store_e lessons_store_delete(const lessons_db_t *db, apr_pool_t *p,
                                     apr_int64_t id,
                                     const lessons_if_match_t *im,
                                     const char **err);

/* Retry-safe creates (Idempotency-Key, docs/api.md): the key a create
 * came with, kept in the create's own transaction with its request's
 * fingerprint and the answer the create got, until it expires.
 */

/* Statements for keys, prepared apart from the others and only where a
 * create sends a key (lessons_store_prepare_idempotency): a database
 * made before the keys' table still serves everything else.
 */
extern const lessons_statement_t lessons_statements_idempotency[];

/* Prepare them (and the engine's claim_sql, as lessons_key_claim) on
 * db->handle, with statements made in p; on success they join
 * db->prepared, on failure nothing of them does.  Suffix as for
 * lessons_store_prepare.
 */
lessons_store_e lessons_store_prepare_idempotency(lessons_db_t *db,
                                                  apr_pool_t *p,
                                                  const char *suffix,
                                                  const char **err);

/* Are they prepared on this connection? */
int lessons_store_idempotency_ready(const lessons_db_t *db);

/* The batch statements of lessons_store_create_many and _update_many
 * (one text per count, 2..LESSONS_STORE_BATCH_MAX, on engines that
 * write_returns), prepared on a connection the first time it runs a
 * shared write: a connection that only reads never holds them.  All or
 * none of them join db->prepared.
 */
lessons_store_e lessons_store_prepare_batches(lessons_db_t *db,
                                              apr_pool_t *p,
                                              const char *suffix,
                                              const char **err);

/* Can this connection run shared writes now (prepared, or not needed)? */
int lessons_store_batches_ready(const lessons_db_t *db);

/* A create's key, and the request it came with. */
typedef struct {
    const char *caller;             /* lessons_idem_caller */
    const char *key;                /* as sent, escapes undone */
    const char *fingerprint;        /* lessons_idem_fingerprint */
    apr_int64_t claim;              /* lessons_idem_claim_id, for the
                                     * engine's claim_sql */
    apr_int64_t now;                /* seconds since 1970 */
    apr_int64_t expires;            /* the key is forgotten from then on */
} lessons_store_key_t;

/* The answer a create got: what a retry with its key is given. */
typedef struct {
    int status;
    apr_int64_t id;
    const char *location;
    const char *etag;
    const char *body;
    apr_size_t len;
} lessons_store_answer_t;

/* What became of a create with a key (the store answered OK). */
typedef enum {
    LESSONS_KEY_CREATED = 0,        /* created; the answer kept with the
                                     * key, in the same transaction */
    LESSONS_KEY_REPLAYED,           /* the key's request was made before:
                                     * its answer, nothing written */
    LESSONS_KEY_REUSED,             /* the key came with another request
                                     * (fingerprint): nothing written */
    LESSONS_KEY_IN_FLIGHT           /* another transaction holds the key:
                                     * nothing written */
} lessons_store_key_e;

/* Build the answer of a create from the lesson it stored (in p), as
 * the client is sent it; 0 when it cannot be built.
 */
typedef int (*lessons_store_answer_fn)(void *baton, apr_pool_t *p,
                                       const lessons_lesson_t *l,
                                       lessons_store_answer_t *out);

/* A create with a key, in one transaction: claim the key where the
 * engine has claim_sql; a key already stored (not expired) answers what
 * it answered then, or REUSED for another request; else insert, build
 * the answer through answer(), store the key with it, remove a few
 * expired keys, and commit.  OK with *outcome and *ans; NO_LEVEL
 * (nothing written, the key not kept: a retry runs again); ERROR as for
 * lessons_store_create (the lesson and the key are kept together or not
 * at all).
 */
lessons_store_e lessons_store_create_keyed(const lessons_db_t *db,
                                           apr_pool_t *p,
                                           const lessons_input_t *in,
                                           const lessons_store_key_t *key,
                                           lessons_store_answer_fn answer,
                                           void *baton,
                                           lessons_store_key_e *outcome,
                                           lessons_store_answer_t *ans,
                                           const char **err);

/* How many expired keys a create that stores one removes. */
#define LESSONS_KEY_SWEEP 4

/* ------------------------------------------------ read leases (PostgreSQL)
 *
 * docs/scaling.md, "Read leases".  Prepared apart, the first time a
 * connection needs them (lessons_db_ready_leases): a database made
 * before lessons_leases serves everything else.
 */
extern const lessons_statement_t lessons_statements_leases[];

lessons_store_e lessons_store_prepare_leases(lessons_db_t *db, apr_pool_t *p,
                                             const char *suffix,
                                             const char **err);
int lessons_store_leases_ready(const lessons_db_t *db);

/* One lease as lessons_leases holds it. */
typedef struct {
    const char *server;
    apr_int64_t term;
    apr_int64_t length_ms;
    const char *epoch;              /* what it acknowledged: "" none */
    apr_int64_t acked;              /* -1: none */
    const char *peer;               /* "ADDRESS:PORT KEY", "": none */
} lessons_store_lease_t;

/* Renew server's lease (a new term) for length_ms, and read the
 * catalogue version with its counters locked FOR SHARE: a write either
 * committed before (the version holds it) or commits after this renewal
 * (and its check sees the renewal).  Notifies lessons_lease.  peer:
 * where the server hears other servers' writes, and its datagrams' key
 * ("ADDRESS:PORT KEY", LessonsDBLeasePeer), or NULL.  *others: every
 * other server's lease (lessons_store_lease_t) of the same snapshot
 * renewed within its length, by the database's clock (a row older than
 * that holds no lease: a renewal's lease ends within its length of the
 * statement's start).
 */
lessons_store_e lessons_store_lease_renew(const lessons_db_t *db,
                                          apr_pool_t *p, const char *server,
                                          int length_ms, const char *peer,
                                          lessons_catalog_t *cat,
                                          apr_int64_t *term,
                                          apr_array_header_t **others,
                                          const char **err);

/* A check: the catalogue version and every lease, of one snapshot;
 * *leases holds lessons_store_lease_t.  With notify (the name of the
 * writer's server), every listening server is told the catalogue moved,
 * to which version and by whose write (a writer's check).
 */
lessons_store_e lessons_store_lease_check(const lessons_db_t *db,
                                          apr_pool_t *p, const char *notify,
                                          lessons_catalog_t *cat,
                                          apr_array_header_t **leases,
                                          const char **err);

/* Record that server installed cat, and notify lessons_lease.  *found 0
 * when server has no lease row (it was removed).
 */
lessons_store_e lessons_store_lease_ack(const lessons_db_t *db,
                                        apr_pool_t *p, const char *server,
                                        const lessons_catalog_t *cat,
                                        int *found, const char **err);

/* Read the catalogue version and record it as server's acknowledged
 * one, in one statement (notifies lessons_lease).  The server must not
 * serve from its lease from before this is sent until it installed
 * *cat.  *found 0 when server has no lease row.
 */
lessons_store_e lessons_store_lease_catch_up(const lessons_db_t *db,
                                             apr_pool_t *p,
                                             const char *server,
                                             lessons_catalog_t *cat,
                                             int *found, const char **err);

/* Remove server's lease (it stopped serving from its cache first). */
lessons_store_e lessons_store_lease_release(const lessons_db_t *db,
                                            apr_pool_t *p,
                                            const char *server,
                                            const char **err);

#endif /* LESSONS_STORE_H */
