/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_keytrust.c: which key sources may share a fetch (see the
 * header): alike in URL, CA certificates, proxy and algorithms, or not
 * at all.
 */
#include <string.h>

#include "keys/lessons_keytrust.h"

/* Both unset, or both set and equal: "none" never matches a value. */
static int keytrust_same_text(const char *a, const char *b)
{
    return !a == !b && (!a || strcmp(a, b) == 0);
}

int lessons_keytrust_alike(const lessons_keytrust_t *a,
                           const lessons_keytrust_t *b)
{
    return a->discover == b->discover && a->algs == b->algs
           && a->url && b->url && strcmp(a->url, b->url) == 0
           && keytrust_same_text(a->proxy, b->proxy)
           && !a->ca_pem == !b->ca_pem
           && (!a->ca_pem || (a->ca_len == b->ca_len
                              && memcmp(a->ca_pem, b->ca_pem,
                                        a->ca_len) == 0));
}

void lessons_keytrust_share(const lessons_keytrust_t *const *trust,
                            const int *used, int n, int *same)
{
    int i, j;

    for (i = 0; i < n; i++) {
        same[i] = -1;
        if (used && !used[i]) {
            continue;
        }
        /* The first alike that fetches for itself: one fetcher for a
         * whole group, never a chain.
         */
        for (j = 0; j < i; j++) {
            if ((!used || used[j]) && same[j] < 0
                && lessons_keytrust_alike(trust[j], trust[i])) {
                same[i] = j;
                break;
            }
        }
    }
}
