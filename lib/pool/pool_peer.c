/* What a pool remembers of each other node (a peer), so that its draws
 * never hand out one entry twice and, under POOL_USEFUL, weigh a peer by
 * how informative its groups turned out here. The memory is the node's
 * own, kept in the process: no other node needs it. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static pool_peer_t *peer_find(const pool_t *self, const char *node)
{
    if (!self->slot) return NULL;
    int i = *peer_slot(self, node);
    return i ? &self->peers[i - 1] : NULL;
}

/* a draw over thousands of nodes looks one up per range: by hash, not by
 * a scan */
pool_peer_t *pool_peer_of(pool_t *self, const char *node)
{
    pool_peer_t *found = peer_find(self, node);
    if (found) return found;
    if (self->n_peers == self->cap_peers) {
        int cap = self->cap_peers ? 2 * self->cap_peers : 16;
        pool_peer_t *d = realloc(self->peers, sizeof *d * (size_t)cap);
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
    pool_peer_t *d = &self->peers[self->n_peers++];
    memset(d, 0, sizeof *d);
    snprintf(d->node, sizeof d->node, "%s", node);
    *peer_slot(self, d->node) = self->n_peers;
    return d;
}

/* forgets the seqs below first; the rest, sorted, stay */
static void peer_forget_below(pool_peer_t *d, uint64_t first)
{
    int k = 0;
    while (k < d->n && d->seq[k] < first) k++;
    if (k == 0) return;
    memmove(d->seq, d->seq + k, sizeof *d->seq * (size_t)(d->n - k));
    d->n -= k;
}

static int peer_drawn_in(const pool_peer_t *d, uint64_t first, uint64_t hi)
{
    int n = 0;
    for (int k = 0; k < d->n; k++) n += d->seq[k] >= first && d->seq[k] <= hi;
    return n;
}

/* the caller has checked first <= hi */
uint64_t pool_peer_free(pool_peer_t *d, uint64_t first, uint64_t hi)
{
    peer_forget_below(d, first);
    return hi - first + 1 - (uint64_t)peer_drawn_in(d, first, hi);
}

static int peer_add_drawn(pool_peer_t *d, uint64_t seq)
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
static uint64_t peer_nth_free(const pool_peer_t *d, uint64_t first, uint64_t r)
{
    uint64_t seq = first + r;
    for (int k = 0; k < d->n; k++) {
        if (d->seq[k] < first) continue;
        if (d->seq[k] > seq) break;
        seq++;
    }
    return seq;
}

int pool_peer_take(pool_peer_t *d, uint64_t first, uint64_t r, uint64_t *seq)
{
    *seq = peer_nth_free(d, first, r);
    return peer_add_drawn(d, *seq);
}

/* pool_feedback's forgetting: each new group of a peer weighs 1, the
 * one before 0.9, ...: about its last ten groups count */
#define PEER_DECAY 0.9

void pool_strategy(pool_t *self, pool_strategy_t strategy) { self->strategy = strategy; }

/* 1 under the uniform strategy; under "useful", the posterior mean of the
 * chance that the peer's next group is informative here, from a uniform
 * prior and its decayed counts ((informative + 1) / (seen + 2)): 1/2 for
 * a peer not seen yet, never 0, so a peer that improves is drawn again. */
double pool_peer_draw_weight(const pool_t *self, const pool_peer_t *d)
{
    if (self->strategy == POOL_UNIFORM) return 1.0;
    return (d->informative + 1.0) / (d->seen + 2.0);
}

int pool_feedback(pool_t *self, const char *node, bool informative)
{
    char err[128];
    if (pool_node_ok(node, err, sizeof err) != 0) return -1;
    pool_peer_t *d = pool_peer_of(self, node);
    if (!d) return -1;
    d->informative = PEER_DECAY * d->informative + (informative ? 1 : 0);
    d->seen = PEER_DECAY * d->seen + 1;
    return 0;
}

double pool_peer_weight(pool_t *self, const char *node)
{
    const pool_peer_t *d = peer_find(self, node);
    if (d) return pool_peer_draw_weight(self, d);
    return self->strategy == POOL_UNIFORM ? 1.0 : 0.5;
}
