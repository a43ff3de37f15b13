/* A model's per-token log-probs against transformers' on the golden
 * prompts (tests/golden/gguf/NAME.model.json, written by
 * tests/oracle/gguf_model_golden.py): "ids", rows of token ids, and
 * "logp", each row's log-prob of token t + 1 after tokens 0..t. */
#ifndef SAPO_GOLDEN_LOGP_H
#define SAPO_GOLDEN_LOGP_H
#include "check.h"
#include "model/model.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

typedef struct {
    double worst, sum; /* the largest |logp - golden| and the sum of them */
    int n;             /* tokens compared */
} logp_gap_t;

static inline logp_gap_t golden_logp_gap(model_t *m, const cJSON *g)
{
    const cJSON *ids = cJSON_GetObjectItem(g, "ids"), *logp = cJSON_GetObjectItem(g, "logp");
    logp_gap_t gap = {0};
    for (int i = 0; i < cJSON_GetArraySize(ids); i++) {
        const cJSON *row = cJSON_GetArrayItem(ids, i), *want = cJSON_GetArrayItem(logp, i);
        int T = cJSON_GetArraySize(row);
        int *tok = malloc(sizeof(int) * T), *tgt = malloc(sizeof(int) * T);
        float *lp = malloc(sizeof(float) * T);
        for (int t = 0; t < T; t++) {
            tok[t] = cJSON_GetArrayItem(row, t)->valueint;
            tgt[t] = t + 1 < T ? cJSON_GetArrayItem(row, t + 1)->valueint : -1;
        }
        EXPECT(model_forward(m, tok, tgt, 1, T, 1.0f, lp, NULL) == 0);
        for (int t = 0; t + 1 < T; t++) {
            double d = fabs(lp[t] - cJSON_GetArrayItem(want, t)->valuedouble);
            gap.worst = fmax(gap.worst, d), gap.sum += d, gap.n++;
        }
        free(tok);
        free(tgt);
        free(lp);
    }
    return gap;
}
#endif
