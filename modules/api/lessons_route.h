/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_route.h: which operation a request path names, and which
 * methods that resource allows.  Pure string work, no httpd.
 */
#ifndef LESSONS_ROUTE_H
#define LESSONS_ROUTE_H

#include "apr.h"                /* apr_int64_t */

typedef enum {
    LESSONS_ROUTE_NONE = 0,     /* no such resource: 404 */
    LESSONS_ROUTE_COLLECTION,   /* base           GET HEAD POST        */
    LESSONS_ROUTE_BEGINNER,     /* base/beginner  GET HEAD             */
    LESSONS_ROUTE_ADVANCED,     /* base/advanced  GET HEAD             */
    LESSONS_ROUTE_LEVEL,        /* base/level/N   GET HEAD             */
    LESSONS_ROUTE_ITEM          /* base/N         GET HEAD PUT DELETE  */
} lessons_route_e;

/* Methods as bits, so a route's allowed set is one mask. */
#define LESSONS_METHOD_GET      0x01
#define LESSONS_METHOD_HEAD     0x02
#define LESSONS_METHOD_POST     0x04
#define LESSONS_METHOD_PUT      0x08
#define LESSONS_METHOD_DELETE   0x10
#define LESSONS_METHOD_OPTIONS  0x20

typedef struct {
    lessons_route_e route;
    apr_int64_t arg;            /* the id (ITEM) or level (LEVEL), else 0 */
} lessons_route_t;

/* Match a decoded request path against the mount point.  The path must
 * be base itself or base followed by "/"; one trailing slash is allowed.
 * Numbers are optional '-' then decimal digits: an id (ITEM) must fit 64
 * bits, a level (LEVEL) an int, so arg converts to int losslessly there.
 * Anything else ("abc", "1.5", "07x", overflow) is LESSONS_ROUTE_NONE.
 */
lessons_route_t lessons_route_match(const char *base, const char *path);

/* The LESSONS_METHOD_* bit for an HTTP method name (case-sensitive, as
 * HTTP methods are), or 0 for any other method.
 */
unsigned int lessons_route_method(const char *method);

/* The methods a route allows, as a mask and as an Allow header value
 * ("GET, HEAD, POST, OPTIONS").  NONE allows nothing ("" as header).
 */
unsigned int lessons_route_allowed(lessons_route_e route);
const char *lessons_route_allow_header(lessons_route_e route);

#endif /* LESSONS_ROUTE_H */
