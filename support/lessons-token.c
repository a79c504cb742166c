/* Licensed under the Apache License, Version 2.0.
 *
 * lessons-token: make a test token for mod_lessons from a key file, and
 * check a deployment with one.  httpd keeps its command-line tools in
 * support/ (htpasswd, htdigest); this is mod_lessons' one, installed by
 * the package as /usr/bin/lessons-token (man page: lessons-token.1).
 *
 *   lessons-token make --key FILE [--alg ALG] [--sub SUB] [--ttl SECONDS]
 *                      [--iss ISSUER] [--aud AUDIENCE] [--kid KID]
 *                      [--claim NAME=VALUE]...
 *   lessons-token check URL [--key FILE [make's options] | --token TOKEN]
 *                      [--cacert FILE]
 *
 * make prints a token signed with the key (lessons_token_tool.c); check
 * GETs URL with it through libcurl and prints the status, and for a 4xx
 * or 5xx the reason the server gives; it exits 0 for a 2xx answer only.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "apr_general.h"
#include "apr_lib.h"
#include "apr_strings.h"
#include "apr_time.h"

#include "lessons_token_tool.h"

#define LESSONS_TOOL_DEFAULT_SUB  "lessons-token"
#define LESSONS_TOOL_DEFAULT_TTL  600
/* What check keeps of a body: a problem document is far smaller. */
#define LESSONS_TOOL_BODY_MAX     (64 * 1024)
/* A token read from standard input (the module takes at most 8192). */
#define LESSONS_TOOL_TOKEN_MAX    16384
#define LESSONS_TOOL_TIMEOUT      30L

static const char lessons_tool_usage[] =
"usage: lessons-token make --key FILE [--alg ALG] [--sub SUB]\n"
"                          [--ttl SECONDS] [--iss ISSUER] [--aud AUDIENCE]\n"
"                          [--kid KID] [--claim NAME=VALUE]...\n"
"       lessons-token check URL [--key FILE [make's options] | --token TOKEN]\n"
"                          [--cacert FILE]\n"
"\n"
"make   prints a JWT signed with the key in FILE, for LessonsJWTKey:\n"
"       HS256, HS384, HS512: FILE is the shared secret (a trailing newline\n"
"       is ignored, as the module does); RS256, RS384, RS512, PS256, PS384,\n"
"       PS512, ES256, ES384, ES512: FILE is the PEM private key (the server\n"
"       has the public one).\n"
"check  GETs URL with \"Authorization: Bearer TOKEN\" (a token made from\n"
"       --key, or --token's; neither: no Authorization) and prints the\n"
"       status, and for 4xx and 5xx the reason (the challenge's error and\n"
"       error_description, the problem's title and detail).  Exit status 0\n"
"       for a 2xx answer, 1 for any other or none, 2 for a usage error.\n"
"\n"
"  --key FILE          the key file (shared secret or PEM private key)\n"
"  --alg ALG           the algorithm (default: HS256 for a secret, RS256\n"
"                      for an RSA key, ES256/384/512 by an EC key's curve)\n"
"  --sub SUB           the sub claim (default lessons-token)\n"
"  --ttl SECONDS       seconds from iat to exp (default 600)\n"
"  --iss ISSUER        the iss claim, for LessonsJWTIssuer (default none)\n"
"  --aud AUDIENCE      the aud claim, for LessonsJWTAudience (default none)\n"
"  --kid KID           the header's kid, for a JWKS key file (default none)\n"
"  --claim NAME=VALUE  one more string claim (for Require jwt-claim); a\n"
"                      name given twice makes an array\n"
"  --token TOKEN       check with this token; - reads it from standard\n"
"                      input (a token in the arguments is seen by ps)\n"
"  --cacert FILE       PEM file of the CAs an https:// URL's server must\n"
"                      chain to (default: the system's CAs)\n"
"  --help              this text\n";

typedef struct {
    const char *key;
    const char *alg;
    const char *kid;
    const char *token;
    const char *cacert;
    lessons_tool_claims_t claims;
    int claim_options;              /* how many make-only options given */
} lessons_tool_opts_t;

static int lessons_tool_usage_error(const char *why)
{
    if (why) {
        fprintf(stderr, "lessons-token: %s\n", why);
    }
    fputs(lessons_tool_usage, stderr);
    return 2;
}

/* The options after the command; *pos the one positional argument (the
 * URL), or NULL.  0, or the exit status of a usage error.
 */
static int lessons_tool_options(apr_pool_t *p, int argc, char **argv,
                                lessons_tool_opts_t *o, const char **pos)
{
    static const struct option longopts[] = {
        { "key", required_argument, NULL, 'k' },
        { "alg", required_argument, NULL, 'a' },
        { "sub", required_argument, NULL, 's' },
        { "ttl", required_argument, NULL, 't' },
        { "iss", required_argument, NULL, 'i' },
        { "aud", required_argument, NULL, 'u' },
        { "kid", required_argument, NULL, 'd' },
        { "claim", required_argument, NULL, 'c' },
        { "token", required_argument, NULL, 'T' },
        { "cacert", required_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    apr_array_header_t *claims = apr_array_make(p, 4, sizeof(const char *));
    char *end = NULL;
    int c;

    memset(o, 0, sizeof(*o));
    o->claims.sub = LESSONS_TOOL_DEFAULT_SUB;
    o->claims.ttl = LESSONS_TOOL_DEFAULT_TTL;
    o->claims.claims = claims;
    *pos = NULL;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        switch (c) {
        case 'k': o->key = optarg; break;
        case 'a': o->alg = optarg; o->claim_options++; break;
        case 's': o->claims.sub = optarg; o->claim_options++; break;
        case 'i': o->claims.iss = optarg; o->claim_options++; break;
        case 'u': o->claims.aud = optarg; o->claim_options++; break;
        case 'd': o->kid = optarg; o->claim_options++; break;
        case 'T': o->token = optarg; break;
        case 'C': o->cacert = optarg; break;
        case 'c':
            APR_ARRAY_PUSH(claims, const char *) = optarg;
            o->claim_options++;
            break;
        case 't':
            o->claims.ttl = apr_strtoi64(optarg, &end, 10);
            if (!*optarg || !end || *end) {
                return lessons_tool_usage_error(
                    apr_psprintf(p, "--ttl %s: not a number of seconds",
                                 optarg));
            }
            o->claim_options++;
            break;
        case 'h':
            fputs(lessons_tool_usage, stdout);
            return -1;
        case ':':
            return lessons_tool_usage_error(
                apr_psprintf(p, "%s needs a value", argv[optind - 1]));
        default:
            return lessons_tool_usage_error(
                apr_psprintf(p, "unknown option %s", argv[optind - 1]));
        }
    }
    if (optind < argc) {
        *pos = argv[optind++];
    }
    if (optind < argc) {
        return lessons_tool_usage_error(
            apr_psprintf(p, "one URL only: %s is one too many",
                         argv[optind]));
    }
    return 0;
}

/* A token from the options: NULL with *token, or why not. */
static const char *lessons_tool_make(apr_pool_t *p,
                                     const lessons_tool_opts_t *o,
                                     const char **token)
{
    lessons_alg_t alg = LESSONS_ALG_NONE;
    const cjose_jwk_t *jwk = NULL;
    const char *msg = NULL;
    json_t *claims;

    if (o->alg) {
        alg = lessons_alg_parse(o->alg);
        if (alg == LESSONS_ALG_INVAL) {
            return apr_psprintf(p, "--alg %s: one of HS256, HS384, HS512, "
                                "RS256, RS384, RS512, ES256, ES384, ES512, "
                                "PS256, PS384, PS512", o->alg);
        }
    }
    claims = lessons_tool_claims(p, &o->claims, apr_time_sec(apr_time_now()),
                                 &msg);
    if (!claims) {
        return msg;
    }
    msg = lessons_tool_signer(p, o->key, &alg, &jwk);
    if (!msg) {
        msg = lessons_tool_sign(p, jwk, alg, o->kid, claims, token);
    }
    json_decref(claims);
    return msg;
}

/* --token -: one line of standard input. */
static const char *lessons_tool_read_token(apr_pool_t *p, const char **token)
{
    char *buf = apr_palloc(p, LESSONS_TOOL_TOKEN_MAX);
    apr_size_t n;

    if (!fgets(buf, LESSONS_TOOL_TOKEN_MAX, stdin)) {
        return "--token -: nothing on standard input";
    }
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    if (n == 0 || n >= LESSONS_TOOL_TOKEN_MAX - 1) {
        return "--token -: an empty or overlong line on standard input";
    }
    *token = buf;
    return NULL;
}

/* What check keeps of the last answer (a proxy's or a 100's first). */
typedef struct {
    apr_pool_t *pool;
    const char *reason;             /* the status line's reason phrase */
    const char *challenge;          /* WWW-Authenticate */
    const char *type;               /* Content-Type */
    const char *location;
    char *body;
    apr_size_t len;
} lessons_tool_answer_t;

/* The value of header line "Name: value\r\n" when it is name's, or NULL. */
static const char *lessons_tool_header(apr_pool_t *p, const char *line,
                                       apr_size_t n, const char *name)
{
    apr_size_t k = strlen(name);

    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') {
        return NULL;
    }
    line += k + 1;
    n -= k + 1;
    while (n > 0 && (*line == ' ' || *line == '\t')) {
        line++;
        n--;
    }
    while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == '\n'
                     || line[n - 1] == ' ')) {
        n--;
    }
    return apr_pstrmemdup(p, line, n);
}

static size_t lessons_tool_on_header(char *line, size_t size, size_t nmemb,
                                     void *ctx)
{
    lessons_tool_answer_t *a = ctx;
    apr_size_t n = size * nmemb;
    const char *v;

    if (n > 5 && strncmp(line, "HTTP/", 5) == 0) {
        const char *r = memchr(line, ' ', n);
        apr_size_t left;

        /* A new answer: what the one before said is not this one's. */
        a->reason = a->challenge = a->type = a->location = NULL;
        a->len = 0;
        if (r) {
            /* "HTTP/1.1 401 Unauthorized": the phrase after the code. */
            left = n - (apr_size_t)(r - line);
            while (left > 0 && (*r == ' ' || apr_isdigit(*r))) {
                r++;
                left--;
            }
            while (left > 0
                   && (r[left - 1] == '\r' || r[left - 1] == '\n')) {
                left--;
            }
            a->reason = apr_pstrmemdup(a->pool, r, left);
        }
    }
    else if ((v = lessons_tool_header(a->pool, line, n,
                                      "WWW-Authenticate")) != NULL) {
        /* The challenge with a reason, where there are several. */
        if (!a->challenge || (!strstr(a->challenge, "error=")
                              && strstr(v, "error="))) {
            a->challenge = v;
        }
    }
    else if ((v = lessons_tool_header(a->pool, line, n, "Content-Type"))) {
        a->type = v;
    }
    else if ((v = lessons_tool_header(a->pool, line, n, "Location"))) {
        a->location = v;
    }
    return n;
}

static size_t lessons_tool_on_body(char *data, size_t size, size_t nmemb,
                                   void *ctx)
{
    lessons_tool_answer_t *a = ctx;
    apr_size_t n = size * nmemb;
    apr_size_t room = LESSONS_TOOL_BODY_MAX - a->len;

    if (!a->body) {
        a->body = apr_palloc(a->pool, LESSONS_TOOL_BODY_MAX);
    }
    memcpy(a->body + a->len, data, n < room ? n : room);
    a->len += n < room ? n : room;
    return n;                       /* the rest is read, not kept */
}

/* GET url with the token; prints the status and, for 4xx and 5xx, the
 * reason.  The exit status: 0 for 2xx.
 */
static int lessons_tool_check(apr_pool_t *p, const char *url,
                              const char *token, const char *cacert)
{
    lessons_tool_answer_t a;
    struct curl_slist *headers = NULL;
    char error[CURL_ERROR_SIZE];
    long status = 0;
    CURLcode rc;
    CURL *h;

    memset(&a, 0, sizeof(a));
    a.pool = p;
    error[0] = '\0';
    h = curl_easy_init();
    if (!h) {
        fputs("lessons-token: libcurl cannot start\n", stderr);
        return 1;
    }
    if (token) {
        headers = curl_slist_append(headers, apr_pstrcat(p,
                                    "Authorization: Bearer ", token, NULL));
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "lessons-token");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, LESSONS_TOOL_TIMEOUT);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, lessons_tool_on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, lessons_tool_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    if (cacert) {
        curl_easy_setopt(h, CURLOPT_CAINFO, cacert);
    }
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "lessons-token: GET %s: %s\n", url,
                error[0] ? error : curl_easy_strerror(rc));
        return 1;
    }
    printf("%ld%s%s\n", status, a.reason && *a.reason ? " " : "",
           lessons_tool_printable(p, a.reason));
    if (status >= 300 && status < 400 && a.location) {
        printf("location: %s\n", lessons_tool_printable(p, a.location));
    }
    if (status >= 400) {
        fputs(lessons_tool_reason(p, a.challenge, a.type, a.body, a.len),
              stdout);
    }
    return status >= 200 && status < 300 ? 0 : 1;
}

static int lessons_tool_main(apr_pool_t *p, int argc, char **argv)
{
    lessons_tool_opts_t o;
    const char *command = argc > 1 ? argv[1] : NULL;
    const char *pos = NULL, *token = NULL, *msg = NULL;
    int rc;

    if (command && (strcmp(command, "--help") == 0
                    || strcmp(command, "-h") == 0)) {
        fputs(lessons_tool_usage, stdout);
        return 0;
    }
    if (!command || (strcmp(command, "make") != 0
                     && strcmp(command, "check") != 0)) {
        return lessons_tool_usage_error(command ? apr_psprintf(p,
            "unknown command %s: make or check", command) : NULL);
    }
    rc = lessons_tool_options(p, argc - 1, argv + 1, &o, &pos);
    if (rc) {
        return rc < 0 ? 0 : rc;
    }
    if (strcmp(command, "make") == 0) {
        if (pos || o.token || o.cacert) {
            return lessons_tool_usage_error("make takes --key and the "
                                            "token's options only");
        }
        if (!o.key) {
            return lessons_tool_usage_error("make needs --key FILE");
        }
        msg = lessons_tool_make(p, &o, &token);
        if (msg) {
            fprintf(stderr, "lessons-token: %s\n", msg);
            return 1;
        }
        printf("%s\n", token);
        return 0;
    }
    if (!pos) {
        return lessons_tool_usage_error("check needs the URL");
    }
    if (o.key && o.token) {
        return lessons_tool_usage_error("check takes --key or --token, "
                                        "not both");
    }
    if (!o.key && o.claim_options) {
        return lessons_tool_usage_error("the token's options need --key");
    }
    if (o.key) {
        msg = lessons_tool_make(p, &o, &token);
    }
    else if (o.token && strcmp(o.token, "-") == 0) {
        msg = lessons_tool_read_token(p, &token);
    }
    else {
        token = o.token;
    }
    if (msg) {
        fprintf(stderr, "lessons-token: %s\n", msg);
        return 1;
    }
    return lessons_tool_check(p, pos, token, o.cacert);
}

int main(int argc, char **argv)
{
    apr_pool_t *p = NULL;
    int rc;

    if (apr_app_initialize(&argc, (const char *const **)&argv, NULL)
        != APR_SUCCESS || apr_pool_create(&p, NULL) != APR_SUCCESS
        || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("lessons-token: cannot start (APR or libcurl)\n", stderr);
        return 1;
    }
    rc = lessons_tool_main(p, argc, argv);
    fflush(stdout);
    apr_pool_destroy(p);
    curl_global_cleanup();
    apr_terminate();
    return rc;
}
