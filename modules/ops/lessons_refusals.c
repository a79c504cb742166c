/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_refusals.c: the table is a header and then one row per
 * section, each starting on a cache line of its own.  Writers (every
 * process) add with APR's atomics; the one reader (the parent) keeps in
 * the row what its last line told, so that the table alone, kept across
 * restarts, says what is new.
 *
 * What a section expected is kept as text the first writer copies in:
 * a state word says whether the text is being written, holds one value,
 * or stands for several (a later writer expected something else).  The
 * reader takes it with the counts and empties it for the next line; a
 * writer racing that may lose its value for that line (the line then
 * says less, never something wrong about the counts).
 */
#include <string.h>

#include "apr_atomic.h"
#include "apr_hash.h"
#include "apr_strings.h"

#include "ops/lessons_refusals.h"

#define LESSONS_REFUSALS_MAGIC  0x4c524631u     /* "LRF1": the layout */
#define LESSONS_REFUSALS_LINE   64              /* a cache line */

/* What was expected, by reason: the audience's slot and the issuer's. */
#define LESSONS_EXPECT_AUDIENCE 0
#define LESSONS_EXPECT_ISSUER   1
#define LESSONS_EXPECT_SLOTS    2

/* A slot's state. */
#define LESSONS_EXPECT_EMPTY    0
#define LESSONS_EXPECT_WRITING  1
#define LESSONS_EXPECT_ONE      2
#define LESSONS_EXPECT_SEVERAL  3

struct lessons_refusals_t {
    apr_uint32_t magic;
    apr_uint32_t rows;
};

typedef struct {
    volatile apr_uint32_t state;
    char text[LESSONS_REFUSALS_EXPECTED];
} lessons_refusals_expect_t;

typedef struct {
    volatile apr_uint64_t count[LESSONS_REFUSED_COUNT];
    volatile apr_uint64_t first;    /* the first refusal not told yet
                                     * (apr_time_t); 0: none */
    apr_uint64_t told[LESSONS_REFUSED_COUNT];   /* the reader's: counts
                                     * as its last line left them */
    lessons_refusals_expect_t expect[LESSONS_EXPECT_SLOTS];
    char key[LESSONS_REFUSALS_KEY];
} lessons_refusals_row_t;

/* The plain words of each reason a line tells; NULL: not counted. */
static const char *const lessons_refusal_words[LESSONS_REFUSED_COUNT] = {
    [LESSONS_REFUSED_NO_TOKEN]       = NULL,
    [LESSONS_REFUSED_BAD_HEADER]     = "malformed Authorization header",
    [LESSONS_REFUSED_MALFORMED]      = "malformed",
    [LESSONS_REFUSED_ALGORITHM]      = "algorithm not accepted",
    [LESSONS_REFUSED_CRIT]           = "unknown critical header",
    [LESSONS_REFUSED_SIGNATURE]      = "bad signature",
    [LESSONS_REFUSED_CLAIMS]         = "malformed claims",
    [LESSONS_REFUSED_NO_EXP]         = "no expiry",
    [LESSONS_REFUSED_EXPIRED]        = "expired",
    [LESSONS_REFUSED_NOT_YET_VALID]  = "not yet valid",
    [LESSONS_REFUSED_ISSUER]         = "wrong issuer",
    [LESSONS_REFUSED_AUDIENCE]       = "wrong audience",
    [LESSONS_REFUSED_TYPE]           = "wrong type",
    [LESSONS_REFUSED_IAT]            = "bad issue time",
    [LESSONS_REFUSED_UNKNOWN_KID]    = "unknown key id",
    [LESSONS_REFUSED_UNKNOWN_ISSUER] = "issuer not accepted here",
    [LESSONS_REFUSED_USER_CLAIM]     = "unusable user claim",
    [LESSONS_REFUSED_OTHER]          = "other reasons",
    [LESSONS_REFUSED_SCOPE]          = "lacking a claim Require jwt-claim "
                                       "asks for",
    [LESSONS_REFUSED_NO_KEYS]        = NULL,
    [LESSONS_REFUSED_DPOP]           = "DPoP refused",
};

static apr_size_t lessons_refusals_header_size(void)
{
    return APR_ALIGN(sizeof(lessons_refusals_t), LESSONS_REFUSALS_LINE);
}

static apr_size_t lessons_refusals_stride(void)
{
    return APR_ALIGN(sizeof(lessons_refusals_row_t), LESSONS_REFUSALS_LINE);
}

static lessons_refusals_row_t *lessons_refusals_row(
    const lessons_refusals_t *t, int i)
{
    return (lessons_refusals_row_t *)((char *)t
                                      + lessons_refusals_header_size()
                                      + (apr_size_t)i
                                        * lessons_refusals_stride());
}

apr_size_t lessons_refusals_size(int rows)
{
    return rows > 0 ? lessons_refusals_header_size()
                      + (apr_size_t)rows * lessons_refusals_stride()
                    : 0;
}

/* The slot of what a reason's refusal expected, or -1. */
static int lessons_refusals_slot(lessons_metrics_refusal_e reason)
{
    return reason == LESSONS_REFUSED_AUDIENCE ? LESSONS_EXPECT_AUDIENCE
         : reason == LESSONS_REFUSED_ISSUER ? LESSONS_EXPECT_ISSUER
         : -1;
}

lessons_refusals_t *lessons_refusals_make(void *mem, apr_size_t size,
                                          const char *const *keys,
                                          int rows,
                                          lessons_refusals_t *old,
                                          apr_pool_t *p)
{
    lessons_refusals_t *t = mem;
    apr_hash_t *before = NULL;
    int i, j;

    if (!mem || rows <= 0 || size < lessons_refusals_size(rows)) {
        return NULL;
    }
    memset(mem, 0, lessons_refusals_size(rows));
    t->magic = LESSONS_REFUSALS_MAGIC;
    t->rows = (apr_uint32_t)rows;
    if (old && old->magic == LESSONS_REFUSALS_MAGIC) {
        before = apr_hash_make(p);
        for (i = 0; i < (int)old->rows; i++) {
            apr_hash_set(before, lessons_refusals_row(old, i)->key,
                         APR_HASH_KEY_STRING, lessons_refusals_row(old, i));
        }
    }
    for (i = 0; i < rows; i++) {
        lessons_refusals_row_t *row = lessons_refusals_row(t, i), *was;

        apr_cpystrn(row->key, keys[i] ? keys[i] : "", sizeof(row->key));
        was = before ? apr_hash_get(before, row->key, APR_HASH_KEY_STRING)
                     : NULL;
        if (!was) {
            continue;
        }
        for (j = 0; j < LESSONS_REFUSED_COUNT; j++) {
            row->count[j] = apr_atomic_read64(&was->count[j]);
            row->told[j] = was->told[j];
        }
        row->first = apr_atomic_read64(&was->first);
        for (j = 0; j < LESSONS_EXPECT_SLOTS; j++) {
            apr_uint32_t state = apr_atomic_read32(&was->expect[j].state);

            if (state == LESSONS_EXPECT_ONE
                || state == LESSONS_EXPECT_SEVERAL) {
                memcpy(row->expect[j].text, was->expect[j].text,
                       sizeof(row->expect[j].text));
                row->expect[j].state = state;
            }
        }
    }
    return t;
}

int lessons_refusals_same(const lessons_refusals_t *t,
                          const char *const *keys, int rows)
{
    int i;

    if (!t || t->magic != LESSONS_REFUSALS_MAGIC || rows <= 0
        || t->rows != (apr_uint32_t)rows) {
        return 0;
    }
    for (i = 0; i < rows; i++) {
        if (strncmp(lessons_refusals_row(t, i)->key, keys[i] ? keys[i] : "",
                    LESSONS_REFUSALS_KEY - 1) != 0) {
            return 0;
        }
    }
    return 1;
}

int lessons_refusals_counted(lessons_metrics_refusal_e reason)
{
    return (int)reason >= 0 && reason < LESSONS_REFUSED_COUNT
           && lessons_refusal_words[reason] != NULL;
}

/* A writer's value for a slot: the first one kept, another marks it
 * several.  A writer that finds the text being written leaves it.
 */
static void lessons_refusals_expect(lessons_refusals_expect_t *e,
                                    const char *text)
{
    apr_uint32_t state = apr_atomic_read32(&e->state);

    if (state == LESSONS_EXPECT_EMPTY) {
        if (apr_atomic_cas32(&e->state, LESSONS_EXPECT_WRITING,
                             LESSONS_EXPECT_EMPTY) == LESSONS_EXPECT_EMPTY) {
            apr_cpystrn(e->text, text, sizeof(e->text));
            apr_atomic_set32(&e->state, LESSONS_EXPECT_ONE);
        }
    }
    else if (state == LESSONS_EXPECT_ONE
             && strncmp(e->text, text, sizeof(e->text) - 1) != 0) {
        apr_atomic_cas32(&e->state, LESSONS_EXPECT_SEVERAL,
                         LESSONS_EXPECT_ONE);
    }
}

void lessons_refusals_add(lessons_refusals_t *t, int row,
                          lessons_metrics_refusal_e reason,
                          const char *expected, apr_time_t now)
{
    lessons_refusals_row_t *r;
    int slot = lessons_refusals_slot(reason);

    if (!t || row < 0 || row >= (int)t->rows
        || !lessons_refusals_counted(reason)) {
        return;
    }
    r = lessons_refusals_row(t, row);
    /* When it began, and what it expected, before the count: a reader
     * that sees the count sees them too.
     */
    if (apr_atomic_read64(&r->first) == 0) {
        apr_atomic_cas64(&r->first, (apr_uint64_t)now, 0);
    }
    if (expected && slot >= 0) {
        lessons_refusals_expect(&r->expect[slot], expected);
    }
    apr_atomic_add64(&r->count[reason], 1);
}

/* The reader's copy of a slot, emptied for the next line. */
static const char *lessons_refusals_take(apr_pool_t *p,
                                         lessons_refusals_expect_t *e,
                                         int *several)
{
    apr_uint32_t state = apr_atomic_read32(&e->state);
    const char *text;

    *several = state == LESSONS_EXPECT_SEVERAL;
    if (state != LESSONS_EXPECT_ONE && state != LESSONS_EXPECT_SEVERAL) {
        return NULL;
    }
    text = apr_pstrndup(p, e->text, sizeof(e->text) - 1);
    apr_atomic_cas32(&e->state, LESSONS_EXPECT_EMPTY, state);
    return text;
}

const char *lessons_refusals_due(lessons_refusals_t *t, int row,
                                 const char *label, apr_pool_t *p,
                                 apr_time_t now, apr_interval_time_t every)
{
    lessons_refusals_sum_t sum;
    lessons_refusals_row_t *r;
    apr_uint64_t now_count[LESSONS_REFUSED_COUNT], grew = 0;
    apr_time_t first;
    const char *line;
    int i;

    if (!t || row < 0 || row >= (int)t->rows) {
        return NULL;
    }
    r = lessons_refusals_row(t, row);
    memset(&sum, 0, sizeof(sum));
    for (i = 0; i < LESSONS_REFUSED_COUNT; i++) {
        now_count[i] = apr_atomic_read64(&r->count[i]);
        sum.n[i] = now_count[i] - r->told[i];
        grew += sum.n[i];
    }
    if (!grew) {
        return NULL;
    }
    first = (apr_time_t)apr_atomic_read64(&r->first);
    /* A refusal counted after the last line had reset the start (or a
     * clock set back): they begin now.
     */
    if (first <= 0 || first > now) {
        apr_atomic_set64(&r->first, (apr_uint64_t)now);
        return NULL;
    }
    if (now - first < every) {
        return NULL;
    }
    sum.audience = lessons_refusals_take(p, &r->expect[
                                             LESSONS_EXPECT_AUDIENCE],
                                         &sum.audiences_several);
    sum.issuer = lessons_refusals_take(p, &r->expect[LESSONS_EXPECT_ISSUER],
                                       &sum.issuers_several);
    line = lessons_refusals_line(p, label, &sum, now - first);
    for (i = 0; i < LESSONS_REFUSED_COUNT; i++) {
        r->told[i] = now_count[i];
    }
    apr_atomic_set64(&r->first, 0);
    return line;
}

/* " (expected X)" after a reason whose expected value is known. */
static const char *lessons_refusals_expected(apr_pool_t *p, int reason,
                                             const lessons_refusals_sum_t
                                             *sum)
{
    const char *value = NULL;
    int several = 0;

    if (reason == LESSONS_REFUSED_AUDIENCE) {
        value = sum->audience;
        several = sum->audiences_several;
    }
    else if (reason == LESSONS_REFUSED_ISSUER) {
        value = sum->issuer;
        several = sum->issuers_several;
    }
    return value ? apr_pstrcat(p, " (expected ", value,
                               several ? " and others)" : ")", NULL)
                 : "";
}

const char *lessons_refusals_line(apr_pool_t *p, const char *label,
                                  const lessons_refusals_sum_t *sum,
                                  apr_interval_time_t span)
{
    int order[LESSONS_REFUSED_COUNT], n = 0, i, j;
    apr_uint64_t total = 0;
    const char *reasons = "";

    for (i = 0; i < LESSONS_REFUSED_COUNT; i++) {
        if (!sum->n[i] || !lessons_refusal_words[i]) {
            continue;
        }
        total += sum->n[i];
        /* Largest first; at a tie, in the reasons' order. */
        for (j = n; j > 0 && sum->n[order[j - 1]] < sum->n[i]; j--) {
            order[j] = order[j - 1];
        }
        order[j] = i;
        n++;
    }
    if (!total) {
        return NULL;
    }
    for (j = 0; j < n; j++) {
        reasons = apr_psprintf(p, "%s%s%" APR_UINT64_T_FMT " %s%s", reasons,
                               j ? ", " : "", sum->n[order[j]],
                               lessons_refusal_words[order[j]],
                               lessons_refusals_expected(p, order[j], sum));
    }
    return apr_psprintf(p, "%" APR_UINT64_T_FMT " %s refused in the last "
                        "%" APR_TIME_T_FMT " seconds by %s: %s", total,
                        total == 1 ? "token" : "tokens",
                        apr_time_sec(span > 0 ? span : 0),
                        label ? label : "(a section)", reasons);
}
