/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_payload.h: the create/update body, from bytes to a checked
 * lessons_input_t, with ASP.NET-style per-field error messages.
 */
#ifndef LESSONS_PAYLOAD_H
#define LESSONS_PAYLOAD_H

#include <jansson.h>
#include "apr_pools.h"
#include "base/lessons_lesson.h"

typedef enum {
    LESSONS_PAYLOAD_CREATE,         /* levelId, title, order required */
    LESSONS_PAYLOAD_UPDATE          /* every field optional */
} lessons_payload_mode_e;

typedef enum {
    LESSONS_PAYLOAD_OK = 0,
    LESSONS_PAYLOAD_MALFORMED,      /* not JSON, not UTF-8, not an object */
    LESSONS_PAYLOAD_INVALID         /* JSON object, but fields fail checks */
} lessons_payload_e;

/* Nonzero when a Content-Type names JSON: application/json or
 * application/<anything>+json, any case, with parameters; a charset
 * parameter, if present, must be utf-8.
 */
int lessons_payload_type_ok(const char *content_type);

/* Decode and validate a body.  Property names match case-insensitively;
 * unknown properties are ignored; a property given twice (in any case
 * mix) is an error.  Types are strict: levelId and order are JSON
 * integers that fit an int (levelId >= 1, order >= 0), title, topic and
 * description strings within their limits, isActive a boolean.  A title
 * that is blank (only white space, invisible format characters and
 * control characters; see lessons_payload.c) is refused exactly as an
 * empty one.  No string may hold a control character (U+0000-001F,
 * U+007F-009F, \u0000 included), except tab, CR and LF in description.
 * On MALFORMED, *detail says why.  On INVALID, *errors is an object
 * mapping each bad field (camelCase) to an array of messages; it is
 * released with p.  On OK, *out holds the values (create fills the
 * optional fields with their defaults: "", "", true).
 */
lessons_payload_e lessons_payload_decode(apr_pool_t *p, const char *body,
                                         apr_size_t len,
                                         lessons_payload_mode_e mode,
                                         lessons_input_t *out,
                                         json_t **errors,
                                         const char **detail);

/* A one-field errors object, for checks made after decoding (an
 * unknown level).  Released with p.
 */
json_t *lessons_payload_error(apr_pool_t *p, const char *field,
                              const char *message);

#endif /* LESSONS_PAYLOAD_H */
