/* The broker core: the node's ZeroMQ switchboard, holding each work
 * record until a consumer acknowledges it, and the capture feed for tap. */
#include "wire/broker.h"
#include "wire/proto.h"
#include "wire/wire.h"
#include "util/log.h"
#include "util/mem.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DRAIN_MAX 1024               /* messages read from one socket per poll, so no socket starves the rest */
#define PRODUCERS_MAX 4096           /* producers remembered per stream; the longest silent is forgotten */
#define QUEUE_BYTES_MAX (1ull << 30) /* a stream's queue is also full at this many bytes */

/* a queued record: its id and its message */
typedef struct {
    uint64_t id; /* 0: acked, a hole to be skipped */
    zmq_msg_t msg;
} queued_t;

/* A ring of queued records that grows: the stream's queue (push back, requeue at
 * the front) and each consumer's held records in delivery order. */
typedef struct {
    queued_t *buf;
    size_t cap, head, len;
} deque_t;

typedef struct {
    uint8_t rid[256]; /* routing id */
    size_t rid_len;
    char name[16];   /* rid's first bytes in hex, for the log */
    uint32_t window; /* most records it may hold */
    deque_t held;    /* sent, not yet acked (with holes) */
    size_t nheld;
} consumer_t;

typedef struct {
    uint8_t rid[256];
    size_t rid_len;
    uint64_t count; /* records received from it */
    int64_t seen;   /* when it last sent */
    int touched;    /* sent in this drain: confirm */
} producer_t;

typedef struct {
    stream_t s;
    zsock_t *in, *out;
    producer_t *prods;
    size_t nprods;
    deque_t queue;
    uint64_t queued_bytes;
    consumer_t **cons;
    size_t ncons, capcons, rr;
    uint64_t next_id;
    uint64_t received, acked, requeued, reported;
} lane_t;

struct broker_t {
    broker_opts_t opts;
    lane_t lanes[STREAM_COUNT];
    zsock_t *capture;
    int capture_topics; /* topics someone subscribes to on capture */
    uint64_t notices, notices_reported;
    zmq_msg_t last_notice; /* empty before the first */
    /* ipc paths this broker bound, removed when it stops (ZeroMQ leaves
     * them) so a stale file never looks like a live broker */
    char ipc_paths[2 * STREAM_COUNT + 1][ENDPOINT_MAX];
    int nipc;
};

static queued_t *deque_at(deque_t *d, size_t i) { return &d->buf[(d->head + i) % d->cap]; }

static int deque_reserve(deque_t *d)
{
    if (d->len < d->cap) return 0;
    size_t cap = d->cap ? 2 * d->cap : 64;
    queued_t *buf = malloc(cap * sizeof *buf);
    if (!buf) return -1;
    for (size_t i = 0; i < d->len; i++) {
        queued_t *e = deque_at(d, i);
        buf[i].id = e->id;
        zmq_msg_init(&buf[i].msg);
        zmq_msg_move(&buf[i].msg, &e->msg);
        zmq_msg_close(&e->msg);
    }
    free(d->buf);
    d->buf = buf;
    d->cap = cap;
    d->head = 0;
    return 0;
}

/* Moves msg into a new queued record at the back or the front. */
static int deque_push(deque_t *d, uint64_t id, zmq_msg_t *msg, int front)
{
    if (deque_reserve(d) < 0) return -1;
    if (front) d->head = (d->head + d->cap - 1) % d->cap;
    queued_t *e = deque_at(d, front ? 0 : d->len);
    d->len++;
    e->id = id;
    zmq_msg_init(&e->msg);
    zmq_msg_move(&e->msg, msg);
    return 0;
}

/* Moves the front record's message into msg (initialised by the caller). */
static uint64_t deque_pop(deque_t *d, zmq_msg_t *msg)
{
    queued_t *e = deque_at(d, 0);
    uint64_t id = e->id;
    zmq_msg_move(msg, &e->msg);
    zmq_msg_close(&e->msg);
    d->head = (d->head + 1) % d->cap;
    d->len--;
    return id;
}

static void deque_free(deque_t *d)
{
    for (size_t i = 0; i < d->len; i++) zmq_msg_close(&deque_at(d, i)->msg);
    free(d->buf);
    memset(d, 0, sizeof *d);
}

static int ipc_in_use(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) return 0;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    int used = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return used;
}

/* zmq's ipc bind silently takes over a path another broker is serving, so
 * that case is checked first; a missing run folder is created. Options that
 * apply per connection are copied at bind time: set them before. */
static int bind_sock(broker_t *self, zsock_t *sock, const char *endpoint, const char *what, char *err, size_t errlen)
{
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        const char *path = endpoint + 6;
        char dir[ENDPOINT_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
            zsys_dir_create("%s", dir);
        }
        if (ipc_in_use(path)) {
            snprintf(err, errlen, "cannot bind %s (%s): another process is serving it", endpoint, what);
            return -1;
        }
    }
    if (zmq_bind(zsock_resolve(sock), endpoint) != 0) {
        snprintf(err, errlen, "cannot bind %s (%s): %s", endpoint, what, zmq_strerror(errno));
        return -1;
    }
    if (strncmp(endpoint, "ipc://", 6) == 0) snprintf(self->ipc_paths[self->nipc++], ENDPOINT_MAX, "%s", endpoint + 6);
    return 0;
}

static zsock_t *new_sock(int type)
{
    zsock_t *sock = zsock_new(type);
    if (sock) zsock_set_linger(sock, 0);
    return sock;
}

static void set_int(zsock_t *sock, int option, int value)
{
    zmq_setsockopt(zsock_resolve(sock), option, &value, sizeof value);
}

broker_t *broker_new(const endpoints_t *ep, const broker_opts_t *opts, char *err, size_t errlen)
{
    broker_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    zmq_msg_init(&self->last_notice);
    self->opts = *opts;
    if (self->opts.heartbeat_ms < 30) self->opts.heartbeat_ms = 30;
    if (self->opts.hwm < 1) self->opts.hwm = 1;
    zuuid_t *uuid = zuuid_new();
    uint32_t epoch;
    memcpy(&epoch, zuuid_data(uuid), sizeof epoch);
    zuuid_destroy(&uuid);
    int64_t maxmsg = WIRE_RECORD_MAX + 64;

    for (int s = 0; s < STREAM_COUNT; s++) {
        lane_t *lane = &self->lanes[s];
        char what[64];
        lane->s = (stream_t)s;
        /* ids from a random epoch: an ack a consumer sends for a record of
         * an earlier broker never names one of this broker's records */
        lane->next_id = ((uint64_t)epoch << 32) | 1;
        lane->in = new_sock(s == STREAM_NOTICES ? ZMQ_PULL : ZMQ_ROUTER);
        lane->out = new_sock(s == STREAM_NOTICES ? ZMQ_XPUB : ZMQ_ROUTER);
        if (!lane->in || !lane->out) goto nosock;
        zmq_setsockopt(zsock_resolve(lane->in), ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
        if (s == STREAM_NOTICES) set_int(lane->out, ZMQ_XPUB_VERBOSE, 1); /* every subscribe */
        if (s != STREAM_NOTICES) {
            /* A producer back after a network blip takes over its old
             * connection. No heartbeats here: while the queue is full the
             * connection is not read, PONGs included, and a heartbeat
             * timeout would cut it with records in it. Linger keeps what a
             * closed connection left in the pipe. */
            set_int(lane->in, ZMQ_ROUTER_HANDOVER, 1);
            zsock_set_linger(lane->in, 1000);
            set_int(lane->in, ZMQ_RCVHWM, WIRE_PRODUCER_HWM); /* frames of up to a batch */
            /* a send to a consumer whose connection is gone fails instead
             * of vanishing: that is how lost consumers are found */
            set_int(lane->out, ZMQ_ROUTER_MANDATORY, 1);
            set_int(lane->out, ZMQ_ROUTER_HANDOVER, 1);
            set_int(lane->out, ZMQ_SNDHWM, 0); /* credit bounds what is in flight */
            set_int(lane->out, ZMQ_HEARTBEAT_IVL, self->opts.heartbeat_ms / 3);
            set_int(lane->out, ZMQ_HEARTBEAT_TIMEOUT, self->opts.heartbeat_ms);
            int64_t maxctl = 1 << 20;
            zmq_setsockopt(zsock_resolve(lane->out), ZMQ_MAXMSGSIZE, &maxctl, sizeof maxctl);
        }
        snprintf(what, sizeof what, "%s in", stream_name(s));
        if (bind_sock(self, lane->in, ep->in[s], what, err, errlen) < 0) goto fail;
        snprintf(what, sizeof what, "%s out", stream_name(s));
        if (bind_sock(self, lane->out, ep->out[s], what, err, errlen) < 0) goto fail;
    }
    self->capture = new_sock(ZMQ_XPUB);
    if (!self->capture) goto nosock;
    if (bind_sock(self, self->capture, ep->capture, "capture", err, errlen) < 0) goto fail;
    return self;
nosock:
    snprintf(err, errlen, "cannot create a socket: %s", zmq_strerror(errno));
fail:
    broker_destroy(&self);
    return NULL;
}

static void consumer_free(consumer_t **c_p)
{
    deque_free(&(*c_p)->held);
    free(*c_p);
    *c_p = NULL;
}

void broker_destroy(broker_t **self_p)
{
    broker_t *self = *self_p;
    if (!self) return;
    for (int s = 0; s < STREAM_COUNT; s++) {
        lane_t *lane = &self->lanes[s];
        zsock_destroy(&lane->in);
        zsock_destroy(&lane->out);
        deque_free(&lane->queue);
        free(lane->prods);
        for (size_t i = 0; i < lane->ncons; i++) consumer_free(&lane->cons[i]);
        free(lane->cons);
    }
    zsock_destroy(&self->capture);
    for (int i = 0; i < self->nipc; i++) unlink(self->ipc_paths[i]);
    zmq_msg_close(&self->last_notice);
    free(self);
    *self_p = NULL;
}

/* Copies a record to the capture endpoint, where a slow tap drops, never
 * blocks; skipped outright while nobody listens. */
static void capture(broker_t *self, stream_t s, zmq_msg_t *msg)
{
    if (self->capture_topics <= 0) return;
    void *h = zsock_resolve(self->capture);
    const char *name = stream_name(s);
    if (zmq_send(h, name, strlen(name), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return;
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, msg);
    if (zmq_msg_send(&copy, h, ZMQ_DONTWAIT) < 0) zmq_msg_close(&copy);
}

/* Receives one frame without waiting: returns 0, 1 for a message that was
 * not one frame (dropped, logged), -1 when none is waiting. On a ROUTER the
 * sender's routing id goes to rid. */
static int recv_record(lane_t *lane, zmq_msg_t *rid, zmq_msg_t *msg)
{
    void *h = zsock_resolve(lane->in);
    if (rid) {
        if (zmq_msg_recv(rid, h, ZMQ_DONTWAIT) < 0) return -1;
        if (!zmq_msg_more(rid)) return 1;
        if (zmq_msg_recv(msg, h, 0) < 0) return 1;
    } else if (zmq_msg_recv(msg, h, ZMQ_DONTWAIT) < 0) {
        return -1;
    }
    if (zmq_msg_more(msg)) {
        int more = 1;
        while (more) {
            zmq_msg_t rest;
            zmq_msg_init(&rest);
            more = zmq_msg_recv(&rest, h, 0) >= 0 && zmq_msg_more(&rest);
            zmq_msg_close(&rest);
        }
        log_error("%s: dropped a multi-frame message from a producer (a producer sends one frame at a time)",
                  stream_name(lane->s));
        return 1;
    }
    return 0;
}

static producer_t *find_producer(lane_t *lane, zmq_msg_t *rid)
{
    size_t len = zmq_msg_size(rid);
    if (len > sizeof lane->prods[0].rid) return NULL;
    for (size_t i = 0; i < lane->nprods; i++)
        if (lane->prods[i].rid_len == len && memcmp(lane->prods[i].rid, zmq_msg_data(rid), len) == 0)
            return &lane->prods[i];
    if (!lane->prods && !(lane->prods = calloc(PRODUCERS_MAX, sizeof *lane->prods))) return NULL;
    size_t slot = lane->nprods;
    if (slot == PRODUCERS_MAX) {
        slot = 0;
        for (size_t i = 1; i < lane->nprods; i++)
            if (lane->prods[i].seen < lane->prods[slot].seen) slot = i;
    } else {
        lane->nprods++;
    }
    producer_t *p = &lane->prods[slot];
    memset(p, 0, sizeof *p);
    memcpy(p->rid, zmq_msg_data(rid), len);
    p->rid_len = len;
    return p;
}

static void confirm_producers(lane_t *lane)
{
    void *h = zsock_resolve(lane->in);
    for (size_t i = 0; i < lane->nprods; i++) {
        producer_t *p = &lane->prods[i];
        if (!p->touched) continue;
        p->touched = 0;
        uint8_t body[9] = {WIRE_RECEIVED};
        wire_put_u64(body + 1, p->count);
        /* dropped when the producer is gone or not reading: the next
         * count covers this one */
        if (zmq_send(h, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
            zmq_send(h, body, sizeof body, ZMQ_DONTWAIT);
    }
}

/* A full queue is not read from: producers block on ZeroMQ's limits. */
static int lane_full(const broker_t *self, const lane_t *lane)
{
    return lane->queue.len >= (size_t)self->opts.hwm || lane->queued_bytes >= QUEUE_BYTES_MAX;
}

/* Queues the records of one producer frame (proto.h), each in a message
 * of its own so it can be sent, held and requeued alone. Returns how many,
 * or -1 for a frame that is not one (nothing queued). */
static long queue_frame(broker_t *self, lane_t *lane, zmq_msg_t *frame)
{
    const uint8_t *p = zmq_msg_data(frame);
    size_t size = zmq_msg_size(frame), off = 4;
    if (size < 4) return -1;
    uint32_t n = wire_get_u32(p);
    if (n == 0 || n > WIRE_BATCH_MAX) return -1;
    for (uint32_t k = 0; k < n; k++) {
        if (size - off < 4 || wire_get_u32(p + off) > size - off - 4) return -1;
        off += 4 + wire_get_u32(p + off);
    }
    if (off != size) return -1;
    off = 4;
    for (uint32_t k = 0; k < n; k++) {
        size_t len = wire_get_u32(p + off);
        zmq_msg_t msg;
        if (zmq_msg_init_size(&msg, len) != 0) {
            log_error("%s: out of memory, a record was dropped", stream_name(lane->s));
            return -1;
        }
        memcpy(zmq_msg_data(&msg), p + off + 4, len);
        off += 4 + len;
        capture(self, lane->s, &msg);
        if (deque_push(&lane->queue, lane->next_id++, &msg, 0) < 0)
            log_error("%s: out of memory, a record was dropped", stream_name(lane->s));
        else lane->queued_bytes += len;
        zmq_msg_close(&msg);
    }
    lane->received += n;
    return n;
}

static void handle_in(broker_t *self, lane_t *lane)
{
    int64_t now = zclock_mono();
    for (int n = 0; n < DRAIN_MAX && !lane_full(self, lane); n++) {
        zmq_msg_t rid, msg;
        zmq_msg_init(&rid);
        zmq_msg_init(&msg);
        int rc = recv_record(lane, &rid, &msg);
        long got = rc == 0 ? queue_frame(self, lane, &msg) : 0;
        if (got < 0)
            log_error("%s: dropped a malformed %zu-byte frame from a producer", stream_name(lane->s),
                      zmq_msg_size(&msg));
        producer_t *p = got > 0 ? find_producer(lane, &rid) : NULL;
        if (p) {
            p->count += (uint64_t)got;
            p->seen = now;
            p->touched = 1;
        }
        zmq_msg_close(&msg);
        zmq_msg_close(&rid);
        if (rc < 0) break;
    }
    confirm_producers(lane);
}

static void handle_notice(broker_t *self, lane_t *lane)
{
    void *out = zsock_resolve(lane->out);
    for (int n = 0; n < DRAIN_MAX; n++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int rc = recv_record(lane, NULL, &msg);
        if (rc < 0) {
            zmq_msg_close(&msg);
            return;
        }
        if (rc == 0) {
            capture(self, lane->s, &msg);
            self->notices++;
            zmq_msg_copy(&self->last_notice, &msg);
            if (zmq_msg_send(&msg, out, ZMQ_DONTWAIT) >= 0) continue;
        }
        zmq_msg_close(&msg);
    }
}

/* Reads (un)subscriptions on an XPUB; returns the change in topics, and
 * in *joined the number of subscribe messages. */
static int drain_subscriptions(zsock_t *sock, int *joined)
{
    int delta = 0;
    void *h = zsock_resolve(sock);
    for (;;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, h, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return delta;
        }
        if (zmq_msg_size(&msg) > 0) {
            int sub = ((uint8_t *)zmq_msg_data(&msg))[0] == 1;
            delta += sub ? 1 : -1;
            if (joined) *joined += sub;
        }
        zmq_msg_close(&msg);
    }
}

/* A generator that just subscribed gets the current policy at once. XPUB
 * can only send to every subscriber, so the others see the notice again,
 * which they ignore (same version). The subscription, not the connection,
 * is the moment to send: a notice sent between the two is filtered out. */
static void handle_notice_subscribers(broker_t *self, lane_t *lane)
{
    int joined = 0;
    drain_subscriptions(lane->out, &joined);
    if (!joined || zmq_msg_size(&self->last_notice) == 0) return;
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, &self->last_notice);
    if (zmq_msg_send(&copy, zsock_resolve(lane->out), ZMQ_DONTWAIT) < 0) zmq_msg_close(&copy);
}

static consumer_t *find_consumer(lane_t *lane, const void *rid, size_t len, size_t *index)
{
    for (size_t i = 0; i < lane->ncons; i++) {
        consumer_t *c = lane->cons[i];
        if (c->rid_len == len && memcmp(c->rid, rid, len) == 0) {
            if (index) *index = i;
            return c;
        }
    }
    return NULL;
}

static consumer_t *add_consumer(lane_t *lane, const void *rid, size_t len, uint32_t window)
{
    if (len > sizeof((consumer_t *)0)->rid) return NULL;
    if (lane->ncons == lane->capcons) {
        size_t cap = lane->capcons ? 2 * lane->capcons : 8;
        consumer_t **cons = realloc(lane->cons, cap * sizeof *cons);
        if (!cons) return NULL;
        lane->cons = cons;
        lane->capcons = cap;
    }
    consumer_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    memcpy(c->rid, rid, len);
    c->rid_len = len;
    c->window = window;
    for (size_t i = 0; i < len && i < 4; i++) sprintf(c->name + 2 * i, "%02x", c->rid[i]);
    lane->cons[lane->ncons++] = c;
    log_info("%s: consumer %s joined with credit %u (%zu consumers)", stream_name(lane->s), c->name, window,
             lane->ncons);
    return c;
}

/* Puts everything the consumer held back at the head of the queue, in the
 * order it was sent, and forgets the consumer. */
static void lose_consumer(lane_t *lane, size_t index, const char *why)
{
    consumer_t *c = lane->cons[index];
    size_t requeued = 0;
    while (c->held.len > 0) {
        queued_t *e = deque_at(&c->held, c->held.len - 1);
        if (e->id) {
            lane->queued_bytes += zmq_msg_size(&e->msg);
            deque_push(&lane->queue, e->id, &e->msg, 1);
            requeued++;
        }
        zmq_msg_close(&e->msg);
        c->held.len--;
    }
    lane->requeued += requeued;
    log_info("%s: consumer %s lost (%s), %zu records requeued (%zu consumers)", stream_name(lane->s), c->name, why,
             requeued, lane->ncons - 1);
    consumer_free(&lane->cons[index]);
    lane->cons[index] = lane->cons[--lane->ncons];
    if (lane->rr >= lane->ncons) lane->rr = 0;
}

/* Acks are usually for the oldest held records, so the scan is short. */
static void consumer_ack(lane_t *lane, consumer_t *c, uint64_t id)
{
    for (size_t i = 0; i < c->held.len; i++) {
        queued_t *e = deque_at(&c->held, i);
        if (e->id != id) continue;
        e->id = 0;
        zmq_msg_close(&e->msg);
        zmq_msg_init(&e->msg);
        c->nheld--;
        lane->acked++;
        break;
    }
    while (c->held.len > 0 && deque_at(&c->held, 0)->id == 0) {
        zmq_msg_t gone;
        zmq_msg_init(&gone);
        deque_pop(&c->held, &gone);
        zmq_msg_close(&gone);
    }
}

static void handle_control(lane_t *lane, zmq_msg_t *rid, zmq_msg_t *body)
{
    const uint8_t *p = zmq_msg_data(body);
    size_t n = zmq_msg_size(body);
    consumer_t *c = find_consumer(lane, zmq_msg_data(rid), zmq_msg_size(rid), NULL);
    if (n == 5 && p[0] == WIRE_HELLO) {
        uint32_t window = wire_get_u32(p + 1);
        if (window < 1) window = 1;
        if (c) c->window = window;
        else add_consumer(lane, zmq_msg_data(rid), zmq_msg_size(rid), window);
    } else if (n >= 1 && (n - 1) % 8 == 0 && p[0] == WIRE_ACK) {
        /* acks from a consumer already given up on are for records that
         * were requeued: ignored */
        for (size_t i = 1; c && i < n; i += 8) consumer_ack(lane, c, wire_get_u64(p + i));
    } else {
        log_error("%s: dropped a malformed %zu-byte message from a consumer", stream_name(lane->s), n);
    }
}

static void handle_out(lane_t *lane)
{
    void *h = zsock_resolve(lane->out);
    for (int n = 0; n < DRAIN_MAX; n++) {
        zmq_msg_t rid, body;
        zmq_msg_init(&rid);
        if (zmq_msg_recv(&rid, h, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&rid);
            return;
        }
        zmq_msg_init(&body);
        if (zmq_msg_more(&rid) && zmq_msg_recv(&body, h, 0) >= 0) {
            int more = zmq_msg_more(&body);
            handle_control(lane, &rid, &body);
            while (more) {
                zmq_msg_t rest;
                zmq_msg_init(&rest);
                more = zmq_msg_recv(&rest, h, 0) >= 0 && zmq_msg_more(&rest);
                zmq_msg_close(&rest);
            }
        }
        zmq_msg_close(&body);
        zmq_msg_close(&rid);
    }
}

/* The next consumer with free credit, round robin; -1 when none has. */
static long next_consumer(lane_t *lane)
{
    for (size_t k = 0; k < lane->ncons; k++) {
        size_t i = (lane->rr + k) % lane->ncons;
        if (lane->cons[i]->nheld < lane->cons[i]->window) {
            lane->rr = (i + 1) % lane->ncons;
            return (long)i;
        }
    }
    return -1;
}

/* How many of the queue's front records go to a consumer that may take
 * up to n: one at least, then while the frame stays within
 * WIRE_BATCH_BYTES. Their bytes go to *bytes. */
static size_t batch_take(lane_t *lane, size_t n, size_t *bytes)
{
    size_t k = 0, sum = 0;
    while (k < n && k < lane->queue.len) {
        size_t size = zmq_msg_size(&deque_at(&lane->queue, k)->msg);
        if (k > 0 && WIRE_BATCH_HEAD(k + 1) + sum + size > WIRE_BATCH_BYTES) break;
        sum += size;
        k++;
    }
    *bytes = sum;
    return k;
}

/* Sends queued records to consumers with free credit, a batch of them in
 * one frame (proto.h). The broker keeps each record's own message for a
 * requeue; the frame is a copy. */
static void dispatch(lane_t *lane)
{
    void *h = zsock_resolve(lane->out);
    while (lane->queue.len > 0) {
        long i = next_consumer(lane);
        if (i < 0) return;
        consumer_t *c = lane->cons[i];
        size_t bytes, n = c->window - c->nheld;
        if (n > WIRE_BATCH_MAX) n = WIRE_BATCH_MAX;
        n = batch_take(lane, n, &bytes);
        zmq_msg_t frame;
        if (zmq_msg_init_size(&frame, WIRE_BATCH_HEAD(n) + bytes) != 0) {
            log_error("%s: out of memory for a batch of %zu records", stream_name(lane->s), n);
            return;
        }
        if (zmq_send(h, c->rid, c->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frame);
            if (errno != EHOSTUNREACH) return;
            lose_consumer(lane, (size_t)i, "disconnected");
            continue;
        }
        uint8_t *head = zmq_msg_data(&frame), *body = head + WIRE_BATCH_HEAD(n);
        wire_put_u32(head, (uint32_t)n);
        for (size_t k = 0; k < n; k++) {
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            uint64_t id = deque_pop(&lane->queue, &msg);
            size_t size = zmq_msg_size(&msg);
            lane->queued_bytes -= size;
            wire_put_u64(head + 4 + 12 * k, id);
            wire_put_u32(head + 12 + 12 * k, (uint32_t)size);
            memcpy(body, zmq_msg_data(&msg), size);
            body += size;
            deque_push(&c->held, id, &msg, 0);
            c->nheld++;
            zmq_msg_close(&msg);
        }
        if (zmq_msg_send(&frame, h, 0) < 0) zmq_msg_close(&frame);
    }
}

static void probe(lane_t *lane)
{
    void *h = zsock_resolve(lane->out);
    for (size_t i = lane->ncons; i-- > 0;) {
        consumer_t *c = lane->cons[i];
        if (zmq_send(h, c->rid, c->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            if (errno == EHOSTUNREACH) lose_consumer(lane, i, "disconnected or silent");
            continue;
        }
        zmq_send(h, "", 0, 0);
    }
}

static void log_stats(broker_t *self)
{
    char line[1024];
    size_t n = 0;
    for (int s = 0; s < STREAM_COUNT && n < sizeof line; s++) {
        lane_t *lane = &self->lanes[s];
        if (s == STREAM_NOTICES || lane->received == lane->reported) continue;
        size_t held = 0;
        for (size_t i = 0; i < lane->ncons; i++) held += lane->cons[i]->nheld;
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "%s%s in %" PRIu64 " acked %" PRIu64 " queued %zu held %zu requeued %" PRIu64
                              " consumers %zu",
                              n ? "; " : "", stream_name(s), lane->received, lane->acked, lane->queue.len, held,
                              lane->requeued, lane->ncons);
        lane->reported = lane->received;
    }
    if (self->notices != self->notices_reported && n < sizeof line) {
        n += (size_t)snprintf(line + n, sizeof line - n, "%spolicy notices %" PRIu64, n ? "; " : "", self->notices);
        self->notices_reported = self->notices;
    }
    if (n) log_info("stats: %s", line);
}

int broker_run(broker_t *self)
{
    int hb = self->opts.heartbeat_ms;
    int64_t now = zclock_mono(), next_probe = now + hb / 2;
    int64_t next_stats = self->opts.stats_ms > 0 ? now + self->opts.stats_ms : INT64_MAX;
    zmq_pollitem_t items[2 * STREAM_COUNT + 1];
    void (*handlers[2 * STREAM_COUNT + 1])(broker_t *, lane_t *);
    lane_t *lanes[2 * STREAM_COUNT + 1];
    while (!zsys_interrupted) {
        int n = 0;
        for (int s = 0; s < STREAM_COUNT; s++) {
            lane_t *lane = &self->lanes[s];
            if (s == STREAM_NOTICES || !lane_full(self, lane)) {
                items[n] = (zmq_pollitem_t){zsock_resolve(lane->in), 0, ZMQ_POLLIN, 0};
                lanes[n] = lane;
                handlers[n++] = s == STREAM_NOTICES ? handle_notice : handle_in;
            }
            items[n] = (zmq_pollitem_t){zsock_resolve(lane->out), 0, ZMQ_POLLIN, 0};
            lanes[n] = lane;
            handlers[n++] = NULL;
        }
        items[n] = (zmq_pollitem_t){zsock_resolve(self->capture), 0, ZMQ_POLLIN, 0};
        lanes[n++] = NULL;
        int64_t wake = next_probe < next_stats ? next_probe : next_stats;
        long timeout = wake > now ? (long)(wake - now) : 0;
        if (zmq_poll(items, n, timeout) < 0) {
            if (errno == EINTR) continue;
            log_error("poll failed: %s", zmq_strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN)) continue;
            if (!lanes[i]) self->capture_topics += drain_subscriptions(self->capture, NULL);
            else if (handlers[i]) handlers[i](self, lanes[i]);
            else if (lanes[i]->s == STREAM_NOTICES) handle_notice_subscribers(self, lanes[i]);
            else handle_out(lanes[i]);
        }
        for (int s = 0; s < STREAM_COUNT; s++)
            if (s != STREAM_NOTICES) dispatch(&self->lanes[s]);
        now = zclock_mono();
        if (now >= next_probe) {
            for (int s = 0; s < STREAM_COUNT; s++)
                if (s != STREAM_NOTICES) probe(&self->lanes[s]);
            for (int s = 0; s < STREAM_COUNT; s++)
                if (s != STREAM_NOTICES) dispatch(&self->lanes[s]);
            next_probe = now + hb / 2;
            mem_release();
        }
        if (now >= next_stats) {
            log_stats(self);
            next_stats = now + self->opts.stats_ms;
        }
    }
    return 0;
}
