/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_discovery.c: an issuer as an admin writes it and a provider's
 * metadata document for it, as a provider (or whoever answers in its
 * place) sends it (the input, split at 0x01): the issuer's form, the
 * places its metadata is looked for, and the document's checks.  What
 * they take must hold: the places are https URLs a fetch would try, and
 * a jwks_uri taken is one too.
 */
#include "fuzz.h"

#include "keys/lessons_discovery.h"
#include "keys/lessons_fetch.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    char *issuer, *doc;
    const char *openid, *oauth, *uri = NULL, *err = NULL;
    lessons_discovery_e rc;

    apr_pool_create(&p, fuzz_root);
    fuzz_split(p, data, size, &issuer, &doc);
    if (!lessons_discovery_check_issuer(p, issuer)) {
        lessons_discovery_urls(p, issuer, &openid, &oauth);
        if (lessons_fetch_check_url(p, openid, 0)
            || lessons_fetch_check_url(p, oauth, 0)) {
            abort();
        }
    }
    else {
        issuer = "https://sso.example.org/realms/school";
    }
    rc = lessons_discovery_parse(p, doc, strlen(doc), issuer, &uri, &err);
    if ((rc == LESSONS_DISCOVERY_OK) != (uri != NULL)
        || (rc != LESSONS_DISCOVERY_OK && !err)
        || (uri && lessons_fetch_check_url(p, uri, 0))) {
        abort();
    }
    apr_pool_destroy(p);
    return 0;
}
