/* What every family shares: questions and their JSON, configs, metadata,
 * answer extraction, the default scorer and gsm8k's number rule. The
 * registry is families.c's, the task mix mix.c's. */
#include "tasks/task.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "tasks/py.h"

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

/* gsm8k's number rule (task.h; the rules are in fam_gsm8k.c's opening
 * comment), shared with the game's stages */
char *task_plain_number(const char *s, size_t n)
{
    py_strip(&s, &n);
    const char *p = s, *end = s + n;
    int neg = 0, dollar = 0;
    for (int k = 0; k < 2 && p < end; k++) {
        if (*p == '-' && !neg) neg = 1, p++;
        else if (*p == '$' && !dollar) dollar = 1, p++;
    }
    const char *int_start = p;
    size_t digits = 0, group = 0;
    int commas = 0;
    for (; p < end && (*p == ',' || (*p >= '0' && *p <= '9')); p++) {
        if (*p == ',') {
            /* the first group has 1 to 3 digits, each later one 3 */
            if (group == 0 || group > 3 || (commas && group != 3)) return NULL;
            commas = 1, group = 0;
        } else digits++, group++;
    }
    if (digits == 0 || (commas && group != 3)) return NULL;
    const char *int_end = p, *frac = NULL, *frac_end = NULL;
    if (p < end && *p == '.') {
        frac = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        frac_end = p;
        if (frac_end == frac) return NULL;
    }
    if (p != end) return NULL;
    char *out = malloc(n + 2), *w = out;
    if (neg) *w++ = '-';
    const char *q = int_start;
    while (q < int_end && (*q == '0' || *q == ',')) q++;
    if (q == int_end) *w++ = '0';
    for (; q < int_end; q++)
        if (*q != ',') *w++ = *q;
    while (frac && frac_end > frac && frac_end[-1] == '0') frac_end--;
    if (frac && frac_end > frac) {
        *w++ = '.';
        memcpy(w, frac, (size_t)(frac_end - frac));
        w += frac_end - frac;
    }
    *w = '\0';
    if (!strcmp(out, "-0")) strcpy(out, "0");
    return out;
}

int task_numbers_equal(const char *a, const char *b)
{
    if (!a || !b) return 0;
    char *x = task_plain_number(a, strlen(a)), *y = task_plain_number(b, strlen(b));
    int eq = x && y && strcmp(x, y) == 0;
    free(x);
    free(y);
    return eq;
}
