/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_map.c: which requests are the API's, known early (at
 * translate_name), so that they skip httpd's filesystem walk.
 */

#include "httpd/mod_lessons.h"

/* The request's own record of what the module knows about it. */
lessons_req_state *lessons_state(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);

    if (!st) {
        st = apr_pcalloc(r->pool, sizeof(*st));
        ap_set_module_config(r->request_config, &lessons_module, st);
    }
    return st;
}

/* Is the request for the API (or the health check, or the metrics)?
 * Asked at translate_name, when the <Location> walk has run
 * (map_to_storage sees only server defaults); asked again for TRACE, of
 * the whole configuration (mod_lessons_trace.c).
 */
int lessons_translate(request_rec *r)
{
    core_dir_config *d = ap_get_core_module_config(r->per_dir_config);
    const char *err = NULL, *handler;

    if (d && d->expr_handler) {
        handler = ap_expr_str_exec(r, d->expr_handler, &err);
        if (!err && handler && strcasecmp(handler, LESSONS_HANDLER) == 0) {
            lessons_state(r)->api = 1;
            lessons_state(r)->nofile = LESSONS_HANDLER;
        }
        else if (!err && handler
                 && strcasecmp(handler, LESSONS_HEALTH_HANDLER) == 0) {
            lessons_state(r)->nofile = LESSONS_HEALTH_HANDLER;
        }
        else if (!err && handler
                 && strcasecmp(handler, LESSONS_METRICS_HANDLER) == 0) {
            lessons_state(r)->nofile = LESSONS_METRICS_HANDLER;
        }
    }
    return DECLINED;
}

/* The API, the health check and the metrics map to no file.  One
 * function for two hooks:
 *
 * translate_name, last before core's: core never maps them to a file
 * (for a long path it would fail, and log AH00127 "Cannot map ... to
 * file").  An Alias or a rewrite, which run earlier, still take the
 * request as before.
 *
 * map_to_storage (through lessons_map_storage): skip httpd's filesystem
 * walk for them, as mod_proxy does.  That also keeps TRACE (answered by
 * mod_http in this hook) away from them: it gets the 405 of any other
 * method (on the API after the token check), and never echoes the
 * Authorization header.
 *
 * In both, r->filename says what the request is, the way mod_proxy's
 * "proxy:URL" does: "lessons:/api/lessons/7", "lessons-health:/health",
 * "lessons-metrics:/metrics" (httpd's own log lines name it:
 * mod_authz_core's AH01630, %f), not a
 * file the API never reads.  Nothing reads it as a path: the filesystem
 * walk (the only code that would) is skipped, and mod_mime takes the
 * same extension from it as from a file name.
 */
int lessons_map_nofile(request_rec *r)
{
    lessons_req_state *st =
        ap_get_module_config(r->request_config, &lessons_module);

    if (!st || !st->nofile) {
        return DECLINED;
    }
    r->filename = apr_pstrcat(r->pool, st->nofile, ":", r->uri, NULL);
    return OK;
}
