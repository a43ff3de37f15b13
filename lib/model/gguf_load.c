/* A model from a GGUF file, as llama.cpp's converter wrote it: the
 * hyperparameters from the "<arch>.*" metadata, each tensor dequantized to
 * fp32 into the model's own layout. Two things differ from a Hugging Face
 * folder: names (blk.N.attn_q.weight for model.layers.N.self_attn.q_proj
 * .weight), and, for Llama only, the rows of q_proj and k_proj, which the
 * converter permutes within each head so that ggml's interleaved RoPE
 * works; they are put back here for our rotate-half RoPE. */
#include "gguf/gguf.h"
#include "model/model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const gguf_t *g;
    const char *arch;
    char *err;
    size_t errlen;
} reader_t;

static int fail(reader_t *r, const char *what, const char *detail)
{
    snprintf(r->err, r->errlen, "%s: %s%s", gguf_path(r->g), what, detail);
    return -1;
}

/* "<arch>.<name>" as an integer; dflt when absent, or an error when dflt
 * is negative */
static int arch_int(reader_t *r, const char *name, int dflt, int *out)
{
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", r->arch, name);
    if (gguf_get_int(r->g, key, &v) != 0) {
        if (dflt < 0) return fail(r, "missing metadata key ", key);
        *out = dflt;
        return 0;
    }
    if (v < 0 || v > (1 << 30)) return fail(r, "metadata key out of range: ", key);
    *out = (int)v;
    return 0;
}

static int arch_float(reader_t *r, const char *name, float dflt, float *out)
{
    char key[128];
    double v;
    snprintf(key, sizeof key, "%s.%s", r->arch, name);
    *out = gguf_get_float(r->g, key, &v) == 0 ? (float)v : dflt;
    return 0;
}

static int read_config(reader_t *r, model_config_t *c)
{
    memset(c, 0, sizeof *c);
    if (strcmp(r->arch, "qwen2") == 0) c->type = MODEL_QWEN2;
    else if (strcmp(r->arch, "qwen3") == 0) c->type = MODEL_QWEN3;
    else if (strcmp(r->arch, "llama") == 0) c->type = MODEL_LLAMA;
    else return fail(r, r->arch, ": architecture not supported (llama, qwen2, qwen3)");
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", r->arch);
    const char *scaling = gguf_get_str(r->g, key);
    if ((scaling && strcmp(scaling, "none") != 0) || gguf_tensor_find(r->g, "rope_freqs.weight") >= 0)
        return fail(r, "scaled RoPE is not supported: ", scaling ? scaling : "rope_freqs.weight");
    int rot = 0;
    if (arch_int(r, "embedding_length", -1, &c->C) || arch_int(r, "block_count", -1, &c->L) ||
        arch_int(r, "attention.head_count", -1, &c->NH) || arch_int(r, "feed_forward_length", -1, &c->FF) ||
        arch_int(r, "context_length", 2048, &c->max_pos) || arch_float(r, "rope.freq_base", 10000.0f, &c->rope_theta) ||
        arch_float(r, "attention.layer_norm_rms_epsilon", 1e-6f, &c->rms_eps))
        return -1;
    if (c->NH <= 0) return fail(r, "attention.head_count must be positive", "");
    if (arch_int(r, "attention.head_count_kv", c->NH, &c->NKV) ||
        arch_int(r, "attention.key_length", c->C / c->NH, &c->HD) || arch_int(r, "rope.dimension_count", c->HD, &rot))
        return -1;
    if (rot != c->HD) return fail(r, "partial rotary embeddings are not supported", "");
    int embd = gguf_tensor_find(r->g, "token_embd.weight");
    if (embd < 0) return fail(r, "missing tensor ", "token_embd.weight");
    int64_t ne[GGUF_MAX_DIMS];
    if (gguf_tensor_dims(r->g, embd, ne) != 2 || ne[1] > (1 << 30))
        return fail(r, "token_embd.weight is not a matrix", "");
    c->V = (int)ne[1];
    c->tie = gguf_tensor_find(r->g, "output.weight") < 0;
    c->qkv_bias = gguf_tensor_find(r->g, "blk.0.attn_q.bias") >= 0;
    c->o_bias = gguf_tensor_find(r->g, "blk.0.attn_output.bias") >= 0;
    if (c->type == MODEL_QWEN2 && (!c->qkv_bias || c->o_bias))
        return fail(r, "qwen2 needs q/k/v biases and no output bias", "");
    if (c->o_bias && !c->qkv_bias) return fail(r, "an output bias without q/k/v biases is not supported", "");
    int64_t id;
    c->bos_id = gguf_get_int(r->g, "tokenizer.ggml.bos_token_id", &id) == 0 ? (int)id : -1;
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2; i++)
        if (gguf_get_int(r->g, eos_keys[i], &id) == 0 && (c->n_eos == 0 || c->eos_ids[0] != id))
            c->eos_ids[c->n_eos++] = (int)id;
    return model_config_check(c, gguf_path(r->g), r->err, r->errlen);
}

/* Hugging Face's row order of one projection from the converter's: within
 * each head of HD rows, row b * HD/2 + a was written at 2a + b */
static int unpermute_rows(float *w, int heads, int HD, int cols)
{
    size_t head = (size_t)HD * cols;
    float *tmp = malloc(sizeof(float) * head);
    if (!tmp) return -1;
    for (int h = 0; h < heads; h++) {
        float *W = w + (size_t)h * head;
        memcpy(tmp, W, sizeof(float) * head);
        for (int a = 0; a < HD / 2; a++)
            for (int b = 0; b < 2; b++)
                memcpy(W + (size_t)(b * HD / 2 + a) * cols, tmp + (size_t)(2 * a + b) * cols, sizeof(float) * cols);
    }
    free(tmp);
    return 0;
}

/* one tensor of n floats into dst; *used counts the file's tensors read */
static int read_tensor(reader_t *r, const char *name, float *dst, size_t n, int *used)
{
    int t = gguf_tensor_find(r->g, name);
    if (t < 0) return fail(r, "missing tensor ", name);
    if ((size_t)gguf_tensor_nelements(r->g, t) != n) {
        char detail[192];
        snprintf(detail, sizeof detail, "%s has %lld elements, the config implies %zu", name,
                 (long long)gguf_tensor_nelements(r->g, t), n);
        return fail(r, "", detail);
    }
    (*used)++;
    return gguf_tensor_read(r->g, t, dst, r->err, r->errlen);
}

/* the GGUF name of each model_weights_t tensor (NULL: none), "%d" the layer */
static const char *const gguf_names[MODEL_NUM_TENSORS] = {
    "token_embd.weight",         "blk.%d.attn_norm.weight",   "blk.%d.attn_q.weight",
    "blk.%d.attn_q.bias",        "blk.%d.attn_k.weight",      "blk.%d.attn_k.bias",
    "blk.%d.attn_v.weight",      "blk.%d.attn_v.bias",        "blk.%d.attn_q_norm.weight",
    "blk.%d.attn_k_norm.weight", "blk.%d.attn_output.weight", "blk.%d.attn_output.bias",
    "blk.%d.ffn_norm.weight",    "blk.%d.ffn_gate.weight",    "blk.%d.ffn_up.weight",
    "blk.%d.ffn_down.weight",    "output_norm.weight",        "output.weight",
};

static int read_weights(reader_t *r, model_t *m)
{
    const model_config_t *c = &m->cfg;
    float **w = (float **)&m->w;
    int used = 0;
    char name[128];
    for (int k = 0; k < MODEL_NUM_TENSORS; k++) {
        if (!m->sizes[k]) continue;
        bool layered = strstr(gguf_names[k], "%d") != NULL;
        int layers = layered ? c->L : 1;
        size_t n = m->sizes[k] / (size_t)layers;
        for (int l = 0; l < layers; l++) {
            snprintf(name, sizeof name, gguf_names[k], l);
            float *dst = w[k] + (size_t)l * n;
            if (read_tensor(r, name, dst, n, &used) != 0) return -1;
            /* the converter permutes Llama's q and k weights only (not biases) */
            bool q = w[k] == m->w.wq, kk = w[k] == m->w.wk;
            if (c->type == MODEL_LLAMA && (q || kk) && unpermute_rows(dst, q ? c->NH : c->NKV, c->HD, c->C) != 0)
                return fail(r, "out of memory", "");
        }
    }
    if (used != gguf_n_tensors(r->g)) {
        for (int t = 0; t < gguf_n_tensors(r->g); t++) {
            const char *tn = gguf_tensor_name(r->g, t);
            bool known = false;
            for (int k = 0; k < MODEL_NUM_TENSORS && !known; k++)
                for (int l = 0; l < c->L && !known; l++) {
                    snprintf(name, sizeof name, gguf_names[k], l);
                    known = m->sizes[k] && strcmp(name, tn) == 0;
                }
            if (!known) return fail(r, "a tensor this architecture does not have: ", tn);
        }
    }
    return 0;
}

model_t *model_load_gguf(const char *path, char *err, size_t errlen)
{
    gguf_t *g = gguf_open(path, err, errlen);
    if (!g) return NULL;
    model_t *m = model_load_gguf_from(g, err, errlen);
    gguf_destroy(&g);
    return m;
}

model_t *model_load_gguf_from(const gguf_t *g, char *err, size_t errlen)
{
    reader_t r = {g, gguf_get_str(g, "general.architecture"), err, errlen};
    if (!r.arch) {
        fail(&r, "missing metadata key ", "general.architecture");
        return NULL;
    }
    model_config_t cfg;
    if (read_config(&r, &cfg) != 0) return NULL;
    model_t *m = model_new_empty(&cfg, gguf_path(g), err, errlen);
    if (m && read_weights(&r, m) != 0) model_destroy(&m);
    return m;
}
