/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keytrust.h: what decides where a key source's keys come from
 * and whom its fetch trusts (issue 55 §1): the URL or issuer, the CA
 * certificates (or none: the system's), the proxy (or none: direct) and
 * the algorithms.  A source is what its own section names; sources that
 * differ in any of these never share a fetch, a slot or a set, so that a
 * virtual host never trusts another's CA nor goes through another's
 * proxy.  Those alike in all of them may share one fetch.
 *
 * Compared field by field (never by a digest that might collide or fail
 * to be made); httpd-free, so that cmocka and fuzz_decide hold it to
 * that.
 */
#ifndef LESSONS_KEYTRUST_H
#define LESSONS_KEYTRUST_H

#include "apr.h"
#include "keys/lessons_keyset.h"

typedef struct {
    const char *url;                /* the keys URL, or the issuer */
    int discover;                   /* url is an issuer to discover */
    const char *ca_pem;             /* LessonsJWTKeysCA's certificates, or
                                     * NULL: the system's CAs */
    apr_size_t ca_len;
    const char *proxy;              /* LessonsJWTKeysProxy, or NULL */
    lessons_algs_t algs;            /* what every key must fit */
} lessons_keytrust_t;

/* 1 when a and b fetch the same document trusting the same CAs through
 * the same proxy (or both none) for the same algorithms, else 0.
 */
int lessons_keytrust_alike(const lessons_keytrust_t *a,
                           const lessons_keytrust_t *b);

/* Which of n sources fetch for which: same[i] is the first j < i alike
 * with i, or -1 when i fetches for itself.  A source whose used[i] is 0
 * (no section takes its keys) neither fetches nor is fetched for
 * (same[i] -1); used may be NULL (all used).
 */
void lessons_keytrust_share(const lessons_keytrust_t *const *trust,
                            const int *used, int n, int *same);

#endif
