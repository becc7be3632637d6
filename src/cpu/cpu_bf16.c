/* The scalar references of FAST attention's bf16 kernels (the generic level's entries; cpu_bf16_x86.c has the
 * AVX-512 BF16 ones): q.k and p.v on bf16 pairs with f32 sums. bf16 keeps 8 bits of mantissa, about what the
 * int8 activations of the FAST matmuls keep, and the pair dot runs at twice the f32 FMA rate where the CPU has it. */
#include "cpu_internal.h"

void cpu_gemm_tile_bf16_c(const uint32_t *wp, int64_t K2, const uint32_t *xp, int nt, float *y, int64_t ldy, int nr) {
  for (int t = 0; t < nt; t++) {
    float acc[CPU_TILE_ROWS] = {0};
    for (int64_t p = 0; p < K2; p++) {
      const uint32_t *w = wp + p * CPU_TILE_ROWS, x = xp[p * CPU_GENERIC_NT + t];
      float xl = cpu_bf16_f32(x), xh = cpu_bf16_f32(x >> 16);
      for (int r = 0; r < CPU_TILE_ROWS; r++) { /* both products are exact in f32; two roundings, high first */
        acc[r] += cpu_bf16_f32(w[r] >> 16) * xh;
        acc[r] += cpu_bf16_f32(w[r]) * xl;
      }
    }
    for (int r = 0; r < nr; r++) y[t * ldy + r] = acc[r];
  }
}

void cpu_pair_rows_bf16_c(const float *a, const float *b, int64_t n, uint32_t *out) {
  for (int64_t d = 0; d < n; d++) out[d] = cpu_bf16_pair(a[d], b ? b[d] : 0.0f);
}

void cpu_pack_x_bf16_c(const float *x, int64_t ldx, int64_t K, int nt, int gnt, uint32_t *xp) {
  int64_t K2 = (K + 1) / 2;
  for (int t = 0; t < nt; t++) {
    const float *xt = x + t * ldx;
    for (int64_t p = 0; p < K2; p++) xp[p * gnt + t] = cpu_bf16_pair(xt[2 * p], 2 * p + 1 < K ? xt[2 * p + 1] : 0.0f);
  }
}
