/* Inside of model_t, shared by the files of lib/model only. */
#ifndef SAPO_MODEL_IMPL_H
#define SAPO_MODEL_IMPL_H

#include "model/model.h"

/* one pointer per parameter tensor, all layers of a kind contiguous, into
 * one allocation; a tensor the config lacks has size 0 and pointer NULL */
typedef struct {
    float *wte; // (V, C)
    float *ln1; // (L, C)
    float *wq;  // (L, NH*HD, C)
    float *bq;  // (L, NH*HD)
    float *wk;  // (L, NKV*HD, C)
    float *bk;  // (L, NKV*HD)
    float *wv;  // (L, NKV*HD, C)
    float *bv;  // (L, NKV*HD)
    float *qn;  // (L, HD) Qwen3 q_norm
    float *kn;  // (L, HD) Qwen3 k_norm
    float *wo;  // (L, C, NH*HD)
    float *bo;  // (L, C)
    float *ln2; // (L, C)
    float *wg;  // (L, FF, C)
    float *wu;  // (L, FF, C)
    float *wd;  // (L, C, FF)
    float *lnf; // (C)
    float *lm;  // (V, C), NULL when tied
} model_weights_t;

#define MODEL_NUM_TENSORS 18

/* activations of the last forward, sized for N = B * T positions */
typedef struct {
    float *x; // (L+1, N, C) residual stream entering each layer, then the last
    /* ln1, ln2, h: NULL and y one layer's (y_all false) where only
     * matmuls that take their bf16 copies read them (acts_layout) */
    float *ln1;  // (L, N, C)
    float *r1;   // (L, N) 1/rms
    float *qpre; // (L, N, NH*HD) q_proj output (Qwen3: before q_norm)
    float *kpre; // (L, N, NKV*HD)
    float *rq;   // (L, N, NH) Qwen3 q_norm 1/rms
    float *rk;   // (L, N, NKV)
    float *q;    // (L, N, NH*HD) after norm and RoPE
    float *k;    // (L, N, NKV*HD)
    float *v;    // (L, N, NKV*HD)
    float *att;  // (threads, T, T) softmax probabilities of one head
    float *y;    // (L, N, NH*HD) attention output, or (N, NH*HD)
    bool y_all;  // whether y has every layer's
    float *xm;   // (L, N, C) residual after attention
    float *ln2;  // (L, N, C)
    float *r2;   // (L, N)
    float *g;    // (L, N, FF) gate_proj output
    float *u;    // (L, N, FF) up_proj output
    float *h;    // (N, FF) silu(g) * u of one layer, recomputed in backward
    float *lnf;  // (N, C)
    float *rf;   // (N)
    float *lse;  // (N) logsumexp of logits / temperature
    /* backend cpu-bf16 only (else NULL): the matmuls' inputs rounded to
     * bf16 by their producers, read by the bf16 kernel in the forward pass and
     * for the weight gradients; forward.c pairs each with its fp32 array
     * above as one handle (act_t) */
    uint16_t *ln1h; // (L, N, C)
    uint16_t *yh;   // (L, N, NH*HD)
    uint16_t *ln2h; // (L, N, C)
    uint16_t *hh;   // (L, N, FF) kept: not recomputed in backward
    uint16_t *lnfh; // (N, C)
    uint16_t *qh;   // (L, N, NH*HD) after RoPE
    uint16_t *kh;   // (L, N, NKV*HD)
    uint16_t *vh;   // (L, N, NKV*HD)
    uint16_t *atth; // (threads, T, T)
} model_acts_t;

/* scratch for backward, one layer at a time */
typedef struct {
    float *dx;     // (N, C) gradient of the residual stream
    float *dln;    // (N, C)
    float *dq;     // (N, NH*HD)
    float *dk;     // (N, NKV*HD)
    float *dv;     // (N, NKV*HD)
    float *dy;     // (N, NH*HD)
    float *dk2;    // (N, NKV*HD) Qwen3: dk before k_norm
    float *dg;     // (N, FF), NULL where only matmuls that take dg16 read it
    float *du;     // (N, FF), the same with du16
    float *dh;     // (N, FF)
    float *logits; // (chunk, V)
    float *part;   // (threads, max(C, HD)) per-thread norm weight gradients
    float *dp;     // (threads, T, T) attention backward scratch
    /* backend cpu-bf16 only (else NULL): the gradients that go into
     * matmuls, rounded to bf16 by their producers (paired with their fp32
     * arrays as act_t handles, as the activations are) */
    uint16_t *dx16; // (N, C)
    uint16_t *dq16; // (N, NH*HD) the gradient wq's matmul takes
    uint16_t *dk16; // (N, NKV*HD) the same for wk
    uint16_t *dv16; // (N, NKV*HD)
    uint16_t *dg16; // (N, FF)
    uint16_t *du16; // (N, FF)
    uint16_t *lg16; // (chunk, V)
    uint16_t *dp16; // (threads, T, T)
} model_grad_acts_t;

struct model {
    model_config_t cfg;
    model_weights_t w;
    model_weights_t dw;
    size_t sizes[MODEL_NUM_TENSORS];
    size_t n_params;
    float *params;
    float *grads;
    /* forward state */
    float *acts_mem;
    size_t acts_cap; /* floats in acts_mem */
    model_acts_t a;
    model_grad_acts_t ga;
    int *tokens;     // (N) copies of the last forward's inputs
    int *targets;    // (N)
    int *pos;        // (N) position of each row, for RoPE
    int *start;      // (N) model_forward_packed's start, or NULL (plain causal rows)
    int *prefix;     // (B) the shared prefix of each packed row
    float *rope_cos; // (rope_cap, HD/2)
    float *rope_sin;
    int rope_cap;
    int B, T;
    float temperature;
    int chunk; /* lm_head positions per chunk; 0 = about 4M logits */
    /* backend.c: the CUDA copy that runs forward, backward and generate
     * when model_set_backend chose "cuda:N" (device), else NULL */
    struct cuda_model *cuda;
    int device;
    /* "cpu-bf16": the large matmuls take bf16 products (model_gemm_bf16) */
    bool bf16;
};

/* grows the RoPE tables to cover positions [0, T); 0 or -1 (no memory) */
int model_rope_ensure(model_t *m, int T);

/* below this many elements a loop runs on one thread: on a busy machine
 * waking the team costs more than the work */
#define MODEL_PAR_MIN (1 << 17)

/* thread id's contiguous share [*lo, *hi) of count items among n */
static inline void model_share(int count, int id, int n, int *lo, int *hi)
{
    int per = (count + n - 1) / n;
    *lo = id * per < count ? id * per : count;
    *hi = *lo + per < count ? *lo + per : count;
}

/* shared kernels (forward.c) */
/* bf16: products in bf16 (model_gemm_bf16) where the matmul is large
 * enough (the model's bf16 flag), reading A16 / B16 where not NULL */
void model_gemm(bool bf16, bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc);
void model_matmul(bool bf16, float *out, const float *inp, const float *w, const float *bias, int N, int IN, int OUT);
/* vec.c: loops with e^x, vectorized (see there) */
void model_swiglu_loop(float *h, const float *g, const float *u, size_t n);
void model_swiglu_backward_loop(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n);
/* p (n) = softmax(scale p) in place (scale > 0) */
void model_softmax_row(float *p, int n, float scale);
/* log sum_i e^(scale x_i) */
float model_logsumexp(const float *x, int n, float scale);
/* x_i = -d scale e^(scale x_i - lse): the softmax part of a log-prob's
 * gradient by the logits */
void model_softmax_grad_row(float *x, int n, float scale, float lse, float d);
/* row kernels of the layers (vec.c): 1 / rms(x) of a row; o = w x r;
 * RMSNorm's input gradient of a row into dx (= or += when acc) and its
 * weight's into pw (+=); RoPE over the H heads of a row (dir -1 turns
 * back); dst += src; softmax's backward for a row of probabilities p whose
 * first n are not masked: dr = p (dr - p . dr) scale, zero from n to T */
float model_rms_inv(const float *x, int n, float eps);
void model_scale_mul(float *o, const float *x, const float *w, float r, int n);
void model_rmsnorm_backward_row(float *dx, float *pw, const float *d, const float *x, const float *w, float r, int n,
                                bool acc);
void model_rope_row(float *x, const float *c, const float *s, int H, int HD, float dir);
void model_add_row(float *dst, const float *src, int n);
/* dst (n) += the sums of the columns of src (rows, n; rows ld apart),
 * each summed row by row */
void model_add_cols(float *dst, const float *src, int rows, int n, size_t ld);
void model_softmax_backward_row(float *dr, const float *p, int n, int T, float scale);
/* gemm_few.c: C (M, N) = A B^T + beta C for at most MODEL_FEW_ROWS rows,
 * B read in place; model_gemm sends those calls here. Threads split the
 * columns from MODEL_FEW_PAR_MIN multiply-adds on */
#define MODEL_FEW_ROWS 16
#define MODEL_FEW_PAR_MIN (1 << 20)
void model_gemm_few(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc);
/* gemm_packed.c: weights W (N, K) in Hugging Face's (out, in) layout laid
 * out once for many products C (M, N) = A W^T: panels of MODEL_PANEL
 * columns, each K rows of MODEL_PANEL floats (the last panel padded with
 * zeros) */
#define MODEL_PANEL 32
typedef struct {
    int N, K, np; /* np panels */
    float *w;
} model_packed_t;
/* the bytes model_pack lays W out in */
size_t model_packed_bytes(int N, int K);
/* 0, or -1 out of memory */
int model_pack(model_packed_t *p, const float *W, int N, int K);
void model_packed_free(model_packed_t *p);
/* C (M, N) = A (M, K; rows lda apart) W^T, + C where acc, + bias (N)
 * where not NULL; threads split the panels from MODEL_FEW_PAR_MIN
 * multiply-adds on */
void model_gemm_packed(int M, const float *A, int lda, const model_packed_t *p, const float *bias, bool acc, float *C,
                       int ldc);
/* tests and benches: the kernel for vectors of bits (512, 256 or 128)
 * from now on, where the CPU has it (0: the widest it has). Returns
 * whether it took bits */
bool model_packed_use(int bits);
/* tests: decodes pack weights of at most bytes from now on (0: the
 * default, 256 MiB) */
void model_pack_limit(size_t bytes);
/* backend cpu-bf16: C (M, N) = op(A) op(B) + beta C with bf16 products
 * and fp32 sums by one of two kernels (gemm_bf16.c chooses, once): the
 * AMX tiles (gemm_amx.c) or AVX512-BF16 dot products
 * (gemm_avx512bf16.c), from the same packed operands: the two differ
 * only in the order of their fp32 sums. */
typedef enum { MODEL_BF16_NONE, MODEL_BF16_AMX, MODEL_BF16_AVX512BF16 } model_bf16_kernel_t;
/* the kernel model_gemm_bf16 uses: the one SAPO_BF16_KERNEL names ("amx"
 * or "avx512bf16"; read once) where set, else AMX where the CPU has it,
 * else AVX512-BF16; MODEL_BF16_NONE where there is none, the variable
 * names an unknown kernel or one the CPU lacks, and then *why (where why
 * is not NULL) is one line saying so. model_bf16_use's overrides it */
model_bf16_kernel_t model_bf16_kernel(const char **why);
/* the choice model_bf16_kernel makes for SAPO_BF16_KERNEL = name (NULL:
 * unset), with why (whylen bytes) set where it is MODEL_BF16_NONE */
model_bf16_kernel_t model_bf16_choose(const char *name, char *why, size_t whylen);
/* whether this CPU (and Linux) runs kernel k */
bool model_bf16_has(model_bf16_kernel_t k);
/* tests and benches: kernel k from now on (not while a matmul runs),
 * where model_bf16_has(k); MODEL_BF16_NONE goes back to
 * model_bf16_kernel's own choice. Returns whether it took k */
bool model_bf16_use(model_bf16_kernel_t k);
/* "amx", "avx512bf16" (SAPO_BF16_KERNEL's values), "none" */
const char *model_bf16_kernel_name(model_bf16_kernel_t k);
/* the product by model_bf16_kernel(NULL), which must not be none */
void model_gemm_bf16(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                     const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc);
/* the CPU has the tiles (and the AVX512-BF16 instructions their packing
 * takes) and Linux lets this process use them */
bool model_amx_available(void);
/* the CPU has AVX-512 F, BW, VL and BF16, and the OS saves their state */
bool model_avx512bf16_available(void);
/* below this many multiply-adds a bf16 matmul stays in fp32 sgemm: one
 * thread, 17 to 128 rows, the tiles were 1.36 to 4.9 times as fast as
 * sgemm from 2^20 on, and from 0.5 to 3.8 times at 2^18 (the
 * AVX512-BF16 kernel takes the same bound) */
#define MODEL_BF16_MIN (1 << 20)
/* the kernels: A16 and B16, where not NULL, hold A and B rounded to bf16
 * (as model_bf16_round does) with the same leading dimensions; they are
 * read instead, and the result is the same (A or B may then be NULL).
 * Each needs its model_*_available() */
void model_gemm_amx(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda, const float *B,
                    const uint16_t *B16, int ldb, float beta, float *C, int ldc);
void model_gemm_avx512bf16(bool ta, bool tb, int M, int N, int K, const float *A, const uint16_t *A16, int lda,
                           const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc);
/* dst (n) = src rounded to bf16 as the kernels' packing rounds it (to
 * nearest even; denormals to zero): needs model_avx512bf16_available() */
void model_bf16_round(uint16_t *dst, const float *src, size_t n);
/* p (T) = softmax(scale p) over its first n (0 < n <= T), zeros after,
 * and its bf16 rounding into p16 (needs model_avx512bf16_available()) */
void model_softmax_causal(float *p, uint16_t *p16, int n, int T, float scale);
/* whether a matmul of a bf16 model goes to the bf16 kernel: it needs a
 * few 32 x 32 blocks of C to pay for the packing */
static inline bool model_bf16_takes(bool bf16, int M, int N, int K)
{
    return bf16 && M > MODEL_FEW_ROWS && (double)M * N * K >= MODEL_BF16_MIN;
}
void model_rmsnorm(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
void model_swiglu(float *h, const float *g, const float *u, size_t n);
void model_rope(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD);
/* a model with zeroed parameters, or NULL with err naming where */
model_t *model_new_empty(const model_config_t *cfg, const char *where, char *err, size_t errlen);
size_t model_num_params_of(const model_config_t *cfg);
void model_weights_point(model_weights_t *w, float *base, const size_t *sizes);
void model_sizes(const model_config_t *c, size_t *sizes);
int model_config_check(const model_config_t *c, const char *where, char *err, size_t errlen);
/* a whole file as a NUL-terminated string, or NULL with err set */
char *model_read_text(const char *path, char *err, size_t errlen);
size_t model_logits_chunk(const model_t *m, int N);

#endif
