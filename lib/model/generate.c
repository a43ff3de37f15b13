/* Sampling L completions of each of Q prompts with a key/value cache. One
 * step function runs any set of rows, each a (cache slot, position) pair:
 * a prefill is the P rows of a prompt's first slot, a decode step one row
 * per live completion of every prompt. The prompt's keys and values stay
 * in its first slot only and its completions read them there, so a prompt
 * runs once and is held once whatever L is. */
#include "model/model_impl.h"
#include "sampling/rng.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SAPO_HAVE_CUDA
#include "model/cuda/cuda_model.h"
#endif

typedef struct {
    int S, maxT;           /* slots (completions) and positions per slot */
    int L;                 /* completions per prompt: slots q*L .. q*L+L-1 */
    const int *plen;       /* (Q) prompt lengths */
    float *kc, *vc;        // (L, S, maxT, KD)
    float *x;              // (R, C) residual
    float *ln;             // (R, C)
    float *q;              // (R, NH*HD)
    float *k, *v;          // (R, KD)
    float *y;              // (R, NH*HD)
    float *g, *u;          // (R, FF)
    float *r;              // (R * NH) rstd scratch
    float *logits;         // (S, V)
    int *tok, *slot, *pos; // (R)
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

/* attention of each row over positions [0, pos]: the prompt's part from
 * the prompt's first slot, the completion's part from its own slot */
static void cached_attention(gen_ws_t *ws, const model_config_t *c, int l, int R)
{
    int NH = c->NH, NKV = c->NKV, HD = c->HD, KD = NKV * HD, rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HD);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)R * NH * ws->maxT * HD >= 32 * MODEL_PAR_MIN)
    for (int r = 0; r < R; r++)
        for (int kh = 0; kh < NKV; kh++) {
            int s = ws->slot[r], s0 = s - s % ws->L, P = ws->plen[s / ws->L], n = ws->pos[r] + 1;
            int n1 = n < P ? n : P;
            float p[rep * n];
            size_t b1 = (((size_t)l * ws->S + s0) * ws->maxT) * KD + (size_t)kh * HD;
            size_t b2 = (((size_t)l * ws->S + s) * ws->maxT + P) * KD + (size_t)kh * HD;
            size_t qo = (size_t)r * NH * HD + (size_t)kh * rep * HD;
            attend_group(ws->y + qo, p, ws->q + qo, ws->kc + b1, ws->vc + b1, n1, ws->kc + b2, ws->vc + b2, n, rep, KD,
                         HD, scale);
        }
}

/* runs R rows through the model; logits of rows [R - nlog, R) land in
 * ws->logits */
static void step(model_t *m, gen_ws_t *ws, int R, int nlog)
{
    const model_config_t *c = &m->cfg;
    const model_weights_t *w = &m->w;
    int C = c->C, HD = c->HD, QD = c->NH * HD, KD = c->NKV * HD, FF = c->FF;
    for (int r = 0; r < R; r++) memcpy(ws->x + (size_t)r * C, w->wte + (size_t)ws->tok[r] * C, C * sizeof(float));
    for (int l = 0; l < c->L; l++) {
        model_rmsnorm(ws->ln, ws->r, ws->x, w->ln1 + (size_t)l * C, R, C, c->rms_eps);
        model_matmul(m->bf16, ws->q, ws->ln, w->wq + (size_t)l * QD * C, w->bq ? w->bq + (size_t)l * QD : NULL, R, C,
                     QD);
        model_matmul(m->bf16, ws->k, ws->ln, w->wk + (size_t)l * KD * C, w->bk ? w->bk + (size_t)l * KD : NULL, R, C,
                     KD);
        model_matmul(m->bf16, ws->v, ws->ln, w->wv + (size_t)l * KD * C, w->bv ? w->bv + (size_t)l * KD : NULL, R, C,
                     KD);
        if (c->type == MODEL_QWEN3) {
            /* y is free until the attention: it holds the pre-norm q */
            memcpy(ws->y, ws->q, (size_t)R * QD * sizeof(float));
            model_rmsnorm(ws->q, ws->r, ws->y, w->qn + (size_t)l * HD, R * c->NH, HD, c->rms_eps);
            memcpy(ws->y, ws->k, (size_t)R * KD * sizeof(float));
            model_rmsnorm(ws->k, ws->r, ws->y, w->kn + (size_t)l * HD, R * c->NKV, HD, c->rms_eps);
        }
        model_rope(ws->q, ws->pos, m->rope_cos, m->rope_sin, R, c->NH, HD);
        model_rope(ws->k, ws->pos, m->rope_cos, m->rope_sin, R, c->NKV, HD);
        for (int r = 0; r < R; r++) {
            size_t at = (((size_t)l * ws->S + ws->slot[r]) * ws->maxT + ws->pos[r]) * KD;
            memcpy(ws->kc + at, ws->k + (size_t)r * KD, KD * sizeof(float));
            memcpy(ws->vc + at, ws->v + (size_t)r * KD, KD * sizeof(float));
        }
        cached_attention(ws, c, l, R);
        model_gemm(m->bf16, false, true, R, C, QD, ws->y, NULL, QD, w->wo + (size_t)l * C * QD, NULL, QD, 1.0f, ws->x,
                   C);
        if (w->bo)
            for (int r = 0; r < R; r++)
                for (int i = 0; i < C; i++) ws->x[(size_t)r * C + i] += w->bo[(size_t)l * C + i];
        model_rmsnorm(ws->ln, ws->r, ws->x, w->ln2 + (size_t)l * C, R, C, c->rms_eps);
        model_matmul(m->bf16, ws->g, ws->ln, w->wg + (size_t)l * FF * C, NULL, R, C, FF);
        model_matmul(m->bf16, ws->u, ws->ln, w->wu + (size_t)l * FF * C, NULL, R, C, FF);
        model_swiglu(ws->g, ws->g, ws->u, (size_t)R * FF);
        model_gemm(m->bf16, false, true, R, C, FF, ws->g, NULL, FF, w->wd + (size_t)l * C * FF, NULL, FF, 1.0f, ws->x,
                   C);
    }
    float *xl = ws->x + (size_t)(R - nlog) * C;
    model_rmsnorm(ws->ln, ws->r, xl, w->lnf, nlog, C, c->rms_eps);
    model_matmul(m->bf16, ws->logits, ws->ln, c->tie ? w->wte : w->lm, NULL, nlog, C, c->V);
}

static bool is_eos(const model_config_t *c, int tok)
{
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == tok) return true;
    return false;
}

/* Every prompt of at least one token, all in the vocabulary, with room
 * for M new tokens; Q, L and M at least 1. 0 with *maxP the longest
 * prompt, or -1 with the reason on stderr. */
static int check_request(const model_config_t *c, const int *const *prompts, const int *prompt_lens, int Q, int L,
                         int M, int *maxP)
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
        if (P > *maxP) *maxP = P;
    }
    if (Q < 1 || L < 1 || M < 1) {
        fprintf(stderr, "model_generate: %d prompts, %d completions, %d new tokens: need each at least 1\n", Q, L, M);
        return -1;
    }
    return 0;
}

/* L * M uniforms per prompt from its seed: token t of slot s draws with
 * u[s * M + t]. 0, or -1 out of memory. */
static int draw_uniforms(const uint64_t *seeds, int Q, int L, int M, float *u)
{
    for (int q = 0; q < Q; q++) {
        rng_t *rng = rng_new(seeds[q]);
        if (!rng) return -1;
        rng_uniform(rng, u + (size_t)q * L * M, (size_t)L * M);
        rng_destroy(&rng);
    }
    return 0;
}

/* prefill each prompt into its first slot, whose keys and values its
 * L completions share; last prompt first, since every prefill leaves
 * its logits in row 0 */
static void prefill(model_t *m, gen_ws_t *ws, const int *const *prompts, int Q)
{
    int L = ws->L, V = m->cfg.V;
    for (int q = Q - 1; q >= 0; q--) {
        int P = ws->plen[q], s0 = q * L;
        for (int i = 0; i < P; i++) {
            ws->tok[i] = prompts[q][i];
            ws->slot[i] = s0;
            ws->pos[i] = i;
        }
        step(m, ws, P, 1);
        for (int s = s0 + L - 1; s >= s0; s--)
            if (s) memcpy(ws->logits + (size_t)s * V, ws->logits, V * sizeof(float));
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

int model_generate_batch(model_t *m, const int *const *prompts, const int *prompt_lens, const uint64_t *seeds, int Q,
                         int L, const model_gen_params_t *gp, int *tokens, float *logp, int *lengths)
{
    const model_config_t *c = &m->cfg;
    int M = gp->max_new, maxP = 0;
    if (check_request(c, prompts, prompt_lens, Q, L, M, &maxP) != 0) return -1;
#ifdef SAPO_HAVE_CUDA
    if (m->cuda)
        return cuda_model_generate_batch(m->cuda, prompts, prompt_lens, seeds, Q, L, gp, tokens, logp, lengths);
#endif
    int S = Q * L;
    gen_ws_t ws = {.S = S, .maxT = maxP + M, .L = L, .plen = prompt_lens};
    int R = maxP > S ? maxP : S, nth = omp_get_max_threads();
    size_t nf = ws_layout(&ws, NULL, c, R), sbytes = sample_scratch_bytes(c->V);
    float *mem = malloc(nf * sizeof(float));
    float *u = malloc((size_t)S * M * sizeof(float));
    int *imem = malloc((3 * (size_t)R + S) * sizeof(int));
    unsigned char *scratch = malloc(sbytes * nth);
    int rc = -1;
    if (!mem || !u || !imem || !scratch || model_rope_ensure(m, maxP + M)) {
        fprintf(stderr, "model_generate: out of memory for %d completions of %d tokens\n", S, maxP + M);
        goto done;
    }
    if (draw_uniforms(seeds, Q, L, M, u) != 0) goto done;
    ws_layout(&ws, mem, c, R);
    ws.tok = imem;
    ws.slot = imem + R;
    ws.pos = imem + 2 * R;
    int *live = imem + 3 * R;
    prefill(m, &ws, prompts, Q);
    int nlive = S;
    for (int s = 0; s < S; s++) {
        live[s] = s;
        lengths[s] = 0;
    }
    for (int t = 0; nlive > 0; t++) {
#pragma omp parallel for if ((size_t)nlive * c->V >= 4 * MODEL_PAR_MIN)
        for (int i = 0; i < nlive; i++) {
            int s = live[i];
            float lp;
            int tok = sample_token(ws.logits + (size_t)i * c->V, c->V, &gp->sample, u[(size_t)s * M + t],
                                   scratch + sbytes * omp_get_thread_num(), &lp);
            tokens[(size_t)s * M + t] = tok;
            logp[(size_t)s * M + t] = lp;
            lengths[s] = t + 1;
        }
        nlive = next_rows(c, &ws, gp, live, nlive, t, M, tokens);
        if (nlive) step(m, &ws, nlive, nlive);
    }
    rc = 0;
done:
    free(scratch);
    free(imem);
    free(u);
    free(mem);
    return rc;
}

int model_generate(model_t *m, const int *prompt, int P, int L, const model_gen_params_t *gp, int *tokens, float *logp,
                   int *lengths)
{
    return model_generate_batch(m, &prompt, &P, &gp->seed, 1, L, gp, tokens, logp, lengths);
}
