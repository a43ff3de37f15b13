/* The CUDA backend's workspaces and its device bytes, in plain C
 * (layout.h): cuda_model.cu allocates what these lay out. */
#include "model/cuda/layout.h"

size_t cuda_chunk_rows(int chunk, int V, int N)
{
    size_t rows = chunk > 0 ? (size_t)chunk : (size_t)(64u << 20) / (size_t)V;
    if (rows < 1) rows = 1;
    return rows < (size_t)N ? rows : (size_t)N;
}

void cuda_ws_layout(const model_config_t *cf, int chunk, int B, int T, bool infer, bool recompute, model_acts_t *a,
                    model_grad_acts_t *g, float *base, cuda_ws_t *z)
{
    size_t N = (size_t)B * T, C = cf->C, QD = (size_t)cf->NH * cf->HD, KD = (size_t)cf->NKV * cf->HD;
    size_t FF = cf->FF, q3 = cf->type == MODEL_QWEN3, ch = cuda_chunk_rows(chunk, cf->V, (int)N);
    size_t ds = (size_t)B * cf->NH * T * T;
    /* layers kept: every one to train, one to infer or to train with
     * recompute (and then every layer's input, x); backward scratch only
     * to train */
    size_t L = infer || recompute ? 1 : (size_t)cf->L, tr = !infer;
    size_t x_n = (infer ? 2 : (size_t)cf->L + 1) * N * C;
    a->ln_all = a->y_all = false; /* one layer's ln1, ln2 and y */
    a->one_layer = recompute && !infer;
    struct {
        float **p;
        size_t n;
    } t[] = {
        {&a->x, x_n},
        {&a->ln1, N * C},
        {&a->r1, L * N},
        {&a->qpre, q3 * L * N * QD},
        {&a->kpre, q3 * L * N * KD},
        {&a->rq, q3 * L * N * cf->NH},
        {&a->rk, q3 * L * N * cf->NKV},
        {&a->q, L * N * QD},
        {&a->k, L * N * KD},
        {&a->v, L * N * KD},
        {&a->att, ds},
        {&a->y, N * QD},
        {&a->xm, L * N * C},
        {&a->ln2, N * C},
        {&a->r2, L * N},
        {&a->g, L * N * FF},
        {&a->u, L * N * FF},
        {&a->h, N * FF},
        {&a->lnf, N * C},
        {&a->rf, N},
        {&a->lse, N},
        {&g->dx, tr * N * C},
        {&g->dln, tr * N * C},
        {&g->dq, tr * N * QD},
        {&g->dk, tr * N * KD},
        {&g->dv, tr * N * KD},
        {&g->dy, tr * N * QD},
        {&g->dk2, tr * q3 * N * KD},
        {&g->dg, tr * N * FF},
        {&g->du, tr * N * FF},
        {&g->dh, tr * N * FF},
        {&g->logits, ch * cf->V},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (base) *t[i].p = t[i].n ? base + total : NULL;
        total += t[i].n;
    }
    size_t hs = (size_t)B * cf->NH * T * cf->HD;
    size_t widest = C > QD ? C : QD;
    widest = widest > FF ? widest : FF;
    z->acts = total;
    z->dsc = tr * ds;
    z->pb = ds;
    z->hb = (infer ? 3 : 4) * hs + CUDA_HEADS_PAD;
    z->hf = (infer ? 1 : 3) * hs;
    /* backward turns a chunk of logits' gradient into bf16 too */
    z->xb = infer || N * widest > ch * cf->V ? N * widest : ch * cf->V;
    z->yb = tr * z->xb;
    z->ptrs = (size_t)(infer ? CUDA_HEADS_FORWARD : CUDA_HEADS_FORWARD + CUDA_HEADS_BACKWARD) * B * cf->NH;
    z->ints = 3 * N;
    z->floats = (infer ? 1 : 2) * N;
    z->N = N;
}

size_t cuda_ws_bytes(const cuda_ws_t *z)
{
    return (z->acts + z->dsc + z->hf + z->floats) * sizeof(float) + (z->pb + z->hb + z->xb + z->yb) * CUDA_BF16_BYTES +
           z->ints * sizeof(int) + z->ptrs * sizeof(void *);
}

size_t cuda_rope_bytes(const model_config_t *cf, int T) { return 2 * (size_t)T * (cf->HD / 2) * sizeof(float); }

size_t cuda_infer_small_floats(const size_t *sizes, size_t *small_off)
{
    size_t n = 0;
    for (int t = 0; t < MODEL_NUM_TENSORS; t++) {
        if (small_off) small_off[t] = n;
        if (!model_tensor_is_matrix(t)) n += sizes[t];
    }
    return n;
}

/* fp32 weights go up this many at a time, then into bf16 */
#define STAGE_FLOATS ((size_t)1 << 22)

size_t cuda_infer_stage_floats(size_t n_params) { return n_params < STAGE_FLOATS ? n_params : STAGE_FLOATS; }

size_t cuda_infer_weight_bytes(const model_config_t *cf)
{
    size_t sizes[MODEL_NUM_TENSORS], n = 0;
    model_sizes(cf, sizes);
    for (int t = 0; t < MODEL_NUM_TENSORS; t++) n += sizes[t];
    return n * CUDA_BF16_BYTES + (cuda_infer_small_floats(sizes, NULL) + cuda_infer_stage_floats(n)) * sizeof(float);
}

void cuda_gen_ws_size(const model_config_t *cf, int Q, int L, int maxP, int max_new, bool infer, cuda_gen_ws_t *z)
{
    size_t KD = (size_t)cf->NKV * cf->HD, QD = (size_t)cf->NH * cf->HD, C = cf->C, FF = cf->FF;
    z->S = Q * L;
    z->maxT = maxP + max_new;
    z->R = maxP > z->S ? maxP : z->S;
    size_t R = z->R, S = z->S;
    z->floats = R * (2 * C + 2 * QD + 2 * KD + 2 * FF) + S * cf->V + S * (size_t)max_new + S;
    z->cache = (size_t)cf->L * S * z->maxT * KD;
    z->cache_elem = infer ? CUDA_BF16_BYTES : sizeof(float);
    z->ints = 5 * R;
    size_t widest = FF > C ? FF : C;
    widest = widest > QD ? widest : QD;
    z->xb = R * widest;
}

size_t cuda_gen_ws_bytes(const cuda_gen_ws_t *z)
{
    return z->floats * sizeof(float) + 2 * z->cache * z->cache_elem + z->ints * sizeof(int) + z->xb * CUDA_BF16_BYTES;
}

size_t cuda_train_bytes(const model_config_t *cfg, int B, int T, bool recompute)
{
    size_t sizes[MODEL_NUM_TENSORS], n = 0;
    model_sizes(cfg, sizes);
    for (int i = 0; i < MODEL_NUM_TENSORS; i++) n += sizes[i];
    model_acts_t a;
    model_grad_acts_t g;
    cuda_ws_t z;
    cuda_ws_layout(cfg, 0, B, T, false, recompute, &a, &g, NULL, &z);
    /* fp32 masters, gradients and two moments, the bf16 copy; the clip's
     * sum; the RoPE tables of T positions */
    return n * (4 * sizeof(float) + CUDA_BF16_BYTES) + sizeof(double) + cuda_ws_bytes(&z) + cuda_rope_bytes(cfg, T);
}

size_t cuda_forward_bytes(const model_config_t *cfg, int B, int T)
{
    model_acts_t a;
    model_grad_acts_t g;
    cuda_ws_t z;
    cuda_ws_layout(cfg, 0, B, T, true, false, &a, &g, NULL, &z);
    return cuda_infer_weight_bytes(cfg) + cuda_ws_bytes(&z) + cuda_rope_bytes(cfg, T);
}

size_t cuda_generate_bytes(const model_config_t *cfg, int Q, int L, int maxP, int max_new)
{
    cuda_gen_ws_t z;
    cuda_gen_ws_size(cfg, Q, L, maxP, max_new, true, &z);
    return cuda_infer_weight_bytes(cfg) + cuda_gen_ws_bytes(&z) + cuda_rope_bytes(cfg, z.maxT);
}

double cuda_decode_step_bytes(const model_config_t *cfg, int S, double past)
{
    size_t sizes[MODEL_NUM_TENSORS];
    model_sizes(cfg, sizes);
    double weights = 0;
    for (int t = 1; t < MODEL_NUM_TENSORS; t++) weights += (double)sizes[t];
    /* the table whole where it is also the lm_head, else the S rows looked up */
    weights += cfg->tie ? (double)sizes[0] : (double)S * cfg->C;
    double kv = 2.0 * cfg->L * (double)cfg->NKV * cfg->HD * S * past;
    return (weights + kv) * CUDA_BF16_BYTES;
}
