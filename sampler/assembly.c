/* The sampler's bookkeeping between scored groups and training batches:
 * SampleSelf(I), SampleExternal(J) and the batch record, without sockets. */
#include "assembly.h"

#include <stdlib.h>
#include <string.h>

#include "records.h"

/* a group kept for a batch: its record and the view the batch is built
 * from, whose rewards (an external group's, scored here) are held at the
 * end */
typedef struct group {
    void *buf;
    rec_group_view_t v;
    struct group *next;
    float rewards[];
} group_t;

typedef struct {
    group_t *head, *tail;
    size_t n;
} queue_t;

struct assembly {
    const config_t *cfg;
    queue_t local, external;
    assembly_stats_t st;
    uint64_t seen[ASSEMBLY_SEEN_MAX]; /* task ids of the last local groups taken, a ring */
    size_t nseen, seen_next;
    long zero_adv_streak; /* own zero-advantage groups dropped since the last batch */
};

bool assembly_repeat(const assembly_t *self, uint64_t task_id)
{
    for (size_t i = 0; i < self->nseen; i++)
        if (self->seen[i] == task_id) return true;
    return false;
}

static void remember(assembly_t *self, uint64_t task_id)
{
    self->seen[self->seen_next] = task_id;
    self->seen_next = (self->seen_next + 1) % ASSEMBLY_SEEN_MAX;
    if (self->nseen < ASSEMBLY_SEEN_MAX) self->nseen++;
}

static void push(queue_t *q, group_t *g)
{
    g->next = NULL;
    if (q->tail) q->tail->next = g;
    else q->head = g;
    q->tail = g;
    q->n++;
}

static group_t *pop(queue_t *q)
{
    group_t *g = q->head;
    if (!g) return NULL;
    q->head = g->next;
    if (!q->head) q->tail = NULL;
    q->n--;
    return g;
}

static void drop(group_t *g)
{
    free(g->buf);
    free(g);
}

assembly_t *assembly_new(const config_t *cfg)
{
    assembly_t *self = calloc(1, sizeof *self);
    if (self) self->cfg = cfg;
    return self;
}

void assembly_destroy(assembly_t **self_p)
{
    if (!self_p || !*self_p) return;
    assembly_t *self = *self_p;
    group_t *g;
    while ((g = pop(&self->local))) drop(g);
    while ((g = pop(&self->external))) drop(g);
    free(self);
    *self_p = NULL;
}

bool assembly_add(assembly_t *self, void *buf, const rec_group_view_t *v, bool zero_advantage)
{
    bool external = v->r.external;
    size_t n = v->r.n_completions;
    if (external) self->st.external_in++;
    else self->st.local_in++;
    if (n != (size_t)self->cfg->completions) {
        self->st.wrong_size_dropped++;
        free(buf);
        return false;
    }
    group_filter_t filter = external ? self->cfg->external_filter : self->cfg->local_filter;
    if (filter == FILTER_NONZERO && zero_advantage) {
        if (!external && self->zero_adv_streak >= ASSEMBLY_ZERO_ADV_PATIENCE * (long)self->cfg->local_groups) {
            self->st.local_zero_adv_kept++;
        } else {
            if (external) self->st.external_zero_adv_dropped++;
            else self->st.local_zero_adv_dropped++, self->zero_adv_streak++;
            free(buf);
            return false;
        }
    }
    if (!external) {
        if (assembly_repeat(self, v->r.task.task_id)) {
            self->st.duplicate_dropped++;
            free(buf);
            return false;
        }
        remember(self, v->r.task.task_id);
    }
    group_t *g = malloc(sizeof *g + (v->rewards ? n * sizeof *g->rewards : 0));
    g->buf = buf;
    g->v = *v;
    if (v->rewards) {
        memcpy(g->rewards, v->rewards, n * sizeof *g->rewards);
        g->v.rewards = g->rewards;
    }
    push(external ? &self->external : &self->local, g);
    return true;
}

size_t assembly_local(const assembly_t *self) { return self->local.n; }
size_t assembly_external(const assembly_t *self) { return self->external.n; }

static void drop_stale(assembly_t *self, uint64_t version)
{
    queue_t keep = {0};
    group_t *g;
    while ((g = pop(&self->local))) {
        uint64_t sampled = g->v.r.policy_version;
        if (version > sampled && version - sampled > (uint64_t)self->cfg->staleness) {
            self->st.stale_dropped++;
            drop(g);
        } else {
            push(&keep, g);
        }
    }
    self->local = keep;
}

bool assembly_ready(assembly_t *self, uint64_t version, bool allow_fallback)
{
    drop_stale(self, version);
    size_t I = (size_t)self->cfg->local_groups, J = (size_t)self->cfg->external_groups;
    if (self->local.n < I) return false;
    if (self->external.n >= J) return true;
    return allow_fallback && self->local.n + self->external.n >= I + J;
}

int batch_build(rec_batch_t *b, const rec_group_view_t *views, size_t n, uint8_t **buf, size_t *len)
{
    size_t all = 0;
    for (size_t i = 0; i < n; i++) all += views[i].r.n_completions;
    rec_group_t *groups = calloc(n ? n : 1, sizeof *groups);
    rec_completion_t *comps = calloc(all + 1, sizeof *comps);
    int rc = -1;
    if (groups && comps) {
        for (size_t i = 0, at = 0; i < n; at += views[i].r.n_completions, i++)
            rec_group_unpack(&views[i], &groups[i], comps + at);
        b->groups = groups;
        b->n_groups = n;
        rc = rec_batch_build(b, buf, len);
        b->groups = NULL;
    }
    free(groups);
    free(comps);
    return rc;
}

int assembly_take(assembly_t *self, uint64_t round, uint64_t version, const char *stats_json, uint8_t **buf,
                  size_t *len)
{
    size_t I = (size_t)self->cfg->local_groups, J = (size_t)self->cfg->external_groups;
    size_t nj = self->external.n < J ? self->external.n : J;
    size_t ni = I + J - nj;
    if (ni > self->local.n) ni = self->local.n;
    size_t n = ni + nj;
    group_t **taken = calloc(n ? n : 1, sizeof *taken);
    rec_group_view_t *views = calloc(n ? n : 1, sizeof *views);
    int rc = -1;
    if (!taken || !views) goto done;
    for (size_t i = 0; i < n; i++) {
        taken[i] = pop(i < ni ? &self->local : &self->external);
        views[i] = taken[i]->v;
    }
    /* local groups in task order, not in the order the generators finished
     * them: the learner's sums then run in the same order whatever the
     * timing (lockstep repeats itself) */
    for (size_t i = 1; i < ni; i++)
        for (size_t k = i; k > 0 && views[k].r.task.task_id < views[k - 1].r.task.task_id; k--) {
            group_t *g = taken[k];
            taken[k] = taken[k - 1], taken[k - 1] = g;
            rec_group_view_t v = views[k];
            views[k] = views[k - 1], views[k - 1] = v;
        }
    rec_batch_t b = {.node = self->cfg->node,
                     .round = round,
                     .policy_version = version,
                     .local_count = (uint32_t)ni,
                     .external_count = (uint32_t)nj,
                     .stats_json = stats_json};
    rc = batch_build(&b, views, n, buf, len);
    self->st.batches++;
    self->zero_adv_streak = 0;
    if (nj < J) self->st.fallback_batches++;
done:
    for (size_t i = 0; taken && i < n; i++)
        if (taken[i]) drop(taken[i]);
    free(taken);
    free(views);
    return rc;
}

const assembly_stats_t *assembly_stats(const assembly_t *self) { return &self->st; }
