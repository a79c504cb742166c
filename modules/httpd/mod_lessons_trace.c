/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_trace.c: TRACE behind the token gate.  httpd answers TRACE
 * itself, in map_to_storage (mod_http's ap_send_http_trace, MIDDLE),
 * before the directory walk and every access check: with TraceEnable on
 * it echoes the request, Authorization included, and a key in a
 * <Location> or <Directory> is never asked.  Where a key is in force the
 * echo is held until the request has passed the gate; everywhere else
 * httpd answers as it does without the module.
 */

#include "mod_core.h"               /* ap_send_http_trace */

#include "httpd/mod_lessons.h"

/* Whether a token is needed is a question for the request's whole
 * configuration, which httpd has not merged yet: so core's own
 * map_to_storage is done here (the directory and file walks), and the
 * <Location> and <If> sections are merged on top, as httpd does next
 * (its walks then find ours in their caches, from the same input, so
 * nothing is merged twice).
 *
 * No token needed, and no handler of ours: DECLINED, with the request as
 * it came, and httpd answers TRACE as it does without the module.
 * Otherwise OK, with the walked configuration core's map_to_storage
 * would have left: the request goes on to the gate (a 401 without a
 * token, as for any other method), then to lessons_trace_after_gate; or,
 * where the SetHandler of a <Directory> or <Files> names one of ours
 * (translate_name cannot see those), to that handler, which answers 405.
 * A walk that fails answers the request, as it would any other method.
 */
static int lessons_map_trace(request_rec *r)
{
    char *filename = r->filename, *path_info = r->path_info;
    apr_finfo_t finfo = r->finfo;
    ap_conf_vector_t *came = r->per_dir_config, *walked;
    const lessons_dir_conf *conf;
    int rc;

    if ((rc = ap_directory_walk(r)) != OK || (rc = ap_file_walk(r)) != OK) {
        return rc;
    }
    walked = r->per_dir_config;
    if ((rc = ap_location_walk(r)) != OK || (rc = ap_if_walk(r)) != OK) {
        return rc;
    }
    conf = ap_get_module_config(r->per_dir_config, &lessons_module);
    lessons_translate(r);
    if (!lessons_token_required(conf) && !lessons_state(r)->nofile) {
        r->per_dir_config = came;
        r->filename = filename;
        r->path_info = path_info;
        r->finfo = finfo;
        return DECLINED;
    }
    if (!lessons_state(r)->nofile) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, LESSONSLOG(00511)
                      "TRACE %s: a token is needed here, so httpd's TRACE "
                      "answers only after the token gate", r->uri);
        lessons_state(r)->trace_held = 1;
    }
    r->per_dir_config = walked;
    return OK;
}

/* map_to_storage, first: the API, the health check and the metrics map
 * to no file (lessons_map_nofile); TRACE elsewhere waits for the gate
 * where one is in force.  A proxy request is mod_proxy's (its own
 * map_to_storage keeps TRACE from mod_http, and forwards it after the
 * access checks).
 */
int lessons_map_storage(request_rec *r)
{
    int rc = lessons_map_nofile(r);

    if (rc != DECLINED || r->method_number != M_TRACE || r->proxyreq) {
        return rc;
    }
    return lessons_map_trace(r);
}

/* fixups, last: a TRACE that lessons_map_trace held back has passed the
 * gate and the Require lines.  Now httpd's own TRACE answers it, as it
 * would have without the key, TraceEnable deciding: the echo (on,
 * extended) or 405 (off).  Here, before the handler's filters are added,
 * as in map_to_storage.
 */
int lessons_trace_after_gate(request_rec *r)
{
    if (r->method_number != M_TRACE || !lessons_state(r)->trace_held) {
        return DECLINED;
    }
    return ap_send_http_trace(r);
}
