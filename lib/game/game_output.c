/* What a node shares after a stage of the game, as a record, and how a
 * peer's share is read back. */
#include "game/game_output.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

uint64_t game_swarm_seed(const char *swarm) { return fnv1a(swarm); }

int game_student_id(const char *node) { return (int)(fnv1a(node) % 1000); }

int game_best(const rec_group_view_t *group)
{
    int best = -1;
    float top = 0;
    for (size_t i = 0; i < group->r.n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(group, i, &c);
        if (isnan(c.reward)) {
            if (best < 0) best = (int)i, top = NAN;
            continue;
        }
        if (best < 0 || isnan(top) || c.reward > top) best = (int)i, top = c.reward;
    }
    return best;
}

int game_output_build(const char *node, uint64_t round, uint64_t policy_version, const rec_group_view_t *const *groups,
                      int n, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    rec_group_t *rs = calloc((size_t)n + 1, sizeof *rs);
    rec_completion_t *best = calloc((size_t)n + 1, sizeof *best);
    if (!rs || !best) {
        free(rs), free(best);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (int q = 0; q < n; q++) {
        int b = groups[q] ? game_best(groups[q]) : -1;
        if (b < 0) continue;
        rec_completion_t *all = calloc(groups[q]->r.n_completions, sizeof *all);
        if (!all) continue;
        rec_group_unpack(groups[q], &rs[k], all);
        best[k] = all[b];
        best[k].token_ids = NULL, best[k].n_tokens = 0;
        best[k].logprobs = NULL, best[k].n_logprobs = 0;
        free(all);
        rs[k].completions = &best[k];
        rs[k].n_completions = 1;
        k++;
    }
    rec_batch_t out = {.node = node,
                       .round = round,
                       .policy_version = policy_version,
                       .groups = rs,
                       .n_groups = k,
                       .local_count = (uint32_t)k,
                       .stats_json = "{}"};
    int rc = rec_batch_build(&out, buf, len);
    if (rc != 0) snprintf(err, errlen, "stage output of round %llu: record too large", (unsigned long long)round);
    free(rs), free(best);
    return rc;
}

/* one group of a peer's output: its question's slot q, or -1 with err */
static int read_group(const rec_group_view_t *g, uint64_t first, int questions, const char *const *answers,
                      size_t max_text, const char **texts, char *err, size_t errlen)
{
    uint64_t i = g->r.task.index;
    if (i < first || i - first >= (uint64_t)questions) {
        snprintf(err, errlen, "question %llu is not of this round", (unsigned long long)i);
        return -1;
    }
    int q = (int)(i - first);
    if (texts[q]) {
        snprintf(err, errlen, "question %llu twice", (unsigned long long)i);
        return -1;
    }
    if (!g->r.task.answer || strcmp(g->r.task.answer, answers[q]) != 0) {
        snprintf(err, errlen, "question %llu has another answer here (another task mix or question count)",
                 (unsigned long long)i);
        return -1;
    }
    if (g->r.n_completions != 1) {
        snprintf(err, errlen, "question %llu: %zu completions, not 1", (unsigned long long)i, g->r.n_completions);
        return -1;
    }
    rec_completion_t c;
    rec_group_completion(g, 0, &c);
    size_t n = c.text ? strlen(c.text) : 0;
    if (!c.text || n > max_text || !utf8_valid(c.text, n)) {
        snprintf(err, errlen, "question %llu: a completion longer than %zu bytes or not UTF-8", (unsigned long long)i,
                 max_text);
        return -1;
    }
    texts[q] = c.text;
    return q;
}

int game_output_read(const void *rec, size_t len, const char *node, uint64_t round, uint64_t first, int questions,
                     const char *const *answers, size_t max_text, const char **texts, char *err, size_t errlen)
{
    for (int q = 0; q < questions; q++) texts[q] = NULL;
    rec_batch_view_t v;
    if (rec_batch_view(rec, len, &v, err, errlen) != 0) return -1;
    if (!v.b.node || strcmp(v.b.node, node) != 0 || v.b.round != round) {
        snprintf(err, errlen, "not %s's output of round %llu", node, (unsigned long long)round);
        return -1;
    }
    if (v.b.n_groups > (size_t)questions) {
        snprintf(err, errlen, "%zu groups for %d questions", v.b.n_groups, questions);
        return -1;
    }
    for (size_t g = 0; g < v.b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(&v, g, &rv);
        if (read_group(&rv, first, questions, answers, max_text, texts, err, errlen) < 0) {
            for (int q = 0; q < questions; q++) texts[q] = NULL;
            return -1;
        }
    }
    return (int)v.b.n_groups;
}
