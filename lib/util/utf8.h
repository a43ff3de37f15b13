/* Whether bytes are valid UTF-8: what a record from outside must be before
 * its text is read (screen.c, the game's outputs) and what the tokenizer
 * encodes. */
#ifndef SAPO_UTF8_H
#define SAPO_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* the n bytes of s are well-formed UTF-8: no overlong forms, surrogates,
 * code points above U+10FFFF or cut sequences */
bool utf8_valid(const char *s, size_t n);

#endif
