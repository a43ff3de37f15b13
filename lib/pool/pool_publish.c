/* Publishing: a node adds its shareable groups to its own entries in one
 * call of sapo_publish_node (pool.lua), which keeps the node's range,
 * bound, window and summary in step on the server, atomically, so that
 * readers never see half a publish; and it adds itself to the node set
 * (on a cluster, in another slot). The call declares every key it
 * touches, the node's five (pool.lua): the operator's bound is read here
 * first (again when 5 s old) and passed as a value, since FCALL takes its
 * keys as keys the caller may write and a node may not write its bound. */
#include "pool/pool_impl.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the node's keys sapo_publish_node touches, in the order it takes them */
static const char *const PUBLISH_KEYS[] = {"hi", "lo", "e", "m", "s"};
#define N_PUBLISH_KEYS 5

/* how long the operator's bound, once read, stands for a node's
 * publishes: a bound changed takes effect within it, and a publish is one
 * round trip, not two (200 ms each on a link between continents) */
#define BOUND_READ_MS 5000

/* the operator's bound for node (pool.h) into out: "" when none is set
 * or the key holds no string (sapo_publish_node ignores what is no
 * positive integer), read again when older than BOUND_READ_MS; 0, or -1
 * with err */
static int operator_bound(pool_t *self, const char *node, char *out, size_t outlen, char *err, size_t errlen)
{
    long long now = clock_ms();
    if (self->bound_read_ms && now - self->bound_read_ms < BOUND_READ_MS && strcmp(self->bound_node, node) == 0) {
        snprintf(out, outlen, "%s", self->bound);
        return 0;
    }
    char bound[256];
    /* in the node's slot on a cluster */
    if (route_is_cluster(self->route)) snprintf(bound, sizeof bound, "%s:max_per_node:{%s}", self->swarm, node);
    else snprintf(bound, sizeof bound, "%s:max_per_node", self->swarm);
    const char *argv[] = {"GET", bound};
    redisReply *r = NULL;
    if (pool_append(self, bound, 2, argv, NULL) != 0) {
        route_discard(self->route);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (pool_replies(self, 1, &r, err, errlen) != 0) return -1;
    snprintf(out, outlen, "%s", r->type == REDIS_REPLY_STRING && r->len < outlen ? r->str : "");
    freeReplyObject(r);
    if (strlen(node) < sizeof self->bound_node && strlen(out) < sizeof self->bound) {
        snprintf(self->bound_node, sizeof self->bound_node, "%s", node);
        snprintf(self->bound, sizeof self->bound, "%s", out);
        self->bound_read_ms = now;
    }
    return 0;
}

int pool_publish_many(pool_t *self, const char *node, uint64_t round, const void *const *recs, const size_t *lens,
                      int n, char *err, size_t errlen)
{
    pool_begin(self);
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    if (n <= 0) return 0;
    char keys[N_PUBLISH_KEYS][POOL_KEY_MAX], nodes[256], bound[32], maxlen[32], wr[32], wms[32], rnd[32];
    if (operator_bound(self, node, bound, sizeof bound, err, errlen) != 0) return -1;
    for (int i = 0; i < N_PUBLISH_KEYS; i++) pool_key(self, node, PUBLISH_KEYS[i], keys[i]);
    snprintf(nodes, sizeof nodes, "%s:nodes", self->swarm);
    snprintf(maxlen, sizeof maxlen, "%d", self->max_per_node);
    snprintf(wr, sizeof wr, "%d", self->window_rounds);
    snprintf(wms, sizeof wms, "%ld", self->window_ms);
    snprintf(rnd, sizeof rnd, "%llu", (unsigned long long)round);
    const char *first[] = {
        "FCALL", "sapo_publish_node", "5", keys[0], keys[1], keys[2], keys[3], keys[4], bound, maxlen, wr, wms, rnd};
    const int head = (int)(sizeof first / sizeof *first);
    const char **argv = malloc(sizeof *argv * (size_t)(n + head));
    size_t *alen = malloc(sizeof *alen * (size_t)(n + head));
    if (!argv || !alen) {
        free(argv);
        free(alen);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < head; i++) {
        argv[i] = first[i];
        alen[i] = strlen(first[i]);
    }
    for (int i = 0; i < n; i++) {
        argv[head + i] = recs[i];
        alen[head + i] = lens[i];
    }
    /* the publish and the node's place in the node set, one round trip
     * per Redis node they go to */
    const char *add[] = {"SADD", nodes, node};
    redisReply *g[2] = {NULL, NULL};
    int rc = -1;
    if (pool_append(self, keys[0], n + head, argv, alen) != 0 || pool_append(self, nodes, 3, add, NULL) != 0) {
        snprintf(err, errlen, "out of memory");
        route_discard(self->route);
    } else if (pool_replies_each(self, 2, g, err, errlen) >= 0 && g[0]) {
        /* the node set's master down or slow (a cluster): the publish
         * stands, and the next one adds the node again */
        rc = 0;
        for (int i = 0; i < 2 && rc == 0; i++)
            if (g[i] && g[i]->type == REDIS_REPLY_ERROR) {
                pool_error_reply(self, i ? "SADD" : "sapo_publish_node", g[i], err, errlen);
                rc = -1;
            }
    }
    freeReplyObject(g[0]);
    freeReplyObject(g[1]);
    free(argv);
    free(alen);
    return rc;
}

int pool_publish(pool_t *self, const char *node, uint64_t round, const void *rec, size_t len, char *err, size_t errlen)
{
    return pool_publish_many(self, node, round, &rec, &len, 1, err, errlen);
}
