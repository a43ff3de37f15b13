/* Text <-> token ids for the policy model.
 *
 * Two kinds behind one type:
 *  - the byte tokenizer of the tiny default model: ids 0..255 are the bytes
 *    themselves, then the special tokens
 *        256 <|endoftext|>   (eos)
 *        257 <|im_start|>
 *        258 <|im_end|>
 *        259 <|pad|>
 *    vocab_size 260. No normalisation: decode(encode(x)) == x for valid UTF-8.
 *  - Hugging Face byte-level BPE read from tokenizer.json (Qwen2, Qwen2.5,
 *    Qwen3 and anything built the same way), giving the ids that the Python
 *    `tokenizers` library gives, or from a GGUF file's metadata.
 *
 * encode never adds special tokens (no BOS/EOS, the post_processor is not
 * applied), but special and other added tokens written inside the text are
 * split out first and become their own ids, as `tokenizers` does by default.
 *
 * Thread safety: a tokenizer is read-only after it is made; encode and decode
 * may run on one tokenizer from several threads at once (each call allocates
 * its own scratch). */
#ifndef SAPO_TOKENIZER_H
#define SAPO_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct tokenizer_t tokenizer_t;

tokenizer_t *tokenizer_byte_new(void);

/* Loads a tokenizer.json. The end-of-sequence token is "eos_token" from a
 * tokenizer_config.json in the same folder when there is one, else
 * <|endoftext|>. NULL on failure, with one line naming the file and the field
 * in err. */
tokenizer_t *tokenizer_load(const char *tokenizer_json_path, char *err, size_t errlen);

/* The byte-level BPE a GGUF file's metadata describes (tokenizer.ggml.*:
 * tokens, merges, token types, the pre-tokenizer's name), with its
 * eos_token_id as the end of sequence; the same ids as the tokenizer.json
 * tokenizer_gguf_save writes. NULL with one line in err naming the file
 * and the key: another tokenizer kind, a pre-tokenizer sapo does not
 * know. */
tokenizer_t *tokenizer_from_gguf(const gguf_t *g, char *err, size_t errlen);

/* Writes that tokenizer as dir/tokenizer.json and dir/tokenizer_config.json
 * (eos, bos and pad tokens, the chat template), so that a folder of
 * weights saved beside them opens in transformers and in tokenizer_load.
 * 0, or -1 with err. */
int tokenizer_gguf_save(const gguf_t *g, const char *dir, char *err, size_t errlen);

void tokenizer_destroy(tokenizer_t **self_p);

/* text is UTF-8 of len bytes (NUL bytes allowed). On success *ids is a
 * malloc'ed array of *n ids (the caller frees it; an empty text gives *n 0)
 * and 0 is returned; invalid UTF-8 gives -1 and no array. */
int tokenizer_encode(const tokenizer_t *self, const char *text, size_t len, int32_t **ids, size_t *n);

/* malloc'ed NUL-terminated UTF-8; bytes that do not form valid UTF-8 (a
 * character cut between tokens, an id out of range) become U+FFFD, as in
 * `tokenizers`. NULL only when out of memory. */
char *tokenizer_decode(const tokenizer_t *self, const int32_t *ids, size_t n);

int tokenizer_vocab_size(const tokenizer_t *self);
int tokenizer_eos_id(const tokenizer_t *self);

/* id of a token given as it is written in the vocabulary (for BPE the
 * byte-level form, "Ġthe"), added tokens included; -1 if none */
int tokenizer_token_id(const tokenizer_t *self, const char *token);

/* the vocabulary string of an id (NULL if out of range); the byte tokenizer
 * has no strings for ids below 256 and returns NULL for them */
const char *tokenizer_token_text(const tokenizer_t *self, int id);

/* Prompt formats.
 *  PROMPT_CHATML: as Qwen instruct models are prompted,
 *      "<|im_start|>system\n{system}<|im_end|>\n"   (only when system != NULL)
 *      "<|im_start|>user\n{user}<|im_end|>\n"
 *      "<|im_start|>assistant\n"
 *    Qwen2.5's chat template adds its own default system line when none is
 *    given; pass that text as system to reproduce it.
 *  PROMPT_PLAIN: for tiny self-trained models,
 *      "{system}\n\n"                                 (only when system != NULL)
 *      "Question: {user}\nAnswer:"
 *    the completion is expected to start with a space. */
typedef enum { PROMPT_PLAIN, PROMPT_CHATML } prompt_format_t;

/* malloc'ed prompt text; user NULL counts as empty */
char *prompt_format(prompt_format_t fmt, const char *system, const char *user);

/* "plain" or "chatml"; -1 for any other name */
int prompt_format_from_name(const char *name);

#endif
