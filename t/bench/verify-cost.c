/* Licensed under the Apache License, Version 2.0.
 *
 * verify-cost.c: what verifying a token costs when the token cache
 * cannot help (a token seen for the first time): every token of a file,
 * one per line, verified once by lessons_token_verify with a key file's
 * keys, and the wall-clock time per token printed.  make auth-cost runs
 * it (t/bench/auth-cost.sh) for HS256, RS256, PS256 and ES256.
 *
 *   build/bench/verify-cost ALG KEYFILE TOKENS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apr_general.h"
#include "apr_pools.h"

#include "keys/lessons_keyset.h"
#include "auth/lessons_token.h"

int main(int argc, char **argv)
{
    apr_pool_t *p, *each;
    lessons_keyset_t *set = NULL;
    lessons_token_policy_t policy;
    const unsigned char *key = NULL;
    apr_size_t len = 0;
    const char *err, *subject;
    char line[LESSONS_TOKEN_MAX_LEN + 2];
    struct timespec t0, t1;
    double us = 0;
    int n = 0, ok = 0;
    lessons_alg_t alg;
    FILE *f;

    if (argc != 4 || apr_initialize() != APR_SUCCESS
        || apr_pool_create(&p, NULL) != APR_SUCCESS
        || (alg = lessons_alg_parse(argv[1])) == LESSONS_ALG_INVAL) {
        fprintf(stderr, "usage: verify-cost ALG KEYFILE TOKENS\n");
        return 2;
    }
    if ((err = lessons_key_read(p, argv[2], &key, &len)) != NULL
        || (err = lessons_keyset_make(p, key, len, &set)) != NULL) {
        fprintf(stderr, "verify-cost: %s\n", err);
        return 1;
    }
    if (!(f = fopen(argv[3], "r"))) {
        perror(argv[3]);
        return 1;
    }
    memset(&policy, 0, sizeof(policy));
    policy.keys = set;
    policy.algs = LESSONS_ALG_BIT(alg);
    apr_pool_create(&each, p);
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ok += lessons_token_verify(each, &policy, line, (apr_int64_t)time(NULL),
                                   &subject) == LESSONS_TOKEN_OK;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        us += (double)(t1.tv_sec - t0.tv_sec) * 1e6
              + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        apr_pool_clear(each);
        n++;
    }
    fclose(f);
    if (n == 0 || ok != n) {
        fprintf(stderr, "verify-cost: %s: %d of %d tokens verified\n",
                argv[1], ok, n);
        return 1;
    }
    printf("verify %-6s %7.1f us/token uncached (%d tokens)\n", argv[1],
           us / n, n);
    return 0;
}
