/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_lease.h: a server's read lease on the catalogue (issue 56,
 * docs/scaling.md "Read leases"), as its processes share it: one block
 * of shared memory, made before the fork, per virtual host that sets
 * LessonsDBLease.
 *
 * - The read path asks for the installed version: valid while the lease
 *   has not ended on this machine's clock (lessons_lease_clock).  One
 *   seqlocked read, no lock, no statement.
 * - One thread in one process (the holder, chosen here) keeps the
 *   listening connection, renews the lease, installs each version it
 *   reads before acknowledging it, answers the writers' checks and
 *   records what other servers acknowledged and renewed.
 * - A writer, once its write committed, asks the holder for a check (a
 *   version and every lease, read after the write) and waits until each
 *   lease is acknowledged at that version or can no longer be held.
 *
 * Every change but the read path's is made under one cross-process
 * lock, never held over the network; waiters sleep on a futex word of
 * the block.  The unit knows times, names and versions, not httpd or
 * the database.
 */
#ifndef LESSONS_LEASE_H
#define LESSONS_LEASE_H

#include "apr_global_mutex.h"
#include "apr_pools.h"
#include "apr_time.h"

#define LESSONS_LEASE_NAME_MAX   96     /* a server's name, with its NUL */
#define LESSONS_LEASE_EPOCH_MAX  80     /* a version's epoch, with its NUL */
#define LESSONS_LEASE_ROWS      128     /* leases a check holds */
#define LESSONS_LEASE_PEER_MAX  160     /* a row's "ADDRESS:PORT KEY" */
#define LESSONS_LEASE_PEERS     128     /* servers the block remembers */
#define LESSONS_LEASE_MAX_MS  60000     /* the longest lease there is */
#define LESSONS_LEASE_NONCE_LEN  16     /* an INVALIDATE's nonce: this
                                         * block's 8 random bytes, then
                                         * its round, big-endian */

typedef struct lessons_lease_t lessons_lease_t;

/* A catalogue version: the epoch (the database's identity and history)
 * and the sum of its counters.  Within one epoch a larger sum includes
 * every write a smaller one does.
 */
typedef struct {
    apr_int64_t sum;
    char epoch[LESSONS_LEASE_EPOCH_MAX];
} lessons_lease_version_t;

/* One server's lease as a check read it. */
typedef struct {
    char name[LESSONS_LEASE_NAME_MAX];
    apr_int64_t term;               /* its renewal's number */
    apr_int64_t length_ms;          /* its lease length */
    lessons_lease_version_t acked;  /* sum -1: none yet */
    char peer[LESSONS_LEASE_PEER_MAX];  /* where it hears of writes, and
                                     * its datagrams' key; "": by NOTIFY */
} lessons_lease_row_t;

/* A check: a version read after the write, and the leases of the same
 * snapshot.
 */
typedef struct {
    lessons_lease_version_t version;
    apr_uint64_t round;             /* an INVALIDATE round's number: its
                                     * rows settle by acknowledging it or
                                     * a later one, not by version; 0:
                                     * a check */
    apr_interval_time_t at;         /* lessons_lease_clock when it came */
    int hold;                       /* a round's INVALIDATEs ask each
                                     * server to hold its drop
                                     * (LESSONS_LEASE_HOLD) */
    int nrows;
    int overflow;                   /* more leases than rows: wait out
                                     * the longest lease there is */
    lessons_lease_row_t rows[LESSONS_LEASE_ROWS];
} lessons_lease_check_t;

/* A clock that only moves forward, and also while the machine sleeps
 * (CLOCK_BOOTTIME): a paused server's lease ends by it whatever the
 * wall clock does.  In apr_time_t units (microseconds).
 */
apr_interval_time_t lessons_lease_clock(void);

/* Does a hold b's writes (the same epoch, a sum at least as large)? */
int lessons_lease_covers(const lessons_lease_version_t *a,
                         const lessons_lease_version_t *b);

/* The bytes a block needs; the block at base (size bytes): laid out
 * anew when fresh (in the parent: every generation of the server has
 * its own), else as it is (a child, with the lock opened in it).  lock
 * guards it in every process.  NULL when size is too small.
 */
apr_size_t lessons_lease_size(void);
lessons_lease_t *lessons_lease_attach(void *base, apr_size_t size,
                                      apr_global_mutex_t *lock, int fresh,
                                      apr_pool_t *p);

/* The server's own name (its row in lessons_leases): a writer needs no
 * acknowledgement from its own server, only the version installed.  In
 * the parent, after a fresh attach.
 */
void lessons_lease_name(lessons_lease_t *l, const char *name);

/* ---------------------------------------------------- the read path */

/* The installed version, if the lease is valid at now: 1 and *v, or 0
 * (the caller reads the version from the database as without a lease).
 */
int lessons_lease_current(lessons_lease_t *l, apr_interval_time_t now,
                          lessons_lease_version_t *v);

/* ------------------------------------------------------- the holder */

/* Become or stay the holder: 1 when pid holds the block now (it took it
 * because there was none, the holder's process is gone (alive() says
 * so) or its beat is older than stale).  The holder beats at each call.
 */
int lessons_lease_hold(lessons_lease_t *l, apr_uint32_t pid,
                       apr_interval_time_t now, apr_interval_time_t stale,
                       int (*alive)(apr_uint32_t pid));

/* Let the block go (pid's process or thread is ending): the lease ends,
 * and another process may hold it.
 */
void lessons_lease_let_go(lessons_lease_t *l, apr_uint32_t pid);

/* The holder's connection listens (1) or is gone (0: the lease ends at
 * once).  0 when pid no longer holds the block.
 */
int lessons_lease_listening(lessons_lease_t *l, apr_uint32_t pid, int on);

/* The drops so far (lessons_lease_alone): taken before the statement
 * that reads a version is sent.  During a hold, a generation that no
 * install matches: what is read then is never served.
 */
apr_uint32_t lessons_lease_gen(lessons_lease_t *l);

/* Install v (raise the version of its epoch; another epoch replaces
 * it): done before v is acknowledged.  With end > 0, the lease is
 * valid until end (a renewal).  gen: lessons_lease_gen before v was
 * read; a drop since leaves the installed version unserved (v may miss
 * the write that dropped it).  1, or 0 when pid no longer holds it.
 */
int lessons_lease_install(lessons_lease_t *l, apr_uint32_t pid,
                          const lessons_lease_version_t *v,
                          apr_interval_time_t end, apr_uint32_t gen);

/* A lease starts in two steps (docs/scaling.md, "The check off the
 * write's path", step 2).  Renewals that each came back before the
 * last one's lease ended make a run; one that came back later, or the
 * first, starts a new run (so do a lost listener, a new holder, a
 * renewal that took longer than its lease).  The server serves from
 * cache only on a renewal sent at least this share of a lease after its
 * run's first renewal came back; until then its row is listed and it
 * answers writers, but its GETs read the version.
 */
#define LESSONS_LEASE_WARM_PCT  65

/* The renewal sent at sent came back at back with a lease until end (0:
 * it came back too late, no lease): the run it continues or starts.
 * The end the server may serve until (to install), or 0 while the run
 * is too young, or when pid no longer holds the block.
 */
apr_interval_time_t lessons_lease_run(lessons_lease_t *l, apr_uint32_t pid,
                                      apr_interval_time_t sent,
                                      apr_interval_time_t back,
                                      apr_interval_time_t end,
                                      apr_interval_time_t length);

/* The read path stops taking the installed version until the next
 * lessons_lease_install: the holder reads a version and acknowledges it
 * in one statement, so the acknowledgement may be seen before the
 * version is installed.  1, or 0 when pid no longer holds the block.
 */
int lessons_lease_refresh(lessons_lease_t *l, apr_uint32_t pid);

/* The checks asked so far: a check whose statement is sent after this
 * answers them all (lessons_lease_publish with it).
 */
apr_uint32_t lessons_lease_asked(lessons_lease_t *l);

/* Whether a check is wanted: asked != the last published. */
int lessons_lease_wanted(lessons_lease_t *l);

/* A check sent after asked was read: it answers every ask up to asked. */
int lessons_lease_publish(lessons_lease_t *l, apr_uint32_t pid,
                          apr_uint32_t asked,
                          const lessons_lease_check_t *chk);

/* What the holder heard of a server: a renewal (its term, seen at now)
 * or an acknowledgement (acked set).  Wakes the writers when it is news
 * (a later term, a newer acknowledgement), and those waiting for a turn
 * only when it settles the last check.
 */
void lessons_lease_heard(lessons_lease_t *l, const char *name,
                         apr_int64_t term,
                         const lessons_lease_version_t *acked,
                         apr_interval_time_t now);

/* ------------------------------------------------------- the writers */

/* A committed write with no check (docs/scaling.md, "The check off
 * the write's path", step 3 with no other server listed): when the
 * holder listens and its last renewal, sent less than fresh before now
 * (after the commit), listed no other server's lease, the installed
 * version is dropped (moving the generation, so that no version read
 * before now is served again) and 1 is returned: the write tells no
 * one and waits for no one, and this server's GETs read the version
 * until the holder installs one read after now.  *ring: the first drop
 * since the holder last took lessons_lease_reread, which the writer
 * rings it for (later ones need not wake it).  A server not listed
 * then serves only from a renewal sent 0.65 of a lease after its run
 * began (LESSONS_LEASE_WARM_PCT), after this write.  Else 0, nothing
 * changed: the write makes its check.
 */
int lessons_lease_alone(lessons_lease_t *l, apr_interval_time_t now,
                        apr_interval_time_t fresh, int *ring);

/* A committed write that tells the listed servers itself (step 3
 * beyond one server), when the holder listens and its last list was
 * sent less than fresh before now, was kept whole, names other servers
 * and gives each an address.  Rounds are shared: a round drawn after
 * this write's commit (at commit, on this clock) covers it too.
 *   LEAD: *out is that list as a new round's check (at: now; round:
 *         drawn now, one more than the last, so that a later number
 *         was drawn after an earlier round's commit; nonce names it on
 *         the wire), this server's installed version
 *         dropped (*ring as for lessons_lease_alone): the writer sends
 *         each row an INVALIDATE, waits until lessons_lease_settled,
 *         then calls lessons_lease_told.
 *   JOIN: *out is the newest round, drawn after the commit: the writer
 *         only waits until lessons_lease_settled (its leader sends),
 *         sleeping on lessons_lease_tell_sleep.
 *   WAIT: a round drawn before the commit is still out: sleep on
 *         lessons_lease_tell_sleep(seen, until), then ask again with a
 *         new now (the writes that come meanwhile take the next round
 *         together).
 *   NO:   nothing changed: the write makes its check.
 */
typedef enum {
    LESSONS_LEASE_TELL_NO,
    LESSONS_LEASE_TELL_LEAD,
    LESSONS_LEASE_TELL_JOIN,
    LESSONS_LEASE_TELL_WAIT,
    LESSONS_LEASE_TELL_HELD,
    LESSONS_LEASE_TELL_RENEW
} lessons_lease_tell_e;

/* Holds (docs/scaling.md, "Holds: a burst of writes told once").  A
 * round drawn within LESSONS_LEASE_HOLD_BURST of the one before asks
 * each server to hold its drop for LESSONS_LEASE_HOLD: serve nothing
 * it holds, and install no version read, until that long after the
 * INVALIDATE came (on its own clock).  An answer to such a round's
 * HOLD (lessons_lease_heard_hold) is a hold until the round was drawn
 * plus LESSONS_LEASE_HELD on the writer's clock (90%, as leases count:
 * clocks that run within 10% of each other), which the receiver's own
 * ends after: a write that commits before then is seen there, by GETs
 * that read the version until the hold ends and by the first version
 * read after it.  So a write that finds, after its commit, every
 * listed server held for more than LESSONS_LEASE_HOLD_MARGIN yet is
 * answered at once:
 *   HELD: this server's installed version dropped (*ring as for
 *         lessons_lease_alone); no round, no wait.
 * Once the holds have less than half their length left, the write that
 * finds no round open renews them.  With renew (the caller sends a
 * round whose answers its server's readers hear, not the writer):
 *   RENEW: answered as HELD, and out, nonce are a round that asks for
 *          holds, to send on the write's way out (HOLDs only).  No one
 *          waits for it and no write joins it.  The writes within
 *          LESSONS_LEASE_RENEW_GAP after it are HELD while its answers
 *          come; after that, the next write renews again.
 * Without renew, that write draws a round (LEAD) and waits for it.
 */
#define LESSONS_LEASE_HOLD        apr_time_from_msec(50)
#define LESSONS_LEASE_HELD        (LESSONS_LEASE_HOLD * 9 / 10)
#define LESSONS_LEASE_HOLD_BURST  (2 * LESSONS_LEASE_HOLD)
#define LESSONS_LEASE_HOLD_MARGIN apr_time_from_msec(1)
#define LESSONS_LEASE_RENEW_GAP   apr_time_from_msec(5)

lessons_lease_tell_e lessons_lease_invalidating(
    lessons_lease_t *l, apr_interval_time_t commit, apr_interval_time_t now,
    apr_interval_time_t fresh, int renew, lessons_lease_check_t *out,
    unsigned char nonce[LESSONS_LEASE_NONCE_LEN], int *ring,
    apr_uint32_t *seen, apr_interval_time_t *until);

/* The leader of round is done with it (settled): the writes that joined
 * it, and those waiting to take the next round together, need not wait
 * for it any longer (it rings them, even when a later round is open).
 */
void lessons_lease_told(lessons_lease_t *l, apr_uint64_t round);

/* What lessons_lease_tell_sleep compares: read it before asking
 * lessons_lease_settled, and a lessons_lease_told after that ends the
 * sleep.  A joined write sleeps on it rather than on every
 * acknowledgement (lessons_lease_sleep), which on two CPUs woke it once
 * for each server that answered.
 */
apr_uint32_t lessons_lease_tell_seen(lessons_lease_t *l);

/* Sleep until lessons_lease_told rings after seen, or until. */
void lessons_lease_tell_sleep(lessons_lease_t *l, apr_uint32_t seen,
                              apr_interval_time_t until);

/* Another server's write (an INVALIDATE, step 4): drop the installed
 * version as lessons_lease_alone does, whatever the lease; *ring as
 * there.  1, or 0 when the block's lock failed (nothing dropped: the
 * caller must not answer).
 */
int lessons_lease_drop(lessons_lease_t *l, int *ring);

/* The same for an INVALIDATE that asks for a hold: the installed
 * version is not served, and no version read is installed to be
 * served, until LESSONS_LEASE_HOLD after now (a later hold extends
 * it).  Also a block's first state, with now its making: a server that
 * restarts holds what it may have held before.  1, or 0 as there.
 */
int lessons_lease_hold_drop(lessons_lease_t *l, apr_interval_time_t now,
                            int *ring);

/* When the last hold ends (0: none), for the holder to read the
 * version again after it.
 */
apr_interval_time_t lessons_lease_held_until(lessons_lease_t *l);

/* The holder, rung after a drop: 1 when one came since the last call,
 * with *gen to install what it reads now with; the next drop rings
 * again, and lessons_lease_taken starts afresh.  During a hold, *gen as
 * lessons_lease_gen gives it then, and the drop stays to be read after
 * the hold (the call takes nothing).
 */
int lessons_lease_reread(lessons_lease_t *l, apr_uint32_t *gen);

/* Whether a GET took the installed version (lessons_lease_current)
 * since the holder's last lessons_lease_reread.
 */
int lessons_lease_taken(lessons_lease_t *l);

/* How long after a drop's ring the holder reads the version again (the
 * writes of a burst share one read, and a steady stream of them sends
 * the primary at most one a wait): LESSONS_LEASE_REREAD_MIN when a GET
 * took what it read last (taken), else the last wait doubled, up to
 * LESSONS_LEASE_REREAD_MAX.  With writes and no GETs each read is
 * dropped again before anyone uses it: a statement for nothing, on
 * every server of the database.  wait: the last one (0 at first).
 */
#define LESSONS_LEASE_REREAD_MIN apr_time_from_msec(10)
#define LESSONS_LEASE_REREAD_MAX apr_time_from_msec(320)
apr_interval_time_t lessons_lease_reread_wait(apr_interval_time_t wait,
                                              int taken);

/* Whether a holder listens now (a writer asks it for the check). */
int lessons_lease_has_listener(lessons_lease_t *l);

/* Ask for a check; the ticket to wait with. */
apr_uint32_t lessons_lease_ask(lessons_lease_t *l);

/* Wait until a check answers ticket, until deadline at most: 1 and
 * *out, or 0.
 */
int lessons_lease_answer(lessons_lease_t *l, apr_uint32_t ticket,
                         apr_interval_time_t deadline,
                         lessons_lease_check_t *out);

/* A writer's own check read v after its write: raise the installed
 * version to v when it is of the installed epoch, so that this server
 * serves the write at once without its holder catching up (v was read
 * from the database after the commit, as a holder's reads are).  The
 * lease's end and a refresh under way are left alone.  1 when the
 * installed version holds v now.
 */
int lessons_lease_raise(lessons_lease_t *l, const lessons_lease_version_t *v);

/* Does this server's installed version hold v, and is v written by it
 * (its own name)?  A holder need not catch up on its own writers'
 * notifications: each raised the version itself.
 */
int lessons_lease_own(lessons_lease_t *l, const char *name,
                      const lessons_lease_version_t *v);

/* Writers with a connection of their own share checks: one of those
 * that asked makes the check for every ask made before it sends it, the
 * others wait for it (fewer checks, and fewer notifications and
 * catch-ups on the other servers, when writes come together).  Each
 * sleeps once: the first to ask while a round is out leads the next,
 * and the writes a lead answers (or will) sleep until its round is
 * settled, not until the check comes back and again for each
 * acknowledgement.
 */
typedef enum {
    LESSONS_LEASE_TURN_ANSWERED,    /* *out: a check sent after the ask */
    LESSONS_LEASE_TURN_LEAD,        /* make the check now, for the asks
                                     * up to *asked, then lessons_lease_led */
    LESSONS_LEASE_TURN_NONE         /* deadline passed: check alone */
} lessons_lease_turn_e;

/* A leader that has not finished after this is taken over. */
#define LESSONS_LEASE_LEAD_STALE  apr_time_from_msec(500)
/* A lead waits this long at most, after the last check came back, for
 * that check's acknowledgements: the asks made meanwhile then share the
 * next check (writes in rounds, not one check each).
 */
#define LESSONS_LEASE_ROUND_WAIT  apr_time_from_msec(3)

lessons_lease_turn_e lessons_lease_turn(lessons_lease_t *l,
                                        apr_uint32_t ticket,
                                        apr_interval_time_t deadline,
                                        lessons_lease_check_t *out,
                                        apr_uint32_t *asked);

/* The leader's check is done: chk answers the asks up to asked (NULL:
 * it failed, and the others take their turn).
 */
void lessons_lease_led(lessons_lease_t *l, apr_uint32_t ticket,
                       apr_uint32_t asked, const lessons_lease_check_t *chk);

/* Has every lease of chk acknowledged its version, or can it no longer
 * be held, at now?  1, or 0 with *until the soonest time that may
 * change by itself (an acknowledgement may come before).
 */
int lessons_lease_settled(lessons_lease_t *l,
                          const lessons_lease_check_t *chk,
                          apr_interval_time_t now,
                          apr_interval_time_t *until, apr_uint32_t *bell);

/* Sleep until something new is heard after bell (as
 * lessons_lease_settled gave it) or until, whichever comes first.
 */
void lessons_lease_sleep(lessons_lease_t *l, apr_uint32_t bell,
                         apr_interval_time_t until);

/* What a writer without a listening holder read itself: the
 * acknowledgements of a later check, heard as the holder would.
 */
void lessons_lease_heard_check(lessons_lease_t *l,
                               const lessons_lease_check_t *chk,
                               apr_interval_time_t now);

/* The holder's renewal, sent at sent (its clock before the statement),
 * read the other servers' leases: others of them, and their rows in
 * list (NULL: not kept; list->overflow: some did not fit).  A later
 * list replaces an earlier one, never the other way round.  What a
 * write goes by instead of a check (docs/scaling.md, "The check off
 * the write's path"); the metrics show how many it named.
 */
void lessons_lease_listed(lessons_lease_t *l, apr_interval_time_t sent,
                          int others, const lessons_lease_check_t *list);

/* The last list: its rows in *out (out->overflow when some were not
 * kept), when its renewal was sent in *sent; how many servers it named,
 * or -1 when there is none yet.
 */
int lessons_lease_list(lessons_lease_t *l, apr_interval_time_t *sent,
                       lessons_lease_check_t *out);

/* Where the last list says the server name hears of writes ("ADDRESS:
 * PORT KEY") in peer: 1, or 0 when it does not name it, or without an
 * address.  The readers check answers to renewals with its key.
 */
int lessons_lease_listed_peer(lessons_lease_t *l, const char *name,
                              char peer[LESSONS_LEASE_PEER_MAX]);

/* Server name acknowledged the INVALIDATE that carried nonce: it
 * dropped what it held after that round was drawn, so the round and
 * every earlier one are settled for it.  A nonce of another block (a
 * restarted server's, a forged prefix) is ignored.  Wakes writers as
 * lessons_lease_heard does.
 */
void lessons_lease_heard_nonce(lessons_lease_t *l, const char *name,
                               const unsigned char
                               nonce[LESSONS_LEASE_NONCE_LEN],
                               apr_interval_time_t now);

/* The same for a HOLD ACK: and when nonce names the newest round, which
 * asked for holds, name holds its drop until that round was drawn plus
 * LESSONS_LEASE_HELD (an older round's answer holds nothing: only the
 * newest round's drawing is kept).  1 when it moved name's hold later.
 */
int lessons_lease_heard_hold(lessons_lease_t *l, const char *name,
                             const unsigned char
                             nonce[LESSONS_LEASE_NONCE_LEN],
                             apr_interval_time_t now);

/* How long writes took on the lease after their commit (their check,
 * their round, or none), counted by the upper bounds of
 * lessons_lease_wait_bounds (microseconds, inclusive; the last count is
 * the rest): what the lease adds to a write, whatever else the machine
 * does.
 */
#define LESSONS_LEASE_WAIT_BUCKETS 7
extern const apr_interval_time_t
    lessons_lease_wait_bounds[LESSONS_LEASE_WAIT_BUCKETS - 1];

/* One write's time on the lease, counted. */
void lessons_lease_waited(lessons_lease_t *l, apr_interval_time_t waited);

/* ---------------------------------------------- for the metrics */

typedef struct {
    int valid;                      /* the lease is valid now */
    apr_uint32_t holder;            /* its pid, 0: none */
    int listening;
    lessons_lease_version_t version;
    apr_interval_time_t left;       /* until the lease ends */
    apr_interval_time_t run;        /* since its run began, 0: no run */
    int others;                     /* other servers with a lease in the
                                     * last list, -1: no list yet */
    apr_interval_time_t list_age;   /* since that list was asked for */
    apr_uint64_t alone_writes;      /* writes with no other lease listed */
    apr_uint64_t told_writes;       /* writes that sent INVALIDATEs */
    apr_uint64_t held_writes;       /* writes answered under holds */
    apr_uint64_t waits[LESSONS_LEASE_WAIT_BUCKETS];   /* by bound, not
                                                       * summed up */
    apr_interval_time_t waited;     /* their sum */
} lessons_lease_state_t;

void lessons_lease_state(lessons_lease_t *l, apr_interval_time_t now,
                         lessons_lease_state_t *st);

#endif /* LESSONS_LEASE_H */
