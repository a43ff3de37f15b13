/* Python string semantics the reasoning-gym scorers depend on: str.strip()
 * with Unicode whitespace, len() in code points, int(str), str.lower() and
 * str.title(). Scores must match to the last case, so these follow CPython,
 * not the C library's locale. */
#ifndef SAPO_TASKS_PY_H
#define SAPO_TASKS_PY_H

#include <stddef.h>
#include <stdint.h>

/* One code point from UTF-8 at s (n bytes left, n > 0); returns the bytes
 * used. A malformed byte is taken as itself, one byte long. */
size_t py_utf8_next(const char *s, size_t n, uint32_t *cp);

int py_isspace(uint32_t cp);

/* str.strip(): narrows [*s, *s + *n) to drop leading and trailing whitespace */
void py_strip(const char **s, size_t *n);

/* len(str) */
size_t py_len(const char *s, size_t n);

/* The decimal digit value of a Unicode Nd code point, or -1. */
int py_digit(uint32_t cp);

enum { PY_INT_BAD = 0, PY_INT_OK = 1, PY_INT_BIG = 2 };
/* int(str) in base 10: surrounding whitespace, a sign, digits (any Unicode
 * decimal digits) with single underscores between them. PY_INT_OK with *out
 * set, PY_INT_BIG when valid but outside int64, PY_INT_BAD for ValueError. */
int py_int(const char *s, size_t n, int64_t *out);

enum { PY_FLOAT_BAD = 0, PY_FLOAT_OK = 1 };
/* float(str): surrounding whitespace, a sign, then inf, infinity or nan in
 * any case, or decimal digits (any Unicode decimal digits, single
 * underscores between digits) with an optional point and exponent;
 * correctly rounded, out of range to +-inf as Python does. PY_FLOAT_BAD
 * for ValueError. */
int py_float(const char *s, size_t n, double *out);

/* str.lower() and str.title() with simple (one to one) case mappings; a new
 * NUL-terminated string the caller frees. */
char *py_lower(const char *s, size_t n);
char *py_title(const char *s, size_t n);

#endif
