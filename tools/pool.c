/* pool: looks at and feeds a swarm's Redis rollout pool.
 *   pool size [--redis URL] [--swarm S] [--node N]     live entries (all nodes, or one)
 *   pool sample [--redis URL] [--swarm S] [--exclude N] [--count K]
 *                                                      K draws as JSON lines
 *   pool publish --node N [--redis URL] [--swarm S] FILE...
 *                                                      publishes record files as node N
 * Defaults come from SAPO_REDIS and SAPO_SWARM as for the node. publish
 * sends bytes as they are, which is how tests play a hostile peer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool.h"
#include "records.h"

static void usage(void)
{
    fprintf(stderr, "usage: pool size|sample|publish [--redis URL] [--swarm S] [--node N] [--exclude N] [--count K] [FILE...]\n");
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    const char *cmd = argv[1];
    const char *redis = getenv("SAPO_REDIS"), *swarm = getenv("SAPO_SWARM"), *node = NULL, *exclude = NULL;
    if (!redis || !*redis) redis = "redis://127.0.0.1:6379";
    if (!swarm || !*swarm) swarm = "sapo";
    int count = 1, nfiles = 0;
    const char **files = calloc((size_t)argc, sizeof *files);
    for (int a = 2; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(argv[a], "--redis") && v) redis = argv[++a];
        else if (!strcmp(argv[a], "--swarm") && v) swarm = argv[++a];
        else if (!strcmp(argv[a], "--node") && v) node = argv[++a];
        else if (!strcmp(argv[a], "--exclude") && v) exclude = argv[++a];
        else if (!strcmp(argv[a], "--count") && v) {
            count = atoi(argv[++a]);
            if (count < 1) {
                fprintf(stderr, "pool: --count '%s': expected a positive integer\n", argv[a]);
                return 2;
            }
        } else if (argv[a][0] == '-') {
            fprintf(stderr, "pool: unknown or incomplete flag '%s'\n", argv[a]);
            return 2;
        } else files[nfiles++] = argv[a];
    }
    char err[512];
    pool_t *pool = pool_new(redis, swarm, 1 << 30, err, sizeof err);
    if (!pool) {
        fprintf(stderr, "pool: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (!strcmp(cmd, "size")) {
        long n = node ? pool_size_node(pool, node) : pool_size_total(pool);
        if (n < 0) {
            fprintf(stderr, "pool: %s unreachable\n", redis);
            rc = 1;
        } else {
            printf("%ld\n", n);
        }
    } else if (!strcmp(cmd, "sample")) {
        pool_entry_t *e;
        int n = pool_sample(pool, exclude, count, &e, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "pool: %s\n", err);
            rc = 1;
        }
        for (int i = 0; i < n; i++) {
            if (!e[i].data) {
                fprintf(stderr, "pool: entry %d: %zu bytes, over the record limit; not fetched\n", i, e[i].len);
                continue;
            }
            char *json = rec_to_json(e[i].data, e[i].len, err, sizeof err);
            if (json) printf("%s\n", json);
            else fprintf(stderr, "pool: entry %d: %s\n", i, err);
            free(json);
        }
        pool_entries_free(e, n);
    } else if (!strcmp(cmd, "publish")) {
        if (!node || nfiles == 0) {
            fprintf(stderr, "pool: publish needs --node N and at least one FILE\n");
            rc = 2;
        }
        for (int i = 0; rc == 0 && i < nfiles; i++) {
            size_t len;
            char *buf = slurp(files[i], &len);
            if (!buf) {
                fprintf(stderr, "pool: %s: cannot read\n", files[i]);
                rc = 1;
            } else if (pool_publish(pool, node, buf, len, err, sizeof err) != 0) {
                fprintf(stderr, "pool: %s\n", err);
                rc = 1;
            }
            free(buf);
        }
    } else {
        fprintf(stderr, "pool: unknown command '%s'\n", cmd);
        usage();
        rc = 2;
    }
    free(files);
    pool_destroy(&pool);
    return rc;
}
