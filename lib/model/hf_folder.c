/* Hugging Face model folders, the form every policy is saved in: config.json
 * and one or several safetensors files. A safetensors file is an 8-byte
 * little-endian header length, a JSON header mapping each tensor name to
 * {dtype, shape, data_offsets} (offsets relative to the end of the
 * header), then the raw little-endian data. Every tensor of every file
 * is checked (dtype, shape, offsets inside the file) before any is read,
 * then each is read a piece at a time and converted into the fp32
 * parameter array: no more of a file than a piece is ever in memory
 * (a mapped file's pages count in a process's resident memory), and a
 * folder that fails its checks leaves the parameters as they were, so a
 * policy can be reloaded in place (model_reload). */
#include "model/model_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Hugging Face name of each tensor kind, in model_weights_t order; "%d"
 * is the layer */
static const char *tensor_names[MODEL_NUM_TENSORS] = {
    "model.embed_tokens.weight",
    "model.layers.%d.input_layernorm.weight",
    "model.layers.%d.self_attn.q_proj.weight",
    "model.layers.%d.self_attn.q_proj.bias",
    "model.layers.%d.self_attn.k_proj.weight",
    "model.layers.%d.self_attn.k_proj.bias",
    "model.layers.%d.self_attn.v_proj.weight",
    "model.layers.%d.self_attn.v_proj.bias",
    "model.layers.%d.self_attn.q_norm.weight",
    "model.layers.%d.self_attn.k_norm.weight",
    "model.layers.%d.self_attn.o_proj.weight",
    "model.layers.%d.self_attn.o_proj.bias",
    "model.layers.%d.post_attention_layernorm.weight",
    "model.layers.%d.mlp.gate_proj.weight",
    "model.layers.%d.mlp.up_proj.weight",
    "model.layers.%d.mlp.down_proj.weight",
    "model.norm.weight",
    "lm_head.weight",
};

static bool per_layer(int kind) { return strstr(tensor_names[kind], "%d") != NULL; }

/* shape of one tensor (one layer's slice for per-layer kinds) */
static int tensor_shape(const model_config_t *c, int kind, int64_t dims[2])
{
    int64_t C = c->C, QD = (int64_t)c->NH * c->HD, KD = (int64_t)c->NKV * c->HD, FF = c->FF, V = c->V;
    int64_t t[MODEL_NUM_TENSORS][2] = {
        {V, C},     {C, 0},  {QD, C}, {QD, 0}, {KD, C}, {KD, 0}, {KD, C}, {KD, 0}, {c->HD, 0},
        {c->HD, 0}, {C, QD}, {C, 0},  {C, 0},  {FF, C}, {FF, C}, {C, FF}, {C, 0},  {V, C},
    };
    dims[0] = t[kind][0];
    dims[1] = t[kind][1];
    return dims[1] ? 2 : 1;
}

/* name -> (kind, layer), or -1 when the model has no such tensor */
static int tensor_lookup(const model_t *m, const char *name, int *layer)
{
    for (int k = 0; k < MODEL_NUM_TENSORS; k++) {
        if (!m->sizes[k]) continue;
        const char *pat = tensor_names[k];
        if (!per_layer(k)) {
            if (strcmp(name, pat) == 0) {
                *layer = 0;
                return k;
            }
            continue;
        }
        const char *pre_end = strstr(pat, "%d");
        size_t pre = (size_t)(pre_end - pat);
        if (strncmp(name, pat, pre) != 0) continue;
        char *end;
        long l = strtol(name + pre, &end, 10);
        if (end == name + pre || l < 0 || l >= m->cfg.L) continue;
        if (strcmp(end, pre_end + 2) == 0) {
            *layer = (int)l;
            return k;
        }
    }
    return -1;
}

static float *tensor_ptr(const model_t *m, int kind, int layer)
{
    float *base = m->params;
    for (int k = 0; k < kind; k++) base += m->sizes[k];
    return base + (m->sizes[kind] / (per_layer(kind) ? (size_t)m->cfg.L : 1)) * (size_t)layer;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) bits = sign;
    else {
        /* subnormal: normalise the mantissa */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void convert(float *dst, const unsigned char *src, size_t n, int esize)
{
    for (size_t i = 0; i < n; i++) {
        if (esize == 4) memcpy(&dst[i], src + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            if (esize == 2) { /* bf16 */
                uint32_t b = (uint32_t)h << 16;
                memcpy(&dst[i], &b, 4);
            } else dst[i] = half_to_float(h);
        }
    }
}

/* 4 = F32, 2 = BF16, 1 = F16 (two bytes, tagged apart), 0 = anything else */
static int dtype_size(const cJSON *dt)
{
    if (!cJSON_IsString(dt)) return 0;
    if (!strcmp(dt->valuestring, "F32")) return 4;
    if (!strcmp(dt->valuestring, "BF16")) return 2;
    if (!strcmp(dt->valuestring, "F16")) return 1;
    return 0;
}

/* bytes of a file read at a time */
#define PIECE ((size_t)4 << 20)

/* n elements of esize (dtype_size's) from fd at off into dst, a piece at
 * a time through buf (PIECE bytes) */
static int read_tensor(int fd, uint64_t off, float *dst, size_t n, int esize, unsigned char *buf)
{
    size_t width = esize == 4 ? 4 : 2, per = PIECE / width;
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per, want = k * width, got = 0;
        while (got < want) {
            ssize_t r = pread(fd, buf + got, want - got, (off_t)(off + (i * width) + got));
            if (r <= 0) return -1;
            got += (size_t)r;
        }
        convert(dst + i, buf, k, esize);
    }
    return 0;
}

/* one tensor entry of a header: checked against the model and the file
 * (data_len bytes after the header, which ends at data_off), then read
 * where buf is given; seen counts each (kind, layer) */
static int load_tensor(model_t *m, const cJSON *t, const char *file, int fd, uint64_t data_off, uint64_t data_len,
                       unsigned char *buf, unsigned char *seen, char *err, size_t errlen)
{
    const char *name = t->string;
    int layer, kind = tensor_lookup(m, name, &layer);
    if (kind < 0) {
        /* transformers drops a stored lm_head of a tied model the same way */
        if (m->cfg.tie && strcmp(name, "lm_head.weight") == 0) return 0;
        snprintf(err, errlen, "%s: tensor %s is not part of this model's config", file, name);
        return -1;
    }
    if (seen[kind * m->cfg.L + layer]++) {
        snprintf(err, errlen, "%s: tensor %s appears twice", file, name);
        return -1;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    int esize = dtype_size(dt);
    if (!esize) {
        snprintf(err, errlen, "%s: tensor %s: dtype %s is not F32, BF16 or F16", file, name,
                 cJSON_IsString(dt) ? dt->valuestring : "(missing)");
        return -1;
    }
    int64_t want[2];
    int nd = tensor_shape(&m->cfg, kind, want);
    bool ok = cJSON_IsArray(sh) && cJSON_GetArraySize(sh) == nd;
    for (int i = 0; ok && i < nd; i++) {
        const cJSON *d = cJSON_GetArrayItem(sh, i);
        ok = cJSON_IsNumber(d) && d->valuedouble == (double)want[i];
    }
    if (!ok) {
        char *got = sh ? cJSON_PrintUnformatted(sh) : NULL;
        if (nd == 2)
            snprintf(err, errlen, "%s: tensor %s: shape %s, expected [%lld,%lld]", file, name, got ? got : "(missing)",
                     (long long)want[0], (long long)want[1]);
        else
            snprintf(err, errlen, "%s: tensor %s: shape %s, expected [%lld]", file, name, got ? got : "(missing)",
                     (long long)want[0]);
        free(got);
        return -1;
    }
    size_t n = (size_t)want[0] * (size_t)(nd == 2 ? want[1] : 1);
    size_t bytes = n * (esize == 4 ? 4 : 2);
    const cJSON *b = cJSON_GetArrayItem(off, 0), *e = cJSON_GetArrayItem(off, 1);
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !cJSON_IsNumber(b) || !cJSON_IsNumber(e) ||
        b->valuedouble < 0 || e->valuedouble - b->valuedouble != (double)bytes) {
        snprintf(err, errlen, "%s: tensor %s: data_offsets do not span %zu bytes", file, name, bytes);
        return -1;
    }
    if (e->valuedouble > (double)data_len) {
        snprintf(err, errlen, "%s: tensor %s: data ends at byte %.0f past the end of the file (truncated?)", file, name,
                 e->valuedouble);
        return -1;
    }
    if (buf && read_tensor(fd, data_off + (uint64_t)b->valuedouble, tensor_ptr(m, kind, layer), n, esize, buf)) {
        snprintf(err, errlen, "%s: tensor %s: cannot read: %s", file, name, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

/* every tensor of the file at path checked, and read where buf is given
 * (a piece's room) */
static int load_file(model_t *m, const char *path, unsigned char *buf, unsigned char *seen, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    unsigned char len8[8];
    if (fstat(fd, &st) || st.st_size < 8 || pread(fd, len8, 8, 0) != 8) {
        snprintf(err, errlen, "%s: too short for a safetensors file", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    int rc = -1;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    cJSON *hdr = NULL;
    char *text = NULL;
    if (hlen > size - 8) {
        snprintf(err, errlen, "%s: header length %llu past the end of the file (truncated?)", path,
                 (unsigned long long)hlen);
        goto done;
    }
    text = malloc(hlen ? hlen : 1);
    if (!text || pread(fd, text, hlen, 8) != (ssize_t)hlen) {
        snprintf(err, errlen, "%s: cannot read its header", path);
        goto done;
    }
    hdr = cJSON_ParseWithLength(text, (size_t)hlen);
    if (!cJSON_IsObject(hdr)) {
        snprintf(err, errlen, "%s: header is not a JSON object", path);
        goto done;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, hdr)
    {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        if (load_tensor(m, t, path, fd, 8 + hlen, size - 8 - hlen, buf, seen, err, errlen)) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(hdr);
    free(text);
    close(fd);
    return rc;
}

/* the shard files an index names, each once, into files (NULL-ended) */
static char **index_files(const char *path, char *err, size_t errlen)
{
    char *text = model_read_text(path, err, errlen);
    if (!text) return NULL;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    char **files = NULL;
    if (!cJSON_IsObject(wm)) {
        snprintf(err, errlen, "%s: missing field weight_map", path);
        goto done;
    }
    int cnt = 0;
    files = calloc((size_t)cJSON_GetArraySize(wm) + 1, sizeof *files);
    if (!files) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, wm)
    {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/')) {
            snprintf(err, errlen, "%s: weight_map entry %s must be a file name in the folder", path, e->string);
            for (int i = 0; i < cnt; i++) free(files[i]);
            free(files);
            files = NULL;
            goto done;
        }
        int i = 0;
        while (i < cnt && strcmp(files[i], e->valuestring)) i++;
        if (i == cnt) files[cnt++] = strdup(e->valuestring);
    }
done:
    cJSON_Delete(root);
    return files;
}

/* every tensor of the folder dir into m, whose config is the folder's:
 * all checked first (each file's, then that none is missing), then read;
 * nothing of m changes where a check fails */
static int load_tensors(model_t *m, const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX], where[PATH_MAX];
    const model_config_t *c = &m->cfg;
    size_t nseen = (size_t)MODEL_NUM_TENSORS * c->L;
    unsigned char *seen = calloc(nseen, 1), *buf = malloc(PIECE);
    char **files = NULL;
    int rc = -1;
    if (!seen || !buf) {
        snprintf(err, errlen, "%s: out of memory", dir);
        goto done;
    }
    snprintf(where, sizeof where, "%s/model.safetensors.index.json", dir);
    if (access(where, F_OK) == 0) {
        files = index_files(where, err, errlen);
        if (!files) goto done;
    } else {
        snprintf(where, sizeof where, "%s/model.safetensors", dir);
    }
    /* pass 0 checks, pass 1 reads */
    for (int pass = 0; pass < 2; pass++) {
        memset(seen, 0, nseen);
        for (int i = 0; files ? files[i] != NULL : i < 1; i++) {
            if (files) snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            if (load_file(m, files ? path : where, pass ? buf : NULL, seen, err, errlen)) goto done;
        }
        for (int k = 0; pass == 0 && k < MODEL_NUM_TENSORS; k++) {
            if (!m->sizes[k]) continue;
            for (int l = 0; l < (per_layer(k) ? c->L : 1); l++) {
                if (seen[k * c->L + l]) continue;
                char name[128];
                snprintf(name, sizeof name, tensor_names[k], l);
                snprintf(err, errlen, "%s: tensor %s is missing", where, name);
                goto done;
            }
        }
    }
    rc = 0;
done:
    for (int i = 0; files && files[i]; i++) free(files[i]);
    free(files);
    free(seen);
    free(buf);
    return rc;
}

model_t *model_load(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    model_config_t cfg;
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) return model_load_gguf(dir, err, errlen);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (model_config_load(&cfg, path, err, errlen)) return NULL;
    model_t *m = model_new_empty(&cfg, path, err, errlen);
    if (m && load_tensors(m, dir, err, errlen)) model_destroy(&m);
    return m;
}

int model_reload(model_t *m, const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    model_config_t cfg;
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: a GGUF file is opened, not reloaded into a running model", dir);
        return -1;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (model_config_load(&cfg, path, err, errlen)) return -1;
    const model_config_t *c = &m->cfg;
    if (cfg.type != c->type || cfg.C != c->C || cfg.L != c->L || cfg.NH != c->NH || cfg.NKV != c->NKV ||
        cfg.HD != c->HD || cfg.FF != c->FF || cfg.V != c->V || cfg.tie != c->tie || cfg.qkv_bias != c->qkv_bias ||
        cfg.o_bias != c->o_bias) {
        snprintf(err, errlen, "%s: a different architecture than the running policy", dir);
        return -1;
    }
    return load_tensors(m, dir, err, errlen);
}

static uint16_t float_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40); /* quiet NaN */
    b += 0x7fffu + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

static cJSON *config_json(const model_config_t *c, bool bf16)
{
    cJSON *o = cJSON_CreateObject();
    static const char *const arch_names[] = {"Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM"};
    static const char *const type_names[] = {"qwen2", "qwen3", "llama"};
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(arch_names[c->type]));
    cJSON_AddStringToObject(o, "model_type", type_names[c->type]);
    cJSON_AddNumberToObject(o, "hidden_size", c->C);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->L);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->NH);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->NKV);
    cJSON_AddNumberToObject(o, "head_dim", c->HD);
    cJSON_AddNumberToObject(o, "intermediate_size", c->FF);
    cJSON_AddNumberToObject(o, "vocab_size", c->V);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_pos);
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(o, "rms_norm_eps", c->rms_eps);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie);
    if (c->type != MODEL_QWEN2) cJSON_AddBoolToObject(o, "attention_bias", c->qkv_bias);
    if (c->type == MODEL_LLAMA) cJSON_AddBoolToObject(o, "mlp_bias", false);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "use_sliding_window", false);
    cJSON_AddNumberToObject(o, "attention_dropout", 0);
    if (c->bos_id >= 0) cJSON_AddNumberToObject(o, "bos_token_id", c->bos_id);
    if (c->n_eos == 1) cJSON_AddNumberToObject(o, "eos_token_id", c->eos_ids[0]);
    else if (c->n_eos > 1) cJSON_AddItemToObject(o, "eos_token_id", cJSON_CreateIntArray(c->eos_ids, c->n_eos));
    cJSON_AddStringToObject(o, "torch_dtype", bf16 ? "bfloat16" : "float32");
    return o;
}

static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

/* dir/config.json, the model's config in the Hugging Face format. 0, or
 * -1 with err. */
static int save_config(const model_config_t *c, const char *dir, bool bf16, char *err, size_t errlen)
{
    char path[PATH_MAX];
    cJSON *cj = config_json(c, bf16);
    char *ctext = cJSON_Print(cj);
    cJSON_Delete(cj);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    int rc = f && write_all(f, ctext, strlen(ctext)) == 0 && write_all(f, "\n", 1) == 0 ? 0 : -1;
    if (f && fclose(f)) rc = -1;
    free(ctext);
    if (rc) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* the safetensors header: each tensor's dtype, shape and byte range, in
 * the order the tensors are written */
static char *safetensors_header(const model_t *m, bool bf16)
{
    const model_config_t *c = &m->cfg;
    cJSON *hdr = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    size_t esize = bf16 ? 2 : 4, off = 0;
    for (int k = 0; k < MODEL_NUM_TENSORS; k++) {
        if (!m->sizes[k]) continue;
        for (int l = 0; l < (per_layer(k) ? c->L : 1); l++) {
            char name[128];
            snprintf(name, sizeof name, tensor_names[k], l);
            int64_t dims[2];
            int nd = tensor_shape(c, k, dims);
            size_t bytes = (size_t)dims[0] * (size_t)(nd == 2 ? dims[1] : 1) * esize;
            cJSON *t = cJSON_AddObjectToObject(hdr, name);
            cJSON_AddStringToObject(t, "dtype", bf16 ? "BF16" : "F32");
            cJSON *sh = cJSON_AddArrayToObject(t, "shape");
            for (int i = 0; i < nd; i++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)dims[i]));
            cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
            cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
            cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + bytes)));
            off += bytes;
        }
    }
    char *htext = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    return htext;
}

/* every tensor's data in fp32, or rounded to bf16. 0, or -1. */
static int write_tensors(FILE *f, const model_t *m, bool bf16)
{
    int rc = 0;
    uint16_t buf[4096];
    for (int k = 0; !rc && k < MODEL_NUM_TENSORS; k++) {
        const float *p = tensor_ptr(m, k, 0);
        if (!bf16) {
            rc = write_all(f, p, m->sizes[k] * 4);
            continue;
        }
        for (size_t i = 0; !rc && i < m->sizes[k]; i += 4096) {
            size_t n = m->sizes[k] - i < 4096 ? m->sizes[k] - i : 4096;
            for (size_t j = 0; j < n; j++) buf[j] = float_to_bf16(p[i + j]);
            rc = write_all(f, buf, n * 2);
        }
    }
    return rc;
}

int model_save(const model_t *m, const char *dir, bool bf16, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (save_config(&m->cfg, dir, bf16, err, errlen)) return -1;
    char *htext = safetensors_header(m, bf16);
    size_t hlen = strlen(htext), padded = (hlen + 7) / 8 * 8;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    int rc = f ? 0 : -1;
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    if (!rc) rc = write_all(f, lenb, 8) || write_all(f, htext, hlen) || write_all(f, "        ", padded - hlen);
    free(htext);
    if (!rc) rc = write_tensors(f, m, bf16);
    if (f && fclose(f)) rc = -1;
    if (rc) snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    return rc;
}
