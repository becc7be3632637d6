/* Register helpers the x86 kernel files share (cpu_kernels_x86.c for f32 tiles and activations, cpu_bf16_x86.c for
 * bf16 pairs). */
#ifndef ICL_CPU_SIMD_X86_H
#define ICL_CPU_SIMD_X86_H
#include <immintrin.h>
#include <stdint.h>

/* A 16-lane mask of the first n lanes (none for n <= 0, all for n >= 16): a loop's tail. */
static inline __mmask16 cpu_lanes16(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n > 0 ? (__mmask16)((1u << n) - 1) : (__mmask16)0;
}

/* The 8 x 8 transpose of 32-bit values: rows r[0..8) (clobbered) to columns c[0..8), c[j] lane i = r[i] lane j
 * (unpack 32-bit, shuffle 64-bit, swap 128-bit lanes). */
static inline __attribute__((always_inline, target("avx2"))) void cpu_t8_avx2(__m256 r[8], __m256 c[8]) {
  __m256 t[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) { /* column i from the low 128-bit lanes, column i + 4 from the high */
    c[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    c[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
}

/* Stores rows [0, nr) (nr <= 32) of NT tokens' 32-row accumulators (two registers each) to y[t*ldy + r]. */
static inline __attribute__((always_inline, target("avx512f"))) void cpu_store32_avx512(__m512 acc[8][2], const int NT,
                                                                                       float *y, int64_t ldy, int nr) {
  __mmask16 m0 = cpu_lanes16(nr), m1 = cpu_lanes16(nr - 16);
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    _mm512_mask_storeu_ps(y + t * ldy, m0, acc[t][0]);
    _mm512_mask_storeu_ps(y + t * ldy + 16, m1, acc[t][1]);
  }
}

#endif
