/* What the two bf16 kernels of backend cpu-bf16 (gemm_amx.c on the AMX
 * tiles, gemm_avx512bf16.c with AVX512-BF16 dot products) share, in
 * gemm_bf16.c: the operands packed into pairs of bf16, the depth in
 * chunks, the threads. A kernel brings the step that multiplies one
 * 32 x 32 block of C. */
#ifndef SAPO_MODEL_GEMM_BF16_H
#define SAPO_MODEL_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One 32 x 32 block of C (M, N) at (m0, n0) over a depth chunk of nkb
 * steps of 32 depths; C is scaled by beta (0 or 1) when first (the call's
 * first chunk), else summed into. A's 32 rows at ap, ald bf16 apart, each
 * step akb further on, a row's 32 bf16 the 16 pairs of depths (2p,
 * 2p + 1) of the step; rows past M are zeros or absent (never stored).
 * B's two blocks of 16 columns at b0 and b1, 512 bf16 a step: row p of a
 * step holds the pairs (2p, 2p + 1) of its 16 columns side by side, zeros
 * past N and past the depth. */
typedef void gemm_bf16_block_fn(float *C, int ldc, int M, int N, int m0, int n0, const uint16_t *ap, size_t ald,
                                size_t akb, const uint16_t *b0, const uint16_t *b1, int nkb, bool first, float beta);

typedef struct {
    gemm_bf16_block_fn *block;
    void (*begin)(void); /* each thread before its first block, or NULL */
    void (*end)(void);   /* and after its last, or NULL */
} gemm_bf16_kernel_t;

/* C (M, N) = op(A) op(B) + beta C by kernel k, with model_gemm_amx's
 * contract (model_impl.h) */
void gemm_bf16_run(const gemm_bf16_kernel_t *k, bool ta, bool tb, int M, int N, int K, const float *A,
                   const uint16_t *A16, int lda, const float *B, const uint16_t *B16, int ldb, float beta, float *C,
                   int ldc);

#endif
