/* Random numbers and per-token sampling: the own Philox stream equals
 * cuRAND's host generator bit for bit, draws are reproducible, greedy is
 * the argmax, top-k/top-p keep exactly the set Hugging Face's warpers keep
 * (goldens from tests/oracle/sampling_golden.py, plus a full-sort
 * reference here for large vocabularies), the returned log-prob is
 * log_softmax(logits / T), and draw frequencies match the truncated
 * distribution (chi-square). */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "golden_arrays.h"
#include "sampling/rng.h"
#include "sampling/sample.h"

#ifdef SAPO_HAVE_CURAND
#include <curand.h>
#endif

/* Philox4x32-10 known answer (Random123's kat_vectors): counter 0, key 0
 * gives 6627e8d5 e169c58d bc57ac4c 9b00dbd8; seed 0, positions 0..3 are
 * that block, each word w as w * 2^-32 + 2^-33 */
static void test_philox_known_answer(void)
{
    const uint32_t words[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    float got[4];
    rng_philox_uniform(0, 0, got, 4);
    for (int i = 0; i < 4; i++) EXPECTF(got[i] == (float)words[i] * 0x1p-32f + 0x1p-33f, "word %d: %.9g", i, got[i]);
}

static void test_rng_matches_curand(void)
{
#ifndef SAPO_HAVE_CURAND
    SKIP_TEST("built without the CUDA toolkit (no cuRAND to compare with)");
#else
    const uint64_t seeds[] = {0, 1, 42, 1234, 0xdeadbeefcafef00dull};
    /* odd lengths, lengths that straddle a 4-word block and the 65536-block
     * wrap of the subsequence counter, several calls on one generator */
    const size_t lens[] = {1, 3, 7, 4, 262141, 5, 300000, 2, 1048583};
    size_t total = 0;
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) total += lens[i];
    float *a = malloc(total * sizeof *a), *b = malloc(total * sizeof *b);
    for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++) {
        curandGenerator_t gen;
        EXPECT(curandCreateGeneratorHost(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS);
        EXPECT(curandSetPseudoRandomGeneratorSeed(gen, seeds[s]) == CURAND_STATUS_SUCCESS);
        rng_t *r = rng_new(seeds[s]);
        EXPECT(r != NULL);
        float *c = malloc(total * sizeof *c);
        size_t off = 0;
        for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
            EXPECT(curandGenerateUniform(gen, a + off, lens[i]) == CURAND_STATUS_SUCCESS);
            rng_philox_uniform(seeds[s], off, b + off, lens[i]);
            rng_uniform(r, c + off, lens[i]);
            off += lens[i];
        }
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < total; i++)
            if (memcmp(&a[i], &b[i], sizeof(float)) || memcmp(&a[i], &c[i], sizeof(float))) {
                if (!bad++) first = i;
            }
        EXPECTF(bad == 0, "seed %llu: %zu of %zu floats differ, first at %zu: curand %.9g own %.9g rng %.9g",
                (unsigned long long)seeds[s], bad, total, first, a[first], b[first], c[first]);
        free(c);
        rng_destroy(&r);
        EXPECT(r == NULL);
        curandDestroyGenerator(gen);
    }
    /* far offsets (curandSetGeneratorOffset), where the step count
     * carries into the second counter word */
    const uint64_t offsets[] = {262143, 1ull << 32, (1ull << 38) + 3, (1ull << 50) + 1, (1ull << 62) + 7};
    for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++) {
        curandGenerator_t gen;
        EXPECT(curandCreateGeneratorHost(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS);
        EXPECT(curandSetPseudoRandomGeneratorSeed(gen, 99) == CURAND_STATUS_SUCCESS);
        EXPECT(curandSetGeneratorOffset(gen, offsets[o]) == CURAND_STATUS_SUCCESS);
        EXPECT(curandGenerateUniform(gen, a, 1001) == CURAND_STATUS_SUCCESS);
        rng_philox_uniform(99, offsets[o], b, 1001);
        EXPECTF(memcmp(a, b, 1001 * sizeof *a) == 0, "offset %llu differs", (unsigned long long)offsets[o]);
        curandDestroyGenerator(gen);
    }
    free(a);
    free(b);
#endif
}

static void test_rng_range_and_repeat(void)
{
    enum { N = 100003 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    rng_t *r1 = rng_new(7), *r2 = rng_new(7), *r3 = rng_new(8);
    rng_uniform(r1, x, N);
    rng_uniform(r2, y, 10);
    rng_uniform(r2, y + 10, N - 10);
    EXPECT(memcmp(x, y, N * sizeof *x) == 0);
    double mean = 0;
    int out_of_range = 0;
    for (int i = 0; i < N; i++) {
        out_of_range += !(x[i] > 0.0f && x[i] <= 1.0f);
        mean += x[i];
    }
    EXPECT(out_of_range == 0);
    EXPECT_NEAR(mean / N, 0.5, 0.01);
    rng_uniform(r3, y, N);
    EXPECT(memcmp(x, y, N * sizeof *x) != 0);
    rng_destroy(&r1);
    rng_destroy(&r2);
    rng_destroy(&r3);
    free(x);
    free(y);
}

static double ref_logprob(const float *logits, int V, float T, int tok)
{
    double m = -INFINITY, z = 0;
    for (int i = 0; i < V; i++) m = fmax(m, logits[i] / (double)T);
    for (int i = 0; i < V; i++) z += exp(logits[i] / (double)T - m);
    return logits[tok] / (double)T - m - log(z);
}

static void test_greedy(void)
{
    float logits[] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
    int V = 5;
    void *scratch = malloc(sample_scratch_bytes(V));
    sample_params_t p = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f};
    float lp;
    for (float u = 0.05f; u <= 1.0f; u += 0.3f) {
        EXPECT(sample_token(logits, V, &p, u, scratch, &lp) == 1);
        EXPECT_NEAR(lp, ref_logprob(logits, V, 1.0f, 1), 1e-6);
    }
    free(scratch);
}

/* the kept set as Hugging Face computes it: scores/T, top-k by threshold
 * on the k-th largest, then a stable ascending sort, softmax, cumsum, drop
 * while cumsum <= 1 - top_p, keep the largest */
static const double *cmp_scores;

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int cmp_score_then_id(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    double x = cmp_scores[i], y = cmp_scores[j];
    return x < y ? -1 : x > y ? 1 : i - j;
}

static void hf_kept(const float *logits, int V, const sample_params_t *p, int *kept)
{
    double *s = malloc(V * sizeof *s), *sorted = malloc(V * sizeof *sorted);
    int *order = malloc(V * sizeof *order);
    for (int i = 0; i < V; i++) {
        s[i] = logits[i] / (double)p->temperature;
        kept[i] = 1;
    }
    if (p->top_k > 0 && p->top_k < V) {
        memcpy(sorted, s, V * sizeof *s);
        qsort(sorted, V, sizeof *sorted, cmp_desc);
        for (int i = 0; i < V; i++) kept[i] = s[i] >= sorted[p->top_k - 1];
    }
    if (p->top_p < 1.0f) {
        int n = 0;
        double m = -INFINITY, z = 0, cum = 0;
        for (int i = 0; i < V; i++)
            if (kept[i]) {
                order[n++] = i;
                m = fmax(m, s[i]);
            }
        cmp_scores = s;
        qsort(order, n, sizeof *order, cmp_score_then_id);
        for (int i = 0; i < n; i++) z += exp(s[order[i]] - m);
        for (int i = 0; i < n - 1; i++) {
            cum += exp(s[order[i]] - m) / z;
            if (cum > 1.0 - p->top_p) break;
            kept[order[i]] = 0;
        }
    }
    free(s);
    free(sorted);
    free(order);
}

/* draws N tokens and compares frequencies with the renormalised kept set */
static void check_distribution(const float *logits, int V, const sample_params_t *p, uint64_t seed)
{
    enum { N = 200000 };
    int *kept = malloc(V * sizeof *kept);
    long *count = calloc(V, sizeof *count);
    float *u = malloc(N * sizeof *u);
    void *scratch = malloc(sample_scratch_bytes(V));
    hf_kept(logits, V, p, kept);
    rng_t *r = rng_new(seed);
    rng_uniform(r, u, N);
    int outside = 0, bad_lp = 0;
    for (int i = 0; i < N; i++) {
        float lp;
        int t = sample_token(logits, V, p, u[i], scratch, &lp);
        if (t < 0 || t >= V || !kept[t]) {
            outside++;
            continue;
        }
        count[t]++;
        if (fabs(lp - ref_logprob(logits, V, p->temperature, t)) > 1e-5) bad_lp++;
    }
    EXPECTF(outside == 0, "%d draws outside the kept set", outside);
    EXPECTF(bad_lp == 0, "%d log-probs differ from log_softmax(logits / T)", bad_lp);
    double m = -INFINITY, z = 0, chi2 = 0;
    int df = -1;
    for (int i = 0; i < V; i++)
        if (kept[i]) m = fmax(m, logits[i] / (double)p->temperature);
    for (int i = 0; i < V; i++)
        if (kept[i]) z += exp(logits[i] / (double)p->temperature - m);
    for (int i = 0; i < V; i++)
        if (kept[i]) {
            double e = N * exp(logits[i] / (double)p->temperature - m) / z;
            chi2 += (count[i] - e) * (count[i] - e) / e;
            df++;
        }
    /* 99.9% quantile of chi-square: below 2 * df + 30 for every df here */
    EXPECTF(chi2 < 2.0 * df + 30.0, "chi2 %.2f with %d degrees of freedom", chi2, df);
    rng_destroy(&r);
    free(kept);
    free(count);
    free(u);
    free(scratch);
}

static void fill_logits(float *logits, int V, uint64_t seed)
{
    float *u = malloc(V * sizeof *u);
    rng_philox_uniform(seed, 0, u, V);
    for (int i = 0; i < V; i++) logits[i] = 4.0f * u[i] - 2.0f;
    free(u);
}

static void test_distributions(void)
{
    enum { V = 24 };
    float logits[V];
    fill_logits(logits, V, 99);
    logits[5] = logits[6]; /* a tie straddling the top-k boundary is possible */
    const sample_params_t cases[] = {
        {1.0f, 0, 1.0f},  {0.7f, 0, 1.0f}, {1.0f, 5, 1.0f}, {1.3f, 0, 0.8f},
        {0.9f, 10, 0.6f}, {1.0f, 1, 1.0f}, {1.0f, 0, 0.0f}, {2.0f, 30, 0.95f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) check_distribution(logits, V, &cases[c], 1000 + c);
}

static void test_kept_set_large_vocab(void)
{
    /* the fast nucleus path (sorting only the likely tokens) keeps exactly
     * the set a full sort keeps, on a peaked and a flat 50k vocabulary */
    enum { V = 50000 };
    float *logits = malloc(V * sizeof *logits);
    int *kept = malloc(V * sizeof *kept);
    void *scratch = malloc(sample_scratch_bytes(V));
    const sample_params_t cases[] = {{1.0f, 0, 0.9f}, {0.6f, 0, 0.5f}, {1.0f, 40, 0.97f}, {1.0f, 1000, 1.0f}};
    for (int shape = 0; shape < 2; shape++) {
        fill_logits(logits, V, 5 + shape);
        for (int i = 0; shape == 0 && i < V; i++) logits[i] *= 6.0f; /* peaked */
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            hf_kept(logits, V, &cases[c], kept);
            int n = 0, lo = -1, hi = -1, wrong = 0;
            for (int i = 0; i < V; i++) n += kept[i];
            /* u just above 0 walks to the first kept token, u = 1 to the last */
            float lp;
            lo = sample_token(logits, V, &cases[c], 0x1p-33f, scratch, &lp);
            hi = sample_token(logits, V, &cases[c], 1.0f, scratch, &lp);
            int first = -1, last = -1;
            for (int i = 0; i < V; i++)
                if (kept[i]) {
                    if (first < 0) first = i;
                    last = i;
                }
            wrong += lo != first;
            wrong += hi != last;
            /* every u lands on a kept token */
            for (int k = 1; k < 100; k++) wrong += !kept[sample_token(logits, V, &cases[c], k / 100.0f, scratch, &lp)];
            EXPECTF(wrong == 0, "shape %d case %zu (%d kept): first %d/%d last %d/%d, %d wrong", shape, c, n, lo, first,
                    hi, last, wrong);
        }
    }
    free(logits);
    free(kept);
    free(scratch);
}

/* -inf logits (masked tokens) are never drawn, whatever u, and all-NaN
 * logits (a broken model) still give a token inside the vocabulary */
static void test_masked_and_broken_logits(void)
{
    enum { V = 300 };
    float logits[V];
    fill_logits(logits, V, 17);
    for (int i = 0; i < V; i += 3) logits[i] = -INFINITY;
    logits[V - 1] = -INFINITY;
    void *scratch = malloc(sample_scratch_bytes(V));
    const sample_params_t cases[] = {{1.0f, 0, 1.0f}, {0.5f, 0, 1.0f}, {1.0f, 20, 0.9f}};
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int k = 0; k <= 1000; k++) {
            float lp, u = k == 0 ? 0x1p-33f : k / 1000.0f;
            int t = sample_token(logits, V, &cases[c], u, scratch, &lp);
            bad += t < 0 || t >= V || logits[t] == -INFINITY || !isfinite(lp);
        }
    EXPECTF(bad == 0, "%d draws of a masked token", bad);
    for (int i = 0; i < V; i++) logits[i] = NAN;
    const sample_params_t greedy = {0.0f, 0, 1.0f}, hot = {1.0f, 5, 0.5f};
    float lp;
    int t = sample_token(logits, V, &greedy, 0.5f, scratch, &lp);
    EXPECT(t >= 0 && t < V);
    t = sample_token(logits, V, &hot, 0.5f, scratch, &lp);
    EXPECT(t >= 0 && t < V);
    free(scratch);
}

static void test_repeatable_draws(void)
{
    enum { V = 1000, N = 500 };
    float *logits = malloc(V * sizeof *logits), u1[N], u2[N];
    void *scratch = malloc(sample_scratch_bytes(V));
    fill_logits(logits, V, 3);
    sample_params_t p = {0.8f, 50, 0.9f};
    rng_t *a = rng_new(2024), *b = rng_new(2024);
    rng_uniform(a, u1, N);
    rng_uniform(b, u2, N);
    int differ = 0;
    for (int i = 0; i < N; i++) {
        float l1, l2;
        differ +=
            sample_token(logits, V, &p, u1[i], scratch, &l1) != sample_token(logits, V, &p, u2[i], scratch, &l2) ||
            l1 != l2;
    }
    EXPECT(differ == 0);
    rng_destroy(&a);
    rng_destroy(&b);
    free(logits);
    free(scratch);
}

#define KEPT "tests/golden/sampling/kept.txt"

static void test_kept_matches_hf(void)
{
    int n, nc = 0;
    float *cases = golden_array(KEPT, "cases", &n);
    EXPECT(cases != NULL);
    if (cases) nc = (int)cases[0];
    free(cases);
    float *vec[3] = {0};
    int V[3] = {0};
    for (int j = 0; j < 3; j++) {
        char name[32];
        snprintf(name, sizeof name, "logits%d", j);
        vec[j] = golden_array(KEPT, name, &V[j]);
        EXPECT(vec[j] != NULL);
    }
    for (int c = 0; c < nc; c++) {
        char name[32];
        int nk, nl;
        snprintf(name, sizeof name, "params%d", c);
        float *pr = golden_array(KEPT, name, &n);
        snprintf(name, sizeof name, "kept%d", c);
        float *want = golden_array(KEPT, name, &nk);
        snprintf(name, sizeof name, "logsm%d", c);
        float *logsm = golden_array(KEPT, name, &nl);
        int j = pr ? (int)pr[0] : 0;
        if (!pr || !want || !logsm || !vec[j]) {
            EXPECT(pr && want && logsm && vec[j]);
            free(pr);
            free(want);
            free(logsm);
            continue;
        }
        sample_params_t p = {pr[1], (int)pr[2], pr[3]};
        void *scratch = malloc(sample_scratch_bytes(V[j]));
        int *ids = malloc(V[j] * sizeof *ids);
        int got = sample_kept(vec[j], V[j], &p, scratch, ids);
        int same = got == nk;
        for (int i = 0; same && i < nk; i++) same = ids[i] == (int)want[i];
        EXPECTF(same, "case %d (V %d, T %g, top_k %d, top_p %g): %d kept, Hugging Face keeps %d", c, V[j],
                p.temperature, p.top_k, p.top_p, got, nk);
        /* a u that lands on each kept token returns its log_softmax */
        int bad = 0;
        for (int k = 1; k <= 64; k++) {
            float lp;
            int t = sample_token(vec[j], V[j], &p, k / 64.0f, scratch, &lp);
            int at = -1;
            for (int i = 0; i < nk; i++)
                if ((int)want[i] == t) at = i;
            bad += at < 0 || fabsf(lp - logsm[at]) > 2e-6f + 1e-6f * fabsf(logsm[at]);
        }
        EXPECTF(bad == 0, "case %d: %d of 64 draws outside the set or with another log-prob", c, bad);
        free(scratch);
        free(ids);
        free(pr);
        free(want);
        free(logsm);
    }
    EXPECTF(nc >= 27, "only %d golden cases", nc);
    for (int j = 0; j < 3; j++) free(vec[j]);
}

int main(void)
{
    RUN_TEST(test_philox_known_answer);
    RUN_TEST(test_rng_matches_curand);
    RUN_TEST(test_rng_range_and_repeat);
    RUN_TEST(test_greedy);
    RUN_TEST(test_kept_matches_hf);
    RUN_TEST(test_distributions);
    RUN_TEST(test_kept_set_large_vocab);
    RUN_TEST(test_masked_and_broken_logits);
    RUN_TEST(test_repeatable_draws);
    CHECK_EXIT();
}
