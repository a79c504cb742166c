/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keyshare.c: the shared slots of lessons_keyshare.h.  The block
 * starts with a header that names its shape, so that a restart with
 * another number of sources or another cap lays it out anew rather than
 * reading slots of another size.
 */
#include <string.h>

#include "apr_strings.h"

#include "keys/lessons_keyshare.h"

#define LESSONS_KEYSHARE_MAGIC  0x6c6b7331u   /* "lks1" */

/* One slot: fixed fields, then cap bytes of document. */
typedef struct {
    apr_uint64_t generation;        /* read lock-free: __atomic */
    unsigned char id[LESSONS_KEYSHARE_ID_LEN];
    int bound;                      /* id names a source */
    apr_uint32_t len;
    apr_time_t fetched, changed;
    apr_time_t last_start;          /* the last fetch (any) began */
    apr_time_t last_asked;          /* the last fetch a kid asked for */
    apr_time_t next_fetch;          /* 0: at once */
    apr_uint64_t owner;             /* the lease's holder, 0 none */
    apr_time_t lease_until;
    apr_uint64_t fetches, failures, asked;
} lessons_keyshare_slot_t;

typedef struct {
    apr_uint32_t magic;
    apr_uint32_t nslots;
    apr_uint64_t cap;
} lessons_keyshare_head_t;

struct lessons_keyshare {
    char *base;
    int nslots;
    apr_size_t cap;
    apr_size_t stride;
    apr_global_mutex_t *lock;
    unsigned char (*expect)[LESSONS_KEYSHARE_ID_LEN];
                                    /* per slot, the source this process
                                     * uses it for (lessons_keyshare_expect);
                                     * NULL: any */
    char *expecting;                /* which slots have one */
};

/* Slots start on 8-byte boundaries. */
#define LESSONS_KEYSHARE_ALIGN(n)  (((n) + 7) & ~(apr_size_t)7)

static apr_size_t keyshare_stride(apr_size_t cap)
{
    return LESSONS_KEYSHARE_ALIGN(sizeof(lessons_keyshare_slot_t) + cap + 1);
}

apr_size_t lessons_keyshare_size(int nslots, apr_size_t cap)
{
    return LESSONS_KEYSHARE_ALIGN(sizeof(lessons_keyshare_head_t))
           + (apr_size_t)(nslots > 0 ? nslots : 0) * keyshare_stride(cap);
}

static lessons_keyshare_slot_t *keyshare_slot(lessons_keyshare_t *ks, int i)
{
    if (!ks || i < 0 || i >= ks->nslots) {
        return NULL;
    }
    return (lessons_keyshare_slot_t *)(ks->base
        + LESSONS_KEYSHARE_ALIGN(sizeof(lessons_keyshare_head_t))
        + (apr_size_t)i * ks->stride);
}

/* Is slot i still the source this process uses it for?  A child of an
 * older generation, still ending its requests after a reload that gave
 * the slot to another source, must neither read nor write it.
 */
static int keyshare_ours(lessons_keyshare_t *ks, int i,
                         const lessons_keyshare_slot_t *slot)
{
    return !ks->expecting || !ks->expecting[i]
           || (slot->bound && memcmp(slot->id, ks->expect[i],
                                     LESSONS_KEYSHARE_ID_LEN) == 0);
}

static char *keyshare_doc(lessons_keyshare_slot_t *slot)
{
    return (char *)(slot + 1);
}

lessons_keyshare_t *lessons_keyshare_attach(void *base, apr_size_t size,
                                            int nslots, apr_size_t cap,
                                            int fresh,
                                            apr_global_mutex_t *lock,
                                            apr_pool_t *p)
{
    lessons_keyshare_head_t *head = base;
    lessons_keyshare_t *ks;

    if (!base || nslots < 0 || cap > APR_UINT32_MAX
        || size < lessons_keyshare_size(nslots, cap)) {
        return NULL;
    }
    if (fresh || head->magic != LESSONS_KEYSHARE_MAGIC
        || head->nslots != (apr_uint32_t)nslots || head->cap != cap) {
        memset(base, 0, lessons_keyshare_size(nslots, cap));
        head->magic = LESSONS_KEYSHARE_MAGIC;
        head->nslots = (apr_uint32_t)nslots;
        head->cap = cap;
    }
    ks = apr_pcalloc(p, sizeof(*ks));
    ks->base = base;
    ks->nslots = nslots;
    ks->cap = cap;
    ks->stride = keyshare_stride(cap);
    ks->lock = lock;
    return ks;
}

int lessons_keyshare_expect(lessons_keyshare_t *ks, int i,
                            const unsigned char id[LESSONS_KEYSHARE_ID_LEN],
                            apr_pool_t *p)
{
    if (!ks || i < 0 || i >= ks->nslots) {
        return -1;
    }
    if (!ks->expect) {
        ks->expect = apr_pcalloc(p, (apr_size_t)ks->nslots
                                    * sizeof(*ks->expect));
        ks->expecting = apr_pcalloc(p, (apr_size_t)ks->nslots);
    }
    memcpy(ks->expect[i], id, LESSONS_KEYSHARE_ID_LEN);
    ks->expecting[i] = 1;
    return 0;
}

static int keyshare_lock(lessons_keyshare_t *ks)
{
    return apr_global_mutex_lock(ks->lock) == APR_SUCCESS;
}

static void keyshare_unlock(lessons_keyshare_t *ks)
{
    apr_global_mutex_unlock(ks->lock);
}

int lessons_keyshare_bind(lessons_keyshare_t *ks, int i,
                          const unsigned char id[LESSONS_KEYSHARE_ID_LEN])
{
    lessons_keyshare_slot_t *slot = keyshare_slot(ks, i);
    int kept;

    if (!slot || !keyshare_lock(ks)) {
        return -1;
    }
    kept = slot->bound && memcmp(slot->id, id, LESSONS_KEYSHARE_ID_LEN) == 0;
    if (!kept) {
        __atomic_store_n(&slot->generation, 0, __ATOMIC_RELEASE);
        memset(slot, 0, sizeof(*slot));
        memcpy(slot->id, id, LESSONS_KEYSHARE_ID_LEN);
        slot->bound = 1;
    }
    /* A lease taken before the restart belongs to a process that is
     * gone or going: the new generation fetches without waiting for it.
     * And it fetches at once: the kept document serves meanwhile (no
     * outage while the provider is down), but a key the provider has
     * removed since (a compromised one) stops working within seconds
     * of a restart, not at the next scheduled refresh.
     */
    slot->owner = 0;
    slot->lease_until = 0;
    slot->next_fetch = 0;
    keyshare_unlock(ks);
    return kept;
}

int lessons_keyshare_assign(lessons_keyshare_t *ks,
                            const unsigned char (*ids)[LESSONS_KEYSHARE_ID_LEN],
                            int n, int *slots)
{
    int k, i, j, kept = 0;

    if (!ks || n < 0 || n > ks->nslots) {
        return -1;
    }
    /* First the sources whose slot survived, then the rest into slots
     * that no source of this configuration holds.
     */
    for (k = 0; k < n; k++) {
        slots[k] = -1;
        for (i = 0; i < ks->nslots; i++) {
            lessons_keyshare_slot_t *slot = keyshare_slot(ks, i);

            if (slot->bound
                && memcmp(slot->id, ids[k], LESSONS_KEYSHARE_ID_LEN) == 0) {
                slots[k] = i;
                break;
            }
        }
    }
    for (k = 0; k < n; k++) {
        int r;

        if (slots[k] >= 0) {
            r = lessons_keyshare_bind(ks, slots[k], ids[k]);
            if (r < 0) {
                return -1;
            }
            kept += r;
            continue;
        }
        for (i = 0; i < ks->nslots && slots[k] < 0; i++) {
            for (j = 0; j < n && slots[j] != i; j++) {
            }
            if (j == n) {           /* (a slot a source kept is in
                                     * slots already) */
                slots[k] = i;
            }
        }
        if (slots[k] < 0 || lessons_keyshare_bind(ks, slots[k], ids[k]) < 0) {
            return -1;
        }
    }
    return kept;
}

apr_uint64_t lessons_keyshare_generation(lessons_keyshare_t *ks, int i)
{
    lessons_keyshare_slot_t *slot = keyshare_slot(ks, i);

    /* (The identity is read without the lock: a torn read only says
     * "not ours" for a moment, and every copy checks again under it.)
     */
    return slot && keyshare_ours(ks, i, slot)
           ? __atomic_load_n(&slot->generation, __ATOMIC_ACQUIRE) : 0;
}

lessons_keyshare_claim_e lessons_keyshare_claim(lessons_keyshare_t *ks,
                                                int i, apr_uint64_t owner,
                                                apr_time_t now, int asked,
                                                apr_interval_time_t min_refresh,
                                                apr_interval_time_t lease,
                                                apr_time_t *when)
{
    lessons_keyshare_slot_t *slot = keyshare_slot(ks, i);
    lessons_keyshare_claim_e rc;

    if (!slot || owner == 0 || !keyshare_lock(ks)) {
        return LESSONS_KEYSHARE_FAILED;
    }
    if (!keyshare_ours(ks, i, slot)) {
        *when = now;
        rc = LESSONS_KEYSHARE_FAILED;
    }
    else if (slot->owner && now < slot->lease_until) {
        *when = slot->lease_until;
        rc = LESSONS_KEYSHARE_BUSY;
    }
    else if (asked && slot->last_asked
             && now < slot->last_asked + min_refresh) {
        *when = slot->last_asked + min_refresh;
        rc = LESSONS_KEYSHARE_TOO_SOON;
    }
    else if (!asked && slot->generation && now < slot->next_fetch) {
        *when = slot->next_fetch;
        rc = LESSONS_KEYSHARE_NOT_DUE;
    }
    else if (!asked && !slot->generation && slot->last_start
             && now < slot->next_fetch) {
        /* No good document yet: retried on the failure's schedule. */
        *when = slot->next_fetch;
        rc = LESSONS_KEYSHARE_NOT_DUE;
    }
    else {
        slot->owner = owner;
        slot->lease_until = now + lease;
        slot->last_start = now;
        if (asked) {
            slot->last_asked = now;
            slot->asked++;
        }
        *when = slot->lease_until;
        rc = LESSONS_KEYSHARE_CLAIMED;
    }
    keyshare_unlock(ks);
    return rc;
}

lessons_keyshare_publish_e lessons_keyshare_publish(lessons_keyshare_t *ks,
                                                    int i, apr_uint64_t owner,
                                                    apr_time_t now,
                                                    const char *doc,
                                                    apr_size_t len,
                                                    apr_interval_time_t refresh,
                                                    apr_interval_time_t min_refresh)
{
    lessons_keyshare_slot_t *slot = keyshare_slot(ks, i);
    lessons_keyshare_publish_e rc;

    if (!slot || !keyshare_lock(ks)) {
        return LESSONS_KEYSHARE_LOCK_FAILED;
    }
    if (slot->owner != owner || !keyshare_ours(ks, i, slot)) {
        keyshare_unlock(ks);
        return LESSONS_KEYSHARE_NOT_OWNER;
    }
    slot->fetches++;
    if (!doc) {
        slot->failures++;
        slot->next_fetch = now + min_refresh;
        rc = LESSONS_KEYSHARE_KEPT;
    }
    else if (len > ks->cap) {
        slot->failures++;
        slot->next_fetch = now + min_refresh;
        rc = LESSONS_KEYSHARE_TOO_BIG;
    }
    else {
        slot->fetched = slot->last_start;
        slot->next_fetch = now + refresh;
        if (slot->generation && slot->len == len
            && memcmp(keyshare_doc(slot), doc, len) == 0) {
            rc = LESSONS_KEYSHARE_SAME;
        }
        else {
            memcpy(keyshare_doc(slot), doc, len);
            keyshare_doc(slot)[len] = '\0';
            slot->len = (apr_uint32_t)len;
            slot->changed = now;
            /* After the bytes: a reader that sees the new generation
             * takes the lock to copy them, and the lock orders the rest.
             */
            __atomic_store_n(&slot->generation, slot->generation + 1,
                             __ATOMIC_RELEASE);
            rc = LESSONS_KEYSHARE_NEW;
        }
    }
    slot->owner = 0;
    slot->lease_until = 0;
    keyshare_unlock(ks);
    return rc;
}

apr_status_t lessons_keyshare_read(lessons_keyshare_t *ks, int i,
                                   int with_doc, apr_pool_t *p,
                                   lessons_keyshare_view_t *view)
{
    lessons_keyshare_slot_t *slot = keyshare_slot(ks, i);

    memset(view, 0, sizeof(*view));
    if (!slot) {
        return APR_EINVAL;
    }
    if (!keyshare_lock(ks)) {
        return APR_EGENERAL;
    }
    if (!keyshare_ours(ks, i, slot)) {
        keyshare_unlock(ks);
        return APR_EINVAL;
    }
    view->generation = slot->generation;
    view->fetched = slot->fetched;
    view->changed = slot->changed;
    view->last_fetch = slot->last_start;
    view->next_fetch = slot->next_fetch;
    view->fetches = slot->fetches;
    view->failures = slot->failures;
    view->asked = slot->asked;
    view->lease_until = slot->owner ? slot->lease_until : 0;
    if (with_doc && slot->generation) {
        view->len = slot->len;
        view->doc = apr_pstrmemdup(p, keyshare_doc(slot), slot->len);
    }
    keyshare_unlock(ks);
    return APR_SUCCESS;
}
