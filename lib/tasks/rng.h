/* The task generators' PRNG: xoshiro256** seeded through splitmix64 from
 * (seed, index), so question number index of a dataset depends on nothing but
 * the seed and the index, the way reasoning-gym seeds Random(seed + idx).
 * We do not reproduce Python's Mersenne Twister sequence: only the ranges. */
#ifndef SAPO_TASKS_RNG_H
#define SAPO_TASKS_RNG_H

#include <stdint.h>

#include "util/splitmix.h"

typedef struct {
    uint64_t s[4];
} task_rng_t;

static inline void task_rng_init(task_rng_t *r, uint64_t seed, uint64_t index)
{
    /* mixing index through its own splitmix step keeps (seed, index) and
     * (seed + 1, index - 1) apart, unlike seed + idx */
    uint64_t x = index;
    uint64_t k = seed ^ splitmix64(&x);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&k);
}

static inline uint64_t task_rng_rotl(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

static inline uint64_t task_rng_next(task_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t out = task_rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = task_rng_rotl(s[3], 45);
    return out;
}

/* uniform in [0, n), n > 0, without modulo bias */
static inline uint64_t task_rng_below(task_rng_t *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, v;
    do v = task_rng_next(r);
    while (v >= limit);
    return v % n;
}

/* uniform in [lo, hi], like Python's randint; lo <= hi */
static inline int64_t task_rng_range(task_rng_t *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    if (span == UINT64_MAX) return (int64_t)task_rng_next(r);
    return (int64_t)((uint64_t)lo + task_rng_below(r, span + 1));
}

/* uniform in [0, 1) with 53 random bits, like Python's random() */
static inline double task_rng_double(task_rng_t *r) { return (double)(task_rng_next(r) >> 11) * 0x1.0p-53; }

#endif
