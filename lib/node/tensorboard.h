/* A node process's TensorBoard event file (tb/tb.h), by the tensorboard
 * setting: in <run>/tb/, one file per process start. Nothing here stops
 * a node: a file that cannot be made or written is one error line, and
 * the process goes on without it (its JSON lines are the record). */
#ifndef SAPO_NODE_TENSORBOARD_H
#define SAPO_NODE_TENSORBOARD_H

#include <stdint.h>

#include "node/config.h"
#include "tb/tb.h"

/* The process's file, or NULL when the setting is off or it cannot be
 * made (said in one line). */
tb_t *tensorboard_open(const config_t *cfg, const char *process);

/* What the node runs, as a text the text dashboard shows at step round
 * (tag "manifest"): the node, the model setting and the policy's shape,
 * what RL started from and its sha256 where a fetch stamped it, how a
 * base was made (its format.json) and every setting. */
void tensorboard_manifest(tb_t **tb, const config_t *cfg, const char *shape, const char *start, uint64_t round);

/* A JSON line as an Event (tb_line); on failure one error line, and the
 * file is closed (*tb NULL) so that the process goes on without it. */
void tensorboard_line(tb_t **tb, const char *line, const char *prefix, tb_group_fn group);

#endif
