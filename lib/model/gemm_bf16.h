/* What the bf16 matmul of backend cpu-bf16 (gemm_bf16.c: it chooses a
 * kernel, packs the operands into pairs of bf16, cuts the depth in
 * chunks and runs the threads) and its two kernels (gemm_amx.c on the
 * AMX tiles, gemm_avx512bf16.c with AVX512-BF16 dot products) agree on:
 * each kernel exports a table of the step that multiplies one 32 x 32
 * block of C, which gemm_bf16.c calls; a kernel calls nothing of
 * gemm_bf16.c. */
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
    bool (*available)(void); /* whether this CPU (and Linux) runs it */
    gemm_bf16_block_fn *block;
    void (*begin)(void); /* each thread before its first block, or NULL */
    void (*end)(void);   /* and after its last, or NULL */
} gemm_bf16_kernel_t;

/* the kernels' tables: gemm_amx.c's and gemm_avx512bf16.c's */
extern const gemm_bf16_kernel_t gemm_bf16_amx;
extern const gemm_bf16_kernel_t gemm_bf16_avx512bf16;

#endif
