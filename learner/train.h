/* The learner's update: one GRPO step on a training batch of question
 * groups. Each group's question and completions are encoded with the
 * learner's own tokenizer and prompt format; completions this policy
 * sampled itself keep their token ids and sampling log-probs (the
 * importance ratio's denominator); others are re-encoded from text, and
 * keep their publisher's sampling log-probs where it runs our model and
 * its token ids are our encoding (external-logprobs use), else are treated
 * as on-policy. The batch runs forward and backward in
 * micro-batches: GRPO's per-token gradient depends only on the token's own
 * log-prob and on normalisers known from the masks, so scaling each
 * micro-batch's loss gives exactly the whole batch's gradient with one
 * forward pass. */
#ifndef SAPO_TRAIN_H
#define SAPO_TRAIN_H

#include "node/config.h"
#include "node/metrics.h" /* train_stats_t, what a step reports */
#include "node/policy.h"
#include "records.h"
#include "train/adamw.h"
#include "train/grpo.h"

typedef struct train train_t;

/* ref may be NULL when cfg->beta is 0 */
train_t *train_new(policy_t *policy, policy_t *ref, const config_t *cfg, adamw_t *opt, char *err, size_t errlen);
void train_destroy(train_t **self_p);

/* A memory budget's say (lib/node/budget.h): micro-batches of at most
 * micro_batch sequences, and where allowance is not 0 fewer rows than
 * that where their workspace (model_batch_bytes) would pass allowance
 * bytes (one row always). Without a call: the micro-batch setting, no
 * bound in bytes. */
void train_set_budget(train_t *self, int micro_batch, size_t allowance);

/* One optimizer step on the batch. 0, or -1 with err (nothing applied). */
int train_step(train_t *self, const rec_batch_view_t *batch, train_stats_t *st, char *err, size_t errlen);

/* The learning rate of round `round` (counted from 1): linear warm-up over
 * cfg->lr_warmup rounds, then constant or a cosine down to lr/10 at
 * cfg->rounds. */
float train_lr(const config_t *cfg, uint64_t round);

#endif
