/* The client side of a node's streams: producers, credit-based
 * consumers and subscribers, all through the broker. */
#include "wire/wire.h"
#include "wire/proto.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

/* Records handed to a producer gather in a frame that its sender thread
 * takes and sends as one message while the caller fills the next. A
 * producer the broker keeps up with sends each record at once, alone; one
 * that outpaces the broker sends fewer, larger messages, which is where the
 * time goes (ZeroMQ's cost is per message, not per byte). */
struct wire_producer_t {
    zsock_t *sock; /* the sender thread's alone while it runs */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, room; /* wake: records or stop for the thread; room: the frame was taken */
    uint8_t *fill;             /* n(u32), then each record as len(u32), bytes */
    size_t fill_len, fill_cap;
    uint32_t fill_n;
    int stopping;
    int64_t stop_deadline;   /* when a stopping producer gives up on the broker */
    uint64_t sent, received; /* records handed over; as the broker last confirmed */
};

struct wire_consumer_t {
    zsock_t *sock;
    int credit;
    /* the last batch from the broker, its records handed out one by one */
    zmq_msg_t frame;
    uint64_t batch_ids[WIRE_BATCH_MAX];
    size_t batch_off[WIRE_BATCH_MAX];
    uint32_t batch_size[WIRE_BATCH_MAX];
    int batch_len, batch_pos;
    int64_t last_hello;
    int pending; /* acks not yet sent */
    int64_t pending_since;
    uint8_t acks[1 + 8 * WIRE_ACK_BATCH];
};

struct wire_publisher_t {
    zsock_t *sock;
};

struct wire_subscriber_t {
    zsock_t *sock;
};

/* A socket connected to endpoint, or NULL with a message in err. */
static zsock_t *connect_sock(int type, const char *endpoint, const char *what, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new(type);
    if (!sock) {
        snprintf(err, errlen, "%s: cannot create a socket: %s", what, zmq_strerror(errno));
        return NULL;
    }
    if (zmq_connect(zsock_resolve(sock), endpoint) != 0) {
        snprintf(err, errlen, "%s: cannot connect to %s: %s", what, endpoint, zmq_strerror(errno));
        zsock_destroy(&sock);
        return NULL;
    }
    return sock;
}

static int work_stream(stream_t s, const char *who, char *err, size_t errlen)
{
    if (s < 0 || s >= STREAM_COUNT || s == STREAM_NOTICES) {
        snprintf(err, errlen, "%s: stream '%s' is not a work stream", who, stream_name(s));
        return -1;
    }
    return 0;
}

/* ZMTP heartbeats so a dead broker is noticed and reconnected to, even when
 * the kernel keeps a half-open TCP connection. */
static void set_heartbeat(zsock_t *sock)
{
    void *h = zsock_resolve(sock);
    int ivl = WIRE_HEARTBEAT_MS / 3, timeout = WIRE_HEARTBEAT_MS;
    zmq_setsockopt(h, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(h, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
}

static void set_maxmsgsize(zsock_t *sock)
{
    int64_t max = WIRE_RECORD_MAX + 64;
    zmq_setsockopt(zsock_resolve(sock), ZMQ_MAXMSGSIZE, &max, sizeof max);
}

void wire_record_destroy(wire_record_t **self_p)
{
    if (!*self_p) return;
    zmq_msg_close(&(*self_p)->msg_);
    free(*self_p);
    *self_p = NULL;
}

/* Takes ownership of msg's content. */
static wire_record_t *record_new(zmq_msg_t *msg, uint64_t id)
{
    wire_record_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    zmq_msg_init(&r->msg_);
    zmq_msg_move(&r->msg_, msg);
    r->id = id;
    r->data = zmq_msg_data(&r->msg_);
    r->size = zmq_msg_size(&r->msg_);
    return r;
}

/* Waits until h is readable or timeout_ms passes; 0 when readable. */
static int wait_readable(void *h, long timeout_ms)
{
    zmq_pollitem_t item = {h, 0, ZMQ_POLLIN, 0};
    int rc = zmq_poll(&item, 1, timeout_ms);
    return rc > 0 ? 0 : -1;
}

/* Reads and drops the frames after last in a multi-frame message. */
static void drop_rest(void *h, const zmq_msg_t *last)
{
    int more = zmq_msg_more(last);
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        more = zmq_msg_recv(&m, h, 0) >= 0 && zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
}

/* A DEALER with a fixed identity per object, so after a network blip the
 * broker's ROUTER hands the connection over and keeps what it knows.
 * Consumers use heartbeats and take in everything the broker sends (no
 * receive limit: credit bounds the records, and probes are tiny), so the
 * connection is never throttled and ZeroMQ answers the broker's PINGs
 * however long the consumer is busy. Producers use neither: the broker
 * stops reading a full stream, and a heartbeat would then cut the link. */
static zsock_t *dealer_new(const char *endpoint, int consumer, const char *what, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new(ZMQ_DEALER);
    if (!sock) {
        snprintf(err, errlen, "%s: cannot create a socket: %s", what, zmq_strerror(errno));
        return NULL;
    }
    zuuid_t *uuid = zuuid_new();
    zmq_setsockopt(zsock_resolve(sock), ZMQ_ROUTING_ID, zuuid_data(uuid), ZUUID_LEN);
    zuuid_destroy(&uuid);
    if (consumer) {
        set_heartbeat(sock);
        set_maxmsgsize(sock);
        zsock_set_rcvhwm(sock, 0);
    }
    if (zmq_connect(zsock_resolve(sock), endpoint) != 0) {
        snprintf(err, errlen, "%s: cannot connect to %s: %s", what, endpoint, zmq_strerror(errno));
        zsock_destroy(&sock);
    }
    return sock;
}

/* Reads the broker's confirmations that are waiting, without blocking. */
static void producer_confirmations(wire_producer_t *self)
{
    void *h = zsock_resolve(self->sock);
    uint8_t body[16];
    int n;
    while ((n = zmq_recv(h, body, sizeof body, ZMQ_DONTWAIT)) >= 0)
        if (n == 9 && body[0] == WIRE_RECEIVED) {
            pthread_mutex_lock(&self->mu);
            self->received = wire_get_u64(body + 1);
            pthread_mutex_unlock(&self->mu);
        }
}

/* Whether a stopping producer's time to deliver is up. */
static int producer_given_up(wire_producer_t *self)
{
    pthread_mutex_lock(&self->mu);
    int up = self->stopping && zclock_mono() >= self->stop_deadline;
    pthread_mutex_unlock(&self->mu);
    return up;
}

/* Sends a frame, reading confirmations while the pipe is full; gives up
 * (the frame is lost, as anything unsent is when a process is told to
 * stop) on SIGINT/SIGTERM, or 30 s after the producer was destroyed. */
static void producer_send_frame(wire_producer_t *self, zmq_msg_t *frame)
{
    void *h = zsock_resolve(self->sock);
    while (zmq_msg_send(frame, h, ZMQ_DONTWAIT) < 0) {
        if ((errno != EAGAIN && errno != EINTR) || zsys_interrupted || producer_given_up(self)) {
            zmq_msg_close(frame);
            return;
        }
        zmq_pollitem_t item = {h, 0, ZMQ_POLLIN | ZMQ_POLLOUT, 0};
        zmq_poll(&item, 1, 100);
        producer_confirmations(self);
    }
    producer_confirmations(self);
}

static void free_frame(void *data, void *hint)
{
    (void)hint;
    free(data);
}

static void *producer_run(void *arg)
{
    wire_producer_t *self = arg;
    pthread_mutex_lock(&self->mu);
    for (;;) {
        while (self->fill_n == 0 && !self->stopping) pthread_cond_wait(&self->wake, &self->mu);
        if (self->fill_n == 0) break;
        uint8_t *buf = self->fill;
        size_t len = self->fill_len;
        wire_put_u32(buf, self->fill_n);
        self->fill = NULL;
        self->fill_len = self->fill_cap = 0;
        self->fill_n = 0;
        pthread_cond_broadcast(&self->room);
        pthread_mutex_unlock(&self->mu);
        zmq_msg_t frame;
        zmq_msg_init_data(&frame, buf, len, free_frame, NULL);
        producer_send_frame(self, &frame);
        pthread_mutex_lock(&self->mu);
    }
    /* stopping: wait (up to 30 s, or until SIGTERM) for the broker to
     * confirm every record, because ZeroMQ's linger alone drops the tail of
     * a backed-up pipe when the process exits */
    while (self->received < self->sent && !zsys_interrupted && zclock_mono() < self->stop_deadline) {
        pthread_mutex_unlock(&self->mu);
        zmq_pollitem_t item = {zsock_resolve(self->sock), 0, ZMQ_POLLIN, 0};
        zmq_poll(&item, 1, 100);
        producer_confirmations(self);
        pthread_mutex_lock(&self->mu);
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

wire_producer_t *wire_producer_new(const endpoints_t *ep, stream_t s, char *err, size_t errlen)
{
    if (work_stream(s, "producer", err, errlen) < 0) return NULL;
    wire_producer_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    char what[64];
    snprintf(what, sizeof what, "%s producer", stream_name(s));
    self->sock = dealer_new(ep->in[s], 0, what, err, errlen);
    if (!self->sock) {
        free(self);
        return NULL;
    }
    /* frames hold up to WIRE_BATCH_BYTES: a short pipe keeps the memory a
     * stopped broker leaves in it bounded */
    zsock_set_sndhwm(self->sock, WIRE_PRODUCER_HWM);
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->wake, NULL);
    pthread_cond_init(&self->room, NULL);
    if (pthread_create(&self->thread, NULL, producer_run, self) != 0) {
        snprintf(err, errlen, "%s: cannot start its sender thread", what);
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->wake);
        pthread_cond_destroy(&self->room);
        zsock_destroy(&self->sock);
        free(self);
        return NULL;
    }
    /* a name that ps and top show, and that a test finds (see util/nice.h) */
    pthread_setname_np(self->thread, "wire-send");
    return self;
}

void wire_producer_destroy(wire_producer_t **self_p)
{
    wire_producer_t *self = *self_p;
    if (!self) return;
    pthread_mutex_lock(&self->mu);
    self->stopping = 1;
    self->stop_deadline = zclock_mono() + 30000;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mu);
    pthread_join(self->thread, NULL);
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->wake);
    pthread_cond_destroy(&self->room);
    free(self->fill);
    zsock_destroy(&self->sock);
    free(self);
    *self_p = NULL;
}

/* Whether a record of len bytes must wait for the thread to take the
 * frame: a frame past its first record stays within the batch limits. */
static int frame_full(const wire_producer_t *self, size_t len)
{
    return self->fill_n > 0 && (self->fill_n >= WIRE_BATCH_MAX || self->fill_len + 4 + len > WIRE_BATCH_BYTES);
}

int wire_producer_send(wire_producer_t *self, const void *data, size_t len)
{
    if (len > WIRE_RECORD_MAX) return -1;
    pthread_mutex_lock(&self->mu);
    while (frame_full(self, len)) {
        if (zsys_interrupted) {
            pthread_mutex_unlock(&self->mu);
            return -1;
        }
        /* timed, so SIGTERM is noticed while the broker is full */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&self->room, &self->mu, &until);
    }
    size_t need = (self->fill_n ? self->fill_len : 4) + 4 + len;
    if (need > self->fill_cap) {
        size_t cap = self->fill_cap ? 2 * self->fill_cap : 4096;
        while (cap < need) cap *= 2;
        uint8_t *grown = realloc(self->fill, cap);
        if (!grown) {
            pthread_mutex_unlock(&self->mu);
            return -1;
        }
        self->fill = grown;
        self->fill_cap = cap;
    }
    if (self->fill_n == 0) self->fill_len = 4;
    wire_put_u32(self->fill + self->fill_len, (uint32_t)len);
    if (len) memcpy(self->fill + self->fill_len + 4, data, len);
    self->fill_len += 4 + len;
    self->fill_n++;
    self->sent++;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mu);
    return 0;
}

static void consumer_hello(wire_consumer_t *self)
{
    uint8_t hello[5] = {WIRE_HELLO};
    wire_put_u32(hello + 1, (uint32_t)self->credit);
    /* while the broker is away hellos queue up to the pipe's limit; past it
     * one more is pointless */
    zmq_send(zsock_resolve(self->sock), hello, sizeof hello, ZMQ_DONTWAIT);
    self->last_hello = zclock_mono();
}

wire_consumer_t *wire_consumer_new(const endpoints_t *ep, stream_t s, int credit, char *err, size_t errlen)
{
    if (work_stream(s, "consumer", err, errlen) < 0) return NULL;
    if (credit < 1) {
        snprintf(err, errlen, "%s consumer: credit %d must be at least 1", stream_name(s), credit);
        return NULL;
    }
    wire_consumer_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->credit = credit;
    self->acks[0] = WIRE_ACK;
    zmq_msg_init(&self->frame);
    char what[64];
    snprintf(what, sizeof what, "%s consumer", stream_name(s));
    self->sock = dealer_new(ep->out[s], 1, what, err, errlen);
    if (!self->sock) {
        free(self);
        return NULL;
    }
    consumer_hello(self);
    return self;
}

static int consumer_flush(wire_consumer_t *self)
{
    if (self->pending == 0) return 0;
    size_t len = 1 + 8 * (size_t)self->pending;
    self->pending = 0;
    /* an ack that cannot be queued only means the record comes again */
    zmq_send(zsock_resolve(self->sock), self->acks, len, ZMQ_DONTWAIT);
    return zsys_interrupted ? -1 : 0;
}

void wire_consumer_destroy(wire_consumer_t **self_p)
{
    wire_consumer_t *self = *self_p;
    if (!self) return;
    consumer_flush(self);
    zmq_msg_close(&self->frame);
    zsock_set_linger(self->sock, 200);
    zsock_destroy(&self->sock);
    free(self);
    *self_p = NULL;
}

/* Reads a batch frame's table into self; 0, or -1 for a frame that is no
 * batch (a probe is empty). */
static int batch_parse(wire_consumer_t *self, const zmq_msg_t *frame)
{
    const uint8_t *p = zmq_msg_data((zmq_msg_t *)frame);
    size_t size = zmq_msg_size((zmq_msg_t *)frame);
    if (size < 4) return -1;
    uint32_t n = wire_get_u32(p);
    if (n == 0 || n > WIRE_BATCH_MAX || size < WIRE_BATCH_HEAD(n)) return -1;
    size_t off = WIRE_BATCH_HEAD(n);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t len = wire_get_u32(p + 12 + 12 * k);
        if (len > size - off) return -1;
        self->batch_ids[k] = wire_get_u64(p + 4 + 12 * k);
        self->batch_off[k] = off;
        self->batch_size[k] = len;
        off += len;
    }
    if (off != size) return -1;
    self->batch_len = (int)n;
    self->batch_pos = 0;
    return 0;
}

/* The next record already received or waiting, or NULL when none is. */
static wire_record_t *consumer_take(wire_consumer_t *self)
{
    void *h = zsock_resolve(self->sock);
    while (self->batch_pos == self->batch_len) {
        zmq_msg_close(&self->frame);
        zmq_msg_init(&self->frame);
        self->batch_pos = self->batch_len = 0;
        if (zmq_msg_recv(&self->frame, h, ZMQ_DONTWAIT) < 0) return NULL;
        if (zmq_msg_more(&self->frame) || batch_parse(self, &self->frame) < 0) {
            drop_rest(h, &self->frame); /* a probe, or nothing a broker sends */
            self->batch_len = 0;
        }
    }
    int k = self->batch_pos++;
    /* the record shares the frame's buffer (ZeroMQ counts references to
     * it); a tiny frame is copied, so the offset is taken after the copy */
    wire_record_t *r = calloc(1, sizeof *r);
    if (!r) {
        self->batch_pos--;
        return NULL;
    }
    zmq_msg_init(&r->msg_);
    zmq_msg_copy(&r->msg_, &self->frame);
    r->id = self->batch_ids[k];
    r->data = (const uint8_t *)zmq_msg_data(&r->msg_) + self->batch_off[k];
    r->size = self->batch_size[k];
    return r;
}

wire_record_t *wire_consumer_recv(wire_consumer_t *self, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : zclock_mono() + timeout_ms;
    while (!zsys_interrupted) {
        wire_record_t *r = consumer_take(self);
        if (r) return r;
        /* nothing waiting: the broker must hear the acks before we sleep,
         * or it may be holding back records for our credit */
        if (consumer_flush(self) < 0) return NULL;
        int64_t now = zclock_mono();
        if (now - self->last_hello >= WIRE_HELLO_MS) {
            consumer_hello(self);
            now = self->last_hello;
        }
        long wait = WIRE_HELLO_MS - (long)(now - self->last_hello);
        if (deadline >= 0) {
            if (now >= deadline) return NULL;
            if (deadline - now < wait) wait = (long)(deadline - now);
        }
        wait_readable(zsock_resolve(self->sock), wait);
    }
    return NULL;
}

int wire_consumer_ack(wire_consumer_t *self, uint64_t id)
{
    int64_t now = zclock_mono();
    if (self->pending == 0) self->pending_since = now;
    wire_put_u64(self->acks + 1 + 8 * self->pending, id);
    self->pending++;
    /* acks wait for the next recv that finds nothing to read, batched, but
     * never long: a consumer that dies holding acked records gets them
     * again, and until the broker hears, they count against its credit */
    if (self->pending == WIRE_ACK_BATCH || now - self->pending_since >= WIRE_ACK_DELAY_MS) return consumer_flush(self);
    return zsys_interrupted ? -1 : 0;
}

wire_publisher_t *wire_publisher_new(const endpoints_t *ep, char *err, size_t errlen)
{
    wire_publisher_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    /* PUSH rather than PUB: a notice sent before the broker is connected
     * waits in the pipe instead of being dropped */
    self->sock = connect_sock(ZMQ_PUSH, ep->in[STREAM_NOTICES], "notices publisher", err, errlen);
    if (!self->sock) {
        free(self);
        return NULL;
    }
    zsock_set_linger(self->sock, 1000);
    return self;
}

void wire_publisher_destroy(wire_publisher_t **self_p)
{
    if (!*self_p) return;
    zsock_destroy(&(*self_p)->sock);
    free(*self_p);
    *self_p = NULL;
}

int wire_publisher_send(wire_publisher_t *self, const void *data, size_t len, char *err, size_t errlen)
{
    if (len > WIRE_RECORD_MAX) {
        snprintf(err, errlen, "policy notice of %zu bytes is over the %u byte limit", len, WIRE_RECORD_MAX);
        return -1;
    }
    if (zmq_send(zsock_resolve(self->sock), data, len, ZMQ_DONTWAIT) < 0) {
        snprintf(err, errlen, "policy notice dropped: the broker at %s is not taking notices (%s)",
                 zsock_endpoint(self->sock) ? zsock_endpoint(self->sock) : "?", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

wire_subscriber_t *wire_subscriber_new(const endpoints_t *ep, char *err, size_t errlen)
{
    wire_subscriber_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->sock = zsock_new(ZMQ_SUB);
    if (!self->sock) {
        snprintf(err, errlen, "notices subscriber: cannot create a socket");
        free(self);
        return NULL;
    }
    zsock_set_subscribe(self->sock, "");
    set_heartbeat(self->sock);
    set_maxmsgsize(self->sock);
    if (zmq_connect(zsock_resolve(self->sock), ep->out[STREAM_NOTICES]) != 0) {
        snprintf(err, errlen, "notices subscriber: cannot connect to %s: %s", ep->out[STREAM_NOTICES],
                 zmq_strerror(errno));
        zsock_destroy(&self->sock);
        free(self);
        return NULL;
    }
    return self;
}

void wire_subscriber_destroy(wire_subscriber_t **self_p)
{
    if (!*self_p) return;
    zsock_destroy(&(*self_p)->sock);
    free(*self_p);
    *self_p = NULL;
}

wire_record_t *wire_subscriber_recv(wire_subscriber_t *self, int timeout_ms)
{
    void *h = zsock_resolve(self->sock);
    int64_t deadline = timeout_ms < 0 ? -1 : zclock_mono() + timeout_ms;
    while (!zsys_interrupted) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, h, ZMQ_DONTWAIT) >= 0) {
            drop_rest(h, &msg);
            wire_record_t *r = record_new(&msg, 0);
            zmq_msg_close(&msg);
            return r;
        }
        zmq_msg_close(&msg);
        int64_t now = zclock_mono();
        if (deadline >= 0 && now >= deadline) return NULL;
        wait_readable(h, deadline < 0 ? 1000 : (long)(deadline - now));
    }
    return NULL;
}
