/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_replay.c: open addressing over a fixed run of slots.  A key
 * lives in one of the LESSONS_REPLAY_PROBES slots after its hash; a
 * slot whose time is over is free, so there are no deletions to walk
 * around: a lookup reads the whole run, and a new key takes the first
 * free slot of it.
 */
#include <stddef.h>          /* offsetof, for APR_OFFSETOF */
#include <string.h>

#include "lessons_digest.h"
#include "lessons_replay.h"

#define LESSONS_REPLAY_MAGIC  0x4c525031u   /* "LRP1" */

typedef struct {
    unsigned char key[LESSONS_REPLAY_KEY_LEN];
    apr_time_t expires;             /* 0 or past: free */
} lessons_replay_slot_t;

struct lessons_replay_t {
    apr_uint32_t magic;
    apr_uint32_t slots;
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
    }
    return t;
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

lessons_replay_e lessons_replay_check(
    lessons_replay_t *t, const unsigned char key[LESSONS_REPLAY_KEY_LEN],
    apr_time_t expires, apr_time_t now)
{
    lessons_replay_slot_t *free_slot = NULL;
    apr_uint32_t start, i;

    if (!t || !key) {
        return LESSONS_REPLAY_FULL;
    }
    /* The key is a hash already: its first bytes pick the run. */
    memcpy(&start, key, sizeof(start));
    start %= t->slots;
    for (i = 0; i < LESSONS_REPLAY_PROBES; i++) {
        lessons_replay_slot_t *s = &t->slot[(start + i) % t->slots];

        if (s->expires <= now) {
            if (!free_slot) {
                free_slot = s;
            }
        }
        else if (memcmp(s->key, key, LESSONS_REPLAY_KEY_LEN) == 0) {
            return LESSONS_REPLAY_SEEN;
        }
    }
    if (!free_slot) {
        return LESSONS_REPLAY_FULL;
    }
    memcpy(free_slot->key, key, LESSONS_REPLAY_KEY_LEN);
    free_slot->expires = expires;
    return LESSONS_REPLAY_NEW;
}
