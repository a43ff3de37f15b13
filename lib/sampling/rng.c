/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
 * easy as 1, 2, 3", SC 2011) laid out as cuRAND's host generator lays it
 * out, found by matching its raw output: the generator runs 65536 virtual
 * threads, thread t owns subsequence t (counter word 2) and each of its
 * steps (counter words 0-1) yields four words. Stream position q therefore
 * is word q % 4 of block b = q / 4, with counter (b >> 16, 0, b & 0xffff, 0)
 * and key (seed low, seed high); successive calls continue at the next
 * position whatever the lengths. Word w becomes the float w * 2^-32 + 2^-33
 * (cuRAND's uniform conversion, in (0, 1]); 2^-32 is a power of two, so the
 * product is exact and fused or separate multiply-add round alike. */
#include "sampling/rng.h"

#include <stdlib.h>

#include "util/log.h"

#ifdef SAPO_HAVE_CURAND
#include <curand.h>
#endif

#define PHILOX_THREADS_LOG2 16
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

struct rng {
#ifdef SAPO_HAVE_CURAND
    curandGenerator_t gen;
#else
    uint64_t seed;
    uint64_t offset;
#endif
};

static void philox4x32_10(const uint32_t ctr[4], uint64_t seed, uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

static float word_to_uniform(uint32_t w)
{
    const float two_m32 = 0x1p-32f;
    return (float)w * two_m32 + 0x1p-33f;
}

void rng_philox_uniform(uint64_t seed, uint64_t offset, float *out, size_t n)
{
    uint64_t q = offset;
    size_t i = 0;
    while (i < n) {
        uint64_t b = q >> 2;
        uint64_t step = b >> PHILOX_THREADS_LOG2;
        uint32_t ctr[4] = {(uint32_t)step, (uint32_t)(step >> 32), (uint32_t)(b & ((1u << PHILOX_THREADS_LOG2) - 1)),
                           0};
        uint32_t words[4];
        philox4x32_10(ctr, seed, words);
        for (unsigned w = (unsigned)(q & 3); w < 4 && i < n; w++, i++, q++) out[i] = word_to_uniform(words[w]);
    }
}

rng_t *rng_new(uint64_t seed)
{
    rng_t *self = calloc(1, sizeof *self);
    if (!self) {
        log_error("rng: out of memory");
        return NULL;
    }
#ifdef SAPO_HAVE_CURAND
    curandStatus_t st = curandCreateGeneratorHost(&self->gen, CURAND_RNG_PSEUDO_PHILOX4_32_10);
    if (st == CURAND_STATUS_SUCCESS) st = curandSetPseudoRandomGeneratorSeed(self->gen, seed);
    if (st != CURAND_STATUS_SUCCESS) {
        log_error("rng: cuRAND host Philox generator for seed %llu failed (curandStatus %d)", (unsigned long long)seed,
                  (int)st);
        if (self->gen) curandDestroyGenerator(self->gen);
        free(self);
        return NULL;
    }
#else
    self->seed = seed;
#endif
    return self;
}

void rng_destroy(rng_t **self_p)
{
    if (!self_p || !*self_p) return;
#ifdef SAPO_HAVE_CURAND
    curandDestroyGenerator((*self_p)->gen);
#endif
    free(*self_p);
    *self_p = NULL;
}

void rng_uniform(rng_t *self, float *out, size_t n)
{
    if (n == 0) return;
#ifdef SAPO_HAVE_CURAND
    /* the only failures cuRAND reports here are misuse (a NULL or
     * misaligned pointer) or a broken install: neither is recoverable */
    curandStatus_t st = curandGenerateUniform(self->gen, out, n);
    if (st != CURAND_STATUS_SUCCESS)
        log_fatal("rng: curandGenerateUniform of %zu floats failed (curandStatus %d)", n, (int)st);
#else
    rng_philox_uniform(self->seed, self->offset, out, n);
    self->offset += n;
#endif
}
