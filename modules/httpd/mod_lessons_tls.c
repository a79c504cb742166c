/* Licensed under the Apache License, Version 2.0.
 *
 * mod_lessons_tls.c: the client certificate of a request's TLS
 * connection, for certificate-bound tokens (LessonsJWTCertBound, RFC 8705
 * 3).  mod_ssl hands each new TLS connection's SSL to its pre_handshake
 * hook; we keep it with the connection, and the gate's lookup
 * (lessons_tls_client_x5t) reads the peer certificate from it, hashing
 * it only when it is another certificate than the one hashed last on the
 * connection.  Asking mod_ssl for SSL_CLIENT_CERT instead made it write
 * the certificate as PEM on every request (PEM_write_bio_X509, about
 * 20,000 instructions), only for us to find the same PEM as before.
 * Where we have no SSL (a TLS module other than mod_ssl, or a mod_ssl
 * that does not run the hook), the certificate is SSL_CLIENT_CERT's.
 */

#include <string.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "http_ssl.h"

#include "httpd/mod_lessons.h"

/* mod_ssl's pre_handshake hook, as httpd 2.4's
 * modules/ssl/mod_ssl_openssl.h declares it:
 *   APR_DECLARE_EXTERNAL_HOOK(ssl, SSL, int, pre_handshake,
 *                             (conn_rec *c, SSL *ssl, int is_proxy))
 * and mod_ssl.c's ssl_init_ssl_connection runs it (RUN_ALL: OK and
 * DECLINED go on) on each connection's new SSL, before the handshake.
 * Debian's apache2-dev installs mod_ssl.h but not mod_ssl_openssl.h, so
 * the hook's type is declared here; an optional hook is found by its
 * name alone, so the name and this signature must stay mod_ssl's.
 */
typedef int lessons_ssl_pre_handshake_t(conn_rec *c, SSL *ssl,
                                        int is_proxy);

/* A connection's TLS state, in its conn_config.  On a TLS connection
 * mod_ssl serves, ssl is mod_ssl's SSL, held by a reference of ours so
 * that the pointer stays good whatever mod_ssl frees when (it is read
 * only while mod_ssl says the connection is TLS, ap_ssl_conn_is_ssl).
 * On the connection a request arrives on (the TLS connection itself, or
 * an HTTP/2 stream's secondary connection, used by one thread at a
 * time), x5t is the thumbprint taken last, and what it was taken of:
 * - cert, where we have the SSL: the certificate, held by a reference
 *   of ours: while we hold it the X509 cannot be freed and its address
 *   given to another, so the same pointer is the same certificate, and
 *   another pointer (a TLS 1.2 renegotiation, TLS 1.3 post-handshake
 *   authentication) is hashed again;
 * - pem, where we have none: SSL_CLIENT_CERT's text, compared whole, so
 *   that a certificate that changes under the connection is hashed
 *   afresh.
 * At most one of the two is set.
 */
typedef struct {
    SSL *ssl;                       /* NULL: mod_ssl's hook did not run */
    X509 *cert;                     /* NULL: no certificate hashed */
    char *pem;                      /* NUL-terminated; NULL: none hashed */
    apr_size_t pem_len;
    apr_size_t pem_room;            /* bytes pem can hold, NUL included */
    char x5t[LESSONS_CERTBIND_X5T_LEN];
} lessons_tls_conn_t;

static apr_status_t lessons_tls_conn_cleanup(void *data)
{
    lessons_tls_conn_t *st = data;

    X509_free(st->cert);
    st->cert = NULL;
    SSL_free(st->ssl);
    st->ssl = NULL;
    return APR_SUCCESS;
}

/* The connection's state, made (with the cleanup that drops our
 * references when the connection's pool goes) when there is none.
 */
static lessons_tls_conn_t *lessons_tls_conn(conn_rec *c)
{
    lessons_tls_conn_t *st = ap_get_module_config(c->conn_config,
                                                  &lessons_module);

    if (!st) {
        st = apr_pcalloc(c->pool, sizeof(*st));
        ap_set_module_config(c->conn_config, &lessons_module, st);
        apr_pool_cleanup_register(c->pool, st, lessons_tls_conn_cleanup,
                                  apr_pool_cleanup_null);
    }
    return st;
}

/* Each connection from a client mod_ssl makes an SSL for (not mod_proxy's
 * to a backend).  The SSL is new: nothing of the handshake is known yet.
 */
static int lessons_tls_pre_handshake(conn_rec *c, SSL *ssl, int is_proxy)
{
    lessons_tls_conn_t *st;

    if (is_proxy || !ssl) {
        return DECLINED;
    }
    st = lessons_tls_conn(c);
    SSL_free(st->ssl);
    st->ssl = SSL_up_ref(ssl) == 1 ? ssl : NULL;
    return OK;
}

/* The SSL of the request's TLS connection, as mod_ssl finds its own: the
 * connection's, or, on a secondary connection (HTTP/2), its master's.
 * NULL where mod_ssl's hook did not run.
 */
static SSL *lessons_tls_ssl_of(conn_rec *c)
{
    lessons_tls_conn_t *st = ap_get_module_config(c->conn_config,
                                                  &lessons_module);

    if (st && st->ssl) {
        return st->ssl;
    }
    if (c->master) {
        st = ap_get_module_config(c->master->conn_config, &lessons_module);
        return st ? st->ssl : NULL;
    }
    return NULL;
}

/* The thumbprint of the peer certificate of ssl, which mod_ssl verified
 * (verify), from the connection's memo when it is the certificate hashed
 * last.
 */
static const char *lessons_tls_x5t_of_ssl(request_rec *r, SSL *ssl,
                                          const char *verify)
{
    X509 *cert = SSL_get0_peer_certificate(ssl);
    lessons_tls_conn_t *m;
    char x5t[LESSONS_CERTBIND_X5T_LEN];
    int changed;

    if (!cert) {
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, LESSONSLOG(00727)
                      "mod_ssl verified a client certificate (%s) but the "
                      "connection has none: taken as no certificate",
                      verify);
        return NULL;
    }
    m = lessons_tls_conn(r->connection);
    if (m->cert == cert) {
        return apr_pstrdup(r->pool, m->x5t);
    }
    if (lessons_certbind_thumbprint_x509(cert, x5t) != 0) {
        ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, LESSONSLOG(00728)
                      "mod_ssl verified a client certificate (%s) that "
                      "could not be encoded for its thumbprint: taken as "
                      "no certificate", verify);
        return NULL;
    }
    changed = m->cert != NULL;
    X509_free(m->cert);
    m->cert = X509_up_ref(cert) == 1 ? cert : NULL;
    m->pem_len = 0;
    memcpy(m->x5t, x5t, sizeof(x5t));
    if (changed) {
        ap_log_rerror(APLOG_MARK, APLOG_DEBUG, 0, r, LESSONSLOG(00729)
                      "the connection's client certificate changed (a "
                      "renegotiation or post-handshake authentication): "
                      "its thumbprint taken anew");
    }
    return apr_pstrdup(r->pool, x5t);
}

/* Where we have no SSL: the thumbprint of the certificate as mod_ssl
 * (or another TLS module answering ap_ssl_var_lookup) writes it,
 * SSL_CLIENT_CERT, from the connection's memo when it is the same text.
 */
static const char *lessons_x5t_of(conn_rec *c, const char *pem,
                                  apr_size_t len)
{
    lessons_tls_conn_t *m = lessons_tls_conn(c);
    char x5t[LESSONS_CERTBIND_X5T_LEN];

    if (m->pem && m->pem_len == len && memcmp(m->pem, pem, len) == 0) {
        return m->x5t;
    }
    if (lessons_certbind_thumbprint(pem, len, x5t) != 0) {
        return NULL;
    }
    if (m->pem_room <= len) {
        m->pem_room = len + 1;
        m->pem = apr_palloc(c->pool, m->pem_room);
    }
    memcpy(m->pem, pem, len);
    m->pem[len] = '\0';
    m->pem_len = len;
    X509_free(m->cert);
    m->cert = NULL;
    memcpy(m->x5t, x5t, sizeof(x5t));
    return m->x5t;
}

static const char *lessons_tls_x5t_of_pem(request_rec *r, const char *verify)
{
    const char *pem, *x5t;

    pem = ap_ssl_var_lookup(r->pool, r->server, r->connection, r,
                            "SSL_CLIENT_CERT");
    x5t = pem && *pem ? lessons_x5t_of(r->connection, pem, strlen(pem))
                      : NULL;
    if (x5t) {
        return apr_pstrdup(r->pool, x5t);
    }
    ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r, LESSONSLOG(00725)
                  "mod_ssl verified a client certificate (%s) but gave "
                  "none that could be read (SSL_CLIENT_CERT): taken as "
                  "no certificate", verify);
    return NULL;
}

/* The thumbprint of the client certificate mod_ssl verified on this
 * request's connection (lessons_decide_cert_fn), or NULL.  Only from the
 * TLS connection, never from a header (a proxy's, say: anyone can send
 * one): mod_ssl's verification must have passed, or have been waived
 * under SSLVerifyClient optional_no_ca (lessons_certbind_verified), where
 * RFC 8705 2.2's self-signed certificates are bound by their thumbprint
 * alone: the handshake proved the key.  mod_ssl's verdict is asked each
 * time (SSL_CLIENT_VERIFY), as it judges the certificate the connection
 * has now.  Any failure is no certificate.
 */
const char *lessons_tls_client_x5t(void *baton)
{
    request_rec *r = baton;
    const char *verify;
    SSL *ssl;

    if (!ap_ssl_conn_is_ssl(r->connection)) {
        return NULL;
    }
    verify = ap_ssl_var_lookup(r->pool, r->server, r->connection, r,
                               "SSL_CLIENT_VERIFY");
    if (!lessons_certbind_verified(verify)) {
        return NULL;
    }
    ssl = lessons_tls_ssl_of(r->connection);
    return ssl ? lessons_tls_x5t_of_ssl(r, ssl, verify)
               : lessons_tls_x5t_of_pem(r, verify);
}

void lessons_tls_register_hooks(void)
{
    lessons_ssl_pre_handshake_t *fn = lessons_tls_pre_handshake;

    apr_optional_hook_add("pre_handshake", (void (*)(void))fn, NULL, NULL,
                          APR_HOOK_MIDDLE);
}
