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

/* The stream of one sequence of a data generator's batch: keyed by (seed, step, sequence) only, so a batch is a
 * function of (seed, step) whatever the batch size or the order the sequences are drawn in. */
static inline uint64_t tr_sequence_stream(uint64_t seed, int64_t step, int64_t b) {
  uint64_t s = seed;
  s = tr_splitmix(&s) ^ (uint64_t)step;
  return tr_splitmix(&s) ^ (uint64_t)b;
}

#endif
