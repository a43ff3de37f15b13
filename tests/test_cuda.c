/* The CUDA backend against the CPU one: cuRAND's device stream against the
 * host's, the GPU draw against sample_token, and on the golden tiny models
 * (tests/golden/model) logits, log-probs, gradients, a few optimizer steps
 * and generation, with tolerances for bf16 matmuls (8 mantissa bits:
 * about 0.4% per product, accumulated in fp32). Without a GPU, or in a
 * build without nvcc, every device test reports SKIP with the reason. */
#include "check.h"
#include "model/model_impl.h"
#include "sampling/rng.h"
#include "sampling/sample.h"
#include "train/adamw.h"

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
    char err[200];
    if (cuda_device_check(0, err, sizeof err) == 0) return NULL;
    snprintf(skip_why, sizeof skip_why, "%s", err);
#else
    snprintf(skip_why, sizeof skip_why, "this build has no CUDA (nvcc was not found)");
#endif
    return skip_why;
}

#define NEED_DEVICE() do { if (no_device()) SKIP_TEST(skip_why); } while (0)

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

/* the same inputs through a CPU and a GPU copy of one golden model */
typedef struct {
    model_t *cpu, *gpu;
    int B, T, N, V;
    int *tokens, *targets;
    float *dlogp;
} pair_t;

static int pair_open(pair_t *p, const char *name)
{
    char dir[512], err[512];
    memset(p, 0, sizeof *p);
    snprintf(dir, sizeof dir, GOLD "/%s", name);
    p->cpu = model_load(dir, err, sizeof err);
    p->gpu = model_load(dir, err, sizeof err);
    EXPECTF(p->cpu && p->gpu, "%s", err);
    if (!p->cpu || !p->gpu) return -1;
    EXPECTF(model_set_backend(p->gpu, "cuda:0", err, sizeof err) == 0, "%s", err);
    p->B = 3;
    p->T = 13;
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
    for (int i = 0; i < p->N; i++)
        p->targets[i] = i % p->T < 2 || i % p->T == p->T - 1 ? -1 : p->tokens[i + 1];
    return model_device(p->gpu) == 0 ? 0 : -1;
}

static void pair_close(pair_t *p)
{
    model_destroy(&p->cpu);
    model_destroy(&p->gpu);
    free(p->tokens);
    free(p->targets);
    free(p->dlogp);
}

static void check_forward_backward(const char *name)
{
    pair_t p;
    if (pair_open(&p, name)) {
        pair_close(&p);
        return;
    }
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
        EXPECTF(worst < 5e-2, "%s: log-prob off by %.3g", name, worst);
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
    static const char *const tensors[MODEL_NUM_TENSORS] = {"wte", "ln1", "wq", "bq", "wk", "bk", "wv", "bv", "qn",
                                                           "kn", "wo", "bo", "ln2", "wg", "wu", "wd", "lnf", "lm"};
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
    pair_close(&p);
}

static void test_forward_backward(void)
{
    NEED_DEVICE();
    const char *names[] = {"qwen2_tied", "qwen2_bf16", "qwen2_sharded", "qwen3_bias", "qwen3_tied"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) check_forward_backward(names[i]);
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
    adamw_t *oc = adamw_new(n), *og = adamw_new(n), *mirror = adamw_new(n);
    adamw_params_t ap = adamw_params_default();
    ap.lr = 3e-3f;
    /* ln1 follows wte: no decay, as the Trainer groups norms */
    EXPECT(adamw_no_decay(oc, p.cpu->sizes[0], p.cpu->sizes[1]) == 0);
    EXPECT(adamw_no_decay(og, p.cpu->sizes[0], p.cpu->sizes[1]) == 0);
    EXPECT(adamw_no_decay(mirror, p.cpu->sizes[0], p.cpu->sizes[1]) == 0);
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
        double worst = 0, wm = 0;
        for (size_t i = 0; i < n; i++) {
            worst = fmax(worst, fabs((double)p.gpu->params[i] - want[i]));
            wm = fmax(wm, fabs((double)adamw_moment(og, 0)[i] - adamw_moment(mirror, 0)[i]));
            wm = fmax(wm, fabs((double)adamw_moment(og, 1)[i] - adamw_moment(mirror, 1)[i]));
        }
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

/* fixed seeds: the GPU repeats itself exactly, its log-probs are the
 * forward pass's, and it draws what the CPU draws but where bf16 moves a
 * logit across a draw's boundary */
static void test_generate(void)
{
    NEED_DEVICE();
    pair_t p;
    if (pair_open(&p, "qwen2_tied")) {
        pair_close(&p);
        return;
    }
    enum { Q = 2, L = 4, M = 12 };
    int pr0[] = {5, 9, 33, 7}, pr1[] = {100, 3, 4, 51, 60, 61};
    const int *prompts[Q] = {pr0, pr1};
    int plen[Q] = {4, 6};
    uint64_t seeds[Q] = {42, 43};
    sample_params_t sps[] = {{0, 0, 1}, {1.0f, 0, 1}, {0.8f, 20, 0.9f}};
    for (size_t k = 0; k < sizeof sps / sizeof *sps; k++) {
        model_gen_params_t gp = {.max_new = M, .sample = sps[k], .seed = 0};
        int tc[Q * L * M], tg[Q * L * M], tg2[Q * L * M], lc[Q * L], lg[Q * L], lg2[Q * L];
        float pc[Q * L * M], pg[Q * L * M], pg2[Q * L * M];
        EXPECT(model_generate_batch(p.cpu, prompts, plen, seeds, Q, L, &gp, tc, pc, lc) == 0);
        EXPECT(model_generate_batch(p.gpu, prompts, plen, seeds, Q, L, &gp, tg, pg, lg) == 0);
        EXPECT(model_generate_batch(p.gpu, prompts, plen, seeds, Q, L, &gp, tg2, pg2, lg2) == 0);
        EXPECT(memcmp(lg, lg2, sizeof lg) == 0);
        int first_same = 0, all_same = 0;
        for (int s = 0; s < Q * L; s++) {
            EXPECT(memcmp(tg + s * M, tg2 + s * M, lg[s] * sizeof(int)) == 0);
            first_same += tg[s * M] == tc[s * M];
            all_same += lg[s] == lc[s] && memcmp(tg + s * M, tc + s * M, lg[s] * sizeof(int)) == 0;
        }
        EXPECTF(first_same >= Q * L - 1, "sample %zu: %d of %d first tokens agree", k, first_same, Q * L);
        printf("  sampling %zu: %d of %d completions equal the CPU's\n", k, all_same, Q * L);
        /* each completion's log-probs against a forward pass over it */
        for (int s = 0; s < Q * L; s++) {
            int P = plen[s / L], T = P + lg[s], tok[64], tgt[64];
            float lp[64];
            for (int i = 0; i < P; i++) tok[i] = prompts[s / L][i];
            for (int i = 0; i < lg[s]; i++) tok[P + i] = tg[s * M + i];
            for (int i = 0; i < T; i++) tgt[i] = i >= P - 1 && i + 1 < T ? tok[i + 1] : -1;
            float temp = sps[k].temperature > 0 ? sps[k].temperature : 1.0f;
            EXPECT(model_forward(p.gpu, tok, tgt, 1, T, temp, lp, NULL) == 0);
            for (int i = 0; i < lg[s]; i++) EXPECT_NEAR(pg[s * M + i], lp[P - 1 + i], 2e-2);
        }
    }
    pair_close(&p);
}

#endif

int main(void)
{
    RUN_TEST(test_backend_names);
    RUN_TEST(test_optimizer_step_cpu);
#ifdef SAPO_HAVE_CUDA
    RUN_TEST(test_uniform);
    RUN_TEST(test_sample);
    RUN_TEST(test_forward_backward);
    RUN_TEST(test_train_steps);
    RUN_TEST(test_generate);
#else
    const char *names[] = {"test_uniform", "test_sample", "test_forward_backward", "test_train_steps",
                           "test_generate"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) printf("SKIP %s: %s\n", names[i], no_device());
#endif
    CHECK_EXIT();
}
