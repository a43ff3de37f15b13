/* One micro-batch of 16 sequences of a GRPO step over groups of L
 * completions of CL tokens after a prompt of P (bench_model's
 * train_step_group_tiny, bench_round's round): one row per completion,
 * or (packed) one row per group with the prompt once and each completion
 * a segment (model_forward_packed's start, the learner's shared prompt).
 * Tokens, targets and loss weights are made up; their shape is the
 * learner's. */
#ifndef SAPO_BENCH_GROUP_ROWS_H
#define SAPO_BENCH_GROUP_ROWS_H

#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    int rows, T;
    int *tok, *tgt, *start;
    float *lp, *w;
} group_rows_t;

static inline group_rows_t group_rows_new(int L, int P, int CL, bool packed)
{
    group_rows_t b = {.rows = packed ? 16 / L : 16, .T = packed ? P - 1 + L * CL : P + CL};
    int n = b.rows * b.T;
    b.tok = malloc(sizeof(int) * n), b.tgt = malloc(sizeof(int) * n), b.start = malloc(sizeof(int) * n);
    b.lp = malloc(sizeof(float) * n), b.w = malloc(sizeof(float) * n);
    for (int r = 0; r < b.rows; r++)
        for (int t = 0; t < b.T; t++) {
            int k = r * b.T + t, seg = packed && t >= P - 1 ? (t - (P - 1)) / CL : 0;
            bool comp = packed ? t >= P - 1 : t >= P - 1 && t < b.T - 1;
            b.tok[k] = 'a' + (t * 7 + r) % 26;
            b.tgt[k] = comp ? 'a' + (t * 5 + r) % 26 : -1;
            b.start[k] = packed && t >= P - 1 ? P - 1 + seg * CL : 0;
            b.w[k] = comp ? 0.01f : 0.0f;
        }
    return b;
}

static inline void group_rows_free(group_rows_t *b)
{
    free(b->tok), free(b->tgt), free(b->start), free(b->lp), free(b->w);
}

#endif
