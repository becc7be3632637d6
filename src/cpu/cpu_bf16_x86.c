/* FAST attention's bf16 kernels on AVX-512 BF16 (Zen 4, Sapphire Rapids, Cooper Lake): vdpbf16ps multiplies 16
 * bf16 pairs and adds both products into 16 f32 lanes, twice the multiply-adds of an f32 fma per instruction.
 * The layouts and the arithmetic are cpu_bf16.c's (the scalar references). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_internal.h"
#include "cpu_simd_x86.h"

#define BF16 "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma"
#define AI inline __attribute__((always_inline))

/* The 32-row tile in two registers times NT <= 8 tokens: per pair column, two loads, NT broadcasts and 2 NT pair
 * dots into 16 accumulators. */
static AI __attribute__((target(BF16))) void gemm32bf_avx512(const uint32_t *wp, int64_t K2, const uint32_t *xp,
                                                             const int NT, float *y, int64_t ldy, int nr) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < K2; p++) {
    __m512bh w0 = (__m512bh)_mm512_loadu_si512(wp + p * CPU_TILE_ROWS);
    __m512bh w1 = (__m512bh)_mm512_loadu_si512(wp + p * CPU_TILE_ROWS + 16);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      __m512bh b = (__m512bh)_mm512_set1_epi32((int)xp[p * 8 + t]);
      acc[t][0] = _mm512_dpbf16_ps(acc[t][0], w0, b);
      acc[t][1] = _mm512_dpbf16_ps(acc[t][1], w1, b);
    }
  }
  cpu_store32_avx512(acc, NT, y, ldy, nr);
}

__attribute__((target(BF16))) static void gemm_tile_bf16_avx512(const uint32_t *wp, int64_t K2, const uint32_t *xp,
                                                                int nt, float *y, int64_t ldy, int nr) {
  switch (nt) {
  case 1: gemm32bf_avx512(wp, K2, xp, 1, y, ldy, nr); break;
  case 2: gemm32bf_avx512(wp, K2, xp, 2, y, ldy, nr); break;
  case 3: gemm32bf_avx512(wp, K2, xp, 3, y, ldy, nr); break;
  case 4: gemm32bf_avx512(wp, K2, xp, 4, y, ldy, nr); break;
  case 5: gemm32bf_avx512(wp, K2, xp, 5, y, ldy, nr); break;
  case 6: gemm32bf_avx512(wp, K2, xp, 6, y, ldy, nr); break;
  case 7: gemm32bf_avx512(wp, K2, xp, 7, y, ldy, nr); break;
  default: gemm32bf_avx512(wp, K2, xp, 8, y, ldy, nr); break;
  }
}

/* pack_x_bf16 on 8 rows at a time (the rest by the scalar reference): per 32 columns (the last ones masked, zeros
 * past K), each row rounded to 16 pairs (vcvtne2ps2bf16, nearest even) and the 8 x 16 block of pairs transposed in
 * two 8 x 8 halves. Attention packs its queries, keys and probabilities this way. */
__attribute__((target(BF16))) static void pack_x_bf16_avx512(const float *x, int64_t ldx, int64_t K, int nt, int gnt,
                                                             uint32_t *xp) {
  int t0 = 0;
  for (; t0 + 8 <= nt; t0 += 8)
    for (int64_t c = 0; c < K; c += 32) {
      int64_t n = K - c < 32 ? K - c : 32, np = (n + 1) / 2;
      __mmask16 m0 = cpu_lanes16(n);
      __mmask16 m1 = cpu_lanes16(n - 16);
      __m256 lo[8], hi[8], col[8];
#pragma GCC unroll 8
      for (int t = 0; t < 8; t++) {
        const float *xt = x + (t0 + t) * ldx + c;
        __m512i pr = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, xt + 16), _mm512_maskz_loadu_ps(m0, xt));
        lo[t] = _mm256_castsi256_ps(_mm512_castsi512_si256(pr));
        hi[t] = _mm256_castsi256_ps(_mm512_extracti64x4_epi64(pr, 1));
      }
      uint32_t *o = xp + (c / 2) * gnt + t0;
      cpu_t8_avx2(lo, col);
      for (int i = 0; i < 8 && i < np; i++) _mm256_storeu_ps((float *)(o + i * gnt), col[i]);
      if (np > 8) {
        cpu_t8_avx2(hi, col);
        for (int i = 0; i < np - 8; i++) _mm256_storeu_ps((float *)(o + (8 + i) * gnt), col[i]);
      }
    }
  if (t0 < nt) cpu_pack_x_bf16_c(x + t0 * ldx, ldx, K, nt - t0, gnt, xp + t0);
}

/* pair_rows_bf16: per 16 columns (the last masked), both rows rounded (vcvtneps2bf16) and their bf16 interleaved. */
__attribute__((target(BF16))) static void pair_rows_bf16_avx512(const float *a, const float *b, int64_t n,
                                                                uint32_t *out) {
  for (int64_t d = 0; d < n; d += 16) {
    __mmask16 m = cpu_lanes16(n - d);
    __m256i lo = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, a + d));
    __m256i hi = b ? (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, b + d)) : _mm256_setzero_si256();
    __m512i w = _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
    _mm512_mask_storeu_epi32(out + d, m, w);
  }
}

void cpu_kernels_bf16_avx512(cpu_kernels *k) {
  k->gemm_tile_bf16 = gemm_tile_bf16_avx512;
  k->pack_x_bf16 = pack_x_bf16_avx512;
  k->pair_rows_bf16 = pair_rows_bf16_avx512;
}

#endif
