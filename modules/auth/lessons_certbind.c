/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_certbind.c: RFC 8705's certificate thumbprint and a token's
 * cnf x5t#S256 against it (see lessons_certbind.h).  The certificate's
 * DER is OpenSSL's encoding of the certificate it parsed, or is taken
 * from its PEM by OpenSSL's PEM reader, and hashed: the PEM's text (line
 * breaks, headers) never changes the thumbprint.
 */
#include <string.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "auth/lessons_certbind.h"

#define LESSONS_CERTBIND_CHARS (LESSONS_CERTBIND_X5T_LEN - 1)

/* A certificate's outline: one DER SEQUENCE, of definite length, that
 * spans the bytes exactly and begins with a SEQUENCE (tbsCertificate).
 * Text under a CERTIFICATE armour is no certificate.
 */
static int lessons_certbind_der_shape(const unsigned char *der, long n)
{
    const unsigned char *p = der;
    long len = 0;
    int tag = 0, cls = 0;

    if (ASN1_get_object(&p, &len, &tag, &cls, n) != V_ASN1_CONSTRUCTED
        || tag != V_ASN1_SEQUENCE || cls != V_ASN1_UNIVERSAL
        || p + len != der + n) {
        return 0;
    }
    return ASN1_get_object(&p, &len, &tag, &cls, len) == V_ASN1_CONSTRUCTED
           && tag == V_ASN1_SEQUENCE && cls == V_ASN1_UNIVERSAL
           && p + len <= der + n;
}

/* mod_ssl's SSL_CLIENT_CERT is PEM_write_bio_X509's output, a certificate
 * it has verified: the PEM's body is the DER RFC 8705 hashes.  Decoding
 * the body is all the thumbprint needs.  Parsing the certificate too
 * (PEM_read_bio_X509, which on OpenSSL 3 decodes its public key through
 * the provider framework) cost about 1.7 million instructions a request,
 * 24 times an HS256 request's (make bench's certificate-bound row).
 */
int lessons_certbind_thumbprint(const char *pem, apr_size_t len,
                                char out[LESSONS_CERTBIND_X5T_LEN])
{
    BIO *bio;
    char *name = NULL, *header = NULL;
    unsigned char *der = NULL;
    long n = 0;
    int rc = -1;

    /* BIO_new_mem_buf takes an int length. */
    if (!pem || len == 0 || len > (apr_size_t)0x7fffffff) {
        return -1;
    }
    bio = BIO_new_mem_buf(pem, (int)len);
    if (bio && PEM_read_bio(bio, &name, &header, &der, &n) == 1
        && name && (strcmp(name, PEM_STRING_X509) == 0
                    || strcmp(name, PEM_STRING_X509_OLD) == 0)
        && der && n > 0 && lessons_certbind_der_shape(der, n)) {
        rc = lessons_dpop_hash(der, (apr_size_t)n, out);
    }
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(der);
    BIO_free(bio);
    ERR_clear_error();
    return rc;
}

/* i2d_X509 writes the encoding OpenSSL kept when it parsed the
 * certificate (the DER the peer sent), not one made anew: the same bytes
 * as the PEM path's, hashed without the PEM's base64 on either side.
 */
int lessons_certbind_thumbprint_x509(const X509 *cert,
                                     char out[LESSONS_CERTBIND_X5T_LEN])
{
    unsigned char *der = NULL;
    int n, rc = -1;

    if (!cert) {
        return -1;
    }
    n = i2d_X509(cert, &der);
    if (n > 0 && der) {
        rc = lessons_dpop_hash(der, (apr_size_t)n, out);
    }
    OPENSSL_free(der);
    ERR_clear_error();
    return rc;
}

int lessons_certbind_verified(const char *verify)
{
    /* mod_ssl's ssl_verify_error_is_optional, for optional_no_ca. */
    static const long waived[] = {
        X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
        X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
        X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
        X509_V_ERR_CERT_UNTRUSTED,
        X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
    };
    static const char failed[] = "FAILED:";
    apr_size_t i;

    if (!verify) {
        return 0;
    }
    if (strcmp(verify, "SUCCESS") == 0 || strcmp(verify, "GENEROUS") == 0) {
        return 1;
    }
    if (strncmp(verify, failed, sizeof(failed) - 1) != 0) {
        return 0;
    }
    verify += sizeof(failed) - 1;
    for (i = 0; i < sizeof(waived) / sizeof(waived[0]); i++) {
        const char *text = X509_verify_cert_error_string(waived[i]);

        if (text && strcmp(verify, text) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A thumbprint as RFC 8705 3.1 writes it: 43 base64url characters. */
static int lessons_certbind_well_formed(const char *x5t)
{
    apr_size_t i;

    for (i = 0; i < LESSONS_CERTBIND_CHARS; i++) {
        char c = x5t[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
              || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
            return 0;
        }
    }
    return x5t[i] == '\0';
}

/* The token's x5t#S256 into *bound (NULL: unbound); -1 when its cnf is
 * not one that can be read (then nothing is known, and nothing taken).
 */
static int lessons_certbind_claim(const json_t *claims, const char **bound)
{
    json_t *cnf = json_object_get(claims, "cnf"), *x5t;

    *bound = NULL;
    if (!cnf) {
        return 0;
    }
    if (!json_is_object(cnf)) {
        return -1;
    }
    x5t = json_object_get(cnf, "x5t#S256");
    if (!x5t) {
        return 0;
    }
    if (!json_is_string(x5t) || json_string_length(x5t)
                                != LESSONS_CERTBIND_CHARS
        || !lessons_certbind_well_formed(json_string_value(x5t))) {
        return -1;
    }
    *bound = json_string_value(x5t);
    return 0;
}

int lessons_certbind_bound(const json_t *claims)
{
    const char *bound;

    return lessons_certbind_claim(claims, &bound) != 0 || bound != NULL;
}

lessons_certbind_e lessons_certbind_check(const json_t *claims,
                                          const char *x5t)
{
    const char *bound;

    if (lessons_certbind_claim(claims, &bound) != 0) {
        return LESSONS_CERTBIND_MALFORMED;
    }
    if (!bound) {
        return LESSONS_CERTBIND_UNBOUND;
    }
    if (!x5t) {
        return LESSONS_CERTBIND_NO_CERT;
    }
    /* Both the same length before the bytes are compared, in a time
     * that does not tell how many of them agree.
     */
    if (strlen(x5t) != LESSONS_CERTBIND_CHARS
        || CRYPTO_memcmp(bound, x5t, LESSONS_CERTBIND_CHARS) != 0) {
        return LESSONS_CERTBIND_MISMATCH;
    }
    return LESSONS_CERTBIND_MATCH;
}

const char *lessons_certbind_describe(lessons_certbind_e rc)
{
    switch (rc) {
    case LESSONS_CERTBIND_UNBOUND:
        return "The access token is not bound to a client certificate";
    case LESSONS_CERTBIND_MATCH:
        return "The access token is bound to this client certificate";
    case LESSONS_CERTBIND_MISMATCH:
        return "The access token is bound to another client certificate "
               "than this connection's";
    case LESSONS_CERTBIND_NO_CERT:
        return "The access token is bound to a client certificate, and "
               "this connection presented none that was verified";
    default:
        return "The access token's cnf claim is malformed";
    }
}
