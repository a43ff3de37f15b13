/* GRPO advantages, loss and dL/dlogp against TRL's own code
 * (tests/oracle/grpo_golden.py runs GRPOTrainer._compute_loss under
 * autograd), AdamW with gradient clipping against torch.optim.AdamW and
 * clip_grad_norm_, and the optimizer state file: round trip, atomic write,
 * one error line for every kind of bad file. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "golden_arrays.h"
#include "train/adamw.h"
#include "train/grpo.h"

#define GOLD "tests/golden/grpo"

/* |a - b| within rel of the larger plus an absolute floor: losses near 0
 * (group-centred advantages) carry only absolute meaning */
#define EXPECT_CLOSE(a, b, rel, abs_)                                                               \
    do {                                                                                            \
        double a_ = (a), b_ = (b);                                                                  \
        if (!(fabs(a_ - b_) <= fmax(fabs(a_), fabs(b_)) * (rel) + (abs_))) {                        \
            fprintf(stderr, "%s:%d: %s = %.9g vs %s = %.9g\n", __FILE__, __LINE__, #a, a_, #b, b_); \
            check_failures++;                                                                       \
        }                                                                                           \
    } while (0)

static float *golden(const char *file, const char *name, int *count)
{
    char path[256];
    snprintf(path, sizeof path, GOLD "/%s", file);
    return golden_array(path, name, count);
}

static void test_advantages(void)
{
    int n, k;
    float *rewards = golden("advantages.txt", "rewards", &n);
    EXPECT(rewards != NULL);
    if (!rewards) return;
    const char *names[] = {"group", "batch", "none"};
    const grpo_scale_t scales[] = {GRPO_SCALE_GROUP, GRPO_SCALE_BATCH, GRPO_SCALE_NONE};
    float *adv = malloc(n * sizeof *adv);
    int *eights = malloc(n * sizeof *eights), *ones = malloc(n * sizeof *ones);
    for (int i = 0; i < n; i++) eights[i] = 8, ones[i] = 1;
    for (int s = 0; s < 3; s++) {
        float *want = golden("advantages.txt", names[s], &k);
        EXPECT(want && k == n);
        grpo_advantages(rewards, eights, n / 8, scales[s], adv);
        for (int i = 0; want && i < n; i++) EXPECT_CLOSE(adv[i], want[i], 1e-5, 1e-6);
        free(want);
    }
    /* a group of one has std 0, as TRL sets it: advantage 0, no division by 0 */
    grpo_advantages(rewards, ones, n, GRPO_SCALE_GROUP, adv);
    for (int i = 0; i < n; i++) EXPECT(adv[i] == 0.0f);
    /* groups of different sizes: each centred on its own mean, the batch's
     * std over every reward */
    const float r[5] = {1, 0, 0.5f, 1, 1};
    const int sizes[2] = {2, 3};
    float a[5];
    grpo_advantages(r, sizes, 2, GRPO_SCALE_BATCH, a);
    double sd = sqrt((0.09 + 0.49 + 0.04 + 0.09 + 0.09) / 4); /* about the batch's mean, 0.7 */
    EXPECT_CLOSE(a[0], 0.5 / (sd + 1e-4), 1e-6, 1e-7);
    EXPECT_CLOSE(a[2], (0.5 - 2.5 / 3) / (sd + 1e-4), 1e-6, 1e-7);
    grpo_advantages(r, sizes, 2, GRPO_SCALE_GROUP, a);
    EXPECT_CLOSE(a[4], (1 - 2.5 / 3) / (sqrt((1.0 / 9 + 2.0 / 36) / 2) + 1e-4), 1e-6, 1e-7);
    free(eights);
    free(ones);
    free(adv);
    free(rewards);
}

static void test_loss_against_trl(void)
{
    enum { B = 6, T = 12, MAXLEN = 16 };
    int n;
    float *logp = golden("loss.txt", "logp", &n), *old = golden("loss.txt", "old_logp", &n);
    float *ref = golden("loss.txt", "ref_logp", &n), *mask = golden("loss.txt", "mask", &n);
    float *adv = golden("loss.txt", "adv", &n);
    EXPECT(logp && old && ref && mask && adv);
    if (!logp || !old || !ref || !mask || !adv) return;
    const grpo_loss_type_t types[] = {GRPO_LOSS_GRPO, GRPO_LOSS_BNPO, GRPO_LOSS_DR_GRPO, GRPO_LOSS_DAPO};
    float dlogp[B * T];
    float *ncases = golden("loss.txt", "cases", &n);
    int cases = ncases ? (int)ncases[0] : 0;
    free(ncases);
    EXPECTF(cases >= 19, "only %d loss cases in the golden file", cases);
    for (int c = 0; c < cases; c++) {
        char name[32];
        snprintf(name, sizeof name, "case%d", c);
        float *cs = golden("loss.txt", name, &n);
        snprintf(name, sizeof name, "loss%d", c);
        float *want_loss = golden("loss.txt", name, &n);
        snprintf(name, sizeof name, "dlogp%d", c);
        float *want_d = golden("loss.txt", name, &n);
        snprintf(name, sizeof name, "stats%d", c);
        float *want_s = golden("loss.txt", name, &n);
        grpo_params_t p = grpo_params_default(MAXLEN);
        p.loss_type = types[(int)cs[0]];
        p.beta = cs[2];
        p.delta = cs[3];
        p.kl_bias_correction = (int)cs[4];
        grpo_stats_t st;
        float loss = grpo_loss(&p, B, T, logp, cs[1] != 0.0f ? old : NULL, ref, mask, adv, dlogp, &st);
        int f0 = check_failures;
        EXPECT_CLOSE(loss, want_loss[0], 1e-5, 1e-7);
        for (int i = 0; i < B * T; i++) EXPECT_CLOSE(dlogp[i], want_d[i], 1e-5, 1e-8);
        EXPECT_CLOSE(st.clip_low, want_s[0], 1e-6, 1e-7);
        EXPECT_CLOSE(st.clip_high, want_s[1], 1e-6, 1e-7);
        EXPECT_CLOSE(st.clip_region, want_s[2], 1e-6, 1e-7);
        EXPECT_CLOSE(st.kl, want_s[3], 1e-5, 1e-7);
        if (check_failures != f0)
            fprintf(stderr, "  in case %d (loss type %d, old %g, beta %g, delta %g, bias correction %g)\n", c,
                    (int)cs[0], cs[1], cs[2], cs[3], cs[4]);
        free(cs);
        free(want_loss);
        free(want_d);
        free(want_s);
    }
    free(logp);
    free(old);
    free(ref);
    free(mask);
    free(adv);
}

typedef struct {
    float *hyper, *init, *grad[6], *norms, *final, *m, *v;
    int n;
} adam_gold_t;

static void adam_gold_free(adam_gold_t *g);

static int adam_gold_load(adam_gold_t *g)
{
    int k;
    g->hyper = golden("adamw.txt", "hyper", &k);
    g->init = golden("adamw.txt", "init", &g->n);
    int ok = g->hyper && g->init;
    for (int s = 0; s < 6; s++) {
        char name[16];
        snprintf(name, sizeof name, "grad%d", s);
        ok = (g->grad[s] = golden("adamw.txt", name, &k)) && ok;
    }
    ok = (g->norms = golden("adamw.txt", "norms", &k)) && ok;
    ok = (g->final = golden("adamw.txt", "final", &k)) && ok;
    ok = (g->m = golden("adamw.txt", "m", &k)) && ok;
    ok = (g->v = golden("adamw.txt", "v", &k)) && ok;
    EXPECTF(ok, "golden adamw.txt incomplete: rerun tests/oracle/grpo_golden.py");
    if (!ok) adam_gold_free(g);
    return ok;
}

static void adam_gold_free(adam_gold_t *g)
{
    free(g->hyper);
    free(g->init);
    free(g->norms);
    free(g->final);
    free(g->m);
    free(g->v);
    for (int s = 0; s < 6; s++) free(g->grad[s]);
}

static adamw_params_t adam_hyper(const adam_gold_t *g)
{
    return (adamw_params_t){
        .lr = g->hyper[0], .beta1 = g->hyper[1], .beta2 = g->hyper[2], .eps = g->hyper[3], .weight_decay = g->hyper[4]};
}

/* steps [from, to) of the golden run: clip, then step; returns failures of
 * the clip norms */
static void adam_run(const adam_gold_t *g, adamw_t *opt, float *params, int from, int to)
{
    adamw_params_t hp = adam_hyper(g);
    float *grads = malloc(g->n * sizeof *grads);
    for (int s = from; s < to; s++) {
        memcpy(grads, g->grad[s], g->n * sizeof *grads);
        float norm = grad_clip_norm(grads, g->n, g->hyper[5]);
        EXPECT_CLOSE(norm, g->norms[s], 1e-6, 0);
        adamw_step(opt, &hp, params, grads);
    }
    free(grads);
}

static adamw_t *adam_new_gold(const adam_gold_t *g)
{
    adamw_t *opt = adamw_new(g->n);
    EXPECT(adamw_no_decay(opt, (size_t)g->hyper[6], (size_t)g->hyper[7]) == 0);
    return opt;
}

static void test_adamw_against_torch(void)
{
    adam_gold_t g = {0};
    if (!adam_gold_load(&g)) return;
    adamw_t *opt = adam_new_gold(&g);
    float *params = malloc(g.n * sizeof *params);
    memcpy(params, g.init, g.n * sizeof *params);
    adam_run(&g, opt, params, 0, 6);
    EXPECT(adamw_steps(opt) == 6);
    for (int i = 0; i < g.n; i++) EXPECT_CLOSE(params[i], g.final[i], 1e-6, 1e-7);
    /* clipping scaled some steps and not others: both paths ran */
    int clipped = 0;
    for (int s = 0; s < 6; s++) clipped += g.norms[s] > g.hyper[5];
    EXPECT(clipped > 0 && clipped < 6);
    free(params);
    adamw_destroy(&opt);
    EXPECT(opt == NULL);
    adam_gold_free(&g);

    int n, k;
    float *small = golden("adamw.txt", "small_grad", &n);
    float *norm = golden("adamw.txt", "small_norm", &k);
    float *small_clipped = golden("adamw.txt", "small_clipped", &k);
    EXPECT(small && norm && small_clipped);
    if (small && norm && small_clipped) {
        EXPECT_CLOSE(grad_clip_norm(small, n, 2e-6f), norm[0], 1e-6, 0);
        for (int i = 0; i < n; i++) EXPECT_CLOSE(small[i], small_clipped[i], 1e-6, 0);
    }
    free(small);
    free(norm);
    free(small_clipped);
}

/* three steps, save, load into a fresh optimizer, three more: the same
 * parameters as six uninterrupted steps (the no-decay range survives) */
static void adamw_save_and_resume(const adam_gold_t *g, const char *path, const char *tmp)
{
    adamw_t *opt = adam_new_gold(g);
    float *params = malloc(g->n * sizeof *params);
    memcpy(params, g->init, g->n * sizeof *params);
    adam_run(g, opt, params, 0, 3);
    EXPECT(adamw_save(opt, path) == 0);
    EXPECT(access(tmp, F_OK) != 0);
    adamw_destroy(&opt);
    opt = adamw_load(path, g->n);
    EXPECT(opt != NULL);
    if (opt) {
        EXPECT(adamw_steps(opt) == 3);
        adam_run(g, opt, params, 3, 6);
        for (int i = 0; i < g->n; i++) EXPECT_CLOSE(params[i], g->final[i], 1e-6, 1e-7);
        adamw_destroy(&opt);
    }
    free(params);
}

/* the bytes of a saved state file, NULL if it cannot be opened */
static char *state_file_bytes(const char *path, long *size)
{
    FILE *src = fopen(path, "rb");
    char *bytes = NULL;
    if (src) {
        fseek(src, 0, SEEK_END);
        *size = ftell(src);
        rewind(src);
        bytes = malloc(*size);
        EXPECT(fread(bytes, 1, *size, src) == (size_t)*size);
        fclose(src);
    }
    return bytes;
}

/* a good state file cut short, with a wrong magic, with a trailing byte:
 * each loads as NULL */
static void adamw_load_damaged(const char *dir, char *bytes, long size, int n)
{
    char bad[160];
    const long cuts[] = {4, 30, 48, size - 1};
    for (size_t c = 0; bytes && c < sizeof cuts / sizeof *cuts; c++) {
        snprintf(bad, sizeof bad, "%s/cut%zu.bin", dir, c);
        FILE *f = fopen(bad, "wb");
        fwrite(bytes, 1, cuts[c], f);
        fclose(f);
        EXPECTF(adamw_load(bad, n) == NULL, "a file cut at %ld bytes loaded", cuts[c]);
        unlink(bad);
    }
    snprintf(bad, sizeof bad, "%s/magic.bin", dir);
    if (bytes) {
        bytes[0] ^= 0x20;
        FILE *f = fopen(bad, "wb");
        fwrite(bytes, 1, size, f);
        fclose(f);
        EXPECT(adamw_load(bad, n) == NULL);
        unlink(bad);
        bytes[0] ^= 0x20;
        snprintf(bad, sizeof bad, "%s/trailing.bin", dir);
        f = fopen(bad, "wb");
        fwrite(bytes, 1, size, f);
        fputc(0, f);
        fclose(f);
        EXPECT(adamw_load(bad, n) == NULL);
        unlink(bad);
    }
}

static void test_adamw_state_file(void)
{
    adam_gold_t g = {0};
    if (!adam_gold_load(&g)) return;
    char dir[] = "/tmp/sapo_adamw_XXXXXX", path[128], tmp[140];
    EXPECT(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/optimizer.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    adamw_save_and_resume(&g, path, tmp);

    /* every bad file: NULL with one line, never a crash */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing.bin", dir);
    EXPECT(adamw_load(bad, g.n) == NULL);
    EXPECT(adamw_load(path, g.n + 1) == NULL);
    long size = 0;
    char *bytes = state_file_bytes(path, &size);
    adamw_load_damaged(dir, bytes, size, g.n);
    /* saving into a folder that does not exist fails cleanly */
    snprintf(bad, sizeof bad, "%s/no/such/dir/opt.bin", dir);
    adamw_t *opt = adamw_new(4);
    EXPECT(adamw_save(opt, bad) == -1);
    adamw_destroy(&opt);

    free(bytes);
    unlink(path);
    rmdir(dir);
    adam_gold_free(&g);
}

/* the moments in bf16 (adamw_new_bf16): steps that move the parameters
 * as fp32 moments do, to bf16's precision; a second moment that decays
 * with no gradient at beta2 = 0.999 a step decays as fp32's on average
 * (rounded to nearest it would never move: 0.999 v rounds back to v);
 * and a state saved, loaded and rounded again is the one saved */
static void test_adamw_bf16_moments(void)
{
    enum { N = 20000, STEPS = 50, IDLE = 500 };
    float *p32 = malloc(N * sizeof(float)), *p16 = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    float *zero = calloc(N, sizeof(float));
    adamw_t *a = adamw_new(N), *b = adamw_new_bf16(N);
    EXPECT(a && b && !adamw_bf16(a) && adamw_bf16(b) && adamw_moment(b, 0) == NULL);
    adamw_params_t hp = adamw_params_default();
    hp.lr = 1e-3f;
    uint64_t r = 42;
    for (int i = 0; i < N; i++) p32[i] = p16[i] = (float)((r = r * 6364136223846793005ull + 1) >> 40) / 16777216.0f;
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++)
            g[i] = ((float)((r = r * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f) * 1e-2f;
        adamw_step(a, &hp, p32, g);
        adamw_step(b, &hp, p16, g);
    }
    /* the parameters' change from the start, each way */
    double d2 = 0, n2 = 0;
    r = 42;
    for (int i = 0; i < N; i++) {
        double p0 = (float)((r = r * 6364136223846793005ull + 1) >> 40) / 16777216.0f;
        d2 += ((double)p16[i] - p32[i]) * ((double)p16[i] - p32[i]);
        n2 += (p32[i] - p0) * (p32[i] - p0);
    }
    double rel = sqrt(d2 / n2);
    printf("bf16 moments: after %d steps the parameters' change is within %.3g of fp32 moments'\n", STEPS, rel);
    EXPECTF(rel < 0.02, "bf16 moments moved the parameters %.3g (relative L2) from fp32 moments'", rel);
    /* no gradient: only the moments' decay */
    hp.lr = 0;
    for (int s = 0; s < IDLE; s++) adamw_step(a, &hp, p32, zero), adamw_step(b, &hp, p16, zero);
    char dir[] = "/tmp/sapo_adamw16_XXXXXX", pa[128], pb[128];
    EXPECT(mkdtemp(dir) != NULL);
    snprintf(pa, sizeof pa, "%s/a.bin", dir);
    snprintf(pb, sizeof pb, "%s/b.bin", dir);
    EXPECT(adamw_save(a, pa) == 0 && adamw_save(b, pb) == 0);
    adamw_t *la = adamw_load(pa, N), *lb = adamw_load(pb, N);
    EXPECT(la && lb);
    if (la && lb) {
        double va = 0, vb = 0;
        for (int i = 0; i < N; i++) va += adamw_moment(la, 1)[i], vb += adamw_moment(lb, 1)[i];
        printf("bf16 moments: after %d steps without gradient the second moments' sum is %.4g of fp32's\n", IDLE,
               vb / va);
        EXPECTF(fabs(vb / va - 1) < 0.01, "the second moment decayed to %.4g of fp32's", vb / va);
        /* saved, loaded and rounded again: the same state, bit for bit */
        EXPECT(adamw_to_bf16(lb) == 0 && adamw_bf16(lb));
        EXPECT(adamw_save(lb, pa) == 0);
        long sa = 0, sb = 0;
        char *fa = state_file_bytes(pa, &sa), *fb = state_file_bytes(pb, &sb);
        EXPECT(fa && fb && sa == sb && memcmp(fa, fb, (size_t)sa) == 0);
        free(fa), free(fb);
    }
    adamw_destroy(&la), adamw_destroy(&lb), adamw_destroy(&a), adamw_destroy(&b);
    unlink(pa), unlink(pb), rmdir(dir);
    free(p32), free(p16), free(g), free(zero);
}

static void test_no_decay_ranges(void)
{
    adamw_t *opt = adamw_new(100);
    EXPECT(adamw_no_decay(opt, 50, 10) == 0);
    EXPECT(adamw_no_decay(opt, 10, 5) == 0);
    EXPECT(adamw_no_decay(opt, 60, 40) == 0); /* touching is fine */
    EXPECT(adamw_no_decay(opt, 55, 2) == -1); /* inside an earlier one */
    EXPECT(adamw_no_decay(opt, 5, 6) == -1);  /* overlapping the start of one */
    EXPECT(adamw_no_decay(opt, 99, 2) == -1); /* past the end */
    /* no gradient, no moments: only decayed parameters move */
    float params[100], grads[100] = {0};
    for (int i = 0; i < 100; i++) params[i] = 1.0f;
    adamw_params_t hp = adamw_params_default();
    hp.weight_decay = 0.5f;
    adamw_step(opt, &hp, params, grads);
    for (int i = 0; i < 100; i++) {
        int nd = (i >= 10 && i < 15) || i >= 50;
        EXPECTF(params[i] == (nd ? 1.0f : 1.0f - 1e-3f * 0.5f), "param %d = %.9g", i, params[i]);
    }
    adamw_destroy(&opt);
}

/* dL/dlogp against central differences of the loss, with masked tokens
 * getting exactly 0 */
static void test_gradient_finite_differences(void)
{
    enum { B = 4, T = 5 };
    float logp[B * T], old[B * T], mask[B * T], d_all[B * T], d_row[B * T];
    float adv[B] = {1.2f, -0.4f, 0.0f, -0.8f};
    for (int i = 0; i < B * T; i++) {
        logp[i] = -0.1f * (i % 7) - 0.05f;
        old[i] = logp[i] + 0.05f * ((i * 37 % 11) - 5);
        mask[i] = (i % T) < 1 + (i / T);
    }
    grpo_params_t p = grpo_params_default(T);
    grpo_loss(&p, B, T, logp, old, NULL, mask, adv, d_all, NULL);
    float d_sum = 0.0f;
    for (int i = 0; i < B * T; i++) {
        d_sum += fabsf(d_all[i]);
        if (!mask[i]) EXPECT(d_all[i] == 0.0f);
    }
    EXPECT(d_sum > 0.0f);
    /* finite differences of the loss against the analytic gradient */
    for (int i = 0; i < B * T; i++) {
        if (!mask[i]) continue;
        float keep = logp[i], h = 1e-3f;
        logp[i] = keep + h;
        float up = grpo_loss(&p, B, T, logp, old, NULL, mask, adv, d_row, NULL);
        logp[i] = keep - h;
        float down = grpo_loss(&p, B, T, logp, old, NULL, mask, adv, d_row, NULL);
        logp[i] = keep;
        EXPECT_CLOSE((up - down) / (2 * h), d_all[i], 2e-2, 1e-4);
    }
}

/* ratio_min and where it is, on a batch of 2 x 3 by hand: the ratios
 * exp(logp - old) are 1, e^-1, (masked: e^-5), e^0.5, e^-2, 1; the
 * smallest counted is e^-2, at cell 4 */
static void test_ratio_min_at(void)
{
    grpo_params_t p = grpo_params_default(3);
    const float logp[6] = {-1, -2, -6, -0.5f, -3, -1}, old[6] = {-1, -1, -1, -1, -1, -1};
    const float mask[6] = {1, 1, 0, 1, 1, 1}, adv[2] = {1, -1};
    float d[6];
    grpo_stats_t st;
    grpo_loss(&p, 2, 3, logp, old, NULL, mask, adv, d, &st);
    EXPECTF(st.ratio_min_at == 4 && fabsf(st.ratio_min - expf(-2)) < 1e-7f, "ratio_min %g at %ld", st.ratio_min,
            st.ratio_min_at);
    const float none[6] = {0};
    grpo_loss(&p, 2, 3, logp, old, NULL, none, adv, d, &st);
    EXPECTF(st.ratio_min_at == -1, "no token counted: at %ld", st.ratio_min_at);
}

int main(void)
{
    RUN_TEST(test_advantages);
    RUN_TEST(test_ratio_min_at);
    RUN_TEST(test_loss_against_trl);
    RUN_TEST(test_adamw_against_torch);
    RUN_TEST(test_adamw_state_file);
    RUN_TEST(test_no_decay_ranges);
    RUN_TEST(test_adamw_bf16_moments);
    RUN_TEST(test_gradient_finite_differences);
    CHECK_EXIT();
}
