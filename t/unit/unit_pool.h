/* Licensed under the Apache License, Version 2.0.
 *
 * unit_pool.h: the APR lifecycle every cmocka group shares -- one pool
 * for the group, created in setup and destroyed in teardown.  Header
 * only: each test file is its own program.
 */
#ifndef UNIT_POOL_H
#define UNIT_POOL_H

#include "apr_general.h"
#include "apr_pools.h"

static apr_pool_t *pool;

/* Start APR and make the group's pool; 0 on success, as cmocka wants. */
static int unit_pool_open(void)
{
    if (apr_initialize() != APR_SUCCESS
        || apr_pool_create(&pool, NULL) != APR_SUCCESS) {
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    apr_pool_destroy(pool);
    apr_terminate();
    return 0;
}

#endif /* UNIT_POOL_H */
