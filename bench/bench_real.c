/* Speed of a real checkpoint: SmolLM2-135M-Instruct read from its GGUF
 * (scripts/model.sh get smollm2-135m), a training step and the sampling of
 * a round, in fp32 and (where the CPU has a bf16 kernel) in backend
 * cpu-bf16, against PyTorch eager (fp32, and with bf16 autocast) and
 * transformers generate on the same weights (bench/peer_torch.py loads the
 * same GGUF) and threads. Without the model, one line says how to fetch
 * it. SAPO_BENCH_QUICK=1: short. */
#include "bench.h"
#include <cblas.h>
#include "model/model_impl.h"
#include "model_steps.h"
#include "node/policy.h"

#include <limits.h>
#include <omp.h>
#include <unistd.h>

/* the peer's line "train T gen G genb GB trainbf16 T16" for the GGUF */
static int peer(const char *gguf, int threads, int B, int T, int Q, int L, int P, int NEW, int reps, double *v)
{
    if (access(".venv/bin/python", X_OK)) return -1;
    char cmd[PATH_MAX + 256];
    snprintf(cmd, sizeof cmd,
             ".venv/bin/python bench/peer_torch.py '%s' --threads %d --batch %d --seq %d --prompts %d "
             "--completions %d --prompt-len %d --new %d --reps %d 2>/dev/null",
             gguf, threads, B, T, Q, L, P, NEW, reps);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = fscanf(p, "train %lf gen %lf genb %lf trainbf16 %lf", &v[0], &v[1], &v[2], &v[3]);
    return pclose(p) == 0 && n == 4 ? 0 : -1;
}

/* GFLOP/s of one thread's MLP up-projection of SmolLM2 (1,024 positions,
 * 576 -> 1,536): sapo's AVX-512 kernel in *own (0 where the CPU has no
 * AVX-512), OpenBLAS's sgemm in *blas; medians of reps */
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
        if (model_avx512_available()) {
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
        printf("real: no figures for SmolLM2-135M: not fetched (scripts/model.sh get smollm2-135m)\n");
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
    double train = train_step(m, &b, reps), train16 = 0;
    bool bf16 = model_set_backend(m, "cpu-bf16", err, sizeof err) == 0;
    if (bf16) {
        train16 = train_step(m, &b, reps);
        printf("cpu-bf16 kernel: %s\n", model_bf16_kernel_name(model_bf16_kernel(NULL)));
        if (model_set_backend(m, "cpu", err, sizeof err) != 0) return 1;
    } else printf("no cpu-bf16 figures: %s\n", err);
    double gen = generate(m, 1, P, L, NEW, false, reps), genb = generate(m, Q, P, L, NEW, true, reps);
    /* the decode with the weights where they are, not laid out for the
     * packed kernel (what a model past model_pack_limit gets) */
    model_pack_limit(1);
    double genu = generate(m, Q, P, L, NEW, true, reps);
    model_pack_limit(0);
    double v[4];
    bool have = peer(path, threads, B, T, Q, L, P, NEW, quick ? 1 : 3, v) == 0;
    bench_line("train_step_smollm2", B * T / train, "tokens/s", have ? "pytorch eager" : NULL, v[0], "tokens/s");
    if (bf16) {
        bench_line("train_step_smollm2_bf16", B * T / train16, "tokens/s", have ? "pytorch eager" : NULL, v[0],
                   "tokens/s");
        bench_line("train_step_smollm2_bf16_both", B * T / train16, "tokens/s",
                   have ? "pytorch eager, bf16 autocast" : NULL, v[3], "tokens/s");
    }
    double own, blas;
    gemm_f32_vs_openblas(quick ? 3 : 7, &own, &blas);
    if (own > 0) bench_line("gemm_f32_smollm2_mlp_up", own, "GFLOP/s", "openblas sgemm, one thread", blas, "GFLOP/s");
    bench_line("generate_smollm2", (double)L * NEW / gen, "tokens/s", have ? "transformers generate" : NULL, v[1],
               "tokens/s");
    bench_line("generate_round_smollm2", (double)Q * L * NEW / genb, "tokens/s", have ? "transformers generate" : NULL,
               v[2], "tokens/s");
    bench_line("generate_round_smollm2_unpacked", (double)Q * L * NEW / genu, "tokens/s", "packed, the default",
               (double)Q * L * NEW / genb, "tokens/s");
    batch_free(&b);
    model_destroy(&m);
    return 0;
}
