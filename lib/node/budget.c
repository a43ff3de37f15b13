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
 * give up their packed copy and batch first (ways) */
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

/* one way to run the node: what each process may give up */
typedef struct {
    bool recompute;  /* the learner's activations */
    int micro_batch; /* the learner's */
    bool packed;     /* the generators decode by a packed copy */
    int batch;       /* questions a generator samples at once */
    int heldout;     /* questions the evaluator samples at once */
} way_t;

/* the plan of way w into b; whether it fits the budget. The evaluator
 * never packs under a budget: it evaluates now and then, and its speed
 * matters least */
static bool try_way(const config_t *cfg, model_t *m, way_t w, budget_t *b)
{
    int L = cfg->completions, P = b->prompt_tokens, M = cfg->max_new_tokens;
    b->recompute = w.recompute;
    b->micro_batch = w.micro_batch;
    b->packed = w.packed;
    b->generate_batch = w.batch;
    b->heldout_batch = w.heldout;
    b->small = SMALL_SHARE;
    b->generator = decoder_need(m, w.batch, L, P, M, w.packed);
    b->evaluator = decoder_need(m, w.heldout, 1, P, M, w.packed && !b->total);
    b->learner_fixed = learner_fixed(cfg, m);
    b->learner = b->learner_fixed + learner_batch(cfg, m, w.micro_batch, b, w.recompute);
    uint64_t sum = 3 * b->small + (uint64_t)cfg->generators * b->generator + b->evaluator + b->learner;
    return sum <= b->total;
}

/* The ways tried, into w (room for cfg's micro-batch, generate batch and
 * a few more), each giving up one more thing than the one before, in
 * this order: the learner's kept activations (as the recompute setting
 * allows), the evaluator's batch, the learner's micro-batch down to
 * MICRO_FLOOR, the generators' packed copy, their batch, then the
 * learner's micro-batch below the floor. The first is what runs without
 * a budget; the last the least a node can run at. Their number. */
static int ways(const config_t *cfg, way_t *w)
{
    int n = 0, floor = cfg->micro_batch < MICRO_FLOOR ? cfg->micro_batch : MICRO_FLOOR;
    way_t s = {cfg->recompute == RECOMPUTE_ON, cfg->micro_batch, true, cfg->generate_batch, HELDOUT_BATCH};
    w[n++] = s;
    if (cfg->recompute == RECOMPUTE_AUTO) s.recompute = true, w[n++] = s;
    for (s.heldout = HELDOUT_BATCH / 2; s.heldout >= 1; s.heldout /= 2) w[n++] = s;
    s.heldout = 1;
    for (s.micro_batch = cfg->micro_batch - 1; s.micro_batch >= floor; s.micro_batch--) w[n++] = s;
    s.micro_batch = floor;
    s.packed = false, w[n++] = s;
    for (s.batch = cfg->generate_batch - 1; s.batch >= 1; s.batch--) w[n++] = s;
    s.batch = 1;
    for (s.micro_batch = floor - 1; s.micro_batch >= 1; s.micro_batch--) w[n++] = s;
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
    way_t *w = malloc(sizeof *w * (size_t)(cfg->micro_batch + cfg->generate_batch + 16));
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int n = ways(cfg, w), rc = -1;
    if (b->total == 0) {
        try_way(cfg, m, w[0], b);
        free(w);
        return 0;
    }
    for (int k = 0; k < n && rc; k++)
        if (try_way(cfg, m, w[k], b)) rc = 0;
    if (rc) {
        /* try_way left the last way's plan, the least: what it needs */
        uint64_t least = 3 * b->small + (uint64_t)cfg->generators * b->generator + b->evaluator + b->learner;
        snprintf(err, errlen,
                 "memory (SAPO_MEMORY) %s is too small for %s (%zu parameters): this node needs at least "
                 "%.2fG (the learner %.2fG at micro-batch %d%s, %d generator%s %.2fG each and the evaluator %.2fG "
                 "sampling %d and %d question%s at a time unpacked, the broker, sampler and verifier %.2fG)",
                 cfg->memory, pol->name, model_num_params(m), ceil(least / 1e7) / 100, b->learner / 1e9, b->micro_batch,
                 b->recompute ? " with recompute" : "", cfg->generators, cfg->generators == 1 ? "" : "s",
                 b->generator / 1e9, b->evaluator / 1e9, b->generate_batch, b->heldout_batch,
                 b->heldout_batch == 1 ? "" : "s", 3 * b->small / 1e9);
    }
    free(w);
    return rc;
}

int budget_for(const config_t *cfg, policy_t *pol, budget_role_t role, budget_t *b, char *err, size_t errlen)
{
    /* without a budget nothing is sized: no prompts to measure */
    int P = config_memory_bytes(cfg) ? budget_prompt_tokens(cfg, pol, err, errlen) : 0;
    if (P < 0 || budget_plan(cfg, pol, P, b, err, errlen) != 0) return -1;
    model_set_recompute(pol->model, role == BUDGET_LEARNER && b->recompute);
    if (b->total && (!b->packed || role == BUDGET_EVALUATOR)) model_pack_limit(1);
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
