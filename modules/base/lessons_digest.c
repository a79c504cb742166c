/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_digest.c: one EVP digest, each field after its length.
 */
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "base/lessons_digest.h"

/* An absent field's length: no present field has it. */
#define LESSONS_DIGEST_ABSENT (~(apr_uint64_t)0)

static int lessons_digest_update(EVP_MD_CTX *md,
                                 const lessons_digest_field_t *f)
{
    apr_uint64_t n = f->data ? (apr_uint64_t)f->len : LESSONS_DIGEST_ABSENT;
    unsigned char b[8];
    int i;

    for (i = 7; i >= 0; i--) {
        b[i] = (unsigned char)(n & 0xff);
        n >>= 8;
    }
    return EVP_DigestUpdate(md, b, sizeof(b)) == 1
           && (!f->data || f->len == 0
               || EVP_DigestUpdate(md, f->data, f->len) == 1);
}

int lessons_digest_fields(const char *tag,
                          const lessons_digest_field_t *fields, int n,
                          unsigned char out[LESSONS_DIGEST_LEN])
{
    return lessons_digest_fields_md(NULL, tag, fields, n, out);
}

int lessons_digest_fields_md(const EVP_MD *sha256, const char *tag,
                             const lessons_digest_field_t *fields, int n,
                             unsigned char out[LESSONS_DIGEST_LEN])
{
    lessons_digest_field_t t = { tag, strlen(tag) };
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int len = 0;
    int ok, i;

    ok = md && EVP_DigestInit_ex(md, sha256 ? sha256 : EVP_sha256(), NULL)
               == 1
         && lessons_digest_update(md, &t);
    for (i = 0; ok && i < n; i++) {
        ok = lessons_digest_update(md, &fields[i]);
    }
    ok = ok && EVP_DigestFinal_ex(md, out, &len) == 1
         && len == LESSONS_DIGEST_LEN;
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return ok;
}

char *lessons_digest_hex(apr_pool_t *p, const unsigned char *d,
                         apr_size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *out = apr_palloc(p, n * 2 + 1);
    apr_size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 0x0f];
    }
    out[2 * n] = '\0';
    return out;
}
