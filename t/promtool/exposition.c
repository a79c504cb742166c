/* Licensed under the Apache License, Version 2.0.
 *
 * exposition.c: prints the lessons-metrics handler's answer without a
 * server, from the code the handler runs: a block made by
 * lessons_metrics_attach, a process's slot, one keys URL that holds a
 * set (so that every family of the sources has its sample, the age
 * included), lessons_metrics_read and lessons_metrics_prometheus, then
 * the read lease's gauges as the handler appends them with
 * LessonsDBLease.  Every family, every label value.
 *
 *   build/monitor/exposition [SOURCE]     (default https://idp.example/jwks)
 *
 * t/promtool/check.pl reads it: the alerting rules, their tests and the
 * dashboard may name only the series and label values printed here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apr_general.h"
#include "apr_pools.h"
#include "apr_time.h"

#include "ops/lessons_metrics.h"

#define SLOTS 2

/* The lease's buckets (lessons_lease_wait_bounds), microseconds. */
static const apr_interval_time_t wait_bounds[LESSONS_METRICS_LEASE_WAITS
                                             - 1] = {
    100, 1000, 5000, 25000, 100000, 1000000
};

int main(int argc, const char *const *argv)
{
    const char *source = argc > 1 ? argv[1] : "https://idp.example/jwks";
    const char *names[1];
    apr_pool_t *pool;
    lessons_metrics_t *m;
    lessons_metrics_slot_t *slot;
    lessons_metrics_sum_t sum;
    lessons_metrics_lease_t lease;
    apr_time_t now = apr_time_now();
    apr_size_t size = lessons_metrics_size(SLOTS), len = 0;
    const char *text;
    void *mem;
    int at;

    if (apr_initialize() != APR_SUCCESS
        || apr_pool_create(&pool, NULL) != APR_SUCCESS) {
        fprintf(stderr, "exposition: APR did not start\n");
        return 1;
    }
    names[0] = source;
    mem = apr_pcalloc(pool, size);
    m = lessons_metrics_attach(mem, size, SLOTS, 1, now);
    slot = m ? lessons_metrics_claim(m, 1, NULL, NULL) : NULL;
    at = m ? lessons_metrics_source(m, source, names, 1) : -1;
    if (!slot || at < 0) {
        fprintf(stderr, "exposition: no block, slot or source\n");
        return 1;
    }
    lessons_metrics_source_set(slot, at, LESSONS_SRC_FETCHED, now);
    lessons_metrics_source_set(slot, at, LESSONS_SRC_INSTALLED, now);
    lessons_metrics_source_set(slot, at, LESSONS_SRC_KEYS, 1);
    lessons_metrics_read(m, NULL, NULL, &sum);
    text = lessons_metrics_prometheus(pool, &sum, names, 1, now, &len);
    fwrite(text, 1, len, stdout);
    memset(&lease, 0, sizeof(lease));
    lease.valid = 1;
    lease.listening = 1;
    lease.left = 0;
    lease.run = 7 * APR_USEC_PER_SEC;
    lease.length = 10 * APR_USEC_PER_SEC;
    lease.others = 2;
    lease.alone_writes = 3;
    lease.told_writes = 5;
    lease.held_writes = 8;
    lease.waits[0] = 13;
    lease.waits[2] = 1;
    lease.wait_bounds = wait_bounds;
    lease.waited = 4321;
    fputs(lessons_metrics_lease_prometheus(pool, &lease), stdout);
    apr_terminate();
    return fflush(stdout) == 0 ? 0 : 1;
}
