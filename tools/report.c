/* report: turns a run folder into plots and a summary.
 * Reads <run>/<node>/metrics.jsonl for every node (or <run>/metrics.jsonl
 * for a single node), writes per-node data files, PNG plots drawn by
 * gnuplot (reward per round, its moving average, cumulative reward, and
 * the per-round diagnostics a GRPO run is judged by: entropy, completion
 * length, truncated and formatted shares, zero-advantage share, largest
 * importance ratio) and summary.md, and prints the summary table.
 * A round's reward is metrics_round_reward's (node/metrics.h): every own
 * completion the sampler scored for it, trained or not. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "node/metrics.h"
#include "stats/series.h"
#include "stats/stats.h"

#define MAX_NODES 256

/* the diagnostics plotted beside the reward, by their metrics.jsonl key
 * (a dot goes into an object); a line without one leaves a gap. The
 * first, the batch reward, also goes into the summary (DIAG_BATCH) */
#define DIAG_BATCH 0
static const struct {
    const char *key, *file, *title;
} diags[] = {
    {"batch_reward", "batch_reward", "batch reward: every completion trained, external ones included"},
    {"entropy", "entropy", "entropy of the sampled tokens (nats)"},
    {"completion_length", "completion_length", "mean completion length (tokens)"},
    {"truncated_share", "truncated_share", "share of completions cut by the length limit"},
    {"format_share", "format_share", "share of completions with an answer tag"},
    {"local.zero_adv_share", "zero_adv_share", "share of own groups with zero advantage"},
    {"ratio_max", "ratio_max", "largest importance ratio"},
};
#define NDIAG (int)(sizeof diags / sizeof diags[0])
_Static_assert(NDIAG <= SERIES_MAX_COLUMNS, "a series column per diagnostic");

/* a node's rewards, the diagnostics in s.col; where its metrics are */
typedef struct {
    char name[128];
    char path[1024];
    series_t s;
} node_t;

static void usage(void) { fprintf(stderr, "usage: report RUN_FOLDER [--window N] [--out FOLDER]\n"); }

/* the node's metrics.jsonl: its number of rounds, or -1 when missing */
static int load_node(const char *path, const char *name, node_t *nd)
{
    const char *keys[NDIAG];
    for (int d = 0; d < NDIAG; d++) keys[d] = diags[d].key;
    snprintf(nd->name, sizeof nd->name, "%s", name);
    snprintf(nd->path, sizeof nd->path, "%s", path);
    return series_load(&nd->s, path, metrics_round_reward, keys, NDIAG, "report",
                       "not a metrics line (needs round and reward_mean), skipped");
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const node_t *)a)->name, ((const node_t *)b)->name);
}

/* RUN/metrics.jsonl as one node named for the folder, else every
 * RUN/<node>/metrics.jsonl with a round in it, sorted by name; how many */
static int load_nodes(const char *run, node_t *nodes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    const char *base = strrchr(run, '/');
    if (load_node(path, base ? base + 1 : run, &nodes[0]) >= 0) return 1;
    DIR *d = opendir(run);
    if (!d) {
        fprintf(stderr, "report: %s: %s\n", run, strerror(errno));
        return -1;
    }
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < MAX_NODES) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/metrics.jsonl", run, de->d_name);
        if (load_node(path, de->d_name, &nodes[nn]) > 0) nn++;
    }
    closedir(d);
    qsort(nodes, nn, sizeof nodes[0], cmp_name);
    return nn;
}

/* a node's data file (round, reward, its moving average, cumulative, the
 * diagnostics) and its row of the summary; its cumulative reward, or NaN
 * when the file cannot be written */
static double write_node(const char *outdir, const node_t *nd, int window, FILE *md)
{
    const series_t *s = &nd->s;
    char path[4096];
    snprintf(path, sizeof path, "%s/report/%.127s.dat", outdir, nd->name);
    FILE *f = fopen(path, "w");
    double *ma = malloc((size_t)(s->n ? s->n : 1) * sizeof *ma);
    if (!f || !ma) {
        fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
        if (f) fclose(f);
        free(ma);
        return NAN;
    }
    stats_moving_average(s->value, s->n, window, ma);
    double cum = 0, first = 0, last = 0, batch = 0;
    int wn = window < s->n ? window : s->n, nb = 0;
    fprintf(f, "# round reward moving_average cumulative");
    for (int d = 0; d < NDIAG; d++) fprintf(f, " %s", diags[d].file);
    fprintf(f, "\n");
    for (int k = 0; k < s->n; k++) {
        cum += s->value[k];
        fprintf(f, "%d %.6f %.6f %.6f", s->round[k], s->value[k], ma[k], cum);
        for (int d = 0; d < NDIAG; d++)
            if (isnan(s->col[d][k])) fprintf(f, " NaN");
            else fprintf(f, " %.6g", s->col[d][k]);
        fprintf(f, "\n");
        if (!isnan(s->col[DIAG_BATCH][k])) batch += s->col[DIAG_BATCH][k], nb++;
        if (k < wn) first += s->value[k];
        if (k >= s->n - wn) last += s->value[k];
    }
    fclose(f);
    free(ma);
    fprintf(md, "| %s | %d | %.4f | %.4f | %.4f | %+.4f | %.2f | ", nd->name, s->n, cum / s->n, first / wn, last / wn,
            (last - first) / wn, cum);
    if (nb) fprintf(md, "%.4f | %.2f |\n", batch / nb, batch);
    else fprintf(md, "n/a | n/a |\n");
    return cum;
}

/* the peak_gb of the last line of a node's metrics that has one, NULL
 * for none (a run from before it was logged); the caller deletes it */
static cJSON *last_peaks(const char *path)
{
    FILE *f = fopen(path, "r");
    cJSON *last = NULL;
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line), *p = cJSON_DetachItemFromObjectCaseSensitive(j, "peak_gb");
        cJSON_Delete(j);
        if (cJSON_IsObject(p)) cJSON_Delete(last), last = p;
        else cJSON_Delete(p);
    }
    free(line);
    if (f) fclose(f);
    return last;
}

/* the summary's table of every process's peak resident memory, a node a
 * row (docs/memory.md), where the metrics hold them */
static void write_peaks(FILE *md, const node_t *nodes, int nn)
{
    static const char *const procs[] = {"broker", "sampler", "verifier", "generator", "learner", "evaluate"};
    enum { NP = sizeof procs / sizeof procs[0] };
    bool header = false;
    for (int i = 0; i < nn; i++) {
        cJSON *p = last_peaks(nodes[i].path);
        if (!p) continue;
        if (!header) {
            fprintf(md, "\nPeak resident memory of each process (GB, VmHWM, from the last metrics line; "
                        "generator: the largest of the node's generators).\n\n| node |");
            for (int k = 0; k < NP; k++) fprintf(md, " %s |", procs[k]);
            fprintf(md, " all |\n|---|");
            for (int k = 0; k <= NP; k++) fprintf(md, "---|");
            fprintf(md, "\n");
            header = true;
        }
        double sum = 0;
        fprintf(md, "| %s |", nodes[i].name);
        for (int k = 0; k < NP; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, procs[k]);
            if (cJSON_IsNumber(v)) fprintf(md, " %.3f |", v->valuedouble), sum += v->valuedouble;
            else fprintf(md, " |");
        }
        fprintf(md, " %.3f |\n", sum);
        cJSON_Delete(p);
    }
}

/* OUT/report/summary.md and a data file per node; 0 or -1 */
static int write_summary(const char *outdir, const node_t *nodes, int nn, int window)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/report/summary.md", outdir);
    FILE *md = fopen(path, "w");
    if (!md) {
        fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(md,
            "Own reward: the node's own completions, every one its sampler scored (what it learned). Batch reward: "
            "every completion it trained on, external ones included (what the paper and genrl log; external groups "
            "come with some right answer, so it rises with J even when nothing is learned).\n\n"
            "| node | rounds | mean own reward | first %d | last %d | change | cumulative own reward | mean batch "
            "reward | cumulative batch reward |\n|---|---|---|---|---|---|---|---|---|\n",
            window, window);
    double swarm_total = 0;
    for (int i = 0; i < nn; i++) {
        double cum = write_node(outdir, &nodes[i], window, md);
        if (isnan(cum)) {
            fclose(md);
            return -1;
        }
        swarm_total += cum;
    }
    fprintf(md, "| **swarm** | | | | | | **%.2f** | | |\n", swarm_total);
    write_peaks(md, nodes, nn);
    fclose(md);
    return 0;
}

/* one curve per node from column col of its data file */
static void plot_nodes(FILE *gp, const char *outdir, const node_t *nodes, int nn, int col)
{
    fprintf(gp, "plot ");
    for (int i = 0; i < nn; i++) {
        char data[4096];
        snprintf(data, sizeof data, "%s/report/%.127s.dat", outdir, nodes[i].name);
        series_plot_curve(gp, i, data, col, "lines", nodes[i].name);
    }
    fprintf(gp, "\n");
}

/* OUT/report/plots.gp, then gnuplot draws it: 0, 1 when gnuplot failed,
 * -1 when the script could not be written */
static int write_plots(const char *outdir, const node_t *nodes, int nn, int window)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/report/plots.gp", outdir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    static const struct {
        const char *file, *title;
        int col;
    } plots[] = {
        {"reward", "reward per round", 2},
        {"moving_average", "reward, moving average", 3},
        {"cumulative", "cumulative reward", 4},
    };
    fprintf(gp, "set terminal pngcairo size 1000,600\nset key outside right\nset xlabel 'round'\nset grid\n");
    for (size_t p = 0; p < sizeof plots / sizeof plots[0]; p++) {
        fprintf(gp, "set output '%s/report/%s.png'\nset title '%s", outdir, plots[p].file, plots[p].title);
        if (plots[p].col == 3) fprintf(gp, " (window %d rounds)", window);
        fprintf(gp, "'\n");
        plot_nodes(gp, outdir, nodes, nn, plots[p].col);
    }
    for (int d = 0; d < NDIAG; d++) {
        /* a diagnostic that never moved (no truncation at all) gets a range
         * around its value: gnuplot warns about an empty one; one no line
         * holds is not plotted */
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < nn; i++)
            for (int k = 0; k < nodes[i].s.n; k++)
                if (!isnan(nodes[i].s.col[d][k]))
                    lo = fmin(lo, nodes[i].s.col[d][k]), hi = fmax(hi, nodes[i].s.col[d][k]);
        if (lo > hi) continue; /* metrics from before the diagnostics */
        if (hi - lo < 1e-9) fprintf(gp, "set yrange [%g:%g]\n", lo - 1, hi + 1);
        else fprintf(gp, "set yrange [*:*]\n");
        fprintf(gp, "set output '%s/report/%s.png'\nset title '%s'\n", outdir, diags[d].file, diags[d].title);
        plot_nodes(gp, outdir, nodes, nn, 5 + d);
    }
    fclose(gp);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/report", outdir);
    return series_plot_run("report", path, dir) == 0 ? 0 : 1;
}

/* the run folder, --out and --window into run, out and window (0 when
 * not given); 0, or 2 after a line or the usage on stderr */
static int parse_flags(int argc, char **argv, const char **run, const char **out, int *window)
{
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--window") == 0 && a + 1 < argc) {
            *window = atoi(argv[++a]);
            if (*window < 1) {
                fprintf(stderr, "report: --window: '%s' is not a positive integer\n", argv[a]);
                return 2;
            }
        } else if (strcmp(argv[a], "--out") == 0 && a + 1 < argc) {
            *out = argv[++a];
        } else if (argv[a][0] == '-') {
            fprintf(stderr, "report: unknown flag '%s'\n", argv[a]);
            usage();
            return 2;
        } else if (!*run) {
            *run = argv[a];
        } else {
            usage();
            return 2;
        }
    }
    if (!*run) {
        usage();
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *run = NULL, *out = NULL;
    int window = 0;
    if (parse_flags(argc, argv, &run, &out, &window)) return 2;

    static node_t nodes[MAX_NODES];
    int nn = load_nodes(run, nodes);
    if (nn < 0) return 1;
    if (nn == 0) {
        fprintf(stderr, "report: %s: no metrics.jsonl found (expected RUN/metrics.jsonl or RUN/<node>/metrics.jsonl)\n",
                run);
        return 1;
    }
    char outdir[1024], path[1100];
    if (snprintf(outdir, sizeof outdir, "%s", out ? out : run) >= (int)sizeof outdir) {
        fprintf(stderr, "report: output folder path longer than %zu bytes\n", sizeof outdir - 1);
        return 2;
    }
    snprintf(path, sizeof path, "%s/report", outdir);
    mkdir(outdir, 0755);
    mkdir(path, 0755);
    int longest = 0;
    for (int i = 0; i < nn; i++)
        if (nodes[i].s.n > longest) longest = nodes[i].s.n;
    if (!window) window = longest >= 1000 ? 100 : longest / 10 > 1 ? longest / 10 : 1;

    if (write_summary(outdir, nodes, nn, window) != 0) return 1;
    int rc = write_plots(outdir, nodes, nn, window);
    if (rc < 0) return 1;
    snprintf(path, sizeof path, "%s/report/summary.md", outdir);
    FILE *f = fopen(path, "r");
    char buf[1024];
    while (f && fgets(buf, sizeof buf, f)) fputs(buf, stdout);
    if (f) fclose(f);
    printf("report: %s/report (reward.png, moving_average.png, cumulative.png, the diagnostics' plots, summary.md; "
           "window %d)\n",
           outdir, window);
    for (int i = 0; i < nn; i++) series_free(&nodes[i].s);
    return rc;
}
