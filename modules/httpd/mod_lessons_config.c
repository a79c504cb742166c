/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_config.c: the directives' handlers, the per-directory and
 * per-server configs and their merge, and the values in effect with
 * their defaults.  What happens at start-up and in each process is in
 * mod_lessons_init.c.
 */

#include "httpd/mod_lessons.h"
#include "base/lessons_decimal.h"

void *lessons_create_dir_conf(apr_pool_t *p, char *dir)
{
    lessons_dir_conf *conf = apr_pcalloc(p, sizeof(*conf));

    (void)dir;
    conf->leeway = -1;
    conf->max_body = -1;
    return conf;
}

/* What the chain asked at the strongest (lessons_decide_floor_t): the
 * stronger of base and add, base's (the outer) at a tie; the outermost
 * section's audience.
 */
static void lessons_merge_floor(lessons_decide_floor_t *out,
                                const lessons_decide_floor_t *base,
                                const lessons_decide_floor_t *add)
{
    *out = *base;
    if (add->dpop > base->dpop) {
        out->dpop = add->dpop;
        out->dpop_where = add->dpop_where;
    }
    if (add->certbind > base->certbind) {
        out->certbind = add->certbind;
        out->certbind_where = add->certbind_where;
    }
    if (!base->at_jwt_where) {
        out->at_jwt_where = add->at_jwt_where;
    }
    if (!base->audience) {
        out->audience = add->audience;
        out->audience_where = add->audience_where;
    }
}

void *lessons_merge_dir_conf(apr_pool_t *p, void *basev, void *addv)
{
    const lessons_dir_conf *base = basev, *add = addv, *jwt, *iss;
    lessons_dir_conf *conf = apr_pcalloc(p, sizeof(*conf));

    /* registered describes one section's own record for the start-up
     * check; a merged config is no section, so it stays unset.
     * Algorithm and key come as one: both from add if it set either.
     */
    /* Once a section needs a token, every section merged after it does:
     * whatever they set, they can only change which keys verify it.
     */
    conf->gate_where = base->gate_where ? base->gate_where : add->gate_where;
    /* A refusal is summed up with the innermost section that set a gate:
     * the one whose key judged it, not the outermost that made a token
     * needed (nested APIs, an <If> with a key of its own, apart).
     */
    conf->refusal_row = add->refusal_row ? add->refusal_row
                                         : base->refusal_row;
    jwt = add->jwt_where ? add : base;
    conf->jwt_where = jwt->jwt_where;
    conf->algs = jwt->algs;
    conf->alg_name = jwt->alg_name;
    conf->key_file = jwt->key_file;
    conf->keyset = jwt->keyset;
    conf->keys_url = jwt->keys_url;
    conf->issuers = jwt->issuers;
    conf->location = add->location ? add->location : base->location;
    /* An issuer and the keys it can be discovered from come as one.  A
     * section with issuer blocks takes its issuers from itself: no
     * issuer or audience line of an outer section reaches inside.
     */
    iss = add->issuer || add->issuers ? add : base;
    conf->issuer = iss->issuer;
    conf->issuer_src = iss->issuer_src;
    conf->issuer_location = iss->issuer_location;
    conf->audience = add->audience || add->issuers ? add->audience
                                                   : base->audience;
    conf->leeway = add->leeway >= 0 ? add->leeway : base->leeway;
    conf->token_type = add->token_type ? add->token_type : base->token_type;
    conf->dpop = add->dpop ? add->dpop : base->dpop;
    conf->certbind = add->certbind ? add->certbind : base->certbind;
    conf->dpop_nonce = add->dpop_nonce ? add->dpop_nonce : base->dpop_nonce;
    /* Like gate_where: what the chain required stays required. */
    lessons_merge_floor(&conf->floor, &base->floor, &add->floor);
    /* The endpoint and its client come as one record. */
    conf->introspect = add->introspect ? add->introspect : base->introspect;
    conf->introspect_cache_max = add->introspect_cache_max
                                 ? add->introspect_cache_max
                                 : base->introspect_cache_max;
    conf->introspect_jwt = add->introspect_jwt ? add->introspect_jwt
                                               : base->introspect_jwt;
    conf->base_path = add->base_path ? add->base_path : base->base_path;
    conf->max_body = add->max_body >= 0 ? add->max_body : base->max_body;
    conf->user_claim = add->user_claim ? add->user_claim : base->user_claim;
    conf->export_claims = add->export_claims ? add->export_claims
                                             : base->export_claims;
    conf->cors_origins = add->cors_origins ? add->cors_origins
                                           : base->cors_origins;
    /* The fingerprint made at start-up holds only while every part of
     * the policy is still the one it was made for.
     */
    if (jwt->has_fp && conf->algs == jwt->algs
        && conf->keyset == jwt->keyset && !conf->keys_url
        && conf->issuer == jwt->issuer && conf->audience == jwt->audience
        && conf->leeway == jwt->leeway
        && conf->token_type == jwt->token_type) {
        conf->has_fp = 1;
        memcpy(conf->fp, jwt->fp, sizeof(conf->fp));
    }
    return conf;
}

void *lessons_create_srv_conf(apr_pool_t *p, server_rec *s)
{
    lessons_srv_conf *sconf = apr_pcalloc(p, sizeof(*sconf));

    (void)s;
    sconf->sections = apr_array_make(p, 4, sizeof(lessons_dir_conf *));
    sconf->cache_size = -1;
    sconf->lease_ms = -1;
    sconf->share_window = -1;
    sconf->introspect_shared = -1;
    sconf->replay_slots = -1;
    sconf->introspect_rate = -1;
    sconf->introspect_client_rate = -1;
    return sconf;
}

void *lessons_merge_srv_conf(apr_pool_t *p, void *basev, void *addv)
{
    const lessons_srv_conf *base = basev, *add = addv;
    lessons_srv_conf *sconf = apr_pcalloc(p, sizeof(*sconf));

    sconf->sections = add->sections;
    sconf->db_timeout = add->db_timeout ? add->db_timeout : base->db_timeout;
    sconf->share_window = add->share_window >= 0 ? add->share_window
                                                 : base->share_window;
    sconf->key_lifetime = add->key_lifetime ? add->key_lifetime
                                            : base->key_lifetime;
    /* The secret comes with its file: a virtual host that names none
     * takes the main server's.
     */
    if (add->nonce_file) {
        sconf->nonce_file = add->nonce_file;
        sconf->nonce_secret = add->nonce_secret;
        sconf->nonce_secret_len = add->nonce_secret_len;
    }
    else {
        sconf->nonce_file = base->nonce_file;
        sconf->nonce_secret = base->nonce_secret;
        sconf->nonce_secret_len = base->nonce_secret_len;
    }
    sconf->cache_size = base->cache_size;   /* global: the main server's */
    sconf->lease_ms = base->lease_ms;                       /* global */
    sconf->lease_peer = base->lease_peer;                   /* global */
    sconf->introspect_shared = base->introspect_shared;     /* global */
    sconf->replay_slots = base->replay_slots;               /* global */
    sconf->introspect_rate = base->introspect_rate;         /* global */
    sconf->introspect_client_rate = base->introspect_client_rate;
    return sconf;
}

int lessons_db_timeout(const lessons_srv_conf *sconf)
{
    return sconf->db_timeout ? sconf->db_timeout : LESSONS_DEFAULT_DB_TIMEOUT;
}

apr_interval_time_t lessons_share_window(const lessons_srv_conf *sconf)
{
    return sconf->share_window >= 0 ? sconf->share_window
                                    : LESSONS_DEFAULT_SHARE_WINDOW;
}

int lessons_key_lifetime(const lessons_srv_conf *sconf)
{
    return sconf->key_lifetime ? sconf->key_lifetime
                               : LESSONS_DEFAULT_KEY_LIFETIME;
}

/* The token policy a config holds (its fingerprint, if made). */
void lessons_policy_of(const lessons_dir_conf *conf,
                       lessons_token_policy_t *policy)
{
    memset(policy, 0, sizeof(*policy));
    policy->require_at_jwt = conf->token_type == LESSONS_TYPE_AT_JWT;
    policy->algs = conf->algs;
    policy->keys = conf->keyset;
    policy->issuer = conf->issuer;
    policy->audience = conf->audience;
    policy->leeway = conf->leeway > 0 ? conf->leeway : 0;
    policy->fp = conf->has_fp ? conf->fp : NULL;
}

/* The token policy of one issuer in a request's merged configuration
 * conf: unit is conf itself, whose keys are its key file or keys URL,
 * or, where it sets no key, its issuer's discovered keys; or one of its
 * <LessonsJWTIssuer> blocks (the leeway and token type stay conf's).  Defaults
 * applied; *src is where the keys come from (NULL: a key file alone).
 * Keys discovered from an issuer verify only tokens that issuer names,
 * whatever LessonsJWTIssuer a later section merged in.  NULL, or why
 * the merge left no policy that can verify (a server fault: 500).
 */
const char *lessons_unit_policy(apr_pool_t *p, const lessons_dir_conf *conf,
                                const lessons_dir_conf *unit,
                                lessons_token_policy_t *policy,
                                lessons_keys_src **src)
{
    const char *discovered;

    lessons_policy_of(conf, policy);
    if (unit != conf) {
        /* A block: its issuer's own keys, algorithms and audience. */
        policy->algs = unit->algs;
        policy->keys = unit->keyset;
        policy->issuer = unit->issuer;
        policy->audience = unit->audience;
        policy->fp = NULL;
    }
    *src = unit->jwt_where ? unit->keys_url : unit->issuer_src;
    discovered = lessons_keys_src_issuer(*src);
    if (!discovered && (!unit->algs || !(unit->keyset || unit->keys_url))) {
        return apr_psprintf(p, "the section at %s sets %s without %s",
                            unit->jwt_where ? unit->jwt_where : "(none)",
                            unit->algs ? "LessonsJWTAlgorithm" : "its key",
                            unit->algs ? "a key" : "LessonsJWTAlgorithm");
    }
    if (discovered) {
        if (!policy->algs) {
            policy->algs = lessons_discovery_algs();
        }
        if (policy->issuer && strcmp(policy->issuer, discovered) != 0) {
            return apr_psprintf(p, "the keys discovered from %s are in "
                                "effect where LessonsJWTIssuer is %s (a "
                                "section merged after the one with the "
                                "keys); they verify only tokens %s issued",
                                discovered, policy->issuer, discovered);
        }
        policy->issuer = discovered;
    }
    return NULL;
}

/* Is a token required here: this section or one merged before it put a
 * key, a keys URL, an issuer whose keys are discovered or an issuer
 * block in force.  Monotone along the merge: no inner section, <If> or
 * virtual host can make it false again (lessons_gate_policy says
 * whether what they left can verify a token).
 */
int lessons_token_required(const lessons_dir_conf *conf)
{
    return conf && conf->gate_where;
}

/* The policy a merged configuration that needs a token verifies with,
 * and where its keys come from (a section with <LessonsJWTIssuer>
 * blocks has none until a token picks its block): NULL, or why it
 * cannot verify one, as when a section merged after the one that made
 * the token needed took its keys away or split an issuer from its keys.
 * Each request there fails closed (500), and start-up refuses every
 * such merge it can see.
 */
const char *lessons_gate_policy(apr_pool_t *p, const lessons_dir_conf *conf,
                                lessons_token_policy_t *policy,
                                lessons_keys_src **src)
{
    memset(policy, 0, sizeof(*policy));
    *src = NULL;
    /* A provider asked about every token needs no key: its issuer,
     * audience and leeway are the policy (lessons_decide asks it about
     * JWTs too, where no key could verify them).
     */
    if (!conf->jwt_where && !conf->issuer_src && !conf->issuers
        && conf->introspect && conf->introspect->where) {
        lessons_policy_of(conf, policy);
        return NULL;
    }
    if (!conf->jwt_where && !conf->issuer_src) {
        return apr_psprintf(p, "a token is needed here (from %s on), but "
                            "a section merged after it leaves no key in "
                            "effect%s", conf->gate_where ? conf->gate_where
                                                         : "(nowhere)",
                            conf->issuer
                            ? ": its LessonsJWTIssuer names an issuer "
                              "whose keys cannot be discovered (an "
                              "https:// URL without query), and no "
                              "LessonsJWTKey goes with it" : "");
    }
    if (conf->issuers) {
        if (conf->issuer || conf->audience) {
            return apr_psprintf(p, "the section at %s gives each of its "
                                "issuers a block, but a section merged "
                                "after it sets %s for all of them",
                                conf->jwt_where, conf->issuer
                                ? "LessonsJWTIssuer" : "LessonsJWTAudience");
        }
        return NULL;
    }
    return lessons_unit_policy(p, conf, conf, policy, src);
}

/* One section's or block's unit of the gate's policy: its token policy,
 * where its keys come from, and why it cannot verify (broken).
 */
static void lessons_decide_unit_of(const lessons_dir_conf *unit,
                                   const lessons_token_policy_t *token,
                                   lessons_keys_src *src, const char *broken,
                                   lessons_decide_unit_t *out)
{
    out->token = *token;
    out->broken = broken;
    out->where = unit->jwt_where;
    out->alg_name = unit->alg_name;
    out->keys_name = unit->key_file;
    if (src) {
        lessons_keys_unit(src, out);
    }
}

/* The gate's policy for a request's merged configuration (the httpd
 * facts, a process's caches, are the caller's to add): a token is
 * needed wherever gate_where says so, whatever the merge did to the
 * rest; what the rest cannot verify is broken, so refused.
 */
void lessons_decide_policy_of(apr_pool_t *p, const lessons_dir_conf *conf,
                              lessons_decide_policy_t *policy)
{
    lessons_decide_unit_t *units;
    lessons_token_policy_t token;
    lessons_keys_src *src = NULL;
    int i;

    memset(policy, 0, sizeof(*policy));
    policy->needed = conf->gate_where;
    if (!policy->needed) {
        return;                     /* costs the rest of the server nothing */
    }
    policy->where = conf->jwt_where;
    policy->dpop = conf->dpop;
    policy->certbind = conf->certbind;
    policy->floor = conf->floor;
    policy->leeway = conf->leeway > 0 ? conf->leeway : 0;
    policy->user_claim = conf->user_claim;
    if (conf->export_claims) {
        policy->export_claims = (const char *const *)conf->export_claims->elts;
        policy->nexport = conf->export_claims->nelts;
    }
    policy->broken = lessons_gate_policy(p, conf, &token, &src);
    if (policy->broken) {
        return;
    }
    if (!conf->issuers) {
        units = apr_pcalloc(p, sizeof(*units));
        lessons_decide_unit_of(conf, &token, src, NULL, units);
        policy->units = units;
        policy->nunits = 1;
        return;
    }
    policy->blocks = 1;
    policy->nunits = conf->issuers->nelts;
    units = apr_pcalloc(p, sizeof(*units) * (apr_size_t)policy->nunits);
    for (i = 0; i < policy->nunits; i++) {
        const lessons_dir_conf *block =
            APR_ARRAY_IDX(conf->issuers, i, lessons_dir_conf *);
        const char *broken = lessons_unit_policy(p, conf, block, &token,
                                                 &src);

        lessons_decide_unit_of(block, &token, src, broken, &units[i]);
        units[i].issuer = block->issuer;
    }
    policy->units = units;
}

/* The algorithms a discovered issuer's keys may verify where the admin
 * names none: every public-key algorithm.
 * Each key still decides which of them may use it (its type, curve and
 * own "alg"), and a keys URL never gives a shared secret, so HS* never
 * comes from a provider.  The metadata's
 * id_token_signing_alg_values_supported is about ID tokens, not access
 * tokens, and is not read.
 */
lessons_algs_t lessons_discovery_algs(void)
{
    return LESSONS_ALG_BIT(LESSONS_ALG_RS256)
           | LESSONS_ALG_BIT(LESSONS_ALG_RS384)
           | LESSONS_ALG_BIT(LESSONS_ALG_RS512)
           | LESSONS_ALG_BIT(LESSONS_ALG_ES256)
           | LESSONS_ALG_BIT(LESSONS_ALG_ES384)
           | LESSONS_ALG_BIT(LESSONS_ALG_ES512)
           | LESSONS_ALG_BIT(LESSONS_ALG_PS256)
           | LESSONS_ALG_BIT(LESSONS_ALG_PS384)
           | LESSONS_ALG_BIT(LESSONS_ALG_PS512);
}

/* The values in effect, defaults applied. */
apr_off_t lessons_max_body(const lessons_dir_conf *conf)
{
    return conf->max_body > 0 ? conf->max_body : LESSONS_DEFAULT_MAX_BODY;
}

/* The section a directive belongs to: its nearest enclosing <Location>,
 * <Directory>, <Files>, <If> (and their Match forms), <Proxy> or
 * <VirtualHost>, through the containers that only decide whether it is
 * read (<IfModule>, <IfDefine>, <Limit>, ...); NULL at the main
 * server's level.
 */
static const ap_directive_t *lessons_section_node(const ap_directive_t *d)
{
    static const char *const sections[] = {
        "<Location", "<LocationMatch", "<Directory", "<DirectoryMatch",
        "<Files", "<FilesMatch", "<If", "<ElseIf", "<Else", "<Proxy",
        "<ProxyMatch", "<VirtualHost", NULL
    };
    int i;

    for (d = d ? d->parent : NULL; d; d = d->parent) {
        for (i = 0; sections[i]; i++) {
            if (strcasecmp(d->directive, sections[i]) == 0) {
                return d;
            }
        }
    }
    return NULL;
}

/* A token is needed from this directive on (lessons_token_required),
 * and this section's refusals have a row of their own (numbered at
 * post_config: every merge made before then carries the same mark).
 */
static void lessons_gates(cmd_parms *cmd, lessons_dir_conf *conf)
{
    if (!conf->gate_where) {
        conf->gate_where = apr_psprintf(cmd->pool, "%s:%d",
                                        cmd->directive->filename,
                                        cmd->directive->line_num);
    }
    if (!conf->refusal_row) {
        conf->refusal_row = apr_pcalloc(cmd->pool, sizeof(int));
    }
}

static const char *lessons_plain_location(cmd_parms *cmd);

/* Every Lessons directive lands here first: mod_dbd must be loaded, and
 * the section is remembered for the start-up check.  (Statements are
 * prepared per connection at first use, not at config time.)
 */
static const char *lessons_touch(cmd_parms *cmd, lessons_dir_conf *conf)
{
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);

    if (!APR_RETRIEVE_OPTIONAL_FN(ap_dbd_acquire)) {
        return "mod_lessons needs mod_dbd: load dbd_module before "
               "lessons_module (a2enmod lessons does this)";
    }
    /* A block is checked with the section that holds it. */
    if (!conf->registered && !conf->block) {
        conf->registered = 1;
        conf->reach = lessons_plain_location(cmd);
        conf->node = lessons_section_node(cmd->directive);
        conf->server = cmd->server;
        APR_ARRAY_PUSH(sconf->sections, lessons_dir_conf *) = conf;
    }
    /* Where a keys URL setting first appeared, so that start-up can name
     * it when the section lacks its URL.
     */
    if (!conf->keys_where
        && (conf->keys_ca || conf->keys_proxy || conf->keys_refresh
            || conf->keys_min_refresh)) {
        conf->keys_where = apr_psprintf(cmd->pool, "%s:%d",
                                        cmd->directive->filename,
                                        cmd->directive->line_num);
    }
    return NULL;
}

/* The first argument of a directive, unquoted, without the '>' that a
 * section opener keeps in the parsed tree ("<Location /api>").
 */
const char *lessons_tree_arg(apr_pool_t *p, const ap_directive_t *d)
{
    const char *args = d->args ? d->args : "";
    char *w = ap_getword_conf(p, &args);
    apr_size_t n = strlen(w);

    if (n > 0 && w[n - 1] == '>') {
        w[n - 1] = '\0';
    }
    return w;
}

/* A URL path without trailing slashes ("/" stays "/"), so a Location
 * header is always base + "/" + id.
 */
const char *lessons_trim_slashes(apr_pool_t *p, const char *arg)
{
    char *path = apr_pstrdup(p, arg);
    apr_size_t n = strlen(path);

    while (n > 1 && path[n - 1] == '/') {
        path[--n] = '\0';
    }
    return path;
}

/* Every Lessons directive belongs in the server configuration, never in
 * a .htaccess file, whatever AllowOverride or AllowOverrideList say: a
 * .htaccess is read by the request's thread, after start-up, where the
 * start-up checks, the key sources' fetchers and the shared sets are
 * gone, and whoever may write one is not whoever configures the gate.
 * Each handler asks this first.  The message for the error log (httpd
 * names the file), or NULL.
 */
static const char *lessons_in_htaccess(cmd_parms *cmd)
{
    const char *name = cmd->cmd->name;

    if (!ap_check_cmd_context(cmd, NOT_IN_HTACCESS)) {
        return NULL;
    }
    return apr_psprintf(cmd->pool, "%s%s is not allowed in .htaccess files, "
                        "whatever AllowOverride and AllowOverrideList say: "
                        "Lessons directives belong in the server "
                        "configuration", name, name[0] == '<' ? ">" : "");
}

/* A plain <Location "/path"> around the directive (no regex, no
 * wildcard), without trailing slashes; else NULL.
 */
static const char *lessons_plain_location(cmd_parms *cmd)
{
    const ap_directive_t *sec = cmd->directive->parent;
    const char *path;

    if (!sec || strcasecmp(sec->directive, "<Location") != 0 || !cmd->path
        || strcmp(lessons_tree_arg(cmd->temp_pool, sec), "~") == 0
        || cmd->path[0] != '/' || strpbrk(cmd->path, "*?[\\")) {
        return NULL;
    }
    path = lessons_trim_slashes(cmd->pool, cmd->path);
    return strcmp(path, "/") != 0 ? path : NULL;
}

/* In a section with <LessonsJWTIssuer> blocks, each issuer's keys,
 * algorithms and audience are in its block and nowhere else: a line
 * beside them would leave it unclear which issuer it is for.
 */
static const char *lessons_outside_blocks(cmd_parms *cmd,
                                          const lessons_dir_conf *conf)
{
    if (!conf->issuers) {
        return NULL;
    }
    return apr_psprintf(cmd->pool, "%s: this section has <LessonsJWTIssuer> "
                        "blocks (the first at %s); each issuer's keys, "
                        "algorithms and audience go inside its own block",
                        cmd->cmd->name, conf->jwt_where);
}

/* Half of the algorithm/key setting has been given in this section:
 * remember the section, and once both halves are here check that the
 * keys fit the algorithms: every key at least one of them, and, for a
 * file of one key (a secret or a PEM), every algorithm that key.
 */
static const char *lessons_jwt_part(cmd_parms *cmd, lessons_dir_conf *conf)
{
    const char *err = NULL;
    const lessons_keyset_t *set = conf->keyset;
    int a;

    if (!conf->jwt_where) {
        conf->jwt_where = apr_psprintf(cmd->pool, "%s:%d",
                                       cmd->directive->filename,
                                       cmd->directive->line_num);
        conf->location = lessons_plain_location(cmd);
    }
    lessons_gates(cmd, conf);
    if (conf->algs && set) {
        if (set->nkeys == 1 && !set->keys[0].kid
            && set->keys[0].alg == LESSONS_ALG_NONE) {
            for (a = LESSONS_ALG_HS256; a < LESSONS_ALG_TERM && !err; a++) {
                if (conf->algs & LESSONS_ALG_BIT(a)) {
                    err = lessons_key_misfit(cmd->temp_pool,
                                             &set->keys[0].key,
                                             (lessons_alg_t)a);
                    if (err) {
                        err = apr_psprintf(cmd->pool, "algorithm %s: %s",
                                           lessons_alg_name((lessons_alg_t)a), err);
                    }
                }
            }
        }
        else {
            err = lessons_keyset_check(cmd->temp_pool, set, conf->algs);
        }
        if (err) {
            return apr_psprintf(cmd->pool, "%s: key file %s does not fit "
                                "%s: %s", cmd->cmd->name, conf->key_file,
                                conf->alg_name, err);
        }
    }
    return lessons_touch(cmd, conf);
}

/* LessonsJWTAlgorithm ALG...: one or more, each exactly as RFC 7518
 * spells it.
 */
const char *lessons_set_alg(cmd_parms *cmd, void *dconf,
                            int argc, char *const argv[])
{
    lessons_dir_conf *conf = dconf;
    lessons_algs_t algs = 0;
    const char *err;
    int i;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if ((err = lessons_outside_blocks(cmd, conf)) != NULL) {
        return err;
    }
    if (conf->algs) {
        return apr_psprintf(cmd->pool, "%s: this section already sets the "
                            "algorithm (%s)", cmd->cmd->name,
                            conf->alg_name);
    }
    if (argc < 1) {
        return apr_psprintf(cmd->pool, "%s: name at least one algorithm",
                            cmd->cmd->name);
    }
    for (i = 0; i < argc; i++) {
        lessons_alg_t alg = lessons_alg_parse(argv[i]);

        if (alg == LESSONS_ALG_INVAL) {
            return apr_psprintf(cmd->pool, "%s: unknown or unsupported "
                                "algorithm '%s'; use one of HS256, HS384, "
                                "HS512, RS256, RS384, RS512, ES256, ES384, "
                                "ES512, PS256, PS384, PS512", cmd->cmd->name,
                                argv[i]);
        }
        algs |= LESSONS_ALG_BIT(alg);
        conf->alg_name = i ? apr_pstrcat(cmd->pool, conf->alg_name, " ",
                                         argv[i], NULL)
                           : apr_pstrdup(cmd->pool, argv[i]);
    }
    conf->algs = algs;
    return lessons_jwt_part(cmd, conf);
}

const char *lessons_set_key_file(cmd_parms *cmd, void *dconf,
                                 const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *path = ap_server_root_relative(cmd->pool, arg);
    const unsigned char *data = NULL;
    apr_size_t len = 0;
    lessons_keyset_t *set = NULL;
    const char *err;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if ((err = lessons_outside_blocks(cmd, conf)) != NULL) {
        return err;
    }
    if (conf->keyset) {
        return apr_psprintf(cmd->pool, "%s: this section already sets the "
                            "key (%s)", cmd->cmd->name, conf->key_file);
    }
    if (!path) {
        return apr_psprintf(cmd->pool, "%s: invalid path '%s'",
                            cmd->cmd->name, arg);
    }
    err = lessons_key_read(cmd->pool, path, &data, &len);
    if (!err) {
        err = lessons_keyset_make_ex(cmd->pool, data, len,
                                     LESSONS_JWKS_PSS, &set);
    }
    if (err) {
        return apr_psprintf(cmd->pool, "%s %s: %s", cmd->cmd->name, path,
                            err);
    }
    conf->key_file = path;
    conf->keyset = set;
    return lessons_jwt_part(cmd, conf);
}

/* LessonsJWTKeysURL URL: an identity provider's JWKS, fetched by each
 * process; counts as the key of the section's algorithm/key pair.
 */
const char *lessons_set_keys_url(cmd_parms *cmd, void *dconf,
                                 const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *err;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if ((err = lessons_outside_blocks(cmd, conf)) != NULL) {
        return err;
    }
    if (conf->keys_url) {
        return apr_psprintf(cmd->pool, "%s: this section already sets a "
                            "keys URL", cmd->cmd->name);
    }
    err = lessons_fetch_check_url(cmd->temp_pool, arg, 0);
    if (err) {
        return apr_psprintf(cmd->pool, "%s %s: %s", cmd->cmd->name, arg,
                            err);
    }
    conf->keys_url = lessons_keys_src_get(cmd, arg, 0);
    return lessons_jwt_part(cmd, conf);
}

/* LessonsJWTKey ALG... FILE|URL: the one-line form, which no merge can
 * split.
 */
const char *lessons_set_key(cmd_parms *cmd, void *dconf,
                            int argc, char *const argv[])
{
    const char *err, *last;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if (argc < 2) {
        return apr_psprintf(cmd->pool, "%s takes one or more algorithms "
                            "and then a key file or an https:// keys URL",
                            cmd->cmd->name);
    }
    err = lessons_set_alg(cmd, dconf, argc - 1, argv);
    if (err) {
        return err;
    }
    last = argv[argc - 1];
    return strncasecmp(last, "https://", 8) == 0
           ? lessons_set_keys_url(cmd, dconf, last)
           : lessons_set_key_file(cmd, dconf, last);
}

/* LessonsJWTKeysCA FILE: the CAs a keys URL's server must chain to. */
const char *lessons_set_keys_ca(cmd_parms *cmd, void *dconf,
                                const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *path = ap_server_root_relative(cmd->pool, arg);
    const char *pem = NULL, *err;
    apr_size_t len = 0;
    int certs = 0;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    /* Read now, as root, like the key: the children fetch from memory,
     * whatever the file's permissions are later.
     */
    if (!path) {
        return apr_psprintf(cmd->pool, "%s: invalid path %s",
                            cmd->cmd->name, arg);
    }
    err = lessons_file_read(cmd->pool, path, "CA file", LESSONS_CA_FILE_MAX,
                            &pem, &len);
    if (!err && (err = lessons_fetch_ca_check(cmd->pool, pem, len, &certs))) {
        err = apr_psprintf(cmd->pool, "CA file %s: %s", path, err);
    }
    if (err) {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    conf->keys_ca = path;
    conf->keys_ca_pem = pem;
    conf->keys_ca_len = len;
    return lessons_touch(cmd, conf);
}

/* LessonsJWTKeysProxy URL: the outgoing proxy a keys URL's (or a
 * discovered issuer's) fetches go through, as a CONNECT tunnel.  Named
 * here or nowhere: the environment's proxies are never used.
 */
const char *lessons_set_keys_proxy(cmd_parms *cmd, void *dconf,
                                   const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;
    const ap_directive_t *sec = cmd->directive->parent;
    const char *err = lessons_fetch_check_proxy(cmd->temp_pool, arg);
    const char *at = strrchr(arg, '@'), *scheme = strstr(arg, "://");

    if (here) {
        return here;
    }
    if (err) {
        /* A password in it is not repeated on the console or in a log. */
        const char *shown = at && scheme && scheme < at
            ? apr_psprintf(cmd->temp_pool, "%.*s://...%s",
                           (int)(scheme - arg), arg, at)
            : arg;

        return apr_psprintf(cmd->pool, "%s %s (in %s): %s", cmd->cmd->name,
                            shown, sec ? apr_psprintf(cmd->temp_pool,
                                                    "%s %s>", sec->directive,
                                                    lessons_tree_arg(
                                                        cmd->temp_pool, sec))
                                     : "the server's main level", err);
    }
    conf->keys_proxy = apr_pstrdup(cmd->pool, arg);
    return lessons_touch(cmd, conf);
}

const char *lessons_set_string(cmd_parms *cmd, void *dconf,
                               const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *err = lessons_in_htaccess(cmd);

    if (err || (err = ap_set_string_slot(cmd, dconf, arg)) != NULL) {
        return err;
    }
    if (!*arg) {
        return apr_psprintf(cmd->pool, "%s must not be empty",
                            cmd->cmd->name);
    }
    return lessons_touch(cmd, conf);
}

/* LessonsJWTIssuer ISSUER: the iss every token must name.  An https
 * issuer can also give the keys (lessons_discovery): where no key is in
 * effect, or beside LessonsJWTAlgorithm alone in this section.  An
 * issuer of another form stays a string to compare, as it always was.
 */
const char *lessons_set_issuer(cmd_parms *cmd, void *dconf, const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;
    const char *err = lessons_outside_blocks(cmd, conf);

    if (here) {
        return here;
    }
    if (err || (err = lessons_set_string(cmd, dconf, arg)) != NULL) {
        return err;
    }
    conf->issuer_src = lessons_discovery_check_issuer(cmd->temp_pool, arg)
                       ? NULL : lessons_keys_src_get(cmd, arg, 1);
    conf->issuer_location = lessons_plain_location(cmd);
    if (conf->issuer_src) {
        lessons_gates(cmd, conf);
    }
    return NULL;
}

/* The directive being read, as file:line. */
static const char *lessons_here(cmd_parms *cmd)
{
    return apr_psprintf(cmd->pool, "%s:%d", cmd->directive->filename,
                        cmd->directive->line_num);
}

/* LessonsJWTAudience AUD: in a section, or in an issuer's block.  A
 * section's is required of every section merged after it (the floor);
 * a block's goes with its block's keys.
 */
const char *lessons_set_audience(cmd_parms *cmd, void *dconf,
                                 const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *err = lessons_in_htaccess(cmd);

    if (!err) {
        err = lessons_outside_blocks(cmd, dconf);
    }
    if (err || (err = lessons_set_string(cmd, dconf, arg)) != NULL) {
        return err;
    }
    if (!conf->block) {
        conf->floor.audience = conf->audience;
        conf->floor.audience_where = lessons_here(cmd);
    }
    return NULL;
}

/* What an issuer's block may hold: its keys and their settings, and its
 * audience.  Everything else (leeway, token type, user claim, exported
 * claims, Require) is the section's, for every issuer alike.
 */
static const char *const lessons_block_directives[] = {
    "LessonsJWTKey", "LessonsJWTAlgorithm", "LessonsJWTKeyFile",
    "LessonsJWTKeysURL", "LessonsJWTKeysCA", "LessonsJWTKeysProxy",
    "LessonsJWTKeysRefresh", "LessonsJWTKeysMinRefresh", "LessonsJWTAudience",
    NULL
};

static const char *lessons_block_refuses(cmd_parms *cmd,
                                         const ap_directive_t *d)
{
    int i;

    for (i = 0; lessons_block_directives[i]; i++) {
        if (strcasecmp(d->directive, lessons_block_directives[i]) == 0) {
            return NULL;
        }
    }
    return apr_psprintf(cmd->pool, "%s:%d: %s cannot be inside "
                        "<LessonsJWTIssuer>: a block holds its issuer's "
                        "keys (LessonsJWTKey, or LessonsJWTAlgorithm with "
                        "LessonsJWTKeyFile or LessonsJWTKeysURL, and "
                        "LessonsJWTKeysCA, LessonsJWTKeysProxy, "
                        "LessonsJWTKeysRefresh, LessonsJWTKeysMinRefresh) "
                        "and LessonsJWTAudience; "
                        "the rest applies to every issuer of the section",
                        d->filename, d->line_num, d->directive);
}

/* A block read to its end: a key pair, or no key and an issuer whose
 * keys can be discovered (then, with or without LessonsJWTAlgorithm);
 * never HMAC alone from keys a provider publishes; keys settings only
 * where keys are fetched.  NULL, or why not.
 */
static const char *lessons_block_complete(cmd_parms *cmd,
                                          lessons_dir_conf *b)
{
    const char *err;

    if ((b->keyset || b->keys_url) && !b->algs) {
        return apr_psprintf(cmd->pool, "<LessonsJWTIssuer %s> sets %s but "
                            "not LessonsJWTAlgorithm; algorithm and key are "
                            "one setting (LessonsJWTKey ALG FILE|URL)",
                            b->issuer, b->keys_url ? "LessonsJWTKeysURL"
                                                   : "LessonsJWTKeyFile");
    }
    if (!b->keyset && !b->keys_url) {
        err = lessons_discovery_check_issuer(cmd->temp_pool, b->issuer);
        if (err) {
            return apr_psprintf(cmd->pool, "<LessonsJWTIssuer %s> names no "
                                "key, and its keys cannot be discovered "
                                "(%s): give LessonsJWTKey ALG FILE|URL in "
                                "the block", b->issuer, err);
        }
        b->issuer_src = lessons_keys_src_get(cmd, b->issuer, 1);
        b->keys_url = b->issuer_src;
    }
    if (b->keys_url && lessons_algs_hmac_only(b->algs)) {
        return apr_psprintf(cmd->pool, "<LessonsJWTIssuer %s>: keys from a "
                            "URL or from the issuer's metadata are public "
                            "keys only (RSA, EC): %s can verify no token "
                            "with them; a shared secret belongs in a key "
                            "file", b->issuer, b->alg_name);
    }
    if ((b->keys_ca || b->keys_proxy || b->keys_refresh
         || b->keys_min_refresh) && !b->keys_url) {
        return apr_psprintf(cmd->pool, "<LessonsJWTIssuer %s>: "
                            "LessonsJWTKeysCA, LessonsJWTKeysProxy, "
                            "LessonsJWTKeysRefresh and "
                            "LessonsJWTKeysMinRefresh are for keys fetched "
                            "from a keys URL or the issuer's metadata, not "
                            "for a key file", b->issuer);
    }
    return NULL;
}

/* <LessonsJWTIssuer ISSUER> ... </LessonsJWTIssuer>: one of several
 * issuers of a section, its keys, algorithms and audience inside, read
 * into a record of its own (as mod_authn_core reads <AuthnProviderAlias>),
 * so no merge can reach them.  The section then takes its issuers from
 * its blocks alone.
 */
const char *lessons_issuer_section(cmd_parms *cmd, void *dconf,
                                   const char *arg)
{
    lessons_dir_conf *conf = dconf, *block;
    const ap_directive_t *self = cmd->directive, *d;
    const command_rec *cmd_rec = cmd->cmd;
    void *info = cmd->info;
    const char *endp = ap_strrchr_c(arg, '>');
    const char *args, *issuer, *where, *err;
    ap_conf_vector_t *vector;
    int i;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if (!endp) {
        return "<LessonsJWTIssuer> directive missing closing '>'";
    }
    args = apr_pstrmemdup(cmd->temp_pool, arg, (apr_size_t)(endp - arg));
    issuer = ap_getword_conf(cmd->pool, &args);
    if (!*issuer || *ap_getword_conf(cmd->temp_pool, &args)) {
        return "<LessonsJWTIssuer> takes one issuer, exactly as the tokens' "
               "iss names it";
    }
    for (d = self->first_child; d; d = d->next) {
        if ((err = lessons_block_refuses(cmd, d)) != NULL) {
            return err;
        }
    }
    if (conf->algs || conf->keyset || conf->keys_url || conf->issuer
        || conf->audience) {
        return apr_psprintf(cmd->pool, "<LessonsJWTIssuer %s>: this section "
                            "also sets %s outside the blocks; with "
                            "<LessonsJWTIssuer> blocks, each issuer's keys, "
                            "algorithms and audience go inside its own "
                            "block", issuer,
                            conf->issuer ? "LessonsJWTIssuer"
                            : conf->audience ? "LessonsJWTAudience"
                            : "the key or algorithm");
    }
    for (i = 0; conf->issuers && i < conf->issuers->nelts; i++) {
        block = APR_ARRAY_IDX(conf->issuers, i, lessons_dir_conf *);
        if (strcmp(block->issuer, issuer) == 0) {
            return apr_psprintf(cmd->pool, "<LessonsJWTIssuer %s>: this "
                                "section has a block for that issuer "
                                "already, at %s", issuer, block->jwt_where);
        }
    }
    where = apr_psprintf(cmd->pool, "%s:%d", self->filename, self->line_num);
    block = lessons_create_dir_conf(cmd->pool, cmd->path);
    block->block = 1;
    block->issuer = issuer;
    block->jwt_where = where;
    vector = ap_create_per_dir_config(cmd->pool);
    ap_set_module_config(vector, &lessons_module, block);
    err = ap_walk_config(self->first_child, cmd, vector);
    /* The walk leaves the last inner directive in cmd. */
    cmd->directive = (ap_directive_t *)self;
    cmd->cmd = cmd_rec;
    cmd->info = info;
    if (err || (err = lessons_block_complete(cmd, block)) != NULL) {
        return err;
    }
    if (!conf->issuers) {
        conf->issuers = apr_array_make(cmd->pool, 2,
                                       sizeof(lessons_dir_conf *));
        conf->jwt_where = where;
        conf->location = lessons_plain_location(cmd);
    }
    lessons_gates(cmd, conf);
    APR_ARRAY_PUSH(conf->issuers, lessons_dir_conf *) = block;
    return lessons_touch(cmd, conf);
}

/* any (JWT, or RFC 9068's at+jwt) or at+jwt (access tokens only). */
const char *lessons_set_token_type(cmd_parms *cmd, void *dconf,
                                   const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;

    if (here) {
        return here;
    }
    if (strcasecmp(arg, "any") == 0) {
        conf->token_type = LESSONS_TYPE_ANY;
    }
    else if (strcasecmp(arg, "at+jwt") == 0) {
        conf->token_type = LESSONS_TYPE_AT_JWT;
    }
    else {
        return apr_psprintf(cmd->pool, "LessonsJWTTokenType takes any or "
                            "at+jwt, not \"%s\"", arg);
    }
    /* at+jwt is required of every section merged after this one. */
    conf->floor.at_jwt_where = conf->token_type == LESSONS_TYPE_AT_JWT
                               ? lessons_here(cmd) : NULL;
    return lessons_touch(cmd, conf);
}

/* Some section takes DPoP: the proofs' table is made (a flag on pconf,
 * where the configuration lives).
 */
#define LESSONS_DPOP_SEEN "lessons-dpop-configured"

int lessons_dpop_configured(apr_pool_t *pconf)
{
    void *seen = NULL;

    apr_pool_userdata_get(&seen, LESSONS_DPOP_SEEN, pconf);
    return seen != NULL;
}

/* off, optional or required, as LessonsJWTDPoP and LessonsJWTCertBound
 * take them: 1, 2, 3 (LESSONS_DPOP_* and LESSONS_CERTBIND_* alike), or
 * 0 with *err naming the directive.
 */
#if LESSONS_DPOP_OFF != 1 || LESSONS_CERTBIND_OFF != 1 \
    || LESSONS_DPOP_OPTIONAL != 2 || LESSONS_CERTBIND_OPTIONAL != 2 \
    || LESSONS_DPOP_REQUIRED != 3 || LESSONS_CERTBIND_REQUIRED != 3
#error "lessons_binding_mode's values are LESSONS_DPOP_* and LESSONS_CERTBIND_*"
#endif
static int lessons_binding_mode(cmd_parms *cmd, const char *arg,
                                const char **err)
{
    static const char *const modes[] = { "off", "optional", "required" };
    int i;

    for (i = 0; i < 3; i++) {
        if (strcasecmp(arg, modes[i]) == 0) {
            return i + 1;
        }
    }
    *err = apr_psprintf(cmd->pool, "%s takes off, optional or required, "
                        "not \"%s\"", cmd->cmd->name, arg);
    return 0;
}

const char *lessons_set_dpop(cmd_parms *cmd, void *dconf, const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;
    const char *err = NULL;
    int mode = lessons_binding_mode(cmd, arg, &err);

    if (here) {
        return here;
    }
    if (!mode) {
        return err;
    }
    conf->dpop = mode;
    conf->floor.dpop = mode;
    conf->floor.dpop_where = lessons_here(cmd);
    if (mode != LESSONS_DPOP_OFF) {
        apr_pool_userdata_setn((void *)1, LESSONS_DPOP_SEEN, NULL, cmd->pool);
    }
    return lessons_touch(cmd, conf);
}

/* LessonsJWTCertBound: where it says required, start-up checks that the
 * section's virtual host can see client certificates at all
 * (lessons_check_config).
 */
const char *lessons_set_certbind(cmd_parms *cmd, void *dconf,
                                 const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;
    const char *err = NULL;
    int mode = lessons_binding_mode(cmd, arg, &err);

    if (here) {
        return here;
    }
    if (!mode) {
        return err;
    }
    conf->certbind = mode;
    conf->certbind_where = lessons_here(cmd);
    conf->floor.certbind = mode;
    conf->floor.certbind_where = conf->certbind_where;
    return lessons_touch(cmd, conf);
}

/* Some section asks for DPoP nonces: the server's nonce key is made
 * (a flag on pconf, as for DPoP itself).
 */
#define LESSONS_NONCE_SEEN "lessons-dpop-nonce-configured"

int lessons_dpop_nonce_configured(apr_pool_t *pconf)
{
    void *seen = NULL;

    apr_pool_userdata_get(&seen, LESSONS_NONCE_SEEN, pconf);
    return seen != NULL;
}

/* LessonsJWTDPoPNonce on|off: every DPoP proof must carry a nonce the
 * server made (RFC 9449 8, 9).
 */
const char *lessons_set_dpop_nonce(cmd_parms *cmd, void *dconf, int on)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;

    if (here) {
        return here;
    }
    conf->dpop_nonce = on ? LESSONS_NONCE_ON : LESSONS_NONCE_OFF;
    if (on) {
        apr_pool_userdata_setn((void *)1, LESSONS_NONCE_SEEN, NULL,
                               cmd->pool);
    }
    return lessons_touch(cmd, conf);
}

/* LessonsJWTDPoPNonceSecretFile PATH: the nonces' secret, read now, as
 * root, like the keys, so that servers holding the same file take each
 * other's nonces.
 */
const char *lessons_set_nonce_secret_file(cmd_parms *cmd, void *dconf,
                                          const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);
    const char *path = ap_server_root_relative(cmd->pool, arg);
    const char *err = ap_check_cmd_context(cmd, NOT_IN_DIR_LOC_FILE);

    if (here) {
        return here;
    }
    (void)dconf;
    if (err) {
        return err;
    }
    if (!path) {
        return apr_psprintf(cmd->pool, "%s: invalid path %s",
                            cmd->cmd->name, arg);
    }
    err = lessons_nonce_secret_read(cmd->pool, path, &sconf->nonce_secret,
                                    &sconf->nonce_secret_len);
    if (err) {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    sconf->nonce_file = path;
    return NULL;
}

/* The section's own introspection record, made by the first of its
 * directives to come.
 */
static lessons_introspect_src *lessons_introspect_own(cmd_parms *cmd,
                                                      lessons_dir_conf *conf)
{
    if (!conf->introspect || conf->introspect->section != conf) {
        conf->introspect = apr_pcalloc(cmd->pool, sizeof(*conf->introspect));
        conf->introspect->section = conf;
    }
    return conf->introspect;
}

/* The longest client secret read (bytes). */
#define LESSONS_INTROSPECT_SECRET_MAX  4096

/* LessonsJWTIntrospect URL|discover: tokens that are no JWT are asked
 * about there (RFC 7662), and a token is needed from here on, as with
 * a key: a section that asks a provider is never open.  https only,
 * but http://127.0.0.1 (a provider on this machine, for tests): the
 * endpoint is sent a secret and every token.
 */
const char *lessons_set_introspect(cmd_parms *cmd, void *dconf,
                                   const char *arg)
{
    lessons_dir_conf *conf = dconf;
    lessons_introspect_src *src;
    const char *err;
    int loopback = strncasecmp(arg, "http://127.0.0.1:", 17) == 0
                   || strncasecmp(arg, "http://127.0.0.1/", 17) == 0;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if (conf->introspect && conf->introspect->section == conf
        && conf->introspect->where) {
        return apr_psprintf(cmd->pool, "%s: this section already names an "
                            "introspection endpoint (%s)", cmd->cmd->name,
                            conf->introspect->where);
    }
    if (strcasecmp(arg, "discover") != 0) {
        err = lessons_fetch_check_url(cmd->temp_pool, arg, loopback);
        if (err) {
            return apr_psprintf(cmd->pool, "%s %s: %s (an http:// endpoint "
                                "only on 127.0.0.1: the endpoint is sent "
                                "the client's secret and every token)",
                                cmd->cmd->name, arg, err);
        }
    }
    src = lessons_introspect_own(cmd, conf);
    src->url = strcasecmp(arg, "discover") ? apr_pstrdup(cmd->pool, arg)
                                           : NULL;
    src->allow_http = src->url && loopback;
    src->where = apr_psprintf(cmd->pool, "%s:%d", cmd->directive->filename,
                              cmd->directive->line_num);
    /* Where it is the section's only way to take a token, its
     * <Location> is the API's base path, as a key's is.
     */
    if (!conf->location) {
        conf->location = lessons_plain_location(cmd);
    }
    lessons_introspect_note(cmd->pool);
    lessons_gates(cmd, conf);
    return lessons_touch(cmd, conf);
}

/* LessonsJWTIntrospectClient ID SECRET-FILE: client_secret_basic's
 * credentials.  The secret is read now, as root, like a key file: the
 * children never open the file; trailing CR/LF are dropped.
 */
const char *lessons_set_introspect_client(cmd_parms *cmd, void *dconf,
                                          const char *id, const char *file)
{
    lessons_dir_conf *conf = dconf;
    lessons_introspect_src *src;
    const char *path = ap_server_root_relative(cmd->pool, file);
    const char *data = NULL, *err;
    apr_size_t len = 0, i;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if (!*id) {
        return apr_psprintf(cmd->pool, "%s: the client id is empty",
                            cmd->cmd->name);
    }
    if (!path) {
        return apr_psprintf(cmd->pool, "%s: invalid path %s",
                            cmd->cmd->name, file);
    }
    err = lessons_file_read(cmd->pool, path, "client secret file",
                            LESSONS_INTROSPECT_SECRET_MAX, &data, &len);
    if (err) {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r')) {
        len--;
    }
    for (i = 0; i < len; i++) {
        if ((unsigned char)data[i] < 0x20 || data[i] == 0x7f) {
            break;
        }
    }
    if (len == 0 || i < len) {
        return apr_psprintf(cmd->pool, "%s: the client secret file %s %s",
                            cmd->cmd->name, path, len == 0
                            ? "holds nothing but a line end"
                            : "holds a control character (one line of "
                              "text is a secret)");
    }
    src = lessons_introspect_own(cmd, conf);
    src->client_id = apr_pstrdup(cmd->pool, id);
    src->secret = apr_pstrmemdup(cmd->pool, data, len);
    src->client_where = apr_psprintf(cmd->pool, "%s:%d",
                                     cmd->directive->filename,
                                     cmd->directive->line_num);
    return lessons_touch(cmd, conf);
}

/* LessonsJWTIntrospectJWT On|Off: a JWT that verified is asked about
 * too (revocation); off by default, as it costs a call per token.
 */
const char *lessons_set_introspect_jwt(cmd_parms *cmd, void *dconf, int on)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;

    if (here) {
        return here;
    }
    conf->introspect_jwt = on ? 2 : 1;
    return lessons_touch(cmd, conf);
}

const char *lessons_set_base_path(cmd_parms *cmd, void *dconf,
                                  const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;
    const char *path;

    if (here) {
        return here;
    }
    if (arg[0] != '/') {
        return "LessonsBasePath must be a URL path starting with /";
    }
    path = lessons_trim_slashes(cmd->pool, arg);
    if (strcmp(path, "/") == 0) {
        return "LessonsBasePath cannot be /: the API needs a path of its "
               "own, such as /api/lessons";
    }
    conf->base_path = path;
    return lessons_touch(cmd, conf);
}

/* The one parser of the numeric directives: a whole decimal number, a
 * size with an optional K, M or G (bytes), within the bounds the command
 * table gives (lessons_number_t, cmd->info).  Read as every number the
 * module reads (lessons_decimal.h), though directives are read only at
 * start-up (none is taken from .htaccess: lessons_in_htaccess).
 */
static const char *lessons_parse_number(cmd_parms *cmd, const char *arg,
                                        const lessons_number_t *n,
                                        apr_int64_t *out)
{
    apr_size_t len = strlen(arg);
    apr_int64_t v = 0, unit = 1;

    if (n->kind == LESSONS_NUMBER_BYTES && len > 1) {
        switch (apr_toupper(arg[len - 1])) {
        case 'K': unit = 1024; len--; break;
        case 'M': unit = 1024 * 1024; len--; break;
        case 'G': unit = 1024 * 1024 * 1024; len--; break;
        default: break;
        }
    }
    if (!lessons_decimal_i64(arg, len, n->min / unit, n->max / unit, &v)) {
        return apr_psprintf(cmd->pool, "%s takes %s from %" APR_INT64_T_FMT
                            " to %" APR_INT64_T_FMT "%s, not '%s'",
                            cmd->cmd->name,
                            n->kind == LESSONS_NUMBER_SECONDS
                                ? "a whole number of seconds"
                            : n->kind == LESSONS_NUMBER_MICROSECONDS
                                ? "a whole number of microseconds"
                            : n->kind == LESSONS_NUMBER_BYTES
                                ? "a size in bytes (K, M or G may follow)"
                                : "a whole number",
                            n->min, n->max,
                            n->help ? n->help : "", arg);
    }
    *out = v * unit;
    return NULL;
}

/* LessonsJWTIntrospectRate PER-SECOND [PER-CLIENT]: the server's
 * budget of questions to the introspection endpoint, and one client's
 * part of it (by default a LESSONS_INTROSPECT_RATE_SHARE-th, at least
 * 1; never more than the whole).  Main server only: the budget is the
 * server's, as the shared answers are.  cmd->info: the bounds of each
 * number.
 */
const char *lessons_set_introspect_rate(cmd_parms *cmd, void *dconf,
                                        const char *rate,
                                        const char *client)
{
    const lessons_number_t *n = cmd->info;
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);
    apr_int64_t r = 0, c = -1;
    const char *err;

    (void)dconf;
    if ((err = ap_check_cmd_context(cmd, GLOBAL_ONLY))
        || (err = lessons_parse_number(cmd, rate, n, &r))
        || (client && (err = lessons_parse_number(cmd, client, n, &c)))) {
        return err;
    }
    if (c > r) {
        return apr_psprintf(cmd->pool, "%s: one client's part (%s) cannot "
                            "be more than the server's budget (%s)",
                            cmd->cmd->name, client, rate);
    }
    sconf->introspect_rate = (int)r;
    sconf->introspect_client_rate = (int)c;
    return NULL;
}

/* Every numeric directive: parsed, checked against its bounds and
 * context, and stored where its lessons_number_t says.
 */
const char *lessons_set_number(cmd_parms *cmd, void *dconf, const char *arg)
{
    const lessons_number_t *n = cmd->info;
    lessons_srv_conf *sconf =
        ap_get_module_config(cmd->server->module_config, &lessons_module);
    const char *err = NULL;
    apr_int64_t v = 0;
    char *base;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if (n->server) {
        err = ap_check_cmd_context(cmd, n->server);
    }
    if (err || (err = lessons_parse_number(cmd, arg, n, &v))) {
        return err;
    }
    base = n->server ? (char *)sconf : (char *)dconf;
    switch (n->type) {
    case LESSONS_FIELD_INT:
        *(int *)(base + n->offset) = (int)v;
        break;
    case LESSONS_FIELD_LONG:
        *(long *)(base + n->offset) = (long)v;
        break;
    case LESSONS_FIELD_OFF:
        *(apr_off_t *)(base + n->offset) = (apr_off_t)v;
        break;
    }
    return n->server ? NULL : lessons_touch(cmd, dconf);
}

/* LessonsJWTExportClaims NAME...: this section's list replaces an
 * inherited one (as a whole: a merge never mixes two lists).
 */
const char *lessons_set_export_claim(cmd_parms *cmd, void *dconf,
                                     const char *arg)
{
    const char *here = lessons_in_htaccess(cmd);
    lessons_dir_conf *conf = dconf;
    const char *env;
    int i;

    if (here) {
        return here;
    }
    if (!*arg) {
        return apr_psprintf(cmd->pool, "%s: a claim name must not be "
                            "empty", cmd->cmd->name);
    }
    if (!conf->export_claims) {
        conf->export_claims = apr_array_make(cmd->pool, 4,
                                             sizeof(const char *));
    }
    /* Two names that make one variable would overwrite each other. */
    env = lessons_claims_env_name(cmd->temp_pool, arg);
    for (i = 0; i < conf->export_claims->nelts; i++) {
        const char *other = APR_ARRAY_IDX(conf->export_claims, i,
                                          const char *);

        if (strcmp(lessons_claims_env_name(cmd->temp_pool, other), env)
            == 0) {
            return apr_psprintf(cmd->pool, "%s: claims %s and %s would "
                                "both be exported as %s; export one of "
                                "them", cmd->cmd->name, other, arg, env);
        }
    }
    APR_ARRAY_PUSH(conf->export_claims, const char *) =
        apr_pstrdup(cmd->pool, arg);
    return lessons_touch(cmd, conf);
}

/* LessonsCORSOrigins ORIGIN...: this section's list replaces an
 * inherited one; "none" alone turns CORS off again.
 */
const char *lessons_set_cors_origin(cmd_parms *cmd, void *dconf,
                                    const char *arg)
{
    lessons_dir_conf *conf = dconf;
    const char *norm = NULL, *err;

    if ((err = lessons_in_htaccess(cmd)) != NULL) {
        return err;
    }
    if (!conf->cors_origins) {
        conf->cors_origins = apr_array_make(cmd->pool, 4,
                                            sizeof(const char *));
    }
    if (strcasecmp(arg, "none") == 0) {
        if (conf->cors_origins->nelts) {
            return apr_psprintf(cmd->pool, "%s: 'none' stands alone",
                                cmd->cmd->name);
        }
        conf->cors_none = 1;
        return lessons_touch(cmd, conf);
    }
    if (conf->cors_none) {
        return apr_psprintf(cmd->pool, "%s: 'none' stands alone",
                            cmd->cmd->name);
    }
    err = lessons_cors_origin_parse(cmd->pool, arg, &norm);
    if (err) {
        return apr_psprintf(cmd->pool, "%s: %s", cmd->cmd->name, err);
    }
    APR_ARRAY_PUSH(conf->cors_origins, const char *) = norm;
    return lessons_touch(cmd, conf);
}

