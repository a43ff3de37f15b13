/* The real models read from their GGUF files against transformers loading
 * the same files (tests/oracle/gguf_model_golden.py): token ids of the
 * golden texts, and per-token log-probs of chat prompts with answers
 * within 2e-3. A model that scripts/model.sh has not fetched is skipped
 * with the command that fetches it. Also: a policy version saved from a
 * GGUF policy opens again as a Hugging Face folder with the same ids and
 * log-probs. */
#include "check.h"
#include "golden_logp.h"
#include "node/policy.h"
#include "util/fs.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <unistd.h>

#define GOLDEN "tests/golden/gguf/"

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* the fetched model's path, or NULL (why set) */
static const char *model_path(const char *name, char *out, size_t outlen, char *why, size_t whylen)
{
    const char *cache = getenv("SAPO_MODEL_CACHE");
    char err[512];
    if (policy_model_path(name, cache ? cache : "", out, outlen, err, sizeof err) != 0) {
        snprintf(why, whylen, "%s is not fetched (scripts/model.sh get %s)", name, name);
        return NULL;
    }
    return out;
}

static cJSON *golden(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, GOLDEN "%s.model.json", name);
    char *text = read_text(path);
    cJSON *g = text ? cJSON_Parse(text) : NULL;
    free(text);
    return g;
}

/* every golden text and prompt encodes to transformers' ids */
static void check_ids(const tokenizer_t *tok, const cJSON *g)
{
    const char *keys[2][2] = {{"texts", "text_ids"}, {"prompts", "ids"}};
    for (int k = 0; k < 2; k++) {
        const cJSON *texts = cJSON_GetObjectItem(g, keys[k][0]), *ids = cJSON_GetObjectItem(g, keys[k][1]);
        EXPECT(cJSON_GetArraySize(texts) > 0 && cJSON_GetArraySize(texts) == cJSON_GetArraySize(ids));
        for (int i = 0; i < cJSON_GetArraySize(texts); i++) {
            const char *t = cJSON_GetArrayItem(texts, i)->valuestring;
            const cJSON *want = cJSON_GetArrayItem(ids, i);
            int32_t *got = NULL;
            size_t n = 0;
            EXPECT(tokenizer_encode(tok, t, strlen(t), &got, &n) == 0);
            bool same = (int)n == cJSON_GetArraySize(want);
            for (size_t j = 0; same && j < n; j++) same = got[j] == cJSON_GetArrayItem(want, (int)j)->valueint;
            EXPECTF(same, "%s[%d] %.40s...: %zu ids, transformers %d", keys[k][0], i, t, n, cJSON_GetArraySize(want));
            free(got);
        }
    }
}

static void check_model(const char *name, bool save)
{
    char path[PATH_MAX], why[256], err[512];
    if (!model_path(name, path, sizeof path, why, sizeof why)) {
        static char reason[256];
        snprintf(reason, sizeof reason, "%s", why);
        SKIP_TEST(reason);
    }
    cJSON *g = golden(name);
    EXPECT(g != NULL);
    if (!g) return;
    policy_t *p = policy_open(path, "default", err, sizeof err);
    EXPECTF(p != NULL, "%s", err);
    if (!p) {
        cJSON_Delete(g);
        return;
    }
    EXPECT(p->fmt == PROMPT_CHATML);
    check_ids(p->tok, g);
    double gap = golden_logp_gap(p->model, g).worst;
    printf("%s: largest |logp - transformers| %.3g (bound 2e-3)\n", name, gap);
    EXPECTF(gap < 2e-3, "%.3g", gap);
    if (save) {
        /* a saved version is a Hugging Face folder: tokenizer.json and
         * the weights open again, giving the same ids and log-probs */
        char dir[64], version[128];
        snprintf(dir, sizeof dir, "/tmp/test_gguf_model.%d", (int)getpid());
        snprintf(version, sizeof version, "%s/v0", dir);
        EXPECT(fs_mkdirs(dir) == 0);
        EXPECTF(policy_save(p, version, false, NULL, err, sizeof err) == 0, "%s", err);
        char probe[192];
        snprintf(probe, sizeof probe, "%s/tokenizer-SmolLM2-135M-Instruct.Q4_1/tokenizer.json", dir);
        EXPECT(access(probe, R_OK) == 0);
        policy_t *q = policy_open(version, "default", err, sizeof err);
        EXPECTF(q != NULL, "%s", err);
        if (q) {
            EXPECT(strcmp(q->name, p->name) == 0);
            EXPECT(tokenizer_eos_id(q->tok) == tokenizer_eos_id(p->tok));
            check_ids(q->tok, g);
            double again = golden_logp_gap(q->model, g).worst;
            EXPECTF(again == gap, "%.9g against %.9g", again, gap);
        }
        policy_destroy(&q);
        fs_rm_tree(dir);
    }
    policy_destroy(&p);
    cJSON_Delete(g);
}

/* the micro Llama of the fuzz seeds with every occurrence of from (or
 * the last only) replaced by to, of the same length, written to path */
static void patched_seed(const char *path, const char *from, const char *to, bool last_only)
{
    FILE *f = fopen("fuzz/seeds/fuzz_gguf/micro-llama.gguf", "rb");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    size_t k = strlen(from), at = n;
    for (size_t i = 0; from[0] && i + k <= n; i++)
        if (memcmp(buf + i, from, k) == 0) {
            if (!last_only) memcpy(buf + i, to, k);
            at = i;
        }
    if (last_only && at < n) memcpy(buf + at, to, k);
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
}

/* a file sapo cannot run gets one line naming the file and what */
static void test_refused(void)
{
    static const struct {
        const char *from, *to, *want;
        bool last_only;
    } cases[] = {
        {"", "", NULL, false},
        {"llama", "mamba", "mamba: architecture not supported", false},
        {"<|im_start|>", "<|xx_start|>", "chat template is not ChatML", true},
        {"default", "unknown", "unknown: pre-tokenizer not supported", false},
        {"gpt2", "bert", "bert: tokenizer not supported", false},
    };
    char path[64], err[512];
    snprintf(path, sizeof path, "/tmp/test_gguf_model.%d.gguf", (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        patched_seed(path, cases[i].from, cases[i].to, cases[i].last_only);
        err[0] = '\0';
        policy_t *p = policy_open(path, "default", err, sizeof err);
        if (!cases[i].want) EXPECTF(p && strcmp(p->name, "llama-1L-8C-v259") == 0, "%s", p ? p->name : err);
        else
            EXPECTF(!p && strstr(err, cases[i].want) && strstr(err, path) && !strchr(err, '\n'), "%s: [%s]",
                    cases[i].to, err);
        policy_destroy(&p);
    }
    unlink(path);
}

static void test_smollm2_135m(void) { check_model("smollm2-135m", true); }
static void test_qwen25_coder_05b(void) { check_model("qwen2.5-coder-0.5b", false); }

int main(void)
{
    RUN_TEST(test_refused);
    RUN_TEST(test_smollm2_135m);
    RUN_TEST(test_qwen25_coder_05b);
    return check_failures ? 1 : 0;
}
