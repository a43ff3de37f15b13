/* Python's string semantics that reasoning-gym's scorers rely on, so
 * that scores match CPython's to the last case. */
#include "tasks/py.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utf8proc.h>

size_t py_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (k <= 0) {
        *cp = (unsigned char)s[0];
        return 1;
    }
    *cp = (uint32_t)c;
    return (size_t)k;
}

/* CPython's _PyUnicode_IsWhitespace: bidirectional types WS, B, S plus the
 * Zs separators */
int py_isspace(uint32_t c)
{
    switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2000:
    case 0x2001:
    case 0x2002:
    case 0x2003:
    case 0x2004:
    case 0x2005:
    case 0x2006:
    case 0x2007:
    case 0x2008:
    case 0x2009:
    case 0x200A:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return 1;
    default: return 0;
    }
}

void py_strip(const char **s, size_t *n)
{
    const char *p = *s, *end = *s + *n;
    while (p < end) {
        uint32_t c;
        size_t k = py_utf8_next(p, (size_t)(end - p), &c);
        if (!py_isspace(c)) break;
        p += k;
    }
    /* walk back over whole code points: continuation bytes are 10xxxxxx */
    while (end > p) {
        const char *q = end - 1;
        while (q > p && ((unsigned char)*q & 0xC0) == 0x80) q--;
        uint32_t c;
        py_utf8_next(q, (size_t)(end - q), &c);
        if (!py_isspace(c)) break;
        end = q;
    }
    *s = p;
    *n = (size_t)(end - p);
}

size_t py_len(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; count++) {
        uint32_t c;
        i += py_utf8_next(s + i, n - i, &c);
    }
    return count;
}

int py_digit(uint32_t c)
{
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c < 0x80 || utf8proc_category((utf8proc_int32_t)c) != UTF8PROC_CATEGORY_ND) return -1;
    /* Unicode lays every decimal digit set out as a run starting at zero,
     * and adjacent sets (the mathematical digits) come in whole tens */
    uint32_t start = c;
    while (start > 0 && utf8proc_category((utf8proc_int32_t)(start - 1)) == UTF8PROC_CATEGORY_ND) start--;
    return (int)((c - start) % 10);
}

int py_int(const char *s, size_t n, int64_t *out)
{
    py_strip(&s, &n);
    const char *p = s, *end = s + n;
    int neg = 0;
    if (p < end && (*p == '+' || *p == '-')) neg = *p++ == '-';
    if (p == end) return PY_INT_BAD;
    uint64_t v = 0;
    int big = 0, prev_digit = 0;
    size_t ndigits = 0;
    while (p < end) {
        uint32_t c;
        size_t k = py_utf8_next(p, (size_t)(end - p), &c);
        if (c == '_') {
            if (!prev_digit) return PY_INT_BAD;
            prev_digit = 0;
        } else {
            int d = py_digit(c);
            if (d < 0) return PY_INT_BAD;
            if (v > (UINT64_MAX - (uint64_t)d) / 10) big = 1;
            else v = v * 10 + (uint64_t)d;
            prev_digit = 1;
            ndigits++;
        }
        p += k;
    }
    /* CPython 3.11 refuses to convert more than 4300 digits (ValueError) */
    if (!prev_digit || ndigits > 4300) return PY_INT_BAD;
    if (big || v > (uint64_t)INT64_MAX + (uint64_t)neg) return PY_INT_BIG;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return PY_INT_OK;
}

/* CPython's float_from_string: Unicode digits to ASCII, underscores only
 * between two digits, then the grammar of PyOS_string_to_double (no hex,
 * no "nan(...)", which strtod alone would take). */
int py_float(const char *s, size_t n, double *out)
{
    py_strip(&s, &n);
    char *a = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        i += py_utf8_next(s + i, n - i, &c);
        int d = py_digit(c);
        if (d >= 0) a[k++] = (char)('0' + d);
        else if (c < 0x80) a[k++] = (char)c;
        else {
            free(a);
            return PY_FLOAT_BAD;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (a[i] == '_') {
            if (i == 0 || i + 1 == k || !isdigit((unsigned char)a[i - 1]) || !isdigit((unsigned char)a[i + 1])) {
                free(a);
                return PY_FLOAT_BAD;
            }
            continue;
        }
        a[m++] = a[i];
    }
    a[m] = '\0';
    const char *p = a;
    if (*p == '+' || *p == '-') p++;
    int ok;
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity") || !strcasecmp(p, "nan")) ok = 1;
    else {
        size_t digits = 0;
        while (isdigit((unsigned char)*p)) p++, digits++;
        if (*p == '.')
            for (p++; isdigit((unsigned char)*p); p++) digits++;
        ok = digits > 0;
        if (ok && (*p == 'e' || *p == 'E')) {
            p++;
            if (*p == '+' || *p == '-') p++;
            ok = isdigit((unsigned char)*p);
            while (isdigit((unsigned char)*p)) p++;
        }
        ok = ok && *p == '\0';
    }
    if (ok) *out = strtod(a, NULL);
    free(a);
    return ok ? PY_FLOAT_OK : PY_FLOAT_BAD;
}

static int is_cased(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static char *map_case(const char *s, size_t n, int title)
{
    char *out = malloc(4 * n + 1), *w = out;
    if (!out) return NULL;
    int prev_cased = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = py_utf8_next(s + i, n - i, &c);
        uint32_t m = (uint32_t)(title && !prev_cased ? utf8proc_totitle((utf8proc_int32_t)c)
                                                     : utf8proc_tolower((utf8proc_int32_t)c));
        if (k == 1 && c >= 0x80) *w++ = s[i]; /* a malformed byte passes through as is */
        else w += utf8proc_encode_char((utf8proc_int32_t)m, (utf8proc_uint8_t *)w);
        prev_cased = is_cased(c);
        i += k;
    }
    *w = '\0';
    return out;
}

char *py_lower(const char *s, size_t n) { return map_case(s, n, 0); }
char *py_title(const char *s, size_t n) { return map_case(s, n, 1); }
