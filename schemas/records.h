/* C API over the FlatBuffers records defined in schemas/ (one .fbs per record type).
 *
 * Building: fill a plain struct of values (strings as C strings, NULL for
 * absent; arrays as pointer + count) and call rec_<kind>_build, which returns
 * a malloc'ed buffer (free it with rec_free or free).
 *
 * Reading: rec_<kind>_view runs the FlatBuffers Verifier over an untrusted
 * buffer first and fills a view only when it passes. A view points into the
 * buffer (zero copy) and is valid while the buffer lives. Absent strings read
 * as "", absent arrays as NULL with count 0.
 *
 * Alignment: the Verifier and the readers need the buffer at an 8-byte
 * aligned address (FlatBuffers aligns scalars relative to the buffer start).
 * ZeroMQ frames can arrive at any address, so pass a frame through
 * rec_aligned first: a misaligned buffer is rejected with an error, never
 * read. Records are little-endian, as is every machine sapo builds for.
 */
#ifndef SAPO_RECORDS_H
#define SAPO_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* larger buffers are rejected before verification */
#define REC_MAX_BYTES ((size_t)16 << 20)
#define REC_ALIGN 8

typedef enum {
    REC_UNKNOWN = 0,
    REC_TASK,   /* identifier "STSK" */
    REC_GROUP,  /* "SROL", from when it was called Rollout */
    REC_BATCH,  /* "SBAT" */
    REC_POLICY, /* "SPOL" */
} rec_kind_t;

typedef struct {
    uint64_t task_id;
    const char *family;
    const char *question;
    const char *answer; /* ground truth */
    const char *metadata_json;
    uint64_t seed;
    uint64_t index;
    const char *node;
    uint64_t round;
    uint64_t policy_version; /* sample with this policy version or a later one (lockstep; 0: any) */
} rec_task_t;

typedef struct {
    const char *text;
    const int32_t *token_ids; /* n_tokens of them, or NULL */
    size_t n_tokens;
    const float *logprobs; /* n_logprobs of them, or NULL */
    size_t n_logprobs;
    float reward;
    bool finished;
} rec_completion_t;

typedef struct {
    const char *node;
    uint64_t policy_version;
    uint64_t round;
    const char *model;
    rec_task_t task;
    const rec_completion_t *completions; /* n_completions of them */
    size_t n_completions;
    uint64_t created_ms;
    bool external;
    bool scored;
    uint32_t gen_ms;          /* time the generator spent sampling the group */
    uint32_t verify_ms;       /* time the verifier spent scoring it */
    uint64_t pool_age_ms;     /* external: ms since it was published, when drawn */
    uint32_t pool_age_rounds; /* external: the publisher's rounds since, when drawn */
} rec_group_t;

typedef struct {
    const char *node;
    uint64_t round;
    uint64_t policy_version;
    const rec_group_t *groups; /* n_groups of them */
    size_t n_groups;
    uint32_t local_count;
    uint32_t external_count;
    const char *stats_json; /* the sampler's counters for the round, JSON */
} rec_batch_t;

typedef struct {
    const char *node;
    uint64_t policy_version;
    uint64_t round;
    const char *checkpoint;
    uint64_t created_ms;
} rec_policy_t;

/* Views of verified buffers. The values are zero-copy; completions and
 * groups are read one at a time through the functions below, so r.completions
 * and b.groups are NULL while the counts are set. A group's values in r may
 * be changed in the view (a group drawn from the pool is marked external
 * here), and so may its rewards: rewards, when not NULL, are
 * r.n_completions rewards that stand for the record's (a peer's group
 * re-scored in memory, score_view), in what rec_group_completion and
 * rec_group_unpack read. */
typedef struct {
    rec_group_t r;
    const float *rewards;
    const void *table_;
} rec_group_view_t;

typedef struct {
    rec_batch_t b;
    const void *table_;
} rec_batch_view_t;

/* Each build returns 0 and a malloc'ed buffer in *buf of *len bytes, or -1
 * (out of memory, or a record over REC_MAX_BYTES). */
int rec_task_build(const rec_task_t *in, uint8_t **buf, size_t *len);
int rec_group_build(const rec_group_t *in, uint8_t **buf, size_t *len);
int rec_batch_build(const rec_batch_t *in, uint8_t **buf, size_t *len);
int rec_policy_build(const rec_policy_t *in, uint8_t **buf, size_t *len);
void rec_free(uint8_t *buf);

/* The record type by file identifier alone, without verifying anything. */
rec_kind_t rec_identify(const void *buf, size_t len);
const char *rec_kind_name(rec_kind_t kind);

/* Returns buf when it is REC_ALIGN-aligned (*copy = NULL), else a malloc'ed
 * aligned copy that is also stored in *copy for the caller to free. NULL
 * when out of memory. */
const void *rec_aligned(const void *buf, size_t len, void **copy);

/* Verifies buf as a record of its identified type; returns that type, or
 * REC_UNKNOWN with the reason in err. */
rec_kind_t rec_verify(const void *buf, size_t len, char *err, size_t errlen);

/* Each view verifies first; returns 0, or -1 with the reason in err (wrong
 * type, too large, misaligned, or failed verification). */
int rec_task_view(const void *buf, size_t len, rec_task_t *out, char *err, size_t errlen);
int rec_group_view(const void *buf, size_t len, rec_group_view_t *out, char *err, size_t errlen);
int rec_batch_view(const void *buf, size_t len, rec_batch_view_t *out, char *err, size_t errlen);
int rec_policy_view(const void *buf, size_t len, rec_policy_t *out, char *err, size_t errlen);

/* Completion i (< v->r.n_completions) with zero-copy text, token ids and
 * log-probs. */
void rec_group_completion(const rec_group_view_t *v, size_t i, rec_completion_t *out);
/* Group i (< v->b.n_groups) of a batch as a group view. */
void rec_batch_group(const rec_batch_view_t *v, size_t i, rec_group_view_t *out);

/* Fills *out from a view so that it can be changed and rebuilt: comps must
 * have room for v->r.n_completions and receives the completions. Strings and
 * arrays still point into the viewed buffer. */
void rec_group_unpack(const rec_group_view_t *v, rec_group_t *out, rec_completion_t *comps);

/* Overwrites the n rewards of a group in place and sets scored, in a
 * buffer the caller owns. n must equal the number of completions. Returns 0,
 * or -1 with the reason in err (failed verification, a count mismatch, or a
 * buffer whose reward or scored field was left out by its producer: rebuild
 * it with rec_group_unpack and rec_group_build instead). */
int rec_group_score(void *buf, size_t len, const float *rewards, size_t n, bool scored, char *err, size_t errlen);

/* Overwrites verify_ms in place in a buffer the caller owns. 0, or -1 with
 * the reason in err. */
int rec_group_set_verify_ms(void *buf, size_t len, uint32_t verify_ms, char *err, size_t errlen);

/* The record as strict JSON on one line (every scalar, defaults included),
 * from the schema compiled into the program. Verifies first. Returns a
 * malloc'ed string, or NULL with the reason in err. */
char *rec_to_json(const void *buf, size_t len, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
