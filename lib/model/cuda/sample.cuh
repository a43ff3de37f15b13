/* sample_token (lib/sampling/sample.c) on the GPU: one block of 1024
 * threads per row. Where sample.c sorts and partitions, this searches:
 * the top-k threshold is found bit by bit over order-preserving keys of
 * the logits, the top-p boundary bit by bit over the probabilities' bit
 * patterns (non-negative floats order as their bits do), ties at the
 * boundary split by id as torch's sort does. The draw walks the kept set
 * in token order, each thread a contiguous chunk. Sums are in double, as
 * in sample.c, in another order: a draw may differ only where the CPU's
 * would sit on a rounding tie. */
#ifndef SAPO_CUDA_SAMPLE_CUH
#define SAPO_CUDA_SAMPLE_CUH

#include "kernels.cuh"

#define SAMPLE_THREADS 1024

__device__ inline uint32_t logit_key(float x)
{
    uint32_t u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ inline float key_logit(uint32_t k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

__device__ inline int block_max_int(int v, int *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    int r = lane < nw ? sh[lane] : INT_MIN;
    for (int o = 16; o > 0; o >>= 1) r = max(r, __shfl_xor_sync(0xffffffffu, r, o));
    return r;
}

/* first index of the largest value */
__device__ int block_argmax(const float *x, int V, float *shf, int *shi)
{
    float best = -INFINITY;
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (x[i] > best || bi == INT_MAX) {
            best = x[i];
            bi = i;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
            best = ob;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) {
        shf[wid] = best;
        shi[wid] = bi;
    }
    __syncthreads();
    best = lane < nw ? shf[lane] : -INFINITY;
    bi = lane < nw ? shi[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
            best = ob;
            bi = oi;
        }
    }
    return bi < V ? bi : 0;
}

typedef struct {
    float temperature;
    int top_k;
    float top_p;
} sample_args_t;

/* row i of logits (n, V) draws with u[uidx[i]]; tok and lp (n) */
__global__ void __launch_bounds__(SAMPLE_THREADS) sample_kernel(int *tok_out, float *lp_out, const float *logits, int V,
                                                                const float *u, const int *uidx, sample_args_t sp)
{
    __shared__ float shf[32];
    __shared__ int shi[32];
    __shared__ double shd[32];
    __shared__ double part[SAMPLE_THREADS];
    __shared__ int found;
    const float *x = logits + (size_t)blockIdx.x * V;
    int top = block_argmax(x, V, shf, shi);
    float mx = x[top];
    if (sp.temperature <= 0.0f) {
        float z = 0;
        for (int i = threadIdx.x; i < V; i += blockDim.x) z += expf(x[i] - mx);
        double zd = block_sum((double)z, shd);
        if (threadIdx.x == 0) {
            tok_out[blockIdx.x] = top;
            lp_out[blockIdx.x] = (float)-log(zd);
        }
        return;
    }
    float T = sp.temperature;
#define PROB(i) expf((x[i] - mx) / T)
    double zall = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) zall += PROB(i);
    zall = block_sum(zall, shd);

    /* candidates: logit >= kth (all when top-k is off) */
    float kth = -INFINITY;
    bool topk = sp.top_k > 0 && sp.top_k < V;
    if (topk) {
        uint32_t res = 0;
        for (int bit = 31; bit >= 0; bit--) {
            uint32_t c = res | (1u << bit);
            int cnt = 0;
            for (int i = threadIdx.x; i < V; i += blockDim.x) cnt += logit_key(x[i]) >= c;
            if (block_sum(cnt, shi) >= sp.top_k) res = c;
        }
        kth = key_logit(res);
    }
#define CAND(i) (!topk || x[i] >= kth)
    double zc = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (CAND(i)) zc += PROB(i);
    zc = block_sum(zc, shd);

    /* kept: candidates with p > pb, or p == pb and id >= cut; cut = V
     * keeps only the most likely (highest id among equals) */
    float pb = 0.0f;
    int cut = 0;
    if (sp.top_p < 1.0f) {
        double drop = (1.0 - (double)sp.top_p) * zc;
        if (zc <= drop) {
            float pt = PROB(top);
            int last = -1;
            for (int i = threadIdx.x; i < V; i += blockDim.x)
                if (CAND(i) && PROB(i) == pt) last = i;
            pb = pt;
            cut = block_max_int(last, shi);
        } else {
            /* the smallest pattern th with mass(p <= th) > drop */
            uint32_t res = 0;
            for (int bit = 31; bit >= 0; bit--) {
                uint32_t c = res | (1u << bit);
                double below = 0;
                for (int i = threadIdx.x; i < V; i += blockDim.x) {
                    float p = PROB(i);
                    if (CAND(i) && __float_as_uint(p) < c) below += p;
                }
                if (block_sum(below, shd) <= drop) res = c;
            }
            pb = __uint_as_float(res);
            double f = 0;
            int nt = 0;
            for (int i = threadIdx.x; i < V; i += blockDim.x)
                if (CAND(i)) {
                    float p = PROB(i);
                    if (p < pb) f += p;
                    nt += p == pb;
                }
            f = block_sum(f, shd);
            nt = block_sum(nt, shi);
            /* ties drop lowest id first while the running mass stays <= drop */
            int m = pb > 0.0f ? (int)floor((drop - f) / pb) : nt - 1;
            m = m < 0 ? 0 : (m > nt - 1 ? nt - 1 : m);
            int lo = 0, hi = V - 1;
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2, cnt = 0;
                for (int i = threadIdx.x; i <= mid; i += blockDim.x) cnt += CAND(i) && PROB(i) == pb;
                if (block_sum(cnt, shi) > m) hi = mid;
                else lo = mid + 1;
            }
            cut = lo;
        }
    }
#define KEPT(i, p) (CAND(i) && (sp.top_p >= 1.0f || (p) > pb || ((p) == pb && (i) >= cut)))

    /* the walk: each thread a contiguous chunk of ids */
    int per = (V + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per, hi = min(V, lo + per);
    double mine = 0;
    int last = -1;
    for (int i = lo; i < hi; i++) {
        float p = PROB(i);
        if (KEPT(i, p)) {
            mine += p;
            if (p > 0.0f) last = i;
        }
    }
    part[threadIdx.x] = mine;
    last = block_max_int(last, shi);
    double zk = block_sum(mine, shd);
    double target = (double)u[uidx[blockIdx.x]] * zk;
    if (threadIdx.x == 0) {
        double run = 0;
        found = -1;
        for (int t = 0; t < (int)blockDim.x; t++) {
            if (part[t] > 0 && run + part[t] >= target) {
                found = t;
                break;
            }
            run += part[t];
        }
        if (found >= 0) part[found] = run;
    }
    __syncthreads();
    if ((int)threadIdx.x == found || (found < 0 && threadIdx.x == 0)) {
        int tok = last >= 0 ? last : top;
        if (found >= 0) {
            double run = part[found];
            for (int i = lo; i < hi; i++) {
                float p = PROB(i);
                if (!KEPT(i, p) || p <= 0.0f) continue;
                run += p;
                tok = i;
                if (run >= target) break;
            }
        }
        tok_out[blockIdx.x] = tok;
        lp_out[blockIdx.x] = (float)((double)(x[tok] - mx) / T - log(zall));
    }
#undef KEPT
#undef CAND
#undef PROB
}

#endif
