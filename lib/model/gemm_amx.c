/* C (M, N) = op(A) op(B) + beta C with bfloat16 products on the AMX tiles
 * and fp32 sums: the matmuls of a training step in bf16 mode.
 *
 * A tile multiply takes A as 16 rows of 32 bf16 (depth contiguous) and B
 * in pairs: row p of a B tile holds, for 16 columns, the two bf16 of depths
 * 2p and 2p + 1 side by side (a 32-bit "unit"). So both operands are
 * converted and repacked once per call (B) or per 32-row panel (A), with
 * zeros past every edge, and the tiles then read the packed copies:
 * 4 C tiles (a 32 x 32 block of C) against 2 A and 2 B tiles per step of
 * 32 depths. Depth comes in chunks whose packed B stays in L2; C is the
 * sum across chunks, loaded into the tiles and stored back.
 *
 * A source whose rows run along the depth (a plain A, a transposed B)
 * gives 16 units per 32 floats of a row; one whose rows are depths (a
 * transposed A, a plain B) gives 16 units from two rows. Where that puts
 * the units across what the tile wants (a transposed A, a transposed B),
 * 16 x 16 of them are transposed.
 *
 * An operand may come rounded to bf16 already (A16, B16: the activations
 * and gradients that forward.c keeps in both precisions). Then it is read
 * at half the bytes and not converted, with results the same to the bit;
 * and a plain A16 whose depth is a multiple of 32 is not packed at all:
 * the tiles load its full panels in place.
 *
 * Threads split the rows of C, sharing B's packing; a product with far
 * more depth than rows (a weight gradient) splits its depth instead. */
#include "model/model_impl.h"

#include "util/fastexp.h"

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

/* the Linux request for the tile data state */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_ok = -1;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* the CPU has the tiles and the AVX-512 parts used here, and Linux lets
 * this process use the tiles' state */
static void amx_probe(void)
{
    unsigned a, b, c, d;
    amx_ok = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    bool tile = d >> 24 & 1, bf16 = d >> 22 & 1, avx512 = (b >> 16 & 1) && (b >> 30 & 1) && (b >> 31 & 1);
    if (!tile || !bf16 || !avx512 || !__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a >> 5 & 1)) return;
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
    _tile_loadconfig(&cfg);
}

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

/* r[i] lane j <-> r[j] lane i, for 32-bit lanes */
TARGET static inline void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* each 128-bit lane of r[i] now holds a 4 x 4 block; gather the blocks */
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
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

/* whether the tiles read the panel of 32 rows from m0 of A16 in place */
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
                transpose16(u);
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
            transpose16(u);
        }
        for (int p = 0; p < 16; p++) _mm512_storeu_si512(blk + p * 32, u[p]);
    }
}

/* one 32 x 32 block of C at (m0, n0) over a depth chunk of nkb steps of
 * 32: A's 32 rows at ap, ald bf16 apart, each step akb further on (packed:
 * 32 and 1024; in place: lda and 32); B's two packed 16-column blocks at
 * b0, b1; first: the chunk is the call's first (C scaled by beta, else
 * summed into) */
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

/* each thread's buffers (packed operands, a C of its own), kept across
 * calls */
static _Thread_local struct {
    uint16_t *p;
    size_t cap;
} ws;

/* this thread's buffers, at least n bf16 (64-byte aligned) */
static uint16_t *ws_ensure(size_t n)
{
    if (ws.cap < n) {
        free(ws.p);
        ws.p = aligned_alloc(64, (n * sizeof(uint16_t) + 63) / 64 * 64);
        ws.cap = ws.p ? n : 0;
        if (!ws.p) abort();
    }
    return ws.p;
}

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

/* one thread's part: B packed together, then the thread's panels of A,
 * chunk by chunk (its own function, with the tile instructions enabled:
 * clang does not pass the target to an outlined parallel region) */
TARGET static void team_part(const op_t *o, int id, int n, int kc, int nb16, uint16_t *bp, uint16_t *ap, float beta,
                             float *C, int ldc)
{
    int panels = (o->M + 31) / 32;
    tiles_configure();
    for (int k0 = 0; k0 < o->K; k0 += kc) {
        int k1 = k0 + kc < o->K ? k0 + kc : o->K, nkb = (k1 - k0 + 31) / 32;
        size_t bstride = (size_t)nkb * 16 * 32; /* one 16-column block */
        /* split by hand, not by omp for: called alone inside another
         * team's region, this thread must not share its loops */
        int j0, j1, p0, p1;
        model_share(nb16, id, n, &j0, &j1);
        for (int j = j0; j < j1; j++) pack_b(o, j * 16, k0, k1, bp + j * bstride);
        if (n > 1) {
#pragma omp barrier
        }
        model_share(panels, id, n, &p0, &p1);
        for (int p = p0; p < p1; p++) {
            const uint16_t *a = ap;
            size_t ald = 32, akb = 1024;
            if (a_in_place(o, p * 32)) a = o->A16 + (size_t)p * 32 * o->lda + k0, ald = o->lda, akb = 32;
            else pack_a(o, p * 32, k0, k1, ap);
            for (int j = 0; j < nb16; j += 2)
                block(C, ldc, o->M, o->N, p * 32, j * 16, a, ald, akb, bp + j * bstride, bp + (j + 1) * bstride, nkb,
                      k0 == 0, beta);
        }
        if (n > 1) {
#pragma omp barrier
        }
    }
    _tile_release();
}

/* a product with much more depth than rows (a weight gradient: depth is
 * the batch's positions) by nth threads, each over its own range of the
 * depth into a C of its own (the first into C), summed into C after:
 * none waits for another until the end, and none reads what another
 * packed. bsz, asz: the bf16 a thread packs B and A into */
static void split_depth(const op_t *o, int nth, int kc, int nb16, size_t bsz, size_t asz, float beta, float *C, int ldc)
{
    float *parts[64];
    if (nth > 64) nth = 64;
#pragma omp parallel num_threads(nth)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads(), s0, s1, r0, r1, M = o->M, N = o->N;
        model_share((o->K + 31) / 32, id, n, &s0, &s1);
        int k0 = s0 * 32 < o->K ? s0 * 32 : o->K, k1 = s1 * 32 < o->K ? s1 * 32 : o->K;
        size_t at = (bsz + asz + 31) / 32 * 32; /* the thread's C from a 64-byte boundary */
        uint16_t *w = ws_ensure(at + (id ? (size_t)M * N * 2 : 0));
        float *Ct = id ? (float *)(w + at) : C;
        parts[id] = NULL;
        if (k0 < k1) {
            op_t s = depth_range(o, k0, k1);
            team_part(&s, 0, 1, kc, nb16, w, w + bsz, id ? 0.0f : beta, Ct, id ? N : ldc);
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

void model_gemm_amx(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda, const float *B,
                    const uint16_t *B16, int ldb, float beta, float *C, int ldc)
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
    int nb16 = (N + 31) / 32 * 2; /* 16-column blocks, an even count */
    /* depth per chunk: its packed B about 256 KiB */
    int kc = (int)((1 << 19) / ((size_t)nb16 * 16 * 2 * sizeof(uint16_t))) / 32 * 32;
    kc = kc < 64 ? 64 : kc > K ? (K + 31) / 32 * 32 : kc;
    /* inside a parallel region (attention's per-head calls) this thread
     * does it all, without opening a nested team */
    int nth = omp_in_parallel() ? 1 : omp_get_max_threads(), panels = (M + 31) / 32;
    if (nth > panels) nth = panels;
    size_t bsz = (size_t)nb16 * (kc / 2) * 32, asz = (size_t)kc * 32;
    if (nth > 1 && K >= 8 * M) { /* a weight gradient: the threads split the depth */
        split_depth(&o, nth, kc, nb16, bsz, asz, beta, C, ldc);
        return;
    }
    ws_ensure(bsz + (size_t)nth * asz);
    uint16_t *bp = ws.p, *aps = ws.p + bsz; /* (ws is this thread's, not the team's) */
    if (nth == 1) {
        team_part(&o, 0, 1, kc, nb16, bp, aps, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        int id = omp_get_thread_num();
        team_part(&o, id, omp_get_num_threads(), kc, nb16, bp, aps + (size_t)id * asz, beta, C, ldc);
    }
}

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

TARGET void model_softmax_causal(float *p, uint16_t *p16, bool keep, int n, int T, float scale)
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
        if (keep) _mm512_mask_storeu_ps(p + i, mt, x);
        _mm256_mask_storeu_epi16(p16 + i, mt, (__m256i)_mm512_cvtneps_pbh(x));
    }
}
