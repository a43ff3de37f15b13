/* Screening of groups drawn from the swarm's pool. Every byte in the
 * pool may come from a hostile peer, so an entry is checked here before any
 * field of it is used: size, the signature under the key registered for the
 * node the entry is stored under (util/identity.h: an entry is signature ||
 * record), FlatBuffers verification, node id, the record's node being that
 * node (no replay of another node's records under one's own id), group size,
 * text lengths, UTF-8, a task family this node can score, metadata that is a
 * JSON object naming that family, and a window of recently seen contents
 * (duplicate floods). Each rejection is counted by reason, and the counts
 * go into the batch's stats (metrics.jsonl "sampler"). No sockets here. */
#ifndef SAPO_SCREEN_H
#define SAPO_SCREEN_H

#include <stddef.h>
#include <stdint.h>

#include "records.h"

typedef enum {
    SCREEN_OK = 0,
    SCREEN_TOO_LARGE,      /* record over the size limit */
    SCREEN_MALFORMED,      /* not a verifiable group record */
    SCREEN_BAD_NODE,       /* node id that no pool key could hold */
    SCREEN_OWN,            /* the node's own group (never external) */
    SCREEN_WRONG_SIZE,     /* not L completions */
    SCREEN_TEXT_TOO_LONG,  /* a question, answer, metadata or completion text over the limit */
    SCREEN_BAD_UTF8,       /* a string that is not valid UTF-8 */
    SCREEN_UNKNOWN_FAMILY, /* a family this node has no scorer for */
    SCREEN_BAD_METADATA,   /* metadata not a JSON object naming the family */
    SCREEN_DUPLICATE,      /* content seen within the duplicate window */
    SCREEN_UNSIGNED,       /* shorter than a signature, or no key registered for its node */
    SCREEN_BAD_SIGNATURE,  /* signature does not verify under its node's key */
    SCREEN_NODE_MISMATCH,  /* signed, but the record names another node than the one it is stored under */
    SCREEN_NREASONS
} screen_reason_t;

typedef struct {
    const char *node;  /* this node: its own groups are refused */
    int completions;   /* L */
    size_t max_record; /* bytes of one record */
    size_t max_text;   /* bytes of one text field */
    int dup_window;    /* contents remembered for duplicate detection */
} screen_limits_t;

typedef struct screen screen_t;

screen_t *screen_new(const screen_limits_t *limits);
void screen_destroy(screen_t **self_p);

/* Checks one pool entry (signature || record, any alignment; entry NULL
 * for one left in the pool for its size) stored under node source, whose
 * registered public key is pub (NULL: none). Order: size, source id,
 * signature (before any parsing, so floods of junk cost one verification),
 * then the record as screen_check, which must name source as its node.
 * SCREEN_OK, or the first reason it fails; the reason is counted either
 * way. With view (not NULL), an entry that passes gets its record's view
 * there, pointing into entry, which must then hold the record
 * REC_ALIGN-aligned (pool_draw's entries do: 16-byte aligned, a 64-byte
 * signature); a record that is not is refused as malformed. */
screen_reason_t screen_entry(screen_t *self, const void *entry, size_t len, const char *source, const uint8_t *pub,
                             rec_group_view_t *view);

/* The record checks alone, on a bare record whose origin is not known
 * (what screen_entry runs after the signature; fuzzing drives it). */
screen_reason_t screen_check(screen_t *self, const void *buf, size_t len);

/* How many records were refused for reason r (SCREEN_OK: passed). */
long screen_count(const screen_t *self, screen_reason_t r);
/* Sum of every refusal except SCREEN_OWN. */
long screen_rejected(const screen_t *self);
/* The reason's name as metrics write it ("passed", "too_large", ...). */
const char *screen_reason_name(screen_reason_t r);

#endif
