/* lib/pool/route.c against a real Redis Cluster of 3 masters and 3
 * replicas on loopback (tests/cluster.sh): slots as the cluster computes
 * them (CLUSTER KEYSLOT), every command where its slot lives, pipelines
 * across the masters, MOVED after a reshard, ASK during a slot's
 * migration, a master stalled (only its commands fail, by the call's
 * deadline), a master killed and its replica taking over, what a URL
 * can meet at connect (a replica seed, a bad seed, redis:// to a cluster
 * node, CLUSTERDOWN and slots no master serves), a single
 * Redis as before; and what a cluster URL meets that is not a cluster,
 * or a slot map that is not one, refused with one line. */
#include "check.h"
#include "pool/pool.h"
#include "pool/route.h"
#include "redis_server.h"

#include <pthread.h>
#include <signal.h>

static char dir[64], url[1024];
static int prepared;

static int count_prepare(void *ctx, link_t *c, const char *where, char *err, size_t errlen)
{
    (void)ctx, (void)c, (void)where, (void)err, (void)errlen;
    prepared++;
    return 0;
}

/* starts the cluster; 0, or -1 (the reason printed) */
static int cluster_start(void)
{
    snprintf(dir, sizeof dir, "/tmp/sapo-cluster-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tests/cluster.sh start %s/c", dir);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    if (!fgets(url, sizeof url, p)) url[0] = '\0';
    int rc = pclose(p);
    url[strcspn(url, "\n")] = '\0';
    return rc == 0 && strncmp(url, "redis-cluster://", 16) == 0 ? 0 : -1;
}

static void cluster_stop(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tests/cluster.sh stop %s/c; rm -rf %s", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "could not stop the cluster in %s\n", dir);
}

static redisReply *run(route_t *r, const char *key, const char *a0, const char *a1, const char *a2)
{
    const char *argv[] = {a0, a1, a2};
    char err[512];
    redisReply *rep = route_run(r, key, a2 ? 3 : a1 ? 2 : 1, argv, NULL, err, sizeof err);
    if (!rep) printf("  route_run %s %s: %s\n", a0, a1 ? a1 : "", err);
    return rep;
}

/* direct to port: one command's integer or string reply as text */
static int direct(int port, const char *cmd, char *out, size_t outlen)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = c && !c->err ? redisCommand(c, cmd) : NULL;
    int ok = r && (r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
    if (ok && r->type == REDIS_REPLY_INTEGER) snprintf(out, outlen, "%lld", r->integer);
    else if (ok) snprintf(out, outlen, "%s", r->str);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return ok ? 0 : -1;
}

/* the first seed's port */
static int first_port(void) { return atoi(strstr(url, "127.0.0.1:") + 10); }

/* how many connections the server at port has accepted, this one's among them */
static long accepted(int port)
{
    char info[8192] = "";
    if (direct(port, "INFO stats", info, sizeof info) != 0) return -1;
    const char *at = strstr(info, "total_connections_received:");
    return at ? atol(at + 27) : -1;
}

/* the cluster's own slot for each key, against route_slot's */
static void test_slots(void)
{
    const char *keys[] = {"foo",
                          "123456789",
                          "{user1000}.following",
                          "{user1000}.followers",
                          "foo{}{bar}",
                          "foo{{bar}}zap",
                          "foo{bar}{zap}",
                          "{}",
                          "}{",
                          "sapo:{n0}:entries",
                          "a",
                          ""};
    int port = first_port();
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char cmd[128], got[32];
        snprintf(cmd, sizeof cmd, "CLUSTER KEYSLOT %s", keys[i]);
        if (!keys[i][0]) continue; /* the empty key cannot be typed in a format string */
        EXPECTF(direct(port, cmd, got, sizeof got) == 0 && atoi(got) == route_slot(keys[i], strlen(keys[i])),
                "%s: the cluster says %s, route_slot %d", keys[i], got, route_slot(keys[i], strlen(keys[i])));
    }
    EXPECT(route_slot("123456789", 9) == (0x31C3 & 16383));
    EXPECT(route_slot("{user1000}.following", 20) == route_slot("user1000", 8));
}

/* keys of many slots written and read, each where the map says: no
 * redirection, one map read, one connection per master */
static void test_routes(void)
{
    char err[512];
    route_t *r = route_new(url, err, sizeof err);
    EXPECTF(r != NULL, "%s", err);
    if (!r) return;
    prepared = 0;
    route_on_connect(r, count_prepare, NULL);
    long before = accepted(first_port());
    EXPECTF(route_connect(r, err, sizeof err) == 0, "%s", err);
    /* the seed the map is read from (a master: its slots then served on
     * the same link) connected once, and the count's own connection */
    long seed_connects = accepted(first_port()) - before;
    EXPECTF(seed_connects == 2, "the first seed accepted %ld connections, the count's own among them", seed_connects);
    EXPECT(route_is_cluster(r) && route_masters(r, err, sizeof err) == 3);
    int slots = 0;
    for (int i = 0; i < 3; i++) slots += route_master_slots(r, i);
    EXPECT(slots == ROUTE_SLOTS);
    int ok = 0;
    for (int i = 0; i < 300; i++) {
        char key[32], val[32];
        snprintf(key, sizeof key, "k%d", i);
        snprintf(val, sizeof val, "v%d", i);
        redisReply *s = run(r, key, "SET", key, val), *g = run(r, key, "GET", key, NULL);
        ok += s && g && g->type == REDIS_REPLY_STRING && strcmp(g->str, val) == 0;
        if (s) freeReplyObject(s);
        if (g) freeReplyObject(g);
    }
    EXPECTF(ok == 300, "%d of 300 keys written and read back", ok);
    EXPECT(route_moved(r) == 0 && route_asked(r) == 0 && route_map_reads(r) == 1);
    /* the seed asked for the map, then one connection per other master */
    EXPECTF(prepared <= 4, "%d connections", prepared);
    /* pipelines: the replies in the order appended, one trip per master */
    for (int i = 0; i < 300; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        const char *argv[] = {"GET", key};
        EXPECT(route_append(r, key, 2, argv, NULL) == 0);
    }
    redisReply *rep[300];
    EXPECTF(route_replies(r, rep, err, sizeof err) == 0, "%s", err);
    int same = 0;
    for (int i = 0; i < 300; i++) {
        char val[32];
        snprintf(val, sizeof val, "v%d", i);
        same += rep[i] && rep[i]->type == REDIS_REPLY_STRING && strcmp(rep[i]->str, val) == 0;
        if (rep[i]) freeReplyObject(rep[i]);
    }
    EXPECTF(same == 300, "%d of 300 pipelined replies in place", same);
    EXPECT(route_queued(r) == 0);
    route_destroy(&r);
    EXPECT(r == NULL);
}

/* the port of the master that holds key (the others answer MOVED) */
static int master_of(route_t *r, const char *key)
{
    char err[256], cmd[128], got[64];
    int n = route_masters(r, err, sizeof err);
    snprintf(cmd, sizeof cmd, "EXISTS %s", key);
    for (int i = 0; i < n; i++)
        if (direct(route_master_port(r, i), cmd, got, sizeof got) == 0) return route_master_port(r, i);
    return -1;
}

/* The slot of key (set to value first) half moved, as redis-cli
 * --cluster reshard moves it: IMPORTING at another master, MIGRATING at
 * its own, and key MIGRATEd: the two masters' ports into src and dst, the
 * target's id into dst_id */
static void half_move(route_t *r, const char *key, const char *value, int *src, int *dst, char dst_id[64])
{
    char err[256], cmd[256], src_id[64], got[64];
    int slot = route_slot(key, strlen(key));
    redisReply *s = run(r, key, "SET", key, value);
    if (s) freeReplyObject(s);
    *src = master_of(r, key), *dst = -1;
    for (int i = 0; i < route_masters(r, err, sizeof err); i++)
        if (route_master_port(r, i) != *src) *dst = route_master_port(r, i);
    EXPECT(direct(*src, "CLUSTER MYID", src_id, sizeof src_id) == 0 && direct(*dst, "CLUSTER MYID", dst_id, 64) == 0);
    snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d IMPORTING %s", slot, src_id);
    EXPECT(direct(*dst, cmd, got, sizeof got) == 0);
    snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d MIGRATING %s", slot, dst_id);
    EXPECT(direct(*src, cmd, got, sizeof got) == 0);
    snprintf(cmd, sizeof cmd, "MIGRATE 127.0.0.1 %d %s 0 5000", *dst, key);
    EXPECT(direct(*src, cmd, got, sizeof got) == 0);
}

/* the move of key's slot finished on every master */
static void move_done(route_t *r, const char *key, const char *dst_id)
{
    char err[256], cmd[256], got[64];
    for (int i = 0; i < route_masters(r, err, sizeof err); i++) {
        snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d NODE %s", route_slot(key, strlen(key)), dst_id);
        direct(route_master_port(r, i), cmd, got, sizeof got);
    }
}

/* After a reshard the map is stale: MOVED replies are followed and the
 * map read again; during a slot's migration, ASK is followed once */
static void test_redirections(void)
{
    char err[512], cmd[512];
    route_t *r = route_new(url, err, sizeof err);
    EXPECT(r && route_connect(r, err, sizeof err) == 0);
    if (!r) return;
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof key, "m%d", i);
        redisReply *s = run(r, key, "SET", key, key);
        if (s) freeReplyObject(s);
    }
    /* 2,000 slots from one master to the next, behind route's back */
    int from = route_master_port(r, 0), to = route_master_port(r, 1);
    char from_id[64], to_id[64];
    EXPECT(direct(from, "CLUSTER MYID", from_id, sizeof from_id) == 0 &&
           direct(to, "CLUSTER MYID", to_id, sizeof to_id) == 0);
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster reshard 127.0.0.1:%d --cluster-from %s --cluster-to %s --cluster-slots 2000 "
             "--cluster-yes > %s/reshard.log 2>&1",
             from, from_id, to_id, dir);
    EXPECTF(system(cmd) == 0, "reshard failed: see %s/reshard.log", dir);
    /* one pipeline over every key: those whose slot moved answer MOVED,
     * and the map is read again once for all of them */
    char keys[200][32];
    for (int i = 0; i < 200; i++) {
        snprintf(keys[i], sizeof keys[i], "m%d", i);
        const char *argv[] = {"GET", keys[i]};
        EXPECT(route_append(r, keys[i], 2, argv, NULL) == 0);
    }
    redisReply *got_back[200];
    long reads = route_map_reads(r);
    EXPECTF(route_replies(r, got_back, err, sizeof err) == 0, "%s", err);
    int ok = 0;
    for (int i = 0; i < 200; i++) {
        ok += got_back[i] && got_back[i]->type == REDIS_REPLY_STRING && strcmp(got_back[i]->str, keys[i]) == 0;
        if (got_back[i]) freeReplyObject(got_back[i]);
    }
    EXPECTF(ok == 200 && route_moved(r) > 1 && route_map_reads(r) == reads + 1,
            "%d of 200 read after the reshard, %ld MOVED followed, %ld map reads", ok, route_moved(r),
            route_map_reads(r) - reads);
    printf("  a pipeline of 200 GETs after a reshard: %ld answered MOVED, the map read again %ld time(s)\n",
           route_moved(r), route_map_reads(r) - reads);

    /* a slot half moved: its key at the importing node, ASK from the
     * other */
    int src, dst;
    char dst_id[64];
    half_move(r, "{ask}a", "moved-by-hand", &src, &dst, dst_id);
    long asked = route_asked(r);
    redisReply *g = run(r, "{ask}a", "GET", "{ask}a", NULL);
    EXPECTF(g && g->type == REDIS_REPLY_STRING && strcmp(g->str, "moved-by-hand") == 0 && route_asked(r) == asked + 1,
            "GET during the migration: %s, %ld ASK followed", g && g->str ? g->str : "no reply",
            route_asked(r) - asked);
    if (g) freeReplyObject(g);
    move_done(r, "{ask}a", dst_id);
    route_destroy(&r);
}

/* MIGRATE of one key from port src to port dst after a delay (ms), on a
 * thread */
typedef struct {
    int src, dst, delay_ms;
    const char *key;
} migrate_t;

static void *migrate_later(void *arg)
{
    const migrate_t *m = arg;
    struct timespec ts = {m->delay_ms / 1000, (m->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    char cmd[256], got[64];
    snprintf(cmd, sizeof cmd, "MIGRATE 127.0.0.1 %d %s 0 5000", m->dst, m->key);
    if (direct(m->src, cmd, got, sizeof got) != 0 || strcmp(got, "OK") != 0) printf("  MIGRATE %s failed\n", m->key);
    return NULL;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* A multi-key command while its slot migrates and its keys are split
 * between the two ends (one MIGRATEd, one not): the source answers ASK,
 * the target TRYAGAIN. With the keys left split the command gives up
 * after its tries, with one line; once the second key follows, a wait
 * and a try more answer it */
static void test_tryagain(void)
{
    char err[512];
    route_t *r = route_new(url, err, sizeof err);
    EXPECT(r && route_connect(r, err, sizeof err) == 0);
    if (!r) return;
    redisReply *s = run(r, "{try}b", "SET", "{try}b", "2");
    if (s) freeReplyObject(s);
    int src, dst;
    char dst_id[64];
    half_move(r, "{try}a", "1", &src, &dst, dst_id);
    const char *argv[] = {"MGET", "{try}a", "{try}b"};
    long tries = route_tryagain(r);
    double t0 = seconds();
    redisReply *g = route_run(r, "{try}a", 3, argv, NULL, err, sizeof err);
    EXPECTF(!g && strstr(err, "TRYAGAIN") && strstr(err, "gave up") && !strchr(err, '\n'), "%s", g ? "answered" : err);
    printf("  keys left split: %ld TRYAGAIN in %.2f s, then: %s\n", route_tryagain(r) - tries, seconds() - t0, err);
    if (g) freeReplyObject(g);
    migrate_t m = {src, dst, 100, "{try}b"};
    pthread_t t;
    pthread_create(&t, NULL, migrate_later, &m);
    tries = route_tryagain(r);
    g = route_run(r, "{try}a", 3, argv, NULL, err, sizeof err);
    pthread_join(t, NULL);
    EXPECTF(g && g->type == REDIS_REPLY_ARRAY && g->elements == 2 && g->element[0]->type == REDIS_REPLY_STRING &&
                strcmp(g->element[0]->str, "1") == 0 && g->element[1]->type == REDIS_REPLY_STRING &&
                strcmp(g->element[1]->str, "2") == 0 && route_tryagain(r) > tries,
            "MGET while the second key followed: %s, %ld TRYAGAIN", g ? "another reply" : err,
            route_tryagain(r) - tries);
    if (g) freeReplyObject(g);
    move_done(r, "{try}a", dst_id);
    route_destroy(&r);
}

/* A master killed: its replica is promoted, and the keys it held are
 * read from there */
/* the pid of the cluster's node at port, from its list; 0 when not there */
static int pid_of(int port)
{
    char path[128], line[64];
    snprintf(path, sizeof path, "%s/c/ports", dir);
    FILE *f = fopen(path, "r");
    int pid = 0;
    while (f && fgets(line, sizeof line, f)) {
        int p, q;
        if (sscanf(line, "%d %d", &p, &q) == 2 && p == port) pid = q;
    }
    if (f) fclose(f);
    return pid;
}

/* One master stalled (SIGSTOP: its connections open, nothing answered):
 * a pipeline of writes over every master, under a deadline of 300 ms,
 * gets every other master's replies and fails only the stalled one's
 * commands, by the deadline; the next pipeline fails them at once (the
 * node is down for a while, not waited on again); once the master
 * answers again and its wait is over, every command is answered. Short
 * of the cluster's node timeout (1 s), so no failover starts. (Reads
 * would go to its replica: test_replica_reads.) */
static void test_master_stalled(void)
{
    char err[512];
    route_t *r = route_new(url, err, sizeof err);
    EXPECT(r && route_connect(r, err, sizeof err) == 0);
    if (!r) return;
    enum { N = 30 };
    char keys[N][24];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "stall%d", i);
        redisReply *s = run(r, keys[i], "SET", keys[i], keys[i]);
        if (s) freeReplyObject(s);
    }
    int port = master_of(r, keys[0]), pid = pid_of(port), on_it = 0;
    for (int i = 0; i < N; i++) on_it += master_of(r, keys[i]) == port;
    EXPECT(pid > 0 && on_it > 0 && on_it < N);
    redisReply *out[N];
    double took[3];
    int failed[3], right[3];
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 0) EXPECT(kill(pid, SIGSTOP) == 0);
        if (pass == 2) {
            EXPECT(kill(pid, SIGCONT) == 0);
            usleep(600 * 1000); /* the node's wait after its failure (250 ms) */
        }
        route_deadline(r, pass == 2 ? 2000 : 300);
        for (int i = 0; i < N; i++) {
            const char *argv[] = {"SET", keys[i], keys[i]};
            EXPECT(route_append(r, keys[i], 3, argv, NULL) == 0);
        }
        double t0 = seconds();
        failed[pass] = route_replies(r, out, err, sizeof err);
        took[pass] = seconds() - t0;
        right[pass] = 0;
        for (int i = 0; i < N; i++) {
            right[pass] += out[i] && out[i]->type == REDIS_REPLY_STATUS && strcmp(out[i]->str, "OK") == 0;
            if (out[i]) freeReplyObject(out[i]);
        }
        printf("  %s: %d of %d answered right, %d failed, in %.3f s%s%s\n",
               pass == 0   ? "stalled"
               : pass == 1 ? "stalled, again"
                           : "answering again",
               right[pass], N, failed[pass], took[pass], failed[pass] ? ": " : "", failed[pass] ? err : "");
    }
    kill(pid, SIGCONT);
    EXPECTF(failed[0] == on_it && right[0] == N - on_it && took[0] < 0.8, "%d failed (%d on it), %.3f s", failed[0],
            on_it, took[0]);
    EXPECTF(failed[1] == on_it && right[1] == N - on_it && took[1] < 0.1, "%d failed, %.3f s", failed[1], took[1]);
    EXPECTF(failed[2] == 0 && right[2] == N, "%d failed", failed[2]);
    route_deadline(r, 0);
    route_destroy(&r);
}

/* The pool on the cluster with the master of its node set stalled: a
 * draw (deadline 300 ms) still hands out the new entries of every node,
 * by the deadline: those whose keys live on the other masters, and once
 * the stalled master's first read has waited out its share of the
 * deadline, those of its own nodes from its replica (the node set as last
 * read); a node whose keys live elsewhere publishes (its place in the
 * node set is added again at its next publish). */
static void test_draw_master_stalled(void)
{
    char err[512];
    route_t *r = route_new(url, err, sizeof err);
    pool_t *pub = pool_new(url, "stall", 100, err, sizeof err), *me = pool_new(url, "stall", 100, err, sizeof err);
    EXPECT(r && pub && me && route_connect(r, err, sizeof err) == 0);
    if (!r || !pub || !me) return;
    enum { NODES = 12 };
    char node[NODES][16], key[64], rec[64];
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < NODES; i++) {
            snprintf(node[i], sizeof node[i], "n%d", i);
            for (int j = 0; j < 3; j++) {
                int len = snprintf(rec, sizeof rec, "%s/%d/%d", node[i], round, j);
                EXPECTF(pool_publish(pub, node[i], (uint64_t)round, rec, (size_t)len, err, sizeof err) == 0, "%s", err);
            }
        }
        if (round == 1) { /* the first round's entries drawn whole, the node set read */
            pool_entry_t *e = NULL;
            int n = pool_draw(me, "me", 3 * NODES, &e, err, sizeof err);
            EXPECTF(n == 3 * NODES, "%d: %s", n, err);
            pool_entries_free(e, n > 0 ? n : 0);
        }
    }
    int port = master_of(r, "stall:nodes"), pid = pid_of(port), live = 0, publisher = -1;
    for (int i = 0; i < NODES; i++) {
        snprintf(key, sizeof key, "stall:n:{%s}:e", node[i]);
        if (master_of(r, key) != port) live++, publisher = i;
    }
    EXPECTF(pid > 0 && live > 0 && live < NODES, "%d of %d nodes' keys away from the node set's master", live, NODES);
    EXPECT(kill(pid, SIGSTOP) == 0);
    pool_deadline(me, 0.3);
    pool_deadline(pub, 0.3);
    pool_entry_t *e = NULL;
    double t0 = seconds();
    int n = pool_draw(me, "me", 3 * NODES, &e, err, sizeof err);
    double took = seconds() - t0;
    int second = 0;
    for (int i = 0; i < n; i++) second += e[i].len > 3 && memchr(e[i].data, '/', e[i].len) && strstr(e[i].data, "/2/");
    int published = publisher >= 0 ? pool_publish(pub, node[publisher], 3, "late", 4, err, sizeof err) : -1;
    kill(pid, SIGCONT);
    printf("  the node set's master stalled: %d entries drawn (%d of the %d nodes elsewhere, 3 each) in %.3f s\n", n,
           live, NODES, took);
    EXPECTF(n == 3 * NODES && second == n && took < 0.8, "%d drawn (%d of round 2), %.3f s: %s", n, second, took, err);
    EXPECTF(published == 0, "%s", err);
    pool_entries_free(e, n > 0 ? n : 0);
    pool_destroy(&pub);
    pool_destroy(&me);
    route_destroy(&r);
    usleep(600 * 1000); /* the stalled master's wait over, before the next test */
}

/* each node's port from the cluster's list, into ports (at most 16): how many */
static int cluster_ports(int *ports)
{
    char path[128], line[64];
    snprintf(path, sizeof path, "%s/c/ports", dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < 16 && fgets(line, sizeof line, f)) n += sscanf(line, "%d", &ports[n]) == 1;
    if (f) fclose(f);
    return n;
}

/* What a URL can meet at connect, each with its one line: a replica as
 * the only seed works (the map read from it); a seed that does not answer
 * among good ones is named in the notice while the others serve; every
 * seed bad is one error naming them; redis:// to a node of a cluster is
 * refused with the URL to use; a '{' in the swarm prefix is refused. */
static void test_connect_errors(void)
{
    char err[512], got[4096], u[256];
    int ports[16], np = cluster_ports(ports), replica = 0, master = 0;
    for (int i = 0; i < np; i++) {
        if (direct(ports[i], "INFO replication", got, sizeof got) != 0) continue;
        if (strstr(got, "role:slave")) replica = ports[i];
        else master = ports[i];
    }
    EXPECT(replica > 0 && master > 0);
    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d", replica);
    route_t *r = route_new(u, err, sizeof err);
    EXPECTF(r && route_connect(r, err, sizeof err) == 0 && route_masters(r, err, sizeof err) == 3, "%s", err);
    int right = 0;
    for (int i = 0; r && i < 12; i++) {
        char key[16];
        snprintf(key, sizeof key, "seed%d", i);
        redisReply *w = run(r, key, "SET", key, "v"), *g = run(r, key, "GET", key, NULL);
        right += w && g && g->type == REDIS_REPLY_STRING && strcmp(g->str, "v") == 0;
        if (w) freeReplyObject(w);
        if (g) freeReplyObject(g);
    }
    EXPECTF(right == 12, "%d of 12 keys written and read through a replica seed", right);
    EXPECT(r && route_notice(r)[0] == '\0');
    route_destroy(&r);

    int dead = redis_server_free_port();
    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", dead, master);
    r = route_new(u, err, sizeof err);
    EXPECTF(r && route_connect(r, err, sizeof err) == 0, "%s", err);
    redisReply *g = r ? run(r, "seed1", "GET", "seed1", NULL) : NULL;
    EXPECT(g && g->type == REDIS_REPLY_STRING);
    if (g) freeReplyObject(g);
    char want[256];
    snprintf(want, sizeof want, "seed redis 127.0.0.1:%d: Connection refused", dead);
    printf("  a bad seed among good: \"%s\"\n", r ? route_notice(r) : "");
    EXPECTF(r && strcmp(route_notice(r), want) == 0, "%s", r ? route_notice(r) : "");
    route_destroy(&r);

    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", dead, dead + 1);
    r = route_new(u, err, sizeof err);
    int rc = r ? route_connect(r, err, sizeof err) : 0;
    printf("  every seed bad: \"%s\"\n", err);
    snprintf(want, sizeof want,
             "seed redis 127.0.0.1:%d: Connection refused; seed redis 127.0.0.1:%d: Connection refused (no seed of "
             "the URL answered)",
             dead, dead + 1);
    EXPECTF(rc == -1 && strcmp(err, want) == 0, "%s", err);
    route_destroy(&r);

    snprintf(u, sizeof u, "redis://127.0.0.1:%d", master);
    r = route_new(u, err, sizeof err);
    rc = r ? route_connect(r, err, sizeof err) : 0;
    char line[512];
    snprintf(line, sizeof line,
             "redis 127.0.0.1:%d is a node of a Redis Cluster: name the cluster as redis-cluster://127.0.0.1:%d (a "
             "plain redis:// URL would reach only this node's slots)",
             master, master);
    printf("  redis:// to a cluster node: \"%s\"\n", err);
    EXPECTF(rc == -1 && strcmp(err, line) == 0, "%s", err);
    route_destroy(&r);

    pool_t *p = pool_new(url, "my{swarm}", 10, err, sizeof err);
    EXPECTF(!p && strcmp(err, "pool: swarm prefix 'my{swarm}' may not hold '{' or '}' (a Redis Cluster hashes a key "
                              "by its first {...}, which must be the node's)") == 0,
            "%s", err);
    pool_destroy(&p);
}

/* A cluster of one node that serves half the slots: with Redis's default
 * (cluster-require-full-coverage yes) every command answers CLUSTERDOWN,
 * which the client waits out to the call's deadline and then says so in
 * one line; with it off, the served half works and a key of the other
 * half fails alone with the line that names the uncovered slots; the
 * notice says how many slots no master serves. */
static void test_uncovered_slots(void)
{
    char cdir[96], cmd[1024], err[512], u[128];
    snprintf(cdir, sizeof cdir, "%s/half", dir);
    /* the bus port named: by default it is the port + 10,000, past 65,535
     * for half the ports the kernel hands out */
    int port = redis_server_free_port(), bus = redis_server_free_port();
    while (bus == port) bus = redis_server_free_port();
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && redis-server --port %d --cluster-port %d --bind 127.0.0.1 --dir %s --cluster-enabled yes "
             "--save '' "
             "--appendonly no --daemonize yes --pidfile %s/pid --logfile %s/log && "
             "for i in $(seq 100); do redis-cli -p %d PING > /dev/null 2>&1 && break; sleep 0.1; done && "
             "redis-cli -p %d CLUSTER ADDSLOTSRANGE 0 8191 > /dev/null",
             cdir, port, bus, cdir, cdir, cdir, port, port);
    if (system(cmd) != 0) SKIP_TEST("a one-node cluster could not be started");
    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d", port);
    route_t *r = route_new(u, err, sizeof err);
    EXPECTF(r && route_connect(r, err, sizeof err) == 0, "%s", err);
    /* "a" is in slot 15495, "b" in 3300 */
    route_deadline(r, 500);
    const char *argv[] = {"SET", "b", "1"};
    redisReply *w = route_run(r, "b", 3, argv, NULL, err, sizeof err);
    printf("  full coverage required: \"%s\"\n", w ? "(answered)" : err);
    EXPECTF(!w && strstr(err, "CLUSTERDOWN") && strstr(err, "gave up at the call's deadline"), "%s", err);
    if (w) freeReplyObject(w), w = NULL;
    /* reads too, by Redis's default; with cluster-allow-reads-when-down
     * yes a down cluster answers reads of the slots it serves at once,
     * and writes still fail */
    const char *get_b[] = {"GET", "b"};
    route_deadline(r, 500);
    w = route_run(r, "b", 2, get_b, NULL, err, sizeof err);
    printf("  a read, reads when down not allowed: \"%s\"\n", w ? "(answered)" : err);
    EXPECTF(!w && strstr(err, "CLUSTERDOWN"), "%s", w ? "answered" : err);
    if (w) freeReplyObject(w), w = NULL;
    char got[64];
    EXPECT(direct(port, "CONFIG SET cluster-allow-reads-when-down yes", got, sizeof got) == 0);
    route_deadline(r, 500);
    double t0 = seconds();
    w = route_run(r, "b", 2, get_b, NULL, err, sizeof err);
    double read_s = seconds() - t0;
    printf("  a read, reads when down allowed: %s in %.3f s\n", w ? "answered" : err, read_s);
    EXPECTF(w && w->type == REDIS_REPLY_NIL && read_s < 0.1, "%s in %.3f s", w ? "answered" : err, read_s);
    if (w) freeReplyObject(w), w = NULL;
    route_deadline(r, 500);
    w = route_run(r, "b", 3, argv, NULL, err, sizeof err);
    EXPECTF(!w && strstr(err, "CLUSTERDOWN"), "%s", w ? "(answered)" : err);
    if (w) freeReplyObject(w);
    EXPECT(direct(port, "CONFIG SET cluster-require-full-coverage no", got, sizeof got) == 0);
    /* the node serves again once it has recomputed its state (seconds) */
    char info[4096] = "";
    for (int i = 0; i < 100 && !strstr(info, "cluster_state:ok"); i++) {
        usleep(100 * 1000);
        if (direct(port, "CLUSTER INFO", info, sizeof info) != 0) info[0] = '\0';
    }
    EXPECT(strstr(info, "cluster_state:ok"));
    route_deadline(r, 500);
    w = route_run(r, "b", 3, argv, NULL, err, sizeof err);
    EXPECTF(w && w->type == REDIS_REPLY_STATUS, "%s", err);
    if (w) freeReplyObject(w);
    const char *argv_a[] = {"SET", "a", "1"};
    route_deadline(r, 500);
    redisReply *a = route_run(r, "a", 3, argv_a, NULL, err, sizeof err);
    printf("  a key of an uncovered slot: \"%s\"\n  notice: \"%s\"\n", a ? "(answered)" : err, route_notice(r));
    char want[256];
    snprintf(want, sizeof want,
             "redis cluster 127.0.0.1:%d: no master serves slot 15495 (8192 of 16384 slots have none: a master down "
             "with no replica to promote, or slots never assigned)",
             port);
    EXPECTF(!a && strncmp(err, want, strlen(want)) == 0, "%s", err);
    if (a) freeReplyObject(a), a = NULL;
    EXPECTF(strcmp(route_notice(r), "8192 of 16384 slots served by no master (their commands fail; with "
                                    "cluster-require-full-coverage no the other masters serve the rest)") == 0,
            "%s", route_notice(r));
    /* the rest assigned: a key there is served within a second, and the
     * notice says nothing more (the map read again by the call) */
    EXPECT(direct(port, "CLUSTER ADDSLOTSRANGE 8192 16383", got, sizeof got) == 0);
    for (int t = 0; t < 30 && !a; t++) {
        usleep(100 * 1000);
        route_deadline(r, 500);
        a = route_run(r, "a", 3, argv_a, NULL, err, sizeof err);
    }
    printf("  the slots assigned: \"%s\", notice \"%s\"\n", a ? "(answered)" : err, route_notice(r));
    EXPECTF(a && a->type == REDIS_REPLY_STATUS && route_notice(r)[0] == '\0', "%s; notice: %s", a ? "answered" : err,
            route_notice(r));
    if (a) freeReplyObject(a);
    route_destroy(&r);
    snprintf(cmd, sizeof cmd, "kill $(cat %s/pid) 2> /dev/null", cdir);
    if (system(cmd) != 0) fprintf(stderr, "could not stop the one-node cluster\n");
}

/* A master killed, its replica not yet promoted (the cluster's node
 * timeout is 1 s): reads of its keys, one by one and in a pipeline with
 * the other masters' keys, are answered at once by its replica under
 * READONLY, and a write fails; keys off the master that test_failover
 * kills next, so that it still has a replica. */
static void test_replica_reads(void)
{
    char err[512];
    route_t *r = route_new(url, err, sizeof err);
    EXPECT(r && route_connect(r, err, sizeof err) == 0);
    if (!r) return;
    redisReply *fo = run(r, "{fo}k", "SET", "{fo}k", "placed");
    if (fo) freeReplyObject(fo);
    int spare = master_of(r, "{fo}k"), victim = -1;
    enum { N = 24 };
    char keys[N][24];
    bool onv[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "ro%d", i);
        redisReply *s = run(r, keys[i], "SET", keys[i], keys[i]);
        if (s) freeReplyObject(s);
        int m = master_of(r, keys[i]);
        if (victim < 0 && m != spare) victim = m;
    }
    int on_it = 0;
    for (int i = 0; i < N; i++) on_it += (onv[i] = master_of(r, keys[i]) == victim);
    EXPECTF(victim > 0 && on_it > 0 && on_it < N, "%d of %d keys on the master to kill", on_it, N);
    /* every write copied before the kill */
    const char *wait_argv[] = {"WAIT", "1", "2000"};
    for (int i = 0; i < N; i++) {
        if (!onv[i]) continue;
        bool confirmed = false;
        for (int t = 0; t < 15 && !confirmed; t++) {
            redisReply *w = route_run(r, keys[i], 3, wait_argv, NULL, err, sizeof err);
            confirmed = w && w->type == REDIS_REPLY_INTEGER && w->integer == 1;
            if (w) freeReplyObject(w);
        }
        EXPECTF(confirmed, "WAIT: the replica did not confirm %s", keys[i]);
        break; /* one WAIT covers every earlier write of that master */
    }
    int pid = pid_of(victim);
    EXPECT(pid > 0 && kill(pid, SIGKILL) == 0);
    usleep(50 * 1000);
    route_deadline(r, 300);
    double t0 = seconds();
    for (int i = 0; i < N; i++) {
        const char *argv[] = {"GET", keys[i]};
        EXPECT(route_append(r, keys[i], 2, argv, NULL) == 0);
    }
    redisReply *out[N];
    int failed = route_replies(r, out, err, sizeof err), right = 0;
    for (int i = 0; i < N; i++) {
        right += out[i] && out[i]->type == REDIS_REPLY_STRING && strcmp(out[i]->str, keys[i]) == 0;
        if (out[i]) freeReplyObject(out[i]);
    }
    double took = seconds() - t0;
    int one = 0;
    for (int i = 0; i < N && !one; i++)
        if (onv[i]) {
            const char *argv[] = {"GET", keys[i]};
            redisReply *g = route_run(r, keys[i], 2, argv, NULL, err, sizeof err);
            one = g && g->type == REDIS_REPLY_STRING && strcmp(g->str, keys[i]) == 0;
            if (g) freeReplyObject(g);
            const char *set_argv[] = {"SET", keys[i], "new"};
            redisReply *s = route_run(r, keys[i], 3, set_argv, NULL, err, sizeof err);
            EXPECTF(!s || s->type == REDIS_REPLY_ERROR, "a write to a dead master's slot answered %d",
                    s ? s->type : -1);
            if (s) freeReplyObject(s);
        }
    printf("  a master killed: %d of %d keys read right in a pipeline (%d on it) in %.3f s, %ld reads handed to its "
           "replica\n",
           right, N, on_it, took, route_replica_reads(r));
    EXPECTF(failed == 0 && right == N && took < 0.3, "%d failed, %d right, %.3f s: %s", failed, right, took, err);
    EXPECT(one && route_replica_reads(r) >= on_it + 1);
    /* its replica promoted before the next test */
    route_deadline(r, 0);
    int first = 0;
    while (!onv[first]) first++;
    for (int t = 0; t < 100 && master_of(r, keys[first]) < 0; t++) {
        usleep(100 * 1000);
        const char *argv[] = {"EXISTS", keys[first]}; /* the map read again once the cluster says MOVED */
        redisReply *g = route_run(r, keys[first], 2, argv, NULL, err, sizeof err);
        if (g) freeReplyObject(g);
    }
    EXPECTF(master_of(r, keys[first]) > 0, "%s: no master holds it 10 s after the kill", keys[first]);
    route_destroy(&r);
}

static void test_failover(void)
{
    char err[512], got[64];
    route_t *r = route_new(url, err, sizeof err);
    EXPECT(r && route_connect(r, err, sizeof err) == 0);
    if (!r) return;
    redisReply *s = run(r, "{fo}k", "SET", "{fo}k", "survives");
    if (s) freeReplyObject(s);
    /* tests/cluster.sh hands the cluster out once every replica has
     * finished its first copy; a replica on 2 busy cores may still lag
     * a write by over 2 s, so ask again for up to 30 s before one that
     * never confirms fails */
    const char *wait_argv[] = {"WAIT", "1", "2000"};
    bool confirmed = false;
    for (int i = 0; i < 15 && !confirmed; i++) {
        redisReply *w = route_run(r, "{fo}k", 3, wait_argv, NULL, err, sizeof err);
        confirmed = w && w->type == REDIS_REPLY_INTEGER && w->integer == 1;
        if (w) freeReplyObject(w);
    }
    EXPECTF(confirmed, "WAIT: the replica did not confirm the write in 30 s");
    int port = master_of(r, "{fo}k"), pid = pid_of(port);
    EXPECT(pid > 0 && kill(pid, SIGKILL) == 0);
    int tries = 0;
    redisReply *g = NULL;
    for (; tries < 30 && !g; tries++) {
        const char *argv[] = {"GET", "{fo}k"};
        g = route_run(r, "{fo}k", 2, argv, NULL, err, sizeof err);
        if (g && g->type != REDIS_REPLY_STRING) freeReplyObject(g), g = NULL;
    }
    EXPECTF(g && strcmp(g->str, "survives") == 0, "after the kill, %d tries: %s", tries, g ? g->str : err);
    printf("  a master killed: its key read back from the promoted replica after %d calls of route_run\n", tries);
    EXPECT(master_of(r, "{fo}k") != port && direct(port, "PING", got, sizeof got) != 0);
    if (g) freeReplyObject(g);
    route_destroy(&r);
}

/* a single Redis as before; a cluster URL at a server without cluster
 * support, and malformed URLs, refused with one line */
static void test_single_and_refused(void)
{
    redis_server_t rs;
    if (redis_server_start(&rs, 0) != 0) {
        printf("  %s\n", rs.why);
        EXPECT(0);
        return;
    }
    char err[512], u[128];
    route_t *r = route_new(rs.url, err, sizeof err);
    EXPECT(r && !route_is_cluster(r) && route_connect(r, err, sizeof err) == 0);
    redisReply *s = r ? run(r, "x", "SET", "x", "1") : NULL;
    EXPECT(s && s->type == REDIS_REPLY_STATUS && route_map_reads(r) == 0);
    if (s) freeReplyObject(s);
    route_destroy(&r);
    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d", rs.port);
    r = route_new(u, err, sizeof err);
    err[0] = '\0';
    EXPECT(r && route_connect(r, err, sizeof err) == -1);
    EXPECTF(strstr(err, "CLUSTER SLOTS") && strstr(err, "cluster support disabled") && !strchr(err, '\n'), "%s", err);
    redisReply *g = r ? run(r, "x", "GET", "x", NULL) : NULL;
    EXPECT(g == NULL);
    route_destroy(&r);
    redis_server_cleanup(&rs);
    const char *bad[] = {"redis://",        "http://h:1",           "redis://h:0",
                         "redis://h:1,h:2", "redis-cluster://h:1,", "redis-cluster://h:1/3",
                         "redis://h:1/x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        r = route_new(bad[i], err, sizeof err);
        EXPECTF(!r && strstr(err, bad[i]) && strstr(err, "expected"), "%s: %s", bad[i], err);
        route_destroy(&r);
    }
}

/* a server that answers CLUSTER SLOTS with what is not a slot map: a
 * range the wrong way round, a master without its port */
static int bad_port;
static void *bad_server(void *arg)
{
    int fd = *(int *)arg;
    /* two maps asked for; a connection that asks nothing (the client
     * reaching each seed once) is closed */
    for (int k = 0; k < 2;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) break;
        char buf[512];
        if (read(c, buf, sizeof buf) > 0) {
            const char *rep = k == 0 ? "*1\r\n*3\r\n:9\r\n:3\r\n*2\r\n$9\r\n127.0.0.1\r\n:1\r\n"
                                     : "*1\r\n*3\r\n:0\r\n:16383\r\n*1\r\n$9\r\n127.0.0.1\r\n";
            k++;
            if (write(c, rep, strlen(rep)) < 0) break;
        }
        close(c);
    }
    return NULL;
}

static void test_bad_map(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    EXPECT(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 4) == 0 &&
           getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    bad_port = ntohs(sa.sin_port);
    pthread_t t;
    pthread_create(&t, NULL, bad_server, &fd);
    char u[64], err[512];
    snprintf(u, sizeof u, "redis-cluster://127.0.0.1:%d", bad_port);
    for (int k = 0; k < 2; k++) {
        route_t *r = route_new(u, err, sizeof err);
        err[0] = '\0';
        EXPECT(r && route_connect(r, err, sizeof err) == -1);
        EXPECTF(strstr(err, "not a slot map") && !strchr(err, '\n'), "%s", err);
        route_destroy(&r);
    }
    pthread_join(t, NULL);
    close(fd);
}

int main(void)
{
    if (cluster_start() != 0) {
        cluster_stop();
        printf("SKIP test_route: no Redis Cluster could be started (redis-server and redis-cli 7, tests/cluster.sh)\n");
        return 0;
    }
    RUN_TEST(test_slots);
    RUN_TEST(test_routes);
    RUN_TEST(test_redirections);
    RUN_TEST(test_tryagain);
    RUN_TEST(test_master_stalled);
    RUN_TEST(test_draw_master_stalled);
    RUN_TEST(test_connect_errors);
    RUN_TEST(test_uncovered_slots);
    RUN_TEST(test_replica_reads);
    RUN_TEST(test_failover);
    RUN_TEST(test_single_and_refused);
    RUN_TEST(test_bad_map);
    cluster_stop();
    CHECK_EXIT();
}
