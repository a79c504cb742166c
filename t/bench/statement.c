/* Licensed under the Apache License, Version 2.0.
 *
 * statement.c: one of the module's statements, as the module prepares
 * it, with its placeholders filled in, for make bench's baselines
 * (issue 45): pgbench's scripts and SQLite's bare INSERT loop run the
 * text printed from the module's own tables (lessons_store.c), so the
 * baseline cannot drift from what the module runs.
 *
 *   build/bench/statement [--engine DRIVER] NAME VALUE...
 *
 * NAME is a label of lessons_statements, lessons_statements_returning or
 * lessons_statements_idempotency; the VALUEs fill its placeholders in
 * their order (the order the module binds them: lessons_insert_args,
 * lessons_update_args).  A %d or %lld takes an integer literal or a
 * pgbench variable (:name), copied as it is; a %s takes any text,
 * printed as an SQL literal (quotes doubled).  Where the statement reads
 * the epoch, DRIVER's engine's expression takes its place, as
 * lessons_store_prepare does (the bare column when DRIVER has no
 * expression of its own or is not given).  The text and a newline go to
 * stdout; no semicolon is added.  Exit 2 on a wrong name, count or
 * value.
 */
#include <stdio.h>
#include <string.h>

#include "store/lessons_engine.h"
#include "store/lessons_store.h"

/* lessons_store.c's LESSONS_EPOCH: a renamed marker would stay in the
 * printed text, which no database parses, so a drift here is loud.
 */
#define LESSONS_STATEMENT_EPOCH "{epoch}"

static const lessons_statement_t *const lessons_statement_tables[] = {
    lessons_statements,
    lessons_statements_returning,
    lessons_statements_idempotency,
    NULL
};

static const char *lessons_statement_find(const char *name)
{
    const lessons_statement_t *s;
    int t;

    for (t = 0; lessons_statement_tables[t]; t++) {
        for (s = lessons_statement_tables[t]; s->label; s++) {
            if (strcmp(s->label, name) == 0) {
                return s->sql;
            }
        }
    }
    return NULL;
}

/* The placeholder at sql ("%d", "%lld", "%s"): its length, or 0 for any
 * other '%' (which apr_dbd would read as something else).
 */
static size_t lessons_statement_placeholder(const char *sql, int *text)
{
    *text = 0;
    if (strncmp(sql, "%d", 2) == 0) {
        return 2;
    }
    if (strncmp(sql, "%lld", 4) == 0) {
        return 4;
    }
    if (strncmp(sql, "%s", 2) == 0) {
        *text = 1;
        return 2;
    }
    return 0;
}

/* An integer literal, or a pgbench variable (:name). */
static int lessons_statement_number(const char *v)
{
    size_t i = 0;

    if (v[0] == ':') {
        for (i = 1; v[i]; i++) {
            if (!(v[i] == '_' || (v[i] >= 'a' && v[i] <= 'z')
                  || (v[i] >= 'A' && v[i] <= 'Z')
                  || (i > 1 && v[i] >= '0' && v[i] <= '9'))) {
                return 0;
            }
        }
        return i > 1;
    }
    if (v[0] == '-') {
        i = 1;
    }
    if (!v[i]) {
        return 0;
    }
    for (; v[i]; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return 0;
        }
    }
    return 1;
}

/* Walk sql: count its placeholders and check the values meant for them
 * (out NULL; list: name them on stderr), or print it with the values in
 * their places.  -1 on a '%' that is no placeholder of ours, or a value
 * that is no number where a number goes.
 */
static int lessons_statement_fill(const char *sql, const char *epoch,
                                  char **values, int nvalues, FILE *out,
                                  int list)
{
    const size_t en = sizeof(LESSONS_STATEMENT_EPOCH) - 1;
    const char *c;
    size_t len;
    int n = 0, text;

    while (*sql) {
        if (strncmp(sql, LESSONS_STATEMENT_EPOCH, en) == 0) {
            if (out) {
                fputs(epoch, out);
            }
            sql += en;
            continue;
        }
        if (*sql != '%') {
            if (out) {
                putc(*sql, out);
            }
            sql++;
            continue;
        }
        if ((len = lessons_statement_placeholder(sql, &text)) == 0) {
            fprintf(stderr, "statement: a '%%' that is no placeholder: "
                    "%.10s\n", sql);
            return -1;
        }
        if (list) {
            fprintf(stderr, " %.*s", (int)len, sql);
        }
        if (n < nvalues && !text && !lessons_statement_number(values[n])) {
            fprintf(stderr, "statement: value %d (%.*s) is no integer or "
                    ":variable: %s\n", n + 1, (int)len, sql, values[n]);
            return -1;
        }
        if (out && n < nvalues && !text) {
            fputs(values[n], out);
        }
        else if (out && n < nvalues) {
            putc('\'', out);
            for (c = values[n]; *c; c++) {
                if (*c == '\'') {
                    putc('\'', out);
                }
                putc(*c, out);
            }
            putc('\'', out);
        }
        n++;
        sql += len;
    }
    return n;
}

int main(int argc, char **argv)
{
    const lessons_engine_t *engine = NULL;
    const char *sql, *epoch = "epoch";
    int arg = 1, n;

    if (argc > 2 && strcmp(argv[1], "--engine") == 0) {
        if (!(engine = lessons_engine_find(argv[2]))) {
            fprintf(stderr, "statement: no engine %s in this build\n",
                    argv[2]);
            return 2;
        }
        if (engine->epoch_sql) {
            epoch = engine->epoch_sql;
        }
        arg = 3;
    }
    if (arg >= argc || argv[arg][0] == '-') {
        fprintf(stderr, "usage: statement [--engine DRIVER] NAME "
                "VALUE...\n");
        return 2;
    }
    if (!(sql = lessons_statement_find(argv[arg]))) {
        fprintf(stderr, "statement: no statement %s\n", argv[arg]);
        return 2;
    }
    /* Counted and checked first, so that a wrong count or value prints
     * nothing on stdout.
     */
    n = lessons_statement_fill(sql, epoch, argv + arg + 1, argc - arg - 1,
                               NULL, 0);
    if (n >= 0 && n != argc - arg - 1) {
        fprintf(stderr, "statement: %s takes %d values, %d given:",
                argv[arg], n, argc - arg - 1);
        lessons_statement_fill(sql, epoch, NULL, 0, NULL, 1);
        fputs("\n", stderr);
    }
    if (n < 0 || n != argc - arg - 1) {
        return 2;
    }
    lessons_statement_fill(sql, epoch, argv + arg + 1, n, stdout, 0);
    putc('\n', stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
