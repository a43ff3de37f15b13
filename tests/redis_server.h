/* A real redis-server for tests: started on a free loopback port with its
 * data folder in a temp dir, ready once it answers PING, stopped with
 * SIGTERM. Header-only so any test can include it.
 *
 *   redis_server_t rs;
 *   if (redis_server_start(&rs, 0) < 0) SKIP_TEST(rs.why);
 *   ... rs.url is "redis://127.0.0.1:PORT" ...
 *   redis_server_stop(&rs);          // keeps rs.port and the folder
 *   redis_server_start(&rs, rs.port) // same port again
 *   redis_server_cleanup(&rs);       // stops it and removes the folder
 */
#ifndef SAPO_REDIS_SERVER_H
#define SAPO_REDIS_SERVER_H

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int port;
    char dir[64];
    char url[64];
    char why[160]; /* why start failed */
} redis_server_t;

/* A port nobody listens on now (the kernel's pick for an ephemeral bind). */
static inline int redis_server_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static inline int redis_server_ping(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

/* Starts redis-server on port (0: a free one). 0 once it answers PING;
 * -1 with rs->why (no redis-server, or it did not come up in 5 s). */
static inline int redis_server_start(redis_server_t *rs, int port)
{
    if (port == 0) {
        memset(rs, 0, sizeof *rs);
        snprintf(rs->dir, sizeof rs->dir, "/tmp/sapo-redis-XXXXXX");
        if (!mkdtemp(rs->dir)) {
            snprintf(rs->why, sizeof rs->why, "cannot make a temp folder");
            return -1;
        }
        port = redis_server_free_port();
    }
    rs->port = port;
    snprintf(rs->url, sizeof rs->url, "redis://127.0.0.1:%d", port);
    char portstr[16], logfile[96];
    snprintf(portstr, sizeof portstr, "%d", port);
    snprintf(logfile, sizeof logfile, "%s/redis.log", rs->dir);
    rs->pid = fork();
    if (rs->pid == 0) {
        char *argv[] = {"redis-server", "--port", portstr,        "--bind", "127.0.0.1", "--dir", rs->dir,
                        "--save",       "",       "--appendonly", "no",     "--logfile", logfile, NULL};
        execvp(argv[0], argv);
        _exit(127);
    }
    for (int i = 0; i < 250; i++) {
        if (redis_server_ping(port)) return 0;
        int status;
        if (waitpid(rs->pid, &status, WNOHANG) == rs->pid) {
            rs->pid = 0;
            snprintf(rs->why, sizeof rs->why, "redis-server %s (see %s)",
                     WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "is not installed" : "exited at start", logfile);
            return -1;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    snprintf(rs->why, sizeof rs->why, "redis-server on port %d did not answer PING in 5 s", port);
    return -1;
}

static inline void redis_server_stop(redis_server_t *rs)
{
    if (rs->pid <= 0) return;
    kill(rs->pid, SIGTERM);
    waitpid(rs->pid, NULL, 0);
    rs->pid = 0;
}

static inline void redis_server_cleanup(redis_server_t *rs)
{
    redis_server_stop(rs);
    char path[128];
    snprintf(path, sizeof path, "%s/redis.log", rs->dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/dump.rdb", rs->dir);
    unlink(path);
    rmdir(rs->dir);
}

#endif
