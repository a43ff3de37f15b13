/* report: turns a run folder into plots and a summary.
 * Reads <run>/<node>/metrics.jsonl for every node (or <run>/metrics.jsonl
 * for a single node), writes per-node data files, PNG plots drawn by
 * gnuplot (reward per round, its moving average, cumulative reward, and
 * the per-round diagnostics a GRPO run is judged by: entropy, completion
 * length, truncated and formatted shares, zero-advantage share, largest
 * importance ratio) and summary.md, and prints the summary table.
 * A round's reward is metrics_round_reward's (node/metrics.h): every own
 * completion the sampler scored for it, trained or not. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "node/metrics.h"

#define MAX_NODES 256

/* the diagnostics plotted beside the reward, by their metrics.jsonl key
 * (a dot goes into an object); a line without one leaves a gap */
static const struct {
    const char *key, *file, *title;
} diags[] = {
    {"entropy", "entropy", "entropy of the sampled tokens (nats)"},
    {"completion_length", "completion_length", "mean completion length (tokens)"},
    {"truncated_share", "truncated_share", "share of completions cut by the length limit"},
    {"format_share", "format_share", "share of completions with an answer tag"},
    {"local.zero_adv_share", "zero_adv_share", "share of own groups with zero advantage"},
    {"ratio_max", "ratio_max", "largest importance ratio"},
};
#define NDIAG (int)(sizeof diags / sizeof diags[0])

typedef struct {
    char name[128];
    int n, cap;
    int *round;
    double *reward;
    double *external;
    double *diag[NDIAG];
} series_t;

static const cJSON *lookup(const cJSON *j, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "%s", key);
    char *dot = strchr(k, '.');
    if (dot) *dot = '\0', j = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_GetObjectItemCaseSensitive(j, dot ? dot + 1 : k);
}

static void usage(void)
{
    fprintf(stderr, "usage: report RUN_FOLDER [--window N] [--out FOLDER]\n");
}

static int load_series(const char *path, const char *name, series_t *s)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        cJSON *j = cJSON_Parse(line);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "round");
        const cJSON *w = metrics_round_reward(j);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "external_groups");
        if (!cJSON_IsNumber(r) || !cJSON_IsNumber(w)) {
            fprintf(stderr, "report: %s:%d: not a metrics line (needs round and reward_mean), skipped\n", path, lineno);
            cJSON_Delete(j);
            continue;
        }
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 256;
            s->round = realloc(s->round, s->cap * sizeof *s->round);
            s->reward = realloc(s->reward, s->cap * sizeof *s->reward);
            s->external = realloc(s->external, s->cap * sizeof *s->external);
            for (int d = 0; d < NDIAG; d++) s->diag[d] = realloc(s->diag[d], s->cap * sizeof *s->diag[d]);
        }
        for (int d = 0; d < NDIAG; d++) {
            const cJSON *v = lookup(j, diags[d].key);
            s->diag[d][s->n] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        }
        s->round[s->n] = r->valueint;
        s->reward[s->n] = w->valuedouble;
        s->external[s->n] = cJSON_IsNumber(e) ? e->valuedouble : 0;
        s->n++;
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const series_t *)a)->name, ((const series_t *)b)->name);
}

int main(int argc, char **argv)
{
    const char *run = NULL, *out = NULL;
    int window = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--window") == 0 && a + 1 < argc) {
            window = atoi(argv[++a]);
            if (window < 1) {
                fprintf(stderr, "report: --window: '%s' is not a positive integer\n", argv[a]);
                return 2;
            }
        } else if (strcmp(argv[a], "--out") == 0 && a + 1 < argc) {
            out = argv[++a];
        } else if (argv[a][0] == '-') {
            fprintf(stderr, "report: unknown flag '%s'\n", argv[a]);
            usage();
            return 2;
        } else if (!run) {
            run = argv[a];
        } else {
            usage();
            return 2;
        }
    }
    if (!run) {
        usage();
        return 2;
    }

    static series_t nodes[MAX_NODES];
    int nn = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    const char *base = strrchr(run, '/');
    if (load_series(path, base ? base + 1 : run, &nodes[0]) == 0) {
        nn = 1;
    } else {
        DIR *d = opendir(run);
        if (!d) {
            fprintf(stderr, "report: %s: %s\n", run, strerror(errno));
            return 1;
        }
        struct dirent *de;
        while ((de = readdir(d)) && nn < MAX_NODES) {
            if (de->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s/metrics.jsonl", run, de->d_name);
            if (load_series(path, de->d_name, &nodes[nn]) == 0 && nodes[nn].n > 0) nn++;
        }
        closedir(d);
    }
    if (nn == 0) {
        fprintf(stderr, "report: %s: no metrics.jsonl found (expected RUN/metrics.jsonl or RUN/<node>/metrics.jsonl)\n", run);
        return 1;
    }
    qsort(nodes, nn, sizeof nodes[0], cmp_name);

    char outdir[1024];
    if (snprintf(outdir, sizeof outdir, "%s", out ? out : run) >= (int)sizeof outdir) {
        fprintf(stderr, "report: output folder path longer than %zu bytes\n", sizeof outdir - 1);
        return 2;
    }
    snprintf(path, sizeof path, "%s/report", outdir);
    mkdir(outdir, 0755);
    mkdir(path, 0755);
    int longest = 0;
    for (int i = 0; i < nn; i++)
        if (nodes[i].n > longest) longest = nodes[i].n;
    if (!window) window = longest >= 1000 ? 100 : longest / 10 > 1 ? longest / 10 : 1;

    snprintf(path, sizeof path, "%s/report/summary.md", outdir);
    FILE *md = fopen(path, "w");
    if (!md) {
        fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(md, "| node | rounds | mean reward | first %d | last %d | change | cumulative reward |\n"
                "|---|---|---|---|---|---|---|\n", window, window);
    double swarm_total = 0;
    for (int i = 0; i < nn; i++) {
        series_t *s = &nodes[i];
        snprintf(path, sizeof path, "%s/report/%.127s.dat", outdir, s->name);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
            return 1;
        }
        double cum = 0, win = 0, first = 0, last = 0;
        int wn = window < s->n ? window : s->n;
        fprintf(f, "# round reward moving_average cumulative");
        for (int d = 0; d < NDIAG; d++) fprintf(f, " %s", diags[d].file);
        fprintf(f, "\n");
        for (int k = 0; k < s->n; k++) {
            cum += s->reward[k];
            win += s->reward[k];
            if (k >= window) win -= s->reward[k - window];
            int denom = k + 1 < window ? k + 1 : window;
            fprintf(f, "%d %.6f %.6f %.6f", s->round[k], s->reward[k], win / denom, cum);
            for (int d = 0; d < NDIAG; d++)
                if (isnan(s->diag[d][k])) fprintf(f, " NaN");
                else fprintf(f, " %.6g", s->diag[d][k]);
            fprintf(f, "\n");
            if (k < wn) first += s->reward[k];
            if (k >= s->n - wn) last += s->reward[k];
        }
        fclose(f);
        swarm_total += cum;
        fprintf(md, "| %s | %d | %.4f | %.4f | %.4f | %+.4f | %.2f |\n", s->name, s->n, cum / s->n, first / wn,
                last / wn, (last - first) / wn, cum);
    }
    fprintf(md, "| **swarm** | | | | | | **%.2f** |\n", swarm_total);
    fclose(md);

    snprintf(path, sizeof path, "%s/report/plots.gp", outdir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
        return 1;
    }
    static const struct { const char *file, *title; int col; } plots[] = {
        {"reward", "reward per round", 2},
        {"moving_average", "reward, moving average", 3},
        {"cumulative", "cumulative reward", 4},
    };
    fprintf(gp, "set terminal pngcairo size 1000,600\nset key outside right\nset xlabel 'round'\nset grid\n");
    for (size_t p = 0; p < sizeof plots / sizeof plots[0]; p++) {
        fprintf(gp, "set output '%s/report/%s.png'\nset title '%s", outdir, plots[p].file, plots[p].title);
        if (plots[p].col == 3) fprintf(gp, " (window %d rounds)", window);
        fprintf(gp, "'\nplot ");
        for (int i = 0; i < nn; i++)
            fprintf(gp, "%s'%s/report/%s.dat' using 1:%d with lines title '%s'", i ? ", " : "", outdir, nodes[i].name,
                    plots[p].col, nodes[i].name);
        fprintf(gp, "\n");
    }
    for (int d = 0; d < NDIAG; d++) {
        /* a diagnostic that never moved (no truncation at all) gets a range
         * around its value: gnuplot warns about an empty one; one no line
         * holds is not plotted */
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < nn; i++)
            for (int k = 0; k < nodes[i].n; k++)
                if (!isnan(nodes[i].diag[d][k])) lo = fmin(lo, nodes[i].diag[d][k]), hi = fmax(hi, nodes[i].diag[d][k]);
        if (lo > hi) continue; /* metrics from before the diagnostics */
        if (hi - lo < 1e-9) fprintf(gp, "set yrange [%g:%g]\n", lo - 1, hi + 1);
        else fprintf(gp, "set yrange [*:*]\n");
        fprintf(gp, "set output '%s/report/%s.png'\nset title '%s'\nplot ", outdir, diags[d].file, diags[d].title);
        for (int i = 0; i < nn; i++)
            fprintf(gp, "%s'%s/report/%s.dat' using 1:%d with lines title '%s'", i ? ", " : "", outdir, nodes[i].name,
                    5 + d, nodes[i].name);
        fprintf(gp, "\n");
    }
    fclose(gp);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "gnuplot '%s/report/plots.gp'", outdir);
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "report: gnuplot failed (status %d); data and summary are in %s/report\n", rc, outdir);

    snprintf(path, sizeof path, "%s/report/summary.md", outdir);
    FILE *f = fopen(path, "r");
    char buf[1024];
    while (f && fgets(buf, sizeof buf, f)) fputs(buf, stdout);
    if (f) fclose(f);
    printf("report: %s/report (reward.png, moving_average.png, cumulative.png, the diagnostics' plots, summary.md; "
           "window %d)\n", outdir, window);
    for (int i = 0; i < nn; i++) {
        free(nodes[i].round);
        free(nodes[i].reward);
        free(nodes[i].external);
        for (int d = 0; d < NDIAG; d++) free(nodes[i].diag[d]);
    }
    return rc == 0 ? 0 : 1;
}
