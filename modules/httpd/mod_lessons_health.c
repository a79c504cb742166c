/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_health.c: the "lessons-health" handler, for load balancers:
 * no token, GET or HEAD, 200 application/health+json {"status":"pass"}
 * when the database answers the catalog statement within
 * LessonsDBTimeout and every key source a section surely takes its keys
 * from holds a usable set in this process (lessons_keys_health), else
 * 503 with {"status":"fail"}; 200 with {"status":"warn"} when the
 * database reads but cannot be written (SQLite read-only for the
 * server's user: GETs are served, every write is a 503).  Nothing more: the catalog version it
 * reads is the list ETag's source, which would let anyone watch write
 * activity, and a keys URL or a fetch error is the admin's business.
 * The details of a failure go to the error log: a database's once a
 * second at most, a key source's once per change of its state.
 */

#include "httpd/mod_lessons.h"

#define LESSONS_CT_HEALTH "application/health+json"

int lessons_health_handler(request_rec *r)
{
    lessons_ctx c;
    lessons_catalog_t cat;
    const char *err = NULL, *body, *unwritable = NULL;
    apr_size_t len = 0;
    int pass;

    if (!r->handler || strcmp(r->handler, LESSONS_HEALTH_HANDLER) != 0) {
        return DECLINED;
    }
    if (r->method_number != M_GET) {        /* HEAD is M_GET too */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00507)
                      "%s: the health check takes GET and HEAD",
                      lessons_refused(r, HTTP_METHOD_NOT_ALLOWED));
        return lessons_send_read_only(r);
    }
    memset(&c, 0, sizeof(c));
    c.r = r;
    c.conf = ap_get_module_config(r->per_dir_config, &lessons_module);
    c.quiet = 1;
    /* Keys first: they cost no connection, and without them every
     * request the section gates gets 503 whatever the database says.
     */
    pass = lessons_keys_health(r) && lessons_dbd_open(&c) == DECLINED;
    if (pass && lessons_store_catalog(&c.db, r->pool, &cat, &err)
                != LESSONS_STORE_OK) {
        lessons_dbd_answer(&c, lessons_db_fault(&c.db, c.db_pool, err), err,
                          0);
        pass = 0;
    }
    if (pass) {
        unwritable = lessons_db_unwritable(&c.db, r->pool);
    }
    if (unwritable) {
        lessons_log_fault(r, APLOG_WARNING, apr_psprintf(r->pool,
            LESSONSLOG(00512) "%s reads but cannot be written (%s): every "
            "write is answered 503; the health check says warn",
            lessons_db_name(&c.db, r->pool), unwritable));
    }
    lessons_dbd_give_back(&c);
    body = lessons_json_health(r->pool, !pass ? "fail"
                                        : unwritable ? "warn" : "pass",
                               &len);
    if (!body) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r, LESSONSLOG(00508)
                      "the health document could not be encoded (out of "
                      "memory?): answered 500");
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    apr_table_setn(r->headers_out, "Cache-Control", "no-store");
    if (!pass) {
        apr_table_setn(r->headers_out, "Retry-After", LESSONS_RETRY_AFTER);
    }
    return lessons_send(r, pass ? HTTP_OK : HTTP_SERVICE_UNAVAILABLE,
                        LESSONS_CT_HEALTH, body, len);
}
