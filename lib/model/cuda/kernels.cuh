/* Device kernels of the CUDA backend, forward/backward pairs as in
 * forward.c, every one on fp32 activations (bf16 is for what cuBLAS reads).
 * Shapes as in model.h; one block per row wherever a row reduces. */
#ifndef SAPO_CUDA_KERNELS_CUH
#define SAPO_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

#define ROW_THREADS 256

// ----------------------------------------------------------------------------
// block reductions (blockDim.x a multiple of 32, at most 1024)

template <typename F> __device__ F warp_sum(F v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* every thread gets the sum; sh holds 32 values of F */
template <typename F> __device__ F block_sum(F v, F *sh)
{
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    F r = lane < nw ? sh[lane] : (F)0;
    return warp_sum(r);
}

__device__ inline float block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(r);
}

// ----------------------------------------------------------------------------
// elementwise

/* a value stored as fp32, or rounded to bf16 as to_bf16_kernel does */
__device__ __forceinline__ void put(float *at, float v) { *at = v; }
__device__ __forceinline__ void put(bf16 *at, float v) { *at = __float2bfloat16_rn(v); }

__global__ void to_bf16_kernel(bf16 *out, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void scale_kernel(float *x, float s, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

/* out (N, OUT) += bias (OUT) */
__global__ void bias_add_kernel(float *out, const float *bias, size_t N, int OUT)
{
    size_t n = N * OUT;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] += bias[i % OUT];
}

/* dbias (OUT) += column sums of dout (N, OUT): one thread per column and
 * stretch of rows (blockIdx.y of gridDim.y), rows read coalesced across
 * the warp, the stretches' sums added atomically */
__global__ void bias_backward_kernel(float *dbias, const float *dout, int N, int OUT)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OUT) return;
    int per = (N + gridDim.y - 1) / gridDim.y, lo = blockIdx.y * per, hi = min(N, lo + per);
    float s = 0;
    for (int n = lo; n < hi; n++) s += dout[(size_t)n * OUT + o];
    if (lo < hi) atomicAdd(dbias + o, s);
}

__global__ void embed_forward_kernel(float *x, const float *wte, const int *tok, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = wte[(size_t)tok[i / C] * C + i % C];
}

/* the same from the embedding's bf16 copy (an inference-only model) */
__global__ void embed_forward_bf16_kernel(float *x, const bf16 *wte, const int *tok, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __bfloat162float(wte[(size_t)tok[i / C] * C + i % C]);
}

/* rows of one token meet in one embedding row: atomics */
__global__ void embed_backward_kernel(float *dwte, const float *dx, const int *tok, int N, int C)
{
    size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        atomicAdd(dwte + (size_t)tok[i / C] * C + i % C, dx[i]);
}

/* h in fp32, or in bf16 for the product that reads it (model_set_direct_bf16) */
template <typename O> __global__ void swiglu_forward_kernel(O *h, const float *g, const float *u, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        put(h + i, g[i] / (1.0f + expf(-g[i])) * u[i]);
}

__global__ void swiglu_backward_kernel(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = 1.0f / (1.0f + expf(-g[i]));
        float d = dh[i];
        du[i] = d * g[i] * s;
        dg[i] = d * u[i] * s * (1.0f + g[i] * (1.0f - s));
    }
}

/* rotate_half RoPE in place on x (N, H, HD), dir -1 turning back */
__global__ void rope_kernel(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD,
                            float dir)
{
    int half = HD / 2;
    size_t n = (size_t)N * H * half;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int j = (int)(i % half);
        size_t row = i / half; /* n * H + h */
        int p = pos[row / H];
        float c = cos_t[(size_t)p * half + j], s = dir * sin_t[(size_t)p * half + j];
        float *v = x + row * HD;
        float a = v[j], b = v[j + half];
        v[j] = a * c - b * s;
        v[j + half] = b * c + a * s;
    }
}

// ----------------------------------------------------------------------------
// RMSNorm: one block per row

/* out in fp32, or in bf16 for the products that read it
 * (model_set_direct_bf16) */
template <typename O>
__global__ void rmsnorm_forward_kernel(O *out, float *rstd, const float *inp, const float *w, int C, float eps)
{
    __shared__ float sh[32];
    const float *x = inp + (size_t)blockIdx.x * C;
    O *o = out + (size_t)blockIdx.x * C;
    float ss = 0;
    for (int i = threadIdx.x; i < C; i += blockDim.x) ss += x[i] * x[i];
    ss = block_sum(ss, sh);
    float r = rsqrtf(ss / C + eps);
    for (int i = threadIdx.x; i < C; i += blockDim.x) put(o + i, w[i] * (x[i] * r));
    if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = r;
}

/* dinp = (or += when acc) the input gradient of rows [0, N); dw += . Each
 * block takes a stretch of rows and sums their dw in shared memory (C
 * floats), added atomically once: per-row atomics on C addresses queued
 * behind each other */
__global__ void rmsnorm_backward_kernel(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                                        const float *rstd, int N, int C, int acc)
{
    extern __shared__ float part[];
    __shared__ float sh[32];
    for (int i = threadIdx.x; i < C; i += blockDim.x) part[i] = 0;
    int per = (N + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(N, lo + per);
    for (int n = lo; n < hi; n++) {
        size_t off = (size_t)n * C;
        const float *x = inp + off, *d = dout + off;
        float *dx = dinp + off;
        float r = rstd[n], s = 0;
        for (int i = threadIdx.x; i < C; i += blockDim.x) s += d[i] * w[i] * x[i];
        s = block_sum(s, sh);
        float k = r * r * r * s / C;
        for (int i = threadIdx.x; i < C; i += blockDim.x) {
            float g = r * d[i] * w[i] - k * x[i];
            dx[i] = acc ? dx[i] + g : g;
            part[i] += d[i] * x[i] * r;
        }
    }
    for (int i = threadIdx.x; i < C; i += blockDim.x)
        if (lo < hi) atomicAdd(dw + i, part[i]);
}

// ----------------------------------------------------------------------------
// attention: a batch's scores and mixes are cuBLAS batched matmuls over
// (B * NH) heads laid out (B, NH, T, HD); these kernels move heads in and
// out of that layout and run the causal softmax and its backward

/* (B, T, H, HD) fp32 -> (B, NH, T, HD) bf16, each of the H input heads
 * repeated NH / H times (GQA: a key/value head for each query head) */
__global__ void heads_split_kernel(bf16 *out, const float *in, int B, int T, int H, int NH, int HD)
{
    size_t n = (size_t)B * NH * T * HD;
    int rep = NH / H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % HD);
        size_t r = i / HD;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH), b = (int)(r / NH);
        out[i] = __float2bfloat16_rn(in[(((size_t)b * T + t) * H + h / rep) * HD + d]);
    }
}

/* (B, NH, T, HD) -> (B, T, H, HD), each group of NH / H heads summed
 * (the gradient of heads_split; a plain transpose when H = NH) */
__global__ void heads_merge_kernel(float *out, const float *in, int B, int T, int H, int NH, int HD)
{
    size_t n = (size_t)B * T * H * HD;
    int rep = NH / H;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % HD);
        size_t r = i / HD;
        int h = (int)(r % H);
        r /= H;
        int t = (int)(r % T), b = (int)(r / T);
        float s = 0;
        for (int j = 0; j < rep; j++) s += in[(((size_t)b * NH + h * rep + j) * T + t) * HD + d];
        out[i] = s;
    }
}

/* Where each head's matrix of up to HEADS_ARRAYS arrays starts, for
 * cuBLAS's products over pointer arrays (model_set_direct_heads): head
 * i = b NH + h of array j at base[j] + (b sb[j] + (h / div[j]) sh[j])
 * elements of es[j] bytes (div: the query heads that share a key/value
 * head). out gets n arrays of B NH pointers, one after the other */
#define HEADS_ARRAYS 6
struct heads_arrays {
    char *base[HEADS_ARRAYS];
    long long sb[HEADS_ARRAYS], sh[HEADS_ARRAYS];
    int div[HEADS_ARRAYS], es[HEADS_ARRAYS];
    int n;
};

__global__ void heads_pointers_kernel(void **out, heads_arrays a, int B, int NH)
{
    int BH = B * NH, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.n * BH) return;
    int j = i / BH, k = i % BH, b = k / NH, h = k % NH;
    out[i] = a.base[j] + (size_t)a.es[j] * (b * a.sb[j] + (h / a.div[j]) * a.sh[j]);
}

/* rows of scores (B * NH * T, T), already scaled, become causal softmax
 * probabilities in place (zero above the diagonal); pb gets them in bf16
 * for the next matmul. One block per row */
__global__ void causal_softmax_kernel(float *s, bf16 *pb, int T)
{
    __shared__ float sh[32];
    size_t row = blockIdx.x;
    int t = (int)(row % T);
    float *r = s + row * T;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, r[j]);
    mx = block_max(mx, sh);
    float sum = 0;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) {
        r[j] = expf(r[j] - mx);
        sum += r[j];
    }
    float inv = 1.0f / block_sum(sum, sh);
    for (int j = threadIdx.x; j < T; j += blockDim.x) {
        float p = j <= t ? r[j] * inv : 0.0f;
        r[j] = p;
        pb[row * T + j] = __float2bfloat16_rn(p);
    }
}

/* ds = p (dp - sum_j p_j dp_j) scale per row, in bf16 for the matmuls
 * that take it to dq and dk */
__global__ void causal_softmax_backward_kernel(bf16 *ds, const float *dp, const float *p, int T, float scale)
{
    __shared__ float sh[32];
    size_t row = blockIdx.x;
    int t = (int)(row % T);
    const float *pr = p + row * T, *dr = dp + row * T;
    float dot = 0;
    for (int j = threadIdx.x; j <= t; j += blockDim.x) dot += pr[j] * dr[j];
    dot = block_sum(dot, sh);
    for (int j = threadIdx.x; j < T; j += blockDim.x)
        ds[row * T + j] = __float2bfloat16_rn(j <= t ? pr[j] * (dr[j] - dot) * scale : 0.0f);
}

/* positions a block of attend scores at once */
#define ATTEND_TILE 1024

/* softmax(q . k_t * scale) over the P cached positions, then y = sum_t
 * p_t v_t, for one query row q (HD) against keys and values KS floats
 * apart. The positions go by tiles of ATTEND_TILE with a running maximum
 * and sum (each tile's weights rescaled by exp(old max - new max)), so
 * shared memory is 2 HD + ATTEND_TILE floats whatever P: a long context is
 * not bounded by the device's shared memory per block, as it was when
 * every score sat there at once (about 12,200 positions at HD 64) */
/* a cached key or value as a float: the cache holds fp32, or bf16 for an
 * inference-only model */
__device__ __forceinline__ float cached(float v) { return v; }
__device__ __forceinline__ float cached(bf16 v) { return __bfloat162float(v); }

template <typename K>
__device__ void attend(float *y, const float *q, const K *kb, const K *vb, int KS, int P, int HD, float scale,
                       float *smem)
{
    __shared__ float sh[32];
    float *qs = smem, *acc = smem + HD, *s = smem + 2 * HD;
    /* acc[i] is only ever touched by thread i % blockDim.x */
    for (int i = threadIdx.x; i < HD; i += blockDim.x) {
        qs[i] = q[i];
        acc[i] = 0;
    }
    __syncthreads();
    float mx = -INFINITY, sum = 0; /* over the tiles so far, alike in every thread */
    for (int t0 = 0; t0 < P; t0 += ATTEND_TILE) {
        int n = min(ATTEND_TILE, P - t0);
        float tm = -INFINITY;
        for (int t = threadIdx.x; t < n; t += blockDim.x) {
            const K *kr = kb + (size_t)(t0 + t) * KS;
            float d = 0;
            for (int i = 0; i < HD; i++) d += qs[i] * cached(kr[i]);
            s[t] = d * scale;
            tm = fmaxf(tm, s[t]);
        }
        float nm = fmaxf(mx, block_max(tm, sh));
        float ts = 0;
        for (int t = threadIdx.x; t < n; t += blockDim.x) {
            s[t] = expf(s[t] - nm);
            ts += s[t];
        }
        float r = expf(mx - nm); /* 0 on the first tile */
        sum = sum * r + block_sum(ts, sh);
        mx = nm;
        __syncthreads();
        for (int i = threadIdx.x; i < HD; i += blockDim.x) {
            float a = acc[i] * r;
            for (int t = 0; t < n; t++) a += s[t] * cached(vb[(size_t)(t0 + t) * KS + i]);
            acc[i] = a;
        }
        __syncthreads(); /* the next tile rewrites s */
    }
    for (int i = threadIdx.x; i < HD; i += blockDim.x) y[i] = acc[i] / sum;
}

/* attend's dynamic shared memory for head size HD */
static inline size_t attend_smem_bytes(int HD) { return (2 * (size_t)HD + ATTEND_TILE) * sizeof(float); }

/* decode: row r (its query heads) against its slot's cached positions
 * [0, pos[r]]; kc and vc (S, maxT, KD) of one layer. grid (R, NH) */
template <typename K>
__global__ void attention_cached_kernel(float *y, const float *q, const K *kc, const K *vc, const int *slot,
                                        const int *pos, int maxT, int NH, int NKV, int HD)
{
    extern __shared__ float smem[];
    int r = blockIdx.x, h = blockIdx.y, rep = NH / NKV, KD = NKV * HD;
    size_t qo = ((size_t)r * NH + h) * HD, ko = (size_t)slot[r] * maxT * KD + (size_t)(h / rep) * HD;
    attend(y + qo, q + qo, kc + ko, vc + ko, KD, pos[r] + 1, HD, rsqrtf((float)HD), smem);
}

/* Decode attention by key/value head (model_set_grouped_decode): one block
 * for row r and key/value head g serves the rep = NH / NKV query heads that
 * share g, so each cached key and value is read from memory once for the
 * group instead of once per query head (7 times at the Qwen2.5-0.5B's 14
 * and 2 heads). Positions go by tiles of GROUPED_TILE: the block copies a
 * tile's keys and values to shared memory (coalesced, as floats), then
 * warp w serves query heads w, w + warps, ...: lane t scores position t of
 * the tile, the warp keeps the head's running maximum and sum (the tile's
 * weights rescaled by exp(old max - new max), as attend does), and each
 * lane adds the weighted values into its dimensions of the head's output.
 * Keys sit HD + 1 floats apart so the lanes' dot products fall in distinct
 * banks. grid (R, NKV), 32 min(rep, GROUPED_WARPS) threads */
#define GROUPED_TILE 32
#define GROUPED_WARPS 8
#define GROUPED_MAX_HD 256

/* its dynamic shared memory: the tile's keys and values, and per query
 * head of the group its scaled query, output so far, maximum and sum */
static inline size_t grouped_smem_bytes(int HD, int rep)
{
    return ((size_t)GROUPED_TILE * (2 * HD + 1) + (size_t)rep * (2 * HD + 2)) * sizeof(float);
}

static inline bool grouped_fits(int HD) { return HD <= GROUPED_MAX_HD; }

static inline int grouped_threads(int rep) { return 32 * (rep < GROUPED_WARPS ? rep : GROUPED_WARPS); }

template <typename K>
__global__ void attention_grouped_kernel(float *y, const float *q, const K *kc, const K *vc, const int *slot,
                                         const int *pos, int maxT, int NH, int NKV, int HD)
{
    extern __shared__ float smem[];
    int r = blockIdx.x, g = blockIdx.y, rep = NH / NKV, KD = NKV * HD, P = pos[r] + 1;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float *ks = smem, *vs = ks + GROUPED_TILE * (HD + 1), *qs = vs + GROUPED_TILE * HD, *acc = qs + rep * HD;
    float *mx = acc + rep * HD, *sum = mx + rep;
    const K *kb = kc + (size_t)slot[r] * maxT * KD + (size_t)g * HD, *vb = vc + (size_t)slot[r] * maxT * KD + g * HD;
    const float *qg = q + ((size_t)r * NH + (size_t)g * rep) * HD;
    float scale = rsqrtf((float)HD);
    for (int i = threadIdx.x; i < rep * HD; i += blockDim.x) {
        qs[i] = qg[i] * scale;
        acc[i] = 0.0f;
    }
    for (int j = threadIdx.x; j < rep; j += blockDim.x) {
        mx[j] = -INFINITY;
        sum[j] = 0.0f;
    }
    for (int t0 = 0; t0 < P; t0 += GROUPED_TILE) {
        int n = min(GROUPED_TILE, P - t0);
        __syncthreads(); /* the last tile's readers are done, the start's writes seen */
        for (int e = threadIdx.x; e < n * HD; e += blockDim.x) {
            int t = e / HD, i = e % HD;
            size_t at = (size_t)(t0 + t) * KD + i;
            ks[t * (HD + 1) + i] = cached(kb[at]);
            vs[t * HD + i] = cached(vb[at]);
        }
        __syncthreads();
        for (int j = warp; j < rep; j += warps) {
            const float *qj = qs + j * HD;
            float s = -INFINITY;
            if (lane < n) {
                const float *kt = ks + lane * (HD + 1);
                s = 0.0f;
                for (int i = 0; i < HD; i++) s += qj[i] * kt[i];
            }
            float old = mx[j], nm = fmaxf(old, warp_max(s));
            float p = lane < n ? expf(s - nm) : 0.0f, ts = warp_sum(p), rescale = expf(old - nm);
            float a[GROUPED_MAX_HD / 32];
#pragma unroll
            for (int k = 0; k < GROUPED_MAX_HD / 32; k++) {
                int i = lane + 32 * k;
                a[k] = i < HD ? acc[j * HD + i] * rescale : 0.0f;
            }
            for (int t = 0; t < n; t++) {
                float pt = __shfl_sync(0xffffffffu, p, t);
#pragma unroll
                for (int k = 0; k < GROUPED_MAX_HD / 32; k++) {
                    int i = lane + 32 * k;
                    if (i < HD) a[k] += pt * vs[t * HD + i];
                }
            }
#pragma unroll
            for (int k = 0; k < GROUPED_MAX_HD / 32; k++) {
                int i = lane + 32 * k;
                if (i < HD) acc[j * HD + i] = a[k];
            }
            __syncwarp(); /* every lane has read mx[j] */
            if (lane == 0) {
                mx[j] = nm;
                sum[j] = sum[j] * rescale + ts;
            }
            __syncwarp();
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < rep * HD; e += blockDim.x)
        y[((size_t)r * NH + (size_t)g * rep) * HD + e] = acc[e] / sum[e / HD];
}

/* rows' keys and values into their (slot, pos) of one layer's cache */
template <typename K>
__global__ void cache_store_kernel(K *kc, K *vc, const float *k, const float *v, const int *slot, const int *pos, int R,
                                   int maxT, int KD)
{
    size_t n = (size_t)R * KD;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / KD, at = ((size_t)slot[r] * maxT + pos[r]) * KD + i % KD;
        put(kc + at, k[i]);
        put(vc + at, v[i]);
    }
}

// ----------------------------------------------------------------------------
// lm_head: log-softmax and the target's log-prob, one block per row

__global__ void logp_forward_kernel(float *logp, float *lse_out, const float *logits, const int *targets, int V,
                                    float inv_t)
{
    __shared__ float sh[32];
    const float *row = logits + (size_t)blockIdx.x * V;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, row[j] * inv_t);
    mx = block_max(mx, sh);
    float s = 0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(row[j] * inv_t - mx);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        float lse = mx + logf(s);
        int tg = targets[blockIdx.x];
        lse_out[blockIdx.x] = lse;
        logp[blockIdx.x] = tg >= 0 ? row[tg] * inv_t - lse : 0.0f;
    }
}

/* d loss / d logit j of a row = dlogp (onehot - softmax) / temperature,
 * from the logit x, the target tg, dlogp d and the row's log-sum-exp l */
__device__ inline float logp_grad(float x, int j, int tg, float d, float l, float inv_t)
{
    float g = d != 0.0f ? -d * expf(x * inv_t - l) * inv_t : 0.0f;
    if (j == tg) g += d * inv_t;
    return g;
}

/* logits row -> its gradient, in place */
__global__ void logp_backward_kernel(float *lg, const float *dlogp, const float *lse, const int *targets, int V,
                                     float inv_t)
{
    float *row = lg + (size_t)blockIdx.x * V;
    int tg = targets[blockIdx.x];
    float d = tg >= 0 ? dlogp[blockIdx.x] : 0.0f, l = lse[blockIdx.x];
    for (int j = threadIdx.x; j < V; j += blockDim.x) row[j] = logp_grad(row[j], j, tg, d, l, inv_t);
}

/* The fused pair (model_set_fused_logp). A row is read as float4 where
 * every row is 16-byte aligned (V a multiple of 4 on an aligned chunk:
 * logp_vec), else a float at a time. */
#define LOGP_THREADS 512

__device__ inline bool logp_vec(const void *p, int V) { return V % 4 == 0 && (uintptr_t)p % 16 == 0; }

/* each thread's running max m and sum s of exp(x - m), x one scaled logit */
__device__ inline void online_add(float &m, float &s, float x)
{
    if (x > m) {
        s = s * expf(m - x) + 1.0f; /* m = -inf at the start: expf(-inf) = 0 */
        m = x;
    } else if (x > -INFINITY) s += expf(x - m); /* -inf adds nothing (and -inf - -inf is NaN) */
}

/* logp_forward_kernel's results in one read of the row: each thread keeps
 * its running max and the sum of exp below it, then the block rescales
 * the sums to the row's max */
__global__ void logp_forward_fused_kernel(float *logp, float *lse_out, const float *logits, const int *targets, int V,
                                          float inv_t)
{
    __shared__ float sh[32];
    const float *row = logits + (size_t)blockIdx.x * V;
    float m = -INFINITY, s = 0.0f;
    if (logp_vec(logits, V)) {
        const float4 *r4 = (const float4 *)row;
        for (int j = threadIdx.x; j < V / 4; j += blockDim.x) {
            float4 x = r4[j];
            online_add(m, s, x.x * inv_t);
            online_add(m, s, x.y * inv_t);
            online_add(m, s, x.z * inv_t);
            online_add(m, s, x.w * inv_t);
        }
    } else
        for (int j = threadIdx.x; j < V; j += blockDim.x) online_add(m, s, row[j] * inv_t);
    float mx = block_max(m, sh);
    float sum = block_sum(m == -INFINITY ? 0.0f : s * expf(m - mx), sh);
    if (threadIdx.x == 0) {
        float lse = mx + logf(sum);
        int tg = targets[blockIdx.x];
        lse_out[blockIdx.x] = lse;
        logp[blockIdx.x] = tg >= 0 ? row[tg] * inv_t - lse : 0.0f;
    }
}

/* logp_backward_kernel's gradient, written in bf16 into out (the input of
 * the products that follow, as to_bf16_kernel would write it); the fp32
 * logits are only read */
__global__ void logp_backward_bf16_kernel(bf16 *out, const float *lg, const float *dlogp, const float *lse,
                                          const int *targets, int V, float inv_t)
{
    const float *row = lg + (size_t)blockIdx.x * V;
    bf16 *o = out + (size_t)blockIdx.x * V;
    int tg = targets[blockIdx.x];
    float d = tg >= 0 ? dlogp[blockIdx.x] : 0.0f, l = lse[blockIdx.x];
    if (logp_vec(lg, V) && (uintptr_t)out % 8 == 0) {
        const float4 *r4 = (const float4 *)row;
        __nv_bfloat162 *o2 = (__nv_bfloat162 *)o;
        for (int j = threadIdx.x; j < V / 4; j += blockDim.x) {
            float4 x = r4[j];
            int k = 4 * j;
            o2[2 * j] =
                __floats2bfloat162_rn(logp_grad(x.x, k, tg, d, l, inv_t), logp_grad(x.y, k + 1, tg, d, l, inv_t));
            o2[2 * j + 1] =
                __floats2bfloat162_rn(logp_grad(x.z, k + 2, tg, d, l, inv_t), logp_grad(x.w, k + 3, tg, d, l, inv_t));
        }
    } else
        for (int j = threadIdx.x; j < V; j += blockDim.x) put(o + j, logp_grad(row[j], j, tg, d, l, inv_t));
}

// ----------------------------------------------------------------------------
// optimizer

/* sum of squares into *out (double), per block in float then atomics */
__global__ void sumsq_kernel(double *out, const float *x, size_t n)
{
    __shared__ float sh[32];
    float s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += x[i] * x[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) atomicAdd(out, (double)s);
}

typedef struct {
    float decay, w1, beta2, c2, step_size, bc2_sqrt, eps;
} adamw_coef_t;

/* adamw.c's update of one parameter by its gradient gi: its moments in
 * m and v, and its new value returned */
__device__ __forceinline__ float adamw_one(float *p, float *m, float *v, size_t i, float gi, const adamw_coef_t &c,
                                           float decay)
{
    float mi = m[i] + c.w1 * (gi - m[i]);
    float vi = v[i] * c.beta2 + c.c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / c.bc2_sqrt + c.eps;
    return p[i] * decay + -c.step_size * (mi / denom);
}

/* adamw.c's update over [0, n) with decay (1 where none) */
__global__ void adamw_kernel(float *p, float *m, float *v, const float *g, size_t n, adamw_coef_t c, float decay)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = adamw_one(p, m, v, i, g[i], c, decay);
}

/* the same update in the pass that would come before it and the one that
 * would come after (model_set_fused_adamw): each gradient times coef, the
 * clipping coefficient, rounded as scale_kernel stores it (__fmul_rn: no
 * multiply-add may absorb it; coef 1 where nothing is clipped, exact),
 * and the new weight's bf16 copy rounded as to_bf16_kernel writes it */
__global__ void adamw_fused_kernel(float *p, float *m, float *v, const float *g, bf16 *wb, size_t n, adamw_coef_t c,
                                   float decay, float coef)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = adamw_one(p, m, v, i, __fmul_rn(g[i], coef), c, decay);
        p[i] = pi;
        wb[i] = __float2bfloat16_rn(pi);
    }
}

#endif
