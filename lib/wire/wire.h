/* The client side of the node's streams. Every stream goes through the
 * broker (see util/endpoints.h); a process never talks to another directly.
 *
 * Work streams (tasks, rollouts, scored, batches) hand each record to
 * exactly one consumer, at least once: a producer pushes records to the
 * broker; a consumer announces how many records it may hold (its credit),
 * receives records tagged with a broker-assigned id, and acks each id when
 * it is done with it. Records a consumer holds unacked when it dies or
 * hangs go back to the head of the broker's queue, so a consumer killed and
 * restarted mid-stream loses nothing; the price is that the records it held
 * may be seen twice.
 *
 * The notices stream is a broadcast: the learner publishes notices, every
 * generator's subscriber receives them, and a subscriber that joins late
 * receives the last notice at once. A notice may arrive more than once
 * (whenever another subscriber joins): ignore versions already seen.
 *
 * Every object exposes its socket so a process can wait on several with
 * zpoller; every blocking call returns early on SIGINT/SIGTERM
 * (zsys_interrupted). */
#ifndef SAPO_WIRE_H
#define SAPO_WIRE_H

#include <czmq.h>
#include <stdint.h>
#include "util/endpoints.h"

#define WIRE_RECORD_MAX (16u << 20) /* bytes */

/* One received record. data is not aligned: read it with memcpy or copy it
 * before reading multi-byte fields. */
typedef struct {
    uint64_t id; /* broker-assigned on work streams; 0 on the notices stream */
    const void *data;
    size_t size;
    zmq_msg_t msg_; /* owns data */
} wire_record_t;

void wire_record_destroy(wire_record_t **self_p);

typedef struct wire_producer_t wire_producer_t;

/* A producer on a work stream (not notices: see wire_publisher_new). */
wire_producer_t *wire_producer_new(const endpoints_t *ep, stream_t s, char *err, size_t errlen);
/* Waits (up to 30 s, or until SIGTERM) until the broker has confirmed
 * receiving every record sent. */
void wire_producer_destroy(wire_producer_t **self_p);
/* Copies the record out and returns; it goes to the broker from the
 * producer's own thread, gathered with others that wait (see wire.c).
 * Blocks while the broker's queue is full. Returns 0, or -1 when len is
 * over WIRE_RECORD_MAX or the process was interrupted. */
int wire_producer_send(wire_producer_t *self, const void *data, size_t len);

typedef struct wire_consumer_t wire_consumer_t;

/* A consumer on a work stream that holds at most credit unacked records. */
wire_consumer_t *wire_consumer_new(const endpoints_t *ep, stream_t s, int credit, char *err, size_t errlen);
void wire_consumer_destroy(wire_consumer_t **self_p);
/* Waits up to timeout_ms (-1: forever, 0: only what is already there) for a
 * record. Returns NULL on timeout or interrupt. */
wire_record_t *wire_consumer_recv(wire_consumer_t *self, int timeout_ms);
/* Marks a record done: the broker forgets it and the consumer's credit is
 * free again. Acks are batched: sent when a recv finds nothing waiting, or
 * 50 ms after the first unsent one. Returns 0, or -1 when interrupted. */
int wire_consumer_ack(wire_consumer_t *self, uint64_t id);

typedef struct wire_publisher_t wire_publisher_t;

/* The learner's side of the notices stream. */
wire_publisher_t *wire_publisher_new(const endpoints_t *ep, char *err, size_t errlen);
void wire_publisher_destroy(wire_publisher_t **self_p);
/* Never blocks: returns -1 with a message in err when the notice cannot be
 * queued (the broker has been unreachable for a long while). */
int wire_publisher_send(wire_publisher_t *self, const void *data, size_t len, char *err, size_t errlen);

typedef struct wire_subscriber_t wire_subscriber_t;

/* A generator's side of the notices stream. */
wire_subscriber_t *wire_subscriber_new(const endpoints_t *ep, char *err, size_t errlen);
void wire_subscriber_destroy(wire_subscriber_t **self_p);
/* As wire_consumer_recv; the record's id is 0 and needs no ack. */
wire_record_t *wire_subscriber_recv(wire_subscriber_t *self, int timeout_ms);

#endif
