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

/* the slot of tensor t, in model_weights_t's order (wte = 0 ... lm = 17) */
float **model_weights_slot(model_weights_t *w, int t);
/* whether tensor t is a matrix that matmuls read (the embedding, a
 * projection, the lm_head), not a norm's weight or a bias */
bool model_tensor_is_matrix(int t);

/* activations of the last forward, sized for N = B * T positions */
typedef struct {
    float *x; // (L+1, N, C) residual stream entering each layer, then the last
    /* ln1, ln2: every layer's where ln_all, else one layer's (CUDA's:
     * computed again in backward); NULL where only matmuls that take
     * their bf16 copies read them (forward_bf16.c), and so is h; y one
     * layer's where y_all is false */
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
    bool ln_all; // whether ln1 and ln2 have every layer's
    bool y_all;  // whether y has every layer's
    /* every array but x holds one layer's (model_set_recompute): the
     * backward pass runs each layer's forward again from its input x */
    bool one_layer;
    float *xm;  // (L, N, C) residual after attention
    float *ln2; // (L, N, C)
    float *r2;  // (L, N)
    float *g;   // (L, N, FF) gate_proj output
    float *u;   // (L, N, FF) up_proj output
    float *h;   // (N, FF) silu(g) * u of one layer, recomputed in backward
    float *lnf; // (N, C)
    float *rf;  // (N)
    float *lse; // (N) logsumexp of logits / temperature
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
    float *dg;     // (N, FF), NULL where only matmuls that take its bf16 copy read it
    float *du;     // (N, FF), the same
    float *dh;     // (N, FF)
    float *logits; // (chunk, V)
    float *part;   // (threads, max(C, HD)) per-thread norm weight gradients
    float *dp;     // (threads, T, T) attention backward scratch
} model_grad_acts_t;

/* What runs a model: one table per backend (backend.c: cpu, cpu-bf16,
 * cuda), chosen by model_set_backend. forward, backward and generate
 * are model.h's after their inputs were checked (backend.c). */
typedef struct {
    int (*forward)(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T, float temperature,
                   float *logp, float *logits);
    void (*backward)(model_t *m, const float *dlogp);
    int (*generate)(model_t *m, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q, int L,
                    const model_gen_params_t *gp, int *tokens, float *logp, int *lengths);
    /* model.h's gradient clearing, optimizer step and syncs where they
     * leave the host (NULL: the host arrays are the model's own) */
    void (*zero_grad)(model_t *m);
    int (*step)(model_t *m, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm);
    int (*sync_host)(model_t *m);
    int (*sync_device)(model_t *m);
    /* frees what the backend keeps of m beside the host arrays (NULL:
     * nothing), and does nothing where it keeps none: called when m
     * leaves the backend (model_set_backend) and by model_destroy,
     * through m->backend, so that model.c needs no table */
    void (*release)(model_t *m);
    /* the CPU workspaces of a batch (model_batch_bytes), NULL where the
     * backend keeps them elsewhere (a device) */
    size_t (*layout)(model_t *m, float *base, int B, int T);
} model_backend_t;

/* m's table (backend.c) */
const model_backend_t *model_backend(const model_t *m);

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
    /* backend cpu-bf16's bf16 copies of activations and gradients
     * (forward_bf16.c's, freed by its model_bf16_release), or NULL */
    struct model_bf16 *bf16;
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
    int chunk; /* lm_head positions per chunk; 0 = about 64M logits */
    /* the forward pass's last chunk of logits, still in ga.logits for the
     * backward pass (which starts from it), from position logits_r0 */
    bool logits_kept;
    int logits_r0;
    /* backend.c: what runs the model (NULL: cpu), and the CUDA copy
     * when model_set_backend chose "cuda:N" (device), else NULL */
    const model_backend_t *backend;
    struct cuda_model *cuda;
    int device;
    bool inference_only; /* model_set_inference_only */
    bool fused_logp;     /* model_set_fused_logp */
    bool direct_bf16;    /* model_set_direct_bf16 */
    bool direct_heads;   /* model_set_direct_heads */
    bool decode_graphs;  /* model_set_decode_graphs */
    bool grouped_decode; /* model_set_grouped_decode */
    bool fused_adamw;    /* model_set_fused_adamw */
    bool recompute;      /* model_set_recompute */
};

/* model.c: the RoPE tables, the batch and its workspaces */
/* grows the RoPE tables to cover positions [0, T); 0 or -1 (no memory) */
int model_rope_ensure(model_t *m, int T);

/* an fp32 array of the CPU workspaces and the floats it takes (0: none,
 * and the pointer NULL) */
typedef struct {
    float **p;
    size_t n;
} model_array_t;

/* the fp32 activations and backward scratch of a batch of B x T, every
 * one (the reference keeps them all; forward_bf16.c leaves some out):
 * MODEL_ACTS_ARRAYS entries into t, every layer's or (m->recompute) one
 * layer's of all but x. Sets ln_all, y_all and one_layer */
#define MODEL_ACTS_ARRAYS 34
void model_acts_arrays(model_t *m, int B, int T, model_array_t *t);
/* points the n arrays of t into base (when not NULL), each from a
 * 64-byte boundary, from float `at` on; the float after the last */
size_t model_arrays_place(const model_array_t *t, int n, float *base, size_t at);

/* lays out a CPU path's workspaces from base (when not NULL); the
 * floats they take */
typedef size_t model_layout_fn(model_t *m, float *base, int B, int T);
/* the reference's layout: every array of model_acts_arrays */
size_t model_acts_layout(model_t *m, float *base, int B, int T);

/* the batch the forward pass runs and the backward pass reads: room for
 * the workspaces (laid out by layout), the tokens, targets, RoPE
 * positions and (packed) segment starts of B x T. 0, or -1 after a line
 * on stderr (out of memory, start not a packed layout) */
int model_set_batch(model_t *m, model_layout_fn *layout, const int *tokens, const int *targets, const int *start, int B,
                    int T, float temperature);

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

/* elementwise loops go in blocks of MODEL_BLOCK elements, one
 * vectorized call each */
#define MODEL_BLOCK 4096

/* gemm.c, the fp32 matmuls of every CPU path: C (M, N) = op(A) op(B) +
 * beta C over the OpenMP threads */
/* blocks a large product is cut into, whatever the threads (gemm.c) */
#define MODEL_GEMM_BLOCKS 8
void model_gemm(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc);
/* the same on the calling thread alone: model_gemm_f32 where
 * model_f32_own() and the product is large, else one OpenBLAS call */
void model_gemm1(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc);
/* gemm_f32.c: model_gemm1's product by AVX-512 fused multiply-adds, on
 * the calling thread; every element of C sums its products in an order
 * that depends on K alone. Needs model_avx512_available() */
void model_gemm_f32(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc);
/* the calling thread's buffer for a gemm's packed operands, at least
 * bytes, 64-byte aligned, kept for its next call and freed when the
 * thread exits (gemm_f32.c and gemm_bf16.c share it: neither calls the
 * other) */
void *model_gemm_ws(size_t bytes);
/* the CPU has AVX-512 F and the OS saves its registers */
bool model_avx512_available(void);
/* whether model_gemm1 takes model_gemm_f32 for its large products:
 * model_f32_choose(model_avx512_available(), openblas_get_corename()),
 * once (gemm.c) */
bool model_f32_own(void);
/* the CPU has AVX-512 (avx512) and OpenBLAS's kernels (its core name)
 * are not among its AVX-512 ones */
bool model_f32_choose(bool avx512, const char *openblas_core);
/* from this many multiply-adds and rows on, model_gemm1 takes
 * model_gemm_f32: it packs all of op(B) each call, which a few rows (a
 * decode step's) do not repay */
#define MODEL_F32_MIN (1 << 15)
#define MODEL_F32_MIN_ROWS 64

/* forward.c, the fp32 reference, and what the other CPU path
 * (forward_bf16.c), generate.c and cuda/ take from it */
/* out (N, OUT) = inp (N, IN) w^T (+ bias), or += where acc */
void model_linear(float *out, const float *inp, const float *w, const float *bias, int N, int IN, int OUT, bool acc);
/* out (N, OUT) += bias (OUT) on every row */
void model_add_bias(float *out, const float *bias, int N, int OUT);
/* dbias (OUT) += the column sums of dout (N, OUT) */
void model_bias_backward(float *dbias, const float *dout, int N, int OUT);
/* dst (n) = src, by the threads */
void model_copy(float *dst, const float *src, size_t n);
/* out (N, C) = RMSNorm(inp) w, rstd (N) its 1/rms */
void model_rmsnorm(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps);
/* dinp (N, C) += (or = where !acc) RMSNorm's input gradient, dw (C) +=
 * its weight's; part (C) is scratch */
void model_rmsnorm_backward(float *dinp, float *dw, float *part, const float *dout, const float *inp, const float *w,
                            const float *rstd, int N, int C, bool acc);
/* h (n) = silu(g) * u */
void model_swiglu(float *h, const float *g, const float *u, size_t n);
/* rotate_half RoPE in place on x (N, H, HD) at positions pos (N), and
 * its backward (the turn undone) */
void model_rope(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD);
void model_rope_backward(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD);

/* a.x's first layer: the batch's embedding rows; and the backward of
 * that, ga.dx into dw.wte */
void model_embed(model_t *m);
void model_embed_backward(model_t *m);
/* the lm_head's loss side over rows [r0, r0 + n) of the batch, whose
 * logits lg (n, V) hold: their log-probs into logp (and a.lse, for
 * backward); then, in backward, the log-probs' gradient dlogp by the
 * logits into lg */
void model_logp_rows(model_t *m, const float *lg, int r0, int n, float *logp);
void model_logp_rows_backward(model_t *m, float *lg, int r0, int n, const float *dlogp);
/* whether the backward pass must compute the logits of the chunk from
 * position r0 again (not the forward pass's last, still held); after it,
 * no chunk is held */
bool model_logits_recompute(model_t *m, int r0);

/* layer l's slices of the weights (or of their gradients); NULL for a
 * tensor the config lacks */
typedef struct {
    float *ln1, *wq, *bq, *wk, *bk, *wv, *bv, *qn, *kn, *wo, *bo, *ln2, *wg, *wu, *wd;
} model_layer_weights_t;
model_layer_weights_t model_layer_weights(const model_weights_t *w, const model_config_t *c, int l);

/* layer l's slices of the activations (model_acts_t) of N positions: of
 * an array that holds one layer's (ln_all, y_all; h), the whole */
typedef struct {
    float *x;       // (N, C) residual stream entering the layer
    float *ln1;     // (N, C)
    float *r1;      // (N)
    float *qp, *kp; // (N, NH*HD), (N, NKV*HD) q_proj's, k_proj's outputs (Qwen3: before the norms, else q, k)
    float *rq, *rk; // (N, NH), (N, NKV) Qwen3's q_norm, k_norm 1/rms
    float *q, *k;   // (N, NH*HD), (N, NKV*HD) after norm and RoPE
    float *v;       // (N, NKV*HD)
    float *y;       // (N, NH*HD) attention output
    float *xm;      // (N, C) residual after attention
    float *ln2;     // (N, C)
    float *r2;      // (N)
    float *g, *u;   // (N, FF) gate_proj, up_proj outputs
    float *h;       // (N, FF) silu(g) * u
    float *xn;      // (N, C) residual stream leaving the layer
} model_layer_acts_t;
model_layer_acts_t model_layer_acts(const model_acts_t *a, const model_config_t *c, size_t N, int l);
/* whether the backward pass runs layer l's forward again before its
 * backward (model_set_recompute): every layer but the last, whose
 * activations the forward pass left in the one slot */
bool model_layer_again(const model_t *m, int l);

/* the CPU paths behind the backend table: forward.c's fp32 reference
 * and forward_bf16.c's cpu-bf16 (model.h's model_forward_packed and
 * model_backward; release is the table's), generate.c's generation for
 * both */
int model_cpu_forward(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                      float temperature, float *logp, float *logits);
void model_cpu_backward(model_t *m, const float *dlogp);
int model_bf16_forward(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                       float temperature, float *logp, float *logits);
void model_bf16_backward(model_t *m, const float *dlogp);
void model_bf16_linear(float *out, const float *in, const float *w, const float *bias, int N, int IN, int OUT,
                       bool acc);
void model_bf16_release(model_t *m);
/* cpu-bf16's workspaces: model_acts_arrays' less the fp32 arrays only
 * its bf16 products read, then the bf16 copies (model_layout_fn) */
size_t model_bf16_layout(model_t *m, float *base, int B, int T);
/* the CPU's generation with linear as its linear layers (out (N, OUT) =
 * in (N, IN) w^T (+ bias), + out where acc), decoding by fp32 weights
 * laid out once (model_gemm_packed) instead where packs: the cpu
 * backend's, with model_linear; cpu-bf16's, whose products stay bf16 */
typedef void (*model_linear_fn)(float *out, const float *in, const float *w, const float *bias, int N, int IN, int OUT,
                                bool acc);
int model_cpu_generate(model_t *m, model_linear_fn linear, bool packs, const int *const *prompts,
                       const int *prompt_lens, const uint64_t *seeds, int Q, int L, const model_gen_params_t *gp,
                       int *tokens, float *logp, int *lengths);
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
 * RMSNorm's input gradient of a row into dx (= or += when acc); its
 * weight's gradient over n columns of rows rows (ld apart) into pw (+=),
 * row by row in order (r: each row's 1/rms); RoPE over the H heads of a
 * row (dir -1 turns back); dst += src; softmax's backward for a row of
 * probabilities p whose first n are not masked: dr = p (dr - p . dr)
 * scale, zero from n to T */
float model_rms_inv(const float *x, int n, float eps);
void model_scale_mul(float *o, const float *x, const float *w, float r, int n);
void model_rmsnorm_backward_row(float *dx, const float *d, const float *x, const float *w, float r, int n, bool acc);
/* columns a thread takes at a time in model_rmsnorm_backward */
#define MODEL_COLUMNS 64
void model_rmsnorm_weight_cols(float *pw, const float *d, const float *x, const float *r, int rows, int n, size_t ld);
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
/* the product by one kernel (gemm_bf16.c, by the kernel's table): A16
 * and B16, where not NULL, hold A and B rounded to bf16 (as
 * model_bf16_round does) with the same leading dimensions; they are read
 * instead, and the result is the same (A or B may then be NULL). Each
 * needs its model_*_available() */
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
