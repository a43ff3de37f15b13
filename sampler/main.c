/* sampler: runs a node's rounds. Draws questions from the task mix for the
 * generators (SampleBatch), publishes every fresh own group with nonzero
 * advantage to the swarm's Redis pool (SelectSubset + Communicate), samples
 * other nodes' groups from the pool and sends them through the local
 * verifier (their rewards are never trusted), and hands the learner batches
 * of I own + J external groups (SampleSelf + SampleExternal).
 * Produces tasks, rollouts (external groups) and batches; consumes scored;
 * follows policy. */
#include <czmq.h>
#include <string.h>

#include "node/assembly.h"
#include "node/config.h"
#include "node/version.h"
#include "pool/pool.h"
#include "records.h"
#include "tasks/task.h"
#include "util/log.h"
#include "wire/wire.h"

typedef struct {
    config_t cfg;
    task_mix_t *mix;
    assembly_t *asm_;
    pool_t *pool;
    wire_producer_t *tasks, *external, *batches;
    wire_consumer_t *scored;
    wire_subscriber_t *policy;
    uint64_t version, round, next_task;
    uint64_t learner_round;   /* last round the learner applied */
    long in_flight;           /* own tasks sent, not yet back scored */
    long external_pending;    /* external groups sent to the verifier */
    long published, pool_errors, external_malformed, own_external;
    bool pool_dry;            /* the pool has nothing more for us this round */
    int requests;             /* pool requests this round */
    bool fallback_logged;
    double pool_seconds;
} sampler_t;

static void send_task(sampler_t *s)
{
    char err[512];
    task_entry_t e = {0};
    uint64_t index = s->next_task++;
    if (task_mix_draw(s->mix, index, &e, err, sizeof err) != 0) log_fatal("task mix: %s", err);
    char *meta = cJSON_PrintUnformatted(e.metadata);
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(e.metadata, "source_dataset");
    rec_task_t t = {.task_id = index, .family = cJSON_IsString(fam) ? fam->valuestring : "", .question = e.question,
                    .answer = e.answer, .metadata_json = meta, .seed = s->cfg.seed, .index = index,
                    .node = s->cfg.node, .round = s->round};
    uint8_t *buf;
    size_t len;
    if (rec_task_build(&t, &buf, &len) == 0 && wire_producer_send(s->tasks, buf, len) == 0) s->in_flight++;
    rec_free(buf);
    free(meta);
    task_entry_free(&e);
}

/* SampleExternal: other nodes' groups, marked external, to the verifier */
static void request_external(sampler_t *s)
{
    int want = 2 * s->cfg.external_groups;
    pool_entry_t *got = NULL;
    int64_t t0 = zclock_mono();
    char err[512];
    int n = pool_sample(s->pool, s->cfg.node, want, &got, err, sizeof err);
    s->pool_seconds += (zclock_mono() - t0) / 1000.0;
    if (n < 0) {
        if (s->pool_errors++ == 0) log_error("pool: %s (training on local groups until it is back)", err);
        s->pool_dry = true;
        return;
    }
    if (s->pool_errors) log_info("pool reachable again after %ld failed calls", s->pool_errors);
    s->pool_errors = 0;
    for (int i = 0; i < n; i++) {
        void *copy = NULL;
        const void *buf = rec_aligned(got[i].data, got[i].len, &copy);
        rec_rollout_view_t v;
        rec_completion_t *comps = NULL;
        if (!buf || rec_rollout_view(buf, got[i].len, &v, err, sizeof err) != 0) {
            s->external_malformed++;
        } else if (strcmp(v.r.node, s->cfg.node) == 0) {
            s->own_external++;
        } else {
            rec_rollout_t r;
            comps = calloc(v.r.n_completions + 1, sizeof *comps);
            rec_rollout_unpack(&v, &r, comps);
            r.external = true;
            r.scored = false;
            uint8_t *out;
            size_t len;
            if (rec_rollout_build(&r, &out, &len) == 0 && wire_producer_send(s->external, out, len) == 0)
                s->external_pending++;
            rec_free(out);
        }
        free(comps);
        free(copy);
    }
    pool_entries_free(got, n);
    /* a few tries a round: entries can all turn out zero-advantage here */
    s->pool_dry = n == 0 || ++s->requests >= 3;
}

static void on_scored(sampler_t *s, const wire_record_t *r)
{
    void *buf = malloc(r->size ? r->size : 1);
    memcpy(buf, r->data, r->size);
    rec_rollout_view_t v;
    char err[512];
    if (rec_rollout_view(buf, r->size, &v, err, sizeof err) != 0) {
        log_error("dropped a scored record: %s", err);
        free(buf);
        return;
    }
    if (v.r.external) {
        s->external_pending--;
    } else {
        s->in_flight--;
        /* SelectSubset: what teaches something is worth sharing */
        if (strcmp(s->cfg.share, "all") == 0 || !group_zero_advantage(buf, r->size)) {
            int64_t t0 = zclock_mono();
            if (pool_publish(s->pool, s->cfg.node, buf, r->size, err, sizeof err) == 0) s->published++;
            else if (s->pool_errors++ == 0) log_error("pool: %s", err);
            s->pool_seconds += (zclock_mono() - t0) / 1000.0;
        }
    }
    assembly_add(s->asm_, buf, r->size);
}

static void send_batch(sampler_t *s)
{
    const assembly_stats_t *a = assembly_stats(s->asm_);
    char stats[1024];
    long pool_size = pool_size_total(s->pool);
    snprintf(stats, sizeof stats,
             "{\"pool_size\":%ld,\"published\":%ld,\"stale_dropped\":%ld,\"zero_adv_dropped\":%ld,"
             "\"wrong_size_dropped\":%ld,\"external_malformed\":%ld,\"fallback_batches\":%ld,\"pool_errors\":%ld,"
             "\"seconds\":{\"pool\":%.4f}}",
             pool_size, s->published, a->stale_dropped, a->zero_adv_dropped, a->wrong_size_dropped,
             s->external_malformed, a->fallback_batches, s->pool_errors, s->pool_seconds);
    uint8_t *buf;
    size_t len;
    if (assembly_take(s->asm_, s->round, s->version, stats, &buf, &len) != 0) log_fatal("batch record too large");
    wire_producer_send(s->batches, buf, len);
    rec_free(buf);
    if (a->fallback_batches && !s->fallback_logged) {
        log_info("round %llu: too few external groups in the pool, filled with local ones", (unsigned long long)s->round);
        s->fallback_logged = true;
    }
    s->round++;
    s->pool_dry = false;
    s->requests = 0;
    s->pool_seconds = 0;
}

int main(int argc, char **argv)
{
    sampler_t s = {0};
    int rc = config_load(&s.cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("sampler", s.cfg.node);
    zsys_init();
    char err[512];
    s.mix = task_mix_new(s.cfg.task_mix[0] ? s.cfg.task_mix : NULL, s.cfg.seed, err, sizeof err);
    if (!s.mix) log_fatal("task mix (SAPO_TASK_MIX): %s", err);
    s.pool = pool_new(s.cfg.redis, s.cfg.swarm, s.cfg.pool_max, err, sizeof err);
    if (!s.pool) log_fatal("pool %s: %s", s.cfg.redis, err);
    endpoints_t ep;
    if (endpoints_from_base(s.cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    if (!(s.tasks = wire_producer_new(&ep, STREAM_TASKS, err, sizeof err)) ||
        !(s.external = wire_producer_new(&ep, STREAM_ROLLOUTS, err, sizeof err)) ||
        !(s.batches = wire_producer_new(&ep, STREAM_BATCHES, err, sizeof err)) ||
        !(s.scored = wire_consumer_new(&ep, STREAM_SCORED, 64, err, sizeof err)) ||
        !(s.policy = wire_subscriber_new(&ep, err, sizeof err)))
        log_fatal("%s", err);
    s.asm_ = assembly_new(&s.cfg);

    /* rounds continue from the learner's: its first notice says where */
    s.version = UINT64_MAX;
    log_info("waiting for the learner's policy notice");
    while (!zsys_interrupted && s.version == UINT64_MAX)
        version_follow(s.policy, 1000, NULL, &s.version, &s.learner_round, NULL, 0);
    if (zsys_interrupted) return 0;
    s.round = s.learner_round + 1;
    s.next_task = s.round * (uint64_t)s.cfg.questions;
    log_info("starting at round %llu (I=%d local, J=%d external, L=%d)", (unsigned long long)s.round,
             s.cfg.local_groups, s.cfg.external_groups, s.cfg.completions);

    while (!zsys_interrupted) {
        if (version_follow(s.policy, 0, NULL, &s.version, &s.learner_round, NULL, 0) == 1 &&
            s.round > s.learner_round + 2) {
            /* the learner restarted from a checkpoint: continue its count */
            log_info("learner is back at round %llu; next batch is round %llu", (unsigned long long)s.learner_round,
                     (unsigned long long)s.learner_round + 1);
            s.round = s.learner_round + 1;
        }
        /* keep two rounds of questions in flight so generators never idle */
        while (s.in_flight + (long)assembly_local(s.asm_) < 2L * s.cfg.questions) send_task(&s);
        wire_record_t *r = wire_consumer_recv(s.scored, 100);
        if (r) {
            on_scored(&s, r);
            wire_consumer_ack(s.scored, r->id);
            wire_record_destroy(&r);
        }
        if (s.cfg.external_groups > 0 && !s.pool_dry && s.external_pending == 0 &&
            assembly_external(s.asm_) < (size_t)s.cfg.external_groups && assembly_local(s.asm_) >= (size_t)s.cfg.local_groups)
            request_external(&s);
        /* one batch queued behind the one in training at most, so groups stay fresh */
        bool learner_free = s.round <= s.learner_round + 2;
        bool fallback = s.pool_dry && s.external_pending == 0;
        if (learner_free && assembly_ready(s.asm_, s.version, fallback)) send_batch(&s);
    }
    log_info("stopping at round %llu: %ld groups published", (unsigned long long)s.round, s.published);
    assembly_destroy(&s.asm_);
    wire_subscriber_destroy(&s.policy);
    wire_consumer_destroy(&s.scored);
    wire_producer_destroy(&s.batches);
    wire_producer_destroy(&s.external);
    wire_producer_destroy(&s.tasks);
    pool_destroy(&s.pool);
    task_mix_destroy(&s.mix);
    return 0;
}
