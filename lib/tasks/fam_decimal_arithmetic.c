/* decimal_arithmetic: evaluate an expression of decimal numbers with + - *
 * / and random parentheses, in Python's decimal arithmetic: every operation
 * rounded to `precision` significant digits, ties to even. An answer within
 * 10^-max_num_decimal_places of the truth scores 1, anything else 0.
 *
 * Numbers here are Python Decimals: a sign, a coefficient of any length and
 * an exponent, with the same rounding (_fix), addition (_normalize) and
 * division steps as CPython's decimal module, because the score of a near
 * miss depends on the rounding of the difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "tasks/py.h"
#include "tasks/rng.h"
#include "tasks/task.h"

/* ---- coefficients: unsigned integers as decimal digits, least significant first */
typedef struct {
    uint8_t *v;
    int n;
} big_t; /* n == 0 is zero */

static big_t big_new(int cap) { return (big_t){calloc((size_t)cap + 1, 1), 0}; }
static void big_free(big_t *a)
{
    free(a->v);
    a->v = NULL;
    a->n = 0;
}
static void big_trim(big_t *a)
{
    while (a->n && !a->v[a->n - 1]) a->n--;
}
static int big_len(const big_t *a) { return a->n ? a->n : 1; } /* len(str(int)) */
static big_t big_copy(const big_t *a)
{
    big_t r = big_new(a->n);
    memcpy(r.v, a->v, (size_t)a->n);
    r.n = a->n;
    return r;
}
static int big_cmp(const big_t *a, const big_t *b)
{
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->v[i] != b->v[i]) return a->v[i] < b->v[i] ? -1 : 1;
    return 0;
}
/* a * 10^k */
static big_t big_shift(const big_t *a, int k)
{
    if (!a->n) return big_new(0);
    big_t r = big_new(a->n + k);
    memcpy(r.v + k, a->v, (size_t)a->n);
    r.n = a->n + k;
    return r;
}
static big_t big_add(const big_t *a, const big_t *b)
{
    int n = (a->n > b->n ? a->n : b->n) + 1, carry = 0;
    big_t r = big_new(n);
    for (int i = 0; i < n; i++) {
        int s = (i < a->n ? a->v[i] : 0) + (i < b->n ? b->v[i] : 0) + carry;
        r.v[i] = (uint8_t)(s % 10);
        carry = s / 10;
    }
    r.n = n;
    big_trim(&r);
    return r;
}
/* a - b, a >= b */
static big_t big_sub(const big_t *a, const big_t *b)
{
    big_t r = big_new(a->n);
    int borrow = 0;
    for (int i = 0; i < a->n; i++) {
        int s = a->v[i] - (i < b->n ? b->v[i] : 0) - borrow;
        borrow = s < 0;
        r.v[i] = (uint8_t)(s + 10 * borrow);
    }
    r.n = a->n;
    big_trim(&r);
    return r;
}
static big_t big_mul(const big_t *a, const big_t *b)
{
    big_t r = big_new(a->n + b->n);
    int *acc = calloc((size_t)(a->n + b->n) + 1, sizeof *acc);
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++) acc[i + j] += a->v[i] * b->v[j];
    int carry = 0;
    for (int i = 0; i < a->n + b->n; i++) {
        int s = acc[i] + carry;
        r.v[i] = (uint8_t)(s % 10);
        carry = s / 10;
    }
    free(acc);
    r.n = a->n + b->n;
    big_trim(&r);
    return r;
}
/* schoolbook long division: *q = a / b, *rem = a % b; b != 0 */
static void big_divmod(const big_t *a, const big_t *b, big_t *q, big_t *rem)
{
    *q = big_new(a->n);
    q->n = a->n;
    big_t r = big_new(0);
    for (int i = a->n - 1; i >= 0; i--) {
        big_t t = big_shift(&r, 1);
        if (t.n == 0 && a->v[i]) t.n = 1;
        t.v[0] = a->v[i];
        big_trim(&t);
        big_free(&r);
        r = t;
        int d = 0;
        while (big_cmp(&r, b) >= 0) {
            big_t s = big_sub(&r, b);
            big_free(&r);
            r = s;
            d++;
        }
        q->v[i] = (uint8_t)d;
    }
    big_trim(q);
    *rem = r;
}
static int big_digit0(const big_t *a) { return a->n ? a->v[0] : 0; }

/* ---- Python Decimals */
enum { D_FINITE, D_INF, D_QNAN, D_SNAN };
typedef struct {
    int neg, kind;
    big_t c;
    int64_t exp;
} dec_t;

static void dec_free(dec_t *x) { big_free(&x->c); }

/* Decimal._fix for a context of prec digits, ROUND_HALF_EVEN; the exponent
 * limits (Emax 999999) are beyond anything the scores depend on. */
static void dec_fix(dec_t *x, int prec)
{
    int len = big_len(&x->c);
    if (len <= prec) return;
    int drop = len - prec, first = x->c.v[drop - 1], rest = 0;
    for (int i = 0; i < drop - 1; i++) rest |= x->c.v[i];
    big_t kept = big_new(prec + 1);
    memcpy(kept.v, x->c.v + drop, (size_t)prec);
    kept.n = prec;
    big_trim(&kept);
    int up = first > 5 || (first == 5 && (rest || big_digit0(&kept) % 2 == 1));
    if (up) {
        big_t one = {(uint8_t[]){1}, 1}, t = big_add(&kept, &one);
        big_free(&kept);
        kept = t;
    }
    x->exp += drop;
    if (kept.n > prec) { /* 999.. rounded up to 1000.. */
        big_t t = big_new(prec);
        memcpy(t.v, kept.v + 1, (size_t)prec);
        t.n = prec;
        big_free(&kept);
        kept = t;
        x->exp++;
    }
    big_free(&x->c);
    x->c = kept;
}

/* Decimal.__add__ for finite operands */
static dec_t dec_add(const dec_t *a, const dec_t *b, int prec)
{
    dec_t r = {0, D_FINITE, {0}, a->exp < b->exp ? a->exp : b->exp};
    if (!a->c.n || !b->c.n) {
        if (!a->c.n && !b->c.n) {
            r.neg = a->neg && b->neg;
            r.c = big_new(0);
        } else {
            const dec_t *o = a->c.n ? a : b;
            if (r.exp < o->exp - prec - 1) r.exp = o->exp - prec - 1;
            r.neg = o->neg;
            r.c = big_shift(&o->c, (int)(o->exp - r.exp));
        }
        dec_fix(&r, prec);
        return r;
    }
    /* _normalize: an operand far below the other's last kept digit only
     * matters as a sticky bit, so it shrinks to 1 just below it */
    const dec_t *tmp = a->exp < b->exp ? b : a, *other = a->exp < b->exp ? a : b;
    int tlen = big_len(&tmp->c), olen = big_len(&other->c);
    int64_t e = tmp->exp + (tlen - prec - 2 < -1 ? tlen - prec - 2 : -1);
    big_t oc = big_copy(&other->c);
    int64_t oexp = other->exp;
    if (olen + other->exp - 1 < e) {
        big_free(&oc);
        oc = big_new(1);
        oc.v[0] = 1, oc.n = 1;
        oexp = e;
    }
    big_t tc = big_shift(&tmp->c, (int)(tmp->exp - oexp));
    r.exp = oexp;
    if (tmp->neg != other->neg) {
        int c = big_cmp(&tc, &oc);
        if (c == 0) r.c = big_new(0), r.neg = 0;
        else if (c > 0) r.c = big_sub(&tc, &oc), r.neg = tmp->neg;
        else r.c = big_sub(&oc, &tc), r.neg = other->neg;
    } else {
        r.c = big_add(&tc, &oc);
        r.neg = tmp->neg;
    }
    big_free(&tc);
    big_free(&oc);
    dec_fix(&r, prec);
    return r;
}

static dec_t dec_neg(const dec_t *a)
{
    dec_t r = *a;
    r.c = big_copy(&a->c);
    r.neg = !a->neg;
    return r;
}

static dec_t dec_mul(const dec_t *a, const dec_t *b, int prec)
{
    dec_t r = {a->neg != b->neg, D_FINITE, big_mul(&a->c, &b->c), a->exp + b->exp};
    dec_fix(&r, prec);
    return r;
}

/* Decimal._divide's true division; b nonzero */
static dec_t dec_div(const dec_t *a, const dec_t *b, int prec)
{
    dec_t r = {a->neg != b->neg, D_FINITE, {0}, a->exp - b->exp};
    if (!a->c.n) {
        r.c = big_new(0);
        dec_fix(&r, prec);
        return r;
    }
    int shift = big_len(&b->c) - big_len(&a->c) + prec + 1;
    r.exp = a->exp - b->exp - shift;
    big_t num = big_shift(&a->c, shift > 0 ? shift : 0), den = big_shift(&b->c, shift < 0 ? -shift : 0), rem;
    big_divmod(&num, &den, &r.c, &rem);
    if (rem.n) {
        if (big_digit0(&r.c) % 5 == 0) { /* make the inexactness visible to rounding */
            big_t one = {(uint8_t[]){1}, 1}, t = big_add(&r.c, &one);
            big_free(&r.c);
            r.c = t;
        }
    } else {
        int64_t ideal = a->exp - b->exp;
        int strip = 0;
        while (r.exp + strip < ideal && strip < r.c.n && r.c.v[strip] == 0) strip++;
        if (strip) {
            memmove(r.c.v, r.c.v + strip, (size_t)(r.c.n - strip));
            r.c.n -= strip;
            r.exp += strip;
        }
    }
    big_free(&num);
    big_free(&den);
    big_free(&rem);
    dec_fix(&r, prec);
    return r;
}

/* The text as CPython's _decimal reads it: surrounding whitespace stripped,
 * every underscore dropped, Unicode digits as 0-9; NULL when a character
 * left is not printable ASCII. */
static char *dec_ascii(const char *s)
{
    size_t n = strlen(s);
    py_strip(&s, &n);
    char *a = malloc(n + 1), *w = a;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = py_utf8_next(s + i, n - i, &c);
        int d = py_digit(c);
        if (c == '_')
            ;
        else if (d >= 0) *w++ = (char)('0' + d);
        else if (c < 0x80 && c > ' ') *w++ = (char)c;
        else {
            free(a);
            return NULL;
        }
        i += k;
    }
    *w = '\0';
    return a;
}

/* The text p..end after the sign as [digits][.digits][e[sign]digits]: 1
 * with out's coefficient and exponent set, or 0 when it is no number. */
static int dec_parse_finite(const char *p, const char *end, dec_t *out)
{
    const char *int0 = p;
    while (p < end && *p >= '0' && *p <= '9') p++;
    const char *int1 = p, *frac0 = p, *frac1 = p;
    if (p < end && *p == '.') {
        frac0 = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        frac1 = p;
    }
    int64_t exp = 0;
    int ok = int1 > int0 || frac1 > frac0;
    if (ok && p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        ok = p < end && *p >= '0' && *p <= '9';
        while (p < end && *p >= '0' && *p <= '9') {
            /* saturate: past 10^15 every score is decided already */
            if (exp < 1000000000000000ll) exp = exp * 10 + (*p - '0');
            p++;
        }
        if (eneg) exp = -exp;
    }
    if (!ok || p != end) return 0;
    int nd = (int)((int1 - int0) + (frac1 - frac0));
    out->c = big_new(nd);
    int k = 0;
    for (const char *q = frac1 - 1; q >= frac0; q--) out->c.v[k++] = (uint8_t)(*q - '0');
    for (const char *q = int1 - 1; q >= int0; q--) out->c.v[k++] = (uint8_t)(*q - '0');
    out->c.n = nd;
    big_trim(&out->c);
    out->exp = exp - (frac1 - frac0);
    return 1;
}

/* Decimal(str): 0, or -1 for InvalidOperation. */
static int dec_parse(const char *s, dec_t *out)
{
    char *a = dec_ascii(s);
    if (!a) return -1;
    const char *p = a, *end = a + strlen(a);
    memset(out, 0, sizeof *out);
    if (p < end && (*p == '+' || *p == '-')) out->neg = *p++ == '-';
    size_t len = (size_t)(end - p);
    int ok = 0;
    if ((len == 3 && !strncasecmp(p, "inf", 3)) || (len == 8 && !strncasecmp(p, "infinity", 8))) {
        out->kind = D_INF, ok = 1;
    } else if ((len >= 3 && !strncasecmp(p, "nan", 3)) || (len >= 4 && !strncasecmp(p, "snan", 4))) {
        out->kind = (*p == 's' || *p == 'S') ? D_SNAN : D_QNAN;
        const char *q = p + (out->kind == D_SNAN ? 4 : 3);
        ok = strspn(q, "0123456789") == (size_t)(end - q);
    } else {
        ok = dec_parse_finite(p, end, out);
    }
    free(a);
    return ok ? 0 : -1;
}

/* str(Decimal) for finite values */
static char *dec_str(const dec_t *x)
{
    int len = big_len(&x->c);
    char *digits = malloc((size_t)len + 1);
    for (int i = 0; i < len; i++) digits[i] = (char)('0' + (x->c.n ? x->c.v[len - 1 - i] : 0));
    digits[len] = '\0';
    int64_t left = x->exp + len, dot = x->exp <= 0 && left > -6 ? left : 1;
    size_t cap = (size_t)len + (size_t)(dot < 0 ? -dot : dot) + 32;
    char *out = malloc(cap), *w = out;
    if (x->neg) *w++ = '-';
    if (dot <= 0) {
        w += sprintf(w, "0.");
        for (int64_t i = 0; i < -dot; i++) *w++ = '0';
        w += sprintf(w, "%s", digits);
    } else if (dot >= len) {
        w += sprintf(w, "%s", digits);
        for (int64_t i = len; i < dot; i++) *w++ = '0';
    } else {
        w += sprintf(w, "%.*s.%s", (int)dot, digits, digits + dot);
    }
    if (left != dot) sprintf(w, "E%+lld", (long long)(left - dot));
    else *w = '\0';
    free(digits);
    return out;
}

/* ---- the expression */
static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_num_decimal_places", 3);
    cJSON_AddNumberToObject(c, "max_num_decimal_places", 3);
    cJSON_AddNumberToObject(c, "min_terms", 2);
    cJSON_AddNumberToObject(c, "max_terms", 6);
    cJSON_AddNumberToObject(c, "precision", 12);
    return c;
}

typedef struct {
    int64_t min_dp, max_dp, min_terms, max_terms, precision;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    return task_config_int(c, "min_num_decimal_places", &k->min_dp, err, errlen) ||
                   task_config_int(c, "max_num_decimal_places", &k->max_dp, err, errlen) ||
                   task_config_int(c, "min_terms", &k->min_terms, err, errlen) ||
                   task_config_int(c, "max_terms", &k->max_terms, err, errlen) ||
                   task_config_int(c, "precision", &k->precision, err, errlen)
               ? -1
               : 0;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = k.min_dp < 0                  ? "min_num_decimal_places must be >= 0"
                      : k.max_dp < k.min_dp         ? "max_num_decimal_places must be >= min_num_decimal_places"
                      : k.max_dp > 30               ? "max_num_decimal_places must be at most 30"
                      : k.min_terms < 1             ? "min_terms must be at least 1"
                      : k.max_terms < k.min_terms   ? "max_terms must be >= min_terms"
                      : k.max_terms > 100           ? "max_terms must be at most 100"
                      : k.precision <= k.max_dp + 1 ? "precision must be 2 or more higher than max_num_decimal_places"
                      : k.precision > 100           ? "precision must be at most 100"
                                                    : NULL;
    if (bad) snprintf(err, errlen, "decimal_arithmetic config: %s", bad);
    return bad ? -1 : 0;
}

/* reasoning-gym's build_grouped_expression: split the operands at a random
 * point, join the halves with the operator there, parenthesise half of the
 * time; *w advances over the text written */
static void build_grouped(task_rng_t *r, char **ops_text, const char *ops, int lo, int hi, char **w)
{
    if (hi - lo == 1) {
        *w += sprintf(*w, "%s", ops_text[lo]);
        return;
    }
    int split = lo + (int)task_rng_range(r, 1, hi - lo - 1);
    char *start = *w;
    build_grouped(r, ops_text, ops, lo, split, w);
    *(*w)++ = ops[split - 1];
    build_grouped(r, ops_text, ops, split, hi, w);
    if (task_rng_below(r, 2)) {
        size_t len = (size_t)(*w - start);
        memmove(start + 1, start, len);
        start[0] = '(';
        start[len + 1] = ')';
        *w += 2;
    }
    **w = '\0';
}

/* A number literal as Python's ast gives it to Decimal: through a float,
 * Decimal(str(float(text))); str(float) is the shortest text that reads
 * back as the same double, so long literals lose digits exactly as there. */
static void literal_value(const char *text, size_t n, dec_t *out)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)n, text);
    double x = strtod(buf, NULL);
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    dec_parse(buf, out);
}

typedef struct {
    const char *p;
    int prec, failed;
} eval_t;
static dec_t eval_sum(eval_t *e);

static dec_t eval_atom(eval_t *e)
{
    if (*e->p == '(') {
        e->p++;
        dec_t v = eval_sum(e);
        e->p++; /* ")" */
        return v;
    }
    const char *s = e->p;
    while ((*e->p >= '0' && *e->p <= '9') || *e->p == '.') e->p++;
    dec_t v;
    literal_value(s, (size_t)(e->p - s), &v);
    return v;
}

static dec_t eval_term(eval_t *e)
{
    dec_t a = eval_atom(e);
    while (*e->p == '*' || *e->p == '/') {
        char op = *e->p++;
        dec_t b = eval_atom(e), r;
        if (op == '*') r = dec_mul(&a, &b, e->prec);
        else if (b.c.n) r = dec_div(&a, &b, e->prec);
        else {
            e->failed = 1;
            r = dec_neg(&a);
        } /* division by zero: the draw is dropped */
        dec_free(&a);
        dec_free(&b);
        a = r;
    }
    return a;
}

static dec_t eval_sum(eval_t *e)
{
    dec_t a = eval_term(e);
    while (*e->p == '+' || *e->p == '-') {
        char op = *e->p++;
        dec_t b = eval_term(e);
        if (op == '-') {
            dec_t nb = dec_neg(&b);
            dec_free(&b);
            b = nb;
        }
        dec_t r = dec_add(&a, &b, e->prec);
        dec_free(&a);
        dec_free(&b);
        a = r;
    }
    return a;
}

/* One operand with dp decimals: raw / 10^dp, raw in [1, 10^(dp+1)] */
static char *draw_operand(task_rng_t *r, int dp)
{
    char digits[48];
    uint64_t scale = 1;
    int64_t raw;
    if (dp <= 17) {
        for (int j = 0; j < dp; j++) scale *= 10;
        raw = task_rng_range(r, 1, (int64_t)(10 * scale));
        snprintf(digits, sizeof digits, "%0*lld", dp + 1, (long long)raw);
    } else {
        /* beyond 64 bits: digit by digit, then 10^(dp+1) itself
         * once in 10^(dp+1) draws is too rare to matter */
        digits[0] = '0';
        for (int j = 1; j <= dp; j++) digits[j] = (char)('0' + task_rng_below(r, 10));
        digits[dp + 1] = '\0';
        if (strspn(digits, "0") == (size_t)dp + 1) digits[dp] = '1';
    }
    size_t nd = strlen(digits);
    return dp ? task_strdupf("%.*s.%s", (int)(nd - (size_t)dp), digits, digits + nd - dp) : task_strdupf("%s", digits);
}

/* The expression text of one draw: *terms operands joined by random
 * operators and grouped; *max_dp is the most decimals of any, at least 1. */
static char *draw_expression(task_rng_t *r, const config_t *k, int *terms_out, int *max_dp_out)
{
    static const char ops_all[4] = {'+', '-', '*', '/'};
    int terms = (int)task_rng_range(r, k->min_terms, k->max_terms), max_dp = 1;
    char **texts = calloc((size_t)terms, sizeof *texts), *ops = calloc((size_t)terms, 1);
    size_t total = 16;
    for (int i = 0; i < terms; i++) {
        int dp = (int)task_rng_range(r, k->min_dp, k->max_dp);
        if (dp > max_dp) max_dp = dp;
        texts[i] = draw_operand(r, dp);
        total += strlen(texts[i]) + 3;
        if (i < terms - 1) ops[i] = ops_all[task_rng_below(r, 4)];
    }
    char *expr = calloc(total + 2 * (size_t)terms, 1), *w = expr;
    build_grouped(r, texts, ops, 0, terms, &w);
    for (int i = 0; i < terms; i++) free(texts[i]);
    free(texts);
    free(ops);
    *terms_out = terms;
    *max_dp_out = max_dp;
    return expr;
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    for (int attempt = 0; attempt < 1000; attempt++) {
        int terms, max_dp;
        char *expr = draw_expression(&r, &k, &terms, &max_dp);
        eval_t e = {expr, (int)k.precision, 0};
        dec_t v = eval_sum(&e);
        if (e.failed) {
            dec_free(&v);
            free(expr);
            continue;
        }
        out->question = task_strdupf(
            "Evaluate the expression below in decimal arithmetic with %lld significant digits: round the result "
            "of every operation to %lld significant digits, a tie going to the even digit. Reply with the "
            "resulting number only.\n%s = ?",
            (long long)k.precision, (long long)k.precision, expr);
        out->answer = dec_str(&v);
        dec_free(&v);
        cJSON *m = out->metadata = task_metadata_new("decimal_arithmetic", index);
        cJSON_AddNumberToObject(m, "decimal_places", max_dp);
        cJSON_AddNumberToObject(m, "num_terms", terms);
        cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
        cJSON_AddItemToObject(d, "decimal_places", task_json_pair((double)k.min_dp, (double)k.max_dp));
        cJSON_AddItemToObject(d, "num_terms", task_json_pair((double)k.min_terms, (double)k.max_terms));
        free(expr);
        return 0;
    }
    snprintf(err, errlen, "decimal_arithmetic: every draw divided by zero (index %llu)", (unsigned long long)index);
    return -1;
}

/* The context precision at scoring time. reasoning-gym's score_answer runs
 * in whatever decimal context the process has: the dataset's precision once
 * it has generated a question. Both its question and ours state it as "N
 * significant digits"; without one, Python's default of 28. */
static int scoring_precision(const char *question)
{
    const char *p = question ? strstr(question, " significant digits") : NULL;
    if (!p) return 28;
    const char *q = p;
    while (q > question && q[-1] >= '0' && q[-1] <= '9') q--;
    int v = q < p ? atoi(q) : 0;
    return v > 0 && v <= 1000 ? v : 28;
}

/* reasoning-gym scores against its dataset's config, max_num_decimal_places;
 * for a question that is the upper end of metadata.difficulty.decimal_places,
 * and the config default (3) without one */
static int tolerance_places(const cJSON *metadata)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(metadata, "difficulty");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(d, "decimal_places");
    const cJSON *hi = cJSON_GetArrayItem(dp, 1);
    return cJSON_IsNumber(hi) ? hi->valueint : 3;
}

static double score(const char *answer, const task_question_t *e)
{
    if (!answer || !e->answer) return 0.0;
    dec_t u, t;
    if (dec_parse(answer, &u) != 0) return 0.0;
    if (dec_parse(e->answer, &t) != 0) {
        dec_free(&u);
        return 0.0;
    }
    double r = 0.0;
    /* any NaN or infinity either raises InvalidOperation or is too far */
    if (u.kind == D_FINITE && t.kind == D_FINITE) {
        dec_t nt = dec_neg(&t), diff = dec_add(&u, &nt, scoring_precision(e->question));
        /* |diff| <= 10^-places: compare the adjusted exponent, then digits */
        int64_t places = tolerance_places(e->metadata), len = big_len(&diff.c);
        if (!diff.c.n) r = 1.0;
        else if (diff.exp + len - 1 < -places) r = 1.0;
        else if (diff.exp + len - 1 == -places) {
            /* leading digit at 10^-places: within only if it is exactly 1 */
            int only_one = diff.c.v[diff.c.n - 1] == 1;
            for (int i = 0; i < diff.c.n - 1; i++) only_one &= diff.c.v[i] == 0;
            r = only_one ? 1.0 : 0.0;
        }
        dec_free(&nt);
        dec_free(&diff);
    }
    dec_free(&u);
    dec_free(&t);
    return r;
}

const task_family_t task_family_decimal_arithmetic = {
    "decimal_arithmetic", default_config, validate_config, generate, score,
};
