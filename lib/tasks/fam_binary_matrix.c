/* binary_matrix: the taxicab distance from every cell of a square 0/1
 * matrix to its nearest 0. reasoning-gym gives 0.1 to an answer that is a
 * Python list of lists printing as the right matrix, which it finds out with
 * eval(); we never evaluate model output, so a small parser of Python
 * literals (numbers, strings, bytes, lists, tuples, True/False/None, unary
 * signs) stands in for it. Anything beyond literals scores 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/rng.h"
#include "tasks/task.h"

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_n", 3);
    cJSON_AddNumberToObject(c, "max_n", 10);
    cJSON_AddNumberToObject(c, "p_zero", 0.25);
    return c;
}

typedef struct {
    int64_t min_n, max_n;
    double p_zero;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    return task_config_int(c, "min_n", &k->min_n, err, errlen) || task_config_int(c, "max_n", &k->max_n, err, errlen) ||
                   task_config_double(c, "p_zero", &k->p_zero, err, errlen)
               ? -1
               : 0;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = k.min_n < 1                        ? "min_n must be at least 1"
                      : k.max_n < k.min_n                ? "max_n must be >= min_n"
                      : k.max_n > 1000                   ? "max_n must be at most 1000"
                      : !(k.p_zero > 0 && k.p_zero <= 1) ? "p_zero must be in (0, 1]"
                                                         : NULL;
    if (bad) snprintf(err, errlen, "binary_matrix config: %s", bad);
    return bad ? -1 : 0;
}

/* rows joined by newlines, cells by spaces */
static char *matrix_str(const int *a, int n)
{
    size_t cap = (size_t)n * (size_t)n * 5 + 1, len = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n * n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%d%s", a[i], i == n * n - 1 ? "" : (i + 1) % n ? " " : "\n");
    return s;
}

static cJSON *matrix_json(const int *a, int n)
{
    cJSON *rows = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(rows, cJSON_CreateIntArray(a + i * n, n));
    return rows;
}

/* breadth-first search from every 0 at once */
static void distances(const int *a, int n, int *dist, int *queue)
{
    int head = 0, tail = 0;
    for (int i = 0; i < n * n; i++) {
        dist[i] = a[i] == 0 ? 0 : -1;
        if (a[i] == 0) queue[tail++] = i;
    }
    static const int dr[4] = {1, -1, 0, 0}, dc[4] = {0, 0, 1, -1};
    while (head < tail) {
        int cell = queue[head++], r = cell / n, c = cell % n;
        for (int d = 0; d < 4; d++) {
            int rr = r + dr[d], cc = c + dc[d];
            if (rr < 0 || rr >= n || cc < 0 || cc >= n || dist[rr * n + cc] >= 0) continue;
            dist[rr * n + cc] = dist[cell] + 1;
            queue[tail++] = rr * n + cc;
        }
    }
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    int n = (int)task_rng_range(&r, k.min_n, k.max_n), nn = n * n;
    int *a = malloc(3 * (size_t)nn * sizeof *a), *dist = a + nn, *queue = a + 2 * nn;
    /* one 0 for sure so every distance exists, then a shuffle */
    a[0] = 0;
    for (int i = 1; i < nn; i++) a[i] = task_rng_double(&r) < k.p_zero ? 0 : 1;
    for (int i = nn - 1; i > 0; i--) {
        int j = (int)task_rng_below(&r, (uint64_t)i + 1), t = a[i];
        a[i] = a[j], a[j] = t;
    }
    distances(a, n, dist, queue);
    char *ms = matrix_str(a, n);
    out->question =
        task_strdupf("For every cell of the square 0/1 matrix below, find the taxicab (Manhattan) distance to the "
                     "nearest cell holding 0.\nAnswer with a matrix of the same size: one row per line, the numbers "
                     "of a row separated by single spaces.\n%s\n",
                     ms);
    free(ms);
    out->answer = matrix_str(dist, n);
    cJSON *m = out->metadata = task_metadata_new("binary_matrix", index);
    cJSON_AddItemToObject(m, "matrix", matrix_json(a, n));
    cJSON_AddItemToObject(m, "solution", matrix_json(dist, n));
    cJSON_AddNumberToObject(m, "n", n);
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON_AddItemToObject(d, "n", task_json_pair((double)k.min_n, (double)k.max_n));
    cJSON_AddNumberToObject(d, "p_zero", k.p_zero);
    free(a);
    return 0;
}

/* A Python literal, just enough of it to print: str() of a scalar, or the
 * items of something iterable. */
enum { V_INT, V_BOOL, V_NONE, V_OTHER, V_STR, V_SEQ };
typedef struct value {
    int kind;
    char *text; /* V_INT: decimal; V_STR: the characters */
    size_t len;
    int truth;            /* V_BOOL */
    struct value **items; /* V_SEQ */
    size_t count;
} value_t;

static void value_free(value_t *v)
{
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) value_free(v->items[i]);
    free(v->items);
    free(v->text);
    free(v);
}

static value_t *value_new(int kind)
{
    value_t *v = calloc(1, sizeof *v);
    v->kind = kind;
    return v;
}

static void seq_push(value_t *seq, value_t *item)
{
    if ((seq->count & (seq->count - 1)) == 0)
        seq->items = realloc(seq->items, (seq->count ? 2 * seq->count : 1) * sizeof *seq->items);
    seq->items[seq->count++] = item;
}

typedef struct {
    const char *p, *end;
    int depth;
} parser_t;

/* whitespace, comments and line continuations; newlines only inside
 * brackets, as Python's tokenizer */
static void skip(parser_t *ps)
{
    while (ps->p < ps->end) {
        char ch = *ps->p;
        if (ch == ' ' || ch == '\t' || ch == '\f') ps->p++;
        else if ((ch == '\n' || ch == '\r') && ps->depth > 0) ps->p++;
        else if (ch == '\\' && ps->p + 1 < ps->end && ps->p[1] == '\n') ps->p += 2;
        else if (ch == '\\' && ps->end - ps->p >= 3 && ps->p[1] == '\r' && ps->p[2] == '\n') ps->p += 3;
        else if (ch == '#')
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        else break;
    }
}

/* blank and comment-only lines around the expression are fine */
static int only_blank_left(parser_t *ps)
{
    parser_t t = *ps;
    t.depth = 1;
    skip(&t);
    return t.p >= t.end;
}

static int is_ident(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           (unsigned char)ch >= 0x80;
}

static int digit_in(char ch, int base)
{
    int d = ch >= '0' && ch <= '9'   ? ch - '0'
            : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                     : 99;
    return d < base ? d : -1;
}

/* digits of base with single underscores between them; count of digits */
static size_t scan_digits(parser_t *ps, int base, int leading_underscore)
{
    size_t n = 0;
    while (ps->p < ps->end) {
        if (*ps->p == '_' && (n || leading_underscore) && ps->p + 1 < ps->end && digit_in(ps->p[1], base) >= 0) ps->p++;
        if (digit_in(*ps->p, base) < 0) break;
        ps->p++, n++;
    }
    return n;
}

/* the digits of a 0x, 0o or 0b integer, ps->p past its prefix; one that
 * outgrows 120 bits is V_OTHER */
static value_t *parse_prefixed_int(parser_t *ps, int base)
{
    const char *d0 = ps->p;
    if (!scan_digits(ps, base, 1) || (ps->p < ps->end && is_ident(*ps->p))) return NULL;
    unsigned __int128 v = 0;
    int big = 0;
    for (const char *q = d0; q < ps->p; q++) {
        if (*q == '_') continue;
        if (v >> 120) big = 1;
        v = v * (unsigned)base + (unsigned)digit_in(*q, base);
    }
    value_t *r = value_new(big ? V_OTHER : V_INT);
    if (!big) {
        char buf[48];
        int i = sizeof buf;
        buf[--i] = '\0';
        do buf[--i] = (char)('0' + (int)(v % 10));
        while (v /= 10);
        r->text = strdup(buf + i);
    }
    return r;
}

static value_t *parse_number(parser_t *ps)
{
    const char *s = ps->p;
    if (*s == '0' && s + 1 < ps->end && strchr("xXoObB", s[1])) {
        int base = strchr("xX", s[1]) ? 16 : strchr("oO", s[1]) ? 8 : 2;
        ps->p += 2;
        return parse_prefixed_int(ps, base);
    }
    size_t ni = scan_digits(ps, 10, 0), nf = 0;
    int is_float = 0;
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        is_float = 1;
        nf = scan_digits(ps, 10, 0);
    }
    if (!ni && !nf) return NULL;
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (!scan_digits(ps, 10, 0)) return NULL;
        is_float = 1;
    }
    if (ps->p < ps->end && (*ps->p == 'j' || *ps->p == 'J')) ps->p++, is_float = 1;
    if (ps->p < ps->end && is_ident(*ps->p)) return NULL;
    if (is_float) return value_new(V_OTHER);
    /* a decimal integer: no leading zeros unless it is all zeros; CPython
     * 3.11 refuses literals of more than 4300 digits */
    size_t nz = 0;
    char *t = malloc((size_t)(ps->p - s) + 1);
    for (const char *q = s; q < ps->p; q++)
        if (*q != '_') t[nz++] = *q;
    t[nz] = '\0';
    size_t lead = strspn(t, "0");
    if ((lead && lead < nz) || nz > 4300) {
        free(t);
        return NULL;
    }
    value_t *r = value_new(V_INT);
    if (lead == nz) {
        t[0] = '0';
        t[1] = '\0';
    }
    r->text = t;
    return r;
}

static void put_utf8(char **w, uint32_t c)
{
    unsigned char *o = (unsigned char *)*w;
    if (c < 0x80) *o++ = (unsigned char)c;
    else if (c < 0x800) {
        *o++ = (unsigned char)(0xC0 | c >> 6);
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (unsigned char)(0xE0 | c >> 12);
        *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | c >> 18);
        *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (c & 0x3F));
    }
    *w = (char *)o;
}

/* one string literal body after its opening quote(s), appended at *w;
 * -1 on a syntax error */
static int string_body(parser_t *ps, char quote, int triple, int raw, int bytes, char **w)
{
    for (;;) {
        if (ps->p >= ps->end) return -1;
        char ch = *ps->p;
        if (ch == quote && (!triple || (ps->end - ps->p >= 3 && ps->p[1] == quote && ps->p[2] == quote))) {
            ps->p += triple ? 3 : 1;
            return 0;
        }
        if (ch == '\n' && !triple) return -1;
        if (bytes && (unsigned char)ch >= 0x80) return -1;
        if (ch != '\\') {
            *(*w)++ = ch;
            ps->p++;
            continue;
        }
        if (ps->p + 1 >= ps->end) return -1;
        char e = ps->p[1];
        if (raw) {
            *(*w)++ = '\\';
            *(*w)++ = e;
            ps->p += 2;
            continue;
        }
        ps->p += 2;
        const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
        const char *hit = NULL;
        for (const char *q = simple; *q; q += 2)
            if (*q == e) hit = q;
        if (hit) {
            *(*w)++ = hit[1];
            continue;
        }
        if (e == '\n') continue;
        int width = e == 'x' ? 2 : e == 'u' && !bytes ? 4 : e == 'U' && !bytes ? 8 : 0;
        if (width) {
            uint32_t c = 0;
            for (int i = 0; i < width; i++, ps->p++) {
                int d = ps->p < ps->end ? digit_in(*ps->p, 16) : -1;
                if (d < 0) return -1;
                c = c * 16 + (uint32_t)d;
            }
            if (c > 0x10FFFF) return -1;
            if (bytes) *(*w)++ = (char)c;
            else put_utf8(w, c);
            continue;
        }
        if (e >= '0' && e <= '7') {
            uint32_t c = (uint32_t)(e - '0');
            for (int i = 0; i < 2 && ps->p < ps->end && *ps->p >= '0' && *ps->p <= '7'; i++)
                c = c * 8 + (uint32_t)(*ps->p++ - '0');
            if (bytes) *(*w)++ = (char)c;
            else put_utf8(w, c);
            continue;
        }
        if (e == 'N' && !bytes) return -1; /* named characters: not worth a table */
        *(*w)++ = '\\';
        ps->p--; /* an unknown escape keeps its backslash and character */
    }
}

/* adjacent string literals concatenate; str and bytes do not mix */
static value_t *parse_strings(parser_t *ps)
{
    char *buf = malloc((size_t)(ps->end - ps->p) * 4 + 1), *w = buf;
    int kind = -1;
    for (;;) {
        const char *q = ps->p;
        int raw = 0, bytes = 0;
        while (q < ps->end && strchr("rRbBuU", *q) && *q) {
            raw |= *q == 'r' || *q == 'R';
            bytes |= *q == 'b' || *q == 'B';
            q++;
        }
        if (q >= ps->end || (*q != '\'' && *q != '"') || q - ps->p > 2) break;
        if (kind >= 0 && kind != bytes) {
            free(buf);
            return NULL;
        }
        kind = bytes;
        char quote = *q;
        int triple = ps->end - q >= 3 && q[1] == quote && q[2] == quote;
        ps->p = q + (triple ? 3 : 1);
        if (string_body(ps, quote, triple, raw, bytes, &w) != 0) {
            free(buf);
            return NULL;
        }
        skip(ps);
    }
    if (kind < 0) {
        free(buf);
        return NULL;
    }
    value_t *v;
    if (kind) {
        /* bytes print as b'...' and iterate as ints: a sequence for our use */
        v = value_new(V_SEQ);
        for (char *c = buf; c < w; c++) {
            value_t *item = value_new(V_INT);
            item->text = task_strdupf("%u", (unsigned)(unsigned char)*c);
            seq_push(v, item);
        }
        free(buf);
    } else {
        v = value_new(V_STR);
        v->text = buf;
        v->len = (size_t)(w - buf);
    }
    return v;
}

static value_t *parse_items(parser_t *ps, char close, int *is_tuple);

static value_t *parse_atom(parser_t *ps)
{
    skip(ps);
    if (ps->p >= ps->end) return NULL;
    char ch = *ps->p;
    if (ch == '[' || ch == '(') {
        ps->p++, ps->depth++;
        int tuple = 0;
        value_t *v = parse_items(ps, ch == '[' ? ']' : ')', &tuple);
        ps->depth--;
        if (!v) return NULL;
        if (ch == '(' && !tuple && v->count == 1) {
            /* a parenthesised expression, not a tuple */
            value_t *inner = v->items[0];
            v->count = 0;
            value_free(v);
            return inner;
        }
        return v;
    }
    if ((ch >= '0' && ch <= '9') || (ch == '.' && ps->p + 1 < ps->end && ps->p[1] >= '0' && ps->p[1] <= '9'))
        return parse_number(ps);
    if (ch == '\'' || ch == '"' || strchr("rRbBuU", ch)) {
        const char *save = ps->p;
        value_t *v = parse_strings(ps);
        if (v || !strchr("rRbBuU", ch)) return v;
        ps->p = save;
    }
    static const char *const names[] = {"True", "False", "None"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(names[i]);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, names[i], n) == 0 &&
            (ps->p + n == ps->end || !is_ident(ps->p[n]))) {
            ps->p += n;
            value_t *v = value_new(i < 2 ? V_BOOL : V_NONE);
            v->truth = i == 0;
            return v;
        }
    }
    return NULL;
}

/* unary + and -: numbers only (bools become ints), anything else raises */
static value_t *parse_unary(parser_t *ps)
{
    skip(ps);
    int neg = 0, signs = 0;
    while (ps->p < ps->end && (*ps->p == '-' || *ps->p == '+')) {
        neg ^= *ps->p == '-';
        signs++;
        ps->p++;
        skip(ps);
    }
    value_t *v = parse_atom(ps);
    if (!v || !signs) return v;
    if (v->kind == V_BOOL) {
        v->kind = V_INT;
        v->text = strdup(v->truth ? "1" : "0");
    }
    if (v->kind != V_INT && v->kind != V_OTHER) {
        value_free(v);
        return NULL;
    }
    if (v->kind == V_INT && neg && strcmp(v->text, "0") != 0) {
        char *t = task_strdupf("-%s", v->text);
        free(v->text);
        v->text = t;
    }
    return v;
}

/* items up to close (0 for the end of input); *is_tuple when a comma
 * appeared, which makes (x,) a tuple */
static value_t *parse_items(parser_t *ps, char close, int *is_tuple)
{
    value_t *seq = value_new(V_SEQ);
    for (;;) {
        skip(ps);
        if (close ? ps->p < ps->end && *ps->p == close : only_blank_left(ps)) break;
        value_t *item = parse_unary(ps);
        if (!item) {
            value_free(seq);
            return NULL;
        }
        seq_push(seq, item);
        skip(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            *is_tuple = 1;
            continue;
        }
        if (close ? ps->p < ps->end && *ps->p == close : only_blank_left(ps)) break;
        value_free(seq);
        return NULL;
    }
    if (close) {
        if (ps->p >= ps->end) {
            value_free(seq);
            return NULL;
        }
        ps->p++;
    }
    return seq;
}

static value_t *parse_literal(const char *s)
{
    parser_t ps = {s, s + strlen(s), 1};
    skip(&ps); /* leading blank and comment lines */
    ps.depth = 0;
    if (ps.p >= ps.end) return NULL; /* eval("") raises */
    int tuple = 0;
    value_t *v = parse_items(&ps, 0, &tuple);
    if (!v) return NULL;
    if (!tuple && v->count == 1) {
        value_t *inner = v->items[0];
        v->count = 0;
        value_free(v);
        return inner;
    }
    if (!tuple) {
        value_free(v);
        return NULL;
    } /* empty input */
    return v;
}

/* str() of a cell; things that cannot print as a number in the answer
 * (floats, lists) print as a byte no answer holds */
static void append_cell(char **w, const value_t *v)
{
    const char *t = v->kind == V_INT    ? v->text
                    : v->kind == V_BOOL ? (v->truth ? "True" : "False")
                    : v->kind == V_NONE ? "None"
                    : v->kind == V_STR  ? NULL
                                        : "\x01";
    size_t n = t ? strlen(t) : v->len;
    memcpy(*w, t ? t : v->text, n);
    *w += n;
}

/* item i of a sequence, or character i of a str as a one-character str */
static value_t *iterate(const value_t *v, size_t i, value_t *tmp)
{
    if (v->kind == V_SEQ) return v->items[i];
    size_t off = 0, k = 0;
    for (;;) {
        size_t adv = 1;
        while (off + adv < v->len && ((unsigned char)v->text[off + adv] & 0xC0) == 0x80) adv++;
        if (k++ == i) {
            *tmp = (value_t){.kind = V_STR, .text = v->text + off, .len = adv};
            return tmp;
        }
        off += adv;
    }
}

static size_t length(const value_t *v)
{
    if (v->kind == V_SEQ) return v->count;
    size_t n = 0;
    for (size_t i = 0; i < v->len; i++) n += ((unsigned char)v->text[i] & 0xC0) != 0x80;
    return n;
}

/* _matrix_to_str(value), or NULL where Python raises (not iterable) */
static char *matrix_to_str(const value_t *m)
{
    if (m->kind != V_SEQ && m->kind != V_STR) return NULL;
    size_t cap = 64, rows = length(m);
    for (size_t i = 0; i < rows; i++) {
        value_t t1, *row = iterate(m, i, &t1);
        if (row->kind != V_SEQ && row->kind != V_STR) return NULL;
        cap += 2 + (row->kind == V_STR ? 2 * row->len : 0);
        for (size_t j = 0; row->kind == V_SEQ && j < row->count; j++)
            cap += 2 + (row->items[j]->kind == V_INT   ? strlen(row->items[j]->text)
                        : row->items[j]->kind == V_STR ? row->items[j]->len
                                                       : 8);
    }
    char *out = malloc(cap), *w = out;
    for (size_t i = 0; i < rows; i++) {
        value_t t1, *row = iterate(m, i, &t1);
        if (i) *w++ = '\n';
        size_t cells = length(row);
        for (size_t j = 0; j < cells; j++) {
            value_t t2;
            if (j) *w++ = ' ';
            append_cell(&w, iterate(row, j, &t2));
        }
    }
    *w = '\0';
    return out;
}

static double score(const char *answer, const task_question_t *e)
{
    if (!answer) return 0.0;
    if (strcmp(answer, e->answer) == 0) return 1.0;
    value_t *v = parse_literal(answer);
    if (!v) return 0.0;
    char *s = matrix_to_str(v);
    double r = s && strcmp(s, e->answer) == 0 ? 0.1 : 0.0;
    free(s);
    value_free(v);
    return r;
}

const task_family_t task_family_binary_matrix = {
    "binary_matrix", default_config, validate_config, generate, score,
};
