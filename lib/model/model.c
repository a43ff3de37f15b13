/* model_t life cycle: the one parameter allocation, the one gradient
 * allocation, random initialisation and the workspaces of the forward
 * pass, which grow only when a larger batch arrives. */
#include "model/model_impl.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/splitmix.h"

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#endif

float **model_weights_slot(model_weights_t *w, int t)
{
    float **ptrs[MODEL_NUM_TENSORS] = {
        &w->wte, &w->ln1, &w->wq, &w->bq,  &w->wk, &w->bk, &w->wv, &w->bv,  &w->qn,
        &w->kn,  &w->wo,  &w->bo, &w->ln2, &w->wg, &w->wu, &w->wd, &w->lnf, &w->lm,
    };
    return ptrs[t];
}

bool model_tensor_is_matrix(int t)
{
    static const bool matrix[MODEL_NUM_TENSORS] = {
        [0] = true, [2] = true, [4] = true, [6] = true, [10] = true, [13] = true, [14] = true, [15] = true, [17] = true,
    };
    return matrix[t];
}

void model_weights_point(model_weights_t *w, float *base, const size_t *sizes)
{
    for (int i = 0; i < MODEL_NUM_TENSORS; i++) {
        *model_weights_slot(w, i) = sizes[i] ? base : NULL;
        base += sizes[i];
    }
}

/* a model with zeroed parameters and gradients */
static model_t *model_alloc(const model_config_t *cfg)
{
    /* model_gemm runs one-thread sgemms on OpenMP threads */
    openblas_set_num_threads(1);
    model_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cfg = *cfg;
    model_sizes(cfg, m->sizes);
    for (int i = 0; i < MODEL_NUM_TENSORS; i++) m->n_params += m->sizes[i];
    m->params = calloc(m->n_params, sizeof(float));
    m->grads = calloc(m->n_params, sizeof(float));
    if (!m->params || !m->grads) {
        model_destroy(&m);
        return NULL;
    }
    model_weights_point(&m->w, m->params, m->sizes);
    model_weights_point(&m->dw, m->grads, m->sizes);
    return m;
}

model_t *model_new_empty(const model_config_t *cfg, const char *where, char *err, size_t errlen)
{
    if (model_config_check(cfg, where, err, errlen)) return NULL;
    model_t *m = model_alloc(cfg);
    if (!m) snprintf(err, errlen, "%s: out of memory for %zu parameters", where, model_num_params_of(cfg));
    return m;
}

size_t model_num_params_of(const model_config_t *cfg)
{
    size_t s[MODEL_NUM_TENSORS], n = 0;
    model_sizes(cfg, s);
    for (int i = 0; i < MODEL_NUM_TENSORS; i++) n += s[i];
    return n;
}

static void fill_normal(float *p, size_t n, float std, uint64_t *s)
{
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((splitmix64(s) >> 11) + 1.0) / 9007199254740993.0;
        double u2 = (splitmix64(s) >> 11) / 9007199254740992.0;
        double r = sqrt(-2.0 * log(u1));
        p[i] = (float)(std * r * cos(2 * M_PI * u2));
        if (i + 1 < n) p[i + 1] = (float)(std * r * sin(2 * M_PI * u2));
    }
}

model_t *model_new_random(const model_config_t *cfg, uint64_t seed, char *err, size_t errlen)
{
    model_t *m = model_new_empty(cfg, "model config", err, errlen);
    if (!m) return NULL;
    uint64_t s = seed;
    model_weights_t *w = &m->w;
    float *mats[] = {w->wte, w->wq, w->wk, w->wv, w->wo, w->wg, w->wu, w->wd, w->lm};
    size_t nmat[] = {m->sizes[0],  m->sizes[2],  m->sizes[4],  m->sizes[6], m->sizes[10],
                     m->sizes[13], m->sizes[14], m->sizes[15], m->sizes[17]};
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
        if (mats[i]) fill_normal(mats[i], nmat[i], 0.02f, &s);
    float *norms[] = {w->ln1, w->ln2, w->lnf, w->qn, w->kn};
    size_t nnorm[] = {m->sizes[1], m->sizes[12], m->sizes[16], m->sizes[8], m->sizes[9]};
    for (size_t i = 0; i < sizeof norms / sizeof *norms; i++)
        for (size_t j = 0; j < nnorm[i]; j++) norms[i][j] = 1.0f;
    return m;
}

void model_destroy(model_t **self_p)
{
    model_t *m = *self_p;
    if (!m) return;
#ifdef SAPO_HAVE_CUDA
    cuda_model_destroy(&m->cuda);
#endif
    free(m->params);
    free(m->grads);
    free(m->acts_mem);
    free(m->tokens);
    free(m->rope_cos);
    free(m->rope_sin);
    free(m);
    *self_p = NULL;
}

const model_config_t *model_config(const model_t *self) { return &self->cfg; }
float *model_params(model_t *self) { return self->params; }
float *model_grads(model_t *self) { return self->grads; }
size_t model_num_params(const model_t *self) { return self->n_params; }

int model_rope_ensure(model_t *m, int T)
{
    if (T <= m->rope_cap) return 0;
    int half = m->cfg.HD / 2;
    float *c = realloc(m->rope_cos, (size_t)T * half * sizeof(float));
    if (c) m->rope_cos = c;
    float *s = realloc(m->rope_sin, (size_t)T * half * sizeof(float));
    if (s) m->rope_sin = s;
    if (!c || !s) return -1;
    /* transformers computes inv_freq and the angle in fp32 */
    for (int i = 0; i < half; i++) {
        float inv = (float)(1.0 / pow((double)m->cfg.rope_theta, (double)(2 * i) / m->cfg.HD));
        for (int t = 0; t < T; t++) {
            float ang = (float)t * inv;
            m->rope_cos[(size_t)t * half + i] = cosf(ang);
            m->rope_sin[(size_t)t * half + i] = sinf(ang);
        }
    }
    m->rope_cap = T;
    return 0;
}

size_t model_logits_chunk(const model_t *m, int N)
{
    /* about 64M floats of logits at a time (256 MiB; SmolLM2's 1,365
     * positions, the Qwen 0.5B's 441), whatever the vocabulary: each chunk
     * converts and packs the head's weights again for each of its
     * products, so that at 4M floats (85 positions of SmolLM2) the
     * packing took a sixth of a bf16 training step */
    size_t rows = m->chunk > 0 ? (size_t)m->chunk : (size_t)(64u << 20) / (size_t)m->cfg.V;
    if (rows < 1) rows = 1;
    return rows < (size_t)N ? rows : (size_t)N;
}
