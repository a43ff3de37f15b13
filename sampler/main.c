/* sampler: runs a node's rounds. Draws questions from the task mix for the
 * generators (SampleBatch), publishes every fresh own group with nonzero
 * advantage to the swarm's Redis pool (SelectSubset + Communicate), draws
 * other nodes' fresh groups from the pool (each once) and scores them as
 * they arrive with the node's own verifier rules (their rewards are never
 * trusted), and hands the learner batches of I own + J external groups
 * (SampleSelf + SampleExternal). Groups are signed with the node's key (its
 * identity, registered in the pool under its node id); drawn pool entries are
 * kept only when signed by the key of the node they are stored under and
 * naming that node.
 * With game three-stage it plays RL Swarm's game instead (game.c).
 * Produces tasks and batches; consumes scored; follows policy. */
#include <string.h>

#include "records.h"
#include "node/metrics.h"
#include "sampler.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/peak.h"

/* Questions in flight: this many rounds' worth, so generators never idle
 * while the sampler waits for a round's last groups. */
#define ROUNDS_OF_TASKS_AHEAD 2
/* A draw asks the pool for this many times J groups, since the screen and
 * the zero-advantage filter drop some of them. */
#define DRAW_MULTIPLE 2
/* Draws a round: the pool is taken as dry for the round after this many,
 * and the batch filled with local groups (drawn groups can all turn out
 * zero-advantage here). */
#define DRAWS_PER_ROUND 3
/* Lockstep: round r's k-th question is the question sequence's number
 * r * LOCKSTEP_STRIDE + k, whatever I/J is (k stays far below this: the
 * local filter keeps groups after 4 x I dropped in a row). */
#define LOCKSTEP_STRIDE (1ull << 20)

/* Where a round stands, read from the groups assembled so far. */
typedef enum {
    ROUND_COLLECTING,   /* waiting for scored local groups */
    ROUND_DRAWING,      /* the I local groups are in, external ones are missing */
    ROUND_READY,        /* a batch can be sent */
    ROUND_LEARNER_BUSY, /* a batch could be sent, but BATCHES_AHEAD are already out */
} round_state_t;

static void send_task(sampler_t *s)
{
    char err[512];
    task_question_t e = {0};
    uint64_t index = s->cfg.lockstep ? s->at.round * LOCKSTEP_STRIDE + s->at.slot++ : s->at.next_task++;
    if (task_mix_draw(s->mix, index, &e, err, sizeof err) != 0) log_fatal("task mix: %s", err);
    char *meta = cJSON_PrintUnformatted(e.metadata);
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(e.metadata, "source_dataset");
    rec_task_t t = {.task_id = index,
                    .family = cJSON_IsString(fam) ? fam->valuestring : "",
                    .question = e.question,
                    .answer = e.answer,
                    .metadata_json = meta,
                    .seed = s->cfg.seed,
                    .index = index,
                    .node = s->cfg.node,
                    .round = s->at.round,
                    .policy_version = s->cfg.lockstep ? s->at.policy_version : 0};
    uint8_t *buf;
    size_t len;
    if (rec_task_build(&t, &buf, &len) == 0 && wire_producer_send(s->tasks, buf, len) == 0) s->at.in_flight++;
    rec_free(buf);
    free(meta);
    task_question_free(&e);
}

/* An external group, drawn from the pool and screened (v views its
 * record in e): marked external with its ages, scored here by this node's
 * rules (the publisher's rewards are never trusted, and its record is
 * never written), weighed for the useful strategy and handed to the
 * assembly with the entry. A group no scorer here takes (metadata of a
 * family this build lacks) is dropped and counted. */
static void take_external(sampler_t *s, pool_entry_t *e, rec_group_view_t *v)
{
    /* token ids and sampling log-probs travel on: the learner uses them
     * only where the publisher runs its model and the ids are its own
     * encoding of the text (external-logprobs) */
    v->r.external = true;
    v->r.pool_age_ms = e->age_ms;
    v->r.pool_age_rounds = e->age_rounds > UINT32_MAX ? UINT32_MAX : (uint32_t)e->age_rounds;
    float rewards[v->r.n_completions ? v->r.n_completions : 1];
    char err[512];
    if (score_view(v, s->rule, rewards, &s->counts.external_scoring, err, sizeof err) != 0) {
        s->counts.external_unscorable++;
        log_error("dropped an external group from %s (%ld so far): %s", e->node, s->counts.external_unscorable, err);
        return;
    }
    bool zero_advantage = group_zero_advantage(v);
    /* how informative this peer's groups are here (pool-strategy useful) */
    pool_feedback(s->pool, e->node, !zero_advantage);
    assembly_add(s->asm_, e->data, v, zero_advantage);
    e->data = NULL; /* the assembly's now */
}

/* SampleExternal: other nodes' fresh groups, each once, screened, then
 * taken */
static void draw_external(sampler_t *s)
{
    int want = DRAW_MULTIPLE * s->cfg.external_groups;
    pool_entry_t *got = NULL;
    int64_t t0 = zclock_mono();
    char err[512];
    int n = pool_draw(s->pool, s->cfg.node, want, &got, err, sizeof err);
    s->counts.pool_seconds += (zclock_mono() - t0) / 1000.0;
    if (n < 0) {
        sampler_pool_failed(s, err);
        s->at.pool_dry = true;
        return;
    }
    sampler_pool_worked(s);
    for (int i = 0; i < n; i++) {
        uint8_t pub[IDENTITY_PUBLIC_BYTES];
        int known = sampler_source_key(s, got[i].node, pub);
        rec_group_view_t v;
        if (known >= 0 &&
            screen_entry(s->screen, got[i].data, got[i].len, got[i].node, known ? pub : NULL, &v) == SCREEN_OK)
            take_external(s, &got[i], &v);
    }
    pool_entries_free(got, n);
    s->at.pool_dry = n == 0 || ++s->at.draws >= DRAWS_PER_ROUND;
}

/* SelectSubset + Communicate: a fresh own group that teaches something is
 * signed and published (once: a repeat of a task is dropped by the
 * assembly, and not shared again) */
static void share_group(sampler_t *s, const void *buf, size_t size, uint64_t task_id, bool zero_advantage)
{
    if (assembly_repeat(s->asm_, task_id) || (s->cfg.share != FILTER_ALL && zero_advantage)) return;
    char err[512];
    int64_t t0 = zclock_mono();
    size_t len;
    uint8_t *entry = sampler_registered(s) ? identity_seal(s->id, buf, size, &len) : NULL;
    if (entry && pool_publish(s->pool, s->cfg.node, s->at.round, entry, len, err, sizeof err) == 0)
        s->counts.published++, sampler_pool_worked(s);
    else if (entry) sampler_pool_failed(s, err);
    free(entry);
    s->counts.pool_seconds += (zclock_mono() - t0) / 1000.0;
}

/* one of our own groups, back from a verifier */
static void on_scored(sampler_t *s, const wire_record_t *r)
{
    void *buf = malloc(r->size ? r->size : 1);
    memcpy(buf, r->data, r->size);
    rec_group_view_t v;
    char err[512];
    if (rec_group_view(buf, r->size, &v, err, sizeof err) != 0) {
        log_error("dropped a scored record: %s", err);
        free(buf);
        return;
    }
    if (v.r.external) {
        /* external groups are scored where they are drawn, and never come
         * this way */
        log_error("dropped a scored record: an external group (they are scored where they are drawn)");
        free(buf);
        return;
    }
    s->at.in_flight -= s->at.in_flight > 0;
    if (!v.r.scored) {
        /* a verifier that could not score our task (one of an older build,
         * without its family) sends it back unscored: it is back all the
         * same, and its slot in flight goes to a new question */
        free(buf);
        return;
    }
    for (size_t i = 0; i < v.r.n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(&v, i, &c);
        s->counts.scored_reward += c.reward;
        s->counts.scored_completions++;
    }
    int64_t in_transit = zclock_time() - (int64_t)v.r.created_ms - (int64_t)v.r.verify_ms;
    s->counts.transport_seconds += in_transit > 0 ? in_transit / 1000.0 : 0;
    bool zero_advantage = group_zero_advantage(&v);
    share_group(s, buf, r->size, v.r.task.task_id, zero_advantage);
    assembly_add(s->asm_, buf, &v, zero_advantage);
}

/* the batch's counters (metrics_sampler_t): the sampler's, the
 * assembly's, the pool's and the screen's */
static char *batch_stats(sampler_t *s)
{
    const assembly_stats_t *a = assembly_stats(s->asm_);
    const char *reasons[SCREEN_NREASONS];
    long refused[SCREEN_NREASONS];
    for (int r = 0; r < SCREEN_NREASONS; r++)
        reasons[r] = screen_reason_name((screen_reason_t)r), refused[r] = screen_count(s->screen, (screen_reason_t)r);
    metrics_sampler_t m = {.pool_size = pool_size_total(s->pool, NULL, 0),
                           .published = s->counts.published,
                           .stale_dropped = a->stale_dropped,
                           .external_zero_adv_dropped = a->external_zero_adv_dropped,
                           .local_zero_adv_dropped = a->local_zero_adv_dropped,
                           .local_zero_adv_kept = a->local_zero_adv_kept,
                           .wrong_size_dropped = a->wrong_size_dropped,
                           .duplicate_dropped = a->duplicate_dropped,
                           .external_rejected = screen_rejected(s->screen),
                           .external_unscorable = s->counts.external_unscorable,
                           .screen_reasons = reasons,
                           .screen_counts = refused,
                           .n_screen = SCREEN_NREASONS,
                           .fallback_batches = a->fallback_batches,
                           .pool_errors = s->counts.pool_errors,
                           .scored_reward = s->counts.scored_reward,
                           .scored_completions = s->counts.scored_completions,
                           .pool_seconds = s->counts.pool_seconds,
                           .transport_seconds = s->counts.transport_seconds};
    pool_health(s->pool, &m.pool_missing, &m.pool_bad_nodes);
    return metrics_sampler_json(&m);
}

static void send_batch(sampler_t *s)
{
    const assembly_stats_t *a = assembly_stats(s->asm_);
    char *stats = batch_stats(s);
    uint8_t *buf;
    size_t len;
    if (!stats) log_fatal("out of memory (the batch's counters)");
    if (assembly_take(s->asm_, s->at.round, s->at.policy_version, stats, &buf, &len) != 0)
        log_fatal("batch record too large");
    wire_producer_send(s->batches, buf, len);
    rec_free(buf);
    free(stats);
    mem_release();
    if (a->fallback_batches && !s->pool_health.fallback_logged) {
        log_info("round %llu: too few external groups in the pool, filled with local ones",
                 (unsigned long long)s->at.round);
        s->pool_health.fallback_logged = true;
    }
    s->at.round++;
    s->at.slot = 0;
    s->at.pool_dry = false;
    s->at.draws = 0;
    s->counts.pool_seconds = s->counts.transport_seconds = 0;
    s->counts.scored_reward = 0, s->counts.scored_completions = 0;
}

/* one scored group if any came, else a check for a stall */
static void receive_scored(sampler_t *s)
{
    wire_record_t *r = wire_consumer_recv(s->scored, 100);
    if (!r && zclock_mono() - s->at.last_progress > 1000L * s->cfg.stall_seconds) {
        /* a broker killed with records queued loses them: after this
         * long without news, what was sent counts as lost (a late one
         * is still taken, and the learner skips a round it has) */
        log_error("nothing back for %d s: %ld tasks and the batches after round %llu count as lost; going on",
                  s->cfg.stall_seconds, s->at.in_flight, (unsigned long long)s->at.learner_round);
        s->at.in_flight = 0;
        if (s->at.round > s->at.learner_round + 1) s->at.round = s->at.learner_round + 1;
        s->at.last_progress = zclock_mono();
    }
    if (r) {
        s->at.last_progress = zclock_mono();
        on_scored(s, r);
        wire_consumer_ack(s->scored, r->id);
        wire_record_destroy(&r);
    }
}

/* the round's local groups are in and external ones are still missing */
static bool wants_external(const sampler_t *s)
{
    return s->cfg.external_groups > 0 && !s->at.pool_dry &&
           assembly_external(s->asm_) < (size_t)s->cfg.external_groups &&
           assembly_local(s->asm_) >= (size_t)s->cfg.local_groups;
}

static round_state_t round_state(const sampler_t *s)
{
    /* a dry pool lets I + J local groups stand in for the batch */
    if (assembly_ready(s->asm_, s->at.policy_version, s->at.pool_dry))
        return s->at.round <= s->at.learner_round + BATCHES_AHEAD ? ROUND_READY : ROUND_LEARNER_BUSY;
    return wants_external(s) ? ROUND_DRAWING : ROUND_COLLECTING;
}

/* enough questions out that ROUNDS_OF_TASKS_AHEAD rounds' groups are
 * being made or waiting; in lockstep, the round's I once the learner has
 * applied the round before (and one more for each group the local filter
 * drops), and when the pool has run dry, as many more as the batch lacks
 * external groups (local ones stand in for them) */
static void send_tasks(sampler_t *s)
{
    if (s->cfg.lockstep) {
        if (s->at.learner_round + 1 < s->at.round) return;
        long want = s->cfg.local_groups, external = (long)assembly_external(s->asm_);
        if (s->at.pool_dry && external < s->cfg.external_groups) want += s->cfg.external_groups - external;
        while (s->at.in_flight + (long)assembly_local(s->asm_) < want) send_task(s);
        return;
    }
    while (s->at.in_flight + (long)assembly_local(s->asm_) < ROUNDS_OF_TASKS_AHEAD * (long)s->cfg.questions)
        send_task(s);
}

/* SAPO's rounds, until interrupted */
static void sapo_run(sampler_t *s)
{
    while (!zsys_interrupted) {
        sampler_follow_learner(s);
        send_tasks(s);
        receive_scored(s);
        switch (round_state(s)) {
        case ROUND_DRAWING: draw_external(s); break;
        case ROUND_READY: send_batch(s); break;
        case ROUND_COLLECTING:
        case ROUND_LEARNER_BUSY: break;
        }
    }
}

int main(int argc, char **argv)
{
    sampler_t s = {0};
    int rc = config_load(&s.cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("sampler", s.cfg.node);
    zsys_init();
    char err[512];
    if (peak_watch(s.cfg.run, "sampler", err, sizeof err) != 0) log_fatal("%s", err);
    sampler_open_pool(&s);
    sampler_open_streams(&s);
    if (sampler_wait_for_learner(&s)) {
        if (s.cfg.game == GAME_THREE_STAGE) game_run(&s);
        else sapo_run(&s);
    }
    sampler_shut_down(&s);
    return 0;
}
