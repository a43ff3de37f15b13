#include "node/metrics.h"

#include <cjson/cJSON.h>
#include <string.h>
#include <time.h>

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

char *metrics_line(const char *node, const rec_batch_view_t *batch, const learn_stats_t *st, uint64_t version,
                   double train_seconds)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "node", node);
    cJSON_AddNumberToObject(j, "round", (double)batch->b.round);
    cJSON_AddNumberToObject(j, "version", (double)version);
    double own = 0, ext = 0, gen_s = 0, verify_s = 0;
    long n_own = 0, n_ext = 0;
    cJSON *fam = cJSON_CreateObject(), *fam_n = cJSON_CreateObject(), *from = cJSON_CreateObject();
    cJSON *ext_r = cJSON_CreateObject(), *ext_n = cJSON_CreateObject();
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_rollout_view_t rv;
        rec_batch_group(batch, g, &rv);
        verify_s += rv.r.verify_ms / 1000.0;
        if (!rv.r.external) gen_s += rv.r.gen_ms / 1000.0;
        if (rv.r.external) {
            cJSON *k = cJSON_GetObjectItemCaseSensitive(from, rv.r.node);
            if (k) cJSON_SetNumberValue(k, k->valuedouble + 1);
            else cJSON_AddNumberToObject(from, rv.r.node, 1);
        }
        for (size_t i = 0; i < rv.r.n_completions; i++) {
            rec_completion_t c;
            rec_rollout_completion(&rv, i, &c);
            if (rv.r.external) {
                ext += c.reward, n_ext++;
                add_to(ext_r, ext_n, rv.r.node, c.reward);
            } else {
                own += c.reward, n_own++;
                add_to(fam, fam_n, rv.r.task.family, c.reward);
            }
        }
    }
    means(fam, fam_n);
    cJSON_AddNumberToObject(j, "reward_mean", n_own ? own / n_own : 0);
    cJSON_AddNumberToObject(j, "reward_external", n_ext ? ext / n_ext : 0);
    cJSON_AddItemToObject(j, "family_accuracy", fam);
    cJSON_AddNumberToObject(j, "local_groups", batch->b.local_count);
    cJSON_AddNumberToObject(j, "external_groups", batch->b.external_count);
    cJSON_AddItemToObject(j, "external_from", from);
    cJSON_AddItemToObject(j, "external_reward_from", means(ext_r, ext_n));
    cJSON_AddNumberToObject(j, "loss", st->loss);
    cJSON_AddNumberToObject(j, "grad_norm", st->grad_norm);
    cJSON_AddNumberToObject(j, "tokens", (double)st->tokens);
    cJSON_AddNumberToObject(j, "skipped_groups", st->skipped_groups);
    cJSON_AddNumberToObject(j, "clip_region", st->grpo.clip_region);
    cJSON_AddNumberToObject(j, "ratio", st->grpo.ratio);
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
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    cJSON_AddNumberToObject(j, "time", (double)now.tv_sec + now.tv_nsec / 1e9);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}
