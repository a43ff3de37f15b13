/* The sampler's bookkeeping between scored groups and training batches:
 * SampleSelf(I) from the node's own fresh groups, SampleExternal(J) from
 * re-scored groups of other nodes, and the batch record built from them.
 * No sockets here, so it is tested directly. */
#ifndef SAPO_ASSEMBLY_H
#define SAPO_ASSEMBLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "node/config.h"
#include "records.h"

typedef struct {
    long local_in, external_in;     /* scored groups received */
    long stale_dropped;             /* local groups older than the staleness bound */
    long external_zero_adv_dropped; /* external groups whose local rewards are all equal */
    long local_zero_adv_dropped;    /* own groups whose rewards are all equal (local-filter nonzero) */
    long local_zero_adv_kept;       /* such groups kept anyway: ASSEMBLY_ZERO_ADV_PATIENCE x I of them
                                       in a row had been dropped since the last batch */
    long wrong_size_dropped;        /* groups without L completions */
    long duplicate_dropped;         /* local groups of a task already taken (a record the broker
                                       delivered again after a process was killed holding it) */
    long batches;
    long fallback_batches; /* batches that took local groups for missing external ones */
} assembly_stats_t;

#define ASSEMBLY_SEEN_MAX 4096
/* local-filter nonzero drops at most this many times I own zero-advantage
 * groups in a row between two batches; the next ones are kept. A policy
 * whose every answer scores the same (a random model, a checkpoint that
 * never writes the answer format) still steps, at this many times a
 * round's sampling, instead of waiting forever. */
#define ASSEMBLY_ZERO_ADV_PATIENCE 4

typedef struct assembly assembly_t;

assembly_t *assembly_new(const config_t *cfg);
void assembly_destroy(assembly_t **self_p);

/* Takes a scored group: buf, the memory that holds its record
 * (malloc'ed: the record, or the pool entry it came in; the assembly frees
 * it), v, the view of the record as the sampler has it (an external
 * group's marks, ages and rewards are this node's; v's rewards, when set,
 * are copied), and whether its rewards are all equal
 * (group_zero_advantage).
 * Returns true when it was kept. The node's streams deliver at least once,
 * so a local group whose task id is among the last ASSEMBLY_SEEN_MAX taken
 * is a repeat and is dropped here: one group per question reaches
 * training. */
bool assembly_add(assembly_t *self, void *buf, const rec_group_view_t *v, bool zero_advantage);

/* Whether a local group of task_id would be dropped as a repeat (the
 * sampler does not share such a group again). */
bool assembly_repeat(const assembly_t *self, uint64_t task_id);

size_t assembly_local(const assembly_t *self);
size_t assembly_external(const assembly_t *self);

/* Whether a batch can be made for the current policy version: I fresh local
 * groups and J external ones, or, when allow_fallback, I + J local ones. */
bool assembly_ready(assembly_t *self, uint64_t version, bool allow_fallback);

/* A Batch record (malloc'ed) of the n groups in views, which stay owned by
 * the caller: b's groups and n_groups are set here, its other fields
 * (node, round, policy version, counts, stats) come from b. 0, or -1. */
int batch_build(rec_batch_t *b, const rec_group_view_t *views, size_t n, uint8_t **buf, size_t *len);

/* Builds the batch of round `round` (malloc'ed record) and forgets the
 * groups in it; stats_json is copied into the record. 0, or -1. */
int assembly_take(assembly_t *self, uint64_t round, uint64_t version, const char *stats_json, uint8_t **buf,
                  size_t *len);

const assembly_stats_t *assembly_stats(const assembly_t *self);

#endif
