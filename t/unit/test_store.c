/* Licensed under the Apache License, Version 2.0.
 *
 * test_store.c: lessons_store.h against a real in-memory SQLite database
 * through apr_dbd, with the schema from sql/schema.sqlite.sql applied
 * (twice, to prove it idempotent) before every test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <limits.h>
#include <cmocka.h>

#include "apr_general.h"
#include "apr_pools.h"
#include "apr_strings.h"
#include "apr_hash.h"
#include "apr_tables.h"
#include "apr_dbd.h"

#include "store/lessons_store.h"

#ifndef LESSONS_SQL_DIR
#error "LESSONS_SQL_DIR must name the sql/ directory"
#endif
#define SCHEMA LESSONS_SQL_DIR "/schema.sqlite.sql"

static apr_pool_t *root;
static const apr_dbd_driver_t *driver;

typedef struct {
    apr_pool_t *p;
    lessons_db_t db;
} fixture_t;

/* ------------------------------------------------------------- schema */

/* In a CREATE TRIGGER statement, the ';' between BEGIN and END do not
 * end it: only a ';' right after the word END does.
 */
static int inside_trigger_body(const char *buf, size_t n)
{
    size_t a = 0, e = n;
    char *upper;
    size_t i;

    while (a < n && strchr(" \t\r\n", buf[a]))
        a++;
    upper = strndup(buf + a, n - a);
    for (i = 0; upper[i]; i++)
        upper[i] = (char)toupper((unsigned char)upper[i]);
    if (strncmp(upper, "CREATE", 6) != 0 || !strstr(upper, " TRIGGER ")) {
        free(upper);
        return 0;
    }
    free(upper);
    while (e > a && strchr(" \t\r\n", buf[e - 1]))
        e--;
    return !(e - a >= 3 && strncasecmp(buf + e - 3, "END", 3) == 0
             && (e - a == 3 || strchr(" \t\r\n;", buf[e - 4])));
}

/* Split SQL text into statements on ';' outside quotes and comments.
 * Comments are dropped; empty statements are skipped.
 */
static apr_array_header_t *split_sql(apr_pool_t *p, const char *sql)
{
    apr_array_header_t *out = apr_array_make(p, 16, sizeof(char *));
    char *buf = apr_palloc(p, strlen(sql) + 1);
    size_t n = 0;
    const char *s = sql;

    while (*s) {
        if (s[0] == '-' && s[1] == '-') {
            while (*s && *s != '\n')
                s++;
            continue;
        }
        if (s[0] == '/' && s[1] == '*') {
            const char *e = strstr(s + 2, "*/");

            s = e ? e + 2 : s + strlen(s);
            continue;
        }
        if (*s == '\'' || *s == '"') {
            char q = *s;

            buf[n++] = *s++;
            while (*s) {
                if (*s == q && s[1] == q) {         /* doubled quote */
                    buf[n++] = *s++;
                    buf[n++] = *s++;
                    continue;
                }
                if (*s == q)
                    break;
                buf[n++] = *s++;
            }
            if (*s)
                buf[n++] = *s++;
            continue;
        }
        if (*s == ';' && !inside_trigger_body(buf, n)) {
            size_t a = 0;

            buf[n] = '\0';
            while (buf[a] == ' ' || buf[a] == '\n' || buf[a] == '\t'
                   || buf[a] == '\r')
                a++;
            if (buf[a])
                *(char **)apr_array_push(out) = apr_pstrdup(p, buf + a);
            n = 0;
            s++;
            continue;
        }
        buf[n++] = *s++;
    }
    buf[n] = '\0';
    {
        size_t a = 0;

        while (buf[a] == ' ' || buf[a] == '\n' || buf[a] == '\t'
               || buf[a] == '\r')
            a++;
        if (buf[a])
            *(char **)apr_array_push(out) = apr_pstrdup(p, buf + a);
    }
    return out;
}

static char *slurp(apr_pool_t *p, const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    char *buf;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = apr_palloc(p, (apr_size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Run one statement; statements that return rows (PRAGMA) go through
 * select, since the sqlite3 driver's query treats a row as an error.
 */
static int run_sql(apr_pool_t *p, apr_dbd_t *h, const char *stmt)
{
    int rv, nrows = 0;

    if (strncasecmp(stmt, "PRAGMA", 6) == 0
        || strncasecmp(stmt, "SELECT", 6) == 0) {
        apr_dbd_results_t *res = NULL;
        apr_dbd_row_t *row = NULL;

        rv = apr_dbd_select(driver, p, h, &res, stmt, 0);
        if (rv == 0)
            while (apr_dbd_get_row(driver, p, res, &row, -1) == 0)
                ;
    }
    else {
        rv = apr_dbd_query(driver, h, &nrows, stmt);
    }
    if (rv != 0)
        print_error("SQL failed (%s): %s\n", apr_dbd_error(driver, h, rv),
                    stmt);
    return rv;
}

/* Every statement of an SQL file (the schema, an upgrade). */
static int apply_file(apr_pool_t *p, apr_dbd_t *h, const char *path)
{
    const char *sql = slurp(p, path);
    apr_array_header_t *stmts;
    int i;

    if (!sql) {
        print_error("cannot read %s\n", path);
        return -1;
    }
    stmts = split_sql(p, sql);
    if (stmts->nelts < 3)
        return -1;
    for (i = 0; i < stmts->nelts; i++)
        if (run_sql(p, h, APR_ARRAY_IDX(stmts, i, const char *)) != 0)
            return -1;
    return 0;
}

static int apply_schema(apr_pool_t *p, apr_dbd_t *h)
{
    return apply_file(p, h, SCHEMA);
}

/* A single integer from a query, or -1. */
static long long scalar(fixture_t *fx, const char *sql)
{
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    long long v = -1;

    if (apr_dbd_select(driver, fx->p, fx->db.handle, &res, sql, 0) != 0)
        return -1;
    while (apr_dbd_get_row(driver, fx->p, res, &row, -1) == 0) {
        const char *e = apr_dbd_get_entry(driver, row, 0);

        if (e)
            v = atoll(e);
    }
    return v;
}

/* A single text from a query, or NULL. */
static const char *scalar_text(fixture_t *fx, const char *sql)
{
    apr_dbd_results_t *res = NULL;
    apr_dbd_row_t *row = NULL;
    const char *v = NULL;

    if (apr_dbd_select(driver, fx->p, fx->db.handle, &res, sql, 0) != 0)
        return NULL;
    while (apr_dbd_get_row(driver, fx->p, res, &row, -1) == 0) {
        const char *e = apr_dbd_get_entry(driver, row, 0);

        if (e)
            v = apr_pstrdup(fx->p, e);
    }
    return v;
}

/* ------------------------------------------------------------ fixtures */

static int group_setup(void **state)
{
    (void)state;
    if (apr_initialize() != APR_SUCCESS
        || apr_pool_create(&root, NULL) != APR_SUCCESS
        || apr_dbd_init(root) != APR_SUCCESS)
        return -1;
    if (apr_dbd_get_driver(root, "sqlite3", &driver) != APR_SUCCESS) {
        print_error("no apr_dbd sqlite3 driver\n");
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    apr_pool_destroy(root);
    apr_terminate();
    return 0;
}

static int setup(void **state)
{
    fixture_t *fx;
    apr_pool_t *p;
    const char *err = NULL;
    const char *open_err = NULL;

    if (apr_pool_create(&p, root) != APR_SUCCESS)
        return -1;
    fx = apr_pcalloc(p, sizeof(*fx));
    fx->p = p;
    fx->db.driver = driver;
    if (apr_dbd_open_ex(driver, p, ":memory:", &fx->db.handle, &open_err)
        != APR_SUCCESS) {
        print_error("apr_dbd_open: %s\n", open_err ? open_err : "?");
        return -1;
    }
    /* twice: the schema must be idempotent */
    if (apply_schema(p, fx->db.handle) || apply_schema(p, fx->db.handle))
        return -1;
    fx->db.prepared = NULL;
    if (lessons_store_prepare(&fx->db, p, NULL, &err) != LESSONS_STORE_OK) {
        print_error("lessons_store_prepare: %s\n", err ? err : "?");
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;

    if (fx) {
        apr_dbd_close(driver, fx->db.handle);
        apr_pool_destroy(fx->p);
    }
    return 0;
}

/* ------------------------------------------------------------- helpers */

static const char *store_name(lessons_store_e r)
{
    switch (r) {
    case LESSONS_STORE_OK:        return "OK";
    case LESSONS_STORE_NOT_FOUND: return "NOT_FOUND";
    case LESSONS_STORE_NO_LEVEL:  return "NO_LEVEL";
    case LESSONS_STORE_PRECONDITION: return "PRECONDITION";
    case LESSONS_STORE_ERROR:     return "ERROR";
    }
    return "?";
}

static void expect_store(lessons_store_e got, lessons_store_e want,
                         const char *err)
{
    if (got != want)
        print_error("expected %s, got %s (%s)\n", store_name(want),
                    store_name(got), err ? err : "no message");
    assert_int_equal(got, want);
}

static lessons_input_t input(int level, const char *title, int order,
                             const char *topic, const char *description,
                             int active)
{
    lessons_input_t in;

    memset(&in, 0, sizeof(in));
    in.has_level_id = in.has_title = in.has_order = 1;
    in.has_topic = in.has_description = in.has_is_active = 1;
    in.level_id = level;
    in.title = title;
    in.order = order;
    in.topic = topic;
    in.description = description;
    in.is_active = active;
    return in;
}

/* Nothing sent: an update input with every has_* clear. */
static lessons_input_t nothing_sent(void)
{
    lessons_input_t in;

    memset(&in, 0, sizeof(in));
    return in;
}

/* Every field of a lesson, as an update that sends them all. */
static lessons_input_t input_of(const lessons_lesson_t *l)
{
    return input(l->level_id, l->title, l->order, l->topic, l->description,
                 l->is_active);
}

static lessons_lesson_t get(fixture_t *fx, apr_int64_t id)
{
    lessons_lesson_t l;
    const char *err = NULL;

    memset(&l, 0, sizeof(l));
    expect_store(lessons_store_get(&fx->db, fx->p, id, &l, &err),
                 LESSONS_STORE_OK, err);
    return l;
}

static apr_array_header_t *list_all(fixture_t *fx)
{
    apr_array_header_t *out = NULL;
    const char *err = NULL;

    expect_store(lessons_store_list_all(&fx->db, fx->p, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_non_null(out);
    return out;
}

#define AT(list, i) (&APR_ARRAY_IDX((list), (i), lessons_lesson_t))

static long long lesson_count(fixture_t *fx)
{
    return scalar(fx, "SELECT COUNT(*) FROM lessons");
}

/* The whole lessons table as one text, to compare before and after. */
static const char *table_text(fixture_t *fx)
{
    const char *t = scalar_text(fx,
        "SELECT group_concat(id || '|' || level_id || '|' || title || '|' "
        "|| sort_order || '|' || topic || '|' || description || '|' "
        "|| is_active, ';') FROM (SELECT * FROM lessons ORDER BY id)");

    return t ? t : "";
}

static void assert_same_lesson(const lessons_lesson_t *a,
                               const lessons_lesson_t *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->level_id, b->level_id);
    assert_string_equal(a->level_name, b->level_name);
    assert_string_equal(a->level_code, b->level_code);
    assert_string_equal(a->title, b->title);
    assert_int_equal(a->order, b->order);
    assert_string_equal(a->topic, b->topic);
    assert_string_equal(a->description, b->description);
    assert_int_equal(a->is_active, b->is_active);
}

/* Create through the unit; the lesson it answers must be the one stored.
 * Returns the new id.
 */
static apr_int64_t create_input(fixture_t *fx, const lessons_input_t *in)
{
    lessons_lesson_t l, g;
    const char *err = NULL;
    lessons_store_e rc;

    memset(&l, 0, sizeof(l));
    rc = lessons_store_create(&fx->db, fx->p, in, &l, &err);
    expect_store(rc, LESSONS_STORE_OK, err);
    assert_true(l.id > 0);
    g = get(fx, l.id);
    assert_same_lesson(&l, &g);
    return l.id;
}

static apr_int64_t create(fixture_t *fx, int level, const char *title,
                          int order)
{
    lessons_input_t in = input(level, title, order, "topic", "descr", 1);

    return create_input(fx, &in);
}

/* Update through the unit, expecting OK; the lesson it answers must be
 * the one stored.
 */
static lessons_lesson_t update(fixture_t *fx, apr_int64_t id,
                               const lessons_input_t *in)
{
    lessons_lesson_t l, g;
    const char *err = NULL;
    lessons_store_e rc;

    memset(&l, 0, sizeof(l));
    rc = lessons_store_update(&fx->db, fx->p, id, in, NULL, &l, &err);
    expect_store(rc, LESSONS_STORE_OK, err);
    g = get(fx, id);
    assert_same_lesson(&l, &g);
    return l;
}

/* A write that must fail with want and change nothing at all; returns
 * the store's message.
 */
static const char *update_refused(fixture_t *fx, apr_int64_t id,
                                  const lessons_input_t *in,
                                  lessons_store_e want)
{
    const char *before = table_text(fx);
    lessons_lesson_t l;
    const char *err = NULL;
    lessons_store_e rc;

    rc = lessons_store_update(&fx->db, fx->p, id, in, NULL, &l, &err);
    expect_store(rc, want, err);
    assert_string_equal(table_text(fx), before);
    return err;
}

static const char *create_refused(fixture_t *fx, const lessons_input_t *in,
                                  lessons_store_e want)
{
    const char *before = table_text(fx);
    long long n = lesson_count(fx);
    lessons_lesson_t l;
    const char *err = NULL;
    lessons_store_e rc;

    rc = lessons_store_create(&fx->db, fx->p, in, &l, &err);
    expect_store(rc, want, err);
    if (want == LESSONS_STORE_ERROR) {
        assert_non_null(err);
        assert_true(strlen(err) > 0);
    }
    assert_int_equal(lesson_count(fx), n);
    assert_string_equal(table_text(fx), before);
    return err;
}

/* Run a statement that must succeed (explicit ids, triggers). */
static void exec_ok(fixture_t *fx, const char *sql)
{
    assert_int_equal(run_sql(fx->p, fx->db.handle, sql), 0);
}

/* Change the schema, then prepare again: apr_dbd_sqlite3 prepares with
 * the legacy sqlite3_prepare, whose statements a schema change expires
 * for good (mod_dbd prepares after the schema is in place, too).
 */
static void ddl_ok(fixture_t *fx, const char *sql)
{
    const char *err = NULL;
    lessons_store_e rc;

    exec_ok(fx, sql);
    fx->db.prepared = NULL;
    rc = lessons_store_prepare(&fx->db, fx->p, NULL, &err);
    expect_store(rc, LESSONS_STORE_OK, err);
}

/* --------------------------------------------------------------- tests */

static void test_schema_idempotent(void **state)
{
    fixture_t *fx = *state;

    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM levels"), 6);
    assert_string_equal(scalar_text(fx,
        "SELECT code || ':' || name FROM levels WHERE id = 1"),
        "A1:Beginner");
    assert_string_equal(scalar_text(fx,
        "SELECT code FROM levels WHERE id = 5"), "C1");
    assert_int_equal(lesson_count(fx), 0);
    /* and a third time on a database that has lessons */
    create(fx, 1, "Kept", 1);
    assert_int_equal(apply_schema(fx->p, fx->db.handle), 0);
    assert_int_equal(lesson_count(fx), 1);
    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM levels"), 6);
}

static void test_statements_table(void **state)
{
    fixture_t *fx = *state;
    apr_hash_t *seen = apr_hash_make(fx->p);
    int n;

    for (n = 0; lessons_statements[n].label; n++) {
        const lessons_statement_t *s = &lessons_statements[n];

        assert_true(strlen(s->label) > 0);
        assert_non_null(s->sql);
        assert_true(strlen(s->sql) > 0);
        assert_null(apr_hash_get(seen, s->label, APR_HASH_KEY_STRING));
        apr_hash_set(seen, s->label, APR_HASH_KEY_STRING, s);
        /* prepared under its label */
        assert_non_null(apr_hash_get(fx->db.prepared, s->label,
                                     APR_HASH_KEY_STRING));
    }
    assert_null(lessons_statements[n].sql);
    assert_true(n >= 7);        /* list, level, levels, get, ins, upd, del */
    assert_int_equal(apr_hash_count(fx->db.prepared), (unsigned)n);
}

/* The one-statement writes (PostgreSQL's; SQLite has no data-modifying
 * WITH, so they are not prepared here): create and update, each the
 * plain write with RETURNING into the lesson read.
 */
static void test_statements_returning(void **state)
{
    fixture_t *fx = *state;
    const char *plain[] = { "lessons_create", "lessons_update" };
    int n;

    for (n = 0; lessons_statements_returning[n].label; n++) {
        const lessons_statement_t *s = &lessons_statements_returning[n];
        const lessons_statement_t *w = NULL;
        const char *ret;
        int i;

        assert_true(n < 2);
        assert_string_equal(s->label,
                            apr_pstrcat(fx->p, plain[n], "_returning", NULL));
        for (i = 0; lessons_statements[i].label; i++) {
            if (strcmp(lessons_statements[i].label, plain[n]) == 0) {
                w = &lessons_statements[i];
            }
        }
        assert_non_null(w);
        /* the plain write's text, up to its own RETURNING if it has one */
        ret = strstr(w->sql, "RETURNING");
        assert_true(strncmp(s->sql, "WITH l AS (", 11) == 0);
        assert_true(strncmp(s->sql + 11, w->sql,
                            ret ? (size_t)(ret - w->sql)
                                : strlen(w->sql)) == 0);
        assert_non_null(strstr(s->sql, "RETURNING *) SELECT l.id, "));
        assert_null(apr_hash_get(fx->db.prepared, s->label,
                                 APR_HASH_KEY_STRING));
    }
    assert_int_equal(n, 2);
}

static void test_empty_lists(void **state)
{
    fixture_t *fx = *state;
    apr_array_header_t *out = NULL;
    const char *err = NULL;

    assert_int_equal(list_all(fx)->nelts, 0);
    expect_store(lessons_store_list_level(&fx->db, fx->p, 3, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_non_null(out);
    assert_int_equal(out->nelts, 0);
    out = NULL;
    expect_store(lessons_store_list_levels(&fx->db, fx->p, 1, 2, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_non_null(out);
    assert_int_equal(out->nelts, 0);
}

static void test_create_and_get(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in = input(1, "Hallo", 2, "Greetings", "Say hi", 1);
    apr_int64_t id1, id2;
    lessons_lesson_t l;

    id1 = create_input(fx, &in);
    in = input(5, "Konjunktiv II", 1, "Grammar", "", 0);
    id2 = create_input(fx, &in);
    assert_true(id2 > id1);

    l = get(fx, id1);
    assert_int_equal(l.id, id1);
    assert_int_equal(l.level_id, 1);
    assert_string_equal(l.level_name, "Beginner");
    assert_string_equal(l.level_code, "A1");
    assert_string_equal(l.title, "Hallo");
    assert_int_equal(l.order, 2);
    assert_string_equal(l.topic, "Greetings");
    assert_string_equal(l.description, "Say hi");
    assert_int_equal(l.is_active, 1);

    l = get(fx, id2);
    assert_int_equal(l.id, id2);
    assert_int_equal(l.level_id, 5);
    assert_string_equal(l.level_name, "Advanced");
    assert_string_equal(l.level_code, "C1");
    assert_string_equal(l.title, "Konjunktiv II");
    assert_int_equal(l.order, 1);
    assert_string_equal(l.topic, "Grammar");
    assert_string_equal(l.description, "");
    assert_int_equal(l.is_active, 0);

    assert_int_equal(lesson_count(fx), 2);
    /* what the database holds, read independently of the unit */
    assert_string_equal(scalar_text(fx, apr_psprintf(fx->p,
        "SELECT title FROM lessons WHERE id = %" APR_INT64_T_FMT, id2)),
        "Konjunktiv II");
    assert_int_equal(scalar(fx, apr_psprintf(fx->p,
        "SELECT is_active FROM lessons WHERE id = %" APR_INT64_T_FMT, id2)),
        0);
}

static void test_get_not_found(void **state)
{
    fixture_t *fx = *state;
    lessons_lesson_t l;
    const char *err = NULL;

    create(fx, 1, "Only", 1);
    expect_store(lessons_store_get(&fx->db, fx->p, 9999, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    expect_store(lessons_store_get(&fx->db, fx->p, 0, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    expect_store(lessons_store_get(&fx->db, fx->p, -1, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
}

static void test_list_all_id_order(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t ids[5];
    apr_array_header_t *all;
    int i;

    ids[0] = create(fx, 4, "d", 9);
    ids[1] = create(fx, 1, "a", 5);
    ids[2] = create(fx, 6, "f", 0);
    ids[3] = create(fx, 1, "b", 1);
    ids[4] = create(fx, 2, "c", 3);
    all = list_all(fx);
    assert_int_equal(all->nelts, 5);
    for (i = 0; i < 5; i++) {
        lessons_lesson_t g = get(fx, ids[i]);

        assert_int_equal(AT(all, i)->id, ids[i]);
        assert_same_lesson(AT(all, i), &g);
    }
    for (i = 1; i < 5; i++)
        assert_true(AT(all, i - 1)->id < AT(all, i)->id);
    assert_string_equal(AT(all, 0)->level_name, "Upper Intermediate");
    assert_string_equal(AT(all, 0)->level_code, "B2");
    assert_string_equal(AT(all, 2)->level_code, "C2");
}

static void test_list_level_id_order(void **state)
{
    fixture_t *fx = *state;
    apr_array_header_t *out = NULL;
    const char *err = NULL;
    apr_int64_t a, b, c;

    a = create(fx, 3, "first, order 5", 5);
    create(fx, 2, "other level", 0);
    b = create(fx, 3, "second, order 1", 1);
    create(fx, 4, "other level", 0);
    c = create(fx, 3, "third, order 0", 0);

    expect_store(lessons_store_list_level(&fx->db, fx->p, 3, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 3);
    /* by id, not by order */
    assert_int_equal(AT(out, 0)->id, a);
    assert_int_equal(AT(out, 1)->id, b);
    assert_int_equal(AT(out, 2)->id, c);
    assert_int_equal(AT(out, 0)->level_id, 3);
    assert_string_equal(AT(out, 0)->level_name, "Intermediate");
    assert_string_equal(AT(out, 0)->level_code, "B1");
    assert_string_equal(AT(out, 1)->title, "second, order 1");

    out = NULL;
    expect_store(lessons_store_list_level(&fx->db, fx->p, 99, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_non_null(out);
    assert_int_equal(out->nelts, 0);
}

static void test_list_levels_sort(void **state)
{
    fixture_t *fx = *state;
    apr_array_header_t *out = NULL;
    const char *err = NULL;
    apr_int64_t l2o1, l1o5, l1o1a, l1o1b, l2o0;

    /* inserted out of order on purpose */
    l2o1 = create(fx, 2, "A2 order 1", 1);
    l1o5 = create(fx, 1, "A1 order 5", 5);
    create(fx, 3, "B1, not in the group", 0);
    l1o1a = create(fx, 1, "A1 order 1 (first id)", 1);
    l2o0 = create(fx, 2, "A2 order 0", 0);
    create(fx, 4, "B2, not in the group", 0);
    l1o1b = create(fx, 1, "A1 order 1 (second id)", 1);

    expect_store(lessons_store_list_levels(&fx->db, fx->p, 1, 2, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 5);
    assert_int_equal(AT(out, 0)->id, l1o1a);
    assert_int_equal(AT(out, 1)->id, l1o1b);
    assert_int_equal(AT(out, 2)->id, l1o5);
    assert_int_equal(AT(out, 3)->id, l2o0);
    assert_int_equal(AT(out, 4)->id, l2o1);
    assert_string_equal(AT(out, 0)->level_code, "A1");
    assert_string_equal(AT(out, 3)->level_code, "A2");
    assert_string_equal(AT(out, 3)->level_name, "Elementary");
    assert_string_equal(AT(out, 2)->title, "A1 order 5");
}

static void test_list_levels_advanced(void **state)
{
    fixture_t *fx = *state;
    apr_array_header_t *out = NULL;
    const char *err = NULL;
    apr_int64_t c1, b2a, b2b;

    c1 = create(fx, 5, "C1", 0);
    create(fx, 6, "C2, not in the group", 0);
    b2a = create(fx, 4, "B2 order 2", 2);
    b2b = create(fx, 4, "B2 order 1", 1);
    create(fx, 3, "B1, not in the group", 0);

    expect_store(lessons_store_list_levels(&fx->db, fx->p, 4, 5, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 3);
    assert_int_equal(AT(out, 0)->id, b2b);
    assert_int_equal(AT(out, 1)->id, b2a);
    assert_int_equal(AT(out, 2)->id, c1);
    assert_string_equal(AT(out, 2)->level_name, "Advanced");
}

static void test_list_levels_sorted_by_level_not_argument(void **state)
{
    fixture_t *fx = *state;
    apr_array_header_t *out = NULL;
    const char *err = NULL;
    apr_int64_t l1, l2;

    l2 = create(fx, 2, "A2", 0);
    l1 = create(fx, 1, "A1", 9);
    expect_store(lessons_store_list_levels(&fx->db, fx->p, 2, 1, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 2);
    assert_int_equal(AT(out, 0)->id, l1);
    assert_int_equal(AT(out, 1)->id, l2);
}

static void test_create_no_level(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in = input(99, "Nowhere", 1, "", "", 1);

    create(fx, 1, "Existing", 1);
    create_refused(fx, &in, LESSONS_STORE_NO_LEVEL);
    in.level_id = 0;
    create_refused(fx, &in, LESSONS_STORE_NO_LEVEL);
    in.level_id = 7;
    create_refused(fx, &in, LESSONS_STORE_NO_LEVEL);
    assert_int_equal(lesson_count(fx), 1);
    assert_int_equal(list_all(fx)->nelts, 1);
    /* and the connection is free for the next write */
    create(fx, 6, "Next", 1);
    assert_int_equal(lesson_count(fx), 2);
}

static void test_create_answers_stored_lesson(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in = input(4, "Konjunktiv I", 3, "Grammar",
                               "Indirect speech", 0);
    lessons_lesson_t l, want = { 0, 4, "Upper Intermediate", "B2",
                                 "Konjunktiv I", 3, "Grammar",
                                 "Indirect speech", 0, 1, NULL };
    const char *err = NULL;
    lessons_store_e rc;

    memset(&l, 0, sizeof(l));
    rc = lessons_store_create(&fx->db, fx->p, &in, &l, &err);
    expect_store(rc, LESSONS_STORE_OK, err);
    assert_true(l.id > 0);
    want.id = l.id;
    assert_same_lesson(&l, &want);
    assert_int_equal(scalar(fx, "SELECT MAX(id) FROM lessons"), l.id);
}

/* A group commit: three creates in one transaction, one of them for a
 * level that does not exist.  The others are stored with what they
 * answer, each answer in its job's own pool.
 */
static void test_create_many(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in[3] = {
        input(1, "Erste", 1, "t", "d", 1),
        input(99, "Nirgends", 2, "t", "d", 1),
        input(6, "Dritte", 3, "t", "d", 0),
    };
    lessons_store_write_job_t job[3], *jobs[3];
    const char *err = NULL;
    lessons_lesson_t g;
    int i;

    for (i = 0; i < 3; i++) {
        memset(&job[i], 0, sizeof(job[i]));
        job[i].in = &in[i];
        job[i].rc = LESSONS_STORE_ERROR;
        assert_int_equal(apr_pool_create(&job[i].pool, fx->p), APR_SUCCESS);
        jobs[i] = &job[i];
    }
    expect_store(lessons_store_create_many(&fx->db, fx->p, jobs, 3, &err),
                 LESSONS_STORE_OK, err);
    expect_store(job[0].rc, LESSONS_STORE_OK, NULL);
    expect_store(job[1].rc, LESSONS_STORE_NO_LEVEL, NULL);
    expect_store(job[2].rc, LESSONS_STORE_OK, NULL);
    assert_true(job[2].out.id > job[0].out.id);
    assert_string_equal(job[2].out.level_code, "C2");
    assert_int_equal(job[2].out.is_active, 0);
    assert_int_equal(lesson_count(fx), 2);
    for (i = 0; i < 3; i += 2) {
        g = get(fx, job[i].out.id);
        assert_same_lesson(&job[i].out, &g);
        apr_pool_destroy(job[i].pool);
    }
    apr_pool_destroy(job[1].pool);
}

/* SQLite's transaction takes any number of creates: no statement per
 * count (those are PostgreSQL's, lessons_store_create_batch), no cap.
 */
static void test_create_many_unbounded_on_sqlite(void **state)
{
    fixture_t *fx = *state;
    enum { N = LESSONS_STORE_BATCH_MAX + 4 };
    lessons_input_t in[N];
    lessons_store_write_job_t job[N], *jobs[N];
    const char *err = NULL;
    int i;

    assert_int_equal(lessons_store_batch_max(&fx->db), INT_MAX);
    assert_null(apr_hash_get(fx->db.prepared, "lessons_create_batch_2",
                             APR_HASH_KEY_STRING));
    for (i = 0; i < N; i++) {
        in[i] = input(1 + i % 5, apr_psprintf(fx->p, "Viele %d", i), i, "t",
                      "d", 1);
        memset(&job[i], 0, sizeof(job[i]));
        job[i].in = &in[i];
        job[i].pool = fx->p;
        jobs[i] = &job[i];
    }
    expect_store(lessons_store_create_many(&fx->db, fx->p, jobs, N, &err),
                 LESSONS_STORE_OK, err);
    for (i = 0; i < N; i++) {
        expect_store(job[i].rc, LESSONS_STORE_OK, NULL);
        assert_string_equal(job[i].out.title, in[i].title);
        assert_int_equal(job[i].fault, LESSONS_DB_OK);
    }
    assert_int_equal(lesson_count(fx), N);
}

/* One create of a group fails (the database refuses it): nothing of the
 * group is kept, and the connection is outside any transaction.
 */
static void test_create_many_all_or_nothing(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t ok = input(1, "Gut", 1, "t", "d", 1);
    lessons_input_t bad = input(2, "Schlecht", 2, "t", "d", 1);
    lessons_store_write_job_t job[2], *jobs[2] = { &job[0], &job[1] };
    const char *err = NULL;

    ddl_ok(fx, "CREATE TRIGGER refuse BEFORE INSERT ON lessons "
               "WHEN NEW.title = 'Schlecht' "
               "BEGIN SELECT RAISE(ABORT, 'simulated fault'); END");
    memset(job, 0, sizeof(job));
    job[0].in = &ok;
    job[1].in = &bad;
    job[0].pool = job[1].pool = fx->p;
    expect_store(lessons_store_create_many(&fx->db, fx->p, jobs, 2, &err),
                 LESSONS_STORE_ERROR, err);
    assert_non_null(strstr(err, "simulated fault"));
    assert_int_equal(lesson_count(fx), 0);
    create(fx, 1, "Danach", 1);
    assert_int_equal(lesson_count(fx), 1);
}

static void test_update_all_fields(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 1, "Before", 1);
    apr_int64_t other = create(fx, 2, "Bystander", 3);
    lessons_input_t in = input(5, "After", 42, "New topic",
                               "New description", 0);
    lessons_lesson_t after, by;

    after = update(fx, id, &in);
    assert_int_equal(after.id, id);
    assert_int_equal(after.level_id, 5);
    assert_string_equal(after.level_name, "Advanced");
    assert_string_equal(after.level_code, "C1");
    assert_string_equal(after.title, "After");
    assert_int_equal(after.order, 42);
    assert_string_equal(after.topic, "New topic");
    assert_string_equal(after.description, "New description");
    assert_int_equal(after.is_active, 0);

    by = get(fx, other);
    assert_string_equal(by.title, "Bystander");
    assert_int_equal(by.level_id, 2);
    assert_int_equal(by.order, 3);
    assert_int_equal(lesson_count(fx), 2);

    /* and back to active */
    in = nothing_sent();
    in.has_is_active = 1;
    in.is_active = 1;
    assert_int_equal(update(fx, id, &in).is_active, 1);
    assert_int_equal(get(fx, id).is_active, 1);
}

static void test_update_unchanged_values_ok(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 3, "Same", 1);
    lessons_lesson_t l = get(fx, id), g;
    lessons_input_t in = input_of(&l);

    /* a PUT that changes nothing still finds the row */
    g = update(fx, id, &in);
    assert_same_lesson(&g, &l);
    /* so does one that sends nothing */
    in = nothing_sent();
    g = update(fx, id, &in);
    assert_same_lesson(&g, &l);
}

/* Each field alone: only that column changes. */
static void test_update_one_field_keeps_the_others(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t full = input(2, "Title", 7, "Topic", "Description", 1);
    apr_int64_t id = create_input(fx, &full);
    apr_int64_t other = create(fx, 3, "Bystander", 1);
    lessons_lesson_t want = get(fx, id), by = get(fx, other), got;
    lessons_input_t in;
    int f;

    for (f = 0; f < 6; f++) {
        in = nothing_sent();
        switch (f) {
        case 0:
            in.has_level_id = 1;
            in.level_id = want.level_id = 6;
            want.level_name = "Proficiency";
            want.level_code = "C2";
            break;
        case 1:
            in.has_title = 1;
            in.title = want.title = "New title";
            break;
        case 2:
            in.has_order = 1;
            in.order = want.order = 0;
            break;
        case 3:
            in.has_topic = 1;
            in.topic = want.topic = "";
            break;
        case 4:
            in.has_description = 1;
            in.description = want.description = "New description";
            break;
        default:
            in.has_is_active = 1;
            in.is_active = want.is_active = 0;
            break;
        }
        got = update(fx, id, &in);
        assert_same_lesson(&got, &want);
        got = get(fx, other);
        assert_same_lesson(&got, &by);
    }
}

/* Issue 6 §2: two clients read the lesson, one sends a title, the other a
 * topic.  Whatever each read, the other's change must survive: the
 * update writes only the fields it was sent.
 */
static void test_update_keeps_a_concurrent_change(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 1, "Old title", 1);
    lessons_input_t in = nothing_sent();
    lessons_lesson_t l;

    /* client B's change lands after client A read the lesson */
    exec_ok(fx, apr_psprintf(fx->p, "UPDATE lessons SET topic = 'B topic' "
                             "WHERE id = %" APR_INT64_T_FMT, id));
    in.has_title = 1;
    in.title = "A title";
    l = update(fx, id, &in);
    assert_string_equal(l.title, "A title");
    assert_string_equal(l.topic, "B topic");
    assert_string_equal(get(fx, id).topic, "B topic");
}

static void test_update_not_found(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 1, "Only", 1);
    lessons_lesson_t l = get(fx, id);
    lessons_input_t in = input_of(&l);

    in.title = "Ghost";
    update_refused(fx, id + 1000, &in, LESSONS_STORE_NOT_FOUND);
    update_refused(fx, 0, &in, LESSONS_STORE_NOT_FOUND);
    update_refused(fx, -1, &in, LESSONS_STORE_NOT_FOUND);
    /* not found even when the level is also wrong: no row to touch */
    in.level_id = 99;
    update_refused(fx, id + 1000, &in, LESSONS_STORE_NOT_FOUND);
    in = nothing_sent();
    update_refused(fx, id + 1000, &in, LESSONS_STORE_NOT_FOUND);
    assert_int_equal(lesson_count(fx), 1);
    assert_string_equal(get(fx, id).title, "Only");
}

static void test_update_no_level(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 2, "Stays", 4);
    lessons_lesson_t before = get(fx, id), after;
    lessons_input_t in = input(99, "Changed", 8, "changed", "changed", 0);

    update_refused(fx, id, &in, LESSONS_STORE_NO_LEVEL);
    in = nothing_sent();
    in.has_level_id = 1;
    in.level_id = 0;
    update_refused(fx, id, &in, LESSONS_STORE_NO_LEVEL);
    in.has_title = 1;
    in.title = "Changed";
    in.level_id = 7;
    update_refused(fx, id, &in, LESSONS_STORE_NO_LEVEL);
    after = get(fx, id);
    assert_same_lesson(&after, &before);
    assert_int_equal(lesson_count(fx), 1);
    /* the connection is free for the next write */
    in.level_id = 6;
    assert_string_equal(update(fx, id, &in).title, "Changed");
}

static void test_delete(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t a = create(fx, 1, "A", 1);
    apr_int64_t b = create(fx, 1, "B", 2);
    lessons_lesson_t l;
    const char *err = NULL;

    expect_store(lessons_store_delete(&fx->db, fx->p, a, NULL, &err),
                 LESSONS_STORE_OK, err);
    expect_store(lessons_store_get(&fx->db, fx->p, a, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    expect_store(lessons_store_delete(&fx->db, fx->p, a, NULL, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    expect_store(lessons_store_delete(&fx->db, fx->p, 9999, NULL, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    assert_int_equal(lesson_count(fx), 1);
    assert_string_equal(get(fx, b).title, "B");
    assert_int_equal(list_all(fx)->nelts, 1);
    assert_int_equal(AT(list_all(fx), 0)->id, b);
}

static void test_ids_not_reused(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t a = create(fx, 1, "A", 1);
    apr_int64_t b = create(fx, 1, "B", 1);
    const char *err = NULL;
    apr_int64_t c;

    expect_store(lessons_store_delete(&fx->db, fx->p, b, NULL, &err),
                 LESSONS_STORE_OK, err);
    c = create(fx, 1, "C", 1);
    assert_true(c > b);
    assert_true(c != a);
}

static void test_strings_round_trip(void **state)
{
    fixture_t *fx = *state;
    static const char title[] = "O'Brien's \"quoted\" \xc3\x9c" "bung";
    static const char topic[] = "back\\slash 100% %s %d ?1 $1 :x";
    static const char descr[] = "Line 1\nLine 2\t\xe6\x97\xa5\xe6\x9c\xac "
                                "\xf0\x9f\x98\x80 '' \"\" ;";
    lessons_input_t in = input(3, title, 7, topic, descr, 1);
    lessons_lesson_t l;
    apr_int64_t id = create_input(fx, &in);

    l = get(fx, id);
    assert_string_equal(l.title, title);
    assert_string_equal(l.topic, topic);
    assert_string_equal(l.description, descr);
    assert_string_equal(AT(list_all(fx), 0)->title, title);

    /* the same through update */
    in = nothing_sent();
    in.has_title = in.has_topic = 1;
    in.title = descr + 7;               /* "Line 2\t..." */
    in.topic = title;
    update(fx, id, &in);
    assert_string_equal(get(fx, id).title, descr + 7);
    assert_string_equal(get(fx, id).topic, title);
}

static void test_limits_in_characters(void **state)
{
    fixture_t *fx = *state;
    char title[200 * 2 + 1], descr[4000 * 3 + 1];
    lessons_input_t in;
    apr_int64_t id;
    int i;

    /* the API counts characters; so must the schema's CHECKs */
    for (i = 0; i < 200; i++)
        memcpy(title + 2 * i, "\xc3\xbc", 2);
    title[400] = '\0';
    for (i = 0; i < 4000; i++)
        memcpy(descr + 3 * i, "\xe2\x82\xac", 3);
    descr[12000] = '\0';
    in = input(1, title, 1, "", descr, 1);
    id = create_input(fx, &in);
    assert_string_equal(get(fx, id).title, title);
    assert_string_equal(get(fx, id).description, descr);
}

static void test_is_active_false_round_trip(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in = input(6, "Inactive", 0, "", "", 0);
    const char *err = NULL;
    apr_array_header_t *out = NULL;
    apr_int64_t id = create_input(fx, &in);

    assert_int_equal(get(fx, id).is_active, 0);
    assert_int_equal(AT(list_all(fx), 0)->is_active, 0);
    expect_store(lessons_store_list_level(&fx->db, fx->p, 6, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 1);
    assert_int_equal(AT(out, 0)->is_active, 0);
    assert_int_equal(AT(out, 0)->order, 0);
}

static void test_no_sql_injection(void **state)
{
    fixture_t *fx = *state;
    static const char evil[] = "x'); DROP TABLE lessons; --";
    static const char evil2[] = "' OR '1'='1";
    static const char evil3[] = "\"; DELETE FROM levels; --";
    lessons_input_t in = input(1, evil, 1, evil2, evil3, 1);
    lessons_lesson_t l;
    apr_int64_t keep, id;

    keep = create(fx, 2, "Bystander", 1);
    id = create_input(fx, &in);
    l = get(fx, id);
    assert_string_equal(l.title, evil);
    assert_string_equal(l.topic, evil2);
    assert_string_equal(l.description, evil3);
    /* both tables intact, read without the unit */
    assert_int_equal(lesson_count(fx), 2);
    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM levels"), 6);
    assert_string_equal(scalar_text(fx, apr_psprintf(fx->p,
        "SELECT title FROM lessons WHERE id = %" APR_INT64_T_FMT, id)),
        evil);
    assert_string_equal(get(fx, keep).title, "Bystander");

    /* through update as well */
    in = nothing_sent();
    in.has_title = in.has_topic = 1;
    in.title = evil3;
    in.topic = evil;
    update(fx, id, &in);
    assert_string_equal(get(fx, id).title, evil3);
    assert_string_equal(get(fx, id).topic, evil);
    assert_int_equal(lesson_count(fx), 2);
    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM levels"), 6);
}

static void test_constraint_error_is_atomic(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in = input(1, "", 1, "", "", 1);   /* CHECK fails */
    apr_int64_t id = create(fx, 1, "Good", 1);

    create_refused(fx, &in, LESSONS_STORE_ERROR);
    in = nothing_sent();
    in.has_title = in.has_order = 1;
    in.title = "";
    in.order = 9;
    update_refused(fx, id, &in, LESSONS_STORE_ERROR);
    assert_string_equal(get(fx, id).title, "Good");
    /* the connection is left outside any transaction: writes go on */
    in.title = "Better";
    assert_string_equal(update(fx, id, &in).title, "Better");
    create(fx, 2, "Next", 1);
    assert_int_equal(lesson_count(fx), 2);
}

#define INSERT_AT(id, level, title) \
    "INSERT INTO lessons (id, level_id, title, sort_order, topic, " \
    "description, is_active) VALUES (" id ", " level ", '" title "', 1, " \
    "'topic', 'descr', 1)"

/* Issue 11 §3: ids are 64-bit.  Rows past 2^31 are listed, fetched,
 * updated and deleted by their own id, never a truncated one.
 */
static void test_ids_past_32_bits(void **state)
{
    fixture_t *fx = *state;
    const apr_int64_t big = APR_INT64_C(2147483648);
    const apr_int64_t huge = APR_INT64_C(9000000000000000000);
    apr_array_header_t *out = NULL, *all;
    lessons_input_t in = nothing_sent();
    lessons_lesson_t l;
    const char *err = NULL;

    exec_ok(fx, INSERT_AT("2147483648", "1", "Past 2^31"));
    exec_ok(fx, INSERT_AT("9000000000000000000", "5", "Far out"));

    all = list_all(fx);
    assert_int_equal(all->nelts, 2);
    assert_true(AT(all, 0)->id == big);
    assert_true(AT(all, 1)->id == huge);
    assert_string_equal(AT(all, 1)->title, "Far out");

    l = get(fx, big);
    assert_true(l.id == big);
    assert_string_equal(l.title, "Past 2^31");
    l = get(fx, huge);
    assert_true(l.id == huge);
    assert_string_equal(l.level_code, "C1");

    expect_store(lessons_store_list_level(&fx->db, fx->p, 1, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 1);
    assert_true(AT(out, 0)->id == big);
    expect_store(lessons_store_list_levels(&fx->db, fx->p, 4, 5, &out, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(out->nelts, 1);
    assert_true(AT(out, 0)->id == huge);

    /* what 32 bits would make of them: nothing */
    expect_store(lessons_store_get(&fx->db, fx->p, 0, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    expect_store(lessons_store_get(&fx->db, fx->p, INT32_MIN, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    expect_store(lessons_store_get(&fx->db, fx->p,
                                   big + APR_INT64_C(4294967296), &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);

    in.has_title = 1;
    in.title = "Renamed";
    l = update(fx, huge, &in);
    assert_true(l.id == huge);
    assert_string_equal(l.title, "Renamed");
    assert_string_equal(get(fx, big).title, "Past 2^31");

    expect_store(lessons_store_delete(&fx->db, fx->p, big, NULL, &err),
                 LESSONS_STORE_OK, err);
    expect_store(lessons_store_get(&fx->db, fx->p, big, &l, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    assert_int_equal(lesson_count(fx), 1);
    assert_true(AT(list_all(fx), 0)->id == huge);
}

/* New ids follow the largest one, up to 2^63 - 1; past that the insert
 * fails and nothing is stored.
 */
static void test_create_after_big_ids(void **state)
{
    fixture_t *fx = *state;
    lessons_input_t in = input(2, "Last", 1, "", "", 1);
    apr_int64_t id;

    exec_ok(fx, INSERT_AT("2147483648", "1", "Past 2^31"));
    id = create(fx, 1, "Next", 1);
    assert_true(id == APR_INT64_C(2147483649));

    exec_ok(fx, INSERT_AT("9000000000000000000", "1", "Far out"));
    id = create(fx, 1, "Next", 1);
    assert_true(id == APR_INT64_C(9000000000000000001));

    exec_ok(fx, INSERT_AT("9223372036854775806", "1", "Nearly there"));
    id = create(fx, 1, "The very last", 1);
    assert_true(id == APR_INT64_MAX);
    assert_string_equal(get(fx, APR_INT64_MAX).title, "The very last");

    create_refused(fx, &in, LESSONS_STORE_ERROR);
    assert_int_equal(lesson_count(fx), 6);
}

/* With a trigger on lessons for INSERT and one for UPDATE (each given
 * from its timing on, "AFTER INSERT ON lessons BEGIN ... END"), a create
 * and an update are refused with ERROR, whose message has part, and
 * change nothing.  Once the triggers are gone both go through: no
 * transaction was left open on the connection.
 */
static void writes_refused(fixture_t *fx, const char *on_insert,
                           const char *on_update, const char *part)
{
    apr_int64_t id = create(fx, 1, "Kept", 1);
    lessons_input_t in = input(2, "Refused", 1, "", "", 1);
    const char *err;

    ddl_ok(fx, apr_pstrcat(fx->p, "CREATE TRIGGER on_insert ", on_insert,
                           NULL));
    ddl_ok(fx, apr_pstrcat(fx->p, "CREATE TRIGGER on_update ", on_update,
                           NULL));
    err = create_refused(fx, &in, LESSONS_STORE_ERROR);
    assert_non_null(strstr(err, part));
    err = update_refused(fx, id, &in, LESSONS_STORE_ERROR);
    assert_non_null(strstr(err, part));
    assert_string_equal(get(fx, id).title, "Kept");

    ddl_ok(fx, "DROP TRIGGER on_insert");
    ddl_ok(fx, "DROP TRIGGER on_update");
    create(fx, 2, "Accepted", 1);
    assert_string_equal(update(fx, id, &in).title, "Refused");
    assert_int_equal(lesson_count(fx), 2);
}

/* The write succeeds but its read-back fails (the triggers leave a value
 * the read-back refuses): rolled back, so the client's retry of a create
 * cannot duplicate it.
 */
static void test_failed_read_back_stores_nothing(void **state)
{
    writes_refused(*state,
                   "AFTER INSERT ON lessons BEGIN UPDATE lessons "
                   "SET sort_order = 'spoilt' WHERE id = NEW.id; END",
                   "AFTER UPDATE ON lessons BEGIN UPDATE lessons "
                   "SET sort_order = 'spoilt' WHERE id = NEW.id "
                   "AND sort_order <> 'spoilt'; END",
                   "malformed");
}

/* COMMIT itself fails (a deferred foreign key, checked only then), and
 * SQLite keeps the transaction open after a failed COMMIT: it must be
 * rolled back.
 */
static void test_failed_commit_stores_nothing(void **state)
{
    fixture_t *fx = *state;

    ddl_ok(fx, "CREATE TABLE audit (level_id INTEGER REFERENCES levels (id) "
               "DEFERRABLE INITIALLY DEFERRED)");
    writes_refused(fx,
                   "AFTER INSERT ON lessons "
                   "BEGIN INSERT INTO audit VALUES (99); END",
                   "AFTER UPDATE ON lessons "
                   "BEGIN INSERT INTO audit VALUES (99); END",
                   "COMMIT");
    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM audit"), 0);
}

/* A database whose lessons table refuses every write. */
static void test_write_refused_by_trigger(void **state)
{
    writes_refused(*state,
                   "BEFORE INSERT ON lessons "
                   "BEGIN SELECT RAISE(ABORT, 'simulated fault'); END",
                   "BEFORE UPDATE ON lessons "
                   "BEGIN SELECT RAISE(ABORT, 'simulated fault'); END",
                   "simulated fault");
}

static void test_database_error(void **state)
{
    fixture_t *fx = *state;
    apr_array_header_t *out = NULL;
    lessons_input_t in = input(1, "Nowhere", 1, "", "", 1);
    lessons_lesson_t l;
    const char *err = NULL;
    int nrows = 0;

    create(fx, 1, "Soon gone", 1);
    assert_int_equal(apr_dbd_query(driver, fx->db.handle, &nrows,
                                   "DROP TABLE lessons"), 0);
    assert_int_equal(lessons_store_list_all(&fx->db, fx->p, &out, &err),
                     LESSONS_STORE_ERROR);
    assert_non_null(err);
    assert_true(strlen(err) > 0);
    err = NULL;
    assert_int_equal(lessons_store_get(&fx->db, fx->p, 1, &l, &err),
                     LESSONS_STORE_ERROR);
    assert_non_null(err);
    err = NULL;
    assert_int_equal(lessons_store_create(&fx->db, fx->p, &in, &l, &err),
                     LESSONS_STORE_ERROR);
    assert_non_null(err);
    err = NULL;
    assert_int_equal(lessons_store_update(&fx->db, fx->p, 1, &in, NULL, &l, &err),
                     LESSONS_STORE_ERROR);
    assert_non_null(err);
    err = NULL;
    assert_int_equal(lessons_store_delete(&fx->db, fx->p, 1, NULL, &err),
                     LESSONS_STORE_ERROR);
    assert_non_null(err);
}

/* ----------------------------------------------- versions and If-Match */

static lessons_catalog_t catalog(fixture_t *fx)
{
    lessons_catalog_t cat;
    const char *err = NULL;

    memset(&cat, 0, sizeof(cat));
    expect_store(lessons_store_catalog(&fx->db, fx->p, &cat, &err),
                 LESSONS_STORE_OK, err);
    assert_non_null(cat.epoch);
    assert_true(strlen(cat.epoch) >= 8);
    return cat;
}

/* Every change of lessons or levels moves the catalog version, whoever
 * makes it; reads and refused writes do not.
 */
static void test_catalog_version_moves(void **state)
{
    fixture_t *fx = *state;
    lessons_catalog_t a = catalog(fx), b;
    lessons_input_t in = input(1, "Neu", 1, "t", "d", 1);
    apr_int64_t id;

    b = catalog(fx);
    assert_true(a.changes == b.changes);
    list_all(fx);
    assert_true(catalog(fx).changes == a.changes);

    id = create_input(fx, &in);
    b = catalog(fx);
    assert_true(b.changes > a.changes);
    assert_string_equal(b.epoch, a.epoch);

    a = b;
    in = input(99, "Kein Level", 1, "t", "d", 1);
    create_refused(fx, &in, LESSONS_STORE_NO_LEVEL);
    assert_true(catalog(fx).changes == a.changes);

    exec_ok(fx, apr_psprintf(fx->p, "UPDATE lessons SET title = 'SQL' "
                             "WHERE id = %" APR_INT64_T_FMT, id));
    b = catalog(fx);
    assert_true(b.changes > a.changes);
    a = b;
    exec_ok(fx, "UPDATE levels SET name = 'Anfang' WHERE id = 1");
    b = catalog(fx);
    assert_true(b.changes > a.changes);
    a = b;
    exec_ok(fx, apr_psprintf(fx->p, "DELETE FROM lessons WHERE id = %"
                             APR_INT64_T_FMT, id));
    assert_true(catalog(fx).changes > a.changes);
}

/* A lesson's version moves with each change of it, and of its level's
 * name or code; not with another lesson's.
 */
static void test_lesson_version_moves(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t a = create(fx, 1, "Eins", 1), b = create(fx, 2, "Zwei", 1);
    lessons_input_t in = nothing_sent();
    lessons_lesson_t la = get(fx, a), lb = get(fx, b), l;

    assert_true(la.version >= 1);
    assert_string_equal(la.epoch, catalog(fx).epoch);
    in.has_title = 1;
    in.title = "Eins!";
    l = update(fx, a, &in);
    assert_true(l.version > la.version);
    assert_true(get(fx, b).version == lb.version);

    la = get(fx, a);
    exec_ok(fx, "UPDATE levels SET name = 'Anfang' WHERE id = 1");
    assert_true(get(fx, a).version > la.version);
    assert_string_equal(get(fx, a).level_name, "Anfang");
    assert_true(get(fx, b).version == lb.version);
    la = get(fx, a);
    exec_ok(fx, "UPDATE levels SET name = name WHERE id = 1");
    assert_true(get(fx, a).version == la.version);
}

static lessons_if_match_t if_match(const lessons_lesson_t *l, apr_int64_t v)
{
    lessons_if_match_t im;

    memset(&im, 0, sizeof(im));
    im.asked = 1;
    im.n = 1;
    im.versions[0] = v;
    im.epoch = l->epoch;
    return im;
}

/* A run of updates in one transaction: one stored, one for a lesson
 * that does not exist, one whose If-Match is stale, one for a level that
 * does not exist.  Each job says what happened to it alone; only the
 * first changed anything, each answer in its job's own pool.
 */
static void test_update_many(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t a = create(fx, 1, "Eins", 1), b = create(fx, 2, "Zwei", 2);
    apr_int64_t c = create(fx, 3, "Drei", 3);
    lessons_lesson_t lb = get(fx, b), lc = get(fx, c);
    lessons_input_t title = nothing_sent(), level = nothing_sent();
    lessons_if_match_t stale = if_match(&lb, lb.version + 1);
    lessons_store_write_job_t job[4], *jobs[4];
    const char *err = NULL;
    int i;

    title.has_title = 1;
    title.title = "Neu";
    level.has_level_id = 1;
    level.level_id = 99;
    memset(job, 0, sizeof(job));
    for (i = 0; i < 4; i++) {
        job[i].in = &title;
        job[i].rc = LESSONS_STORE_ERROR;
        assert_int_equal(apr_pool_create(&job[i].pool, fx->p), APR_SUCCESS);
        jobs[i] = &job[i];
    }
    job[0].id = a;
    job[1].id = a + b + c;          /* no such lesson */
    job[2].id = b;
    job[2].im = &stale;
    job[3].id = c;
    job[3].in = &level;
    expect_store(lessons_store_update_many(&fx->db, fx->p, jobs, 4, &err),
                 LESSONS_STORE_OK, err);
    expect_store(job[0].rc, LESSONS_STORE_OK, NULL);
    expect_store(job[1].rc, LESSONS_STORE_NOT_FOUND, NULL);
    expect_store(job[2].rc, LESSONS_STORE_PRECONDITION, NULL);
    expect_store(job[3].rc, LESSONS_STORE_NO_LEVEL, NULL);
    assert_string_equal(job[0].out.title, "Neu");
    {
        lessons_lesson_t ga = get(fx, a), gb = get(fx, b), gc = get(fx, c);

        assert_same_lesson(&job[0].out, &ga);
        assert_same_lesson(&gb, &lb);
        assert_same_lesson(&gc, &lc);
    }
    for (i = 0; i < 4; i++) {
        apr_pool_destroy(job[i].pool);
    }
}

/* One statement, one write per row: a run that names a lesson twice is
 * refused whole, before anything is written.
 */
static void test_update_many_refuses_an_id_twice(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t a = create(fx, 1, "Eins", 1), b = create(fx, 2, "Zwei", 2);
    lessons_input_t in = nothing_sent();
    lessons_store_write_job_t job[3], *jobs[3] = { &job[0], &job[1],
                                                   &job[2] };
    const char *before = table_text(fx), *err = NULL;

    in.has_title = 1;
    in.title = "Doppelt";
    memset(job, 0, sizeof(job));
    job[0].id = a;
    job[1].id = b;
    job[2].id = a;
    job[0].in = job[1].in = job[2].in = &in;
    job[0].pool = job[1].pool = job[2].pool = fx->p;
    expect_store(lessons_store_update_many(&fx->db, fx->p, jobs, 3, &err),
                 LESSONS_STORE_ERROR, err);
    assert_non_null(strstr(err, "twice"));
    assert_string_equal(table_text(fx), before);
}

/* One update of a run fails (the database refuses it): nothing of the
 * run is kept, and the connection is outside any transaction.
 */
static void test_update_many_all_or_nothing(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t a = create(fx, 1, "Eins", 1), b = create(fx, 2, "Zwei", 2);
    lessons_input_t ok = nothing_sent(), bad = nothing_sent();
    lessons_store_write_job_t job[2], *jobs[2] = { &job[0], &job[1] };
    const char *before, *err = NULL;

    ddl_ok(fx, "CREATE TRIGGER refuse BEFORE UPDATE ON lessons "
               "WHEN NEW.title = 'Schlecht' "
               "BEGIN SELECT RAISE(ABORT, 'simulated fault'); END");
    before = table_text(fx);
    ok.has_title = bad.has_title = 1;
    ok.title = "Gut";
    bad.title = "Schlecht";
    memset(job, 0, sizeof(job));
    job[0].id = a;
    job[0].in = &ok;
    job[1].id = b;
    job[1].in = &bad;
    job[0].pool = job[1].pool = fx->p;
    expect_store(lessons_store_update_many(&fx->db, fx->p, jobs, 2, &err),
                 LESSONS_STORE_ERROR, err);
    assert_non_null(strstr(err, "simulated fault"));
    assert_string_equal(table_text(fx), before);
    update(fx, a, &ok);
    assert_string_equal(get(fx, a).title, "Gut");
}

static void test_update_if_match(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 1, "Eins", 1);
    lessons_lesson_t l = get(fx, id), out;
    lessons_input_t in = nothing_sent();
    lessons_if_match_t im;
    const char *before, *err = NULL;

    in.has_title = 1;
    in.title = "Zwei";
    /* a stale version, and the right version of another database */
    before = table_text(fx);
    im = if_match(&l, l.version + 1);
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_PRECONDITION, err);
    im = if_match(&l, l.version);
    im.epoch = "0123456789abcdef";
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_PRECONDITION, err);
    assert_string_equal(table_text(fx), before);

    /* one of several versions named is enough */
    im = if_match(&l, 12345);
    im.n = 2;
    im.versions[1] = l.version;
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_OK, err);
    assert_string_equal(get(fx, id).title, "Zwei");
    assert_true(out.version > l.version);

    /* the same tag again: the lesson has moved on */
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_PRECONDITION, err);

    /* "*" needs the lesson to exist; a missing level is still NO_LEVEL */
    memset(&im, 0, sizeof(im));
    im.asked = im.any = 1;
    expect_store(lessons_store_update(&fx->db, fx->p, id + 100, &in, &im,
                                      &out, &err), LESSONS_STORE_NOT_FOUND,
                 err);
    l = get(fx, id);
    im = if_match(&l, l.version);
    in.has_level_id = 1;
    in.level_id = 99;
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_NO_LEVEL, err);
}

/* A server's history (a promoted standby, a database restored from a
 * dump) is part of every epoch: the same lessons_database row and the
 * same version counters on another history never match a tag from the
 * first, in a read or in a write's If-Match.
 */
static void test_history_in_every_epoch(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 1, "Eins", 1);
    lessons_lesson_t l = get(fx, id), now, out;
    lessons_catalog_t before = catalog(fx), after;
    lessons_input_t in = nothing_sent();
    lessons_if_match_t im;
    const char *history = "00004001000000ab", *text, *err = NULL;

    fx->db.identity = history;
    after = catalog(fx);
    assert_string_equal(after.epoch,
                        apr_pstrcat(fx->p, before.epoch, history, NULL));
    assert_true(after.changes == before.changes);
    now = get(fx, id);
    assert_string_equal(now.epoch, apr_pstrcat(fx->p, l.epoch, history,
                                               NULL));
    assert_true(now.version == l.version);

    /* the tag of the other history: refused, nothing written */
    in.has_title = 1;
    in.title = "Zwei";
    text = table_text(fx);
    im = if_match(&l, l.version);
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_PRECONDITION, err);
    /* (a delete deletes no row: the handler tells 412 from 404) */
    expect_store(lessons_store_delete(&fx->db, fx->p, id, &im, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    /* the history's digits alone are no epoch */
    im.epoch = history;
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_PRECONDITION, err);
    assert_string_equal(table_text(fx), text);

    /* this history's tag: written */
    im = if_match(&now, now.version);
    expect_store(lessons_store_update(&fx->db, fx->p, id, &in, &im, &out,
                                      &err), LESSONS_STORE_OK, err);
    assert_string_equal(get(fx, id).title, "Zwei");
    assert_string_equal(out.epoch, now.epoch);

    /* A version read on this history names what this connection reads;
     * one read on another (a lease granted by a promoted standby, met
     * by a connection pooled on the old primary) does not, nor do the
     * history's digits alone or no epoch at all.
     */
    assert_true(lessons_store_catalog_here(&fx->db, &after));
    assert_false(lessons_store_catalog_here(&fx->db, &before));
    fx->db.identity = "00004001000000ac";
    assert_false(lessons_store_catalog_here(&fx->db, &after));
    before.epoch = fx->db.identity;
    assert_false(lessons_store_catalog_here(&fx->db, &before));
    before.epoch = NULL;
    assert_false(lessons_store_catalog_here(&fx->db, &before));
    /* an engine without histories (SQLite): one file, any version */
    fx->db.identity = NULL;
    assert_true(lessons_store_catalog_here(&fx->db, &after));
    assert_true(lessons_store_catalog_here(&fx->db, &before));
}

static void test_delete_if_match(void **state)
{
    fixture_t *fx = *state;
    apr_int64_t id = create(fx, 1, "Eins", 1);
    lessons_lesson_t l = get(fx, id);
    lessons_if_match_t im = if_match(&l, l.version + 1);
    const char *err = NULL;

    expect_store(lessons_store_delete(&fx->db, fx->p, id, &im, &err),
                 LESSONS_STORE_NOT_FOUND, err);
    assert_int_equal(lesson_count(fx), 1);
    im = if_match(&l, l.version);
    expect_store(lessons_store_delete(&fx->db, fx->p, id, &im, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(lesson_count(fx), 0);
}

/* --------------------------------------------------- Idempotency-Key */

#define CALLER_A "caller-a"
#define CALLER_B "caller-b"

static int keyed_prepared(fixture_t *fx)
{
    const char *err = NULL;

    if (!lessons_store_idempotency_ready(&fx->db)) {
        expect_store(lessons_store_prepare_idempotency(&fx->db, fx->p, NULL,
                                                       &err),
                     LESSONS_STORE_OK, err);
    }
    return lessons_store_idempotency_ready(&fx->db);
}

/* The test's answer: what the handler builds, told apart by the id. */
static int answer_of(void *baton, apr_pool_t *p, const lessons_lesson_t *l,
                     lessons_store_answer_t *out)
{
    int *fail = baton;

    if (fail && *fail) {
        return 0;
    }
    out->status = 201;
    out->id = l->id;
    out->location = apr_psprintf(p, "/api/lessons/%" APR_INT64_T_FMT, l->id);
    out->etag = apr_psprintf(p, "\"L%" APR_INT64_T_FMT ".%" APR_INT64_T_FMT
                             "\"", l->id, l->version);
    out->body = apr_psprintf(p, "{\"id\":%" APR_INT64_T_FMT ",\"title\":"
                             "\"%s\"}", l->id, l->title);
    out->len = strlen(out->body);
    return 1;
}

static lessons_store_key_t key_of(const char *caller, const char *key,
                                  const char *fp, apr_int64_t now)
{
    lessons_store_key_t k;

    memset(&k, 0, sizeof(k));
    k.caller = caller;
    k.key = key;
    k.fingerprint = fp;
    k.now = now;
    k.expires = now + 100;
    return k;
}

static lessons_store_e keyed(fixture_t *fx, const lessons_store_key_t *k,
                             const char *title, int level, int *fail,
                             lessons_store_key_e *outcome,
                             lessons_store_answer_t *ans, const char **err)
{
    lessons_input_t in = input(level, title, 1, "t", "d", 1);

    assert_true(keyed_prepared(fx));
    return lessons_store_create_keyed(&fx->db, fx->p, &in, k, answer_of,
                                      fail, outcome, ans, err);
}

/* A create with a key that must end as want (OK); its answer. */
static lessons_store_answer_t keyed_ok(fixture_t *fx,
                                       const lessons_store_key_t *k,
                                       const char *title,
                                       lessons_store_key_e want)
{
    lessons_store_answer_t ans;
    lessons_store_key_e outcome = (lessons_store_key_e)-1;
    const char *err = NULL;

    expect_store(keyed(fx, k, title, 1, NULL, &outcome, &ans, &err),
                 LESSONS_STORE_OK, err);
    assert_int_equal(outcome, want);
    return ans;
}

static long long key_rows(fixture_t *fx)
{
    return scalar(fx, "SELECT COUNT(*) FROM lessons_idempotency");
}

/* The keys' statements are not among the others: a database without
 * their table prepares those as before; prepared apart, they join.
 */
static void test_statements_idempotency(void **state)
{
    fixture_t *fx = *state;
    unsigned n = apr_hash_count(fx->db.prepared);
    int i;

    assert_false(lessons_store_idempotency_ready(&fx->db));
    for (i = 0; lessons_statements_idempotency[i].label; i++) {
        assert_null(apr_hash_get(fx->db.prepared,
                                 lessons_statements_idempotency[i].label,
                                 APR_HASH_KEY_STRING));
    }
    assert_int_equal(i, 3);
    assert_true(keyed_prepared(fx));
    /* SQLite's writers take turns: no claim statement */
    assert_int_equal(apr_hash_count(fx->db.prepared), n + 3);
    assert_null(apr_hash_get(fx->db.prepared, "lessons_key_claim",
                             APR_HASH_KEY_STRING));
}

/* The first request creates and keeps its answer with the key; the
 * same request again gets that answer and writes nothing; the same key
 * with another request is refused and writes nothing; another caller's
 * equal key is another key.
 */
static void test_keyed_create_replay_reuse(void **state)
{
    fixture_t *fx = *state;
    lessons_store_key_t k = key_of(CALLER_A, "k1", "fp1", 1000);
    lessons_store_answer_t first, again;
    lessons_catalog_t cat;
    const char *table;

    first = keyed_ok(fx, &k, "Erste", LESSONS_KEY_CREATED);
    assert_int_equal(first.status, 201);
    assert_true(first.id > 0);
    assert_int_equal(lesson_count(fx), 1);
    assert_string_equal(get(fx, first.id).title, "Erste");
    assert_int_equal(key_rows(fx), 1);
    assert_string_equal(scalar_text(fx,
        "SELECT caller || '|' || idem_key || '|' || fingerprint || '|' "
        "|| lesson_id || '|' || status || '|' || location || '|' || etag "
        "|| '|' || body || '|' || created_at || '|' || expires_at "
        "FROM lessons_idempotency"),
        apr_psprintf(fx->p, "caller-a|k1|fp1|%" APR_INT64_T_FMT "|201|%s|%s|"
                     "%s|1000|1100", first.id, first.location, first.etag,
                     first.body));

    table = table_text(fx);
    cat = catalog(fx);
    k.now = 1050;       /* a retry, later, with a new title in its body */
    again = keyed_ok(fx, &k, "Zweite", LESSONS_KEY_REPLAYED);
    assert_int_equal(again.status, 201);
    assert_true(again.id == first.id);
    assert_string_equal(again.location, first.location);
    assert_string_equal(again.etag, first.etag);
    assert_string_equal(again.body, first.body);
    assert_int_equal(again.len, strlen(first.body));
    assert_string_equal(table_text(fx), table);
    assert_true(catalog(fx).changes == cat.changes);
    assert_int_equal(key_rows(fx), 1);

    k.fingerprint = "fp2";
    again = keyed_ok(fx, &k, "Andere", LESSONS_KEY_REUSED);
    assert_null(again.body);        /* never another request's answer */
    assert_string_equal(table_text(fx), table);
    assert_int_equal(key_rows(fx), 1);

    k.caller = CALLER_B;
    again = keyed_ok(fx, &k, "Von B", LESSONS_KEY_CREATED);
    assert_true(again.id != first.id);
    assert_int_equal(lesson_count(fx), 2);
    assert_int_equal(key_rows(fx), 2);
}

/* Storing a key moves no version: the catalogue is lessons and levels. */
static void test_key_rows_move_no_version(void **state)
{
    fixture_t *fx = *state;
    lessons_catalog_t cat;

    assert_true(keyed_prepared(fx));
    cat = catalog(fx);
    exec_ok(fx, "INSERT INTO lessons_idempotency VALUES ('c', 'k', 'f', 1, "
                "201, '/x', '\"e\"', '{}', 1, 2)");
    exec_ok(fx, "DELETE FROM lessons_idempotency");
    assert_true(catalog(fx).changes == cat.changes);
}

/* A key past its lifetime is forgotten: the request runs again and the
 * key is kept anew, over the expired row.
 */
static void test_keyed_expired(void **state)
{
    fixture_t *fx = *state;
    lessons_store_key_t k = key_of(CALLER_A, "k", "fp1", 1000);
    lessons_store_answer_t a, b;

    a = keyed_ok(fx, &k, "Alt", LESSONS_KEY_CREATED);
    k.now = 1099;
    assert_true(keyed_ok(fx, &k, "Alt", LESSONS_KEY_REPLAYED).id == a.id);
    k.now = 1100;       /* expires_at: forgotten from then on */
    k.expires = 1200;
    k.fingerprint = "fp2";
    b = keyed_ok(fx, &k, "Neu", LESSONS_KEY_CREATED);
    assert_true(b.id != a.id);
    assert_int_equal(lesson_count(fx), 2);
    assert_int_equal(key_rows(fx), 1);
    assert_int_equal(scalar(fx, "SELECT lesson_id FROM lessons_idempotency"),
                     b.id);
    assert_int_equal(scalar(fx, "SELECT expires_at FROM lessons_idempotency"),
                     1200);
    assert_string_equal(scalar_text(fx, "SELECT fingerprint "
                                        "FROM lessons_idempotency"), "fp2");
}

/* Each create that keeps a key removes up to LESSONS_KEY_SWEEP expired
 * keys, oldest first; live keys stay.
 */
static void test_keyed_sweep(void **state)
{
    fixture_t *fx = *state;
    lessons_store_key_t k = key_of(CALLER_A, "new1", "fp", 1000);
    int i;

    assert_true(keyed_prepared(fx));
    for (i = 0; i < 6; i++) {
        exec_ok(fx, apr_psprintf(fx->p, "INSERT INTO lessons_idempotency "
                                 "VALUES ('old', 'k%d', 'f', 1, 201, '/x', "
                                 "'e', '{}', 1, %d)", i, 900 + i));
    }
    exec_ok(fx, "INSERT INTO lessons_idempotency VALUES ('live', 'k', 'f', "
                "1, 201, '/x', 'e', '{}', 1, 5000)");
    keyed_ok(fx, &k, "Eins", LESSONS_KEY_CREATED);
    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM lessons_idempotency "
                                "WHERE caller = 'old'"), 6 - LESSONS_KEY_SWEEP);
    assert_string_equal(scalar_text(fx, "SELECT group_concat(idem_key) FROM "
        "(SELECT idem_key FROM lessons_idempotency WHERE caller = 'old' "
        "ORDER BY idem_key)"), "k4,k5");
    k.key = "new2";
    keyed_ok(fx, &k, "Zwei", LESSONS_KEY_CREATED);
    assert_int_equal(scalar(fx, "SELECT COUNT(*) FROM lessons_idempotency "
                                "WHERE caller = 'old'"), 0);
    assert_int_equal(key_rows(fx), 3);      /* live, new1, new2 */
    /* a replay writes nothing, expired keys included */
    exec_ok(fx, "INSERT INTO lessons_idempotency VALUES ('old', 'x', 'f', "
                "1, 201, '/x', 'e', '{}', 1, 1)");
    keyed_ok(fx, &k, "Zwei", LESSONS_KEY_REPLAYED);
    assert_int_equal(key_rows(fx), 4);
}

/* The lesson and its key are kept together or not at all. */
static void test_keyed_all_or_nothing(void **state)
{
    fixture_t *fx = *state;
    lessons_store_key_t k = key_of(CALLER_A, "k", "fp", 1000);
    lessons_store_answer_t ans;
    lessons_store_key_e outcome;
    const char *err = NULL;
    int fail = 1;

    /* a level that does not exist: nothing kept, not even the key */
    expect_store(keyed(fx, &k, "Kein Level", 99, NULL, &outcome, &ans, &err),
                 LESSONS_STORE_NO_LEVEL, err);
    assert_int_equal(lesson_count(fx), 0);
    assert_int_equal(key_rows(fx), 0);
    /* no answer could be built: the lesson is not kept either */
    expect_store(keyed(fx, &k, "Ohne Antwort", 1, &fail, &outcome, &ans,
                       &err), LESSONS_STORE_ERROR, err);
    assert_non_null(strstr(err, "answer"));
    assert_int_equal(lesson_count(fx), 0);
    assert_int_equal(key_rows(fx), 0);
    /* the key cannot be stored (a trigger refuses it): nor the lesson */
    ddl_ok(fx, "CREATE TRIGGER refuse_key BEFORE INSERT ON "
               "lessons_idempotency BEGIN SELECT RAISE(ABORT, 'no keys'); "
               "END");
    expect_store(keyed(fx, &k, "Ohne Schlüssel", 1, NULL, &outcome, &ans,
                       &err), LESSONS_STORE_ERROR, err);
    assert_non_null(strstr(err, "no keys"));
    assert_int_equal(lesson_count(fx), 0);
    assert_int_equal(key_rows(fx), 0);
    /* and the connection is left outside any transaction */
    ddl_ok(fx, "DROP TRIGGER refuse_key");
    keyed_ok(fx, &k, "Endlich", LESSONS_KEY_CREATED);
    assert_int_equal(lesson_count(fx), 1);
    assert_int_equal(key_rows(fx), 1);
}

/* A database made before keys: their statements do not prepare, none of
 * them is left half there, and everything else is served.  The upgrade
 * file gives it the table the schema makes.
 */
static void test_keys_table_missing(void **state)
{
    fixture_t *fx = *state;
    const char *err = NULL, *made;
    unsigned n;
    lessons_lesson_t l;

    made = scalar_text(fx, "SELECT group_concat(sql, ';') FROM (SELECT sql "
                           "FROM sqlite_master WHERE tbl_name = "
                           "'lessons_idempotency' AND sql IS NOT NULL "
                           "ORDER BY name)");
    assert_non_null(made);
    ddl_ok(fx, "DROP TABLE lessons_idempotency");
    n = apr_hash_count(fx->db.prepared);
    expect_store(lessons_store_prepare_idempotency(&fx->db, fx->p, NULL,
                                                   &err),
                 LESSONS_STORE_ERROR, err);
    assert_non_null(strstr(err, "no such table"));
    assert_int_equal(apr_hash_count(fx->db.prepared), n);
    assert_false(lessons_store_idempotency_ready(&fx->db));
    create(fx, 1, "Ohne Schlüssel", 1);
    list_all(fx);
    memset(&l, 0, sizeof(l));
    expect_store(lessons_store_update(&fx->db, fx->p, 1, &(lessons_input_t){
                     .has_title = 1, .title = "Noch da" }, NULL, &l, &err),
                 LESSONS_STORE_OK, err);

    assert_int_equal(apply_file(fx->p, fx->db.handle, LESSONS_SQL_DIR
                                "/upgrade-idempotency.sqlite.sql"), 0);
    assert_int_equal(apply_file(fx->p, fx->db.handle, LESSONS_SQL_DIR
                                "/upgrade-idempotency.sqlite.sql"), 0);
    assert_string_equal(scalar_text(fx, "SELECT group_concat(sql, ';') FROM "
                                    "(SELECT sql FROM sqlite_master WHERE "
                                    "tbl_name = 'lessons_idempotency' AND "
                                    "sql IS NOT NULL ORDER BY name)"), made);
    fx->db.prepared = NULL;
    expect_store(lessons_store_prepare(&fx->db, fx->p, NULL, &err),
                 LESSONS_STORE_OK, err);
    {
        lessons_store_key_t k = key_of(CALLER_A, "k", "fp", 1000);

        keyed_ok(fx, &k, "Mit Schlüssel", LESSONS_KEY_CREATED);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_schema_idempotent),
        T(test_statements_table),
        T(test_statements_returning),
        T(test_empty_lists),
        T(test_create_and_get),
        T(test_get_not_found),
        T(test_list_all_id_order),
        T(test_list_level_id_order),
        T(test_list_levels_sort),
        T(test_list_levels_advanced),
        T(test_list_levels_sorted_by_level_not_argument),
        T(test_create_no_level),
        T(test_create_answers_stored_lesson),
        T(test_create_many),
        T(test_create_many_unbounded_on_sqlite),
        T(test_create_many_all_or_nothing),
        T(test_update_many),
        T(test_update_many_refuses_an_id_twice),
        T(test_update_many_all_or_nothing),
        T(test_update_all_fields),
        T(test_update_unchanged_values_ok),
        T(test_update_one_field_keeps_the_others),
        T(test_update_keeps_a_concurrent_change),
        T(test_update_not_found),
        T(test_update_no_level),
        T(test_delete),
        T(test_ids_not_reused),
        T(test_strings_round_trip),
        T(test_limits_in_characters),
        T(test_is_active_false_round_trip),
        T(test_no_sql_injection),
        T(test_constraint_error_is_atomic),
        T(test_ids_past_32_bits),
        T(test_create_after_big_ids),
        T(test_failed_read_back_stores_nothing),
        T(test_failed_commit_stores_nothing),
        T(test_write_refused_by_trigger),
        T(test_database_error),
        T(test_catalog_version_moves),
        T(test_lesson_version_moves),
        T(test_history_in_every_epoch),
        T(test_update_if_match),
        T(test_delete_if_match),
        T(test_statements_idempotency),
        T(test_keyed_create_replay_reuse),
        T(test_key_rows_move_no_version),
        T(test_keyed_expired),
        T(test_keyed_sweep),
        T(test_keyed_all_or_nothing),
        T(test_keys_table_missing),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
