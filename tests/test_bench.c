/* The benchmarks' shared helpers (bench/bench.h): the CPU's flags as
 * SAPO_BENCH_HIDE_FLAGS leaves them, why a bf16 row is skipped, a peer's
 * time limit from SAPO_BENCH_DEADLINE, and a peer's figures read line by
 * line (a stand-in .venv/bin/python in a folder of its own), with the
 * lines bench/run.sh collects. */
#include "../bench/bench.h"
#include "check.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

static void test_flag_hidden(void)
{
    setenv("SAPO_BENCH_HIDE_FLAGS", "avx512_bf16,amx_bf16", 1);
    EXPECT(bench_flag_hidden("avx512_bf16"));
    EXPECT(bench_flag_hidden("amx_bf16"));
    EXPECT(!bench_flag_hidden("avx512"));
    EXPECT(!bench_flag_hidden("bf16"));
    EXPECT(!bench_flag_hidden("amx_bf16x"));
    setenv("SAPO_BENCH_HIDE_FLAGS", "sse,,fpu", 1);
    EXPECT(bench_flag_hidden("fpu") && bench_flag_hidden("sse") && !bench_flag_hidden("ss"));
    unsetenv("SAPO_BENCH_HIDE_FLAGS");
    EXPECT(!bench_flag_hidden("fpu"));
}

/* every x86-64 CPU has fpu and sse2 */
static void test_cpu_flag(void)
{
    bool hidden = true;
    EXPECT(bench_cpu_flag("fpu", &hidden) && !hidden);
    EXPECT(!bench_cpu_flag("fp", NULL) && !bench_cpu_flag("no_such_flag", NULL));
    setenv("SAPO_BENCH_HIDE_FLAGS", "fpu", 1);
    EXPECT(!bench_cpu_flag("fpu", &hidden) && hidden);
    EXPECT(bench_cpu_flag("sse2", &hidden) && !hidden);
    unsetenv("SAPO_BENCH_HIDE_FLAGS");
}

static void test_bf16_missing(void)
{
    bool has = bench_cpu_flag("avx512_bf16", NULL) || bench_cpu_flag("amx_bf16", NULL);
    EXPECT(!bench_bf16_missing() == has);
    setenv("SAPO_BENCH_HIDE_FLAGS", "avx512_bf16,amx_bf16", 1);
    const char *why = bench_bf16_missing();
    EXPECTF(why && strstr(why, has ? "hidden by SAPO_BENCH_HIDE_FLAGS" : "which this CPU lacks"), "%s", why);
    setenv("SAPO_BENCH_HIDE_FLAGS", "avx512_bf16", 1);
    EXPECT(!bench_bf16_missing() == bench_cpu_flag("amx_bf16", NULL));
    unsetenv("SAPO_BENCH_HIDE_FLAGS");
}

static void test_peer_limit(void)
{
    char at[32];
    unsetenv("SAPO_BENCH_DEADLINE");
    EXPECT(bench_peer_limit(30) == 0);
    snprintf(at, sizeof at, "%ld", (long)time(NULL) + 100);
    setenv("SAPO_BENCH_DEADLINE", at, 1);
    long limit = bench_peer_limit(30);
    EXPECTF(limit >= 68 && limit <= 70, "%ld", limit);
    snprintf(at, sizeof at, "%ld", (long)time(NULL) - 5);
    setenv("SAPO_BENCH_DEADLINE", at, 1);
    EXPECT(bench_peer_limit(30) == 10);
    unsetenv("SAPO_BENCH_DEADLINE");
}

/* what fn(arg) prints on stdout */
static char *stdout_of(void (*fn)(const bench_peer_t *), const bench_peer_t *arg, const char *path)
{
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    close(fd);
    fn(arg);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    static char text[4096];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    return text;
}

static void print_rows(const bench_peer_t *p)
{
    bench_line_peer("row_train", 12.5, "tokens/s", "pytorch eager", p, "train", "tokens/s");
    bench_line_peer("row_bf16", 20, "tokens/s", "pytorch eager, bf16 autocast", p, "trainbf16", "tokens/s");
    bench_line_peer("row_gen", 3, "tokens/s", "transformers generate", p, "gen", "tokens/s");
    bench_skip("row_skipped", "needs AVX512-BF16 or AMX");
}

/* a peer that printed two figures, then was cut off at its limit
 * (timeout's status 124) */
static void test_peer_run(void)
{
    char dir[] = "/tmp/sapo-test-bench-XXXXXX", old[PATH_MAX], path[PATH_MAX + 64];
    if (!mkdtemp(dir) || !getcwd(old, sizeof old) || chdir(dir) != 0) SKIP_TEST("no temporary folder");
    bench_peer_t p;
    EXPECT(bench_peer_run("bench/peer_torch.py x", 30, &p) == -1 && strstr(p.failed, "no .venv"));
    mkdir(".venv", 0700);
    mkdir(".venv/bin", 0700);
    FILE *f = fopen(".venv/bin/python", "w");
    fprintf(f, "#!/bin/sh\necho 'train 5.5'\necho 'trainbf16 skipped no bf16 here'\necho 'not a figure'\nexit 124\n");
    fclose(f);
    chmod(".venv/bin/python", 0700);
    snprintf(path, sizeof path, "%s/out", dir);
    EXPECT(bench_peer_run("bench/peer_torch.py x", 30, &p) == 0);
    EXPECTF(p.n == 2 && strstr(p.failed, "cut off"), "%d figures, %s", p.n, p.failed);
    const char *text = stdout_of(print_rows, &p, path);
    EXPECTF(strstr(text, "bench row_train: 12.5 tokens/s (pytorch eager: 5.5 tokens/s, ratio 2.27)\n") &&
                strstr(text, "bench row_bf16: 20 tokens/s (pytorch eager, bf16 autocast: no figure: no bf16 here)\n") &&
                strstr(text, "bench row_gen: 3 tokens/s (transformers generate: no figure: cut off after ") &&
                strstr(text, "bench row_skipped: skipped: needs AVX512-BF16 or AMX\n"),
            "%s", text);
    if (chdir(old) != 0) EXPECT(!"back to the first folder");
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    EXPECT(system(path) == 0);
}

int main(void)
{
    RUN_TEST(test_flag_hidden);
    RUN_TEST(test_cpu_flag);
    RUN_TEST(test_bf16_missing);
    RUN_TEST(test_peer_limit);
    RUN_TEST(test_peer_run);
    return check_failures ? 1 : 0;
}
