/* The AVX512-BF16 kernel of backend cpu-bf16 (gemm_bf16.c chooses it
 * where the CPU has no AMX tiles, or when SAPO_BF16_KERNEL says so):
 * bfloat16 products with fp32 sums by vdpbf16ps, which adds to each of
 * 16 fp32 lanes the two products of a pair of bf16 (one unit of
 * gemm_bf16.c's packing).
 *
 * A 32 x 32 block of C goes as four bands of 8 rows: 16 accumulators
 * (8 rows by 2 vectors of 16 columns) stay in registers over the depth
 * chunk; each pair of depths loads a unit of both B blocks, broadcasts
 * each row's unit of A and issues 16 dot products. */
#include "model/gemm_bf16.h"
#include "model/model_impl.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

static int dp_ok = -1;
static pthread_once_t dp_once = PTHREAD_ONCE_INIT;

/* AVX-512 F (and the OS saves its state: model_avx512_available), BW,
 * VL and BF16 (CPUID leaf 7) */
static void dp_probe(void)
{
    unsigned a, b, c, d;
    dp_ok = 0;
    if (!model_avx512_available() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    if (!(b >> 30 & 1) || !(b >> 31 & 1) || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return;
    dp_ok = a >> 5 & 1;
}

bool model_avx512bf16_available(void)
{
    pthread_once(&dp_once, dp_probe);
    return dp_ok == 1;
}

static inline __mmask16 mask16(int n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* the band of 8 rows from m (those under M stored) of the block at
 * column n0: gemm_bf16_block_fn's arguments, a at the band's first row;
 * zero: C is not read */
TARGET static inline void band(float *C, int ldc, int M, int N, int m, int n0, const uint16_t *a, size_t ald,
                               size_t akb, const uint16_t *b0, const uint16_t *b1, int nkb, bool zero)
{
    __mmask16 k0 = mask16(N - n0), k1 = mask16(N - n0 - 16);
    int rows = M - m < 8 ? M - m : 8;
    __m512 c0[8], c1[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        c0[i] = c1[i] = _mm512_setzero_ps();
        if (i < rows && !zero) {
            c0[i] = _mm512_maskz_loadu_ps(k0, C + (size_t)(m + i) * ldc + n0);
            c1[i] = _mm512_maskz_loadu_ps(k1, C + (size_t)(m + i) * ldc + n0 + 16);
        }
    }
    for (int kb = 0; kb < nkb; kb++) {
        const uint16_t *ak = a + kb * akb, *bk0 = b0 + (size_t)kb * 512, *bk1 = b1 + (size_t)kb * 512;
        for (int p = 0; p < 16; p++) {
            __m512bh v0 = (__m512bh)_mm512_loadu_si512(bk0 + p * 32), v1 = (__m512bh)_mm512_loadu_si512(bk1 + p * 32);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                int32_t u;
                memcpy(&u, ak + i * ald + 2 * p, sizeof u);
                __m512bh au = (__m512bh)_mm512_set1_epi32(u);
                c0[i] = _mm512_dpbf16_ps(c0[i], au, v0);
                c1[i] = _mm512_dpbf16_ps(c1[i], au, v1);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        if (i < rows) {
            _mm512_mask_storeu_ps(C + (size_t)(m + i) * ldc + n0, k0, c0[i]);
            _mm512_mask_storeu_ps(C + (size_t)(m + i) * ldc + n0 + 16, k1, c1[i]);
        }
}

/* gemm_bf16_block_fn by dot products */
TARGET static void block(float *C, int ldc, int M, int N, int m0, int n0, const uint16_t *ap, size_t ald, size_t akb,
                         const uint16_t *b0, const uint16_t *b1, int nkb, bool first, float beta)
{
    for (int r = 0; r < 32 && m0 + r < M; r += 8)
        band(C, ldc, M, N, m0 + r, n0, ap + r * ald, ald, akb, b0, b1, nkb, first && beta == 0.0f);
}

const gemm_bf16_kernel_t gemm_bf16_avx512bf16 = {model_avx512bf16_available, block, NULL, NULL};
