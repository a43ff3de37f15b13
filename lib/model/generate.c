/* Sampling L completions of each of Q prompts with a key/value cache. One
 * step function runs any set of rows, each a (cache slot, position) pair:
 * a prefill is the P rows of a prompt's first slot, a decode step one row
 * per live completion of every prompt. The prompt's keys and values stay
 * in its first slot only and its completions read them there, so a prompt
 * runs once and is held once whatever L is. */
#include "model/model_impl.h"
#include "sampling/rng.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int S, maxT;            /* slots (completions) and positions per slot */
    int L;                  /* completions per prompt: slots q*L .. q*L+L-1 */
    const int *plen;        /* (Q) prompt lengths */
    float *kc, *vc;         // (L, S, maxT, KD)
    float *x;               // (R, C) residual
    float *ln;              // (R, C)
    float *q;               // (R, NH*HD)
    float *k, *v;           // (R, KD)
    float *y;               // (R, NH*HD)
    float *g, *u;           // (R, FF)
    float *r;               // (R * NH) rstd scratch
    float *logits;          // (S, V)
    int *tok, *slot, *pos;  // (R)
    model_linear_fn linear; /* the backend's linear layers, where no packed copy is */
} gen_ws_t;

static size_t ws_layout(gen_ws_t *ws, float *base, const model_config_t *c, int R)
{
    size_t KD = (size_t)c->NKV * c->HD, QD = (size_t)c->NH * c->HD, C = c->C, FF = c->FF;
    size_t cache = (size_t)c->L * ws->S * ws->maxT * KD;
    struct {
        float **p;
        size_t n;
    } t[] = {
        {&ws->kc, cache},
        {&ws->vc, cache},
        {&ws->x, R * C},
        {&ws->ln, R * C},
        {&ws->q, R * QD},
        {&ws->k, R * KD},
        {&ws->v, R * KD},
        {&ws->y, R * QD},
        {&ws->g, R * FF},
        {&ws->u, R * FF},
        {&ws->r, R * (size_t)c->NH},
        {&ws->logits, (size_t)ws->S * c->V},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (base) *t[i].p = base + total;
        total += t[i].n;
    }
    return total;
}

/* the rep query heads that share one key/value head against n cached
 * keys and values: n1 rows of the prompt's slot (shared by its L
 * completions, so it stays in cache from one completion to the next),
 * then the rest from the completion's own slot; rows are KD apart. Each
 * cached row is read once for the group: the cache, not the arithmetic,
 * bounds a decode step. q and y hold the rep heads HD apart; p (rep, n) is
 * scratch. Built for AVX-512 and AVX2 too, picked at run time: the
 * project's baseline (x86-64-v2) has 4-wide vectors only */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
attend_group(float *y, float *p, const float *q, const float *k1, const float *v1, int n1, const float *k2,
             const float *v2, int n, int rep, int KD, int HD, float scale)
{
    for (int t = 0; t < n; t++) {
        const float *kr = t < n1 ? k1 + (size_t)t * KD : k2 + (size_t)(t - n1) * KD;
        for (int h = 0; h < rep; h++) {
            const float *qr = q + (size_t)h * HD;
            float s = 0;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < HD; i++) s += qr[i] * kr[i];
            p[(size_t)h * n + t] = s * scale;
        }
    }
    for (int h = 0; h < rep; h++) model_softmax_row(p + (size_t)h * n, n, 1.0f);
    memset(y, 0, (size_t)rep * HD * sizeof(float));
    for (int t = 0; t < n; t++) {
        const float *vr = t < n1 ? v1 + (size_t)t * KD : v2 + (size_t)(t - n1) * KD;
        for (int h = 0; h < rep; h++) {
            float pt = p[(size_t)h * n + t], *yr = y + (size_t)h * HD;
#pragma omp simd
            for (int i = 0; i < HD; i++) yr[i] += pt * vr[i];
        }
    }
}

/* lane j of the result: the sum of the lanes of a[j] */
__attribute__((target("avx512f"))) static inline __m512 sum16(const __m512 *a)
{
    __m512 b[8], c[4], d[2];
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xee));
    for (int i = 0; i < 2; i++)
        d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88), _mm512_shuffle_f32x4(d[0], d[1], 0xdd));
}

/* attend_group for HD = 16 NC with AVX-512: q's NC vectors in registers,
 * scores 16 keys at a time (each key's products summed in a vector, the
 * 16 vectors folded into one), then the values weighted into NC sums per
 * head, also in registers */
#define ATTEND16(NAME, NC)                                                                                             \
    __attribute__((target("avx512f,fma"))) static void NAME(float *y, float *p, const float *q, const float *k1,       \
                                                            const float *v1, int n1, const float *k2, const float *v2, \
                                                            int n, int rep, int KD, int HD, float scale)               \
    {                                                                                                                  \
        (void)HD;                                                                                                      \
        for (int h = 0; h < rep; h++) {                                                                                \
            __m512 qc[NC], acc[16];                                                                                    \
            for (int c = 0; c < NC; c++) qc[c] = _mm512_loadu_ps(q + (size_t)h * 16 * NC + 16 * c);                    \
            for (int t0 = 0; t0 < n; t0 += 16) {                                                                       \
                int nk = n - t0 < 16 ? n - t0 : 16;                                                                    \
                _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++)                                                  \
                {                                                                                                      \
                    /* a short block repeats its last key and keeps only its own scores */                             \
                    int t = t0 + (j < nk ? j : nk - 1);                                                                \
                    const float *kr = t < n1 ? k1 + (size_t)t * KD : k2 + (size_t)(t - n1) * KD;                       \
                    __m512 s = _mm512_mul_ps(qc[0], _mm512_loadu_ps(kr));                                              \
                    _Pragma("GCC unroll 8") for (int c = 1; c < NC; c++) s =                                           \
                        _mm512_fmadd_ps(qc[c], _mm512_loadu_ps(kr + 16 * c), s);                                       \
                    acc[j] = s;                                                                                        \
                }                                                                                                      \
                _mm512_mask_storeu_ps(p + (size_t)h * n + t0, (__mmask16)((1u << nk) - 1),                             \
                                      _mm512_mul_ps(sum16(acc), _mm512_set1_ps(scale)));                               \
            }                                                                                                          \
            model_softmax_row(p + (size_t)h * n, n, 1.0f);                                                             \
        }                                                                                                              \
        /* the heads two at a time: 2 NC independent sums hide the latency of each */                                  \
        for (int h = 0; h < rep; h += 2) {                                                                             \
            int h2 = h + 1 < rep ? h + 1 : h;                                                                          \
            const float *pa = p + (size_t)h * n, *pb = p + (size_t)h2 * n;                                             \
            __m512 oa[NC], ob[NC];                                                                                     \
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) oa[c] = ob[c] = _mm512_setzero_ps();                  \
            for (int t = 0; t < n; t++) {                                                                              \
                const float *vr = t < n1 ? v1 + (size_t)t * KD : v2 + (size_t)(t - n1) * KD;                           \
                __m512 ta = _mm512_set1_ps(pa[t]), tb = _mm512_set1_ps(pb[t]);                                         \
                _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++)                                                   \
                {                                                                                                      \
                    __m512 vc = _mm512_loadu_ps(vr + 16 * c);                                                          \
                    oa[c] = _mm512_fmadd_ps(ta, vc, oa[c]);                                                            \
                    ob[c] = _mm512_fmadd_ps(tb, vc, ob[c]);                                                            \
                }                                                                                                      \
            }                                                                                                          \
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++)                                                       \
            {                                                                                                          \
                _mm512_storeu_ps(y + (size_t)h * 16 * NC + 16 * c, oa[c]);                                             \
                _mm512_storeu_ps(y + (size_t)h2 * 16 * NC + 16 * c, ob[c]);                                            \
            }                                                                                                          \
        }                                                                                                              \
    }
ATTEND16(attend_group64, 4)
ATTEND16(attend_group128, 8)

typedef void attend_fn(float *, float *, const float *, const float *, const float *, int, const float *, const float *,
                       int, int, int, int, float);

/* the kernel for head dimension HD on this CPU */
static attend_fn *attend_pick(int HD)
{
    if (!__builtin_cpu_supports("avx512f")) return attend_group;
    return HD == 64 ? attend_group64 : HD == 128 ? attend_group128 : attend_group;
}

/* attention of rows [r0, r0 + R) over positions [0, pos]: the prompt's
 * part from the prompt's first slot, the completion's part from its own
 * slot */
static void cached_attention(gen_ws_t *ws, const model_config_t *c, int l, int r0, int R)
{
    int NH = c->NH, NKV = c->NKV, HD = c->HD, KD = NKV * HD, rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HD);
    attend_fn *attend = attend_pick(HD);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)R * NH * ws->maxT * HD >= 32 * MODEL_PAR_MIN)
    for (int r = r0; r < r0 + R; r++)
        for (int kh = 0; kh < NKV; kh++) {
            int s = ws->slot[r], s0 = s - s % ws->L, P = ws->plen[s / ws->L], n = ws->pos[r] + 1;
            int n1 = n < P ? n : P;
            float p[rep * n];
            size_t b1 = (((size_t)l * ws->S + s0) * ws->maxT) * KD + (size_t)kh * HD;
            size_t b2 = (((size_t)l * ws->S + s) * ws->maxT + P) * KD + (size_t)kh * HD;
            size_t qo = (size_t)r * NH * HD + (size_t)kh * rep * HD;
            attend(ws->y + qo, p, ws->q + qo, ws->kc + b1, ws->vc + b1, n1, ws->kc + b2, ws->vc + b2, n, rep, KD, HD,
                   scale);
        }
}

/* the linear layers of a decode, each laid out once for
 * model_gemm_packed: per layer q, k, v, o, gate, up, down, then the lm
 * head */
enum { PK_Q, PK_K, PK_V, PK_O, PK_G, PK_U, PK_D, PK_LAYER };

/* Weights past this many bytes stay where they are: the packed copy lives
 * for one generate call beside the weights. Up to here it pays: a round of
 * SmolLM2-135M (538 MB packed) decoded twice as fast packed as in place
 * (bench_real); a 0.5B model's copy (2.5 GB) would crowd the learner's
 * memory on a CPU node. */
#define PACK_MAX ((size_t)1 << 30)
static size_t pack_max = PACK_MAX;

void model_pack_limit(size_t bytes) { pack_max = bytes ? bytes : PACK_MAX; }

/* the bytes pack_weights lays the matrices out in */
static size_t packed_bytes(const model_config_t *c)
{
    size_t C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF;
    return model_packed_bytes(c->V, c->C) +
           c->L * (model_packed_bytes(QD, C) + 2 * model_packed_bytes(KD, C) + model_packed_bytes(C, QD) +
                   2 * model_packed_bytes(FF, C) + model_packed_bytes(C, FF));
}

/* The model's weights packed (c->L * PK_LAYER + 1 matrices), or NULL:
 * where its backend does not decode by them (cpu-bf16: its products stay
 * in bf16), past PACK_MAX, or out of memory */
static model_packed_t *pack_weights(const model_t *m, bool packs)
{
    const model_config_t *c = &m->cfg;
    const model_weights_t *w = &m->w;
    size_t C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD, FF = c->FF;
    if (!packs || packed_bytes(c) > pack_max) return NULL;
    int n = c->L * PK_LAYER + 1;
    model_packed_t *p = calloc(n, sizeof *p);
    if (!p) return NULL;
    int rc = 0;
    for (int l = 0; l < c->L; l++) {
        model_packed_t *pl = p + l * PK_LAYER;
        rc |= model_pack(pl + PK_Q, w->wq + l * QD * C, QD, C);
        rc |= model_pack(pl + PK_K, w->wk + l * KD * C, KD, C);
        rc |= model_pack(pl + PK_V, w->wv + l * KD * C, KD, C);
        rc |= model_pack(pl + PK_O, w->wo + l * C * QD, C, QD);
        rc |= model_pack(pl + PK_G, w->wg + l * FF * C, FF, C);
        rc |= model_pack(pl + PK_U, w->wu + l * FF * C, FF, C);
        rc |= model_pack(pl + PK_D, w->wd + l * C * FF, C, FF);
    }
    rc |= model_pack(p + n - 1, c->tie ? w->wte : w->lm, c->V, c->C);
    if (rc) {
        for (int i = 0; i < n; i++) model_packed_free(p + i);
        free(p);
        return NULL;
    }
    return p;
}

/* matrix i (PK_Q ... PK_D) of layer l in pk, or NULL without pk */
static const model_packed_t *packed_of(const model_packed_t *pk, int l, int i)
{
    return pk ? pk + l * PK_LAYER + i : NULL;
}

static void packed_free(const model_t *m, model_packed_t *p)
{
    for (int i = 0; p && i < m->cfg.L * PK_LAYER + 1; i++) model_packed_free(p + i);
    free(p);
}

/* out (R, OUT) = in (R, IN) W^T (+ bias), + out where acc: by the packed
 * copy p where there is one, else by W in place (the backend's own
 * linear layer) */
static void linear(const gen_ws_t *ws, const model_packed_t *p, float *out, const float *in, const float *W,
                   const float *bias, int R, int IN, int OUT, bool acc)
{
    if (p) model_gemm_packed(R, in, IN, p, bias, acc, out, OUT);
    else ws->linear(out, in, W, bias, R, IN, OUT, acc);
}

/* runs rows [r0, r0 + R) through the model, by the packed weights pk
 * where not NULL; logits of nlog rows land in ws->logits from row r0 on:
 * of rows r0 + lrows[j] where lrows is not NULL, else of the last nlog.
 * A call touches its own rows only, so threads may run disjoint ranges
 * at once. */
static void step(model_t *m, gen_ws_t *ws, const model_packed_t *pk, int r0, int R, int nlog, const int *lrows)
{
    const model_config_t *c = &m->cfg;
    const model_weights_t *w = &m->w;
    int C = c->C, HD = c->HD, QD = c->NH * HD, KD = c->NKV * HD, FF = c->FF;
    float *x = ws->x + (size_t)r0 * C, *ln = ws->ln + (size_t)r0 * C, *rs = ws->r + (size_t)r0 * c->NH;
    float *q = ws->q + (size_t)r0 * QD, *k = ws->k + (size_t)r0 * KD, *v = ws->v + (size_t)r0 * KD;
    float *y = ws->y + (size_t)r0 * QD, *g = ws->g + (size_t)r0 * FF, *u = ws->u + (size_t)r0 * FF;
    const int *slot = ws->slot + r0, *pos = ws->pos + r0;
    for (int r = 0; r < R; r++) memcpy(x + (size_t)r * C, w->wte + (size_t)ws->tok[r0 + r] * C, C * sizeof(float));
    for (int l = 0; l < c->L; l++) {
        model_rmsnorm(ln, rs, x, w->ln1 + (size_t)l * C, R, C, c->rms_eps);
        linear(ws, packed_of(pk, l, PK_Q), q, ln, w->wq + (size_t)l * QD * C, w->bq ? w->bq + (size_t)l * QD : NULL, R,
               C, QD, false);
        linear(ws, packed_of(pk, l, PK_K), k, ln, w->wk + (size_t)l * KD * C, w->bk ? w->bk + (size_t)l * KD : NULL, R,
               C, KD, false);
        linear(ws, packed_of(pk, l, PK_V), v, ln, w->wv + (size_t)l * KD * C, w->bv ? w->bv + (size_t)l * KD : NULL, R,
               C, KD, false);
        if (c->type == MODEL_QWEN3) {
            /* y is free until the attention: it holds the pre-norm q */
            memcpy(y, q, (size_t)R * QD * sizeof(float));
            model_rmsnorm(q, rs, y, w->qn + (size_t)l * HD, R * c->NH, HD, c->rms_eps);
            memcpy(y, k, (size_t)R * KD * sizeof(float));
            model_rmsnorm(k, rs, y, w->kn + (size_t)l * HD, R * c->NKV, HD, c->rms_eps);
        }
        model_rope(q, pos, m->rope_cos, m->rope_sin, R, c->NH, HD);
        model_rope(k, pos, m->rope_cos, m->rope_sin, R, c->NKV, HD);
        for (int r = 0; r < R; r++) {
            size_t at = (((size_t)l * ws->S + slot[r]) * ws->maxT + pos[r]) * KD;
            memcpy(ws->kc + at, k + (size_t)r * KD, KD * sizeof(float));
            memcpy(ws->vc + at, v + (size_t)r * KD, KD * sizeof(float));
        }
        cached_attention(ws, c, l, r0, R);
        linear(ws, packed_of(pk, l, PK_O), x, y, w->wo + (size_t)l * C * QD, w->bo ? w->bo + (size_t)l * C : NULL, R,
               QD, C, true);
        model_rmsnorm(ln, rs, x, w->ln2 + (size_t)l * C, R, C, c->rms_eps);
        linear(ws, packed_of(pk, l, PK_G), g, ln, w->wg + (size_t)l * FF * C, NULL, R, C, FF, false);
        linear(ws, packed_of(pk, l, PK_U), u, ln, w->wu + (size_t)l * FF * C, NULL, R, C, FF, false);
        model_swiglu(g, g, u, (size_t)R * FF);
        linear(ws, packed_of(pk, l, PK_D), x, g, w->wd + (size_t)l * C * FF, NULL, R, FF, C, true);
    }
    if (lrows)
        for (int j = 0; j < nlog; j++)
            model_rmsnorm(ln + (size_t)j * C, rs, x + (size_t)lrows[j] * C, w->lnf, 1, C, c->rms_eps);
    else model_rmsnorm(ln, rs, x + (size_t)(R - nlog) * C, w->lnf, nlog, C, c->rms_eps);
    linear(ws, pk ? pk + c->L * PK_LAYER : NULL, ws->logits + (size_t)r0 * c->V, ln, c->tie ? w->wte : w->lm, NULL,
           nlog, C, c->V, false);
}

static bool is_eos(const model_config_t *c, int tok)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == tok) return true;
    return false;
}

/* L * M uniforms per prompt from its seed: token t of slot s draws with
 * u[s * M + t]. The numbers of cuRAND's Philox stream (rng.h), from the
 * own implementation: seeding cuRAND's host generator took 4.6 ms, a
 * request's whole decode step a few. */
static void draw_uniforms(const uint64_t *seeds, int Q, int L, int M, float *u)
{
    for (int q = 0; q < Q; q++) rng_philox_uniform(seeds[q], 0, u + (size_t)q * L * M, (size_t)L * M);
}

/* rows a prefill step takes at most, several prompts together */
#define PREFILL_ROWS 512

/* prefill each prompt into its first slot, whose keys and values its L
 * completions share, as many prompts in a step as R rows hold; then each
 * prompt's last logits into its L slots' rows. Last prompts first: a step
 * leaves its n prompts' logits in rows [0, n), below the slots of every
 * prompt after them. lrows: scratch for Q ints */
static void prefill(model_t *m, gen_ws_t *ws, const model_packed_t *pk, const int *const *prompts, int Q, int R,
                    int *lrows)
{
    int L = ws->L, V = m->cfg.V;
    for (int q1 = Q; q1 > 0;) {
        int q0 = q1 - 1, rows = ws->plen[q0];
        while (q0 > 0 && rows + ws->plen[q0 - 1] <= R) rows += ws->plen[--q0];
        for (int q = q0, r = 0; q < q1; q++) {
            for (int i = 0; i < ws->plen[q]; i++, r++) {
                ws->tok[r] = prompts[q][i];
                ws->slot[r] = q * L;
                ws->pos[r] = i;
            }
            lrows[q - q0] = r - 1;
        }
        step(m, ws, pk, 0, rows, q1 - q0, lrows);
        for (int j = q1 - q0 - 1; j >= 0; j--)
            for (int s = (q0 + j) * L + L - 1; s >= (q0 + j) * L; s--)
                if (s != j) memcpy(ws->logits + (size_t)s * V, ws->logits + (size_t)j * V, V * sizeof(float));
        q1 = q0;
    }
}

/* The slots still live after token t (not at M tokens, eos or a stop),
 * moved to the front of live, each with its next row: token t at its
 * position in its own slot. How many. */
static int next_rows(const model_config_t *c, gen_ws_t *ws, const model_gen_params_t *gp, int *live, int nlive, int t,
                     int M, const int *tokens)
{
    int keep = 0;
    for (int i = 0; i < nlive; i++) {
        int s = live[i], tok = tokens[(size_t)s * M + t];
        bool done =
            t + 1 == M || is_eos(c, tok) || (gp->stop && gp->stop(gp->stop_ctx, s, tokens + (size_t)s * M, t + 1));
        if (done) continue;
        live[keep] = s;
        ws->tok[keep] = tok;
        ws->slot[keep] = s;
        ws->pos[keep] = ws->plen[s / ws->L] + t;
        keep++;
    }
    return keep;
}

/* rows of a workspace: a decode step's S, the longest prompt, and
 * several prompts together up to PREFILL_ROWS */
static int ws_rows(const int *prompt_lens, int Q, int S, int maxP)
{
    int sumP = 0, R = maxP > S ? maxP : S;
    for (int q = 0; q < Q; q++) sumP += prompt_lens[q];
    int together = sumP < PREFILL_ROWS ? sumP : PREFILL_ROWS;
    return together > R ? together : R;
}

/* what a decode writes: (S, M) tokens and log-probs, (S) lengths */
typedef struct {
    int *tokens;
    float *logp;
    int *lengths;
} gen_out_t;

/* one thread's part of decode (id of nt; nt 1: every row): sampling and
 * stepping its share of the live rows, token by token; *nlive is the
 * team's. Its barrier and single bind to the caller's parallel region,
 * or to this thread alone outside one */
static void decode_part(model_t *m, gen_ws_t *ws, const model_packed_t *pk, const model_gen_params_t *gp,
                        const float *u, int *live, int *nlive, unsigned char *scratch, size_t sbytes, gen_out_t o,
                        int id, int nt)
{
    const model_config_t *c = &m->cfg;
    int M = gp->max_new, lo, hi;
    for (int t = 0; *nlive > 0; t++) {
        model_share(*nlive, id, nt, &lo, &hi);
#pragma omp parallel for if (nt == 1 && (size_t)*nlive * c->V >= 4 * MODEL_PAR_MIN)
        for (int i = lo; i < hi; i++) {
            int s = live[i];
            float lp;
            /* one of the two thread numbers is 0: the outer team's or the inner one's */
            unsigned char *sc = scratch + sbytes * (id + omp_get_thread_num());
            int tok = sample_token(ws->logits + (size_t)i * c->V, c->V, &gp->sample, u[(size_t)s * M + t], sc, &lp);
            o.tokens[(size_t)s * M + t] = tok;
            o.logp[(size_t)s * M + t] = lp;
            o.lengths[s] = t + 1;
        }
#pragma omp barrier
#pragma omp single
        *nlive = next_rows(c, ws, gp, live, *nlive, t, M, o.tokens);
        model_share(*nlive, id, nt, &lo, &hi);
        if (lo < hi) step(m, ws, pk, lo, hi - lo, hi - lo, NULL);
    }
}

/* Samples every slot token by token from the prefilled logits, with the
 * uniforms u (S, M), until each is done. With packed weights each thread
 * runs its share of the live rows through the whole model, and the
 * threads meet twice a token: after sampling, and after one of them has
 * gathered the next rows. Without, this thread steps every row and each
 * kernel splits its own work among the threads: outside any parallel
 * region, so that its teams come from the pool (inside one, even an
 * inactive one, libgomp makes each nested team of new threads). live:
 * scratch for S ints; scratch: sbytes of sampling scratch per thread */
static void decode(model_t *m, gen_ws_t *ws, const model_packed_t *pk, const model_gen_params_t *gp, const float *u,
                   int *live, unsigned char *scratch, size_t sbytes, gen_out_t o)
{
    int nlive = ws->S;
    for (int s = 0; s < ws->S; s++) {
        live[s] = s;
        o.lengths[s] = 0;
    }
    if (!pk) {
        decode_part(m, ws, pk, gp, u, live, &nlive, scratch, sbytes, o, 0, 1);
        return;
    }
#pragma omp parallel
    decode_part(m, ws, pk, gp, u, live, &nlive, scratch, sbytes, o, omp_get_thread_num(), omp_get_num_threads());
}

size_t model_generate_bytes(const model_t *m, int Q, int L, int maxP, int max_new, bool packed)
{
    const model_config_t *c = &m->cfg;
    int S = Q * L, R = S > maxP ? S : maxP, together = Q * maxP < PREFILL_ROWS ? Q * maxP : PREFILL_ROWS;
    R = together > R ? together : R; /* ws_rows with every prompt maxP long */
    gen_ws_t ws = {.S = S, .maxT = maxP + max_new};
    size_t bytes = ws_layout(&ws, NULL, c, R) * sizeof(float) + (size_t)S * max_new * sizeof(float) +
                   (3 * (size_t)R + S) * sizeof(int) + sample_scratch_bytes(c->V) * omp_get_max_threads() +
                   2 * (size_t)(maxP + max_new) * (c->HD / 2) * sizeof(float);
    if (packed && packed_bytes(c) <= pack_max) bytes += packed_bytes(c);
    return bytes;
}

int model_cpu_generate(model_t *m, model_linear_fn linear, bool packs, const int *const *prompts,
                       const int *prompt_lens, const uint64_t *seeds, int Q, int L, const model_gen_params_t *gp,
                       int *tokens, float *logp, int *lengths)
{
    const model_config_t *c = &m->cfg;
    int M = gp->max_new, maxP = 0;
    for (int q = 0; q < Q; q++) maxP = prompt_lens[q] > maxP ? prompt_lens[q] : maxP;
    int S = Q * L, R = ws_rows(prompt_lens, Q, S, maxP);
    gen_ws_t ws = {.S = S, .maxT = maxP + M, .L = L, .plen = prompt_lens, .linear = linear};
    size_t nf = ws_layout(&ws, NULL, c, R), sbytes = sample_scratch_bytes(c->V);
    float *mem = malloc(nf * sizeof(float));
    float *u = malloc((size_t)S * M * sizeof(float));
    int *imem = malloc((3 * (size_t)R + S) * sizeof(int));
    unsigned char *scratch = malloc(sbytes * omp_get_max_threads());
    model_packed_t *pk = pack_weights(m, packs);
    int rc = -1;
    if (!mem || !u || !imem || !scratch || model_rope_ensure(m, maxP + M)) {
        fprintf(stderr, "model_generate: out of memory for %d completions of %d tokens\n", S, maxP + M);
        goto done;
    }
    draw_uniforms(seeds, Q, L, M, u);
    ws_layout(&ws, mem, c, R);
    ws.tok = imem;
    ws.slot = imem + R;
    ws.pos = imem + 2 * R;
    prefill(m, &ws, pk, prompts, Q, R, imem + 3 * R);
    decode(m, &ws, pk, gp, u, imem + 3 * R, scratch, sbytes, (gen_out_t){tokens, logp, lengths});
    rc = 0;
done:
    packed_free(m, pk);
    free(scratch);
    free(imem);
    free(u);
    free(mem);
    return rc;
}
