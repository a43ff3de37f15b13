/* The CUDA backend on a Qwen2.5-0.5B-shaped model with random weights (none
 * can be downloaded): training step tokens/s and MFU against the GPU's
 * dense bf16 peak, generation tokens/s for 8 prompts x 8 completions
 * against transformers generate on the same GPU (bench/peer_cuda.py, bf16;
 * left out when the venv or its CUDA is absent), device memory held, and
 * the memory of training at B 8 x T 1,024 against what cuda_train_bytes
 * computes (docs/cuda.md). Without a GPU it prints one SKIP line and
 * exits 0. */
#include "bench.h"
#include "model/model_impl.h"
#include "model_steps.h"

#include <math.h>
#include <unistd.h>

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"

/* the 0.5B shape with fixed-length completions, as the peer's
 * min_new_tokens */
static model_config_t qwen05(void)
{
    model_config_t c = model_config_qwen25_05b();
    c.n_eos = 0;
    return c;
}

/* dense bf16 tensor-core peak of the GPUs we are lent, by name; 0 unknown
 * (SAPO_PEAK_TFLOPS overrides) */
static double peak_flops(const char *name)
{
    const char *env = getenv("SAPO_PEAK_TFLOPS");
    if (env) return atof(env) * 1e12;
    if (strstr(name, "H100") && strstr(name, "PCIe")) return 756e12;
    if (strstr(name, "H100") || strstr(name, "H200")) return 989e12;
    if (strstr(name, "A100")) return 312e12;
    return 0;
}

/* model FLOPs of one training step over B x T (what MFU counts: no
 * recomputation, no masked scores): 2 forward + 4 backward per weight and
 * token, lm_head included, and the causal half of the attention scores
 * and values, forward and backward */
static double step_flops(const model_config_t *c, int B, int T)
{
    double N = (double)B * T, QD = (double)c->NH * c->HD, KD = (double)c->NKV * c->HD;
    double per_tok = c->L * (c->C * QD * 2 + c->C * KD * 2 + 3.0 * c->C * c->FF);
    double attn = 6.0 * 2.0 * c->L * (double)B * c->NH * c->HD * T * T / 2;
    return 6.0 * N * per_tok + 6.0 * N * (double)c->C * c->V + attn;
}

/* median seconds of a training step with its optimizer step */
static double train_step_opt(model_t *m, int B, int T, int reps)
{
    const model_config_t *c = model_config(m);
    int N = B * T;
    int *tok = malloc(N * sizeof(int)), *tgt = malloc(N * sizeof(int));
    float *logp = malloc(N * sizeof(float)), *dlogp = malloc(N * sizeof(float));
    uint64_t s = 1;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int)((s >> 33) % c->V);
    }
    for (int i = 0; i < N; i++) {
        tgt[i] = (i + 1) % T ? tok[i + 1] : -1;
        dlogp[i] = tgt[i] >= 0 ? -1.0f / N : 0.0f;
    }
    adamw_params_t ap = adamw_params_default();
    adamw_t *opt = adamw_new(model_num_params(m));
    if (!opt) exit(1);
    float norm;
    double t[16];
    for (int r = 0; r <= reps; r++) {
        double t0 = bench_now();
        model_zero_grad(m);
        if (model_forward(m, tok, tgt, B, T, 1.0f, logp, NULL)) exit(1);
        model_backward(m, dlogp);
        if (model_optimizer_step(m, opt, &ap, 1.0f, &norm)) exit(1);
        if (r) t[r - 1] = bench_now() - t0;
    }
    free(tok);
    free(tgt);
    free(logp);
    free(dlogp);
    adamw_destroy(&opt);
    return bench_median(t, reps);
}

static int peer(const char *dir, int Q, int L, int P, int M, int reps, double *gen, double *mem)
{
    if (access(".venv/bin/python", X_OK)) return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             ".venv/bin/python bench/peer_cuda.py %s --prompts %d --completions %d --prompt-len %d --new %d "
             "--reps %d 2>/dev/null",
             dir, Q, L, P, M, reps);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = fscanf(p, "gen %lf mem %lf", gen, mem);
    return pclose(p) == 0 && n == 2 ? 0 : -1;
}

int main(void)
{
    char err[256], name[256];
    if (cuda_device_check(0, err, sizeof err)) {
        printf("SKIP bench_cuda: %s\n", err);
        return 0;
    }
    cuda_device_name(0, name, sizeof name);
    int quick = bench_quick(), reps = quick ? 1 : 3;
    model_config_t c = qwen05();
    if (!quick) {
        /* a model of its own, so its peak is this batch's alone */
        model_t *f = model_new_random(&c, 2, err, sizeof err);
        if (!f || model_set_backend(f, "cuda:0", err, sizeof err)) {
            fprintf(stderr, "bench_cuda: %s\n", err);
            return 1;
        }
        train_step_opt(f, 8, 1024, 1);
        bench_line("cuda_train_memory_8x1024", cuda_model_memory_peak(f->cuda) / 1073741824.0, "GiB",
                   "cuda_train_bytes", cuda_train_bytes(&c, 8, 1024) / 1073741824.0, "GiB");
        model_destroy(&f);
    }
    model_t *m = model_new_random(&c, 1, err, sizeof err);
    if (!m || model_set_backend(m, "cuda:0", err, sizeof err)) {
        fprintf(stderr, "bench_cuda: %s\n", err);
        return 1;
    }
    printf("bench cuda: %s, Qwen2.5-0.5B shape, %zu parameters%s\n", name, model_num_params(m),
           quick ? " (quick)" : "");
    int B = quick ? 2 : 8, T = quick ? 128 : 512;
    double ts = train_step_opt(m, B, T, reps);
    double tps = B * T / ts, peak = peak_flops(name);
    bench_line("cuda_train_tokens_per_s", tps, "tok/s", NULL, 0, NULL);
    if (peak > 0) bench_line("cuda_train_mfu", 100.0 * step_flops(&c, B, T) / ts / peak, "%", NULL, 0, NULL);
    bench_line("cuda_train_memory", cuda_model_memory_peak(m->cuda) / 1073741824.0, "GiB", NULL, 0, NULL);

    int Q = quick ? 2 : 8, L = 8, P = 64, M = quick ? 32 : 128;
    double tg = generate(m, Q, P, L, M, true, reps), gen = (double)Q * L * M / tg;
    char dir[] = "/tmp/sapo-bench-cuda-XXXXXX";
    double pgen = 0, pmem = 0;
    int have_peer = mkdtemp(dir) && model_sync_host(m) == 0 && model_save(m, dir, true, err, sizeof err) == 0 &&
                    peer(dir, Q, L, P, M, reps, &pgen, &pmem) == 0;
    char gname[64];
    snprintf(gname, sizeof gname, "cuda_generate_%dx%d", Q, L);
    if (have_peer) bench_line(gname, gen, "tok/s", "transformers bf16", pgen, "tok/s");
    else bench_line(gname, gen, "tok/s", NULL, 0, NULL);
    /* the model's own peak (training's included), against the peer's */
    bench_line("cuda_memory", cuda_model_memory_peak(m->cuda) / 1073741824.0, "GiB",
               have_peer ? "transformers peak allocated" : NULL, pmem / 1073741824.0, "GiB");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "bench_cuda: could not remove %s\n", dir);
    model_destroy(&m);
    return 0;
}

#else

int main(void)
{
    printf("SKIP bench_cuda: this build has no CUDA (nvcc was not found)\n");
    return 0;
}

#endif
