/* Supervised pairs in the forms of the game's stages, for the warm start of
 * a base model that plays the three-stage game (learner warmstart with
 * SAPO_GAME=three-stage). A base trained on plain " <answer>X</answer>"
 * targets never writes a stage's sections, so every stage's reward is 0
 * and GRPO has no difference between completions to learn from; these
 * pairs teach the forms before RL starts.
 *
 * Each pair is a stage's real question, built by game_answer_question,
 * game_critique_question or game_resolve_question from a problem and synthetic
 * peers, and a short completion in the stage's form (game.h):
 *   answer    <think>X</think> <answer>X</answer>, X the problem's answer;
 *   critique  0 to GAME_SHOWN_MAX students with distinct ids in 0..999 (as
 *             game_student_id gives them), each saying a right or a wrong
 *             number in the answer form; <compare> the answers they gave,
 *             <explain> what the chosen student said, <identify> a student
 *             chosen at random among those shown, right or not (the warm
 *             start teaches the form and to copy an id from the prompt;
 *             choosing the right one is what RL is for); with no student,
 *             the prompt's empty <identify>;
 *   resolve   0 to GAME_CRITIQUES_MAX critiques in the critique form, each
 *             naming one of a few shown students; <summarize_feedback> the
 *             votes, <majority> the vote of a critique chosen at random
 *             (empty with none), <question> the question's first words,
 *             <think> and <answer> the problem's answer.
 * Targets are as short as the forms allow: the tiny model writes tens to
 * low hundreds of bytes. The resolve stage's tags alone are 115 bytes. */
#ifndef SAPO_GAME_SFT_H
#define SAPO_GAME_SFT_H

#include <stddef.h>
#include <stdint.h>

#include "tasks/game.h"
#include "tasks/task.h"

/* The pair number index of stage for problem (a question with a number for
 * an answer): out is the stage's question (its text is the prompt, its
 * metadata what the stage's scorer reads; free it with task_question_free),
 * *target a new string in the stage's form. The same (problem, index,
 * stage) always gives the same pair. 0, or -1 with err as the builders
 * give it, or for an unknown stage. */
int game_sft_pair(const task_question_t *problem, uint64_t index, game_stage_t stage, task_question_t *out,
                  char **target, char *err, size_t errlen);

#endif
