/* The math word problem families: gsm_symbolic's scorer against
 * reasoning-gym's fixtures (its entries and ours) and by hand, its questions (own answer 1.0, the
 * same per (seed, index), every template drawn, the worked solution ending
 * in the answer); gsm8k's reading of a real file, its errors, and its
 * number rules case by case; neither in the default mix. */
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "tasks_family_check.h"
#include "tasks/task.h"

#define GOLDEN "tests/golden/tasks"
#define SAMPLE GOLDEN "/gsm8k_sample.jsonl"

extern const task_family_t task_family_gsm_symbolic, task_family_gsm8k;
static const task_family_t *S = &task_family_gsm_symbolic, *G = &task_family_gsm8k;

static double score(const task_family_t *f, const char *answer, const char *truth)
{
    task_question_t e = {.answer = (char *)truth};
    e.metadata = task_metadata_new(f->name, 0);
    double s = f->score(answer, &e);
    cJSON_Delete(e.metadata);
    return s;
}

static void expect_score(const task_family_t *f, const char *answer, const char *truth, double want)
{
    double got = score(f, answer, truth);
    EXPECTF(got == want, "%s: [%s] against truth [%s] scores %g, want %g", f->name, answer ? answer : "None",
            truth ? truth : "None", got, want);
}

static void test_fixtures(void)
{
    /* reasoning-gym's entries, then ours (regenerated from their seeds) */
    EXPECTF(family_check_fixtures(S, GOLDEN "/rg_gsm_symbolic.jsonl") > 1000, "too few answers checked");
    EXPECTF(family_check_fixtures(S, GOLDEN "/sapo_gsm_symbolic.jsonl") > 1000, "too few answers checked");
}

/* reasoning-gym reads the first match of \b-?\d+(?:\.\d+)?\b as a float */
static void test_symbolic_scores(void)
{
    expect_score(S, "25", "25", 1.0);
    expect_score(S, NULL, "25", 0.0);
    expect_score(S, "", "25", 0.0);
    expect_score(S, "twenty-five", "25", 0.0);
    expect_score(S, "26", "25", 0.01);
    expect_score(S, "The answer is 25 apples", "25", 1.0);
    expect_score(S, "24 or 25", "25", 0.01); /* the first number counts */
    /* a minus counts only after a word character */
    expect_score(S, "-25", "25", 1.0);
    expect_score(S, "x-25", "25", 0.01);
    expect_score(S, "x-25", "-25", 1.0);
    /* decimals only with a word boundary after them */
    expect_score(S, "25.0", "25", 1.0);
    expect_score(S, "25.5", "25", 0.01);
    expect_score(S, "25.5x", "25", 1.0);
    expect_score(S, "1,000", "1000", 0.01);
    /* no boundary inside a word: letters, '_', superscripts; combining
     * marks are not word characters */
    expect_score(S, "x25", "25", 0.0);
    expect_score(S, "25_", "25", 0.0);
    expect_score(S, "25\u00b2", "25", 0.0);
    expect_score(S, "25\u0301", "25", 1.0);
    /* any Unicode decimal digits */
    expect_score(S, "\u0662\u0665", "25", 1.0);
    expect_score(S, "\uff12\uff15", "25", 1.0);
    /* the truth through float(): whitespace, underscores, other digits */
    expect_score(S, "1000", " 1_000 ", 1.0);
    expect_score(S, "12", "\u0661\u0662", 1.0);
    expect_score(S, "12", "1.2e1", 1.0);
    expect_score(S, "12", "nan", 0.01);
    /* float() raising on the truth, or no truth: 0 */
    expect_score(S, "12", "1__2", 0.0);
    expect_score(S, "12", "0x0c", 0.0);
    expect_score(S, "12", "abc", 0.0);
    expect_score(S, "12", NULL, 0.0);
    /* out of double range on both sides: inf == inf */
    char big[420];
    memset(big, '9', 400);
    big[400] = '\0';
    expect_score(S, big, "inf", 1.0);
}

static char *seen_templates[64];
static int n_templates;

static void check_symbolic_entry(const task_question_t *e)
{
    char *end;
    long long v = strtoll(e->answer, &end, 10);
    char canon[32];
    snprintf(canon, sizeof canon, "%lld", v);
    EXPECTF(!*end && v > 0 && !strcmp(canon, e->answer), "answer %s is not a positive whole number", e->answer);
    const cJSON *m = e->metadata;
    EXPECT(cJSON_GetObjectItem(m, "answer_value")->valuedouble == (double)v);
    EXPECT(cJSON_GetObjectItem(m, "difficulty")->valuedouble == 1.0);
    EXPECT(cJSON_IsObject(cJSON_GetObjectItem(m, "variables")));
    const char *cot = cJSON_GetStringValue(cJSON_GetObjectItem(m, "answer_cot"));
    const char *last = cot ? strrchr(cot, '\n') : NULL;
    char want[48];
    snprintf(want, sizeof want, "\n#### %s", e->answer);
    EXPECTF(last && !strcmp(last, want), "answer_cot ends [%s], want [%s]", last ? last : "", want + 1);
    EXPECT(strstr(e->question, "between <answer> and </answer>."));
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(m, "template"));
    EXPECT(t);
    int known = 0;
    for (int i = 0; t && i < n_templates; i++) known |= !strcmp(seen_templates[i], t);
    if (t && !known && n_templates < 64) seen_templates[n_templates++] = strdup(t);
}

static void test_symbolic_entries(void)
{
    family_check_questions(S, NULL, 1, 3000, check_symbolic_entry);
    family_check_questions(S, "{\"difficulty\": 1}", 2, 3000, check_symbolic_entry);
    EXPECTF(n_templates >= 12, "%d templates drawn in 6000 questions", n_templates);
    printf("# gsm_symbolic: %d templates\n", n_templates);
    for (int i = 0; i < n_templates; i++) free(seen_templates[i]);
    cJSON *config = family_config(S, NULL);
    int same = 0;
    for (int k = 0; k < 50; k++) {
        task_question_t a = {0}, b = {0};
        char err[128];
        EXPECT(S->generate(config, 1, (uint64_t)k, &a, err, sizeof err) == 0);
        EXPECT(S->generate(config, 2, (uint64_t)k, &b, err, sizeof err) == 0);
        same += !strcmp(a.question, b.question);
        EXPECT(cJSON_GetObjectItem(a.metadata, "source_index")->valuedouble == k);
        task_question_free(&a);
        task_question_free(&b);
    }
    EXPECTF(same < 5, "%d of 50 questions equal across seeds", same);
    cJSON_Delete(config);
}

/* a temporary file holding text; the caller unlinks it */
static void temp_file(char *path, const char *text)
{
    strcpy(path, "/tmp/sapo_gsm8k_XXXXXX");
    int fd = mkstemp(path);
    EXPECT(fd >= 0);
    if (fd < 0) return;
    EXPECT(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static void expect_config_error(const task_family_t *f, const char *json, const char *needle)
{
    char err[512] = "";
    cJSON *user = cJSON_Parse(json);
    EXPECT(user);
    cJSON *c = task_family_config(f, user, err, sizeof err);
    EXPECTF(!c && strstr(err, needle), "%s %s: err [%s], want it to name %s", f->name, json, err, needle);
    cJSON_Delete(c);
    cJSON_Delete(user);
}

/* a gsm8k file holding text is refused with an error naming it and where */
static void expect_file_error(const char *text, const char *where, const char *what)
{
    char path[64], json[128], needle[96];
    temp_file(path, text);
    snprintf(json, sizeof json, "{\"path\": \"%s\"}", path);
    snprintf(needle, sizeof needle, "%s%s", path, where);
    expect_config_error(G, json, needle);
    expect_config_error(G, json, what);
    unlink(path);
}

static void test_configs(void)
{
    expect_config_error(S, "{\"difficulty\": 2}", "difficulty");
    expect_config_error(S, "{\"difficulty\": 0.5}", "difficulty");
    expect_config_error(S, "{\"difficulty\": \"1\"}", "difficulty");
    expect_config_error(S, "{\"seed\": 3}", "seed");
    expect_config_error(G, "{}", "path");
    expect_config_error(G, "{\"path\": 7}", "path");
    expect_config_error(G, "{\"path\": \"\"}", "path");
    expect_config_error(G, "{\"size\": 10}", "size");
    expect_config_error(G, "{\"path\": \"/nonexistent/gsm8k.jsonl\"}", "/nonexistent/gsm8k.jsonl: No such file");
    expect_config_error(G, "{\"path\": \"/tmp\"}", "/tmp");
    const char *good = "{\"question\": \"q\", \"answer\": \"1 + 1 = 2\\n#### 2\"}\n";
    char text[512];
    snprintf(text, sizeof text, "%s{\"question\": \"q\", \"answer\": \"x\n", good);
    expect_file_error(text, ":2:", "not valid JSON");
    snprintf(text, sizeof text, "%s%s{\"question\": \"q\", \"answer\": \"it is 2\"}\n", good, good);
    expect_file_error(text, ":3:", "####");
    expect_file_error("{\"question\": \"q\", \"answer\": \"#### two\"}\n", ":1:", "not a number");
    expect_file_error("{\"question\": \"q\", \"answer\": \"#### 2\\nso 2\"}\n", ":1:", "last line");
    expect_file_error("{\"answer\": \"#### 2\"}\n", ":1:", "question");
    expect_file_error("{\"question\": \"q\", \"answer\": 2}\n", ":1:", "answer");
    expect_file_error("[1, 2]\n", ":1:", "object");
    expect_file_error("", ":", "no problems");
    expect_file_error("\n  \n", ":", "no problems");
    /* blank lines between problems carry none and are no error */
    char path[64], json[128], err[256] = "";
    snprintf(text, sizeof text, "%s\n%s\n", good, good);
    temp_file(path, text);
    snprintf(json, sizeof json, "{\"path\": \"%s\"}", path);
    cJSON *user = cJSON_Parse(json), *c = task_family_config(G, user, err, sizeof err);
    EXPECTF(c, "%s", err);
    task_question_t e = {0};
    EXPECT(c && G->generate(c, 1, 0, &e, err, sizeof err) == 0 && !strcmp(e.answer, "2"));
    EXPECT(c && cJSON_GetObjectItem(e.metadata, "line")->valuedouble != 2);
    task_question_free(&e);
    cJSON_Delete(c);
    cJSON_Delete(user);
    unlink(path);
}

static int lines_seen[64];

static void check_gsm8k_entry(const task_question_t *e)
{
    const cJSON *m = e->metadata;
    int line = (int)cJSON_GetObjectItem(m, "line")->valuedouble;
    EXPECT(line >= 1 && line < 64);
    if (line >= 1 && line < 64) lines_seen[line]++;
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "path")), SAMPLE));
    EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(m, "answer_cot")), "\n#### "));
    EXPECT(strstr(e->question, "between <answer> and </answer>."));
    if (line == 5) EXPECT(!strcmp(e->answer, "1250")); /* "#### 1,250" */
    if (line == 6) EXPECT(!strcmp(e->answer, "-3"));
}

static void test_gsm8k_entries(void)
{
    family_check_questions(G, "{\"path\": \"" SAMPLE "\"}", 3, 400, check_gsm8k_entry);
    int drawn = 0;
    for (int i = 1; i < 64; i++) drawn += lines_seen[i] > 0;
    EXPECTF(drawn == 11, "%d of the sample's 11 lines drawn in 400 questions", drawn);
}

static void test_gsm8k_numbers(void)
{
    static const struct {
        const char *answer, *truth;
        double want;
    } cases[] = {
        {"1250", "1250", 1},
        {"1,250", "1250", 1},
        {"$1,250", "1250", 1},
        {"$1,250.00", "1250", 1},
        {" 1250.0 ", "1250", 1},
        {"\u00a01250\n", "1250", 1},
        {"01250", "1250", 1},
        {"1250", "1,250", 1},
        {"1,234,567", "1234567", 1},
        {"1250.5", "1250", 0},
        {"1250.", "1250", 0},
        {"12,50", "1250", 0},
        {"1,25,0", "1250", 0},
        {"1250,", "1250", 0},
        {",1250", "1250", 0},
        {"1234,567", "1234567", 0},
        {"1250 dollars", "1250", 0},
        {"1 250", "1250", 0},
        {"+1250", "1250", 0},
        {"1.25e3", "1250", 0},
        {"$ 1250", "1250", 0},
        {"1250$", "1250", 0},
        {"$$1250", "1250", 0},
        {"1251", "1250", 0},
        {"", "1250", 0},
        {"-3", "-3", 1},
        {"-$3", "-3", 1},
        {"$-3", "-3", 1},
        {"-3.0", "-3", 1},
        {"3", "-3", 0},
        {"--3", "-3", 0},
        {"- 3", "-3", 0},
        {"-0", "0", 1},
        {"0.00", "0", 1},
        {"$0", "0", 1},
        {"2.50", "2.5", 1},
        {"2", "2.5", 0},
        {"\u0662", "2", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_score(G, cases[i].answer, cases[i].truth, cases[i].want);
    expect_score(G, NULL, "5", 0);
    expect_score(G, "5", NULL, 0);
    expect_score(G, "5", "five", 0);
}

static void test_mix(void)
{
    char err[256] = "";
    task_mix_t *m = task_mix_new("{\"families\": {\"gsm_symbolic\": {\"weight\": 1},"
                                 " \"gsm8k\": {\"weight\": 1, \"config\": {\"path\": \"" SAMPLE "\"}}}}",
                                 4, err, sizeof err);
    EXPECTF(m, "%s", err);
    int gsm8k = 0;
    for (uint64_t i = 0; m && i < 1000; i++) {
        task_question_t a = {0};
        EXPECT(task_mix_draw(m, i, &a, err, sizeof err) == 0);
        gsm8k += !strcmp(cJSON_GetObjectItem(a.metadata, "source_dataset")->valuestring, "gsm8k");
        EXPECT(task_score_answer(a.answer, &a, err, sizeof err) == 1.0);
        task_question_free(&a);
    }
    EXPECTF(gsm8k > 400 && gsm8k < 600, "gsm8k drawn %d of 1000 at weight 1:1", gsm8k);
    task_mix_destroy(&m);
    err[0] = '\0';
    m = task_mix_new("{\"families\": {\"gsm8k\": {\"weight\": 1}}}", 4, err, sizeof err);
    EXPECTF(!m && strstr(err, "path"), "err [%s]", err);
    /* the default mix has neither */
    EXPECT(task_family_opt_in(S) && task_family_opt_in(G) && !task_family_opt_in(task_family_find("bf")));
    m = task_mix_new(NULL, 4, err, sizeof err);
    for (uint64_t i = 0; m && i < 2000; i++) {
        task_question_t a = {0};
        EXPECT(task_mix_draw(m, i, &a, err, sizeof err) == 0);
        EXPECT(strncmp(cJSON_GetObjectItem(a.metadata, "source_dataset")->valuestring, "gsm", 3) != 0);
        task_question_free(&a);
    }
    task_mix_destroy(&m);
}

static void test_many(void) { family_check_many(S, 20000); }

int main(void)
{
    RUN_TEST(test_fixtures);
    RUN_TEST(test_symbolic_scores);
    RUN_TEST(test_symbolic_entries);
    RUN_TEST(test_configs);
    RUN_TEST(test_gsm8k_entries);
    RUN_TEST(test_gsm8k_numbers);
    RUN_TEST(test_mix);
    RUN_TEST(test_many);
    CHECK_EXIT();
}
