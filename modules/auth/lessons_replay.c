/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_replay.c: open addressing over a fixed run of slots.  A key
 * lives in one of the LESSONS_REPLAY_PROBES slots after its hash; a
 * slot whose time is over is free, so there are no deletions to walk
 * around: a lookup reads the whole run, and a new key takes the first
 * free slot of it.
 *
 * Each slot names the owner of its proof, and the proofs an owner holds
 * are counted in two rows of counters, one picked in each by other bits
 * of the owner's hash (a count-min sketch): an owner's count is the
 * smaller of its two, never less than what it holds, and more only when
 * another owner shares both its counters (about one pair in 16 million;
 * an owner is a hash of names the identity provider signs, so a client
 * cannot search for one that shares another's).  A slot counts until it
 * is reclaimed: when a lookup passes over it after its time, or when
 * the whole table is swept -- at most once a second, and only when an
 * owner is found at its share, so that an owner whose proofs are over is
 * not refused for slots that no lookup happened to pass.  Groups are
 * counted alike, in two rows of their own.
 */
#include <stddef.h>          /* offsetof, for APR_OFFSETOF */
#include <string.h>

#include "base/lessons_digest.h"
#include "auth/lessons_replay.h"

#define LESSONS_REPLAY_MAGIC     0x4c525033u    /* "LRP3" */
#define LESSONS_REPLAY_COUNTERS  4096           /* in each row */
#define LESSONS_REPLAY_SWEEP     APR_USEC_PER_SEC
#define LESSONS_REPLAY_NAMES     8              /* of an owner, at most */

typedef struct {
    unsigned char key[LESSONS_REPLAY_KEY_LEN];
    apr_time_t expires;             /* 0: free and counted against no
                                     * one; past: free, still counted
                                     * against owner until reclaimed */
    apr_uint32_t owner;
    apr_uint32_t group;
} lessons_replay_slot_t;

struct lessons_replay_t {
    apr_uint32_t magic;
    apr_uint32_t slots;
    apr_uint32_t share;             /* proofs one owner may hold */
    apr_uint32_t group_share;       /* ... and one group */
    apr_time_t swept;               /* the last sweep */
    apr_uint32_t held[2][LESSONS_REPLAY_COUNTERS];
    apr_uint32_t group_held[2][LESSONS_REPLAY_COUNTERS];
    lessons_replay_slot_t slot[1];  /* slots of them */
};

apr_size_t lessons_replay_size(int slots)
{
    return slots >= LESSONS_REPLAY_PROBES
           ? APR_OFFSETOF(lessons_replay_t, slot)
             + (apr_size_t)slots * sizeof(lessons_replay_slot_t)
           : 0;
}

lessons_replay_t *lessons_replay_attach(void *mem, apr_size_t size,
                                        int slots, int fresh)
{
    lessons_replay_t *t = mem;

    if (!mem || slots < LESSONS_REPLAY_PROBES
        || size < lessons_replay_size(slots)) {
        return NULL;
    }
    if (fresh || t->magic != LESSONS_REPLAY_MAGIC
        || t->slots != (apr_uint32_t)slots) {
        memset(mem, 0, lessons_replay_size(slots));
        t->magic = LESSONS_REPLAY_MAGIC;
        t->slots = (apr_uint32_t)slots;
        t->share = (apr_uint32_t)slots / LESSONS_REPLAY_SHARE;
        if (t->share == 0) {
            t->share = 1;
        }
        t->group_share = (apr_uint32_t)slots / LESSONS_REPLAY_GROUP_SHARE;
    }
    return t;
}

int lessons_replay_share(const lessons_replay_t *t)
{
    return t ? (int)t->share : 0;
}

int lessons_replay_key(const char *jkt, const char *jti,
                       unsigned char key[LESSONS_REPLAY_KEY_LEN])
{
    lessons_digest_field_t f[2];
    unsigned char md[LESSONS_DIGEST_LEN];

    if (!jkt || !jti) {
        return -1;
    }
    f[0].data = jkt;
    f[0].len = strlen(jkt);
    f[1].data = jti;
    f[1].len = strlen(jti);
    if (!lessons_digest_fields("mod_lessons dpop proof 1", f, 2, md)) {
        return -1;
    }
    memcpy(key, md, LESSONS_REPLAY_KEY_LEN);
    return 0;
}

int lessons_replay_owner(const char *const *names, int n,
                         apr_uint32_t *owner)
{
    lessons_digest_field_t f[LESSONS_REPLAY_NAMES];
    unsigned char md[LESSONS_DIGEST_LEN];
    int i;

    if (!names || !owner || n < 1 || n > LESSONS_REPLAY_NAMES) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        f[i].data = names[i];
        f[i].len = names[i] ? strlen(names[i]) : 0;
    }
    if (!lessons_digest_fields("mod_lessons dpop owner 2", f, n, md)) {
        return -1;
    }
    memcpy(owner, md, sizeof(*owner));
    return 0;
}

int lessons_replay_group(const char *voucher, apr_uint32_t *group)
{
    lessons_digest_field_t f;
    unsigned char md[LESSONS_DIGEST_LEN];

    if (!voucher || !group) {
        return -1;
    }
    f.data = voucher;
    f.len = strlen(voucher);
    if (!lessons_digest_fields("mod_lessons dpop group 1", &f, 1, md)) {
        return -1;
    }
    memcpy(group, md, sizeof(*group));
    return 0;
}

/* A hash's two counters in rows (an owner's, or a group's): the low 12
 * bits pick one, the next 12 the other.
 */
static apr_uint32_t *lessons_replay_counter(
    apr_uint32_t (*rows)[LESSONS_REPLAY_COUNTERS], apr_uint32_t hash, int row)
{
    return &rows[row][(row ? hash >> 12 : hash) % LESSONS_REPLAY_COUNTERS];
}

static apr_uint32_t lessons_replay_held(
    apr_uint32_t (*rows)[LESSONS_REPLAY_COUNTERS], apr_uint32_t hash)
{
    apr_uint32_t a = *lessons_replay_counter(rows, hash, 0);
    apr_uint32_t b = *lessons_replay_counter(rows, hash, 1);

    return a < b ? a : b;
}

/* One proof more (or, by -1, less) for its owner and its group. */
static void lessons_replay_count(lessons_replay_t *t,
                                 const lessons_replay_slot_t *s, int by)
{
    int row;

    for (row = 0; row < 2; row++) {
        apr_uint32_t *c = lessons_replay_counter(t->held, s->owner, row);
        apr_uint32_t *g = lessons_replay_counter(t->group_held, s->group,
                                                 row);

        if (by > 0) {
            (*c)++;
            (*g)++;
        }
        else {
            *c -= *c > 0;
            *g -= *g > 0;
        }
    }
}

/* Does owner, or its group, hold its share? */
static lessons_replay_e lessons_replay_over(lessons_replay_t *t,
                                            apr_uint32_t owner,
                                            apr_uint32_t group)
{
    if (lessons_replay_held(t->held, owner) >= t->share) {
        return LESSONS_REPLAY_OVER_SHARE;
    }
    if (lessons_replay_held(t->group_held, group) >= t->group_share) {
        return LESSONS_REPLAY_OVER_GROUP;
    }
    return LESSONS_REPLAY_NEW;
}

/* A slot whose time is over no longer counts against its owner. */
static void lessons_replay_reclaim(lessons_replay_t *t,
                                   lessons_replay_slot_t *s)
{
    if (s->expires == 0) {
        return;
    }
    lessons_replay_count(t, s, -1);
    s->expires = 0;
}

static void lessons_replay_sweep(lessons_replay_t *t, apr_time_t now)
{
    apr_uint32_t i;

    for (i = 0; i < t->slots; i++) {
        if (t->slot[i].expires <= now) {
            lessons_replay_reclaim(t, &t->slot[i]);
        }
    }
    t->swept = now;
}

lessons_replay_e lessons_replay_check(
    lessons_replay_t *t, const unsigned char key[LESSONS_REPLAY_KEY_LEN],
    apr_uint32_t owner, apr_time_t expires, apr_time_t now)
{
    return lessons_replay_check_in(t, key, owner, owner, expires, now);
}

lessons_replay_e lessons_replay_check_in(
    lessons_replay_t *t, const unsigned char key[LESSONS_REPLAY_KEY_LEN],
    apr_uint32_t owner, apr_uint32_t group, apr_time_t expires,
    apr_time_t now)
{
    lessons_replay_slot_t *free_slot = NULL;
    apr_uint32_t start, i;
    lessons_replay_e over;

    if (!t || !key) {
        return LESSONS_REPLAY_FULL;
    }
    /* The key is a hash already: its first bytes pick the run. */
    memcpy(&start, key, sizeof(start));
    start %= t->slots;
    for (i = 0; i < LESSONS_REPLAY_PROBES; i++) {
        lessons_replay_slot_t *s = &t->slot[(start + i) % t->slots];

        if (s->expires <= now) {
            lessons_replay_reclaim(t, s);
            if (!free_slot) {
                free_slot = s;
            }
        }
        else if (memcmp(s->key, key, LESSONS_REPLAY_KEY_LEN) == 0) {
            return LESSONS_REPLAY_SEEN;
        }
    }
    if (expires <= now) {
        return LESSONS_REPLAY_NEW;  /* over already: nothing to keep */
    }
    if (lessons_replay_over(t, owner, group) != LESSONS_REPLAY_NEW) {
        if (now < t->swept || now - t->swept >= LESSONS_REPLAY_SWEEP) {
            lessons_replay_sweep(t, now);
        }
        over = lessons_replay_over(t, owner, group);
        if (over != LESSONS_REPLAY_NEW) {
            return over;
        }
    }
    if (!free_slot) {
        return LESSONS_REPLAY_FULL;
    }
    memcpy(free_slot->key, key, LESSONS_REPLAY_KEY_LEN);
    free_slot->expires = expires;
    free_slot->owner = owner;
    free_slot->group = group;
    lessons_replay_count(t, free_slot, 1);
    return LESSONS_REPLAY_NEW;
}
