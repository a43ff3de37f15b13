/* Held-out questions and how a policy answers them: the evaluator's and
 * the warm starts' one way to score a policy on questions it never
 * trained on. Questions go to the model in decode batches (a round's
 * worth of small matmuls wastes the CPU, and a real model's decode is
 * bound by reading its weights once per step). */
#ifndef SAPO_HELDOUT_H
#define SAPO_HELDOUT_H

#include "node/policy.h"
#include "tasks/task.h"

/* what a set of questions got: right answers (score 1), the scorers'
 * summed scores (partial credit included), answers in the answer tags,
 * completions */
typedef struct {
    long right, formatted, total;
    double score;
} heldout_tally_t;

/* what a caller sees while the questions are scored (either may be
 * NULL): poll(ctx) between decode batches, and each completion with its
 * score: sample j (from 0) of question k, scored s (below 0: could not be
 * scored), its answer in the tags or not */
typedef struct {
    void (*poll)(void *ctx);
    void (*completion)(void *ctx, int k, int j, const completion_t *c, double s, bool formatted);
    void *ctx;
} heldout_hooks_t;

/* n completions of each of the nq questions (prompts[k] as asked, scored
 * against questions[k]) under gp, question k's uniforms from seed0 + k,
 * batch questions to a decode batch (HELDOUT_BATCH but under a memory
 * budget); hooks may be NULL. A batch that cannot be sampled scores 0,
 * with a line on stderr. */
#define HELDOUT_BATCH 16
heldout_tally_t heldout_score(policy_t *pol, const task_question_t *questions, char *const *prompts, int nq, int n,
                              int batch, model_gen_params_t gp, uint64_t seed0, const heldout_hooks_t *hooks);

#endif
