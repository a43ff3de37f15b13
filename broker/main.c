/* broker: the node's ZeroMQ switchboard. Binds, per stream, an "in"
 * endpoint producers connect to and an "out" endpoint consumers connect to,
 * plus one capture endpoint that tap subscribes to (wire/broker.h). Its
 * settings (broker, heartbeat-ms, hwm, stats-ms) come from the node's
 * config table, as every process's do. */
#include "node/config.h"
#include "util/endpoints.h"
#include "util/log.h"
#include "util/peak.h"
#include "wire/broker.h"

#include <czmq.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    config_t cfg;
    int rc = config_load(&cfg, &argc, argv);
    if (rc != 0) return rc < 0 ? 2 : 0;
    if (argc > 1) {
        fprintf(stderr, "broker: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    log_init("broker", cfg.node);
    broker_opts_t opts = {.heartbeat_ms = cfg.heartbeat_ms, .hwm = cfg.hwm, .stats_ms = cfg.stats_ms};
    endpoints_t ep;
    char err[512];
    if (peak_watch(cfg.run, "broker", err, sizeof err) != 0) log_fatal("%s", err);
    if (endpoints_from_base(cfg.broker, &ep, err, sizeof err) < 0) log_fatal("%s", err);
    broker_t *broker = broker_new(&ep, &opts, err, sizeof err);
    if (!broker) log_fatal("%s", err);
    log_info("serving %s (heartbeat %d ms, queue bound %d records per stream)", cfg.broker, opts.heartbeat_ms,
             opts.hwm);
    rc = broker_run(broker);
    broker_destroy(&broker);
    log_info("stopped");
    return rc == 0 ? 0 : 1;
}
