/* Supervised pairs in the forms of the game's stages: synthetic peers, the
 * stages' real prompts, and short targets in form (game_sft.h). */
#include "game/game_sft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/fam_game.h"
#include "util/splitmix.h"

#define STUDENT_IDS 1000   /* game_student_id's range */
#define RESOLVE_STUDENTS 3 /* students the critiques of a resolve prompt vote among */
#define RESTATEMENT_MAX 40 /* bytes of the question a resolve target restates */
#define NUMBER_MAX 64

/* a draw in 0..n-1 from the pair's stream */
static int below(uint64_t *rng, int n) { return (int)(splitmix64(rng) % (uint64_t)n); }

/* A number the truth is not, near it so that wrong students agree with
 * each other now and then, as peers' wrong answers do: truth +-1 to 3. */
static void wrong_number(const char *truth, uint64_t *rng, char out[NUMBER_MAX])
{
    char plain[NUMBER_MAX];
    size_t k = 0;
    for (const char *p = truth; *p && k < sizeof plain - 1; p++)
        if (!strchr(",$ \t\r\n", *p)) plain[k++] = *p;
    plain[k] = '\0';
    double v = strtod(plain, NULL);
    int d = 1 + below(rng, 3);
    snprintf(out, NUMBER_MAX, "%.15g", below(rng, 2) ? v + d : v - d);
    /* past 2^53 a small step is lost in rounding */
    if (task_numbers_equal(out, truth)) snprintf(out, NUMBER_MAX, "%.15g", v * 2 + 1);
}

/* a completion in the answer stage's form */
static char *answer_form(const char *number)
{
    return task_strdupf("<think>%s</think>\n<answer>%s</answer>", number, number);
}

/* n students with distinct ids, in increasing order (the order a critique
 * prompt lists them in when their rewards are equal), each saying the
 * truth or a wrong number at even odds */
static void draw_students(uint64_t *rng, int n, const char *truth, int *ids, char (*said)[NUMBER_MAX])
{
    for (int i = 0; i < n; i++) {
        int id, taken;
        do {
            id = below(rng, STUDENT_IDS);
            taken = 0;
            for (int j = 0; j < i; j++) taken |= ids[j] == id;
        } while (taken);
        int k = i;
        for (; k > 0 && ids[k - 1] > id; k--) ids[k] = ids[k - 1];
        ids[k] = id;
    }
    for (int i = 0; i < n; i++) {
        if (below(rng, 2)) snprintf(said[i], NUMBER_MAX, "%s", truth);
        else wrong_number(truth, rng, said[i]);
    }
}

/* A critique of n students naming student `chosen`: <compare> the distinct
 * answers in the order shown (the ids behind them would double its length,
 * past what the tiny model writes), <explain> the chosen one's. With no
 * student, the empty <identify> the prompt asks for. */
static char *critique_form(const int *ids, char (*said)[NUMBER_MAX], int n, int chosen, const char *truth)
{
    if (n == 0)
        return task_strdupf("<compare>no peers</compare>\n<explain>it is %s</explain>\n<identify></identify>", truth);
    char compare[GAME_SHOWN_MAX * (NUMBER_MAX + 4)] = "";
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= !strcmp(said[j], said[i]);
        if (seen) continue;
        if (compare[0]) strcat(compare, ", ");
        strcat(compare, said[i]);
    }
    return task_strdupf("<compare>%s</compare>\n<explain>#%d says %s</explain>\n<identify>%d</identify>", compare,
                        ids[chosen], said[chosen], ids[chosen]);
}

static int answer_pair(const task_question_t *problem, uint64_t index, task_question_t *out, char **target, char *err,
                       size_t errlen)
{
    if (game_answer_question(problem, index, out, err, errlen) != 0) return -1;
    *target = answer_form(problem->answer);
    return 0;
}

static int critique_pair(const task_question_t *problem, uint64_t index, uint64_t *rng, task_question_t *out,
                         char **target, char *err, size_t errlen)
{
    int n = below(rng, GAME_SHOWN_MAX + 1), ids[GAME_SHOWN_MAX];
    char said[GAME_SHOWN_MAX][NUMBER_MAX];
    game_student_t students[GAME_SHOWN_MAX];
    draw_students(rng, n, problem->answer, ids, said);
    for (int i = 0; i < n; i++) students[i] = (game_student_t){ids[i], answer_form(said[i]), 0.0};
    int rc = game_critique_question(problem, index, students, n, out, err, errlen);
    for (int i = 0; i < n; i++) free((char *)students[i].completion);
    if (rc != 0) return -1;
    *target = critique_form(ids, said, n, n ? below(rng, n) : 0, problem->answer);
    return 0;
}

/* The question's first sentence, at most RESTATEMENT_MAX bytes cut on a
 * UTF-8 boundary, with '<' and '>' made spaces: a tag in it would put the
 * target out of form. */
static void restatement(const char *question, char out[RESTATEMENT_MAX + 1])
{
    size_t n = 0;
    while (question[n] && question[n] != '\n' && n < RESTATEMENT_MAX) {
        if (n > 0 && question[n] == ' ' && strchr(".?!", question[n - 1])) break;
        n++;
    }
    if (n == RESTATEMENT_MAX)
        while (n > 0 && ((unsigned char)question[n] & 0xC0) == 0x80) n--;
    for (size_t i = 0; i < n; i++) out[i] = strchr("<>", question[i]) ? ' ' : question[i];
    out[n] = '\0';
}

/* the votes of the critiques, as <summarize_feedback> lists them */
static void summary(const int *votes, int k, char *out, size_t outlen)
{
    size_t len = (size_t)snprintf(out, outlen, "%s", k ? "votes:" : "no critiques");
    for (int i = 0; i < k && len < outlen; i++) len += (size_t)snprintf(out + len, outlen - len, " %d", votes[i]);
}

static int resolve_pair(const task_question_t *problem, uint64_t index, uint64_t *rng, task_question_t *out,
                        char **target, char *err, size_t errlen)
{
    int m = 1 + below(rng, RESOLVE_STUDENTS), ids[RESOLVE_STUDENTS];
    char said[RESOLVE_STUDENTS][NUMBER_MAX];
    draw_students(rng, m, problem->answer, ids, said);
    int k = below(rng, GAME_CRITIQUES_MAX + 1), votes[GAME_CRITIQUES_MAX];
    char *critiques[GAME_CRITIQUES_MAX];
    for (int j = 0; j < k; j++) {
        int chosen = below(rng, m);
        votes[j] = ids[chosen];
        critiques[j] = critique_form(ids, said, m, chosen, problem->answer);
    }
    int rc = game_resolve_question(problem, index, (const char *const *)critiques, k, out, err, errlen);
    for (int j = 0; j < k; j++) free(critiques[j]);
    if (rc != 0) return -1;
    char majority[16] = "", feedback[16 + GAME_CRITIQUES_MAX * 12], question[RESTATEMENT_MAX + 1];
    if (k) snprintf(majority, sizeof majority, "%d", votes[below(rng, k)]);
    summary(votes, k, feedback, sizeof feedback);
    restatement(problem->question, question);
    *target = task_strdupf("<summarize_feedback>%s</summarize_feedback>\n<majority>%s</majority>\n<question>%s"
                           "</question>\n<think>%s</think>\n<answer>%s</answer>",
                           feedback, majority, question, problem->answer, problem->answer);
    return 0;
}

int game_sft_pair(const task_question_t *problem, uint64_t index, game_stage_t stage, task_question_t *out,
                  char **target, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    *target = NULL;
    /* the synthetic peers read the answer before a stage's builder checks
     * the problem: a bad one fails here, with the answer builder's words */
    if (!problem || !problem->question || !task_numbers_equal(problem->answer, problem->answer))
        return game_answer_question(problem, index, out, err, errlen);
    /* one stream per (index, stage): the stages of one index draw apart */
    uint64_t rng = index * GAME_STAGES + (uint64_t)stage;
    switch (stage) {
    case GAME_ANSWER: return answer_pair(problem, index, out, target, err, errlen);
    case GAME_CRITIQUE: return critique_pair(problem, index, &rng, out, target, err, errlen);
    case GAME_RESOLVE: return resolve_pair(problem, index, &rng, out, target, err, errlen);
    default: snprintf(err, errlen, "game warm start: unknown stage %d", (int)stage); return -1;
    }
}
