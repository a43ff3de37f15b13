/* bin/tap against a real capture socket: the test binds an XPUB where the
 * broker's capture would be (an XPUB, so it can wait for tap's
 * subscriptions instead of sleeping), runs $SAPO_BIN/tap as a child and
 * checks the JSON lines it prints for stream and field filters, --count,
 * a corrupt record, a closed stdout and bad flags. */
#include <cjson/cJSON.h>
#include <czmq.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "records.h"
#include "util/endpoints.h"

static char rundir[64];
static char base[96];

typedef struct {
    pid_t pid;
    int out, err; /* read ends of the child's stdout and stderr */
} child_t;

static child_t spawn_tap(const char *const *args)
{
    const char *bin = getenv("SAPO_BIN") ? getenv("SAPO_BIN") : "build/asan/bin";
    char path[512];
    snprintf(path, sizeof path, "%s/tap", bin);
    const char *argv[32] = {path};
    int n = 1;
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    int po[2], pe[2];
    if (pipe(po) || pipe(pe)) {
        perror("pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        execv(path, (char *const *)argv);
        fprintf(stderr, "exec %s failed\n", path);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    return (child_t){pid, po[0], pe[0]};
}

/* Reads fd until EOF or timeout; returns a malloc'ed string. */
static char *slurp(int fd, int timeout_ms)
{
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    int64_t end = zclock_mono() + timeout_ms;
    for (;;) {
        int left = (int)(end - zclock_mono());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        if (n + 1024 > cap) s = realloc(s, cap *= 2);
        ssize_t r = read(fd, s + n, cap - n - 1);
        if (r <= 0) break;
        n += (size_t)r;
    }
    s[n] = '\0';
    return s;
}

/* The exit status, or -1 after killing a child still running at the deadline. */
static int wait_exit(pid_t pid, int timeout_ms)
{
    int st;
    for (int t = 0; t < timeout_ms; t += 10) {
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        zclock_sleep(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static zsock_t *capture_bind(void)
{
    endpoints_t ep;
    char err[256];
    if (endpoints_from_base(base, &ep, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    zsock_t *pub = zsock_new(ZMQ_XPUB);
    if (zsock_bind(pub, "%s", ep.capture) < 0) {
        fprintf(stderr, "bind %s failed\n", ep.capture);
        exit(1);
    }
    zsock_set_rcvtimeo(pub, 10000);
    return pub;
}

/* Waits until the tap has subscribed to n topics. */
static int await_subscriptions(zsock_t *pub, int n)
{
    for (int got = 0; got < n;) {
        zframe_t *f = zframe_recv(pub);
        if (!f) return -1;
        if (zframe_size(f) > 0 && zframe_data(f)[0] == 1) got++;
        zframe_destroy(&f);
    }
    return 0;
}

static void publish(zsock_t *pub, const char *stream, const uint8_t *buf, size_t len)
{
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, stream);
    zmsg_addmem(m, buf, len);
    zmsg_send(&m, pub);
}

static void publish_group(zsock_t *pub, const char *stream, const char *node, const char *family, float reward)
{
    rec_completion_t c = {.text = "<answer>7</answer>", .reward = reward, .finished = true};
    rec_group_t r = {.node = node,
                     .policy_version = 3,
                     .round = 2,
                     .model = "tiny",
                     .task = {.family = family, .question = "3+4?", .answer = "7"},
                     .completions = &c,
                     .n_completions = 1};
    uint8_t *buf;
    size_t len;
    if (rec_group_build(&r, &buf, &len)) exit(1);
    publish(pub, stream, buf, len);
    rec_free(buf);
}

static void publish_policy(zsock_t *pub, const char *node, uint64_t version)
{
    rec_policy_t p = {.node = node, .policy_version = version, .checkpoint = "ck"};
    uint8_t *buf;
    size_t len;
    if (rec_policy_build(&p, &buf, &len)) exit(1);
    publish(pub, "notices", buf, len);
    rec_free(buf);
}

/* splits stdout into parsed lines */
static int parse_lines(char *out, cJSON **lines, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save)) {
        lines[n] = cJSON_Parse(l);
        EXPECTF(lines[n] != NULL, "not JSON: %s", l);
        if (lines[n]) n++;
    }
    return n;
}

static const char *field(const cJSON *j, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, a), b);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void test_stream_where_count(void)
{
    zsock_t *pub = capture_bind();
    const char *args[] = {"--broker", base,      "--stream", "rollouts", "--stream", "notices",
                          "--where",  "node=n1", "--count",  "3",        NULL};
    child_t c = spawn_tap(args);
    EXPECT(await_subscriptions(pub, 2) == 0);

    rec_task_t t = {.family = "bf", .node = "n1"};
    uint8_t *buf;
    size_t len;
    EXPECT(rec_task_build(&t, &buf, &len) == 0);
    publish(pub, "tasks", buf, len); /* stream not wanted */
    rec_free(buf);
    publish_group(pub, "rollouts", "n2", "bf", 1.0f); /* other node */
    uint8_t junk[64];
    memset(junk, 0xA5, sizeof junk);
    memcpy(junk + 4, "SROL", 4);
    publish(pub, "rollouts", junk, sizeof junk); /* corrupt: skipped, counted */
    publish_group(pub, "rollouts", "n1", "arc_1d", 0.5f);
    publish_policy(pub, "n1", 42);
    publish_group(pub, "rollouts", "n1", "bf", 1.0f);
    publish_group(pub, "rollouts", "n1", "bf", 0.0f); /* after --count */

    char *out = slurp(c.out, 10000);
    char *err = slurp(c.err, 2000);
    EXPECT(wait_exit(c.pid, 10000) == 0);
    cJSON *lines[8];
    int n = parse_lines(out, lines, 8);
    EXPECTF(n == 3, "%d lines", n);
    if (n == 3) {
        EXPECT(strcmp(cJSON_GetObjectItem(lines[0], "stream")->valuestring, "rollouts") == 0);
        EXPECT(strcmp(field(lines[0], "record", "node"), "n1") == 0);
        const cJSON *task = cJSON_GetObjectItem(cJSON_GetObjectItem(lines[0], "record"), "task");
        EXPECT(strcmp(cJSON_GetObjectItem(task, "family")->valuestring, "arc_1d") == 0);
        const cJSON *comp =
            cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(lines[0], "record"), "completions"), 0);
        EXPECT(strcmp(cJSON_GetObjectItem(comp, "text")->valuestring, "<answer>7</answer>") == 0);
        EXPECT(cJSON_GetObjectItem(comp, "reward")->valuedouble == 0.5);
        EXPECT(strcmp(cJSON_GetObjectItem(lines[1], "stream")->valuestring, "notices") == 0);
        EXPECT(cJSON_GetObjectItem(cJSON_GetObjectItem(lines[1], "record"), "policy_version")->valuedouble == 42);
        EXPECT(strcmp(cJSON_GetObjectItem(lines[2], "stream")->valuestring, "rollouts") == 0);
    }
    for (int i = 0; i < n; i++) cJSON_Delete(lines[i]);
    EXPECTF(strstr(err, "tap: rollouts record 2 skipped: rollout record of 64 bytes fails") != NULL, "%s", err);
    EXPECTF(strstr(err, "tap: 1 of 5 captured records skipped") != NULL, "%s", err);
    free(out);
    free(err);
    close(c.out);
    close(c.err);
    zsock_destroy(&pub);
}

static void test_dotted_where(void)
{
    zsock_t *pub = capture_bind();
    const char *args[] = {"--broker", base, "--where", "task.family=bf", "--where", "completions.0.reward=1",
                          "--count",  "1",  NULL};
    child_t c = spawn_tap(args);
    EXPECT(await_subscriptions(pub, 1) == 0);
    publish_group(pub, "scored", "n1", "arc_1d", 1.0f);
    publish_group(pub, "scored", "n1", "bf", 0.0f);
    publish_group(pub, "scored", "n7", "bf", 1.0f);
    char *out = slurp(c.out, 10000);
    EXPECT(wait_exit(c.pid, 10000) == 0);
    cJSON *lines[4];
    int n = parse_lines(out, lines, 4);
    EXPECT(n == 1);
    if (n == 1) {
        EXPECT(strcmp(cJSON_GetObjectItem(lines[0], "stream")->valuestring, "scored") == 0);
        EXPECT(strcmp(field(lines[0], "record", "node"), "n7") == 0);
    }
    for (int i = 0; i < n; i++) cJSON_Delete(lines[i]);
    free(out);
    close(c.out);
    close(c.err);
    zsock_destroy(&pub);
}

/* tap | head: once its reader is gone tap ends quietly with status 0 */
static void test_closed_stdout(void)
{
    zsock_t *pub = capture_bind();
    const char *args[] = {"--broker", base, NULL};
    child_t c = spawn_tap(args);
    EXPECT(await_subscriptions(pub, 1) == 0);
    publish_policy(pub, "n1", 1);
    char line[4096];
    ssize_t r = read(c.out, line, sizeof line);
    EXPECT(r > 0);
    close(c.out);
    int st = -1;
    for (int i = 0; i < 500 && st < 0; i++) {
        publish_policy(pub, "n1", 2);
        zclock_sleep(10);
        int s;
        if (waitpid(c.pid, &s, WNOHANG) == c.pid) st = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
    }
    if (st < 0) st = wait_exit(c.pid, 0);
    EXPECTF(st == 0, "status %d", st);
    char *err = slurp(c.err, 1000);
    EXPECTF(err[0] == '\0', "stderr: %s", err);
    free(err);
    close(c.err);
    zsock_destroy(&pub);
}

static void expect_usage_error(const char *const *args, const char *message)
{
    child_t c = spawn_tap(args);
    char *out = slurp(c.out, 5000);
    char *err = slurp(c.err, 5000);
    EXPECT(wait_exit(c.pid, 5000) == 2);
    EXPECT(out[0] == '\0');
    EXPECTF(strstr(err, message) != NULL && strchr(err, '\n') == err + strlen(err) - 1, "stderr: %s", err);
    free(out);
    free(err);
    close(c.out);
    close(c.err);
}

static void test_bad_flags(void)
{
    expect_usage_error((const char *[]){"--frobnicate", NULL}, "unknown argument '--frobnicate'");
    expect_usage_error((const char *[]){"--stream", "rollout", NULL}, "--stream 'rollout' is not a stream");
    expect_usage_error((const char *[]){"--where", "node", NULL}, "--where 'node' is not FIELD=VALUE");
    expect_usage_error((const char *[]){"--count", "-1", NULL}, "--count '-1' is not a positive number");
    expect_usage_error((const char *[]){"--count", NULL}, "--count needs a value");
    expect_usage_error((const char *[]){"--broker", "tcp:x", NULL}, "broker base 'tcp:x'");

    child_t c = spawn_tap((const char *[]){"--help", NULL});
    char *out = slurp(c.out, 5000);
    EXPECT(wait_exit(c.pid, 5000) == 0);
    EXPECT(strncmp(out, "usage: tap", 10) == 0);
    free(out);
    close(c.out);
    close(c.err);
}

int main(void)
{
    snprintf(rundir, sizeof rundir, "/tmp/sapo-tap-XXXXXX");
    if (!mkdtemp(rundir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(base, sizeof base, "ipc:%s", rundir);
    zsys_init();
    zsys_set_linger(0);
    RUN_TEST(test_stream_where_count);
    RUN_TEST(test_dotted_where);
    RUN_TEST(test_closed_stdout);
    RUN_TEST(test_bad_flags);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", rundir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", rundir);
    CHECK_EXIT();
}
