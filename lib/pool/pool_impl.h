/* Inside of pool_t, shared by the files of lib/pool only: the connection
 * (pool.c over route.c) that every other file sends its commands through,
 * node ids and the names of their keys (pool_keys.c), what a pool
 * remembers of other nodes (pool_peer.c), and their fresh ranges
 * (pool_fresh.c). */
#ifndef SAPO_POOL_IMPL_H
#define SAPO_POOL_IMPL_H

#include <hiredis/hiredis.h>
#include <time.h>

#include "pool/pool.h"
#include "pool/route.h"

/* pool_draw reads a swarm of up to this many nodes whole, and a larger
 * one by this many picked at random (pool_stage_read too) */
#define POOL_CANDIDATES 32

/* What a pool knows of another node: the seqs of its entries pool_draw
 * handed out, sorted (those below its fresh range are forgotten), and how
 * informative its groups were (pool_feedback). */
typedef struct {
    char node[64];
    uint64_t *seq;
    int n, cap;
    double informative, seen; /* decayed counts */
} pool_peer_t;

/* the first key seen for a node (trust on first use) */
typedef struct {
    char node[64];
    uint8_t pub[32];
} pool_node_key_t;

struct pool {
    route_t *route; /* one Redis, or a cluster */
    char swarm[128];
    int max_per_node;
    size_t max_bytes;      /* larger entries are not fetched */
    pool_node_key_t *keys; /* first key seen per node */
    int n_keys;
    time_t retry_at; /* no connection attempt before this */
    int backoff_s;
    uint64_t rng;
    int window_rounds; /* 0 = none */
    long window_ms;    /* 0 = none */
    pool_peer_t *peers;
    int n_peers, cap_peers;
    int *slot;   /* open-addressing index of peers by name: peer + 1, 0 = empty */
    int n_slots; /* a power of two, at least twice n_peers */
    pool_strategy_t strategy;
    long missing;   /* drawn entries that were not there */
    long bad_nodes; /* nodes with bad keys at the last draw */
    long stage_ttl_ms;
    long stage_oversize, stage_bad; /* stage outputs skipped (pool_stage_health) */
    long stage_asked;               /* other nodes the last pool_stage_read asked */
    long deadline_ms;               /* each call's (pool_deadline) */
    redisReply *node_set;           /* the node set as last read (pool_fresh.c) */
    /* the operator's bound as last read for bound_node (pool_publish.c) */
    char bound_node[256], bound[32];
    long long bound_read_ms; /* 0: never */
};

/* pool.c: the connection. */

/* a public call begins: its deadline starts (pool_deadline) */
void pool_begin(pool_t *p);

/* connects now unless a retry is not due: 0, or -1 with err */
int pool_connect(pool_t *p, char *err, size_t errlen);
void pool_disconnect(pool_t *p);
/* One command on the key's node (key NULL: any): a reply, or NULL with
 * err (an error reply too); a broken connection is dropped for a retry */
redisReply *pool_run(pool_t *p, const char *key, int argc, const char **argv, const size_t *lens, char *err,
                     size_t errlen);
/* A pipeline: commands appended (argv as text where lens is NULL), then
 * their n replies into out[] in order, one round trip per node they go
 * to (an error reply among them is the caller's to read): 0, or -1 with
 * err (no replies kept; a broken connection is dropped) */
int pool_append(pool_t *p, const char *key, int argc, const char **argv, const size_t *lens);
int pool_replies(pool_t *p, int n, redisReply **out, char *err, size_t errlen);
/* The same, each command's result its own: a master down or slow fails
 * only its commands (out[i] NULL). How many failed (the first reason in
 * err), or -1 with err when none ran */
int pool_replies_each(pool_t *p, int n, redisReply **out, char *err, size_t errlen);

/* an error reply to the command what as one line into err, with what the
 * operator must do where the pool's functions are not loaded */
void pool_error_reply(const pool_t *p, const char *what, const redisReply *r, char *err, size_t errlen);

/* a double in [0, 1) from the pool's seeded stream */
double pool_uniform(pool_t *p);

/* pool_keys.c: node ids. */

/* The name of one of a node's keys: S:n:NODE:what, or on a cluster
 * S:n:{NODE}:what, so that a node's keys share a slot and each call of
 * the pool's functions touches one (into out, POOL_KEY_MAX bytes) */
#define POOL_KEY_MAX 256
void pool_key(const pool_t *p, const char *node, const char *what, char *out);

/* whether a member of S:nodes is a node other than exclude */
int pool_other_node(const redisReply *e, const char *exclude);
/* qsort order of string replies (redisReply *) by their text */
int pool_by_name(const void *a, const void *b);

/* pool_peer.c: what a pool remembers of other nodes. */

/* the peer record of node, made when new; NULL when out of memory. Making
 * one may move the others. */
pool_peer_t *pool_peer_of(pool_t *self, const char *node);
/* forgets d's seqs below first: how many of [first, hi] it has not handed
 * out */
uint64_t pool_peer_free(pool_peer_t *d, uint64_t first, uint64_t hi);
/* the r-th (from 0) seq of [first, ...] that d has not handed out, into
 * *seq and remembered as handed out: 0, or -1 when out of memory */
int pool_peer_take(pool_peer_t *d, uint64_t first, uint64_t r, uint64_t *seq);
/* the weight of d's entries in a draw (pool_strategy) */
double pool_peer_draw_weight(const pool_t *self, const pool_peer_t *d);

/* pool_fresh.c: the other nodes' fresh ranges. */

/* A node's fresh range, as a draw sees it: node, the first fresh seq, the
 * newest seq, the newest entry's round. */
typedef struct {
    char node[64];
    uint64_t first, hi, newest;
} pool_fresh_t;

/* Other nodes' fresh ranges for a draw, sorted by node, into *out (its
 * length the return value, or -1 with err), the server's clock in ms into
 * *now, and self->bad_nodes; cand bounds the nodes read (pool_fresh.c). */
long pool_fresh_ranges(pool_t *self, const char *exclude, int cand, pool_fresh_t **out, long long *now, char *err,
                       size_t errlen);

#endif
