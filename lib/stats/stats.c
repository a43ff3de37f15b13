/* The study's statistics: cumulative reward, moving averages, and the
 * tests across seeds with their adjustments for many rounds. */
#include "stats/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/splitmix.h"

double stats_mean(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return n > 0 ? s / n : 0;
}

double stats_var(const double *x, int n)
{
    if (n < 2) return 0;
    double m = stats_mean(x, n), s = 0;
    for (int i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return s / (n - 1);
}

double stats_cumulative(const double *reward, int nodes, int rounds)
{
    double s = 0;
    for (int i = 0; i < nodes * rounds; i++)
        if (!isnan(reward[i])) s += reward[i];
    return s;
}

void stats_moving_average(const double *x, int n, int window, double *out)
{
    if (window < 1) window = 1;
    double s = 0;
    for (int k = 0; k < n; k++) {
        s += x[k];
        if (k >= window) s -= x[k - window];
        out[k] = s / (k + 1 < window ? k + 1 : window);
    }
}

/* The continued fraction of I_x(a, b), evaluated by the modified Lentz
 * method; it converges fast for x < (a + 1) / (a + b + 2). */
static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
        d = 1 + even * d;
        c = 1 + even / c;
        if (fabs(d) < tiny) d = tiny;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        double odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
        d = 1 + odd * d;
        c = 1 + odd / c;
        if (fabs(d) < tiny) d = tiny;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double step = d * c;
        h *= step;
        if (fabs(step - 1) < 1e-15) break;
    }
    return h;
}

double stats_betai(double a, double b, double x)
{
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return front * betacf(a, b, x) / a;
    return 1 - front * betacf(b, a, 1 - x) / b;
}

double stats_t_two_sided(double t, double df)
{
    if (isinf(t)) return 0;
    return stats_betai(df / 2, 0.5, df / (df + t * t));
}

int stats_welch(const double *a, int na, const double *b, int nb, stats_ttest_t *out)
{
    memset(out, 0, sizeof *out);
    out->p = 1;
    if (na < 2 || nb < 2) return -1;
    double ma = stats_mean(a, na), mb = stats_mean(b, nb);
    double sa = stats_var(a, na) / na, sb = stats_var(b, nb) / nb;
    if (sa + sb == 0) {
        out->t = ma == mb ? 0 : ma > mb ? INFINITY : -INFINITY;
        out->p = ma == mb ? 1 : 0;
        return -1;
    }
    out->t = (ma - mb) / sqrt(sa + sb);
    out->df = (sa + sb) * (sa + sb) / (sa * sa / (na - 1) + sb * sb / (nb - 1));
    out->p = stats_t_two_sided(out->t, out->df);
    return 0;
}

int stats_paired(const double *a, const double *b, int n, stats_ttest_t *out)
{
    memset(out, 0, sizeof *out);
    out->p = 1;
    if (n < 2) return -1;
    double *d = malloc((size_t)n * sizeof *d);
    if (!d) return -1;
    for (int i = 0; i < n; i++) d[i] = a[i] - b[i];
    double m = stats_mean(d, n), se2 = stats_var(d, n) / n;
    free(d);
    out->df = n - 1;
    if (se2 == 0) {
        out->t = m == 0 ? 0 : m > 0 ? INFINITY : -INFINITY;
        out->p = m == 0 ? 1 : 0;
        return -1;
    }
    out->t = m / sqrt(se2);
    out->p = stats_t_two_sided(out->t, out->df);
    return 0;
}

/* |mean of the first na values - mean of the rest| */
static double split_diff(const double *v, int na, int n, double total)
{
    double sa = 0;
    for (int i = 0; i < na; i++) sa += v[i];
    return fabs(sa / na - (total - sa) / (n - na));
}

double stats_permutation(const double *a, int na, const double *b, int nb, long max_draws, uint64_t seed)
{
    if (na < 1 || nb < 1) return 1;
    int n = na + nb;
    double *v = malloc((size_t)n * sizeof *v);
    memcpy(v, a, (size_t)na * sizeof *v);
    memcpy(v + na, b, (size_t)nb * sizeof *v);
    double total = 0;
    for (int i = 0; i < n; i++) total += v[i];
    /* ties in |difference| must count as "at least as extreme" despite rounding */
    double observed = split_diff(v, na, n, total) * (1 - 1e-12) - 1e-15;
    double ways = 1;
    for (int i = 0; i < na; i++) ways = ways * (n - i) / (i + 1);
    long hits = 0, draws = 0;
    double *pick = malloc((size_t)n * sizeof *pick);
    if (ways <= (double)max_draws) {
        /* every subset of na positions as group a, in lexicographic order */
        int *idx = malloc((size_t)na * sizeof *idx);
        for (int i = 0; i < na; i++) idx[i] = i;
        for (;;) {
            double sa = 0;
            for (int i = 0; i < na; i++) sa += v[idx[i]];
            hits += fabs(sa / na - (total - sa) / nb) >= observed;
            draws++;
            int i = na - 1;
            while (i >= 0 && idx[i] == n - na + i) i--;
            if (i < 0) break;
            idx[i]++;
            for (int j = i + 1; j < na; j++) idx[j] = idx[j - 1] + 1;
        }
        free(idx);
    } else {
        uint64_t s = seed;
        memcpy(pick, v, (size_t)n * sizeof *pick);
        for (long d = 0; d < max_draws; d++) {
            for (int i = n - 1; i > 0; i--) {
                int j = (int)(splitmix64(&s) % (uint64_t)(i + 1));
                double t = pick[i];
                pick[i] = pick[j];
                pick[j] = t;
            }
            hits += split_diff(pick, na, n, total) >= observed;
        }
        hits++;
        draws = max_draws + 1;
    }
    free(pick);
    free(v);
    return (double)hits / (double)draws;
}

static int by_p(const void *x, const void *y, void *p)
{
    double a = ((const double *)p)[*(const int *)x], b = ((const double *)p)[*(const int *)y];
    return (a > b) - (a < b);
}

static int *order_by_p(const double *p, int n)
{
    int *o = malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    for (int i = 0; i < n; i++) o[i] = i;
    qsort_r(o, (size_t)n, sizeof *o, by_p, (void *)p);
    return o;
}

void stats_holm(const double *p, int n, double *adjusted)
{
    int *o = order_by_p(p, n);
    double run = 0;
    for (int k = 0; k < n; k++) {
        double v = fmin(1, (n - k) * p[o[k]]);
        run = fmax(run, v);
        adjusted[o[k]] = run;
    }
    free(o);
}

void stats_bh(const double *p, int n, double *adjusted)
{
    int *o = order_by_p(p, n);
    double run = 1;
    for (int k = n - 1; k >= 0; k--) {
        double v = fmin(1, p[o[k]] * n / (k + 1));
        run = fmin(run, v);
        adjusted[o[k]] = run;
    }
    free(o);
}

void stats_relative_regret(const double *const *v, int m, int n, double **point, double **averaged)
{
    for (int t = 0; t < n; t++) {
        double best = v[0][t];
        for (int i = 1; i < m; i++) best = v[i][t] > best ? v[i][t] : best;
        for (int i = 0; i < m; i++) {
            point[i][t] = best > 0 ? (best - v[i][t]) / best : 0;
            averaged[i][t] = ((t ? averaged[i][t - 1] * t : 0) + point[i][t]) / (t + 1);
        }
    }
}
