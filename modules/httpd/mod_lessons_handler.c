/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_handler.c: the "lessons" handler: route and method, then
 * the operations: reads go to the read path (mod_lessons_cache.c, which
 * builds with mod_lessons_build.c), writes from the body to the store.
 */

#include "httpd/mod_lessons.h"

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
        lessons_lease_settle(c);
        return lessons_send_lesson(c, HTTP_CREATED, l);
    case LESSONS_STORE_NO_LEVEL:
        return lessons_no_level(c, in->level_id);
    default:
        return lessons_dbd_failed(c, err);
    }
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
    int done = lessons_write_alone(c, sconf);

    if (done != DECLINED) {
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

/* PUT and DELETE are idempotent as they are (docs/api.md): the header is
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
    const char *name = NULL, *verifier;

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
            apr_psprintf(r->pool, "Idempotency-Key must be one key of 1 "
                         "to %d printable ASCII characters: a quoted "
                         "string (RFC 8941), such as Idempotency-Key: "
                         "\"8e03978e-40d5-43e8-bc93-6894a57f9324\", or the "
                         "same without quotes (the same key) if it has no "
                         "space, quote, apostrophe, backslash, comma or "
                         "semicolon and does not begin with '(', ':' or "
                         "'?'; this one is %s.", LESSONS_IDEM_KEY_MAX,
                         lessons_idem_key_describe(rc)));
    }
    /* The scope starts with whoever verified the token, never with what
     * it claims: a token verified by one section's keys that names
     * another block's issuer and subject is not that block's caller.
     */
    verifier = lessons_request_verifier(r);
    if (!verifier) {
        return lessons_dbd_failed(c, "Idempotency-Key: the keys that "
                                  "verified the request's token are not "
                                  "known");
    }
    claims = lessons_request_claims(r);
    key->caller = lessons_idem_caller(r->pool, verifier,
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
    if ((done = lessons_write_open(c, sconf)) != DECLINED
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
        lessons_lease_settle(c);
        return lessons_send_answer(c, &ans);
    case LESSONS_KEY_REPLAYED:
        /* Its first answer may never have gone out: wait as it would. */
        lessons_lease_settle(c);
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
        lessons_store_write_job_t job;

        memset(&job, 0, sizeof(job));
        job.in = &in;
        done = lessons_write_grouped(c, sconf, sconf->group,
                                     &lessons_write_creates, &job);
        if (done != DECLINED || job.rc != LESSONS_STORE_ERROR) {
            return done != DECLINED ? done
                   : lessons_created(c, job.rc, &in, &job.out, NULL);
        }
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

/* An update's answer from what the store did. */
static int lessons_updated(lessons_ctx *c, lessons_store_e rc,
                           const lessons_input_t *in,
                           const lessons_if_match_t *im,
                           const lessons_lesson_t *l, const char *err)
{
    switch (rc) {
    case LESSONS_STORE_OK:
        lessons_lease_settle(c);
        return lessons_send_lesson(c, HTTP_OK, l);
    case LESSONS_STORE_NOT_FOUND:
        /* RFC 9110 13.1.1: If-Match on no current representation. */
        if (im->asked) {
            return lessons_precondition_failed(c);
        }
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, LESSONSLOG(00505)
                      "%s: no lesson %" APR_INT64_T_FMT " to update",
                      lessons_refused(c->r, HTTP_NOT_FOUND), c->route.arg);
        return lessons_send_empty(c->r, HTTP_NOT_FOUND);
    case LESSONS_STORE_PRECONDITION:
        return lessons_precondition_failed(c);
    case LESSONS_STORE_NO_LEVEL:
        return lessons_no_level(c, in->level_id);
    default:
        return lessons_dbd_failed(c, err);
    }
}

/* An update in a transaction of its own: one UPDATE of the fields sent
 * and the read-back (levelName and levelCode follow a changed levelId).
 */
static int lessons_update_alone(lessons_ctx *c, lessons_srv_conf *sconf,
                                const lessons_input_t *in,
                                const lessons_if_match_t *im)
{
    lessons_lesson_t l;
    const char *err = NULL;
    lessons_store_e rc;
    int done = lessons_write_alone(c, sconf);

    if (done != DECLINED) {
        return done;
    }
    rc = lessons_store_update(&c->db, c->r->pool, c->route.arg, in, im, &l,
                              &err);
    lessons_dbd_write_end(c);
    return lessons_updated(c, rc, in, im, &l, err);
}

static int lessons_update(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);
    lessons_input_t in;
    lessons_if_match_t im;
    int done = lessons_key_not_here(c);

    if (done != DECLINED
        || (done = lessons_decode_body(c, LESSONS_PAYLOAD_UPDATE, &in, NULL,
                                       NULL)) != DECLINED
        || (done = lessons_if_match(c, &im)) != DECLINED) {
        return done;
    }
    if (sconf->update_group && !apr_atomic_read32(&sconf->group_off)) {
        lessons_store_write_job_t job;

        memset(&job, 0, sizeof(job));
        job.in = &in;
        job.id = c->route.arg;
        job.im = &im;
        done = lessons_write_grouped(c, sconf, sconf->update_group,
                                     &lessons_write_updates, &job);
        if (done != DECLINED || job.rc != LESSONS_STORE_ERROR) {
            return done != DECLINED ? done
                   : lessons_updated(c, job.rc, &in, &im, &job.out, NULL);
        }
    }
    return lessons_update_alone(c, sconf, &in, &im);
}

static int lessons_delete(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);
    lessons_if_match_t im;
    const char *err = NULL;
    lessons_store_e rc;
    int done = lessons_key_not_here(c);

    if (done != DECLINED || (done = lessons_if_match(c, &im)) != DECLINED
        || (done = lessons_write_alone(c, sconf)) != DECLINED) {
        return done;
    }
    rc = lessons_store_delete(&c->db, c->r->pool, c->route.arg, &im, &err);
    lessons_dbd_write_end(c);
    switch (rc) {
    case LESSONS_STORE_OK:
        lessons_lease_settle(c);
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
