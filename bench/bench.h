/* Small helpers every benchmark shares: a clock, medians and percentiles of
 * repeated runs, the CPU's flags as the benchmarks see them, a peer run
 * with a time limit, and the line formats bench/run.sh collects:
 *   bench NAME: VALUE UNIT (PEER: VALUE UNIT, ratio R)
 *   bench NAME: skipped: REASON
 * with R = VALUE / PEER VALUE. SAPO_BENCH_QUICK=1 asks for a short run. */
#ifndef SAPO_BENCH_H
#define SAPO_BENCH_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static inline void bench_skip(const char *name, const char *reason)
{
    printf("bench %s: skipped: %s\n", name, reason);
    fflush(stdout);
}

/* Whether SAPO_BENCH_HIDE_FLAGS (CPU flags, comma-separated) names flag */
static inline bool bench_flag_hidden(const char *flag)
{
    const char *h = getenv("SAPO_BENCH_HIDE_FLAGS");
    size_t n = strlen(flag);
    for (; h && *h; h += strcspn(h, ",")) {
        h += *h == ',';
        if (strncmp(h, flag, n) == 0 && (h[n] == ',' || h[n] == '\0')) return true;
    }
    return false;
}

/* Whether the CPU has flag (a name on /proc/cpuinfo's flags line) as the
 * benchmarks see it: one that SAPO_BENCH_HIDE_FLAGS hides counts as
 * absent, so that a CPU shows the lines of one that lacks it; *hidden
 * (where not NULL) says so. */
static inline bool bench_cpu_flag(const char *flag, bool *hidden)
{
    bool has = false;
    char *line = NULL;
    size_t cap = 0, n = strlen(flag);
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *p = strchr(line, ':'); p && !has && (p = strstr(p + 1, flag));)
            has = p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0');
        break;
    }
    free(line);
    if (f) fclose(f);
    bool hide = has && bench_flag_hidden(flag);
    if (hidden) *hidden = hide;
    return has && !hide;
}

/* Why a bf16 row cannot run here, on sapo's side and the peer's alike, or
 * NULL: sapo's cpu-bf16 kernels and oneDNN's bf16 both need AVX512-BF16
 * dot products or AMX tiles, and PyTorch's autocast without them ran a
 * step of SmolLM2 at a 76th of fp32's speed (issue 72, a Zen 3). */
static inline const char *bench_bf16_missing(void)
{
    bool dp_hidden = false, amx_hidden = false;
    if (bench_cpu_flag("avx512_bf16", &dp_hidden) || bench_cpu_flag("amx_bf16", &amx_hidden)) return NULL;
    return dp_hidden || amx_hidden
               ? "needs AVX512-BF16 or AMX (CPU flags avx512_bf16, amx_bf16): hidden by SAPO_BENCH_HIDE_FLAGS"
               : "needs AVX512-BF16 or AMX (CPU flags avx512_bf16, amx_bf16), which this CPU lacks";
}

/* Seconds until SAPO_BENCH_DEADLINE (the time, in seconds since the
 * epoch, at which bench/run.sh cuts this program off), at least 1; 0 when
 * the program runs alone */
static inline long bench_time_left(void)
{
    const char *d = getenv("SAPO_BENCH_DEADLINE");
    if (!d || !*d) return 0;
    long left = atol(d) - (long)time(NULL);
    return left > 1 ? left : 1;
}

/* Seconds a peer started now may run: bench_time_left() less `reserve`
 * for what the program does after it; at least 10. 0 (no limit) when the
 * program runs alone. */
static inline long bench_peer_limit(long reserve)
{
    long left = bench_time_left();
    if (left == 0) return 0;
    return left - reserve > 10 ? left - reserve : 10;
}

/* A peer's figures, one a line as it prints them: "NAME VALUE", or "NAME
 * skipped REASON" for one it did not take; those of a peer cut off at
 * its limit are the ones it had printed. */
typedef struct {
    int n;
    struct {
        char name[32], skipped[200];
        double value;
    } fig[16];
    char failed[200]; /* why the peer gave no figures or not all: "" when it ended well */
} bench_peer_t;

/* Runs `.venv/bin/python SCRIPT_AND_ARGS` with bench_peer_limit(reserve)
 * seconds at most, its progress lines (stderr) passed on; -1 with
 * p->failed set where there is no venv or it gave no figure. */
static inline int bench_peer_run(const char *script_and_args, long reserve, bench_peer_t *p)
{
    memset(p, 0, sizeof *p);
    if (access(".venv/bin/python", X_OK) != 0) {
        snprintf(p->failed, sizeof p->failed, "no .venv (tests/oracle/setup.sh makes it)");
        return -1;
    }
    long limit = bench_peer_limit(reserve);
    char cmd[8192], limit_s[64] = "";
    /* --foreground: the peer stays in this program's process group, which
     * bench/run.sh ends as a whole when it cuts the program off */
    if (limit > 0) snprintf(limit_s, sizeof limit_s, "timeout --foreground -k 10 %ld ", limit);
    FILE *f = NULL;
    if (snprintf(cmd, sizeof cmd, "%s.venv/bin/python %s", limit_s, script_and_args) < (int)sizeof cmd)
        f = popen(cmd, "r");
    if (!f) {
        snprintf(p->failed, sizeof p->failed, "could not start .venv/bin/python (or its command is too long)");
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof line, f) && p->n < 16) {
        int k = p->n, at = 0;
        if (sscanf(line, "%31s skipped %n", p->fig[k].name, &at) == 1 && at > 0) {
            snprintf(p->fig[k].skipped, sizeof p->fig[k].skipped, "%.*s", (int)strcspn(line + at, "\n"), line + at);
            p->n++;
        } else if (sscanf(line, "%31s %lf", p->fig[k].name, &p->fig[k].value) == 2) p->n++;
    }
    int status = pclose(f);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 124)
        snprintf(p->failed, sizeof p->failed, "cut off after %ld s (the time left to this program)", limit);
    else if (status != 0) snprintf(p->failed, sizeof p->failed, "ended with status %d", WEXITSTATUS(status));
    if (p->failed[0]) {
        printf("peer %.*s: %s\n", (int)strcspn(script_and_args, " "), script_and_args, p->failed);
        fflush(stdout);
    }
    return p->n > 0 ? 0 : -1;
}

/* "bench NAME: VALUE UNIT (PEER: ...)" against the peer's figure fig, or
 * with why it has none: "(PEER: no figure: REASON)" */
static inline void bench_line_peer(const char *name, double value, const char *unit, const char *peer,
                                   const bench_peer_t *p, const char *fig, const char *peer_unit)
{
    const char *why = p->failed[0] ? p->failed : "the peer did not print it";
    for (int k = 0; k < p->n; k++) {
        if (strcmp(p->fig[k].name, fig) != 0) continue;
        if (!p->fig[k].skipped[0]) {
            bench_line(name, value, unit, peer, p->fig[k].value, peer_unit);
            return;
        }
        why = p->fig[k].skipped;
    }
    printf("bench %s: %.4g %s (%s: no figure: %s)\n", name, value, unit, peer, why);
    fflush(stdout);
}

#endif
