/* A node's stream endpoints derived from one base (a folder, tcp:PORT or
 * tcp://HOST:PORT), so one value configures a whole node. */
#include "util/endpoints.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const stream_names[STREAM_COUNT] = {
    "tasks", "rollouts", "scored", "batches", "notices",
};

const char *stream_name(stream_t s) { return (s >= 0 && s < STREAM_COUNT) ? stream_names[s] : "?"; }

int stream_from_name(const char *name)
{
    for (int i = 0; i < STREAM_COUNT; i++)
        if (strcmp(name, stream_names[i]) == 0) return i;
    return -1;
}

static int parse_port(const char *s, long *port)
{
    char *end;
    long p = strtol(s, &end, 10);
    if (end == s || *end != '\0' || p <= 0 || p > 65535 - 2 - 2 * STREAM_COUNT) return -1;
    *port = p;
    return 0;
}

int endpoints_from_base(const char *base, endpoints_t *ep, char *err, size_t errlen)
{
    memset(ep, 0, sizeof *ep);
    char host[128] = "127.0.0.1";
    long port = 0;
    const char *dir = NULL;

    if (strncmp(base, "tcp://", 6) == 0) {
        const char *colon = strrchr(base + 6, ':');
        size_t hl = colon ? (size_t)(colon - (base + 6)) : 0;
        if (!colon || hl == 0 || hl >= sizeof host || parse_port(colon + 1, &port) < 0) {
            snprintf(err, errlen, "broker base '%s': expected tcp://HOST:PORT", base);
            return -1;
        }
        memcpy(host, base + 6, hl);
        host[hl] = '\0';
    } else if (strncmp(base, "tcp:", 4) == 0) {
        if (parse_port(base + 4, &port) < 0) {
            snprintf(err, errlen, "broker base '%s': expected tcp:PORT with a port below %d", base,
                     65535 - 2 - 2 * STREAM_COUNT);
            return -1;
        }
    } else if (base[0] >= '0' && base[0] <= '9') {
        if (parse_port(base, &port) < 0) {
            snprintf(err, errlen, "broker base '%s': not a usable port number", base);
            return -1;
        }
    } else {
        dir = strncmp(base, "ipc:", 4) == 0 ? base + 4 : base;
        if (*dir == '\0' || strlen(dir) > ENDPOINT_MAX - 32) {
            snprintf(err, errlen, "broker base '%s': empty or too long a folder", base);
            return -1;
        }
    }

    for (int s = 0; s < STREAM_COUNT; s++) {
        if (dir) {
            snprintf(ep->in[s], ENDPOINT_MAX, "ipc://%s/%s.in", dir, stream_names[s]);
            snprintf(ep->out[s], ENDPOINT_MAX, "ipc://%s/%s.out", dir, stream_names[s]);
        } else {
            snprintf(ep->in[s], ENDPOINT_MAX, "tcp://%s:%ld", host, port + 1 + 2 * s);
            snprintf(ep->out[s], ENDPOINT_MAX, "tcp://%s:%ld", host, port + 2 + 2 * s);
        }
    }
    if (dir) snprintf(ep->capture, ENDPOINT_MAX, "ipc://%s/capture", dir);
    else snprintf(ep->capture, ENDPOINT_MAX, "tcp://%s:%ld", host, port + 1 + 2 * STREAM_COUNT);
    return 0;
}

const char *endpoints_env_base(char *buf, size_t len)
{
    const char *b = getenv("SAPO_BROKER");
    if (b && *b) return b;
    const char *run = getenv("SAPO_RUN");
    if (run && *run) return run;
    const char *node = getenv("SAPO_NODE");
    snprintf(buf, len, "run/%s", node && *node ? node : "node0");
    return buf;
}
