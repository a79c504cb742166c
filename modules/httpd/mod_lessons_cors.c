/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_cors.c: browsers calling the API from another origin
 * (LessonsCORSOrigins; off unless configured).  A preflight names no
 * token, so it is answered here, in header_parser: before access control
 * and the token, and final (no access hook, Satisfy line or handler runs
 * after it); only for the listed origins.  Every other answer to a
 * listed origin carries the headers in err_headers_out, so 401, 403 and
 * httpd's own error pages can be read by the script too.
 */

#include "httpd/mod_lessons.h"

static int lessons_cors_preflight(request_rec *r,
                                  const lessons_dir_conf *conf,
                                  const char *origin)
{
    lessons_route_t route;
    const char *method, *header, *why_method = "", *why_header = "";
    int method_ok;

    route = lessons_route_match(lessons_base_path(conf), r->uri);
    if (route.route == LESSONS_ROUTE_NONE) {
        return DECLINED;            /* no such resource: the token check
                                     * and the handler answer it */
    }
    if (!lessons_cors_allowed(conf->cors_origins, origin)) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00209)
                      "%s: CORS preflight from origin %.200s, which "
                      "LessonsCORSOrigins does not list",
                      lessons_refused(r, HTTP_FORBIDDEN), origin);
        return lessons_refuse(r, HTTP_FORBIDDEN,
            "This origin may not call the API from a browser.");
    }
    method = apr_table_get(r->headers_in, "Access-Control-Request-Method");
    method_ok = (lessons_route_method(method)
                 & lessons_route_allowed(route.route)) != 0;
    header = lessons_cors_header_refused(r->pool,
        apr_table_get(r->headers_in, "Access-Control-Request-Headers"));
    if (!method_ok || header) {
        /* Name what was refused: the method, the header, or both. */
        if (!method_ok) {
            why_method = apr_psprintf(r->pool, "method %.40s, which this "
                                      "resource does not take (Allow: %s)",
                                      method ? method : "(none)",
                                      lessons_route_allow_header(
                                          route.route));
        }
        if (header) {
            why_header = apr_psprintf(r->pool, "header %.40s, which the API "
                                      "does not read (it reads "
                                      LESSONS_CORS_ALLOW_HEADERS ")",
                                      header);
        }
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, LESSONSLOG(00210)
                      "%s: CORS preflight for %s%s%s",
                      lessons_refused(r, HTTP_FORBIDDEN), why_method,
                      !method_ok && header ? ", and for " : "", why_header);
        return lessons_refuse(r, HTTP_FORBIDDEN,
            apr_psprintf(r->pool, "A browser may send %s here, with the "
                         "headers " LESSONS_CORS_ALLOW_HEADERS ".",
                         lessons_route_allow_header(route.route)));
    }
    apr_table_setn(r->headers_out, "Access-Control-Allow-Methods",
                   lessons_route_allow_header(route.route));
    apr_table_setn(r->headers_out, "Access-Control-Allow-Headers",
                   LESSONS_CORS_ALLOW_HEADERS);
    apr_table_setn(r->headers_out, "Access-Control-Max-Age",
                   LESSONS_CORS_MAX_AGE);
    lessons_send_empty(r, HTTP_NO_CONTENT);
    return DONE;
}

/* header_parser: DECLINED goes on to the token (with the CORS headers
 * set when the origin is listed); DONE is the preflight's answer, sent;
 * 403 its refusal.  Only where a key is in force, as before the gate.
 */
int lessons_cors_header_parser(request_rec *r)
{
    lessons_dir_conf *conf =
        ap_get_module_config(r->per_dir_config, &lessons_module);
    const char *origin;
    int listed;

    if (!lessons_token_required(conf) || !conf->cors_origins
        || conf->cors_origins->nelts == 0) {
        return DECLINED;
    }
    /* Answers differ by Origin: caches must keep them apart. */
    apr_table_mergen(r->err_headers_out, "Vary", "Origin");
    origin = apr_table_get(r->headers_in, "Origin");
    if (!origin) {
        return DECLINED;
    }
    listed = lessons_cors_allowed(conf->cors_origins, origin);
    if (listed) {
        apr_table_setn(r->err_headers_out, "Access-Control-Allow-Origin",
                       origin);
        apr_table_setn(r->err_headers_out, "Access-Control-Expose-Headers",
                       LESSONS_CORS_EXPOSE_HEADERS);
    }
    if (r->method_number == M_OPTIONS
        && apr_table_get(r->headers_in, "Access-Control-Request-Method")) {
        return lessons_cors_preflight(r, conf, origin);
    }
    return DECLINED;
}
