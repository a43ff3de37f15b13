/* The pool's connection to Redis: one server, or a Redis Cluster whose
 * commands go to the master that holds their key's slot. hiredis 0.14
 * (Debian 12's) knows nothing of clusters, so this file does what a
 * cluster client does: it reads the slot map (CLUSTER SLOTS) from any
 * node it reaches, routes each command by its key's slot (CRC16 of the
 * key, or of the part between the first { and the next } when that part
 * is not empty), follows MOVED (the slot lives elsewhere now: the map is
 * read again, once however many replies of a pipeline say so) and ASK
 * (the slot is moving and the keys are not all at its source: ASKING,
 * then the command, on the node named, once), waits out TRYAGAIN (a
 * multi-key command, such as a pool function, whose keys are split
 * between the two ends of a migrating slot) with a short backoff, and
 * after a node stops answering reads the map again from the others, so a
 * replica promoted in a failover takes over. Until it does, reads of a
 * master that cannot be reached (GET, HGET, FCALL_RO, ...) go to its
 * replica, under READONLY, which answers them as the master last had
 * them. Every connection it makes is prepared by the
 * caller's hook first (AUTH, SELECT, the pool's functions).
 *
 * A URL names either:
 *   redis://[[user]:password@]host[:port][/db]           one server
 *   redis-cluster://[[user]:password@]host:port[,host:port...]  a cluster, by seed nodes
 * A cluster has no databases but 0. rediss:// and rediss-cluster:// are
 * the same over TLS (link.h): every connection's server certificate is
 * checked against the system's CAs and the host's name, or the swarm's
 * own CA and name with route_tls. */
#ifndef SAPO_ROUTE_H
#define SAPO_ROUTE_H

#include <hiredis/hiredis.h>

#include "pool/link.h"
#include <stdbool.h>
#include <stddef.h>

#define ROUTE_SLOTS 16384

typedef struct route route_t;

/* prepares a new connection (auth, database, functions): 0, or -1 with err */
typedef int (*route_prepare_fn)(void *ctx, link_t *c, const char *where, char *err, size_t errlen);

/* the connection URL parsed (nothing connects yet); NULL with err naming
 * the URL when it is malformed */
route_t *route_new(const char *url, char *err, size_t errlen);
void route_destroy(route_t **self_p);

/* the hook each new connection goes through, with its context */
void route_on_connect(route_t *self, route_prepare_fn prepare, void *ctx);

/* whether the URL named a cluster */
bool route_is_cluster(const route_t *self);
/* the user and password the URL gave ("" when none), the database (0 in
 * a cluster), and where it points, for messages: host:port, or "cluster
 * host:port,..." with the seeds (no password) */
const char *route_user(const route_t *self);
const char *route_password(const route_t *self);
int route_db(const route_t *self);
const char *route_where(const route_t *self);
/* The swarm's TLS for a rediss URL (tls.h's tls_new: its CA file, this
 * node's certificate and key, the name each server's certificate must
 * carry; NULL or "" each for none), before the first connect: 0, or -1
 * with err (a file that cannot be used; settings given to a plain-text
 * URL). Nothing given: 0, the defaults kept. */
int route_tls(route_t *self, const char *ca, const char *cert, const char *key, const char *name, char *err,
              size_t errlen);
bool route_uses_tls(const route_t *self);
/* whether the URL names, in plain text, a host that is not this
 * machine's loopback (its traffic crosses a network unencrypted) */
bool route_clear_remote(const route_t *self);

/* the slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key */
int route_slot(const char *key, size_t len);

/* A deadline for the call that begins (ms from now; 0: none): connects,
 * replies and retries stop at it, so a call never waits longer on a dead
 * or slow node. On a cluster a node that failed is not tried again for
 * 250 ms, doubled at each failure after it up to 4 s, so that commands
 * for it fail at once meanwhile. */
void route_deadline(route_t *self, long ms);

/* connects to what the URL names (a cluster: its slot map from a seed,
 * then every master) unless already connected: 0, or -1 with err */
int route_connect(route_t *self, char *err, size_t errlen);
/* What is wrong while the rest works, for a line in the node's log ("":
 * nothing): seeds of the URL that did not answer at the first connect,
 * each named with its reason, and slots the map gives no master */
const char *route_notice(const route_t *self);
/* drops every connection and the slot map */
void route_disconnect(route_t *self);

/* One command whose key is key (NULL: any master, e.g. TIME), run where
 * its slot lives: the reply (an error reply included, the caller's to
 * read), or NULL with err when no node answered; redirections are
 * followed, a broken connection is dropped and the map read again */
redisReply *route_run(route_t *self, const char *key, int argc, const char **argv, const size_t *lens, char *err,
                      size_t errlen);

/* Pipelines: commands queued with route_append (the strings copied) run
 * by route_replies, one round trip per node they go to; the replies come
 * back in the order appended (each the caller's to free), those
 * redirected run again one by one. Each command's result is its own: a
 * node that is down, slow past the deadline or breaks fails only the
 * commands sent to it (out[i] NULL). The number of commands without a
 * reply (0: every one answered; the first reason in err), or -1 when out
 * of memory (no reply kept) */
int route_append(route_t *self, const char *key, int argc, const char **argv, const size_t *lens);
int route_replies(route_t *self, redisReply **out, char *err, size_t errlen);
/* commands queued and not yet run; and dropped, none of them run */
int route_queued(const route_t *self);
void route_discard(route_t *self);

/* Every master the map names, for commands each must get (FUNCTION LOAD
 * is per node): the count; host/port of the i-th */
int route_masters(route_t *self, char *err, size_t errlen);
const char *route_master_host(const route_t *self, int i);
int route_master_port(const route_t *self, int i);
/* the slots owned by the i-th master, for tests and reports */
int route_master_slots(const route_t *self, int i);
/* redirections followed (MOVED, ASK), TRYAGAIN replies waited out and
 * map reads so far */
long route_moved(const route_t *self);
long route_asked(const route_t *self);
long route_tryagain(const route_t *self);
long route_map_reads(const route_t *self);
/* reads a replica was asked, its master being down (route_run, route_replies) */
long route_replica_reads(const route_t *self);

#endif
