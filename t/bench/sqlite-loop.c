/* Licensed under the Apache License, Version 2.0.
 *
 * sqlite-loop.c: make bench's bare-loop baseline for SQLite creates
 * (issue 45): WRITERS threads, each with its own connection to the
 * bench database, run one statement (the module's lessons_create,
 * printed by build/bench/statement) over and over for SECONDS, each run
 * its own transaction and so its own commit, with the module's
 * durability (WAL, as the schema sets it; synchronous FULL).  What the
 * disk gives writers that do not share a commit, prepared once as the
 * module prepares, without HTTP, tokens or JSON.
 *
 *   build/bench/sqlite-loop DBFILE SQLFILE WRITERS SECONDS
 *
 * Prints "rows seconds rows/s".  The writers take turns on a mutex of
 * the process for each statement, as threads sharing a database that
 * takes one writer at a time would: left to SQLite's lock, 8 writers
 * made 1,292 rows/s against one writer's 4,057 (2026-11-28, this
 * machine), the lock idle while the waiters slept in SQLite's backoff
 * or spun on it, which would make a baseline slower than the disk.  A
 * writer that still finds the database busy (a checkpoint) retries
 * after 20 microseconds.  Exit 1 on any error.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#define LOOP_WRITERS_MAX 64
#define LOOP_SQL_MAX     65536

typedef struct {
    pthread_mutex_t *turn;      /* one statement at a time */
    const char *file;
    const char *sql;
    double until;               /* CLOCK_MONOTONIC seconds */
    long rows;
    const char *error;          /* NULL, or what failed */
    char message[256];
} loop_writer_t;

static double loop_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Busy: wait 20 us and try again, for up to a minute in all. */
static int loop_busy(void *baton, int count)
{
    struct timespec ts = { 0, 20000 };

    (void)baton;
    if (count > 3000000) {
        return 0;
    }
    nanosleep(&ts, NULL);
    return 1;
}

static void loop_fail(loop_writer_t *w, sqlite3 *db, const char *what)
{
    w->error = what;
    snprintf(w->message, sizeof(w->message), "%s",
             db ? sqlite3_errmsg(db) : "out of memory");
}

static void *loop_writer(void *arg)
{
    loop_writer_t *w = arg;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc;

    if (sqlite3_open_v2(w->file, &db, SQLITE_OPEN_READWRITE
                        | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        loop_fail(w, db, "open");
        goto done;
    }
    sqlite3_busy_handler(db, loop_busy, NULL);
    if (sqlite3_exec(db, "PRAGMA synchronous = FULL", NULL, NULL, NULL)
        != SQLITE_OK) {
        loop_fail(w, db, "PRAGMA synchronous");
        goto done;
    }
    if (sqlite3_prepare_v2(db, w->sql, -1, &st, NULL) != SQLITE_OK || !st) {
        loop_fail(w, db, "prepare");
        goto done;
    }
    while (loop_now() < w->until) {
        pthread_mutex_lock(w->turn);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            ;                   /* RETURNING id: read, as the module does */
        }
        sqlite3_reset(st);
        pthread_mutex_unlock(w->turn);
        if (rc != SQLITE_DONE) {
            loop_fail(w, db, "step");
            goto done;
        }
        w->rows++;
    }
done:
    sqlite3_finalize(st);
    sqlite3_close(db);
    return NULL;
}

int main(int argc, char **argv)
{
    static loop_writer_t writers[LOOP_WRITERS_MAX];
    static char sql[LOOP_SQL_MAX];
    static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;
    pthread_t threads[LOOP_WRITERS_MAX];
    FILE *f;
    size_t len;
    int n, i, failed = 0;
    double seconds, t0, t1;
    long rows = 0;

    if (argc != 5) {
        fprintf(stderr, "usage: %s DBFILE SQLFILE WRITERS SECONDS\n", argv[0]);
        return 1;
    }
    n = atoi(argv[3]);
    seconds = atof(argv[4]);
    if (n < 1 || n > LOOP_WRITERS_MAX || seconds <= 0) {
        fprintf(stderr, "sqlite-loop: WRITERS 1 to %d, SECONDS > 0\n",
                LOOP_WRITERS_MAX);
        return 1;
    }
    if (!(f = fopen(argv[2], "r"))) {
        perror(argv[2]);
        return 1;
    }
    len = fread(sql, 1, sizeof(sql) - 1, f);
    fclose(f);
    if (len == 0 || len == sizeof(sql) - 1) {
        fprintf(stderr, "sqlite-loop: %s: empty or too long\n", argv[2]);
        return 1;
    }
    sql[len] = '\0';
    t0 = loop_now();
    for (i = 0; i < n; i++) {
        writers[i].turn = &turn;
        writers[i].file = argv[1];
        writers[i].sql = sql;
        writers[i].until = t0 + seconds;
        if (pthread_create(&threads[i], NULL, loop_writer, &writers[i]) != 0) {
            fprintf(stderr, "sqlite-loop: cannot start writer %d\n", i);
            return 1;
        }
    }
    for (i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        rows += writers[i].rows;
        if (writers[i].error) {
            fprintf(stderr, "sqlite-loop: writer %d: %s: %s\n", i,
                    writers[i].error, writers[i].message);
            failed = 1;
        }
    }
    t1 = loop_now();
    if (failed) {
        return 1;
    }
    printf("%ld %.3f %.1f\n", rows, t1 - t0, (double)rows / (t1 - t0));
    return 0;
}
