/* A round's metrics, built here and nowhere else: the sampler's counters,
 * which its batch carries, and the line the learner appends to
 * run/<node>/metrics.jsonl:
 * {"node","model" (the policy's name: its kind, its shape, as
 *  "bytes-4L-256C-v264" or "llama-30L-576C-v49152"), "model_name" (the
 *  model setting, as "tiny" or "smollm2-135m"),
 *  "round","policy_version","reward_mean" (the node's own completions),
 *  "reward_external","family_reward":{family: mean reward of own completions},
 *  "family_count":{family: own completions},
 *  what the node's own completions look like (what a GRPO practitioner
 *  reads first): "completion_length" (mean tokens), "completion_length_max",
 *  "truncated_share" (cut by max-new-tokens), "format_share" (an
 *  <answer>...</answer> to score), "entropy" (minus the mean log-prob of
 *  the sampled tokens under the policy that sampled them: an estimate of
 *  the per-token entropy at the sampling temperature);
 *  "local" and "external": {"zero_adv_share" (groups whose rewards are all
 *  equal), "age_rounds" (local: batch round - the round its question was
 *  drawn in; external: how many of its publisher's rounds it was behind
 *  the publisher's newest when drawn from the pool), "age_seconds" (since
 *  it was generated), "age_rounds_max", "age_seconds_max", local also
 *  "age_versions" and "age_versions_max" (policy versions behind the one
 *  trained)},
 *  "local_groups","external_groups","external_from":{node: groups},
 *  "external_reward_from":{node: mean local reward of its completions},
 *  "loss","grad_norm","tokens","lr","masked_truncated",
 *  "packed_groups" (groups trained over their shared prompt once),
 *  "external_logprobs" (external completions trained with their
 *  publisher's sampling log-probs),
 *  "positions" (that the forward pass ran, padding included),
 *  "clip_region","clip_low","clip_high","ratio","ratio_min","ratio_max",
 *  "kl" (0 when beta is 0),
 *  "seconds":{"train":...}, "sampler":{the batch's counters: metrics_sampler_t,
 *  or in the game metrics_game_t}, "peak_gb":{process: its peak resident
 *  memory so far, GB}, "time", and where not 0
 *  "rounds_lost","versions_lost","rounds_skipped" (metrics_round_t)} */
#ifndef SAPO_METRICS_H
#define SAPO_METRICS_H

#include <cjson/cJSON.h>

#include "train/grpo.h"
#include "records.h"
#include "util/peak.h"

/* What a training step (learner/train.c) reports for its metrics line,
 * and in it the completion token with the lowest importance ratio: where
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

/* What the learner knows of a round besides its batch and its step. */
typedef struct {
    const char *node;
    const char *model;       /* the policy's shape, its kind ("bytes-4L-256C-v264") */
    const char *model_name;  /* the model setting as given ("tiny", "smollm2-135m", a path) */
    uint64_t policy_version; /* after the step */
    double train_seconds;
    /* Against the last line logged: rounds it has that the state the step
     * was taken from lacks ("rounds_lost"), and their policy versions
     * ("versions_lost"), and rounds neither trained ("rounds_skipped"), so
     * that the lines say every round trained, lost or skipped. Written
     * last, and only when not 0. */
    uint64_t rounds_lost, versions_lost, rounds_skipped;
    /* every process's peak resident memory so far (util/peak.h), or NULL */
    const peak_table_t *peak;
} metrics_round_t;

/* The round's line: malloc'ed JSON text without a newline. */
char *metrics_line(const metrics_round_t *info, const rec_batch_view_t *batch, const train_stats_t *st);

/* The group a top-level number of the line is shown under in TensorBoard
 * (tb/tb.h: tb_group_fn), so that its dashboard keeps like with like:
 * "reward" (reward_mean, reward_external, batch_reward), "completions"
 * (what the own completions look like), "groups" (the batch's groups by
 * kind), "train" (the step), "lost" (rounds_lost and its kin); NULL for a
 * name that is not a top-level number of the line. Objects keep their own
 * name as their group ("local/zero_adv_share", "peak_gb/learner"). */
const char *metrics_tb_group(const char *field);

/* The sampler's counters, which its batch carries (stats_json) and the
 * learner writes under "sampler" ("seconds" joins the line's own): since
 * the sampler started, but the scored reward and the seconds, which are
 * since the batch before. */
typedef struct {
    long pool_size; /* live entries in the pool, -1 when Redis could not be reached */
    long published; /* own groups published */
    /* the assembly's (sampler/assembly.h) */
    long stale_dropped, external_zero_adv_dropped, local_zero_adv_dropped, local_zero_adv_kept, wrong_size_dropped,
        duplicate_dropped;
    long external_rejected;            /* pool entries the screen refused ("external_rejected") */
    long external_unscorable;          /* external groups no scorer here takes */
    long pool_missing, pool_bad_nodes; /* pool_health's */
    /* the screen's counts by reason ("screen": {name: count}), n_screen of each */
    const char *const *screen_reasons;
    const long *screen_counts;
    int n_screen;
    long fallback_batches; /* batches that took local groups for missing external ones */
    long pool_errors;      /* pool calls that failed */
    double scored_reward;  /* the sum of the rewards of the own completions scored ("scored_reward": their mean) */
    long scored_completions;
    double pool_seconds, transport_seconds; /* "seconds": {"pool", "transport"} */
} metrics_sampler_t;

/* The sampler's stats_json for a batch of SAPO's round: malloc'ed JSON
 * text. */
char *metrics_sampler_json(const metrics_sampler_t *s);

/* The game's counters for a stage's batch (docs/game.md#metrics). */
typedef struct {
    uint64_t round;    /* the game's round */
    const char *stage; /* "answer", "critique" or "resolve" */
    int peers;         /* peers whose outputs the stage's prompts show */
    double waited;     /* seconds the stage waited for peers ("waited_seconds") */
    long outputs_published, outputs_rejected;
    long pool_errors;
    double scored_reward; /* the sum of the rewards of the stage's completions ("scored_reward": their mean) */
    long scored_completions;
    double pool_seconds; /* "seconds": {"pool"} */
} metrics_game_t;

/* The sampler's stats_json for a game stage's batch: {"game": {...}, and
 * the counters it shares with SAPO's round}: malloc'ed JSON text. */
char *metrics_game_json(const metrics_game_t *g);

/* A round's reward as reports and studies take it from a metrics line:
 * every own completion the sampler scored for the round
 * (sampler.scored_reward, when it scored any), trained or not; with
 * local-filter nonzero the trained groups' reward_mean is of those with
 * mixed outcomes only, and says little about the policy. reward_mean for
 * lines without it; NULL when the line has neither. */
const cJSON *metrics_round_reward(const cJSON *line);

/* A round's batch reward: the mean reward of every completion the learner
 * trained on, its own and the external ones (the paper's and genrl's
 * train/rewards). External groups reach a batch only with some advantage,
 * so at least one right answer in L, which lifts this above the own
 * reward even when nothing is learned. NULL on a line without it (an
 * older build's). */
const cJSON *metrics_batch_reward(const cJSON *line);

#endif
