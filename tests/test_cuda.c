/* The CUDA backend against the CPU one: cuRAND's device stream against the
 * host's, the GPU draw against sample_token, and on the golden tiny models
 * (tests/golden/model) and random ones shaped to reach every kernel's
 * edges: logits, log-probs, gradients, a few optimizer steps, the
 * optimizer's moments held on the device, memory, and generation (short
 * and past 12,300 positions), with tolerances for bf16 matmuls (8 mantissa
 * bits: about 0.4% per product, accumulated in fp32). Without a GPU, or in
 * a build without nvcc, every device test reports SKIP with the reason.
 * Test names as arguments run only those (scripts/gpu_check.sh). */
#include "check.h"
#include "golden_logp.h"
#include "model/model_impl.h"
#include "node/policy.h"
#include "util/fs.h"
#include "sampling/rng.h"
#include "sampling/sample.h"
#include "train/adamw.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <unistd.h>

#include "model/cuda/layout.h"
#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#endif

#define GOLD "tests/golden/model"

/* CUDA needs the shadow gap ASan protects by default */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

static char skip_why[256];

/* NULL when device 0 can run the tests, else why not */
static const char *no_device(void)
{
#ifdef SAPO_HAVE_CUDA
    char err[256];
    if (cuda_device_check(0, err, sizeof err) == 0) return NULL;
    snprintf(skip_why, sizeof skip_why, "%s", err);
#else
    snprintf(skip_why, sizeof skip_why, "this build has no CUDA (nvcc was not found)");
#endif
    return skip_why;
}

#define NEED_DEVICE()                         \
    do {                                      \
        if (no_device()) SKIP_TEST(skip_why); \
    } while (0)

static void test_backend_names(void)
{
    char err[300];
    model_config_t cfg = model_config_tiny();
    cfg.L = 1;
    model_t *m = model_new_random(&cfg, 1, err, sizeof err);
    EXPECT(m != NULL);
    if (!m) return;
    EXPECT(model_set_backend(m, "cpu", err, sizeof err) == 0);
    EXPECT(model_device(m) == -1);
    const char *bad[] = {"gpu", "cuda", "cuda:", "cuda:x", "cuda:1x", "cuda:-1", "CPU", "cpu-bf", "cpu-bf16x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        EXPECTF(model_set_backend(m, bad[i], err, sizeof err) == -1, "%s", bad[i]);
        EXPECTF(strstr(err, "expected cpu, cpu-bf16 or cuda:N") && !strchr(err, '\n'), "%s: %s", bad[i], err);
    }
    err[0] = 0;
    if (no_device()) {
        /* no device, or no CUDA in the build: one line saying which */
        EXPECT(model_set_backend(m, "cuda:0", err, sizeof err) == -1);
        EXPECTF(strstr(err, "cuda:0") && strstr(err, "CUDA") && !strchr(err, '\n'), "%s", err);
        EXPECT(model_device(m) == -1);
    } else {
        EXPECT(model_set_backend(m, "cuda:999", err, sizeof err) == -1);
        EXPECTF(strstr(err, "no CUDA device 999"), "%s", err);
        EXPECT(model_set_backend(m, "cuda:0", err, sizeof err) == 0);
        EXPECT(model_device(m) == 0);
        EXPECT(model_set_backend(m, "cpu", err, sizeof err) == 0);
        EXPECT(model_device(m) == -1);
    }
    model_destroy(&m);
}

/* on the CPU model_optimizer_step is grad_clip_norm then adamw_step */
static void test_optimizer_step_cpu(void)
{
    char err[300];
    model_config_t cfg = model_config_tiny();
    cfg.L = 1;
    model_t *a = model_new_random(&cfg, 3, err, sizeof err), *b = model_new_random(&cfg, 3, err, sizeof err);
    EXPECT(a && b);
    if (!a || !b) return;
    size_t n = model_num_params(a);
    adamw_t *oa = adamw_new(n), *ob = adamw_new(n);
    adamw_params_t ap = adamw_params_default();
    int tokens[2 * 8], targets[2 * 8];
    for (int i = 0; i < 16; i++) tokens[i] = 'a' + (i * 7) % 26;
    for (int i = 0; i < 16; i++) targets[i] = i % 8 == 7 ? -1 : tokens[i + 1];
    for (int step = 0; step < 2; step++) {
        model_zero_grad(a);
        model_zero_grad(b);
        EXPECT(model_cross_entropy(a, tokens, targets, 2, 8) > 0);
        EXPECT(model_cross_entropy(b, tokens, targets, 2, 8) > 0);
        float na, nb = grad_clip_norm(model_grads(b), n, 0.1f);
        adamw_step(ob, &ap, model_params(b), model_grads(b));
        EXPECT(model_optimizer_step(a, oa, &ap, 0.1f, &na) == 0);
        EXPECT(na == nb);
        EXPECT(memcmp(model_params(a), model_params(b), n * sizeof(float)) == 0);
    }
    EXPECT(adamw_steps(oa) == 2);
    adamw_destroy(&oa);
    adamw_destroy(&ob);
    model_destroy(&a);
    model_destroy(&b);
}

/* a stand-in for a device holding an optimizer's moments: a copy of them,
 * and what it was asked */
typedef struct {
    float m[4], v[4];
    int pulls, drops;
    bool fail_pull;
} fake_holder_t;

static int fake_asked(void *holder, adamw_t *opt, adamw_ask_t ask)
{
    fake_holder_t *f = holder;
    if (ask == ADAMW_DROP) {
        f->drops++;
        return 0;
    }
    f->pulls++;
    if (f->fail_pull) return -1;
    memcpy(adamw_moment(opt, 0), f->m, sizeof f->m);
    memcpy(adamw_moment(opt, 1), f->v, sizeof f->v);
    return 0;
}

/* the optimizer, not the device, decides what becomes of moments held
 * elsewhere: a destroyed one drops its holder (which never hears of it
 * again), a host step and a save pull them first, a second holder takes
 * over only after the first handed them back */
static void test_adamw_holder(void)
{
    adamw_t *opt = adamw_new(4);
    fake_holder_t a = {.m = {1, 2, 3, 4}, .v = {5, 6, 7, 8}}, b = {.m = {9, 9, 9, 9}, .v = {1, 1, 1, 1}};
    EXPECT(adamw_holder(opt) == NULL);
    EXPECT(adamw_hold(opt, &a, fake_asked) == 0);
    EXPECT(adamw_hold(opt, &a, fake_asked) == 0);
    EXPECT(adamw_holder(opt) == &a && a.pulls == 0 && a.drops == 0);
    /* a save writes the holder's moments and leaves it holding */
    char path[] = "/tmp/sapo-test-cuda-adamw-XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0);
    if (fd >= 0) close(fd);
    EXPECT(adamw_save(opt, path) == 0);
    EXPECT(a.pulls == 1 && a.drops == 0 && adamw_holder(opt) == &a);
    adamw_t *back = adamw_load(path, 4);
    EXPECT(back && memcmp(adamw_moment(back, 0), a.m, sizeof a.m) == 0 &&
           memcmp(adamw_moment(back, 1), a.v, sizeof a.v) == 0);
    adamw_destroy(&back);
    unlink(path);
    /* a second holder: the first is pulled, then dropped */
    a.m[0] = 10;
    EXPECT(adamw_hold(opt, &b, fake_asked) == 0);
    EXPECT(a.pulls == 2 && a.drops == 1 && adamw_holder(opt) == &b);
    EXPECT(adamw_moment(opt, 0)[0] == 10);
    /* a host step starts from the holder's moments and drops it */
    adamw_params_t ap = adamw_params_default();
    float params[4] = {0}, grads[4] = {0.5f, -0.5f, 1, 0};
    EXPECT(adamw_step(opt, &ap, params, grads) == 0);
    EXPECT(b.pulls == 1 && b.drops == 1 && adamw_holder(opt) == NULL);
    EXPECT_NEAR(adamw_moment(opt, 0)[0], 9 + 0.1f * (0.5f - 9), 1e-6);
    /* a pull that fails: no step, and the holder is dropped all the same */
    b.fail_pull = true;
    EXPECT(adamw_hold(opt, &b, fake_asked) == 0);
    EXPECT(adamw_step(opt, &ap, params, grads) == -1);
    EXPECT(adamw_steps(opt) == 1 && adamw_holder(opt) == NULL && b.drops == 2);
    EXPECT(adamw_hold(opt, &b, fake_asked) == 0);
    EXPECT(adamw_save(opt, "/tmp/sapo-test-cuda-never-written") == -1);
    EXPECT(access("/tmp/sapo-test-cuda-never-written", F_OK) != 0);
    /* a holder that leaves on its own is not called again */
    adamw_unhold(opt, &a); /* not the holder: nothing */
    EXPECT(adamw_holder(opt) == &b);
    adamw_unhold(opt, &b);
    EXPECT(adamw_holder(opt) == NULL);
    EXPECT(adamw_hold(opt, &a, fake_asked) == 0);
    int drops = a.drops, pulls = a.pulls;
    adamw_destroy(&opt);
    EXPECT(a.drops == drops + 1 && a.pulls == pulls);
    EXPECT(b.drops == 2);
}

/* Training the Qwen2.5-0.5B shape at B 8 x T 1,024 fits a 24 GB card
 * (24e9 bytes) with 1 GiB left for the CUDA context and cuBLAS, which the
 * model does not allocate itself (docs/cuda.md has the arithmetic).
 * Arithmetic only, so it runs without a GPU */
static void test_train_memory(void)
{
    model_config_t c = model_config_qwen25_05b();
    size_t bytes = cuda_train_bytes(&c, 8, 1024, false), again = cuda_train_bytes(&c, 8, 1024, true);
    printf("  Qwen2.5-0.5B shape, B 8 x T 1,024: %.2f GiB on the device, %.2f GiB with activations recomputed\n",
           bytes / 1073741824.0, again / 1073741824.0);
    EXPECTF(bytes + (1ull << 30) <= 24000000000ull, "%.2f GiB does not fit a 24 GB card", bytes / 1073741824.0);
    /* recompute keeps x alone of the 24 layers' activations: their q, k,
     * v, xm, g, u (1 + 2 x 0.125 + 1 + 2 x 5.43 of C a position) go */
    EXPECTF(again < bytes - (size_t)23 * 8 * 1024 * 896 * 4 * 13, "recompute: %zu bytes, keeping %zu", again, bytes);
}

/* On the CPU an inference-only model computes as any other, and refuses
 * to train: model_backward leaves the gradients as they were, and
 * model_optimizer_step returns -1 */
static void test_inference_only_cpu(void)
{
    char err[256];
    model_config_t cfg = model_config_tiny();
    cfg.L = 1;
    model_t *a = model_new_random(&cfg, 5, err, sizeof err), *b = model_new_random(&cfg, 5, err, sizeof err);
    EXPECTF(a && b, "%s", err);
    if (!a || !b) return;
    model_set_inference_only(b);
    enum { T = 9 };
    int tok[T], tgt[T];
    for (int i = 0; i < T; i++) tok[i] = 3 + 5 * i, tgt[i] = i + 1 < T ? 3 + 5 * (i + 1) : -1;
    float la[T], lb[T], dl[T];
    EXPECT(model_forward(a, tok, tgt, 1, T, 1.0f, la, NULL) == 0 &&
           model_forward(b, tok, tgt, 1, T, 1.0f, lb, NULL) == 0);
    EXPECT(memcmp(la, lb, sizeof la) == 0);
    for (int i = 0; i < T; i++) dl[i] = 1.0f;
    model_zero_grad(b);
    model_backward(b, dl);
    double g = 0;
    for (size_t i = 0; i < b->n_params; i++) g += fabs(b->grads[i]);
    EXPECT(g == 0);
    adamw_t *opt = adamw_new(model_num_params(b));
    adamw_params_t ap = adamw_params_default();
    float norm;
    EXPECT(model_optimizer_step(b, opt, &ap, 1.0f, &norm) == -1);
    adamw_destroy(&opt);
    model_destroy(&a);
    model_destroy(&b);
}

/* The models that only infer, at the Qwen2.5-0.5B shape (arithmetic, so it
 * runs without a GPU): a generator's 64 sequences of 1,024 positions (8
 * prompts of 128 tokens, 8 completions of 896 each) within 2.5 GiB, and the
 * reference model's forward pass at B 8 x T 1,024 within 3 GiB, where each
 * held what training holds (8.28 GiB of weights and training state alone,
 * and the reference 16.5 GiB with its backward workspace) */
static void test_infer_memory(void)
{
    model_config_t c = model_config_qwen25_05b();
    double gib = 1073741824.0;
    size_t gen = cuda_generate_bytes(&c, 8, 8, 128, 896), ref = cuda_forward_bytes(&c, 8, 1024);
    printf("  Qwen2.5-0.5B shape: a generator of 64 x 1,024 positions %.2f GiB, the reference model at 8 x 1,024 "
           "%.2f GiB (weights in bf16 %.2f GiB)\n",
           gen / gib, ref / gib, cuda_infer_weight_bytes(&c) / gib);
    EXPECTF(gen <= 2.5 * gib, "a generator holds %.2f GiB, above 2.5", gen / gib);
    EXPECTF(ref <= 3.0 * gib, "the reference model holds %.2f GiB, above 3", ref / gib);
    /* what the layout counts: the bf16 KV cache is half an fp32 one, and
     * an inference-only forward keeps no gradient scratch */
    cuda_gen_ws_t zi, zt;
    cuda_gen_ws_size(&c, 8, 8, 128, 896, true, &zi);
    cuda_gen_ws_size(&c, 8, 8, 128, 896, false, &zt);
    EXPECT(zi.cache == zt.cache && 2 * zi.cache_elem == zt.cache_elem);
    EXPECT(zi.cache == (size_t)c.L * 64 * 1024 * c.NKV * c.HD);
    model_acts_t a;
    model_grad_acts_t g;
    cuda_ws_t wi, wt;
    cuda_ws_layout(&c, 0, 8, 1024, true, false, &a, &g, NULL, &wi);
    cuda_ws_layout(&c, 0, 8, 1024, false, false, &a, &g, NULL, &wt);
    EXPECT(wi.dsc == 0 && wi.yb == 0 && wt.dsc == wt.pb && wi.acts < wt.acts);
}

/* the floor of a decode step: 256 sequences of 64-token prompts and 512
 * new tokens read, at each step, the Qwen2.5-0.5B's 494,032,768
 * parameters (transformers' count, the embedding tied to the lm_head) in
 * bf16 and the bf16 K and V of 64 + 255.5 positions on average: 24 layers
 * x 2 x 2 heads x 64, 2 bytes each */
static void test_decode_floor(void)
{
    model_config_t c = model_config_qwen25_05b();
    double past = 64 + 511 / 2.0, kv = 24.0 * 2 * 2 * 64 * 256 * past * 2;
    double got = cuda_decode_step_bytes(&c, 256, past), want = 494032768.0 * 2 + kv;
    printf("  Qwen2.5-0.5B shape, 256 x (64 + 512): %.3f GB a decode step (weights %.3f, KV cache %.3f)\n", got / 1e9,
           494032768.0 * 2 / 1e9, kv / 1e9);
    EXPECTF(fabs(got - want) < 1, "%.0f bytes a decode step, want %.0f", got, want);
    /* untied: the lm_head whole, the embedding's 256 rows */
    c.tie = 0;
    double untied = cuda_decode_step_bytes(&c, 256, past);
    EXPECTF(fabs(untied - (want + 256.0 * c.C * 2)) < 1, "untied: %.0f bytes, want %.0f", untied,
            want + 256.0 * c.C * 2);
}

#ifdef SAPO_HAVE_CUDA

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static float unif(uint64_t *s) { return (lcg(s) + 0.5f) / 2147483648.0f; }

/* relative L2 distance |a - b| / |b| */
static double rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / (s > 0 ? s : 1e-30));
}

static void test_uniform(void)
{
    NEED_DEVICE();
    char err[256];
    size_t n = 4099;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    uint64_t seeds[] = {0, 1, 1234567, 0xdeadbeefcafef00dull};
    for (size_t s = 0; s < 4; s++) {
        EXPECTF(cuda_uniform(0, seeds[s], a, n, err, sizeof err) == 0, "%s", err);
        rng_philox_uniform(seeds[s], 0, b, n);
        EXPECTF(memcmp(a, b, n * sizeof *a) == 0, "seed %llu: device and host streams differ",
                (unsigned long long)seeds[s]);
    }
    free(a);
    free(b);
}

/* rows of logits with ties, masked entries and a wide range, each drawn on
 * the GPU and by sample_token with the same uniform (the GPU's algorithm,
 * run sequentially on the CPU, agreed with sample_token on 60,000 draws
 * under this rule) */
static void check_draws(int V, int n, const sample_params_t *sp, uint64_t seed)
{
    char err[256];
    float *lg = malloc((size_t)n * V * sizeof *lg), *u = malloc(n * sizeof *u), *lp = malloc(n * sizeof *lp);
    int *tok = malloc(n * sizeof *tok);
    void *scratch = malloc(sample_scratch_bytes(V));
    uint64_t s = seed;
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < V; i++) lg[(size_t)r * V + i] = (unif(&s) - 0.5f) * (r % 3 == 0 ? 4.0f : 16.0f);
        /* a few exact ties and a masked token */
        lg[(size_t)r * V + 7] = lg[(size_t)r * V + 3];
        lg[(size_t)r * V + 11] = -INFINITY;
        u[r] = unif(&s);
    }
    EXPECTF(cuda_sample(0, lg, n, V, sp, u, tok, lp, err, sizeof err) == 0, "%s", err);
    for (int r = 0; r < n; r++) {
        const float *x = lg + (size_t)r * V;
        float want_lp;
        int want = sample_token(x, V, sp, u[r], scratch, &want_lp);
        /* the sums run in another order than sample.c's: a draw may differ
         * where u, or the top-p boundary, sits within rounding of a
         * boundary between tokens; then a CPU draw nearby gives the GPU's */
        for (int j = 0; tok[r] != want && j < 7; j++)
            for (int q = -1; q <= 1 && tok[r] != want; q++) {
                float d = j == 0 ? 0.0f : (j < 3 ? 1e-7f : (j < 5 ? 1e-6f : 1e-5f));
                float uj = fminf(1.0f, u[r] * (1.0f + (j % 2 ? -d : d)));
                sample_params_t pq = *sp;
                if (pq.top_p < 1.0f) pq.top_p = fminf(1.0f, fmaxf(0.0f, pq.top_p + q * 1e-5f));
                want = sample_token(x, V, &pq, uj, scratch, &want_lp);
            }
        EXPECTF(tok[r] == want, "V %d, T %g, top-k %d, top-p %g, row %d: GPU drew %d, the CPU %d", V, sp->temperature,
                sp->top_k, sp->top_p, r, tok[r], want);
        if (tok[r] == want) EXPECT_NEAR(lp[r], want_lp, 1e-4);
    }
    free(lg);
    free(u);
    free(lp);
    free(tok);
    free(scratch);
}

static void test_sample(void)
{
    NEED_DEVICE();
    sample_params_t ps[] = {
        {0, 0, 1}, {1, 0, 1}, {0.7f, 0, 1}, {1, 20, 1}, {1, 0, 0.9f}, {0.8f, 40, 0.95f}, {1, 1, 1}, {1, 0, 0},
    };
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        check_draws(1000, 64, &ps[i], 17 + i);
        check_draws(151936, 4, &ps[i], 99 + i);
    }
}

/* the same inputs through a CPU and a GPU copy of one model */
typedef struct {
    const char *name;
    model_t *cpu, *gpu;
    int B, T, N, V;
    int *tokens, *targets;
    float *dlogp;
} pair_t;

/* the two copies: golden model name, or (name NULL) random weights of cfg;
 * inputs of B x T; the GPU's copy inference-only where infer is set */
static int pair_open_with(pair_t *p, const char *name, const model_config_t *cfg, int B, int T, bool infer)
{
    char dir[512], err[512] = "";
    memset(p, 0, sizeof *p);
    p->name = name ? name : "random";
    if (name) {
        snprintf(dir, sizeof dir, GOLD "/%s", name);
        p->cpu = model_load(dir, err, sizeof err);
        p->gpu = model_load(dir, err, sizeof err);
    } else {
        p->cpu = model_new_random(cfg, 11, err, sizeof err);
        p->gpu = model_new_random(cfg, 11, err, sizeof err);
    }
    EXPECTF(p->cpu && p->gpu, "%s", err);
    if (!p->cpu || !p->gpu) return -1;
    if (infer) model_set_inference_only(p->gpu);
    EXPECTF(model_set_backend(p->gpu, "cuda:0", err, sizeof err) == 0, "%s", err);
    p->B = B;
    p->T = T;
    p->N = p->B * p->T;
    p->V = model_config(p->cpu)->V;
    p->tokens = malloc(p->N * sizeof(int));
    p->targets = malloc(p->N * sizeof(int));
    p->dlogp = malloc(p->N * sizeof(float));
    uint64_t s = 5;
    for (int i = 0; i < p->N; i++) {
        p->tokens[i] = (int)(lcg(&s) % p->V);
        p->dlogp[i] = unif(&s) - 0.5f;
    }
    for (int i = 0; i < p->N; i++) p->targets[i] = i % p->T < 2 || i % p->T == p->T - 1 ? -1 : p->tokens[i + 1];
    return model_device(p->gpu) == 0 ? 0 : -1;
}

static int pair_open_as(pair_t *p, const char *name, const model_config_t *cfg, int B, int T)
{
    return pair_open_with(p, name, cfg, B, T, false);
}

static int pair_open_infer(pair_t *p, const char *name, const model_config_t *cfg, int B, int T)
{
    return pair_open_with(p, name, cfg, B, T, true);
}

static int pair_open(pair_t *p, const char *name) { return pair_open_as(p, name, NULL, 3, 13); }

/* A Qwen3 shape (q/k norms) chosen to reach the kernels' edges: vocabulary
 * 1,500 above a row block's 256 threads (and the sampler's 1,024), T 300
 * above the softmax's 128 and 256, B x T 1,200 rows above
 * rmsnorm_backward's 1,024 blocks, head size 24 with C 64 (HD != C / NH),
 * an untied lm_head */
static model_config_t edges_config(void)
{
    model_config_t c = {
        .type = MODEL_QWEN3,
        .C = 64,
        .L = 2,
        .NH = 4,
        .NKV = 2,
        .HD = 24,
        .FF = 128,
        .V = 1500,
        .max_pos = 16384,
        .rope_theta = 10000.0f,
        .rms_eps = 1e-6f,
        .tie = false,
        .qkv_bias = false,
        .bos_id = -1,
        .eos_ids = {3},
        .n_eos = 1,
    };
    return c;
}

static void pair_close(pair_t *p)
{
    model_destroy(&p->cpu);
    model_destroy(&p->gpu);
    free(p->tokens);
    free(p->targets);
    free(p->dlogp);
}

/* the largest log-prob gap that rounding the CPU copy's weights to bf16
 * alone makes against its fp32 log-probs pc: the scale of what the GPU's
 * bf16 matmuls may do on this model (on qwen2_sharded it is 0.06 to 0.09,
 * above a fixed 5e-2) */
static double weight_rounding_gap(pair_t *p, float temp, const float *pc)
{
    model_t *m = p->cpu;
    size_t n = m->n_params;
    float *keep = malloc(n * sizeof(float)), *pr = malloc(p->N * sizeof(float));
    uint16_t *h = malloc(n * sizeof(uint16_t));
    memcpy(keep, m->params, n * sizeof(float));
    model_bf16_round(h, m->params, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&m->params[i], &u, sizeof u);
    }
    double worst = 0;
    if (model_forward(m, p->tokens, p->targets, p->B, p->T, temp, pr, NULL) == 0)
        for (int i = 0; i < p->N; i++) worst = fmax(worst, fabs((double)pr[i] - pc[i]));
    memcpy(m->params, keep, n * sizeof(float));
    free(keep);
    free(pr);
    free(h);
    return worst;
}

static void check_forward_backward(pair_t p)
{
    const char *name = p.name;
    size_t NV = (size_t)p.N * p.V;
    float *lc = malloc(NV * sizeof(float)), *lg = malloc(NV * sizeof(float));
    float *pc = malloc(p.N * sizeof(float)), *pg = malloc(p.N * sizeof(float));
    float temps[] = {1.0f, 0.7f};
    for (int k = 0; k < 2; k++) {
        EXPECT(model_forward(p.cpu, p.tokens, p.targets, p.B, p.T, temps[k], pc, lc) == 0);
        EXPECT(model_forward(p.gpu, p.tokens, p.targets, p.B, p.T, temps[k], pg, lg) == 0);
        double rl = rel_l2(lg, lc, NV), worst = 0;
        for (int i = 0; i < p.N; i++) worst = fmax(worst, fabs((double)pg[i] - pc[i]));
        EXPECTF(rl < 2e-2, "%s: logits rel L2 %.3g", name, rl);
        double rounding = weight_rounding_gap(&p, temps[k], pc), bound = fmax(5e-2, 1.5 * rounding);
        printf("  %s, temperature %.1f: log-probs off by %.3g (bf16 weights alone, on the CPU: %.3g)\n", name, temps[k],
               worst, rounding);
        EXPECTF(worst < bound, "%s: log-prob off by %.3g, above %.3g", name, worst, bound);
        /* without logits the lm_head runs in chunks: the same log-probs */
        float *pg2 = malloc(p.N * sizeof(float));
        EXPECT(model_forward(p.gpu, p.tokens, p.targets, p.B, p.T, temps[k], pg2, NULL) == 0);
        EXPECT(memcmp(pg, pg2, p.N * sizeof(float)) == 0);
        free(pg2);
    }
    model_zero_grad(p.cpu);
    model_zero_grad(p.gpu);
    model_backward(p.cpu, p.dlogp);
    model_backward(p.gpu, p.dlogp);
    EXPECT(model_sync_host(p.gpu) == 0);
    const model_t *c = p.cpu, *g = p.gpu;
    /* model_weights_t's order */
    static const char *const tensors[MODEL_NUM_TENSORS] = {"wte", "ln1", "wq", "bq",  "wk", "bk", "wv", "bv",  "qn",
                                                           "kn",  "wo",  "bo", "ln2", "wg", "wu", "wd", "lnf", "lm"};
    size_t off = 0;
    for (int t = 0; t < MODEL_NUM_TENSORS; t++) {
        if (c->sizes[t]) {
            double r = rel_l2(g->grads + off, c->grads + off, c->sizes[t]);
            EXPECTF(r < 5e-2, "%s: gradient of %s off by rel L2 %.3g", name, tensors[t], r);
        }
        off += c->sizes[t];
    }
    /* gradients accumulate until model_zero_grad, as on the CPU */
    model_backward(p.gpu, p.dlogp);
    float *g1 = malloc(g->n_params * sizeof(float));
    memcpy(g1, g->grads, g->n_params * sizeof(float));
    EXPECT(model_sync_host(p.gpu) == 0);
    for (size_t i = 0; i < g->n_params; i++) g1[i] *= 2;
    double twice = rel_l2(g->grads, g1, g->n_params);
    EXPECTF(twice < 1e-5, "%s: a second backward did not double the gradients (rel L2 %.3g)", name, twice);
    free(g1);
    free(lc);
    free(lg);
    free(pc);
    free(pg);
}

/* check on each golden model, on qwen2_tied with the lm_head in chunks of
 * 5 positions (8 chunks of the 39; the golden vocabularies make one chunk
 * of the default), and on the edge shape */
static void each_pair(void (*check)(pair_t))
{
    const char *names[] = {"qwen2_tied", "qwen2_bf16", "qwen2_sharded", "qwen3_bias", "qwen3_tied"};
    pair_t p;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (pair_open(&p, names[i]) == 0) check(p);
        pair_close(&p);
    }
    if (pair_open(&p, "qwen2_tied") == 0) {
        model_set_logits_chunk(p.gpu, 5);
        p.name = "qwen2_tied, lm_head chunks of 5";
        check(p);
    }
    pair_close(&p);
    model_config_t cfg = edges_config();
    if (pair_open_as(&p, NULL, &cfg, 4, 300) == 0) {
        p.name = "Qwen3 V 1,500, T 300, 1,200 rows, HD 24 != C/NH";
        check(p);
    }
    pair_close(&p);
}

static void test_forward_backward(void)
{
    NEED_DEVICE();
    each_pair(check_forward_backward);
}

/* a switch of p's device copy (model_set_fused_logp, model_set_direct_bf16)
 * against the kernels that have run on a GPU: the same copy with it off
 * and on, log-probs within logp_tol and gradients within a relative L2 of
 * grad_tol; then, on, against the CPU as every device copy is */
typedef void (*switch_fn)(model_t *, bool);

/* p's device copy with the switch set to on: its log-probs at temperature
 * 0.7 into lp, and where grads is not NULL its gradients */
static void run_switched(pair_t p, switch_fn set, bool on, float *lp, float *grads)
{
    model_t *g = p.gpu;
    set(g, on);
    EXPECT(model_forward(g, p.tokens, p.targets, p.B, p.T, 0.7f, lp, NULL) == 0);
    if (!grads) return;
    model_zero_grad(g);
    model_backward(g, p.dlogp);
    EXPECT(model_sync_host(g) == 0);
    memcpy(grads, g->grads, g->n_params * sizeof(float));
}

static double max_gap(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

static void check_switch(pair_t p, switch_fn set, const char *what, double logp_tol, double grad_tol)
{
    size_t n = p.gpu->n_params;
    float *lp[2], *gr[2];
    for (int f = 0; f < 2; f++) {
        lp[f] = malloc(p.N * sizeof(float));
        gr[f] = malloc(n * sizeof(float));
        run_switched(p, set, f == 1, lp[f], gr[f]);
    }
    double worst = max_gap(lp[1], lp[0], p.N), r = rel_l2(gr[1], gr[0], n);
    bool same = memcmp(lp[0], lp[1], p.N * sizeof(float)) == 0 && memcmp(gr[0], gr[1], n * sizeof(float)) == 0;
    printf("  %s: %s on against off, log-probs off by %.3g, gradients by rel L2 %.3g%s\n", p.name, what, worst, r,
           same ? " (bit for bit the same)" : "");
    EXPECTF(worst <= logp_tol, "%s: %s: log-probs off by %.3g", p.name, what, worst);
    EXPECTF(r <= grad_tol, "%s: %s: gradients off by rel L2 %.3g", p.name, what, r);
    for (int f = 0; f < 2; f++) {
        free(lp[f]);
        free(gr[f]);
    }
    check_forward_backward(p);
}

/* the fused log-softmax: its sums over the vocabulary in another order,
 * and rarely a bf16 rounding of the logits' gradient the other way */
static void check_fused_logp(pair_t p) { check_switch(p, model_set_fused_logp, "fused log-softmax", 1e-4, 1e-3); }

/* the fused log-softmax (model_set_fused_logp) where
 * test_forward_backward checks (the edge shape's V 1,500 read as float4
 * rows), and on a vocabulary that is no multiple of 4 (V 1,501: rows
 * read a float at a time) */
static void test_fused_logp(void)
{
    NEED_DEVICE();
    each_pair(check_fused_logp);
    model_config_t cfg = edges_config();
    cfg.V = 1501;
    pair_t p;
    if (pair_open_as(&p, NULL, &cfg, 2, 40) == 0) {
        p.name = "Qwen3 V 1,501";
        check_fused_logp(p);
    }
    pair_close(&p);
}

/* direct bf16: the norms and SwiGLU round the same fp32 values to bf16
 * that the conversions did, so nothing may move beyond float noise (the
 * line says whether it is bit for bit the same) */
static void check_direct_bf16(pair_t p) { check_switch(p, model_set_direct_bf16, "direct bf16", 1e-6, 1e-6); }

/* direct bf16 (model_set_direct_bf16) where test_forward_backward checks,
 * and an inference-only copy's forward pass, which runs the same layers */
static void test_direct_bf16(void)
{
    NEED_DEVICE();
    each_pair(check_direct_bf16);
    pair_t p;
    if (pair_open_infer(&p, "qwen3_bias", NULL, 3, 13) == 0) {
        float *lp[2];
        for (int f = 0; f < 2; f++) {
            lp[f] = malloc(p.N * sizeof(float));
            run_switched(p, model_set_direct_bf16, f == 1, lp[f], NULL);
        }
        double worst = max_gap(lp[1], lp[0], p.N);
        printf("  qwen3_bias, inference only: direct bf16 against not, log-probs off by %.3g\n", worst);
        EXPECTF(worst <= 1e-6, "inference only: direct bf16 log-probs off by %.3g", worst);
        free(lp[0]);
        free(lp[1]);
    }
    pair_close(&p);
}

/* direct heads: the products read the bf16 values the copies held, and
 * cuBLAS may sum them in another order, so log-probs within 1e-5 and
 * gradients within a relative L2 of 1e-4 of the copies' (a head read from
 * the wrong rows moves them by far more). The direct path must have run
 * where HD is a multiple of 8 and T of 4, and must not have elsewhere:
 * those batches run as before */
static void check_direct_heads(pair_t p)
{
    bool fits = p.gpu->cfg.HD % 8 == 0 && p.T % 4 == 0;
    size_t before = cuda_model_direct_heads(p.gpu->cuda);
    check_switch(p, model_set_direct_heads, "direct heads", 1e-5, 1e-4);
    size_t ran = cuda_model_direct_heads(p.gpu->cuda) - before;
    printf("  %s: %zu attention passes with direct heads (HD %d, T %d)\n", p.name, ran, p.gpu->cfg.HD, p.T);
    EXPECTF(fits ? ran > 0 : ran == 0, "%s: %zu passes with direct heads where %s", p.name, ran,
            fits ? "every matrix is on 16 bytes" : "some are not");
}

/* direct heads (model_set_direct_heads) where test_forward_backward checks
 * (T 13: the golden models run as before; the edge shape, HD 24 at T 300,
 * directly), the golden models whose HD is a multiple of 8 at T 16 (1, 2
 * and 4 query heads to a key/value head), and an inference-only copy's
 * forward pass */
static void test_direct_heads(void)
{
    NEED_DEVICE();
    each_pair(check_direct_heads);
    const char *names[][2] = {{"qwen2_bf16", "qwen2_bf16, 3 x 16"},
                              {"qwen2_sharded", "qwen2_sharded, 3 x 16"},
                              {"qwen3_bias", "qwen3_bias, 3 x 16"},
                              {"qwen3_tied", "qwen3_tied, 3 x 16"}};
    pair_t p;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (pair_open_as(&p, names[i][0], NULL, 3, 16) == 0) {
            p.name = names[i][1];
            check_direct_heads(p);
        }
        pair_close(&p);
    }
    if (pair_open_infer(&p, "qwen3_tied", NULL, 2, 16) == 0) {
        float *lp[2];
        size_t before = cuda_model_direct_heads(p.gpu->cuda);
        for (int f = 0; f < 2; f++) {
            lp[f] = malloc(p.N * sizeof(float));
            run_switched(p, model_set_direct_heads, f == 1, lp[f], NULL);
        }
        double worst = max_gap(lp[1], lp[0], p.N);
        size_t ran = cuda_model_direct_heads(p.gpu->cuda) - before;
        printf("  qwen3_tied, inference only: direct heads against not, log-probs off by %.3g, %zu passes direct\n",
               worst, ran);
        EXPECTF(worst <= 1e-5, "inference only: direct heads log-probs off by %.3g", worst);
        EXPECTF(ran == (size_t)p.gpu->cfg.L, "inference only: %zu passes with direct heads, not one a layer", ran);
        free(lp[0]);
        free(lp[1]);
    }
    pair_close(&p);
}

/* the largest difference between two optimizers' moments (n parameters) */
static double moments_gap(adamw_t *x, adamw_t *y, size_t n)
{
    double wm = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) wm = fmax(wm, fabs((double)adamw_moment(x, k)[i] - adamw_moment(y, k)[i]));
    return wm;
}

/* an optimizer for m as the Trainer groups it: ln1 follows wte, and
 * neither is decayed */
static adamw_t *trainer_adamw(const model_t *m)
{
    adamw_t *o = adamw_new(m->n_params);
    EXPECT(o && adamw_no_decay(o, m->sizes[0], m->sizes[1]) == 0);
    return o;
}

/* cross-entropy steps, each copy with its own optimizer, both through
 * model_optimizer_step: AdamW on the host for the CPU copy, on the device
 * for the GPU copy. Each device step must equal adamw_step on the same
 * gradients (a host mirror), moments and step count included; the two
 * trainings' losses stay together (their gradients differ by bf16
 * rounding, and AdamW's first steps move every weight by about lr whatever
 * its gradient, so their parameters are not compared) */
static void test_train_steps(void)
{
    NEED_DEVICE();
    pair_t p;
    if (pair_open(&p, "qwen2_tied")) {
        pair_close(&p);
        return;
    }
    size_t n = p.cpu->n_params;
    adamw_t *oc = trainer_adamw(p.cpu), *og = trainer_adamw(p.cpu), *mirror = trainer_adamw(p.cpu);
    adamw_params_t ap = adamw_params_default();
    ap.lr = 3e-3f;
    float *want = malloc(n * sizeof(float)), *grads = malloc(n * sizeof(float));
    float first_c = 0, first_g = 0, lc = 0, lg = 0;
    for (int step = 1; step <= 4; step++) {
        model_zero_grad(p.cpu);
        model_zero_grad(p.gpu);
        lc = model_cross_entropy(p.cpu, p.tokens, p.targets, p.B, p.T);
        lg = model_cross_entropy(p.gpu, p.tokens, p.targets, p.B, p.T);
        if (step == 1) {
            first_c = lc;
            first_g = lg;
            EXPECT_NEAR(lg, lc, 1e-2);
        }
        float nc, ng;
        EXPECT(model_optimizer_step(p.cpu, oc, &ap, 0.5f, &nc) == 0);
        EXPECT(model_sync_host(p.gpu) == 0);
        memcpy(want, p.gpu->params, n * sizeof(float));
        memcpy(grads, p.gpu->grads, n * sizeof(float));
        float nm = grad_clip_norm(grads, n, 0.5f);
        adamw_step(mirror, &ap, want, grads);
        EXPECT(model_optimizer_step(p.gpu, og, &ap, 0.5f, &ng) == 0);
        EXPECT_NEAR(ng, nm, 1e-5);
        if (step == 1) EXPECT_NEAR(ng, nc, 3e-2);
        EXPECT(adamw_steps(og) == step);
        EXPECT(model_sync_host(p.gpu) == 0);
        double worst = 0, wm = moments_gap(og, mirror, n);
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)p.gpu->params[i] - want[i]));
        EXPECTF(worst < 1e-6, "step %d: device AdamW off adamw_step by %.3g", step, worst);
        EXPECTF(wm < 1e-6, "step %d: device moments off adamw_step's by %.3g", step, wm);
    }
    EXPECTF(lc < first_c && lg < first_g, "losses %g -> %g (CPU), %g -> %g (GPU)", first_c, lc, first_g, lg);
    EXPECT_NEAR(lg, lc, 3e-2);
    free(want);
    free(grads);
    adamw_destroy(&oc);
    adamw_destroy(&og);
    adamw_destroy(&mirror);
    pair_close(&p);
}

/* the model's memory is what cuda_train_bytes computes: every allocation
 * of a forward, backward and step on a fresh model is counted there, so
 * the figure for the 0.5B shape (test_train_memory) is the real one; its
 * activations kept, then recomputed */
static void test_memory_accounting(void)
{
    NEED_DEVICE();
    model_config_t cfg = edges_config();
    for (int recompute = 0; recompute < 2; recompute++) {
        pair_t p;
        if (pair_open_as(&p, NULL, &cfg, 4, 300) == 0) {
            model_set_recompute(p.gpu, recompute);
            adamw_t *opt = adamw_new(model_num_params(p.gpu));
            adamw_params_t ap = adamw_params_default();
            float norm;
            model_zero_grad(p.gpu);
            EXPECT(model_cross_entropy(p.gpu, p.tokens, p.targets, p.B, p.T) > 0);
            EXPECT(model_optimizer_step(p.gpu, opt, &ap, 1.0f, &norm) == 0);
            /* RoPE tables for the host model's capacity, which may exceed T */
            size_t rope_extra = 2 * (size_t)(p.gpu->rope_cap - p.T) * (cfg.HD / 2) * sizeof(float);
            size_t want = cuda_train_bytes(&cfg, p.B, p.T, recompute) + rope_extra;
            EXPECTF(cuda_model_memory(p.gpu->cuda) == want,
                    "recompute %d: the model holds %zu bytes, cuda_train_bytes says %zu", recompute,
                    cuda_model_memory(p.gpu->cuda), want);
            EXPECT(cuda_model_memory_peak(p.gpu->cuda) == cuda_model_memory(p.gpu->cuda));
            adamw_destroy(&opt);
        }
        pair_close(&p);
    }
}

/* recompute (model_set_recompute) against keeping every layer's
 * activations: the same log-probs bit for bit (the forward pass is the
 * same), and the same gradient bit for bit in every matrix but the
 * embedding (cuBLAS's products of the same inputs); the embedding, the
 * norms' weights and the biases are summed by atomics, in an order that
 * changes from run to run, so theirs within float noise */
static void check_recompute(pair_t p)
{
    size_t n = p.gpu->n_params;
    float *lp[2], *gr[2];
    for (int f = 0; f < 2; f++) {
        lp[f] = malloc(p.N * sizeof(float));
        gr[f] = malloc(n * sizeof(float));
        run_switched(p, model_set_recompute, f == 1, lp[f], gr[f]);
    }
    model_set_recompute(p.gpu, false);
    EXPECTF(memcmp(lp[0], lp[1], p.N * sizeof(float)) == 0, "%s: recompute: other log-probs", p.name);
    size_t at = 0;
    for (int t = 0; t < MODEL_NUM_TENSORS; at += p.gpu->sizes[t], t++) {
        size_t k = p.gpu->sizes[t];
        if (!k) continue;
        if (model_tensor_is_matrix(t) && t != 0)
            EXPECTF(memcmp(gr[0] + at, gr[1] + at, k * sizeof(float)) == 0,
                    "%s: recompute: tensor %d's gradient differs", p.name, t);
        else {
            double r = rel_l2(gr[1] + at, gr[0] + at, k);
            EXPECTF(r <= 1e-6, "%s: recompute: tensor %d's gradient off by rel L2 %.3g", p.name, t, r);
        }
    }
    printf("  %s: recompute against keeping: log-probs and matrices' gradients bit for bit\n", p.name);
    for (int f = 0; f < 2; f++) {
        free(lp[f]);
        free(gr[f]);
    }
}

/* recompute where test_forward_backward checks */
static void test_recompute(void)
{
    NEED_DEVICE();
    each_pair(check_recompute);
}

/* one device step of opt on p.gpu's present gradients, clipped to
 * max_norm (0: none), checked against adamw_step on a host mirror of
 * opt's state (which it then takes) after grad_clip_norm; returns the
 * gradients' norm */
static float device_step_matches(pair_t *p, adamw_t *opt, adamw_t *mirror, float max_norm, const char *what)
{
    size_t n = p->gpu->n_params;
    adamw_params_t ap = adamw_params_default();
    ap.lr = 3e-3f;
    float norm;
    model_zero_grad(p->gpu);
    EXPECT(model_cross_entropy(p->gpu, p->tokens, p->targets, p->B, p->T) > 0);
    EXPECT(model_sync_host(p->gpu) == 0);
    float *want = malloc(n * sizeof(float)), *grads = malloc(n * sizeof(float));
    memcpy(want, p->gpu->params, n * sizeof(float));
    memcpy(grads, p->gpu->grads, n * sizeof(float));
    float host_norm = grad_clip_norm(grads, n, max_norm);
    EXPECT(adamw_step(mirror, &ap, want, grads) == 0);
    EXPECT(model_optimizer_step(p->gpu, opt, &ap, max_norm, &norm) == 0);
    EXPECT_NEAR(norm, host_norm, 1e-5);
    EXPECT(model_sync_host(p->gpu) == 0);
    double worst = 0, wm = moments_gap(opt, mirror, n);
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)p->gpu->params[i] - want[i]));
    EXPECTF(worst < 1e-6 && wm < 1e-6, "%s: parameters off adamw_step by %.3g, moments by %.3g", what, worst, wm);
    EXPECT(adamw_steps(opt) == adamw_steps(mirror));
    free(want);
    free(grads);
    return norm;
}

/* a device step of opt that is not synced, and the same step of mirror on
 * mp, the host's copy of the parameters (grads: room for the gradient) */
static void unsynced_device_step(pair_t *p, adamw_t *opt, adamw_t *mirror, float *mp, float *grads)
{
    size_t n = p->gpu->n_params;
    adamw_params_t ap = adamw_params_default();
    float norm;
    model_zero_grad(p->gpu);
    EXPECT(model_cross_entropy(p->gpu, p->tokens, p->targets, p->B, p->T) > 0);
    EXPECT(model_sync_host(p->gpu) == 0);
    memcpy(mp, p->gpu->params, n * sizeof(float));
    memcpy(grads, p->gpu->grads, n * sizeof(float));
    EXPECT(adamw_step(mirror, &ap, mp, grads) == 0);
    EXPECT(model_optimizer_step(p->gpu, opt, &ap, 0.0f, &norm) == 0);
}

/* The device holds an optimizer's moments on its behalf (adamw_hold): a
 * destroyed optimizer is never written into (ASan would see it) and one
 * made in its place starts from its own zero moments; two optimizers
 * taking turns on one model each keep their own; a host adamw_step between
 * device steps continues from the device's moments; destroying the model
 * hands unsynced moments back */
static void test_optimizer_state(void)
{
    NEED_DEVICE();
    pair_t p;
    if (pair_open(&p, "qwen2_tied")) {
        pair_close(&p);
        return;
    }
    size_t n = p.gpu->n_params;
    adamw_t *a = adamw_new(n), *ma = adamw_new(n);
    device_step_matches(&p, a, ma, 0.0f, "first optimizer, step 1");
    device_step_matches(&p, a, ma, 0.0f, "first optimizer, step 2");
    /* a step that is not synced, then the optimizer goes: nothing may
     * write into it, and its replacement (often at the same address)
     * must not meet its moments */
    adamw_params_t ap = adamw_params_default();
    float norm;
    model_zero_grad(p.gpu);
    EXPECT(model_cross_entropy(p.gpu, p.tokens, p.targets, p.B, p.T) > 0);
    EXPECT(model_optimizer_step(p.gpu, a, &ap, 0.0f, &norm) == 0);
    adamw_destroy(&a);
    adamw_destroy(&ma);
    EXPECT(model_sync_host(p.gpu) == 0);
    adamw_t *b = adamw_new(n), *mb = adamw_new(n);
    device_step_matches(&p, b, mb, 0.0f, "a new optimizer after the first was destroyed");
    /* two optimizers in turns */
    adamw_t *c = adamw_new(n), *mc = adamw_new(n);
    device_step_matches(&p, c, mc, 0.0f, "second optimizer, its step 1");
    device_step_matches(&p, b, mb, 0.0f, "first optimizer again");
    device_step_matches(&p, c, mc, 0.0f, "second optimizer again");
    /* a host step on an optimizer the device holds, after a device step
     * not synced: it starts from the device's moments */
    float *grads = malloc(n * sizeof(float)), *mp = malloc(n * sizeof(float)), *hp = malloc(n * sizeof(float));
    unsynced_device_step(&p, c, mc, mp, grads);
    for (size_t i = 0; i < n; i++) grads[i] = 1e-3f * (float)((int)(i % 7) - 3);
    memcpy(hp, mp, n * sizeof(float));
    EXPECT(adamw_step(c, &ap, hp, grads) == 0);
    EXPECT(adamw_step(mc, &ap, mp, grads) == 0);
    EXPECT(adamw_holder(c) == NULL && adamw_steps(c) == adamw_steps(mc));
    double wm = moments_gap(c, mc, n);
    EXPECTF(wm < 1e-6, "a host step after an unsynced device step: moments off by %.3g", wm);
    /* the model goes first: the optimizer gets the unsynced step back */
    device_step_matches(&p, b, mb, 0.0f, "first optimizer before the model goes");
    unsynced_device_step(&p, b, mb, mp, grads);
    EXPECT(adamw_holder(b) == (const void *)p.gpu->cuda);
    pair_close(&p);
    EXPECT(adamw_holder(b) == NULL);
    wm = moments_gap(b, mb, n);
    EXPECTF(wm < 1e-6, "moments of a step the destroyed model did not sync: off by %.3g", wm);
    free(grads);
    free(mp);
    free(hp);
    adamw_destroy(&b);
    adamw_destroy(&mb);
    adamw_destroy(&c);
    adamw_destroy(&mc);
}

/* the fused optimizer step (model_set_fused_adamw), four steps: the
 * gradients clipped twice, under a bound above their norm, no bound. Each
 * against adamw_step on a host mirror, then the bf16 copy it wrote against
 * the one an upload converts from the same weights: the log-probs they
 * give must be the same, bit for bit (a stale copy moves them by about the
 * learning rate) */
static void test_fused_adamw(void)
{
    NEED_DEVICE();
    pair_t p;
    if (pair_open(&p, "qwen2_tied")) {
        pair_close(&p);
        return;
    }
    model_set_fused_adamw(p.gpu, true);
    /* decayed stretches and one that is not */
    adamw_t *opt = trainer_adamw(p.gpu), *mirror = trainer_adamw(p.gpu);
    float *lp[2] = {malloc(p.N * sizeof(float)), malloc(p.N * sizeof(float))};
    const float bounds[] = {0.05f, 0.05f, 1e6f, 0.0f};
    for (int s = 0; s < 4; s++) {
        float norm = device_step_matches(&p, opt, mirror, bounds[s], "fused step");
        EXPECTF(s > 2 || (norm > bounds[s]) == (s < 2), "step %d: gradient norm %g, bound %g", s + 1, norm, bounds[s]);
        EXPECT(model_forward(p.gpu, p.tokens, p.targets, p.B, p.T, 0.7f, lp[0], NULL) == 0);
        EXPECT(model_sync_device(p.gpu) == 0);
        EXPECT(model_forward(p.gpu, p.tokens, p.targets, p.B, p.T, 0.7f, lp[1], NULL) == 0);
        bool same = memcmp(lp[0], lp[1], p.N * sizeof(float)) == 0;
        printf("  step %d, bound %g, gradient norm %.3g: the step's bf16 copy gives %s\n", s + 1, bounds[s], norm,
               same ? "the converted copy's log-probs, bit for bit" : "other log-probs");
        EXPECTF(same, "step %d: the fused step's bf16 copy gives log-probs off by %.3g", s + 1,
                max_gap(lp[0], lp[1], p.N));
    }
    free(lp[0]);
    free(lp[1]);
    adamw_destroy(&opt);
    adamw_destroy(&mirror);
    pair_close(&p);
}

/* Whether the CPU, drawing with u from logits x (V), draws g once every
 * logit moves by at most tol, as rounding can move it. Greedy: g's logit
 * within 2 tol of the largest. Sampling draws by the inverse CDF in token
 * order: the logits before g lowered by tol and the rest raised move the
 * draw as far towards the end as tol allows, the opposite as far towards
 * the start; g must lie between those two draws and be kept by one */
static bool within_rounding(const float *x, int V, const sample_params_t *sp, float u, int g, float tol)
{
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) mx = fmaxf(mx, x[i]);
    if (sp->temperature <= 0) return x[g] >= mx - 2 * tol;
    float *y = malloc(V * sizeof(float)), lp;
    int *ids = malloc(V * sizeof(int));
    void *scratch = malloc(sample_scratch_bytes(V));
    bool kept = false;
    int draw[2];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < V; i++) y[i] = x[i] + (k == 0 ? (i < g ? -tol : tol) : (i <= g ? tol : -tol));
        draw[k] = sample_token(y, V, sp, u, scratch, &lp);
        int nk = sample_kept(y, V, sp, scratch, ids);
        for (int i = 0; i < nk; i++) kept = kept || ids[i] == g;
    }
    free(y);
    free(ids);
    free(scratch);
    return kept && draw[1] <= g && g <= draw[0];
}

/* the next-token logits (V) after seq (n) on model m; 0 or -1 */
static int next_logits(model_t *m, const int *seq, int n, float *out)
{
    int V = model_config(m)->V;
    int *tgt = malloc(n * sizeof(int));
    float *lp = malloc(n * sizeof(float)), *lg = malloc((size_t)n * V * sizeof(float));
    for (int i = 0; i < n; i++) tgt[i] = -1;
    int rc = model_forward(m, seq, tgt, 1, n, 1.0f, lp, lg);
    if (rc == 0) memcpy(out, lg + (size_t)(n - 1) * V, V * sizeof(float));
    free(tgt);
    free(lp);
    free(lg);
    return rc;
}

/* The GPU's completions against the CPU's, one by one, from the same
 * seeds. They must agree token for token up to the first place where they
 * part, and there the CPU's own logits must put the GPU's token within
 * rounding of its choice (within_rounding). The tolerance is measured, not
 * guessed: twice the largest difference between the two backends' forward
 * logits at that very prefix, because the decode path's bf16 rounding is
 * of the same size as the forward pass's but not the same values. So one
 * bf16 argmax flip (in a greedy batch it turns all L completions of a
 * prompt at once) passes, while a kernel that computes something else
 * draws tokens no rounding explains and fails. After a flip the two go on
 * from different prefixes and are not compared further. Log-probs of the
 * common part agree to bf16's precision. Returns the completions that
 * equal the CPU's */
static int compare_completions(pair_t *p, const int *const *prompts, const int *plen, const uint64_t *seeds, int Q,
                               int L, int M, const sample_params_t *sp, const int *tc, const float *pc, const int *lc,
                               const int *tg, const float *pg, const int *lg)
{
    int V = p->V, same = 0, maxP = 0;
    for (int q = 0; q < Q; q++) maxP = plen[q] > maxP ? plen[q] : maxP;
    int *seq = malloc((size_t)(maxP + M) * sizeof(int));
    float *u = malloc((size_t)L * M * sizeof(float)), *xc = malloc(V * sizeof(float)), *xg = malloc(V * sizeof(float));
    for (int s = 0; s < Q * L; s++) {
        int q = s / L, P = plen[q], t = 0, n = lg[s] < lc[s] ? lg[s] : lc[s];
        while (t < n && tg[(size_t)s * M + t] == tc[(size_t)s * M + t]) {
            EXPECT_NEAR(pg[(size_t)s * M + t], pc[(size_t)s * M + t], 5e-2);
            t++;
        }
        if (t == lg[s] && t == lc[s]) {
            same++;
            continue;
        }
        EXPECTF(t < n, "%s, completion %d: one ended at %d tokens, the other at %d, with the same tokens", p->name, s,
                lg[s], lc[s]);
        if (t >= n) continue;
        memcpy(seq, prompts[q], P * sizeof(int));
        memcpy(seq + P, tc + (size_t)s * M, t * sizeof(int));
        rng_t *r = rng_new(seeds[q]);
        rng_uniform(r, u, (size_t)L * M);
        rng_destroy(&r);
        if (next_logits(p->cpu, seq, P + t, xc) || next_logits(p->gpu, seq, P + t, xg)) {
            EXPECTF(0, "%s, completion %d: no logits at %d", p->name, s, P + t);
            continue;
        }
        float diff = 0;
        for (int i = 0; i < V; i++) diff = fmaxf(diff, fabsf(xg[i] - xc[i]));
        /* a guard on the measure itself, loose: bf16 weights alone put one
         * row of these tiny models 2 % off; a broken forward pass is 50 %
         * or more off (test_forward_backward holds it to 2 % overall) */
        EXPECTF(rel_l2(xg, xc, V) < 0.1, "%s, completion %d: forward logits off by rel L2 %.3g at %d", p->name, s,
                rel_l2(xg, xc, V), P + t);
        int gt = tg[(size_t)s * M + t], ct = tc[(size_t)s * M + t];
        EXPECTF(within_rounding(xc, V, sp, u[(size_t)(s % L) * M + t], gt, 2 * diff),
                "%s, completion %d, token %d: GPU %d (logit %.6g), CPU %d (logit %.6g); no rounding within %.3g "
                "explains it",
                p->name, s, t, gt, xc[gt], ct, xc[ct], 2 * diff);
    }
    free(seq);
    free(u);
    free(xc);
    free(xg);
    return same;
}

/* the generations check_generate and check_decode_graphs ask for: two
 * prompts (4 and 6 tokens) of 4 completions, 12 new tokens each, greedy
 * and two samplers */
enum { GEN_Q = 2, GEN_L = 4, GEN_M = 12, GEN_SAMPLERS = 3 };
static const int gen_pr0[] = {5, 9, 33, 7}, gen_pr1[] = {10, 3, 4, 51, 60, 61};
static const int *const gen_prompts[GEN_Q] = {gen_pr0, gen_pr1};
static const int gen_plen[GEN_Q] = {4, 6};
static const uint64_t gen_seeds[GEN_Q] = {42, 43};
static const sample_params_t gen_samplers[GEN_SAMPLERS] = {{0, 0, 1}, {1.0f, 0, 1}, {0.8f, 20, 0.9f}};

/* fixed seeds: the GPU repeats itself exactly, its log-probs are the
 * forward pass's, and its completions are the CPU's but where rounding
 * explains a different token (compare_completions) */
static void check_generate(pair_t *p)
{
    enum { Q = GEN_Q, L = GEN_L, M = GEN_M };
    const int *const *prompts = gen_prompts, *plen = gen_plen;
    const uint64_t *seeds = gen_seeds;
    const sample_params_t *sps = gen_samplers;
    for (size_t k = 0; k < GEN_SAMPLERS; k++) {
        model_gen_params_t gp = {.max_new = M, .sample = sps[k], .seed = 0};
        int tc[Q * L * M], tg[Q * L * M], tg2[Q * L * M], lc[Q * L], lg[Q * L], lg2[Q * L];
        float pc[Q * L * M], pg[Q * L * M], pg2[Q * L * M];
        EXPECT(model_generate_batch(p->cpu, prompts, plen, seeds, Q, L, &gp, tc, pc, lc) == 0);
        EXPECT(model_generate_batch(p->gpu, prompts, plen, seeds, Q, L, &gp, tg, pg, lg) == 0);
        EXPECT(model_generate_batch(p->gpu, prompts, plen, seeds, Q, L, &gp, tg2, pg2, lg2) == 0);
        EXPECT(memcmp(lg, lg2, sizeof lg) == 0);
        for (int s = 0; s < Q * L; s++) EXPECT(memcmp(tg + s * M, tg2 + s * M, lg[s] * sizeof(int)) == 0);
        int same = compare_completions(p, prompts, plen, seeds, Q, L, M, &sps[k], tc, pc, lc, tg, pg, lg);
        printf("  %s, sampling %zu: %d of %d completions equal the CPU's\n", p->name, k, same, Q * L);
        /* each completion's log-probs against a forward pass over it */
        for (int s = 0; s < Q * L; s++) {
            int P = plen[s / L], T = P + lg[s], tok[64], tgt[64];
            float lp[64];
            for (int i = 0; i < P; i++) tok[i] = prompts[s / L][i];
            for (int i = 0; i < lg[s]; i++) tok[P + i] = tg[s * M + i];
            for (int i = 0; i < T; i++) tgt[i] = i >= P - 1 && i + 1 < T ? tok[i + 1] : -1;
            float temp = sps[k].temperature > 0 ? sps[k].temperature : 1.0f;
            EXPECT(model_forward(p->gpu, tok, tgt, 1, T, temp, lp, NULL) == 0);
            for (int i = 0; i < lg[s]; i++) EXPECT_NEAR(pg[s * M + i], lp[P - 1 + i], 2e-2);
        }
    }
}

/* A model that only infers (model_set_inference_only), against the CPU:
 * its log-probs within the bound bf16 weights set (check_forward_backward's),
 * its generation as test_generate's, training refused, and its memory what
 * layout.c counts: after a forward pass cuda_forward_bytes, and a fresh
 * copy's peak over a generation and a reload cuda_generate_bytes */
static void check_inference_only(pair_t *p)
{
    const model_config_t *cfg = model_config(p->cpu);
    float *pc = malloc(p->N * sizeof(float)), *pg = malloc(p->N * sizeof(float));
    EXPECT(model_forward(p->cpu, p->tokens, p->targets, p->B, p->T, 1.0f, pc, NULL) == 0);
    EXPECT(model_forward(p->gpu, p->tokens, p->targets, p->B, p->T, 1.0f, pg, NULL) == 0);
    double worst = 0;
    for (int i = 0; i < p->N; i++) worst = fmax(worst, fabs((double)pg[i] - pc[i]));
    double rounding = weight_rounding_gap(p, 1.0f, pc), bound = fmax(5e-2, 1.5 * rounding);
    printf("  %s, inference only: log-probs off by %.3g (bf16 weights alone, on the CPU: %.3g)\n", p->name, worst,
           rounding);
    EXPECTF(worst < bound, "%s: log-prob off by %.3g, above %.3g", p->name, worst, bound);
    size_t rope_extra = cuda_rope_bytes(cfg, p->gpu->rope_cap) - cuda_rope_bytes(cfg, p->T);
    size_t want = cuda_forward_bytes(cfg, p->B, p->T) + rope_extra;
    EXPECTF(cuda_model_memory(p->gpu->cuda) == want, "%s: the model holds %zu bytes, cuda_forward_bytes says %zu",
            p->name, cuda_model_memory(p->gpu->cuda), want);
    adamw_t *opt = adamw_new(model_num_params(p->gpu));
    adamw_params_t ap = adamw_params_default();
    float norm;
    EXPECT(model_optimizer_step(p->gpu, opt, &ap, 1.0f, &norm) == -1);
    adamw_destroy(&opt);
    check_generate(p);
    free(pc);
    free(pg);
}

/* a fresh inference-only copy of p's model: one generation of Q x L from
 * prompts of P tokens, M new each, then a reload; its peak against
 * cuda_generate_bytes (and cuBLAS's workspace for decode graphs, where
 * graphs is set) */
static void check_generate_memory(pair_t *p, int Q, int L, int P, int M, bool graphs)
{
    char err[256];
    const model_config_t *cfg = model_config(p->cpu);
    model_t *m = model_new_random(cfg, 3, err, sizeof err);
    EXPECTF(m != NULL, "%s", err);
    if (!m) return;
    model_set_inference_only(m);
    model_set_decode_graphs(m, graphs);
    EXPECTF(model_set_backend(m, "cuda:0", err, sizeof err) == 0, "%s", err);
    int **prompts = malloc(Q * sizeof *prompts), *plen = malloc(Q * sizeof(int)), *tok = malloc((size_t)Q * L * M * 4),
        *len = malloc((size_t)Q * L * sizeof(int));
    float *lp = malloc((size_t)Q * L * M * sizeof(float));
    uint64_t *seeds = malloc(Q * sizeof(uint64_t));
    for (int q = 0; q < Q; q++) {
        prompts[q] = malloc(P * sizeof(int));
        for (int i = 0; i < P; i++) prompts[q][i] = 4 + (q * 7 + i * 13) % (cfg->V - 4);
        plen[q] = P;
        seeds[q] = 100 + q;
    }
    model_gen_params_t gp = {.max_new = M, .sample = {1.0f, 0, 1}, .seed = 0};
    EXPECT(m->cuda && model_generate_batch(m, (const int *const *)prompts, plen, seeds, Q, L, &gp, tok, lp, len) == 0);
    EXPECT(model_sync_device(m) == 0);
    if (m->cuda) {
        size_t rope_extra = cuda_rope_bytes(cfg, m->rope_cap) - cuda_rope_bytes(cfg, P + M);
        size_t want = cuda_generate_bytes(cfg, Q, L, P, M) + rope_extra + (graphs ? CUDA_DECODE_GRAPH_WORKSPACE : 0);
        printf("  %s, inference only%s: %d x %d completions of %d + %d positions, peak %zu bytes\n", p->name,
               graphs ? ", decode graphs" : "", Q, L, P, M, cuda_model_memory_peak(m->cuda));
        EXPECTF(cuda_model_memory_peak(m->cuda) == want, "%s: peak %zu bytes, cuda_generate_bytes says %zu", p->name,
                cuda_model_memory_peak(m->cuda), want);
    }
    for (int q = 0; q < Q; q++) free(prompts[q]);
    free(prompts), free(plen), free(tok), free(len), free(lp), free(seeds);
    model_destroy(&m);
}

static void test_inference_only(void)
{
    NEED_DEVICE();
    const char *names[] = {"qwen2_tied", "qwen2_bf16", "qwen3_bias", "qwen3_tied"};
    pair_t p;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (pair_open_infer(&p, names[i], NULL, 3, 13) == 0) {
            check_inference_only(&p);
            check_generate_memory(&p, 2, 4, 6, 12, false);
        }
        pair_close(&p);
    }
    model_config_t cfg = edges_config();
    if (pair_open_infer(&p, NULL, &cfg, 4, 300) == 0) {
        p.name = "Qwen3 V 1,500, T 300, HD 24";
        check_inference_only(&p);
        check_generate_memory(&p, 3, 8, 40, 64, false);
    }
    pair_close(&p);
}

/* Qwen2 tied; Qwen2 untied; Qwen3 (q/k norms) untied; Qwen3 tied with
 * HD 16 != C/NH 12; the edge shape (vocabulary 1,500, HD 24 != C/NH 16) */
static void test_generate(void)
{
    NEED_DEVICE();
    const char *names[] = {"qwen2_tied", "qwen2_bf16", "qwen3_bias", "qwen3_tied"};
    pair_t p;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (pair_open(&p, names[i]) == 0) check_generate(&p);
        pair_close(&p);
    }
    model_config_t cfg = edges_config();
    if (pair_open_as(&p, NULL, &cfg, 1, 8) == 0) {
        p.name = "Qwen3 V 1,500, HD 24";
        check_generate(&p);
    }
    pair_close(&p);
}

/* prompt + max_new of 12,400 positions, past the 12,190 where cached
 * attention once needed more shared memory than a block gets by default
 * (every launch refused, junk tokens returned): greedy, compared with the
 * CPU as in test_generate, and the GPU's log-probs against the CPU's */
static void test_generate_long(void)
{
    NEED_DEVICE();
    pair_t p;
    if (pair_open(&p, "qwen2_tied")) {
        pair_close(&p);
        return;
    }
    enum { P = 12200, M = 200 };
    int *prompt = malloc(P * sizeof(int)), tc[M], tg[M], lc, lg;
    float pc[M], pg[M];
    uint64_t r = 7;
    for (int i = 0; i < P; i++) prompt[i] = 4 + (int)(lcg(&r) % (uint64_t)(p.V - 4)); /* no eos (3) */
    const int *prompts[1] = {prompt};
    int plen[1] = {P};
    uint64_t seeds[1] = {9};
    model_gen_params_t gp = {.max_new = M, .sample = {0, 0, 1}, .seed = 0};
    EXPECT(model_generate_batch(p.cpu, prompts, plen, seeds, 1, 1, &gp, tc, pc, &lc) == 0);
    EXPECT(model_generate_batch(p.gpu, prompts, plen, seeds, 1, 1, &gp, tg, pg, &lg) == 0);
    int same = compare_completions(&p, prompts, plen, seeds, 1, 1, M, &gp.sample, tc, pc, &lc, tg, pg, &lg);
    printf("  %d + %d positions: %s\n", P, M,
           same ? "the GPU's completion is the CPU's" : "the completions part where rounding explains it");
    free(prompt);
    pair_close(&p);
}

/* ends completion s after 5 + 2 (s % 3) tokens: of 8 completions, 8 live
 * for 4 steps, then 5 for 2, then 2 for 2 (where none ends sooner), so a
 * decode graph is captured, replayed and captured again for fewer rows */
static bool stop_staggered(void *ctx, int seq, const int *tokens, int n)
{
    (void)ctx;
    (void)tokens;
    return n >= 5 + 2 * (seq % 3);
}

/* p's device copy generates with decode graphs (model_set_decode_graphs)
 * what it generates without: the same tokens and lengths, greedy and
 * sampled, with every completion to max_new or its end and with staggered
 * ends; log-probs within float noise (the line says whether bit for bit:
 * the kernels are the same, cuBLAS's workspace is its own). Adds the
 * steps replayed to *replays */
static void check_decode_graphs(pair_t *p, size_t *replays)
{
    enum { Q = GEN_Q, L = GEN_L, M = GEN_M };
    const int *const *prompts = gen_prompts, *plen = gen_plen;
    const uint64_t *seeds = gen_seeds;
    const sample_params_t *sps = gen_samplers;
    for (int staggered = 0; staggered < 2; staggered++)
        for (size_t k = 0; k < GEN_SAMPLERS; k++) {
            model_gen_params_t gp = {.max_new = M, .sample = sps[k], .stop = staggered ? stop_staggered : NULL};
            int tok[2][Q * L * M], len[2][Q * L];
            float lp[2][Q * L * M];
            size_t captures[3], replayed[3]; /* before, after off, after on */
            cuda_model_decode_graphs(p->gpu->cuda, &captures[0], &replayed[0]);
            for (int on = 0; on < 2; on++) {
                model_set_decode_graphs(p->gpu, on);
                EXPECT(model_generate_batch(p->gpu, prompts, plen, seeds, Q, L, &gp, tok[on], lp[on], len[on]) == 0);
                cuda_model_decode_graphs(p->gpu->cuda, &captures[on + 1], &replayed[on + 1]);
            }
            model_set_decode_graphs(p->gpu, false);
            bool same_tokens = memcmp(len[0], len[1], sizeof len[0]) == 0, same_lp = same_tokens;
            double worst = 0;
            for (int s = 0; same_tokens && s < Q * L; s++) {
                same_tokens = memcmp(tok[0] + s * M, tok[1] + s * M, len[0][s] * sizeof(int)) == 0;
                same_lp = same_lp && memcmp(lp[0] + s * M, lp[1] + s * M, len[0][s] * sizeof(float)) == 0;
                worst = fmax(worst, max_gap(lp[0] + s * M, lp[1] + s * M, len[0][s]));
            }
            printf("  %s, sampling %zu%s: decode graphs on against off, %zu steps captured, %zu replayed; log-probs "
                   "off by %.3g%s\n",
                   p->name, k, staggered ? ", staggered ends" : "", captures[2] - captures[1],
                   replayed[2] - replayed[1], worst, same_tokens && same_lp ? " (bit for bit the same)" : "");
            EXPECTF(captures[1] == captures[0] && replayed[1] == replayed[0], "%s: graphs used while off", p->name);
            EXPECTF(same_tokens, "%s, sampling %zu%s: decode graphs changed the completions", p->name, k,
                    staggered ? ", staggered ends" : "");
            EXPECTF(worst <= 1e-6, "%s, sampling %zu: decode graphs moved the log-probs by %.3g", p->name, k, worst);
            *replays += replayed[2] - replayed[1];
        }
}

/* decode graphs on the golden models, the edge shape and an
 * inference-only copy (a bf16 cache): the same completions, some steps
 * replayed, and the peak memory layout.c counts plus cuBLAS's workspace */
static void test_decode_graphs(void)
{
    NEED_DEVICE();
    const char *names[] = {"qwen2_tied", "qwen2_bf16", "qwen3_bias", "qwen3_tied"};
    size_t replays = 0;
    pair_t p;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (pair_open(&p, names[i]) == 0) check_decode_graphs(&p, &replays);
        pair_close(&p);
    }
    model_config_t cfg = edges_config();
    if (pair_open_as(&p, NULL, &cfg, 1, 8) == 0) {
        p.name = "Qwen3 V 1,500, HD 24";
        check_decode_graphs(&p, &replays);
    }
    pair_close(&p);
    if (pair_open_infer(&p, "qwen3_bias", NULL, 3, 13) == 0) {
        p.name = "qwen3_bias, inference only";
        check_decode_graphs(&p, &replays);
        p.name = "qwen3_bias";
        check_generate_memory(&p, 2, 4, 6, 12, true);
    }
    pair_close(&p);
    EXPECTF(replays > 0, "no decode step was replayed from a graph (%zu)", replays);
}

/* A real model on the device: SmolLM2-135M from its GGUF (fetched by
 * scripts/model.sh; the device machine cannot fetch it, so a GPU session
 * carries it there), its per-token log-probs in bf16 against
 * transformers' fp32 ones (tests/golden/gguf/smollm2-135m.model.json),
 * and a few greedy tokens against the CPU's. The bounds are loose, bf16
 * over 30 layers; a model read wrong (Llama's q/k rows in the converter's
 * order) is off by about 10. */
/* decode attention on the host, in double: the reference both kernels
 * answer to */
static void decode_attention_ref(int R, int maxT, int NH, int NKV, int HD, const float *q, const float *k,
                                 const float *v, const int *pos, float *y)
{
    int rep = NH / NKV, KD = NKV * HD;
    double *s = malloc((size_t)maxT * sizeof(double));
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++) {
            const float *qh = q + ((size_t)r * NH + h) * HD;
            double mx = -INFINITY, sum = 0;
            for (int t = 0; t <= pos[r]; t++) {
                const float *kt = k + ((size_t)r * maxT + t) * KD + (h / rep) * HD;
                double d = 0;
                for (int i = 0; i < HD; i++) d += (double)qh[i] * kt[i];
                s[t] = d / sqrt((double)HD);
                mx = fmax(mx, s[t]);
            }
            for (int t = 0; t <= pos[r]; t++) sum += s[t] = exp(s[t] - mx);
            for (int i = 0; i < HD; i++) {
                double a = 0;
                for (int t = 0; t <= pos[r]; t++) a += s[t] * v[((size_t)r * maxT + t) * KD + (h / rep) * HD + i];
                y[((size_t)r * NH + h) * HD + i] = (float)(a / sum);
            }
        }
    free(s);
}

/* both decode attention kernels on one shape: rows at 1 position, a tile
 * less one, a tile, a tile and one, and many; against the reference with
 * an fp32 cache, and grouped against by head with a bf16 one (both read
 * the same rounded keys) */
static void check_grouped_shape(int NH, int NKV, int HD)
{
    enum { R = 5 };
    int pos[R] = {0, 30, 31, 32, 200}, maxT = 201;
    size_t nq = (size_t)R * NH * HD, n = (size_t)R * maxT * NKV * HD;
    float *q = malloc(nq * sizeof(float)), *k = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    float *ref = malloc(nq * sizeof(float)), *y[2][2];
    uint64_t s = 7;
    for (size_t i = 0; i < nq; i++) q[i] = 2 * unif(&s) - 1;
    for (size_t i = 0; i < n; i++) {
        k[i] = 2 * unif(&s) - 1;
        v[i] = 2 * unif(&s) - 1;
    }
    decode_attention_ref(R, maxT, NH, NKV, HD, q, k, v, pos, ref);
    char err[256];
    for (int b = 0; b < 2; b++)
        for (int g = 0; g < 2; g++) {
            y[b][g] = calloc(nq, sizeof(float));
            EXPECTF(cuda_decode_attention(0, g, b, R, maxT, NH, NKV, HD, q, k, v, pos, y[b][g], err, sizeof err) == 0,
                    "%s", err);
        }
    double by_head = max_gap(y[0][0], ref, nq), grouped = max_gap(y[0][1], ref, nq), bf = max_gap(y[1][1], y[1][0], nq);
    printf("  NH %d, NKV %d, HD %d: against the reference, by head %.3g, grouped %.3g; bf16 cache, grouped against by "
           "head %.3g\n",
           NH, NKV, HD, by_head, grouped, bf);
    EXPECTF(by_head < 1e-5 && grouped < 1e-5 && bf < 1e-5, "NH %d, NKV %d, HD %d: decode attention off", NH, NKV, HD);
    for (int b = 0; b < 2; b++)
        for (int g = 0; g < 2; g++) free(y[b][g]);
    free(q), free(k), free(v), free(ref);
}

/* grouped decode attention (model_set_grouped_decode): the kernel on the
 * shapes of the Qwen2.5-0.5B (14 query heads to 2), SmolLM2 (9 to 3),
 * plain multi-head at HD 24, 8 query heads to one at HD 128, and the
 * largest head (256, past the default 48 KB of shared memory); then
 * generation with it against the CPU, as test_generate, on the golden
 * models, the edge shape and an inference-only copy */
static void test_grouped_decode(void)
{
    NEED_DEVICE();
    int shapes[][3] = {{14, 2, 64}, {9, 3, 64}, {4, 4, 24}, {8, 1, 128}, {8, 1, 256}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        check_grouped_shape(shapes[i][0], shapes[i][1], shapes[i][2]);
    const char *names[] = {"qwen2_tied", "qwen2_bf16", "qwen3_bias", "qwen3_tied"};
    pair_t p;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (pair_open(&p, names[i]) == 0) {
            model_set_grouped_decode(p.gpu, true);
            check_generate(&p);
        }
        pair_close(&p);
    }
    model_config_t cfg = edges_config();
    if (pair_open_as(&p, NULL, &cfg, 1, 8) == 0) {
        p.name = "Qwen3 V 1,500, HD 24";
        model_set_grouped_decode(p.gpu, true);
        check_generate(&p);
    }
    pair_close(&p);
    if (pair_open_infer(&p, "qwen3_bias", NULL, 3, 13) == 0) {
        p.name = "qwen3_bias, inference only";
        model_set_grouped_decode(p.gpu, true);
        check_generate(&p);
    }
    pair_close(&p);
}

static void test_real_model(void)
{
    NEED_DEVICE();
    char path[4096], err[512];
    const char *cache = getenv("SAPO_MODEL_CACHE");
    if (policy_model_path("smollm2-135m", cache ? cache : "", path, sizeof path, err, sizeof err) != 0)
        SKIP_TEST("smollm2-135m is not fetched (scripts/model.sh get smollm2-135m, then carry it to the GPU)");
    model_t *cpu = model_load_gguf(path, err, sizeof err), *gpu = model_load_gguf(path, err, sizeof err);
    EXPECTF(cpu && gpu, "%s", err);
    char *text = fs_read_text("tests/golden/gguf/smollm2-135m.model.json");
    cJSON *g = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cpu || !gpu || !g || model_set_backend(gpu, "cuda:0", err, sizeof err) != 0) {
        EXPECTF(false, "%s", err);
        cJSON_Delete(g), model_destroy(&cpu), model_destroy(&gpu);
        return;
    }
    logp_gap_t gap = golden_logp_gap(gpu, g);
    /* greedy: the first tokens after the first golden prompt's first 40 */
    const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "ids"), 0);
    int tok[40];
    EXPECT(cJSON_GetArraySize(row) >= 40);
    for (int t = 0; t < 40; t++) tok[t] = t < cJSON_GetArraySize(row) ? cJSON_GetArrayItem(row, t)->valueint : 0;
    model_gen_params_t gp = {.max_new = 8, .sample = {0, 0, 1}};
    int tc[8], tg[8], lc, lg;
    float pc[8], pg[8];
    EXPECT(model_generate(cpu, tok, 40, 1, &gp, tc, pc, &lc) == 0);
    EXPECT(model_generate(gpu, tok, 40, 1, &gp, tg, pg, &lg) == 0);
    EXPECTF(lc > 0 && lg > 0 && tc[0] == tg[0], "greedy first token %d on the CPU, %d on the GPU", tc[0], tg[0]);
    printf("smollm2-135m on cuda:0: log-probs against transformers' fp32: largest gap %.3g, mean %.3g over %d tokens\n",
           gap.worst, gap.n ? gap.sum / gap.n : 0, gap.n);
    EXPECTF(gap.n > 0 && gap.worst < 0.5 && gap.sum / gap.n < 0.05, "largest gap %.3g, mean %.3g", gap.worst,
            gap.n ? gap.sum / gap.n : 0);
    cJSON_Delete(g);
    model_destroy(&cpu);
    model_destroy(&gpu);
}
#endif

int main(int argc, char **argv)
{
    /* test names given: only those run */
#define RUN(fn)                                                                            \
    do {                                                                                   \
        bool chosen_ = argc < 2;                                                           \
        for (int i_ = 1; i_ < argc; i_++) chosen_ = chosen_ || strcmp(argv[i_], #fn) == 0; \
        if (chosen_) RUN_TEST(fn);                                                         \
    } while (0)
    RUN(test_backend_names);
    RUN(test_optimizer_step_cpu);
    RUN(test_adamw_holder);
    RUN(test_train_memory);
    RUN(test_infer_memory);
    RUN(test_decode_floor);
    RUN(test_inference_only_cpu);
#ifdef SAPO_HAVE_CUDA
    RUN(test_uniform);
    RUN(test_sample);
    RUN(test_forward_backward);
    RUN(test_memory_accounting);
    RUN(test_train_steps);
    RUN(test_optimizer_state);
    RUN(test_generate);
    RUN(test_generate_long);
    RUN(test_inference_only);
    RUN(test_fused_logp);
    RUN(test_direct_bf16);
    RUN(test_direct_heads);
    RUN(test_decode_graphs);
    RUN(test_grouped_decode);
    RUN(test_fused_adamw);
    RUN(test_recompute);
    RUN(test_real_model);
#else
    const char *names[] = {"test_uniform",           "test_sample",         "test_forward_backward",
                           "test_memory_accounting", "test_train_steps",    "test_optimizer_state",
                           "test_generate",          "test_generate_long",  "test_inference_only",
                           "test_fused_logp",        "test_direct_bf16",    "test_direct_heads",
                           "test_decode_graphs",     "test_grouped_decode", "test_fused_adamw",
                           "test_recompute",         "test_real_model"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) printf("SKIP %s: %s\n", names[i], no_device());
#endif
    CHECK_EXIT();
}
