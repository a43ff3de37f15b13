/* The verifier's rule: every completion of a group re-scored by this
 * node's task library, peers' rewards never trusted. */
#include "node/score.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "records.h"
#include "tasks/task.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

float score_reward(double score, bool formatted, reward_rule_t rule)
{
    return (score < rule.floor ? 0.0f : (float)score) + (formatted ? rule.format : 0.0f);
}

/* The rewards of v's completions under the rule into rewards. 0, or -1
 * with err. */
static int score_completions(const rec_group_view_t *v, reward_rule_t rule, float *rewards, char *err, size_t errlen)
{
    cJSON *meta = cJSON_Parse(v->r.task.metadata_json);
    if (!cJSON_IsObject(meta)) {
        snprintf(err, errlen, "task %llu: metadata_json is not a JSON object", (unsigned long long)v->r.task.task_id);
        cJSON_Delete(meta);
        return -1;
    }
    task_question_t e = {(char *)v->r.task.question, (char *)v->r.task.answer, meta};
    /* a game stage's score is its reward (score.h) */
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(meta, "source_dataset");
    const task_family_t *fam = cJSON_IsString(ds) ? task_family_find(ds->valuestring) : NULL;
    if (fam && task_family_built(fam)) rule = (reward_rule_t){0, 0};
    int rc = 0;
    for (size_t i = 0; i < v->r.n_completions && rc == 0; i++) {
        rec_completion_t c;
        rec_group_completion(v, i, &c);
        bool formatted;
        double s = task_score_completion(c.text, &e, &formatted, err, errlen);
        if (s < 0) rc = -1;
        rewards[i] = score_reward(s, formatted, rule);
    }
    cJSON_Delete(meta);
    return rc;
}

static uint32_t ms_since(int64_t t0_us) { return (uint32_t)((now_us() - t0_us + 500) / 1000); }

int score_group(void *buf, size_t len, reward_rule_t rule, score_stats_t *st, char *err, size_t errlen)
{
    int64_t t0 = now_us();
    rec_group_view_t v;
    if (rec_group_view(buf, len, &v, err, errlen) != 0) {
        st->malformed++;
        return -1;
    }
    size_t n = v.r.n_completions;
    float *rewards = malloc(sizeof(float) * (n ? n : 1));
    int rc = rewards ? score_completions(&v, rule, rewards, err, errlen) : -1;
    if (!rewards) snprintf(err, errlen, "out of memory");
    if (rc == 0) rc = rec_group_score(buf, len, rewards, n, true, err, errlen);
    if (rc == 0) rc = rec_group_set_verify_ms(buf, len, ms_since(t0), err, errlen);
    free(rewards);
    if (rc != 0) {
        st->malformed++;
        return -1;
    }
    st->scored++;
    st->completions += (long)n;
    return 0;
}

int score_view(rec_group_view_t *v, reward_rule_t rule, float *rewards, score_stats_t *st, char *err, size_t errlen)
{
    int64_t t0 = now_us();
    if (score_completions(v, rule, rewards, err, errlen) != 0) {
        st->malformed++;
        return -1;
    }
    v->rewards = rewards;
    v->r.scored = true;
    v->r.verify_ms = ms_since(t0);
    st->scored++;
    st->completions += (long)v->r.n_completions;
    return 0;
}

bool group_zero_advantage(const rec_group_view_t *v)
{
    if (v->r.n_completions == 0) return true;
    rec_completion_t c;
    rec_group_completion(v, 0, &c);
    float first = c.reward;
    for (size_t i = 1; i < v->r.n_completions; i++) {
        rec_group_completion(v, i, &c);
        if (fabsf(c.reward - first) > 1e-6f) return false;
    }
    return true;
}
