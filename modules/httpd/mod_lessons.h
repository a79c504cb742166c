/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons.h: what the httpd-facing files of mod_lessons share (the
 * module's private header, as mod_ssl.h is mod_ssl's).  The request
 * path, file by file:
 *
 *   mod_lessons.c          module record, directive table, every hook,
 *                          provider and filter in request order
 *   mod_lessons_config.c   directives, their merge, the values in effect
 *   mod_lessons_init.c     process life: start-up checks, post_config,
 *                          child_init, each new database connection
 *   mod_lessons_map.c      translate_name/map_to_storage: is it the API's?
 *   mod_lessons_trace.c    TRACE behind the token gate (map_to_storage,
 *                          fixups)
 *   mod_lessons_cors.c     LessonsCORSOrigins: preflights (header_parser),
 *                          and the headers that let a browser read every
 *                          answer
 *   mod_lessons_access.c   the token gate: access checker, access_checker_ex
 *                          and fixups ask one verdict, fail closed
 *   mod_lessons_tls.c      the client certificate's thumbprint: mod_ssl's
 *                          SSL of each TLS connection (its pre_handshake
 *                          hook), the certificate hashed last
 *   mod_lessons_dpop.c     DPoP as httpd meets it: the server's own URI,
 *                          the proofs' table in shared memory, the
 *                          challenge
 *   mod_lessons_keys.c     keys URLs and discovered issuers: the fetcher
 *                          thread of each process, the last good set,
 *                          refetch on an unknown kid
 *   mod_lessons_authz.c    Require jwt-claim (an authz provider)
 *   mod_lessons_handler.c  the handler: route, method, the operations
 *   mod_lessons_cache.c    the read path: catalog version, the response
 *                          cache, ETags, 304 and gzip
 *   mod_lessons_build.c    the document of each GET route, from the store
 *   mod_lessons_group.c    group commit: the creates (and the updates) of
 *                          one process that arrive together share one
 *                          transaction
 *   mod_lessons_lease.c    read leases on PostgreSQL: the holder thread
 *                          of each server, the read path's version with
 *                          no statement, a write's wait for the acks
 *   mod_lessons_peer.c     the acks by datagram between the servers
 *                          (LessonsDBLeasePeer): the parent's socket, each
 *                          child's reader, a writer's RAISEs and ACKs
 *   mod_lessons_dbd.c      a pooled connection within the time bound, and
 *                          database faults answered as what they are
 *   mod_lessons_io.c       request bodies in, responses out, refusals
 *                          through httpd's error path, fault lines
 *   mod_lessons_health.c   the lessons-health handler (no token)
 *   mod_lessons_metrics.c  the server's counters in shared memory, the
 *                          lessons-metrics handler (no token) and
 *                          mod_status's section
 *   mod_lessons_refusals.c the gate's refusals per section, summed up by
 *                          the parent in one warn line a minute
 *
 * The work itself lives in the units (lessons_*.c), which need no httpd,
 * in a folder of modules/ each by concern, lowest first: base (pool
 * buffers, digests, JSON, the lesson record), ops (counters, throttled
 * log lines), keys (where the keys come from), store (the database),
 * auth (a request's token and proof checked), api (the API's requests
 * and responses).  t/tools/house.pl (make lint) keeps that order.
 */

#ifndef MOD_LESSONS_H
#define MOD_LESSONS_H


#include "httpd.h"
#include "http_config.h"
#include "http_core.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"
#include "util_cfgtree.h"
#include "ap_mpm.h"
#include "mpm_common.h"
#include "util_mutex.h"
#include "apr_atomic.h"
#include "apr_global_mutex.h"
#include "apr_env.h"
#include "apr_lib.h"
#include "apr_strings.h"
#include "apr_thread_mutex.h"
#include "apr_optional.h"
#include "apr_optional_hooks.h"
#include "apr_dbd.h"
#include "mod_dbd.h"
#include "mod_auth.h"

/* The units, by folder, lowest first. */
#include "base/lessons_json.h"

#include "ops/lessons_metrics.h"
#include "ops/lessons_refusals.h"
#include "ops/lessons_throttle.h"

#include "keys/lessons_discovery.h"
#include "keys/lessons_fetch.h"
#include "keys/lessons_key.h"
#include "keys/lessons_keyset.h"

#include "store/lessons_db.h"
#include "store/lessons_flight.h"
#include "store/lessons_gate.h"
#include "store/lessons_group.h"
#include "store/lessons_lease.h"
#include "store/lessons_store.h"
#include "store/lessons_watch.h"

#include "auth/lessons_claims.h"
#include "auth/lessons_decide.h"
#include "auth/lessons_inflight.h"
#include "auth/lessons_introrate.h"
#include "auth/lessons_nonce.h"
#include "auth/lessons_replay.h"
#include "auth/lessons_token.h"
#include "auth/lessons_tokencache.h"

#include "api/lessons_cache.h"
#include "api/lessons_cors.h"
#include "api/lessons_etag.h"
#include "api/lessons_idem.h"
#include "api/lessons_payload.h"
#include "api/lessons_route.h"

/* Every file's log lines carry the module's name ([lessons:info]). */
APLOG_USE_MODULE(lessons);


/* Our own log tags (APLOGNO numbers belong to httpd's modules). */
#define LESSONSLOG(n) "LESSONS" #n ": "

#define LESSONS_HANDLER          "lessons"
#define LESSONS_HEALTH_HANDLER   "lessons-health"
#define LESSONS_METRICS_HANDLER  "lessons-metrics"
#define LESSONS_DEFAULT_BASE     "/api/lessons"
#define LESSONS_DEFAULT_REALM    "lessons"
#define LESSONS_DEFAULT_MAX_BODY (64 * 1024)
#define LESSONS_MAX_BODY_LIMIT   (16 * 1024 * 1024)
#define LESSONS_MAX_LEEWAY       3600
#define LESSONS_DEFAULT_DB_TIMEOUT 10   /* seconds */
#define LESSONS_MAX_DB_TIMEOUT   300
#define LESSONS_DEFAULT_SHARE_WINDOW 2000   /* microseconds */
#define LESSONS_LEASE_MIN_MS          100   /* LessonsDBLease's shortest */
#define LESSONS_MAX_SHARE_WINDOW 100000
#define LESSONS_DBD_DEFAULT_MAX  10     /* mod_dbd's DBDMax default */
#define LESSONS_DEFAULT_KEY_LIFETIME 86400  /* seconds: Idempotency-Key */
#define LESSONS_MAX_KEY_LIFETIME (30 * 86400)
#define LESSONS_RETRY_AFTER      APR_STRINGIFY(LESSONS_RETRY_SECONDS)
/* No pooled connection given back for this long while every one is
 * held: the database is not answering (lessons_gate.h).  The slowest
 * healthy hold make bench measured was 0.82 s (PostgreSQL creates, p99,
 * when fsync on a slow disk stalls every writer at once); two seconds
 * leave room for that, and still shed long before LessonsDBTimeout's
 * default of ten.
 */
#define LESSONS_GATE_STALL       apr_time_from_sec(2)
/* How long past a request's LessonsDBTimeout its connection's socket is
 * shut down (lessons_watch.h): the server's own statement_timeout, when
 * the server runs, answers first, and leaves the connection usable.
 */
#define LESSONS_WATCH_GRACE      apr_time_from_msec(500)
#define LESSONS_DEFAULT_CACHE    (16 * 1024 * 1024)  /* bytes per process */
#define LESSONS_MAX_CACHE        (APR_INT64_C(4) * 1024 * 1024 * 1024)
#define LESSONS_GZIP_MIN         1024   /* smaller bodies stay as they are */
#define LESSONS_TOKEN_CACHE      10000  /* verified tokens per process */
#define LESSONS_WRITE_MUTEX      "lessons-sqlite-write"
#define LESSONS_WRITERS_KEPT     "mod_lessons-sqlite-writers"
#define LESSONS_LIBRARIES_KEPT   "mod_lessons-libraries"
#define LESSONS_CA_FILE_MAX      (1024 * 1024)  /* LessonsJWTKeysCA */

#define LESSONS_CT_JSON     "application/json; charset=utf-8"
#define LESSONS_CT_PROBLEM  "application/problem+json"

/* Beginner and advanced are fixed pairs of levels (docs/api.md). */
#define LESSONS_BEGINNER_FIRST   1
#define LESSONS_BEGINNER_SECOND  2
#define LESSONS_ADVANCED_FIRST   4
#define LESSONS_ADVANCED_SECOND  5

/* Per-directory config.  NULL / LESSONS_ALG_INVAL / -1 mean "not set here",
 * so merge can tell an inherited value from a configured one.
 *
 * The algorithm and the key are one setting: a section that sets either
 * takes both from itself when merged (jwt_where says which section), so
 * no merge can pair one section's algorithm with another's key.  A
 * section that sets only one of them is refused at start-up, and would
 * fail closed at request time.  <LessonsJWTIssuer> blocks (issuers) are
 * that setting too: each block, a record of this type of its own, holds
 * one issuer's keys, algorithms and audience, which no merge can reach.
 */
typedef struct {
    int registered;                 /* listed for the start-up check
                                     * (not merged: one section's own) */
    int block;                      /* the record of a <LessonsJWTIssuer>
                                     * block, not of a section (not
                                     * merged: a block never is) */
    const ap_directive_t *node;     /* the section it was read from (its
                                     * <Location>, <If>, ...; NULL at the
                                     * main server's level), for the
                                     * start-up check (not merged) */
    server_rec *server;             /* ... and its server (not merged) */
    const char *gate_where;         /* file:line of the first directive
                                     * that made a token needed here: a
                                     * key, a keys URL, an issuer whose
                                     * keys are discovered, an issuer
                                     * block.  Merged so that the
                                     * outermost stays: nothing merged
                                     * after it can clear it */
    int *refusal_row;               /* the refusals' summary row
                                     * (mod_lessons_refusals.c) of the
                                     * innermost section whose own
                                     * directives made a token needed:
                                     * made with that section's gate,
                                     * numbered from 1 by post_config (0:
                                     * none).  Merged so that the inner
                                     * stays: a refusal is told where the
                                     * key that judged it was set */
    apr_array_header_t *issuers;    /* <LessonsJWTIssuer> blocks, each a
                                     * record of one issuer's keys,
                                     * algorithms and audience; merged
                                     * with the key, as one list: a
                                     * section that sets any takes them
                                     * all from itself */
    const char *jwt_where;          /* section that set alg and/or key */
    lessons_algs_t algs;            /* LessonsJWTAlgorithm; 0: not set */
    const char *alg_name;           /* as written ("RS256 ES256") */
    const char *key_file;
    const lessons_keyset_t *keyset; /* from key_file: one key, or a JWKS */
    struct lessons_keys_src *keys_url;  /* LessonsJWTKeysURL; its keys
                                     * replace keyset's once fetched */
    /* Not merged: these configure the section's keys URL at start-up,
     * where keys_url (which is merged) carries them. */
    const char *keys_ca;            /* LessonsJWTKeysCA (not merged) */
    const char *keys_ca_pem;        /* its certificates, read with the
                                     * configuration (not merged) */
    apr_size_t keys_ca_len;         /* (not merged) */
    const char *keys_proxy;         /* LessonsJWTKeysProxy (not merged) */
    int keys_refresh;               /* seconds; 0: not set here (not
                                     * merged) */
    int keys_min_refresh;           /* (not merged) */
    const char *keys_where;         /* file:line of the first of those
                                     * (not merged) */
    const char *location;           /* plain <Location> path of the section
                                     * that set the key: default base */
    const char *reach;              /* not merged: the plain <Location>
                                     * path this section was read from,
                                     * NULL for any other kind (it may
                                     * reach anywhere): start-up's */
    const char *issuer;
    struct lessons_keys_src *issuer_src;    /* issuer's discovered keys
                                     * (an https issuer), merged with
                                     * issuer: where no key is in effect,
                                     * they are the keys (the source starts
                                     * lazily); with LessonsJWTAlgorithm
                                     * and no key in the same section,
                                     * start-up makes them keys_url */
    const char *issuer_location;    /* plain <Location> of the issuer's
                                     * section: the default base where
                                     * its discovered keys serve (merged
                                     * with issuer) */
    const char *audience;
    long leeway;
    int token_type;                 /* LessonsJWTTokenType: 0 not set,
                                     * LESSONS_TYPE_ANY, _AT_JWT */
    int dpop;                       /* LessonsJWTDPoP: 0 not set,
                                     * LESSONS_DPOP_OFF, _OPTIONAL,
                                     * _REQUIRED */
    int certbind;                   /* LessonsJWTCertBound: 0 not set,
                                     * LESSONS_CERTBIND_OFF, _OPTIONAL,
                                     * _REQUIRED */
    const char *certbind_where;     /* file:line of this section's
                                     * LessonsJWTCertBound, for the
                                     * start-up check (not merged) */
    lessons_decide_floor_t floor;   /* LessonsJWTDPoP, LessonsJWTCertBound,
                                     * LessonsJWTTokenType at+jwt and the
                                     * section's LessonsJWTAudience at
                                     * their strongest along the merge
                                     * chain, each with its file:line
                                     * (issue 55).  Merged so that the
                                     * stronger stays, the outer at a
                                     * tie: nothing merged after it can
                                     * weaken it, and where what is in
                                     * effect is weaker, requests fail
                                     * closed (lessons_decide_relaxed) */
    int dpop_nonce;                 /* LessonsJWTDPoPNonce: 0 not set,
                                     * LESSONS_NONCE_OFF, LESSONS_NONCE_ON */
    struct lessons_introspect_src *introspect;  /* LessonsJWTIntrospect
                                     * and LessonsJWTIntrospectClient of
                                     * the section that set them, as one
                                     * record: merged as one, so that no
                                     * merge pairs one section's endpoint
                                     * with another's client */
    int introspect_cache_max;       /* LessonsJWTIntrospectCacheMax,
                                     * seconds; 0: not set here */
    int introspect_jwt;             /* LessonsJWTIntrospectJWT: 0 not set,
                                     * 1 off, 2 on */
    const char *base_path;
    apr_off_t max_body;
    const char *user_claim;         /* LessonsJWTUserClaim; NULL: sub */
    apr_array_header_t *export_claims;  /* LessonsJWTExportClaims names */
    apr_array_header_t *cors_origins;   /* LessonsCORSOrigins, normalised;
                                         * NULL: not set here; empty:
                                         * "none" */
    int cors_none;                  /* "none" was given (not merged: the
                                     * directive's own bookkeeping) */
    int has_fp;                     /* fp is the token policy's fingerprint
                                     * for exactly these algs, keyset,
                                     * issuer, audience, leeway and token
                                     * type (never with a keys URL) */
    unsigned char fp[LESSONS_TOKEN_FP_LEN];
} lessons_dir_conf;

/* Per-server config: which sections to check at start-up, the bound on
 * database waits, mod_dbd's acquire, and (per process, made in
 * child_init) the gate in front of the connection pool.
 */
typedef struct {
    apr_array_header_t *sections;   /* lessons_dir_conf *, this server's */
    int db_timeout;                 /* seconds; 0: not set here */
    long share_window;              /* LessonsDBShareWindow, microseconds;
                                     * -1: not set here */
    int key_lifetime;               /* LessonsIdempotencyLifetime,
                                     * seconds; 0: not set here */
    const char *nonce_file;         /* LessonsJWTDPoPNonceSecretFile, or
                                     * NULL: not set here */
    const unsigned char *nonce_secret;  /* its bytes, read with the
                                     * configuration (merged with it) */
    apr_size_t nonce_secret_len;    /* (merged with nonce_file) */
    /* Not merged: set for every server by post_config (acquire,
     * writers, key_sources) or child_init (the rest), after the merge. */
    ap_dbd_t *(*acquire)(request_rec *r);   /* (not merged) */
    ap_dbd_t *(*dbd_open)(apr_pool_t *p, server_rec *s);  /* (not
                                     * merged) */
    void (*dbd_close)(server_rec *s, ap_dbd_t *dbd);     /* (not
                                     * merged) */
    module *dbd_module;             /* to see whether mod_dbd has lent
                                     * this request a connection (not
                                     * merged) */
    const apr_array_header_t *dbd_init_sql; /* this server's DBDInitSQL,
                                     * for a connection the module opens
                                     * again itself (lessons_db_ready);
                                     * NULL when mod_dbd's configuration
                                     * cannot be read (not merged) */
    int threads;                    /* worker threads per process (not
                                     * merged) */
    lessons_gate_t *gate;           /* NULL when one thread per process
                                     * (not merged) */
    lessons_watch_t *watch;         /* the sockets of the connections in
                                     * use, per process; NULL when it
                                     * could not be made (not merged) */
    lessons_throttle_t *throttle;   /* repeated fault lines, per process
                                     * (not merged) */
    lessons_flight_t *flight;       /* shared catalog version reads, per
                                     * process; NULL when one thread per
                                     * process (not merged) */
    apr_uint32_t flight_off;        /* a connection showed an engine whose
                                     * reads are not shared (not merged):
                                     * until then they are, so that a new
                                     * process's first requests share a
                                     * connection, not open one each */
    lessons_group_t *group;         /* creates in one transaction, per
                                     * process; NULL when one thread per
                                     * process (not merged) */
    lessons_group_t *update_group;  /* updates in one transaction, the
                                     * same way (not merged) */
    apr_allocator_t *jobs;          /* the write jobs' pools, per process:
                                     * locked, so that a job made on one
                                     * thread and answered on another
                                     * reuses memory instead of mapping
                                     * its own (NULL: each job has its
                                     * own allocator; not merged) */
    apr_uint32_t group_off;         /* a connection showed an engine that
                                     * takes many writers apart: writes
                                     * need no group (not merged) */
    int lease_ms;                   /* LessonsDBLease, milliseconds; 0:
                                     * off; -1: not set (global) */
    struct lessons_lease_srv *lease;    /* the read lease of this server's
                                     * database, from post_config (one per
                                     * mod_dbd pool); NULL: none (not
                                     * merged) */
    lessons_lease_t *lease_block;   /* its block in this process, for
                                     * the metrics; NULL: none (not
                                     * merged: child_init sets it) */
    int lease_length_ms;            /* its length; 0: none (not merged) */
    const char *lease_peer;         /* LessonsDBLeasePeer ADDRESS:PORT;
                                     * "": off; NULL: not set (global) */
    int leases;                     /* main server: how many leases
                                     * post_config made (a holder thread
                                     * each in every child); not merged:
                                     * read from the main server only */
    apr_off_t cache_size;           /* LessonsCacheSize; -1: not set */
    lessons_cache_t *cache;         /* per process, shared by every vhost;
                                     * NULL: LessonsCacheSize 0 (not
                                     * merged) */
    lessons_tokencache_t *tokens;   /* verified tokens, per process (not
                                     * merged) */
    lessons_tokencache_t *introspected; /* introspection answers, per
                                     * process, keyed by a digest of
                                     * endpoint, client and token (not
                                     * merged) */
    EVP_MD *introspect_sha256;      /* that digest's SHA-256, fetched once
                                     * per process (not merged) */
    lessons_inflight_t *introspect_inflight;    /* the questions on their
                                     * way, one per token, per process;
                                     * NULL: each request asks (not
                                     * merged) */
    int introspect_shared;          /* LessonsJWTIntrospectShared: answers
                                     * the server's processes share; -1:
                                     * not set (global) */
    struct lessons_introspect_share *introspect_share;  /* ... their table,
                                     * from post_config, opened in each
                                     * child; NULL: none (not merged) */
    int introspect_rate;            /* LessonsJWTIntrospectRate: questions
                                     * a second to the provider; -1: not
                                     * set (global) */
    int introspect_client_rate;     /* ... of them one client's; -1: not
                                     * set (global) */
    struct lessons_introspect_own *introspect_own;  /* this process's
                                     * budget where the table is not
                                     * shared, from child_init (not
                                     * merged) */
    apr_global_mutex_t *writers;    /* SQLite writers, one at a time (not
                                     * merged) */
    apr_uint32_t writers_failed;    /* main server: this process found the
                                     * writers' mutex unusable (not
                                     * merged) */
    apr_array_header_t *key_sources;    /* main server: every keys URL's
                                         * lessons_keys_src (not merged) */
    apr_shm_t *keys_shm;            /* the key sets shared by the server's
                                     * processes, from post_config (not
                                     * merged) */
    apr_global_mutex_t *keys_lock;  /* ... its lock (not merged) */
    int keys_slots;                 /* ... its slots (not merged) */
    int replay_slots;               /* LessonsJWTDPoPSlots: the DPoP
                                     * proofs' table; -1: not set
                                     * (global) */
    lessons_replay_t *replay;       /* DPoP proofs seen, in shared memory,
                                     * set by post_config where a section
                                     * takes DPoP (not merged) */
    apr_global_mutex_t *replay_lock;    /* ... and its lock, opened in each
                                     * child (not merged) */
    lessons_nonce_key_t *nonce_key; /* the DPoP nonces' key: the file's
                                     * secret, else one made at random
                                     * once per server in post_config
                                     * where some section asks for
                                     * nonces (not merged) */
    lessons_metrics_t *metrics;     /* the server's counters, in shared
                                     * memory, set by post_config for
                                     * every server (not merged) */
    lessons_metrics_slot_t *metrics_slot;   /* this process's slot, from
                                     * child_init; NULL: not counting
                                     * (not merged) */
    apr_array_header_t *metrics_sources;    /* the keys URLs counted, as
                                     * the metrics name them (const char
                                     * *), set with metrics (not
                                     * merged) */
    struct lessons_refusals_gen *refusals;  /* the refusals' table and
                                     * what its rows are, set by
                                     * post_config for every server;
                                     * NULL: none (not merged) */
} lessons_srv_conf;

/* The lock of the key sets shared by a server's processes. */
#define LESSONS_KEYS_MUTEX     "lessons-keys"

/* The lock of the introspection answers a server's processes share. */
#define LESSONS_INTROSPECT_MUTEX "lessons-introspect"
/* LessonsJWTIntrospectShared: its default and largest (entries). */
#define LESSONS_INTROSPECT_SHARED_DEFAULT  4096
#define LESSONS_INTROSPECT_SHARED_LIMIT    (1024 * 1024)
/* LessonsJWTIntrospectRate: the default questions a second to the
 * provider, and the part of them one client may take by default
 * (rate / this, at least 1).
 */
#define LESSONS_INTROSPECT_RATE_DEFAULT    20
#define LESSONS_INTROSPECT_RATE_SHARE      4

/* LessonsJWTDPoP (RFC 9449): LESSONS_DPOP_* in lessons_decide.h. */
#define LESSONS_DPOP_MUTEX     "lessons-dpop-replay"
/* LessonsJWTDPoPSlots: its default, fewest and most (slots of 32 bytes;
 * one owner holds 1/16 of them).
 */
#define LESSONS_DPOP_SLOTS_DEFAULT  65536
#define LESSONS_DPOP_SLOTS_MIN      1024
#define LESSONS_DPOP_SLOTS_LIMIT    (4 * 1024 * 1024)

/* LessonsJWTDPoPNonce. */
#define LESSONS_NONCE_OFF    1
#define LESSONS_NONCE_ON     2

/* LessonsJWTTokenType. */
#define LESSONS_TYPE_ANY     1      /* JWT, or at+jwt */
#define LESSONS_TYPE_AT_JWT  2      /* at+jwt only (RFC 9068 4) */

/* A verified token, as the gate let it through: what later phases ask of
 * it (Require jwt-claim, Idempotency-Key's scope).
 */
typedef struct {
    const char *token;              /* the access token */
    const lessons_decide_unit_t *unit;  /* the section or issuer block
                                     * whose keys verified it */
    lessons_token_policy_t policy;  /* the policy it verified under (its
                                     * key set held for the request) */
    json_t *claims;                 /* its claims, decoded on first use;
                                     * shared (the token cache): read-only */
    int claims_done;                /* claims has been asked for */
    int dpop;                       /* it came with RFC 9449's DPoP
                                     * scheme */
    const char *introspected;       /* an opaque token: the endpoint whose
                                     * answer took it, else NULL */
} lessons_passed_t;

/* Per-request: whether the request is for the API (known from the
 * location walk before translate_name), and the outcome of the token
 * check, so the access checker and the handler never verify twice and
 * never disagree.
 */
typedef struct {
    int api;                        /* SetHandler lessons applies */
    const char *nofile;             /* the API's, the health check's or
                                     * the metrics' handler: no
                                     * filesystem walk, no TRACE echo */
    int checked;                    /* the token check has run */
    int status;                     /* its verdict: OK, or the refusal's
                                     * HTTP status */
    lessons_passed_t passed;        /* what the gate let through */
    apr_time_t judged;              /* the one instant the gate judged
                                     * every time in the request at (exp,
                                     * nbf, a proof's iat, the nonce, the
                                     * replay table): when it ran, not
                                     * when the request line came */
    int refusal;                    /* the gate's refusal to count at log
                                     * time (LESSONS_REFUSED_* + 1), 0:
                                     * none, or the parent's */
    const char *refusal_expected;   /* ... and what the section expected
                                     * instead (a wrong audience's
                                     * audience, a wrong issuer's issuer),
                                     * or NULL */
    const char *denied_claim;       /* a Require jwt-claim that refused */
    int problem_status;             /* a refusal of ours (lessons_refuse) */
    const char *problem_detail;     /* ... and its problem+json detail */
    int problem_sent;               /* our error body is on its way */
    int body_read;                  /* the request body has been read (or
                                     * its reading has failed) */
    int trace_held;                 /* httpd's TRACE answer waits for the
                                     * gate (mod_lessons_trace.c) */
} lessons_req_state;

/* Everything an operation needs, gathered once by the handler. */
typedef struct {
    request_rec *r;
    const lessons_dir_conf *conf;
    lessons_db_t db;
    apr_pool_t *db_pool;            /* lives as long as the connection */
    lessons_route_t route;
    apr_time_t deadline;            /* LessonsDBTimeout, from the first
                                     * wait for the database (0: none
                                     * yet) */
    apr_interval_time_t committed;  /* a write another request's
                                     * group commit made: when it came
                                     * back (lessons_lease_clock), or 0 */
    int writing;                    /* holds the SQLite writers' mutex */
    void *held;                     /* that connection and its gate slot,
                                     * while held */
    void *watched;                  /* its socket's watch
                                     * (mod_lessons_dbd.c), or NULL */
    int quiet;                      /* database faults are logged, not
                                     * answered: the caller answers */
} lessons_ctx;

/* A GET route's document: its bytes and its tag. */
typedef struct {
    const char *body;
    apr_size_t len;
    const char *etag;
} lessons_doc_t;

/* A numeric directive, as the command table describes it (cmd_data):
 * what it counts, its bounds, and where it is stored.
 */
typedef enum {
    LESSONS_NUMBER_COUNT,           /* a whole number */
    LESSONS_NUMBER_SECONDS,         /* a duration in whole seconds */
    LESSONS_NUMBER_MICROSECONDS,    /* a duration in whole microseconds */
    LESSONS_NUMBER_BYTES            /* a size: K, M or G may follow */
} lessons_number_kind_e;

typedef enum {
    LESSONS_FIELD_INT,
    LESSONS_FIELD_LONG,
    LESSONS_FIELD_OFF
} lessons_field_type_e;

typedef struct {
    lessons_number_kind_e kind;
    apr_int64_t min, max;
    const char *help;               /* appended to the error ("" or NULL) */
    unsigned server;                /* 0: the section's lessons_dir_conf;
                                     * else the server's lessons_srv_conf,
                                     * with this ap_check_cmd_context */
    apr_size_t offset;
    lessons_field_type_e type;
} lessons_number_t;

/* mod_lessons_config.c: directives and their merge */
void *lessons_create_dir_conf(apr_pool_t *p, char *dir);
void *lessons_merge_dir_conf(apr_pool_t *p, void *basev, void *addv);
void *lessons_create_srv_conf(apr_pool_t *p, server_rec *s);
void *lessons_merge_srv_conf(apr_pool_t *p, void *basev, void *addv);
const char *lessons_set_alg(cmd_parms *cmd, void *dconf,
                            int argc, char *const argv[]);
const char *lessons_set_key_file(cmd_parms *cmd, void *dconf,
                                 const char *arg);
const char *lessons_set_keys_url(cmd_parms *cmd, void *dconf,
                                 const char *arg);
const char *lessons_set_key(cmd_parms *cmd, void *dconf,
                            int argc, char *const argv[]);
const char *lessons_set_keys_ca(cmd_parms *cmd, void *dconf,
                                const char *arg);
const char *lessons_set_keys_proxy(cmd_parms *cmd, void *dconf,
                                   const char *arg);
const char *lessons_set_string(cmd_parms *cmd, void *dconf,
                               const char *arg);
const char *lessons_set_issuer(cmd_parms *cmd, void *dconf,
                               const char *arg);
const char *lessons_set_audience(cmd_parms *cmd, void *dconf,
                                 const char *arg);
const char *lessons_issuer_section(cmd_parms *cmd, void *dconf,
                                   const char *arg);
const char *lessons_set_number(cmd_parms *cmd, void *dconf, const char *arg);
const char *lessons_set_token_type(cmd_parms *cmd, void *dconf,
                                   const char *arg);
const char *lessons_set_dpop(cmd_parms *cmd, void *dconf, const char *arg);
int lessons_dpop_configured(apr_pool_t *pconf);
const char *lessons_set_certbind(cmd_parms *cmd, void *dconf,
                                 const char *arg);
const char *lessons_set_dpop_nonce(cmd_parms *cmd, void *dconf, int on);
int lessons_dpop_nonce_configured(apr_pool_t *pconf);
const char *lessons_set_nonce_secret_file(cmd_parms *cmd, void *dconf,
                                          const char *arg);
const char *lessons_set_base_path(cmd_parms *cmd, void *dconf,
                                  const char *arg);
const char *lessons_set_export_claim(cmd_parms *cmd, void *dconf,
                                     const char *arg);
const char *lessons_set_cors_origin(cmd_parms *cmd, void *dconf,
                                    const char *arg);

/* mod_lessons_config.c: the values in effect, defaults applied */
void lessons_policy_of(const lessons_dir_conf *conf,
                       lessons_token_policy_t *policy);
const char *lessons_unit_policy(apr_pool_t *p, const lessons_dir_conf *conf,
                                const lessons_dir_conf *unit,
                                lessons_token_policy_t *policy,
                                struct lessons_keys_src **src);
int lessons_token_required(const lessons_dir_conf *conf);
const char *lessons_gate_policy(apr_pool_t *p, const lessons_dir_conf *conf,
                                lessons_token_policy_t *policy,
                                struct lessons_keys_src **src);
void lessons_decide_policy_of(apr_pool_t *p, const lessons_dir_conf *conf,
                              lessons_decide_policy_t *policy);
lessons_algs_t lessons_discovery_algs(void);
int lessons_db_timeout(const lessons_srv_conf *sconf);
apr_interval_time_t lessons_share_window(const lessons_srv_conf *sconf);
int lessons_key_lifetime(const lessons_srv_conf *sconf);
apr_off_t lessons_max_body(const lessons_dir_conf *conf);

/* The base path in effect: LessonsBasePath, else the <Location> that
 * holds the key (or the issuer whose discovered keys are in effect), so
 * a second mount point just works, else the default.  Here rather than
 * in mod_lessons_config.c, as every stage asks it (the metrics too,
 * which the directives' file must not reach back to).
 */
static APR_INLINE const char *lessons_base_path(const lessons_dir_conf *conf)
{
    const char *location = !conf->jwt_where && conf->issuer_src
                           ? conf->issuer_location : conf->location;

    return conf->base_path ? conf->base_path
         : location ? location : LESSONS_DEFAULT_BASE;
}

/* mod_lessons_config.c: a directive's first argument in the tree */
const char *lessons_tree_arg(apr_pool_t *p, const ap_directive_t *d);
/* mod_lessons_config.c: a URL path without trailing slashes ("/" stays) */
const char *lessons_trim_slashes(apr_pool_t *p, const char *arg);

/* mod_lessons_init.c: start-up and child start */
int lessons_check_config(apr_pool_t *pconf, apr_pool_t *plog,
                         apr_pool_t *ptemp, server_rec *s);
int lessons_pre_config(apr_pool_t *pconf, apr_pool_t *plog,
                       apr_pool_t *ptemp);
int lessons_post_config(apr_pool_t *pconf, apr_pool_t *plog,
                        apr_pool_t *ptemp, server_rec *s);
void lessons_child_init(apr_pool_t *pchild, server_rec *s);
/* mod_lessons_kept.c: the global mutex of a block kept across restarts
 * (ap_retained_data), made once on the process pool like the block:
 * *lock, made unless it already is.
 */
apr_status_t lessons_kept_mutex(apr_global_mutex_t **lock, const char *type,
                                server_rec *s);
/* The libraries the module links, kept loaded for the process's life
 * (a restart unloads the module, not them); once a process.
 */
void lessons_keep_libraries(void);
apr_interval_time_t lessons_gate_stall(const lessons_srv_conf *sconf);
apr_status_t lessons_dbd_connected(apr_pool_t *p, dbd_cfg_t *cfg,
                                   ap_dbd_t *dbd);

/* mod_lessons_map.c */
lessons_req_state *lessons_state(request_rec *r);
int lessons_translate(request_rec *r);
int lessons_map_nofile(request_rec *r);

/* mod_lessons_access.c: the token gate */
int lessons_gate(request_rec *r);
int lessons_gate_required(request_rec *r);
int lessons_check_access(request_rec *r);
int lessons_check_access_any(request_rec *r);
int lessons_check_gate_again(request_rec *r);
json_t *lessons_request_claims(request_rec *r);
const char *lessons_request_verifier(request_rec *r);

/* mod_lessons_tls.c: the client certificate (certificate-bound tokens) */
void lessons_tls_register_hooks(void);
const char *lessons_tls_client_x5t(void *baton);

/* mod_lessons_keys.c: keys URLs and discovered issuers, fetched per
 * process by a thread each
 */
typedef struct lessons_keys_src lessons_keys_src;
lessons_keys_src *lessons_keys_src_get(cmd_parms *cmd, const char *url,
                                       int discover);
void lessons_keys_share_alike(apr_pool_t *pconf, apr_array_header_t *list);
apr_array_header_t *lessons_keys_metrics(apr_pool_t *p,
                                         apr_array_header_t *sources,
                                         lessons_metrics_t *m);
const char *lessons_keys_src_configure(apr_pool_t *p, lessons_keys_src *src,
                                       const lessons_dir_conf *conf,
                                       lessons_algs_t algs, int eager);
const char *lessons_keys_src_issuer(const lessons_keys_src *src);
const char *lessons_keys_src_label(const lessons_keys_src *src);
apr_array_header_t *lessons_keys_sources(apr_pool_t *pconf);
int lessons_keys_pre_config(apr_pool_t *pconf);
int lessons_keys_post_config(apr_pool_t *pconf, server_rec *s);
void lessons_keys_child_init(apr_pool_t *pchild, server_rec *s);
void lessons_keys_unit(lessons_keys_src *src, lessons_decide_unit_t *unit);
/* 1 when every key source that makes requests 503 while it has no set
 * (no key file beside it; a lazy one once needed) holds a usable set in
 * this process, else 0 after logging a change once (the health check;
 * never waits, never starts a fetch).
 */
int lessons_keys_health(request_rec *r);

/* mod_lessons_introspect.c: opaque tokens asked about at the provider
 * (RFC 7662)
 */
typedef struct lessons_introspect_src {
    const char *url;                /* the endpoint; NULL: discovered */
    const char *where;              /* LessonsJWTIntrospect's file:line */
    const char *client_id;          /* LessonsJWTIntrospectClient */
    const char *secret;             /* its secret, read with the
                                     * configuration (as root) */
    const char *client_where;
    lessons_dir_conf *section;      /* the section that set them */
    /* From the start-up check, the section's own: */
    const char *issuer;             /* discovered: whose metadata */
    const char *ca_pem;             /* LessonsJWTKeysCA, or NULL */
    apr_size_t ca_len;
    const char *proxy;              /* LessonsJWTKeysProxy, or NULL */
    int allow_http;                 /* url is http://127.0.0.1 (tests) */
    /* Per process, from child_init: */
    apr_thread_mutex_t *lock;       /* over what follows */
    const char *endpoint;           /* the discovered endpoint (in
                                     * endpoint_buf), or NULL */
    char endpoint_buf[LESSONS_DISCOVERY_URI_MAX + 1];
    apr_time_t failed;              /* when discovery last failed */
    lessons_discovery_t discovery;
} lessons_introspect_src;
const char *lessons_set_introspect(cmd_parms *cmd, void *dconf,
                                   const char *arg);
const char *lessons_set_introspect_client(cmd_parms *cmd, void *dconf,
                                          const char *id, const char *file);
const char *lessons_set_introspect_jwt(cmd_parms *cmd, void *dconf, int on);
const char *lessons_set_introspect_rate(cmd_parms *cmd, void *dconf,
                                        const char *rate,
                                        const char *client);
int lessons_introspect_check(apr_pool_t *ptemp, lessons_dir_conf *c);
void lessons_introspect_note(apr_pool_t *pconf);
int lessons_introspect_configured(apr_pool_t *pconf);
int lessons_introspect_pre_config(apr_pool_t *pconf);
int lessons_introspect_post_config(apr_pool_t *pconf, server_rec *s);
void lessons_introspect_child_init(apr_pool_t *pchild, server_rec *s);
void lessons_introspect_policy(request_rec *r, const lessons_dir_conf *conf,
                               lessons_decide_policy_t *policy);

/* mod_lessons_trace.c: TRACE behind the token gate */
int lessons_map_storage(request_rec *r);
int lessons_trace_after_gate(request_rec *r);

/* mod_lessons_cors.c */
int lessons_cors_header_parser(request_rec *r);

/* mod_lessons_authz.c: Require jwt-claim */
extern const authz_provider lessons_authz_claim_provider;
int lessons_check_user_id(request_rec *r);

/* mod_lessons_handler.c */
int lessons_handler(request_rec *r);

/* mod_lessons_build.c */
int lessons_build(lessons_ctx *c, const lessons_catalog_t *cat,
                  lessons_doc_t *doc);

/* mod_lessons_cache.c */
int lessons_read(lessons_ctx *c);

/* mod_lessons_init.c: mod_dbd's configuration of a server (NULL when
 * it has none that can be read), and a key naming its pool (*max: its
 * DBDMax).
 */
void lessons_dbd_check_sqlite(apr_pool_t *ptemp, server_rec *main);
const dbd_cfg_t *lessons_dbd_cfg(server_rec *s, server_rec *main,
                                 module *dbd);
const char *lessons_dbd_pool_key(apr_pool_t *p, server_rec *s,
                                 server_rec *main, module *dbd, int *max);

/* mod_lessons_lease.c: read leases (docs/scaling.md) */
const char *lessons_set_db_lease(cmd_parms *cmd, void *dconf,
                                 const char *arg);
int lessons_lease_post_config(apr_pool_t *pconf, server_rec *main);
void lessons_lease_child_init(apr_pool_t *pchild, server_rec *main);
int lessons_lease_catalog(request_rec *r, const lessons_srv_conf *sconf,
                          lessons_catalog_t *cat);
void lessons_lease_settle(lessons_ctx *c);
const char *lessons_set_db_lease_peer(cmd_parms *cmd, void *dconf,
                                      const char *arg);

/* mod_lessons_peer.c: read leases' acknowledgements by datagram
 * (LessonsDBLeasePeer)
 */
typedef struct lessons_peer_child lessons_peer_child_t;
typedef struct lessons_peer_round lessons_peer_round_t;
/* NULL when addr is a numeric ADDRESS:PORT, else what is wrong. */
const char *lessons_peer_check_address(apr_pool_t *p, const char *addr);
/* The parent's socket at addr (bound once, kept across restarts): its
 * descriptor, or -1 (logged).
 */
int lessons_peer_listen(apr_pool_t *pconf, server_rec *s, const char *addr);
lessons_peer_child_t *lessons_peer_child_make(apr_pool_t *pchild,
                                              server_rec *s, int fd);
void lessons_peer_child_add(lessons_peer_child_t *pc, const char *name,
                            lessons_lease_t *block,
                            const unsigned char *key, apr_file_t *bell);
apr_status_t lessons_peer_child_start(apr_pool_t *pchild,
                                      lessons_peer_child_t *pc);
/* Does a listed server hear of writes only by NOTIFY (no address)? */
int lessons_peer_round_needs_notify(const lessons_lease_check_t *chk,
                                    const char *self);
/* A writer's RAISEs to the servers of chk with an address, sent; NULL
 * when there is none to send.  With nonce (chk->round's), INVALIDATEs
 * carrying it instead, to every row, answered by NONCE ACKs.
 */
lessons_peer_round_t *lessons_peer_round_start(apr_pool_t *p,
                                               const char *self,
                                               const lessons_lease_check_t
                                               *chk,
                                               const unsigned char *nonce);
/* A renewal of holds (LESSONS_LEASE_TELL_RENEW): chk's round's HOLDs,
 * sent once from this server's own socket fd, so that its readers hear
 * the answers (lessons_lease_heard_hold); no one waits for them.  How
 * many were sent.
 */
int lessons_peer_renew(apr_pool_t *p, int fd, const char *self,
                       const lessons_lease_check_t *chk,
                       const unsigned char *nonce);
/* How many servers answered the round's datagrams. */
int lessons_peer_round_answered(const lessons_peer_round_t *round);
/* Wait for ACKs until until (or the next resend), heard in block; with
 * every one in, as lessons_lease_sleep (bell as lessons_lease_settled
 * gave it).
 */
void lessons_peer_round_wait(lessons_peer_round_t *round,
                             lessons_lease_t *block, apr_uint32_t bell,
                             apr_interval_time_t until);

/* mod_lessons_health.c */
int lessons_health_handler(request_rec *r);

/* mod_lessons_dpop.c: DPoP (RFC 9449) */
int lessons_dpop_pre_config(apr_pool_t *pconf);
int lessons_dpop_post_config(apr_pool_t *pconf, server_rec *s);
void lessons_dpop_child_init(apr_pool_t *pchild, server_rec *s);
const char *lessons_dpop_challenge_value(request_rec *r, const char *error,
                                         const char *description);
void lessons_dpop_facts(request_rec *r, lessons_decide_facts_t *facts);
void lessons_dpop_policy(request_rec *r, lessons_decide_policy_t *policy);

/* mod_lessons_metrics.c: the server's counters */
lessons_metrics_t *lessons_metrics_block(server_rec *s);
void lessons_metrics_child_init(apr_pool_t *pchild, server_rec *s);
void lessons_count(request_rec *r, lessons_metrics_id_e id);
void lessons_count_source(server_rec *s, int source,
                          lessons_metrics_src_e what, apr_uint64_t n);
lessons_metrics_fault_e lessons_fault_of(lessons_db_fault_e fault, int lost);
int lessons_metrics_log(request_rec *r);
int lessons_metrics_handler(request_rec *r);
void lessons_metrics_register_hooks(void);

/* mod_lessons_refusals.c: the refusals' summary, a warn line a minute
 * per section
 */
void lessons_refusals_post_config(apr_pool_t *pconf, apr_pool_t *ptemp,
                                  server_rec *main_server);
void lessons_refusals_count(request_rec *r, lessons_metrics_refusal_e reason,
                            const char *expected);
int lessons_refusals_monitor(apr_pool_t *p, server_rec *s);

/* mod_lessons_group.c: group commit */
typedef struct {
    const char *what;               /* "create(s)": for the log */
    int by_id;                      /* one job per lesson id in a share,
                                     * in id order (updates) */
    lessons_store_e (*many)(const lessons_db_t *db, apr_pool_t *p,
                            lessons_store_write_job_t **jobs, int n,
                            const char **err);
} lessons_write_kind_t;

extern const lessons_write_kind_t lessons_write_creates;
extern const lessons_write_kind_t lessons_write_updates;

int lessons_writes_group(lessons_srv_conf *sconf,
                         const lessons_engine_t *engine);
int lessons_write_open(lessons_ctx *c, lessons_srv_conf *sconf);
int lessons_write_alone(lessons_ctx *c, lessons_srv_conf *sconf);
/* Make job (its in, and id and im for an update) in group's next
 * transaction.  The answer when the request is answered here (shed, a
 * fault it shares, its write alone failed as the leader's); else
 * DECLINED, with job->rc what the write did, or LESSONS_STORE_ERROR:
 * make it alone.
 */
int lessons_write_grouped(lessons_ctx *c, lessons_srv_conf *sconf,
                          lessons_group_t *group,
                          const lessons_write_kind_t *kind,
                          lessons_store_write_job_t *job);

/* mod_lessons_dbd.c */
int lessons_dbd_answer(lessons_ctx *c, lessons_db_fault_e fault,
                      const char *err, int wrote);
int lessons_dbd_open(lessons_ctx *c);
void lessons_dbd_give_back(lessons_ctx *c);
int lessons_dbd_write_begin(lessons_ctx *c);
int lessons_dbd_writers_shed(lessons_ctx *c, const char *whom);
void lessons_dbd_write_end(lessons_ctx *c);
int lessons_dbd_failed(lessons_ctx *c, const char *err);
int lessons_dbd_keys_ready(lessons_ctx *c);

/* mod_lessons_io.c */
void lessons_send_head(request_rec *r, int status, const char *type,
                       apr_size_t len);
/* Pass an answer's body brigade (len bytes; empty for none) with its
 * EOS, flushed when it is short: OK, or AP_FILTER_ERROR.
 */
int lessons_pass_answer(request_rec *r, apr_bucket_brigade *bb,
                        apr_size_t len);
int lessons_send(request_rec *r, int status, const char *type,
                 const char *body, apr_size_t len);
int lessons_send_empty(request_rec *r, int status);
int lessons_send_problem(request_rec *r, int status,
                         const char *title, const char *detail,
                         json_t *errors);
const char *lessons_realm(request_rec *r);
const char *lessons_challenge_value(request_rec *r, const char *error,
                                    const char *description);
int lessons_refuse(request_rec *r, int status, const char *detail);
void lessons_insert_error_filter(request_rec *r);
void lessons_problem_filter_register(void);
const char *lessons_refused(request_rec *r, int status);
int lessons_send_read_only(request_rec *r);
void lessons_log_fault(request_rec *r, int level, const char *line);
int lessons_read_body(request_rec *r, apr_off_t max,
                      const char **body, apr_size_t *len,
                      apr_status_t *read_rv);

#endif /* MOD_LESSONS_H */
