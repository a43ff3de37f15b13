/* Where a model runs: "cpu" (forward.c, generate.c), "cpu-bf16" (the same,
 * its large matmuls in bf16 on the AMX tiles or by AVX512-BF16 dot
 * products: gemm_bf16.c) or "cuda:N"
 * (cuda/, built when nvcc is present). The CPU arrays stay the model's identity
 * (checkpoints read and write them); a device holds its own copy, synced
 * both ways on request. */
#include "model/model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#endif

/* -1 for "cpu" and "cpu-bf16", N for "cuda:N", -2 for anything else */
static int parse_backend(const char *s)
{
    if (strcmp(s, "cpu") == 0 || strcmp(s, "cpu-bf16") == 0) return -1;
    if (strncmp(s, "cuda:", 5) != 0 || s[5] < '0' || s[5] > '9') return -2;
    char *end;
    long n = strtol(s + 5, &end, 10);
    return *end || n > 1024 ? -2 : (int)n;
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
    self->bf16 = bf16;
    if (dev == model_device(self)) return 0;
#ifdef SAPO_HAVE_CUDA
    if (self->cuda) {
        if (cuda_model_download(self->cuda)) {
            snprintf(err, errlen, "backend %s: cannot copy the parameters back from cuda:%d", backend, self->device);
            return -1;
        }
        cuda_model_destroy(&self->cuda);
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

int model_device(const model_t *self) { return self->cuda ? self->device : -1; }

int model_sync_host(model_t *self)
{
#ifdef SAPO_HAVE_CUDA
    if (self->cuda) return cuda_model_download(self->cuda);
#endif
    (void)self;
    return 0;
}

int model_optimizer_step(model_t *self, adamw_t *opt, const adamw_params_t *p, float max_norm, float *norm)
{
#ifdef SAPO_HAVE_CUDA
    if (self->cuda) return cuda_model_step(self->cuda, opt, p, max_norm, norm);
#endif
    *norm = grad_clip_norm(self->grads, self->n_params, max_norm);
    adamw_step(opt, p, self->params, self->grads);
    return 0;
}

int model_sync_device(model_t *self)
{
#ifdef SAPO_HAVE_CUDA
    if (self->cuda) return cuda_model_upload(self->cuda);
#endif
    (void)self;
    return 0;
}
