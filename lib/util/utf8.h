/* Strict UTF-8 validation, for text that comes from other nodes (the
 * pool's screen, the game's stage outputs). */
#ifndef SAPO_UTF8_H
#define SAPO_UTF8_H

#include <stddef.h>

/* Whether s[0..n) is valid UTF-8 (shortest forms, no surrogates, at most
 * U+10FFFF). */
int utf8_valid(const char *s, size_t n);

#endif
