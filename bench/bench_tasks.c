/* Questions generated per second and answers scored per second for every
 * task family at its default config (gsm8k: the sample file of the
 * tests), one thread; the scored answers are
 * each question's own answer and a near miss ("x " + answer). With the
 * project venv present the same work runs in reasoning-gym
 * (bench/peer_tasks.py) for the ratio. Run from the repository root;
 * SAPO_BENCH_SECONDS sets the time per measurement (default 1, 0.25 with
 * SAPO_BENCH_QUICK=1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tasks/task.h"

int main(void)
{
    const char *env = getenv("SAPO_BENCH_SECONDS");
    double seconds = env ? atof(env) : bench_quick() ? 0.25 : 1.0;
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
        double t0 = bench_now(), t;
        while ((t = bench_now()) - t0 < seconds) {
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
        t0 = bench_now();
        while ((t = bench_now()) - t0 < seconds) {
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
        char args[256], name[128];
        snprintf(args, sizeof args, "bench/peer_tasks.py %s %g", f->name, seconds);
        bench_peer_t p;
        bench_peer_run(args, 10, &p);
        snprintf(name, sizeof name, "tasks_generate_%s", f->name);
        bench_line_peer(name, gen_rate, "questions/s", "reasoning-gym", &p, "generate", "questions/s");
        snprintf(name, sizeof name, "tasks_score_%s", f->name);
        bench_line_peer(name, score_rate, "answers/s", "reasoning-gym", &p, "score", "answers/s");
        for (size_t i = 0; i < n; i++) task_question_free(&questions[i]);
        free(questions);
        cJSON_Delete(config);
    }
    return 0;
}
