/* The per-round metrics line the learner appends to run/<node>/metrics.jsonl:
 * {"node","model" (the policy's name: its kind, "bytes-4L-256C-v264"),
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
 *  "seconds":{"train":...}, "sampler":{the batch's counters}, "time"} */
#ifndef SAPO_METRICS_H
#define SAPO_METRICS_H

#include <cjson/cJSON.h>

#include "train/train.h"
#include "records.h"

/* malloc'ed JSON text without a newline */
char *metrics_line(const char *node, const char *model, const rec_batch_view_t *batch, const train_stats_t *st,
                   uint64_t version, double train_seconds);

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
