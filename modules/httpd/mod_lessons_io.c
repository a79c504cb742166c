/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_io.c: what goes over the wire: responses (JSON and
 * problem+json), refusals through httpd's error path with their Bearer
 * challenge, request bodies read within their limit, and fault lines
 * that repeat at most once a second.
 */

#include "httpd/mod_lessons.h"

#define LESSONS_PROBLEM_FILTER  "LESSONS_PROBLEM"

/* An answer shorter than this is flushed by the handler.  httpd's core
 * output filter keeps back less than 4 KB (its THRESHOLD_MIN_WRITE), to
 * go out with whatever follows, and writes it only in write completion:
 * after httpd has looked for the client's next request (there is none
 * yet: the client waits for this answer) and finished the request.  Sent
 * at once, it is on its way during that bookkeeping.  GET by id (about
 * 550 bytes) under wrk -t1 -c32, SQLite: 48.4k and 46.9k req/s against
 * 43.4k and 38.3k (issue 19).  Longer answers the core writes at once
 * anyway, and a flush would make their writes block.
 */
#define LESSONS_FLUSH_BELOW 4096

static int lessons_answer_small(const request_rec *r, apr_size_t len)
{
    return len < LESSONS_FLUSH_BELOW || r->header_only;
}

/* An answer without a body (HEAD, 204, 304) loses its flush on the way:
 * httpd's HTTP_HEADER filter passes on its head and then keeps nothing
 * of what the request's filters are given but the EOS, a FLUSH
 * included.  Its head then waited for write completion (strace: the
 * read for the client's next request came before the 304's writev),
 * and the 304 revalidation ran 5% to 10% slower than GET by id.  So
 * such an answer is flushed below that filter, in the connection's
 * filters, once its head has gone down to them.  Not from a
 * subrequest: its answer is part of another.
 */
static void lessons_flush_bodiless(request_rec *r)
{
    conn_rec *conn = r->connection;
    apr_bucket_brigade *bb;

    if (r->main || !(r->header_only || AP_STATUS_IS_HEADER_ONLY(r->status))) {
        return;
    }
    bb = apr_brigade_create(r->pool, conn->bucket_alloc);
    (void)ap_fflush(conn->output_filters, bb);
    apr_brigade_cleanup(bb);
}

int lessons_pass_answer(request_rec *r, apr_bucket_brigade *bb,
                        apr_size_t len)
{
    int small = lessons_answer_small(r, len);

    if (small) {
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_flush_create(
                                        r->connection->bucket_alloc));
    }
    APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(
                                    r->connection->bucket_alloc));
    if (ap_pass_brigade(r->output_filters, bb) != APR_SUCCESS) {
        return AP_FILTER_ERROR;
    }
    if (small) {
        lessons_flush_bodiless(r);
    }
    return OK;
}

/* Status and entity headers of every response the module writes. */
void lessons_send_head(request_rec *r, int status, const char *type,
                       apr_size_t len)
{
    r->status = status;
    apr_table_setn(r->headers_out, "X-Content-Type-Options", "nosniff");
    if (type) {
        ap_set_content_type(r, type);
    }
    if (status != HTTP_NO_CONTENT) {
        ap_set_content_length(r, (apr_off_t)len);
    }
}

int lessons_send(request_rec *r, int status, const char *type,
                 const char *body, apr_size_t len)
{
    lessons_send_head(r, status, type, len);
    if (len > 0 && !r->header_only) {
        ap_rwrite(body, (int)len, r);
    }
    if (lessons_answer_small(r, len)) {
        ap_rflush(r);                   /* LESSONS_FLUSH_BELOW says why */
        lessons_flush_bodiless(r);
    }
    return OK;
}

int lessons_send_empty(request_rec *r, int status)
{
    return lessons_send(r, status, NULL, NULL, 0);
}

int lessons_send_problem(request_rec *r, int status,
                         const char *title, const char *detail,
                         json_t *errors)
{
    apr_size_t len = 0;
    const char *body = lessons_json_problem(r->pool, status, title, detail,
                                            errors, &len);

    if (!body) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, LESSONSLOG(00509)
                      "the problem document of a %d answer could not be "
                      "encoded (out of memory?): answered 500", status);
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    apr_table_setn(r->headers_out, "Cache-Control", "no-store");
    return lessons_send(r, status, LESSONS_CT_PROBLEM, body, len);
}

const char *lessons_realm(request_rec *r)
{
    const char *realm = ap_auth_name(r);

    /* It goes inside a quoted-string: refuse anything needing escapes. */
    if (!realm || !*realm || strpbrk(realm, "\"\\\r\n")) {
        return LESSONS_DEFAULT_REALM;
    }
    return realm;
}

/* RFC 6750 3: the challenge, with an error code when there is one. */
const char *lessons_challenge_value(request_rec *r, const char *error,
                                    const char *description)
{
    const char *value = apr_psprintf(r->pool, "Bearer realm=\"%s\"",
                                     lessons_realm(r));

    if (error) {
        value = apr_psprintf(r->pool, "%s, error=\"%s\", "
                             "error_description=\"%s\"", value, error,
                             description);
    }
    return value;
}

/* A refusal answered through httpd's error path: the status goes back to
 * httpd, which then runs no later hook nor any handler, whatever Satisfy
 * or Require say; lessons_insert_error_filter dresses httpd's error
 * response as problem+json with this detail.  Headers for the refusal
 * (WWW-Authenticate, Retry-After) go in r->err_headers_out.
 */
int lessons_refuse(request_rec *r, int status, const char *detail)
{
    lessons_req_state *st = lessons_state(r);

    st->problem_status = status;
    st->problem_detail = detail;
    return status;
}

/* Replaces the body of httpd's error page with problem+json (f->ctx:
 * the detail); httpd has already swapped err_headers_out into
 * headers_out.  HEAD gets the headers alone.
 */
static apr_status_t lessons_problem_filter(ap_filter_t *f,
                                           apr_bucket_brigade *bb)
{
    request_rec *r = f->r;
    apr_bucket *b, *next;

    for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb);
         b = next) {
        next = APR_BUCKET_NEXT(b);
        if (!APR_BUCKET_IS_METADATA(b)) {
            apr_bucket_delete(b);
        }
    }
    if (f->ctx) {
        apr_size_t len = 0;
        const char *body = lessons_json_problem(r->pool, r->status, NULL,
                                                f->ctx, NULL, &len);

        f->ctx = NULL;              /* the body goes out once */
        if (body) {
            apr_table_setn(r->headers_out, "Cache-Control", "no-store");
            apr_table_setn(r->headers_out, "X-Content-Type-Options",
                           "nosniff");
            ap_set_content_type(r, LESSONS_CT_PROBLEM);
            ap_set_content_length(r, (apr_off_t)len);
            if (!r->header_only) {
                APR_BRIGADE_INSERT_HEAD(bb, apr_bucket_pool_create(
                    body, len, r->pool, bb->bucket_alloc));
            }
        }
    }
    return ap_pass_brigade(f->next, bb);
}

/* httpd is about to send its error page.  Ours (lessons_refuse), a 403
 * that a Require jwt-claim line took part in, and any 403 on the API go
 * out as problem+json.
 */
void lessons_insert_error_filter(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);
    const char *detail;

    if (!st || st->problem_sent) {
        return;
    }
    if (st->problem_detail && r->status == st->problem_status) {
        detail = st->problem_detail;
    }
    else if (r->status == HTTP_FORBIDDEN && st->denied_claim) {
        detail = "The access token lacks a claim this request requires.";
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00206)
                      "%s: the token lacks a required value of claim %s",
                      lessons_refused(r, HTTP_FORBIDDEN), st->denied_claim);
        apr_table_setn(r->err_headers_out, "WWW-Authenticate",
                       lessons_challenge_value(r, "insufficient_scope",
                                               detail));
    }
    else if (r->status == HTTP_FORBIDDEN && st->api) {
        detail = "The server's access rules refuse this request.";
    }
    else {
        return;
    }
    st->problem_sent = 1;
    ap_add_output_filter(LESSONS_PROBLEM_FILTER, (void *)detail, r,
                         r->connection);
}

void lessons_problem_filter_register(void)
{
    ap_register_output_filter(LESSONS_PROBLEM_FILTER, lessons_problem_filter,
                              NULL, AP_FTYPE_CONTENT_SET);
}

/* 405 for a resource that only GET and HEAD read (the health check, the
 * metrics): Allow, and a problem body.  The caller logs why.
 */
int lessons_send_read_only(request_rec *r)
{
    apr_table_setn(r->headers_out, "Allow", "GET, HEAD");
    return lessons_send_problem(r, HTTP_METHOD_NOT_ALLOWED, NULL,
                                "Allowed methods: GET, HEAD.", NULL);
}

/* How a refusal's info line begins: what was refused (method, path) and
 * who asked (the user claim; httpd adds the client's address, and
 * escapes control characters).  Never the token, the body, or a claim
 * other than the user's.
 */
const char *lessons_refused(request_rec *r, int status)
{
    int user = r->user && *r->user;

    return apr_psprintf(r->pool, "%s %s refused (%d)%s%s", r->method,
                        r->uri, status, user ? ", user " : "",
                        user ? r->user : "");
}

/* Log a fault line (its tag included); an identical one at most once a
 * second per process, with the count of those left out.
 */
void lessons_log_fault(request_rec *r, int level, const char *line)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(r->server->module_config, &lessons_module);
    unsigned long left = 0;

    if (!lessons_throttle_pass(sconf->throttle, line, apr_time_now(),
                               &left)) {
        return;
    }
    if (left) {
        ap_log_rerror(APLOG_MARK, level, 0, r, "%s (and %lu times in the "
                      "last second)", line, left);
    }
    else {
        ap_log_rerror(APLOG_MARK, level, 0, r, "%s", line);
    }
}

/* Read the whole body, up to max bytes.  Returns OK; 413 over our cap,
 * for the caller to answer; or, with *read_rv set, the status for the
 * handler to return as it is when httpd could not read the body: its
 * input filter has then chosen the status (AP_FILTER_ERROR: and sent
 * the response), and nothing of ours may be written.
 */
int lessons_read_body(request_rec *r, apr_off_t max,
                      const char **body, apr_size_t *len,
                      apr_status_t *read_rv)
{
    apr_bucket_brigade *bb;
    const char *cl = apr_table_get(r->headers_in, "Content-Length");
    apr_off_t declared = 0;
    apr_size_t cap = (apr_size_t)max, used = 0, size;
    char *buf;
    int eos = 0;
    apr_status_t rv;

    lessons_state(r)->body_read = 1;
    if (cl && (apr_strtoff(&declared, cl, NULL, 10) != APR_SUCCESS
               || declared < 0)) {
        declared = 0;       /* httpd has vetted it; size the buffer anyway */
    }
    *read_rv = APR_SUCCESS;
    if (declared > max) {
        r->connection->keepalive = AP_CONN_CLOSE;  /* do not drain it */
        return HTTP_REQUEST_ENTITY_TOO_LARGE;
    }
    /* Start with one read's worth and grow as bytes arrive: a client
     * that declares a large body and sends nothing holds no more.
     */
    size = HUGE_STRING_LEN;
    if (declared > 0 && declared < HUGE_STRING_LEN) {
        size = (apr_size_t)declared + 1;
    }
    if (size > cap + 1) {
        size = cap + 1;
    }
    buf = apr_palloc(r->pool, size);
    bb = apr_brigade_create(r->pool, r->connection->bucket_alloc);

    while (!eos) {
        apr_bucket *b;

        rv = ap_get_brigade(r->input_filters, bb, AP_MODE_READBYTES,
                            APR_BLOCK_READ, HUGE_STRING_LEN);
        if (rv != APR_SUCCESS) {
            apr_brigade_destroy(bb);
            *read_rv = rv;
            return ap_map_http_request_error(rv, HTTP_BAD_REQUEST);
        }
        for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb);
             b = APR_BUCKET_NEXT(b)) {
            const char *data;
            apr_size_t n;

            if (APR_BUCKET_IS_EOS(b)) {
                eos = 1;
                break;
            }
            if (APR_BUCKET_IS_METADATA(b)) {
                continue;
            }
            rv = apr_bucket_read(b, &data, &n, APR_BLOCK_READ);
            if (rv != APR_SUCCESS) {
                apr_brigade_destroy(bb);
                *read_rv = rv;
                return ap_map_http_request_error(rv, HTTP_BAD_REQUEST);
            }
            if (n > cap - used) {
                apr_brigade_destroy(bb);
                r->connection->keepalive = AP_CONN_CLOSE;
                return HTTP_REQUEST_ENTITY_TOO_LARGE;
            }
            if (used + n + 1 > size) {
                char *bigger;
                apr_size_t want = size * 2;

                while (want < used + n + 1) {
                    want *= 2;
                }
                if (want > cap + 1) {
                    want = cap + 1;
                }
                bigger = apr_palloc(r->pool, want);
                memcpy(bigger, buf, used);
                buf = bigger;
                size = want;
            }
            memcpy(buf + used, data, n);
            used += n;
        }
        apr_brigade_cleanup(bb);
    }
    apr_brigade_destroy(bb);
    buf[used] = '\0';
    *body = buf;
    *len = used;
    return OK;
}
