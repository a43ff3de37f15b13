/* Minimal test harness: each TEST prints one PASS/FAIL/SKIP line that
 * tests/run.sh counts. EXPECT records a failure with file:line and goes on,
 * so one run shows every broken expectation. */
#ifndef SAPO_CHECK_H
#define SAPO_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

static int check_failures;
static const char *check_skip_reason;

#define EXPECT(cond)                                                            \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                   \
        }                                                                       \
    } while (0)

#define EXPECTF(cond, ...)                                                      \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            check_failures++;                                                   \
        }                                                                       \
    } while (0)

/* relative closeness with an absolute floor for values near zero */
#define EXPECT_NEAR(a, b, rel)                                                                                \
    do {                                                                                                      \
        double a_ = (a), b_ = (b);                                                                            \
        double d_ = fabs(a_ - b_), s_ = fmax(fabs(a_), fabs(b_));                                             \
        if (!(d_ <= fmax(s_, 1e-6) * (rel))) {                                                                \
            fprintf(stderr, "%s:%d: %s = %.9g vs %s = %.9g (rel %.3g)\n", __FILE__, __LINE__, #a, a_, #b, b_, \
                    d_ / fmax(s_, 1e-30));                                                                    \
            check_failures++;                                                                                 \
        }                                                                                                     \
    } while (0)

/* call from inside a test to report it skipped, with the reason */
#define SKIP_TEST(why)             \
    do {                           \
        check_skip_reason = (why); \
        return;                    \
    } while (0)

#define RUN_TEST(fn)                                                            \
    do {                                                                        \
        int f0_ = check_failures;                                               \
        check_skip_reason = NULL;                                               \
        fn();                                                                   \
        if (check_skip_reason) printf("SKIP %s: %s\n", #fn, check_skip_reason); \
        else printf("%s %s\n", check_failures == f0_ ? "PASS" : "FAIL", #fn);   \
        fflush(stdout);                                                         \
    } while (0)

#define CHECK_EXIT() return check_failures ? 1 : 0

#endif
