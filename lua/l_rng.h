/* icl.rng's C core: xoshiro256** seeded through splitmix64, the same sequence on every platform. */
#ifndef ICL_L_RNG_H
#define ICL_L_RNG_H

#include <stdint.h>

typedef struct icl_rng {
  uint64_t s[4]; /* xoshiro256** state, never all zero */
} icl_rng;

/* Seeds the four state words with four successive splitmix64 outputs of seed. */
void icl_rng_seed(icl_rng *r, uint64_t seed);

/* The next raw 64-bit output. */
uint64_t icl_rng_next(icl_rng *r);

/* Uniform double in [0, 1) from the top 53 bits of one output. */
double icl_rng_uniform(icl_rng *r);

/* Uniform integer in [0, range) without bias (rejection of the short tail); range 0 means 2^64. */
uint64_t icl_rng_below(icl_rng *r, uint64_t range);

/* Standard normal by the Marsaglia polar method (consumes pairs of uniforms, keeps no spare). */
double icl_rng_normal(icl_rng *r);

/* k distinct integers of [0, n) in random order (Floyd's algorithm, then a shuffle); out holds k. Returns 0, or
 * -1 when k > n or memory runs out. */
int icl_rng_sample(icl_rng *r, uint64_t n, uint64_t k, uint64_t *out);

#endif
