#include "pool/pool.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/identity.h"
#include "util/splitmix.h"

/* no entry larger than records.h's REC_MAX_BYTES and a 64-byte signature
 * (node/identity.h) enters the pool */
#define ENTRY_MAX_BYTES 16777280 /* pool.lua's sapo_publish refuses larger ones */
/* pool_draw reads a swarm of up to this many nodes whole, and a larger
 * one by this many picked at random */
#define POOL_CANDIDATES 32
/* nodes whose keys a pool remembers (trust on first use) */
#define KEYS_MAX 4096
/* pool_stage_ttl's default, in ms: see pool.h */
#define STAGE_TTL_MS 600000
/* the most nodes a pool_stage_read asks for, whatever its max */
#define STAGE_CANDIDATES_MAX 65536

/* Redis Functions library (lib/pool/pool.lua, embedded by the build),
 * loaded (REPLACE) on every connect so a newer sapo upgrades a running
 * Redis. */
static const char POOL_LIBRARY[] =
#include "pool_lua.inc"
    ;

/* What a pool knows of another node: the seqs of its entries pool_draw
 * handed out, sorted (those below its fresh range are forgotten), and how
 * informative its groups were (pool_feedback). */
typedef struct {
    char node[64];
    uint64_t *seq;
    int n, cap;
    double informative, seen; /* decayed counts */
} peer_t;

/* the first key seen for a node (trust on first use) */
typedef struct {
    char node[64];
    uint8_t pub[32];
} node_key_t;

typedef char draw_text_t[32]; /* a uniform draw as %.17g text */
typedef char seq_text_t[24];  /* an entry's seq as a hash field */

struct pool {
    char host[256];
    int port;
    int db;
    char user[128];
    char password[256];
    char swarm[128];
    int max_per_node;
    size_t max_bytes; /* larger entries are not fetched by pool_sample */
    redisContext *c;
    node_key_t *keys; /* first key seen per node */
    int n_keys;
    time_t retry_at; /* no connection attempt before this */
    int backoff_s;
    uint64_t rng;
    int window_rounds; /* 0 = none */
    long window_ms;    /* 0 = none */
    peer_t *peers;
    int n_peers, cap_peers;
    int *slot;   /* open-addressing index of peers by name: peer + 1, 0 = empty */
    int n_slots; /* a power of two, at least twice n_peers */
    pool_strategy_t strategy;
    long missing;   /* drawn entries that were not there */
    long bad_nodes; /* nodes with bad keys at the last draw */
    long stage_ttl_ms;
    long stage_oversize, stage_bad; /* stage outputs skipped (pool_stage_health) */
    long stage_asked;               /* other nodes the last pool_stage_read asked */
};

static int parse_url(pool_t *p, const char *url, char *err, size_t errlen)
{
    const char *s = url;
    if (strncmp(s, "redis://", 8) != 0) goto bad;
    s += 8;
    const char *at = strchr(s, '@');
    if (at) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        size_t ul = colon ? (size_t)(colon - s) : 0;
        const char *pw = colon ? colon + 1 : s;
        size_t pl = (size_t)(at - pw);
        if (ul >= sizeof p->user || pl >= sizeof p->password) goto bad;
        memcpy(p->user, s, ul);
        p->user[ul] = '\0';
        memcpy(p->password, pw, pl);
        p->password[pl] = '\0';
        s = at + 1;
    }
    size_t hl = strcspn(s, ":/");
    if (hl == 0 || hl >= sizeof p->host) goto bad;
    memcpy(p->host, s, hl);
    p->host[hl] = '\0';
    s += hl;
    p->port = 6379;
    if (*s == ':') {
        char *end;
        long port = strtol(s + 1, &end, 10);
        if (end == s + 1 || port <= 0 || port > 65535) goto bad;
        p->port = (int)port;
        s = end;
    }
    if (*s == '/') {
        char *end;
        long db = strtol(s + 1, &end, 10);
        if (end == s + 1 || db < 0 || *end) goto bad;
        p->db = (int)db;
        s = end;
    }
    if (*s) goto bad;
    return 0;
bad:
    snprintf(err, errlen, "redis URL '%s': expected redis://[[user]:password@]host[:port][/db]", url);
    return -1;
}

pool_t *pool_new(const char *url, const char *swarm, int max_per_node, char *err, size_t errlen)
{
    pool_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (parse_url(p, url, err, errlen) != 0) {
        free(p);
        return NULL;
    }
    if (!swarm || !*swarm || strlen(swarm) >= sizeof p->swarm || max_per_node < 1) {
        snprintf(err, errlen, "pool: swarm prefix must be 1..%zu bytes and the bound at least 1", sizeof p->swarm - 1);
        free(p);
        return NULL;
    }
    snprintf(p->swarm, sizeof p->swarm, "%s", swarm);
    p->max_per_node = max_per_node;
    p->max_bytes = ENTRY_MAX_BYTES;
    p->stage_ttl_ms = STAGE_TTL_MS;
    p->rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)p;
    return p;
}

static void disconnect(pool_t *p)
{
    if (p->c) redisFree(p->c);
    p->c = NULL;
}

void pool_destroy(pool_t **self_p)
{
    if (!self_p || !*self_p) return;
    disconnect(*self_p);
    for (int i = 0; i < (*self_p)->n_peers; i++) free((*self_p)->peers[i].seq);
    free((*self_p)->peers);
    free((*self_p)->slot);
    free((*self_p)->keys);
    free(*self_p);
    *self_p = NULL;
}

void pool_seed(pool_t *self, uint64_t seed) { self->rng = seed ? seed : 1; }

void pool_strategy(pool_t *self, pool_strategy_t strategy) { self->strategy = strategy; }

void pool_health(const pool_t *self, long *missing, long *bad_nodes)
{
    *missing = self->missing;
    *bad_nodes = self->bad_nodes;
}

void pool_window(pool_t *self, int rounds, double seconds)
{
    self->window_rounds = rounds > 0 ? rounds : 0;
    self->window_ms = seconds > 0 ? (long)(seconds * 1000 + 0.5) : 0;
}

void pool_limit_record(pool_t *self, size_t max_bytes) { self->max_bytes = max_bytes; }

/* a double in [0, 1) */
static double uniform(pool_t *p) { return (double)(splitmix64(&p->rng) >> 11) * 0x1.0p-53; }

static int connect_now(pool_t *p, char *err, size_t errlen)
{
    time_t now = time(NULL);
    if (now < p->retry_at) {
        /* one text for the whole wait, so a caller can log it once */
        snprintf(err, errlen, "redis %s:%d unreachable (retried with backoff, every 30 s at most)", p->host, p->port);
        return -1;
    }
    struct timeval tv = {1, 0};
    p->c = redisConnectWithTimeout(p->host, p->port, tv);
    if (!p->c || p->c->err) {
        snprintf(err, errlen, "redis %s:%d: %s", p->host, p->port, p->c ? p->c->errstr : "out of memory");
        goto fail;
    }
    struct timeval io = {2, 0};
    redisSetTimeout(p->c, io);
    redisReply *r;
    if (p->password[0]) {
        r = p->user[0] ? redisCommand(p->c, "AUTH %s %s", p->user, p->password)
                       : redisCommand(p->c, "AUTH %s", p->password);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "redis %s:%d: AUTH: %s", p->host, p->port, r ? r->str : p->c->errstr);
            freeReplyObject(r);
            goto fail;
        }
        freeReplyObject(r);
    }
    if (p->db) {
        r = redisCommand(p->c, "SELECT %d", p->db);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "redis %s:%d: SELECT %d: %s", p->host, p->port, p->db, r ? r->str : p->c->errstr);
            freeReplyObject(r);
            goto fail;
        }
        freeReplyObject(r);
    }
    /* a node's ACL user may not load functions: the operator has (bin/pool
     * as admin), and a missing library shows up as an error on first use */
    r = redisCommand(p->c, "FUNCTION LOAD REPLACE %s", POOL_LIBRARY);
    if (!r || (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOPERM", 6) != 0)) {
        snprintf(err, errlen, "redis %s:%d: FUNCTION LOAD (Redis 7 or newer needed): %s", p->host, p->port,
                 r ? r->str : p->c->errstr);
        freeReplyObject(r);
        goto fail;
    }
    freeReplyObject(r);
    p->backoff_s = 0;
    return 0;
fail:
    disconnect(p);
    p->backoff_s = p->backoff_s ? (p->backoff_s * 2 > 30 ? 30 : p->backoff_s * 2) : 1;
    p->retry_at = now + p->backoff_s;
    return -1;
}

/* a reply, or NULL with err; a broken connection is dropped for a retry */
static redisReply *run(pool_t *p, int argc, const char **argv, const size_t *lens, char *err, size_t errlen)
{
    if (!p->c && connect_now(p, err, errlen) != 0) return NULL;
    redisReply *r = redisCommandArgv(p->c, argc, argv, lens);
    if (!r) {
        snprintf(err, errlen, "redis %s:%d: %s", p->host, p->port, p->c->errstr);
        disconnect(p);
        p->retry_at = 0;
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis %s:%d: %s", p->host, p->port, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* Node ids become part of key names: a ':' or a glob character would let
 * one node's keys fall under another node's ACL pattern. */
int pool_node_ok(const char *node, char *err, size_t errlen)
{
    size_t n = node ? strlen(node) : 0;
    size_t good = node ? strspn(node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") : 0;
    if (n == 0 || n > 63 || good != n) {
        snprintf(err, errlen, "pool: node id '%s' must be 1..63 letters, digits, '_', '.' or '-'", node ? node : "");
        return -1;
    }
    return 0;
}

int pool_publish_many(pool_t *self, const char *node, uint64_t round, const void *const *recs, const size_t *lens,
                      int n, char *err, size_t errlen)
{
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    if (n <= 0) return 0;
    char base[512], nodes[256], bound[256], maxlen[32], wr[32], wms[32], rnd[32];
    snprintf(base, sizeof base, "%s:n:%s:", self->swarm, node);
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(bound, sizeof bound, "%s:max_per_node", self->swarm);
    snprintf(maxlen, sizeof maxlen, "%d", self->max_per_node);
    snprintf(wr, sizeof wr, "%d", self->window_rounds);
    snprintf(wms, sizeof wms, "%ld", self->window_ms);
    snprintf(rnd, sizeof rnd, "%llu", (unsigned long long)round);
    const int head = 11;
    const char **argv = malloc(sizeof *argv * (size_t)(n + head));
    size_t *alen = malloc(sizeof *alen * (size_t)(n + head));
    if (!argv || !alen) {
        free(argv);
        free(alen);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *first[] = {"FCALL", "sapo_publish", "2", base, nodes, node, maxlen, bound, wr, wms, rnd};
    for (int i = 0; i < head; i++) {
        argv[i] = first[i];
        alen[i] = strlen(first[i]);
    }
    for (int i = 0; i < n; i++) {
        argv[head + i] = recs[i];
        alen[head + i] = lens[i];
    }
    redisReply *r = run(self, n + head, argv, alen, err, errlen);
    free(argv);
    free(alen);
    if (!r) return -1;
    freeReplyObject(r);
    return 0;
}

int pool_publish(pool_t *self, const char *node, uint64_t round, const void *rec, size_t len, char *err, size_t errlen)
{
    return pool_publish_many(self, node, round, &rec, &len, 1, err, errlen);
}

int pool_sample(pool_t *self, const char *exclude_node, int k, pool_entry_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (k <= 0) return 0;
    const int head = 7;
    const char **argv = calloc((size_t)k + head, sizeof *argv);
    size_t *lens = calloc((size_t)k + head, sizeof *lens);
    draw_text_t *u = calloc((size_t)k, sizeof *u);
    int n = -1;
    if (!argv || !lens || !u) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s:", self->swarm);
    argv[0] = "FCALL_RO", argv[1] = "sapo_sample", argv[2] = "1", argv[3] = prefix;
    argv[4] = exclude_node ? exclude_node : "";
    char cap[32], max_bytes[32];
    snprintf(cap, sizeof cap, "%d", self->max_per_node);
    snprintf(max_bytes, sizeof max_bytes, "%zu", self->max_bytes);
    argv[5] = cap, argv[6] = max_bytes;
    for (int i = 0; i < k; i++) {
        snprintf(u[i], sizeof u[i], "%.17g", uniform(self));
        argv[head + i] = u[i];
    }
    for (int i = 0; i < k + head; i++) lens[i] = strlen(argv[i]);
    redisReply *r = run(self, k + head, argv, lens, err, errlen);
    if (!r) goto done;
    if (r->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "redis: sapo_sample answered type %d, not an array", r->type);
        freeReplyObject(r);
        goto done;
    }
    pool_entry_t *e = calloc(r->elements / 2 + 1, sizeof *e);
    n = 0;
    for (size_t i = 0; e && i + 1 < r->elements; i += 2) {
        const redisReply *from = r->element[i], *x = r->element[i + 1];
        if (from->type != REDIS_REPLY_STRING) continue;
        /* an id too long to be a node's is "", which no key belongs to */
        size_t nl = from->len < sizeof e[n].node ? from->len : 0;
        memcpy(e[n].node, from->str, nl);
        e[n].node[nl] = '\0';
        if (x->type == REDIS_REPLY_INTEGER && x->integer > 0) {
            e[n].data = NULL;
            e[n++].len = (size_t)x->integer;
            continue;
        }
        if (x->type != REDIS_REPLY_STRING) continue;
        if (posix_memalign(&e[n].data, 16, x->len ? x->len : 1) != 0) break;
        memcpy(e[n].data, x->str, x->len);
        e[n].len = x->len;
        n++;
    }
    *out = e;
    freeReplyObject(r);
done:
    free(argv);
    free(lens);
    free(u);
    return n;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* the slot of node in the index: its peer's, or the empty one it would take */
static int *peer_slot(const pool_t *self, const char *node)
{
    size_t mask = (size_t)self->n_slots - 1;
    for (size_t i = name_hash(node) & mask;; i = (i + 1) & mask)
        if (self->slot[i] == 0 || strcmp(self->peers[self->slot[i] - 1].node, node) == 0) return &self->slot[i];
}

/* the peer record of node, NULL when none */
static peer_t *peer_find(const pool_t *self, const char *node)
{
    if (!self->slot) return NULL;
    int i = *peer_slot(self, node);
    return i ? &self->peers[i - 1] : NULL;
}

/* the peer record of node, made when new (a draw over thousands of nodes
 * looks one up per range: by hash, not by a scan); NULL when out of memory.
 * Making one may move the others. */
static peer_t *peer_of(pool_t *self, const char *node)
{
    peer_t *found = peer_find(self, node);
    if (found) return found;
    if (self->n_peers == self->cap_peers) {
        int cap = self->cap_peers ? 2 * self->cap_peers : 16;
        peer_t *d = realloc(self->peers, sizeof *d * (size_t)cap);
        if (!d) return NULL;
        self->peers = d, self->cap_peers = cap;
    }
    if (2 * (self->n_peers + 1) > self->n_slots) {
        int n = self->n_slots ? 2 * self->n_slots : 64;
        int *slot = calloc((size_t)n, sizeof *slot);
        if (!slot) return NULL;
        free(self->slot);
        self->slot = slot, self->n_slots = n;
        for (int i = 0; i < self->n_peers; i++) *peer_slot(self, self->peers[i].node) = i + 1;
    }
    peer_t *d = &self->peers[self->n_peers++];
    memset(d, 0, sizeof *d);
    snprintf(d->node, sizeof d->node, "%s", node);
    *peer_slot(self, d->node) = self->n_peers;
    return d;
}

/* forgets the seqs below first; the rest, sorted, stay */
static void peer_forget_below(peer_t *d, uint64_t first)
{
    int k = 0;
    while (k < d->n && d->seq[k] < first) k++;
    if (k == 0) return;
    memmove(d->seq, d->seq + k, sizeof *d->seq * (size_t)(d->n - k));
    d->n -= k;
}

static int peer_add_drawn(peer_t *d, uint64_t seq)
{
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        uint64_t *s = realloc(d->seq, sizeof *s * (size_t)cap);
        if (!s) return -1;
        d->seq = s, d->cap = cap;
    }
    int k = d->n;
    while (k > 0 && d->seq[k - 1] > seq) {
        d->seq[k] = d->seq[k - 1];
        k--;
    }
    d->seq[k] = seq;
    d->n++;
    return 0;
}

/* the r-th (from 0) seq of [first, hi] that d has not handed out */
static uint64_t peer_nth_free(const peer_t *d, uint64_t first, uint64_t r)
{
    uint64_t seq = first + r;
    for (int k = 0; k < d->n; k++) {
        if (d->seq[k] < first) continue;
        if (d->seq[k] > seq) break;
        seq++;
    }
    return seq;
}

static int peer_drawn_in(const peer_t *d, uint64_t first, uint64_t hi)
{
    int n = 0;
    for (int k = 0; k < d->n; k++) n += d->seq[k] >= first && d->seq[k] <= hi;
    return n;
}

/* pool_feedback's forgetting: each new group of a peer weighs 1, the
 * one before 0.9, ...: about its last ten groups count */
#define PEER_DECAY 0.9

/* The weight of a peer's entries in pool_draw: 1 under the uniform
 * strategy; under "useful", the posterior mean of the chance that its next
 * group is informative here, from a uniform prior and its decayed counts
 * ((informative + 1) / (seen + 2)): 1/2 for a peer not seen yet, never 0,
 * so a peer that improves is drawn again. */
static double peer_weight(const pool_t *self, const peer_t *d)
{
    if (self->strategy == POOL_UNIFORM) return 1.0;
    return (d->informative + 1.0) / (d->seen + 2.0);
}

int pool_feedback(pool_t *self, const char *node, bool informative)
{
    char err[128];
    if (pool_node_ok(node, err, sizeof err) != 0) return -1;
    peer_t *d = peer_of(self, node);
    if (!d) return -1;
    d->informative = PEER_DECAY * d->informative + (informative ? 1 : 0);
    d->seen = PEER_DECAY * d->seen + 1;
    return 0;
}

double pool_peer_weight(pool_t *self, const char *node)
{
    const peer_t *d = peer_find(self, node);
    if (d) return peer_weight(self, d);
    return self->strategy == POOL_UNIFORM ? 1.0 : 0.5;
}

typedef struct {
    char m[240], e[240]; /* a drawn entry's meta and entry hash keys */
} entry_keys_t;

/* one pipelined round trip: the n commands appended to p->c, their n
 * replies into out[] (an error reply among them is the caller's to read:
 * a key a hostile node made the wrong type is one entry missing, not a
 * failed draw); 0, or -1 with err when the connection broke (it is then
 * dropped: replies not read would answer the next command) */
static int pipeline_replies(pool_t *p, int n, redisReply **out, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(p->c, &r) != REDIS_OK || !r) {
            snprintf(err, errlen, "redis %s:%d: %s", p->host, p->port, p->c->errstr[0] ? p->c->errstr : "no reply");
            disconnect(p);
            p->retry_at = 0;
            return -1;
        }
        out[i] = r;
    }
    return 0;
}

/* Drawn entries, read straight from their hashes: two pipelined round
 * trips (a Lua function would copy every entry into Lua and back, 250 us
 * for four at 1,000 nodes); the first reads each entry's meta and its
 * length, the second only the entries no larger than max-record, so a
 * planted huge one never travels.
 *
 * want drawn entries (keys[2i] their meta hash, keys[2i+1] their entry
 * hash, seqs[i] the field): g[2i] the meta, g[2i + 1] the entry's length,
 * g[2 want + i] the entry when 0 < length <= max-record, else NULL */
static int fetch(pool_t *p, int want, const char **keys, seq_text_t *seqs, redisReply **g, char *err, size_t errlen)
{
    if (!p->c && connect_now(p, err, errlen) != 0) return -1;
    for (int i = 0; i < want; i++) {
        redisAppendCommand(p->c, "HGET %s %s", keys[2 * i], seqs[i]);
        redisAppendCommand(p->c, "HSTRLEN %s %s", keys[2 * i + 1], seqs[i]);
    }
    if (pipeline_replies(p, 2 * want, g, err, errlen) != 0) return -1;
    int big = 0;
    for (int i = 0; i < want; i++) {
        const redisReply *len = g[2 * i + 1];
        if (len->type != REDIS_REPLY_INTEGER || len->integer <= 0 || (size_t)len->integer > p->max_bytes) continue;
        redisAppendCommand(p->c, "HGET %s %s", keys[2 * i + 1], seqs[i]);
        big++;
    }
    if (big == 0) return 0;
    redisReply **x = g + 2 * want;
    if (pipeline_replies(p, big, x, err, errlen) != 0) return -1;
    /* spread the replies to their entries, the last first */
    for (int i = want - 1, j = big - 1; i >= 0; i--) {
        const redisReply *len = g[2 * i + 1];
        int fetched = len->type == REDIS_REPLY_INTEGER && len->integer > 0 && (size_t)len->integer <= p->max_bytes;
        redisReply *mine = fetched ? x[j--] : NULL;
        x[i] = mine;
    }
    return 0;
}

/* A node's fresh range, as a draw sees it: node, the first fresh seq, the
 * newest seq, the newest entry's round. */
typedef struct {
    char node[64];
    uint64_t first, hi, newest;
} fresh_t;

/* a summary's numbers: "lo hi" and 64 rounds of three (pool.lua keeps no
 * more) */
#define SUMMARY_NUMBERS (2 + 3 * 64)

/* one decimal integer of at most 2^52 (the largest Lua counts exactly) */
static int summary_number(const char **s, uint64_t *v)
{
    const char *p = *s;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
    if (*p < '0' || *p > '9') return *p == '\0' ? 0 : -1;
    uint64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > (1ull << 52)) return -1;
    }
    if (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\f' && *p != '\v') return -1;
    *s = p, *v = x;
    return 1;
}

/* A node's summary (pool.lua, summary_parse: "lo hi", then per publisher
 * round "round seq ms", oldest first, seqs rising) read into a fresh
 * range at server time now: 1, or 0 when it is not one (missing, junk,
 * or written in a form only Lua reads: the caller asks Lua) */
static int summary_fresh(const redisReply *s, int rounds, long ms, long long now, fresh_t *f)
{
    if (!s || s->type != REDIS_REPLY_STRING || s->len > 4096 || strlen(s->str) != s->len) return 0;
    uint64_t t[SUMMARY_NUMBERS], v;
    int n = 0, got;
    const char *p = s->str;
    while ((got = summary_number(&p, &v)) == 1) {
        if (n == SUMMARY_NUMBERS) return 0;
        t[n++] = v;
    }
    if (got < 0 || n < 5 || (n - 2) % 3 != 0 || t[0] < 1 || t[1] < t[0] || t[3] != t[0]) return 0;
    for (int i = 2; i < n; i += 3)
        if (t[i + 1] > t[1] || (i > 2 && t[i + 1] <= t[i - 2])) return 0;
    f->hi = t[1], f->newest = t[n - 3];
    f->first = t[1] + 1;
    for (int i = n - 3; i >= 2; i -= 3) {
        if ((rounds > 0 && t[i] + (uint64_t)rounds <= f->newest) || (ms > 0 && now - (long long)t[i + 2] > ms)) break;
        f->first = t[i + 1];
    }
    if (rounds == 0 && ms == 0) f->first = t[0];
    return 1;
}

static int fresh_by_node(const void *a, const void *b)
{
    return strcmp(((const fresh_t *)a)->node, ((const fresh_t *)b)->node);
}

static int name_order(const void *a, const void *b)
{
    return strcmp((*(const redisReply *const *)a)->str, (*(const redisReply *const *)b)->str);
}

/* whether a member of S:nodes is a node other than exclude: a name that
 * cannot be a node's is skipped, its keys are no one's */
static int other_node(const redisReply *e, const char *exclude)
{
    char ebuf[128];
    return e->type == REDIS_REPLY_STRING && e->len < 64 && strlen(e->str) == e->len && strcmp(e->str, exclude) != 0 &&
           pool_node_ok(e->str, ebuf, sizeof ebuf) == 0;
}

/* the ranges sapo_fresh (pool.lua) answers for the nodes named in
 * names[0..n), appended to f (one answered for a node not asked about, by
 * the function of an older sapo, is ignored); the count of nodes skipped
 * for bad keys, or -1 with err */
static long lua_fresh(pool_t *self, const char *prefix, const char *exclude, int cand, const redisReply **names,
                      size_t n, fresh_t *f, size_t *nf, char *err, size_t errlen)
{
    char cap[32], wr[32], wms[32], cn[32];
    snprintf(cap, sizeof cap, "%d", self->max_per_node);
    snprintf(wr, sizeof wr, "%d", self->window_rounds);
    snprintf(wms, sizeof wms, "%ld", self->window_ms);
    snprintf(cn, sizeof cn, "%d", cand);
    const char **argv = calloc(9 + n, sizeof *argv);
    size_t *lens = calloc(9 + n, sizeof *lens);
    if (!argv || !lens) {
        free(argv), free(lens);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *head[] = {"FCALL_RO", "sapo_fresh", "1", prefix, exclude, cap, wr, wms, cn};
    for (int i = 0; i < 9; i++) argv[i] = head[i], lens[i] = strlen(head[i]);
    for (size_t i = 0; i < n; i++) argv[9 + i] = names[i]->str, lens[9 + i] = names[i]->len;
    redisReply *r = run(self, (int)(9 + n), argv, lens, err, errlen);
    free(argv), free(lens);
    if (!r) return -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen, "redis: sapo_fresh answered no count of bad nodes");
        freeReplyObject(r);
        return -1;
    }
    long bad = (long)r->element[0]->integer;
    for (size_t i = 0; i + 4 < r->elements; i += 4) {
        redisReply **e = r->element + 1 + i;
        if (e[0]->type != REDIS_REPLY_STRING || e[1]->type != REDIS_REPLY_INTEGER ||
            e[2]->type != REDIS_REPLY_INTEGER || e[3]->type != REDIS_REPLY_INTEGER || e[1]->integer < 1 ||
            e[2]->integer < 1)
            continue;
        size_t j = 0;
        while (j < n && strcmp(names[j]->str, e[0]->str) != 0) j++;
        if (j == n) continue;
        fresh_t *o = &f[(*nf)++];
        snprintf(o->node, sizeof o->node, "%s", e[0]->str);
        o->first = (uint64_t)e[1]->integer, o->hi = (uint64_t)e[2]->integer;
        o->newest = e[3]->integer > 0 ? (uint64_t)e[3]->integer : 0;
    }
    freeReplyObject(r);
    return bad;
}

/* the summaries of the nodes named, one MGET: its reply (an array of nn),
 * or NULL with err */
static redisReply *summaries(pool_t *self, const char *prefix, const redisReply **names, size_t nn, char *err,
                             size_t errlen)
{
    const char **argv = calloc(nn + 1, sizeof *argv);
    size_t *lens = calloc(nn + 1, sizeof *lens);
    char(*keys)[240] = calloc(nn + 1, sizeof *keys);
    redisReply *r = NULL;
    if (!argv || !lens || !keys) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    argv[0] = "MGET", lens[0] = 4;
    for (size_t i = 0; i < nn; i++) {
        snprintf(keys[i], sizeof keys[i], "%sn:%s:s", prefix, names[i]->str);
        argv[1 + i] = keys[i], lens[1 + i] = strlen(keys[i]);
    }
    r = run(self, (int)(1 + nn), argv, lens, err, errlen);
    if (r && (r->type != REDIS_REPLY_ARRAY || r->elements != nn)) {
        snprintf(err, errlen, "redis: MGET answered type %d, not %zu values", r->type, nn);
        freeReplyObject(r);
        r = NULL;
    }
done:
    free(argv), free(lens), free(keys);
    return r;
}

/* each range cut to the per-node bound (the newest cap entries), the empty
 * ones dropped, the rest sorted by node: how many are left */
static size_t bound_ranges(fresh_t *f, size_t nf, uint64_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < nf; i++) {
        if (f[i].hi + 1 > cap && f[i].first < f[i].hi + 1 - cap) f[i].first = f[i].hi + 1 - cap;
        if (f[i].first <= f[i].hi) f[n++] = f[i];
    }
    qsort(f, n, sizeof *f, fresh_by_node);
    return n;
}

/* Other nodes' fresh ranges for a draw, sorted by node, into *out (its
 * length the return value, or -1 with err), the server's clock in ms into
 * *now (the age of every entry drawn), and self->bad_nodes. The node
 * set whole when it has at most cand nodes, else cand + 1 of them at
 * random (SRANDMEMBER answers the whole set when it is no larger), so a
 * draw costs the same at 10 or 10,000 nodes. Each node's summary comes
 * with one MGET and is read here (in Lua, 32 of them took 325 us of the
 * server's single thread); a node without one (an older sapo's, or junk)
 * is left to sapo_fresh, which reads its counters and entries' meta. */
static long fresh_ranges(pool_t *self, const char *prefix, const char *exclude, int cand, fresh_t **out, long long *now,
                         char *err, size_t errlen)
{
    *out = NULL;
    if (!self->c && connect_now(self, err, errlen) != 0) return -1;
    redisReply *g[3] = {NULL, NULL, NULL};
    redisAppendCommand(self->c, "TIME");
    redisAppendCommand(self->c, "SRANDMEMBER %snodes %d", prefix, cand + 1);
    if (pipeline_replies(self, 2, g, err, errlen) != 0) {
        freeReplyObject(g[0]);
        return -1;
    }
    long n = -1;
    const redisReply **names = NULL, *t = g[0], *set = g[1];
    size_t nn = 0, nl = 0, nf = 0;
    fresh_t *f = NULL;
    if (t->type != REDIS_REPLY_ARRAY || t->elements != 2 || t->element[0]->type != REDIS_REPLY_STRING ||
        t->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "redis: TIME answered type %d, not two strings", t->type);
        goto done;
    }
    if (set->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "redis: SRANDMEMBER %snodes answered type %d%s%s", prefix, set->type,
                 set->type == REDIS_REPLY_ERROR ? ": " : "", set->type == REDIS_REPLY_ERROR ? set->str : "");
        goto done;
    }
    *now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    names = calloc(set->elements + 1, sizeof *names);
    f = calloc(set->elements + 1, sizeof *f);
    if (!names || !f) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < set->elements; i++)
        if (other_node(set->element[i], exclude)) names[nn++] = set->element[i];
    qsort(names, nn, sizeof *names, name_order);
    if (nn > 0 && !(g[2] = summaries(self, prefix, names, nn, err, errlen))) goto done;
    /* the nodes without a summary go to Lua, in names[0..nl) */
    for (size_t i = 0; i < nn; i++) {
        if (summary_fresh(g[2]->element[i], self->window_rounds, self->window_ms, *now, &f[nf])) {
            snprintf(f[nf].node, sizeof f[nf].node, "%s", names[i]->str);
            nf++;
        } else {
            names[nl++] = names[i];
        }
    }
    long bad = 0;
    if (nl > 0 && (bad = lua_fresh(self, prefix, exclude, cand, names, nl, f, &nf, err, errlen)) < 0) goto done;
    self->bad_nodes = bad;
    n = (long)bound_ranges(f, nf, (uint64_t)self->max_per_node);
    *out = f, f = NULL;
done:
    for (int i = 0; i < 3; i++) freeReplyObject(g[i]);
    free(names), free(f);
    return n;
}

typedef struct {
    peer_t *d;   /* set once every range's peer exists: peer_of may move them */
    size_t peer; /* its index in self->peers */
    uint64_t first, hi, newest, free;
    double w;
} range_t;

/* The fresh ranges that are ranges (one that is not is skipped), each with
 * its peer, what of it was not handed out before and the peer's weight,
 * into r[0..*m); their free entries in *total, weighed in *mass. 0, or -1
 * when out of memory. */
static int draw_ranges(pool_t *self, const fresh_t *fr, long nr, range_t *r, size_t *m, uint64_t *total, double *mass)
{
    *m = 0, *total = 0, *mass = 0;
    for (long i = 0; i < nr; i++) {
        const fresh_t *e = &fr[i];
        if (e->first < 1 || e->hi < e->first || e->hi - e->first >= (uint64_t)self->max_per_node) continue;
        range_t *rg = &r[*m];
        peer_t *d = peer_of(self, e->node);
        if (!d) return -1;
        rg->peer = (size_t)(d - self->peers);
        rg->first = e->first, rg->hi = e->hi, rg->newest = e->newest;
        peer_forget_below(d, rg->first);
        rg->free = rg->hi - rg->first + 1 - (uint64_t)peer_drawn_in(d, rg->first, rg->hi);
        rg->w = peer_weight(self, d);
        *total += rg->free;
        *mass += rg->w * (double)rg->free;
        (*m)++;
    }
    for (size_t i = 0; i < *m; i++) r[i].d = &self->peers[r[i].peer];
    return 0;
}

/* Up to k entries: each fresh entry not handed out before with probability
 * proportional to its peer's weight (uniform: equal), without replacement;
 * entry i is seq seqs[i] of from[i]. How many were drawn. */
static int draw_seqs(pool_t *self, range_t *r, size_t m, uint64_t total, double mass, int k, range_t **from,
                     seq_text_t *seqs)
{
    int want = total < (uint64_t)k ? (int)total : k;
    for (int i = 0; i < want; i++) {
        double x = uniform(self) * mass;
        size_t j = 0;
        for (;;) {
            double span = r[j].w * (double)r[j].free;
            if (x < span || j + 1 == m) break;
            x -= span;
            j++;
        }
        while (r[j].free == 0) j--; /* rounding at the top end */
        uint64_t nth = (uint64_t)(x / r[j].w);
        if (nth >= r[j].free) nth = r[j].free - 1;
        uint64_t seq = peer_nth_free(r[j].d, r[j].first, nth);
        if (peer_add_drawn(r[j].d, seq) != 0) return i;
        r[j].free--;
        mass -= r[j].w;
        from[i] = &r[j];
        snprintf(seqs[i], sizeof seqs[i], "%llu", (unsigned long long)seq);
    }
    return want;
}

/* A drawn entry from its replies (fetch: its meta, its length, and the
 * entry when fetched, else NULL) at server time now, into o: 1, or 0 when
 * it is skipped and counted as missing, or -1 when out of memory. */
static int drawn_entry(pool_t *self, const range_t *from, const char *seq, const redisReply *meta,
                       const redisReply *len, const redisReply *x, long long now, pool_entry_t *o)
{
    memset(o, 0, sizeof *o); /* a slot an entry skipped before may hold its fields */
    snprintf(o->node, sizeof o->node, "%s", from->d->node);
    o->seq = strtoull(seq, NULL, 10);
    unsigned long long round = 0, ms = 0;
    if (meta->type == REDIS_REPLY_STRING && sscanf(meta->str, "%llu:%llu", &round, &ms) == 2) {
        o->round = round;
        o->age_rounds = from->newest > round ? from->newest - round : 0;
        o->age_ms = now > (long long)ms ? (uint64_t)(now - (long long)ms) : 0;
    } else if (self->window_rounds > 0 || self->window_ms > 0) {
        /* no fresh entry lacks its publisher's round and time: one
         * planted (or half-lost) is skipped and counted */
        self->missing++;
        return 0;
    }
    if (!x) { /* not fetched: too large (its length alone), or gone */
        if (len->type != REDIS_REPLY_INTEGER || len->integer <= 0) {
            self->missing++; /* gone since the ranges were read, or planted meta without an entry */
            return 0;
        }
        o->len = (size_t)len->integer;
        return 1;
    }
    if (x->type != REDIS_REPLY_STRING) { /* removed between the two round trips */
        self->missing++;
        return 0;
    }
    if (posix_memalign(&o->data, 16, x->len ? x->len : 1) != 0) return -1;
    memcpy(o->data, x->str, x->len);
    o->len = x->len;
    return 1;
}

int pool_draw(pool_t *self, const char *exclude_node, int k, pool_entry_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (k <= 0) return 0;
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s:", self->swarm);
    /* the swarm whole up to POOL_CANDIDATES nodes (or 8 k), else that many
     * nodes at random: exact for a small swarm, O(k) for a large one */
    fresh_t *fr = NULL;
    long long now; /* the server's clock when the ranges were read, in ms */
    long nr = fresh_ranges(self, prefix, exclude_node ? exclude_node : "",
                           8 * k > POOL_CANDIDATES ? 8 * k : POOL_CANDIDATES, &fr, &now, err, errlen);
    if (nr < 0) return -1;
    int n = -1;
    range_t *ranges = calloc((size_t)nr + 1, sizeof *ranges);
    const char **gargv = calloc(2 * (size_t)k, sizeof *gargv);
    entry_keys_t *keys = calloc((size_t)k, sizeof *keys);
    seq_text_t *seqs = calloc((size_t)k, sizeof *seqs);
    range_t **from = calloc((size_t)k, sizeof *from);
    redisReply **g = calloc(3 * (size_t)k, sizeof *g);
    pool_entry_t *e = calloc((size_t)k + 1, sizeof *e);
    size_t m;
    uint64_t total;
    double mass;
    if (!ranges || !gargv || !keys || !seqs || !from || !g || !e ||
        draw_ranges(self, fr, nr, ranges, &m, &total, &mass) != 0) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    int want = draw_seqs(self, ranges, m, total, mass, k, from, seqs);
    n = 0;
    if (want == 0) goto done;
    /* the entries, read straight from their hashes (fetch) */
    for (int i = 0; i < want; i++) {
        snprintf(keys[i].m, sizeof keys[i].m, "%sn:%s:m", prefix, from[i]->d->node);
        snprintf(keys[i].e, sizeof keys[i].e, "%sn:%s:e", prefix, from[i]->d->node);
        gargv[2 * i] = keys[i].m, gargv[2 * i + 1] = keys[i].e;
    }
    if (fetch(self, want, gargv, seqs, g, err, errlen) != 0) {
        n = -1;
        goto done;
    }
    for (int i = 0; i < want; i++) {
        int got = drawn_entry(self, from[i], seqs[i], g[2 * i], g[2 * i + 1], g[2 * want + i], now, &e[n]);
        if (got < 0) break;
        n += got;
    }
done:
    if (n > 0) *out = e, e = NULL;
    free(e);
    for (int i = 0; g && i < 3 * k; i++)
        if (g[i]) freeReplyObject(g[i]);
    free(g);
    free(fr);
    free(ranges);
    free(gargv);
    free(keys);
    free(seqs);
    free(from);
    return n;
}

int pool_stage_ttl(pool_t *self, double seconds)
{
    if (!(seconds >= 0.001 && seconds <= 86400)) return -1;
    self->stage_ttl_ms = (long)(seconds * 1000 + 0.5);
    return 0;
}

void pool_stage_health(const pool_t *self, long *oversize, long *bad)
{
    *oversize = self->stage_oversize;
    *bad = self->stage_bad;
}

static int stage_ok(int stage, char *err, size_t errlen)
{
    if (stage >= 1 && stage <= POOL_STAGE_MAX) return 0;
    snprintf(err, errlen, "pool: stage %d is no stage of a round (1..%d)", stage, POOL_STAGE_MAX);
    return -1;
}

typedef char stage_key_t[256];

static void stage_key(const pool_t *self, stage_key_t key, const char *node, uint64_t round, int stage)
{
    snprintf(key, sizeof(stage_key_t), "%s:n:%s:stage:%llu:%d", self->swarm, node, (unsigned long long)round, stage);
}

/* SET with the expiry, so that a key never outlives it, then SADD, in one
 * round trip (a node's ACL user has no MULTI: a node left in S:nodes by a
 * failed SET only costs readers a key that is not there) */
int pool_stage_publish(pool_t *self, const char *node, uint64_t round, int stage, const void *rec, size_t len,
                       char *err, size_t errlen)
{
    if (pool_node_ok(node, err, errlen) < 0 || stage_ok(stage, err, errlen) < 0) return -1;
    if (len == 0 || len > self->max_bytes) {
        snprintf(err, errlen, "pool: a stage output of %zu bytes: it must be 1 byte to the record limit, %zu", len,
                 self->max_bytes);
        return -1;
    }
    if (!self->c && connect_now(self, err, errlen) != 0) return -1;
    stage_key_t key;
    char nodes[160], ttl[32];
    stage_key(self, key, node, round, stage);
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(ttl, sizeof ttl, "%ld", self->stage_ttl_ms);
    const char *set[] = {"SET", key, rec, "PX", ttl}, *add[] = {"SADD", nodes, node};
    size_t setl[] = {3, strlen(key), len, 2, strlen(ttl)}, addl[] = {4, strlen(nodes), strlen(node)};
    redisReply *g[2] = {NULL, NULL};
    if (redisAppendCommandArgv(self->c, 5, set, setl) != REDIS_OK ||
        redisAppendCommandArgv(self->c, 3, add, addl) != REDIS_OK) {
        snprintf(err, errlen, "out of memory");
        disconnect(self); /* a command half appended would garble the next */
        return -1;
    }
    if (pipeline_replies(self, 2, g, err, errlen) != 0) {
        freeReplyObject(g[0]);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (g[i]->type != REDIS_REPLY_ERROR) continue;
        snprintf(err, errlen, "redis %s:%d: %s %s: %s", self->host, self->port, i ? "SADD" : "SET", i ? nodes : key,
                 g[i]->str);
        rc = -1;
    }
    freeReplyObject(g[0]);
    freeReplyObject(g[1]);
    return rc;
}

/* the nodes of S:nodes a stage read asks, but exclude, sorted (so that a
 * seeded pool shuffles them alike), into names (pointing into *set, which
 * the caller frees): how many, or -1 with err */
static long stage_nodes(pool_t *self, const char *exclude, long cand, redisReply **set, const redisReply ***names,
                        char *err, size_t errlen)
{
    *set = NULL, *names = NULL;
    if (!self->c && connect_now(self, err, errlen) != 0) return -1;
    if (redisAppendCommand(self->c, "SRANDMEMBER %s:nodes %ld", self->swarm, cand) != REDIS_OK) {
        snprintf(err, errlen, "out of memory");
        disconnect(self);
        return -1;
    }
    if (pipeline_replies(self, 1, set, err, errlen) != 0) return -1;
    const redisReply *s = *set;
    if (s->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "redis: SRANDMEMBER %s:nodes answered type %d%s%s", self->swarm, s->type,
                 s->type == REDIS_REPLY_ERROR ? ": " : "", s->type == REDIS_REPLY_ERROR ? s->str : "");
        return -1;
    }
    if (!(*names = calloc(s->elements + 1, sizeof **names))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    long n = 0;
    for (size_t i = 0; i < s->elements; i++)
        if (other_node(s->element[i], exclude)) (*names)[n++] = s->element[i];
    qsort(*names, (size_t)n, sizeof **names, name_order);
    return n;
}

/* Which of the nn keys hold an output a read may take, by their lengths
 * (one pipelined STRLEN each), into pick[]; those over the record limit
 * or of another type are counted. How many, or -1 with err. */
static long stage_lengths(pool_t *self, stage_key_t *keys, long nn, long *pick, char *err, size_t errlen)
{
    redisReply **g = calloc((size_t)nn, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    long np = -1;
    for (long i = 0; i < nn; i++) {
        if (redisAppendCommand(self->c, "STRLEN %s", keys[i]) != REDIS_OK) {
            snprintf(err, errlen, "out of memory");
            disconnect(self);
            goto done;
        }
    }
    if (pipeline_replies(self, (int)nn, g, err, errlen) != 0) goto done;
    np = 0;
    for (long i = 0; i < nn; i++) {
        if (g[i]->type == REDIS_REPLY_ERROR && strncmp(g[i]->str, "WRONGTYPE", 9) != 0) {
            /* NOPERM (an ACL file without STRLEN) or worse: every key would fail alike */
            snprintf(err, errlen, "redis %s:%d: STRLEN %s: %s", self->host, self->port, keys[i], g[i]->str);
            np = -1;
            break;
        }
        if (g[i]->type != REDIS_REPLY_INTEGER) self->stage_bad++; /* a key the node made no string */
        else if ((unsigned long long)g[i]->integer > self->max_bytes) self->stage_oversize++;
        else if (g[i]->integer > 0) pick[np++] = i;
    }
done:
    for (long i = 0; i < nn; i++) freeReplyObject(g[i]);
    free(g);
    return np;
}

/* The first take of pick[0, np) become a uniform random choice of take
 * (the first steps of a shuffle). */
static void pick_at_random(pool_t *self, long *pick, long np, long take)
{
    for (long j = 0; j < take; j++) {
        long r = j + (long)(uniform(self) * (double)(np - j));
        if (r >= np) r = np - 1;
        long t = pick[j];
        pick[j] = pick[r], pick[r] = t;
    }
}

/* The values of the take keys picked, by one MGET, into e[] as aligned
 * copies named for their nodes: how many (a key expired or grown over the
 * limit since its length was read is left out), or -1 with err. */
static int stage_fetch(pool_t *self, stage_key_t *keys, const redisReply **names, const long *pick, long take,
                       pool_entry_t *e, char *err, size_t errlen)
{
    const char **argv = calloc((size_t)take + 1, sizeof *argv);
    size_t *lens = calloc((size_t)take + 1, sizeof *lens);
    redisReply *got = NULL;
    int n = -1;
    if (!argv || !lens) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    argv[0] = "MGET", lens[0] = 4;
    for (long j = 0; j < take; j++) argv[1 + j] = keys[pick[j]], lens[1 + j] = strlen(keys[pick[j]]);
    if (!(got = run(self, (int)take + 1, argv, lens, err, errlen))) goto done;
    if (got->type != REDIS_REPLY_ARRAY || got->elements != (size_t)take) {
        snprintf(err, errlen, "redis: MGET answered type %d, not %ld values", got->type, take);
        goto done;
    }
    n = 0;
    for (long j = 0; j < take; j++) {
        const redisReply *x = got->element[j];
        /* nil: expired (or made another type) since its length was read */
        if (x->type != REDIS_REPLY_STRING || x->len == 0) continue;
        if (x->len > self->max_bytes) { /* grown since its length was read */
            self->stage_oversize++;
            continue;
        }
        if (posix_memalign(&e[n].data, 16, x->len) != 0) break;
        memcpy(e[n].data, x->str, x->len);
        e[n].len = x->len;
        snprintf(e[n].node, sizeof e[n].node, "%s", names[pick[j]]->str);
        n++;
    }
done:
    freeReplyObject(got);
    free(argv), free(lens);
    return n;
}

int pool_stage_read(pool_t *self, const char *exclude_node, uint64_t round, int stage, int max, pool_entry_t **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    if ((exclude_node && pool_node_ok(exclude_node, err, errlen) < 0) || stage_ok(stage, err, errlen) < 0) return -1;
    if (max <= 0) return 0;
    /* the swarm whole up to POOL_CANDIDATES nodes (or 8 max), else that
     * many at random, and one more for the excluded node */
    long cand = 8L * max > POOL_CANDIDATES ? 8L * max : POOL_CANDIDATES;
    if (cand > STAGE_CANDIDATES_MAX) cand = STAGE_CANDIDATES_MAX;
    redisReply *set = NULL;
    const redisReply **names = NULL;
    stage_key_t *keys = NULL;
    long *pick = NULL;
    pool_entry_t *e = NULL;
    int n = -1;
    long nn = stage_nodes(self, exclude_node ? exclude_node : "", cand + 1, &set, &names, err, errlen);
    self->stage_asked = nn > 0 ? nn : 0;
    if (nn <= 0) {
        n = nn < 0 ? -1 : 0;
        goto done;
    }
    keys = calloc((size_t)nn, sizeof *keys);
    pick = calloc((size_t)nn, sizeof *pick);
    e = calloc((size_t)nn, sizeof *e);
    if (!keys || !pick || !e) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (long i = 0; i < nn; i++) stage_key(self, keys[i], names[i]->str, round, stage);
    long np = stage_lengths(self, keys, nn, pick, err, errlen);
    if (np < 0) goto done;
    long take = np < max ? np : max;
    pick_at_random(self, pick, np, take);
    n = take ? stage_fetch(self, keys, names, pick, take, e, err, errlen) : 0;
done:
    if (n > 0) *out = e, e = NULL;
    free(e);
    freeReplyObject(set);
    free(names), free(keys), free(pick);
    return n;
}

long pool_stage_asked(const pool_t *self) { return self->stage_asked; }

void pool_entries_free(pool_entry_t *e, int n)
{
    for (int i = 0; e && i < n; i++) free(e[i].data);
    free(e);
}

static void remember_key(pool_t *self, const char *node, const uint8_t pub[32])
{
    if (!self->keys && !(self->keys = calloc(KEYS_MAX, sizeof *self->keys))) return;
    if (self->n_keys == KEYS_MAX) return;
    snprintf(self->keys[self->n_keys].node, sizeof self->keys[0].node, "%s", node);
    memcpy(self->keys[self->n_keys++].pub, pub, 32);
}

static const uint8_t *known_key(const pool_t *self, const char *node)
{
    for (int i = 0; i < self->n_keys; i++)
        if (strcmp(self->keys[i].node, node) == 0) return self->keys[i].pub;
    return NULL;
}

int pool_register_key(pool_t *self, const char *node, const uint8_t pub[32], char *err, size_t errlen)
{
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    char key[256], hex[65];
    snprintf(key, sizeof key, "%s:n:%s:key", self->swarm, node);
    identity_public_hex(pub, hex, sizeof hex);
    const char *argv[] = {"FCALL", "sapo_register", "1", key, hex};
    size_t lens[] = {5, 13, 1, strlen(key), strlen(hex)};
    redisReply *r = run(self, 5, argv, lens, err, errlen);
    if (!r) return -1;
    uint8_t held[32];
    int parsed = r->type == REDIS_REPLY_STRING && identity_public_parse(r->str, r->len, held) == 0;
    freeReplyObject(r);
    if (parsed && memcmp(held, pub, 32) == 0) {
        if (!known_key(self, node)) remember_key(self, node, pub);
        return 0;
    }
    char fp[IDENTITY_FINGERPRINT_HEX + 1] = "not a key";
    if (parsed) identity_fingerprint(held, fp, sizeof fp);
    snprintf(err, errlen, "node id %s is registered to another key (fingerprint %s) at %s in redis %s:%d", node, fp,
             key, self->host, self->port);
    return -2;
}

int pool_node_key(pool_t *self, const char *node, uint8_t pub[32], char *err, size_t errlen)
{
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    const uint8_t *known = known_key(self, node);
    if (known) {
        memcpy(pub, known, 32);
        return 1;
    }
    char key[256];
    snprintf(key, sizeof key, "%s:n:%s:key", self->swarm, node);
    const char *argv[] = {"GET", key};
    size_t lens[] = {3, strlen(key)};
    redisReply *r = run(self, 2, argv, lens, err, errlen);
    if (!r) return -1;
    int found = r->type == REDIS_REPLY_STRING && identity_public_parse(r->str, r->len, pub) == 0;
    freeReplyObject(r);
    if (found) remember_key(self, node, pub);
    return found;
}

static long size_call(pool_t *self, const char *node)
{
    char err[256];
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s:", self->swarm);
    const char *argv[] = {"FCALL_RO", "sapo_size", "1", prefix, node};
    size_t lens[] = {8, 9, 1, strlen(prefix), node ? strlen(node) : 0};
    redisReply *r = run(self, node ? 5 : 4, argv, lens, err, sizeof err);
    if (!r) return -1;
    long n = r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
    freeReplyObject(r);
    return n;
}

long pool_size_total(pool_t *self) { return size_call(self, NULL); }
long pool_size_node(pool_t *self, const char *node) { return size_call(self, node); }
