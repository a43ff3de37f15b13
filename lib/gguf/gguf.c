/* The GGUF container: the file mapped read-only, its metadata and tensor
 * table parsed once into arrays of offsets. Every length read from the file
 * is checked against what is left of it before it is used: a GGUF is often
 * downloaded from strangers, and a count of 2^63 must give an error line,
 * not an allocation or a read past the map. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian uint32 */
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
    char *key;
    gguf_vtype_t type;
    size_t off;         /* the value's first byte (an array's first element) */
    gguf_vtype_t etype; /* arrays: element type */
    size_t n;           /* arrays: element count */
    size_t *str_off;    /* string arrays: each element's length field */
    char *str;          /* scalar strings: a NUL-terminated copy */
} kv_t;

typedef struct {
    char *name;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    int64_t nelements;
    ggml_type_t type;
    size_t off; /* from the file's start */
    size_t nbytes;
} tensor_t;

struct gguf {
    char *path;
    const uint8_t *map;
    size_t size;
    kv_t *kv;
    size_t n_kv, kv_cap; /* parsed, allocated (a failed parse leaves some) */
    tensor_t *tensors;
    size_t n_tensors, tensors_cap;
};

/* a cursor over the map; every read checks what is left */
typedef struct {
    const gguf_t *g;
    size_t pos;
    char *err;
    size_t errlen;
} cursor_t;

static int fail(cursor_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(cursor_t *c, const char *fmt, ...)
{
    int k = snprintf(c->err, c->errlen, "%s: ", c->g->path);
    if (k >= 0 && (size_t)k < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int need(cursor_t *c, size_t n, const char *what)
{
    if (n > c->g->size - c->pos) return fail(c, "truncated: %s at byte %zu runs past the end", what, c->pos);
    return 0;
}

static int read_bytes(cursor_t *c, void *out, size_t n, const char *what)
{
    if (need(c, n, what) != 0) return -1;
    memcpy(out, c->g->map + c->pos, n);
    c->pos += n;
    return 0;
}

static int read_u32(cursor_t *c, uint32_t *v, const char *what) { return read_bytes(c, v, sizeof *v, what); }
static int read_u64(cursor_t *c, uint64_t *v, const char *what) { return read_bytes(c, v, sizeof *v, what); }

/* a string's length field; the bytes follow at c->pos, which moves past them */
static int skip_string(cursor_t *c, size_t *len, const char *what)
{
    uint64_t n;
    if (read_u64(c, &n, what) != 0) return -1;
    if (need(c, n, what) != 0) return -1;
    *len = (size_t)n;
    c->pos += (size_t)n;
    return 0;
}

static char *read_string(cursor_t *c, const char *what)
{
    size_t len;
    if (skip_string(c, &len, what) != 0) return NULL;
    char *s = malloc(len + 1);
    if (!s) {
        fail(c, "out of memory");
        return NULL;
    }
    memcpy(s, c->g->map + c->pos - len, len);
    s[len] = '\0';
    return s;
}

/* bytes of a scalar of type t, 0 for strings and arrays, -1 unknown */
static int scalar_size(uint32_t t)
{
    switch (t) {
    case GGUF_U8:
    case GGUF_I8:
    case GGUF_BOOL: return 1;
    case GGUF_U16:
    case GGUF_I16: return 2;
    case GGUF_U32:
    case GGUF_I32:
    case GGUF_F32: return 4;
    case GGUF_U64:
    case GGUF_I64:
    case GGUF_F64: return 8;
    case GGUF_STRING:
    case GGUF_ARRAY: return 0;
    default: return -1;
    }
}

static int read_array(cursor_t *c, kv_t *kv)
{
    uint32_t et;
    uint64_t n;
    if (read_u32(c, &et, kv->key) != 0 || read_u64(c, &n, kv->key) != 0) return -1;
    int es = scalar_size(et);
    if (es < 0 || et == GGUF_ARRAY) return fail(c, "key %s: array of unknown value type %u", kv->key, et);
    kv->etype = (gguf_vtype_t)et;
    kv->off = c->pos;
    if (et != GGUF_STRING) {
        if (n > (c->g->size - c->pos) / (size_t)es)
            return fail(c, "truncated: key %s's array runs past the end", kv->key);
        kv->n = (size_t)n;
        c->pos += (size_t)n * (size_t)es;
        return 0;
    }
    /* each string takes at least its 8-byte length */
    if (n > (c->g->size - c->pos) / 8) return fail(c, "truncated: key %s's array runs past the end", kv->key);
    kv->n = (size_t)n;
    if (!(kv->str_off = malloc(sizeof(size_t) * (n ? n : 1)))) return fail(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        kv->str_off[i] = c->pos;
        if (skip_string(c, &len, kv->key) != 0) return -1;
    }
    return 0;
}

static int read_kv(cursor_t *c, kv_t *kv)
{
    if (!(kv->key = read_string(c, "a metadata key"))) return -1;
    uint32_t t;
    if (read_u32(c, &t, kv->key) != 0) return -1;
    int size = scalar_size(t);
    if (size < 0) return fail(c, "key %s: unknown value type %u", kv->key, t);
    kv->type = (gguf_vtype_t)t;
    kv->off = c->pos;
    if (t == GGUF_ARRAY) return read_array(c, kv);
    if (t == GGUF_STRING) return (kv->str = read_string(c, kv->key)) ? 0 : -1;
    if (need(c, (size_t)size, kv->key) != 0) return -1;
    c->pos += (size_t)size;
    return 0;
}

static int read_tensor_info(cursor_t *c, tensor_t *t)
{
    if (!(t->name = read_string(c, "a tensor name"))) return -1;
    uint32_t n_dims, type;
    if (read_u32(c, &n_dims, t->name) != 0) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return fail(c, "tensor %s: %u dimensions", t->name, n_dims);
    t->n_dims = (int)n_dims;
    int64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        if (d < t->n_dims && read_u64(c, &v, t->name) != 0) return -1;
        if (v == 0 || v > ((uint64_t)1 << 40) || (uint64_t)n > ((uint64_t)1 << 40) / v)
            return fail(c, "tensor %s: dimension %d of %llu elements", t->name, d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
        n *= (int64_t)v;
    }
    t->nelements = n;
    uint64_t off;
    if (read_u32(c, &type, t->name) != 0 || read_u64(c, &off, t->name) != 0) return -1;
    int blk;
    size_t bytes;
    if (!ggml_type_block((int)type, &blk, &bytes)) return fail(c, "tensor %s: unknown tensor type %u", t->name, type);
    if (t->ne[0] % blk)
        return fail(c, "tensor %s: rows of %lld are not whole %s blocks of %d", t->name, (long long)t->ne[0],
                    ggml_type_name((int)type), blk);
    t->type = (ggml_type_t)type;
    t->nbytes = (size_t)(n / blk) * bytes;
    t->off = (size_t)off; /* relative to the data section until parse() knows where it starts */
    return 0;
}

static int parse(cursor_t *c, gguf_t *g)
{
    uint32_t magic, version;
    if (read_u32(c, &magic, "the magic") != 0) return -1;
    if (magic != GGUF_MAGIC) return fail(c, "not a GGUF file (wrong magic)");
    if (read_u32(c, &version, "the version") != 0) return -1;
    if (version != 2 && version != 3) return fail(c, "GGUF version %u (reads 2 and 3)", version);
    uint64_t n_tensors, n_kv;
    if (read_u64(c, &n_tensors, "the tensor count") != 0 || read_u64(c, &n_kv, "the metadata count") != 0) return -1;
    /* a key takes at least 12 bytes, a tensor's entry at least 28 */
    if (n_kv > g->size / 12 || n_tensors > g->size / 28)
        return fail(c, "truncated: %llu keys and %llu tensors cannot fit", (unsigned long long)n_kv,
                    (unsigned long long)n_tensors);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return fail(c, "out of memory");
    g->kv_cap = (size_t)n_kv;
    g->tensors_cap = (size_t)n_tensors;
    for (; g->n_kv < n_kv; g->n_kv++)
        if (read_kv(c, &g->kv[g->n_kv]) != 0) return -1;
    for (; g->n_tensors < n_tensors; g->n_tensors++)
        if (read_tensor_info(c, &g->tensors[g->n_tensors]) != 0) return -1;
    int64_t align = GGUF_DEFAULT_ALIGNMENT;
    if (gguf_find(g, "general.alignment") >= 0 &&
        (gguf_get_int(g, "general.alignment", &align) != 0 || align <= 0 || (align & (align - 1))))
        return fail(c, "general.alignment is not a power of two");
    size_t data = (c->pos + (size_t)align - 1) / (size_t)align * (size_t)align;
    for (size_t i = 0; i < g->n_tensors; i++) {
        tensor_t *t = &g->tensors[i];
        if (data > g->size || t->off > g->size - data || t->nbytes > g->size - data - t->off)
            return fail(c, "truncated: tensor %s's data lies past the end of the file", t->name);
        t->off += data;
    }
    return 0;
}

gguf_t *gguf_open(const char *path, char *err, size_t errlen)
{
    gguf_t *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    cursor_t c = {g, 0, err, errlen};
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        gguf_destroy(&g);
        return NULL;
    }
    g->size = (size_t)st.st_size;
    if (g->size > 0) {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        g->map = m == MAP_FAILED ? NULL : m;
    }
    close(fd);
    if (g->size > 0 && !g->map) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        g->size = 0;
        gguf_destroy(&g);
        return NULL;
    }
    if (parse(&c, g) != 0) gguf_destroy(&g);
    return g;
}

void gguf_destroy(gguf_t **self_p)
{
    if (!self_p || !*self_p) return;
    gguf_t *g = *self_p;
    for (size_t i = 0; i < g->kv_cap; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_off);
        free(g->kv[i].str);
    }
    for (size_t i = 0; i < g->tensors_cap; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->map) munmap((void *)g->map, g->size);
    free(g->path);
    free(g);
    *self_p = NULL;
}

const char *gguf_path(const gguf_t *self) { return self->path; }

int gguf_find(const gguf_t *self, const char *key)
{
    for (size_t i = 0; i < self->n_kv; i++)
        if (strcmp(self->kv[i].key, key) == 0) return (int)i;
    return -1;
}

gguf_vtype_t gguf_type(const gguf_t *self, int k) { return self->kv[k].type; }

/* a numeric value of type t at p as an integer or a double */
static int64_t as_int(gguf_vtype_t t, const uint8_t *p)
{
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v;
    memcpy(&v, p, (size_t)scalar_size(t));
    switch (t) {
    case GGUF_U8:
    case GGUF_BOOL: return v.u8;
    case GGUF_I8: return v.i8;
    case GGUF_U16: return v.u16;
    case GGUF_I16: return v.i16;
    case GGUF_U32: return v.u32;
    case GGUF_I32: return v.i32;
    case GGUF_U64: return (int64_t)v.u64;
    case GGUF_I64: return v.i64;
    case GGUF_F32: return (int64_t)v.f32;
    case GGUF_F64: return (int64_t)v.f64;
    default: return 0;
    }
}

static double as_float(gguf_vtype_t t, const uint8_t *p)
{
    if (t == GGUF_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    if (t == GGUF_F64) {
        double d;
        memcpy(&d, p, sizeof d);
        return d;
    }
    return (double)as_int(t, p);
}

static bool is_int(gguf_vtype_t t) { return scalar_size(t) > 0 && t != GGUF_F32 && t != GGUF_F64; }

int gguf_get_int(const gguf_t *self, const char *key, int64_t *out)
{
    int k = gguf_find(self, key);
    if (k < 0 || !is_int(self->kv[k].type)) return -1;
    *out = as_int(self->kv[k].type, self->map + self->kv[k].off);
    return 0;
}

int gguf_get_float(const gguf_t *self, const char *key, double *out)
{
    int k = gguf_find(self, key);
    if (k < 0 || (self->kv[k].type != GGUF_F32 && self->kv[k].type != GGUF_F64)) return -1;
    *out = as_float(self->kv[k].type, self->map + self->kv[k].off);
    return 0;
}

const char *gguf_get_str(const gguf_t *self, const char *key)
{
    int k = gguf_find(self, key);
    return k < 0 ? NULL : self->kv[k].str;
}

int gguf_get_array(const gguf_t *self, const char *key, gguf_vtype_t *type, size_t *n)
{
    int k = gguf_find(self, key);
    if (k < 0 || self->kv[k].type != GGUF_ARRAY) return -1;
    *type = self->kv[k].etype;
    *n = self->kv[k].n;
    return 0;
}

static const kv_t *array_kv(const gguf_t *self, const char *key, size_t i)
{
    int k = gguf_find(self, key);
    return k >= 0 && self->kv[k].type == GGUF_ARRAY && i < self->kv[k].n ? &self->kv[k] : NULL;
}

const char *gguf_array_str(const gguf_t *self, const char *key, size_t i, size_t *len)
{
    const kv_t *kv = array_kv(self, key, i);
    if (!kv || kv->etype != GGUF_STRING) return NULL;
    uint64_t n;
    memcpy(&n, self->map + kv->str_off[i], sizeof n);
    *len = (size_t)n;
    return (const char *)self->map + kv->str_off[i] + sizeof n;
}

int64_t gguf_array_int(const gguf_t *self, const char *key, size_t i)
{
    const kv_t *kv = array_kv(self, key, i);
    if (!kv || kv->etype == GGUF_STRING) return 0;
    return as_int(kv->etype, self->map + kv->off + i * (size_t)scalar_size(kv->etype));
}

double gguf_array_float(const gguf_t *self, const char *key, size_t i)
{
    const kv_t *kv = array_kv(self, key, i);
    if (!kv || kv->etype == GGUF_STRING) return 0;
    return as_float(kv->etype, self->map + kv->off + i * (size_t)scalar_size(kv->etype));
}

int gguf_n_tensors(const gguf_t *self) { return (int)self->n_tensors; }

int gguf_tensor_find(const gguf_t *self, const char *name)
{
    for (size_t i = 0; i < self->n_tensors; i++)
        if (strcmp(self->tensors[i].name, name) == 0) return (int)i;
    return -1;
}

const char *gguf_tensor_name(const gguf_t *self, int t) { return self->tensors[t].name; }
ggml_type_t gguf_tensor_type(const gguf_t *self, int t) { return self->tensors[t].type; }

int gguf_tensor_dims(const gguf_t *self, int t, int64_t ne[GGUF_MAX_DIMS])
{
    memcpy(ne, self->tensors[t].ne, sizeof self->tensors[t].ne);
    return self->tensors[t].n_dims;
}

int64_t gguf_tensor_nelements(const gguf_t *self, int t) { return self->tensors[t].nelements; }

const void *gguf_tensor_data(const gguf_t *self, int t, size_t *nbytes)
{
    *nbytes = self->tensors[t].nbytes;
    return self->map + self->tensors[t].off;
}

int gguf_tensor_read(const gguf_t *self, int t, float *out, char *err, size_t errlen)
{
    const tensor_t *x = &self->tensors[t];
    if (!gguf_dequant(x->type, self->map + x->off, out, (size_t)x->nelements)) {
        snprintf(err, errlen, "%s: tensor %s: type %s is not one sapo reads", self->path, x->name,
                 ggml_type_name(x->type));
        return -1;
    }
    return 0;
}
