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
#include "node/policy.h"
#include "records.h"
#include "train/adamw.h"
#include "train/grpo.h"

/* The completion token with the lowest importance ratio in a step: where
 * a node's own tokens fell ten-thousandfold or more since sampled, the
 * precursor of a lost answer format (docs/learning.md) */
typedef struct {
    int found; /* 0 when no own token was trained with its sampling log-prob */
    int token_id;
    int position;       /* in its completion, from 0 */
    float logp;         /* under the policy being trained */
    float logp_sampled; /* when it was sampled */
    float advantage;    /* of its completion */
    char token[40];     /* its text, bytes outside printable ASCII as \xNN */
    char before[104];   /* up to 24 tokens of the completion before it, alike */
} ratio_min_at_t;

typedef struct {
    float loss;
    float grad_norm;
    long tokens; /* completion tokens trained on */
    int sequences;
    int groups;
    int skipped_groups;     /* unusable groups (no completions, unscored) */
    int untrained_external; /* external groups left out of the step (external-train 0) */
    int masked_truncated;   /* completions left out of the loss (mask-truncated) */
    int packed_groups;      /* groups run over their shared prompt once (shared-prompt) */
    int external_logprobs;  /* external completions trained with their publisher's log-probs (external-logprobs) */
    long positions;         /* positions the forward pass ran, padding included */
    float lr;               /* the learning rate of the step */
    grpo_stats_t grpo;
    ratio_min_at_t ratio_min_at;
} train_stats_t;

typedef struct train train_t;

/* ref may be NULL when cfg->beta is 0 */
train_t *train_new(policy_t *policy, policy_t *ref, const config_t *cfg, adamw_t *opt, char *err, size_t errlen);
void train_destroy(train_t **self_p);

/* One optimizer step on the batch. 0, or -1 with err (nothing applied). */
int train_step(train_t *self, const rec_batch_view_t *batch, train_stats_t *st, char *err, size_t errlen);

/* The learning rate of round `round` (counted from 1): linear warm-up over
 * cfg->lr_warmup rounds, then constant or a cosine down to lr/10 at
 * cfg->rounds. */
float train_lr(const config_t *cfg, uint64_t round);

#endif
