/* The learner's resume points: the latest checkpoint's state.json and the
 * last complete metrics line, under the policy version's one name and
 * under the name files written before it carried ("version"); and the
 * bound on what it keeps on disk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "../learner/checkpoint.h"

static char run[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* run/ckpt/NAME/state.json holding state, and latest pointing at it */
static void checkpoint(const char *name, const char *state)
{
    char path[256];
    snprintf(path, sizeof path, "%s/ckpt", run);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/ckpt/%s", run, name);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/ckpt/%s/state.json", run, name);
    write_file(path, state);
    snprintf(path, sizeof path, "%s/ckpt/latest", run);
    unlink(path);
    if (symlink(name, path) != 0) {
        perror(path);
        exit(1);
    }
}

static void test_latest_state(void)
{
    char dir[512], err[256] = "";
    checkpoint_state_t st = {0};
    EXPECT(checkpoint_latest(run, dir, sizeof dir, &st, err, sizeof err) == 1);
    checkpoint("r00000005", "{\"round\": 5, \"policy_version\": 4}\n");
    EXPECTF(checkpoint_latest(run, dir, sizeof dir, &st, err, sizeof err) == 0, "%s", err);
    EXPECT(st.round == 5 && st.policy_version == 4);
    EXPECT(strstr(dir, "/ckpt/r00000005") != NULL);
    /* a checkpoint of a build before the rename */
    checkpoint("r00000007", "{\"round\": 7, \"version\": 6}\n");
    EXPECTF(checkpoint_latest(run, dir, sizeof dir, &st, err, sizeof err) == 0, "%s", err);
    EXPECT(st.round == 7 && st.policy_version == 6);
    checkpoint("r00000008", "{\"round\": 8}\n");
    EXPECT(checkpoint_latest(run, dir, sizeof dir, &st, err, sizeof err) == -1);
    EXPECTF(strstr(err, "needs numbers round and policy_version") != NULL, "%s", err);
}

static void test_last_logged_round(void)
{
    char path[256];
    uint64_t version = 99;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    EXPECT(checkpoint_last_logged_round(path, &version) == 0 && version == 0);
    /* the last complete line counts; a line cut by a kill does not */
    write_file(path, "{\"round\":3,\"policy_version\":3}\n{\"round\":4,\"policy_version\":5}\n{\"round\":5,\"pol");
    version = 0;
    EXPECT(checkpoint_last_logged_round(path, &version) == 4);
    EXPECT(version == 5);
    write_file(path, "{\"round\":9,\"version\":8}\n");
    version = 0;
    EXPECT(checkpoint_last_logged_round(path, &version) == 9);
    EXPECT(version == 8);
}

/* the disk bound the learner states: one version and one checkpoint
 * beyond those kept, while the newest is written */
static void test_disk_bound(void)
{
    /* the Qwen2.5-0.5B's 494,032,768 parameters at the defaults (4 fp32
     * versions, 2 checkpoints): 5 x 1.98 GB + 3 x 5.93 GB */
    EXPECT(checkpoint_disk_bytes(494032768, 4, false, 2) == 27665835008ull);
    /* bf16 versions, 2 of them, 1 checkpoint */
    EXPECT(checkpoint_disk_bytes(494032768, 2, true, 1) == 3 * 988065536ull + 2 * 5928393216ull);
    EXPECT(checkpoint_disk_bytes(1000, 2, true, 1) < checkpoint_disk_bytes(1000, 2, false, 1));
}

int main(void)
{
    snprintf(run, sizeof run, "/tmp/sapo-test-ckpt-XXXXXX");
    if (!mkdtemp(run)) {
        perror("mkdtemp");
        return 1;
    }
    RUN_TEST(test_latest_state);
    RUN_TEST(test_last_logged_round);
    RUN_TEST(test_disk_bound);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", run);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", run);
    CHECK_EXIT();
}
