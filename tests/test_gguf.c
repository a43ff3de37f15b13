/* The GGUF container (lib/gguf/gguf.c): a small file written here is read
 * back key by key and tensor by tensor; every way a file can be broken
 * (each truncation, a wrong magic or version, an unknown value or tensor
 * type, data past the end, a count too large to be true) gives one error
 * line and no crash; and every tensor of the real model files, where
 * fetched, dequantizes to the floats the gguf Python package gives (the
 * sha256 of each tensor's float32 bytes, tests/oracle/gguf_golden.py). */
#include "check.h"
#include "gguf/gguf.h"
#include "node/policy.h"

#include <limits.h>
#include <sodium.h>
#include <stdint.h>
#include <unistd.h>

/* a GGUF image being written */
typedef struct {
    uint8_t *b;
    size_t n, cap;
} buf_t;

static void put(buf_t *w, const void *p, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2;
        w->b = realloc(w->b, w->cap);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void put_u32(buf_t *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(buf_t *w, uint64_t v) { put(w, &v, 8); }
static void put_str(buf_t *w, const char *s)
{
    put_u64(w, strlen(s));
    put(w, s, strlen(s));
}

/* offsets of fields a test breaks */
typedef struct {
    size_t version, vtype, array_count, tensor_type, tensor_offset;
} marks_t;

/* tensors "a" (F32, 4 x 2, values 0..7) and "q" (Q8_0, one block: scale
 * 0.5, quants -16..15) */
static buf_t sample(marks_t *m)
{
    buf_t w = {0};
    put_u32(&w, 0x46554747u);
    m->version = w.n;
    put_u32(&w, 3);
    put_u64(&w, 2); /* tensors */
    put_u64(&w, 5); /* keys */
    put_str(&w, "general.architecture");
    put_u32(&w, GGUF_STRING);
    put_str(&w, "llama");
    put_str(&w, "general.alignment");
    m->vtype = w.n;
    put_u32(&w, GGUF_U32);
    put_u32(&w, 32);
    put_str(&w, "test.f");
    put_u32(&w, GGUF_F32);
    float f = 1.5f;
    put(&w, &f, 4);
    put_str(&w, "test.ints");
    put_u32(&w, GGUF_ARRAY);
    put_u32(&w, GGUF_I32);
    m->array_count = w.n;
    put_u64(&w, 3);
    for (int32_t i = -1; i < 2; i++) put(&w, &i, 4);
    put_str(&w, "test.strs");
    put_u32(&w, GGUF_ARRAY);
    put_u32(&w, GGUF_STRING);
    put_u64(&w, 2);
    put_str(&w, "a");
    put_str(&w, "bc");
    put_str(&w, "a");
    put_u32(&w, 2);
    put_u64(&w, 4);
    put_u64(&w, 2);
    put_u32(&w, GGML_F32);
    put_u64(&w, 0);
    put_str(&w, "q");
    put_u32(&w, 1);
    put_u64(&w, 32);
    m->tensor_type = w.n;
    put_u32(&w, GGML_Q8_0);
    m->tensor_offset = w.n;
    put_u64(&w, 32);
    while (w.n % 32) put(&w, "", 1);
    for (int i = 0; i < 8; i++) {
        float v = (float)i;
        put(&w, &v, 4);
    }
    uint16_t half = 0x3800; /* 0.5 */
    put(&w, &half, 2);
    for (int i = -16; i < 16; i++) {
        int8_t q = (int8_t)i;
        put(&w, &q, 1);
    }
    return w;
}

static char path[64];

static void write_file(const buf_t *w, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(w->b, 1, n, f);
    fclose(f);
}

static void test_read_back(void)
{
    marks_t m;
    buf_t w = sample(&m);
    write_file(&w, w.n);
    char err[256];
    gguf_t *g = gguf_open(path, err, sizeof err);
    EXPECTF(g != NULL, "%s", err);
    if (g) {
        EXPECT(strcmp(gguf_get_str(g, "general.architecture"), "llama") == 0);
        int64_t v;
        double d;
        EXPECT(gguf_get_int(g, "general.alignment", &v) == 0 && v == 32);
        EXPECT(gguf_get_float(g, "test.f", &d) == 0 && d == 1.5);
        EXPECT(gguf_get_int(g, "test.f", &v) == -1 && gguf_get_int(g, "missing", &v) == -1);
        gguf_vtype_t t;
        size_t n, len;
        EXPECT(gguf_get_array(g, "test.ints", &t, &n) == 0 && t == GGUF_I32 && n == 3);
        EXPECT(gguf_array_int(g, "test.ints", 0) == -1 && gguf_array_int(g, "test.ints", 2) == 1);
        EXPECT(gguf_get_array(g, "test.strs", &t, &n) == 0 && t == GGUF_STRING && n == 2);
        const char *s = gguf_array_str(g, "test.strs", 1, &len);
        EXPECT(s && len == 2 && memcmp(s, "bc", 2) == 0);
        EXPECT(gguf_array_str(g, "test.strs", 2, &len) == NULL);
        EXPECT(gguf_n_tensors(g) == 2 && gguf_tensor_find(g, "q") == 1 && gguf_tensor_find(g, "z") == -1);
        int64_t ne[GGUF_MAX_DIMS];
        EXPECT(gguf_tensor_dims(g, 0, ne) == 2 && ne[0] == 4 && ne[1] == 2 && ne[2] == 1);
        float a[8], q[32];
        EXPECT(gguf_tensor_read(g, 0, a, err, sizeof err) == 0 && a[0] == 0 && a[7] == 7);
        EXPECT(gguf_tensor_read(g, 1, q, err, sizeof err) == 0 && q[0] == -8 && q[31] == 7.5f);
    }
    gguf_destroy(&g);
    free(w.b);
}

/* opening fails with one line naming the file, which holds want */
static void expect_refused(const buf_t *w, size_t n, const char *want)
{
    write_file(w, n);
    char err[256] = "";
    gguf_t *g = gguf_open(path, err, sizeof err);
    EXPECTF(g == NULL, "a broken file (%zu bytes) was opened", n);
    gguf_destroy(&g);
    EXPECTF(strncmp(err, path, strlen(path)) == 0 && !strchr(err, '\n'), "%s", err);
    if (want) EXPECTF(strstr(err, want) != NULL, "%s (wanted %s)", err, want);
}

static void test_truncated(void)
{
    marks_t m;
    buf_t w = sample(&m);
    for (size_t n = 0; n < w.n; n++) expect_refused(&w, n, n >= 24 ? "truncated" : NULL);
    free(w.b);
}

static void test_broken_fields(void)
{
    marks_t m;
    buf_t w = sample(&m);
    w.b[0] = 'X';
    expect_refused(&w, w.n, "wrong magic");
    w.b[0] = 'G';
    uint32_t v1 = 1, big = 99, iq = 16;
    memcpy(w.b + m.version, &v1, 4);
    expect_refused(&w, w.n, "version 1");
    memcpy(w.b + m.version + 0, &(uint32_t){3}, 4);
    memcpy(w.b + m.vtype, &big, 4);
    expect_refused(&w, w.n, "unknown value type 99");
    memcpy(w.b + m.vtype, &(uint32_t){GGUF_U32}, 4);
    memcpy(w.b + m.array_count, &(uint64_t){UINT64_MAX / 2}, 8);
    expect_refused(&w, w.n, "past the end");
    memcpy(w.b + m.array_count, &(uint64_t){3}, 8);
    memcpy(w.b + m.tensor_type, &big, 4);
    expect_refused(&w, w.n, "unknown tensor type 99");
    memcpy(w.b + m.tensor_type, &(uint32_t){GGML_Q8_0}, 4);
    memcpy(w.b + m.tensor_offset, &(uint64_t){64}, 8);
    expect_refused(&w, w.n, "tensor q's data lies past the end");
    memcpy(w.b + m.tensor_offset, &(uint64_t){32}, 8);
    /* a type ggml knows and sapo does not dequantize: the file opens, the
     * tensor's read names the type */
    memcpy(w.b + m.tensor_type, &iq, 4);
    write_file(&w, w.n);
    char err[256] = "";
    gguf_t *g = gguf_open(path, err, sizeof err);
    float q[256];
    EXPECT(g == NULL || (gguf_tensor_read(g, 1, q, err, sizeof err) == -1 && strstr(err, "IQ2_XXS")));
    gguf_destroy(&g);
    free(w.b);
}

/* every tensor's float32 bytes hash as the tsv says (name, type, shape,
 * sha256) */
static void check_tensors(const char *name)
{
    char file[PATH_MAX], err[512], tsv[128];
    const char *cache = getenv("SAPO_MODEL_CACHE");
    if (policy_model_path(name, cache ? cache : "", file, sizeof file, err, sizeof err) != 0) {
        static char why[128];
        snprintf(why, sizeof why, "%s is not fetched (scripts/model.sh get %s)", name, name);
        SKIP_TEST(why);
    }
    snprintf(tsv, sizeof tsv, "tests/golden/gguf/%s.tensors.tsv", name);
    FILE *f = fopen(tsv, "r");
    gguf_t *g = gguf_open(file, err, sizeof err);
    EXPECTF(f && g, "%s", err);
    char line[512];
    int lines = 0;
    while (f && g && fgets(line, sizeof line, f)) {
        char tname[128], shape[128], hex[65];
        int type;
        if (line[0] == '#' || sscanf(line, "%127s %d %127s %64s", tname, &type, shape, hex) != 4) continue;
        lines++;
        int t = gguf_tensor_find(g, tname);
        EXPECTF(t >= 0 && (int)gguf_tensor_type(g, t) == type, "%s", tname);
        if (t < 0) continue;
        size_t n = (size_t)gguf_tensor_nelements(g, t);
        float *x = malloc(n * sizeof(float));
        EXPECT(gguf_tensor_read(g, t, x, err, sizeof err) == 0);
        unsigned char h[32];
        char got[65];
        crypto_hash_sha256(h, (const unsigned char *)x, n * sizeof(float));
        for (int i = 0; i < 32; i++) sprintf(got + 2 * i, "%02x", h[i]);
        EXPECTF(strcmp(got, hex) == 0, "%s (%s) dequantizes differently from the gguf package", tname,
                ggml_type_name(type));
        free(x);
    }
    EXPECTF(g && lines == gguf_n_tensors(g), "%d lines for %d tensors", lines, g ? gguf_n_tensors(g) : -1);
    if (f) fclose(f);
    gguf_destroy(&g);
}

static void test_smollm2_tensors(void) { check_tensors("smollm2-135m"); }
static void test_qwen_tensors(void) { check_tensors("qwen2.5-coder-0.5b"); }

int main(void)
{
    snprintf(path, sizeof path, "/tmp/test_gguf.%d.gguf", (int)getpid());
    RUN_TEST(test_read_back);
    RUN_TEST(test_truncated);
    RUN_TEST(test_broken_fields);
    RUN_TEST(test_smollm2_tensors);
    RUN_TEST(test_qwen_tensors);
    unlink(path);
    return check_failures ? 1 : 0;
}
