/* pool_sample: k draws with replacement, uniform over every other node's
 * live entries, in one call of sapo_sample (pool.lua). Nodes draw with
 * pool_draw (fresh entries, never one twice); this is for a person
 * looking at a pool with bin/pool sample, whose draws may repeat an
 * entry, so that a pool of one entry still answers --count 2. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef char draw_text_t[32]; /* a uniform draw as %.17g text */

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
        snprintf(u[i], sizeof u[i], "%.17g", pool_uniform(self));
        argv[head + i] = u[i];
    }
    for (int i = 0; i < k + head; i++) lens[i] = strlen(argv[i]);
    redisReply *r = pool_run(self, k + head, argv, lens, err, errlen);
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
