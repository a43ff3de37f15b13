/* The family registry, questions as JSON, answer extraction, the default
 * scorer and the task mix. */
#include "tasks/task.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "tasks/py.h"
#include "tasks/rng.h"

/* One line per family: fam_<name>.c defines task_family_<name>. Families
 * listed with O are opt-in (task_family_opt_in). Those listed with B, the
 * game's stages, are built and opt-in (task_family_built) and scored as
 * whole completions: game/game_task.c defines task_family_<name> and its
 * completion scorer task_completion_<name>. */
#define TASK_FAMILIES(X, O, B) \
    X(base_conversion)         \
    X(basic_arithmetic)        \
    X(fraction_simplification) \
    X(decimal_arithmetic)      \
    X(calendar_arithmetic)     \
    X(binary_matrix)           \
    X(arc_1d)                  \
    X(bf)                      \
    X(propositional_logic)     \
    O(gsm_symbolic)            \
    O(gsm8k)                   \
    B(game_answer)             \
    B(game_critique)           \
    B(game_resolve)

#define DECLARE(name) extern const task_family_t task_family_##name;
#define DECLARE_BUILT(name) \
    DECLARE(name)           \
    double task_completion_##name(const char *, const task_question_t *, bool *, char *, size_t);
TASK_FAMILIES(DECLARE, DECLARE, DECLARE_BUILT)
#define LIST(name) &task_family_##name,
#define SKIP(name)
const task_family_t *const task_families[] = {TASK_FAMILIES(LIST, LIST, LIST) NULL};
const int task_family_count = (int)(sizeof task_families / sizeof task_families[0]) - 1;
static const task_family_t *const opt_in_families[] = {TASK_FAMILIES(SKIP, LIST, LIST) NULL};
static const task_family_t *const built_families[] = {TASK_FAMILIES(SKIP, SKIP, LIST) NULL};
#define SCORER(name) {&task_family_##name, task_completion_##name},
static const struct {
    const task_family_t *family;
    task_completion_scorer_t score;
} completion_scorers[] = {TASK_FAMILIES(SKIP, SKIP, SCORER){NULL, NULL}};

static int listed(const task_family_t *const *list, const task_family_t *f)
{
    for (int i = 0; list[i]; i++)
        if (list[i] == f) return 1;
    return 0;
}

int task_family_opt_in(const task_family_t *f) { return listed(opt_in_families, f); }

int task_family_built(const task_family_t *f) { return listed(built_families, f); }

task_completion_scorer_t task_family_completion_scorer(const task_family_t *f)
{
    for (int i = 0; completion_scorers[i].family; i++)
        if (completion_scorers[i].family == f) return completion_scorers[i].score;
    return NULL;
}

const task_family_t *task_family_find(const char *name)
{
    for (int i = 0; i < task_family_count; i++)
        if (strcmp(task_families[i]->name, name) == 0) return task_families[i];
    return NULL;
}

const task_family_t *task_family_of_key(const char *key)
{
    const char *hash = strchr(key, '#');
    size_t n = hash ? (size_t)(hash - key) : strlen(key);
    for (int i = 0; i < task_family_count; i++)
        if (strlen(task_families[i]->name) == n && strncmp(task_families[i]->name, key, n) == 0)
            return task_families[i];
    return NULL;
}

void task_question_free(task_question_t *e)
{
    if (!e) return;
    free(e->question);
    free(e->answer);
    cJSON_Delete(e->metadata);
    memset(e, 0, sizeof *e);
}

char *task_strdupf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

cJSON *task_family_config(const task_family_t *f, const cJSON *user, char *err, size_t errlen)
{
    cJSON *config = f->default_config();
    if (user && !cJSON_IsObject(user)) {
        snprintf(err, errlen, "%s config: expected a JSON object", f->name);
        cJSON_Delete(config);
        return NULL;
    }
    const cJSON *field;
    cJSON_ArrayForEach(field, user)
    {
        if (!cJSON_HasObjectItem(config, field->string)) {
            snprintf(err, errlen, "%s config: unknown field %s", f->name, field->string);
            cJSON_Delete(config);
            return NULL;
        }
        cJSON_ReplaceItemInObjectCaseSensitive(config, field->string, cJSON_Duplicate(field, 1));
    }
    if (f->validate_config(config, err, errlen) != 0) {
        cJSON_Delete(config);
        return NULL;
    }
    return config;
}

static const cJSON *config_field(const cJSON *config, const char *key, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
    if (!v) snprintf(err, errlen, "config field %s is missing", key);
    return v;
}

int task_config_int(const cJSON *config, const char *key, int64_t *out, char *err, size_t errlen)
{
    const cJSON *v = config_field(config, key, err, errlen);
    if (!v) return -1;
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || d != floor(d) || fabs(d) > 9007199254740992.0) {
        snprintf(err, errlen, "config field %s: expected an integer", key);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

int task_config_double(const cJSON *config, const char *key, double *out, char *err, size_t errlen)
{
    const cJSON *v = config_field(config, key, err, errlen);
    if (!v) return -1;
    if (!cJSON_IsNumber(v)) {
        snprintf(err, errlen, "config field %s: expected a number", key);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

int task_config_bool(const cJSON *config, const char *key, int *out, char *err, size_t errlen)
{
    const cJSON *v = config_field(config, key, err, errlen);
    if (!v) return -1;
    if (!cJSON_IsBool(v)) {
        snprintf(err, errlen, "config field %s: expected true or false", key);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

const cJSON *task_config_strings(const cJSON *config, const char *key, char *err, size_t errlen)
{
    const cJSON *v = config_field(config, key, err, errlen);
    if (!v) return NULL;
    int ok = cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, v) ok = ok && cJSON_IsString(s);
    if (!ok) {
        snprintf(err, errlen, "config field %s: expected a non-empty list of strings", key);
        return NULL;
    }
    return v;
}

cJSON *task_metadata_new(const char *family, uint64_t index)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "source_dataset", family);
    cJSON_AddNumberToObject(m, "source_index", (double)index);
    return m;
}

cJSON *task_json_pair(double lo, double hi)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
    return a;
}

/* The family of a question, metadata.source_dataset; NULL with err */
static const task_family_t *question_family(const task_question_t *q, char *err, size_t errlen)
{
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(q->metadata, "source_dataset");
    if (!cJSON_IsString(ds)) {
        snprintf(err, errlen, "metadata.source_dataset is missing or not a string");
        return NULL;
    }
    const task_family_t *f = task_family_find(ds->valuestring);
    if (!f) snprintf(err, errlen, "unknown family %s", ds->valuestring);
    return f;
}

double task_score_answer(const char *answer, const task_question_t *q, char *err, size_t errlen)
{
    const task_family_t *f = question_family(q, err, errlen);
    if (!f) return -1;
    if (!f->score) {
        snprintf(err, errlen, "family %s scores whole completions, not answers", f->name);
        return -1;
    }
    return f->score(answer, q);
}

double task_score_completion(const char *completion, const task_question_t *q, bool *formatted, char *err,
                             size_t errlen)
{
    *formatted = false;
    const task_family_t *f = question_family(q, err, errlen);
    if (!f) return -1;
    task_completion_scorer_t whole = task_family_completion_scorer(f);
    if (whole) return whole(completion, q, formatted, err, errlen);
    char *answer = task_extract_answer(completion);
    double s = f->score(answer, q);
    *formatted = answer != NULL;
    free(answer);
    return s;
}

/* reasoning-gym: the last match of <answer>\s?(.*?)\s?</answer>, stripped.
 * A match runs from an opening tag to the first closing tag after it, and
 * the search resumes after that closing tag. */
char *task_extract_answer(const char *completion)
{
    static const char open[] = "<answer>", close[] = "</answer>";
    const char *pos = completion, *best = NULL, *best_end = NULL;
    for (;;) {
        const char *p = strstr(pos, open);
        if (!p) break;
        const char *q = strstr(p + sizeof open - 1, close);
        if (!q) break;
        best = p + sizeof open - 1;
        best_end = q;
        pos = q + sizeof close - 1;
    }
    if (!best) return NULL;
    size_t n = (size_t)(best_end - best);
    py_strip(&best, &n);
    return strndup(best, n);
}

double task_score_default(const char *answer, const char *truth)
{
    if (!answer || !*answer || !truth) return 0.0;
    if (strcmp(answer, truth) == 0) return 1.0;
    if (strstr(answer, truth)) return (double)py_len(truth, strlen(truth)) / (double)py_len(answer, strlen(answer));
    return 0.0;
}

cJSON *task_question_to_json(const task_question_t *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "question", e->question);
    if (e->answer) cJSON_AddStringToObject(o, "answer", e->answer);
    else cJSON_AddNullToObject(o, "answer");
    cJSON_AddItemToObject(o, "metadata", cJSON_Duplicate(e->metadata, 1));
    return o;
}

int task_question_from_json(const cJSON *obj, task_question_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(obj)) {
        snprintf(err, errlen, "entry is not a JSON object");
        return -1;
    }
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(obj, "question");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "answer");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    /* some families (propositional_logic) have no single answer: null */
    const char *bad = !cJSON_IsString(q)                       ? "question is missing or not a string"
                      : !cJSON_IsString(a) && !cJSON_IsNull(a) ? "answer is missing or not a string or null"
                      : !cJSON_IsObject(m)                     ? "metadata is missing or not an object"
                      : !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "source_dataset"))
                          ? "metadata.source_dataset is missing or not a string"
                          : NULL;
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return -1;
    }
    out->question = strdup(q->valuestring);
    out->answer = cJSON_IsString(a) ? strdup(a->valuestring) : NULL;
    out->metadata = cJSON_Duplicate(m, 1);
    return 0;
}

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
