/* Records per second through the broker (producer -> broker -> consumer
 * with credit and acks) against a direct PUSH/PULL pair, both over ipc,
 * 1 KiB records, the median of several runs. Needs $SAPO_BIN/broker. */
#include "bench.h"
#include "util/endpoints.h"
#include "wire/wire.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORD 1024

typedef struct {
    const endpoints_t *ep;
    const char *direct; /* endpoint of the direct pair, or NULL for the broker path */
    int n;
    void *pull; /* the direct pair's PULL, bound before the clock starts */
    double t_end;
    int ok;
} job_t;

static void *produce(void *arg)
{
    job_t *j = arg;
    char buf[RECORD], err[256];
    memset(buf, 'r', sizeof buf);
    if (j->direct) {
        zsock_t *push = zsock_new(ZMQ_PUSH);
        zsock_set_linger(push, -1);
        zsock_connect(push, "%s", j->direct);
        for (int i = 0; i < j->n; i++) zmq_send(zsock_resolve(push), buf, sizeof buf, 0);
        zsock_destroy(&push);
        return NULL;
    }
    wire_producer_t *p = wire_producer_new(j->ep, STREAM_ROLLOUTS, err, sizeof err);
    for (int i = 0; p && i < j->n; i++) wire_producer_send(p, buf, sizeof buf);
    wire_producer_destroy(&p);
    return NULL;
}

static void *consume(void *arg)
{
    job_t *j = arg;
    char buf[RECORD];
    int got = 0;
    if (j->direct) {
        while (got < j->n && zmq_recv(j->pull, buf, sizeof buf, 0) == RECORD) got++;
    } else {
        char err[256];
        wire_consumer_t *c = wire_consumer_new(j->ep, STREAM_ROLLOUTS, 1000, err, sizeof err);
        while (c && got < j->n) {
            wire_record_t *r = wire_consumer_recv(c, 10000);
            if (!r) break;
            got += r->size == RECORD;
            wire_consumer_ack(c, r->id);
            wire_record_destroy(&r);
        }
        j->t_end = bench_now();
        wire_consumer_destroy(&c);
    }
    if (j->direct) j->t_end = bench_now();
    j->ok = got == j->n;
    return NULL;
}

/* records/s of one run, or 0 when records went missing */
static double run_once(const endpoints_t *ep, const char *direct, int n)
{
    job_t j = {.ep = ep, .direct = direct, .n = n};
    zsock_t *pull = NULL;
    if (direct) {
        pull = zsock_new(ZMQ_PULL);
        zsock_bind(pull, "%s", direct);
        j.pull = zsock_resolve(pull);
    }
    pthread_t pc, pp;
    pthread_create(&pc, NULL, consume, &j);
    zclock_sleep(200); /* the consumer has joined */
    double t0 = bench_now();
    pthread_create(&pp, NULL, produce, &j);
    pthread_join(pp, NULL);
    pthread_join(pc, NULL);
    zsock_destroy(&pull);
    return j.ok ? n / (j.t_end - t0) : 0;
}

int main(void)
{
    int quick = bench_quick(), runs = quick ? 3 : 5, n = quick ? 50000 : 200000;
    const char *bin = getenv("SAPO_BIN");
    char broker[512], dir[64] = "/tmp/sapo-bench-XXXXXX", base[128], direct[160], capture[160];
    snprintf(broker, sizeof broker, "%s/broker", bin && *bin ? bin : "bin");
    if (access(broker, X_OK) != 0 || !mkdtemp(dir)) {
        fprintf(stderr, "bench_broker: %s is not built\n", broker);
        return 1;
    }
    snprintf(base, sizeof base, "%s/run", dir);
    snprintf(direct, sizeof direct, "ipc://%s/direct", dir);
    snprintf(capture, sizeof capture, "%s/capture", base);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        execl(broker, broker, "--broker", base, "--stats-ms", "0", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && access(capture, F_OK) != 0; i++) zclock_sleep(10);
    endpoints_t ep;
    char err[256];
    endpoints_from_base(base, &ep, err, sizeof err);

    double via[8], plain[8];
    int lost = 0;
    for (int r = 0; r < runs; r++) {
        via[r] = run_once(&ep, NULL, n);
        plain[r] = run_once(&ep, direct, n);
        lost += via[r] == 0 || plain[r] == 0;
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    unlink(direct + 6);
    rmdir(base);
    rmdir(dir);
    if (lost) {
        fprintf(stderr, "bench_broker: %d runs lost records\n", lost);
        return 1;
    }
    bench_line("broker_records_per_s", bench_median(via, runs), "records/s", "direct PUSH/PULL",
               bench_median(plain, runs), "records/s");
    return 0;
}
