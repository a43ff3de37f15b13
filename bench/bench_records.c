/* bench_records: encode + verify + decode of one group (8
 * completions of ~200 tokens with token ids and log-probs, as a generator
 * sends them) per second, against the same content as JSON through cJSON
 * (print, then parse and read back). Medians of several timed runs;
 * QUICK=1 shortens them. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/identity.h"
#include "records.h"

#define L 8   /* completions per group */
#define T 200 /* tokens per completion */
#define RUNS 7

static const char *const words[] = {"the",  "answer",   "is",        "so", "we",    "add",   "carry", "digit",
                                    "then", "<answer>", "</answer>", "42", "first", "step:", "=",     "+"};

static char texts[L][2048];
static int32_t ids[L][T];
static float lps[L][T];
static rec_completion_t comps[L];
static rec_group_t group;

static void make_group(void)
{
    uint32_t s = 12345;
    for (int i = 0; i < L; i++) {
        size_t n = 0;
        for (int t = 0; t < T; t++) {
            s = s * 1664525u + 1013904223u;
            ids[i][t] = (int32_t)(s >> 15) % 151000;
            lps[i][t] = -(float)((s >> 8) & 0xffff) / 8192.0f;
            const char *w = words[(s >> 4) % 16];
            if (n + strlen(w) + 2 < sizeof texts[i]) n += (size_t)sprintf(texts[i] + n, "%s ", w);
        }
        comps[i] = (rec_completion_t){.text = texts[i],
                                      .token_ids = ids[i],
                                      .n_tokens = T,
                                      .logprobs = lps[i],
                                      .n_logprobs = T,
                                      .reward = (float)(i % 2),
                                      .finished = i % 3 != 0};
    }
    group = (rec_group_t){
        .node = "node-3",
        .policy_version = 812,
        .round = 811,
        .model = "Qwen2.5-0.5B-Instruct",
        .task = {.task_id = 99123,
                 .family = "basic_arithmetic",
                 .question = "Calculate the following and put the result inside <answer></answer> "
                             "tags: 4396 + 8810 - (123 * 7) + 3921 / 3. Give the exact integer, "
                             "showing no working in the final answer.",
                 .answer = "12056",
                 .metadata_json = "{\"source_dataset\":\"basic_arithmetic\",\"source_index\":99123,"
                                  "\"expression\":\"4396 + 8810 - (123 * 7) + 3921 / 3\","
                                  "\"num_terms\":5,\"num_digits\":4}",
                 .seed = 42,
                 .index = 99123,
                 .node = "node-3",
                 .round = 811},
        .completions = comps,
        .n_completions = L,
        .created_ms = 1763750000000ull,
        .scored = true,
    };
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double sink;

static void flatbuffers_once(size_t *bytes)
{
    uint8_t *buf;
    size_t len;
    if (rec_group_build(&group, &buf, &len)) {
        fprintf(stderr, "bench_records: build failed\n");
        exit(1);
    }
    rec_group_view_t v;
    char err[256];
    if (rec_group_view(buf, len, &v, err, sizeof err)) {
        fprintf(stderr, "bench_records: %s\n", err);
        exit(1);
    }
    double acc = (double)strlen(v.r.task.question) + (double)strlen(v.r.task.metadata_json);
    for (size_t i = 0; i < v.r.n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(&v, i, &c);
        acc += (double)strlen(c.text) + c.reward;
        for (size_t t = 0; t < c.n_tokens; t++) acc += c.token_ids[t] + c.logprobs[t];
    }
    sink += acc;
    *bytes = len;
    rec_free(buf);
}

static void add_task(cJSON *o, const rec_task_t *t)
{
    cJSON *j = cJSON_AddObjectToObject(o, "task");
    cJSON_AddNumberToObject(j, "task_id", (double)t->task_id);
    cJSON_AddStringToObject(j, "family", t->family);
    cJSON_AddStringToObject(j, "question", t->question);
    cJSON_AddStringToObject(j, "answer", t->answer);
    cJSON_AddStringToObject(j, "metadata_json", t->metadata_json);
    cJSON_AddNumberToObject(j, "seed", (double)t->seed);
    cJSON_AddNumberToObject(j, "index", (double)t->index);
    cJSON_AddStringToObject(j, "node", t->node);
    cJSON_AddNumberToObject(j, "round", (double)t->round);
}

static void cjson_once(size_t *bytes)
{
    const rec_group_t *r = &group;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "node", r->node);
    cJSON_AddNumberToObject(o, "policy_version", (double)r->policy_version);
    cJSON_AddNumberToObject(o, "round", (double)r->round);
    cJSON_AddStringToObject(o, "model", r->model);
    add_task(o, &r->task);
    cJSON *cs = cJSON_AddArrayToObject(o, "completions");
    for (size_t i = 0; i < r->n_completions; i++) {
        const rec_completion_t *c = &r->completions[i];
        cJSON *cj = cJSON_CreateObject();
        cJSON_AddStringToObject(cj, "text", c->text);
        cJSON_AddItemToObject(cj, "token_ids", cJSON_CreateIntArray(c->token_ids, (int)c->n_tokens));
        cJSON_AddItemToObject(cj, "logprobs", cJSON_CreateFloatArray(c->logprobs, (int)c->n_logprobs));
        cJSON_AddNumberToObject(cj, "reward", c->reward);
        cJSON_AddBoolToObject(cj, "finished", c->finished);
        cJSON_AddItemToArray(cs, cj);
    }
    cJSON_AddNumberToObject(o, "created_ms", (double)r->created_ms);
    cJSON_AddBoolToObject(o, "external", r->external);
    cJSON_AddBoolToObject(o, "scored", r->scored);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    *bytes = strlen(text);

    cJSON *p = cJSON_Parse(text);
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(p, "task");
    double acc = (double)strlen(cJSON_GetObjectItemCaseSensitive(task, "question")->valuestring) +
                 (double)strlen(cJSON_GetObjectItemCaseSensitive(task, "metadata_json")->valuestring);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(p, "completions"))
    {
        acc += (double)strlen(cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring) +
               cJSON_GetObjectItemCaseSensitive(c, "reward")->valuedouble;
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c, "token_ids")) acc += x->valuedouble;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(c, "logprobs")) acc += x->valuedouble;
    }
    sink += acc;
    cJSON_Delete(p);
    free(text);
}

static identity_t *key;
static uint8_t *built;
static size_t built_len;

/* what a pool entry costs its publisher and each reader: sign the group's
 * record into an envelope, then verify it */
static void seal_open_once(size_t *bytes)
{
    size_t len, rec_len;
    const uint8_t *rec;
    uint8_t *env = identity_seal(key, built, built_len, &len);
    if (!env || identity_open(identity_public(key), env, len, &rec, &rec_len) != 1) {
        fprintf(stderr, "bench_records: seal/open failed\n");
        exit(1);
    }
    sink += rec[0];
    *bytes = len;
    free(env);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median rate (per second) over RUNS runs of about `seconds` each */
static double rate(void (*once)(size_t *), double seconds, size_t *bytes)
{
    double r[RUNS];
    for (int k = 0; k < RUNS; k++) {
        long n = 0;
        double t0 = now(), t;
        do {
            for (int i = 0; i < 16; i++) once(bytes);
            n += 16;
        } while ((t = now() - t0) < seconds);
        r[k] = (double)n / t;
    }
    qsort(r, RUNS, sizeof r[0], cmp);
    return r[RUNS / 2];
}

int main(void)
{
    const char *quick = getenv("QUICK");
    double seconds = quick && *quick && strcmp(quick, "0") ? 0.05 : 0.4;
    make_group();
    size_t fb_bytes = 0, json_bytes = 0;
    double fb = rate(flatbuffers_once, seconds, &fb_bytes);
    double js = rate(cjson_once, seconds, &json_bytes);
    printf("# one group: %zu bytes as a FlatBuffer, %zu bytes as JSON\n", fb_bytes, json_bytes);
    printf("bench records_roundtrip: %.0f groups/s (cjson: %.0f groups/s, ratio %.1f)\n", fb, js, fb / js);
    key = identity_new();
    if (!key || rec_group_build(&group, &built, &built_len)) {
        fprintf(stderr, "bench_records: no key\n");
        return 1;
    }
    size_t env_bytes = 0;
    double so = rate(seal_open_once, seconds, &env_bytes);
    printf("# one pool entry: %zu bytes (64-byte Ed25519 signature, then the record)\n", env_bytes);
    printf("bench records_sign_verify: %.1f us/entry\n", 1e6 / so);
    rec_free(built);
    identity_destroy(&key);
    return sink == 0.5 ? 1 : 0;
}
