/* verifier score and verifier generate: the task library on JSON lines, for
 * scoring questions as JSON (reasoning-gym's exported entries too) and for looking at
 * what a family generates. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"

/* one line: a question as JSON and a response, scored; 0, or -1 with err */
static int score_line(const char *line, char **out, char *err, size_t errlen)
{
    cJSON *obj = cJSON_Parse(line);
    if (!obj) {
        snprintf(err, errlen, "not valid JSON");
        return -1;
    }
    task_question_t e;
    int rc = -1;
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(obj, "response");
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(obj, "completion");
    if (task_question_from_json(obj, &e, err, errlen) != 0) goto done;
    if ((resp != NULL) == (comp != NULL)) snprintf(err, errlen, "needs exactly one of \"response\" and \"completion\"");
    else if (resp && !cJSON_IsString(resp) && !cJSON_IsNull(resp))
        snprintf(err, errlen, "\"response\" must be a string or null");
    else if (comp && !cJSON_IsString(comp)) snprintf(err, errlen, "\"completion\" must be a string");
    else {
        bool formatted;
        /* a completion is scored as a node scores it: whole, by the
         * family's own form where it has one (the game's stages) */
        double s = resp ? task_score_answer(cJSON_IsString(resp) ? resp->valuestring : NULL, &e, err, errlen)
                        : task_score_completion(comp->valuestring, &e, &formatted, err, errlen);
        if (s >= 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(obj, "score");
            cJSON_AddNumberToObject(obj, "score", s);
            *out = cJSON_PrintUnformatted(obj);
            rc = 0;
        }
    }
    task_question_free(&e);
done:
    cJSON_Delete(obj);
    return rc;
}

int verifier_cli_score(int argc, char **argv)
{
    if (argc > 2) {
        fprintf(stderr, "verifier score: expected at most one FILE, got %d arguments\n", argc - 1);
        return 2;
    }
    const char *path = argc == 2 ? argv[1] : NULL;
    FILE *in = path ? fopen(path, "r") : stdin;
    if (!in) {
        fprintf(stderr, "verifier score: cannot open %s: %s\n", path, strerror(errno));
        return 2;
    }
    const char *where = path ? path : "stdin";
    char *line = NULL, err[512];
    size_t cap = 0;
    ssize_t len;
    long lineno = 0, failed = 0;
    while ((len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        char *out = NULL;
        if (strlen(line) != (size_t)len) snprintf(err, sizeof err, "holds a NUL byte");
        else if (score_line(line, &out, err, sizeof err) == 0) {
            puts(out);
            free(out);
            continue;
        }
        fprintf(stderr, "verifier score: %s:%ld: %s\n", where, lineno, err);
        failed++;
    }
    free(line);
    if (path) fclose(in);
    fflush(stdout);
    return failed ? 1 : 0;
}

static int parse_u64(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') return -1;
    *out = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

typedef struct {
    const char *family, *config_text;
    unsigned long long seed, count, start;
} generate_args_t;

/* the flags, each required one given and the range within 2^64; 0, or 2
 * after a line on stderr */
static int parse_generate_args(int argc, char **argv, generate_args_t *a)
{
    int have_seed = 0, have_count = 0;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int known = !strcmp(flag, "--family") || !strcmp(flag, "--seed") || !strcmp(flag, "--count") ||
                    !strcmp(flag, "--config") || !strcmp(flag, "--start");
        if (!known) {
            fprintf(stderr,
                    "verifier generate: unknown argument %s "
                    "(--family NAME --seed S --count N [--config JSON] [--start I])\n",
                    flag);
            return 2;
        }
        if (!val) {
            fprintf(stderr, "verifier generate: %s needs a value\n", flag);
            return 2;
        }
        i++;
        int bad = 0;
        if (!strcmp(flag, "--family")) a->family = val;
        else if (!strcmp(flag, "--config")) a->config_text = val;
        else if (!strcmp(flag, "--seed")) bad = parse_u64(val, &a->seed), have_seed = 1;
        else if (!strcmp(flag, "--count")) bad = parse_u64(val, &a->count), have_count = 1;
        else bad = parse_u64(val, &a->start);
        if (bad) {
            fprintf(stderr, "verifier generate: %s %s: expected a whole number >= 0\n", flag, val);
            return 2;
        }
    }
    const char *missing = !a->family ? "--family" : !have_seed ? "--seed" : !have_count ? "--count" : NULL;
    if (missing) {
        fprintf(stderr, "verifier generate: %s is required\n", missing);
        return 2;
    }
    if (a->start + a->count < a->start) {
        fprintf(stderr, "verifier generate: --start %llu --count %llu: goes past 2^64\n", a->start, a->count);
        return 2;
    }
    return 0;
}

/* the family's config with the user's --config over its defaults; NULL
 * after a line on stderr */
static cJSON *family_config(const task_family_t *f, const char *config_text)
{
    cJSON *user = NULL;
    if (config_text && !(user = cJSON_Parse(config_text))) {
        fprintf(stderr, "verifier generate: --config: not valid JSON\n");
        return NULL;
    }
    char err[512];
    cJSON *config = task_family_config(f, user, err, sizeof err);
    cJSON_Delete(user);
    if (!config) fprintf(stderr, "verifier generate: --config: %s\n", err);
    return config;
}

/* questions start..start+count-1 as JSON lines; 1 after a line on stderr */
static int print_questions(const task_family_t *f, const cJSON *config, const generate_args_t *a)
{
    char err[512];
    for (unsigned long long i = a->start; i < a->start + a->count; i++) {
        task_question_t e;
        if (f->generate(config, a->seed, i, &e, err, sizeof err) != 0) {
            fprintf(stderr, "verifier generate: %s\n", err);
            return 1;
        }
        cJSON *j = task_question_to_json(&e);
        char *s = cJSON_PrintUnformatted(j);
        puts(s);
        free(s);
        cJSON_Delete(j);
        task_question_free(&e);
    }
    return 0;
}

int verifier_cli_generate(int argc, char **argv)
{
    generate_args_t a = {0};
    if (parse_generate_args(argc, argv, &a) != 0) return 2;
    const task_family_t *f = task_family_find(a.family);
    if (!f) {
        fprintf(stderr, "verifier generate: --family %s: unknown family (one of:", a.family);
        for (int i = 0; i < task_family_count; i++) fprintf(stderr, " %s", task_families[i]->name);
        fprintf(stderr, ")\n");
        return 2;
    }
    cJSON *config = family_config(f, a.config_text);
    if (!config) return 2;
    int rc = print_questions(f, config, &a);
    cJSON_Delete(config);
    fflush(stdout);
    return rc;
}
