/* The game's stages as tasks (issue 21): each stage of a round is a question
 * of a family of its own (game_answer, game_critique, game_resolve) whose
 * text is the stage's prompt and whose scorer is the stage's reward
 * (game.h), so the generator and the learner handle a stage as they handle
 * any task. The sampler builds a round's stage questions from the round's
 * problem, a question drawn from a math word family (gsm_symbolic, gsm8k),
 * and, for stages 2 and 3, from the completions of the stage before as
 * its peers wrote them; the families
 * never generate a question, and a task mix cannot name them
 * (task_family_built). They are reached through task.h like any family:
 * task_family_find, and task_score_completion for their scores (their
 * scorers, task_completion_game_*, are listed in families.c).
 *
 * Every stage question's answer is the problem's answer, the truth the stage's
 * reward compares with. Its metadata, in reasoning-gym's shape:
 *   source_dataset  the stage's family
 *   source_index    the round
 *   problem         the problem's own source_dataset and source_index
 *                   (those it has), to trace the stage's question to the problem
 *   shown           critique: the students the prompt lists, in its order,
 *                   each {"id": int, "answer": string or null}
 *   votes           resolve: the id each critique the prompt lists
 *                   identified (game_identified), in its order; a negative
 *                   one is a critique that named no student
 * The scorers refuse (-1) metadata of another shape, or with more students
 * or votes than a prompt lists: a peer's record carries it, and the
 * verifier drops such a record rather than guess.
 *
 * Peers' text is untrusted: a prompt embeds at most GAME_PEER_TEXT_MAX
 * bytes of each completion, cut on a UTF-8 boundary (never inside a
 * well-formed multi-byte sequence) and followed by " [cut]" when cut, and
 * at most GAME_SHOWN_MAX students or GAME_CRITIQUES_MAX critiques, so a
 * prompt holds at most about 11 KB besides the question, whatever peers
 * send. Each check of the
 * reward reads the text as the prompt shows it: a student's answer is the
 * <answer> of its completion as shown, and a critique's vote is read from
 * the critique as shown. A cut completion has lost its closing tags, so it
 * is out of form: the student gave no answer, the critic cast no vote.
 * What the model is scored against is what it was shown.
 *
 * The problem's question text is embedded whole (it is the node's own),
 * less a last sentence naming the <answer> tags, as the gsm families end
 * their questions: each stage states its own form, and a critique told to
 * answer between <answer> tags would fall out of its own. */
#ifndef SAPO_FAM_GAME_H
#define SAPO_FAM_GAME_H

#include <stdint.h>

#include "tasks/task.h"

#define GAME_SHOWN_MAX 5        /* students a critique prompt lists */
#define GAME_CRITIQUES_MAX 5    /* critiques a resolve prompt lists */
#define GAME_PEER_TEXT_MAX 2000 /* bytes of one peer's completion a prompt embeds */
#define GAME_ID_MAX 999999999   /* the largest id game.h reads (nine digits) */

/* One stage-1 completion offered to the critique stage */
typedef struct {
    int id;                 /* the student's number, 0 to GAME_ID_MAX, distinct */
    const char *completion; /* its stage-1 completion, whole */
    double reward;          /* its stage-1 reward */
} game_student_t;

/* Stage 1 of problem (a question with a number for an answer) in round:
 * the question and the answer stage's form. 0, or -1 with err (the
 * problem has no question, or its answer is no number); the caller frees
 * out with task_question_free. */
int game_answer_question(const task_question_t *problem, uint64_t round, task_question_t *out, char *err,
                         size_t errlen);

/* Stage 2: the question, the students shown, and the critique stage's
 * form. Of n students, the GAME_SHOWN_MAX with the highest stage-1 reward
 * are shown (equal rewards: the lower id first; NaN ranks last), listed
 * by id, so that where a student stands says nothing of its reward.
 *
 * With no student (n == 0) the question still exists: the prompt says that
 * no peer answer arrived, asks for the same three sections with the
 * reasoning the question needs and an empty <identify>, and shown is
 * empty, so only the form (0.2) can be earned. A node keeps playing every
 * stage of each round, its group of completions is scored alike, and the
 * form stays in practice for rounds with peers.
 *
 * -1 with err as game_answer_question, or when n < 0, an id is out of range
 * or repeated, or a completion is NULL. */
int game_critique_question(const task_question_t *problem, uint64_t round, const game_student_t *students, int n,
                           task_question_t *out, char *err, size_t errlen);

/* Stage 3: the question, the first GAME_CRITIQUES_MAX of n critique
 * completions in the order given, listed as "Criticism #1", "#2", ... by
 * that order, and the resolve stage's form. With none, the prompt says
 * so and asks for an empty <majority>; votes is empty, so the vote part
 * cannot be earned, the form and a right answer can. -1 with err as
 * game_answer_question, or when n < 0 or a critique is NULL. */
int game_resolve_question(const task_question_t *problem, uint64_t round, const char *const *critiques, int n,
                          task_question_t *out, char *err, size_t errlen);

#endif
