/* base_conversion: write a number given in one base in another base (2-36,
 * lowercase letters for digits above 9). Scored by the default scorer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/rng.h"
#include "tasks/task.h"

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "min_base", 2);
    cJSON_AddNumberToObject(c, "max_base", 16);
    cJSON_AddNumberToObject(c, "min_value", 0);
    cJSON_AddNumberToObject(c, "max_value", 1000);
    return c;
}

typedef struct {
    int64_t min_base, max_base, min_value, max_value;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    return task_config_int(c, "min_base", &k->min_base, err, errlen) ||
                   task_config_int(c, "max_base", &k->max_base, err, errlen) ||
                   task_config_int(c, "min_value", &k->min_value, err, errlen) ||
                   task_config_int(c, "max_value", &k->max_value, err, errlen)
               ? -1
               : 0;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const char *bad = !(k.min_base >= 2 && k.min_base <= 36) ? "min_base must be between 2 and 36"
                      /* reasoning-gym loops forever drawing a target base unequal to the
                       * source base when min_base == max_base */
                      : !(k.max_base > k.min_base && k.max_base <= 36)
                          ? "max_base must be above min_base and at most 36"
                      : k.min_value < 0            ? "min_value must be >= 0"
                      : k.max_value <= k.min_value ? "max_value must be > min_value"
                                                   : NULL;
    if (bad) snprintf(err, errlen, "base_conversion config: %s", bad);
    return bad ? -1 : 0;
}

static void to_base(int64_t v, int base, char *out)
{
    char tmp[72];
    int n = 0;
    do {
        int d = (int)(v % base);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v);
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = '\0';
}

static const char *base_name(int base, char *buf, size_t len)
{
    if (base == 2) return "binary";
    if (base == 16) return "hexadecimal";
    snprintf(buf, len, "base-%d", base);
    return buf;
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    int64_t value = task_rng_range(&r, k.min_value, k.max_value);
    int src = (int)task_rng_range(&r, k.min_base, k.max_base);
    /* a uniform draw among the other bases, what redrawing until unequal gives */
    int dst = (int)task_rng_range(&r, k.min_base, k.max_base - 1);
    if (dst >= src) dst++;
    char src_repr[72], dst_repr[72], n1[16], n2[16];
    to_base(value, src, src_repr);
    to_base(value, dst, dst_repr);
    out->question =
        task_strdupf("Convert the %s number %s to %s. Use the lowercase letters a-z for digits worth 10 or more.\n"
                     "Give only the converted number, without a base prefix.",
                     base_name(src, n1, sizeof n1), src_repr, base_name(dst, n2, sizeof n2));
    out->answer = strdup(dst_repr);
    cJSON *m = out->metadata = task_metadata_new("base_conversion", index);
    cJSON_AddNumberToObject(m, "decimal_value", (double)value);
    cJSON_AddNumberToObject(m, "source_base", src);
    cJSON_AddNumberToObject(m, "target_base", dst);
    cJSON_AddStringToObject(m, "source_repr", src_repr);
    cJSON_AddStringToObject(m, "target_repr", dst_repr);
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON_AddItemToObject(d, "base", task_json_pair((double)k.min_base, (double)k.max_base));
    cJSON_AddItemToObject(d, "value", task_json_pair((double)k.min_value, (double)k.max_value));
    return 0;
}

static double score(const char *answer, const task_question_t *e) { return task_score_default(answer, e->answer); }

const task_family_t task_family_base_conversion = {
    "base_conversion", default_config, validate_config, generate, score,
};
