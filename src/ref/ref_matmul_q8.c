/* The scalar reference of the FAST integer-dot matmuls (the Vulkan intdot path): activations quantized per
 * 32-element block to int8 codes, exact integer dots per block, then the block's float scale products. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"
#include "ref_kquant.h"


/* weight_codes for the K types: sub-block b % 8 of 256-element block b / 8. */
static int k_codes(uint32_t t, const uint8_t *row, int64_t b, int32_t q[32], float *d, float *m, int32_t sc[2]) {
  int j = (int)(b % 8);
  const uint8_t *p = row + (b / 8) * (int64_t)icl_type_block_bytes(t);
  switch (t) {
  case ICL_TYPE_Q4_K:
  case ICL_TYPE_Q5_K: { /* element = d * sc_j * code - dmin * m_j: (d, m) per 32 elements */
    int s, mn, five = t == ICL_TYPE_Q5_K;
    icl_ref_k_scale_min(p + 4, j, &s, &mn);
    *d = icl_ref_rd_f16(p) * (float)s, *m = -(icl_ref_rd_f16(p + 2) * (float)mn);
    const uint8_t *qs = p + (five ? 48 : 16) + 32 * (j / 2), *qh = p + 16;
    for (int l = 0; l < 32; l++) {
      q[l] = j % 2 ? qs[l] >> 4 : qs[l] & 0xF;
      if (five) q[l] |= ((qh[l] >> j) & 1) << 4;
    }
    return 1;
  }
  case ICL_TYPE_Q6_K: { /* half h of the block, group g of its 128: element = d * sc[8h + 2g + l / 16] * code */
    int h = j / 4, g = j % 4;
    const uint8_t *ql = p + 64 * h + 32 * (g % 2), *qh = p + 128 + 32 * h;
    *d = icl_ref_rd_f16(p + 208);
    sc[0] = (int8_t)p[192 + 8 * h + 2 * g], sc[1] = (int8_t)p[192 + 8 * h + 2 * g + 1];
    for (int l = 0; l < 32; l++) q[l] = ((g >= 2 ? ql[l] >> 4 : ql[l] & 0xF) | ((qh[l] >> (2 * g)) & 3) << 4) - 32;
    return 1;
  }
  case ICL_TYPE_Q3_K: { /* half n, plane pl: element = d * scale(8n + 2pl + l / 16) * (crumb - 4 + 4 * hbit) */
    int n = j / 4, pl = j % 4;
    const uint8_t *qs = p + 32 + 32 * n, *hm = p;
    *d = icl_ref_rd_f16(p + 108);
    sc[0] = icl_ref_q3k_scale(p + 96, 8 * n + 2 * pl), sc[1] = icl_ref_q3k_scale(p + 96, 8 * n + 2 * pl + 1);
    for (int l = 0; l < 32; l++) q[l] = ((qs[l] >> (2 * pl)) & 3) - ((hm[l] >> (4 * n + pl)) & 1 ? 0 : 4);
    return 1;
  }
  default: return 0;
  }
}

/* Block b (32 elements) of a weight row as 32 integer codes, (d, m) and two integer half scales sc: element k =
 * d * sc[k / 16] * code + m; sc = {1, 1} except for the types whose 16-element sub-blocks have their own scales
 * (Q3_K, Q6_K), whose integer scales multiply the integer half dots. 0 for types without such blocks. */
static int weight_codes(uint32_t t, const uint8_t *row, int64_t b, int32_t q[32], float *d, float *m,
                        int32_t sc[2]) {
  const uint8_t *p;
  *m = 0.0f;
  sc[0] = sc[1] = 1;
  switch (t) {
  case ICL_TYPE_Q4_0:
    p = row + b * 18, *d = icl_ref_rd_f16(p);
    for (int i = 0; i < 16; i++) q[i] = (p[2 + i] & 15) - 8, q[i + 16] = (p[2 + i] >> 4) - 8;
    return 1;
  case ICL_TYPE_Q4_1:
    p = row + b * 20, *d = icl_ref_rd_f16(p), *m = icl_ref_rd_f16(p + 2);
    for (int i = 0; i < 16; i++) q[i] = p[4 + i] & 15, q[i + 16] = p[4 + i] >> 4;
    return 1;
  case ICL_TYPE_Q5_0:
  case ICL_TYPE_Q5_1: {
    int one = t == ICL_TYPE_Q5_1;
    p = row + b * (one ? 24 : 22), *d = icl_ref_rd_f16(p);
    if (one) *m = icl_ref_rd_f16(p + 2);
    const uint8_t *qh = p + (one ? 4 : 2), *qs = qh + 4;
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int i = 0; i < 16; i++) {
      q[i] = (int32_t)((qs[i] & 15) | ((h >> i) & 1) << 4) - (one ? 0 : 16);
      q[i + 16] = (int32_t)((qs[i] >> 4) | ((h >> (i + 16)) & 1) << 4) - (one ? 0 : 16);
    }
    return 1;
  }
  case ICL_TYPE_Q8_0:
    p = row + b * 34, *d = icl_ref_rd_f16(p);
    for (int i = 0; i < 32; i++) q[i] = (int8_t)p[2 + i];
    return 1;
  default: return k_codes(t, row, b, q, d, m, sc);
  }
}

void icl_ref_quantize_q8_block(const float *x, int8_t q[32], float *d, float *s) {
  float amax = 0.0f;
  for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
  float dd = amax / 127.0f, id = dd > 0.0f ? 1.0f / dd : 0.0f;
  int32_t sum = 0;
  for (int i = 0; i < 32; i++) {
    float r = nearbyintf(x[i] * id); /* round half to even in the default rounding mode */
    q[i] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
    sum += q[i];
  }
  *d = dd;
  *s = dd * (float)sum;
}

int icl_ref_matmul_q8(uint32_t t, const void *w, int64_t cols, int64_t rows, const float *x, int64_t n, float *y) {
  int32_t code[32], sc[2];
  float d, m;
  if (cols % icl_type_block_elems(t) || cols % 32 || !weight_codes(t, w, 0, code, &d, &m, sc)) return ICL_EUNSUPPORTED;
  int64_t nb = cols / 32;
  size_t rb = icl_type_row_bytes(t, cols);
  int8_t *xq = malloc((size_t)(n * cols));
  float *xd = malloc((size_t)(n * nb) * 2 * sizeof *xd);
  if (!xq || !xd) {
    free(xq), free(xd);
    return ICL_ENOMEM;
  }
  for (int64_t i = 0; i < n * nb; i++) icl_ref_quantize_q8_block(x + i * 32, xq + i * 32, &xd[2 * i], &xd[2 * i + 1]);
  for (int64_t r = 0; r < rows; r++) {
    const uint8_t *row = (const uint8_t *)w + (size_t)r * rb;
    for (int64_t i = 0; i < n; i++) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; b++) {
        weight_codes(t, row, b, code, &d, &m, sc);
        const int8_t *qx = xq + (i * nb + b) * 32;
        int32_t lo = 0, hi = 0;
        for (int k = 0; k < 16; k++) lo += code[k] * qx[k], hi += code[k + 16] * qx[k + 16];
        int32_t dot = sc[0] * lo + sc[1] * hi; /* exact: |dot| < 2^24 for every type */
        const float *ds = &xd[2 * (i * nb + b)];
        acc += (float)dot * (d * ds[0]); /* the stated order: the integer dot's product, then the minimum's */
        if (m != 0.0f) acc += m * ds[1];
      }
      y[i * rows + r] = acc;
    }
  }
  free(xq), free(xd);
  return ICL_OK;
}
