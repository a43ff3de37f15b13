/* GGUF, the file format llama.cpp users hold: a header, key/value
 * metadata (the architecture's hyperparameters, the tokenizer, the chat
 * template) and tensors, many of them quantized in blocks. The file is
 * mapped read-only; every offset and size is checked against the file's
 * length before anything is read, so a truncated or hostile file is
 * refused with one line, never read past its end.
 *
 * Tensor shapes are in ggml's order: ne[0] is the length of a row (the
 * fastest-moving index), so a Hugging Face weight (out, in) is stored with
 * ne = {in, out} and its rows come out in the same row-major order. */
#ifndef SAPO_GGUF_H
#define SAPO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* metadata value types, as numbered in the format */
typedef enum {
    GGUF_U8 = 0,
    GGUF_I8 = 1,
    GGUF_U16 = 2,
    GGUF_I16 = 3,
    GGUF_U32 = 4,
    GGUF_I32 = 5,
    GGUF_F32 = 6,
    GGUF_BOOL = 7,
    GGUF_STRING = 8,
    GGUF_ARRAY = 9,
    GGUF_U64 = 10,
    GGUF_I64 = 11,
    GGUF_F64 = 12,
} gguf_vtype_t;

/* tensor types (ggml_type numbers); the ones gguf_dequant reads */
typedef enum {
    GGML_F32 = 0,
    GGML_F16 = 1,
    GGML_Q4_0 = 2,
    GGML_Q4_1 = 3,
    GGML_Q5_0 = 6,
    GGML_Q5_1 = 7,
    GGML_Q8_0 = 8,
    GGML_Q2_K = 10,
    GGML_Q3_K = 11,
    GGML_Q4_K = 12,
    GGML_Q5_K = 13,
    GGML_Q6_K = 14,
    GGML_BF16 = 30,
} ggml_type_t;

#define GGUF_MAX_DIMS 4

typedef struct gguf gguf_t;

/* Maps and parses path (GGUF version 2 or 3). NULL with one line in err
 * naming the file and what is wrong: no such file, a wrong magic, an
 * unknown version or value type, a string or array past the end, a tensor
 * of an unknown type or whose data lies past the end of the file. */
gguf_t *gguf_open(const char *path, char *err, size_t errlen);
void gguf_destroy(gguf_t **self_p);

const char *gguf_path(const gguf_t *self);

/* metadata: index of key, or -1 */
int gguf_find(const gguf_t *self, const char *key);
gguf_vtype_t gguf_type(const gguf_t *self, int k);
/* A scalar key read as an integer, a float or a string (NULL-free,
 * NUL-terminated copy owned by the file): 0, or -1 when the key is absent
 * or of another kind (any integer type reads as an integer, F32 and F64 as
 * a float, BOOL as an integer 0 or 1). */
int gguf_get_int(const gguf_t *self, const char *key, int64_t *out);
int gguf_get_float(const gguf_t *self, const char *key, double *out);
const char *gguf_get_str(const gguf_t *self, const char *key);
/* an array key: its element type and count; -1 when absent or not an array */
int gguf_get_array(const gguf_t *self, const char *key, gguf_vtype_t *type, size_t *n);
/* element i of a string array (pointer into the map, not NUL-terminated),
 * and of numeric arrays as integer or float; the caller checks the type */
const char *gguf_array_str(const gguf_t *self, const char *key, size_t i, size_t *len);
int64_t gguf_array_int(const gguf_t *self, const char *key, size_t i);
double gguf_array_float(const gguf_t *self, const char *key, size_t i);

/* tensors */
int gguf_n_tensors(const gguf_t *self);
/* index of the tensor named name, or -1 */
int gguf_tensor_find(const gguf_t *self, const char *name);
const char *gguf_tensor_name(const gguf_t *self, int t);
ggml_type_t gguf_tensor_type(const gguf_t *self, int t);
/* number of dimensions, and ne[0..n_dims) (the rest 1) */
int gguf_tensor_dims(const gguf_t *self, int t, int64_t ne[GGUF_MAX_DIMS]);
int64_t gguf_tensor_nelements(const gguf_t *self, int t);
/* the tensor's bytes in the map, and their count */
const void *gguf_tensor_data(const gguf_t *self, int t, size_t *nbytes);
/* dequantizes the whole tensor into out (nelements floats); 0, or -1 with
 * err (a type gguf_dequant does not read) */
int gguf_tensor_read(const gguf_t *self, int t, float *out, char *err, size_t errlen);

/* quantized blocks (gguf_quant.c) */
/* the name of a type as ggml writes it ("Q4_K"), or NULL for a number
 * this code does not know */
const char *ggml_type_name(int type);
/* elements per block and bytes per block; false for an unknown type */
bool ggml_type_block(int type, int *elements, size_t *bytes);
/* whether gguf_dequant reads this type */
bool gguf_dequant_supported(int type);
/* n elements (a multiple of the type's block) of type from src into dst,
 * the same floats the gguf Python package's dequantize gives. false for a
 * type it does not read. */
bool gguf_dequant(int type, const void *src, float *dst, size_t n);

#endif
