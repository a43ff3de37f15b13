/* The task library: the nine ReasoningGYM families of the SAPO paper and
 * two opt-in families of math word problems (gsm_symbolic, gsm8k), each a
 * seeded question generator and a rule-based scorer that gives the same
 * score as reasoning-gym's score_answer for the same question (gsm8k, which
 * reasoning-gym lacks, compares numbers by rules of its own). Three more,
 * the stages of the game (game_answer, game_critique, game_resolve; see
 * tasks/fam_game.h), are built from peers' completions rather than drawn,
 * and score whole completions.
 *
 * A question is what reasoning-gym calls a dataset entry: question text,
 * the ground-truth answer, and metadata in the same JSON shape as
 * reasoning-gym (source_dataset, source_index, the family's own fields).
 * Entries exported from reasoning-gym itself score the same way, so Python
 * and C nodes can share one pool. */
#ifndef SAPO_TASK_H
#define SAPO_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

typedef struct {
    char *question;
    char *answer;    /* NULL where the family has no single answer (None) */
    cJSON *metadata; /* owned; metadata.source_dataset names the family */
} task_question_t;

void task_question_free(task_question_t *q); /* frees the fields, not q */

typedef struct task_family {
    const char *name; /* reasoning-gym's dataset name, e.g. "basic_arithmetic" */
    /* A new JSON object with every config field and its default, as in
     * reasoning-gym's dataset config class. */
    cJSON *(*default_config)(void);
    /* Checks a complete config (every field present, as task_family_config
     * makes it); 0, or -1 with one line in err naming the field. */
    int (*validate_config)(const cJSON *config, char *err, size_t errlen);
    /* Question number index of the dataset with this config and seed; the
     * same (config, seed, index) always gives the same question. config is complete
     * and valid (from task_family_config). 0 or -1 with err. */
    int (*generate)(const cJSON *config, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen);
    /* reasoning-gym's score_answer(answer, entry) of question q; answer NULL means None.
     * Never evaluates the answer as code. NULL for a family that scores
     * only whole completions. */
    double (*score)(const char *answer, const task_question_t *q);
} task_family_t;

/* Every family, in a fixed order; task_family_count of them. */
extern const task_family_t *const task_families[];
extern const int task_family_count;

/* NULL if unknown */
const task_family_t *task_family_find(const char *name);
/* the family of a task mix key: NAME, or NAME#LABEL (one family drawn with
 * several configs, each part named apart); NULL if unknown */
const task_family_t *task_family_of_key(const char *key);

/* 1 for a family left out of the default mix (no spec) and drawn only
 * where a spec names it: the math word problems, which are not among the
 * SAPO paper's nine and one of which needs a file */
int task_family_opt_in(const task_family_t *f);

/* 1 for a family whose questions are built, never generated: the game's
 * stages, which the sampler builds from peers' completions. Such a family
 * is opt-in too, and a task mix naming it is refused. */
int task_family_built(const task_family_t *f);

/* A scorer of whole completions, for a family whose form has more than an
 * <answer> (the game's stages): the score of completion, with *formatted
 * set when it is in the family's form; -1 with err when the question's
 * metadata lacks what the scorer needs. */
typedef double (*task_completion_scorer_t)(const char *completion, const task_question_t *q, bool *formatted, char *err,
                                           size_t errlen);

/* The family's scorer of whole completions, or NULL for a family scored
 * from its <answer> alone (every family but the game's stages). It lives
 * beside the family rather than in task_family_t, whose positional
 * initializers in the families' files would each need a new field. */
task_completion_scorer_t task_family_completion_scorer(const task_family_t *f);

/* The family's defaults overlaid with the fields of user (NULL for none),
 * then validated: a new complete config, or NULL with err naming the
 * unknown or invalid field. */
cJSON *task_family_config(const task_family_t *f, const cJSON *user, char *err, size_t errlen);

/* Typed reads of a complete config for the families' validate and
 * generate: 0, or -1 with err naming the field and the type it needs. */
int task_config_int(const cJSON *config, const char *key, int64_t *out, char *err, size_t errlen);
int task_config_double(const cJSON *config, const char *key, double *out, char *err, size_t errlen);
int task_config_bool(const cJSON *config, const char *key, int *out, char *err, size_t errlen);
/* a JSON array of strings, at least one */
const cJSON *task_config_strings(const cJSON *config, const char *key, char *err, size_t errlen);

/* The metadata fields every family sets: a new object holding
 * source_dataset and source_index. */
cJSON *task_metadata_new(const char *family, uint64_t index);
/* [lo, hi] as the JSON list reasoning-gym writes for its difficulty tuples */
cJSON *task_json_pair(double lo, double hi);
/* printf into a new string */
char *task_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Score an answer to q, whose family is q's metadata.source_dataset. Returns the score,
 * or -1 with err set when the family is unknown or metadata is missing. */
double task_score_answer(const char *answer, const task_question_t *q, char *err, size_t errlen);

/* Score a whole completion of q: with the family's completion
 * scorer where it has one, else the family's score of the completion's
 * <answer> (task_extract_answer). *formatted: the completion is in the
 * family's form (for the latter, it has an answer in the tags). Returns
 * the score, or -1 with err as task_score_answer, or when the question's
 * metadata lacks what the family's scorer needs. */
double task_score_completion(const char *completion, const task_question_t *q, bool *formatted, char *err,
                             size_t errlen);

/* The content of the last <answer>...</answer> in a completion, trimmed of
 * surrounding whitespace, as reasoning-gym's extract_answer; NULL when there
 * is none. Caller frees. */
char *task_extract_answer(const char *completion);

/* reasoning-gym's default score for families that do not override it: 1.0
 * for an exact match, partial credit by substring length (in code points),
 * 0 otherwise, and 0 without a truth. */
double task_score_default(const char *answer, const char *truth);

/* gsm8k's number rule (the rules: fam_gsm8k.c's opening comment): the
 * number in s[0, n) as gsm8k's answers may write it ("1,234", "$5", "5.0",
 * surrounding whitespace), written plainly ("-1234.5", "0"), or NULL when
 * s is not one. Caller frees. */
char *task_plain_number(const char *s, size_t n);
/* 1 when a and b are both numbers by that rule and their values are
 * equal, else 0; NULL is no number. */
int task_numbers_equal(const char *a, const char *b);

/* Questions as JSON: {question, answer, metadata}, reasoning-gym's entries. */
cJSON *task_question_to_json(const task_question_t *e);
int task_question_from_json(const cJSON *obj, task_question_t *out, char *err, size_t errlen);

/* A task mix: which families the node trains on, their weights and configs. */
typedef struct task_mix task_mix_t;

/* spec: JSON {"families": {"NAME": {"weight": W, "config": {...}}, ...}}
 * or NULL for every family but the opt-in ones, with weight 1 and default
 * configs. A key NAME#LABEL is family NAME too: a family may come several
 * times under different labels (sums apart from differences, say), each
 * with its own config and its own stream of questions. */
task_mix_t *task_mix_new(const char *spec_json, uint64_t seed, char *err, size_t errlen);
void task_mix_destroy(task_mix_t **self_p);
/* Draw question number index of the mix: the family by weight, then that
 * family's question, both determined by (seed, index). */
int task_mix_draw(const task_mix_t *mix, uint64_t index, task_question_t *out, char *err, size_t errlen);

#endif
