/* One token from logits. The kept set follows Hugging Face's warpers in
 * their order: temperature, then top-k (every token whose scaled logit
 * reaches the k-th largest, ties included), then top-p (drop the least
 * likely tokens while their ascending cumulative probability, over the
 * top-k survivors, stays <= 1 - top_p; the most likely always stays; equal
 * probabilities drop the lower id first, as torch.sort orders them). The
 * draw is the inverse CDF of the renormalised kept set walked in token
 * order: the first token whose running mass reaches u times the total.
 *
 * Speed at a 150k vocabulary: exp is a branch-free polynomial the compiler
 * vectorises; top-k a min-heap of k logits; top-p drops every token under
 * (1 - top_p) / n of the mass outright, then a quickselect on mass splits
 * the rest around pivots until the drop boundary is found, so nothing is
 * fully sorted, and the kept set is every candidate at or after the
 * boundary in that order, filtered in token order. */
#include "sampling/sample.h"
#include "util/fastexp.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *probs; // (V) unnormalised probabilities exp((l - max) / T)
    int *idx;     // (V) candidate, then kept, token ids
    union {
        float *vals; // (top_k) heap of the largest logits
        int *ids;    // (V) top-p's candidates in token order
    } u;
} scratch_t;

size_t sample_scratch_bytes(int V) { return (size_t)V * (2 * sizeof(float) + sizeof(int)); }

static scratch_t scratch_split(void *mem, int V)
{
    scratch_t s;
    s.probs = mem;
    s.u.vals = s.probs + V;
    s.idx = (int *)(s.probs + 2 * (size_t)V);
    return s;
}

/* the first index of the largest value: the maximum over 8 independent
 * lanes (a loop the compiler vectorises), then a scan for its first place */
static int argmax(const float *x, int V)
{
    float lane[8];
    for (int j = 0; j < 8; j++) lane[j] = x[0];
    int i = 0;
    for (; i + 8 <= V; i += 8)
        for (int j = 0; j < 8; j++) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    float max = lane[0];
    for (int j = 1; j < 8; j++) max = lane[j] > max ? lane[j] : max;
    for (; i < V; i++) max = x[i] > max ? x[i] : max;
    for (i = 0; i < V; i++)
        if (x[i] == max) break;
    return i < V ? i : 0; /* all NaN: a model bug, but never an index past V */
}

/* sum over V of exp((logits - max) / T): float sums over blocks of 1024
 * (vectorised), added in double so the log-prob does not drift with V;
 * each term lands in probs when given */
static double partition(const float *logits, int V, float max, float T, float *probs)
{
    double z = 0.0;
    for (int b = 0; b < V; b += 1024) {
        int end = b + 1024 < V ? b + 1024 : V;
        float zb = 0.0f;
        if (probs) {
#pragma omp simd reduction(+ : zb)
            for (int i = b; i < end; i++) {
                probs[i] = fastexp_nonpos((logits[i] - max) / T);
                zb += probs[i];
            }
        } else {
#pragma omp simd reduction(+ : zb)
            for (int i = b; i < end; i++) zb += fastexp_nonpos((logits[i] - max) / T);
        }
        z += zb;
    }
    return z;
}

static uint32_t xorshift(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static void sift_down(float *heap, int k, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && heap[l] < heap[m]) m = l;
        if (r < k && heap[r] < heap[m]) m = r;
        if (m == i) return;
        float t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/* k-th largest (1 <= k <= V) of x, through a min-heap (k) of the k largest
 * seen so far: most values lose one compare against its root */
static float kth_largest(const float *x, int V, int k, float *heap)
{
    memcpy(heap, x, (size_t)k * sizeof *x);
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(heap, k, i);
    for (int i = k; i < V; i++)
        if (x[i] > heap[0]) {
            heap[0] = x[i];
            sift_down(heap, k, 0);
        }
    return heap[0];
}

/* token a before token b in ascending (probability, id) order */
static inline int before(const float *probs, int a, int b)
{
    return probs[a] < probs[b] || (probs[a] == probs[b] && a < b);
}

/* Top-p over the n candidate ids (mass z): in ascending order a token is
 * dropped while the running mass including it is <= (1 - top_p) z. Finds
 * that boundary by partitioning idx (reordered) around random pivots, all
 * ordered by (probability, id), so the order is strict and ties split as
 * torch's sort does. Returns the first token that stays: the kept set is
 * it and every candidate after it in that order. */
static int nucleus(int *idx, int n, const float *probs, double z, float top_p)
{
    const double drop = (1.0 - (double)top_p) * z;
    double below = 0.0; /* mass of ids known to precede [lo, hi) */
    int lo = 0, hi = n;
    /* ids under drop / n hold less than drop together: all go, first */
    const float tiny = (float)(drop / n);
    for (int i = 0; i < n; i++)
        if (probs[idx[i]] < tiny) {
            int t = idx[i];
            idx[i] = idx[lo];
            idx[lo] = t;
            below += probs[t];
            lo++;
        }
    uint32_t state = 88172645u;
    while (lo < hi) {
        int pv = idx[lo + (int)(xorshift(&state) % (uint32_t)(hi - lo))];
        /* [lo, m): before the pivot; m: the pivot; (m, hi): after it */
        int m = lo;
        double mass = 0.0;
        for (int i = lo; i < hi; i++)
            if (before(probs, idx[i], pv)) {
                int t = idx[i];
                idx[i] = idx[m];
                idx[m] = t;
                mass += probs[t];
                m++;
            }
        for (int i = m; i < hi; i++)
            if (idx[i] == pv) {
                idx[i] = idx[m];
                idx[m] = pv;
                break;
            }
        if (below + mass > drop) hi = m;                     /* the boundary is before the pivot, which stays */
        else if (below + mass + probs[pv] > drop) return pv; /* everything before goes, the pivot stays */
        else {
            below += mass + probs[pv];
            lo = m + 1;
        }
    }
    if (hi < n) return idx[hi]; /* the last pivot found to stay */
    int best = idx[0];          /* all would go: the most likely stays */
    for (int i = 1; i < n; i++)
        if (before(probs, best, idx[i])) best = idx[i];
    return best;
}

/* the kept set in token order into s->idx, probabilities exp((l - max) / T)
 * of every token into s->probs; returns its size, *z its mass and *logz the
 * log of the whole vocabulary's mass */
static int kept_set(const float *logits, int V, const sample_params_t *p, int top, const scratch_t *s, double *z,
                    double *logz)
{
    *z = partition(logits, V, logits[top], p->temperature, s->probs);
    *logz = log(*z);
    int n = V;
    for (int i = 0; i < V; i++) s->idx[i] = i;
    if (p->top_k > 0 && p->top_k < V) {
        float kth = kth_largest(logits, V, p->top_k, s->u.vals);
        n = 0;
        *z = 0.0;
        for (int i = 0; i < V; i++)
            if (logits[i] >= kth) {
                s->idx[n++] = i;
                *z += s->probs[i];
            }
        if (n == 0) { /* NaN logits compare false: keep the argmax */
            s->idx[n++] = top;
            *z = s->probs[top];
        }
    }
    if (p->top_p < 1.0f) {
        /* nucleus reorders idx: keep the candidates in token order in the
         * top-k heap's memory (free by now), or none when all V are */
        int all = n == V;
        if (!all) memcpy(s->u.ids, s->idx, (size_t)n * sizeof *s->idx);
        int first = nucleus(s->idx, n, s->probs, *z, p->top_p);
        int m = 0;
        *z = 0.0;
        for (int i = 0; i < n; i++) {
            int t = all ? i : s->u.ids[i];
            if (!before(s->probs, t, first)) {
                s->idx[m++] = t;
                *z += s->probs[t];
            }
        }
        n = m;
    }
    return n;
}

int sample_kept(const float *logits, int V, const sample_params_t *p, void *scratch, int *ids)
{
    int top = argmax(logits, V);
    if (p->temperature <= 0.0f) {
        ids[0] = top;
        return 1;
    }
    scratch_t s = scratch_split(scratch, V);
    double z, logz;
    int n = kept_set(logits, V, p, top, &s, &z, &logz);
    memcpy(ids, s.idx, (size_t)n * sizeof *ids);
    return n;
}

int sample_token(const float *logits, int V, const sample_params_t *p, float u, void *scratch, float *logprob)
{
    int top = argmax(logits, V);
    float max = logits[top];
    if (p->temperature <= 0.0f) {
        *logprob = (float)-log(partition(logits, V, max, 1.0f, NULL));
        return top;
    }
    scratch_t s = scratch_split(scratch, V);
    double z, logz;
    int n = kept_set(logits, V, p, top, &s, &z, &logz);
    /* z was summed in another order than the walk's, so the walk can end
     * a rounding short of u z: then the last token with any mass, never a
     * masked (-inf) one */
    double target = (double)u * z, run = 0.0;
    int tok = top;
    for (int i = 0; i < n; i++) {
        float pi = s.probs[s.idx[i]];
        run += pi;
        if (pi > 0.0f) tok = s.idx[i];
        if (run >= target && pi > 0.0f) break;
    }
    *logprob = (float)((double)(logits[tok] - max) / p->temperature - logz);
    return tok;
}
