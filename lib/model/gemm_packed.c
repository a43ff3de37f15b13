/* C (M, N) = A (M, K) . W^T (+ bias) (+ C) against weights packed once:
 * a decode step's matmuls. sgemm repacks its weight operand on every
 * call, and with a decode batch of 64 rows split between two threads that
 * copy took as long as the arithmetic (21 % of a batched decode step in
 * the profile, against 23 % in the kernel). Weights do not change while
 * a batch is sampled, so model_pack lays each matrix out once, in panels
 * of MODEL_PANEL columns with K consecutive rows of MODEL_PANEL floats,
 * and every step streams them as they lie: MR rows of A, one panel, MR x
 * MODEL_PANEL sums in registers. */
#include "model/model_impl.h"

#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

size_t model_packed_bytes(int N, int K)
{
    return (size_t)(N + MODEL_PANEL - 1) / MODEL_PANEL * MODEL_PANEL * K * sizeof(float);
}

int model_pack(model_packed_t *p, const float *W, int N, int K)
{
    int np = (N + MODEL_PANEL - 1) / MODEL_PANEL;
    p->N = N, p->K = K, p->np = np;
    p->w = aligned_alloc(64, (model_packed_bytes(N, K) + 63) / 64 * 64);
    if (!p->w) return -1;
    for (int b = 0; b < np; b++) {
        float *d = p->w + (size_t)b * K * MODEL_PANEL;
        for (int j = 0; j < MODEL_PANEL; j++) {
            int col = b * MODEL_PANEL + j;
            const float *s = W + (size_t)col * K;
            for (int k = 0; k < K; k++) d[(size_t)k * MODEL_PANEL + j] = col < N ? s[k] : 0.0f;
        }
    }
    return 0;
}

void model_packed_free(model_packed_t *p)
{
    free(p->w);
    p->w = NULL;
}

/* MR rows of A against one panel: the sums in registers over all K, then
 * (+ C) (+ bias) into the first nn columns of C. VT is a vector of VW
 * floats; a panel is NV of them */
#define TILE(NAME, TGT, VT, VW, MR, FMA)                                                                            \
    __attribute__((target(TGT), always_inline)) static inline void NAME(int mr, int nn, int K, const float *A,      \
                                                                        int lda, const float *P, const float *bias, \
                                                                        bool acc, float *C, int ldc)                \
    {                                                                                                               \
        enum { NV = MODEL_PANEL / VW };                                                                             \
        VT s[MR][NV];                                                                                               \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++)   \
            s[i][v] = (VT){0};                                                                                      \
        for (int k = 0; k < K; k++) {                                                                               \
            const VT *b = (const VT *)(P + (size_t)k * MODEL_PANEL);                                                \
            _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                                    \
            {                                                                                                       \
                if (i < mr) {                                                                                       \
                    float a = A[(size_t)i * lda + k];                                                               \
                    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++) s[i][v] = FMA(a, b[v], s[i][v]);           \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        for (int i = 0; i < mr && i < MR; i++) {                                                                    \
            float row[MODEL_PANEL], *c = C + (size_t)i * ldc;                                                       \
            memcpy(row, s[i], sizeof row);                                                                          \
            for (int j = 0; j < nn; j++) c[j] = (acc ? c[j] : 0.0f) + row[j] + (bias ? bias[j] : 0.0f);             \
        }                                                                                                           \
    }

typedef float v16_t __attribute__((vector_size(64)));
typedef float v8_t __attribute__((vector_size(32)));
typedef float v4_t __attribute__((vector_size(16)));

#define MR512 8
#define MR256 3
#define MR128 2
/* s + a b, one rounding where there is a fused multiply-add */
#define FMA512(a, b, s) (v16_t) _mm512_fmadd_ps(_mm512_set1_ps(a), (__m512)(b), (__m512)(s))
#define FMA256(a, b, s) (v8_t) _mm256_fmadd_ps(_mm256_set1_ps(a), (__m256)(b), (__m256)(s))
#define FMA128(a, b, s) ((s) + (a) * (b))
TILE(tile512, "avx512f,fma", v16_t, 16, MR512, FMA512)
TILE(tile256, "avx2,fma", v8_t, 8, MR256, FMA256)
TILE(tile128, "sse4.2", v4_t, 4, MR128, FMA128)

/* panels [b0, b1) of p against all M rows, by one thread; each tile
 * function takes the rows MR at a time, the last few by a copy of the
 * tile for that count */
#define PANELS(NAME, TGT, TILEF, MR)                                                                                  \
    __attribute__((target(TGT))) static void NAME(int M, int b0, int b1, const float *A, int lda,                     \
                                                  const model_packed_t *p, const float *bias, bool acc, float *C,     \
                                                  int ldc)                                                            \
    {                                                                                                                 \
        for (int b = b0; b < b1; b++) {                                                                               \
            int col = b * MODEL_PANEL, nn = p->N - col < MODEL_PANEL ? p->N - col : MODEL_PANEL;                      \
            const float *P = p->w + (size_t)b * p->K * MODEL_PANEL, *bi = bias ? bias + col : NULL;                   \
            int m = 0;                                                                                                \
            for (; m + MR <= M; m += MR)                                                                              \
                TILEF(MR, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc);            \
            switch (M - m) {                                                                                          \
            case 0: break;                                                                                            \
            case 1: TILEF(1, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break;  \
            case 2: TILEF(2, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break;  \
            case 3: TILEF(3, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break;  \
            case 4: TILEF(4, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break;  \
            case 5: TILEF(5, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break;  \
            case 6: TILEF(6, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break;  \
            default: TILEF(7, nn, p->K, A + (size_t)m * lda, lda, P, bi, acc, C + (size_t)m * ldc + col, ldc); break; \
            }                                                                                                         \
        }                                                                                                             \
    }

PANELS(panels512, "avx512f,fma", tile512, MR512)
PANELS(panels256, "avx2,fma", tile256, MR256)
PANELS(panels128, "sse4.2", tile128, MR128)

typedef void panels_fn(int, int, int, const float *, int, const model_packed_t *, const float *, bool, float *, int);

static bool has_bits(int bits)
{
    return bits == 128 || (bits == 256 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ||
           (bits == 512 && __builtin_cpu_supports("avx512f"));
}

static int forced_bits; /* model_packed_use's choice; 0: the widest */

bool model_packed_use(int bits)
{
    if (bits && !has_bits(bits)) return false;
    forced_bits = bits;
    return true;
}

static panels_fn *panels_pick(void)
{
    int bits = forced_bits ? forced_bits : has_bits(512) ? 512 : has_bits(256) ? 256 : 128;
    return bits == 512 ? panels512 : bits == 256 ? panels256 : panels128;
}

/* thread id's share (of nth) of the panels */
static void gemm_part(int M, const float *A, int lda, const model_packed_t *p, const float *bias, bool acc, float *C,
                      int ldc, int id, int nth)
{
    int lo, hi;
    model_share(p->np, id, nth, &lo, &hi);
    if (lo < hi) panels_pick()(M, lo, hi, A, lda, p, bias, acc, C, ldc);
}

void model_gemm_packed(int M, const float *A, int lda, const model_packed_t *p, const float *bias, bool acc, float *C,
                       int ldc)
{
#pragma omp parallel if ((double)M * p->N * p->K >= MODEL_FEW_PAR_MIN)
    gemm_part(M, A, lda, p, bias, acc, C, ldc, omp_get_thread_num(), omp_get_num_threads());
}
