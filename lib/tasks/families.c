/* The family registry: which families there are (TASK_FAMILIES), which
 * are opt-in or built, each by name, and a question scored by its
 * family. */
#include "tasks/task.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line per family: fam_<name>.c defines task_family_<name>. Families
 * listed with O are opt-in (task_family_opt_in). Those listed with B, the
 * game's stages, are built and opt-in (task_family_built) and scored as
 * whole completions: tasks/fam_game.c defines task_family_<name> and its
 * completion scorer task_completion_<name>. */
#define TASK_FAMILIES(X, O, B) \
    X(base_conversion)         \
    X(basic_arithmetic)        \
    X(fraction_simplification) \
    X(decimal_arithmetic)      \
    X(calendar_arithmetic)     \
    X(binary_matrix)           \
    X(arc_1d)                  \
    X(bf)                      \
    X(propositional_logic)     \
    O(gsm_symbolic)            \
    O(gsm8k)                   \
    B(game_answer)             \
    B(game_critique)           \
    B(game_resolve)

#define DECLARE(name) extern const task_family_t task_family_##name;
#define DECLARE_BUILT(name) \
    DECLARE(name)           \
    double task_completion_##name(const char *, const task_question_t *, bool *, char *, size_t);
TASK_FAMILIES(DECLARE, DECLARE, DECLARE_BUILT)
#define LIST(name) &task_family_##name,
#define SKIP(name)
const task_family_t *const task_families[] = {TASK_FAMILIES(LIST, LIST, LIST) NULL};
const int task_family_count = (int)(sizeof task_families / sizeof task_families[0]) - 1;
static const task_family_t *const opt_in_families[] = {TASK_FAMILIES(SKIP, LIST, LIST) NULL};
static const task_family_t *const built_families[] = {TASK_FAMILIES(SKIP, SKIP, LIST) NULL};
#define SCORER(name) {&task_family_##name, task_completion_##name},
static const struct {
    const task_family_t *family;
    task_completion_scorer_t score;
} completion_scorers[] = {TASK_FAMILIES(SKIP, SKIP, SCORER){NULL, NULL}};

static int listed(const task_family_t *const *list, const task_family_t *f)
{
    for (int i = 0; list[i]; i++)
        if (list[i] == f) return 1;
    return 0;
}

int task_family_opt_in(const task_family_t *f) { return listed(opt_in_families, f); }

int task_family_built(const task_family_t *f) { return listed(built_families, f); }

task_completion_scorer_t task_family_completion_scorer(const task_family_t *f)
{
    for (int i = 0; completion_scorers[i].family; i++)
        if (completion_scorers[i].family == f) return completion_scorers[i].score;
    return NULL;
}

const task_family_t *task_family_find(const char *name)
{
    for (int i = 0; i < task_family_count; i++)
        if (strcmp(task_families[i]->name, name) == 0) return task_families[i];
    return NULL;
}

const task_family_t *task_family_of_key(const char *key)
{
    const char *hash = strchr(key, '#');
    size_t n = hash ? (size_t)(hash - key) : strlen(key);
    for (int i = 0; i < task_family_count; i++)
        if (strlen(task_families[i]->name) == n && strncmp(task_families[i]->name, key, n) == 0)
            return task_families[i];
    return NULL;
}

/* The family of a question, metadata.source_dataset; NULL with err */
static const task_family_t *question_family(const task_question_t *q, char *err, size_t errlen)
{
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(q->metadata, "source_dataset");
    if (!cJSON_IsString(ds)) {
        snprintf(err, errlen, "metadata.source_dataset is missing or not a string");
        return NULL;
    }
    const task_family_t *f = task_family_find(ds->valuestring);
    if (!f) snprintf(err, errlen, "unknown family %s", ds->valuestring);
    return f;
}

double task_score_answer(const char *answer, const task_question_t *q, char *err, size_t errlen)
{
    const task_family_t *f = question_family(q, err, errlen);
    if (!f) return -1;
    if (!f->score) {
        snprintf(err, errlen, "family %s scores whole completions, not answers", f->name);
        return -1;
    }
    return f->score(answer, q);
}

double task_score_completion(const char *completion, const task_question_t *q, bool *formatted, char *err,
                             size_t errlen)
{
    *formatted = false;
    const task_family_t *f = question_family(q, err, errlen);
    if (!f) return -1;
    task_completion_scorer_t whole = task_family_completion_scorer(f);
    if (whole) return whole(completion, q, formatted, err, errlen);
    char *answer = task_extract_answer(completion);
    double s = f->score(answer, q);
    *formatted = answer != NULL;
    free(answer);
    return s;
}
