/* A round's compute on the tiny default model, in the shape of a real
 * round of the default mix: what one node at 4/0 logged over 30 rounds
 * from the seed-1 base (metrics.jsonl: completion_length 19.7 on
 * average, positions 1,206 a round for 4 packed groups, so prompts of
 * about 142 tokens). G prompts x L completions of CL new tokens are
 * sampled, then one GRPO forward and backward pass runs over them in
 * micro-batches of 16 sequences, as the learner runs them.
 *
 * Two ways: the node's (every prompt in one decode batch, one packed row
 * per group: the prompt once, each completion a segment) and the way
 * before issue 18 (a request per prompt, one row per completion), the
 * ratio of their rounds per second in the same binary. Built with
 * SAPO_ROUND_BEFORE, only the second way, against an older library
 * (bench/round_before.sh builds one and runs the two binaries in turn). */
#include "bench.h"
#include "model/model.h"

#include <stdint.h>
#include <unistd.h>

enum { G = 4, L = 8, P = 142, CL = 20 };

/* sequences of the round's training batch: rows of T tokens with their
 * targets, segment starts and loss weights */
typedef struct {
    int rows, T;
    int *tok, *tgt, *start;
    float *lp, *w;
} rows_t;

/* one packed row per group (packed), else one row per completion; 16
 * sequences, a micro-batch */
static rows_t rows_new(bool packed)
{
    rows_t b = {.rows = packed ? 16 / L : 16, .T = packed ? P - 1 + L * CL : P + CL};
    int n = b.rows * b.T;
    b.tok = malloc(sizeof(int) * n), b.tgt = malloc(sizeof(int) * n), b.start = malloc(sizeof(int) * n);
    b.lp = malloc(sizeof(float) * n), b.w = malloc(sizeof(float) * n);
    for (int r = 0; r < b.rows; r++)
        for (int t = 0; t < b.T; t++) {
            int k = r * b.T + t, seg = packed && t >= P - 1 ? (t - (P - 1)) / CL : 0;
            bool comp = packed ? t >= P - 1 : t >= P - 1 && t < b.T - 1;
            b.tok[k] = 'a' + (t * 7 + r) % 26;
            b.tgt[k] = comp ? 'a' + (t * 5 + r) % 26 : -1;
            b.start[k] = packed && t >= P - 1 ? P - 1 + seg * CL : 0;
            b.w[k] = comp ? 0.01f : 0.0f;
        }
    return b;
}

static void rows_free(rows_t *b) { free(b->tok), free(b->tgt), free(b->start), free(b->lp), free(b->w); }

/* median seconds of a round, the node's way (node) or the earlier one;
 * *gen and *train: the medians of its two parts */
static double round_time(model_t *m, bool node, int reps, double *gen, double *train)
{
    static int prompt[G * P], tok[G * L * CL], len[G * L];
    static float lp[G * L * CL];
    const int *prompts[G];
    int plen[G];
    uint64_t seeds[G];
    for (int q = 0; q < G; q++) {
        for (int i = 0; i < P; i++) prompt[q * P + i] = 'a' + (i * 3 + q) % 26;
        prompts[q] = prompt + q * P, plen[q] = P, seeds[q] = q + 1;
    }
    (void)plen; /* read by the batch only */
    model_gen_params_t gp = {.max_new = CL, .sample = {.temperature = 1, .top_k = 0, .top_p = 1}};
    rows_t b = rows_new(node);
    double tg[32], tt[32], tr[32];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
#ifndef SAPO_ROUND_BEFORE
        if (node && model_generate_batch(m, prompts, plen, seeds, G, L, &gp, tok, lp, len)) exit(1);
#endif
        for (int q = 0; !node && q < G; q++) {
            gp.seed = seeds[q];
            if (model_generate(m, prompts[q], P, L, &gp, tok, lp, len)) exit(1);
        }
        double t1 = bench_now();
        model_zero_grad(m);
        for (int mb = 0; mb < G * L / 16; mb++) {
#ifndef SAPO_ROUND_BEFORE
            if (model_forward_packed(m, b.tok, b.tgt, node ? b.start : NULL, b.rows, b.T, 1.0f, b.lp, NULL)) exit(1);
#else
            if (model_forward(m, b.tok, b.tgt, b.rows, b.T, 1.0f, b.lp, NULL)) exit(1);
#endif
            model_backward(m, b.w);
        }
        double t2 = bench_now();
        if (r >= 0) tg[r] = t1 - t0, tt[r] = t2 - t1, tr[r] = t2 - t0;
    }
    rows_free(&b);
    *gen = bench_median(tg, reps), *train = bench_median(tt, reps);
    return bench_median(tr, reps);
}

int main(int argc, char **argv)
{
    /* idle OpenMP threads sleep, as in bench_model (see there) */
    if (argc > 0 && !getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    int reps = bench_quick() ? 3 : 15;
    char err[256];
    model_config_t c = model_config_tiny();
    c.n_eos = 0; /* every completion CL tokens */
    model_t *m = model_new_random(&c, 1, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("round of the default mix: %d prompts of %d tokens x %d completions of %d, sampled, then one GRPO "
           "forward and backward pass over them (median of %d)\n",
           G, P, L, CL, reps);
    double bg, bt, before = round_time(m, false, reps, &bg, &bt);
#ifdef SAPO_ROUND_BEFORE
    printf("round the way before issue 18: %.4f s (sampling %.4f s, training %.4f s)\n", before, bg, bt);
#else
    double ng, nt, node = round_time(m, true, reps, &ng, &nt);
    printf("round the node's way: %.4f s (sampling %.4f s, training %.4f s); a request per prompt and a row per "
           "completion: %.4f s (%.4f s, %.4f s)\n",
           node, ng, nt, before, bg, bt);
    bench_line("round_tiny", 1 / node, "rounds/s", "a request per prompt, a row per completion", 1 / before,
               "rounds/s");
#endif
    model_destroy(&m);
    return 0;
}
