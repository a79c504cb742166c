/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons.c: the Lessons API (German-language lessons) as an httpd
 * handler.  This file holds the module record, the directive table and
 * every hook, provider and filter, registered in the order a request
 * meets them; modules/httpd/mod_lessons.h lists which file does what.
 *
 *   LoadModule dbd_module     modules/mod_dbd.so
 *   LoadModule lessons_module modules/mod_lessons.so
 *   DBDriver sqlite3
 *   DBDParams /var/lib/lessons/lessons.db
 *   <Location "/api/lessons">
 *       SetHandler lessons
 *       LessonsJWTKey HS256 /etc/lessons/jwt.key
 *   </Location>
 */

#include "httpd/mod_lessons.h"

/* The numeric directives: what each counts, its bounds, where it goes. */
static const lessons_number_t lessons_keys_refresh_n = {
    LESSONS_NUMBER_SECONDS, 1, 604800, NULL, 0,
    APR_OFFSETOF(lessons_dir_conf, keys_refresh), LESSONS_FIELD_INT
};
static const lessons_number_t lessons_keys_min_refresh_n = {
    LESSONS_NUMBER_SECONDS, 1, 3600, NULL, 0,
    APR_OFFSETOF(lessons_dir_conf, keys_min_refresh), LESSONS_FIELD_INT
};
static const lessons_number_t lessons_leeway_n = {
    LESSONS_NUMBER_SECONDS, 0, LESSONS_MAX_LEEWAY, NULL, 0,
    APR_OFFSETOF(lessons_dir_conf, leeway), LESSONS_FIELD_LONG
};
static const lessons_number_t lessons_introspect_cache_n = {
    LESSONS_NUMBER_SECONDS, 1, LESSONS_INTROSPECT_CACHE_LIMIT, NULL, 0,
    APR_OFFSETOF(lessons_dir_conf, introspect_cache_max), LESSONS_FIELD_INT
};
static const lessons_number_t lessons_db_timeout_n = {
    LESSONS_NUMBER_SECONDS, 1, LESSONS_MAX_DB_TIMEOUT, NULL,
    NOT_IN_DIR_LOC_FILE,
    APR_OFFSETOF(lessons_srv_conf, db_timeout), LESSONS_FIELD_INT
};
static const lessons_number_t lessons_share_window_n = {
    LESSONS_NUMBER_MICROSECONDS, 0, LESSONS_MAX_SHARE_WINDOW, NULL,
    NOT_IN_DIR_LOC_FILE,
    APR_OFFSETOF(lessons_srv_conf, share_window), LESSONS_FIELD_LONG
};
static const lessons_number_t lessons_key_lifetime_n = {
    LESSONS_NUMBER_SECONDS, 1, LESSONS_MAX_KEY_LIFETIME, NULL,
    NOT_IN_DIR_LOC_FILE,
    APR_OFFSETOF(lessons_srv_conf, key_lifetime), LESSONS_FIELD_INT
};
static const lessons_number_t lessons_max_body_n = {
    LESSONS_NUMBER_COUNT, 1, LESSONS_MAX_BODY_LIMIT, " bytes", 0,
    APR_OFFSETOF(lessons_dir_conf, max_body), LESSONS_FIELD_OFF
};
static const lessons_number_t lessons_cache_size_n = {
    LESSONS_NUMBER_BYTES, 0, LESSONS_MAX_CACHE, " (0: no cache)", GLOBAL_ONLY,
    APR_OFFSETOF(lessons_srv_conf, cache_size), LESSONS_FIELD_OFF
};

static const lessons_number_t lessons_introspect_shared_n = {
    LESSONS_NUMBER_COUNT, 0, LESSONS_INTROSPECT_SHARED_LIMIT,
    " (0: each process keeps its own)", GLOBAL_ONLY,
    APR_OFFSETOF(lessons_srv_conf, introspect_shared), LESSONS_FIELD_INT
};

static const lessons_number_t lessons_dpop_slots_n = {
    LESSONS_NUMBER_COUNT, LESSONS_DPOP_SLOTS_MIN, LESSONS_DPOP_SLOTS_LIMIT,
    NULL, GLOBAL_ONLY,
    APR_OFFSETOF(lessons_srv_conf, replay_slots), LESSONS_FIELD_INT
};

/* Both numbers of LessonsJWTIntrospectRate (its own setter). */
/* The lease's bounds are the setter's own (seconds with decimals); the
 * spec says where it may be written.
 */
static const lessons_number_t lessons_db_lease_n = {
    LESSONS_NUMBER_COUNT, LESSONS_LEASE_MIN_MS, LESSONS_LEASE_MAX_MS, NULL,
    GLOBAL_ONLY, APR_OFFSETOF(lessons_srv_conf, lease_ms), LESSONS_FIELD_INT
};
static const lessons_number_t lessons_introspect_rate_n = {
    LESSONS_NUMBER_COUNT, 1, LESSONS_INTRORATE_MAX, " questions a second",
    GLOBAL_ONLY, 0, LESSONS_FIELD_INT
};

static const command_rec lessons_cmds[] = {
    AP_INIT_TAKE_ARGV("LessonsJWTKey", lessons_set_key, NULL,
                      RSRC_CONF | ACCESS_CONF,
                      "One or more JWT algorithms (HS256, HS384, HS512, "
                      "RS256, RS384, RS512, ES256, ES384, ES512, PS256, PS384, "
                      "PS512), then the "
                      "key file (a shared secret, a PEM public key or a "
                      "JWKS) or an https:// JWKS URL that verifies tokens"),
    AP_INIT_TAKE_ARGV("LessonsJWTAlgorithm", lessons_set_alg, NULL,
                      RSRC_CONF | ACCESS_CONF,
                      "One or more JWT algorithms; needs LessonsJWTKeyFile "
                      "or LessonsJWTKeysURL in the same section (or use "
                      "LessonsJWTKey ALG... FILE)"),
    AP_INIT_TAKE1("LessonsJWTKeyFile", lessons_set_key_file, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "The key file (a shared secret, a PEM public key or a "
                  "JWKS); needs LessonsJWTAlgorithm in the same section"),
    AP_INIT_TAKE1("LessonsJWTKeysURL", lessons_set_keys_url, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "An identity provider's https:// JWKS URL, fetched by "
                  "each process; needs LessonsJWTAlgorithm in the same "
                  "section"),
    AP_INIT_TAKE1("LessonsJWTKeysCA", lessons_set_keys_ca, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "PEM file of the CAs the keys URL's server must chain to "
                  "(default: the system's CAs)"),
    AP_INIT_TAKE1("LessonsJWTKeysProxy", lessons_set_keys_proxy, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "http://host:port of the outgoing proxy the keys URL's "
                  "(or the issuer's metadata) fetches go through, as a "
                  "CONNECT tunnel (default: none; never the "
                  "environment's)"),
    AP_INIT_TAKE1("LessonsJWTKeysRefresh", lessons_set_number,
                  (void *)&lessons_keys_refresh_n,
                  RSRC_CONF | ACCESS_CONF,
                  "Seconds between fetches of the keys URL (default 3600)"),
    AP_INIT_TAKE1("LessonsJWTKeysMinRefresh", lessons_set_number,
                  (void *)&lessons_keys_min_refresh_n, RSRC_CONF | ACCESS_CONF,
                  "Fewest seconds between two fetches, whatever the "
                  "traffic: a token naming an unknown kid fetches again "
                  "at most this often (default 60)"),
    AP_INIT_TAKE1("LessonsJWTIssuer", lessons_set_issuer,
                  (void *)APR_OFFSETOF(lessons_dir_conf, issuer),
                  RSRC_CONF | ACCESS_CONF,
                  "Required value of the token's iss claim (default: not "
                  "checked); an https:// issuer with no key in effect also "
                  "gives the keys, from its metadata's jwks_uri"),
    AP_INIT_TAKE1("LessonsJWTAudience", lessons_set_audience,
                  (void *)APR_OFFSETOF(lessons_dir_conf, audience),
                  RSRC_CONF | ACCESS_CONF,
                  "Value the token's aud claim (string or array) must "
                  "contain (default: not checked)"),
    AP_INIT_RAW_ARGS("<LessonsJWTIssuer", lessons_issuer_section, NULL,
                     RSRC_CONF | ACCESS_CONF,
                     "One of several issuers a section accepts, with its "
                     "own keys (LessonsJWTKey, or none: discovered), "
                     "algorithms and LessonsJWTAudience inside; a token is "
                     "checked with the keys of the issuer its iss names"),
    AP_INIT_TAKE1("LessonsJWTDPoP", lessons_set_dpop, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "off (default), optional or required: whether tokens "
                  "bound to a key (cnf.jkt) are taken only with a DPoP "
                  "proof made with it (RFC 9449), and whether unbound "
                  "tokens are refused"),
    AP_INIT_FLAG("LessonsJWTDPoPNonce", lessons_set_dpop_nonce, NULL,
                 RSRC_CONF | ACCESS_CONF,
                 "On or Off (default): whether every DPoP proof must carry "
                 "a nonce the server gave (DPoP-Nonce, RFC 9449 8 and 9)"),
    AP_INIT_TAKE1("LessonsJWTDPoPNonceSecretFile",
                  lessons_set_nonce_secret_file, NULL, RSRC_CONF,
                  "File of the secret (32 to 4096 bytes) DPoP nonces are "
                  "made with; servers behind one name need the same file "
                  "(default: a random secret per server)"),
    AP_INIT_TAKE1("LessonsJWTDPoPSlots", lessons_set_number,
                  (void *)&lessons_dpop_slots_n,
                  RSRC_CONF,
                  "DPoP proofs the server keeps at once, to take each "
                  "once (default 65536; a client holds 1/16 of them); "
                  "main server only"),
    AP_INIT_TAKE1("LessonsJWTTokenType", lessons_set_token_type, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "any (default: typ JWT, or RFC 9068's at+jwt) or "
                  "at+jwt (access tokens only, never an ID token)"),
    AP_INIT_TAKE1("LessonsJWTCertBound", lessons_set_certbind, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "off (default), optional or required: whether tokens "
                  "bound to a client certificate (cnf x5t#S256) are taken "
                  "only on a connection where mod_ssl verified it (RFC "
                  "8705), and whether tokens bound to nothing are "
                  "refused"),
    AP_INIT_TAKE1("LessonsJWTIntrospect", lessons_set_introspect, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "The provider's introspection endpoint (RFC 7662; https, "
                  "or http on 127.0.0.1), or discover (the "
                  "introspection_endpoint of LessonsJWTIssuer's metadata, "
                  "on its origin): tokens that are no JWT are asked about "
                  "there"),
    AP_INIT_TAKE2("LessonsJWTIntrospectClient",
                  lessons_set_introspect_client, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "The client id and the file of the client secret the "
                  "introspection endpoint is asked with (client_secret_"
                  "basic); the file is read at start-up"),
    AP_INIT_TAKE1("LessonsJWTIntrospectCacheMax", lessons_set_number,
                  (void *)&lessons_introspect_cache_n,
                  RSRC_CONF | ACCESS_CONF,
                  "Most seconds an introspection answer is reused (default "
                  "60, at most 3600; never past the token's exp): how long "
                  "a revocation may go unseen"),
    AP_INIT_TAKE1("LessonsJWTIntrospectShared", lessons_set_number,
                  (void *)&lessons_introspect_shared_n,
                  RSRC_CONF,
                  "Introspection answers the server's processes share, in "
                  "shared memory (default 4096; 0: each process keeps its "
                  "own); main server only"),
    AP_INIT_TAKE12("LessonsJWTIntrospectRate", lessons_set_introspect_rate,
                   (void *)&lessons_introspect_rate_n, RSRC_CONF,
                   "Questions a second the introspection endpoint may be "
                   "asked by the server (default 20), then one client's "
                   "part of them (default a quarter); main server only"),
    AP_INIT_FLAG("LessonsJWTIntrospectJWT", lessons_set_introspect_jwt, NULL,
                 RSRC_CONF | ACCESS_CONF,
                 "On or Off (default): whether a JWT that verified is asked "
                 "about at the introspection endpoint too (revocation)"),
    AP_INIT_TAKE1("LessonsJWTLeeway", lessons_set_number,
                  (void *)&lessons_leeway_n,
                  RSRC_CONF | ACCESS_CONF,
                  "Seconds of clock skew allowed on exp and nbf (default 0)"),
    AP_INIT_TAKE1("LessonsBasePath", lessons_set_base_path, NULL,
                  RSRC_CONF | ACCESS_CONF,
                  "URL path the API answers under (default: the <Location> "
                  "that sets the key, else /api/lessons)"),
    AP_INIT_TAKE1("LessonsDBTimeout", lessons_set_number,
                  (void *)&lessons_db_timeout_n,
                  RSRC_CONF,
                  "Seconds an API request may wait for the database, the "
                  "wait for a pooled connection included (default 10); "
                  "then it is answered 503"),
    AP_INIT_TAKE1("LessonsDBShareWindow", lessons_set_number,
                  (void *)&lessons_share_window_n,
                  RSRC_CONF,
                  "Microseconds from one catalogue version read of an Apache "
                  "process to its next, on PostgreSQL: requests that arrive "
                  "meanwhile share the next read (default 2000; 0: the next "
                  "as soon as one returns)"),
    AP_INIT_TAKE1("LessonsDBLease", lessons_set_db_lease,
                  (void *)&lessons_db_lease_n, RSRC_CONF,
                  "off, or the seconds of a read lease on PostgreSQL "
                  "(0.1 to 60): while it holds one, the server serves GETs "
                  "from its cache with no statement, and a write waits for "
                  "every leased server's acknowledgement (default off)"),
    AP_INIT_TAKE1("LessonsDBLeasePeer", lessons_set_db_lease_peer, NULL,
                  RSRC_CONF,
                  "off, or the numeric ADDRESS:PORT (UDP) at which the other "
                  "servers of the database reach this one: with it, a write "
                  "and its acknowledgements travel by datagram, not by "
                  "PostgreSQL's NOTIFY (default off)"),
    AP_INIT_TAKE1("LessonsIdempotencyLifetime", lessons_set_number,
                  (void *)&lessons_key_lifetime_n,
                  RSRC_CONF,
                  "Seconds a create's Idempotency-Key is kept: a retry with "
                  "it within that time gets the create's answer (default "
                  "86400; at most 30 days)"),
    AP_INIT_TAKE1("LessonsMaxBodySize", lessons_set_number,
                  (void *)&lessons_max_body_n,
                  RSRC_CONF | ACCESS_CONF,
                  "Largest request body accepted, in bytes (default 65536)"),
    AP_INIT_TAKE1("LessonsJWTUserClaim", lessons_set_string,
                  (void *)APR_OFFSETOF(lessons_dir_conf, user_claim),
                  RSRC_CONF | ACCESS_CONF,
                  "The claim that names the caller (r->user, %u in logs); "
                  "dotted names reach nested objects (default sub)"),
    AP_INIT_ITERATE("LessonsJWTExportClaims", lessons_set_export_claim,
                    NULL, RSRC_CONF | ACCESS_CONF,
                    "Claims copied into the request environment as "
                    "JWT_CLAIM_<name> (for logs, mod_headers, CGI)"),
    AP_INIT_ITERATE("LessonsCORSOrigins", lessons_set_cors_origin, NULL,
                    RSRC_CONF | ACCESS_CONF,
                    "Browser origins (https://app.example.org, or *) whose "
                    "scripts may call the API: preflights are answered "
                    "without a token (default: none)"),
    AP_INIT_TAKE1("LessonsCacheSize", lessons_set_number,
                  (void *)&lessons_cache_size_n,
                  RSRC_CONF,
                  "Memory each Apache process may use for built responses, "
                  "in bytes (K, M or G may follow; default 16M; 0: no "
                  "cache); main server only"),
    { NULL }
};

static void lessons_register_hooks(apr_pool_t *p)
{
    static const char *const before_dbd[] = { "mod_dbd.c", NULL };
    static const char *const after_ssl[] = { "mod_ssl.c", NULL };
    static const char *const before_compat[] = { "mod_access_compat.c",
                                                 NULL };

    /* Process life: configuration, then each child. */
    ap_hook_check_config(lessons_check_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_pre_config(lessons_pre_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_post_config(lessons_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* The gates exist before mod_dbd's child_init connects. */
    ap_hook_child_init(lessons_child_init, NULL, before_dbd,
                       APR_HOOK_MIDDLE);
    /* First: mod_dbd's own (DBDInitSQL) stops the run when a statement
     * returns rows, as SQLite's PRAGMAs do, and the gate would never
     * learn DBDMax.
     */
    APR_OPTIONAL_HOOK(dbd, post_connect, lessons_dbd_connected, NULL, NULL,
                      APR_HOOK_FIRST);

    /* A connection: mod_ssl's SSL of each one from a client (its
     * optional pre_handshake hook), where certificate-bound tokens find
     * the client certificate.
     */
    lessons_tls_register_hooks();

    /* A request, in the order it meets them.  API, health and metrics
     * requests skip the filesystem walk (and TRACE's echo); elsewhere
     * TRACE waits for the token gate where one is in force.
     */
    ap_hook_translate_name(lessons_translate, NULL, NULL, APR_HOOK_FIRST);
    ap_hook_translate_name(lessons_map_nofile, NULL, NULL, APR_HOOK_LAST);
    ap_hook_map_to_storage(lessons_map_storage, NULL, NULL, APR_HOOK_FIRST);
    /* CORS preflights carry no token: answered before access control. */
    ap_hook_header_parser(lessons_cors_header_parser, NULL, NULL,
                          APR_HOOK_MIDDLE);
    /* The token gate, per merged configuration (so httpd's subrequests
     * and redirects under the same configuration take the parent's
     * verdict, as for every other module's access control): the access
     * checker (first to refuse; last, under Satisfy Any, to send httpd
     * on to the Require lines), then access_checker_ex (which Satisfy
     * Any reaches), then fixups (which every request reaches).  A
     * refusal is a status: httpd runs nothing after it.  First but for
     * mod_ssl's, where a <Location>'s SSLVerifyClient makes it ask for
     * the client certificate (a renegotiation, TLS 1.3 post-handshake
     * authentication): a certificate-bound token is judged against the
     * certificate the request brings, and refusing it before mod_ssl
     * asked would refuse it on every request.  mod_access_compat's
     * Order/Deny still come after the gate.
     */
    ap_hook_check_access(lessons_check_access, after_ssl, before_compat,
                         APR_HOOK_FIRST, AP_AUTH_INTERNAL_PER_CONF);
    ap_hook_check_access(lessons_check_access_any, NULL, NULL,
                         APR_HOOK_REALLY_LAST, AP_AUTH_INTERNAL_PER_CONF);
    ap_hook_check_access_ex(lessons_check_gate_again, NULL, NULL,
                            APR_HOOK_FIRST, AP_AUTH_INTERNAL_PER_CONF);
    /* A verified token is the authentication Require valid-user asks. */
    ap_hook_check_authn(lessons_check_user_id, NULL, NULL, APR_HOOK_FIRST,
                        AP_AUTH_INTERNAL_PER_CONF);
    ap_register_auth_provider(p, AUTHZ_PROVIDER_GROUP, "jwt-claim",
                              AUTHZ_PROVIDER_VERSION,
                              &lessons_authz_claim_provider,
                              AP_AUTH_INTERNAL_PER_CONF);
    ap_hook_fixups(lessons_check_gate_again, NULL, NULL,
                   APR_HOOK_REALLY_FIRST);
    /* A TRACE past the gate gets httpd's own answer (TraceEnable). */
    ap_hook_fixups(lessons_trace_after_gate, NULL, NULL,
                   APR_HOOK_REALLY_LAST);
    ap_hook_handler(lessons_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_handler(lessons_health_handler, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_handler(lessons_metrics_handler, NULL, NULL, APR_HOOK_MIDDLE);
    /* Refusals, ours and httpd's 403s on the API, as problem+json. */
    ap_hook_insert_error_filter(lessons_insert_error_filter, NULL, NULL,
                                APR_HOOK_MIDDLE);
    lessons_problem_filter_register();
    /* Each API request counted once, as it is logged; mod_status's page
     * gets the figures too.
     */
    ap_hook_log_transaction(lessons_metrics_log, NULL, NULL,
                            APR_HOOK_MIDDLE);
    lessons_metrics_register_hooks();
    /* In the parent, about every ten seconds: the refusals of each
     * section summed up in a warn line, once a minute at most.
     */
    ap_hook_monitor(lessons_refusals_monitor, NULL, NULL, APR_HOOK_MIDDLE);
}

/* Not AP_DECLARE_MODULE: mod_lessons.h already says APLOG_USE_MODULE. */
module AP_MODULE_DECLARE_DATA lessons_module = {
    STANDARD20_MODULE_STUFF,
    lessons_create_dir_conf,
    lessons_merge_dir_conf,
    lessons_create_srv_conf,
    lessons_merge_srv_conf,
    lessons_cmds,
    lessons_register_hooks,
    AP_MODULE_FLAG_NONE
};

