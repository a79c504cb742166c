/*
 * tls-load: make bench's load client for the certificate-bound row
 * (t/bench/token-rows.sh).  What wrk does there, with a TLS client
 * certificate, which wrk cannot send (nor h2load or httperf; siege can,
 * but stalls near 1,500 requests a second here at any concurrency, and
 * a client on libcurl's multi interface spent 2.5 times wrk's CPU per
 * request on the CPUs the server shares): GETs of one URL on CONNS
 * keep-alive connections for SECONDS, one thread, epoll and OpenSSL.
 *
 *   tls-load URL SECONDS CONNS CERT KEY CAFILE [[-H] HEADER...]
 *   tls-load --count WARM N ZERO DUMP URL CERT KEY CAFILE [[-H] HEADER...]
 *
 * URL is https://IPv4:PORT/PATH; a -H before a header is skipped (wrk's
 * arguments, as t/bench/bench.sh's wrk_run passes them).  Answers must
 * carry Content-Length (the module's and httpd's static ones do).
 * Prints the lines of wrk's report that t/bench/bench.sh's parse_wrk
 * reads (the 50% and 99% latencies, "N requests in", "Non-2xx or 3xx
 * responses", "Socket errors", "Requests/sec") and the connections it
 * opened: CONNS when
 * every request after a connection's first went on a kept one.  As in
 * wrk, requests still running at the end are not counted, and a
 * connection the server closes is opened again (and counted).
 *
 * With --count, make bench's callgrind measure over TLS: WARM requests
 * on one connection, the shell command ZERO, N more on the same
 * connection, the command DUMP (callgrind_control -z and -d), so that
 * no handshake is counted; every answer must be a 2xx.
 */
#define _GNU_SOURCE            /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 16384

typedef struct {
    int fd;
    SSL *ssl;
    int handshaken;
    size_t sent;                /* bytes of the request written */
    char head[HEAD_MAX];        /* the answer's head as it comes */
    size_t head_len;
    long body_left;             /* -1: still in the head */
    int status;
    double t0;                  /* when the request was begun */
} conn_t;

static SSL_CTX *ctx;
static struct sockaddr_in addr;
static char *request;
static size_t request_len;
static int ep;
static unsigned long connects, done, bad, errors, bytes;
static long *lat;
static size_t nlat, cap;
static const char *why;         /* why step() gave a connection up */
static unsigned long limit;     /* --count: answers to stop at */

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;

    return x < y ? -1 : x > y;
}

static void die(const char *what)
{
    fprintf(stderr, "tls-load: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static void watch(conn_t *c, unsigned int events, int op)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.ptr = c;
    if (epoll_ctl(ep, op, c->fd, &ev) != 0) {
        die("epoll_ctl");
    }
}

static void open_conn(conn_t *c)
{
    int one = 1;

    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
        die("socket");
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) != 0
        && errno != EINPROGRESS) {
        die("connect");
    }
    c->ssl = SSL_new(ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
        die("SSL_new");
    }
    SSL_set_connect_state(c->ssl);
    c->handshaken = 0;
    c->sent = 0;
    c->head_len = 0;
    c->body_left = -1;
    connects++;
    watch(c, EPOLLOUT, EPOLL_CTL_ADD);
}

static void close_conn(conn_t *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    SSL_free(c->ssl);
    close(c->fd);
}

/* The head is whole: its status and Content-Length. */
static int parse_head(conn_t *c, size_t end)
{
    char *p = c->head, *stop = c->head + end, *line;

    if (end < 12 || strncmp(p, "HTTP/1.1 ", 9) != 0) {
        return -1;
    }
    c->status = atoi(p + 9);
    c->body_left = -1;
    for (line = memchr(p, '\n', end); line && line + 1 < stop;
         line = memchr(line + 1, '\n', (size_t)(stop - line - 1))) {
        if ((size_t)(stop - line - 1) > 15
            && strncasecmp(line + 1, "Content-Length:", 15) == 0) {
            c->body_left = strtol(line + 16, NULL, 10);
        }
    }
    return c->body_left < 0 ? -1 : 0;
}

/* Runs a connection until OpenSSL wants the socket; 0, or -1 when the
 * connection is done for (closed, or an answer it cannot read).
 */
static int step(conn_t *c, double end)
{
    char buf[16384];
    int n, err;

    for (;;) {
        if (!c->handshaken) {
            n = SSL_do_handshake(c->ssl);
            if (n == 1) {
                c->handshaken = 1;
                c->t0 = now_s();
                continue;
            }
        }
        else if (c->sent < request_len) {
            n = SSL_write(c->ssl, request + c->sent,
                          (int)(request_len - c->sent));
            if (n > 0) {
                c->sent += (size_t)n;
                continue;
            }
        }
        else {
            n = SSL_read(c->ssl, buf, sizeof(buf));
            if (n > 0) {
                size_t off = 0, len = (size_t)n;
                char *eoh;

                bytes += (unsigned long)n;
                if (c->body_left < 0) {
                    if (c->head_len + len > sizeof(c->head)) {
                        why = "an answer's head over 16 KiB";
                        return -1;
                    }
                    memcpy(c->head + c->head_len, buf, len);
                    c->head_len += len;
                    eoh = memmem(c->head, c->head_len, "\r\n\r\n", 4);
                    if (!eoh) {
                        continue;
                    }
                    off = (size_t)(eoh + 4 - c->head);
                    if (parse_head(c, off) != 0) {
                        why = "an answer without Content-Length";
                        return -1;
                    }
                    c->body_left -= (long)(c->head_len - off);
                }
                else {
                    c->body_left -= (long)len;
                }
                if (c->body_left > 0) {
                    continue;
                }
                if (c->body_left < 0) {
                    why = "more bytes than one answer";
                    return -1;
                }
                /* An answer: counted if it came in time; the next. */
                if (now_s() < end) {
                    if (nlat == cap) {
                        long *grown;

                        cap = cap ? cap * 2 : 65536;
                        grown = realloc(lat, cap * sizeof(*lat));
                        if (!grown) {
                            die("out of memory");
                        }
                        lat = grown;
                    }
                    lat[nlat++] = (long)((now_s() - c->t0) * 1e6);
                    done++;
                    if (c->status < 200 || c->status >= 400) {
                        bad++;
                    }
                }
                c->sent = 0;
                c->head_len = 0;
                c->body_left = -1;
                c->t0 = now_s();
                if (limit && done >= limit) {
                    return 0;           /* the next one when told */
                }
                continue;
            }
        }
        err = SSL_get_error(c->ssl, n);
        if (err == SSL_ERROR_WANT_READ) {
            watch(c, EPOLLIN, EPOLL_CTL_MOD);
            return 0;
        }
        if (err == SSL_ERROR_WANT_WRITE) {
            watch(c, EPOLLOUT, EPOLL_CTL_MOD);
            return 0;
        }
        why = err == SSL_ERROR_ZERO_RETURN ? "closed by the server"
              : err == SSL_ERROR_SYSCALL ? "closed or reset"
              : c->handshaken ? "a TLS error" : "the TLS handshake failed";
        return -1;
    }
}

/* Connections until the end, or until --count's answers are in. */
static void run(double end)
{
    struct epoll_event evs[256];
    int i, n;

    while (now_s() < end && !(limit && done >= limit)) {
        int wait_ms = (int)((end - now_s()) * 1000) + 1;

        n = epoll_wait(ep, evs, 256, wait_ms > 100 ? 100 : wait_ms);
        if (n < 0 && errno != EINTR) {
            die("epoll_wait");
        }
        for (i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;

            if (step(c, end) != 0) {
                if (now_s() < end) {
                    /* The first few said, as they come. */
                    if (errors++ < 5) {
                        fprintf(stderr, "tls-load: a connection ended: %s "
                                "(after %lu bytes of its answer)\n", why,
                                (unsigned long)c->head_len);
                        ERR_print_errors_fp(stderr);
                    }
                }
                close_conn(c);
                open_conn(c);
            }
        }
    }
}

/* --count's phases: every answer in, all 2xx, on one connection. */
static void count_phase(conn_t *c, unsigned long upto, const char *cmd)
{
    limit = upto;
    if (done && step(c, now_s() + 600) != 0) {
        die("the connection ended between the phases");
    }
    run(now_s() + 600);
    if (done != upto || bad || errors || connects != 1) {
        fprintf(stderr, "tls-load: %lu answers (%lu not 2xx), %lu errors, "
                "%lu connections\n", done, bad, errors, connects);
        die("--count: not every answer a 2xx on one connection");
    }
    if (system(cmd) != 0) {
        fprintf(stderr, "tls-load: %s\n", cmd);
        die("--count: the command failed");
    }
}

int main(int argc, char **argv)
{
    conn_t *conns;
    long secs = 600, nconns = 1, warm = 0, count = 0;
    const char *url, *certf, *keyf, *caf, *zero = NULL, *dump = NULL;
    const char *host, *colon, *path;
    char hostbuf[64];
    size_t hl;
    double start, end;
    int i, first;

    if (argc >= 10 && strcmp(argv[1], "--count") == 0) {
        warm = strtol(argv[2], NULL, 10);
        count = strtol(argv[3], NULL, 10);
        zero = argv[4];
        dump = argv[5];
        url = argv[6];
        first = 7;
        if (warm < 1 || count < 1 || warm > 1000000 || count > 1000000) {
            fprintf(stderr, "tls-load: WARM and N 1-1000000\n");
            return 2;
        }
    }
    else if (argc >= 7 && strcmp(argv[1], "--count") != 0) {
        url = argv[1];
        secs = strtol(argv[2], NULL, 10);
        nconns = strtol(argv[3], NULL, 10);
        first = 4;
        if (secs < 1 || secs > 3600 || nconns < 1 || nconns > 1000) {
            fprintf(stderr, "tls-load: SECONDS 1-3600, CONNS 1-1000\n");
            return 2;
        }
    }
    else {
        fprintf(stderr, "usage: %s URL SECONDS CONNS CERT KEY CAFILE "
                "[[-H] HEADER...]\n"
                "       %s --count WARM N ZERO DUMP URL CERT KEY CAFILE "
                "[[-H] HEADER...]\n", argv[0], argv[0]);
        return 2;
    }
    certf = argv[first];
    keyf = argv[first + 1];
    caf = argv[first + 2];
    first += 3;
    if (strncmp(url, "https://", 8) != 0) {
        die("the URL must be https://IPv4:PORT/PATH");
    }
    host = url + 8;
    colon = strchr(host, ':');
    path = strchr(host, '/');
    if (!colon || !path || colon > path
        || (size_t)(colon - host) >= sizeof(hostbuf)) {
        die("the URL must be https://IPv4:PORT/PATH");
    }
    memcpy(hostbuf, host, (size_t)(colon - host));
    hostbuf[colon - host] = '\0';
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(colon + 1));
    if (inet_pton(AF_INET, hostbuf, &addr.sin_addr) != 1) {
        die("the URL's host must be an IPv4 address");
    }

    /* The request, once: wrk's (Host, the headers given). */
    hl = strlen(path) + (size_t)(path - host) + 64;
    for (i = first; i < argc; i++) {
        hl += strlen(argv[i]) + 2;
    }
    /* After snprintf's bytes counted: a longer request is refused. */
    request = malloc(hl);
    if (!request) {
        die("out of memory");
    }
    request_len = (size_t)snprintf(request, hl,
                                   "GET %s HTTP/1.1\r\nHost: %.*s\r\n",
                                   path, (int)(path - host), host);
    for (i = first; i < argc && request_len < hl; i++) {
        if (strcmp(argv[i], "-H") == 0) {
            continue;
        }
        request_len += (size_t)snprintf(request + request_len,
                                        hl - request_len, "%s\r\n", argv[i]);
    }
    if (request_len >= hl) {
        die("request too long");
    }
    request_len += (size_t)snprintf(request + request_len, hl - request_len,
                                    "\r\n");
    if (request_len >= hl) {
        die("request too long");
    }

    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx
        || SSL_CTX_use_certificate_chain_file(ctx, certf) != 1
        || SSL_CTX_use_PrivateKey_file(ctx, keyf, SSL_FILETYPE_PEM) != 1
        || SSL_CTX_load_verify_locations(ctx, caf, NULL) != 1) {
        die("the certificate, key or CA file");
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);

    ep = epoll_create1(0);
    conns = calloc((size_t)nconns, sizeof(*conns));
    if (ep < 0 || !conns) {
        die("epoll_create1");
    }
    for (i = 0; i < nconns; i++) {
        open_conn(&conns[i]);
    }
    if (zero) {
        count_phase(&conns[0], (unsigned long)warm, zero);
        count_phase(&conns[0], (unsigned long)(warm + count), dump);
        printf("%ld requests on one connection after %ld, all 2xx\n",
               count, warm);
        close_conn(&conns[0]);
        free(conns);
        return 0;
    }
    start = now_s();
    end = start + (double)secs;
    run(end);
    if (nlat) {
        qsort(lat, nlat, sizeof(*lat), cmp_long);
    }
    printf("Running %lds test @ %s\n", secs, url);
    printf("  1 threads and %ld connections (tls-load, client certificate)\n",
           nconns);
    printf("  Latency Distribution\n");
    if (nlat) {
        printf("     50%%    %.2fms\n", lat[nlat / 2] / 1000.0);
        printf("     99%%    %.2fms\n", lat[(nlat * 99) / 100] / 1000.0);
    }
    printf("  %lu requests in %.2fs, %.2fMB read\n", done, (double)secs,
           bytes / 1048576.0);
    if (bad) {
        printf("  Non-2xx or 3xx responses: %lu\n", bad);
    }
    if (errors) {
        printf("  Socket errors: connect 0, read %lu, write 0, timeout 0\n",
               errors);
    }
    printf("Requests/sec: %.2f\n", done / (double)secs);
    printf("Connections opened: %lu\n", connects);
    for (i = 0; i < nconns; i++) {
        close_conn(&conns[i]);
    }
    free(conns);
    free(lat);
    free(request);
    SSL_CTX_free(ctx);
    return 0;
}
