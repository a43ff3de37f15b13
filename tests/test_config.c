/* Presets (config.c): a named file of SAPO_SETTING=VALUE lines over the
 * defaults, under the environment and flags; a bad line or a missing
 * file is refused with its place; every preset in config/presets loads. */
#include "check.h"
#include "node/config.h"

#include <dirent.h>
#include <unistd.h>

static char path[64];

static void write_preset(const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int load(config_t *cfg, const char *a1, const char *a2, const char *a3, const char *a4)
{
    char *argv[] = {"test_config", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
    int argc = 1 + (a1 != NULL) + (a2 != NULL) + (a3 != NULL) + (a4 != NULL);
    return config_load(cfg, &argc, argv);
}

static void test_preset_layers(void)
{
    write_preset("# a comment\n\nSAPO_LR=2e-6\nSAPO_MAX_NEW_TOKENS=200\n  SAPO_SYSTEM_PROMPT=\"say <answer>\"\n"
                 "SAPO_LOCAL_FILTER=all\n");
    config_t cfg;
    EXPECT(load(&cfg, "--preset", path, NULL, NULL) == 0);
    EXPECT_NEAR(cfg.lr, 2e-6, 1e-6);
    EXPECT(cfg.max_new_tokens == 200 && strcmp(cfg.system_prompt, "say <answer>") == 0);
    EXPECT(cfg.local_filter == FILTER_ALL && cfg.completions == 8);
    /* the environment over the preset, a flag over both */
    setenv("SAPO_MAX_NEW_TOKENS", "100", 1);
    EXPECT(load(&cfg, "--preset", path, "--lr", "3e-6") == 0);
    EXPECT(cfg.max_new_tokens == 100);
    EXPECT_NEAR(cfg.lr, 3e-6, 1e-6);
    unsetenv("SAPO_MAX_NEW_TOKENS");
    setenv("SAPO_PRESET", path, 1);
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.max_new_tokens == 200);
    unsetenv("SAPO_PRESET");
}

static void test_preset_refused(void)
{
    static const char *bad[] = {"SAPO_NO_SUCH=1\n", "SAPO_LR\n", "SAPO_LR=fast\n", "SAPO_PRESET=other\n",
                                "SAPO_LOCAL_FILTER=some\n"};
    config_t cfg;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_preset(bad[i]);
        EXPECTF(load(&cfg, "--preset", path, NULL, NULL) != 0, "%s accepted", bad[i]);
    }
    EXPECT(load(&cfg, "--preset", "no-such-preset", NULL, NULL) != 0);
}

/* every switch takes 0 or 1 and nothing else, from a flag as from the
 * environment; the logits' chunk a count of positions */
static void test_switches(void)
{
    config_t cfg;
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.fused_logp == 0 && cfg.inference_only == 0);
    EXPECT(load(&cfg, "--fused-logp", "1", "--inference-only", "1") == 0 && cfg.fused_logp == 1 &&
           cfg.inference_only == 1);
    EXPECT(load(&cfg, "--direct-bf16", "1", NULL, NULL) == 0 && cfg.direct_bf16 == 1);
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.direct_heads == 0);
    EXPECT(load(&cfg, "--direct-heads", "1", NULL, NULL) == 0 && cfg.direct_heads == 1);
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.decode_graphs == 0);
    EXPECT(load(&cfg, "--decode-graphs", "1", NULL, NULL) == 0 && cfg.decode_graphs == 1);
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.fused_adamw == 0);
    EXPECT(load(&cfg, "--fused-adamw", "1", NULL, NULL) == 0 && cfg.fused_adamw == 1);
    EXPECT(load(&cfg, "--grouped-decode", "1", NULL, NULL) == 0 && cfg.grouped_decode == 1);
    EXPECT(load(&cfg, "--logits-chunk", "4096", NULL, NULL) == 0 && cfg.logits_chunk == 4096);
    EXPECT(load(&cfg, "--logits-chunk", "-5", NULL, NULL) != 0);
    setenv("SAPO_INFERENCE_ONLY", "-1", 1);
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) != 0);
    unsetenv("SAPO_INFERENCE_ONLY");
    static const char *const switches[] = {"--lockstep",       "--shared-prompt",  "--warmstart-optimizer",
                                           "--mask-truncated", "--external-train", "--inference-only",
                                           "--fused-logp",     "--direct-bf16",    "--direct-heads",
                                           "--decode-graphs",  "--grouped-decode", "--fused-adamw"};
    for (size_t i = 0; i < sizeof switches / sizeof *switches; i++) {
        EXPECTF(load(&cfg, switches[i], "0", NULL, NULL) == 0, "%s 0 refused", switches[i]);
        EXPECTF(load(&cfg, switches[i], "2", NULL, NULL) != 0, "%s 2 accepted", switches[i]);
        EXPECTF(load(&cfg, switches[i], "01", NULL, NULL) != 0, "%s 01 accepted", switches[i]);
    }
}

/* the pool's seconds, read as what they are (pool-window-seconds was
 * once a double written as a float: 60 became a denormal near 0, and no
 * window in time applied) */
static void test_pool_seconds(void)
{
    config_t cfg;
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.pool_window_seconds == 0 && cfg.pool_deadline == 2);
    EXPECT(load(&cfg, "--pool-window-seconds", "60", "--pool-deadline", "0.5") == 0 && cfg.pool_window_seconds == 60 &&
           cfg.pool_deadline == 0.5f);
    setenv("SAPO_POOL_DEADLINE", "1", 1);
    EXPECT(load(&cfg, NULL, NULL, NULL, NULL) == 0 && cfg.pool_deadline == 1);
    unsetenv("SAPO_POOL_DEADLINE");
    EXPECT(load(&cfg, "--pool-deadline", "-1", NULL, NULL) != 0);
}

/* every preset the project ships names settings that exist, with values
 * they take */
static void test_shipped_presets(void)
{
    DIR *d = opendir("config/presets");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".env") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)len - 4, e->d_name);
        config_t cfg;
        EXPECTF(load(&cfg, "--preset", name, NULL, NULL) == 0, "preset %s", name);
        n++;
    }
    if (d) closedir(d);
    EXPECT(n > 0);
}

int main(void)
{
    snprintf(path, sizeof path, "/tmp/test_config.%d.env", (int)getpid());
    RUN_TEST(test_preset_layers);
    RUN_TEST(test_switches);
    RUN_TEST(test_pool_seconds);
    RUN_TEST(test_preset_refused);
    RUN_TEST(test_shipped_presets);
    unlink(path);
    return check_failures ? 1 : 0;
}
