/* The controlled study's arithmetic: cumulative reward and moving average
 * on hand-computed cases, and the significance tests against scipy
 * (tests/golden/stats/scipy.txt from tests/oracle/stats_golden.py) and
 * against small cases worked out by hand. */
#include <math.h>

#include "check.h"
#include "stats/stats.h"

static void test_cumulative_by_hand(void)
{
    /* 2 nodes x 3 rounds; node 1 missed round 2: 0.5+0.25+1 + 0+0.125 */
    double r[6] = {0.5, 0.25, 1.0, 0.0, 0.125, NAN};
    EXPECT_NEAR(stats_cumulative(r, 2, 3), 1.875, 1e-15);
    EXPECT(stats_cumulative(r, 0, 3) == 0);
}

static void test_moving_average_by_hand(void)
{
    double x[5] = {1, 2, 3, 4, 10}, out[5];
    stats_moving_average(x, 5, 3, out);
    double want[5] = {1, 1.5, 2, 3, 17.0 / 3};
    for (int i = 0; i < 5; i++) EXPECT_NEAR(out[i], want[i], 1e-12);
    stats_moving_average(x, 5, 1, out);
    for (int i = 0; i < 5; i++) EXPECT(out[i] == x[i]);
}

static void test_relative_regret_by_hand(void)
{
    /* steps: a 0.5 0.4 0.0, b 0.25 0.8 0.0 -> best 0.5, 0.8, 0 */
    double a[3] = {0.5, 0.4, 0}, b[3] = {0.25, 0.8, 0};
    double pa[3], pb[3], ma[3], mb[3];
    const double *v[2] = {a, b};
    double *point[2] = {pa, pb}, *avg[2] = {ma, mb};
    stats_relative_regret(v, 2, 3, point, avg);
    double want_pa[3] = {0, 0.5, 0}, want_pb[3] = {0.5, 0, 0};
    double want_ma[3] = {0, 0.25, 0.5 / 3}, want_mb[3] = {0.5, 0.25, 0.5 / 3};
    for (int t = 0; t < 3; t++) {
        EXPECT_NEAR(pa[t], want_pa[t], 1e-12);
        EXPECT_NEAR(pb[t], want_pb[t], 1e-12);
        EXPECT_NEAR(ma[t], want_ma[t], 1e-12);
        EXPECT_NEAR(mb[t], want_mb[t], 1e-12);
    }
}

static void test_welch_by_hand(void)
{
    /* a = {1,2,3}: mean 2, var 1; b = {4,6}: mean 5, var 2.
     * se^2 = 1/3 + 1 = 4/3, t = -3 / sqrt(4/3) = -2.598..., df =
     * (4/3)^2 / ((1/3)^2/2 + 1^2/1) = (16/9) / (19/18) = 32/19 */
    double a[3] = {1, 2, 3}, b[2] = {4, 6};
    stats_ttest_t w;
    EXPECT(stats_welch(a, 3, b, 2, &w) == 0);
    EXPECT_NEAR(w.t, -3 / sqrt(4.0 / 3), 1e-12);
    EXPECT_NEAR(w.df, 32.0 / 19, 1e-12);
    /* df = 1 is the Cauchy distribution: P(|T| >= 1) = 1/2 exactly */
    EXPECT_NEAR(stats_t_two_sided(1, 1), 0.5, 1e-12);
    /* df = 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2) */
    EXPECT_NEAR(stats_t_two_sided(3, 2), 1 - 3 / sqrt(11.0), 1e-12);
    double c[1] = {1};
    EXPECT(stats_welch(a, 3, c, 1, &w) == -1 && w.p == 1);
    double same[3] = {2, 2, 2}, other[3] = {3, 3, 3};
    EXPECT(stats_welch(same, 3, other, 3, &w) == -1 && w.p == 0);
}

static void test_paired_by_hand(void)
{
    /* differences {1, 3}: mean 2, var 2, se = sqrt(2 / 2) = 1, t = 2,
     * df = 1: P(|T| >= 2) = 1 - 2 atan(2) / pi for the Cauchy */
    double a[2] = {3, 5}, b[2] = {2, 2};
    stats_ttest_t w;
    EXPECT(stats_paired(a, b, 2, &w) == 0);
    EXPECT_NEAR(w.t, 2, 1e-12);
    EXPECT(w.df == 1);
    EXPECT_NEAR(w.p, 1 - 2 * atan(2) / M_PI, 1e-12);
    /* the same shift everywhere: no spread to test against */
    double c[3] = {1, 2, 3}, d[3] = {0, 1, 2};
    EXPECT(stats_paired(c, d, 3, &w) == -1 && w.p == 0);
    EXPECT(stats_paired(c, c, 3, &w) == -1 && w.p == 1);
    EXPECT(stats_paired(c, d, 1, &w) == -1 && w.p == 1);
}

static void test_permutation_by_hand(void)
{
    /* {1,2} vs {3,4}: of the 6 splits only {1,2}|{3,4} and {3,4}|{1,2}
     * have |difference| 2, so p = 2/6 */
    double a[2] = {1, 2}, b[2] = {3, 4};
    EXPECT_NEAR(stats_permutation(a, 2, b, 2, 1000, 1), 2.0 / 6, 1e-12);
    /* ties: every split of equal values is as extreme, p = 1 */
    double z[3] = {0.5, 0.5, 0.5};
    EXPECT_NEAR(stats_permutation(z, 1, z + 1, 2, 1000, 1), 1, 1e-12);
    /* too many splits for the limit: Monte Carlo, near the exact value */
    double x[8] = {0.1, 0.4, 0.35, 0.2, 0.5, 0.3, 0.45, 0.6};
    double exact = stats_permutation(x, 4, x + 4, 4, 100, 3);
    double mc = stats_permutation(x, 4, x + 4, 4, 20, 3);
    EXPECT(mc > 0 && mc <= 1);
    EXPECT(fabs(stats_permutation(x, 4, x + 4, 4, 69, 5) - exact) < 0.15);
}

static void test_holm_by_hand(void)
{
    /* sorted 0.005 0.01 0.03 0.04 0.2 times 5 4 3 2 1 = 0.025 0.04 0.09
     * 0.08 0.2; running maximum: 0.025 0.04 0.09 0.09 0.2 */
    double p[5] = {0.01, 0.04, 0.03, 0.005, 0.2}, adj[5];
    stats_holm(p, 5, adj);
    double want[5] = {0.04, 0.09, 0.09, 0.025, 0.2};
    for (int i = 0; i < 5; i++) EXPECT_NEAR(adj[i], want[i], 1e-12);
    double big[2] = {0.6, 0.7};
    stats_holm(big, 2, adj);
    EXPECT(adj[0] == 1 && adj[1] == 1);
}

static int read_doubles(FILE *f, double *x, int n)
{
    for (int i = 0; i < n; i++)
        if (fscanf(f, "%lf", &x[i]) != 1) return -1;
    return 0;
}

static void test_against_scipy(void)
{
    FILE *f = fopen("tests/golden/stats/scipy.txt", "r");
    if (!f) SKIP_TEST("tests/golden/stats/scipy.txt missing (run from the repository root)");
    char kind[16];
    int cases = 0;
    double a[64], b[64], p[64], adj[64], want[64];
    while (fscanf(f, "%15s", kind) == 1) {
        int na, nb;
        if (strcmp(kind, "welch") == 0 || strcmp(kind, "perm") == 0) {
            if (fscanf(f, "%d %d", &na, &nb) != 2 || na > 64 || nb > 64 || read_doubles(f, a, na) ||
                read_doubles(f, b, nb))
                break;
            if (kind[0] == 'w') {
                double t, df, pv;
                if (fscanf(f, "%lf %lf %lf", &t, &df, &pv) != 3) break;
                stats_ttest_t w;
                EXPECT(stats_welch(a, na, b, nb, &w) == 0);
                EXPECT_NEAR(w.t, t, 1e-10);
                EXPECT_NEAR(w.df, df, 1e-10);
                EXPECT_NEAR(w.p, pv, 1e-9);
            } else {
                double pv;
                if (fscanf(f, "%lf", &pv) != 1) break;
                EXPECT_NEAR(stats_permutation(a, na, b, nb, 100000, 1), pv, 1e-9);
            }
        } else if (strcmp(kind, "paired") == 0) {
            int n;
            double t, pv;
            if (fscanf(f, "%d", &n) != 1 || n > 64 || read_doubles(f, a, n) || read_doubles(f, b, n) ||
                fscanf(f, "%lf %lf", &t, &pv) != 2)
                break;
            stats_ttest_t w;
            EXPECT(stats_paired(a, b, n, &w) == 0 && w.df == n - 1);
            EXPECT_NEAR(w.t, t, 1e-9);
            EXPECT_NEAR(w.p, pv, 1e-9);
        } else if (strcmp(kind, "bh") == 0) {
            int n;
            if (fscanf(f, "%d", &n) != 1 || n > 64 || read_doubles(f, p, n) || read_doubles(f, want, n)) break;
            stats_bh(p, n, adj);
            for (int i = 0; i < n; i++) EXPECT_NEAR(adj[i], want[i], 1e-12);
        } else if (strcmp(kind, "betai") == 0) {
            double x[4];
            if (read_doubles(f, x, 4)) break;
            EXPECT_NEAR(stats_betai(x[0], x[1], x[2]), x[3], 1e-10);
        } else {
            break;
        }
        cases++;
    }
    EXPECTF(feof(f) && cases >= 17, "read %d cases, stopped at '%s'", cases, kind);
    fclose(f);
}

int main(void)
{
    RUN_TEST(test_cumulative_by_hand);
    RUN_TEST(test_moving_average_by_hand);
    RUN_TEST(test_relative_regret_by_hand);
    RUN_TEST(test_welch_by_hand);
    RUN_TEST(test_paired_by_hand);
    RUN_TEST(test_permutation_by_hand);
    RUN_TEST(test_holm_by_hand);
    RUN_TEST(test_against_scipy);
    CHECK_EXIT();
}
