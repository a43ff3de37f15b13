/* The pool's connection to Redis, and the pool_t every other file of
 * lib/pool works through: the URL, the swarm prefix and the settings a
 * node chooses, one hiredis context made on first use and made again
 * after a failure with backoff (so an unreachable Redis costs a node one
 * quick error per call, never a hang), and the Redis Functions library
 * (pool.lua) that each connect loads. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/splitmix.h"

/* no entry larger than records.h's REC_MAX_BYTES and a 64-byte signature
 * (util/identity.h) enters the pool */
#define ENTRY_MAX_BYTES 16777280 /* pool.lua's sapo_publish refuses larger ones */
/* pool_stage_ttl's default, in ms: see pool.h */
#define STAGE_TTL_MS 600000

/* Redis Functions library (lib/pool/pool.lua, embedded by the build),
 * loaded (REPLACE) on every connect so a newer sapo upgrades a running
 * Redis. */
static const char POOL_LIBRARY[] =
#include "pool_lua.inc"
    ;

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

void pool_disconnect(pool_t *p)
{
    if (p->c) redisFree(p->c);
    p->c = NULL;
}

void pool_destroy(pool_t **self_p)
{
    if (!self_p || !*self_p) return;
    pool_disconnect(*self_p);
    for (int i = 0; i < (*self_p)->n_peers; i++) free((*self_p)->peers[i].seq);
    free((*self_p)->peers);
    free((*self_p)->slot);
    free((*self_p)->keys);
    free(*self_p);
    *self_p = NULL;
}

void pool_seed(pool_t *self, uint64_t seed) { self->rng = seed ? seed : 1; }

void pool_window(pool_t *self, int rounds, double seconds)
{
    self->window_rounds = rounds > 0 ? rounds : 0;
    self->window_ms = seconds > 0 ? (long)(seconds * 1000 + 0.5) : 0;
}

void pool_limit_record(pool_t *self, size_t max_bytes) { self->max_bytes = max_bytes; }

/* a double in [0, 1) */
double pool_uniform(pool_t *p) { return (double)(splitmix64(&p->rng) >> 11) * 0x1.0p-53; }

int pool_connect(pool_t *p, char *err, size_t errlen)
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
    pool_disconnect(p);
    p->backoff_s = p->backoff_s ? (p->backoff_s * 2 > 30 ? 30 : p->backoff_s * 2) : 1;
    p->retry_at = now + p->backoff_s;
    return -1;
}

/* a reply, or NULL with err; a broken connection is dropped for a retry */
redisReply *pool_run(pool_t *p, int argc, const char **argv, const size_t *lens, char *err, size_t errlen)
{
    if (!p->c && pool_connect(p, err, errlen) != 0) return NULL;
    redisReply *r = redisCommandArgv(p->c, argc, argv, lens);
    if (!r) {
        snprintf(err, errlen, "redis %s:%d: %s", p->host, p->port, p->c->errstr);
        pool_disconnect(p);
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

/* one pipelined round trip: the n commands appended to p->c, their n
 * replies into out[] (an error reply among them is the caller's to read:
 * a key a hostile node made the wrong type is one entry missing, not a
 * failed draw); 0, or -1 with err when the connection broke (it is then
 * dropped: replies not read would answer the next command) */
int pool_replies(pool_t *p, int n, redisReply **out, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(p->c, &r) != REDIS_OK || !r) {
            snprintf(err, errlen, "redis %s:%d: %s", p->host, p->port, p->c->errstr[0] ? p->c->errstr : "no reply");
            pool_disconnect(p);
            p->retry_at = 0;
            return -1;
        }
        out[i] = r;
    }
    return 0;
}

static long size_call(pool_t *self, const char *node)
{
    char err[256];
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s:", self->swarm);
    const char *argv[] = {"FCALL_RO", "sapo_size", "1", prefix, node};
    size_t lens[] = {8, 9, 1, strlen(prefix), node ? strlen(node) : 0};
    redisReply *r = pool_run(self, node ? 5 : 4, argv, lens, err, sizeof err);
    if (!r) return -1;
    long n = r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
    freeReplyObject(r);
    return n;
}

long pool_size_total(pool_t *self) { return size_call(self, NULL); }
long pool_size_node(pool_t *self, const char *node) { return size_call(self, node); }

void pool_entries_free(pool_entry_t *e, int n)
{
    for (int i = 0; e && i < n; i++) free(e[i].data);
    free(e);
}
