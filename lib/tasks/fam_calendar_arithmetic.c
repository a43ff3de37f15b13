/* calendar_arithmetic: seven kinds of question about dates in one year
 * (weekday after an offset, weekday of a date, weekday given January 1st,
 * the nth weekday of a month, counting a weekday or business days in a
 * range, leap years). Weekday answers get 0.1 for another weekday name and
 * 0.05 for one in other letter case; counts get exp(-5 * relative error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "tasks/py.h"
#include "tasks/rng.h"
#include "tasks/task.h"

enum {
    WEEKDAY_OFFSET,
    WEEKDAY_OF_DATE,
    WEEKDAY_FROM_FIRST,
    RECURRING_EVENT,
    COUNT_DAYS,
    COUNT_BUSINESS_DAYS,
    IS_LEAP_YEAR,
    NTASKS
};
static const char *const task_names[NTASKS] = {
    "weekday_offset",      "weekday_of_date", "weekday_of_date_from_first_date", "recurring_event_day", "count_days",
    "count_business_days", "is_leap_year",
};
static const char *const weekdays[7] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
static const char *const months[13] = {"",     "January", "February",  "March",   "April",    "May",     "June",
                                       "July", "August",  "September", "October", "November", "December"};

/* Proleptic Gregorian calendar, days counted from 0001-01-01 = day 0
 * (a Monday), the range of Python's datetime.date. */
static int is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
static int month_days(int64_t y, int m)
{
    static const int d[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m];
}
static int64_t day_number(int64_t y, int m, int d)
{
    int64_t py = y - 1, n = py * 365 + py / 4 - py / 100 + py / 400;
    for (int i = 1; i < m; i++) n += month_days(y, i);
    return n + d - 1;
}
typedef struct {
    int64_t y;
    int m, d;
} date_t;
static date_t from_day_number(int64_t n)
{
    date_t t = {1 + n / 366, 1, 1};
    while (day_number(t.y + 1, 1, 1) <= n) t.y++;
    n -= day_number(t.y, 1, 1);
    while (n >= month_days(t.y, t.m)) n -= month_days(t.y, t.m++);
    t.d = (int)n + 1;
    return t;
}
static int weekday(int64_t n) { return (int)(n % 7); }
static void iso(int64_t n, char *buf)
{
    date_t t = from_day_number(n);
    snprintf(buf, 16, "%04d-%02d-%02d", (int)t.y, t.m, t.d);
}
/* "Tuesday, March 5, 2024" or without the year */
static void long_date(int64_t n, int with_year, char *buf, size_t len)
{
    date_t t = from_day_number(n);
    if (with_year) snprintf(buf, len, "%s, %s %d, %d", weekdays[weekday(n)], months[t.m], t.d, (int)t.y);
    else snprintf(buf, len, "%s, %s %d", weekdays[weekday(n)], months[t.m], t.d);
}

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "year", 2022);
    cJSON_AddItemToObject(c, "tasks", cJSON_CreateStringArray(task_names, NTASKS));
    cJSON_AddNumberToObject(c, "offset_upper_bound", 100);
    cJSON_AddNumberToObject(c, "leap_year_range", 200);
    return c;
}

typedef struct {
    int64_t year, offset, leap_range;
    const cJSON *tasks;
} config_t;

static int read_config(const cJSON *c, config_t *k, char *err, size_t errlen)
{
    if (task_config_int(c, "year", &k->year, err, errlen) ||
        task_config_int(c, "offset_upper_bound", &k->offset, err, errlen) ||
        task_config_int(c, "leap_year_range", &k->leap_range, err, errlen))
        return -1;
    k->tasks = task_config_strings(c, "tasks", err, errlen);
    return k->tasks ? 0 : -1;
}

/* reasoning-gym lowercases the task names it is given */
static int task_index(const char *name)
{
    char *low = py_lower(name, strlen(name));
    int found = -1;
    for (int i = 0; i < NTASKS; i++)
        if (strcmp(low, task_names[i]) == 0) found = i;
    free(low);
    return found;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    const cJSON *t;
    cJSON_ArrayForEach(t, k.tasks) if (task_index(t->valuestring) < 0)
    {
        snprintf(err, errlen, "calendar_arithmetic config: unknown task %s", t->valuestring);
        return -1;
    }
    const char *bad =
        k.year < 1 || k.year > 9999 ? "year must be between 1 and 9999"
        : k.offset < 1              ? "offset_upper_bound must be at least 1"
        : k.leap_range < 0          ? "leap_year_range must be >= 0"
        /* every date reachable from the year must exist in
         * Python's calendar, or reasoning-gym would crash */
        : day_number(k.year, 1, 1) - k.offset < 0 || day_number(k.year, 12, 31) + k.offset > day_number(9999, 12, 31)
            ? "year +- offset_upper_bound days must stay within years 1 to 9999"
        : k.leap_range > 1000000 ? "leap_year_range must be at most 1000000"
                                 : NULL;
    if (bad) snprintf(err, errlen, "calendar_arithmetic config: %s", bad);
    return bad ? -1 : 0;
}

static int64_t random_day_in_year(task_rng_t *r, int64_t y)
{
    int m = (int)task_rng_range(r, 1, 12);
    return day_number(y, m, (int)task_rng_range(r, 1, month_days(y, m)));
}

static const char *const weekday_hint = "Answer with the full English name of the weekday, e.g. Friday.";
static const char *const count_hint = "Answer with a whole number.";

/* Each kind of question draws from r in reasoning-gym's order and adds its
 * metadata fields to m in reasoning-gym's order. */
static void ask_weekday_offset(task_rng_t *r, const config_t *k, task_question_t *out, cJSON *m)
{
    char a[64], ia[16], ib[16];
    int64_t start = random_day_in_year(r, k->year), off = task_rng_range(r, 1, k->offset);
    if (task_rng_below(r, 2)) off = -off;
    long_date(start, 1, a, sizeof a);
    out->question = off > 0 ? task_strdupf("Today is %s. Which day of the week is it %lld days from now? %s", a,
                                           (long long)off, weekday_hint)
                            : task_strdupf("Today is %s. Which day of the week was it %lld days ago? %s", a,
                                           (long long)-off, weekday_hint);
    out->answer = strdup(weekdays[weekday(start + off)]);
    iso(start, ia);
    iso(start + off, ib);
    cJSON_AddStringToObject(m, "start_date", ia);
    cJSON_AddNumberToObject(m, "offset_days", (double)off);
    cJSON_AddStringToObject(m, "target_date", ib);
}

static void ask_weekday_of_date(task_rng_t *r, const config_t *k, task_question_t *out, cJSON *m)
{
    char ia[16];
    int64_t day = random_day_in_year(r, k->year);
    date_t t = from_day_number(day);
    out->question = task_strdupf("On which day of the week did %s %d, %lld fall? %s", months[t.m], t.d,
                                 (long long)k->year, weekday_hint);
    out->answer = strdup(weekdays[weekday(day)]);
    iso(day, ia);
    cJSON_AddStringToObject(m, "target_date", ia);
}

static void ask_weekday_from_first(task_rng_t *r, const config_t *k, task_question_t *out, cJSON *m)
{
    char ia[16];
    int64_t y = k->year, jan1 = day_number(y, 1, 1), dec31 = day_number(y, 12, 31);
    int first = (int)task_rng_below(r, 7);
    int64_t last = jan1 + k->offset < dec31 ? jan1 + k->offset : dec31;
    int64_t day = task_rng_range(r, jan1 + 1, last), delta = day - jan1;
    date_t t = from_day_number(day);
    out->question = task_strdupf("Suppose January 1 of some year is a %s. Which day of the week is %s %d of "
                                 "that same year? %s",
                                 weekdays[first], months[t.m], t.d, weekday_hint);
    out->answer = strdup(weekdays[(first + delta) % 7]);
    iso(day, ia);
    cJSON_AddNumberToObject(m, "year", (double)y);
    cJSON_AddStringToObject(m, "first_day", weekdays[first]);
    cJSON_AddStringToObject(m, "target_date", ia);
    cJSON_AddNumberToObject(m, "delta_days", (double)delta);
}

static void ask_recurring_event(task_rng_t *r, const config_t *k, task_question_t *out, cJSON *m)
{
    static const char *const ordinals[5] = {"first", "second", "third", "fourth", "last"};
    int64_t y = k->year;
    int month = (int)task_rng_range(r, 1, 12), ord = (int)task_rng_below(r, 5), wd = (int)task_rng_below(r, 7);
    int len = month_days(y, month), event = -1;
    int64_t d1 = day_number(y, month, 1);
    int first = 1 + (wd - weekday(d1) + 7) % 7;
    if (ord < 4) event = first + 7 * ord <= len ? first + 7 * ord : -1;
    else event = first + 7 * ((len - first) / 7);
    out->question = task_strdupf("A club meets on the %s %s of %s %lld. On which day of the month is that "
                                 "meeting? %s Answer -1 if that day does not exist in the month.",
                                 ordinals[ord], weekdays[wd], months[month], (long long)y, count_hint);
    out->answer = task_strdupf("%d", event);
    cJSON_AddNumberToObject(m, "year", (double)y);
    cJSON_AddNumberToObject(m, "month", month);
    cJSON_AddStringToObject(m, "ordinal", ordinals[ord]);
    cJSON_AddStringToObject(m, "weekday", weekdays[wd]);
}

/* COUNT_DAYS (one weekday) or COUNT_BUSINESS_DAYS in a range of dates */
static void ask_count_days(task_rng_t *r, const config_t *k, int task, task_question_t *out, cJSON *m)
{
    char a[64], b[64], ia[16], ib[16];
    int64_t y = k->year, jan1 = day_number(y, 1, 1), dec31 = day_number(y, 12, 31);
    int64_t start = task_rng_range(r, jan1, dec31);
    int64_t end_max = start + k->offset;
    /* counting a weekday stays inside the year; business days may not,
     * as in reasoning-gym */
    if (task == COUNT_DAYS && end_max > dec31) end_max = dec31;
    int64_t end = task_rng_range(r, start, end_max), count = 0;
    int wd = task == COUNT_DAYS ? (int)task_rng_below(r, 7) : -1;
    for (int64_t d = start; d <= end; d++) count += task == COUNT_DAYS ? weekday(d) == wd : weekday(d) < 5;
    long_date(start, 1, a, sizeof a);
    long_date(end, 1, b, sizeof b);
    out->question =
        task == COUNT_DAYS
            ? task_strdupf("How many %ss are there from %s to %s, counting both of those dates? %s", weekdays[wd], a, b,
                           count_hint)
            : task_strdupf("How many business days (Monday to Friday) are there from %s to %s, counting both of "
                           "those dates? %s",
                           a, b, count_hint);
    out->answer = task_strdupf("%lld", (long long)count);
    iso(start, ia);
    iso(end, ib);
    if (task == COUNT_DAYS) cJSON_AddNumberToObject(m, "year", (double)y);
    cJSON_AddStringToObject(m, "start_date", ia);
    cJSON_AddStringToObject(m, "end_date", ib);
}

static void ask_leap_year(task_rng_t *r, const config_t *k, task_question_t *out, cJSON *m)
{
    int64_t semi = k->leap_range / 2, year = task_rng_range(r, k->year - semi, k->year + semi);
    int leap = is_leap(year);
    out->question =
        task_strdupf("Is the year %lld a leap year in the Gregorian calendar? Answer Yes or No.", (long long)year);
    out->answer = strdup(leap ? "Yes" : "No");
    cJSON_AddNumberToObject(m, "year", (double)year);
    cJSON_AddBoolToObject(m, "is_leap", leap);
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    config_t k;
    if (read_config(c, &k, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    int ntasks = cJSON_GetArraySize(k.tasks);
    int task = task_index(cJSON_GetArrayItem(k.tasks, (int)task_rng_below(&r, (uint64_t)ntasks))->valuestring);
    cJSON *m = out->metadata = task_metadata_new("calendar_arithmetic", index);
    cJSON_AddStringToObject(m, "task", task_names[task]);
    switch (task) {
    case WEEKDAY_OFFSET: ask_weekday_offset(&r, &k, out, m); break;
    case WEEKDAY_OF_DATE: ask_weekday_of_date(&r, &k, out, m); break;
    case WEEKDAY_FROM_FIRST: ask_weekday_from_first(&r, &k, out, m); break;
    case RECURRING_EVENT: ask_recurring_event(&r, &k, out, m); break;
    case COUNT_DAYS:
    case COUNT_BUSINESS_DAYS: ask_count_days(&r, &k, task, out, m); break;
    default: ask_leap_year(&r, &k, out, m); break;
    }
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON *names = cJSON_AddArrayToObject(d, "tasks");
    const cJSON *t;
    cJSON_ArrayForEach(t, k.tasks)
        cJSON_AddItemToArray(names, cJSON_CreateString(task_names[task_index(t->valuestring)]));
    cJSON_AddNumberToObject(d, "offset_upper_bound", (double)k.offset);
    return 0;
}

static int is_weekday_name(const char *s)
{
    for (int i = 0; i < 7; i++)
        if (strcmp(s, weekdays[i]) == 0) return 1;
    return 0;
}

static double score(const char *answer, const task_question_t *e)
{
    if (!answer || !*answer || !e->answer) return 0.0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e->metadata, "task");
    int task = cJSON_IsString(t) ? task_index(t->valuestring) : -1;
    /* the task name must match exactly: task_index also takes other cases */
    if (task < 0 || strcmp(t->valuestring, task_names[task]) != 0) return 0.0;
    const char *s = answer;
    size_t n = strlen(answer);
    py_strip(&s, &n);
    if (task == WEEKDAY_OFFSET || task == WEEKDAY_OF_DATE || task == WEEKDAY_FROM_FIRST) {
        char *a = strndup(s, n);
        double r = strcmp(a, e->answer) == 0 ? 1.0 : is_weekday_name(a) ? 0.1 : 0.0;
        if (r == 0.0) {
            char *title = py_title(s, n);
            r = is_weekday_name(title) ? 0.05 : 0.0;
            free(title);
        }
        free(a);
        return r;
    }
    if (task == IS_LEAP_YEAR) {
        char *a = py_lower(s, n), *o = py_lower(e->answer, strlen(e->answer));
        double r = strcmp(a, o) == 0 ? 1.0 : 0.0;
        free(a);
        free(o);
        return r;
    }
    int64_t got, want;
    int gs = py_int(s, n, &got), ws = py_int(e->answer, strlen(e->answer), &want);
    if (gs == PY_INT_BAD || ws == PY_INT_BAD) return 0.0;
    /* answers beyond int64 are so far off that the credit is 0, or, for a
     * negative truth, reasoning-gym overflows (and so do we, to 0) */
    if (gs == PY_INT_BIG || ws == PY_INT_BIG) return 0.0;
    if (want == 0) return got == 0 ? 1.0 : 0.0;
    __int128 diff = (__int128)got - want;
    double rel = (double)(diff < 0 ? -diff : diff) / (double)want;
    double credit = exp(-5 * rel);
    /* a negative truth (-1, "no such day") makes the error negative and the
     * credit above 1, as in reasoning-gym; where its exp() overflows it
     * raises, and we give 0 */
    if (isinf(credit)) return 0.0;
    return credit > 0.0 ? credit : 0.0;
}

const task_family_t task_family_calendar_arithmetic = {
    "calendar_arithmetic", default_config, validate_config, generate, score,
};
