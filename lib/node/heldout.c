/* Scoring a policy's answers to held-out questions (heldout.h). */
#include "node/heldout.h"

#include <stdio.h>
#include <stdlib.h>

heldout_tally_t heldout_score(policy_t *pol, const task_question_t *questions, char *const *prompts, int nq, int n,
                              int batch, model_gen_params_t gp, uint64_t seed0, const heldout_hooks_t *hooks)
{
    heldout_tally_t t = {0};
    char err[512];
    if (batch < 1 || batch > HELDOUT_BATCH) batch = HELDOUT_BATCH;
    for (int k0 = 0; k0 < nq; k0 += batch) {
        if (pol->cancel && *pol->cancel) break; /* told to stop: the tally is partial */
        if (hooks && hooks->poll) hooks->poll(hooks->ctx);
        int q = nq - k0 < batch ? nq - k0 : batch;
        uint64_t seeds[HELDOUT_BATCH];
        for (int i = 0; i < q; i++) seeds[i] = seed0 + (uint64_t)(k0 + i);
        completion_t *c = calloc((size_t)q * n, sizeof *c);
        t.total += (long)q * n;
        if (!c || policy_sample_batch(pol, (const char *const *)prompts + k0, seeds, q, n, &gp, c, err, sizeof err)) {
            fprintf(stderr, "held-out questions %d..%d scored 0: %s\n", k0, k0 + q - 1, c ? err : "out of memory");
            free(c);
            continue;
        }
        for (int i = 0; i < q * n; i++) {
            bool formatted = false;
            double s =
                task_score_completion(c[i].text ? c[i].text : "", &questions[k0 + i / n], &formatted, err, sizeof err);
            if (s < 0) fprintf(stderr, "held-out question %d scored 0: %s\n", k0 + i / n, err);
            if (hooks && hooks->completion) hooks->completion(hooks->ctx, k0 + i / n, i % n, &c[i], s, formatted);
            completion_free(&c[i]);
            t.right += s >= 1.0;
            t.formatted += formatted;
            t.score += s > 0 ? s : 0;
        }
        free(c);
    }
    return t;
}
