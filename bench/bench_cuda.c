/* The CUDA backend on a Qwen2.5-0.5B-shaped model with random weights (none
 * can be downloaded): training step tokens/s and MFU against the GPU's
 * dense bf16 peak, beside three PyTorch steps on the same GPU, each with
 * fused AdamW (eager with fp32 weights and bf16 autocast; the same under
 * torch.compile, the fair peer: sapo's numerics; bf16 weights compiled)
 * and beside its own variants (direct bf16, direct heads, the fused
 * log-softmax, that with the whole batch in one chunk of logits, and all
 * four);
 * generation tokens/s for 8 prompts x 8 completions and at RL sizes
 * (256 sequences x 512 new tokens from 64-token prompts) against
 * transformers generate (bf16), the latter also against the floor that
 * the bytes of a decode step over the copy rate measured here set, and
 * both again with decode graphs, grouped decode attention and both;
 * device memory held; and the memory of training at B 8 x T 1,024
 * against what cuda_train_bytes computes (docs/cuda.md). The peers run
 * from bench/peer_cuda.py under .venv/bin/python; one that is absent or
 * fails says so in a line. Without a GPU it prints one SKIP line and
 * exits 0. */
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
 * line, "WHAT RATE mem BYTES [compile SECONDS]" (mem, compile NULL: not
 * wanted); -1 when the venv or its CUDA is absent or the peer failed, with
 * a line that says which (the peer's last error line) */
static int peer(const char *dir, const char *what, const char *label, const char *args, double *rate, double *mem,
                double *compile)
{
    if (access(".venv/bin/python", X_OK)) {
        printf("  peer %s: no .venv (tests/oracle/setup.sh makes it)\n", label);
        return -1;
    }
    char cmd[1280], got[16], line[512] = "";
    double bytes = 0, secs = 0;
    snprintf(cmd, sizeof cmd, ".venv/bin/python bench/peer_cuda.py %s %s 2> %s/peer.err", dir, args, dir);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = fgets(line, sizeof line, p) ? sscanf(line, "%15s %lf mem %lf compile %lf", got, rate, &bytes, &secs) : 0;
    int rc = pclose(p);
    if (rc != 0 || n < 3 || strcmp(got, what) != 0) {
        char err[512] = "", path[300];
        snprintf(path, sizeof path, "%s/peer.err", dir);
        FILE *e = fopen(path, "r");
        while (e && fgets(line, sizeof line, e))
            if (line[0] != '\n') snprintf(err, sizeof err, "%s", line);
        if (e) fclose(e);
        err[strcspn(err, "\n")] = '\0';
        printf("  peer %s: failed (exit %d)%s%s\n", label, rc, err[0] ? ": " : "", err);
        return -1;
    }
    if (mem) *mem = bytes;
    if (compile) *compile = secs;
    if (secs > 90) printf("  peer %s: compiling took %.0f s, over 90 s\n", label, secs);
    return 0;
}

/* the memory-bound floor of generating S sequences of max_new tokens from
 * P-token prompts: tokens/s when each decode step reads its bytes
 * (cuda_decode_step_bytes, at the mean cached length) at the copy rate */
static double decode_floor(const model_config_t *c, int S, int P, int max_new, double copy_rate, double *step_bytes)
{
    *step_bytes = cuda_decode_step_bytes(c, S, P + (max_new - 1) / 2.0);
    return S * copy_rate / *step_bytes;
}

int main(void)
{
    char err[256], name[256];
    if (cuda_device_check(0, err, sizeof err)) {
        bench_skip("cuda", err);
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
                   "cuda_train_bytes", cuda_train_bytes(&c, 8, 1024, false) / 1073741824.0, "GiB");
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
    /* generation at RL sizes: 32 prompts x 8 completions, 512 new tokens */
    int RQ = quick ? 4 : 32, RM = quick ? 64 : 512;
    double trl = generate(m, RQ, P, L, RM, true, quick ? 1 : 2), gen_rl = (double)RQ * L * RM / trl;
    char dir[] = "/tmp/sapo-bench-cuda-XXXXXX", args[256];
    int saved = mkdtemp(dir) && model_sync_host(m) == 0 && model_save(m, dir, true, err, sizeof err) == 0;
    /* the three training peers, each in a process of its own */
    static const char *peers[] = {"eager", "compile", "compile-bf16"};
    static const char *labels[] = {"PyTorch eager, fp32 weights, bf16 autocast",
                                   "PyTorch compiled, fp32 weights, bf16 autocast", "PyTorch compiled, bf16 weights"};
    double ptrain[3] = {0}, pmem[3] = {0}, pcompile[3] = {0};
    int have[3] = {0};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "--train --peer %s --batch %d --seq %d --reps %d", peers[i], B, T, reps);
        have[i] = saved && peer(dir, "train", labels[i], args, &ptrain[i], &pmem[i], &pcompile[i]) == 0;
    }
    double pgen = 0, pgen_rl = 0;
    snprintf(args, sizeof args, "--prompts %d --completions %d --prompt-len %d --new %d --reps %d", Q, L, P, M, reps);
    int have_gen = saved && peer(dir, "gen", "transformers generate", args, &pgen, NULL, NULL) == 0;
    snprintf(args, sizeof args, "--prompts %d --completions %d --prompt-len %d --new %d --reps 1", RQ, L, P, RM);
    int have_gen_rl = saved && peer(dir, "gen", "transformers generate, RL sizes", args, &pgen_rl, NULL, NULL) == 0;
    static const char *names[] = {"cuda_train_tokens_per_s", "cuda_train_tokens_per_s_vs_compiled",
                                  "cuda_train_tokens_per_s_vs_compiled_bf16"};
    for (int i = 0; i < 3; i++) bench_line(names[i], tps, "tok/s", have[i] ? labels[i] : NULL, ptrain[i], "tok/s");
    /* MFU beside the fair peer (compiled, fp32 weights), else eager's */
    int fair = have[1] ? 1 : 0;
    if (peak > 0)
        bench_line("cuda_train_mfu", 100.0 * step_flops(&c, B, T) / ts / peak, "%", have[fair] ? labels[fair] : NULL,
                   100.0 * step_flops(&c, B, T) * ptrain[fair] / (B * T) / peak, "%");
    for (int i = 0; i < 3; i++)
        if (have[i] && pcompile[i] > 0) printf("  peer %s: compiled in %.1f s\n", labels[i], pcompile[i]);
    /* issue 51's goal: at least 1.2x compiled PyTorch with fp32 weights */
    if (have[1])
        printf("bench cuda_train_goal_vs_compiled: %.3g x (goal: 1.2 x, ratio %.3g)\n", tps / ptrain[1],
               1.2 / (tps / ptrain[1]));
    /* the model's own peak after training, against PyTorch's allocations */
    bench_line("cuda_train_memory", train_mem, "GiB", have[fair] ? labels[fair] : NULL, pmem[fair] / 1073741824.0,
               "GiB");
    char gname[64];
    snprintf(gname, sizeof gname, "cuda_generate_%dx%d", Q, L);
    bench_line(gname, gen, "tok/s", have_gen ? "transformers bf16" : NULL, pgen, "tok/s");
    snprintf(gname, sizeof gname, "cuda_generate_%dx%d", RQ * L, RM);
    bench_line(gname, gen_rl, "tok/s", have_gen_rl ? "transformers bf16" : NULL, pgen_rl, "tok/s");
    double copy_rate = 0, step_bytes = 0;
    if (cuda_copy_rate(0, (size_t)1 << 30, &copy_rate, err, sizeof err) == 0) {
        double floor = decode_floor(&c, RQ * L, P, RM, copy_rate, &step_bytes);
        printf("  the floor: %.3f GB a decode step (bf16 weights and KV cache) at a copy rate of %.2f TB/s: %.3f ms a "
               "step\n",
               step_bytes / 1e9, copy_rate / 1e12, 1e3 * step_bytes / copy_rate);
        snprintf(gname, sizeof gname, "cuda_generate_%dx%d_vs_floor", RQ * L, RM);
        bench_line(gname, gen_rl, "tok/s", "the bandwidth floor", floor, "tok/s");
    } else printf("  the floor: %s\n", err);
    /* generation's workspace comes and goes: the peak is training's or its */
    bench_line("cuda_memory", cuda_model_memory_peak(m->cuda) / 1073741824.0, "GiB", NULL, 0, NULL);
    /* both generations again with decode graphs (model_set_decode_graphs),
     * grouped decode attention (model_set_grouped_decode) and both, each
     * against its default timing above */
    static const char *variants[] = {"decode_graphs", "grouped_decode", "graphs_and_grouped"};
    for (int v = 0; v < 3; v++) {
        model_set_decode_graphs(m, v != 1);
        model_set_grouped_decode(m, v != 0);
        double g8 = (double)Q * L * M / generate(m, Q, P, L, M, true, reps);
        double grl = (double)RQ * L * RM / generate(m, RQ, P, L, RM, true, 1);
        snprintf(gname, sizeof gname, "cuda_generate_%dx%d_%s", Q, L, variants[v]);
        bench_line(gname, g8, "tok/s", "sapo's default generation", gen, "tok/s");
        snprintf(gname, sizeof gname, "cuda_generate_%dx%d_%s", RQ * L, RM, variants[v]);
        bench_line(gname, grl, "tok/s", "sapo's default generation", gen_rl, "tok/s");
    }
    model_set_decode_graphs(m, false);
    model_set_grouped_decode(m, false);
    size_t captured, replayed;
    cuda_model_decode_graphs(m->cuda, &captured, &replayed);
    printf("  decode graphs: %zu steps captured, %zu replayed\n", captured, replayed);
    /* the step's variants, each against the default step timed beside
     * them: direct bf16 (model_set_direct_bf16), direct heads
     * (model_set_direct_heads), the fused log-softmax (model_set_fused_logp),
     * that with the whole batch in one chunk of logits
     * (model_set_logits_chunk), all four, those and the fused optimizer
     * step (model_set_fused_adamw), and that step alone */
    double base = B * T / train_step_opt(m, B, T, reps);
    model_set_direct_bf16(m, true);
    double direct = B * T / train_step_opt(m, B, T, reps);
    model_set_direct_bf16(m, false);
    model_set_direct_heads(m, true);
    double heads = B * T / train_step_opt(m, B, T, reps);
    model_set_direct_heads(m, false);
    model_set_fused_logp(m, true);
    double fused = B * T / train_step_opt(m, B, T, reps);
    model_set_logits_chunk(m, B * T);
    double one_chunk = B * T / train_step_opt(m, B, T, reps);
    model_set_direct_bf16(m, true);
    model_set_direct_heads(m, true);
    double all = B * T / train_step_opt(m, B, T, reps);
    model_set_fused_adamw(m, true);
    double all5 = B * T / train_step_opt(m, B, T, reps);
    model_set_direct_bf16(m, false);
    model_set_direct_heads(m, false);
    model_set_fused_logp(m, false);
    model_set_logits_chunk(m, 0);
    double adamw = B * T / train_step_opt(m, B, T, reps);
    model_set_fused_adamw(m, false);
    bench_line("cuda_train_tokens_per_s_direct_bf16", direct, "tok/s", "sapo's default step", base, "tok/s");
    bench_line("cuda_train_tokens_per_s_direct_heads", heads, "tok/s", "sapo's default step", base, "tok/s");
    bench_line("cuda_train_tokens_per_s_fused_logp", fused, "tok/s", "sapo's default step", base, "tok/s");
    bench_line("cuda_train_tokens_per_s_fused_one_chunk", one_chunk, "tok/s", "sapo's default step", base, "tok/s");
    bench_line("cuda_train_tokens_per_s_all_four", all, "tok/s", "sapo's default step", base, "tok/s");
    bench_line("cuda_train_tokens_per_s_fused_adamw", adamw, "tok/s", "sapo's default step", base, "tok/s");
    bench_line("cuda_train_tokens_per_s_all_five", all5, "tok/s", "sapo's default step", base, "tok/s");
    if (have[1]) printf("bench cuda_train_goal_vs_compiled, all four: %.3g x (goal: 1.2 x)\n", all / ptrain[1]);
    if (have[1]) printf("bench cuda_train_goal_vs_compiled, all five: %.3g x (goal: 1.2 x)\n", all5 / ptrain[1]);
    printf("  one chunk of %d positions: %.2f GiB at most, against %.2f GiB in chunks of %zu\n", B * T,
           cuda_model_memory_peak(m->cuda) / 1073741824.0, train_mem, cuda_chunk_rows(0, c.V, B * T));
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "bench_cuda: could not remove %s\n", dir);
    model_destroy(&m);
    return 0;
}

#else

int main(void)
{
    bench_skip("cuda", "this build has no CUDA (nvcc was not found)");
    return 0;
}

#endif
