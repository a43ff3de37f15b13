/* A swarm's TLS settings for the pool (tls.h). */
#include "pool/tls.h"

#include "pool/tls_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tls {
    SSL_CTX *ctx;
    char name[256]; /* "": each connection's host */
};

static bool given(const char *s) { return s && s[0]; }

/* OpenSSL's last reason, its queue emptied */
static const char *ssl_reason(char *buf, size_t len)
{
    unsigned long e, last = 0;
    while ((e = ERR_get_error()) != 0) last = e;
    const char *r = last ? ERR_reason_error_string(last) : NULL;
    snprintf(buf, len, "%s", r ? r : "unknown error");
    return buf;
}

/* the file of setting what readable, or -1 with err naming both */
static int readable(const char *what, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

tls_t *tls_new(const char *ca, const char *cert, const char *key, const char *name, char *err, size_t errlen)
{
    char why[256];
    if (given(cert) != given(key)) {
        snprintf(err, errlen, "tls-cert (SAPO_TLS_CERT) and tls-key (SAPO_TLS_KEY) go together: %s is set, %s not",
                 given(cert) ? "the certificate" : "the key", given(cert) ? "its key" : "its certificate");
        return NULL;
    }
    if (given(name) && strlen(name) >= sizeof((tls_t *)0)->name) {
        snprintf(err, errlen, "tls-name (SAPO_TLS_NAME): longer than %zu bytes", sizeof((tls_t *)0)->name - 1);
        return NULL;
    }
    if ((given(ca) && readable("tls-ca (SAPO_TLS_CA)", ca, err, errlen) != 0) ||
        (given(cert) && readable("tls-cert (SAPO_TLS_CERT)", cert, err, errlen) != 0) ||
        (given(key) && readable("tls-key (SAPO_TLS_KEY)", key, err, errlen) != 0))
        return NULL;
    tls_t *t = calloc(1, sizeof *t);
    if (!t || !(t->ctx = SSL_CTX_new(TLS_client_method()))) {
        snprintf(err, errlen, "TLS: cannot make a context: %s", ssl_reason(why, sizeof why));
        free(t);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* whatever the socket holds read at once, not a record's header and
     * body in two reads */
    SSL_CTX_set_read_ahead(t->ctx, 1);
    if (given(ca) ? SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1
                  : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        snprintf(err, errlen, "tls-ca (SAPO_TLS_CA) %s: not a PEM file of certificates: %s",
                 given(ca) ? ca : "(the system's)", ssl_reason(why, sizeof why));
        goto fail;
    }
    if (given(cert)) {
        if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
            snprintf(err, errlen, "tls-cert (SAPO_TLS_CERT) %s: not a PEM certificate: %s", cert,
                     ssl_reason(why, sizeof why));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
            snprintf(err, errlen, "tls-key (SAPO_TLS_KEY) %s: not a PEM private key: %s", key,
                     ssl_reason(why, sizeof why));
            goto fail;
        }
        if (SSL_CTX_check_private_key(t->ctx) != 1) {
            snprintf(err, errlen, "tls-key (SAPO_TLS_KEY) %s is not the key of tls-cert (SAPO_TLS_CERT) %s", key, cert);
            ERR_clear_error();
            goto fail;
        }
    }
    if (given(name)) snprintf(t->name, sizeof t->name, "%s", name);
    return t;
fail:
    tls_destroy(&t);
    return NULL;
}

void tls_destroy(tls_t **self_p)
{
    if (!*self_p) return;
    SSL_CTX_free((*self_p)->ctx);
    free(*self_p);
    *self_p = NULL;
}

static bool is_ip(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

SSL *tls_session(tls_t *self, int fd, const char *host, char *err, size_t errlen)
{
    char why[256];
    const char *check = self->name[0] ? self->name : host;
    SSL *ssl = SSL_new(self->ctx);
    BIO *socket = ssl ? tls_socket_new(fd) : NULL;
    bool ok = socket != NULL;
    if (ok) SSL_set_bio(ssl, socket, socket); /* the session owns it */
    /* the name the certificate must carry; SNI for a DNS name */
    if (ok && is_ip(check)) ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), check) == 1;
    else if (ok) ok = SSL_set1_host(ssl, check) == 1 && SSL_set_tlsext_host_name(ssl, check) == 1;
    if (!ok) {
        snprintf(err, errlen, "TLS: cannot start a session for %s: %s", check, ssl_reason(why, sizeof why));
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

void tls_explain(SSL *ssl, int ret, char *err, size_t errlen)
{
    char why[256];
    int code = SSL_get_error(ssl, ret);
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
        ERR_clear_error();
        bool name = verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH;
        bool issuer =
            verify == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN || verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
            verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT || verify == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT;
        bool dates = verify == X509_V_ERR_CERT_HAS_EXPIRED || verify == X509_V_ERR_CERT_NOT_YET_VALID;
        snprintf(err, errlen, "TLS: the server's certificate is refused: %s (%s)",
                 X509_verify_cert_error_string(verify),
                 name     ? "it does not carry the name checked: tls-name (SAPO_TLS_NAME), else the host of the URL"
                 : issuer ? "it is not signed by a CA of tls-ca (SAPO_TLS_CA), the swarm's"
                 : dates  ? "the server needs a certificate valid now, or this machine's clock is wrong"
                          : "tls-ca (SAPO_TLS_CA) names the swarm's CA");
        return;
    }
    if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0)) {
        ERR_clear_error();
        snprintf(err, errlen, "Server closed the connection");
        return;
    }
    if (code == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        return;
    }
    ssl_reason(why, sizeof why);
    if (strstr(why, "wrong version number") || strstr(why, "packet length too long") ||
        strstr(why, "record layer failure"))
        snprintf(err, errlen, "TLS: the server does not speak TLS (%s): a plain-text port is named redis://", why);
    else if (strstr(why, "alert") && (strstr(why, "certificate") || strstr(why, "unknown ca")))
        snprintf(err, errlen,
                 "TLS: the server refused this node's certificate (%s): tls-cert and tls-key (SAPO_TLS_CERT, "
                 "SAPO_TLS_KEY) must be a valid certificate of the swarm's CA",
                 why);
    else snprintf(err, errlen, "TLS: %s", why);
}
