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
#include "group_rows.h"
#include "model/model.h"

#include <stdint.h>
#include <unistd.h>

enum { G = 4, L = 8, P = 142, CL = 20 };

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
    group_rows_t b = group_rows_new(L, P, CL, node);
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
    group_rows_free(&b);
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
