/* Portable C kernels: the fallback on any CPU and the baseline the SIMD ones must match. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

static float rd_f16(const uint8_t *p) { return icl_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static uint32_t rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Token-at-a-time accumulation over c keeps the partial sums in one vectorizable array; A and B in place (column c
 * of A at wp + c*ldw, token t's value for it at xp[c*ldx + t*ldt]), continuing from y's values when cont
 * (cpu_kernels.gemm_tile_2ld). */
static void gemm_tile_2ld_c(const float *wp, int64_t ldw, int64_t K, const float *xp, int64_t ldx, int64_t ldt, int nt,
                            float *y, int64_t ldy, int nr, int cont) {
  for (int t = 0; t < nt; t++) {
    float acc[CPU_TILE_ROWS] = {0};
    if (cont) memcpy(acc, y + t * ldy, (size_t)nr * sizeof(float));
    for (int64_t c = 0; c < K; c++) {
      const float *w = wp + c * ldw;
      float xv = xp[c * ldx + t * ldt];
      for (int r = 0; r < nr; r++) acc[r] += w[r] * xv;
    }
    memcpy(y + t * ldy, acc, (size_t)nr * sizeof(float));
  }
}

/* The packed tile: A's columns CPU_TILE_ROWS apart, B's tokens side by side in groups of CPU_GENERIC_NT. */
static void gemm_tile_c(const float *wp, int64_t K, const float *xp, int nt, float *y, int64_t ldy, int nr) {
  gemm_tile_2ld_c(wp, CPU_TILE_ROWS, K, xp, CPU_GENERIC_NT, 1, nt, y, ldy, nr, 0);
}

void cpu_scale_mul_c(const float *x, float s, const float *w, float *y, int64_t n) {
  if (w)
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * w[i];
  else
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

void cpu_add_mul_c(int mul, const float *a, const float *b, float *y, int64_t n) {
  if (mul)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
  else
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void rope_head_c(float *v, const float *cs, const float *sn, int half, int neox) {
  for (int i = 0; i < half; i++) cpu_rope_pair(v, neox ? i : 2 * i, neox ? i + half : 2 * i + 1, cs[i], sn[i]);
}

/* In 8-column strips so the strided writes stay within a few cache lines. */
static void pack_tile_c(const float *src, int64_t lds, int64_t K, float *wp) {
  for (int64_t c0 = 0; c0 < K; c0 += 8) {
    int64_t cw = K - c0 < 8 ? K - c0 : 8;
    for (int r = 0; r < CPU_TILE_ROWS; r++)
      for (int64_t j = 0; j < cw; j++) wp[(c0 + j) * CPU_TILE_ROWS + r] = src[r * lds + c0 + j];
  }
}

static float dot_c(const float *a, const float *b, int64_t n) {
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
  float s = 0.0f;
  for (int j = 0; j < 8; j++) s += acc[j];
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

static void axpy_c(float *y, float a, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void vexp_c(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

static float scale_max_c(float *x, int64_t n, float s) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    x[i] *= s;
    mx = x[i] > mx ? x[i] : mx; /* not fmaxf: that is a libm call without -ffast-math */
  }
  return mx;
}

static double exp_sum_c(float *x, int64_t n, float m) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = expf(x[i] - m);
    sum += x[i];
  }
  return sum;
}

static void f16_to_f32_c(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = icl_f16_to_f32(src[i]);
}

static void quantize_q8_c(const float *x, cpu_q8 *q, int64_t n) {
  for (int64_t b = 0; b < n / 32; b++) {
    const float *xb = x + 32 * b;
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    int sum[2] = {0, 0};
    for (int j = 0; j < 32; j++) {
      int v = (int)nearbyintf(xb[j] * id);
      q[b].q[j] = (int8_t)v;
      sum[j / 16] += v;
    }
    q[b].d = d;
    q[b].h[0] = d * (float)sum[0];
    q[b].h[1] = d * (float)sum[1];
    q[b].qs[0] = (int16_t)sum[0];
    q[b].qs[1] = (int16_t)sum[1];
    q[b].s = d * (float)(sum[0] + sum[1]);
  }
}

/* Sum over one block of u8 codes times int8 activations. */
static int dot_u8_i8(const uint8_t *w, const int8_t *x) {
  int s = 0;
  for (int j = 0; j < 32; j++) s += w[j] * x[j];
  return s;
}

/* Unpacks the 32 four-bit codes of qs (elements j and j+16 share byte j). */
static void unpack4(const uint8_t *qs, uint8_t *w) {
  for (int j = 0; j < 16; j++) {
    w[j] = qs[j] & 0xF;
    w[j + 16] = qs[j] >> 4;
  }
}

static void unpack5(const uint8_t *qh, const uint8_t *qs, uint8_t *w) {
  uint32_t h = rd_u32(qh);
  unpack4(qs, w);
  for (int j = 0; j < 32; j++) w[j] |= (uint8_t)(((h >> j) & 1) << 4);
}

/* Weight block of a 32-block type as unsigned codes plus the affine map dot = a*S + b*s where
 * S = sum(code*xq) and s = d_x*sum(xq) (see cpu_q8): symmetric types fold their bias into b. */
static void qdot_generic(uint32_t t, const uint8_t *w, const cpu_q8 *x, int64_t nb, int nt, int64_t xstride,
                         float *out) {
  size_t bb = icl_type_block_bytes(t);
  for (int i = 0; i < nt; i++) out[i] = 0.0f;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * bb;
    uint8_t code[32];
    float d = rd_f16(blk), mb;
    int signed8 = 0;
    switch (t) {
    case ICL_TYPE_Q4_0: unpack4(blk + 2, code); mb = -8.0f * d; break;
    case ICL_TYPE_Q4_1: unpack4(blk + 4, code); mb = rd_f16(blk + 2); break;
    case ICL_TYPE_Q5_0: unpack5(blk + 2, blk + 6, code); mb = -16.0f * d; break;
    case ICL_TYPE_Q5_1: unpack5(blk + 4, blk + 8, code); mb = rd_f16(blk + 2); break;
    default: signed8 = 1; mb = 0.0f; memcpy(code, blk + 2, 32); break; /* Q8_0 */
    }
    for (int i = 0; i < nt; i++) {
      const cpu_q8 *xb = x + i * xstride + b;
      int S = 0;
      if (signed8)
        for (int j = 0; j < 32; j++) S += (int8_t)code[j] * xb->q[j];
      else
        S = dot_u8_i8(code, xb->q);
      out[i] += d * xb->d * (float)S + mb * xb->s;
    }
  }
}

#define QDOT_C(name, type)                                                                                   \
  static void name(const uint8_t *w, const cpu_q8 *x, int64_t nb, int nt, int64_t xs, float *out) {          \
    qdot_generic(type, w, x, nb, nt, xs, out);                                                               \
  }
QDOT_C(qdot_q4_0_c, ICL_TYPE_Q4_0)
QDOT_C(qdot_q4_1_c, ICL_TYPE_Q4_1)
QDOT_C(qdot_q5_0_c, ICL_TYPE_Q5_0)
QDOT_C(qdot_q5_1_c, ICL_TYPE_Q5_1)
QDOT_C(qdot_q8_0_c, ICL_TYPE_Q8_0)

/* ---- K types: 256-blocks seen as 8 groups of 32 codes ---------------------------------------
 * Every K type decodes group g of a block to unsigned codes u[32] plus, per 16-element half,
 * a multiplier a[h] and an offset b[h] with value = a[h]*u - b[h]; the dot with a cpu_q8 block
 * is then d_x * (a0*S0 + a1*S1) - (b0*h0 + b1*h1), S the integer half dots. */

typedef struct kgroup {
  uint8_t u[32];
  float a[2], b[2];
} kgroup;

/* 6-bit scale and min of sub-block j of Q4_K/Q5_K (12 packed bytes s). */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

static int q3k_scale(const uint8_t *s, int j) {
  int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  return (lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

static void kgroup_decode(uint32_t t, const uint8_t *blk, int g, kgroup *o) {
  int half = g / 4, plane = g % 4;
  switch (t) {
  case ICL_TYPE_Q2_K: {
    const uint8_t *q = blk + 16 + 32 * half;
    float d = rd_f16(blk + 80), dmin = rd_f16(blk + 82);
    for (int l = 0; l < 32; l++) o->u[l] = (q[l] >> (2 * plane)) & 3;
    for (int h = 0; h < 2; h++) {
      o->a[h] = d * (float)(blk[2 * g + h] & 0xF);
      o->b[h] = dmin * (float)(blk[2 * g + h] >> 4);
    }
    break;
  }
  case ICL_TYPE_Q3_K: {
    const uint8_t *q = blk + 32 + 32 * half;
    float d = rd_f16(blk + 108);
    for (int l = 0; l < 32; l++) o->u[l] = (uint8_t)(((q[l] >> (2 * plane)) & 3) | ((blk[l] >> g) & 1) << 2);
    for (int h = 0; h < 2; h++) {
      o->a[h] = d * (float)q3k_scale(blk + 96, 2 * g + h);
      o->b[h] = 4.0f * o->a[h];
    }
    break;
  }
  case ICL_TYPE_Q4_K: case ICL_TYPE_Q5_K: {
    int sc, m, five = t == ICL_TYPE_Q5_K;
    const uint8_t *q = blk + (five ? 48 : 16) + 32 * (g / 2);
    k_scale_min(blk + 4, g, &sc, &m);
    for (int l = 0; l < 32; l++) {
      o->u[l] = (q[l] >> (4 * (g % 2))) & 0xF;
      if (five) o->u[l] |= (uint8_t)(((blk[16 + l] >> g) & 1) << 4);
    }
    o->a[0] = o->a[1] = rd_f16(blk) * (float)sc;
    o->b[0] = o->b[1] = rd_f16(blk + 2) * (float)m;
    break;
  }
  default: { /* Q6_K */
    const uint8_t *ql = blk + 64 * half + 32 * (plane & 1), *qh = blk + 128 + 32 * half;
    const int8_t *sc = (const int8_t *)(blk + 192) + 8 * half + 2 * plane;
    float d = rd_f16(blk + 208);
    for (int l = 0; l < 32; l++)
      o->u[l] = (uint8_t)(((ql[l] >> (4 * (plane >> 1))) & 0xF) | ((qh[l] >> (2 * plane)) & 3) << 4);
    for (int h = 0; h < 2; h++) {
      o->a[h] = d * (float)sc[h];
      o->b[h] = 32.0f * o->a[h];
    }
    break;
  }
  }
}

static void qdot_k_generic(uint32_t t, const uint8_t *w, const cpu_q8 *x, int64_t nb, int nt, int64_t xstride,
                           float *out) {
  size_t bb = icl_type_block_bytes(t);
  for (int i = 0; i < nt; i++) out[i] = 0.0f;
  for (int64_t b = 0; b < nb; b++) {
    kgroup kg;
    kgroup_decode(t, w + (size_t)(b / 8) * bb, (int)(b % 8), &kg);
    for (int i = 0; i < nt; i++) {
      const cpu_q8 *xb = x + i * xstride + b;
      int S0 = 0, S1 = 0;
      for (int l = 0; l < 16; l++) {
        S0 += kg.u[l] * xb->q[l];
        S1 += kg.u[l + 16] * xb->q[l + 16];
      }
      out[i] += xb->d * (kg.a[0] * (float)S0 + kg.a[1] * (float)S1) - (kg.b[0] * xb->h[0] + kg.b[1] * xb->h[1]);
    }
  }
}

#define QDOT_K(name, type)                                                                                   \
  static void name(const uint8_t *w, const cpu_q8 *x, int64_t nb, int nt, int64_t xs, float *out) {          \
    qdot_k_generic(type, w, x, nb, nt, xs, out);                                                             \
  }
QDOT_K(qdot_q2_k_c, ICL_TYPE_Q2_K)
QDOT_K(qdot_q3_k_c, ICL_TYPE_Q3_K)
QDOT_K(qdot_q4_k_c, ICL_TYPE_Q4_K)
QDOT_K(qdot_q5_k_c, ICL_TYPE_Q5_K)
QDOT_K(qdot_q6_k_c, ICL_TYPE_Q6_K)

void cpu_kernels_generic(cpu_kernels *k) {
  memset(k, 0, sizeof *k);
  k->name = "generic";
  k->gemm_nt = CPU_GENERIC_NT;
  k->gemm_tile = gemm_tile_c;
  k->gemm_tile_2ld = gemm_tile_2ld_c;
  k->pack_tile = pack_tile_c;
  k->pack_x = cpu_pack_x;
  k->gemm_tile_bf16 = cpu_gemm_tile_bf16_c;
  k->pack_x_bf16 = cpu_pack_x_bf16_c;
  k->pair_rows_bf16 = cpu_pair_rows_bf16_c;
  k->dot = dot_c;
  k->axpy = axpy_c;
  k->scale_mul = cpu_scale_mul_c;
  k->add_mul = cpu_add_mul_c;
  k->rope_head = rope_head_c;
  k->vexp = vexp_c;
  k->scale_max = scale_max_c;
  k->exp_sum = exp_sum_c;
  k->f16_to_f32 = f16_to_f32_c;
  k->quantize_q8 = quantize_q8_c;
  cpu_probes_generic(k);
  k->qdot[ICL_TYPE_Q4_0] = qdot_q4_0_c;
  k->qdot[ICL_TYPE_Q4_1] = qdot_q4_1_c;
  k->qdot[ICL_TYPE_Q5_0] = qdot_q5_0_c;
  k->qdot[ICL_TYPE_Q5_1] = qdot_q5_1_c;
  k->qdot[ICL_TYPE_Q8_0] = qdot_q8_0_c;
  k->qdot[ICL_TYPE_Q2_K] = qdot_q2_k_c;
  k->qdot[ICL_TYPE_Q3_K] = qdot_q3_k_c;
  k->qdot[ICL_TYPE_Q4_K] = qdot_q4_k_c;
  k->qdot[ICL_TYPE_Q5_K] = qdot_q5_k_c;
  k->qdot[ICL_TYPE_Q6_K] = qdot_q6_k_c;
}
