/* The sampler's state and what both kinds of round use: the pool and the
 * node's identity in it, the broker's streams, and the learner's notices.
 * SAPO's round is main.c, the three-stage game's game.c. */
#ifndef SAPO_SAMPLER_H
#define SAPO_SAMPLER_H

#include <czmq.h>

#include "assembly.h"
#include "node/config.h"
#include "util/identity.h"
#include "node/score.h"
#include "screen.h"
#include "pool/pool.h"
#include "tasks/task.h"
#include "wire/wire.h"

/* Batches ahead of the learner: the one it trains and one queued behind
 * it; more would train groups further behind the policy. */
#define BATCHES_AHEAD 2

/* Where the node's rounds stand, and its learner's. */
typedef struct {
    uint64_t round;          /* the round whose batch is being assembled */
    uint64_t policy_version; /* the learner's latest */
    uint64_t learner_round;  /* the last round the learner applied */
    uint64_t next_task;      /* the next question's number in the sequence (overlap) */
    uint64_t slot;           /* lockstep: questions drawn for this round so far */
    long in_flight;          /* own tasks sent, not yet back scored */
    int64_t last_progress;   /* when a scored group or a learner notice last came */
    int draws;               /* pool draws this round */
    bool pool_dry;           /* the pool has nothing more for us this round */
} sampler_round_t;

/* The pool as the sampler has found it: an outage is logged once, when
 * calls start to fail and when they work again. */
typedef struct {
    bool registered;      /* our key is in the pool's Redis as far as we know */
    long failing;         /* failed pool calls since the last that worked */
    char last_error[512]; /* the last pool error logged */
    int64_t failed_at;    /* when a pool call last failed */
    bool outage_logged;   /* a failure was logged since calls last worked */
    bool fallback_logged; /* a batch's local groups stood in for external ones, logged once */
    char notice[1024];    /* the pool's notice (pool_notice) as last logged */
} sampler_pool_health_t;

/* What a batch's counters (its stats_json) report: since the sampler
 * started, then since the last batch. */
typedef struct {
    long published, pool_errors, external_unscorable;
    score_stats_t external_scoring;
    double scored_reward;     /* sum of the rewards of own completions scored since the last batch */
    long scored_completions;  /* and their count: the reward before local-filter picks groups */
    double pool_seconds;      /* in pool calls since the last batch */
    double transport_seconds; /* generator done -> sampler, less verification, since the last batch */
} sampler_counters_t;

typedef struct {
    config_t cfg;
    task_mix_t *mix;
    assembly_t *asm_;
    screen_t *screen; /* checks every record drawn from the pool */
    pool_t *pool;
    identity_t *id;
    wire_producer_t *tasks, *batches;
    wire_consumer_t *scored;
    wire_subscriber_t *notices;
    reward_rule_t rule; /* how external groups are scored here, as the verifier scores local ones */
    sampler_round_t at;
    sampler_pool_health_t pool_health;
    sampler_counters_t counts;
} sampler_t;

/* A failed pool call: logged once per outage. */
void sampler_pool_failed(sampler_t *s, const char *err);
/* A pool call that worked: ends an outage's logging. */
void sampler_pool_worked(sampler_t *s);
/* Whether our key is in the pool (registering it if not). */
bool sampler_registered(sampler_t *s);
/* The key of the node an entry is stored under: 1 found (pub set), 0 none
 * or no node id, -1 when Redis failed. */
int sampler_source_key(sampler_t *s, const char *node, uint8_t pub[IDENTITY_PUBLIC_BYTES]);
/* The task mix, the pool and this node's identity, registered in it. In
 * game mode the mix is seeded by the swarm's name, so that every node
 * plays the same questions in a round. */
void sampler_open_pool(sampler_t *s);
/* The broker's streams, the batch assembly and the screen of drawn entries. */
void sampler_open_streams(sampler_t *s);
/* Waits for the learner's first notice; false when interrupted first. */
bool sampler_wait_for_learner(sampler_t *s);
/* The learner's latest policy version and round, if a notice came. */
void sampler_follow_learner(sampler_t *s);
void sampler_shut_down(sampler_t *s);

/* The three-stage game's rounds (game.c), until interrupted. */
void game_run(sampler_t *s);

#endif
