/* The pool's connection to one Redis or a Redis Cluster (route.h): nodes
 * connected on first use, the slot map, redirections, pipelines. */
#include "pool/route.h"
#include "util/clock.h"

#include "pool/link.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* redirections and retries a command may take before it gives up: a
 * failover (a replica promoted) takes a cluster's node timeout and a
 * moment, which the caller's own retries (the pool's backoff) cover */
#define ROUTE_TRIES 6
/* the first wait after TRYAGAIN, doubled for each try after it: a pool
 * function's keys are split between the two ends of a slot's migration
 * only between two MIGRATE calls (milliseconds under redis-cli), so the
 * first waits are short, and the last one still long enough for a
 * migration done by hand (25 to 400 ms, 775 in all) */
#define TRYAGAIN_FIRST_MS 25
#define ROUTE_MAX_SEEDS 64
/* a cluster node that failed (refused, broke, timed out) is not tried
 * again for this long, doubled at each failure after it up to the most:
 * a dead master costs a call its commands, not a timeout each */
#define DOWN_FIRST_MS 250
#define DOWN_MOST_MS 4000
/* a connection's timeouts without a deadline (route_deadline) */
#define CONNECT_MS 1000
#define IO_MS 2000

typedef struct {
    char host[256];
    int port;
    link_t *c;
    int slots;            /* slots the last map gave it (a master's) */
    bool replica;         /* the last map named it a replica */
    bool readonly;        /* its connection took READONLY */
    long long down_until; /* ms (monotonic): not tried before then */
    long down_ms;         /* the wait after its last failure */
    long io_ms;           /* its connection's timeout as last set */
    char why[256];        /* its last failure, repeated while it is down */
} node_t;

typedef struct {
    int slot; /* -1: any master */
    int argc;
    char **argv;
    size_t *lens;
} queued_t;

struct route {
    char where[1100];
    bool cluster;
    bool tls_url; /* rediss://, rediss-cluster:// */
    tls_t *tls;   /* its settings (route_tls), or the system's CAs from the first connect */
    char user[128], password[256];
    int db;
    node_t *nodes;
    int n_nodes, cap_nodes;
    int n_seeds;                       /* nodes[0, n_seeds) are the URL's */
    int16_t slot_node[ROUTE_SLOTS];    /* -1: unknown */
    int16_t slot_replica[ROUTE_SLOTS]; /* a replica of its master, for reads while that is down; -1: none */
    int *masters;
    int n_masters;
    bool map_stale;
    route_prepare_fn prepare;
    void *prepare_ctx;
    queued_t *queue;
    int n_queued, cap_queued;
    long moved, asked, tryagain, map_reads, replica_reads;
    long long deadline;          /* ms (monotonic) the call in progress ends by; 0: none */
    int uncovered;               /* slots the map gives no master */
    long long uncovered_read_at; /* ms (monotonic) the map was last read for a slot without a master */
    bool seeds_tried;            /* every seed tried once (the first connect) */
    char seeds_bad[768];         /* the seeds that could not be reached at the first connect, each with its reason */
    char notice[1024];           /* what is wrong while the rest works (route_notice): those and the uncovered slots */
};

// ----------------------------------------------------------------------------
// slots

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as Redis Cluster's
 * keyHashSlot */
static uint16_t crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (uint16_t)(crc << 1 ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int route_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
        if (close && close > open + 1) return crc16(open + 1, (size_t)(close - open - 1)) & (ROUTE_SLOTS - 1);
    }
    return crc16(key, len) & (ROUTE_SLOTS - 1);
}

// ----------------------------------------------------------------------------
// the URL and the nodes

/* the node at host:port, added when new: its index, or -1 (no memory) */
static int node_of(route_t *r, const char *host, size_t hl, int port)
{
    for (int i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].port == port && strlen(r->nodes[i].host) == hl && strncmp(r->nodes[i].host, host, hl) == 0)
            return i;
    if (hl == 0 || hl >= sizeof r->nodes[0].host || r->n_nodes >= INT16_MAX) return -1;
    if (r->n_nodes == r->cap_nodes) {
        int cap = r->cap_nodes ? 2 * r->cap_nodes : 8;
        node_t *grown = realloc(r->nodes, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        r->nodes = grown;
        r->cap_nodes = cap;
    }
    node_t *n = &r->nodes[r->n_nodes];
    memset(n, 0, sizeof *n);
    memcpy(n->host, host, hl);
    n->host[hl] = '\0';
    n->port = port;
    return r->n_nodes++;
}

/* host[:port] at s (up to end): added as a node; the rest after it in *rest */
static int parse_host(route_t *r, const char *s, const char *end, const char **rest)
{
    size_t hl = strcspn(s, ":/,");
    if (s + hl > end) hl = (size_t)(end - s);
    int port = 6379;
    const char *p = s + hl;
    if (p < end && *p == ':') {
        char *e;
        long v = strtol(p + 1, &e, 10);
        if (e == p + 1 || v <= 0 || v > 65535) return -1;
        port = (int)v;
        p = e;
    }
    *rest = p;
    return hl ? node_of(r, s, hl, port) : -1;
}

static int parse_url(route_t *r, const char *url, bool *tls)
{
    const char *s = url;
    if (strncmp(s, "redis://", 8) == 0) s += 8;
    else if (strncmp(s, "redis-cluster://", 16) == 0) s += 16, r->cluster = true;
    else if (strncmp(s, "rediss://", 9) == 0) s += 9, *tls = true;
    else if (strncmp(s, "rediss-cluster://", 17) == 0) s += 17, r->cluster = true, *tls = true;
    else return -1;
    const char *end = s + strlen(s), *at = strchr(s, '@');
    if (at) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        size_t ul = colon ? (size_t)(colon - s) : 0;
        const char *pw = colon ? colon + 1 : s;
        size_t pl = (size_t)(at - pw);
        if (ul >= sizeof r->user || pl >= sizeof r->password) return -1;
        memcpy(r->user, s, ul);
        r->user[ul] = '\0';
        memcpy(r->password, pw, pl);
        r->password[pl] = '\0';
        s = at + 1;
    }
    for (;;) {
        const char *rest;
        if (parse_host(r, s, end, &rest) < 0 || r->n_nodes > ROUTE_MAX_SEEDS) return -1;
        s = rest;
        if (*s != ',') break;
        if (!r->cluster) return -1;
        s++;
    }
    if (*s == '/' && !r->cluster) {
        char *e;
        long db = strtol(s + 1, &e, 10);
        if (e == s + 1 || db < 0 || *e) return -1;
        r->db = (int)db;
        s = e;
    }
    return *s ? -1 : 0;
}

route_t *route_new(const char *url, char *err, size_t errlen)
{
    route_t *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    bool tls = false;
    if (parse_url(r, url, &tls) != 0) {
        snprintf(err, errlen,
                 "redis URL '%s': expected redis[s]://[[user]:password@]host[:port][/db] or "
                 "redis[s]-cluster://[[user]:password@]host:port[,host:port...] (rediss: over TLS)",
                 url);
        route_destroy(&r);
        return NULL;
    }
    r->tls_url = tls;
    r->n_seeds = r->n_nodes;
    size_t at = (size_t)snprintf(r->where, sizeof r->where, "%s", r->cluster ? "cluster " : "");
    for (int i = 0; i < r->n_seeds && at < sizeof r->where; i++)
        at += (size_t)snprintf(r->where + at, sizeof r->where - at, "%s%s:%d", i ? "," : "", r->nodes[i].host,
                               r->nodes[i].port);
    for (int i = 0; i < ROUTE_SLOTS; i++) r->slot_node[i] = r->cluster ? -1 : 0, r->slot_replica[i] = -1;
    r->map_stale = r->cluster;
    return r;
}

static void queue_clear(route_t *r)
{
    for (int i = 0; i < r->n_queued; i++) {
        for (int a = 0; a < r->queue[i].argc; a++) free(r->queue[i].argv[a]);
        free(r->queue[i].argv);
        free(r->queue[i].lens);
    }
    r->n_queued = 0;
}

void route_disconnect(route_t *self)
{
    for (int i = 0; i < self->n_nodes; i++) {
        link_close(&self->nodes[i].c);
        self->nodes[i].readonly = false;
    }
    if (self->cluster) self->map_stale = true;
}

void route_destroy(route_t **self_p)
{
    route_t *r = *self_p;
    if (!r) return;
    route_disconnect(r);
    queue_clear(r);
    free(r->queue);
    free(r->nodes);
    free(r->masters);
    tls_destroy(&r->tls);
    free(r);
    *self_p = NULL;
}

void route_on_connect(route_t *self, route_prepare_fn prepare, void *ctx)
{
    self->prepare = prepare;
    self->prepare_ctx = ctx;
}

bool route_is_cluster(const route_t *self) { return self->cluster; }
const char *route_user(const route_t *self) { return self->user; }
const char *route_password(const route_t *self) { return self->password; }
int route_db(const route_t *self) { return self->db; }
const char *route_where(const route_t *self) { return self->where; }

int route_tls(route_t *self, const char *ca, const char *cert, const char *key, const char *name, char *err,
              size_t errlen)
{
    bool any = (ca && ca[0]) || (cert && cert[0]) || (key && key[0]) || (name && name[0]);
    if (!any) return 0;
    if (!self->tls_url) {
        snprintf(err, errlen,
                 "TLS settings (SAPO_TLS_*) are given, but the URL (%s) is plain text: over TLS it is rediss:// or "
                 "rediss-cluster://",
                 self->where);
        return -1;
    }
    tls_t *t = tls_new(ca, cert, key, name, err, errlen);
    if (!t) return -1;
    route_disconnect(self);
    tls_destroy(&self->tls);
    self->tls = t;
    return 0;
}

bool route_uses_tls(const route_t *self) { return self->tls_url; }

bool route_clear_remote(const route_t *self)
{
    if (self->tls_url) return false;
    for (int i = 0; i < self->n_seeds; i++) {
        const char *h = self->nodes[i].host;
        if (strncmp(h, "127.", 4) != 0 && strcmp(h, "localhost") != 0 && strcmp(h, "::1") != 0) return true;
    }
    return false;
}
long route_moved(const route_t *self) { return self->moved; }
long route_asked(const route_t *self) { return self->asked; }
long route_tryagain(const route_t *self) { return self->tryagain; }
long route_map_reads(const route_t *self) { return self->map_reads; }
long route_replica_reads(const route_t *self) { return self->replica_reads; }

void route_deadline(route_t *self, long ms) { self->deadline = ms > 0 ? clock_ms() + ms : 0; }

/* ms left of the call's deadline (most when there is none or it is further) */
static long left_ms(const route_t *r, long most)
{
    if (!r->deadline) return most;
    long long left = r->deadline - clock_ms();
    return left < most ? (long)(left > 0 ? left : 0) : most;
}

/* node n's connection dropped after the failure why: on a cluster, the
 * node is not tried again for a while (commands for it fail with the same
 * words meanwhile, so a caller can tell the outage goes on) and the map is
 * read again */
static void drop(route_t *r, int n, const char *why)
{
    node_t *d = &r->nodes[n];
    snprintf(d->why, sizeof d->why, "%s", why);
    link_close(&d->c);
    d->readonly = false;
    if (!r->cluster) return;
    r->map_stale = true;
    d->down_ms = d->down_ms ? (d->down_ms * 2 > DOWN_MOST_MS ? DOWN_MOST_MS : d->down_ms * 2) : DOWN_FIRST_MS;
    d->down_until = clock_ms() + d->down_ms;
}

/* the most one wait on a node may take: within the call's deadline, and
 * on a cluster half of what is left of it, so that a stalled master
 * leaves the call time for the others' replies */
static long wait_ms(const route_t *r, long most)
{
    if (!r->deadline || !r->cluster) return left_ms(r, most);
    long left = left_ms(r, 2 * most);
    return left / 2 > 10 ? left / 2 : left;
}

/* whether the connection's last read or write ran out of time (a slow
 * or stalled node) */
static bool timed_out(const link_t *c) { return c && link_timed_out(c); }

static void broken(route_t *r, int n, char *err, size_t errlen);

/* whether the server is a node of a cluster (CLUSTER INFO answers; an
 * ACL user refused it is taken as not) */
static bool in_cluster(link_t *c)
{
    redisReply *rep = link_command(c, "CLUSTER INFO");
    bool yes = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:");
    freeReplyObject(rep);
    return yes;
}

/* a TLS URL's settings: the system's CAs and each host's name where
 * route_tls gave none (made at the first connect: loading the system's
 * CAs costs milliseconds, and a tool may hold hundreds of pools); 0, or
 * -1 with why */
static int tls_ready(route_t *r, char *why, size_t len)
{
    if (!r->tls_url || r->tls) return 0;
    r->tls = tls_new(NULL, NULL, NULL, NULL, why, len);
    return r->tls ? 0 : -1;
}

/* a replica's connection made READONLY, once (it then answers reads of
 * its master's slots instead of MOVED): 0, or -1 with err (dropped) */
static int read_only(route_t *r, int n, char *err, size_t errlen)
{
    node_t *d = &r->nodes[n];
    if (!d->replica || d->readonly) return 0;
    redisReply *ro = link_command(d->c, "READONLY");
    d->readonly = ro && ro->type == REDIS_REPLY_STATUS;
    if (!d->readonly) {
        snprintf(err, errlen, "redis %s:%d: READONLY: %s", d->host, d->port,
                 ro ? (ro->type == REDIS_REPLY_ERROR ? ro->str : "not OK") : link_error(d->c));
        drop(r, n, err);
    }
    freeReplyObject(ro);
    return d->readonly ? 0 : -1;
}

/* node n connected and prepared, its timeout within the call's deadline:
 * 0, or -1 with err (at once for a cluster node that failed a moment ago) */
static int connected(route_t *r, int n, char *err, size_t errlen)
{
    node_t *d = &r->nodes[n];
    long io = wait_ms(r, IO_MS);
    if (io < 10) {
        snprintf(err, errlen, "redis %s:%d: the call's deadline passed", d->host, d->port);
        return -1;
    }
    if (d->c) {
        /* a slow node costs a call its deadline, not the whole timeout */
        if (d->io_ms != io) link_timeout(d->c, io), d->io_ms = io;
        return read_only(r, n, err, errlen);
    }
    long long now = clock_ms();
    if (d->down_until > now) {
        snprintf(err, errlen, "%s", d->why);
        return -1;
    }
    char why[512];
    if (tls_ready(r, why, sizeof why) != 0 ||
        !(d->c = link_open(d->host, d->port, r->tls, wait_ms(r, CONNECT_MS), why, sizeof why))) {
        snprintf(err, errlen, "redis %s:%d: %s", d->host, d->port, why);
        drop(r, n, err);
        return -1;
    }
    link_timeout(d->c, io);
    d->io_ms = io;
    char where[300];
    snprintf(where, sizeof where, "redis %s:%d", d->host, d->port);
    if (r->prepare && r->prepare(r->prepare_ctx, d->c, where, err, errlen) != 0) {
        /* a node too slow to answer its preparation says so in the words
         * of any other call it fails (an outage is then one line) */
        if (timed_out(d->c)) broken(r, n, err, errlen);
        else drop(r, n, err);
        return -1;
    }
    if (!r->cluster && in_cluster(d->c)) {
        snprintf(err, errlen,
                 "redis %s:%d is a node of a Redis Cluster: name the cluster as redis-cluster://%s:%d (a plain "
                 "redis:// URL would reach only this node's slots)",
                 d->host, d->port, d->host, d->port);
        drop(r, n, err);
        return -1;
    }
    d->down_ms = 0;
    return read_only(r, n, err, errlen);
}

static void sleep_ms(route_t *r, long ms)
{
    ms = left_ms(r, ms);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// ----------------------------------------------------------------------------
// the slot map

static void note_map(route_t *r);

/* the map from one CLUSTER SLOTS reply, as asked of node asked (its
 * notice composed again): 0, or -1 when the reply is not one */
static int take_map(route_t *r, const redisReply *rep, int asked)
{
    if (rep->type != REDIS_REPLY_ARRAY) return -1;
    int16_t map[ROUTE_SLOTS], copy[ROUTE_SLOTS];
    for (int i = 0; i < ROUTE_SLOTS; i++) map[i] = copy[i] = -1;
    for (int i = 0; i < r->n_nodes; i++) r->nodes[i].replica = false;
    int *masters = malloc((rep->elements + 1) * sizeof *masters), nm = 0;
    if (!masters) return -1;
    for (size_t e = 0; e < rep->elements; e++) {
        const redisReply *it = rep->element[e];
        if (it->type != REDIS_REPLY_ARRAY || it->elements < 3 || it->element[0]->type != REDIS_REPLY_INTEGER ||
            it->element[1]->type != REDIS_REPLY_INTEGER || it->element[2]->type != REDIS_REPLY_ARRAY ||
            it->element[2]->elements < 2 || it->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            it->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
            goto bad;
        long long lo = it->element[0]->integer, hi = it->element[1]->integer;
        const redisReply *m = it->element[2];
        /* an empty host is the node that answered */
        const char *host = m->element[0]->len ? m->element[0]->str : r->nodes[asked].host;
        int n = node_of(r, host, strlen(host), (int)m->element[1]->integer), c = -1;
        if (lo < 0 || hi >= ROUTE_SLOTS || lo > hi || n < 0) goto bad;
        /* its first replica, where the map names one */
        const redisReply *rp = it->elements > 3 ? it->element[3] : NULL;
        if (rp && rp->type == REDIS_REPLY_ARRAY && rp->elements >= 2 && rp->element[0]->type == REDIS_REPLY_STRING &&
            rp->element[1]->type == REDIS_REPLY_INTEGER && rp->element[0]->len > 0 &&
            (c = node_of(r, rp->element[0]->str, rp->element[0]->len, (int)rp->element[1]->integer)) >= 0)
            r->nodes[c].replica = true;
        for (long long s = lo; s <= hi; s++) map[s] = (int16_t)n, copy[s] = (int16_t)c;
        int k = 0;
        while (k < nm && masters[k] != n) k++;
        if (k == nm) masters[nm++] = n;
    }
    memcpy(r->slot_node, map, sizeof map);
    memcpy(r->slot_replica, copy, sizeof copy);
    for (int k = 0; k < nm; k++) r->nodes[masters[k]].replica = false;
    free(r->masters);
    r->masters = masters;
    r->n_masters = nm;
    for (int i = 0; i < r->n_nodes; i++) r->nodes[i].slots = 0;
    r->uncovered = 0;
    for (int s = 0; s < ROUTE_SLOTS; s++)
        if (map[s] >= 0) r->nodes[map[s]].slots++;
        else r->uncovered++;
    r->map_stale = false;
    r->map_reads++;
    note_map(r);
    return 0;
bad:
    free(masters);
    return -1;
}

/* the slot map read again from the first node that answers (those
 * connected first, then the rest, the seeds among them; not the nodes a
 * map that failed named): 0, or -1 with err */
static int read_map(route_t *r, char *err, size_t errlen)
{
    int known = r->n_nodes;
    for (int pass = 0; pass < 2; pass++)
        for (int n = 0; n < known; n++) {
            if ((pass == 0) != (r->nodes[n].c != NULL)) continue;
            if (connected(r, n, err, errlen) != 0) continue;
            redisReply *rep = link_command(r->nodes[n].c, "CLUSTER SLOTS");
            if (!rep) {
                snprintf(err, errlen, "redis %s:%d: %s", r->nodes[n].host, r->nodes[n].port, link_error(r->nodes[n].c));
                drop(r, n, err);
                continue;
            }
            int ok = rep->type == REDIS_REPLY_ARRAY && take_map(r, rep, n) == 0;
            if (!ok)
                snprintf(err, errlen, "redis %s:%d: CLUSTER SLOTS: %s", r->nodes[n].host, r->nodes[n].port,
                         rep->type == REDIS_REPLY_ERROR ? rep->str : "not a slot map");
            freeReplyObject(rep);
            if (ok) return 0;
        }
    return -1;
}

/* the first connect to a cluster: each seed reached once, those that
 * cannot be reached named in the notice while the others serve; the
 * first that answers is connected and prepared, its link kept for the
 * map to be read from, the others' bare connects closed again (a replica
 * seed would otherwise keep a connection no command needs); how many
 * answered */
static int try_seeds(route_t *r)
{
    size_t at = 0;
    int good = 0;
    r->seeds_bad[0] = '\0';
    for (int n = 0; n < r->n_seeds; n++) {
        node_t *d = &r->nodes[n];
        char why[512], line[1024];
        bool ok;
        if (!good) {
            /* its line names it ("redis HOST:PORT: ...") */
            ok = connected(r, n, line, sizeof line) == 0;
        } else {
            link_t *c = d->c || tls_ready(r, why, sizeof why) != 0
                            ? NULL
                            : link_open(d->host, d->port, r->tls, wait_ms(r, CONNECT_MS), why, sizeof why);
            ok = d->c || c;
            if (!ok) snprintf(line, sizeof line, "redis %s:%d: %s", d->host, d->port, why);
            link_close(&c);
        }
        if (ok) good++;
        else if (at < sizeof r->seeds_bad)
            at += (size_t)snprintf(r->seeds_bad + at, sizeof r->seeds_bad - at, "%sseed %s", at ? "; " : "", line);
    }
    r->seeds_tried = true;
    return good;
}

/* the notice once a map is read: the seeds' failures, then its uncovered slots */
static void note_map(route_t *r)
{
    int at = snprintf(r->notice, sizeof r->notice, "%s", r->seeds_bad);
    if (r->uncovered && at >= 0 && (size_t)at < sizeof r->notice)
        snprintf(r->notice + at, sizeof r->notice - (size_t)at,
                 "%s%d of %d slots served by no master (their commands fail; with cluster-require-full-coverage no "
                 "the other masters serve the rest)",
                 at ? "; " : "", r->uncovered, ROUTE_SLOTS);
}

const char *route_notice(const route_t *self) { return self->notice; }

int route_connect(route_t *self, char *err, size_t errlen)
{
    if (!self->cluster) return connected(self, 0, err, errlen);
    if (!self->map_stale) return 0;
    if (!self->seeds_tried && try_seeds(self) == 0) {
        snprintf(err, errlen, "%s", self->seeds_bad); /* each seed named */
        size_t used = strlen(err);
        if (used + 40 < errlen) snprintf(err + used, errlen - used, " (no seed of the URL answered)");
        return -1;
    }
    if (read_map(self, err, errlen) != 0) return -1;
    /* every master at once, so that each is prepared (the pool's
     * functions loaded on each) before a command needs it; one that does
     * not answer fails the commands for its slots, not the others */
    char ignored[256];
    for (int i = 0; i < self->n_masters; i++) connected(self, self->masters[i], ignored, sizeof ignored);
    return 0;
}

int route_masters(route_t *self, char *err, size_t errlen)
{
    if (!self->cluster) return self->n_nodes;
    if (self->map_stale && read_map(self, err, errlen) != 0) return -1;
    return self->n_masters;
}

static int master_index(const route_t *self, int i) { return self->cluster ? self->masters[i] : 0; }
const char *route_master_host(const route_t *self, int i) { return self->nodes[master_index(self, i)].host; }
int route_master_port(const route_t *self, int i) { return self->nodes[master_index(self, i)].port; }
int route_master_slots(const route_t *self, int i)
{
    return self->cluster ? self->nodes[master_index(self, i)].slots : ROUTE_SLOTS;
}

/* the node that holds slot (-1: any master): its index, or -1 with err */
static int node_for(route_t *r, int slot, char *err, size_t errlen)
{
    if (r->cluster && r->map_stale && read_map(r, err, errlen) != 0) return -1;
    int n = slot >= 0 ? r->slot_node[slot] : (r->cluster ? (r->n_masters ? r->masters[0] : -1) : 0);
    /* a slot with no master: the map read again, once a second at most,
     * in case an operator has assigned it since */
    long long now = clock_ms();
    if (n < 0 && r->cluster && now - r->uncovered_read_at >= 1000) {
        r->uncovered_read_at = now;
        if (read_map(r, err, errlen) != 0) return -1;
        n = slot >= 0 ? r->slot_node[slot] : (r->n_masters ? r->masters[0] : -1);
    }
    if (n < 0)
        snprintf(err, errlen,
                 "redis %s: no master serves slot %d (%d of %d slots have none: a master down with no replica to "
                 "promote, or slots never assigned)",
                 r->where, slot, r->uncovered, ROUTE_SLOTS);
    return n;
}

/* whether a command only reads (a replica may answer it under READONLY) */
static bool reads_only(int argc, const char *const *argv)
{
    static const char *const readers[] = {"GET",      "MGET",   "HGET",  "HMGET",    "HLEN",        "HSTRLEN",
                                          "STRLEN",   "EXISTS", "SCARD", "SMEMBERS", "SRANDMEMBER", "SISMEMBER",
                                          "FCALL_RO", "TTL",    "PTTL",  NULL};
    for (int i = 0; argc > 0 && readers[i]; i++)
        if (strcasecmp(argv[0], readers[i]) == 0) return true;
    return false;
}

/* the replica that may answer a read of slot while its master is down,
 * or -1 */
static int replica_for(const route_t *r, int slot, int argc, const char *const *argv)
{
    return r->cluster && slot >= 0 && reads_only(argc, argv) ? r->slot_replica[slot] : -1;
}

// ----------------------------------------------------------------------------
// commands

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": the node named (added when
 * new) and the slot, or -1 */
static int redirect_node(route_t *r, const char *msg, int *slot)
{
    const char *p = strchr(msg, ' ');
    if (!p) return -1;
    char *e;
    long s = strtol(p + 1, &e, 10);
    if (e == p + 1 || *e != ' ' || s < 0 || s >= ROUTE_SLOTS) return -1;
    const char *host = e + 1, *colon = strrchr(host, ':');
    if (!colon) return -1;
    long port = strtol(colon + 1, &e, 10);
    if (e == colon + 1 || port <= 0 || port > 65535) return -1;
    *slot = (int)s;
    return node_of(r, host, (size_t)(colon - host), (int)port);
}

/* node n's connection broke mid-pipeline: the reason into err, the
 * connection dropped */
static void broken(route_t *r, int n, char *err, size_t errlen)
{
    link_t *c = r->nodes[n].c;
    node_t *d = &r->nodes[n];
    /* a read that timed out: a slow or stalled node */
    if (timed_out(c))
        snprintf(err, errlen, "redis %s:%d: no reply %s", d->host, d->port,
                 r->deadline ? "before the call's deadline" : "within the reply timeout");
    else snprintf(err, errlen, "redis %s:%d: %s", d->host, d->port, c && link_error(c)[0] ? link_error(c) : "no reply");
    drop(r, n, err);
}

static bool is_error(const redisReply *rep, const char *code)
{
    size_t n = strlen(code);
    return rep->type == REDIS_REPLY_ERROR && rep->len >= n && strncmp(rep->str, code, n) == 0 &&
           (rep->str[n] == ' ' || rep->str[n] == '\0');
}

/* the command on node n (after ASKING where asking): the reply, or NULL
 * with err when the connection broke (it is dropped) */
static redisReply *run_on(route_t *r, int n, bool asking, int argc, const char **argv, const size_t *lens, char *err,
                          size_t errlen)
{
    if (connected(r, n, err, errlen) != 0) return NULL;
    link_t *c = r->nodes[n].c;
    redisReply *rep = NULL;
    if (asking) {
        const char *ask[] = {"ASKING"};
        if (link_append(c, 1, ask, NULL) != 0 || link_append(c, argc, argv, lens) != 0 || link_reply(c, &rep) != 0)
            goto broke;
        freeReplyObject(rep);
        rep = NULL;
        if (link_reply(c, &rep) != 0) goto broke;
        return rep;
    }
    rep = link_command_argv(c, argc, argv, lens);
    if (rep) return rep;
broke:
    broken(r, n, err, errlen);
    return NULL;
}

/* MOVED: slot lives at node to now. The map is read again when reread
 * (once a call, however many of its replies say MOVED), and the slot set
 * from the reply after it, since a node that has not yet heard of the
 * move can answer the read with the old owner */
static void moved(route_t *r, int slot, int to, bool reread)
{
    char ignored[256];
    r->moved++;
    if (reread && read_map(r, ignored, sizeof ignored) != 0) r->map_stale = true;
    r->slot_node[slot] = (int16_t)to;
}

/* The command routed, its redirections followed: the reply, or NULL with
 * err. A try is one run where the slot lives, and where that answers ASK
 * (the slot is migrating and the keys are not all there), one more at
 * the node named, after ASKING */
static redisReply *routed(route_t *r, int slot, int argc, const char **argv, const size_t *lens, char *err,
                          size_t errlen)
{
    bool reread = false;
    int t = 0;
    for (; t < ROUTE_TRIES && (t == 0 || left_ms(r, 1) > 0); t++) {
        int n = node_for(r, slot, err, errlen), s, to, c;
        redisReply *rep = n >= 0 ? run_on(r, n, false, argc, argv, lens, err, errlen) : NULL;
        /* a read of a master that is down: its replica answers, as the
         * master last had it */
        if (!rep && n >= 0 && (c = replica_for(r, slot, argc, argv)) >= 0 && c != n) {
            char why[512];
            if ((rep = run_on(r, c, false, argc, argv, lens, why, sizeof why))) r->replica_reads++;
        }
        if (rep && r->cluster && is_error(rep, "ASK") && (to = redirect_node(r, rep->str, &s)) >= 0) {
            r->asked++;
            freeReplyObject(rep);
            rep = run_on(r, to, true, argc, argv, lens, err, errlen);
        }
        if (!rep) {
            /* a master gone: its replica takes over once the cluster
             * agrees. Under a deadline the call does not wait for that:
             * it fails at once, in the words of the failure (the node is
             * tried again after its wait, on a later call), so a round's
             * calls to a dead master cost it nothing and say one thing */
            if (!r->cluster || r->deadline) return NULL;
            sleep_ms(r, 100L << (t < 4 ? t : 4));
            continue;
        }
        if (r->cluster && is_error(rep, "MOVED") && (to = redirect_node(r, rep->str, &s)) >= 0) {
            /* a second MOVED in one call: the slot's masters are still
             * being told of its move (one node sends the command back to
             * the other until both know), so wait a moment first */
            if (reread) sleep_ms(r, 10L << (t < 5 ? t : 5));
            moved(r, s, to, !reread);
            reread = true;
        } else if (r->cluster && is_error(rep, "TRYAGAIN")) {
            /* the keys are split between the slot's two ends until the
             * next MIGRATE: wait, then ask the source again */
            r->tryagain++;
            if (t + 1 < ROUTE_TRIES) sleep_ms(r, (long)TRYAGAIN_FIRST_MS << t);
        } else if (r->cluster && is_error(rep, "CLUSTERDOWN")) {
            r->map_stale = true;
            sleep_ms(r, 50L << (t < 4 ? t : 4));
        } else {
            return rep;
        }
        snprintf(err, errlen, "redis %s: %s", r->where, rep->str);
        freeReplyObject(rep);
    }
    size_t used = strlen(err);
    if (used + 60 < errlen)
        snprintf(err + used, errlen - used,
                 t < ROUTE_TRIES ? " (gave up at the call's deadline, %d tries)" : " (gave up after %d tries)", t);
    return NULL;
}

redisReply *route_run(route_t *self, const char *key, int argc, const char **argv, const size_t *lens, char *err,
                      size_t errlen)
{
    return routed(self, key ? route_slot(key, strlen(key)) : -1, argc, argv, lens, err, errlen);
}

int route_append(route_t *self, const char *key, int argc, const char **argv, const size_t *lens)
{
    if (self->n_queued == self->cap_queued) {
        int cap = self->cap_queued ? 2 * self->cap_queued : 16;
        queued_t *grown = realloc(self->queue, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        self->queue = grown;
        self->cap_queued = cap;
    }
    queued_t *q = &self->queue[self->n_queued];
    q->slot = key ? route_slot(key, strlen(key)) : -1;
    q->argc = argc;
    q->argv = calloc((size_t)argc, sizeof *q->argv);
    q->lens = malloc((size_t)argc * sizeof *q->lens);
    if (!q->argv || !q->lens) {
        free(q->argv);
        free(q->lens);
        return -1;
    }
    for (int a = 0; a < argc; a++) {
        size_t len = lens ? lens[a] : strlen(argv[a]);
        q->argv[a] = malloc(len + 1);
        if (!q->argv[a]) {
            for (int b = 0; b < a; b++) free(q->argv[b]);
            free(q->argv);
            free(q->lens);
            return -1;
        }
        memcpy(q->argv[a], argv[a], len);
        q->argv[a][len] = '\0';
        q->lens[a] = len;
    }
    self->n_queued++;
    return 0;
}

int route_queued(const route_t *self) { return self->n_queued; }

void route_discard(route_t *self) { queue_clear(self); }

/* a reply that only says where to go, or that the cluster is changing */
static bool redirected(const route_t *r, const redisReply *rep)
{
    return r->cluster && (is_error(rep, "MOVED") || is_error(rep, "ASK") || is_error(rep, "TRYAGAIN") ||
                          is_error(rep, "CLUSTERDOWN"));
}

/* count more commands failed for the reason why, the first reason kept in err */
static void failing(int *failed, int count, const char *why, char *err, size_t errlen)
{
    if (*failed == 0 && count > 0) snprintf(err, errlen, "%s", why);
    *failed += count;
}

int route_replies(route_t *self, redisReply **out, char *err, size_t errlen)
{
    int n = self->n_queued, failed = 0;
    int *node = malloc((size_t)(n ? n : 1) * sizeof *node);
    bool *sent = calloc((size_t)self->n_nodes + 1, sizeof *sent);
    char why[512] = "";
    if (!node || !sent) {
        free(node), free(sent);
        queue_clear(self);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++)
        if ((node[i] = node_for(self, self->queue[i].slot, why, sizeof why)) < 0) {
            node[i] = -2; /* no node serves its slot: it fails alone */
            failing(&failed, 1, why, err, errlen);
        }
    /* one round trip per node, all in flight at once: every node's
     * commands appended and sent, then each node's replies read. A master
     * that cannot be reached hands its reads to its replica, sent in a
     * second pass (tried marks the nodes the first pass reached for) */
    bool *tried = calloc((size_t)self->n_nodes + 1, sizeof *tried);
    for (int pass = 0; pass < 2 && tried; pass++)
        for (int d = 0; d < self->n_nodes; d++) {
            int mine = 0;
            for (int i = 0; i < n; i++) mine += node[i] == d;
            if (!mine || tried[d]) continue;
            tried[d] = true;
            if (connected(self, d, why, sizeof why) != 0) {
                for (int i = 0; i < n; i++) {
                    int c = node[i] == d ? replica_for(self, self->queue[i].slot, self->queue[i].argc,
                                                       (const char *const *)self->queue[i].argv)
                                         : -1;
                    if (pass == 0 && c >= 0 && c != d && !tried[c]) node[i] = c, mine--, self->replica_reads++;
                }
                failing(&failed, mine, why, err, errlen);
                for (int i = 0; i < n; i++)
                    if (node[i] == d) node[i] = -2;
                continue;
            }
            link_t *c = self->nodes[d].c;
            bool ok = true;
            for (int i = 0; i < n && ok; i++)
                if (node[i] == d)
                    ok = link_append(c, self->queue[i].argc, (const char **)self->queue[i].argv, self->queue[i].lens) ==
                         0;
            ok = ok && link_flush(c) == 0;
            if (ok) sent[d] = true;
            else {
                broken(self, d, why, sizeof why);
                failing(&failed, mine, why, err, errlen);
            }
        }
    if (!tried) {
        free(node), free(sent);
        queue_clear(self);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(tried);
    for (int d = 0; d < self->n_nodes; d++) {
        if (!sent[d]) continue;
        link_t *c = self->nodes[d].c;
        int unanswered = 0;
        for (int i = 0; i < n; i++) {
            if (node[i] != d) continue;
            redisReply *rep = NULL;
            if (!unanswered && link_reply(c, &rep) == 0) out[i] = rep;
            else unanswered++; /* this node's commands from the first unanswered fail alone */
        }
        /* replies not read would answer the next command */
        if (unanswered) {
            broken(self, d, why, sizeof why);
            failing(&failed, unanswered, why, err, errlen);
        }
    }
    free(sent);
    /* the reads of a master that broke or fell silent mid-pipeline, asked
     * of its replica one by one, within what is left of the deadline */
    for (int i = 0; i < n; i++) {
        int c = !out[i] && node[i] >= 0 ? replica_for(self, self->queue[i].slot, self->queue[i].argc,
                                                      (const char *const *)self->queue[i].argv)
                                        : -1;
        if (c < 0 || c == node[i]) continue;
        out[i] = run_on(self, c, false, self->queue[i].argc, (const char **)self->queue[i].argv, self->queue[i].lens,
                        why, sizeof why);
        if (out[i]) failed--, self->replica_reads++;
    }
    /* what was sent elsewhere, one by one, after the map has learnt from
     * every MOVED among the replies (read again once) */
    bool reread = false;
    for (int i = 0; i < n; i++) {
        int s, to;
        if (out[i] && is_error(out[i], "MOVED") && self->cluster && (to = redirect_node(self, out[i]->str, &s)) >= 0) {
            moved(self, s, to, !reread);
            reread = true;
        }
    }
    for (int i = 0; i < n; i++) {
        if (!out[i] || !redirected(self, out[i])) continue;
        freeReplyObject(out[i]);
        out[i] = routed(self, self->queue[i].slot, self->queue[i].argc, (const char **)self->queue[i].argv,
                        self->queue[i].lens, why, sizeof why);
        if (!out[i]) failing(&failed, 1, why, err, errlen);
    }
    free(node);
    queue_clear(self);
    return failed;
}
