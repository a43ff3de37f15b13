/* The node's streams and where each one lives. Every stream goes through the
 * broker: producers connect to its "in" endpoint, consumers to its "out"
 * endpoint, and the broker copies every record to one capture PUB endpoint
 * (frames: stream name, record bytes) that tap subscribes to.
 *
 * Endpoints derive from one base so a whole node is configured by one value:
 *   - a TCP port P: stream i binds P+1+2i (in) and
 *     P+2+2i (out), capture binds P+1+2*STREAM_COUNT; P itself is left to
 *     the Procfile's first process (redis, when local);
 *   - a run folder D: ipc://D/<stream>.in, ipc://D/<stream>.out, ipc://D/capture.
 */
#ifndef SAPO_ENDPOINTS_H
#define SAPO_ENDPOINTS_H

#include <stddef.h>

typedef enum {
    STREAM_TASKS,    /* sampler -> generators: questions to roll out */
    STREAM_ROLLOUTS, /* generators (and sampler, external groups) -> verifiers */
    STREAM_SCORED,   /* verifiers -> sampler: groups with local rewards */
    STREAM_BATCHES,  /* sampler -> learner: I local + J external groups */
    STREAM_NOTICES,  /* learner -> generators, sampler: new policy version notices (broadcast) */
    STREAM_COUNT
} stream_t;

#define ENDPOINT_MAX 256

typedef struct {
    char in[STREAM_COUNT][ENDPOINT_MAX];
    char out[STREAM_COUNT][ENDPOINT_MAX];
    char capture[ENDPOINT_MAX];
} endpoints_t;

const char *stream_name(stream_t s);
/* returns -1 for an unknown name */
int stream_from_name(const char *name);

/* base is "tcp:PORT", "tcp://HOST:PORT", a bare port number, or
 * "ipc:DIR" / a folder path. Returns 0, or -1 with a message in err. */
int endpoints_from_base(const char *base, endpoints_t *ep, char *err, size_t errlen);

/* The base from the environment: SAPO_BROKER if set, else the run folder
 * SAPO_RUN, else "run/<SAPO_NODE>". foreman's PORT is not used: foreman gives
 * every process type its own PORT, and all of a node's processes must agree. */
const char *endpoints_env_base(char *buf, size_t len);

#endif
