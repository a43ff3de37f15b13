/* basic_arithmetic: evaluate an integer expression of + - * and floor
 * division (Python's //, written /) with optional parentheses and negated
 * groups; divisions are arranged to come out even where they can. Scored by
 * the default scorer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/rng.h"
#include "tasks/task.h"

typedef __int128 i128;

static cJSON *default_config(void)
{
    static const char *const ops[] = {"+", "-", "*", "/"};
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_terms", 2);
    cJSON_AddNumberToObject(c, "max_terms", 6);
    cJSON_AddNumberToObject(c, "min_digits", 1);
    cJSON_AddNumberToObject(c, "max_digits", 4);
    cJSON_AddItemToObject(c, "operators", cJSON_CreateStringArray(ops, 4));
    cJSON_AddBoolToObject(c, "allow_parentheses", 1);
    cJSON_AddBoolToObject(c, "allow_negation", 1);
    cJSON_AddStringToObject(c, "format_style", "simple");
    cJSON_AddStringToObject(c, "whitespace", "single");
    return c;
}

typedef struct {
    int64_t min_terms, max_terms, min_digits, max_digits;
    int parens, negation, natural, ws;       /* ws: 0 no_space, 1 single, 2 random */
    char ops[4], nops, plain_ops[4], nplain; /* plain: without "/" */
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    if (task_config_int(c, "min_terms", &k->min_terms, err, errlen) ||
        task_config_int(c, "max_terms", &k->max_terms, err, errlen) ||
        task_config_int(c, "min_digits", &k->min_digits, err, errlen) ||
        task_config_int(c, "max_digits", &k->max_digits, err, errlen) ||
        task_config_bool(c, "allow_parentheses", &k->parens, err, errlen) ||
        task_config_bool(c, "allow_negation", &k->negation, err, errlen))
        return -1;
    const cJSON *ops = task_config_strings(c, "operators", err, errlen), *o;
    if (!ops) return -1;
    k->nops = k->nplain = 0;
    cJSON_ArrayForEach(o, ops)
    {
        const char *s = o->valuestring;
        if (strlen(s) != 1 || !strchr("+-*/", s[0])) {
            snprintf(err, errlen, "basic_arithmetic config: unsupported operator %s (+ - * /)", s);
            return -1;
        }
        /* a repeated operator weighs more in reasoning-gym's choice; four
         * distinct ones are all we keep, each once */
        if (!memchr(k->ops, s[0], (size_t)k->nops)) k->ops[(int)k->nops++] = s[0];
        if (s[0] != '/' && !memchr(k->plain_ops, s[0], (size_t)k->nplain)) k->plain_ops[(int)k->nplain++] = s[0];
    }
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(c, "format_style");
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(c, "whitespace");
    if (!cJSON_IsString(fs) || (strcmp(fs->valuestring, "simple") && strcmp(fs->valuestring, "natural"))) {
        snprintf(err, errlen, "basic_arithmetic config: format_style must be \"simple\" or \"natural\"");
        return -1;
    }
    k->natural = strcmp(fs->valuestring, "natural") == 0;
    k->ws = !cJSON_IsString(ws)                    ? -1
            : !strcmp(ws->valuestring, "no_space") ? 0
            : !strcmp(ws->valuestring, "single")   ? 1
            : !strcmp(ws->valuestring, "random")   ? 2
                                                   : -1;
    if (k->ws < 0) {
        snprintf(err, errlen, "basic_arithmetic config: whitespace must be \"no_space\", \"single\" or \"random\"");
        return -1;
    }
    return 0;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = k.min_terms <= 0              ? "min_terms must be positive"
                      : k.max_terms < k.min_terms   ? "max_terms must be >= min_terms"
                      : k.min_digits <= 0           ? "min_digits must be positive"
                      : k.max_digits < k.min_digits ? "max_digits must be >= min_digits"
                      /* reasoning-gym computes with unbounded ints; we keep
                       * every intermediate value inside 128 bits */
                      : k.max_digits > 18               ? "max_digits must be at most 18"
                      : k.max_terms > 64                ? "max_terms must be at most 64"
                      : k.max_digits * k.max_terms > 36 ? "max_digits * max_terms must be at most 36"
                      /* reasoning-gym picks from an empty list (and crashes)
                       * when it needs an operator other than / and has none */
                      : k.nplain == 0 ? "operators must hold at least one of + - *"
                                      : NULL;
    if (bad) snprintf(err, errlen, "basic_arithmetic config: %s", bad);
    return bad ? -1 : 0;
}

/* An expression as reasoning-gym builds it: a list of parts, each a number
 * (possibly negative), an operator, "(", "-(" or ")". */
typedef struct {
    char **s;
    int n, cap;
} parts_t;

static void push(parts_t *p, char *s)
{
    if (p->n == p->cap) p->s = realloc(p->s, (size_t)(p->cap = p->cap ? 2 * p->cap : 16) * sizeof *p->s);
    p->s[p->n++] = s;
}
static void push_num(parts_t *p, i128 v) { push(p, task_strdupf("%lld", (long long)v)); }
static void parts_free(parts_t *p)
{
    for (int i = 0; i < p->n; i++) free(p->s[i]);
    free(p->s);
    memset(p, 0, sizeof *p);
}

/* Python evaluation of parts [i, end): + - * and // with their precedence;
 * 0, or -1 on division by zero or leaving 128 bits */
typedef struct {
    char **s;
    int i, end;
} eval_t;
static int eval_sum(eval_t *e, i128 *out);

static int eval_factor(eval_t *e, i128 *out)
{
    if (e->i >= e->end) return -1;
    const char *t = e->s[e->i++];
    if (!strcmp(t, "(") || !strcmp(t, "-(")) {
        if (eval_sum(e, out) || e->i >= e->end || strcmp(e->s[e->i++], ")")) return -1;
        if (t[0] == '-') *out = -*out;
        return 0;
    }
    *out = strtoll(t, NULL, 10);
    return 0;
}

static int eval_term(eval_t *e, i128 *out)
{
    if (eval_factor(e, out)) return -1;
    while (e->i < e->end && (!strcmp(e->s[e->i], "*") || !strcmp(e->s[e->i], "/"))) {
        char op = e->s[e->i++][0];
        i128 b;
        if (eval_factor(e, &b)) return -1;
        if (op == '*') {
            if (__builtin_mul_overflow(*out, b, out)) return -1;
        } else {
            if (b == 0) return -1;
            i128 q = *out / b;
            if (*out % b != 0 && ((*out < 0) != (b < 0))) q--; /* floor, as // */
            *out = q;
        }
    }
    return 0;
}

static int eval_sum(eval_t *e, i128 *out)
{
    if (eval_term(e, out)) return -1;
    while (e->i < e->end && (!strcmp(e->s[e->i], "+") || !strcmp(e->s[e->i], "-"))) {
        char op = e->s[e->i++][0];
        i128 b;
        if (eval_term(e, &b)) return -1;
        if (op == '+' ? __builtin_add_overflow(*out, b, out) : __builtin_sub_overflow(*out, b, out)) return -1;
    }
    return 0;
}

static int eval_parts(char **s, int from, int end, i128 *out)
{
    eval_t e = {s, from, end};
    if (eval_sum(&e, out) || e.i != end) return -1;
    /* results stay printable through %lld */
    return *out > INT64_MAX || *out < INT64_MIN ? -1 : 0;
}

/* A random divisor of gcd(|a|, |b|) (all divisors up to a million and
 * their cofactors: reasoning-gym walks to the square root, which for the
 * largest groups takes minutes). */
static i128 random_common_divisor(task_rng_t *r, i128 a, i128 b)
{
    i128 x = a < 0 ? -a : a, y = b < 0 ? -b : b;
    while (y) {
        i128 t = x % y;
        x = y;
        y = t;
    }
    i128 found[2048];
    int n = 0;
    for (i128 i = 1; i * i <= x && i <= 1000000 && n < 2046; i++)
        if (x % i == 0) {
            found[n++] = i;
            if (i * i != x) found[n++] = x / i;
        }
    return found[task_rng_below(r, (uint64_t)n)];
}

typedef struct {
    const config_t *k;
    task_rng_t *r;
    int64_t limit;
    int failed;
} gen_t;

static char pick(task_rng_t *r, const char *ops, int n) { return ops[task_rng_below(r, (uint64_t)n)]; }
static char *op_str(char op) { return task_strdupf("%c", op); }

/* reasoning-gym's add_terms: a left group of terms (in parentheses, maybe
 * negated, half of the time), then an operator and the rest; a division
 * gets a divisor of what it divides */
static void add_terms(gen_t *g, parts_t *out, int remaining)
{
    task_rng_t *r = g->r;
    int left = (int)task_rng_range(r, 1, remaining), right = remaining - left;
    if (left > 1 && task_rng_double(r) > 0.5 && g->k->parens) {
        push(out, strdup(task_rng_double(r) > 0.5 && g->k->negation ? "-(" : "("));
        add_terms(g, out, left);
        push(out, strdup(")"));
    } else {
        for (int i = 0; i < left; i++) {
            push_num(out, task_rng_range(r, -g->limit + 1, g->limit - 1));
            if (i + 1 < left) push(out, op_str(pick(r, g->k->plain_ops, g->k->nplain)));
        }
    }
    if (right == 0) return;
    char op = pick(r, g->k->ops, g->k->nops);
    if (op != '/') {
        push(out, op_str(op));
        add_terms(g, out, right);
        return;
    }
    /* the dividend: the group just closed, or the last number */
    int from = out->n - 1;
    if (!strcmp(out->s[from], ")"))
        for (int depth = 0; from >= 0; from--) {
            depth += !strcmp(out->s[from], ")") - (out->s[from][strlen(out->s[from]) - 1] == '(');
            if (depth == 0) break;
        }
    i128 dividend;
    if (eval_parts(out->s, from, out->n, &dividend)) {
        g->failed = 1;
        return;
    }
    push(out, strdup("/"));
    i128 divisor = dividend != 0 ? random_common_divisor(r, dividend, 0) : 0;
    if (right > 1) {
        parts_t rp = {0};
        add_terms(g, &rp, right - 1);
        if (!strcmp(rp.s[rp.n - 1], ")")) {
            /* shift the closing group so the right side divides evenly */
            i128 value, correction = 1;
            if (eval_parts(rp.s, 0, rp.n, &value)) g->failed = 1;
            else if (value != 0) correction = random_common_divisor(r, dividend, value) - value;
            free(rp.s[--rp.n]);
            push(&rp, strdup("+"));
            push_num(&rp, correction);
            push(&rp, strdup(")"));
        } else {
            push_num(out, dividend != 0 ? divisor : task_rng_range(r, 1, g->limit - 1));
            push(out, strdup("+"));
        }
        for (int i = 0; i < rp.n; i++) push(out, rp.s[i]);
        free(rp.s);
    } else {
        push_num(out, dividend != 0 ? divisor : task_rng_range(r, 1, g->limit - 1));
    }
}

/* Without parentheses: a chain of terms; a division divides the product
 * chain it ends by one of that chain's divisors, or turns into a
 * multiplication when there is none. reasoning-gym's own version prints one
 * expression and answers another (it folds left to right and writes the
 * constant it replaced); we answer the expression we print. */
static void simple_terms(gen_t *g, parts_t *out, int terms)
{
    task_rng_t *r = g->r;
    i128 chain = task_rng_range(r, 0, g->limit);
    push_num(out, chain);
    for (int i = 1; i < terms; i++) {
        i128 c = task_rng_range(r, 0, g->limit);
        char op = pick(r, g->k->ops, g->k->nops);
        if (op == '/') {
            i128 a = chain < 0 ? -chain : chain, cands[64];
            int n = 0;
            for (i128 d = 2; d < a && d < g->limit && n < 64; d++)
                if (a % d == 0) cands[n++] = d;
            if (n) c = cands[task_rng_below(r, (uint64_t)n)];
            else op = '*', c = task_rng_range(r, 1, g->limit - 1);
        }
        push(out, op_str(op));
        push_num(out, c);
        if (op == '+' || op == '-') chain = c;
        else if (op == '*') {
            if (__builtin_mul_overflow(chain, c, &chain)) g->failed = 1;
        } else chain /= c;
    }
}

static const char *const natural_templates[] = {
    "What is the value of %s?",
    "Work out %s.",
    "Find the value of %s.",
    "Evaluate the expression %s.",
};

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    /* a draw that divides by a zero group or leaves 128 bits is drawn again
     * (reasoning-gym raises ZeroDivisionError there) */
    for (int attempt = 0; attempt < 1000; attempt++) {
        int terms = (int)task_rng_range(&r, k.min_terms, k.max_terms);
        int digits = (int)task_rng_range(&r, k.min_digits, k.max_digits);
        int64_t limit = 1;
        for (int i = 0; i < digits; i++) limit *= 10;
        gen_t g = {&k, &r, limit, 0};
        parts_t p = {0};
        if (k.parens) add_terms(&g, &p, terms);
        else simple_terms(&g, &p, terms);
        /* reasoning-gym turns a "/ 0" into "/ 1" (with single spaces only;
         * we do it for every spacing) */
        for (int i = 1; i < p.n; i++)
            if (!strcmp(p.s[i - 1], "/") && !strcmp(p.s[i], "0")) p.s[i][0] = '1';
        i128 result;
        if (g.failed || eval_parts(p.s, 0, p.n, &result)) {
            parts_free(&p);
            continue;
        }
        size_t cap = 2;
        for (int i = 0; i < p.n; i++) cap += strlen(p.s[i]) + 2;
        char *expr = malloc(cap), *w = expr;
        for (int i = 0; i < p.n; i++) {
            if ((k.ws == 1 && i > 0) || (k.ws == 2 && task_rng_double(&r) < 0.15 && i > 0)) *w++ = ' ';
            w += sprintf(w, "%s", p.s[i]);
        }
        *w = '\0';
        parts_free(&p);
        const char *tmpl = k.natural ? natural_templates[task_rng_below(&r, 4)] : "Calculate %s.";
        char *q = task_strdupf(tmpl, expr);
        out->question = task_strdupf("%s Here / is floor division (the quotient rounded down to an integer). "
                                     "Answer with the integer result only.",
                                     q);
        free(q);
        out->answer = task_strdupf("%lld", (long long)result);
        cJSON *m = out->metadata = task_metadata_new("basic_arithmetic", index);
        cJSON_AddStringToObject(m, "expression", expr);
        cJSON_AddNumberToObject(m, "num_terms", terms);
        cJSON_AddNumberToObject(m, "num_digits", digits);
        cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
        cJSON_AddItemToObject(d, "num_terms", task_json_pair((double)k.min_terms, (double)k.max_terms));
        cJSON_AddItemToObject(d, "num_digits", task_json_pair((double)k.min_digits, (double)k.max_digits));
        free(expr);
        return 0;
    }
    snprintf(err, errlen, "basic_arithmetic: no expression within 128 bits after 1000 draws (index %llu)",
             (unsigned long long)index);
    return -1;
}

static double score(const char *answer, const task_question_t *e) { return task_score_default(answer, e->answer); }

const task_family_t task_family_basic_arithmetic = {
    "basic_arithmetic", default_config, validate_config, generate, score,
};
