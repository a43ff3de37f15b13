/* game_report: the three-stage game's swarm against a solo node.
 *
 *   game_report SWARM_RUN SOLO_RUN [--out FOLDER]
 *
 * Reads every SWARM_RUN/<node> and SOLO_RUN/<node> that holds a
 * metrics.jsonl (scripts/game.sh makes both): per game round, each
 * stage's mean reward and the answer stage's mean completion length (the
 * answer length); and eval.jsonl, held-out pass@1 on the answer stage's
 * prompt at the ends of rounds. The relative regret of each node against
 * the best of all of them (stats_relative_regret), pointwise and
 * time-averaged, is computed at the rounds every node evaluated. Writes
 * OUT/game/ (default OUT = SWARM_RUN): a data file per node, regret.dat,
 * summary.md, and PNG plots by gnuplot; prints the summary. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "node/metrics.h"
#include "stats/series.h"
#include "stats/stats.h"

#define MAX_NODES 64

/* a node's batches (value: the stage's scored reward) with the completions'
 * mean length and the peers whose outputs the stage showed; batch b is stage (b - 1) % 3 of game round (b - 1) / 3 + 1
 */
static const char *const metric_keys[] = {"completion_length", "sampler.game.peers"};
static const char *const stages[3] = {"answer", "critique", "resolve"};

typedef struct {
    char name[160];          /* "swarm/n0" or "solo/n0" */
    series_t batches, evals; /* metrics.jsonl, eval.jsonl */
    int rounds;              /* game rounds with a batch */
    double *stage[3];        /* per game round, NaN where missing */
    double *length;          /* answer length per game round */
    double peers[3];         /* peers shown per stage, mean over rounds */
} node_t;

static const cJSON *pass1(const cJSON *line) { return cJSON_GetObjectItemCaseSensitive(line, "pass1"); }

/* per game round: the stages' rewards and the answer length */
static void by_round(node_t *nd)
{
    const series_t *s = &nd->batches;
    nd->rounds = 0;
    for (int k = 0; k < s->n; k++)
        if ((s->round[k] - 1) / 3 + 1 > nd->rounds) nd->rounds = (s->round[k] - 1) / 3 + 1;
    for (int st = 0; st < 3; st++) {
        nd->stage[st] = malloc(sizeof(double) * (size_t)(nd->rounds + 1));
        for (int r = 0; r <= nd->rounds; r++) nd->stage[st][r] = NAN;
    }
    nd->length = malloc(sizeof(double) * (size_t)(nd->rounds + 1));
    for (int r = 0; r <= nd->rounds; r++) nd->length[r] = NAN;
    int shown[3] = {0};
    for (int k = 0; k < s->n; k++) {
        if (s->round[k] < 1) continue;
        int r = (s->round[k] - 1) / 3 + 1, st = (s->round[k] - 1) % 3;
        nd->stage[st][r] = s->value[k];
        if (st == 0) nd->length[r] = s->col[0][k];
        if (!isnan(s->col[1][k])) nd->peers[st] += s->col[1][k], shown[st]++;
    }
    for (int st = 0; st < 3; st++) nd->peers[st] = shown[st] ? nd->peers[st] / shown[st] : NAN;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const node_t *)a)->name, ((const node_t *)b)->name);
}

/* FOLDER/<node> for every node with a game metrics line, after the nn
 * in nodes, sorted by name; how many in all */
static int load_folder(const char *folder, const char *label, node_t *nodes, int nn)
{
    int first = nn;
    DIR *d = opendir(folder);
    if (!d) {
        fprintf(stderr, "game_report: %s: %s\n", folder, strerror(errno));
        return -1;
    }
    struct dirent *de;
    char path[4096];
    while ((de = readdir(d)) && nn < MAX_NODES) {
        if (de->d_name[0] == '.') continue;
        node_t *nd = &nodes[nn];
        snprintf(nd->name, sizeof nd->name, "%s/%.127s", label, de->d_name);
        snprintf(path, sizeof path, "%s/%s/metrics.jsonl", folder, de->d_name);
        if (series_load(&nd->batches, path, metrics_round_reward, metric_keys, 2, "game_report",
                        "not a metrics line, skipped") <= 0) {
            series_free(&nd->batches);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s/eval.jsonl", folder, de->d_name);
        if (series_load(&nd->evals, path, pass1, NULL, 0, "game_report", "not an evaluation line, skipped") < 0)
            fprintf(stderr, "game_report: %s: none (run its evaluator: scripts/game.sh does)\n", path);
        by_round(nd);
        nn++;
    }
    closedir(d);
    qsort(nodes + first, (size_t)(nn - first), sizeof *nodes, by_name);
    return nn;
}

/* the rounds every node evaluated, in order; how many */
static int common_rounds(const node_t *nodes, int nn, int *out)
{
    int n = 0;
    const series_t *e0 = &nodes[0].evals;
    for (int k = 0; k < e0->n; k++) {
        bool all = true;
        for (int i = 1; i < nn && all; i++) {
            bool has = false;
            for (int j = 0; j < nodes[i].evals.n && !has; j++) has = nodes[i].evals.round[j] == e0->round[k];
            all = has;
        }
        if (all && (n == 0 || e0->round[k] > out[n - 1])) out[n++] = e0->round[k];
    }
    return n;
}

static double eval_at(const series_t *e, int round)
{
    for (int j = e->n - 1; j >= 0; j--)
        if (e->round[j] == round) return e->value[j];
    return NAN;
}

/* mean of x[from..to] skipping NaN; NaN when none */
static double mean_of(const double *x, int from, int to)
{
    double sum = 0;
    int n = 0;
    for (int r = from; r <= to; r++)
        if (!isnan(x[r])) sum += x[r], n++;
    return n ? sum / n : NAN;
}

/* OUT/game/<node>.dat: round, the three stages' rewards, answer length */
static int write_rounds(const char *dir, const node_t *nd, int k)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/node%d.dat", dir, k);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# %s: round answer critique resolve answer_length\n", nd->name);
    for (int r = 1; r <= nd->rounds; r++)
        fprintf(f, "%d %.6g %.6g %.6g %.6g\n", r, nd->stage[0][r], nd->stage[1][r], nd->stage[2][r], nd->length[r]);
    fclose(f);
    return 0;
}

/* OUT/game/regret.dat: round, then per node pass@1, pointwise and
 * time-averaged regret; the last time-averaged regret per node in last */
static int write_regret(const char *dir, const node_t *nodes, int nn, const int *rounds, int n, double *last)
{
    double *v[MAX_NODES], *pt[MAX_NODES], *avg[MAX_NODES];
    for (int i = 0; i < nn; i++) {
        v[i] = malloc(sizeof(double) * (size_t)n), pt[i] = malloc(sizeof(double) * (size_t)n);
        avg[i] = malloc(sizeof(double) * (size_t)n);
        for (int t = 0; t < n; t++) v[i][t] = eval_at(&nodes[i].evals, rounds[t]);
    }
    stats_relative_regret((const double *const *)v, nn, n, pt, avg);
    char path[4096];
    snprintf(path, sizeof path, "%s/regret.dat", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# round, then per node: pass@1, pointwise regret, time-averaged regret (nodes:");
        for (int i = 0; i < nn; i++) fprintf(f, " %s", nodes[i].name);
        fprintf(f, ")\n");
        for (int t = 0; t < n; t++) {
            fprintf(f, "%d", rounds[t]);
            for (int i = 0; i < nn; i++) fprintf(f, " %.6f %.6f %.6f", v[i][t], pt[i][t], avg[i][t]);
            fprintf(f, "\n");
        }
        fclose(f);
    }
    for (int i = 0; i < nn; i++) last[i] = n ? avg[i][n - 1] : NAN, free(v[i]), free(pt[i]), free(avg[i]);
    return f ? 0 : -1;
}

static void write_summary(FILE *md, const node_t *nodes, int nn, const int *rounds, int n, const double *regret)
{
    fprintf(md, "| node | game rounds | answer, critique, resolve reward: first 10 rounds | last 10 rounds | answer "
                "length first / last 10 | peers shown at critique, resolve (mean) | pass@1 first / last | "
                "time-averaged regret |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nn; i++) {
        const node_t *nd = &nodes[i];
        int R = nd->rounds, a = R < 10 ? R : 10;
        fprintf(md,
                "| %s | %d | %.3f, %.3f, %.3f | %.3f, %.3f, %.3f | %.1f / %.1f | %.2f, %.2f | %.3f / %.3f | %.4f |\n",
                nd->name, R, mean_of(nd->stage[0], 1, a), mean_of(nd->stage[1], 1, a), mean_of(nd->stage[2], 1, a),
                mean_of(nd->stage[0], R - a + 1, R), mean_of(nd->stage[1], R - a + 1, R),
                mean_of(nd->stage[2], R - a + 1, R), mean_of(nd->length, 1, a), mean_of(nd->length, R - a + 1, R),
                nd->peers[1], nd->peers[2], n ? eval_at(&nd->evals, rounds[0]) : NAN,
                n ? eval_at(&nd->evals, rounds[n - 1]) : NAN, regret[i]);
    }
    fprintf(md,
            "\nRegret at %d evaluated rounds (%d to %d): a node's pointwise regret is how far its held-out pass@1 "
            "falls short of the best node's at that round, as a share of the best; time-averaged, its mean up to "
            "the round. 0 is the best node at every round.\n",
            n, n ? rounds[0] : 0, n ? rounds[n - 1] : 0);
}

/* one plot: column col of each node's file (regret.dat when stride > 0:
 * column col + stride i) */
static void plot(FILE *gp, const char *dir, const node_t *nodes, int nn, const char *file, const char *title, int col,
                 int stride)
{
    fprintf(gp, "set output '%s/%s.png'\nset title '%s'\nplot ", dir, file, title);
    for (int i = 0; i < nn; i++) {
        char data[4096];
        if (stride) snprintf(data, sizeof data, "%s/regret.dat", dir);
        else snprintf(data, sizeof data, "%s/node%d.dat", dir, i);
        series_plot_curve(gp, i, data, stride ? col + stride * i : col, "linespoints", nodes[i].name);
    }
    fprintf(gp, "\n");
}

static int write_plots(const char *dir, const node_t *nodes, int nn)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plots.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!gp) return -1;
    fprintf(gp, "set terminal pngcairo size 1000,600\nset key outside right\nset xlabel 'game round'\nset grid\n");
    for (int st = 0; st < 3; st++) {
        char file[64], title[128];
        snprintf(file, sizeof file, "reward_%s", stages[st]);
        snprintf(title, sizeof title, "%s stage: mean reward of the completions", stages[st]);
        plot(gp, dir, nodes, nn, file, title, 2 + st, 0);
    }
    plot(gp, dir, nodes, nn, "answer_length", "answer length (tokens, answer stage)", 5, 0);
    plot(gp, dir, nodes, nn, "pass1", "held-out pass@1 (answer stage prompt, greedy)", 2, 3);
    plot(gp, dir, nodes, nn, "regret", "relative regret, pointwise", 3, 3);
    plot(gp, dir, nodes, nn, "regret_averaged", "relative regret, time-averaged", 4, 3);
    fclose(gp);
    return series_plot_run("game_report", path, dir) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *swarm = NULL, *solo = NULL, *out = NULL;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--out") == 0 && a + 1 < argc) out = argv[++a];
        else if (argv[a][0] != '-' && !swarm) swarm = argv[a];
        else if (argv[a][0] != '-' && !solo) solo = argv[a];
        else swarm = solo = NULL, a = argc;
    }
    if (!swarm || !solo) {
        fprintf(stderr, "usage: game_report SWARM_RUN SOLO_RUN [--out FOLDER]\n");
        return 2;
    }
    static node_t nodes[MAX_NODES];
    int nn = load_folder(swarm, "swarm", nodes, 0), ns = nn;
    if (nn >= 0) nn = load_folder(solo, "solo", nodes, nn);
    if (nn < 0) return 1;
    if (ns == 0 || nn == ns) {
        fprintf(stderr, "game_report: no game metrics in %s\n", ns == 0 ? swarm : solo);
        return 1;
    }
    char dir[2048];
    if (snprintf(dir, sizeof dir, "%s/game", out ? out : swarm) >= (int)sizeof dir) {
        fprintf(stderr, "game_report: output folder path longer than %zu bytes\n", sizeof dir - 16);
        return 2;
    }
    if (out) mkdir(out, 0755);
    mkdir(dir, 0755);
    int *rounds = malloc(sizeof(int) * (size_t)(nodes[0].evals.n + 1)), n = common_rounds(nodes, nn, rounds);
    double regret[MAX_NODES];
    int rc = write_regret(dir, nodes, nn, rounds, n, regret);
    for (int i = 0; i < nn && rc == 0; i++) rc = write_rounds(dir, &nodes[i], i);
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.md", dir);
    FILE *md = rc == 0 ? fopen(path, "w") : NULL;
    if (!md) {
        fprintf(stderr, "game_report: %s: cannot write\n", dir);
        return 1;
    }
    write_summary(md, nodes, nn, rounds, n, regret);
    fclose(md);
    write_summary(stdout, nodes, nn, rounds, n, regret);
    rc = write_plots(dir, nodes, nn);
    printf("game_report: %s (summary.md, regret.dat, node*.dat, reward_*.png, answer_length.png, pass1.png, "
           "regret.png, regret_averaged.png)\n",
           dir);
    for (int i = 0; i < nn; i++) {
        series_free(&nodes[i].batches), series_free(&nodes[i].evals);
        for (int st = 0; st < 3; st++) free(nodes[i].stage[st]);
        free(nodes[i].length);
    }
    free(rounds);
    return rc;
}
