/* learner: one per node, holding the CPU or a GPU. Takes each training
 * batch (I local + J external groups), re-encodes it with its own tokenizer,
 * takes a GRPO step, saves the new policy version and announces it to the
 * generators; checkpoints every N rounds and resumes from the last one,
 * training again the batches applied after it (the broker keeps a batch
 * until a checkpoint holds its step).
 * Consumes the batches stream, publishes the policy stream.
 * `learner warmstart` trains the tiny base model, `learner init` makes a
 * random one of any shape (warmstart.h). */
#include <czmq.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "node/ckpt.h"
#include "node/config.h"
#include "node/learn.h"
#include "node/metrics.h"
#include "node/policy.h"
#include "records.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "warmstart.h"
#include "wire/wire.h"

/* saves version v for the generators and announces it */
static void announce(wire_publisher_t *pub, const config_t *cfg, const policy_t *pol, const ckpt_state_t *st)
{
    char dir[PATH_MAX], old[PATH_MAX], err[512];
    snprintf(dir, sizeof dir, "%s/policy", cfg->run);
    if (fs_mkdirs(dir) != 0) log_fatal("%s: cannot create", dir);
    snprintf(dir, sizeof dir, "%s/policy/v%llu", cfg->run, (unsigned long long)st->version);
    if (policy_save(pol, dir, err, sizeof err) != 0)
        log_fatal("policy version %llu: %s", (unsigned long long)st->version, err);
    if (st->version >= 4) {
        /* generators load a version within moments of its notice */
        snprintf(old, sizeof old, "%s/policy/v%llu", cfg->run, (unsigned long long)st->version - 4);
        fs_rm_tree(old);
    }
    rec_policy_t n = {.node = cfg->node,
                      .version = st->version,
                      .round = st->round,
                      .checkpoint = dir,
                      .created_ms = (uint64_t)zclock_time()};
    uint8_t *buf;
    size_t len;
    if (rec_policy_build(&n, &buf, &len) != 0 || wire_publisher_send(pub, buf, len, err, sizeof err) != 0)
        log_error("policy version %llu not announced: %s", (unsigned long long)st->version, err);
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

int main(int argc, char **argv)
{
    config_t cfg;
    int rc = config_load(&cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("learner", cfg.node);
    zsys_init();
    if (argc > 1 && strcmp(argv[1], "warmstart") == 0) return warmstart(&cfg);
    if (argc > 1 && strcmp(argv[1], "init") == 0) {
        if (argc != 4) log_fatal("usage: learner init CONFIG_JSON OUT_FOLDER");
        return init_random(argv[2], argv[3], cfg.seed);
    }
    if (argc > 1) log_fatal("unknown mode '%s' (warmstart, or no mode to serve a node)", argv[1]);

    char dir[PATH_MAX], path[PATH_MAX + 32], err[512];
    ckpt_state_t st = {0, 0};
    int have = ckpt_latest(cfg.run, dir, sizeof dir, &st, err, sizeof err);
    if (have < 0) log_fatal("%s", err);
    const char *source = have == 0 ? dir : policy_source(cfg.model, cfg.base);
    policy_t *pol = policy_open(source, cfg.system_prompt, err, sizeof err);
    if (!pol)
        log_fatal("%s%s", err,
                  strcmp(cfg.model, "tiny") == 0 && have ? " (make the base model: bin/learner warmstart)" : "");
    /* AdamW's moments: the checkpoint's, else the warm start's when asked
     * for, else fresh */
    bool from_base = have != 0 && cfg.warmstart_optimizer && strcmp(cfg.model, "tiny") == 0;
    snprintf(path, sizeof path, "%s/optimizer.bin", have == 0 ? dir : cfg.base);
    if (from_base && access(path, R_OK) != 0)
        log_fatal("%s: no warm start optimizer state (SAPO_WARMSTART_OPTIMIZER=1; a base model made before it was "
                  "saved: delete %s and run bin/learner warmstart)",
                  path, cfg.base);
    adamw_t *opt = have == 0 || from_base ? adamw_load(path, model_num_params(pol->model))
                                          : adamw_new(model_num_params(pol->model));
    if (!opt) log_fatal("optimizer state %s: see the line above", path);
    policy_t *ref =
        cfg.beta > 0 ? policy_open(policy_source(cfg.model, cfg.base), cfg.system_prompt, err, sizeof err) : NULL;
    if (cfg.beta > 0 && !ref) log_fatal("reference model: %s", err);
    if (model_set_backend(pol->model, cfg.backend, err, sizeof err) != 0 ||
        (ref && model_set_backend(ref->model, cfg.backend, err, sizeof err) != 0))
        log_fatal("%s", err);
    learn_t *learn = learn_new(pol, ref, &cfg, opt, err, sizeof err);
    if (!learn) log_fatal("%s", err);
    log_info("policy %s from %s at round %llu, version %llu", pol->name, source, (unsigned long long)st.round,
             (unsigned long long)st.version);

    endpoints_t ep;
    if (endpoints_from_base(cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    wire_publisher_t *pub = wire_publisher_new(&ep, err, sizeof err);
    /* A batch is acked only once a checkpoint holds its step: until then
     * the broker keeps it, and gives it back to a learner restarted from
     * the checkpoint before, which trains it again. So a killed learner
     * loses no batch, only its steps since the checkpoint; the credit
     * leaves room for the batch the sampler queues behind them. */
    int hold = cfg.checkpoint_every > 0 ? cfg.checkpoint_every : 0;
    held_t held = {0};
    wire_consumer_t *batches = pub ? wire_consumer_new(&ep, STREAM_BATCHES, hold + 2, err, sizeof err) : NULL;
    if (!batches) log_fatal("%s", err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg.run);
    /* rounds logged after the checkpoint resumed from come back from the
     * broker and are trained again (not logged again); those that do not
     * (a broker killed too) are lost, counted in the next metrics line */
    uint64_t logged_version, logged = ckpt_last_logged_round(path, &logged_version);
    if (logged > st.round)
        log_info("rounds %llu..%llu were trained after the checkpoint; training them again from their batches",
                 (unsigned long long)st.round + 1, (unsigned long long)logged);
    FILE *metrics = fopen(path, "a");
    if (!metrics) log_fatal("%s: cannot append", path);
    announce(pub, &cfg, pol, &st);

    while (!zsys_interrupted && !(cfg.rounds && st.round >= (uint64_t)cfg.rounds)) {
        wire_record_t *r = wire_consumer_recv(batches, 1000);
        if (!r) continue;
        void *copy = NULL;
        const void *buf = rec_aligned(r->data, r->size, &copy);
        rec_batch_view_t b;
        learn_stats_t ls;
        bool applied = false;
        if (!buf || rec_batch_view(buf, r->size, &b, err, sizeof err) != 0) {
            log_error("dropped a batch: %s", buf ? err : "out of memory");
        } else if (b.b.round <= st.round) {
            log_info("round %llu already applied; batch skipped", (unsigned long long)b.b.round);
        } else {
            /* a batch can go missing (a killed broker) or come late (one
             * requeued from a killed learner): rounds are never waited for,
             * and the gap is counted in the metrics line */
            uint64_t before = st.round, before_version = st.version;
            if (b.b.round - st.round > 1)
                log_info("round %llu comes before rounds %llu..%llu: they are skipped", (unsigned long long)b.b.round,
                         (unsigned long long)st.round + 1, (unsigned long long)b.b.round - 1);
            int64_t t0 = zclock_mono();
            if (learn_step(learn, &b, &ls, err, sizeof err) != 0) {
                log_error("round %llu not applied: %s", (unsigned long long)b.b.round, err);
            } else {
                applied = true;
                double secs = (zclock_mono() - t0) / 1000.0;
                st.round = b.b.round;
                st.version++;
                mem_release();
                announce(pub, &cfg, pol, &st);
                if (st.round <= logged) {
                    log_info("round %llu trained again from its batch (%.1f s)", (unsigned long long)st.round, secs);
                } else {
                    char *line = metrics_line(cfg.node, pol->name, &b, &ls, st.version, secs);
                    /* against the last line logged: rounds it has that this
                     * state lacks (lost), and rounds neither trained (skipped),
                     * so the lines say every round trained, lost or skipped */
                    uint64_t lost = logged > before ? logged - before : 0, skipped = st.round - before - 1;
                    uint64_t versions_lost = logged_version > before_version ? logged_version - before_version : 0;
                    fprintf(metrics, "%.*s", (int)strlen(line) - 1, line);
                    if (lost) fprintf(metrics, ",\"rounds_lost\":%llu", (unsigned long long)lost);
                    if (versions_lost) fprintf(metrics, ",\"versions_lost\":%llu", (unsigned long long)versions_lost);
                    if (skipped) fprintf(metrics, ",\"rounds_skipped\":%llu", (unsigned long long)skipped);
                    fprintf(metrics, "}\n");
                    fflush(metrics);
                    free(line);
                    logged = st.round;
                    logged_version = st.version;
                    log_info("round %llu: %u local + %u external groups, loss %.4f, %.1f s",
                             (unsigned long long)st.round, b.b.local_count, b.b.external_count, ls.loss, secs);
                }
            }
        }
        free(copy);
        if (applied && hold > 0) {
            held_add(&held, r->id);
            /* every checkpoint_every rounds, and whenever that many batches
             * wait (rounds can skip a multiple of it) */
            if (st.round % (uint64_t)hold == 0 || held.n >= hold) {
                if (ckpt_save(cfg.run, pol, opt, &st, 2, err, sizeof err) != 0)
                    log_error("checkpoint of round %llu: %s", (unsigned long long)st.round, err);
                else held_ack(&held, batches);
            }
        } else {
            wire_consumer_ack(batches, r->id);
        }
        wire_record_destroy(&r);
    }
    if (ckpt_save(cfg.run, pol, opt, &st, 2, err, sizeof err) != 0) log_error("final checkpoint: %s", err);
    else held_ack(&held, batches);
    log_info("stopping at round %llu", (unsigned long long)st.round);
    free(held.id);
    fclose(metrics);
    wire_consumer_destroy(&batches);
    wire_publisher_destroy(&pub);
    learn_destroy(&learn);
    adamw_destroy(&opt);
    policy_destroy(&ref);
    policy_destroy(&pol);
    return 0;
}
