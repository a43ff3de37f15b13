/* Records against the real flatc: C build -> bytes -> flatc --json equals
 * what was built; JSON -> flatc -b -> the C views read the same values; and
 * truncated, bit-flipped, oversized, misaligned and wrong-identifier buffers
 * are rejected before anything is read (or, when the Verifier accepts a
 * flipped buffer, reading it stays inside the buffer under ASan). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "records.h"

static char tmpdir[64];

/* --- flatc ---------------------------------------------------------------- */

static int sh(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(data, 1, len, f);
    fclose(f);
}

/* reads a whole file into an aligned, NUL-terminated malloc'ed buffer */
static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* flatc --json of a record: the parsed JSON, or NULL */
static cJSON *flatc_json(const char *fbs, const uint8_t *buf, size_t len)
{
    char bin[128], json[128], cmd[512];
    snprintf(bin, sizeof bin, "%s/rec.bin", tmpdir);
    snprintf(json, sizeof json, "%s/rec.json", tmpdir);
    write_file(bin, buf, len);
    snprintf(cmd, sizeof cmd, "flatc --json --strict-json --raw-binary --defaults-json -o %s schemas/%s -- %s", tmpdir,
             fbs, bin);
    if (sh(cmd)) return NULL;
    size_t n;
    char *text = (char *)read_file(json, &n);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

/* flatc -b of a JSON text by the schema file at path: the binary record,
 * or NULL */
static uint8_t *flatc_bin_by(const char *schema, const char *json_text, size_t *len)
{
    char json[128], bin[128], cmd[512];
    snprintf(json, sizeof json, "%s/in.json", tmpdir);
    snprintf(bin, sizeof bin, "%s/in.bin", tmpdir);
    write_file(json, json_text, strlen(json_text));
    snprintf(cmd, sizeof cmd, "flatc -b -o %s %s %s", tmpdir, schema, json);
    if (sh(cmd)) return NULL;
    return read_file(bin, len);
}

/* the same by schemas/<fbs> */
static uint8_t *flatc_bin(const char *fbs, const char *json_text, size_t *len)
{
    char schema[128];
    snprintf(schema, sizeof schema, "schemas/%s", fbs);
    return flatc_bin_by(schema, json_text, len);
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -12345.0;
}

static int jbool(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

/* --- sample records ------------------------------------------------------- */

static const int32_t ids0[] = {151644, 872, 198, 0, -1, 2147483647};
static const float lps0[] = {-0.125f, -3.5f, 0.0f, -17.25f, -0.5f, -1.0f};

static const rec_task_t task1 = {
    .task_id = 9007199254740991ull,
    .family = "basic_arithmetic",
    .question = "What is 12 + 30?\nGive \"only\" the number \\ é ∑ 🙂\t.",
    .answer = "42",
    .metadata_json = "{\"source_dataset\":\"basic_arithmetic\",\"difficulty\":{\"num_terms\":2}}",
    .seed = 7,
    .index = 123456789,
    .node = "n1",
    .round = 5,
    .policy_version = 4,
};

static const rec_completion_t comps1[] = {
    {.text = "<answer>42</answer>",
     .token_ids = ids0,
     .n_tokens = 6,
     .logprobs = lps0,
     .n_logprobs = 6,
     .reward = 1.0f,
     .finished = true},
    {.text = "I think it is 41", .reward = 0.0f, .finished = false},
    {.text = "",
     .token_ids = ids0,
     .n_tokens = 0,
     .logprobs = lps0,
     .n_logprobs = 0,
     .reward = 0.25f,
     .finished = true},
};

static rec_group_t group1(void)
{
    return (rec_group_t){
        .node = "n1",
        .policy_version = 17,
        .round = 5,
        .model = "qwen2.5-0.5b",
        .task = task1,
        .completions = comps1,
        .n_completions = 3,
        .created_ms = 1763750000123ull,
        .external = true,
        .scored = false,
        .pool_age_ms = 4321,
        .pool_age_rounds = 2,
    };
}

static int same_str(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

static void expect_task(const rec_task_t *got, const rec_task_t *want)
{
    EXPECT(got->task_id == want->task_id);
    EXPECT(same_str(got->family, want->family));
    EXPECT(same_str(got->question, want->question));
    EXPECT(same_str(got->answer, want->answer));
    EXPECT(same_str(got->metadata_json, want->metadata_json));
    EXPECT(got->seed == want->seed);
    EXPECT(got->index == want->index);
    EXPECT(same_str(got->node, want->node));
    EXPECT(got->round == want->round);
    EXPECT(got->policy_version == want->policy_version);
}

static void expect_completion(const rec_completion_t *got, const rec_completion_t *want)
{
    EXPECT(same_str(got->text, want->text));
    EXPECT(got->n_tokens == (want->token_ids ? want->n_tokens : 0));
    EXPECT(got->n_logprobs == (want->logprobs ? want->n_logprobs : 0));
    EXPECT((got->token_ids != NULL) == (want->token_ids != NULL));
    for (size_t t = 0; t < got->n_tokens && t < want->n_tokens; t++) EXPECT(got->token_ids[t] == want->token_ids[t]);
    for (size_t t = 0; t < got->n_logprobs && t < want->n_logprobs; t++) EXPECT(got->logprobs[t] == want->logprobs[t]);
    EXPECT(got->reward == want->reward);
    EXPECT(got->finished == want->finished);
}

static void expect_group(const rec_group_view_t *v, const rec_group_t *want)
{
    EXPECT(same_str(v->r.node, want->node));
    EXPECT(v->r.policy_version == want->policy_version);
    EXPECT(v->r.round == want->round);
    EXPECT(same_str(v->r.model, want->model));
    expect_task(&v->r.task, &want->task);
    EXPECT(v->r.created_ms == want->created_ms);
    EXPECT(v->r.external == want->external);
    EXPECT(v->r.scored == want->scored);
    EXPECT(v->r.pool_age_ms == want->pool_age_ms && v->r.pool_age_rounds == want->pool_age_rounds);
    EXPECT(v->r.n_completions == want->n_completions);
    for (size_t i = 0; i < v->r.n_completions && i < want->n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(v, i, &c);
        expect_completion(&c, &want->completions[i]);
    }
}

static void expect_json_task(const cJSON *j, const rec_task_t *t)
{
    EXPECT(jnum(j, "task_id") == (double)t->task_id);
    EXPECT(strcmp(jstr(j, "family"), t->family) == 0);
    EXPECT(strcmp(jstr(j, "question"), t->question) == 0);
    EXPECT(strcmp(jstr(j, "answer"), t->answer) == 0);
    EXPECT(strcmp(jstr(j, "metadata_json"), t->metadata_json) == 0);
    EXPECT(jnum(j, "seed") == (double)t->seed);
    EXPECT(jnum(j, "index") == (double)t->index);
    EXPECT(strcmp(jstr(j, "node"), t->node) == 0);
    EXPECT(jnum(j, "round") == (double)t->round);
    EXPECT(jnum(j, "policy_version") == (double)t->policy_version);
}

static void expect_json_group(const cJSON *j, const rec_group_t *r)
{
    EXPECT(strcmp(jstr(j, "node"), r->node) == 0);
    EXPECT(jnum(j, "policy_version") == (double)r->policy_version);
    EXPECT(jnum(j, "round") == (double)r->round);
    EXPECT(strcmp(jstr(j, "model"), r->model) == 0);
    expect_json_task(cJSON_GetObjectItemCaseSensitive(j, "task"), &r->task);
    EXPECT(jnum(j, "created_ms") == (double)r->created_ms);
    EXPECT(jbool(j, "external") == r->external);
    EXPECT(jbool(j, "scored") == r->scored);
    EXPECT(jnum(j, "pool_age_ms") == (double)r->pool_age_ms && jnum(j, "pool_age_rounds") == r->pool_age_rounds);
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(j, "completions");
    EXPECT(cJSON_GetArraySize(cs) == (int)r->n_completions);
    for (int i = 0; i < cJSON_GetArraySize(cs) && i < (int)r->n_completions; i++) {
        const cJSON *c = cJSON_GetArrayItem(cs, i);
        const rec_completion_t *w = &r->completions[i];
        EXPECT(strcmp(jstr(c, "text"), w->text) == 0);
        EXPECT_NEAR(jnum(c, "reward"), w->reward, 1e-6);
        EXPECT(jbool(c, "finished") == w->finished);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "token_ids");
        const cJSON *lps = cJSON_GetObjectItemCaseSensitive(c, "logprobs");
        EXPECT((ids != NULL) == (w->token_ids != NULL));
        EXPECT(cJSON_GetArraySize(ids) == (int)(w->token_ids ? w->n_tokens : 0));
        EXPECT(cJSON_GetArraySize(lps) == (int)(w->logprobs ? w->n_logprobs : 0));
        for (int t = 0; t < cJSON_GetArraySize(ids) && t < (int)w->n_tokens; t++)
            EXPECT(cJSON_GetArrayItem(ids, t)->valuedouble == w->token_ids[t]);
        /* flatc prints floats with 6 decimal places */
        for (int t = 0; t < cJSON_GetArraySize(lps) && t < (int)w->n_logprobs; t++)
            EXPECT_NEAR(cJSON_GetArrayItem(lps, t)->valuedouble, w->logprobs[t], 1e-5);
    }
}

/* rec_to_json must print the same document flatc prints */
static void expect_same_json_as_flatc(const uint8_t *buf, size_t len, const cJSON *flatc)
{
    char err[256] = "";
    char *ours = rec_to_json(buf, len, err, sizeof err);
    EXPECTF(ours != NULL, "%s", err);
    if (!ours) return;
    EXPECT(strchr(ours, '\n') == NULL);
    cJSON *j = cJSON_Parse(ours);
    EXPECTF(j != NULL, "not JSON: %s", ours);
    EXPECTF(cJSON_Compare(j, flatc, 1), "differs from flatc: %s", ours);
    cJSON_Delete(j);
    free(ours);
}

/* --- round trips ---------------------------------------------------------- */

static void test_group_build_view(void)
{
    rec_group_t in = group1();
    uint8_t *buf;
    size_t len;
    EXPECT(rec_group_build(&in, &buf, &len) == 0);
    EXPECT(rec_identify(buf, len) == REC_GROUP);
    rec_group_view_t v;
    char err[256] = "";
    EXPECTF(rec_group_view(buf, len, &v, err, sizeof err) == 0, "%s", err);
    expect_group(&v, &in);

    rec_completion_t comps[3];
    rec_group_t again;
    rec_group_unpack(&v, &again, comps);
    uint8_t *buf2;
    size_t len2;
    EXPECT(rec_group_build(&again, &buf2, &len2) == 0);
    EXPECT(len2 == len && memcmp(buf, buf2, len) == 0);
    rec_free(buf2);
    rec_free(buf);
}

static void test_group_flatc_json(void)
{
    rec_group_t in = group1();
    uint8_t *buf;
    size_t len;
    EXPECT(rec_group_build(&in, &buf, &len) == 0);
    cJSON *j = flatc_json("group.fbs", buf, len);
    EXPECT(j != NULL);
    if (j) {
        expect_json_group(j, &in);
        expect_same_json_as_flatc(buf, len, j);
    }
    cJSON_Delete(j);
    rec_free(buf);
}

static void test_group_from_flatc(void)
{
    /* uint64 values beyond a double's 53 bits, one completion with reward
     * and finished left at their defaults (flatc then omits them) */
    const char *json = "{\"node\":\"n9\",\"policy_version\":18446744073709551615,\"round\":9007199254740993,"
                       "\"model\":\"tiny\",\"task\":{\"task_id\":1,\"family\":\"bf\",\"question\":\"q\\u00e9\","
                       "\"answer\":\"a\",\"seed\":2,\"index\":3,\"node\":\"n9\",\"round\":4},"
                       "\"completions\":[{\"text\":\"x\",\"token_ids\":[1,2,-3],\"logprobs\":[-0.5,-1.25,-2],"
                       "\"reward\":0.75,\"finished\":true},{\"text\":\"y\"}],\"created_ms\":1,\"external\":false,"
                       "\"pool_age_ms\":7,\"pool_age_rounds\":2,\"scored\":true}";
    size_t len;
    uint8_t *buf = flatc_bin("group.fbs", json, &len);
    EXPECT(buf != NULL);
    if (!buf) return;
    rec_group_view_t v;
    char err[256] = "";
    EXPECTF(rec_group_view(buf, len, &v, err, sizeof err) == 0, "%s", err);
    if (err[0]) {
        free(buf);
        return;
    }
    EXPECT(strcmp(v.r.node, "n9") == 0);
    EXPECT(v.r.policy_version == UINT64_MAX);
    EXPECT(v.r.round == 9007199254740993ull);
    EXPECT(strcmp(v.r.task.question, "q\xc3\xa9") == 0);
    EXPECT(strcmp(v.r.task.metadata_json, "") == 0);
    EXPECT(v.r.task.index == 3 && v.r.task.round == 4);
    EXPECT(v.r.scored && !v.r.external);
    EXPECT(v.r.pool_age_ms == 7 && v.r.pool_age_rounds == 2);
    EXPECT(v.r.n_completions == 2);
    rec_completion_t c;
    rec_group_completion(&v, 0, &c);
    EXPECT(strcmp(c.text, "x") == 0 && c.n_tokens == 3 && c.token_ids[2] == -3);
    EXPECT(c.n_logprobs == 3 && c.logprobs[1] == -1.25f && c.reward == 0.75f && c.finished);
    rec_group_completion(&v, 1, &c);
    EXPECT(strcmp(c.text, "y") == 0 && c.token_ids == NULL && c.n_tokens == 0);
    EXPECT(c.logprobs == NULL && c.reward == 0.0f && !c.finished);

    /* the second completion has no reward field: no in-place score, nothing changed */
    float rw[2] = {0.5f, 1.0f};
    EXPECT(rec_group_score(buf, len, rw, 2, true, err, sizeof err) == -1);
    EXPECT(strstr(err, "rebuild") != NULL);
    rec_group_completion(&v, 0, &c);
    EXPECT(c.reward == 0.75f);
    /* rebuilt through the C API, it is scoreable */
    rec_completion_t comps[2];
    rec_group_t r;
    rec_group_unpack(&v, &r, comps);
    uint8_t *b2;
    size_t l2;
    EXPECT(rec_group_build(&r, &b2, &l2) == 0);
    EXPECTF(rec_group_score(b2, l2, rw, 2, true, err, sizeof err) == 0, "%s", err);
    rec_group_view_t v2;
    EXPECT(rec_group_view(b2, l2, &v2, err, sizeof err) == 0);
    rec_group_completion(&v2, 1, &c);
    EXPECT(c.reward == 1.0f && v2.r.policy_version == UINT64_MAX);
    rec_free(b2);
    free(buf);
}

static void test_group_score_in_place(void)
{
    rec_group_t in = group1();
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    EXPECT(rec_group_build(&in, &buf, &len) == 0);
    float rw[3] = {0.0f, 1.0f, 0.5f};
    EXPECT(rec_group_score(buf, len, rw, 2, true, err, sizeof err) == -1);
    EXPECT(strstr(err, "3 completions") != NULL);
    EXPECTF(rec_group_score(buf, len, rw, 3, true, err, sizeof err) == 0, "%s", err);
    rec_group_view_t v;
    EXPECT(rec_group_view(buf, len, &v, err, sizeof err) == 0);
    EXPECT(v.r.scored);
    for (size_t i = 0; i < 3; i++) {
        rec_completion_t c;
        rec_group_completion(&v, i, &c);
        EXPECT(c.reward == rw[i]);
        EXPECT(strcmp(c.text, comps1[i].text) == 0);
    }
    rec_free(buf);
}

static void test_task_round_trip(void)
{
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    EXPECT(rec_task_build(&task1, &buf, &len) == 0);
    rec_task_t t;
    EXPECTF(rec_task_view(buf, len, &t, err, sizeof err) == 0, "%s", err);
    expect_task(&t, &task1);
    cJSON *j = flatc_json("task.fbs", buf, len);
    EXPECT(j != NULL);
    if (j) {
        expect_json_task(j, &task1);
        expect_same_json_as_flatc(buf, len, j);
    }
    cJSON_Delete(j);
    rec_free(buf);

    /* absent strings read as "" */
    rec_task_t empty = {.task_id = 3};
    EXPECT(rec_task_build(&empty, &buf, &len) == 0);
    EXPECT(rec_task_view(buf, len, &t, err, sizeof err) == 0);
    EXPECT(t.task_id == 3 && strcmp(t.family, "") == 0 && strcmp(t.question, "") == 0);
    rec_free(buf);

    buf = flatc_bin("task.fbs",
                    "{\"task_id\":18446744073709551614,\"family\":\"arc_1d\",\"question\":\"Q\","
                    "\"answer\":\"A\",\"metadata_json\":\"{}\",\"seed\":5,\"index\":6,\"node\":\"n2\",\"round\":7}",
                    &len);
    EXPECT(buf != NULL);
    if (!buf) return;
    EXPECTF(rec_task_view(buf, len, &t, err, sizeof err) == 0, "%s", err);
    EXPECT(t.task_id == 18446744073709551614ull && strcmp(t.family, "arc_1d") == 0);
    EXPECT(strcmp(t.metadata_json, "{}") == 0 && t.seed == 5 && t.index == 6 && t.round == 7);
    EXPECT(strcmp(t.node, "n2") == 0 && strcmp(t.answer, "A") == 0);
    free(buf);
}

static void test_batch_round_trip(void)
{
    rec_group_t groups[2] = {group1(), group1()};
    groups[1].node = "n2";
    groups[1].external = false;
    groups[1].n_completions = 1;
    groups[1].pool_age_ms = 0;
    groups[1].pool_age_rounds = 0;
    rec_batch_t in = {.node = "n1",
                      .round = 8,
                      .policy_version = 17,
                      .groups = groups,
                      .n_groups = 2,
                      .local_count = 1,
                      .external_count = 1,
                      .stats_json = "{\"dropped_stale\":2}"};
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    EXPECT(rec_batch_build(&in, &buf, &len) == 0);
    rec_batch_view_t v;
    EXPECTF(rec_batch_view(buf, len, &v, err, sizeof err) == 0, "%s", err);
    EXPECT(strcmp(v.b.node, "n1") == 0 && v.b.round == 8 && v.b.policy_version == 17);
    EXPECT(v.b.local_count == 1 && v.b.external_count == 1 && v.b.n_groups == 2);
    EXPECT(strcmp(v.b.stats_json, in.stats_json) == 0);
    for (size_t g = 0; g < v.b.n_groups && g < 2; g++) {
        rec_group_view_t rv;
        rec_batch_group(&v, g, &rv);
        expect_group(&rv, &groups[g]);
    }
    cJSON *j = flatc_json("batch.fbs", buf, len);
    EXPECT(j != NULL);
    if (j) {
        EXPECT(strcmp(jstr(j, "node"), "n1") == 0 && jnum(j, "round") == 8);
        EXPECT(jnum(j, "policy_version") == 17 && jnum(j, "local_count") == 1);
        EXPECT(jnum(j, "external_count") == 1 && strcmp(jstr(j, "stats_json"), in.stats_json) == 0);
        const cJSON *gs = cJSON_GetObjectItemCaseSensitive(j, "groups");
        EXPECT(cJSON_GetArraySize(gs) == 2);
        for (int g = 0; g < cJSON_GetArraySize(gs) && g < 2; g++)
            expect_json_group(cJSON_GetArrayItem(gs, g), &groups[g]);
        expect_same_json_as_flatc(buf, len, j);
    }
    cJSON_Delete(j);
    rec_free(buf);

    buf = flatc_bin("batch.fbs",
                    "{\"node\":\"n3\",\"round\":2,\"groups\":[{\"node\":\"a\",\"completions\":[{\"text\":\"t\"}]},"
                    "{\"node\":\"b\",\"task\":{\"family\":\"bf\"}}],\"external_count\":4000000000}",
                    &len);
    EXPECT(buf != NULL);
    if (!buf) return;
    EXPECTF(rec_batch_view(buf, len, &v, err, sizeof err) == 0, "%s", err);
    EXPECT(strcmp(v.b.node, "n3") == 0 && v.b.round == 2 && v.b.n_groups == 2);
    EXPECT(v.b.external_count == 4000000000u && v.b.local_count == 0 && strcmp(v.b.stats_json, "") == 0);
    rec_group_view_t rv;
    rec_batch_group(&v, 0, &rv);
    EXPECT(strcmp(rv.r.node, "a") == 0 && rv.r.n_completions == 1 && strcmp(rv.r.task.family, "") == 0);
    rec_batch_group(&v, 1, &rv);
    EXPECT(strcmp(rv.r.node, "b") == 0 && rv.r.n_completions == 0 && strcmp(rv.r.task.family, "bf") == 0);
    free(buf);
}

static void test_policy_round_trip(void)
{
    rec_policy_t p = {.node = "n4",
                      .policy_version = 12,
                      .round = 11,
                      .checkpoint = "run/n4/ckpt/v12",
                      .created_ms = 1763750000999ull};
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    EXPECT(rec_policy_build(&p, &buf, &len) == 0);
    rec_policy_t pv;
    EXPECTF(rec_policy_view(buf, len, &pv, err, sizeof err) == 0, "%s", err);
    EXPECT(strcmp(pv.node, "n4") == 0 && pv.policy_version == 12 && pv.round == 11);
    EXPECT(strcmp(pv.checkpoint, p.checkpoint) == 0 && pv.created_ms == p.created_ms);
    cJSON *j = flatc_json("policy.fbs", buf, len);
    EXPECT(j != NULL);
    if (j) {
        EXPECT(strcmp(jstr(j, "node"), "n4") == 0 && jnum(j, "policy_version") == 12);
        EXPECT(jnum(j, "round") == 11 && strcmp(jstr(j, "checkpoint"), p.checkpoint) == 0);
        EXPECT(jnum(j, "created_ms") == (double)p.created_ms);
        expect_same_json_as_flatc(buf, len, j);
    }
    cJSON_Delete(j);
    rec_free(buf);

    buf = flatc_bin("policy.fbs", "{\"node\":\"x\",\"policy_version\":3,\"checkpoint\":\"/c\"}", &len);
    EXPECT(buf && rec_policy_view(buf, len, &pv, err, sizeof err) == 0);
    if (buf) EXPECT(pv.policy_version == 3 && strcmp(pv.checkpoint, "/c") == 0 && pv.round == 0);
    free(buf);
}

/* Group.signature is deprecated: nothing writes it and the generated
 * Verifier skips it, but a producer built from the schema before could
 * plant one, and the JSON printer follows it. One that fits is read and
 * printed; one whose length runs past the buffer is refused, in a group
 * and in a batch's group, before anything prints it. */
static void test_deprecated_signature(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/old && sed 's/ (deprecated)//' schemas/common.fbs > %s/old/common.fbs && "
             "cp schemas/group.fbs schemas/batch.fbs %s/old/",
             tmpdir, tmpdir, tmpdir);
    EXPECT(sh(cmd) == 0);
    const char *group = "{\"node\":\"n1\",\"signature\":[171,205,239,1],\"completions\":[{\"text\":\"x\"}]}";
    char batch[256];
    snprintf(batch, sizeof batch, "{\"node\":\"n1\",\"groups\":[%s]}", group);
    const struct {
        const char *fbs, *json;
    } cases[] = {{"group.fbs", group}, {"batch.fbs", batch}};
    for (int k = 0; k < 2; k++) {
        char schema[128], err[256] = "";
        snprintf(schema, sizeof schema, "%s/old/%s", tmpdir, cases[k].fbs);
        size_t len;
        uint8_t *buf = flatc_bin_by(schema, cases[k].json, &len);
        EXPECT(buf != NULL);
        if (!buf) continue;
        char *json = rec_to_json(buf, len, err, sizeof err);
        EXPECTF(json && strstr(json, "\"signature\": [171,205,239,1]"), "%s: %s", cases[k].fbs, json ? json : err);
        free(json);
        /* the vector's length prefix, then its bytes */
        const uint8_t sig[] = {4, 0, 0, 0, 171, 205, 239, 1};
        uint8_t *at = memmem(buf, len, sig, sizeof sig);
        EXPECT(at != NULL);
        if (at) {
            at[3] = 0x7f;
            EXPECT(rec_verify(buf, len, err, sizeof err) == REC_UNKNOWN &&
                   strstr(err, "fails FlatBuffers verification"));
            EXPECT(rec_to_json(buf, len, err, sizeof err) == NULL);
        }
        free(buf);
    }
}

static void test_json_nonfinite(void)
{
    const float lp[3] = {-INFINITY, -0.5f, NAN};
    rec_completion_t c = {.text = "\"nan\" or -inf \\\"inf", .logprobs = lp, .n_logprobs = 3, .reward = NAN};
    rec_group_t r = {.node = "inf", .model = "nan", .completions = &c, .n_completions = 1};
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    EXPECT(rec_group_build(&r, &buf, &len) == 0);
    char *json = rec_to_json(buf, len, err, sizeof err);
    EXPECTF(json != NULL, "%s", err);
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    EXPECTF(j != NULL, "not JSON: %s", json ? json : "");
    if (j) {
        EXPECT(strcmp(jstr(j, "node"), "inf") == 0 && strcmp(jstr(j, "model"), "nan") == 0);
        const cJSON *cj = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "completions"), 0);
        EXPECT(strcmp(jstr(cj, "text"), c.text) == 0);
        EXPECT(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cj, "reward")));
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(cj, "logprobs");
        EXPECT(cJSON_IsNull(cJSON_GetArrayItem(l, 0)) && cJSON_IsNull(cJSON_GetArrayItem(l, 2)));
        EXPECT(cJSON_GetArrayItem(l, 1)->valuedouble == -0.5);
    }
    cJSON_Delete(j);
    free(json);
    rec_free(buf);
}

/* --- bad buffers ---------------------------------------------------------- */

static size_t touch_str(const char *s) { return strlen(s) + (size_t)(unsigned char)s[0]; }

static size_t touch_group(const rec_group_view_t *v)
{
    size_t sum = touch_str(v->r.node) + touch_str(v->r.model) + touch_str(v->r.task.family) +
                 touch_str(v->r.task.question) + touch_str(v->r.task.answer) + touch_str(v->r.task.metadata_json) +
                 touch_str(v->r.task.node);
    sum += (size_t)v->r.pool_age_ms + v->r.pool_age_rounds;
    for (size_t i = 0; i < v->r.n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(v, i, &c);
        sum += touch_str(c.text) + (size_t)c.reward;
        for (size_t t = 0; t < c.n_tokens; t++) sum += (size_t)c.token_ids[t];
        for (size_t t = 0; t < c.n_logprobs; t++) sum += (size_t)(c.logprobs[t] != 0);
    }
    return sum;
}

/* Reads every field of a buffer the way a consumer would. Returns 1 when the
 * buffer was accepted. */
static int read_all(const uint8_t *buf, size_t len, size_t *sink)
{
    char err[256];
    switch (rec_identify(buf, len)) {
    case REC_TASK: {
        rec_task_t t;
        if (rec_task_view(buf, len, &t, err, sizeof err)) return 0;
        *sink += touch_str(t.family) + touch_str(t.question) + touch_str(t.answer) + touch_str(t.metadata_json) +
                 touch_str(t.node);
        break;
    }
    case REC_GROUP: {
        rec_group_view_t v;
        if (rec_group_view(buf, len, &v, err, sizeof err)) return 0;
        *sink += touch_group(&v);
        break;
    }
    case REC_BATCH: {
        rec_batch_view_t v;
        if (rec_batch_view(buf, len, &v, err, sizeof err)) return 0;
        *sink += touch_str(v.b.node);
        for (size_t g = 0; g < v.b.n_groups; g++) {
            rec_group_view_t rv;
            rec_batch_group(&v, g, &rv);
            *sink += touch_group(&rv);
        }
        break;
    }
    case REC_POLICY: {
        rec_policy_t p;
        if (rec_policy_view(buf, len, &p, err, sizeof err)) return 0;
        *sink += touch_str(p.node) + touch_str(p.checkpoint);
        break;
    }
    default: return rec_verify(buf, len, err, sizeof err) != REC_UNKNOWN;
    }
    char *json = rec_to_json(buf, len, err, sizeof err);
    if (json) *sink += strlen(json);
    free(json);
    return 1;
}

/* one built record of every type */
static size_t all_records(uint8_t *bufs[4], size_t lens[4])
{
    rec_group_t r = group1();
    rec_group_t groups[2] = {group1(), group1()};
    rec_batch_t b = {.node = "n1", .round = 1, .groups = groups, .n_groups = 2, .local_count = 2};
    rec_policy_t p = {.node = "n1", .policy_version = 2, .round = 3, .checkpoint = "ck", .created_ms = 4};
    int rc = rec_task_build(&task1, &bufs[0], &lens[0]) | rec_group_build(&r, &bufs[1], &lens[1]) |
             rec_batch_build(&b, &bufs[2], &lens[2]) | rec_policy_build(&p, &bufs[3], &lens[3]);
    EXPECT(rc == 0);
    return 4;
}

static void test_truncated(void)
{
    uint8_t *bufs[4];
    size_t lens[4], sink = 0;
    size_t n = all_records(bufs, lens);
    for (size_t k = 0; k < n; k++) {
        /* the builder pads its first object (at the end of the buffer), so
         * cutting only zero padding can leave a valid record; a cut into
         * anything else must be rejected */
        size_t pad = 0;
        while (pad < lens[k] && bufs[k][lens[k] - 1 - pad] == 0) pad++;
        int wrong = 0;
        for (size_t cut = 0; cut < lens[k]; cut++) {
            /* an exact-size copy so that ASan sees any read past the end */
            uint8_t *t = malloc(cut ? cut : 1);
            memcpy(t, bufs[k], cut);
            int ok = read_all(t, cut, &sink);
            wrong += ok && cut < lens[k] - pad;
            free(t);
        }
        EXPECTF(wrong == 0, "%s: %d truncations into data accepted", rec_kind_name((rec_kind_t)(k + 1)), wrong);
        EXPECT(read_all(bufs[k], lens[k], &sink) == 1);
        rec_free(bufs[k]);
    }
}

static void test_bit_flips(void)
{
    uint8_t *bufs[4];
    size_t lens[4], sink = 0;
    size_t n = all_records(bufs, lens);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t k = 0; k < n; k++) {
        int accepted = 0, flips = 3000;
        uint8_t *t = malloc(lens[k]);
        for (int f = 0; f < flips; f++) {
            memcpy(t, bufs[k], lens[k]);
            /* one to three flipped bits, xorshift positions */
            int nbits = 1 + f % 3;
            for (int b = 0; b < nbits; b++) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                size_t bit = (size_t)(s % (lens[k] * 8));
                t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            }
            accepted += read_all(t, lens[k], &sink);
        }
        free(t);
        printf("# %s: %d of %d flipped buffers pass verification (read safely)\n", rec_kind_name((rec_kind_t)(k + 1)),
               accepted, flips);
        EXPECT(accepted < flips);
        rec_free(bufs[k]);
    }
}

static void test_oversized_misaligned_wrong_id(void)
{
    rec_group_t in = group1();
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    EXPECT(rec_group_build(&in, &buf, &len) == 0);
    rec_group_view_t v;

    /* a valid record inside a buffer over the limit */
    uint8_t *big = calloc(1, REC_MAX_BYTES + 8);
    memcpy(big, buf, len);
    EXPECT(rec_group_view(big, REC_MAX_BYTES + 8, &v, err, sizeof err) == -1);
    EXPECT(strstr(err, "exceeds") != NULL);
    EXPECT(rec_to_json(big, REC_MAX_BYTES + 8, err, sizeof err) == NULL);
    /* a record whose text alone is over the limit cannot be built */
    memset(big, 'x', REC_MAX_BYTES + 7);
    big[REC_MAX_BYTES + 7] = 0;
    rec_completion_t c = {.text = (const char *)big};
    in.completions = &c;
    in.n_completions = 1;
    uint8_t *huge = NULL;
    size_t hlen = 0;
    EXPECT(rec_group_build(&in, &huge, &hlen) == -1 && huge == NULL);
    free(big);

    /* at an odd address: rejected; rec_aligned makes it readable */
    uint8_t *odd = malloc(len + 1);
    memcpy(odd + 1, buf, len);
    EXPECT(rec_group_view(odd + 1, len, &v, err, sizeof err) == -1);
    EXPECT(strstr(err, "aligned") != NULL);
    void *copy;
    const void *al = rec_aligned(odd + 1, len, &copy);
    EXPECT(copy != NULL && al == copy);
    EXPECT(rec_group_view(al, len, &v, err, sizeof err) == 0);
    EXPECT(strcmp(v.r.model, "qwen2.5-0.5b") == 0);
    free(copy);
    EXPECT(rec_aligned(buf, len, &copy) == buf && copy == NULL);
    free(odd);

    /* right structure, other identifiers */
    rec_task_t t;
    memcpy(buf + 4, "STSK", 4);
    EXPECT(rec_identify(buf, len) == REC_TASK);
    EXPECT(rec_group_view(buf, len, &v, err, sizeof err) == -1);
    EXPECT(strstr(err, "expected a rollout record") != NULL);
    memcpy(buf + 4, "ZZZZ", 4);
    EXPECT(rec_identify(buf, len) == REC_UNKNOWN);
    EXPECT(rec_verify(buf, len, err, sizeof err) == REC_UNKNOWN);
    EXPECT(strstr(err, "unknown file identifier 'ZZZZ'") != NULL);
    EXPECT(rec_task_view(buf, len, &t, err, sizeof err) == -1);
    EXPECT(rec_to_json(buf, len, err, sizeof err) == NULL);
    memcpy(buf + 4, "SROL", 4);
    EXPECT(rec_group_view(buf, len, &v, err, sizeof err) == 0);
    EXPECT(rec_verify(NULL, 0, err, sizeof err) == REC_UNKNOWN);
    rec_free(buf);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sapo-records-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN_TEST(test_group_build_view);
    RUN_TEST(test_group_flatc_json);
    RUN_TEST(test_group_from_flatc);
    RUN_TEST(test_group_score_in_place);
    RUN_TEST(test_task_round_trip);
    RUN_TEST(test_batch_round_trip);
    RUN_TEST(test_policy_round_trip);
    RUN_TEST(test_deprecated_signature);
    RUN_TEST(test_json_nonfinite);
    RUN_TEST(test_truncated);
    RUN_TEST(test_bit_flips);
    RUN_TEST(test_oversized_misaligned_wrong_id);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    sh(cmd);
    CHECK_EXIT();
}
