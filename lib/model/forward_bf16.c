/* Backend cpu-bf16: the fp32 reference's forward and backward passes
 * (forward.c) with the large matmuls' products in bf16 (model_gemm_bf16:
 * AMX tiles or AVX512-BF16 dot products) and their sums, the parameters
 * and gradients in fp32. A layer whose output goes into such a matmul
 * also writes that output rounded to bf16 (acts16_t), which the
 * kernel reads at half the bytes and without converting it; where every
 * matmul that reads an fp32 activation takes its copy instead, the fp32
 * array is not kept (model_bf16_layout). The layers it does not change are
 * forward.c's, the batch's set-up model.c's; test_model checks the two
 * paths against each other. */
#include "model/model_impl.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bf16 copies of the activations (acts16_t) and gradients
 * (grad_acts16_t) that go into matmuls, each named as the fp32 array of
 * model_acts_t or model_grad_acts_t it rounds, and rounded by the layer
 * that writes that array; read by the bf16 kernel instead of it. They
 * lie in the model's workspaces, after the fp32 arrays (model_bf16_layout). */
typedef struct {
    uint16_t *ln1; // (L, N, C)
    uint16_t *y;   // (L, N, NH*HD)
    uint16_t *ln2; // (L, N, C)
    uint16_t *h;   // (L, N, FF) kept: not recomputed in backward
    uint16_t *lnf; // (N, C)
    uint16_t *q;   // (L, N, NH*HD) after RoPE
    uint16_t *k;   // (L, N, NKV*HD)
    uint16_t *v;   // (L, N, NKV*HD)
    uint16_t *att; // (threads, T, T)
} acts16_t;

typedef struct {
    uint16_t *dx;     // (N, C)
    uint16_t *dq;     // (N, NH*HD) the gradient wq's matmul takes
    uint16_t *dk;     // (N, NKV*HD) the same for wk
    uint16_t *dv;     // (N, NKV*HD)
    uint16_t *dg;     // (N, FF)
    uint16_t *du;     // (N, FF)
    uint16_t *logits; // (chunk, V)
    uint16_t *dp;     // (threads, T, T)
} grad_acts16_t;

/* where a model's copies lie: m->bf16, made by its first forward pass
 * in bf16, freed through the backend table (model_bf16_release) */
struct model_bf16 {
    acts16_t a;
    grad_acts16_t ga;
};

void model_bf16_release(model_t *m)
{
    free(m->bf16);
    m->bf16 = NULL;
}

// ----------------------------------------------------------------------------
// layers

/* An activation, or the gradient of one, as a matmul takes it: f, its
 * fp32 array (NULL where every matmul that reads it takes f16: model_bf16_layout),
 * and f16, its copy rounded to bf16 by the layer that wrote it (NULL
 * where it has none) */
typedef struct {
    float *f;
    uint16_t *f16;
} act_t;

/* an fp32 array alone */
static inline act_t fp32(const float *f) { return (act_t){(float *)f, NULL}; }

/* both arrays of a from element off on: a range of rows, or a layer */
static inline act_t act_at(act_t a, size_t off) { return (act_t){a.f ? a.f + off : NULL, a.f16 ? a.f16 + off : NULL}; }

/* whether a matmul goes to the bf16 kernel: it needs a few 32 x 32
 * blocks of C to pay for the packing */
static bool takes(int M, int N, int K) { return M > MODEL_FEW_ROWS && (double)M * N * K >= MODEL_BF16_MIN; }

/* C (M, N) = op(A) op(B) + beta C: by the bf16 kernel where it takes the
 * product (reading the copies), else by model_gemm in fp32; gemm16_1 the
 * same on the calling thread alone (attention's, inside its team) */
static void gemm16(bool ta, bool tb, int M, int N, int K, act_t A, int lda, act_t B, int ldb, float beta, float *C,
                   int ldc)
{
    if (takes(M, N, K)) model_gemm_bf16(ta, tb, M, N, K, A.f, A.f16, lda, B.f, B.f16, ldb, beta, C, ldc);
    else model_gemm(ta, tb, M, N, K, A.f, lda, B.f, ldb, beta, C, ldc);
}

static void gemm16_1(bool ta, bool tb, int M, int N, int K, act_t A, int lda, act_t B, int ldb, float beta, float *C,
                     int ldc)
{
    if (takes(M, N, K)) model_gemm_bf16(ta, tb, M, N, K, A.f, A.f16, lda, B.f, B.f16, ldb, beta, C, ldc);
    else model_gemm1(ta, tb, M, N, K, A.f, lda, B.f, ldb, beta, C, ldc);
}

/* dst (n) = src rounded to bf16, by the threads */
static void round16(uint16_t *dst, const float *src, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += MODEL_BLOCK)
        model_bf16_round(dst + lo, src + lo, n - lo < MODEL_BLOCK ? n - lo : MODEL_BLOCK);
}

/* out (N, OUT) = inp (N, IN) . w^T (+ bias), or += when acc; rounded
 * into out.f16 where given */
static void matmul16(act_t out, act_t inp, const float *w, const float *bias, int N, int IN, int OUT, bool acc)
{
    gemm16(false, true, N, OUT, IN, inp, IN, fp32(w), IN, acc ? 1.0f : 0.0f, out.f, OUT);
    if (bias) model_add_bias(out.f, bias, N, OUT);
    if (out.f16) round16(out.f16, out.f, (size_t)N * OUT);
}

void model_bf16_linear(float *out, const float *in, const float *w, const float *bias, int N, int IN, int OUT, bool acc)
{
    matmul16(fp32(out), fp32(in), w, bias, N, IN, OUT, acc);
}

/* dinp (N, IN) = dout . w (or += when acc); dw (OUT, IN) += dout^T . inp;
 * dbias (OUT) += column sums of dout (its fp32 array) */
static void matmul16_backward(float *dinp, float *dw, float *dbias, act_t dout, act_t inp, const float *w, int N,
                              int IN, int OUT, bool acc)
{
    gemm16(false, false, N, IN, OUT, dout, OUT, fp32(w), IN, acc ? 1.0f : 0.0f, dinp, IN);
    gemm16(true, false, OUT, IN, N, dout, OUT, inp, IN, 1.0f, dw, IN);
    if (dbias) model_bias_backward(dbias, dout.f, N, OUT);
}

/* out (N, C) = RMSNorm(inp) w into out.f16 (and out.f where kept), rstd
 * (N) its 1/rms */
static void rmsnorm16(act_t out, float *rstd, const float *inp, const float *w, int N, int C, float eps)
{
#pragma omp parallel for if ((size_t)N * C >= MODEL_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float buf[256], r = model_rms_inv(x, C, eps);
        for (int i0 = 0; i0 < C; i0 += 256) {
            int len = C - i0 < 256 ? C - i0 : 256;
            float *o = out.f ? out.f + (size_t)n * C + i0 : buf;
            model_scale_mul(o, x + i0, w + i0, r, len);
            model_bf16_round(out.f16 + (size_t)n * C + i0, o, len);
        }
        rstd[n] = r;
    }
}

/* model_rmsnorm_backward, its input gradient rounded into dinp.f16 */
static void rmsnorm16_backward(act_t dinp, float *dw, float *part, const float *dout, const float *inp, const float *w,
                               const float *rstd, int N, int C, bool acc)
{
    model_rmsnorm_backward(dinp.f, dw, part, dout, inp, w, rstd, N, C, acc);
    round16(dinp.f16, dinp.f, (size_t)N * C);
}

/* h (n) = silu(g) * u into h.f16 (and h.f where kept) */
static void swiglu16(act_t h, const float *g, const float *u, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += MODEL_BLOCK) {
        size_t len = n - lo < MODEL_BLOCK ? n - lo : MODEL_BLOCK;
        float buf[MODEL_BLOCK], *o = h.f ? h.f + lo : buf;
        model_swiglu_loop(o, g + lo, u + lo, len);
        model_bf16_round(h.f16 + lo, o, len);
    }
}

/* dg, du (n) = the gradients of swiglu16's g and u from dh, into their
 * copies (and fp32 arrays where kept) */
static void swiglu16_backward(act_t dg, act_t du, const float *dh, const float *g, const float *u, size_t n)
{
#pragma omp parallel for if (n >= MODEL_PAR_MIN)
    for (size_t lo = 0; lo < n; lo += MODEL_BLOCK) {
        size_t len = n - lo < MODEL_BLOCK ? n - lo : MODEL_BLOCK;
        float bg[MODEL_BLOCK], bu[MODEL_BLOCK], *og = dg.f ? dg.f + lo : bg, *ou = du.f ? du.f + lo : bu;
        model_swiglu_backward_loop(og, ou, dh + lo, g + lo, u + lo, len);
        model_bf16_round(dg.f16 + lo, og, len);
        model_bf16_round(du.f16 + lo, ou, len);
    }
}

// ----------------------------------------------------------------------------
// attention

/* attention's inputs with their copies, as forward.c's attn_t */
typedef struct {
    act_t q, k, v, att;
    const int *start, *prefix;
    int B, T, NH, NKV, HD;
} attn16_t;

/* A row's blocks of queries are larger than the reference's: the
 * products of its tiles and segments would fall under the bf16 kernels'
 * threshold (MODEL_BF16_MIN) and run in fp32 (a train step of 64 x 192
 * took 13 to 15 % longer, a packed one 5 %). So a row's prefix [0, S)
 * (the whole row where it is not packed) is one causal block, and all
 * its segments [S, T) are one more, each query seeing [0, S) and its own
 * segment, the other segments masked. Either block's queries [q0, q1)
 * see the keys [0, q1). */
static int prefix_of(const attn16_t *o, int b) { return o->start ? o->prefix[b] : o->T; }

/* the softmax probabilities of queries [q0, q1) of row b, head h into p
 * (rows, q1), fp32 and bf16: a query's first q0 + i + 1 keys (less the
 * other segments'), zeros after */
static void block_probs16(const attn16_t *o, int b, int h, int q0, int q1, act_t p)
{
    int T = o->T, HD = o->HD, QD = o->NH * HD, KD = o->NKV * HD, n = q1 - q0;
    act_t q = act_at(o->q, ((size_t)b * T + q0) * QD + h * HD);
    act_t k = act_at(o->k, (size_t)b * T * KD + (h / (o->NH / o->NKV)) * HD);
    gemm16_1(false, true, n, q1, HD, q, QD, k, KD, 0.0f, p.f, q1);
    for (int i = 0; i < n; i++) {
        float *pr = p.f + (size_t)i * q1;
        uint16_t *pr16 = p.f16 + (size_t)i * q1;
        /* a segment's query skips the keys [q0, a) of the segments before
         * its own: out of the softmax (e^-inf is e^-87 in fastexp, far
         * under a sum of at least 1), then made 0 */
        int a = q0 > 0 ? o->start[(size_t)b * T + q0 + i] : q0;
        for (int j = q0; j < a; j++) pr[j] = -INFINITY;
        model_softmax_causal(pr, pr16, q0 + i + 1, q1, 1.0f / sqrtf((float)HD));
        for (int j = q0; j < a; j++) pr[j] = 0, pr16[j] = 0;
    }
}

/* causal GQA attention: y (B, T, NH, HD) and its copy */
static void attention16_forward(const attn16_t *o, act_t y)
{
    int B = o->B, T = o->T, NH = o->NH, HD = o->HD, QD = NH * HD, KD = o->NKV * HD, rep = NH / o->NKV;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)B * NH * T * T * HD >= MODEL_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t ko = (size_t)b * T * KD + (h / rep) * HD;
            act_t p = act_at(o->att, (size_t)omp_get_thread_num() * T * T);
            for (int q0 = 0, q1 = prefix_of(o, b); q0 < T; q0 = q1, q1 = T) {
                size_t qo = ((size_t)b * T + q0) * QD + h * HD;
                block_probs16(o, b, h, q0, q1, p);
                gemm16_1(false, false, q1 - q0, HD, q1, p, q1, act_at(o->v, ko), KD, 0.0f, y.f + qo, QD);
                for (int t = 0; t < q1 - q0; t++)
                    model_bf16_round(y.f16 + qo + (size_t)t * QD, y.f + qo + (size_t)t * QD, HD);
            }
        }
}

/* the gradients of the keys and values of row b's kv head kh and of its
 * queries (forward.c's attention_backward over these blocks), dv also
 * rounded into its copy; ds and p this thread's (T, T) scratch */
static void kv_head16_backward(const attn16_t *o, int b, int kh, float *dq, float *dk, act_t dv, act_t ds, act_t p,
                               const float *dy)
{
    int T = o->T, HD = o->HD, QD = o->NH * HD, KD = o->NKV * HD, rep = o->NH / o->NKV;
    float scale = 1.0f / sqrtf((float)HD);
    size_t ko = (size_t)b * T * KD + kh * HD;
    act_t kb = act_at(o->k, ko), vb = act_at(o->v, ko);
    for (int t = 0; t < T; t++) {
        memset(dk + ko + (size_t)t * KD, 0, sizeof(float) * HD);
        memset(dv.f + ko + (size_t)t * KD, 0, sizeof(float) * HD);
    }
    for (int h = kh * rep; h < (kh + 1) * rep; h++)
        for (int q0 = 0, q1 = prefix_of(o, b); q0 < T; q0 = q1, q1 = T) {
            int n = q1 - q0;
            size_t qo = ((size_t)b * T + q0) * QD + h * HD;
            act_t dyb = fp32(dy + qo), qb = act_at(o->q, qo);
            block_probs16(o, b, h, q0, q1, p);
            // dv += p^T . dy ; dp = dy . v^T
            gemm16_1(true, false, q1, HD, n, p, q1, dyb, QD, 1.0f, dv.f + ko, KD);
            gemm16_1(false, true, n, q1, HD, dyb, QD, vb, KD, 0.0f, ds.f, q1);
            for (int i = 0; i < n; i++) {
                float *r = ds.f + (size_t)i * q1;
                model_softmax_backward_row(r, p.f + (size_t)i * q1, q0 + i + 1, q1, scale);
                model_bf16_round(ds.f16 + (size_t)i * q1, r, q1);
            }
            // dq = ds . k ; dk += ds^T . q
            gemm16_1(false, false, n, HD, q1, ds, q1, kb, KD, 0.0f, dq + qo, QD);
            gemm16_1(true, false, q1, HD, n, ds, q1, qb, QD, 1.0f, dk + ko, KD);
        }
    for (int t = 0; t < T; t++) model_bf16_round(dv.f16 + ko + (size_t)t * KD, dv.f + ko + (size_t)t * KD, HD);
}

/* dq, dk, dv written, one thread a (row, kv head) as in forward.c; dp
 * (threads, T, T) scratch in both precisions */
static void attention16_backward(const attn16_t *o, float *dq, float *dk, act_t dv, act_t dp, const float *dy)
{
    int T = o->T;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)o->B * o->NH * T * T * o->HD >= MODEL_PAR_MIN)
    for (int b = 0; b < o->B; b++)
        for (int kh = 0; kh < o->NKV; kh++) {
            size_t so = (size_t)omp_get_thread_num() * T * T;
            kv_head16_backward(o, b, kh, dq, dk, dv, act_at(dp, so), act_at(o->att, so), dy);
        }
}

// ----------------------------------------------------------------------------
// workspaces

/* whether a linear layer (in -> out features, over n positions) reads
 * its input only from the bf16 copy: its forward product and its weight
 * gradient both in bf16 */
static bool input16_only(int n, int in, int out) { return takes(n, out, in) && takes(out, in, n); }

/* the same for its output's gradient: the input gradient's product and
 * the weight gradient both in bf16 */
static bool dout16_only(int n, int in, int out) { return takes(n, in, out) && takes(out, in, n); }

/* the array of t that p points from, resized to n floats */
static void resize(model_array_t *t, float **p, size_t n)
{
    for (int i = 0; i < MODEL_ACTS_ARRAYS; i++)
        if (t[i].p == p) t[i].n = n;
}

/* model_acts_arrays' fp32 arrays less those only matmuls that take
 * their copies read (ln1, ln2, h, dg, du; every layer's y but one
 * layer's), then the copies, each from a 64-byte boundary (pointed into
 * base when not NULL); the floats of both */
size_t model_bf16_layout(model_t *m, float *base, int B, int T)
{
    const model_config_t *c = &m->cfg;
    size_t N = (size_t)B * T, L = m->recompute ? 1 : c->L, C = c->C, QD = (size_t)c->NH * c->HD;
    size_t KD = (size_t)c->NKV * c->HD, FF = c->FF, threads = omp_get_max_threads();
    size_t chunk = model_logits_chunk(m, (int)N);
    model_acts_t *a = &m->a;
    model_grad_acts_t *g = &m->ga;
    model_array_t t[MODEL_ACTS_ARRAYS];
    model_acts_arrays(m, B, T, t);
    int n = (int)N;
    if (input16_only(n, c->C, (int)QD) && input16_only(n, c->C, (int)KD)) resize(t, &a->ln1, 0);
    if (input16_only(n, c->C, c->FF)) resize(t, &a->ln2, 0);
    if (input16_only(n, c->FF, c->C)) resize(t, &a->h, 0);
    a->y_all = !input16_only(n, (int)QD, c->C);
    if (!a->y_all) resize(t, &a->y, N * QD);
    if (dout16_only(n, c->C, c->FF)) resize(t, &g->dg, 0), resize(t, &g->du, 0);
    size_t total = model_arrays_place(t, MODEL_ACTS_ARRAYS, base, 0);
    /* the copies' pointers only where they are placed (m->bf16 is made
     * by the first forward pass; a count needs none) */
    static acts16_t a16_none;
    static grad_acts16_t g16_none;
    acts16_t *a16 = base ? &m->bf16->a : &a16_none;
    grad_acts16_t *g16 = base ? &m->bf16->ga : &g16_none;
    struct {
        uint16_t **p;
        size_t n;
    } t16[] = {
        {&a16->ln1, L * N * C},      {&a16->y, L * N * QD}, {&a16->ln2, L * N * C}, {&a16->h, L * N * FF},
        {&a16->lnf, N * C},          {&g16->dx, N * C},     {&g16->dq, N * QD},     {&g16->dk, N * KD},
        {&g16->dv, N * KD},          {&g16->dg, N * FF},    {&g16->du, N * FF},     {&g16->logits, chunk * c->V},
        {&a16->q, L * N * QD},       {&a16->k, L * N * KD}, {&a16->v, L * N * KD},  {&a16->att, threads * T * T},
        {&g16->dp, threads * T * T},
    };
    for (size_t i = 0; i < sizeof t16 / sizeof *t16; i++) {
        if (base) *t16[i].p = (uint16_t *)(base + total);
        total += (t16[i].n + 31) / 32 * 16;
    }
    return total;
}

// ----------------------------------------------------------------------------
// the model

static const float *lm_weight(const model_t *m) { return m->cfg.tie ? m->w.wte : m->w.lm; }
static float *lm_grad(model_t *m) { return m->cfg.tie ? m->dw.wte : m->dw.lm; }

static void lm_head16_forward(model_t *m, int N, float *logp, float *logits)
{
    int C = m->cfg.C, V = m->cfg.V, chunk = (int)model_logits_chunk(m, N);
    act_t lnf = {m->a.lnf, m->bf16->a.lnf};
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        float *lg = logits ? logits + (size_t)r0 * V : m->ga.logits;
        matmul16(fp32(lg), act_at(lnf, (size_t)r0 * C), lm_weight(m), NULL, n, C, V, false);
        model_logp_rows(m, lg, r0, n, logp);
        m->logits_kept = !logits, m->logits_r0 = r0;
    }
}

static void lm_head16_backward(model_t *m, int N, const float *dlogp)
{
    int C = m->cfg.C, V = m->cfg.V, chunk = (int)model_logits_chunk(m, N);
    act_t lnf_all = {m->a.lnf, m->bf16->a.lnf}, lg = {m->ga.logits, m->bf16->ga.logits};
    for (int r0 = (N - 1) / chunk * chunk; r0 >= 0; r0 -= chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        act_t lnf = act_at(lnf_all, (size_t)r0 * C);
        if (model_logits_recompute(m, r0)) matmul16(fp32(lg.f), lnf, lm_weight(m), NULL, n, C, V, false);
        model_logp_rows_backward(m, lg.f, r0, n, dlogp);
        round16(lg.f16, lg.f, (size_t)n * V);
        matmul16_backward(m->ga.dln + (size_t)r0 * C, lm_grad(m), NULL, lg, lnf, lm_weight(m), n, C, V, false);
    }
}

/* layer l's activations as the matmuls take them: forward.c's slices
 * (f), paired with layer l's copies */
typedef struct {
    model_layer_acts_t f;
    act_t ln1, q, k, v, y, ln2, h;
} layer16_t;

static layer16_t layer16(const model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    const acts16_t *a16 = &m->bf16->a;
    size_t N = (size_t)m->B * m->T, C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF;
    size_t k = m->a.one_layer ? 0 : (size_t)l; /* the copies' slot */
    model_layer_acts_t f = model_layer_acts(&m->a, c, N, l);
    return (layer16_t){
        .f = f,
        .ln1 = {f.ln1, a16->ln1 + k * N * C},
        .q = {f.q, a16->q + k * N * QD},
        .k = {f.k, a16->k + k * N * KD},
        .v = {f.v, a16->v + k * N * KD},
        .y = {f.y, a16->y + k * N * QD},
        .ln2 = {f.ln2, a16->ln2 + k * N * C},
        .h = {f.h, a16->h + k * N * FF},
    };
}

/* forward.c's attn_of with the copies */
static attn16_t attn16_of(const model_t *m, const layer16_t *la)
{
    const model_config_t *c = &m->cfg;
    act_t att = {m->a.att, m->bf16->a.att};
    attn16_t o = {la->q, la->k, la->v, att, m->start, m->prefix, m->B, m->T, c->NH, c->NKV, c->HD};
    return o;
}

/* RoPE on x (N, H, HD) (dir -1: its backward), rounded into x.f16 */
static void rope16(const model_t *m, act_t x, int N, int H, float dir)
{
    if (dir > 0) model_rope(x.f, m->pos, m->rope_cos, m->rope_sin, N, H, m->cfg.HD);
    else model_rope_backward(x.f, m->pos, m->rope_cos, m->rope_sin, N, H, m->cfg.HD);
    round16(x.f16, x.f, (size_t)N * H * m->cfg.HD);
}

/* forward.c's layer_forward with the copies */
static void layer16_forward(model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C, QD = c->NH * c->HD, KD = c->NKV * c->HD, FF = c->FF, HD = c->HD;
    model_layer_weights_t w = model_layer_weights(&m->w, c, l);
    layer16_t a = layer16(m, l);
    // attention: xm = x + attention(RoPE(q), RoPE(k), v) . wo^T (+ bo)
    rmsnorm16(a.ln1, a.f.r1, a.f.x, w.ln1, N, C, c->rms_eps);
    matmul16(fp32(a.f.qp), a.ln1, w.wq, w.bq, N, C, QD, false);
    matmul16(fp32(a.f.kp), a.ln1, w.wk, w.bk, N, C, KD, false);
    matmul16(a.v, a.ln1, w.wv, w.bv, N, C, KD, false);
    if (c->type == MODEL_QWEN3) {
        model_rmsnorm(a.f.q, a.f.rq, a.f.qp, w.qn, N * c->NH, HD, c->rms_eps);
        model_rmsnorm(a.f.k, a.f.rk, a.f.kp, w.kn, N * c->NKV, HD, c->rms_eps);
    }
    rope16(m, a.q, N, c->NH, 1.0f);
    rope16(m, a.k, N, c->NKV, 1.0f);
    attn16_t ao = attn16_of(m, &a);
    attention16_forward(&ao, a.y);
    model_copy(a.f.xm, a.f.x, (size_t)N * C);
    matmul16(fp32(a.f.xm), a.y, w.wo, w.bo, N, QD, C, true);
    // MLP: xn = xm + (silu(g) * u) . wd^T
    rmsnorm16(a.ln2, a.f.r2, a.f.xm, w.ln2, N, C, c->rms_eps);
    matmul16(fp32(a.f.g), a.ln2, w.wg, NULL, N, C, FF, false);
    matmul16(fp32(a.f.u), a.ln2, w.wu, NULL, N, C, FF, false);
    swiglu16(a.h, a.f.g, a.f.u, (size_t)N * FF);
    model_copy(a.f.xn, a.f.xm, (size_t)N * C);
    matmul16(fp32(a.f.xn), a.h, w.wd, NULL, N, FF, C, true);
}

/* forward.c's layer_backward with the copies */
static void layer16_backward(model_t *m, int l)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C, QD = c->NH * c->HD, KD = c->NKV * c->HD, FF = c->FF, HD = c->HD;
    model_layer_weights_t w = model_layer_weights(&m->w, c, l), dw = model_layer_weights(&m->dw, c, l);
    layer16_t a = layer16(m, l);
    model_grad_acts_t *ga = &m->ga;
    grad_acts16_t *g16 = &m->bf16->ga;
    act_t dx = {ga->dx, g16->dx}, dg = {ga->dg, g16->dg}, du = {ga->du, g16->du}, dv = {ga->dv, g16->dv};
    // MLP: xn = xm + (silu(g) * u) . wd^T; h.f computed again where wd's
    // weight gradient reads it (the product in fp32)
    if (!takes(C, FF, N)) model_swiglu(a.h.f, a.f.g, a.f.u, (size_t)N * FF);
    matmul16_backward(ga->dh, dw.wd, NULL, dx, a.h, w.wd, N, FF, C, false);
    swiglu16_backward(dg, du, ga->dh, a.f.g, a.f.u, (size_t)N * FF);
    matmul16_backward(ga->dln, dw.wg, NULL, dg, a.ln2, w.wg, N, C, FF, false);
    matmul16_backward(ga->dln, dw.wu, NULL, du, a.ln2, w.wu, N, C, FF, true);
    rmsnorm16_backward(dx, dw.ln2, ga->part, ga->dln, a.f.xm, w.ln2, a.f.r2, N, C, true);
    // attention: xm = x + y . wo^T (+ bo); where y.f is one layer's
    // scratch it holds another layer's now (unless this layer's forward
    // just ran again), and wo's gradient reads y.f16
    act_t y = {m->a.y_all || m->a.one_layer ? a.y.f : NULL, a.y.f16};
    matmul16_backward(ga->dy, dw.wo, dw.bo, dx, y, w.wo, N, QD, C, false);
    attn16_t ao = attn16_of(m, &a);
    attention16_backward(&ao, ga->dq, ga->dk, dv, (act_t){ga->dp, g16->dp}, ga->dy);
    /* the copies of the gradients wq and wk take come from the last step
     * before them: RoPE's, or Qwen3's norms' (into dy, free again, and
     * dk2) */
    act_t dq = {ga->dq, g16->dq}, dk = {ga->dk, g16->dk};
    if (c->type == MODEL_QWEN3) {
        model_rope_backward(ga->dq, m->pos, m->rope_cos, m->rope_sin, N, c->NH, HD);
        model_rope_backward(ga->dk, m->pos, m->rope_cos, m->rope_sin, N, c->NKV, HD);
        dq = (act_t){ga->dy, g16->dq}, dk = (act_t){ga->dk2, g16->dk};
        rmsnorm16_backward(dq, dw.qn, ga->part, ga->dq, a.f.qp, w.qn, a.f.rq, N * c->NH, HD, false);
        rmsnorm16_backward(dk, dw.kn, ga->part, ga->dk, a.f.kp, w.kn, a.f.rk, N * c->NKV, HD, false);
    } else {
        rope16(m, dq, N, c->NH, -1.0f);
        rope16(m, dk, N, c->NKV, -1.0f);
    }
    matmul16_backward(ga->dln, dw.wq, dw.bq, dq, a.ln1, w.wq, N, C, QD, false);
    matmul16_backward(ga->dln, dw.wk, dw.bk, dk, a.ln1, w.wk, N, C, KD, true);
    matmul16_backward(ga->dln, dw.wv, dw.bv, dv, a.ln1, w.wv, N, C, KD, true);
    rmsnorm16_backward(dx, dw.ln1, ga->part, ga->dln, a.f.x, w.ln1, a.f.r1, N, C, true);
}

int model_bf16_forward(model_t *m, const int *tokens, const int *targets, const int *start, int B, int T,
                       float temperature, float *logp, float *logits)
{
    const model_config_t *c = &m->cfg;
    if (!m->bf16 && !(m->bf16 = calloc(1, sizeof *m->bf16))) {
        fprintf(stderr, "model: out of memory for a batch of %d x %d\n", B, T);
        return -1;
    }
    if (model_set_batch(m, model_bf16_layout, tokens, targets, start, B, T, temperature)) return -1;
    int N = B * T, C = c->C;
    model_embed(m);
    for (int l = 0; l < c->L; l++) layer16_forward(m, l);
    rmsnorm16((act_t){m->a.lnf, m->bf16->a.lnf}, m->a.rf, m->a.x + (size_t)c->L * N * C, m->w.lnf, N, C, c->rms_eps);
    lm_head16_forward(m, N, logp, logits);
    return 0;
}

void model_bf16_backward(model_t *m, const float *dlogp)
{
    const model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->C;
    model_grad_acts_t *ga = &m->ga;
    lm_head16_backward(m, N, dlogp);
    rmsnorm16_backward((act_t){ga->dx, m->bf16->ga.dx}, m->dw.lnf, ga->part, ga->dln, m->a.x + (size_t)c->L * N * C,
                       m->w.lnf, m->a.rf, N, C, false);
    for (int l = c->L - 1; l >= 0; l--) {
        if (model_layer_again(m, l)) layer16_forward(m, l);
        layer16_backward(m, l);
    }
    model_embed_backward(m);
}
