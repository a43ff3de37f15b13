/* Lowering the priority of a process's model threads only, so the
 * threads that carry records keep the node's. */
#include "util/nice.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* On Linux a nice value belongs to a thread: PRIO_PROCESS with a thread
 * id sets that thread's alone */
static id_t thread_id(void) { return (id_t)syscall(SYS_gettid); }

int nice_compute_threads(int by, char *err, size_t errlen)
{
    if (by == 0) return 0;
    errno = 0;
    int base = getpriority(PRIO_PROCESS, thread_id());
    if (base == -1 && errno != 0) {
        snprintf(err, errlen, "nice: cannot read this thread's priority: %s", strerror(errno));
        return -1;
    }
    int target = base + by > 19 ? 19 : base + by, failed = 0, why = 0;
#pragma omp parallel reduction(| : failed) reduction(max : why)
    if (setpriority(PRIO_PROCESS, thread_id(), target) != 0) failed = 1, why = errno;
    if (failed) {
        snprintf(err, errlen, "nice: cannot set the compute threads to nice %d: %s", target, strerror(why));
        return -1;
    }
    return 0;
}
