/* The rewards of the three-stage game (issue 21, after RL Swarm): in each
 * round a model answers a question, then critiques its peers' answers,
 * then resolves the critiques into a final answer. Each stage has its own
 * form and its own reward; this module reads a completion of one stage
 * and scores it, with no sockets and no model.
 *
 * Stage by stage, the sections a completion must hold, in this order:
 *   answer:   <think> <answer>
 *   critique: <compare> <explain> <identify>
 *     (the prompt lists the top few peers as "Student #id said ...";
 *     <identify> names the id of the student whose answer is best)
 *   resolve:  <summarize_feedback> <majority> <question> <think> <answer>
 *     (the prompt lists the critiques as "Criticism #j was ...";
 *     <majority> names the id most critics identified)
 *
 * Form: the completion is the stage's sections, each <tag>content</tag>,
 * in the stage's order, with nothing but whitespace before, between and
 * after them, and each of the stage's tags (opening and closing) occurs
 * exactly once in the whole text. Content may span lines and may be
 * empty; tags are matched as written (case matters). A completion out of
 * form earns nothing at all, not only its format part: with a tag twice
 * there is no telling which section counts, and a model could hedge by
 * naming every student or every answer.
 *
 * An id is a student's number written bare: ASCII digits, at most nine of
 * them, whitespace around ("7", " 07 "; not "#7", "Student 7", "-7").
 * Answers are compared by gsm8k's number rule (task_numbers_equal): the
 * game is played on questions with a number for an answer, as RL Swarm
 * played it on GSM8K.
 *
 * Weights: 0.2 for each check of form (the sections; an <identify> that
 * names a student who was shown), 1.0 for each check of substance (a right
 * answer; a right student chosen; the critics' plurality named). Form is
 * easy to learn and should not outweigh being right: a well-formed wrong
 * completion earns a fifth of what being right adds, enough that losing
 * the form costs something even when every answer in a group is wrong.
 * Best totals: answer 1.2, critique 1.4, resolve 2.2. */
#ifndef SAPO_GAME_H
#define SAPO_GAME_H

#include <stddef.h>

#define GAME_FORMAT_WEIGHT 0.2f
#define GAME_SHOWN_WEIGHT 0.2f
#define GAME_CORRECT_WEIGHT 1.0f
#define GAME_VOTE_WEIGHT 1.0f

typedef enum { GAME_ANSWER, GAME_CRITIQUE, GAME_RESOLVE, GAME_STAGES } game_stage_t;

/* Section indices per stage, in the order the sections must come */
enum { GAME_ANSWER_THINK, GAME_ANSWER_ANSWER };
enum { GAME_CRITIQUE_COMPARE, GAME_CRITIQUE_EXPLAIN, GAME_CRITIQUE_IDENTIFY };
enum { GAME_RESOLVE_SUMMARY, GAME_RESOLVE_MAJORITY, GAME_RESOLVE_QUESTION, GAME_RESOLVE_THINK, GAME_RESOLVE_ANSWER };
#define GAME_MAX_SECTIONS 5

/* A section's content: len bytes at text, inside the completion, as
 * written (not trimmed, not NUL-terminated). */
typedef struct {
    const char *text;
    size_t len;
} game_section_t;

/* The sections of a completion of stage: the number of them, with out[]
 * filled in the stage's order; -1 when the completion is out of form (or
 * NULL, or the stage unknown). */
int game_stage_parse(game_stage_t stage, const char *completion, game_section_t out[GAME_MAX_SECTIONS]);

/* The reward of one completion, part by part; a part the stage lacks is 0.
 * total is the sum of the parts. */
typedef struct {
    float format;  /* GAME_FORMAT_WEIGHT when the completion is in form */
    float shown;   /* critique: GAME_SHOWN_WEIGHT when <identify> is a shown id */
    float correct; /* answer, resolve: <answer> equals the truth; critique:
                      the identified student's answer does; GAME_CORRECT_WEIGHT */
    float vote;    /* resolve: GAME_VOTE_WEIGHT when <majority> is in the plurality */
    float total;
} game_reward_t;

/* Stage 1. truth: the ground-truth answer, NULL for none (never right). */
game_reward_t game_reward_answer(const char *completion, const char *truth);

/* Stage 2. The students shown in the prompt: n_shown distinct ids, and
 * each one's answer (the content of its <answer>, NULL where it gave
 * none). Naming an id that was not shown earns neither shown nor correct:
 * there is no answer of its to judge. */
game_reward_t game_reward_critique(const char *completion, const int *shown_ids, const char *const *shown_answers,
                                   int n_shown, const char *truth);

/* The id a critique identifies (its vote, for the resolve stage), or -1
 * when it is out of form or its <identify> is not an id. */
int game_identified(const char *critique);

/* Stage 3. votes: the id each of n_votes critics identified, as
 * game_identified gives it; a negative one is a critic that named no
 * student and casts no vote. The plurality is every id with the most
 * votes: on a tie each tied id is a right reading of the critiques (they
 * do not say which of them is "the" majority), so <majority> naming any
 * of them earns the vote. With no vote cast there is no plurality to name
 * and the vote part is 0. */
game_reward_t game_reward_resolve(const char *completion, const int *votes, int n_votes, const char *truth);

#endif
