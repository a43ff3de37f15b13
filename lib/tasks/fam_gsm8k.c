/* gsm8k: problems read from a GSM8K JSONL file the user names (config field
 * path), one {"question", "answer"} object a line, the answer's last line
 * "#### N". Question number index is a line drawn by (seed, index). The file
 * is read and checked once per process, at the first config naming it.
 *
 * reasoning-gym has no gsm8k dataset: the scorer is ours and compares
 * numbers, not text. After str.strip() of the answer: an optional minus
 * sign and an optional dollar sign, in either order ("-$5", "$-5"); digits,
 * either plain or with commas between groups of exactly three ("1,234",
 * never "12,34" or "1234,5"); optionally a point and one or more digits.
 * Anything else (units, words, "+5", "5%", "1e3", inner spaces) is not a
 * number; digits are ASCII. Two numbers are equal when their values are: leading zeros and
 * trailing zeros after the point do not count ("$1,000.00" is 1000, "-0"
 * is 0). 1.0 when the answer's number equals N, else 0.0. N itself is read
 * by the same rules, and the question's answer is N written plainly. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/py.h"
#include "tasks/rng.h"
#include "tasks/task.h"

/* the rules above are task_plain_number's (task.c), which the game's
 * stages share */
static const char *const suffix = " Give the final answer as a number, without units, between <answer> and </answer>.";

typedef struct {
    char *question, *answer, *cot; /* answer: N written plainly; cot: GSM8K's answer text */
    int line;                      /* 1-based, in the file */
} problem_t;

typedef struct source {
    char *path;
    problem_t *problems;
    int n;
    struct source *next;
} source_t;

/* Files read so far, kept for the life of the process: generators run on
 * any thread, so the list is guarded. */
static source_t *sources;
static pthread_mutex_t sources_lock = PTHREAD_MUTEX_INITIALIZER;

static void problems_free(problem_t *p, int n)
{
    for (int i = 0; i < n; i++) {
        free(p[i].question);
        free(p[i].answer);
        free(p[i].cot);
    }
    free(p);
}

/* One line of the file into *out; 0, or -1 with err naming path and line */
static int read_problem(const char *path, int lineno, const char *text, problem_t *out, char *err, size_t errlen)
{
    cJSON *j = cJSON_Parse(text);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "question");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "answer");
    const char *bad = !j                   ? "not valid JSON"
                      : !cJSON_IsObject(j) ? "not a JSON object"
                      : !cJSON_IsString(q) ? "no string field question"
                      : !cJSON_IsString(a) ? "no string field answer"
                                           : NULL;
    char *number = NULL;
    if (!bad) {
        /* the last line of the answer, trailing whitespace aside */
        const char *s = a->valuestring;
        size_t n = strlen(s);
        while (n > 0 && strchr(" \t\r\n", s[n - 1])) n--;
        const char *last = s + n;
        while (last > s && last[-1] != '\n') last--;
        if (strncmp(last, "####", 4) != 0) bad = "the answer's last line is not \"#### N\"";
        else if (!(number = task_plain_number(last + 4, (size_t)(s + n - last - 4))))
            bad = "the answer's last line is \"#### N\" with N not a number";
    }
    if (bad) {
        snprintf(err, errlen, "gsm8k config path: %s:%d: %s", path, lineno, bad);
        cJSON_Delete(j);
        return -1;
    }
    out->question = strdup(q->valuestring);
    out->answer = number;
    out->cot = strdup(a->valuestring);
    out->line = lineno;
    cJSON_Delete(j);
    return 0;
}

static source_t *source_read(const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        snprintf(err, errlen, "gsm8k config path: %s: %s", path, strerror(errno));
        return NULL;
    }
    source_t *src = calloc(1, sizeof *src);
    char *line = NULL;
    size_t cap = 0, alloc = 0;
    int lineno = 0, rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        /* blank lines (a final newline too many) carry no problem */
        if (strspn(line, " \t\r\n") == (size_t)len) continue;
        if ((size_t)src->n == alloc)
            src->problems = realloc(src->problems, (alloc = alloc ? 2 * alloc : 64) * sizeof(problem_t));
        rc = read_problem(path, lineno, line, &src->problems[src->n], err, errlen);
        src->n += rc == 0;
    }
    if (rc == 0 && ferror(fp)) {
        snprintf(err, errlen, "gsm8k config path: %s: read error after line %d: %s", path, lineno, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && src->n == 0) {
        snprintf(err, errlen, "gsm8k config path: %s: no problems in the file", path);
        rc = -1;
    }
    free(line);
    fclose(fp);
    if (rc != 0) {
        problems_free(src->problems, src->n);
        free(src);
        return NULL;
    }
    src->path = strdup(path);
    return src;
}

/* The problems of path, read at the first call; NULL with err */
static const source_t *source_get(const char *path, char *err, size_t errlen)
{
    pthread_mutex_lock(&sources_lock);
    source_t *s = sources;
    while (s && strcmp(s->path, path) != 0) s = s->next;
    if (!s && (s = source_read(path, err, errlen))) {
        s->next = sources;
        sources = s;
    }
    pthread_mutex_unlock(&sources_lock);
    return s;
}

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "path", "");
    return c;
}

static const char *config_path(const cJSON *c, char *err, size_t errlen)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "path");
    if (!cJSON_IsString(p) || !p->valuestring[0]) {
        snprintf(err, errlen, "gsm8k config: path must name a GSM8K JSONL file");
        return NULL;
    }
    return p->valuestring;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    const char *path = config_path(c, err, errlen);
    return path && source_get(path, err, errlen) ? 0 : -1;
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    const char *path = config_path(c, err, errlen);
    const source_t *src = path ? source_get(path, err, errlen) : NULL;
    if (!src) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    const problem_t *p = &src->problems[task_rng_below(&r, (uint64_t)src->n)];
    out->question = task_strdupf("%s%s", p->question, suffix);
    out->answer = strdup(p->answer);
    cJSON *m = out->metadata = task_metadata_new("gsm8k", index);
    cJSON_AddStringToObject(m, "path", path);
    cJSON_AddNumberToObject(m, "line", p->line);
    cJSON_AddStringToObject(m, "answer_cot", p->cot);
    return 0;
}

static double score(const char *answer, const task_question_t *e) { return task_numbers_equal(answer, e->answer); }

const task_family_t task_family_gsm8k = {
    .name = "gsm8k",
    .default_config = default_config,
    .validate_config = validate_config,
    .generate = generate,
    .score = score,
};
