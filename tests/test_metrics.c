/* The learner's per-round diagnostics and the sampler's counters
 * (lib/node/metrics.c) on a small batch whose values are worked out by
 * hand below, and the options that change what is trained: the reward floor (lib/node/score.c), the local
 * zero-advantage filter (sampler/assembly.c) and the learning-rate
 * schedule (lib/train/train.c). */
#include <cjson/cJSON.h>
#include <time.h>

#include "check.h"
#include "../sampler/assembly.h"
#include "node/config.h"
#include "node/metrics.h"
#include "../learner/train.h" /* train_lr */
#include "node/score.h"
#include "records.h"
#include "group_buf.h"

static double num(const cJSON *j, const char *path)
{
    char key[128];
    snprintf(key, sizeof key, "%s", path);
    const cJSON *o = j;
    for (char *k = strtok(key, "."); k && o; k = strtok(NULL, ".")) o = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(o)) {
        fprintf(stderr, "metrics: no number at %s\n", path);
        check_failures++;
        return NAN;
    }
    return o->valuedouble;
}

/* Two local groups and one external, 2 completions each:
 *   local A (basic_arithmetic, version 5, question of round 7): rewards 1, 0;
 *     "<answer>3</answer>" 3 tokens, log-probs -0.5 -0.5 -1 (finished),
 *     "3" 2 tokens, log-probs -2 -1 (cut by the length limit, no answer tag)
 *   local B (bf, version 6, round 8): rewards 0, 0; "<answer>x</answer>"
 *     1 token (-0.25) twice, both finished
 *   external C (its round 6, drawn 2 of its publisher's rounds behind the
 *     publisher's newest, generated 10 s ago): rewards 1, 1, no tokens
 * batch: round 9, version 6.
 * completion_length (3 + 2 + 1 + 1) / 4 = 1.75, max 3; truncated 1/4;
 * format 3/4; entropy -(-0.5-0.5-1-2-1-0.25-0.25) / 7 = 5.5 / 7;
 * local zero_adv 1/2 (B), external 1/1; local age_versions (1 + 0) / 2,
 * max 1; age_rounds local (2 + 1) / 2, max 2, external 2 (the pool's
 * count, not our round 9 - 6), age_seconds external about 10; reward_mean 1/4,
 * family_reward basic_arithmetic 0.5, bf 0, family_count 2 and 2. */

/* groups A, B and C of the comment above, built into one batch record */
static uint8_t *diagnostics_batch_build(rec_completion_t *cA, rec_completion_t *cB, rec_completion_t *cC, size_t *len)
{
    uint64_t now_ms = (uint64_t)time(NULL) * 1000;
    rec_group_t g[] = {
        {.node = "n0",
         .policy_version = 5,
         .task = {.family = "basic_arithmetic", .round = 7},
         .completions = cA,
         .n_completions = 2,
         .scored = true,
         .created_ms = now_ms},
        {.node = "n0",
         .policy_version = 6,
         .task = {.family = "bf", .round = 8},
         .completions = cB,
         .n_completions = 2,
         .scored = true,
         .created_ms = now_ms},
        {.node = "n1",
         .policy_version = 40,
         .task = {.family = "bf", .round = 6},
         .completions = cC,
         .n_completions = 2,
         .external = true,
         .scored = true,
         .created_ms = now_ms - 10000,
         .pool_age_rounds = 2},
    };
    rec_batch_t b = {.node = "n0",
                     .round = 9,
                     .policy_version = 6,
                     .groups = g,
                     .n_groups = 3,
                     .local_count = 2,
                     .external_count = 1,
                     .stats_json = "{}"};
    uint8_t *buf;
    EXPECT(rec_batch_build(&b, &buf, len) == 0);
    return buf;
}

/* the completions of groups A, B and C */
static uint8_t *diagnostics_batch(size_t *len)
{
    float lpA0[] = {-0.5f, -0.5f, -1.0f}, lpA1[] = {-2.0f, -1.0f}, lpB[] = {-0.25f};
    int32_t tA0[] = {1, 2, 3}, tA1[] = {4, 5}, tB[] = {6};
    rec_completion_t cA[] = {{.text = "<answer>3</answer>",
                              .token_ids = tA0,
                              .n_tokens = 3,
                              .logprobs = lpA0,
                              .n_logprobs = 3,
                              .reward = 1,
                              .finished = true},
                             {.text = "3",
                              .token_ids = tA1,
                              .n_tokens = 2,
                              .logprobs = lpA1,
                              .n_logprobs = 2,
                              .reward = 0,
                              .finished = false}};
    rec_completion_t cB[] = {{.text = "<answer>x</answer>",
                              .token_ids = tB,
                              .n_tokens = 1,
                              .logprobs = lpB,
                              .n_logprobs = 1,
                              .reward = 0,
                              .finished = true},
                             {.text = "<answer>x</answer>",
                              .token_ids = tB,
                              .n_tokens = 1,
                              .logprobs = lpB,
                              .n_logprobs = 1,
                              .reward = 0,
                              .finished = true}};
    rec_completion_t cC[] = {{.text = "<answer>1</answer>", .reward = 1, .finished = true},
                             {.text = "<answer>1</answer>", .reward = 1, .finished = true}};
    return diagnostics_batch_build(cA, cB, cC, len);
}

/* the metrics line of the batch, with the learner's step statistics */
static char *diagnostics_line(const rec_batch_view_t *v)
{
    train_stats_t st = {
        .lr = 1e-4f,
        .grpo = {.ratio = 1.0f, .ratio_min = 0.5f, .ratio_max = 2.0f, .clip_low = 0.25f, .clip_high = 0.125f},
        .ratio_min_at = {.found = 1,
                         .token_id = 62,
                         .position = 9,
                         .logp = -3.5f,
                         .logp_sampled = -2.75f,
                         .advantage = -0.5f,
                         .token = ">",
                         .before = "<answer>7</answer\\x0a"}};
    metrics_round_t round = {
        .node = "n0", .model = "bytes-4L-256C-v264", .model_name = "tiny", .policy_version = 7, .train_seconds = 1.0};
    return metrics_line(&round, v, &st);
}

/* what the batch's completions and groups give: lengths, shares, ages,
 * rewards */
static void check_batch_metrics(const cJSON *j)
{
    EXPECT_NEAR(num(j, "completion_length"), 1.75, 1e-9);
    EXPECT_NEAR(num(j, "completion_length_max"), 3, 1e-9);
    EXPECT_NEAR(num(j, "truncated_share"), 0.25, 1e-9);
    EXPECT_NEAR(num(j, "format_share"), 0.75, 1e-9);
    EXPECT_NEAR(num(j, "entropy"), 5.5 / 7, 1e-6);
    EXPECT_NEAR(num(j, "local.zero_adv_share"), 0.5, 1e-9);
    EXPECT_NEAR(num(j, "external.zero_adv_share"), 1.0, 1e-9);
    EXPECT_NEAR(num(j, "local.age_versions"), 0.5, 1e-9);
    EXPECT_NEAR(num(j, "local.age_versions_max"), 1, 1e-9);
    EXPECT_NEAR(num(j, "local.age_rounds"), 1.5, 1e-9);
    EXPECT_NEAR(num(j, "local.age_rounds_max"), 2, 1e-9);
    EXPECT_NEAR(num(j, "external.age_rounds"), 2, 1e-9);
    EXPECT_NEAR(num(j, "external.age_rounds_max"), 2, 1e-9);
    EXPECT(num(j, "external.age_seconds") >= 10 && num(j, "external.age_seconds") < 15);
    EXPECT(num(j, "external.age_seconds_max") >= 10 && num(j, "local.age_seconds") < 5);
    EXPECT_NEAR(num(j, "reward_mean"), 0.25, 1e-9);
    EXPECT_NEAR(num(j, "reward_external"), 1, 1e-9);
    /* every trained completion: 1 right of 4 own, 2 of 2 external */
    EXPECT_NEAR(num(j, "batch_reward"), 0.5, 1e-9);
    EXPECT_NEAR(num(j, "family_reward.basic_arithmetic"), 0.5, 1e-9);
    EXPECT_NEAR(num(j, "family_reward.bf"), 0, 1e-9);
    EXPECT_NEAR(num(j, "family_count.basic_arithmetic"), 2, 1e-9);
    EXPECT_NEAR(num(j, "family_count.bf"), 2, 1e-9);
}

/* what the learner's step statistics give: ratios, the token at the
 * smallest ratio, clipping */
static void check_step_metrics(const cJSON *j)
{
    EXPECT_NEAR(num(j, "ratio_min"), 0.5, 1e-9);
    EXPECT_NEAR(num(j, "ratio_max"), 2, 1e-9);
    EXPECT_NEAR(num(j, "ratio_min_at.position"), 9, 1e-9);
    EXPECT_NEAR(num(j, "ratio_min_at.token_id"), 62, 1e-9);
    EXPECT_NEAR(num(j, "ratio_min_at.logp"), -3.5, 1e-9);
    EXPECT_NEAR(num(j, "ratio_min_at.logp_sampled"), -2.75, 1e-9);
    EXPECT_NEAR(num(j, "ratio_min_at.advantage"), -0.5, 1e-9);
    cJSON *at = cJSON_GetObjectItem(j, "ratio_min_at");
    EXPECT(at && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(at, "token")), ">") &&
           !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(at, "before")), "<answer>7</answer\\x0a"));
    EXPECT_NEAR(num(j, "clip_low"), 0.25, 1e-9);
    EXPECT_NEAR(num(j, "clip_high"), 0.125, 1e-9);
}

/* the diagnostics of the batch above */
/* the line of the batch above, built and read as the learner reads it */
static char *diagnostics(void)
{
    size_t len;
    uint8_t *buf = diagnostics_batch(&len);
    rec_batch_view_t v;
    char err[128];
    EXPECT(rec_batch_view(buf, len, &v, err, sizeof err) == 0);
    char *line = diagnostics_line(&v);
    rec_free(buf);
    return line;
}

static void test_diagnostics(void)
{
    char *line = diagnostics();
    cJSON *j = cJSON_Parse(line);
    EXPECT(j != NULL);
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "model")), "bytes-4L-256C-v264"));
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "model_name")), "tiny"));
    check_batch_metrics(j);
    check_step_metrics(j);
    cJSON_Delete(j);
    free(line);
}

/* the line of a round whose batch holds no group, only the sampler's
 * counters stats_json */
static char *empty_batch_line(const metrics_round_t *round, const char *stats_json)
{
    rec_batch_t b = {.node = round->node, .round = 1, .stats_json = stats_json};
    uint8_t *buf;
    size_t len;
    EXPECT(rec_batch_build(&b, &buf, &len) == 0);
    rec_batch_view_t v;
    char err[128];
    EXPECT(rec_batch_view(buf, len, &v, err, sizeof err) == 0);
    train_stats_t st = {0};
    char *line = metrics_line(round, &v, &st);
    rec_free(buf);
    return line;
}

/* the rounds a line says were lost or skipped: written last, and only
 * when some were */
static void test_round_gaps(void)
{
    metrics_round_t round = {
        .node = "n0", .model = "m", .model_name = "m", .policy_version = 4, .rounds_lost = 2, .rounds_skipped = 1};
    char *line = empty_batch_line(&round, "{}");
    EXPECTF(strstr(line, ",\"time\":") && strstr(line, ",\"rounds_lost\":2,\"rounds_skipped\":1}") &&
                !strstr(line, "versions_lost"),
            "%s", line);
    free(line);
    round.rounds_lost = round.rounds_skipped = 0;
    line = empty_batch_line(&round, "{}");
    EXPECTF(!strstr(line, "_lost") && !strstr(line, "rounds_skipped"), "%s", line);
    free(line);
}

/* every top-level number of a line but the round and the time has its
 * TensorBoard group (metrics_tb_group): a field added to the line without
 * one fails here */
static void expect_grouped(const char *line)
{
    cJSON *j = cJSON_Parse(line);
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next)
        if (cJSON_IsNumber(c) && strcmp(c->string, "round") && strcmp(c->string, "time"))
            EXPECTF(metrics_tb_group(c->string) != NULL, "%s has no TensorBoard group", c->string);
    EXPECT(j && !metrics_tb_group("round") && !metrics_tb_group("local") && !strcmp(metrics_tb_group("loss"), "train"));
    cJSON_Delete(j);
}

static void test_tb_groups(void)
{
    char *line = diagnostics();
    expect_grouped(line);
    free(line);
    metrics_round_t round = {.node = "n0",
                             .model = "m",
                             .model_name = "m",
                             .policy_version = 4,
                             .rounds_lost = 2,
                             .versions_lost = 2,
                             .rounds_skipped = 1};
    line = empty_batch_line(&round, "{}");
    expect_grouped(line);
    free(line);
}

/* the sampler's counters as its batch carries them (the keys in the order
 * they have always been written, a mean reward to 6 decimals, seconds to
 * 4), and as the learner's line holds them: under "sampler", their
 * seconds joining the line's own */
static void test_sampler_counters(void)
{
    const char *reasons[] = {"passed", "too_large"};
    const long refused[] = {7, 1};
    metrics_sampler_t m = {.pool_size = 40,
                           .published = 3,
                           .stale_dropped = 1,
                           .external_zero_adv_dropped = 2,
                           .local_zero_adv_dropped = 4,
                           .duplicate_dropped = 1,
                           .external_rejected = 5,
                           .pool_missing = 6,
                           .screen_reasons = reasons,
                           .screen_counts = refused,
                           .n_screen = 2,
                           .fallback_batches = 1,
                           .pool_errors = 2,
                           .scored_reward = 1.0,
                           .scored_completions = 3,
                           .pool_seconds = 0.123456,
                           .transport_seconds = 2.5};
    char *json = metrics_sampler_json(&m);
    EXPECTF(json &&
                strcmp(json, "{\"pool_size\":40,\"published\":3,\"stale_dropped\":1,\"external_zero_adv_dropped\":2,"
                             "\"local_zero_adv_dropped\":4,\"local_zero_adv_kept\":0,\"wrong_size_dropped\":0,"
                             "\"duplicate_dropped\":1,\"external_rejected\":5,\"external_unscorable\":0,"
                             "\"pool_missing\":6,\"pool_bad_nodes\":0,\"screen\":{\"passed\":7,\"too_large\":1},"
                             "\"fallback_batches\":1,\"pool_errors\":2,\"scored_reward\":0.333333,"
                             "\"scored_completions\":3,\"seconds\":{\"pool\":0.1235,\"transport\":2.5}}") == 0,
            "%s", json);
    metrics_round_t round = {.node = "n0", .model = "m", .model_name = "m", .policy_version = 1, .train_seconds = 3};
    char *line = empty_batch_line(&round, json);
    cJSON *j = cJSON_Parse(line);
    EXPECT_NEAR(num(j, "sampler.scored_reward"), 0.333333, 1e-12);
    EXPECT_NEAR(num(j, "sampler.screen.passed"), 7, 0);
    EXPECT_NEAR(num(j, "seconds.train"), 3, 0);
    EXPECT_NEAR(num(j, "seconds.pool"), 0.1235, 1e-12);
    EXPECT_NEAR(num(j, "seconds.transport"), 2.5, 0);
    EXPECT(!cJSON_GetObjectItem(cJSON_GetObjectItem(j, "sampler"), "seconds"));
    cJSON_Delete(j);
    free(line);
    free(json);
}

/* the game's counters for a stage's batch */
static void test_game_counters(void)
{
    metrics_game_t g = {.round = 2,
                        .stage = "critique",
                        .peers = 3,
                        .waited = 1.23456,
                        .outputs_published = 4,
                        .outputs_rejected = 1,
                        .scored_reward = 2,
                        .scored_completions = 4,
                        .pool_seconds = 0.5};
    char *json = metrics_game_json(&g);
    EXPECTF(json && strcmp(json, "{\"game\":{\"round\":2,\"stage\":\"critique\",\"peers\":3,\"waited_seconds\":1.235,"
                                 "\"outputs_published\":4,\"outputs_rejected\":1},\"pool_errors\":0,"
                                 "\"scored_reward\":0.5,\"scored_completions\":4,\"seconds\":{\"pool\":0.5}}") == 0,
            "%s", json);
    free(json);
}

/* a verifier's scores under the floor: hedges (0.01, 0.05) count 0; the
 * format reward comes on top for any answer in the tags */
static void test_reward_floor(void)
{
    reward_rule_t floor = {0.1f, 0}, none = {0, 0}, format = {0.6f, 0.2f};
    EXPECT(score_reward(0.05, true, floor) == 0.0f);
    EXPECT(score_reward(0.01, true, floor) == 0.0f);
    EXPECT(score_reward(1.0, true, floor) == 1.0f);
    EXPECT(score_reward(0.5, true, floor) == 0.5f);
    EXPECT(score_reward(0.05, true, none) == 0.05f);
    EXPECT(score_reward(0.5, true, format) == 0.2f);
    EXPECT(score_reward(0.0, false, format) == 0.0f);
    EXPECT(score_reward(1.0, true, format) == 1.2f);
    /* score_group writes the rule's rewards into the record: the right
     * answer, a weekday in the wrong case (partial credit 0.05 in
     * reasoning-gym), and no answer tags */
    rec_completion_t c[] = {
        {.text = "<answer>Tuesday</answer>"}, {.text = "<answer>friday</answer>"}, {.text = "Tuesday"}};
    rec_group_t r = {
        .node = "n0",
        .completions = c,
        .n_completions = 3,
        .task = {.family = "calendar_arithmetic",
                 .question = "q",
                 .answer = "Tuesday",
                 .metadata_json = "{\"source_dataset\":\"calendar_arithmetic\",\"task\":\"weekday_offset\"}"}};
    const reward_rule_t rules[] = {none, floor, {0.1f, 0.25f}};
    const float want[][3] = {{1.0f, 0.05f, 0.0f}, {1.0f, 0.0f, 0.0f}, {1.25f, 0.25f, 0.0f}};
    for (int k = 0; k < 3; k++) {
        size_t len;
        void *buf = group_buf(&r, &len);
        EXPECT(buf != NULL);
        score_stats_t st = {0};
        char err[256];
        EXPECTF(score_group(buf, len, rules[k], &st, err, sizeof err) == 0, "%s", err);
        rec_group_view_t v;
        EXPECT(rec_group_view(buf, len, &v, err, sizeof err) == 0);
        for (int i = 0; i < 3; i++) {
            rec_completion_t got;
            rec_group_completion(&v, (size_t)i, &got);
            EXPECTF(fabsf(got.reward - want[k][i]) < 1e-6f, "rule %d, completion %d: reward %g, not %g", k, i,
                    got.reward, want[k][i]);
        }
        free(buf);
    }
}

static void add(assembly_t *a, uint64_t task_id, float r0, float r1)
{
    rec_completion_t c[] = {{.text = "a", .reward = r0}, {.text = "b", .reward = r1}};
    rec_group_t r = {.node = "node0",
                     .task = {.task_id = task_id, .family = "bf"},
                     .completions = c,
                     .n_completions = 2,
                     .scored = true};
    rec_group_view_t v;
    void *buf = group_buf_viewed(&r, &v);
    EXPECT(buf != NULL);
    assembly_add(a, buf, &v, group_zero_advantage(&v));
}

/* local-filter nonzero drops own groups whose rewards are all equal */
static void test_local_filter(void)
{
    for (int nonzero = 0; nonzero < 2; nonzero++) {
        char *argv[] = {"test_metrics",
                        "--local-groups",
                        "1",
                        "--external-groups",
                        "0",
                        "--completions",
                        "2",
                        "--local-filter",
                        nonzero ? "nonzero" : "all",
                        NULL};
        int argc = 9;
        config_t cfg;
        EXPECT(config_load(&cfg, &argc, argv) == 0);
        assembly_t *a = assembly_new(&cfg);
        add(a, 1, 0, 0);
        add(a, 2, 1, 1);
        add(a, 3, 0, 1);
        EXPECTF(assembly_local(a) == (nonzero ? 1u : 3u), "local-filter %d: %zu groups kept", nonzero,
                assembly_local(a));
        EXPECT(assembly_stats(a)->local_zero_adv_dropped == (nonzero ? 2 : 0));
        assembly_destroy(&a);
    }
}

/* a policy whose every group has zero advantage still steps: after
 * ASSEMBLY_ZERO_ADV_PATIENCE x I own zero-advantage groups dropped in a row
 * the next is kept, and a batch starts the count again */
static void test_local_filter_patience(void)
{
    char *argv[] = {"test_metrics",   "--local-groups", "2", "--external-groups", "0", "--completions", "2",
                    "--local-filter", "nonzero",        NULL};
    int argc = 9;
    config_t cfg;
    EXPECT(config_load(&cfg, &argc, argv) == 0);
    assembly_t *a = assembly_new(&cfg);
    int limit = ASSEMBLY_ZERO_ADV_PATIENCE * 2;
    for (int i = 0; i < limit; i++) add(a, 10 + (uint64_t)i, 0, 0);
    EXPECT(assembly_local(a) == 0 && assembly_stats(a)->local_zero_adv_dropped == limit);
    add(a, 100, 0, 0);
    add(a, 101, 1, 1);
    EXPECTF(assembly_local(a) == 2 && assembly_stats(a)->local_zero_adv_kept == 2, "%zu kept", assembly_local(a));
    EXPECT(assembly_ready(a, 0, false));
    uint8_t *buf;
    size_t len;
    EXPECT(assembly_take(a, 1, 0, "{}", &buf, &len) == 0);
    free(buf);
    add(a, 102, 0, 0);
    EXPECT(assembly_local(a) == 0 && assembly_stats(a)->local_zero_adv_dropped == limit + 1);
    assembly_destroy(&a);
}

static void test_lr_schedule(void)
{
    char *argv[] = {"test_metrics",  "--lr",   "1e-3",     "--lr-warmup", "10",
                    "--lr-schedule", "cosine", "--rounds", "110",         NULL};
    int argc = 9;
    config_t cfg;
    EXPECT(config_load(&cfg, &argc, argv) == 0);
    EXPECT_NEAR(train_lr(&cfg, 1), 1e-4, 1e-6);
    EXPECT_NEAR(train_lr(&cfg, 5), 5e-4, 1e-6);
    EXPECT_NEAR(train_lr(&cfg, 10), 1e-3, 1e-6);
    EXPECT_NEAR(train_lr(&cfg, 60), 0.55e-3, 1e-5); /* halfway down the cosine */
    EXPECT_NEAR(train_lr(&cfg, 110), 1e-4, 1e-5);
    EXPECT_NEAR(train_lr(&cfg, 500), 1e-4, 1e-5);
    char *argv2[] = {"test_metrics", "--lr", "1e-3", NULL};
    argc = 3;
    EXPECT(config_load(&cfg, &argc, argv2) == 0);
    EXPECT_NEAR(train_lr(&cfg, 1), 1e-3, 1e-7);
    EXPECT_NEAR(train_lr(&cfg, 1000), 1e-3, 1e-7);
    /* refused: cosine without an end, delta inside the clip range, a floor above 1 */
    char *bad[][5] = {{"t", "--lr-schedule", "cosine", NULL},
                      {"t", "--delta", "1.1", NULL},
                      {"t", "--reward-floor", "2", NULL},
                      {"t", "--local-filter", "some", NULL}};
    for (int i = 0; i < 4; i++) {
        argc = 3;
        EXPECTF(config_load(&cfg, &argc, bad[i]) != 0, "%s %s accepted", bad[i][1], bad[i][2]);
    }
}

/* an old name of a setting fails with its new name, rather than being
 * ignored; the new names set the fields */
static void test_renamed_settings(void)
{
    config_t cfg;
    char *now[] = {"t", "--local-groups", "3", "--external-groups", "2", NULL};
    int argc = 5;
    EXPECT(config_load(&cfg, &argc, now) == 0 && cfg.local_groups == 3 && cfg.external_groups == 2);
    char *flag[] = {"t", "--local", "3", NULL};
    argc = 3;
    EXPECT(config_load(&cfg, &argc, flag) != 0);
    const char *envs[] = {"SAPO_I", "SAPO_J", "SAPO_L", "SAPO_STALL_S"};
    for (int i = 0; i < 4; i++) {
        char *none[] = {"t", NULL};
        setenv(envs[i], "3", 1);
        argc = 1;
        EXPECTF(config_load(&cfg, &argc, none) != 0, "%s ignored", envs[i]);
        unsetenv(envs[i]);
    }
    setenv("SAPO_COMPLETIONS", "3", 1);
    setenv("SAPO_STALL_SECONDS", "7", 1);
    char *none[] = {"t", NULL};
    argc = 1;
    EXPECT(config_load(&cfg, &argc, none) == 0 && cfg.completions == 3 && cfg.stall_seconds == 7);
    unsetenv("SAPO_COMPLETIONS");
    unsetenv("SAPO_STALL_SECONDS");
}

int main(void)
{
    RUN_TEST(test_diagnostics);
    RUN_TEST(test_round_gaps);
    RUN_TEST(test_tb_groups);
    RUN_TEST(test_sampler_counters);
    RUN_TEST(test_game_counters);
    RUN_TEST(test_reward_floor);
    RUN_TEST(test_local_filter);
    RUN_TEST(test_local_filter_patience);
    RUN_TEST(test_lr_schedule);
    RUN_TEST(test_renamed_settings);
    CHECK_EXIT();
}
