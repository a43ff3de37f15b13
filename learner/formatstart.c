/* learner warmstart for a chat model: the answer-format warm start.
 *
 * A pretrained instruct model asked for its answer in <answer> tags often
 * answers in prose (SmolLM2-135M: never in the tags), and a reward that
 * is 0 for every completion teaches GRPO nothing. So before RL the model
 * answers questions of the task mix as it would (greedy), and every
 * answer it ended by itself gets the last number it wrote appended in the
 * answer tags. A few supervised steps on these completions teach it the
 * format. They cannot teach it the answers: every target is the model's
 * own, right or wrong, and no ground truth is read. The answer it states
 * is taken as its last number, so the warm start serves families whose
 * answers are numbers; a completion without one is not used.
 *
 * The result is the base folder (the base setting) that RL starts from,
 * with format.json: the held-out format rate and pass@1 before and after,
 * and what was trained. */
#include "warmstart.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "node/heldout.h"
#include "train_sft.h"
#include "node/policy.h"
#include "tasks/task.h"
#include "util/fs.h"
#include "util/log.h"

/* examples a step; questions sampled a decode batch; the supervised
 * steps' learning rate (RL's, the lr setting, is lower) */
#define FORMAT_BATCH 8
#define FORMAT_LR 1e-5f
#define FORMAT_SAMPLE_BATCH 16
#define FORMAT_EVAL 64 /* held-out questions scored before and after */
/* question indices apart from RL's (from 0) and the evaluator's (2^48) */
#define FORMAT_INDEX0 (1ull << 40)
#define FORMAT_EVAL_INDEX0 (1ull << 41)

/* The last number of text ("-12", "3.5", "7/8"), malloc'ed, or NULL. */
static char *last_number(const char *text)
{
    const char *best = NULL;
    size_t best_n = 0;
    for (const char *p = text; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > text && isdigit((unsigned char)p[-1]))) continue;
        const char *s = p > text && p[-1] == '-' ? p - 1 : p, *e = p;
        while (isdigit((unsigned char)*e)) e++;
        if ((*e == '.' || *e == '/') && isdigit((unsigned char)e[1]))
            for (e++; isdigit((unsigned char)*e);) e++;
        best = s, best_n = (size_t)(e - s);
        p = e - 1;
    }
    return best ? strndup(best, best_n) : NULL;
}

/* text without its trailing blanks, then the answer in the tags on a
 * line of its own */
static char *format_target(const char *text, const char *answer)
{
    size_t n = strlen(text);
    while (n && strchr(" \t\n\r", text[n - 1])) n--;
    size_t cap = n + strlen(answer) + sizeof "\n<answer></answer>";
    char *t = malloc(cap);
    if (t) snprintf(t, cap, "%.*s\n<answer>%s</answer>", (int)n, text, answer);
    return t;
}

typedef struct {
    char **questions, **targets;
    int n, cap;
    long sampled, in_format, numbered, truncated;
} examples_t;

static void add_example(examples_t *x, const char *question, char *target)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->questions = realloc(x->questions, sizeof(char *) * x->cap);
        x->targets = realloc(x->targets, sizeof(char *) * x->cap);
        if (!x->questions || !x->targets) log_fatal("out of memory");
    }
    x->questions[x->n] = strdup(question);
    x->targets[x->n++] = target;
}

/* one decode batch of q greedy answers to questions from index i0, each
 * one ended by the model made an example */
static void sample_batch(policy_t *pol, const config_t *cfg, const task_mix_t *mix, uint64_t i0, int q, examples_t *x)
{
    char err[512];
    task_question_t e[FORMAT_SAMPLE_BATCH] = {0};
    const char *qs[FORMAT_SAMPLE_BATCH];
    uint64_t seeds[FORMAT_SAMPLE_BATCH] = {0};
    completion_t c[FORMAT_SAMPLE_BATCH] = {0};
    for (int i = 0; i < q; i++) {
        if (task_mix_draw(mix, FORMAT_INDEX0 + i0 + (uint64_t)i, &e[i], err, sizeof err) != 0)
            log_fatal("task mix: %s", err);
        qs[i] = e[i].question;
    }
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {0, 0, 1}};
    if (policy_sample_batch(pol, qs, seeds, q, 1, &gp, c, err, sizeof err) != 0)
        log_fatal("format warm start: %s", err);
    for (int i = 0; i < q; i++) {
        const char *text = c[i].text ? c[i].text : "";
        char *tagged = task_extract_answer(text), *number = tagged ? NULL : last_number(text);
        x->sampled++;
        if (tagged) {
            x->in_format++;
            add_example(x, qs[i], strdup(text));
        } else if (!c[i].finished) x->truncated++;
        else if (number) {
            x->numbered++;
            add_example(x, qs[i], format_target(text, number));
        }
        free(tagged);
        free(number);
        completion_free(&c[i]);
        task_question_free(&e[i]);
    }
}

/* format rate and pass@1 of greedy answers to FORMAT_EVAL held-out questions */
static cJSON *score(policy_t *pol, const config_t *cfg, const task_mix_t *mix)
{
    task_question_t e[FORMAT_EVAL];
    char *prompts[FORMAT_EVAL], err[512];
    for (int i = 0; i < FORMAT_EVAL; i++) {
        if (task_mix_draw(mix, FORMAT_EVAL_INDEX0 + (uint64_t)i, &e[i], err, sizeof err) != 0)
            log_fatal("task mix: %s", err);
        prompts[i] = e[i].question;
    }
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {0, 0, 1}};
    heldout_tally_t t = heldout_score(pol, e, prompts, FORMAT_EVAL, 1, HELDOUT_BATCH, gp, 0, NULL);
    for (int i = 0; i < FORMAT_EVAL; i++) task_question_free(&e[i]);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "format", (double)t.formatted / t.total);
    cJSON_AddNumberToObject(o, "pass1", (double)t.right / t.total);
    cJSON_AddNumberToObject(o, "questions", (double)t.total);
    return o;
}

/* what the base folder was made from, to refuse a stale one */
static char *made_from(const char *source, const config_t *cfg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", source);
    cJSON_AddNumberToObject(o, "format_steps", cfg->format_steps);
    cJSON_AddStringToObject(o, "task_mix", cfg->task_mix);
    cJSON_AddNumberToObject(o, "seed", (double)cfg->seed);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* 1 when the base folder holds this warm start already, 0 when there is
 * none; a base made from something else is refused */
static int have_base(const config_t *cfg, const char *from)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", cfg->base);
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    snprintf(path, sizeof path, "%s/format.json", cfg->base);
    char *text = fs_read_text(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    char *was = j ? cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "made_from")) : NULL;
    cJSON *want = cJSON_Parse(from);
    char *now = cJSON_PrintUnformatted(want);
    bool same = was && now && strcmp(was, now) == 0;
    free(text), free(was), free(now);
    cJSON_Delete(j), cJSON_Delete(want);
    if (!same)
        log_fatal("base folder %s holds another model (format.json's made_from differs from %s); delete it or set "
                  "SAPO_BASE",
                  cfg->base, from);
    return 1;
}

int formatstart(const config_t *cfg)
{
    char source[PATH_MAX], err[512], path[PATH_MAX + 32];
    if (cfg->format_steps <= 0) {
        log_info("format-steps is 0: RL starts from %s as it is; nothing to warm start", cfg->model);
        return 0;
    }
    if (policy_model_path(cfg->model, cfg->model_cache, source, sizeof source, err, sizeof err) != 0)
        log_fatal("%s", err);
    char *from = made_from(source, cfg);
    if (have_base(cfg, from)) {
        log_info("base model %s exists (a format warm start of %s)", cfg->base, source);
        free(from);
        return 0;
    }
    task_mix_t *mix = task_mix_new(cfg->task_mix[0] ? cfg->task_mix : NULL, cfg->seed, err, sizeof err);
    if (!mix) log_fatal("task mix: %s", err);
    policy_t *pol = policy_open(source, cfg->system_prompt, err, sizeof err);
    if (!pol) log_fatal("%s", err);
    if (pol->fmt != PROMPT_CHATML) log_fatal("%s: the format warm start is for chat models", source);
    /* where the node's learner runs: a GPU node warms up on its GPU */
    if (policy_place(pol, cfg, false, err, sizeof err) != 0) log_fatal("%s", err);
    adamw_t *opt = adamw_new(model_num_params(pol->model));
    config_t sft = *cfg;
    sft.beta = 0; /* supervised: no KL, no reference model */
    sft.lr = FORMAT_LR;
    train_t *train = opt ? train_new(pol, NULL, &sft, opt, err, sizeof err) : NULL;
    if (!train) log_fatal("%s", opt ? err : "out of memory");
    int64_t t0 = zclock_mono();
    cJSON *report = cJSON_CreateObject();
    cJSON_AddItemToObject(report, "made_from", cJSON_Parse(from));
    cJSON_AddItemToObject(report, "before", score(pol, cfg, mix));
    log_info("format warm start of %s: before, %s (%.0f s)", source,
             cJSON_PrintUnformatted(cJSON_GetObjectItem(report, "before")), (zclock_mono() - t0) / 1000.0);
    examples_t x = {0};
    int want = cfg->format_steps * FORMAT_BATCH;
    for (uint64_t i0 = 0; x.n < want && !zsys_interrupted; i0 += FORMAT_SAMPLE_BATCH) {
        if (i0 > 40ull * (uint64_t)want)
            log_fatal("format warm start: %d examples from %llu questions", x.n, (unsigned long long)i0);
        sample_batch(pol, cfg, mix, i0, FORMAT_SAMPLE_BATCH, &x);
        log_info("format warm start: %d of %d examples (%ld answers: %ld in the tags, %ld ended with a number, %ld cut "
                 "at max-new-tokens) (%.0f s)",
                 x.n, want, x.sampled, x.in_format, x.numbered, x.truncated, (zclock_mono() - t0) / 1000.0);
    }
    for (int s = 0; s < cfg->format_steps && !zsys_interrupted; s++) {
        float loss = train_sft_step(train, (const char *const *)x.questions + s * FORMAT_BATCH,
                                    (const char *const *)x.targets + s * FORMAT_BATCH, FORMAT_BATCH);
        if (loss < 0) log_fatal("format warm start: step %d failed", s);
        log_info("format warm start step %d/%d loss %.4f (%.0f s)", s + 1, cfg->format_steps, loss,
                 (zclock_mono() - t0) / 1000.0);
    }
    if (zsys_interrupted) log_fatal("interrupted: base model not saved");
    cJSON_AddItemToObject(report, "after", score(pol, cfg, mix));
    cJSON *tr = cJSON_AddObjectToObject(report, "trained");
    cJSON_AddNumberToObject(tr, "steps", cfg->format_steps);
    cJSON_AddNumberToObject(tr, "examples", want);
    cJSON_AddNumberToObject(tr, "sampled", (double)x.sampled);
    cJSON_AddNumberToObject(tr, "in_format", (double)x.in_format);
    cJSON_AddNumberToObject(tr, "numbered", (double)x.numbered);
    cJSON_AddNumberToObject(tr, "truncated", (double)x.truncated);
    cJSON_AddNumberToObject(tr, "lr", FORMAT_LR);
    cJSON_AddStringToObject(tr, "backend", cfg->backend);
    cJSON_AddNumberToObject(tr, "seconds", (zclock_mono() - t0) / 1000.0);
    char *text = cJSON_PrintUnformatted(report);
    log_info("format warm start: %s", text);
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", cfg->base);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    if (slash && fs_mkdirs(parent) != 0) log_fatal("%s: cannot create: %s", parent, strerror(errno));
    if (policy_save(pol, cfg->base, false, NULL, err, sizeof err) != 0) log_fatal("%s", err);
    snprintf(path, sizeof path, "%s/format.json", cfg->base);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", text) < 0 || fclose(f) != 0) log_fatal("%s: cannot write", path);
    log_info("base model saved in %s", cfg->base);
    for (int i = 0; i < x.n; i++) free(x.questions[i]), free(x.targets[i]);
    free(x.questions), free(x.targets), free(text), free(from);
    cJSON_Delete(report);
    train_destroy(&train);
    adamw_destroy(&opt);
    policy_destroy(&pol);
    task_mix_destroy(&mix);
    return 0;
}
