/* The tokenizer a GGUF file describes, written out as the tokenizer.json
 * a Hugging Face folder would hold and read by the same loader. A GGUF
 * stores the byte-level BPE's vocabulary, merges and token types, and
 * names its pre-tokenizer ("tokenizer.ggml.pre") instead of spelling it
 * out; the names sapo knows map to the split llama.cpp applies for them.
 * Going through tokenizer.json gives one tokenizer code path, and a saved
 * policy version folder the same tokenizer that transformers opens. */
#include "gguf/gguf.h"
#include "tokenizer/tokenizer_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* token types of tokenizer.ggml.token_type */
enum { TOKEN_NORMAL = 1, TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4 };

/* the split before the byte-level step, by tokenizer.ggml.pre; NULL
 * pattern: GPT-2's own (the ByteLevel step's use_regex) */
typedef struct {
    const char *pre;
    const char *pattern;
    bool gpt2_after; /* GPT-2's regex runs after the pattern too */
} pre_split_t;

static const pre_split_t PRE_SPLITS[] = {
    {"default", NULL, true},
    {"gpt2", NULL, true},
    /* llama.cpp splits each numeric character off first; transformers,
     * our oracle, does not. The two agree on ASCII digits, which this
     * vocabulary never merges, and differ on characters like "½" */
    {"smollm", NULL, true},
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     false},
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
     "\\s+(?!\\S)|\\s+",
     false},
};

/* GPT-2's byte-to-character table: printable Latin-1 bytes stand for
 * themselves, the rest map to U+0100 on */
static void byte_chars(uint32_t cp[256])
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* whether s is spelled in the byte alphabet (each character one of the
 * 256 code points of byte_chars) */
static bool byte_spelled(const char *s, size_t len, const bool in_alphabet[512])
{
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) cp = c, i += 1;
        else if ((c & 0xE0) == 0xC0 && i + 1 < len) cp = ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F), i += 2;
        else return false;
        if (cp >= 512 || !in_alphabet[cp]) return false;
    }
    return true;
}

typedef struct {
    const gguf_t *g;
    char *err;
    size_t errlen;
} builder_t;

static cJSON *fail(builder_t *b, cJSON *partial, const char *what, const char *detail)
{
    snprintf(b->err, b->errlen, "%s: %s%s", gguf_path(b->g), what, detail);
    cJSON_Delete(partial);
    return NULL;
}

static const pre_split_t *pre_split(const gguf_t *g)
{
    const char *pre = gguf_get_str(g, "tokenizer.ggml.pre");
    if (!pre) pre = "default";
    for (size_t i = 0; i < sizeof PRE_SPLITS / sizeof *PRE_SPLITS; i++)
        if (strcmp(PRE_SPLITS[i].pre, pre) == 0) return &PRE_SPLITS[i];
    return NULL;
}

static cJSON *pre_tokenizer_json(const pre_split_t *ps)
{
    cJSON *seq = cJSON_CreateObject();
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON *list = cJSON_AddArrayToObject(seq, "pretokenizers");
    if (ps->pattern) {
        cJSON *split = cJSON_CreateObject();
        cJSON_AddStringToObject(split, "type", "Split");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", ps->pattern);
        cJSON_AddStringToObject(split, "behavior", "Isolated");
        cJSON_AddBoolToObject(split, "invert", false);
        cJSON_AddItemToArray(list, split);
    }
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", false);
    cJSON_AddBoolToObject(bl, "trim_offsets", true);
    cJSON_AddBoolToObject(bl, "use_regex", ps->gpt2_after);
    cJSON_AddItemToArray(list, bl);
    return seq;
}

/* the vocabulary (respelled in the byte alphabet where a token is not, as
 * transformers does) and the added tokens: control tokens special,
 * user-defined ones plain, both matched whole in the raw text */
static int vocab_json(builder_t *b, cJSON *root, cJSON *model)
{
    gguf_vtype_t type;
    size_t n, nt = 0;
    if (gguf_get_array(b->g, "tokenizer.ggml.tokens", &type, &n) != 0 || type != GGUF_STRING || n == 0) {
        fail(b, NULL, "missing or malformed metadata key ", "tokenizer.ggml.tokens");
        return -1;
    }
    gguf_vtype_t ttype = GGUF_I32;
    bool types = gguf_get_array(b->g, "tokenizer.ggml.token_type", &ttype, &nt) == 0;
    if (types && (nt != n || ttype == GGUF_STRING)) {
        fail(b, NULL, "tokenizer.ggml.token_type does not match tokenizer.ggml.tokens", "");
        return -1;
    }
    uint32_t cp[256];
    bool in_alphabet[512] = {false};
    byte_chars(cp);
    for (int i = 0; i < 256; i++) in_alphabet[cp[i]] = true;
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    char *spelled = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = gguf_array_str(b->g, "tokenizer.ggml.tokens", i, &len);
        if (2 * len + 1 > cap) {
            char *grown = realloc(spelled, cap = 2 * len + 1);
            if (!grown) {
                free(spelled);
                fail(b, NULL, "out of memory", "");
                return -1;
            }
            spelled = grown;
        }
        bool plain = byte_spelled(s, len, in_alphabet);
        size_t k = 0;
        if (plain) memcpy(spelled, s, k = len);
        else
            for (size_t j = 0; j < len; j++) k += put_utf8(spelled + k, cp[(unsigned char)s[j]]);
        spelled[k] = '\0';
        cJSON_AddItemToObject(vocab, spelled, cJSON_CreateNumber((double)i));
        int64_t tt = types ? gguf_array_int(b->g, "tokenizer.ggml.token_type", i) : TOKEN_NORMAL;
        if ((tt == TOKEN_CONTROL && plain) || tt == TOKEN_USER_DEFINED) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", spelled);
            cJSON_AddBoolToObject(a, "single_word", false);
            cJSON_AddBoolToObject(a, "lstrip", false);
            cJSON_AddBoolToObject(a, "rstrip", false);
            cJSON_AddBoolToObject(a, "normalized", false);
            cJSON_AddBoolToObject(a, "special", tt == TOKEN_CONTROL);
            cJSON_AddItemToArray(added, a);
        }
    }
    free(spelled);
    return 0;
}

static int merges_json(builder_t *b, cJSON *model)
{
    gguf_vtype_t type;
    size_t n;
    if (gguf_get_array(b->g, "tokenizer.ggml.merges", &type, &n) != 0 || type != GGUF_STRING) {
        fail(b, NULL, "missing or malformed metadata key ", "tokenizer.ggml.merges");
        return -1;
    }
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = gguf_array_str(b->g, "tokenizer.ggml.merges", i, &len);
        char *m = strndup(s, len);
        if (!m) {
            fail(b, NULL, "out of memory", "");
            return -1;
        }
        cJSON_AddItemToArray(merges, cJSON_CreateString(m));
        free(m);
    }
    return 0;
}

cJSON *tokenizer_gguf_json(const gguf_t *g, char *err, size_t errlen)
{
    builder_t b = {g, err, errlen};
    const char *kind = gguf_get_str(g, "tokenizer.ggml.model");
    if (!kind) return fail(&b, NULL, "missing metadata key ", "tokenizer.ggml.model");
    if (strcmp(kind, "gpt2") != 0)
        return fail(&b, NULL, kind, ": tokenizer not supported (byte-level BPE, \"gpt2\", only)");
    const pre_split_t *ps = pre_split(g);
    if (!ps)
        return fail(&b, NULL, gguf_get_str(g, "tokenizer.ggml.pre"),
                    ": pre-tokenizer not supported (default, gpt2, smollm, qwen2, llama-bpe)");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *model = cJSON_CreateObject();
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(model, "end_of_word_suffix", "");
    cJSON_AddBoolToObject(model, "fuse_unk", false);
    cJSON_AddBoolToObject(model, "byte_fallback", false);
    cJSON_AddBoolToObject(model, "ignore_merges", false);
    if (vocab_json(&b, root, model) != 0 || merges_json(&b, model) != 0) {
        cJSON_Delete(model);
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddNullToObject(root, "normalizer");
    cJSON_AddItemToObject(root, "pre_tokenizer", pre_tokenizer_json(ps));
    cJSON_AddNullToObject(root, "post_processor");
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddBoolToObject(dec, "add_prefix_space", true);
    cJSON_AddBoolToObject(dec, "trim_offsets", true);
    cJSON_AddBoolToObject(dec, "use_regex", true);
    cJSON_AddItemToObject(root, "model", model);
    return root;
}

/* the text of a special token named by an id key, or NULL */
static char *token_of(const gguf_t *g, const char *key)
{
    int64_t id;
    size_t len;
    const char *s =
        gguf_get_int(g, key, &id) == 0 && id >= 0 ? gguf_array_str(g, "tokenizer.ggml.tokens", (size_t)id, &len) : NULL;
    return s ? strndup(s, len) : NULL;
}

tokenizer_t *tokenizer_from_gguf(const gguf_t *g, char *err, size_t errlen)
{
    char *eos = token_of(g, "tokenizer.ggml.eos_token_id");
    if (!eos) {
        snprintf(err, errlen, "%s: missing metadata key tokenizer.ggml.eos_token_id", gguf_path(g));
        return NULL;
    }
    cJSON *root = tokenizer_gguf_json(g, err, errlen);
    tokenizer_t *t = root ? tokenizer_from_json(root, gguf_path(g), eos, err, errlen) : NULL;
    cJSON_Delete(root);
    free(eos);
    return t;
}

static int write_json(const cJSON *j, const char *path, char *err, size_t errlen)
{
    char *text = cJSON_PrintUnformatted(j);
    FILE *f = text ? fopen(path, "wb") : NULL;
    size_t n = text ? strlen(text) : 0;
    int rc = f && fwrite(text, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc) snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    free(text);
    return rc;
}

int tokenizer_gguf_save(const gguf_t *g, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    cJSON *tok = tokenizer_gguf_json(g, err, errlen);
    if (!tok) return -1;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int rc = write_json(tok, path, err, errlen);
    cJSON_Delete(tok);
    if (rc) return -1;
    cJSON *cfg = cJSON_CreateObject();
    static const char *const specials[][2] = {{"eos_token", "tokenizer.ggml.eos_token_id"},
                                              {"bos_token", "tokenizer.ggml.bos_token_id"},
                                              {"pad_token", "tokenizer.ggml.padding_token_id"}};
    for (int i = 0; i < 3; i++) {
        char *s = token_of(g, specials[i][1]);
        if (s) cJSON_AddStringToObject(cfg, specials[i][0], s);
        free(s);
    }
    const char *tmpl = gguf_get_str(g, "tokenizer.chat_template");
    if (tmpl) cJSON_AddStringToObject(cfg, "chat_template", tmpl);
    int64_t add_bos = 0;
    gguf_get_int(g, "tokenizer.ggml.add_bos_token", &add_bos);
    cJSON_AddBoolToObject(cfg, "add_bos_token", add_bos != 0);
    cJSON_AddStringToObject(cfg, "tokenizer_class", "PreTrainedTokenizerFast");
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    rc = write_json(cfg, path, err, errlen);
    cJSON_Delete(cfg);
    return rc;
}
