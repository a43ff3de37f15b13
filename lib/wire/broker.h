/* The broker core: one node's ZeroMQ switchboard (see wire/wire.h for what
 * clients see and wire/proto.h for the protocol).
 *
 * Binds, per work stream, a ROUTER at "in" (producers) and a ROUTER at
 * "out" (consumers); for notices a PULL at "in" (the learner) and an XPUB at "out"
 * (generators); and one XPUB at "capture" that gets every record of every
 * stream as [stream name, record] and drops when a subscriber is slow.
 *
 * The last policy notice is sent again whenever a subscriber joins, so a
 * restarted generator learns the current version at once.
 *
 * Work records wait in a bounded queue per stream; a full queue stops
 * reading its "in", so producers block on ZeroMQ's own high-water marks.
 * A record sent to a consumer is kept until the consumer acks it and goes
 * back to the head of the queue when the consumer is lost. */
#ifndef SAPO_BROKER_H
#define SAPO_BROKER_H

#include <stddef.h>
#include "util/endpoints.h"

typedef struct {
    int heartbeat_ms; /* a consumer silent this long is lost */
    int hwm;          /* records queued per stream before "in" is paused (also at 1 GiB) */
    int stats_ms;     /* a stats line this often when something moved; 0: never */
} broker_opts_t;

typedef struct broker_t broker_t;

/* Binds every endpoint. NULL with one line in err naming the endpoint
 * that cannot be bound (busy port, ipc path in use or not creatable). */
broker_t *broker_new(const endpoints_t *ep, const broker_opts_t *opts, char *err, size_t errlen);
void broker_destroy(broker_t **self_p);
/* Serves until SIGINT/SIGTERM; returns 0, or -1 after a socket error
 * (logged). */
int broker_run(broker_t *self);

#endif
