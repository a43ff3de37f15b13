#include "warmstart.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <czmq.h>

#include "game/game_sft.h"
#include "train_sft.h"
#include "node/policy.h"
#include "tasks/task.h"
#include "util/fs.h"
#include "util/log.h"

#define SFT_BATCH 16
#define SFT_LR 3e-4f
#define SFT_WARMUP 20
#define EVAL_QUESTIONS 200
/* in game mode, a pair is plain or one of the three stages' forms, one in
 * four each */
#define SFT_KINDS (1 + GAME_STAGES)
#define GAME_EVAL_PROMPTS 30 /* held-out prompts per stage */
#define GAME_EVAL_SHOWN 3    /* of which the log shows the completions */

static const char *const stage_names[GAME_STAGES] = {"answer", "critique", "resolve"};
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

/* greedy pass@1 per family of the mix on held-out questions drawn as RL
 * draws them, as a JSON object; "mean" is over all of them */
static cJSON *evaluate(policy_t *pol, const task_mix_t *mix, const config_t *cfg)
{
    double *sum = calloc((size_t)task_family_count, sizeof *sum);
    int *count = calloc((size_t)task_family_count, sizeof *count);
    char err[512];
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {0.0f, 0, 1.0f}, .seed = 1};
    for (int i = 0; i < EVAL_QUESTIONS; i++) {
        task_question_t e = {0};
        completion_t c = {0};
        if (task_mix_draw(mix, EVAL_INDEX0 + (uint64_t)i, &e, err, sizeof err) != 0) log_fatal("task mix: %s", err);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e.metadata, "source_dataset"));
        int f = 0;
        while (f < task_family_count - 1 && strcmp(task_families[f]->name, name) != 0) f++;
        if (policy_sample(pol, e.question, 1, &gp, &c, err, sizeof err) != 0) log_fatal("evaluation: %s", err);
        char *a = task_extract_answer(c.text);
        double s = task_score_answer(a, &e, err, sizeof err);
        sum[f] += s > 0 ? s : 0;
        count[f]++;
        free(a);
        completion_free(&c);
        task_question_free(&e);
    }
    cJSON *acc = cJSON_CreateObject();
    double all = 0;
    for (int f = 0; f < task_family_count; f++) {
        if (count[f]) cJSON_AddNumberToObject(acc, task_families[f]->name, round(1000 * sum[f] / count[f]) / 1000);
        all += sum[f];
    }
    cJSON_AddNumberToObject(acc, "mean", round(1000 * all / EVAL_QUESTIONS) / 1000);
    free(sum);
    free(count);
    return acc;
}

/* linear warm-up, then constant. A peak of 3e-3 (with a cosine decay)
 * left the model answering every question of a family with one constant
 * however long it trained; at 3e-4 it learns to read the operands
 * (docs/learning.md) */
static float sft_lr(int step, int steps)
{
    (void)steps;
    return step < SFT_WARMUP ? SFT_LR * (step + 1) / SFT_WARMUP : SFT_LR;
}

/* Pair number index of the warm start: the question its prompt asks (the
 * caller frees it) and its target. In game mode pairs take turns: the
 * plain pair, then the answer, critique and resolve forms (game_sft.h) on
 * the same draw of the mix, so the base still answers plain questions and
 * writes each stage's sections. Off game mode every pair is plain, as it
 * has always been. */
static void sft_pair(const task_mix_t *mix, bool game, uint64_t index, task_question_t *e, char **target)
{
    char err[512];
    if (task_mix_draw(mix, SFT_INDEX0 + index, e, err, sizeof err) != 0) log_fatal("task mix: %s", err);
    int kind = game ? (int)(index % SFT_KINDS) : 0;
    if (kind == 0) {
        *target = answer_text(e->answer);
        return;
    }
    task_question_t problem = *e;
    if (game_sft_pair(&problem, SFT_INDEX0 + index, (game_stage_t)(kind - 1), e, target, err, sizeof err) != 0)
        log_fatal("game warm start: %s (SAPO_TASK_MIX)", err);
    task_question_free(&problem);
}

/* one supervised step on the SFT_BATCH pairs of step `step`; the loss */
static float sft_step(train_t *train, const task_mix_t *mix, bool game, int step)
{
    task_question_t e[SFT_BATCH] = {0};
    const char *q[SFT_BATCH];
    char *a[SFT_BATCH];
    for (int i = 0; i < SFT_BATCH; i++) {
        sft_pair(mix, game, (uint64_t)step * SFT_BATCH + i, &e[i], &a[i]);
        q[i] = e[i].question;
    }
    float loss = train_sft_step(train, q, (const char *const *)a, SFT_BATCH);
    for (int i = 0; i < SFT_BATCH; i++) {
        task_question_free(&e[i]);
        free(a[i]);
    }
    return loss;
}

/* Greedy completions of held-out prompts of stage, built as the warm
 * start builds its pairs: the share in the stage's form and the mean
 * stage reward, as {"form": x, "reward": y}. The first few completions go
 * to the log, to see what the base writes. */
static cJSON *evaluate_stage(policy_t *pol, const task_mix_t *mix, const config_t *cfg, game_stage_t stage)
{
    char err[512];
    model_gen_params_t gp = {.max_new = cfg->max_new_tokens, .sample = {0.0f, 0, 1.0f}, .seed = 1};
    double form = 0, reward = 0;
    for (int i = 0; i < GAME_EVAL_PROMPTS; i++) {
        task_question_t problem = {0}, e;
        completion_t c = {0};
        char *target;
        if (task_mix_draw(mix, EVAL_INDEX0 + (uint64_t)i, &problem, err, sizeof err) != 0 ||
            game_sft_pair(&problem, EVAL_INDEX0 + (uint64_t)i, stage, &e, &target, err, sizeof err) != 0)
            log_fatal("game evaluation: %s", err);
        if (policy_sample(pol, e.question, 1, &gp, &c, err, sizeof err) != 0) log_fatal("game evaluation: %s", err);
        bool formatted = false;
        double r = task_score_completion(c.text, &e, &formatted, err, sizeof err);
        if (r < 0) log_fatal("game evaluation: %s", err);
        form += formatted;
        reward += r;
        if (i < GAME_EVAL_SHOWN)
            log_info("game %s prompt %d: reward %.1f for [%s] (target [%s])", stage_names[stage], i, r, c.text, target);
        free(target);
        completion_free(&c);
        task_question_free(&e);
        task_question_free(&problem);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "form", round(1000 * form / GAME_EVAL_PROMPTS) / 1000);
    cJSON_AddNumberToObject(o, "reward", round(1000 * reward / GAME_EVAL_PROMPTS) / 1000);
    return o;
}

/* per stage, the form and reward of greedy completions (evaluate_stage) */
static cJSON *evaluate_game(policy_t *pol, const task_mix_t *mix, const config_t *cfg)
{
    cJSON *game = cJSON_CreateObject();
    for (int s = 0; s < GAME_STAGES; s++)
        cJSON_AddItemToObject(game, stage_names[s], evaluate_stage(pol, mix, cfg, (game_stage_t)s));
    return game;
}

/* the base model in folder base (its parent made if need be), with its
 * optimizer state and its accuracy */
static void save_base(const char *base, const policy_t *pol, const adamw_t *opt, const char *acc_text)
{
    char path[PATH_MAX + 32], err[512];
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", base);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    if (slash && fs_mkdirs(parent) != 0) log_fatal("%s: cannot create: %s", parent, strerror(errno));
    if (policy_save(pol, base, false, NULL, err, sizeof err) != 0) log_fatal("%s", err);
    /* RL may start from these moments (--warmstart-optimizer) */
    snprintf(path, sizeof path, "%s/optimizer.bin", base);
    if (adamw_save(opt, path) != 0) log_fatal("%s: cannot write", path);
    snprintf(path, sizeof path, "%s/accuracy.json", base);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%s\n", acc_text), fclose(f);
}

int warmstart(const config_t *cfg)
{
    if (strcmp(cfg->model, "tiny") != 0) return formatstart(cfg);
    char path[PATH_MAX + 32], err[512];
    snprintf(path, sizeof path, "%s/config.json", cfg->base);
    struct stat st;
    if (stat(path, &st) == 0) {
        log_info("base model %s exists; delete the folder to train it again", cfg->base);
        return 0;
    }
    task_mix_t *mix = task_mix_new(cfg->task_mix[0] ? cfg->task_mix : NULL, cfg->seed, err, sizeof err);
    if (!mix) log_fatal("task mix: %s", err);
    policy_t *pol = policy_new_bytes(cfg->warmstart_shape, cfg->seed, cfg->system_prompt, err, sizeof err);
    adamw_t *opt = pol ? adamw_new(model_num_params(pol->model)) : NULL;
    if (!opt) log_fatal("base model: %s", pol ? "out of memory" : err);
    config_t sft = *cfg;
    sft.beta = 0; /* supervised: no KL, no reference model */
    train_t *train = train_new(pol, NULL, &sft, opt, err, sizeof err);
    if (!train) log_fatal("%s", err);
    log_info("training the base model (shape %s): %d steps of %d pairs, %zu parameters", cfg->warmstart_shape,
             cfg->warmstart_steps, SFT_BATCH, model_num_params(pol->model));
    bool game = cfg->game == GAME_THREE_STAGE;
    if (game) log_info("game three-stage: one pair in %d plain, the others in the forms of the stages", SFT_KINDS);
    int64_t t0 = zclock_mono();
    for (int step = 0; step < cfg->warmstart_steps && !zsys_interrupted; step++) {
        sft.lr = sft_lr(step, cfg->warmstart_steps);
        float loss = sft_step(train, mix, game, step);
        if (step % 50 == 0 || step + 1 == cfg->warmstart_steps)
            log_info("warm start step %d/%d loss %.4f (%.0f s)", step + 1, cfg->warmstart_steps, loss,
                     (zclock_mono() - t0) / 1000.0);
    }
    if (zsys_interrupted) log_fatal("interrupted: base model not saved");
    log_info("scoring the base model on %d held-out questions", EVAL_QUESTIONS);
    cJSON *acc = evaluate(pol, mix, cfg);
    if (game) cJSON_AddItemToObject(acc, "game", evaluate_game(pol, mix, cfg));
    char *acc_text = cJSON_PrintUnformatted(acc);
    log_info("base model pass@1 per family of the task mix (greedy, %d held-out questions): %s", EVAL_QUESTIONS,
             acc_text);
    save_base(cfg->base, pol, opt, acc_text);
    free(acc_text);
    cJSON_Delete(acc);
    train_destroy(&train);
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
    if (policy_save(&pol, out, false, NULL, err, sizeof err) != 0) log_fatal("%s", err);
    log_info("random model (%zu parameters) saved in %s", model_num_params(pol.model), out);
    model_destroy(&pol.model);
    tokenizer_destroy(&pol.tok);
    return 0;
}
