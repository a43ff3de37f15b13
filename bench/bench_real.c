/* Speed of a real checkpoint: SmolLM2-135M-Instruct read from its GGUF
 * (scripts/model.sh get smollm2-135m), a training step and the sampling of
 * a round, in fp32 and (where the CPU has a bf16 kernel) in backend
 * cpu-bf16, against PyTorch eager (fp32, and with bf16 autocast) and
 * transformers generate on the same weights (bench/peer_torch.py loads the
 * same GGUF) and threads. Without the model, one line says how to fetch
 * it; without AVX512-BF16 or AMX, a line for each bf16 row says why it is
 * skipped. SAPO_BENCH_QUICK=1: short. */
#include "bench.h"
#include <cblas.h>
#include "model/model_impl.h"
#include "model_steps.h"
#include "node/policy.h"

#include <limits.h>
#include <omp.h>
#include <unistd.h>

/* GFLOP/s of one thread's MLP up-projection of SmolLM2 (1,024 positions,
 * 576 -> 1,536): sapo's AVX-512 kernel in *own (0 where the CPU has no
 * AVX-512, or its flag is hidden), OpenBLAS's sgemm in *blas; medians of reps */
static void gemm_f32_vs_openblas(int reps, double *own, double *blas)
{
    int M = 1024, N = 1536, K = 576;
    float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K), *C = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * K; i++) A[i] = (float)(i % 97) / 97.0f - 0.5f;
    for (int i = 0; i < N * K; i++) W[i] = (float)(i % 89) / 89.0f - 0.5f;
    double to[16], tb[16], flop = 2.0 * M * N * K;
    if (reps > 16) reps = 16;
    for (int r = 0; r < reps; r++) {
        double t = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, C, N);
        tb[r] = flop / (bench_now() - t) * 1e-9;
        to[r] = 0;
        if (model_avx512_available() && bench_cpu_flag("avx512f", NULL)) {
            t = bench_now();
            model_gemm_f32(false, true, M, N, K, A, K, W, K, 0.0f, C, N);
            to[r] = flop / (bench_now() - t) * 1e-9;
        }
    }
    *own = bench_median(to, reps), *blas = bench_median(tb, reps);
    free(A), free(W), free(C);
}

int main(int argc, char **argv)
{
    /* libgomp's spinning threads starve the one with work on 2 cores */
    if (argc > 0 && !getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    bool quick = bench_quick();
    int reps = quick ? 1 : 3, threads = omp_get_max_threads();
    char path[PATH_MAX], err[512];
    const char *cache = getenv("SAPO_MODEL_CACHE");
    if (policy_model_path("smollm2-135m", cache ? cache : "", path, sizeof path, err, sizeof err) != 0) {
        bench_skip("*_smollm2", "SmolLM2-135M is not fetched (scripts/model.sh get smollm2-135m)");
        return 0;
    }
    model_t *m = model_load_gguf(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    m->cfg.n_eos = 0; /* fixed-length completions, as the peer's min_new_tokens */
    /* a training micro-batch of a round, and a round's sampling: 4
     * questions x 8 completions after a chat prompt of about 100 tokens */
    int B = 8, T = quick ? 128 : 256, Q = 4, L = 8, P = 96, NEW = quick ? 32 : 128;
    printf("real: SmolLM2-135M-Instruct (%zu parameters), %d threads; train batch %d x %d, generation %d prompts x "
           "%d completions, prompt %d, %d new tokens%s\n",
           model_num_params(m), threads, B, T, Q, L, P, NEW, quick ? " (quick)" : "");
    batch_t b = batch_new(B, T, m->cfg.V, 1);
    printf("fp32 matmuls: %s%s kernels%s, OMP_WAIT_POLICY=%s\n",
           model_f32_own() ? "sapo's AVX-512 kernel, OpenBLAS's " : "OpenBLAS's ", openblas_get_corename(),
           model_f32_own() ? " for the small ones" : "", getenv("OMP_WAIT_POLICY"));
    /* the peer first, with at most half the time left, and then each of
     * sapo's rows as soon as it is measured: a run cut off keeps those */
    const char *no_bf16 = bench_bf16_missing();
    printf("real: the peer, PyTorch and transformers\n");
    char args[PATH_MAX + 256];
    snprintf(args, sizeof args,
             "bench/peer_torch.py '%s' --threads %d --batch %d --seq %d --prompts %d --completions %d --prompt-len %d "
             "--new %d --reps %d --bf16 %d",
             path, threads, B, T, Q, L, P, NEW, quick ? 1 : 3, !no_bf16);
    bench_peer_t pr;
    bench_peer_run(args, bench_time_left() / 2, &pr);
    printf("real: training steps in fp32 (%d timed)\n", reps);
    double train = train_step(m, &b, reps);
    bench_line_peer("train_step_smollm2", B * T / train, "tokens/s", "pytorch eager", &pr, "train", "tokens/s");
    if (!no_bf16) no_bf16 = bench_use_bf16(m, err, sizeof err);
    if (!no_bf16) {
        printf("real: training steps in cpu-bf16, kernel %s\n", model_bf16_kernel_name(model_bf16_kernel(NULL)));
        double train16 = train_step(m, &b, reps);
        if (model_set_backend(m, "cpu", err, sizeof err) != 0) return 1;
        bench_line_peer("train_step_smollm2_bf16", B * T / train16, "tokens/s", "pytorch eager", &pr, "train",
                        "tokens/s");
        bench_line_peer("train_step_smollm2_bf16_both", B * T / train16, "tokens/s", "pytorch eager, bf16 autocast",
                        &pr, "trainbf16", "tokens/s");
    } else {
        bench_skip("train_step_smollm2_bf16", no_bf16);
        bench_skip("train_step_smollm2_bf16_both", no_bf16);
    }
    double own, blas;
    gemm_f32_vs_openblas(quick ? 3 : 7, &own, &blas);
    if (own > 0) bench_line("gemm_f32_smollm2_mlp_up", own, "GFLOP/s", "openblas sgemm, one thread", blas, "GFLOP/s");
    else bench_skip("gemm_f32_smollm2_mlp_up", "needs AVX-512 (CPU flag avx512f) for sapo's fp32 kernel");
    printf("real: sampling, a request per prompt, a round in one batch, the round unpacked\n");
    double gen = generate(m, 1, P, L, NEW, false, reps);
    bench_line_peer("generate_smollm2", (double)L * NEW / gen, "tokens/s", "transformers generate", &pr, "gen",
                    "tokens/s");
    double genb = generate(m, Q, P, L, NEW, true, reps);
    bench_line_peer("generate_round_smollm2", (double)Q * L * NEW / genb, "tokens/s", "transformers generate", &pr,
                    "genb", "tokens/s");
    /* the decode with the weights where they are, not laid out for the
     * packed kernel (what a model past model_pack_limit gets); one run:
     * a row beside the packed one, and make bench's time is short */
    model_pack_limit(1);
    double genu = generate(m, Q, P, L, NEW, true, 1);
    model_pack_limit(0);
    bench_line("generate_round_smollm2_unpacked", (double)Q * L * NEW / genu, "tokens/s", "packed, the default",
               (double)Q * L * NEW / genb, "tokens/s");
    batch_free(&b);
    model_destroy(&m);
    return 0;
}
