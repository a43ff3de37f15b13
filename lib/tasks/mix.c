/* The task mix: families, each with a weight and a config, drawn by
 * (seed, index). */
#include "tasks/task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/rng.h"

typedef struct {
    const task_family_t *family;
    cJSON *config;
    double cumulative; /* sum of the weights up to and including this one */
    uint64_t seed;
} mix_part_t;

struct task_mix {
    mix_part_t *parts;
    int count;
    uint64_t seed;
};

static int mix_add(task_mix_t *mix, const char *key, const task_family_t *f, double weight, const cJSON *user,
                   char *err, size_t errlen)
{
    if (task_family_built(f)) {
        snprintf(
            err, errlen,
            "task mix: %s cannot be drawn: its questions are built from peers' completions by the sampler in game mode",
            f->name);
        return -1;
    }
    if (!(weight >= 0) || isinf(weight)) {
        snprintf(err, errlen, "task mix: weight of %s must be a finite number >= 0", f->name);
        return -1;
    }
    if (weight == 0) return 0;
    cJSON *config = task_family_config(f, user, err, errlen);
    if (!config) return -1;
    mix_part_t *p = &mix->parts[mix->count];
    /* each key draws from its own stream, so adding a family to the mix
     * does not change another family's questions for a given seed */
    uint64_t h = 1469598103934665603ull;
    for (const char *c = key; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    uint64_t k = mix->seed ^ h;
    p->family = f;
    p->config = config;
    p->seed = splitmix64(&k);
    p->cumulative = (mix->count ? mix->parts[mix->count - 1].cumulative : 0) + weight;
    mix->count++;
    return 0;
}

task_mix_t *task_mix_new(const char *spec_json, uint64_t seed, char *err, size_t errlen)
{
    task_mix_t *mix = calloc(1, sizeof *mix);
    cJSON *spec = spec_json ? cJSON_Parse(spec_json) : NULL;
    /* a part per key: a family may come under several labels */
    int keys = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(spec, "families"));
    mix->parts = calloc((size_t)(keys > task_family_count ? keys : task_family_count) + 1, sizeof *mix->parts);
    mix->seed = seed;
    int rc = 0;
    if (!spec_json) {
        for (int i = 0; i < task_family_count && rc == 0; i++)
            if (!task_family_opt_in(task_families[i]))
                rc = mix_add(mix, task_families[i]->name, task_families[i], 1.0, NULL, err, errlen);
    } else {
        const cJSON *fams = cJSON_GetObjectItemCaseSensitive(spec, "families");
        if (!cJSON_IsObject(fams)) {
            snprintf(err, errlen, "task mix: expected {\"families\": {NAME: {\"weight\": W, \"config\": {...}}}}");
            rc = -1;
            fams = NULL;
        }
        const cJSON *item;
        cJSON_ArrayForEach(item, fams)
        {
            const task_family_t *f = task_family_of_key(item->string);
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(item, "weight");
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(item, "config");
            if (!f) snprintf(err, errlen, "task mix: unknown family %s", item->string);
            else if (!cJSON_IsObject(item) || (w && !cJSON_IsNumber(w)))
                snprintf(err, errlen, "task mix: %s: expected {\"weight\": NUMBER, \"config\": {...}}", item->string);
            else {
                int dup = 0;
                for (const cJSON *o = fams->child; o != item; o = o->next) dup |= strcmp(o->string, item->string) == 0;
                if (dup) snprintf(err, errlen, "task mix: %s listed twice", item->string);
                else if (mix_add(mix, item->string, f, w ? w->valuedouble : 1.0, c, err, errlen) == 0) continue;
            }
            rc = -1;
            break;
        }
    }
    cJSON_Delete(spec);
    if (rc == 0 && mix->count == 0) {
        snprintf(err, errlen, "task mix: no family with a weight above 0");
        rc = -1;
    }
    if (rc != 0) task_mix_destroy(&mix);
    return mix;
}

void task_mix_destroy(task_mix_t **self_p)
{
    task_mix_t *mix = *self_p;
    if (!mix) return;
    for (int i = 0; i < mix->count; i++) cJSON_Delete(mix->parts[i].config);
    free(mix->parts);
    free(mix);
    *self_p = NULL;
}

int task_mix_draw(const task_mix_t *mix, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    task_rng_t r;
    task_rng_init(&r, mix->seed, index);
    double u = task_rng_double(&r) * mix->parts[mix->count - 1].cumulative;
    int i = 0;
    while (i < mix->count - 1 && u >= mix->parts[i].cumulative) i++;
    const mix_part_t *p = &mix->parts[i];
    return p->family->generate(p->config, p->seed, index, out, err, errlen);
}
