/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_json.h: the wire format.  Lessons in the camelCase shape the
 * ASP.NET service sends, and RFC 9457 problem documents.  Output is
 * serialised straight into pool memory.
 */
#ifndef LESSONS_JSON_H
#define LESSONS_JSON_H

#include <jansson.h>
#include "apr_pools.h"
#include "apr_tables.h"
#include "base/lessons_lesson.h"

/* Hand a jansson value to a pool: it is decref'd when p is cleared.
 * Returns v (NULL stays NULL).
 */
json_t *lessons_json_pool_own(apr_pool_t *p, json_t *v);

/* Serialise compactly into p; *len gets the length without the NUL.
 * Returns NULL if v is NULL or cannot be encoded.
 */
char *lessons_json_dump(apr_pool_t *p, const json_t *v, apr_size_t *len);

/* A lesson as a JSON object (new reference, caller owns it), or NULL if
 * a string field is NULL or not UTF-8.
 */
json_t *lessons_json_lesson(const lessons_lesson_t *l);

/* Text of one lesson, or of an array of lessons_lesson_t. */
char *lessons_json_lesson_text(apr_pool_t *p, const lessons_lesson_t *l,
                               apr_size_t *len);
char *lessons_json_list_text(apr_pool_t *p, const apr_array_header_t *list,
                             apr_size_t *len);

/* An RFC 9457 problem document: type (a link to the status's RFC 9110
 * section, as ASP.NET sends), title, status, detail (omitted if NULL)
 * and errors (omitted if NULL; a validation problem).  title NULL means
 * the status's reason phrase.
 */
char *lessons_json_problem(apr_pool_t *p, int status, const char *title,
                           const char *detail, json_t *errors,
                           apr_size_t *len);

/* A health document (application/health+json, the IETF draft's shape):
 * {"status":"pass"}, "warn" or "fail" (status; NULL is "fail"), and
 * nothing else: the check answers without a token, so it says up or
 * down, never what the database holds or how often it is written.
 */
char *lessons_json_health(apr_pool_t *p, const char *status,
                          apr_size_t *len);

#endif /* LESSONS_JSON_H */
