/* The broker as a real process with real producers and consumers (this
 * program re-executed as "produce" / "consume" children) over ipc endpoints
 * in a temp folder: nothing lost, duplicates only where a consumer died
 * holding records, taps never stall the main path, policy notices reach late
 * joiners, bad setups give one error line and exit 1 (a bad flag: 2). */
#include "check.h"
#include "util/endpoints.h"
#include "wire/wire.h"

#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORD_SIZE 64
#define TOTAL 100000
#define CREDIT 50

static char broker_bin[512];
static char self_exe[512];

/* ---- children ---- */

static int produce(const char *base, stream_t s, uint64_t first, uint64_t count)
{
    endpoints_t ep;
    char err[256];
    if (endpoints_from_base(base, &ep, err, sizeof err) < 0) return 2;
    wire_producer_t *p = wire_producer_new(&ep, s, err, sizeof err);
    if (!p) return 2;
    uint8_t rec[RECORD_SIZE];
    memset(rec, 'x', sizeof rec);
    for (uint64_t k = first; k < first + count; k++) {
        memcpy(rec, &k, sizeof k);
        if (wire_producer_send(p, rec, sizeof rec) < 0) return 3;
    }
    wire_producer_destroy(&p);
    return 0;
}

/* Writes each record's key to stdout, then acks it: a key on stdout is a
 * record processed. Runs until SIGTERM. */
static int consume(const char *base, stream_t s, int credit)
{
    endpoints_t ep;
    char err[256];
    if (endpoints_from_base(base, &ep, err, sizeof err) < 0) return 2;
    wire_consumer_t *c = wire_consumer_new(&ep, s, credit, err, sizeof err);
    if (!c) return 2;
    wire_record_t *r;
    while ((r = wire_consumer_recv(c, -1))) {
        uint64_t key = UINT64_MAX;
        if (r->size == RECORD_SIZE) memcpy(&key, r->data, sizeof key);
        if (write(1, &key, sizeof key) != sizeof key) return 3;
        wire_consumer_ack(c, r->id);
        wire_record_destroy(&r);
    }
    wire_consumer_destroy(&c);
    return 0;
}

/* ---- helpers ---- */

static pid_t spawn(char *const argv[], int *out_fd, const char *err_path)
{
    int fds[2] = {-1, -1};
    if (out_fd && pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        if (out_fd) dup2(fds[1], 1);
        if (err_path) {
            int fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
            dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (out_fd) {
        close(fds[1]);
        *out_fd = fds[0];
    }
    return pid;
}

static pid_t spawn_consumer(const char *dir, int *fd)
{
    char credit[16];
    snprintf(credit, sizeof credit, "%d", CREDIT);
    char *argv[] = {self_exe, "consume", (char *)dir, "tasks", credit, NULL};
    return spawn(argv, fd, NULL);
}

static pid_t spawn_producer(const char *dir, uint64_t first, uint64_t count)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%" PRIu64, first);
    snprintf(b, sizeof b, "%" PRIu64, count);
    char *argv[] = {self_exe, "produce", (char *)dir, "tasks", a, b, NULL};
    return spawn(argv, NULL, NULL);
}

/* Starts the broker on an ipc folder and waits until it has bound
 * everything (capture is bound last). */
static pid_t start_broker_hwm(const char *dir, const char *hb, const char *hwm, const char *log)
{
    char *argv[] = {broker_bin, "--broker", (char *)dir, "--heartbeat-ms", (char *)hb, "--hwm", (char *)hwm, NULL};
    pid_t pid = spawn(argv, NULL, log);
    char path[600];
    snprintf(path, sizeof path, "%s/capture", dir);
    for (int i = 0; i < 500 && access(path, F_OK) != 0; i++) zclock_sleep(10);
    return pid;
}

static pid_t start_broker(const char *dir, const char *hb, const char *log)
{
    return start_broker_hwm(dir, hb, "10000", log);
}

static int wait_exit(pid_t pid, int timeout_ms)
{
    int status;
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        zclock_sleep(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static char *make_tmpdir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/sapo-broker-XXXXXX");
    return mkdtemp(dir);
}

/* Removes a test's temp folder (logs; the broker removes its ipc files). */
static void remove_tmpdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    rmdir(dir);
}

static char *slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

/* A consumer child as seen by the parent: its pipe and a partial key. */
typedef struct {
    pid_t pid;
    int fd;
    uint8_t part[8];
    int npart;
    long got;
} child_t;

/* Reads what the child wrote; calls on_key for each key. 0 at EOF. */
static int read_keys(child_t *c, void (*on_key)(uint64_t, void *), void *arg)
{
    uint8_t buf[8192];
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n <= 0) return 0;
    for (ssize_t i = 0; i < n; i++) {
        c->part[c->npart++] = buf[i];
        if (c->npart == 8) {
            uint64_t key;
            memcpy(&key, c->part, 8);
            c->npart = 0;
            c->got++;
            on_key(key, arg);
        }
    }
    return 1;
}

typedef struct {
    uint8_t count[TOTAL];
    uint8_t held_by_killed[TOTAL];
    long distinct, bad;
    int first_life; /* set while reading the consumer that will be killed */
} tally_t;

static void tally_key(uint64_t key, void *arg)
{
    tally_t *t = arg;
    if (key >= TOTAL) {
        t->bad++;
        return;
    }
    if (t->count[key]++ == 0) t->distinct++;
    if (t->first_life) t->held_by_killed[key] = 1;
}

/* reads consumer c's keys into t until it has n distinct ones or ms pass */
static void collect(child_t *c, tally_t *t, long n, int ms)
{
    int64_t start = zclock_mono();
    while (t->distinct < n && zclock_mono() - start < ms) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) > 0) read_keys(c, tally_key, t);
    }
}

/* SIGTERM to a consumer child, which must exit cleanly */
static void stop_consumer(child_t *c)
{
    kill(c->pid, SIGTERM);
    EXPECT(wait_exit(c->pid, 5000) == 0);
    close(c->fd);
}

static void tally_killed(uint64_t key, void *arg)
{
    tally_t *t = arg;
    t->first_life = 1;
    tally_key(key, arg);
    t->first_life = 0;
}

/* Reads the capture frames waiting on a tap; counts well-formed records. */
static long tap_read(zsock_t *tap, long *malformed)
{
    long n = 0;
    while (zsock_events(tap) & ZMQ_POLLIN) {
        zmsg_t *m = zmsg_recv(tap);
        if (!m) break;
        zframe_t *name = zmsg_first(m), *rec = zmsg_next(m);
        if (zmsg_size(m) == 2 && zframe_streq(name, "tasks") && zframe_size(rec) == RECORD_SIZE) n++;
        else (*malformed)++;
        zmsg_destroy(&m);
    }
    return n;
}

/* ---- tests ---- */

/* what test_stream_kill_and_taps tracks while the records flow */
typedef struct {
    child_t cons[2];
    tally_t *t;
    int killed;
    long killed_got;
    zsock_t *tap; /* the reading tap, attached between 50% and 80% */
    long tapped, malformed;
} kill_run_t;

/* SIGKILLs consumer 1, drains what it had written, and starts a new one */
static void kill_and_restart_consumer(const char *dir, kill_run_t *s)
{
    kill(s->cons[1].pid, SIGKILL);
    waitpid(s->cons[1].pid, NULL, 0);
    while (read_keys(&s->cons[1], tally_killed, s->t)) {
    }
    s->killed_got = s->cons[1].got;
    close(s->cons[1].fd);
    s->cons[1] = (child_t){0};
    s->cons[1].pid = spawn_consumer(dir, &s->cons[1].fd);
    s->killed = 1;
}

/* reads both consumers until every record arrived or 90 s pass, killing
 * consumer 1 at 30% and attaching the reading tap from 50% to 80% */
static void stream_run(const char *dir, const char *capture, kill_run_t *s)
{
    tally_t *t = s->t;
    int tap_phase = 0;
    int64_t deadline = zclock_mono() + 90000;
    while (t->distinct < TOTAL && zclock_mono() < deadline) {
        struct pollfd pfd[2] = {{s->cons[0].fd, POLLIN, 0}, {s->cons[1].fd, POLLIN, 0}};
        poll(pfd, 2, 100);
        for (int i = 0; i < 2; i++)
            if (pfd[i].revents) read_keys(&s->cons[i], i == 1 && !s->killed ? tally_killed : tally_key, t);
        if (!s->killed && t->distinct >= TOTAL * 3 / 10) kill_and_restart_consumer(dir, s);
        if (tap_phase == 0 && t->distinct >= TOTAL / 2) {
            s->tap = zsock_new_sub(capture, "tasks");
            tap_phase = 1;
        }
        if (s->tap) s->tapped += tap_read(s->tap, &s->malformed);
        if (tap_phase == 1 && t->distinct >= TOTAL * 8 / 10) {
            zsock_destroy(&s->tap);
            tap_phase = 2;
        }
    }
}

/* nothing lost, duplicates only of what the killed consumer held; returns
 * the number of duplicates */
static long stream_check(const kill_run_t *s)
{
    const tally_t *t = s->t;
    long missing = TOTAL - t->distinct, dups = 0, dups_elsewhere = 0;
    for (long k = 0; k < TOTAL; k++) {
        if (t->count[k] > 1) {
            dups += t->count[k] - 1;
            if (!t->held_by_killed[k]) dups_elsewhere++;
        }
    }
    EXPECTF(missing == 0, "%ld of %d records never arrived", missing, TOTAL);
    EXPECT(t->bad == 0);
    EXPECTF(s->killed && s->killed_got > 0, "the killed consumer had processed %ld records", s->killed_got);
    EXPECTF(dups <= CREDIT, "%ld duplicates, more than the killed consumer's credit %d", dups, CREDIT);
    EXPECTF(dups_elsewhere == 0, "%ld records duplicated that the killed consumer never had", dups_elsewhere);
    EXPECTF(s->tapped > 0 && s->malformed == 0, "tap got %ld records, %ld malformed", s->tapped, s->malformed);
    return dups;
}

/* 3 producers, 2 consumers, 100,000 records; one consumer is SIGKILLed at
 * 30% and restarted; a tap that never reads stays attached throughout and
 * a reading tap is attached and detached mid-stream. */
static void test_stream_kill_and_taps(void)
{
    char *dir = make_tmpdir();
    char log[128];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker(dir, "1000", log);
    endpoints_t ep;
    char err[256];
    endpoints_from_base(dir, &ep, err, sizeof err);

    zsock_t *idle_tap = zsock_new_sub(ep.capture, "");
    zsock_set_rcvhwm(idle_tap, 100);
    kill_run_t s = {0};
    s.cons[0].pid = spawn_consumer(dir, &s.cons[0].fd);
    s.cons[1].pid = spawn_consumer(dir, &s.cons[1].fd);
    zclock_sleep(200);
    pid_t prods[3];
    uint64_t per = TOTAL / 3;
    for (int i = 0; i < 3; i++) prods[i] = spawn_producer(dir, i * per, i == 2 ? TOTAL - 2 * per : per);

    s.t = calloc(1, sizeof *s.t);
    stream_run(dir, ep.capture, &s);
    long dups = stream_check(&s);
    long idle = 0, idle_bad = 0;
    idle = tap_read(idle_tap, &idle_bad);
    /* what a tap that never reads holds is bounded by the high-water marks
     * (broker 1000, tap 100) and the kernel's socket buffer */
    EXPECTF(idle > 0 && idle < TOTAL / 10 && idle_bad == 0, "a tap that never read holds %ld records", idle);

    for (int i = 0; i < 3; i++) EXPECT(wait_exit(prods[i], 10000) == 0);
    for (int i = 0; i < 2; i++) {
        kill(s.cons[i].pid, SIGTERM);
        EXPECT(wait_exit(s.cons[i].pid, 10000) == 0);
        close(s.cons[i].fd);
    }
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 10000) == 0);
    const char *text = slurp(log);
    EXPECTF(strstr(text, "lost") && strstr(text, "requeued"), "broker log:\n%s", text);
    printf("  %d records, %ld duplicates after a kill (credit %d), tap saw %ld, idle tap %ld\n", TOTAL, dups, CREDIT,
           s.tapped, idle);
    zsock_destroy(&s.tap);
    zsock_destroy(&idle_tap);
    free(s.t);
    remove_tmpdir(dir);
}

/* A consumer that stops answering (SIGSTOP) holding records: after the
 * heartbeat timeout its records go to another consumer. */
static void test_silent_consumer(void)
{
    char *dir = make_tmpdir();
    char log[128];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker(dir, "600", log);
    child_t a = {0}, b = {0};
    a.pid = spawn_consumer(dir, &a.fd);
    zclock_sleep(300);
    kill(a.pid, SIGSTOP);
    pid_t prod = spawn_producer(dir, 0, 2 * CREDIT);
    zclock_sleep(300);
    b.pid = spawn_consumer(dir, &b.fd);
    tally_t *t = calloc(1, sizeof *t);
    int64_t start = zclock_mono();
    collect(&b, t, 2 * CREDIT, 10000);
    EXPECTF(t->distinct == 2 * CREDIT, "the live consumer got %ld of %d", t->distinct, 2 * CREDIT);
    printf("  records of a stopped consumer taken over after %.1f s\n", (zclock_mono() - start) / 1000.0);
    EXPECT(wait_exit(prod, 5000) == 0);
    kill(a.pid, SIGKILL);
    waitpid(a.pid, NULL, 0);
    kill(b.pid, SIGTERM);
    EXPECT(wait_exit(b.pid, 5000) == 0);
    close(a.fd);
    close(b.fd);
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 5000) == 0);
    free(t);
    remove_tmpdir(dir);
}

/* The broker is killed and restarted under a waiting consumer: the
 * consumer's repeated hello makes the new broker send it records. */
static void test_broker_restart(void)
{
    char *dir = make_tmpdir();
    char log[128];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker(dir, "1000", log);
    child_t c = {0};
    c.pid = spawn_consumer(dir, &c.fd);
    zclock_sleep(300);
    kill(broker, SIGKILL);
    waitpid(broker, NULL, 0);
    broker = start_broker(dir, "1000", log);
    pid_t prod = spawn_producer(dir, 0, 100);
    tally_t *t = calloc(1, sizeof *t);
    collect(&c, t, 100, 10000);
    EXPECTF(t->distinct == 100, "after a broker restart the consumer got %ld of 100", t->distinct);
    EXPECT(wait_exit(prod, 5000) == 0);
    stop_consumer(&c);
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 5000) == 0);
    free(t);
    remove_tmpdir(dir);
}

/* With nobody consuming, a producer of more than the queue bound plus the
 * pipes' limits blocks instead of the broker growing; a consumer then gets
 * everything and the producer finishes. */
static void test_queue_bound(void)
{
    char *dir = make_tmpdir();
    char log[128];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker_hwm(dir, "1000", "100", log);
    enum { N = 100000 };
    pid_t prod = spawn_producer(dir, 0, N);
    zclock_sleep(1500);
    EXPECTF(waitpid(prod, NULL, WNOHANG) == 0, "the producer of %d records did not block", N);
    child_t c = {0};
    c.pid = spawn_consumer(dir, &c.fd);
    tally_t *t = calloc(1, sizeof *t);
    collect(&c, t, N, 30000);
    EXPECTF(t->distinct == N, "the consumer got %ld of %d", t->distinct, N);
    EXPECT(wait_exit(prod, 10000) == 0);
    stop_consumer(&c);
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 5000) == 0);
    free(t);
    remove_tmpdir(dir);
}

/* A record of the largest size passes whole; a larger one is refused by
 * the producer. */
static void test_big_record(void)
{
    char *dir = make_tmpdir();
    char log[128], err[256];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker(dir, "1000", log);
    endpoints_t ep;
    endpoints_from_base(dir, &ep, err, sizeof err);
    wire_consumer_t *c = wire_consumer_new(&ep, STREAM_BATCHES, 1, err, sizeof err);
    wire_producer_t *p = wire_producer_new(&ep, STREAM_BATCHES, err, sizeof err);
    uint8_t *big = malloc(WIRE_RECORD_MAX + 1);
    for (size_t i = 0; i <= WIRE_RECORD_MAX; i++) big[i] = (uint8_t)(i * 31 + 7);
    EXPECT(c && p);
    EXPECT(wire_producer_send(p, big, WIRE_RECORD_MAX + 1) == -1);
    EXPECT(wire_producer_send(p, big, WIRE_RECORD_MAX) == 0);
    wire_record_t *r = wire_consumer_recv(c, 10000);
    EXPECT(r && r->size == WIRE_RECORD_MAX && memcmp(r->data, big, WIRE_RECORD_MAX) == 0);
    if (r) wire_consumer_ack(c, r->id);
    wire_record_destroy(&r);
    free(big);
    wire_producer_destroy(&p);
    wire_consumer_destroy(&c);
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 5000) == 0);
    remove_tmpdir(dir);
}

static int recv_notice(wire_subscriber_t *s, const char *want)
{
    wire_record_t *r = wire_subscriber_recv(s, 3000);
    int ok = r && r->size == strlen(want) && memcmp(r->data, want, r->size) == 0;
    if (!ok)
        fprintf(stderr, "  expected notice %s, got %.*s\n", want, r ? (int)r->size : 4,
                r ? (const char *)r->data : "none");
    wire_record_destroy(&r);
    return ok;
}

/* The learner publishes before anyone listens; a generator that joins
 * later gets the last notice at once, then the next ones. */
static void test_policy_late_joiner(void)
{
    char *dir = make_tmpdir();
    char log[128], err[256];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker(dir, "1000", log);
    endpoints_t ep;
    endpoints_from_base(dir, &ep, err, sizeof err);
    wire_publisher_t *pub = wire_publisher_new(&ep, err, sizeof err);
    EXPECT(pub);
    EXPECT(wire_publisher_send(pub, "v1", 2, err, sizeof err) == 0);
    EXPECT(wire_publisher_send(pub, "v2", 2, err, sizeof err) == 0);
    /* once a watcher has seen v2, the broker has it */
    wire_subscriber_t *watcher = wire_subscriber_new(&ep, err, sizeof err);
    wire_record_t *r;
    int seen = 0;
    while (!seen && (r = wire_subscriber_recv(watcher, 5000))) {
        seen = r->size == 2 && memcmp(r->data, "v2", 2) == 0;
        wire_record_destroy(&r);
    }
    EXPECT(seen);
    wire_subscriber_destroy(&watcher);
    wire_subscriber_t *sub = wire_subscriber_new(&ep, err, sizeof err);
    EXPECT(sub && recv_notice(sub, "v2"));
    zclock_sleep(100);
    EXPECT(wire_publisher_send(pub, "v3", 2, err, sizeof err) == 0);
    EXPECT(recv_notice(sub, "v3"));
    wire_subscriber_t *late = wire_subscriber_new(&ep, err, sizeof err);
    EXPECT(late && recv_notice(late, "v3"));
    wire_subscriber_destroy(&sub);
    wire_subscriber_destroy(&late);
    wire_publisher_destroy(&pub);
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 5000) == 0);
    remove_tmpdir(dir);
}

/* Runs a second broker on a base the first one serves: exit 1 and one
 * line naming the endpoint. */
static void expect_busy(const char *base, const char *dir, const char *what)
{
    char log[600];
    snprintf(log, sizeof log, "%s/second.log", dir);
    unlink(log);
    char *argv[] = {broker_bin, "--broker", (char *)base, NULL};
    pid_t pid = spawn(argv, NULL, log);
    EXPECTF(wait_exit(pid, 5000) == 1, "a second broker on %s did not exit 1", base);
    const char *text = slurp(log);
    int lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    EXPECTF(lines == 1 && strstr(text, what), "second broker said:\n%s", text);
}

static void test_busy_endpoints(void)
{
    char *dir = make_tmpdir();
    char log[128];
    snprintf(log, sizeof log, "%s/broker.log", dir);
    pid_t broker = start_broker(dir, "1000", log);
    char want[600];
    snprintf(want, sizeof want, "ipc://%s/tasks.in", dir);
    expect_busy(dir, dir, want);
    kill(broker, SIGTERM);
    EXPECT(wait_exit(broker, 5000) == 0);
    EXPECTF(access(want + 6, F_OK) != 0, "%s is left after the broker stopped", want + 6);

    /* a tcp base whose first port someone else holds */
    zsock_t *squatter = zsock_new(ZMQ_PULL);
    int port = zsock_bind(squatter, "tcp://127.0.0.1:*[20000-60000]");
    EXPECT(port > 0);
    char base[32];
    snprintf(base, sizeof base, "tcp:%d", port - 1);
    snprintf(want, sizeof want, "tcp://127.0.0.1:%d", port);
    expect_busy(base, dir, want);
    zsock_destroy(&squatter);

    /* an ipc folder that cannot be made */
    expect_busy("/proc/none/run", dir, "ipc:///proc/none/run/tasks.in");

    char *argv[] = {broker_bin, "--hwm", "lots", NULL};
    snprintf(log, sizeof log, "%s/flag.log", dir);
    pid_t pid = spawn(argv, NULL, log);
    /* through the config table, as every process's flags: exit 2 */
    EXPECT(wait_exit(pid, 5000) == 2);
    EXPECT(strstr(slurp(log), "--hwm: 'lots' is not"));
    remove_tmpdir(dir);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "produce") == 0 && argc == 6)
        return produce(argv[2], (stream_t)stream_from_name(argv[3]), strtoull(argv[4], NULL, 10),
                       strtoull(argv[5], NULL, 10));
    if (argc >= 2 && strcmp(argv[1], "consume") == 0 && argc == 5)
        return consume(argv[2], (stream_t)stream_from_name(argv[3]), atoi(argv[4]));

    const char *bin = getenv("SAPO_BIN");
    snprintf(broker_bin, sizeof broker_bin, "%s/broker", bin && *bin ? bin : "bin");
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    self_exe[n > 0 ? n : 0] = '\0';
    if (access(broker_bin, X_OK) != 0) {
        printf("FAIL broker: %s is not built\n", broker_bin);
        return 1;
    }
    RUN_TEST(test_busy_endpoints);
    RUN_TEST(test_policy_late_joiner);
    RUN_TEST(test_silent_consumer);
    RUN_TEST(test_broker_restart);
    RUN_TEST(test_queue_bound);
    RUN_TEST(test_big_record);
    RUN_TEST(test_stream_kill_and_taps);
    CHECK_EXIT();
}
