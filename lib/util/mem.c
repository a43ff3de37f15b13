/* Giving freed heap back to the system, so a long-running process's
 * resident memory shows what it holds rather than its largest burst. */
#include "util/mem.h"

#include <malloc.h>
#include <stdint.h>
#include <time.h>

void mem_release(void)
{
    static int64_t last_ms = -1000;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (now_ms - last_ms < 1000) return;
    last_ms = now_ms;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

void mem_fix_thresholds(void)
{
#ifdef __GLIBC__
    /* setting them turns off glibc's sliding of both */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
#endif
}
