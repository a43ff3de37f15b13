/* The CPU transformer against transformers + torch: logits, log-probs and
 * every parameter gradient of sum(w * logp) for tiny random Qwen2/Qwen3
 * models (tests/oracle/model_golden.py writes the goldens), greedy
 * generation, the save/load round trip and bad checkpoints. */
#include "check.h"
#include "model/model_impl.h"
#include "train/adamw.h"
#include "sampling/rng.h"
#include "util/fastexp.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define GOLD "tests/golden/model"

static const char *models[] = {"qwen2_tied", "qwen2_bf16", "qwen2_sharded", "qwen3_tied", "qwen3_bias", "qwen2_fp16"};

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)len + 1);
    size_t got = fread(s, 1, (size_t)len, f);
    fclose(f);
    s[got] = 0;
    if (n) *n = got;
    return s;
}

static int spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(p, 1, n, f);
    fclose(f);
    return put == n ? 0 : -1;
}

typedef struct {
    cJSON *json;
    int B, T, V;
    float temperature;
    int *tokens, *targets, *prompt, *greedy;
    int n_prompt, n_greedy;
    float *w, *greedy_logp, *logits, *logp;
} golden_t;

static int *ints(const cJSON *a, int *n)
{
    int cnt = cJSON_GetArraySize(a), i = 0;
    int *v = malloc(sizeof(int) * (cnt ? cnt : 1));
    const cJSON *e;
    cJSON_ArrayForEach(e, a) v[i++] = e->valueint;
    if (n) *n = cnt;
    return v;
}

static float *floats(const cJSON *a)
{
    int cnt = cJSON_GetArraySize(a), i = 0;
    float *v = malloc(sizeof(float) * (cnt ? cnt : 1));
    const cJSON *e;
    cJSON_ArrayForEach(e, a) v[i++] = (float)e->valuedouble;
    return v;
}

static int golden_load(golden_t *g, const char *name)
{
    char path[512];
    memset(g, 0, sizeof *g);
    snprintf(path, sizeof path, GOLD "/%s.json", name);
    char *text = slurp(path, NULL);
    if (!text) return -1;
    g->json = cJSON_Parse(text);
    free(text);
    g->B = cJSON_GetObjectItem(g->json, "B")->valueint;
    g->T = cJSON_GetObjectItem(g->json, "T")->valueint;
    g->V = cJSON_GetObjectItem(g->json, "V")->valueint;
    g->temperature = (float)cJSON_GetObjectItem(g->json, "temperature")->valuedouble;
    g->tokens = ints(cJSON_GetObjectItem(g->json, "tokens"), NULL);
    g->targets = ints(cJSON_GetObjectItem(g->json, "targets"), NULL);
    g->prompt = ints(cJSON_GetObjectItem(g->json, "prompt"), &g->n_prompt);
    g->greedy = ints(cJSON_GetObjectItem(g->json, "greedy"), &g->n_greedy);
    g->w = floats(cJSON_GetObjectItem(g->json, "w"));
    g->greedy_logp = floats(cJSON_GetObjectItem(g->json, "greedy_logp"));
    size_t n;
    snprintf(path, sizeof path, GOLD "/%s.logits.f32", name);
    g->logits = (float *)slurp(path, &n);
    if (n != sizeof(float) * g->B * g->T * g->V) return -1;
    snprintf(path, sizeof path, GOLD "/%s.logp.f32", name);
    g->logp = (float *)slurp(path, &n);
    return n == sizeof(float) * g->B * g->T ? 0 : -1;
}

static void golden_free(golden_t *g)
{
    cJSON_Delete(g->json);
    free(g->tokens);
    free(g->targets);
    free(g->prompt);
    free(g->greedy);
    free(g->w);
    free(g->greedy_logp);
    free(g->logits);
    free(g->logp);
}

/* largest |a - b| / max(|b|, floor): the floor keeps elements that cancel to
 * near zero from dominating */
static double max_rel(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), floor);
        if (d > worst) worst = d;
    }
    return worst;
}

static double max_abs(const float *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* logits and log-probs against transformers', with and without the logits
 * kept */
static void check_forward(model_t *m, const golden_t *g, const char *name)
{
    int N = g->B * g->T, V = g->V;
    float *logits = malloc(sizeof(float) * N * V), *logp = malloc(sizeof(float) * N);
    float *logp2 = malloc(sizeof(float) * N);
    EXPECT(model_forward(m, g->tokens, g->targets, g->B, g->T, g->temperature, logp, logits) == 0);
    /* logits of padding positions differ by design (transformers masks
     * the padding keys); only real tokens count */
    const cJSON *lens = cJSON_GetObjectItem(g->json, "lengths");
    double worst = 0;
    for (int b = 0; b < g->B; b++) {
        int len = cJSON_GetArrayItem(lens, b)->valueint;
        size_t off = (size_t)b * g->T * V;
        worst = fmax(worst, max_rel(logits + off, g->logits + off, (size_t)len * V, 1.0));
    }
    EXPECTF(worst < 1e-4, "%s: logits relative error %.3g", name, worst);
    worst = max_rel(logp, g->logp, N, 1.0);
    EXPECTF(worst < 1e-4, "%s: log-prob relative error %.3g", name, worst);
    /* the chunked lm_head (no logits kept) gives the same log-probs */
    EXPECT(model_forward(m, g->tokens, g->targets, g->B, g->T, g->temperature, logp2, NULL) == 0);
    EXPECT(memcmp(logp, logp2, sizeof(float) * N) == 0);
    free(logits);
    free(logp);
    free(logp2);
}

/* gradients against the golden folder's, after the forward above; a
 * second backward adds to them */
static void check_backward(model_t *m, const golden_t *g, const char *name)
{
    char dir[512], err[512];
    model_zero_grad(m);
    model_backward(m, g->w);
    snprintf(dir, sizeof dir, GOLD "/%s/grads", name);
    model_t *ref = model_load(dir, err, sizeof err);
    EXPECTF(ref, "%s", err);
    if (ref) {
        const float *gp = model_grads(m), *rp = model_params(ref);
        for (int k = 0; k < MODEL_NUM_TENSORS; k++) {
            size_t n = m->sizes[k];
            if (!n) continue;
            double r = max_rel(gp, rp, n, 0.02 * max_abs(rp, n));
            EXPECTF(r < 1e-3, "%s: gradient of tensor kind %d relative error %.3g", name, k, r);
            gp += n;
            rp += n;
        }
        /* micro-batches accumulate */
        model_backward(m, g->w);
        const float *g2 = model_grads(m);
        rp = model_params(ref);
        double r = max_rel(g2, rp, model_num_params(m), 1e-2);
        EXPECTF(r > 0.5, "a second backward must add up (rel %.3g)", r);
        model_destroy(&ref);
    }
}

/* greedy generation: transformers' tokens and log-probs */
static void check_greedy(model_t *m, const golden_t *g, const char *name)
{
    int M = g->n_greedy + 4, *toks = malloc(sizeof(int) * M), len = 0;
    float *glp = malloc(sizeof(float) * M);
    model_gen_params_t gp = {.max_new = M, .sample = {.temperature = 0, .top_k = 0, .top_p = 1}, .seed = 1};
    EXPECT(model_generate(m, g->prompt, g->n_prompt, 1, &gp, toks, glp, &len) == 0);
    /* transformers stops at max_new_tokens or at EOS, and so must we */
    bool eos_end = len < M;
    EXPECTF(len == g->n_greedy || (!eos_end && len >= g->n_greedy), "%s: greedy length %d vs %d", name, len,
            g->n_greedy);
    for (int i = 0; i < g->n_greedy && i < len; i++) {
        EXPECTF(toks[i] == g->greedy[i], "%s: greedy token %d: %d vs %d", name, i, toks[i], g->greedy[i]);
        EXPECT_NEAR(glp[i], g->greedy_logp[i], 1e-4);
    }
    free(toks);
    free(glp);
}

static void check_model(const char *name)
{
    char dir[512], err[512];
    golden_t g;
    EXPECTF(golden_load(&g, name) == 0, "golden files of %s", name);
    snprintf(dir, sizeof dir, GOLD "/%s", name);
    model_t *m = model_load(dir, err, sizeof err);
    EXPECTF(m, "%s", err);
    if (!m) {
        golden_free(&g);
        return;
    }
    check_forward(m, &g, name);
    check_backward(m, &g, name);
    check_greedy(m, &g, name);
    model_destroy(&m);
    EXPECT(m == NULL);
    golden_free(&g);
}

static void test_qwen2_tied(void) { check_model("qwen2_tied"); }
static void test_qwen2_bf16(void) { check_model("qwen2_bf16"); }
static void test_qwen2_sharded(void) { check_model("qwen2_sharded"); }
static void test_qwen3_tied(void) { check_model("qwen3_tied"); }
static void test_qwen3_bias(void) { check_model("qwen3_bias"); }
static void test_qwen2_fp16(void) { check_model("qwen2_fp16"); }

static char tmp_root[256];

static const char *tmpdir(const char *leaf)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, leaf);
    mkdir(path, 0755);
    return path;
}

/* save -> load gives the same parameters (fp32) or their bf16 rounding;
 * SAPO_MODEL_SAVE_DIR keeps a saved folder for model_golden.py --check */
static void test_save_load(void)
{
    char err[512];
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, GOLD "/%s", models[i]);
        model_t *m = model_load(dir, err, sizeof err);
        EXPECTF(m, "%s", err);
        if (!m) continue;
        const char *out = tmpdir(models[i]);
        EXPECTF(model_save(m, out, false, err, sizeof err) == 0, "%s", err);
        model_t *r = model_load(out, err, sizeof err);
        EXPECTF(r, "%s", err);
        if (r) {
            EXPECT(model_num_params(r) == model_num_params(m));
            EXPECT(memcmp(model_params(r), model_params(m), model_num_params(m) * sizeof(float)) == 0);
            EXPECT(memcmp(model_config(r), model_config(m), sizeof(model_config_t)) == 0);
            model_destroy(&r);
        }
        EXPECTF(model_save(m, out, true, err, sizeof err) == 0, "%s", err);
        r = model_load(out, err, sizeof err);
        EXPECTF(r, "%s", err);
        if (r) {
            double worst = max_rel(model_params(r), model_params(m), model_num_params(m), 1e-30);
            EXPECTF(worst <= 1.0 / 256, "bf16 round trip relative error %.3g", worst);
            model_destroy(&r);
        }
        const char *keep = getenv("SAPO_MODEL_SAVE_DIR");
        if (keep) {
            snprintf(dir, sizeof dir, "%s/%s", keep, models[i]);
            mkdir(keep, 0755);
            mkdir(dir, 0755);
            EXPECTF(model_save(m, dir, false, err, sizeof err) == 0, "%s", err);
        }
        model_destroy(&m);
    }
}

/* a folder with the given config.json text and safetensors bytes */
static const char *bad_folder(const char *leaf, const char *config, const void *st, size_t st_len)
{
    const char *dir = tmpdir(leaf);
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    spit(path, config, strlen(config));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    spit(path, st, st_len);
    return dir;
}

/* model_reload: another folder of the same architecture read into a
 * running model in place gives what model_load gives (the sharded golden
 * folder too); a folder that fails its checks (a shard missing, the last
 * tensor cut short, another shape) is refused with its line and leaves
 * every weight as it was */
static void test_reload(void)
{
    char err[512], dir[512];
    model_config_t c = model_config_tiny();
    model_t *a = model_new_random(&c, 1, err, sizeof err), *b = model_new_random(&c, 2, err, sizeof err);
    EXPECTF(a && b, "%s", err);
    if (!a || !b) goto done;
    size_t bytes = model_num_params(a) * sizeof(float);
    char bdir[512];
    snprintf(bdir, sizeof bdir, "%s", tmpdir("reload-b"));
    EXPECTF(model_save(b, bdir, true, err, sizeof err) == 0, "%s", err);
    model_t *want = model_load(bdir, err, sizeof err);
    EXPECTF(want, "%s", err);
    EXPECTF(model_reload(a, bdir, err, sizeof err) == 0, "%s", err);
    EXPECT(want && memcmp(model_params(a), model_params(want), bytes) == 0);
    model_destroy(&want);
    /* cut short: the last tensor past the end of the file */
    char path[600], cut[600];
    snprintf(path, sizeof path, "%s/model.safetensors", bdir);
    size_t n;
    char *st = slurp(path, &n);
    const char *cdir = bad_folder("reload-cut", "", st, n - 4);
    snprintf(cut, sizeof cut, "%s/config.json", cdir);
    snprintf(path, sizeof path, "%s/config.json", bdir);
    size_t cn;
    char *conf = slurp(path, &cn);
    spit(cut, conf, cn);
    float *before = malloc(bytes);
    memcpy(before, model_params(a), bytes);
    EXPECTF(model_reload(a, cdir, err, sizeof err) == -1 && strstr(err, "past the end of the file"), "%s", err);
    EXPECT(memcmp(before, model_params(a), bytes) == 0);
    free(st), free(conf), free(before);
    /* another shape */
    model_config_t c2 = c;
    c2.L = c.L + 1;
    model_t *other = model_new_random(&c2, 3, err, sizeof err);
    const char *odir = tmpdir("reload-other");
    EXPECTF(other && model_save(other, odir, false, err, sizeof err) == 0, "%s", err);
    EXPECT(model_reload(a, odir, err, sizeof err) == -1 && strstr(err, "a different architecture"));
    model_destroy(&other);
    /* the sharded golden folder, reloaded into its own model */
    snprintf(dir, sizeof dir, GOLD "/qwen2_sharded");
    model_t *s1 = model_load(dir, err, sizeof err), *s2 = model_load(dir, err, sizeof err);
    EXPECTF(s1 && s2, "%s", err);
    if (s1 && s2) {
        memset(model_params(s2), 0, model_num_params(s2) * sizeof(float));
        EXPECTF(model_reload(s2, dir, err, sizeof err) == 0, "%s", err);
        EXPECT(memcmp(model_params(s1), model_params(s2), model_num_params(s1) * sizeof(float)) == 0);
    }
    model_destroy(&s1);
    model_destroy(&s2);
done:
    model_destroy(&a);
    model_destroy(&b);
}

static void expect_error(const char *dir, const char *want1, const char *want2)
{
    char err[512] = "";
    model_t *m = model_load(dir, err, sizeof err);
    EXPECTF(!m, "%s must not load", dir);
    model_destroy(&m);
    fprintf(stderr, "expected error: %s\n", err);
    EXPECTF(strstr(err, want1) && strstr(err, want2), "error \"%s\" should name %s and %s", err, want1, want2);
    EXPECTF(!strchr(err, '\n'), "one line: \"%s\"", err);
}

/* config.json: a missing field, an inconsistent one, a shape the tensors
 * do not have; model.safetensors truncated and short */
static void bad_config_and_size(const char *config, const char *st, size_t slen)
{
    /* missing field */
    char *c2 = strdup(config), *p = strstr(c2, "\"hidden_size\"");
    memcpy(p, "\"hidden_sizX\"", 13);
    expect_error(bad_folder("nofield", c2, st, slen), "config.json", "hidden_size");
    free(c2);
    /* inconsistent field */
    c2 = strdup(config);
    p = strstr(c2, "\"num_key_value_heads\": 2");
    memcpy(p, "\"num_key_value_heads\": 3", 24);
    expect_error(bad_folder("kvheads", c2, st, slen), "config.json", "num_key_value_heads");
    free(c2);
    /* wrong shape: the file's tensors against a narrower MLP */
    c2 = strdup(config);
    p = strstr(c2, "\"intermediate_size\": 96");
    memcpy(p, "\"intermediate_size\": 64", 23);
    expect_error(bad_folder("shape", c2, st, slen), "model.safetensors", "mlp.");
    free(c2);
    /* truncated file */
    expect_error(bad_folder("truncated", config, st, slen - 100), "model.safetensors", "truncated");
    expect_error(bad_folder("short", config, st, 5), "model.safetensors", "short");
}

/* model.safetensors with a wrong dtype, then a garbage header */
static void bad_header(const char *config, const char *st, size_t slen)
{
    /* wrong dtype: rewrite one header entry, keeping the header length */
    char *s2 = malloc(slen);
    memcpy(s2, st, slen);
    uint64_t hl;
    memcpy(&hl, s2, 8);
    char *hdr = s2 + 8, *at = NULL;
    for (char *q = hdr; q + 5 < hdr + hl; q++)
        if (!memcmp(q, "\"F32\"", 5)) {
            at = q;
            break;
        }
    EXPECT(at != NULL);
    if (at) memcpy(at, "\"I32\"", 5);
    expect_error(bad_folder("dtype", config, s2, slen), "model.safetensors", "I32");
    /* garbage header */
    memset(hdr, 'x', 16);
    expect_error(bad_folder("header", config, s2, slen), "model.safetensors", "header");
    free(s2);
}

/* a shard the index names is gone; a tensor no shard holds */
static void bad_shards(void)
{
    const char *sh = tmpdir("shards");
    char cmd[1200], path[700];
    snprintf(cmd, sizeof cmd,
             "cp " GOLD "/qwen2_sharded/*.json " GOLD "/qwen2_sharded/*.safetensors '%s'/ && "
             "rm '%s'/model-00003-of-00017.safetensors",
             sh, sh);
    EXPECT(system(cmd) == 0);
    expect_error(sh, "model-00003-of-00017.safetensors", "No such file");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", sh);
    char *idx = slurp(path, NULL);
    EXPECT(idx != NULL);
    if (idx) {
        /* point the missing shard's tensors at a shard that lacks them */
        for (char *q = strstr(idx, "model-00003-of"); q; q = strstr(q, "model-00003-of"))
            memcpy(q, "model-00004-of", 14);
        spit(path, idx, strlen(idx));
        expect_error(sh, "index.json", "is missing");
        free(idx);
    }
}

static void test_bad_input(void)
{
    size_t clen, slen;
    char *config = slurp(GOLD "/qwen2_tied/config.json", &clen);
    char *st = slurp(GOLD "/qwen2_tied/model.safetensors", &slen);
    if (!config || !st) {
        free(config);
        free(st);
        SKIP_TEST("golden qwen2_tied missing");
    }
    bad_config_and_size(config, st, slen);
    bad_header(config, st, slen);
    bad_shards();
    /* no folder at all */
    expect_error("/nonexistent/sapo-model", "config.json", "No such file");
    free(config);
    free(st);
}

/* supervised loss equals the mean negative log-prob and its gradient is
 * the backward of dlogp = -1/count */
static void test_cross_entropy(void)
{
    char err[512];
    golden_t g;
    if (golden_load(&g, "qwen2_tied")) SKIP_TEST("golden qwen2_tied missing");
    model_t *m = model_load(GOLD "/qwen2_tied", err, sizeof err);
    EXPECTF(m, "%s", err);
    if (!m) {
        golden_free(&g);
        return;
    }
    int N = g.B * g.T, cnt = 0;
    double want = 0;
    for (int i = 0; i < N; i++)
        if (g.targets[i] >= 0) {
            want -= g.logp[i];
            cnt++;
        }
    model_zero_grad(m);
    float loss = model_cross_entropy(m, g.tokens, g.targets, g.B, g.T);
    EXPECT_NEAR(loss, want / cnt, 1e-5);
    size_t n = model_num_params(m);
    float *g1 = malloc(n * sizeof(float)), *d = malloc(N * sizeof(float)), *lp = malloc(N * sizeof(float));
    memcpy(g1, model_grads(m), n * sizeof(float));
    for (int i = 0; i < N; i++) d[i] = g.targets[i] >= 0 ? -1.0f / cnt : 0.0f;
    model_zero_grad(m);
    EXPECT(model_forward(m, g.tokens, g.targets, g.B, g.T, 1.0f, lp, NULL) == 0);
    model_backward(m, d);
    EXPECT(max_rel(g1, model_grads(m), n, 1e-6) < 1e-5);
    int bad[2] = {0, 999};
    EXPECT(model_forward(m, bad, bad, 1, 2, 1.0f, lp, NULL) == -1);
    free(g1);
    free(d);
    free(lp);
    model_destroy(&m);
    golden_free(&g);
}

/* sampled completions: the log-probs returned by the cached decode equal
 * a full forward over prompt + completion; a seed repeats exactly */
static void test_sampling(void)
{
    char err[512];
    model_t *m = model_load(GOLD "/qwen3_tied", err, sizeof err);
    EXPECTF(m, "%s", err);
    if (!m) return;
    int prompt[5] = {10, 20, 30, 40, 50}, P = 5, L = 4, M = 9;
    int toks[36], toks2[36], lens[4], lens2[4];
    float lp[36], lp2[36];
    model_gen_params_t gp = {.max_new = M, .sample = {.temperature = 0.9f, .top_k = 0, .top_p = 1}, .seed = 7};
    EXPECT(model_generate(m, prompt, P, L, &gp, toks, lp, lens) == 0);
    EXPECT(model_generate(m, prompt, P, L, &gp, toks2, lp2, lens2) == 0);
    EXPECT(memcmp(lens, lens2, sizeof lens) == 0);
    bool same = true, differ = false;
    for (int s = 0; s < L; s++)
        for (int t = 0; t < lens[s]; t++) {
            same &= toks[s * M + t] == toks2[s * M + t] && lp[s * M + t] == lp2[s * M + t];
            differ |= toks[s * M + t] != toks[t];
        }
    EXPECT(same);
    EXPECTF(differ, "4 completions at temperature 0.9 should not all be equal");
    int T = P + M, tk[4 * 14], tg[4 * 14];
    float flp[4 * 14];
    for (int s = 0; s < L; s++)
        for (int t = 0; t < T; t++) {
            int i = s * T + t;
            tk[i] = t < P ? prompt[t] : (t - P < lens[s] ? toks[s * M + t - P] : 0);
            tg[i] = t + 1 >= P && t + 1 - P < lens[s] ? toks[s * M + t + 1 - P] : -1;
        }
    EXPECT(model_forward(m, tk, tg, L, T, 0.9f, flp, NULL) == 0);
    for (int s = 0; s < L; s++)
        for (int t = 0; t < lens[s]; t++) EXPECT_NEAR(lp[s * M + t], flp[s * T + P - 1 + t], 1e-4);
    EXPECT(model_generate(m, prompt, 0, L, &gp, toks, lp, lens) == -1);
    model_destroy(&m);
}

/* the lm_head in chunks of 7 positions (several per batch, the last one
 * short) gives the log-probs and gradients of one pass over all */
static void test_chunked_lm_head(void)
{
    const char *names[2] = {"qwen2_tied", "qwen2_bf16"};
    for (int i = 0; i < 2; i++) {
        char dir[256], err[512];
        golden_t g;
        if (golden_load(&g, names[i])) SKIP_TEST("golden files missing");
        snprintf(dir, sizeof dir, GOLD "/%s", names[i]);
        model_t *m = model_load(dir, err, sizeof err);
        EXPECTF(m, "%s", err);
        if (!m) {
            golden_free(&g);
            return;
        }
        int N = g.B * g.T;
        size_t n = model_num_params(m);
        float *lp = malloc(N * sizeof(float)), *lp7 = malloc(N * sizeof(float)), *g1 = malloc(n * sizeof(float));
        model_zero_grad(m);
        EXPECT(model_forward(m, g.tokens, g.targets, g.B, g.T, g.temperature, lp, NULL) == 0);
        model_backward(m, g.w);
        memcpy(g1, model_grads(m), n * sizeof(float));
        model_set_logits_chunk(m, 7);
        model_zero_grad(m);
        EXPECT(model_forward(m, g.tokens, g.targets, g.B, g.T, g.temperature, lp7, NULL) == 0);
        model_backward(m, g.w);
        EXPECT(max_rel(lp7, lp, N, 1e-3) < 1e-6);
        /* sums in another order: rounding only, judged against the scale */
        double r = max_rel(model_grads(m), g1, n, 0.01 * max_abs(g1, n));
        EXPECTF(r < 1e-4, "%s: chunked gradients differ by %.3g", names[i], r);
        /* the backward pass takes the forward pass's last chunk of logits
         * as it stands, and computes every other chunk again: so does it
         * every chunk after a pass that wrote the whole logits elsewhere */
        int last = (N - 1) / 7 * 7;
        EXPECT(model_forward(m, g.tokens, g.targets, g.B, g.T, g.temperature, lp7, NULL) == 0);
        EXPECTF(last > 0 && model_logits_recompute(m, 0), "%s: the first chunk taken as held", names[i]);
        EXPECT(model_forward(m, g.tokens, g.targets, g.B, g.T, g.temperature, lp7, NULL) == 0);
        EXPECTF(!model_logits_recompute(m, last), "%s: the last chunk's logits computed again", names[i]);
        EXPECT(model_logits_recompute(m, last));
        float *all = malloc(sizeof(float) * N * m->cfg.V);
        EXPECT(model_forward(m, g.tokens, g.targets, g.B, g.T, g.temperature, lp7, all) == 0);
        EXPECTF(model_logits_recompute(m, last), "%s: logits taken as held after a pass that returned them", names[i]);
        free(all);
        free(lp);
        free(lp7);
        free(g1);
        model_destroy(&m);
        golden_free(&g);
    }
}

/* model_forward_packed: one prompt's completions in one row (the prompt
 * but its last token once, then each completion as a segment led by that
 * token), beside a plain row, give each completion token the log-prob
 * and the parameters the gradient that one row per completion gives:
 * the same sums in another order */
enum { PACK_P = 7, PACK_L = 3, PACK_CMAX = 6, PACK_T1 = PACK_P + PACK_CMAX, PACK_T2 = PACK_P - 1 + 4 + 1 + 6 + 2 };
static const int pack_clen[PACK_L] = {4, 1, 6};

/* one prompt, its completions, and both layouts of them with their
 * gradient weights */
typedef struct {
    int prompt[PACK_P], comp[PACK_L][PACK_CMAX];
    int tk1[PACK_L * PACK_T1], tg1[PACK_L * PACK_T1]; /* one row per completion */
    float d1[PACK_L * PACK_T1];
    int tk2[2 * PACK_T2], tg2[2 * PACK_T2], st2[2 * PACK_T2], at[PACK_L][PACK_CMAX]; /* packed */
    float d2[2 * PACK_T2];
} pack_case_t;

/* random prompt and completions; one row per completion, padded to T1 */
static void pack_rows(pack_case_t *c, int V)
{
    enum { P = PACK_P, L = PACK_L, CMAX = PACK_CMAX, T1 = PACK_T1 };
    const int *clen = pack_clen;
    uint64_t r = 12345;
    for (int t = 0; t < P; t++) c->prompt[t] = (int)((r = r * 6364136223846793005ULL + 1) >> 40) % V;
    for (int i = 0; i < L; i++)
        for (int t = 0; t < CMAX; t++) c->comp[i][t] = (int)((r = r * 6364136223846793005ULL + 1) >> 40) % V;
    for (int i = 0; i < L; i++)
        for (int t = 0; t < T1; t++) {
            int k = i * T1 + t, j = t - (P - 1);
            c->tk1[k] = t < P ? c->prompt[t] : (t - P < clen[i] ? c->comp[i][t - P] : 0);
            c->tg1[k] = j >= 0 && j < clen[i] ? c->comp[i][j] : -1;
            c->d1[k] = c->tg1[k] >= 0 ? 0.3f * (float)(i + 1) - 0.05f * (float)j : 0.0f;
        }
}

/* packed: row 0 the prompt's first P-1 tokens, then per completion its
 * segment [prompt[P-1], c_0 .. c_{C-2}] (targets c_0 .. c_{C-1}), then
 * padding; row 1 completion 0 as a plain row */
static void pack_packed(pack_case_t *c)
{
    enum { P = PACK_P, L = PACK_L, T1 = PACK_T1, T2 = PACK_T2 };
    const int *clen = pack_clen;
    for (int k = 0; k < 2 * T2; k++) c->tk2[k] = 0, c->tg2[k] = -1, c->st2[k] = 0, c->d2[k] = 0;
    int n = 0;
    for (int t = 0; t < P - 1; t++) c->tk2[n++] = c->prompt[t];
    for (int i = 0; i < L; i++) {
        int a = n;
        for (int j = 0; j < clen[i]; j++) {
            c->tk2[n] = j == 0 ? c->prompt[P - 1] : c->comp[i][j - 1];
            c->tg2[n] = c->comp[i][j];
            c->st2[n] = a;
            c->at[i][j] = n++;
        }
    }
    for (; n < T2; n++) c->st2[n] = n; /* padding: segments of one */
    for (int t = 0; t < T1 && t < T2; t++) c->tk2[T2 + t] = c->tk1[t], c->tg2[T2 + t] = c->tg1[t];
    for (int i = 0; i < L; i++)
        for (int j = 0; j < clen[i]; j++) c->d2[c->at[i][j]] = c->d1[i * T1 + P - 1 + j];
}

/* a segment that does not see its prefix is another function: a start
 * that skips the prompt must change the log-probs; malformed layouts are
 * refused */
static void pack_bad_starts(model_t *m, const pack_case_t *c, const float *lp1, const char *what)
{
    enum { P = PACK_P, T1 = PACK_T1, T2 = PACK_T2 };
    float lp2[2 * T2];
    int bad[2 * T2];
    memcpy(bad, c->st2, sizeof bad);
    EXPECT(model_forward_packed(m, c->tk2, c->tg2, NULL, 2, T2, 0.8f, lp2, NULL) == 0);
    EXPECTF(fabs((double)lp2[c->at[2][5]] - lp1[2 * T1 + P - 1 + 5]) > 1e-4,
            "%s: the causal row should differ from the segment's own", what);
    /* malformed layouts are refused: a segment's start past its position,
     * a position that goes back to an earlier segment */
    bad[P + 1] = P + 3;
    EXPECT(model_forward_packed(m, c->tk2, c->tg2, bad, 2, T2, 0.8f, lp2, NULL) == -1);
    memcpy(bad, c->st2, sizeof bad);
    bad[c->at[2][3]] = c->at[0][0];
    EXPECT(model_forward_packed(m, c->tk2, c->tg2, bad, 2, T2, 0.8f, lp2, NULL) == -1);
}

/* tol: the log-probs' largest difference and the gradients' largest
 * relative one that pass */
static void packed_against_rows(model_t *m, const char *what, double tol_lp, double tol_g)
{
    enum { P = PACK_P, L = PACK_L, T1 = PACK_T1, T2 = PACK_T2 };
    const int *clen = pack_clen;
    pack_case_t *c = calloc(1, sizeof *c);
    pack_rows(c, model_config(m)->V);
    pack_packed(c);
    float lp1[L * T1], lp2[2 * T2];
    size_t np = model_num_params(m);
    float *g1 = malloc(np * sizeof(float));
    model_zero_grad(m);
    EXPECT(model_forward(m, c->tk1, c->tg1, L, T1, 0.8f, lp1, NULL) == 0);
    model_backward(m, c->d1);
    memcpy(g1, model_grads(m), np * sizeof(float));
    model_zero_grad(m);
    EXPECT(model_forward_packed(m, c->tk2, c->tg2, c->st2, 2, T2, 0.8f, lp2, NULL) == 0);
    /* the plain row's gradient is counted once above, so none here */
    model_backward(m, c->d2);
    double worst = 0;
    for (int i = 0; i < L; i++)
        for (int j = 0; j < clen[i]; j++) {
            worst = fmax(worst, fabs((double)lp2[c->at[i][j]] - lp1[i * T1 + P - 1 + j]));
            if (i == 0) worst = fmax(worst, fabs((double)lp2[T2 + P - 1 + j] - lp1[P - 1 + j]));
        }
    EXPECTF(worst < tol_lp, "%s: packed log-probs differ by %.3g", what, worst);
    double rg = max_rel(model_grads(m), g1, np, 0.01 * max_abs(g1, np));
    EXPECTF(rg < tol_g && max_abs(g1, np) > 0, "%s: packed gradients differ by %.3g", what, rg);
    printf("%s: packed against rows, log-probs %.3g, gradients %.3g\n", what, worst, rg);
    pack_bad_starts(m, c, lp1, what);
    free(g1);
    free(c);
}

static void test_packed(void)
{
    char err[512];
    const char *names[2] = {"qwen2_tied", "qwen3_bias"};
    for (int i = 0; i < 2; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, GOLD "/%s", names[i]);
        model_t *m = model_load(dir, err, sizeof err);
        EXPECTF(m, "%s", err);
        if (!m) return;
        packed_against_rows(m, names[i], 1e-5, 1e-4);
        /* in bf16 a row's segments are one block of attention, masked
         * (forward_bf16.c); these products are too small for the bf16 kernels,
         * so the sums differ only in order (1e-6 and 7e-5 measured) */
        char bf16[300];
        snprintf(bf16, sizeof bf16, "%s in cpu-bf16", names[i]);
        if (model_avx512bf16_available() && model_set_backend(m, "cpu-bf16", err, sizeof err) == 0)
            packed_against_rows(m, bf16, 1e-4, 1e-3);
        else printf("%s: not run (this CPU has no AVX512-BF16)\n", bf16);
        model_destroy(&m);
    }
}

/* three prompts of different lengths in one decode batch give what three
 * separate requests with the same seeds give */
static void test_generate_batch(void)
{
    char err[512];
    model_t *m = model_load(GOLD "/qwen2_sharded", err, sizeof err);
    EXPECTF(m, "%s", err);
    if (!m) return;
    int p0[4] = {11, 12, 13, 14}, p1[7] = {20, 21, 22, 23, 24, 25, 26}, p2[1] = {30};
    const int *prompts[3] = {p0, p1, p2};
    int lens[3] = {4, 7, 1}, L = 2, M = 10;
    uint64_t seeds[3] = {5, 6, 7};
    model_gen_params_t gp = {.max_new = M, .sample = {.temperature = 0.9f, .top_k = 20, .top_p = 0.95f}};
    int tok[3 * 2 * 10], n[3 * 2], tok1[2 * 10], n1[2];
    float lp[3 * 2 * 10], lp1[2 * 10];
    EXPECT(model_generate_batch(m, prompts, lens, seeds, 3, L, &gp, tok, lp, n) == 0);
    for (int q = 0; q < 3; q++) {
        gp.seed = seeds[q];
        EXPECT(model_generate(m, prompts[q], lens[q], L, &gp, tok1, lp1, n1) == 0);
        for (int l = 0; l < L; l++) {
            int s = q * L + l;
            EXPECTF(n[s] == n1[l], "prompt %d completion %d: length %d vs %d", q, l, n[s], n1[l]);
            for (int t = 0; t < n1[l] && t < n[s]; t++) {
                EXPECTF(tok[s * M + t] == tok1[l * M + t], "prompt %d completion %d token %d", q, l, t);
                EXPECT_NEAR(lp[s * M + t], lp1[l * M + t], 1e-4);
            }
        }
    }
    model_destroy(&m);
}

/* a batch big enough for every parallel path (split sgemms, per-thread
 * norm gradients, the embedding gradient by column ranges) gives on two
 * threads what it gives on one, up to the order of float sums */
static void test_threads(void)
{
    char err[512];
    model_config_t c = model_config_tiny();
    c.L = 2;
    model_t *m = model_new_random(&c, 9, err, sizeof err);
    EXPECTF(m, "%s", err);
    if (!m) return;
    int B = 8, T = 64, N = B * T;
    size_t n = model_num_params(m);
    int *tok = malloc(N * sizeof(int)), *tg = malloc(N * sizeof(int));
    float *w = malloc(N * sizeof(float)), *lp1 = malloc(N * sizeof(float)), *lp2 = malloc(N * sizeof(float));
    float *g1 = malloc(n * sizeof(float));
    for (int i = 0; i < N; i++) tok[i] = (i * 37 + i / T) % 260;
    for (int i = 0; i < N; i++) {
        tg[i] = i % T == T - 1 ? -1 : tok[i + 1];
        w[i] = (float)((i * 13) % 7 - 3) / 10;
    }
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    model_zero_grad(m);
    EXPECT(model_forward(m, tok, tg, B, T, 1.0f, lp1, NULL) == 0);
    model_backward(m, w);
    memcpy(g1, model_grads(m), n * sizeof(float));
    omp_set_num_threads(2);
    m->chunk = 100;
    model_zero_grad(m);
    EXPECT(model_forward(m, tok, tg, B, T, 1.0f, lp2, NULL) == 0);
    model_backward(m, w);
    omp_set_num_threads(threads);
    EXPECT(max_rel(lp2, lp1, N, 1.0) < 1e-5);
    double r = max_rel(model_grads(m), g1, n, 0.01 * max_abs(g1, n));
    EXPECTF(r < 1e-4, "gradients on 2 threads differ by %.3g", r);
    free(tok);
    free(tg);
    free(w);
    free(lp1);
    free(lp2);
    free(g1);
    model_destroy(&m);
}

/* the vectorizable e^x the model's loops use, against expf over its
 * whole range; fastexp_nonpos is checked with the sampler */
static void test_exp(void)
{
    double worst = 0;
    float at = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.000731f) {
        double want = expf(x), d = fabs(fastexp(x) - want) / want;
        if (d > worst) worst = d, at = x;
    }
    EXPECTF(worst < 5e-7, "e^x off by %.3g (relative) at %g", worst, at);
    EXPECT(fastexp(-1000.0f) < 1e-37f && fastexp(-1000.0f) >= 0);
    EXPECT(fastexp(0.0f) == 1.0f);
}

/* x rounded to bfloat16 (to nearest, ties to even) */
static double bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + (u >> 16 & 1)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* attention's fused softmax (bf16 mode): against a softmax in double over
 * the first n of T, zeros after, and its bf16 copy the rounding of p */
static void test_softmax_causal(void)
{
    if (!model_avx512bf16_available()) SKIP_TEST("this CPU has no AVX512-BF16 instructions");
    const int Ts[] = {1, 5, 16, 37, 192};
    float p[192], in[192];
    uint16_t h[192];
    uint64_t st = 3;
    double worst = 0;
    int bad_tail = 0, bad16 = 0;
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
        for (int n = 1; n <= Ts[ti]; n++) {
            int T = Ts[ti];
            for (int i = 0; i < T; i++) {
                st = st * 6364136223846793005ULL + 1442695040888963407ULL;
                in[i] = (float)((double)(st >> 11) / (1ULL << 53) * 160.0 - 80.0);
            }
            memcpy(p, in, sizeof in);
            model_softmax_causal(p, h, n, T, 0.125f);
            double mx = -1e300, sum = 0;
            for (int i = 0; i < n; i++) mx = fmax(mx, in[i] * 0.125);
            for (int i = 0; i < n; i++) sum += exp(in[i] * 0.125 - mx);
            for (int i = 0; i < T; i++) {
                double want = i < n ? exp(in[i] * 0.125 - mx) / sum : 0;
                if (i < n && want > 1e-30) worst = fmax(worst, fabs(p[i] - want) / want);
                bad_tail += i >= n && p[i] != 0.0f;
                float r = (float)bf16_round(p[i]);
                uint32_t u;
                memcpy(&u, &r, 4);
                bad16 += h[i] != (uint16_t)(u >> 16);
            }
        }
    EXPECTF(worst < 2e-6, "softmax off by %.3g (relative)", worst);
    EXPECTF(bad_tail == 0, "%d masked entries are not 0", bad_tail);
    EXPECTF(bad16 == 0, "%d bf16 copies differ from the rounded probabilities", bad16);
}

/* the double reference sums of op(A) op(B) and of their terms' |values|,
 * over bf16-rounded inputs where bf16 */
static void gemm_reference(bool bf16, bool ta, bool tb, int M, int N, int K, const float *A, const float *B,
                           double *ref, double *mag)
{
    int lda = ta ? M : K, ldb = tb ? K : N;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0, abs_acc = 0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k];
                float b = tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n];
                double t = bf16 ? bf16_round(a) * bf16_round(b) : (double)a * b;
                acc += t, abs_acc += fabs(t);
            }
            ref[m * N + n] = acc, mag[m * N + n] = abs_acc;
        }
}

/* a bf16 kernel: model_gemm_amx or model_gemm_avx512bf16 */
typedef void gemm_bf16_fn(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                          const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc);

/* the worst error of C against want = ref + beta C0, as a share of
 * mag + |beta C0| (rounding is a part of the terms' size, whatever
 * cancels); NaN where C is */
static double gemm_error(const float *C, const double *ref, const double *mag, const float *C0, int beta, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double want = ref[i] + (beta ? C0[i] : 0), d = fabs(C[i] - want) / (mag[i] + (beta ? fabs(C0[i]) : 0));
        worst = d > worst || d != d ? d : worst;
    }
    return worst;
}

/* a bf16 kernel takes A and B already in bf16, each and both: the same C
 * (C0 where beta) to the bit as from fp32 */
static void gemm_bf16_ways(const char *name, gemm_bf16_fn *gemm, bool ta, bool tb, int M, int N, int K, const float *A,
                           const uint16_t *A16, const float *B, const uint16_t *B16, int beta, const float *C0,
                           const float *C, int th)
{
    int lda = ta ? M : K, ldb = tb ? K : N;
    float *C2 = malloc(sizeof(float) * M * N);
    for (int way = 1; way <= 3; way++) {
        for (int i = 0; i < M * N; i++) C2[i] = beta ? C0[i] : NAN;
        gemm(ta, tb, M, N, K, A, way & 1 ? A16 : NULL, lda, B, way & 2 ? B16 : NULL, ldb, (float)beta, C2, N);
        EXPECTF(
            !memcmp(C, C2, sizeof(float) * M * N),
            "%s %c%c M %d N %d K %d beta %d threads %d: from bf16 %s, a different C", name, "NT"[ta], "NT" [tb], M, N,
            K, beta, th, (const char *[]) { "", "A", "B", "A and B" }[way]);
    }
    free(C2);
}

/* one of model_gemm's own kernels, C = op(A) op(B) + beta C: the few-row
 * kernel (gemm NULL; A plain, B transposed) against a double reference,
 * a bf16 kernel against the reference over bf16-rounded inputs (so only
 * the fp32 sums may differ) and against the exact one within what the
 * rounding allows: each input off by at most 2^-8 of itself (to nearest,
 * 8 significant bits), each product by 2^-7 + 2^-16. Beta 0 (C not read:
 * it starts as NaN) and 1, on 1 and 2 threads; a bf16 kernel also from
 * bf16 copies (gemm_bf16_ways) */
static void gemm_against_reference(const char *name, gemm_bf16_fn *gemm, bool ta, bool tb, int M, int N, int K,
                                   uint64_t seed)
{
    int lda = ta ? M : K, ldb = tb ? K : N, threads = omp_get_max_threads();
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
    double *ref = malloc(sizeof(double) * M * N), *mag = malloc(sizeof(double) * M * N);
    double *ref16 = malloc(sizeof(double) * M * N), *mag16 = malloc(sizeof(double) * M * N);
    rng_philox_uniform(seed, 0, A, (size_t)M * K);
    rng_philox_uniform(seed + 1, 0, B, (size_t)N * K);
    rng_philox_uniform(seed + 2, 0, C0, (size_t)M * N);
    for (int i = 0; i < M * K; i++) A[i] -= 0.5f;
    for (int i = 0; i < N * K; i++) B[i] -= 0.5f;
    uint16_t *A16 = malloc(sizeof(uint16_t) * M * K), *B16 = malloc(sizeof(uint16_t) * N * K);
    if (gemm) {
        model_bf16_round(A16, A, (size_t)M * K);
        model_bf16_round(B16, B, (size_t)N * K);
        gemm_reference(true, ta, tb, M, N, K, A, B, ref16, mag16);
    }
    gemm_reference(false, ta, tb, M, N, K, A, B, ref, mag);
    for (int th = 1; th <= 2; th++)
        for (int beta = 0; beta <= 1; beta++) {
            omp_set_num_threads(th);
            for (int i = 0; i < M * N; i++) C[i] = beta ? C0[i] : NAN;
            if (gemm) gemm(ta, tb, M, N, K, A, NULL, lda, B, NULL, ldb, (float)beta, C, N);
            else model_gemm_few(M, N, K, A, K, B, K, (float)beta, C, N);
            double sums = gemm_error(C, gemm ? ref16 : ref, gemm ? mag16 : mag, C0, beta, M * N);
            EXPECTF(sums < 1e-5, "%s %c%c M %d N %d K %d beta %d threads %d: error %.3g of the terms' size", name,
                    "NT"[ta], "NT"[tb], M, N, K, beta, th, sums);
            if (!gemm) continue;
            double exact = gemm_error(C, ref, mag, C0, beta, M * N);
            EXPECTF(exact < 0x1p-7 + 0x1p-16 + 1e-5,
                    "%s %c%c M %d N %d K %d beta %d threads %d: off fp32 by %.3g of the terms' size, past bf16's "
                    "rounding",
                    name, "NT"[ta], "NT"[tb], M, N, K, beta, th, exact);
            gemm_bf16_ways(name, gemm, ta, tb, M, N, K, A, A16, B, B16, beta, C0, C, th);
        }
    omp_set_num_threads(threads);
    free(A);
    free(B);
    free(C);
    free(C0);
    free(ref);
    free(mag);
    free(ref16);
    free(mag16);
    free(A16);
    free(B16);
}

/* model_gemm's own few-row kernel (decode steps), called directly so
 * that small shapes reach it too: every remainder of rows, columns and
 * depth */
static void test_gemm_few(void)
{
    const int shapes[][3] = {{1, 5, 3},     {3, 7, 17},   {4, 4, 16},     {5, 9, 33},     {8, 256, 256},
                             {8, 264, 256}, {13, 37, 70}, {16, 768, 256}, {2, 1030, 260}, {7, 129, 768}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        gemm_against_reference("few", NULL, false, true, shapes[s][0], shapes[s][1], shapes[s][2], 3 * s);
}

/* the packed kernel of a decode step (gemm_packed.c), in each vector
 * width the CPU has: every remainder of its row blocks (8, 3, 2 rows),
 * a last partial panel, odd depths; with and without bias and
 * accumulation, on 1 and 2 threads, against a double reference */
static void test_gemm_packed(void)
{
    const int shapes[][3] = {{1, 5, 3},  {2, 32, 1},   {3, 33, 17},    {7, 64, 70},    {8, 264, 256},
                             {9, 31, 5}, {17, 96, 33}, {64, 768, 256}, {64, 256, 768}, {23, 129, 260}};
    int threads = omp_get_max_threads(), widths[3] = {512, 256, 128};
    for (int wi = 0; wi < 3; wi++) {
        if (!model_packed_use(widths[wi])) {
            printf("(gemm_packed: no %d-bit kernel on this CPU)\n", widths[wi]);
            continue;
        }
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K),
                  *bias = malloc(sizeof(float) * N);
            float *C = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
            double *ref = malloc(sizeof(double) * M * N), *mag = malloc(sizeof(double) * M * N);
            rng_philox_uniform(7 * si, 0, A, (size_t)M * K);
            rng_philox_uniform(7 * si + 1, 0, W, (size_t)N * K);
            rng_philox_uniform(7 * si + 2, 0, C0, (size_t)M * N);
            rng_philox_uniform(7 * si + 3, 0, bias, (size_t)N);
            for (int i = 0; i < M * K; i++) A[i] -= 0.5f;
            for (int i = 0; i < N * K; i++) W[i] -= 0.5f;
            gemm_reference(false, false, true, M, N, K, A, W, ref, mag);
            model_packed_t pk;
            EXPECT(model_pack(&pk, W, N, K) == 0);
            for (int th = 1; th <= 2; th++)
                for (int way = 0; way < 4; way++) {
                    bool acc = way & 1, with_bias = way & 2;
                    omp_set_num_threads(th);
                    for (int i = 0; i < M * N; i++) C[i] = acc ? C0[i] : NAN;
                    model_gemm_packed(M, A, K, &pk, with_bias ? bias : NULL, acc, C, N);
                    double worst = 0;
                    for (int m = 0; m < M; m++)
                        for (int n = 0; n < N; n++) {
                            int i = m * N + n;
                            double want = ref[i] + (acc ? C0[i] : 0) + (with_bias ? bias[n] : 0);
                            double d = fabs(C[i] - want) / (mag[i] + fabs(C0[i]) + fabs(bias[n]));
                            worst = d > worst || d != d ? d : worst;
                        }
                    EXPECTF(worst < 1e-5, "packed %d bits M %d N %d K %d acc %d bias %d threads %d: error %.3g",
                            widths[wi], M, N, K, acc, with_bias, th, worst);
                }
            model_packed_free(&pk);
            free(A), free(W), free(bias), free(C), free(C0), free(ref), free(mag);
        }
    }
    model_packed_use(0);
    omp_set_num_threads(threads);
}

/* backend cpu's own fp32 kernel (gemm_f32.c): every layout, remainders
 * of its 12 rows, 32 columns and 16 depths, depths over several chunks,
 * columns over several panels, beta 0 (C not read: NaN), 1 and 0.5,
 * against a double reference; the same C to the bit from operands with
 * wider leading dimensions, and from any block of rows or columns
 * computed alone (model_gemm's split among threads) */
static void test_gemm_f32(void)
{
    if (!model_avx512_available()) SKIP_TEST("this CPU has no AVX-512");
    const int shapes[][5] = {{0, 1, 17, 5, 3},   {0, 1, 100, 70, 45},  {1, 0, 37, 50, 99},    {0, 0, 33, 17, 65},
                             {1, 1, 40, 33, 70}, {0, 1, 64, 768, 700}, {1, 0, 96, 33, 5000},  {0, 0, 300, 256, 768},
                             {1, 1, 9, 3, 1},    {0, 0, 45, 19, 2},    {0, 1, 26, 5000, 40},  {1, 0, 13, 4200, 400},
                             {0, 0, 12, 32, 16}, {1, 1, 25, 65, 385},  {0, 1, 50, 900, 1700}, {1, 0, 24, 64, 769}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        bool ta = shapes[si][0], tb = shapes[si][1];
        int M = shapes[si][2], N = shapes[si][3], K = shapes[si][4], lda = ta ? M : K, ldb = tb ? K : N;
        /* the same operands again with 3 more columns in every row */
        int lda2 = lda + 3, ldb2 = ldb + 3, ldc2 = N + 3, ra = ta ? K : M, rb = tb ? N : K;
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K),
              *C = malloc(sizeof(float) * M * N);
        float *C0 = malloc(sizeof(float) * M * N), *A2 = calloc((size_t)ra * lda2, sizeof(float));
        float *B2 = calloc((size_t)rb * ldb2, sizeof(float)), *C2 = malloc(sizeof(float) * M * ldc2);
        double *ref = malloc(sizeof(double) * M * N), *mag = malloc(sizeof(double) * M * N);
        rng_philox_uniform(11 * si, 0, A, (size_t)M * K);
        rng_philox_uniform(11 * si + 1, 0, B, (size_t)N * K);
        rng_philox_uniform(11 * si + 2, 0, C0, (size_t)M * N);
        for (int i = 0; i < M * K; i++) A[i] -= 0.5f;
        for (int i = 0; i < N * K; i++) B[i] -= 0.5f;
        for (int r = 0; r < ra; r++) memcpy(A2 + (size_t)r * lda2, A + (size_t)r * lda, sizeof(float) * lda);
        for (int r = 0; r < rb; r++) memcpy(B2 + (size_t)r * ldb2, B + (size_t)r * ldb, sizeof(float) * ldb);
        gemm_reference(false, ta, tb, M, N, K, A, B, ref, mag);
        const float betas[3] = {0.0f, 1.0f, 0.5f};
        for (int bi = 0; bi < 3; bi++) {
            float beta = betas[bi];
            for (int i = 0; i < M * N; i++) C[i] = beta != 0.0f ? C0[i] : NAN;
            model_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, beta, C, N);
            double worst = 0;
            for (int i = 0; i < M * N; i++) {
                double want = ref[i] + beta * C0[i], d = fabs(C[i] - want) / (mag[i] + fabs(beta * C0[i]));
                worst = d > worst || d != d ? d : worst;
            }
            EXPECTF(worst < 1e-5, "f32 %c%c M %d N %d K %d beta %g: error %.3g of the terms' size", "NT"[ta], "NT"[tb],
                    M, N, K, beta, worst);
            if (beta != 1.0f) continue;
            /* wider leading dimensions */
            for (int i = 0; i < M; i++) memcpy(C2 + (size_t)i * ldc2, C0 + (size_t)i * N, sizeof(float) * N);
            model_gemm_f32(ta, tb, M, N, K, A2, lda2, B2, ldb2, beta, C2, ldc2);
            bool same = true;
            for (int i = 0; i < M; i++) same &= !memcmp(C2 + (size_t)i * ldc2, C + (size_t)i * N, sizeof(float) * N);
            EXPECTF(same, "f32 %c%c M %d N %d K %d: wider leading dimensions give a different C", "NT"[ta], "NT"[tb], M,
                    N, K);
            /* rows [r0, M) alone, then columns [c0, N) alone */
            int r0 = M / 3, c0 = N / 3;
            memcpy(C2, C0, sizeof(float) * M * N);
            model_gemm_f32(ta, tb, M - r0, N, K, ta ? A + r0 : A + (size_t)r0 * lda, lda, B, ldb, beta,
                           C2 + (size_t)r0 * N, N);
            EXPECTF(!memcmp(C2 + (size_t)r0 * N, C + (size_t)r0 * N, sizeof(float) * (M - r0) * N),
                    "f32 %c%c M %d N %d K %d: rows from %d alone give a different C", "NT"[ta], "NT"[tb], M, N, K, r0);
            memcpy(C2, C0, sizeof(float) * M * N);
            model_gemm_f32(ta, tb, M, N - c0, K, A, lda, tb ? B + (size_t)c0 * ldb : B + c0, ldb, beta, C2 + c0, N);
            same = true;
            for (int i = 0; i < M; i++)
                same &= !memcmp(C2 + (size_t)i * N + c0, C + (size_t)i * N + c0, sizeof(float) * (N - c0));
            EXPECTF(same, "f32 %c%c M %d N %d K %d: columns from %d alone give a different C", "NT"[ta], "NT"[tb], M, N,
                    K, c0);
        }
        free(A), free(B), free(C), free(C0), free(A2), free(B2), free(C2), free(ref), free(mag);
    }
}

/* which fp32 kernel does model_gemm1's large products: sapo's where the
 * CPU has AVX-512 and OpenBLAS's kernels are not its AVX-512 ones */
static void test_f32_choice(void)
{
    EXPECT(model_f32_choose(true, "Haswell"));
    EXPECT(model_f32_choose(true, "Zen"));
    EXPECT(model_f32_choose(true, NULL));
    EXPECT(!model_f32_choose(true, "SkylakeX"));
    EXPECT(!model_f32_choose(true, "Cooperlake"));
    EXPECT(!model_f32_choose(true, "SapphireRapids"));
    EXPECT(!model_f32_choose(false, "Haswell"));
    EXPECT(model_f32_own() == model_f32_choose(model_avx512_available(), openblas_get_corename()));
    printf("(fp32 matmuls on this machine: %s, OpenBLAS core %s)\n", model_f32_own() ? "sapo's kernel" : "OpenBLAS",
           openblas_get_corename());
}

/* a matmul on a thread that then exits: with model_gemm_ws's buffer
 * freed at the exit, LeakSanitizer (the test build) finds nothing; a
 * buffer kept per thread and never freed is what a nested OpenMP team
 * (new threads each time: generate.c's decode without packed weights)
 * leaked at every matmul */
static void *gemm_on_a_thread(void *arg)
{
    float *A = arg, *C = malloc(sizeof(float) * 64 * 64);
    if (model_avx512_available()) model_gemm_f32(false, true, 64, 64, 64, A, 64, A, 64, 0.0f, C, 64);
    if (model_bf16_kernel(NULL) != MODEL_BF16_NONE)
        model_gemm_bf16(false, true, 64, 64, 64, A, NULL, 64, A, NULL, 64, 0.0f, C, 64);
    free(C);
    return NULL;
}

static void test_gemm_ws_threads(void)
{
    if (!model_avx512_available()) SKIP_TEST("this CPU has no AVX-512: no gemm of ours keeps a buffer");
    float *A = calloc(64 * 64, sizeof(float));
    for (int t = 0; t < 8; t++) {
        pthread_t th;
        EXPECT(pthread_create(&th, NULL, gemm_on_a_thread, A) == 0);
        pthread_join(th, NULL);
    }
    free(A);
}

/* a bf16 kernel of backend cpu-bf16: every layout (op(A) and op(B)
 * plain or transposed), remainders of 32 rows, 32 columns and 32 depths
 * (and of the AVX512-BF16 kernel's bands of 8 rows), one depth, depths
 * over one packed chunk, columns over several panels of B (a last one
 * narrower, with one chunk of depth and with several; split among the
 * threads where there are many), depth split among the threads (a
 * weight gradient's shape: K >= 8 M); panels of an A16 read in place
 * (depth a multiple of 32) and packed (a last partial panel, other
 * depths) */
static void gemm_bf16_shapes(const char *name, gemm_bf16_fn *gemm)
{
    const int shapes[][5] = {{0, 1, 17, 5, 3},       {0, 1, 100, 70, 45},  {1, 0, 37, 50, 99},   {0, 0, 33, 17, 65},
                             {1, 1, 40, 33, 70},     {0, 1, 64, 768, 700}, {1, 0, 96, 33, 5000}, {0, 0, 300, 256, 768},
                             {1, 0, 768, 256, 1030}, {0, 1, 32, 32, 32},   {0, 1, 192, 192, 64}, {1, 0, 64, 40, 4096},
                             {0, 0, 80, 48, 96},     {1, 1, 9, 3, 1},      {0, 0, 45, 19, 2},    {0, 0, 50, 900, 1700},
                             {1, 1, 40, 900, 700}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        gemm_against_reference(name, gemm, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4], 5 * s);
}

static void test_gemm_amx(void)
{
    if (!model_bf16_has(MODEL_BF16_AMX)) SKIP_TEST("this CPU has no AMX bf16 tiles");
    gemm_bf16_shapes("amx", model_gemm_amx);
}

static void test_gemm_avx512bf16(void)
{
    if (!model_bf16_has(MODEL_BF16_AVX512BF16)) SKIP_TEST("this CPU has no AVX512-BF16 dot products");
    gemm_bf16_shapes("avx512bf16", model_gemm_avx512bf16);
}

/* the tiny default model with random weights, or NULL after a failed check */
static model_t *tiny_model(uint64_t seed)
{
    char err[512];
    model_config_t c = model_config_tiny();
    model_t *m = model_new_random(&c, seed, err, sizeof err);
    EXPECTF(m, "%s", err);
    return m;
}

enum { DECODE_Q = 3, DECODE_L = 3, DECODE_M = 20 };
static const int decode_plen[DECODE_Q] = {1, 20, 37};

/* prompt q of the decode tests (decode_plen[q] tokens) into pr */
static void decode_prompt(int q, int *pr)
{
    for (int i = 0; i < decode_plen[q]; i++) pr[i] = 'a' + (5 * i + 3 * q) % 26;
}

/* DECODE_Q prompts x DECODE_L completions of up to DECODE_M tokens sampled by
 * model m: tokens, log-probs and lengths */
static void decode_sample(model_t *m, int *tok, float *lp, int *len)
{
    static int pr[DECODE_Q][37];
    const int *prompts[DECODE_Q] = {pr[0], pr[1], pr[2]};
    uint64_t seeds[DECODE_Q] = {11, 12, 13};
    for (int q = 0; q < DECODE_Q; q++) decode_prompt(q, pr[q]);
    model_gen_params_t gp = {.max_new = DECODE_M, .sample = {.temperature = 0.9f, .top_k = 0, .top_p = 1}};
    EXPECT(model_generate_batch(m, prompts, decode_plen, seeds, DECODE_Q, DECODE_L, &gp, tok, lp, len) == 0);
}

/* the largest gap between decode_sample's log-probs and those of a full
 * forward pass of m over each prompt + completion */
static double decode_gap(model_t *m, const int *tok, const float *lp, const int *len)
{
    enum { M = DECODE_M };
    double worst = 0;
    for (int s = 0; s < DECODE_Q * DECODE_L; s++) {
        int pr[37], q = s / DECODE_L, P = decode_plen[q], T = P + len[s], tk[64], tg[64];
        float flp[64];
        decode_prompt(q, pr);
        for (int t = 0; t < T; t++) {
            tk[t] = t < P ? pr[t] : tok[s * M + t - P];
            tg[t] = t + 1 >= P && t + 1 < T ? tok[s * M + t + 1 - P] : -1;
        }
        EXPECT(model_forward(m, tk, tg, 1, T, 0.9f, flp, NULL) == 0);
        for (int t = 0; t < len[s]; t++) worst = fmax(worst, fabs(lp[s * M + t] - flp[P - 1 + t]));
    }
    return worst;
}

/* sampled log-probs of model m checked against a full forward pass;
 * tokens and log-probs returned */
static void decode_against_forward(model_t *m, const char *what, int *tok, float *lp, int *len)
{
    decode_sample(m, tok, lp, len);
    double worst = decode_gap(m, tok, lp, len);
    EXPECTF(worst < 1e-4, "%s: decode log-probs off a full forward pass by %.3g", what, worst);
}

/* a decode's own kernels (gemm_packed.c, the AVX-512 attention for head
 * dimensions 64 and 128): log-probs equal to a full forward pass's, with
 * packed weights and without, for two and three query heads per key head
 * and Qwen3's norms; with packed weights the same tokens and log-probs,
 * to the bit, on 1 thread as on 2 (each row's sums do not depend on the
 * rows beside it) */
static void test_decode_kernels(void)
{
    char err[512];
    model_config_t cs[4] = {model_config_tiny(), model_config_tiny(), model_config_tiny(), model_config_tiny()};
    cs[1].HD = 128;
    cs[2].NH = 6;
    cs[3].type = MODEL_QWEN3;
    cs[3].qkv_bias = false;
    const char *names[4] = {"head_dim 64", "head_dim 128", "3 query heads per key head", "qwen3 norms"};
    int threads = omp_get_max_threads();
    enum { S = DECODE_Q * DECODE_L, M = DECODE_M };
    for (int i = 0; i < 4; i++) {
        model_t *m = model_new_random(&cs[i], 5 + i, err, sizeof err);
        EXPECTF(m, "%s", err);
        if (!m) continue;
        int tok[2][S * M], len[2][S];
        float lp[2][S * M];
        char what[96];
        for (int th = 2; th >= 1; th--) {
            omp_set_num_threads(th);
            snprintf(what, sizeof what, "%s, packed, %d threads", names[i], th);
            decode_against_forward(m, what, tok[th - 1], lp[th - 1], len[th - 1]);
        }
        omp_set_num_threads(threads);
        bool same = !memcmp(len[0], len[1], sizeof len[0]);
        for (int s = 0; same && s < S; s++)
            same = !memcmp(tok[0] + s * M, tok[1] + s * M, sizeof(int) * len[0][s]) &&
                   !memcmp(lp[0] + s * M, lp[1] + s * M, sizeof(float) * len[0][s]);
        EXPECTF(same, "%s: 1 and 2 threads sampled differently", names[i]);
        model_pack_limit(1);
        snprintf(what, sizeof what, "%s, weights in place", names[i]);
        decode_against_forward(m, what, tok[0], lp[0], len[0]);
        model_pack_limit(0);
        model_destroy(&m);
    }
}

/* prompts longer together than a prefill step's rows (512) go in several
 * steps, the last ones first; shorter ones share a step. Either way each
 * prompt's completions are, to the bit, those of a request of its own */
static void test_prefill_steps(void)
{
    model_t *m = tiny_model(9);
    if (!m) return;
    enum { Q = 4, L = 2, M = 6 };
    static int pr[Q][300];
    const int *prompts[Q] = {pr[0], pr[1], pr[2], pr[3]};
    int plen[Q] = {300, 5, 250, 260}, tok[Q * L * M], len[Q * L], tok1[L * M], len1[L];
    float lp[Q * L * M], lp1[L * M];
    uint64_t seeds[Q] = {21, 22, 23, 24};
    for (int q = 0; q < Q; q++)
        for (int i = 0; i < plen[q]; i++) pr[q][i] = 'a' + (7 * i + q) % 26;
    model_gen_params_t gp = {.max_new = M, .sample = {.temperature = 1, .top_k = 0, .top_p = 1}};
    EXPECT(model_generate_batch(m, prompts, plen, seeds, Q, L, &gp, tok, lp, len) == 0);
    for (int q = 0; q < Q; q++) {
        gp.seed = seeds[q];
        EXPECT(model_generate(m, prompts[q], plen[q], L, &gp, tok1, lp1, len1) == 0);
        EXPECTF(!memcmp(len + q * L, len1, sizeof len1) && !memcmp(tok + q * L * M, tok1, sizeof tok1) &&
                    !memcmp(lp + q * L * M, lp1, sizeof lp1),
                "prompt %d of %d tokens: the batch sampled other tokens or log-probs than a request", q, plen[q]);
    }
    model_destroy(&m);
}

/* backend cpu-bf16 against cpu on the tiny model, and on the same with
 * Qwen3's q/k norms (the bf16 copies of q's and k's gradients come from
 * those norms there, from RoPE in Qwen2): a batch of 2 x 192, large enough
 * that every matmul takes the bf16 kernel (so the model keeps no fp32
 * copy of ln1, ln2, h, and one layer's of y), and one of 1 x 24, where
 * some do not (ln1 is kept: k and v's are too small). Log-probs and the
 * gradient agree to bf16's precision (and differ: the kernel was used);
 * "cpu" goes back to fp32 exactly. */
static void cpu_bf16_against_cpu(model_t *m, const char *arch, int B, int T, bool keeps_ln1)
{
    char err[512];
    enum { MAXN = 384 };
    int N = B * T, tok[MAXN], tg[MAXN];
    float lp[3][MAXN], dl[MAXN];
    if (N > MAXN) {
        EXPECT(N <= MAXN);
        return;
    }
    for (int i = 0; i < N; i++) {
        tok[i] = (i * 37 + i / T) % 256;
        tg[i] = i % T == T - 1 ? -1 : (i * 37 + (i + 1) / T) % 256;
        dl[i] = (i % 7 - 3) / 10.0f;
    }
    size_t P = model_num_params(m);
    float *g[3];
    const char *backends[3] = {"cpu", "cpu-bf16", "cpu"};
    for (int r = 0; r < 3; r++) {
        EXPECTF(model_set_backend(m, backends[r], err, sizeof err) == 0, "%s", err);
        model_zero_grad(m);
        EXPECT(model_forward(m, tok, tg, B, T, 1.0f, lp[r], NULL) == 0);
        /* which fp32 activations the model kept */
        const model_acts_t *a = &m->a;
        if (r == 1)
            EXPECTF((a->ln1 != NULL) == keeps_ln1 && !a->ln2 && !a->h && !a->y_all,
                    "%s %dx%d bf16: kept ln1 %d ln2 %d h %d, every layer's y %d", arch, B, T, a->ln1 != NULL,
                    a->ln2 != NULL, a->h != NULL, a->y_all);
        else EXPECTF(a->ln1 && a->ln2 && a->h && a->y_all, "%s %dx%d fp32: an activation not kept", arch, B, T);
        model_backward(m, dl);
        g[r] = malloc(P * sizeof(float));
        memcpy(g[r], model_grads(m), P * sizeof(float));
    }
    double dlp = 0, d2 = 0, n2 = 0, same = 0;
    for (int i = 0; i < N; i++) {
        dlp = fmax(dlp, fabs(lp[1][i] - lp[0][i]));
        same = fmax(same, fabs(lp[2][i] - lp[0][i]));
    }
    for (size_t i = 0; i < P; i++) {
        d2 += ((double)g[1][i] - g[0][i]) * ((double)g[1][i] - g[0][i]), n2 += (double)g[0][i] * g[0][i];
        same = fmax(same, fabs(g[2][i] - g[0][i]));
    }
    double rel = sqrt(d2 / n2);
    EXPECTF(dlp > 0 && dlp < 0.05, "%s %dx%d log-probs: bf16 differs from fp32 by up to %.3g", arch, B, T, dlp);
    EXPECTF(rel > 0 && rel < 0.05, "%s %dx%d gradient: bf16 differs from fp32 by %.3g of its norm", arch, B, T, rel);
    EXPECTF(same == 0, "%s %dx%d back on cpu: differs from the first fp32 pass by %.3g", arch, B, T, same);
    printf("cpu-bf16 (%s kernel, %s, %d x %d): log-probs within %.2g, gradient within %.2g of its norm\n",
           model_bf16_kernel_name(model_bf16_kernel(NULL)), arch, B, T, dlp, rel);
    for (int r = 0; r < 3; r++) free(g[r]);
}

/* cpu_bf16_against_cpu with bf16 kernel k (forced, then back to the
 * machine's choice) */
static void cpu_bf16_with(model_bf16_kernel_t k)
{
    char err[512];
    EXPECT(model_bf16_use(k));
    model_t *m = tiny_model(7);
    if (m) {
        cpu_bf16_against_cpu(m, "qwen2", 2, 192, false); /* T: attention takes the kernel too */
        cpu_bf16_against_cpu(m, "qwen2", 1, 24, true);
        model_destroy(&m);
    }
    model_config_t c = model_config_tiny();
    c.type = MODEL_QWEN3, c.qkv_bias = false;
    m = model_new_random(&c, 7, err, sizeof err);
    EXPECTF(m, "%s", err);
    if (m) cpu_bf16_against_cpu(m, "qwen3", 2, 192, false);
    model_destroy(&m);
    EXPECT(model_bf16_use(MODEL_BF16_NONE));
}

static void test_cpu_bf16_amx(void)
{
    if (!model_bf16_has(MODEL_BF16_AMX)) SKIP_TEST("this CPU has no AMX bf16 tiles");
    cpu_bf16_with(MODEL_BF16_AMX);
}

static void test_cpu_bf16_avx512bf16(void)
{
    if (!model_bf16_has(MODEL_BF16_AVX512BF16)) SKIP_TEST("this CPU has no AVX512-BF16 dot products");
    cpu_bf16_with(MODEL_BF16_AVX512BF16);
}

/* backend cpu-bf16's generation (its prefill's products in bf16, the
 * decode's where over 16 rows) against the fp32 reference's forward
 * pass over what it sampled: within bf16's precision, and not equal
 * (the bf16 kernel ran), for the tiny model and with Qwen3's norms */
static void test_cpu_bf16_generate(void)
{
    char err[512];
    const char *why = NULL;
    if (model_bf16_kernel(&why) == MODEL_BF16_NONE) SKIP_TEST(why);
    model_config_t cs[2] = {model_config_tiny(), model_config_tiny()};
    cs[1].type = MODEL_QWEN3, cs[1].qkv_bias = false;
    for (int i = 0; i < 2; i++) {
        model_t *m = model_new_random(&cs[i], 3 + i, err, sizeof err);
        EXPECTF(m, "%s", err);
        if (!m) continue;
        int tok[DECODE_Q * DECODE_L * DECODE_M], len[DECODE_Q * DECODE_L];
        float lp[DECODE_Q * DECODE_L * DECODE_M];
        EXPECTF(model_set_backend(m, "cpu-bf16", err, sizeof err) == 0, "%s", err);
        decode_sample(m, tok, lp, len);
        EXPECTF(model_set_backend(m, "cpu", err, sizeof err) == 0, "%s", err);
        double gap = decode_gap(m, tok, lp, len);
        EXPECTF(gap > 1e-5 && gap < 0.05, "%s: cpu-bf16's decode log-probs off the fp32 forward pass by %.3g",
                i ? "qwen3" : "qwen2", gap);
        printf("cpu-bf16 generation (%s): log-probs within %.2g of the fp32 forward pass\n", i ? "qwen3" : "qwen2",
               gap);
        model_destroy(&m);
    }
}

/* which bf16 kernel SAPO_BF16_KERNEL's values give on this CPU: unset,
 * AMX where the CPU has it, else AVX512-BF16; a kernel it names where the
 * CPU has it; anything else none, with one line that says why (naming
 * both kernels' requirements where the CPU has neither). A CPU with
 * neither refuses backend cpu-bf16 with that line. */
static void test_bf16_kernel_choice(void)
{
    char why[256] = "", err[512];
    bool amx = model_bf16_has(MODEL_BF16_AMX), dp = model_bf16_has(MODEL_BF16_AVX512BF16);
    model_bf16_kernel_t best = amx ? MODEL_BF16_AMX : dp ? MODEL_BF16_AVX512BF16 : MODEL_BF16_NONE;
    EXPECT(model_bf16_choose(NULL, why, sizeof why) == best && model_bf16_choose("", why, sizeof why) == best);
    if (best == MODEL_BF16_NONE) EXPECTF(strstr(why, "AMX") && strstr(why, "AVX512-BF16"), "%s", why);
    why[0] = 0;
    EXPECT(model_bf16_choose("amx", why, sizeof why) == (amx ? MODEL_BF16_AMX : MODEL_BF16_NONE));
    EXPECTF(amx || strstr(why, "SAPO_BF16_KERNEL=amx: this CPU has no AMX"), "%s", why);
    why[0] = 0;
    EXPECT(model_bf16_choose("avx512bf16", why, sizeof why) == (dp ? MODEL_BF16_AVX512BF16 : MODEL_BF16_NONE));
    EXPECTF(dp || strstr(why, "SAPO_BF16_KERNEL=avx512bf16: this CPU has no AVX512-BF16"), "%s", why);
    EXPECT(model_bf16_choose("AMX2", why, sizeof why) == MODEL_BF16_NONE);
    EXPECTF(strstr(why, "SAPO_BF16_KERNEL \"AMX2\": expected amx or avx512bf16"), "%s", why);
    model_t *m = tiny_model(7);
    if (!m) return;
    const char *line = NULL;
    if (model_bf16_kernel(&line) == MODEL_BF16_NONE) {
        EXPECT(model_set_backend(m, "cpu-bf16", err, sizeof err) == -1);
        EXPECTF(strstr(err, "cpu-bf16") && strstr(err, line), "%s", err);
    } else {
        EXPECTF(model_set_backend(m, "cpu-bf16", err, sizeof err) == 0, "%s", err);
    }
    model_destroy(&m);
}

static bool stop_at_three(void *ctx, int seq, const int *tokens, int n)
{
    (void)tokens;
    ((int *)ctx)[seq] = n;
    return n == 3;
}

static void test_stop_and_tiny(void)
{
    char err[512];
    model_t *m = tiny_model(42);
    if (!m) return;
    EXPECTF(model_num_params(m) > 2000000 && model_num_params(m) < 8000000, "tiny has %zu parameters",
            model_num_params(m));
    int prompt[3] = {'a', 'b', 'c'}, toks[2 * 8], lens[2], seen[2] = {0, 0};
    float lp[2 * 8];
    model_gen_params_t gp = {.max_new = 8,
                             .sample = {.temperature = 1, .top_k = 5, .top_p = 0.9f},
                             .seed = 3,
                             .stop = stop_at_three,
                             .stop_ctx = seen};
    EXPECT(model_generate(m, prompt, 3, 2, &gp, toks, lp, lens) == 0);
    for (int s = 0; s < 2; s++) {
        bool eos = toks[s * 8 + lens[s] - 1] == 256;
        EXPECTF(lens[s] == 3 || (eos && lens[s] < 3), "length %d", lens[s]);
    }
    model_config_t bad = *model_config(m);
    bad.NKV = 3;
    model_t *b = model_new_random(&bad, 1, err, sizeof err);
    EXPECT(!b && strstr(err, "num_key_value_heads"));
    model_destroy(&m);
}

/* The golden files hold 11 positions; a policy reads its question from
 * 100 and more back. The gradient that reaches a token at position 3 from
 * a loss on the last positions of 150 (the embedding row of a token found
 * only there; the row's own logit adds a small part) agrees with central
 * finite differences. */
static double tail_logp(model_t *m, const int *tok, const int *tgt, int T, float *logp)
{
    model_forward(m, tok, tgt, 1, T, 1.0f, logp, NULL);
    double s = 0;
    for (int t = 0; t < T; t++) s += tgt[t] >= 0 ? logp[t] : 0;
    return s;
}

static void test_long_range_gradient(void)
{
    enum { T = 150 };
    char err[256];
    model_config_t c = model_config_tiny();
    model_t *m = model_new_random(&c, 7, err, sizeof err);
    int tok[T], tgt[T];
    float logp[T], dl[T];
    for (int t = 0; t < T; t++) tok[t] = 'a' + (t * 7) % 20, tgt[t] = -1;
    tok[3] = 'Z';
    for (int t = T - 4; t < T - 1; t++) tgt[t] = tok[t + 1];
    model_zero_grad(m);
    tail_logp(m, tok, tgt, T, logp);
    for (int t = 0; t < T; t++) dl[t] = tgt[t] >= 0 ? 1.0f : 0.0f;
    model_backward(m, dl);
    float *w = model_params(m);
    const float *g = model_grads(m);
    double worst = 0, sum = 0;
    for (int k = 0; k < 8; k++) {
        size_t i = (size_t)'Z' * c.C + (size_t)(k * 31 % c.C); /* the embedding comes first */
        float w0 = w[i];
        const double h = 1e-2;
        w[i] = w0 + (float)h;
        double up = tail_logp(m, tok, tgt, T, logp);
        w[i] = w0 - (float)h;
        double down = tail_logp(m, tok, tgt, T, logp);
        w[i] = w0;
        double fd = (up - down) / (2 * h);
        worst = fmax(worst, fabs(g[i] - fd));
        sum += fabs(fd);
    }
    /* with 'Z' at position 3 these entries are 0.04 to 1.07, without it 0.01 to 0.05 */
    EXPECTF(sum > 1.0, "finite differences sum to %g: no long-range gradient to check", sum);
    EXPECTF(worst < 2e-3 * fmax(sum / 8, 1e-3) + 1e-4, "backward and finite differences differ by %g (mean |fd| %g)",
            worst, sum / 8);
    model_destroy(&m);
}

/* A few warm-start steps (cross-entropy, then AdamW) give the same bits on
 * 1 and 2 threads: every matmul is cut into blocks that follow from its
 * shape alone (model_gemm), and RMSNorm's weight gradient sums the rows in
 * order, so a study's base does not depend on the cores that made it (a
 * sum per thread made bases on 1 and 2 threads part after 5 steps). The
 * Qwen3 shape reaches the q and k norms; 8 x 48 positions reach
 * model_gemm's blocks */
static void test_threads_same_bits(void)
{
    char err[256];
    model_config_t cfgs[2] = {model_config_tiny(), model_config_tiny()};
    cfgs[1].type = MODEL_QWEN3;
    cfgs[1].qkv_bias = false;
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        enum { B = 8, T = 48, N = B * T, STEPS = 3 };
        int tok[N], tgt[N];
        float *p[2] = {NULL, NULL}, loss[2][STEPS];
        size_t n = 0;
        for (int th = 0; th < 2; th++) {
            omp_set_num_threads(th + 1);
            model_t *m = model_new_random(&cfgs[k], 7, err, sizeof err);
            EXPECTF(m != NULL, "%s", err);
            if (!m) break;
            n = m->n_params;
            adamw_t *opt = adamw_new(n);
            adamw_params_t ap = adamw_params_default();
            ap.lr = 1e-3f;
            for (int s = 0; s < STEPS; s++) {
                for (int i = 0; i < N; i++) {
                    tok[i] = (i * 37 + 11 * s + 5) % cfgs[k].V;
                    tgt[i] = i % T == T - 1 ? -1 : ((i + 1) * 37 + 11 * s + 5) % cfgs[k].V;
                }
                float norm;
                model_zero_grad(m);
                loss[th][s] = model_cross_entropy(m, tok, tgt, B, T);
                EXPECT(model_optimizer_step(m, opt, &ap, 1.0f, &norm) == 0);
            }
            p[th] = malloc(n * sizeof(float));
            memcpy(p[th], m->params, n * sizeof(float));
            adamw_destroy(&opt);
            model_destroy(&m);
        }
        EXPECTF(p[0] && p[1] && memcmp(loss[0], loss[1], sizeof loss[0]) == 0 &&
                    memcmp(p[0], p[1], n * sizeof(float)) == 0,
                "%s: the weights after %d steps on 1 and 2 threads differ", k ? "Qwen3" : "Qwen2", STEPS);
        free(p[0]);
        free(p[1]);
    }
    omp_set_num_threads(saved);
}

/* One forward and backward pass of m over B x T (packed where start is
 * not NULL) into logp (N) and the gradient g (n_params), with the
 * activations recomputed in backward or kept; the floats the workspaces
 * took into *ws */
static void pass_with(model_t *m, bool recompute, const int *tok, const int *tg, const int *st, const float *dl, int B,
                      int T, float *logp, float *g, size_t *ws)
{
    model_set_recompute(m, recompute);
    model_zero_grad(m);
    EXPECT(model_forward_packed(m, tok, tg, st, B, T, 1.0f, logp, NULL) == 0);
    model_backward(m, dl);
    memcpy(g, model_grads(m), model_num_params(m) * sizeof(float));
    *ws = m->acts_cap;
}

/* model_set_recompute: the same log-probs and gradient bit for bit as
 * keeping every layer's activations, on each CPU path (cpu, and cpu-bf16
 * where the CPU has a bf16 kernel), for Qwen2, Qwen3 and Llama shapes,
 * plain rows and packed ones; and a workspace that no longer grows with
 * the layers: with recompute, 8 layers take less than twice what 2 do */
static void test_recompute(void)
{
    char err[512];
    enum { B = 2, T = 192, N = B * T };
    static int tok[N], tg[N], st[N];
    static float dl[N], lp[2][N];
    for (int i = 0; i < N; i++) {
        tok[i] = (i * 37 + i / T) % 256;
        tg[i] = i % T == T - 1 ? -1 : (i * 37 + (i + 1) / T) % 256;
        dl[i] = (i % 7 - 3) / 10.0f;
        /* row 1 packed: a prefix of 64, then segments of 32 */
        st[i] = i < T || i % T < 64 ? 0 : (i % T - 64) / 32 * 32 + 64;
    }
    const char *backends[2] = {"cpu", "cpu-bf16"};
    bool bf16 = model_bf16_kernel(NULL) != MODEL_BF16_NONE;
    for (int arch = 0; arch < 3; arch++) {
        model_config_t c = model_config_tiny();
        if (arch == 1) c.type = MODEL_QWEN3, c.qkv_bias = false;
        if (arch == 2) c.type = MODEL_LLAMA, c.qkv_bias = false;
        const char *name = arch == 0 ? "qwen2" : arch == 1 ? "qwen3" : "llama";
        size_t P = model_num_params_of(&c);
        float *g[2] = {malloc(P * sizeof(float)), malloc(P * sizeof(float))};
        for (int be = 0; be < (bf16 ? 2 : 1); be++)
            for (int packed = 0; packed < 2; packed++) {
                size_t ws[2];
                /* a model each way, recomputing first, as workspaces only grow */
                for (int r = 1; r >= 0; r--) {
                    model_t *m = model_new_random(&c, 11, err, sizeof err);
                    EXPECTF(m, "%s", err);
                    if (!m) break;
                    EXPECTF(model_set_backend(m, backends[be], err, sizeof err) == 0, "%s", err);
                    pass_with(m, r, tok, tg, packed ? st : NULL, dl, B, T, lp[r], g[r], &ws[r]);
                    model_destroy(&m);
                }
                EXPECTF(memcmp(lp[0], lp[1], sizeof lp[0]) == 0 && memcmp(g[0], g[1], P * sizeof(float)) == 0,
                        "%s, %s, %s rows: recomputed activations give other log-probs or gradients", name, backends[be],
                        packed ? "packed" : "plain");
                EXPECTF(ws[1] < ws[0], "%s, %s: recompute takes %zu floats, keeping %zu", name, backends[be], ws[1],
                        ws[0]);
            }
        free(g[0]), free(g[1]);
    }
    model_config_t c2 = model_config_tiny(), c8 = c2;
    c2.L = 2, c8.L = 8;
    model_t *m2 = model_new_empty(&c2, "2 layers", err, sizeof err),
            *m8 = model_new_empty(&c8, "8 layers", err, sizeof err);
    EXPECTF(m2 && m8, "%s", err);
    if (m2 && m8) {
        size_t f[2][2];
        for (int r = 0; r < 2; r++) {
            model_set_recompute(m2, r), model_set_recompute(m8, r);
            f[r][0] = model_acts_layout(m2, NULL, B, T), f[r][1] = model_acts_layout(m8, NULL, B, T);
        }
        EXPECTF(f[1][1] < 2 * f[1][0] && f[0][1] > 2 * f[0][0],
                "workspace floats, 2 and 8 layers: kept %zu, %zu; recomputed %zu, %zu", f[0][0], f[0][1], f[1][0],
                f[1][1]);
        printf("recompute: workspace of 2 x 192, 2 and 8 layers: kept %zu and %zu floats, recomputed %zu and %zu\n",
               f[0][0], f[0][1], f[1][0], f[1][1]);
    }
    model_destroy(&m2);
    model_destroy(&m8);
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/sapo-test-model-XXXXXX");
    if (!mkdtemp(tmp_root)) return 1;
    RUN_TEST(test_qwen2_tied);
    RUN_TEST(test_qwen2_bf16);
    RUN_TEST(test_qwen2_sharded);
    RUN_TEST(test_qwen3_tied);
    RUN_TEST(test_qwen3_bias);
    RUN_TEST(test_qwen2_fp16);
    RUN_TEST(test_save_load);
    RUN_TEST(test_reload);
    RUN_TEST(test_bad_input);
    RUN_TEST(test_cross_entropy);
    RUN_TEST(test_chunked_lm_head);
    RUN_TEST(test_packed);
    RUN_TEST(test_sampling);
    RUN_TEST(test_generate_batch);
    RUN_TEST(test_stop_and_tiny);
    RUN_TEST(test_threads);
    RUN_TEST(test_gemm_few);
    RUN_TEST(test_gemm_f32);
    RUN_TEST(test_f32_choice);
    RUN_TEST(test_gemm_ws_threads);
    RUN_TEST(test_gemm_packed);
    RUN_TEST(test_decode_kernels);
    RUN_TEST(test_prefill_steps);
    RUN_TEST(test_gemm_amx);
    RUN_TEST(test_gemm_avx512bf16);
    RUN_TEST(test_bf16_kernel_choice);
    RUN_TEST(test_cpu_bf16_amx);
    RUN_TEST(test_cpu_bf16_avx512bf16);
    RUN_TEST(test_cpu_bf16_generate);
    RUN_TEST(test_exp);
    RUN_TEST(test_softmax_causal);
    RUN_TEST(test_long_range_gradient);
    RUN_TEST(test_threads_same_bits);
    RUN_TEST(test_recompute);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp_root);
    CHECK_EXIT();
}
