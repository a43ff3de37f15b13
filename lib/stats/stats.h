/* Statistics for the controlled study: cumulative reward as the SAPO paper
 * sums it, moving averages for its plots, and the tests that say whether
 * a difference between configurations is more than seed noise (Welch's
 * t-test, the paired t-test, an exact or Monte Carlo permutation test) with the adjustments
 * for testing many rounds at once (Holm, Benjamini-Hochberg). */
#ifndef SAPO_STATS_H
#define SAPO_STATS_H

#include <stdint.h>

double stats_mean(const double *x, int n);
/* sample variance (n - 1 in the denominator); 0 for n < 2 */
double stats_var(const double *x, int n);

/* Cumulative reward of one run: reward (nodes, rounds) holds the mean
 * reward of each node's own completions in each round, NaN where a node
 * has no such round; the sum over every node and round. */
double stats_cumulative(const double *reward, int nodes, int rounds);

/* Trailing moving average: out[k] is the mean of x[max(0, k-window+1) .. k]. */
void stats_moving_average(const double *x, int n, int window, double *out);

typedef struct {
    double t;  /* (mean a - mean b) / standard error */
    double df; /* Welch-Satterthwaite degrees of freedom (paired: n - 1) */
    double p;  /* two-sided */
} stats_ttest_t;

/* Welch's unequal-variance t-test of a against b. 0, or -1 when either
 * side has fewer than 2 values or both variances are 0 (p = 1 then when
 * the means are equal, 0 when they differ). */
int stats_welch(const double *a, int na, const double *b, int nb, stats_ttest_t *out);

/* Paired t-test of a against b, a[i] and b[i] measured alike (a study's
 * two configurations with the same seed, under common random numbers):
 * the one-sample test of the differences a[i] - b[i]. 0, or -1 when n < 2
 * or every difference is the same (p = 1 then when it is 0, else 0). */
int stats_paired(const double *a, const double *b, int n, stats_ttest_t *out);

/* Student's t distribution: P(|T| >= |t|) with df degrees of freedom. */
double stats_t_two_sided(double t, double df);

/* Regularized incomplete beta function I_x(a, b). */
double stats_betai(double a, double b, double x);

/* Two-sided permutation test of the difference in means: the share of
 * relabellings of a and b whose |mean difference| is at least the
 * observed one. Every relabelling when there are at most max_draws of
 * them (an exact p), else max_draws random ones from seed (then the
 * observed labelling counts too, so p is never 0). */
double stats_permutation(const double *a, int na, const double *b, int nb, long max_draws, uint64_t seed);

/* Adjusted p-values for n tests, in the input order. */
void stats_holm(const double *p, int n, double *adjusted);
void stats_bh(const double *p, int n, double *adjusted);

/* Relative regret of m models measured at the same n steps, v[i][t] a
 * score where higher is better (held-out pass@1): at step t model i's
 * pointwise regret is (best_t - v[i][t]) / best_t, best_t the highest of
 * the m at t (0 for all when best_t <= 0), and its time-averaged regret
 * at t the mean of its pointwise regrets over steps 0..t. Both go to
 * point[i][t] and averaged[i][t]; 0 is the best model at every step. */
void stats_relative_regret(const double *const *v, int m, int n, double **point, double **averaged);

#endif
