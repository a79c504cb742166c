/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_json.c: lessons and problem documents as JSON.  jansson
 * mallocs its values; lessons_json_pool_own ties them to a pool, and
 * lessons_json_dump serialises straight into pool memory so no malloc'd
 * text outlives the call.
 */
#include "apr_strings.h"

#include "base/lessons_buf.h"
#include "base/lessons_json.h"

static apr_status_t lessons_json_release(void *v)
{
    json_decref((json_t *)v);
    return APR_SUCCESS;
}

json_t *lessons_json_pool_own(apr_pool_t *p, json_t *v)
{
    if (v) {
        apr_pool_cleanup_register(p, v, lessons_json_release,
                                  apr_pool_cleanup_null);
    }
    return v;
}

#define LESSONS_JSON_FLAGS  (JSON_COMPACT | JSON_ENCODE_ANY)

/* The text jansson writes, gathered in pool memory as it comes: one
 * pass over the value (json_dumpb would need two, one to size the
 * buffer; jansson's string escaping is most of a write's CPU).
 */
#define LESSONS_JSON_FIRST  1024    /* a lesson's answer fits in one */

static int lessons_json_gather(const char *text, size_t size, void *data)
{
    return lessons_buf_add(data, text, size, LESSONS_JSON_FIRST);
}

char *lessons_json_dump(apr_pool_t *p, const json_t *v, apr_size_t *len)
{
    lessons_buf_t out = { p, NULL, 0, 0, APR_SIZE_MAX / 4 };

    if (!v || json_dump_callback(v, lessons_json_gather, &out,
                                 LESSONS_JSON_FLAGS) != 0 || out.len == 0) {
        return NULL;
    }
    if (len) {
        *len = out.len;
    }
    return lessons_buf_text(&out);
}

/* json_string() refuses NULL and invalid UTF-8 (returns NULL), and
 * json_object_set_new() refuses a NULL value, so one check at the end
 * catches any bad field.
 */
json_t *lessons_json_lesson(const lessons_lesson_t *l)
{
    json_t *o;

    if (!l || !l->level_name || !l->level_code || !l->title || !l->topic
        || !l->description) {
        return NULL;
    }
    o = json_object();
    if (!o
        || json_object_set_new(o, "id", json_integer(l->id))
        || json_object_set_new(o, "levelId", json_integer(l->level_id))
        || json_object_set_new(o, "levelName", json_string(l->level_name))
        || json_object_set_new(o, "levelCode", json_string(l->level_code))
        || json_object_set_new(o, "title", json_string(l->title))
        || json_object_set_new(o, "order", json_integer(l->order))
        || json_object_set_new(o, "topic", json_string(l->topic))
        || json_object_set_new(o, "description", json_string(l->description))
        || json_object_set_new(o, "isActive", json_boolean(l->is_active))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *lessons_json_lesson_text(apr_pool_t *p, const lessons_lesson_t *l,
                               apr_size_t *len)
{
    return lessons_json_dump(p, lessons_json_pool_own(p,
                                                      lessons_json_lesson(l)),
                             len);
}

char *lessons_json_list_text(apr_pool_t *p, const apr_array_header_t *list,
                             apr_size_t *len)
{
    json_t *arr = lessons_json_pool_own(p, json_array());
    const lessons_lesson_t *items;
    int i;

    if (!arr || !list) {
        return NULL;
    }
    items = (const lessons_lesson_t *)list->elts;
    for (i = 0; i < list->nelts; i++) {
        if (json_array_append_new(arr, lessons_json_lesson(&items[i]))) {
            return NULL;
        }
    }
    return lessons_json_dump(p, arr, len);
}

/* Read-only: status -> (the RFC section that defines it, reason
 * phrase), the type links ASP.NET's ProblemDetails uses.
 */
static const struct {
    int status;
    const char *section;
    const char *title;
} lessons_problem_types[] = {
    { 400, "rfc9110#section-15.5.1",  "Bad Request" },
    { 401, "rfc9110#section-15.5.2",  "Unauthorized" },
    { 403, "rfc9110#section-15.5.4",  "Forbidden" },
    { 404, "rfc9110#section-15.5.5",  "Not Found" },
    { 405, "rfc9110#section-15.5.6",  "Method Not Allowed" },
    { 409, "rfc9110#section-15.5.10", "Conflict" },
    { 412, "rfc9110#section-15.5.13", "Precondition Failed" },
    { 413, "rfc9110#section-15.5.14", "Content Too Large" },
    { 415, "rfc9110#section-15.5.16", "Unsupported Media Type" },
    { 429, "rfc6585#section-4",       "Too Many Requests" },
    { 500, "rfc9110#section-15.6.1",  "Internal Server Error" },
    { 503, "rfc9110#section-15.6.4",  "Service Unavailable" },
};

char *lessons_json_problem(apr_pool_t *p, int status, const char *title,
                           const char *detail, json_t *errors,
                           apr_size_t *len)
{
    json_t *doc = lessons_json_pool_own(p, json_object());
    const char *type = "about:blank";
    const char *phrase = "Error";
    size_t i;

    for (i = 0; i < sizeof(lessons_problem_types)
                    / sizeof(lessons_problem_types[0]); i++) {
        if (lessons_problem_types[i].status == status) {
            type = apr_pstrcat(p, "https://tools.ietf.org/html/",
                               lessons_problem_types[i].section, NULL);
            phrase = lessons_problem_types[i].title;
            break;
        }
    }
    if (!doc
        || json_object_set_new(doc, "type", json_string(type))
        || json_object_set_new(doc, "title", json_string(title ? title
                                                         : phrase))
        || json_object_set_new(doc, "status", json_integer(status))
        || (detail && json_object_set_new(doc, "detail",
                                          json_string(detail)))
        || (errors && json_object_set(doc, "errors", errors))) {
        return NULL;
    }
    return lessons_json_dump(p, doc, len);
}

char *lessons_json_health(apr_pool_t *p, const char *status,
                          apr_size_t *len)
{
    json_t *doc = json_pack("{s:s}", "status", status ? status : "fail");

    if (!doc) {
        return NULL;
    }
    return lessons_json_dump(p, lessons_json_pool_own(p, doc), len);
}
