/* A node's memory budget (the memory setting, SAPO_MEMORY): the most
 * memory the node's processes may hold together, divided among them by
 * what each needs for its model and its batches. Every process makes the
 * same plan from the same settings and model, so none has to ask another:
 * the learner takes its micro-batch and recompute setting from it, the
 * generators and the evaluator their decode batch and whether they
 * decode by a packed copy of the weights. A budget too small for the
 * model even at the least of everything is refused with the least that
 * would do. Without the setting every process runs as it always has.
 *
 * What is counted (bytes of resident memory, the peaks util/peak.h
 * reads): the broker, the sampler and the verifier a small fixed share
 * each; a generator its weights (4 bytes a parameter), its packed copy
 * where it decodes by one, and its generation's workspace and KV cache
 * (model_generate_bytes); the evaluator the same at its own batch; the
 * learner its weights, gradients and AdamW's two moments (16 bytes a
 * parameter), a reference model's weights and forward pass where beta >
 * 0, and its micro-batch's workspace (model_batch_bytes) at the longest
 * row a batch can hold. Each model process adds a share of its own for
 * its libraries, threads and records. docs/memory.md has the figures. */
#ifndef SAPO_NODE_BUDGET_H
#define SAPO_NODE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "node/config.h"
#include "node/policy.h"

typedef struct {
    uint64_t total;         /* the budget: config_memory_bytes */
    uint64_t small;         /* the broker, the sampler and the verifier, each */
    uint64_t generator;     /* each generator's share */
    uint64_t evaluator;     /* the evaluator's */
    uint64_t learner;       /* the learner's */
    uint64_t learner_fixed; /* of it, all but the micro-batch's workspace */
    int prompt_tokens;      /* the longest prompt of the task mix it was planned for */
    int longest_row;        /* positions of the longest row a training batch can hold */
    int generate_batch;     /* questions a generator samples at once */
    int heldout_batch;      /* questions the evaluator samples at once */
    bool packed;            /* generators decode by a packed copy (the evaluator too, without a budget) */
    bool recompute;         /* the learner recomputes activations in backward */
    int micro_batch;        /* the learner's sequences per forward and backward pass */
} budget_t;

/* The longest prompt, in the policy's tokens, among 64 questions drawn
 * from the node's task mix (and the game's stages, where it plays), with
 * its instruction: what a batch's rows and a generation's KV cache are
 * sized for. -1 with err where the mix cannot be drawn. */
int budget_prompt_tokens(const config_t *cfg, const policy_t *pol, char *err, size_t errlen);

/* The plan for cfg's budget and pol's model (placed on its backend),
 * prompts of prompt_tokens: 0, or -1 with one line in err saying the
 * least budget that would do and each process's share of it. Without a
 * budget (memory unset) 0 and today's settings: the configured batches,
 * packing, and recompute where the recompute setting is on. */
int budget_plan(const config_t *cfg, policy_t *pol, int prompt_tokens, budget_t *b, char *err, size_t errlen);

/* the process a plan is applied to */
typedef enum { BUDGET_LEARNER, BUDGET_GENERATOR, BUDGET_EVALUATOR } budget_role_t;

/* budget_prompt_tokens and budget_plan for a process's policy, and what
 * the plan says of its model applied to it: the learner's recompute
 * setting, and no packed copy of the weights for a generator where the
 * plan has none and for the evaluator under any budget (model_pack_limit,
 * for this process). 0, or -1 with err. */
int budget_for(const config_t *cfg, policy_t *pol, budget_role_t role, budget_t *b, char *err, size_t errlen);

/* The plan as one line: the budget, each process's share and what each
 * takes (for the log and bin/learner budget) */
void budget_describe(const budget_t *b, const config_t *cfg, char *out, size_t outlen);

#endif
