/* Small helpers every benchmark shares: a clock, medians and percentiles of
 * repeated runs, and the one line format bench/run.sh collects:
 *   bench NAME: VALUE UNIT (PEER: VALUE UNIT, ratio R)
 * with R = VALUE / PEER VALUE. SAPO_BENCH_QUICK=1 asks for a short run. */
#ifndef SAPO_BENCH_H
#define SAPO_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_quick(void)
{
    const char *q = getenv("SAPO_BENCH_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1, nearest rank) of n values; sorts v in place. */
static inline double bench_percentile(double *v, int n, double q)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (int)(q * n + 0.5) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return v[i];
}

static inline double bench_median(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* peer NULL: a figure without a peer. */
static inline void bench_line(const char *name, double value, const char *unit, const char *peer, double peer_value,
                              const char *peer_unit)
{
    if (peer)
        printf("bench %s: %.4g %s (%s: %.4g %s, ratio %.3g)\n", name, value, unit, peer, peer_value, peer_unit,
               peer_value != 0 ? value / peer_value : 0.0);
    else printf("bench %s: %.4g %s\n", name, value, unit);
    fflush(stdout);
}

#endif
