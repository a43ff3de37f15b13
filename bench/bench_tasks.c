/* Questions generated per second and answers scored per second for every
 * task family at its default config (gsm8k: the sample file of the
 * tests), one thread; the scored answers are
 * each question's own answer and a near miss ("x " + answer). With the
 * project venv present the same work runs in reasoning-gym
 * (bench/peer_tasks.py) for the ratio. Run from the repository root;
 * SAPO_BENCH_SECONDS sets the time per measurement (default 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tasks/task.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* reasoning-gym's rates, 0 when the venv or the family is missing there */
static int peer(const char *family, double seconds, double *gen, double *score)
{
    if (access(".venv/bin/python", X_OK) != 0) return -1;
    char cmd[256];
    snprintf(cmd, sizeof cmd, ".venv/bin/python bench/peer_tasks.py %s %g 2>/dev/null", family, seconds);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = fscanf(p, "%lf %lf", gen, score);
    return pclose(p) == 0 && n == 2 ? 0 : -1;
}

static void report(const char *what, const char *family, double rate, const char *unit, int have_peer, double peer_rate)
{
    if (have_peer)
        printf("bench tasks_%s_%s: %.0f %s (reasoning-gym: %.0f %s, ratio %.1f)\n", what, family, rate, unit, peer_rate,
               unit, rate / peer_rate);
    else printf("bench tasks_%s_%s: %.0f %s\n", what, family, rate, unit);
}

int main(void)
{
    const char *env = getenv("SAPO_BENCH_SECONDS");
    double seconds = env ? atof(env) : 1.0;
    if (!(seconds > 0)) seconds = 1.0;
    for (int k = 0; k < task_family_count; k++) {
        const task_family_t *f = task_families[k];
        if (task_family_built(f)) continue; /* the game's stages: built from peers' completions, never drawn */
        char err[512];
        /* gsm8k reads a file: the committed sample */
        cJSON *user =
            strcmp(f->name, "gsm8k") ? NULL : cJSON_Parse("{\"path\": \"tests/golden/tasks/gsm8k_sample.jsonl\"}");
        cJSON *config = task_family_config(f, user, err, sizeof err);
        cJSON_Delete(user);
        if (!config) {
            fprintf(stderr, "bench_tasks: %s: %s\n", f->name, err);
            return 1;
        }
        size_t cap = 1024, n = 0;
        task_question_t *questions = malloc(cap * sizeof *questions);
        double t0 = now(), t;
        while ((t = now()) - t0 < seconds) {
            if (n == cap) questions = realloc(questions, (cap *= 2) * sizeof *questions);
            if (f->generate(config, 1, n, &questions[n], err, sizeof err) != 0) {
                fprintf(stderr, "bench_tasks: %s: %s\n", f->name, err);
                return 1;
            }
            n++;
        }
        double gen_rate = (double)n / (t - t0);
        size_t scored = 0;
        volatile double sink = 0;
        char *miss = NULL;
        t0 = now();
        while ((t = now()) - t0 < seconds) {
            const task_question_t *e = &questions[scored / 2 % n];
            if (scored % 2 == 0) sink += f->score(e->answer, e);
            else {
                free(miss);
                miss = task_strdupf("x %s", e->answer ? e->answer : "None");
                sink += f->score(miss, e);
            }
            scored++;
        }
        double score_rate = (double)scored / (t - t0);
        free(miss);
        double peer_gen = 0, peer_score = 0;
        int have_peer = peer(f->name, seconds, &peer_gen, &peer_score) == 0;
        report("generate", f->name, gen_rate, "questions/s", have_peer, peer_gen);
        report("score", f->name, score_rate, "answers/s", have_peer, peer_score);
        fflush(stdout);
        for (size_t i = 0; i < n; i++) task_question_free(&questions[i]);
        free(questions);
        cJSON_Delete(config);
    }
    return 0;
}
