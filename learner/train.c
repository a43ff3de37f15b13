/* The learner's GRPO step on a batch of groups, re-encoded with the
 * learner's own tokenizer. */
#include "train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int *ids; /* prompt then completion, P + C */
    int P, C;
    const float *old; /* C sampling log-probs, or NULL (on-policy) */
    float adv;
    bool masked; /* out of the loss: truncated, with mask-truncated on */
    bool no_kl;  /* out of the KL term (another policy's, with external-kl exclude) */
    int group;   /* the batch group it belongs to: the same prompt */
} seq_t;

/* a row of a micro-batch: one sequence, or (packed) the sequences of a
 * group after their shared prompt, each a segment (model_forward_packed) */
typedef struct {
    int first, count; /* its sequences */
    bool packed;
    int len; /* positions */
} row_t;

train_t *train_new(policy_t *policy, policy_t *ref, const config_t *cfg, adamw_t *opt, char *err, size_t errlen)
{
    if (cfg->beta > 0 && !ref) {
        snprintf(err, errlen, "beta %g > 0 needs a reference model", cfg->beta);
        return NULL;
    }
    train_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    self->policy = policy;
    self->ref = ref;
    self->cfg = cfg;
    self->opt = opt;
    self->gp = grpo_params_default(cfg->max_new_tokens);
    self->gp.epsilon_low = cfg->eps_low;
    self->gp.epsilon_high = cfg->eps_high;
    self->gp.beta = cfg->beta;
    self->gp.delta = cfg->delta;
    self->gp.loss_type = cfg->loss_type;
    self->micro_batch = cfg->micro_batch;
    return self;
}

void train_set_budget(train_t *self, int micro_batch, size_t allowance)
{
    self->micro_batch = micro_batch;
    self->allowance = allowance;
}

void train_destroy(train_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->ws.ints);
    free((*self_p)->ws.floats);
    free(*self_p);
    *self_p = NULL;
}

adamw_params_t train_adamw_params(const config_t *cfg)
{
    adamw_params_t ap = adamw_params_default();
    ap.lr = cfg->lr;
    ap.weight_decay = cfg->weight_decay;
    return ap;
}

float train_lr(const config_t *cfg, uint64_t round)
{
    double lr = cfg->lr, r = round ? (double)round : 1;
    if (cfg->lr_warmup > 0 && r < cfg->lr_warmup) return (float)(lr * r / cfg->lr_warmup);
    if (cfg->lr_schedule == LR_COSINE && cfg->rounds > cfg->lr_warmup) {
        double p = (r - cfg->lr_warmup) / (double)(cfg->rounds - cfg->lr_warmup);
        if (p > 1) p = 1;
        return (float)(lr * (0.1 + 0.45 * (1 + cos(M_PI * p))));
    }
    return (float)lr;
}

/* ids decoded into out (size n) with every byte outside printable ASCII
 * written \xNN, so a metrics line stays plain text whatever a BPE
 * token's bytes are; the start is dropped when it does not fit */
static void printable(const policy_t *p, const int32_t *ids, size_t count, char *out, size_t n)
{
    out[0] = 0;
    char *text = count ? tokenizer_decode(p->tok, ids, count) : NULL;
    if (!text) return;
    char buf[512];
    size_t k = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && k + 5 < sizeof buf; c++) {
        if (*c >= 0x20 && *c < 0x7f && *c != '\\') buf[k++] = (char)*c;
        else k += (size_t)snprintf(buf + k, sizeof buf - k, "\\x%02x", *c);
    }
    buf[k] = 0;
    free(text);
    snprintf(out, n, "%s", k + 1 > n ? buf + (k + 1 - n) : buf);
}

int32_t *train_encode(const policy_t *p, const char *text, size_t *n)
{
    int32_t *ids = NULL;
    if (tokenizer_encode(p->tok, text, strlen(text), &ids, n) != 0) return NULL;
    return ids;
}

/* Whether an external completion's sampling log-probs can stand for its
 * behaviour policy here: its publisher runs our model (the caller checks
 * the name), its token ids are exactly our encoding of the text our
 * verifier scored (ids that say something else are not trained on), and
 * every log-prob is a log-prob. Then the importance ratio and its clipping
 * apply to it as to an own completion sampled a few versions back; without
 * them it counts as on-policy (ratio 1), the paper's choice for any model. */
static bool peer_behaviour(const rec_completion_t *c, const int32_t *ids, size_t C)
{
    if (!ids || C == 0 || c->n_tokens != C || c->n_logprobs != C) return false;
    for (size_t t = 0; t < C; t++) {
        int32_t id;
        float lp;
        memcpy(&id, c->token_ids + t, sizeof id);
        memcpy(&lp, c->logprobs + t, sizeof lp);
        if (id != ids[t] || !isfinite(lp) || lp > 0.0f) return false;
    }
    return true;
}

/* Sequence s of group g: the prompt's P ids pids, then completion c's,
 * cut to twice max-new-tokens and to the model's positions */
static void make_sequence(const train_t *self, const rec_group_view_t *rv, const rec_completion_t *c,
                          const int32_t *pids, size_t P, int g, seq_t *s, train_stats_t *st)
{
    const config_t *cfg = self->cfg;
    const policy_t *pol = self->policy;
    const int max_pos = model_config(pol->model)->max_pos;
    const int max_comp = 2 * cfg->max_new_tokens;
    bool same_model = strcmp(rv->r.model, pol->name) == 0;
    bool peer_logprobs = rv->r.external && same_model && cfg->external_logprobs == EXTERNAL_LOGPROBS_USE;
    size_t C = 0;
    int32_t *cids = NULL;
    bool keep_ids = same_model && !rv->r.external && c->n_tokens > 0 && c->n_logprobs == c->n_tokens;
    const float *old = keep_ids ? c->logprobs : NULL;
    if (keep_ids) {
        C = c->n_tokens;
    } else {
        cids = train_encode(pol, c->text, &C);
        if (!cids) C = 0;
        if (peer_logprobs && peer_behaviour(c, cids, C)) old = c->logprobs, st->external_logprobs++;
    }
    if ((int)C > max_comp) C = (size_t)max_comp;
    if ((int)(P + C) > max_pos) C = (size_t)(max_pos - (int)P);
    s->P = (int)P;
    s->C = (int)C;
    s->ids = malloc(sizeof(int) * (P + C + 1));
    for (size_t t = 0; t < P; t++) s->ids[t] = pids[t];
    for (size_t t = 0; t < C; t++) {
        int32_t id;
        if (keep_ids) memcpy(&id, c->token_ids + t, sizeof id);
        else id = cids[t];
        s->ids[P + t] = id;
    }
    s->old = old;
    s->masked = cfg->mask_truncated && !c->finished;
    s->no_kl = rv->r.external && cfg->external_kl == EXTERNAL_KL_EXCLUDE;
    s->group = g;
    st->masked_truncated += s->masked;
    free(cids);
}

/* Group g's sequences from seqs[0] on and their rewards; the number of
 * them, or 0 when the group is skipped (under two completions, unscored,
 * a prompt that leaves no room for a completion, or an external group
 * under external-train 0) */
static int add_group(const train_t *self, const rec_batch_view_t *batch, size_t g, seq_t *seqs, float *rewards,
                     train_stats_t *st)
{
    const policy_t *pol = self->policy;
    rec_group_view_t rv;
    rec_batch_group(batch, g, &rv);
    int n = (int)rv.r.n_completions;
    if (n < 2 || !rv.r.scored) {
        st->skipped_groups++;
        return 0;
    }
    if (rv.r.external && !self->cfg->external_train) {
        st->untrained_external++;
        return 0;
    }
    char *prompt = policy_prompt(pol, rv.r.task.question);
    size_t P = 0;
    int32_t *pids = prompt ? train_encode(pol, prompt, &P) : NULL;
    free(prompt);
    if (!pids || (int)P + 1 >= model_config(pol->model)->max_pos) {
        free(pids);
        st->skipped_groups++;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        rec_completion_t c;
        rec_group_completion(&rv, (size_t)i, &c);
        rewards[i] = c.reward;
        make_sequence(self, &rv, &c, pids, P, (int)g, &seqs[i], st);
    }
    st->groups++;
    free(pids);
    return n;
}

static int build_sequences(train_t *self, const rec_batch_view_t *batch, seq_t **out, int *nseq, train_stats_t *st)
{
    size_t cap = 0;
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        rec_group_view_t rv;
        rec_batch_group(batch, g, &rv);
        cap += rv.r.n_completions;
    }
    seq_t *seqs = calloc(cap ? cap : 1, sizeof *seqs);
    float *rewards = malloc(sizeof(float) * (cap ? cap : 1));
    float *adv = malloc(sizeof(float) * (cap ? cap : 1));
    int *sizes = malloc(sizeof(int) * (batch->b.n_groups ? batch->b.n_groups : 1));
    if (!seqs || !rewards || !adv || !sizes) {
        free(seqs), free(rewards), free(adv), free(sizes);
        return -1;
    }
    int ns = 0, ng = 0;
    for (size_t g = 0; g < batch->b.n_groups; g++) {
        int n = add_group(self, batch, g, seqs + ns, rewards + ns, st);
        if (n == 0) continue;
        ns += n;
        sizes[ng++] = n;
    }
    /* once every group is in: "batch" scales by the std of all their rewards */
    grpo_advantages(rewards, sizes, ng, self->cfg->scale_rewards, adv);
    for (int i = 0; i < ns; i++) seqs[i].adv = adv[i];
    free(rewards);
    free(adv);
    free(sizes);
    *out = seqs;
    *nseq = ns;
    return 0;
}

/* The rows of a batch, in sequence order. A group's sequences share their
 * prompt's P tokens; packed, the row holds the prompt's first P - 1 once,
 * then per sequence a segment of its prompt's last token and its
 * completion but the last token (targets: the completion), so each
 * completion token sees what it would in a row of its own. Packing saves
 * (P - 1)(n - 1) positions of n sequences but makes the attention of the
 * row quadratic in all their completions, so a group is packed only where
 * that saves at least as many positions as the completions take (prompt
 * at least the completions' mean length), and only on the CPU. NULL when
 * out of memory. */
static row_t *plan_rows(const train_t *self, const seq_t *seqs, int B, int *n_rows)
{
    row_t *rows = malloc(sizeof *rows * (size_t)B);
    if (!rows) return NULL;
    bool can_pack = self->cfg->shared_prompt && model_device(self->policy->model) < 0;
    int n = 0;
    for (int i = 0, j; i < B; i = j) {
        long comp = 0;
        for (j = i; j < B && seqs[j].group == seqs[i].group; j++) comp += seqs[j].masked ? 0 : seqs[j].C;
        int P = seqs[i].P, count = j - i;
        if (can_pack && P >= 2 && count >= 2 && (long)(P - 1) * (count - 1) >= comp) {
            rows[n++] = (row_t){i, count, true, (int)(P - 1 + comp)};
        } else {
            for (int k = i; k < j; k++) rows[n++] = (row_t){k, 1, false, seqs[k].P + seqs[k].C};
        }
    }
    *n_rows = n;
    return rows;
}

/* The rows' tokens, targets and segment starts, (nr, T), and
 * where[i * Tc + j]: the cell whose target is completion token j of the
 * rows' sequence i, -1 for none */
static void lay_out_rows(const seq_t *seqs, const row_t *rows, int nr, int T, int Tc, int *tokens, int *targets,
                         int *start, int *where)
{
    int s0 = rows[0].first, ns = rows[nr - 1].first + rows[nr - 1].count - s0;
    for (size_t k = 0; k < (size_t)ns * Tc; k++) where[k] = -1;
    for (int r = 0; r < nr; r++) {
        const row_t *w = &rows[r];
        int *tk = tokens + (size_t)r * T, *tg = targets + (size_t)r * T, *st = start + (size_t)r * T;
        for (int t = 0; t < T; t++) tk[t] = 0, tg[t] = -1, st[t] = 0;
        if (!w->packed) {
            const seq_t *s = &seqs[w->first];
            for (int t = 0; t < s->P + s->C; t++) tk[t] = s->ids[t];
            for (int j = 0; j < s->C && !s->masked; j++) {
                tg[s->P - 1 + j] = s->ids[s->P + j];
                where[(size_t)(w->first - s0) * Tc + j] = (int)((size_t)r * T + s->P - 1 + j);
            }
            continue;
        }
        const seq_t *s = &seqs[w->first];
        int P = s->P, n = P - 1, a = 0;
        for (int t = 0; t < P - 1; t++) tk[t] = s->ids[t];
        for (int i = w->first; i < w->first + w->count; i++) {
            s = &seqs[i];
            if (s->masked || s->C == 0) continue;
            a = n;
            for (int j = 0; j < s->C; j++, n++) {
                tk[n] = s->ids[P - 1 + j];
                tg[n] = s->ids[P + j];
                st[n] = a;
                where[(size_t)(i - s0) * Tc + j] = (int)((size_t)r * T + n);
            }
        }
        for (; n < T; n++) st[n] = a; /* padding joins the last segment */
    }
}

/* GRPO's inputs, one sequence a row of Tc: per completion token its
 * mask, log-prob, reference log-prob and sampling log-prob, gathered from
 * the cells where says; adv per sequence */
static void gather_tokens(const seq_t *seqs, int ns, int Tc, const int *where, const float *logp, const float *ref,
                          float *adv, float *mask, float *lp, float *rf, float *old)
{
    for (int i = 0; i < ns; i++) {
        const seq_t *s = &seqs[i];
        adv[i] = s->adv;
        for (int j = 0; j < Tc; j++) {
            size_t k = (size_t)i * Tc + j;
            int c = where[k];
            mask[k] = c >= 0 ? 1.0f : 0.0f;
            lp[k] = c >= 0 ? logp[c] : 0.0f;
            /* ref = logp: a KL term of 0 and no gradient from it */
            rf[k] = c >= 0 ? (s->no_kl ? logp[c] : ref[c]) : 0.0f;
            if (s->old && c >= 0) memcpy(&old[k], s->old + j, sizeof(float));
            else old[k] = lp[k];
        }
    }
}

/* at: the token at cell c of GRPO's (ns, Tc) layout, the one with the
 * lowest ratio, with up to 24 tokens before it */
static void note_ratio_min(const train_t *self, const seq_t *seqs, int Tc, long c, const float *lp, const float *old,
                           ratio_min_at_t *at)
{
    const seq_t *s = &seqs[c / Tc];
    int j = (int)(c % Tc), from = j > 24 ? j - 24 : 0;
    at->found = 1, at->token_id = s->ids[s->P + j], at->position = j;
    at->logp = lp[c], at->logp_sampled = old[c], at->advantage = s->adv;
    if (at->token_id == tokenizer_eos_id(self->policy->tok)) snprintf(at->token, sizeof at->token, "<eos>");
    else printable(self->policy, s->ids + s->P + j, 1, at->token, sizeof at->token);
    printable(self->policy, s->ids + s->P + from, (size_t)(j - from), at->before, sizeof at->before);
}

/* Room for nints ints and nfloats floats, grown (never shrunk) when a
 * larger micro-batch comes, as the model's activations are: once the
 * largest micro-batch has been seen, a step allocates nothing here. What
 * the arrays held is not kept. 0, or -1 when out of memory (the
 * workspace is then empty). */
static int workspace_ensure(train_workspace_t *w, size_t nints, size_t nfloats)
{
    if (nints > w->cap_ints) {
        free(w->ints);
        w->ints = malloc(nints * sizeof *w->ints);
        w->cap_ints = w->ints ? nints : 0;
    }
    if (nfloats > w->cap_floats) {
        free(w->floats);
        w->floats = malloc(nfloats * sizeof *w->floats);
        w->cap_floats = w->floats ? nfloats : 0;
    }
    return w->ints && w->floats ? 0 : -1;
}

/* One micro-batch: forward over its rows, GRPO's loss over its sequences'
 * completion tokens (laid out one sequence a row, whatever the rows),
 * backward. *loss gets its share of the batch's loss. 0, or -1 with err. */
static int micro_step(train_t *self, const seq_t *seqs, int B, long total_tokens, const row_t *rows, int nr,
                      grpo_stats_t *gs, ratio_min_at_t *at, double *loss, char *err, size_t errlen)
{
    model_t *m = self->policy->model;
    int s0 = rows[0].first, ns = rows[nr - 1].first + rows[nr - 1].count - s0, T = 1, Tc = 1;
    bool packed = false;
    long mtokens = 0;
    for (int r = 0; r < nr; r++) {
        T = rows[r].len > T ? rows[r].len : T;
        packed |= rows[r].packed;
    }
    for (int i = s0; i < s0 + ns; i++) {
        Tc = seqs[i].C > Tc ? seqs[i].C : Tc;
        mtokens += seqs[i].masked ? 0 : seqs[i].C;
    }
    size_t cells = (size_t)nr * T, lcells = (size_t)ns * Tc;
    /* ints: tokens, targets, start (cells each), where (lcells); floats:
     * logp, ref, dlogp (cells each), lp, old, rf, mask, dl (lcells each),
     * adv (ns) */
    if (workspace_ensure(&self->ws, 3 * cells + lcells, 3 * cells + 5 * lcells + (size_t)ns) != 0) {
        snprintf(err, errlen, "out of memory for a micro-batch of %d x %d", nr, T);
        return -1;
    }
    int *tokens = self->ws.ints, *targets = tokens + cells, *start = targets + cells, *where = start + cells;
    float *logp = self->ws.floats, *ref = logp + cells, *dlogp = ref + cells, *lp = dlogp + cells;
    float *old = lp + lcells, *rf = old + lcells, *mask = rf + lcells, *dl = mask + lcells, *adv = dl + lcells;
    memset(dlogp, 0, cells * sizeof *dlogp);
    lay_out_rows(seqs, rows, nr, T, Tc, tokens, targets, start, where);
    float temp = self->cfg->temperature;
    if (self->ref &&
        model_forward_packed(self->ref->model, tokens, targets, packed ? start : NULL, nr, T, temp, ref, NULL) != 0) {
        snprintf(err, errlen, "reference forward failed (see above)");
        return -1;
    }
    if (model_forward_packed(m, tokens, targets, packed ? start : NULL, nr, T, temp, logp, NULL) != 0) {
        snprintf(err, errlen, "forward failed (see above)");
        return -1;
    }
    gather_tokens(seqs + s0, ns, Tc, where, logp, ref, adv, mask, lp, rf, old);
    float l = grpo_loss(&self->gp, ns, Tc, lp, old, self->ref ? rf : NULL, mask, adv, dl, gs);
    if (gs->ratio_min_at >= 0) note_ratio_min(self, seqs + s0, Tc, gs->ratio_min_at, lp, old, at);
    /* the micro-batch's normaliser -> the whole batch's */
    double scale = (self->gp.loss_type == GRPO_LOSS_GRPO || self->gp.loss_type == GRPO_LOSS_DR_GRPO)
                       ? (double)ns / B
                       : (total_tokens ? (double)mtokens / total_tokens : 0);
    for (size_t k = 0; k < lcells; k++)
        if (where[k] >= 0) dlogp[where[k]] = (float)(dl[k] * scale);
    *loss = l * scale;
    model_backward(m, dlogp);
    return 0;
}

/* the rows' micro-batches: rows r0 on up to micro-batch sequences whose
 * workspace keeps to the budget's allowance (one row at least); the end,
 * and *T its longest row */
static int micro_batch_end(const train_t *self, const row_t *rows, int n_rows, int r0, int *T)
{
    int r1, mb = rows[r0].count;
    *T = rows[r0].len;
    for (r1 = r0 + 1; r1 < n_rows && mb + rows[r1].count <= self->micro_batch; r1++) {
        int t = rows[r1].len > *T ? rows[r1].len : *T;
        size_t bytes = self->allowance ? model_batch_bytes(self->policy->model, r1 - r0 + 1, t) : 0;
        if (self->allowance && self->ref) bytes += model_batch_bytes(self->ref->model, r1 - r0 + 1, t);
        if (bytes > self->allowance) break;
        mb += rows[r1].count;
        *T = t;
    }
    return r1;
}

/* Forward and backward over the batch's rows a micro-batch at a time: the
 * batch's gradient, its loss, and GRPO's statistics as means weighted by
 * each micro-batch's tokens. 0, or -1 with err. */
static int accumulate_gradients(train_t *self, const seq_t *seqs, int B, long total_tokens, const row_t *rows,
                                int n_rows, train_stats_t *st, char *err, size_t errlen)
{
    double loss = 0, w_clip_low = 0, w_clip_high = 0, w_region = 0, w_kl = 0, w_ratio = 0;
    st->grpo.ratio_min = INFINITY, st->grpo.ratio_max = -INFINITY;
    for (int r0 = 0, r1; r0 < n_rows; r0 = r1) {
        int T;
        r1 = micro_batch_end(self, rows, n_rows, r0, &T);
        for (int r = r0; r < r1; r++) st->packed_groups += rows[r].packed;
        st->positions += (long)(r1 - r0) * T;
        grpo_stats_t gs;
        ratio_min_at_t at = {0};
        double l = 0;
        if (micro_step(self, seqs, B, total_tokens, rows + r0, r1 - r0, &gs, &at, &l, err, errlen)) return -1;
        loss += l;
        w_clip_low += gs.clip_low * gs.tokens, w_clip_high += gs.clip_high * gs.tokens;
        w_region += gs.clip_region * gs.tokens, w_kl += gs.kl * gs.tokens, w_ratio += gs.ratio * gs.tokens;
        st->grpo.tokens += gs.tokens;
        if (gs.tokens > 0) {
            if (at.found && (!st->ratio_min_at.found || gs.ratio_min < st->grpo.ratio_min)) st->ratio_min_at = at;
            st->grpo.ratio_min = fminf(st->grpo.ratio_min, gs.ratio_min);
            st->grpo.ratio_max = fmaxf(st->grpo.ratio_max, gs.ratio_max);
        }
    }
    if (st->grpo.tokens == 0) st->grpo.ratio_min = st->grpo.ratio_max = 1.0f;
    if (st->grpo.tokens > 0) {
        double n = (double)st->grpo.tokens;
        st->grpo.clip_low = (float)(w_clip_low / n), st->grpo.clip_high = (float)(w_clip_high / n);
        st->grpo.clip_region = (float)(w_region / n), st->grpo.kl = (float)(w_kl / n),
        st->grpo.ratio = (float)(w_ratio / n);
    }
    st->loss = (float)loss;
    return 0;
}

int train_step(train_t *self, const rec_batch_view_t *batch, train_stats_t *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    seq_t *seqs = NULL;
    int B = 0;
    if (build_sequences(self, batch, &seqs, &B, st) != 0) {
        snprintf(err, errlen, "out of memory building the batch");
        return -1;
    }
    if (B == 0) {
        free(seqs);
        snprintf(err, errlen, "batch of round %llu has no usable group", (unsigned long long)batch->b.round);
        return -1;
    }
    long total_tokens = 0;
    for (int i = 0; i < B; i++) total_tokens += seqs[i].masked ? 0 : seqs[i].C;
    model_t *m = self->policy->model;
    model_zero_grad(m);
    int n_rows = 0, rc = -1;
    row_t *rows = plan_rows(self, seqs, B, &n_rows);
    if (!rows) {
        snprintf(err, errlen, "out of memory building the batch");
        goto done;
    }
    if (accumulate_gradients(self, seqs, B, total_tokens, rows, n_rows, st, err, errlen) != 0) goto done;
    adamw_params_t ap = train_adamw_params(self->cfg);
    ap.lr = st->lr = train_lr(self->cfg, batch->b.round);
    if (model_optimizer_step(m, self->opt, &ap, self->cfg->max_grad_norm, &st->grad_norm) != 0) {
        snprintf(err, errlen, "optimizer step on cuda:%d failed (see above)", model_device(m));
        goto done;
    }
    st->tokens = total_tokens;
    st->sequences = B;
    rc = 0;
done:
    for (int i = 0; i < B; i++) free(seqs[i].ids);
    free(seqs);
    free(rows);
    return rc;
}
