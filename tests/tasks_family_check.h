/* Checks every task family test runs on its family: the question's own answer
 * scores 1.0, the same (config, seed, index) gives the same question, many
 * questions generate without a crash or hang, and the scorer agrees with
 * reasoning-gym on committed fixtures. Include after check.h. */
#ifndef SAPO_TASKS_FAMILY_CHECK_H
#define SAPO_TASKS_FAMILY_CHECK_H

#include <stdint.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "tasks/task.h"

static inline double family_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a complete config from JSON text (NULL for the defaults) */
static inline cJSON *family_config(const task_family_t *f, const char *json)
{
    char err[256] = "";
    cJSON *user = json ? cJSON_Parse(json) : NULL;
    cJSON *config = task_family_config(f, user, err, sizeof err);
    cJSON_Delete(user);
    EXPECTF(config, "%s config %s: %s", f->name, json ? json : "(defaults)", err);
    return config;
}

static inline char *family_question_text(const task_question_t *e)
{
    cJSON *j = task_question_to_json(e);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

/* count questions of config from seed: each generates, its answer scores
 * 1.0, and generating it again gives the same question. check is called on
 * each question for family-specific checks (may be NULL). */
typedef void (*family_question_check_fn)(const task_question_t *e);

static inline void family_check_questions(const task_family_t *f, const char *config_json, uint64_t seed, int count,
                                          family_question_check_fn check)
{
    cJSON *config = family_config(f, config_json);
    if (!config) return;
    int failures = 0;
    for (int i = 0; i < count && failures < 5; i++) {
        task_question_t a = {0}, b = {0};
        char err[256] = "";
        int rc = f->generate(config, seed, (uint64_t)i, &a, err, sizeof err);
        EXPECTF(rc == 0, "%s question %d: %s", f->name, i, err);
        if (rc != 0) {
            failures++;
            continue;
        }
        double s = f->score(a.answer, &a);
        EXPECTF(s == 1.0, "%s question %d scores %g with its own answer %s", f->name, i, s, a.answer);
        failures += s != 1.0;
        EXPECT(f->generate(config, seed, (uint64_t)i, &b, err, sizeof err) == 0);
        char *ta = family_question_text(&a), *tb = family_question_text(&b);
        EXPECTF(strcmp(ta, tb) == 0, "%s question %d differs on a second generation", f->name, i);
        free(ta);
        free(tb);
        if (check) check(&a);
        task_question_free(&a);
        task_question_free(&b);
    }
    cJSON_Delete(config);
}

/* Each of n configs is refused with an error naming its field */
static inline void family_check_bad_configs(const task_family_t *f, const char *const *configs,
                                            const char *const *fields, int n)
{
    for (int i = 0; i < n; i++) {
        char err[256] = "";
        cJSON *c = cJSON_Parse(configs[i]);
        cJSON *config = task_family_config(f, c, err, sizeof err);
        EXPECTF(!config && strstr(err, fields[i]), "%s: %s", configs[i], err);
        cJSON_Delete(config);
        cJSON_Delete(c);
    }
}

/* Generates n questions of the default config (a million with
 * SAPO_TEST_FULL=1) and prints the rate. */
static inline void family_check_many(const task_family_t *f, int n)
{
    if (getenv("SAPO_TEST_FULL")) n = 1000000;
    cJSON *config = family_config(f, NULL);
    if (!config) return;
    double t0 = family_now();
    int bad = 0;
    for (int i = 0; i < n; i++) {
        task_question_t e = {0};
        char err[256] = "";
        if (f->generate(config, 7, (uint64_t)i, &e, err, sizeof err) != 0) {
            if (bad++ < 3) fprintf(stderr, "%s question %d: %s\n", f->name, i, err);
        }
        task_question_free(&e);
    }
    double dt = family_now() - t0;
    EXPECTF(bad == 0, "%d of %d %s questions failed", bad, n, f->name);
    printf("# %s: %d questions in %.2f s (%.0f questions/s)\n", f->name, n, dt, n / dt);
    cJSON_Delete(config);
}

/* Every line of a fixture file written by tests/oracle/tasks_variants.py
 * or tasks_fixtures.py: a question {question, answer, metadata[, seed, index,
 * config]} with either variants: [[response, score], ...] or one response
 * and its score. Our score of each response (null for None) equals
 * reasoning-gym's within 1e-6, and a line with a seed regenerates to the
 * same question. Returns the number of answers checked, -1 when the file is
 * absent. */
static inline int family_check_fixtures(const task_family_t *f, const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    char *line = NULL;
    size_t cap = 0;
    int lines = 0, answers = 0, mismatches = 0;
    while (getline(&line, &cap, fp) > 0) {
        cJSON *j = cJSON_Parse(line);
        lines++;
        EXPECTF(j, "%s:%d: not JSON", path, lines);
        if (!j) continue;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(j, "seed");
        cJSON *pairs = cJSON_GetObjectItemCaseSensitive(j, "variants"), *single = NULL;
        if (!pairs) {
            pairs = single = cJSON_CreateArray();
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j, "response"), 1));
            cJSON_AddItemToArray(pair, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j, "score"), 1));
            cJSON_AddItemToArray(single, pair);
        }
        task_question_t e = {0};
        e.answer = cJSON_IsString(a) ? a->valuestring : NULL;
        e.metadata = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        const cJSON *pair;
        cJSON_ArrayForEach(pair, pairs)
        {
            const cJSON *r = cJSON_GetArrayItem(pair, 0), *want = cJSON_GetArrayItem(pair, 1);
            EXPECTF(r && cJSON_IsNumber(want), "%s:%d: a variant is not [response, score]", path, lines);
            if (!r || !cJSON_IsNumber(want)) continue;
            double got = f->score(cJSON_IsString(r) ? r->valuestring : NULL, &e);
            answers++;
            if (!(fabs(got - want->valuedouble) <= 1e-6) && mismatches++ < 10)
                fprintf(stderr, "%s:%d: response %s: ours %.9g, reasoning-gym %.9g\n", path, lines,
                        cJSON_IsString(r) ? r->valuestring : "None", got, want->valuedouble);
        }
        cJSON_Delete(single);
        if (cJSON_IsNumber(seed)) {
            char err[256] = "";
            cJSON *config = task_family_config(f, cJSON_GetObjectItemCaseSensitive(j, "config"), err, sizeof err);
            task_question_t g = {0};
            uint64_t index = (uint64_t)cJSON_GetObjectItemCaseSensitive(j, "index")->valuedouble;
            EXPECTF(config && f->generate(config, (uint64_t)seed->valuedouble, index, &g, err, sizeof err) == 0,
                    "%s:%d: %s", path, lines, err);
            cJSON *want = cJSON_CreateObject(), *got = task_question_to_json(&g);
            cJSON_AddItemToObject(want, "question",
                                  cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j, "question"), 1));
            cJSON_AddItemToObject(want, "answer", cJSON_Duplicate(a, 1));
            cJSON_AddItemToObject(want, "metadata", cJSON_Duplicate(e.metadata, 1));
            EXPECTF(cJSON_Compare(want, got, 1), "%s:%d: seed %g index %llu generates another question", path, lines,
                    seed->valuedouble, (unsigned long long)index);
            cJSON_Delete(want);
            cJSON_Delete(got);
            cJSON_Delete(config);
            task_question_free(&g);
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(fp);
    EXPECTF(mismatches == 0, "%s: %d of %d scores differ from reasoning-gym", path, mismatches, answers);
    printf("# %s: %d questions, %d answers\n", path, lines, answers);
    return answers;
}

#endif
