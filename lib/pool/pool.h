/* The swarm's pool in Redis: every node publishes its shareable groups
 * (opaque records) and draws other nodes' groups.
 *
 * Layout, per swarm prefix S and node N:
 *   S:nodes          set of node ids that ever published
 *   S:n:N:e          hash seq -> record, the node's live entries
 *   S:n:N:m          hash seq -> "round:ms": the publisher's round and the
 *                    server's time (ms) when the entry was published
 *   S:n:N:hi, :lo    newest and oldest live seq
 *   S:n:N:s          the node's summary, kept by its publishes: "lo hi", then
 *                    per publisher round in its range "round seq ms" (first
 *                    seq and publish time): a draw reads a node's fresh
 *                    range from it with one MGET
 *   S:max_per_node   optional: the swarm's bound on any node's entries,
 *                    set by whoever runs the Redis (nodes cannot raise it)
 *   S:n:N:key        the node's Ed25519 public key (64 hex digits): its
 *                    identity, set once (first come) and never replaced
 *                    by sapo; entries of N must be signed with it
 *   S:n:N:stage:R:K  the node's output of stage K of round R (game mode,
 *                    pool_stage_publish), a string that expires
 * A node's entries are a contiguous range of sequence numbers, so an entry
 * drawn from a node is one random number and one HGET, and the bound
 * (oldest entries fall out) is a counter move. Publishing and reading a
 * node's range run on the server as Redis Functions (library "sapo_pool",
 * pool.lua), so each is atomic, and each names in KEYS every key it
 * touches, all of one node (one slot on a cluster, so a migrating slot
 * moves them whole); the client draws the uniform numbers, so a seeded
 * client is reproducible. Every key of node N starts with S:n:N:, which
 * is what per-node ACL users restrict (scripts/acl.sh): such a user may
 * not load functions, so an admin loads them once (bin/pool with the
 * admin's URL) and nodes only call them.
 *
 * Freshness (pool_window): SampleExternal, as in the paper, takes what the
 * other nodes shared lately, not their whole history. An entry is fresh
 * while its round is among its publisher's last `rounds` rounds and it is
 * younger than `seconds`; pool_draw takes only fresh entries, never one
 * it took before, and a publisher drops its own entries past the window,
 * so Redis holds about nodes x window x groups a round. With seconds set,
 * the entries of a node that stops publishing expire with it.
 *
 * The pool never blocks a node: a call to an unreachable Redis fails at
 * once with an error, and the connection is retried on later calls with
 * backoff (1 s doubling to 30 s). */
#ifndef SAPO_POOL_H
#define SAPO_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pool pool_t;

typedef struct {
    void *data; /* malloc'ed, 16-byte aligned entry as published */
    size_t len;
    char node[64]; /* the node it is stored under */
    /* pool_draw only: */
    uint64_t seq;        /* its number among the node's entries */
    uint64_t round;      /* the publisher's round when it was published */
    uint64_t age_rounds; /* the publisher's newest round less this one */
    uint64_t age_ms;     /* milliseconds since it was published (server clock) */
} pool_entry_t;

/* url: redis://[[user]:password@]host[:port][/db]. Only a malformed URL
 * fails here; the connection is made on first use. max_per_node bounds
 * each node's entries. */
pool_t *pool_new(const char *url, const char *swarm, int max_per_node, char *err, size_t errlen);
void pool_destroy(pool_t **self_p);

/* The freshness window of pool_draw and of what pool_publish keeps: the
 * publisher's last `rounds` rounds (0 = no bound in rounds) and `seconds`
 * (0 = no bound in time). Both 0: every live entry (the per-node bound). */
void pool_window(pool_t *self, int rounds, double seconds);

/* Adds a record under node, published in the node's round. Entries of
 * node past the window (and past the bound) are dropped. 0, or -1 with
 * err. */
int pool_publish(pool_t *self, const char *node, uint64_t round, const void *rec, size_t len, char *err, size_t errlen);

/* Adds n records under node in one call (one round trip, atomic). 0, or
 * -1 with err. */
int pool_publish_many(pool_t *self, const char *node, uint64_t round, const void *const *recs, const size_t *lens,
                      int n, char *err, size_t errlen);

/* How pool_draw weighs the other nodes' entries. POOL_UNIFORM: every
 * fresh entry alike (the paper). POOL_USEFUL: a node's entries weigh the
 * posterior mean of the chance that its next group is informative here
 * (its rewards are not all equal under our own verifier), from a uniform
 * prior and its last ten or so groups (pool_feedback): a peer whose groups
 * teach us nothing is drawn less, never not at all. */
typedef enum { POOL_UNIFORM = 0, POOL_USEFUL = 1 } pool_strategy_t;
void pool_strategy(pool_t *self, pool_strategy_t strategy);

/* Tells the pool whether a group drawn from node turned out informative
 * after our verifier re-scored it. 0, or -1 for a name that is no node's
 * (or no memory). */
int pool_feedback(pool_t *self, const char *node, bool informative);

/* node's weight in pool_draw now (1 under POOL_UNIFORM) */
double pool_peer_weight(pool_t *self, const char *node);

/* SampleExternal: draws up to k entries, without replacement, each with
 * probability proportional to its node's weight (pool_strategy), from the
 * fresh entries of every node but exclude_node that this pool
 * has not handed out before (a node never trains on one entry twice).
 * In a swarm of more than max(32, 8 k) nodes, the server first picks that
 * many nodes at random (each alike; Redis's own random numbers, so such a
 * draw is not reproduced by pool_seed) and the entries are drawn as above
 * from theirs: a draw costs O(k), not O(nodes).
 * Fewer come back when fewer are fresh. Returns how many, with *out
 * malloc'ed (free with pool_entries_free) and each entry's age set, or -1
 * with err. Two round trips: the fresh ranges, then the entries. An entry
 * over the record limit comes back with data NULL and its length. */
int pool_draw(pool_t *self, const char *exclude_node, int k, pool_entry_t **out, char *err, size_t errlen);

void pool_entries_free(pool_entry_t *e, int n);

/* Registers pub (32 bytes) as node's public key unless one is registered:
 * 0 when node's key is pub now, -1 with err when Redis failed, -2 with err
 * "node id N is registered to another key (fingerprint F)" when node is
 * another key's (a node may not take an existing id). Under per-node ACL
 * users only N itself (or the admin) can write N's key. */
int pool_register_key(pool_t *self, const char *node, const uint8_t pub[32], char *err, size_t errlen);

/* node's public key into pub: 1, 0 when none (or not a key) is
 * registered, -1 with err. Trust on first use: the first key this pool
 * sees for a node is its key for the pool's lifetime, whatever Redis says
 * later (up to 4096 nodes are remembered). */
int pool_node_key(pool_t *self, const char *node, uint8_t pub[32], char *err, size_t errlen);

/* What pool_draw met that a node planted or lost: entries drawn that were
 * not there (their meta without the entry, or a key of the wrong type;
 * since this pool was made), and nodes skipped at the last draw because
 * their counters are no sane integers or their keys have the wrong type.
 * Neither fails a call or weighs in a draw. */
void pool_health(const pool_t *self, long *missing, long *bad_nodes);

/* live entries of every node, or -1 when Redis cannot be reached (why
 * in err, unless NULL) */
long pool_size_total(pool_t *self, char *err, size_t errlen);
/* live entries of one node, or -1 (why in err, unless NULL) */
long pool_size_node(pool_t *self, const char *node, char *err, size_t errlen);

/* Whether node can be a node id (it becomes part of key names): 0, or -1
 * with err. */
int pool_node_ok(const char *node, char *err, size_t errlen);

/* entries larger than max_bytes are left in Redis by pool_draw
 * (default 16 MiB and a signature, the largest entry the pool takes) */
void pool_limit_record(pool_t *self, size_t max_bytes);

/* The most a call (a publish, a draw, a read) waits on Redis, in seconds
 * (default 2; 0: no bound): connects, replies and retries stop at it, so
 * a dead or slow master costs a round at most this. On a cluster a draw
 * that cannot reach a master draws from the entries on the others. */
void pool_deadline(pool_t *self, double seconds);

/* What is wrong with a cluster pool while the rest works, as one line for
 * the node's log ("" when nothing): seeds of its URL that did not answer
 * at the first connect, each named with its reason, and slots served by
 * no master. */
const char *pool_notice(const pool_t *self);

/* The swarm's TLS for a rediss:// or rediss-cluster:// URL, before the
 * first call: the CA file its servers' certificates are checked against,
 * this node's certificate and key (where Redis asks clients for one),
 * the name every server's certificate must carry (NULL or "" each: the
 * system's CAs, no client certificate, each host's own name). 0, or -1
 * with one line in err naming the setting (a file that cannot be used,
 * settings for a plain-text URL). */
int pool_tls(pool_t *self, const char *ca, const char *cert, const char *key, const char *name, char *err,
             size_t errlen);
/* whether the pool's URL names, in plain text, a host other than this
 * machine's loopback: what a node sends it (the URL's password, every
 * completion) then crosses a network unencrypted */
bool pool_clear_remote(const pool_t *self);
/* where the URL points, for messages: host:port, or "cluster host:port,..." (no password) */
const char *pool_where(const pool_t *self);

/* seeds the uniform numbers of pool_draw and pool_stage_read */
void pool_seed(pool_t *self, uint64_t seed);

/* Stage outputs (game mode, issue 21). A round is played in stages, and
 * after each a node shares its output (a small signed record, opaque
 * here) so that the other nodes build their next stage's prompt from it.
 * Rounds are numbered alike across nodes in game mode, so (round, stage)
 * names what a node looks for: a node running ahead finds fewer peers and
 * goes on with what it has; nobody waits.
 *
 * Each output is a key of its own, S:n:N:stage:R:K, under the node's
 * prefix: per-node ACL users (scripts/acl.sh) let no node write another's,
 * and publishing (R, K) again replaces only the node's own. Every output
 * is set with an expiry (pool_stage_ttl), so nobody deletes anything and
 * Redis holds about nodes x stages x the rounds played within the expiry,
 * each at most the record limit. A node's ACL user needs SET, SADD,
 * SRANDMEMBER, STRLEN and MGET for them. */
#define POOL_STAGE_MAX 3 /* the stages of a round: 1 answer, 2 critique, 3 resolve */

/* How long a stage output lives, 600 s unless set. An output is read for
 * the next stage of its round, a stage's generation after it was
 * published; a peer further behind than the expiry finds nothing of ours,
 * as it finds nothing of a node that left, and goes on with what it has.
 * Under maxmemory-policy volatile-ttl a full Redis drops the outputs
 * soonest to expire first. 0, or -1 (the expiry unchanged) when seconds is
 * not between 0.001 and 86400: an output a day old helps no prompt. */
int pool_stage_ttl(pool_t *self, double seconds);

/* Stores node's output of stage (1..POOL_STAGE_MAX) in round, replacing
 * node's own output of them if any, and adds node to S:nodes (as
 * pool_publish does) so that readers find it. A record must be 1 byte to
 * the record limit (pool_limit_record). One round trip. 0, or -1 with err
 * (a bad node id, stage or length, or Redis failed). */
int pool_stage_publish(pool_t *self, const char *node, uint64_t round, int stage, const void *rec, size_t len,
                       char *err, size_t errlen);

/* Up to max outputs of stage in round by other nodes than exclude_node
 * (NULL excludes none), one per node, in random order: each with its node
 * and data (a 16-byte aligned copy, as pool_draw's; the other fields 0).
 * Like pool_draw, a read costs O(max), not O(nodes): a swarm of at most
 * max(32, 8 max) nodes is read whole, a larger one by that many nodes
 * picked at random (S:nodes holds every node that ever published, so a
 * few times max are asked to find max that played this stage). Three
 * round trips: those nodes, their outputs' lengths (STRLEN), the outputs
 * chosen (one MGET), so an output over the record limit is skipped
 * without being transferred (pool_stage_health). Returns how many (0 when
 * no peer's output is there: not an error) with *out malloc'ed (free with
 * pool_entries_free), or -1 with err (a bad node id or stage, or Redis
 * failed). */
int pool_stage_read(pool_t *self, const char *exclude_node, uint64_t round, int stage, int max, pool_entry_t **out,
                    char *err, size_t errlen);

/* The other nodes the last pool_stage_read asked for an output: every node
 * that ever published in this pool but the excluded one, in a swarm of up
 * to its candidate bound (0 before the first read, or when it failed). A
 * read that found fewer outputs than this came before some peers'. */
long pool_stage_asked(const pool_t *self);

/* Stage outputs pool_stage_read skipped since this pool was made: over the
 * record limit, and keys that are no strings (a node planted them). */
void pool_stage_health(const pool_t *self, long *oversize, long *bad);

#endif
