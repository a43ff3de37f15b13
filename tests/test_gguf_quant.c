/* lib/gguf/gguf_quant.c against the gguf Python package: every type that
 * gguf_dequant reads turns the golden blocks into the very floats that
 * gguf.quants.dequantize gave (tests/oracle/gguf_golden.py wrote both), bit
 * for bit; every half converts exactly; the block sizes and names are
 * ggml's; types it does not read are refused. Run from the repository root. */
#include "check.h"
#include "gguf/gguf.h"

#include <stdint.h>

#define GOLDEN "tests/golden/gguf/"

/* the whole file at path (malloc'ed, *len bytes), or NULL with a line */
static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* one line of index.tsv checked: <name>.bin through gguf_dequant equals
 * <name>.f32 bitwise; false when the files do not fit the line */
static bool check_type(const char *name, int type, size_t n, size_t nbytes)
{
    char path[256];
    size_t raw_len = 0, want_len = 0;
    snprintf(path, sizeof path, GOLDEN "%s.bin", name);
    uint8_t *raw = read_all(path, &raw_len);
    snprintf(path, sizeof path, GOLDEN "%s.f32", name);
    float *want = read_all(path, &want_len);
    float *got = malloc(n * sizeof *got);
    int elements = 0;
    size_t bytes = 0;
    bool ok = raw && want && raw_len == nbytes && want_len == n * sizeof(float);
    EXPECTF(ok, "%s: golden files missing or of the wrong size (%zu, %zu bytes)", name, raw_len, want_len);
    ok = ok && ggml_type_block(type, &elements, &bytes);
    EXPECTF(ok && nbytes / bytes * (size_t)elements == n, "%s: %zu bytes are not %zu elements", name, nbytes, n);
    if (ok) {
        EXPECTF(gguf_dequant(type, raw, got, n), "%s: gguf_dequant refused it", name);
        size_t i = 0;
        while (i < n && f32_bits(got[i]) == f32_bits(want[i])) i++;
        EXPECTF(i == n, "%s: element %zu of %zu (block %zu) is %.9g (0x%08x), gguf-py gives %.9g (0x%08x)", name, i, n,
                i / (size_t)elements, got[i], f32_bits(got[i]), want[i], f32_bits(want[i]));
    }
    free(raw);
    free(want);
    free(got);
    return ok;
}

/* every line of index.tsv, and every type gguf_dequant reads is there */
static void test_golden_types(void)
{
    FILE *f = fopen(GOLDEN "index.tsv", "r");
    if (!f) {
        EXPECTF(0, "cannot open %s (run tests/oracle/gguf_golden.py)", GOLDEN "index.tsv");
        return;
    }
    bool seen[64] = {0};
    char name[32];
    int type;
    size_t n, nbytes;
    while (fscanf(f, "%31s %d %zu %zu", name, &type, &n, &nbytes) == 4) {
        EXPECTF(type >= 0 && type < 64 && gguf_dequant_supported(type), "%s: type %d", name, type);
        if (type < 0 || type >= 64) continue;
        seen[type] = true;
        check_type(name, type, n, nbytes);
    }
    fclose(f);
    for (int t = 0; t < 64; t++)
        EXPECTF(!gguf_dequant_supported(t) || seen[t], "type %d (%s) has no golden file", t, ggml_type_name(t));
}

/* all 65536 halves against their value worked out in double */
static void test_f16_exhaustive(void)
{
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h);
    float *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    EXPECT(gguf_dequant(GGML_F16, h, y, N));
    int bad = 0;
    for (int i = 0; i < N && bad < 5; i++) {
        int sign = i >> 15, exp = (i >> 10) & 0x1f, mant = i & 0x3ff;
        uint32_t want;
        if (exp == 0x1f) {
            want = (uint32_t)sign << 31 | 0x7f800000u | (uint32_t)mant << 13;
        } else {
            double v = exp ? ldexp(1024 + mant, exp - 25) : ldexp(mant, -24);
            want = f32_bits((float)(sign ? -v : v));
        }
        if (f32_bits(y[i]) != want) {
            EXPECTF(0, "half 0x%04x gives 0x%08x, want 0x%08x", i, f32_bits(y[i]), want);
            bad++;
        }
    }
    free(h);
    free(y);
}

static void test_type_blocks(void)
{
    static const struct {
        int type;
        const char *name;
        int elements;
        size_t bytes;
    } want[] = {
        {0, "F32", 1, 4},         {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
        {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},
        {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292}, {16, "IQ2_XXS", 256, 66}, {20, "IQ4_NL", 32, 18},
        {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},       {27, "I64", 1, 8},        {28, "F64", 1, 8},
        {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},     {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int elements = -1;
        size_t bytes = 0;
        const char *name = ggml_type_name(want[i].type);
        EXPECTF(name && strcmp(name, want[i].name) == 0, "type %d is called %s", want[i].type, name ? name : "NULL");
        EXPECTF(ggml_type_block(want[i].type, &elements, &bytes) && elements == want[i].elements &&
                    bytes == want[i].bytes,
                "%s: %d elements in %zu bytes", want[i].name, elements, bytes);
    }
    /* retired numbers and numbers past the end */
    const int unknown[] = {-1, 4, 5, 31, 32, 33, 36, 37, 38, 42, 1000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        int elements;
        size_t bytes;
        EXPECTF(ggml_type_name(unknown[i]) == NULL, "type %d has a name", unknown[i]);
        EXPECTF(!ggml_type_block(unknown[i], &elements, &bytes), "type %d has a block", unknown[i]);
    }
}

static void test_refused(void)
{
    const int read[] = {GGML_F32,  GGML_F16,  GGML_BF16, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1,
                        GGML_Q8_0, GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    int n_read = 0;
    for (size_t i = 0; i < sizeof read / sizeof read[0]; i++) EXPECT(gguf_dequant_supported(read[i]));
    for (int t = -1; t < 64; t++) n_read += gguf_dequant_supported(t);
    EXPECTF(n_read == (int)(sizeof read / sizeof read[0]), "%d types read", n_read);

    /* known to ggml but not read here, unknown, and a partial block */
    static uint8_t src[1024];
    float dst[256];
    const int refused[] = {GGML_Q4_0 + 2, 9, 15, 16, 23, 24, 28, 39, -1, 31, 1000};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        EXPECTF(!gguf_dequant_supported(refused[i]), "type %d", refused[i]);
        EXPECTF(!gguf_dequant(refused[i], src, dst, 32), "type %d read", refused[i]);
    }
    EXPECT(!gguf_dequant(GGML_Q4_K, src, dst, 128));
    EXPECT(!gguf_dequant(GGML_Q8_0, src, dst, 33));
    EXPECT(gguf_dequant(GGML_Q8_0, src, dst, 0));
}

int main(void)
{
    RUN_TEST(test_golden_types);
    RUN_TEST(test_f16_exhaustive);
    RUN_TEST(test_type_blocks);
    RUN_TEST(test_refused);
    CHECK_EXIT();
}
