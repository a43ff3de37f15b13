/* The socket under a TLS session (tls_socket.h). */
#include "pool/tls_socket.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct {
    int fd;
    char *out; /* written by TLS, from sent to len not sent yet */
    size_t sent, len, cap;
} sock_t;

static int sock_write(BIO *b, const char *data, int len)
{
    sock_t *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (len <= 0) return 0;
    if (s->sent == s->len) s->sent = s->len = 0;
    if (s->len + (size_t)len > s->cap) {
        size_t cap = s->cap ? s->cap : 16384;
        while (cap < s->len + (size_t)len) cap *= 2;
        char *grown = realloc(s->out, cap);
        if (!grown) {
            errno = ENOMEM;
            return -1;
        }
        s->out = grown;
        s->cap = cap;
    }
    memcpy(s->out + s->len, data, (size_t)len);
    s->len += (size_t)len;
    return len;
}

static int sock_read(BIO *b, char *buf, int len)
{
    sock_t *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (len <= 0) return 0;
    for (;;) {
        ssize_t n = recv(s->fd, buf, (size_t)len, 0);
        if (n >= 0) return (int)n; /* 0: the server closed */
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
        return -1;
    }
}

static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    sock_t *s = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH: {
        /* TLS flushes its handshake's flights: sent now, or retried */
        BIO_clear_retry_flags(b);
        int r = tls_socket_send(b);
        if (r == 0) BIO_set_retry_write(b);
        return r > 0 ? 1 : -1;
    }
    case BIO_CTRL_WPENDING: return (long)(s->len - s->sent);
    case BIO_CTRL_PENDING: return 0;
    case BIO_CTRL_DUP: return 1;
    default: return 0;
    }
}

static int sock_create(BIO *b)
{
    BIO_set_init(b, 0);
    return 1;
}

static int sock_destroy(BIO *b)
{
    sock_t *s = BIO_get_data(b);
    if (s) free(s->out);
    free(s);
    BIO_set_data(b, NULL);
    return 1;
}

static BIO_METHOD *method;
static void make_method(void)
{
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sapo TLS socket");
    if (method && (!BIO_meth_set_write(method, sock_write) || !BIO_meth_set_read(method, sock_read) ||
                   !BIO_meth_set_ctrl(method, sock_ctrl) || !BIO_meth_set_create(method, sock_create) ||
                   !BIO_meth_set_destroy(method, sock_destroy))) {
        BIO_meth_free(method);
        method = NULL;
    }
}

BIO *tls_socket_new(int fd)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_method);
    sock_t *s = method ? calloc(1, sizeof *s) : NULL;
    BIO *b = s ? BIO_new(method) : NULL;
    if (!b) {
        free(s);
        return NULL;
    }
    s->fd = fd;
    BIO_set_data(b, s);
    BIO_set_init(b, 1);
    return b;
}

int tls_socket_send(BIO *bio)
{
    sock_t *s = BIO_get_data(bio);
    while (s->sent < s->len) {
        ssize_t n = send(s->fd, s->out + s->sent, s->len - s->sent, MSG_NOSIGNAL);
        if (n > 0) s->sent += (size_t)n;
        else if (n < 0 && errno == EINTR) continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        else {
            if (n == 0) errno = EPIPE;
            return -1;
        }
    }
    s->sent = s->len = 0;
    return 1;
}

size_t tls_socket_unsent(BIO *bio)
{
    sock_t *s = BIO_get_data(bio);
    return s->len - s->sent;
}
