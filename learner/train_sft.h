/* The warm starts' supervised step (learner warmstart: the tiny base
 * model; the answer-format warm start of a chat model), on a train_t made
 * with beta 0. */
#ifndef SAPO_TRAIN_SFT_H
#define SAPO_TRAIN_SFT_H

#include "train.h"

/* One step of cross-entropy on (question, answer) pairs, the answer
 * written as the policy should write it. Returns the mean loss or -1. */
float train_sft_step(train_t *self, const char *const *questions, const char *const *answers, int n);

#endif
