/* What producers, consumers and the broker say to each other on a work
 * stream (all DEALER, the broker ROUTER). Private to lib/wire.
 *
 *   producer -> broker at "in", one frame:
 *     n(u32), n x (len(u32), record)
 *                            the records that gathered while the last
 *                            frame was sent (1 when the broker keeps up),
 *                            the frame within WIRE_BATCH_MAX records and
 *                            WIRE_BATCH_BYTES past its first record
 *   broker -> producer:
 *     'C' count(u64)         records received from this producer so far;
 *                            a producer that is destroyed waits until the
 *                            count covers what it sent, because ZeroMQ's
 *                            linger alone drops the tail of a backed-up
 *                            pipe when the process exits
 *
 * At "out":
 *   consumer -> broker, one frame:
 *     'H' credit(u32)        hello; repeated while the consumer waits, so a
 *                            restarted broker learns its consumers again
 *     'A' id(u64) ...        acks, several per frame
 *   broker -> consumer, one frame:
 *     n(u32), n x (id(u64) len(u32)), record 1 ... record n
 *                            n records back to back, n at most the
 *                            consumer's free credit and WIRE_BATCH_MAX,
 *                            and records after the first only while the
 *                            frame stays within WIRE_BATCH_BYTES. One
 *                            frame rather than one per record: ZeroMQ's
 *                            cost is per message, and the broker's I/O
 *                            thread is what limits a node's throughput
 *     (empty frame)          probe: the broker sends one to every consumer
 *                            now and then; a failed send means the
 *                            consumer's connection is gone
 *
 * Integers are little-endian. Liveness of a connection that stays open is
 * ZeroMQ's own heartbeat (ZMTP PING/PONG), answered by ZeroMQ's I/O thread:
 * a consumer busy for minutes on one record is alive, a stopped or
 * unreachable one is cut off after the heartbeat timeout. */
#ifndef SAPO_WIRE_PROTO_H
#define SAPO_WIRE_PROTO_H

#include <stdint.h>

#define WIRE_HELLO 'H'
#define WIRE_ACK 'A'
#define WIRE_RECEIVED 'C'
#define WIRE_HELLO_MS 1000                        /* a waiting consumer repeats its hello this often */
#define WIRE_ACK_BATCH 256                        /* most acks in one frame */
#define WIRE_BATCH_MAX 64                         /* most records in one message to a consumer */
#define WIRE_BATCH_BYTES (1u << 20)               /* a batch grows past one record only within this */
#define WIRE_PRODUCER_HWM 16                      /* frames a producer's pipe holds */
#define WIRE_BATCH_HEAD(n) (4 + 12 * (size_t)(n)) /* bytes before a batch's records */
#define WIRE_ACK_DELAY_MS 50                      /* longest an ack waits to be batched */
#define WIRE_HEARTBEAT_MS 3000

static inline void wire_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t wire_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void wire_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t wire_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

#endif
