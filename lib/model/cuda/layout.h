/* What the CUDA backend allocates, laid out and counted in plain C, so
 * that every build (one without nvcc too) can compute a model's device
 * bytes and test the arithmetic: the workspaces of a forward (and
 * backward) pass, those of a generation, and the totals for a model that
 * trains, a reference model that only runs forward, and a generator.
 * cuda_model.cu allocates exactly these; test_cuda checks on a GPU that
 * cuda_model_memory(_peak) equals them. docs/cuda.md has the figures. */
#ifndef SAPO_CUDA_LAYOUT_H
#define SAPO_CUDA_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bytes of a bf16 element */
#define CUDA_BF16_BYTES 2

/* lm_head rows per chunk: about 64M logits unless the model sets its own
 * chunk (the CPU's 4M would cut a 150k vocabulary into matmuls of 27 rows) */
size_t cuda_chunk_rows(int chunk, int V, int N);

/* model_set_direct_heads: the arrays of B NH pointers a forward pass
 * fills (q, k, v, scores, probabilities, y) and a backward pass (dy, the
 * per-head dv and dk, the probabilities' gradient, dq); and the bf16
 * elements hb holds beyond its heads, so that each of its four arrays can
 * start on 16 bytes */
#define CUDA_HEADS_FORWARD 6
#define CUDA_HEADS_BACKWARD 5
#define CUDA_HEADS_PAD 32

/* element counts of a forward (and backward) pass's workspaces */
typedef struct {
    size_t acts;   /* floats: activations and gradient scratch */
    size_t dsc;    /* floats: (B, NH, T, T) attention backward scratch; 0 for inference */
    size_t pb;     /* bf16: (B, NH, T, T) one layer's probabilities (then their gradient) */
    size_t hb;     /* bf16: heads by (B, NH, T, HD): q, k, v (and dy in training), and
                      CUDA_HEADS_PAD more to put direct heads' arrays on 16 bytes */
    size_t hf;     /* floats: heads: y (or dq, dk, dv in training) */
    size_t xb, yb; /* bf16: copies of a matmul's two inputs (yb: backward only) */
    size_t ptrs;   /* device pointers: the direct heads' arrays, CUDA_HEADS_FORWARD (and
                      CUDA_HEADS_BACKWARD in training) of B NH each */
    size_t ints;   /* tokens, targets, pos */
    size_t floats; /* logp (and dlogp in training) */
    size_t N;      /* positions */
} cuda_ws_t;

/* The workspaces of B x T, the activations pointed into base when given.
 * Training keeps per layer what backward cannot cheaply get again (the
 * residual stream, q, k and v after RoPE, the gate and up projections,
 * the norms' 1/rms); ln1, ln2, y and the attention's probabilities are one
 * layer's, computed again in backward. Training with recompute
 * (model_set_recompute) keeps every layer's residual stream and one
 * layer's of the rest, and backward runs each layer's forward again.
 * Inference (infer) keeps one layer's of everything, the residual stream
 * in two slots (in, out), and no gradient scratch but the lm_head's chunk
 * of logits. */
void cuda_ws_layout(const model_config_t *cf, int chunk, int B, int T, bool infer, bool recompute, model_acts_t *a,
                    model_grad_acts_t *g, float *base, cuda_ws_t *z);

/* device bytes of z's buffers */
size_t cuda_ws_bytes(const cuda_ws_t *z);

/* device bytes of the RoPE tables for T positions */
size_t cuda_rope_bytes(const model_config_t *cf, int T);

/* An inference-only model's weights: bf16 copies of its matrices and
 * everything else (norms, biases) in fp32 at small_off (floats into the
 * fp32 array, in model_weights_t's order), and the staging area that
 * fp32 weights cross on their way up to bf16. counts: the fp32 floats */
size_t cuda_infer_small_floats(const size_t *sizes, size_t *small_off);
size_t cuda_infer_stage_floats(size_t n_params);
size_t cuda_infer_weight_bytes(const model_config_t *cf);

/* the workspace of one generation: Q prompts of at most maxP tokens, L
 * completions each of at most max_new; its rows R = max(maxP, Q L) */
typedef struct {
    int S, maxT, R;
    size_t floats;     /* x, ln, q, y, k, v, g, u, logits, uniforms, log-probs */
    size_t cache;      /* elements of each of the K and V caches, (L, S, maxT, KD) */
    size_t cache_elem; /* bytes of a cache element: 4, or bf16's 2 for an inference-only model */
    size_t ints;       /* tok, slot, pos, uniform index, out: R each */
    size_t xb;         /* bf16: a matmul input's copy */
} cuda_gen_ws_t;
void cuda_gen_ws_size(const model_config_t *cf, int Q, int L, int maxP, int max_new, bool infer, cuda_gen_ws_t *z);
size_t cuda_gen_ws_bytes(const cuda_gen_ws_t *z);

/* The device bytes a model of cfg holds to train on B x T (the default
 * lm_head chunk), its activations recomputed in backward or not: fp32
 * parameters, gradients and AdamW moments, the bf16 copy, activations and
 * scratch, RoPE tables for T positions; what cuda_model_memory reports
 * after a forward, backward and optimizer step of a fresh model */
size_t cuda_train_bytes(const model_config_t *cfg, int B, int T, bool recompute);

/* An inference-only model's bytes after a forward pass of B x T (the
 * learner's reference model): its weights, RoPE tables for T positions
 * and the forward workspace, which stays */
size_t cuda_forward_bytes(const model_config_t *cfg, int B, int T);

/* An inference-only model's most bytes while it generates Q x L
 * completions of at most maxP + max_new positions (a generator): its
 * weights, RoPE tables for maxP + max_new positions and the generation's
 * workspace with its bf16 KV cache, freed after each generation */
size_t cuda_generate_bytes(const model_config_t *cfg, int Q, int L, int maxP, int max_new);

/* The cuBLAS workspace a generation holds while it replays decode steps
 * from CUDA graphs (model_set_decode_graphs), beside its other workspace:
 * the size cuBLAS's documentation (cublasSetWorkspace) recommends for
 * Hopper, whose products then have the room they have without graphs */
#define CUDA_DECODE_GRAPH_WORKSPACE ((size_t)32 << 20)

/* The bytes one decode step of S sequences must read at the least, each
 * sequence with `past` positions cached (a mean over the step's of a
 * generation): every weight once in bf16 (the embedding's S rows, unless
 * it is also the lm_head) and the bf16 K and V caches of those positions.
 * Over a device's copy rate (the bytes a copy reads and writes a second)
 * it is the floor of a decode step's time, which no generation beats */
double cuda_decode_step_bytes(const model_config_t *cfg, int S, double past);

#ifdef __cplusplus
}
#endif

#endif
