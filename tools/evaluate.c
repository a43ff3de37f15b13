/* evaluate: a node's judge. Follows the learner's policy notices and every
 * EVERY rounds scores the policy's greedy answer (pass@1) on held-out
 * questions of every family in the node's task mix, one JSON line per
 * evaluation appended to <run>/eval.jsonl (and, by the tensorboard
 * setting, as an event to its TensorBoard file in <run>/tb/, its values
 * tagged heldout/...); the last round (--rounds) is always scored, then it
 * exits. Subscribes to the node's policy stream.
 *
 *   evaluate [--SETTING VALUE]... [EVERY [PER_FAMILY [SAMPLES]]]   (defaults 10, 16, 0)
 *   evaluate [--SETTING VALUE]... once [PER_FAMILY [SAMPLES]]
 *
 * once: no node; the policy RL would start from (the model setting: a
 * model scripts/model.sh fetched, a folder, a GGUF file; or the base
 * folder its warm start made) is scored once and the line printed.
 * Each line has pass1 (greedy, right answers), score (the scorers' mean,
 * partial credit included) and format (answers in the answer tags),
 * overall and by family, and peak_gb, the evaluator's peak resident
 * memory so far. Between evaluations it holds no model: each version due
 * is opened when its notice comes and freed once scored.
 *
 * With SAMPLES, each question is also sampled that many times at the
 * node's temperature, top-k and top-p (the uniforms of a question the same
 * at every evaluation), and "sampled.pass1" is the share of right answers
 * among them: what the policy's sampling gets right on questions it never
 * trained on, beside what its greedy answer gets right.
 *
 * With the eval-completions setting, every completion scored (greedy and
 * sampled) is also appended to that file as a JSON line, to read what
 * the model wrote (an evaluation stopped midway leaves the lines it
 * wrote; once, round and policy version are those the folder records:
 * a policy version the learner saved, else 0 and 0).
 *
 * Held out: every node answers the same questions, drawn with a fixed
 * evaluation seed from index 2^48 upward; training draws with the node's
 * seed from index 0, so no question of the evaluation set is ever trained on
 * (an easy family can still repeat a question's text by chance).
 *
 * With game three-stage, a question is asked as the game's answer stage
 * asks it (game_answer_question), the answer read from its <answer> alone,
 * and rounds are the game's: its third batch ends one. */
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "node/budget.h"
#include "node/config.h"
#include "node/heldout.h"
#include "node/policy.h"
#include "node/tensorboard.h"
#include "tasks/fam_game.h"
#include "records.h"
#include "tasks/task.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/peak.h"
#include "wire/wire.h"

#define EVAL_SEED 0x5a905eedull
#define EVAL_INDEX0 (1ull << 48)

typedef struct {
    char *family; /* the task mix's key: a family, or FAMILY#LABEL */
    task_question_t *questions;
    char **prompts; /* each question as asked: the game's answer stage, or as drawn */
    int n;
} heldout_t;

/* The policy notices one by one, and the weights of the next version due,
 * loaded as soon as its notice arrives: the learner deletes old versions
 * a few rounds later, and an evaluation can take longer. */
typedef struct {
    const config_t *cfg;
    wire_subscriber_t *sub;
    uint64_t every, next;
    policy_t *due; /* weights of round due_round, when due_ready */
    uint64_t due_round, due_version;
    bool due_ready, last_loaded;
    rec_policy_t last; /* the last round's notice, when it came while another version was due */
    char last_checkpoint[4096];
    bool from_zero; /* eval.jsonl was empty: round 0 is due first */
} judge_t;

static void judge_notice(judge_t *j, const rec_policy_t *pn);

/* A judge that starts after the learner's round 0 (its first notice is
 * a later round) scores round 0 first, from the learner's version 0
 * while that is still on disk: a study's curves all start at round 0. */
static void judge_round_zero(judge_t *j, const rec_policy_t *pn)
{
    j->from_zero = false;
    char v0[4096];
    policy_version_dir(j->cfg->run, 0, v0, sizeof v0);
    struct stat st;
    if (pn->round == 0 || stat(v0, &st) != 0 || !S_ISDIR(st.st_mode)) return;
    log_info("started at round %llu: round 0 first, from %s", (unsigned long long)pn->round, v0);
    rec_policy_t z = *pn;
    z.round = 0, z.policy_version = 0, z.checkpoint = v0;
    judge_notice(j, &z);
}

static void judge_notice(judge_t *j, const rec_policy_t *pn)
{
    char err[512];
    if (j->from_zero) judge_round_zero(j, pn);
    bool last = j->cfg->rounds && pn->round >= (uint64_t)j->cfg->rounds;
    if (last && j->due_ready && !j->last_loaded && pn != &j->last) {
        /* the final version stays on disk: load it once the one due is scored */
        snprintf(j->last_checkpoint, sizeof j->last_checkpoint, "%s", pn->checkpoint);
        j->last = *pn;
        j->last.checkpoint = j->last_checkpoint;
        j->last.node = NULL;
    }
    if (j->due_ready || j->last_loaded || (pn->round < j->next && !last)) return;
    /* opened afresh each time: between evaluations the judge holds no
     * model (the one scored is freed), so an idle evaluator takes next to
     * no memory beside the node */
    j->due = policy_open(pn->checkpoint, j->cfg->system_prompt, err, sizeof err);
    /* the judge's policies run where the node's models do */
    if (j->due && policy_place(j->due, j->cfg, true, err, sizeof err) != 0) log_fatal("%s", err);
    if (!j->due) {
        log_error("round %llu not evaluated: %s", (unsigned long long)pn->round, err);
        return;
    }
    j->due->cancel = &zsys_interrupted;
    j->due_ready = true;
    j->due_round = pn->round;
    j->due_version = pn->policy_version;
    j->next = (pn->round / j->every + 1) * j->every;
    j->last_loaded = last;
}

/* the round of the file's last whole evaluation line, -1 when it has none */
static long last_round_scored(const char *path)
{
    char *line = fs_last_line(path);
    cJSON *j = line ? cJSON_Parse(line) : NULL;
    free(line);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "round");
    long round = cJSON_IsNumber(r) && r->valuedouble >= 0 ? (long)r->valuedouble : -1;
    cJSON_Delete(j);
    return round;
}

/* every waiting notice, waiting up to timeout_ms for the first */
static void judge_poll(judge_t *j, int timeout_ms)
{
    wire_record_t *r;
    while ((r = wire_subscriber_recv(j->sub, timeout_ms))) {
        timeout_ms = 0;
        void *copy = NULL;
        const void *buf = rec_aligned(r->data, r->size, &copy);
        rec_policy_t pn;
        char err[512];
        if (!buf || rec_policy_view(buf, r->size, &pn, err, sizeof err) != 0)
            log_error("dropped a policy notice: %s", buf ? err : "out of memory");
        else if (j->cfg->game != GAME_THREE_STAGE) judge_notice(j, &pn);
        else if (pn.round % 3 == 0) {
            /* the game's round ends with its third batch (resolve) */
            pn.round /= 3;
            judge_notice(j, &pn);
        }
        free(copy);
        wire_record_destroy(&r);
    }
}

static long positive(const char *s, const char *what)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 100000) log_fatal("%s: '%s' is not a positive integer", what, s);
    return v;
}

/* question k of h as it is asked */
static void heldout_prompt(heldout_t *h, int k, bool game)
{
    task_question_t stage;
    char err[512];
    if (!game) {
        h->prompts[k] = strdup(h->questions[k].question);
        return;
    }
    if (game_answer_question(&h->questions[k], 0, &stage, err, sizeof err) != 0)
        log_fatal("held-out %s question %d in the game: %s", h->family, k, err);
    h->prompts[k] = strdup(stage.question);
    task_question_free(&stage);
}

/* The questions of one family, from a mix that holds only that family with
 * the node's config for it (null for the defaults). */
static void heldout_make(heldout_t *h, const char *family, const cJSON *config, int n, bool game)
{
    cJSON *spec = cJSON_CreateObject(), *fams = cJSON_AddObjectToObject(spec, "families");
    cJSON *one = cJSON_AddObjectToObject(fams, family);
    cJSON_AddNumberToObject(one, "weight", 1);
    if (config) cJSON_AddItemToObject(one, "config", cJSON_Duplicate(config, 1));
    char *text = cJSON_PrintUnformatted(spec), err[512];
    task_mix_t *mix = task_mix_new(text, EVAL_SEED, err, sizeof err);
    if (!mix) log_fatal("held-out %s questions: %s", family, err);
    h->family = strdup(family);
    h->n = n;
    h->questions = calloc((size_t)n, sizeof *h->questions);
    h->prompts = calloc((size_t)n, sizeof *h->prompts);
    for (int k = 0; k < n; k++) {
        if (task_mix_draw(mix, EVAL_INDEX0 + (uint64_t)k, &h->questions[k], err, sizeof err) != 0)
            log_fatal("held-out %s question %d: %s", family, k, err);
        heldout_prompt(h, k, game);
    }
    task_mix_destroy(&mix);
    free(text);
    cJSON_Delete(spec);
}

/* every family of the task mix with a weight above 0 (config.c has checked the mix) */
static int heldout_all(const config_t *cfg, int per_family, heldout_t **out)
{
    heldout_t *h = calloc((size_t)task_family_count, sizeof *h);
    int n = 0;
    bool game = cfg->game == GAME_THREE_STAGE;
    cJSON *spec = cfg->task_mix[0] ? cJSON_Parse(cfg->task_mix) : NULL;
    const cJSON *fams = cJSON_GetObjectItemCaseSensitive(spec, "families"), *item;
    if (!cfg->task_mix[0]) {
        /* the default mix: every family but the opt-in ones */
        for (int i = 0; i < task_family_count; i++)
            if (!task_family_opt_in(task_families[i]))
                heldout_make(&h[n++], task_families[i]->name, NULL, per_family, game);
    } else if (!cJSON_IsObject(fams)) {
        log_fatal("task mix (SAPO_TASK_MIX): expected {\"families\": {...}}");
    } else {
        cJSON_ArrayForEach(item, fams)
        {
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(item, "weight");
            if (!task_family_of_key(item->string))
                log_fatal("task mix (SAPO_TASK_MIX): unknown family %s", item->string);
            if (n < task_family_count && !(cJSON_IsNumber(w) && w->valuedouble <= 0))
                heldout_make(&h[n++], item->string, cJSON_GetObjectItemCaseSensitive(item, "config"), per_family, game);
        }
    }
    cJSON_Delete(spec);
    *out = h;
    return n;
}

static void heldout_free(heldout_t *h, int nf)
{
    for (int f = 0; f < nf; f++) {
        for (int k = 0; k < h[f].n; k++) task_question_free(&h[f].questions[k]), free(h[f].prompts[k]);
        free(h[f].questions), free(h[f].prompts), free(h[f].family);
    }
    free(h);
}

/* one family being scored: notices are read between decode batches (jd
 * NULL: none), and each completion goes to out (NULL: nowhere) */
typedef struct {
    judge_t *jd;
    FILE *out;
    const heldout_t *h;
    uint64_t round, version;
    double temperature; /* 0: greedy */
    int batch;          /* questions to a decode batch */
} scoring_t;

static void scoring_poll(void *ctx)
{
    scoring_t *s = ctx;
    if (s->jd) judge_poll(s->jd, 0);
}

/* one line of the eval-completions file */
static void scoring_completion(void *ctx, int k, int j, const completion_t *c, double score, bool formatted)
{
    scoring_t *s = ctx;
    if (!s->out) return;
    const task_question_t *q = &s->h->questions[k];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", (double)s->round);
    cJSON_AddNumberToObject(o, "policy_version", (double)s->version);
    cJSON_AddStringToObject(o, "family", s->h->family);
    cJSON_AddStringToObject(o, "question", s->h->prompts[k]);
    if (q->answer) cJSON_AddStringToObject(o, "answer", q->answer);
    else cJSON_AddNullToObject(o, "answer");
    cJSON_AddNumberToObject(o, "temperature", s->temperature);
    cJSON_AddNumberToObject(o, "sample", j);
    cJSON_AddStringToObject(o, "completion", c->text ? c->text : "");
    cJSON_AddNumberToObject(o, "tokens", c->n);
    cJSON_AddBoolToObject(o, "finished", c->finished);
    cJSON_AddBoolToObject(o, "formatted", formatted);
    cJSON_AddNumberToObject(o, "score", score);
    char *line = cJSON_PrintUnformatted(o);
    if (line) fprintf(s->out, "%s\n", line);
    free(line);
    cJSON_Delete(o);
}

static heldout_tally_t score_family(policy_t *pol, scoring_t *s, int n, model_gen_params_t gp, uint64_t seed0)
{
    s->temperature = gp.sample.temperature;
    heldout_hooks_t hooks = {scoring_poll, scoring_completion, s};
    heldout_tally_t t = heldout_score(pol, s->h->questions, s->h->prompts, s->h->n, n, s->batch, gp, seed0, &hooks);
    if (s->out) fflush(s->out);
    return t;
}

/* with samples > 0: "sampled", the share of right answers among that many
 * completions per question at the node's sampling settings, each
 * question's uniforms the same at every evaluation */
static void add_sampled(cJSON *j, policy_t *pol, scoring_t *sc, const config_t *cfg, int samples, const heldout_t *h,
                        int nf)
{
    if (samples <= 0) return;
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {cfg->temperature, cfg->top_k, cfg->top_p}};
    long right = 0, total = 0;
    for (int f = 0; f < nf; f++) {
        sc->h = &h[f];
        heldout_tally_t t = score_family(pol, sc, samples, gp, EVAL_SEED + (uint64_t)f * 1000003u);
        right += t.right;
        total += t.total;
    }
    cJSON *o = cJSON_AddObjectToObject(j, "sampled");
    cJSON_AddNumberToObject(o, "pass1", (double)right / total);
    cJSON_AddNumberToObject(o, "samples", samples);
    cJSON_AddNumberToObject(o, "temperature", cfg->temperature);
}

/* one evaluation of round's policy version: a JSON line (malloc'ed);
 * notices are read between batches (jd NULL: none), and each completion
 * goes to out (NULL: nowhere) */
static char *evaluate(policy_t *pol, judge_t *jd, FILE *out, const config_t *cfg, int samples, const heldout_t *h,
                      int nf, uint64_t round, uint64_t version)
{
    budget_t budget;
    char err[1024];
    if (budget_for(cfg, pol, BUDGET_EVALUATOR, &budget, err, sizeof err) != 0) log_fatal("%s", err);
    scoring_t sc = {.jd = jd, .out = out, .round = round, .version = version, .batch = budget.heldout_batch};
    int64_t t0 = zclock_mono();
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {0, 0, 1}, .seed = 0};
    cJSON *j = cJSON_CreateObject(), *fams = cJSON_CreateObject(), *formats = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "node", cfg->node);
    cJSON_AddNumberToObject(j, "round", (double)round);
    cJSON_AddNumberToObject(j, "policy_version", (double)version);
    heldout_tally_t all = {0};
    for (int f = 0; f < nf; f++) {
        sc.h = &h[f];
        heldout_tally_t t = score_family(pol, &sc, 1, gp, 0);
        cJSON_AddNumberToObject(fams, h[f].family, (double)t.right / h[f].n);
        cJSON_AddNumberToObject(formats, h[f].family, (double)t.formatted / h[f].n);
        all.right += t.right, all.formatted += t.formatted, all.total += t.total, all.score += t.score;
    }
    add_sampled(j, pol, &sc, cfg, samples, h, nf);
    cJSON_AddNumberToObject(j, "pass1", (double)all.right / all.total);
    cJSON_AddNumberToObject(j, "score", all.score / all.total);
    cJSON_AddNumberToObject(j, "format", (double)all.formatted / all.total);
    cJSON_AddNumberToObject(j, "questions", (double)all.total);
    cJSON_AddItemToObject(j, "families", fams);
    cJSON_AddItemToObject(j, "format_families", formats);
    cJSON_AddNumberToObject(j, "seconds", (zclock_mono() - t0) / 1000.0);
    cJSON_AddNumberToObject(j, "peak_gb", (double)(peak_rss() / 1000000) / 1e3);
    cJSON_AddNumberToObject(j, "time", (double)time(NULL));
    char *line = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return line;
}

/* `evaluate once`: the policy RL would start from (policy_start: the
 * model setting, or the base its warm start made), scored once; the line
 * goes to standard output, labelled with the round and policy version a
 * learner's folder records (0 and 0 for any other model) */
static int evaluate_once(const config_t *cfg, FILE *completions, const heldout_t *h, int nf, int samples)
{
    char err[512], source[PATH_MAX];
    if (policy_start(cfg, source, sizeof source, err, sizeof err) != 0) log_fatal("%s", err);
    policy_version_t v = {0};
    if (policy_version_read(source, &v, err, sizeof err) < 0) log_fatal("%s", err);
    policy_t *pol = policy_open(source, cfg->system_prompt, err, sizeof err);
    if (!pol) log_fatal("%s", err);
    if (policy_place(pol, cfg, true, err, sizeof err) != 0) log_fatal("%s", err);
    pol->cancel = &zsys_interrupted;
    char *line = evaluate(pol, NULL, completions, cfg, samples, h, nf, v.round, v.policy_version);
    int rc = 0;
    if (zsys_interrupted) {
        log_error("interrupted: no score written");
        rc = 1;
    } else {
        printf("%s\n", line);
    }
    free(line);
    policy_destroy(&pol);
    return rc;
}

/* the eval-completions file, opened to append; NULL where none is set */
static FILE *completions_open(const config_t *cfg)
{
    if (!cfg->eval_completions[0]) return NULL;
    FILE *f = fopen(cfg->eval_completions, "a");
    if (!f)
        log_fatal("eval-completions (SAPO_EVAL_COMPLETIONS): %s: cannot append: %s", cfg->eval_completions,
                  strerror(errno));
    return f;
}

int main(int argc, char **argv)
{
    config_t cfg;
    int rc = config_load(&cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    log_init("evaluate", cfg.node);
    bool once = argc > 1 && strcmp(argv[1], "once") == 0;
    if (argc > 4) log_fatal("usage: evaluate [--SETTING VALUE]... [EVERY|once [PER_FAMILY [SAMPLES]]]");
    long every = argc > 1 && !once ? positive(argv[1], "EVERY") : 10;
    int per_family = argc > 2 ? (int)positive(argv[2], "PER_FAMILY") : 16;
    int samples = argc > 3 ? (int)positive(argv[3], "SAMPLES") : 0;
    if (samples > 64) log_fatal("SAMPLES: %d is more than 64", samples);
    zsys_init();
    heldout_t *h;
    int nf = heldout_all(&cfg, per_family, &h);
    FILE *completions = completions_open(&cfg);
    if (once) {
        rc = evaluate_once(&cfg, completions, h, nf, samples);
        if (completions) fclose(completions);
        heldout_free(h, nf);
        return rc;
    }

    char err[512], path[PATH_MAX];
    if (peak_watch(cfg.run, "evaluate", err, sizeof err) != 0) log_fatal("%s", err);
    endpoints_t ep;
    if (endpoints_from_base(cfg.broker, &ep, err, sizeof err) != 0) log_fatal("%s", err);
    wire_subscriber_t *sub = wire_subscriber_new(&ep, err, sizeof err);
    if (!sub) log_fatal("%s", err);
    snprintf(path, sizeof path, "%s/eval.jsonl", cfg.run);
    /* an evaluator restarted (a study resumed) goes on after the rounds
     * its file holds: a line half written when it was killed is cut */
    long cut = fs_cut_partial_line(path);
    if (cut > 0) log_info("%s: cut the %ld bytes of a line left partial", path, cut);
    long scored = last_round_scored(path);
    if (scored >= 0 && cfg.rounds > 0 && scored >= cfg.rounds) {
        log_info("%s: the last round (%ld) was scored before: nothing to do", path, scored);
        heldout_free(h, nf);
        if (completions) fclose(completions);
        wire_subscriber_destroy(&sub);
        return 0;
    }
    FILE *out = cut >= 0 ? fopen(path, "a") : NULL;
    if (!out) log_fatal("%s: cannot append", path);
    log_info("%d families x %d held-out questions every %ld rounds into %s", nf, per_family, every, path);
    tb_t *tb = tensorboard_open(&cfg, "evaluate");

    judge_t jd = {.cfg = &cfg, .sub = sub, .every = (uint64_t)every, .from_zero = scored < 0};
    if (scored >= 0) {
        jd.next = ((uint64_t)scored / jd.every + 1) * jd.every;
        log_info("round %ld was scored before: the next is round %llu", scored, (unsigned long long)jd.next);
    }
    policy_t *pol = NULL;
    uint64_t done = 0;
    while (!zsys_interrupted) {
        judge_poll(&jd, 1000);
        if (!jd.due_ready) continue;
        pol = jd.due;
        jd.due = NULL;
        jd.due_ready = false;
        bool last = jd.last_loaded;
        done = jd.due_round;
        char *line = evaluate(pol, &jd, completions, &cfg, samples, h, nf, jd.due_round, jd.due_version);
        if (zsys_interrupted) { /* a partial evaluation is not written */
            log_info("stopped while evaluating round %llu: not written", (unsigned long long)jd.due_round);
            free(line);
            break;
        }
        fprintf(out, "%s\n", line);
        fflush(out);
        tensorboard_line(&tb, line, "heldout", NULL);
        free(line);
        policy_destroy(&pol);
        mem_release();
        if (last) break;
        if (jd.last.checkpoint) judge_notice(&jd, &jd.last);
    }
    log_info("stopping after round %llu", (unsigned long long)done);
    fclose(out);
    tb_close(&tb);
    if (completions) fclose(completions);
    policy_destroy(&pol);
    policy_destroy(&jd.due);
    wire_subscriber_destroy(&sub);
    heldout_free(h, nf);
    return 0;
}
