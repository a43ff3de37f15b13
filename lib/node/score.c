/* The verifier's rule: every completion of a group re-scored by this
 * node's task library, peers' rewards never trusted. */
#include "node/score.h"

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

int score_group(void *buf, size_t len, reward_rule_t rule, score_stats_t *st, char *err, size_t errlen)
{
    int64_t t0 = now_us();
    rec_group_view_t v;
    if (rec_group_view(buf, len, &v, err, errlen) != 0) goto bad;
    cJSON *meta = cJSON_Parse(v.r.task.metadata_json);
    if (!cJSON_IsObject(meta)) {
        snprintf(err, errlen, "task %llu: metadata_json is not a JSON object", (unsigned long long)v.r.task.task_id);
        cJSON_Delete(meta);
        goto bad;
    }
    task_question_t e = {(char *)v.r.task.question, (char *)v.r.task.answer, meta};
    /* a game stage's score is its reward (score.h) */
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(meta, "source_dataset");
    const task_family_t *fam = cJSON_IsString(ds) ? task_family_find(ds->valuestring) : NULL;
    if (fam && task_family_built(fam)) rule = (reward_rule_t){0, 0};
    size_t n = v.r.n_completions;
    float *rewards = malloc(sizeof(float) * (n ? n : 1));
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rec_completion_t c;
        rec_group_completion(&v, i, &c);
        bool formatted;
        double s = task_score_completion(c.text, &e, &formatted, err, errlen);
        if (s < 0) rc = -1;
        rewards[i] = score_reward(s, formatted, rule);
    }
    cJSON_Delete(meta);
    if (rc == 0) rc = rec_group_score(buf, len, rewards, n, true, err, errlen);
    if (rc == 0) rc = rec_group_set_verify_ms(buf, len, (uint32_t)((now_us() - t0 + 500) / 1000), err, errlen);
    free(rewards);
    if (rc != 0) goto bad;
    st->scored++;
    st->completions += (long)n;
    return 0;
bad:
    st->malformed++;
    return -1;
}
