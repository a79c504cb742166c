/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_etag.c: making the API's entity tags and reading them back
 * from If-None-Match and If-Match.  Headers are hostile input: every
 * tag is bounded by its quotes and the header's end, never by a NUL
 * the client did not send.
 */
#include <string.h>

#include "apr_lib.h"
#include "apr_strings.h"

#include "api/lessons_etag.h"
#include "base/lessons_digest.h"

#define LESSONS_GZIP_SUFFIX      "-gz"
#define LESSONS_DEFLATE_SUFFIX   "-gzip"    /* what mod_deflate appends */

const char *lessons_etag_list(apr_pool_t *p, const lessons_catalog_t *cat,
                              const char *body, apr_size_t len)
{
    unsigned char d[LESSONS_DIGEST_LEN];
    lessons_digest_field_t f[2];

    f[0].data = cat->epoch;
    f[0].len = cat->epoch ? strlen(cat->epoch) : 0;
    f[1].data = body;
    f[1].len = len;
    if (!body || !lessons_digest_fields("lessons list", f, 2, d)) {
        return NULL;
    }
    return apr_pstrcat(p, "\"C", lessons_digest_hex(p, d, 16), "\"", NULL);
}

const char *lessons_etag_lesson(apr_pool_t *p, const lessons_lesson_t *l)
{
    return apr_psprintf(p, "\"L%" APR_INT64_T_FMT ".%" APR_INT64_T_FMT
                        ".%s\"", l->id, l->version,
                        l->epoch ? l->epoch : "");
}

const char *lessons_etag_gzip(apr_pool_t *p, const char *etag)
{
    apr_size_t n = strlen(etag);

    if (n < 2 || etag[n - 1] != '"') {
        return etag;
    }
    return apr_psprintf(p, "%.*s" LESSONS_GZIP_SUFFIX "\"", (int)(n - 1),
                        etag);
}

/* One entity-tag of a list that lessons_etag_field_ok has passed: sets
 * *weak, *opaque (inside the quotes) and *len, and returns where the
 * next one starts, or NULL at the end.
 */
static const char *lessons_etag_next(const char *s, int *weak,
                                     const char **opaque, apr_size_t *len)
{
    const char *end;

    while (*s == ' ' || *s == '\t' || *s == ',') {
        s++;
    }
    if (!*s) {
        return NULL;
    }
    *weak = 0;
    *len = 0;
    *opaque = s;
    if (s[0] == 'W' && s[1] == '/') {
        *weak = 1;
        s += 2;
    }
    end = strchr(s + 1, '"');       /* s is at the opening quote */
    *opaque = s + 1;
    *len = (apr_size_t)(end - s - 1);
    return end + 1;
}

/* RFC 9110 8.8.3 and 13.1.1-2: the field is "*" alone, or a list of
 * entity-tags ([W/] DQUOTE *etagc DQUOTE; etagc is %x21 / %x23-7E /
 * obs-text), separated by commas and optional whitespace, empty members
 * allowed.  1 when it is one of them (*star set for "*"), 0 when it is
 * malformed: "*bogus", "*, \"a\"", an unquoted or unterminated tag.
 */
static int lessons_etag_field_ok(const char *s, int *star)
{
    int tags = 0;

    *star = 0;
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    if (*s == '*') {
        for (s++; *s == ' ' || *s == '\t'; s++) {
        }
        *star = 1;
        return *s == '\0';
    }
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == ',') {
            s++;
        }
        if (!*s) {
            return tags > 0;
        }
        if (s[0] == 'W' && s[1] == '/') {
            s += 2;
        }
        if (*s++ != '"') {
            return 0;
        }
        while (*s && *s != '"') {
            unsigned char c = (unsigned char)*s++;

            if (c < 0x21 || c == 0x7f) {
                return 0;
            }
        }
        if (*s++ != '"') {
            return 0;               /* unterminated */
        }
        tags++;
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        if (*s && *s != ',') {
            return 0;               /* something after a tag */
        }
    }
}

/* Is the opaque part a (inside its quotes) the tag etag, or etag with
 * suffix?
 */
static int lessons_etag_is(const char *a, apr_size_t alen, const char *etag,
                           const char *suffix)
{
    apr_size_t n = strlen(etag), slen = suffix ? strlen(suffix) : 0;

    if (n < 2 || alen != n - 2 + slen || memcmp(a, etag + 1, n - 2) != 0) {
        return 0;
    }
    return slen == 0 || memcmp(a + n - 2, suffix, slen) == 0;
}

int lessons_etag_none_match(const char *header, const char *etag)
{
    const char *s = header, *opaque = NULL;
    apr_size_t len = 0;
    int weak = 0;

    int star = 0;

    if (!header || !etag || !lessons_etag_field_ok(header, &star)) {
        return 0;                   /* malformed: matches nothing */
    }
    if (star) {
        return 1;                   /* the resource exists: it is here */
    }
    while ((s = lessons_etag_next(s, &weak, &opaque, &len)) != NULL) {
        if (len > 0 && (lessons_etag_is(opaque, len, etag, NULL)
                        || lessons_etag_is(opaque, len, etag,
                                           LESSONS_DEFLATE_SUFFIX))) {
            return 1;
        }
    }
    return 0;
}

/* "L<id>.<version>.<epoch>" (with an optional -gz) into its parts. */
static int lessons_etag_parse_lesson(apr_pool_t *p, const char *opaque,
                                     apr_size_t len, apr_int64_t *id,
                                     apr_int64_t *version,
                                     const char **epoch)
{
    char *tag, *dot, *end;
    apr_size_t slen = sizeof(LESSONS_GZIP_SUFFIX) - 1, i;

    if (len < 2 || opaque[0] != 'L') {
        return 0;
    }
    tag = apr_pstrmemdup(p, opaque + 1, len - 1);
    if (len - 1 > slen
        && strcmp(tag + len - 1 - slen, LESSONS_GZIP_SUFFIX) == 0) {
        tag[len - 1 - slen] = '\0';
    }
    if (!apr_isdigit(tag[0])) {
        return 0;
    }
    *id = apr_strtoi64(tag, &end, 10);
    if (*end != '.' || !apr_isdigit(end[1])) {
        return 0;
    }
    *version = apr_strtoi64(end + 1, &dot, 10);
    if (*dot != '.' || !dot[1]) {
        return 0;
    }
    for (i = 1; dot[i]; i++) {
        if (!apr_isxdigit(dot[i])) {
            return 0;
        }
    }
    *epoch = dot + 1;
    return 1;
}

void lessons_etag_if_match(apr_pool_t *p, const char *header,
                           apr_int64_t id, lessons_if_match_t *im)
{
    const char *s = header, *opaque = NULL, *epoch = NULL;
    apr_int64_t tag_id = 0, version = 0;
    apr_size_t len = 0;
    int weak = 0, star = 0;

    memset(im, 0, sizeof(*im));
    if (!header) {
        return;
    }
    im->asked = 1;
    if (!lessons_etag_field_ok(header, &star)) {
        return;                     /* malformed: matches nothing */
    }
    if (star) {
        im->any = 1;
        return;
    }
    while ((s = lessons_etag_next(s, &weak, &opaque, &len)) != NULL) {
        if (weak || im->n >= LESSONS_IF_MATCH_MAX
            || !lessons_etag_parse_lesson(p, opaque, len, &tag_id, &version,
                                          &epoch)
            || tag_id != id || (im->epoch && strcmp(im->epoch, epoch))) {
            continue;
        }
        im->epoch = epoch;
        im->versions[im->n++] = version;
    }
}

/* The q of one Accept-Encoding member (after its coding): 0 only when
 * it says q=0 (q=0.0, q=0.000).
 */
static int lessons_q_nonzero(const char *params, const char *end)
{
    const char *q;

    for (q = params; q < end; q++) {
        if ((*q == 'q' || *q == 'Q') && q + 1 < end && q[1] == '=') {
            for (q += 2; q < end && (*q == '0' || *q == '.'); q++) {
            }
            return q < end && apr_isdigit(*q);
        }
    }
    return 1;
}

int lessons_etag_accepts_gzip(const char *header)
{
    const char *s = header, *end, *name_end;
    int gzip = -1, star = 0;

    if (!header) {
        return 0;
    }
    while (*s) {
        apr_size_t n;

        while (*s == ' ' || *s == '\t' || *s == ',') {
            s++;
        }
        end = strchr(s, ',');
        end = end ? end : s + strlen(s);
        for (name_end = s; name_end < end && *name_end != ';'
             && *name_end != ' ' && *name_end != '\t'; name_end++) {
        }
        n = (apr_size_t)(name_end - s);
        if ((n == 4 && strncasecmp(s, "gzip", 4) == 0)
            || (n == 6 && strncasecmp(s, "x-gzip", 6) == 0)) {
            gzip = lessons_q_nonzero(name_end, end);
        }
        else if (n == 1 && *s == '*') {
            star = lessons_q_nonzero(name_end, end);
        }
        s = end;
    }
    return gzip >= 0 ? gzip : star;
}
