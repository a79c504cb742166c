/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_certbind.h: certificate-bound access tokens (RFC 8705 3).  A
 * token whose "cnf" holds "x5t#S256" is bound to the client certificate
 * of that thumbprint: base64url, no padding, of SHA-256 over the
 * certificate's DER.  It is taken only on a connection where mod_ssl
 * verified that very certificate, so that a stolen token is useless
 * without the certificate's private key.  Nothing here knows httpd: the
 * glue hands over the certificate as OpenSSL holds it (the peer
 * certificate of mod_ssl's SSL) or, where it has no SSL, as mod_ssl gives
 * it (SSL_CLIENT_CERT, PEM), and lessons_decide asks for the check.
 */
#ifndef LESSONS_CERTBIND_H
#define LESSONS_CERTBIND_H

#include <jansson.h>
#include <openssl/x509.h>
#include "apr.h"

#include "auth/lessons_dpop.h"

/* LessonsJWTCertBound. */
#define LESSONS_CERTBIND_OFF       1    /* cnf x5t#S256 is not looked at:
                                         * a bound token is a bearer token
                                         * (RFC 8705 3: a server that does
                                         * not know the binding) */
#define LESSONS_CERTBIND_OPTIONAL  2    /* a bound token needs its
                                         * certificate */
#define LESSONS_CERTBIND_REQUIRED  3    /* and tokens bound to nothing are
                                         * refused */

/* Characters of a thumbprint (43), NUL included. */
#define LESSONS_CERTBIND_X5T_LEN   LESSONS_DPOP_HASH_LEN

/* The thumbprint of the one certificate in pem (len bytes, as mod_ssl's
 * SSL_CLIENT_CERT has it): 0 and out filled, or -1 (not a certificate;
 * OpenSSL's error queue is cleared).
 */
int lessons_certbind_thumbprint(const char *pem, apr_size_t len,
                                char out[LESSONS_CERTBIND_X5T_LEN]);

/* The thumbprint of a certificate OpenSSL parsed (the peer certificate
 * of a TLS connection): 0 and out filled, or -1 (NULL, or no DER could
 * be had; OpenSSL's error queue is cleared).  Its DER is i2d_X509's, the
 * bytes mod_ssl's SSL_CLIENT_CERT armours (PEM_write_bio_X509), so the
 * thumbprint is lessons_certbind_thumbprint's of that PEM.
 */
int lessons_certbind_thumbprint_x509(const X509 *cert,
                                     char out[LESSONS_CERTBIND_X5T_LEN]);

/* Whether mod_ssl took the connection's client certificate, by its
 * SSL_CLIENT_VERIFY (verify; NULL: none): SUCCESS, GENEROUS, or, under
 * SSLVerifyClient optional_no_ca, "FAILED:" with one of the errors
 * mod_ssl waives there (ssl_verify_error_is_optional: self-signed, an
 * issuer it does not know), which it reports so although it took the
 * certificate (GENEROUS is reported only where OpenSSL's result was
 * cleared, which mod_ssl does not do).  The handshake proved the key
 * either way; RFC 8705 2.2 binds such a certificate by its thumbprint.
 * Any other FAILED, and NONE: 0.
 */
int lessons_certbind_verified(const char *verify);

typedef enum {
    LESSONS_CERTBIND_UNBOUND = 0,   /* no cnf, or a cnf without x5t#S256 */
    LESSONS_CERTBIND_MATCH,         /* bound to this connection's
                                     * certificate */
    LESSONS_CERTBIND_MISMATCH,      /* bound to another certificate */
    LESSONS_CERTBIND_NO_CERT,       /* bound, and the connection has no
                                     * verified certificate */
    LESSONS_CERTBIND_MALFORMED      /* cnf not an object, or its x5t#S256
                                     * not a thumbprint's 43 base64url
                                     * characters */
} lessons_certbind_e;

/* A token's claims against the thumbprint of the connection's verified
 * certificate (x5t; NULL: none).  The thumbprints are compared in
 * constant time.
 */
lessons_certbind_e lessons_certbind_check(const json_t *claims,
                                          const char *x5t);

/* Whether the claims say the token is bound to a certificate at all
 * (anything but UNBOUND without looking at a certificate).
 */
int lessons_certbind_bound(const json_t *claims);

/* What a result means, for a client (never a thumbprint). */
const char *lessons_certbind_describe(lessons_certbind_e rc);

#endif /* LESSONS_CERTBIND_H */
