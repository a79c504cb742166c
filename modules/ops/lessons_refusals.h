/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_refusals.h: the gate's refusals summed up per section, for one
 * warn line a minute.  Each refusal is logged at info, which Debian's
 * LogLevel warn hides: an admin whose every client gets "wrong
 * audience" would see nothing.  So each section that makes a token
 * needed has a row in a table of shared memory that every process of
 * the server maps; a process adds each refusal to its request's row
 * (atomically, no lock), and one reader (httpd's parent) sums a row up
 * in one line once its first refusal is a minute old:
 *
 *   7 tokens refused in the last 64 seconds by <Location /api> (...):
 *   5 wrong audience (expected lessons-api), 2 expired
 *
 * A row is known by a key (the caller's: which section of which server,
 * not where in the file): a reload that keeps a section keeps its
 * counts and what the last line said of them, so a refusal is neither
 * lost nor told twice.
 *
 * The unit knows memory, numbers and words, not httpd: the caller makes
 * the memory (apr_shm), numbers the sections and writes the lines.
 */
#ifndef LESSONS_REFUSALS_H
#define LESSONS_REFUSALS_H

#include "apr_pools.h"
#include "apr_time.h"

#include "ops/lessons_metrics.h"

/* A row's key as kept for the next reload (longer ones are cut), and
 * what a section expected (an audience, an issuer), NUL included.
 */
#define LESSONS_REFUSALS_KEY        256
#define LESSONS_REFUSALS_EXPECTED   128

/* How long a row's refusals are gathered before their line. */
#define LESSONS_REFUSALS_EVERY      apr_time_from_sec(60)

typedef struct lessons_refusals_t lessons_refusals_t;

/* Bytes of a table of this many rows. */
apr_size_t lessons_refusals_size(int rows);

/* A table in mem (size bytes, from lessons_refusals_size) of rows rows,
 * row i known by keys[i]; every number zero, except in the rows whose
 * key old (NULL: none) has too: they go on with its counts, what its
 * last line told and when its refusals began (a reload that changed
 * which sections there are).  p: for the lookup only.  NULL when mem
 * is NULL or too small.
 */
lessons_refusals_t *lessons_refusals_make(void *mem, apr_size_t size,
                                          const char *const *keys,
                                          int rows,
                                          lessons_refusals_t *old,
                                          apr_pool_t *p);

/* 1 when t has exactly these rows, in this order (a reload may keep
 * it, and the old processes that still count into it lose nothing).
 */
int lessons_refusals_same(const lessons_refusals_t *t,
                          const char *const *keys, int rows);

/* Whether a reason is summed up: a token (or its header, proof or
 * claim) refused.  A request without a token is not (every client is
 * challenged once), nor a server without keys (its own error line).
 */
int lessons_refusals_counted(lessons_metrics_refusal_e reason);

/* Count one refusal at row, at now.  expected: what the section wanted
 * where the token named something else (the audience for a wrong
 * audience, the issuer for a wrong issuer), else NULL.  Reasons not
 * counted, a NULL table and a row out of range count nothing.
 */
void lessons_refusals_add(lessons_refusals_t *t, int row,
                          lessons_metrics_refusal_e reason,
                          const char *expected, apr_time_t now);

/* One reader at a time (httpd's parent): row's line at now, in p, with
 * label naming the section, when refusals were counted since its last
 * line and the first of them is at least every old; they are then
 * told, and the next line counts from here.  NULL when there is
 * nothing to tell yet.
 */
const char *lessons_refusals_due(lessons_refusals_t *t, int row,
                                 const char *label, apr_pool_t *p,
                                 apr_time_t now, apr_interval_time_t every);

/* What a line says: refusals by reason, what was expected (NULL: not
 * known; several set: more than one value was), over how long.
 */
typedef struct {
    apr_uint64_t n[LESSONS_REFUSED_COUNT];
    const char *audience;
    int audiences_several;
    const char *issuer;
    int issuers_several;
} lessons_refusals_sum_t;

/* The line: the total, the span, the label, then each reason counted in
 * plain words, largest first; NULL when the total is zero.
 */
const char *lessons_refusals_line(apr_pool_t *p, const char *label,
                                  const lessons_refusals_sum_t *sum,
                                  apr_interval_time_t span);

#endif /* LESSONS_REFUSALS_H */
