/* Speed of the pieces around the model: random numbers (cuRAND's host
 * generator and the own Philox), one token draw at Qwen's vocabulary size
 * for each sampling mode, the GRPO loss with its gradient over a batch,
 * and an AdamW step with gradient clipping over many parameters.
 * SAPO_BENCH_QUICK=1: short. Prints one line per case. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sampling/rng.h"
#include "sampling/sample.h"
#include "train/adamw.h"
#include "train/grpo.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench_rng(int quick)
{
    size_t n = quick ? 1u << 20 : 1u << 24;
    float *x = malloc(n * sizeof *x);
    rng_t *r = rng_new(1);
    double t0 = now();
    rng_uniform(r, x, n);
    double t1 = now();
    rng_philox_uniform(1, 0, x, n);
    double t2 = now();
    printf("rng: %zu floats: rng_uniform %.0f M/s, own Philox %.0f M/s\n", n, n / (t1 - t0) / 1e6, n / (t2 - t1) / 1e6);
    rng_destroy(&r);
    /* a generation request seeds a generator and draws its numbers once */
    const int reqs = quick ? 10 : 100;
    t0 = now();
    for (int i = 0; i < reqs; i++) {
        r = rng_new((uint64_t)i);
        rng_uniform(r, x, 512);
        rng_destroy(&r);
    }
    t1 = now();
    for (int i = 0; i < reqs; i++) rng_philox_uniform((uint64_t)i, 0, x, 512);
    t2 = now();
    printf("rng: per request (seed, 512 floats): rng_new+rng_uniform %.1f us, own Philox %.1f us\n",
           (t1 - t0) / reqs * 1e6, (t2 - t1) / reqs * 1e6);
    free(x);
}

static void bench_sample(int quick)
{
    const int V = 151936; /* Qwen2.5 */
    const int reps = quick ? 20 : 200;
    float *logits = malloc(V * sizeof *logits), *u = malloc(reps * sizeof *u);
    void *scratch = malloc(sample_scratch_bytes(V));
    rng_philox_uniform(9, 0, logits, V);
    /* a language-model-like spread: a few likely tokens over a long tail */
    for (int i = 0; i < V; i++) logits[i] = 12.0f * logits[i] * logits[i] * logits[i] * logits[i] - 4.0f;
    rng_philox_uniform(10, 0, u, reps);
    const struct {
        const char *name;
        sample_params_t p;
    } modes[] = {
        {"greedy", {0.0f, 0, 1.0f}},
        {"T=1", {1.0f, 0, 1.0f}},
        {"T=0.7 top_k=50", {0.7f, 50, 1.0f}},
        {"T=1 top_p=0.9", {1.0f, 0, 0.9f}},
        {"T=0.7 top_k=50 top_p=0.95", {0.7f, 50, 0.95f}},
    };
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        float lp;
        volatile int sink = 0;
        double t0 = now();
        for (int i = 0; i < reps; i++) sink += sample_token(logits, V, &modes[m].p, u[i], scratch, &lp);
        double dt = (now() - t0) / reps;
        printf("sample_token V=%d %-26s %8.1f us/token\n", V, modes[m].name, dt * 1e6);
    }
    free(logits);
    free(u);
    free(scratch);
}

static void bench_grpo(int quick)
{
    const int B = 64, T = 1024, reps = quick ? 5 : 50;
    size_t n = (size_t)B * T;
    float *logp = malloc(n * sizeof *logp), *old = malloc(n * sizeof *old);
    float *mask = malloc(n * sizeof *mask), *d = malloc(n * sizeof *d), adv[64];
    rng_philox_uniform(3, 0, logp, n);
    rng_philox_uniform(4, 0, old, n);
    for (size_t i = 0; i < n; i++) {
        logp[i] = -3.0f * logp[i];
        old[i] = logp[i] + 0.2f * (old[i] - 0.5f);
        mask[i] = (i % T) < (size_t)(T / 2 + (i / T) * 8);
    }
    for (int b = 0; b < B; b++) adv[b] = (b % 3) - 1.0f;
    grpo_params_t p = grpo_params_default(T);
    double t0 = now();
    for (int i = 0; i < reps; i++) grpo_loss(&p, B, T, logp, old, NULL, mask, adv, d, NULL);
    double dt = (now() - t0) / reps;
    printf("grpo_loss B=%d T=%d: %.2f ms (%.0f M tokens/s)\n", B, T, dt * 1e3, n / dt / 1e6);
    free(logp);
    free(old);
    free(mask);
    free(d);
}

static void bench_adamw(int quick)
{
    size_t n = quick ? 1u << 22 : 50000000u;
    int reps = quick ? 3 : 10;
    float *params = malloc(n * sizeof *params), *grads = malloc(n * sizeof *grads);
    rng_philox_uniform(5, 0, params, n);
    rng_philox_uniform(6, 0, grads, n);
    adamw_t *opt = adamw_new(n);
    adamw_params_t hp = adamw_params_default();
    double tc = 0, ts = 0;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        grad_clip_norm(grads, n, 1.0f);
        double t1 = now();
        adamw_step(opt, &hp, params, grads);
        double t2 = now();
        tc += t1 - t0;
        ts += t2 - t1;
    }
    tc /= reps;
    ts /= reps;
    /* bytes touched: clip reads grads twice and writes once; a step reads
     * params, grads, m, v and writes params, m, v */
    printf("adamw n=%zu, %d threads: clip %.1f ms (%.1f GB/s), step %.1f ms (%.1f GB/s)\n", n, omp_get_max_threads(),
           tc * 1e3, 12.0 * n / tc / 1e9, ts * 1e3, 28.0 * n / ts / 1e9);
    adamw_destroy(&opt);
    free(params);
    free(grads);
}

int main(void)
{
    const char *q = getenv("SAPO_BENCH_QUICK");
    int quick = q && *q && *q != '0';
    printf("bench_train: %d threads%s\n", omp_get_max_threads(), quick ? " (quick)" : "");
    bench_rng(quick);
    bench_sample(quick);
    bench_grpo(quick);
    bench_adamw(quick);
    return 0;
}
