/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_cors.c: origins for LessonsCORSOrigins.  A browser serialises
 * an Origin as scheme://host[:port] in lower case, with the default port
 * left out; the admin's entries are normalised the same way once, so a
 * request compares bytes.
 */

#include <stdlib.h>
#include <string.h>
#include "apr_lib.h"
#include "apr_strings.h"
#include "api/lessons_cors.h"

const char *lessons_cors_origin_parse(apr_pool_t *p, const char *origin,
                                      const char **norm)
{
    const char *host, *port = NULL, *c;
    char *out, *q;
    apr_size_t scheme_len;

    *norm = NULL;
    if (!origin || !*origin) {
        return "an origin must not be empty";
    }
    if (strcmp(origin, "*") == 0) {
        *norm = "*";
        return NULL;
    }
    if (strncasecmp(origin, "https://", 8) == 0) {
        scheme_len = 8;
    }
    else if (strncasecmp(origin, "http://", 7) == 0) {
        scheme_len = 7;
    }
    else {
        return apr_psprintf(p, "origin '%s' must start with https:// or "
                            "http:// (or be *)", origin);
    }
    host = origin + scheme_len;
    if (!*host) {
        return apr_psprintf(p, "origin '%s' has no host", origin);
    }
    for (c = host; *c; c++) {
        if (*c == ':' && !port) {
            port = c + 1;
        }
        else if (port ? !apr_isdigit(*c)
                      : !(apr_isalnum(*c) || *c == '-' || *c == '.')) {
            return apr_psprintf(p, "origin '%s' must be scheme://host or "
                                "scheme://host:port, with nothing after "
                                "(no path, no slash)", origin);
        }
    }
    if (port && (!*port || strlen(port) > 5 || atoi(port) < 1
                 || atoi(port) > 65535 || *port == '0')) {
        return apr_psprintf(p, "origin '%s' has a bad port", origin);
    }
    if (host[0] == '.' || host[0] == ':' || host[0] == '-') {
        return apr_psprintf(p, "origin '%s' has a bad host", origin);
    }
    out = apr_pstrdup(p, origin);
    for (q = out; *q; q++) {
        *q = (char)apr_tolower(*q);
    }
    /* A browser leaves the scheme's default port out. */
    if (port && ((scheme_len == 8 && strcmp(port, "443") == 0)
                 || (scheme_len == 7 && strcmp(port, "80") == 0))) {
        out[strlen(out) - strlen(port) - 1] = '\0';
    }
    *norm = out;
    return NULL;
}

int lessons_cors_allowed(const apr_array_header_t *origins,
                         const char *origin)
{
    int i;

    if (!origins || !origin || !*origin || strcmp(origin, "null") == 0) {
        return 0;
    }
    for (i = 0; i < origins->nelts; i++) {
        const char *o = APR_ARRAY_IDX(origins, i, const char *);

        if (o && (strcmp(o, "*") == 0 || strcasecmp(o, origin) == 0)) {
            return 1;
        }
    }
    return 0;
}

const char *lessons_cors_header_refused(apr_pool_t *p, const char *requested)
{
    /* LESSONS_CORS_ALLOW_HEADERS', in lower case. */
    static const char *const known[] = {
        "authorization", "content-type", "dpop", "idempotency-key",
        "if-match", "if-none-match", NULL
    };
    const char *c = requested;

    while (c && *c) {
        const char *start, *end;
        int i, ok = 0;

        while (*c == ' ' || *c == '\t' || *c == ',') {
            c++;
        }
        if (!*c) {
            break;
        }
        start = c;
        while (*c && *c != ',') {
            c++;
        }
        end = c;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t')) {
            end--;
        }
        for (i = 0; known[i]; i++) {
            if ((apr_size_t)(end - start) == strlen(known[i])
                && strncasecmp(start, known[i], (apr_size_t)(end - start))
                   == 0) {
                ok = 1;
                break;
            }
        }
        if (!ok) {
            return apr_pstrmemdup(p, start, (apr_size_t)(end - start));
        }
    }
    return NULL;
}
