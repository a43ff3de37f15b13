/* pool: looks at and feeds a swarm's Redis pool.
 *   pool size [--redis URL] [--swarm S] [--node N]     live entries (all nodes, or one)
 *   pool sample [--redis URL] [--swarm S] [--exclude N] [--count K] [--window R]
 *                                                      up to K entries as JSON lines (records whose
 *                                                      signature verifies; others named on stderr),
 *                                                      drawn as a node's SampleExternal draws:
 *                                                      without replacement, from every live entry,
 *                                                      or with --window from the fresh entries of
 *                                                      the publishers' last R rounds
 *   pool publish --node N [--key FILE] [--round R] [--redis URL] [--swarm S] FILE...
 *                                                      publishes record files as node N
 *                                                      in its round R (default 0)
 *   pool register --node N --key FILE [--redis URL] [--swarm S]
 *                                                      registers FILE's public key as N's
 *   pool key --key FILE                                prints FILE's public key (64 hex digits),
 *                                                      making the key file when missing
 * Defaults come from SAPO_REDIS, SAPO_SWARM and SAPO_TLS_* as for the node. publish
 * with --key registers the key as N's and signs each record as the node
 * does; without it, publish sends bytes as they are, which is how tests
 * play a hostile peer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/identity.h"
#include "pool/pool.h"
#include "records.h"

static void usage(void)
{
    fprintf(stderr, "usage: pool size|sample|publish|register|key [--redis URL] [--swarm S] [--node N] [--key FILE] "
                    "[--exclude N] [--count K] [--window R] [--round R] [FILE...]\n");
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* 0, or 1/2 after a line on stderr (2: a usage error) */
static int register_key(pool_t *pool, const char *node, const identity_t *id)
{
    char err[512];
    if (!node || !id) {
        fprintf(stderr, "pool: register needs --node N and --key FILE\n");
        return 2;
    }
    if (pool_register_key(pool, node, identity_public(id), err, sizeof err) != 0) {
        fprintf(stderr, "pool: %s\n", err);
        return 1;
    }
    return 0;
}

typedef struct {
    const char *cmd, *redis, *swarm, *node, *exclude, *key;
    int count, window, nfiles;
    unsigned long long round;
    const char **files;
} args_t;

/* the flags and files after the command; 2 after a line on stderr */
static int parse_args(int argc, char **argv, args_t *o)
{
    for (int a = 2; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(argv[a], "--redis") && v) o->redis = argv[++a];
        else if (!strcmp(argv[a], "--swarm") && v) o->swarm = argv[++a];
        else if (!strcmp(argv[a], "--node") && v) o->node = argv[++a];
        else if (!strcmp(argv[a], "--exclude") && v) o->exclude = argv[++a];
        else if (!strcmp(argv[a], "--key") && v) o->key = argv[++a];
        else if (!strcmp(argv[a], "--count") && v) {
            o->count = atoi(argv[++a]);
            if (o->count < 1) {
                fprintf(stderr, "pool: --count '%s': expected a positive integer\n", argv[a]);
                return 2;
            }
        } else if (!strcmp(argv[a], "--window") && v) {
            o->window = atoi(argv[++a]);
            if (o->window < 1) {
                fprintf(stderr, "pool: --window '%s': expected a positive integer\n", argv[a]);
                return 2;
            }
        } else if (!strcmp(argv[a], "--round") && v) {
            char *end;
            o->round = strtoull(argv[++a], &end, 10);
            if (!*argv[a] || *end || argv[a][0] == '-') {
                fprintf(stderr, "pool: --round '%s': expected a round number (0 or more)\n", argv[a]);
                return 2;
            }
        } else if (argv[a][0] == '-') {
            fprintf(stderr, "pool: unknown or incomplete flag '%s'\n", argv[a]);
            return 2;
        } else o->files[o->nfiles++] = argv[a];
    }
    return 0;
}

static int cmd_key(const identity_t *id)
{
    char hex[65];
    if (!id) {
        fprintf(stderr, "pool: key needs --key FILE\n");
        return 2;
    }
    identity_public_hex(identity_public(id), hex, sizeof hex);
    printf("%s\n", hex);
    return 0;
}

static int cmd_size(pool_t *pool, const args_t *o)
{
    char err[512];
    long n = o->node ? pool_size_node(pool, o->node, err, sizeof err) : pool_size_total(pool, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "pool: %s\n", err);
        return 1;
    }
    printf("%ld\n", n);
    return 0;
}

/* entry i as a JSON line when its signature verifies under its node's
 * key, else a line on stderr saying why not */
static void print_entry(pool_t *pool, const pool_entry_t *e, int i)
{
    char err[512];
    if (!e->data) {
        fprintf(stderr, "pool: entry %d: node %s: %zu bytes, over the record limit; not fetched\n", i, e->node, e->len);
        return;
    }
    uint8_t pub[IDENTITY_PUBLIC_BYTES];
    int known = pool_node_key(pool, e->node, pub, err, sizeof err);
    const uint8_t *rec = NULL;
    size_t rec_len = 0;
    int opened = known == 1 ? identity_open(pub, e->data, e->len, &rec, &rec_len) : -1;
    if (opened < 0) {
        fprintf(stderr, "pool: entry %d: node %s: unsigned (%s)\n", i, e->node,
                known < 0    ? err
                : known == 0 ? "no key registered"
                             : "shorter than a signature");
        return;
    }
    if (!opened) {
        fprintf(stderr, "pool: entry %d: node %s: signature does not verify under its key\n", i, e->node);
        return;
    }
    char *json = rec_to_json(rec, rec_len, err, sizeof err);
    if (json) printf("%s\n", json);
    else fprintf(stderr, "pool: entry %d: node %s: %s\n", i, e->node, err);
    free(json);
}

static int cmd_sample(pool_t *pool, const args_t *o)
{
    char err[512];
    int rc = 0;
    pool_entry_t *e;
    if (o->window) pool_window(pool, o->window, 0);
    int n = pool_draw(pool, o->exclude, o->count, &e, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "pool: %s\n", err);
        rc = 1;
    }
    for (int i = 0; i < n; i++) print_entry(pool, &e[i], i);
    pool_entries_free(e, n);
    return rc;
}

static int cmd_publish(pool_t *pool, const args_t *o, const identity_t *id)
{
    char err[512];
    int rc = 0;
    if (!o->node || o->nfiles == 0) {
        fprintf(stderr, "pool: publish needs --node N and at least one FILE\n");
        rc = 2;
    } else if (id) {
        rc = register_key(pool, o->node, id);
    }
    for (int i = 0; rc == 0 && i < o->nfiles; i++) {
        size_t len, entry_len;
        char *buf = slurp(o->files[i], &len);
        uint8_t *entry = buf && id ? identity_seal(id, buf, len, &entry_len) : NULL;
        if (!buf) {
            fprintf(stderr, "pool: %s: cannot read\n", o->files[i]);
            rc = 1;
        } else if (pool_publish(pool, o->node, o->round, entry ? entry : (uint8_t *)buf, entry ? entry_len : len, err,
                                sizeof err) != 0) {
            fprintf(stderr, "pool: %s\n", err);
            rc = 1;
        }
        free(entry);
        free(buf);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    args_t o = {.cmd = argv[1], .redis = getenv("SAPO_REDIS"), .swarm = getenv("SAPO_SWARM"), .count = 1};
    if (!o.redis || !*o.redis) o.redis = "redis://127.0.0.1:6379";
    if (!o.swarm || !*o.swarm) o.swarm = "sapo";
    o.files = calloc((size_t)argc, sizeof *o.files);
    if (parse_args(argc, argv, &o) != 0) return 2;
    char err[512];
    identity_t *id = NULL;
    if (o.key && !(id = identity_load(o.key, err, sizeof err))) {
        fprintf(stderr, "pool: %s\n", err);
        return 2;
    }
    pool_t *pool = pool_new(o.redis, o.swarm, 1 << 30, err, sizeof err);
    if (pool && pool_tls(pool, getenv("SAPO_TLS_CA"), getenv("SAPO_TLS_CERT"), getenv("SAPO_TLS_KEY"),
                         getenv("SAPO_TLS_NAME"), err, sizeof err) != 0)
        pool_destroy(&pool);
    if (!pool) {
        fprintf(stderr, "pool: %s\n", err);
        free(o.files);
        identity_destroy(&id);
        return 2;
    }
    int rc;
    if (!strcmp(o.cmd, "key")) rc = cmd_key(id);
    else if (!strcmp(o.cmd, "register")) rc = register_key(pool, o.node, id);
    else if (!strcmp(o.cmd, "size")) rc = cmd_size(pool, &o);
    else if (!strcmp(o.cmd, "sample")) rc = cmd_sample(pool, &o);
    else if (!strcmp(o.cmd, "publish")) rc = cmd_publish(pool, &o, id);
    else {
        fprintf(stderr, "pool: unknown command '%s'\n", o.cmd);
        usage();
        rc = 2;
    }
    free(o.files);
    identity_destroy(&id);
    pool_destroy(&pool);
    return rc;
}
