/* What both kinds of round use (sampler.h): the pool, the node's
 * identity in it, the broker's streams and the learner's notices. */
#include "sampler.h"

#include <string.h>

#include "game/game_output.h"
#include "util/fs.h"
#include "util/log.h"
#include "node/version.h"

/* the Redis server an error names ("redis HOST:PORT: ..."), as a length
 * into err from *at; 0 where it names none */
static size_t server_named(const char *err, const char **at)
{
    const char *r = strstr(err, "redis ");
    const char *end = r ? strstr(r + 6, ": ") : NULL;
    *at = r;
    return end ? (size_t)(end - r) : 0;
}

/* err is the outage last logged going on: the same error, or another
 * from the same server (a master killed answers "Server closed the
 * connection", then "Connection refused" while its replica takes over) */
static bool same_outage(const char *err, const char *last)
{
    if (strcmp(err, last) == 0) return true;
    const char *a, *b;
    size_t na = server_named(err, &a), nb = server_named(last, &b);
    return na && na == nb && memcmp(a, b, na) == 0;
}

/* A pool failure is logged once per outage: a line when calls start to
 * fail (unless the outage logged last goes on, within a minute of the
 * last failure: a call that fails while others work), and one when they
 * work again; the node goes on with its own groups
 * meanwhile, and the pool reconnects with backoff. */
void sampler_pool_failed(sampler_t *s, const char *err)
{
    s->counts.pool_errors++;
    s->pool_health.registered = false; /* a Redis that comes back may have lost our key */
    bool quiet = s->pool_health.failing++ > 0 || same_outage(err, s->pool_health.last_error);
    s->pool_health.failed_at = zclock_mono();
    if (!quiet) {
        log_error("pool: %s (training on local groups until it is back)", err);
        snprintf(s->pool_health.last_error, sizeof s->pool_health.last_error, "%s", err);
        s->pool_health.outage_logged = true;
    }
}

void sampler_pool_worked(sampler_t *s)
{
    /* what is wrong while the rest works (a cluster's bad seed, slots
     * served by no master): a line when it changes */
    const char *notice = pool_notice(s->pool);
    if (strcmp(notice, s->pool_health.notice) != 0) {
        if (notice[0]) log_error("pool: %s", notice);
        else log_info("pool: every seed answers and every slot is served");
        snprintf(s->pool_health.notice, sizeof s->pool_health.notice, "%s", notice);
    }
    if (s->pool_health.failing && s->pool_health.outage_logged) {
        log_info("pool works again after %ld failed calls", s->pool_health.failing);
        s->pool_health.outage_logged = false;
    }
    s->pool_health.failing = 0;
    if (s->pool_health.last_error[0] && zclock_mono() - s->pool_health.failed_at > 60000)
        s->pool_health.last_error[0] = '\0';
}

/* Our public key under our node id, before anything is published: a
 * Redis restarted empty learns it again; an id held by another key ends
 * the sampler (a node may not take an existing id). */
bool sampler_registered(sampler_t *s)
{
    if (s->pool_health.registered) return true;
    char err[512];
    int rc = pool_register_key(s->pool, s->cfg.node, identity_public(s->id), err, sizeof err);
    if (rc == -2) log_fatal("%s: choose another node id (SAPO_NODE) or use that id's key file (SAPO_KEY)", err);
    if (rc < 0) {
        sampler_pool_failed(s, err);
        return false;
    }
    sampler_pool_worked(s);
    s->pool_health.registered = true;
    return true;
}

/* The key of the node an entry is stored under: 1 found (pub set), 0 none
 * or no node id (the screen counts it), -1 when Redis failed. */
int sampler_source_key(sampler_t *s, const char *node, uint8_t pub[IDENTITY_PUBLIC_BYTES])
{
    char err[512];
    if (pool_node_ok(node, err, sizeof err) != 0) return 0;
    int rc = pool_node_key(s->pool, node, pub, err, sizeof err);
    if (rc < 0) sampler_pool_failed(s, err);
    return rc;
}

/* the task mix, the pool and this node's identity, registered in it */
void sampler_open_pool(sampler_t *s)
{
    char err[512];
    uint64_t mix_seed = s->cfg.game == GAME_THREE_STAGE ? game_swarm_seed(s->cfg.swarm) : s->cfg.seed;
    s->mix = task_mix_new(s->cfg.task_mix[0] ? s->cfg.task_mix : NULL, mix_seed, err, sizeof err);
    if (!s->mix) log_fatal("task mix (SAPO_TASK_MIX): %s", err);
    s->pool = pool_new(s->cfg.redis, s->cfg.swarm, s->cfg.pool_max, err, sizeof err);
    if (!s->pool) log_fatal("pool %s: %s", s->cfg.redis, err);
    pool_limit_record(s->pool, (size_t)s->cfg.max_record + IDENTITY_SIGNATURE_BYTES);
    pool_window(s->pool, s->cfg.pool_window, s->cfg.pool_window_seconds);
    pool_deadline(s->pool, s->cfg.pool_deadline);
    pool_strategy(s->pool, s->cfg.pool_strategy);
    if (pool_tls(s->pool, s->cfg.tls_ca, s->cfg.tls_cert, s->cfg.tls_key, s->cfg.tls_name, err, sizeof err) != 0)
        log_fatal("pool %s: %s", pool_where(s->pool), err);
    if (pool_clear_remote(s->pool))
        log_error("pool: %s is another host, and the link to it is not encrypted: its password and every "
                  "completion cross the network in clear text (keep the pool on a network you trust; "
                  "docs/security.md)",
                  pool_where(s->pool));
    if (fs_mkdirs(s->cfg.run) != 0) log_fatal("run folder %s: cannot create", s->cfg.run);
    if (!(s->id = identity_load(s->cfg.key, err, sizeof err))) log_fatal("%s (SAPO_KEY)", err);
    char fp[IDENTITY_FINGERPRINT_HEX + 1];
    identity_fingerprint(identity_public(s->id), fp, sizeof fp);
    log_info("identity: key %s, fingerprint %s", s->cfg.key, fp);
    /* a taken node id ends the sampler now; an unreachable Redis is retried before publishing */
    sampler_registered(s);
}

/* the broker's streams, the batch assembly and the screen of drawn entries */
void sampler_open_streams(sampler_t *s)
{
    char err[512];
    endpoints_t ep;
    if (endpoints_from_base(s->cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    if (!(s->tasks = wire_producer_new(&ep, STREAM_TASKS, err, sizeof err)) ||
        !(s->batches = wire_producer_new(&ep, STREAM_BATCHES, err, sizeof err)) ||
        !(s->scored = wire_consumer_new(&ep, STREAM_SCORED, 64, err, sizeof err)) ||
        !(s->notices = wire_subscriber_new(&ep, err, sizeof err)))
        log_fatal("%s", err);
    s->asm_ = assembly_new(&s->cfg);
    s->rule = (reward_rule_t){s->cfg.reward_floor, s->cfg.format_reward};
    screen_limits_t lim = {.node = s->cfg.node,
                           .completions = s->cfg.completions,
                           .max_record = (size_t)s->cfg.max_record,
                           .max_text = (size_t)s->cfg.max_text,
                           .dup_window = 4 * s->cfg.pool_max};
    if (!(s->screen = screen_new(&lim))) log_fatal("out of memory (screen)");
}

/* rounds continue from the learner's: its first notice says where; false
 * when interrupted before it came */
bool sampler_wait_for_learner(sampler_t *s)
{
    s->at.policy_version = UINT64_MAX;
    log_info("waiting for the learner's policy notice");
    while (!zsys_interrupted && s->at.policy_version == UINT64_MAX)
        version_follow(s->notices, 1000, NULL, &s->at.policy_version, &s->at.learner_round, NULL, 0);
    if (zsys_interrupted) return false;
    s->at.round = s->at.learner_round + 1;
    s->at.next_task = s->at.round * (uint64_t)s->cfg.questions;
    s->at.last_progress = zclock_mono();
    log_info("starting at round %llu (I=%d local, J=%d external, L=%d)", (unsigned long long)s->at.round,
             s->cfg.local_groups, s->cfg.external_groups, s->cfg.completions);
    return true;
}

/* the learner's latest policy version and round, if a notice came */
void sampler_follow_learner(sampler_t *s)
{
    uint64_t learner_before = s->at.learner_round;
    int notice = version_follow(s->notices, 0, NULL, &s->at.policy_version, &s->at.learner_round, NULL, 0);
    if (notice == 1) s->at.last_progress = zclock_mono();
    if (notice == 1 && s->at.learner_round < learner_before)
        /* the learner restarted from a checkpoint: the broker gives it
         * back the batches it applied after that, and it trains them
         * again; the rounds here go on (new batches wait until it has
         * caught up, and after stall-seconds count as lost) */
        log_info("learner is back at round %llu: it trains rounds %llu..%llu again from their batches",
                 (unsigned long long)s->at.learner_round, (unsigned long long)s->at.learner_round + 1,
                 (unsigned long long)s->at.round - 1);
}

void sampler_shut_down(sampler_t *s)
{
    log_info("stopping at round %llu: %ld groups published, %ld external groups scored",
             (unsigned long long)s->at.round, s->counts.published, s->counts.external_scoring.scored);
    screen_destroy(&s->screen);
    assembly_destroy(&s->asm_);
    wire_subscriber_destroy(&s->notices);
    wire_consumer_destroy(&s->scored);
    wire_producer_destroy(&s->batches);
    wire_producer_destroy(&s->tasks);
    pool_destroy(&s->pool);
    identity_destroy(&s->id);
    task_mix_destroy(&s->mix);
}
