/* sampler, game three-stage: RL Swarm's game in place of SAPO's round.
 * Every node of the swarm plays the same Q questions in a round (the task
 * mix is seeded by the swarm's name), in three stages; each stage goes to
 * the generators as Q tasks of the stage's family, comes back scored by
 * the verifiers, and goes to the learner as one batch, a GRPO step:
 *   answer    the questions;
 *   critique  the answers shown: this node's best and the peers' (their
 *             answer-stage outputs), the top five by this node's reward;
 *   resolve   the critiques shown: this node's best and the peers'.
 * After the answer and critique stages the node publishes its best
 * completion per question to the pool (a signed stage output,
 * game_output.h), and it reads the peers' when its next stage starts. A
 * peer that has not published yet is left out (the prompt says when
 * nobody is there); nobody waits.
 *
 * The learner counts batches, three a round: the stage of round r is
 * batch 3 (r - 1) + stage + 1. A node that restarts mid-round starts the
 * next round, since its own outputs of the broken one are gone. */
#include <stdio.h>
#include <string.h>

#include "tasks/game.h"
#include "game/game_output.h"
#include "tasks/fam_game.h"
#include "node/metrics.h"
#include "records.h"
#include "sampler.h"
#include "util/log.h"
#include "util/mem.h"

/* peers' outputs read for a stage: more than a prompt shows, so that the
 * five best answers are among them */
#define GAME_PEERS_MAX 16

static const char *const stage_names[GAME_STAGES] = {"answer", "critique", "resolve"};

typedef struct {
    sampler_t *s;
    uint64_t round;                                /* the game round, from 1 */
    game_stage_t stage;                            /* the stage being played */
    int questions;                                 /* Q */
    task_question_t *problems;                     /* Q: the round's problems, drawn from the task mix */
    task_question_t *stage_questions[GAME_STAGES]; /* Q each: the stages' questions, built from the problems */
    void **groups;                                 /* Q: the stage's scored groups, by question */
    size_t *sizes;
    bool *back; /* Q: the question's group came back (scored or not) */
    int n_back;
    bool sent;                /* the stage's tasks are out */
    char **best[GAME_STAGES]; /* Q each: this node's best completion of the stage */
    float *best_reward[GAME_STAGES];
    int peers;                        /* peers whose outputs this stage's prompts show */
    int64_t waiting_since, next_look; /* game-wait: the stage's first look for peers, and its next (ms) */
    double waited;                    /* seconds this stage waited for peers */
    long outputs_published, outputs_rejected;
} game_t;

/* a peer's outputs of the stage before, as this stage's prompts show them */
typedef struct {
    const char *node;
    const char **texts; /* Q: the peer's completion per question, or NULL */
} game_peer_t;

static uint64_t batch_round(const game_t *g) { return 3 * (g->round - 1) + (uint64_t)g->stage + 1; }

static void free_round(game_t *g)
{
    for (int q = 0; q < g->questions; q++) {
        task_question_free(&g->problems[q]);
        for (int k = 0; k < GAME_STAGES; k++) {
            task_question_free(&g->stage_questions[k][q]);
            free(g->best[k][q]);
            g->best[k][q] = NULL;
        }
    }
}

/* the swarm's problems of the round: questions round x Q + q of the mix */
static void draw_problems(game_t *g)
{
    char err[512];
    free_round(g);
    for (int q = 0; q < g->questions; q++) {
        uint64_t index = g->round * (uint64_t)g->questions + (uint64_t)q;
        if (task_mix_draw(g->s->mix, index, &g->problems[q], err, sizeof err) != 0) log_fatal("task mix: %s", err);
        if (game_answer_question(&g->problems[q], g->round, &g->stage_questions[GAME_ANSWER][q], err, sizeof err) != 0)
            log_fatal("game three-stage plays questions with a number for an answer: %s (SAPO_TASK_MIX)", err);
    }
}

/* a peer's output of the stage before, opened and read; false when it is
 * refused (counted, and logged the first time and every 100th) */
static bool read_peer(game_t *g, const pool_entry_t *e, const char **texts)
{
    sampler_t *s = g->s;
    char err[512] = "";
    uint8_t pub[IDENTITY_PUBLIC_BYTES];
    int known = sampler_source_key(s, e->node, pub);
    if (known < 0) return false;
    const uint8_t *rec = NULL;
    size_t rec_len = 0;
    const char *answers[g->questions];
    for (int q = 0; q < g->questions; q++) answers[q] = g->problems[q].answer;
    if (!known) snprintf(err, sizeof err, "no key registered for its node");
    else if (identity_open(pub, e->data, e->len, &rec, &rec_len) != 1)
        snprintf(err, sizeof err, "its signature does not verify under its node's key");
    else if (game_output_read(rec, rec_len, e->node, g->round, g->round * (uint64_t)g->questions, g->questions, answers,
                              (size_t)s->cfg.max_text, texts, err, sizeof err) >= 0)
        return true;
    if (g->outputs_rejected++ % 100 == 0)
        log_error("dropped %s's %s output of round %llu (%ld so far): %s", e->node, stage_names[g->stage - 1],
                  (unsigned long long)g->round, g->outputs_rejected, err);
    return false;
}

/* whether a stage may start with the n peers' outputs read now: every
 * other node the pool asked has one in, or game-wait has passed since the
 * stage first looked (else the next look is due in a quarter second) */
static bool peers_enough(game_t *g, int n)
{
    const sampler_t *s = g->s;
    int64_t now = zclock_mono();
    if (!g->waiting_since) g->waiting_since = now;
    g->waited = (now - g->waiting_since) / 1000.0;
    if (n >= pool_stage_asked(s->pool) || n >= GAME_PEERS_MAX || g->waited >= s->cfg.game_wait) {
        g->waiting_since = 0;
        return true;
    }
    g->next_look = now + 250;
    return false;
}

/* the peers' outputs of the stage before this one, opened and checked once
 * the stage stops waiting for more (game-wait); *got holds their text.
 * How many passed, or -1 while the stage waits */
static int read_peers(game_t *g, pool_entry_t **got, int *n_got, game_peer_t *peers)
{
    sampler_t *s = g->s;
    char err[512];
    int64_t t0 = zclock_mono();
    int n = pool_stage_read(s->pool, s->cfg.node, g->round, (int)g->stage, GAME_PEERS_MAX, got, err, sizeof err);
    s->counts.pool_seconds += (zclock_mono() - t0) / 1000.0;
    *n_got = n > 0 ? n : 0;
    if (n < 0) {
        sampler_pool_failed(s, err);
        g->waiting_since = 0; /* a pool that fails is not waited for */
        return 0;
    }
    sampler_pool_worked(s);
    if (!peers_enough(g, n)) return -1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        peers[k].node = (*got)[i].node;
        peers[k].texts = calloc((size_t)g->questions, sizeof(char *));
        if (peers[k].texts && read_peer(g, &(*got)[i], peers[k].texts)) k++;
        else free(peers[k].texts);
    }
    return k;
}

/* the critique of question q: this node's best answer and the peers',
 * each under its node's student number, with its reward here */
static void critique_question(game_t *g, int q, const game_peer_t *peers, int n_peers)
{
    char err[512];
    game_student_t st[1 + GAME_PEERS_MAX];
    int n = 0;
    if (g->best[GAME_ANSWER][q])
        st[n++] =
            (game_student_t){game_student_id(g->s->cfg.node), g->best[GAME_ANSWER][q], g->best_reward[GAME_ANSWER][q]};
    for (int p = 0; p < n_peers; p++) {
        const char *text = peers[p].texts[q];
        int id = game_student_id(peers[p].node);
        bool taken = false;
        for (int i = 0; i < n; i++) taken |= st[i].id == id;
        if (!text || taken) continue;
        bool formatted;
        double r = task_score_completion(text, &g->stage_questions[GAME_ANSWER][q], &formatted, err, sizeof err);
        st[n++] = (game_student_t){id, text, r < 0 ? 0 : r};
    }
    if (game_critique_question(&g->problems[q], g->round, st, n, &g->stage_questions[GAME_CRITIQUE][q], err,
                               sizeof err) != 0)
        log_fatal("critique of round %llu: %s", (unsigned long long)g->round, err);
}

/* the resolution of question q: this node's best critique, then the peers' */
static void resolve_question(game_t *g, int q, const game_peer_t *peers, int n_peers)
{
    char err[512];
    const char *critiques[1 + GAME_PEERS_MAX];
    int n = 0;
    if (g->best[GAME_CRITIQUE][q]) critiques[n++] = g->best[GAME_CRITIQUE][q];
    for (int p = 0; p < n_peers; p++)
        if (peers[p].texts[q]) critiques[n++] = peers[p].texts[q];
    if (game_resolve_question(&g->problems[q], g->round, critiques, n, &g->stage_questions[GAME_RESOLVE][q], err,
                              sizeof err) != 0)
        log_fatal("resolution of round %llu: %s", (unsigned long long)g->round, err);
}

/* the stage's prompts: from the round's problems, or from this node's
 * and its peers' outputs of the stage before; false when the stage waits
 * for more peers (game-wait) */
static bool build_stage(game_t *g)
{
    g->waited = 0;
    if (g->stage == GAME_ANSWER) {
        draw_problems(g);
        g->peers = 0;
        return true;
    }
    pool_entry_t *got = NULL;
    int n_got = 0;
    game_peer_t peers[GAME_PEERS_MAX];
    int k = read_peers(g, &got, &n_got, peers);
    bool go = k >= 0;
    g->peers = go ? k : 0;
    for (int q = 0; go && q < g->questions; q++) {
        if (g->stage == GAME_CRITIQUE) critique_question(g, q, peers, g->peers);
        else resolve_question(g, q, peers, g->peers);
    }
    for (int p = 0; p < g->peers; p++) free(peers[p].texts);
    pool_entries_free(got, n_got);
    return go;
}

/* question q of the stage, to the generators (again, after a stall) */
static void send_stage_task(game_t *g, int q)
{
    sampler_t *s = g->s;
    const task_question_t *e = &g->stage_questions[g->stage][q];
    char *meta = cJSON_PrintUnformatted(e->metadata);
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(e->metadata, "source_dataset");
    uint64_t b = batch_round(g);
    rec_task_t t = {.task_id = b * (uint64_t)g->questions + (uint64_t)q,
                    .family = cJSON_IsString(fam) ? fam->valuestring : "",
                    .question = e->question,
                    .answer = e->answer,
                    .metadata_json = meta,
                    .seed = s->cfg.seed,
                    .index = g->round * (uint64_t)g->questions + (uint64_t)q,
                    .node = s->cfg.node,
                    .round = b};
    uint8_t *buf;
    size_t len;
    if (rec_task_build(&t, &buf, &len) == 0) wire_producer_send(s->tasks, buf, len);
    else
        log_error("round %llu, %s, question %d: task record too large", (unsigned long long)g->round,
                  stage_names[g->stage], q);
    rec_free(buf);
    free(meta);
}

static void start_stage(game_t *g)
{
    if (!build_stage(g)) return;
    g->s->at.last_progress = zclock_mono(); /* a wait for peers is no stall */
    for (int q = 0; q < g->questions; q++) {
        g->back[q] = false;
        send_stage_task(g, q);
    }
    g->n_back = 0;
    g->sent = true;
}

/* a group of ours, back from a verifier: kept when it is of this stage */
static void on_scored(game_t *g, const wire_record_t *r)
{
    rec_group_view_t v;
    char err[512];
    void *buf = malloc(r->size ? r->size : 1);
    memcpy(buf, r->data, r->size);
    uint64_t first = batch_round(g) * (uint64_t)g->questions;
    if (rec_group_view(buf, r->size, &v, err, sizeof err) != 0) log_error("dropped a scored record: %s", err);
    else if (v.r.external) log_error("dropped a scored record: an external group (game mode draws none)");
    else if (v.r.task.task_id >= first && v.r.task.task_id - first < (uint64_t)g->questions &&
             !g->back[v.r.task.task_id - first]) {
        int q = (int)(v.r.task.task_id - first);
        g->back[q] = true;
        g->n_back++;
        if (!v.r.scored) {
            log_error("round %llu, %s: a verifier could not score question %d (a build without the game's "
                      "families?); the stage goes on without it",
                      (unsigned long long)g->round, stage_names[g->stage], q);
        } else {
            g->groups[q] = buf, g->sizes[q] = r->size;
            return;
        }
    }
    /* else a late group of an earlier stage, or one sent again */
    free(buf);
}

/* the stage's batch for the learner, with the game's counters */
static void send_stage_batch(game_t *g, const rec_group_view_t *views, int n)
{
    sampler_t *s = g->s;
    double reward = 0;
    long completions = 0;
    for (int i = 0; i < n; i++)
        for (size_t c = 0; c < views[i].r.n_completions; c++) {
            rec_completion_t comp;
            rec_group_completion(&views[i], c, &comp);
            reward += comp.reward, completions++;
        }
    metrics_game_t m = {.round = g->round,
                        .stage = stage_names[g->stage],
                        .peers = g->peers,
                        .waited = g->waited,
                        .outputs_published = g->outputs_published,
                        .outputs_rejected = g->outputs_rejected,
                        .pool_errors = s->counts.pool_errors,
                        .scored_reward = reward,
                        .scored_completions = completions,
                        .pool_seconds = s->counts.pool_seconds};
    char *stats = metrics_game_json(&m);
    if (!stats) log_fatal("out of memory (the batch's counters)");
    rec_batch_t b = {.node = s->cfg.node,
                     .round = batch_round(g),
                     .policy_version = s->at.policy_version,
                     .local_count = (uint32_t)n,
                     .stats_json = stats};
    uint8_t *buf;
    size_t len;
    if (batch_build(&b, views, (size_t)n, &buf, &len) != 0) log_fatal("batch record too large");
    wire_producer_send(s->batches, buf, len);
    rec_free(buf);
    free(stats);
    s->counts.pool_seconds = 0;
}

/* this node's best completion per question, kept for its next stage and
 * published (signed) for its peers' */
static void share_best(game_t *g, const rec_group_view_t *views, const int *question, int n)
{
    sampler_t *s = g->s;
    for (int i = 0; i < n; i++) {
        int b = game_best(&views[i]);
        if (b < 0) continue;
        rec_completion_t c;
        rec_group_completion(&views[i], (size_t)b, &c);
        g->best[g->stage][question[i]] = strdup(c.text ? c.text : "");
        g->best_reward[g->stage][question[i]] = c.reward;
    }
    if (g->stage == GAME_RESOLVE || n == 0 || !sampler_registered(s)) return;
    const rec_group_view_t *ptrs[n];
    for (int i = 0; i < n; i++) ptrs[i] = &views[i];
    char err[512];
    uint8_t *rec;
    size_t len, sealed_len;
    if (game_output_build(s->cfg.node, g->round, s->at.policy_version, ptrs, n, &rec, &len, err, sizeof err) != 0) {
        log_error("%s", err);
        return;
    }
    uint8_t *sealed = identity_seal(s->id, rec, len, &sealed_len);
    int64_t t0 = zclock_mono();
    if (sealed &&
        pool_stage_publish(s->pool, s->cfg.node, g->round, (int)g->stage + 1, sealed, sealed_len, err, sizeof err) == 0)
        g->outputs_published++, sampler_pool_worked(s);
    else if (sealed) sampler_pool_failed(s, err);
    s->counts.pool_seconds += (zclock_mono() - t0) / 1000.0;
    free(sealed);
    rec_free(rec);
}

/* every question is back: the stage's step, its output, the next stage */
static void finish_stage(game_t *g)
{
    rec_group_view_t views[g->questions];
    int question[g->questions], n = 0;
    char err[512];
    for (int q = 0; q < g->questions; q++) {
        if (g->groups[q] && rec_group_view(g->groups[q], g->sizes[q], &views[n], err, sizeof err) == 0)
            question[n++] = q;
    }
    share_best(g, views, question, n);
    if (n > 0) send_stage_batch(g, views, n);
    for (int q = 0; q < g->questions; q++) {
        free(g->groups[q]);
        g->groups[q] = NULL;
    }
    mem_release();
    g->s->at.round = batch_round(g) + 1;
    g->sent = false;
    if (g->stage == GAME_RESOLVE) g->round++, g->stage = GAME_ANSWER;
    else g->stage++;
}

/* one scored group if any came; after stall-seconds without one, the
 * stage's missing questions go out again */
static void receive(game_t *g)
{
    sampler_t *s = g->s;
    wire_record_t *r = wire_consumer_recv(s->scored, 100);
    if (r) {
        s->at.last_progress = zclock_mono();
        on_scored(g, r);
        wire_consumer_ack(s->scored, r->id);
        wire_record_destroy(&r);
    } else if (g->n_back < g->questions && zclock_mono() - s->at.last_progress > 1000L * s->cfg.stall_seconds) {
        log_error("nothing back for %d s: round %llu's %s questions still missing go out again", s->cfg.stall_seconds,
                  (unsigned long long)g->round, stage_names[g->stage]);
        for (int q = 0; q < g->questions; q++)
            if (!g->back[q]) send_stage_task(g, q);
        s->at.last_progress = zclock_mono();
    }
}

static void game_init(game_t *g, sampler_t *s)
{
    int Q = s->cfg.questions;
    *g = (game_t){.s = s, .questions = Q, .stage = GAME_ANSWER};
    /* the round after the learner's last batch, from its first stage */
    g->round = (s->at.learner_round + 2) / 3 + 1;
    g->problems = calloc((size_t)Q, sizeof *g->problems);
    g->groups = calloc((size_t)Q, sizeof *g->groups);
    g->sizes = calloc((size_t)Q, sizeof *g->sizes);
    g->back = calloc((size_t)Q, sizeof *g->back);
    for (int k = 0; k < GAME_STAGES; k++) {
        g->stage_questions[k] = calloc((size_t)Q, sizeof **g->stage_questions);
        g->best[k] = calloc((size_t)Q, sizeof **g->best);
        g->best_reward[k] = calloc((size_t)Q, sizeof **g->best_reward);
    }
    log_info("game three-stage: starting at round %llu (%d questions, L=%d; a batch per stage, from %llu)",
             (unsigned long long)g->round, Q, s->cfg.completions, (unsigned long long)batch_round(g));
}

static void game_free(game_t *g)
{
    free_round(g);
    for (int q = 0; q < g->questions; q++) free(g->groups[q]);
    for (int k = 0; k < GAME_STAGES; k++) free(g->stage_questions[k]), free(g->best[k]), free(g->best_reward[k]);
    free(g->problems), free(g->groups), free(g->sizes), free(g->back);
}

void game_run(sampler_t *s)
{
    game_t g;
    game_init(&g, s);
    while (!zsys_interrupted) {
        sampler_follow_learner(s);
        if (!g.sent && zclock_mono() >= g.next_look) start_stage(&g);
        receive(&g);
        if (g.sent && g.n_back == g.questions && batch_round(&g) <= s->at.learner_round + BATCHES_AHEAD)
            finish_stage(&g);
    }
    game_free(&g);
}
