/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_cors.h: which browser origins may call the API (Fetch
 * standard's CORS protocol), for LessonsCORSOrigins.  Pure string work.
 */
#ifndef LESSONS_CORS_H
#define LESSONS_CORS_H

#include "apr_pools.h"
#include "apr_tables.h"

/* Request headers a preflight may ask for, and response headers a
 * script may read.
 */
#define LESSONS_CORS_ALLOW_HEADERS \
    "Authorization, Content-Type, DPoP, Idempotency-Key, If-Match, " \
    "If-None-Match"
#define LESSONS_CORS_EXPOSE_HEADERS \
    "DPoP-Nonce, ETag, Idempotent-Replayed, Location, Retry-After, " \
    "WWW-Authenticate"
#define LESSONS_CORS_MAX_AGE  "600"

/* An origin as the admin writes it: "*", or scheme "://" host, with an
 * optional ":" port and nothing else (no path, no trailing slash, no
 * user info); scheme http or https.  NULL with *norm (lower case, in p)
 * set, or a message.
 */
const char *lessons_cors_origin_parse(apr_pool_t *p, const char *origin,
                                      const char **norm);

/* 1 when the request's Origin is one of origins (normalised entries;
 * "*" allows any origin but "null").  NULL origin or origins: 0.
 */
int lessons_cors_allowed(const apr_array_header_t *origins,
                         const char *origin);

/* NULL when every name of a preflight's Access-Control-Request-Headers
 * (comma separated, any case, spaces around) is one the API reads:
 * LESSONS_CORS_ALLOW_HEADERS (NULL or empty requested included); else the
 * first name that is not, copied into p,
 * so that the refusal can say which header it was.
 */
const char *lessons_cors_header_refused(apr_pool_t *p,
                                        const char *requested);

#endif /* LESSONS_CORS_H */
