/* The learner's options on one real GRPO step of the tiny model
 * (lib/train/train.c): mask-truncated leaves a completion cut by the length
 * limit out of the loss, and delta caps the ratio of tokens with negative
 * advantage (the loss itself is checked against TRL in test_grpo; here,
 * that the setting reaches it). */
#include "check.h"
#include "node/config.h"
#include "../learner/train.h"
#include "../learner/train_sft.h"
#include "node/policy.h"
#include "records.h"

/* how step's group comes: own (the default), or external from a node
 * running this model, with token ids that are (or are not) the encoding
 * of its text */
static bool step_external, step_bad_ids, step_one_likely;

/* one own group of 2 completions: "<answer>7</answer>" (reward 1,
 * finished) and "<answer>9" (reward 0, cut by the limit); the sampling
 * log-probs are -20 a token, far below the policy's, so every ratio is
 * large */
static int step(const char *const *flags, int nflags, train_stats_t *st)
{
    char *argv[16] = {"test_train"};
    for (int i = 0; i < nflags; i++) argv[1 + i] = (char *)flags[i];
    int argc = 1 + nflags;
    config_t cfg;
    if (config_load(&cfg, &argc, argv) != 0) return -1;
    cfg.beta = 0; /* no reference model here */
    char err[256];
    policy_t *pol = policy_new_bytes(NULL, 3, cfg.system_prompt, err, sizeof err);
    adamw_t *opt = adamw_new(model_num_params(pol->model));
    train_t *train = train_new(pol, NULL, &cfg, opt, err, sizeof err);
    const char *text[2] = {"<answer>7</answer>", "<answer>9"};
    int32_t ids[2][32];
    float lp[2][32];
    rec_completion_t c[2];
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(text[k]);
        for (size_t t = 0; t < n; t++) ids[k][t] = (unsigned char)text[k][t], lp[k][t] = -20.0f;
        if (step_bad_ids) ids[k][0] = 'X';
        if (step_one_likely && k == 1) lp[k][8] = 0.0f; /* the '9': its ratio the one below 1 */
        c[k] = (rec_completion_t){.text = text[k],
                                  .token_ids = ids[k],
                                  .n_tokens = n,
                                  .logprobs = lp[k],
                                  .n_logprobs = n,
                                  .reward = (float)(k == 0),
                                  .finished = k == 0};
    }
    rec_group_t g = {.node = step_external ? "peer" : cfg.node,
                     .model = pol->name,
                     .task = {.family = "basic_arithmetic", .question = "Calculate 3 + 4."},
                     .completions = c,
                     .n_completions = 2,
                     .scored = true,
                     .external = step_external};
    rec_batch_t b = {.node = cfg.node,
                     .round = 1,
                     .groups = &g,
                     .n_groups = 1,
                     .local_count = !step_external,
                     .external_count = step_external,
                     .stats_json = "{}"};
    uint8_t *buf;
    size_t len;
    rec_batch_view_t v;
    int rc = rec_batch_build(&b, &buf, &len) == 0 && rec_batch_view(buf, len, &v, err, sizeof err) == 0
                 ? train_step(train, &v, st, err, sizeof err)
                 : -1;
    if (rc) fprintf(stderr, "%s\n", err);
    rec_free(buf);
    train_destroy(&train);
    adamw_destroy(&opt);
    policy_destroy(&pol);
    return rc;
}

static void test_mask_truncated(void)
{
    train_stats_t all, masked;
    const char *off[] = {"--loss-type", "dapo"}, *on[] = {"--loss-type", "dapo", "--mask-truncated", "1"};
    EXPECT(step(off, 2, &all) == 0);
    EXPECT(step(on, 4, &masked) == 0);
    /* 18 + 9 completion tokens (the byte model's EOS is not in the text) */
    EXPECTF(all.grpo.tokens == 27 && all.masked_truncated == 0, "all: %ld tokens, %d masked", all.grpo.tokens,
            all.masked_truncated);
    EXPECTF(masked.grpo.tokens == 18 && masked.masked_truncated == 1 && masked.tokens == 18,
            "masked: %ld tokens in the loss, %ld counted, %d masked", masked.grpo.tokens, masked.tokens,
            masked.masked_truncated);
}

static void test_delta(void)
{
    train_stats_t plain, capped;
    const char *off[] = {"--loss-type", "dapo", "--delta", "0"}, *on[] = {"--loss-type", "dapo", "--delta", "2"};
    EXPECT(step(off, 4, &plain) == 0);
    EXPECT(step(on, 4, &capped) == 0);
    /* every ratio is huge: the negative-advantage tokens' loss -A r becomes
     * -A delta, so the loss falls by far; the positive side is clipped at
     * 1 + eps-high either way */
    EXPECTF(plain.grpo.ratio_max > 1e3f, "ratio max %g", plain.grpo.ratio_max);
    EXPECTF(capped.loss < plain.loss - 1.0f, "loss with delta %g, without %g", capped.loss, plain.loss);
}

/* how far gradient g times k is from h, relative to h's norm; infinite
 * when h is 0, so that a comparison with nothing fails */
static double grad_gap(const float *g, double k, const float *h, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) d += (k * g[i] - h[i]) * (k * g[i] - h[i]), s += (double)h[i] * h[i];
    return s > 0 ? sqrt(d / s) : INFINITY;
}

/* the warm start's step runs rows of similar length apart: its loss and
 * gradient are those of the whole batch padded to its longest row */
static void test_sft_rows(void)
{
    char *argv[] = {"test_train", "--lr", "0", "--max-grad-norm", "0", NULL};
    int argc = 5;
    config_t cfg;
    EXPECT(config_load(&cfg, &argc, argv) == 0);
    cfg.beta = 0; /* supervised: no reference model */
    char err[256];
    policy_t *pol = policy_new_bytes(NULL, 5, cfg.system_prompt, err, sizeof err);
    adamw_t *opt = adamw_new(model_num_params(pol->model));
    train_t *train = train_new(pol, NULL, &cfg, opt, err, sizeof err);
    const char *q[3] = {"Calculate 3 + 4.",
                        "A much longer question, whose prompt is several times the length of the others, "
                        "so that it lands in a run of its own.",
                        "Is 2024 a leap year?"};
    const char *a[3] = {" <answer>7</answer>", " <answer>x</answer>", " <answer>Yes</answer>"};
    float loss = train_sft_step(train, q, a, 3);
    size_t n = model_num_params(pol->model);
    float *g = malloc(n * sizeof *g);
    memcpy(g, model_grads(pol->model), n * sizeof *g);
    /* the same batch padded to its longest row, by model_cross_entropy */
    int T = 0, N[3], P[3], ids[3][256];
    for (int i = 0; i < 3; i++) {
        char *prompt = policy_prompt(pol, q[i]);
        int32_t *pi = NULL, *ai = NULL;
        size_t np = 0, na = 0;
        tokenizer_encode(pol->tok, prompt, strlen(prompt), &pi, &np);
        tokenizer_encode(pol->tok, a[i], strlen(a[i]), &ai, &na);
        for (size_t t = 0; t < np; t++) ids[i][t] = pi[t];
        for (size_t t = 0; t < na; t++) ids[i][np + t] = ai[t];
        ids[i][np + na] = tokenizer_eos_id(pol->tok);
        P[i] = (int)np, N[i] = (int)(np + na + 1);
        T = N[i] > T ? N[i] : T;
        free(prompt), free(pi), free(ai);
    }
    int tokens[3 * 256], targets[3 * 256];
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < T; t++) {
            tokens[i * T + t] = t < N[i] ? ids[i][t] : 0;
            targets[i * T + t] = t >= P[i] - 1 && t < N[i] - 1 ? ids[i][t + 1] : -1;
        }
    model_zero_grad(pol->model);
    float want = model_cross_entropy(pol->model, tokens, targets, 3, T);
    EXPECT_NEAR(loss, want, 1e-5);
    const float *h = model_grads(pol->model);
    double gap = grad_gap(g, 1, h, n);
    EXPECTF(gap < 1e-5, "gradient differs by %g of its norm", gap);
    free(g);
    train_destroy(&train);
    adamw_destroy(&opt);
    policy_destroy(&pol);
}

/* one local group of 4 byte-token completions with their sampling
 * log-probs and one external group of 3 completions (none where
 * shared_own_only), as a batch record */
static bool shared_own_only;
static int shared_batch_build(const char *node, const char *model, uint8_t **buf, size_t *buf_len)
{
    const char *own[4] = {"<answer>7</answer>", "<answer>8</answer>", "7", "<answer>77777"};
    const char *ext[3] = {"<answer>Yes</answer>", "<answer>No</answer>", "No, 2023 is not."};
    int32_t ids[4][32];
    float lp[4][32];
    rec_completion_t a[4], b[3];
    for (int k = 0; k < 4; k++) {
        size_t len = strlen(own[k]);
        for (size_t t = 0; t < len; t++) ids[k][t] = (unsigned char)own[k][t], lp[k][t] = -8.0f - 0.1f * (float)t;
        a[k] = (rec_completion_t){.text = own[k],
                                  .token_ids = ids[k],
                                  .n_tokens = len,
                                  .logprobs = lp[k],
                                  .n_logprobs = len,
                                  .reward = (float)(k == 0) + 0.25f * (float)(k == 2),
                                  .finished = k != 3};
    }
    for (int k = 0; k < 3; k++) b[k] = (rec_completion_t){.text = ext[k], .reward = (float)(k != 0), .finished = true};
    rec_group_t g[2] = {
        {.node = node,
         .model = model,
         .task = {.family = "basic_arithmetic", .question = "Calculate 3 + 4 and say it."},
         .completions = a,
         .n_completions = 4,
         .scored = true},
        {.node = "n9",
         .model = "another-model",
         .task = {.family = "leap_year", .question = "Was 2023 a leap year? Answer yes or no."},
         .completions = b,
         .n_completions = 3,
         .external = true,
         .scored = true},
    };
    rec_batch_t bt = {.node = node,
                      .round = 1,
                      .groups = g,
                      .n_groups = shared_own_only ? 1 : 2,
                      .local_count = 1,
                      .external_count = !shared_own_only,
                      .stats_json = "{}"};
    return rec_batch_build(&bt, buf, buf_len);
}

/* shared-prompt: a batch of an own group (token ids and sampling
 * log-probs, one completion cut by the limit) and an external group
 * (re-encoded text), in micro-batches of 3 sequences, gives the loss, the
 * statistics and the gradient that one row per completion gives, with
 * every loss type and with a KL term to a reference; and it runs fewer
 * positions */
static void shared_step(const char *const *flags, int nflags, train_stats_t *st, float **grads, size_t *n)
{
    char *argv[24] = {"test_train", "--lr", "0", "--max-grad-norm", "0", "--micro-batch", "3"};
    int argc = 7;
    for (int i = 0; i < nflags; i++) argv[argc++] = (char *)flags[i];
    config_t cfg;
    EXPECT(config_load(&cfg, &argc, argv) == 0);
    char err[256];
    policy_t *pol = policy_new_bytes(NULL, 9, cfg.system_prompt, err, sizeof err);
    policy_t *ref = cfg.beta > 0 ? policy_new_bytes(NULL, 10, cfg.system_prompt, err, sizeof err) : NULL;
    adamw_t *opt = adamw_new(model_num_params(pol->model));
    train_t *train = train_new(pol, ref, &cfg, opt, err, sizeof err);
    uint8_t *buf;
    size_t len;
    rec_batch_view_t v;
    EXPECT(shared_batch_build(cfg.node, pol->name, &buf, &len) == 0 &&
           rec_batch_view(buf, len, &v, err, sizeof err) == 0);
    EXPECTF(train_step(train, &v, st, err, sizeof err) == 0, "%s", err);
    *n = model_num_params(pol->model);
    *grads = malloc(*n * sizeof(float));
    memcpy(*grads, model_grads(pol->model), *n * sizeof(float));
    rec_free(buf);
    train_destroy(&train);
    adamw_destroy(&opt);
    policy_destroy(&pol);
    policy_destroy(&ref);
}

/* shared_step under two sets of nflags flags each: their statistics and
 * gradients (n floats each, for the caller to free); false when a step
 * did not run */
static bool shared_pair(const char *const *fa, const char *const *fb, int nflags, train_stats_t *a, train_stats_t *b,
                        float **ga, float **gb, size_t *n)
{
    *ga = *gb = NULL;
    shared_step(fa, nflags, a, ga, n);
    shared_step(fb, nflags, b, gb, n);
    if (*ga && *gb) return true;
    free(*ga), free(*gb);
    return false;
}

static void test_shared_prompt(void)
{
    const char *variants[][4] = {{"--loss-type", "grpo"},
                                 {"--loss-type", "dapo"},
                                 {"--loss-type", "dr_grpo"},
                                 {"--beta", "0"},
                                 {"--mask-truncated", "1"}};
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        const char *rows[4] = {variants[i][0], variants[i][1], "--shared-prompt", "0"};
        const char *packed[4] = {variants[i][0], variants[i][1], "--shared-prompt", "1"};
        train_stats_t sr, sp;
        float *gr, *gp;
        size_t n = 0;
        if (!shared_pair(rows, packed, 4, &sr, &sp, &gr, &gp, &n)) return;
        EXPECTF(sr.packed_groups == 0 && sp.packed_groups == 2, "%s: %d and %d groups packed", variants[i][1],
                sr.packed_groups, sp.packed_groups);
        EXPECTF(sp.positions * 2 < sr.positions, "%s: %ld positions packed, %ld in rows", variants[i][1], sp.positions,
                sr.positions);
        EXPECTF(sp.grpo.tokens == sr.grpo.tokens && sp.tokens == sr.tokens && sp.sequences == 7, "%s: tokens",
                variants[i][1]);
        EXPECTF(fabsf(sp.loss - sr.loss) <= 1e-5f * fmaxf(1.0f, fabsf(sr.loss)), "%s: loss %.7g packed, %.7g in rows",
                variants[i][1], sp.loss, sr.loss);
        EXPECTF(fabsf(sp.grpo.ratio_max - sr.grpo.ratio_max) < 1e-4f * sr.grpo.ratio_max && sr.grpo.ratio_max > 1.5f,
                "%s: ratio max %g packed, %g in rows", variants[i][1], sp.grpo.ratio_max, sr.grpo.ratio_max);
        double gap = grad_gap(gp, 1, gr, n);
        EXPECTF(gap < 1e-5, "%s: packed gradient differs by %g of its norm", variants[i][1], gap);
        free(gr), free(gp);
    }
}

/* An external group from a node running this model keeps its sampling
 * log-probs (the ratio is large, as for the own group), unless
 * external-logprobs is ignore or its token ids are not the encoding of
 * its text: then every ratio is 1. */
static void test_external_logprobs(void)
{
    train_stats_t own, use, ignore, bad;
    const char *on[] = {"--external-logprobs", "use"}, *off[] = {"--external-logprobs", "ignore"};
    EXPECT(step(on, 2, &own) == 0);
    step_external = true;
    EXPECT(step(on, 2, &use) == 0);
    EXPECT(step(off, 2, &ignore) == 0);
    step_bad_ids = true;
    EXPECT(step(on, 2, &bad) == 0);
    step_external = step_bad_ids = false;
    EXPECTF(use.external_logprobs == 2 && use.grpo.ratio_max > 1.5f &&
                fabsf(use.grpo.ratio_max - own.grpo.ratio_max) < 1e-3f * own.grpo.ratio_max,
            "use: %d completions, ratio max %g (own %g)", use.external_logprobs, use.grpo.ratio_max,
            own.grpo.ratio_max);
    EXPECTF(ignore.external_logprobs == 0 && fabsf(ignore.grpo.ratio_max - 1) < 1e-6f, "ignore: %d, ratio max %g",
            ignore.external_logprobs, ignore.grpo.ratio_max);
    EXPECTF(bad.external_logprobs == 0 && fabsf(bad.grpo.ratio_max - 1) < 1e-6f, "other ids: %d, ratio max %g",
            bad.external_logprobs, bad.grpo.ratio_max);
}

/* external-kl exclude: the KL term to the base model leaves the external
 * group out (its tokens count 0 in it), so it is smaller than with
 * include, and above 0 (the own group's); the gradients differ */
static void test_external_kl(void)
{
    const char *inc[] = {"--external-kl", "include"}, *exc[] = {"--external-kl", "exclude"};
    train_stats_t a, b;
    float *ga, *gb;
    size_t n = 0;
    if (!shared_pair(inc, exc, 2, &a, &b, &ga, &gb, &n)) return;
    EXPECTF(a.grpo.kl > 0 && b.grpo.kl > 0 && b.grpo.kl < a.grpo.kl, "kl %g with the external group, %g without",
            a.grpo.kl, b.grpo.kl);
    double d = 0;
    for (size_t k = 0; k < n; k++) d += fabs((double)ga[k] - gb[k]);
    EXPECT(d > 0);
    free(ga), free(gb);
}

/* external-train 0: the external group stays out of the step (counted
 * as untrained), which is then the step of the own group alone: the
 * same loss and gradient; with 1 it is trained, and they differ */
static void test_external_train(void)
{
    const char *on[] = {"--beta", "0", "--external-train", "1"}, *off[] = {"--beta", "0", "--external-train", "0"};
    train_stats_t a, b, own;
    float *ga, *gb, *go;
    size_t n = 0;
    if (!shared_pair(on, off, 4, &a, &b, &ga, &gb, &n)) return;
    shared_own_only = true;
    shared_step(on, 4, &own, &go, &n);
    shared_own_only = false;
    EXPECTF(a.groups == 2 && a.untrained_external == 0 && b.groups == 1 && b.untrained_external == 1,
            "groups %d and %d, untrained %d and %d", a.groups, b.groups, a.untrained_external, b.untrained_external);
    double same = 0, apart = 0;
    for (size_t k = 0; k < n; k++) same += fabs((double)gb[k] - go[k]), apart += fabs((double)ga[k] - go[k]);
    EXPECTF(same == 0 && b.loss == own.loss, "the own group's step differs by %g (loss %g against %g)", same, b.loss,
            own.loss);
    EXPECT(apart > 0);
    free(ga), free(gb), free(go);
}

/* scale-rewards batch: each advantage is the reward less its group's mean
 * over the std of every reward of the batch (shared_step's groups of 4 and
 * 3: {1, 0, 0.25, 0} and {0, 1, 1}) plus 1e-4. Without a KL term the
 * clipped objective is linear in the advantages, so the loss, the
 * gradient and the lowest ratio's advantage are scale-rewards none's over
 * that one number. */
static void test_scale_rewards_batch(void)
{
    const char *none[] = {"--beta", "0", "--scale-rewards", "none"};
    const char *batch[] = {"--beta", "0", "--scale-rewards", "batch"};
    train_stats_t a, b;
    float *ga, *gb;
    size_t n = 0;
    if (!shared_pair(none, batch, 4, &a, &b, &ga, &gb, &n)) return;
    const double r[7] = {1, 0, 0.25, 0, 0, 1, 1};
    double mean = 0, ss = 0;
    for (int i = 0; i < 7; i++) mean += r[i] / 7;
    for (int i = 0; i < 7; i++) ss += (r[i] - mean) * (r[i] - mean);
    double k = sqrt(ss / 6) + 1e-4;
    EXPECTF(fabs(b.loss * k - a.loss) <= 1e-5 * fabs(a.loss) && a.loss != 0, "loss %.7g with batch, %.7g without",
            b.loss, a.loss);
    EXPECTF(a.ratio_min_at.found && b.ratio_min_at.found &&
                fabs(b.ratio_min_at.advantage * k - a.ratio_min_at.advantage) < 1e-5,
            "advantage %g with batch, %g without", b.ratio_min_at.advantage, a.ratio_min_at.advantage);
    double gap = grad_gap(gb, k, ga, n);
    EXPECTF(gap < 1e-5, "gradient times %g differs by %g of its norm", k, gap);
    free(ga), free(gb);
}

/* the step names the token with the lowest ratio: the one sampled at
 * log-prob 0 (every other at -20), with its completion's text before it
 * and its advantage (reward 0 of {1, 0}: -0.707) */
static void test_ratio_min_at(void)
{
    train_stats_t st;
    const char *flags[] = {"--loss-type", "dapo"};
    step_one_likely = true;
    EXPECT(step(flags, 2, &st) == 0);
    step_one_likely = false;
    const ratio_min_at_t *a = &st.ratio_min_at;
    EXPECT(a->found);
    EXPECTF(!strcmp(a->token, "9") && a->token_id == '9' && a->position == 8 && !strcmp(a->before, "<answer>"),
            "token '%s' (%d) at %d after '%s'", a->token, a->token_id, a->position, a->before);
    EXPECTF(a->logp_sampled == 0.0f && a->logp < 0.0f && fabsf(expf(a->logp) - st.grpo.ratio_min) < 1e-6f,
            "logp %g, sampled %g, ratio_min %g", a->logp, a->logp_sampled, st.grpo.ratio_min);
    EXPECTF(fabsf(a->advantage + 0.70706f) < 1e-3f, "advantage %g", a->advantage);
}

int main(void)
{
    RUN_TEST(test_sft_rows);
    RUN_TEST(test_mask_truncated);
    RUN_TEST(test_delta);
    RUN_TEST(test_shared_prompt);
    RUN_TEST(test_external_logprobs);
    RUN_TEST(test_external_kl);
    RUN_TEST(test_external_train);
    RUN_TEST(test_ratio_min_at);
    RUN_TEST(test_scale_rewards_batch);
    CHECK_EXIT();
}
