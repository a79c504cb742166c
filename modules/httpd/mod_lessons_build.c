/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_build.c: the document of each GET route, built from the
 * store at a catalog version, for the read path to send and keep.
 */

#include "httpd/mod_lessons.h"

/* The document of a GET route, built from the database at catalog
 * version cat: DECLINED with *doc filled, or the finished answer (404
 * for a missing lesson, or a fault).
 */
int lessons_build(lessons_ctx *c, const lessons_catalog_t *cat,
                  lessons_doc_t *doc)
{
    apr_array_header_t *list = NULL;
    lessons_lesson_t l;
    const char *err = NULL;
    lessons_store_e rc;

    switch (c->route.route) {
    case LESSONS_ROUTE_ITEM:
        rc = lessons_store_get(&c->db, c->r->pool, c->route.arg, &l, &err);
        if (rc == LESSONS_STORE_NOT_FOUND) {
            ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, c->r, LESSONSLOG(00504)
                          "%s: no lesson %" APR_INT64_T_FMT,
                          lessons_refused(c->r, HTTP_NOT_FOUND),
                          c->route.arg);
            lessons_dbd_give_back(c);
            return lessons_send_empty(c->r, HTTP_NOT_FOUND);
        }
        if (rc != LESSONS_STORE_OK) {
            return lessons_dbd_failed(c, err);
        }
        doc->body = lessons_json_lesson_text(c->r->pool, &l, &doc->len);
        doc->etag = lessons_etag_lesson(c->r->pool, &l);
        if (!doc->body) {
            return lessons_dbd_failed(c, "a stored lesson could not be "
                                     "encoded");
        }
        return DECLINED;
    case LESSONS_ROUTE_BEGINNER:
        rc = lessons_store_list_levels(&c->db, c->r->pool,
                                       LESSONS_BEGINNER_FIRST,
                                       LESSONS_BEGINNER_SECOND, &list, &err);
        break;
    case LESSONS_ROUTE_ADVANCED:
        rc = lessons_store_list_levels(&c->db, c->r->pool,
                                       LESSONS_ADVANCED_FIRST,
                                       LESSONS_ADVANCED_SECOND, &list, &err);
        break;
    case LESSONS_ROUTE_LEVEL:
        rc = lessons_store_list_level(&c->db, c->r->pool, c->route.arg,
                                      &list, &err);
        break;
    default:
        rc = lessons_store_list_all(&c->db, c->r->pool, &list, &err);
        break;
    }
    if (rc != LESSONS_STORE_OK) {
        return lessons_dbd_failed(c, err);
    }
    doc->body = lessons_json_list_text(c->r->pool, list, &doc->len);
    doc->etag = lessons_etag_list(c->r->pool, cat, doc->body, doc->len);
    if (!doc->body || !doc->etag) {
        return lessons_dbd_failed(c, "stored lessons could not be encoded");
    }
    return DECLINED;
}
