/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_handler.c: the "lessons" handler: route and method, then
 * the operations: reads go to the read path (mod_lessons_cache.c, which
 * builds with mod_lessons_build.c), writes from the body to the store.
 */

#include "mod_lessons.h"

/* The answer that carries a lesson written (200, or 201 with its
 * Location), built in p; 0 when its document cannot be encoded.
 */
static int lessons_lesson_answer(lessons_ctx *c, apr_pool_t *p, int status,
                                 const lessons_lesson_t *l,
                                 lessons_store_answer_t *a)
{
    memset(a, 0, sizeof(*a));
    a->body = lessons_json_lesson_text(p, l, &a->len);
    if (!a->body) {
        return 0;
    }
    a->status = status;
    a->id = l->id;
    a->etag = lessons_etag_lesson(p, l);
    if (status == HTTP_CREATED) {
        a->location = apr_psprintf(p, "%s/%" APR_INT64_T_FMT,
                                   lessons_base_path(c->conf), l->id);
    }
    return 1;
}

static int lessons_send_answer(lessons_ctx *c,
                               const lessons_store_answer_t *a)
{
    if (a->location) {
        apr_table_setn(c->r->headers_out, "Location", a->location);
    }
    apr_table_setn(c->r->headers_out, "ETag", a->etag);
    apr_table_setn(c->r->headers_out, "Cache-Control", "no-cache");
    return lessons_send(c->r, a->status, LESSONS_CT_JSON, a->body, a->len);
}

/* A lesson written: its document, with its tag, for 200 and 201. */
static int lessons_send_lesson(lessons_ctx *c, int status,
                               const lessons_lesson_t *l)
{
    lessons_store_answer_t a;

    if (!lessons_lesson_answer(c, c->r->pool, status, l, &a)) {
        return lessons_dbd_failed(c, "a stored lesson could not be encoded");
    }
    return lessons_send_answer(c, &a);
}

/* Read and decode a create/update body.  Returns DECLINED with *in
 * filled (and the body's bytes in *raw, *raw_len when asked), or the
 * finished response.
 */
static int lessons_decode_body(lessons_ctx *c, lessons_payload_mode_e mode,
                               lessons_input_t *in, const char **raw,
                               apr_size_t *raw_len)
{
    request_rec *r = c->r;
    apr_off_t max = lessons_max_body(c->conf);
    const char *ct = apr_table_get(r->headers_in, "Content-Type");
    const char *body = NULL, *detail = NULL;
    apr_size_t len = 0;
    apr_status_t read_rv;
    json_t *errors = NULL;
    int rc;

    if (!lessons_payload_type_ok(ct)) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00401)
                      "%s: Content-Type %.100s is not JSON",
                      lessons_refused(r, HTTP_UNSUPPORTED_MEDIA_TYPE),
                      ct ? ct : "(none)");
        return lessons_send_problem(r, HTTP_UNSUPPORTED_MEDIA_TYPE, NULL,
            "The request body must be JSON (Content-Type: "
            "application/json).", NULL);
    }
    rc = lessons_read_body(r, max, &body, &len, &read_rv);
    if (read_rv != APR_SUCCESS) {
        /* httpd's status and httpd's error document: write nothing.
         * After AP_FILTER_ERROR the filter's ap_die has set r->status.
         */
        ap_log_rerror(APLOG_MARK, APLOG_INFO,
                      read_rv == AP_FILTER_ERROR ? 0 : read_rv, r,
                      LESSONSLOG(00407) "%s: the request body could not be "
                      "read (httpd's answer)",
                      lessons_refused(r, rc == AP_FILTER_ERROR ? r->status
                                                               : rc));
        return rc;
    }
    if (rc == HTTP_REQUEST_ENTITY_TOO_LARGE) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00402)
                      "%s: body larger than %" APR_OFF_T_FMT " bytes "
                      "(LessonsMaxBodySize)", lessons_refused(r, rc), max);
        return lessons_send_problem(r, rc, NULL, apr_psprintf(r->pool,
            "The request body is larger than %" APR_OFF_T_FMT " bytes.",
            max), NULL);
    }
    switch (lessons_payload_decode(r->pool, body, len, mode, in, &errors,
                                   &detail)) {
    case LESSONS_PAYLOAD_OK:
        if (raw) {
            *raw = body;
            *raw_len = len;
        }
        return DECLINED;
    case LESSONS_PAYLOAD_MALFORMED:
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00404)
                      "%s: %s", lessons_refused(r, HTTP_BAD_REQUEST),
                      detail);
        return lessons_send_problem(r, HTTP_BAD_REQUEST, NULL, detail, NULL);
    case LESSONS_PAYLOAD_INVALID:
    default:
        if (APLOGrinfo(r)) {
            /* The fields' names (ours, fixed), never their values. */
            const char *key, *names = NULL;
            json_t *v;

            json_object_foreach(errors, key, v) {
                names = names ? apr_pstrcat(r->pool, names, ", ", key, NULL)
                              : key;
            }
            ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00405)
                          "%s: validation failed on %s",
                          lessons_refused(r, HTTP_BAD_REQUEST),
                          names ? names : "(no field)");
        }
        return lessons_send_problem(r, HTTP_BAD_REQUEST,
            "One or more validation errors occurred.", NULL, errors);
    }
}

static int lessons_no_level(lessons_ctx *c, int level)
{
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, LESSONSLOG(00406)
                  "%s: level %d does not exist",
                  lessons_refused(c->r, HTTP_BAD_REQUEST), level);
    return lessons_send_problem(c->r, HTTP_BAD_REQUEST,
        "One or more validation errors occurred.", NULL,
        lessons_payload_error(c->r->pool, "levelId",
            apr_psprintf(c->r->pool, "Level %d does not exist.", level)));
}

/* A create's answer from what the store did: 201 with the lesson and
 * its Location, 400 for a level that does not exist, else the fault.
 */
static int lessons_created(lessons_ctx *c, lessons_store_e rc,
                           const lessons_input_t *in,
                           const lessons_lesson_t *l, const char *err)
{
    switch (rc) {
    case LESSONS_STORE_OK:
        return lessons_send_lesson(c, HTTP_CREATED, l);
    case LESSONS_STORE_NO_LEVEL:
        return lessons_no_level(c, in->level_id);
    default:
        return lessons_dbd_failed(c, err);
    }
}

/* Does the engine put creates that arrive together in one transaction:
 * SQLite in one of its own (its writers take turns anyway), PostgreSQL
 * in one statement (lessons_store_create_many)?  An engine known not to
 * turns the group off.
 */
static int lessons_creates_group(lessons_srv_conf *sconf,
                                 const lessons_engine_t *engine)
{
    if (engine && !engine->one_writer && !engine->write_returns) {
        apr_atomic_set32(&sconf->group_off, 1);
        return 0;
    }
    return engine != NULL;
}

/* This request's connection (opened here unless it is already) for a
 * create alone: DECLINED, or the answer.  A connection that shows an
 * engine that does not group creates turns the group off.
 */
static int lessons_create_open(lessons_ctx *c, lessons_srv_conf *sconf)
{
    int done;

    if (!c->db.driver && (done = lessons_dbd_open(c)) != DECLINED) {
        return done;
    }
    lessons_creates_group(sconf, lessons_engine_of(c->db.driver));
    return DECLINED;
}

/* A create in a transaction of its own, on this request's connection
 * (opened here unless it is already).
 */
static int lessons_create_alone(lessons_ctx *c, lessons_srv_conf *sconf,
                                const lessons_input_t *in)
{
    lessons_lesson_t l;
    const char *err = NULL;
    lessons_store_e rc;
    int done;

    if ((done = lessons_create_open(c, sconf)) != DECLINED
        || (done = lessons_dbd_write_begin(c)) != DECLINED) {
        return done;
    }
    /* Insert and read-back are one transaction: OK means committed. */
    rc = lessons_store_create(&c->db, c->r->pool, in, &l, &err);
    lessons_dbd_write_end(c);
    return lessons_created(c, rc, in, &l, err);
}

/* ------------------------------------------------- Idempotency-Key */

/* A key refused for the client's fault (400, 409, 422): logged once at
 * info (tag: where), nothing written.  Every refusal of a key passes
 * here.
 */
static int lessons_key_refused(lessons_ctx *c, int status, const char *where,
                               const char *why, const char *detail)
{
    lessons_count(c->r, LESSONS_M_KEYS
                        + (status == HTTP_UNPROCESSABLE_ENTITY
                           ? LESSONS_KEY_OUTCOME_REUSED
                           : status == HTTP_CONFLICT
                             ? LESSONS_KEY_OUTCOME_IN_FLIGHT
                             : LESSONS_KEY_OUTCOME_REFUSED));
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, "%s%s: %s", where,
                  lessons_refused(c->r, status), why);
    return lessons_send_problem(c->r, status, NULL, detail, NULL);
}

/* PUT and DELETE are idempotent as they are (README): the header is
 * refused there rather than taken and not kept.
 */
static int lessons_key_not_here(lessons_ctx *c)
{
    if (!apr_table_get(c->r->headers_in, "Idempotency-Key")) {
        return DECLINED;
    }
    return lessons_key_refused(c, HTTP_BAD_REQUEST, LESSONSLOG(00411),
        "Idempotency-Key is taken on POST only",
        "Idempotency-Key is taken on POST (create) only. PUT and DELETE "
        "are idempotent as they are: send them again without it (with "
        "If-Match for a PUT that must not undo another's change).");
}

/* A string claim of the request's token, or NULL. */
static const char *lessons_claim_text(json_t *claims, const char *name)
{
    return json_string_value(json_object_get(claims, name));
}

/* The Idempotency-Key of a create, if it has one: *keyed and key's
 * caller, key and claim number (the fingerprint needs the body).
 * DECLINED, or the refusal (400).
 */
static int lessons_key_of(lessons_ctx *c, lessons_store_key_t *key,
                          int *keyed)
{
    request_rec *r = c->r;
    const char *field = apr_table_get(r->headers_in, "Idempotency-Key");
    json_t *claims;
    lessons_idem_key_e rc;
    const char *name = NULL;

    memset(key, 0, sizeof(*key));
    *keyed = 0;
    if (!field) {
        return DECLINED;
    }
    rc = lessons_idem_key_parse(r->pool, field, &name);
    if (rc != LESSONS_IDEM_KEY_OK) {
        return lessons_key_refused(c, HTTP_BAD_REQUEST, LESSONSLOG(00410),
            apr_psprintf(r->pool, "Idempotency-Key: %s",
                         lessons_idem_key_describe(rc)),
            apr_psprintf(r->pool, "Idempotency-Key must be one quoted "
                         "string (RFC 8941) of 1 to %d printable ASCII "
                         "characters, such as Idempotency-Key: "
                         "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"; this "
                         "one is %s.", LESSONS_IDEM_KEY_MAX,
                         lessons_idem_key_describe(rc)));
    }
    claims = lessons_request_claims(r);
    key->caller = lessons_idem_caller(r->pool,
                                      lessons_claim_text(claims, "iss"),
                                      lessons_claim_text(claims, "sub"),
                                      r->user);
    if (!key->caller) {
        return lessons_key_refused(c, HTTP_BAD_REQUEST, LESSONSLOG(00412),
            "Idempotency-Key, but the token names no caller (no sub "
            "claim, no user)",
            "Idempotency-Key needs a token that names its caller (a sub "
            "claim), so that no one else's key can answer for it.");
    }
    key->key = name;
    key->claim = lessons_idem_claim_id(key->caller, name);
    *keyed = 1;
    return DECLINED;
}

static int lessons_create_answer(void *baton, apr_pool_t *p,
                                 const lessons_lesson_t *l,
                                 lessons_store_answer_t *out)
{
    return lessons_lesson_answer(baton, p, HTTP_CREATED, l, out);
}

/* A create with Idempotency-Key: alone (never in a group), its key
 * kept in its transaction; a retry gets the answer it got.
 */
static int lessons_create_keyed(lessons_ctx *c, lessons_srv_conf *sconf,
                                const lessons_input_t *in,
                                lessons_store_key_t *key, const char *body,
                                apr_size_t len)
{
    request_rec *r = c->r;
    lessons_store_answer_t ans;
    lessons_store_key_e outcome = LESSONS_KEY_CREATED;
    const char *err = NULL;
    lessons_store_e rc;
    int done;

    key->fingerprint = lessons_idem_fingerprint(r->pool, r->method, r->uri,
                                                key->caller, body, len);
    if (!key->fingerprint) {
        return lessons_dbd_failed(c, "Idempotency-Key: the request's "
                                  "fingerprint could not be made");
    }
    if ((done = lessons_create_open(c, sconf)) != DECLINED
        || (done = lessons_dbd_keys_ready(c)) != DECLINED
        || (done = lessons_dbd_write_begin(c)) != DECLINED) {
        return done;
    }
    key->now = apr_time_sec(apr_time_now());
    key->expires = key->now + lessons_key_lifetime(sconf);
    rc = lessons_store_create_keyed(&c->db, r->pool, in, key,
                                    lessons_create_answer, c, &outcome, &ans,
                                    &err);
    lessons_dbd_write_end(c);
    if (rc != LESSONS_STORE_OK) {
        return lessons_created(c, rc, in, NULL, err);
    }
    switch (outcome) {
    case LESSONS_KEY_CREATED:
        lessons_count(r, LESSONS_M_KEYS + LESSONS_KEY_OUTCOME_STORED);
        return lessons_send_answer(c, &ans);
    case LESSONS_KEY_REPLAYED:
        lessons_count(r, LESSONS_M_KEYS + LESSONS_KEY_OUTCOME_REPLAYED);
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, LESSONSLOG(00413)
                      "Idempotency-Key: the answer of an earlier create "
                      "(lesson %" APR_INT64_T_FMT ") given again",
                      ans.id);
        apr_table_setn(r->headers_out, "Idempotent-Replayed", "true");
        return lessons_send_answer(c, &ans);
    case LESSONS_KEY_REUSED:
        return lessons_key_refused(c, HTTP_UNPROCESSABLE_ENTITY,
            LESSONSLOG(00414), "Idempotency-Key was sent before with "
            "another request",
            "This Idempotency-Key was sent before with another request "
            "(another body, path or method): nothing was created. Send a "
            "new key with a new request.");
    case LESSONS_KEY_IN_FLIGHT:
    default:
        return lessons_key_refused(c, HTTP_CONFLICT, LESSONSLOG(00415),
            "Idempotency-Key: a request with it is still in flight",
            "A request with this Idempotency-Key is still being "
            "processed: nothing was created. Send this one again once "
            "that one has been answered.");
    }
}

/* Jobs not to be made again: each request answers fault, with err. */
static void lessons_jobs_answer(lessons_ctx *c,
                                lessons_store_create_job_t **jobs, int n,
                                lessons_db_fault_e fault, const char *err)
{
    const char *name = lessons_db_name(&c->db, c->r->pool);

    while (n > 0) {
        lessons_store_create_job_t *job = jobs[--n];

        job->rc = LESSONS_STORE_ERROR;
        job->fault = fault;
        job->err = apr_pstrcat(job->pool, name, ": ", err, NULL);
    }
}

/* A share of a run that failed: nothing of it was kept, and each
 * request makes its own create alone.  Not on PostgreSQL when the
 * connection was lost on the way (whether the share committed is
 * unknown) or the share waited out the time bound (which the creates
 * share): each request answers that, as it would alone.  Which of the
 * two, or LESSONS_DB_OK.
 */
static lessons_db_fault_e lessons_create_unkept(lessons_ctx *c,
                                                lessons_store_create_job_t
                                                    **jobs, int n,
                                                const char *err)
{
    const lessons_engine_t *engine = lessons_engine_of(c->db.driver);
    lessons_db_fault_e fault = LESSONS_DB_OK;
    int i;

    err = err ? err : "unknown error";
    if (engine && engine->write_returns) {
        fault = lessons_db_fault(&c->db, NULL, err);
        if (fault != LESSONS_DB_UNAVAILABLE && fault != LESSONS_DB_TIMEOUT) {
            fault = LESSONS_DB_OK;
        }
    }
    ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, c->r, LESSONSLOG(00310)
                  "a group commit of %d create(s) failed, each is %s: %s",
                  n, fault == LESSONS_DB_UNAVAILABLE ? "answered as unknown"
                     : fault == LESSONS_DB_TIMEOUT ? "answered as timed out"
                     : "made alone", err);
    if (fault != LESSONS_DB_OK) {
        lessons_jobs_answer(c, jobs, n, fault, err);
    }
    else {
        for (i = 0; i < n; i++) {
            jobs[i]->rc = LESSONS_STORE_ERROR;
        }
    }
    return fault;
}

/* A leader's run, as its shares go (lessons_group_shares). */
typedef struct {
    lessons_ctx *c;
    lessons_store_create_job_t **jobs;
    int n;
    int failed;                     /* the leader's own create alone */
    const char *err;
} lessons_lead_t;

static lessons_group_share_e lessons_lead_send(void *baton, int first,
                                               int count)
{
    lessons_lead_t *lead = baton;
    lessons_store_create_job_t **jobs = lead->jobs + first;
    lessons_db_fault_e fault;

    if (lessons_store_create_many(&lead->c->db, lead->c->r->pool, jobs,
                                  count, &lead->err) == LESSONS_STORE_OK) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, lead->c->r,
                      LESSONSLOG(00309) "%d create(s) in one transaction",
                      count);
        return LESSONS_SHARE_NEXT;
    }
    if (lead->n == 1) {
        /* The leader's own create alone: its failure is this request's
         * answer, as without the group (made again, the same create
         * would run twice and be logged twice).
         */
        lead->failed = 1;
        return LESSONS_SHARE_NEXT;
    }
    if (jobs[0]->fault != LESSONS_DB_OK) {
        return LESSONS_SHARE_NEXT;  /* answered already: not made again */
    }
    fault = lessons_create_unkept(lead->c, jobs, count, lead->err);
    return fault == LESSONS_DB_UNAVAILABLE ? LESSONS_SHARE_LOST
           : fault == LESSONS_DB_TIMEOUT ? LESSONS_SHARE_LATE
           : LESSONS_SHARE_NEXT;
}

/* Lead a group commit: run the jobs of run on this request's connection
 * (under the writers' mutex where writers take turns), in as few
 * transactions as the engine allows (lessons_store_batch_max), as
 * lessons_group_shares sends them.  A job left as it was (rc ERROR, no
 * fault) is made alone by its own request, as without the group: so are
 * those after a share that lost the connection; those after a share that
 * used up the time bound are answered as timed out.  DECLINED, or this
 * request's answer when it has no connection or no turn to write, or its
 * create alone failed.
 */
static int lessons_create_lead(lessons_ctx *c, lessons_srv_conf *sconf,
                               lessons_group_item_t *run)
{
    request_rec *r = c->r;
    lessons_group_item_t *item;
    lessons_lead_t lead;
    int done, sent;

    memset(&lead, 0, sizeof(lead));
    lead.c = c;
    for (item = run; item; item = item->next) {
        lead.n++;
    }
    lead.jobs = apr_palloc(r->pool, lead.n * sizeof(*lead.jobs));
    lead.n = 0;
    for (item = run; item; item = item->next) {
        lead.jobs[lead.n++] = item->job;
    }
    done = lessons_dbd_open(c);
    if (done == DECLINED
        && lessons_creates_group(sconf, lessons_engine_of(c->db.driver))
        && (done = lessons_dbd_write_begin(c)) == DECLINED) {
        if (lessons_group_shares(lead.n, lessons_store_batch_max(&c->db),
                                 c->deadline, lessons_lead_send, &lead,
                                 &sent) == LESSONS_SHARE_LATE
            && sent < lead.n) {
            ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, LESSONSLOG(00310)
                          "a group commit of %d create(s) was not sent, "
                          "each is answered as timed out", lead.n - sent);
            lessons_jobs_answer(c, lead.jobs + sent, lead.n - sent,
                                LESSONS_DB_TIMEOUT,
                                "not sent: the group commit's time bound "
                                "was used up by the shares before it");
        }
        lessons_dbd_write_end(c);
    }
    lessons_group_done(sconf->group, run);
    /* Answered outside the writers' mutex and the group: a slow client
     * never holds the other writers up.
     */
    return lead.failed ? lessons_dbd_failed(c, lead.err) : done;
}

static apr_status_t lessons_job_pool_destroy(void *pool)
{
    apr_pool_destroy(pool);
    return APR_SUCCESS;
}

/* The creates of this process that arrive together share one
 * transaction and one flush to disk (lessons_group): on SQLite (one
 * writer) a transaction of their statements, on PostgreSQL one statement
 * of up to LESSONS_STORE_BATCH_MAX; each is answered after the commit
 * that holds it.  Until a connection shows the engine, creates go through
 * the group: a leader that finds an engine that does not group sends each
 * back to make its own alone.  The job's answer is copied into a pool of
 * its own, since another request's thread writes it.
 */
static int lessons_create_grouped(lessons_ctx *c, lessons_srv_conf *sconf,
                                  const lessons_input_t *in)
{
    request_rec *r = c->r;
    lessons_store_create_job_t job;
    lessons_group_item_t item, *run = NULL;
    int done = DECLINED;

    memset(&job, 0, sizeof(job));
    job.in = in;
    job.rc = LESSONS_STORE_ERROR;
    if (apr_pool_create_unmanaged_ex(&job.pool, NULL, NULL) != APR_SUCCESS) {
        return lessons_create_alone(c, sconf, in);
    }
    apr_pool_cleanup_register(r->pool, job.pool, lessons_job_pool_destroy,
                              apr_pool_cleanup_null);
    memset(&item, 0, sizeof(item));
    item.job = &job;
    if (!c->deadline) {
        c->deadline = apr_time_now()
                      + apr_time_from_sec(lessons_db_timeout(sconf));
    }
    switch (lessons_group_join(sconf->group, &item, c->deadline, &run)) {
    case LESSONS_GROUP_TIMEOUT:
        return lessons_dbd_writers_shed(c);
    case LESSONS_GROUP_LEAD:
        done = lessons_create_lead(c, sconf, run);
        break;
    case LESSONS_GROUP_DONE:
        break;
    }
    if (done != DECLINED) {
        return done;
    }
    if (job.rc == LESSONS_STORE_OK || job.rc == LESSONS_STORE_NO_LEVEL) {
        return lessons_created(c, job.rc, in, &job.out, NULL);
    }
    if (job.fault != LESSONS_DB_OK) {
        return lessons_dbd_answer(c, job.fault, job.err, 1);
    }
    return lessons_create_alone(c, sconf, in);
}

static int lessons_create(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);
    lessons_input_t in;
    lessons_store_key_t key;
    const char *body = NULL;
    apr_size_t len = 0;
    int keyed = 0, done = lessons_key_of(c, &key, &keyed);

    if (done != DECLINED
        || (done = lessons_decode_body(c, LESSONS_PAYLOAD_CREATE, &in,
                                       &body, &len)) != DECLINED) {
        return done;
    }
    if (keyed) {
        return lessons_create_keyed(c, sconf, &in, &key, body, len);
    }
    if (sconf->group && !apr_atomic_read32(&sconf->group_off)) {
        return lessons_create_grouped(c, sconf, &in);
    }
    return lessons_create_alone(c, sconf, &in);
}

/* If-Match did not hold: nothing was written. */
static int lessons_precondition_failed(lessons_ctx *c)
{
    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, LESSONSLOG(00503)
                  "%s: If-Match does not name the lesson's current version",
                  lessons_refused(c->r, HTTP_PRECONDITION_FAILED));
    return lessons_send_problem(c->r, HTTP_PRECONDITION_FAILED, NULL,
        "The lesson has changed (or is gone) since the version If-Match "
        "names: nothing was changed. GET it again and retry.", NULL);
}

/* If-Match as the write's statement will check it; a header whose tags
 * cannot name this lesson fails without asking the database.
 */
static int lessons_if_match(lessons_ctx *c, lessons_if_match_t *im)
{
    lessons_etag_if_match(c->r->pool,
                          apr_table_get(c->r->headers_in, "If-Match"),
                          c->route.arg, im);
    if (im->asked && !im->any && im->n == 0) {
        return lessons_precondition_failed(c);
    }
    return DECLINED;
}

static int lessons_update(lessons_ctx *c)
{
    request_rec *r = c->r;
    lessons_input_t in;
    lessons_lesson_t l;
    lessons_if_match_t im;
    const char *err = NULL;
    lessons_store_e rc;
    int done = lessons_key_not_here(c);

    if (done != DECLINED
        || (done = lessons_decode_body(c, LESSONS_PAYLOAD_UPDATE, &in, NULL,
                                       NULL)) != DECLINED
        || (done = lessons_if_match(c, &im)) != DECLINED
        || (done = lessons_dbd_open(c)) != DECLINED) {
        return done;
    }
    /* One UPDATE of the fields sent and the read-back (levelName and
     * levelCode follow a changed levelId), in one transaction.
     */
    if ((done = lessons_dbd_write_begin(c)) != DECLINED) {
        return done;
    }
    rc = lessons_store_update(&c->db, r->pool, c->route.arg, &in, &im, &l,
                              &err);
    lessons_dbd_write_end(c);
    switch (rc) {
    case LESSONS_STORE_OK:
        return lessons_send_lesson(c, HTTP_OK, &l);
    case LESSONS_STORE_NOT_FOUND:
        /* RFC 9110 13.1.1: If-Match on no current representation. */
        if (im.asked) {
            return lessons_precondition_failed(c);
        }
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00505)
                      "%s: no lesson %" APR_INT64_T_FMT " to update",
                      lessons_refused(r, HTTP_NOT_FOUND), c->route.arg);
        return lessons_send_empty(r, HTTP_NOT_FOUND);
    case LESSONS_STORE_PRECONDITION:
        return lessons_precondition_failed(c);
    case LESSONS_STORE_NO_LEVEL:
        return lessons_no_level(c, in.level_id);
    default:
        return lessons_dbd_failed(c, err);
    }
}

static int lessons_delete(lessons_ctx *c)
{
    lessons_if_match_t im;
    const char *err = NULL;
    lessons_store_e rc;
    int done = lessons_key_not_here(c);

    if (done != DECLINED || (done = lessons_if_match(c, &im)) != DECLINED
        || (done = lessons_dbd_open(c)) != DECLINED) {
        return done;
    }
    if ((done = lessons_dbd_write_begin(c)) != DECLINED) {
        return done;
    }
    rc = lessons_store_delete(&c->db, c->r->pool, c->route.arg, &im, &err);
    lessons_dbd_write_end(c);
    switch (rc) {
    case LESSONS_STORE_OK:
        return lessons_send_empty(c->r, HTTP_NO_CONTENT);
    case LESSONS_STORE_NOT_FOUND:
        if (im.asked) {
            return lessons_precondition_failed(c);
        }
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, LESSONSLOG(00506)
                      "%s: no lesson %" APR_INT64_T_FMT " to delete",
                      lessons_refused(c->r, HTTP_NOT_FOUND), c->route.arg);
        return lessons_send_empty(c->r, HTTP_NOT_FOUND);
    default:
        return lessons_dbd_failed(c, err);
    }
}

int lessons_handler(request_rec *r)
{
    lessons_ctx c;
    unsigned int method, allowed;
    int rc;

    if (!r->handler || strcmp(r->handler, LESSONS_HANDLER) != 0) {
        return DECLINED;
    }
    memset(&c, 0, sizeof(c));
    c.r = r;
    c.conf = ap_get_module_config(r->per_dir_config, &lessons_module);

    /* Fail closed: the gate has answered long before, but a handler
     * set where no key is in force must not open the API.
     */
    rc = lessons_gate_required(r);
    if (rc != OK) {
        return rc;
    }

    c.route = lessons_route_match(lessons_base_path(c.conf), r->uri);
    if (c.route.route == LESSONS_ROUTE_NONE) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00501)
                      "%s: no such resource",
                      lessons_refused(r, HTTP_NOT_FOUND));
        return lessons_send_problem(r, HTTP_NOT_FOUND, NULL,
                                    "No such resource.", NULL);
    }
    method = lessons_route_method(r->method);
    allowed = lessons_route_allowed(c.route.route);
    if (!(method & allowed)) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00502)
                      "%s: method not allowed here (allowed: %s)",
                      lessons_refused(r, HTTP_METHOD_NOT_ALLOWED),
                      lessons_route_allow_header(c.route.route));
        apr_table_setn(r->headers_out, "Allow",
                       lessons_route_allow_header(c.route.route));
        return lessons_send_problem(r, HTTP_METHOD_NOT_ALLOWED, NULL,
            apr_psprintf(r->pool, "Allowed methods: %s.",
                         lessons_route_allow_header(c.route.route)), NULL);
    }

    switch (method) {
    case LESSONS_METHOD_OPTIONS:
        apr_table_setn(r->headers_out, "Allow",
                       lessons_route_allow_header(c.route.route));
        return lessons_send_empty(r, HTTP_NO_CONTENT);
    case LESSONS_METHOD_POST:
        return lessons_create(&c);
    case LESSONS_METHOD_PUT:
        return lessons_update(&c);
    case LESSONS_METHOD_DELETE:
        return lessons_delete(&c);
    default:                        /* GET, HEAD */
        return lessons_read(&c);
    }
}
