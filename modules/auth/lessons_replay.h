/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_replay.h: the DPoP proofs a server has seen (RFC 9449 11.1),
 * so that a proof is taken once.  A table in one block of shared memory,
 * made before the processes are forked, so that every process of the
 * server sees what the others took; another server has its own
 * (docs/identity-providers.md says what that means).  Each proof is
 * kept until it could no longer pass the iat window anyway (or its
 * nonce, where nonces are asked, if that ends first), and its slot is
 * then free again.
 *
 * The table is shared by every client, so one client must not fill it:
 * each proof is counted against its owner, and an owner that holds its
 * share of the slots has its own new proofs refused until some of them
 * are over, while every other owner is taken as before.
 *
 * The owner is the party the token names, never the proof's key: a
 * client makes keys for nothing, and with one bound token per key it
 * had a share per key (issue 55: 60 keys filled the table, and other
 * clients' proofs got 503).  What it cannot make for nothing is what the
 * identity provider signs: the caller (lessons_decide) names the owner
 * by who vouches for the token (its keys or introspection endpoint, so
 * that another section's provider cannot speak for this one's clients),
 * its issuer, its client (client_id, else azp) and its subject (sub).
 * Many keys and many tokens of one user of one client application are
 * one owner; another user, or another application, is another.  Owners
 * are grouped by who vouches for their tokens, and a group holds at most
 * a quarter of the table: on a shared server, a tenant whose own
 * provider signs whatever it likes (as many subjects as it wants) fills
 * its group's quarter, never the tenants' whose keys are others.  The
 * client alone would be coarser: every user of one public client (one
 * client_id in every copy of an app) would share one share, and one of
 * them could lock the others out.  The remote address is no owner
 * either: clients behind one proxy or NAT share one, and one client may
 * hold many (IPv6).
 *
 * The caller holds one lock around each check (a global mutex: the
 * processes of the server share the table); the unit knows memory and
 * time, not locks or httpd.
 */
#ifndef LESSONS_REPLAY_H
#define LESSONS_REPLAY_H

#include "apr_pools.h"
#include "apr_time.h"

#define LESSONS_REPLAY_KEY_LEN   16     /* bytes of a proof's key */
#define LESSONS_REPLAY_PROBES    32     /* slots a key may live in */
#define LESSONS_REPLAY_SHARE     16     /* the proofs of one owner hold
                                         * at most 1/16 of the slots */
#define LESSONS_REPLAY_GROUP_SHARE 4    /* ... and those of one group
                                         * (every token one key source or
                                         * introspection endpoint vouches
                                         * for) at most 1/4 */

typedef struct lessons_replay_t lessons_replay_t;

/* Bytes of a table of this many slots (at least LESSONS_REPLAY_PROBES). */
apr_size_t lessons_replay_size(int slots);

/* A table in mem (size bytes, from lessons_replay_size): emptied when
 * fresh is set or mem holds no table of that many slots, else the one
 * already there (a restart).  NULL when mem is NULL or too small.
 */
lessons_replay_t *lessons_replay_attach(void *mem, apr_size_t size,
                                        int slots, int fresh);

/* The proofs one owner may hold at once: slots / LESSONS_REPLAY_SHARE. */
int lessons_replay_share(const lessons_replay_t *t);

/* The key of a proof: its key's thumbprint and its jti (a SHA-256 over
 * both, cut to LESSONS_REPLAY_KEY_LEN bytes).  0, or -1.
 */
int lessons_replay_key(const char *jkt, const char *jti,
                       unsigned char key[LESSONS_REPLAY_KEY_LEN]);

/* The owner of a proof: the n names of the party its token was issued
 * to (NULL: absent), hashed (SHA-256, its first four bytes), which the
 * table counts proofs by.  0, or -1.
 */
int lessons_replay_owner(const char *const *names, int n,
                         apr_uint32_t *owner);

/* The group of a proof's owner: who vouches for its token (a key
 * source's or an introspection endpoint's name), hashed likewise.  0, or
 * -1.
 */
int lessons_replay_group(const char *voucher, apr_uint32_t *group);

typedef enum {
    LESSONS_REPLAY_NEW = 0,         /* not seen: kept until expires */
    LESSONS_REPLAY_SEEN,            /* seen, and still within its time */
    LESSONS_REPLAY_FULL,            /* not seen, but no room to keep it:
                                     * refuse it, it could come again */
    LESSONS_REPLAY_OVER_SHARE,      /* not seen, but its owner holds its
                                     * share already: refuse it (its
                                     * owner's older proofs are over
                                     * within the window) */
    LESSONS_REPLAY_OVER_GROUP       /* not seen, but its owner's group
                                     * holds its share: refuse it */
} lessons_replay_e;

/* Take a proof's key, for owner's token in group, at now, to be kept
 * until expires.  The caller holds the table's lock.
 */
lessons_replay_e lessons_replay_check_in(
    lessons_replay_t *t, const unsigned char key[LESSONS_REPLAY_KEY_LEN],
    apr_uint32_t owner, apr_uint32_t group, apr_time_t expires,
    apr_time_t now);

/* The same, each owner a group of its own. */
lessons_replay_e lessons_replay_check(
    lessons_replay_t *t, const unsigned char key[LESSONS_REPLAY_KEY_LEN],
    apr_uint32_t owner, apr_time_t expires, apr_time_t now);

#endif /* LESSONS_REPLAY_H */
