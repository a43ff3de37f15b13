#include "util/mem.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* under AddressSanitizer the block is malloc'd, so overruns are caught */
#ifdef __SANITIZE_ADDRESS__
void *mem_map(size_t bytes) { return malloc(bytes ? bytes : 1); }
void mem_unmap(void *p, size_t bytes) { (void)bytes; free(p); }
#else
void *mem_map(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mem_unmap(void *p, size_t bytes)
{
    if (p) munmap(p, bytes ? bytes : 1);
}
#endif
