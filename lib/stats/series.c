/* A node's values round by round from its JSON lines, and the gnuplot
 * curves that draw them, for bin/report and bin/study. */
#include "stats/series.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the item at key, one level into an object for "a.b" */
static const cJSON *lookup(const cJSON *j, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "%s", key);
    char *name = k, *dot;
    for (; (dot = strchr(name, '.')); name = dot + 1) *dot = '\0', j = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_GetObjectItemCaseSensitive(j, name);
}

static void grow(series_t *s)
{
    s->cap = s->cap ? 2 * s->cap : 256;
    s->round = realloc(s->round, (size_t)s->cap * sizeof *s->round);
    s->value = realloc(s->value, (size_t)s->cap * sizeof *s->value);
    for (int c = 0; c < s->ncols; c++) s->col[c] = realloc(s->col[c], (size_t)s->cap * sizeof *s->col[c]);
}

int series_load(series_t *s, const char *path, const cJSON *(*value)(const cJSON *line), const char *const *keys,
                int ncols, const char *prog, const char *note)
{
    memset(s, 0, sizeof *s);
    s->ncols = ncols < SERIES_MAX_COLUMNS ? ncols : SERIES_MAX_COLUMNS;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        cJSON *j = cJSON_Parse(line);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "round"), *v = value(j);
        if (!cJSON_IsNumber(r) || !cJSON_IsNumber(v)) {
            if (note) fprintf(stderr, "%s: %s:%d: %s\n", prog, path, lineno, note);
            cJSON_Delete(j);
            continue;
        }
        if (s->n == s->cap) grow(s);
        s->round[s->n] = r->valueint;
        s->value[s->n] = v->valuedouble;
        for (int c = 0; c < s->ncols; c++) {
            const cJSON *x = lookup(j, keys[c]);
            s->col[c][s->n] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        }
        s->n++;
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    return s->n;
}

void series_free(series_t *s)
{
    free(s->round);
    free(s->value);
    for (int c = 0; c < s->ncols; c++) free(s->col[c]);
    memset(s, 0, sizeof *s);
}

void series_plot_curve(FILE *gp, int i, const char *data, int col, const char *style, const char *title)
{
    fprintf(gp, "%s'%s' using 1:%d with %s title '%s'", i ? ", " : "", data, col, style, title);
}

int series_plot_run(const char *who, const char *script, const char *dir)
{
    if (system("command -v gnuplot > /dev/null 2>&1") != 0) {
        fprintf(stderr, "%s: gnuplot is not installed: no plots; the data and summary are in %s\n", who, dir);
        return 0;
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", script);
    int rc = system(cmd);
    if (rc == 0) return 0;
    fprintf(stderr, "%s: gnuplot failed (status %d); the data and summary are in %s\n", who, rc, dir);
    return -1;
}
