/* C (M, N) = op(A) op(B) + beta C with bfloat16 products and fp32 sums:
 * the matmuls of a training step in backend cpu-bf16. Which kernel
 * multiplies is chosen here, once: the AMX tiles (gemm_amx.c) where the
 * CPU has them, else AVX512-BF16 dot products (gemm_avx512bf16.c).
 * Both multiply the same packed operands, so the packing and the threads
 * live here, and a kernel brings the step over one 32 x 32 block of C in
 * the table it exports (gemm_bf16.h).
 *
 * Both take A as rows of bf16 pairs along the depth and B in pairs too:
 * row p of a 16-column block of B holds, for its 16 columns, the two
 * bf16 of depths 2p and 2p + 1 side by side (a 32-bit "unit"): what a
 * tile multiply reads, and what one dot product instruction takes against
 * a unit of A broadcast. So both operands are converted and repacked once
 * per call (B) or per 32-row panel (A), with zeros past every edge.
 * B goes in panels of columns, each in chunks of depth, whose packed
 * part stays in L2 while every row of A passes over it; C is the sum
 * across chunks. A wide B (the vocabulary's head) thus takes many narrow
 * panels over the whole depth, not all its columns over a thin slice of
 * depth with C read and written again for each.
 *
 * A source whose rows run along the depth (a plain A, a transposed B)
 * gives 16 units per 32 floats of a row; one whose rows are depths (a
 * transposed A, a plain B) gives 16 units from two rows. Where that puts
 * the units across what the kernel wants (a transposed A, a transposed
 * B), 16 x 16 of them are transposed.
 *
 * An operand may come rounded to bf16 already (A16, B16: the activations
 * and gradients that forward_bf16.c keeps in both precisions). Then it is read
 * at half the bytes and not converted, with results the same to the bit;
 * and a plain A16 whose depth is a multiple of 32 is not packed at all:
 * the kernel reads its full panels in place.
 *
 * Threads split the rows of C, sharing B's packing; a product with far
 * more depth than rows (a weight gradient) splits its depth instead, and
 * one with many panels of columns (the vocabulary's head) its panels. */
#include "model/gemm_bf16.h"
#include "model/model_impl.h"
#include "model/simd_transpose.h"

#include "util/fastexp.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// ----------------------------------------------------------------------------
// the kernel

#define AMX_NEEDS "AMX bf16 tiles (Intel Xeon of the 4th generation or later, Linux 5.16 or later)"
#define DP_NEEDS "AVX512-BF16 dot products (Intel Cooper Lake, Xeon of the 4th generation or later, AMD Zen 4 or later)"

static const char *const kernel_names[] = {"none", "amx", "avx512bf16"};

/* each kernel's table (gemm_bf16.h), by model_bf16_kernel_t */
static const gemm_bf16_kernel_t *const kernels[] = {
    [MODEL_BF16_AMX] = &gemm_bf16_amx,
    [MODEL_BF16_AVX512BF16] = &gemm_bf16_avx512bf16,
};

/* model_bf16_kernel's choice, made once, and why there is none */
static model_bf16_kernel_t chosen = MODEL_BF16_NONE;
static char chosen_why[256];
static pthread_once_t choice_once = PTHREAD_ONCE_INIT;
/* model_bf16_use's, or MODEL_BF16_NONE */
static model_bf16_kernel_t forced = MODEL_BF16_NONE;

bool model_bf16_has(model_bf16_kernel_t k) { return k != MODEL_BF16_NONE && kernels[k]->available(); }

const char *model_bf16_kernel_name(model_bf16_kernel_t k) { return kernel_names[k]; }

model_bf16_kernel_t model_bf16_choose(const char *name, char *why, size_t whylen)
{
    if (!name || !*name) {
        if (model_bf16_has(MODEL_BF16_AMX)) return MODEL_BF16_AMX;
        if (model_bf16_has(MODEL_BF16_AVX512BF16)) return MODEL_BF16_AVX512BF16;
        snprintf(why, whylen, "this CPU has neither %s nor %s; use cpu", AMX_NEEDS, DP_NEEDS);
        return MODEL_BF16_NONE;
    }
    model_bf16_kernel_t k = MODEL_BF16_AMX;
    while (k <= MODEL_BF16_AVX512BF16 && strcmp(name, kernel_names[k]) != 0) k++;
    if (k > MODEL_BF16_AVX512BF16) {
        snprintf(why, whylen, "SAPO_BF16_KERNEL \"%.64s\": expected amx or avx512bf16 (unset: the best this CPU has)",
                 name);
        return MODEL_BF16_NONE;
    }
    if (model_bf16_has(k)) return k;
    snprintf(why, whylen, "SAPO_BF16_KERNEL=%s: this CPU has no %s", name, k == MODEL_BF16_AMX ? AMX_NEEDS : DP_NEEDS);
    return MODEL_BF16_NONE;
}

static void choose(void) { chosen = model_bf16_choose(getenv("SAPO_BF16_KERNEL"), chosen_why, sizeof chosen_why); }

model_bf16_kernel_t model_bf16_kernel(const char **why)
{
    if (forced != MODEL_BF16_NONE) return forced;
    pthread_once(&choice_once, choose);
    if (chosen == MODEL_BF16_NONE && why) *why = chosen_why;
    return chosen;
}

bool model_bf16_use(model_bf16_kernel_t k)
{
    if (k != MODEL_BF16_NONE && !model_bf16_has(k)) return false;
    forced = k;
    return true;
}

// ----------------------------------------------------------------------------
// packing

/* 16 units from two source rows: unit j = (bf16 r0[j], bf16 r1[j]); rows
 * that are NULL read as zeros, lanes off the mask too */
TARGET static inline __m512i units_of_rows(const float *r0, const float *r1, __mmask16 mk)
{
    __m512 x0 = r0 ? _mm512_maskz_loadu_ps(mk, r0) : _mm512_setzero_ps();
    __m512 x1 = r1 ? _mm512_maskz_loadu_ps(mk, r1) : _mm512_setzero_ps();
    __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x0));
    __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x1));
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* the same from two rows of bf16 */
TARGET static inline __m512i units_of_rows16(const uint16_t *r0, const uint16_t *r1, __mmask16 mk)
{
    __m512i lo = r0 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, r0)) : _mm512_setzero_si512();
    __m512i hi = r1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, r1)) : _mm512_setzero_si512();
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* 16 units from 32 consecutive floats of one row (NULL: zeros) */
TARGET static inline __m512i units_of_row(const float *r, __mmask32 mk)
{
    if (!r) return _mm512_setzero_si512();
    __m512 lo = _mm512_maskz_loadu_ps((__mmask16)mk, r), hi = _mm512_maskz_loadu_ps((__mmask16)(mk >> 16), r + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* 16 units from one row, 32 depths from offset at: of h (bf16) where
 * given, else of f */
TARGET static inline __m512i units_along(const float *f, const uint16_t *h, size_t at, __mmask32 mk)
{
    return h ? _mm512_maskz_loadu_epi16(mk, h + at) : units_of_row(f + at, mk);
}

/* 16 units from the rows at offsets at and at + ld, of which the first
 * `rows` (0 to 2) exist: of h (bf16) where given, else of f */
TARGET static inline __m512i units_across(const float *f, const uint16_t *h, size_t at, size_t ld, int rows,
                                          __mmask16 mk)
{
    if (h) return units_of_rows16(rows > 0 ? h + at : NULL, rows > 1 ? h + at + ld : NULL, mk);
    return units_of_rows(rows > 0 ? f + at : NULL, rows > 1 ? f + at + ld : NULL, mk);
}

static inline __mmask16 mask16(int n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }
static inline __mmask32 mask32(int n) { return n >= 32 ? 0xffffffffu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1); }

typedef struct {
    bool ta, tb;
    int M, N, K;
    const float *A, *B;
    const uint16_t *A16, *B16; /* the same rounded to bf16, or NULL */
    int lda, ldb;
} op_t;

/* whether the kernel reads the panel of 32 rows from m0 of A16 in place */
static bool a_in_place(const op_t *o, int m0) { return o->A16 && !o->ta && o->K % 32 == 0 && m0 + 32 <= o->M; }

/* a panel of 32 rows of op(A) from row m0, depths [k0, k1), as kb blocks
 * of 32 rows x 32 bf16 */
TARGET static void pack_a(const op_t *o, int m0, int k0, int k1, uint16_t *ap)
{
    int nkb = (k1 - k0 + 31) / 32;
    for (int kb = 0; kb < nkb; kb++) {
        int k = k0 + kb * 32;
        uint16_t *blk = ap + (size_t)kb * 32 * 32;
        if (!o->ta) {
            __mmask32 mk = mask32(k1 - k);
            for (int r = 0; r < 32; r++) {
                __m512i u = m0 + r < o->M ? units_along(o->A, o->A16, (size_t)(m0 + r) * o->lda + k, mk)
                                          : _mm512_setzero_si512();
                _mm512_storeu_si512(blk + r * 32, u);
            }
        } else {
            for (int h = 0; h < 2; h++) {
                int m = m0 + h * 16;
                __mmask16 mk = mask16(o->M - m);
                __m512i u[16];
                for (int p = 0; p < 16; p++) {
                    int ka = k + 2 * p;
                    u[p] = units_across(o->A, o->A16, (size_t)ka * o->lda + m, o->lda, k1 - ka, mk);
                }
                simd_transpose16(u);
                for (int j = 0; j < 16; j++) _mm512_storeu_si512(blk + (h * 16 + j) * 32, u[j]);
            }
        }
    }
}

/* the 16 columns from n0 of op(B), depths [k0, k1), as kp rows of units */
TARGET static void pack_b(const op_t *o, int n0, int k0, int k1, uint16_t *bp)
{
    int nkb = (k1 - k0 + 31) / 32;
    for (int kb = 0; kb < nkb; kb++) {
        int k = k0 + kb * 32;
        uint16_t *blk = bp + (size_t)kb * 16 * 32;
        __m512i u[16];
        if (!o->tb) {
            __mmask16 mk = mask16(o->N - n0);
            for (int p = 0; p < 16; p++) {
                int ka = k + 2 * p;
                u[p] = units_across(o->B, o->B16, (size_t)ka * o->ldb + n0, o->ldb, k1 - ka, mk);
            }
        } else {
            __mmask32 mk = mask32(k1 - k);
            for (int j = 0; j < 16; j++)
                u[j] = n0 + j < o->N ? units_along(o->B, o->B16, (size_t)(n0 + j) * o->ldb + k, mk)
                                     : _mm512_setzero_si512();
            simd_transpose16(u);
        }
        for (int p = 0; p < 16; p++) _mm512_storeu_si512(blk + p * 32, u[p]);
    }
}

// ----------------------------------------------------------------------------
// threads

/* this thread's buffer (model_gemm_ws), at least n bf16 */
static uint16_t *ws_ensure(size_t n) { return model_gemm_ws(n * sizeof(uint16_t)); }

/* the same product over depths [k0, k1) only */
static op_t depth_range(const op_t *o, int k0, int k1)
{
    op_t s = *o;
    size_t a = o->ta ? (size_t)k0 * o->lda : (size_t)k0, b = o->tb ? (size_t)k0 : (size_t)k0 * o->ldb;
    s.K = k1 - k0;
    if (s.A) s.A += a; /* NULL where the bf16 copy stands alone */
    if (s.B) s.B += b;
    if (s.A16) s.A16 += a;
    if (s.B16) s.B16 += b;
    return s;
}

/* how a product is cut: depth in chunks of kc, the columns in panels of
 * nbp 16-column blocks (an even count) of nb16 in all, so that a panel's
 * packed chunk of B (bsz bf16) stays in L2 while every row panel of A
 * (asz bf16 packed) passes over it */
typedef struct {
    int kc, nb16, nbp;
    size_t bsz, asz;
} plan_t;

/* one thread's part of the 16-column blocks [jb0, jb1) of C: each panel
 * of them, chunk by chunk, B packed together (into one of bp's two
 * halves of bsz, in turn), then the thread's panels of A. One barrier a
 * chunk: past it every thread has done with the chunk before, whose half
 * of bp the next one packs into. (Its own function, with the AVX-512
 * instructions enabled: clang does not pass the target to an outlined
 * parallel region.) */
TARGET static void team_part(const gemm_bf16_kernel_t *kn, const op_t *o, int id, int n, const plan_t *pl, int jb0,
                             int jb1, uint16_t *bp2, uint16_t *ap, float beta, float *C, int ldc)
{
    int panels = (o->M + 31) / 32, turn = 0;
    if (kn->begin) kn->begin();
    for (int jn = jb0; jn < jb1; jn += pl->nbp) {
        int nbp = jb1 - jn < pl->nbp ? jb1 - jn : pl->nbp;
        for (int k0 = 0; k0 < o->K; k0 += pl->kc, turn ^= 1) {
            int k1 = k0 + pl->kc < o->K ? k0 + pl->kc : o->K, nkb = (k1 - k0 + 31) / 32;
            size_t bstride = (size_t)nkb * 16 * 32; /* one 16-column block */
            uint16_t *bp = bp2 + turn * pl->bsz;
            /* split by hand, not by omp for: called alone inside another
             * team's region, this thread must not share its loops */
            int j0, j1, p0, p1;
            model_share(nbp, id, n, &j0, &j1);
            for (int j = j0; j < j1; j++) pack_b(o, (jn + j) * 16, k0, k1, bp + j * bstride);
            if (n > 1) {
#pragma omp barrier
            }
            model_share(panels, id, n, &p0, &p1);
            for (int p = p0; p < p1; p++) {
                const uint16_t *a = ap;
                size_t ald = 32, akb = 1024;
                if (a_in_place(o, p * 32)) a = o->A16 + (size_t)p * 32 * o->lda + k0, ald = o->lda, akb = 32;
                else pack_a(o, p * 32, k0, k1, ap);
                for (int j = 0; j < nbp; j += 2)
                    kn->block(C, ldc, o->M, o->N, p * 32, (jn + j) * 16, a, ald, akb, bp + j * bstride,
                              bp + (j + 1) * bstride, nkb, k0 == 0, beta);
            }
        }
    }
    if (kn->end) kn->end();
}

/* a product with much more depth than rows (a weight gradient: depth is
 * the batch's positions) by nth threads, each over its own range of the
 * depth into a C of its own (the first into C), summed into C after:
 * none waits for another until the end, and none reads what another
 * packed */
static void split_depth(const gemm_bf16_kernel_t *kn, const op_t *o, int nth, const plan_t *pl, float beta, float *C,
                        int ldc)
{
    float *parts[64];
    if (nth > 64) nth = 64;
#pragma omp parallel num_threads(nth)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads(), s0, s1, r0, r1, M = o->M, N = o->N;
        model_share((o->K + 31) / 32, id, n, &s0, &s1);
        int k0 = s0 * 32 < o->K ? s0 * 32 : o->K, k1 = s1 * 32 < o->K ? s1 * 32 : o->K;
        size_t at = (2 * pl->bsz + pl->asz + 31) / 32 * 32; /* the thread's C from a 64-byte boundary */
        uint16_t *w = ws_ensure(at + (id ? (size_t)M * N * 2 : 0));
        float *Ct = id ? (float *)(w + at) : C;
        parts[id] = NULL;
        if (k0 < k1) {
            op_t s = depth_range(o, k0, k1);
            team_part(kn, &s, 0, 1, pl, 0, pl->nb16, w, w + 2 * pl->bsz, id ? 0.0f : beta, Ct, id ? N : ldc);
            parts[id] = Ct;
        } else if (id == 0 && beta == 0.0f) {
            for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, N * sizeof(float));
        }
#pragma omp barrier
        /* rows by thread; the parts in thread order */
        model_share(M, id, n, &r0, &r1);
        for (int t = 1; t < n; t++)
            for (int i = r0; parts[t] && i < r1; i++)
                for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] += parts[t][(size_t)i * N + j];
    }
}

/* the packed chunk of B a column panel may take, in bytes */
#define B_PANEL_BYTES (384 << 10)
/* or up to this where one panel then takes every column (a weight
 * gradient's: its rows, of A, are packed once a chunk, not once a panel) */
#define B_WHOLE_BYTES (640 << 10)

/* the cut of a product with N columns and depth K: the whole depth in one
 * chunk up to 768, else chunks of about 512 (C is read and written once
 * a chunk), and as many columns as the chunk leaves room for (measured
 * per shape of SmolLM2's step on an AMD Zen 5, L2 1 MiB). A chunk is at
 * most 768 deep, so a panel holds at least 16 blocks, an even count. */
static plan_t plan(int N, int K)
{
    plan_t pl;
    int chunks = K <= 768 ? 1 : (K + 511) / 512;
    pl.kc = ((K + chunks - 1) / chunks + 31) / 32 * 32;
    pl.nb16 = (N + 31) / 32 * 2; /* 16-column blocks, an even count */
    size_t block = (size_t)pl.kc * 16 * sizeof(uint16_t);
    pl.nbp = (size_t)pl.nb16 * block <= B_WHOLE_BYTES ? pl.nb16 : (int)(B_PANEL_BYTES / block) / 2 * 2;
    pl.bsz = (size_t)pl.nbp * (pl.kc / 2) * 32;
    pl.asz = (size_t)pl.kc * 32;
    return pl;
}

/* C (M, N) = op(A) op(B) + beta C by kernel kn, with model_gemm_amx's
 * contract (model_impl.h) */
static void gemm_bf16_run(const gemm_bf16_kernel_t *kn, bool ta, bool tb, int M, int N, int K, const float *A,
                          const uint16_t *A16, int lda, const float *B, const uint16_t *B16, int ldb, float beta,
                          float *C, int ldc)
{
    op_t o = {ta, tb, M, N, K, A, B, A16, B16, lda, ldb};
    if (M <= 0 || N <= 0) return;
    if (beta != 0.0f && beta != 1.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] *= beta;
    if (beta != 0.0f) beta = 1.0f;
    if (K <= 0) { /* no products: C = beta C */
        for (int i = 0; i < M && beta == 0.0f; i++) memset(C + (size_t)i * ldc, 0, N * sizeof(float));
        return;
    }
    plan_t pl = plan(N, K);
    /* inside a parallel region (attention's per-head calls) this thread
     * does it all, without opening a nested team */
    int nth = omp_in_parallel() ? 1 : omp_get_max_threads(), panels = (M + 31) / 32;
    if (nth > panels) nth = panels;
    if (nth > 1 && K >= 8 * M) { /* a weight gradient: the threads split the depth */
        split_depth(kn, &o, nth, &pl, beta, C, ldc);
        return;
    }
    int wide = (pl.nb16 + pl.nbp - 1) / pl.nbp; /* panels of columns */
    if (nth > 1 && wide >= 2 * nth) {
        /* a wide B (the vocabulary's head): each thread its own panels,
         * packed alone, over every row; none waits for another */
#pragma omp parallel num_threads(nth)
        {
            int id = omp_get_thread_num(), q0, q1;
            model_share(wide, id, omp_get_num_threads(), &q0, &q1);
            uint16_t *w = ws_ensure(2 * pl.bsz + pl.asz);
            int jb1 = q1 * pl.nbp < pl.nb16 ? q1 * pl.nbp : pl.nb16;
            team_part(kn, &o, 0, 1, &pl, q0 * pl.nbp, jb1, w, w + 2 * pl.bsz, beta, C, ldc);
        }
        return;
    }
    /* (this thread's buffer, shared with the team) */
    uint16_t *bp = ws_ensure(2 * pl.bsz + (size_t)nth * pl.asz), *aps = bp + 2 * pl.bsz;
    if (nth == 1) {
        team_part(kn, &o, 0, 1, &pl, 0, pl.nb16, bp, aps, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        int id = omp_get_thread_num();
        team_part(kn, &o, id, omp_get_num_threads(), &pl, 0, pl.nb16, bp, aps + (size_t)id * pl.asz, beta, C, ldc);
    }
}

// ----------------------------------------------------------------------------
// the product, by a kernel

void model_gemm_bf16(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                     const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc)
{
    model_bf16_kernel_t k = model_bf16_kernel(NULL);
    if (k == MODEL_BF16_NONE) {
        /* model_set_backend refuses cpu-bf16 where there is no kernel */
        fprintf(stderr, "model_gemm_bf16: no bf16 kernel on this CPU\n");
        abort();
    }
    gemm_bf16_run(kernels[k], ta, tb, M, N, K, A, A16, lda, B, B16, ldb, beta, C, ldc);
}

void model_gemm_amx(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda, const float *B,
                    const uint16_t *B16, int ldb, float beta, float *C, int ldc)
{
    gemm_bf16_run(&gemm_bf16_amx, ta, tb, M, N, K, A, A16, lda, B, B16, ldb, beta, C, ldc);
}

void model_gemm_avx512bf16(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                           const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc)
{
    gemm_bf16_run(&gemm_bf16_avx512bf16, ta, tb, M, N, K, A, A16, lda, B, B16, ldb, beta, C, ldc);
}

// ----------------------------------------------------------------------------
// the bf16 copies

TARGET void model_bf16_round(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mk = mask16(n - i < 16 ? (int)(n - i) : 16);
        _mm256_mask_storeu_epi16(dst + i, mk, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, src + i)));
    }
}

/* e^x for x <= 0, 16 lanes: util/fastexp.h's (below -87, e^-87), on a
 * block of exactly 16 so that it vectorizes whole */
TARGET static inline __m512 exp16(__m512 x)
{
    float v[16];
    _mm512_storeu_ps(v, _mm512_max_ps(x, _mm512_set1_ps(-87.0f)));
#pragma omp simd
    for (int j = 0; j < 16; j++) v[j] = fastexp_core(v[j]);
    return _mm512_loadu_ps(v);
}

TARGET void model_softmax_causal(float *p, uint16_t *p16, int n, int T, float scale)
{
    __m512 mx = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = mask16(n - i);
        mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_maskz_loadu_ps(mk, p + i));
    }
    __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx)), s = _mm512_set1_ps(scale);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mk = mask16(n - i);
        __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, p + i), m), s));
        _mm512_mask_storeu_ps(p + i, mk, e);
        sum = _mm512_mask_add_ps(sum, mk, sum, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int i = 0; i < T; i += 16) {
        __mmask16 mt = mask16(T - i);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask16(n - i), p + i), inv);
        _mm512_mask_storeu_ps(p + i, mt, x);
        _mm256_mask_storeu_epi16(p16 + i, mt, (__m256i)_mm512_cvtneps_pbh(x));
    }
}
