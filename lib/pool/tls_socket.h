/* The socket under a TLS session: what TLS writes is gathered and sent in
 * one go when the link flushes (a pipeline's records in one send, not one
 * write each), reads go straight to the socket, and a server gone answers
 * EPIPE instead of raising SIGPIPE. Non-blocking: a send or read that
 * would block asks TLS to retry (SSL_ERROR_WANT_WRITE or _READ). */
#ifndef SAPO_TLS_SOCKET_H
#define SAPO_TLS_SOCKET_H

#include <openssl/bio.h>
#include <stddef.h>

/* a BIO on the connected socket fd (not closed with it), or NULL */
BIO *tls_socket_new(int fd);

/* sends what TLS has written so far: 1 all sent, 0 the socket would
 * block (wait for POLLOUT and call again), -1 failed (errno) */
int tls_socket_send(BIO *bio);

/* bytes written by TLS and not sent yet */
size_t tls_socket_unsent(BIO *bio);

#endif
