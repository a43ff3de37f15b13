/* The swarm's pool against a real redis-server on a free port: round
 * trip, a node never draws its own entries, the per-node bound, uniformity
 * over other nodes' entries (chi-square over the first draws of 500
 * pools), keys a hostile node could plant, node keys (first come, trust on
 * first use, each draw naming its node), freshness (pool_draw: only the
 * window, never an entry twice, memory bounded by the window, each entry's
 * age), and Redis going away and coming back. */
#include "check.h"
#include "util/identity.h"
#include "pool/pool.h"
#include "redis_server.h"

#include <czmq.h>
#include <hiredis/hiredis.h>

static redis_server_t rs;
static int swarm_no;

/* A pool on a fresh swarm prefix, so tests do not see each other's keys. */
static pool_t *fresh_pool(int max_per_node)
{
    char swarm[32], err[256];
    snprintf(swarm, sizeof swarm, "t%d", ++swarm_no);
    pool_t *p = pool_new(rs.url, swarm, max_per_node, err, sizeof err);
    if (!p) fprintf(stderr, "pool_new: %s\n", err);
    return p;
}

/* A second pool on the same swarm prefix as the last fresh_pool (another node's view). */
static pool_t *same_swarm(int max_per_node)
{
    char swarm[32], err[256];
    snprintf(swarm, sizeof swarm, "t%d", swarm_no);
    return pool_new(rs.url, swarm, max_per_node, err, sizeof err);
}

/* Publishes count records "node/i" for i in [first, first + count), in
 * the node's round. */
static int publish_round(pool_t *p, const char *node, uint64_t round, int first, int count)
{
    char rec[64], err[256];
    for (int i = first; i < first + count; i++) {
        int n = snprintf(rec, sizeof rec, "%s/%d", node, i);
        if (pool_publish(p, node, round, rec, (size_t)n, err, sizeof err) < 0) {
            fprintf(stderr, "pool_publish: %s\n", err);
            return -1;
        }
    }
    return 0;
}

/* the GETs the server has run, those of functions among them */
static long gets(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    long n = 0;
    if (r && r->str && strstr(r->str, "cmdstat_get:calls=")) n = atol(strstr(r->str, "cmdstat_get:calls=") + 18);
    if (r) freeReplyObject(r);
    return n;
}

static int publish(pool_t *p, const char *node, int first, int count)
{
    return publish_round(p, node, 0, first, count);
}

static void test_round_trip(void)
{
    pool_t *p = fresh_pool(100);
    EXPECT(publish(p, "a", 0, 3) == 0);
    EXPECT(pool_size_total(p, NULL, 0) == 3 && pool_size_node(p, "a", NULL, 0) == 3 &&
           pool_size_node(p, "b", NULL, 0) == 0);
    pool_entry_t *e = NULL;
    char err[256];
    int n = pool_draw(p, "b", 10, &e, err, sizeof err), seen[3] = {0};
    EXPECTF(n == 3, "drew %d: %s", n, n < 0 ? err : "");
    for (int i = 0; i < n; i++) {
        const char *rec = e[i].data;
        int no = e[i].len == 3 && memcmp(rec, "a/", 2) == 0 ? rec[2] - '0' : -1;
        EXPECTF(no >= 0 && no < 3 && !seen[no]++, "record %.*s", (int)e[i].len, rec);
        EXPECT(((uintptr_t)e[i].data & 15) == 0);
    }
    pool_entries_free(e, n);
    /* binary records come back byte for byte */
    uint8_t bin[1000];
    for (size_t i = 0; i < sizeof bin; i++) bin[i] = (uint8_t)(i * 7);
    pool_t *q = fresh_pool(100);
    EXPECT(pool_publish(q, "c", 0, bin, sizeof bin, err, sizeof err) == 0);
    n = pool_draw(q, "a", 1, &e, err, sizeof err);
    EXPECT(n == 1 && e[0].len == sizeof bin && memcmp(e[0].data, bin, sizeof bin) == 0);
    pool_entries_free(e, n);
    pool_destroy(&q);
    pool_destroy(&p);
    EXPECT(p == NULL);
}

/* What a node with write access to its own keys could plant: counters that
 * are not numbers or claim a million entries, an entry over the record
 * limit, a bound of its own choosing. */
static void test_hostile_keys(void)
{
    pool_t *p = fresh_pool(20);
    char err[256], key[64];
    EXPECT(publish(p, "honest", 0, 4) == 0);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    EXPECT(c && !c->err);
    snprintf(key, sizeof key, "t%d:n:junk:hi", swarm_no);
    freeReplyObject(redisCommand(c, "SET %s abc", key));
    snprintf(key, sizeof key, "t%d:n:liar:hi", swarm_no);
    freeReplyObject(redisCommand(c, "SET %s 1000000", key));
    snprintf(key, sizeof key, "t%d:nodes", swarm_no);
    freeReplyObject(redisCommand(c, "SADD %s junk liar", key));
    /* the liar weighs at most the bound (20) but holds nothing: its draws
     * are missing, none fails, and the honest node's entries all come out */
    pool_entry_t *e = NULL;
    int n = pool_draw(p, "me", 200, &e, err, sizeof err);
    EXPECTF(n == 4, "drew %d: %s", n, n < 0 ? err : "");
    for (int i = 0; i < n; i++) EXPECT(strcmp(e[i].node, "honest") == 0);
    pool_entries_free(e, n);
    EXPECT(pool_size_node(p, "junk", NULL, 0) == 0);
    /* an entry over the client's record limit stays in Redis */
    char big[2000];
    memset(big, 'x', sizeof big);
    pool_t *q = fresh_pool(10);
    EXPECT(pool_publish(q, "b", 0, big, sizeof big, err, sizeof err) == 0);
    pool_limit_record(q, 1000);
    n = pool_draw(q, "me", 3, &e, err, sizeof err);
    EXPECT(n == 1 && e[0].data == NULL && e[0].len == sizeof big);
    pool_entries_free(e, n);
    /* the swarm's bound, set by the operator, beats a publisher's own */
    snprintf(key, sizeof key, "t%d:max_per_node", swarm_no);
    freeReplyObject(redisCommand(c, "SET %s 5", key));
    char swarm[32];
    snprintf(swarm, sizeof swarm, "t%d", swarm_no);
    pool_t *greedy = pool_new(rs.url, swarm, 1 << 30, err, sizeof err);
    /* the bound is read at the first publish, not at the next: one round
     * trip a publish (GETs inside the publish function count too, the
     * same number each time) */
    long g0 = gets(c);
    EXPECT(greedy && publish(greedy, "g", 0, 1) == 0);
    long g1 = gets(c);
    EXPECT(publish(greedy, "g", 1, 1) == 0);
    long g2 = gets(c);
    EXPECTF((g1 - g0) - (g2 - g1) == 1, "GETs: %ld at the first publish, %ld at the second", g1 - g0, g2 - g1);
    EXPECT(publish(greedy, "g", 2, 18) == 0 && pool_size_node(greedy, "g", NULL, 0) == 5);
    /* a bound changed stands from its next read, within 5 s */
    freeReplyObject(redisCommand(c, "SET %s 3", key));
    EXPECT(publish(greedy, "g", 20, 1) == 0 && pool_size_node(greedy, "g", NULL, 0) == 5);
    sleep(5);
    EXPECT(publish(greedy, "g", 21, 1) == 0 && pool_size_node(greedy, "g", NULL, 0) == 3);
    pool_destroy(&greedy);
    redisFree(c);
    pool_destroy(&q);
    pool_destroy(&p);
}

static void test_never_own(void)
{
    pool_t *p = fresh_pool(1000);
    EXPECT(publish(p, "a", 0, 100) == 0);
    pool_entry_t *e = NULL;
    char err[256];
    EXPECT(pool_draw(p, "a", 20, &e, err, sizeof err) == 0);
    pool_entries_free(e, 0);
    EXPECT(publish(p, "b", 0, 5) == 0);
    long own = 0, total = 0;
    for (int round = 0; round < 50; round++) {
        pool_t *q = same_swarm(1000);
        pool_seed(q, (uint64_t)round + 1);
        int n = pool_draw(q, "a", 40, &e, err, sizeof err);
        EXPECT(n == 5);
        for (int i = 0; i < n; i++) own += e[i].len < 2 || memcmp(e[i].data, "b/", 2) != 0;
        total += n;
        pool_entries_free(e, n);
        pool_destroy(&q);
    }
    EXPECTF(own == 0, "%ld of %ld drawn records were the caller's own", own, total);
    EXPECT(pool_publish(p, "x:n:a", 0, "r", 1, err, sizeof err) == -1 && strstr(err, "node id"));
    pool_destroy(&p);
}

static void test_bound(void)
{
    pool_t *p = fresh_pool(10);
    EXPECT(publish(p, "a", 0, 25) == 0);
    EXPECT(publish(p, "b", 0, 4) == 0);
    EXPECT(pool_size_node(p, "a", NULL, 0) == 10 && pool_size_node(p, "b", NULL, 0) == 4 &&
           pool_size_total(p, NULL, 0) == 14);
    pool_entry_t *e = NULL;
    char err[256];
    int n = pool_draw(p, "b", 500, &e, err, sizeof err);
    EXPECT(n == 10);
    int old = 0;
    for (int i = 0; i < n; i++) {
        char s[16] = {0};
        memcpy(s, e[i].data, e[i].len < 15 ? e[i].len : 15);
        old += atoi(s + 2) < 15;
    }
    EXPECTF(old == 0, "%d draws returned entries that should have fallen out", old);
    pool_entries_free(e, n);
    pool_destroy(&p);

    /* one batch larger than the bound keeps its newest entries */
    p = fresh_pool(10);
    char recs[25][8];
    const void *ptrs[25];
    size_t lens[25];
    for (int i = 0; i < 25; i++) {
        lens[i] = (size_t)snprintf(recs[i], sizeof recs[i], "c/%d", i);
        ptrs[i] = recs[i];
    }
    EXPECT(pool_publish_many(p, "c", 0, ptrs, lens, 25, err, sizeof err) == 0);
    EXPECT(pool_size_node(p, "c", NULL, 0) == 10);
    n = pool_draw(p, "a", 200, &e, err, sizeof err);
    EXPECT(n == 10);
    old = 0;
    for (int i = 0; i < n; i++) {
        char s[16] = {0};
        memcpy(s, e[i].data, e[i].len < 15 ? e[i].len : 15);
        old += atoi(s + 2) < 15;
    }
    EXPECT(old == 0);
    pool_entries_free(e, n);
    pool_destroy(&p);
}

/* Nodes with 30, 70 and 20 entries besides the caller's 40: the first K
 * draws of a fresh pool take every one of the 120 others' entries equally
 * often (each with chance K / 120), over 500 pools. Picking a node
 * uniformly and then an entry would not pass. Draws without replacement
 * within a pool only lower the chi-square, so its limit still holds. */
static void test_uniform_chi_square(void)
{
    pool_t *p = fresh_pool(1000);
    const char *nodes[] = {"self", "x", "y", "z"};
    int counts[] = {40, 30, 70, 20};
    for (int i = 0; i < 4; i++) EXPECT(publish(p, nodes[i], 0, counts[i]) == 0);
    enum { CELLS = 120, POOLS = 500, K = 24 };
    long hist[CELLS] = {0}, own = 0, drawn = 0;
    char err[256];
    for (int i = 0; i < POOLS; i++) {
        pool_t *q = same_swarm(1000);
        pool_seed(q, 12345 + (uint64_t)i);
        pool_entry_t *e = NULL;
        int n = pool_draw(q, "self", K, &e, err, sizeof err);
        if (n != K) {
            EXPECTF(n == K, "pool_draw gave %d: %s", n, n < 0 ? err : "");
            pool_entries_free(e, n);
            pool_destroy(&q);
            break;
        }
        for (int j = 0; j < n; j++) {
            char s[16] = {0};
            memcpy(s, e[j].data, e[j].len < 15 ? e[j].len : 15);
            int cell = s[0] == 'x' ? 0 : s[0] == 'y' ? 30 : s[0] == 'z' ? 100 : -1;
            if (cell < 0) {
                own++;
                continue;
            }
            hist[cell + atoi(s + 2)]++;
            drawn++;
        }
        pool_entries_free(e, n);
        pool_destroy(&q);
    }
    EXPECT(own == 0 && drawn == POOLS * K);
    double expect = (double)drawn / CELLS, chi2 = 0;
    for (int i = 0; i < CELLS; i++) chi2 += (hist[i] - expect) * (hist[i] - expect) / expect;
    /* the chi-square quantile at p = 1e-6 (z = 4.753) for CELLS - 1 degrees
     * of freedom, by the Wilson-Hilferty approximation: about 207 */
    double df = CELLS - 1, z = 4.753;
    double limit = df * pow(1 - 2 / (9 * df) + z * sqrt(2 / (9 * df)), 3);
    EXPECTF(chi2 < limit, "chi-square %.1f over the p=1e-6 limit %.1f", chi2, limit);
    printf("  chi-square %.1f with %d degrees of freedom (limit %.1f at p = 1e-6)\n", chi2, CELLS - 1, limit);
    pool_destroy(&p);
}

/* Redis stops: calls fail at once with a line naming Redis; it comes back
 * on the same port: calls work again without a new pool. */
static void test_redis_restart(void)
{
    pool_t *p = fresh_pool(100);
    char err[256];
    EXPECT(publish(p, "a", 0, 2) == 0);
    redis_server_stop(&rs);
    int64_t t0 = zclock_mono();
    int rc = pool_publish(p, "a", 0, "r", 1, err, sizeof err);
    EXPECT(rc == -1);
    char where[64];
    snprintf(where, sizeof where, "redis 127.0.0.1:%d", rs.port);
    EXPECTF(strstr(err, where) != NULL, "error '%s' does not name %s", err, where);
    pool_entry_t *e = NULL;
    for (int i = 0; i < 20; i++) {
        EXPECT(pool_draw(p, "b", 1, &e, err, sizeof err) == -1);
        EXPECT(pool_size_total(p, NULL, 0) == -1);
    }
    EXPECTF(zclock_mono() - t0 < 3000, "41 calls to a stopped Redis took %d ms", (int)(zclock_mono() - t0));
    if (redis_server_start(&rs, rs.port) < 0) {
        EXPECTF(0, "restart: %s", rs.why);
        pool_destroy(&p);
        return;
    }
    int64_t t1 = zclock_mono();
    rc = -1;
    while (rc != 0 && zclock_mono() - t1 < 10000) {
        rc = pool_publish(p, "a", 0, "back", 4, err, sizeof err);
        if (rc != 0) zclock_sleep(100);
    }
    EXPECTF(rc == 0, "still failing 10 s after Redis came back: %s", err);
    int n = pool_draw(p, "b", 1, &e, err, sizeof err);
    EXPECT(n == 1 && e[0].len == 4 && memcmp(e[0].data, "back", 4) == 0);
    pool_entries_free(e, n);
    printf("  working again %.1f s after Redis restarted\n", (zclock_mono() - t1) / 1000.0);
    pool_destroy(&p);
}

/* Each draw names the node it is stored under; an id too long to be a
 * node's (planted with plain commands) is no one's, and never drawn. */
static void test_draw_names_node(void)
{
    pool_t *p = fresh_pool(100);
    EXPECT(publish(p, "a", 0, 3) == 0 && publish(p, "bb", 0, 3) == 0);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    char longid[80], key[160];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    snprintf(key, sizeof key, "t%d:n:%s:e", swarm_no, longid);
    freeReplyObject(redisCommand(c, "HSET %s 1 %s/0", key, longid));
    snprintf(key, sizeof key, "t%d:n:%s:hi", swarm_no, longid);
    freeReplyObject(redisCommand(c, "SET %s 1", key));
    snprintf(key, sizeof key, "t%d:nodes", swarm_no);
    freeReplyObject(redisCommand(c, "SADD %s %s", key, longid));
    redisFree(c);
    pool_entry_t *e = NULL;
    char err[256];
    int n = pool_draw(p, "me", 200, &e, err, sizeof err);
    EXPECTF(n == 6, "drew %d: %s", n, n < 0 ? err : "");
    int seen_a = 0, seen_b = 0, seen_long = 0, wrong = 0;
    for (int i = 0; i < n; i++) {
        const char *rec = e[i].data;
        if (!strcmp(e[i].node, "a")) seen_a++, wrong += memcmp(rec, "a/", 2) != 0;
        else if (!strcmp(e[i].node, "bb")) seen_b++, wrong += memcmp(rec, "bb/", 3) != 0;
        else if (!e[i].node[0]) seen_long++, wrong += rec[0] != 'x';
        else wrong++;
    }
    EXPECTF(seen_a == 3 && seen_b == 3 && !seen_long && !wrong, "a %d, bb %d, long id %d, wrong %d", seen_a, seen_b,
            seen_long, wrong);
    pool_entries_free(e, n);
    pool_destroy(&p);
}

/* First come: an id's key is set once; another key for it is refused with
 * the holder's fingerprint; a pool keeps the first key it saw for a node
 * even when the admin changes it in Redis. */
static void test_node_keys(void)
{
    pool_t *p = fresh_pool(10);
    char swarm[32], err[256], key[96], hex[65], fp[IDENTITY_FINGERPRINT_HEX + 1];
    snprintf(swarm, sizeof swarm, "t%d", swarm_no);
    identity_t *ka = identity_new(), *kb = identity_new();
    const uint8_t *a = identity_public(ka), *b = identity_public(kb);
    uint8_t got[32];
    EXPECT(pool_node_key(p, "a", got, err, sizeof err) == 0);
    EXPECTF(pool_register_key(p, "a", a, err, sizeof err) == 0, "%s", err);
    EXPECT(pool_register_key(p, "a", a, err, sizeof err) == 0);
    pool_t *q = pool_new(rs.url, swarm, 10, err, sizeof err);
    EXPECT(pool_register_key(q, "a", b, err, sizeof err) == -2);
    identity_fingerprint(a, fp, sizeof fp);
    EXPECTF(strstr(err, "node id a is registered to another key") && strstr(err, fp), "%s", err);
    EXPECT(pool_node_key(q, "a", got, err, sizeof err) == 1 && memcmp(got, a, 32) == 0);
    EXPECT(pool_register_key(q, "b", b, err, sizeof err) == 0);
    EXPECT(pool_node_key(p, "b", got, err, sizeof err) == 1 && memcmp(got, b, 32) == 0);
    EXPECT(pool_node_key(p, "a:b", got, err, sizeof err) == -1);
    /* the admin replaces a's key and plants junk for c; q saw a's key before */
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    identity_public_hex(b, hex, sizeof hex);
    snprintf(key, sizeof key, "%s:n:a:key", swarm);
    freeReplyObject(redisCommand(c, "SET %s %s", key, hex));
    snprintf(key, sizeof key, "%s:n:c:key", swarm);
    freeReplyObject(redisCommand(c, "SET %s not-a-key", key));
    redisReply *r = redisCommand(c, "FCALL sapo_register 1 %s:n:d:key %s", swarm, "abc");
    EXPECT(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "64 lowercase hex"));
    freeReplyObject(r);
    redisFree(c);
    EXPECT(pool_node_key(q, "a", got, err, sizeof err) == 1 && memcmp(got, a, 32) == 0);
    pool_t *fresh = pool_new(rs.url, swarm, 10, err, sizeof err);
    EXPECT(pool_node_key(fresh, "a", got, err, sizeof err) == 1 && memcmp(got, b, 32) == 0);
    EXPECT(pool_node_key(fresh, "c", got, err, sizeof err) == 0);
    EXPECT(pool_register_key(fresh, "c", a, err, sizeof err) == -2 && strstr(err, "not a key"));
    pool_destroy(&fresh);
    pool_destroy(&q);
    pool_destroy(&p);
    identity_destroy(&ka);
    identity_destroy(&kb);
}

static void test_bad_url(void)
{
    char err[256];
    EXPECT(pool_new("http://x", "s", 10, err, sizeof err) == NULL && strstr(err, "http://x"));
    EXPECT(pool_new("redis://h:99999", "s", 10, err, sizeof err) == NULL);
    /* nothing listens on this port: the first call fails, it does not hang */
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", redis_server_free_port());
    pool_t *p = pool_new(url, "s", 10, err, sizeof err);
    EXPECT(p && pool_publish(p, "a", 0, "r", 1, err, sizeof err) == -1 && strstr(err, "redis 127.0.0.1"));
    pool_destroy(&p);
}

/* A connect loads the pool's functions where the server holds another
 * library of the name (an older or newer sapo's): this one's replace it */
static void test_library_replaced(void)
{
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    redisReply *r =
        redisCommand(c, "FUNCTION LOAD REPLACE %s",
                     "#!lua name=sapo_pool\nredis.register_function('sapo_other', function() return 1 end)");
    EXPECTF(r && r->type == REDIS_REPLY_STRING, "loading another library: %s", r && r->str ? r->str : "no reply");
    freeReplyObject(r);
    pool_t *p = fresh_pool(10);
    EXPECT(pool_size_total(p, NULL, 0) == 0);
    r = redisCommand(c, "FCALL sapo_other 0");
    EXPECTF(r && r->type == REDIS_REPLY_ERROR, "the other library's function still there");
    freeReplyObject(r);
    char err[256];
    EXPECTF(pool_publish(p, "a", 1, "r", 1, err, sizeof err) == 0, "%s", err);
    pool_destroy(&p);
    redisFree(c);
}

/* the number i of a record "node/i" */
static int record_no(const pool_entry_t *e)
{
    char s[32] = {0};
    memcpy(s, e->data, e->len < 31 ? e->len : 31);
    const char *slash = strchr(s, '/');
    return slash ? atoi(slash + 1) : -1;
}

/* nodes n0 .. n<count - 1>, each with its one record "n<i>/<i>" */
static int publish_nodes(pool_t *p, int count)
{
    char node[16];
    for (int i = 0; i < count; i++) {
        snprintf(node, sizeof node, "n%d", i);
        if (publish(p, node, i, 1) != 0) return -1;
    }
    return 0;
}

/* One draw that meets more new nodes than the pool has room for (its
 * peers are 16 at first): every node's entry comes back once. The load
 * generator found draws over 20 nodes reading peers moved by the growth. */
static void test_draw_many_nodes(void)
{
    pool_t *p = fresh_pool(1000);
    char err[256];
    EXPECT(publish_nodes(p, 40) == 0);
    pool_t *q = same_swarm(1000);
    pool_window(q, 2, 0);
    pool_entry_t *e = NULL;
    int n = pool_draw(q, "n0", 100, &e, err, sizeof err);
    EXPECTF(n == 39, "drew %d of 39: %s", n, n < 0 ? err : "");
    int seen[40] = {0};
    for (int i = 0; i < n; i++) {
        int no = atoi(e[i].node + 1);
        EXPECTF(no == record_no(&e[i]) && no > 0 && no < 40 && !seen[no]++, "%s/%d", e[i].node, record_no(&e[i]));
    }
    pool_entries_free(e, n);
    pool_destroy(&q);
    pool_destroy(&p);
}

/* A swarm of 200 nodes of an entry each, more than a draw reads whole: 30
 * draws of 4 bring 4 entries each, never one twice, from more nodes than
 * one draw reads (its 32 are picked anew each time) */
static void test_draw_large_swarm(void)
{
    pool_t *p = fresh_pool(1000);
    char err[256];
    EXPECT(publish_nodes(p, 200) == 0);
    pool_t *q = same_swarm(1000);
    pool_window(q, 2, 0);
    int seen[200] = {0}, nodes = 0, full = 0;
    for (int d = 0; d < 30; d++) {
        pool_entry_t *e = NULL;
        int n = pool_draw(q, "n0", 4, &e, err, sizeof err);
        full += n == 4;
        for (int i = 0; i < n; i++) {
            int no = atoi(e[i].node + 1);
            EXPECTF(no > 0 && no < 200 && no == record_no(&e[i]) && !seen[no]++, "%s/%d", e[i].node, record_no(&e[i]));
            nodes++;
        }
        pool_entries_free(e, n);
    }
    EXPECTF(full == 30 && nodes == 120, "%d full draws, %d entries", full, nodes);
    pool_destroy(&q);
    pool_destroy(&p);
}

/* A draw reads a node's range from the summary its publishes keep
 * (S:n:N:s). The same fresh entries come back from a node whose summary
 * is gone or junk (read from its counters and meta instead), and the
 * summary says what the publishes left: rounds 2 and 3 of three, each
 * round's first seq. */
static void test_draw_summary(void)
{
    pool_t *pub = fresh_pool(1000);
    pool_window(pub, 2, 0);
    for (int r = 1; r <= 3; r++) EXPECT(publish_round(pub, "a", (uint64_t)r, 10 * r, 3) == 0);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    char key[64], err[256];
    snprintf(key, sizeof key, "t%d:n:a:s", swarm_no);
    redisReply *r = redisCommand(c, "GET %s", key);
    unsigned long long lo = 0, hi = 0, r1 = 0, s1 = 0, t1 = 0, r2 = 0, s2 = 0, t2 = 0;
    EXPECTF(r && r->type == REDIS_REPLY_STRING &&
                sscanf(r->str, "%llu %llu %llu %llu %llu %llu %llu %llu", &lo, &hi, &r1, &s1, &t1, &r2, &s2, &t2) ==
                    8 &&
                lo == 4 && hi == 9 && r1 == 2 && s1 == 4 && r2 == 3 && s2 == 7 && t1 <= t2 && t1 > 0,
            "summary '%s'", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    /* the same summary in a form only Lua's tonumber reads ("4.0"):
     * pool_fresh.c leaves such a node to sapo_fresh */
    char lua_form[160];
    snprintf(lua_form, sizeof lua_form, "4.0 9 2 4 %llu 3 7 %llu", t1, t2);
    freeReplyObject(r);
    /* a node of an older sapo calls sapo_fresh without naming nodes */
    r = redisCommand(c, "FCALL_RO sapo_fresh 1 t%d: me 1000 2 0 32", swarm_no);
    EXPECTF(r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[0]->integer == 0 &&
                strcmp(r->element[1]->str, "a") == 0 && r->element[2]->integer == 4 && r->element[3]->integer == 9,
            "sapo_fresh without nodes answered %s", r && r->type == REDIS_REPLY_ERROR ? r->str : "another list");
    freeReplyObject(r);
    /* a node of a sapo from before every key was declared names the
     * node's base alone: on one Redis its calls run as before */
    r = redisCommand(c, "FCALL_RO sapo_range 1 t%d:n:a: 1000 2 0", swarm_no);
    EXPECTF(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4 && r->element[1]->integer == 4 &&
                r->element[2]->integer == 9,
            "sapo_range of one key answered %s", r && r->type == REDIS_REPLY_ERROR ? r->str : "another list");
    freeReplyObject(r);
    r = redisCommand(c, "FCALL sapo_publish_node 1 t%d:n:old: t%d:max_per_node 1000 0 0 1 rec", swarm_no, swarm_no);
    EXPECTF(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1, "sapo_publish_node of one key answered %s",
            r && r->type == REDIS_REPLY_ERROR ? r->str : "another reply");
    freeReplyObject(r);
    /* keys that are not one node's five, in their order, are refused */
    r = redisCommand(c,
                     "FCALL sapo_publish_node 5 t%d:n:old:hi t%d:n:a:lo t%d:n:old:e t%d:n:old:m t%d:n:old:s "
                     "0 1000 0 0 1 rec",
                     swarm_no, swarm_no, swarm_no, swarm_no, swarm_no);
    EXPECTF(r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "keys must be a node's"),
            "another node's key among five: %s", r && r->type == REDIS_REPLY_ERROR ? r->str : "accepted");
    freeReplyObject(r);
    /* each summary as SET's value (one argument), or none */
    const char *states[] = {lua_form, NULL, "junk", "9 4 1 1 1"};
    for (int k = 0; k < 4; k++) {
        r = states[k] ? redisCommand(c, "SET %s %s", key, states[k]) : redisCommand(c, "DEL %s", key);
        EXPECTF(r && r->type != REDIS_REPLY_ERROR, "setting the summary to '%s'", states[k] ? states[k] : "none");
        freeReplyObject(r);
        pool_t *me = same_swarm(1000);
        pool_window(me, 2, 0);
        pool_entry_t *e = NULL;
        int n = pool_draw(me, "me", 10, &e, err, sizeof err), fresh = 0;
        for (int i = 0; i < n; i++) fresh += record_no(&e[i]) >= 20 && record_no(&e[i]) % 10 < 3;
        EXPECTF(n == 6 && fresh == 6, "summary '%s': drew %d, %d of rounds 2 and 3", states[k] ? states[k] : "none", n,
                fresh);
        pool_entries_free(e, n);
        pool_destroy(&me);
    }
    redisFree(c);
    pool_destroy(&pub);
}

/* A window of 2 rounds: the publisher keeps its last two rounds, a drawer
 * gets each of them once and nothing older, each with its age; a drawer
 * with a window of 1 gets only the newest round. */
static void test_draw_window(void)
{
    pool_t *pub = fresh_pool(1000), *me = same_swarm(1000), *narrow = same_swarm(1000);
    pool_window(pub, 2, 0);
    pool_window(me, 2, 0);
    pool_window(narrow, 1, 0);
    /* round r holds records 10r .. 10r + 2 */
    for (int r = 1; r <= 3; r++) EXPECT(publish_round(pub, "a", (uint64_t)r, 10 * r, 3) == 0);
    EXPECTF(pool_size_node(pub, "a", NULL, 0) == 6, "kept %ld entries, not rounds 2 and 3's 6",
            pool_size_node(pub, "a", NULL, 0));
    pool_entry_t *e = NULL;
    char err[256];
    int n = pool_draw(me, "me", 10, &e, err, sizeof err);
    EXPECTF(n == 6, "drew %d: %s", n, n < 0 ? err : "");
    int seen[40] = {0};
    for (int i = 0; i < n; i++) {
        int no = record_no(&e[i]);
        EXPECTF(no >= 20 && no < 33 && no % 10 < 3, "drew record %d", no);
        if (no < 0 || no >= 40) continue;
        EXPECTF(!seen[no]++, "record %d drawn twice", no);
        EXPECT(e[i].round == (uint64_t)(no / 10) && e[i].age_rounds == 3 - e[i].round);
        EXPECTF(e[i].age_ms < 5000, "age %llu ms", (unsigned long long)e[i].age_ms);
        EXPECT(strcmp(e[i].node, "a") == 0);
    }
    pool_entries_free(e, n);
    /* everything fresh was handed out */
    n = pool_draw(me, "me", 10, &e, err, sizeof err);
    EXPECTF(n == 0, "drew %d more", n);
    pool_entries_free(e, n);
    /* round 4 comes: only its entries are new (round 3's were drawn,
     * round 2's are past the window) */
    EXPECT(publish_round(pub, "a", 4, 40, 2) == 0);
    n = pool_draw(me, "me", 10, &e, err, sizeof err);
    EXPECTF(n == 2, "drew %d after round 4", n);
    for (int i = 0; i < n; i++) EXPECT(record_no(&e[i]) >= 40 && e[i].age_rounds == 0);
    pool_entries_free(e, n);
    n = pool_draw(narrow, "me", 10, &e, err, sizeof err);
    EXPECTF(n == 2, "a window of 1 drew %d", n);
    for (int i = 0; i < n; i++) EXPECT(record_no(&e[i]) >= 40);
    pool_entries_free(e, n);
    /* two nodes: draws take from both, each entry once */
    EXPECT(publish_round(pub, "b", 7, 70, 3) == 0);
    n = pool_draw(me, "me", 10, &e, err, sizeof err);
    EXPECTF(n == 3, "drew %d of b's 3", n);
    pool_entries_free(e, n);
    pool_destroy(&narrow);
    pool_destroy(&me);
    pool_destroy(&pub);
}

/* A node publishing round after round keeps about window x groups a round
 * in Redis, not the per-node bound. */
static void test_draw_memory_bounded(void)
{
    pool_t *p = fresh_pool(2000);
    pool_window(p, 2, 0);
    char key[64];
    for (int r = 0; r < 200; r++) EXPECT(publish_round(p, "a", (uint64_t)r, 4 * r, 4) == 0);
    EXPECTF(pool_size_node(p, "a", NULL, 0) == 8, "a holds %ld entries", pool_size_node(p, "a", NULL, 0));
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    EXPECT(c && !c->err);
    snprintf(key, sizeof key, "t%d:n:a:e", swarm_no);
    redisReply *r = redisCommand(c, "HLEN %s", key);
    EXPECT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 8);
    freeReplyObject(r);
    snprintf(key, sizeof key, "t%d:n:a:m", swarm_no);
    r = redisCommand(c, "HLEN %s", key);
    EXPECT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 8);
    freeReplyObject(r);
    redisFree(c);
    pool_destroy(&p);
}

/* A window in seconds: nothing older is drawn, and a node that stops
 * publishing leaves no entries behind. */
static void test_draw_seconds(void)
{
    pool_t *p = fresh_pool(100), *me = same_swarm(100);
    pool_window(p, 0, 0.4);
    pool_window(me, 0, 0.4);
    EXPECT(publish_round(p, "a", 1, 0, 3) == 0);
    pool_entry_t *e = NULL;
    char err[256], key[64];
    int n = pool_draw(me, "me", 1, &e, err, sizeof err);
    EXPECTF(n == 1 && e[0].age_ms < 400, "drew %d", n);
    pool_entries_free(e, n);
    zclock_sleep(600);
    n = pool_draw(me, "me", 5, &e, err, sizeof err);
    EXPECTF(n == 0, "drew %d entries older than the window", n);
    pool_entries_free(e, n);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    snprintf(key, sizeof key, "t%d:n:a:e", swarm_no);
    redisReply *r = redisCommand(c, "EXISTS %s", key);
    EXPECT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    redisFree(c);
    pool_destroy(&me);
    pool_destroy(&p);
}

/* The swarm-wide memory cap: a Redis with maxmemory 8 MB over what it
 * holds and maxmemory-policy volatile-ttl takes 40 nodes x 4 entries of
 * 100 KB (16 MB) without a failed publish, stays under its cap, keeps
 * every node's identity key, and the newest publisher's entries; the
 * oldest publishers' windows are what went. */
static void test_memory_cap(void)
{
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    redisReply *r = redisCommand(c, "INFO memory");
    long long used = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "used_memory:")
                         ? atoll(strstr(r->str, "used_memory:") + 12)
                         : 0;
    freeReplyObject(r);
    long long cap = used + (8ll << 20);
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory %lld", cap));
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory-policy volatile-ttl"));
    pool_t *p = fresh_pool(100);
    char *rec = calloc(1, 100000), node[16], err[256], key[64];
    uint8_t pub[32] = {1};
    int failed = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(node, sizeof node, "m%d", i);
        pub[1] = (uint8_t)i;
        EXPECTF(pool_register_key(p, node, pub, err, sizeof err) == 0, "%s", err);
        for (int j = 0; j < 4; j++) failed += pool_publish(p, node, 1, rec, 100000, err, sizeof err) != 0;
    }
    EXPECTF(failed == 0, "%d publishes failed: %s", failed, err);
    r = redisCommand(c, "INFO memory");
    long long now = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "used_memory:")
                        ? atoll(strstr(r->str, "used_memory:") + 12)
                        : 0;
    freeReplyObject(r);
    EXPECTF(now <= cap, "used_memory %lld over the cap %lld", now, cap);
    int keys = 0, windows_first_half = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "t%d:n:m%d:key", swarm_no, i);
        r = redisCommand(c, "EXISTS %s", key);
        keys += r && r->integer == 1;
        freeReplyObject(r);
        snprintf(key, sizeof key, "t%d:n:m%d:e", swarm_no, i);
        r = redisCommand(c, "EXISTS %s", key);
        windows_first_half += i < 20 && r && r->integer == 1;
        freeReplyObject(r);
    }
    EXPECTF(keys == 40, "%d of 40 identity keys left", keys);
    EXPECTF(windows_first_half < 20, "all 20 first publishers kept their entries");
    EXPECT(pool_size_node(p, "m39", NULL, 0) == 4);
    snprintf(key, sizeof key, "t%d:n:m39:e", swarm_no);
    r = redisCommand(c, "HLEN %s", key);
    EXPECTF(r && r->integer == 4, "the newest publisher holds %lld entries", r ? r->integer : -1);
    freeReplyObject(r);
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory 0"));
    freeReplyObject(redisCommand(c, "CONFIG SET maxmemory-policy noeviction"));
    redisFree(c);
    free(rec);
    pool_destroy(&p);
}

/* Without a window: every live entry, each once, and the first draw of a
 * fresh pool is uniform over entries (a: 1 of 4 entries, within 4.5 sigma
 * over 400 pools). Entries whose meta is missing or junk are not fresh
 * under a window. */
static void test_draw_once_uniform(void)
{
    pool_t *p = fresh_pool(1000);
    EXPECT(publish(p, "a", 0, 1) == 0 && publish(p, "b", 0, 3) == 0 && publish(p, "c", 0, 46) == 0);
    pool_entry_t *e = NULL;
    char err[256];
    int seen[50] = {0}, total = 0;
    for (int i = 0; i < 60; i++) {
        int n = pool_draw(p, "c", 1, &e, err, sizeof err);
        for (int j = 0; j < n; j++) {
            int no = record_no(&e[j]) + (e[j].node[0] == 'b' ? 1 : 0);
            EXPECTF(no >= 0 && no < 4 && !seen[no]++, "drew %s/%d again", e[j].node, record_no(&e[j]));
            total++;
        }
        pool_entries_free(e, n);
    }
    EXPECTF(total == 4, "drew %d of a's and b's 4 entries", total);
    int a = 0;
    for (int i = 0; i < 400; i++) {
        pool_t *q = same_swarm(1000);
        pool_seed(q, (uint64_t)i + 1);
        int n = pool_draw(q, "c", 1, &e, err, sizeof err);
        a += n == 1 && e[0].node[0] == 'a';
        pool_entries_free(e, n);
        pool_destroy(&q);
    }
    EXPECTF(a >= 61 && a <= 139, "a first in %d of 400 draws (expected 100)", a);
    /* meta planted by hand: junk, or none */
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    char key[64];
    snprintf(key, sizeof key, "t%d:n:a:m", swarm_no);
    freeReplyObject(redisCommand(c, "HSET %s 1 junk", key));
    snprintf(key, sizeof key, "t%d:n:b:m", swarm_no);
    freeReplyObject(redisCommand(c, "DEL %s", key));
    redisFree(c);
    pool_t *q = same_swarm(1000);
    pool_window(q, 5, 0);
    int n = pool_draw(q, "c", 10, &e, err, sizeof err);
    EXPECTF(n == 0, "drew %d entries without good meta", n);
    pool_entries_free(e, n);
    pool_destroy(&q);
    pool_destroy(&p);
}

/* The useful strategy, by hand: a peer seen 3 times, informative twice,
 * has decayed counts informative 0.9 + 1 = 1.9 (the second and third; the
 * first was not), seen 0.81 + 0.9 + 1 = 2.71, weight 2.9 / 4.71 = 0.6157;
 * an unseen peer 0.5; uniform: 1. A peer never informative in 5 groups
 * weighs 1 / (2 + 1 + 0.9 + 0.81 + 0.729 + 0.6561) = 0.16407: with one
 * entry each, it draws first with probability 0.16407 / 0.66407 = 0.247
 * against an unseen peer (400 pools, within 4.5 sigma; uniform would be
 * 0.5). */
static void test_draw_useful(void)
{
    pool_t *p = fresh_pool(100);
    EXPECT(publish(p, "a", 0, 1) == 0 && publish(p, "b", 0, 1) == 0);
    EXPECT(pool_peer_weight(p, "a") == 1.0);
    pool_strategy(p, POOL_USEFUL);
    EXPECT(pool_feedback(p, "a", false) == 0 && pool_feedback(p, "a", true) == 0 && pool_feedback(p, "a", true) == 0);
    double w = pool_peer_weight(p, "a");
    EXPECTF(fabs(w - 2.9 / 4.71) < 1e-12, "weight %.6f, not 2.9 / 4.71", w);
    EXPECT(pool_peer_weight(p, "b") == 0.5);
    EXPECT(pool_feedback(p, "x:n:a", true) == -1);
    pool_strategy(p, POOL_UNIFORM);
    EXPECT(pool_peer_weight(p, "a") == 1.0);
    int a = 0;
    char err[256];
    for (int i = 0; i < 400; i++) {
        pool_t *q = same_swarm(100);
        pool_seed(q, (uint64_t)i + 7);
        pool_strategy(q, POOL_USEFUL);
        for (int k = 0; k < 5; k++) pool_feedback(q, "a", false);
        pool_entry_t *e = NULL;
        int n = pool_draw(q, "me", 1, &e, err, sizeof err);
        a += n == 1 && e[0].node[0] == 'a';
        pool_entries_free(e, n);
        /* the second draw takes the other one */
        n = pool_draw(q, "me", 2, &e, err, sizeof err);
        EXPECT(n == 1);
        pool_entries_free(e, n);
        pool_destroy(&q);
    }
    EXPECT(fabs(pool_peer_weight(p, "a") - 1.0) < 1e-12);
    double pa = 0.16407 / 0.66407, sd = sqrt(400 * pa * (1 - pa));
    EXPECTF(fabs(a - 400 * pa) < 4.5 * sd, "a first in %d of 400 draws (expected %.0f)", a, 400 * pa);
    pool_destroy(&p);
}

/* What one node can plant in its own keys (with its ACL user) must not
 * starve or stop anyone's draws: a counter claiming 2^52 entries, counters
 * and entries of the wrong type, meta without entries; nor can a bound of
 * 0 stop publishing. Each is skipped and counted (pool_health). */
static void test_draw_hostile(void)
{
    pool_t *p = fresh_pool(100);
    pool_window(p, 2, 0);
    EXPECT(publish_round(p, "honest", 5, 0, 4) == 0);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    EXPECT(c && !c->err);
    const char *plant[][5] = {
        {"SET %s:n:%s:hi %s", "huge", "4503599627370496", NULL}, {"SET %s:n:%s:lo %s", "huge", "1", NULL},
        {"HSET %s:n:%s:hi x %s", "hashhi", "1", NULL},           {"SET %s:n:%s:hi %s", "stringe", "3", NULL},
        {"SET %s:n:%s:e %s", "stringe", "junk", NULL},           {"SET %s:n:%s:hi %s", "ghost", "3", NULL},
    };
    char sw[32];
    snprintf(sw, sizeof sw, "t%d", swarm_no);
    for (size_t i = 0; i < sizeof plant / sizeof plant[0]; i++) {
        redisReply *r = redisCommand(c, plant[i][0], sw, plant[i][1], plant[i][2]);
        freeReplyObject(r);
    }
    /* meta that claims fresh entries, for entries that are not there */
    for (int seq = 1; seq <= 3; seq++) {
        freeReplyObject(redisCommand(c, "HSET %s:n:ghost:m %d 5:%lld", sw, seq, (long long)time(NULL) * 1000));
        freeReplyObject(redisCommand(c, "HSET %s:n:stringe:m %d 5:%lld", sw, seq, (long long)time(NULL) * 1000));
    }
    freeReplyObject(redisCommand(c, "SADD %s:nodes huge hashhi stringe ghost", sw));
    pool_entry_t *e = NULL;
    char err[256];
    int n = pool_draw(p, "me", 20, &e, err, sizeof err);
    EXPECTF(n == 4, "drew %d (the honest node's 4): %s", n, n < 0 ? err : "");
    for (int i = 0; i < n; i++) EXPECT(strcmp(e[i].node, "honest") == 0);
    pool_entries_free(e, n);
    long missing, bad;
    pool_health(p, &missing, &bad);
    EXPECTF(bad == 1, "%ld nodes counted bad (hashhi)", bad);
    EXPECTF(missing == 6, "%ld missing entries counted (ghost's and stringe's 3 each)", missing);
    /* without a window the huge node weighs its 100 (the bound), all missing */
    pool_t *q = same_swarm(100);
    n = pool_draw(q, "me", 200, &e, err, sizeof err);
    EXPECTF(n == 4, "drew %d without a window: %s", n, n < 0 ? err : "");
    pool_entries_free(e, n);
    pool_health(q, &missing, &bad);
    EXPECTF(missing == 106, "%ld missing", missing);
    /* sizing survives the wrong types too */
    EXPECT(pool_size_total(q, NULL, 0) >= 4);
    /* an operator's bound of 0 (or junk) is ignored, not a stop */
    freeReplyObject(redisCommand(c, "SET %s:max_per_node 0", sw));
    EXPECT(publish_round(p, "honest", 6, 10, 1) == 0);
    freeReplyObject(redisCommand(c, "SET %s:max_per_node junk", sw));
    EXPECT(publish_round(p, "honest", 6, 11, 1) == 0);
    redisFree(c);
    pool_destroy(&q);
    pool_destroy(&p);
}

/* pool.lua's bound on a record is the entry limit of pool.c: a record of
 * REC_MAX_BYTES and a signature goes in, one byte more does not. */
static void test_record_limit(void)
{
    pool_t *p = fresh_pool(10);
    size_t most = 16777280;
    char *big = calloc(most + 1, 1), err[256];
    EXPECT(big != NULL);
    EXPECT(pool_publish(p, "a", 0, big, most, err, sizeof err) == 0);
    EXPECTF(pool_publish(p, "a", 0, big, most + 1, err, sizeof err) == -1 && strstr(err, "record over 16777280 bytes"),
            "%s", err);
    free(big);
    pool_destroy(&p);
}

/* a node's stage output for tests: "<node>@<round>/<stage>" and a zero
 * byte, so a copy cut at the first zero would not pass */
static size_t stage_rec(char *rec, size_t cap, const char *node, uint64_t round, int stage, const char *tag)
{
    int n = snprintf(rec, cap, "%s@%llu/%d%s", node, (unsigned long long)round, stage, tag);
    rec[n] = '\0';
    return (size_t)n + 1;
}

/* the stage outputs of round 5, stage 2 that a read returned, by node
 * name: each must be that node's own record, once */
static int stage_check(const pool_entry_t *e, int n, const char *tag, int *seen_a, int *seen_b, int *seen_c)
{
    int wrong = 0;
    char want[64];
    for (int i = 0; i < n; i++) {
        size_t len = stage_rec(want, sizeof want, e[i].node, 5, 2, tag);
        int *seen = !strcmp(e[i].node, "a")   ? seen_a
                    : !strcmp(e[i].node, "b") ? seen_b
                    : !strcmp(e[i].node, "c") ? seen_c
                                              : NULL;
        if (!seen || e[i].len != len || memcmp(e[i].data, want, len) != 0 || ((uintptr_t)e[i].data & 15) != 0) {
            fprintf(stderr, "  read %s: %zu bytes '%.*s'\n", e[i].node, e[i].len, (int)e[i].len, (char *)e[i].data);
            wrong++;
            continue;
        }
        (*seen)++;
    }
    return wrong;
}

/* Three nodes publish their output of round 5, stage 2: a reads b's and
 * c's, never its own, byte for byte with their nodes, having asked both;
 * another stage or round holds nothing (both peers asked all the same); publishing again replaces a node's own output,
 * and each output expires after pool_stage_ttl (600 s unless set). */
static void test_stage_round_trip(void)
{
    pool_t *a = fresh_pool(10), *b = same_swarm(10), *c = same_swarm(10);
    char rec[64], err[256];
    pool_t *nodes[] = {a, b, c};
    const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        size_t len = stage_rec(rec, sizeof rec, names[i], 5, 2, "");
        EXPECTF(pool_stage_publish(nodes[i], names[i], 5, 2, rec, len, err, sizeof err) == 0, "%s", err);
    }
    pool_entry_t *e = NULL;
    int n = pool_stage_read(a, "a", 5, 2, 10, &e, err, sizeof err);
    int sa = 0, sb = 0, sc = 0;
    EXPECTF(n == 2, "read %d: %s", n, n < 0 ? err : "");
    EXPECT(pool_stage_asked(a) == 2); /* b and c: a's peers */
    EXPECT(stage_check(e, n, "", &sa, &sb, &sc) == 0 && sa == 0 && sb == 1 && sc == 1);
    for (int i = 0; i < n; i++) EXPECT(e[i].seq == 0 && e[i].round == 0 && e[i].age_ms == 0);
    pool_entries_free(e, n);
    /* no exclusion: all three */
    n = pool_stage_read(b, NULL, 5, 2, 10, &e, err, sizeof err);
    sa = sb = sc = 0;
    EXPECTF(n == 3 && stage_check(e, n, "", &sa, &sb, &sc) == 0 && sa == 1 && sb == 1 && sc == 1, "read %d", n);
    pool_entries_free(e, n);
    /* the neighbouring stages and rounds hold nothing */
    const int other[][2] = {{5, 1}, {5, 3}, {4, 2}, {6, 2}};
    for (int k = 0; k < 4; k++) {
        n = pool_stage_read(a, "a", (uint64_t)other[k][0], other[k][1], 10, &e, err, sizeof err);
        EXPECTF(n == 0 && e == NULL, "round %d stage %d: read %d", other[k][0], other[k][1], n);
        /* both peers were asked: their outputs of this stage are not in yet */
        EXPECT(pool_stage_asked(a) == 2);
        pool_entries_free(e, n);
    }
    /* b publishes again: its new output replaces the old one */
    size_t len = stage_rec(rec, sizeof rec, "b", 5, 2, " again");
    EXPECT(pool_stage_publish(b, "b", 5, 2, rec, len, err, sizeof err) == 0);
    n = pool_stage_read(c, "c", 5, 2, 10, &e, err, sizeof err);
    EXPECTF(n == 2, "read %d after b published again", n);
    for (int i = 0; i < n; i++) {
        sa = sb = sc = 0;
        EXPECTF(stage_check(&e[i], 1, !strcmp(e[i].node, "b") ? " again" : "", &sa, &sb, &sc) == 0 && sa + sb == 1,
                "%s", e[i].node);
    }
    pool_entries_free(e, n);
    /* one key per (node, round, stage), each with the default expiry */
    redisContext *rc = redisConnect("127.0.0.1", rs.port);
    redisReply *r = redisCommand(rc, "KEYS t%d:n:b:*", swarm_no);
    EXPECTF(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && strstr(r->element[0]->str, ":n:b:stage:5:2"),
            "b's keys: %zu", r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0);
    freeReplyObject(r);
    r = redisCommand(rc, "PTTL t%d:n:b:stage:5:2", swarm_no);
    EXPECTF(r && r->type == REDIS_REPLY_INTEGER && r->integer > 590000 && r->integer <= 600000, "PTTL %lld",
            r ? r->integer : -9);
    freeReplyObject(r);
    r = redisCommand(rc, "SISMEMBER t%d:nodes c", swarm_no);
    EXPECT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    redisFree(rc);
    pool_destroy(&c);
    pool_destroy(&b);
    pool_destroy(&a);
}

/* Twelve nodes have an output: a read of max 4 brings exactly 4 distinct
 * other nodes, and reads seeded apart bring different ones. A swarm of
 * 200 nodes, more than a read asks: a read of 3 still brings 3. */
static void test_stage_max(void)
{
    pool_t *p = fresh_pool(10);
    char node[16], rec[64], err[256];
    for (int i = 0; i < 12; i++) {
        snprintf(node, sizeof node, "n%d", i);
        size_t len = stage_rec(rec, sizeof rec, node, 5, 2, "");
        EXPECT(pool_stage_publish(p, node, 5, 2, rec, len, err, sizeof err) == 0);
    }
    int ever[12] = {0};
    for (int s = 0; s < 8; s++) {
        pool_seed(p, (uint64_t)s + 1);
        pool_entry_t *e = NULL;
        int n = pool_stage_read(p, "n0", 5, 2, 4, &e, err, sizeof err), seen[12] = {0}, wrong = 0;
        for (int i = 0; i < n; i++) {
            int no = atoi(e[i].node + 1);
            size_t len = stage_rec(rec, sizeof rec, e[i].node, 5, 2, "");
            wrong += no < 1 || no > 11 || seen[no]++ || e[i].len != len || memcmp(e[i].data, rec, len) != 0;
            ever[no < 12 && no >= 0 ? no : 0]++;
        }
        EXPECTF(n == 4 && wrong == 0, "read %d, %d wrong", n, wrong);
        pool_entries_free(e, n);
    }
    int nodes = 0;
    for (int i = 1; i < 12; i++) nodes += ever[i] > 0;
    EXPECTF(ever[0] == 0 && nodes > 4, "8 reads of 4 brought %d nodes, n0 %d times", nodes, ever[0]);
    pool_entry_t *e = NULL;
    EXPECT(pool_stage_read(p, "n0", 5, 2, 0, &e, err, sizeof err) == 0 && e == NULL);
    pool_destroy(&p);

    p = fresh_pool(10);
    for (int i = 0; i < 200; i++) {
        snprintf(node, sizeof node, "n%d", i);
        size_t len = stage_rec(rec, sizeof rec, node, 7, 1, "");
        EXPECT(pool_stage_publish(p, node, 7, 1, rec, len, err, sizeof err) == 0);
    }
    int n = pool_stage_read(p, "n0", 7, 1, 3, &e, err, sizeof err);
    EXPECTF(n == 3, "read %d of 200 nodes' outputs", n);
    for (int i = 0; i < n; i++) EXPECT(strcmp(e[i].node, "n0") != 0);
    pool_entries_free(e, n);
    pool_destroy(&p);
}

/* pool_stage_ttl: an output lives that long, then nothing is read and
 * nothing is left in Redis. */
static void test_stage_ttl(void)
{
    pool_t *p = fresh_pool(10), *me = same_swarm(10);
    char err[256];
    EXPECT(pool_stage_ttl(p, 0) == -1 && pool_stage_ttl(p, -1) == -1 && pool_stage_ttl(p, 1e9) == -1 &&
           pool_stage_ttl(p, NAN) == -1);
    EXPECT(pool_stage_ttl(p, 1) == 0);
    EXPECT(pool_stage_publish(p, "a", 3, 1, "answer", 6, err, sizeof err) == 0);
    pool_entry_t *e = NULL;
    int n = pool_stage_read(me, "me", 3, 1, 5, &e, err, sizeof err);
    EXPECTF(n == 1 && e[0].len == 6 && memcmp(e[0].data, "answer", 6) == 0, "read %d before the expiry", n);
    pool_entries_free(e, n);
    zclock_sleep(1500);
    n = pool_stage_read(me, "me", 3, 1, 5, &e, err, sizeof err);
    EXPECTF(n == 0, "read %d after the expiry", n);
    pool_entries_free(e, n);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    redisReply *r = redisCommand(c, "EXISTS t%d:n:a:stage:3:1", swarm_no);
    EXPECT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    redisFree(c);
    pool_destroy(&me);
    pool_destroy(&p);
}

/* Redis's total_net_output_bytes, -1 when INFO does not give it */
static long long net_output_bytes(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO stats");
    long long out = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "total_net_output_bytes:")
                        ? atoll(strstr(r->str, "total_net_output_bytes:") + 23)
                        : -1;
    freeReplyObject(r);
    return out;
}

/* a stage number out of range, a node id that is not one: refused */
static void stage_bad_arguments(pool_t *p)
{
    char err[256];
    pool_entry_t *e = NULL;
    EXPECT(pool_stage_publish(p, "a", 5, 0, "x", 1, err, sizeof err) == -1 && strstr(err, "stage 0"));
    EXPECT(pool_stage_publish(p, "a", 5, 4, "x", 1, err, sizeof err) == -1 && strstr(err, "stage 4"));
    EXPECT(pool_stage_read(p, "me", 5, 4, 1, &e, err, sizeof err) == -1 && strstr(err, "stage 4"));
    EXPECT(pool_stage_publish(p, "x:n:a", 5, 2, "x", 1, err, sizeof err) == -1 && strstr(err, "node id"));
    EXPECT(pool_stage_read(p, "a*", 5, 2, 1, &e, err, sizeof err) == -1 && strstr(err, "node id"));
}

/* an empty pool, a pool of groups without stage outputs, and Redis
 * unreachable */
static void stage_empty_and_unreachable(void)
{
    char err[256];
    pool_entry_t stale, *e = &stale; /* an empty read must set it to NULL */
    int n;
    pool_t *empty = fresh_pool(10);
    n = pool_stage_read(empty, "me", 5, 2, 10, &e, err, sizeof err);
    EXPECTF(n == 0 && e == NULL, "read %d: %s", n, n < 0 ? err : "");
    EXPECT(publish_round(empty, "g", 5, 0, 2) == 0);
    n = pool_stage_read(empty, "me", 5, 2, 10, &e, err, sizeof err);
    EXPECTF(n == 0, "read %d from a pool of groups", n);
    pool_destroy(&empty);
    /* Redis unreachable */
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", redis_server_free_port());
    pool_t *gone = pool_new(url, "s", 10, err, sizeof err);
    EXPECT(gone && pool_stage_publish(gone, "a", 5, 2, "x", 1, err, sizeof err) == -1 &&
           strstr(err, "redis 127.0.0.1"));
    EXPECT(gone && pool_stage_read(gone, "a", 5, 2, 1, &e, err, sizeof err) == -1 && strstr(err, "redis 127.0.0.1"));
    pool_destroy(&gone);
}

/* The record limit: a larger output is refused at publish; one planted
 * larger (or of another type) is skipped by a read and counted, and the
 * planted 4 MB never crosses the wire. Bad stages and node ids fail with
 * a line; an empty pool reads 0. */
static void test_stage_limits(void)
{
    pool_t *p = fresh_pool(10);
    char err[256], *big = calloc(4 << 20, 1);
    pool_limit_record(p, 100);
    EXPECTF(pool_stage_publish(p, "a", 5, 2, big, 101, err, sizeof err) == -1 && strstr(err, "record limit, 100"), "%s",
            err);
    EXPECT(pool_stage_publish(p, "a", 5, 2, big, 0, err, sizeof err) == -1 && strstr(err, "0 bytes"));
    EXPECT(pool_stage_publish(p, "a", 5, 2, big, 100, err, sizeof err) == 0);
    redisContext *c = redisConnect("127.0.0.1", rs.port);
    memset(big, 'x', 4 << 20);
    freeReplyObject(redisCommand(c, "SET t%d:n:huge:stage:5:2 %b", swarm_no, big, (size_t)(4 << 20)));
    freeReplyObject(redisCommand(c, "HSET t%d:n:hashy:stage:5:2 x y", swarm_no));
    freeReplyObject(redisCommand(c, "SADD t%d:nodes huge hashy a:b", swarm_no));
    long long out0 = net_output_bytes(c);
    pool_entry_t *e = NULL;
    int n = pool_stage_read(p, "me", 5, 2, 10, &e, err, sizeof err);
    EXPECTF(n == 1 && strcmp(e[0].node, "a") == 0 && e[0].len == 100, "read %d: %s", n, n < 0 ? err : "");
    pool_entries_free(e, n);
    long long out1 = net_output_bytes(c);
    EXPECTF(out0 >= 0 && out1 - out0 < (1 << 20), "Redis sent %lld bytes for the read", out1 - out0);
    long oversize, bad;
    pool_stage_health(p, &oversize, &bad);
    EXPECTF(oversize == 1 && bad == 1, "oversize %ld, bad %ld", oversize, bad);
    /* with the default limit the planted output is a peer's like any */
    pool_t *q = same_swarm(10);
    n = pool_stage_read(q, "a", 5, 2, 10, &e, err, sizeof err);
    EXPECTF(n == 1 && strcmp(e[0].node, "huge") == 0 && e[0].len == (4 << 20), "read %d", n);
    pool_entries_free(e, n);
    pool_destroy(&q);
    stage_bad_arguments(p);
    stage_empty_and_unreachable();
    redisFree(c);
    free(big);
    pool_destroy(&p);
}

int main(void)
{
    if (redis_server_start(&rs, 0) < 0) {
        printf("SKIP test_pool: %s\n", rs.why);
        return 0;
    }
    RUN_TEST(test_round_trip);
    RUN_TEST(test_never_own);
    RUN_TEST(test_hostile_keys);
    RUN_TEST(test_bound);
    RUN_TEST(test_draw_names_node);
    RUN_TEST(test_node_keys);
    RUN_TEST(test_uniform_chi_square);
    RUN_TEST(test_draw_window);
    RUN_TEST(test_draw_summary);
    RUN_TEST(test_draw_many_nodes);
    RUN_TEST(test_draw_large_swarm);
    RUN_TEST(test_draw_memory_bounded);
    RUN_TEST(test_draw_seconds);
    RUN_TEST(test_memory_cap);
    RUN_TEST(test_draw_once_uniform);
    RUN_TEST(test_draw_useful);
    RUN_TEST(test_draw_hostile);
    RUN_TEST(test_record_limit);
    RUN_TEST(test_stage_round_trip);
    RUN_TEST(test_stage_max);
    RUN_TEST(test_stage_ttl);
    RUN_TEST(test_stage_limits);
    RUN_TEST(test_bad_url);
    RUN_TEST(test_library_replaced);
    RUN_TEST(test_redis_restart);
    redis_server_cleanup(&rs);
    CHECK_EXIT();
}
