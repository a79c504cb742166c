/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_payload.c: decode and validate create/update bodies.  jansson
 * rejects invalid UTF-8 while parsing, so every string that reaches the
 * checks below is valid UTF-8.  It may hold NULs (\u0000 is valid JSON,
 * and JSON_ALLOW_NUL keeps them), so strings are read with their length;
 * a NUL is a control character, refused on its field like any other.
 */
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "apr_strings.h"

#include "base/lessons_json.h"
#include "api/lessons_payload.h"

typedef enum {
    LESSONS_FIELD_INT,
    LESSONS_FIELD_STRING,
    LESSONS_FIELD_BOOL
} lessons_field_kind_e;

typedef enum {
    LESSONS_F_LEVEL_ID = 0,
    LESSONS_F_TITLE,
    LESSONS_F_ORDER,
    LESSONS_F_TOPIC,
    LESSONS_F_DESCRIPTION,
    LESSONS_F_IS_ACTIVE,
    LESSONS_F_COUNT
} lessons_field_e;

/* Read-only field table: wire name, type, bounds (ints: value range;
 * strings: length in characters, and a minimum of 1 means "not blank"),
 * whether create requires it, and whether a string may hold line breaks
 * (tab, CR and LF; no other control character is allowed anywhere).
 */
static const struct {
    const char *name;
    lessons_field_kind_e kind;
    long min, max;
    int required;
    int lines;
} lessons_fields[LESSONS_F_COUNT] = {
    { "levelId",     LESSONS_FIELD_INT,    1, INT_MAX, 1, 0 },
    { "title",       LESSONS_FIELD_STRING, 1, LESSONS_TITLE_MAX, 1, 0 },
    { "order",       LESSONS_FIELD_INT,    0, INT_MAX, 1, 0 },
    { "topic",       LESSONS_FIELD_STRING, 0, LESSONS_TOPIC_MAX, 0, 0 },
    { "description", LESSONS_FIELD_STRING, 0, LESSONS_DESCRIPTION_MAX, 0, 1 },
    { "isActive",    LESSONS_FIELD_BOOL,   0, 1, 0, 0 },
};

/* Blank characters.  A string is blank when every code point in it is
 * one of these (so "" is blank too); a blank title is refused exactly as
 * an empty one.  The set is the union of three Unicode properties:
 *   White_Space: U+0009-000D, U+0020, U+0085, U+00A0, U+1680,
 *     U+2000-200A, U+2028, U+2029, U+202F, U+205F, U+3000;
 *   Default_Ignorable_Code_Point: format characters that show nothing,
 *     such as U+00AD, U+180E, U+200B-200F, U+2060, U+FEFF, the bidi
 *     controls, variation selectors, Hangul fillers and tags;
 *   Cc, the control characters: U+0000-001F, U+007F-009F.
 * Sorted, overlapping ranges merged.
 */
static const struct {
    apr_uint32_t lo, hi;
} lessons_blank[] = {
    { 0x0000, 0x0020 },         /* C0 controls, space */
    { 0x007F, 0x00A0 },         /* DEL, C1 controls, no-break space */
    { 0x00AD, 0x00AD },         /* soft hyphen */
    { 0x034F, 0x034F },         /* combining grapheme joiner */
    { 0x061C, 0x061C },         /* Arabic letter mark */
    { 0x115F, 0x1160 },         /* Hangul choseong, jungseong fillers */
    { 0x1680, 0x1680 },         /* Ogham space mark */
    { 0x17B4, 0x17B5 },         /* Khmer inherent vowels */
    { 0x180B, 0x180F },         /* Mongolian selectors, vowel separator */
    { 0x2000, 0x200F },         /* spaces, zero width space/joiners, marks */
    { 0x2028, 0x202F },         /* line, paragraph separators, bidi, NNBSP */
    { 0x205F, 0x206F },         /* math space, word joiner, invisibles */
    { 0x3000, 0x3000 },         /* ideographic space */
    { 0x3164, 0x3164 },         /* Hangul filler */
    { 0xFE00, 0xFE0F },         /* variation selectors */
    { 0xFEFF, 0xFEFF },         /* zero width no-break space (BOM) */
    { 0xFFA0, 0xFFA0 },         /* halfwidth Hangul filler */
    { 0xFFF0, 0xFFF8 },         /* reserved, default ignorable */
    { 0x1BCA0, 0x1BCA3 },       /* shorthand format controls */
    { 0x1D173, 0x1D17A },       /* musical symbol format controls */
    { 0xE0000, 0xE0FFF },       /* tags, variation selectors 17-256 */
};

int lessons_payload_type_ok(const char *ct)
{
    const char *semi, *end, *slash;
    apr_size_t n;

    if (!ct) {
        return 0;
    }
    while (*ct == ' ' || *ct == '\t') {
        ct++;
    }
    semi = strchr(ct, ';');
    end = semi ? semi : ct + strlen(ct);
    while (end > ct && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    n = (apr_size_t)(end - ct);
    slash = memchr(ct, '/', n);
    if (!slash || (apr_size_t)(slash - ct) != 11
        || strncasecmp(ct, "application", 11) != 0) {
        return 0;
    }
    slash++;
    n = (apr_size_t)(end - slash);
    if (!((n == 4 && strncasecmp(slash, "json", 4) == 0)
          || (n > 5 && strncasecmp(end - 5, "+json", 5) == 0))) {
        return 0;
    }
    /* Parameters: only charset matters, and JSON is UTF-8 (RFC 8259). */
    while (semi) {
        const char *name = semi + 1, *eq, *val, *vend;

        semi = strchr(name, ';');
        vend = semi ? semi : name + strlen(name);
        while (*name == ' ' || *name == '\t') {
            name++;
        }
        eq = memchr(name, '=', (apr_size_t)(vend - name));
        if (!eq || (apr_size_t)(eq - name) != 7
            || strncasecmp(name, "charset", 7) != 0) {
            continue;
        }
        val = eq + 1;
        while (vend > val && (vend[-1] == ' ' || vend[-1] == '\t')) {
            vend--;
        }
        if (vend - val >= 2 && *val == '"' && vend[-1] == '"') {
            val++;
            vend--;
        }
        if (vend - val != 5 || strncasecmp(val, "utf-8", 5) != 0) {
            return 0;
        }
    }
    return 1;
}

static void lessons_add_error(json_t *errors, const char *field,
                              const char *message)
{
    json_t *list = json_object_get(errors, field);

    if (!list) {
        list = json_array();
        json_object_set_new(errors, field, list);
    }
    json_array_append_new(list, json_string(message));
}

/* The code point at s[*i] of a valid UTF-8 string of len bytes; *i
 * moves past it.
 */
static apr_uint32_t lessons_utf8_next(const unsigned char *s, apr_size_t len,
                                      apr_size_t *i)
{
    apr_uint32_t c = s[(*i)++];
    int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;

    c &= 0x7F >> more;          /* the lead byte's value bits */
    for (; more > 0 && *i < len; more--) {
        c = (c << 6) | (s[(*i)++] & 0x3F);
    }
    return c;
}

static int lessons_is_blank_char(apr_uint32_t c)
{
    apr_size_t k;

    for (k = 0; k < sizeof(lessons_blank) / sizeof(lessons_blank[0]); k++) {
        if (c <= lessons_blank[k].hi) {
            return c >= lessons_blank[k].lo;
        }
    }
    return 0;
}

/* Cc: C0, DEL and C1. */
static int lessons_is_control(apr_uint32_t c)
{
    return c < 0x20 || (c >= 0x7F && c <= 0x9F);
}

/* What a string's checks need, in one pass over its len bytes. */
typedef struct {
    apr_size_t chars;           /* code points */
    int blank;                  /* every code point is blank */
    int control;                /* a control character not allowed */
} lessons_scan_t;

static void lessons_scan(const char *s, apr_size_t len, int lines,
                         lessons_scan_t *out)
{
    const unsigned char *u = (const unsigned char *)s;
    apr_size_t i = 0;

    out->chars = 0;
    out->blank = 1;
    out->control = 0;
    while (i < len) {
        apr_uint32_t c = lessons_utf8_next(u, len, &i);

        out->chars++;
        if (out->blank && !lessons_is_blank_char(c)) {
            out->blank = 0;
        }
        if (lessons_is_control(c)
            && !(lines && (c == '\t' || c == '\r' || c == '\n'))) {
            out->control = 1;
        }
    }
}

/* Check one value against its field's rules; NULL if fine, else the
 * message.  Valid values are stored into *out.
 */
static const char *lessons_check_field(apr_pool_t *p, lessons_field_e f,
                                       json_t *v, lessons_input_t *out)
{
    const char *name = lessons_fields[f].name;
    long min = lessons_fields[f].min, max = lessons_fields[f].max;
    json_int_t i;
    const char *s;
    apr_size_t len;
    lessons_scan_t scan;

    switch (lessons_fields[f].kind) {
    case LESSONS_FIELD_INT:
        if (!json_is_integer(v)) {
            return apr_psprintf(p, "The %s field must be an integer.", name);
        }
        i = json_integer_value(v);
        if (i < min || i > max) {
            return apr_psprintf(p, "The field %s must be between %ld and "
                                "%ld.", name, min, max);
        }
        if (f == LESSONS_F_LEVEL_ID) {
            out->level_id = (int)i;
            out->has_level_id = 1;
        }
        else {
            out->order = (int)i;
            out->has_order = 1;
        }
        return NULL;

    case LESSONS_FIELD_STRING:
        if (!json_is_string(v)) {
            return apr_psprintf(p, "The %s field must be a string.", name);
        }
        s = json_string_value(v);
        if (!s) {
            return apr_psprintf(p, "The %s field must be a string.", name);
        }
        len = json_string_length(v);
        lessons_scan(s, len, lessons_fields[f].lines, &scan);
        if (min > 0 && scan.blank) {
            return apr_psprintf(p, "The %s field is required.", name);
        }
        if (scan.control) {
            return lessons_fields[f].lines
                ? apr_psprintf(p, "The field %s must not contain control "
                               "characters other than tab, carriage return "
                               "and line feed.", name)
                : apr_psprintf(p, "The field %s must not contain control "
                               "characters.", name);
        }
        if (scan.chars > (apr_size_t)max) {
            return min > 0
                ? apr_psprintf(p, "The field %s must be a string with a "
                               "minimum length of %ld and a maximum length "
                               "of %ld.", name, min, max)
                : apr_psprintf(p, "The field %s must be a string with a "
                               "maximum length of %ld.", name, max);
        }
        s = apr_pstrmemdup(p, s, len);
        if (f == LESSONS_F_TITLE) {
            out->title = s;
            out->has_title = 1;
        }
        else if (f == LESSONS_F_TOPIC) {
            out->topic = s;
            out->has_topic = 1;
        }
        else {
            out->description = s;
            out->has_description = 1;
        }
        return NULL;

    case LESSONS_FIELD_BOOL:
        if (!json_is_boolean(v)) {
            return apr_psprintf(p, "The %s field must be true or false.",
                                name);
        }
        out->is_active = json_is_true(v);
        out->has_is_active = 1;
        return NULL;
    }
    return "unknown field";
}

static int lessons_field_lookup(const char *key)
{
    int f;

    for (f = 0; f < LESSONS_F_COUNT; f++) {
        if (strcasecmp(key, lessons_fields[f].name) == 0) {
            return f;
        }
    }
    return -1;
}

/* The key jansson refused as a repeat (JSON_REJECT_DUPLICATES): the
 * string token that ends at pos, where its error points, decoded by
 * jansson itself.  NULL if it cannot be found.
 */
static const char *lessons_repeated_key(apr_pool_t *p, const char *body,
                                        apr_size_t len, size_t pos)
{
    apr_size_t open, slashes;
    json_t *key;
    const char *text = NULL;

    if (!body || pos < 2 || pos > len || body[pos - 1] != '"') {
        return NULL;
    }
    /* The opening quote: the nearest one before that no backslash
     * escapes (an even run of backslashes before it).
     */
    for (open = pos - 1; open-- > 0;) {
        if (body[open] != '"') {
            continue;
        }
        for (slashes = 0; slashes < open && body[open - 1 - slashes] == '\\';
             slashes++) {
        }
        if (slashes % 2 == 0) {
            break;
        }
    }
    if (open >= pos - 1) {
        return NULL;
    }
    key = json_loadb(body + open, pos - open, JSON_DECODE_ANY | JSON_ALLOW_NUL,
                     NULL);
    if (json_is_string(key)) {
        text = apr_pstrmemdup(p, json_string_value(key),
                              json_string_length(key));
    }
    json_decref(key);
    return text;
}

/* What a body jansson refused is, for the client: a field given twice
 * is a field error like one given twice in another case; the limits of
 * the parser are named as such, not as "not valid JSON".
 */
static lessons_payload_e lessons_refused_json(apr_pool_t *p, const char *body,
                                              apr_size_t len,
                                              const json_error_t *jerr,
                                              json_t **errors,
                                              const char **detail)
{
    const char *key;
    int f;

    switch (json_error_code(jerr)) {
    case json_error_duplicate_key:
        key = lessons_repeated_key(p, body, len, (size_t)jerr->position);
        f = key ? lessons_field_lookup(key) : -1;
        if (f >= 0) {
            *errors = lessons_payload_error(p, lessons_fields[f].name,
                apr_psprintf(p, "The %s field was given more than once.",
                             lessons_fields[f].name));
            return LESSONS_PAYLOAD_INVALID;
        }
        *detail = apr_psprintf(p, "The request body gives a property more "
                               "than once (line %d, column %d); each "
                               "property may appear once.", jerr->line,
                               jerr->column);
        return LESSONS_PAYLOAD_MALFORMED;
    case json_error_numeric_overflow:
        *detail = apr_psprintf(p, "The request body holds a number this "
                               "server cannot read (line %d, column %d): "
                               "integers must fit in 64 bits and other "
                               "numbers in a double, even in properties "
                               "the API ignores.", jerr->line,
                               jerr->column);
        return LESSONS_PAYLOAD_MALFORMED;
    case json_error_null_byte_in_key:
        *detail = apr_psprintf(p, "The request body holds a property name "
                               "with a NUL character, \\u0000 (line %d, "
                               "column %d), which this server cannot "
                               "read, even in properties the API "
                               "ignores.", jerr->line, jerr->column);
        return LESSONS_PAYLOAD_MALFORMED;
    default:
        *detail = apr_psprintf(p, "The request body is not valid JSON "
                               "(line %d, column %d).", jerr->line,
                               jerr->column);
        return LESSONS_PAYLOAD_MALFORMED;
    }
}

lessons_payload_e lessons_payload_decode(apr_pool_t *p, const char *body,
                                         apr_size_t len,
                                         lessons_payload_mode_e mode,
                                         lessons_input_t *out,
                                         json_t **errors,
                                         const char **detail)
{
    json_t *doc, *v, *errs;
    json_error_t jerr;
    const char *key, *msg;
    json_t *seen[LESSONS_F_COUNT] = { NULL };
    int dup[LESSONS_F_COUNT] = { 0 };
    int f;

    memset(out, 0, sizeof(*out));
    *errors = NULL;
    *detail = NULL;

    doc = json_loadb(body ? body : "", body ? len : 0,
                     JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!doc) {
        return lessons_refused_json(p, body, len, &jerr, errors, detail);
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        *detail = "The request body must be a JSON object.";
        return LESSONS_PAYLOAD_MALFORMED;
    }

    /* Property names match case-insensitively, as ASP.NET binds them. */
    json_object_foreach(doc, key, v) {
        f = lessons_field_lookup(key);
        if (f < 0) {
            continue;
        }
        if (seen[f]) {
            dup[f] = 1;
        }
        seen[f] = v;
    }

    errs = lessons_json_pool_own(p, json_object());
    for (f = 0; f < LESSONS_F_COUNT; f++) {
        const char *name = lessons_fields[f].name;

        if (dup[f]) {
            lessons_add_error(errs, name, apr_psprintf(p, "The %s field was "
                              "given more than once.", name));
        }
        else if (!seen[f]) {
            if (mode == LESSONS_PAYLOAD_CREATE && lessons_fields[f].required) {
                lessons_add_error(errs, name, apr_psprintf(p, "The %s field "
                                  "is required.", name));
            }
        }
        else if ((msg = lessons_check_field(p, (lessons_field_e)f, seen[f],
                                            out)) != NULL) {
            lessons_add_error(errs, name, msg);
        }
    }
    json_decref(doc);

    if (json_object_size(errs) > 0) {
        *errors = errs;
        return LESSONS_PAYLOAD_INVALID;
    }
    if (mode == LESSONS_PAYLOAD_CREATE) {
        if (!out->has_topic) {
            out->topic = "";
            out->has_topic = 1;
        }
        if (!out->has_description) {
            out->description = "";
            out->has_description = 1;
        }
        if (!out->has_is_active) {
            out->is_active = 1;
            out->has_is_active = 1;
        }
    }
    return LESSONS_PAYLOAD_OK;
}

json_t *lessons_payload_error(apr_pool_t *p, const char *field,
                              const char *message)
{
    json_t *errs = lessons_json_pool_own(p, json_object());

    lessons_add_error(errs, field, message);
    return errs;
}
