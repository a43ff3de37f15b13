/* tap: prints the records passing through a node's broker, one JSON line each:
 *   {"stream":"rollouts","record":{...}}
 * Connects a SUB to the broker's capture endpoint, whose messages are two
 * frames (stream name, record). Being a subscriber, it can never slow the
 * node down: the broker drops what a slow tap does not take. */
#include <cjson/cJSON.h>
#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records.h"
#include "util/endpoints.h"

#define MAX_FILTERS 32

typedef struct {
    char path[128]; /* dotted: node, task.family, completions.0.reward */
    const char *value;
} where_t;

typedef struct {
    const char *broker;
    const char *streams[MAX_FILTERS];
    int n_streams;
    where_t where[MAX_FILTERS];
    int n_where;
    long count; /* stop after this many printed records; 0: never */
} tap_opts_t;

static void usage(FILE *out)
{
    fprintf(out, "usage: tap [--broker BASE] [--stream NAME]... [--where FIELD=VALUE]... [--count N]\n"
                 "Prints every record captured by the node's broker as one JSON line\n"
                 "{\"stream\":NAME,\"record\":{...}}.\n"
                 "  --broker BASE        tcp:PORT, tcp://HOST:PORT, ipc:DIR or a run folder\n"
                 "                       (default: SAPO_BROKER, else SAPO_RUN, else run/$SAPO_NODE)\n"
                 "  --stream NAME        only this stream (repeatable): tasks rollouts scored batches notices\n"
                 "  --where FIELD=VALUE  only records whose FIELD equals VALUE (repeatable, all must\n"
                 "                       match); FIELD may be dotted, e.g. task.family, completions.0.reward\n"
                 "  --count N            exit after printing N records\n");
}

static void bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "tap: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see tap --help)\n");
    exit(2);
}

static void parse_args(int argc, char **argv, tap_opts_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        int takes_value = strcmp(a, "--broker") == 0 || strcmp(a, "--stream") == 0 || strcmp(a, "--where") == 0 ||
                          strcmp(a, "--count") == 0;
        if (!takes_value) bad_usage("unknown argument '%s'", a);
        if (i + 1 >= argc) bad_usage("%s needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--broker") == 0) {
            o->broker = v;
        } else if (strcmp(a, "--stream") == 0) {
            if (stream_from_name(v) < 0)
                bad_usage("--stream '%s' is not a stream (tasks rollouts scored batches notices)", v);
            if (o->n_streams == MAX_FILTERS) bad_usage("more than 32 %s flags", a);
            o->streams[o->n_streams++] = v;
        } else if (strcmp(a, "--where") == 0) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof o->where[0].path)
                bad_usage("--where '%s' is not FIELD=VALUE", v);
            if (o->n_where == MAX_FILTERS) bad_usage("more than 32 %s flags", a);
            where_t *w = &o->where[o->n_where++];
            memcpy(w->path, v, (size_t)(eq - v));
            w->path[eq - v] = '\0';
            w->value = eq + 1;
        } else {
            char *end;
            errno = 0;
            long n = strtol(v, &end, 10);
            if (errno || end == v || *end != '\0' || n <= 0) bad_usage("--count '%s' is not a positive number", v);
            o->count = n;
        }
    }
}

/* The JSON value at a dotted path: object keys, or array indices. */
static const cJSON *lookup(const cJSON *j, const char *path)
{
    char key[128];
    snprintf(key, sizeof key, "%s", path);
    char *save = NULL;
    for (char *part = strtok_r(key, ".", &save); part && j; part = strtok_r(NULL, ".", &save)) {
        if (cJSON_IsArray(j)) {
            char *end;
            long i = strtol(part, &end, 10);
            j = (*end == '\0' && end != part && i >= 0) ? cJSON_GetArrayItem(j, (int)i) : NULL;
        } else {
            j = cJSON_GetObjectItemCaseSensitive(j, part);
        }
    }
    return j;
}

static int value_matches(const cJSON *v, const char *want)
{
    if (cJSON_IsString(v)) return strcmp(v->valuestring, want) == 0;
    if (cJSON_IsBool(v)) return strcmp(want, cJSON_IsTrue(v) ? "true" : "false") == 0;
    if (cJSON_IsNumber(v)) {
        char *end;
        double d = strtod(want, &end);
        return end != want && *end == '\0' && d == v->valuedouble;
    }
    return 0;
}

static int record_matches(const tap_opts_t *o, const char *json)
{
    if (o->n_where == 0) return 1;
    cJSON *j = cJSON_Parse(json);
    int ok = j != NULL;
    for (int i = 0; ok && i < o->n_where; i++) ok = value_matches(lookup(j, o->where[i].path), o->where[i].value);
    cJSON_Delete(j);
    return ok;
}

static int stream_wanted(const tap_opts_t *o, const char *name)
{
    if (o->n_streams == 0) return 1;
    for (int i = 0; i < o->n_streams; i++)
        if (strcmp(o->streams[i], name) == 0) return 1;
    return 0;
}

/* Prints one line; returns 0, or the errno of a failed write. */
static int print_line(const char *stream, const char *json)
{
    cJSON *s = cJSON_CreateString(stream);
    char *quoted = cJSON_PrintUnformatted(s);
    printf("{\"stream\":%s,\"record\":%s}\n", quoted, json);
    cJSON_free(quoted);
    cJSON_Delete(s);
    return fflush(stdout) == EOF ? errno : 0;
}

int main(int argc, char **argv)
{
    tap_opts_t o = {0};
    parse_args(argc, argv, &o);
    /* a closed stdout (tap | head) ends tap quietly through a failed write */
    signal(SIGPIPE, SIG_IGN);

    char basebuf[ENDPOINT_MAX], err[512];
    const char *base = o.broker ? o.broker : endpoints_env_base(basebuf, sizeof basebuf);
    endpoints_t ep;
    if (endpoints_from_base(base, &ep, err, sizeof err) < 0) {
        fprintf(stderr, "tap: %s\n", err);
        return 2;
    }
    zsock_t *sub = zsock_new(ZMQ_SUB);
    if (!sub || zsock_connect(sub, "%s", ep.capture) < 0) {
        fprintf(stderr, "tap: cannot connect to the capture endpoint %s: %s\n", ep.capture, zmq_strerror(zmq_errno()));
        zsock_destroy(&sub);
        return 1;
    }
    if (o.n_streams == 0) zsock_set_subscribe(sub, "");
    for (int i = 0; i < o.n_streams; i++) zsock_set_subscribe(sub, o.streams[i]);

    long printed = 0, seen = 0, rejected = 0;
    int rc = 0, write_err = 0;
    while (!write_err && !zsys_interrupted && (o.count == 0 || printed < o.count)) {
        zmsg_t *msg = zmsg_recv(sub);
        if (!msg) break;
        seen++;
        char *stream = zmsg_popstr(msg);
        zframe_t *rec = zmsg_pop(msg);
        if (!stream || !rec || zmsg_size(msg) != 0) {
            fprintf(stderr, "tap: capture message %ld is not two frames (stream, record), skipped\n", seen);
            rejected++;
        } else if (stream_wanted(&o, stream)) {
            void *copy;
            const void *buf = rec_aligned(zframe_data(rec), zframe_size(rec), &copy);
            char *json = buf ? rec_to_json(buf, zframe_size(rec), err, sizeof err) : NULL;
            if (!buf) snprintf(err, sizeof err, "out of memory");
            if (!json) {
                fprintf(stderr, "tap: %s record %ld skipped: %s\n", stream, seen, err);
                rejected++;
            } else if (record_matches(&o, json)) {
                write_err = print_line(stream, json);
                printed++;
            }
            free(json);
            free(copy);
        }
        zstr_free(&stream);
        zframe_destroy(&rec);
        zmsg_destroy(&msg);
    }
    if (write_err && write_err != EPIPE) {
        fprintf(stderr, "tap: writing to stdout: %s\n", strerror(write_err));
        rc = 1;
    }
    if (rejected) fprintf(stderr, "tap: %ld of %ld captured records skipped\n", rejected, seen);
    zsock_destroy(&sub);
    return rc;
}
