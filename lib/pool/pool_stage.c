/* The game's stage outputs (issue 21): after each stage of a round a node
 * shares one small record, and the others build their next prompt from
 * what they find. Each output is a plain key of its own under the node's
 * prefix, set with an expiry: per-node ACL users let no node write
 * another's, and nobody has to delete anything. A read asks a bounded
 * number of nodes, so it costs the same in a swarm of any size. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the most nodes a pool_stage_read asks for, whatever its max */
#define STAGE_CANDIDATES_MAX 65536

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

typedef char stage_key_t[POOL_KEY_MAX];

static void stage_key(const pool_t *self, stage_key_t key, const char *node, uint64_t round, int stage)
{
    char what[64];
    snprintf(what, sizeof what, "stage:%llu:%d", (unsigned long long)round, stage);
    pool_key(self, node, what, key);
}

/* SET with the expiry, so that a key never outlives it, then SADD, in one
 * round trip per Redis node (a node's ACL user has no MULTI: a node left
 * in S:nodes by a failed SET only costs readers a key that is not there) */
int pool_stage_publish(pool_t *self, const char *node, uint64_t round, int stage, const void *rec, size_t len,
                       char *err, size_t errlen)
{
    pool_begin(self);
    if (pool_node_ok(node, err, errlen) < 0 || stage_ok(stage, err, errlen) < 0) return -1;
    if (len == 0 || len > self->max_bytes) {
        snprintf(err, errlen, "pool: a stage output of %zu bytes: it must be 1 byte to the record limit, %zu", len,
                 self->max_bytes);
        return -1;
    }
    stage_key_t key;
    char nodes[160], ttl[32];
    stage_key(self, key, node, round, stage);
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(ttl, sizeof ttl, "%ld", self->stage_ttl_ms);
    const char *set[] = {"SET", key, rec, "PX", ttl}, *add[] = {"SADD", nodes, node};
    size_t setl[] = {3, strlen(key), len, 2, strlen(ttl)}, addl[] = {4, strlen(nodes), strlen(node)};
    redisReply *g[2] = {NULL, NULL};
    if (pool_append(self, key, 5, set, setl) != 0 || pool_append(self, nodes, 3, add, addl) != 0) {
        snprintf(err, errlen, "out of memory");
        route_discard(self->route);
        return -1;
    }
    if (pool_replies(self, 2, g, err, errlen) != 0) {
        freeReplyObject(g[0]);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        if (g[i]->type != REDIS_REPLY_ERROR) continue;
        snprintf(err, errlen, "redis %s: %s %s: %s", route_where(self->route), i ? "SADD" : "SET", i ? nodes : key,
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
    char nodes[160], count[32];
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(count, sizeof count, "%ld", cand);
    const char *argv[] = {"SRANDMEMBER", nodes, count};
    if (!(*set = pool_run(self, nodes, 3, argv, NULL, err, errlen))) return -1;
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
        if (pool_other_node(s->element[i], exclude)) (*names)[n++] = s->element[i];
    qsort(*names, (size_t)n, sizeof **names, pool_by_name);
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
        const char *argv[] = {"STRLEN", keys[i]};
        if (pool_append(self, keys[i], 2, argv, NULL) != 0) {
            snprintf(err, errlen, "out of memory");
            route_discard(self->route);
            goto done;
        }
    }
    if (pool_replies(self, (int)nn, g, err, errlen) != 0) goto done;
    np = 0;
    for (long i = 0; i < nn; i++) {
        if (g[i]->type == REDIS_REPLY_ERROR && strncmp(g[i]->str, "WRONGTYPE", 9) != 0) {
            /* NOPERM (an ACL file without STRLEN) or worse: every key would fail alike */
            snprintf(err, errlen, "redis %s: STRLEN %s: %s", route_where(self->route), keys[i], g[i]->str);
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
        long r = j + (long)(pool_uniform(self) * (double)(np - j));
        if (r >= np) r = np - 1;
        long t = pick[j];
        pick[j] = pick[r], pick[r] = t;
    }
}

/* The values of the take keys picked (a GET each, one round trip per
 * Redis node) into e[] as aligned copies named for their nodes: how many
 * (a key expired or grown over the limit since its length was read is
 * left out), or -1 with err. */
static int stage_fetch(pool_t *self, stage_key_t *keys, const redisReply **names, const long *pick, long take,
                       pool_entry_t *e, char *err, size_t errlen)
{
    redisReply **got = calloc((size_t)take + 1, sizeof *got);
    int n = -1;
    if (!got) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (long j = 0; j < take; j++) {
        const char *argv[] = {"GET", keys[pick[j]]};
        if (pool_append(self, keys[pick[j]], 2, argv, NULL) != 0) {
            snprintf(err, errlen, "out of memory");
            route_discard(self->route);
            goto done;
        }
    }
    if (pool_replies(self, (int)take, got, err, errlen) != 0) goto done;
    n = 0;
    for (long j = 0; j < take; j++) {
        const redisReply *x = got[j];
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
    for (long j = 0; j < take; j++) freeReplyObject(got[j]);
    free(got);
    return n;
}

int pool_stage_read(pool_t *self, const char *exclude_node, uint64_t round, int stage, int max, pool_entry_t **out,
                    char *err, size_t errlen)
{
    *out = NULL;
    pool_begin(self);
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
