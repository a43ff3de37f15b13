/* Brainfuck interpreter: the program is first folded into a short list of
 * operations (runs of + - > < become one add or move, [-] and [+] one clear)
 * with matched jumps, so generated programs that count to a few hundred
 * run in well under a millisecond. */
#include "tasks/bf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OP_ADD, OP_MOVE, OP_OUT, OP_IN, OP_OPEN, OP_CLOSE, OP_CLEAR } op_kind_t;

typedef struct {
    op_kind_t kind;
    int arg;    /* OP_ADD: amount mod 256; OP_MOVE: signed distance; jumps: target op */
    size_t pos; /* offset in the program text, for error lines */
} op_t;

static int is_clear_loop(const char *p) { return p[0] == '[' && (p[1] == '-' || p[1] == '+') && p[2] == ']'; }

/* Folds the program into ops; 0, or -1 with err. */
static int compile(const char *program, op_t **ops_out, size_t *n_out, char *err, size_t errlen)
{
    size_t len = strlen(program), n = 0, depth = 0;
    op_t *ops = malloc((len + 1) * sizeof *ops);
    size_t *stack = malloc((len + 1) * sizeof *stack);
    if (!ops || !stack) {
        free(ops);
        free(stack);
        snprintf(err, errlen, "bf: out of memory for a %zu-byte program", len);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        char c = program[i];
        if (c == '+' || c == '-' || c == '>' || c == '<') {
            size_t start = i;
            int run = 0;
            for (; i < len && program[i] == c; i++) run++;
            i--;
            if (c == '+') ops[n++] = (op_t){OP_ADD, run % 256, start};
            else if (c == '-') ops[n++] = (op_t){OP_ADD, (256 - run % 256) % 256, start};
            else ops[n++] = (op_t){OP_MOVE, c == '>' ? run : -run, start};
        } else if (c == '.') {
            ops[n++] = (op_t){OP_OUT, 0, i};
        } else if (c == ',') {
            ops[n++] = (op_t){OP_IN, 0, i};
        } else if (c == '[' && is_clear_loop(program + i)) {
            ops[n++] = (op_t){OP_CLEAR, 0, i};
            i += 2;
        } else if (c == '[') {
            stack[depth++] = n;
            ops[n++] = (op_t){OP_OPEN, 0, i};
        } else if (c == ']') {
            if (depth == 0) {
                free(ops);
                free(stack);
                snprintf(err, errlen, "bf: ']' at offset %zu has no matching '['", i);
                return -1;
            }
            size_t open = stack[--depth];
            ops[open].arg = (int)n;
            ops[n++] = (op_t){OP_CLOSE, (int)open, i};
        }
    }
    if (depth > 0) {
        snprintf(err, errlen, "bf: '[' at offset %zu has no matching ']'", ops[stack[depth - 1]].pos);
        free(ops);
        free(stack);
        return -1;
    }
    free(stack);
    *ops_out = ops;
    *n_out = n;
    return 0;
}

/* The output so far; cap always leaves room for the closing NUL. */
typedef struct {
    char *buf;
    size_t len, cap;
} output_t;

/* 0, or -1 with err when the buffer cannot grow. */
static int output_byte(output_t *o, char c, char *err, size_t errlen)
{
    if (o->len + 1 >= o->cap) {
        char *grown = realloc(o->buf, o->cap * 2);
        if (!grown) {
            snprintf(err, errlen, "bf: out of memory for %zu bytes of output", o->len);
            return -1;
        }
        o->buf = grown;
        o->cap *= 2;
    }
    o->buf[o->len++] = c;
    return 0;
}

/* Runs the ops on a zeroed tape, counting every op executed in *count;
 * 0, or -1 with err at the step limit or off the tape. */
static int execute(const op_t *ops, size_t n, unsigned char *tape, uint64_t step_limit, output_t *o, uint64_t *count,
                   char *err, size_t errlen)
{
    long ptr = 0;
    for (size_t pc = 0; pc < n; pc++) {
        if (++*count > step_limit) {
            snprintf(err, errlen, "bf: step limit %llu reached at program offset %zu", (unsigned long long)step_limit,
                     ops[pc].pos);
            return -1;
        }
        const op_t *op = &ops[pc];
        switch (op->kind) {
        case OP_ADD: tape[ptr] = (unsigned char)(tape[ptr] + op->arg); break;
        case OP_MOVE:
            ptr += op->arg;
            if (ptr < 0 || ptr >= BF_TAPE_CELLS) {
                snprintf(err, errlen, "bf: pointer leaves the %d-cell tape at program offset %zu", BF_TAPE_CELLS,
                         op->pos);
                return -1;
            }
            break;
        case OP_OUT:
            if (output_byte(o, (char)tape[ptr], err, errlen) < 0) return -1;
            break;
        case OP_IN: tape[ptr] = 0; break;
        case OP_CLEAR: tape[ptr] = 0; break;
        case OP_OPEN:
            if (!tape[ptr]) pc = (size_t)op->arg;
            break;
        case OP_CLOSE:
            if (tape[ptr]) pc = (size_t)op->arg;
            break;
        }
    }
    return 0;
}

int bf_run(const char *program, uint64_t step_limit, char **out, size_t *outlen, uint64_t *steps, char *err,
           size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    op_t *ops;
    size_t n;
    if (compile(program, &ops, &n, err, errlen) < 0) return -1;
    unsigned char *tape = calloc(BF_TAPE_CELLS, 1);
    output_t o = {malloc(64), 0, 64};
    if (!tape || !o.buf) {
        free(ops);
        free(tape);
        free(o.buf);
        snprintf(err, errlen, "bf: out of memory for the tape");
        return -1;
    }
    uint64_t count = 0;
    int rc = execute(ops, n, tape, step_limit, &o, &count, err, errlen);
    free(ops);
    free(tape);
    if (rc < 0) {
        free(o.buf);
        return -1;
    }
    o.buf[o.len] = '\0';
    *out = o.buf;
    *outlen = o.len;
    if (steps) *steps = count;
    return 0;
}
