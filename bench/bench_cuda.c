/* The CUDA backend on a Qwen2.5-0.5B-shaped model with random weights (none
 * can be downloaded): training step tokens/s and MFU against the GPU's
 * dense bf16 peak, both beside PyTorch's step on the same GPU (fp32
 * weights, bf16 autocast, fused AdamW); generation tokens/s for 8 prompts
 * x 8 completions against transformers generate (bf16); device memory
 * held; and the memory of training at B 8 x T 1,024 against what
 * cuda_train_bytes computes (docs/cuda.md). The peers run from
 * bench/peer_cuda.py under .venv/bin/python and are left out where it or
 * its CUDA is absent. Without a GPU it prints one SKIP line and exits 0. */
#include "bench.h"
#include "model/model_impl.h"
#include "model_steps.h"

#include <math.h>
#include <unistd.h>

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#include "model/cuda/layout.h"

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

/* runs bench/peer_cuda.py on the saved checkpoint with ARGS and reads its
 * line, "WHAT RATE mem BYTES" (mem NULL: the bytes not wanted); -1 when
 * the venv or its CUDA is absent */
static int peer(const char *dir, const char *what, const char *args, double *rate, double *mem)
{
    if (access(".venv/bin/python", X_OK)) return -1;
    char cmd[1024], got[16];
    double bytes = 0;
    snprintf(cmd, sizeof cmd, ".venv/bin/python bench/peer_cuda.py %s %s 2>/dev/null", dir, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = fscanf(p, "%15s %lf mem %lf", got, rate, &bytes);
    if (mem) *mem = bytes;
    return pclose(p) == 0 && n == 3 && strcmp(got, what) == 0 ? 0 : -1;
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
    double tps = B * T / ts, peak = peak_flops(name), train_mem = cuda_model_memory_peak(m->cuda) / 1073741824.0;

    int Q = quick ? 2 : 8, L = 8, P = 64, M = quick ? 32 : 128;
    double tg = generate(m, Q, P, L, M, true, reps), gen = (double)Q * L * M / tg;
    char dir[] = "/tmp/sapo-bench-cuda-XXXXXX", args[256];
    int saved = mkdtemp(dir) && model_sync_host(m) == 0 && model_save(m, dir, true, err, sizeof err) == 0;
    double ptrain = 0, pgen = 0, pmem_train = 0;
    snprintf(args, sizeof args, "--train --batch %d --seq %d --reps %d", B, T, reps);
    int have_train = saved && peer(dir, "train", args, &ptrain, &pmem_train) == 0;
    snprintf(args, sizeof args, "--prompts %d --completions %d --prompt-len %d --new %d --reps %d", Q, L, P, M, reps);
    int have_gen = saved && peer(dir, "gen", args, &pgen, NULL) == 0;
    const char *torch = have_train ? "PyTorch bf16 autocast, fused AdamW" : NULL;
    bench_line("cuda_train_tokens_per_s", tps, "tok/s", torch, ptrain, "tok/s");
    if (peak > 0)
        bench_line("cuda_train_mfu", 100.0 * step_flops(&c, B, T) / ts / peak, "%", torch,
                   100.0 * step_flops(&c, B, T) * ptrain / (B * T) / peak, "%");
    /* the model's own peak after training, against PyTorch's allocations */
    bench_line("cuda_train_memory", train_mem, "GiB", torch, pmem_train / 1073741824.0, "GiB");
    char gname[64];
    snprintf(gname, sizeof gname, "cuda_generate_%dx%d", Q, L);
    bench_line(gname, gen, "tok/s", have_gen ? "transformers bf16" : NULL, pgen, "tok/s");
    /* generation's workspace comes and goes: the peak is training's or its */
    bench_line("cuda_memory", cuda_model_memory_peak(m->cuda) / 1073741824.0, "GiB", NULL, 0, NULL);
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
