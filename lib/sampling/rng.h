/* Uniform random floats from the Philox4x32-10 counter-based generator,
 * exactly as cuRAND's host generator (CURAND_RNG_PSEUDO_PHILOX4_32_10,
 * default ordering, offset 0) produces them, so a seed gives the same
 * numbers on the CPU, with or without the CUDA toolkit, and on the GPU.
 * With cuRAND present (SAPO_HAVE_CURAND) cuRAND itself draws; otherwise an
 * own Philox implementation reproduces its output bit for bit. */
#ifndef SAPO_RNG_H
#define SAPO_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rng rng_t;

/* NULL (after one error line) when the generator cannot be created */
rng_t *rng_new(uint64_t seed);
void rng_destroy(rng_t **self_p);
/* next n floats of the stream, each in (0, 1]; successive calls continue
 * the stream as cuRAND's successive curandGenerateUniform calls do */
void rng_uniform(rng_t *self, float *out, size_t n);

/* floats offset .. offset+n-1 of seed's stream, computed without cuRAND:
 * what rng_uniform draws when the toolkit is absent */
void rng_philox_uniform(uint64_t seed, uint64_t offset, float *out, size_t n);

#endif
