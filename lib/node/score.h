/* The verifier's work on one group record, and the sampler's on a peer's
 * group: every completion is scored by this node's task library, whatever
 * rewards the record carried (a peer's rewards are never trusted). */
#ifndef SAPO_SCORE_H
#define SAPO_SCORE_H

#include <stdbool.h>
#include <stddef.h>

#include "records.h"

typedef struct {
    long scored;      /* groups scored */
    long completions; /* completions scored */
    long malformed;   /* records dropped: failed verification, bad task */
} score_stats_t;

/* The node's reward rule: a verifier score below floor counts 0 (a hedge
 * in the right form earns nothing), and a completion in its family's form
 * (task_score_completion: for most, its answer in the answer tags) earns
 * format on top, right or wrong.
 *
 * The game's stages (tasks/game.h) score whole completions, and their score
 * already holds a form part of 0.2, which is all a well-formed wrong
 * completion earns. The rule therefore does not apply to them: their
 * reward is their score. A floor above 0.2 would zero the form part and
 * leave a group of wrong answers nothing to learn from, and a format
 * bonus would count the form twice.
 */
typedef struct {
    float floor;
    float format;
} reward_rule_t;

/* buf is a group record the caller owns, REC_ALIGN-aligned. Scores it in
 * place under the rule and marks it scored. 0, or -1 with the reason in
 * err (the record must then be dropped). */
int score_group(void *buf, size_t len, reward_rule_t rule, score_stats_t *st, char *err, size_t errlen);

/* Scores the group v views under the rule, leaving its record as it is:
 * the rewards go into rewards (v->r.n_completions of them, which the
 * caller keeps while v is read) and become v's (v->rewards), and v is
 * marked scored with the time it took (verify_ms). What the sampler does
 * to a peer's group, whose record it reads and never writes. 0, or -1 with
 * the reason in err (the group must then be dropped). */
int score_view(rec_group_view_t *v, reward_rule_t rule, float *rewards, score_stats_t *st, char *err, size_t errlen);

/* Whether every completion of the group v views got the same reward (as
 * v reads them): such a group has zero advantage everywhere and teaches
 * GRPO nothing. */
bool group_zero_advantage(const rec_group_view_t *v);

/* The reward of a verifier score, for a completion with (formatted) or
 * without an answer in the tags. */
float score_reward(double score, bool formatted, reward_rule_t rule);

#endif
