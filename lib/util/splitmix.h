/* splitmix64 (Steele, Lea and Flood): the next number of a 64-bit seeded
 * stream, advancing *state. One copy for every small seeded stream in sapo
 * (initial weights, the pool's draws, the task generators' seeding, the
 * permutation test, test floods); sampling uses sampling/rng.h. */
#ifndef SAPO_SPLITMIX_H
#define SAPO_SPLITMIX_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
