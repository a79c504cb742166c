/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_kept.c: what the shared blocks kept across restarts
 * (ap_retained_data: the key sets', the DPoP proofs', the introspection
 * answers') need beside them: a global mutex made once, on the process
 * pool like the block, so that every generation of children that ever
 * uses a block locks the same one.  A lock made on each generation's
 * pconf would leave the old children, still answering during a graceful
 * restart, and the new ones taking one block under two locks.  And
 * the libraries the module links, kept loaded from one generation to
 * the next.
 */

#include <dlfcn.h>
#include <stdint.h>

#include <cjose/cjose.h>
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <zlib.h>
#ifdef LESSONS_ENGINE_SQLITE3
#include <sqlite3.h>
#endif
#ifdef LESSONS_ENGINE_PGSQL
#include <libpq-fe.h>
#endif

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

/* A function of each library the module links, to find it by (one
 * added to the link needs its line here: t/api/libraries.t reads the
 * module's DT_NEEDED entries and fails on one the parent unloads).
 */
#define LESSONS_FN(f) ((const void *)(uintptr_t)(f))

void lessons_keep_libraries(void)
{
    /* httpd unloads every module at a restart and loads it again, and
     * with mod_lessons.so went its libraries: libcurl alone brings some
     * thirty (GnuTLS, Kerberos, LDAP, ...), each unmapped, mapped,
     * relocated and initialised again in the parent while no child
     * takes connections (a graceful restart's parent spent four times
     * httpd's own time on it).  Kept loaded, a restart loads the module
     * alone.  Once a process: the retained flag outlives pconf.
     */
    const void *fns[] = {
        LESSONS_FN(curl_version), LESSONS_FN(cjose_version),
        LESSONS_FN(json_loads), LESSONS_FN(OpenSSL_version),
        LESSONS_FN(OPENSSL_init_ssl), LESSONS_FN(zlibVersion),
#ifdef LESSONS_ENGINE_SQLITE3
        LESSONS_FN(sqlite3_libversion),
#endif
#ifdef LESSONS_ENGINE_PGSQL
        LESSONS_FN(PQlibVersion),
#endif
    };
    apr_size_t i;

    if (ap_retained_data_get(LESSONS_LIBRARIES_KEPT)) {
        return;
    }
    ap_retained_data_create(LESSONS_LIBRARIES_KEPT, 1);
    for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        Dl_info info;

        /* RTLD_NOLOAD: the object already loaded, now never unloaded
         * (a handle never closed; the flag is what counts). */
        if (dladdr(fns[i], &info) && info.dli_fname) {
            (void)dlopen(info.dli_fname,
                         RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        }
    }
}
