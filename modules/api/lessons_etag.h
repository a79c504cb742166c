/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_etag.h: the API's entity tags, and the conditional request
 * headers that carry them back (RFC 9110 section 13).
 *
 * Tags are strong:
 *   a list     "C<digest>"                the first 128 bits of SHA-256 of
 *                                         the epoch and the body, in hex
 *   a lesson   "L<id>.<version>.<epoch>"  the lesson row's version
 * <epoch> is the database's identity: a tag never matches in another
 * (or a re-created) database.  A lesson's version names its bytes; a
 * list's rows are read after the catalogue version that keys the cache
 * (and under a read lease, while a write waits for the servers'
 * acknowledgements), so two lists built at one version may differ: a
 * list's tag is its bytes', and no tag names two bodies.  The gzip form
 * of a body has the same tag with "-gz" before the closing quote.
 */
#ifndef LESSONS_ETAG_H
#define LESSONS_ETAG_H

#include "apr_pools.h"
#include "store/lessons_store.h"

/* NULL when the digest cannot be made. */
const char *lessons_etag_list(apr_pool_t *p, const lessons_catalog_t *cat,
                              const char *body, apr_size_t len);

const char *lessons_etag_lesson(apr_pool_t *p, const lessons_lesson_t *l);

/* The tag of the gzip form of the body tagged etag. */
const char *lessons_etag_gzip(apr_pool_t *p, const char *etag);

/* A field that is neither "*" alone nor a list of entity-tags (RFC 9110
 * 13.1.1-2) is malformed and matches nothing: If-Match then fails (412,
 * nothing written), If-None-Match never answers 304.  "*bogus" is not
 * "*".
 *
 * Does If-None-Match (a list of tags, or "*") match the current tag?
 * Weak comparison, as RFC 9110 13.1.2 asks: W/ is ignored.  A tag that
 * mod_deflate changed (its "-gzip" suffix, httpd bug 45023) counts as
 * the tag it was made from.  NULL header: no.
 */
int lessons_etag_none_match(const char *header, const char *etag);

/* If-Match for a write to lesson id: fills *im from the header (NULL:
 * not asked).  Strong comparison: W/ tags never match.  Tags of other
 * lessons and lists are skipped; a malformed field matches nothing; a tag naming the
 * lesson's gzip form counts as the lesson's.  Beyond
 * LESSONS_IF_MATCH_MAX versions, or tags from two databases, the rest
 * are skipped.
 */
void lessons_etag_if_match(apr_pool_t *p, const char *header,
                           apr_int64_t id, lessons_if_match_t *im);

/* Does Accept-Encoding let us send the gzip form (and so its tag)?
 * gzip or x-gzip with a non-zero q, or "*" when gzip is not refused by
 * name.  NULL header: no (RFC 9110 12.5.3 allows any coding, but a
 * client that does not say it can inflate is not sent gzip).
 */
int lessons_etag_accepts_gzip(const char *header);

#endif /* LESSONS_ETAG_H */
