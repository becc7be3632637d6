/* Ceiling probes at the x86 SIMD levels: register-resident chains of f32 FMAs and of int8 dot
 * products, and a read stream, each as fast as the instruction set allows (cpu_ceilings.c times them). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_internal.h"

#define AVX2 "avx2,fma,f16c"
#define AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
/* Independent accumulator chains: more than FMA latency x FMA ports (4 x 2) on current cores. */
#define CHAINS 12

__attribute__((target(AVX2))) static double fma_avx2(int64_t iters, float *sink) {
  __m256 acc[CHAINS], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
  for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm256_add_ps(s, acc[i]);
  *sink = _mm256_cvtss_f32(s);
  return (double)iters * CHAINS * 8 * 2;
}

/* u8 x s8 products summed in pairs to s16 (vpmaddubsw), then to s32 (vpmaddwd): 32 multiply-adds. */
__attribute__((target(AVX2))) static double dot8_avx2(int64_t iters, float *sink) {
  __m256i acc[CHAINS], u = _mm256_set1_epi8(1), s8 = _mm256_set1_epi8(1), one = _mm256_set1_epi16(1);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_epi32(i);
  for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s8), one));
  __m256i s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm256_add_epi32(s, acc[i]);
  *sink = (float)_mm256_extract_epi32(s, 0);
  return (double)iters * CHAINS * 32 * 2;
}

__attribute__((target(AVX2))) static double read_avx2(const float *x, int64_t n, float *sink) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(x + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(x + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(x + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(x + i + 24));
  }
  *sink += _mm256_cvtss_f32(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return (double)(n / 32 * 32) * sizeof(float);
}

__attribute__((target(AVX512))) static double fma_avx512(int64_t iters, float *sink) {
  __m512 acc[CHAINS], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
  *sink = _mm512_reduce_add_ps(s);
  return (double)iters * CHAINS * 16 * 2;
}

/* vpdpbusd: 64 u8 x s8 multiply-adds per instruction. */
__attribute__((target(AVX512))) static double dot8_avx512(int64_t iters, float *sink) {
  __m512i acc[CHAINS], u = _mm512_set1_epi8(1), s8 = _mm512_set1_epi8(1);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s8);
  __m512i s = acc[0];
  for (int i = 1; i < CHAINS; i++) s = _mm512_add_epi32(s, acc[i]);
  *sink = (float)_mm512_reduce_add_epi32(s);
  return (double)iters * CHAINS * 64 * 2;
}

__attribute__((target(AVX512))) static double read_avx512(const float *x, int64_t n, float *sink) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(x + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(x + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(x + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(x + i + 48));
  }
  *sink += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  return (double)(n / 64 * 64) * sizeof(float);
}

void cpu_probes_avx2(cpu_kernels *k) {
  k->probe_fma = fma_avx2;
  k->probe_dot8 = dot8_avx2;
  k->probe_read = read_avx2;
}

void cpu_probes_avx512(cpu_kernels *k) {
  k->probe_fma = fma_avx512;
  k->probe_dot8 = dot8_avx512;
  k->probe_read = read_avx512;
}
#endif
