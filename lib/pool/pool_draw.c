/* The draw a node makes (SampleExternal): up to k of the other nodes'
 * fresh entries (pool_fresh.c), without replacement and weighed by peer
 * (pool_peer.c), the uniform numbers drawn here so that a seeded pool is
 * reproducible, then the entries read straight from their hashes. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef char seq_text_t[24]; /* an entry's seq as a hash field */

typedef struct {
    char m[POOL_KEY_MAX], e[POOL_KEY_MAX]; /* a drawn entry's meta and entry hash keys */
} entry_keys_t;

/* Drawn entries, read straight from their hashes: two pipelined round
 * trips per Redis node (a Lua function would copy every entry into Lua
 * and back, 250 us for four at 1,000 nodes); the first reads each entry's meta and its
 * length, the second only the entries no larger than max-record, so a
 * planted huge one never travels.
 *
 * want drawn entries (keys[2i] their meta hash, keys[2i+1] their entry
 * hash, seqs[i] the field): g[2i] the meta, g[2i + 1] the entry's length,
 * g[2 want + i] the entry when 0 < length <= max-record, else NULL */
static int fetch(pool_t *p, int want, const char **keys, seq_text_t *seqs, redisReply **g, char *err, size_t errlen)
{
    for (int i = 0; i < want; i++) {
        const char *meta[] = {"HGET", keys[2 * i], seqs[i]}, *len[] = {"HSTRLEN", keys[2 * i + 1], seqs[i]};
        if (pool_append(p, keys[2 * i], 3, meta, NULL) != 0 || pool_append(p, keys[2 * i + 1], 3, len, NULL) != 0) {
            route_discard(p->route);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    /* a master that went down since the ranges were read fails its own
     * entries (missing), not the draw */
    if (pool_replies_each(p, 2 * want, g, err, errlen) < 0) return -1;
    int big = 0;
    for (int i = 0; i < want; i++) {
        const redisReply *len = g[2 * i + 1];
        if (!len || len->type != REDIS_REPLY_INTEGER || len->integer <= 0 || (size_t)len->integer > p->max_bytes)
            continue;
        const char *entry[] = {"HGET", keys[2 * i + 1], seqs[i]};
        if (pool_append(p, keys[2 * i + 1], 3, entry, NULL) != 0) {
            route_discard(p->route);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        big++;
    }
    if (big == 0) return 0;
    redisReply **x = g + 2 * want;
    if (pool_replies_each(p, big, x, err, errlen) < 0) return -1;
    /* spread the replies to their entries, the last first */
    for (int i = want - 1, j = big - 1; i >= 0; i--) {
        const redisReply *len = g[2 * i + 1];
        int fetched =
            len && len->type == REDIS_REPLY_INTEGER && len->integer > 0 && (size_t)len->integer <= p->max_bytes;
        redisReply *mine = fetched ? x[j--] : NULL;
        x[i] = mine;
        if (fetched && !mine) { /* its master failed between the round trips: missing, not too large */
            freeReplyObject(g[2 * i + 1]);
            g[2 * i + 1] = NULL;
        }
    }
    return 0;
}

typedef struct {
    pool_peer_t *d; /* set once every range's peer exists: pool_peer_of may move them */
    size_t peer;    /* its index in self->peers */
    uint64_t first, hi, newest, free;
    double w;
} range_t;

/* The fresh ranges that are ranges (one that is not is skipped), each with
 * its peer, what of it was not handed out before and the peer's weight,
 * into r[0..*m); their free entries in *total, weighed in *mass. 0, or -1
 * when out of memory. */
static int draw_ranges(pool_t *self, const pool_fresh_t *fr, long nr, range_t *r, size_t *m, uint64_t *total,
                       double *mass)
{
    *m = 0, *total = 0, *mass = 0;
    for (long i = 0; i < nr; i++) {
        const pool_fresh_t *e = &fr[i];
        if (e->first < 1 || e->hi < e->first || e->hi - e->first >= (uint64_t)self->max_per_node) continue;
        range_t *rg = &r[*m];
        pool_peer_t *d = pool_peer_of(self, e->node);
        if (!d) return -1;
        rg->peer = (size_t)(d - self->peers);
        rg->first = e->first, rg->hi = e->hi, rg->newest = e->newest;
        rg->free = pool_peer_free(d, rg->first, rg->hi);
        rg->w = pool_peer_draw_weight(self, d);
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
        double x = pool_uniform(self) * mass;
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
        uint64_t seq;
        if (pool_peer_take(r[j].d, r[j].first, nth, &seq) != 0) return i;
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
    if (!meta || !len) { /* its master did not answer */
        self->missing++;
        return 0;
    }
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
    pool_begin(self);
    /* the swarm whole up to POOL_CANDIDATES nodes (or 8 k), else that many
     * nodes at random: exact for a small swarm, O(k) for a large one */
    pool_fresh_t *fr = NULL;
    long long now; /* the server's clock when the ranges were read, in ms */
    long nr = pool_fresh_ranges(self, exclude_node ? exclude_node : "",
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
        pool_key(self, from[i]->d->node, "m", keys[i].m);
        pool_key(self, from[i]->d->node, "e", keys[i].e);
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

void pool_health(const pool_t *self, long *missing, long *bad_nodes)
{
    *missing = self->missing;
    *bad_nodes = self->bad_nodes;
}
