/* verifier: scores every completion of every group the node's generators
 * make with this node's task library and forwards it (external groups are
 * scored by the same library where the sampler draws them).
 * Consumes the rollouts stream, produces the scored stream; stateless, so
 * any number can run. `verifier score|generate` are command-line modes
 * (cli.h) that need no node. */
#include <czmq.h>
#include <string.h>

#include "cli.h"
#include "node/config.h"
#include "node/score.h"
#include "records.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/peak.h"
#include "wire/wire.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "score") == 0) return verifier_cli_score(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "generate") == 0) return verifier_cli_generate(argc - 1, argv + 1);
    config_t cfg;
    int rc = config_load(&cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    if (argc > 1) {
        fprintf(stderr, "verifier: unknown mode '%s' (score, generate, or no mode to serve a node)\n", argv[1]);
        return 2;
    }
    log_init("verifier", cfg.node);
    zsys_init();
    endpoints_t ep;
    char err[512];
    if (peak_watch(cfg.run, "verifier", err, sizeof err) != 0) log_fatal("%s", err);
    if (endpoints_from_base(cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    wire_consumer_t *in = wire_consumer_new(&ep, STREAM_ROLLOUTS, 4, err, sizeof err);
    wire_producer_t *out = in ? wire_producer_new(&ep, STREAM_SCORED, err, sizeof err) : NULL;
    if (!in || !out) log_fatal("%s", err);
    log_info("scoring rollouts from %s", ep.out[STREAM_ROLLOUTS]);

    score_stats_t st = {0};
    while (!zsys_interrupted) {
        wire_record_t *r = wire_consumer_recv(in, 1000);
        if (!r) continue;
        void *copy = malloc(r->size ? r->size : 1);
        memcpy(copy, r->data, r->size);
        if (score_group(copy, r->size, (reward_rule_t){cfg.reward_floor, cfg.format_reward}, &st, err, sizeof err) ==
            0) {
            wire_producer_send(out, copy, r->size);
        } else {
            /* a verifiable record goes back unscored: its question is done
             * with, and the sampler sends a new one in its place */
            rec_group_view_t v;
            if (rec_group_view(copy, r->size, &v, NULL, 0) == 0) wire_producer_send(out, copy, r->size);
            log_error("unscorable group (%ld so far): %s", st.malformed, err);
        }
        free(copy);
        wire_consumer_ack(in, r->id);
        wire_record_destroy(&r);
        mem_release();
    }
    log_info("stopping: %ld groups, %ld completions scored, %ld dropped", st.scored, st.completions, st.malformed);
    wire_producer_destroy(&out);
    wire_consumer_destroy(&in);
    return 0;
}
