/* Inside of tokenizer_t, shared by the files of lib/tokenizer only. */
#ifndef SAPO_TOKENIZER_IMPL_H
#define SAPO_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include "tokenizer/tokenizer.h"

typedef enum { TOKENIZER_BYTE, TOKENIZER_BPE } tokenizer_kind_t;

typedef struct {
    char *content;
    size_t len;
    int32_t id;
    bool normalized; // matched after NFC rather than on the raw text
} added_token_t;

typedef struct {
    uint64_t key; // left id << 32 | right id; UINT64_MAX marks an empty slot
    int32_t rank;
    int32_t id; // id of the merged token
} merge_slot_t;

struct tokenizer_t {
    tokenizer_kind_t kind;
    int vocab_size;     // highest id + 1
    char **text;        // (vocab_size) token string per id, NULL for unused ids
    uint32_t *text_len; // (vocab_size)
    bool *in_model;     // (vocab_size) id belongs to model.vocab, not only to added_tokens
    int32_t *slots;     // string -> id, open addressing over text[], -1 empty
    size_t slot_mask;
    merge_slot_t *merges; // (left, right) -> rank and merged id
    size_t merge_mask;
    int32_t byte_id[256];   // id of the one-character token of each byte, -1 if absent
    int16_t char_byte[512]; // byte-level code point -> byte, -1 if not one of the 256
    char byte_utf8[256][2]; // UTF-8 of each byte's code point (all below U+0800)
    uint8_t byte_utf8_len[256];
    added_token_t *added;
    int n_added;
    bool added_first[2][256]; // [normalized] first bytes that may start an added token
    pcre2_code **splits;      // pre-tokenizer regexes, applied one after another
    int n_splits;
    bool nfc;
    bool ignore_merges;
    int32_t unk_id;
    int32_t eos_id;
};

/* shared by the byte tokenizer and the loader */
tokenizer_t *tokenizer_alloc(tokenizer_kind_t kind, int vocab_size);
int tokenizer_set_text(tokenizer_t *self, int32_t id, const char *s, size_t len);
void tokenizer_index(tokenizer_t *self);
int32_t tokenizer_lookup(const tokenizer_t *self, const char *s, size_t len);
int tokenizer_reserve_merges(tokenizer_t *self, size_t count);
int tokenizer_add_merge(tokenizer_t *self, int32_t left, int32_t right, int32_t rank, int32_t id);
void tokenizer_byte_level_init(tokenizer_t *self);

/* a tokenizer from a parsed tokenizer.json (tokenizer_json.c), where
 * naming it in errors, with eos_token as its end-of-sequence token */
typedef struct cJSON cJSON;
tokenizer_t *tokenizer_from_json(const cJSON *root, const char *where, const char *eos_token, char *err, size_t errlen);
/* the tokenizer.json a GGUF's tokenizer metadata stands for
 * (tokenizer_gguf.c), or NULL with err */
cJSON *tokenizer_gguf_json(const gguf_t *g, char *err, size_t errlen);

#endif
