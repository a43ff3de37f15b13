/* The warm start's answers: a short working before the answer tag where a
 * family's metadata gives one. A 3M-parameter byte model trained on bare
 * answers learned the form of each answer but not its content (greedy
 * pass@1 0.11 on single-digit sums after 250 steps): the operands sit far
 * back in the question. Written out first ("9 - 4 = 5"), they sit next to
 * the result, and what is left is a small table. */
#ifndef SAPO_WORKING_H
#define SAPO_WORKING_H

#include "tasks/task.h"

/* " WORKING <answer>ANSWER</answer>", or " <answer>ANSWER</answer>" for a
 * family without a working; malloc'ed. */
char *working_answer(const task_entry_t *e);

#endif
