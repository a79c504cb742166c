/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_metrics.c: the block is a header (the sources' names, when it
 * was made) and then one slot per process, each starting on a cache
 * line of its own.  Writers add with APR's atomics; the reader sums
 * without a lock, so it never stalls a request and a request never
 * waits for it.
 */
#include <stdarg.h>
#include <string.h>

#include "apr_atomic.h"
#include "apr_strings.h"
#include "apr_tables.h"

#include "ops/lessons_metrics.h"

#define LESSONS_METRICS_MAGIC   0x4c4d5433u     /* "LMT3": the slot's
                                                 * layout */
#define LESSONS_METRICS_LINE    64              /* a cache line */

struct lessons_metrics_t {
    apr_uint32_t magic;
    apr_uint32_t slots;
    apr_time_t started;
    /* Per source: the newest good fetch of any process ever, so that it
     * outlives the process that made it.
     */
    volatile apr_uint64_t last_fetched[LESSONS_METRICS_SOURCES];
    char names[LESSONS_METRICS_SOURCES][LESSONS_METRICS_SOURCE_LEN];
};

struct lessons_metrics_slot_t {
    volatile apr_uint32_t owner;    /* pid, 0: free */
    lessons_metrics_t *block;
    volatile apr_uint64_t v[LESSONS_M_COUNT];
    volatile apr_uint64_t src[LESSONS_METRICS_SOURCES][LESSONS_SRC_COUNT];
};

static apr_size_t lessons_metrics_header_size(void)
{
    return APR_ALIGN(sizeof(lessons_metrics_t), LESSONS_METRICS_LINE);
}

static apr_size_t lessons_metrics_stride(void)
{
    return APR_ALIGN(sizeof(lessons_metrics_slot_t), LESSONS_METRICS_LINE);
}

static lessons_metrics_slot_t *lessons_metrics_slot(lessons_metrics_t *m,
                                                    apr_uint32_t i)
{
    return (lessons_metrics_slot_t *)((char *)m
                                      + lessons_metrics_header_size()
                                      + i * lessons_metrics_stride());
}

apr_size_t lessons_metrics_size(int slots)
{
    return slots > 0 ? lessons_metrics_header_size()
                       + (apr_size_t)slots * lessons_metrics_stride()
                     : 0;
}

lessons_metrics_t *lessons_metrics_attach(void *mem, apr_size_t size,
                                          int slots, int fresh,
                                          apr_time_t now)
{
    lessons_metrics_t *m = mem;

    if (!mem || slots <= 0 || size < lessons_metrics_size(slots)) {
        return NULL;
    }
    if (fresh || m->magic != LESSONS_METRICS_MAGIC
        || m->slots != (apr_uint32_t)slots) {
        memset(mem, 0, lessons_metrics_size(slots));
        m->magic = LESSONS_METRICS_MAGIC;
        m->slots = (apr_uint32_t)slots;
        m->started = now;
    }
    return m;
}

/* A new owner's slot: the gauges of the one before are not its own. */
static lessons_metrics_slot_t *lessons_metrics_take(lessons_metrics_t *m,
                                                    lessons_metrics_slot_t *s)
{
    int i;

    s->block = m;
    for (i = LESSONS_M_COUNTERS; i < LESSONS_M_COUNT; i++) {
        apr_atomic_set64(&s->v[i], 0);
    }
    for (i = 0; i < LESSONS_METRICS_SOURCES; i++) {
        int j;

        for (j = LESSONS_SRC_FETCHED; j < LESSONS_SRC_COUNT; j++) {
            apr_atomic_set64(&s->src[i][j], 0);
        }
    }
    return s;
}

lessons_metrics_slot_t *lessons_metrics_claim(lessons_metrics_t *m,
                                              apr_uint32_t pid,
                                              int (*alive)(void *baton,
                                                           apr_uint32_t pid),
                                              void *baton)
{
    apr_uint32_t i, owner;

    if (!m || pid == 0) {
        return NULL;
    }
    for (i = 0; i < m->slots; i++) {
        lessons_metrics_slot_t *s = lessons_metrics_slot(m, i);

        if (apr_atomic_cas32(&s->owner, pid, 0) == 0) {
            return lessons_metrics_take(m, s);
        }
    }
    /* Every slot has an owner: take one from a process that died
     * without giving it back (a crash).
     */
    for (i = 0; alive && i < m->slots; i++) {
        lessons_metrics_slot_t *s = lessons_metrics_slot(m, i);

        owner = apr_atomic_read32(&s->owner);
        if (owner && !alive(baton, owner)
            && apr_atomic_cas32(&s->owner, pid, owner) == owner) {
            return lessons_metrics_take(m, s);
        }
    }
    return NULL;
}

void lessons_metrics_release(lessons_metrics_slot_t *slot)
{
    if (slot) {
        lessons_metrics_take(slot->block, slot);
        apr_atomic_set32(&slot->owner, 0);
    }
}

void lessons_metrics_add(lessons_metrics_slot_t *slot,
                         lessons_metrics_id_e id, apr_uint64_t n)
{
    if (slot && (int)id >= 0 && id < LESSONS_M_COUNTERS) {
        apr_atomic_add64(&slot->v[id], n);
    }
}

void lessons_metrics_set(lessons_metrics_slot_t *slot,
                         lessons_metrics_id_e id, apr_uint64_t value)
{
    if (slot && id >= LESSONS_M_COUNTERS && id < LESSONS_M_COUNT) {
        apr_atomic_set64(&slot->v[id], value);
    }
}

lessons_metrics_id_e lessons_metrics_request_id(lessons_metrics_op_e op,
                                                int status)
{
    int class = status >= 500 ? 3 : status >= 400 ? 2 : status >= 300 ? 1
              : 0;

    if ((int)op < 0 || op >= LESSONS_OP_COUNT) {
        op = LESSONS_OP_OTHER;
    }
    return (lessons_metrics_id_e)(LESSONS_M_REQUESTS
                                  + op * LESSONS_CLASS_COUNT + class);
}

/* Clear a source's figures in every slot, for a name that takes over
 * its index.
 */
static void lessons_metrics_source_clear(lessons_metrics_t *m, int source)
{
    apr_uint32_t i;
    int j;

    for (i = 0; i < m->slots; i++) {
        for (j = 0; j < LESSONS_SRC_COUNT; j++) {
            apr_atomic_set64(&lessons_metrics_slot(m, i)->src[source][j], 0);
        }
    }
    apr_atomic_set64(&m->last_fetched[source], 0);
}

static int lessons_metrics_kept(const char *name, const char *const *keep,
                                int nkeep)
{
    int i;

    for (i = 0; i < nkeep; i++) {
        if (keep[i] && strcmp(keep[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

int lessons_metrics_source(lessons_metrics_t *m, const char *name,
                           const char *const *keep, int nkeep)
{
    int i, free_at = -1;

    if (!m || !name || !*name
        || strlen(name) >= LESSONS_METRICS_SOURCE_LEN) {
        return -1;
    }
    for (i = 0; i < LESSONS_METRICS_SOURCES; i++) {
        if (strcmp(m->names[i], name) == 0) {
            return i;
        }
        if (free_at < 0 && !m->names[i][0]) {
            free_at = i;
        }
    }
    for (i = 0; free_at < 0 && i < LESSONS_METRICS_SOURCES; i++) {
        if (!lessons_metrics_kept(m->names[i], keep, nkeep)) {
            free_at = i;
        }
    }
    if (free_at < 0) {
        return -1;
    }
    lessons_metrics_source_clear(m, free_at);
    apr_cpystrn(m->names[free_at], name, LESSONS_METRICS_SOURCE_LEN);
    return free_at;
}

static int lessons_metrics_source_ok(const lessons_metrics_slot_t *slot,
                                     int source, lessons_metrics_src_e what)
{
    return slot && source >= 0 && source < LESSONS_METRICS_SOURCES
           && (int)what >= 0 && what < LESSONS_SRC_COUNT;
}

void lessons_metrics_source_add(lessons_metrics_slot_t *slot, int source,
                                lessons_metrics_src_e what, apr_uint64_t n)
{
    if (lessons_metrics_source_ok(slot, source, what)) {
        apr_atomic_add64(&slot->src[source][what], n);
    }
}

/* *mem = max(*mem, value), whoever else writes it. */
static void lessons_metrics_raise(volatile apr_uint64_t *mem,
                                  apr_uint64_t value)
{
    apr_uint64_t seen = apr_atomic_read64(mem);

    while (seen < value) {
        apr_uint64_t was = apr_atomic_cas64(mem, value, seen);

        if (was == seen) {
            break;
        }
        seen = was;
    }
}

void lessons_metrics_source_set(lessons_metrics_slot_t *slot, int source,
                                lessons_metrics_src_e what,
                                apr_uint64_t value)
{
    if (lessons_metrics_source_ok(slot, source, what)) {
        apr_atomic_set64(&slot->src[source][what], value);
        if (what == LESSONS_SRC_FETCHED) {
            lessons_metrics_raise(&slot->block->last_fetched[source], value);
        }
    }
}

void lessons_metrics_read(lessons_metrics_t *m,
                          int (*alive)(void *baton, apr_uint32_t pid),
                          void *baton, lessons_metrics_sum_t *sum)
{
    apr_time_t newest[LESSONS_METRICS_SOURCES];
    int no_set[LESSONS_METRICS_SOURCES];
    apr_uint32_t i, owner;
    int j, live;

    memset(sum, 0, sizeof(*sum));
    memset(newest, 0, sizeof(newest));
    memset(no_set, 0, sizeof(no_set));
    if (!m) {
        return;
    }
    sum->slots = (int)m->slots;
    sum->started = m->started;
    for (i = 0; i < m->slots; i++) {
        lessons_metrics_slot_t *s = lessons_metrics_slot(m, i);

        owner = apr_atomic_read32(&s->owner);
        live = owner && (!alive || alive(baton, owner));
        sum->processes += live;
        for (j = 0; j < LESSONS_M_COUNT; j++) {
            if (j < LESSONS_M_COUNTERS || live) {
                sum->v[j] += apr_atomic_read64(&s->v[j]);
            }
        }
        for (j = 0; j < LESSONS_METRICS_SOURCES; j++) {
            apr_time_t fetched, installed;

            sum->src[j].failures +=
                apr_atomic_read64(&s->src[j][LESSONS_SRC_FAILURES]);
            sum->src[j].refetches +=
                apr_atomic_read64(&s->src[j][LESSONS_SRC_REFETCHES]);
            if (!live) {
                continue;
            }
            installed = (apr_time_t)apr_atomic_read64(
                &s->src[j][LESSONS_SRC_INSTALLED]);
            if (installed > sum->src[j].installed) {
                sum->src[j].installed = installed;
            }
            no_set[j] |= apr_atomic_read64(&s->src[j][LESSONS_SRC_NO_SET])
                         != 0;
            fetched = (apr_time_t)apr_atomic_read64(
                &s->src[j][LESSONS_SRC_FETCHED]);
            if (fetched <= 0) {
                continue;
            }
            if (!sum->src[j].oldest_in_use
                || fetched < sum->src[j].oldest_in_use) {
                sum->src[j].oldest_in_use = fetched;
            }
            if (fetched > newest[j]) {
                newest[j] = fetched;
                sum->src[j].keys =
                    apr_atomic_read64(&s->src[j][LESSONS_SRC_KEYS]);
            }
        }
    }
    for (j = 0; j < LESSONS_METRICS_SOURCES; j++) {
        sum->src[j].name = m->names[j][0] ? m->names[j] : NULL;
        sum->src[j].last_fetched =
            (apr_time_t)apr_atomic_read64(&m->last_fetched[j]);
        sum->src[j].held = sum->src[j].installed > 0 && !no_set[j];
    }
}

/* --- the formats ---------------------------------------------------- */

static const char *const lessons_op_names[LESSONS_OP_COUNT] = {
    "list", "get", "beginner", "advanced", "level", "create", "update",
    "delete", "other"
};

static const char *const lessons_class_names[LESSONS_CLASS_COUNT] = {
    "2xx", "3xx", "4xx", "5xx"
};

static const char *const lessons_refusal_names[LESSONS_REFUSED_COUNT] = {
    "no_token", "bad_header", "malformed", "algorithm", "crit",
    "signature", "claims", "no_exp", "expired", "not_yet_valid", "issuer",
    "audience", "type", "iat", "unknown_kid", "unknown_issuer",
    "user_claim", "other",
    "insufficient_scope", "no_keys", "dpop"
};

static const char *const lessons_fault_names[LESSONS_FAULT_COUNT] = {
    "no_connection", "unavailable", "readonly", "full", "moved",
    "no_schema", "stale", "outcome_unknown", "error"
};

static const char *const lessons_write_names[3] = {
    "create", "update", "delete"
};

static const char *const lessons_catalog_names[2] = {
    "statement", "lease"
};

static const char *const lessons_key_names[5] = {
    "stored", "replayed", "reused", "in_flight", "refused"
};

const char *lessons_metrics_op_name(lessons_metrics_op_e op)
{
    return (int)op >= 0 && op < LESSONS_OP_COUNT ? lessons_op_names[op]
                                                  : NULL;
}

const char *lessons_metrics_refusal_name(lessons_metrics_refusal_e reason)
{
    return (int)reason >= 0 && reason < LESSONS_REFUSED_COUNT
           ? lessons_refusal_names[reason] : NULL;
}

const char *lessons_metrics_fault_name(lessons_metrics_fault_e fault)
{
    return (int)fault >= 0 && fault < LESSONS_FAULT_COUNT
           ? lessons_fault_names[fault] : NULL;
}

/* Text grows as an array of pieces, joined once at the end. */
static void lessons_out(apr_array_header_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void lessons_out(apr_array_header_t *out, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    APR_ARRAY_PUSH(out, const char *) = apr_pvsprintf(out->pool, fmt, ap);
    va_end(ap);
}

/* HELP and TYPE of a family. */
static void lessons_family(apr_array_header_t *out, const char *name,
                           const char *type, const char *help)
{
    lessons_out(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the format writes it: \, " and newline escaped. */
static const char *lessons_label(apr_pool_t *p, const char *v)
{
    apr_size_t n = 0;
    const char *s;
    char *e, *q;

    for (s = v; *s; s++) {
        n += (*s == '\\' || *s == '"' || *s == '\n') ? 2 : 1;
    }
    e = q = apr_palloc(p, n + 1);
    for (s = v; *s; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            *q++ = '\\';
            *q++ = *s == '\n' ? 'n' : *s;
        }
        else {
            *q++ = *s;
        }
    }
    *q = '\0';
    return e;
}

static void lessons_sample(apr_array_header_t *out, const char *name,
                           apr_uint64_t v)
{
    lessons_out(out, "%s %" APR_UINT64_T_FMT "\n", name, v);
}

/* Seconds since the epoch, to the millisecond. */
static void lessons_seconds(apr_array_header_t *out, const char *name,
                            const char *labels, apr_time_t t)
{
    lessons_out(out, "%s%s %" APR_TIME_T_FMT ".%03" APR_TIME_T_FMT "\n",
                name, labels, apr_time_sec(t), apr_time_msec(t) % 1000);
}

/* The index of a source in a snapshot, or -1. */
static int lessons_sum_source(const lessons_metrics_sum_t *sum,
                              const char *name)
{
    int i;

    for (i = 0; name && i < LESSONS_METRICS_SOURCES; i++) {
        if (sum->src[i].name && strcmp(sum->src[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

static void lessons_sources(apr_array_header_t *out,
                            const lessons_metrics_sum_t *sum,
                            const char *const *names, int count,
                            apr_time_t now)
{
    static const char *const family[][3] = {
        { "lessons_keys_last_fetch_timestamp_seconds", "gauge",
          "When a process last fetched a good key set from the source "
          "(0: never)." },
        { "lessons_keys_age_seconds", "gauge",
          "Age of the oldest key set a process uses: seconds since it was "
          "fetched (no sample: no process has a set)." },
        { "lessons_keys", "gauge",
          "Keys in the newest set fetched from the source." },
        { "lessons_keys_fetch_failures_total", "counter",
          "Fetches of the source that failed or gave a refused set." },
        { "lessons_keys_refetches_total", "counter",
          "Fetches woken by a token naming a kid the set lacks." },
        { "lessons_keys_set_held", "gauge",
          "1 when the live processes hold a usable key set from the "
          "source; 0 when one has ended its fetches without one, or none "
          "has one yet." },
        { "lessons_keys_set_installed_timestamp_seconds", "gauge",
          "When the newest key set a live process holds from the source "
          "was taken into use (0: none holds one)." }
    };
    const int families = (int)(sizeof(family) / sizeof(family[0]));
    apr_pool_t *p = out->pool;
    int f, i, at;

    for (f = 0; f < families; f++) {
        lessons_family(out, family[f][0], family[f][1], family[f][2]);
        for (i = 0; i < count; i++) {
            const char *labels;

            if ((at = lessons_sum_source(sum, names[i])) < 0) {
                continue;
            }
            labels = apr_psprintf(p, "{source=\"%s\"}",
                                  lessons_label(p, names[i]));
            switch (f) {
            case 0:
                lessons_seconds(out, family[f][0], labels,
                                sum->src[at].last_fetched);
                break;
            case 6:
                lessons_seconds(out, family[f][0], labels,
                                sum->src[at].installed);
                break;
            case 1:
                if (sum->src[at].oldest_in_use) {
                    apr_time_t age = now - sum->src[at].oldest_in_use;

                    lessons_seconds(out, family[f][0], labels,
                                    age > 0 ? age : 0);
                }
                break;
            default:
                lessons_out(out, "%s%s %" APR_UINT64_T_FMT "\n",
                            family[f][0], labels,
                            f == 2 ? sum->src[at].keys
                            : f == 3 ? sum->src[at].failures
                            : f == 4 ? sum->src[at].refetches
                                     : (apr_uint64_t)sum->src[at].held);
                break;
            }
        }
    }
}

/* The families after lessons_requests_total (two labels): each one
 * number, or one label over a run of numbers.
 */
typedef struct {
    const char *name, *type, *help;
    lessons_metrics_id_e first;
    const char *label;              /* NULL: one sample, no label */
    const char *const *values;      /* the label's values, n of them */
    int n;
} lessons_family_t;

static const lessons_family_t lessons_families[] = {
    { "lessons_response_cache_hits_total", "counter",
      "GETs answered from a process's response cache.",
      LESSONS_M_CACHE_HITS, NULL, NULL, 0 },
    { "lessons_response_cache_misses_total", "counter",
      "GETs that built their answer (nothing kept at the current "
      "catalogue version).", LESSONS_M_CACHE_MISSES, NULL, NULL, 0 },
    { "lessons_response_cache_evictions_total", "counter",
      "Answers dropped to stay within LessonsCacheSize.",
      LESSONS_M_CACHE_EVICTIONS, NULL, NULL, 0 },
    { "lessons_response_cache_bytes", "gauge",
      "Bytes the response caches of the live processes hold.",
      LESSONS_M_CACHE_BYTES, NULL, NULL, 0 },
    { "lessons_response_cache_entries", "gauge",
      "Answers the response caches of the live processes hold.",
      LESSONS_M_CACHE_ENTRIES, NULL, NULL, 0 },
    { "lessons_token_cache_hits_total", "counter",
      "Tokens found in a process's verified-token cache.",
      LESSONS_M_TOKEN_HITS, NULL, NULL, 0 },
    { "lessons_token_cache_misses_total", "counter",
      "Tokens verified in full (not in the cache).",
      LESSONS_M_TOKEN_MISSES, NULL, NULL, 0 },
    { "lessons_token_refusals_total", "counter",
      "Requests the token gate refused, by reason.", LESSONS_M_REFUSED,
      "reason", lessons_refusal_names, LESSONS_REFUSED_COUNT },
    { "lessons_db_waits_total", "counter",
      "Requests that waited for a pooled database connection.",
      LESSONS_M_DB_WAITS, NULL, NULL, 0 },
    { "lessons_db_timeouts_total", "counter",
      "Requests answered 503 when the database did not answer within "
      "LessonsDBTimeout.", LESSONS_M_DB_TIMEOUTS, NULL, NULL, 0 },
    { "lessons_db_sheds_total", "counter",
      "Requests answered 503 at once: the database had stopped answering "
      "and enough requests waited.", LESSONS_M_DB_SHEDS, NULL, NULL, 0 },
    { "lessons_db_faults_total", "counter",
      "Database faults met by requests, by class.", LESSONS_M_DB_FAULTS,
      "class", lessons_fault_names, LESSONS_FAULT_COUNT },
    { "lessons_writes_total", "counter",
      "Writes committed, by operation.", LESSONS_M_WRITES,
      "operation", lessons_write_names, 3 },
    { "lessons_idempotency_keys_total", "counter",
      "Creates that sent an Idempotency-Key, by what became of it.",
      LESSONS_M_KEYS, "outcome", lessons_key_names, 5 },
    { "lessons_catalog_versions_total", "counter",
      "Catalogue versions GETs took: from a statement to the database "
      "(their own, or one they sent for their process's waiting GETs), "
      "or from the server's read lease (LessonsDBLease) with none.",
      LESSONS_M_CATALOG, "source", lessons_catalog_names, 2 }
};

const char *lessons_metrics_prometheus(apr_pool_t *p,
                                       const lessons_metrics_sum_t *sum,
                                       const char *const *names, int count,
                                       apr_time_t now, apr_size_t *len)
{
    apr_array_header_t *out = apr_array_make(p, 256, sizeof(const char *));
    const char *text;
    int op, c, i;

    lessons_family(out, "lessons_requests_total", "counter",
                   "API requests answered, by operation and status class.");
    for (op = 0; op < LESSONS_OP_COUNT; op++) {
        for (c = 0; c < LESSONS_CLASS_COUNT; c++) {
            lessons_out(out, "lessons_requests_total{operation=\"%s\","
                        "status=\"%s\"} %" APR_UINT64_T_FMT "\n",
                        lessons_op_names[op], lessons_class_names[c],
                        sum->v[LESSONS_M_REQUESTS + op * LESSONS_CLASS_COUNT
                               + c]);
        }
    }
    for (i = 0; i < (int)(sizeof(lessons_families)
                          / sizeof(lessons_families[0])); i++) {
        const lessons_family_t *f = &lessons_families[i];

        lessons_family(out, f->name, f->type, f->help);
        if (!f->label) {
            lessons_sample(out, f->name, sum->v[f->first]);
            continue;
        }
        for (c = 0; c < f->n; c++) {
            lessons_out(out, "%s{%s=\"%s\"} %" APR_UINT64_T_FMT "\n",
                        f->name, f->label, f->values[c],
                        sum->v[f->first + c]);
        }
    }
    lessons_sources(out, sum, names, count, now);
    lessons_family(out, "lessons_processes", "gauge",
                   "Apache processes counting now.");
    lessons_sample(out, "lessons_processes", (apr_uint64_t)sum->processes);
    lessons_family(out, "lessons_metrics_start_time_seconds", "gauge",
                   "When counting began: the counters go on across "
                   "graceful restarts and start again when httpd stops.");
    lessons_seconds(out, "lessons_metrics_start_time_seconds", "",
                    sum->started);
    text = apr_array_pstrcat(p, out, '\0');
    *len = strlen(text);
    return text;
}

/* A bound in microseconds as seconds, shortest ("0.0001", "1"). */
static const char *lessons_bound_seconds(apr_pool_t *p,
                                         apr_interval_time_t us)
{
    char *text = apr_psprintf(p, "%" APR_TIME_T_FMT ".%06" APR_TIME_T_FMT,
                              us / APR_USEC_PER_SEC, us % APR_USEC_PER_SEC);
    apr_size_t n = strlen(text);

    while (text[n - 1] == '0') {
        text[--n] = '\0';
    }
    if (text[n - 1] == '.') {
        text[n - 1] = '\0';
    }
    return text;
}

/* lessons_db_lease_write_wait_seconds, a histogram: the buckets summed
 * up, as Prometheus reads them.
 */
static const char *lessons_lease_waits(apr_pool_t *p,
                                       const lessons_metrics_lease_t *lease)
{
    const char *text =
        "# HELP lessons_db_lease_write_wait_seconds How long writes took "
        "on the read lease after their commit (their check, their "
        "datagrams' answers, or none): what the lease adds to a write.\n"
        "# TYPE lessons_db_lease_write_wait_seconds histogram\n";
    apr_uint64_t upto = 0;
    int i;

    if (!lease->wait_bounds) {
        return "";
    }
    for (i = 0; i < LESSONS_METRICS_LEASE_WAITS; i++) {
        upto += lease->waits[i];
        text = apr_psprintf(p, "%slessons_db_lease_write_wait_seconds_bucket"
                            "{le=\"%s\"} %" APR_UINT64_T_FMT "\n", text,
                            i < LESSONS_METRICS_LEASE_WAITS - 1
                            ? lessons_bound_seconds(p,
                                                    lease->wait_bounds[i])
                            : "+Inf", upto);
    }
    return apr_psprintf(p, "%slessons_db_lease_write_wait_seconds_sum %.6f\n"
                        "lessons_db_lease_write_wait_seconds_count %"
                        APR_UINT64_T_FMT "\n", text,
                        (double)lease->waited / APR_USEC_PER_SEC, upto);
}

const char *lessons_metrics_lease_prometheus(apr_pool_t *p,
                                             const lessons_metrics_lease_t
                                             *lease)
{
    const char *servers = lease->others < 0 ? "" : apr_psprintf(p,
        "# HELP lessons_db_lease_other_servers Other servers that had "
        "renewed a read lease within its length at this server's last "
        "renewal: a write here waits for each.\n"
        "# TYPE lessons_db_lease_other_servers gauge\n"
        "lessons_db_lease_other_servers %d\n", lease->others);

    return apr_psprintf(p,
        "# HELP lessons_db_lease_valid 1 while this server's read lease "
        "holds (GETs take no statement).\n"
        "# TYPE lessons_db_lease_valid gauge\n"
        "lessons_db_lease_valid %d\n"
        "# HELP lessons_db_lease_listening 1 while its holder's connection "
        "listens.\n"
        "# TYPE lessons_db_lease_listening gauge\n"
        "lessons_db_lease_listening %d\n"
        "# HELP lessons_db_lease_remaining_seconds Until the lease ends "
        "unless it is renewed.\n"
        "# TYPE lessons_db_lease_remaining_seconds gauge\n"
        "lessons_db_lease_remaining_seconds %.3f\n"
        "# HELP lessons_db_lease_run_seconds How long the lease has been "
        "renewed without a break (0: not now); it serves only once this "
        "passes 65%% of a lease.\n"
        "# TYPE lessons_db_lease_run_seconds gauge\n"
        "lessons_db_lease_run_seconds %.3f\n"
        "# HELP lessons_db_lease_length_seconds LessonsDBLease.\n"
        "# TYPE lessons_db_lease_length_seconds gauge\n"
        "lessons_db_lease_length_seconds %.3f\n%s"
        "# HELP lessons_db_lease_unchecked_writes_total Writes answered "
        "with no statement after their commit: alone, no other server's "
        "lease in the last renewal's list; told, each listed server sent "
        "an INVALIDATE by datagram (LessonsDBLeasePeer); held, every "
        "listed server held its drop past the commit (a burst's).\n"
        "# TYPE lessons_db_lease_unchecked_writes_total counter\n"
        "lessons_db_lease_unchecked_writes_total{how=\"alone\"} %"
        APR_UINT64_T_FMT "\n"
        "lessons_db_lease_unchecked_writes_total{how=\"told\"} %"
        APR_UINT64_T_FMT "\n"
        "lessons_db_lease_unchecked_writes_total{how=\"held\"} %"
        APR_UINT64_T_FMT "\n%s",
        lease->valid, lease->listening,
        (double)lease->left / APR_USEC_PER_SEC,
        (double)lease->run / APR_USEC_PER_SEC,
        (double)lease->length / APR_USEC_PER_SEC, servers,
        lease->alone_writes, lease->told_writes, lease->held_writes,
        lessons_lease_waits(p, lease));
}

const char *lessons_metrics_status_auto(apr_pool_t *p,
                                        const lessons_metrics_sum_t *sum)
{
    apr_array_header_t *out = apr_array_make(p, 16, sizeof(const char *));
    apr_uint64_t by_class[LESSONS_CLASS_COUNT] = { 0 }, all = 0, n;
    int op, c, i;

    for (op = 0; op < LESSONS_OP_COUNT; op++) {
        for (c = 0; c < LESSONS_CLASS_COUNT; c++) {
            n = sum->v[LESSONS_M_REQUESTS + op * LESSONS_CLASS_COUNT + c];
            by_class[c] += n;
            all += n;
        }
    }
    lessons_out(out, "LessonsRequests: %" APR_UINT64_T_FMT "\n", all);
    for (c = 0; c < LESSONS_CLASS_COUNT; c++) {
        lessons_out(out, "LessonsRequests%s: %" APR_UINT64_T_FMT "\n",
                    lessons_class_names[c], by_class[c]);
    }
    lessons_out(out, "LessonsCacheHits: %" APR_UINT64_T_FMT "\n"
                "LessonsCacheMisses: %" APR_UINT64_T_FMT "\n"
                "LessonsCacheBytes: %" APR_UINT64_T_FMT "\n"
                "LessonsTokenCacheHits: %" APR_UINT64_T_FMT "\n"
                "LessonsTokenCacheMisses: %" APR_UINT64_T_FMT "\n",
                sum->v[LESSONS_M_CACHE_HITS], sum->v[LESSONS_M_CACHE_MISSES],
                sum->v[LESSONS_M_CACHE_BYTES], sum->v[LESSONS_M_TOKEN_HITS],
                sum->v[LESSONS_M_TOKEN_MISSES]);
    for (n = 0, i = 0; i < LESSONS_REFUSED_COUNT; i++) {
        n += sum->v[LESSONS_M_REFUSED + i];
    }
    lessons_out(out, "LessonsTokenRefusals: %" APR_UINT64_T_FMT "\n", n);
    for (n = 0, i = 0; i < LESSONS_FAULT_COUNT; i++) {
        n += sum->v[LESSONS_M_DB_FAULTS + i];
    }
    lessons_out(out, "LessonsDBWaits: %" APR_UINT64_T_FMT "\n"
                "LessonsDBTimeouts: %" APR_UINT64_T_FMT "\n"
                "LessonsDBSheds: %" APR_UINT64_T_FMT "\n"
                "LessonsDBFaults: %" APR_UINT64_T_FMT "\n",
                sum->v[LESSONS_M_DB_WAITS], sum->v[LESSONS_M_DB_TIMEOUTS],
                sum->v[LESSONS_M_DB_SHEDS], n);
    lessons_out(out, "LessonsWrites: %" APR_UINT64_T_FMT "\n",
                sum->v[LESSONS_M_WRITES] + sum->v[LESSONS_M_WRITES + 1]
                + sum->v[LESSONS_M_WRITES + 2]);
    for (n = 0, i = 0; i < LESSONS_METRICS_SOURCES; i++) {
        n += sum->src[i].failures;
    }
    lessons_out(out, "LessonsKeysFetchFailures: %" APR_UINT64_T_FMT "\n"
                "LessonsProcesses: %d\n", n, sum->processes);
    return apr_array_pstrcat(p, out, '\0');
}
