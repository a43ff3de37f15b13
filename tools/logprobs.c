/* logprobs: what one or two models make of completions already written.
 *
 *   logprobs [--SETTING VALUE]... FILE MODEL [MODEL2]
 *
 * FILE holds completions as the evaluator writes them (the
 * eval-completions setting): one JSON object a line with "question" and
 * "completion". Each is prompted as a node prompts it (the system-prompt
 * setting and the first model's prompt format), its text tokenized by the
 * first model's tokenizer, and read under each MODEL by teacher forcing.
 * A MODEL is what the model setting takes: a name scripts/model.sh
 * fetched, a folder or a GGUF file; both must share a vocabulary.
 *
 * One JSON line a completion: its line in FILE, its tokens, the sum of
 * their log-probs under each model. Then a summary line: completions,
 * tokens and the mean log-prob a token under each model; with two, how far
 * apart they are at each completion token: the mean and largest absolute
 * difference of the token's log-prob, the mean and largest KL divergence
 * of the second model's next-token distribution from the first's, and the
 * share of positions where both put the same token first. What a smaller
 * file of a model changes (docs/cuda.md), or how far a policy moved from
 * its base.
 *
 * A line that is not such an object, or whose prompt and completion do not
 * fit the model's positions, is refused with one line on stderr and
 * counted ("refused" in the summary). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/config.h"
#include "node/policy.h"
#include "util/log.h"

typedef struct {
    long completions, tokens, refused, agree;
    double logp[2]; /* sums over every completion token */
    double abs_sum, abs_max, kl_sum, kl_max;
} tally_t;

static policy_t *open_model(const config_t *cfg, const char *name)
{
    char err[512], path[PATH_MAX];
    if (policy_model_path(name, cfg->model_cache, path, sizeof path, err, sizeof err) != 0) log_fatal("%s", err);
    policy_t *pol = policy_open(path, cfg->system_prompt, err, sizeof err);
    if (!pol) log_fatal("%s", err);
    if (policy_place(pol, cfg, true, err, sizeof err) != 0) log_fatal("%s", err);
    return pol;
}

/* log_softmax of one row of V logits, in place; returns its argmax */
static int log_softmax(float *x, int V)
{
    int best = 0;
    double m = x[0];
    for (int v = 1; v < V; v++)
        if (x[v] > m) m = x[v], best = v;
    double s = 0;
    for (int v = 0; v < V; v++) s += exp(x[v] - m);
    float lse = (float)(m + log(s));
    for (int v = 0; v < V; v++) x[v] -= lse;
    return best;
}

/* the prompt's and the completion's ids, in one malloc'ed array; the
 * completion starts at *P. NULL with err when a text does not tokenize */
static int *tokenize(const policy_t *pol, const char *question, const char *completion, int *P, int *T, char *err,
                     size_t errlen)
{
    char *prompt = policy_prompt(pol, question);
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int ok = prompt && tokenizer_encode(pol->tok, prompt, strlen(prompt), &a, &na) == 0 &&
             tokenizer_encode(pol->tok, completion, strlen(completion), &b, &nb) == 0;
    free(prompt);
    int *ids = ok ? malloc((na + nb) * sizeof *ids) : NULL;
    if (ids) {
        for (size_t i = 0; i < na; i++) ids[i] = a[i];
        for (size_t i = 0; i < nb; i++) ids[na + i] = b[i];
        *P = (int)na, *T = (int)(na + nb);
    } else {
        snprintf(err, errlen, "the text does not tokenize");
    }
    free(a);
    free(b);
    return ids;
}

/* reads one completion under every model; -1 with err when it cannot */
static int read_one(policy_t **pols, int n, const char *question, const char *completion, tally_t *t, long line,
                    char *err, size_t errlen)
{
    int P, T;
    int *ids = tokenize(pols[0], question, completion, &P, &T, err, errlen);
    if (!ids) return -1;
    const model_config_t *mc = model_config(pols[0]->model);
    if (T - P < 1 || T > mc->max_pos) {
        snprintf(err, errlen, "%d prompt and %d completion tokens: %s", P, T - P,
                 T - P < 1 ? "no completion" : "more than the model's positions");
        free(ids);
        return -1;
    }
    int V = mc->V;
    int *targets = malloc((size_t)T * sizeof *targets);
    float *logp = malloc((size_t)T * sizeof *logp);
    float *logits[2] = {NULL, NULL};
    for (int i = 0; i < T; i++) targets[i] = i + 1 < T && i + 1 >= P ? ids[i + 1] : -1;
    double sums[2] = {0, 0};
    int rc = 0;
    for (int m = 0; m < n && rc == 0; m++) {
        /* the full (T, V) logits only where two models are compared */
        if (n == 2 && !(logits[m] = malloc((size_t)T * V * sizeof(float)))) {
            snprintf(err, errlen, "no memory for %d x %d logits", T, V);
            rc = -1;
            break;
        }
        if (model_forward(pols[m]->model, ids, targets, 1, T, 1.0f, logp, logits[m]) != 0) {
            snprintf(err, errlen, "the forward pass failed");
            rc = -1;
            break;
        }
        for (int i = 0; i < T; i++) sums[m] += targets[i] >= 0 ? logp[i] : 0;
    }
    for (int i = P - 1; rc == 0 && n == 2 && i < T - 1; i++) {
        float *a = logits[0] + (size_t)i * V, *b = logits[1] + (size_t)i * V;
        int ba = log_softmax(a, V), bb = log_softmax(b, V);
        double kl = 0;
        for (int v = 0; v < V; v++) kl += exp(a[v]) * (a[v] - b[v]);
        kl = fmax(kl, 0); /* below 0 only by rounding */
        double d = fabs(a[targets[i]] - b[targets[i]]);
        t->abs_sum += d, t->kl_sum += kl, t->agree += ba == bb;
        t->abs_max = fmax(t->abs_max, d), t->kl_max = fmax(t->kl_max, kl);
    }
    if (rc == 0) {
        t->completions++, t->tokens += T - P;
        printf("{\"line\": %ld, \"tokens\": %d, \"logp\": [%.6f", line, T - P, sums[0]);
        for (int m = 0; m < n; m++) t->logp[m] += sums[m];
        if (n == 2) printf(", %.6f", sums[1]);
        printf("]}\n");
    }
    free(logits[0]);
    free(logits[1]);
    free(logp);
    free(targets);
    free(ids);
    return rc;
}

int main(int argc, char **argv)
{
    config_t cfg;
    int rc = config_load(&cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("logprobs", cfg.node);
    if (argc < 3 || argc > 4) log_fatal("usage: logprobs [--SETTING VALUE]... FILE MODEL [MODEL2]");
    FILE *in = fopen(argv[1], "r");
    if (!in) log_fatal("%s: cannot read", argv[1]);
    int n = argc - 2;
    policy_t *pols[2] = {open_model(&cfg, argv[2]), n == 2 ? open_model(&cfg, argv[3]) : NULL};
    if (n == 2 && model_config(pols[1]->model)->V != model_config(pols[0]->model)->V)
        log_fatal("%s and %s have vocabularies of %d and %d tokens", argv[2], argv[3], model_config(pols[0]->model)->V,
                  model_config(pols[1]->model)->V);

    tally_t t = {0};
    char *buf = NULL, err[512];
    size_t cap = 0;
    long line = 0;
    while (getline(&buf, &cap, in) > 0) {
        line++;
        cJSON *j = cJSON_Parse(buf);
        const char *q = cJSON_GetStringValue(cJSON_GetObjectItem(j, "question"));
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(j, "completion"));
        if (!q || !c) {
            log_error("%s:%ld: refused: not an object with the strings question and completion", argv[1], line);
            t.refused++;
        } else if (read_one(pols, n, q, c, &t, line, err, sizeof err) != 0) {
            log_error("%s:%ld: refused: %s", argv[1], line, err);
            t.refused++;
        }
        cJSON_Delete(j);
    }
    free(buf);
    fclose(in);

    double tok = t.tokens > 0 ? (double)t.tokens : 1;
    printf("{\"completions\": %ld, \"refused\": %ld, \"tokens\": %ld, \"mean_logp\": [%.6f", t.completions, t.refused,
           t.tokens, t.logp[0] / tok);
    if (n == 2)
        printf(", %.6f], \"abs_logp_difference\": {\"mean\": %.6f, \"max\": %.6f}, \"kl\": {\"mean\": %.6g, \"max\": "
               "%.6g}, \"same_first_token\": %.6f}\n",
               t.logp[1] / tok, t.abs_sum / tok, t.abs_max, t.kl_sum / tok, t.kl_max, t.agree / tok);
    else printf("]}\n");
    policy_destroy(&pols[0]);
    policy_destroy(&pols[1]);
    return t.completions > 0 ? 0 : 1;
}
