/* lib/pool/tls_socket.c and lib/pool/link.c over TLS: what TLS writes
 * gathers until the link sends it, in one send when the socket takes it
 * and in parts when it would block; a peer gone is an error, never a
 * SIGPIPE; a pipeline of 14 MB goes through a TLS server that reads it only
 * later, every reply read. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pool/link.h"
#include "pool/tls_socket.h"
#include "util/fs.h"

static char dir[64];

static void test_gathers_then_sends(void)
{
    int sv[2];
    EXPECT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    BIO *b = tls_socket_new(sv[0]);
    EXPECT(BIO_write(b, "one ", 4) == 4 && BIO_write(b, "two ", 4) == 4 && BIO_write(b, "three", 5) == 5);
    EXPECT(tls_socket_unsent(b) == 13);
    char buf[64] = {0};
    EXPECT(recv(sv[1], buf, sizeof buf, 0) < 0 && errno == EAGAIN); /* nothing sent yet */
    EXPECT(tls_socket_send(b) == 1 && tls_socket_unsent(b) == 0);
    EXPECT(recv(sv[1], buf, sizeof buf, 0) == 13 && memcmp(buf, "one two three", 13) == 0);
    /* reads go to the socket; one that would block asks to retry */
    EXPECT(BIO_read(b, buf, sizeof buf) < 0 && BIO_should_retry(b) && BIO_should_read(b));
    EXPECT(send(sv[1], "reply", 5, 0) == 5);
    EXPECT(BIO_read(b, buf, sizeof buf) == 5 && memcmp(buf, "reply", 5) == 0);
    BIO_free(b);
    close(sv[0]);
    close(sv[1]);
}

static void test_would_block_then_sends_the_rest(void)
{
    int sv[2];
    EXPECT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    BIO *b = tls_socket_new(sv[0]);
    size_t n = 1 << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (char)(i * 7);
    EXPECT(BIO_write(b, big, (int)n) == (int)n);
    EXPECT(tls_socket_send(b) == 0); /* the socket is full */
    size_t left = tls_socket_unsent(b);
    EXPECT(left > 0 && left < n);
    /* the flush TLS asks for says retry while the socket is full */
    EXPECT(BIO_flush(b) <= 0 && BIO_should_retry(b) && BIO_should_write(b));
    char *got = malloc(n);
    size_t have = 0;
    int rounds = 0;
    while (have < n && rounds++ < 100000) {
        ssize_t r = recv(sv[1], got + have, n - have, 0);
        if (r > 0) have += (size_t)r;
        if (tls_socket_unsent(b) > 0) EXPECT(tls_socket_send(b) >= 0);
    }
    EXPECT(have == n && memcmp(got, big, n) == 0);
    EXPECT(tls_socket_unsent(b) == 0 && BIO_flush(b) == 1);
    free(big);
    free(got);
    BIO_free(b);
    close(sv[0]);
    close(sv[1]);
}

static void test_peer_gone_is_an_error(void)
{
    /* SIGPIPE's default action ends the process: the test dies if it is raised */
    signal(SIGPIPE, SIG_DFL);
    int sv[2];
    EXPECT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    close(sv[1]);
    BIO *b = tls_socket_new(sv[0]);
    EXPECT(BIO_write(b, "lost", 4) == 4);
    errno = 0;
    EXPECT(tls_socket_send(b) == -1 && errno == EPIPE);
    EXPECT(BIO_flush(b) <= 0 && !BIO_should_retry(b));
    BIO_free(b);
    close(sv[0]);
}

/* a TLS server on loopback: sleeps, then reads `expect` bytes of commands
 * and answers each with +PONG, or (expect 0) ends the session at once */
typedef struct {
    SSL_CTX *ctx;
    int listener;
    size_t expect;
    int sleep_ms;
    size_t got;
} server_t;

static void *serve(void *arg)
{
    server_t *s = arg;
    int fd = accept(s->listener, NULL, NULL);
    SSL *ssl = SSL_new(s->ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1 && s->expect > 0) {
        struct timespec pause = {0, s->sleep_ms * 1000000L};
        nanosleep(&pause, NULL);
        char buf[65536];
        while (s->got < s->expect) {
            int n = SSL_read(ssl, buf, sizeof buf);
            if (n <= 0) break;
            s->got += (size_t)n;
        }
        size_t replies = s->got / 14, at = 0;
        char *out = malloc(replies * 7);
        for (size_t i = 0; i < replies; i++, at += 7) memcpy(out + at, "+PONG\r\n", 7);
        for (size_t sent = 0; sent < at;) {
            int n = SSL_write(ssl, out + sent, (int)(at - sent));
            if (n <= 0) break;
            sent += (size_t)n;
        }
        free(out);
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    close(fd);
    return NULL;
}

static int start_server(server_t *s, pthread_t *thread)
{
    char crt[128], key[128];
    snprintf(crt, sizeof crt, "%s/pool.crt", dir);
    snprintf(key, sizeof key, "%s/pool.key", dir);
    s->ctx = SSL_CTX_new(TLS_server_method());
    if (SSL_CTX_use_certificate_file(s->ctx, crt, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_use_PrivateKey_file(s->ctx, key, SSL_FILETYPE_PEM) != 1)
        return -1;
    s->listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(s->listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->listener, 1) != 0 ||
        getsockname(s->listener, (struct sockaddr *)&a, &len) != 0)
        return -1;
    pthread_create(thread, NULL, serve, s);
    return ntohs(a.sin_port);
}

static void stop_server(server_t *s, pthread_t thread)
{
    pthread_join(thread, NULL);
    close(s->listener);
    SSL_CTX_free(s->ctx);
}

static tls_t *client_tls(void)
{
    char ca[128], err[512];
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    tls_t *t = tls_new(ca, NULL, NULL, NULL, err, sizeof err);
    if (!t) fprintf(stderr, "%s\n", err);
    return t;
}

static void test_a_pipeline_through_tls(void)
{
    signal(SIGPIPE, SIG_DFL);
    size_t n = 1000000; /* 14 MB of PING: more than the sockets hold */
    server_t s = {.expect = n * 14, .sleep_ms = 300};
    pthread_t thread;
    int port = start_server(&s, &thread);
    tls_t *t = client_tls();
    EXPECT(port > 0 && t);
    char err[512] = "";
    link_t *l = link_open("127.0.0.1", port, t, 5000, err, sizeof err);
    EXPECTF(l, "%s", err);
    if (l) {
        const char *argv[] = {"PING"};
        for (size_t i = 0; i < n; i++) link_append(l, 1, argv, NULL);
        size_t pongs = 0;
        for (size_t i = 0; i < n; i++) {
            redisReply *r = NULL;
            if (link_reply(l, &r) != 0) {
                fprintf(stderr, "reply %zu: %s\n", i, link_error(l));
                break;
            }
            pongs += r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
            freeReplyObject(r);
        }
        EXPECTF(pongs == n, "%zu of %zu replies", pongs, n);
        link_close(&l);
    }
    stop_server(&s, thread);
    EXPECTF(s.got == n * 14, "the server read %zu bytes", s.got);
    tls_destroy(&t);
}

static void test_server_gone_through_tls(void)
{
    signal(SIGPIPE, SIG_DFL);
    server_t s = {.expect = 0};
    pthread_t thread;
    int port = start_server(&s, &thread);
    tls_t *t = client_tls();
    char err[512] = "";
    link_t *l = t ? link_open("127.0.0.1", port, t, 5000, err, sizeof err) : NULL;
    EXPECTF(l, "%s", err);
    stop_server(&s, thread); /* the session ended, the socket closed */
    if (l) {
        const char *argv[] = {"SET", "k", NULL};
        size_t lens[] = {3, 1, 1 << 20};
        char *value = calloc(1, lens[2]);
        argv[2] = value;
        int failed = 0;
        for (int i = 0; i < 8 && !failed; i++) {
            link_append(l, 3, argv, lens);
            failed = link_flush(l) != 0;
        }
        redisReply *r = NULL;
        if (!failed) failed = link_reply(l, &r) != 0;
        EXPECT(failed && r == NULL);
        EXPECTF(strstr(link_error(l), "Broken pipe") || strstr(link_error(l), "reset") ||
                    strstr(link_error(l), "closed"),
                "%s", link_error(l));
        free(value);
        link_close(&l);
    }
    tls_destroy(&t);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_link.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN_TEST(test_gathers_then_sends);
    RUN_TEST(test_would_block_then_sends_the_rest);
    RUN_TEST(test_peer_gone_is_an_error);
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "scripts/tls-certs.sh %s ca > /dev/null 2>&1 && "
             "scripts/tls-certs.sh %s server pool 127.0.0.1 > /dev/null 2>&1",
             dir, dir);
    if (system(cmd) == 0) {
        RUN_TEST(test_a_pipeline_through_tls);
        RUN_TEST(test_server_gone_through_tls);
    } else {
        printf("SKIP test_a_pipeline_through_tls: scripts/tls-certs.sh could not make certificates (openssl)\n");
        printf("SKIP test_server_gone_through_tls: scripts/tls-certs.sh could not make certificates (openssl)\n");
    }
    fs_rm_tree(dir);
    CHECK_EXIT();
}
