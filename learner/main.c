/* learner: one per node, holding the CPU or a GPU. Takes each training
 * batch (I local + J external groups), re-encodes it with its own tokenizer,
 * takes a GRPO step, saves the new policy version and announces it to the
 * generators; checkpoints every N rounds and resumes from the last one,
 * training again the batches applied after it (the broker keeps a batch
 * until a checkpoint holds its step).
 * Each round's metrics are a line of <run>/metrics.jsonl and, by the
 * tensorboard setting, an event of its TensorBoard file in <run>/tb/.
 * Consumes the batches stream, publishes the notices stream.
 * `learner warmstart` makes the base model RL starts from (the tiny one
 * trained from nothing, or a chat model's format warm start), `learner
 * init` a random one of any shape (warmstart.h), `learner start` prints
 * the folder or file RL starts from, `learner budget` how the memory
 * setting divides among the node's processes (or, status 1, the least it
 * needs). */
#include <czmq.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "node/budget.h"
#include "node/config.h"
#include "train.h"
#include "node/metrics.h"
#include "node/policy.h"
#include "node/tensorboard.h"
#include "records.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/nice.h"
#include "util/peak.h"
#include "warmstart.h"
#include "wire/wire.h"

/* saves version v for the generators and announces it */
static void announce(wire_publisher_t *pub, const config_t *cfg, const policy_t *pol, const checkpoint_state_t *st)
{
    char dir[PATH_MAX], old[PATH_MAX], err[512];
    snprintf(dir, sizeof dir, "%s/policy", cfg->run);
    if (fs_mkdirs(dir) != 0) log_fatal("%s: cannot create", dir);
    policy_version_dir(cfg->run, st->policy_version, dir, sizeof dir);
    policy_version_t v = {.round = st->round, .policy_version = st->policy_version};
    if (policy_save(pol, dir, cfg->policy_dtype == POLICY_BF16, &v, err, sizeof err) != 0)
        log_fatal("policy version %llu: %s", (unsigned long long)st->policy_version, err);
    if (st->policy_version >= (uint64_t)cfg->keep_versions) {
        /* generators load a version within moments of its notice */
        policy_version_dir(cfg->run, st->policy_version - (uint64_t)cfg->keep_versions, old, sizeof old);
        fs_rm_tree(old);
    }
    rec_policy_t n = {.node = cfg->node,
                      .policy_version = st->policy_version,
                      .round = st->round,
                      .checkpoint = dir,
                      .created_ms = (uint64_t)zclock_time()};
    uint8_t *buf;
    size_t len;
    if (rec_policy_build(&n, &buf, &len) != 0 || wire_publisher_send(pub, buf, len, err, sizeof err) != 0)
        log_error("policy version %llu not announced: %s", (unsigned long long)st->policy_version, err);
    rec_free(buf);
}

/* ids of the batches applied since the last checkpoint */
typedef struct {
    uint64_t *id;
    int n, cap;
} held_t;

static void held_add(held_t *h, uint64_t id)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 16;
        uint64_t *grown = realloc(h->id, (size_t)h->cap * sizeof *grown);
        if (!grown) log_fatal("out of memory");
        h->id = grown;
    }
    h->id[h->n++] = id;
}

/* a checkpoint holds their steps: the broker may forget them */
static void held_ack(held_t *h, wire_consumer_t *c)
{
    for (int i = 0; i < h->n; i++) wire_consumer_ack(c, h->id[i]);
    h->n = 0;
}

/* one node's learner: its policy, optimizer, streams and where it stands */
typedef struct {
    config_t cfg;
    checkpoint_state_t st;
    policy_t *pol, *ref;
    adamw_t *opt;
    train_t *train;
    wire_publisher_t *pub;
    wire_consumer_t *batches;
    held_t held;
    int hold; /* batches held until a checkpoint; 0: each acked at once */
    FILE *metrics;
    tb_t *tb;                        /* the same lines as TensorBoard events, or NULL */
    char start[PATH_MAX];            /* what RL started from (policy_start) */
    uint64_t logged, logged_version; /* the last round in metrics.jsonl */
} learner_t;

/* `learner warmstart` and `learner init` make a model instead of serving a node */
static int run_mode(const config_t *cfg, int argc, char **argv)
{
    if (strcmp(argv[1], "warmstart") == 0) {
        log_watch("warm start", cfg->progress_seconds);
        int rc = warmstart(cfg);
        log_watch_stop();
        return rc;
    }
    if (strcmp(argv[1], "init") == 0) {
        if (argc != 4) log_fatal("usage: learner init CONFIG_JSON OUT_FOLDER");
        return init_random(argv[2], argv[3], cfg->seed);
    }
    if (strcmp(argv[1], "settings") == 0) {
        /* for manifests: every setting as this learner runs it */
        char *json = config_json(cfg);
        if (!json) log_fatal("out of memory");
        printf("%s\n", json);
        free(json);
        return 0;
    }
    if (strcmp(argv[1], "budget") == 0) {
        /* for swarm.sh start: the memory budget's plan, or why it cannot be */
        char path[PATH_MAX], err[1024], line[1024];
        budget_t b;
        policy_t *pol = NULL;
        if (policy_start(cfg, path, sizeof path, err, sizeof err) != 0 ||
            !(pol = policy_open(path, cfg->system_prompt, err, sizeof err)) ||
            policy_place(pol, cfg, false, err, sizeof err) != 0 ||
            budget_for(cfg, pol, BUDGET_LEARNER, &b, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            policy_destroy(&pol);
            return 1;
        }
        budget_describe(&b, cfg, line, sizeof line);
        printf("%s\n", line);
        policy_destroy(&pol);
        return 0;
    }
    if (strcmp(argv[1], "start") == 0) {
        /* for scripts: what RL starts from, as the learner resolves it */
        char path[PATH_MAX], err[512];
        if (policy_start(cfg, path, sizeof path, err, sizeof err) != 0) log_fatal("%s", err);
        printf("%s\n", path);
        return 0;
    }
    log_fatal("unknown mode '%s' (warmstart, init, start, settings, budget, or no mode to serve a node)", argv[1]);
}

/* the policy from the last checkpoint, else the base model, with its
 * optimizer state and the reference model */
static void open_model(learner_t *l)
{
    const config_t *cfg = &l->cfg;
    char dir[PATH_MAX], path[PATH_MAX + 32], err[512];
    int have = checkpoint_latest(cfg->run, dir, sizeof dir, &l->st, err, sizeof err);
    if (have < 0) log_fatal("%s", err);
    char *start = l->start;
    if (policy_start(cfg, start, sizeof l->start, err, sizeof err) != 0) log_fatal("%s", err);
    const char *source = have == 0 ? dir : start;
    l->pol = policy_open(source, cfg->system_prompt, err, sizeof err);
    if (!l->pol)
        log_fatal("%s%s", err,
                  strcmp(cfg->model, "tiny") == 0 && have ? " (make the base model: bin/learner warmstart)" : "");
    /* AdamW's moments: the checkpoint's, else the warm start's when asked
     * for, else fresh */
    bool from_base = have != 0 && cfg->warmstart_optimizer && strcmp(cfg->model, "tiny") == 0;
    snprintf(path, sizeof path, "%s/optimizer.bin", have == 0 ? dir : cfg->base);
    if (from_base && access(path, R_OK) != 0)
        log_fatal("%s: no warm start optimizer state (SAPO_WARMSTART_OPTIMIZER=1; a base model made before it was "
                  "saved: delete %s and run bin/learner warmstart)",
                  path, cfg->base);
    bool bf16 = cfg->moments == MOMENTS_BF16;
    if (bf16 && strncmp(cfg->backend, "cuda", 4) == 0)
        log_fatal("moments (SAPO_MOMENTS) bf16: a learner on %s keeps its moments in fp32 (bf16 moments step on the "
                  "CPU only)",
                  cfg->backend);
    size_t n = model_num_params(l->pol->model);
    l->opt = have == 0 || from_base ? adamw_load(path, n) : bf16 ? adamw_new_bf16(n) : adamw_new(n);
    if (!l->opt || (bf16 && adamw_to_bf16(l->opt) != 0)) log_fatal("optimizer state %s: see the line above", path);
    l->ref = cfg->beta > 0 ? policy_open(start, cfg->system_prompt, err, sizeof err) : NULL;
    if (cfg->beta > 0 && !l->ref) log_fatal("reference model: %s", err);
    if (policy_place(l->pol, cfg, false, err, sizeof err) != 0 ||
        (l->ref && policy_place(l->ref, cfg, true, err, sizeof err) != 0))
        log_fatal("%s", err);
    budget_t budget;
    if (budget_for(cfg, l->pol, BUDGET_LEARNER, &budget, err, sizeof err) != 0) log_fatal("%s", err);
    if (l->ref) model_set_recompute(l->ref->model, true); /* no backward pass: one layer's activations do */
    char line[1024];
    budget_describe(&budget, cfg, line, sizeof line);
    log_info("%s", line);
    l->train = train_new(l->pol, l->ref, cfg, l->opt, err, sizeof err);
    if (!l->train) log_fatal("%s", err);
    train_set_budget(l->train, budget.micro_batch, budget.total ? budget.learner - budget.learner_fixed : 0);
    log_info("policy %s from %s at round %llu, version %llu", l->pol->name, source, (unsigned long long)l->st.round,
             (unsigned long long)l->st.policy_version);
    log_info("disk: at most %.3g GB of weights and moments in %s (%d policy versions in %s and %d checkpoints, one "
             "more of each while it is written)",
             checkpoint_disk_bytes(n, cfg->keep_versions, cfg->policy_dtype == POLICY_BF16, cfg->keep_checkpoints) /
                 1e9,
             cfg->run, cfg->keep_versions, cfg->policy_dtype == POLICY_BF16 ? "bf16" : "fp32", cfg->keep_checkpoints);
}

/* the policy publisher, the batches consumer and the metrics file */
static void open_streams(learner_t *l)
{
    const config_t *cfg = &l->cfg;
    char path[PATH_MAX + 32], err[512];
    endpoints_t ep;
    if (endpoints_from_base(cfg->broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    l->pub = wire_publisher_new(&ep, err, sizeof err);
    /* A batch is acked only once a checkpoint holds its step: until then
     * the broker keeps it, and gives it back to a learner restarted from
     * the checkpoint before, which trains it again. So a killed learner
     * loses no batch, only its steps since the checkpoint; the credit
     * leaves room for the batch the sampler queues behind them. */
    l->hold = cfg->checkpoint_every > 0 ? cfg->checkpoint_every : 0;
    l->batches = l->pub ? wire_consumer_new(&ep, STREAM_BATCHES, l->hold + 2, err, sizeof err) : NULL;
    if (!l->batches) log_fatal("%s", err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->run);
    /* rounds logged after the checkpoint resumed from come back from the
     * broker and are trained again (not logged again); those that do not
     * (a broker killed too) are lost, counted in the next metrics line */
    l->logged = checkpoint_last_logged_round(path, &l->logged_version);
    if (l->logged > l->st.round)
        log_info("rounds %llu..%llu were trained after the checkpoint; training them again from their batches",
                 (unsigned long long)l->st.round + 1, (unsigned long long)l->logged);
    /* a line half written when the learner was killed: the next starts whole */
    long cut = fs_cut_partial_line(path);
    if (cut > 0) log_info("%s: cut the %ld bytes of a line left partial", path, cut);
    l->metrics = cut >= 0 ? fopen(path, "a") : NULL;
    if (!l->metrics) log_fatal("%s: cannot append", path);
    l->tb = tensorboard_open(cfg, "learner");
    tensorboard_manifest(&l->tb, cfg, l->pol->name, l->start, l->st.round);
}

/* appends the round's metrics line; `before` is the state the step was
 * taken from */
static void log_metrics(learner_t *l, const rec_batch_view_t *b, const train_stats_t *ts, double secs,
                        checkpoint_state_t before)
{
    peak_table_t peak;
    peak_note();
    peak_read(l->cfg.run, &peak);
    metrics_round_t round = {
        .node = l->cfg.node,
        .model = l->pol->name,
        .model_name = l->cfg.model,
        .policy_version = l->st.policy_version,
        .train_seconds = secs,
        .rounds_lost = l->logged > before.round ? l->logged - before.round : 0,
        .versions_lost = l->logged_version > before.policy_version ? l->logged_version - before.policy_version : 0,
        .rounds_skipped = l->st.round - before.round - 1,
        .peak = &peak,
    };
    char *line = metrics_line(&round, b, ts);
    fprintf(l->metrics, "%s\n", line);
    fflush(l->metrics);
    tensorboard_line(&l->tb, line, NULL, metrics_tb_group);
    free(line);
    l->logged = l->st.round;
    l->logged_version = l->st.policy_version;
    log_info("round %llu: %u local + %u external groups, loss %.4f, %.1f s", (unsigned long long)l->st.round,
             b->b.local_count, b->b.external_count, ts->loss, secs);
}

/* takes the GRPO step of a batch for a later round and announces the new
 * policy version; false when the step failed */
static bool apply_batch(learner_t *l, const rec_batch_view_t *b)
{
    char err[512];
    train_stats_t ts;
    /* a batch can go missing (a killed broker) or come late (one
     * requeued from a killed learner): rounds are never waited for,
     * and the gap is counted in the metrics line */
    checkpoint_state_t before = l->st;
    if (b->b.round - l->st.round > 1)
        log_info("round %llu comes before rounds %llu..%llu: they are skipped", (unsigned long long)b->b.round,
                 (unsigned long long)l->st.round + 1, (unsigned long long)b->b.round - 1);
    int64_t t0 = zclock_mono();
    if (train_step(l->train, b, &ts, err, sizeof err) != 0) {
        log_error("round %llu not applied: %s", (unsigned long long)b->b.round, err);
        return false;
    }
    double secs = (zclock_mono() - t0) / 1000.0;
    l->st.round = b->b.round;
    l->st.policy_version++;
    mem_release();
    announce(l->pub, &l->cfg, l->pol, &l->st);
    if (l->st.round <= l->logged)
        log_info("round %llu trained again from its batch (%.1f s)", (unsigned long long)l->st.round, secs);
    else log_metrics(l, b, &ts, secs, before);
    policy_log_memory(l->pol);
    if (l->ref) policy_log_memory(l->ref);
    return true;
}

/* one batch record: dropped if malformed, skipped if its round is
 * applied, else trained; true when its step was taken */
static bool train_batch(learner_t *l, const wire_record_t *r)
{
    char err[512];
    void *copy = NULL;
    const void *buf = rec_aligned(r->data, r->size, &copy);
    rec_batch_view_t b;
    bool applied = false;
    if (!buf || rec_batch_view(buf, r->size, &b, err, sizeof err) != 0)
        log_error("dropped a batch: %s", buf ? err : "out of memory");
    else if (b.b.round <= l->st.round)
        log_info("round %llu is not after round %llu, the last applied (trained, or skipped for a later one that "
                 "came first): batch skipped",
                 (unsigned long long)b.b.round, (unsigned long long)l->st.round);
    else applied = apply_batch(l, &b);
    free(copy);
    return applied;
}

/* acks a batch at once, or holds it until a checkpoint holds its step */
static void hold_or_ack(learner_t *l, uint64_t id, bool applied)
{
    char err[512];
    if (!applied || l->hold == 0) {
        wire_consumer_ack(l->batches, id);
        return;
    }
    held_add(&l->held, id);
    /* every checkpoint_every rounds, and whenever that many batches
     * wait (rounds can skip a multiple of it) */
    if (l->st.round % (uint64_t)l->hold == 0 || l->held.n >= l->hold) {
        if (checkpoint_save(l->cfg.run, l->pol, l->opt, &l->st, l->cfg.keep_checkpoints, err, sizeof err) != 0)
            log_error("checkpoint of round %llu: %s", (unsigned long long)l->st.round, err);
        else held_ack(&l->held, l->batches);
    }
}

/* a last checkpoint, so a restart loses no step */
static void shut_down(learner_t *l)
{
    char err[512];
    if (checkpoint_save(l->cfg.run, l->pol, l->opt, &l->st, l->cfg.keep_checkpoints, err, sizeof err) != 0)
        log_error("final checkpoint: %s", err);
    else held_ack(&l->held, l->batches);
    log_info("stopping at round %llu", (unsigned long long)l->st.round);
    free(l->held.id);
    fclose(l->metrics);
    tb_close(&l->tb);
    wire_consumer_destroy(&l->batches);
    wire_publisher_destroy(&l->pub);
    train_destroy(&l->train);
    adamw_destroy(&l->opt);
    policy_destroy(&l->ref);
    policy_destroy(&l->pol);
}

int main(int argc, char **argv)
{
    learner_t l = {0};
    int rc = config_load(&l.cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("learner", l.cfg.node);
    zsys_init();
    if (argc > 1) return run_mode(&l.cfg, argc, argv);
    char err[512];

    if (peak_watch(l.cfg.run, "learner", err, sizeof err) != 0) log_fatal("%s", err);
    open_model(&l);
    open_streams(&l);
    /* the model's threads below those that carry records (util/nice.h) */
    if (nice_compute_threads(l.cfg.nice, err, sizeof err) != 0) log_error("%s", err);
    announce(l.pub, &l.cfg, l.pol, &l.st);
    /* the game's rounds are a batch per stage */
    uint64_t last = (uint64_t)l.cfg.rounds * (l.cfg.game == GAME_THREE_STAGE ? 3 : 1);
    while (!zsys_interrupted && !(last && l.st.round >= last)) {
        wire_record_t *r = wire_consumer_recv(l.batches, 1000);
        if (!r) continue;
        hold_or_ack(&l, r->id, train_batch(&l, r));
        wire_record_destroy(&r);
    }
    shut_down(&l);
    return 0;
}
