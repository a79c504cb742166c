/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_watch.c: one thread per process that shuts down the database
 * sockets whose request has run past its deadline (lessons_watch.h).
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apr_thread_cond.h"
#include "apr_thread_mutex.h"
#include "apr_thread_proc.h"

#include "store/lessons_watch.h"

typedef struct {
    int fd;                         /* our duplicate; -1: the slot is free */
    int owned;                      /* closed at disarm (not a kept one) */
    int gone;                       /* its kept duplicate was closed */
    int fired;
    apr_time_t deadline;
    dev_t dev;                      /* which socket it is */
    ino_t ino;
} lessons_watch_slot_t;

/* A connection's duplicate, in the connection's pool (userdata). */
typedef struct {
    lessons_watch_t *w;
    int fd;                         /* -1: none yet */
    dev_t dev;
    ino_t ino;
} lessons_watch_kept_t;

#define LESSONS_WATCH_KEPT "lessons_watch_kept"

struct lessons_watch_t {
    apr_thread_mutex_t *lock;
    apr_thread_cond_t *wake;
    apr_thread_t *thread;
    lessons_watch_slot_t *slots;
    int nslots;
    int stop;
    apr_time_t wake_at;             /* when the thread wakes; 0: when told */
    apr_uint64_t fired;
};

/* Shut down every armed socket past its deadline: the earliest deadline
 * still ahead, or 0.  Under the lock.
 */
static apr_time_t lessons_watch_sweep(lessons_watch_t *w, apr_time_t now)
{
    apr_time_t next = 0;
    int i;

    for (i = 0; i < w->nslots; i++) {
        lessons_watch_slot_t *s = &w->slots[i];

        if (s->fd < 0 || s->fired || s->gone) {
            continue;
        }
        if (s->deadline <= now) {
            (void)shutdown(s->fd, SHUT_RDWR);
            s->fired = 1;
            w->fired++;
        }
        else if (!next || s->deadline < next) {
            next = s->deadline;
        }
    }
    return next;
}

static void *APR_THREAD_FUNC lessons_watch_run(apr_thread_t *t, void *data)
{
    lessons_watch_t *w = data;

    apr_thread_mutex_lock(w->lock);
    while (!w->stop) {
        apr_time_t now = apr_time_now();
        apr_time_t next = lessons_watch_sweep(w, now);

        w->wake_at = next;
        if (next) {
            apr_thread_cond_timedwait(w->wake, w->lock, next - now);
        }
        else {
            apr_thread_cond_wait(w->wake, w->lock);
        }
    }
    apr_thread_mutex_unlock(w->lock);
    apr_thread_exit(t, APR_SUCCESS);
    return NULL;
}

static apr_status_t lessons_watch_end(void *data)
{
    lessons_watch_t *w = data;
    apr_status_t rv;

    apr_thread_mutex_lock(w->lock);
    w->stop = 1;
    apr_thread_cond_signal(w->wake);
    apr_thread_mutex_unlock(w->lock);
    apr_thread_join(&rv, w->thread);
    return APR_SUCCESS;
}

lessons_watch_t *lessons_watch_make(apr_pool_t *p, int slots)
{
    lessons_watch_t *w = apr_pcalloc(p, sizeof(*w));
    int i;

    if (slots < 1) {
        return NULL;
    }
    w->nslots = slots;
    w->slots = apr_palloc(p, sizeof(*w->slots) * (apr_size_t)slots);
    for (i = 0; i < slots; i++) {
        w->slots[i].fd = -1;
        w->slots[i].owned = 0;
        w->slots[i].gone = 0;
        w->slots[i].fired = 0;
        w->slots[i].deadline = 0;
    }
    if (apr_thread_mutex_create(&w->lock, APR_THREAD_MUTEX_DEFAULT, p)
        != APR_SUCCESS
        || apr_thread_cond_create(&w->wake, p) != APR_SUCCESS
        || apr_thread_create(&w->thread, NULL, lessons_watch_run, w, p)
           != APR_SUCCESS) {
        return NULL;
    }
    /* A pre-cleanup: the thread stops while its lock and condition
     * still exist.
     */
    apr_pool_pre_cleanup_register(p, w, lessons_watch_end);
    return w;
}

/* Close a kept duplicate.  A slot still holding it (armed and never
 * disarmed) is not swept from now on: its number may be another
 * socket's soon.
 */
static void lessons_watch_kept_drop(lessons_watch_kept_t *k)
{
    lessons_watch_t *w = k->w;
    int i;

    if (k->fd < 0) {
        return;
    }
    apr_thread_mutex_lock(w->lock);
    for (i = 0; i < w->nslots; i++) {
        lessons_watch_slot_t *s = &w->slots[i];

        if (s->fd == k->fd && !s->owned) {
            s->gone = 1;
        }
    }
    apr_thread_mutex_unlock(w->lock);
    close(k->fd);
    k->fd = -1;
}

static apr_status_t lessons_watch_kept_cleanup(void *data)
{
    lessons_watch_kept_drop(data);
    return APR_SUCCESS;
}

/* The duplicate of the socket st describes: conn_pool's kept one (made
 * again if the connection's socket is another now), or one of its own
 * (*owned).  -1: none.
 */
static int lessons_watch_dup(lessons_watch_t *w, apr_pool_t *conn_pool,
                             int fd, const struct stat *st, int *owned)
{
    lessons_watch_kept_t *k = NULL;
    int mine;

    *owned = conn_pool == NULL;
    if (conn_pool) {
        void *v = NULL;

        (void)apr_pool_userdata_get(&v, LESSONS_WATCH_KEPT, conn_pool);
        k = v;
        if (k && k->fd >= 0 && k->dev == st->st_dev
            && k->ino == st->st_ino) {
            return k->fd;
        }
    }
    /* Close-on-exec, as the connection's own: a CGI a worker forks
     * must not keep the database's socket open.
     */
    mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0 || !conn_pool) {
        return mine;
    }
    if (!k) {
        /* Its cleanup is not for exec: it takes the watch's lock. */
        k = apr_palloc(conn_pool, sizeof(*k));
        k->w = w;
        k->fd = -1;
        (void)apr_pool_userdata_setn(k, LESSONS_WATCH_KEPT, NULL, conn_pool);
        apr_pool_cleanup_register(conn_pool, k, lessons_watch_kept_cleanup,
                                  apr_pool_cleanup_null);
    }
    lessons_watch_kept_drop(k);     /* the socket the connection had */
    k->fd = mine;
    k->dev = st->st_dev;
    k->ino = st->st_ino;
    return mine;
}

int lessons_watch_arm(lessons_watch_t *w, apr_pool_t *conn_pool, int fd,
                      apr_time_t deadline)
{
    struct stat st;
    int i, slot = -1, mine, owned;

    if (!w || fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        return -1;
    }
    mine = lessons_watch_dup(w, conn_pool, fd, &st, &owned);
    if (mine < 0) {
        return -1;
    }
    apr_thread_mutex_lock(w->lock);
    for (i = 0; i < w->nslots; i++) {
        lessons_watch_slot_t *s = &w->slots[i];

        if (s->fd < 0) {
            slot = i;
            s->fd = mine;
            s->owned = owned;
            s->gone = 0;
            s->fired = 0;
            s->deadline = deadline;
            s->dev = st.st_dev;
            s->ino = st.st_ino;
            /* The thread sleeps until later (or until told): tell it. */
            if (!w->wake_at || deadline < w->wake_at) {
                apr_thread_cond_signal(w->wake);
            }
            break;
        }
    }
    apr_thread_mutex_unlock(w->lock);
    if (slot < 0 && owned) {
        close(mine);
    }
    return slot;
}

int lessons_watch_follow(lessons_watch_t *w, apr_pool_t *conn_pool,
                         int slot, int fd)
{
    struct stat st;
    apr_time_t deadline;
    int same;

    if (!w || slot < 0 || slot >= w->nslots) {
        return slot;
    }
    apr_thread_mutex_lock(w->lock);
    same = fd >= 0 && fstat(fd, &st) == 0 && w->slots[slot].fd >= 0
           && st.st_dev == w->slots[slot].dev
           && st.st_ino == w->slots[slot].ino;
    deadline = w->slots[slot].deadline;
    apr_thread_mutex_unlock(w->lock);
    if (same) {
        return slot;
    }
    (void)lessons_watch_disarm(w, slot);
    return lessons_watch_arm(w, conn_pool, fd, deadline);
}

int lessons_watch_disarm(lessons_watch_t *w, int slot)
{
    int fired, fd;

    if (!w || slot < 0 || slot >= w->nslots) {
        return 0;
    }
    apr_thread_mutex_lock(w->lock);
    fired = w->slots[slot].fired;
    fd = w->slots[slot].owned ? w->slots[slot].fd : -1;
    w->slots[slot].fd = -1;
    w->slots[slot].owned = 0;
    w->slots[slot].gone = 0;
    w->slots[slot].fired = 0;
    apr_thread_mutex_unlock(w->lock);
    if (fd >= 0) {
        close(fd);
    }
    return fired;
}

apr_uint64_t lessons_watch_fired(lessons_watch_t *w)
{
    apr_uint64_t n;

    if (!w) {
        return 0;
    }
    apr_thread_mutex_lock(w->lock);
    n = w->fired;
    apr_thread_mutex_unlock(w->lock);
    return n;
}
