/* The CUDA backend of model_t, behind model.h: model_set_backend(m, "cuda:N")
 * gives the model a cuda_model_t, and from then on model_forward,
 * model_backward, model_zero_grad and model_generate(_batch) run on device
 * N. The device holds fp32 master parameters, their bf16 copy (what every
 * matmul reads, cuBLAS with fp32 accumulation), fp32 gradients and, once an
 * optimizer step runs there, fp32 AdamW moments. The host arrays of model_t
 * (model_params, model_grads) are a mirror: cuda_model_download fills them,
 * cuda_model_upload sends host edits back. Compiled only when nvcc is
 * present (SAPO_HAVE_CUDA). */
#ifndef SAPO_CUDA_MODEL_H
#define SAPO_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "train/adamw.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_model cuda_model_t;

/* 0 when device N can be used, else -1 with the CUDA error in err */
int cuda_device_check(int device, char *err, size_t errlen);

/* the device's name (as nvidia-smi shows it) into name; 0 or -1 */
int cuda_device_name(int device, char *name, size_t len);

/* the device-to-device copy rate of device N, bytes read and written a
 * second (a copy of `bytes` counts twice), over 5 copies timed
 * together after one untimed; 0 or -1 with err */
int cuda_copy_rate(int device, size_t bytes, double *rate, char *err, size_t errlen);

/* the uniforms [0, n) of seed's stream drawn by cuRAND on device N (a
 * Philox4_32_10 device generator): rng_uniform's numbers, on the GPU */
int cuda_uniform(int device, uint64_t seed, float *out, size_t n, char *err, size_t errlen);

/* sample_token on the GPU for n rows of logits (n, V), row i drawing
 * with u[i]: tok and lp (n) receive the tokens and their log-probs */
int cuda_sample(int device, const float *logits, int n, int V, const sample_params_t *sp, const float *u, int *tok,
                float *lp, char *err, size_t errlen);

/* one decode attention on device N, as a generation's step runs it over
 * one layer: R rows, row r's query heads q (R, NH, HD) against cache slot
 * r, k and v (R, maxT, NKV * HD), at positions [0, pos[r]]; y (R, NH, HD).
 * By query head (attention_cached_kernel) or, where grouped, by key/value
 * head (model_set_grouped_decode); the cache in fp32, or bf16 where
 * bf16_cache (an inference-only model's). 0 or -1 with err */
int cuda_decode_attention(int device, bool grouped, bool bf16_cache, int R, int maxT, int NH, int NKV, int HD,
                          const float *q, const float *k, const float *v, const int *pos, float *y, char *err,
                          size_t errlen);

/* copies m's parameters to device N; NULL with one line in err */
cuda_model_t *cuda_model_new(model_t *m, int device, char *err, size_t errlen);
void cuda_model_destroy(cuda_model_t **self_p);

/* host parameters to the device (fp32 master and bf16 copy); 0 or -1 */
int cuda_model_upload(cuda_model_t *self);
/* device parameters and gradients into the host arrays, and the moments
 * into the optimizer whose moments the device holds (if any); 0 or -1 */
int cuda_model_download(cuda_model_t *self);
void cuda_model_zero_grad(cuda_model_t *self);

int cuda_model_forward(cuda_model_t *self, const int *tokens, const int *targets, int B, int T, float temperature,
                       float *logp, float *logits);
void cuda_model_backward(cuda_model_t *self, const float *dlogp);

int cuda_model_generate_batch(cuda_model_t *self, const int *const *prompts, const int *prompt_lens,
                              const uint64_t *seeds, int Q, int L, const model_gen_params_t *gp, int *tokens,
                              float *logp, int *lengths);

/* model_optimizer_step on the device: global-norm clip and one AdamW step
 * (adamw_step's formulas and no-decay ranges) on device moments. The
 * device holds them on opt's behalf (adamw_hold): copied up from opt when
 * it does not hold them yet, handed back by cuda_model_download, when opt
 * asks (adamw_save, a host adamw_step, another holder) and when the model
 * is destroyed; dropped, never written, once opt is destroyed. opt's step
 * count follows. The bf16 copy is refreshed. 0 or -1 */
int cuda_model_step(cuda_model_t *self, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm);

/* device bytes this model allocated and holds now, and the most it held
 * at once (its own: not the CUDA context, cuBLAS's workspace or other
 * processes) */
size_t cuda_model_memory(const cuda_model_t *self);
size_t cuda_model_memory_peak(const cuda_model_t *self);

/* decode steps this model captured into a CUDA graph, and steps it
 * replayed from one, since it was made (model_set_decode_graphs) */
void cuda_model_decode_graphs(const cuda_model_t *self, size_t *captures, size_t *replays);

/* attention forward passes (each layer's, and backward's again) that read
 * and wrote their heads in place since the model was made
 * (model_set_direct_heads; a batch off 16 bytes runs as before) */
size_t cuda_model_direct_heads(const cuda_model_t *self);

/* the arithmetic of what a model holds (cuda_train_bytes and the rest) is
 * in layout.h, which every build has */

#ifdef __cplusplus
}
#endif

#endif
