/* A node's values round by round, read from the JSON lines a learner
 * (metrics.jsonl) or an evaluator (eval.jsonl) appends, and the gnuplot
 * that draws them: what bin/report and bin/study share. */
#ifndef SAPO_SERIES_H
#define SAPO_SERIES_H

#include <cjson/cJSON.h>
#include <stdio.h>

#define SERIES_MAX_COLUMNS 8

/* n points in file order: a round and its value, and a number for each
 * extra column (NaN where the line had none) */
typedef struct {
    int n, cap;
    int *round;
    double *value;
    int ncols;
    double *col[SERIES_MAX_COLUMNS];
} series_t;

/* Reads path into s (emptied first): a point for every line with a number
 * "round" and a number value(line), with the number at each of the ncols
 * keys in its columns (a key "a.b" is b in the object a, "a.b.c" c in a.b). A line without
 * is skipped with "PROG: PATH:LINE: NOTE" on stderr (silently where note is
 * NULL: a value older lines lack). Returns the number of
 * points, or -1 when path cannot be opened. */
int series_load(series_t *s, const char *path, const cJSON *(*value)(const cJSON *line), const char *const *keys,
                int ncols, const char *prog, const char *note);
void series_free(series_t *s);

/* One curve of a gnuplot plot command, column col of the data file
 * against its first; every curve but the first (i = 0) after ", ". */
void series_plot_curve(FILE *gp, int i, const char *data, int col, const char *style, const char *title);

/* Runs gnuplot on a script file for tool who, whose data and summary are
 * in dir: 0 when it drew, or when gnuplot is not installed (a device
 * machine has none: one line says there are no plots); -1 after a line
 * when gnuplot failed. */
int series_plot_run(const char *who, const char *script, const char *dir);

#endif
