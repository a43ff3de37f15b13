/* The instruction before every question (lib/node/policy.c): a Qwen-shaped
 * model over the real Qwen tokenizer is prompted with ChatML and, by
 * default, a system prompt that asks for <answer> tags; "none", "@FILE" and
 * plain text set it otherwise; the byte model gets none by default. A
 * completion written as the instruction asks is scored by the verifier.
 * A saved policy version records its round and number; a base records
 * none, and a malformed record is refused, naming its file. */
#include <unistd.h>

#include "check.h"
#include "model/model.h"
#include "node/policy.h"
#include "node/score.h"
#include "records.h"
#include "group_buf.h"
#include "util/fs.h"

#define QWEN_TOKENIZER "tests/golden/tokenizer/qwen/tokenizer.json"

/* a random Qwen2-shaped model folder beside the real Qwen tokenizer */
static int make_qwen(const char *dir)
{
    char err[256], path[512], real[4096];
    model_config_t c = model_config_tiny();
    c.V = 151936, c.C = 16, c.L = 1, c.NH = 2, c.NKV = 1, c.HD = 8, c.FF = 32, c.eos_ids[0] = 151645;
    model_t *m = model_new_random(&c, 1, err, sizeof err);
    if (!m || model_save(m, dir, false, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        model_destroy(&m);
        return -1;
    }
    model_destroy(&m);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!realpath(QWEN_TOKENIZER, real) || symlink(real, path) != 0) return -1;
    return 0;
}

/* the default system prompt, none, one from a file, and a missing file
 * named in the error; false when the default policy does not open */
static bool system_prompt_settings(const char *dir)
{
    char err[512], file[600];
    policy_t *p = policy_open(dir, "default", err, sizeof err);
    EXPECTF(p != NULL, "%s", err);
    if (!p) return false;
    EXPECT(p->fmt == PROMPT_CHATML);
    char *prompt = policy_prompt(p, "Calculate 3 + 4.");
    EXPECTF(strstr(prompt, "<|im_start|>system\n") && strstr(prompt, POLICY_SYSTEM_DEFAULT) &&
                strstr(prompt, "<answer>") && strstr(prompt, "<|im_start|>user\nCalculate 3 + 4.<|im_end|>"),
            "prompt: %s", prompt);
    free(prompt);
    policy_destroy(&p);

    p = policy_open(dir, "none", err, sizeof err);
    prompt = p ? policy_prompt(p, "q") : NULL;
    EXPECTF(prompt && !strstr(prompt, "system"), "none: %s", prompt ? prompt : err);
    free(prompt);
    policy_destroy(&p);

    snprintf(file, sizeof file, "%s/system.txt", dir);
    FILE *f = fopen(file, "w");
    fputs("Answer inside <answer></answer>.\n", f);
    fclose(f);
    char setting[610];
    snprintf(setting, sizeof setting, "@%s", file);
    p = policy_open(dir, setting, err, sizeof err);
    prompt = p ? policy_prompt(p, "q") : NULL;
    EXPECTF(prompt && strstr(prompt, "system\nAnswer inside <answer></answer>.<|im_end|>"), "@file: %s",
            prompt ? prompt : err);
    free(prompt);
    policy_destroy(&p);

    /* a missing file names itself */
    snprintf(setting, sizeof setting, "@%s/nowhere.txt", dir);
    p = policy_open(dir, setting, err, sizeof err);
    EXPECTF(!p && strstr(err, "nowhere.txt"), "missing file: %s", err);
    policy_destroy(&p);
    return true;
}

/* the completion the instruction asks for is scored */
static void instruction_scored(void)
{
    char err[512];
    rec_completion_t c[] = {{.text = "3 + 4 is 7. <answer>7</answer>"}, {.text = "It is 7."}};
    rec_group_t r = {.node = "n0",
                     .completions = c,
                     .n_completions = 2,
                     .task = {.family = "basic_arithmetic",
                              .question = "Calculate 3 + 4.",
                              .answer = "7",
                              .metadata_json = "{\"source_dataset\":\"basic_arithmetic\"}"}};
    size_t len;
    void *buf = group_buf(&r, &len);
    EXPECT(buf != NULL);
    score_stats_t st = {0};
    EXPECTF(score_group(buf, len, (reward_rule_t){0, 0}, &st, err, sizeof err) == 0, "%s", err);
    rec_group_view_t v;
    rec_completion_t got;
    EXPECT(rec_group_view(buf, len, &v, err, sizeof err) == 0);
    rec_group_completion(&v, 0, &got);
    EXPECT(got.reward == 1.0f);
    rec_group_completion(&v, 1, &got);
    EXPECT(got.reward == 0.0f);
    free(buf);
}

static void test_chat_instruction(void)
{
    if (access(QWEN_TOKENIZER, R_OK) != 0) SKIP_TEST(QWEN_TOKENIZER " missing (make test unpacks it)");
    char dir[] = "/tmp/test_policy_XXXXXX";
    EXPECT(mkdtemp(dir) != NULL);
    EXPECT(make_qwen(dir) == 0);
    if (!system_prompt_settings(dir)) return;
    fs_rm_tree(dir);
    instruction_scored();
}

/* the byte model is trained without an instruction: none by default, the
 * text when one is set */
static void test_plain(void)
{
    char err[256];
    policy_t *p = policy_new_bytes(NULL, 1, "default", err, sizeof err);
    char *prompt = policy_prompt(p, "Calculate 3 + 4.");
    EXPECTF(strcmp(prompt, "Question: Calculate 3 + 4.\nAnswer:") == 0, "%s", prompt);
    free(prompt);
    policy_destroy(&p);
    p = policy_new_bytes(NULL, 1, "Be brief.", err, sizeof err);
    prompt = policy_prompt(p, "q");
    EXPECTF(strcmp(prompt, "Be brief.\n\nQuestion: q\nAnswer:") == 0, "%s", prompt);
    free(prompt);
    policy_destroy(&p);
}

/* a second kind of byte model from a shape file (the heterogeneous swarm's
 * smaller model): its layers, its parameter count, its name; a shape whose
 * vocabulary cannot hold the byte tokenizer's ids is refused, naming it */
static void test_shape(void)
{
    char err[256], path[] = "/tmp/sapo_shape_XXXXXX";
    policy_t *p = policy_new_bytes("config/tiny-2layer.json", 2, "default", err, sizeof err);
    EXPECTF(p != NULL, "%s", err);
    if (!p) return;
    const model_config_t *c = model_config(p->model);
    EXPECT(c->L == 2 && c->C == 256 && c->V == 264);
    /* embeddings 264 x 256, a final norm, per layer two norms, q/k/v/o with
     * q, k, v biases and the 3 MLP matrices */
    size_t layer = 2 * 256 + 256 * 256 + 256 + 2 * (256 * 128 + 128) + 256 * 256 + 3 * 256 * 768;
    EXPECTF(model_num_params(p->model) == 264 * 256 + 256 + 2 * layer, "%zu", model_num_params(p->model));
    EXPECTF(!strcmp(p->name, "bytes-2L-256C-v264"), "%s", p->name);
    policy_destroy(&p);
    int fd = mkstemp(path);
    const char *small = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_hidden_layers\": 1, "
                        "\"num_attention_heads\": 1, \"num_key_value_heads\": 1, \"head_dim\": 64, "
                        "\"intermediate_size\": 64, \"vocab_size\": 100, \"eos_token_id\": 50}";
    EXPECT(fd >= 0 && write(fd, small, strlen(small)) == (ssize_t)strlen(small));
    close(fd);
    p = policy_new_bytes(path, 2, "default", err, sizeof err);
    EXPECT(p == NULL);
    EXPECTF(strstr(err, path) && strstr(err, "vocab_size"), "%s", err);
    unlink(path);
    p = policy_new_bytes("/nonexistent/shape.json", 2, "default", err, sizeof err);
    EXPECTF(p == NULL && strstr(err, "/nonexistent/shape.json"), "%s", err);
}

/* policy_sample_batch: three questions of different lengths in one decode
 * batch give what policy_sample gives each with the same seed; a question
 * that is not UTF-8, or too long for the model, fails policy_check */
static void test_sample_batch(void)
{
    char err[256];
    policy_t *p = policy_new_bytes(NULL, 4, "default", err, sizeof err);
    const char *qs[3] = {"Calculate 3 + 4.", "Calculate 10 - 6. Answer with the integer result only.", "Is 7 odd?"};
    uint64_t seeds[3] = {11, 12, 13};
    enum { L = 4 };
    model_gen_params_t gp = {.max_new = 24, .sample = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f}};
    completion_t batch[3 * L], one[L];
    EXPECTF(policy_sample_batch(p, qs, seeds, 3, L, &gp, batch, err, sizeof err) == 0, "%s", err);
    int same = 0, differ = 0;
    for (int q = 0; q < 3; q++) {
        gp.seed = seeds[q];
        EXPECTF(policy_sample(p, qs[q], L, &gp, one, err, sizeof err) == 0, "%s", err);
        for (int l = 0; l < L; l++) {
            const completion_t *b = &batch[q * L + l];
            same += b->n == one[l].n && strcmp(b->text, one[l].text) == 0 && b->finished == one[l].finished;
            for (int t = 0; t < b->n && t < one[l].n; t++) EXPECT_NEAR(b->logprobs[t], one[l].logprobs[t], 1e-4);
            differ += q > 0 && strcmp(b->text, batch[l].text) != 0;
            completion_free(&one[l]);
        }
    }
    EXPECTF(same == 3 * L, "%d of %d completions as sampled alone", same, 3 * L);
    EXPECTF(differ > 0, "the questions' completions should differ");
    for (int i = 0; i < 3 * L; i++) completion_free(&batch[i]);
    EXPECT(policy_check(p, qs[0], 24, err, sizeof err) == 0);
    EXPECT(policy_check(p, "\xff\xfe", 24, err, sizeof err) == -1 && strstr(err, "UTF-8"));
    EXPECT(policy_check(p, qs[0], 1 << 20, err, sizeof err) == -1 && strstr(err, "max_position_embeddings"));
    policy_destroy(&p);
}

/* a process told to stop: sampling ends at once and says so, and the
 * same policy samples again once the flag is down */
static void test_cancel(void)
{
    char err[256];
    policy_t *p = policy_new_bytes(NULL, 4, "default", err, sizeof err);
    volatile int stop = 1;
    p->cancel = &stop;
    model_gen_params_t gp = {.max_new = 24, .sample = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f}, .seed = 5};
    completion_t c[2];
    EXPECT(policy_sample(p, "Calculate 3 + 4.", 2, &gp, c, err, sizeof err) == -1 && strcmp(err, "interrupted") == 0);
    stop = 0;
    EXPECTF(policy_sample(p, "Calculate 3 + 4.", 2, &gp, c, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < 2; i++) completion_free(&c[i]);
    policy_destroy(&p);
}

/* writes text as dir's policy_version.json; true when read refuses it naming the file */
static bool refused(const char *dir, const char *text)
{
    char path[600], err[700];
    snprintf(path, sizeof path, "%s/policy_version.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(text, f);
    fclose(f);
    policy_version_t v;
    bool ok = policy_version_read(dir, &v, err, sizeof err) == -1 && strstr(err, path) && !strchr(err, '\n');
    if (!ok) fprintf(stderr, "not refused: %s\n", text);
    return ok;
}

static void test_version_record(void)
{
    char err[512], tmp[] = "/tmp/sapo_version_XXXXXX", dir[600], file[700];
    EXPECT(mkdtemp(tmp) != NULL);
    policy_t *p = policy_new_bytes(NULL, 1, "default", err, sizeof err);
    policy_version_t v = {.round = 9, .policy_version = 7}, got = {0};
    policy_version_dir(tmp, 7, dir, sizeof dir);
    snprintf(file, sizeof file, "%s/policy", tmp);
    EXPECT(fs_mkdirs(file) == 0);
    EXPECTF(policy_save(p, dir, false, &v, err, sizeof err) == 0, "%s", err);
    EXPECTF(policy_version_read(dir, &got, err, sizeof err) == 1, "%s", err);
    EXPECT(got.round == 9 && got.policy_version == 7);
    policy_t *again = policy_open(dir, "default", err, sizeof err);
    EXPECTF(again != NULL, "%s", err);
    policy_destroy(&again);
    /* a base, a missing folder and a file hold no record */
    snprintf(file, sizeof file, "%s/base", tmp);
    EXPECTF(policy_save(p, file, false, NULL, err, sizeof err) == 0, "%s", err);
    EXPECT(policy_version_read(file, &got, err, sizeof err) == 0);
    snprintf(file, sizeof file, "%s/none", tmp);
    EXPECT(policy_version_read(file, &got, err, sizeof err) == 0);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    EXPECT(policy_version_read(file, &got, err, sizeof err) == 0);
    EXPECT(refused(dir, "not json"));
    EXPECT(refused(dir, "{\"round\": 3}"));
    EXPECT(refused(dir, "{\"round\": -1, \"policy_version\": 1}"));
    EXPECT(refused(dir, "{\"round\": 1.5, \"policy_version\": 1}"));
    EXPECT(refused(dir, "{\"round\": 1e300, \"policy_version\": 1}"));
    EXPECT(refused(dir, "{\"round\": \"2\", \"policy_version\": 1}"));
    EXPECT(refused(dir, "[1, 2]"));
    policy_destroy(&p);
    fs_rm_tree(tmp);
}

int main(void)
{
    RUN_TEST(test_chat_instruction);
    RUN_TEST(test_plain);
    RUN_TEST(test_shape);
    RUN_TEST(test_sample_batch);
    RUN_TEST(test_cancel);
    RUN_TEST(test_version_record);
    CHECK_EXIT();
}
