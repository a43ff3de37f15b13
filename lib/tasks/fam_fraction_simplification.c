/* fraction_simplification: reduce a fraction to lowest terms, written in one
 * of four styles (plain a/b, $a/b$, $\frac{a}{b}$, $\dfrac{a}{b}$). Partial
 * credit as reasoning-gym: 0.1 when the numerator or the denominator is the
 * unreduced one, 0.05 for any other fraction, 0.01 for no fraction at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "tasks/py.h"
#include "tasks/rng.h"
#include "tasks/task.h"

static const char *const all_styles[] = {"plain", "latex_inline", "latex_frac", "latex_dfrac"};

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_value", 1);
    cJSON_AddNumberToObject(c, "max_value", 1000);
    cJSON_AddNumberToObject(c, "min_factor", 1);
    cJSON_AddNumberToObject(c, "max_factor", 100);
    cJSON_AddItemToObject(c, "styles", cJSON_CreateStringArray(all_styles, 4));
    return c;
}

typedef struct {
    int64_t min_value, max_value, min_factor, max_factor;
    const cJSON *styles;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    if (task_config_int(c, "min_value", &k->min_value, err, errlen) ||
        task_config_int(c, "max_value", &k->max_value, err, errlen) ||
        task_config_int(c, "min_factor", &k->min_factor, err, errlen) ||
        task_config_int(c, "max_factor", &k->max_factor, err, errlen))
        return -1;
    k->styles = task_config_strings(c, "styles", err, errlen);
    return k->styles ? 0 : -1;
}

static int style_index(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, all_styles[i]) == 0) return i;
    return -1;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = k.min_value <= 0              ? "min_value must be positive"
                      : k.max_value <= k.min_value  ? "max_value must be > min_value"
                      : k.min_factor < 1            ? "min_factor must be at least 1"
                      : k.max_factor < k.min_factor ? "max_factor must be >= min_factor"
                      /* metadata numbers are JSON doubles: keep them exact */
                      : (double)k.max_value * (double)k.max_factor > 9007199254740992.0
                          ? "max_value * max_factor must be at most 2^53"
                          : NULL;
    const cJSON *s;
    cJSON_ArrayForEach(s, k.styles) if (!bad && style_index(s->valuestring) < 0)
    {
        snprintf(err, errlen,
                 "fraction_simplification config: unknown style %s "
                 "(plain, latex_inline, latex_frac, latex_dfrac)",
                 s->valuestring);
        return -1;
    }
    if (bad) snprintf(err, errlen, "fraction_simplification config: %s", bad);
    return bad ? -1 : 0;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static char *format_fraction(int style, int64_t num, int64_t den)
{
    switch (style) {
    case 0: return task_strdupf("%lld/%lld", (long long)num, (long long)den);
    case 1: return task_strdupf("$%lld/%lld$", (long long)num, (long long)den);
    case 2: return task_strdupf("$\\frac{%lld}{%lld}$", (long long)num, (long long)den);
    default: return task_strdupf("$\\dfrac{%lld}{%lld}$", (long long)num, (long long)den);
    }
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    /* Draw a pair, reduce it, keep it if it stays in range. reasoning-gym
     * gives up after 10 tries and then returns a pair that may not be in
     * lowest terms; two consecutive integers always are, so we fall back to
     * the lowest such pair instead. */
    int64_t sn = k.min_value, sd = k.min_value + 1;
    for (int tries = 0; tries < 1000; tries++) {
        int64_t a = task_rng_range(&r, k.min_value, k.max_value);
        int64_t b = task_rng_range(&r, k.min_value, k.max_value);
        int64_t g = gcd(a, b);
        a /= g, b /= g;
        if (a >= k.min_value && b >= k.min_value) {
            sn = a < b ? a : b;
            sd = a < b ? b : a;
            break;
        }
    }
    int64_t factor = task_rng_range(&r, k.min_factor, k.max_factor);
    int nstyles = cJSON_GetArraySize(k.styles);
    const char *style_name = cJSON_GetArrayItem(k.styles, (int)task_rng_below(&r, (uint64_t)nstyles))->valuestring;
    int style = style_index(style_name);
    char *q = format_fraction(style, sn * factor, sd * factor);
    out->question = task_strdupf("Reduce the fraction %s to lowest terms. Answer with the reduced fraction "
                                 "only, written the same way as the fraction given.",
                                 q);
    free(q);
    out->answer = format_fraction(style, sn, sd);
    cJSON *m = out->metadata = task_metadata_new("fraction_simplification", index);
    cJSON_AddNumberToObject(m, "numerator", (double)(sn * factor));
    cJSON_AddNumberToObject(m, "denominator", (double)(sd * factor));
    cJSON_AddNumberToObject(m, "simplified_numerator", (double)sn);
    cJSON_AddNumberToObject(m, "simplified_denominator", (double)sd);
    cJSON_AddNumberToObject(m, "reduction_factor", (double)factor);
    cJSON_AddStringToObject(m, "style", style_name);
    cJSON_AddNumberToObject(m, "factor", (double)factor);
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON_AddItemToObject(d, "value", task_json_pair((double)k.min_value, (double)k.max_value));
    cJSON_AddItemToObject(d, "factor", task_json_pair((double)k.min_factor, (double)k.max_factor));
    return 0;
}

/* A parsed integer as Python holds it: small ones exactly, larger ones only
 * as "too big to equal anything in the metadata". */
typedef struct {
    int status;
    int64_t v;
} pyint_t;

static const char *skip_space(const char *p, const char *end)
{
    while (p < end) {
        uint32_t c;
        size_t k = py_utf8_next(p, (size_t)(end - p), &c);
        if (!py_isspace(c)) break;
        p += k;
    }
    return p;
}

/* \s*{\s*(\d+)\s*} at p; returns the position after it or NULL */
static const char *braced_digits(const char *p, const char *end, pyint_t *out)
{
    p = skip_space(p, end);
    if (p == end || *p != '{') return NULL;
    p = skip_space(p + 1, end);
    const char *d0 = p;
    while (p < end) {
        uint32_t c;
        size_t k = py_utf8_next(p, (size_t)(end - p), &c);
        if (py_digit(c) < 0) break;
        p += k;
    }
    if (p == d0) return NULL;
    out->status = py_int(d0, (size_t)(p - d0), &out->v);
    p = skip_space(p, end);
    return p < end && *p == '}' ? p + 1 : NULL;
}

/* reasoning-gym's _extract_fraction: 1 with both parts, 0 for None */
static int extract_fraction(const char *answer, pyint_t *num, pyint_t *den)
{
    const char *s = answer;
    size_t n = strlen(answer);
    py_strip(&s, &n);
    while (n && *s == '$') s++, n--;
    while (n && s[n - 1] == '$') n--;
    py_strip(&s, &n);
    const char *end = s + n, *p = s;
    if (p < end && *p == '\\') {
        p++;
        if (end - p >= 5 && strncasecmp(p, "dfrac", 5) == 0) p += 5;
        else if (end - p >= 4 && strncasecmp(p, "frac", 4) == 0) p += 4;
        else p = NULL;
        if (p && (p = braced_digits(p, end, num)) && braced_digits(p, end, den)) return 1;
    }
    const char *slash = memchr(s, '/', n);
    if (!slash) return 0;
    num->status = py_int(s, (size_t)(slash - s), &num->v);
    den->status = py_int(slash + 1, (size_t)(end - slash - 1), &den->v);
    return num->status != PY_INT_BAD && den->status != PY_INT_BAD;
}

/* Python's int == metadata value; -1 when the key is absent (a KeyError) */
static int int_equals(pyint_t x, const cJSON *m, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    if (!v) return -1;
    if (!cJSON_IsNumber(v) || x.status != PY_INT_OK) return 0;
    double d = v->valuedouble;
    return d == floor(d) && fabs(d) < 9.2e18 && (int64_t)d == x.v;
}

static double score(const char *answer, const task_question_t *e)
{
    pyint_t num, den;
    if (!answer || !extract_fraction(answer, &num, &den)) return 0.01;
    const cJSON *m = e->metadata;
    int a = int_equals(num, m, "simplified_numerator");
    if (a < 0) return 0.01;
    if (a) {
        int b = int_equals(den, m, "simplified_denominator");
        if (b < 0) return 0.01;
        if (b) return 1.0;
    }
    int c = int_equals(num, m, "numerator");
    if (c < 0) return 0.01;
    if (c) return 0.1;
    int d = int_equals(den, m, "denominator");
    if (d < 0) return 0.01;
    if (d) return 0.1;
    return 0.05;
}

const task_family_t task_family_fraction_simplification = {
    "fraction_simplification", default_config, validate_config, generate, score,
};
