/* The sampler's batch assembly (sampler/assembly.c) on real group
 * records: a local group that comes again (the broker delivers at least
 * once) is dropped and counted, an external group of the same task id is
 * not, and a batch holds I local and J external groups, or I + J local ones
 * when the pool is dry, its local groups in task order. */
#include "check.h"
#include "../sampler/assembly.h"
#include "node/config.h"
#include "node/score.h"
#include "records.h"
#include "group_buf.h"

/* a scored group of L completions, rewards 0 and 1 alternating */
static void add(assembly_t *a, const config_t *cfg, uint64_t task_id, bool external, bool expect_kept)
{
    rec_completion_t c[16];
    for (int i = 0; i < cfg->completions; i++)
        c[i] = (rec_completion_t){.text = "<answer>2</answer>", .reward = (float)(i % 2)};
    rec_group_t r = {.node = external ? "peer" : cfg->node,
                     .policy_version = 0,
                     .task = {.task_id = task_id, .family = "basic_arithmetic", .question = "1 + 1 =", .answer = "2"},
                     .completions = c,
                     .n_completions = (size_t)cfg->completions,
                     .external = external,
                     .scored = true};
    rec_group_view_t v;
    void *buf = group_buf_viewed(&r, &v); /* malloc'ed: assembly_add frees it */
    EXPECT(buf != NULL);
    EXPECTF(assembly_add(a, buf, &v, group_zero_advantage(&v)) == expect_kept,
            "task %llu external %d: kept should be %d", (unsigned long long)task_id, external, expect_kept);
}

/* an assembly for I local and J external groups of 4 completions */
static assembly_t *assembly_ij(config_t *cfg, char *I, char *J)
{
    char *argv[] = {"test_assembly", "--local-groups", I, "--external-groups", J, "--completions", "4", NULL};
    int argc = 7;
    EXPECT(config_load(cfg, &argc, argv) == 0);
    return assembly_new(cfg);
}

/* the batch assembly's one batch: taken, and its view */
static uint8_t *take_batch(assembly_t *a, rec_batch_view_t *b)
{
    uint8_t *buf;
    size_t len;
    char err[128];
    EXPECT(assembly_take(a, 1, 0, "{}", &buf, &len) == 0);
    EXPECTF(rec_batch_view(buf, len, b, err, sizeof err) == 0, "%s", err);
    return buf;
}

static void test_duplicates_and_batches(void)
{
    config_t cfg;
    assembly_t *a = assembly_ij(&cfg, "2", "2");
    add(a, &cfg, 1, false, true);
    add(a, &cfg, 1, false, false); /* the same task again */
    add(a, &cfg, 2, false, true);
    add(a, &cfg, 1, true, true); /* another node's task 1 is another question */
    EXPECT(assembly_stats(a)->duplicate_dropped == 1);
    EXPECT(assembly_repeat(a, 1) && assembly_repeat(a, 2) && !assembly_repeat(a, 3));
    EXPECT(assembly_local(a) == 2 && assembly_external(a) == 1);
    EXPECT(!assembly_ready(a, 0, false)); /* J = 2, one external */
    add(a, &cfg, 3, false, true);
    add(a, &cfg, 4, false, true);
    EXPECT(assembly_ready(a, 0, true)); /* fallback: 4 local + 1 external */
    rec_batch_view_t b;
    uint8_t *buf = take_batch(a, &b);
    EXPECTF(b.b.local_count == 3 && b.b.external_count == 1, "batch of %u local, %u external", b.b.local_count,
            b.b.external_count);
    EXPECT(assembly_stats(a)->fallback_batches == 1);
    rec_free(buf);
    /* the ids taken stay remembered after the batch */
    add(a, &cfg, 2, false, false);
    EXPECT(assembly_stats(a)->duplicate_dropped == 2);
    /* the memory is a window: an id older than ASSEMBLY_SEEN_MAX is new again */
    for (uint64_t id = 100; id < 100 + ASSEMBLY_SEEN_MAX; id++) add(a, &cfg, id, false, true);
    add(a, &cfg, 1, false, true);
    assembly_destroy(&a);
    EXPECT(a == NULL);
}

/* groups that came back 3, 1, 2 go to the learner as 1, 2, 3 */
static void test_local_groups_in_task_order(void)
{
    config_t cfg;
    assembly_t *a = assembly_ij(&cfg, "3", "0");
    add(a, &cfg, 3, false, true);
    add(a, &cfg, 1, false, true);
    add(a, &cfg, 2, false, true);
    EXPECT(assembly_ready(a, 0, false));
    rec_batch_view_t b;
    uint8_t *buf = take_batch(a, &b);
    EXPECT(b.b.local_count == 3);
    for (size_t i = 0; i < 3; i++) {
        rec_group_view_t g;
        rec_batch_group(&b, i, &g);
        EXPECTF(g.r.task.task_id == i + 1, "group %zu: task %llu", i, (unsigned long long)g.r.task.task_id);
    }
    rec_free(buf);
    assembly_destroy(&a);
}

/* a peer's group as the sampler hands it over: its record as published
 * (rewards 0, not external), its view marked external with its ages and
 * this node's rewards, which last (the caller's array goes away) */
static void add_rescored(assembly_t *a, const config_t *cfg)
{
    rec_completion_t c[4];
    for (int i = 0; i < 4; i++) c[i] = (rec_completion_t){.text = "<answer>2</answer>", .reward = 0};
    rec_group_t r = {.node = "peer",
                     .task = {.task_id = 9, .family = "basic_arithmetic", .question = "1 + 1 =", .answer = "2"},
                     .completions = c,
                     .n_completions = 4,
                     .scored = true};
    rec_group_view_t v;
    void *buf = group_buf_viewed(&r, &v);
    EXPECT(buf != NULL);
    float ours[4] = {1, 0, 0, 1};
    v.rewards = ours;
    v.r.external = true;
    v.r.pool_age_ms = 1500;
    v.r.pool_age_rounds = 2;
    EXPECT(cfg->completions == 4 && assembly_add(a, buf, &v, group_zero_advantage(&v)));
}

/* an external group goes into the batch as it was viewed here: external,
 * with its ages and this node's rewards, not its publisher's */
static void test_rescored_external(void)
{
    config_t cfg;
    assembly_t *a = assembly_ij(&cfg, "1", "1");
    add(a, &cfg, 1, false, true);
    add_rescored(a, &cfg);
    EXPECT(assembly_ready(a, 0, false));
    rec_batch_view_t b;
    uint8_t *buf = take_batch(a, &b);
    EXPECT(b.b.local_count == 1 && b.b.external_count == 1);
    rec_group_view_t g;
    rec_batch_group(&b, 1, &g);
    EXPECT(g.r.external && g.r.scored && g.r.pool_age_ms == 1500 && g.r.pool_age_rounds == 2);
    const float want[4] = {1, 0, 0, 1};
    for (size_t i = 0; i < 4; i++) {
        rec_completion_t c;
        rec_group_completion(&g, i, &c);
        EXPECTF(c.reward == want[i], "completion %zu: reward %g, not %g", i, c.reward, want[i]);
    }
    rec_free(buf);
    assembly_destroy(&a);
}

int main(void)
{
    RUN_TEST(test_duplicates_and_batches);
    RUN_TEST(test_local_groups_in_task_order);
    RUN_TEST(test_rescored_external);
    CHECK_EXIT();
}
