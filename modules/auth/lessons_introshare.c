/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_introshare.c: the shared table of lessons_introshare.h.  The
 * block starts with a header that names its shape, so that a restart
 * with another number of entries or another cap lays it out anew rather
 * than reading entries of another size.  After the header, the
 * questions' budget (lessons_introrate), then the entries.
 */
#include <string.h>

#include "apr_strings.h"

#include "auth/lessons_introrate.h"
#include "auth/lessons_introshare.h"

#define LESSONS_INTROSHARE_MAGIC    0x6c697332u   /* "lis2" */
#define LESSONS_INTROSHARE_CAP_MAX  (1024 * 1024)

/* One entry: fixed fields, then cap bytes of answer. */
typedef struct {
    unsigned char key[LESSONS_INTROSHARE_KEY_LEN];
    apr_int64_t until;              /* 0: empty */
    apr_int64_t stored;             /* when (seconds) */
    apr_uint64_t seq;               /* the table's count of stores then:
                                     * the smallest is the oldest */
    apr_uint32_t len;
    apr_uint32_t inactive;          /* an "active": false answer */
} lessons_introshare_entry_t;

typedef struct {
    apr_uint32_t magic;
    apr_uint32_t nsets;
    apr_uint64_t cap;
    apr_uint64_t seq;
    apr_uint64_t hits, misses, stored, evicted, too_big, held, crowded;
} lessons_introshare_head_t;

struct lessons_introshare {
    char *base;
    apr_uint32_t nsets;
    apr_size_t cap;
    apr_size_t stride;
    apr_global_mutex_t *lock;
};

#define LESSONS_INTROSHARE_ALIGN(n)  (((n) + 7) & ~(apr_size_t)7)

static apr_size_t introshare_stride(apr_size_t cap)
{
    return LESSONS_INTROSHARE_ALIGN(sizeof(lessons_introshare_entry_t)
                                    + cap + 1);
}

static apr_uint32_t introshare_sets(apr_uint32_t entries)
{
    return (entries + LESSONS_INTROSHARE_WAYS - 1) / LESSONS_INTROSHARE_WAYS;
}

/* Where the budget and the entries start. */
static apr_size_t introshare_rate_at(void)
{
    return LESSONS_INTROSHARE_ALIGN(sizeof(lessons_introshare_head_t));
}

static apr_size_t introshare_entries_at(void)
{
    return introshare_rate_at()
           + LESSONS_INTROSHARE_ALIGN(lessons_introrate_size());
}

apr_size_t lessons_introshare_size(apr_uint32_t entries, apr_size_t cap)
{
    if (entries == 0 || entries > LESSONS_INTROSHARE_MAX || cap == 0
        || cap > LESSONS_INTROSHARE_CAP_MAX) {
        return 0;
    }
    return introshare_entries_at()
           + (apr_size_t)introshare_sets(entries) * LESSONS_INTROSHARE_WAYS
             * introshare_stride(cap);
}

static lessons_introshare_head_t *introshare_head(lessons_introshare_t *t)
{
    return (lessons_introshare_head_t *)t->base;
}

/* Entry w of the set key falls in. */
static lessons_introshare_entry_t *introshare_entry(
    lessons_introshare_t *t, const unsigned char *key, int w)
{
    apr_uint64_t h;
    apr_size_t i;

    memcpy(&h, key, sizeof(h));
    i = (apr_size_t)(h % t->nsets) * LESSONS_INTROSHARE_WAYS + (apr_size_t)w;
    return (lessons_introshare_entry_t *)(t->base + introshare_entries_at()
                                          + i * t->stride);
}

static char *introshare_answer(lessons_introshare_entry_t *e)
{
    return (char *)(e + 1);
}

lessons_introshare_t *lessons_introshare_attach(
    void *base, apr_size_t size, apr_uint32_t entries, apr_size_t cap,
    const lessons_introshare_budget_t *budget, int fresh,
    apr_global_mutex_t *lock, apr_pool_t *p)
{
    lessons_introshare_head_t *head = base;
    apr_size_t need = lessons_introshare_size(entries, cap);
    lessons_introshare_t *t;

    if (!base || !lock || !budget || need == 0 || size < need) {
        return NULL;
    }
    if (fresh || head->magic != LESSONS_INTROSHARE_MAGIC
        || head->nsets != introshare_sets(entries) || head->cap != cap) {
        memset(base, 0, need);
        head->magic = LESSONS_INTROSHARE_MAGIC;
        head->nsets = introshare_sets(entries);
        head->cap = cap;
        fresh = 1;
    }
    /* Laid out anew only where fresh or its rates changed: a child (and
     * a restart with the same rates) keeps what the clients have used.
     */
    if (lessons_introrate_setup((char *)base + introshare_rate_at(),
                                budget->rate, budget->client_rate,
                                budget->seed, budget->now, fresh) != 0) {
        return NULL;
    }
    t = apr_pcalloc(p, sizeof(*t));
    t->base = base;
    t->nsets = introshare_sets(entries);
    t->cap = cap;
    t->stride = introshare_stride(cap);
    t->lock = lock;
    return t;
}

static void introshare_empty(lessons_introshare_head_t *head,
                             lessons_introshare_entry_t *e)
{
    if (e->until) {
        head->held--;
    }
    memset(e, 0, sizeof(*e));
}

int lessons_introshare_get(lessons_introshare_t *t,
                           const unsigned char key[LESSONS_INTROSHARE_KEY_LEN],
                           apr_int64_t now, apr_int64_t max_age,
                           apr_pool_t *p, const char **answer,
                           apr_size_t *len, apr_int64_t *until,
                           apr_int64_t *stored)
{
    lessons_introshare_head_t *head;
    int w, found = 0;

    *answer = NULL;
    *len = 0;
    *until = 0;
    *stored = 0;
    if (!t || apr_global_mutex_lock(t->lock) != APR_SUCCESS) {
        return -1;
    }
    head = introshare_head(t);
    for (w = 0; w < LESSONS_INTROSHARE_WAYS; w++) {
        lessons_introshare_entry_t *e = introshare_entry(t, key, w);

        if (!e->until
            || memcmp(e->key, key, LESSONS_INTROSHARE_KEY_LEN) != 0) {
            continue;
        }
        if (now >= e->until || e->len > t->cap) {
            introshare_empty(head, e);
        }
        else if (now < e->stored + max_age) {
            *len = e->len;
            *answer = apr_pstrmemdup(p, introshare_answer(e), e->len);
            *until = e->until;
            *stored = e->stored;
            found = 1;
        }
        /* (Else too old for this asker's bound, not for every one's:
         * kept.)
         */
        break;
    }
    if (found) {
        head->hits++;
    }
    else {
        head->misses++;
    }
    apr_global_mutex_unlock(t->lock);
    return found;
}

lessons_introshare_put_e lessons_introshare_put(
    lessons_introshare_t *t,
    const unsigned char key[LESSONS_INTROSHARE_KEY_LEN], apr_int64_t now,
    apr_int64_t until, const char *answer, apr_size_t len, int inactive)
{
    lessons_introshare_head_t *head;
    lessons_introshare_entry_t *e, *same = NULL, *free_e = NULL,
                               *oldest = NULL, *oldest_dead = NULL;
    lessons_introshare_put_e rc = LESSONS_INTROSHARE_STORED;
    int w;

    if (until <= now) {
        return LESSONS_INTROSHARE_NOT_KEPT;
    }
    if (!t || apr_global_mutex_lock(t->lock) != APR_SUCCESS) {
        return LESSONS_INTROSHARE_LOCK_FAILED;
    }
    head = introshare_head(t);
    for (w = 0; w < LESSONS_INTROSHARE_WAYS; w++) {
        e = introshare_entry(t, key, w);
        if (e->until
            && memcmp(e->key, key, LESSONS_INTROSHARE_KEY_LEN) == 0) {
            same = e;
            break;
        }
        if (!e->until || e->until <= now) {
            if (!free_e) {
                free_e = e;
            }
        }
        else if (e->inactive) {
            if (!oldest_dead || e->seq < oldest_dead->seq) {
                oldest_dead = e;
            }
        }
        else if (!oldest || e->seq < oldest->seq) {
            oldest = e;
        }
    }
    if (!answer || len > t->cap) {
        /* Not shared: nor is an older answer of the key, which this
         * newer one replaces.
         */
        if (same) {
            introshare_empty(head, same);
        }
        head->too_big++;
        apr_global_mutex_unlock(t->lock);
        return LESSONS_INTROSHARE_TOO_BIG;
    }
    /* Room: the key's own entry, an empty or expired one, then the
     * oldest "active": false answer; an active answer is given up only
     * for another active one.  Tokens no one holds, however many, never
     * push out the answers of tokens someone does.
     */
    e = same ? same : free_e ? free_e : oldest_dead ? oldest_dead
        : inactive ? NULL : oldest;
    if (!e) {
        head->crowded++;
        apr_global_mutex_unlock(t->lock);
        return LESSONS_INTROSHARE_CROWDED;
    }
    if (!same && !free_e) {
        head->evicted++;
        rc = LESSONS_INTROSHARE_EVICTED;
    }
    if (!e->until) {
        head->held++;
    }
    memcpy(e->key, key, LESSONS_INTROSHARE_KEY_LEN);
    memcpy(introshare_answer(e), answer, len);
    introshare_answer(e)[len] = '\0';
    e->len = (apr_uint32_t)len;
    e->inactive = inactive ? 1 : 0;
    e->until = until;
    e->stored = now;
    e->seq = ++head->seq;
    head->stored++;
    apr_global_mutex_unlock(t->lock);
    return rc;
}

apr_status_t lessons_introshare_stats(lessons_introshare_t *t,
                                      lessons_introshare_stats_t *st)
{
    lessons_introshare_head_t *head;
    apr_status_t rv;

    memset(st, 0, sizeof(*st));
    if (!t) {
        return APR_EINVAL;
    }
    rv = apr_global_mutex_lock(t->lock);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    head = introshare_head(t);
    st->entries = t->nsets * LESSONS_INTROSHARE_WAYS;
    st->cap = t->cap;
    st->hits = head->hits;
    st->misses = head->misses;
    st->stored = head->stored;
    st->evicted = head->evicted;
    st->too_big = head->too_big;
    st->held = head->held;
    st->crowded = head->crowded;
    lessons_introrate_stats(t->base + introshare_rate_at(), &st->budget);
    apr_global_mutex_unlock(t->lock);
    return APR_SUCCESS;
}

int lessons_introshare_take(lessons_introshare_t *t,
                            const unsigned char *client, apr_time_t now,
                            int *retry_after)
{
    lessons_introrate_e rc;

    if (!t || apr_global_mutex_lock(t->lock) != APR_SUCCESS) {
        return -1;
    }
    rc = lessons_introrate_take(t->base + introshare_rate_at(), client, now,
                                retry_after);
    apr_global_mutex_unlock(t->lock);
    return (int)rc;
}
