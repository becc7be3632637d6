/* The CPU backend's own dequantization of the GGUF block types (the prefill tile path, get_rows, the float
 * decode path). Written apart from src/ref/ref_quant.c on purpose: the oracle the backend is tested against
 * must not share its code, or a decoding bug would be in both and no test would see it. Layouts: docs/gguf.md. */
#include <string.h>

#include "cpu_internal.h"

static float h16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2); /* little-endian host, as the GGUF reader requires */
  return icl_f16_to_f32(h);
}

/* 32-weight blocks: [d f16][m f16 (q4_1, q5_1)][qh u32 (q5_*)][qs: low nibbles = weights 0..15, high = 16..31] */
static void dq_nibbles(const uint8_t *b, float *y, int has_min, int has_high) {
  float d = h16(b), m = has_min ? h16(b + 2) : 0.0f;
  const uint8_t *p = b + (has_min ? 4 : 2);
  uint32_t high = 0;
  if (has_high) memcpy(&high, p, 4), p += 4;
  int bias = has_min ? 0 : has_high ? 16 : 8; /* symmetric types centre their codes */
  for (int j = 0; j < 16; j++) {
    int lo = p[j] & 15, hi = p[j] >> 4;
    if (has_high) lo |= (int)((high >> j) & 1) << 4, hi |= (int)((high >> (j + 16)) & 1) << 4;
    y[j] = (float)(lo - bias) * d + m;
    y[j + 16] = (float)(hi - bias) * d + m;
  }
}

static void dq_q8_0(const uint8_t *b, float *y) {
  float d = h16(b);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* ---- 256-weight super-blocks ----------------------------------------------------------------------------------- */

/* q4_k / q5_k: eight 6-bit (scale, min) pairs packed in 12 bytes. */
static void k4_scale(const uint8_t *s, int j, int *sc, int *mn) {
  if (j < 4) {
    *sc = s[j] & 63, *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

/* [d][dmin][scales 12][qh 32 (q5_k)][qs 128]: 64-weight groups, low nibbles then high nibbles of 32 bytes. */
static void dq_q45_k(const uint8_t *b, float *y, int five) {
  float d = h16(b), dmin = h16(b + 2);
  const uint8_t *s = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
  for (int g = 0; g < 4; g++) {
    for (int half = 0; half < 2; half++) {
      int sc, mn;
      k4_scale(s, 2 * g + half, &sc, &mn);
      float dl = d * (float)sc, ml = dmin * (float)mn;
      for (int l = 0; l < 32; l++) {
        int q = half ? qs[32 * g + l] >> 4 : qs[32 * g + l] & 15;
        if (five) q += (qh[l] >> (2 * g + half) & 1) << 4;
        y[64 * g + 32 * half + l] = dl * (float)q - ml;
      }
    }
  }
}

/* [scales 16: low nibble scale, high nibble min][qs 64][d][dmin]; weight i of 128-halves: 2 bits of a byte. */
static void dq_q2_k(const uint8_t *b, float *y) {
  const uint8_t *sc = b, *qs = b + 16;
  float d = h16(b + 80), dmin = h16(b + 82);
  for (int i = 0; i < 256; i++) {
    int half = i / 128, r = i % 128, shift = 2 * (r / 32), col = r % 32, sub = (r / 16) % 2;
    int s = sc[8 * half + 2 * (r / 32) + sub];
    int q = qs[32 * half + col] >> shift & 3;
    y[i] = d * (float)(s & 15) * (float)q - dmin * (float)(s >> 4);
  }
}

/* q3_k's sixteen 6-bit scales: low 4 bits in bytes 0..7 (nibbles), high 2 bits in bytes 8..11. */
static int k3_scale(const uint8_t *s, int j) {
  int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  int hi = s[8 + j % 4] >> (2 * (j / 4)) & 3;
  return (lo | hi << 4) - 32;
}

/* [hmask 32][qs 64][scales 12][d]: 2 low bits as in q2_k, the third from hmask (clear = minus 4). */
static void dq_q3_k(const uint8_t *b, float *y) {
  const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
  float d = h16(b + 108);
  for (int i = 0; i < 256; i++) {
    int half = i / 128, r = i % 128, pair = r / 32, col = r % 32;
    int q = (qs[32 * half + col] >> (2 * pair) & 3) - ((hm[col] >> (4 * half + pair) & 1) ? 0 : 4);
    y[i] = d * (float)k3_scale(sc, i / 16) * (float)q;
  }
}

/* [ql 128][qh 64][scales 16 i8][d]: 6-bit codes minus 32, per 128-half four 32-weight quarters. */
static void dq_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = h16(b + 208);
  for (int i = 0; i < 256; i++) {
    int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
    int lo = ql[64 * half + 32 * (quarter & 1) + l];
    lo = quarter < 2 ? lo & 15 : lo >> 4;
    int hi = qh[32 * half + l] >> (2 * quarter) & 3;
    y[i] = d * (float)sc[8 * half + 2 * quarter + l / 16] * (float)((lo | hi << 4) - 32);
  }
}

static void dq_block(uint32_t t, const uint8_t *b, float *y) {
  switch (t) {
  case ICL_TYPE_Q4_0: dq_nibbles(b, y, 0, 0); break;
  case ICL_TYPE_Q4_1: dq_nibbles(b, y, 1, 0); break;
  case ICL_TYPE_Q5_0: dq_nibbles(b, y, 0, 1); break;
  case ICL_TYPE_Q5_1: dq_nibbles(b, y, 1, 1); break;
  case ICL_TYPE_Q8_0: dq_q8_0(b, y); break;
  case ICL_TYPE_Q2_K: dq_q2_k(b, y); break;
  case ICL_TYPE_Q3_K: dq_q3_k(b, y); break;
  case ICL_TYPE_Q4_K: dq_q45_k(b, y, 0); break;
  case ICL_TYPE_Q5_K: dq_q45_k(b, y, 1); break;
  case ICL_TYPE_Q6_K: dq_q6_k(b, y); break;
  default: memset(y, 0, (size_t)icl_type_block_elems(t) * sizeof *y); break; /* not a weight type (types.c) */
  }
}

void cpu_dequant_blocks(uint32_t t, const void *src, float *dst, int64_t n) {
  int64_t bs = icl_type_block_elems(t);
  size_t bb = icl_type_block_bytes(t);
  const uint8_t *b = src;
  for (int64_t i = 0; i < n; i += bs, b += bb) dq_block(t, b, dst + i);
}
