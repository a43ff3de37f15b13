/* The CUDA backend: forward.c and generate.c on one GPU. Parameters live
 * as fp32 masters (what gradients and AdamW update) and a bf16 copy (what
 * cuBLAS multiplies, accumulating in fp32); activations are fp32, turned
 * into bf16 scratch right before a matmul reads them. A model that only
 * infers (model_set_inference_only) holds the bf16 copy alone, with its
 * norms and biases in fp32, one layer's activations and a bf16 KV cache.
 * Workspaces grow with the largest batch seen, as on the CPU (layout.c
 * lays them out and counts them). Every call runs on the model's own
 * stream and returns once its results are on the host. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.cuh"
#include "sample.cuh"

extern "C" {
#include "model/cuda/cuda_model.h"
#include "model/cuda/layout.h"
#include "model/model_impl.h"
}

struct cuda_model {
    model_t *m;
    int device;
    cudaStream_t st;
    cublasHandle_t blas;
    size_t n;     /* parameters */
    float *p, *g; // (n) fp32 master parameters, gradients; NULL when infer
    bf16 *wb;     // (n) bf16 copy, laid out as the host's parameters
    /* an inference-only model: no p or g; its norms and biases in ps,
     * each tensor at small_off (floats), and stage, what fp32 weights
     * cross on their way up into wb */
    bool infer;
    float *ps, *stage; // (ns), (nstage)
    size_t ns, nstage, small_off[MODEL_NUM_TENSORS];
    float *am, *av; // (n) AdamW moments, allocated by the first step
    /* the optimizer whose moments am and av hold, registered with it as
     * their holder (adamw_hold): it tells c when it steps on the host or
     * goes away, so this pointer is never stale; moments_newer: the device
     * stepped since they were last copied to the host */
    adamw_t *opt;
    bool moments_newer;
    double *norm;          // (1) clip's sum of squares
    model_weights_t w, dw; /* into p and g; an inference-only model's w has its norms and biases alone, in ps */
    /* forward state */
    float *acts;
    size_t acts_cap, dsc_cap, pb_cap, hb_cap, hf_cap, xb_cap, yb_cap, hp_cap, icap, fcap; /* elements allocated */
    model_acts_t a;
    model_grad_acts_t ga;
    float *dsc;                  // (B, NH, T, T) attention backward scratch
    bf16 *pb;                    // (B, NH, T, T) one layer's probabilities, then their gradient, in bf16
    bf16 *hb;                    // (4, B, NH, T, HD) q, k, v, dy by head (direct heads: in their own layout)
    float *hf;                   // (3, B, NH, T, HD) y, or dq, dk, dv, by head
    bf16 *xb, *yb;               // bf16 copies of a matmul's two inputs
    void **hp;                   // (11, B NH) the direct heads' pointer arrays (model_set_direct_heads)
    int *tokens, *targets, *pos; // (N)
    float *logp, *dlogp;         // (N)
    float *rope_cos, *rope_sin;  // (rope_cap, HD/2)
    int rope_cap;
    int B, T;
    float temperature;
    /* the first launch or library call that failed, sticky: every later
     * forward, step, generation or download fails with it, so no step is
     * taken on gradients a failed kernel left behind */
    char failed[256];
    size_t held, peak; /* device bytes this model allocated, now and at most */
    /* decode steps captured into a CUDA graph and replayed from one, over
     * the model's life (model_set_decode_graphs) */
    size_t decode_captures, decode_replays;
    /* attention forward passes that read and wrote their heads in place
     * (model_set_direct_heads) */
    size_t heads_direct;
};

/* cudaMalloc and cudaFree that keep c's own count of device bytes (what
 * cuda_model_memory reports: not the device's use by every process). A
 * failed allocation is the caller's to report and is not c's failure (a
 * smaller batch may fit), so the runtime's last error is cleared: the
 * next launch must not be blamed for it */
static cudaError_t dev_alloc(cuda_model_t *c, void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        fprintf(stderr, "cuda:%d: cannot allocate %zu bytes: %s\n", c->device, bytes, cudaGetErrorString(e));
        return e;
    }
    c->held += bytes;
    if (c->held > c->peak) c->peak = c->held;
    return e;
}

static void dev_free(cuda_model_t *c, void *p, size_t bytes)
{
    if (!p) return;
    cudaFree(p);
    c->held -= bytes < c->held ? bytes : c->held;
}

/* cuBLAS is opened on first use: linked in, its 600 MB of libraries took
 * 0.5-1.5 s and 200 MB to load in every process that holds the model
 * library, GPU or not */
static struct {
    void *lib;
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                           const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                           cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*gemm_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                   const void *, cudaDataType, int, long long, const void *, cudaDataType, int,
                                   long long, const void *, void *, cudaDataType, int, long long, int,
                                   cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*gemm_ptrs)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                const void *const *, cudaDataType, int, const void *const *, cudaDataType, int,
                                const void *, void *const *, cudaDataType, int, int, cublasComputeType_t,
                                cublasGemmAlgo_t);
    char err[300];
} blas_lib;

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_load(void)
{
    char name[64];
    snprintf(name, sizeof name, "libcublas.so.%d", CUBLAS_VER_MAJOR);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(blas_lib.err, sizeof blas_lib.err, "cannot open %s (%s)", name, dlerror());
        return;
    }
    *(void **)&blas_lib.create = dlsym(h, "cublasCreate_v2");
    *(void **)&blas_lib.destroy = dlsym(h, "cublasDestroy_v2");
    *(void **)&blas_lib.set_stream = dlsym(h, "cublasSetStream_v2");
    *(void **)&blas_lib.set_workspace = dlsym(h, "cublasSetWorkspace_v2");
    *(void **)&blas_lib.gemm = dlsym(h, "cublasGemmEx");
    *(void **)&blas_lib.gemm_batched = dlsym(h, "cublasGemmStridedBatchedEx");
    *(void **)&blas_lib.gemm_ptrs = dlsym(h, "cublasGemmBatchedEx");
    if (!blas_lib.create || !blas_lib.destroy || !blas_lib.set_stream || !blas_lib.set_workspace || !blas_lib.gemm ||
        !blas_lib.gemm_batched || !blas_lib.gemm_ptrs) {
        snprintf(blas_lib.err, sizeof blas_lib.err,
                 "%s lacks cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, "
                 "cublasSetWorkspace_v2, cublasGemmEx, cublasGemmStridedBatchedEx or cublasGemmBatchedEx",
                 name);
        dlclose(h);
        return;
    }
    blas_lib.lib = h;
}

/* records the first failure of c (one line on stderr) */
static void failed(cuda_model_t *c, const char *what, const char *why)
{
    if (c->failed[0]) return;
    snprintf(c->failed, sizeof c->failed, "cuda:%d: %s failed: %s", c->device, what, why);
    fprintf(stderr, "%s\n", c->failed);
}

/* a runtime call's error as c's failure, named by the call; 0 or -1 */
static int ck(cuda_model_t *c, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    failed(c, what, cudaGetErrorString(e));
    return -1;
}

#define CK(call) ck(c, (call), #call)

static void blas_check(cuda_model_t *c, cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return;
    char why[64];
    snprintf(why, sizeof why, "cuBLAS status %d", (int)s);
    failed(c, what, why);
}

/* a cuRAND call's error as c's failure; 0 or -1 */
static int rand_check(cuda_model_t *c, curandStatus_t s, const char *what)
{
    if (s == CURAND_STATUS_SUCCESS) return 0;
    char why[64];
    snprintf(why, sizeof why, "cuRAND status %d", (int)s);
    failed(c, what, why);
    return -1;
}

/* after a kernel launch: a launch the device refused (too many threads,
 * too much shared memory, a bad grid) is recorded under the kernel's name */
static void launched(cuda_model_t *c, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) failed(c, kernel, cudaGetErrorString(e));
}

/* a synchronisation of c's stream: an error of any kernel before it
 * (an illegal address, a trap) is recorded; 0 or -1 */
static int synced(cuda_model_t *c, const char *where)
{
    cudaError_t e = cudaStreamSynchronize(c->st);
    if (e != cudaSuccess) failed(c, where, cudaGetErrorString(e));
    return c->failed[0] ? -1 : 0;
}

/* whether c can run work: after a failure nothing runs again on it (one
 * line per refused call) */
static bool usable(cuda_model_t *c)
{
    if (!c->failed[0]) return true;
    fprintf(stderr, "%s earlier; the model on this device is unusable\n", c->failed);
    return false;
}

/* lets kernel use bytes of dynamic shared memory, above the default 48 KB
 * up to what the device allows a block; 0, or -1 recorded */
static int shared_memory(cuda_model_t *c, const void *kernel, const char *name, size_t bytes)
{
    if (bytes <= 48 * 1024) return 0;
    int most = 0;
    if (CK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device))) return -1;
    char why[160];
    if (bytes > (size_t)most) {
        snprintf(why, sizeof why, "needs %zu bytes of shared memory a block, the device allows %d", bytes, most);
        failed(c, name, why);
        return -1;
    }
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess) failed(c, name, cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : -1;
}

static unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : (g > 65535 ? 65535 : g));
}

/* the bf16 copy of a weight matrix, named by its place among the host's
 * parameters (model_layer_weights(&c->m->w, ...)): the copy has their
 * layout, in training and inference alike */
static const bf16 *bw(const cuda_model_t *c, const float *host) { return c->wb + (host - c->m->params); }

static void to_bf16(cuda_model_t *c, bf16 *out, const float *in, size_t n)
{
    to_bf16_kernel<<<grid_for(n), 256, 0, c->st>>>(out, in, n);
    launched(c, "to_bf16_kernel");
}

/* row-major C (M, N) = op(A) op(B) (+ beta C) with bf16 inputs and fp32
 * accumulation: cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T */
static void gemm(cuda_model_t *c, bool ta, bool tb, int M, int N, int K, const bf16 *A, int lda, const bf16 *B, int ldb,
                 float beta, float *C, int ldc)
{
    const float one = 1.0f;
    blas_check(c,
               blas_lib.gemm(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B,
                             CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

/* gemm over batch matrices strideA, strideB, strideC elements apart, with
 * alpha */
static void gemm_batched(cuda_model_t *c, bool ta, bool tb, int M, int N, int K, float alpha, const bf16 *A, int lda,
                         long long sa, const bf16 *B, int ldb, long long sb, float *C, int ldc, long long sc, int batch)
{
    const float zero = 0.0f;
    blas_check(c,
               blas_lib.gemm_batched(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                     &alpha, B, CUDA_R_16BF, ldb, sb, A, CUDA_R_16BF, lda, sa, &zero, C, CUDA_R_32F,
                                     ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

/* out (N, OUT) = inp16 (N, IN, already in bf16) . w^T (+ bias), or +=
 * when acc */
static void matmul_forward_b(cuda_model_t *c, float *out, const bf16 *inp16, const float *w, const float *bias, int N,
                             int IN, int OUT, bool acc)
{
    gemm(c, false, true, N, OUT, IN, inp16, IN, bw(c, w), IN, acc ? 1.0f : 0.0f, out, OUT);
    if (bias) {
        bias_add_kernel<<<grid_for((size_t)N * OUT), 256, 0, c->st>>>(out, bias, N, OUT);
        launched(c, "bias_add_kernel");
    }
}

/* out (N, OUT) = inp (N, IN) . w^T (+ bias), or += when acc */
static void matmul_forward(cuda_model_t *c, float *out, const float *inp, const float *w, const float *bias, int N,
                           int IN, int OUT, bool acc)
{
    to_bf16(c, c->xb, inp, (size_t)N * IN);
    matmul_forward_b(c, out, c->xb, w, bias, N, IN, OUT, acc);
}

/* matmul_backward's products, from dout and inp already in bf16 */
static void matmul_backward_b(cuda_model_t *c, float *dinp, float *dw, const bf16 *dout16, const bf16 *inp16,
                              const float *w, int N, int IN, int OUT, bool acc)
{
    gemm(c, false, false, N, IN, OUT, dout16, OUT, bw(c, w), IN, acc ? 1.0f : 0.0f, dinp, IN);
    gemm(c, true, false, OUT, IN, N, dout16, OUT, inp16, IN, 1.0f, dw, IN);
}

/* matmul_backward from inp already in bf16 (inp16: c->xb, which this
 * leaves as it is) */
static void matmul_backward_x(cuda_model_t *c, float *dinp, float *dw, float *dbias, const float *dout,
                              const bf16 *inp16, const float *w, int N, int IN, int OUT, bool acc)
{
    to_bf16(c, c->yb, dout, (size_t)N * OUT);
    matmul_backward_b(c, dinp, dw, c->yb, inp16, w, N, IN, OUT, acc);
    if (dbias) {
        bias_backward_kernel<<<dim3((OUT + 255) / 256, N < 64 ? N : 64), 256, 0, c->st>>>(dbias, dout, N, OUT);
        launched(c, "bias_backward_kernel");
    }
}

/* dinp (N, IN) = dout . w (or += when acc); dw += dout^T . inp; dbias += */
static void matmul_backward(cuda_model_t *c, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                            const float *w, int N, int IN, int OUT, bool acc)
{
    to_bf16(c, c->xb, inp, (size_t)N * IN);
    matmul_backward_x(c, dinp, dw, dbias, dout, c->xb, w, N, IN, OUT, acc);
}

/* out in fp32, or in bf16 (c->xb) for the products that read it */
template <typename O>
static void rmsnorm_forward(cuda_model_t *c, O *out, float *rstd, const float *inp, const float *w, int N, int C)
{
    rmsnorm_forward_kernel<<<N, ROW_THREADS, 0, c->st>>>(out, rstd, inp, w, C, c->m->cfg.rms_eps);
    launched(c, "rmsnorm_forward_kernel");
}

static void rmsnorm_backward(cuda_model_t *c, float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, const float *rstd, int N, int C, bool acc)
{
    /* enough blocks to fill the GPU, few enough that dw's atomics are rare */
    int blocks = N < 1024 ? N : 1024;
    if (shared_memory(c, (const void *)rmsnorm_backward_kernel, "rmsnorm_backward_kernel", C * sizeof(float))) return;
    rmsnorm_backward_kernel<<<blocks, ROW_THREADS, C * sizeof(float), c->st>>>(dinp, dw, dout, inp, w, rstd, N, C, acc);
    launched(c, "rmsnorm_backward_kernel");
}

static void rope(cuda_model_t *c, float *x, const int *pos, int N, int H, float dir)
{
    int HD = c->m->cfg.HD;
    rope_kernel<<<grid_for((size_t)N * H * HD / 2), 256, 0, c->st>>>(x, pos, c->rope_cos, c->rope_sin, N, H, HD, dir);
    launched(c, "rope_kernel");
}

template <typename O> static void swiglu(cuda_model_t *c, O *h, const float *g, const float *u, size_t n)
{
    swiglu_forward_kernel<<<grid_for(n), 256, 0, c->st>>>(h, g, u, n);
    launched(c, "swiglu_forward_kernel");
}

static void heads_split(cuda_model_t *c, bf16 *out, const float *in, int B, int T, int H)
{
    const model_config_t *cf = &c->m->cfg;
    heads_split_kernel<<<grid_for((size_t)B * cf->NH * T * cf->HD), 256, 0, c->st>>>(out, in, B, T, H, cf->NH, cf->HD);
    launched(c, "heads_split_kernel");
}

static void heads_merge(cuda_model_t *c, float *out, const float *in, int B, int T, int H)
{
    const model_config_t *cf = &c->m->cfg;
    heads_merge_kernel<<<grid_for((size_t)B * T * H * cf->HD), 256, 0, c->st>>>(out, in, B, T, H, cf->NH, cf->HD);
    launched(c, "heads_merge_kernel");
}

// ----------------------------------------------------------------------------
// direct heads (model_set_direct_heads): the attention's batched products
// read each head's matrix where the layers keep it, rows NH HD (or NKV HD)
// apart, through arrays of one pointer per head, so q, k, v and dy are
// only rounded to bf16 in their own layout, a group's key/value head is
// read by each of its query heads rather than copied for it, and y and dq
// are written in place. Scores, probabilities and their gradients stay in
// (B, NH, T, T) as before, and so do the per-head gradients of k and v,
// which heads_merge sums over each group.

static_assert(CUDA_HEADS_FORWARD <= HEADS_ARRAYS && CUDA_HEADS_BACKWARD <= HEADS_ARRAYS,
              "heads_arrays holds a pass's arrays");

static bool on16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* bf16 elements up to a multiple of 8 (16 bytes) */
static size_t up8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Whether B x T's attention runs with direct heads: cuBLAS's tensor-core
 * products want each matrix on 16 bytes and cannot check the pointers of
 * an array, so every one must be. hb, pb, dsc and hf come from cudaMalloc;
 * rows of bf16 heads are on 16 bytes when HD is a multiple of 8, a head's
 * T x T bf16 probabilities when T is a multiple of 4; y and dq (fp32) are
 * one layer's, at the same place in every layer */
static bool heads_direct_fits(const cuda_model_t *c, int T)
{
    const model_config_t *cf = &c->m->cfg;
    return c->m->direct_heads && cf->HD % 8 == 0 && T % 4 == 0 && on16(c->a.y) && on16(c->a.att) &&
           (c->infer || on16(c->ga.dq));
}

/* q, k, v and dy in bf16, each array in hb on 16 bytes (CUDA_HEADS_PAD) */
typedef struct {
    bf16 *q, *k, *v, *dy;
} heads_bf16_t;

static heads_bf16_t heads_bf16(const cuda_model_t *c, size_t N)
{
    const model_config_t *cf = &c->m->cfg;
    size_t QD = (size_t)cf->NH * cf->HD, KD = (size_t)cf->NKV * cf->HD;
    heads_bf16_t h;
    h.q = c->hb;
    h.k = h.q + up8(N * QD);
    h.v = h.k + up8(N * KD);
    h.dy = h.v + up8(N * KD);
    return h;
}

static void heads_pointers(cuda_model_t *c, void **out, const heads_arrays &a, int B)
{
    int NH = c->m->cfg.NH, n = a.n * B * NH;
    heads_pointers_kernel<<<(n + 255) / 256, 256, 0, c->st>>>(out, a, B, NH);
    launched(c, "heads_pointers_kernel");
}

/* gemm_batched over heads named by pointer arrays (bf16 A and B, fp32 C) */
static void gemm_heads(cuda_model_t *c, bool ta, bool tb, int M, int N, int K, float alpha, void *const *A, int lda,
                       void *const *B, int ldb, void *const *C, int ldc, int batch)
{
    const float zero = 0.0f;
    blas_check(c,
               blas_lib.gemm_ptrs(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                  &alpha, (const void *const *)B, CUDA_R_16BF, ldb, (const void *const *)A, CUDA_R_16BF,
                                  lda, &zero, C, CUDA_R_32F, ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmBatchedEx");
}

/* attention_forward with direct heads: c->hp's first CUDA_HEADS_FORWARD
 * arrays name this layer's q, k, v, scores, probabilities and y, which
 * attention_backward_direct reads after it */
static void attention_forward_direct(cuda_model_t *c, float *y, const float *q, const float *k, const float *v, int B,
                                     int T)
{
    const model_config_t *cf = &c->m->cfg;
    int NH = cf->NH, HD = cf->HD, QD = NH * HD, KD = cf->NKV * HD, BH = B * NH, rep = NH / cf->NKV;
    size_t N = (size_t)B * T;
    long long tt = (long long)T * T;
    heads_bf16_t h = heads_bf16(c, N);
    to_bf16(c, h.q, q, N * QD);
    to_bf16(c, h.k, k, N * KD);
    to_bf16(c, h.v, v, N * KD);
    heads_arrays a = {{(char *)h.q, (char *)h.k, (char *)h.v, (char *)c->a.att, (char *)c->pb, (char *)y},
                      {(long long)T * QD, (long long)T * KD, (long long)T * KD, NH * tt, NH * tt, (long long)T * QD},
                      {HD, HD, HD, tt, tt, HD},
                      {1, rep, rep, 1, 1, 1},
                      {2, 2, 2, 4, 2, 4},
                      CUDA_HEADS_FORWARD};
    heads_pointers(c, c->hp, a, B);
    void **Q = c->hp, **K = Q + BH, **V = K + BH, **S = V + BH, **P = S + BH, **Y = P + BH;
    gemm_heads(c, false, true, T, T, HD, 1.0f / sqrtf((float)HD), Q, QD, K, KD, S, T, BH);
    causal_softmax_kernel<<<BH * T, 128, 0, c->st>>>(c->a.att, c->pb, T);
    launched(c, "causal_softmax_kernel");
    gemm_heads(c, false, false, T, HD, T, 1.0f, P, T, V, KD, Y, QD, BH);
    c->heads_direct++;
}

/* attention_backward with direct heads, right after attention_forward_direct
 * ran again for the layer: dq in place, dk and dv by query head in hf,
 * then summed over each group */
static void attention_backward_direct(cuda_model_t *c, float *dq, float *dk, float *dv, const float *dy, int B, int T)
{
    const model_config_t *cf = &c->m->cfg;
    int NH = cf->NH, HD = cf->HD, QD = NH * HD, KD = cf->NKV * HD, BH = B * NH;
    size_t N = (size_t)B * T, hs = N * QD;
    long long tt = (long long)T * T, th = (long long)T * HD;
    heads_bf16_t h = heads_bf16(c, N);
    float *dvh = c->hf, *dkh = dvh + hs;
    to_bf16(c, h.dy, dy, N * QD);
    heads_arrays a = {{(char *)h.dy, (char *)dvh, (char *)c->dsc, (char *)dq, (char *)dkh},
                      {(long long)T * QD, NH * th, NH * tt, (long long)T * QD, NH * th},
                      {HD, th, tt, HD, th},
                      {1, 1, 1, 1, 1},
                      {2, 4, 4, 4, 4},
                      CUDA_HEADS_BACKWARD};
    void **back = c->hp + CUDA_HEADS_FORWARD * BH;
    heads_pointers(c, back, a, B);
    void **Q = c->hp, **K = Q + BH, **V = K + BH, **P = V + 2 * BH;
    void **DY = back, **DV = DY + BH, **DP = DV + BH, **DQ = DP + BH, **DK = DQ + BH;
    // dv = p^T . dy ; dp = dy . v^T
    gemm_heads(c, true, false, T, HD, T, 1.0f, P, T, DY, QD, DV, HD, BH);
    gemm_heads(c, false, true, T, T, HD, 1.0f, DY, QD, V, KD, DP, T, BH);
    causal_softmax_backward_kernel<<<BH * T, 128, 0, c->st>>>(c->pb, c->dsc, c->a.att, T, 1.0f / sqrtf((float)HD));
    launched(c, "causal_softmax_backward_kernel");
    // dq = ds . k ; dk = ds^T . q (pb holds ds now)
    gemm_heads(c, false, false, T, HD, T, 1.0f, P, T, K, KD, DQ, QD, BH);
    gemm_heads(c, true, false, T, HD, T, 1.0f, P, T, Q, QD, DK, HD, BH);
    heads_merge(c, dk, dkh, B, T, cf->NKV);
    heads_merge(c, dv, dvh, B, T, cf->NKV);
}

/* causal GQA attention as forward.c's: q (B, T, NH, HD), k and v
 * (B, T, NKV, HD) of one layer; y (B, T, NH, HD). The heads go to (B, NH,
 * T, HD) in bf16 (c->hb), keys and values repeated per query head, so
 * scores and mixes are two batched matmuls (the masked half is computed
 * and thrown away: tensor cores still win). The probabilities are left in
 * c->a.att (fp32) and c->pb (bf16) for this layer only: model_backward
 * runs this again per layer rather than keep every layer's (L B NH T^2
 * floats, 10.5 GiB at the 0.5B shape and B 8 x T 1,024: docs/cuda.md) */
static void attention_forward(cuda_model_t *c, float *y, const float *q, const float *k, const float *v, int B, int T)
{
    if (heads_direct_fits(c, T)) {
        attention_forward_direct(c, y, q, k, v, B, T);
        return;
    }
    const model_config_t *cf = &c->m->cfg;
    int NH = cf->NH, HD = cf->HD, BH = B * NH;
    size_t hs = (size_t)BH * T * HD;
    float *att = c->a.att;
    bf16 *qh = c->hb, *kh = qh + hs, *vh = kh + hs;
    heads_split(c, qh, q, B, T, NH);
    heads_split(c, kh, k, B, T, cf->NKV);
    heads_split(c, vh, v, B, T, cf->NKV);
    gemm_batched(c, false, true, T, T, HD, 1.0f / sqrtf((float)HD), qh, HD, (long long)T * HD, kh, HD,
                 (long long)T * HD, att, T, (long long)T * T, BH);
    causal_softmax_kernel<<<BH * T, 128, 0, c->st>>>(att, c->pb, T);
    launched(c, "causal_softmax_kernel");
    gemm_batched(c, false, false, T, HD, T, 1.0f, c->pb, T, (long long)T * T, vh, HD, (long long)T * HD, c->hf, HD,
                 (long long)T * HD, BH);
    heads_merge(c, y, c->hf, B, T, NH);
}

/* dq (B, T, NH, HD), dk and dv (B, T, NKV, HD) written, not accumulated;
 * the key/value gradients of a group's query heads add up in heads_merge.
 * Reads the heads and probabilities attention_forward left for this layer
 * (run again just before, with only matmuls between) */
static void attention_backward(cuda_model_t *c, float *dq, float *dk, float *dv, const float *dy, int B, int T)
{
    if (heads_direct_fits(c, T)) {
        attention_backward_direct(c, dq, dk, dv, dy, B, T);
        return;
    }
    const model_config_t *cf = &c->m->cfg;
    int NH = cf->NH, HD = cf->HD, BH = B * NH;
    size_t hs = (size_t)BH * T * HD;
    long long sT = (long long)T * T, sH = (long long)T * HD;
    const float *att = c->a.att;
    bf16 *qh = c->hb, *kh = qh + hs, *vh = kh + hs, *dyh = vh + hs;
    float *dqh = c->hf, *dkh = dqh + hs, *dvh = dkh + hs;
    heads_split(c, dyh, dy, B, T, NH);
    // dv = p^T . dy ; dp = dy . v^T
    gemm_batched(c, true, false, T, HD, T, 1.0f, c->pb, T, sT, dyh, HD, sH, dvh, HD, sH, BH);
    gemm_batched(c, false, true, T, T, HD, 1.0f, dyh, HD, sH, vh, HD, sH, c->dsc, T, sT, BH);
    causal_softmax_backward_kernel<<<BH * T, 128, 0, c->st>>>(c->pb, c->dsc, att, T, 1.0f / sqrtf((float)HD));
    launched(c, "causal_softmax_backward_kernel");
    // dq = ds . k ; dk = ds^T . q
    gemm_batched(c, false, false, T, HD, T, 1.0f, c->pb, T, sT, kh, HD, sH, dqh, HD, sH, BH);
    gemm_batched(c, true, false, T, HD, T, 1.0f, c->pb, T, sT, qh, HD, sH, dkh, HD, sH, BH);
    heads_merge(c, dq, dqh, B, T, NH);
    heads_merge(c, dk, dkh, B, T, cf->NKV);
    heads_merge(c, dv, dvh, B, T, cf->NKV);
}

// ----------------------------------------------------------------------------
// the optimizer's moments, held on its behalf (adamw_hold)

/* the device's moments into the optimizer's arrays, when it stepped since
 * they last went there; 0 or -1 */
static int moments_pull(cuda_model_t *c)
{
    if (!c->opt || !c->moments_newer) return 0;
    if (!usable(c) || CK(cudaSetDevice(c->device)) ||
        CK(cudaMemcpyAsync(adamw_moment(c->opt, 0), c->am, c->n * sizeof(float), cudaMemcpyDeviceToHost, c->st)) ||
        CK(cudaMemcpyAsync(adamw_moment(c->opt, 1), c->av, c->n * sizeof(float), cudaMemcpyDeviceToHost, c->st)) ||
        synced(c, "optimizer moments to the host"))
        return -1;
    c->moments_newer = false;
    return 0;
}

/* what the optimizer asks of c (adamw_holder_fn) */
static int moments_asked(void *holder, adamw_t *opt, adamw_ask_t ask)
{
    cuda_model_t *c = (cuda_model_t *)holder;
    if (c->opt != opt) return 0;
    if (ask == ADAMW_PULL) return moments_pull(c);
    c->opt = NULL;
    c->moments_newer = false;
    return 0;
}

// ----------------------------------------------------------------------------
// life cycle

/* the Linux driver branch that first supports CUDA major version v (the
 * toolkit's release notes); 0 when not known here */
static int driver_branch_for(int major) { return major == 11 ? 450 : major == 12 ? 525 : major == 13 ? 580 : 0; }

/* the loaded NVIDIA kernel module's version ("580.65.06") into v, or "" */
static void driver_loaded(char *v, size_t len)
{
    v[0] = 0;
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[256];
    const char *at;
    if (fgets(line, sizeof line, f) && (at = strstr(line, "Kernel Module"))) {
        at += strlen("Kernel Module");
        while (*at == ' ') at++;
        snprintf(v, len, "%.*s", (int)strcspn(at, " \n"), at);
    }
    fclose(f);
}

int cuda_device_check(int device, char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* which driver was found, and which one this build needs: CUDA
         * versions as 12080 = 12.8 (driver 0: none found) */
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        char module[64], found[128], needed[96];
        driver_loaded(module, sizeof module);
        if (driver)
            snprintf(found, sizeof found, "driver %s for CUDA %d.%d", module[0] ? module : "(version unknown)",
                     driver / 1000, driver % 1000 / 10);
        else
            snprintf(found, sizeof found, "%s",
                     module[0] ? "an NVIDIA kernel module without libcuda" : "no NVIDIA driver");
        int branch = driver_branch_for(runtime / 1000);
        snprintf(needed, sizeof needed, "a driver for CUDA %d.%d", runtime / 1000, runtime % 1000 / 10);
        if (branch) snprintf(needed + strlen(needed), sizeof needed - strlen(needed), " (R%d or later)", branch);
        snprintf(err, errlen, "no CUDA device (%s): found %s, this build needs %s", cudaGetErrorString(e), found,
                 needed);
        return -1;
    }
    if (device < 0 || device >= n) {
        snprintf(err, errlen, "no CUDA device %d (%d present)", device, n);
        return -1;
    }
    return 0;
}

int cuda_device_name(int device, char *name, size_t len)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return -1;
    snprintf(name, len, "%s", prop.name);
    return 0;
}

int cuda_copy_rate(int device, size_t bytes, double *rate, char *err, size_t errlen)
{
    if (cuda_device_check(device, err, errlen)) return -1;
    char *a = NULL, *b = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    float ms = 0;
    const int reps = 5;
    int rc = -1;
    bool ok = cudaSetDevice(device) == cudaSuccess && cudaMalloc(&a, bytes) == cudaSuccess &&
              cudaMalloc(&b, bytes) == cudaSuccess && cudaMemset(a, 1, bytes) == cudaSuccess &&
              cudaEventCreate(&t0) == cudaSuccess && cudaEventCreate(&t1) == cudaSuccess &&
              cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess && /* the first, untimed */
              cudaEventRecord(t0) == cudaSuccess;
    for (int r = 0; ok && r < reps; r++) ok = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess;
    ok = ok && cudaEventRecord(t1) == cudaSuccess && cudaEventSynchronize(t1) == cudaSuccess &&
         cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && ms > 0;
    if (ok) {
        *rate = 2.0 * (double)bytes * reps / (ms / 1e3);
        rc = 0;
    } else
        snprintf(err, errlen, "cuda:%d: timing a copy of %zu bytes failed: %s", device, bytes,
                 cudaGetErrorString(cudaGetLastError()));
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    return rc;
}

int cuda_uniform(int device, uint64_t seed, float *out, size_t n, char *err, size_t errlen)
{
    if (cuda_device_check(device, err, errlen)) return -1;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda:%d: cudaSetDevice failed: %s", device, cudaGetErrorString(e));
        return -1;
    }
    curandGenerator_t gen = NULL;
    float *d = NULL;
    int rc = -1;
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess ||
        curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS ||
        curandSetPseudoRandomGeneratorSeed(gen, seed) != CURAND_STATUS_SUCCESS ||
        curandGenerateUniform(gen, d, n) != CURAND_STATUS_SUCCESS ||
        cudaMemcpy(out, d, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        snprintf(err, errlen, "cuRAND on device %d failed for %zu numbers", device, n);
    else rc = 0;
    if (gen) curandDestroyGenerator(gen);
    cudaFree(d);
    return rc;
}

size_t cuda_model_memory(const cuda_model_t *c) { return c->held; }

size_t cuda_model_memory_peak(const cuda_model_t *c) { return c->peak; }

size_t cuda_model_direct_heads(const cuda_model_t *c) { return c->heads_direct; }

void cuda_model_decode_graphs(const cuda_model_t *c, size_t *captures, size_t *replays)
{
    *captures = c->decode_captures;
    *replays = c->decode_replays;
}

cuda_model_t *cuda_model_new(model_t *m, int device, char *err, size_t errlen)
{
    if (cuda_device_check(device, err, errlen)) return NULL;
    cuda_model_t *c = (cuda_model_t *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "cuda:%d: out of host memory", device);
        return NULL;
    }
    pthread_once(&blas_once, blas_load);
    if (!blas_lib.lib) {
        snprintf(err, errlen, "cuda:%d: %s", device, blas_lib.err);
        free(c);
        return NULL;
    }
    c->m = m;
    c->device = device;
    c->n = m->n_params;
    /* each step names itself in c->failed (or dev_alloc's line) */
    bool ok = CK(cudaSetDevice(device)) == 0 && CK(cudaStreamCreate(&c->st)) == 0;
    if (ok) {
        cublasStatus_t bs = blas_lib.create(&c->blas);
        blas_check(c, bs, "cublasCreate");
        if (bs == CUBLAS_STATUS_SUCCESS) blas_check(c, blas_lib.set_stream(c->blas, c->st), "cublasSetStream");
        ok = !c->failed[0];
    }
    c->infer = m->inference_only;
    if (c->infer) {
        c->ns = cuda_infer_small_floats(m->sizes, c->small_off);
        c->nstage = cuda_infer_stage_floats(c->n);
        ok = ok && dev_alloc(c, (void **)&c->wb, c->n * sizeof(bf16)) == cudaSuccess &&
             dev_alloc(c, (void **)&c->ps, c->ns * sizeof(float)) == cudaSuccess &&
             dev_alloc(c, (void **)&c->stage, c->nstage * sizeof(float)) == cudaSuccess;
        for (int t = 0; ok && t < MODEL_NUM_TENSORS; t++)
            *model_weights_slot(&c->w, t) = m->sizes[t] && !model_tensor_is_matrix(t) ? c->ps + c->small_off[t] : NULL;
        ok = ok && cuda_model_upload(c) == 0;
    } else {
        ok = ok && dev_alloc(c, (void **)&c->p, c->n * sizeof(float)) == cudaSuccess &&
             dev_alloc(c, (void **)&c->g, c->n * sizeof(float)) == cudaSuccess &&
             dev_alloc(c, (void **)&c->wb, c->n * sizeof(bf16)) == cudaSuccess &&
             dev_alloc(c, (void **)&c->norm, sizeof(double)) == cudaSuccess;
        if (ok) {
            model_weights_point(&c->w, c->p, m->sizes);
            model_weights_point(&c->dw, c->g, m->sizes);
            ok = CK(cudaMemsetAsync(c->g, 0, c->n * sizeof(float), c->st)) == 0 && cuda_model_upload(c) == 0;
        }
    }
    if (!ok) {
        if (c->failed[0]) snprintf(err, errlen, "%s", c->failed);
        else if (c->infer)
            snprintf(err, errlen, "cuda:%d: no room for %zu parameters (%.2f GiB in bf16, for inference)", device, c->n,
                     cuda_infer_weight_bytes(&m->cfg) / 1073741824.0);
        else
            snprintf(err, errlen, "cuda:%d: no room for %zu parameters (%.2f GiB with their gradients and bf16 copy)",
                     device, c->n, c->n * 10.0 / 1073741824.0);
        cuda_model_destroy(&c);
    }
    return c;
}

void cuda_model_destroy(cuda_model_t **self_p)
{
    cuda_model_t *c = *self_p;
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->st) cudaStreamSynchronize(c->st);
    /* the optimizer gets the moments of steps not yet synced, and forgets
     * c (which it would otherwise call on its next step or destroy) */
    if (c->opt) {
        if (!c->failed[0]) moments_pull(c);
        adamw_unhold(c->opt, c);
        c->opt = NULL;
    }
    void *bufs[] = {c->p,  c->g,  c->wb, c->ps, c->stage, c->am, c->av,     c->norm, c->acts,     c->dsc,
                    c->pb, c->hb, c->hf, c->xb, c->yb,    c->hp, c->tokens, c->logp, c->rope_cos, c->rope_sin};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cudaFree(bufs[i]);
    if (c->blas) blas_lib.destroy(c->blas);
    if (c->st) cudaStreamDestroy(c->st);
    free(c);
    *self_p = NULL;
}

/* an inference-only model's weights from the host: norms and biases into
 * ps, everything into wb by way of stage (fp32 up, then rounded on the
 * device, as a training model's bf16 copy is) */
static int upload_infer(cuda_model_t *c)
{
    const model_t *m = c->m;
    size_t off = 0;
    for (int t = 0; t < MODEL_NUM_TENSORS; t++) {
        if (m->sizes[t] && !model_tensor_is_matrix(t) &&
            CK(cudaMemcpyAsync(c->ps + c->small_off[t], m->params + off, m->sizes[t] * sizeof(float),
                               cudaMemcpyHostToDevice, c->st)))
            return -1;
        off += m->sizes[t];
    }
    for (size_t at = 0; at < c->n; at += c->nstage) {
        size_t k = c->n - at < c->nstage ? c->n - at : c->nstage;
        /* stage is taken again only once the rounding before has read it */
        if (at && synced(c, "model upload")) return -1;
        if (CK(cudaMemcpyAsync(c->stage, m->params + at, k * sizeof(float), cudaMemcpyHostToDevice, c->st))) return -1;
        to_bf16(c, c->wb + at, c->stage, k);
    }
    return synced(c, "model upload");
}

int cuda_model_upload(cuda_model_t *c)
{
    if (!usable(c) || CK(cudaSetDevice(c->device))) return -1;
    if (c->infer) return upload_infer(c);
    if (CK(cudaMemcpyAsync(c->p, c->m->params, c->n * sizeof(float), cudaMemcpyHostToDevice, c->st))) return -1;
    to_bf16(c, c->wb, c->p, c->n);
    return synced(c, "model upload");
}

int cuda_model_download(cuda_model_t *c)
{
    if (!usable(c) || CK(cudaSetDevice(c->device))) return -1;
    /* nothing on the device is newer than the host's parameters */
    if (c->infer) return 0;
    if (CK(cudaMemcpyAsync(c->m->params, c->p, c->n * sizeof(float), cudaMemcpyDeviceToHost, c->st)) ||
        CK(cudaMemcpyAsync(c->m->grads, c->g, c->n * sizeof(float), cudaMemcpyDeviceToHost, c->st)))
        return -1;
    return synced(c, "model download") || moments_pull(c) ? -1 : 0;
}

void cuda_model_zero_grad(cuda_model_t *c)
{
    if (c->infer || !usable(c) || CK(cudaSetDevice(c->device))) return;
    CK(cudaMemsetAsync(c->g, 0, c->n * sizeof(float), c->st));
}

/* the host's RoPE tables (model.c computes them as transformers does)
 * copied up when a longer sequence arrives */
static int rope_ensure(cuda_model_t *c, int T)
{
    if (T <= c->rope_cap) return 0;
    model_t *m = c->m;
    if (model_rope_ensure(m, T)) return -1;
    size_t bytes = (size_t)m->rope_cap * (m->cfg.HD / 2) * sizeof(float);
    size_t old = (size_t)c->rope_cap * (m->cfg.HD / 2) * sizeof(float);
    dev_free(c, c->rope_cos, old);
    dev_free(c, c->rope_sin, old);
    c->rope_cos = c->rope_sin = NULL;
    c->rope_cap = 0;
    if (dev_alloc(c, (void **)&c->rope_cos, bytes) != cudaSuccess) return -1;
    if (dev_alloc(c, (void **)&c->rope_sin, bytes) != cudaSuccess) {
        dev_free(c, c->rope_cos, bytes);
        c->rope_cos = NULL;
        return -1;
    }
    c->rope_cap = m->rope_cap;
    return CK(cudaMemcpyAsync(c->rope_cos, m->rope_cos, bytes, cudaMemcpyHostToDevice, c->st)) ||
                   CK(cudaMemcpyAsync(c->rope_sin, m->rope_sin, bytes, cudaMemcpyHostToDevice, c->st))
               ? -1
               : 0;
}

// ----------------------------------------------------------------------------
// workspaces

/* *p holds at least need elements of size bytes each, growing (contents
 * lost) when it does not; 0 or -1 */
static int grow(cuda_model_t *c, void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return 0;
    dev_free(c, *p, *cap * size);
    *p = NULL;
    *cap = 0;
    if (dev_alloc(c, p, need * size) != cudaSuccess) return -1;
    *cap = need;
    return 0;
}

/* the workspaces of B x T (cuda_ws_layout's: a training model's, or an
 * inference-only model's one layer) */
static int acts_ensure(cuda_model_t *c, int B, int T)
{
    cuda_ws_t z;
    cuda_ws_layout(&c->m->cfg, c->m->chunk, B, T, c->infer, c->m->recompute, &c->a, &c->ga, NULL, &z);
    if (grow(c, (void **)&c->acts, &c->acts_cap, z.acts, sizeof(float)) ||
        grow(c, (void **)&c->dsc, &c->dsc_cap, z.dsc, sizeof(float)) ||
        grow(c, (void **)&c->pb, &c->pb_cap, z.pb, sizeof(bf16)) ||
        grow(c, (void **)&c->hb, &c->hb_cap, z.hb, sizeof(bf16)) ||
        grow(c, (void **)&c->hf, &c->hf_cap, z.hf, sizeof(float)) ||
        grow(c, (void **)&c->xb, &c->xb_cap, z.xb, sizeof(bf16)) ||
        grow(c, (void **)&c->yb, &c->yb_cap, z.yb, sizeof(bf16)) ||
        grow(c, (void **)&c->hp, &c->hp_cap, z.ptrs, sizeof(void *)) ||
        grow(c, (void **)&c->tokens, &c->icap, z.ints, sizeof(int)) ||
        grow(c, (void **)&c->logp, &c->fcap, z.floats, sizeof(float)))
        return -1;
    cuda_ws_layout(&c->m->cfg, c->m->chunk, B, T, c->infer, c->m->recompute, &c->a, &c->ga, c->acts, &z);
    c->targets = c->tokens + z.N;
    c->pos = c->tokens + 2 * z.N;
    c->dlogp = c->infer ? NULL : c->logp + z.N;
    return rope_ensure(c, T);
}

// ----------------------------------------------------------------------------
// forward and backward

/* the lm_head's matrix among the host's parameters (bw takes it) */
static const float *lm_weight(const cuda_model_t *c) { return c->m->cfg.tie ? c->m->w.wte : c->m->w.lm; }
static float *lm_grad(cuda_model_t *c) { return c->m->cfg.tie ? c->dw.wte : c->dw.lm; }

/* x (N, C) = the embeddings of tok (N, on the device): the fp32 masters',
 * or the bf16 copy's for an inference-only model */
static void embed(cuda_model_t *c, float *x, const int *tok, int N)
{
    int C = c->m->cfg.C;
    if (c->infer)
        embed_forward_bf16_kernel<<<grid_for((size_t)N * C), 256, 0, c->st>>>(x, bw(c, c->m->w.wte), tok, N, C);
    else embed_forward_kernel<<<grid_for((size_t)N * C), 256, 0, c->st>>>(x, c->w.wte, tok, N, C);
    launched(c, c->infer ? "embed_forward_bf16_kernel" : "embed_forward_kernel");
}

/* layer l of the forward pass over the batch's N = B T rows: reads
 * a->x of layer l, writes layer l + 1's and what backward reads again (an
 * inference-only model: its one layer's activations, x in slot 0 and the
 * layer's output in slot 1). w holds the norms and biases, hw names the
 * matrices (bw) */
static void layer_forward(cuda_model_t *c, int l, int B, int T)
{
    const model_config_t *cf = &c->m->cfg;
    int N = B * T, C = cf->C, QD = cf->NH * cf->HD, KD = cf->NKV * cf->HD, FF = cf->FF, HD = cf->HD;
    model_layer_weights_t w = model_layer_weights(&c->w, cf, l), hw = model_layer_weights(&c->m->w, cf, l);
    model_layer_acts_t a = model_layer_acts(&c->a, cf, N, c->infer ? 0 : l);
    if (c->m->direct_bf16) {
        /* the norm writes the three products' bf16 input itself */
        rmsnorm_forward(c, c->xb, a.r1, a.x, w.ln1, N, C);
        matmul_forward_b(c, a.qp, c->xb, hw.wq, w.bq, N, C, QD, false);
        matmul_forward_b(c, a.kp, c->xb, hw.wk, w.bk, N, C, KD, false);
        matmul_forward_b(c, a.v, c->xb, hw.wv, w.bv, N, C, KD, false);
    } else {
        rmsnorm_forward(c, a.ln1, a.r1, a.x, w.ln1, N, C);
        matmul_forward(c, a.qp, a.ln1, hw.wq, w.bq, N, C, QD, false);
        matmul_forward(c, a.kp, a.ln1, hw.wk, w.bk, N, C, KD, false);
        matmul_forward(c, a.v, a.ln1, hw.wv, w.bv, N, C, KD, false);
    }
    if (cf->type == MODEL_QWEN3) {
        rmsnorm_forward(c, a.q, a.rq, a.qp, w.qn, N * cf->NH, HD);
        rmsnorm_forward(c, a.k, a.rk, a.kp, w.kn, N * cf->NKV, HD);
    }
    rope(c, a.q, c->pos, N, cf->NH, 1.0f);
    rope(c, a.k, c->pos, N, cf->NKV, 1.0f);
    attention_forward(c, a.y, a.q, a.k, a.v, B, T);
    CK(cudaMemcpyAsync(a.xm, a.x, (size_t)N * C * sizeof(float), cudaMemcpyDeviceToDevice, c->st));
    matmul_forward(c, a.xm, a.y, hw.wo, w.bo, N, QD, C, true);
    if (c->m->direct_bf16) {
        /* the norm and SwiGLU write their products' bf16 inputs */
        rmsnorm_forward(c, c->xb, a.r2, a.xm, w.ln2, N, C);
        matmul_forward_b(c, a.g, c->xb, hw.wg, NULL, N, C, FF, false);
        matmul_forward_b(c, a.u, c->xb, hw.wu, NULL, N, C, FF, false);
        swiglu(c, c->xb, a.g, a.u, (size_t)N * FF);
        CK(cudaMemcpyAsync(a.xn, a.xm, (size_t)N * C * sizeof(float), cudaMemcpyDeviceToDevice, c->st));
        matmul_forward_b(c, a.xn, c->xb, hw.wd, NULL, N, FF, C, true);
    } else {
        rmsnorm_forward(c, a.ln2, a.r2, a.xm, w.ln2, N, C);
        matmul_forward(c, a.g, a.ln2, hw.wg, NULL, N, C, FF, false);
        matmul_forward(c, a.u, a.ln2, hw.wu, NULL, N, C, FF, false);
        swiglu(c, a.h, a.g, a.u, (size_t)N * FF);
        CK(cudaMemcpyAsync(a.xn, a.xm, (size_t)N * C * sizeof(float), cudaMemcpyDeviceToDevice, c->st));
        matmul_forward(c, a.xn, a.h, hw.wd, NULL, N, FF, C, true);
    }
    /* the next layer's input in slot 0 */
    if (c->infer) CK(cudaMemcpyAsync(a.x, a.xn, (size_t)N * C * sizeof(float), cudaMemcpyDeviceToDevice, c->st));
}

int cuda_model_forward(cuda_model_t *c, const int *tokens, const int *targets, int B, int T, float temperature,
                       float *logp, float *logits)
{
    const model_config_t *cf = &c->m->cfg;
    if (!usable(c) || CK(cudaSetDevice(c->device))) return -1;
    int N = B * T;
    if (acts_ensure(c, B, T)) {
        fprintf(stderr, "model_forward: cuda:%d has no room for a batch of %d x %d\n", c->device, B, T);
        return -1;
    }
    c->B = B;
    c->T = T;
    c->temperature = temperature;
    int *pos = (int *)malloc((size_t)N * sizeof(int));
    if (!pos) return -1;
    for (int n = 0; n < N; n++) pos[n] = n % T;
    CK(cudaMemcpyAsync(c->tokens, tokens, N * sizeof(int), cudaMemcpyHostToDevice, c->st));
    CK(cudaMemcpyAsync(c->targets, targets, N * sizeof(int), cudaMemcpyHostToDevice, c->st));
    CK(cudaMemcpyAsync(c->pos, pos, N * sizeof(int), cudaMemcpyHostToDevice, c->st));

    int C = cf->C;
    model_acts_t *a = &c->a;
    embed(c, a->x, c->tokens, N);
    for (int l = 0; l < cf->L; l++) layer_forward(c, l, B, T);
    rmsnorm_forward(c, a->lnf, a->rf, c->infer ? a->x : a->x + (size_t)cf->L * N * C, c->w.lnf, N, C);
    /* the logits a chunk of rows at a time, never all N x V at once */
    int V = cf->V, chunk = (int)cuda_chunk_rows(c->m->chunk, V, N);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        float *lg = c->ga.logits;
        matmul_forward(c, lg, a->lnf + (size_t)r0 * C, lm_weight(c), NULL, n, C, V, false);
        if (c->m->fused_logp) {
            logp_forward_fused_kernel<<<n, LOGP_THREADS, 0, c->st>>>(c->logp + r0, a->lse + r0, lg, c->targets + r0, V,
                                                                     1.0f / temperature);
            launched(c, "logp_forward_fused_kernel");
        } else {
            logp_forward_kernel<<<n, ROW_THREADS, 0, c->st>>>(c->logp + r0, a->lse + r0, lg, c->targets + r0, V,
                                                              1.0f / temperature);
            launched(c, "logp_forward_kernel");
        }
        if (logits)
            CK(cudaMemcpyAsync(logits + (size_t)r0 * V, lg, (size_t)n * V * sizeof(float), cudaMemcpyDeviceToHost,
                               c->st));
    }
    CK(cudaMemcpyAsync(logp, c->logp, N * sizeof(float), cudaMemcpyDeviceToHost, c->st));
    int rc = synced(c, "model_forward");
    free(pos);
    return rc;
}

/* the attention half of layer l's backward pass: ga->dx holds the gradient
 * of the layer's middle residual, and gets that of its input added */
static void attention_layer_backward(cuda_model_t *c, int l)
{
    const model_config_t *cf = &c->m->cfg;
    int B = c->B, T = c->T, N = B * T;
    int C = cf->C, QD = cf->NH * cf->HD, KD = cf->NKV * cf->HD, HD = cf->HD;
    model_layer_weights_t w = model_layer_weights(&c->w, cf, l), dw = model_layer_weights(&c->dw, cf, l);
    model_layer_weights_t hw = model_layer_weights(&c->m->w, cf, l);
    model_layer_acts_t a = model_layer_acts(&c->a, cf, N, l);
    model_grad_acts_t *ga = &c->ga;
    /* the attention's probabilities and output again */
    attention_forward(c, a.y, a.q, a.k, a.v, B, T);
    matmul_backward(c, ga->dy, dw.wo, dw.bo, ga->dx, a.y, hw.wo, N, QD, C, false);
    attention_backward(c, ga->dq, ga->dk, ga->dv, ga->dy, B, T);
    rope(c, ga->dq, c->pos, N, cf->NH, -1.0f);
    rope(c, ga->dk, c->pos, N, cf->NKV, -1.0f);
    float *dq = ga->dq, *dk = ga->dk;
    if (cf->type == MODEL_QWEN3) {
        /* dy is free again: it takes dq before q_norm, dk2 dk */
        rmsnorm_backward(c, ga->dy, dw.qn, ga->dq, a.qp, w.qn, a.rq, N * cf->NH, HD, false);
        rmsnorm_backward(c, ga->dk2, dw.kn, ga->dk, a.kp, w.kn, a.rk, N * cf->NKV, HD, false);
        dq = ga->dy;
        dk = ga->dk2;
    }
    /* the attention's input again */
    if (c->m->direct_bf16) {
        rmsnorm_forward(c, c->xb, NULL, a.x, w.ln1, N, C);
        matmul_backward_x(c, ga->dln, dw.wq, dw.bq, dq, c->xb, hw.wq, N, C, QD, false);
        matmul_backward_x(c, ga->dln, dw.wk, dw.bk, dk, c->xb, hw.wk, N, C, KD, true);
        matmul_backward_x(c, ga->dln, dw.wv, dw.bv, ga->dv, c->xb, hw.wv, N, C, KD, true);
    } else {
        rmsnorm_forward(c, a.ln1, NULL, a.x, w.ln1, N, C);
        matmul_backward(c, ga->dln, dw.wq, dw.bq, dq, a.ln1, hw.wq, N, C, QD, false);
        matmul_backward(c, ga->dln, dw.wk, dw.bk, dk, a.ln1, hw.wk, N, C, KD, true);
        matmul_backward(c, ga->dln, dw.wv, dw.bv, ga->dv, a.ln1, hw.wv, N, C, KD, true);
    }
    rmsnorm_backward(c, ga->dx, dw.ln1, ga->dln, a.x, w.ln1, a.r1, N, C, true);
}

/* the MLP half of layer l's backward pass: ga->dx holds the gradient of the
 * layer's output, and gets that of its middle residual added */
static void mlp_layer_backward(cuda_model_t *c, int l)
{
    const model_config_t *cf = &c->m->cfg;
    int N = c->B * c->T, C = cf->C, FF = cf->FF;
    model_layer_weights_t w = model_layer_weights(&c->w, cf, l), dw = model_layer_weights(&c->dw, cf, l);
    model_layer_weights_t hw = model_layer_weights(&c->m->w, cf, l);
    model_layer_acts_t a = model_layer_acts(&c->a, cf, N, l);
    model_grad_acts_t *ga = &c->ga;
    /* the MLP's input and hidden activation again: with direct bf16, each
     * in c->xb just before the products that read it */
    bool direct = c->m->direct_bf16;
    if (direct) {
        swiglu(c, c->xb, a.g, a.u, (size_t)N * FF);
        matmul_backward_x(c, ga->dh, dw.wd, NULL, ga->dx, c->xb, hw.wd, N, FF, C, false);
    } else {
        rmsnorm_forward(c, a.ln2, NULL, a.xm, w.ln2, N, C);
        swiglu(c, a.h, a.g, a.u, (size_t)N * FF);
        matmul_backward(c, ga->dh, dw.wd, NULL, ga->dx, a.h, hw.wd, N, FF, C, false);
    }
    swiglu_backward_kernel<<<grid_for((size_t)N * FF), 256, 0, c->st>>>(ga->dg, ga->du, ga->dh, a.g, a.u,
                                                                        (size_t)N * FF);
    launched(c, "swiglu_backward_kernel");
    if (direct) {
        rmsnorm_forward(c, c->xb, NULL, a.xm, w.ln2, N, C);
        matmul_backward_x(c, ga->dln, dw.wg, NULL, ga->dg, c->xb, hw.wg, N, C, FF, false);
        matmul_backward_x(c, ga->dln, dw.wu, NULL, ga->du, c->xb, hw.wu, N, C, FF, true);
    } else {
        matmul_backward(c, ga->dln, dw.wg, NULL, ga->dg, a.ln2, hw.wg, N, C, FF, false);
        matmul_backward(c, ga->dln, dw.wu, NULL, ga->du, a.ln2, hw.wu, N, C, FF, true);
    }
    rmsnorm_backward(c, ga->dx, dw.ln2, ga->dln, a.xm, w.ln2, a.r2, N, C, true);
}

void cuda_model_backward(cuda_model_t *c, const float *dlogp)
{
    const model_config_t *cf = &c->m->cfg;
    if (!usable(c) || CK(cudaSetDevice(c->device))) return;
    int N = c->B * c->T, C = cf->C, V = cf->V;
    model_weights_t *dw = &c->dw;
    const model_acts_t *a = &c->a;
    model_grad_acts_t *ga = &c->ga;
    float inv_t = 1.0f / c->temperature;
    CK(cudaMemcpyAsync(c->dlogp, dlogp, N * sizeof(float), cudaMemcpyHostToDevice, c->st));

    int chunk = (int)cuda_chunk_rows(c->m->chunk, V, N);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        float *lg = ga->logits;
        matmul_forward(c, lg, a->lnf + (size_t)r0 * C, lm_weight(c), NULL, n, C, V, false);
        if (c->m->fused_logp) {
            /* the gradient straight into the products' bf16 input */
            logp_backward_bf16_kernel<<<n, LOGP_THREADS, 0, c->st>>>(c->yb, lg, c->dlogp + r0, a->lse + r0,
                                                                     c->targets + r0, V, inv_t);
            launched(c, "logp_backward_bf16_kernel");
            to_bf16(c, c->xb, a->lnf + (size_t)r0 * C, (size_t)n * C);
            matmul_backward_b(c, ga->dln + (size_t)r0 * C, lm_grad(c), c->yb, c->xb, lm_weight(c), n, C, V, false);
            continue;
        }
        logp_backward_kernel<<<n, ROW_THREADS, 0, c->st>>>(lg, c->dlogp + r0, a->lse + r0, c->targets + r0, V, inv_t);
        launched(c, "logp_backward_kernel");
        matmul_backward(c, ga->dln + (size_t)r0 * C, lm_grad(c), NULL, lg, a->lnf + (size_t)r0 * C, lm_weight(c), n, C,
                        V, false);
    }
    rmsnorm_backward(c, ga->dx, dw->lnf, ga->dln, a->x + (size_t)cf->L * N * C, c->w.lnf, a->rf, N, C, false);
    for (int l = cf->L - 1; l >= 0; l--) {
        if (model_layer_again(c->m, l)) layer_forward(c, l, c->B, c->T);
        mlp_layer_backward(c, l);
        attention_layer_backward(c, l);
    }
    embed_backward_kernel<<<grid_for((size_t)N * C), 256, 0, c->st>>>(dw->wte, ga->dx, c->tokens, N, C);
    launched(c, "embed_backward_kernel");
    synced(c, "model_backward"); /* a failure here stops the next step */
}

// ----------------------------------------------------------------------------
// optimizer

/* the device moments hold opt's. c stays opt's holder from one step to
 * the next; when it is not (a first step, opt stepped on the host or
 * pulled by another device meanwhile, another optimizer), the optimizer c
 * held gets its moments back, and opt's are copied up after any other
 * holder handed them home */
static int moments_for(cuda_model_t *c, adamw_t *opt)
{
    if (adamw_holder(opt) == c && c->opt == opt) return 0;
    if (adamw_size(opt) != c->n) {
        fprintf(stderr, "cuda:%d: optimizer state for %zu parameters, the model has %zu\n", c->device, adamw_size(opt),
                c->n);
        return -1;
    }
    if (c->opt) {
        if (moments_pull(c)) return -1;
        adamw_unhold(c->opt, c);
        c->opt = NULL;
    }
    if (!c->am && dev_alloc(c, (void **)&c->am, c->n * sizeof(float)) != cudaSuccess) return -1;
    if (!c->av && dev_alloc(c, (void **)&c->av, c->n * sizeof(float)) != cudaSuccess) return -1;
    if (adamw_hold(opt, c, moments_asked)) return -1;
    c->opt = opt;
    c->moments_newer = false;
    if (CK(cudaMemcpyAsync(c->am, adamw_moment(opt, 0), c->n * sizeof(float), cudaMemcpyHostToDevice, c->st)) ||
        CK(cudaMemcpyAsync(c->av, adamw_moment(opt, 1), c->n * sizeof(float), cudaMemcpyHostToDevice, c->st))) {
        adamw_unhold(opt, c);
        c->opt = NULL;
        return -1;
    }
    return 0;
}

/* AdamW over the n parameters from offset at; with coef > 0 the fused
 * kernel, which scales the gradients by coef and writes the bf16 copy */
static void adamw_launch(cuda_model_t *c, size_t at, size_t n, adamw_coef_t k, float decay, float coef)
{
    if (coef > 0.0f) {
        adamw_fused_kernel<<<grid_for(n), 256, 0, c->st>>>(c->p + at, c->am + at, c->av + at, c->g + at, c->wb + at, n,
                                                           k, decay, coef);
        launched(c, "adamw_fused_kernel");
    } else {
        adamw_kernel<<<grid_for(n), 256, 0, c->st>>>(c->p + at, c->am + at, c->av + at, c->g + at, n, k, decay);
        launched(c, "adamw_kernel");
    }
}

int cuda_model_step(cuda_model_t *c, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm_out)
{
    /* a failed backward leaves gradients no step may take */
    if (!usable(c) || CK(cudaSetDevice(c->device))) return -1;
    if (moments_for(c, opt)) return -1;
    double ss = 0;
    if (CK(cudaMemsetAsync(c->norm, 0, sizeof(double), c->st))) return -1;
    sumsq_kernel<<<1024, 256, 0, c->st>>>(c->norm, c->g, c->n);
    launched(c, "sumsq_kernel");
    if (CK(cudaMemcpyAsync(&ss, c->norm, sizeof(double), cudaMemcpyDeviceToHost, c->st)) ||
        synced(c, "optimizer step (gradient norm)"))
        return -1;
    float norm = (float)sqrt(ss), coef = 1.0f;
    if (max_norm > 0.0f) {
        float clip = (float)((double)max_norm / ((double)norm + 1e-6));
        if (clip < 1.0f) coef = clip;
    }
    /* fused: the scaling and the bf16 copy inside AdamW's pass */
    bool fused = c->m->fused_adamw;
    if (coef < 1.0f && !fused) {
        scale_kernel<<<grid_for(c->n), 256, 0, c->st>>>(c->g, coef, c->n);
        launched(c, "scale_kernel");
    }
    long step = adamw_steps(opt) + 1;
    double t = (double)step;
    adamw_coef_t k = {
        (float)(1.0 - (double)p->lr * p->weight_decay),
        (float)(1.0 - (double)p->beta1),
        p->beta2,
        (float)(1.0 - (double)p->beta2),
        (float)((double)p->lr / (1.0 - pow(p->beta1, t))),
        (float)sqrt(1.0 - pow(p->beta2, t)),
        p->eps,
    };
    /* decayed stretches between the no-decay ranges (sorted by offset) */
    size_t nr = adamw_no_decay_ranges(opt, NULL, 0);
    size_t *ranges = (size_t *)malloc((2 * nr + 1) * sizeof(size_t));
    if (!ranges) return -1;
    adamw_no_decay_ranges(opt, ranges, nr);
    size_t at = 0;
    for (size_t i = 0; i <= nr; i++) {
        size_t lo = i < nr ? ranges[2 * i] : c->n, hi = i < nr ? lo + ranges[2 * i + 1] : c->n;
        if (lo > at) adamw_launch(c, at, lo - at, k, k.decay, fused ? coef : 0.0f);
        if (hi > lo) adamw_launch(c, lo, hi - lo, k, 1.0f, fused ? coef : 0.0f);
        at = hi > at ? hi : at;
    }
    free(ranges);
    c->moments_newer = true;
    if (!fused) to_bf16(c, c->wb, c->p, c->n);
    if (synced(c, "optimizer step")) return -1;
    adamw_set_steps(opt, step);
    *norm_out = norm;
    return 0;
}

// ----------------------------------------------------------------------------
// generation: generate.c's plan (prefill each prompt into its first slot,
// share its cache, decode every live completion as one batch) with the
// uniforms drawn by cuRAND on the device and the draw made there

typedef struct {
    int S, maxT, R;
    void *kc, *vc;                      // (L, S, maxT, KD) of cache_elem bytes: fp32, or bf16 to infer
    size_t cache_elem;                  //
    float *x, *ln;                      // (R, C)
    float *q, *y;                       // (R, NH*HD)
    float *k, *v;                       // (R, KD)
    float *g, *u;                       // (R, FF)
    float *logits;                      // (max(S, 1), V)
    float *uni;                         // (S, max_new)
    float *lp;                          // (S)
    int *tok, *slot, *pos, *uidx, *out; // (R) each
} dev_ws_t;

/* ws's float arrays into base (cuda_gen_ws_size counts them) */
static void gws_point(dev_ws_t *ws, float *base, const model_config_t *cf, int M)
{
    size_t KD = (size_t)cf->NKV * cf->HD, QD = (size_t)cf->NH * cf->HD, C = cf->C, FF = cf->FF, R = ws->R;
    struct {
        float **p;
        size_t n;
    } t[] = {
        {&ws->x, R * C},
        {&ws->ln, R * C},
        {&ws->q, R * QD},
        {&ws->y, R * QD},
        {&ws->k, R * KD},
        {&ws->v, R * KD},
        {&ws->g, R * FF},
        {&ws->u, R * FF},
        {&ws->logits, (size_t)ws->S * cf->V},
        {&ws->uni, (size_t)ws->S * M},
        {&ws->lp, (size_t)ws->S},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        *t[i].p = base + total;
        total += t[i].n;
    }
}

/* element e of a cache (kc or vc) */
static void *cache_at(const dev_ws_t *ws, void *cache, size_t e) { return (char *)cache + e * ws->cache_elem; }

/* decode attention's kernel for head size HD and rep query heads a
 * key/value head: by key/value head where grouped and HD fits, else by
 * query head (a fixed tile of positions at a time: any context length
 * fits); its shared memory and name */
template <typename K> struct decode_attention {
    bool grouped;
    const void *kernel;
    size_t smem;
    const char *name;
    decode_attention(bool want_grouped, int HD, int rep)
        : grouped(want_grouped && grouped_fits(HD)),
          kernel(grouped ? (const void *)attention_grouped_kernel<K> : (const void *)attention_cached_kernel<K>),
          smem(grouped ? grouped_smem_bytes(HD, rep) : attend_smem_bytes(HD)),
          name(grouped ? "attention_grouped_kernel" : "attention_cached_kernel")
    {
    }
    /* launched on st (its shared memory already allowed) */
    void launch(cudaStream_t st, float *y, const float *q, const K *kc, const K *vc, const int *slot, const int *pos,
                int R, int maxT, int NH, int NKV, int HD) const
    {
        if (grouped)
            attention_grouped_kernel<K>
                <<<dim3(R, NKV), grouped_threads(NH / NKV), smem, st>>>(y, q, kc, vc, slot, pos, maxT, NH, NKV, HD);
        else attention_cached_kernel<K><<<dim3(R, NH), 128, smem, st>>>(y, q, kc, vc, slot, pos, maxT, NH, NKV, HD);
    }
};

/* rows' keys and values into their cache slots, then attention over the
 * cache, for layer l's (kc, vc): the cache's element type decides the
 * kernels' */
template <typename K> static void cached_attention(cuda_model_t *c, dev_ws_t *ws, int l, int R)
{
    const model_config_t *cf = &c->m->cfg;
    int HD = cf->HD, KD = cf->NKV * HD;
    size_t layer = (size_t)ws->S * ws->maxT * KD;
    K *kc = (K *)ws->kc + l * layer, *vc = (K *)ws->vc + l * layer;
    cache_store_kernel<K>
        <<<grid_for((size_t)R * KD), 256, 0, c->st>>>(kc, vc, ws->k, ws->v, ws->slot, ws->pos, R, ws->maxT, KD);
    launched(c, "cache_store_kernel");
    decode_attention<K> a(c->m->grouped_decode, HD, cf->NH / cf->NKV);
    if (shared_memory(c, a.kernel, a.name, a.smem)) return;
    a.launch(c->st, ws->y, ws->q, kc, vc, ws->slot, ws->pos, R, ws->maxT, cf->NH, cf->NKV, HD);
    launched(c, a.name);
}

/* R rows (tok, slot, pos already on the device) through the model; the
 * logits of rows [R - nlog, R) land in ws->logits */
static void gen_step(cuda_model_t *c, dev_ws_t *ws, int R, int nlog)
{
    const model_config_t *cf = &c->m->cfg;
    const model_weights_t *w = &c->w;
    int C = cf->C, HD = cf->HD, QD = cf->NH * HD, KD = cf->NKV * HD, FF = cf->FF;
    embed(c, ws->x, ws->tok, R);
    for (int l = 0; l < cf->L; l++) {
        model_layer_weights_t lw = model_layer_weights(w, cf, l), hw = model_layer_weights(&c->m->w, cf, l);
        rmsnorm_forward(c, ws->ln, NULL, ws->x, lw.ln1, R, C);
        matmul_forward(c, ws->q, ws->ln, hw.wq, lw.bq, R, C, QD, false);
        matmul_forward(c, ws->k, ws->ln, hw.wk, lw.bk, R, C, KD, false);
        matmul_forward(c, ws->v, ws->ln, hw.wv, lw.bv, R, C, KD, false);
        if (cf->type == MODEL_QWEN3) {
            /* y is free until the attention: it holds the pre-norm q, then k */
            CK(cudaMemcpyAsync(ws->y, ws->q, (size_t)R * QD * sizeof(float), cudaMemcpyDeviceToDevice, c->st));
            rmsnorm_forward(c, ws->q, NULL, ws->y, lw.qn, R * cf->NH, HD);
            CK(cudaMemcpyAsync(ws->y, ws->k, (size_t)R * KD * sizeof(float), cudaMemcpyDeviceToDevice, c->st));
            rmsnorm_forward(c, ws->k, NULL, ws->y, lw.kn, R * cf->NKV, HD);
        }
        rope(c, ws->q, ws->pos, R, cf->NH, 1.0f);
        rope(c, ws->k, ws->pos, R, cf->NKV, 1.0f);
        if (c->infer) cached_attention<bf16>(c, ws, l, R);
        else cached_attention<float>(c, ws, l, R);
        matmul_forward(c, ws->x, ws->y, hw.wo, lw.bo, R, QD, C, true);
        rmsnorm_forward(c, ws->ln, NULL, ws->x, lw.ln2, R, C);
        matmul_forward(c, ws->g, ws->ln, hw.wg, NULL, R, C, FF, false);
        matmul_forward(c, ws->u, ws->ln, hw.wu, NULL, R, C, FF, false);
        swiglu(c, ws->g, ws->g, ws->u, (size_t)R * FF);
        matmul_forward(c, ws->x, ws->g, hw.wd, NULL, R, FF, C, true);
    }
    rmsnorm_forward(c, ws->ln, NULL, ws->x + (size_t)(R - nlog) * C, w->lnf, nlog, C);
    matmul_forward(c, ws->logits, ws->ln, lm_weight(c), NULL, nlog, C, cf->V, false);
}

static bool is_eos(const model_config_t *cf, int tok)
{
    for (int i = 0; i < cf->n_eos; i++)
        if (cf->eos_ids[i] == tok) return true;
    return false;
}

/* the L completions of question q draw their uniforms from seeds[q] (the
 * same stream as the CPU path's), M per completion */
static int gen_uniforms(cuda_model_t *c, dev_ws_t *ws, curandGenerator_t gen, const uint64_t *seeds, int Q, int L,
                        int M)
{
    if (rand_check(c, curandSetStream(gen, c->st), "curandSetStream")) return -1;
    for (int q = 0; q < Q; q++)
        if (rand_check(c, curandSetPseudoRandomGeneratorSeed(gen, seeds[q]), "curandSetPseudoRandomGeneratorSeed") ||
            rand_check(c, curandSetGeneratorOffset(gen, 0), "curandSetGeneratorOffset") ||
            rand_check(c, curandGenerateUniform(gen, ws->uni + (size_t)q * L * M, (size_t)L * M),
                       "curandGenerateUniform"))
            return -1;
    return 0;
}

/* each question's prompt once through the model into the cache slot of its
 * first completion, then copied to the other L - 1 slots with the
 * next-token logits; h is host scratch of 3 R ints (tok, slot, pos) */
static void gen_prefill(cuda_model_t *c, dev_ws_t *ws, const int *const *prompts, const int *prompt_lens, int Q, int L,
                        int *h)
{
    const model_config_t *cf = &c->m->cfg;
    int R = ws->R;
    size_t KD = (size_t)cf->NKV * cf->HD, layer = (size_t)ws->S * ws->maxT * KD;
    int *htok = h, *hslot = h + R, *hpos = h + 2 * R;
    /* from the last question down: a prompt's next-token logits land in
     * row 0 and are copied to its other slots' rows; question 0's stay */
    for (int q = Q - 1; q >= 0; q--) {
        int P = prompt_lens[q], s0 = q * L;
        for (int i = 0; i < P; i++) {
            htok[i] = prompts[q][i];
            hslot[i] = s0;
            hpos[i] = i;
        }
        CK(cudaMemcpyAsync(ws->tok, h, 3 * (size_t)R * sizeof(int), cudaMemcpyHostToDevice, c->st));
        gen_step(c, ws, P, 1);
        for (int l = 0; l < cf->L; l++)
            for (int s = s0 + 1; s < s0 + L; s++) {
                size_t from = l * layer + (size_t)s0 * ws->maxT * KD, to = l * layer + (size_t)s * ws->maxT * KD;
                CK(cudaMemcpyAsync(cache_at(ws, ws->kc, to), cache_at(ws, ws->kc, from),
                                   (size_t)P * KD * ws->cache_elem, cudaMemcpyDeviceToDevice, c->st));
                CK(cudaMemcpyAsync(cache_at(ws, ws->vc, to), cache_at(ws, ws->vc, from),
                                   (size_t)P * KD * ws->cache_elem, cudaMemcpyDeviceToDevice, c->st));
            }
        for (int s = s0 + L - 1; s >= s0; s--)
            if (s)
                CK(cudaMemcpyAsync(ws->logits + (size_t)s * cf->V, ws->logits, cf->V * sizeof(float),
                                   cudaMemcpyDeviceToDevice, c->st));
    }
}

/* A generation's decode steps as CUDA graphs (model_set_decode_graphs). A
 * step is some 24 launches a layer, each a few microseconds of the host's
 * time, around kernels that at a few hundred rows take about as long:
 * replayed from a graph they are one launch. A graph holds its rows' count
 * (every grid and product is sized by it), so the second step in a row
 * with R live rows captures gen_step(R) into one, and every later step
 * with R rows replays it; a step with another count runs as launched.
 * The rows' tokens, slots and positions are read from the same device
 * arrays at every step, so a replay computes what a launch would. cuBLAS
 * gets a workspace of its own (it may not allocate while a stream is
 * captured), of the size its documentation recommends for Hopper, so its
 * products have the room they have without graphs. */
typedef struct {
    cudaGraphExec_t exec;
    int exec_rows; /* rows of exec's step; 0: none yet */
    int last_rows; /* rows of the step before */
    void *blas_ws; /* cuBLAS's workspace, CUDA_DECODE_GRAPH_WORKSPACE bytes */
} decode_graph_t;

/* g ready for c's generation: its workspace allocated and given to cuBLAS
 * when the model replays decode steps, nothing otherwise; 0 or -1 */
static int decode_graph_open(cuda_model_t *c, decode_graph_t *g)
{
    memset(g, 0, sizeof *g);
    if (!c->m->decode_graphs) return 0;
    if (dev_alloc(c, &g->blas_ws, CUDA_DECODE_GRAPH_WORKSPACE) != cudaSuccess) {
        fprintf(stderr, "model_generate: cuda:%d has no room for cuBLAS's workspace for decode graphs (%zu MiB)\n",
                c->device, CUDA_DECODE_GRAPH_WORKSPACE >> 20);
        return -1;
    }
    blas_check(c, blas_lib.set_workspace(c->blas, g->blas_ws, CUDA_DECODE_GRAPH_WORKSPACE), "cublasSetWorkspace");
    return c->failed[0] ? -1 : 0;
}

/* cuBLAS back on its own workspace (cublasSetStream restores it) and g's
 * graph and workspace freed, after c's stream has finished with them */
static void decode_graph_close(cuda_model_t *c, decode_graph_t *g)
{
    if (!g->blas_ws) return;
    cudaStreamSynchronize(c->st);
    blas_check(c, blas_lib.set_stream(c->blas, c->st), "cublasSetStream");
    if (g->exec) cudaGraphExecDestroy(g->exec);
    dev_free(c, g->blas_ws, CUDA_DECODE_GRAPH_WORKSPACE);
    memset(g, 0, sizeof *g);
}

/* gen_step(R) captured into g's graph: the one held updated in place when
 * only the launches' arguments differ, else made anew; 0 or -1 */
static int decode_capture(cuda_model_t *c, dev_ws_t *ws, decode_graph_t *g, int R)
{
    cudaGraph_t graph = NULL;
    if (CK(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeRelaxed))) return -1;
    gen_step(c, ws, R, R);
    /* the capture always ends, or the stream stays in it */
    cudaError_t e = cudaStreamEndCapture(c->st, &graph);
    if (ck(c, e, "cudaStreamEndCapture (a decode step)") || c->failed[0]) {
        if (graph) cudaGraphDestroy(graph);
        return -1;
    }
    if (g->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(g->exec, graph, &info) != cudaSuccess) {
            /* another shape of graph (cuBLAS chose other kernels for R
             * rows): not a failure, the error is cleared */
            cudaGetLastError();
            cudaGraphExecDestroy(g->exec);
            g->exec = NULL;
        }
    }
    e = g->exec ? cudaSuccess : cudaGraphInstantiate(&g->exec, graph, 0);
    cudaGraphDestroy(graph);
    if (ck(c, e, "cudaGraphInstantiate (a decode step)")) {
        g->exec = NULL;
        return -1;
    }
    g->exec_rows = R;
    c->decode_captures++;
    return 0;
}

/* one decode step of R rows (tok, slot, pos on the device), their logits
 * into ws->logits: launched, or replayed from g's graph */
static int decode_step(cuda_model_t *c, dev_ws_t *ws, decode_graph_t *g, int R)
{
    bool again = R == g->last_rows;
    g->last_rows = R;
    if (!g->blas_ws || (R != g->exec_rows && !again)) {
        gen_step(c, ws, R, R);
        return c->failed[0] ? -1 : 0;
    }
    if (R != g->exec_rows && decode_capture(c, ws, g, R)) return -1;
    c->decode_replays++;
    return CK(cudaGraphLaunch(g->exec, c->st));
}

/* one token per live completion per step until every one has finished
 * (max_new, an end of sequence, or gp->stop); h is host scratch of 4 R + S
 * ints, hlp of S floats */
static int gen_decode(cuda_model_t *c, dev_ws_t *ws, decode_graph_t *g, const int *prompt_lens, int L,
                      const model_gen_params_t *gp, int *tokens, float *logp, int *lengths, int *h, float *hlp)
{
    const model_config_t *cf = &c->m->cfg;
    int R = ws->R, S = ws->S, M = gp->max_new;
    int *htok = h, *hslot = h + R, *hpos = h + 2 * R, *huidx = h + 3 * R, *live = h + 4 * R;
    sample_args_t sa = {gp->sample.temperature, gp->sample.top_k, gp->sample.top_p};
    int nlive = S;
    for (int s = 0; s < S; s++) {
        live[s] = s;
        lengths[s] = 0;
    }
    for (int t = 0; nlive > 0; t++) {
        for (int i = 0; i < nlive; i++) huidx[i] = live[i] * M + t;
        CK(cudaMemcpyAsync(ws->uidx, huidx, nlive * sizeof(int), cudaMemcpyHostToDevice, c->st));
        sample_kernel<<<nlive, SAMPLE_THREADS, 0, c->st>>>(ws->out, ws->lp, ws->logits, cf->V, ws->uni, ws->uidx, sa);
        launched(c, "sample_kernel");
        CK(cudaMemcpyAsync(htok, ws->out, nlive * sizeof(int), cudaMemcpyDeviceToHost, c->st));
        CK(cudaMemcpyAsync(hlp, ws->lp, nlive * sizeof(float), cudaMemcpyDeviceToHost, c->st));
        if (synced(c, "model_generate (a decode step)")) return -1;
        int keep = 0;
        for (int i = 0; i < nlive; i++) {
            int s = live[i], tok = htok[i];
            tokens[(size_t)s * M + t] = tok;
            logp[(size_t)s * M + t] = hlp[i];
            lengths[s] = t + 1;
            bool fin =
                t + 1 == M || is_eos(cf, tok) || (gp->stop && gp->stop(gp->stop_ctx, s, tokens + (size_t)s * M, t + 1));
            if (fin) continue;
            live[keep] = s;
            htok[keep] = tok;
            hslot[keep] = s;
            hpos[keep] = prompt_lens[s / L] + t;
            keep++;
        }
        nlive = keep;
        if (!nlive) break;
        CK(cudaMemcpyAsync(ws->tok, htok, nlive * sizeof(int), cudaMemcpyHostToDevice, c->st));
        CK(cudaMemcpyAsync(ws->slot, hslot, nlive * sizeof(int), cudaMemcpyHostToDevice, c->st));
        CK(cudaMemcpyAsync(ws->pos, hpos, nlive * sizeof(int), cudaMemcpyHostToDevice, c->st));
        if (decode_step(c, ws, g, nlive)) return -1;
    }
    return synced(c, "model_generate");
}

int cuda_model_generate_batch(cuda_model_t *c, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds,
                              int Q, int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths)
{
    const model_config_t *cf = &c->m->cfg;
    if (!usable(c) || CK(cudaSetDevice(c->device))) return -1;
    int M = gp->max_new, maxP = 0;
    for (int q = 0; q < Q; q++) maxP = prompt_lens[q] > maxP ? prompt_lens[q] : maxP;
    cuda_gen_ws_t z;
    cuda_gen_ws_size(cf, Q, L, maxP, M, c->infer, &z);
    int S = z.S, R = z.R;
    dev_ws_t ws = {};
    ws.S = S;
    ws.maxT = z.maxT;
    ws.R = R;
    ws.cache_elem = z.cache_elem;
    float *mem = NULL;
    void *kc = NULL, *vc = NULL;
    int *imem = NULL, *h = (int *)malloc((4 * (size_t)R + S) * sizeof(int));
    float *hlp = (float *)malloc((size_t)S * sizeof(float));
    curandGenerator_t gen = NULL;
    decode_graph_t graphs = {};
    int rc = -1;
    bf16 *oxb = c->xb, *oyb = c->yb;
    bf16 *gxb = NULL;
    if (!h || !hlp || rope_ensure(c, ws.maxT) || dev_alloc(c, (void **)&mem, z.floats * sizeof(float)) != cudaSuccess ||
        dev_alloc(c, &kc, z.cache * z.cache_elem) != cudaSuccess ||
        dev_alloc(c, &vc, z.cache * z.cache_elem) != cudaSuccess ||
        dev_alloc(c, (void **)&imem, z.ints * sizeof(int)) != cudaSuccess ||
        dev_alloc(c, (void **)&gxb, z.xb * sizeof(bf16)) != cudaSuccess ||
        curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) != CURAND_STATUS_SUCCESS) {
        fprintf(stderr, "model_generate: cuda:%d has no room for %d completions of %d tokens\n", c->device, S, ws.maxT);
        goto done;
    }
    /* generation's matmul inputs take their own bf16 scratch: the forward
     * pass's may be smaller, or absent */
    c->xb = gxb;
    gws_point(&ws, mem, cf, M);
    ws.kc = kc;
    ws.vc = vc;
    ws.tok = imem;
    ws.slot = imem + R;
    ws.pos = imem + 2 * R;
    ws.uidx = imem + 3 * R;
    ws.out = imem + 4 * R;
    if (gen_uniforms(c, &ws, gen, seeds, Q, L, M) || decode_graph_open(c, &graphs)) goto done;
    gen_prefill(c, &ws, prompts, prompt_lens, Q, L, h);
    rc = gen_decode(c, &ws, &graphs, prompt_lens, L, gp, tokens, logp, lengths, h, hlp);
done:
    decode_graph_close(c, &graphs);
    c->xb = oxb;
    c->yb = oyb;
    if (gen) curandDestroyGenerator(gen);
    dev_free(c, gxb, z.xb * sizeof(bf16));
    dev_free(c, imem, z.ints * sizeof(int));
    dev_free(c, vc, z.cache * z.cache_elem);
    dev_free(c, kc, z.cache * z.cache_elem);
    dev_free(c, mem, z.floats * sizeof(float));
    free(hlp);
    free(h);
    return rc;
}

int cuda_sample(int device, const float *logits, int n, int V, const sample_params_t *sp, const float *u, int *tok,
                float *lp, char *err, size_t errlen)
{
    if (cuda_device_check(device, err, errlen)) return -1;
    float *dl = NULL, *du = NULL, *dlp = NULL;
    int *di = NULL;
    sample_args_t sa = {sp->temperature, sp->top_k, sp->top_p};
    int *idx = (int *)malloc((size_t)n * sizeof(int));
    for (int i = 0; idx && i < n; i++) idx[i] = i;
    /* the first call that fails names itself in err */
    const char *what = "cudaSetDevice";
    cudaError_t e = cudaSetDevice(device);
    size_t nb = (size_t)n * sizeof(float), lb = nb * V;
    if (e == cudaSuccess) {
        what = "cudaMalloc";
        e = cudaMalloc(&dl, lb);
    }
    if (e == cudaSuccess) e = cudaMalloc(&du, nb);
    if (e == cudaSuccess) e = cudaMalloc(&dlp, nb);
    if (e == cudaSuccess) e = cudaMalloc(&di, 2 * (size_t)n * sizeof(int));
    if (e == cudaSuccess) {
        what = "cudaMemcpy";
        e = cudaMemcpy(dl, logits, lb, cudaMemcpyHostToDevice);
    }
    if (e == cudaSuccess) e = cudaMemcpy(du, u, nb, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && !idx) e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) e = cudaMemcpy(di + n, idx, (size_t)n * sizeof(int), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        what = "sample_kernel";
        sample_kernel<<<n, SAMPLE_THREADS>>>(di, dlp, dl, V, du, di + n, sa);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
    }
    if (e == cudaSuccess) {
        what = "cudaMemcpy";
        e = cudaMemcpy(tok, di, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost);
    }
    if (e == cudaSuccess) e = cudaMemcpy(lp, dlp, nb, cudaMemcpyDeviceToHost);
    int rc = e == cudaSuccess ? 0 : -1;
    if (rc) snprintf(err, errlen, "cuda:%d: sampling %d rows: %s failed: %s", device, n, what, cudaGetErrorString(e));
    cudaFree(dl);
    cudaFree(du);
    cudaFree(dlp);
    cudaFree(di);
    free(idx);
    return rc;
}

/* one decode attention on the host's data, by the kernel chosen */
template <typename K>
static cudaError_t decode_attention_on(bool grouped, float *y, const float *q, const float *k, const float *v,
                                       const int *slot, const int *pos, int R, int maxT, int NH, int NKV, int HD,
                                       size_t n)
{
    const K *kc = (const K *)k, *vc = (const K *)v;
    bf16 *kb = NULL, *vb = NULL;
    cudaError_t e = cudaSuccess;
    if (sizeof(K) == sizeof(bf16)) {
        /* the caches rounded as cache_store_kernel rounds them */
        e = cudaMalloc(&kb, n * sizeof(bf16));
        if (e == cudaSuccess) e = cudaMalloc(&vb, n * sizeof(bf16));
        if (e == cudaSuccess) {
            to_bf16_kernel<<<grid_for(n), 256>>>(kb, k, n);
            to_bf16_kernel<<<grid_for(n), 256>>>(vb, v, n);
            e = cudaGetLastError();
        }
        kc = (const K *)kb;
        vc = (const K *)vb;
    }
    decode_attention<K> a(grouped, HD, NH / NKV);
    if (e == cudaSuccess && a.smem > 48 * 1024)
        e = cudaFuncSetAttribute(a.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)a.smem);
    if (e == cudaSuccess) {
        a.launch(0, y, q, kc, vc, slot, pos, R, maxT, NH, NKV, HD);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    cudaFree(kb);
    cudaFree(vb);
    return e;
}

int cuda_decode_attention(int device, bool grouped, bool bf16_cache, int R, int maxT, int NH, int NKV, int HD,
                          const float *q, const float *k, const float *v, const int *pos, float *y, char *err,
                          size_t errlen)
{
    if (cuda_device_check(device, err, errlen)) return -1;
    if (grouped && !grouped_fits(HD)) {
        snprintf(err, errlen, "grouped decode attention takes a head size up to %d, not %d", GROUPED_MAX_HD, HD);
        return -1;
    }
    size_t KD = (size_t)NKV * HD, n = (size_t)R * maxT * KD, nq = (size_t)R * NH * HD;
    float *dq = NULL, *dk = NULL, *dv = NULL, *dy = NULL;
    int *dslot = NULL, *dpos = NULL, *slot = (int *)malloc((size_t)R * sizeof(int));
    for (int r = 0; slot && r < R; r++) slot[r] = r;
    cudaError_t e = slot ? cudaSetDevice(device) : cudaErrorMemoryAllocation;
    float **bufs[] = {&dq, &dy, &dk, &dv};
    size_t sizes[] = {nq, nq, n, n};
    for (int i = 0; i < 4 && e == cudaSuccess; i++) e = cudaMalloc(bufs[i], sizes[i] * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&dslot, (size_t)R * sizeof(int));
    if (e == cudaSuccess) e = cudaMalloc(&dpos, (size_t)R * sizeof(int));
    if (e == cudaSuccess) e = cudaMemcpy(dq, q, nq * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dk, k, n * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dv, v, n * sizeof(float), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dslot, slot, (size_t)R * sizeof(int), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dpos, pos, (size_t)R * sizeof(int), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = bf16_cache ? decode_attention_on<bf16>(grouped, dy, dq, dk, dv, dslot, dpos, R, maxT, NH, NKV, HD, n)
                       : decode_attention_on<float>(grouped, dy, dq, dk, dv, dslot, dpos, R, maxT, NH, NKV, HD, n);
    if (e == cudaSuccess) e = cudaMemcpy(y, dy, nq * sizeof(float), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        snprintf(err, errlen, "cuda:%d: decode attention (%s) failed: %s", device, grouped ? "grouped" : "by head",
                 cudaGetErrorString(e));
    cudaFree(dq), cudaFree(dy), cudaFree(dk), cudaFree(dv), cudaFree(dslot), cudaFree(dpos);
    free(slot);
    return e == cudaSuccess ? 0 : -1;
}
