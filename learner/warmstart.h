/* learner warmstart: trains the tiny default model from scratch with
 * supervised steps on the task library's own (question, answer) pairs and
 * saves it as the base model folder, so RL starts from partial competence.
 * Skipped when the folder already holds a model. */
#ifndef SAPO_WARMSTART_H
#define SAPO_WARMSTART_H

#include "node/config.h"

int warmstart(const config_t *cfg);

/* learner init CONFIG_JSON OUT: a randomly initialised model of any
 * Qwen2/Qwen3 shape, saved as a model folder over the byte tokenizer (for
 * tests and benchmarks; no weights can be downloaded here). */
int init_random(const char *config_json, const char *out, uint64_t seed);

#endif
