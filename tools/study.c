/* study: the controlled study's report. Reads an experiment folder that
 * scripts/experiment.sh filled, EXP/I<i>J<j>/seed<s>/<node>/metrics.jsonl
 * (and eval.jsonl where an evaluator ran), and writes into EXP/results:
 *   rewards.tsv      config seed node round reward batch_reward model (reward: the
 *                    round's own reward as metrics_round_reward takes it, as bin/report does:
 *                    every own completion scored; batch_reward: every completion trained,
 *                    external ones included, the paper's; model is the node's kind)
 *   cumulative.tsv   config seed nodes rounds cumulative cumulative_batch (sums over nodes
 *                    and rounds of each)
 *   summary.md       the cumulative-reward table with each configuration's ratio to the
 *                    J = 0 one and tests across seeds; the evaluation table with a per-round
 *                    test of swarm nodes against isolated ones and adjusted p-values; in a
 *                    swarm of several kinds of model, each kind against itself at J = 0
 *   *.dat, plots.gp and the PNGs gnuplot draws from them: moving_average, cumulative,
 *   grid (one panel per node, as the paper's Figure 1), evaluation (pass@1 next to reward)
 *
 *   study EXP [--window N] */
#include <cjson/cJSON.h>
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

#define MAX_ITEMS 64

typedef struct {
    char name[64];
    char model[64];               /* the policy's name in its metrics ("bytes-4L-256C-v264"): its kind */
    char model_name[128];         /* the model setting it ran ("tiny", "smollm2-135m"), "" in older metrics */
    series_t reward, batch, eval; /* own reward, batch reward, held-out pass@1 */
    double completions;           /* own completions scored per round, the mean */
} node_t;

typedef struct {
    int seed, nn;
    node_t nodes[MAX_ITEMS];
} seedrun_t;

typedef struct {
    int I, J, ns, max_round;
    bool untrained; /* I/Ju: external groups drawn and counted, not trained */
    char dir[16], label[16];
    seedrun_t seeds[MAX_ITEMS];
    double cumulative[MAX_ITEMS];       /* per seed: own reward */
    double cumulative_batch[MAX_ITEMS]; /* per seed: batch reward */
    double completions;                 /* own completions generated per node-round, the mean */
    double pass1;                       /* held-out pass@1 at the last evaluation, over nodes and seeds */
    int pass1_round;
} cfg_t;

static char exp_dir[2048], res_dir[2100];

static const cJSON *pass1(const cJSON *line) { return cJSON_GetObjectItemCaseSensitive(line, "pass1"); }

static const cJSON *scored_completions(const cJSON *line)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(line, "sampler"), "scored_completions");
}

/* the "model" and "model_name" of a metrics file's first line ("" when
 * none) */
static void load_model(const char *path, node_t *n)
{
    n->model[0] = n->model_name[0] = '\0';
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    if (f && getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "model"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "model_name"));
        if (m) snprintf(n->model, sizeof n->model, "%s", m);
        if (name) snprintf(n->model_name, sizeof n->model_name, "%s", name);
        cJSON_Delete(j);
    }
    free(line);
    if (f) fclose(f);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static int cmp_node(const void *a, const void *b)
{
    return strcmp(((const node_t *)a)->name, ((const node_t *)b)->name);
}

static int cmp_cfg(const void *a, const void *b)
{
    const cfg_t *x = a, *y = b;
    return x->J != y->J ? x->J - y->J : x->I != y->I ? y->I - x->I : x->untrained - y->untrained;
}

static void load_seed(cfg_t *c, int seed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/seed%d", exp_dir, c->dir, seed);
    DIR *d = opendir(path);
    if (!d) return;
    seedrun_t *s = &c->seeds[c->ns];
    memset(s, 0, sizeof *s);
    s->seed = seed;
    struct dirent *de;
    while ((de = readdir(d)) && s->nn < MAX_ITEMS) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof s->nodes[0].name) continue;
        node_t *n = &s->nodes[s->nn];
        memset(n, 0, sizeof *n);
        snprintf(n->name, sizeof n->name, "%.63s", de->d_name);
        snprintf(path, sizeof path, "%s/%s/seed%d/%s/metrics.jsonl", exp_dir, c->dir, seed, de->d_name);
        const char *skip = "no round and a reward, line skipped";
        if (series_load(&n->reward, path, metrics_round_reward, NULL, 0, "study", skip) <= 0) continue;
        load_model(path, n);
        series_load(&n->batch, path, metrics_batch_reward, NULL, 0, "study", NULL);
        series_t sc = {0};
        series_load(&sc, path, scored_completions, NULL, 0, "study", NULL);
        for (int k = 0; k < sc.n; k++) n->completions += sc.value[k] / sc.n;
        series_free(&sc);
        snprintf(path, sizeof path, "%s/%s/seed%d/%s/eval.jsonl", exp_dir, c->dir, seed, de->d_name);
        series_load(&n->eval, path, pass1, NULL, 0, "study", "no round and pass1, line skipped");
        for (int k = 0; k < n->reward.n; k++)
            if (n->reward.round[k] > c->max_round) c->max_round = n->reward.round[k];
        s->nn++;
    }
    closedir(d);
    if (s->nn == 0) return;
    qsort(s->nodes, (size_t)s->nn, sizeof s->nodes[0], cmp_node);
    c->ns++;
}

/* configurations I<i>J<j>, each with its seed<s> folders */
static int load_experiment(cfg_t *cfgs)
{
    DIR *d = opendir(exp_dir);
    if (!d) {
        fprintf(stderr, "study: %s: %s\n", exp_dir, strerror(errno));
        return -1;
    }
    int nc = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nc < MAX_ITEMS) {
        cfg_t *c = &cfgs[nc];
        char v = 0, tail;
        int got = sscanf(de->d_name, "I%dJ%d%c%c", &c->I, &c->J, &v, &tail);
        if (got != 2 && !(got == 3 && v == 'u')) continue;
        c->untrained = got == 3;
        snprintf(c->dir, sizeof c->dir, "I%dJ%d%s", c->I, c->J, c->untrained ? "u" : "");
        snprintf(c->label, sizeof c->label, "%d/%d%s", c->I, c->J, c->untrained ? "u" : "");
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", exp_dir, c->dir);
        DIR *sd = opendir(path);
        int seeds[MAX_ITEMS], n = 0;
        struct dirent *se;
        while (sd && (se = readdir(sd)) && n < MAX_ITEMS)
            if (sscanf(se->d_name, "seed%d%c", &seeds[n], &tail) == 1) n++;
        if (sd) closedir(sd);
        qsort(seeds, (size_t)n, sizeof seeds[0], cmp_int);
        c->ns = 0;
        c->max_round = 0;
        for (int k = 0; k < n; k++) load_seed(c, seeds[k]);
        if (c->ns > 0) nc++;
    }
    closedir(d);
    qsort(cfgs, (size_t)nc, sizeof cfgs[0], cmp_cfg);
    return nc;
}

static FILE *open_out(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", res_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "study: %s: %s\n", path, strerror(errno));
    return f;
}

/* a node's series in each round 1..R, NaN where it has none */
static void by_round(const series_t *x, int R, double *out)
{
    for (int r = 0; r < R; r++) out[r] = NAN;
    for (int k = 0; k < x->n; k++)
        if (x->round[k] >= 1 && x->round[k] <= R) out[x->round[k] - 1] = x->value[k];
}

static void fmt_p(char *buf, size_t len, double p, int ok)
{
    if (!ok) snprintf(buf, len, "n/a");
    else if (p < 1e-4) snprintf(buf, len, "%.1e", p);
    else snprintf(buf, len, "%.4f", p);
}

/* a configuration's rewards summed per round over nodes and seeds, and
 * per node over seeds, with their counts */
typedef struct {
    int R, nodes_max;
    double *sum, *cnt;           /* (R) */
    double *node_sum, *node_cnt; /* (MAX_ITEMS, R) */
} round_sums_t;

/* one seed's rows of rewards.tsv and cumulative.tsv, added to the sums */
static void add_seed_rewards(cfg_t *cf, int s, round_sums_t *t, FILE *tsv, FILE *cum)
{
    int R = t->R;
    seedrun_t *sr = &cf->seeds[s];
    double *all = malloc((size_t)sr->nn * (R + 1) * sizeof *all),
           *batch = malloc((size_t)sr->nn * (R + 1) * sizeof *batch);
    for (int i = 0; i < sr->nn; i++) {
        by_round(&sr->nodes[i].reward, R, all + (size_t)i * R);
        by_round(&sr->nodes[i].batch, R, batch + (size_t)i * R);
        for (int r = 0; r < R; r++) {
            double v = all[(size_t)i * R + r];
            if (isnan(v)) continue;
            fprintf(tsv, "%s\t%d\t%s\t%d\t%.6f\t%.6f\t%s\n", cf->label, sr->seed, sr->nodes[i].name, r + 1, v,
                    batch[(size_t)i * R + r], sr->nodes[i].model);
            t->sum[r] += v, t->cnt[r] += 1;
            t->node_sum[(size_t)i * R + r] += v, t->node_cnt[(size_t)i * R + r] += 1;
        }
    }
    if (sr->nn > t->nodes_max) t->nodes_max = sr->nn;
    cf->cumulative[s] = stats_cumulative(all, sr->nn, R);
    cf->cumulative_batch[s] = stats_cumulative(batch, sr->nn, R);
    fprintf(cum, "%s\t%d\t%d\t%d\t%.4f\t%.4f\n", cf->label, sr->seed, sr->nn, R, cf->cumulative[s],
            cf->cumulative_batch[s]);
    free(all), free(batch);
}

/* ma_<config>.dat: round, mean reward over nodes and seeds, its moving
 * average, cumulative (seed mean) */
static int write_moving_average(const cfg_t *cf, const round_sums_t *t, int window)
{
    int R = t->R;
    double *mean = malloc((size_t)R * sizeof *mean), *ma = malloc((size_t)R * sizeof *ma);
    for (int r = 0; r < R; r++) mean[r] = t->cnt[r] ? t->sum[r] / t->cnt[r] : 0;
    stats_moving_average(mean, R, window, ma);
    char name[64];
    snprintf(name, sizeof name, "ma_%s.dat", cf->dir);
    FILE *f = open_out(name);
    if (f) {
        fprintf(f, "# round mean_reward moving_average cumulative\n");
        double run = 0;
        for (int r = 0; r < R; r++) {
            run += t->sum[r] / cf->ns;
            fprintf(f, "%d %.6f %.6f %.6f\n", r + 1, mean[r], ma[r], run);
        }
        fclose(f);
    }
    free(mean), free(ma);
    return f ? 0 : -1;
}

/* grid_<config>.dat: per node (seed mean), moving average: the grid's panels */
static int write_grid(const cfg_t *cf, const round_sums_t *t, int window)
{
    int R = t->R;
    double *mean = malloc((size_t)R * sizeof *mean);
    double *grid = malloc((size_t)MAX_ITEMS * (R + 1) * sizeof *grid);
    for (int i = 0; i < t->nodes_max; i++) {
        for (int r = 0; r < R; r++)
            mean[r] =
                t->node_cnt[(size_t)i * R + r] ? t->node_sum[(size_t)i * R + r] / t->node_cnt[(size_t)i * R + r] : 0;
        stats_moving_average(mean, R, window, grid + (size_t)i * R);
    }
    char name[64];
    snprintf(name, sizeof name, "grid_%s.dat", cf->dir);
    FILE *f = open_out(name);
    if (f) {
        fprintf(f, "# round, then each node's moving average (seed mean)\n");
        for (int r = 0; r < R; r++) {
            fprintf(f, "%d", r + 1);
            for (int i = 0; i < t->nodes_max; i++) fprintf(f, " %.6f", grid[(size_t)i * R + r]);
            fprintf(f, "\n");
        }
        fclose(f);
    }
    free(mean), free(grid);
    return f ? 0 : -1;
}

/* one configuration's rows of rewards.tsv and cumulative.tsv, and its curves */
static int write_config_rewards(cfg_t *cf, int window, FILE *tsv, FILE *cum)
{
    int R = cf->max_round;
    round_sums_t t = {.R = R,
                      .sum = calloc((size_t)R + 1, sizeof *t.sum),
                      .cnt = calloc((size_t)R + 1, sizeof *t.cnt),
                      .node_sum = calloc((size_t)MAX_ITEMS * (R + 1), sizeof *t.node_sum),
                      .node_cnt = calloc((size_t)MAX_ITEMS * (R + 1), sizeof *t.node_cnt)};
    for (int s = 0; s < cf->ns; s++) add_seed_rewards(cf, s, &t, tsv, cum);
    int rc = write_moving_average(cf, &t, window) != 0 || write_grid(cf, &t, window) != 0 ? -1 : 0;
    free(t.sum), free(t.cnt), free(t.node_sum), free(t.node_cnt);
    return rc;
}

/* Paired t-test of cf's cumulative rewards against base's, seed by seed
 * (the seeds both ran); 0, or -1 with fewer than 2 such seeds. */
static int paired_by_seed(const cfg_t *cf, const cfg_t *base, stats_ttest_t *out)
{
    double a[MAX_ITEMS], b[MAX_ITEMS];
    int n = 0;
    for (int s = 0; s < cf->ns; s++)
        for (int k = 0; k < base->ns; k++)
            if (cf->seeds[s].seed == base->seeds[k].seed) a[n] = cf->cumulative[s], b[n++] = base->cumulative[k];
    return stats_paired(a, b, n, out);
}

/* the summary's table of cumulative rewards, each configuration against J = 0 */
static void write_cumulative_table(const cfg_t *cfgs, int nc, FILE *md)
{
    const cfg_t *base = NULL;
    for (int c = 0; c < nc; c++)
        if (cfgs[c].J == 0) base = &cfgs[c];
    fprintf(md,
            "## Cumulative reward\n\nCumulative reward = the sum over nodes and rounds of the mean reward of every own "
            "completion a node's sampler scored for that round (sampler.scored_reward: trained or not); one value "
            "per seed.\n\n");
    fprintf(md,
            "| I/J | nodes | rounds | seeds | cumulative reward per seed | mean | sd | per node-round | ratio to %s | "
            "Welch p | paired p | permutation p |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            base ? "J = 0" : "J = 0 (none run)");
    for (int c = 0; c < nc; c++) {
        const cfg_t *cf = &cfgs[c];
        char seeds[1024] = "", pw[32], pd[32], pp[32], ratio[32] = "n/a";
        size_t o = 0;
        for (int s = 0; s < cf->ns && o < sizeof seeds - 32; s++)
            o += (size_t)snprintf(seeds + o, sizeof seeds - o, "%s%.2f", s ? ", " : "", cf->cumulative[s]);
        double m = stats_mean(cf->cumulative, cf->ns), sd = sqrt(stats_var(cf->cumulative, cf->ns));
        stats_ttest_t w = {0, 0, 1}, d = {0, 0, 1};
        int wok = 0, dok = 0, pok = 0;
        double perm = 1;
        if (base && base != cf) {
            double bm = stats_mean(base->cumulative, base->ns);
            if (bm != 0) snprintf(ratio, sizeof ratio, "%.3f", m / bm);
            wok = stats_welch(cf->cumulative, cf->ns, base->cumulative, base->ns, &w) == 0;
            dok = paired_by_seed(cf, base, &d) == 0;
            pok = cf->ns + base->ns > 2;
            perm = stats_permutation(cf->cumulative, cf->ns, base->cumulative, base->ns, 100000, 1);
        } else if (base == cf) {
            snprintf(ratio, sizeof ratio, "1");
        }
        fmt_p(pw, sizeof pw, w.p, wok);
        fmt_p(pd, sizeof pd, d.p, dok);
        fmt_p(pp, sizeof pp, perm, pok);
        fprintf(md, "| %s | %d | %d | %d | %s | %.2f | %.2f | %.4f | %s | %s | %s | %s |\n", cf->label, cf->seeds[0].nn,
                cf->max_round, cf->ns, seeds, m, sd,
                m / ((double)cf->seeds[0].nn * (cf->max_round ? cf->max_round : 1)), ratio, pw, pd, pp);
    }
    fprintf(md,
            "\nTests compare each configuration's per-seed cumulative rewards with the J = 0 configuration's: Welch's "
            "t-test (needs 2 seeds on each side), the paired t-test of the differences seed by seed (the seeds both "
            "ran, at least 2; the test for common random numbers, --lockstep 1, where the configurations share each "
            "seed's questions and sampling uniforms) and an exact permutation test of the mean difference (its "
            "smallest possible p is 2 / C(seeds on both sides, seeds on one side)).\n\n");
}

/* the paper's cumulative rewards (8 nodes, 2,000 rounds; its Table) by
 * configuration, to stand beside the batch reward they are comparable to */
static double paper_cumulative(int I, int J)
{
    static const struct {
        int I, J;
        double cum;
    } paper[] = {{8, 0, 561.79}, {6, 2, 854.43}, {4, 4, 1093.31}, {2, 6, 945.87}};
    for (size_t k = 0; k < sizeof paper / sizeof *paper; k++)
        if (paper[k].I == I && paper[k].J == J) return paper[k].cum;
    return NAN;
}

/* held-out pass@1 at each node's last evaluation, over nodes and seeds */
static void last_pass1(cfg_t *cf)
{
    double sum = 0;
    int n = 0;
    cf->pass1_round = 0;
    for (int s = 0; s < cf->ns; s++)
        for (int i = 0; i < cf->seeds[s].nn; i++) {
            const series_t *e = &cf->seeds[s].nodes[i].eval;
            if (!e->n) continue;
            sum += e->value[e->n - 1], n++;
            if (e->round[e->n - 1] > cf->pass1_round) cf->pass1_round = e->round[e->n - 1];
        }
    cf->pass1 = n ? sum / n : NAN;
}

/* own completions generated per node-round, the mean over nodes and seeds */
static void generated(cfg_t *cf)
{
    double sum = 0;
    int n = 0;
    for (int s = 0; s < cf->ns; s++)
        for (int i = 0; i < cf->seeds[s].nn; i++) sum += cf->seeds[s].nodes[i].completions, n++;
    cf->completions = n ? sum / n : 0;
}

/* the two rewards side by side: ours (own) and the paper's (batch), each
 * against J = 0, with the paper's own ratio and held-out pass@1 */
static void write_two_rewards(cfg_t *cfgs, int nc, FILE *md)
{
    const cfg_t *base = NULL;
    for (int c = 0; c < nc; c++) {
        last_pass1(&cfgs[c]);
        generated(&cfgs[c]);
        if (cfgs[c].J == 0) base = &cfgs[c];
    }
    fprintf(md, "## Two rewards\n\nOwn reward: a node's own completions, every one its sampler scored (what it "
                "learned). Batch reward: every completion its learner trained on, external groups included: what the "
                "paper and genrl log (their train/rewards). External groups come only with some advantage, so with "
                "at least one right answer in L: the batch reward rises with J even when nothing is learned. The "
                "paper's ratio (8 nodes, 2,000 rounds) is comparable to the batch one. Held-out pass@1 judges "
                "learning. A configuration I/Ju draws its J external groups and counts them in the batch reward "
                "but does not train on them: what selection alone makes of the batch reward.\n\n");
    fprintf(md, "| I/J | seeds | cumulative own | ratio to J = 0 | Welch p | cumulative batch | ratio to J = 0 | "
                "Welch p | paper's ratio | own completions per node-round | held-out pass@1 (round) |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|\n");
    double paper0 = paper_cumulative(8, 0);
    for (int c = 0; c < nc; c++) {
        const cfg_t *cf = &cfgs[c];
        double m = stats_mean(cf->cumulative, cf->ns), mb = stats_mean(cf->cumulative_batch, cf->ns);
        char r1[32] = "n/a", r2[32] = "n/a", p1[32] = "n/a", p2[32] = "n/a", pr[32] = "", ev[48] = "n/a";
        if (base && base != cf) {
            stats_ttest_t w = {0, 0, 1};
            double bm = stats_mean(base->cumulative, base->ns), bb = stats_mean(base->cumulative_batch, base->ns);
            if (bm) snprintf(r1, sizeof r1, "%.3f", m / bm);
            if (bb) snprintf(r2, sizeof r2, "%.3f", mb / bb);
            int ok = stats_welch(cf->cumulative, cf->ns, base->cumulative, base->ns, &w) == 0;
            fmt_p(p1, sizeof p1, w.p, ok);
            ok = stats_welch(cf->cumulative_batch, cf->ns, base->cumulative_batch, base->ns, &w) == 0;
            fmt_p(p2, sizeof p2, w.p, ok);
        } else if (base == cf) snprintf(r1, sizeof r1, "1"), snprintf(r2, sizeof r2, "1");
        double paper = cf->untrained ? NAN : paper_cumulative(cf->I, cf->J);
        if (!isnan(paper)) snprintf(pr, sizeof pr, "%.3f", paper / paper0);
        if (!isnan(cf->pass1)) snprintf(ev, sizeof ev, "%.3f (%d)", cf->pass1, cf->pass1_round);
        fprintf(md, "| %s | %d | %.2f | %s | %s | %.2f | %s | %s | %s | %.1f | %s |\n", cf->label, cf->ns, m, r1, p1,
                mb, r2, p2, pr[0] ? pr : "n/a", cf->completions, ev);
    }
    fprintf(md, "\n");
}

/* cumulative table, rewards.tsv, cumulative.tsv and the per-configuration curves */
static int write_rewards(cfg_t *cfgs, int nc, int window, FILE *md)
{
    FILE *tsv = open_out("rewards.tsv"), *cum = open_out("cumulative.tsv");
    if (!tsv || !cum) return -1;
    fprintf(tsv, "config\tseed\tnode\tround\treward\tbatch_reward\tmodel\n");
    fprintf(cum, "config\tseed\tnodes\trounds\tcumulative\tcumulative_batch\n");
    for (int c = 0; c < nc; c++)
        if (write_config_rewards(&cfgs[c], window, tsv, cum) != 0) return -1;
    fclose(tsv);
    fclose(cum);
    write_two_rewards(cfgs, nc, md);
    write_cumulative_table(cfgs, nc, md);
    return 0;
}

/* the kinds of model in the experiment, in order of first appearance,
 * and the model setting the first node of each ran */
static int model_kinds(const cfg_t *cfgs, int nc, char kinds[][64], char names[][128])
{
    int nk = 0;
    for (int c = 0; c < nc; c++)
        for (int s = 0; s < cfgs[c].ns; s++)
            for (int i = 0; i < cfgs[c].seeds[s].nn; i++) {
                const node_t *n = &cfgs[c].seeds[s].nodes[i];
                int k = 0;
                while (k < nk && strcmp(kinds[k], n->model) != 0) k++;
                if (k < nk || nk == MAX_ITEMS) continue;
                snprintf(kinds[nk], 64, "%s", n->model);
                snprintf(names[nk++], 128, "%s", n->model_name);
            }
    return nk;
}

/* per seed, the sum over rounds of the rewards of the configuration's
 * nodes of one kind; their number (in the first seed) in *nodes */
static void kind_cumulative(const cfg_t *cf, const char *kind, double *out, int *nodes)
{
    *nodes = 0;
    for (int s = 0; s < cf->ns; s++) {
        out[s] = 0;
        for (int i = 0; i < cf->seeds[s].nn; i++) {
            const node_t *n = &cf->seeds[s].nodes[i];
            if (strcmp(n->model, kind) != 0) continue;
            if (s == 0) (*nodes)++;
            for (int k = 0; k < n->reward.n; k++)
                if (n->reward.round[k] >= 1 && n->reward.round[k] <= cf->max_round) out[s] += n->reward.value[k];
        }
    }
}

/* mean held-out pass@1 of the kind's nodes (every seed) at their first or
 * last evaluation; NaN when none was evaluated */
static double kind_eval(const cfg_t *cf, const char *kind, int last)
{
    double sum = 0;
    int n = 0;
    for (int s = 0; s < cf->ns; s++)
        for (int i = 0; i < cf->seeds[s].nn; i++) {
            const node_t *nd = &cf->seeds[s].nodes[i];
            if (strcmp(nd->model, kind) != 0 || nd->eval.n == 0) continue;
            sum += nd->eval.value[last ? nd->eval.n - 1 : 0];
            n++;
        }
    return n ? sum / n : NAN;
}

/* a swarm of several kinds of model (the paper's heterogeneous swarm):
 * each kind's nodes in each configuration against the same kind at J = 0,
 * where no node takes another's groups */
static void write_by_model(const cfg_t *cfgs, int nc, FILE *md)
{
    static char kinds[MAX_ITEMS][64], names[MAX_ITEMS][128];
    int nk = model_kinds(cfgs, nc, kinds, names);
    if (nk < 2) return;
    const cfg_t *base = NULL;
    for (int c = 0; c < nc; c++)
        if (cfgs[c].J == 0) base = &cfgs[c];
    fprintf(md,
            "## By kind of model\n\nThe swarm holds %d kinds of model. For each, the cumulative reward of its nodes "
            "(the sum over its nodes and rounds; one value per seed) against the same kind at %s, and their "
            "held-out pass@1 (mean over its nodes and seeds) at the first and last evaluation.\n\n",
            nk, base ? "J = 0, where no node takes another's groups" : "J = 0 (none run)");
    fprintf(md, "The kinds and the model setting their nodes ran:");
    for (int k = 0; k < nk; k++)
        fprintf(md, "%s `%s` (%s)", k ? "," : "", kinds[k][0] ? kinds[k] : "(unnamed)",
                names[k][0] ? names[k] : "not recorded");
    fprintf(md, ".\n\n");
    fprintf(md,
            "| model | I/J | nodes | cumulative reward per seed | mean | ratio to J = 0 | Welch p | permutation p | "
            "pass@1 first | pass@1 last |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < nk; k++) {
        double bc[MAX_ITEMS];
        int bn = 0;
        if (base) kind_cumulative(base, kinds[k], bc, &bn);
        for (int c = 0; c < nc; c++) {
            const cfg_t *cf = &cfgs[c];
            double cum[MAX_ITEMS];
            int nodes;
            kind_cumulative(cf, kinds[k], cum, &nodes);
            if (nodes == 0) continue;
            char seeds[1024] = "", pw[32], pp[32], ratio[32] = "n/a", e0[16] = "n/a", e1[16] = "n/a";
            size_t o = 0;
            for (int s = 0; s < cf->ns && o < sizeof seeds - 32; s++)
                o += (size_t)snprintf(seeds + o, sizeof seeds - o, "%s%.2f", s ? ", " : "", cum[s]);
            double m = stats_mean(cum, cf->ns), perm = 1;
            stats_ttest_t w = {0, 0, 1};
            int wok = 0, pok = 0;
            if (base == cf) {
                snprintf(ratio, sizeof ratio, "1");
            } else if (base && bn > 0) {
                double bm = stats_mean(bc, base->ns);
                if (bm != 0) snprintf(ratio, sizeof ratio, "%.3f", m / bm);
                wok = stats_welch(cum, cf->ns, bc, base->ns, &w) == 0;
                pok = cf->ns + base->ns > 2;
                perm = stats_permutation(cum, cf->ns, bc, base->ns, 100000, 1);
            }
            fmt_p(pw, sizeof pw, w.p, wok);
            fmt_p(pp, sizeof pp, perm, pok);
            double f = kind_eval(cf, kinds[k], 0), l = kind_eval(cf, kinds[k], 1);
            if (!isnan(f)) snprintf(e0, sizeof e0, "%.3f", f);
            if (!isnan(l)) snprintf(e1, sizeof e1, "%.3f", l);
            fprintf(md, "| %s | %s | %d | %s | %.2f | %s | %s | %s | %s | %s |\n", kinds[k][0] ? kinds[k] : "(unnamed)",
                    cf->label, nodes, seeds, m, ratio, pw, pp, e0, e1);
        }
    }
    fprintf(md, "\n");
}

/* every round some node was evaluated at; an evaluator slower than its
 * learner lands off the grid and makes a round with fewer nodes */
static int eval_bins(const cfg_t *cfgs, int nc, int *bins)
{
    int nb = 0;
    for (int c = 0; c < nc; c++)
        for (int s = 0; s < cfgs[c].ns; s++)
            for (int i = 0; i < cfgs[c].seeds[s].nn; i++) {
                const series_t *e = &cfgs[c].seeds[s].nodes[i].eval;
                for (int k = 0; k < e->n; k++) {
                    int b = e->round[k], seen = 0;
                    for (int q = 0; q < nb; q++) seen |= bins[q] == b;
                    if (!seen && nb < 4096) bins[nb++] = b;
                }
            }
    qsort(bins, (size_t)nb, sizeof bins[0], cmp_int);
    return nb;
}

/* pass@1 of every node (every seed) of a configuration in one round */
static int eval_values(const cfg_t *cf, int bin, double *out)
{
    int n = 0;
    for (int s = 0; s < cf->ns; s++)
        for (int i = 0; i < cf->seeds[s].nn; i++) {
            const series_t *e = &cf->seeds[s].nodes[i].eval;
            for (int k = 0; k < e->n; k++)
                if (e->round[k] == bin) {
                    out[n++] = e->value[k];
                    break;
                }
        }
    return n;
}

/* eval_<config>.dat: per round, the mean pass@1 over nodes, its sd and the nodes */
static int write_eval_curves(const cfg_t *cfgs, int nc, const int *bins, int nb)
{
    double a[MAX_ITEMS * MAX_ITEMS];
    for (int c = 0; c < nc; c++) {
        char name[64];
        snprintf(name, sizeof name, "eval_%s.dat", cfgs[c].dir);
        FILE *f = open_out(name);
        if (!f) return -1;
        fprintf(f, "# round mean_pass1 sd nodes\n");
        for (int q = 0; q < nb; q++) {
            int n = eval_values(&cfgs[c], bins[q], a);
            if (n) fprintf(f, "%d %.6f %.6f %d\n", bins[q], stats_mean(a, n), sqrt(stats_var(a, n)), n);
        }
        fclose(f);
    }
    return 0;
}

/* the summary's table of one configuration's nodes against the isolated
 * ones, a Welch test per round */
static void write_eval_comparison(const cfg_t *cf, const cfg_t *base, const int *bins, int nb, FILE *md)
{
    double a[MAX_ITEMS * MAX_ITEMS], b[MAX_ITEMS * MAX_ITEMS];
    double p[4096], holm[4096], bh[4096];
    int ok[4096];
    for (int q = 0; q < nb; q++) {
        int na = eval_values(cf, bins[q], a), nbv = eval_values(base, bins[q], b);
        stats_ttest_t w;
        ok[q] = stats_welch(a, na, b, nbv, &w) == 0;
        p[q] = w.p;
    }
    /* adjusted over the rounds that could be tested */
    double tp[4096] = {0}, th[4096], tb[4096];
    int nt = 0;
    for (int q = 0; q < nb; q++)
        if (ok[q]) tp[nt++] = p[q];
    stats_holm(tp, nt, th);
    stats_bh(tp, nt, tb);
    for (int q = 0, t = 0; q < nb; q++) {
        holm[q] = ok[q] ? th[t] : 1;
        bh[q] = ok[q] ? tb[t++] : 1;
    }
    fprintf(md,
            "### %s nodes against %s (isolated) nodes\n\n| round | %s pass@1 (nodes) | %s pass@1 (nodes) | "
            "difference | Welch p | Holm p | BH p |\n|---|---|---|---|---|---|---|\n",
            cf->label, base->label, cf->label, base->label);
    for (int q = 0; q < nb; q++) {
        int na = eval_values(cf, bins[q], a), nbv = eval_values(base, bins[q], b);
        char s1[32], s2[32], s3[32];
        fmt_p(s1, sizeof s1, p[q], ok[q]);
        fmt_p(s2, sizeof s2, holm[q], ok[q]);
        fmt_p(s3, sizeof s3, bh[q], ok[q]);
        fprintf(md, "| %d | %.4f (%d) | %.4f (%d) | %+.4f | %s | %s | %s |\n", bins[q], stats_mean(a, na), na,
                stats_mean(b, nbv), nbv, stats_mean(a, na) - stats_mean(b, nbv), s1, s2, s3);
    }
    fprintf(md,
            "\nOne Welch test per round over nodes (all seeds); Holm and Benjamini-Hochberg adjust for the %d rounds "
            "tested (a round where every node scored the same has no test). Nodes of one swarm see each other's "
            "groups, so they are not independent samples.\n\n",
            nt);
}

static int write_eval(const cfg_t *cfgs, int nc, FILE *md)
{
    static int bins[4096];
    int nb = eval_bins(cfgs, nc, bins);
    if (nb == 0) {
        fprintf(md, "## Evaluation\n\nNo eval.jsonl in this experiment (no evaluator ran).\n");
        return 0;
    }
    if (write_eval_curves(cfgs, nc, bins, nb) != 0) return -1;
    const cfg_t *base = NULL;
    for (int c = 0; c < nc; c++)
        if (cfgs[c].J == 0) base = &cfgs[c];
    fprintf(md, "## Evaluation (held-out pass@1, greedy)\n\nEach node's policy answers the same held-out questions of "
                "every family of its task mix (eval_every in the run record).\n\n");
    if (!base) {
        fprintf(md, "No J = 0 configuration ran, so no swarm-against-isolated comparison.\n");
        return 0;
    }
    for (int c = 0; c < nc; c++)
        if (&cfgs[c] != base) write_eval_comparison(&cfgs[c], base, bins, nb, md);
    return 0;
}

/* one line per configuration from its PREFIX_<config>.dat, column col */
static void plot_configs(FILE *gp, const cfg_t *cfgs, int nc, const char *prefix, int col, const char *style)
{
    fprintf(gp, "plot ");
    for (int c = 0; c < nc; c++) {
        char data[4200], title[32];
        snprintf(data, sizeof data, "%s/%s_%s.dat", res_dir, prefix, cfgs[c].dir);
        snprintf(title, sizeof title, "%s", cfgs[c].label);
        series_plot_curve(gp, c, data, col, style, title);
    }
    fprintf(gp, "\n");
}

static int write_plots(const cfg_t *cfgs, int nc, int window, int have_eval)
{
    FILE *gp = open_out("plots.gp");
    if (!gp) return -1;
    int nodes = 0;
    for (int c = 0; c < nc; c++)
        for (int s = 0; s < cfgs[c].ns; s++)
            if (cfgs[c].seeds[s].nn > nodes) nodes = cfgs[c].seeds[s].nn;
    fprintf(
        gp,
        "set terminal pngcairo noenhanced size 900,520 font ',10'\nset grid\nset xlabel 'round'\nset key top left\n");
    fprintf(gp, "set output '%s/moving_average.png'\nset title 'mean reward per node, moving average over %d rounds'\n",
            res_dir, window);
    plot_configs(gp, cfgs, nc, "ma", 3, "lines lw 2");
    fprintf(gp, "set output '%s/cumulative.png'\nset title 'cumulative reward (sum over nodes, mean over seeds)'\n",
            res_dir);
    plot_configs(gp, cfgs, nc, "ma", 4, "lines lw 2");
    int cols = nodes <= 2 ? nodes : nodes <= 4 ? 2 : 4, rows = (nodes + cols - 1) / cols;
    fprintf(gp,
            "set terminal pngcairo noenhanced size %d,%d font ',9'\nset output '%s/grid.png'\nunset title\n"
            "set multiplot layout %d,%d title 'reward per node, moving average over %d rounds (mean over seeds)'\n",
            300 * cols + 100, 240 * rows + 60, res_dir, rows, cols, window);
    for (int i = 0; i < nodes; i++) {
        fprintf(gp, "set title 'n%d'\n", i);
        plot_configs(gp, cfgs, nc, "grid", i + 2, "lines");
    }
    fprintf(gp, "unset multiplot\n");
    if (have_eval) {
        fprintf(gp,
                "set terminal pngcairo noenhanced size 1200,480 font ',10'\nset output '%s/evaluation.png'\n"
                "set multiplot layout 1,2\nset title 'training reward (moving average)'\n",
                res_dir);
        plot_configs(gp, cfgs, nc, "ma", 3, "lines lw 2");
        fprintf(gp, "set title 'held-out pass@1 (greedy), mean over nodes'\n");
        plot_configs(gp, cfgs, nc, "eval", 2, "linespoints lw 2");
        fprintf(gp, "unset multiplot\n");
    }
    fclose(gp);
    char script[4200];
    snprintf(script, sizeof script, "%s/plots.gp", res_dir);
    return series_plot_run("study", script, res_dir);
}

/* the run's record (manifest.json from experiment.sh) at the top of the summary */
static void write_manifest(FILE *md)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", exp_dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *j = cJSON_Parse(text);
    if (!cJSON_IsObject(j)) {
        fprintf(stderr, "study: %s: not a JSON object, left out of the summary\n", path);
        cJSON_Delete(j);
        return;
    }
    fprintf(md, "## Run\n\n");
    for (const cJSON *it = j->child; it; it = it->next) {
        if (strcmp(it->string, "starts") == 0) {
            /* what each kind of node loaded; its every setting stays in the manifest */
            const cJSON *s;
            cJSON_ArrayForEach(s, it)
            {
                const char *keys[] = {"model", "model_file_sha256", "start", "start_sha256"};
                fprintf(md, "- start:");
                for (int k = 0; k < 4; k++) {
                    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, keys[k]);
                    fprintf(md, "%s %s `%s`", k ? "," : "", keys[k], cJSON_IsString(v) ? v->valuestring : "");
                }
                fprintf(md, "\n");
            }
            continue;
        }
        char *v = cJSON_IsString(it) ? NULL : cJSON_PrintUnformatted(it);
        fprintf(md, "- %s: `%s`\n", it->string, v ? v : it->valuestring);
        free(v);
    }
    fprintf(md, "\n");
    cJSON_Delete(j);
}

/* EXP and --window N (0: not given); 2 after a line on stderr */
static int parse_args(int argc, char **argv, const char **exp, int *window)
{
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--window") == 0) {
            char *end = NULL;
            long v = a + 1 < argc ? strtol(argv[a + 1], &end, 10) : 0;
            if (!end || *end || v < 1 || v > 1000000) {
                fprintf(stderr, "study: %s needs a positive integer\n", argv[a]);
                return 2;
            }
            *window = (int)v;
            a++;
        } else if (argv[a][0] == '-' || *exp) {
            fprintf(stderr, "study: unexpected '%s'\nusage: study EXP [--window N]\n", argv[a]);
            return 2;
        } else {
            *exp = argv[a];
        }
    }
    if (!*exp) {
        fprintf(stderr, "usage: study EXP [--window N]\n");
        return 2;
    }
    return 0;
}

/* the paper's window of 100 rounds (a twentieth of its run), scaled
 * down for shorter runs: a tenth of the rounds, but at least 4 rounds
 * while that is under a quarter of them, so a short run is smoothed */
static int default_window(const cfg_t *cfgs, int nc)
{
    int longest = 0;
    for (int c = 0; c < nc; c++)
        if (cfgs[c].max_round > longest) longest = cfgs[c].max_round;
    int w = longest / 10 > 4 ? longest / 10 : 4;
    if (w > longest / 4) w = longest / 4;
    return longest >= 1000 ? 100 : w > 1 ? w : 1;
}

static int have_eval(const cfg_t *cfgs, int nc)
{
    int have = 0;
    for (int c = 0; c < nc; c++)
        for (int s = 0; s < cfgs[c].ns; s++)
            for (int i = 0; i < cfgs[c].seeds[s].nn; i++) have |= cfgs[c].seeds[s].nodes[i].eval.n > 0;
    return have;
}

/* summary.md and the plots; nonzero after a line on stderr */
static int write_results(cfg_t *cfgs, int nc, int window, FILE *md)
{
    int eval = have_eval(cfgs, nc);
    fprintf(md, "# Controlled study: %s\n\n", exp_dir);
    write_manifest(md);
    int rc = write_rewards(cfgs, nc, window, md);
    if (!rc) write_by_model(cfgs, nc, md);
    rc = rc || write_eval(cfgs, nc, md);
    fprintf(md, "Plots: moving_average.png (window %d), cumulative.png, grid.png%s.\n", window,
            eval ? ", evaluation.png" : "");
    fclose(md);
    return rc || write_plots(cfgs, nc, window, eval);
}

/* the summary, as written, on stdout */
static void print_summary(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.md", res_dir);
    FILE *f = fopen(path, "r");
    char buf[2048];
    while (f && fgets(buf, sizeof buf, f)) fputs(buf, stdout);
    if (f) fclose(f);
}

int main(int argc, char **argv)
{
    int window = 0;
    const char *exp = NULL;
    if (parse_args(argc, argv, &exp, &window) != 0) return 2;
    if (snprintf(exp_dir, sizeof exp_dir, "%s", exp) >= (int)sizeof exp_dir) {
        fprintf(stderr, "study: experiment path longer than %zu bytes\n", sizeof exp_dir - 1);
        return 2;
    }
    snprintf(res_dir, sizeof res_dir, "%s/results", exp_dir);
    static cfg_t cfgs[MAX_ITEMS];
    int nc = load_experiment(cfgs);
    if (nc < 0) return 1;
    if (nc == 0) {
        fprintf(stderr, "study: %s: no I<i>J<j>/seed<s>/<node>/metrics.jsonl found\n", exp_dir);
        return 1;
    }
    if (mkdir(res_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "study: %s: %s\n", res_dir, strerror(errno));
        return 1;
    }
    if (!window) window = default_window(cfgs, nc);
    FILE *md = open_out("summary.md");
    if (!md) return 1;
    int rc = write_results(cfgs, nc, window, md);
    print_summary();
    for (int c = 0; c < nc; c++)
        for (int s = 0; s < cfgs[c].ns; s++)
            for (int i = 0; i < cfgs[c].seeds[s].nn; i++) {
                node_t *n = &cfgs[c].seeds[s].nodes[i];
                series_free(&n->reward), series_free(&n->batch), series_free(&n->eval);
            }
    return rc ? 1 : 0;
}
