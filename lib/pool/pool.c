/* The pool's connection to Redis, and the pool_t every other file of
 * lib/pool works through: the URL, the swarm prefix and the settings a
 * node chooses, one hiredis context made on first use and made again
 * after a failure with backoff (so an unreachable Redis costs a node one
 * quick error per call, never a hang), and the Redis Functions library
 * (pool.lua) that a connect loads where the server holds another or none. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/splitmix.h"

/* no entry larger than records.h's REC_MAX_BYTES and a 64-byte signature
 * (util/identity.h) enters the pool */
#define ENTRY_MAX_BYTES 16777280 /* pool.lua's sapo_publish refuses larger ones */
/* pool_stage_ttl's default, in ms: see pool.h */
#define STAGE_TTL_MS 600000
/* pool_deadline's default, in ms: a single Redis's reply timeout */
#define DEADLINE_MS 2000

/* Redis Functions library (lib/pool/pool.lua, embedded by the build),
 * loaded (REPLACE) at a connect that finds another or none, so a newer
 * sapo upgrades a running Redis. */
static const char POOL_LIBRARY[] =
#include "pool_lua.inc"
    ;

/* whether the server holds this very library (FUNCTION LIST's code, for
 * a user allowed to list; -1: no reply): loading it at every connect would compile it
 * again each time, and a library over Redis's 16 KB read leaves each
 * new connection a larger query buffer until the server trims it */
static int library_held(link_t *c)
{
    redisReply *r = link_command(c, "FUNCTION LIST LIBRARYNAME sapo_pool WITHCODE");
    if (!r) return -1;
    bool same = false;
    const redisReply *lib = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 ? r->element[0] : NULL;
    /* a library is a flat list of names and values */
    for (size_t i = 0; lib && lib->type == REDIS_REPLY_ARRAY && i + 1 < lib->elements; i += 2) {
        const redisReply *name = lib->element[i], *code = lib->element[i + 1];
        if (name->type == REDIS_REPLY_STRING && strcmp(name->str, "library_code") == 0)
            same = code->type == REDIS_REPLY_STRING && code->len == sizeof POOL_LIBRARY - 1 &&
                   memcmp(code->str, POOL_LIBRARY, code->len) == 0;
    }
    freeReplyObject(r);
    return same;
}

/* Each new connection, to one Redis or to each node of a cluster: the
 * URL's user, its database, and the pool's functions (a master of a
 * cluster holds its own; replicas get them from it) */
static int prepare(void *ctx, link_t *c, const char *where, char *err, size_t errlen)
{
    pool_t *p = ctx;
    const char *user = route_user(p->route), *password = route_password(p->route);
    redisReply *r;
    if (password[0]) {
        r = user[0] ? link_command(c, "AUTH %s %s", user, password) : link_command(c, "AUTH %s", password);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "%s: AUTH: %s", where, r ? r->str : link_error(c));
            freeReplyObject(r);
            return -1;
        }
        freeReplyObject(r);
    }
    if (route_db(p->route)) {
        r = link_command(c, "SELECT %d", route_db(p->route));
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "%s: SELECT %d: %s", where, route_db(p->route), r ? r->str : link_error(c));
            freeReplyObject(r);
            return -1;
        }
        freeReplyObject(r);
    }
    /* a node's ACL user may not list or load functions: the operator has
     * (bin/pool as admin), and a missing library shows up as an error on
     * first use */
    int held = library_held(c);
    if (held < 0) {
        snprintf(err, errlen, "%s: FUNCTION LIST: %s", where, link_error(c));
        return -1;
    }
    if (held) return 0;
    r = link_command(c, "FUNCTION LOAD REPLACE %s", POOL_LIBRARY);
    if (!r) {
        snprintf(err, errlen, "%s: FUNCTION LOAD: %s", where, link_error(c));
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOPERM", 6) != 0) {
        snprintf(err, errlen, "%s: FUNCTION LOAD (Redis 7 or newer needed): %s", where, r->str);
        freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

pool_t *pool_new(const char *url, const char *swarm, int max_per_node, char *err, size_t errlen)
{
    pool_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(p->route = route_new(url, err, errlen))) {
        free(p);
        return NULL;
    }
    route_on_connect(p->route, prepare, p);
    if (swarm && strpbrk(swarm, "{}")) {
        /* a cluster takes a key's slot from its first {...}: the prefix's
         * would put every node's keys in one slot */
        snprintf(err, errlen,
                 "pool: swarm prefix '%s' may not hold '{' or '}' (a Redis Cluster hashes a key by its "
                 "first {...}, which must be the node's)",
                 swarm);
        route_destroy(&p->route);
        free(p);
        return NULL;
    }
    if (!swarm || !*swarm || strlen(swarm) >= sizeof p->swarm || max_per_node < 1) {
        snprintf(err, errlen, "pool: swarm prefix must be 1..%zu bytes and the bound at least 1", sizeof p->swarm - 1);
        route_destroy(&p->route);
        free(p);
        return NULL;
    }
    snprintf(p->swarm, sizeof p->swarm, "%s", swarm);
    p->max_per_node = max_per_node;
    p->max_bytes = ENTRY_MAX_BYTES;
    p->stage_ttl_ms = STAGE_TTL_MS;
    p->deadline_ms = DEADLINE_MS;
    p->rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)p;
    return p;
}

void pool_disconnect(pool_t *p) { route_disconnect(p->route); }

void pool_destroy(pool_t **self_p)
{
    if (!self_p || !*self_p) return;
    route_destroy(&(*self_p)->route);
    for (int i = 0; i < (*self_p)->n_peers; i++) free((*self_p)->peers[i].seq);
    free((*self_p)->peers);
    free((*self_p)->slot);
    free((*self_p)->keys);
    freeReplyObject((*self_p)->node_set);
    free(*self_p);
    *self_p = NULL;
}

void pool_seed(pool_t *self, uint64_t seed) { self->rng = seed ? seed : 1; }

void pool_window(pool_t *self, int rounds, double seconds)
{
    self->window_rounds = rounds > 0 ? rounds : 0;
    self->window_ms = seconds > 0 ? (long)(seconds * 1000 + 0.5) : 0;
}

void pool_limit_record(pool_t *self, size_t max_bytes) { self->max_bytes = max_bytes; }

void pool_deadline(pool_t *self, double seconds) { self->deadline_ms = seconds > 0 ? (long)(seconds * 1000 + 0.5) : 0; }

void pool_begin(pool_t *p) { route_deadline(p->route, p->deadline_ms); }

const char *pool_notice(const pool_t *self) { return route_notice(self->route); }

bool pool_clear_remote(const pool_t *self) { return route_clear_remote(self->route); }
int pool_tls(pool_t *self, const char *ca, const char *cert, const char *key, const char *name, char *err,
             size_t errlen)
{
    return route_tls(self->route, ca, cert, key, name, err, errlen);
}

const char *pool_where(const pool_t *self) { return route_where(self->route); }

/* a double in [0, 1) */
double pool_uniform(pool_t *p) { return (double)(splitmix64(&p->rng) >> 11) * 0x1.0p-53; }

int pool_connect(pool_t *p, char *err, size_t errlen)
{
    time_t now = time(NULL);
    if (now < p->retry_at) {
        /* one text for the whole wait, so a caller can log it once */
        snprintf(err, errlen, "redis %s unreachable (retried with backoff, every 30 s at most)", route_where(p->route));
        return -1;
    }
    if (route_connect(p->route, err, errlen) == 0) {
        p->backoff_s = 0;
        return 0;
    }
    pool_disconnect(p);
    p->backoff_s = p->backoff_s ? (p->backoff_s * 2 > 30 ? 30 : p->backoff_s * 2) : 1;
    p->retry_at = now + p->backoff_s;
    return -1;
}

redisReply *pool_run(pool_t *p, const char *key, int argc, const char **argv, const size_t *lens, char *err,
                     size_t errlen)
{
    if (pool_connect(p, err, errlen) != 0) return NULL;
    redisReply *r = route_run(p->route, key, argc, argv, lens, err, errlen);
    if (!r) {
        /* a broken connection: the next call connects again at once */
        p->retry_at = 0;
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        pool_error_reply(p, argv[0], r, err, errlen);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

void pool_error_reply(const pool_t *p, const char *what, const redisReply *r, char *err, size_t errlen)
{
    /* a node's ACL user may not load the functions (prepare): the
     * operator loads them once, by any bin/pool command as the admin */
    bool unloaded = strncmp(r->str, "ERR Function not found", 22) == 0;
    snprintf(err, errlen, "redis %s: %s: %s%s", route_where(p->route), what, r->str,
             unloaded ? " (the pool's functions are not loaded there and this user may not load them: the operator "
                        "loads them once with the admin's URL, e.g. bin/pool size --redis redis://admin:PASS@HOST:PORT)"
                      : "");
}

int pool_append(pool_t *p, const char *key, int argc, const char **argv, const size_t *lens)
{
    return route_append(p->route, key, argc, argv, lens);
}

/* one pipelined round trip per node: the n commands appended, their n
 * replies into out[] (an error reply among them is the caller's to read:
 * a key a hostile node made the wrong type is one entry missing, not a
 * failed draw); 0, or -1 with err when a connection broke (it is then
 * dropped: replies not read would answer the next command) */
int pool_replies(pool_t *p, int n, redisReply **out, char *err, size_t errlen)
{
    (void)n; /* route_replies answers every command appended: n of them */
    if (pool_connect(p, err, errlen) != 0) {
        route_discard(p->route); /* none of them run */
        return -1;
    }
    if (route_replies(p->route, out, err, errlen) != 0) {
        for (int i = 0; i < n; i++) {
            freeReplyObject(out[i]);
            out[i] = NULL;
        }
        p->retry_at = 0;
        return -1;
    }
    return 0;
}

int pool_replies_each(pool_t *p, int n, redisReply **out, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (pool_connect(p, err, errlen) != 0) {
        route_discard(p->route);
        return -1;
    }
    int failed = route_replies(p->route, out, err, errlen);
    if (failed != 0) p->retry_at = 0;
    return failed < n ? failed : -1;
}

void pool_entries_free(pool_entry_t *e, int n)
{
    for (int i = 0; e && i < n; i++) free(e[i].data);
    free(e);
}
