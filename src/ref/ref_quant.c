/* Reference dequantization, quantization and random weights for every weight type.
 * Block layouts follow the GGUF/ggml formats (see FACTS.md); everything here is plain scalar C
 * written for clarity, since it is the oracle the fast backends are checked against. */
#include <math.h>
#include <string.h>

#include "ref.h"
#include "ref_kquant.h"

/* ---- little helpers ----------------------------------------------------------------------- */

static void wr_f16(uint8_t *p, float f) {
  uint16_t h = icl_f32_to_f16(f);
  p[0] = (uint8_t)(h & 0xff);
  p[1] = (uint8_t)(h >> 8);
}

static uint32_t rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The value with the largest magnitude, sign kept (symmetric quantizers map it to the most
 * negative code so the full code range is used). */
static float signed_absmax(const float *x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; i++)
    if (fabsf(x[i]) > fabsf(best)) best = x[i];
  return best;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
  *mn = x[0];
  *mx = x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < *mn) *mn = x[i];
    if (x[i] > *mx) *mx = x[i];
  }
}

/* Stores f as fp16 and returns the value actually stored, so quantization uses the same
 * scale the decoder will see. */
static float put_f16(uint8_t *p, float f) {
  wr_f16(p, f);
  return icl_ref_rd_f16(p);
}

/* ---- 32-element block types --------------------------------------------------------------- */

static void deq_q4_0(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b);
  const uint8_t *qs = b + 2;
  for (int j = 0; j < 16; j++) {
    y[j] = (float)((qs[j] & 0xF) - 8) * d;
    y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
  }
}

static void deq_q4_1(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b), m = icl_ref_rd_f16(b + 2);
  const uint8_t *qs = b + 4;
  for (int j = 0; j < 16; j++) {
    y[j] = (float)(qs[j] & 0xF) * d + m;
    y[j + 16] = (float)(qs[j] >> 4) * d + m;
  }
}

static void deq_q5_0(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b);
  uint32_t qh = rd_u32(b + 2);
  const uint8_t *qs = b + 6;
  for (int j = 0; j < 16; j++) {
    int lo = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
    int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    y[j] = (float)(lo - 16) * d;
    y[j + 16] = (float)(hi - 16) * d;
  }
}

static void deq_q5_1(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b), m = icl_ref_rd_f16(b + 2);
  uint32_t qh = rd_u32(b + 4);
  const uint8_t *qs = b + 8;
  for (int j = 0; j < 16; j++) {
    int lo = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
    int hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    y[j] = (float)lo * d + m;
    y[j + 16] = (float)hi * d + m;
  }
}

static void deq_q8_0(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* ---- 256-element K types ------------------------------------------------------------------ */

void icl_ref_k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/* Q2_K: scales[16] (lo nibble scale, hi nibble min), qs[64], d, dmin. Each 128-half takes 32
 * bytes of qs; the four 2-bit planes (shift 0,2,4,6) give 32 outputs each, 16 per sub-block. */
static void deq_q2_k(const uint8_t *b, float *y) {
  const uint8_t *sc = b, *qs = b + 16;
  float d = icl_ref_rd_f16(b + 80), dmin = icl_ref_rd_f16(b + 82);
  for (int half = 0; half < 2; half++) {
    const uint8_t *q = qs + 32 * half;
    for (int plane = 0; plane < 4; plane++) {
      for (int sub = 0; sub < 2; sub++) {
        int is = 8 * half + 2 * plane + sub;
        float dl = d * (float)(sc[is] & 0xF), ml = dmin * (float)(sc[is] >> 4);
        for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[16 * sub + l] >> (2 * plane)) & 3) - ml;
      }
    }
  }
}

int icl_ref_q3k_scale(const uint8_t *s, int j) {
  int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | hi << 4) - 32;
}

/* Q3_K: hmask[32], qs[64], scales[12], d. Like Q2_K's order; the high bit of output group g
 * (g = 0..7, 32 outputs each) is bit g of hmask[l]; a clear bit subtracts 4. */
static void deq_q3_k(const uint8_t *b, float *y) {
  const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
  float d = icl_ref_rd_f16(b + 108);
  for (int half = 0; half < 2; half++) {
    const uint8_t *q = qs + 32 * half;
    for (int plane = 0; plane < 4; plane++) {
      int g = 4 * half + plane;
      for (int sub = 0; sub < 2; sub++) {
        float dl = d * (float)icl_ref_q3k_scale(sc, 8 * half + 2 * plane + sub);
        for (int l = 16 * sub; l < 16 * sub + 16; l++) {
          int v = ((q[l] >> (2 * plane)) & 3) - ((hm[l] >> g) & 1 ? 0 : 4);
          *y++ = dl * (float)v;
        }
      }
    }
  }
}

static void deq_q4_k(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b), dmin = icl_ref_rd_f16(b + 2);
  const uint8_t *s = b + 4, *qs = b + 16;
  for (int c = 0; c < 4; c++) {
    int sc0, m0, sc1, m1;
    icl_ref_k_scale_min(s, 2 * c, &sc0, &m0);
    icl_ref_k_scale_min(s, 2 * c + 1, &sc1, &m1);
    const uint8_t *q = qs + 32 * c;
    for (int l = 0; l < 32; l++) y[l] = d * (float)sc0 * (float)(q[l] & 0xF) - dmin * (float)m0;
    for (int l = 0; l < 32; l++) y[32 + l] = d * (float)sc1 * (float)(q[l] >> 4) - dmin * (float)m1;
    y += 64;
  }
}

static void deq_q5_k(const uint8_t *b, float *y) {
  float d = icl_ref_rd_f16(b), dmin = icl_ref_rd_f16(b + 2);
  const uint8_t *s = b + 4, *qh = b + 16, *qs = b + 48;
  for (int c = 0; c < 4; c++) {
    int sc0, m0, sc1, m1;
    icl_ref_k_scale_min(s, 2 * c, &sc0, &m0);
    icl_ref_k_scale_min(s, 2 * c + 1, &sc1, &m1);
    const uint8_t *q = qs + 32 * c;
    for (int l = 0; l < 32; l++) {
      int v = (q[l] & 0xF) + ((qh[l] >> (2 * c)) & 1 ? 16 : 0);
      y[l] = d * (float)sc0 * (float)v - dmin * (float)m0;
    }
    for (int l = 0; l < 32; l++) {
      int v = (q[l] >> 4) + ((qh[l] >> (2 * c + 1)) & 1 ? 16 : 0);
      y[32 + l] = d * (float)sc1 * (float)v - dmin * (float)m1;
    }
    y += 64;
  }
}

static void deq_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = icl_ref_rd_f16(b + 208);
  for (int half = 0; half < 2; half++) {
    for (int l = 0; l < 32; l++) {
      int is = l / 16;
      int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
      int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
      int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l] = d * (float)sc[is] * (float)q1;
      y[l + 32] = d * (float)sc[is + 2] * (float)q2;
      y[l + 64] = d * (float)sc[is + 4] * (float)q3;
      y[l + 96] = d * (float)sc[is + 6] * (float)q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

typedef void (*deq_block_fn)(const uint8_t *b, float *y);

static deq_block_fn deq_fn(uint32_t t) {
  switch (t) {
  case ICL_TYPE_Q4_0: return deq_q4_0;
  case ICL_TYPE_Q4_1: return deq_q4_1;
  case ICL_TYPE_Q5_0: return deq_q5_0;
  case ICL_TYPE_Q5_1: return deq_q5_1;
  case ICL_TYPE_Q8_0: return deq_q8_0;
  case ICL_TYPE_Q2_K: return deq_q2_k;
  case ICL_TYPE_Q3_K: return deq_q3_k;
  case ICL_TYPE_Q4_K: return deq_q4_k;
  case ICL_TYPE_Q5_K: return deq_q5_k;
  case ICL_TYPE_Q6_K: return deq_q6_k;
  default: return NULL;
  }
}

void icl_ref_dequant(uint32_t t, const void *src, float *dst, int64_t n) {
  const uint8_t *p = src;
  switch (t) {
  case ICL_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
  case ICL_TYPE_F16:
    for (int64_t i = 0; i < n; i++) dst[i] = icl_ref_rd_f16(p + 2 * i);
    return;
  case ICL_TYPE_BF16:
    for (int64_t i = 0; i < n; i++) dst[i] = icl_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    return;
  default: break;
  }
  deq_block_fn f = deq_fn(t);
  if (!f) return;
  int64_t be = icl_type_block_elems(t);
  size_t bb = icl_type_block_bytes(t);
  for (int64_t i = 0; i < n / be; i++) f(p + (size_t)i * bb, dst + i * be);
}

/* ---- quantizers (round to nearest, simple fits) ------------------------------------------- */

static float inv_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

static void q_q4_0(const float *x, uint8_t *b) {
  float d = put_f16(b, signed_absmax(x, 32) / -8.0f), id = inv_or_zero(d);
  for (int j = 0; j < 16; j++) {
    int lo = clampi((int)lrintf(x[j] * id) + 8, 0, 15);
    int hi = clampi((int)lrintf(x[j + 16] * id) + 8, 0, 15);
    b[2 + j] = (uint8_t)(lo | hi << 4);
  }
}

static void q_q4_1(const float *x, uint8_t *b) {
  float mn, mx;
  min_max(x, 32, &mn, &mx);
  float d = put_f16(b, (mx - mn) / 15.0f), id = inv_or_zero(d);
  float m = put_f16(b + 2, mn);
  for (int j = 0; j < 16; j++) {
    int lo = clampi((int)lrintf((x[j] - m) * id), 0, 15);
    int hi = clampi((int)lrintf((x[j + 16] - m) * id), 0, 15);
    b[4 + j] = (uint8_t)(lo | hi << 4);
  }
}

/* Packs 32 five-bit codes into qh (bit j = high bit of code j) and qs nibbles. */
static void pack5(const int *q, uint8_t *qh, uint8_t *qs) {
  uint32_t h = 0;
  for (int j = 0; j < 32; j++) h |= (uint32_t)((q[j] >> 4) & 1) << j;
  wr_u32(qh, h);
  for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 0xF) | (q[j + 16] & 0xF) << 4);
}

static void q_q5_0(const float *x, uint8_t *b) {
  float d = put_f16(b, signed_absmax(x, 32) / -16.0f), id = inv_or_zero(d);
  int q[32];
  for (int j = 0; j < 32; j++) q[j] = clampi((int)lrintf(x[j] * id) + 16, 0, 31);
  pack5(q, b + 2, b + 6);
}

static void q_q5_1(const float *x, uint8_t *b) {
  float mn, mx;
  min_max(x, 32, &mn, &mx);
  float d = put_f16(b, (mx - mn) / 31.0f), id = inv_or_zero(d);
  float m = put_f16(b + 2, mn);
  int q[32];
  for (int j = 0; j < 32; j++) q[j] = clampi((int)lrintf((x[j] - m) * id), 0, 31);
  pack5(q, b + 4, b + 8);
}

static void q_q8_0(const float *x, uint8_t *b) {
  float amax = fabsf(signed_absmax(x, 32));
  float d = put_f16(b, amax / 127.0f), id = inv_or_zero(d);
  for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)clampi((int)lrintf(x[j] * id), -127, 127);
}

/* Asymmetric fit of sub-blocks of len elements: scale[i] = (max - min)/qmax and
 * min[i] = -min (min clamped to <= 0 so the stored offset is non-negative). */
static void fit_sub_blocks(const float *x, int n_sub, int len, int qmax, float *scale, float *mins) {
  for (int i = 0; i < n_sub; i++) {
    float mn, mx;
    min_max(x + i * len, len, &mn, &mx);
    if (mn > 0.0f) mn = 0.0f;
    scale[i] = (mx - mn) / (float)qmax;
    mins[i] = -mn;
  }
}

static float max_of(const float *v, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; i++)
    if (v[i] > m) m = v[i];
  return m;
}

/* Quantizes scales/mins of sub-blocks to integers 0..smax against super-scales d, dmin. */
static void quant_scales(const float *scale, const float *mins, int n, int smax, float d, float dmin, int *isc,
                         int *imin) {
  for (int i = 0; i < n; i++) {
    isc[i] = clampi((int)lrintf(scale[i] * inv_or_zero(d)), 0, smax);
    imin[i] = clampi((int)lrintf(mins[i] * inv_or_zero(dmin)), 0, smax);
  }
}

/* Codes for x given the decoded sub-block scale and offset: x ~ q*ds - dm. */
static void quant_affine(const float *x, int n, float ds, float dm, int qmax, int *q) {
  float id = inv_or_zero(ds);
  for (int l = 0; l < n; l++) q[l] = clampi((int)lrintf((x[l] + dm) * id), 0, qmax);
}

static void q_q2_k(const float *x, uint8_t *b) {
  float scale[16], mins[16];
  int isc[16], imin[16], q[256];
  fit_sub_blocks(x, 16, 16, 3, scale, mins);
  float d = put_f16(b + 80, max_of(scale, 16) / 15.0f);
  float dmin = put_f16(b + 82, max_of(mins, 16) / 15.0f);
  quant_scales(scale, mins, 16, 15, d, dmin, isc, imin);
  for (int i = 0; i < 16; i++) {
    b[i] = (uint8_t)(isc[i] | imin[i] << 4);
    quant_affine(x + 16 * i, 16, d * (float)isc[i], dmin * (float)imin[i], 3, q + 16 * i);
  }
  /* output index = 128*half + 32*plane + 16*sub + l lives in byte 32*half + 16*sub + l */
  memset(b + 16, 0, 64);
  for (int i = 0; i < 256; i++) {
    int half = i / 128, plane = (i / 32) % 4, rest = i % 32;
    b[16 + 32 * half + rest] |= (uint8_t)(q[i] << (2 * plane));
  }
}

static void q_q3_k(const float *x, uint8_t *b) {
  float scale[16];
  int q[256];
  float amax = 0.0f;
  for (int i = 0; i < 16; i++) {
    scale[i] = signed_absmax(x + 16 * i, 16) / -4.0f; /* largest magnitude maps to code -4 */
    if (fabsf(scale[i]) > amax) amax = fabsf(scale[i]);
  }
  float d = put_f16(b + 108, amax / 31.0f);
  memset(b, 0, 108);
  for (int i = 0; i < 16; i++) {
    int s = clampi((int)lrintf(scale[i] * inv_or_zero(d)), -32, 31);
    int u = s + 32;
    if (i < 8) b[96 + i] |= (uint8_t)(u & 0xF);
    else b[96 + i - 8] |= (uint8_t)((u & 0xF) << 4);
    b[96 + 8 + i % 4] |= (uint8_t)(((u >> 4) & 3) << (2 * (i / 4)));
    float id = inv_or_zero(d * (float)s);
    for (int l = 0; l < 16; l++) q[16 * i + l] = clampi((int)lrintf(x[16 * i + l] * id), -4, 3) + 4;
  }
  for (int i = 0; i < 256; i++) {
    int half = i / 128, plane = (i / 32) % 4, rest = i % 32;
    b[32 + 32 * half + rest] |= (uint8_t)((q[i] & 3) << (2 * plane));
    if (q[i] & 4) b[rest] |= (uint8_t)(1 << (4 * half + plane));
  }
}

/* Packs eight 6-bit scales and mins into the 12-byte Q4_K/Q5_K layout (inverse of icl_ref_k_scale_min). */
static void pack_k_scales(const int *sc, const int *m, uint8_t *s) {
  memset(s, 0, 12);
  for (int j = 0; j < 4; j++) {
    s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
  }
}

/* Shared body of Q4_K (qmax 15) and Q5_K (qmax 31): 8 sub-blocks of 32 with 6-bit scales/mins. */
static void q_q45_k(const float *x, uint8_t *b, int qmax, int *q) {
  float scale[8], mins[8];
  int isc[8], imin[8];
  fit_sub_blocks(x, 8, 32, qmax, scale, mins);
  float d = put_f16(b, max_of(scale, 8) / 63.0f);
  float dmin = put_f16(b + 2, max_of(mins, 8) / 63.0f);
  quant_scales(scale, mins, 8, 63, d, dmin, isc, imin);
  pack_k_scales(isc, imin, b + 4);
  for (int i = 0; i < 8; i++) quant_affine(x + 32 * i, 32, d * (float)isc[i], dmin * (float)imin[i], qmax, q + 32 * i);
}

static void q_q4_k(const float *x, uint8_t *b) {
  int q[256];
  q_q45_k(x, b, 15, q);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) b[16 + 32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

static void q_q5_k(const float *x, uint8_t *b) {
  int q[256];
  q_q45_k(x, b, 31, q);
  memset(b + 16, 0, 32);
  for (int c = 0; c < 4; c++) {
    for (int l = 0; l < 32; l++) {
      int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      b[48 + 32 * c + l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
      b[16 + l] |= (uint8_t)(((lo >> 4) & 1) << (2 * c) | ((hi >> 4) & 1) << (2 * c + 1));
    }
  }
}

static void q_q6_k(const float *x, uint8_t *b) {
  float scale[16], amax = 0.0f;
  int q[256];
  for (int i = 0; i < 16; i++) {
    scale[i] = signed_absmax(x + 16 * i, 16) / -32.0f;
    if (fabsf(scale[i]) > amax) amax = fabsf(scale[i]);
  }
  float d = put_f16(b + 208, amax / 127.0f);
  for (int i = 0; i < 16; i++) {
    int s = clampi((int)lrintf(scale[i] * inv_or_zero(d)), -128, 127);
    b[192 + i] = (uint8_t)(int8_t)s;
    float id = inv_or_zero(d * (float)s);
    for (int l = 0; l < 16; l++) q[16 * i + l] = clampi((int)lrintf(x[16 * i + l] * id), -32, 31) + 32;
  }
  memset(b, 0, 192);
  for (int half = 0; half < 2; half++) {
    uint8_t *ql = b + 64 * half, *qh = b + 128 + 32 * half;
    const int *qq = q + 128 * half;
    for (int l = 0; l < 32; l++) {
      ql[l] = (uint8_t)((qq[l] & 0xF) | (qq[l + 64] & 0xF) << 4);
      ql[l + 32] = (uint8_t)((qq[l + 32] & 0xF) | (qq[l + 96] & 0xF) << 4);
      qh[l] = (uint8_t)((qq[l] >> 4) | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 | (qq[l + 96] >> 4) << 6);
    }
  }
}

typedef void (*q_block_fn)(const float *x, uint8_t *b);

static q_block_fn q_fn(uint32_t t) {
  switch (t) {
  case ICL_TYPE_Q4_0: return q_q4_0;
  case ICL_TYPE_Q4_1: return q_q4_1;
  case ICL_TYPE_Q5_0: return q_q5_0;
  case ICL_TYPE_Q5_1: return q_q5_1;
  case ICL_TYPE_Q8_0: return q_q8_0;
  case ICL_TYPE_Q2_K: return q_q2_k;
  case ICL_TYPE_Q3_K: return q_q3_k;
  case ICL_TYPE_Q4_K: return q_q4_k;
  case ICL_TYPE_Q5_K: return q_q5_k;
  case ICL_TYPE_Q6_K: return q_q6_k;
  default: return NULL;
  }
}

void icl_ref_quantize(uint32_t t, const float *src, void *dst, int64_t n) {
  uint8_t *p = dst;
  switch (t) {
  case ICL_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
  case ICL_TYPE_F16:
    for (int64_t i = 0; i < n; i++) wr_f16(p + 2 * i, src[i]);
    return;
  case ICL_TYPE_BF16:
    for (int64_t i = 0; i < n; i++) {
      uint16_t h = icl_f32_to_bf16(src[i]);
      p[2 * i] = (uint8_t)(h & 0xff);
      p[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return;
  default: break;
  }
  q_block_fn f = q_fn(t);
  if (!f) return;
  int64_t be = icl_type_block_elems(t);
  size_t bb = icl_type_block_bytes(t);
  for (int64_t i = 0; i < n / be; i++) f(src + i * be, p + (size_t)i * bb);
}

/* ---- random valid weights ----------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0));
}

/* Overwrites the fp16 scale fields of one block with finite values. Scales are sized so each
 * decoded element has magnitude ~0.01-0.1 (K types multiply d by integer sub-scales up to 63,
 * Q6_K by int8 scales up to 127, so their d is smaller). */
static void fix_block_scales(uint32_t t, uint8_t *b, uint64_t *s) {
  switch (t) {
  case ICL_TYPE_Q4_0: case ICL_TYPE_Q5_0: case ICL_TYPE_Q8_0:
    wr_f16(b, rng_uniform(s, 0.01f, 0.1f) / (t == ICL_TYPE_Q8_0 ? 64.0f : t == ICL_TYPE_Q5_0 ? 8.0f : 4.0f));
    break;
  case ICL_TYPE_Q4_1: case ICL_TYPE_Q5_1: {
    float d = rng_uniform(s, 0.01f, 0.1f) / (t == ICL_TYPE_Q4_1 ? 4.0f : 8.0f);
    wr_f16(b, d);
    wr_f16(b + 2, -d * (t == ICL_TYPE_Q4_1 ? 7.5f : 15.5f) + rng_uniform(s, -0.01f, 0.01f));
    break;
  }
  case ICL_TYPE_Q2_K:
    wr_f16(b + 80, rng_uniform(s, 0.01f, 0.1f) / 16.0f);
    wr_f16(b + 82, rng_uniform(s, 0.01f, 0.1f) / 16.0f);
    break;
  case ICL_TYPE_Q3_K: wr_f16(b + 108, rng_uniform(s, 0.01f, 0.1f) / 64.0f); break;
  case ICL_TYPE_Q4_K: case ICL_TYPE_Q5_K:
    wr_f16(b, rng_uniform(s, 0.01f, 0.1f) / (t == ICL_TYPE_Q4_K ? 256.0f : 512.0f));
    wr_f16(b + 2, rng_uniform(s, 0.01f, 0.1f) / 64.0f);
    break;
  case ICL_TYPE_Q6_K: wr_f16(b + 208, rng_uniform(s, 0.01f, 0.1f) / 2048.0f); break;
  default: break;
  }
}

void icl_ref_random_weights(uint32_t t, void *dst, int64_t n_elems, uint64_t seed) {
  uint8_t *p = dst;
  uint64_t s = seed ^ 0x5eedf00dull;
  if (t == ICL_TYPE_F32 || t == ICL_TYPE_F16 || t == ICL_TYPE_BF16) {
    for (int64_t i = 0; i < n_elems; i++) {
      float v = rng_uniform(&s, -0.1f, 0.1f);
      if (t == ICL_TYPE_F32) memcpy(p + 4 * i, &v, 4);
      else if (t == ICL_TYPE_F16) wr_f16(p + 2 * i, v);
      else {
        uint16_t h = icl_f32_to_bf16(v);
        p[2 * i] = (uint8_t)(h & 0xff);
        p[2 * i + 1] = (uint8_t)(h >> 8);
      }
    }
    return;
  }
  int64_t be = icl_type_block_elems(t);
  size_t bb = icl_type_block_bytes(t);
  if (be == 0) return;
  for (int64_t i = 0; i < n_elems / be; i++) {
    uint8_t *b = p + (size_t)i * bb;
    for (size_t k = 0; k < bb; k++) b[k] = (uint8_t)rng_next(&s);
    fix_block_scales(t, b, &s);
  }
}
