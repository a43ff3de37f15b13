/* Resident memory that tracks what a process holds. glibc keeps the heap
 * pages that a burst freed (a broker's queue after a backlog, a learner's
 * activations after its longest batch) inside its arenas, so without this
 * a long-running process's RSS records its largest burst so far and creeps
 * up over hours, which hides a real leak behind noise. */
#ifndef SAPO_UTIL_MEM_H
#define SAPO_UTIL_MEM_H

#include <stddef.h>

/* Hands the free pages of every malloc arena back to the kernel. Cheap to
 * call after each unit of work: it does the work at most once a second.
 * Not for a process whose working set follows each input (a generator's KV
 * cache follows the group's longest prompt): trimmed, its RSS swung with
 * every task (26 to 69 MB in a soak). The generator fixes malloc's
 * thresholds instead (mem_fix_thresholds below). */
void mem_release(void);

/* Fixes malloc's thresholds for the rest of the process: every block of
 * 256 KiB or more is mapped on its own (and unmapped when freed), and free
 * space over 1 MiB at the heap's top goes back to the kernel. glibc
 * otherwise slides both up after a large free (to 12.9 MB when a
 * generator frees a reloaded checkpoint's parameters: the likely trigger
 * in the soak below), and from then on
 * blocks of that size come from the heap, where one small allocation
 * above them pins the pages. For a process whose large blocks come and go
 * with each input (a generator, whose KV cache is one per call). Mapping
 * only that block per call was not enough: in a soak a generator's heap
 * still stepped from 4.7 to 13.2 MB after 54 minutes and stayed. */
void mem_fix_thresholds(void);

#endif
