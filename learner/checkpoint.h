/* The learner's checkpoints: run/<node>/ckpt/r<round>/ holds the model
 * (a Hugging Face folder), optimizer.bin and state.json {round, policy_version},
 * and run/<node>/ckpt/latest is a link to the newest complete one. A
 * checkpoint is written into r<round>.part and renamed, and the link is
 * replaced by rename too, so a learner killed at any moment leaves the
 * previous checkpoint intact. The folder keeps the name ckpt it always had,
 * so that a learner resumes from a run folder of an older build. */
#ifndef SAPO_CHECKPOINT_H
#define SAPO_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "node/policy.h"
#include "train/adamw.h"

typedef struct {
    uint64_t round;          /* last batch applied */
    uint64_t policy_version; /* updates applied */
} checkpoint_state_t;

/* 0 and the folder of the latest checkpoint in dir (run/<node>/ckpt),
 * 1 when there is none, -1 with err when it is unreadable. */
int checkpoint_latest(const char *run, char *dir, size_t dirlen, checkpoint_state_t *st, char *err, size_t errlen);

/* Saves and points latest at it; keeps the newest `keep` checkpoints. */
int checkpoint_save(const char *run, const policy_t *pol, const adamw_t *opt, const checkpoint_state_t *st, int keep,
                    char *err, size_t errlen);

/* The most bytes of weights and moments a learner keeps on disk at once:
 * keep_versions + 1 policy versions of n_params (in bf16 or fp32), and
 * keep_checkpoints + 1 checkpoints (the weights in fp32 and AdamW's two
 * moments), since a new one is whole before the oldest goes. Headers,
 * configs, metrics and logs come on top (kilobytes a folder). */
size_t checkpoint_disk_bytes(size_t n_params, int keep_versions, bool bf16_versions, int keep_checkpoints);

/* The round (returned) and policy version (*version) of the last complete
 * line of the metrics file (0 when there is none). A learner that resumes from a checkpoint older than that has
 * lost the rounds in between: they are trained again, and it says so. */
uint64_t checkpoint_last_logged_round(const char *metrics_path, uint64_t *version);

#endif
