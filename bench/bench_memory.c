/* Memory of a node's model processes against PyTorch's (issue 68), for
 * the tiny default, SmolLM2-135M and the Qwen2.5-Coder-0.5B with its
 * embedding held once, as the GPU preset runs it (each real
 * model where scripts/model.sh fetched it): the peak resident memory
 * (VmHWM) of a process that takes one training step at micro-batch 16 (a
 * learner's: forward, backward of sum(w * logp), AdamW), its activations
 * kept and then recomputed (and with AdamW's moments in bf16 too),
 * against bench/peer_memory.py's for the same
 * step without and with transformers' gradient checkpointing; the step's
 * speed recomputed against kept (the median of 3 steps, the Qwen's one,
 * the optimizer's included);
 * and a generator's peak over a round's
 * sampling (4 questions x 8 completions), decoding by its packed copy of
 * the weights and without. Each figure comes from a fresh process (this
 * program run again as `bench_memory step|round ...`), so no measurement
 * carries another's memory. SAPO_BENCH_QUICK=1: shorter rows, the tiny model's
 * only. Under bench/run.sh's time limit a model whose rows would not fit
 * in the time left is skipped with the reason (the Qwen's take about 30
 * minutes with their peers: make bench's 28 leave them to a run of this
 * program alone).
 *
 *   bench_memory                                   every row
 *   bench_memory step MODEL B T keep|recompute|recompute-bf16 REPS   REPS steps: "peak BYTES",
 *       "seconds S" (their median; recompute-bf16: AdamW's moments in bf16 too)
 *   bench_memory round MODEL Q L P NEW packed|unpacked  one round: "peak BYTES" */
#include "bench.h"
#include "model_steps.h"
#include "node/policy.h"
#include "train/adamw.h"
#include "util/peak.h"

#include <limits.h>
#include <omp.h>

/* the model a child measures: "tiny" (random, seed 1), or a path */
static model_t *open_model(const char *what)
{
    char err[512];
    if (strcmp(what, "tiny") == 0) {
        model_config_t c = model_config_tiny();
        return model_new_random(&c, 1, err, sizeof err);
    }
    model_t *m = model_load(what, err, sizeof err);
    if (!m) fprintf(stderr, "%s\n", err);
    return m;
}

/* `step`: one training step of B x T, the optimizer's included (its
 * moments in bf16 where bf16) */
static int child_step(const char *what, int B, int T, bool recompute, bool bf16, int reps)
{
    model_t *m = open_model(what);
    if (!m) return 1;
    model_set_recompute(m, recompute);
    batch_t b = batch_new(B, T, model_config(m)->V, 1);
    adamw_t *opt = bf16 ? adamw_new_bf16(model_num_params(m)) : adamw_new(model_num_params(m));
    adamw_params_t ap = adamw_params_default();
    float norm;
    double t[16];
    if (reps < 1 || reps > 16) reps = 1;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        model_zero_grad(m);
        if (model_forward(m, b.tokens, b.targets, B, T, 1.0f, b.logp, NULL)) return 1;
        model_backward(m, b.w);
        if (model_optimizer_step(m, opt, &ap, 1.0f, &norm)) return 1;
        t[r] = bench_now() - t0;
    }
    printf("peak %zu\nseconds %.3f\n", peak_rss(), bench_median(t, reps));
    adamw_destroy(&opt);
    batch_free(&b);
    model_destroy(&m);
    return 0;
}

/* `round`: Q prompts of P tokens, L completions of NEW tokens each */
static int child_round(const char *what, int Q, int L, int P, int NEW, bool packed)
{
    model_t *m = open_model(what);
    if (!m) return 1;
    if (!packed) model_pack_limit(1);
    model_config_t *c = (model_config_t *)model_config(m);
    c->n_eos = 0; /* every completion NEW tokens long */
    int *prompt = malloc(sizeof(int) * P), *tokens = malloc(sizeof(int) * Q * L * NEW),
        *lens = malloc(sizeof(int) * Q * L);
    float *logp = malloc(sizeof(float) * Q * L * NEW);
    const int **prompts = malloc(sizeof(int *) * Q);
    int *plen = malloc(sizeof(int) * Q);
    uint64_t *seeds = malloc(sizeof(uint64_t) * Q);
    for (int t = 0; t < P; t++) prompt[t] = (t * 37) % (c->V < 256 ? c->V : 256);
    for (int q = 0; q < Q; q++) prompts[q] = prompt, plen[q] = P, seeds[q] = (uint64_t)q + 1;
    model_gen_params_t gp = {.max_new = NEW, .sample = {1.0f, 0, 1.0f}};
    int rc = model_generate_batch(m, prompts, plen, seeds, Q, L, &gp, tokens, logp, lens);
    if (rc == 0) printf("peak %zu\n", peak_rss());
    free(prompt), free(tokens), free(lens), free(logp), free(prompts), free(plen), free(seeds);
    model_destroy(&m);
    return rc ? 1 : 0;
}

/* this program run again with args; its "peak" and "seconds" lines into
 * peak (bytes) and secs (where not NULL); -1 where it failed */
static int measure(const char *args, double *peak, double *secs)
{
    char self[PATH_MAX], cmd[PATH_MAX + 1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = 0;
    snprintf(cmd, sizeof cmd, "'%s' %s", self, args);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[256];
    *peak = 0;
    while (fgets(line, sizeof line, f)) {
        double v;
        if (sscanf(line, "peak %lf", &v) == 1) *peak = v;
        else if (secs && sscanf(line, "seconds %lf", &v) == 1) *secs = v;
    }
    return pclose(f) == 0 && *peak > 0 ? 0 : -1;
}

/* every row of one model: name (in the rows' names), what (tiny or a path) */
static void rows_of(const char *name, const char *what, int T, int reps, bool quick)
{
    int B = 16, threads = omp_get_max_threads();
    char args[PATH_MAX + 256], row[128];
    double peak[3] = {0}, secs[3] = {0};
    printf("memory: %s, a training step of %d x %d, %d threads\n", name, B, T, threads);
    fflush(stdout);
    static const char *const ways[3] = {"keep", "recompute", "recompute-bf16"};
    for (int r = 0; r < 3; r++) {
        snprintf(args, sizeof args, "step '%s' %d %d %s %d", what, B, T, ways[r], reps);
        if (measure(args, &peak[r], &secs[r]) != 0) {
            printf("bench memory_learner_%s: no figure: the step failed (%s)\n", name, args);
            return;
        }
    }
    /* the peer's step on the same weights: the tiny model saved where it can read it */
    char folder[] = "/tmp/sapo-bench-memory-XXXXXX", err[512];
    const char *peer_model = what;
    if (strcmp(what, "tiny") == 0) {
        model_t *m = open_model("tiny");
        if (!mkdtemp(folder) || !m || model_save(m, folder, false, err, sizeof err) != 0) folder[0] = 0;
        model_destroy(&m);
        peer_model = folder;
    }
    bench_peer_t p[2];
    for (int ck = 0; ck < 2; ck++) {
        snprintf(args, sizeof args, "bench/peer_memory.py '%s' --threads %d --batch %d --seq %d --checkpointing %d",
                 peer_model, threads, B, T, ck);
        /* what follows the peer: its second step, the generator's rounds */
        bench_peer_run(args, strcmp(what, "tiny") == 0 ? 15 : 60, &p[ck]);
    }
    if (strcmp(what, "tiny") == 0 && folder[0]) {
        snprintf(args, sizeof args, "rm -rf '%s'", folder);
        if (system(args) != 0) fprintf(stderr, "bench_memory: could not remove %s\n", folder);
    }
    snprintf(row, sizeof row, "memory_learner_%s_kept", name);
    bench_line_peer(row, peak[0] / 1e9, "GB", "pytorch eager, no checkpointing", &p[0], "peak", "GB");
    snprintf(row, sizeof row, "memory_learner_%s_recomputed", name);
    bench_line_peer(row, peak[1] / 1e9, "GB", "pytorch eager, gradient checkpointing", &p[1], "peak", "GB");
    snprintf(row, sizeof row, "memory_learner_%s_recomputed_bf16_moments", name);
    bench_line(row, peak[2] / 1e9, "GB", "fp32 moments", peak[1] / 1e9, "GB");
    snprintf(row, sizeof row, "train_step_%s_recomputed", name);
    bench_line(row, B * T / secs[1], "tokens/s", "the same step, activations kept", B * T / secs[0], "tokens/s");
    /* a generator's round */
    int Q = 4, L = 8, P = 96, NEW = quick ? 32 : 128;
    for (int pk = 1; pk >= 0; pk--) {
        double g;
        snprintf(args, sizeof args, "round '%s' %d %d %d %d %s", what, Q, L, P, NEW, pk ? "packed" : "unpacked");
        snprintf(row, sizeof row, "memory_generator_%s_%s", name, pk ? "packed" : "unpacked");
        if (measure(args, &g, NULL) == 0) bench_line(row, g / 1e9, "GB", NULL, 0, NULL);
        else printf("bench %s: no figure: the round failed (%s)\n", row, args);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "step") == 0)
        return child_step(argv[2], atoi(argv[3]), atoi(argv[4]), strncmp(argv[5], "recompute", 9) == 0,
                          strcmp(argv[5], "recompute-bf16") == 0, atoi(argv[6]));
    if (argc == 8 && strcmp(argv[1], "round") == 0)
        return child_round(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]),
                           strcmp(argv[7], "packed") == 0);
    if (argc != 1) {
        fprintf(stderr, "usage: bench_memory [step MODEL B T keep|recompute|recompute-bf16 REPS | round MODEL Q L "
                        "P NEW packed|unpacked]\n");
        return 2;
    }
    bool quick = bench_quick();
    int T = quick ? 128 : 256;
    rows_of("tiny", "tiny", T, 3, quick);
    const char *cache = getenv("SAPO_MODEL_CACHE");
    const char *real[][2] = {{"smollm2", "smollm2-135m"}, {"qwen05b", "qwen2.5-coder-0.5b-tied"}};
    /* about what a model's rows take on 2 cores with their peers (in a
     * full make bench, 2026-12-07, the tiny model's and SmolLM2's took
     * 6 min 57 s, the peer's checkpointed SmolLM2 step cut at 30 s): in a
     * run with a time limit, a model whose rows would not fit is skipped
     * whole, not cut half-way */
    const long need[2] = {450, 1800};
    for (int i = 0; i < 2; i++) {
        char path[PATH_MAX], err[512];
        long left = bench_time_left();
        if (!quick && left && left < need[i]) {
            char why[300];
            snprintf(why, sizeof why,
                     "needs about %ld min, %ld s left of this run's time limit: run build/release/bench/bench_memory "
                     "alone",
                     need[i] / 60, left);
            bench_skip(i ? "memory_learner_qwen05b_kept" : "memory_learner_smollm2_kept", why);
            continue;
        }
        if (quick) {
            bench_skip(i ? "memory_learner_qwen05b_kept" : "memory_learner_smollm2_kept",
                       "not in a quick run (SAPO_BENCH_QUICK): the tiny model's rows only");
            continue;
        }
        if (policy_model_path(real[i][1], cache ? cache : "", path, sizeof path, err, sizeof err) != 0) {
            char why[600];
            snprintf(why, sizeof why, "%s is not fetched (scripts/model.sh get %s)", real[i][1], real[i][1]);
            bench_skip(i ? "memory_learner_qwen05b_kept" : "memory_learner_smollm2_kept", why);
            continue;
        }
        rows_of(real[i][0], path, T, i ? 1 : 3, quick);
    }
    return 0;
}
