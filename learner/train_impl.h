/* What the GRPO step (train.c) and the supervised step (train_sft.c)
 * share: the state a train_t holds, and how both encode text and set up
 * AdamW. Not for use outside lib/train. */
#ifndef SAPO_TRAIN_IMPL_H
#define SAPO_TRAIN_IMPL_H

#include "train.h"

/* The arrays of a GRPO micro-batch (train.c's micro_step), kept between
 * steps */
typedef struct {
    int *ints;
    float *floats;
    size_t cap_ints, cap_floats; /* elements */
} train_workspace_t;

struct train {
    policy_t *policy;
    policy_t *ref;
    const config_t *cfg;
    adamw_t *opt;
    grpo_params_t gp;
    train_workspace_t ws;
    int micro_batch;  /* sequences a micro-batch takes at most */
    size_t allowance; /* bytes its workspace may take (0: no bound) */
};

/* Encodes text with the policy's tokenizer (malloc'ed, *n ids); NULL for
 * invalid UTF-8. */
int32_t *train_encode(const policy_t *p, const char *text, size_t *n);

/* AdamW's settings from the node's: its learning rate and weight decay. */
adamw_params_t train_adamw_params(const config_t *cfg);

#endif
