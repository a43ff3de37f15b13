/* Propositional formulas: reasoning-gym's reader, its printer, and truth
 * tables evaluated 64 assignments at a time (one bit per assignment). */
#include "tasks/formula.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/py.h"

typedef struct {
    formula_op_t op;
    int a, b; /* children: a for ¬, a and b for binary connectives */
    int var;  /* FORMULA_VAR: index into names */
} node_t;

struct formula_set {
    node_t *nodes;
    int n, cap;
    char **names;
    int n_names, names_cap;
};

static const struct {
    const char *text;
    formula_op_t op;
} connectives[] = {
    /* reasoning-gym's precedence: the first binds loosest */
    {"\xe2\x86\x94", FORMULA_IFF},     /* ↔ */
    {"\xe2\x86\x92", FORMULA_IMPLIES}, /* → */
    {"\xe2\x88\xa8", FORMULA_OR},      /* ∨ */
    {"\xe2\x88\xa7", FORMULA_AND},     /* ∧ */
};
static const char not_sign[] = "\xc2\xac"; /* ¬ */

formula_set_t *formula_set_new(void) { return calloc(1, sizeof(formula_set_t)); }

void formula_set_destroy(formula_set_t **self_p)
{
    formula_set_t *self = *self_p;
    if (!self) return;
    for (int i = 0; i < self->n_names; i++) free(self->names[i]);
    free(self->names);
    free(self->nodes);
    free(self);
    *self_p = NULL;
}

static int add_node(formula_set_t *self, node_t node)
{
    if (self->n == self->cap) {
        self->cap = self->cap ? self->cap * 2 : 32;
        self->nodes = realloc(self->nodes, (size_t)self->cap * sizeof *self->nodes);
        if (!self->nodes) abort();
    }
    self->nodes[self->n] = node;
    return self->n++;
}

static int var_of(formula_set_t *self, const char *name, size_t len)
{
    for (int i = 0; i < self->n_names; i++)
        if (strlen(self->names[i]) == len && memcmp(self->names[i], name, len) == 0)
            return add_node(self, (node_t){FORMULA_VAR, -1, -1, i});
    if (self->n_names == self->names_cap) {
        self->names_cap = self->names_cap ? self->names_cap * 2 : 16;
        self->names = realloc(self->names, (size_t)self->names_cap * sizeof *self->names);
        if (!self->names) abort();
    }
    self->names[self->n_names] = strndup(name, len);
    if (!self->names[self->n_names]) abort();
    return add_node(self, (node_t){FORMULA_VAR, -1, -1, self->n_names++});
}

int formula_set_var(formula_set_t *self, const char *name) { return var_of(self, name, strlen(name)); }

int formula_set_not(formula_set_t *self, int a) { return add_node(self, (node_t){FORMULA_NOT, a, -1, -1}); }

int formula_set_binary(formula_set_t *self, formula_op_t op, int a, int b)
{
    return add_node(self, (node_t){op, a, b, -1});
}

formula_op_t formula_set_op(const formula_set_t *self, int f) { return self->nodes[f].op; }

int formula_set_child(const formula_set_t *self, int f, int which)
{
    return which ? self->nodes[f].b : self->nodes[f].a;
}

/* A text wholly inside one pair of parentheses: "(...)" whose inner
 * parentheses never close more than they opened and balance at the end. */
static int enclosed(const char *t, size_t n)
{
    if (n < 2 || t[0] != '(' || t[n - 1] != ')') return 0;
    long level = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (t[i] == '(') level++;
        else if (t[i] == ')' && --level < 0) return 0;
    }
    return level == 0;
}

static int parse(formula_set_t *self, const char *t, size_t n, int depth)
{
    if (depth > FORMULA_MAX_DEPTH) return FORMULA_DEEP;
    py_strip(&t, &n);
    if (n == 0) return FORMULA_EMPTY;
    if (enclosed(t, n)) return parse(self, t + 1, n - 2, depth + 1);
    for (size_t c = 0; c < sizeof connectives / sizeof connectives[0]; c++) {
        /* the byte scan finds a connective only at a code point start:
         * its lead byte 0xe2 never occurs inside another code point */
        long level = 0;
        for (size_t i = n; i-- > 0;) {
            if (t[i] == ')') level++;
            else if (t[i] == '(') level--;
            else if (level == 0 && i + 3 <= n && memcmp(t + i, connectives[c].text, 3) == 0) {
                int a = parse(self, t, i, depth + 1);
                if (a < 0) return a;
                int b = parse(self, t + i + 3, n - i - 3, depth + 1);
                if (b < 0) return b;
                return formula_set_binary(self, connectives[c].op, a, b);
            }
        }
    }
    if (n >= 2 && memcmp(t, not_sign, 2) == 0) {
        int a = parse(self, t + 2, n - 2, depth + 1);
        return a < 0 ? a : formula_set_not(self, a);
    }
    return var_of(self, t, n);
}

int formula_set_parse(formula_set_t *self, const char *text, size_t len) { return parse(self, text, len, 1); }

typedef struct {
    char *s;
    size_t len, cap;
} buf_t;

static void put(buf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 64;
        b->s = realloc(b->s, b->cap);
        if (!b->s) abort();
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void format(const formula_set_t *self, int f, buf_t *b)
{
    const node_t *node = &self->nodes[f];
    if (node->op == FORMULA_VAR) {
        put(b, self->names[node->var], strlen(self->names[node->var]));
    } else if (node->op == FORMULA_NOT) {
        put(b, not_sign, 2);
        format(self, node->a, b);
    } else {
        put(b, "(", 1);
        format(self, node->a, b);
        for (size_t c = 0; c < sizeof connectives / sizeof connectives[0]; c++)
            if (connectives[c].op == node->op) {
                put(b, " ", 1);
                put(b, connectives[c].text, 3);
                put(b, " ", 1);
            }
        format(self, node->b, b);
        put(b, ")", 1);
    }
}

char *formula_set_format(const formula_set_t *self, int f)
{
    buf_t b = {0};
    format(self, f, &b);
    return b.s;
}

int formula_set_size(const formula_set_t *self, int f)
{
    const node_t *node = &self->nodes[f];
    if (node->op == FORMULA_VAR) return 1;
    if (node->op == FORMULA_NOT) return 1 + formula_set_size(self, node->a);
    return 1 + formula_set_size(self, node->a) + formula_set_size(self, node->b);
}

/* lane l of a 64-assignment word gives variable j < 6 the value of bit j
 * of l; variables from 6 on take bit j - 6 of the word number */
static const uint64_t lane_bits[6] = {
    0xaaaaaaaaaaaaaaaaull, 0xccccccccccccccccull, 0xf0f0f0f0f0f0f0f0ull,
    0xff00ff00ff00ff00ull, 0xffff0000ffff0000ull, 0xffffffff00000000ull,
};

/* Marks in used every node the premises and the conclusion reach and
 * numbers their variables in bit (by name, -1 for names not reached);
 * returns how many there are. Children always have smaller ids than their
 * parents, so one sweep down from the top marks everything. */
static int mark_reached(const formula_set_t *self, const int *premises, int n_premises, int conclusion, char *used,
                        int *bit)
{
    for (int i = 0; i < n_premises; i++) used[premises[i]] = 1;
    used[conclusion] = 1;
    for (int i = 0; i < self->n_names; i++) bit[i] = -1;
    int n_vars = 0;
    for (int i = self->n - 1; i >= 0; i--) {
        if (!used[i]) continue;
        const node_t *node = &self->nodes[i];
        if (node->op == FORMULA_VAR) continue;
        used[node->a] = 1;
        if (node->op != FORMULA_NOT) used[node->b] = 1;
    }
    for (int i = 0; i < self->n; i++)
        if (used[i] && self->nodes[i].op == FORMULA_VAR && bit[self->nodes[i].var] < 0)
            bit[self->nodes[i].var] = n_vars++;
    return n_vars;
}

/* val[i] for every used node over the 64 assignments of one word, children
 * before parents in one sweep up */
static void evaluate_word(const formula_set_t *self, const char *used, const int *bit, uint64_t word, uint64_t *val)
{
    for (int i = 0; i < self->n; i++) {
        if (!used[i]) continue;
        const node_t *node = &self->nodes[i];
        uint64_t a = node->a >= 0 ? val[node->a] : 0, b = node->b >= 0 ? val[node->b] : 0;
        switch (node->op) {
        case FORMULA_VAR: {
            int j = bit[node->var];
            val[i] = j < 6 ? lane_bits[j] : j - 6 < 64 && ((word >> (j - 6)) & 1) ? ~0ull : 0;
            break;
        }
        case FORMULA_NOT: val[i] = ~a; break;
        case FORMULA_AND: val[i] = a & b; break;
        case FORMULA_OR: val[i] = a | b; break;
        case FORMULA_IMPLIES: val[i] = ~a | b; break;
        case FORMULA_IFF: val[i] = ~(a ^ b); break;
        }
    }
}

int formula_set_entails(const formula_set_t *self, const int *premises, int n_premises, int conclusion,
                        double max_assignments, int *entailed, int *tautology)
{
    char *used = calloc((size_t)self->n + 1, 1);
    int *bit = malloc(((size_t)self->n_names + 1) * sizeof *bit);
    uint64_t *val = malloc(((size_t)self->n + 1) * sizeof *val);
    if (!used || !bit || !val) abort();
    int n_vars = mark_reached(self, premises, n_premises, conclusion, used, bit);

    double total = 1;
    for (int i = 0; i < n_vars; i++) total *= 2;
    uint64_t lanes = n_vars >= 6 ? ~0ull : (1ull << (1u << n_vars)) - 1;
    double words = n_vars >= 6 ? total / 64 : 1;
    int counterexample = 0, falsified = 0, rc = 0;
    double w = 0;
    for (; w < words && !counterexample; w++) {
        if (w * 64 >= max_assignments) {
            rc = -1;
            break;
        }
        evaluate_word(self, used, bit, (uint64_t)w, val);
        uint64_t all = lanes;
        for (int p = 0; p < n_premises; p++) all &= val[premises[p]];
        counterexample = (all & ~val[conclusion]) != 0;
        falsified |= (lanes & ~val[conclusion]) != 0;
    }
    free(used);
    free(bit);
    free(val);
    if (rc < 0) return -1;
    *entailed = !counterexample;
    if (tautology) *tautology = !counterexample && !falsified;
    return 0;
}
