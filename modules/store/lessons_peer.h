/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_peer.h: the datagrams read leases' servers send each other
 * (issue 56, docs/scaling.md "Read leases", "Next: acknowledgements
 * between the servers"), without sockets: their bytes only.
 *
 * - RAISE, writer to receiver: raise lease NAME to VERSION.
 * - ACK, receiver to writer: lease NAME holds VERSION now.
 * - INVALIDATE, writer to receiver: lease NAME stops serving what it
 *   holds now, for a write whose version the writer has not read
 *   (docs/scaling.md, "The check off the write's path", step 3).
 * - NONCE ACK, receiver to writer: lease NAME did so for the INVALIDATE
 *   (or HOLD) that carried NONCE.
 * - HOLD, writer to receiver: an INVALIDATE that also asks lease NAME
 *   to hold its drop for LESSONS_LEASE_HOLD (lessons_lease_hold_drop).
 *   Sent before the round's INVALIDATE, not instead: a server that
 *   does not know holds refuses it and answers the INVALIDATE, so its
 *   writer neither waits it out nor takes its answer for a hold.
 * - HOLD ACK, receiver to writer: lease NAME did so for the HOLD that
 *   carried NONCE (and so dropped too, as for the INVALIDATE).
 *
 * NAME is the receiver's lease (its row in lessons_leases) in both, and
 * both carry an HMAC-SHA256 under that lease's key (random, 256 bits,
 * recorded in the row): only a reader of lessons_leases can make one.
 * The kind is under the tag, so a RAISE sent back is no ACK.
 *
 * On the wire, a line of text and the tag's 32 bytes:
 *
 *     LP1 <R|A> <name> <sum> <epoch>\n<tag>
 *     LP1 <I|N|H|O> <name> <nonce>\n<tag>
 *
 * name and epoch are 1 or more printable ASCII characters (no space, no
 * control), as long as their arrays of lessons_lease.h allow; sum is a
 * decimal int64 >= 0, without sign or leading zero: one version, one
 * line; nonce is 16 random bytes in 32 lower-case hex digits.  Replays
 * need nothing here: a raise never lowers a version, an ACK holding a
 * version was made after it existed, an INVALIDATE (or a HOLD, for a
 * hold's length) only makes a server read the version again, and a
 * NONCE ACK was made after its nonce was drawn (the writer's, at
 * random: an old one settles no new write, and holds only from its own
 * round's drawing).
 */
#ifndef LESSONS_PEER_H
#define LESSONS_PEER_H

#include "apr.h"

#include "store/lessons_lease.h"

#define LESSONS_PEER_KEY_LEN   32       /* a lease's key, in bytes */
#define LESSONS_PEER_KEY_HEX   64       /* in hex, without its NUL */
#define LESSONS_PEER_TAG_LEN   32       /* HMAC-SHA256 */
#define LESSONS_PEER_MAX      512       /* a datagram's bytes at most */
#define LESSONS_PEER_NONCE_LEN LESSONS_LEASE_NONCE_LEN

typedef enum {
    LESSONS_PEER_RAISE,
    LESSONS_PEER_ACK,
    LESSONS_PEER_INVALIDATE,
    LESSONS_PEER_NONCE_ACK,
    LESSONS_PEER_HOLD,
    LESSONS_PEER_HOLD_ACK
} lessons_peer_kind_e;

typedef enum {
    LESSONS_PEER_OK,
    LESSONS_PEER_MALFORMED,     /* not a datagram of ours: its length,
                                 * or (under a good tag) its fields */
    LESSONS_PEER_BAD_TAG,       /* not made with this key, or changed */
    LESSONS_PEER_FAILED         /* OpenSSL failed: nothing is known */
} lessons_peer_status_e;

typedef struct {
    lessons_peer_kind_e kind;
    char name[LESSONS_LEASE_NAME_MAX];
    lessons_lease_version_t version;    /* RAISE, ACK; else zeroes */
    unsigned char nonce[LESSONS_PEER_NONCE_LEN];    /* INVALIDATE, NONCE
                                                     * ACK, HOLD, HOLD
                                                     * ACK; else zeroes */
} lessons_peer_msg_t;

/* The datagram saying kind (RAISE or ACK) of lease name at v, under
 * key, into out (outlen bytes; not NUL-terminated): its length, or 0
 * when it does not fit or a field is not as above.
 */
apr_size_t lessons_peer_encode(char *out, apr_size_t outlen,
                               lessons_peer_kind_e kind, const char *name,
                               const lessons_lease_version_t *v,
                               const unsigned char key[LESSONS_PEER_KEY_LEN]);

/* The same for kind INVALIDATE, NONCE ACK, HOLD or HOLD ACK, carrying
 * nonce.
 */
apr_size_t lessons_peer_encode_nonce(char *out, apr_size_t outlen,
                                     lessons_peer_kind_e kind,
                                     const char *name,
                                     const unsigned char
                                     nonce[LESSONS_PEER_NONCE_LEN],
                                     const unsigned char
                                     key[LESSONS_PEER_KEY_LEN]);

/* The len bytes at in, checked against key before any field is read:
 * LESSONS_PEER_OK and *out, or another status (*out untouched; a NULL
 * argument is LESSONS_PEER_MALFORMED).
 */
lessons_peer_status_e lessons_peer_decode(const char *in, apr_size_t len,
                                          const unsigned char
                                          key[LESSONS_PEER_KEY_LEN],
                                          lessons_peer_msg_t *out);

/* The lease a datagram names, read before it is checked, to choose the
 * key to check it with: 1 and name, or 0.  UNTRUSTED: anyone may send
 * any name; only lessons_peer_decode's LESSONS_PEER_OK vouches for it.
 */
int lessons_peer_name(const char *in, apr_size_t len,
                      char name[LESSONS_LEASE_NAME_MAX]);

/* A key as its row stores it: 64 lower-case hex digits and a NUL.  1,
 * or 0 (a NULL argument).
 */
int lessons_peer_key_hex(const unsigned char key[LESSONS_PEER_KEY_LEN],
                         char hex[LESSONS_PEER_KEY_HEX + 1]);

/* The key of hex, exactly 64 lower-case hex digits then its NUL: 1 and
 * key, or 0 (key untouched).
 */
int lessons_peer_key_from_hex(const char *hex,
                              unsigned char key[LESSONS_PEER_KEY_LEN]);

#endif /* LESSONS_PEER_H */
