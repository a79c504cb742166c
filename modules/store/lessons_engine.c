/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_engine.c: the engines of this build (the Makefile's ENGINES
 * defines LESSONS_ENGINE_<NAME> for each) and their lookup.
 */
#include <string.h>

#include "store/lessons_engine.h"

#ifdef LESSONS_ENGINE_SQLITE3
extern const lessons_engine_t lessons_engine_sqlite3;
#endif
#ifdef LESSONS_ENGINE_PGSQL
extern const lessons_engine_t lessons_engine_pgsql;
#endif

const lessons_engine_t *const lessons_engines[] = {
#ifdef LESSONS_ENGINE_SQLITE3
    &lessons_engine_sqlite3,
#endif
#ifdef LESSONS_ENGINE_PGSQL
    &lessons_engine_pgsql,
#endif
    NULL
};

const lessons_engine_t *lessons_engine_find(const char *driver)
{
    int i;

    for (i = 0; driver && lessons_engines[i]; i++) {
        if (strcmp(lessons_engines[i]->driver, driver) == 0) {
            return lessons_engines[i];
        }
    }
    return NULL;
}

const lessons_engine_t *lessons_engine_of(const apr_dbd_driver_t *driver)
{
    return driver ? lessons_engine_find(apr_dbd_name(driver)) : NULL;
}

void lessons_engines_process_init(apr_pool_t *p, long timeout_ms)
{
    int i;

    for (i = 0; lessons_engines[i]; i++) {
        if (lessons_engines[i]->process_init) {
            lessons_engines[i]->process_init(p, timeout_ms);
        }
    }
}

int lessons_engine_says(const char *err, const char *part)
{
    return err && part && strstr(err, part) != NULL;
}
