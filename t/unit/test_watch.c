/* Licensed under the Apache License, Version 2.0.
 *
 * test_watch.c: lessons_watch -- a read blocked on a socket whose peer
 * never answers returns once the deadline has passed, and not before;
 * a socket disarmed in time is left alone; an earlier deadline armed
 * after a later one is kept; a socket the connection replaced is not
 * the one shut down; what cannot be watched is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
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

/* A blocking read on fd: how long it took, and what it returned (0 once
 * shut down; -1 after 3 s if the watch never fires, so that a broken
 * watch fails the test instead of hanging it).
 */
static apr_interval_time_t timed_read(int fd, ssize_t *got)
{
    struct timeval tv = { 3, 0 };
    char c;
    apr_time_t t0 = apr_time_now();

    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
                                sizeof(tv)), 0);
    *got = read(fd, &c, 1);
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
    slot = lessons_watch_arm(w, sv[0], apr_time_now() + MS(150));
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
    slot = lessons_watch_arm(w, sv[0], apr_time_now() + MS(100));
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
    sa = lessons_watch_arm(w, a[0], apr_time_now() + MS(30000));
    apr_sleep(MS(50));
    sb = lessons_watch_arm(w, b[0], apr_time_now() + MS(150));
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
    slot = lessons_watch_arm(w, old[0], apr_time_now() + MS(150));
    assert_true(slot >= 0);
    same = lessons_watch_follow(w, slot, old[0]);
    assert_int_equal(same, slot);
    /* "PQreset": old[0] closed, the new socket takes the lowest number. */
    close(old[0]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, neu), 0);
    slot = lessons_watch_follow(w, slot, neu[0]);
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
    assert_int_equal(lessons_watch_arm(w, -1, apr_time_now()), -1);
    assert_int_equal(lessons_watch_arm(NULL, 0, apr_time_now()), -1);
    /* Not a socket (an SQLite file, say). */
    fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(lessons_watch_arm(w, fd, apr_time_now()), -1);
    close(fd);
    /* Every slot taken. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    slot = lessons_watch_arm(w, sv[0], apr_time_now() + MS(60000));
    assert_int_equal(slot, 0);
    assert_int_equal(lessons_watch_arm(w, sv[1], apr_time_now()), -1);
    assert_int_equal(lessons_watch_disarm(w, slot), 0);
    assert_int_equal(lessons_watch_disarm(w, -1), 0);
    assert_int_equal(lessons_watch_disarm(w, 7), 0);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_read_ends_at_deadline),
        cmocka_unit_test(test_disarmed_in_time_is_left_alone),
        cmocka_unit_test(test_earlier_deadline_after_later),
        cmocka_unit_test(test_follow_the_new_socket),
        cmocka_unit_test(test_refused),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
