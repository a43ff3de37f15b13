/* The timed parts of a model benchmark, shared by bench_model (the tiny
 * default) and bench_real (real checkpoints): a made-up training batch,
 * the median seconds of a training step (forward and backward of
 * sum(w * logp)), and of sampling a round of completions; and which bf16
 * kernels the CPU offers them, flags hidden or not (bench.h). */
#ifndef SAPO_BENCH_MODEL_STEPS_H
#define SAPO_BENCH_MODEL_STEPS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"
#include "model/model_impl.h"

typedef struct {
    int B, T;
    int *tokens, *targets;
    float *w, *logp;
} batch_t;

static inline batch_t batch_new(int B, int T, int V, unsigned seed)
{
    batch_t b = {B,
                 T,
                 malloc(sizeof(int) * B * T),
                 malloc(sizeof(int) * B * T),
                 malloc(sizeof(float) * B * T),
                 malloc(sizeof(float) * B * T)};
    srand(seed);
    for (int i = 0; i < B * T; i++) b.tokens[i] = rand() % (V < 256 ? V : 256);
    for (int i = 0; i < B * T; i++) {
        b.targets[i] = i % T == T - 1 ? -1 : b.tokens[i + 1];
        b.w[i] = b.targets[i] >= 0 ? (float)(rand() % 200 - 100) / 1e4f : 0;
    }
    return b;
}

static inline void batch_free(batch_t *b)
{
    free(b->tokens);
    free(b->targets);
    free(b->w);
    free(b->logp);
}

/* median seconds of one training step */
static inline double train_step(model_t *m, batch_t *b, int reps)
{
    double t[16];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        model_zero_grad(m);
        if (model_forward(m, b->tokens, b->targets, b->B, b->T, 1.0f, b->logp, NULL)) exit(1);
        model_backward(m, b->w);
        if (r >= 0) t[r] = bench_now() - t0;
    }
    return bench_median(t, reps);
}

/* median seconds to sample L completions of max_new tokens for each of Q
 * prompts: one request per prompt, or all Q in one decode batch; one run
 * untimed first (page faults, a device's first launches) */
static inline double generate(model_t *m, int Q, int P, int L, int max_new, bool batched, int reps)
{
    int *prompt = malloc(sizeof(int) * Q * P), *tok = malloc(sizeof(int) * Q * L * max_new);
    int *len = malloc(sizeof(int) * Q * L), plen[64];
    float *lp = malloc(sizeof(float) * Q * L * max_new);
    const int *prompts[64];
    uint64_t seeds[64];
    for (int q = 0; q < Q; q++) {
        for (int i = 0; i < P; i++) prompt[q * P + i] = 'a' + (i + q) % 26;
        prompts[q] = prompt + q * P;
        plen[q] = P;
    }
    model_gen_params_t gp = {.max_new = max_new, .sample = {.temperature = 1, .top_k = 0, .top_p = 1}};
    double t[16];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        for (int q = 0; q < Q; q++) seeds[q] = 100 * (r + 1) + q;
        if (batched && model_generate_batch(m, prompts, plen, seeds, Q, L, &gp, tok, lp, len)) exit(1);
        for (int q = 0; !batched && q < Q; q++) {
            gp.seed = seeds[q];
            if (model_generate(m, prompts[q], P, L, &gp, tok, lp, len)) exit(1);
        }
        if (r >= 0) t[r] = bench_now() - t0;
    }
    free(prompt);
    free(tok);
    free(len);
    free(lp);
    return bench_median(t, reps);
}

/* Whether bf16 kernel k runs here as the benchmarks see the CPU: it has
 * the kernel, and no flag the kernel needs is hidden by
 * SAPO_BENCH_HIDE_FLAGS (the AMX kernel needs AVX512-BF16 as well) */
static inline bool bench_bf16_shown(model_bf16_kernel_t k)
{
    return model_bf16_has(k) && bench_cpu_flag("avx512_bf16", NULL) &&
           (k != MODEL_BF16_AMX || bench_cpu_flag("amx_bf16", NULL));
}

/* Backend cpu-bf16 on m with the best kernel bench_bf16_shown allows:
 * NULL, or why the bf16 rows are skipped (err holds it where the backend
 * refused) */
static inline const char *bench_use_bf16(model_t *m, char *err, size_t errlen)
{
    const char *missing = bench_bf16_missing();
    if (missing) return missing;
    if (!bench_bf16_shown(MODEL_BF16_AMX)) model_bf16_use(MODEL_BF16_AVX512BF16);
    return model_set_backend(m, "cpu-bf16", err, errlen) == 0 ? NULL : err;
}

#endif
