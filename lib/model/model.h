/* The policy: a Qwen2, Qwen3 or Llama decoder-only transformer on the
 * CPU, as Hugging Face transformers defines it. One fp32 allocation holds every
 * parameter and one more every gradient, so an optimizer runs over flat
 * arrays; checkpoints are Hugging Face folders (config.json plus one or
 * several safetensors files), read and written so transformers opens them.
 *
 * Shapes use B batch, T time, C hidden, V vocabulary, L layers, NH query
 * heads, NKV key/value heads, HD head dim, FF MLP width.
 *
 * Threads: OpenMP (OMP_NUM_THREADS); every matmul is split over the
 * OpenMP threads as one-thread OpenBLAS calls, so creating a model sets
 * OpenBLAS to one thread. On a machine shared with other busy processes
 * run with OMP_WAIT_POLICY=passive: libgomp's default spinning between
 * parallel regions made decoding 10x slower on a loaded 2-core box. One
 * model_t is used by one thread at a time (its workspaces are shared by
 * forward, backward and generate). */
#ifndef SAPO_MODEL_H
#define SAPO_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "sampling/sample.h"
#include "train/adamw.h"

#define MODEL_MAX_EOS 4

/* the three differ in their biases and norms only: Qwen2 has q/k/v
 * biases, Qwen3 q_norm and k_norm (and biases where attention_bias),
 * Llama neither (biases where attention_bias) */
typedef enum { MODEL_QWEN2, MODEL_QWEN3, MODEL_LLAMA } model_type_t;

typedef struct {
    model_type_t type;
    int C;       /* hidden_size */
    int L;       /* num_hidden_layers */
    int NH;      /* num_attention_heads */
    int NKV;     /* num_key_value_heads; NH % NKV == 0 */
    int HD;      /* head_dim (C / NH unless config.json says) */
    int FF;      /* intermediate_size */
    int V;       /* vocab_size */
    int max_pos; /* max_position_embeddings */
    float rope_theta;
    float rms_eps;
    bool tie;      /* tie_word_embeddings: lm_head is embed_tokens */
    bool qkv_bias; /* Qwen2 always; Qwen3 and Llama when attention_bias */
    bool o_bias;   /* Qwen3 and Llama with attention_bias only */
    int bos_id;    /* -1 when the config names none */
    int eos_ids[MODEL_MAX_EOS];
    int n_eos;
} model_config_t;

typedef struct model model_t;

/* The embedded default: a few million parameters over the byte tokenizer
 * (tokenizer_byte_new), small enough to sample and train a round of
 * 8 questions x 8 completions in seconds on 2 cores. */
model_config_t model_config_tiny(void);

/* Qwen2.5-0.5B's shape (24 layers, C 896, 14 heads over 2 KV heads, FF
 * 4,864, vocab 151,936, tied), without weights: what the CUDA backend's
 * memory and speed are stated for (bench_cuda, cuda_train_bytes) */
model_config_t model_config_qwen25_05b(void);

/* Reads a Hugging Face config.json. Returns 0, or -1 with one line in err
 * naming the file and the field. */
int model_config_load(model_config_t *cfg, const char *path, char *err, size_t errlen);

/* Parameters drawn from N(0, 0.02), norms 1, biases 0; NULL with err set
 * when the config is inconsistent. */
model_t *model_new_random(const model_config_t *cfg, uint64_t seed, char *err, size_t errlen);

/* Loads a Hugging Face folder: config.json and model.safetensors, or the
 * shards that model.safetensors.index.json names; F32, BF16 and F16
 * tensors are converted to fp32. NULL with one line in err naming the file
 * and the field or tensor on any problem. */
model_t *model_load(const char *dir, char *err, size_t errlen);

/* Reads the weights of a Hugging Face folder of the same architecture
 * into the model in place, a piece of a file at a time (a reload holds
 * no second copy of the model). 0, or -1 with one line in err, and the
 * weights as they were, for a folder of another architecture or one that
 * fails model_load's checks (a GGUF file is refused: open it instead).
 * The caller brings a device copy up to date (model_sync_device). */
int model_reload(model_t *self, const char *dir, char *err, size_t errlen);

/* Loads a GGUF file (gguf_load.c): architecture llama, qwen2 or qwen3,
 * every tensor dequantized to fp32, Llama's q/k rows put back in Hugging
 * Face's order. NULL with one line in err naming the file and the key or
 * tensor: another architecture, scaled RoPE, a tensor type gguf_dequant
 * does not read, a missing or extra tensor. model_load_gguf_from reads an
 * opened file. */
model_t *model_load_gguf(const char *path, char *err, size_t errlen);
model_t *model_load_gguf_from(const gguf_t *g, char *err, size_t errlen);

/* Writes config.json and model.safetensors (fp32, or bf16 rounded to
 * nearest even) into dir, which must exist. 0, or -1 with err set. */
int model_save(const model_t *self, const char *dir, bool bf16, char *err, size_t errlen);

void model_destroy(model_t **self_p);

const model_config_t *model_config(const model_t *self);
/* the flat parameter and gradient arrays, n_params floats each */
float *model_params(model_t *self);
float *model_grads(model_t *self);
size_t model_num_params(const model_t *self);
/* gradients to zero: the host's, or on a device the device's (the host
 * mirror keeps what model_sync_host last brought) */
void model_zero_grad(model_t *self);

/* Forward pass over B right-padded sequences of length T. tokens (B, T);
 * targets (B, T) holds the token whose log-prob is wanted at each position
 * (usually tokens shifted left) or -1 where none is (padding, prompt).
 * logp (B, T) receives log_softmax(logits / temperature)[target], 0 where
 * the target is -1. logits (B, T, V), raw (not divided by temperature), is
 * written when not NULL; otherwise the lm_head runs in chunks of positions
 * and the whole (B, T, V) never exists. Activations are kept for
 * model_backward. 0, or -1 with a line on stderr for a token out of range
 * or T past max_position_embeddings. */
int model_forward(model_t *self, const int *tokens, const int *targets, int B, int T, float temperature, float *logp,
                  float *logits);

/* model_forward over packed rows: the sequences that share a prompt ride
 * in one row, the shared part once. start (B, T) says, per position,
 * where its own part begins: 0 in the row's shared prefix (and everywhere
 * in a row that holds one sequence), else the row index of its segment's
 * first position. The prefix is the positions before a row's first
 * segment (S of them; S >= 1 in a row with segments). A position t of a
 * segment that starts at a attends to [0, S) and [a, t], at RoPE position
 * S + t - a: what it would see, and where it would sit, were the prefix
 * and its segment one sequence. start NULL is model_forward. T may pass
 * max_position_embeddings where the positions do not. On the CPU only:
 * a model on a device returns -1 with a line on stderr. */
int model_forward_packed(model_t *self, const int *tokens, const int *targets, const int *start, int B, int T,
                         float temperature, float *logp, float *logits);

/* Backward of the last model_forward from dlogp (B, T), the gradient of a
 * loss with respect to each target's log-prob. Gradients accumulate into
 * model_grads, so micro-batches add up until model_zero_grad. */
void model_backward(model_t *self, const float *dlogp);

/* Supervised step: forward and backward of the mean cross-entropy over
 * every position whose target is not -1 (temperature 1). Returns the mean
 * loss, or -1 on an input error. Gradients accumulate as above. */
float model_cross_entropy(model_t *self, const int *tokens, const int *targets, int B, int T);

/* Backend: "cpu" (the default), "cpu-bf16" or "cuda:N", device N of a
 * build made with nvcc. "cpu-bf16" is the CPU code with the large matmuls
 * (over MODEL_BF16_MIN multiply-adds, more than 16 rows) taking bf16
 * products with fp32 sums, by one of two kernels: Intel's AMX tiles where
 * the CPU has them, else AVX512-BF16 dot products (vdpbf16ps: Cooper
 * Lake, Xeons of the 4th generation on, AMD Zen 4 on). The environment
 * variable SAPO_BF16_KERNEL=amx or avx512bf16, for tests and benches,
 * forces one (docs/measurements.md compares them); an unknown value, or
 * a kernel the CPU lacks, is refused as a CPU with neither is. Parameters,
 * gradients and everything else stay fp32; "cpu" is the reference. On a
 * device, model_forward, model_backward,
 * model_cross_entropy, model_zero_grad and model_generate(_batch) run
 * there (bf16 matmuls with fp32 accumulation, fp32 master parameters and
 * gradients); model_params and model_grads are then a host mirror that
 * model_sync_host fills and model_sync_device sends back after the caller
 * changed the parameters (a reload, an optimizer step on the host).
 * Switching back to "cpu" brings the parameters home. 0, or -1 with one
 * line in err: a malformed name, no such device, a build without CUDA,
 * cpu-bf16 without a bf16 kernel. */
int model_set_backend(model_t *self, const char *backend, char *err, size_t errlen);
/* A model that only infers (a generator's, an evaluator's, the learner's
 * reference model): set before model_set_backend. On a GPU it then holds
 * its weights in bf16 (norms and biases in fp32), a KV cache in bf16 and
 * one layer's activations, and no fp32 master weights, gradients, moments
 * or backward workspace (docs/cuda.md); on the CPU nothing changes. Its
 * model_backward and model_optimizer_step refuse with a line. */
void model_set_inference_only(model_t *self);
bool model_inference_only(const model_t *self);
/* On a GPU, the lm_head's log-softmax by its fused kernels (on): the
 * forward pass reads each chunk of logits once, and the backward pass
 * writes the logits' gradient in bf16, straight into the products that
 * follow, instead of in fp32 and then converted. The same log-probs and
 * gradients up to the order of a sum; no effect on the CPU. Off until a
 * GPU has run test_cuda's test_fused_logp (docs/cuda.md). */
void model_set_fused_logp(model_t *self, bool on);
/* On a GPU, the layers' RMSNorms and SwiGLU write the bf16 input of the
 * products that read them (on), instead of fp32 that each product then
 * converts (ln1 three times, ln2 twice, forward and backward). The same
 * values, so the same log-probs and gradients; no effect on the CPU. Off
 * until a GPU has run test_cuda's test_direct_bf16 (docs/cuda.md). */
void model_set_direct_bf16(model_t *self, bool on);
/* On a GPU, a training or reference forward pass's attention products
 * read q, k and v and write y and the query gradient where the layers
 * keep them (on), through cuBLAS's pointer arrays, instead of copying
 * every head out to a (B, NH, T, HD) layout and back; the key/value heads
 * are read once per group rather than copied per query head. Batches
 * whose rows or heads would leave a matrix off a 16-byte boundary (head
 * size not a multiple of 8, T not a multiple of 4) run as before. The
 * same products up to the order of their sums; no effect on the CPU. Off
 * until a GPU has run test_cuda's test_direct_heads (docs/cuda.md). */
void model_set_direct_heads(model_t *self, bool on);
/* On a GPU, a generation's decode steps replayed from a CUDA graph (on):
 * the second step in a row with as many live completions captures the
 * step's launches, and the steps after it with that count replay them in
 * one launch instead of some 24 a layer. The same kernels on the same
 * inputs, so the same tokens and log-probs; no effect on the CPU. Off
 * until a GPU has run test_cuda's test_decode_graphs (docs/cuda.md). */
void model_set_decode_graphs(model_t *self, bool on);
/* On a GPU, a decode step's attention by key/value head (on): one block
 * serves the query heads that share a key/value head and reads its cached
 * keys and values once, instead of once per query head (7 times for the
 * Qwen2.5-0.5B). The same attention up to the order of its sums; no
 * effect on the CPU. Off until a GPU has run test_cuda's
 * test_grouped_decode (docs/cuda.md). */
void model_set_grouped_decode(model_t *self, bool on);
/* On a GPU, the optimizer step in one pass over the parameters (on):
 * AdamW reads each gradient times the clipping coefficient and writes the
 * bf16 copy the products read, where by default the gradients are first
 * scaled in place and the copy converted afterwards, two passes more. The
 * same parameters, moments and bf16 copy, bit for bit; the gradients stay
 * as the backward pass left them (unscaled). No effect on the CPU. Off
 * until a GPU has run test_cuda's test_fused_adamw (docs/cuda.md). */
void model_set_fused_adamw(model_t *self, bool on);
/* Positions whose logits the lm_head computes at once when model_forward
 * is given no logits (0, the default: about 64M logits, 441 positions of
 * a Qwen's vocabulary, 1,365 of SmolLM2's). Larger chunks make fewer and
 * larger products and add rows x vocabulary floats (and as many bf16 on
 * a GPU) to the workspace; set it before the first forward pass. */
void model_set_logits_chunk(model_t *self, int rows);
/* Activations that do not grow with depth (on): a forward pass keeps
 * each layer's input (the residual stream) and one layer's other
 * activations, and the backward pass runs each layer's forward again
 * from its input before that layer's backward, as llm.c and PyTorch's
 * activation checkpointing do. The same gradients bit for bit, for
 * about one forward pass more of time; on the CPU paths and on a GPU.
 * Takes effect at the next forward pass. Off by default. */
void model_set_recompute(model_t *self, bool on);
bool model_recompute(const model_t *self);
/* The bytes of host memory a forward and backward pass of B x T takes
 * beside the parameters and gradients, on the model's backend with its
 * recompute setting: activations, backward scratch, the lm_head's chunk
 * of logits, tokens and RoPE tables (0 on a GPU, whose workspaces are
 * the device's). What a memory budget (lib/node/budget.h) weighs. */
size_t model_batch_bytes(model_t *self, int B, int T);
/* The bytes of host memory a CPU generation of Q prompts of at most maxP
 * tokens, L completions of at most max_new each, takes beside the
 * weights: its workspace and KV cache, uniforms, sampling scratch, RoPE
 * tables, and where packed the weights' packed copy (which the cpu
 * backend decodes by, up to model_pack_limit). model_pack_limit(1)
 * turns the copy off: what a memory budget (lib/node/budget.h) does where
 * a generator's share has no room for it. */
size_t model_generate_bytes(const model_t *self, int Q, int L, int maxP, int max_new, bool packed);
/* Decodes on the CPU pack weights of at most bytes from now on, in this
 * process (0: the default, 1 GiB; 1: never) */
void model_pack_limit(size_t bytes);
/* the bytes the model's device copy holds now (*held) and held at most
 * (*peak): its own allocations, not the CUDA context's; 0 on the CPU */
void model_device_memory(const model_t *self, size_t *held, size_t *peak);
/* the CUDA device the model runs on, -1 on the CPU */
int model_device(const model_t *self);
/* device parameters and gradients into model_params / model_grads, and
 * model_params to the device; 0 (nothing to do on the CPU) or -1 after a
 * line on stderr */
int model_sync_host(model_t *self);
int model_sync_device(model_t *self);

/* One optimizer step where the model runs: the gradients clipped to a
 * global norm of max_norm (<= 0: measured only, as grad_clip_norm), then
 * AdamW with opt's state; *norm gets the norm before clipping. On the CPU
 * that is grad_clip_norm and adamw_step. On a device both run there, on
 * moments copied from opt at its first step there; opt's step count
 * follows every step, its moments are brought up to date by
 * model_sync_host (so sync before adamw_save). 0, or -1 after a line on
 * stderr when the device fails. */
int model_optimizer_step(model_t *self, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm);

/* Generation. The stop callback runs after each new token of sequence
 * seq with its tokens so far; returning true ends that sequence. */
typedef bool (*model_stop_fn)(void *ctx, int seq, const int *tokens, int n);

typedef struct {
    int max_new;            /* max new tokens per completion */
    sample_params_t sample; /* temperature 0 = greedy */
    uint64_t seed;          /* request seed: u[l * max_new + t] from rng_new(seed) */
    model_stop_fn stop;     /* NULL = stop on EOS only */
    void *stop_ctx;
} model_gen_params_t;

/* Samples L completions of one prompt (P tokens): the prompt is prefilled
 * once and its key/value cache shared, then the L sequences decode as one
 * batch. tokens (L, max_new) and logp (L, max_new) receive each
 * completion's tokens and their log-probs (sample_token's), lengths (L)
 * the count; a completion ends after an EOS token (kept), when stop says
 * so, or at max_new. 0, or -1 with a line on stderr on an input error. */
int model_generate(model_t *self, const int *prompt, int P, int L, const model_gen_params_t *gp, int *tokens,
                   float *logp, int *lengths);

/* The same for Q prompts in one decode batch of Q * L sequences (what a
 * round of several questions wants: small matmuls waste the CPU).
 * prompts[q] has prompt_lens[q] tokens and draws its uniforms from
 * rng_new(seeds[q]) as above (gp->seed is not used). Completion l of
 * prompt q is row q * L + l of tokens, logp (Q * L, max_new) and lengths,
 * and the seq the stop callback sees. Results equal Q model_generate
 * calls with those seeds, up to float rounding. */
int model_generate_batch(model_t *self, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q,
                         int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths);

#endif
