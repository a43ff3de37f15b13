/* propositional_logic family: the formula reader decides as
 * reasoning-gym's does on hand-picked texts; the scorer's tiers; the
 * shared family checks; scores against reasoning-gym's fixtures. */
#include "check.h"
#include "tasks_family_check.h"

#include "tasks/formula.h"

extern const task_family_t task_family_propositional_logic;
static const task_family_t *F = &task_family_propositional_logic;

/* the reading of text, printed back; or "EMPTY" / "DEEP" */
static char *reading(const char *text)
{
    formula_set_t *fs = formula_set_new();
    int f = formula_set_parse(fs, text, strlen(text));
    char *s = f == FORMULA_EMPTY ? strdup("EMPTY") : f == FORMULA_DEEP ? strdup("DEEP") : formula_set_format(fs, f);
    formula_set_destroy(&fs);
    return s;
}

static void expect_reading(const char *text, const char *want)
{
    char *got = reading(text);
    EXPECTF(strcmp(got, want) == 0, "%s reads as %s, not %s", text, got, want);
    free(got);
}

static void test_reader(void)
{
    expect_reading("(P ∧ Q)", "(P ∧ Q)");
    expect_reading("P∧Q", "(P ∧ Q)");
    /* the loosest connective splits first, the rightmost of equals */
    expect_reading("P ∧ Q ∨ R", "((P ∧ Q) ∨ R)");
    expect_reading("P ∨ Q ∧ R", "(P ∨ (Q ∧ R))");
    expect_reading("P → Q → R", "((P → Q) → R)");
    expect_reading("P ↔ Q → R", "(P ↔ (Q → R))");
    expect_reading("¬P ∧ Q", "(¬P ∧ Q)");
    expect_reading("¬(P ∧ Q)", "¬(P ∧ Q)");
    expect_reading("¬ P", "¬P");
    expect_reading("((P))", "P");
    expect_reading("(P) ∧ (Q)", "(P ∧ Q)");
    expect_reading("\u00a0 P \u3000", "P");
    /* anything else is one variable, named by its stripped text */
    expect_reading("P and Q", "P and Q");
    expect_reading("(P", "(P");
    expect_reading("P ¬", "P ¬");
    expect_reading(")(P", ")(P");
    expect_reading("", "EMPTY");
    expect_reading("  ", "EMPTY");
    expect_reading("()", "EMPTY");
    expect_reading("P ∧", "EMPTY");
    expect_reading("¬", "EMPTY");
    char deep[4100];
    memset(deep, '(', 2000);
    deep[2000] = 'P';
    memset(deep + 2001, ')', 2000);
    deep[4001] = '\0';
    expect_reading(deep, "DEEP");
    memset(deep, '(', 900);
    deep[900] = 'P';
    memset(deep + 901, ')', 900);
    deep[1801] = '\0';
    expect_reading(deep, "P");
}

static double score_with(const char *answer, const char *premises_json, const char *variables_json)
{
    task_question_t e = {0};
    char meta[512];
    snprintf(meta, sizeof meta, "{\"source_dataset\": \"propositional_logic\", \"premises\": %s, \"variables\": %s}",
             premises_json, variables_json);
    e.metadata = cJSON_Parse(meta);
    double s = F->score(answer, &e);
    cJSON_Delete(e.metadata);
    return s;
}

static void test_scores(void)
{
    const char *prem = "[\"P\", \"(P → Q)\"]", *vars = "[\"P\", \"Q\"]";
    EXPECT(score_with("(P ∧ Q)", prem, vars) == 1.0);
    EXPECT(score_with("(Q ∨ ¬P)", prem, vars) == 1.0);
    EXPECT(score_with("Q", prem, vars) == 0.25);        /* a bare variable is trivial */
    EXPECT(score_with("(P ∨ ¬P)", prem, vars) == 0.25); /* a tautology */
    EXPECT(score_with("¬Q", prem, vars) == 0.05);
    EXPECT(score_with("p", prem, vars) == 0.05); /* a free variable named p */
    EXPECT(score_with("R", prem, vars) == 0.0);  /* a capital that is no variable */
    EXPECT(score_with("", prem, vars) == 0.0);
    EXPECT(score_with(NULL, prem, vars) == 0.0);
    EXPECT(score_with("(P ∧", prem, vars) == 0.0);
    /* unsatisfiable premises entail everything */
    EXPECT(score_with("(Q ∧ ¬Q)", "[\"(P ∧ ¬P)\"]", vars) == 1.0);
    /* missing metadata: reasoning-gym's KeyError */
    EXPECT(score_with("P", prem, "null") == 0.0);
    /* many free variables: a counterexample is found at once */
    const char *wide = "(a ∨ b ∨ c ∨ d ∨ e ∨ f ∨ g ∨ h ∨ i ∨ j ∨ k ∨ l ∨ m ∨ n ∨ o ∨ p ∨ q ∨ r ∨ s ∨ t ∨ u ∨ "
                       "v ∨ w ∨ x ∨ y ∨ z ∨ aa ∨ bb ∨ cc ∨ dd ∨ ee ∨ ff ∨ gg ∨ hh ∨ ii ∨ jj ∨ kk ∨ ll)";
    EXPECT(score_with(wide, prem, vars) == 0.05);
    /* an entailed answer over 2^27 assignments: undecided, 0.0 */
    const char *taut = "((a ∨ ¬a) ∨ (b ∧ c ∧ d ∧ e ∧ f ∧ g ∧ h ∧ i ∧ j ∧ k ∧ l ∧ m ∧ n ∧ o ∧ p ∧ q ∧ r ∧ s ∧ t ∧ u ∧ "
                       "v ∧ w ∧ x ∧ y ∧ z))";
    EXPECT(score_with(taut, prem, vars) == 0.0);
}

/* premises read back as written; the example is the answer and its size
 * the complexity */
static void check_entry(const task_question_t *e)
{
    const cJSON *p, *m = e->metadata;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "premises"))
    {
        char *back = reading(p->valuestring);
        EXPECTF(strcmp(back, p->valuestring) == 0, "premise %s reads back as %s", p->valuestring, back);
        free(back);
    }
    EXPECT(strcmp(cJSON_GetObjectItemCaseSensitive(m, "example_answer")->valuestring, e->answer) == 0);
    formula_set_t *fs = formula_set_new();
    int f = formula_set_parse(fs, e->answer, strlen(e->answer));
    EXPECT(f >= 0 && formula_set_size(fs, f) == cJSON_GetObjectItemCaseSensitive(m, "complexity")->valueint);
    formula_set_destroy(&fs);
}

static void test_entries(void)
{
    family_check_questions(F, NULL, 1, 1000, check_entry);
    family_check_questions(F, "{\"min_vars\": 1, \"max_vars\": 1, \"min_statements\": 1, \"max_statements\": 1}", 2,
                           300, check_entry);
    family_check_questions(F,
                           "{\"min_vars\": 8, \"max_vars\": 11, \"min_statements\": 6, \"max_statements\": 10,"
                           " \"min_complexity\": 3, \"max_complexity\": 5}",
                           3, 300, check_entry);
}

static void test_config(void)
{
    static const char *const bad[] = {"{\"min_vars\": 0}", "{\"max_vars\": 12}",
                                      "{\"min_statements\": 3, \"max_statements\": 2}", "{\"max_complexity\": 13}",
                                      "{\"min_complexity\": 0}"};
    static const char *const field[] = {"min_vars", "max_vars", "max_statements", "max_complexity", "min_complexity"};
    family_check_bad_configs(F, bad, field, (int)(sizeof bad / sizeof bad[0]));
}

static void test_many(void) { family_check_many(F, 100000); }

static void test_fixtures(void)
{
    int a = family_check_fixtures(F, "tests/golden/tasks/variants_propositional_logic.jsonl");
    int b = family_check_fixtures(F, "tests/golden/tasks/sapo_propositional_logic.jsonl");
    int c = family_check_fixtures(F, "tests/golden/tasks/rg_propositional_logic.jsonl");
    if (a < 0 && b < 0 && c < 0) SKIP_TEST("no fixtures in tests/golden/tasks");
}

int main(void)
{
    RUN_TEST(test_reader);
    RUN_TEST(test_scores);
    RUN_TEST(test_entries);
    RUN_TEST(test_config);
    RUN_TEST(test_many);
    RUN_TEST(test_fixtures);
    CHECK_EXIT();
}
