/* util/nice: the calling thread and its OpenMP team are lowered; a thread
 * made before (as ZeroMQ's I/O threads and a wire producer's sender are)
 * keeps its priority, and one made after inherits the lowered one. */
#include "check.h"
#include "util/nice.h"

#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int nice_now(void) { return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)); }

/* a thread made before the call: it writes its id into the first pipe,
 * then waits until the second one is closed */
static int waiter_fd[2][2];

static void *waiter_run(void *arg)
{
    (void)arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    char c;
    if (write(waiter_fd[0][1], &tid, sizeof tid) != sizeof tid) return NULL;
    while (read(waiter_fd[1][0], &c, 1) > 0) {
    }
    return NULL;
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
    pid_t before = 0;
    pthread_t t;
    EXPECT(pipe(waiter_fd[0]) == 0 && pipe(waiter_fd[1]) == 0);
    EXPECT(pthread_create(&t, NULL, waiter_run, NULL) == 0);
    EXPECT(read(waiter_fd[0][0], &before, sizeof before) == sizeof before);

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
    int earlier = getpriority(PRIO_PROCESS, (id_t)before);
    EXPECTF(earlier == base, "the thread made before went from nice %d to %d", base, earlier);
    int later = -100;
    pthread_t u;
    EXPECT(pthread_create(&u, NULL, report_nice, &later) == 0 && pthread_join(u, NULL) == 0);
    EXPECTF(later == base + by, "a thread made after runs at nice %d, expected %d", later, base + by);

    /* past 19 it stops at 19 */
    EXPECTF(nice_compute_threads(19, err, sizeof err) == 0, "%s", err);
    EXPECTF(nice_now() == 19, "nice %d, expected 19", nice_now());

    close(waiter_fd[1][1]);
    pthread_join(t, NULL);
    close(waiter_fd[0][0]), close(waiter_fd[0][1]), close(waiter_fd[1][0]);
}

int main(void)
{
    RUN_TEST(test_compute_threads_lowered);
    CHECK_EXIT();
}
