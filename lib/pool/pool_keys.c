/* Node ids and node keys. An id is part of every key name of its node
 * (S:n:N:...), which is what per-node ACL users restrict, so every id
 * that becomes a key name, or is read back from S:nodes, passes
 * pool_node_ok here. S:n:N:key holds the node's public key, first come;
 * a pool keeps the first key it sees for a node (trust on first use), so
 * a key changed in Redis later cannot make another's records verify. */
#include "pool/pool_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/identity.h"

/* nodes whose keys a pool remembers (trust on first use) */
#define KEYS_MAX 4096

/* Node ids become part of key names: a ':' or a glob character would let
 * one node's keys fall under another node's ACL pattern. */
int pool_node_ok(const char *node, char *err, size_t errlen)
{
    size_t n = node ? strlen(node) : 0;
    size_t good = node ? strspn(node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") : 0;
    if (n == 0 || n > 63 || good != n) {
        snprintf(err, errlen, "pool: node id '%s' must be 1..63 letters, digits, '_', '.' or '-'", node ? node : "");
        return -1;
    }
    return 0;
}

/* whether a member of S:nodes is a node other than exclude: a name that
 * cannot be a node's is skipped, its keys are no one's */
int pool_other_node(const redisReply *e, const char *exclude)
{
    char ebuf[128];
    return e->type == REDIS_REPLY_STRING && e->len < 64 && strlen(e->str) == e->len && strcmp(e->str, exclude) != 0 &&
           pool_node_ok(e->str, ebuf, sizeof ebuf) == 0;
}

/* qsort order of string replies by their text */
int pool_by_name(const void *a, const void *b)
{
    return strcmp((*(const redisReply *const *)a)->str, (*(const redisReply *const *)b)->str);
}

static void remember_key(pool_t *self, const char *node, const uint8_t pub[32])
{
    if (!self->keys && !(self->keys = calloc(KEYS_MAX, sizeof *self->keys))) return;
    if (self->n_keys == KEYS_MAX) return;
    snprintf(self->keys[self->n_keys].node, sizeof self->keys[0].node, "%s", node);
    memcpy(self->keys[self->n_keys++].pub, pub, 32);
}

static const uint8_t *known_key(const pool_t *self, const char *node)
{
    for (int i = 0; i < self->n_keys; i++)
        if (strcmp(self->keys[i].node, node) == 0) return self->keys[i].pub;
    return NULL;
}

int pool_register_key(pool_t *self, const char *node, const uint8_t pub[32], char *err, size_t errlen)
{
    pool_begin(self);
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    char key[POOL_KEY_MAX], hex[65];
    pool_key(self, node, "key", key);
    identity_public_hex(pub, hex, sizeof hex);
    const char *argv[] = {"FCALL", "sapo_register", "1", key, hex};
    size_t lens[] = {5, 13, 1, strlen(key), strlen(hex)};
    redisReply *r = pool_run(self, key, 5, argv, lens, err, errlen);
    if (!r) return -1;
    uint8_t held[32];
    int parsed = r->type == REDIS_REPLY_STRING && identity_public_parse(r->str, r->len, held) == 0;
    freeReplyObject(r);
    if (parsed && memcmp(held, pub, 32) == 0) {
        if (!known_key(self, node)) remember_key(self, node, pub);
        return 0;
    }
    char fp[IDENTITY_FINGERPRINT_HEX + 1] = "not a key";
    if (parsed) identity_fingerprint(held, fp, sizeof fp);
    snprintf(err, errlen, "node id %s is registered to another key (fingerprint %s) at %s in redis %s", node, fp, key,
             route_where(self->route));
    return -2;
}

int pool_node_key(pool_t *self, const char *node, uint8_t pub[32], char *err, size_t errlen)
{
    pool_begin(self);
    if (pool_node_ok(node, err, errlen) < 0) return -1;
    const uint8_t *known = known_key(self, node);
    if (known) {
        memcpy(pub, known, 32);
        return 1;
    }
    char key[POOL_KEY_MAX];
    pool_key(self, node, "key", key);
    const char *argv[] = {"GET", key};
    size_t lens[] = {3, strlen(key)};
    redisReply *r = pool_run(self, key, 2, argv, lens, err, errlen);
    if (!r) return -1;
    int found = r->type == REDIS_REPLY_STRING && identity_public_parse(r->str, r->len, pub) == 0;
    freeReplyObject(r);
    if (found) remember_key(self, node, pub);
    return found;
}

void pool_key(const pool_t *p, const char *node, const char *what, char *out)
{
    const char *fmt = route_is_cluster(p->route) ? "%s:n:{%s}:%s" : "%s:n:%s:%s";
    snprintf(out, POOL_KEY_MAX, fmt, p->swarm, node, what);
}
