/* Which of the other nodes' entries a draw may take: each node's fresh
 * range (pool_window), read from the summary its publishes keep (a GET
 * for every node a draw reads, pipelined: one round trip per Redis node,
 * parsed here so that the server's single thread spends nothing on it)
 * and, for a node without one, from sapo_range (pool.lua), which reads
 * its counters and entries' meta. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static int summary_fresh(const redisReply *s, int rounds, long ms, long long now, pool_fresh_t *f)
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
    return strcmp(((const pool_fresh_t *)a)->node, ((const pool_fresh_t *)b)->node);
}

/* the ranges sapo_range (pool.lua) answers for the nodes named in
 * names[0..n), one call each on the keys it reads (a node's keys share
 * its slot on a cluster), one round trip per Redis node, appended to f;
 * the count of
 * nodes skipped for bad keys, or -1 with err */
static long lua_ranges(pool_t *self, const redisReply **names, size_t n, pool_fresh_t *f, size_t *nf, char *err,
                       size_t errlen)
{
    char cap[32], wr[32], wms[32], hi[POOL_KEY_MAX], lo[POOL_KEY_MAX], meta[POOL_KEY_MAX];
    snprintf(cap, sizeof cap, "%d", self->max_per_node);
    snprintf(wr, sizeof wr, "%d", self->window_rounds);
    snprintf(wms, sizeof wms, "%ld", self->window_ms);
    redisReply **g = calloc(n + 1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        pool_key(self, names[i]->str, "hi", hi);
        pool_key(self, names[i]->str, "lo", lo);
        pool_key(self, names[i]->str, "m", meta);
        const char *argv[] = {"FCALL_RO", "sapo_range", "3", hi, lo, meta, cap, wr, wms};
        if (pool_append(self, hi, 9, argv, NULL) != 0) {
            route_discard(self->route);
            snprintf(err, errlen, "out of memory");
            free(g);
            return -1;
        }
    }
    long bad = -1;
    if (pool_replies_each(self, (int)n, g, err, errlen) < 0) goto done;
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *r = g[i];
        if (!r) continue; /* its master down or slow: the others' are drawn from */
        if (r->type == REDIS_REPLY_ERROR) {
            pool_error_reply(self, "sapo_range", r, err, errlen);
            bad = -1;
            goto done;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->type != REDIS_REPLY_INTEGER) continue;
        bad += r->element[0]->integer != 0;
        redisReply *const *e = r->element;
        if (r->elements != 4 || e[1]->type != REDIS_REPLY_INTEGER || e[2]->type != REDIS_REPLY_INTEGER ||
            e[3]->type != REDIS_REPLY_INTEGER || e[1]->integer < 1 || e[2]->integer < 1)
            continue;
        pool_fresh_t *o = &f[(*nf)++];
        snprintf(o->node, sizeof o->node, "%s", names[i]->str);
        o->first = (uint64_t)e[1]->integer, o->hi = (uint64_t)e[2]->integer;
        o->newest = e[3]->integer > 0 ? (uint64_t)e[3]->integer : 0;
    }
done:
    for (size_t i = 0; i < n; i++) freeReplyObject(g[i]);
    free(g);
    return bad;
}

/* the summaries of the nodes named into s[0..nn): on one Redis one MGET
 * (33 GETs cost its thread and this client about 0.1 ms more a draw at
 * 1,000 nodes); on a cluster, where the keys lie in as many slots, a GET
 * each, one round trip per master; 0, or -1 with err */
static int summaries(pool_t *self, const redisReply **names, size_t nn, redisReply **s, char *err, size_t errlen)
{
    char key[POOL_KEY_MAX];
    if (!route_is_cluster(self->route)) {
        const char **argv = calloc(nn + 1, sizeof *argv);
        char(*keys)[POOL_KEY_MAX] = calloc(nn, sizeof *keys);
        redisReply *r = NULL;
        if (!argv || !keys) snprintf(err, errlen, "out of memory");
        else {
            argv[0] = "MGET";
            for (size_t i = 0; i < nn; i++) pool_key(self, names[i]->str, "s", keys[i]), argv[1 + i] = keys[i];
            r = pool_run(self, keys[0], (int)(1 + nn), argv, NULL, err, errlen);
        }
        free(argv), free(keys);
        if (!r) return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != nn) {
            snprintf(err, errlen, "redis: MGET answered type %d, not %zu values", r->type, nn);
            freeReplyObject(r);
            return -1;
        }
        for (size_t i = 0; i < nn; i++) s[i] = r->element[i], r->element[i] = NULL; /* the caller's now */
        freeReplyObject(r);
        return 0;
    }
    for (size_t i = 0; i < nn; i++) {
        pool_key(self, names[i]->str, "s", key);
        const char *argv[] = {"GET", key};
        if (pool_append(self, key, 2, argv, NULL) != 0) {
            route_discard(self->route);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    /* a master down or slow: its nodes' summaries NULL, the others' read */
    return pool_replies_each(self, (int)nn, s, err, errlen) < 0 ? -1 : 0;
}

/* each range cut to the per-node bound (the newest cap entries), the empty
 * ones dropped, the rest sorted by node: how many are left */
static size_t bound_ranges(pool_fresh_t *f, size_t nf, uint64_t cap)
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
 * with one MGET (a GET each on a cluster) and is read here (in Lua, 32 of them took 325 us of the
 * server's single thread); a node without one (an older sapo's, or junk)
 * is left to sapo_fresh, which reads its counters and entries' meta. */
/* the server's clock in ms from a TIME reply; the local one where that
 * master did not answer (a cluster's nodes and the swarm's machines keep
 * one time) */
static long long clock_ms(const redisReply *t)
{
    if (t && t->type == REDIS_REPLY_ARRAY && t->elements == 2 && t->element[0]->type == REDIS_REPLY_STRING &&
        t->element[1]->type == REDIS_REPLY_STRING)
        return atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long pool_fresh_ranges(pool_t *self, const char *exclude, int cand, pool_fresh_t **out, long long *now, char *err,
                       size_t errlen)
{
    *out = NULL;
    char nodes[160], count[32];
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(count, sizeof count, "%d", cand + 1);
    /* the clock of the node set's Redis: the entries' times are each
     * their own node's, and a cluster's nodes keep one time */
    const char *time_argv[] = {"TIME"}, *rand_argv[] = {"SRANDMEMBER", nodes, count};
    redisReply *g[2] = {NULL, NULL}, **sums = NULL;
    if (pool_append(self, nodes, 1, time_argv, NULL) != 0 || pool_append(self, nodes, 3, rand_argv, NULL) != 0) {
        route_discard(self->route);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    long n = -1;
    const redisReply **names = NULL;
    size_t nn = 0, nl = 0, nf = 0;
    pool_fresh_t *f = NULL;
    pool_replies_each(self, 2, g, err, errlen); /* a command that failed: NULL, the reason in err */
    if (g[1] && g[1]->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "redis: SRANDMEMBER %s answered type %d%s%s", nodes, g[1]->type,
                 g[1]->type == REDIS_REPLY_ERROR ? ": " : "", g[1]->type == REDIS_REPLY_ERROR ? g[1]->str : "");
        goto done;
    }
    /* the set read is kept: where its master is down or slow (a cluster),
     * the set as last read, so that the nodes on the other masters are
     * still drawn from */
    if (g[1]) {
        freeReplyObject(self->node_set);
        self->node_set = g[1], g[1] = NULL;
    } else if (!route_is_cluster(self->route) || !self->node_set) {
        goto done;
    }
    const redisReply *set = self->node_set;
    *now = clock_ms(g[0]);
    names = calloc(set->elements + 1, sizeof *names);
    f = calloc(set->elements + 1, sizeof *f);
    sums = calloc(set->elements + 1, sizeof *sums);
    if (!names || !f || !sums) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < set->elements; i++)
        if (pool_other_node(set->element[i], exclude)) names[nn++] = set->element[i];
    qsort(names, nn, sizeof *names, pool_by_name);
    if (nn > 0 && summaries(self, names, nn, sums, err, errlen) != 0) goto done;
    /* the nodes without a summary go to Lua, in names[0..nl); those whose
     * master did not answer are left out of this draw */
    for (size_t i = 0; i < nn; i++) {
        if (!sums[i]) continue;
        if (summary_fresh(sums[i], self->window_rounds, self->window_ms, *now, &f[nf])) {
            snprintf(f[nf].node, sizeof f[nf].node, "%s", names[i]->str);
            nf++;
        } else {
            names[nl++] = names[i];
        }
    }
    long bad = 0;
    if (nl > 0 && (bad = lua_ranges(self, names, nl, f, &nf, err, errlen)) < 0) goto done;
    self->bad_nodes = bad;
    n = (long)bound_ranges(f, nf, (uint64_t)self->max_per_node);
    *out = f, f = NULL;
done:
    for (size_t i = 0; sums && i < nn; i++) freeReplyObject(sums[i]);
    for (int i = 0; i < 2; i++) freeReplyObject(g[i]);
    free(names), free(f), free(sums);
    return n;
}
