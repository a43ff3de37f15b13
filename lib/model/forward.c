/* The fp32 reference: forward and backward of the whole model over a
 * right-padded (or packed) batch, as x_forward / x_backward pairs. Every
 * matmul is model_gemm's (gemm.c chooses who multiplies) against weights
 * in Hugging Face's (out, in) layout; the rest are OpenMP loops over
 * vec.c's row kernels. Backend "cpu" runs it. The faster backends
 * (backend.c's tables) live in files of their own, are checked against
 * it (test_model, test_cuda), and take from here, through model_impl.h,
 * their layer slices and the layers they do not change. The batch and
 * its workspaces, sized once and reused, are model.c's. */
#include "model/model_impl.h"

#include <math.h>
#include <omp.h>
#include <string.h>

// ----------------------------------------------------------------------------
// layers

void model_add_bias(float *out, const float *bias, int N, int OUT)
{
#pragma omp parallel for if ((size_t)N * OUT >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) model_add_row(out + (size_t)n * OUT, bias, OUT);
}

void model_linear(float *out, const float *inp, const float *w, const float *bias, int N, int IN, int OUT, bool acc)
{
    model_gemm(false, true, N, OUT, IN, inp, IN, w, IN, acc ? 1.0f : 0.0f, out, OUT);
    if (bias) model_add_bias(out, bias, N, OUT);
}

/* each thread sums a range of columns, row by row (the order of one
 * thread alone) */
void model_bias_backward(float *dbias, const float *dout, int N, int OUT)
{
#pragma omp parallel if ((size_t)N * OUT >= MODEL_PAR_MIN)
    {
        int lo, hi;
        model_share(OUT, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (lo < hi) model_add_cols(dbias + lo, dout + lo, N, hi - lo, OUT);
    }
}

/* dinp (N, IN) = dout . w (or += when acc); dw (OUT, IN) += dout^T . inp;
 * dbias (OUT) += column sums of dout */
static void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                            int N, int IN, int OUT, bool acc)
{
    model_gemm(false, false, N, IN, OUT, dout, OUT, w, IN, acc ? 1.0f : 0.0f, dinp, IN);
    model_gemm(true, false, OUT, IN, N, dout, OUT, inp, IN, 1.0f, dw, IN);
    if (dbias) model_bias_backward(dbias, dout, N, OUT);
}

void model_copy(float *dst, const float *src, size_t n)
{
#pragma omp parallel if (n >= MODEL_PAR_MIN)
    {
        int lo, hi, blocks = (int)((n + MODEL_BLOCK - 1) / MODEL_BLOCK);
        model_share(blocks, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        size_t a = (size_t)lo * MODEL_BLOCK, b = (size_t)hi * MODEL_BLOCK < n ? (size_t)hi * MODEL_BLOCK : n;
        if (a < b) memcpy(dst + a, src + a, (b - a) * sizeof(float));
    }
}

void model_rmsnorm(float *out, float *rstd, const float *inp, const float *w, int N, int C, float eps)
{
#pragma omp parallel for if ((size_t)N * C >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float r = model_rms_inv(x, C, eps);
        model_scale_mul(out + (size_t)n * C, x, w, r, C);
        rstd[n] = r;
    }
}

/* The rows' input gradients by the threads; the weight's gradient a
 * block of columns per thread, each column summed over the rows in their
 * order, so that it is the same whatever the threads (a sum per thread,
 * added after, made warm starts on 1 and 2 threads part after a few
 * steps). part (C) holds the sums */
void model_rmsnorm_backward(float *dinp, float *dw, float *part, const float *dout, const float *inp, const float *w,
                            const float *rstd, int N, int C, bool acc)
{
    bool par = (size_t)N * C >= MODEL_PAR_MIN;
#pragma omp parallel for schedule(static) if (par)
    for (int n = 0; n < N; n++) {
        size_t r = (size_t)n * C;
        model_rmsnorm_backward_row(dinp + r, dout + r, inp + r, w, rstd[n], C, acc);
    }
    memset(part, 0, C * sizeof(float));
#pragma omp parallel for schedule(static) if (par)
    for (int i0 = 0; i0 < C; i0 += MODEL_COLUMNS)
        model_rmsnorm_weight_cols(part + i0, dout + i0, inp + i0, rstd, N,
                                  C - i0 < MODEL_COLUMNS ? C - i0 : MODEL_COLUMNS, (size_t)C);
    for (int i = 0; i < C; i++) dw[i] += part[i];
}

void model_swiglu(float *h, const float *g, const float *u, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += MODEL_BLOCK)
        model_swiglu_loop(h + lo, g + lo, u + lo, n - lo < MODEL_BLOCK ? n - lo : MODEL_BLOCK);
}

/* dg, du (n) = the gradients of model_swiglu's g and u from dh */
static void swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += MODEL_BLOCK)
        model_swiglu_backward_loop(dg + lo, du + lo, dh + lo, g + lo, u + lo,
                                   n - lo < MODEL_BLOCK ? n - lo : MODEL_BLOCK);
}

/* pairs (i, i + HD/2) turn by pos * theta^(-2i/HD); dir -1 turns back */
static void rope_apply(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD,
                       float dir)
{
    int half = HD / 2;
    size_t row = (size_t)H * HD;
#pragma omp parallel for if ((size_t)N * H * HD >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++)
        model_rope_row(x + n * row, cos_t + (size_t)pos[n] * half, sin_t + (size_t)pos[n] * half, H, HD, dir);
}

void model_rope(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD)
{
    rope_apply(x, pos, cos_t, sin_t, N, H, HD, 1.0f);
}

void model_rope_backward(float *x, const int *pos, const float *cos_t, const float *sin_t, int N, int H, int HD)
{
    rope_apply(x, pos, cos_t, sin_t, N, H, HD, -1.0f);
}

// ----------------------------------------------------------------------------
// attention

/* the inputs of attention: q (B, T, NH, HD), k and v (B, T, NKV, HD);
 * att (threads, T, T) is scratch where each thread puts the
 * probabilities of the block it works on, so they stay in its cache */
typedef struct {
    const float *q, *k, *v;
    float *att;
    const int *start, *prefix; /* packed rows (model_forward_packed), or NULL */
    int B, T, NH, NKV, HD;
} attn_t;

/* Attention runs block by block. A block is a run of queries [q0, q1)
 * of one row that see the keys [0, F) and, causally, their own [q0, t]:
 * a packed row's segment sees its row's prefix (F = S), and a tile of a
 * row's prefix (or of a plain row) sees what comes before it (F = q0, one
 * range of keys [0, q1)). Only those scores are computed: at the default
 * round's shape (a prefix of 137, 8 segments of 20) that is 44 % of the
 * row's T x T square. */
typedef struct {
    int q0, q1, F;
} attn_block_t;

#define ATTN_TILE 64 /* queries of a prefix tile */

/* the block of row b after k (from {0, 0, 0}, the first); false after
 * the last */
static bool attn_block_next(const attn_t *o, int b, attn_block_t *k)
{
    int T = o->T, S = o->start ? o->prefix[b] : T, q0 = k->q1;
    if (q0 >= T) return false;
    if (q0 < S) {
        *k = (attn_block_t){q0, q0 + ATTN_TILE < S ? q0 + ATTN_TILE : S, q0};
        return true;
    }
    const int *st = o->start + (size_t)b * T;
    int e = q0 + 1;
    while (e < T && st[e] == q0) e++;
    *k = (attn_block_t){q0, e, S};
    return true;
}

/* C (rows, HD) (+)= P (rows, W) X_keys, X_keys being the block's keys'
 * rows of x (rows ld apart): [0, F) then [q0, q1), or [0, q1) as one */
static void block_times_keys(attn_block_t k, const float *P, const float *x, int ld, float *C, int ldc, int HD,
                             float beta)
{
    int n = k.q1 - k.q0, W = k.F + n;
    if (k.F == k.q0) {
        model_gemm1(false, false, n, HD, W, P, W, x, ld, beta, C, ldc);
        return;
    }
    model_gemm1(false, false, n, HD, k.F, P, W, x, ld, beta, C, ldc);
    model_gemm1(false, false, n, HD, n, P + k.F, W, x + (size_t)k.q0 * ld, ld, 1.0f, C, ldc);
}

/* x_keys (+)= P^T Y for the block's keys' rows of x (rows ldc apart in
 * C): the gradient of keys or values */
static void keys_plus_block_t(attn_block_t k, const float *P, const float *Y, int ldy, float *C, int ldc, int HD)
{
    int n = k.q1 - k.q0, W = k.F + n;
    if (k.F == k.q0) {
        model_gemm1(true, false, W, HD, n, P, W, Y, ldy, 1.0f, C, ldc);
        return;
    }
    model_gemm1(true, false, k.F, HD, n, P, W, Y, ldy, 1.0f, C, ldc);
    model_gemm1(true, false, n, HD, n, P + k.F, W, Y, ldy, 1.0f, C + (size_t)k.q0 * ldc, ldc);
}

/* S (rows, W) = Q_block X_keys^T (no scale): scores, or the gradient of
 * the probabilities (Q the output's gradient, X the values) */
static void block_scores(attn_block_t k, const float *Q, int ldq, const float *x, int ld, float *S, int HD)
{
    int n = k.q1 - k.q0, W = k.F + n;
    if (k.F == k.q0) {
        model_gemm1(false, true, n, W, HD, Q, ldq, x, ld, 0.0f, S, W);
        return;
    }
    model_gemm1(false, true, n, k.F, HD, Q, ldq, x, ld, 0.0f, S, W);
    model_gemm1(false, true, n, n, HD, Q, ldq, x + (size_t)k.q0 * ld, ld, 0.0f, S + k.F, W);
}

/* the softmax probabilities of block k of row b, head h into p (rows, W):
 * a query's first F + i + 1 keys, zeros after */
static void block_probs(const attn_t *o, int b, int h, attn_block_t k, float *p)
{
    int T = o->T, HD = o->HD, QD = o->NH * HD, KD = o->NKV * HD, n = k.q1 - k.q0, W = k.F + n;
    const float *q = o->q + ((size_t)b * T + k.q0) * QD + h * HD;
    const float *kk = o->k + (size_t)b * T * KD + (h / (o->NH / o->NKV)) * HD;
    float scale = 1.0f / sqrtf((float)HD);
    block_scores(k, q, QD, kk, KD, p, HD);
    for (int i = 0; i < n; i++) {
        float *pr = p + (size_t)i * W;
        model_softmax_row(pr, k.F + i + 1, scale);
        for (int j = k.F + i + 1; j < W; j++) pr[j] = 0;
    }
}

/* causal GQA attention: y (B, T, NH, HD) */
static void attention_forward(const attn_t *o, float *y)
{
    int B = o->B, T = o->T, NH = o->NH, HD = o->HD, QD = NH * HD, KD = o->NKV * HD, rep = NH / o->NKV;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)B * NH * T * T * HD >= MODEL_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t ko = (size_t)b * T * KD + (h / rep) * HD;
            float *p = o->att + (size_t)omp_get_thread_num() * T * T;
            for (attn_block_t k = {0, 0, 0}; attn_block_next(o, b, &k);) {
                block_probs(o, b, h, k, p);
                block_times_keys(k, p, o->v + ko, KD, y + ((size_t)b * T + k.q0) * QD + h * HD, QD, HD, 0.0f);
            }
        }
}

/* dq, dk, dv are written (not accumulated). One thread owns each (b, kv
 * head), so the keys and values a group of heads shares are summed
 * without races; it recomputes each block's probabilities (keeping them
 * for every layer would cost L B NH T T floats). dp (threads, T, T) is
 * scratch */
static void attention_backward(const attn_t *o, float *dq, float *dk, float *dv, float *dp, const float *dy)
{
    int B = o->B, T = o->T, NH = o->NH, NKV = o->NKV, HD = o->HD, QD = NH * HD, KD = NKV * HD, rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HD);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)B * NH * T * T * HD >= MODEL_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < NKV; kh++) {
            size_t so = (size_t)omp_get_thread_num() * T * T, ko = (size_t)b * T * KD + kh * HD;
            float *ds = dp + so, *p = o->att + so;
            for (int t = 0; t < T; t++) {
                memset(dk + ko + (size_t)t * KD, 0, sizeof(float) * HD);
                memset(dv + ko + (size_t)t * KD, 0, sizeof(float) * HD);
            }
            for (int h = kh * rep; h < (kh + 1) * rep; h++)
                for (attn_block_t k = {0, 0, 0}; attn_block_next(o, b, &k);) {
                    int n = k.q1 - k.q0, W = k.F + n;
                    size_t qo = ((size_t)b * T + k.q0) * QD + h * HD;
                    block_probs(o, b, h, k, p);
                    // dv += p^T . dy ; dp = dy . v^T
                    keys_plus_block_t(k, p, dy + qo, QD, dv + ko, KD, HD);
                    block_scores(k, dy + qo, QD, o->v + ko, KD, ds, HD);
                    for (int i = 0; i < n; i++)
                        model_softmax_backward_row(ds + (size_t)i * W, p + (size_t)i * W, k.F + i + 1, W, scale);
                    // dq = ds . k ; dk += ds^T . q
                    block_times_keys(k, ds, o->k + ko, KD, dq + qo, QD, HD, 0.0f);
                    keys_plus_block_t(k, ds, o->q + qo, QD, dk + ko, KD, HD);
                }
        }
}

// ----------------------------------------------------------------------------
// embedding, and the lm_head in chunks of positions

void model_embed(model_t *m)
{
    int N = m->B * m->T, C = m->cfg.C;
#pragma omp parallel for if ((size_t)N * C >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) memcpy(m->a.x + (size_t)n * C, m->w.wte + (size_t)m->tokens[n] * C, C * sizeof(float));
}

/* rows of one token add into the same embedding row: each thread owns
 * a range of columns */
void model_embed_backward(model_t *m)
{
    int N = m->B * m->T, C = m->cfg.C;
#pragma omp parallel if ((size_t)N * C >= MODEL_PAR_MIN)
    {
        int nth = omp_get_num_threads(), per = (C + nth - 1) / nth;
        int lo = omp_get_thread_num() * per, hi = lo + per < C ? lo + per : C;
        for (int n = 0; lo < hi && n < N; n++)
            model_add_row(m->dw.wte + (size_t)m->tokens[n] * C + lo, m->ga.dx + (size_t)n * C + lo, hi - lo);
    }
}

void model_logp_rows(model_t *m, const float *lg, int r0, int n, float *logp)
{
    int V = m->cfg.V;
    float inv_t = 1.0f / m->temperature;
#pragma omp parallel for if ((size_t)n * V >= MODEL_PAR_MIN)
    for (int i = 0; i < n; i++) {
        const float *row = lg + (size_t)i * V;
        float lse = model_logsumexp(row, V, inv_t);
        int tg = m->targets[r0 + i];
        m->a.lse[r0 + i] = lse;
        logp[r0 + i] = tg >= 0 ? row[tg] * inv_t - lse : 0.0f;
    }
}

/* d logp / d logit_j = (onehot_j - softmax_j) / temperature */
void model_logp_rows_backward(model_t *m, float *lg, int r0, int n, const float *dlogp)
{
    int V = m->cfg.V;
    float inv_t = 1.0f / m->temperature;
#pragma omp parallel for if ((size_t)n * V >= MODEL_PAR_MIN)
    for (int i = 0; i < n; i++) {
        float *row = lg + (size_t)i * V;
        int tg = m->targets[r0 + i];
        float d = tg >= 0 ? dlogp[r0 + i] : 0.0f;
        if (!d) {
            memset(row, 0, V * sizeof(float));
            continue;
        }
        model_softmax_grad_row(row, V, inv_t, m->a.lse[r0 + i], d);
        row[tg] += d * inv_t;
    }
}

static const float *lm_weight(const model_t *m) { return m->cfg.tie ? m->w.wte : m->w.lm; }
static float *lm_grad(model_t *m) { return m->cfg.tie ? m->dw.wte : m->dw.lm; }

static void lm_head_forward(model_t *m, int N, float *logp, float *logits)
{
    int C = m->cfg.C, V = m->cfg.V, chunk = (int)model_logits_chunk(m, N);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        float *lg = logits ? logits + (size_t)r0 * V : m->ga.logits;
        model_linear(lg, m->a.lnf + (size_t)r0 * C, lm_weight(m), NULL, n, C, V, false);
        model_logp_rows(m, lg, r0, n, logp);
        m->logits_kept = !logits, m->logits_r0 = r0;
    }
}

bool model_logits_recompute(model_t *m, int r0)
{
    bool kept = m->logits_kept && m->logits_r0 == r0;
    m->logits_kept = false; /* the backward pass writes over them */
    return !kept;
}

/* the logits are computed again per chunk rather than kept, from the last
 * chunk back: the forward pass's logits of the last are still there */
static void lm_head_backward(model_t *m, int N, const float *dlogp)
{
    int C = m->cfg.C, V = m->cfg.V, chunk = (int)model_logits_chunk(m, N);
    float *lg = m->ga.logits;
    for (int r0 = (N - 1) / chunk * chunk; r0 >= 0; r0 -= chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        const float *lnf = m->a.lnf + (size_t)r0 * C;
        if (model_logits_recompute(m, r0)) model_linear(lg, lnf, lm_weight(m), NULL, n, C, V, false);
        model_logp_rows_backward(m, lg, r0, n, dlogp);
        matmul_backward(m->ga.dln + (size_t)r0 * C, lm_grad(m), NULL, lg, lnf, lm_weight(m), n, C, V, false);
    }
}

// ----------------------------------------------------------------------------
// the model

/* p + l n: layer l's slice of a tensor of n per layer, or NULL for a
 * tensor the config lacks */
static float *slice(float *p, int l, size_t n) { return p ? p + l * n : NULL; }

model_layer_weights_t model_layer_weights(const model_weights_t *w, const model_config_t *c, int l)
{
    size_t C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF, HD = c->HD;
    return (model_layer_weights_t){
        .ln1 = slice(w->ln1, l, C),
        .wq = slice(w->wq, l, QD * C),
        .bq = slice(w->bq, l, QD),
        .wk = slice(w->wk, l, KD * C),
        .bk = slice(w->bk, l, KD),
        .wv = slice(w->wv, l, KD * C),
        .bv = slice(w->bv, l, KD),
        .qn = slice(w->qn, l, HD),
        .kn = slice(w->kn, l, HD),
        .wo = slice(w->wo, l, C * QD),
        .bo = slice(w->bo, l, C),
        .ln2 = slice(w->ln2, l, C),
        .wg = slice(w->wg, l, FF * C),
        .wu = slice(w->wu, l, FF * C),
        .wd = slice(w->wd, l, C * FF),
    };
}

model_layer_acts_t model_layer_acts(const model_acts_t *a, const model_config_t *c, size_t N, int l)
{
    size_t C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF;
    int k = a->one_layer ? 0 : l; /* the slot of the arrays but x */
    model_layer_acts_t o = {
        .x = slice(a->x, l, N * C),
        .ln1 = slice(a->ln1, a->ln_all ? k : 0, N * C),
        .r1 = slice(a->r1, k, N),
        .rq = slice(a->rq, k, N * c->NH),
        .rk = slice(a->rk, k, N * c->NKV),
        .q = slice(a->q, k, N * QD),
        .k = slice(a->k, k, N * KD),
        .v = slice(a->v, k, N * KD),
        .y = slice(a->y, a->y_all ? k : 0, N * QD),
        .xm = slice(a->xm, k, N * C),
        .ln2 = slice(a->ln2, a->ln_all ? k : 0, N * C),
        .r2 = slice(a->r2, k, N),
        .g = slice(a->g, k, N * FF),
        .u = slice(a->u, k, N * FF),
        .h = a->h,
        .xn = slice(a->x, l + 1, N * C),
    };
    bool q3 = c->type == MODEL_QWEN3;
    o.qp = q3 ? slice(a->qpre, k, N * QD) : o.q;
    o.kp = q3 ? slice(a->kpre, k, N * KD) : o.k;
    return o;
}

static attn_t attn_of(const model_t *m, const model_layer_acts_t *la)
{
    const model_config_t *c = &m->cfg;
    return (attn_t){.q = la->q,
                    .k = la->k,
                    .v = la->v,
                    .att = m->a.att,
                    .start = m->start,
                    .prefix = m->prefix,
                    .B = m->B,
                    .T = m->T,
                    .NH = c->NH,
                    .NKV = c->NKV,
                    .HD = c->HD};
}

/* layer l: its residual stream a.x to a.xn */
static void layer_forward(model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C, QD = c->NH * c->HD, KD = c->NKV * c->HD, FF = c->FF, HD = c->HD;
    model_layer_weights_t w = model_layer_weights(&m->w, c, l);
    model_layer_acts_t a = model_layer_acts(&m->a, c, N, l);
    // attention: xm = x + attention(RoPE(q), RoPE(k), v) . wo^T (+ bo)
    model_rmsnorm(a.ln1, a.r1, a.x, w.ln1, N, C, c->rms_eps);
    model_linear(a.qp, a.ln1, w.wq, w.bq, N, C, QD, false);
    model_linear(a.kp, a.ln1, w.wk, w.bk, N, C, KD, false);
    model_linear(a.v, a.ln1, w.wv, w.bv, N, C, KD, false);
    if (c->type == MODEL_QWEN3) {
        model_rmsnorm(a.q, a.rq, a.qp, w.qn, N * c->NH, HD, c->rms_eps);
        model_rmsnorm(a.k, a.rk, a.kp, w.kn, N * c->NKV, HD, c->rms_eps);
    }
    model_rope(a.q, m->pos, m->rope_cos, m->rope_sin, N, c->NH, HD);
    model_rope(a.k, m->pos, m->rope_cos, m->rope_sin, N, c->NKV, HD);
    attn_t ao = attn_of(m, &a);
    attention_forward(&ao, a.y);
    model_copy(a.xm, a.x, (size_t)N * C);
    model_linear(a.xm, a.y, w.wo, w.bo, N, QD, C, true);
    // MLP: xn = xm + (silu(g) * u) . wd^T
    model_rmsnorm(a.ln2, a.r2, a.xm, w.ln2, N, C, c->rms_eps);
    model_linear(a.g, a.ln2, w.wg, NULL, N, C, FF, false);
    model_linear(a.u, a.ln2, w.wu, NULL, N, C, FF, false);
    model_swiglu(a.h, a.g, a.u, (size_t)N * FF);
    model_copy(a.xn, a.xm, (size_t)N * C);
    model_linear(a.xn, a.h, w.wd, NULL, N, FF, C, true);
}

int model_cpu_forward(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                      float temperature, float *logp, float *logits)
{
    const model_config_t *c = &m->cfg;
    if (model_set_batch(m, model_acts_layout, tokens, targets, start, B, T, temperature)) return -1;
    int N = B * T;
    model_embed(m);
    for (int l = 0; l < c->L; l++) layer_forward(m, l);
    model_rmsnorm(m->a.lnf, m->a.rf, m->a.x + (size_t)c->L * N * c->C, m->w.lnf, N, c->C, c->rms_eps);
    lm_head_forward(m, N, logp, logits);
    return 0;
}

bool model_layer_again(const model_t *m, int l) { return m->a.one_layer && l < m->cfg.L - 1; }

/* layer l backward: ga->dx, the gradient at its output, to the gradient
 * at its input; its weights' gradients added to m->dw */
static void layer_backward(model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C, QD = c->NH * c->HD, KD = c->NKV * c->HD, FF = c->FF, HD = c->HD;
    model_layer_weights_t w = model_layer_weights(&m->w, c, l), dw = model_layer_weights(&m->dw, c, l);
    model_layer_acts_t a = model_layer_acts(&m->a, c, N, l);
    model_grad_acts_t *ga = &m->ga;
    // MLP: xn = xm + (silu(g) * u) . wd^T; h (one layer's) computed again
    model_swiglu(a.h, a.g, a.u, (size_t)N * FF);
    matmul_backward(ga->dh, dw.wd, NULL, ga->dx, a.h, w.wd, N, FF, C, false);
    swiglu_backward(ga->dg, ga->du, ga->dh, a.g, a.u, (size_t)N * FF);
    matmul_backward(ga->dln, dw.wg, NULL, ga->dg, a.ln2, w.wg, N, C, FF, false);
    matmul_backward(ga->dln, dw.wu, NULL, ga->du, a.ln2, w.wu, N, C, FF, true);
    model_rmsnorm_backward(ga->dx, dw.ln2, ga->part, ga->dln, a.xm, w.ln2, a.r2, N, C, true);
    // attention: xm = x + y . wo^T (+ bo)
    matmul_backward(ga->dy, dw.wo, dw.bo, ga->dx, a.y, w.wo, N, QD, C, false);
    attn_t ao = attn_of(m, &a);
    attention_backward(&ao, ga->dq, ga->dk, ga->dv, ga->dp, ga->dy);
    model_rope_backward(ga->dq, m->pos, m->rope_cos, m->rope_sin, N, c->NH, HD);
    model_rope_backward(ga->dk, m->pos, m->rope_cos, m->rope_sin, N, c->NKV, HD);
    float *dq = ga->dq, *dk = ga->dk;
    if (c->type == MODEL_QWEN3) {
        /* dy is free again: it takes dq before q_norm, dk2 dk */
        dq = ga->dy, dk = ga->dk2;
        model_rmsnorm_backward(dq, dw.qn, ga->part, ga->dq, a.qp, w.qn, a.rq, N * c->NH, HD, false);
        model_rmsnorm_backward(dk, dw.kn, ga->part, ga->dk, a.kp, w.kn, a.rk, N * c->NKV, HD, false);
    }
    matmul_backward(ga->dln, dw.wq, dw.bq, dq, a.ln1, w.wq, N, C, QD, false);
    matmul_backward(ga->dln, dw.wk, dw.bk, dk, a.ln1, w.wk, N, C, KD, true);
    matmul_backward(ga->dln, dw.wv, dw.bv, ga->dv, a.ln1, w.wv, N, C, KD, true);
    model_rmsnorm_backward(ga->dx, dw.ln1, ga->part, ga->dln, a.x, w.ln1, a.r1, N, C, true);
}

void model_cpu_backward(model_t *m, const float *dlogp)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C;
    model_grad_acts_t *ga = &m->ga;
    lm_head_backward(m, N, dlogp);
    model_rmsnorm_backward(ga->dx, m->dw.lnf, ga->part, ga->dln, m->a.x + (size_t)c->L * N * C, m->w.lnf, m->a.rf, N, C,
                           false);
    for (int l = c->L - 1; l >= 0; l--) {
        if (model_layer_again(m, l)) layer_forward(m, l);
        layer_backward(m, l);
    }
    model_embed_backward(m);
}
