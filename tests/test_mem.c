/* util/mem: malloc's thresholds, fixed. The pattern that stepped a
 * generator's heap in a soak: a large block freed (glibc then slides its
 * mmap threshold up to that size), then a block under that size taken
 * from the heap with a small one above it, and the large one freed: the
 * small block pins the heap's top. With mem_fix_thresholds the middle block
 * is mapped on its own, and the heap stays small. Under AddressSanitizer
 * malloc is not glibc's, so tests/t_mem.sh runs this from the release
 * build. */
#include "check.h"
#include "util/mem.h"

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ROUNDS = 8, SMALL = 64 };

/* where every block is shown, so the compiler keeps each malloc and free */
static void *volatile seen;

static void *touch(size_t n)
{
    char *p = malloc(n);
    memset(p, 1, n);
    seen = p;
    return p;
}

/* bytes in the main heap after ROUNDS of the pattern, the small blocks
 * still held */
__attribute__((unused)) static size_t pattern(void **keep)
{
    for (int r = 0; r < ROUNDS; r++) {
        size_t big = (size_t)13 << 20, mid = (size_t)8 << 20;
        free(touch(big));
        void *m = touch(mid);
        keep[r] = touch(SMALL);
        free(m);
    }
    return mallinfo2().arena;
}

/* the pattern in a child process, with glibc's own sliding thresholds */
__attribute__((unused)) static size_t pattern_sliding(void)
{
    int fd[2];
    size_t arena = 0;
    if (pipe(fd)) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        void *keep[ROUNDS];
        arena = pattern(keep);
        _exit(write(fd[1], &arena, sizeof arena) == sizeof arena ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &arena, sizeof arena) != sizeof arena) arena = 0;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return arena;
}

static void test_thresholds(void)
{
#ifdef __SANITIZE_ADDRESS__
    SKIP_TEST("AddressSanitizer's malloc is not glibc's (tests/t_mem.sh runs this in the release build)");
#else
    size_t sliding = pattern_sliding();
    void *keep[ROUNDS];
    mem_fix_thresholds();
    size_t fixed = pattern(keep);
    for (int r = 0; r < ROUNDS; r++) free(keep[r]);
    printf("heap after the pattern: %.1f MiB with glibc's sliding thresholds, %.1f MiB fixed\n", sliding / 1048576.0,
           fixed / 1048576.0);
    /* the control: without the fix the pattern does pin the heap (else
     * this test could not tell the fix from nothing) */
    EXPECTF(sliding >= (size_t)8 << 20, "glibc's sliding thresholds left only %zu bytes in the heap", sliding);
    EXPECTF(fixed < (size_t)2 << 20, "with fixed thresholds the heap still holds %zu bytes", fixed);
#endif
}

int main(void)
{
    RUN_TEST(test_thresholds);
    CHECK_EXIT();
}
