/* A round's compute on the tiny default model, in the shape of a real
 * round of the default mix: what one node at 4/0 logged over 30 rounds
 * from the seed-1 base (metrics.jsonl: completion_length 19.7 on
 * average, positions 1,206 a round for 4 packed groups, so prompts of
 * about 142 tokens). G prompts x L completions of CL new tokens are
 * sampled, then one GRPO forward and backward pass runs over them in
 * micro-batches of 16 sequences, as the learner runs them.
 *
 * Two ways: the node's (every prompt in one decode batch, one packed row
 * per group: the prompt once, each completion a segment) and the way
 * before issue 18 (a request per prompt, one row per completion), the
 * ratio of their rounds per second in the same binary. And the cost of
 * the round's TensorBoard event (lib/tb/): the median time to write a
 * real metrics line as an event, added to the node's round (goal: under
 * 0.5 % of it, the tiny model's round being the shortest). Built with
 * SAPO_ROUND_BEFORE, only the second way, against an older library
 * (bench/round_before.sh builds one and runs the two binaries in turn). */
#include "bench.h"
#include "group_rows.h"
#include "model/model.h"
#include "node/metrics.h"
#include "tb/tb.h"
#include "util/fs.h"

#include <stdint.h>
#include <unistd.h>

enum { G = 4, L = 8, P = 142, CL = 20 };

/* median seconds of a round, the node's way (node) or the earlier one;
 * *gen and *train: the medians of its two parts */
static double round_time(model_t *m, bool node, int reps, double *gen, double *train)
{
    static int prompt[G * P], tok[G * L * CL], len[G * L];
    static float lp[G * L * CL];
    const int *prompts[G];
    int plen[G];
    uint64_t seeds[G];
    for (int q = 0; q < G; q++) {
        for (int i = 0; i < P; i++) prompt[q * P + i] = 'a' + (i * 3 + q) % 26;
        prompts[q] = prompt + q * P, plen[q] = P, seeds[q] = q + 1;
    }
    (void)plen; /* read by the batch only */
    model_gen_params_t gp = {.max_new = CL, .sample = {.temperature = 1, .top_k = 0, .top_p = 1}};
    group_rows_t b = group_rows_new(L, P, CL, node);
    double tg[32], tt[32], tr[32];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now();
#ifndef SAPO_ROUND_BEFORE
        if (node && model_generate_batch(m, prompts, plen, seeds, G, L, &gp, tok, lp, len)) exit(1);
#endif
        for (int q = 0; !node && q < G; q++) {
            gp.seed = seeds[q];
            if (model_generate(m, prompts[q], P, L, &gp, tok, lp, len)) exit(1);
        }
        double t1 = bench_now();
        model_zero_grad(m);
        for (int mb = 0; mb < G * L / 16; mb++) {
#ifndef SAPO_ROUND_BEFORE
            if (model_forward_packed(m, b.tok, b.tgt, node ? b.start : NULL, b.rows, b.T, 1.0f, b.lp, NULL)) exit(1);
#else
            if (model_forward(m, b.tok, b.tgt, b.rows, b.T, 1.0f, b.lp, NULL)) exit(1);
#endif
            model_backward(m, b.w);
        }
        double t2 = bench_now();
        if (r >= 0) tg[r] = t1 - t0, tt[r] = t2 - t1, tr[r] = t2 - t0;
    }
    group_rows_free(&b);
    *gen = bench_median(tg, reps), *train = bench_median(tt, reps);
    return bench_median(tr, reps);
}

#ifndef SAPO_ROUND_BEFORE
/* a learner's metrics line of a real round (the Qwen 0.5B's round 25 of
 * docs/results-cuda-prep/qwen-tied-gpu-preset-cpu-seed2-2026-11-29, with
 * peak_gb added), tagged as the learner tags it */
static const char *LINE =
    "{\"node\":\"n0\",\"model\":\"qwen-24L-896C-v151936\",\"model_name\":\"qwen\",\"round\":25,\"policy_version\":25,"
    "\"reward_mean\":0.6875,\"reward_external\":0,\"batch_reward\":0.6875,\"family_reward\":{\"basic_arithmetic\":0."
    "6875},"
    "\"family_count\":{\"basic_arithmetic\":32},\"completion_length\":111.5625,\"completion_length_max\":211,"
    "\"truncated_share\":0,\"format_share\":1,\"entropy\":0.16762692852519787,\"local\":{\"zero_adv_share\":0,"
    "\"age_versions\":1.5,\"age_versions_max\":2,\"age_rounds\":0.5,\"age_seconds\":615.7761202454567,"
    "\"age_rounds_max\":1,\"age_seconds_max\":722.08887028694153},\"external\":{\"zero_adv_share\":0,"
    "\"age_rounds\":0,\"age_seconds\":0,\"age_rounds_max\":0,\"age_seconds_max\":0},\"local_groups\":4,"
    "\"external_groups\":0,\"external_from\":{},\"external_reward_from\":{},\"loss\":0.00088405015412718058,"
    "\"grad_norm\":4.7933144569396973,\"tokens\":3570,\"skipped_groups\":0,\"lr\":4.9999998736893758e-06,"
    "\"masked_truncated\":0,\"packed_groups\":0,\"external_logprobs\":0,\"positions\":7004,"
    "\"clip_region\":0.015406162478029728,\"clip_low\":0.00756302522495389,\"clip_high\":0.0078431377187371254,"
    "\"ratio\":0.998783528804779,\"ratio_min\":0.23472893238067627,\"ratio_max\":3.1570768356323242,"
    "\"ratio_min_at\":{\"token\":\" Calculate\",\"token_id\":20517,\"position\":17,\"logp\":-3.8021030426025391,"
    "\"logp_sampled\":-2.3527791500091553,\"advantage\":0.93523937463760376},\"kl\":0,\"seconds\":{\"train\":227.055,"
    "\"generate\":85.298,\"verify\":0,\"pool\":0.002,\"transport\":0.012},\"sampler\":{\"pool_size\":6,"
    "\"published\":105,\"stale_dropped\":4,\"external_zero_adv_dropped\":0,\"local_zero_adv_dropped\":75,"
    "\"local_zero_adv_kept\":0,\"wrong_size_dropped\":0,\"duplicate_dropped\":0,\"external_rejected\":0,"
    "\"external_unscorable\":0,\"pool_missing\":0,\"pool_bad_nodes\":0,\"screen\":{\"passed\":0,\"too_large\":0,"
    "\"malformed\":0,\"bad_node\":0,\"own\":0,\"wrong_size\":0,\"text_too_long\":0,\"bad_utf8\":0,"
    "\"unknown_family\":0,\"bad_metadata\":0,\"duplicate\":0,\"unsigned\":0,\"bad_signature\":0,"
    "\"node_mismatch\":0},\"fallback_batches\":0,\"pool_errors\":0,\"scored_reward\":0.569444,"
    "\"scored_completions\":72},\"peak_gb\":{\"evaluate\":1.2,\"generator\":2.3,\"learner\":9.2},"
    "\"time\":1795973458.69887}";

/* the median seconds to write LINE as an event, into a file in a
 * temporary folder; -1 where none can be made */
static double event_time(int reps)
{
    char dir[] = "/tmp/bench_round_tb_XXXXXX", err[512];
    if (!mkdtemp(dir)) return -1;
    tb_t *tb = tb_open(dir, "bench", err, sizeof err);
    double t[64];
    int n = 0;
    for (; tb && n < reps && n < 64; n++) {
        double t0 = bench_now();
        if (tb_line(tb, LINE, NULL, metrics_tb_group, err, sizeof err) != 0) break;
        t[n] = bench_now() - t0;
    }
    tb_close(&tb);
    fs_rm_tree(dir);
    return n == reps ? bench_median(t, n) : -1;
}
#endif

int main(int argc, char **argv)
{
    /* idle OpenMP threads sleep, as in bench_model (see there) */
    if (argc > 0 && !getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    int reps = bench_quick() ? 3 : 15;
    char err[256];
    model_config_t c = model_config_tiny();
    c.n_eos = 0; /* every completion CL tokens */
    model_t *m = model_new_random(&c, 1, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("round of the default mix: %d prompts of %d tokens x %d completions of %d, sampled, then one GRPO "
           "forward and backward pass over them (median of %d)\n",
           G, P, L, CL, reps);
    double bg, bt, before = round_time(m, false, reps, &bg, &bt);
#ifdef SAPO_ROUND_BEFORE
    printf("round the way before issue 18: %.4f s (sampling %.4f s, training %.4f s)\n", before, bg, bt);
#else
    double ng, nt, node = round_time(m, true, reps, &ng, &nt);
    printf("round the node's way: %.4f s (sampling %.4f s, training %.4f s); a request per prompt and a row per "
           "completion: %.4f s (%.4f s, %.4f s)\n",
           node, ng, nt, before, bg, bt);
    bench_line("round_tiny", 1 / node, "rounds/s", "a request per prompt, a row per completion", 1 / before,
               "rounds/s");
    double ev = event_time(51);
    if (ev < 0) bench_skip("round_tiny_tensorboard", "no temporary folder for an event file");
    else {
        printf("a round's TensorBoard event: %.1f us to write (%.4f %% of the round)\n", ev * 1e6, 100 * ev / node);
        bench_line("round_tiny_tensorboard", 1 / (node + ev), "rounds/s", "without event files", 1 / node, "rounds/s");
    }
#endif
    model_destroy(&m);
    return 0;
}
