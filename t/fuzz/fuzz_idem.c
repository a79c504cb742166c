/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_idem.c: Idempotency-Key field values (the input, split at 0x01:
 * the field, then a body), read as RFC 8941 sf-strings or bare keys.
 * Whatever is taken must be a key the rules allow (1 to 255 printable
 * ASCII characters; taken bare, none of the characters a bare key must
 * not hold) that comes back the same when written as an sf-string
 * again, and, written bare, is refused or the same key; its caller,
 * fingerprint and claim number are made.
 */
#include "fuzz.h"

#include "api/lessons_idem.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

/* The key as an sf-string again: quoted, '"' and '\' escaped. */
static char *fuzz_quote(apr_pool_t *p, const char *key)
{
    char *out = apr_palloc(p, 2 * strlen(key) + 3), *o = out;

    *o++ = '"';
    for (; *key; key++) {
        if (*key == '"' || *key == '\\') {
            *o++ = '\\';
        }
        *o++ = *key;
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

/* A key taken without quotes holds none of what ends or spoils one,
 * and does not begin as another RFC 8941 item would.
 */
static int fuzz_bare_allowed(const char *key)
{
    return !strchr("(:?", key[0]) && !strpbrk(key, " \"'\\,;");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    char *field, *body;
    const char *key = NULL, *again = NULL, *bare = NULL, *caller, *f;
    size_t i, n;

    apr_pool_create(&p, fuzz_root);
    fuzz_split(p, data, size, &field, &body);
    if (lessons_idem_key_parse(p, field, &key) == LESSONS_IDEM_KEY_OK) {
        n = strlen(key);
        if (n < 1 || n > LESSONS_IDEM_KEY_MAX) {
            abort();
        }
        for (i = 0; i < n; i++) {
            if (key[i] < 0x20 || key[i] > 0x7e) {
                abort();
            }
        }
        if (lessons_idem_key_parse(p, fuzz_quote(p, key), &again)
            != LESSONS_IDEM_KEY_OK || strcmp(again, key) != 0) {
            abort();
        }
        f = field + strspn(field, " ");
        if (*f != '"' && !fuzz_bare_allowed(key)) {
            abort();                /* taken bare, yet not a bare key */
        }
        /* Written bare, the same key or none (spaces around a key are
         * the field's, not the key's; a key that begins with '"' is then
         * a quoted one).
         */
        if (key[0] != ' ' && key[0] != '"' && key[n - 1] != ' '
            && lessons_idem_key_parse(p, key, &bare) == LESSONS_IDEM_KEY_OK
            && (strcmp(bare, key) != 0 || !fuzz_bare_allowed(key))) {
            abort();
        }
        caller = lessons_idem_caller(p, "key file fuzz for any issuer", body,
                                     key, NULL);
        if (!caller || strlen(caller) != LESSONS_IDEM_DIGEST_HEX
            || !lessons_idem_fingerprint(p, "POST", field, caller, body,
                                         strlen(body))) {
            abort();
        }
        lessons_idem_claim_id(caller, key);
    }
    else if (key) {
        abort();                    /* a refusal leaves no key */
    }
    lessons_idem_key_describe(lessons_idem_key_parse(p, body, &key));
    apr_pool_destroy(p);
    return 0;
}
