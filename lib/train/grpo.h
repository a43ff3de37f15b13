/* The GRPO objective as TRL's GRPOTrainer defines it (trl 1.16:
 * _generate_and_score_completions for advantages, _compute_loss for the
 * loss), on per-token arrays of a whole batch: the learner runs the model
 * forward over micro-batches to get logp, calls grpo_loss once for the
 * batch, and runs backward per micro-batch from the returned dL/dlogp, so
 * gradient accumulation yields exactly the full-batch gradient. The batch
 * is one TRL optimisation step with gradient_accumulation_steps = 1 (every
 * normaliser below is over the whole batch). */
#ifndef SAPO_GRPO_H
#define SAPO_GRPO_H

typedef enum {
    GRPO_SCALE_GROUP, /* divide by the group's std (TRL scale_rewards "group", its default) */
    GRPO_SCALE_BATCH, /* by the std of every reward in the batch ("batch") */
    GRPO_SCALE_NONE,  /* centre only ("none", Dr. GRPO) */
} grpo_scale_t;

typedef enum {
    GRPO_LOSS_GRPO,    /* per-sequence token mean, then mean over sequences */
    GRPO_LOSS_BNPO,    /* sum over tokens / tokens in the batch */
    GRPO_LOSS_DR_GRPO, /* sum over tokens / (B * max_completion_length) */
    GRPO_LOSS_DAPO,    /* sum over tokens / tokens in the batch (TRL's num_items_in_batch) */
} grpo_loss_type_t;

typedef struct {
    float epsilon_low;      /* ratio clipped below at 1 - epsilon_low (0.2) */
    float epsilon_high;     /* and above at 1 + epsilon_high (0.28) */
    float delta;            /* two-sided clipping: ratio capped at delta; 0 = off */
    float beta;             /* KL coefficient to the reference; 0 = no KL term */
    int kl_bias_correction; /* KL term times the ratio (TRL use_bias_correction_kl, default on) */
    grpo_loss_type_t loss_type;
    int max_completion_length; /* dr_grpo's normaliser */
} grpo_params_t;

/* what TRL logs for a step, each a mean over unmasked tokens of the batch */
typedef struct {
    float clip_low;    /* ratio < 1 - epsilon_low with a negative advantage */
    float clip_high;   /* ratio > 1 + epsilon_high with a positive advantage */
    float clip_region; /* either */
    float kl;          /* k3 estimate (times the ratio with bias correction); 0 when beta is 0 */
    float ratio;       /* mean importance ratio */
    float ratio_min, ratio_max;
    long ratio_min_at; /* the cell (b * T + t) of ratio_min, -1 when no token counted */
    long tokens;       /* unmasked tokens */
} grpo_stats_t;

/* SAPO's paper settings: eps 0.2 / 0.28, no KL; TRL's defaults otherwise
 * (loss "dapo", no delta, KL bias correction on) */
grpo_params_t grpo_params_default(int max_completion_length);

/* rewards: n_groups groups one after another, group g of group_sizes[g]
 * rewards. adv_out (same layout) = (r - group mean) / (std + 1e-4), std the
 * unbiased one (torch.std) of the group or of every reward of the batch;
 * no division for GRPO_SCALE_NONE. A one-element group (or batch) has std
 * 0, as in TRL. */
void grpo_advantages(const float *rewards, const int *group_sizes, int n_groups, grpo_scale_t scale, float *adv_out);

/* logp, old_logp, ref_logp, mask: (B, T); adv: (B). old_logp NULL means the
 * batch is on-policy (TRL's old = logp.detach()); ref_logp is read only
 * when beta > 0 and must then be given. mask is 1 on completion tokens
 * that count, 0 on padding. Returns the loss; dlogp_out (B, T) receives
 * dL/dlogp (0 where masked); stats may be NULL. */
float grpo_loss(const grpo_params_t *p, int B, int T, const float *logp, const float *old_logp, const float *ref_logp,
                const float *mask, const float *adv, float *dlogp_out, grpo_stats_t *stats);

#endif
