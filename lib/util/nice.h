/* The priority of a process's compute threads. A learner or generator
 * runs its model on every core, and on a small machine the threads that
 * carry its records (ZeroMQ's I/O threads, a wire producer's sender)
 * would otherwise queue behind the model for a core, as the broker,
 * verifier and sampler would behind both. */
#ifndef SAPO_UTIL_NICE_H
#define SAPO_UTIL_NICE_H

#include <stddef.h>

/* Sets the calling thread and the threads of its OpenMP team to nice
 * `by` above the calling thread's (at most 19). Threads made before, such
 * as ZeroMQ's and the wire producers', keep their priority; threads the
 * calling thread makes later inherit the lowered one. Call it once the
 * process's sockets exist. 0, or -1 with err. */
int nice_compute_threads(int by, char *err, size_t errlen);

#endif
