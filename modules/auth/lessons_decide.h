/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_decide.h: the gate's decision, as one unit.  The request's
 * facts (method, the server's own URI for it, the headers that matter,
 * the time) and the section's merged policy go in; one verdict comes
 * out: no token needed here, allow (with the token, its claims and the
 * user), or refuse (status, challenge, reason, the log line).  Nothing
 * here knows httpd: the glue (mod_lessons_access.c) gathers the facts,
 * applies the verdict, and counts it once at log time.
 *
 * Whether a token is needed is part of the policy (needed), and the
 * only way to a verdict without one: a policy that needs a token never
 * allows a request without a valid one, whatever else it says (no key,
 * a broken merge, no key set yet, a sender constraint, token type or
 * audience weaker than the merge chain asked: refuse, never allow).
 * t/fuzz/fuzz_decide.c holds every verdict to that.
 */
#ifndef LESSONS_DECIDE_H
#define LESSONS_DECIDE_H

#include <jansson.h>
#include "apr_pools.h"
#include "apr_tables.h"
#include "apr_time.h"

#include "keys/lessons_keysource.h"
#include "ops/lessons_metrics.h"
#include "auth/lessons_certbind.h"
#include "auth/lessons_introspect.h"
#include "auth/lessons_nonce.h"
#include "auth/lessons_replay.h"
#include "auth/lessons_token.h"
#include "auth/lessons_tokencache.h"

/* LessonsJWTDPoP (RFC 9449). */
#define LESSONS_DPOP_OFF       1    /* tokens are bearer tokens, as ever */
#define LESSONS_DPOP_OPTIONAL  2    /* a bound token needs its proof */
#define LESSONS_DPOP_REQUIRED  3    /* and unbound tokens are refused */
#define LESSONS_DPOP_WINDOW    60   /* seconds a proof's iat may be off,
                                     * LessonsJWTLeeway added */
/* The most of LessonsJWTLeeway a proof's iat window takes, on each side.
 * A proof is kept in the replay table until it is too old, so every
 * second of window is a second more that each proof holds a slot: a
 * leeway meant for an identity provider's clock (exp, nbf: up to an
 * hour) would let a client's proofs hold their slots for two hours.
 * With it a proof is kept at most 60 + 30 + 5 + 30 + 1 = 126 seconds.
 */
#define LESSONS_DPOP_LEEWAY_MAX 30

/* Seconds a client is told to wait (Retry-After) for what passes soon. */
#define LESSONS_RETRY_SECONDS  5

/* What the gate hands on from a token, at most. */
#define LESSONS_CLAIM_MAX      1024 /* bytes of one exported claim */
#define LESSONS_USER_MAX       256  /* bytes of r->user from a claim */

/* Log levels of a verdict's lines: syslog's, as httpd's APLOG_* are. */
#define LESSONS_DECIDE_ERR      3
#define LESSONS_DECIDE_WARNING  4
#define LESSONS_DECIDE_INFO     6

/* What may verify a token: the section itself, or one of its
 * <LessonsJWTIssuer> blocks.
 */
typedef struct {
    const char *issuer;             /* a block: the issuer its tokens name
                                     * (picked by, before the signature);
                                     * the section: NULL */
    lessons_token_policy_t token;   /* its algorithms, issuer, audience,
                                     * leeway, and its key file's keys
                                     * (keys or key; none: NULL) */
    int fetched;                    /* its keys come from a keys URL or a
                                     * discovered issuer (live) */
    lessons_keysource_t *live;      /* ... their fetcher in this process
                                     * (NULL: it could not start) */
    const char *keys_name;          /* "keys URL ...", "issuer ...", or
                                     * the key file's path: who vouches */
    int retry_after;                /* seconds, when its fetcher has no
                                     * set yet (LessonsJWTKeysMinRefresh) */
    const char *broken;             /* why its keys cannot verify (what
                                     * the merge made of it), or NULL */
    const char *where;              /* its directive's file and line */
    const char *alg_name;           /* its LessonsJWTAlgorithm, or NULL */
} lessons_decide_unit_t;

/* Take a DPoP proof's key for owner (the party its token names,
 * lessons_replay_owner) in group (who vouches for it,
 * lessons_replay_group) until expires (RFC 9449 11.1): the table's
 * answer, or -1 when the table cannot be asked.
 */
typedef int (*lessons_decide_replay_fn)(void *baton,
                                        const unsigned char *key,
                                        apr_uint32_t owner,
                                        apr_uint32_t group,
                                        apr_time_t expires, apr_time_t now);

/* What asking the provider about an opaque token came to (RFC 7662). */
typedef struct {
    lessons_introspect_e rc;        /* its answer, as read */
    lessons_introspect_result_t res;    /* its claims (ACTIVE; a copy the
                                     * request may change) */
    const char *endpoint;           /* who was asked (logs, and who vouches
                                     * for the token) */
    const char *why;                /* no answer: why (the fetch's words,
                                     * never the token) */
    int retry_after;                /* no answer: seconds for Retry-After
                                     * (0: LESSONS_RETRY_SECONDS) */
    int over;                       /* no answer, as nothing was asked:
                                     * LESSONS_DECIDE_OVER_* (0: none) */
} lessons_decide_introspection_t;

/* Why a question was not asked (LessonsJWTIntrospectRate): the client
 * used its share of the provider's questions (429), or the server its
 * budget (503).
 */
#define LESSONS_DECIDE_OVER_CLIENT  1
#define LESSONS_DECIDE_OVER_SERVER  2

/* Ask about token (the process's cache first, then the provider within
 * the keys URL's bounds): 0 with out->rc and out->res, or -1 when no
 * answer could be had in time (out->why): never an allow.
 */
typedef int (*lessons_decide_introspect_fn)(
    void *baton, apr_pool_t *p, const char *token, apr_int64_t now,
    lessons_decide_introspection_t *out);

/* What the sections merged for a request asked at the strongest
 * (issue 55): LessonsJWTDPoP, LessonsJWTCertBound, LessonsJWTTokenType
 * at+jwt and a section's LessonsJWTAudience, each with the file:line
 * that asked it.  Like a token being needed, none of them weakens
 * along the merge: where what is in effect is weaker (an inner
 * section, an <If> the client steers, a virtual host under the main
 * server's lines set it so), the policy cannot decide, and every
 * request there fails closed (500, lessons_decide_relaxed).
 */
typedef struct {
    int dpop;                       /* LESSONS_DPOP_*; 0: never set */
    const char *dpop_where;
    int certbind;                   /* LESSONS_CERTBIND_*; 0: never set */
    const char *certbind_where;
    const char *at_jwt_where;       /* at+jwt asked there; NULL: never */
    const char *audience;           /* the outermost section's
                                     * LessonsJWTAudience (a block's goes
                                     * with its block); NULL: none */
    const char *audience_where;
} lessons_decide_floor_t;

/* The merged policy of a request's section. */
typedef struct {
    const char *needed;             /* where a token became needed (the
                                     * outermost directive putting keys
                                     * in force); NULL: none is needed */
    const char *broken;             /* why the section as merged cannot
                                     * verify any token, or NULL */
    const lessons_decide_unit_t *units; /* the section's one, or each
                                     * block's */
    int nunits;
    int blocks;                     /* units are <LessonsJWTIssuer> blocks */
    const char *where;              /* the section's key directive */
    int dpop;                       /* LESSONS_DPOP_* (0: off) */
    int certbind;                   /* LESSONS_CERTBIND_* (0: off) */
    lessons_decide_floor_t floor;   /* what the merge chain asked at the
                                     * strongest: dpop, certbind, every
                                     * unit's token type and audience
                                     * must be at least that */
    long leeway;                    /* LessonsJWTLeeway, seconds */
    const char *user_claim;         /* NULL: sub */
    const char *const *export_claims;
    int nexport;
    lessons_tokencache_t *tokens;   /* the process's verified tokens, or
                                     * NULL */
    lessons_decide_replay_fn replay;    /* NULL: no table, DPoP proofs
                                     * get 503 */
    void *replay_baton;
    int replay_share;               /* the proofs one owner may hold */
    const lessons_nonce_key_t *nonce;   /* LessonsJWTDPoPNonce on: the
                                     * server's nonce key, and every
                                     * proof must carry a nonce it made;
                                     * NULL: no nonce is asked */
    lessons_decide_introspect_fn introspect;    /* LessonsJWTIntrospect:
                                     * a token that is no JWT is asked
                                     * about; NULL: JWTs only */
    void *introspect_baton;
    int introspect_jwt;             /* LessonsJWTIntrospectJWT on: a JWT
                                     * that verified is asked about too
                                     * (revocation) */
} lessons_decide_policy_t;

/* The thumbprint (x5t#S256) of the client certificate mod_ssl verified
 * on the request's connection, or NULL (none).  Asked only where a
 * token's binding is to be checked; the glue reads the certificate then.
 */
typedef const char *(*lessons_decide_cert_fn)(void *baton);

/* The facts of one request. */
typedef struct {
    const char *method;
    const char *path;               /* for log lines */
    const char *uri;                /* the server's own URI for it, which
                                     * a DPoP proof's htu must name */
    const char *authorization;      /* the Authorization header, or NULL */
    const char *dpop;               /* its first DPoP header, or NULL */
    int dpop_lines;                 /* how many DPoP headers it has */
    apr_int64_t now;                /* seconds: the request's time */
    apr_time_t clock;               /* the time now (replay table) */
    lessons_decide_cert_fn cert;    /* the connection's certificate; NULL:
                                     * none (LessonsJWTCertBound) */
    void *cert_baton;
} lessons_decide_facts_t;

typedef enum {
    LESSONS_VERDICT_NOT_NEEDED = 0, /* no token is needed here */
    LESSONS_VERDICT_ALLOW,
    LESSONS_VERDICT_REFUSE
} lessons_verdict_e;

/* The WWW-Authenticate a refusal carries. */
typedef enum {
    LESSONS_CHALLENGE_NONE = 0,     /* a fault: 500, 503 */
    LESSONS_CHALLENGE_BEARER,       /* RFC 6750's, with the error */
    LESSONS_CHALLENGE_BEARER_DPOP,  /* and DPoP's bare (optional DPoP) */
    LESSONS_CHALLENGE_DPOP          /* RFC 9449's, with the error */
} lessons_challenge_e;

/* A log line: its tag's number and text (never a token nor a claim
 * value).  A refusal's line follows "<method> <path> refused (<status>)"
 * and is logged as is; a fault's (fault set) stands alone and is
 * throttled.
 */
typedef struct {
    int level;
    int tag;
    int fault;
    const char *text;
} lessons_decide_line_t;

/* An exported claim: JWT_CLAIM_<name> and the value. */
typedef struct {
    const char *name;
    const char *value;
} lessons_decide_export_t;

typedef struct {
    lessons_verdict_e kind;

    /* REFUSE */
    int status;                     /* 400, 401, 429, 500, 503 */
    lessons_challenge_e challenge;
    const char *error;              /* its error attribute, or NULL */
    const char *description;        /* its error_description and the
                                     * problem's detail */
    int refusal;                    /* LESSONS_REFUSED_* to count, or -1 */
    int retry_after;                /* seconds for Retry-After, or 0 */
    lessons_decide_line_t line;     /* the refusal's log line */

    /* ALLOW in the DPoP scheme, or a refusal with DPoP's challenge,
     * where nonces are asked: the current nonce, for DPoP-Nonce (RFC
     * 9449 8.1, 9); else NULL.
     */
    const char *nonce;

    /* Every verdict: lines logged before it (at info: a refetch not made,
     * a claim not exported).
     */
    apr_array_header_t *notes;      /* of lessons_decide_line_t */

    /* ALLOW */
    const char *token;              /* the verified access token */
    int dpop;                       /* it came with the DPoP scheme */
    const lessons_decide_unit_t *unit;  /* whose keys verified it */
    lessons_token_policy_t policy;  /* the policy it verified under, its
                                     * key set held in the pool */
    const char *introspected;       /* the endpoint whose answer took it
                                     * (an opaque token), or NULL */
    const char *user;               /* the user name, or NULL (no claim) */
    json_t *claims;                 /* its claims, where decoded: maybe
                                     * shared with other requests (the
                                     * token cache), so read-only */
    int claims_done;                /* claims were asked for */
    apr_array_header_t *exports;    /* of lessons_decide_export_t */
} lessons_verdict_t;

/* Decide the request of facts under policy, into *v (everything in p,
 * key sets held until p is cleared).  Returns v->kind.
 */
lessons_verdict_e lessons_decide(apr_pool_t *p,
                                 const lessons_decide_policy_t *policy,
                                 const lessons_decide_facts_t *facts,
                                 lessons_verdict_t *v);

/* Why the policy's settings in effect are weaker than its floor (the
 * first such setting, naming where it was asked), or NULL.  A policy
 * with such a reason refuses every request that needs a token (500);
 * start-up refuses every such merge it can see with the same words.
 */
const char *lessons_decide_relaxed(apr_pool_t *p,
                                   const lessons_decide_policy_t *policy);

/* The metrics' reason for a token's refusal. */
lessons_metrics_refusal_e lessons_refusal_of(lessons_token_e rc);

#endif /* LESSONS_DECIDE_H */
