/* model_t life cycle: the one parameter allocation, the one gradient
 * allocation, random initialisation, and the batch a CPU path runs: its
 * tokens, targets, RoPE positions and packed layout, and the workspaces
 * of its forward and backward passes, which grow only when a larger
 * batch arrives. */
#include "model/model_impl.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/splitmix.h"

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
    if (m->backend && m->backend->release) m->backend->release(m);
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

void model_set_logits_chunk(model_t *self, int rows) { self->chunk = rows > 0 ? rows : 0; }

void model_set_recompute(model_t *self, bool on) { self->recompute = on; }
bool model_recompute(const model_t *self) { return self->recompute; }

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

// ----------------------------------------------------------------------------
// the batch and its workspaces

void model_acts_arrays(model_t *m, int B, int T, model_array_t *t)
{
    const model_config_t *c = &m->cfg;
    size_t N = (size_t)B * T, L = c->L, C = c->C, QD = (size_t)c->NH * c->HD;
    size_t KD = (size_t)c->NKV * c->HD, FF = c->FF, q3 = c->type == MODEL_QWEN3;
    size_t chunk = model_logits_chunk(m, (int)N), threads = omp_get_max_threads();
    model_acts_t *a = &m->a;
    model_grad_acts_t *g = &m->ga;
    a->ln_all = a->y_all = true;
    a->one_layer = m->recompute;
    /* the residual stream entering each layer is what a layer's forward
     * pass runs again from; of the rest, layers kept */
    size_t x_n = (L + 1) * N * C;
    L = m->recompute ? 1 : L;
    model_array_t all[] = {
        {&a->x, x_n},
        {&a->ln1, L * N * C},
        {&a->r1, L * N},
        {&a->qpre, q3 * L * N * QD},
        {&a->kpre, q3 * L * N * KD},
        {&a->rq, q3 * L * N * c->NH},
        {&a->rk, q3 * L * N * c->NKV},
        {&a->q, L * N * QD},
        {&a->k, L * N * KD},
        {&a->v, L * N * KD},
        {&a->att, threads * T * T},
        {&a->y, L * N * QD},
        {&a->xm, L * N * C},
        {&a->ln2, L * N * C},
        {&a->r2, L * N},
        {&a->g, L * N * FF},
        {&a->u, L * N * FF},
        {&a->h, N * FF},
        {&a->lnf, N * C},
        {&a->rf, N},
        {&a->lse, N},
        {&g->dx, N * C},
        {&g->dln, N * C},
        {&g->dq, N * QD},
        {&g->dk, N * KD},
        {&g->dv, N * KD},
        {&g->dy, N * QD},
        {&g->dk2, q3 * N * KD},
        {&g->dg, N * FF},
        {&g->du, N * FF},
        {&g->dh, N * FF},
        {&g->logits, chunk * c->V},
        {&g->part, threads * (C > (size_t)c->HD ? C : (size_t)c->HD)},
        {&g->dp, threads * T * T},
    };
    _Static_assert(sizeof all / sizeof *all == MODEL_ACTS_ARRAYS, "MODEL_ACTS_ARRAYS counts model_acts_arrays' list");
    memcpy(t, all, sizeof all);
}

size_t model_arrays_place(const model_array_t *t, int n, float *base, size_t at)
{
    for (int i = 0; i < n; i++) {
        if (base) *t[i].p = t[i].n ? base + at : NULL;
        at += (t[i].n + 15) / 16 * 16;
    }
    return at;
}

size_t model_acts_layout(model_t *m, float *base, int B, int T)
{
    model_array_t t[MODEL_ACTS_ARRAYS];
    model_acts_arrays(m, B, T, t);
    return model_arrays_place(t, MODEL_ACTS_ARRAYS, base, 0);
}

static int acts_ensure(model_t *m, model_layout_fn *layout, int B, int T)
{
    size_t need = layout(m, NULL, B, T), N = (size_t)B * T;
    if (need > m->acts_cap) {
        free(m->acts_mem);
        /* 64-byte aligned, so each array starts a cache line (model_arrays_place) */
        m->acts_mem = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
        m->acts_cap = m->acts_mem ? need : 0;
    }
    if ((size_t)m->B * m->T < N || !m->tokens) {
        free(m->tokens);
        m->tokens = malloc(5 * N * sizeof(int));
    }
    if (!m->acts_mem || !m->tokens || model_rope_ensure(m, T)) {
        fprintf(stderr, "model: out of memory for a batch of %d x %d\n", B, T);
        free(m->tokens);
        m->tokens = NULL;
        m->B = m->T = 0;
        return -1;
    }
    layout(m, m->acts_mem, B, T);
    m->targets = m->tokens + N;
    m->pos = m->tokens + 2 * N;
    m->start = NULL;
    m->prefix = m->tokens + 4 * N; /* B <= N */
    return 0;
}

/* each row's prefix (the positions before its first segment) into
 * prefix (B) and every position's RoPE position into pos (N); -1 after a
 * line on stderr for a start that is not a packed layout or a position
 * past max_pos */
static int packed_layout(const int *start, int B, int T, int max_pos, int *prefix, int *pos)
{
    for (int b = 0; b < B; b++) {
        const int *st = start + (size_t)b * T;
        int S = 0;
        while (S < T && st[S] == 0) S++;
        prefix[b] = S;
        for (int t = 0; t < T; t++) {
            int a = st[t];
            bool ok = t < S ? a == 0 : (a >= S && a <= t && (a == t || st[t - 1] == a) && S > 0);
            int p = t < S ? t : S + t - a;
            if (!ok || p >= max_pos) {
                fprintf(stderr, "model_forward_packed: row %d position %d: start %d %s\n", b, t, a,
                        ok ? "puts it past max_position_embeddings"
                           : "is not a packed layout (0 in the prefix, "
                             "then each segment's first position, after at least one prefix position)");
                return -1;
            }
            pos[(size_t)b * T + t] = p;
        }
    }
    return 0;
}

int model_set_batch(model_t *m, model_layout_fn *layout, const int *tokens, const int *targets, const int *start, int B,
                    int T, float temperature)
{
    const model_config_t *c = &m->cfg;
    int N = B * T;
    if (acts_ensure(m, layout, B, T)) return -1;
    if (start) {
        if (packed_layout(start, B, T, c->max_pos, m->prefix, m->pos)) return -1;
        m->start = m->tokens + 3 * N;
        memcpy(m->start, start, N * sizeof(int));
    } else {
        for (int n = 0; n < N; n++) m->pos[n] = n % T;
    }
    m->B = B;
    m->T = T;
    m->temperature = temperature;
    memcpy(m->tokens, tokens, N * sizeof(int));
    memcpy(m->targets, targets, N * sizeof(int));
    return 0;
}
