/* Licensed under the Apache License, Version 2.0.
 *
 * unit_lease.h: what the read lease's tests share: a version made from
 * its epoch and sum.  Header only, like unit_pool.h: include
 * lessons_lease.h first.
 */
#ifndef UNIT_LEASE_H
#define UNIT_LEASE_H

#include <string.h>

#include "apr_strings.h"

static inline lessons_lease_version_t version(const char *epoch,
                                              apr_int64_t sum)
{
    lessons_lease_version_t v;

    memset(&v, 0, sizeof(v));
    v.sum = sum;
    apr_cpystrn(v.epoch, epoch, sizeof(v.epoch));
    return v;
}

#endif /* UNIT_LEASE_H */
