/* GRPO advantages and loss with its gradient, following TRL's code path
 * step by step so the numbers agree with an autograd run of it:
 *   r   = exp(logp - old_logp)                      importance ratio
 *   c1  = min(r, delta) when delta is set, else r
 *   c2  = clamp(r, 1 - epsilon_low, 1 + epsilon_high)
 *   l   = -min(c1 A, c2 A) + beta kl,  kl = (e^(ref-logp) - (ref-logp) - 1) [* r]
 * then the masked per-token l reduced by the loss type's normaliser. */
#include "train/grpo.h"

#include <math.h>
#include <stddef.h>

grpo_params_t grpo_params_default(int max_completion_length)
{
    return (grpo_params_t){
        .epsilon_low = 0.2f,
        .epsilon_high = 0.28f,
        .delta = 0.0f,
        .beta = 0.0f,
        .kl_bias_correction = 1,
        .loss_type = GRPO_LOSS_DAPO,
        .max_completion_length = max_completion_length,
    };
}

/* unbiased std of x (n), 0 for a single value as TRL sets it */
static double std_unbiased(const float *x, int n)
{
    if (n < 2) return 0.0;
    double mean = 0.0, ss = 0.0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    return sqrt(ss / (n - 1));
}

void grpo_advantages(const float *rewards, const int *group_sizes, int n_groups, grpo_scale_t scale, float *adv_out)
{
    int total = 0;
    for (int g = 0; g < n_groups; g++) total += group_sizes[g];
    double batch_std = scale == GRPO_SCALE_BATCH ? std_unbiased(rewards, total) : 0.0;
    for (int g = 0, first = 0; g < n_groups; first += group_sizes[g], g++) {
        const float *r = rewards + first;
        float *a = adv_out + first;
        int group_size = group_sizes[g];
        double mean = 0.0;
        for (int i = 0; i < group_size; i++) mean += r[i];
        mean /= group_size;
        double std = scale == GRPO_SCALE_GROUP ? std_unbiased(r, group_size) : batch_std;
        for (int i = 0; i < group_size; i++) {
            double centred = r[i] - mean;
            a[i] = (float)(scale == GRPO_SCALE_NONE ? centred : centred / (std + 1e-4));
        }
    }
}

/* weight of each token of sequence b in the loss: the loss type's
 * normaliser over the batch */
static double token_weight(const grpo_params_t *p, int B, double seq_tokens, double batch_tokens)
{
    switch (p->loss_type) {
    case GRPO_LOSS_GRPO: return 1.0 / (fmax(seq_tokens, 1.0) * B);
    case GRPO_LOSS_DR_GRPO: return 1.0 / ((double)B * p->max_completion_length);
    case GRPO_LOSS_BNPO:
    case GRPO_LOSS_DAPO: break;
    }
    return 1.0 / fmax(batch_tokens, 1.0);
}

/* the KL estimate k3 = e^d - d - 1 at d = ref - logp, times r with the
 * bias correction, and in *dkl its derivative by logp */
static double kl_term(const grpo_params_t *p, double d, float r, double *dkl)
{
    double e = exp(d);
    double k3 = e - d - 1.0, dk3 = 1.0 - e;
    *dkl = p->kl_bias_correction ? (dk3 + k3) * r : dk3;
    return p->kl_bias_correction ? k3 * r : k3;
}

float grpo_loss(const grpo_params_t *p, int B, int T, const float *logp, const float *old_logp, const float *ref_logp,
                const float *mask, const float *adv, float *dlogp_out, grpo_stats_t *stats)
{
    double batch_tokens = 0.0;
    for (size_t i = 0; i < (size_t)B * T; i++) batch_tokens += mask[i];
    const float lo = 1.0f - p->epsilon_low, hi = 1.0f + p->epsilon_high;
    double loss = 0.0, n_low = 0, n_high = 0, n_region = 0, kl_sum = 0.0, ratio_sum = 0.0;
    float r_min = INFINITY, r_max = -INFINITY;
    long r_min_at = -1;
    for (int b = 0; b < B; b++) {
        double seq_tokens = 0.0;
        for (int t = 0; t < T; t++) seq_tokens += mask[(size_t)b * T + t];
        double w = token_weight(p, B, seq_tokens, batch_tokens);
        float A = adv[b];
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            if (mask[i] == 0.0f) {
                dlogp_out[i] = 0.0f;
                continue;
            }
            float r = old_logp ? expf(logp[i] - old_logp[i]) : 1.0f;
            float c1 = p->delta > 0.0f && r > p->delta ? p->delta : r;
            float dc1 = p->delta > 0.0f && r > p->delta ? 0.0f : 1.0f;
            float c2 = r < lo ? lo : r > hi ? hi : r;
            float dc2 = r < lo || r > hi ? 0.0f : 1.0f;
            float a1 = c1 * A, a2 = c2 * A;
            /* the smaller side carries the gradient; on a tie c1 = c2 = r
             * inside the clip range, where both sides pass it whole */
            double l = -(double)fminf(a1, a2);
            double dl_dr = -(double)A * (a1 <= a2 ? dc1 : dc2);
            double dl = dl_dr * r;
            if (p->beta != 0.0f) {
                double dkl, kl = kl_term(p, (double)ref_logp[i] - logp[i], r, &dkl);
                l += p->beta * kl;
                dl += p->beta * dkl;
                kl_sum += kl * mask[i];
            }
            loss += w * l * mask[i];
            dlogp_out[i] = (float)(w * dl * mask[i]);
            int low = c1 < lo && A<0.0f, high = c1> hi && A > 0.0f;
            n_low += low * mask[i];
            n_high += high * mask[i];
            n_region += (low || high) * mask[i];
            ratio_sum += (double)r * mask[i];
            if (r < r_min || r_min_at < 0) r_min = r, r_min_at = (long)i;
            r_max = fmaxf(r_max, r);
        }
    }
    if (stats) {
        double n = fmax(batch_tokens, 1.0);
        stats->clip_low = (float)(n_low / n);
        stats->clip_high = (float)(n_high / n);
        stats->clip_region = (float)(n_region / n);
        stats->kl = (float)(kl_sum / n);
        stats->ratio = (float)(ratio_sum / n);
        stats->ratio_min = batch_tokens > 0 ? r_min : 1.0f;
        stats->ratio_max = batch_tokens > 0 ? r_max : 1.0f;
        stats->ratio_min_at = r_min_at;
        stats->tokens = (long)batch_tokens;
    }
    return (float)loss;
}
