/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_introrate.c: the introspection endpoint's budget of
 * lessons_introrate.h.  A bucket holds micro-questions: it fills by
 * rate of them every microsecond, up to one second's worth, and a
 * question takes a million.  Integers only, so that every process
 * reads the same state the same way.
 */
#include <string.h>

#include "auth/lessons_introrate.h"

#define LESSONS_INTRORATE_MAGIC 0x6c697231u     /* "lir1" */
#define LESSONS_INTRORATE_ONE   APR_UINT64_C(1000000)

typedef struct {
    apr_uint64_t level;             /* micro-questions */
    apr_time_t last;                /* when level was last filled */
} introrate_bucket_t;

typedef struct {
    unsigned char client[LESSONS_INTRORATE_CLIENT_LEN];
    introrate_bucket_t bucket;
    apr_uint32_t used;              /* 0: an empty entry */
    apr_uint32_t pad;
} introrate_client_t;

typedef struct {
    apr_uint32_t magic;
    apr_uint32_t rate;
    apr_uint32_t client_rate;
    apr_uint32_t pad;
    apr_uint64_t seed;
    apr_uint64_t asked, client_over, server_over;
    introrate_bucket_t server;
    introrate_client_t clients[LESSONS_INTRORATE_SETS
                               * LESSONS_INTRORATE_WAYS];
} introrate_state_t;

apr_size_t lessons_introrate_size(void)
{
    return (sizeof(introrate_state_t) + 7) & ~(apr_size_t)7;
}

int lessons_introrate_setup(void *mem, apr_uint32_t rate,
                            apr_uint32_t client_rate, apr_uint64_t seed,
                            apr_time_t now, int fresh)
{
    introrate_state_t *s = mem;

    if (!mem || rate < 1 || rate > LESSONS_INTRORATE_MAX || client_rate < 1
        || client_rate > rate) {
        return -1;
    }
    if (!fresh && s->magic == LESSONS_INTRORATE_MAGIC && s->rate == rate
        && s->client_rate == client_rate) {
        return 0;
    }
    memset(s, 0, sizeof(*s));
    s->magic = LESSONS_INTRORATE_MAGIC;
    s->rate = rate;
    s->client_rate = client_rate;
    s->seed = seed;
    s->server.level = (apr_uint64_t)rate * LESSONS_INTRORATE_ONE;
    s->server.last = now;
    return 0;
}

/* The bucket of rate filled to now.  A clock that went back (another
 * process read it a moment earlier) fills nothing.
 */
static void introrate_fill(introrate_bucket_t *b, apr_uint32_t rate,
                           apr_time_t now)
{
    apr_uint64_t full = (apr_uint64_t)rate * LESSONS_INTRORATE_ONE;

    if (now <= b->last) {
        return;
    }
    if (now - b->last >= (apr_time_t)LESSONS_INTRORATE_ONE) {
        b->level = full;
    }
    else {
        b->level += (apr_uint64_t)(now - b->last) * rate;
        if (b->level > full) {
            b->level = full;
        }
    }
    b->last = now;
}

/* Whole seconds, at least 1, until b (of rate) holds a question. */
static int introrate_wait(const introrate_bucket_t *b, apr_uint32_t rate)
{
    apr_uint64_t need = LESSONS_INTRORATE_ONE - b->level;  /* level < ONE */
    apr_uint64_t usec = (need + rate - 1) / rate;
    apr_uint64_t sec = (usec + LESSONS_INTRORATE_ONE - 1)
                       / LESSONS_INTRORATE_ONE;

    return sec < 1 ? 1 : (int)sec;
}

/* The set of client: FNV-1a over its bytes from the seed, mixed, so
 * that neighbouring addresses spread.  Not a security boundary: two
 * clients in one set only make the table forget one of them sooner.
 */
static introrate_client_t *introrate_set(introrate_state_t *s,
                                         const unsigned char *client)
{
    apr_uint64_t h = APR_UINT64_C(14695981039346656037) ^ s->seed;
    int i;

    for (i = 0; i < LESSONS_INTRORATE_CLIENT_LEN; i++) {
        h ^= client[i];
        h *= APR_UINT64_C(1099511628211);
    }
    h ^= h >> 31;
    return &s->clients[(h % LESSONS_INTRORATE_SETS)
                       * LESSONS_INTRORATE_WAYS];
}

/* client's entry, filled to now: its own, else the fullest of its set
 * (an empty one counts as full), made anew and full.
 */
static introrate_client_t *introrate_client(introrate_state_t *s,
                                            const unsigned char *client,
                                            apr_time_t now)
{
    introrate_client_t *set = introrate_set(s, client), *take = NULL;
    apr_uint64_t full = (apr_uint64_t)s->client_rate * LESSONS_INTRORATE_ONE;
    int w;

    for (w = 0; w < LESSONS_INTRORATE_WAYS; w++) {
        introrate_client_t *c = &set[w];

        if (c->used && memcmp(c->client, client,
                              LESSONS_INTRORATE_CLIENT_LEN) == 0) {
            introrate_fill(&c->bucket, s->client_rate, now);
            return c;
        }
    }
    for (w = 0; w < LESSONS_INTRORATE_WAYS; w++) {
        introrate_client_t *c = &set[w];

        if (!c->used) {
            take = c;
            break;
        }
        introrate_fill(&c->bucket, s->client_rate, now);
        if (!take || c->bucket.level > take->bucket.level) {
            take = c;
        }
    }
    memcpy(take->client, client, LESSONS_INTRORATE_CLIENT_LEN);
    take->used = 1;
    take->bucket.level = full;
    take->bucket.last = now;
    return take;
}

lessons_introrate_e lessons_introrate_take(void *mem,
                                           const unsigned char *client,
                                           apr_time_t now, int *retry_after)
{
    introrate_state_t *s = mem;
    introrate_client_t *c;

    if (retry_after) {
        *retry_after = 0;
    }
    introrate_fill(&s->server, s->rate, now);
    c = introrate_client(s, client, now);
    if (c->bucket.level < LESSONS_INTRORATE_ONE) {
        s->client_over++;
        if (retry_after) {
            *retry_after = introrate_wait(&c->bucket, s->client_rate);
        }
        return LESSONS_INTRORATE_CLIENT_OVER;
    }
    if (s->server.level < LESSONS_INTRORATE_ONE) {
        s->server_over++;
        if (retry_after) {
            *retry_after = introrate_wait(&s->server, s->rate);
        }
        return LESSONS_INTRORATE_SERVER_OVER;
    }
    c->bucket.level -= LESSONS_INTRORATE_ONE;
    s->server.level -= LESSONS_INTRORATE_ONE;
    s->asked++;
    return LESSONS_INTRORATE_ASK;
}

void lessons_introrate_stats(const void *mem, lessons_introrate_stats_t *st)
{
    const introrate_state_t *s = mem;

    memset(st, 0, sizeof(*st));
    if (!s || s->magic != LESSONS_INTRORATE_MAGIC) {
        return;
    }
    st->rate = s->rate;
    st->client_rate = s->client_rate;
    st->asked = s->asked;
    st->client_over = s->client_over;
    st->server_over = s->server_over;
}
