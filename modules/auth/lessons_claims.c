/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_claims.c: lookup, matching and export text of claims.
 */
#include <string.h>

#include "apr_strings.h"

#include "auth/lessons_claims.h"
#include "base/lessons_json.h"

json_t *lessons_claims_get(json_t *claims, const char *dotted)
{
    json_t *v;
    const char *part, *dot;

    if (!claims || !dotted || !json_is_object(claims)) {
        return NULL;
    }
    /* The literal key first: issuers do use dotted names
     * ("https://example.org/claims.roles"), and those must stay reachable.
     */
    v = json_object_get(claims, dotted);
    if (v || !strchr(dotted, '.')) {
        return v;
    }
    v = claims;
    part = dotted;
    for (;;) {
        dot = strchr(part, '.');
        if (dot == part || (!dot && *part == '\0')) {
            return NULL;                        /* empty part */
        }
        if (!json_is_object(v)) {
            return NULL;
        }
        v = dot ? json_object_getn(v, part, (size_t)(dot - part))
                : json_object_get(v, part);
        if (!v || !dot) {
            return v;
        }
        part = dot + 1;
    }
}

/* A string, number or boolean equal to want (see the header). */
static int lessons_claims_scalar_is(json_t *v, const char *want)
{
    char buf[64];
    size_t n;

    if (json_is_string(v)) {
        n = json_string_length(v);
        /* want ends at its NUL: an embedded NUL in v never matches */
        return strlen(want) == n && memcmp(json_string_value(v), want, n) == 0;
    }
    if (!json_is_number(v) && !json_is_boolean(v)) {
        return 0;
    }
    /* Numbers print in a few dozen bytes; anything longer is no match. */
    n = json_dumpb(v, buf, sizeof(buf), JSON_COMPACT | JSON_ENCODE_ANY);
    return n > 0 && n < sizeof(buf) && strlen(want) == n
           && memcmp(buf, want, n) == 0;
}

/* Is word one of the space-separated words of the string claim c (a
 * scope: RFC 8693 4.2, RFC 9068 2.2.3)?  Byte for byte; an embedded NUL
 * ends nothing early, it just never matches.
 */
static int lessons_claims_has_word(json_t *c, const char *word)
{
    const char *s = json_string_value(c), *end;
    apr_size_t wlen = strlen(word);

    if (!s || !wlen) {
        return 0;
    }
    end = s + json_string_length(c);
    while (s < end) {
        const char *w = s;

        while (w < end && *w != ' ') {
            w++;
        }
        if ((apr_size_t)(w - s) == wlen && memcmp(s, word, wlen) == 0) {
            return 1;
        }
        s = w + 1;
    }
    return 0;
}

int lessons_claims_match(json_t *claims, const char *name,
                         const char *const *values, int nvalues)
{
    json_t *c = lessons_claims_get(claims, name), *m;
    int scope = json_is_string(c)
                && (strcmp(name, "scope") == 0 || strcmp(name, "scp") == 0);
    size_t k;
    int i;

    if (!c || !values || nvalues <= 0) {
        return 0;
    }
    for (i = 0; i < nvalues; i++) {
        if (!values[i]) {
            continue;
        }
        if (scope) {
            if (lessons_claims_has_word(c, values[i])) {
                return 1;
            }
        }
        else if (json_is_array(c)) {
            json_array_foreach(c, k, m) {
                if (lessons_claims_scalar_is(m, values[i])) {
                    return 1;
                }
            }
        }
        else if (lessons_claims_scalar_is(c, values[i])) {
            return 1;
        }
    }
    return 0;
}

/* One value's text before the rule: strings raw (their length, NULs
 * included), null "", everything else compact JSON.  NULL on failure.
 */
static const char *lessons_claims_raw(apr_pool_t *p, json_t *v,
                                      apr_size_t *len)
{
    if (json_is_string(v)) {
        *len = json_string_length(v);
        return json_string_value(v);
    }
    if (json_is_null(v)) {
        *len = 0;
        return "";
    }
    return lessons_json_dump(p, v, len);
}

lessons_claim_text_e lessons_claims_text_check(const char *text,
                                               apr_size_t len,
                                               apr_size_t max)
{
    apr_size_t i;

    if (!text) {
        return LESSONS_CLAIM_TEXT_ABSENT;
    }
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];

        /* C0 and DEL; C1 is U+0080-U+009F, in UTF-8 0xC2 0x80-0x9F. */
        if (c < 0x20 || c == 0x7f
            || (c == 0xc2 && i + 1 < len
                && (unsigned char)text[i + 1] >= 0x80
                && (unsigned char)text[i + 1] <= 0x9f)) {
            return LESSONS_CLAIM_TEXT_CONTROL;
        }
    }
    return len > max ? LESSONS_CLAIM_TEXT_TOO_LONG : LESSONS_CLAIM_TEXT_OK;
}

/* A value's text (lessons_claims_raw) under the rule, into *text. */
static lessons_claim_text_e lessons_claims_ruled(apr_pool_t *p,
                                                 json_t *value,
                                                 apr_size_t max,
                                                 const char **text)
{
    const char *raw, *out;
    apr_size_t len = 0;
    lessons_claim_text_e rc;

    if (text) {
        *text = NULL;
    }
    if (!p || !value || !text) {
        return LESSONS_CLAIM_TEXT_ABSENT;
    }
    raw = lessons_claims_raw(p, value, &len);
    if (!raw) {
        return LESSONS_CLAIM_TEXT_NO_MEMORY;
    }
    out = apr_pstrmemdup(p, raw, len);
    rc = lessons_claims_text_check(out, len, max);
    if (rc == LESSONS_CLAIM_TEXT_OK) {
        *text = out;
    }
    return rc;
}

lessons_claim_text_e lessons_claims_text(apr_pool_t *p, json_t *value,
                                         apr_size_t max, const char **text)
{
    lessons_claim_text_e rc = lessons_claims_ruled(p, value, max, text);

    /* Arrays and objects are their JSON text, which starts with "[" or
     * "{"; a string that starts so would read as one of them (the string
     * "[\"admin\"]" as the array ["admin"]), and is not handed over.
     * So the first character tells a reader what the claim was: no
     * array and string ever give one text, as ["user","admin"] and
     * "user,admin" did when arrays were joined with commas.
     */
    if (rc == LESSONS_CLAIM_TEXT_OK && json_is_string(value)
        && (**text == '[' || **text == '{')) {
        *text = NULL;
        return LESSONS_CLAIM_TEXT_LIST;
    }
    return rc;
}

lessons_claim_text_e lessons_claims_user(apr_pool_t *p, json_t *value,
                                         apr_size_t max, const char **text)
{
    if (text) {
        *text = NULL;
    }
    if (value && !json_is_string(value) && !json_is_integer(value)) {
        return LESSONS_CLAIM_TEXT_NOT_NAME;
    }
    return lessons_claims_ruled(p, value, max, text);
}

lessons_claim_text_e lessons_claims_qualify(apr_pool_t *p, const char *user,
                                            const char *issuer,
                                            const char *const *issuers,
                                            int n, const char **name)
{
    apr_size_t len, ilen;
    const char *q;
    int i;

    *name = NULL;
    if (!p || !user || !issuer) {
        return LESSONS_CLAIM_TEXT_ABSENT;
    }
    q = apr_pstrcat(p, user, "@", issuer, NULL);
    len = strlen(q);
    /* Two pairs give one name only when it ends with "@" and each
     * issuer, one of them then longer than the other: a name belongs to
     * the longest issuer that ends it, and is refused to a shorter one.
     * So the names of a section never meet, whatever its issuers are.
     */
    for (i = 0; i < n; i++) {
        if (!issuers[i]) {
            continue;
        }
        ilen = strlen(issuers[i]);
        if (ilen > strlen(issuer) && ilen < len && q[len - ilen - 1] == '@'
            && memcmp(q + len - ilen, issuers[i], ilen) == 0) {
            return LESSONS_CLAIM_TEXT_OTHER_ISSUER;
        }
    }
    *name = q;
    return LESSONS_CLAIM_TEXT_OK;
}

const char *lessons_claims_text_describe(lessons_claim_text_e rc)
{
    switch (rc) {
    case LESSONS_CLAIM_TEXT_OK:
        return "usable";
    case LESSONS_CLAIM_TEXT_ABSENT:
        return "absent";
    case LESSONS_CLAIM_TEXT_CONTROL:
        return "holds a control character";
    case LESSONS_CLAIM_TEXT_TOO_LONG:
        return "is too long";
    case LESSONS_CLAIM_TEXT_NOT_NAME:
        return "is not a string or an integer";
    case LESSONS_CLAIM_TEXT_LIST:
        return "is a string that starts with \"[\" or \"{\", and would "
               "read as an array's or an object's JSON text";
    case LESSONS_CLAIM_TEXT_OTHER_ISSUER:
        return "reads, qualified with its issuer, as a user of another "
               "issuer of the section";
    case LESSONS_CLAIM_TEXT_NO_MEMORY:
        break;
    }
    return "could not be read (out of memory?)";
}

const char *lessons_claims_env_name(apr_pool_t *p, const char *name)
{
    static const char prefix[] = LESSONS_CLAIMS_ENV_PREFIX;
    apr_size_t pre = sizeof(prefix) - 1, n, i;
    char *out;

    if (!p || !name || !*name) {
        return NULL;
    }
    n = strlen(name);
    out = apr_palloc(p, pre + n + 1);
    memcpy(out, prefix, pre);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];

        out[pre + i] = ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
                        || (c >= '0' && c <= '9') || c == '_')
                       ? (char)c : '_';
    }
    out[pre + n] = '\0';
    return out;
}
