/* Drawing one token from next-token logits: temperature, top-k, top-p
 * (nucleus, as Hugging Face's TopPLogitsWarper keeps it), greedy at
 * temperature 0. The caller supplies the uniform number (from rng.h) and
 * a scratch buffer, so the draw allocates nothing and is reproducible. */
#ifndef SAPO_SAMPLE_H
#define SAPO_SAMPLE_H

#include <stddef.h>

typedef struct {
    float temperature; /* 0 = greedy (argmax, lowest index on ties) */
    int top_k;         /* 0 = off */
    float top_p;       /* 1 = off */
} sample_params_t;

/* bytes of scratch sample_token needs for a vocabulary of V tokens */
size_t sample_scratch_bytes(int V);

/* logits (V) are not modified; u is uniform in (0, 1]. Returns the token
 * and sets *logprob = log_softmax(logits / T)[token] (T = 1 when greedy):
 * the log-prob of the sampled token before top-k/top-p truncation, the
 * value TRL recomputes for it. */
int sample_token(const float *logits, int V, const sample_params_t *p, float u, void *scratch, float *logprob);

/* the tokens sample_token can return for these logits, ascending, into
 * ids (V); returns their count (1, the argmax, when greedy) */
int sample_kept(const float *logits, int V, const sample_params_t *p, void *scratch, int *ids);

#endif
