/* How many entries the pool holds: a node's from its counters, the
 * swarm's summed over its node set, one round trip per Redis node. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* entries a node holds: hi - lo + 1 of its counters, 0 where they are
 * not sane integers (pool.lua's range) */
static long node_size(const redisReply *hi, const redisReply *lo)
{
    if (!hi || !lo) return -1;
    /* a counter of another type (WRONGTYPE) is no sane integer */
    if (hi->type == REDIS_REPLY_ERROR || lo->type == REDIS_REPLY_ERROR) return 0;
    char *end;
    long long h = hi->type == REDIS_REPLY_STRING ? strtoll(hi->str, &end, 10) : 0;
    if (hi->type == REDIS_REPLY_STRING && (*end || end == hi->str)) return 0;
    long long l = lo->type == REDIS_REPLY_STRING ? strtoll(lo->str, &end, 10) : 1;
    if (lo->type == REDIS_REPLY_STRING && (*end || end == lo->str)) return 0;
    if (l < 1 || h > (1ll << 52)) return 0;
    return h >= l ? (long)(h - l + 1) : 0;
}

/* the entries of the n nodes named: one round trip per Redis node
 * holding them */
static long nodes_size(pool_t *self, const char *const *names, size_t n, char *err, size_t errlen)
{
    char key[POOL_KEY_MAX];
    redisReply **g = calloc(2 * n + 1, sizeof *g);
    if (!g) return -1;
    long total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *hi[] = {"GET", key}, *lo[] = {"GET", key};
        pool_key(self, names[i], "hi", key);
        pool_append(self, key, 2, hi, NULL);
        pool_key(self, names[i], "lo", key);
        pool_append(self, key, 2, lo, NULL);
    }
    if (pool_replies(self, (int)(2 * n), g, err, errlen) != 0) total = -1;
    for (size_t i = 0; i < n && total >= 0; i++) {
        long k = node_size(g[2 * i], g[2 * i + 1]);
        total = k < 0 ? -1 : total + k;
    }
    for (size_t i = 0; i < 2 * n; i++) freeReplyObject(g[i]);
    free(g);
    return total;
}

long pool_size_total(pool_t *self, char *err, size_t errlen)
{
    pool_begin(self);
    char own[256], nodes[160];
    if (!err) err = own, errlen = sizeof own;
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    const char *argv[] = {"SMEMBERS", nodes};
    redisReply *r = pool_run(self, nodes, 2, argv, NULL, err, errlen);
    if (!r) return -1;
    long total = -1;
    const char **names = r->type == REDIS_REPLY_ARRAY ? calloc(r->elements + 1, sizeof *names) : NULL;
    if (names) {
        size_t n = 0;
        for (size_t i = 0; i < r->elements; i++)
            if (pool_other_node(r->element[i], "")) names[n++] = r->element[i]->str;
        total = nodes_size(self, names, n, err, errlen);
    }
    free(names);
    freeReplyObject(r);
    return total;
}

long pool_size_node(pool_t *self, const char *node, char *err, size_t errlen)
{
    pool_begin(self);
    char own[256];
    if (!err) err = own, errlen = sizeof own;
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    return nodes_size(self, &node, 1, err, errlen);
}
