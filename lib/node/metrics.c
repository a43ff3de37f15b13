/* A round's metrics: the sampler's counters for its batch, and the
 * learner's line: rewards, what the completions look like, group ages,
 * and the step's statistics. */
#include "node/metrics.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/score.h"
#include "tasks/task.h"

/* running sums per key, turned into means by means() */
static void add_to(cJSON *sums, cJSON *counts, const char *key, double value)
{
    cJSON *sum = cJSON_GetObjectItemCaseSensitive(sums, key), *cnt = cJSON_GetObjectItemCaseSensitive(counts, key);
    if (!sum) {
        sum = cJSON_AddNumberToObject(sums, key, 0);
        cnt = cJSON_AddNumberToObject(counts, key, 0);
    }
    cJSON_SetNumberValue(sum, sum->valuedouble + value);
    cJSON_SetNumberValue(cnt, cnt->valuedouble + 1);
}

static cJSON *means(cJSON *sums, cJSON *counts)
{
    for (cJSON *s = sums->child; s; s = s->next)
        cJSON_SetNumberValue(s, s->valuedouble / cJSON_GetObjectItemCaseSensitive(counts, s->string)->valuedouble);
    cJSON_Delete(counts);
    return sums;
}

/* What the node's own completions look like (see metrics.h) */
static void add_completions(cJSON *j, const rec_batch_view_t *batch)
{
    long n = 0, len_sum = 0, len_max = 0, truncated = 0, formatted = 0, logp_n = 0;
    double logp_sum = 0;
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(batch, g, &rv);
        if (rv.r.external) continue;
        for (size_t i = 0; i < rv.r.n_completions; i++) {
            rec_completion_t c;
            rec_group_completion(&rv, i, &c);
            long len = (long)c.n_tokens;
            n++;
            len_sum += len;
            if (len > len_max) len_max = len;
            truncated += !c.finished;
            char *a = task_extract_answer(c.text);
            formatted += a != NULL;
            free(a);
            for (size_t t = 0; t < c.n_logprobs; t++) {
                float lp;
                memcpy(&lp, c.logprobs + t, sizeof lp);
                logp_sum += lp;
            }
            logp_n += (long)c.n_logprobs;
        }
    }
    cJSON_AddNumberToObject(j, "completion_length", n ? (double)len_sum / n : 0);
    cJSON_AddNumberToObject(j, "completion_length_max", (double)len_max);
    cJSON_AddNumberToObject(j, "truncated_share", n ? (double)truncated / n : 0);
    cJSON_AddNumberToObject(j, "format_share", n ? (double)formatted / n : 0);
    cJSON_AddNumberToObject(j, "entropy", logp_n ? -logp_sum / logp_n : 0);
}

/* Local and external groups' zero-advantage shares and ages (see
 * metrics.h) */
static void add_group_ages(cJSON *j, const rec_batch_view_t *batch, double now_s)
{
    long zero[2] = {0, 0}, groups[2] = {0, 0};
    double age_v[2] = {0, 0}, age_r[2] = {0, 0}, age_s[2] = {0, 0}, age_v_max[2] = {0, 0};
    double age_r_max[2] = {0, 0}, age_s_max[2] = {0, 0};
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(batch, g, &rv);
        int e = rv.r.external;
        groups[e]++;
        zero[e] += group_zero_advantage(&rv);
        /* rounds count alike on every node (one per training step); policy
         * versions are the node's own, so an external group's is not ours */
        double v =
            batch->b.policy_version > rv.r.policy_version ? (double)(batch->b.policy_version - rv.r.policy_version) : 0;
        age_v[e] += v;
        if (v > age_v_max[e]) age_v_max[e] = v;
        /* a local group's question was drawn so many rounds before this
         * batch; an external group was so many of its publisher's rounds
         * behind the publisher's newest when drawn (nodes run at their own
         * pace, so our round and theirs do not compare) */
        double r = e                                  ? rv.r.pool_age_rounds
                   : batch->b.round > rv.r.task.round ? (double)(batch->b.round - rv.r.task.round)
                                                      : 0;
        double s = now_s - rv.r.created_ms / 1000.0;
        s = s > 0 ? s : 0;
        age_r[e] += r, age_s[e] += s;
        if (r > age_r_max[e]) age_r_max[e] = r;
        if (s > age_s_max[e]) age_s_max[e] = s;
    }
    static const char *const side[2] = {"local", "external"};
    for (int e = 0; e < 2; e++) {
        cJSON *o = cJSON_AddObjectToObject(j, side[e]);
        cJSON_AddNumberToObject(o, "zero_adv_share", groups[e] ? (double)zero[e] / groups[e] : 0);
        if (!e) cJSON_AddNumberToObject(o, "age_versions", groups[e] ? age_v[e] / groups[e] : 0);
        if (!e) cJSON_AddNumberToObject(o, "age_versions_max", age_v_max[e]);
        cJSON_AddNumberToObject(o, "age_rounds", groups[e] ? age_r[e] / groups[e] : 0);
        cJSON_AddNumberToObject(o, "age_seconds", groups[e] ? age_s[e] / groups[e] : 0);
        cJSON_AddNumberToObject(o, "age_rounds_max", age_r_max[e]);
        cJSON_AddNumberToObject(o, "age_seconds_max", age_s_max[e]);
    }
}

/* reward_mean and reward_external over the batch's own and external
 * completions, batch_reward over all of them (what the paper and genrl
 * log as the round's reward: the mean over every completion trained),
 * family_reward and family_count over its own */
static void add_rewards(cJSON *j, const rec_batch_view_t *batch)
{
    double own = 0, ext = 0;
    long n_own = 0, n_ext = 0;
    cJSON *fam = cJSON_CreateObject(), *fam_n = cJSON_CreateObject();
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(batch, g, &rv);
        for (size_t i = 0; i < rv.r.n_completions; i++) {
            rec_completion_t c;
            rec_group_completion(&rv, i, &c);
            if (rv.r.external) {
                ext += c.reward, n_ext++;
            } else {
                own += c.reward, n_own++;
                add_to(fam, fam_n, rv.r.task.family, c.reward);
            }
        }
    }
    cJSON *fam_count = cJSON_Duplicate(fam_n, true);
    means(fam, fam_n);
    cJSON_AddNumberToObject(j, "reward_mean", n_own ? own / n_own : 0);
    cJSON_AddNumberToObject(j, "reward_external", n_ext ? ext / n_ext : 0);
    cJSON_AddNumberToObject(j, "batch_reward", n_own + n_ext ? (own + ext) / (double)(n_own + n_ext) : 0);
    cJSON_AddItemToObject(j, "family_reward", fam);
    cJSON_AddItemToObject(j, "family_count", fam_count);
}

/* external_from: {node: groups}, and external_reward_from: {node: mean
 * reward of its completions} */
static void add_external_nodes(cJSON *j, const rec_batch_view_t *batch)
{
    cJSON *from = cJSON_CreateObject(), *ext_r = cJSON_CreateObject(), *ext_n = cJSON_CreateObject();
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(batch, g, &rv);
        if (!rv.r.external) continue;
        cJSON *k = cJSON_GetObjectItemCaseSensitive(from, rv.r.node);
        if (k) cJSON_SetNumberValue(k, k->valuedouble + 1);
        else cJSON_AddNumberToObject(from, rv.r.node, 1);
        for (size_t i = 0; i < rv.r.n_completions; i++) {
            rec_completion_t c;
            rec_group_completion(&rv, i, &c);
            add_to(ext_r, ext_n, rv.r.node, c.reward);
        }
    }
    cJSON_AddItemToObject(j, "external_from", from);
    cJSON_AddItemToObject(j, "external_reward_from", means(ext_r, ext_n));
}

/* the learner's step: loss to kl */
static void add_train_stats(cJSON *j, const train_stats_t *st)
{
    cJSON_AddNumberToObject(j, "loss", st->loss);
    cJSON_AddNumberToObject(j, "grad_norm", st->grad_norm);
    cJSON_AddNumberToObject(j, "tokens", (double)st->tokens);
    cJSON_AddNumberToObject(j, "skipped_groups", st->skipped_groups);
    if (st->untrained_external) cJSON_AddNumberToObject(j, "untrained_external", st->untrained_external);
    cJSON_AddNumberToObject(j, "lr", st->lr);
    cJSON_AddNumberToObject(j, "masked_truncated", st->masked_truncated);
    cJSON_AddNumberToObject(j, "packed_groups", st->packed_groups);
    cJSON_AddNumberToObject(j, "external_logprobs", st->external_logprobs);
    cJSON_AddNumberToObject(j, "positions", (double)st->positions);
    cJSON_AddNumberToObject(j, "clip_region", st->grpo.clip_region);
    cJSON_AddNumberToObject(j, "clip_low", st->grpo.clip_low);
    cJSON_AddNumberToObject(j, "clip_high", st->grpo.clip_high);
    cJSON_AddNumberToObject(j, "ratio", st->grpo.ratio);
    cJSON_AddNumberToObject(j, "ratio_min", st->grpo.ratio_min);
    cJSON_AddNumberToObject(j, "ratio_max", st->grpo.ratio_max);
    if (st->ratio_min_at.found) {
        const ratio_min_at_t *a = &st->ratio_min_at;
        cJSON *at = cJSON_AddObjectToObject(j, "ratio_min_at");
        cJSON_AddStringToObject(at, "token", a->token);
        cJSON_AddNumberToObject(at, "token_id", a->token_id);
        cJSON_AddStringToObject(at, "before", a->before);
        cJSON_AddNumberToObject(at, "position", a->position);
        cJSON_AddNumberToObject(at, "logp", a->logp);
        cJSON_AddNumberToObject(at, "logp_sampled", a->logp_sampled);
        cJSON_AddNumberToObject(at, "advantage", a->advantage);
    }
    cJSON_AddNumberToObject(j, "kl", st->grpo.kl);
}

/* seconds: the learner's train, the groups' generate (own) and verify,
 * then the sampler's stage timings; and sampler: the batch's counters */
static void add_seconds(cJSON *j, const rec_batch_view_t *batch, double train_seconds)
{
    double gen_s = 0, verify_s = 0;
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(batch, g, &rv);
        verify_s += rv.r.verify_ms / 1000.0;
        if (!rv.r.external) gen_s += rv.r.gen_ms / 1000.0;
    }
    cJSON *secs = cJSON_AddObjectToObject(j, "seconds");
    cJSON_AddNumberToObject(secs, "train", train_seconds);
    cJSON_AddNumberToObject(secs, "generate", gen_s);
    cJSON_AddNumberToObject(secs, "verify", verify_s);
    cJSON *sampler = cJSON_Parse(batch->b.stats_json);
    if (cJSON_IsObject(sampler)) {
        /* the sampler's stage timings join the learner's */
        cJSON *ss = cJSON_DetachItemFromObjectCaseSensitive(sampler, "seconds");
        for (cJSON *s = ss ? ss->child : NULL; s; s = s->next)
            if (cJSON_IsNumber(s)) cJSON_AddNumberToObject(secs, s->string, s->valuedouble);
        cJSON_Delete(ss);
        cJSON_AddItemToObject(j, "sampler", sampler);
    } else {
        cJSON_Delete(sampler);
    }
}

/* x rounded to `decimals` decimal places (scale 10^decimals), as the
 * sampler's counters have always been written: a mean reward to 6,
 * seconds to 4, the game's wait to 3, a peak's GB to 3 */
static double rounded(double x, double scale) { return round(x * scale) / scale; }

/* j as one line of text (malloc'ed), and j gone */
static char *print_and_delete(cJSON *j)
{
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

char *metrics_line(const metrics_round_t *info, const rec_batch_view_t *batch, const train_stats_t *st)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double now_s = (double)now.tv_sec + now.tv_nsec / 1e9;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "node", info->node);
    cJSON_AddStringToObject(j, "model", info->model);
    cJSON_AddStringToObject(j, "model_name", info->model_name);
    cJSON_AddNumberToObject(j, "round", (double)batch->b.round);
    cJSON_AddNumberToObject(j, "policy_version", (double)info->policy_version);
    add_rewards(j, batch);
    add_completions(j, batch);
    add_group_ages(j, batch, now_s);
    cJSON_AddNumberToObject(j, "local_groups", batch->b.local_count);
    cJSON_AddNumberToObject(j, "external_groups", batch->b.external_count);
    add_external_nodes(j, batch);
    add_train_stats(j, st);
    add_seconds(j, batch, info->train_seconds);
    if (info->peak) {
        cJSON *peak = cJSON_AddObjectToObject(j, "peak_gb");
        for (int i = 0; i < info->peak->n; i++)
            cJSON_AddNumberToObject(peak, info->peak->name[i], rounded(info->peak->bytes[i] / 1e9, 1e3));
    }
    cJSON_AddNumberToObject(j, "time", now_s);
    if (info->rounds_lost) cJSON_AddNumberToObject(j, "rounds_lost", (double)info->rounds_lost);
    if (info->versions_lost) cJSON_AddNumberToObject(j, "versions_lost", (double)info->versions_lost);
    if (info->rounds_skipped) cJSON_AddNumberToObject(j, "rounds_skipped", (double)info->rounds_skipped);
    return print_and_delete(j);
}

const cJSON *metrics_round_reward(const cJSON *line)
{
    const cJSON *smp = cJSON_GetObjectItemCaseSensitive(line, "sampler");
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(smp, "scored_reward");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(smp, "scored_completions");
    if (cJSON_IsNumber(sr) && cJSON_IsNumber(sc) && sc->valuedouble > 0) return sr;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(line, "reward_mean");
    return cJSON_IsNumber(w) ? w : NULL;
}

const cJSON *metrics_batch_reward(const cJSON *line)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(line, "batch_reward");
    return cJSON_IsNumber(b) ? b : NULL;
}

/* what SAPO's round and the game report alike: pool errors, the own
 * completions scored and their mean reward */
static void add_scored(cJSON *j, long pool_errors, double reward_sum, long completions)
{
    cJSON_AddNumberToObject(j, "pool_errors", (double)pool_errors);
    cJSON_AddNumberToObject(j, "scored_reward", rounded(completions ? reward_sum / completions : 0, 1e6));
    cJSON_AddNumberToObject(j, "scored_completions", (double)completions);
}

char *metrics_sampler_json(const metrics_sampler_t *s)
{
    cJSON *j = cJSON_CreateObject();
    const struct {
        const char *key;
        long value;
    } counts[] = {
        {"pool_size", s->pool_size},
        {"published", s->published},
        {"stale_dropped", s->stale_dropped},
        {"external_zero_adv_dropped", s->external_zero_adv_dropped},
        {"local_zero_adv_dropped", s->local_zero_adv_dropped},
        {"local_zero_adv_kept", s->local_zero_adv_kept},
        {"wrong_size_dropped", s->wrong_size_dropped},
        {"duplicate_dropped", s->duplicate_dropped},
        {"external_rejected", s->external_rejected},
        {"external_unscorable", s->external_unscorable},
        {"pool_missing", s->pool_missing},
        {"pool_bad_nodes", s->pool_bad_nodes},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        cJSON_AddNumberToObject(j, counts[i].key, (double)counts[i].value);
    cJSON *screen = cJSON_AddObjectToObject(j, "screen");
    for (int r = 0; r < s->n_screen; r++)
        cJSON_AddNumberToObject(screen, s->screen_reasons[r], (double)s->screen_counts[r]);
    cJSON_AddNumberToObject(j, "fallback_batches", (double)s->fallback_batches);
    add_scored(j, s->pool_errors, s->scored_reward, s->scored_completions);
    cJSON *secs = cJSON_AddObjectToObject(j, "seconds");
    cJSON_AddNumberToObject(secs, "pool", rounded(s->pool_seconds, 1e4));
    cJSON_AddNumberToObject(secs, "transport", rounded(s->transport_seconds, 1e4));
    return print_and_delete(j);
}

char *metrics_game_json(const metrics_game_t *g)
{
    cJSON *j = cJSON_CreateObject();
    cJSON *game = cJSON_AddObjectToObject(j, "game");
    cJSON_AddNumberToObject(game, "round", (double)g->round);
    cJSON_AddStringToObject(game, "stage", g->stage);
    cJSON_AddNumberToObject(game, "peers", g->peers);
    cJSON_AddNumberToObject(game, "waited_seconds", rounded(g->waited, 1e3));
    cJSON_AddNumberToObject(game, "outputs_published", (double)g->outputs_published);
    cJSON_AddNumberToObject(game, "outputs_rejected", (double)g->outputs_rejected);
    add_scored(j, g->pool_errors, g->scored_reward, g->scored_completions);
    cJSON *secs = cJSON_AddObjectToObject(j, "seconds");
    cJSON_AddNumberToObject(secs, "pool", rounded(g->pool_seconds, 1e4));
    return print_and_delete(j);
}

const char *metrics_tb_group(const char *field)
{
    static const char *const groups[][2] = {
        {"reward_mean", "reward"},
        {"reward_external", "reward"},
        {"batch_reward", "reward"},
        {"completion_length", "completions"},
        {"completion_length_max", "completions"},
        {"truncated_share", "completions"},
        {"format_share", "completions"},
        {"entropy", "completions"},
        {"local_groups", "groups"},
        {"external_groups", "groups"},
        {"skipped_groups", "groups"},
        {"packed_groups", "groups"},
        {"external_logprobs", "groups"},
        {"masked_truncated", "groups"},
        {"policy_version", "train"},
        {"loss", "train"},
        {"grad_norm", "train"},
        {"tokens", "train"},
        {"lr", "train"},
        {"positions", "train"},
        {"clip_region", "train"},
        {"clip_low", "train"},
        {"clip_high", "train"},
        {"ratio", "train"},
        {"ratio_min", "train"},
        {"ratio_max", "train"},
        {"kl", "train"},
        {"rounds_lost", "lost"},
        {"versions_lost", "lost"},
        {"rounds_skipped", "lost"},
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (strcmp(field, groups[i][0]) == 0) return groups[i][1];
    return NULL;
}
