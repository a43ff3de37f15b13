/* Pool draw latency (a node's SampleExternal: one pool_draw of 4 fresh
 * entries from 7 other nodes', window 2 rounds) at 10^4 and 10^6 entries,
 * p50 and p99 (medians over 5 rounds), against a bare Redis PING round
 * trip on the same server. A drawer never takes an entry twice, so a new
 * one (as node0, connected before the clock runs) takes over every
 * DRAWER_CALLS calls: it remembers at most 1,000 entries, as a node
 * remembers its window's. Starts its own redis-server. */
#include "bench.h"
#include "pool/pool.h"
#include "../tests/redis_server.h"

#define NODES 8
#define RECORD 256
#define K 4
#define ROUNDS 5 /* the figures are medians over rounds */
#define WINDOW 2 /* rounds, a node's default (--pool-window) */
#define DRAWER_CALLS 250

static int fill(pool_t *p, long per_node)
{
    enum { BATCH = 2000 };
    static char recs[BATCH][RECORD];
    static const void *ptrs[BATCH];
    static size_t lens[BATCH];
    char err[256], node[16];
    for (int i = 0; i < BATCH; i++) {
        memset(recs[i], 'a' + i % 26, RECORD);
        ptrs[i] = recs[i];
        lens[i] = RECORD;
    }
    for (int n = 0; n < NODES; n++) {
        snprintf(node, sizeof node, "node%d", n);
        for (long done = 0; done < per_node; done += BATCH) {
            int want = per_node - done < BATCH ? (int)(per_node - done) : BATCH;
            if (pool_publish_many(p, node, 0, ptrs, lens, want, err, sizeof err) < 0) {
                fprintf(stderr, "bench_pool: fill: %s\n", err);
                return -1;
            }
        }
    }
    return 0;
}

/* node0's pool as a node makes it: the bound and window, connected */
static pool_t *drawer(const char *url, const char *swarm, int bound)
{
    char err[256];
    pool_t *d = pool_new(url, swarm, bound, err, sizeof err);
    if (!d) {
        fprintf(stderr, "bench_pool: %s\n", err);
        return NULL;
    }
    pool_window(d, WINDOW, 0);
    if (pool_size_node(d, "node0", NULL, 0) < 0) {
        fprintf(stderr, "bench_pool: %s unreachable\n", url);
        pool_destroy(&d);
    }
    return d;
}

/* One round: p50 and p99 in microseconds of calls draw calls and as many
 * PINGs, interleaved so both see the same load. */
static int measure(const char *url, const char *swarm, int bound, redisContext *ping, int calls, double *s50,
                   double *s99, double *p50, double *p99)
{
    double *ts = malloc(sizeof *ts * (size_t)calls), *tp = malloc(sizeof *tp * (size_t)calls);
    char err[256];
    pool_t *d = NULL;
    int rc = 0;
    for (int i = 0; i < calls && rc == 0; i++) {
        if (i % DRAWER_CALLS == 0) {
            pool_destroy(&d);
            if (!(d = drawer(url, swarm, bound))) {
                rc = -1;
                break;
            }
        }
        pool_entry_t *e = NULL;
        double t0 = bench_now();
        int n = pool_draw(d, "node0", K, &e, err, sizeof err);
        ts[i] = (bench_now() - t0) * 1e6;
        pool_entries_free(e, n);
        if (n != K) {
            fprintf(stderr, "bench_pool: draw gave %d: %s\n", n, n < 0 ? err : "");
            rc = -1;
        }
        t0 = bench_now();
        redisReply *r = redisCommand(ping, "PING");
        tp[i] = (bench_now() - t0) * 1e6;
        if (r) freeReplyObject(r);
    }
    pool_destroy(&d);
    *s50 = bench_percentile(ts, calls, 0.5);
    *s99 = bench_percentile(ts, calls, 0.99);
    *p50 = bench_percentile(tp, calls, 0.5);
    *p99 = bench_percentile(tp, calls, 0.99);
    free(ts);
    free(tp);
    return rc;
}

int main(void)
{
    int quick = bench_quick(), calls = quick ? 500 : 2000;
    redis_server_t rs;
    if (redis_server_start(&rs, 0) < 0) {
        fprintf(stderr, "bench_pool: %s\n", rs.why);
        return 1;
    }
    char err[256];
    struct timeval tv = {2, 0};
    redisContext *ping = redisConnectWithTimeout("127.0.0.1", rs.port, tv);
    long sizes[] = {10000, 1000000};
    const char *names[] = {"1e4", "1e6"};
    int rc = 0;
    for (int s = 0; s < 2 && rc == 0; s++) {
        char swarm[16];
        snprintf(swarm, sizeof swarm, "b%d", s);
        int bound = (int)(sizes[s] / NODES);
        pool_t *p = pool_new(rs.url, swarm, bound, err, sizeof err);
        double t0 = bench_now();
        if (!p || fill(p, sizes[s] / NODES) < 0) {
            rc = 1;
            pool_destroy(&p);
            break;
        }
        fprintf(stderr, "bench_pool: %ld entries in %.1f s\n", pool_size_total(p, NULL, 0), bench_now() - t0);
        double s50[ROUNDS], s99[ROUNDS], p50[ROUNDS], p99[ROUNDS];
        for (int r = 0; r < ROUNDS && rc == 0; r++)
            if (measure(rs.url, swarm, bound, ping, calls, &s50[r], &s99[r], &p50[r], &p99[r]) < 0) rc = 1;
        if (rc == 0) {
            char name[64];
            snprintf(name, sizeof name, "pool_draw_p50_%s", names[s]);
            bench_line(name, bench_median(s50, ROUNDS), "us", "redis PING p50", bench_median(p50, ROUNDS), "us");
            snprintf(name, sizeof name, "pool_draw_p99_%s", names[s]);
            bench_line(name, bench_median(s99, ROUNDS), "us", "redis PING p99", bench_median(p99, ROUNDS), "us");
        }
        pool_destroy(&p);
    }
    redisFree(ping);
    redis_server_cleanup(&rs);
    return rc;
}
