/* broker: the node's ZeroMQ switchboard. Binds, per stream, an "in"
 * endpoint producers connect to and an "out" endpoint consumers connect to,
 * plus one capture endpoint that tap subscribes to (wire/broker.h). */
#include "util/endpoints.h"
#include "util/log.h"
#include "wire/broker.h"

#include <czmq.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    fprintf(stderr, "usage: broker [--broker BASE] [--heartbeat-ms N] [--hwm N] [--stats-ms N]\n"
                    "  BASE: tcp:PORT, tcp://HOST:PORT or a run folder (default: $SAPO_BROKER, "
                    "$SAPO_RUN, run/$SAPO_NODE)\n");
}

static int int_flag(const char *flag, const char *value, int min)
{
    char *end;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end != '\0' || end == value || v < min || v > 1000000000)
        log_fatal("%s '%s': expected a whole number of at least %d", flag, value ? value : "", min);
    return (int)v;
}

int main(int argc, char **argv)
{
    const char *node = getenv("SAPO_NODE");
    log_init("broker", node && *node ? node : "node0");
    char buf[ENDPOINT_MAX];
    const char *base = endpoints_env_base(buf, sizeof buf);
    broker_opts_t opts = {.heartbeat_ms = 3000, .hwm = 10000, .stats_ms = 10000};
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--broker") == 0 && value) base = argv[++i];
        else if (strcmp(argv[i], "--heartbeat-ms") == 0) opts.heartbeat_ms = int_flag(argv[i], value, 30), i++;
        else if (strcmp(argv[i], "--hwm") == 0) opts.hwm = int_flag(argv[i], value, 1), i++;
        else if (strcmp(argv[i], "--stats-ms") == 0) opts.stats_ms = int_flag(argv[i], value, 0), i++;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        } else {
            log_fatal("unknown or incomplete flag '%s' (see --help)", argv[i]);
        }
    }

    endpoints_t ep;
    char err[512];
    if (endpoints_from_base(base, &ep, err, sizeof err) < 0) log_fatal("%s", err);
    broker_t *broker = broker_new(&ep, &opts, err, sizeof err);
    if (!broker) log_fatal("%s", err);
    log_info("serving %s (heartbeat %d ms, queue bound %d records per stream)", base, opts.heartbeat_ms, opts.hwm);
    int rc = broker_run(broker);
    broker_destroy(&broker);
    log_info("stopped");
    return rc == 0 ? 0 : 1;
}
