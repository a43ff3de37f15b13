/* Reads a Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2,
 * Qwen2/2.5/3). Anything this code would tokenize differently from
 * `tokenizers` is refused with the file and the field, never approximated. */
#include "tokenizer/tokenizer_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* the split the ByteLevel pre-tokenizer does itself when use_regex is true */
static const char *GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
} loader_t;

static int fail(loader_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(loader_t *l, const char *fmt, ...)
{
    if (!l->err || !l->errlen) return -1;
    int k = snprintf(l->err, l->errlen, "tokenizer %s: ", l->path);
    if (k >= 0 && (size_t)k < l->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->err + k, l->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size + 1))) {
            *len = fread(data, 1, (size_t)size, f);
            if (*len != (size_t)size) {
                free(data);
                data = NULL;
            } else data[*len] = 0;
        }
    }
    int saved = errno;
    fclose(f);
    errno = saved;
    return data;
}

static const char *type_of(const cJSON *obj)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(type) ? type->valuestring : NULL;
}

static bool is_true(const cJSON *obj, const char *field)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, field));
}

static bool is_nonempty_string(const cJSON *obj, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
    return cJSON_IsString(v) && v->valuestring[0];
}

static int load_normalizer(loader_t *l, tokenizer_t *t, const cJSON *norm, const char *where)
{
    if (!norm || cJSON_IsNull(norm)) return 0;
    const char *type = type_of(norm);
    if (type && strcmp(type, "NFC") == 0) {
        t->nfc = true;
        return 0;
    }
    if (type && strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
        if (!cJSON_IsArray(list)) return fail(l, "%s.normalizers: expected an array", where);
        int i = 0;
        for (const cJSON *n = list->child; n; n = n->next, i++) {
            char inner[96];
            snprintf(inner, sizeof inner, "%s.normalizers[%d]", where, i);
            if (load_normalizer(l, t, n, inner) != 0) return -1;
        }
        return 0;
    }
    return fail(l, "%s.type \"%s\" is not supported (NFC only)", where, type ? type : "?");
}

/* tokenizers matches with Oniguruma, whose \s is the Unicode White_Space
 * property; PCRE2's \s in UCP mode also takes U+180E. So \s and \S are
 * spelled out as White_Space before PCRE2 sees the pattern. */
#define WHITE_SPACE \
    "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

static char *white_space_as_oniguruma(loader_t *l, const char *pattern, const char *where)
{
    size_t len = strlen(pattern);
    char *out = malloc(len * (sizeof WHITE_SPACE + 3) + 1), *o = out;
    if (!out) {
        fail(l, "out of memory");
        return NULL;
    }
    bool in_class = false;
    for (size_t i = 0; i < len; i++) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < len && (pattern[i + 1] == 's' || pattern[i + 1] == 'S')) {
            bool negated = pattern[++i] == 'S';
            if (in_class && negated) {
                free(out);
                fail(l, "%s.pattern: \\S inside a character class is not supported", where);
                return NULL;
            }
            o += sprintf(o, in_class ? "%s" : negated ? "[^%s]" : "[%s]", WHITE_SPACE);
            continue;
        }
        *o++ = c;
        if (c == '\\' && i + 1 < len) *o++ = pattern[++i];
        else if (c == '[' && !in_class) {
            in_class = true;
            // a ']' right after '[' or '[^' is a member, not the end
            if (i + 1 < len && pattern[i + 1] == '^') *o++ = pattern[++i];
            if (i + 1 < len && pattern[i + 1] == ']') *o++ = pattern[++i];
        } else if (c == '[' && i + 1 < len && pattern[i + 1] == ':') {
            const char *end = strstr(pattern + i + 2, ":]");
            size_t n = end ? (size_t)(end - pattern - i) + 1 : 0;
            memcpy(o, pattern + i + 1, n);
            o += n, i += n;
        } else if (c == ']') in_class = false;
    }
    *o = 0;
    return out;
}

static int add_split(loader_t *l, tokenizer_t *t, const char *pattern, bool literal, const char *where)
{
    int code;
    PCRE2_SIZE offset;
    uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    char *spelled = literal ? strdup(pattern) : white_space_as_oniguruma(l, pattern, where);
    if (!spelled) return -1;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)spelled, PCRE2_ZERO_TERMINATED, options, &code, &offset, NULL);
    free(spelled);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return fail(l, "%s.pattern: %s", where, (const char *)msg);
    }
    // without JIT the interpreter still matches the same, only slower
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_code **splits = realloc(t->splits, (size_t)(t->n_splits + 1) * sizeof *splits);
    if (!splits) {
        pcre2_code_free(re);
        return fail(l, "out of memory");
    }
    t->splits = splits;
    t->splits[t->n_splits++] = re;
    return 0;
}

static int load_pre_tokenizer(loader_t *l, tokenizer_t *t, const cJSON *pre, const char *where, bool *byte_level)
{
    const char *type = type_of(pre);
    if (type && strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
        if (!cJSON_IsArray(list)) return fail(l, "%s.pretokenizers: expected an array", where);
        int i = 0;
        for (const cJSON *p = list->child; p; p = p->next, i++) {
            char inner[96];
            snprintf(inner, sizeof inner, "%s.pretokenizers[%d]", where, i);
            if (load_pre_tokenizer(l, t, p, inner, byte_level) != 0) return -1;
        }
        return 0;
    }
    if (type && strcmp(type, "ByteLevel") == 0) {
        if (is_true(pre, "add_prefix_space")) return fail(l, "%s.add_prefix_space: true is not supported", where);
        *byte_level = true;
        const cJSON *use_regex = cJSON_GetObjectItemCaseSensitive(pre, "use_regex");
        if (use_regex && !cJSON_IsBool(use_regex)) return fail(l, "%s.use_regex: expected true or false", where);
        return !use_regex || cJSON_IsTrue(use_regex) ? add_split(l, t, GPT2_PATTERN, false, where) : 0;
    }
    if (type && strcmp(type, "Split") == 0) {
        const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(pre, "behavior");
        if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0)
            return fail(l, "%s.behavior \"%s\" is not supported (Isolated only)", where,
                        cJSON_IsString(behavior) ? behavior->valuestring : "?");
        if (is_true(pre, "invert")) return fail(l, "%s.invert: true is not supported", where);
        const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(pre, "pattern");
        const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
        const cJSON *string = cJSON_GetObjectItemCaseSensitive(pattern, "String");
        if (cJSON_IsString(regex)) return add_split(l, t, regex->valuestring, false, where);
        if (cJSON_IsString(string)) return add_split(l, t, string->valuestring, true, where);
        return fail(l, "%s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", where);
    }
    return fail(l, "%s.type \"%s\" is not supported (ByteLevel, Split or a Sequence of them)", where,
                type ? type : "?");
}

static int json_id(const cJSON *v, int limit)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= limit || v->valuedouble != (int)v->valuedouble)
        return -1;
    return (int)v->valuedouble;
}

/* the highest id in model.vocab and added_tokens decides the table size */
static int count_ids(loader_t *l, const cJSON *vocab, const cJSON *added, int *size)
{
    int top = -1;
    for (const cJSON *v = vocab->child; v; v = v->next) {
        int id = json_id(v, 1 << 30);
        if (id < 0) return fail(l, "model.vocab[\"%s\"]: expected a non-negative integer id", v->string);
        top = id > top ? id : top;
    }
    int i = 0;
    for (const cJSON *a = added ? added->child : NULL; a; a = a->next, i++) {
        int id = json_id(cJSON_GetObjectItemCaseSensitive(a, "id"), 1 << 30);
        if (id < 0) return fail(l, "added_tokens[%d].id: expected a non-negative integer", i);
        top = id > top ? id : top;
    }
    if (top < 0) return fail(l, "model.vocab: empty");
    *size = top + 1;
    return 0;
}

/* tokenizers does not take an added token's id from the file: a token that
 * is in model.vocab keeps that id, a new one comes after model.vocab and
 * after the added ids so far. A file whose ids disagree would encode
 * differently here and there, so it is refused. */
static int expected_added_id(const tokenizer_t *t, const char *content, int model_count, int top_added)
{
    int32_t id = tokenizer_lookup(t, content, strlen(content));
    if (id >= 0) return id;
    return top_added >= model_count ? top_added + 1 : model_count;
}

static int load_added(loader_t *l, tokenizer_t *t, const cJSON *added, int model_count)
{
    if (!added || cJSON_IsNull(added)) return 0;
    int top_added = -1;
    int count = cJSON_GetArraySize(added);
    t->added = calloc(count ? (size_t)count : 1, sizeof *t->added);
    if (!t->added) return fail(l, "out of memory");
    int i = 0;
    for (const cJSON *a = added->child; a; a = a->next, i++) {
        int id = json_id(cJSON_GetObjectItemCaseSensitive(a, "id"), t->vocab_size);
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        if (id < 0) return fail(l, "added_tokens[%d].id: expected a non-negative integer", i);
        if (!cJSON_IsString(content) || !content->valuestring[0])
            return fail(l, "added_tokens[%d].content: expected a non-empty string", i);
        static const char *unsupported[] = {"lstrip", "rstrip", "single_word"};
        for (int k = 0; k < 3; k++)
            if (is_true(a, unsupported[k]))
                return fail(l, "added_tokens[%d].%s: true is not supported", i, unsupported[k]);
        int want = expected_added_id(t, content->valuestring, model_count, top_added);
        if (id != want)
            return fail(l, "added_tokens[%d].id: %d, but tokenizers gives \"%s\" the id %d", i, id,
                        content->valuestring, want);
        top_added = id > top_added ? id : top_added;
        bool normalized = is_true(a, "normalized");
        const char *s = content->valuestring;
        size_t len = strlen(s);
        utf8proc_uint8_t *nfc = NULL;
        // a normalized token is looked for in normalized text, so in its own normal form
        if (normalized && t->nfc) {
            utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &nfc,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (n < 0) return fail(l, "added_tokens[%d].content: %s", i, utf8proc_errmsg(n));
            s = (const char *)nfc, len = (size_t)n;
        }
        char *copy = strndup(s, len);
        free(nfc);
        if (!copy || tokenizer_set_text(t, id, content->valuestring, strlen(content->valuestring)) != 0) {
            free(copy);
            return fail(l, "out of memory");
        }
        t->added[t->n_added++] = (added_token_t){copy, len, id, normalized};
        t->added_first[normalized][(unsigned char)copy[0]] = true;
    }
    return 0;
}

static int split_merge(loader_t *l, const tokenizer_t *t, const cJSON *m, int i, int32_t *left, int32_t *right)
{
    const char *a, *b;
    size_t alen, blen;
    if (cJSON_IsString(m)) {
        const char *space = strchr(m->valuestring, ' ');
        if (!space || strchr(space + 1, ' '))
            return fail(l, "model.merges[%d]: \"%s\" is not two tokens separated by one space", i, m->valuestring);
        a = m->valuestring, alen = (size_t)(space - a);
        b = space + 1, blen = strlen(b);
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
               cJSON_IsString(m->child->next)) {
        a = m->child->valuestring, alen = strlen(a);
        b = m->child->next->valuestring, blen = strlen(b);
    } else return fail(l, "model.merges[%d]: expected \"a b\" or [\"a\", \"b\"]", i);
    *left = tokenizer_lookup(t, a, alen);
    *right = tokenizer_lookup(t, b, blen);
    if (*left < 0 || !t->in_model[*left])
        return fail(l, "model.merges[%d]: \"%.*s\" is not in model.vocab", i, (int)alen, a);
    if (*right < 0 || !t->in_model[*right])
        return fail(l, "model.merges[%d]: \"%.*s\" is not in model.vocab", i, (int)blen, b);
    return 0;
}

static int load_merges(loader_t *l, tokenizer_t *t, const cJSON *merges)
{
    if (!cJSON_IsArray(merges)) return fail(l, "model.merges: expected an array");
    if (tokenizer_reserve_merges(t, (size_t)cJSON_GetArraySize(merges)) != 0) return fail(l, "out of memory");
    char *joined = NULL;
    size_t cap = 0;
    int i = 0, rc = 0;
    for (const cJSON *m = merges->child; m && rc == 0; m = m->next, i++) {
        int32_t left = -1, right = -1;
        if ((rc = split_merge(l, t, m, i, &left, &right)) != 0) break;
        size_t len = t->text_len[left] + t->text_len[right];
        if (len > cap) {
            char *p = realloc(joined, len);
            if (!p) {
                rc = fail(l, "out of memory");
                break;
            }
            joined = p, cap = len;
        }
        memcpy(joined, t->text[left], t->text_len[left]);
        memcpy(joined + t->text_len[left], t->text[right], t->text_len[right]);
        int32_t id = tokenizer_lookup(t, joined, len);
        if (id < 0 || !t->in_model[id])
            rc = fail(l, "model.merges[%d]: the merged token \"%.*s\" is not in model.vocab", i, (int)len, joined);
        else tokenizer_add_merge(t, left, right, i, id);
    }
    free(joined);
    return rc;
}

static int load_model(loader_t *l, tokenizer_t *t, const cJSON *model, const cJSON *vocab)
{
    if (cJSON_GetObjectItemCaseSensitive(model, "dropout") &&
        !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(model, "dropout")))
        return fail(l, "model.dropout: BPE dropout is not supported (expected null)");
    if (is_true(model, "byte_fallback")) return fail(l, "model.byte_fallback: true is not supported");
    if (is_true(model, "fuse_unk")) return fail(l, "model.fuse_unk: true is not supported");
    if (is_nonempty_string(model, "continuing_subword_prefix"))
        return fail(l, "model.continuing_subword_prefix: not supported (expected empty or null)");
    if (is_nonempty_string(model, "end_of_word_suffix"))
        return fail(l, "model.end_of_word_suffix: not supported (expected empty or null)");
    t->ignore_merges = is_true(model, "ignore_merges");
    for (const cJSON *v = vocab->child; v; v = v->next) {
        int id = (int)v->valuedouble;
        if (tokenizer_set_text(t, id, v->string, strlen(v->string)) != 0) return fail(l, "out of memory");
        t->in_model[id] = true;
    }
    return 0;
}

/* "eos_token" of tokenizer_config.json beside the file, as a string or as
 * {"content": ...}; no file means the <|endoftext|> default */
static int load_eos(loader_t *l, tokenizer_t *t)
{
    const char *slash = strrchr(l->path, '/');
    size_t dir = slash ? (size_t)(slash - l->path) + 1 : 0;
    char *config_path = malloc(dir + sizeof "tokenizer_config.json");
    if (!config_path) return fail(l, "out of memory");
    memcpy(config_path, l->path, dir);
    strcpy(config_path + dir, "tokenizer_config.json");
    size_t len;
    char *data = read_file(config_path, &len);
    t->eos_id = tokenizer_lookup(t, "<|endoftext|>", strlen("<|endoftext|>"));
    int rc = 0;
    if (data) {
        loader_t cl = {config_path, l->err, l->errlen};
        cJSON *config = cJSON_ParseWithLength(data, len);
        const cJSON *eos = cJSON_GetObjectItemCaseSensitive(config, "eos_token");
        if (cJSON_IsObject(eos)) eos = cJSON_GetObjectItemCaseSensitive(eos, "content");
        if (!config) rc = fail(&cl, "malformed JSON");
        else if (cJSON_IsString(eos)) {
            t->eos_id = tokenizer_lookup(t, eos->valuestring, strlen(eos->valuestring));
            if (t->eos_id < 0) rc = fail(&cl, "eos_token: \"%s\" is not a token of %s", eos->valuestring, l->path);
        } else if (eos && !cJSON_IsNull(eos)) rc = fail(&cl, "eos_token: expected a string or {\"content\": ...}");
        cJSON_Delete(config);
        free(data);
    }
    free(config_path);
    return rc;
}

static int load(loader_t *l, tokenizer_t **out, const cJSON *root)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return fail(l, "model: missing");
    const char *type = type_of(model);
    if (!type || strcmp(type, "BPE") != 0)
        return fail(l, "model.type \"%s\" is not supported (byte-level BPE only)", type ? type : "?");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return fail(l, "model.vocab: expected an object of token -> id");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)) return fail(l, "added_tokens: expected an array");
    const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (!decoder || !type_of(decoder) || strcmp(type_of(decoder), "ByteLevel") != 0)
        return fail(l, "decoder.type \"%s\" is not supported (ByteLevel only)",
                    decoder && type_of(decoder) ? type_of(decoder) : "?");
    int size = 0;
    if (count_ids(l, vocab, added, &size) != 0) return -1;
    tokenizer_t *t = *out = tokenizer_alloc(TOKENIZER_BPE, size);
    if (!t) return fail(l, "out of memory");
    if (load_normalizer(l, t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), "normalizer") != 0 ||
        load_model(l, t, model, vocab) != 0)
        return -1;
    // model.vocab first, so that added tokens can be looked up in it (and in each other)
    tokenizer_index(t);
    if (!t->slots || load_added(l, t, added, cJSON_GetArraySize(vocab)) != 0)
        return t->slots ? -1 : fail(l, "out of memory");
    bool byte_level = false;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!pre || cJSON_IsNull(pre)) return fail(l, "pre_tokenizer: missing (byte-level BPE needs a ByteLevel step)");
    if (load_pre_tokenizer(l, t, pre, "pre_tokenizer", &byte_level) != 0) return -1;
    if (!byte_level) return fail(l, "pre_tokenizer: no ByteLevel step (byte-level BPE only)");
    tokenizer_index(t);
    if (!t->slots) return fail(l, "out of memory");
    if (load_merges(l, t, cJSON_GetObjectItemCaseSensitive(model, "merges")) != 0) return -1;
    tokenizer_byte_level_init(t);
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk) && (t->unk_id = tokenizer_lookup(t, unk->valuestring, strlen(unk->valuestring))) < 0)
        return fail(l, "model.unk_token: \"%s\" is not in model.vocab", unk->valuestring);
    return 0;
}

tokenizer_t *tokenizer_from_json(const cJSON *root, const char *where, const char *eos_token, char *err, size_t errlen)
{
    loader_t l = {where, err, errlen};
    tokenizer_t *t = NULL;
    if (load(&l, &t, root) != 0) tokenizer_destroy(&t);
    else if ((t->eos_id = tokenizer_lookup(t, eos_token, strlen(eos_token))) < 0) {
        fail(&l, "the end-of-sequence token \"%s\" is not in the vocabulary", eos_token);
        tokenizer_destroy(&t);
    }
    return t;
}

tokenizer_t *tokenizer_load(const char *path, char *err, size_t errlen)
{
    loader_t l = {path, err, errlen};
    size_t len;
    char *data = read_file(path, &len);
    if (!data) {
        fail(&l, "cannot read: %s", strerror(errno));
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(data, len);
    tokenizer_t *t = NULL;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        fail(&l, "malformed JSON near byte %zu",
             at && at >= data && at <= data + len ? (size_t)(at - data) : (size_t)0);
    } else if (load(&l, &t, root) != 0 || load_eos(&l, t) != 0) tokenizer_destroy(&t);
    cJSON_Delete(root);
    free(data);
    return t;
}
