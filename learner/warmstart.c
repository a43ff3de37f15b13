#include "warmstart.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <czmq.h>

#include "node/learn.h"
#include "node/policy.h"
#include "tasks/task.h"
#include "util/fs.h"
#include "util/log.h"

#define SFT_BATCH 16
#define EVAL_PER_FAMILY 8
/* question indices of the warm start and of its evaluation never meet
 * those of RL rounds (which count up from 0) */
#define SFT_INDEX0 (1ull << 40)
#define EVAL_INDEX0 (1ull << 41)

static char *answer_text(const char *answer)
{
    size_t n = strlen(answer) + 32;
    char *s = malloc(n);
    snprintf(s, n, " <answer>%s</answer>", answer);
    return s;
}

/* greedy pass@1 per family on held-out questions, as a JSON object */
static cJSON *evaluate(policy_t *pol, const config_t *cfg)
{
    cJSON *acc = cJSON_CreateObject();
    char err[512];
    for (int f = 0; f < task_family_count; f++) {
        const task_family_t *fam = task_families[f];
        cJSON *conf = fam->default_config();
        double sum = 0;
        for (int i = 0; i < EVAL_PER_FAMILY; i++) {
            task_entry_t e = {0};
            if (fam->generate(conf, cfg->seed, EVAL_INDEX0 + (uint64_t)i, &e, err, sizeof err) != 0) continue;
            completion_t c[2] = {0};
            model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {0.0f, 0, 1.0f}, .seed = 1};
            if (policy_sample(pol, e.question, 2, &gp, c, err, sizeof err) == 0) {
                char *a = task_extract_answer(c[0].text);
                double s = task_score_entry(a, &e, err, sizeof err);
                sum += s > 0 ? s : 0;
                free(a);
            }
            completion_free(&c[0]);
            completion_free(&c[1]);
            task_entry_free(&e);
        }
        cJSON_Delete(conf);
        cJSON_AddNumberToObject(acc, fam->name, sum / EVAL_PER_FAMILY);
    }
    return acc;
}

int warmstart(const config_t *cfg)
{
    char path[PATH_MAX + 32], err[512];
    snprintf(path, sizeof path, "%s/config.json", cfg->base);
    struct stat st;
    if (stat(path, &st) == 0) {
        log_info("base model %s exists; delete the folder to train it again", cfg->base);
        return 0;
    }
    task_mix_t *mix = task_mix_new(cfg->task_mix[0] ? cfg->task_mix : NULL, cfg->seed, err, sizeof err);
    if (!mix) log_fatal("task mix: %s", err);
    policy_t *pol = policy_new_tiny(cfg->seed, err, sizeof err);
    adamw_t *opt = pol ? adamw_new(model_num_params(pol->model)) : NULL;
    if (!opt) log_fatal("tiny model: %s", pol ? "out of memory" : err);
    config_t sft = *cfg;
    sft.lr = 2e-3f;
    learn_t *learn = learn_new(pol, NULL, &sft, opt, err, sizeof err);
    if (!learn) log_fatal("%s", err);
    log_info("training the tiny base model: %d steps of %d pairs, %zu parameters", cfg->warmstart_steps, SFT_BATCH,
             model_num_params(pol->model));
    int64_t t0 = zclock_mono();
    for (int step = 0; step < cfg->warmstart_steps && !zsys_interrupted; step++) {
        task_entry_t e[SFT_BATCH] = {0};
        const char *q[SFT_BATCH];
        char *a[SFT_BATCH];
        for (int i = 0; i < SFT_BATCH; i++) {
            if (task_mix_draw(mix, SFT_INDEX0 + (uint64_t)step * SFT_BATCH + i, &e[i], err, sizeof err) != 0)
                log_fatal("task mix: %s", err);
            q[i] = e[i].question;
            a[i] = answer_text(e[i].answer);
        }
        float loss = learn_sft_step(learn, q, (const char *const *)a, SFT_BATCH);
        if (step % 50 == 0 || step + 1 == cfg->warmstart_steps)
            log_info("warm start step %d/%d loss %.4f (%.0f s)", step + 1, cfg->warmstart_steps, loss,
                     (zclock_mono() - t0) / 1000.0);
        for (int i = 0; i < SFT_BATCH; i++) {
            task_entry_free(&e[i]);
            free(a[i]);
        }
    }
    if (zsys_interrupted) log_fatal("interrupted: base model not saved");
    cJSON *acc = evaluate(pol, cfg);
    char *acc_text = cJSON_PrintUnformatted(acc);
    log_info("base model pass@1 per family (greedy, %d held-out questions each): %s", EVAL_PER_FAMILY, acc_text);
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", cfg->base);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    if (slash && fs_mkdirs(parent) != 0) log_fatal("%s: cannot create: %s", parent, strerror(errno));
    if (policy_save(pol, cfg->base, err, sizeof err) != 0) log_fatal("%s", err);
    snprintf(path, sizeof path, "%s/accuracy.json", cfg->base);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%s\n", acc_text), fclose(f);
    free(acc_text);
    cJSON_Delete(acc);
    learn_destroy(&learn);
    adamw_destroy(&opt);
    policy_destroy(&pol);
    task_mix_destroy(&mix);
    log_info("base model saved in %s", cfg->base);
    return 0;
}

int init_random(const char *config_json, const char *out, uint64_t seed)
{
    char err[512];
    model_config_t mc;
    if (model_config_load(&mc, config_json, err, sizeof err) != 0) log_fatal("%s", err);
    policy_t pol = {.tok = tokenizer_byte_new(), .fmt = PROMPT_PLAIN};
    pol.model = model_new_random(&mc, seed, err, sizeof err);
    if (!pol.model) log_fatal("%s: %s", config_json, err);
    if (policy_save(&pol, out, err, sizeof err) != 0) log_fatal("%s", err);
    log_info("random model (%zu parameters) saved in %s", model_num_params(pol.model), out);
    model_destroy(&pol.model);
    tokenizer_destroy(&pol.tok);
    return 0;
}
