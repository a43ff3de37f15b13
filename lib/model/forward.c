/* Forward and backward of the whole model over a right-padded batch, as
 * x_forward / x_backward pairs. Every matmul is an OpenBLAS sgemm against
 * weights in Hugging Face's (out, in) layout (or, for backend cpu-bf16, a
 * bf16 product where large enough: gemm_bf16.c); the rest are
 * OpenMP loops.
 * Workspaces are sized for the batch once and reused. */
#include "model/model_impl.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#endif

// ----------------------------------------------------------------------------
// layers

/* elementwise loops go in blocks of FW_BLOCK elements, one vectorized
 * call each */
#define FW_BLOCK 4096

/* An activation, or the gradient of one, as the layers take it: f, its
 * fp32 array, and bf, its copy rounded to bf16 by the layer that writes
 * it, which the bf16 kernel reads instead of f. In fp32 every bf is NULL.
 * For backend cpu-bf16 acts_layout decides which arrays exist (f is left
 * out where every matmul that reads it takes bf); a layer writes and
 * reads those that do. */
typedef struct {
    float *f;
    uint16_t *bf;
} act_t;

/* an fp32 array alone: an output with no bf16 copy, or an input the
 * layer only reads */
static inline act_t act_fp32(const float *f) { return (act_t){(float *)f, NULL}; }

/* both arrays of a from element off on: a range of rows, or a layer */
static inline act_t act_at(act_t a, size_t off) { return (act_t){a.f ? a.f + off : NULL, a.bf ? a.bf + off : NULL}; }

/* C (M, N) = A B + beta C, row-major, split into one block of rows (or,
 * for few rows, of columns) per OpenMP thread, each a one-thread OpenBLAS
 * call: one thread pool does all the work, so idle OpenMP threads never
 * spin against OpenBLAS's own. A few rows against transposed weights (a
 * decode step) go to model_gemm_few, which does not repack the weights.
 * In bf16, A16 and B16 (NULL, or bf16 copies of A and B) are read
 * instead of A and B */
void model_gemm(bool bf16, bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc)
{
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (model_bf16_takes(bf16, M, N, K)) {
        model_gemm_bf16(ta, tb, M, N, K, A, A16, lda, B, B16, ldb, beta, C, ldc);
        return;
    }
    /* below 2^18 multiply-adds OpenBLAS's own small-matrix kernel wins */
    if (!ta && tb && M <= MODEL_FEW_ROWS && (double)M * N * K > (1 << 18)) {
        model_gemm_few(M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int nth = omp_get_max_threads();
    if ((double)M * N * K < 2e6 || nth == 1) {
        cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    bool by_rows = M >= 16 * nth;
#pragma omp parallel num_threads(nth)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads(), len = by_rows ? M : N;
        int unit = by_rows ? 1 : 16; /* column blocks stay SIMD-wide */
        int per = ((len + n - 1) / n + unit - 1) / unit * unit;
        int lo = id * per, hi = lo + per < len ? lo + per : len;
        if (lo < hi) {
            if (by_rows) {
                const float *a = ta ? A + lo : A + (size_t)lo * lda;
                cblas_sgemm(CblasRowMajor, TA, TB, hi - lo, N, K, 1.0f, a, lda, B, ldb, beta, C + (size_t)lo * ldc,
                            ldc);
            } else {
                const float *b = tb ? B + (size_t)lo * ldb : B + lo;
                cblas_sgemm(CblasRowMajor, TA, TB, M, hi - lo, K, 1.0f, A, lda, b, ldb, beta, C + lo, ldc);
            }
        }
    }
}

/* out (N, OUT) = inp (N, IN) . w^T (+ bias), or += when acc */
static void matmul_fw(bool bf16, act_t out, act_t inp, const float *w, const float *bias, int N, int IN, int OUT,
                      bool acc)
{
    model_gemm(bf16, false, true, N, OUT, IN, inp.f, inp.bf, IN, w, NULL, IN, acc ? 1.0f : 0.0f, out.f, OUT);
    if (!bias && !out.bf) return;
#pragma omp parallel for if ((size_t)N * OUT >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        float *row = out.f + (size_t)n * OUT;
        if (bias) model_add_row(row, bias, OUT);
        if (out.bf) model_bf16_round(out.bf + (size_t)n * OUT, row, OUT);
    }
}

void model_matmul(bool bf16, float *out, const float *inp, const float *w, const float *bias, int N, int IN, int OUT)
{
    matmul_fw(bf16, act_fp32(out), act_fp32(inp), w, bias, N, IN, OUT, false);
}

/* dinp (N, IN) = dout . w (or += when acc); dw (OUT, IN) += dout^T . inp;
 * dbias (OUT) += column sums of dout (its fp32 array) */
static void matmul_backward(bool bf16, float *dinp, float *dw, float *dbias, act_t dout, act_t inp, const float *w,
                            int N, int IN, int OUT, bool acc)
{
    model_gemm(bf16, false, false, N, IN, OUT, dout.f, dout.bf, OUT, w, NULL, IN, acc ? 1.0f : 0.0f, dinp, IN);
    model_gemm(bf16, true, false, OUT, IN, N, dout.f, dout.bf, OUT, inp.f, inp.bf, IN, 1.0f, dw, IN);
    if (!dbias) return;
/* each thread sums a range of columns, row by row (the order of one
 * thread alone) */
#pragma omp parallel if ((size_t)N * OUT >= MODEL_PAR_MIN)
    {
        int lo, hi;
        model_share(OUT, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (lo < hi) model_add_cols(dbias + lo, dout.f + lo, N, hi - lo, OUT);
    }
}

/* dst (n) = src, by the threads */
static void copy(float *dst, const float *src, size_t n)
{
#pragma omp parallel if (n >= MODEL_PAR_MIN)
    {
        int lo, hi, blocks = (int)((n + FW_BLOCK - 1) / FW_BLOCK);
        model_share(blocks, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        size_t a = (size_t)lo * FW_BLOCK, b = (size_t)hi * FW_BLOCK < n ? (size_t)hi * FW_BLOCK : n;
        if (a < b) memcpy(dst + a, src + a, (b - a) * sizeof(float));
    }
}

/* out (N, C) = RMSNorm(inp) w, rstd (N) its 1/rms */
static void rmsnorm_fw(act_t out, float *rstd, const float *inp, const float *w, int N, int C, float eps)
{
#pragma omp parallel for if ((size_t)N * C >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float buf[256], r = model_rms_inv(x, C, eps);
        for (int i0 = 0; i0 < C; i0 += 256) {
            int len = C - i0 < 256 ? C - i0 : 256;
            float *o = out.f ? out.f + (size_t)n * C + i0 : buf;
            model_scale_mul(o, x + i0, w + i0, r, len);
            if (out.bf) model_bf16_round(out.bf + (size_t)n * C + i0, o, len);
        }
        rstd[n] = r;
    }
}

void model_rmsnorm(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps)
{
    rmsnorm_fw(act_fp32(out), rstd, inp, w, N, C, eps);
}

/* dinp (N, C) += (or = when !acc) the input gradient; dw (C) +=. Each
 * thread sums its rows' dw into its own row of part (threads, C), added
 * in thread order so the result does not depend on timing */
static void rmsnorm_backward(act_t dinp, float *dw, float *part, const float *dout, const float *inp, const float *w,
                             const float *rstd, int N, int C, bool acc)
{
    int nth = 1;
#pragma omp parallel if ((size_t)N * C >= MODEL_PAR_MIN)
    {
        int id = omp_get_thread_num();
#pragma omp single
        nth = omp_get_num_threads();
        float *pw = part + (size_t)id * C;
        memset(pw, 0, C * sizeof(float));
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            float *dx = dinp.f + (size_t)n * C;
            model_rmsnorm_backward_row(dx, pw, dout + (size_t)n * C, inp + (size_t)n * C, w, rstd[n], C, acc);
            if (dinp.bf) model_bf16_round(dinp.bf + (size_t)n * C, dx, C);
        }
    }
    for (int t = 0; t < nth; t++)
        for (int i = 0; i < C; i++) dw[i] += part[(size_t)t * C + i];
}

/* h (n) = silu(g) * u */
static void swiglu_fw(act_t h, const float *g, const float *u, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += FW_BLOCK) {
        size_t len = n - lo < FW_BLOCK ? n - lo : FW_BLOCK;
        float buf[FW_BLOCK], *o = h.f ? h.f + lo : buf;
        model_swiglu_loop(o, g + lo, u + lo, len);
        if (h.bf) model_bf16_round(h.bf + lo, o, len);
    }
}

void model_swiglu(float *h, const float *g, const float *u, size_t n) { swiglu_fw(act_fp32(h), g, u, n); }

/* dg, du (n) = the gradients of swiglu_fw's g and u from dh */
static void swiglu_backward(act_t dg, act_t du, const float *dh, const float *g, const float *u, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += FW_BLOCK) {
        size_t len = n - lo < FW_BLOCK ? n - lo : FW_BLOCK;
        float bg[FW_BLOCK], bu[FW_BLOCK], *og = dg.f ? dg.f + lo : bg, *ou = du.f ? du.f + lo : bu;
        model_swiglu_backward_loop(og, ou, dh + lo, g + lo, u + lo, len);
        if (dg.bf) model_bf16_round(dg.bf + lo, og, len);
        if (du.bf) model_bf16_round(du.bf + lo, ou, len);
    }
}

/* rotate_half RoPE in place on x (N, H, HD): pairs (i, i + HD/2) turn by
 * pos * theta^(-2i/HD); dir -1 turns back (the backward pass) */
static void rope_apply(act_t x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD, float dir)
{
    int half = HD / 2;
    size_t row = (size_t)H * HD;
#pragma omp parallel for if ((size_t)N * H * HD >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        model_rope_row(x.f + n * row, cos_t + (size_t)pos[n] * half, sin_t + (size_t)pos[n] * half, H, HD, dir);
        if (x.bf) model_bf16_round(x.bf + n * row, x.f + n * row, row);
    }
}

void model_rope(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD)
{
    rope_apply(act_fp32(x), pos, cos_t, sin_t, N, H, HD, 1.0f);
}

/* one thread's matmul of attention: C = op(A) op(B) + beta C, by the
 * bf16 kernel in bf16 mode where large enough */
static void sgemm1(bool bf16, bool ta, bool tb, int M, int N, int K, act_t A, int lda, act_t B, int ldb, float beta,
                   float *C, int ldc)
{
    if (model_bf16_takes(bf16, M, N, K)) model_gemm_bf16(ta, tb, M, N, K, A.f, A.bf, lda, B.f, B.bf, ldb, beta, C, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A.f,
                    lda, B.f, ldb, beta, C, ldc);
}

/* the inputs of attention: q (B, T, NH, HD), k and v (B, T, NKV, HD);
 * att (threads, T, T) is scratch where each thread puts the
 * probabilities of the block it works on, so they stay in its cache */
typedef struct {
    act_t q, k, v, att;
    const int *start, *prefix; /* packed rows (model_forward_packed), or NULL */
    int B, T, NH, NKV, HD;
} attn_t;

/* Attention runs block by block. A block is a run of queries [q0, q1)
 * of one row that see the keys [0, F) and, causally, their own [q0, t]:
 * a packed row's segment sees its row's prefix (F = S), and a tile of a
 * row's prefix (or of a plain row) sees what comes before it (F = q0, one
 * range of keys [0, q1)). Only those scores are computed: at the default
 * round's shape (a prefix of 137, 8 segments of 20) that is 44 % of the
 * row's T x T square. In bf16 such small products would fall under the
 * bf16 kernels' threshold (MODEL_BF16_MIN) and run in fp32 (a train step
 * of 64 x 192 took 13 to 15 % longer, a packed one 5 %), so there a
 * prefix is one block, and so are all of a row's segments together
 * (segs: each query sees [0, F) and its own segment's [a, t], the rest
 * masked). */
typedef struct {
    int q0, q1, F;
    bool segs;
} attn_block_t;

#define ATTN_TILE 64 /* queries of a prefix tile, in fp32 */

/* the block of row b after k (from {0, 0, 0, false}, the first); false
 * after the last */
static bool attn_block_next(bool bf16, const attn_t *o, int b, attn_block_t *k)
{
    int T = o->T, S = o->start ? o->prefix[b] : T, q0 = k->q1, tile = bf16 ? S : ATTN_TILE;
    if (q0 >= T) return false;
    if (q0 < S) {
        *k = (attn_block_t){q0, q0 + tile < S ? q0 + tile : S, q0, false};
        return true;
    }
    if (bf16) {
        *k = (attn_block_t){S, T, S, true};
        return true;
    }
    const int *st = o->start + (size_t)b * T;
    int e = q0 + 1;
    while (e < T && st[e] == q0) e++;
    *k = (attn_block_t){q0, e, S, false};
    return true;
}

/* C (rows, HD) (+)= P (rows, W) X_keys, X_keys being the block's keys'
 * rows of x (rows ld apart): [0, F) then [q0, q1), or [0, q1) as one */
static void block_times_keys(bool bf16, attn_block_t k, act_t P, act_t x, int ld, float *C, int ldc, int HD, float beta)
{
    int n = k.q1 - k.q0, W = k.F + n;
    if (k.F == k.q0) {
        sgemm1(bf16, false, false, n, HD, W, P, W, x, ld, beta, C, ldc);
        return;
    }
    sgemm1(bf16, false, false, n, HD, k.F, P, W, x, ld, beta, C, ldc);
    sgemm1(bf16, false, false, n, HD, n, act_at(P, k.F), W, act_at(x, (size_t)k.q0 * ld), ld, 1.0f, C, ldc);
}

/* x_keys (+)= P^T Y for the block's keys' rows of x (rows ld apart; C
 * fp32 of x's layout): the gradient of keys or values */
static void keys_plus_block_t(bool bf16, attn_block_t k, act_t P, act_t Y, int ldy, float *C, int ldc, int HD)
{
    int n = k.q1 - k.q0, W = k.F + n;
    if (k.F == k.q0) {
        sgemm1(bf16, true, false, W, HD, n, P, W, Y, ldy, 1.0f, C, ldc);
        return;
    }
    sgemm1(bf16, true, false, k.F, HD, n, P, W, Y, ldy, 1.0f, C, ldc);
    sgemm1(bf16, true, false, n, HD, n, act_at(P, k.F), W, Y, ldy, 1.0f, C + (size_t)k.q0 * ldc, ldc);
}

/* S (rows, W) = Q_block X_keys^T (no scale): scores, or the gradient of
 * the probabilities (Y the output's gradient, X the values) */
static void block_scores(bool bf16, attn_block_t k, act_t Q, int ldq, act_t x, int ld, float *S, int HD)
{
    int n = k.q1 - k.q0, W = k.F + n;
    if (k.F == k.q0) {
        sgemm1(bf16, false, true, n, W, HD, Q, ldq, x, ld, 0.0f, S, W);
        return;
    }
    sgemm1(bf16, false, true, n, k.F, HD, Q, ldq, x, ld, 0.0f, S, W);
    sgemm1(bf16, false, true, n, n, HD, Q, ldq, act_at(x, (size_t)k.q0 * ld), ld, 0.0f, S + k.F, W);
}

/* the softmax probabilities of block k of row b, head h into p (rows, W):
 * a query's first F + i + 1 keys, zeros after; fp32 kept with the bf16
 * copy where p.bf takes them */
static void block_probs(bool bf16, const attn_t *o, int b, int h, attn_block_t k, act_t p)
{
    int T = o->T, HD = o->HD, QD = o->NH * HD, KD = o->NKV * HD, n = k.q1 - k.q0, W = k.F + n;
    act_t q = act_at(o->q, ((size_t)b * T + k.q0) * QD + h * HD);
    act_t kk = act_at(o->k, (size_t)b * T * KD + (h / (o->NH / o->NKV)) * HD);
    float scale = 1.0f / sqrtf((float)HD);
    block_scores(bf16, k, q, QD, kk, KD, p.f, HD);
    for (int i = 0; i < n; i++) {
        float *pr = p.f + (size_t)i * W;
        /* a query of a segs block skips the other segments' keys [F, a)
         * of the block: out of the softmax (e^-inf is e^-87 in fastexp,
         * far under a sum of at least 1), then made 0 */
        int a = k.segs ? k.F + o->start[(size_t)b * T + k.q0 + i] - k.q0 : k.F;
        for (int j = k.F; j < a; j++) pr[j] = -INFINITY;
        if (p.bf) {
            model_softmax_causal(pr, p.bf + (size_t)i * W, k.F + i + 1, W, scale);
            for (int j = k.F; j < a; j++) pr[j] = 0, p.bf[(size_t)i * W + j] = 0;
        } else {
            model_softmax_row(pr, k.F + i + 1, scale);
            for (int j = k.F; j < a; j++) pr[j] = 0;
            for (int j = k.F + i + 1; j < W; j++) pr[j] = 0;
        }
    }
}

/* causal GQA attention: y (B, T, NH, HD) */
static void attention_forward(bool bf16, const attn_t *o, act_t y)
{
    int B = o->B, T = o->T, NH = o->NH, HD = o->HD, QD = NH * HD, KD = o->NKV * HD, rep = NH / o->NKV;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)B * NH * T * T * HD >= MODEL_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t ko = (size_t)b * T * KD + (h / rep) * HD;
            act_t p = act_at(o->att, (size_t)omp_get_thread_num() * T * T);
            for (attn_block_t k = {0, 0, 0, false}; attn_block_next(bf16, o, b, &k);) {
                size_t qo = ((size_t)b * T + k.q0) * QD + h * HD;
                block_probs(bf16, o, b, h, k, p);
                block_times_keys(bf16, k, p, act_at(o->v, ko), KD, y.f + qo, QD, HD, 0.0f);
                for (int t = 0; y.bf && t < k.q1 - k.q0; t++)
                    model_bf16_round(y.bf + qo + (size_t)t * QD, y.f + qo + (size_t)t * QD, HD);
            }
        }
}

/* dq, dk, dv are written (not accumulated). One thread owns each (b, kv
 * head), so the keys and values a group of heads shares are summed
 * without races; it recomputes each block's probabilities (keeping them
 * for every layer would cost L B NH T T floats). dp (threads, T, T) is
 * scratch */
static void attention_backward(bool bf16, const attn_t *o, float *dq, float *dk, act_t dv, act_t dp, const float *dy)
{
    int B = o->B, T = o->T, NH = o->NH, NKV = o->NKV, HD = o->HD, QD = NH * HD, KD = NKV * HD, rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HD);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)B * NH * T * T * HD >= MODEL_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < NKV; kh++) {
            size_t so = (size_t)omp_get_thread_num() * T * T, ko = (size_t)b * T * KD + kh * HD;
            act_t ds = act_at(dp, so), p = act_at(o->att, so), kb = act_at(o->k, ko), vb = act_at(o->v, ko);
            for (int t = 0; t < T; t++) {
                memset(dk + ko + (size_t)t * KD, 0, sizeof(float) * HD);
                memset(dv.f + ko + (size_t)t * KD, 0, sizeof(float) * HD);
            }
            for (int h = kh * rep; h < (kh + 1) * rep; h++)
                for (attn_block_t k = {0, 0, 0, false}; attn_block_next(bf16, o, b, &k);) {
                    int n = k.q1 - k.q0, W = k.F + n;
                    size_t qo = ((size_t)b * T + k.q0) * QD + h * HD;
                    act_t dyb = act_fp32(dy + qo), qb = act_at(o->q, qo);
                    block_probs(bf16, o, b, h, k, p);
                    // dv += p^T . dy ; dp = dy . v^T
                    keys_plus_block_t(bf16, k, p, dyb, QD, dv.f + ko, KD, HD);
                    block_scores(bf16, k, dyb, QD, vb, KD, ds.f, HD);
                    for (int i = 0; i < n; i++) {
                        model_softmax_backward_row(ds.f + (size_t)i * W, p.f + (size_t)i * W, k.F + i + 1, W, scale);
                        if (ds.bf) model_bf16_round(ds.bf + (size_t)i * W, ds.f + (size_t)i * W, W);
                    }
                    // dq = ds . k ; dk += ds^T . q
                    block_times_keys(bf16, k, ds, kb, KD, dq + qo, QD, HD, 0.0f);
                    keys_plus_block_t(bf16, k, ds, qb, QD, dk + ko, KD, HD);
                }
            for (int t = 0; dv.bf && t < T; t++) {
                size_t r = ((size_t)b * T + t) * KD + kh * HD;
                model_bf16_round(dv.bf + r, dv.f + r, HD);
            }
        }
}

// ----------------------------------------------------------------------------
// workspaces

/* whether a linear layer (in -> out features, over n positions) of
 * model m reads its input only from the bf16 copy: its forward product
 * and its weight gradient both in bf16 */
static bool input_bf16_only(const model_t *m, int n, int in, int out)
{
    return model_bf16_takes(m->bf16, n, out, in) && model_bf16_takes(m->bf16, out, in, n);
}

/* the same for its output's gradient: the input gradient's product and
 * the weight gradient both in bf16 */
static bool dout_bf16_only(const model_t *m, int n, int in, int out)
{
    return model_bf16_takes(m->bf16, n, in, out) && model_bf16_takes(m->bf16, out, in, n);
}

/* the fp32 activations and gradients, from base (when not NULL); the
 * floats they take for a batch of B x T */
static size_t layout_fp32(model_t *m, float *base, int B, int T)
{
    const model_config_t *c = &m->cfg;
    size_t N = (size_t)B * T, L = c->L, C = c->C, QD = (size_t)c->NH * c->HD;
    size_t KD = (size_t)c->NKV * c->HD, FF = c->FF, q3 = c->type == MODEL_QWEN3;
    size_t chunk = model_logits_chunk(m, (int)N);
    model_acts_t *a = &m->a;
    model_grad_acts_t *g = &m->ga;
    /* fp32 activations (and gradients: dg, du) that only linear layers
     * read are not kept where all of those read the bf16 copy */
    int n = (int)N;
    bool ln1 = !(input_bf16_only(m, n, c->C, (int)QD) && input_bf16_only(m, n, c->C, (int)KD));
    bool ln2 = !input_bf16_only(m, n, c->C, c->FF), h32 = !input_bf16_only(m, n, c->FF, c->C);
    a->y_all = !input_bf16_only(m, n, (int)QD, c->C);
    bool dgu = !dout_bf16_only(m, n, c->C, c->FF);
    struct {
        float **p;
        size_t n;
    } t[] = {
        {&a->x, (L + 1) * N * C},
        {&a->ln1, ln1 * L * N * C},
        {&a->r1, L * N},
        {&a->qpre, q3 * L * N * QD},
        {&a->kpre, q3 * L * N * KD},
        {&a->rq, q3 * L * N * c->NH},
        {&a->rk, q3 * L * N * c->NKV},
        {&a->q, L * N * QD},
        {&a->k, L * N * KD},
        {&a->v, L * N * KD},
        {&a->att, (size_t)omp_get_max_threads() * T * T},
        {&a->y, (a->y_all ? L : 1) * N * QD},
        {&a->xm, L * N * C},
        {&a->ln2, ln2 * L * N * C},
        {&a->r2, L * N},
        {&a->g, L * N * FF},
        {&a->u, L * N * FF},
        {&a->h, h32 * N * FF},
        {&a->lnf, N * C},
        {&a->rf, N},
        {&a->lse, N},
        {&g->dx, N * C},
        {&g->dln, N * C},
        {&g->dq, N * QD},
        {&g->dk, N * KD},
        {&g->dv, N * KD},
        {&g->dy, N * QD},
        {&g->dk2, q3 * N * KD},
        {&g->dg, dgu * N * FF},
        {&g->du, dgu * N * FF},
        {&g->dh, N * FF},
        {&g->logits, chunk * c->V},
        {&g->part, (size_t)omp_get_max_threads() * (C > (size_t)c->HD ? C : (size_t)c->HD)},
        {&g->dp, (size_t)omp_get_max_threads() * T * T},
    };
    size_t total = 0; /* each from a 64-byte boundary */
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (base) *t[i].p = t[i].n ? base + total : NULL;
        total += (t[i].n + 15) / 16 * 16;
    }
    return total;
}

/* the bf16 copies after the fp32 arrays' total floats, each from a
 * 64-byte boundary (pointed into base when not NULL); the floats of both */
static size_t layout_bf16(model_t *m, float *base, int B, int T, size_t total)
{
    const model_config_t *c = &m->cfg;
    size_t N = (size_t)B * T, L = c->L, C = c->C, QD = (size_t)c->NH * c->HD;
    size_t KD = (size_t)c->NKV * c->HD, FF = c->FF;
    size_t chunk = model_logits_chunk(m, (int)N);
    model_acts_t *a = &m->a;
    model_grad_acts_t *g = &m->ga;
    size_t h = m->bf16;
    struct {
        uint16_t **p;
        size_t n;
    } t16[] = {
        {&a->ln1h, h * L * N * C},
        {&a->yh, h * L * N * QD},
        {&a->ln2h, h * L * N * C},
        {&a->hh, h * L * N * FF},
        {&a->lnfh, h * N * C},
        {&g->dx16, h * N * C},
        {&g->dq16, h * N * QD},
        {&g->dk16, h * N * KD},
        {&g->dv16, h * N * KD},
        {&g->dg16, h * N * FF},
        {&g->du16, h * N * FF},
        {&g->lg16, h * chunk * c->V},
        {&a->qh, h * L * N * QD},
        {&a->kh, h * L * N * KD},
        {&a->vh, h * L * N * KD},
        {&a->atth, h * (size_t)omp_get_max_threads() * T * T},
        {&g->dp16, h * (size_t)omp_get_max_threads() * T * T},
    };
    for (size_t i = 0; i < sizeof t16 / sizeof *t16; i++) {
        if (base) *t16[i].p = t16[i].n ? (uint16_t *)(base + total) : NULL;
        total += (t16[i].n + 31) / 32 * 16;
    }
    return total;
}

/* points every activation into base (when not NULL) and returns the floats
 * they take for a batch of B x T. The one place backend cpu-bf16's
 * choices are made: which arrays have a bf16 copy, and which fp32 arrays
 * are left out because only their copies are read; the layers see which
 * of an act_t's arrays exist */
static size_t acts_layout(model_t *m, float *base, int B, int T)
{
    size_t total = layout_fp32(m, base, B, T);
    return layout_bf16(m, base, B, T, total);
}

static int acts_ensure(model_t *m, int B, int T)
{
    size_t need = acts_layout(m, NULL, B, T), N = (size_t)B * T;
    if (need > m->acts_cap) {
        free(m->acts_mem);
        /* 64-byte aligned, so each array starts a cache line (acts_layout) */
        m->acts_mem = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
        m->acts_cap = m->acts_mem ? need : 0;
    }
    if ((size_t)m->B * m->T < N || !m->tokens) {
        free(m->tokens);
        m->tokens = malloc(5 * N * sizeof(int));
    }
    if (!m->acts_mem || !m->tokens || model_rope_ensure(m, T)) {
        fprintf(stderr, "model: out of memory for a batch of %d x %d\n", B, T);
        free(m->tokens);
        m->tokens = NULL;
        m->B = m->T = 0;
        return -1;
    }
    acts_layout(m, m->acts_mem, B, T);
    m->targets = m->tokens + N;
    m->pos = m->tokens + 2 * N;
    m->start = NULL;
    m->prefix = m->tokens + 4 * N; /* B <= N */
    return 0;
}

// ----------------------------------------------------------------------------
// lm_head in chunks of positions

static const float *lm_weight(const model_t *m) { return m->cfg.tie ? m->w.wte : m->w.lm; }
static float *lm_grad(model_t *m) { return m->cfg.tie ? m->dw.wte : m->dw.lm; }

static void lm_head_forward(model_t *m, int N, float *logp, float *logits_out)
{
    const model_config_t *c = &m->cfg;
    int V = c->V, chunk = (int)model_logits_chunk(m, N);
    float inv_t = 1.0f / m->temperature;
    act_t lnf = {m->a.lnf, m->a.lnfh};
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        float *lg = logits_out ? logits_out + (size_t)r0 * V : m->ga.logits;
        matmul_fw(m->bf16, act_fp32(lg), act_at(lnf, (size_t)r0 * c->C), lm_weight(m), NULL, n, c->C, V, false);
#pragma omp parallel for if ((size_t)n * V >= MODEL_PAR_MIN)
        for (int i = 0; i < n; i++) {
            const float *row = lg + (size_t)i * V;
            float lse = model_logsumexp(row, V, inv_t);
            int tg = m->targets[r0 + i];
            m->a.lse[r0 + i] = lse;
            logp[r0 + i] = tg >= 0 ? row[tg] * inv_t - lse : 0.0f;
        }
    }
}

/* d logp / d logit_j = (onehot_j - softmax_j) / temperature; the logits
 * are recomputed per chunk rather than kept */
static void lm_head_backward(model_t *m, int N, const float *dlogp)
{
    const model_config_t *c = &m->cfg;
    int V = c->V, C = c->C, chunk = (int)model_logits_chunk(m, N);
    float inv_t = 1.0f / m->temperature;
    act_t lnf_all = {m->a.lnf, m->a.lnfh}, lg = {m->ga.logits, m->ga.lg16};
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        act_t lnf = act_at(lnf_all, (size_t)r0 * C);
        matmul_fw(m->bf16, act_fp32(lg.f), lnf, lm_weight(m), NULL, n, C, V, false);
#pragma omp parallel for if ((size_t)n * V >= MODEL_PAR_MIN)
        for (int i = 0; i < n; i++) {
            float *row = lg.f + (size_t)i * V;
            int tg = m->targets[r0 + i];
            float d = tg >= 0 ? dlogp[r0 + i] : 0.0f, lse = m->a.lse[r0 + i];
            if (!d) {
                memset(row, 0, V * sizeof(float));
            } else {
                model_softmax_grad_row(row, V, inv_t, lse, d);
                row[tg] += d * inv_t;
            }
            if (lg.bf) model_bf16_round(lg.bf + (size_t)i * V, row, V);
        }
        matmul_backward(m->bf16, m->ga.dln + (size_t)r0 * C, lm_grad(m), NULL, lg, lnf, lm_weight(m), n, C, V, false);
    }
}

// ----------------------------------------------------------------------------
// the model

/* each row's prefix (the positions before its first segment) into
 * prefix (B) and every position's RoPE position into pos (N); -1 after a
 * line on stderr for a start that is not a packed layout or a position
 * past max_pos */
static int packed_layout(const int *start, int B, int T, int max_pos, int *prefix, int *pos)
{
    for (int b = 0; b < B; b++) {
        const int *st = start + (size_t)b * T;
        int S = 0;
        while (S < T && st[S] == 0) S++;
        prefix[b] = S;
        for (int t = 0; t < T; t++) {
            int a = st[t];
            bool ok = t < S ? a == 0 : (a >= S && a <= t && (a == t || st[t - 1] == a) && S > 0);
            int p = t < S ? t : S + t - a;
            if (!ok || p >= max_pos) {
                fprintf(stderr, "model_forward_packed: row %d position %d: start %d %s\n", b, t, a,
                        ok ? "puts it past max_position_embeddings"
                           : "is not a packed layout (0 in the prefix, "
                             "then each segment's first position, after at least one prefix position)");
                return -1;
            }
            pos[(size_t)b * T + t] = p;
        }
    }
    return 0;
}

int model_forward(model_t *m, const int *tokens, const int *targets, int B, int T, float temperature, float *logp,
                  float *logits)
{
    return model_forward_packed(m, tokens, targets, NULL, B, T, temperature, logp, logits);
}

/* B, T and temperature in range, and every token and target in the
 * vocabulary; -1 after a line on stderr when not */
static int check_batch(const model_config_t *c, const int *tokens, const int *targets, const int *start, int B, int T,
                       float temperature)
{
    if (B <= 0 || T <= 0 || (!start && T > c->max_pos) || !(temperature > 0)) {
        fprintf(stderr,
                "model_forward: batch %d x %d, temperature %g: need B, T > 0, T <= %d, "
                "temperature > 0\n",
                B, T, temperature, c->max_pos);
        return -1;
    }
    int N = B * T;
    for (int n = 0; n < N; n++)
        if (tokens[n] < 0 || tokens[n] >= c->V || targets[n] < -1 || targets[n] >= c->V) {
            fprintf(stderr,
                    "model_forward: token %d or target %d at position %d is outside the "
                    "vocabulary of %d\n",
                    tokens[n], targets[n], n, c->V);
            return -1;
        }
    return 0;
}

/* the batch the forward pass runs and the backward pass reads: its
 * activations, tokens, targets, positions and (packed) segment starts */
static int set_batch(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                     float temperature)
{
    const model_config_t *c = &m->cfg;
    int N = B * T;
    if (acts_ensure(m, B, T)) return -1;
    if (start) {
        if (packed_layout(start, B, T, c->max_pos, m->prefix, m->pos)) return -1;
        m->start = m->tokens + 3 * N;
        memcpy(m->start, start, N * sizeof(int));
    } else {
        for (int n = 0; n < N; n++) m->pos[n] = n % T;
    }
    m->B = B;
    m->T = T;
    m->temperature = temperature;
    memcpy(m->tokens, tokens, N * sizeof(int));
    memcpy(m->targets, targets, N * sizeof(int));
    return 0;
}

/* p + l n: layer l's slice of a tensor of n per layer, or NULL for a
 * tensor the config lacks */
static float *slice(float *p, int l, size_t n) { return p ? p + l * n : NULL; }

/* layer l's slices of the weights (or of their gradients) */
typedef struct {
    float *ln1, *wq, *bq, *wk, *bk, *wv, *bv, *qn, *kn, *wo, *bo, *ln2, *wg, *wu, *wd;
} layer_weights_t;

static layer_weights_t layer_weights(const model_weights_t *w, const model_config_t *c, int l)
{
    size_t C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF, HD = c->HD;
    return (layer_weights_t){
        .ln1 = slice(w->ln1, l, C),
        .wq = slice(w->wq, l, QD * C),
        .bq = slice(w->bq, l, QD),
        .wk = slice(w->wk, l, KD * C),
        .bk = slice(w->bk, l, KD),
        .wv = slice(w->wv, l, KD * C),
        .bv = slice(w->bv, l, KD),
        .qn = slice(w->qn, l, HD),
        .kn = slice(w->kn, l, HD),
        .wo = slice(w->wo, l, C * QD),
        .bo = slice(w->bo, l, C),
        .ln2 = slice(w->ln2, l, C),
        .wg = slice(w->wg, l, FF * C),
        .wu = slice(w->wu, l, FF * C),
        .wd = slice(w->wd, l, C * FF),
    };
}

/* layer l's slices of the activations (model_acts_t), N = B * T rows */
typedef struct {
    float *x;       // (N, C) residual stream entering the layer
    act_t ln1;      // (N, C)
    float *r1;      // (N)
    float *qp, *kp; // (N, NH*HD), (N, NKV*HD) q_proj's, k_proj's outputs (Qwen3: before the norms, else q.f, k.f)
    float *rq, *rk; // (N, NH), (N, NKV) Qwen3's q_norm, k_norm 1/rms
    act_t q, k, v;  // (N, NH*HD), (N, NKV*HD), (N, NKV*HD) after norm and RoPE
    act_t y;        // (N, NH*HD) attention output; y.f one layer's scratch unless y_all
    float *xm;      // (N, C) residual after attention
    act_t ln2;      // (N, C)
    float *r2;      // (N)
    float *g, *u;   // (N, FF) gate_proj, up_proj outputs
    act_t h;        // (N, FF) silu(g) * u; h.f one layer's scratch, recomputed in backward
    float *xn;      // (N, C) residual stream leaving the layer
} layer_acts_t;

static layer_acts_t layer_acts(const model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    const model_acts_t *a = &m->a;
    size_t N = (size_t)m->B * m->T, C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF;
    layer_acts_t o = {
        .x = slice(a->x, l, N * C),
        .ln1 = act_at((act_t){a->ln1, a->ln1h}, l * N * C),
        .r1 = slice(a->r1, l, N),
        .rq = slice(a->rq, l, N * c->NH),
        .rk = slice(a->rk, l, N * c->NKV),
        .q = act_at((act_t){a->q, a->qh}, l * N * QD),
        .k = act_at((act_t){a->k, a->kh}, l * N * KD),
        .v = act_at((act_t){a->v, a->vh}, l * N * KD),
        .y = {slice(a->y, a->y_all ? l : 0, N * QD), a->yh ? a->yh + l * N * QD : NULL},
        .xm = slice(a->xm, l, N * C),
        .ln2 = act_at((act_t){a->ln2, a->ln2h}, l * N * C),
        .r2 = slice(a->r2, l, N),
        .g = slice(a->g, l, N * FF),
        .u = slice(a->u, l, N * FF),
        .h = {a->h, a->hh ? a->hh + l * N * FF : NULL},
        .xn = slice(a->x, l + 1, N * C),
    };
    bool q3 = c->type == MODEL_QWEN3;
    o.qp = q3 ? slice(a->qpre, l, N * QD) : o.q.f;
    o.kp = q3 ? slice(a->kpre, l, N * KD) : o.k.f;
    return o;
}

static attn_t attn_of(const model_t *m, const layer_acts_t *la)
{
    const model_config_t *c = &m->cfg;
    return (attn_t){.q = la->q,
                    .k = la->k,
                    .v = la->v,
                    .att = {m->a.att, m->a.atth},
                    .start = m->start,
                    .prefix = m->prefix,
                    .B = m->B,
                    .T = m->T,
                    .NH = c->NH,
                    .NKV = c->NKV,
                    .HD = c->HD};
}

/* layer l: its residual stream a.x to a.xn */
static void layer_forward(model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C, QD = c->NH * c->HD, KD = c->NKV * c->HD, FF = c->FF, HD = c->HD;
    layer_weights_t w = layer_weights(&m->w, c, l);
    layer_acts_t a = layer_acts(m, l);
    // attention: xm = x + attention(RoPE(q), RoPE(k), v) . wo^T (+ bo)
    rmsnorm_fw(a.ln1, a.r1, a.x, w.ln1, N, C, c->rms_eps);
    matmul_fw(m->bf16, act_fp32(a.qp), a.ln1, w.wq, w.bq, N, C, QD, false);
    matmul_fw(m->bf16, act_fp32(a.kp), a.ln1, w.wk, w.bk, N, C, KD, false);
    matmul_fw(m->bf16, a.v, a.ln1, w.wv, w.bv, N, C, KD, false);
    if (c->type == MODEL_QWEN3) {
        model_rmsnorm(a.q.f, a.rq, a.qp, w.qn, N * c->NH, HD, c->rms_eps);
        model_rmsnorm(a.k.f, a.rk, a.kp, w.kn, N * c->NKV, HD, c->rms_eps);
    }
    rope_apply(a.q, m->pos, m->rope_cos, m->rope_sin, N, c->NH, HD, 1.0f);
    rope_apply(a.k, m->pos, m->rope_cos, m->rope_sin, N, c->NKV, HD, 1.0f);
    attn_t ao = attn_of(m, &a);
    attention_forward(m->bf16, &ao, a.y);
    copy(a.xm, a.x, (size_t)N * C);
    matmul_fw(m->bf16, act_fp32(a.xm), a.y, w.wo, w.bo, N, QD, C, true);
    // MLP: xn = xm + (silu(g) * u) . wd^T
    rmsnorm_fw(a.ln2, a.r2, a.xm, w.ln2, N, C, c->rms_eps);
    matmul_fw(m->bf16, act_fp32(a.g), a.ln2, w.wg, NULL, N, C, FF, false);
    matmul_fw(m->bf16, act_fp32(a.u), a.ln2, w.wu, NULL, N, C, FF, false);
    swiglu_fw(a.h, a.g, a.u, (size_t)N * FF);
    copy(a.xn, a.xm, (size_t)N * C);
    matmul_fw(m->bf16, act_fp32(a.xn), a.h, w.wd, NULL, N, FF, C, true);
}

int model_forward_packed(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                         float temperature, float *logp, float *logits)
{
    const model_config_t *c = &m->cfg;
    if (check_batch(c, tokens, targets, start, B, T, temperature)) return -1;
#ifdef SAPO_HAVE_CUDA
    if (m->cuda && start) {
        fprintf(stderr, "model_forward_packed: packed rows run on the CPU only (the model is on cuda:%d)\n", m->device);
        return -1;
    }
    if (m->cuda) return cuda_model_forward(m->cuda, tokens, targets, B, T, temperature, logp, logits);
#endif
    if (set_batch(m, tokens, targets, start, B, T, temperature)) return -1;
    int N = B * T, C = c->C;
    const model_weights_t *w = &m->w;
    model_acts_t *a = &m->a;
#pragma omp parallel for if ((size_t)N * C >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) memcpy(a->x + (size_t)n * C, w->wte + (size_t)tokens[n] * C, C * sizeof(float));
    for (int l = 0; l < c->L; l++) layer_forward(m, l);
    rmsnorm_fw((act_t){a->lnf, a->lnfh}, a->rf, a->x + (size_t)c->L * N * C, w->lnf, N, C, c->rms_eps);
    lm_head_forward(m, N, logp, logits);
    return 0;
}

/* layer l backward: ga->dx, the gradient at its output, to the gradient
 * at its input; its weights' gradients added to m->dw */
static void layer_backward(model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C, QD = c->NH * c->HD, KD = c->NKV * c->HD, FF = c->FF, HD = c->HD;
    layer_weights_t w = layer_weights(&m->w, c, l), dw = layer_weights(&m->dw, c, l);
    layer_acts_t a = layer_acts(m, l);
    model_grad_acts_t *ga = &m->ga;
    act_t dx = {ga->dx, ga->dx16}, dg = {ga->dg, ga->dg16}, du = {ga->du, ga->du16}, dv = {ga->dv, ga->dv16};
    // MLP: xn = xm + (silu(g) * u) . wd^T; h.f recomputed where wd's
    // weight gradient reads it (no bf16 copy, or the product in fp32)
    if (!a.h.bf || !model_bf16_takes(m->bf16, C, FF, N)) swiglu_fw(act_fp32(a.h.f), a.g, a.u, (size_t)N * FF);
    matmul_backward(m->bf16, ga->dh, dw.wd, NULL, dx, a.h, w.wd, N, FF, C, false);
    swiglu_backward(dg, du, ga->dh, a.g, a.u, (size_t)N * FF);
    matmul_backward(m->bf16, ga->dln, dw.wg, NULL, dg, a.ln2, w.wg, N, C, FF, false);
    matmul_backward(m->bf16, ga->dln, dw.wu, NULL, du, a.ln2, w.wu, N, C, FF, true);
    rmsnorm_backward(dx, dw.ln2, ga->part, ga->dln, a.xm, w.ln2, a.r2, N, C, true);
    // attention: xm = x + y . wo^T (+ bo); where y.f is one layer's
    // scratch it holds another layer's now, and wo's gradient reads y.bf
    act_t y = {m->a.y_all ? a.y.f : NULL, a.y.bf};
    matmul_backward(m->bf16, ga->dy, dw.wo, dw.bo, dx, y, w.wo, N, QD, C, false);
    attn_t ao = attn_of(m, &a);
    attention_backward(m->bf16, &ao, ga->dq, ga->dk, dv, (act_t){ga->dp, ga->dp16}, ga->dy);
    /* the bf16 copies of the gradients wq and wk take come from the last
     * step before them: RoPE's, or Qwen3's norms' (into dy, free again,
     * and dk2) */
    act_t dq = {ga->dq, ga->dq16}, dk = {ga->dk, ga->dk16};
    if (c->type == MODEL_QWEN3) {
        rope_apply(act_fp32(ga->dq), m->pos, m->rope_cos, m->rope_sin, N, c->NH, HD, -1.0f);
        rope_apply(act_fp32(ga->dk), m->pos, m->rope_cos, m->rope_sin, N, c->NKV, HD, -1.0f);
        dq = (act_t){ga->dy, ga->dq16}, dk = (act_t){ga->dk2, ga->dk16};
        rmsnorm_backward(dq, dw.qn, ga->part, ga->dq, a.qp, w.qn, a.rq, N * c->NH, HD, false);
        rmsnorm_backward(dk, dw.kn, ga->part, ga->dk, a.kp, w.kn, a.rk, N * c->NKV, HD, false);
    } else {
        rope_apply(dq, m->pos, m->rope_cos, m->rope_sin, N, c->NH, HD, -1.0f);
        rope_apply(dk, m->pos, m->rope_cos, m->rope_sin, N, c->NKV, HD, -1.0f);
    }
    matmul_backward(m->bf16, ga->dln, dw.wq, dw.bq, dq, a.ln1, w.wq, N, C, QD, false);
    matmul_backward(m->bf16, ga->dln, dw.wk, dw.bk, dk, a.ln1, w.wk, N, C, KD, true);
    matmul_backward(m->bf16, ga->dln, dw.wv, dw.bv, dv, a.ln1, w.wv, N, C, KD, true);
    rmsnorm_backward(dx, dw.ln1, ga->part, ga->dln, a.x, w.ln1, a.r1, N, C, true);
}

void model_backward(model_t *m, const float *dlogp)
{
#ifdef SAPO_HAVE_CUDA
    if (m->cuda) {
        cuda_model_backward(m->cuda, dlogp);
        return;
    }
#endif
    const model_config_t *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->C;
    const model_weights_t *w = &m->w;
    model_weights_t *dw = &m->dw;
    const model_acts_t *a = &m->a;
    model_grad_acts_t *ga = &m->ga;

    lm_head_backward(m, N, dlogp);
    rmsnorm_backward((act_t){ga->dx, ga->dx16}, dw->lnf, ga->part, ga->dln, a->x + (size_t)c->L * N * C, w->lnf, a->rf,
                     N, C, false);
    for (int l = c->L - 1; l >= 0; l--) layer_backward(m, l);
/* rows of one token add into the same embedding row: each thread owns
 * a range of columns */
#pragma omp parallel if ((size_t)N * C >= MODEL_PAR_MIN)
    {
        int nth = omp_get_num_threads(), per = (C + nth - 1) / nth;
        int lo = omp_get_thread_num() * per, hi = lo + per < C ? lo + per : C;
        for (int n = 0; lo < hi && n < N; n++)
            model_add_row(dw->wte + (size_t)m->tokens[n] * C + lo, ga->dx + (size_t)n * C + lo, hi - lo);
    }
}

float model_cross_entropy(model_t *m, const int *tokens, const int *targets, int B, int T)
{
    int N = B * T, cnt = 0;
    for (int n = 0; n < N; n++) cnt += targets[n] >= 0;
    float *logp = malloc(2 * (size_t)N * sizeof(float));
    if (!logp || model_forward(m, tokens, targets, B, T, 1.0f, logp, NULL)) {
        free(logp);
        return -1;
    }
    float *dlogp = logp + N;
    double loss = 0;
    for (int n = 0; n < N; n++) {
        loss -= logp[n];
        dlogp[n] = targets[n] >= 0 ? -1.0f / cnt : 0.0f;
    }
    if (cnt) model_backward(m, dlogp);
    free(logp);
    return cnt ? (float)(loss / cnt) : 0.0f;
}
