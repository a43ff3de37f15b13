/* generator: samples L completions per question with the node's current
 * policy and sends them on as one rollout record (policy version and
 * per-token log-probs included). Consumes the tasks stream, produces the
 * rollouts stream, follows the policy stream; any number can run, and a new
 * policy version is loaded between two questions without stopping. */
#include <czmq.h>
#include <string.h>

#include "node/config.h"
#include "node/policy.h"
#include "node/version.h"
#include "records.h"
#include "util/log.h"
#include "util/mem.h"
#include "wire/wire.h"

static uint64_t now_ms(void) { return (uint64_t)zclock_time(); }

/* one task record in, one rollout record out (malloc'ed), or NULL */
static uint8_t *roll_out(policy_t *pol, const config_t *cfg, uint64_t version, const void *task_buf, size_t task_len,
                         size_t *out_len, char *err, size_t errlen)
{
    rec_task_t t;
    if (rec_task_view(task_buf, task_len, &t, err, errlen) != 0) return NULL;
    int L = cfg->completions;
    completion_t *cs = calloc((size_t)L, sizeof *cs);
    model_gen_params_t gp = {
        .max_new = cfg->max_new_tokens,
        .sample = {cfg->temperature, cfg->top_k, cfg->top_p},
        .seed = cfg->seed * 1000003ull ^ t.task_id * 7919ull ^ version,
    };
    int64_t t0 = zclock_mono();
    if (policy_sample(pol, t.question, L, &gp, cs, err, errlen) != 0) {
        free(cs);
        return NULL;
    }
    rec_completion_t *rc = calloc((size_t)L, sizeof *rc);
    for (int l = 0; l < L; l++)
        rc[l] = (rec_completion_t){.text = cs[l].text ? cs[l].text : "", .token_ids = (const int32_t *)cs[l].tokens,
                                   .n_tokens = (size_t)cs[l].n, .logprobs = cs[l].logp, .n_logprobs = (size_t)cs[l].n,
                                   .finished = cs[l].finished};
    rec_rollout_t r = {.node = cfg->node, .policy_version = version, .round = t.round, .model = pol->name, .task = t,
                       .completions = rc, .n_completions = (size_t)L, .created_ms = now_ms(),
                       .gen_ms = (uint32_t)(zclock_mono() - t0)};
    uint8_t *buf = NULL;
    if (rec_rollout_build(&r, &buf, out_len) != 0) snprintf(err, errlen, "rollout record too large");
    for (int l = 0; l < L; l++) completion_free(&cs[l]);
    free(cs);
    free(rc);
    return buf;
}

int main(int argc, char **argv)
{
    config_t cfg;
    int rc = config_load(&cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("generator", cfg.node);
    mem_fix_thresholds();
    zsys_init();
    endpoints_t ep;
    char err[512];
    if (endpoints_from_base(cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    wire_subscriber_t *policy_in = wire_subscriber_new(&ep, err, sizeof err);
    wire_consumer_t *tasks = policy_in ? wire_consumer_new(&ep, STREAM_TASKS, 1, err, sizeof err) : NULL;
    wire_producer_t *out = tasks ? wire_producer_new(&ep, STREAM_ROLLOUTS, err, sizeof err) : NULL;
    if (!out) log_fatal("%s", err);

    /* the first notice names the policy to start from */
    uint64_t version = UINT64_MAX;
    char ckpt[4096] = "";
    log_info("waiting for the learner's policy notice");
    while (!zsys_interrupted && version == UINT64_MAX) version_follow(policy_in, 1000, NULL, &version, NULL, ckpt, sizeof ckpt);
    if (zsys_interrupted) return 0;
    policy_t *pol = policy_open(ckpt, cfg.system_prompt, err, sizeof err);
    if (!pol || model_set_backend(pol->model, cfg.backend, err, sizeof err) != 0) log_fatal("%s", err);
    log_info("policy version %llu from %s (%s, %zu parameters)", (unsigned long long)version, ckpt, pol->name,
             model_num_params(pol->model));

    long done = 0;
    while (!zsys_interrupted) {
        if (version_follow(policy_in, 0, pol, &version, NULL, ckpt, sizeof ckpt) == 1)
            log_info("policy version %llu loaded", (unsigned long long)version);
        wire_record_t *r = wire_consumer_recv(tasks, 200);
        if (!r) continue;
        void *copy = NULL;
        const void *buf = rec_aligned(r->data, r->size, &copy);
        size_t len = 0;
        uint8_t *rollout = buf ? roll_out(pol, &cfg, version, buf, r->size, &len, err, sizeof err) : NULL;
        if (rollout) {
            wire_producer_send(out, rollout, len);
            done++;
        } else {
            log_error("dropped a task: %s", buf ? err : "out of memory");
        }
        rec_free(rollout);
        free(copy);
        wire_consumer_ack(tasks, r->id);
        wire_record_destroy(&r);
    }
    log_info("stopping after %ld rollouts", done);
    policy_destroy(&pol);
    wire_producer_destroy(&out);
    wire_consumer_destroy(&tasks);
    wire_subscriber_destroy(&policy_in);
    return 0;
}
