/* The trainer's one random generator: splitmix64 (data generators and weight init share it). */
#ifndef ICL_TRAIN_RNG_H
#define ICL_TRAIN_RNG_H

#include <stdint.h>

/* Next 64 random bits of the stream s. */
static inline uint64_t tr_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

#endif
