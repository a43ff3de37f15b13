/* One connection to a Redis server, in plain text or TLS (link.h). */
#include "pool/link.h"
#include "util/clock.h"

#include "pool/tls_socket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 16384

struct link {
    int fd;
    SSL *ssl; /* NULL: plain text */
    redisReader *reader;
    char *out;
    size_t out_len, out_cap;
    long io_ms;
    bool timed_out;
    bool answered; /* a reply was read (a server that closes before any may want TLS) */
    char err[512];
};

static void fail(link_t *l, const char *why) { snprintf(l->err, sizeof l->err, "%s", why); }

/* one wait for the socket to be ready for events, at most ms: 0, or -1
 * (timed out, or poll failed) with the reason */
static int wait_for(link_t *l, short events, long ms)
{
    struct pollfd p = {.fd = l->fd, .events = events};
    int r;
    do r = poll(&p, 1, (int)ms);
    while (r < 0 && errno == EINTR);
    if (r > 0) return 0;
    if (r == 0) {
        l->timed_out = true;
        errno = EAGAIN;
    }
    fail(l, strerror(errno));
    return -1;
}

/* a TLS call's wait (SSL_ERROR_WANT_*): 0 to try again, or -1 with the
 * reason (the call's own failure explained) */
static int tls_wait(link_t *l, int ret, long ms)
{
    int code = SSL_get_error(l->ssl, ret);
    if (code == SSL_ERROR_WANT_READ) return wait_for(l, POLLIN, ms);
    if (code == SSL_ERROR_WANT_WRITE) return wait_for(l, POLLOUT, ms);
    tls_explain(l->ssl, ret, l->err, sizeof l->err);
    return -1;
}

static int connect_socket(link_t *l, const char *host, int port, long ms)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, service, &hints, &ai);
    if (rc != 0) {
        fail(l, gai_strerror(rc));
        return -1;
    }
    int last = ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        l->fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (l->fd < 0) {
            last = errno;
            continue;
        }
        if (connect(l->fd, a->ai_addr, a->ai_addrlen) == 0) break;
        if (errno == EINPROGRESS) {
            struct pollfd p = {.fd = l->fd, .events = POLLOUT};
            int r;
            do r = poll(&p, 1, (int)ms);
            while (r < 0 && errno == EINTR);
            int so = r == 0 ? ETIMEDOUT : errno;
            socklen_t len = sizeof so;
            if (r > 0 && getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &so, &len) != 0) so = errno;
            if (r > 0 && so == 0) break;
            last = so;
        } else {
            last = errno;
        }
        close(l->fd);
        l->fd = -1;
    }
    freeaddrinfo(ai);
    if (l->fd < 0) {
        fail(l, strerror(last));
        return -1;
    }
    int one = 1;
    setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

link_t *link_open(const char *host, int port, tls_t *tls, long timeout_ms, char *err, size_t errlen)
{
    link_t *l = calloc(1, sizeof *l);
    if (!l || !(l->reader = redisReaderCreate())) {
        snprintf(err, errlen, "out of memory");
        free(l);
        return NULL;
    }
    l->fd = -1;
    l->io_ms = timeout_ms;
    long long until = clock_ms() + timeout_ms;
    if (connect_socket(l, host, port, timeout_ms) != 0) goto failed;
    if (tls) {
        if (!(l->ssl = tls_session(tls, l->fd, host, l->err, sizeof l->err))) goto failed;
        /* the handshake within what is left of the connect's time */
        for (;;) {
            int r = SSL_connect(l->ssl);
            if (r == 1) break;
            long left = (long)(until - clock_ms());
            if (tls_wait(l, r, left > 0 ? left : 0) != 0) {
                if (l->timed_out)
                    snprintf(l->err, sizeof l->err,
                             "TLS handshake: no answer in %ld ms (a server that does not speak TLS may send none: "
                             "a plain-text port is named redis://)",
                             timeout_ms);
                goto failed;
            }
        }
    }
    return l;
failed:
    snprintf(err, errlen, "%s", l->err);
    link_close(&l);
    return NULL;
}

void link_close(link_t **self_p)
{
    link_t *l = *self_p;
    if (!l) return;
    if (l->ssl) SSL_free(l->ssl); /* no close_notify: the server reads the end of the socket */
    if (l->fd >= 0) close(l->fd);
    redisReaderFree(l->reader);
    free(l->out);
    free(l);
    *self_p = NULL;
}

void link_timeout(link_t *self, long ms) { self->io_ms = ms; }
const char *link_error(const link_t *self) { return self->err; }
bool link_timed_out(const link_t *self) { return self->timed_out; }

static int append_raw(link_t *l, const char *cmd, int len)
{
    if (len < 0) return -1;
    if (l->out_len + (size_t)len > l->out_cap) {
        size_t cap = l->out_cap ? l->out_cap : 4096;
        while (cap < l->out_len + (size_t)len) cap *= 2;
        char *grown = realloc(l->out, cap);
        if (!grown) return -1;
        l->out = grown;
        l->out_cap = cap;
    }
    memcpy(l->out + l->out_len, cmd, (size_t)len);
    l->out_len += (size_t)len;
    return 0;
}

int link_append(link_t *self, int argc, const char **argv, const size_t *lens)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    int rc = cmd ? append_raw(self, cmd, len) : -1;
    redisFreeCommand(cmd);
    if (rc != 0) fail(self, "out of memory");
    return rc;
}

/* what TLS wrote sent: 0, or -1 with the reason */
static int send_records(link_t *l)
{
    BIO *socket = SSL_get_wbio(l->ssl);
    for (;;) {
        int r = tls_socket_send(socket);
        if (r > 0) return 0;
        if (r < 0) {
            fail(l, strerror(errno));
            return -1;
        }
        if (wait_for(l, POLLOUT, l->io_ms) != 0) return -1;
    }
}

int link_flush(link_t *self)
{
    size_t sent = 0;
    self->timed_out = false;
    while (sent < self->out_len) {
        const char *at = self->out + sent;
        size_t len = self->out_len - sent;
        if (self->ssl) {
            /* TLS's records gather in its socket (tls_socket.h) and go in one send below */
            ERR_clear_error();
            int n = SSL_write(self->ssl, at, (int)(len > INT_MAX ? INT_MAX : len));
            if (n > 0) sent += (size_t)n;
            else if (tls_wait(self, n, self->io_ms) != 0) return -1;
            continue;
        }
        ssize_t n = send(self->fd, at, len, MSG_NOSIGNAL);
        if (n > 0) sent += (size_t)n;
        else if (n < 0 && errno == EINTR) continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_for(self, POLLOUT, self->io_ms) != 0) return -1;
        } else {
            fail(self, strerror(errno));
            return -1;
        }
    }
    self->out_len = 0;
    return self->ssl ? send_records(self) : 0;
}

static void closed(link_t *l) { fail(l, "Server closed the connection"); }

/* a link the server ended before its first reply: the likeliest cause
 * after the reason (a TLS server says nothing more to a client it
 * refuses, and closes) */
static void first_reply_lost(link_t *l)
{
    if (l->answered || l->timed_out || strncmp(l->err, "TLS", 3) == 0 || strncmp(l->err, "Protocol", 8) == 0 ||
        strcmp(l->err, "out of memory") == 0)
        return;
    size_t at = strlen(l->err);
    snprintf(l->err + at, sizeof l->err - at, "%s",
             l->ssl ? " before any reply (a server that asks for client certificates ends the session of a node "
                      "without a valid one: tls-cert and tls-key, SAPO_TLS_CERT and SAPO_TLS_KEY, signed by the "
                      "swarm's CA)"
                    : " before any reply (a TLS port ends a plain-text client: its URL is rediss://)");
}

/* more bytes from the server fed to the reader: 0, or -1 with the reason */
static int read_more(link_t *l)
{
    char buf[READ_CHUNK];
    for (;;) {
        ssize_t n;
        if (l->ssl) {
            ERR_clear_error();
            errno = 0;
            int r = SSL_read(l->ssl, buf, sizeof buf);
            /* what TLS answers as it reads (a key update's) goes as soon as the socket takes it */
            if (tls_socket_unsent(SSL_get_wbio(l->ssl)) > 0 && tls_socket_send(SSL_get_wbio(l->ssl)) < 0) {
                fail(l, strerror(errno));
                return -1;
            }
            if (r > 0) n = r;
            else if (SSL_get_error(l->ssl, r) == SSL_ERROR_ZERO_RETURN) {
                closed(l);
                return -1;
            } else if (tls_wait(l, r, l->io_ms) == 0) continue;
            else return -1;
        } else {
            n = recv(l->fd, buf, sizeof buf, 0);
            if (n == 0) {
                closed(l);
                return -1;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                if (wait_for(l, POLLIN, l->io_ms) != 0) return -1;
                continue;
            }
            if (n < 0) {
                fail(l, strerror(errno));
                return -1;
            }
        }
        if (redisReaderFeed(l->reader, buf, (size_t)n) != REDIS_OK) {
            fail(l, "out of memory");
            return -1;
        }
        return 0;
    }
}

int link_reply(link_t *self, redisReply **reply)
{
    *reply = NULL;
    self->timed_out = false;
    if (self->out_len && link_flush(self) != 0) {
        first_reply_lost(self);
        return -1;
    }
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(self->reader, &r) != REDIS_OK) {
            snprintf(self->err, sizeof self->err, "Protocol error: %s", self->reader->errstr);
            return -1;
        }
        if (r) {
            self->answered = true;
            *reply = r;
            return 0;
        }
        if (read_more(self) != 0) {
            first_reply_lost(self);
            return -1;
        }
    }
}

redisReply *link_command_argv(link_t *self, int argc, const char **argv, const size_t *lens)
{
    redisReply *r = NULL;
    if (link_append(self, argc, argv, lens) != 0 || link_reply(self, &r) != 0) return NULL;
    return r;
}

redisReply *link_command(link_t *self, const char *format, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, format);
    int len = redisvFormatCommand(&cmd, format, ap);
    va_end(ap);
    int rc = cmd ? append_raw(self, cmd, len) : -1;
    redisFreeCommand(cmd);
    redisReply *r = NULL;
    if (rc != 0) fail(self, "out of memory");
    else if (link_reply(self, &r) != 0) r = NULL;
    return r;
}
