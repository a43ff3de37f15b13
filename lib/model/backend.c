/* Where a model runs, decided here alone: one table per backend says what
 * runs a model's forward and backward passes, its generation, its
 * optimizer step and its syncs, and what frees the state the backend
 * keeps of a model (model_destroy reaches it only through here). "cpu"
 * is the fp32 reference (forward.c, generate.c); "cpu-bf16" the same
 * layers with their large matmuls in bf16 on the AMX tiles or by
 * AVX512-BF16 dot products (forward_bf16.c, gemm_bf16.c); "cuda:N" the
 * CUDA copy (cuda/, built when nvcc is present). The CPU arrays stay
 * the model's identity (checkpoints read and write them); a device holds
 * its own copy, synced both ways on request. model.h's entry points
 * check their inputs here, once for every backend, and go to the model's
 * table. */
#include "model/model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#endif

// ----------------------------------------------------------------------------
// the tables

static int cpu_generate(model_t *m, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q,
                        int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths)
{
    return model_cpu_generate(m, model_linear, true, prompts, prompt_lens, seeds, Q, L, gp, tokens, logp, lengths);
}

/* its decode keeps the bf16 products: no fp32 packed weights */
static int bf16_generate(model_t *m, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q,
                         int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths)
{
    return model_cpu_generate(m, model_bf16_linear, false, prompts, prompt_lens, seeds, Q, L, gp, tokens, logp,
                              lengths);
}

static const model_backend_t cpu = {
    .forward = model_cpu_forward,
    .backward = model_cpu_backward,
    .generate = cpu_generate,
    .layout = model_acts_layout,
};

static const model_backend_t cpu_bf16 = {
    .forward = model_bf16_forward,
    .backward = model_bf16_backward,
    .generate = bf16_generate,
    .release = model_bf16_release,
    .layout = model_bf16_layout,
};

#ifdef SAPO_HAVE_CUDA
static int cuda_forward(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                        float temperature, float *logp, float *logits)
{
    if (start) {
        fprintf(stderr, "model_forward_packed: packed rows run on the CPU only (the model is on cuda:%d)\n", m->device);
        return -1;
    }
    return cuda_model_forward(m->cuda, tokens, targets, B, T, temperature, logp, logits);
}

static void cuda_backward(model_t *m, const float *dlogp) { cuda_model_backward(m->cuda, dlogp); }

/* the device's gradients alone: the host's are a mirror that
 * model_sync_host fills, and clearing them too (2 GB at the Qwen 0.5B)
 * took two thirds of a training step on an H200 */
static void cuda_zero_grad(model_t *m) { cuda_model_zero_grad(m->cuda); }

static int cuda_generate(model_t *m, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q,
                         int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths)
{
    return cuda_model_generate_batch(m->cuda, prompts, prompt_lens, seeds, Q, L, gp, tokens, logp, lengths);
}

static int cuda_step(model_t *m, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm)
{
    return cuda_model_step(m->cuda, opt, p, max_norm, norm);
}

static int cuda_sync_host(model_t *m) { return cuda_model_download(m->cuda); }
static int cuda_sync_device(model_t *m) { return cuda_model_upload(m->cuda); }

static void cuda_release(model_t *m) { cuda_model_destroy(&m->cuda); }

static const model_backend_t cuda = {
    .forward = cuda_forward,
    .backward = cuda_backward,
    .generate = cuda_generate,
    .zero_grad = cuda_zero_grad,
    .step = cuda_step,
    .sync_host = cuda_sync_host,
    .sync_device = cuda_sync_device,
    .release = cuda_release,
};
#endif

const model_backend_t *model_backend(const model_t *m) { return m->backend ? m->backend : &cpu; }

// ----------------------------------------------------------------------------
// choosing one

/* -1 for "cpu" and "cpu-bf16", N for "cuda:N", -2 for anything else */
static int parse_backend(const char *s)
{
    if (strcmp(s, "cpu") == 0 || strcmp(s, "cpu-bf16") == 0) return -1;
    if (strncmp(s, "cuda:", 5) != 0 || s[5] < '0' || s[5] > '9') return -2;
    char *end;
    long n = strtol(s + 5, &end, 10);
    return *end || n > 1024 ? -2 : (int)n;
}

/* the model on device dev (-1: the CPU), its device copy made or
 * dropped; 0, or -1 with err set */
static int move_to(model_t *self, int dev, const char *backend, char *err, size_t errlen)
{
    if (dev == model_device(self)) return 0;
#ifdef SAPO_HAVE_CUDA
    if (self->cuda) {
        if (cuda_model_download(self->cuda)) {
            snprintf(err, errlen, "backend %s: cannot copy the parameters back from cuda:%d", backend, self->device);
            return -1;
        }
        cuda_model_destroy(&self->cuda);
        self->backend = NULL;
    }
    if (dev >= 0) {
        char why[256];
        self->cuda = cuda_model_new(self, dev, why, sizeof why);
        if (!self->cuda) {
            snprintf(err, errlen, "backend %s: %s", backend, why);
            return -1;
        }
        self->device = dev;
    }
    return 0;
#else
    snprintf(err, errlen, "backend %s: this build has no CUDA (nvcc was not found when it was built)", backend);
    return -1;
#endif
}

/* the table of device dev (-1: the CPU, in bf16 or not) */
static const model_backend_t *table_of(int dev, bool bf16)
{
#ifdef SAPO_HAVE_CUDA
    if (dev >= 0) return &cuda;
#endif
    (void)dev;
    return bf16 ? &cpu_bf16 : &cpu;
}

int model_set_backend(model_t *self, const char *backend, char *err, size_t errlen)
{
    int dev = parse_backend(backend);
    if (dev == -2) {
        snprintf(err, errlen, "backend \"%s\": expected cpu, cpu-bf16 or cuda:N", backend);
        return -1;
    }
    bool bf16 = strcmp(backend, "cpu-bf16") == 0;
    const char *why = NULL;
    if (bf16 && model_bf16_kernel(&why) == MODEL_BF16_NONE) {
        snprintf(err, errlen, "backend cpu-bf16: %s", why);
        return -1;
    }
    const model_backend_t *was = model_backend(self), *now = table_of(dev, bf16);
    if (move_to(self, dev, backend, err, errlen)) return -1;
    /* what the backend left keeps nothing of it (cpu-bf16's copies) */
    if (was != now && was->release) was->release(self);
    self->backend = now;
    return 0;
}

int model_device(const model_t *self) { return self->cuda ? self->device : -1; }

void model_set_inference_only(model_t *self) { self->inference_only = true; }

bool model_inference_only(const model_t *self) { return self->inference_only; }

void model_set_fused_logp(model_t *self, bool on) { self->fused_logp = on; }

void model_set_direct_bf16(model_t *self, bool on) { self->direct_bf16 = on; }

void model_set_direct_heads(model_t *self, bool on) { self->direct_heads = on; }

void model_set_decode_graphs(model_t *self, bool on) { self->decode_graphs = on; }

void model_set_grouped_decode(model_t *self, bool on) { self->grouped_decode = on; }

void model_set_fused_adamw(model_t *self, bool on) { self->fused_adamw = on; }

void model_device_memory(const model_t *self, size_t *held, size_t *peak)
{
    *held = *peak = 0;
#ifdef SAPO_HAVE_CUDA
    if (self->cuda) {
        *held = cuda_model_memory(self->cuda);
        *peak = cuda_model_memory_peak(self->cuda);
    }
#else
    (void)self;
#endif
}

int model_sync_host(model_t *self)
{
    const model_backend_t *b = model_backend(self);
    return b->sync_host ? b->sync_host(self) : 0;
}

int model_sync_device(model_t *self)
{
    const model_backend_t *b = model_backend(self);
    return b->sync_device ? b->sync_device(self) : 0;
}

void model_zero_grad(model_t *self)
{
    const model_backend_t *b = model_backend(self);
    if (b->zero_grad) b->zero_grad(self);
    else memset(self->grads, 0, self->n_params * sizeof(float));
}

/* -1 after a line when self only infers and what would train it */
static int trains(const model_t *self, const char *what)
{
    if (!self->inference_only) return 0;
    fprintf(stderr, "%s: the model is for inference only (model_set_inference_only): it has no gradients\n", what);
    return -1;
}

int model_optimizer_step(model_t *self, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm)
{
    if (trains(self, "model_optimizer_step")) return -1;
    const model_backend_t *b = model_backend(self);
    if (b->step && adamw_bf16(opt)) {
        fprintf(stderr, "model_optimizer_step: moments kept in bf16 step on the CPU only (the model is on cuda:%d)\n",
                self->device);
        return -1;
    }
    if (b->step) return b->step(self, opt, p, max_norm, norm);
    *norm = grad_clip_norm(self->grads, self->n_params, max_norm);
    adamw_step(opt, p, self->params, self->grads);
    return 0;
}

// ----------------------------------------------------------------------------
// forward, backward and generate, checked

/* B, T and temperature in range, and every token and target in the
 * vocabulary; -1 after a line on stderr when not */
static int check_batch(const model_config_t *c, const int *tokens, const int *targets, const int *start, int B, int T,
                       float temperature)
{
    if (B <= 0 || T <= 0 || (!start && T > c->max_pos) || !(temperature > 0)) {
        fprintf(stderr,
                "model_forward: batch %d x %d, temperature %g: need B, T > 0, T <= %d, "
                "temperature > 0\n",
                B, T, temperature, c->max_pos);
        return -1;
    }
    int N = B * T;
    for (int n = 0; n < N; n++)
        if (tokens[n] < 0 || tokens[n] >= c->V || targets[n] < -1 || targets[n] >= c->V) {
            fprintf(stderr,
                    "model_forward: token %d or target %d at position %d is outside the "
                    "vocabulary of %d\n",
                    tokens[n], targets[n], n, c->V);
            return -1;
        }
    return 0;
}

int model_forward_packed(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                         float temperature, float *logp, float *logits)
{
    if (check_batch(&m->cfg, tokens, targets, start, B, T, temperature)) return -1;
    return model_backend(m)->forward(m, tokens, targets, start, B, T, temperature, logp, logits);
}

int model_forward(model_t *m, const int *tokens, const int *targets, int B, int T, float temperature, float *logp,
                  float *logits)
{
    return model_forward_packed(m, tokens, targets, NULL, B, T, temperature, logp, logits);
}

void model_backward(model_t *m, const float *dlogp)
{
    if (trains(m, "model_backward") == 0) model_backend(m)->backward(m, dlogp);
}

float model_cross_entropy(model_t *m, const int *tokens, const int *targets, int B, int T)
{
    int N = B * T, cnt = 0;
    for (int n = 0; n < N; n++) cnt += targets[n] >= 0;
    float *logp = malloc(2 * (size_t)N * sizeof(float));
    if (!logp || model_forward(m, tokens, targets, B, T, 1.0f, logp, NULL)) {
        free(logp);
        return -1;
    }
    float *dlogp = logp + N;
    double loss = 0;
    for (int n = 0; n < N; n++) {
        loss -= logp[n];
        dlogp[n] = targets[n] >= 0 ? -1.0f / cnt : 0.0f;
    }
    if (cnt) model_backward(m, dlogp);
    free(logp);
    return cnt ? (float)(loss / cnt) : 0.0f;
}

/* Every prompt of at least one token, all in the vocabulary, with room
 * for M new tokens; Q, L and M at least 1. 0, or -1 with the reason on
 * stderr. */
static int check_request(const model_config_t *c, const int *const *prompts, const int *prompt_lens, int Q, int L,
                         int M)
{
    for (int q = 0; q < Q; q++) {
        int P = prompt_lens[q];
        if (P < 1 || P + M > c->max_pos) {
            fprintf(stderr,
                    "model_generate: prompt %d of %d tokens with %d new tokens: need at least 1 "
                    "prompt token and prompt + new <= %d\n",
                    q, P, M, c->max_pos);
            return -1;
        }
        for (int i = 0; i < P; i++)
            if (prompts[q][i] < 0 || prompts[q][i] >= c->V) {
                fprintf(stderr, "model_generate: token %d at %d of prompt %d is outside the vocabulary of %d\n",
                        prompts[q][i], i, q, c->V);
                return -1;
            }
    }
    if (Q < 1 || L < 1 || M < 1) {
        fprintf(stderr, "model_generate: %d prompts, %d completions, %d new tokens: need each at least 1\n", Q, L, M);
        return -1;
    }
    return 0;
}

int model_generate_batch(model_t *m, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q,
                         int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths)
{
    if (check_request(&m->cfg, prompts, prompt_lens, Q, L, gp->max_new)) return -1;
    return model_backend(m)->generate(m, prompts, prompt_lens, seeds, Q, L, gp, tokens, logp, lengths);
}

int model_generate(model_t *m, const int *prompt, int P, int L, const model_gen_params_t *gp, int *tokens, float *logp,
                   int *lengths)
{
    return model_generate_batch(m, &prompt, &P, &gp->seed, 1, L, gp, tokens, logp, lengths);
}

size_t model_batch_bytes(model_t *self, int B, int T)
{
    const model_backend_t *b = model_backend(self);
    if (!b->layout) return 0;
    /* a count only: the flags a layout sets describe the last forward
     * pass, which a backward pass may still read */
    model_acts_t keep = self->a;
    size_t floats = b->layout(self, NULL, B, T);
    self->a = keep;
    size_t half = (size_t)self->cfg.HD / 2;
    return floats * sizeof(float) + 5 * (size_t)B * T * sizeof(int) + 2 * (size_t)T * half * sizeof(float);
}
