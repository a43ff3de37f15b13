/* The game warm start's pairs (game_sft.h): each stage's target scores, on
 * the question its prompt came from and through task_score_completion, what
 * this test works out on its own from the prompt's text (the students'
 * answers, the critiques' votes); the no-peer prompts; distinct ids in
 * 0..999; the identified student and the majority drawn at random, right
 * and wrong both; the same index gives the same pair; targets short enough
 * for the tiny model; bad problems refused. */
#include "check.h"
#include "tasks/game.h"
#include "game/game_sft.h"
#include "tasks/fam_game.h"
#include "tasks/task.h"

#define PAIRS 3000

/* the default tiny mix's family, and two word problems with longer and
 * odder answers */
static const char mix_spec[] = "{\"families\": {\"basic_arithmetic\": {\"weight\": 1, \"config\": {\"min_terms\": 2, "
                               "\"max_terms\": 2, \"min_digits\": 1, \"max_digits\": 1, \"operators\": [\"+\", "
                               "\"-\"], \"allow_parentheses\": false, \"allow_negation\": false}}}}";

static task_question_t word_problem(const char *question, const char *answer)
{
    task_question_t p = {strdup(question), strdup(answer), task_metadata_new("gsm8k", 3)};
    return p;
}

/* problem number i: a basic_arithmetic question of the mix, or one of the word
 * problems; the caller frees it */
static task_question_t problem(const task_mix_t *mix, int i)
{
    char err[256];
    if (i % 3 == 1)
        return word_problem("Maya has 30 apples and buys 1,212 more. How many apples does she have? Give the final "
                            "answer as a number, without units, between <answer> and </answer>.",
                            "1242");
    if (i % 3 == 2)
        return word_problem("A tank (<question>) loses 2.5 l a day. What is its change after one day?", "-2.5");
    task_question_t e = {0};
    EXPECTF(task_mix_draw(mix, (uint64_t)i, &e, err, sizeof err) == 0, "%s", err);
    return e;
}

/* the content of s's first <tag>...</tag>, a new string, or NULL */
static char *section(const char *s, const char *tag)
{
    char open[40], close[40];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(s, open), *b = a ? strstr(a, close) : NULL;
    return b ? strndup(a + strlen(open), (size_t)(b - a - strlen(open))) : NULL;
}

/* s as a bare id (digits only), or -1 */
static int bare_id(const char *s)
{
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9) return -1;
    return atoi(s);
}

/* the value of a number as the pairs write them (with commas), by strtod */
static double value(const char *s)
{
    char plain[64];
    size_t k = 0;
    for (; *s && k < sizeof plain - 1; s++)
        if (*s != ',') plain[k++] = *s;
    plain[k] = '\0';
    return strtod(plain, NULL);
}

static double score(const char *completion, const task_question_t *e, bool *formatted)
{
    char err[256] = "";
    double r = task_score_completion(completion, e, formatted, err, sizeof err);
    EXPECTF(r >= 0, "%s", err);
    return r;
}

static void test_answer(void)
{
    char err[256];
    task_mix_t *mix = task_mix_new(mix_spec, 5, err, sizeof err);
    for (int i = 0; i < 60; i++) {
        task_question_t p = problem(mix, i), e, built;
        char *target;
        EXPECTF(game_sft_pair(&p, (uint64_t)i, GAME_ANSWER, &e, &target, err, sizeof err) == 0, "%s", err);
        EXPECT(game_answer_question(&p, (uint64_t)i, &built, err, sizeof err) == 0);
        EXPECTF(!strcmp(e.question, built.question), "the prompt is not the answer builder's: %s", e.question);
        bool formatted = false;
        double r = score(target, &e, &formatted);
        EXPECTF(fabs(r - 1.2) < 1e-6 && formatted, "[%s] on %s scores %g", target, p.answer, r);
        EXPECTF(strlen(target) < 48, "[%s] is long", target);
        free(target);
        task_question_free(&built);
        task_question_free(&e);
        task_question_free(&p);
    }
    task_mix_destroy(&mix);
}

/* the students of a critique prompt, read from its text: their ids and
 * the numbers they said; how many */
static int read_students(const char *prompt, int *ids, double *said, bool *answered)
{
    int n = 0;
    for (const char *p = prompt; (p = strstr(p, "Student #")) && n < GAME_SHOWN_MAX + 1; p++) {
        /* the form's own example ("for Student #7, write 7") says nothing */
        const char *digits = p + strlen("Student #"), *after = digits + strspn(digits, "0123456789");
        if (after == digits || strncmp(after, " said: ", 7) != 0) continue;
        ids[n] = atoi(digits);
        const char *end = strstr(p, "\n\n");
        char *text = strndup(p, end ? (size_t)(end - p) : strlen(p)), *a = section(text, "answer");
        answered[n] = a != NULL;
        said[n++] = a ? value(a) : NAN;
        free(a);
        free(text);
    }
    return n;
}

/* what a critique target that identified `id` among the shown students
 * must score: form, plus shown and right as this test reads the prompt */
static double critique_expected(int id, const int *ids, const double *said, int n, double truth, bool *right)
{
    *right = false;
    for (int i = 0; i < n; i++)
        if (ids[i] == id) {
            *right = said[i] == truth;
            return 0.2 + 0.2 + (*right ? 1.0 : 0.0);
        }
    return 0.2;
}

typedef struct {
    int by_n[GAME_SHOWN_MAX + 1]; /* prompts by students shown */
    int right, wrong;             /* identified students right and wrong */
    int first, later;             /* identified the first listed, or another */
} critique_seen_t;

static void check_critique(const task_question_t *p, int i, critique_seen_t *seen)
{
    char err[256];
    task_question_t e;
    char *target;
    if (game_sft_pair(p, (uint64_t)i, GAME_CRITIQUE, &e, &target, err, sizeof err) != 0) {
        EXPECTF(0, "pair %d: %s", i, err);
        return;
    }
    int ids[GAME_SHOWN_MAX + 1];
    double said[GAME_SHOWN_MAX + 1];
    bool answered[GAME_SHOWN_MAX + 1];
    int n = read_students(e.question, ids, said, answered);
    EXPECTF(n <= GAME_SHOWN_MAX, "%d students", n);
    seen->by_n[n < GAME_SHOWN_MAX ? n : GAME_SHOWN_MAX]++;
    for (int a = 0; a < n; a++) {
        EXPECTF(ids[a] >= 0 && ids[a] <= 999 && answered[a], "student %d of pair %d", ids[a], i);
        for (int b = 0; b < a; b++) EXPECTF(ids[a] != ids[b], "pair %d shows id %d twice", i, ids[a]);
    }
    char *identify = section(target, "identify");
    int id = bare_id(identify);
    bool right, formatted = false;
    double want = critique_expected(id, ids, said, n, value(p->answer), &right), got = score(target, &e, &formatted);
    EXPECTF(fabs(got - want) < 1e-6 && formatted, "pair %d: [%s] scores %g, want %g", i, target, got, want);
    if (n == 0) EXPECTF(identify && !*identify && strstr(e.question, "No other student"), "pair %d: [%s]", i, target);
    else {
        EXPECTF(id >= 0 && want >= 0.4 - 1e-6, "pair %d identifies no shown student: [%s]", i, target);
        *(right ? &seen->right : &seen->wrong) += 1;
        *(id == ids[0] ? &seen->first : &seen->later) += n > 1;
    }
    /* one-digit answers (the default mix) within max-new-tokens 96 */
    size_t most = strlen(p->answer) == 1 ? 96 : 110;
    EXPECTF(strlen(target) < most, "pair %d: [%s] is %zu bytes", i, target, strlen(target));
    free(identify);
    free(target);
    task_question_free(&e);
}

static void test_critique(void)
{
    char err[256];
    task_mix_t *mix = task_mix_new(mix_spec, 5, err, sizeof err);
    critique_seen_t seen = {0};
    for (int i = 0; i < PAIRS; i++) {
        task_question_t p = problem(mix, i);
        check_critique(&p, i, &seen);
        task_question_free(&p);
    }
    for (int n = 0; n <= GAME_SHOWN_MAX; n++)
        EXPECTF(seen.by_n[n] > PAIRS / 12, "%d students in %d prompts", n, seen.by_n[n]);
    /* chosen at random: right and wrong students both, and not the first
     * listed only */
    EXPECTF(seen.right > PAIRS / 5 && seen.wrong > PAIRS / 5, "right %d, wrong %d", seen.right, seen.wrong);
    EXPECTF(seen.first > PAIRS / 10 && seen.later > PAIRS / 5, "first %d, later %d", seen.first, seen.later);
    task_mix_destroy(&mix);
}

/* the votes of a resolve prompt, read from its critiques' text */
static int read_votes(const char *prompt, int *votes)
{
    int k = 0;
    for (const char *p = prompt; (p = strstr(p, "Criticism #")) && k < GAME_CRITIQUES_MAX + 1; p++) {
        const char *end = strstr(p, "\n\n");
        char *text = strndup(p, end ? (size_t)(end - p) : strlen(p)), *id = section(text, "identify");
        votes[k++] = bare_id(id);
        free(id);
        free(text);
    }
    return k;
}

/* 1 when id has as many votes as any id */
static int plurality(int id, const int *votes, int k)
{
    int mine = 0, most = 0;
    for (int i = 0; i < k; i++) {
        int c = 0;
        for (int j = 0; j < k; j++) c += votes[j] == votes[i];
        most = c > most ? c : most;
        mine += votes[i] == id;
    }
    return mine > 0 && mine == most;
}

typedef struct {
    int by_k[GAME_CRITIQUES_MAX + 1]; /* prompts by critiques shown */
    int hit, miss;                    /* majorities in the plurality, or not */
    int first, later;                 /* majorities the first critique's vote, or only a later one's */
} resolve_seen_t;

static void check_resolve(const task_question_t *p, int i, resolve_seen_t *seen)
{
    char err[256];
    task_question_t e;
    char *target;
    if (game_sft_pair(p, (uint64_t)i, GAME_RESOLVE, &e, &target, err, sizeof err) != 0) {
        EXPECTF(0, "pair %d: %s", i, err);
        return;
    }
    int votes[GAME_CRITIQUES_MAX + 1];
    int k = read_votes(e.question, votes);
    EXPECTF(k <= GAME_CRITIQUES_MAX, "%d critiques", k);
    seen->by_k[k < GAME_CRITIQUES_MAX ? k : GAME_CRITIQUES_MAX]++;
    char *majority = section(target, "majority");
    int id = bare_id(majority), voted = 0;
    for (int j = 0; j < k; j++) {
        EXPECTF(votes[j] >= 0 && votes[j] <= 999, "pair %d: critique %d casts no vote", i, j);
        voted |= votes[j] == id;
    }
    int hit = plurality(id, votes, k);
    double want = 0.2 + 1.0 + (hit ? 1.0 : 0.0);
    bool formatted = false;
    double got = score(target, &e, &formatted);
    EXPECTF(fabs(got - want) < 1e-6 && formatted, "pair %d: [%s] scores %g, want %g", i, target, got, want);
    if (k == 0) EXPECTF(majority && !*majority && strstr(e.question, "No criticism"), "pair %d: [%s]", i, target);
    else {
        EXPECTF(voted, "pair %d: majority %s is no critique's vote", i, majority);
        *(hit ? &seen->hit : &seen->miss) += 1;
        *(id == votes[0] ? &seen->first : &seen->later) += 1;
    }
    EXPECTF(strlen(target) < 200, "pair %d: [%s] is %zu bytes", i, target, strlen(target));
    free(majority);
    free(target);
    task_question_free(&e);
}

static void test_resolve(void)
{
    char err[256];
    task_mix_t *mix = task_mix_new(mix_spec, 5, err, sizeof err);
    resolve_seen_t seen = {0};
    for (int i = 0; i < PAIRS; i++) {
        task_question_t p = problem(mix, i);
        check_resolve(&p, i, &seen);
        task_question_free(&p);
    }
    for (int k = 0; k <= GAME_CRITIQUES_MAX; k++)
        EXPECTF(seen.by_k[k] > PAIRS / 12, "%d critiques in %d prompts", k, seen.by_k[k]);
    EXPECTF(seen.hit > PAIRS / 5 && seen.miss > PAIRS / 20, "in the plurality %d, not %d", seen.hit, seen.miss);
    /* a critique chosen at random, not the first listed */
    EXPECTF(seen.first > PAIRS / 5 && seen.later > PAIRS / 10, "first %d, later %d", seen.first, seen.later);
    task_mix_destroy(&mix);
}

/* one pair as text: prompt, metadata and target */
static char *pair_text(const task_question_t *p, uint64_t index, game_stage_t stage)
{
    char err[256];
    task_question_t e;
    char *target;
    EXPECTF(game_sft_pair(p, index, stage, &e, &target, err, sizeof err) == 0, "%s", err);
    char *meta = cJSON_PrintUnformatted(e.metadata);
    char *all = task_strdupf("%s|%s|%s", e.question, meta, target);
    free(meta);
    free(target);
    task_question_free(&e);
    return all;
}

static void test_deterministic(void)
{
    task_question_t p = word_problem("What is 6 times 7?", "42");
    for (int stage = 0; stage < GAME_STAGES; stage++) {
        int differ = 0;
        for (uint64_t i = 0; i < 20; i++) {
            char *a = pair_text(&p, i, (game_stage_t)stage), *b = pair_text(&p, i, (game_stage_t)stage);
            char *c = pair_text(&p, i + 1, (game_stage_t)stage);
            EXPECTF(!strcmp(a, b), "stage %d index %llu twice: %s vs %s", stage, (unsigned long long)i, a, b);
            differ += strcmp(a, c) != 0;
            free(a), free(b), free(c);
        }
        EXPECTF(differ > 10, "stage %d: index changes %d pairs of 20", stage, differ);
    }
    task_question_free(&p);
}

static void test_refused(void)
{
    char err[256] = "";
    task_question_t e;
    char *target = (char *)"unset";
    task_question_t words = word_problem("Name a colour.", "blue"), none = {strdup("What is 1 + 1?"), NULL, NULL};
    for (int stage = 0; stage < GAME_STAGES; stage++) {
        err[0] = '\0';
        EXPECT(game_sft_pair(&words, 1, (game_stage_t)stage, &e, &target, err, sizeof err) == -1);
        EXPECTF(strstr(err, "no number") && !target && !e.question, "stage %d: %s", stage, err);
        EXPECT(game_sft_pair(&none, 1, (game_stage_t)stage, &e, &target, err, sizeof err) == -1 && !target);
    }
    task_question_t fine = word_problem("What is 6 times 7?", "42");
    EXPECT(game_sft_pair(&fine, 1, GAME_STAGES, &e, &target, err, sizeof err) == -1 && strstr(err, "stage"));
    task_question_free(&fine);
    task_question_free(&words);
    task_question_free(&none);
}

int main(void)
{
    RUN_TEST(test_answer);
    RUN_TEST(test_critique);
    RUN_TEST(test_resolve);
    RUN_TEST(test_deterministic);
    RUN_TEST(test_refused);
    CHECK_EXIT();
}
