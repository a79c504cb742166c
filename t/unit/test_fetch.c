/* Licensed under the Apache License, Version 2.0.
 *
 * test_fetch.c: lessons_fetch_check_url, lessons_fetch_get and _post against
 * lessons_fetch.h.  The fetches are real: a small HTTP server runs in a
 * thread on loopback (two ports, and 127.0.0.2 when it can be bound), and
 * the TLS cases run `openssl s_server -WWW` with a throw-away CA made by
 * openssl in a temporary directory (skipped when openssl is missing).
 * Any listener also plays an outgoing proxy: it takes CONNECT host:port,
 * counts it, and serves the tunnelled request itself when the target is
 * one of its own ports, or relays the bytes (to s_server) otherwise.
 * Every wait is bounded; nothing asserts how long anything took.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"

#include "keys/lessons_fetch.h"
#include "keys/lessons_key.h"

#include "unit_pool.h"

#define CAP        1024         /* body cap of most cases */
#define OK_BODY    "{\"keys\":[]}"

/* ------------------------------------------------ the loopback server */

enum { L_MAIN, L_OTHER, L_HOST2, L_MAX };

static struct {
    int fd[L_MAX];              /* -1 when absent */
    int port[L_MAX];
    int hits[L_MAX];            /* requests answered on each listener */
    char last_req[2048];        /* the last request's head */
    char last_body[2048];       /* the last POST's body */
    int connects[L_MAX];        /* CONNECTs taken on each listener */
    char last_connect[300];     /* the last CONNECT's host:port */
    int refuse_connect;         /* answer CONNECT with 403 */
    int stop[2];                /* pipe: the thread ends when readable */
    pthread_t thread;
    pthread_mutex_t lock;
} srv = { .fd = { -1, -1, -1 } };

static int closed_port;         /* bound, never listening: refused */
static int closed_fd = -1;

static int listen_on(const char *addr, int port, int listen_too, int *out)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, addr, &sa.sin_addr);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0
        || (listen_too && listen(fd, 16) != 0)
        || getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    *out = ntohs(sa.sin_port);
    return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, const char *status, const char *extra,
                    const char *body, size_t n, int with_length)
{
    char head[512];
    int hn;

    hn = snprintf(head, sizeof(head), "HTTP/1.1 %s\r\n%s"
                  "Content-Type: application/json\r\nConnection: close\r\n",
                  status, extra ? extra : "");
    send_all(fd, head, (size_t)hn);
    if (with_length) {
        hn = snprintf(head, sizeof(head), "Content-Length: %zu\r\n", n);
        send_all(fd, head, (size_t)hn);
    }
    send_all(fd, "\r\n", 2);
    send_all(fd, body, n);
}

static void redirect(int fd, const char *status, const char *location)
{
    char extra[400];

    snprintf(extra, sizeof(extra), "Location: %s\r\n", location);
    respond(fd, status, extra, "moved", 5, 1);
}

static void serve(int fd, int which);

/* Bytes both ways between a and b until either closes (or 5 s of
 * silence). */
static void relay(int a, int b)
{
    char buf[4096];

    for (;;) {
        struct pollfd pf[2] = { { .fd = a, .events = POLLIN },
                                { .fd = b, .events = POLLIN } };
        int i;

        if (poll(pf, 2, 5000) <= 0)
            return;
        for (i = 0; i < 2; i++) {
            if (pf[i].revents) {
                ssize_t r = recv(pf[i].fd, buf, sizeof(buf), 0);

                if (r <= 0)
                    return;
                send_all(i == 0 ? b : a, buf, (size_t)r);
            }
        }
    }
}

/* CONNECT host:port as a proxy does it, and what goes through. */
static void tunnel(int fd, int which, const char *target)
{
    struct sockaddr_in sa;
    int port = 0, i, up;

    pthread_mutex_lock(&srv.lock);
    srv.connects[which]++;
    apr_cpystrn(srv.last_connect, target, sizeof(srv.last_connect));
    pthread_mutex_unlock(&srv.lock);
    if (srv.refuse_connect) {
        respond(fd, "403 Forbidden", NULL, "no", 2, 1);
        return;
    }
    if (sscanf(target, "127.0.0.1:%d", &port) != 1) {
        respond(fd, "502 Bad Gateway", NULL, "no", 2, 1);
        return;
    }
    send_all(fd, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
    /* One of ours: this thread answers it (it cannot also accept),
     * counted as the proxy's, so that the server's own count shows what
     * came straight to it. */
    for (i = 0; i < L_MAX; i++) {
        if (srv.fd[i] >= 0 && srv.port[i] == port && i != L_HOST2) {
            serve(fd, which);
            return;
        }
    }
    up = socket(AF_INET, SOCK_STREAM, 0);
    if (up < 0)
        return;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(up, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        relay(fd, up);
    close(up);
}

/* Read the request head (bounded in size and time) and answer by path. */
static void serve(int fd, int which)
{
    char req[2048], path[256], loc[300];
    size_t n = 0;
    struct pollfd pf = { .fd = fd, .events = POLLIN };

    while (n < sizeof(req) - 1 && !memmem(req, n, "\r\n\r\n", 4)) {
        ssize_t r;

        if (poll(&pf, 1, 2000) <= 0)
            return;
        r = recv(fd, req + n, sizeof(req) - 1 - n, 0);
        if (r <= 0)
            return;
        n += (size_t)r;
    }
    req[n] = '\0';
    if (sscanf(req, "CONNECT %255s ", path) == 1) {
        tunnel(fd, which, path);
        return;
    }
    if (sscanf(req, "GET %255s ", path) != 1) {
        /* A POST's body: what came after the head, and the rest of its
         * Content-Length (bounded by last_body).
         */
        const char *end = memmem(req, n, "\r\n\r\n", 4), *cl;
        size_t have, want = 0;

        if (sscanf(req, "POST %255s ", path) != 1 || !end)
            return;
        end += 4;
        cl = strstr(req, "\r\nContent-Length: ");
        if (cl)
            want = (size_t)strtoul(cl + 18, NULL, 10);
        if (want >= sizeof(srv.last_body))
            want = sizeof(srv.last_body) - 1;
        have = n - (size_t)(end - req);
        if (have > want)
            have = want;
        pthread_mutex_lock(&srv.lock);
        memcpy(srv.last_body, end, have);
        while (have < want && poll(&pf, 1, 2000) > 0) {
            ssize_t r = recv(fd, srv.last_body + have, want - have, 0);

            if (r <= 0)
                break;
            have += (size_t)r;
        }
        srv.last_body[have] = '\0';
        pthread_mutex_unlock(&srv.lock);
    }

    pthread_mutex_lock(&srv.lock);
    srv.hits[which]++;
    memcpy(srv.last_req, req, n + 1);
    pthread_mutex_unlock(&srv.lock);

    if (strcmp(path, "/ok") == 0) {
        respond(fd, "200 OK", NULL, OK_BODY, strlen(OK_BODY), 1);
    }
    else if (strcmp(path, "/empty") == 0) {
        respond(fd, "200 OK", NULL, "", 0, 1);
    }
    else if (strcmp(path, "/missing") == 0) {
        respond(fd, "404 Not Found", NULL, "{}", 2, 1);
    }
    else if (strcmp(path, "/refused") == 0) {
        static const char e[] = "{\"error\":\"unsupported_token_type\"}";

        respond(fd, "400 Bad Request", NULL, e, sizeof(e) - 1, 1);
    }
    else if (strcmp(path, "/refused-hostile") == 0) {
        static const char e[] = "{\"error\":\"bad\\nline\"}";

        respond(fd, "400 Bad Request", NULL, e, sizeof(e) - 1, 1);
    }
    else if (strcmp(path, "/exact") == 0 || strcmp(path, "/big") == 0
             || strcmp(path, "/big-nolen") == 0) {
        /* /exact is the cap itself; the others pass it, with and without
         * a Content-Length to refuse early. */
        static char big[5 * CAP];
        size_t len = strcmp(path, "/exact") == 0 ? CAP : sizeof(big);

        memset(big, 'x', sizeof(big));
        respond(fd, "200 OK", NULL, big, len, strcmp(path, "/big-nolen") != 0);
    }
    else if (strcmp(path, "/slow") == 0) {
        /* Say nothing until the client gives up (or 5 s pass). */
        poll(&pf, 1, 5000);
    }
    else if (strncmp(path, "/redir/", 7) == 0) {
        int left = atoi(path + 7);

        if (left <= 0) {
            respond(fd, "200 OK", NULL, "done", 4, 1);
        }
        else {
            snprintf(loc, sizeof(loc), "/redir/%d", left - 1);
            redirect(fd, left % 2 ? "302 Found" : "307 Temporary Redirect", loc);
        }
    }
    else if (strcmp(path, "/abs") == 0) {
        snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/ok", srv.port[L_MAIN]);
        redirect(fd, "301 Moved Permanently", loc);
    }
    else if (strcmp(path, "/other-port") == 0) {
        snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/ok", srv.port[L_OTHER]);
        redirect(fd, "302 Found", loc);
    }
    else if (strcmp(path, "/other-host") == 0) {
        snprintf(loc, sizeof(loc), "http://127.0.0.2:%d/ok", srv.port[L_MAIN]);
        redirect(fd, "302 Found", loc);
    }
    else if (strcmp(path, "/other-name") == 0) {
        snprintf(loc, sizeof(loc), "http://localhost:%d/ok", srv.port[L_MAIN]);
        redirect(fd, "302 Found", loc);
    }
    else if (strcmp(path, "/other-scheme") == 0) {
        snprintf(loc, sizeof(loc), "https://127.0.0.1:%d/ok", srv.port[L_MAIN]);
        redirect(fd, "302 Found", loc);
    }
    else if (strcmp(path, "/userinfo") == 0) {
        snprintf(loc, sizeof(loc), "http://u:secretpw@127.0.0.1:%d/ok",
                 srv.port[L_MAIN]);
        redirect(fd, "302 Found", loc);
    }
    else if (strcmp(path, "/no-location") == 0) {
        respond(fd, "302 Found", NULL, "moved", 5, 1);
    }
    else {
        respond(fd, "500 Internal Server Error", NULL, "{}", 2, 1);
    }
}

static void *server_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pf[L_MAX + 1];
        int i, which[L_MAX], n = 0;

        for (i = 0; i < L_MAX; i++) {
            if (srv.fd[i] >= 0) {
                pf[n].fd = srv.fd[i];
                pf[n].events = POLLIN;
                which[n++] = i;
            }
        }
        pf[n].fd = srv.stop[0];
        pf[n].events = POLLIN;
        if (poll(pf, (nfds_t)n + 1, -1) < 0 && errno != EINTR)
            return NULL;
        if (pf[n].revents)
            return NULL;
        for (i = 0; i < n; i++) {
            if (pf[i].revents & POLLIN) {
                int c = accept(pf[i].fd, NULL, NULL);

                if (c >= 0) {
                    serve(c, which[i]);
                    close(c);
                }
            }
        }
    }
}

static int hits(int which)
{
    int n;

    pthread_mutex_lock(&srv.lock);
    n = srv.hits[which];
    pthread_mutex_unlock(&srv.lock);
    return n;
}

static const char *url(int which, const char *path)
{
    return apr_psprintf(pool, "http://%s:%d%s",
                        which == L_HOST2 ? "127.0.0.2" : "127.0.0.1",
                        srv.port[which], path);
}

/* ---------------------------------------- TLS: openssl s_server -WWW */

static char tls_dir[64];
static int tls_ok;              /* all of it made and both servers up */
static pid_t tls_pid[2] = { -1, -1 };
static int tls_port[2];         /* [0]: cert for 127.0.0.1, [1]: wrong name */

static int sh(const char *cmd)
{
    int rc = system(cmd);

    return rc == 0 ? 0 : -1;
}

/* Start s_server in tls_dir with cert NAME, read its port from the
 * "ACCEPT host:port" line it prints (10 s at most). */
static pid_t start_s_server(const char *name, int *port)
{
    /* Made before fork: the child of a threaded process only execs. */
    const char *out = apr_psprintf(pool, "%s/%s.out", tls_dir, name);
    const char *crt = apr_psprintf(pool, "%s.crt", name);
    const char *key = apr_psprintf(pool, "%s.key", name);
    pid_t pid;
    int i;

    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        if (fd < 0 || chdir(tls_dir) != 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("openssl", "openssl", "s_server", "-accept", "127.0.0.1:0",
               "-cert", crt, "-key", key,
               "-WWW", (char *)NULL);
        _exit(127);
    }
    for (i = 0; i < 100; i++) {
        FILE *f = fopen(out, "r");
        char line[256];

        while (f && fgets(line, sizeof(line), f)) {
            if (sscanf(line, "ACCEPT 127.0.0.1:%d", port) == 1 && *port > 0) {
                fclose(f);
                return pid;
            }
        }
        if (f)
            fclose(f);
        usleep(100 * 1000);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return -1;
}

static void tls_setup(void)
{
    const char *d, *cmd;
    FILE *f;

    apr_cpystrn(tls_dir, "/tmp/test_fetch.XXXXXX", sizeof(tls_dir));
    if (sh("command -v openssl >/dev/null 2>&1") != 0 || !mkdtemp(tls_dir))
        return;
    d = tls_dir;
    /* A CA, a server certificate for 127.0.0.1 and one for another name,
     * both signed by the CA. */
    cmd = apr_psprintf(pool,
        "cd %s && exec >openssl.log 2>&1 && "
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        "  -keyout ca.key -out ca.crt -subj /CN=test-fetch-ca -days 2 && "
        "for n in good wrong; do "
        "  if [ $n = good ]; then san=IP:127.0.0.1,DNS:localhost; "
        "  else san=DNS:wrong.example; fi; "
        "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        "    -keyout $n.key -out $n.csr -subj /CN=$n && "
        "  printf 'subjectAltName=%%s\\n' $san > $n.ext && "
        "  openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key "
        "    -CAcreateserial -days 2 -extfile $n.ext -out $n.crt || exit 1; "
        "done && "
        /* Another CA, which signed nothing the servers show, and a
         * system CA directory that trusts the test CA (hash link and
         * bundle, as Debian's /etc/ssl/certs). */
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        "  -keyout other.key -out other.crt -subj /CN=other-ca -days 2 && "
        "mkdir sys && cp ca.crt sys/test-ca.pem && "
        "cp ca.crt sys/ca-certificates.crt && "
        "ln -s test-ca.pem sys/$(openssl x509 -hash -noout -in ca.crt).0", d);
    if (sh(cmd) != 0)
        return;
    f = fopen(apr_psprintf(pool, "%s/jwks.json", d), "w");
    if (!f)
        return;
    fputs(OK_BODY, f);
    fclose(f);
    tls_pid[0] = start_s_server("good", &tls_port[0]);
    tls_pid[1] = start_s_server("wrong", &tls_port[1]);
    tls_ok = tls_pid[0] > 0 && tls_pid[1] > 0;
}

static void tls_teardown(void)
{
    int i;

    for (i = 0; i < 2; i++) {
        if (tls_pid[i] > 0) {
            kill(tls_pid[i], SIGTERM);
            waitpid(tls_pid[i], NULL, 0);
        }
    }
    if (tls_dir[0] && strstr(tls_dir, "/tmp/test_fetch.") == tls_dir) {
        sh(apr_psprintf(pool, "rm -rf '%s'", tls_dir));
    }
}

/* -------------------------------------------------------------- group */

static int group_setup(void **state)
{
    static const char *proxies[] = { "http_proxy", "https_proxy",
        "HTTPS_PROXY", "all_proxy", "ALL_PROXY" };
    size_t i;

    (void)state;
    if (unit_pool_open() != 0 || lessons_fetch_global_init() != NULL)
        return -1;
    /* The fetches go straight to loopback whatever the environment. */
    for (i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
        unsetenv(proxies[i]);
    pthread_mutex_init(&srv.lock, NULL);
    srv.fd[L_MAIN] = listen_on("127.0.0.1", 0, 1, &srv.port[L_MAIN]);
    srv.fd[L_OTHER] = listen_on("127.0.0.1", 0, 1, &srv.port[L_OTHER]);
    /* Same port on another loopback address: a redirect there would be
     * answered if it were followed.  Not every system has 127.0.0.2. */
    srv.fd[L_HOST2] = listen_on("127.0.0.2", srv.port[L_MAIN], 1,
                                &srv.port[L_HOST2]);
    closed_fd = listen_on("127.0.0.1", 0, 0, &closed_port);
    if (srv.fd[L_MAIN] < 0 || srv.fd[L_OTHER] < 0 || closed_fd < 0
        || pipe(srv.stop) != 0
        || pthread_create(&srv.thread, NULL, server_main, NULL) != 0)
        return -1;
    tls_setup();
    return 0;
}

static int group_teardown_all(void **state)
{
    int i;

    if (write(srv.stop[1], "x", 1) == 1)
        pthread_join(srv.thread, NULL);
    for (i = 0; i < L_MAX; i++)
        if (srv.fd[i] >= 0)
            close(srv.fd[i]);
    if (closed_fd >= 0)
        close(closed_fd);
    tls_teardown();
    return group_teardown(state);
}

/* Options of most cases: http allowed (loopback), short limits. */
static lessons_fetch_opts_t opts_for(const char *u)
{
    lessons_fetch_opts_t o;

    memset(&o, 0, sizeof(o));
    o.url = u;
    o.connect_timeout_ms = 2000;
    o.total_timeout_ms = 5000;
    o.max_bytes = CAP;
    o.max_redirects = 3;
    o.allow_http = 1;
    return o;
}

static const char *get(const lessons_fetch_opts_t *o, char **body,
                       apr_size_t *len)
{
    return lessons_fetch_get(pool, o, body, len);
}

#define assert_has(s, sub) do { \
        const char *s_ = (s); \
        if (s_ == NULL || strstr(s_, (sub)) == NULL) \
            fail_msg("\"%s\" does not contain \"%s\"", s_ ? s_ : "(null)", (sub)); \
    } while (0)

/* ---------------------------------------------------------- check_url */

static void test_check_url_good(void **state)
{
    (void)state;
    assert_null(lessons_fetch_check_url(pool, "https://idp.example/jwks", 0));
    assert_null(lessons_fetch_check_url(pool, "HTTPS://idp.example/jwks", 0));
    assert_null(lessons_fetch_check_url(pool, "https://idp.example:8443/a/b?x=1", 0));
    assert_null(lessons_fetch_check_url(pool, "https://[::1]:8443/jwks", 0));
    assert_null(lessons_fetch_check_url(pool, "https://127.0.0.1/jwks", 0));
    assert_null(lessons_fetch_check_url(pool, "http://127.0.0.1:8080/jwks", 1));
    assert_null(lessons_fetch_check_url(pool, "https://idp.example/jwks", 1));
}

static void test_check_url_bad(void **state)
{
    const char *e;

    (void)state;
    assert_has(lessons_fetch_check_url(pool, "http://idp.example/jwks", 0),
               "https");
    assert_has(lessons_fetch_check_url(pool, "ftp://idp.example/jwks", 1),
               "scheme");
    assert_has(lessons_fetch_check_url(pool, "file:///etc/passwd", 1),
               "scheme");
    assert_non_null(lessons_fetch_check_url(pool, "idp.example/jwks", 0));
    assert_non_null(lessons_fetch_check_url(pool, "//idp.example/jwks", 0));
    assert_non_null(lessons_fetch_check_url(pool, "", 0));
    assert_non_null(lessons_fetch_check_url(pool, NULL, 0));
    assert_non_null(lessons_fetch_check_url(pool, "https:///jwks", 0));
    assert_non_null(lessons_fetch_check_url(pool, "https:/idp.example/jwks", 0));
    assert_non_null(lessons_fetch_check_url(pool, "https:idp.example/jwks", 0));
    assert_non_null(lessons_fetch_check_url(pool, "https://", 0));
    assert_non_null(lessons_fetch_check_url(pool, "https://idp example/", 0));
    assert_non_null(lessons_fetch_check_url(pool, "https://idp.example:99999/", 0));
    /* User info is refused, and the message does not repeat it. */
    e = lessons_fetch_check_url(pool, "https://admin:s3cret@idp.example/jwks", 0);
    assert_has(e, "user");
    assert_null(strstr(e, "s3cret"));
    assert_has(lessons_fetch_check_url(pool, "https://admin@idp.example/jwks", 0),
               "user");
    assert_has(lessons_fetch_check_url(pool, "https://:pw@idp.example/jwks", 0),
               "user");
}

/* --------------------------------------------------------- plain HTTP */

static void test_get_ok(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL;
    apr_size_t len = 0;
    char head[2048];

    (void)state;
    assert_null(get(&o, &body, &len));
    assert_int_equal(len, strlen(OK_BODY));
    assert_string_equal(body, OK_BODY);
    pthread_mutex_lock(&srv.lock);
    apr_cpystrn(head, srv.last_req, sizeof(head));
    pthread_mutex_unlock(&srv.lock);
    assert_has(head, "GET /ok HTTP/1.1\r\n");
    assert_has(head, "\r\nUser-Agent: mod_lessons\r\n");
    assert_has(head, "\r\nAccept: application/jwk-set+json, application/json\r\n");
}

/* A POST (introspection's): the form as the body, its type, the
 * credentials, no Expect; the answer as a GET's.
 */
static void test_post_ok(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    const char *form = "token=abc%2B&token_type_hint=access_token";
    char *body = NULL;
    apr_size_t len = 0;
    long status = 0;
    char head[2048], sent[2048];

    (void)state;
    o.max_redirects = 0;
    assert_null(lessons_fetch_post(pool, &o, form, strlen(form),
                                   "Basic Yzpz", &body, &len, &status));
    assert_int_equal(status, 200);
    assert_string_equal(body, OK_BODY);
    pthread_mutex_lock(&srv.lock);
    apr_cpystrn(head, srv.last_req, sizeof(head));
    apr_cpystrn(sent, srv.last_body, sizeof(sent));
    pthread_mutex_unlock(&srv.lock);
    assert_has(head, "POST /ok HTTP/1.1\r\n");
    assert_has(head, "\r\nAuthorization: Basic Yzpz\r\n");
    assert_has(head, "\r\nContent-Type: application/x-www-form-urlencoded"
                     "\r\n");
    assert_has(head, "\r\nAccept: application/json\r\n");
    assert_null(strstr(head, "Expect:"));
    assert_string_equal(sent, form);
}

/* A POST follows no redirect: asked to, it is refused before any
 * request; a redirect answered is an error, the credentials never sent
 * to the Location.
 */
static void test_post_no_redirect(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/abs"));
    char *body = NULL;
    apr_size_t len = 0;
    long status = 0;
    int before;

    (void)state;
    assert_non_null(lessons_fetch_post(pool, &o, "token=a", 7, "Basic Yzpz",
                                       &body, &len, &status));
    assert_int_equal(status, 0);
    o.max_redirects = 0;
    pthread_mutex_lock(&srv.lock);
    before = srv.hits[L_MAIN];
    pthread_mutex_unlock(&srv.lock);
    assert_has(lessons_fetch_post(pool, &o, "token=a", 7, "Basic Yzpz",
                                  &body, &len, &status), "301");
    assert_int_equal(status, 301);
    assert_null(body);
    pthread_mutex_lock(&srv.lock);
    assert_int_equal(srv.hits[L_MAIN], before + 1);
    pthread_mutex_unlock(&srv.lock);
}

/* An empty 200 is the empty text (the keys' parser then refuses it),
 * never NULL.
 */
static void test_get_empty(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/empty"));
    char *body = NULL;
    apr_size_t len = 7;

    (void)state;
    assert_null(get(&o, &body, &len));
    assert_non_null(body);
    assert_string_equal(body, "");
    assert_int_equal(len, 0);
}

static void test_get_status(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/missing"));
    char *body = NULL;
    apr_size_t len = 7;

    (void)state;
    assert_has(get(&o, &body, &len), "404");
    assert_null(body);
    assert_int_equal(len, 0);
    o.url = url(L_MAIN, "/no-such-route");
    assert_has(get(&o, &body, &len), "500");
}

/* An error answer's own code (RFC 6749 5.2's "error") is named, as the
 * provider said it; one that is not short printable text is left out.
 */
static void test_get_error_code(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/refused"));
    char *body = NULL;
    apr_size_t len = 0;
    const char *err;

    (void)state;
    err = get(&o, &body, &len);
    assert_non_null(err);
    assert_string_equal(err, "HTTP status 400, not 200 "
                             "(error \"unsupported_token_type\")");
    assert_null(body);
    o.url = url(L_MAIN, "/refused-hostile");
    assert_string_equal(get(&o, &body, &len), "HTTP status 400, not 200");
    o.url = url(L_MAIN, "/missing");          /* JSON, no error member */
    assert_string_equal(get(&o, &body, &len), "HTTP status 404, not 200");
}

/* The status answered, for a caller that tries another URL on a 404 but
 * not when the server cannot be reached at all.
 */
static void test_get_ex_status(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/missing"));
    char *body = NULL;
    apr_size_t len = 0;
    long status = -1;

    (void)state;
    assert_has(lessons_fetch_get_ex(pool, &o, &body, &len, &status), "404");
    assert_int_equal(status, 404);
    o.url = url(L_MAIN, "/ok");
    assert_null(lessons_fetch_get_ex(pool, &o, &body, &len, &status));
    assert_int_equal(status, 200);
    assert_string_equal(body, OK_BODY);
    o.url = apr_psprintf(pool, "http://127.0.0.1:%d/ok", closed_port);
    status = -1;
    assert_non_null(lessons_fetch_get_ex(pool, &o, &body, &len, &status));
    assert_int_equal(status, 0);
}

static void test_get_size_cap(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/exact"));
    char *body = NULL;
    apr_size_t len = 0;

    (void)state;
    /* The cap itself is allowed, and NUL-terminated. */
    assert_null(get(&o, &body, &len));
    assert_int_equal(len, CAP);
    assert_int_equal(body[CAP], '\0');
    assert_int_equal(strlen(body), CAP);
    /* One byte less is not. */
    o.max_bytes = CAP - 1;
    assert_has(get(&o, &body, &len), "larger than 1023 bytes");
    assert_null(body);
    /* A Content-Length over the cap, and a body without one. */
    o.max_bytes = CAP;
    o.url = url(L_MAIN, "/big");
    assert_has(get(&o, &body, &len), "larger than 1024 bytes");
    o.url = url(L_MAIN, "/big-nolen");
    assert_has(get(&o, &body, &len), "larger than 1024 bytes");
    assert_null(body);
}

static void test_get_timeout(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/slow"));
    char *body = NULL;
    apr_size_t len = 0;

    (void)state;
    o.connect_timeout_ms = 300;
    o.total_timeout_ms = 300;
    assert_has(get(&o, &body, &len), "timed out");
    assert_null(body);
}

static void test_get_refused(void **state)
{
    lessons_fetch_opts_t o;
    char *body = NULL;
    apr_size_t len = 0;

    (void)state;
    o = opts_for(apr_psprintf(pool, "http://127.0.0.1:%d/ok", closed_port));
    assert_non_null(get(&o, &body, &len));
    assert_null(body);
}

static void test_get_http_not_allowed(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL;
    apr_size_t len = 0;
    int before = hits(L_MAIN);

    (void)state;
    o.allow_http = 0;
    assert_has(get(&o, &body, &len), "https");
    assert_null(body);
    assert_int_equal(hits(L_MAIN), before);
}

static void test_get_bad_opts(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL;
    apr_size_t len = 0;

    (void)state;
    o.total_timeout_ms = 0;
    assert_non_null(get(&o, &body, &len));
    o = opts_for(url(L_MAIN, "/ok"));
    o.max_bytes = 0;
    assert_non_null(get(&o, &body, &len));
    o = opts_for("https://u:p@127.0.0.1/ok");
    assert_has(get(&o, &body, &len), "user");
    assert_null(body);
}

/* ---------------------------------------------------------- redirects */

static void test_redirect_same_origin(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/redir/3"));
    char *body = NULL;
    apr_size_t len = 0;
    int before = hits(L_MAIN);

    (void)state;
    /* Relative Locations, 302 and 307, exactly max_redirects of them. */
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, "done");
    assert_int_equal(hits(L_MAIN), before + 4);
    /* An absolute Location naming the same origin. */
    o.url = url(L_MAIN, "/abs");
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, OK_BODY);
}

static void test_redirect_too_many(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/redir/4"));
    char *body = NULL;
    apr_size_t len = 0;
    int before = hits(L_MAIN);

    (void)state;
    assert_has(get(&o, &body, &len), "more than 3 redirects");
    assert_null(body);
    assert_int_equal(hits(L_MAIN), before + 4);
    o.max_redirects = 0;
    o.url = url(L_MAIN, "/redir/1");
    assert_has(get(&o, &body, &len), "more than 0 redirects");
}

static void test_redirect_other_port(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/other-port"));
    char *body = NULL;
    apr_size_t len = 0;
    int before = hits(L_OTHER);

    (void)state;
    /* The other port answers 200 on /ok: only the rule stops it. */
    assert_has(get(&o, &body, &len), "another origin");
    assert_null(body);
    assert_int_equal(hits(L_OTHER), before);
    o.url = url(L_OTHER, "/ok");
    assert_null(get(&o, &body, &len));
    assert_int_equal(hits(L_OTHER), before + 1);
}

static void test_redirect_other_host(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/other-host"));
    char *body = NULL;
    apr_size_t len = 0;
    int before = hits(L_HOST2);

    (void)state;
    assert_has(get(&o, &body, &len), "another origin");
    assert_has(get(&o, &body, &len), "127.0.0.2");
    assert_null(body);
    assert_int_equal(hits(L_HOST2), before);
    /* The same address under another name is another origin too. */
    o.url = url(L_MAIN, "/other-name");
    assert_has(get(&o, &body, &len), "another origin");
    if (srv.fd[L_HOST2] >= 0) {
        /* Reachable: the refusal above was the rule, not the network. */
        o.url = url(L_HOST2, "/ok");
        assert_null(get(&o, &body, &len));
        assert_int_equal(hits(L_HOST2), before + 1);
    }
}

static void test_redirect_other_scheme(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/other-scheme"));
    char *body = NULL;
    apr_size_t len = 0;
    const char *e;

    (void)state;
    assert_has(get(&o, &body, &len), "another origin");
    /* User info in a Location is refused without being repeated. */
    o.url = url(L_MAIN, "/userinfo");
    e = get(&o, &body, &len);
    assert_has(e, "user");
    assert_null(strstr(e, "secretpw"));
    o.url = url(L_MAIN, "/no-location");
    assert_has(get(&o, &body, &len), "302");
    assert_null(body);
}

/* ---------------------------------------------------------------- TLS */

/* A file's bytes, for ca_pem. */
static const char *slurp(const char *path, apr_size_t *len)
{
    const char *data = NULL;

    *len = 0;
    if (lessons_file_read(pool, path, "CA file", 1 << 20, &data, len))
        return NULL;
    return data;
}

static void test_ca_check(void **state)
{
    apr_size_t len = 0;
    const char *pem;
    int n = -1;

    (void)state;
    if (!tls_ok) {
        skip();
    }
    pem = slurp(apr_psprintf(pool, "%s/ca.crt", tls_dir), &len);
    assert_null(lessons_fetch_ca_check(pool, pem, len, &n));
    assert_int_equal(n, 1);
    /* two: a bundle */
    pem = apr_pstrcat(pool, pem, slurp(apr_psprintf(pool, "%s/other.crt",
                                                    tls_dir), &len), NULL);
    assert_null(lessons_fetch_ca_check(pool, pem, strlen(pem), &n));
    assert_int_equal(n, 2);
    /* no certificate: a key, text, nothing */
    pem = slurp(apr_psprintf(pool, "%s/ca.key", tls_dir), &len);
    assert_has(lessons_fetch_ca_check(pool, pem, len, &n), "no certificate");
    assert_int_equal(n, 0);
    assert_has(lessons_fetch_ca_check(pool, "hello", 5, &n), "no certificate");
    assert_non_null(lessons_fetch_ca_check(pool, "", 0, &n));
    assert_non_null(lessons_fetch_ca_check(pool, NULL, 0, &n));
    /* a damaged certificate */
    assert_non_null(lessons_fetch_ca_check(pool,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        60, &n));
}

/* With a CA given, exactly that CA is trusted: not libcurl's built-in
 * bundle and directory (/etc/ssl/certs, here made to trust the test CA
 * in a private mount namespace of a child process, so nothing on the
 * machine changes), not OpenSSL's SSL_CERT_FILE / SSL_CERT_DIR, and no
 * proxy from the environment.  Needs root (for the mount): skipped
 * otherwise.
 */
static void test_tls_only_the_named_ca(void **state)
{
    const char *url, *other, *good;
    apr_size_t other_len = 0, good_len = 0;
    pid_t pid;
    int status = -1;

    (void)state;
    if (!tls_ok || geteuid() != 0) {
        print_message("needs root and openssl s_server: skipped\n");
        skip();
    }
    url = apr_psprintf(pool, "https://127.0.0.1:%d/jwks.json", tls_port[0]);
    other = slurp(apr_psprintf(pool, "%s/other.crt", tls_dir), &other_len);
    good = slurp(apr_psprintf(pool, "%s/ca.crt", tls_dir), &good_len);
    assert_non_null(other);
    assert_non_null(good);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lessons_fetch_opts_t o = opts_for(url);
        char *body = NULL;
        apr_size_t len = 0;
        int rc = 0;

        if (unshare(CLONE_NEWNS) != 0
            || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
            || mount(apr_psprintf(pool, "%s/sys", tls_dir), "/etc/ssl/certs",
                     NULL, MS_BIND, NULL) != 0) {
            _exit(3);
        }
        setenv("SSL_CERT_FILE", apr_psprintf(pool, "%s/ca.crt", tls_dir), 1);
        setenv("SSL_CERT_DIR", apr_psprintf(pool, "%s/sys", tls_dir), 1);
        setenv("CURL_CA_BUNDLE", apr_psprintf(pool, "%s/ca.crt", tls_dir), 1);
        /* a proxy that would refuse the connection, were it used */
        setenv("https_proxy", apr_psprintf(pool, "http://127.0.0.1:%d",
                                           closed_port), 1);
        o.allow_http = 0;
        /* The system's store now trusts the test CA: without a CA given,
         * the fetch succeeds (so the namespace works, and no proxy).
         */
        if (get(&o, &body, &len) != NULL)
            rc |= 1;
        /* With the other CA given, it must fail, whatever the system's
         * store and the environment say.
         */
        o.ca_pem = other;
        o.ca_len = other_len;
        if (get(&o, &body, &len) == NULL)
            rc |= 2;
        /* ... and with the right one, succeed */
        o.ca_pem = good;
        o.ca_len = good_len;
        if (get(&o, &body, &len) != NULL)
            rc |= 4;
        _exit(rc);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0)
        print_error("child: %d (1: system store, 2: the other CA trusted, "
                    "4: the right CA refused, 3: mount)\n",
                    WEXITSTATUS(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_tls(void **state)
{
    lessons_fetch_opts_t o;
    char *body = NULL;
    apr_size_t len = 0;
    const char *ca;
    apr_size_t ca_len = 0;

    (void)state;
    if (!tls_ok) {
        print_message("openssl s_server could not be started: TLS skipped\n");
        skip();
    }
    ca = slurp(apr_psprintf(pool, "%s/ca.crt", tls_dir), &ca_len);
    assert_non_null(ca);
    o = opts_for(apr_psprintf(pool, "https://127.0.0.1:%d/jwks.json",
                              tls_port[0]));
    o.allow_http = 0;
    o.ca_pem = ca;
    o.ca_len = ca_len;
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, OK_BODY);
    /* The system's CAs do not know the test CA. */
    o.ca_pem = NULL;
    o.ca_len = 0;
    assert_non_null(get(&o, &body, &len));
    assert_null(body);
    /* Text that holds no certificate trusts nothing. */
    o.ca_pem = "not a certificate";
    o.ca_len = strlen(o.ca_pem);
    assert_non_null(get(&o, &body, &len));
    /* A valid chain for another name. */
    o.ca_pem = ca;
    o.ca_len = ca_len;
    o.url = apr_psprintf(pool, "https://127.0.0.1:%d/jwks.json", tls_port[1]);
    assert_non_null(get(&o, &body, &len));
    assert_null(body);
    /* https to a plain HTTP server fails in the handshake. */
    o.url = apr_psprintf(pool, "https://127.0.0.1:%d/ok", srv.port[L_MAIN]);
    assert_non_null(get(&o, &body, &len));
}

/* -------------------------------------------------------------- proxy */

static int connects(int which, char *target, size_t size)
{
    int n;

    pthread_mutex_lock(&srv.lock);
    n = srv.connects[which];
    if (target)
        apr_cpystrn(target, srv.last_connect, size);
    pthread_mutex_unlock(&srv.lock);
    return n;
}

static const char *proxy_url(int port)
{
    return apr_psprintf(pool, "http://127.0.0.1:%d", port);
}

static void test_check_proxy(void **state)
{
    static const char *good[] = {
        "http://127.0.0.1:3128", "http://proxy.example.org:8080/",
        "HTTP://Proxy.Example.org:8080", "http://[::1]:3128", NULL
    };
    static const struct { const char *url, *why; } bad[] = {
        { "", "empty" },
        { "none", "http://host:port" },
        { "proxy.example.org:3128", "http://host:port" },
        { "https://proxy.example.org:3128", "http://host:port" },
        { "socks5://proxy.example.org:1080", "http://host:port" },
        { "http://", "no host" },
        { "http:///x", "no host" },
        { "http://proxy.example.org", "port" },
        { "http://proxy.example.org/", "port" },
        { "http://proxy.example.org:0", "port" },
        { "http://proxy.example.org:3128/path", "without a path" },
        { "http://proxy.example.org:3128/?a=b", "without a path" },
        { "http://proxy.example.org:3128#f", "without a path" },
        { "http://u:pw@proxy.example.org:3128", "password" },
        { "http://u@proxy.example.org:3128", "password" },
        { "http://proxy example:3128", "parsed" },
    };
    size_t i;

    (void)state;
    for (i = 0; good[i]; i++) {
        const char *err = lessons_fetch_check_proxy(pool, good[i]);

        if (err)
            fail_msg("%s refused: %s", good[i], err);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_has(lessons_fetch_check_proxy(pool, bad[i].url), bad[i].why);
    }
    assert_non_null(lessons_fetch_check_proxy(pool, NULL));
}

/* Through the proxy: one CONNECT to the server's host:port, and the
 * request inside the tunnel, never at the server's own listener.
 */
static void test_proxy_tunnel(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL, target[300];
    apr_size_t len = 0;
    int main_before = hits(L_MAIN), before = connects(L_OTHER, NULL, 0);

    (void)state;
    o.proxy = proxy_url(srv.port[L_OTHER]);
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, OK_BODY);
    assert_int_equal(connects(L_OTHER, target, sizeof(target)), before + 1);
    assert_string_equal(target, apr_psprintf(pool, "127.0.0.1:%d",
                                             srv.port[L_MAIN]));
    assert_int_equal(hits(L_MAIN), main_before);
    /* Redirects through it as without: the same origin followed ... */
    o.url = url(L_MAIN, "/redir/2");
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, "done");
    assert_true(connects(L_OTHER, NULL, 0) >= before + 2);
    assert_int_equal(hits(L_MAIN), main_before);
    /* ... another refused */
    o.url = url(L_MAIN, "/other-port");
    assert_has(get(&o, &body, &len), "redirect to another origin refused");
    assert_null(body);
}

static void test_proxy_refuses(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL;
    apr_size_t len = 0;
    const char *err;
    int main_before = hits(L_MAIN), before = connects(L_OTHER, NULL, 0);

    (void)state;
    o.proxy = proxy_url(srv.port[L_OTHER]);
    srv.refuse_connect = 1;
    err = get(&o, &body, &len);
    srv.refuse_connect = 0;
    assert_has(err, "403");
    assert_has(err, apr_psprintf(pool, "(through the proxy %s)", o.proxy));
    assert_null(body);
    assert_int_equal(connects(L_OTHER, NULL, 0), before + 1);
    assert_int_equal(hits(L_MAIN), main_before);
}

static void test_proxy_down(void **state)
{
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL;
    apr_size_t len = 0;
    long status = -1;
    int main_before = hits(L_MAIN);

    (void)state;
    o.proxy = proxy_url(closed_port);
    assert_has(lessons_fetch_get_ex(pool, &o, &body, &len, &status),
               apr_psprintf(pool, "(through the proxy %s)", o.proxy));
    assert_null(body);
    assert_int_equal(status, 0);
    assert_int_equal(hits(L_MAIN), main_before);
    /* A malformed one is refused before any connection. */
    o.proxy = "http://127.0.0.1";
    assert_has(get(&o, &body, &len), "port");
}

/* The environment's proxies are never used: not without a proxy named
 * (straight to the server), and no_proxy never sends a fetch around the
 * one named.
 */
static void test_proxy_env_ignored(void **state)
{
    static const char *vars[] = { "http_proxy", "HTTP_PROXY", "https_proxy",
        "HTTPS_PROXY", "all_proxy", "ALL_PROXY" };
    lessons_fetch_opts_t o = opts_for(url(L_MAIN, "/ok"));
    char *body = NULL;
    apr_size_t len = 0;
    int main_before = hits(L_MAIN), before = connects(L_OTHER, NULL, 0);
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        setenv(vars[i], proxy_url(srv.port[L_OTHER]), 1);
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, OK_BODY);
    assert_int_equal(hits(L_MAIN), main_before + 1);
    assert_int_equal(connects(L_OTHER, NULL, 0), before);
    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);

    setenv("no_proxy", "*", 1);
    setenv("NO_PROXY", "127.0.0.1", 1);
    o.proxy = proxy_url(srv.port[L_OTHER]);
    assert_null(get(&o, &body, &len));
    assert_int_equal(connects(L_OTHER, NULL, 0), before + 1);
    assert_int_equal(hits(L_MAIN), main_before + 1);
    unsetenv("no_proxy");
    unsetenv("NO_PROXY");
}

/* https through the proxy: the TLS is ours with the server, checked
 * against the CA given and nothing else; the proxy relays bytes.
 */
static void test_proxy_tls(void **state)
{
    lessons_fetch_opts_t o;
    char *body = NULL, target[300];
    apr_size_t len = 0, ca_len = 0, other_len = 0;
    const char *ca, *other;
    int before = connects(L_OTHER, NULL, 0);

    (void)state;
    if (!tls_ok) {
        print_message("openssl s_server could not be started: skipped\n");
        skip();
    }
    ca = slurp(apr_psprintf(pool, "%s/ca.crt", tls_dir), &ca_len);
    other = slurp(apr_psprintf(pool, "%s/other.crt", tls_dir), &other_len);
    assert_non_null(ca);
    assert_non_null(other);
    o = opts_for(apr_psprintf(pool, "https://127.0.0.1:%d/jwks.json",
                              tls_port[0]));
    o.allow_http = 0;
    o.proxy = proxy_url(srv.port[L_OTHER]);
    o.ca_pem = ca;
    o.ca_len = ca_len;
    assert_null(get(&o, &body, &len));
    assert_string_equal(body, OK_BODY);
    assert_int_equal(connects(L_OTHER, target, sizeof(target)), before + 1);
    assert_string_equal(target, apr_psprintf(pool, "127.0.0.1:%d",
                                             tls_port[0]));
    /* Another CA: refused in the tunnel as it would be without one. */
    o.ca_pem = other;
    o.ca_len = other_len;
    assert_has(get(&o, &body, &len), "through the proxy");
    assert_null(body);
    assert_int_equal(connects(L_OTHER, NULL, 0), before + 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_url_good),
        cmocka_unit_test(test_check_url_bad),
        cmocka_unit_test(test_get_ok),
        cmocka_unit_test(test_get_empty),
        cmocka_unit_test(test_get_status),
        cmocka_unit_test(test_get_error_code),
        cmocka_unit_test(test_get_ex_status),
        cmocka_unit_test(test_get_size_cap),
        cmocka_unit_test(test_get_timeout),
        cmocka_unit_test(test_get_refused),
        cmocka_unit_test(test_get_http_not_allowed),
        cmocka_unit_test(test_get_bad_opts),
        cmocka_unit_test(test_redirect_same_origin),
        cmocka_unit_test(test_redirect_too_many),
        cmocka_unit_test(test_redirect_other_port),
        cmocka_unit_test(test_redirect_other_host),
        cmocka_unit_test(test_redirect_other_scheme),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_ca_check),
        cmocka_unit_test(test_tls_only_the_named_ca),
        cmocka_unit_test(test_check_proxy),
        cmocka_unit_test(test_post_ok),
        cmocka_unit_test(test_post_no_redirect),
        cmocka_unit_test(test_proxy_tunnel),
        cmocka_unit_test(test_proxy_refuses),
        cmocka_unit_test(test_proxy_down),
        cmocka_unit_test(test_proxy_env_ignored),
        cmocka_unit_test(test_proxy_tls),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown_all);
}
