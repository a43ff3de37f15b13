#include "working.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const cJSON *m, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, key));
}

static long num(const cJSON *m, const char *key, long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    return cJSON_IsNumber(v) ? (long)v->valuedouble : dflt;
}

static long gcd(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b, b = t;
    }
    return a < 0 ? -a : a;
}

/* the working of one entry into buf, or "" */
static void working(const task_entry_t *e, char *buf, size_t n)
{
    const cJSON *m = e->metadata;
    const char *family = str(m, "source_dataset"), *q = e->question;
    buf[0] = '\0';
    if (!family) return;
    if (strcmp(family, "basic_arithmetic") == 0 && str(m, "expression")) {
        snprintf(buf, n, "%s =", str(m, "expression"));
    } else if (strcmp(family, "base_conversion") == 0 && str(m, "source_repr")) {
        long sb = num(m, "source_base", 10);
        if (sb != 10 && num(m, "target_base", 10) != 10)
            snprintf(buf, n, "%s_%ld = %ld =", str(m, "source_repr"), sb, num(m, "decimal_value", 0));
    } else if (strcmp(family, "fraction_simplification") == 0 && strcmp(str(m, "style") ? str(m, "style") : "", "plain") == 0) {
        long a = num(m, "numerator", 0), b = num(m, "denominator", 0);
        if (a > 0 && b > 0) snprintf(buf, n, "%ld/%ld, gcd %ld:", a, b, gcd(a, b));
    } else if (strcmp(family, "calendar_arithmetic") == 0 && str(m, "task")) {
        const char *task = str(m, "task");
        if (strcmp(task, "is_leap_year") == 0) {
            long y = num(m, "year", 0);
            if (y % 4 || y % 100) snprintf(buf, n, "%ld mod 4 = %ld", y, y % 4);
            else snprintf(buf, n, "%ld mod 400 = %ld", y, y % 400);
        } else if (strcmp(task, "weekday_offset") == 0 && strncmp(q, "Today is ", 9) == 0) {
            /* "Today is Sunday, June 26, 2022. ... 5 days ago?" */
            const char *day = q + 9, *comma = strchr(day, ',');
            long off = num(m, "offset_days", 0);
            if (comma && comma - day < 12)
                snprintf(buf, n, "%.*s %c %ld =", (int)(comma - day), day, strstr(q, " ago?") ? '-' : '+',
                         off < 0 ? -off : off);
        }
    }
}

char *working_answer(const task_entry_t *e)
{
    char w[128];
    working(e, w, sizeof w);
    const char *a = e->answer ? e->answer : "";
    size_t n = strlen(w) + strlen(a) + 32;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s <answer>%s</answer>", w[0] ? " " : "", w, a);
    return s;
}
