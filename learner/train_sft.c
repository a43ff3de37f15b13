/* The warm starts' supervised step: cross-entropy on the answers of
 * (question, answer) pairs, in runs of rows of similar length. */
#include "train_sft.h"

#include <stdlib.h>

#include "train_impl.h"

/* The examples that fit the model's positions as prompt, answer and eos,
 * each a row: ids[r], its prompt's length P[r] and its length N[r]. The
 * number of rows, and *T the longest. */
static int encode_examples(const policy_t *pol, const char *const *questions, const char *const *answers, int n,
                           int **ids, int *P, int *N, int *T)
{
    int eos = tokenizer_eos_id(pol->tok);
    int rows = 0;
    for (int i = 0; i < n; i++) {
        char *prompt = policy_prompt(pol, questions[i]);
        size_t np = 0, na = 0;
        int32_t *pi = prompt ? train_encode(pol, prompt, &np) : NULL;
        int32_t *ai = train_encode(pol, answers[i], &na);
        free(prompt);
        if (pi && ai && (int)(np + na + 1) <= model_config(pol->model)->max_pos) {
            ids[rows] = malloc(sizeof(int) * (np + na + 1));
            for (size_t t = 0; t < np; t++) ids[rows][t] = pi[t];
            for (size_t t = 0; t < na; t++) ids[rows][np + t] = ai[t];
            ids[rows][np + na] = eos;
            P[rows] = (int)np;
            N[rows] = (int)(np + na + 1);
            *T = N[rows] > *T ? N[rows] : *T;
            rows++;
        }
        free(pi);
        free(ai);
    }
    return rows;
}

/* the rows' indices from shortest to longest (stable) */
static int *order_by_length(const int *N, int rows)
{
    int *order = malloc(sizeof(int) * rows);
    for (int i = 0; i < rows; i++) order[i] = i;
    for (int i = 1; i < rows; i++)
        for (int k = i; k > 0 && N[order[k - 1]] > N[order[k]]; k--) {
            int x = order[k];
            order[k] = order[k - 1], order[k - 1] = x;
        }
    return order;
}

/* nb rows of Tc positions from rows order[0..nb): the tokens, padded with
 * 0, and as targets the answer's tokens and eos, -1 elsewhere */
static void lay_out_answers(int *const *ids, const int *P, const int *N, const int *order, int nb, int Tc, int *tokens,
                            int *targets)
{
    for (int i = 0; i < nb; i++) {
        int q = order[i];
        for (int t = 0; t < Tc; t++) {
            tokens[i * Tc + t] = t < N[q] ? ids[q][t] : 0;
            targets[i * Tc + t] = (t >= P[q] - 1 && t < N[q] - 1) ? ids[q][t + 1] : -1;
        }
    }
}

/* One step of cross-entropy on the rows' answer tokens: their mean,
 * computed in runs of rows of similar length (a batch padded to its
 * longest prompt, a 440-byte logic question beside 120-byte sums, spent
 * most of its time on padding). The mean loss or -1. */
static float sft_rows(train_t *self, int *const *ids, const int *P, const int *N, int rows, int T)
{
    int *order = order_by_length(N, rows);
    int answer_tokens = 0;
    for (int i = 0; i < rows; i++) answer_tokens += N[i] - P[i];
    int *tokens = malloc(sizeof(int) * rows * T), *targets = malloc(sizeof(int) * rows * T);
    float *logp = malloc(sizeof(float) * rows * T), *dlogp = malloc(sizeof(float) * rows * T);
    model_t *m = self->policy->model;
    model_zero_grad(m);
    double sum = 0;
    float loss = 0;
    for (int r0 = 0, r1; r0 < rows && loss == 0; r0 = r1) {
        for (r1 = r0 + 1; r1 < rows && 2 * N[order[r1]] <= 3 * N[order[r0]]; r1++) {
        }
        int Tc = N[order[r1 - 1]], nb = r1 - r0;
        lay_out_answers(ids, P, N, order + r0, nb, Tc, tokens, targets);
        if (model_forward(m, tokens, targets, nb, Tc, 1.0f, logp, NULL) != 0) {
            loss = -1;
            break;
        }
        for (int k = 0; k < nb * Tc; k++) {
            sum -= targets[k] >= 0 ? logp[k] : 0;
            dlogp[k] = targets[k] >= 0 ? -1.0f / answer_tokens : 0.0f;
        }
        model_backward(m, dlogp);
    }
    if (loss == 0) {
        loss = (float)(sum / answer_tokens);
        adamw_params_t ap = train_adamw_params(self->cfg);
        float norm;
        if (model_optimizer_step(m, self->opt, &ap, self->cfg->max_grad_norm, &norm) != 0) loss = -1;
    }
    free(order), free(tokens), free(targets), free(logp), free(dlogp);
    return loss;
}

float train_sft_step(train_t *self, const char *const *questions, const char *const *answers, int n)
{
    int **ids = calloc((size_t)n, sizeof *ids);
    int *P = calloc((size_t)n, sizeof *P), *N = calloc((size_t)n, sizeof *N);
    int T = 0;
    float loss = -1;
    int rows = encode_examples(self->policy, questions, answers, n, ids, P, N, &T);
    if (rows > 0) loss = sft_rows(self, ids, P, N, rows, T);
    for (int i = 0; i < rows; i++) free(ids[i]);
    free(ids), free(P), free(N);
    return loss;
}
