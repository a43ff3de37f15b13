/* The sampler's batch assembly (sampler/assembly.c) on real group
 * records: a local group that comes again (the broker delivers at least
 * once) is dropped and counted, an external group of the same task id is
 * not, and a batch holds I local and J external groups, or I + J local ones
 * when the pool is dry, its local groups in task order. */
#include "check.h"
#include "../sampler/assembly.h"
#include "node/config.h"
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
    size_t len;
    void *buf = group_buf(&r, &len); /* malloc'ed: assembly_add frees it */
    EXPECT(buf != NULL);
    EXPECTF(assembly_add(a, buf, len) == expect_kept, "task %llu external %d: kept should be %d",
            (unsigned long long)task_id, external, expect_kept);
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

int main(void)
{
    RUN_TEST(test_duplicates_and_batches);
    RUN_TEST(test_local_groups_in_task_order);
    CHECK_EXIT();
}
