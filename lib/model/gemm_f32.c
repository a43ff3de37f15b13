/* C (M, N) = op(A) op(B) + beta C in fp32 on the calling thread, by
 * AVX-512 fused multiply-adds: the large matmuls of backend cpu where the
 * CPU has AVX-512 and OpenBLAS's kernels do not use it (model_gemm1
 * chooses). OpenBLAS does the rest. OpenBLAS chooses its kernels at run
 * time, by its own detection or by OPENBLAS_CORETYPE, and a machine that
 * names an AVX2 core there (Haswell), or a CPU this OpenBLAS does not
 * know, runs sgemm at half the vector width the CPU has. Where OpenBLAS
 * runs its AVX-512 kernels they stay: on an AMD Zen 5 this one reached
 * 0.83 to 0.95 of their speed (docs/benchmarks.md).
 *
 * The blocking is Goto's: the columns of op(B) go in panels whose packed
 * chunk of depth stays in L2; for each 12 rows of op(A), their slice of
 * the chunk is packed (it stays in L1) and multiplied against every
 * 32-column block of the panel, 24 accumulators in registers over the
 * chunk. Packed operands are padded with zeros past M, N and K, so the
 * kernel runs whole and stores only what exists.
 *
 * The depth's chunks depend on K alone, so every element of C sums its
 * products in the same order however a caller splits the rows or columns
 * among threads. */
#include "model/model_impl.h"
#include "model/simd_transpose.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f")))

#define MR 12 /* rows of C a kernel call computes */
#define MR_MASK ((__mmask16)((1u << MR) - 1))
#define NR 32 /* columns: two vectors */
/* a packed chunk of B's panel takes at most this many bytes (L2 is 1 MiB
 * a core on the AMD Zen 5 it was measured on, 2 MiB on Intel's) */
#define PANEL_BYTES (512 << 10)

static int f32_ok = -1;
static pthread_once_t f32_once = PTHREAD_ONCE_INIT;

/* AVX-512 F (CPUID leaf 7), and the OS saves the vector and mask
 * registers (XCR0's SSE, AVX, opmask and ZMM bits) */
static void f32_probe(void)
{
    unsigned a, b, c, d, lo, hi;
    f32_ok = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return; /* OSXSAVE */
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    f32_ok = b >> 16 & 1;
}

bool model_avx512_available(void)
{
    pthread_once(&f32_once, f32_probe);
    return f32_ok == 1;
}

static inline __mmask16 mask16(int n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* how the depth is cut: chunks of at most 384, as even as 16s allow */
static int chunk_of(int K)
{
    int chunks = (K + 383) / 384;
    return ((K + chunks - 1) / chunks + 15) / 16 * 16;
}

/* rows [m0, m0 + MR) of op(A), depths [k0, k0 + kc), as kc rows of MR */
TARGET static void pack_a(bool ta, const float *A, int lda, int M, int m0, int k0, int kc, float *ap)
{
    int rows = M - m0 < MR ? M - m0 : MR;
    if (ta) {
        __mmask16 mk = mask16(rows);
        for (int k = 0; k < kc; k++) {
            __m512 v = _mm512_maskz_loadu_ps(mk, A + (size_t)(k0 + k) * lda + m0);
            _mm512_mask_storeu_ps(ap + (size_t)k * MR, MR_MASK, v);
        }
        return;
    }
    /* rows along the depth: 16 depths of each row at a time, transposed */
    for (int k = 0; k < kc; k += 16) {
        __m512 r[16];
        __mmask16 mk = mask16(kc - k);
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(mk, A + (size_t)(m0 + i) * lda + k0 + k) : _mm512_setzero_ps();
        simd_transpose16((__m512i *)r);
        for (int j = 0; j < 16 && k + j < kc; j++) _mm512_mask_storeu_ps(ap + (size_t)(k + j) * MR, MR_MASK, r[j]);
    }
}

/* columns [n0, n0 + NR) of op(B), depths [k0, k0 + kc), as kc rows of NR */
TARGET static void pack_b(bool tb, const float *B, int ldb, int N, int n0, int k0, int kc, float *bp)
{
    if (!tb) {
        __mmask16 m0 = mask16(N - n0), m1 = mask16(N - n0 - 16);
        for (int k = 0; k < kc; k++) {
            const float *row = B + (size_t)(k0 + k) * ldb + n0;
            _mm512_storeu_ps(bp + (size_t)k * NR, _mm512_maskz_loadu_ps(m0, row));
            _mm512_storeu_ps(bp + (size_t)k * NR + 16, _mm512_maskz_loadu_ps(m1, row + 16));
        }
        return;
    }
    /* columns along the depth: 16 columns by 16 depths at a time */
    for (int h = 0; h < NR; h += 16)
        for (int k = 0; k < kc; k += 16) {
            __m512 r[16];
            __mmask16 mk = mask16(kc - k);
            for (int j = 0; j < 16; j++)
                r[j] = n0 + h + j < N ? _mm512_maskz_loadu_ps(mk, B + (size_t)(n0 + h + j) * ldb + k0 + k)
                                      : _mm512_setzero_ps();
            simd_transpose16((__m512i *)r);
            for (int p = 0; p < 16 && k + p < kc; p++) _mm512_storeu_ps(bp + (size_t)(k + p) * NR + h, r[p]);
        }
}

/* C's rows [0, rows) and columns [0, cols) of the block at c += or = (where
 * zero) the packed a (kc x MR) times the packed b (kc x NR) */
TARGET static void kernel(int kc, const float *a, const float *b, float *c, int ldc, int rows, int cols, bool zero)
{
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b + (size_t)k * NR), b1 = _mm512_load_ps(b + (size_t)k * NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[(size_t)k * MR + i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    __mmask16 k0 = mask16(cols), k1 = mask16(cols - 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) {
            float *ci = c + (size_t)i * ldc;
            if (!zero) {
                acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(k0, ci));
                acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(k1, ci + 16));
            }
            _mm512_mask_storeu_ps(ci, k0, acc[i][0]);
            _mm512_mask_storeu_ps(ci + 16, k1, acc[i][1]);
        }
}

void model_gemm_f32(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (beta != 0.0f && beta != 1.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] *= beta;
    if (K <= 0) {
        for (int i = 0; i < M && beta == 0.0f; i++) memset(C + (size_t)i * ldc, 0, N * sizeof(float));
        return;
    }
    int kc = chunk_of(K);
    int nc = (int)(PANEL_BYTES / ((size_t)kc * sizeof(float))) / NR * NR;
    int nround = (N + NR - 1) / NR * NR;
    if (nc > nround) nc = nround;
    float *bp = model_gemm_ws(sizeof(float) * ((size_t)kc * nc + (size_t)kc * MR)), *ap = bp + (size_t)kc * nc;
    for (int n0 = 0; n0 < N; n0 += nc) {
        int ncols = N - n0 < nc ? N - n0 : nc;
        for (int k0 = 0; k0 < K; k0 += kc) {
            int kd = K - k0 < kc ? K - k0 : kc;
            for (int j = 0; j < ncols; j += NR) pack_b(tb, B, ldb, N, n0 + j, k0, kd, bp + (size_t)j * kd);
            bool zero = k0 == 0 && beta == 0.0f;
            for (int m0 = 0; m0 < M; m0 += MR) {
                pack_a(ta, A, lda, M, m0, k0, kd, ap);
                int rows = M - m0 < MR ? M - m0 : MR;
                for (int j = 0; j < ncols; j += NR)
                    kernel(kd, ap, bp + (size_t)j * kd, C + (size_t)m0 * ldc + n0 + j, ldc, rows, ncols - j, zero);
            }
        }
    }
}
