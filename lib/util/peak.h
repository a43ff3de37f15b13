/* Each process's peak resident memory, where a node's metrics can read
 * it. Linux keeps a process's high-water mark of resident memory
 * (VmHWM in /proc/self/status): what the machine had to have for it, and
 * what the kernel's out-of-memory killer weighs. Every process of a node
 * writes its own into <run>/peak/<process>-<pid> as it grows, and the
 * learner puts every process's into its metrics line (peak_gb), so that
 * what a node took is on record beside what it learned. */
#ifndef SAPO_UTIL_PEAK_H
#define SAPO_UTIL_PEAK_H

#include <stddef.h>

/* this process's peak resident memory in bytes (VmHWM), 0 where Linux
 * does not say */
size_t peak_rss(void);

/* Writes this process's peak into <run>/peak/<process>-<pid> now, and
 * from now on whenever it has grown, checked once a second by a thread
 * of its own. 0, or -1 with one line in err (the folder cannot be
 * made, the thread cannot start). */
int peak_watch(const char *run, const char *process, char *err, size_t errlen);

/* Writes this process's peak now where peak_watch writes it (after a
 * burst that may end before the thread looks, and before an exit) */
void peak_note(void);

/* The processes of a run and each one's peak: the largest over the files
 * of processes of that name (several generators, a restarted learner) */
#define PEAK_MAX_PROCESSES 16
typedef struct {
    int n;
    char name[PEAK_MAX_PROCESSES][32];
    size_t bytes[PEAK_MAX_PROCESSES];
} peak_table_t;

/* Reads <run>/peak/ into t, sorted by process name (an empty table
 * where the folder is missing) */
void peak_read(const char *run, peak_table_t *t);

#endif
