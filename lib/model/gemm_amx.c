/* The AMX kernel of backend cpu-bf16 (gemm_bf16.c chooses it where the
 * CPU has the tiles): bfloat16 products with fp32 sums on the tiles.
 *
 * A tile multiply takes A as 16 rows of 32 bf16 (depth contiguous) and B
 * as 16 rows of units (gemm_bf16.c's packing): 4 C tiles (a 32 x 32 block
 * of C) against 2 A and 2 B tiles per step of 32 depths. C is loaded into
 * the tiles at the start of a depth chunk and stored back after it. */
#include "model/gemm_bf16.h"
#include "model/model_impl.h"

#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

/* the Linux request for the tile data state */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_ok = -1;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* the CPU has the tiles and the AVX-512 parts the packing uses, and Linux
 * lets this process use the tiles' state */
static void amx_probe(void)
{
    unsigned a, b, c, d;
    amx_ok = 0;
    if (!model_avx512bf16_available() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    bool tile = d >> 24 & 1, bf16 = d >> 22 & 1;
    if (!tile || !bf16) return;
    amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

bool model_amx_available(void)
{
    pthread_once(&amx_once, amx_probe);
    return amx_ok == 1;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config_t;

/* tiles 0-3: C (rows 0-15 and 16-31 by columns 0-15 and 16-31);
 * 4, 5: A (the two row halves); 6, 7: B (the two column halves) */
TARGET static void tiles_configure(void)
{
    tile_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    /* not _tile_loadconfig: GCC 12's tells the compiler it reads 8 bytes,
     * and once this function was no longer inlined the stores of rows and
     * colsb were dropped as dead (the tiles then faulted) */
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

TARGET static void tiles_release(void) { _tile_release(); }

/* gemm_bf16_block_fn on the tiles; a block past M or N goes through a
 * 32 x 32 copy of its part of C */
TARGET static void block(float *C, int ldc, int M, int N, int m0, int n0, const uint16_t *ap, size_t ald, size_t akb,
                         const uint16_t *b0, const uint16_t *b1, int nkb, bool first, float beta)
{
    bool full = m0 + 32 <= M && n0 + 32 <= N;
    float tmp[32 * 32];
    float *c = C + (size_t)m0 * ldc + n0;
    size_t stride = (size_t)ldc * sizeof(float);
    if (!full) {
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 32; j++)
                tmp[i * 32 + j] = m0 + i < M && n0 + j < N && !(first && beta == 0.0f) ? c[(size_t)i * ldc + j] : 0;
        c = tmp, stride = 32 * sizeof(float);
    }
    if (first && beta == 0.0f) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, c, stride);
        _tile_loadd(1, c + 16, stride);
        _tile_loadd(2, (char *)c + 16 * stride, stride);
        _tile_loadd(3, (char *)(c + 16) + 16 * stride, stride);
    }
    for (int kb = 0; kb < nkb; kb++) {
        _tile_loadd(4, ap + kb * akb, ald * 2);
        _tile_loadd(5, ap + kb * akb + 16 * ald, ald * 2);
        _tile_loadd(6, b0 + (size_t)kb * 512, 64);
        _tile_loadd(7, b1 + (size_t)kb * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, stride);
    _tile_stored(1, c + 16, stride);
    _tile_stored(2, (char *)c + 16 * stride, stride);
    _tile_stored(3, (char *)(c + 16) + 16 * stride, stride);
    if (!full) {
        float *cc = C + (size_t)m0 * ldc + n0;
        for (int i = 0; i < 32 && m0 + i < M; i++)
            for (int j = 0; j < 32 && n0 + j < N; j++) cc[(size_t)i * ldc + j] = tmp[i * 32 + j];
    }
}

const gemm_bf16_kernel_t gemm_bf16_amx = {model_amx_available, block, tiles_configure, tiles_release};
