/* C (M, N) = A (M, K) . B^T + beta C for a few rows of A against weights
 * B in Hugging Face's (out, in) layout: a decode step's matmuls. sgemm
 * repacks all of B on every call, and with 8 rows that copy cost more
 * than the arithmetic (46 % of a decode step's time in the profile). Here
 * every weight row is read in place once per call: 4 rows of B stay in L1
 * while every 4 rows of A meet them, 16 dot products in 16 registers. */
#include "model/model_impl.h"

#include <immintrin.h>
#include <omp.h>

#define ROWS 4 /* of A and of B per block */

/* one row of A against the 4 loaded rows of B */
#define FMA4(i, av)                                                                             \
    do {                                                                                        \
        __m512 a_ = (av);                                                                       \
        c##i##0 = _mm512_fmadd_ps(a_, b0, c##i##0), c##i##1 = _mm512_fmadd_ps(a_, b1, c##i##1); \
        c##i##2 = _mm512_fmadd_ps(a_, b2, c##i##2), c##i##3 = _mm512_fmadd_ps(a_, b3, c##i##3); \
    } while (0)
#define STEP(mk, k)                                                                                \
    do {                                                                                           \
        __m512 b0 = _mm512_maskz_loadu_ps(mk, b[0] + k), b1 = _mm512_maskz_loadu_ps(mk, b[1] + k); \
        __m512 b2 = _mm512_maskz_loadu_ps(mk, b[2] + k), b3 = _mm512_maskz_loadu_ps(mk, b[3] + k); \
        FMA4(0, _mm512_maskz_loadu_ps(mk, a[0] + k));                                              \
        FMA4(1, _mm512_maskz_loadu_ps(mk, a[1] + k));                                              \
        FMA4(2, _mm512_maskz_loadu_ps(mk, a[2] + k));                                              \
        FMA4(3, _mm512_maskz_loadu_ps(mk, a[3] + k));                                              \
    } while (0)

/* one row of A against the 4 rows of B */
#define STEP1(mk, k)                                                       \
    do {                                                                   \
        __m512 a_ = _mm512_maskz_loadu_ps(mk, a + k);                      \
        c0 = _mm512_fmadd_ps(a_, _mm512_maskz_loadu_ps(mk, b[0] + k), c0); \
        c1 = _mm512_fmadd_ps(a_, _mm512_maskz_loadu_ps(mk, b[1] + k), c1); \
        c2 = _mm512_fmadd_ps(a_, _mm512_maskz_loadu_ps(mk, b[2] + k), c2); \
        c3 = _mm512_fmadd_ps(a_, _mm512_maskz_loadu_ps(mk, b[3] + k), c3); \
    } while (0)

/* the first nn of 4 sums into a row of C */
static inline void store(float *c, const float *s, int nn, float beta)
{
    for (int j = 0; j < nn; j++) c[j] = beta == 0.0f ? s[j] : beta * c[j] + s[j];
}

/* the 16 sums (named, not an array: GCC spills an array of vectors) */
__attribute__((target("avx512f"))) static void block_avx512(int M, int n0, int n1, int K, const float *A, int lda,
                                                            const float *B, int ldb, float beta, float *C, int ldc)
{
    int Kv = K & ~15;
    __mmask16 tail = (__mmask16)((1u << (K & 15)) - 1);
    for (int n = n0; n < n1; n += ROWS) {
        int nn = n1 - n < ROWS ? n1 - n : ROWS;
        const float *b[ROWS];
        /* a short block repeats its last row and stores only its own */
        for (int j = 0; j < ROWS; j++) b[j] = B + (size_t)(n + (j < nn ? j : nn - 1)) * ldb;
        int m = 0;
        for (; m + ROWS <= M; m += ROWS) {
            const float *a[ROWS] = {A + (size_t)m * lda, A + (size_t)(m + 1) * lda, A + (size_t)(m + 2) * lda,
                                    A + (size_t)(m + 3) * lda};
            __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00,
                   c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
            for (int k = 0; k < Kv; k += 16) STEP((__mmask16)0xffff, k);
            if (tail) STEP(tail, Kv);
            float s[ROWS][ROWS] = {
                {_mm512_reduce_add_ps(c00), _mm512_reduce_add_ps(c01), _mm512_reduce_add_ps(c02),
                 _mm512_reduce_add_ps(c03)},
                {_mm512_reduce_add_ps(c10), _mm512_reduce_add_ps(c11), _mm512_reduce_add_ps(c12),
                 _mm512_reduce_add_ps(c13)},
                {_mm512_reduce_add_ps(c20), _mm512_reduce_add_ps(c21), _mm512_reduce_add_ps(c22),
                 _mm512_reduce_add_ps(c23)},
                {_mm512_reduce_add_ps(c30), _mm512_reduce_add_ps(c31), _mm512_reduce_add_ps(c32),
                 _mm512_reduce_add_ps(c33)},
            };
            for (int i = 0; i < ROWS; i++) store(C + (size_t)(m + i) * ldc + n, s[i], nn, beta);
        }
        /* the last rows of A one at a time: repeating a row would cost
         * as much as a real one */
        for (; m < M; m++) {
            const float *a = A + (size_t)m * lda;
            __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
            for (int k = 0; k < Kv; k += 16) STEP1((__mmask16)0xffff, k);
            if (tail) STEP1(tail, Kv);
            float s[ROWS] = {_mm512_reduce_add_ps(c0), _mm512_reduce_add_ps(c1), _mm512_reduce_add_ps(c2),
                             _mm512_reduce_add_ps(c3)};
            store(C + (size_t)m * ldc + n, s, nn, beta);
        }
    }
}
#undef STEP1
#undef STEP
#undef FMA4

static void block_plain(int M, int n0, int n1, int K, const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc)
{
    for (int n = n0; n < n1; n++)
        for (int m = 0; m < M; m++) {
            const float *a = A + (size_t)m * lda, *b = B + (size_t)n * ldb;
            float s = 0;
#pragma omp simd reduction(+ : s)
            for (int k = 0; k < K; k++) s += a[k] * b[k];
            float *c = C + (size_t)m * ldc + n;
            *c = beta == 0.0f ? s : beta * *c + s;
        }
}

void model_gemm_few(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc)
{
    void (*block)(int, int, int, int, const float *, int, const float *, int, float, float *, int) =
        __builtin_cpu_supports("avx512f") ? block_avx512 : block_plain;
/* columns split between threads in whole blocks of 16 */
#pragma omp parallel if ((double)M * N * K >= MODEL_FEW_PAR_MIN)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        int per = ((N + n - 1) / n + 15) / 16 * 16, lo = id * per, hi = lo + per < N ? lo + per : N;
        if (lo < hi) block(M, lo, hi, K, A, lda, B, ldb, beta, C, ldc);
    }
}
