/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_decimal.c: whole decimal numbers without errno
 * (lessons_decimal.h says why).
 */
#include "base/lessons_decimal.h"

int lessons_decimal_i64(const char *s, apr_size_t n, apr_int64_t min,
                        apr_int64_t max, apr_int64_t *out)
{
    /* The magnitude, which may reach 2^63 for APR_INT64_MIN. */
    apr_uint64_t mag = 0, limit = (apr_uint64_t)APR_INT64_MAX;
    apr_size_t i = 0;
    apr_int64_t v;
    int neg = 0;

    if (!s) {
        return 0;
    }
    if (n > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
        limit += 1;
    }
    if (i == n) {
        return 0;
    }
    for (; i < n; i++) {
        unsigned int d;

        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        d = (unsigned int)(s[i] - '0');
        if (mag > (limit - d) / 10) {
            return 0;
        }
        mag = mag * 10 + d;
    }
    if (!neg) {
        v = (apr_int64_t)mag;
    }
    else if (mag > (apr_uint64_t)APR_INT64_MAX) {
        v = APR_INT64_MIN;
    }
    else {
        v = -(apr_int64_t)mag;
    }
    if (v < min || v > max) {
        return 0;
    }
    *out = v;
    return 1;
}
