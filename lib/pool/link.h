/* One connection to a Redis server, in plain text or TLS. Commands are
 * formatted and replies parsed by hiredis's protocol code (it works on
 * any bytes); the bytes go over a socket of this file's own, through an
 * OpenSSL session where TLS settings are given (hiredis 0.14 has no
 * TLS). Every wait, to connect, write or read, is bounded by a timeout.
 * Failures read as hiredis's did ("Connection refused", "Server closed
 * the connection"); a TLS failure says its cause (tls_explain). */
#ifndef SAPO_LINK_H
#define SAPO_LINK_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "pool/tls.h"

typedef struct link link_t;

/* Connected to host:port within timeout_ms (and, with tls, its handshake
 * done, the server's certificate checked): the link, or NULL with err */
link_t *link_open(const char *host, int port, tls_t *tls, long timeout_ms, char *err, size_t errlen);
void link_close(link_t **self_p);

/* the most each wait on the server takes from now on */
void link_timeout(link_t *self, long ms);

/* a command formatted into the output, sent by the next flush or reply:
 * 0, or -1 (out of memory) */
int link_append(link_t *self, int argc, const char **argv, const size_t *lens);
/* everything appended sent: 0, or -1 (link_error says why) */
int link_flush(link_t *self);
/* the output sent, then the next reply read: 0 with *reply (the caller's
 * to free), or -1 (link_error says why; the link is then unusable) */
int link_reply(link_t *self, redisReply **reply);
/* one command and its reply (printf-like, as hiredis's redisCommand, or
 * argv-like): the reply, or NULL (link_error says why) */
redisReply *link_command(link_t *self, const char *format, ...);
redisReply *link_command_argv(link_t *self, int argc, const char **argv, const size_t *lens);

/* why the last call failed */
const char *link_error(const link_t *self);
/* whether it failed because a wait ran out (a slow or stalled server) */
bool link_timed_out(const link_t *self);

#endif
