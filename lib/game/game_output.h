/* What a node shares after a stage of the three-stage game (issue 21), and
 * how a peer's share is read, with no sockets and no pool: the sampler's
 * game round (sampler/game.c) publishes and reads these records through
 * pool_stage_publish and pool_stage_read.
 *
 * A stage output is a Batch record of the node's round (its round is the
 * game round, not the learner's batch number): one group per question the
 * node played, each the question's task as the node sent it, with the one
 * completion that scored best under the node's verifier (its token ids and
 * log-probs left out). It travels signed, as groups do (identity_seal).
 *
 * Every node of a swarm plays the same questions in a round, since the
 * task mix is seeded by the swarm's name (game_swarm_seed): question q of
 * round r is question r x Q + q of the mix. A reader takes a peer's output
 * only where the peer played exactly those questions (the same index and
 * the same answer); a peer with another mix or question count finds no
 * reader, which says so in its metrics. */
#ifndef SAPO_GAME_OUTPUT_H
#define SAPO_GAME_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "records.h"
#include "tasks/task.h"

/* The task mix's seed in game mode: FNV-1a of the swarm's name, so that
 * every node of the swarm draws the same questions. */
uint64_t game_swarm_seed(const char *swarm);

/* A node's number as a student or critic in the prompts, the same on every
 * node (0 to 999, from FNV-1a of its id): the votes of the critics must
 * name the same student wherever they are read. Two nodes whose ids land
 * on the same number cannot both be shown; the caller shows the first. */
int game_student_id(const char *node);

/* The completion of a scored group with the highest reward: the first of
 * equals; NaN ranks last. -1 for a group without completions. */
int game_best(const rec_group_view_t *group);

/* The stage output of node in round: one group per scored group given (n
 * views, NULL ones skipped), each with its best completion only. 0 with a
 * malloc'ed record (rec_free), or -1 with err. */
int game_output_build(const char *node, uint64_t round, uint64_t policy_version, const rec_group_view_t *const *groups,
                      int n, uint8_t **buf, size_t *len, char *err, size_t errlen);

/* Reads a peer's stage output (rec, already opened from its envelope and
 * REC_ALIGN-aligned): texts[q] (q < questions) is set to the peer's
 * completion for question q of round, pointing into rec, or NULL where
 * the peer gave none. It must be a Batch record of node and round, whose
 * groups name distinct questions of round (index first + q, q < questions)
 * with answers[q] for their answer, and hold one completion each, valid
 * UTF-8 of at most max_text bytes. Returns the number of texts set, or -1
 * with err when the record breaks any of these (none of it is used). */
int game_output_read(const void *rec, size_t len, const char *node, uint64_t round, uint64_t first, int questions,
                     const char *const *answers, size_t max_text, const char **texts, char *err, size_t errlen);

#endif
