/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_cache.c: the read path.  Every GET takes the catalog
 * version from the server's read lease while it holds a valid one
 * (LessonsDBLease, mod_lessons_lease.c: no statement), else asks the
 * database for it (one small prepared statement, which on a server
 * the threads of a process share when they ask together, each taking
 * only a read sent after it asked), then serves the bytes this process
 * built at that version if it has them, else builds them and keeps
 * them.  The version moves in the same transaction as
 * any change of lessons or levels, from any server or psql, so a write
 * anywhere is seen by the very next read here.  Then the conditional
 * request (If-None-Match: 304) and the encoding (gzip, compressed once
 * per version) are decided against the representation chosen.
 */

#include "httpd/mod_lessons.h"

/* Where cached bytes belong: this virtual host (its database is its
 * own, from its mod_dbd config), this base path, this route.  The
 * catalog version, which names the database, is compared apart.
 */
static const char *lessons_cache_key(const lessons_ctx *c, apr_size_t *len)
{
    const char *key = apr_psprintf(c->r->pool, "%pp %d %" APR_INT64_T_FMT
                                   " %s", (void *)c->r->server,
                                   (int)c->route.route, c->route.arg,
                                   lessons_base_path(c->conf));

    *len = strlen(key);
    return key;
}

/* Headers of every GET answer, 200 and 304 alike: clients and caches
 * must come back to us (with the token) before reusing it, and the
 * encoding varies with Accept-Encoding.  mod_deflate stays out: the
 * bytes are compressed here already, once.
 */
static void lessons_read_headers(request_rec *r, const char *etag)
{
    apr_table_setn(r->headers_out, "ETag", etag);
    apr_table_setn(r->headers_out, "Cache-Control", "no-cache");
    apr_table_mergen(r->headers_out, "Vary", "Accept-Encoding");
    apr_table_setn(r->subprocess_env, "no-gzip", "1");
}

/* The answer to a request whose If-None-Match holds the current tag. */
static int lessons_not_modified(request_rec *r, const char *etag)
{
    apr_bucket_brigade *bb;

    lessons_read_headers(r, etag);
    r->status = HTTP_NOT_MODIFIED;
    bb = apr_brigade_create(r->pool, r->connection->bucket_alloc);
    return lessons_pass_answer(r, bb, 0);
}

/* Send a cached entry's bytes without copying them: the bucket holds a
 * reference of its own, dropped when the bytes have gone out, so
 * another thread may replace or evict the entry meanwhile.
 */
static int lessons_send_entry(request_rec *r, lessons_cache_entry_t *e,
                              int gzip)
{
    const char *etag = lessons_cache_etag(e), *bytes;
    apr_size_t len = 0;
    apr_bucket_brigade *bb;

    /* Small bodies have no gzip form: those go out as they are. */
    bytes = gzip ? lessons_cache_gzip(e, &len) : NULL;
    gzip = bytes != NULL;
    if (gzip) {
        etag = lessons_etag_gzip(r->pool, etag);
    }
    else {
        bytes = lessons_cache_body(e, &len);
    }
    if (lessons_etag_none_match(apr_table_get(r->headers_in,
                                              "If-None-Match"), etag)) {
        return lessons_not_modified(r, etag);
    }
    lessons_read_headers(r, etag);
    if (gzip) {
        apr_table_setn(r->headers_out, "Content-Encoding", "gzip");
    }
    lessons_send_head(r, HTTP_OK, LESSONS_CT_JSON, len);
    bb = apr_brigade_create(r->pool, r->connection->bucket_alloc);
    if (!r->header_only && len > 0) {
        lessons_cache_hold(e);
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_heap_create(
            bytes, len, lessons_cache_free_body,
            r->connection->bucket_alloc));
    }
    return lessons_pass_answer(r, bb, len);
}

/* Without the cache (LessonsCacheSize 0, or bytes it cannot hold): the
 * document as built, uncompressed.
 */
static int lessons_send_doc(request_rec *r, const lessons_doc_t *doc)
{
    if (lessons_etag_none_match(apr_table_get(r->headers_in,
                                              "If-None-Match"), doc->etag)) {
        return lessons_not_modified(r, doc->etag);
    }
    lessons_read_headers(r, doc->etag);
    return lessons_send(r, HTTP_OK, LESSONS_CT_JSON, doc->body, doc->len);
}

/* A catalog version as lessons_flight shares it: the count, then the
 * epoch's text with its NUL.  0 when the epoch does not fit.
 */
static apr_size_t lessons_catalog_pack(const lessons_catalog_t *cat,
                                       unsigned char *buf)
{
    apr_size_t n = cat->epoch ? strlen(cat->epoch) + 1 : 0;

    if (n == 0 || sizeof(cat->changes) + n > LESSONS_FLIGHT_MAX) {
        return 0;
    }
    memcpy(buf, &cat->changes, sizeof(cat->changes));
    memcpy(buf + sizeof(cat->changes), cat->epoch, n);
    return sizeof(cat->changes) + n;
}

static int lessons_catalog_unpack(apr_pool_t *p, const unsigned char *buf,
                                  apr_size_t len, lessons_catalog_t *cat)
{
    if (len <= sizeof(cat->changes) || buf[len - 1] != '\0') {
        return 0;
    }
    memcpy(&cat->changes, buf, sizeof(cat->changes));
    cat->epoch = apr_pstrmemdup(p, (const char *)buf + sizeof(cat->changes),
                                len - sizeof(cat->changes) - 1);
    return 1;
}

/* The catalog version read on this request's open connection.  With
 * read leases (PostgreSQL), a read without one is fenced: a failover's
 * old primary, frozen and resumed, may still answer reads until Patroni
 * demotes it, and must not answer this one.
 */
static lessons_store_e lessons_read_catalog_here(lessons_ctx *c,
                                                 lessons_srv_conf *sconf,
                                                 lessons_catalog_t *cat,
                                                 const char **err)
{
    request_rec *r = c->r;
    lessons_db_fault_e fault;
    lessons_store_e st;

    fault = sconf->lease ? lessons_db_ready_leases(&c->db, c->db_pool,
                                                   r->pool, err)
                         : LESSONS_DB_NO_SCHEMA;
    if (fault == LESSONS_DB_OK) {
        st = lessons_store_catalog_fenced(&c->db, r->pool, cat, err);
    }
    else if (fault == LESSONS_DB_NO_SCHEMA) {
        /* No leases here, or a schema from before them (whose holder
         * says so): the plain read.
         */
        st = lessons_store_catalog(&c->db, r->pool, cat, err);
    }
    else {
        st = LESSONS_STORE_ERROR;
    }
    lessons_count(r, LESSONS_M_CATALOG);
    return st;
}

/* The catalog version from a read sent after this request began: one
 * this process's threads share (lessons_flight), unless a connection
 * showed an engine whose reads are not worth sharing, or one of its own.
 * Shared from a process's first request on: mod_dbd opens connections
 * one at a time (under its pool's lock), and a new process whose first
 * burst read alone opened one per thread, each waiting for those before
 * it (up to 95 ms in the bench's lab).  *opened says whether the request
 * holds a connection now, *asked whether it asked the flight.  DECLINED,
 * or the answer.
 */
static int lessons_read_catalog(lessons_ctx *c, lessons_srv_conf *sconf,
                                lessons_catalog_t *cat, int *opened,
                                int *asked)
{
    request_rec *r = c->r;
    unsigned char buf[LESSONS_FLIGHT_MAX];
    apr_size_t len = 0;
    lessons_flight_e how = LESSONS_FLIGHT_ALONE;
    const lessons_engine_t *engine;
    const char *err = NULL;
    lessons_store_e st;
    int rc;

    /* A valid read lease: its version is the latest acknowledged one,
     * and every write answered anywhere waited for it.
     */
    if (lessons_lease_catalog(r, sconf, cat)) {
        lessons_count(r, LESSONS_M_CATALOG + 1);
        *opened = 0;
        return DECLINED;
    }
    if (sconf->flight && !apr_atomic_read32(&sconf->flight_off)) {
        /* One bound for the wait here and the connection's after it.
         * A read not landed within the gate's stall bound has met a
         * database that does not answer: its waiters go on to the gate,
         * which keeps threads free for the rest of the server, rather
         * than each holding one until the deadline.
         */
        apr_time_t now = apr_time_now(),
                   stalled = now + lessons_gate_stall(sconf);

        c->deadline = now + apr_time_from_sec(lessons_db_timeout(sconf));
        *asked = 1;
        how = lessons_flight_join(sconf->flight,
                                  stalled < c->deadline ? stalled
                                                        : c->deadline,
                                  buf, &len);
        if (how == LESSONS_FLIGHT_SHARED
            && lessons_catalog_unpack(r->pool, buf, len, cat)) {
            *opened = 0;
            return DECLINED;
        }
    }
    rc = lessons_dbd_open(c);
    *opened = rc == DECLINED;
    if (rc != DECLINED) {
        if (how == LESSONS_FLIGHT_LEAD) {
            lessons_flight_land(sconf->flight, NULL, 0);
        }
        return rc;
    }
    st = lessons_read_catalog_here(c, sconf, cat, &err);
    if (how == LESSONS_FLIGHT_LEAD) {
        len = st == LESSONS_STORE_OK ? lessons_catalog_pack(cat, buf) : 0;
        lessons_flight_land(sconf->flight, len ? buf : NULL, len);
    }
    if (st != LESSONS_STORE_OK) {
        return lessons_dbd_failed(c, err);
    }
    engine = lessons_engine_of(c->db.driver);
    if (sconf->flight && (!engine || !engine->share_reads)
        && !apr_atomic_read32(&sconf->flight_off)) {
        apr_atomic_set32(&sconf->flight_off, 1);
    }
    return DECLINED;
}

/* A shared version (the lease's, or another thread's read) names the
 * server it was read from; this request's connection belongs to
 * another.  Built from it, the document would carry that version while
 * showing what this server holds: the past under the present's name,
 * when the connection was pooled on a primary deposed while frozen and
 * resumed since (the history suite's hastop saw it).  The connection
 * reads its own version, behind the fence with leases, which such a
 * primary never answers: DECLINED, or the answer.
 */
static int lessons_read_catalog_again(lessons_ctx *c,
                                      lessons_srv_conf *sconf,
                                      lessons_catalog_t *cat)
{
    const char *err = NULL;

    ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, c->r, LESSONSLOG(00315)
                  "the catalogue version %s was read on another database "
                  "server than this request's connection (%s), which "
                  "reads its own%s (a failover: a connection pooled "
                  "before it)", cat->epoch ? cat->epoch : "-",
                  c->db.identity ? c->db.identity : "-",
                  sconf->lease ? ", behind the fence" : "");
    if (lessons_read_catalog_here(c, sconf, cat, &err)
        != LESSONS_STORE_OK) {
        return lessons_dbd_failed(c, err);
    }
    return DECLINED;
}

static int lessons_read_send(lessons_ctx *c, lessons_srv_conf *sconf,
                             int *asked)
{
    request_rec *r = c->r;
    lessons_cache_t *cache = sconf->cache;
    lessons_cache_entry_t *e = NULL;
    lessons_catalog_t cat;
    lessons_doc_t doc;
    const char *key = NULL, *version;
    apr_size_t key_len = 0;
    int gzip, opened = 0, rc;

    rc = lessons_read_catalog(c, sconf, &cat, &opened, asked);
    if (rc != DECLINED) {
        return rc;
    }
    version = lessons_store_catalog_text(r->pool, &cat);
    gzip = lessons_etag_accepts_gzip(apr_table_get(r->headers_in,
                                                   "Accept-Encoding"));
    if (cache) {
        key = lessons_cache_key(c, &key_len);
        e = lessons_cache_get(cache, key, key_len, version, strlen(version));
    }
    if (!e && !opened) {
        /* A shared version, and nothing built at it here yet. */
        if ((rc = lessons_dbd_open(c)) != DECLINED) {
            return rc;
        }
        if (!lessons_store_catalog_here(&c->db, &cat)) {
            rc = lessons_read_catalog_again(c, sconf, &cat);
            if (rc != DECLINED) {
                return rc;
            }
            version = lessons_store_catalog_text(r->pool, &cat);
            e = cache ? lessons_cache_get(cache, key, key_len, version,
                                          strlen(version))
                      : NULL;
        }
    }
    if (!e) {
        memset(&doc, 0, sizeof(doc));
        rc = lessons_build(c, &cat, &doc);
        if (rc != DECLINED) {
            return rc;
        }
        lessons_dbd_give_back(c);
        /* Built from statements after the version was read: at worst
         * newer than the version it is kept under, never older.
         */
        e = cache ? lessons_cache_put(cache, key, key_len, version,
                                      strlen(version), doc.etag, doc.body,
                                      doc.len)
                  : NULL;
        if (APLOGrtrace1(r) && cache) {
            lessons_cache_stats_t st;

            lessons_cache_stats(cache, &st);
            ap_log_rerror(APLOG_MARK, APLOG_TRACE1, 0, r, LESSONSLOG(00601)
                          "cache: %" APR_SIZE_T_FMT " entries, %"
                          APR_SIZE_T_FMT " bytes, %" APR_UINT64_T_FMT
                          " evictions, %s stored", st.entries, st.bytes,
                          st.evictions, e ? "this response" : "not");
        }
        if (!e) {
            return lessons_send_doc(r, &doc);
        }
    }
    lessons_dbd_give_back(c);
    rc = lessons_send_entry(r, e, gzip);
    lessons_cache_release(e);
    return rc;
}

/* A client whose connection closes with this answer will not ask again:
 * if it shared the version read, the process's next read must not wait
 * for it (lessons_flight_leave).  Otherwise the next read, expecting as
 * many as shared this one, held its askers a whole LessonsDBShareWindow
 * each time a connection ended (httpd's MaxKeepAliveRequests: every
 * 100th request of a client).  httpd decided it as the answer's head
 * went out (ap_set_keepalive); an answer httpd writes later (an error
 * status) is not known here, and the next read waits as before.
 */
int lessons_read(lessons_ctx *c)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(c->r->server->module_config, &lessons_module);
    int asked = 0;
    int rc = lessons_read_send(c, sconf, &asked);

    if (asked && c->r->connection->keepalive == AP_CONN_CLOSE) {
        lessons_flight_leave(sconf->flight);
    }
    return rc;
}
