/* ggml's tensor types: their names and block sizes, and dequantization of
 * the float and block-quantized types that llama.cpp files commonly hold.
 *
 * The floats are bit for bit those of the gguf Python package's
 * gguf.quants.dequantize (0.19.0), which tests/oracle/gguf_golden.py uses to
 * write tests/golden/gguf/. The code follows numpy's steps (a scale times a
 * sub-block scale, times the quant, then minus or plus the minimum, each in
 * float32), but the match does not hang on their order: an f16 scale has 11
 * significant bits, and a sub-block scale times a quant at most 12 (Q6_K's
 * 7-bit scale and 5-bit quant), so every product fits float32's 24 bits
 * exactly and only the final add or subtract rounds. Regrouping the
 * products, or a fused multiply-add, gives the same floats.
 *
 * Every block type is little-endian and packed: its f16 scales sit at
 * offsets that are not aligned, hence the memcpy reads. */
#include "gguf/gguf.h"

#include <string.h>

#define QK_K 256 /* elements of a K-quant super-block */

typedef struct {
    const char *name;
    int elements; /* per block */
    size_t bytes; /* per block */
} type_info_t;

/* every type that gguf-py 0.19.0 knows, by ggml_type number; the gaps are
 * numbers that ggml has retired */
static const type_info_t types[] = {
    [0] = {"F32", 1, 4},          [1] = {"F16", 1, 2},          [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},       [6] = {"Q5_0", 32, 22},       [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},       [9] = {"Q8_1", 32, 40},       [10] = {"Q2_K", QK_K, 84},
    [11] = {"Q3_K", QK_K, 110},   [12] = {"Q4_K", QK_K, 144},   [13] = {"Q5_K", QK_K, 176},
    [14] = {"Q6_K", QK_K, 210},   [15] = {"Q8_K", QK_K, 292},   [16] = {"IQ2_XXS", QK_K, 66},
    [17] = {"IQ2_XS", QK_K, 74},  [18] = {"IQ3_XXS", QK_K, 98}, [19] = {"IQ1_S", QK_K, 50},
    [20] = {"IQ4_NL", 32, 18},    [21] = {"IQ3_S", QK_K, 110},  [22] = {"IQ2_S", QK_K, 82},
    [23] = {"IQ4_XS", QK_K, 136}, [24] = {"I8", 1, 1},          [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},         [27] = {"I64", 1, 8},         [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", QK_K, 56},   [30] = {"BF16", 1, 2},        [34] = {"TQ1_0", QK_K, 54},
    [35] = {"TQ2_0", QK_K, 66},   [39] = {"MXFP4", 32, 17},     [40] = {"NVFP4", 64, 36},
    [41] = {"Q1_0", 128, 18},
};

#define N_TYPES ((int)(sizeof types / sizeof types[0]))

const char *ggml_type_name(int type)
{
    if (type < 0 || type >= N_TYPES) return NULL;
    return types[type].name;
}

bool ggml_type_block(int type, int *elements, size_t *bytes)
{
    if (!ggml_type_name(type)) return false;
    if (elements) *elements = types[type].elements;
    if (bytes) *bytes = types[type].bytes;
    return true;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half to float, exact for every input: subnormals, infinities, and
 * NaNs with their payload (numpy keeps a signalling NaN signalling) */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | mant << 13);
    if (exp != 0) return f32_from_bits(sign | (exp + 127 - 15) << 23 | mant << 13);
    /* zero or subnormal: mant * 2^-24 is exact in a float */
    float f = (float)mant * 0x1p-24f;
    return sign ? -f : f;
}

/* the f16 at byte offset off of a block */
static float f16_at(const uint8_t *b, size_t off)
{
    uint16_t h;
    memcpy(&h, b + off, sizeof h);
    return f16_to_f32(h);
}

/* F16: one half per element */
static void dequant_f16(const uint8_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = f16_at(src, 2 * i);
}

/* BF16: the top 16 bits of a float */
static void dequant_bf16(const uint8_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, sizeof h);
        dst[i] = f32_from_bits((uint32_t)h << 16);
    }
}

/* Q4_0, 18 bytes for 32 elements: f16 d, then 16 bytes of 4-bit quants.
 * Byte j holds element j in its low nibble and element j + 16 in its high
 * one. x = d * (q - 8). */
static void block_q4_0(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 0x0f) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

/* Q4_1, 20 bytes for 32 elements: f16 d, f16 m, then 16 bytes of quants
 * as in Q4_0. x = d * q + m. */
static void block_q4_1(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0), m = f16_at(b, 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 0x0f) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* the 5-bit quant of element j of a Q5_0 or Q5_1 block: the nibble as in
 * Q4_0, and bit j of the 32-bit little-endian qh as its fifth bit */
static int q5_quant(const uint8_t *qs, uint32_t qh, int j)
{
    int lo = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
    return lo | (int)((qh >> j) & 1) << 4;
}

/* Q5_0, 22 bytes for 32 elements: f16 d, 4 bytes qh (the high bits), 16
 * bytes of low nibbles. x = d * (q - 16). */
static void block_q5_0(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0);
    uint32_t qh;
    memcpy(&qh, b + 2, sizeof qh);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 32; j++) y[j] = d * (float)(q5_quant(qs, qh, j) - 16);
}

/* Q5_1, 24 bytes for 32 elements: f16 d, f16 m, 4 bytes qh, 16 bytes of
 * low nibbles. x = d * q + m. */
static void block_q5_1(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0), m = f16_at(b, 2);
    uint32_t qh;
    memcpy(&qh, b + 4, sizeof qh);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 32; j++) y[j] = d * (float)q5_quant(qs, qh, j) + m;
}

/* Q8_0, 34 bytes for 32 elements: f16 d, then 32 int8 quants. x = q * d. */
static void block_q8_0(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = (float)qs[j] * d;
}

/* Q2_K, 84 bytes for 256 elements in 16 sub-blocks of 16: 16 bytes of
 * scales (low nibble the sub-block's scale, high nibble its min), 64 bytes
 * of 2-bit quants, f16 d, f16 dmin. Each half of 128 elements takes 32
 * quant bytes: element 32 * s + l of the half is bits 2s..2s+1 of byte l.
 * x = (d * scale) * q - (dmin * min). */
static void block_q2_k(const uint8_t *b, float *y)
{
    const uint8_t *scales = b;
    float d = f16_at(b, 80), dmin = f16_at(b, 82);
    for (int half = 0; half < 2; half++) {
        const uint8_t *qs = b + 16 + 32 * half;
        for (int s = 0; s < 4; s++) {
            for (int k = 0; k < 2; k++) {
                int g = 8 * half + 2 * s + k; /* the sub-block */
                float dl = d * (float)(scales[g] & 0x0f), ml = dmin * (float)(scales[g] >> 4);
                for (int l = 0; l < 16; l++) y[16 * g + l] = dl * (float)(qs[16 * k + l] >> (2 * s) & 3) - ml;
            }
        }
    }
}

/* Q3_K, 110 bytes for 256 elements in 16 sub-blocks of 16: 32 bytes hmask
 * (element 32 * k + l has its high bit in bit k of byte l), 64 bytes of
 * 2-bit low quants laid out as in Q2_K, 12 bytes of 6-bit signed scales,
 * f16 d. Scale g has its low 4 bits in byte g % 8 (low nibble for g < 8,
 * high for g >= 8) and its top 2 bits in bits 2 * (g / 4) of byte 8 + g % 4.
 * A clear hmask bit subtracts 4: q = low - 4 * !high, in -4..3.
 * x = (d * (scale - 32)) * q. */
static void block_q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hmask = b, *sc = b + 96;
    float d = f16_at(b, 108);
    for (int half = 0; half < 2; half++) {
        const uint8_t *qs = b + 32 + 32 * half;
        for (int s = 0; s < 4; s++) {
            int bit = 4 * half + s; /* of hmask, for these 32 elements */
            for (int k = 0; k < 2; k++) {
                int g = 8 * half + 2 * s + k;
                int lo = g < 8 ? sc[g] & 0x0f : sc[g - 8] >> 4;
                int hi = sc[8 + g % 4] >> (2 * (g / 4)) & 3;
                float dl = d * (float)((lo | hi << 4) - 32);
                for (int l = 0; l < 16; l++) {
                    int low = qs[16 * k + l] >> (2 * s) & 3;
                    int high = hmask[16 * k + l] >> bit & 1;
                    y[16 * g + l] = dl * (float)(low - 4 * !high);
                }
            }
        }
    }
}

/* the 6-bit scale and min of sub-block j (0..7) of a Q4_K or Q5_K block,
 * from its 12 scale bytes: for j < 4 the low 6 bits of bytes j and j + 4;
 * for j >= 4 a nibble of byte j + 4 (low for the scale, high for the min)
 * under the top 2 bits of bytes j - 4 and j */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 0x3f;
        *m = s[j + 4] & 0x3f;
    } else {
        *sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q4_K, 144 bytes for 256 elements in 8 sub-blocks of 32: f16 d, f16 dmin,
 * 12 bytes of 6-bit scales and mins (k_scale_min), 128 bytes of 4-bit
 * quants. Sub-blocks 2c and 2c + 1 share 32 bytes: the low nibbles are
 * sub-block 2c, the high ones 2c + 1. x = (d * scale) * q - (dmin * min). */
static void block_q4_k(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0), dmin = f16_at(b, 2);
    const uint8_t *scales = b + 4, *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(scales, j, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t *q = qs + j / 2 * 32;
        int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) y[32 * j + l] = dl * (float)(q[l] >> shift & 0x0f) - ml;
    }
}

/* Q5_K, 176 bytes for 256 elements in 8 sub-blocks of 32: f16 d, f16 dmin,
 * 12 bytes of scales and mins as in Q4_K, 32 bytes qh (element l of
 * sub-block j has its fifth bit in bit j of byte l), 128 bytes of low
 * nibbles as in Q4_K. x = (d * scale) * q - (dmin * min). */
static void block_q5_k(const uint8_t *b, float *y)
{
    float d = f16_at(b, 0), dmin = f16_at(b, 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(scales, j, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        const uint8_t *q = qs + j / 2 * 32;
        int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift & 0x0f) | (qh[l] >> j & 1) << 4;
            y[32 * j + l] = dl * (float)v - ml;
        }
    }
}

/* Q6_K, 210 bytes for 256 elements in 16 sub-blocks of 16: 128 bytes ql
 * (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, f16 d. Each
 * half of 128 elements takes 64 ql bytes and 32 qh bytes: element 32 * t +
 * l of the half has as low bits nibble t / 2 of ql byte 32 * (t % 2) + l,
 * and as high bits bits 2t..2t+1 of qh byte l. x = (d * scale) * (q - 32). */
static void block_q6_k(const uint8_t *b, float *y)
{
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = f16_at(b, 208);
    for (int half = 0; half < 2; half++) {
        const uint8_t *qh = b + 128 + 32 * half;
        for (int t = 0; t < 4; t++) {
            const uint8_t *ql = b + 64 * half + 32 * (t % 2);
            for (int k = 0; k < 2; k++) {
                int g = 8 * half + 2 * t + k;
                float dl = d * (float)scales[g];
                for (int l = 16 * k; l < 16 * k + 16; l++) {
                    int q = (ql[l] >> (4 * (t / 2)) & 0x0f) | (qh[l] >> (2 * t) & 3) << 4;
                    y[16 * g + l - 16 * k] = dl * (float)(q - 32);
                }
            }
        }
    }
}

typedef void (*block_fn)(const uint8_t *b, float *y);

static block_fn block_reader(int type)
{
    switch (type) {
    case GGML_Q4_0: return block_q4_0;
    case GGML_Q4_1: return block_q4_1;
    case GGML_Q5_0: return block_q5_0;
    case GGML_Q5_1: return block_q5_1;
    case GGML_Q8_0: return block_q8_0;
    case GGML_Q2_K: return block_q2_k;
    case GGML_Q3_K: return block_q3_k;
    case GGML_Q4_K: return block_q4_k;
    case GGML_Q5_K: return block_q5_k;
    case GGML_Q6_K: return block_q6_k;
    default: return NULL;
    }
}

bool gguf_dequant_supported(int type)
{
    return type == GGML_F32 || type == GGML_F16 || type == GGML_BF16 || block_reader(type) != NULL;
}

/* also false when n is not a whole number of blocks */
bool gguf_dequant(int type, const void *src, float *dst, size_t n)
{
    int elements;
    size_t bytes;
    if (!gguf_dequant_supported(type) || !ggml_type_block(type, &elements, &bytes)) return false;
    if (n % (size_t)elements != 0) return false;
    const uint8_t *s = src;
    switch (type) {
    case GGML_F32: memcpy(dst, src, n * sizeof *dst); return true;
    case GGML_F16: dequant_f16(s, dst, n); return true;
    case GGML_BF16: dequant_bf16(s, dst, n); return true;
    default: break;
    }
    block_fn read = block_reader(type);
    for (size_t i = 0; i < n / (size_t)elements; i++) read(s + i * bytes, dst + i * (size_t)elements);
    return true;
}
