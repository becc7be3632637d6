/* Tests of the scalar reference itself: hand-built quant blocks with known values, quantize ->
 * dequantize error bounds, and small hand-computable cases for every other op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "testutil.h"

/* fp16 bit patterns of a few exact values */
enum { H_1 = 0x3C00, H_0_5 = 0x3800, H_0_25 = 0x3400, H_0_125 = 0x3000, H_2 = 0x4000, H_M1 = 0xBC00 };

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v & 0xff);
  p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Asserts got[i] == want[i] exactly for n elements; reports the first mismatch. */
static void check_exact(const char *what, const float *want, const float *got, int n) {
  int bad = -1;
  for (int i = 0; i < n && bad < 0; i++)
    if (want[i] != got[i]) bad = i;
  CHECKF(bad < 0, "%s: element %d: want %g got %g", what, bad, bad >= 0 ? want[bad] : 0.0,
         bad >= 0 ? got[bad] : 0.0);
}

static void test_q4_0(void) {
  uint8_t b[18];
  float want[32], got[32];
  put16(b, H_0_5);
  for (int j = 0; j < 16; j++) {
    b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    want[j] = (float)(j - 8) * 0.5f;
    want[j + 16] = (float)(7 - j) * 0.5f;
  }
  icl_ref_dequant(ICL_TYPE_Q4_0, b, got, 32);
  check_exact("Q4_0", want, got, 32);
}

static void test_q4_1(void) {
  uint8_t b[20];
  float want[32], got[32];
  put16(b, H_0_25);
  put16(b + 2, H_M1);
  for (int j = 0; j < 16; j++) {
    b[4 + j] = (uint8_t)(j | (15 - j) << 4);
    want[j] = (float)j * 0.25f - 1.0f;
    want[j + 16] = (float)(15 - j) * 0.25f - 1.0f;
  }
  icl_ref_dequant(ICL_TYPE_Q4_1, b, got, 32);
  check_exact("Q4_1", want, got, 32);
}

static void test_q5_0(void) {
  uint8_t b[22];
  float want[32], got[32];
  put16(b, H_1);
  put32(b + 2, 0xAAAAAAAAu); /* odd elements of both halves carry the 5th bit */
  for (int j = 0; j < 16; j++) {
    b[6 + j] = (uint8_t)(j | j << 4);
    want[j] = (float)((j | (j & 1) << 4) - 16);
    want[j + 16] = (float)((j | (j & 1) << 4) - 16);
  }
  icl_ref_dequant(ICL_TYPE_Q5_0, b, got, 32);
  check_exact("Q5_0", want, got, 32);
}

static void test_q5_1(void) {
  uint8_t b[24];
  float want[32], got[32];
  put16(b, H_0_5);
  put16(b + 2, H_2);
  put32(b + 4, 0xFFFF0000u); /* only the high half has the 5th bit: codes 0..15 then 16..31 */
  for (int j = 0; j < 16; j++) {
    b[8 + j] = (uint8_t)(j | j << 4);
    want[j] = (float)j * 0.5f + 2.0f;
    want[j + 16] = (float)(j + 16) * 0.5f + 2.0f;
  }
  icl_ref_dequant(ICL_TYPE_Q5_1, b, got, 32);
  check_exact("Q5_1", want, got, 32);
}

static void test_q8_0(void) {
  uint8_t b[34];
  float want[32], got[32];
  put16(b, H_0_125);
  for (int j = 0; j < 32; j++) {
    b[2 + j] = (uint8_t)(int8_t)(j - 16);
    want[j] = (float)(j - 16) * 0.125f;
  }
  icl_ref_dequant(ICL_TYPE_Q8_0, b, got, 32);
  check_exact("Q8_0", want, got, 32);
}

/* Q2_K: scales[16] (scale | min<<4), qs[64], d, dmin. Byte 32h+l holds four 2-bit planes; plane p
 * gives outputs 128h + 32p + l. Low 16 bytes of each half hold planes (0,1,2,3), high ones (3,2,1,0). */
static void test_q2_k(void) {
  uint8_t b[84];
  float want[256], got[256];
  int sc[16], mn[16];
  for (int i = 0; i < 16; i++) {
    sc[i] = i % 15 + 1;
    mn[i] = i % 4;
    b[i] = (uint8_t)(sc[i] | mn[i] << 4);
  }
  for (int l = 0; l < 64; l++) b[16 + l] = (l % 32) < 16 ? 0xE4 : 0x1B;
  put16(b + 80, H_0_5);
  put16(b + 82, H_0_25);
  for (int i = 0; i < 256; i++) {
    int plane = (i / 32) % 4, lowbytes = (i % 32) < 16;
    int q = lowbytes ? plane : 3 - plane;
    want[i] = 0.5f * (float)sc[i / 16] * (float)q - 0.25f * (float)mn[i / 16];
  }
  icl_ref_dequant(ICL_TYPE_Q2_K, b, got, 256);
  check_exact("Q2_K", want, got, 256);
}

/* Q3_K: hmask[32], qs[64], scales[12], d. 6-bit scale u_j (signed u_j - 32): low nibble in
 * byte j (j < 8) or the high nibble of byte j-8, top bits at 2*(j/4) of byte 8 + j%4. hmask bit g
 * (g = output/32) set means no -4 offset. */
static void test_q3_k(void) {
  uint8_t b[110];
  float want[256], got[256];
  int u[16];
  memset(b, 0, sizeof b);
  for (int l = 0; l < 32; l++) b[l] = 0x55; /* groups 0,2,4,6 have the high bit */
  for (int l = 0; l < 64; l++) b[32 + l] = 0xE4;
  for (int j = 0; j < 16; j++) {
    u[j] = 4 * j + 1;
    if (j < 8) b[96 + j] |= (uint8_t)(u[j] & 0xF);
    else b[96 + j - 8] |= (uint8_t)((u[j] & 0xF) << 4);
    b[96 + 8 + j % 4] |= (uint8_t)((u[j] >> 4) << (2 * (j / 4)));
  }
  put16(b + 108, H_0_25);
  for (int i = 0; i < 256; i++) {
    int g = i / 32, plane = g % 4;
    int q = plane - (g % 2 ? 4 : 0);
    want[i] = 0.25f * (float)(u[i / 16] - 32) * (float)q;
  }
  icl_ref_dequant(ICL_TYPE_Q3_K, b, got, 256);
  check_exact("Q3_K", want, got, 256);
}

/* Q4_K/Q5_K scale bytes for sc = {1,2,3,4,17,33,5,63}, m = {0,1,2,3,20,40,7,50}, packed by hand
 * (bytes 0-3: sc low 6 bits + top 2 bits of sc[4..7]; 4-7 the same for m; 8-11: low nibbles). */
static const int KSC[8] = {1, 2, 3, 4, 17, 33, 5, 63}, KM[8] = {0, 1, 2, 3, 20, 40, 7, 50};
static const uint8_t KSCALES[12] = {65, 130, 3, 196, 64, 129, 2, 195, 65, 129, 117, 47};

static void test_q4_k(void) {
  uint8_t b[144];
  float want[256], got[256];
  put16(b, H_1);
  put16(b + 2, H_0_5);
  memcpy(b + 4, KSCALES, 12);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) b[16 + 32 * c + l] = (uint8_t)((l % 16) | (15 - l % 16) << 4);
  for (int c = 0; c < 4; c++) {
    for (int l = 0; l < 32; l++) {
      want[64 * c + l] = (float)(KSC[2 * c] * (l % 16)) - 0.5f * (float)KM[2 * c];
      want[64 * c + 32 + l] = (float)(KSC[2 * c + 1] * (15 - l % 16)) - 0.5f * (float)KM[2 * c + 1];
    }
  }
  icl_ref_dequant(ICL_TYPE_Q4_K, b, got, 256);
  check_exact("Q4_K", want, got, 256);
}

/* Q5_K: as Q4_K plus qh[32]; here qh[l] = 0x0F for l < 16 (chunks 0,1 get +16 in both halves)
 * and 0xC0 for l >= 16 (only chunk 3 gets +16). */
static void test_q5_k(void) {
  uint8_t b[176];
  float want[256], got[256];
  put16(b, H_1);
  put16(b + 2, H_0_5);
  memcpy(b + 4, KSCALES, 12);
  for (int l = 0; l < 32; l++) b[16 + l] = l < 16 ? 0x0F : 0xC0;
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) b[48 + 32 * c + l] = (uint8_t)((l % 16) | (15 - l % 16) << 4);
  for (int c = 0; c < 4; c++) {
    for (int l = 0; l < 32; l++) {
      int hb = l < 16 ? (c < 2) : (c == 3);
      int lo = l % 16 + 16 * hb, hi = 15 - l % 16 + 16 * hb;
      want[64 * c + l] = (float)(KSC[2 * c] * lo) - 0.5f * (float)KM[2 * c];
      want[64 * c + 32 + l] = (float)(KSC[2 * c + 1] * hi) - 0.5f * (float)KM[2 * c + 1];
    }
  }
  icl_ref_dequant(ICL_TYPE_Q5_K, b, got, 256);
  check_exact("Q5_K", want, got, 256);
}

/* Q6_K: ql[128], qh[64], int8 scales[16], d. ql bytes 0x21 (first 32 of each 64) and 0x43 (next
 * 32); qh bytes 0xE4 (2-bit fields 0,1,2,3). Codes in the four 32-groups of a half:
 * (1|0<<4)-32 = -31, (3|1<<4)-32 = -13, (2|2<<4)-32 = 2, (4|3<<4)-32 = 20. */
static void test_q6_k(void) {
  uint8_t b[210];
  float want[256], got[256];
  static const int code[4] = {-31, -13, 2, 20};
  for (int l = 0; l < 128; l++) b[l] = (l % 64) < 32 ? 0x21 : 0x43;
  for (int l = 0; l < 64; l++) b[128 + l] = 0xE4;
  for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(int8_t)(i - 5);
  put16(b + 208, H_0_5);
  for (int i = 0; i < 256; i++) want[i] = 0.5f * (float)(i / 16 - 5) * (float)code[(i % 128) / 32];
  icl_ref_dequant(ICL_TYPE_Q6_K, b, got, 256);
  check_exact("Q6_K", want, got, 256);
}

static void test_plain_types(void) {
  uint8_t b[8];
  float got[4], want[4] = {1.0f, -2.0f, 0.5f, 65504.0f};
  put16(b, H_1);
  put16(b + 2, 0xC000);
  put16(b + 4, H_0_5);
  put16(b + 6, 0x7BFF);
  icl_ref_dequant(ICL_TYPE_F16, b, got, 4);
  check_exact("F16", want, got, 4);
  put16(b, 0x3F80); /* bf16 1.0 */
  put16(b + 2, 0xC000);
  put16(b + 4, 0x3F00);
  put16(b + 6, 0x4780); /* 65536 */
  want[3] = 65536.0f;
  icl_ref_dequant(ICL_TYPE_BF16, b, got, 4);
  check_exact("BF16", want, got, 4);
}

/* Round trip of smooth-ish random data through quantize + dequantize stays within a per-type
 * NMSE bound set by the bits per weight (about 4^-bits relative to a uniform signal); bounds are
 * about twice the measured error of these simple fits, so a broken packer fails them. */
static void test_roundtrip(void) {
  static const struct { uint32_t t; double max_nmse; } cases[] = {
      {ICL_TYPE_F32, 0.0},    {ICL_TYPE_F16, 1e-7},  {ICL_TYPE_BF16, 5e-6}, {ICL_TYPE_Q8_0, 3e-5},
      {ICL_TYPE_Q6_K, 5e-4},  {ICL_TYPE_Q5_0, 2e-3}, {ICL_TYPE_Q5_1, 2e-3}, {ICL_TYPE_Q5_K, 2e-3},
      {ICL_TYPE_Q4_0, 8e-3},  {ICL_TYPE_Q4_1, 8e-3}, {ICL_TYPE_Q4_K, 8e-3}, {ICL_TYPE_Q3_K, 4e-2},
      {ICL_TYPE_Q2_K, 1.5e-1},
  };
  enum { N = 4096 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  uint8_t *q = malloc(N * 4);
  t_rand_fill(x, N, 42, -1.0f, 1.0f);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    uint32_t t = cases[c].t;
    memset(y, 0, N * sizeof *y);
    icl_ref_quantize(t, x, q, N);
    icl_ref_dequant(t, q, y, N);
    double e = icl_nmse(x, y, N);
    CHECKF(e <= cases[c].max_nmse, "%s round trip nmse %.3g > %.3g", icl_type_name(t), e, cases[c].max_nmse);
    /* an all-zero block must survive (scale 0 must not produce NaN) */
    memset(y, 0, N * sizeof *y);
    float zero[256] = {0};
    icl_ref_quantize(t, zero, q, 256);
    icl_ref_dequant(t, q, y, 256);
    int ok = 1;
    for (int i = 0; i < 256; i++) ok &= y[i] == 0.0f;
    CHECKF(ok, "%s zero block does not round trip to zeros", icl_type_name(t));
  }
  free(x);
  free(y);
  free(q);
}

/* Random weights of every type decode to finite values of modest size, and not all zero. */
static void test_random_weights(void) {
  enum { N = 2048 };
  uint8_t *q = malloc(N * 4);
  float *y = malloc(N * sizeof *y);
  for (uint32_t t = 0; t < ICL_TYPE_COUNT; t++) {
    if (!icl_type_is_weight(t)) continue;
    icl_ref_random_weights(t, q, N, 7);
    icl_ref_dequant(t, q, y, N);
    double ss = 0.0, amax = 0.0;
    int finite = 1;
    for (int i = 0; i < N; i++) {
      finite &= isfinite(y[i]);
      ss += (double)y[i] * y[i];
      if (fabs(y[i]) > amax) amax = fabs(y[i]);
    }
    double rms = sqrt(ss / N);
    CHECKF(finite && rms > 1e-3 && rms < 0.5 && amax < 2.0, "%s random weights: rms %g max %g finite %d",
           icl_type_name(t), rms, amax, finite);
  }
  free(q);
  free(y);
}

static int near(float a, double b, double tol) { return fabs((double)a - b) <= tol; }

static void test_matmul_get_rows(void) {
  /* w [3 cols, 2 rows] = {1,2,3},{4,5,6}; x [3, 2] = {1,0,-1},{2,2,2} */
  float w[6] = {1, 2, 3, 4, 5, 6}, x[6] = {1, 0, -1, 2, 2, 2}, y[4], r[6];
  icl_ref_matmul(ICL_TYPE_F32, w, 3, 2, x, 2, y);
  CHECK(y[0] == -2.0f && y[1] == -2.0f && y[2] == 12.0f && y[3] == 30.0f);
  int32_t ids[2] = {1, 0};
  icl_ref_get_rows(ICL_TYPE_F32, w, 3, ids, 2, r);
  CHECK(r[0] == 4.0f && r[2] == 6.0f && r[3] == 1.0f && r[5] == 3.0f);
}

static void test_norms(void) {
  float x[4] = {1, -1, 1, -1}, w[4] = {1, 2, 3, 4}, y[4];
  icl_ref_rms_norm(x, w, 4, 1, 0.0f, y); /* rms is 1 */
  CHECK(y[0] == 1.0f && y[1] == -2.0f && y[2] == 3.0f && y[3] == -4.0f);
  float x2[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 10};
  icl_ref_layer_norm(x2, NULL, b, 4, 1, 0.0f, y); /* mean 2.5, var 1.25 */
  CHECK(near(y[0], -1.5 / sqrt(1.25), 1e-6) && near(y[3], 1.5 / sqrt(1.25) + 10.0, 1e-5));
}

/* RoPE at position 1, base 10000, n_rot 4: pair 0 turns by 1 rad, pair 1 by 10000^-0.5 = 0.01. */
static void test_rope(void) {
  float x[6] = {1, 0, 1, 0, 7, 8};
  int32_t pos[1] = {1};
  icl_ref_rope(x, 6, 1, 1, pos, 4, 10000.0f, ICL_ROPE_NORMAL);
  CHECK(near(x[0], cos(1.0), 1e-6) && near(x[1], sin(1.0), 1e-6));
  CHECK(near(x[2], cos(0.01), 1e-6) && near(x[3], sin(0.01), 1e-6));
  CHECK(x[4] == 7.0f && x[5] == 8.0f); /* past n_rot: untouched */
  float y[4] = {1, 1, 0, 0}; /* NEOX pairs (0,2) and (1,3) */
  icl_ref_rope(y, 4, 1, 1, pos, 4, 10000.0f, ICL_ROPE_NEOX);
  CHECK(near(y[0], cos(1.0), 1e-6) && near(y[2], sin(1.0), 1e-6));
  CHECK(near(y[1], cos(0.01), 1e-6) && near(y[3], sin(0.01), 1e-6));
  float z[2] = {3, 4};
  int32_t p0[1] = {0};
  icl_ref_rope(z, 2, 1, 1, p0, 2, 10000.0f, ICL_ROPE_NORMAL);
  CHECK(z[0] == 3.0f && z[1] == 4.0f); /* position 0 is the identity */
}

/* One head of dim 1, two queries at positions 0 and 1: query 0 sees only key 0; query 1 sees
 * keys with scores 0 and ln 3 -> weights 1/4 and 3/4. */
static void test_attention_tiny(void) {
  float q[2] = {1.0f, 1.0f}, k[2] = {0.0f, (float)log(3.0)}, v[2] = {10.0f, 20.0f}, out[2], pat[4];
  icl_attn_params p = {.n_past = 0, .scale = 1.0f, .window = 0, .softcap = 0.0f};
  icl_ref_attention(q, k, v, 1, 1, 1, 2, 2, &p, NULL, out, pat);
  CHECK(near(out[0], 10.0, 1e-6) && near(out[1], 17.5, 1e-5));
  CHECK(pat[0] == 1.0f && pat[1] == 0.0f && near(pat[2], 0.25, 1e-7) && near(pat[3], 0.75, 1e-7));
  /* window 1: each query sees only itself */
  p.window = 1;
  icl_ref_attention(q, k, v, 1, 1, 1, 2, 2, &p, NULL, out, pat);
  CHECK(near(out[1], 20.0, 1e-6) && pat[2] == 0.0f);
  /* additive mask knocking out key 1 for query 1 */
  p.window = 0;
  float mask[4] = {0, 0, 0, -INFINITY};
  icl_ref_attention(q, k, v, 1, 1, 1, 2, 2, &p, mask, out, pat);
  CHECK(near(out[1], 10.0, 1e-6) && pat[3] == 0.0f);
  /* softcap 1: scores 0 and tanh(ln 3) = 0.8 -> weights 1/(1+e^0.8) and e^0.8/(1+e^0.8) */
  p.softcap = 1.0f;
  icl_ref_attention(q, k, v, 1, 1, 1, 2, 2, &p, NULL, out, pat);
  double w1 = exp(0.8) / (1.0 + exp(0.8));
  CHECK(near(pat[3], w1, 1e-6));
}

/* GQA: two query heads share one kv head; n_past shifts the causal limit. */
static void test_attention_gqa(void) {
  float q[4] = {1, 0, 0, 1}; /* [hd 2, nh 2, nq 1] */
  float k[4] = {1, 0, 0, 1}; /* [hd 2, nkvh 1, nkv 2] */
  float v[4] = {1, 2, 3, 4}, out[4], pat[4];
  icl_attn_params p = {.n_past = 1, .scale = 1.0f, .window = 0, .softcap = 0.0f};
  icl_ref_attention(q, k, v, 2, 2, 1, 1, 2, &p, NULL, out, pat);
  double e = exp(1.0), w0 = e / (e + 1.0); /* head 0 scores (1, 0); head 1 scores (0, 1) */
  CHECK(near(pat[0], w0, 1e-6) && near(pat[3], w0, 1e-6));
  CHECK(near(out[0], w0 * 1 + (1 - w0) * 3, 1e-5) && near(out[3], (1 - w0) * 2 + w0 * 4, 1e-5));
}

static void test_elementwise(void) {
  float a[4] = {1, 2, 3, 4}, b[2] = {10, 20}, y[4];
  icl_ref_add(a, b, 2, 2, 1, y);
  CHECK(y[0] == 11.0f && y[1] == 22.0f && y[2] == 13.0f && y[3] == 24.0f);
  icl_ref_mul(a, a, 2, 2, 2, y);
  CHECK(y[3] == 16.0f);
  icl_ref_scale(a, 0.5f, 4, y);
  CHECK(y[1] == 1.0f);
  float x[3] = {0.0f, 1.0f, -2.0f};
  icl_ref_silu(x, 3, y);
  CHECK(y[0] == 0.0f && near(y[1], 1.0 / (1.0 + exp(-1.0)), 1e-7) && near(y[2], -2.0 / (1.0 + exp(2.0)), 1e-7));
  icl_ref_gelu(x, 3, y);
  CHECK(y[0] == 0.0f && near(y[1], 0.8411919906, 1e-6) && near(y[2], -0.0454023059, 1e-6));
  float up[3] = {2, 2, 2};
  icl_ref_swiglu(x, up, 3, y);
  CHECK(near(y[1], 2.0 / (1.0 + exp(-1.0)), 1e-6));
  icl_ref_geglu(x, up, 3, y);
  CHECK(near(y[1], 2 * 0.8411919906, 1e-6));
}

static void test_softmax_argmax(void) {
  float x[6] = {0.0f, (float)log(2.0), -INFINITY, 1000.0f, 1000.0f, 999.0f}, y[6];
  icl_ref_softmax(x, 3, 2, y);
  CHECK(near(y[0], 1.0 / 3.0, 1e-7) && near(y[1], 2.0 / 3.0, 1e-7) && y[2] == 0.0f);
  CHECK(near(y[3] + y[4] + y[5], 1.0, 1e-6) && y[3] == y[4]); /* large inputs do not overflow */
  int32_t am[2];
  icl_ref_argmax(x, 3, 2, am);
  CHECK(am[0] == 1 && am[1] == 0); /* ties pick the first */
}

static void test_convert_nmse(void) {
  float x[3] = {1.0f, 0.1f, -65504.0f}, back[3];
  uint16_t h[3];
  icl_ref_convert(ICL_TYPE_F32, x, ICL_TYPE_F16, h, 3);
  CHECK(h[0] == 0x3C00 && h[2] == 0xFBFF);
  icl_ref_convert(ICL_TYPE_F16, h, ICL_TYPE_F32, back, 3);
  CHECK(back[0] == 1.0f && near(back[1], 0.1, 1e-4) && back[2] == -65504.0f);
  float a[2] = {3, 4}, b[2] = {3, 5}, z[2] = {0, 0};
  CHECK(icl_nmse(a, a, 2) == 0.0);
  CHECK(near((float)icl_nmse(a, b, 2), 1.0 / 25.0, 1e-9));
  CHECK(icl_nmse(z, z, 2) == 0.0 && isinf(icl_nmse(z, a, 2)));
}

int main(void) {
  test_q4_0();
  test_q4_1();
  test_q5_0();
  test_q5_1();
  test_q8_0();
  test_q2_k();
  test_q3_k();
  test_q4_k();
  test_q5_k();
  test_q6_k();
  test_plain_types();
  test_roundtrip();
  test_random_weights();
  test_matmul_get_rows();
  test_norms();
  test_rope();
  test_attention_tiny();
  test_attention_gqa();
  test_elementwise();
  test_softmax_argmax();
  test_convert_nmse();
  return t_done();
}
