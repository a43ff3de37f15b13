/* The game's stages as tasks: the builders of their questions, and the three
 * families that score them with the stage rewards of game.c. */
#include "tasks/fam_game.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/game.h"

static const char cut_mark[] = " [cut]";

/* At most max bytes of s, cut on a UTF-8 boundary and marked when cut: a
 * new string. A well-formed sequence is at most four bytes, so backing up
 * over three continuation bytes at most reaches its lead; on malformed
 * text the cut falls where it falls. */
static char *cut_text(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) return strdup(s);
    size_t k = max;
    for (int i = 0; i < 3 && k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80; i++) k--;
    char *out = malloc(k + sizeof cut_mark);
    memcpy(out, s, k);
    memcpy(out + k, cut_mark, sizeof cut_mark);
    return out;
}

/* The question less a last sentence that names the <answer> tags (see
 * fam_game.h): one holding the last <answer>, with its </answer> followed
 * only by full stops and whitespace. A sentence starts after ". ", "? ",
 * "! " or a line break. The whole question where no such sentence ends it
 * or nothing would be left: a new string. */
static char *bare_question(const char *q)
{
    const char *tag = NULL, *close;
    for (const char *p = q; (p = strstr(p, "<answer>")); p++) tag = p;
    if (!tag || !(close = strstr(tag, "</answer>"))) return strdup(q);
    close += strlen("</answer>");
    if (close[strspn(close, ". \t\r\n")]) return strdup(q);
    const char *start = tag;
    while (start > q && start[-1] != '\n' && !(start - q >= 2 && start[-1] == ' ' && strchr(".?!", start[-2]))) start--;
    while (start > q && strchr(" \t\r\n", start[-1])) start--;
    return start == q ? strdup(q) : strndup(q, (size_t)(start - q));
}

static int check_problem(const task_question_t *problem, char *err, size_t errlen)
{
    if (!problem || !problem->question) {
        snprintf(err, errlen, "game: the problem has no question");
        return -1;
    }
    if (!task_numbers_equal(problem->answer, problem->answer)) {
        snprintf(err, errlen, "game: the problem's answer %s is no number (the game needs a number for an answer)",
                 problem->answer ? problem->answer : "(none)");
        return -1;
    }
    return 0;
}

static cJSON *stage_metadata(const char *family, const task_question_t *problem, uint64_t round)
{
    cJSON *m = task_metadata_new(family, round);
    cJSON *p = cJSON_AddObjectToObject(m, "problem");
    static const char *const keys[] = {"source_dataset", "source_index"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(problem->metadata, keys[i]);
        if (v) cJSON_AddItemToObject(p, keys[i], cJSON_Duplicate(v, 1));
    }
    return m;
}

/* The question's fields once its prompt is written; takes prompt */
static void question_set(task_question_t *out, const char *family, const task_question_t *problem, uint64_t round,
                         char *prompt)
{
    out->question = prompt;
    out->answer = strdup(problem->answer);
    out->metadata = stage_metadata(family, problem, round);
}

int game_answer_question(const task_question_t *problem, uint64_t round, task_question_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_problem(problem, err, errlen) != 0) return -1;
    char *q = bare_question(problem->question);
    char *prompt = task_strdupf("%s\n\nReply in two parts and nothing else: between <think> and </think>, your "
                                "reasoning; between <answer> and </answer>, only the final answer as a number, "
                                "without units.",
                                q);
    free(q);
    question_set(out, "game_answer", problem, round, prompt);
    return 0;
}

static int by_reward(const void *a, const void *b)
{
    const game_student_t *x = a, *y = b;
    int xn = isnan(x->reward), yn = isnan(y->reward);
    if (xn != yn) return xn - yn;
    if (!xn && x->reward != y->reward) return x->reward > y->reward ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_id(const void *a, const void *b)
{
    const game_student_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The content of the <answer> of a completion in the answer stage's form,
 * trimmed, or NULL: a new string */
static char *student_answer(const char *completion)
{
    game_section_t s[GAME_MAX_SECTIONS];
    if (game_stage_parse(GAME_ANSWER, completion, s) < 0) return NULL;
    const char *p = s[GAME_ANSWER_ANSWER].text, *end = p + s[GAME_ANSWER_ANSWER].len;
    while (p < end && strchr(" \t\r\n\f\v", *p)) p++;
    while (end > p && strchr(" \t\r\n\f\v", end[-1])) end--;
    return strndup(p, (size_t)(end - p));
}

static const char critique_form[] =
    "Reply in three parts and nothing else: between <compare> and </compare>, where the students' answers and "
    "reasoning differ; between <explain> and </explain>, which reasoning holds and why; between <identify> and "
    "</identify>, only the number of the student whose answer is best (for Student #7, write 7).";

static const char critique_alone[] =
    "No other student's answer reached you this round, so there is no one to choose. Reply in the same three parts "
    "all the same: between <compare> and </compare> and between <explain> and </explain>, work out what a right "
    "solution to the question needs; leave <identify></identify> empty.";

int game_critique_question(const task_question_t *problem, uint64_t round, const game_student_t *students, int n,
                           task_question_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_problem(problem, err, errlen) != 0) return -1;
    if (n < 0 || (n > 0 && !students)) {
        snprintf(err, errlen, "game critique: %d students", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const game_student_t *s = &students[i];
        const char *bad = s->id < 0 || s->id > GAME_ID_MAX ? "has an id outside 0 to 999999999"
                          : !s->completion                 ? "has no completion"
                                                           : NULL;
        for (int j = 0; !bad && j < i; j++)
            if (students[j].id == s->id) bad = "has the id of another";
        if (bad) {
            snprintf(err, errlen, "game critique: student %d (id %d) %s", i, s->id, bad);
            return -1;
        }
    }
    game_student_t *top = malloc(sizeof *top * (size_t)(n ? n : 1));
    if (n) memcpy(top, students, sizeof *top * (size_t)n);
    qsort(top, (size_t)n, sizeof *top, by_reward);
    int k = n < GAME_SHOWN_MAX ? n : GAME_SHOWN_MAX;
    qsort(top, (size_t)k, sizeof *top, by_id);

    char *q = bare_question(problem->question), *prompt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&prompt, &len);
    fprintf(f, "Students were asked this question:\n\n%s\n\n", q);
    cJSON *shown = cJSON_CreateArray();
    for (int i = 0; i < k; i++) {
        char *text = cut_text(top[i].completion, GAME_PEER_TEXT_MAX), *answer = student_answer(text);
        fprintf(f, "Student #%d said: %s\n\n", top[i].id, text);
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "id", top[i].id);
        cJSON_AddItemToObject(s, "answer", answer ? cJSON_CreateString(answer) : cJSON_CreateNull());
        cJSON_AddItemToArray(shown, s);
        free(answer);
        free(text);
    }
    fputs(k ? critique_form : critique_alone, f);
    fclose(f);
    free(q);
    free(top);
    question_set(out, "game_critique", problem, round, prompt);
    cJSON_AddItemToObject(out->metadata, "shown", shown);
    return 0;
}

static const char resolve_form[] =
    "Reply in five parts and nothing else: between <summarize_feedback> and </summarize_feedback>, what the "
    "critics said, in brief; between <majority> and </majority>, only the number of the student most critics "
    "named; between <question> and </question>, the question in your own words; between <think> and </think>, "
    "your reasoning; between <answer> and </answer>, only the final answer as a number, without units.";

int game_resolve_question(const task_question_t *problem, uint64_t round, const char *const *critiques, int n,
                          task_question_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (check_problem(problem, err, errlen) != 0) return -1;
    if (n < 0 || (n > 0 && !critiques)) {
        snprintf(err, errlen, "game resolve: %d critiques", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!critiques[i]) {
            snprintf(err, errlen, "game resolve: critique %d is NULL", i);
            return -1;
        }
    int k = n < GAME_CRITIQUES_MAX ? n : GAME_CRITIQUES_MAX;

    char *q = bare_question(problem->question), *prompt = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&prompt, &len);
    fprintf(f, "Students were asked this question:\n\n%s\n\n", q);
    if (k) fputs("Critics compared the students' answers, and each named the student they judged best.\n\n", f);
    else
        fputs("No criticism of the students' answers reached you this round: leave <majority></majority> empty "
              "and solve the question yourself.\n\n",
              f);
    cJSON *votes = cJSON_CreateArray();
    for (int i = 0; i < k; i++) {
        char *text = cut_text(critiques[i], GAME_PEER_TEXT_MAX);
        fprintf(f, "Criticism #%d was: %s\n\n", i + 1, text);
        cJSON_AddItemToArray(votes, cJSON_CreateNumber(game_identified(text)));
        free(text);
    }
    fputs(resolve_form, f);
    fclose(f);
    free(q);
    question_set(out, "game_resolve", problem, round, prompt);
    cJSON_AddItemToObject(out->metadata, "votes", votes);
    return 0;
}

/* The families. Their questions come from the builders above, so there is no
 * config and generate only says where questions come from; no score of an
 * answer alone, but a scorer of whole completions each (families.c lists them
 * as task_completion_<family>). */

static cJSON *no_config(void) { return cJSON_CreateObject(); }

static int no_fields(const cJSON *config, char *err, size_t errlen)
{
    (void)config, (void)err, (void)errlen;
    return 0;
}

static int generate_built(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    (void)c, (void)seed, (void)index, (void)out;
    snprintf(err, errlen, "the game's stages are built by the sampler from peers' completions, never generated");
    return -1;
}

/* an integer JSON number in [lo, hi] */
static int json_int(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo && v->valuedouble <= hi;
}

double task_completion_game_answer(const char *completion, const task_question_t *e, bool *formatted, char *err,
                                   size_t errlen)
{
    (void)err, (void)errlen;
    game_reward_t r = game_reward_answer(completion, e->answer);
    *formatted = r.format > 0;
    return r.total;
}

double task_completion_game_critique(const char *completion, const task_question_t *e, bool *formatted, char *err,
                                     size_t errlen)
{
    const cJSON *shown = cJSON_GetObjectItemCaseSensitive(e->metadata, "shown");
    if (!cJSON_IsArray(shown)) {
        snprintf(err, errlen, "game_critique: metadata.shown is missing or not an array");
        return -1;
    }
    int n = cJSON_GetArraySize(shown), i = 0;
    if (n > GAME_SHOWN_MAX) {
        snprintf(err, errlen, "game_critique: metadata.shown lists %d students, more than a prompt shows (%d)", n,
                 GAME_SHOWN_MAX);
        return -1;
    }
    int *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    const char **answers = malloc(sizeof *answers * (size_t)(n ? n : 1));
    const cJSON *s;
    cJSON_ArrayForEach(s, shown)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(s, "id");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, "answer");
        if (!cJSON_IsObject(s) || !json_int(id, 0, GAME_ID_MAX) || !(cJSON_IsString(a) || cJSON_IsNull(a))) {
            snprintf(err, errlen,
                     "game_critique: metadata.shown[%d] is not {\"id\": 0 to 999999999, \"answer\": string or null}",
                     i);
            free(ids);
            free(answers);
            return -1;
        }
        ids[i] = (int)id->valuedouble;
        answers[i++] = cJSON_IsString(a) ? a->valuestring : NULL;
    }
    game_reward_t r = game_reward_critique(completion, ids, answers, n, e->answer);
    free(ids);
    free(answers);
    *formatted = r.format > 0;
    return r.total;
}

double task_completion_game_resolve(const char *completion, const task_question_t *e, bool *formatted, char *err,
                                    size_t errlen)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(e->metadata, "votes");
    if (!cJSON_IsArray(list)) {
        snprintf(err, errlen, "game_resolve: metadata.votes is missing or not an array");
        return -1;
    }
    int n = cJSON_GetArraySize(list), i = 0;
    /* game_reward_resolve counts votes pairwise: a peer's long list must
     * not cost the verifier more than a prompt's worth */
    if (n > GAME_CRITIQUES_MAX) {
        snprintf(err, errlen, "game_resolve: metadata.votes lists %d votes, more than a prompt shows (%d)", n,
                 GAME_CRITIQUES_MAX);
        return -1;
    }
    int *votes = malloc(sizeof *votes * (size_t)(n ? n : 1));
    const cJSON *v;
    cJSON_ArrayForEach(v, list)
    {
        if (!json_int(v, -GAME_ID_MAX, GAME_ID_MAX)) {
            snprintf(err, errlen, "game_resolve: metadata.votes[%d] is not an integer from -999999999 to 999999999", i);
            free(votes);
            return -1;
        }
        votes[i++] = (int)v->valuedouble;
    }
    game_reward_t r = game_reward_resolve(completion, votes, n, e->answer);
    free(votes);
    *formatted = r.format > 0;
    return r.total;
}

#define GAME_FAMILY(family)                      \
    const task_family_t task_family_##family = { \
        .name = #family,                         \
        .default_config = no_config,             \
        .validate_config = no_fields,            \
        .generate = generate_built,              \
    };
GAME_FAMILY(game_answer)
GAME_FAMILY(game_critique)
GAME_FAMILY(game_resolve)
