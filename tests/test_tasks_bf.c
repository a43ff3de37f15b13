/* bf family: the interpreter on hand-written programs and its limits; the
 * generated programs print what their BFit source computes; the shared
 * family checks; scores against reasoning-gym's fixtures. */
#include "check.h"
#include "tasks_family_check.h"

#include "tasks/bf.h"

extern const task_family_t task_family_bf;
static const task_family_t *F = &task_family_bf;

static char *run(const char *program, uint64_t limit, int *rc, char *err, size_t errlen)
{
    char *out = NULL;
    size_t len;
    *rc = bf_run(program, limit, &out, &len, NULL, err, errlen);
    return out;
}

static void test_interpreter(void)
{
    char err[256];
    int rc;
    /* 8 * 8 + 1 = 'A'; then 0 - 1 wraps to 255, and 49 more wrap to '0' */
    char prog[128] = "++++++++[>++++++++<-]>+.<-";
    memset(prog + strlen(prog), '+', 49);
    strcat(prog, ".");
    char *out = run(prog, 1000000, &rc, err, sizeof err);
    EXPECTF(rc == 0, "%s", err);
    EXPECT(out && strcmp(out, "A0") == 0);
    free(out);
    out = run("this is a comment: +++[-]+++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++++ +++.", 100, &rc, err,
              sizeof err);
    EXPECT(rc == 0 && out && strcmp(out, "0") == 0);
    free(out);
    out = run("+[]", 1000, &rc, err, sizeof err);
    EXPECT(rc < 0 && !out && strstr(err, "step limit 1000"));
    out = run("+[.", 1000, &rc, err, sizeof err);
    EXPECT(rc < 0 && strstr(err, "'[' at offset 1 has no matching ']'"));
    out = run("+].", 1000, &rc, err, sizeof err);
    EXPECT(rc < 0 && strstr(err, "']' at offset 1"));
    out = run(">><<<", 1000, &rc, err, sizeof err);
    EXPECT(rc < 0 && strstr(err, "pointer leaves"));
    out = run(",.", 1000, &rc, err, sizeof err);
    EXPECT(rc == 0 && out);
    free(out);
}

/* what the BFit source in metadata computes, in C */
static void check_source(const task_question_t *e)
{
    const char *src = cJSON_GetObjectItemCaseSensitive(e->metadata, "bfit_code")->valuestring;
    int target, x, y, cond = -1;
    const char *t = strstr(src, "int target = ");
    if (!t) {
        const char *w = strstr(src, "print(\"");
        EXPECT(w && strncmp(w + 7, e->answer, 5) == 0 && strlen(e->answer) == 5);
        return;
    }
    EXPECT(sscanf(t, "int target = %d;\n int x = %d;\n int y = %d;", &target, &x, &y) == 3);
    const char *c = strstr(src, "if (acc > ");
    if (c) EXPECT(sscanf(c, "if (acc > %d)", &cond) == 1);
    int acc = 0;
    while (acc < target) {
        acc += x;
        if (cond < 0 || acc > cond) acc += y;
    }
    char want[16];
    snprintf(want, sizeof want, "%d", acc);
    EXPECTF(strcmp(want, e->answer) == 0, "program prints %s, source computes %s", e->answer, want);
    const char *prog = cJSON_GetObjectItemCaseSensitive(e->metadata, "bf_program")->valuestring;
    EXPECT(strstr(e->question, prog) != NULL);
}

static void test_generated_programs(void)
{
    family_check_questions(F, NULL, 1, 300, check_source);
    family_check_questions(F, "{\"difficulty\": 2}", 2, 300, check_source);
    family_check_questions(F, "{\"difficulty\": 3}", 3, 300, check_source);
}

static void test_config(void)
{
    static const char *const bad[] = {"{\"difficulty\": 4}", "{\"difficulty\": 0}", "{\"difficulty\": \"2\"}",
                                      "{\"level\": 2}"};
    static const char *const field[] = {"difficulty", "difficulty", "difficulty", "level"};
    family_check_bad_configs(F, bad, field, (int)(sizeof bad / sizeof bad[0]));
}

static void test_scores(void)
{
    task_question_t e = {0};
    e.answer = "crave";
    EXPECT(F->score("crave", &e) == 1.0);
    EXPECT(F->score(NULL, &e) == 0.0);
    EXPECT(F->score("", &e) == 0.0);
    EXPECT_NEAR(F->score("crave!!!!!", &e), 0.5, 1e-12);
    EXPECT(F->score("Crave", &e) == 0.0);
}

static void test_many(void) { family_check_many(F, 200000); }

static void test_fixtures(void)
{
    int a = family_check_fixtures(F, "tests/golden/tasks/variants_bf.jsonl");
    int b = family_check_fixtures(F, "tests/golden/tasks/sapo_bf.jsonl");
    int c = family_check_fixtures(F, "tests/golden/tasks/rg_bf.jsonl");
    if (a < 0 && b < 0 && c < 0) SKIP_TEST("no fixtures in tests/golden/tasks");
}

int main(void)
{
    RUN_TEST(test_interpreter);
    RUN_TEST(test_generated_programs);
    RUN_TEST(test_config);
    RUN_TEST(test_scores);
    RUN_TEST(test_many);
    RUN_TEST(test_fixtures);
    CHECK_EXIT();
}
