/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz.h: what every libFuzzer harness of t/fuzz shares -- APR started
 * once, a pool per input (so that nothing an input allocates outlives
 * it), and the input as a NUL-terminated string for the units that take
 * C strings.  Header only: each harness is its own program.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apr_general.h"
#include "apr_pools.h"

#include "keys/lessons_keyset.h"

static apr_pool_t *fuzz_root;

/* Memory malloc'd for the whole run and reachable only from pool memory
 * (Debian's APR takes its blocks with mmap, which the leak check does
 * not read): cjose's keys, a key set's for the run.  Told to the leak
 * check as not leaked, and nothing else.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/lsan_interface.h>
#define FUZZ_KEEP(object) __lsan_ignore_object(object)
#endif
#endif
#ifndef FUZZ_KEEP
#define FUZZ_KEEP(object) ((void)(object))
#endif

static inline void fuzz_keep_keys(const lessons_keyset_t *set)
{
    int i;

    for (i = 0; set && i < set->nkeys; i++) {
        FUZZ_KEEP(set->keys[i].key.jwk);
    }
}

/* The harness's own set-up, once (keys, policies). */
static void fuzz_setup(apr_pool_t *p);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (apr_initialize() != APR_SUCCESS
        || apr_pool_create(&fuzz_root, NULL) != APR_SUCCESS) {
        abort();
    }
    fuzz_setup(fuzz_root);
    return 0;
}

/* The input as a string (an embedded NUL ends it, as it would in a
 * header), in p.
 */
static inline char *fuzz_string(apr_pool_t *p, const uint8_t *data, size_t size)
{
    char *s = apr_palloc(p, size + 1);

    if (size) {
        memcpy(s, data, size);
    }
    s[size] = '\0';
    return s;
}

/* Split the input at its first byte 0x01 (a field separator the
 * dictionary knows): *a before it, *b after (empty when there is none).
 */
static inline void fuzz_split(apr_pool_t *p, const uint8_t *data, size_t size,
                       char **a, char **b)
{
    const uint8_t *sep = memchr(data, 0x01, size);
    size_t n = sep ? (size_t)(sep - data) : size;

    *a = fuzz_string(p, data, n);
    *b = sep ? fuzz_string(p, sep + 1, size - n - 1) : fuzz_string(p, data, 0);
}

#endif /* FUZZ_H */
