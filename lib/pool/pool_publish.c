/* Publishing: a node adds its shareable groups to its own entries in one
 * call of sapo_publish (pool.lua), which keeps the node's range, bound,
 * window and summary in step on the server, atomically, so that readers
 * never see half a publish. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    redisReply *r = pool_run(self, n + head, argv, alen, err, errlen);
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
