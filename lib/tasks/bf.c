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

int bf_run(const char *program, uint64_t step_limit, char **out, size_t *outlen, uint64_t *steps, char *err,
           size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    op_t *ops;
    size_t n;
    if (compile(program, &ops, &n, err, errlen) < 0) return -1;
    unsigned char *tape = calloc(BF_TAPE_CELLS, 1);
    size_t cap = 64, len = 0;
    char *buf = malloc(cap);
    if (!tape || !buf) {
        free(ops);
        free(tape);
        free(buf);
        snprintf(err, errlen, "bf: out of memory for the tape");
        return -1;
    }
    long ptr = 0;
    uint64_t count = 0;
    int rc = 0;
    for (size_t pc = 0; pc < n; pc++) {
        if (++count > step_limit) {
            snprintf(err, errlen, "bf: step limit %llu reached at program offset %zu", (unsigned long long)step_limit,
                     ops[pc].pos);
            rc = -1;
            break;
        }
        const op_t *op = &ops[pc];
        switch (op->kind) {
        case OP_ADD: tape[ptr] = (unsigned char)(tape[ptr] + op->arg); break;
        case OP_MOVE:
            ptr += op->arg;
            if (ptr < 0 || ptr >= BF_TAPE_CELLS) {
                snprintf(err, errlen, "bf: pointer leaves the %d-cell tape at program offset %zu", BF_TAPE_CELLS,
                         op->pos);
                rc = -1;
            }
            break;
        case OP_OUT:
            if (len + 1 >= cap) {
                char *grown = realloc(buf, cap * 2);
                if (!grown) {
                    snprintf(err, errlen, "bf: out of memory for %zu bytes of output", len);
                    rc = -1;
                    break;
                }
                buf = grown;
                cap *= 2;
            }
            buf[len++] = (char)tape[ptr];
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
        if (rc < 0) break;
    }
    free(ops);
    free(tape);
    if (rc < 0) {
        free(buf);
        return -1;
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    if (steps) *steps = count;
    return 0;
}
