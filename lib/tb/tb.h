/* TensorBoard event files: what a process logs as JSON lines, also as
 * records TensorBoard reads while the process runs (docs/metrics.md,
 * "Watching a swarm in TensorBoard").
 *
 * A file is TFRecord framing around Event protocol buffers (lib/tb/
 * event.proto, compiled by protoc-c): each record its length (8 bytes,
 * little-endian), the masked CRC-32C of those 8 bytes, the Event, and the
 * masked CRC-32C of the Event. The first Event names the format
 * ("brain.Event:2"); each JSON line is then one Event whose step is the
 * line's "round", whose wall time is its "time", and whose summary holds
 * every number of the line as a value tagged by its path: a nested field
 * joined by '/' ("local/zero_adv_share", "peak_gb/learner"), a top-level
 * one under the group its writer names ("train/loss").
 *
 * Each process writes a file of its own, made new at its start
 * (events.out.tfevents.<seconds>.<host>.<pid>.<process>): a restarted
 * process never appends to a file an earlier one may have left half
 * written, and a record is one write(2), so a killed process leaves its
 * whole records readable. */
#ifndef SAPO_TB_H
#define SAPO_TB_H

#include <stddef.h>
#include <stdint.h>

typedef struct tb tb_t;

/* The group of a top-level number of a line ("train" for "loss"), or NULL
 * to tag it by its name alone. */
typedef const char *(*tb_group_fn)(const char *field);

/* A new event file in dir (made if missing) for the named process, its
 * version record written. NULL with one line in err. */
tb_t *tb_open(const char *dir, const char *process, char *err, size_t errlen);

/* One JSON object line as an Event: its "round" the step, its "time" the
 * wall time (now where it has none), every other number a value. Tags
 * are prefix/ (when prefix is not NULL) then the group of a top-level
 * field (when group gives one) then the field's path. Strings, booleans
 * and nulls are left out. 0, or -1 with one line in err (not a JSON
 * object, the write failed). */
int tb_line(tb_t *tb, const char *json, const char *prefix, tb_group_fn group, char *err, size_t errlen);

/* A text the text dashboard shows (Markdown), at step. 0 or -1 with err. */
int tb_text(tb_t *tb, int64_t step, const char *tag, const char *text, char *err, size_t errlen);

/* the file's path */
const char *tb_path(const tb_t *tb);

/* closes the file (NULL is fine) and sets *tb to NULL */
void tb_close(tb_t **tb);

#endif
