/* The per-round metrics line the learner appends to run/<node>/metrics.jsonl:
 * {"node","round","version","reward_mean" (the node's own completions),
 *  "reward_external","family_accuracy":{family: mean reward},
 *  "local_groups","external_groups","external_from":{node: groups},
 *  "external_reward_from":{node: mean local reward of its completions},
 *  "loss","grad_norm","tokens",
 *  "clip_region","seconds":{"train":...}, "sampler":{the batch's counters},
 *  "time"} */
#ifndef SAPO_METRICS_H
#define SAPO_METRICS_H

#include "node/learn.h"
#include "records.h"

/* malloc'ed JSON text without a newline */
char *metrics_line(const char *node, const rec_batch_view_t *batch, const learn_stats_t *st, uint64_t version,
                   double train_seconds);

#endif
