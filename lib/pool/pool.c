#include "pool/pool.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/identity.h"

/* no entry larger than records.h's REC_MAX_BYTES and a 64-byte signature
 * (node/identity.h) enters the pool */
#define ENTRY_MAX_BYTES 16777280
#define ENTRY_MAX_BYTES_STR "16777280"
/* nodes whose keys a pool remembers (trust on first use) */
#define KEYS_MAX 4096

/* Redis Functions library, loaded (REPLACE) on every connect so a newer
 * sapo upgrades a running Redis. */
static const char POOL_LIBRARY[] =
    "#!lua name=sapo_pool\n"
    /* Any node can write its own counters with plain commands when its ACL
     * user allows them, so every number read back is checked: a node whose
     * range is not two sane integers is skipped, and its live count weighs
     * at most the sampler's per-node bound. */
    "local function range(base)\n"
    "  local hi = tonumber(redis.call('GET', base .. ':hi') or '0')\n"
    "  local lo = tonumber(redis.call('GET', base .. ':lo') or '1')\n"
    "  if not hi or not lo or hi ~= math.floor(hi) or lo ~= math.floor(lo) or lo < 1 or hi > 2^52 then\n"
    "    return 1, 0\n"
    "  end\n"
    "  return lo, hi\n"
    "end\n"
    "redis.register_function('sapo_publish', function(keys, args)\n"
    /* S:max_per_node, when an operator set it, bounds every node whatever
     * bound the node sends */
    "  local base, maxlen = string.sub(keys[1], 1, -2), tonumber(args[2])\n"
    "  local swarm_max = tonumber(redis.call('GET', args[3]) or '')\n"
    "  if swarm_max and (not maxlen or maxlen > swarm_max) then maxlen = swarm_max end\n"
    "  if not maxlen or maxlen < 1 then return redis.error_reply('sapo_publish: bound must be a positive number') end\n"
    "  for i = 4, #args do\n"
    "    if #args[i] > " ENTRY_MAX_BYTES_STR " then return redis.error_reply('sapo_publish: record over " ENTRY_MAX_BYTES_STR " bytes') end\n"
    "  end\n"
    "  local lo, hi = range(base)\n"
    "  for i = 4, #args do\n"
    "    hi = hi + 1\n"
    "    redis.call('HSET', base .. ':e', hi, args[i])\n"
    "  end\n"
    "  redis.call('SET', base .. ':hi', hi)\n"
    "  while hi - lo + 1 > maxlen do\n"
    "    redis.call('HDEL', base .. ':e', lo)\n"
    "    lo = lo + 1\n"
    "  end\n"
    "  redis.call('SET', base .. ':lo', lo)\n"
    "  redis.call('SADD', keys[2], args[1])\n"
    "  return hi - lo + 1\n"
    "end)\n"
    "local function live(prefix, exclude, cap)\n"
    "  local nodes = redis.call('SMEMBERS', prefix .. ':nodes')\n"
    "  table.sort(nodes)\n"
    "  local list, total = {}, 0\n"
    "  for _, n in ipairs(nodes) do\n"
    "    if n ~= exclude then\n"
    "      local base = prefix .. ':n:' .. n\n"
    "      local lo, hi = range(base)\n"
    "      if hi >= lo then\n"
    "        local count = math.min(hi - lo + 1, cap)\n"
    "        table.insert(list, {base, hi - count + 1, count, n})\n"
    "        total = total + count\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  return list, total\n"
    "end\n"
    /* each draw is answered by the node it is stored under, then the
     * entry; one over max_bytes by its length, so the client counts it
     * without receiving it */
    "redis.register_function{function_name = 'sapo_sample', flags = {'no-writes'}, callback = function(keys, args)\n"
    "  local cap, max_bytes = tonumber(args[2]) or 1, tonumber(args[3]) or 0\n"
    "  local list, total = live(string.sub(keys[1], 1, -2), args[1], cap)\n"
    "  local out = {}\n"
    "  if total == 0 then return out end\n"
    "  for i = 4, #args do\n"
    "    local r = math.floor((tonumber(args[i]) or 0) * total)\n"
    "    if r >= total then r = total - 1 end\n"
    "    for _, e in ipairs(list) do\n"
    "      if r < e[3] then\n"
    "        local n = redis.call('HSTRLEN', e[1] .. ':e', e[2] + r)\n"
    "        if n > max_bytes then\n"
    "          table.insert(out, e[4])\n"
    "          table.insert(out, n)\n"
    "        elseif n > 0 then\n"
    "          table.insert(out, e[4])\n"
    "          table.insert(out, redis.call('HGET', e[1] .. ':e', e[2] + r))\n"
    "        end\n"
    "        break\n"
    "      end\n"
    "      r = r - e[3]\n"
    "    end\n"
    "  end\n"
    "  return out\n"
    "end}\n"
    /* first come: a key once set is never replaced here, and the caller
     * learns which key holds the id */
    "redis.register_function('sapo_register', function(keys, args)\n"
    "  if #args[1] ~= 64 or not string.match(args[1], '^[0-9a-f]+$') then\n"
    "    return redis.error_reply('sapo_register: public key must be 64 lowercase hex digits')\n"
    "  end\n"
    "  redis.call('SET', keys[1], args[1], 'NX')\n"
    "  return redis.call('GET', keys[1])\n"
    "end)\n"
    "redis.register_function{function_name = 'sapo_size', flags = {'no-writes'}, callback = function(keys, args)\n"
    "  if args[1] then\n"
    "    local lo, hi = range(keys[1] .. 'n:' .. args[1])\n"
    "    return math.max(hi - lo + 1, 0)\n"
    "  end\n"
    "  local _, total = live(string.sub(keys[1], 1, -2), '', 2^52)\n"
    "  return total\n"
    "end}\n";

struct pool {
    char host[256];
    int port;
    int db;
    char user[128];
    char password[256];
    char swarm[128];
    int max_per_node;
    size_t max_bytes;  /* larger entries are not fetched by pool_sample */
    redisContext *c;
    struct { char node[64]; uint8_t pub[32]; } *keys; /* first key seen per node */
    int n_keys;
    time_t retry_at;   /* no connection attempt before this */
    int backoff_s;
    uint64_t rng;
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
    free((*self_p)->keys);
    free(*self_p);
    *self_p = NULL;
}

void pool_seed(pool_t *self, uint64_t seed) { self->rng = seed ? seed : 1; }

void pool_limit_record(pool_t *self, size_t max_bytes) { self->max_bytes = max_bytes; }

/* splitmix64 -> double in [0, 1) */
static double uniform(pool_t *p)
{
    uint64_t z = (p->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}


static int connect_now(pool_t *p, char *err, size_t errlen)
{
    time_t now = time(NULL);
    if (now < p->retry_at) {
        snprintf(err, errlen, "redis %s:%d unreachable; next try in %ld s", p->host, p->port, (long)(p->retry_at - now));
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
        r = p->user[0] ? redisCommand(p->c, "AUTH %s %s", p->user, p->password) : redisCommand(p->c, "AUTH %s", p->password);
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

int pool_publish_many(pool_t *self, const char *node, const void *const *recs, const size_t *lens, int n,
                      char *err, size_t errlen)
{
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    if (n <= 0) return 0;
    char base[512], nodes[256], bound[256], maxlen[32];
    snprintf(base, sizeof base, "%s:n:%s:", self->swarm, node);
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(bound, sizeof bound, "%s:max_per_node", self->swarm);
    snprintf(maxlen, sizeof maxlen, "%d", self->max_per_node);
    const char **argv = malloc(sizeof *argv * (size_t)(n + 8));
    size_t *alen = malloc(sizeof *alen * (size_t)(n + 8));
    if (!argv || !alen) {
        free(argv);
        free(alen);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *head[] = {"FCALL", "sapo_publish", "2", base, nodes, node, maxlen, bound};
    for (int i = 0; i < 8; i++) {
        argv[i] = head[i];
        alen[i] = strlen(head[i]);
    }
    for (int i = 0; i < n; i++) {
        argv[8 + i] = recs[i];
        alen[8 + i] = lens[i];
    }
    redisReply *r = run(self, n + 8, argv, alen, err, errlen);
    free(argv);
    free(alen);
    if (!r) return -1;
    freeReplyObject(r);
    return 0;
}

int pool_publish(pool_t *self, const char *node, const void *rec, size_t len, char *err, size_t errlen)
{
    return pool_publish_many(self, node, &rec, &len, 1, err, errlen);
}

int pool_sample(pool_t *self, const char *exclude_node, int k, pool_entry_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (k <= 0) return 0;
    const int head = 7;
    const char **argv = calloc((size_t)k + head, sizeof *argv);
    size_t *lens = calloc((size_t)k + head, sizeof *lens);
    char (*u)[32] = calloc((size_t)k, sizeof *u);
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
