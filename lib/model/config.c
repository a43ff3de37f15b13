/* config.json <-> model_config_t, and the tensor sizes a config implies.
 * Fields transformers defaults when absent (num_key_value_heads, rope_theta,
 * rms_norm_eps, tie_word_embeddings, max_position_embeddings) default the
 * same way here; the ones it cannot guess are errors. */
#include "model/model_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

model_config_t model_config_tiny(void)
{
    /* vocab 264 = the byte tokenizer's 256 bytes plus its specials, rounded
     * up to a multiple of 8; eos is its <|endoftext|> (id 256) */
    model_config_t c = {
        .type = MODEL_QWEN2,
        .C = 256,
        .L = 4,
        .NH = 4,
        .NKV = 2,
        .HD = 64,
        .FF = 768,
        .V = 264,
        .max_pos = 2048,
        .rope_theta = 10000.0f,
        .rms_eps = 1e-6f,
        .tie = true,
        .qkv_bias = true,
        .o_bias = false,
        .bos_id = -1,
        .eos_ids = {256},
        .n_eos = 1,
    };
    return c;
}

model_config_t model_config_qwen25_05b(void)
{
    model_config_t c = {
        .type = MODEL_QWEN2,
        .C = 896,
        .L = 24,
        .NH = 14,
        .NKV = 2,
        .HD = 64,
        .FF = 4864,
        .V = 151936,
        .max_pos = 32768,
        .rope_theta = 1e6f,
        .rms_eps = 1e-6f,
        .tie = true,
        .qkv_bias = true,
        .bos_id = -1,
        .eos_ids = {151643},
        .n_eos = 1,
    };
    return c;
}

int model_config_check(const model_config_t *c, const char *where, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (c->C <= 0) bad = "hidden_size must be positive";
    else if (c->L <= 0) bad = "num_hidden_layers must be positive";
    else if (c->NH <= 0) bad = "num_attention_heads must be positive";
    else if (c->NKV <= 0 || c->NH % c->NKV) bad = "num_key_value_heads must divide num_attention_heads";
    else if (c->HD <= 0 || c->HD % 2) bad = "head_dim must be positive and even";
    else if (c->FF <= 0) bad = "intermediate_size must be positive";
    else if (c->V <= 0) bad = "vocab_size must be positive";
    else if (c->max_pos <= 0) bad = "max_position_embeddings must be positive";
    else if (!(c->rope_theta > 0)) bad = "rope_theta must be positive";
    else if (!(c->rms_eps > 0)) bad = "rms_norm_eps must be positive";
    for (int i = 0; !bad && i < c->n_eos; i++)
        if (c->eos_ids[i] < 0 || c->eos_ids[i] >= c->V) bad = "eos_token_id out of the vocabulary";
    if (!bad && c->bos_id >= c->V) bad = "bos_token_id out of the vocabulary";
    if (bad) {
        snprintf(err, errlen, "%s: %s", where, bad);
        return -1;
    }
    return 0;
}

void model_sizes(const model_config_t *c, size_t *s)
{
    size_t L = c->L, C = c->C, QD = (size_t)c->NH * c->HD, KD = (size_t)c->NKV * c->HD;
    size_t FF = c->FF, V = c->V;
    size_t v[MODEL_NUM_TENSORS] = {
        V * C,
        L * C,
        L * QD * C,
        c->qkv_bias ? L * QD : 0,
        L * KD * C,
        c->qkv_bias ? L * KD : 0,
        L * KD * C,
        c->qkv_bias ? L * KD : 0,
        c->type == MODEL_QWEN3 ? L * c->HD : 0,
        c->type == MODEL_QWEN3 ? L * c->HD : 0,
        L * C * QD,
        c->o_bias ? L * C : 0,
        L * C,
        L * FF * C,
        L * FF * C,
        L * C * FF,
        C,
        c->tie ? 0 : V * C,
    };
    memcpy(s, v, sizeof v);
}

/* an integer field; absent -> dflt, or an error when dflt is INT_MIN */
static int get_int(const cJSON *root, const char *name, int dflt, int *out, const char *path, char *err, size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) {
        if (dflt == -2147483647 - 1) {
            snprintf(err, errlen, "%s: missing field %s", path, name);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble) || fabs(f->valuedouble) > 2e9) {
        snprintf(err, errlen, "%s: field %s must be an integer", path, name);
        return -1;
    }
    *out = (int)f->valuedouble;
    return 0;
}

static int get_float(const cJSON *root, const char *name, float dflt, float *out, const char *path, char *err,
                     size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(f)) {
        snprintf(err, errlen, "%s: field %s must be a number", path, name);
        return -1;
    }
    *out = (float)f->valuedouble;
    return 0;
}

static int get_bool(const cJSON *root, const char *name, bool dflt, bool *out, const char *path, char *err,
                    size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!f || cJSON_IsNull(f)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(f)) {
        snprintf(err, errlen, "%s: field %s must be true or false", path, name);
        return -1;
    }
    *out = cJSON_IsTrue(f);
    return 0;
}

/* rope_theta lives at the top level (transformers 4) or in rope_parameters
 * (transformers 5); only the default (unscaled) RoPE is implemented */
static int get_rope(const cJSON *root, float *theta, const char *path, char *err, size_t errlen)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    const char *fields[2] = {"rope_parameters", "rope_scaling"};
    const cJSON *objs[2] = {rp, rs};
    for (int i = 0; i < 2; i++) {
        const cJSON *o = objs[i];
        if (!o || cJSON_IsNull(o)) continue;
        if (!cJSON_IsObject(o)) {
            snprintf(err, errlen, "%s: field %s must be an object", path, fields[i]);
            return -1;
        }
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
        if (!t) t = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (t && !(cJSON_IsString(t) && strcmp(t->valuestring, "default") == 0)) {
            snprintf(err, errlen, "%s: field %s.rope_type: only \"default\" RoPE is supported", path, fields[i]);
            return -1;
        }
    }
    if (get_float(root, "rope_theta", 10000.0f, theta, path, err, errlen)) return -1;
    if (rp && cJSON_IsObject(rp) && cJSON_GetObjectItemCaseSensitive(rp, "rope_theta"))
        return get_float(rp, "rope_theta", 10000.0f, theta, path, err, errlen);
    return 0;
}

static int get_eos(const cJSON *root, model_config_t *c, const char *path, char *err, size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    c->n_eos = 0;
    if (!f || cJSON_IsNull(f)) return 0;
    if (cJSON_IsNumber(f)) {
        c->eos_ids[c->n_eos++] = f->valueint;
        return 0;
    }
    const cJSON *e;
    if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) > MODEL_MAX_EOS) {
        snprintf(err, errlen, "%s: field eos_token_id must be an integer or a list of at most %d", path, MODEL_MAX_EOS);
        return -1;
    }
    cJSON_ArrayForEach(e, f)
    {
        if (!cJSON_IsNumber(e)) {
            snprintf(err, errlen, "%s: field eos_token_id must hold integers", path);
            return -1;
        }
        c->eos_ids[c->n_eos++] = e->valueint;
    }
    return 0;
}

char *model_read_text(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "%s: cannot read", path);
        free(s);
        fclose(f);
        return NULL;
    }
    s[n] = 0;
    fclose(f);
    return s;
}

/* c->type from model_type (qwen2, qwen3 or llama), with hidden_act silu
 * or absent. 0, or -1 with err. */
static int get_model_type(const cJSON *root, model_config_t *c, const char *path, char *err, size_t errlen)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (!cJSON_IsString(mt)) {
        snprintf(err, errlen, "%s: missing field model_type", path);
        return -1;
    }
    if (strcmp(mt->valuestring, "qwen2") == 0) c->type = MODEL_QWEN2;
    else if (strcmp(mt->valuestring, "qwen3") == 0) c->type = MODEL_QWEN3;
    else if (strcmp(mt->valuestring, "llama") == 0) c->type = MODEL_LLAMA;
    else {
        snprintf(err, errlen, "%s: field model_type is \"%s\"; supported: qwen2, qwen3, llama", path, mt->valuestring);
        return -1;
    }
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0)) {
        snprintf(err, errlen, "%s: field hidden_act: only \"silu\" is supported", path);
        return -1;
    }
    return 0;
}

int model_config_load(model_config_t *c, const char *path, char *err, size_t errlen)
{
    char *text = model_read_text(path, err, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        cJSON_Delete(root);
        return -1;
    }
    memset(c, 0, sizeof *c);
    int rc = -1;
    const int req = -2147483647 - 1;
    if (get_model_type(root, c, path, err, errlen)) goto done;
    bool sliding = false, attn_bias = false, mlp_bias = false;
    if (get_int(root, "hidden_size", req, &c->C, path, err, errlen) ||
        get_int(root, "num_hidden_layers", req, &c->L, path, err, errlen) ||
        get_int(root, "num_attention_heads", req, &c->NH, path, err, errlen) ||
        get_int(root, "intermediate_size", req, &c->FF, path, err, errlen) ||
        get_int(root, "vocab_size", req, &c->V, path, err, errlen) ||
        get_int(root, "num_key_value_heads", c->NH, &c->NKV, path, err, errlen) ||
        get_int(root, "max_position_embeddings", 32768, &c->max_pos, path, err, errlen) ||
        get_int(root, "bos_token_id", -1, &c->bos_id, path, err, errlen) ||
        get_float(root, "rms_norm_eps", 1e-6f, &c->rms_eps, path, err, errlen) ||
        get_rope(root, &c->rope_theta, path, err, errlen) ||
        get_bool(root, "tie_word_embeddings", false, &c->tie, path, err, errlen) ||
        get_bool(root, "use_sliding_window", false, &sliding, path, err, errlen) ||
        get_bool(root, "attention_bias", false, &attn_bias, path, err, errlen) ||
        get_bool(root, "mlp_bias", false, &mlp_bias, path, err, errlen) || get_eos(root, c, path, err, errlen))
        goto done;
    if (mlp_bias) {
        snprintf(err, errlen, "%s: field mlp_bias: biases in the MLP are not supported", path);
        goto done;
    }
    if (sliding) {
        snprintf(err, errlen, "%s: field use_sliding_window: sliding-window attention is not supported", path);
        goto done;
    }
    if (c->NH <= 0) {
        snprintf(err, errlen, "%s: num_attention_heads must be positive", path);
        goto done;
    }
    if (get_int(root, "head_dim", c->C / c->NH, &c->HD, path, err, errlen)) goto done;
    if (c->type != MODEL_QWEN3 && c->C % c->NH && !cJSON_GetObjectItemCaseSensitive(root, "head_dim")) {
        snprintf(err, errlen, "%s: hidden_size is not a multiple of num_attention_heads and head_dim is absent", path);
        goto done;
    }
    c->qkv_bias = c->type == MODEL_QWEN2 || attn_bias;
    c->o_bias = c->type != MODEL_QWEN2 && attn_bias;
    rc = model_config_check(c, path, err, errlen);
done:
    cJSON_Delete(root);
    return rc;
}
