/* learner warmstart: makes the base model folder RL starts from. For the
 * tiny default model, supervised steps from scratch on the task library's
 * own (question, answer) pairs, so RL starts from partial competence; for
 * a chat model, the answer-format warm start (formatstart). Skipped when
 * the folder already holds that model. */
#ifndef SAPO_WARMSTART_H
#define SAPO_WARMSTART_H

#include "node/config.h"

int warmstart(const config_t *cfg);

/* learner warmstart with a chat model (formatstart.c): format-steps
 * supervised steps on the model's own answers in the answer tags, saved
 * as the base folder RL starts from. */
int formatstart(const config_t *cfg);

/* learner init CONFIG_JSON OUT: a randomly initialised model of any
 * Qwen2/Qwen3 shape, saved as a model folder over the byte tokenizer (for
 * tests and benchmarks; no weights can be downloaded here). */
int init_random(const char *config_json, const char *out, uint64_t seed);

#endif
