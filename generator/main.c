/* generator: samples L completions per question with the node's current
 * policy and sends them on as one group record (policy version and
 * per-token log-probs included). Consumes the tasks stream, produces the
 * rollouts stream, follows the notices stream; any number can run, and a new
 * policy version is loaded between two batches without stopping. It takes
 * the queued questions, up to generate-batch, and samples them in one
 * decode batch: small matmuls waste the CPU. */
#include <czmq.h>
#include <string.h>

#include "node/budget.h"
#include "node/config.h"
#include "node/policy.h"
#include "node/version.h"
#include "records.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/nice.h"
#include "util/peak.h"
#include "wire/wire.h"

static uint64_t now_ms(void) { return (uint64_t)zclock_time(); }

/* the tasks a generator takes at once: records, their views, aligned copies */
typedef struct {
    wire_record_t *rec[64];
    rec_task_t task[64];
    void *copy[64];
    int n;
} take_t;

/* The first task within 200 ms, then what else is queued, up to batch
 * (the generate-batch setting, or less under a memory budget): a few ms apart, as the sampler sends a round's tasks one
 * by one. A task that is not a record, or whose question the policy
 * cannot take, is dropped with a line and acked. */
static void take(wire_consumer_t *tasks, const policy_t *pol, const config_t *cfg, int batch, take_t *t)
{
    t->n = 0;
    char err[512];
    for (int wait = 200; t->n < batch; wait = 5) {
        wire_record_t *r = wire_consumer_recv(tasks, wait);
        if (!r) break;
        void *copy = NULL;
        const void *buf = rec_aligned(r->data, r->size, &copy);
        rec_task_t *v = &t->task[t->n];
        if (buf && rec_task_view(buf, r->size, v, err, sizeof err) == 0 &&
            policy_check(pol, v->question, cfg->max_new_tokens, err, sizeof err) == 0) {
            t->rec[t->n] = r, t->copy[t->n++] = copy;
            continue;
        }
        log_error("dropped a task: %s", buf ? err : "out of memory");
        free(copy);
        wire_consumer_ack(tasks, r->id);
        wire_record_destroy(&r);
    }
}

/* L completions of each task taken, sampled together; one group record
 * each sent on. Each group's gen_ms is its share of the batch's time.
 * The groups sent, or -1 when told to stop while sampling (the tasks are
 * then left to go back to the queue). */
static long roll_out(policy_t *pol, const config_t *cfg, uint64_t version, take_t *t, wire_producer_t *out)
{
    int L = cfg->completions, Q = t->n;
    const char *questions[64];
    uint64_t seeds[64];
    for (int q = 0; q < Q; q++) {
        questions[q] = t->task[q].question;
        seeds[q] = cfg->seed * 1000003ull ^ t->task[q].task_id * 7919ull ^ version;
    }
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {cfg->temperature, cfg->top_k, cfg->top_p}};
    completion_t *cs = calloc((size_t)Q * L, sizeof *cs);
    rec_completion_t *rc = calloc((size_t)L, sizeof *rc);
    char err[512];
    int64_t t0 = zclock_mono();
    long sent = 0;
    if (!cs || !rc) {
        log_error("dropped %d tasks: out of memory", Q);
    } else if (policy_sample_batch(pol, questions, seeds, Q, L, &gp, cs, err, sizeof err) != 0) {
        if (zsys_interrupted) {
            log_info("stopped while sampling: %d tasks go back to the queue", Q);
            sent = -1;
        } else {
            log_error("dropped %d tasks: %s", Q, err);
        }
    } else {
        uint32_t gen_ms = (uint32_t)((zclock_mono() - t0) / Q);
        for (int q = 0; q < Q; q++) {
            for (int l = 0; l < L; l++) {
                const completion_t *c = &cs[(size_t)q * L + l];
                rc[l] = (rec_completion_t){.text = c->text ? c->text : "",
                                           .token_ids = (const int32_t *)c->token_ids,
                                           .n_tokens = (size_t)c->n,
                                           .logprobs = c->logprobs,
                                           .n_logprobs = (size_t)c->n,
                                           .finished = c->finished};
            }
            rec_group_t r = {.node = cfg->node,
                             .policy_version = version,
                             .round = t->task[q].round,
                             .model = pol->name,
                             .task = t->task[q],
                             .completions = rc,
                             .n_completions = (size_t)L,
                             .created_ms = now_ms(),
                             .gen_ms = gen_ms};
            uint8_t *buf = NULL;
            size_t len = 0;
            if (rec_group_build(&r, &buf, &len) == 0) {
                wire_producer_send(out, buf, len);
                sent++;
            } else {
                log_error("dropped a task: group record too large");
            }
            rec_free(buf);
        }
    }
    for (size_t i = 0; cs && i < (size_t)Q * L; i++) completion_free(&cs[i]);
    free(cs);
    free(rc);
    return sent;
}

/* In lockstep a task names the policy version that must sample it: the
 * sampler sent it on the learner's notice, which may reach this generator
 * a moment later. Waits for that version, up to stall-seconds. */
static void await_version(wire_subscriber_t *notices_in, policy_t *pol, const config_t *cfg, const take_t *t,
                          uint64_t *version, char *checkpoint, size_t checkpoint_len)
{
    uint64_t want = 0;
    for (int q = 0; q < t->n; q++)
        if (t->task[q].policy_version > want) want = t->task[q].policy_version;
    int64_t t0 = zclock_mono();
    while (!zsys_interrupted && *version < want && zclock_mono() - t0 < 1000L * cfg->stall_seconds)
        if (version_follow(notices_in, 100, pol, version, NULL, checkpoint, checkpoint_len) == 1)
            log_info("policy version %llu loaded", (unsigned long long)*version);
    if (*version < want)
        log_error("sampling with policy version %llu: version %llu, which the task asks for, did not come",
                  (unsigned long long)*version, (unsigned long long)want);
}

/* The node's work once the sockets exist: the policy the learner's first
 * notice names, then batches of tasks until told to stop. 1 when the
 * policy cannot be opened (main closes the sockets either way). */
static int serve(const config_t *cfg, wire_subscriber_t *notices_in, wire_consumer_t *tasks, wire_producer_t *out)
{
    /* the first notice names the policy to start from */
    uint64_t version = UINT64_MAX;
    char checkpoint[4096] = "", err[512];
    log_info("waiting for the learner's policy notice");
    while (!zsys_interrupted && version == UINT64_MAX)
        version_follow(notices_in, 1000, NULL, &version, NULL, checkpoint, sizeof checkpoint);
    if (zsys_interrupted) {
        log_info("stopping before the learner's first notice");
        return 0;
    }
    policy_t *pol = policy_open(checkpoint, cfg->system_prompt, err, sizeof err);
    if (!pol || policy_place(pol, cfg, true, err, sizeof err) != 0) {
        log_error("%s", err);
        policy_destroy(&pol);
        return 1;
    }
    log_info("policy version %llu from %s (%s, %zu parameters)", (unsigned long long)version, checkpoint, pol->name,
             model_num_params(pol->model));
    pol->cancel = &zsys_interrupted;
    budget_t budget;
    if (budget_for(cfg, pol, BUDGET_GENERATOR, &budget, err, sizeof err) != 0) {
        log_error("%s", err);
        policy_destroy(&pol);
        return 1;
    }
    if (budget.total)
        log_info("memory %s: %d question%s at a time, %s", cfg->memory, budget.generate_batch,
                 budget.generate_batch == 1 ? "" : "s", budget.packed ? "packed weights" : "weights unpacked");

    long done = 0;
    take_t t;
    while (!zsys_interrupted) {
        if (version_follow(notices_in, 0, pol, &version, NULL, checkpoint, sizeof checkpoint) == 1)
            log_info("policy version %llu loaded", (unsigned long long)version);
        take(tasks, pol, cfg, budget.generate_batch, &t);
        await_version(notices_in, pol, cfg, &t, &version, checkpoint, sizeof checkpoint);
        long sent = t.n ? roll_out(pol, cfg, version, &t, out) : 0;
        policy_log_memory(pol);
        if (sent > 0) done += sent;
        /* acked once sent: a task in flight when the generator dies, or
         * stops while sampling it, goes back to the queue */
        for (int q = 0; q < t.n; q++) {
            if (sent >= 0) wire_consumer_ack(tasks, t.rec[q]->id);
            wire_record_destroy(&t.rec[q]);
            free(t.copy[q]);
        }
    }
    log_info("stopping after %ld groups", done);
    policy_destroy(&pol);
    return 0;
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
    if (peak_watch(cfg.run, "generator", err, sizeof err) != 0) log_fatal("%s", err);
    if (endpoints_from_base(cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    wire_subscriber_t *notices_in = wire_subscriber_new(&ep, err, sizeof err);
    wire_consumer_t *tasks =
        notices_in ? wire_consumer_new(&ep, STREAM_TASKS, cfg.generate_batch, err, sizeof err) : NULL;
    wire_producer_t *out = tasks ? wire_producer_new(&ep, STREAM_ROLLOUTS, err, sizeof err) : NULL;
    if (!out) {
        log_error("%s", err);
        rc = 1;
    } else {
        /* the model's threads below those that carry records (util/nice.h) */
        if (nice_compute_threads(cfg.nice, err, sizeof err) != 0) log_error("%s", err);
        rc = serve(&cfg, notices_in, tasks, out);
    }
    /* every socket closed, whatever ended the generator: CZMQ names any
     * left open at exit in a line that reads as an error */
    wire_producer_destroy(&out);
    wire_consumer_destroy(&tasks);
    wire_subscriber_destroy(&notices_in);
    return rc;
}
