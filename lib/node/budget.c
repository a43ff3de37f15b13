/* The node's memory budget: each process's need, and the plan that keeps
 * their sum under the memory setting. */
#include "node/budget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/heldout.h"
#include "tasks/task.h"

/* the broker, the sampler and the verifier held 8 to 14 MB each in a
 * SmolLM2 node (peak_gb); a queue that backs up (the broker holds up to
 * hwm records a stream) is what the rest is for */
#define SMALL_SHARE ((uint64_t)64 << 20)
/* a model process's own beside its model and batches: libraries,
 * OpenBLAS's and OpenMP's per-thread buffers, the tokenizer, records and
 * a policy version's files written or read a piece at a time. SmolLM2's
 * evaluator held 45 MB beside its weights, its generator about 70, a
 * training step's process 10 (docs/memory.md) */
#define PROCESS_SHARE ((uint64_t)128 << 20)
/* the questions drawn to size the prompts */
#define PROMPT_DRAWS 64
/* below this micro-batch the learner's matmuls get small: the generators
 * give up their packed copy and batch first */
#define MICRO_FLOOR 4

int budget_prompt_tokens(const config_t *cfg, const policy_t *pol, char *err, size_t errlen)
{
    task_mix_t *mix = task_mix_new(cfg->task_mix, cfg->seed, err, errlen);
    if (!mix) return -1;
    int longest = 0;
    for (uint64_t k = 0; k < PROMPT_DRAWS; k++) {
        task_question_t q;
        if (task_mix_draw(mix, k, &q, err, errlen) != 0) {
            task_mix_destroy(&mix);
            return -1;
        }
        char *prompt = policy_prompt(pol, q.question);
        size_t n = 0;
        int32_t *ids = NULL;
        if (prompt && tokenizer_encode(pol->tok, prompt, strlen(prompt), &ids, &n) == 0 && (int)n > longest)
            longest = (int)n;
        free(ids);
        free(prompt);
        task_question_free(&q);
    }
    task_mix_destroy(&mix);
    /* the game's critique and resolve stages show the round's answers
     * too: taken as up to four answers of max-new-tokens */
    if (cfg->game == GAME_THREE_STAGE) longest += 4 * cfg->max_new_tokens;
    /* a question drawn later may run a little longer than these */
    return longest + longest / 4 + 16;
}

/* a generator's (or the evaluator's) need: its weights, a packed copy
 * where it decodes by one, its generation of Q questions x L completions */
static uint64_t decoder_need(model_t *m, int Q, int L, int P, int max_new, bool packed)
{
    return PROCESS_SHARE + model_num_params(m) * sizeof(float) + model_generate_bytes(m, Q, L, P, max_new, packed);
}

/* the learner's need beside its micro-batch's workspace: weights,
 * gradients and AdamW's two moments (in fp32 or bf16), and a reference
 * model's weights */
static uint64_t learner_fixed(const config_t *cfg, model_t *m)
{
    uint64_t n = model_num_params(m), moments = cfg->moments == MOMENTS_BF16 ? 4 : 8;
    return PROCESS_SHARE + n * (2 * sizeof(float) + moments + (cfg->beta > 0) * sizeof(float));
}

/* the workspace of nr rows of T, activations recomputed or kept (and the
 * reference model's forward pass beside it, which keeps one layer's) */
static uint64_t rows_bytes(const config_t *cfg, model_t *m, int nr, int T, bool recompute)
{
    bool was = model_recompute(m);
    model_set_recompute(m, recompute);
    uint64_t bytes = model_batch_bytes(m, nr, T);
    if (cfg->beta > 0) {
        model_set_recompute(m, true);
        bytes += model_batch_bytes(m, nr, T);
    }
    model_set_recompute(m, was);
    return bytes;
}

/* The most a micro-batch of mb sequences can take: its rows are padded to
 * its longest, and a group over its shared prompt is one row (of up to
 * longest_row positions) that counts as its completions' number of
 * sequences; so the worst is k such rows beside mb - k L plain ones, for
 * some k (learner/train.c's micro_batch_end) */
static uint64_t learner_batch(const config_t *cfg, model_t *m, int mb, const budget_t *b, bool recompute)
{
    int L = cfg->completions, plain = b->prompt_tokens + 2 * cfg->max_new_tokens;
    uint64_t worst = rows_bytes(cfg, m, mb, plain, recompute);
    for (int k = 1; cfg->shared_prompt && k * L <= mb; k++) {
        uint64_t bytes = rows_bytes(cfg, m, k + mb - k * L, b->longest_row, recompute);
        worst = bytes > worst ? bytes : worst;
    }
    return worst;
}

/* a way to run the generators: packed or not, a batch */
typedef struct {
    bool packed;
    int batch;
} decode_way_t;

/* a way to run the learner */
typedef struct {
    bool recompute;
    int micro_batch;
} learn_way_t;

/* the plan for one pair of ways into b; whether it fits the budget */
static bool try_ways(const config_t *cfg, model_t *m, decode_way_t d, learn_way_t l, budget_t *b)
{
    int L = cfg->completions, P = b->prompt_tokens, M = cfg->max_new_tokens;
    b->packed = d.packed;
    b->generate_batch = d.batch;
    /* the evaluator's greedy answers, one a question: as many sequences
     * as a generator's batch, up to its usual batch */
    b->heldout_batch = d.batch * L < HELDOUT_BATCH ? d.batch * L : HELDOUT_BATCH;
    b->recompute = l.recompute;
    b->micro_batch = l.micro_batch;
    b->small = SMALL_SHARE;
    b->generator = decoder_need(m, d.batch, L, P, M, d.packed);
    b->evaluator = decoder_need(m, b->heldout_batch, 1, P, M, d.packed);
    b->learner_fixed = learner_fixed(cfg, m);
    b->learner = b->learner_fixed + learner_batch(cfg, m, l.micro_batch, b, l.recompute);
    uint64_t sum = 3 * b->small + (uint64_t)cfg->generators * b->generator + b->evaluator + b->learner;
    return sum <= b->total;
}

/* the learner's ways in the order tried: kept then recomputed (as the
 * recompute setting allows) at the configured micro-batch, then smaller
 * micro-batches recomputed; n of them into w */
static int learn_ways(const config_t *cfg, learn_way_t *w)
{
    int n = 0;
    if (cfg->recompute != RECOMPUTE_ON) w[n++] = (learn_way_t){false, cfg->micro_batch};
    bool can = cfg->recompute != RECOMPUTE_OFF;
    for (int mb = cfg->micro_batch; mb >= 1; mb--)
        if (can || mb < cfg->micro_batch) w[n++] = (learn_way_t){can, mb};
    return n;
}

int budget_plan(const config_t *cfg, policy_t *pol, int prompt_tokens, budget_t *b, char *err, size_t errlen)
{
    model_t *m = pol->model;
    memset(b, 0, sizeof *b);
    b->total = config_memory_bytes(cfg);
    b->prompt_tokens = prompt_tokens;
    /* a row is a sequence cut to twice max-new-tokens, or a group over its
     * shared prompt, whose completions take at most the prompt's length
     * each (plan_rows) and twice max-new-tokens each */
    int row = prompt_tokens + 2 * cfg->max_new_tokens, L = cfg->completions;
    int packed_row = prompt_tokens * L < prompt_tokens + 2 * cfg->max_new_tokens * L
                         ? prompt_tokens * L
                         : prompt_tokens + 2 * cfg->max_new_tokens * L;
    b->longest_row = row > packed_row || !cfg->shared_prompt ? row : packed_row;
    learn_way_t *lw = malloc(sizeof *lw * (size_t)(2 * cfg->micro_batch + 1));
    if (!lw) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int nl = learn_ways(cfg, lw);
    if (b->total == 0) {
        try_ways(cfg, m, (decode_way_t){true, cfg->generate_batch}, lw[0], b);
        b->heldout_batch = HELDOUT_BATCH;
        free(lw);
        return 0;
    }
    /* the generators' ways: packed at the configured batch, unpacked,
     * then smaller batches */
    int nd = 0;
    decode_way_t *dw = malloc(sizeof *dw * (size_t)(cfg->generate_batch + 1));
    if (!dw) {
        free(lw);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    dw[nd++] = (decode_way_t){true, cfg->generate_batch};
    for (int q = cfg->generate_batch; q >= 1; q--) dw[nd++] = (decode_way_t){false, q};
    /* the learner's micro-batches down to MICRO_FLOOR first, whatever the
     * generators' way; then the rest */
    int rc = -1;
    for (int pass = 0; pass < 2 && rc; pass++)
        for (int d = 0; d < nd && rc; d++)
            for (int l = 0; l < nl && rc; l++) {
                bool above = lw[l].micro_batch >= MICRO_FLOOR || lw[l].micro_batch == cfg->micro_batch;
                if (above == (pass == 0) && try_ways(cfg, m, dw[d], lw[l], b)) rc = 0;
            }
    if (rc) {
        /* the least: the last ways tried */
        uint64_t total = b->total;
        b->total = UINT64_MAX;
        try_ways(cfg, m, dw[nd - 1], lw[nl - 1], b);
        uint64_t least = 3 * b->small + (uint64_t)cfg->generators * b->generator + b->evaluator + b->learner;
        snprintf(err, errlen,
                 "memory (SAPO_MEMORY) %s is too small for %s (%zu parameters): this node needs at least "
                 "%.2fG (the learner %.2fG at micro-batch %d%s, %d generator%s %.2fG each and the evaluator %.2fG "
                 "decoding %d and %d question%s at a time unpacked, the broker, sampler and verifier %.2fG)",
                 cfg->memory, pol->name, model_num_params(m), ceil(least / 1e7) / 100, b->learner / 1e9, b->micro_batch,
                 b->recompute ? " with recompute" : "", cfg->generators, cfg->generators == 1 ? "" : "s",
                 b->generator / 1e9, b->evaluator / 1e9, b->generate_batch, b->heldout_batch,
                 b->heldout_batch == 1 ? "" : "s", 3 * b->small / 1e9);
        b->total = total;
    }
    free(dw);
    free(lw);
    return rc;
}

int budget_for(const config_t *cfg, policy_t *pol, budget_t *b, char *err, size_t errlen)
{
    /* without a budget nothing is sized: no prompts to measure */
    int P = config_memory_bytes(cfg) ? budget_prompt_tokens(cfg, pol, err, errlen) : 0;
    if (P < 0 || budget_plan(cfg, pol, P, b, err, errlen) != 0) return -1;
    model_set_recompute(pol->model, b->recompute);
    if (!b->packed) model_pack_limit(1);
    return 0;
}

void budget_describe(const budget_t *b, const config_t *cfg, char *out, size_t outlen)
{
    if (!b->total) {
        snprintf(out, outlen, "memory: no budget (SAPO_MEMORY unset): micro-batch %d, activations %s", b->micro_batch,
                 b->recompute ? "recomputed" : "kept");
        return;
    }
    snprintf(out, outlen,
             "memory: %s: the learner %.2fG (micro-batch %d, activations %s), %d generator%s %.2fG each (%d "
             "question%s at a time, %s), the evaluator %.2fG (%d at a time), the broker, sampler and verifier "
             "%.2fG each; prompts up to %d tokens, rows up to %d",
             cfg->memory, b->learner / 1e9, b->micro_batch, b->recompute ? "recomputed" : "kept", cfg->generators,
             cfg->generators == 1 ? "" : "s", b->generator / 1e9, b->generate_batch, b->generate_batch == 1 ? "" : "s",
             b->packed ? "packed weights" : "weights unpacked", b->evaluator / 1e9, b->heldout_batch, b->small / 1e9,
             b->prompt_tokens, b->longest_row);
}
