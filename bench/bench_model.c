/* Speed of the CPU transformer: a training step (forward + backward of
 * sum(w * logp)) and sampling (8 completions of a prompt) for the tiny
 * default config, against PyTorch eager and transformers generate on the
 * same weights and threads (bench/peer_torch.py); backend cpu-bf16 with
 * each bf16 kernel the CPU has, and those kernels against fp32 on the
 * tiny step's matmul shapes; matmul throughput of a training step at
 * hidden size 512 against the sgemm peak measured in the same run; peak
 * memory of a training step. SAPO_BENCH_QUICK=1: short. */
#include "bench.h"
#include "group_rows.h"
#include "model_steps.h"
#include "model/model_impl.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the best of OpenBLAS's own threads and model_gemm's OpenMP split on a
 * 1024^3 sgemm */
static double sgemm_peak(int reps, int threads)
{
    int n = 1024;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.01f;
    double best = 0, t[16];
    for (int way = 0; way < 2; way++) {
        openblas_set_num_threads(way ? 1 : threads);
        for (int r = -1; r < reps; r++) {
            double t0 = bench_now();
            if (way) model_gemm(false, true, n, n, n, a, n, b, n, 0, c, n);
            else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
            if (r >= 0) t[r] = bench_now() - t0;
        }
        double g = 2.0 * n * n * n / bench_median(t, reps) / 1e9;
        if (g > best) best = g;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* median seconds of a GRPO step's forward and backward over the default
 * round's batch: G groups of L completions of CL tokens after a prompt of
 * P, in micro-batches of 16 sequences as the learner runs them: one row
 * per completion, or (packed) one row per group with the prompt once and
 * each completion a segment (model_forward_packed, the learner's
 * shared-prompt) */
static double group_step(model_t *m, int G, int L, int P, int CL, bool packed, int reps)
{
    group_rows_t b = group_rows_new(L, P, CL, packed);
    double t[16];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        model_zero_grad(m);
        for (int mb = 0; mb < G * L / 16; mb++) {
            if (model_forward_packed(m, b.tok, b.tgt, packed ? b.start : NULL, b.rows, b.T, 1.0f, b.lp, NULL)) exit(1);
            model_backward(m, b.w);
        }
        if (r >= 0) t[r] = bench_now() - t0;
    }
    group_rows_free(&b);
    return bench_median(t, reps);
}

/* matmul FLOPs of one training step: the linear layers forward (2),
 * backward (4), the lm_head once more for its recomputation */
static double step_flops(const model_config_t *c, int N)
{
    double QD = (double)c->NH * c->HD, KD = (double)c->NKV * c->HD;
    double per_tok = c->L * (c->C * QD * 2 + c->C * KD * 2 + 3.0 * c->C * c->FF);
    return 6.0 * N * per_tok + 8.0 * N * (double)c->C * c->V;
}

/* the tiny default's run: a training batch of B x T, a round of Q
 * prompts (P tokens) x L completions of NEW tokens, and the median
 * seconds of each */
typedef struct {
    int B, T, Q, L, P, NEW;
    double train, train16, gen, genb;
    bool bf16;                  /* train16 measured: the CPU has a bf16 kernel */
    const char *no_bf16;        /* why not, where not */
    model_bf16_kernel_t kernel; /* the one train16 used (the best) */
    double train16dp;           /* the step forced to AVX512-BF16 where the best is AMX, else 0 */
    struct rusage ru, ru16;     /* the peaks after the fp32 and the bf16 steps */
} tiny_t;

/* f's training step in fp32 and, where the CPU has a bf16 kernel, in
 * backend cpu-bf16 (with the best kernel, and forced to AVX512-BF16
 * where the best is AMX), then back to cpu. 0, or -1 after a line on
 * stderr. */
static int time_training(model_t *m, batch_t *b, int reps, tiny_t *f)
{
    char err[256];
    f->train = train_step(m, b, reps), f->train16 = f->train16dp = 0;
    getrusage(RUSAGE_SELF, &f->ru); /* the peak after the fp32 steps, before any bf16 one */
    static char why[256];
    f->no_bf16 = bench_use_bf16(m, why, sizeof why);
    f->bf16 = !f->no_bf16;
    if (f->bf16) {
        f->kernel = model_bf16_kernel(NULL);
        f->train16 = train_step(m, b, reps);
    }
    getrusage(RUSAGE_SELF, &f->ru16);
    if (f->bf16 && f->kernel == MODEL_BF16_AMX && bench_bf16_shown(MODEL_BF16_AVX512BF16) &&
        model_bf16_use(MODEL_BF16_AVX512BF16)) {
        f->train16dp = train_step(m, b, reps);
        model_bf16_use(MODEL_BF16_NONE);
    }
    if (f->bf16 && model_set_backend(m, "cpu", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* the peer's figures for f on m's weights, saved to a folder in /tmp
 * that is removed after */
static void run_peer(const model_t *m, const tiny_t *f, int threads, bool quick, bench_peer_t *p)
{
    char dir[] = "/tmp/sapo-bench-model-XXXXXX", args[512], err[256];
    if (!mkdtemp(dir) || model_save(m, dir, false, err, sizeof err) != 0) {
        memset(p, 0, sizeof *p);
        snprintf(p->failed, sizeof p->failed, "the model could not be saved for it in %s", dir);
        return;
    }
    /* transformers generate is slow enough that one prompt gives its rate */
    snprintf(args, sizeof args,
             "bench/peer_torch.py %s --threads %d --batch %d --seq %d --prompts %d --completions %d "
             "--prompt-len %d --new %d --reps %d --bf16 %d",
             dir, threads, f->B, f->T, f->Q, f->L, f->P, f->NEW, quick ? 1 : 3, f->bf16);
    /* what follows the peer: the GRPO steps, the bf16 kernels and the
     * hidden-512 step: a minute, 20 s quick */
    bench_peer_run(args, quick ? 20 : 60, p);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

/* the tiny default's training and sampling lines, against the peer's */
static void print_tiny(const model_t *m, const tiny_t *f, const bench_peer_t *p)
{
    int B = f->B, T = f->T, Q = f->Q, L = f->L, NEW = f->NEW;
    double train_tps = B * T / f->train, gen_tps = (double)Q * L * NEW / f->gen;
    double genb_tps = (double)Q * L * NEW / f->genb;
    printf("tiny config: %zu parameters, train batch %d x %d, generation %d prompts x %d completions, "
           "prompt %d, %d new tokens (generate: a request per prompt; generate_round: all in one)\n",
           model_num_params(m), B, T, Q, L, f->P, NEW);
    bench_line_peer("train_step_tiny", train_tps, "tokens/s", "pytorch eager", p, "train", "tokens/s");
    if (f->bf16) {
        /* against the same peer, and against the peer in bf16 too */
        printf("cpu-bf16 kernel: %s\n", model_bf16_kernel_name(f->kernel));
        bench_line_peer("train_step_tiny_bf16", B * T / f->train16, "tokens/s", "pytorch eager", p, "train",
                        "tokens/s");
        bench_line_peer("train_step_tiny_bf16_both", B * T / f->train16, "tokens/s", "pytorch eager, bf16 autocast", p,
                        "trainbf16", "tokens/s");
    } else {
        bench_skip("train_step_tiny_bf16", f->no_bf16);
        bench_skip("train_step_tiny_bf16_both", f->no_bf16);
    }
    /* the fallback kernel on a CPU that has the tiles too, against fp32 */
    if (f->train16dp > 0)
        bench_line("train_step_tiny_bf16_avx512bf16", B * T / f->train16dp, "tokens/s", "fp32 (backend cpu)",
                   B * T / f->train, "tokens/s");
    else bench_skip("train_step_tiny_bf16_avx512bf16", "compares the AVX512-BF16 kernel with AMX's: needs both");
    bench_line_peer("generate_tiny", gen_tps, "tokens/s", "transformers generate", p, "gen", "tokens/s");
    bench_line_peer("generate_round_tiny", genb_tps, "tokens/s", "transformers generate", p, "genb", "tokens/s");
    /* what a generator gains by sampling the queued questions together
     * (generate-batch) over one request per question */
    bench_line("generate_round_vs_requests_tiny", genb_tps, "tokens/s", "a request per prompt", gen_tps, "tokens/s");
}

/* a matmul of the tiny default's training step: C (M, N) = op(A) op(B) */
typedef struct {
    const char *name;
    bool ta, tb;
    int M, N, K;
} shape_t;

/* median seconds of shape s by bf16 kernel k, or by fp32 model_gemm
 * (k MODEL_BF16_NONE), on fp32 inputs */
static double gemm_time(const shape_t *s, model_bf16_kernel_t k, int reps)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    float *a = malloc(sizeof(float) * s->M * s->K), *b = malloc(sizeof(float) * s->K * s->N);
    float *c = malloc(sizeof(float) * s->M * s->N);
    for (int i = 0; i < s->M * s->K; i++) a[i] = (float)(i % 13 - 6) * 0.01f;
    for (int i = 0; i < s->K * s->N; i++) b[i] = (float)(i % 7 - 3) * 0.01f;
    double t[16];
    model_bf16_use(k);
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
        if (k == MODEL_BF16_NONE) model_gemm(s->ta, s->tb, s->M, s->N, s->K, a, lda, b, ldb, 0, c, s->N);
        else model_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, a, NULL, lda, b, NULL, ldb, 0, c, s->N);
        if (r >= 0) t[r] = bench_now() - t0;
    }
    model_bf16_use(MODEL_BF16_NONE);
    free(a);
    free(b);
    free(c);
    return bench_median(t, reps);
}

#define DOT_TARGET __attribute__((target("avx512f,avx512bf16,fma")))

/* one thread's GFLOP/s of vdpbf16ps (bf16: 32 multiply-adds an
 * instruction) or of vfmadd231ps (fp32: 16), each over 16 independent
 * sums in registers: the ceiling of each kernel's inner loop */
DOT_TARGET static double dot_peak(bool bf16)
{
    __m512 c[16];
    __m512 x = _mm512_set1_ps(1e-9f), y = _mm512_set1_ps(1.0f);
    __m512bh u = (__m512bh)_mm512_set1_epi32(0x3c003c00), v = (__m512bh)_mm512_set1_epi32(0x3f803f80);
    for (int j = 0; j < 16; j++) c[j] = _mm512_setzero_ps();
    long n = 1 << 22;
    double t0 = bench_now();
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) c[j] = bf16 ? _mm512_dpbf16_ps(c[j], u, v) : _mm512_fmadd_ps(x, y, c[j]);
        __asm__("" : "+v"(x), "+v"(u)); /* not hoisted out of the loop */
    }
    double t = bench_now() - t0;
    float sink = 0;
    for (int j = 0; j < 16; j++) sink += _mm512_reduce_add_ps(c[j]);
    if (sink < 0) printf("(%g)\n", sink);
    return 16.0 * n * (bf16 ? 64 : 32) / t / 1e9;
}

/* each bf16 kernel the CPU has against fp32 on the tiny step's matmuls
 * over n positions: q's projection and the MLP's forward, input gradient
 * and weight gradient */
static void bench_gemm_bf16(int n, int reps)
{
    model_config_t c = model_config_tiny();
    const shape_t shapes[] = {{"qkv_fw", false, true, n, c.NH * c.HD, c.C},
                              {"mlp_fw", false, true, n, c.FF, c.C},
                              {"mlp_dinp", false, false, n, c.C, c.FF},
                              {"mlp_dw", true, false, c.FF, c.C, n}};
    const model_bf16_kernel_t kernels[] = {MODEL_BF16_AMX, MODEL_BF16_AVX512BF16};
    if (bench_bf16_shown(MODEL_BF16_AVX512BF16)) {
        /* the best of 3 each, in turns: a busy machine moves both */
        double bf16 = 0, fp32 = 0;
        for (int r = 0; r < 3; r++) bf16 = fmax(bf16, dot_peak(true)), fp32 = fmax(fp32, dot_peak(false));
        bench_line("dot_peak_avx512bf16", bf16, "GFLOP/s", "fp32 fma, one thread", fp32, "GFLOP/s");
    } else bench_skip("dot_peak_avx512bf16", "needs AVX512-BF16 (CPU flag avx512_bf16), absent or hidden");
    for (size_t j = 0; j < sizeof kernels / sizeof *kernels; j++)
        if (!bench_bf16_shown(kernels[j])) {
            char name[64], why[128];
            snprintf(name, sizeof name, "gemm_tiny_*_%s", model_bf16_kernel_name(kernels[j]));
            snprintf(why, sizeof why, "needs %s, absent or hidden",
                     kernels[j] == MODEL_BF16_AMX ? "AMX (CPU flag amx_bf16)" : "AVX512-BF16 (CPU flag avx512_bf16)");
            bench_skip(name, why);
        }
    printf("bf16 kernels on the tiny step's matmuls (%d positions), fp32 inputs\n", n);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape_t *s = &shapes[i];
        double flop = 2.0 * s->M * s->N * s->K, fp32 = flop / gemm_time(s, MODEL_BF16_NONE, reps) / 1e9;
        for (size_t j = 0; j < sizeof kernels / sizeof *kernels; j++) {
            if (!bench_bf16_shown(kernels[j])) continue;
            char name[64];
            snprintf(name, sizeof name, "gemm_tiny_%s_%s", s->name, model_bf16_kernel_name(kernels[j]));
            bench_line(name, flop / gemm_time(s, kernels[j], reps) / 1e9, "GFLOP/s", "fp32 model_gemm", fp32,
                       "GFLOP/s");
        }
    }
}

/* hidden 512: how much of the machine's sgemm peak a training step
 * reaches. 0, or 1 after a line on stderr. */
static int bench_h512(int threads, int reps, bool quick)
{
    char err[256];
    model_config_t w = model_config_tiny();
    w.C = 512;
    w.NH = 8;
    w.NKV = 8;
    w.HD = 64;
    w.FF = 1536;
    w.L = quick ? 2 : 4;
    model_t *m = model_new_random(&w, 2, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    batch_t b = batch_new(quick ? 8 : 16, 256, w.V, 2);
    double peak = sgemm_peak(quick ? 3 : 9, threads);
    double tw = train_step(m, &b, reps);
    double gflops = step_flops(&w, b.B * b.T) / tw / 1e9;
    bench_line("matmul_train_step_h512", gflops, "GFLOP/s", "sgemm peak 1024^3", peak, "GFLOP/s");
    batch_free(&b);
    model_destroy(&m);
    return 0;
}

int main(int argc, char **argv)
{
    /* OpenMP threads that spin between parallel regions (libgomp's default)
     * take the CPU from the thread with work on a busy 2-core machine:
     * decoding ran 10x slower. Sleep instead, for this run and the peer's,
     * unless the caller chose a policy. */
    if (argc > 0 && !getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    bool quick = bench_quick();
    int reps = quick ? 1 : 5, threads = omp_get_max_threads();
    char err[256];
    printf("model: %d threads, OMP_WAIT_POLICY=%s, fp32 matmuls: %s%s kernels%s%s\n", threads,
           getenv("OMP_WAIT_POLICY"), model_f32_own() ? "sapo's AVX-512 kernel, OpenBLAS's " : "OpenBLAS's ",
           openblas_get_corename(), model_f32_own() ? " for the small ones" : "", quick ? " (quick)" : "");

    /* tiny default: a round of 8 questions x 8 completions */
    model_config_t c = model_config_tiny();
    c.n_eos = 0; /* fixed-length completions, as the peer's min_new_tokens */
    model_t *m = model_new_random(&c, 1, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    tiny_t f = {.B = 64, .T = quick ? 96 : 192, .Q = quick ? 2 : 8, .L = 8, .P = 48, .NEW = quick ? 32 : 128};
    batch_t b = batch_new(f.B, f.T, c.V, 1);
    if (time_training(m, &b, reps, &f)) return 1;
    f.gen = generate(m, f.Q, f.P, f.L, f.NEW, false, quick ? 1 : 3);
    f.genb = generate(m, f.Q, f.P, f.L, f.NEW, true, quick ? 1 : 3);
    bench_peer_t p;
    run_peer(m, &f, threads, quick, &p);
    print_tiny(m, &f, &p);
    /* the default round's training batch: 4 groups x 8 completions of 20
     * tokens after a prompt of 138 (basic_arithmetic's, byte tokens) */
    double tgr = group_step(m, 4, 8, 138, 20, false, reps), tgp = group_step(m, 4, 8, 138, 20, true, reps);
    printf("GRPO step of the default round: 4 groups x 8 completions of 20 tokens after a prompt of 138\n");
    bench_line("train_step_group_tiny", 4 * 8 * 20 / tgp, "completion tokens/s", "one row per completion",
               4 * 8 * 20 / tgr, "completion tokens/s");
    /* process peak after the training steps (before any sampling); in
     * bf16 the activations going into matmuls are kept in bf16 as well */
    bench_line("train_step_peak_rss_tiny", f.ru.ru_maxrss / 1024.0, "MiB", NULL, 0, NULL);
    if (f.bf16) bench_line("train_step_peak_rss_tiny_bf16", f.ru16.ru_maxrss / 1024.0, "MiB", NULL, 0, NULL);
    bench_gemm_bf16(f.B * f.T, reps);
    batch_free(&b);
    model_destroy(&m);
    return bench_h512(threads, reps, quick);
}
