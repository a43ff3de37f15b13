/* Encoding and decoding for both tokenizer kinds, and the byte tokenizer.
 *
 * Encoding follows the order of Hugging Face `tokenizers`: added tokens that
 * are not normalized are cut out of the raw text first; each remaining piece
 * is NFC-normalised, normalized added tokens are cut out of that; the rest
 * goes through the pre-tokenizer regexes (each match and each gap between
 * matches becomes a pre-token, "Isolated") and every pre-token is merged
 * with BPE on its bytes. */
#include "tokenizer/tokenizer_impl.h"
#include "util/utf8.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static const char *BYTE_SPECIALS[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"};

/* ---- tables ---- */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_pair(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static size_t table_size(size_t count)
{
    size_t n = 16;
    while (n < 2 * count) n <<= 1;
    return n;
}

tokenizer_t *tokenizer_alloc(tokenizer_kind_t kind, int vocab_size)
{
    tokenizer_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->kind = kind;
    self->vocab_size = vocab_size;
    self->text = calloc(vocab_size, sizeof *self->text);
    self->text_len = calloc(vocab_size, sizeof *self->text_len);
    self->in_model = calloc(vocab_size, sizeof *self->in_model);
    self->unk_id = -1;
    self->eos_id = -1;
    memset(self->byte_id, 0xff, sizeof self->byte_id);
    if (!self->text || !self->text_len || !self->in_model) tokenizer_destroy(&self);
    return self;
}

int tokenizer_set_text(tokenizer_t *self, int32_t id, const char *s, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, s, len);
    copy[len] = 0;
    free(self->text[id]);
    self->text[id] = copy;
    self->text_len[id] = (uint32_t)len;
    return 0;
}

int32_t tokenizer_lookup(const tokenizer_t *self, const char *s, size_t len)
{
    if (!self->slots) return -1;
    for (size_t i = hash_bytes(s, len) & self->slot_mask;; i = (i + 1) & self->slot_mask) {
        int32_t id = self->slots[i];
        if (id < 0) return -1;
        if (self->text_len[id] == len && memcmp(self->text[id], s, len) == 0) return id;
    }
}

/* builds string -> id over every id that has a text; an id whose string
 * repeats an earlier one stays reachable by id only */
void tokenizer_index(tokenizer_t *self)
{
    size_t count = 0;
    for (int id = 0; id < self->vocab_size; id++) count += self->text[id] != NULL;
    size_t size = table_size(count);
    free(self->slots);
    self->slots = malloc(size * sizeof *self->slots);
    if (!self->slots) return;
    memset(self->slots, 0xff, size * sizeof *self->slots);
    self->slot_mask = size - 1;
    for (int id = 0; id < self->vocab_size; id++) {
        if (!self->text[id] || tokenizer_lookup(self, self->text[id], self->text_len[id]) >= 0) continue;
        size_t i = hash_bytes(self->text[id], self->text_len[id]) & self->slot_mask;
        while (self->slots[i] >= 0) i = (i + 1) & self->slot_mask;
        self->slots[i] = id;
    }
}

int tokenizer_reserve_merges(tokenizer_t *self, size_t count)
{
    size_t size = table_size(count);
    self->merges = malloc(size * sizeof *self->merges);
    if (!self->merges) return -1;
    for (size_t i = 0; i < size; i++) self->merges[i].key = UINT64_MAX;
    self->merge_mask = size - 1;
    return 0;
}

static const merge_slot_t *merge_find(const tokenizer_t *self, int32_t left, int32_t right)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t i = hash_pair(key) & self->merge_mask;; i = (i + 1) & self->merge_mask) {
        if (self->merges[i].key == key) return &self->merges[i];
        if (self->merges[i].key == UINT64_MAX) return NULL;
    }
}

/* a pair listed twice keeps its first (lowest) rank, as tokenizers does */
int tokenizer_add_merge(tokenizer_t *self, int32_t left, int32_t right, int32_t rank, int32_t id)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t i = hash_pair(key) & self->merge_mask;
    while (self->merges[i].key != UINT64_MAX) {
        if (self->merges[i].key == key) return 0;
        i = (i + 1) & self->merge_mask;
    }
    self->merges[i] = (merge_slot_t){key, rank, id};
    return 0;
}

/* GPT-2 keeps printable Latin-1 bytes as themselves and moves the other 68
 * bytes to U+0100 onwards, so every token is printable text */
static uint32_t byte_char(int byte)
{
    if ((byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF))
        return (uint32_t)byte;
    int shifted = 0;
    for (int b = 0; b < byte; b++)
        shifted += !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF));
    return 256u + (uint32_t)shifted;
}

void tokenizer_byte_level_init(tokenizer_t *self)
{
    memset(self->char_byte, 0xff, sizeof self->char_byte);
    for (int b = 0; b < 256; b++) {
        uint32_t cp = byte_char(b);
        self->char_byte[cp] = (int16_t)b;
        utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)self->byte_utf8[b]);
        self->byte_utf8_len[b] = (uint8_t)n;
        self->byte_id[b] = tokenizer_lookup(self, self->byte_utf8[b], (size_t)n);
    }
}

/* ---- the byte tokenizer ---- */

tokenizer_t *tokenizer_byte_new(void)
{
    int n_special = (int)(sizeof BYTE_SPECIALS / sizeof *BYTE_SPECIALS);
    tokenizer_t *self = tokenizer_alloc(TOKENIZER_BYTE, 256 + n_special);
    if (!self) return NULL;
    self->added = calloc(n_special, sizeof *self->added);
    if (!self->added) {
        tokenizer_destroy(&self);
        return NULL;
    }
    for (int i = 0; i < n_special; i++) {
        size_t len = strlen(BYTE_SPECIALS[i]);
        if (tokenizer_set_text(self, 256 + i, BYTE_SPECIALS[i], len) != 0) {
            tokenizer_destroy(&self);
            return NULL;
        }
        self->added[i] = (added_token_t){self->text[256 + i], len, 256 + i, false};
        self->added_first[0][(unsigned char)BYTE_SPECIALS[i][0]] = true;
    }
    self->n_added = n_special;
    self->eos_id = 256;
    tokenizer_index(self);
    if (!self->slots) tokenizer_destroy(&self);
    return self;
}

void tokenizer_destroy(tokenizer_t **self_p)
{
    tokenizer_t *self = *self_p;
    if (!self) return;
    if (self->text)
        for (int id = 0; id < self->vocab_size; id++) free(self->text[id]);
    free(self->text);
    free(self->text_len);
    free(self->in_model);
    free(self->slots);
    free(self->merges);
    if (self->kind == TOKENIZER_BPE)
        for (int i = 0; i < self->n_added; i++) free(self->added[i].content);
    free(self->added);
    for (int i = 0; i < self->n_splits; i++) pcre2_code_free(self->splits[i]);
    free(self->splits);
    free(self);
    *self_p = NULL;
}

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence at s, or minus the length of the
 * invalid prefix to replace with one U+FFFD (the "maximal subpart" rule that
 * Rust's from_utf8_lossy and so tokenizers use). */
static int utf8_step(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    int width;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) width = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        width = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        width = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return -1;
    for (int i = 1; i < width; i++) {
        if ((size_t)i >= avail || s[i] < lo || s[i] > hi) return -i;
        lo = 0x80, hi = 0xBF;
    }
    return width;
}

/* ---- encoding ---- */

typedef struct {
    int32_t id;
    int32_t prev, next; // neighbours in the word, -1 at the ends; id -1 once merged away
} symbol_t;

typedef struct {
    int32_t rank;
    int32_t pos;
    int32_t left, right; // the ids the pair had when it was queued
    int32_t id;
} candidate_t;

typedef struct {
    const tokenizer_t *tok;
    int32_t *ids;
    size_t n, cap;
    symbol_t *sym;
    candidate_t *heap;
    size_t sym_cap, heap_n, heap_cap;
    pcre2_match_data **match; // one per split regex
    char *bytes;              // byte-level form of a pre-token, for ignore_merges
    size_t bytes_cap;
    bool failed;
} encoder_t;

static void emit(encoder_t *e, int32_t id)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        int32_t *ids = realloc(e->ids, cap * sizeof *ids);
        if (!ids) {
            e->failed = true;
            return;
        }
        e->ids = ids, e->cap = cap;
    }
    e->ids[e->n++] = id;
}

static bool candidate_less(const candidate_t *a, const candidate_t *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(encoder_t *e, candidate_t c)
{
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!candidate_less(&c, &e->heap[parent])) break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = c;
}

static candidate_t heap_pop(encoder_t *e)
{
    candidate_t top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= e->heap_n) break;
        if (child + 1 < e->heap_n && candidate_less(&e->heap[child + 1], &e->heap[child])) child++;
        if (!candidate_less(&e->heap[child], &last)) break;
        e->heap[i] = e->heap[child];
        i = child;
    }
    if (e->heap_n) e->heap[i] = last;
    return top;
}

static void queue_pair(encoder_t *e, int32_t pos)
{
    int32_t next = e->sym[pos].next;
    if (next < 0) return;
    const merge_slot_t *m = merge_find(e->tok, e->sym[pos].id, e->sym[next].id);
    if (m) heap_push(e, (candidate_t){m->rank, pos, e->sym[pos].id, e->sym[next].id, m->id});
}

static bool ensure_scratch(encoder_t *e, size_t len)
{
    if (len <= e->sym_cap) return true;
    size_t cap = len < 64 ? 64 : len;
    free(e->sym);
    free(e->heap);
    free(e->bytes);
    e->sym = malloc(cap * sizeof *e->sym);
    // each merge queues at most two new pairs, after len - 1 at the start
    e->heap = malloc(3 * cap * sizeof *e->heap);
    e->bytes = malloc(2 * cap);
    e->sym_cap = e->heap_cap = e->bytes_cap = 0;
    if (!e->sym || !e->heap || !e->bytes) return false;
    e->sym_cap = cap, e->heap_cap = 3 * cap, e->bytes_cap = 2 * cap;
    return true;
}

/* BPE on one pre-token: start from one symbol per byte and always merge the
 * pair of lowest rank (leftmost on ties) until no listed pair is left */
static void bpe_word(encoder_t *e, const char *p, size_t len)
{
    const tokenizer_t *t = e->tok;
    if (!ensure_scratch(e, len)) {
        e->failed = true;
        return;
    }
    if (t->ignore_merges) {
        size_t m = 0;
        for (size_t i = 0; i < len; i++) {
            unsigned char b = (unsigned char)p[i];
            memcpy(e->bytes + m, t->byte_utf8[b], t->byte_utf8_len[b]);
            m += t->byte_utf8_len[b];
        }
        int32_t id = tokenizer_lookup(t, e->bytes, m);
        if (id >= 0 && t->in_model[id]) {
            emit(e, id);
            return;
        }
    }
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_id[(unsigned char)p[i]];
        if (id < 0) id = t->unk_id;
        if (id < 0) continue;
        e->sym[n] = (symbol_t){id, n - 1, -1};
        if (n > 0) e->sym[n - 1].next = n;
        n++;
    }
    e->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) queue_pair(e, i);
    while (e->heap_n) {
        candidate_t c = heap_pop(e);
        symbol_t *s = &e->sym[c.pos];
        if (s->id != c.left || s->next < 0 || e->sym[s->next].id != c.right) continue;
        symbol_t *r = &e->sym[s->next];
        s->id = c.id;
        s->next = r->next;
        if (r->next >= 0) e->sym[r->next].prev = c.pos;
        r->id = -1;
        if (s->prev >= 0) queue_pair(e, s->prev);
        queue_pair(e, c.pos);
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = e->sym[i].next) emit(e, e->sym[i].id);
}

/* the pre-tokenizer: regex `level` splits s into matches and the gaps
 * between them, each handed to the next level, the last level to BPE */
static void pre_tokenize(encoder_t *e, int level, const char *s, size_t len)
{
    if (len == 0) return;
    if (level == e->tok->n_splits) {
        bpe_word(e, s, len);
        return;
    }
    pcre2_code *re = e->tok->splits[level];
    pcre2_match_data *md = e->match[level];
    size_t at = 0, done = 0;
    while (at < len && !e->failed) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, len, at, PCRE2_NO_UTF_CHECK, md, NULL);
        // JIT keeps its backtracking on 32 KiB of machine stack; the interpreter keeps it
        // on the heap, so a pattern that backtracks over a long input still matches
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)s, len, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            e->failed = true;
            return;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {
            // an empty match splits nothing; step one character on
            at = ov[0] + 1;
            while (at < len && ((unsigned char)s[at] & 0xC0) == 0x80) at++;
            continue;
        }
        pre_tokenize(e, level + 1, s + done, ov[0] - done);
        pre_tokenize(e, level + 1, s + ov[0], ov[1] - ov[0]);
        done = at = ov[1];
    }
    pre_tokenize(e, level + 1, s + done, len - done);
}

/* cuts the added tokens of one class (normalized or not) out of s, leftmost
 * first and the longest of those starting there, and hands the text between
 * them to `rest` */
static void split_added(encoder_t *e, bool normalized, const char *s, size_t len,
                        void (*rest)(encoder_t *, const char *, size_t))
{
    const tokenizer_t *t = e->tok;
    size_t done = 0;
    for (size_t i = 0; i < len && !e->failed;) {
        const added_token_t *best = NULL;
        if (t->added_first[normalized][(unsigned char)s[i]])
            for (int k = 0; k < t->n_added; k++) {
                const added_token_t *a = &t->added[k];
                if (a->normalized == normalized && a->len <= len - i && (!best || a->len > best->len) &&
                    memcmp(s + i, a->content, a->len) == 0)
                    best = a;
            }
        if (!best) {
            i++;
            continue;
        }
        rest(e, s + done, i - done);
        emit(e, best->id);
        i += best->len;
        done = i;
    }
    rest(e, s + done, len - done);
}

static void after_normalized_added(encoder_t *e, const char *s, size_t len) { pre_tokenize(e, 0, s, len); }

static void normalize_then_split(encoder_t *e, const char *s, size_t len)
{
    if (len == 0 || e->failed) return;
    bool ascii = true;
    for (size_t i = 0; i < len && ascii; i++) ascii = (unsigned char)s[i] < 0x80;
    if (!e->tok->nfc || ascii) {
        split_added(e, true, s, len, after_normalized_added);
        return;
    }
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n =
        utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (n < 0) e->failed = true;
    else split_added(e, true, (const char *)nfc, (size_t)n, after_normalized_added);
    free(nfc);
}

static void bytes_out(encoder_t *e, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) emit(e, (unsigned char)s[i]);
}

int tokenizer_encode(const tokenizer_t *self, const char *text, size_t len, int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (!utf8_valid(text, len)) return -1;
    encoder_t e = {.tok = self};
    if (self->kind == TOKENIZER_BYTE) {
        split_added(&e, false, text, len, bytes_out);
    } else {
        e.match = calloc(self->n_splits ? self->n_splits : 1, sizeof *e.match);
        e.failed = !e.match;
        for (int i = 0; i < self->n_splits && !e.failed; i++)
            e.failed = !(e.match[i] = pcre2_match_data_create_from_pattern(self->splits[i], NULL));
        if (!e.failed) split_added(&e, false, text, len, normalize_then_split);
        for (int i = 0; e.match && i < self->n_splits; i++) pcre2_match_data_free(e.match[i]);
        free(e.match);
    }
    free(e.sym);
    free(e.heap);
    free(e.bytes);
    if (e.failed) {
        free(e.ids);
        return -1;
    }
    *ids = e.ids;
    *n = e.n;
    return 0;
}

/* ---- decoding ---- */

typedef struct {
    char *p;
    size_t n, cap;
} buf_t;

static bool buf_put(buf_t *b, const void *s, size_t len)
{
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    return true;
}

/* a token's bytes: byte-level characters back to bytes when every character
 * of it is one, else its text as it is (as the ByteLevel decoder does) */
static bool token_bytes(const tokenizer_t *t, int32_t id, buf_t *raw)
{
    const char *s = t->text[id];
    size_t len = t->text_len[id], start = raw->n;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t step = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (step <= 0 || cp >= 512 || t->char_byte[cp] < 0) {
            raw->n = start;
            return buf_put(raw, s, len);
        }
        unsigned char b = (unsigned char)t->char_byte[cp];
        if (!buf_put(raw, &b, 1)) return false;
        i += (size_t)step;
    }
    return true;
}

char *tokenizer_decode(const tokenizer_t *self, const int32_t *ids, size_t n)
{
    buf_t raw = {0}, out = {0};
    bool ok = buf_put(&raw, "", 0) && buf_put(&out, "", 0);
    for (size_t i = 0; i < n && ok; i++) {
        int32_t id = ids[i];
        // ids without a token are left out, as tokenizers does
        if (id < 0 || id >= self->vocab_size) continue;
        if (self->kind == TOKENIZER_BYTE && id < 256) {
            unsigned char b = (unsigned char)id;
            ok = buf_put(&raw, &b, 1);
        } else if (self->text[id])
            ok = self->kind == TOKENIZER_BYTE ? buf_put(&raw, self->text[id], self->text_len[id])
                                              : token_bytes(self, id, &raw);
    }
    for (size_t i = 0; i < raw.n && ok;) {
        int step = utf8_step((const unsigned char *)raw.p + i, raw.n - i);
        if (step > 0) {
            ok = buf_put(&out, raw.p + i, (size_t)step);
            i += (size_t)step;
        } else {
            ok = buf_put(&out, "\xEF\xBF\xBD", 3);
            i += (size_t)-step;
        }
    }
    free(raw.p);
    if (!ok) {
        free(out.p);
        return NULL;
    }
    out.p[out.n] = 0;
    return out.p;
}

/* ---- lookups ---- */

int tokenizer_vocab_size(const tokenizer_t *self) { return self->vocab_size; }

int tokenizer_eos_id(const tokenizer_t *self) { return self->eos_id; }

int tokenizer_token_id(const tokenizer_t *self, const char *token)
{
    return tokenizer_lookup(self, token, strlen(token));
}

const char *tokenizer_token_text(const tokenizer_t *self, int id)
{
    return id >= 0 && id < self->vocab_size ? self->text[id] : NULL;
}
