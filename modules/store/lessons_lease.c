/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_lease.c: the lease block (lessons_lease.h).  The installed
 * version and the lease's end are seqlocked for the read path; the rest
 * changes under the block's lock.  A futex word (the bell) moves with
 * each check published and each server heard of with news (a later term,
 * a newer acknowledgement), and writers sleep on it.
 */
#include <string.h>
#include <time.h>

#include "apr_atomic.h"
#include "apr_strings.h"

#include "store/lessons_lease.h"

#if defined(__linux__)
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define LESSONS_LEASE_FUTEX 1
#endif

#define LESSONS_LEASE_MAGIC 0x4c454153u     /* "LEAS" */

typedef struct {
    char name[LESSONS_LEASE_NAME_MAX];      /* "": free */
    apr_int64_t term;                       /* the newest renewal heard */
    apr_interval_time_t seen;               /* when it was first heard */
    lessons_lease_version_t acked;
    apr_uint64_t acked_round;               /* the newest INVALIDATE
                                             * round it acknowledged */
    apr_interval_time_t held_until;         /* its drop held until then
                                             * (this clock), at least */
} lessons_lease_peer_t;

/* A futex word, and how many wait on it: a ring with nobody asleep is
 * no system call (with the lease on, several a write).  A sleeper that
 * dies asleep leaves the count high, so rings make the call as before.
 */
typedef struct {
    apr_uint32_t word;
    apr_uint32_t sleepers;
} lessons_lease_bell_t;

typedef struct {
    apr_uint32_t magic;
    apr_uint32_t holder;                    /* pid, 0: none */
    apr_interval_time_t beat;               /* the holder's last */
    apr_uint32_t listening;
    apr_uint32_t seq;                       /* odd while written */
    apr_interval_time_t end;                /* the lease's, 0: none */
    apr_interval_time_t run_start;          /* when the run's first
                                             * renewal came back, 0: no
                                             * run */
    apr_interval_time_t run_end;            /* the end of its last
                                             * renewal's lease, served or
                                             * not */
    apr_uint32_t refreshing;                /* a version is being read
                                             * and acknowledged at once:
                                             * not served until installed */
    apr_uint32_t dropped;                   /* a write made no check: not
                                             * served until a version read
                                             * after it is installed */
    apr_uint32_t gen;                       /* drops so far */
    apr_interval_time_t hold_until;         /* the last hold's end: no
                                             * version read before it is
                                             * served */
    apr_uint32_t reread;                    /* the holder is rung to read
                                             * the version again */
    apr_uint32_t taken;                     /* a GET took the installed
                                             * version since the holder's
                                             * last read */
    lessons_lease_version_t version;        /* installed */
    apr_uint32_t asked;                     /* checks asked */
    apr_uint32_t answered;                  /* the last ask answered */
    apr_uint32_t leader;                    /* the ticket of the writer
                                             * making the check, 0: none */
    apr_interval_time_t led_at;             /* when it began */
    lessons_lease_bell_t bell;
    lessons_lease_bell_t turn;              /* the writers waiting for
                                             * their turn */
    apr_uint32_t leads;                     /* leads given so far */
    apr_uint32_t lead_upto;                 /* the asks the lead answers */
    apr_uint32_t next;                      /* the ticket that leads next,
                                             * 0: none */
    apr_interval_time_t next_at;            /* when it took that */
    lessons_lease_bell_t done[2];           /* the writers a lead
                                             * answers, by its number's
                                             * parity */
    apr_uint32_t check_rings;               /* whom the check's settling
                                             * wakes (LESSONS_RING_*) */
    lessons_lease_check_t check;            /* the last published */
    char self[LESSONS_LEASE_NAME_MAX];      /* this server's row */
    lessons_lease_peer_t peers[LESSONS_LEASE_PEERS];
    apr_interval_time_t list_sent;          /* the last renewal's list of
                                             * the other leases: when it
                                             * was asked for, 0: never */
    apr_uint32_t list_others;               /* the servers it named */
    lessons_lease_check_t list;             /* their rows (its version
                                             * unused) */
    unsigned char nonce_prefix[8];          /* random, drawn when laid
                                             * out: this block's nonces */
    apr_uint32_t nonce_ok;                  /* the prefix was drawn */
    apr_uint64_t rounds;                    /* INVALIDATE rounds drawn,
                                             * the newest's number */
    apr_interval_time_t tell_at;            /* when it was, on the clock */
    apr_uint64_t tell_open;                 /* that round, until its
                                             * leader is done, else 0 */
    apr_uint32_t tell_hold;                 /* that round asked for
                                             * holds */
    apr_uint32_t tell_led;                  /* that round has a leader
                                             * who sends it again and
                                             * rings its writes */
    apr_interval_time_t renew_at;           /* the last renewal drawn
                                             * ahead, on the clock */
    lessons_lease_bell_t told;              /* rung when it is done */
    apr_uint64_t alone_writes;              /* writes that told no one */
    apr_uint64_t told_writes;               /* writes that sent an
                                             * INVALIDATE instead of a
                                             * check */
    apr_uint64_t held_writes;               /* writes answered under
                                             * holds */
    volatile apr_uint64_t waits[LESSONS_LEASE_WAIT_BUCKETS];   /* atomic:
                                                              * no lock
                                                              * for them */
    volatile apr_uint64_t waited;           /* their sum, microseconds */
} lessons_lease_block_t;

const apr_interval_time_t
    lessons_lease_wait_bounds[LESSONS_LEASE_WAIT_BUCKETS - 1] = {
        100, 1000, 5000, 25000, 100000, 1000000
    };

struct lessons_lease_t {
    lessons_lease_block_t *b;
    apr_global_mutex_t *lock;
};

apr_interval_time_t lessons_lease_clock(void)
{
    struct timespec ts;

#ifdef CLOCK_BOOTTIME
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
#endif
    {
        clock_gettime(CLOCK_MONOTONIC, &ts);
    }
    return (apr_interval_time_t)ts.tv_sec * APR_USEC_PER_SEC
           + ts.tv_nsec / 1000;
}

int lessons_lease_covers(const lessons_lease_version_t *a,
                         const lessons_lease_version_t *b)
{
    return a->sum >= 0 && b->sum >= 0 && a->sum >= b->sum
           && strncmp(a->epoch, b->epoch, sizeof(a->epoch)) == 0;
}

apr_size_t lessons_lease_size(void)
{
    return sizeof(lessons_lease_block_t);
}

lessons_lease_t *lessons_lease_attach(void *base, apr_size_t size,
                                      apr_global_mutex_t *lock, int fresh,
                                      apr_pool_t *p)
{
    lessons_lease_t *l;

    if (!base || size < sizeof(lessons_lease_block_t) || !lock) {
        return NULL;
    }
    l = apr_pcalloc(p, sizeof(*l));
    l->b = base;
    l->lock = lock;
    if (fresh || l->b->magic != LESSONS_LEASE_MAGIC) {
        memset(l->b, 0, sizeof(*l->b));
        l->b->version.sum = -1;
        l->b->nonce_ok = apr_generate_random_bytes(
                             l->b->nonce_prefix,
                             sizeof(l->b->nonce_prefix)) == APR_SUCCESS;
        l->b->magic = LESSONS_LEASE_MAGIC;
    }
    return l;
}

void lessons_lease_name(lessons_lease_t *l, const char *name)
{
    apr_cpystrn(l->b->self, name ? name : "", sizeof(l->b->self));
}

static int lessons_lease_lock(lessons_lease_t *l)
{
    return apr_global_mutex_lock(l->lock) == APR_SUCCESS;
}

static void lessons_lease_unlock(lessons_lease_t *l)
{
    apr_global_mutex_unlock(l->lock);
}

/* The bells: moved after what they tell of, and after the lock is let
 * go (a writer woken while the lock is held would only wait for it); a
 * sleeper that read one under the lock, before the change, sees it move.
 */
static int lessons_lease_settled_locked(lessons_lease_block_t *b,
                                        const lessons_lease_check_t *chk,
                                        apr_interval_time_t now,
                                        apr_interval_time_t *until);

/* Under the lock: are the last check's acknowledgements all in (or
 * waited out)?  What a writer waiting for its turn waits for.
 */
static int lessons_lease_round_settled(lessons_lease_block_t *b)
{
    apr_interval_time_t until;

    return lessons_lease_settled_locked(b, &b->check, lessons_lease_clock(),
                                        &until);
}

static void lessons_lease_ring_word(lessons_lease_bell_t *bell)
{
    apr_atomic_inc32(&bell->word);
#ifdef LESSONS_LEASE_FUTEX
    /* The word moved (a full barrier) before the count is read, and a
     * sleeper counts itself before the kernel compares the word: one of
     * the two sees the other.
     */
    if (apr_atomic_read32(&bell->sleepers) != 0) {
        (void)syscall(SYS_futex, &bell->word, FUTEX_WAKE, INT_MAX, NULL,
                      NULL, 0);
    }
#endif
}

static void lessons_lease_ring(lessons_lease_t *l)
{
    lessons_lease_ring_word(&l->b->bell);
}

/* The turn's bell rings for what can end a wait for a turn or an answer
 * (lessons_lease_turn, lessons_lease_answer): asks answered, the leader
 * gone, the last check settled.  Every other acknowledgement would wake
 * those writers only for them to sleep again (on two CPUs, about three
 * wake-ups a write at 8 clients).
 */
static void lessons_lease_ring_turn(lessons_lease_t *l)
{
    lessons_lease_ring_word(&l->b->turn);
}

/* Whom a change wakes, as a mask: the writers of an even or an odd
 * lead (sleeping through their lead's answer until its round is
 * settled: woken at the answer, each would only sleep again on the
 * bell, once for every acknowledgement), and those waiting for a turn.
 */
#define LESSONS_RING_DONE(lead)   (1u << ((lead) & 1u))
#define LESSONS_RING_DONE_BOTH    3u
#define LESSONS_RING_TURN         4u

/* Under the lock: whom the last check's settling wakes. */
static apr_uint32_t lessons_lease_settle_rings(lessons_lease_block_t *b)
{
    return b->check_rings | LESSONS_RING_TURN;
}

/* After the lock is let go: the bell for news, and those that rings
 * names (a round that became settled).
 */
static void lessons_lease_ring_after(lessons_lease_t *l, int news,
                                     apr_uint32_t rings)
{
    if (news) {
        lessons_lease_ring(l);
    }
    if (rings & LESSONS_RING_TURN) {
        lessons_lease_ring_turn(l);
    }
    if (rings & LESSONS_RING_DONE(0)) {
        lessons_lease_ring_word(&l->b->done[0]);
    }
    if (rings & LESSONS_RING_DONE(1)) {
        lessons_lease_ring_word(&l->b->done[1]);
    }
}

static void lessons_lease_sleep_on(lessons_lease_bell_t *bell,
                                   apr_uint32_t seen,
                                   apr_interval_time_t until)
{
    apr_interval_time_t left = until - lessons_lease_clock();

    if (left <= 0 || apr_atomic_read32(&bell->word) != seen) {
        return;
    }
#ifdef LESSONS_LEASE_FUTEX
    {
        struct timespec ts;

        ts.tv_sec = (time_t)apr_time_sec(left);
        ts.tv_nsec = (long)apr_time_usec(left) * 1000L;
        /* Shared, not private: the bells are rung from other processes. */
        apr_atomic_inc32(&bell->sleepers);
        (void)syscall(SYS_futex, &bell->word, FUTEX_WAIT, seen, &ts, NULL,
                      0);
        apr_atomic_dec32(&bell->sleepers);
    }
#else
    apr_sleep(left < 1000 ? left : 1000);
#endif
}

void lessons_lease_sleep(lessons_lease_t *l, apr_uint32_t bell,
                         apr_interval_time_t until)
{
    lessons_lease_sleep_on(&l->b->bell, bell, until);
}

/* ---------------------------------------------------- the read path */

/* The installed state, as the seqlock gives it whole. */
static void lessons_lease_read(lessons_lease_t *l, apr_interval_time_t *end,
                               lessons_lease_version_t *v)
{
    lessons_lease_block_t *b = l->b;
    apr_uint32_t s1, s2;

    for (;;) {
        s1 = apr_atomic_read32(&b->seq);
        if (s1 & 1) {
            continue;
        }
        *end = b->refreshing || b->dropped ? 0 : b->end;
        if (v) {
            memcpy(v, &b->version, sizeof(*v));
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = apr_atomic_read32(&b->seq);
        if (s1 == s2) {
            return;
        }
    }
}

int lessons_lease_current(lessons_lease_t *l, apr_interval_time_t now,
                          lessons_lease_version_t *v)
{
    apr_interval_time_t end = 0;

    if (!l) {
        return 0;
    }
    lessons_lease_read(l, &end, v);
#if defined(LESSONS_BREAK_LEASE) && LESSONS_BREAK_LEASE == 1
    /* Broken on purpose (make lease-broken): past the lease's end too,
     * for the history checker to catch.
     */
    (void)now;
    return v->sum >= 0 && v->epoch[0] != '\0';
#else
    if (end > now && v->sum >= 0 && v->epoch[0] != '\0') {
        /* Written once a read, not once a GET: the line stays shared. */
        if (!apr_atomic_read32(&l->b->taken)) {
            apr_atomic_set32(&l->b->taken, 1);
        }
        return 1;
    }
    return 0;
#endif
}

/* Under the lock: the seqlocked fields are written between these. */
static void lessons_lease_write_begin(lessons_lease_block_t *b)
{
    apr_atomic_inc32(&b->seq);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static void lessons_lease_write_end(lessons_lease_block_t *b)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    apr_atomic_inc32(&b->seq);
}

/* The lease ends, and with it the run: the next renewal starts one. */
static void lessons_lease_end_now(lessons_lease_block_t *b)
{
    lessons_lease_write_begin(b);
    b->end = 0;
    b->run_start = 0;
    b->run_end = 0;
    lessons_lease_write_end(b);
}

/* ------------------------------------------------------- the holder */

int lessons_lease_hold(lessons_lease_t *l, apr_uint32_t pid,
                       apr_interval_time_t now, apr_interval_time_t stale,
                       int (*alive)(apr_uint32_t pid))
{
    lessons_lease_block_t *b = l->b;
    int held = 0;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    if (b->holder == pid) {
        held = 1;
    }
    else if (b->holder == 0 || now - b->beat > stale
             || (alive && !alive(b->holder))) {
        /* A new holder has no lease until it renews one. */
        b->holder = pid;
        b->listening = 0;
        lessons_lease_end_now(b);
        b->refreshing = 0;
        held = 1;
    }
    if (held) {
        b->beat = now;
    }
    lessons_lease_unlock(l);
    return held;
}

void lessons_lease_let_go(lessons_lease_t *l, apr_uint32_t pid)
{
    lessons_lease_block_t *b = l->b;

    if (!lessons_lease_lock(l)) {
        return;
    }
    if (b->holder == pid) {
        lessons_lease_end_now(b);
        b->listening = 0;
        b->holder = 0;
    }
    lessons_lease_unlock(l);
    lessons_lease_ring(l);
    lessons_lease_ring_turn(l);
}

int lessons_lease_listening(lessons_lease_t *l, apr_uint32_t pid, int on)
{
    lessons_lease_block_t *b = l->b;
    int held;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    held = b->holder == pid;
    if (held) {
        if (!on) {
            lessons_lease_end_now(b);
        }
        b->listening = on != 0;
    }
    lessons_lease_unlock(l);
    lessons_lease_ring(l);
    lessons_lease_ring_turn(l);
    return held;
}

/* A generation no install matches: during a hold, what is read is not
 * to be served.
 */
#define LESSONS_LEASE_GEN_HELD 0x80000000u

/* Under the lock: the generation to install what is read now with. */
static apr_uint32_t lessons_lease_gen_locked(const lessons_lease_block_t *b,
                                             apr_interval_time_t now)
{
    return now < b->hold_until ? b->gen ^ LESSONS_LEASE_GEN_HELD : b->gen;
}

apr_uint32_t lessons_lease_gen(lessons_lease_t *l)
{
    apr_uint32_t gen;

    if (!lessons_lease_lock(l)) {
        return apr_atomic_read32(&l->b->gen) ^ LESSONS_LEASE_GEN_HELD;
    }
    gen = lessons_lease_gen_locked(l->b, lessons_lease_clock());
    lessons_lease_unlock(l);
    return gen;
}

int lessons_lease_install(lessons_lease_t *l, apr_uint32_t pid,
                          const lessons_lease_version_t *v,
                          apr_interval_time_t end, apr_uint32_t gen)
{
    lessons_lease_block_t *b = l->b;
    int held, newer = 0, undrop;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    held = b->holder == pid;
    if (held) {
        newer = strncmp(v->epoch, b->version.epoch,
                        sizeof(v->epoch)) != 0
                || v->sum > b->version.sum;
        /* Read after the last drop: it holds the write that dropped. */
        undrop = b->dropped && gen == b->gen;
        if (newer || end > 0 || b->refreshing || undrop) {
            lessons_lease_write_begin(b);
            if (newer) {
                memcpy(&b->version, v, sizeof(*v));
                b->version.epoch[sizeof(b->version.epoch) - 1] = '\0';
            }
            if (end > 0) {
                b->end = end;
            }
            b->refreshing = 0;
            if (undrop) {
                b->dropped = 0;
            }
            lessons_lease_write_end(b);
        }
    }
    lessons_lease_unlock(l);
    if (held && newer) {
        /* A writer here may wait for this server's version. */
        lessons_lease_ring(l);
        lessons_lease_ring_turn(l);
    }
    return held;
}

apr_interval_time_t lessons_lease_run(lessons_lease_t *l, apr_uint32_t pid,
                                      apr_interval_time_t sent,
                                      apr_interval_time_t back,
                                      apr_interval_time_t end,
                                      apr_interval_time_t length)
{
    lessons_lease_block_t *b = l->b;
    apr_interval_time_t served = 0;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    if (b->holder == pid) {
        if (end <= 0) {
            lessons_lease_end_now(b);
        }
        else {
            lessons_lease_write_begin(b);
            if (b->run_start == 0 || back >= b->run_end) {
                /* Nothing held when it came back: a new run, whose
                 * row writers may not have listed yet.
                 */
                b->run_start = back;
                b->end = 0;
            }
            b->run_end = end;
            lessons_lease_write_end(b);
#if defined(LESSONS_BREAK_LEASE) && LESSONS_BREAK_LEASE == 4
            /* Broken on purpose (make lease-broken): a new run served
             * at once, before the writers' lists can hold its row.
             */
            (void)sent;
            (void)length;
            served = end;
#else
            if (sent >= b->run_start + length * LESSONS_LEASE_WARM_PCT
                                       / 100) {
                served = end;
            }
#endif
        }
    }
    lessons_lease_unlock(l);
    return served;
}

int lessons_lease_refresh(lessons_lease_t *l, apr_uint32_t pid)
{
    lessons_lease_block_t *b = l->b;
    int held;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    held = b->holder == pid;
    if (held) {
        lessons_lease_write_begin(b);
        b->refreshing = 1;
        lessons_lease_write_end(b);
    }
    lessons_lease_unlock(l);
    return held;
}

apr_uint32_t lessons_lease_asked(lessons_lease_t *l)
{
    return apr_atomic_read32(&l->b->asked);
}

int lessons_lease_wanted(lessons_lease_t *l)
{
    return apr_atomic_read32(&l->b->asked)
           != apr_atomic_read32(&l->b->answered);
}

/* Under the lock: a check sent after asked was read answers the asks up
 * to it, unless a later check answered more already (a writer's and the
 * holder's may come back in either order).
 */
static void lessons_lease_answers(lessons_lease_block_t *b,
                                  apr_uint32_t asked,
                                  const lessons_lease_check_t *chk)
{
    if ((apr_int32_t)(asked - b->answered) > 0) {
        memcpy(&b->check, chk, sizeof(*chk));
        apr_atomic_set32(&b->answered, asked);
        /* The lead's writers; and those waiting for the next lead when
         * the check (the holder's) answers asks made after the lead.
         */
        b->check_rings = (apr_int32_t)(asked - b->lead_upto) > 0
                         ? LESSONS_RING_DONE_BOTH
                         : LESSONS_RING_DONE(b->leads);
    }
}

int lessons_lease_publish(lessons_lease_t *l, apr_uint32_t pid,
                          apr_uint32_t asked,
                          const lessons_lease_check_t *chk)
{
    lessons_lease_block_t *b = l->b;
    int held;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    held = b->holder == pid;
    if (held) {
        lessons_lease_answers(b, asked, chk);
    }
    lessons_lease_unlock(l);
    if (held) {
        lessons_lease_ring_turn(l);
    }
    return held;
}

/* Under the lock: name's entry, or a free one, or the one heard of
 * longest ago (given to name).
 */
static lessons_lease_peer_t *lessons_lease_peer(lessons_lease_block_t *b,
                                                const char *name, int make)
{
    lessons_lease_peer_t *free_one = NULL, *oldest = NULL;
    int i;

    for (i = 0; i < LESSONS_LEASE_PEERS; i++) {
        lessons_lease_peer_t *p = &b->peers[i];

        if (p->name[0] == '\0') {
            if (!free_one) {
                free_one = p;
            }
            continue;
        }
        if (strncmp(p->name, name, sizeof(p->name)) == 0) {
            return p;
        }
        if (!oldest || p->seen < oldest->seen) {
            oldest = p;
        }
    }
    if (!make) {
        return NULL;
    }
    if (!free_one) {
        free_one = oldest;
    }
    memset(free_one, 0, sizeof(*free_one));
    apr_cpystrn(free_one->name, name, sizeof(free_one->name));
    free_one->term = -1;
    free_one->acked.sum = -1;
    return free_one;
}

/* 1 when what the writers wait on moved: a later term or a newer
 * acknowledgement (a server not yet in the table is news too).
 */
static int lessons_lease_heard_locked(lessons_lease_block_t *b,
                                      const char *name, apr_int64_t term,
                                      const lessons_lease_version_t *acked,
                                      apr_interval_time_t now)
{
    lessons_lease_peer_t *p = lessons_lease_peer(b, name, 0);
    int news = 0;

    if (!p) {
        p = lessons_lease_peer(b, name, 1);
        news = 1;
    }
    if (term > p->term) {
        p->term = term;
        p->seen = now;
        news = 1;
    }
    if (acked && acked->sum >= 0
        && (strncmp(acked->epoch, p->acked.epoch,
                    sizeof(acked->epoch)) != 0
            || acked->sum > p->acked.sum)) {
        memcpy(&p->acked, acked, sizeof(*acked));
        p->acked.epoch[sizeof(p->acked.epoch) - 1] = '\0';
        news = 1;
    }
    return news;
}

void lessons_lease_heard(lessons_lease_t *l, const char *name,
                         apr_int64_t term,
                         const lessons_lease_version_t *acked,
                         apr_interval_time_t now)
{
    apr_uint32_t rings = 0;
    int news, was;

    if (!name || !*name || !lessons_lease_lock(l)) {
        return;
    }
    was = lessons_lease_round_settled(l->b);
    news = lessons_lease_heard_locked(l->b, name, term, acked, now);
    if (news && !was && lessons_lease_round_settled(l->b)) {
        rings = lessons_lease_settle_rings(l->b);
    }
    lessons_lease_unlock(l);
    /* An answer heard again (a resent datagram's, a check's rows that
     * name the same terms) wakes no one: no writer's wait changed.
     */
    lessons_lease_ring_after(l, news, rings);
}

void lessons_lease_heard_check(lessons_lease_t *l,
                               const lessons_lease_check_t *chk,
                               apr_interval_time_t now)
{
    apr_uint32_t rings = 0;
    int i, news = 0, was;

    if (!lessons_lease_lock(l)) {
        return;
    }
    was = lessons_lease_round_settled(l->b);
    for (i = 0; i < chk->nrows && i < LESSONS_LEASE_ROWS; i++) {
        if (chk->rows[i].name[0]) {
            news |= lessons_lease_heard_locked(l->b, chk->rows[i].name,
                                               chk->rows[i].term,
                                               &chk->rows[i].acked, now);
        }
    }
    if (news && !was && lessons_lease_round_settled(l->b)) {
        rings = lessons_lease_settle_rings(l->b);
    }
    lessons_lease_unlock(l);
    lessons_lease_ring_after(l, news, rings);
}

/* The nonce that names round: the block's prefix, then the round,
 * big-endian.
 */
static void lessons_lease_nonce_of(const lessons_lease_block_t *b,
                                   apr_uint64_t round,
                                   unsigned char
                                   nonce[LESSONS_LEASE_NONCE_LEN])
{
    int i;

    memcpy(nonce, b->nonce_prefix, sizeof(b->nonce_prefix));
    for (i = 0; i < 8; i++) {
        nonce[8 + i] = (unsigned char)(round >> (56 - 8 * i));
    }
}

/* An answer to the round nonce names; held: to its HOLD. */
static int lessons_lease_heard_round(lessons_lease_t *l, const char *name,
                                     const unsigned char
                                     nonce[LESSONS_LEASE_NONCE_LEN],
                                     apr_interval_time_t now, int held)
{
    lessons_lease_block_t *b = l->b;
    lessons_lease_peer_t *p;
    apr_uint64_t round = 0;
    apr_uint32_t rings = 0;
    int i, news = 0, was, moved = 0;

    if (!name || !*name || !nonce || !lessons_lease_lock(l)) {
        return 0;
    }
    for (i = 0; i < 8; i++) {
        round = (round << 8) | nonce[8 + i];
    }
    /* Only this block's rounds, and only those drawn: a nonce that names
     * a later round than any drawn was not made here.
     */
    if (b->nonce_ok && round > 0 && round <= b->rounds
        && memcmp(nonce, b->nonce_prefix, sizeof(b->nonce_prefix)) == 0) {
        was = lessons_lease_round_settled(b);
        p = lessons_lease_peer(b, name, 0);
        if (!p) {
            p = lessons_lease_peer(b, name, 1);
            p->seen = now;
        }
        if (round > p->acked_round) {
            p->acked_round = round;
            news = 1;
        }
        /* Held from when the round was drawn, before it was sent: only
         * the newest round's time is kept, and an older round's answer
         * holds nothing here.
         */
        if (held && round == b->rounds && b->tell_hold
            && b->tell_at + LESSONS_LEASE_HELD > p->held_until) {
            p->held_until = b->tell_at + LESSONS_LEASE_HELD;
            moved = 1;
        }
        if (news && !was && lessons_lease_round_settled(b)) {
            rings = lessons_lease_settle_rings(b);
        }
    }
    lessons_lease_unlock(l);
    lessons_lease_ring_after(l, news, rings);
    return moved;
}

void lessons_lease_heard_nonce(lessons_lease_t *l, const char *name,
                               const unsigned char
                               nonce[LESSONS_LEASE_NONCE_LEN],
                               apr_interval_time_t now)
{
    (void)lessons_lease_heard_round(l, name, nonce, now, 0);
}

int lessons_lease_heard_hold(lessons_lease_t *l, const char *name,
                             const unsigned char
                             nonce[LESSONS_LEASE_NONCE_LEN],
                             apr_interval_time_t now)
{
    return lessons_lease_heard_round(l, name, nonce, now, 1);
}

/* Copy a list's rows, only as many as it holds (a full one is 46 KB). */
static void lessons_lease_copy_list(lessons_lease_check_t *to,
                                    const lessons_lease_check_t *from)
{
    int n = from->nrows < 0 ? 0
            : from->nrows > LESSONS_LEASE_ROWS ? LESSONS_LEASE_ROWS
            : from->nrows;

    to->version = from->version;
    to->round = from->round;
    to->at = from->at;
    to->hold = from->hold;
    to->overflow = from->overflow || n != from->nrows;
    to->nrows = n;
    memcpy(to->rows, from->rows, (apr_size_t)n * sizeof(to->rows[0]));
}

void lessons_lease_listed(lessons_lease_t *l, apr_interval_time_t sent,
                          int others, const lessons_lease_check_t *list)
{
    lessons_lease_block_t *b = l->b;

    if (!lessons_lease_lock(l)) {
        return;
    }
    if (sent > b->list_sent) {
        b->list_sent = sent;
        b->list_others = others > 0 ? (apr_uint32_t)others : 0;
        if (list) {
            lessons_lease_copy_list(&b->list, list);
        }
        else {
            b->list.nrows = 0;
            b->list.overflow = others > 0;
        }
        /* Rows it names that were not kept: a writer must not go by it
         * alone.
         */
        b->list.overflow |= b->list.nrows < (int)b->list_others;
    }
    lessons_lease_unlock(l);
}

int lessons_lease_list(lessons_lease_t *l, apr_interval_time_t *sent,
                       lessons_lease_check_t *out)
{
    lessons_lease_block_t *b = l->b;
    int others = -1;

    *sent = 0;
    out->nrows = 0;
    out->overflow = 0;
    if (!lessons_lease_lock(l)) {
        return -1;
    }
    if (b->list_sent > 0) {
        *sent = b->list_sent;
        others = (int)b->list_others;
        lessons_lease_copy_list(out, &b->list);
    }
    lessons_lease_unlock(l);
    return others;
}

int lessons_lease_listed_peer(lessons_lease_t *l, const char *name,
                              char peer[LESSONS_LEASE_PEER_MAX])
{
    lessons_lease_block_t *b = l->b;
    int i, found = 0;

    peer[0] = '\0';
    if (!name || !lessons_lease_lock(l)) {
        return 0;
    }
    for (i = 0; i < b->list.nrows && i < LESSONS_LEASE_ROWS; i++) {
        const lessons_lease_row_t *row = &b->list.rows[i];

        if (row->peer[0] && strcmp(row->name, name) == 0) {
            apr_cpystrn(peer, row->peer, LESSONS_LEASE_PEER_MAX);
            found = 1;
            break;
        }
    }
    lessons_lease_unlock(l);
    return found;
}

/* ------------------------------------------------------- the writers */

/* Under the lock: stop serving the installed version until one read
 * after now is installed (the generation moves); *ring: the first drop
 * since the holder last took lessons_lease_reread.
 */
static void lessons_lease_drop_locked(lessons_lease_block_t *b, int *ring)
{
    lessons_lease_write_begin(b);
    b->dropped = 1;
    b->gen++;
    lessons_lease_write_end(b);
    *ring = !b->reread;
    b->reread = 1;
}

int lessons_lease_alone(lessons_lease_t *l, apr_interval_time_t now,
                        apr_interval_time_t fresh, int *ring)
{
    lessons_lease_block_t *b = l->b;
    int alone;

    *ring = 0;
    if (!lessons_lease_lock(l)) {
        return 0;
    }
    alone = b->holder != 0 && b->listening && b->list_sent > 0
            && b->list_sent <= now && now - b->list_sent < fresh
            && b->list_others == 0;
    if (alone) {
        lessons_lease_drop_locked(b, ring);
        b->alone_writes++;
    }
    lessons_lease_unlock(l);
    return alone;
}

/* Under the lock: how much longer every server of the list holds its
 * drop (from answers to rounds that asked for holds), 0 when one does
 * not.
 */
static apr_interval_time_t lessons_lease_held_locked(lessons_lease_block_t *b,
                                                     apr_interval_time_t now)
{
    apr_interval_time_t least = 0;
    int i;

    for (i = 0; i < b->list.nrows && i < LESSONS_LEASE_ROWS; i++) {
        lessons_lease_peer_t *p = lessons_lease_peer(b, b->list.rows[i].name,
                                                     0);

        if (!p || p->held_until <= now) {
            return 0;
        }
        if (least == 0 || p->held_until - now < least) {
            least = p->held_until - now;
        }
    }
    return least;
}

/* Under the lock: draw the next round at now, of the list, into out and
 * nonce; hold: it asks for holds; led: a leader sends it again and rings
 * its writes (a renewal has none).  This server's version is dropped.
 */
static void lessons_lease_draw_locked(lessons_lease_block_t *b,
                                      apr_interval_time_t now, int hold,
                                      int led, lessons_lease_check_t *out,
                                      unsigned char
                                      nonce[LESSONS_LEASE_NONCE_LEN],
                                      int *ring)
{
    lessons_lease_copy_list(out, &b->list);
    out->at = now;
    out->hold = hold;
    out->round = ++b->rounds;
    lessons_lease_nonce_of(b, out->round, nonce);
    lessons_lease_drop_locked(b, ring);
    b->tell_at = now;
    b->tell_hold = (apr_uint32_t)hold;
    b->tell_led = (apr_uint32_t)led;
}

lessons_lease_tell_e lessons_lease_invalidating(
    lessons_lease_t *l, apr_interval_time_t commit, apr_interval_time_t now,
    apr_interval_time_t fresh, int renew, lessons_lease_check_t *out,
    unsigned char nonce[LESSONS_LEASE_NONCE_LEN], int *ring,
    apr_uint32_t *seen, apr_interval_time_t *until)
{
    lessons_lease_block_t *b = l->b;
    lessons_lease_tell_e how = LESSONS_LEASE_TELL_NO;
    apr_interval_time_t left = 0;
    int i, ok, renewing;

    *ring = 0;
    if (!lessons_lease_lock(l)) {
        return LESSONS_LEASE_TELL_NO;
    }
    ok = b->holder != 0 && b->listening && b->nonce_ok
         && b->list_sent > 0 && b->list_sent <= now
         && now - b->list_sent < fresh && b->list_others > 0
         && !b->list.overflow && b->list.nrows == (int)b->list_others;
    for (i = 0; ok && i < b->list.nrows; i++) {
        ok = b->list.rows[i].peer[0] != '\0';
    }
    if (ok) {
        left = lessons_lease_held_locked(b, now);
    }
    /* A renewal drawn ahead not long ago: its answers may be on the
     * way (one lost is drawn again a gap later).
     */
    renewing = renew && b->renew_at > 0 && b->renew_at <= now
               && now - b->renew_at < LESSONS_LEASE_RENEW_GAP;
    if (!ok) {
        /* nothing changed */
    }
    else if (left > LESSONS_LEASE_HOLD_MARGIN
             && (b->tell_open > 0 || left >= LESSONS_LEASE_HELD / 2
                 || renewing)) {
        /* Every listed server holds its drop past now, after the
         * commit: GETs there read the version until the holds end,
         * then read it again.  The next round renews them.
         */
        lessons_lease_drop_locked(b, ring);
        b->held_writes++;
        how = LESSONS_LEASE_TELL_HELD;
    }
    else if (left > LESSONS_LEASE_HOLD_MARGIN && renew) {
        /* Held still, half gone: this write is answered as held, and
         * sends the next round's HOLDs on its way out.  No one waits
         * for their answers, which extend the holds when they come.
         */
        lessons_lease_draw_locked(b, now, 1, 0, out, nonce, ring);
        b->renew_at = now;
        b->held_writes++;
        how = LESSONS_LEASE_TELL_RENEW;
    }
    else if (b->rounds > 0 && b->tell_led && b->tell_at >= commit) {
        /* Drawn after the commit: its drops and INVALIDATEs come after
         * it.  The newest list is as fresh as the round's; a server
         * listed since, not told, is waited out.
         */
        lessons_lease_copy_list(out, &b->list);
        out->at = b->tell_at;
        out->round = b->rounds;
        out->hold = b->tell_hold != 0;
        how = LESSONS_LEASE_TELL_JOIN;
    }
    else if (b->tell_open > 0 && now < b->tell_at + LESSONS_LEASE_ROUND_WAIT) {
        *seen = apr_atomic_read32(&b->told.word);
        *until = b->tell_at + LESSONS_LEASE_ROUND_WAIT;
        how = LESSONS_LEASE_TELL_WAIT;
    }
    else {
        /* Writes close together (a burst): this round asks for holds,
         * which answer the writes after it at once.
         */
        lessons_lease_draw_locked(b, now,
                                  b->tell_at > 0
                                  && now - b->tell_at
                                     < LESSONS_LEASE_HOLD_BURST,
                                  1, out, nonce, ring);
        b->tell_open = out->round;
        how = LESSONS_LEASE_TELL_LEAD;
    }
    if (how == LESSONS_LEASE_TELL_LEAD || how == LESSONS_LEASE_TELL_JOIN) {
        b->told_writes++;
    }
    lessons_lease_unlock(l);
    return how;
}

void lessons_lease_told(lessons_lease_t *l, apr_uint64_t round)
{
    lessons_lease_block_t *b = l->b;

    if (lessons_lease_lock(l)) {
        if (b->tell_open == round) {
            b->tell_open = 0;
        }
        lessons_lease_unlock(l);
    }
    /* Whatever round is open now: the writes that joined this one sleep
     * on this word, not on each acknowledgement (lessons_lease_tell_seen).
     */
    lessons_lease_ring_word(&b->told);
}

apr_uint32_t lessons_lease_tell_seen(lessons_lease_t *l)
{
    return apr_atomic_read32(&l->b->told.word);
}

void lessons_lease_tell_sleep(lessons_lease_t *l, apr_uint32_t seen,
                              apr_interval_time_t until)
{
    lessons_lease_sleep_on(&l->b->told, seen, until);
}

void lessons_lease_waited(lessons_lease_t *l, apr_interval_time_t waited)
{
    int i = 0;

    if (waited < 0) {
        waited = 0;
    }
    while (i < LESSONS_LEASE_WAIT_BUCKETS - 1
           && waited > lessons_lease_wait_bounds[i]) {
        i++;
    }
    /* Atomics, not the block's lock: every write of the server comes
     * here, and a lock's holder put off by the scheduler would be in
     * the figure it measures.
     */
    (void)apr_atomic_inc64(&l->b->waits[i]);
    (void)apr_atomic_add64(&l->b->waited, (apr_uint64_t)waited);
}

int lessons_lease_drop(lessons_lease_t *l, int *ring)
{
    *ring = 0;
    if (!lessons_lease_lock(l)) {
        return 0;
    }
    lessons_lease_drop_locked(l->b, ring);
    lessons_lease_unlock(l);
    return 1;
}

int lessons_lease_hold_drop(lessons_lease_t *l, apr_interval_time_t now,
                            int *ring)
{
    lessons_lease_block_t *b = l->b;

    *ring = 0;
    if (!lessons_lease_lock(l)) {
        return 0;
    }
    lessons_lease_drop_locked(b, ring);
    if (now + LESSONS_LEASE_HOLD > b->hold_until) {
        b->hold_until = now + LESSONS_LEASE_HOLD;
    }
    lessons_lease_unlock(l);
    return 1;
}

apr_interval_time_t lessons_lease_held_until(lessons_lease_t *l)
{
    apr_interval_time_t until;

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    until = l->b->hold_until;
    lessons_lease_unlock(l);
    return until;
}

int lessons_lease_reread(lessons_lease_t *l, apr_uint32_t *gen)
{
    lessons_lease_block_t *b = l->b;
    int wanted;

    apr_interval_time_t now = lessons_lease_clock();

    if (!lessons_lease_lock(l)) {
        return 0;
    }
    *gen = lessons_lease_gen_locked(b, now);
    wanted = now >= b->hold_until && b->reread != 0;
    if (now >= b->hold_until) {
        b->reread = 0;
        apr_atomic_set32(&b->taken, 0);
    }
    lessons_lease_unlock(l);
    return wanted;
}

int lessons_lease_taken(lessons_lease_t *l)
{
    return apr_atomic_read32(&l->b->taken) != 0;
}

apr_interval_time_t lessons_lease_reread_wait(apr_interval_time_t wait,
                                              int taken)
{
    if (taken || wait < LESSONS_LEASE_REREAD_MIN) {
        return LESSONS_LEASE_REREAD_MIN;
    }
    return wait * 2 < LESSONS_LEASE_REREAD_MAX ? wait * 2
                                               : LESSONS_LEASE_REREAD_MAX;
}

int lessons_lease_has_listener(lessons_lease_t *l)
{
    return l && apr_atomic_read32(&l->b->listening) != 0;
}

apr_uint32_t lessons_lease_ask(lessons_lease_t *l)
{
    return apr_atomic_inc32(&l->b->asked) + 1;
}

int lessons_lease_answer(lessons_lease_t *l, apr_uint32_t ticket,
                         apr_interval_time_t deadline,
                         lessons_lease_check_t *out)
{
    lessons_lease_block_t *b = l->b;
    apr_uint32_t bell;

    for (;;) {
        if (!lessons_lease_lock(l)) {
            return 0;
        }
        bell = apr_atomic_read32(&b->turn.word);
        if ((apr_int32_t)(b->answered - ticket) >= 0) {
            memcpy(out, &b->check, sizeof(*out));
            lessons_lease_unlock(l);
            return 1;
        }
        lessons_lease_unlock(l);
        if (lessons_lease_clock() >= deadline) {
            return 0;
        }
        lessons_lease_sleep_on(&b->turn, bell, deadline);
    }
}

int lessons_lease_raise(lessons_lease_t *l, const lessons_lease_version_t *v)
{
    lessons_lease_block_t *b = l->b;
    apr_uint32_t rings = 0;
    int same, raised = 0, holds;

    if (!v || v->sum < 0 || !lessons_lease_lock(l)) {
        return 0;
    }
    same = b->version.epoch[0] != '\0'
           && strncmp(v->epoch, b->version.epoch, sizeof(v->epoch)) == 0;
    if (same && v->sum > b->version.sum) {
        /* This server's row of the last check may be what it waits on. */
        int was = lessons_lease_round_settled(b);

        lessons_lease_write_begin(b);
        b->version.sum = v->sum;
        lessons_lease_write_end(b);
        raised = 1;
        if (!was && lessons_lease_round_settled(b)) {
            rings = lessons_lease_settle_rings(b);
        }
    }
    holds = lessons_lease_covers(&b->version, v);
    lessons_lease_unlock(l);
    lessons_lease_ring_after(l, raised, rings);
    return holds;
}

int lessons_lease_own(lessons_lease_t *l, const char *name,
                      const lessons_lease_version_t *v)
{
    lessons_lease_version_t installed;
    apr_interval_time_t end;

    if (!name || !l->b->self[0]
        || strncmp(name, l->b->self, sizeof(l->b->self)) != 0) {
        return 0;
    }
    lessons_lease_read(l, &end, &installed);
    return lessons_lease_covers(&installed, v);
}

/* Under the lock: lessons_lease_settled's answer. */
static int lessons_lease_settled_locked(lessons_lease_block_t *b,
                                        const lessons_lease_check_t *chk,
                                        apr_interval_time_t now,
                                        apr_interval_time_t *until)
{
    int i, settled = 1;

    *until = 0;
    if (chk->overflow) {
        apr_interval_time_t end = chk->at
                                  + apr_time_from_msec(LESSONS_LEASE_MAX_MS);

        if (now < end) {
            settled = 0;
            *until = end;
        }
    }
    for (i = 0; i < chk->nrows && i < LESSONS_LEASE_ROWS; i++) {
        const lessons_lease_row_t *row = &chk->rows[i];
        apr_interval_time_t len = apr_time_from_msec(row->length_ms), end;
        lessons_lease_peer_t *p;

        p = lessons_lease_peer(b, row->name, 0);
        if (chk->round) {
            /* An INVALIDATE round: settled by its acknowledgement or a
             * later round's, never by a version.
             */
            if (p && p->acked_round >= chk->round) {
                continue;
            }
        }
        else {
            if (lessons_lease_covers(&row->acked, &chk->version)) {
                continue;
            }
            /* This server: what it installed is what its GETs take. */
            if (b->self[0]
                && strncmp(row->name, b->self, sizeof(b->self)) == 0
                && lessons_lease_covers(&b->version, &chk->version)) {
                continue;
            }
            if (p && lessons_lease_covers(&p->acked, &chk->version)) {
                continue;
            }
        }
        /* The lease in the check began before the check was read: it
         * ends within its length of then, and within its length of
         * when this renewal (or a later one) was first heard.  A
         * round's list was read before the commit, and its server may
         * have renewed since, unheard: its lease ends within its length
         * of the commit (chk->at), and nothing heard shortens that.
         */
        end = chk->at + len;
        if (!chk->round && p && p->term >= row->term
            && p->seen + len < end) {
            end = p->seen + len;
        }
        if (now >= end) {
            continue;
        }
        settled = 0;
        if (*until == 0 || end < *until) {
            *until = end;
        }
    }
    return settled;
}

/* Under the lock: ticket waits for the next lead.  The first to ask is
 * that lead's (it sleeps on the turn's bell); the others sleep until
 * that lead's round is settled, as the writers of a lead in progress
 * do, unless the one to lead next is gone.  The word to sleep on and
 * what it shows, and when to look again.
 */
static lessons_lease_bell_t *lessons_lease_wait_next(
    lessons_lease_block_t *b, apr_uint32_t ticket, apr_interval_time_t now,
    apr_uint32_t *seen, apr_interval_time_t *until)
{
    lessons_lease_bell_t *word;

    if (b->next == 0 || b->next == ticket
        || now - b->next_at > LESSONS_LEASE_LEAD_STALE) {
        if (b->next != ticket) {
            b->next = ticket;
            b->next_at = now;
        }
        word = &b->turn;
    }
    else {
        word = &b->done[(b->leads + 1) & 1];
        *until = b->next_at + LESSONS_LEASE_LEAD_STALE + 1;
    }
    *seen = apr_atomic_read32(&word->word);
    return word;
}

/* Under the lock: a writer gives up its turn (its deadline passed).  If
 * it was to lead next, the writers waiting for that lead must not wait
 * for it: whom to wake.
 */
static apr_uint32_t lessons_lease_give_up(lessons_lease_block_t *b,
                                          apr_uint32_t ticket)
{
    if (b->next != ticket) {
        return 0;
    }
    b->next = 0;
    return LESSONS_RING_TURN | LESSONS_RING_DONE(b->leads + 1);
}

lessons_lease_turn_e lessons_lease_turn(lessons_lease_t *l,
                                        apr_uint32_t ticket,
                                        apr_interval_time_t deadline,
                                        lessons_lease_check_t *out,
                                        apr_uint32_t *asked)
{
    lessons_lease_block_t *b = l->b;
    apr_interval_time_t now, until;
    lessons_lease_bell_t *word;
    apr_uint32_t seen, rings;

    for (;;) {
        if (!lessons_lease_lock(l)) {
            return LESSONS_LEASE_TURN_NONE;
        }
        now = lessons_lease_clock();
        if ((apr_int32_t)(b->answered - ticket) >= 0) {
            if (b->next == ticket) {
                b->next = 0;
            }
            memcpy(out, &b->check, sizeof(*out));
            lessons_lease_unlock(l);
            return LESSONS_LEASE_TURN_ANSWERED;
        }
        if (b->leader == 0 && now < b->check.at + LESSONS_LEASE_ROUND_WAIT
            && !lessons_lease_settled_locked(b, &b->check, now, &until)) {
            /* The last check's acknowledgements are on their way: the
             * writes that ask meanwhile wait for them, a little, and
             * then share one check, and the other servers one catch-up
             * each, instead of one each per write.
             */
            until = b->check.at + LESSONS_LEASE_ROUND_WAIT;
            word = lessons_lease_wait_next(b, ticket, now, &seen, &until);
        }
        else if (b->leader == 0
                 || now - b->led_at > LESSONS_LEASE_LEAD_STALE) {
            /* Every ask made so far: this check is sent after them. */
            b->leader = ticket;
            b->led_at = now;
            b->leads++;
            b->next = 0;
            *asked = apr_atomic_read32(&b->asked);
            b->lead_upto = *asked;
            lessons_lease_unlock(l);
            return LESSONS_LEASE_TURN_LEAD;
        }
        else {
            until = b->led_at + LESSONS_LEASE_LEAD_STALE + 1;
            if ((apr_int32_t)(b->lead_upto - ticket) >= 0) {
                /* The lead answers this ask: sleep until its round is
                 * settled (or it failed, or ends late).
                 */
                word = &b->done[b->leads & 1];
                seen = apr_atomic_read32(&word->word);
            }
            else {
                word = lessons_lease_wait_next(b, ticket, now, &seen, &until);
            }
        }
        if (now >= deadline) {
            rings = lessons_lease_give_up(b, ticket);
            lessons_lease_unlock(l);
            lessons_lease_ring_after(l, 0, rings);
            return LESSONS_LEASE_TURN_NONE;
        }
        lessons_lease_unlock(l);
        lessons_lease_sleep_on(word, seen, until < deadline ? until : deadline);
    }
}

void lessons_lease_led(lessons_lease_t *l, apr_uint32_t ticket,
                       apr_uint32_t asked, const lessons_lease_check_t *chk)
{
    lessons_lease_block_t *b = l->b;
    apr_interval_time_t until = 0;
    apr_uint32_t rings = LESSONS_RING_TURN;

    if (!lessons_lease_lock(l)) {
        return;
    }
    if (chk) {
        lessons_lease_answers(b, asked, chk);
    }
    /* The writers this lead answers sleep until its round is settled:
     * wake them now if it is, if the lead failed them, or if the round
     * settles by the clock before they would wake of themselves.
     */
    if ((apr_int32_t)(b->answered - asked) < 0) {
        rings |= LESSONS_RING_DONE_BOTH;
    }
    else if (lessons_lease_settled_locked(b, &b->check, lessons_lease_clock(),
                                          &until)
             || until <= b->led_at + LESSONS_LEASE_LEAD_STALE + 1) {
        rings |= b->check_rings;
    }
    if (b->leader == ticket) {
        b->leader = 0;
    }
    lessons_lease_unlock(l);
    lessons_lease_ring_after(l, 0, rings);
}

int lessons_lease_settled(lessons_lease_t *l,
                          const lessons_lease_check_t *chk,
                          apr_interval_time_t now,
                          apr_interval_time_t *until, apr_uint32_t *bell)
{
    lessons_lease_block_t *b = l->b;
    int settled;

    if (!lessons_lease_lock(l)) {
        /* No word from anyone: wait out every lease there may be. */
        *until = chk->at + apr_time_from_msec(LESSONS_LEASE_MAX_MS);
        *bell = apr_atomic_read32(&b->bell.word);
        return now >= *until;
    }
    *bell = apr_atomic_read32(&b->bell.word);
    settled = lessons_lease_settled_locked(b, chk, now, until);
    lessons_lease_unlock(l);
    return settled;
}

void lessons_lease_state(lessons_lease_t *l, apr_interval_time_t now,
                         lessons_lease_state_t *st)
{
    lessons_lease_block_t *b;
    apr_interval_time_t end = 0;
    int i;

    memset(st, 0, sizeof(*st));
    st->others = -1;
    if (!l) {
        return;
    }
    b = l->b;
    /* Under the lock, so that valid and run are of one moment (no
     * writer is inside the seqlock while it is held).
     */
    if (!lessons_lease_lock(l)) {
        return;
    }
    lessons_lease_read(l, &end, &st->version);
    st->valid = end > now && st->version.sum >= 0;
    st->left = end > now ? end - now : 0;
    if (b->run_start > 0 && b->run_start <= now && now < b->run_end) {
        st->run = now - b->run_start;
    }
    st->holder = b->holder;
    st->listening = b->listening != 0;
    st->alone_writes = b->alone_writes;
    st->told_writes = b->told_writes;
    st->held_writes = b->held_writes;
    for (i = 0; i < LESSONS_LEASE_WAIT_BUCKETS; i++) {
        st->waits[i] = apr_atomic_read64(&b->waits[i]);
    }
    st->waited = (apr_interval_time_t)apr_atomic_read64(&b->waited);
    if (b->list_sent > 0 && b->list_sent <= now) {
        st->others = (int)b->list_others;
        st->list_age = now - b->list_sent;
    }
    lessons_lease_unlock(l);
}
