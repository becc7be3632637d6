/* The scalar reference of the FAST integer-dot matmuls (the Vulkan intdot path): activations quantized per
 * 32-element block to int8 codes, exact integer dots per block, then the block's float scale products. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"

static float rd_f16(const uint8_t *p) { return icl_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Block b of a weight row as 32 integer codes and (d, m): element = d * code + m. 0 for types without
 * 32-element blocks. */
static int weight_codes(uint32_t t, const uint8_t *row, int64_t b, int32_t q[32], float *d, float *m) {
  const uint8_t *p;
  *m = 0.0f;
  switch (t) {
  case ICL_TYPE_Q4_0:
    p = row + b * 18, *d = rd_f16(p);
    for (int i = 0; i < 16; i++) q[i] = (p[2 + i] & 15) - 8, q[i + 16] = (p[2 + i] >> 4) - 8;
    return 1;
  case ICL_TYPE_Q4_1:
    p = row + b * 20, *d = rd_f16(p), *m = rd_f16(p + 2);
    for (int i = 0; i < 16; i++) q[i] = p[4 + i] & 15, q[i + 16] = p[4 + i] >> 4;
    return 1;
  case ICL_TYPE_Q5_0:
  case ICL_TYPE_Q5_1: {
    int one = t == ICL_TYPE_Q5_1;
    p = row + b * (one ? 24 : 22), *d = rd_f16(p);
    if (one) *m = rd_f16(p + 2);
    const uint8_t *qh = p + (one ? 4 : 2), *qs = qh + 4;
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int i = 0; i < 16; i++) {
      q[i] = (int32_t)((qs[i] & 15) | ((h >> i) & 1) << 4) - (one ? 0 : 16);
      q[i + 16] = (int32_t)((qs[i] >> 4) | ((h >> (i + 16)) & 1) << 4) - (one ? 0 : 16);
    }
    return 1;
  }
  case ICL_TYPE_Q8_0:
    p = row + b * 34, *d = rd_f16(p);
    for (int i = 0; i < 32; i++) q[i] = (int8_t)p[2 + i];
    return 1;
  default: return 0;
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
  int32_t code[32];
  float d, m;
  if (cols % 32 || !weight_codes(t, w, 0, code, &d, &m)) return ICL_EUNSUPPORTED;
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
        weight_codes(t, row, b, code, &d, &m);
        const int8_t *qx = xq + (i * nb + b) * 32;
        int32_t dot = 0;
        for (int k = 0; k < 32; k++) dot += code[k] * qx[k];
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
