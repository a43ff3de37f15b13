/* One token from logits. The kept set follows Hugging Face's warpers in
 * their order: temperature, then top-k (every token whose scaled logit
 * reaches the k-th largest, ties included), then top-p (drop the least
 * likely tokens while their ascending cumulative probability, over the
 * top-k survivors, stays <= 1 - top_p; the most likely always stays). The
 * draw is the inverse CDF of the renormalised kept set walked in token
 * order: the first token whose running mass reaches u times the total.
 *
 * Speed without a full sort of a 150k vocabulary: top-k is a quickselect;
 * top-p sorts only tokens with probability >= (1 - top_p) / n (n: the tokens
 * top-k kept), because the rest hold less than 1 - top_p together and are
 * all dropped first. */
#include "sampling/sample.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *vals;  // (V) scaled logits, later the quickselect copy
    float *probs; // (V) unnormalised probabilities exp(l - max)
    int *idx;     // (V) kept token ids
} scratch_t;

size_t sample_scratch_bytes(int V) {
    return (size_t)V * (2 * sizeof(float) + sizeof(int));
}

static scratch_t scratch_split(void *mem, int V) {
    scratch_t s;
    s.vals = mem;
    s.probs = s.vals + V;
    s.idx = (int *)(s.probs + V);
    return s;
}

static int argmax(const float *x, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* sum over V of exp((logits - max) / T), in double so the log-prob does not
 * drift with V; each term lands in probs when given */
static double partition(const float *logits, int V, float max, float T, float *probs) {
    double z = 0.0;
    for (int i = 0; i < V; i++) {
        float e = expf((logits[i] - max) / T);
        if (probs)
            probs[i] = e;
        z += e;
    }
    return z;
}

/* k-th largest (k >= 1) of a[0..n), reordering a */
static float kth_largest(float *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    uint32_t state = 2463534242u; // pivot choice only; any sequence is correct
    while (lo < hi) {
        state ^= state << 13; state ^= state >> 17; state ^= state << 5;
        float pivot = a[lo + (int)(state % (uint32_t)(hi - lo + 1))];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                float t = a[i]; a[i] = a[j]; a[j] = t;
                i++; j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

/* ascending probability, ties by ascending id: the order of torch.sort
 * in TopPLogitsWarper, so among equal probabilities the lowest id is
 * dropped first */
static int by_prob_ascending(const void *a, const void *b, void *probs) {
    int ia = *(const int *)a, ib = *(const int *)b;
    float pa = ((const float *)probs)[ia], pb = ((const float *)probs)[ib];
    if (pa != pb)
        return pa < pb ? -1 : 1;
    return ia - ib;
}

static int by_id(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* top-p over the n kept ids (probabilities in probs, total mass z): returns
 * the new count, ids in idx[0..count) */
static int nucleus(int *idx, int n, const float *probs, double z, float top_p) {
    double drop_mass = (1.0 - (double)top_p) * z;
    float tiny = (float)(drop_mass / n);
    double dropped = 0.0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (probs[idx[i]] < tiny)
            dropped += probs[idx[i]];
        else
            idx[m++] = idx[i];
    }
    qsort_r(idx, (size_t)m, sizeof *idx, by_prob_ascending, (void *)probs);
    int first = 0;
    while (first < m - 1 && dropped + probs[idx[first]] <= drop_mass) {
        dropped += probs[idx[first]];
        first++;
    }
    for (int i = first; i < m; i++)
        idx[i - first] = idx[i];
    return m - first;
}

/* the kept set in token order into s->idx, probabilities exp((l - max) / T)
 * of every token into s->probs; returns its size, *z its mass and *logz the
 * log of the whole vocabulary's mass */
static int kept_set(const float *logits, int V, const sample_params_t *p, float max,
                    const scratch_t *s, double *z, double *logz) {
    *z = partition(logits, V, max, p->temperature, s->probs);
    *logz = log(*z);
    int n = V;
    for (int i = 0; i < V; i++)
        s->idx[i] = i;
    if (p->top_k > 0 && p->top_k < V) {
        for (int i = 0; i < V; i++)
            s->vals[i] = logits[i];
        float kth = kth_largest(s->vals, V, p->top_k);
        n = 0;
        *z = 0.0;
        for (int i = 0; i < V; i++)
            if (logits[i] >= kth) {
                s->idx[n++] = i;
                *z += s->probs[i];
            }
    }
    if (p->top_p < 1.0f) {
        n = nucleus(s->idx, n, s->probs, *z, p->top_p);
        qsort(s->idx, (size_t)n, sizeof *s->idx, by_id);
        *z = 0.0;
        for (int i = 0; i < n; i++)
            *z += s->probs[s->idx[i]];
    }
    return n;
}

int sample_kept(const float *logits, int V, const sample_params_t *p, void *scratch, int *ids) {
    int top = argmax(logits, V);
    if (p->temperature <= 0.0f) {
        ids[0] = top;
        return 1;
    }
    scratch_t s = scratch_split(scratch, V);
    double z, logz;
    int n = kept_set(logits, V, p, logits[top], &s, &z, &logz);
    memcpy(ids, s.idx, (size_t)n * sizeof *ids);
    return n;
}

int sample_token(const float *logits, int V, const sample_params_t *p, float u,
                 void *scratch, float *logprob) {
    int top = argmax(logits, V);
    float max = logits[top];
    if (p->temperature <= 0.0f) {
        *logprob = (float)-log(partition(logits, V, max, 1.0f, NULL));
        return top;
    }
    scratch_t s = scratch_split(scratch, V);
    double z, logz;
    int n = kept_set(logits, V, p, max, &s, &z, &logz);
    double target = (double)u * z, run = 0.0;
    int tok = s.idx[n - 1];
    for (int i = 0; i < n; i++) {
        run += s.probs[s.idx[i]];
        if (run >= target) {
            tok = s.idx[i];
            break;
        }
    }
    *logprob = (float)((double)(logits[tok] - max) / p->temperature - logz);
    return tok;
}
