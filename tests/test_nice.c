/* util/nice: the calling thread and its OpenMP team are lowered; a thread
 * made before (as ZeroMQ's I/O threads and a wire producer's sender are)
 * keeps its priority, and one made after inherits the lowered one. */
#include "check.h"
#include "util/nice.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int nice_now(void) { return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)); }

/* a thread that reports its nice when asked, until told to stop */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ask, nice, stop;
} probe_t;

static void *probe_run(void *arg)
{
    probe_t *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->ask) p->nice = nice_now(), p->ask = 0, pthread_cond_broadcast(&p->cv);
        pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int probe_nice(probe_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->ask = 1;
    pthread_cond_broadcast(&p->cv);
    while (p->ask) pthread_cond_wait(&p->cv, &p->mu);
    int n = p->nice;
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void *report_nice(void *arg)
{
    *(int *)arg = nice_now();
    return NULL;
}

static void test_compute_threads_lowered(void)
{
    char err[256] = "";
    int base = nice_now(), by = base + 5 > 19 ? 19 - base : 5;
    if (by == 0) SKIP_TEST("this test runs at nice 19 already: nothing can be lowered");
    probe_t before = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, probe_run, &before) == 0);

    /* the team exists before the call, as a learner's does once its
     * model is loaded */
    omp_set_num_threads(2);
    int n = 0;
#pragma omp parallel
#pragma omp single
    n = omp_get_num_threads();
    EXPECTF(n == 2, "the team had %d threads", n);

    EXPECT(nice_compute_threads(0, err, sizeof err) == 0);
    EXPECTF(nice_now() == base, "nice 0 changed the thread's nice from %d to %d", base, nice_now());
    EXPECTF(nice_compute_threads(by, err, sizeof err) == 0, "%s", err);

    int team[8];
#pragma omp parallel
    {
        int id = omp_get_thread_num();
        if (id < 8) team[id] = nice_now();
#pragma omp single
        n = omp_get_num_threads();
    }
    EXPECTF(n == 2, "the team had %d threads", n);
    for (int i = 0; i < n && i < 8; i++)
        EXPECTF(team[i] == base + by, "OpenMP thread %d at nice %d, expected %d", i, team[i], base + by);
    int earlier = probe_nice(&before);
    EXPECTF(earlier == base, "the thread made before went from nice %d to %d", base, earlier);
    int later = -100;
    pthread_t u;
    EXPECT(pthread_create(&u, NULL, report_nice, &later) == 0 && pthread_join(u, NULL) == 0);
    EXPECTF(later == base + by, "a thread made after runs at nice %d, expected %d", later, base + by);

    /* past 19 it stops at 19 */
    EXPECTF(nice_compute_threads(19, err, sizeof err) == 0, "%s", err);
    EXPECTF(nice_now() == 19, "nice %d, expected 19", nice_now());

    pthread_mutex_lock(&before.mu);
    before.stop = 1;
    pthread_cond_broadcast(&before.cv);
    pthread_mutex_unlock(&before.mu);
    pthread_join(t, NULL);
}

int main(void)
{
    RUN_TEST(test_compute_threads_lowered);
    CHECK_EXIT();
}
