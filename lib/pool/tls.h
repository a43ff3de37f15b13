/* A swarm's TLS settings for the pool's connections (rediss:// and
 * rediss-cluster://): OpenSSL's context with the CA that signs the
 * servers' certificates, the node's own certificate and key where Redis
 * asks clients for one, and the name each server's certificate must
 * carry. The sessions themselves are carried by link.c. */
#ifndef SAPO_TLS_H
#define SAPO_TLS_H

#include <openssl/ssl.h>
#include <stddef.h>

typedef struct tls tls_t;

/* The settings loaded: ca a PEM file of the CAs trusted (NULL or "": the
 * system's), cert and key the node's PEM certificate (chain) and key
 * (both or neither), name the name every server's certificate must carry
 * (NULL or "": the host each connection reaches, a DNS name or an IP
 * address). NULL with one line in err naming the file and the setting
 * that could not be used. */
tls_t *tls_new(const char *ca, const char *cert, const char *key, const char *name, char *err, size_t errlen);
void tls_destroy(tls_t **self_p);

/* a client session for a connected socket to host, its server checked
 * against the CA and the name; NULL with err */
SSL *tls_session(tls_t *self, int fd, const char *host, char *err, size_t errlen);

/* One line on why a TLS call failed (SSL_get_error's code for ret), its
 * cause in words: the server's certificate refused (which check), this
 * node's refused by the server, a server that does not speak TLS, or
 * OpenSSL's reason; OpenSSL's error queue is emptied. */
void tls_explain(SSL *ssl, int ret, char *err, size_t errlen);

#endif
