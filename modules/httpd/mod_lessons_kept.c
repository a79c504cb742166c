/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_kept.c: what the shared blocks kept across restarts
 * (ap_retained_data: the key sets', the DPoP proofs', the introspection
 * answers') need beside them: a global mutex made once, on the process
 * pool like the block, so that every generation of children that ever
 * uses a block locks the same one.  A lock made on each generation's
 * pconf would leave the old children, still answering during a graceful
 * restart, and the new ones taking one block under two locks.
 */

#include "httpd/mod_lessons.h"

apr_status_t lessons_kept_mutex(apr_global_mutex_t **lock, const char *type,
                                server_rec *s)
{
    apr_status_t rv;

    if (*lock) {
        return APR_SUCCESS;
    }
    rv = ap_global_mutex_create(lock, NULL, type, NULL, s, s->process->pool,
                                0);
    if (rv != APR_SUCCESS) {
        *lock = NULL;
    }
    return rv;
}
