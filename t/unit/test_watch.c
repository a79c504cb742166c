/* Licensed under the Apache License, Version 2.0.
 *
 * test_watch.c: lessons_watch -- a read blocked on a socket whose peer
 * never answers returns once the deadline has passed, and not before;
 * a socket disarmed in time is left alone; an earlier deadline armed
 * after a later one is kept; a socket the connection replaced is not
 * the one shut down; what cannot be watched is refused; a connection's
 * kept duplicate is one descriptor for all its statements, made again
 * for a new socket (and the old one let go), closed with its pool, and
 * never swept once closed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <fcntl.h>
#include <cmocka.h>

#include "apr_time.h"

#include "store/lessons_watch.h"

#include "unit_pool.h"

static int group_setup(void **state)
{
    (void)state;
    return unit_pool_open();
}

#define MS(n) apr_time_from_msec(n)

/* A blocking read on fd that gives up after ms: 0 (EOF) once every
 * descriptor of the other end is closed or shut down, -1 (timeout)
 * while one still holds it open.
 */
static ssize_t read_within(int fd, int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    char c;

    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
                                sizeof(tv)), 0);
    return read(fd, &c, 1);
}

/* A read on fd: how long it took, and what it returned (0 once shut
 * down; -1 after 3 s if the watch never fires, so that a broken watch
 * fails the test instead of hanging it).
 */
static apr_interval_time_t timed_read(int fd, ssize_t *got)
{
    apr_time_t t0 = apr_time_now();

    *got = read_within(fd, 3000);
    return apr_time_now() - t0;
}

static void test_blocked_read_ends_at_deadline(void **state)
{
    lessons_watch_t *w = lessons_watch_make(pool, 4);
    int sv[2], slot;
    ssize_t got = -2;
    apr_interval_time_t took;

    (void)state;
    assert_non_null(w);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    slot = lessons_watch_arm(w, NULL, sv[0], apr_time_now() + MS(150));
    assert_true(slot >= 0);
    /* The peer (sv[1]) is open and silent: a frozen server. */
    took = timed_read(sv[0], &got);
    assert_int_equal(got, 0);
    assert_true(took >= MS(120));
    assert_true(took < MS(2000));
    assert_int_equal(lessons_watch_disarm(w, slot), 1);
    assert_true(lessons_watch_fired(w) >= 1);
    /* Our descriptor is still open (shut down, not closed). */
    assert_true(fcntl(sv[0], F_GETFD) >= 0);
    close(sv[0]);
    close(sv[1]);
}

static void test_disarmed_in_time_is_left_alone(void **state)
{
    lessons_watch_t *w = lessons_watch_make(pool, 4);
    int sv[2], slot;
    char c = 'x';
    apr_uint64_t before;

    (void)state;
    assert_non_null(w);
    before = lessons_watch_fired(w);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    slot = lessons_watch_arm(w, NULL, sv[0], apr_time_now() + MS(100));
    assert_true(slot >= 0);
    assert_int_equal(lessons_watch_disarm(w, slot), 0);
    apr_sleep(MS(250));
    assert_int_equal(lessons_watch_fired(w), before);
    /* Both ways still work. */
    assert_int_equal(write(sv[1], &c, 1), 1);
    assert_int_equal(read(sv[0], &c, 1), 1);
    assert_int_equal(write(sv[0], &c, 1), 1);
    close(sv[0]);
    close(sv[1]);
}

static void test_earlier_deadline_after_later(void **state)
{
    lessons_watch_t *w = lessons_watch_make(pool, 4);
    int a[2], b[2], sa, sb;
    ssize_t got = -2;
    apr_interval_time_t took;

    (void)state;
    assert_non_null(w);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    /* The thread goes to sleep for 30 s, then is told of 150 ms. */
    sa = lessons_watch_arm(w, NULL, a[0], apr_time_now() + MS(30000));
    apr_sleep(MS(50));
    sb = lessons_watch_arm(w, NULL, b[0], apr_time_now() + MS(150));
    assert_true(sa >= 0 && sb >= 0 && sa != sb);
    took = timed_read(b[0], &got);
    assert_int_equal(got, 0);
    assert_true(took < MS(2000));
    assert_int_equal(lessons_watch_disarm(w, sb), 1);
    assert_int_equal(lessons_watch_disarm(w, sa), 0);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

/* The connection made again (PQreset): the old socket closed, a new one
 * in its place, perhaps under the same number.  follow watches the new
 * one; without it, the watch would shut down only the old (closed) one.
 */
static void test_follow_the_new_socket(void **state)
{
    lessons_watch_t *w = lessons_watch_make(pool, 4);
    int old[2], neu[2], slot, same;
    ssize_t got = -2;

    (void)state;
    assert_non_null(w);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, old), 0);
    slot = lessons_watch_arm(w, NULL, old[0], apr_time_now() + MS(150));
    assert_true(slot >= 0);
    same = lessons_watch_follow(w, NULL, slot, old[0]);
    assert_int_equal(same, slot);
    /* "PQreset": old[0] closed, the new socket takes the lowest number. */
    close(old[0]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, neu), 0);
    slot = lessons_watch_follow(w, NULL, slot, neu[0]);
    assert_true(slot >= 0);
    (void)timed_read(neu[0], &got);
    assert_int_equal(got, 0);
    assert_int_equal(lessons_watch_disarm(w, slot), 1);
    close(old[1]);
    close(neu[0]);
    close(neu[1]);
}

static void test_refused(void **state)
{
    lessons_watch_t *w = lessons_watch_make(pool, 1);
    int sv[2], fd, slot;

    (void)state;
    assert_non_null(w);
    assert_null(lessons_watch_make(pool, 0));
    assert_int_equal(lessons_watch_arm(w, NULL, -1, apr_time_now()), -1);
    assert_int_equal(lessons_watch_arm(NULL, NULL, 0, apr_time_now()), -1);
    /* Not a socket (an SQLite file, say). */
    fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(lessons_watch_arm(w, NULL, fd, apr_time_now()), -1);
    close(fd);
    /* Every slot taken. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    slot = lessons_watch_arm(w, NULL, sv[0], apr_time_now() + MS(60000));
    assert_int_equal(slot, 0);
    assert_int_equal(lessons_watch_arm(w, NULL, sv[1], apr_time_now()), -1);
    assert_int_equal(lessons_watch_disarm(w, slot), 0);
    assert_int_equal(lessons_watch_disarm(w, -1), 0);
    assert_int_equal(lessons_watch_disarm(w, 7), 0);
    close(sv[0]);
    close(sv[1]);
}

/* Descriptors this process has open. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

/* A watch of slots, and a connection's pool under the group's. */
static lessons_watch_t *watch_with_conn(int slots, apr_pool_t **conn)
{
    lessons_watch_t *w = lessons_watch_make(pool, slots);

    assert_non_null(w);
    assert_int_equal(apr_pool_create(conn, pool), APR_SUCCESS);
    return w;
}

/* A connection's statements, armed and disarmed 100 times: one kept
 * duplicate, not one each time; the watch still shuts the socket down
 * through it; the pool's end closes it.
 */
static void test_kept_for_the_connection(void **state)
{
    apr_pool_t *conn;
    lessons_watch_t *w = watch_with_conn(4, &conn);
    int sv[2], slot, i, base;
    ssize_t got = -2;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    base = open_fds();
    for (i = 0; i < 100; i++) {
        slot = lessons_watch_arm(w, conn, sv[0], apr_time_now() + MS(60000));
        assert_true(slot >= 0);
        assert_int_equal(open_fds(), base + 1);
        assert_int_equal(lessons_watch_follow(w, conn, slot, sv[0]), slot);
        assert_int_equal(lessons_watch_disarm(w, slot), 0);
        assert_int_equal(open_fds(), base + 1);
    }
    slot = lessons_watch_arm(w, conn, sv[0], apr_time_now() + MS(150));
    assert_true(slot >= 0);
    assert_true(timed_read(sv[0], &got) >= MS(100));
    assert_int_equal(got, 0);
    assert_int_equal(lessons_watch_disarm(w, slot), 1);
    apr_pool_destroy(conn);
    assert_int_equal(open_fds(), base);
    close(sv[0]);
    close(sv[1]);
}

/* The connection made again under the same number: the kept duplicate
 * of the old socket goes (its peer sees the end), the new one is the
 * one watched.
 */
static void test_kept_follows_a_new_socket(void **state)
{
    apr_pool_t *conn;
    lessons_watch_t *w = watch_with_conn(4, &conn);
    int old[2], neu[2], slot, num;
    ssize_t got = -2;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, old), 0);
    slot = lessons_watch_arm(w, conn, old[0], apr_time_now() + MS(60000));
    assert_true(slot >= 0);
    assert_int_equal(lessons_watch_disarm(w, slot), 0);
    num = old[0];
    close(old[0]);
    /* Kept: the old socket is still open for its peer. */
    assert_int_equal(read_within(old[1], 50), -1);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, neu), 0);
    assert_int_equal(neu[0], num);
    slot = lessons_watch_arm(w, conn, neu[0], apr_time_now() + MS(150));
    assert_true(slot >= 0);
    assert_int_equal(read_within(old[1], 1000), 0);
    (void)timed_read(neu[0], &got);
    assert_int_equal(got, 0);
    assert_int_equal(lessons_watch_disarm(w, slot), 1);
    apr_pool_destroy(conn);
    close(old[1]);
    close(neu[0]);
    close(neu[1]);
}

/* A slot left armed when its connection's pool goes (a caller's
 * mistake): its number may be another socket's next, which the watch
 * must never shut down; the slot is freed by its disarm.
 */
static void test_kept_closed_is_never_swept(void **state)
{
    apr_pool_t *conn;
    lessons_watch_t *w = watch_with_conn(1, &conn);
    int sv[2], other[2], spare, slot;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    /* The lowest free number: the kept duplicate's, and the next
     * socket's once the pool has closed it.
     */
    spare = dup(sv[0]);
    close(spare);
    slot = lessons_watch_arm(w, conn, sv[0], apr_time_now() + MS(100));
    assert_int_equal(slot, 0);
    apr_pool_destroy(conn);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, other), 0);
    assert_int_equal(other[0], spare);
    usleep(300 * 1000);
    /* Not shut down: a write still reaches the peer. */
    assert_int_equal(send(other[0], "x", 1, MSG_NOSIGNAL), 1);
    assert_int_equal(send(other[1], "y", 1, MSG_NOSIGNAL), 1);
    assert_int_equal(lessons_watch_disarm(w, slot), 0);
    slot = lessons_watch_arm(w, NULL, sv[0], apr_time_now() + MS(60000));
    assert_int_equal(slot, 0);
    assert_int_equal(lessons_watch_disarm(w, slot), 0);
    close(sv[0]);
    close(sv[1]);
    close(other[0]);
    close(other[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_read_ends_at_deadline),
        cmocka_unit_test(test_disarmed_in_time_is_left_alone),
        cmocka_unit_test(test_earlier_deadline_after_later),
        cmocka_unit_test(test_follow_the_new_socket),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_kept_for_the_connection),
        cmocka_unit_test(test_kept_follows_a_new_socket),
        cmocka_unit_test(test_kept_closed_is_never_swept),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
