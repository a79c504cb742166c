/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_jwtcaps.h: what the libjwt in use can verify, found out by
 * asking it, not by its version.  Debian 12 ships libjwt 1.10, which
 * refuses any "typ" but JWT inside jwt_decode and knows no PS*; Debian
 * 13 ships 1.17, which lets RFC 9068's "at+jwt" through and names PS*,
 * but whose OpenSSL build verifies no PS* token (fixed upstream in
 * 1.18.1).  Each capability is one known token that libjwt must verify.
 */
#ifndef LESSONS_JWTCAPS_H
#define LESSONS_JWTCAPS_H

#include "apr_pools.h"

#define LESSONS_JWTCAP_TYPED  0x1u  /* a "typ" other than JWT gets through
                                     * jwt_decode (libjwt 1.12 and later) */
#define LESSONS_JWTCAP_PSS    0x2u  /* jwt_decode verifies PS256 */

/* The capabilities of the libjwt this process runs with: two
 * verifications of known tokens, so call it once (at start-up).
 */
unsigned lessons_jwtcaps_probe(void);

/* The libjwt this module was built against ("1.10.2", pkg-config's
 * word; "unknown" without it).
 */
const char *lessons_jwtcaps_built_with(void);

/* For log lines: the version and what caps allow. */
const char *lessons_jwtcaps_describe(apr_pool_t *p, unsigned caps);

#endif /* LESSONS_JWTCAPS_H */
