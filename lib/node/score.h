/* The verifier's work on one rollout record: every completion is scored
 * by this node's task library, whatever rewards the record carried (a
 * peer's rewards are never trusted). */
#ifndef SAPO_SCORE_H
#define SAPO_SCORE_H

#include <stddef.h>

typedef struct {
    long scored;      /* rollouts scored */
    long completions; /* completions scored */
    long malformed;   /* records dropped: failed verification, bad task */
} score_stats_t;

/* buf is a rollout record the caller owns, REC_ALIGN-aligned. Scores it in
 * place and marks it scored; a score below reward_floor is written as 0
 * (the node's reward rule: a hedge in the right form earns nothing). 0, or
 * -1 with the reason in err (the record must then be dropped). */
int score_rollout(void *buf, size_t len, float reward_floor, score_stats_t *st, char *err, size_t errlen);

/* The reward of a verifier score under the node's floor. */
float score_reward(double score, float reward_floor);

#endif
