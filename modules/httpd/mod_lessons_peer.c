/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_peer.c: read leases' acknowledgements between the servers,
 * outside PostgreSQL (LessonsDBLeasePeer; docs/scaling.md, "Read
 * leases").  A PostgreSQL NOTIFY wakes every listening backend and every
 * holder, and each holder's catch-up is a statement and a NOTIFY of its
 * own; a datagram wakes the one server it is for.
 *
 * - The parent binds one UDP socket at the directive's address and keeps
 *   it across restarts (in the process pool, as httpd keeps listeners).
 * - Each child reads it in a thread of its own, waiting exclusively (a
 *   datagram wakes one of them): a RAISE for one of its leases, under
 *   that lease's key, raises the lease's installed version (as a writer
 *   raises its own) and is answered by an ACK, under the same key, when
 *   the version holds the one asked.
 * - A writer whose check listed servers with an address sends each a
 *   RAISE, again after 10, 20, 40 ms and on, and records their ACKs as heard
 *   acknowledgements in its block, where every write of the round
 *   waiting for the same check sees them.
 *
 * The datagrams' bytes are lessons_peer.c's.
 */

#include <errno.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apr_thread_proc.h"

#include "httpd/mod_lessons.h"
#include "store/lessons_peer.h"

/* A writer sends its RAISEs again after this, doubling up to the max. */
#define LESSONS_PEER_RESEND_MIN   apr_time_from_msec(10)
#define LESSONS_PEER_RESEND_MAX   apr_time_from_msec(80)
/* A child's reader looks at its stop flag this often (milliseconds). */
#define LESSONS_PEER_TICK_MS      200

/* An address as the directive and the rows give it: numeric only, so
 * that no write ever waits for a name lookup.  1 and *sa, or 0.
 */
static int lessons_peer_sockaddr(apr_pool_t *p, const char *addr,
                                 struct sockaddr_storage *sa,
                                 socklen_t *len)
{
    char *host = NULL, *scope = NULL;
    apr_port_t port = 0;

    memset(sa, 0, sizeof(*sa));
    if (!addr
        || apr_parse_addr_port(&host, &scope, &port, addr, p) != APR_SUCCESS
        || !host || scope || port == 0) {
        return 0;
    }
    if (strchr(host, ':')) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1
            || IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) {
            return 0;
        }
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        *len = sizeof(*in6);
        return 1;
    }
    else {
        struct sockaddr_in *in4 = (struct sockaddr_in *)sa;

        if (inet_pton(AF_INET, host, &in4->sin_addr) != 1
            || in4->sin_addr.s_addr == htonl(INADDR_ANY)) {
            return 0;
        }
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        *len = sizeof(*in4);
        return 1;
    }
}

const char *lessons_peer_check_address(apr_pool_t *p, const char *addr)
{
    struct sockaddr_storage sa;
    socklen_t len;

    return lessons_peer_sockaddr(p, addr, &sa, &len)
           ? NULL
           : "is not a numeric IPv4 ADDRESS:PORT or [IPv6]:PORT (the "
             "address other servers reach this one at: no name lookups, "
             "no wildcard)";
}

/* ------------------------------------------------------ the parent */

int lessons_peer_listen(apr_pool_t *pconf, server_rec *s, const char *addr)
{
    apr_pool_t *ppool = s->process->pool;
    const char *key = apr_pstrcat(pconf, "lessons_peer ", addr, NULL);
    struct sockaddr_storage sa;
    socklen_t len;
    void *kept = NULL;
    int fd, on = 1;

    (void)apr_pool_userdata_get(&kept, key, ppool);
    if (kept) {
        return *(int *)kept;
    }
    if (!lessons_peer_sockaddr(pconf, addr, &sa, &len)) {
        return -1;
    }
    fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0
        || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0
        || bind(fd, (struct sockaddr *)&sa, len) != 0) {
        int e = errno;

        if (fd >= 0) {
            close(fd);
        }
        ap_log_error(APLOG_MARK, APLOG_CRIT, e, s, LESSONSLOG(00787)
                     "LessonsDBLeasePeer: cannot bind UDP %s", addr);
        return -1;
    }
    /* Kept for the server's life: the next generation reads the same
     * socket, as httpd's listeners are kept across restarts.
     */
    kept = apr_pmemdup(ppool, &fd, sizeof(fd));
    apr_pool_userdata_set(kept, key, apr_pool_cleanup_null, ppool);
    return fd;
}

/* ------------------------------------------------------ the children */

typedef struct {
    const char *name;
    lessons_lease_t *block;
    const unsigned char *key;
    apr_file_t *bell;               /* rings its holder after a drop */
} lessons_peer_lease_t;

struct lessons_peer_child {
    int fd;
    apr_array_header_t *leases;     /* lessons_peer_lease_t */
    apr_thread_t *thread;
    volatile apr_uint32_t stop;
    server_rec *s;
};

lessons_peer_child_t *lessons_peer_child_make(apr_pool_t *pchild,
                                              server_rec *s, int fd)
{
    lessons_peer_child_t *pc = apr_pcalloc(pchild, sizeof(*pc));

    pc->fd = fd;
    pc->s = s;
    pc->leases = apr_array_make(pchild, 2, sizeof(lessons_peer_lease_t));
    return pc;
}

void lessons_peer_child_add(lessons_peer_child_t *pc, const char *name,
                            lessons_lease_t *block,
                            const unsigned char *key, apr_file_t *bell)
{
    lessons_peer_lease_t *l = apr_array_push(pc->leases);

    l->name = name;
    l->block = block;
    l->key = key;
    l->bell = bell;
}

/* An INVALIDATE of lease l: drop what it serves (its holder reads the
 * version again), then answer with its nonce; a HOLD holds the drop
 * too, from now on this server's clock, after the writer drew its
 * round.  Not answered when the drop failed: the writer waits this
 * server's lease out.
 */
static apr_size_t lessons_peer_invalidate(const lessons_peer_lease_t *l,
                                          const lessons_peer_msg_t *msg,
                                          char *out, apr_size_t outlen,
                                          int *ring)
{
    *ring = 0;
#if defined(LESSONS_BREAK_LEASE) && LESSONS_BREAK_LEASE == 3
    /* Broken on purpose (make lease-broken): answered, nothing dropped. */
#elif defined(LESSONS_BREAK_LEASE) && LESSONS_BREAK_LEASE == 5
    /* Broken on purpose (make lease-broken): a HOLD dropped, not held. */
    if (!lessons_lease_drop(l->block, ring)) {
        return 0;
    }
#else
    if (!(msg->kind == LESSONS_PEER_HOLD
          ? lessons_lease_hold_drop(l->block, lessons_lease_clock(), ring)
          : lessons_lease_drop(l->block, ring))) {
        return 0;
    }
#endif
    return lessons_peer_encode_nonce(out, outlen,
                                     msg->kind == LESSONS_PEER_HOLD
                                     ? LESSONS_PEER_HOLD_ACK
                                     : LESSONS_PEER_NONCE_ACK,
                                     l->name, msg->nonce, l->key);
}

/* A datagram named for another server: the answer to a renewal of
 * holds this server sent from its own socket (lessons_peer_renew),
 * checked with the key the lease's list gives that server.
 */
static void lessons_peer_heard(lessons_peer_child_t *pc, const char *buf,
                               apr_size_t n, const char *name)
{
    char peer[LESSONS_LEASE_PEER_MAX];
    unsigned char key[LESSONS_PEER_KEY_LEN];
    lessons_peer_msg_t msg;
    const char *sp;
    int i;

    for (i = 0; i < pc->leases->nelts; i++) {
        const lessons_peer_lease_t *l =
            &APR_ARRAY_IDX(pc->leases, i, lessons_peer_lease_t);

        if (!lessons_lease_listed_peer(l->block, name, peer)
            || !(sp = strchr(peer, ' '))
            || !lessons_peer_key_from_hex(sp + 1, key)
            || lessons_peer_decode(buf, n, key, &msg) != LESSONS_PEER_OK) {
            continue;
        }
        if (msg.kind == LESSONS_PEER_HOLD_ACK
            && lessons_lease_heard_hold(l->block, name, msg.nonce,
                                        lessons_lease_clock())) {
            ap_log_error(APLOG_MARK, APLOG_TRACE1, 0, pc->s,
                         LESSONSLOG(00800) "LessonsDBLeasePeer: %s "
                         "answered a renewal of its hold for %s: held "
                         "longer", name, l->name);
        }
        return;
    }
}

/* One datagram: a RAISE of one of this child's leases, answered. */
static void lessons_peer_answer(lessons_peer_child_t *pc, const char *buf,
                                apr_size_t n,
                                const struct sockaddr_storage *from,
                                socklen_t fromlen)
{
    char name[LESSONS_LEASE_NAME_MAX], out[LESSONS_PEER_MAX];
    const lessons_peer_lease_t *l = NULL;
    lessons_peer_msg_t msg;
    apr_size_t len;
    int i;

    if (!lessons_peer_name(buf, n, name)) {
        return;
    }
    for (i = 0; i < pc->leases->nelts; i++) {
        const lessons_peer_lease_t *c =
            &APR_ARRAY_IDX(pc->leases, i, lessons_peer_lease_t);

        if (strcmp(c->name, name) == 0) {
            l = c;
            break;
        }
    }
    /* An answer to this server's renewal, another generation's lease
     * (a restart under way: the sender sends again), or not ours at
     * all.
     */
    if (!l) {
        lessons_peer_heard(pc, buf, n, name);
        return;
    }
    if (lessons_peer_decode(buf, n, l->key, &msg) != LESSONS_PEER_OK
        || (msg.kind != LESSONS_PEER_RAISE
            && msg.kind != LESSONS_PEER_INVALIDATE
            && msg.kind != LESSONS_PEER_HOLD)) {
        ap_log_error(APLOG_MARK, APLOG_DEBUG, 0, pc->s, LESSONSLOG(00789)
                     "LessonsDBLeasePeer: a datagram for %s refused: not "
                     "a writer's, made with its key", l->name);
        return;
    }
    if (msg.kind == LESSONS_PEER_INVALIDATE || msg.kind == LESSONS_PEER_HOLD) {
        int ring;

        len = lessons_peer_invalidate(l, &msg, out, sizeof(out), &ring);
        if (len > 0) {
            (void)sendto(pc->fd, out, len, MSG_DONTWAIT,
                         (const struct sockaddr *)from, fromlen);
        }
        /* The holder's read of the version comes 10 ms later anyway:
         * waking it after the answer keeps it off the writer's wait.
         */
        if (ring && l->bell) {
            apr_size_t one = 1;

            (void)apr_file_write(l->bell, "d", &one);
        }
        return;
    }
    /* Another epoch, or no lease: no answer (the writer waits this
     * server's lease out, as it does for a paused one).
     */
#if defined(LESSONS_BREAK_LEASE) && LESSONS_BREAK_LEASE == 3
    /* Broken on purpose (make lease-broken): an ACK, nothing raised. */
#else
    if (!lessons_lease_raise(l->block, &msg.version)) {
        return;
    }
#endif
    len = lessons_peer_encode(out, sizeof(out), LESSONS_PEER_ACK, l->name,
                              &msg.version, l->key);
    if (len > 0) {
        (void)sendto(pc->fd, out, len, MSG_DONTWAIT,
                     (const struct sockaddr *)from, fromlen);
    }
}

/* An epoll descriptor that waits on fd as one of its exclusive waiters,
 * or -1.
 */
static int lessons_peer_exclusive_wait(int fd)
{
#ifdef EPOLLEXCLUSIVE
    struct epoll_event ev;
    int ep = epoll_create1(EPOLL_CLOEXEC);

    if (ep < 0) {
        return -1;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.fd = fd;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(ep);
        return -1;
    }
    return ep;
#else
    (void)fd;
    return -1;
#endif
}

static void *APR_THREAD_FUNC lessons_peer_thread(apr_thread_t *thread,
                                                 void *data)
{
    lessons_peer_child_t *pc = data;
    char buf[LESSONS_PEER_MAX + 1];
    int ep;

    (void)thread;
    /* Every child waits on the one socket.  poll() would wake them all
     * for each datagram, and all but one would find nothing; an
     * exclusive epoll wait wakes one.  Without it (a kernel before
     * 4.5), poll.
     */
    ep = lessons_peer_exclusive_wait(pc->fd);
    while (!apr_atomic_read32(&pc->stop)) {
        int k;

        if (ep >= 0) {
            struct epoll_event ev;

            if (epoll_wait(ep, &ev, 1, LESSONS_PEER_TICK_MS) <= 0) {
                continue;
            }
        }
        else {
            struct pollfd pfd = { pc->fd, POLLIN, 0 };

            if (poll(&pfd, 1, LESSONS_PEER_TICK_MS) <= 0) {
                continue;
            }
        }
        /* Every child reads the one socket: another may have taken it. */
        for (k = 0; k < 64; k++) {
            struct sockaddr_storage from;
            socklen_t fromlen = sizeof(from);
            ssize_t n = recvfrom(pc->fd, buf, sizeof(buf), MSG_DONTWAIT,
                                 (struct sockaddr *)&from, &fromlen);

            if (n < 0) {
                break;
            }
            if (n > 0 && n <= LESSONS_PEER_MAX) {
                lessons_peer_answer(pc, buf, (apr_size_t)n, &from, fromlen);
            }
        }
    }
    if (ep >= 0) {
        close(ep);
    }
    return NULL;
}

static apr_status_t lessons_peer_child_stop(void *data)
{
    lessons_peer_child_t *pc = data;
    apr_status_t rv;

    apr_atomic_set32(&pc->stop, 1);
    if (pc->thread) {
        (void)apr_thread_join(&rv, pc->thread);
        pc->thread = NULL;
    }
    return APR_SUCCESS;
}

apr_status_t lessons_peer_child_start(apr_pool_t *pchild,
                                      lessons_peer_child_t *pc)
{
    apr_status_t rv;

    if (pc->leases->nelts == 0) {
        return APR_SUCCESS;
    }
    rv = apr_thread_create(&pc->thread, NULL, lessons_peer_thread, pc,
                           pchild);
    if (rv == APR_SUCCESS) {
        apr_pool_pre_cleanup_register(pchild, pc, lessons_peer_child_stop);
    }
    return rv;
}

/* ------------------------------------------------------ the writers */

typedef struct {
    const char *name;
    struct sockaddr_storage sa;
    socklen_t len;
    unsigned char key[LESSONS_PEER_KEY_LEN];
    char raise[LESSONS_PEER_MAX];   /* the datagram, made once */
    apr_size_t raise_len;
    char hold[LESSONS_PEER_MAX];    /* a round's HOLD, sent first; 0:
                                     * none */
    apr_size_t hold_len;
    int done;                       /* acknowledged (a HOLD, if sent) */
} lessons_peer_target_t;

struct lessons_peer_round {
    const lessons_lease_check_t *chk;
    const unsigned char *nonce;     /* INVALIDATEs' (chk->round's), or
                                     * NULL: RAISEs of chk's version */
    lessons_peer_target_t *targets;
    int n;
    int fd4, fd6;
    apr_interval_time_t resend_at;
    apr_interval_time_t resend;
};

/* "ADDRESS:PORT KEY" of a row: 1 and t, or 0. */
static int lessons_peer_target(apr_pool_t *p, const lessons_lease_row_t *row,
                               lessons_peer_target_t *t)
{
    const char *sp = strchr(row->peer, ' ');

    if (!sp || sp == row->peer
        || !lessons_peer_key_from_hex(sp + 1, t->key)
        || !lessons_peer_sockaddr(p, apr_pstrmemdup(p, row->peer,
                                                    (apr_size_t)(sp
                                                                 - row->peer)),
                                  &t->sa, &t->len)) {
        return 0;
    }
    t->name = row->name;
    t->done = 0;
    return 1;
}

static void lessons_peer_round_close(lessons_peer_round_t *round)
{
    if (round->fd4 >= 0) {
        close(round->fd4);
        round->fd4 = -1;
    }
    if (round->fd6 >= 0) {
        close(round->fd6);
        round->fd6 = -1;
    }
}

static apr_status_t lessons_peer_round_cleanup(void *data)
{
    lessons_peer_round_close(data);
    return APR_SUCCESS;
}

int lessons_peer_round_needs_notify(const lessons_lease_check_t *chk,
                                    const char *self)
{
    int i;

    for (i = 0; i < chk->nrows && i < LESSONS_LEASE_ROWS; i++) {
        const lessons_lease_row_t *row = &chk->rows[i];

        if (!row->peer[0] && strcmp(row->name, self) != 0
            && !lessons_lease_covers(&row->acked, &chk->version)) {
            return 1;
        }
    }
    return 0;
}

/* Send every RAISE not acknowledged yet. */
static void lessons_peer_round_send(lessons_peer_round_t *round)
{
    int i;

    for (i = 0; i < round->n; i++) {
        lessons_peer_target_t *t = &round->targets[i];
        int fd = t->sa.ss_family == AF_INET6 ? round->fd6 : round->fd4;

        if (!t->done && fd >= 0) {
            if (t->hold_len > 0) {
                (void)sendto(fd, t->hold, t->hold_len, MSG_DONTWAIT,
                             (struct sockaddr *)&t->sa, t->len);
            }
            (void)sendto(fd, t->raise, t->raise_len, MSG_DONTWAIT,
                         (struct sockaddr *)&t->sa, t->len);
        }
    }
}

lessons_peer_round_t *lessons_peer_round_start(apr_pool_t *p,
                                               const char *self,
                                               const lessons_lease_check_t
                                               *chk,
                                               const unsigned char *nonce)
{
    lessons_peer_round_t *round = apr_pcalloc(p, sizeof(*round));
    int i;

    round->chk = chk;
    round->nonce = nonce;
    round->fd4 = round->fd6 = -1;
    round->targets = apr_pcalloc(p, sizeof(*round->targets)
                                    * (chk->nrows > 0 ? chk->nrows : 1));
    for (i = 0; i < chk->nrows && i < LESSONS_LEASE_ROWS; i++) {
        const lessons_lease_row_t *row = &chk->rows[i];
        lessons_peer_target_t *t = &round->targets[round->n];
        int *fd;

        /* A version acknowledged settles a RAISE, never an
         * INVALIDATE.
         */
        if (!row->peer[0] || strcmp(row->name, self) == 0
            || (!nonce && lessons_lease_covers(&row->acked, &chk->version))
            || !lessons_peer_target(p, row, t)) {
            continue;
        }
        t->raise_len = nonce
            ? lessons_peer_encode_nonce(t->raise, sizeof(t->raise),
                                        LESSONS_PEER_INVALIDATE, t->name,
                                        nonce, t->key)
            : lessons_peer_encode(t->raise, sizeof(t->raise),
                                  LESSONS_PEER_RAISE, t->name,
                                  &chk->version, t->key);
        /* Holds asked: a HOLD first, answered before the INVALIDATE by
         * a server that knows them, refused by one that does not.
         */
        t->hold_len = nonce && chk->hold
            ? lessons_peer_encode_nonce(t->hold, sizeof(t->hold),
                                        LESSONS_PEER_HOLD, t->name, nonce,
                                        t->key)
            : 0;
        if (t->raise_len == 0) {
            continue;
        }
        fd = t->sa.ss_family == AF_INET6 ? &round->fd6 : &round->fd4;
        if (*fd < 0) {
            *fd = socket(t->sa.ss_family,
                         SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            if (*fd >= 0 && round->n == 0) {
                apr_pool_cleanup_register(p, round,
                                          lessons_peer_round_cleanup,
                                          apr_pool_cleanup_null);
            }
        }
        /* No socket (out of descriptors): that server is waited for as
         * one that does not answer.
         */
        if (*fd >= 0) {
            round->n++;
        }
    }
    if (round->n == 0) {
        return NULL;
    }
    lessons_peer_round_send(round);
    round->resend = LESSONS_PEER_RESEND_MIN;
    round->resend_at = lessons_lease_clock() + round->resend;
    return round;
}

/* The ACKs that came: each one of a target, under its key, holding the
 * check's version, heard as an acknowledgement (the block wakes every
 * write of the round).
 */
static void lessons_peer_round_read(lessons_peer_round_t *round, int fd,
                                    lessons_lease_t *block)
{
    char buf[LESSONS_PEER_MAX + 1];
    char name[LESSONS_LEASE_NAME_MAX];
    ssize_t n;

    while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        lessons_peer_msg_t msg;
        int i;

        if (n > LESSONS_PEER_MAX
            || !lessons_peer_name(buf, (apr_size_t)n, name)) {
            continue;
        }
        for (i = 0; i < round->n; i++) {
            lessons_peer_target_t *t = &round->targets[i];

            if (strcmp(t->name, name) != 0) {
                continue;
            }
            if (lessons_peer_decode(buf, (apr_size_t)n, t->key, &msg)
                != LESSONS_PEER_OK) {
                break;
            }
            if (!round->nonce && msg.kind == LESSONS_PEER_ACK
                && lessons_lease_covers(&msg.version, &round->chk->version)) {
                t->done = 1;
                lessons_lease_heard(block, t->name, 0, &msg.version,
                                    lessons_lease_clock());
            }
            /* The block takes this round's answer or a later round's
             * (any writer's of this server); this socket hears only
             * this round's.
             */
            else if (round->nonce && msg.kind == LESSONS_PEER_NONCE_ACK) {
                lessons_lease_heard_nonce(block, t->name, msg.nonce,
                                          lessons_lease_clock());
                /* A round with holds sends its HOLDs until they are
                 * answered (a server that knows none is waited for by
                 * its INVALIDATE's answer, in the block).
                 */
                t->done |= t->hold_len == 0
                           && memcmp(msg.nonce, round->nonce,
                                     LESSONS_PEER_NONCE_LEN) == 0;
            }
            else if (round->nonce && msg.kind == LESSONS_PEER_HOLD_ACK) {
                (void)lessons_lease_heard_hold(block, t->name, msg.nonce,
                                               lessons_lease_clock());
                t->done |= memcmp(msg.nonce, round->nonce,
                                  LESSONS_PEER_NONCE_LEN) == 0;
            }
            break;
        }
    }
}

int lessons_peer_renew(apr_pool_t *p, int fd, const char *self,
                       const lessons_lease_check_t *chk,
                       const unsigned char *nonce)
{
    lessons_peer_target_t t;
    int i, sent = 0;

    for (i = 0; i < chk->nrows && i < LESSONS_LEASE_ROWS; i++) {
        const lessons_lease_row_t *row = &chk->rows[i];

        if (!row->peer[0] || strcmp(row->name, self) == 0
            || !lessons_peer_target(p, row, &t)) {
            continue;
        }
        t.hold_len = lessons_peer_encode_nonce(t.hold, sizeof(t.hold),
                                               LESSONS_PEER_HOLD, t.name,
                                               nonce, t.key);
        /* Not sent (another address family than this server's socket,
         * a full buffer): that server's hold runs out, and the write
         * after that draws a round and waits for it.
         */
        if (t.hold_len > 0
            && sendto(fd, t.hold, t.hold_len, MSG_DONTWAIT,
                      (struct sockaddr *)&t.sa, t.len)
               == (ssize_t)t.hold_len) {
            sent++;
        }
    }
    return sent;
}

int lessons_peer_round_answered(const lessons_peer_round_t *round)
{
    int i, n = 0;

    for (i = 0; i < round->n; i++) {
        n += round->targets[i].done;
    }
    return n;
}

void lessons_peer_round_wait(lessons_peer_round_t *round,
                             lessons_lease_t *block, apr_uint32_t bell,
                             apr_interval_time_t until)
{
    apr_interval_time_t now = lessons_lease_clock(), end;
    struct pollfd pfd[2];
    int nfd = 0, ms, i, pending = 0;

    for (i = 0; i < round->n; i++) {
        pending |= !round->targets[i].done;
    }
    /* Every datagram answered: what is left is heard by the holder (a
     * server reached by NOTIFY) or waited out.
     */
    if (!pending) {
        lessons_lease_sleep(block, bell, until);
        return;
    }
    if (now >= round->resend_at) {
        lessons_peer_round_send(round);
        round->resend = round->resend * 2 < LESSONS_PEER_RESEND_MAX
                        ? round->resend * 2 : LESSONS_PEER_RESEND_MAX;
        round->resend_at = now + round->resend;
    }
    end = until > 0 && until < round->resend_at ? until : round->resend_at;
    ms = end > now ? (int)((end - now + 999) / 1000) : 0;
    if (round->fd4 >= 0) {
        pfd[nfd].fd = round->fd4;
        pfd[nfd].events = POLLIN;
        pfd[nfd++].revents = 0;
    }
    if (round->fd6 >= 0) {
        pfd[nfd].fd = round->fd6;
        pfd[nfd].events = POLLIN;
        pfd[nfd++].revents = 0;
    }
    if (nfd == 0 || poll(pfd, (nfds_t)nfd, ms) <= 0) {
        return;
    }
    for (i = 0; i < nfd; i++) {
        if (pfd[i].revents & POLLIN) {
            lessons_peer_round_read(round, pfd[i].fd, block);
        }
    }
}
