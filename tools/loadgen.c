/* loadgen: a swarm's load on the pool, without the swarm. N
 * simulated nodes share a real Redis (one server, or a Redis Cluster by a
 * redis-cluster:// URL) the way N sapo nodes do: each
 * publishes G signed groups of B bytes per round (pool_publish, one call a
 * group, as a sampler publishes) and draws J fresh groups of the others
 * (pool_draw, SampleExternal), its rounds R seconds apart and the nodes'
 * rounds spread evenly over R. Reports Redis's memory (used_memory, its
 * largest sample and at the end, summed over a cluster's masters and per
 * master), the latency of publish and draw calls (p50, p99, max), the
 * servers' CPU (used_cpu_user + sys over the run, likewise),
 * the errors, what the draws returned, and how well the generator kept
 * its schedule: the share of rounds begun within 5 ms of their due time,
 * and each call's latency measured from its round's due time as well as
 * from its own start (a generator that falls behind would otherwise time
 * only the calls it got to: coordinated omission; the due-time figures
 * are what a node waits). Ends with one JSON line of the same figures.
 *
 *   loadgen [--redis URL] [--nodes N] [--seconds T] [--round-seconds R]
 *           [--groups G] [--bytes B] [--draw J] [--window W] [--clients C]
 *           [--threads K] [--seed S]
 *
 * Defaults: 1000 nodes, 60 s, rounds of 10 s, 8 groups of 22,000 bytes (a
 * default-mix group of 8 completions is 3 to 22 KB), J = 4, window 2
 * rounds. The N nodes share C pool clients (default min(N, 256)): one
 * process cannot hold a client per node at 10,000 nodes, and a shared
 * client's never-twice memory is shared by its nodes. K threads (default
 * 1) make the calls, thread k those of the nodes n with n % K = k, each on
 * clients of its own: one thread waits for every reply in turn, so its
 * calls' latencies add up and cap the load it can make, where real nodes
 * wait in parallel (docs/pool-scale.md). The records are 64
 * random payloads signed by one key, reused: the server neither reads nor
 * checks them. The swarm prefix is loadgen<pid>; its keys are deleted at
 * the end. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool/pool.h"
#include "pool/link.h"
#include "pool/route.h"
#include "util/identity.h"
#include "util/splitmix.h"

#define PAYLOADS 64

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

typedef struct {
    double *v;
    size_t n, cap;
} samples_t;

static void add(samples_t *s, double v)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        double *grown = realloc(s->v, s->cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "loadgen: out of memory\n");
            exit(1);
        }
        s->v = grown;
    }
    s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the q-quantile (nearest rank) of sorted samples, in ms */
static double quantile_ms(const samples_t *s, double q)
{
    if (s->n == 0) return 0;
    size_t i = (size_t)(q * (double)s->n);
    if (i >= s->n) i = s->n - 1;
    return 1000 * s->v[i];
}

typedef struct {
    long long used_memory, peak_memory;
    double cpu;
} server_t;

/* INFO's used_memory and used_cpu_user + used_cpu_sys; -1 fields when it fails */
static int server_stats(link_t *c, server_t *s)
{
    redisReply *r = link_command(c, "INFO");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    const char *m = strstr(r->str, "\nused_memory:"), *u = strstr(r->str, "\nused_cpu_user:"),
               *y = strstr(r->str, "\nused_cpu_sys:");
    s->used_memory = m ? atoll(m + 13) : -1;
    s->cpu = (u ? atof(u + 15) : 0) + (y ? atof(y + 14) : 0);
    freeReplyObject(r);
    return m ? 0 : -1;
}

/* The Redis servers holding the pool, for INFO and the deletion of the
 * run's keys: one, or every master of a cluster (its shards), each as
 * the URL's user if it names one */
#define MAX_SHARDS 64
typedef struct {
    int n;
    link_t *c[MAX_SHARDS];
    char where[MAX_SHARDS][300];
    server_t s0[MAX_SHARDS], s[MAX_SHARDS];
    long long mem_max[MAX_SHARDS];
} shards_t;

static int shards_connect(const char *url, shards_t *sh)
{
    char err[512];
    route_t *r = route_new(url, err, sizeof err);
    int n = -1;
    if (r &&
        route_tls(r, getenv("SAPO_TLS_CA"), getenv("SAPO_TLS_CERT"), getenv("SAPO_TLS_KEY"), getenv("SAPO_TLS_NAME"),
                  err, sizeof err) == 0 &&
        route_connect(r, err, sizeof err) == 0)
        n = route_masters(r, err, sizeof err);
    if (n < 0 || n > MAX_SHARDS) {
        fprintf(stderr, "loadgen: %s\n", n > MAX_SHARDS ? "more masters than loadgen reads" : err);
        route_destroy(&r);
        return -1;
    }
    memset(sh, 0, sizeof *sh);
    /* the pool clients' TLS, for a rediss URL */
    tls_t *tls = route_uses_tls(r) ? tls_new(getenv("SAPO_TLS_CA"), getenv("SAPO_TLS_CERT"), getenv("SAPO_TLS_KEY"),
                                             getenv("SAPO_TLS_NAME"), err, sizeof err)
                                   : NULL;
    int rc = route_uses_tls(r) && !tls ? -1 : 0;
    if (rc) fprintf(stderr, "loadgen: %s\n", err);
    for (int i = 0; i < n && rc == 0; i++) {
        const char *host = route_master_host(r, i);
        int port = route_master_port(r, i);
        snprintf(sh->where[i], sizeof sh->where[i], "%s:%d", host, port);
        link_t *c = link_open(host, port, tls, 2000, err, sizeof err);
        redisReply *a = NULL;
        if (c && route_password(r)[0])
            a = route_user(r)[0] ? link_command(c, "AUTH %s %s", route_user(r), route_password(r))
                                 : link_command(c, "AUTH %s", route_password(r));
        if (!c || (route_password(r)[0] && (!a || a->type == REDIS_REPLY_ERROR))) {
            fprintf(stderr, "loadgen: redis %s: %s\n", sh->where[i], !c ? err : a ? a->str : link_error(c));
            rc = -1;
            link_close(&c);
        } else {
            sh->c[sh->n++] = c;
        }
        if (a) freeReplyObject(a);
    }
    tls_destroy(&tls); /* the links keep what they need of it */
    route_destroy(&r);
    for (int i = 0; rc != 0 && i < sh->n; i++) link_close(&sh->c[i]);
    return rc;
}

/* every shard's INFO into now[]: the summed memory, or -1 when one failed */
static long long shards_stats(shards_t *sh, server_t *now)
{
    long long total = 0;
    for (int i = 0; i < sh->n; i++) {
        if (server_stats(sh->c[i], &now[i]) != 0) return -1;
        total += now[i].used_memory;
    }
    return total;
}

/* deletes every key under prefix */
static void clean(link_t *c, const char *prefix)
{
    char cursor[32] = "0", pattern[160];
    snprintf(pattern, sizeof pattern, "%s:*", prefix);
    do {
        redisReply *r = link_command(c, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r) freeReplyObject(r);
            return;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *d = link_command(c, "UNLINK %s", r->element[1]->element[i]->str);
            if (d) freeReplyObject(d);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
}

static long parse_long(const char *flag, const char *v, long min, long max)
{
    char *end = NULL;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || !end || *end || x < min || x > max) {
        fprintf(stderr, "loadgen: %s: '%s' is not an integer in [%ld, %ld]\n", flag, v ? v : "", min, max);
        exit(2);
    }
    return x;
}

typedef struct {
    const char *url;
    long nodes, seconds, round_s, groups, bytes, draw, window, clients, threads;
    uint64_t seed;
} opts_t;

/* the flags over their defaults; 2 after an unknown flag's usage line */
static int parse_flags(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.url = getenv("SAPO_REDIS") ? getenv("SAPO_REDIS") : "redis://127.0.0.1:6379",
                  .nodes = 1000,
                  .seconds = 60,
                  .round_s = 10,
                  .groups = 8,
                  .bytes = 22000,
                  .draw = 4,
                  .window = 2,
                  .clients = -1,
                  .threads = 1,
                  .seed = 1};
    for (int a = 1; a < argc; a++) {
        const char *f = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(f, "--redis") && v) o->url = v;
        else if (!strcmp(f, "--nodes")) o->nodes = parse_long(f, v, 2, 1000000);
        else if (!strcmp(f, "--seconds")) o->seconds = parse_long(f, v, 1, 86400);
        else if (!strcmp(f, "--round-seconds")) o->round_s = parse_long(f, v, 1, 3600);
        else if (!strcmp(f, "--groups")) o->groups = parse_long(f, v, 1, 1000);
        else if (!strcmp(f, "--bytes")) o->bytes = parse_long(f, v, 1, 16 << 20);
        else if (!strcmp(f, "--draw")) o->draw = parse_long(f, v, 0, 1000);
        else if (!strcmp(f, "--window")) o->window = parse_long(f, v, 0, 1000000);
        else if (!strcmp(f, "--clients")) o->clients = parse_long(f, v, 1, 100000);
        else if (!strcmp(f, "--threads")) o->threads = parse_long(f, v, 1, 64);
        else if (!strcmp(f, "--seed")) o->seed = (uint64_t)parse_long(f, v, 0, 1L << 40);
        else {
            fprintf(stderr,
                    "loadgen: unknown flag '%s'\nusage: loadgen [--redis URL] [--nodes N] [--seconds T] "
                    "[--round-seconds R] [--groups G] [--bytes B] [--draw J] [--window W] [--clients C] "
                    "[--threads K] [--seed S]\n",
                    f);
            return 2;
        }
        if (strcmp(f, "--redis") == 0 || v) a++;
    }
    if (o->clients < 0) o->clients = o->nodes < 256 ? o->nodes : 256;
    if (o->clients > o->nodes) o->clients = o->nodes;
    /* each client one thread's: K divides the nodes and the clients */
    if (o->nodes % o->threads) {
        fprintf(stderr, "loadgen: --threads: %ld does not divide --nodes %ld\n", o->threads, o->nodes);
        return 2;
    }
    o->clients -= o->clients % o->threads;
    if (o->clients < o->threads) o->clients = o->threads;
    return 0;
}

/* the C pool clients the nodes share, connected before the clock starts;
 * NULL after an error line */
static pool_t **open_pools(const opts_t *o, const char *swarm)
{
    char err[512];
    pool_t **pools = calloc((size_t)o->clients, sizeof *pools);
    for (long i = 0; i < o->clients; i++) {
        if (!(pools[i] = pool_new(o->url, swarm, 2000, err, sizeof err)) ||
            pool_tls(pools[i], getenv("SAPO_TLS_CA"), getenv("SAPO_TLS_CERT"), getenv("SAPO_TLS_KEY"),
                     getenv("SAPO_TLS_NAME"), err, sizeof err) != 0) {
            fprintf(stderr, "loadgen: %s\n", err);
            return NULL;
        }
        pool_window(pools[i], (int)o->window, 0);
        pool_seed(pools[i], o->seed * 1000003u + (uint64_t)i);
        /* connected (and the functions loaded) before the clock starts */
        if (pool_size_total(pools[i], err, sizeof err) < 0) {
            fprintf(stderr, "loadgen: %s: %s\n", pool_where(pools[i]), err);
            return NULL;
        }
    }
    return pools;
}

typedef struct {
    uint8_t *data[PAYLOADS];
    size_t len[PAYLOADS];
} payloads_t;

/* signed payloads, as a node seals its records */
static void sign_payloads(identity_t *id, const opts_t *o, payloads_t *pl)
{
    uint64_t rng = o->seed;
    uint8_t *raw = malloc((size_t)o->bytes);
    for (int k = 0; k < PAYLOADS; k++) {
        for (long b = 0; b < o->bytes; b++) raw[b] = (uint8_t)splitmix64(&rng);
        pl->data[k] = identity_seal(id, raw, (size_t)o->bytes, &pl->len[k]);
    }
    free(raw);
}

/* what the run measured */
typedef struct {
    samples_t pub, drw;         /* call latencies from each call's start, s */
    samples_t pub_due, drw_due; /* and from when it was due: its round's due time */
    long events, late;          /* rounds begun, and begun over LATE_S after their due time */
    long errors, drawn, draws_short;
    char last_err[512];
    double behind_max, wall;
    shards_t *sh;                         /* the servers, each before the run (s0) and at its last sample (s) */
    long long mem_base, mem_max, mem_end; /* summed over the shards */
} figures_t;

/* a sample of every shard, its memory's largest kept */
static void sample(figures_t *f)
{
    long long total = shards_stats(f->sh, f->sh->s);
    if (total < 0) return;
    f->mem_end = total;
    if (total > f->mem_max) f->mem_max = total;
    for (int i = 0; i < f->sh->n; i++)
        if (f->sh->s[i].used_memory > f->sh->mem_max[i]) f->sh->mem_max[i] = f->sh->s[i].used_memory;
}

/* a round begun this long after its due time was not kept to schedule */
#define LATE_S 0.005

/* sleeps until due; a generator already past it notes how far behind */
static void wait_until(double due, figures_t *f)
{
    double t = now_s();
    f->events++;
    if (t - due > LATE_S) f->late++;
    if (due > t) {
        double wait = due - t;
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    } else if (t - due > f->behind_max) {
        f->behind_max = t - due;
    }
}

/* event e of the schedule, due at due: node e % N's round e / N + 1, its
 * G publishes and its draw of J, each call timed from its start and from
 * the round's due time (a call queued behind a late schedule counts its
 * wait, as a node's round would: no coordinated omission) */
static void node_round(const opts_t *o, pool_t **pools, const payloads_t *pl, uint64_t e, double due, figures_t *f)
{
    char err[512];
    long node = (long)(e % (uint64_t)o->nodes);
    uint64_t round = e / (uint64_t)o->nodes + 1;
    char name[32];
    snprintf(name, sizeof name, "n%ld", node);
    pool_t *p = pools[node % o->clients];
    for (long g = 0; g < o->groups; g++) {
        int k = (int)((e * (uint64_t)o->groups + (uint64_t)g) % PAYLOADS);
        double a = now_s();
        int rc = pool_publish(p, name, round, pl->data[k], pl->len[k], err, sizeof err);
        double b = now_s();
        add(&f->pub, b - a);
        add(&f->pub_due, b - due);
        if (rc != 0) f->errors++, snprintf(f->last_err, sizeof f->last_err, "%s", err);
    }
    if (o->draw > 0) {
        pool_entry_t *got = NULL;
        double a = now_s();
        int n = pool_draw(p, name, (int)o->draw, &got, err, sizeof err);
        double b = now_s();
        add(&f->drw, b - a);
        add(&f->drw_due, b - due);
        if (n < 0) f->errors++, snprintf(f->last_err, sizeof f->last_err, "%s", err);
        else f->drawn += n, f->draws_short += n < o->draw && round > 1;
        pool_entries_free(got, n > 0 ? n : 0);
    }
}

/* one thread's share of the schedule: events k, k + K, k + 2K, ... */
typedef struct {
    const opts_t *o;
    pool_t **pools;
    const payloads_t *pl;
    figures_t f; /* its calls' figures, merged at the end */
    long k;
    double t0;
    atomic_int *done;
} worker_t;

static void *worker_run(void *arg)
{
    worker_t *w = arg;
    const opts_t *o = w->o;
    double period = (double)o->round_s / (double)o->nodes;
    for (uint64_t e = (uint64_t)w->k; !stop; e += (uint64_t)o->threads) {
        double due = w->t0 + (double)e * period;
        if (due >= w->t0 + (double)o->seconds) break;
        wait_until(due, &w->f);
        node_round(o, w->pools, w->pl, e, due, &w->f);
    }
    atomic_fetch_add(w->done, 1);
    return NULL;
}

/* a worker's figures into f */
static void merge(figures_t *f, figures_t *w)
{
    for (size_t i = 0; i < w->pub.n; i++) add(&f->pub, w->pub.v[i]);
    for (size_t i = 0; i < w->drw.n; i++) add(&f->drw, w->drw.v[i]);
    for (size_t i = 0; i < w->pub_due.n; i++) add(&f->pub_due, w->pub_due.v[i]);
    for (size_t i = 0; i < w->drw_due.n; i++) add(&f->drw_due, w->drw_due.v[i]);
    f->events += w->events, f->late += w->late;
    f->errors += w->errors, f->drawn += w->drawn, f->draws_short += w->draws_short;
    if (w->errors) snprintf(f->last_err, sizeof f->last_err, "%s", w->last_err);
    if (w->behind_max > f->behind_max) f->behind_max = w->behind_max;
    free(w->pub.v);
    free(w->drw.v);
    free(w->pub_due.v);
    free(w->drw_due.v);
}

/* the nodes' rounds spread evenly over R seconds, for T seconds or until
 * a signal, by K threads; this one samples the servers every second and
 * writes a line every 10 s */
static int run_load(const opts_t *o, pool_t **pools, const payloads_t *pl, figures_t *f)
{
    double t0 = now_s() + 0.05, next_line = t0 + 10;
    fprintf(stderr,
            "loadgen: %ld nodes, %ld groups of %ld bytes and a draw of %ld each per %ld s round, window %ld "
            "rounds, %ld clients, %ld threads, %ld s against %s\n",
            o->nodes, o->groups, o->bytes, o->draw, o->round_s, o->window, o->clients, o->threads, o->seconds, o->url);
    atomic_int done = 0;
    worker_t *w = calloc((size_t)o->threads, sizeof *w);
    pthread_t *th = calloc((size_t)o->threads, sizeof *th);
    if (!w || !th) {
        fprintf(stderr, "loadgen: out of memory\n");
        return -1;
    }
    long started = 0;
    for (; started < o->threads; started++) {
        w[started] = (worker_t){.o = o, .pools = pools, .pl = pl, .k = started, .t0 = t0, .done = &done};
        if (pthread_create(&th[started], NULL, worker_run, &w[started]) != 0) {
            fprintf(stderr, "loadgen: could not start thread %ld\n", started);
            stop = 1;
            break;
        }
    }
    while (atomic_load(&done) < started) {
        struct timespec one = {0, 200000000};
        nanosleep(&one, NULL);
        double t = now_s();
        if (t >= t0 + 1) sample(f);
        if (t >= next_line) {
            fprintf(stderr, "loadgen: %.0f s: used_memory %.1f MB, %ld of %ld threads done\n", t - t0,
                    (double)f->mem_end / 1e6, (long)atomic_load(&done), started);
            next_line = t + 10;
        }
    }
    for (long k = 0; k < started; k++) {
        pthread_join(th[k], NULL);
        merge(f, &w[k].f);
    }
    f->wall = now_s() - t0;
    free(w);
    free(th);
    return started == o->threads ? 0 : -1;
}

/* the report's lines, then the same figures as one JSON line */
static void report(const opts_t *o, figures_t *f)
{
    const samples_t *pub = &f->pub, *drw = &f->drw, *pd = &f->pub_due, *dd = &f->drw_due;
    const shards_t *sh = f->sh;
    qsort(pub->v, pub->n, sizeof *pub->v, cmp_double);
    qsort(drw->v, drw->n, sizeof *drw->v, cmp_double);
    qsort(pd->v, pd->n, sizeof *pd->v, cmp_double);
    qsort(dd->v, dd->n, sizeof *dd->v, cmp_double);
    double kept = f->events ? 1 - (double)f->late / (double)f->events : 0;
    double cpu = 0;
    for (int i = 0; i < sh->n; i++) cpu += (sh->s[i].cpu - sh->s0[i].cpu) / f->wall;
    printf("nodes %ld, rounds of %ld s, %ld groups of %ld bytes, draw %ld, window %ld, %ld threads, %.0f s\n", o->nodes,
           o->round_s, o->groups, o->bytes, o->draw, o->window, o->threads, f->wall);
    printf("schedule: %.1f %% of %ld rounds begun within %.0f ms of their due time; at most %.3f s behind\n",
           100 * kept, f->events, 1000 * LATE_S, f->behind_max);
    printf("latency from the due time (what a node waits): publish p50 %.3f ms, p99 %.3f ms; draw p50 %.3f ms, "
           "p99 %.3f ms, max %.3f ms\n",
           quantile_ms(pd, 0.5), quantile_ms(pd, 0.99), quantile_ms(dd, 0.5), quantile_ms(dd, 0.99),
           dd->n ? 1000 * dd->v[dd->n - 1] : 0);
    printf("publish: %zu calls, from each call's start p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", pub->n,
           quantile_ms(pub, 0.5), quantile_ms(pub, 0.99), pub->n ? 1000 * pub->v[pub->n - 1] : 0);
    printf("draw:    %zu calls, from each call's start p50 %.3f ms, p99 %.3f ms, max %.3f ms; %.2f groups a draw, %ld "
           "short after round 1\n",
           drw->n, quantile_ms(drw, 0.5), quantile_ms(drw, 0.99), drw->n ? 1000 * drw->v[drw->n - 1] : 0,
           drw->n ? (double)f->drawn / (double)drw->n : 0, f->draws_short);
    printf("redis:   used_memory %.1f MB at the end, %.1f MB at most (%.1f MB before), CPU %.0f %% of a core\n",
           (double)f->mem_end / 1e6, (double)f->mem_max / 1e6, (double)f->mem_base / 1e6, 100 * cpu);
    for (int i = 0; sh->n > 1 && i < sh->n; i++)
        printf("shard %s: used_memory %.1f MB at most, CPU %.0f %% of a core\n", sh->where[i],
               (double)sh->mem_max[i] / 1e6, 100 * (sh->s[i].cpu - sh->s0[i].cpu) / f->wall);
    printf("errors:  %ld%s%s\n", f->errors, f->errors ? ", last: " : "", f->last_err);
    printf("{\"nodes\":%ld,\"threads\":%ld,\"round_seconds\":%ld,\"groups\":%ld,\"bytes\":%ld,\"draw\":%ld,\"window\":%"
           "ld,\"seconds\":%"
           ".1f,"
           "\"publish\":{\"calls\":%zu,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"p99_due_ms\":%.4f},\"draw\":{\"calls\":%"
           "zu,\"p50_ms\":%.4f,"
           "\"p99_ms\":%.4f,\"p50_due_ms\":%.4f,\"p99_due_ms\":%.4f,\"groups\":%.3f},\"used_memory_max\":%lld,"
           "\"used_memory_end\":%lld,"
           "\"server_cpu\":%.3f,\"errors\":%ld,\"schedule_kept\":%.4f,\"behind_max_s\":%.3f,\"shards\":[",
           o->nodes, o->threads, o->round_s, o->groups, o->bytes, o->draw, o->window, f->wall, pub->n,
           quantile_ms(pub, 0.5), quantile_ms(pub, 0.99), quantile_ms(pd, 0.99), drw->n, quantile_ms(drw, 0.5),
           quantile_ms(drw, 0.99), quantile_ms(dd, 0.5), quantile_ms(dd, 0.99),
           drw->n ? (double)f->drawn / (double)drw->n : 0, f->mem_max, f->mem_end, cpu, f->errors, kept, f->behind_max);
    for (int i = 0; i < sh->n; i++)
        printf("%s{\"at\":\"%s\",\"used_memory_max\":%lld,\"server_cpu\":%.3f}", i ? "," : "", sh->where[i],
               sh->mem_max[i], (sh->s[i].cpu - sh->s0[i].cpu) / f->wall);
    printf("]}\n");
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse_flags(argc, argv, &o) != 0) return 2;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    char swarm[64];
    snprintf(swarm, sizeof swarm, "loadgen%d", (int)getpid());
    static shards_t sh;
    if (shards_connect(o.url, &sh) != 0) return 1;
    pool_t **pools = open_pools(&o, swarm);
    if (!pools) return 1;
    identity_t *id = identity_new();
    payloads_t pl;
    sign_payloads(id, &o, &pl);

    figures_t f = {.sh = &sh};
    if ((f.mem_base = shards_stats(&sh, sh.s0)) < 0) {
        fprintf(stderr, "loadgen: INFO failed on %s\n", o.url);
        return 1;
    }
    f.mem_max = f.mem_end = f.mem_base;
    memcpy(sh.s, sh.s0, sizeof sh.s);
    for (int i = 0; i < sh.n; i++) sh.mem_max[i] = sh.s0[i].used_memory;
    if (run_load(&o, pools, &pl, &f) != 0) return 1;
    sample(&f);
    report(&o, &f);

    for (int i = 0; i < sh.n; i++) {
        clean(sh.c[i], swarm);
        link_close(&sh.c[i]);
    }
    for (long i = 0; i < o.clients; i++) pool_destroy(&pools[i]);
    free(pools);
    for (int k = 0; k < PAYLOADS; k++) free(pl.data[k]);
    identity_destroy(&id);
    free(f.pub.v);
    free(f.drw.v);
    free(f.pub_due.v);
    free(f.drw_due.v);
    return f.errors ? 1 : 0;
}
