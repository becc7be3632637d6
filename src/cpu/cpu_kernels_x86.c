/* x86 SIMD kernels: AVX2+FMA (8 floats per register) and AVX-512 with VNNI (16 floats, int8 dot
 * products in one instruction). Each function carries its own target attribute so the library
 * builds for baseline x86-64 and picks the level at run time (cpu_kernels_init). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_simd_x86.h"

#define AVX2 "avx2,fma,f16c"
#define AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"
#define AI inline __attribute__((always_inline))

/* ================================ AVX2 ======================================================== */

/* Stores rows [0, nr) (up to 16) of NT tokens' accumulators to y[t*ldy + r]. */
static AI __attribute__((target(AVX2))) void store16_avx2(__m256 acc[6][2], const int NT, float *y, int64_t ldy,
                                                          int nr) {
#pragma GCC unroll 6
  for (int t = 0; t < NT; t++) {
    float *yt = y + t * ldy;
    if (nr >= 16) {
      _mm256_storeu_ps(yt, acc[t][0]);
      _mm256_storeu_ps(yt + 8, acc[t][1]);
    } else {
      float tmp[16];
      _mm256_storeu_ps(tmp, acc[t][0]);
      _mm256_storeu_ps(tmp + 8, acc[t][1]);
      memcpy(yt, tmp, (size_t)nr * sizeof(float));
    }
  }
}

/* One column of 16 tile rows (w0, w1) times NT tokens' values xc[t]: one fma per register and token. */
static AI __attribute__((target(AVX2))) void col16_avx2(__m256 w0, __m256 w1, const float *xc, const int NT,
                                                        __m256 acc[6][2]) {
#pragma GCC unroll 6
  for (int t = 0; t < NT; t++) {
    __m256 b = _mm256_broadcast_ss(xc + t);
    acc[t][0] = _mm256_fmadd_ps(w0, b, acc[t][0]);
    acc[t][1] = _mm256_fmadd_ps(w1, b, acc[t][1]);
  }
}

/* 16 tile rows (two registers) times NT tokens; acc stays in 2*NT <= 12 registers. Column c of the tile is at
 * wp + c*ldw; MASKED (gemm_tile_ld): unaligned, and lanes past nr not read, else (gemm_tile: ldw = 32, rows
 * past nr zero in the packed tile) aligned loads. */
static AI __attribute__((target(AVX2))) void gemm16_avx2(const float *wp, int64_t ldw, int64_t K, const float *xp,
                                                         const int NT, const int MASKED, float *y, int64_t ldy,
                                                         int nr) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
  __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c < K; c++) {
    const float *w = wp + c * ldw;
    if (MASKED) col16_avx2(_mm256_maskload_ps(w, m0), _mm256_maskload_ps(w + 8, m1), xp + c * 6, NT, acc);
    else col16_avx2(_mm256_load_ps(w), _mm256_load_ps(w + 8), xp + c * 6, NT, acc);
  }
  store16_avx2(acc, NT, y, ldy, nr);
}

/* gemm_tile and gemm_tile_ld: the tile's two 16-row halves, NT a constant per case. */
static AI __attribute__((target(AVX2))) void gemm_tile_any_avx2(const float *wp, int64_t ldw, int64_t K,
                                                                const float *xp, int nt, const int MASKED, float *y,
                                                                int64_t ldy, int nr) {
  for (int h = 0; h < 2 && 16 * h < nr; h++) {
    const float *w = wp + 16 * h;
    float *yh = y + 16 * h;
    int n = nr - 16 * h;
    switch (nt) {
    case 1: gemm16_avx2(w, ldw, K, xp, 1, MASKED, yh, ldy, n); break;
    case 2: gemm16_avx2(w, ldw, K, xp, 2, MASKED, yh, ldy, n); break;
    case 3: gemm16_avx2(w, ldw, K, xp, 3, MASKED, yh, ldy, n); break;
    case 4: gemm16_avx2(w, ldw, K, xp, 4, MASKED, yh, ldy, n); break;
    case 5: gemm16_avx2(w, ldw, K, xp, 5, MASKED, yh, ldy, n); break;
    default: gemm16_avx2(w, ldw, K, xp, 6, MASKED, yh, ldy, n); break;
    }
  }
}

__attribute__((target(AVX2))) static void gemm_tile_avx2(const float *wp, int64_t K, const float *xp, int nt,
                                                         float *y, int64_t ldy, int nr) {
  gemm_tile_any_avx2(wp, CPU_TILE_ROWS, K, xp, nt, 0, y, ldy, nr);
}

__attribute__((target(AVX2))) static void gemm_tile_ld_avx2(const float *wp, int64_t ldw, int64_t K, const float *xp,
                                                            int nt, float *y, int64_t ldy, int nr) {
  gemm_tile_any_avx2(wp, ldw, K, xp, nt, 1, y, ldy, nr);
}

/* gemm16_avx2 on A and B in place (token t's value for column c at xp[c*ldx + t*ldt]), the sums starting from y's values when
 * cont: the same fma per (row, token) and column in the same order, so a reduction split into parts, each part's
 * sums stored and reloaded, has the bits of gemm_tile_ld over all of it. */
static AI __attribute__((target(AVX2))) void gemm16s_avx2(const float *wp, int64_t ldw, int64_t K, const float *xp,
                                                          int64_t ldx, int64_t ldt, const int NT, float *y,
                                                          int64_t ldy, int nr, int cont) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
  __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int t = 0; t < NT; t++)
    if (cont) acc[t][0] = _mm256_maskload_ps(y + t * ldy, m0), acc[t][1] = _mm256_maskload_ps(y + t * ldy + 8, m1);
    else acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c < K; c++) {
    const float *w = wp + c * ldw;
    __m256 w0 = _mm256_maskload_ps(w, m0), w1 = _mm256_maskload_ps(w + 8, m1);
    if (ldt == 1) col16_avx2(w0, w1, xp + c * ldx, NT, acc);
    else
#pragma GCC unroll 6
      for (int t = 0; t < NT; t++) { /* col16_avx2's fma steps, the values from NT rows */
        __m256 b = _mm256_broadcast_ss(xp + c * ldx + t * ldt);
        acc[t][0] = _mm256_fmadd_ps(w0, b, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(w1, b, acc[t][1]);
      }
  }
  store16_avx2(acc, NT, y, ldy, nr);
}

__attribute__((target(AVX2))) static void gemm_tile_2ld_avx2(const float *wp, int64_t ldw, int64_t K, const float *xp,
                                                             int64_t ldx, int64_t ldt, int nt, float *y, int64_t ldy,
                                                             int nr, int cont) {
  for (int h = 0; h < 2 && 16 * h < nr; h++) {
    const float *w = wp + 16 * h;
    float *yh = y + 16 * h;
    int n = nr - 16 * h;
    switch (nt) {
    case 1: gemm16s_avx2(w, ldw, K, xp, ldx, ldt, 1, yh, ldy, n, cont); break;
    case 2: gemm16s_avx2(w, ldw, K, xp, ldx, ldt, 2, yh, ldy, n, cont); break;
    case 3: gemm16s_avx2(w, ldw, K, xp, ldx, ldt, 3, yh, ldy, n, cont); break;
    case 4: gemm16s_avx2(w, ldw, K, xp, ldx, ldt, 4, yh, ldy, n, cont); break;
    case 5: gemm16s_avx2(w, ldw, K, xp, ldx, ldt, 5, yh, ldy, n, cont); break;
    default: gemm16s_avx2(w, ldw, K, xp, ldx, ldt, 6, yh, ldy, n, cont); break;
    }
  }
}

/* 8 rows of 8 floats (ld apart) to 8 columns in registers: c[j] holds column j of the block. */
static AI __attribute__((target(AVX2))) void transpose8_avx2(const float *src, int64_t ld, __m256 c[8]) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ld);
  cpu_t8_avx2(r, c);
}

/* gemm16_avx2 on 16 rows of a row-major tile (lds apart): 8x8 blocks transposed in registers and used at
 * once, column by column, the same fma sequence per (row, token), so bit-identical to the packed tile. */
static AI __attribute__((target(AVX2))) void rowtile16_avx2(const float *src, int64_t lds, int64_t K, const float *xp,
                                                            const int NT, float *y, int64_t ldy, int nr) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  int64_t c0 = 0;
  for (; c0 + 8 <= K; c0 += 8) {
    __m256 col0[8], col1[8];
    transpose8_avx2(src + c0, lds, col0);
    transpose8_avx2(src + 8 * lds + c0, lds, col1);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) col16_avx2(col0[j], col1[j], xp + (c0 + j) * 6, NT, acc);
  }
  for (; c0 < K; c0++) { /* columns past the last whole 8 */
    float w[16] __attribute__((aligned(32)));
    for (int r = 0; r < 16; r++) w[r] = src[r * lds + c0];
    col16_avx2(_mm256_load_ps(w), _mm256_load_ps(w + 8), xp + c0 * 6, NT, acc);
  }
  store16_avx2(acc, NT, y, ldy, nr);
}

__attribute__((target(AVX2))) static void gemm_rowtile_avx2(const float *src, int64_t lds, int64_t K, const float *xp,
                                                            int nt, float *y, int64_t ldy, int nr) {
  for (int h = 0; h < 2 && 16 * h < nr; h++) {
    const float *s16 = src + 16 * h * lds;
    float *yh = y + 16 * h;
    int n = nr - 16 * h;
    switch (nt) {
    case 1: rowtile16_avx2(s16, lds, K, xp, 1, yh, ldy, n); break;
    case 2: rowtile16_avx2(s16, lds, K, xp, 2, yh, ldy, n); break;
    case 3: rowtile16_avx2(s16, lds, K, xp, 3, yh, ldy, n); break;
    default: rowtile16_avx2(s16, lds, K, xp, 4, yh, ldy, n); break; /* nt <= CPU_ROWTILE_TOKS */
    }
  }
}

static AI __attribute__((target(AVX2))) float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target(AVX2))) static float dot_avx2(const float *a, const float *b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  float s = hsum256(_mm256_add_ps(s0, s1));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

__attribute__((target(AVX2))) static void axpy_avx2(float *y, float a, const float *x, int64_t n) {
  __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; i++) y[i] += a * x[i];
}

/* exp(x) = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two parts so r is
 * exact), e^r from a degree-7 polynomial on |r| <= ln2/2 (the Cephes single-precision
 * coefficients; about 1 ulp). */
#define EXP_C1 0.693359375f
#define EXP_C2 -2.12194440e-4f
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

static AI __attribute__((target(AVX2))) __m256 exp256(__m256 x) {
  /* inputs below -87.33 would need a subnormal 2^n: return 0 for them (exp(-inf) = 0 too) */
  __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  /* clamp with x second: MAXPS/MINPS return the second operand for NaN, so NaN propagates */
  x = _mm256_min_ps(_mm256_set1_ps(88.7f), _mm256_max_ps(_mm256_set1_ps(-87.33654f), x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_C1), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_C2), r);
  __m256 p = _mm256_set1_ps(EXP_P0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

__attribute__((target(AVX2))) static void vexp_avx2(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp256(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float tmp[8] = {0};
    memcpy(tmp, x + i, (size_t)(n - i) * sizeof(float));
    _mm256_storeu_ps(tmp, exp256(_mm256_loadu_ps(tmp)));
    memcpy(y + i, tmp, (size_t)(n - i) * sizeof(float));
  }
}

__attribute__((target(AVX2))) static float scale_max_avx2(float *x, int64_t n, float s) {
  __m256 vs = _mm256_set1_ps(s), mx = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    _mm256_storeu_ps(x + i, v);
    mx = _mm256_max_ps(mx, v);
  }
  float tmp[8], m = -INFINITY;
  _mm256_storeu_ps(tmp, mx);
  for (int j = 0; j < 8; j++) m = tmp[j] > m ? tmp[j] : m;
  for (; i < n; i++) {
    x[i] *= s;
    m = x[i] > m ? x[i] : m;
  }
  return m;
}

__attribute__((target(AVX2))) static double exp_sum_avx2(float *x, int64_t n, float m) {
  __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  double sum = hsum256(acc);
  if (i < n) {
    float tmp[8];
    for (int j = 0; j < 8; j++) tmp[j] = i + j < n ? x[i + j] - m : -INFINITY;
    _mm256_storeu_ps(tmp, exp256(_mm256_loadu_ps(tmp)));
    for (int j = 0; i + j < n; j++) {
      x[i + j] = tmp[j];
      sum += tmp[j];
    }
  }
  return sum;
}

__attribute__((target(AVX2))) static void f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

/* The tail both int8 quantizers share: stores the 32 codes qv of block q with scale d, its half sums taken from
 * the codes (|q| <= 127, so the i32 sums: sad of q + 128 per 8 bytes, lanes 0 and 1), and d, s, h[0], h[1] as d
 * times 1, s0 + s1, s0, s1 (the same products as scalar stores). */
static inline __attribute__((always_inline, target(AVX2))) void q8_store_avx2(cpu_q8 *q, __m256i qv, float d) {
  _mm256_storeu_si256((__m256i *)q->q, qv);
  __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(qv, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
  sad = _mm256_add_epi64(sad, _mm256_shuffle_epi32(sad, 0x4E));
  int s0 = _mm256_cvtsi256_si32(sad) - 2048, s1 = _mm256_extract_epi32(sad, 4) - 2048;
  _mm_storeu_ps((float *)(void *)q, _mm_mul_ps(_mm_set1_ps(d), _mm_cvtepi32_ps(_mm_setr_epi32(1, s0 + s1, s0, s1))));
  q->qs[0] = (int16_t)s0;
  q->qs[1] = (int16_t)s1;
}

/* Rounds 32 floats per block to int8 with d = max|x|/127 (round to nearest even, like the
 * generic kernel, so both levels produce identical blocks). */
__attribute__((target(AVX2))) static void quantize_q8_avx2(const float *x, cpu_q8 *q, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; b++) {
    const float *xb = x + 32 * b;
    __m256 v[4], mx = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4), d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    __m256i i32[4];
    for (int j = 0; j < 4; j++)
      i32[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], _mm256_set1_ps(id)),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    /* packs interleave 128-bit lanes; the permute restores element order */
    __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]), p16b = _mm256_packs_epi32(i32[2], i32[3]);
    __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    q8_store_avx2(&q[b], p8, d);
  }
}

/* The elementwise kernels (cpu_kernels.scale_mul, add_mul, rope_head): the scalar loops' operations per lane. */
__attribute__((target(AVX2))) static void scale_mul_avx2(const float *x, float s, const float *w, float *y, int64_t n) {
  __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  if (w)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(w + i)));
  else
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
  cpu_scale_mul_c(x + i, s, w ? w + i : NULL, y + i, n - i);
}

__attribute__((target(AVX2))) static void add_mul_avx2(int mul, const float *a, const float *b, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 av = _mm256_loadu_ps(a + i), bv = _mm256_loadu_ps(b + i);
    _mm256_storeu_ps(y + i, mul ? _mm256_mul_ps(av, bv) : _mm256_add_ps(av, bv));
  }
  cpu_add_mul_c(mul, a + i, b + i, y + i, n - i);
}

__attribute__((target(AVX2))) static void rope_head_avx2(float *v, const float *cs, const float *sn, int half, int neox) {
  int i = 0;
  if (neox)
    for (; i + 8 <= half; i += 8) {
      __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
      __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
      _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(v + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
    }
  for (; i < half; i++) cpu_rope_pair(v, neox ? i : 2 * i, neox ? i + half : 2 * i + 1, cs[i], sn[i]);
}

#define QD_TARGET AVX2
#define QD_SFX avx2
#define QD_DOT(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
#define QD_DOTACC(acc, u, s) _mm256_add_epi32(acc, QD_DOT(u, s))
#define QG_NT 3
#define QG_Q8_0 0 /* maddubs saturates on Q8_0's 0..255 codes */
#include "cpu_qdot_x86.h"
#include "cpu_qgemm_x86.h"
#define XW_LANES 8
#include "cpu_xtile_x86.h"
#undef XW_LANES
#undef QG_NT
#undef QG_Q8_0
#undef QD_DOTACC
#undef QD_TARGET
#undef QD_SFX
#undef QD_DOT

void cpu_kernels_avx2(cpu_kernels *k) {
  cpu_kernels_generic(k);
  k->gemm_tile_bf16 = NULL; /* the scalar bf16 reference is slower than the f32 kernels: FAST stays f32 */
  k->pack_x_bf16 = NULL;
  k->pair_rows_bf16 = NULL;
  k->name = "avx2";
  k->gemm_nt = 6;
  k->gemm_tile = gemm_tile_avx2;
  k->gemm_rowtile = gemm_rowtile_avx2;
  k->gemm_tile_ld = gemm_tile_ld_avx2;
  k->gemm_tile_2ld = gemm_tile_2ld_avx2;
  k->dot = dot_avx2;
  k->axpy = axpy_avx2;
  k->f16_to_f32 = f16_to_f32_avx2;
  k->vexp = vexp_avx2;
  k->scale_max = scale_max_avx2;
  k->exp_sum = exp_sum_avx2;
  k->quantize_q8 = quantize_q8_avx2;
  k->scale_mul = scale_mul_avx2;
  k->add_mul = add_mul_avx2;
  k->rope_head = rope_head_avx2;
  qd_install_avx2(k);
  qg_install_avx2(k);
  xw_install_avx2(k);
  cpu_probes_avx2(k);
}

/* ================================ AVX-512 ===================================================== */

/* One column of a 32-row tile (w0, w1) times NT tokens' activations xc[t]: the fma step every f32 tile
 * kernel shares, so their chains per (row, token) are the same. */
static AI __attribute__((target(AVX512))) void col32_avx512(__m512 w0, __m512 w1, const float *xc, const int NT,
                                                            __m512 acc[8][2]) {
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    __m512 b = _mm512_set1_ps(xc[t]);
    acc[t][0] = _mm512_fmadd_ps(w0, b, acc[t][0]);
    acc[t][1] = _mm512_fmadd_ps(w1, b, acc[t][1]);
  }
}

/* The full 32-row tile in two zmm registers times NT <= 8 tokens: 16 accumulators. Column c of the tile is at
 * wp + c*ldw; MASKED (gemm_tile_ld): unaligned, and lanes past nr not read, else (gemm_tile: ldw = 32, rows past
 * nr zero in the packed tile) aligned loads. */
static AI __attribute__((target(AVX512))) void gemm32_avx512(const float *wp, int64_t ldw, int64_t K, const float *xp,
                                                             const int NT, const int MASKED, float *y, int64_t ldy,
                                                             int nr) {
  __mmask16 m0 = cpu_lanes16(nr), m1 = cpu_lanes16(nr - 16);
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t c = 0; c < K; c++) {
    const float *w = wp + c * ldw;
    if (MASKED) col32_avx512(_mm512_maskz_loadu_ps(m0, w), _mm512_maskz_loadu_ps(m1, w + 16), xp + c * 8, NT, acc);
    else col32_avx512(_mm512_load_ps(w), _mm512_load_ps(w + 16), xp + c * 8, NT, acc);
  }
  cpu_store32_avx512(acc, NT, y, ldy, nr);
}

/* gemm_tile and gemm_tile_ld, NT a constant per case. */
static AI __attribute__((target(AVX512))) void gemm_tile_any_avx512(const float *wp, int64_t ldw, int64_t K,
                                                                    const float *xp, int nt, const int MASKED,
                                                                    float *y, int64_t ldy, int nr) {
  switch (nt) {
  case 1: gemm32_avx512(wp, ldw, K, xp, 1, MASKED, y, ldy, nr); break;
  case 2: gemm32_avx512(wp, ldw, K, xp, 2, MASKED, y, ldy, nr); break;
  case 3: gemm32_avx512(wp, ldw, K, xp, 3, MASKED, y, ldy, nr); break;
  case 4: gemm32_avx512(wp, ldw, K, xp, 4, MASKED, y, ldy, nr); break;
  case 5: gemm32_avx512(wp, ldw, K, xp, 5, MASKED, y, ldy, nr); break;
  case 6: gemm32_avx512(wp, ldw, K, xp, 6, MASKED, y, ldy, nr); break;
  case 7: gemm32_avx512(wp, ldw, K, xp, 7, MASKED, y, ldy, nr); break;
  default: gemm32_avx512(wp, ldw, K, xp, 8, MASKED, y, ldy, nr); break;
  }
}

__attribute__((target(AVX512))) static void gemm_tile_avx512(const float *wp, int64_t K, const float *xp, int nt,
                                                             float *y, int64_t ldy, int nr) {
  gemm_tile_any_avx512(wp, CPU_TILE_ROWS, K, xp, nt, 0, y, ldy, nr);
}

/* 16 rows of 16 floats (ld apart) to 16 columns (ldd apart): 32-bit, 64-bit, then two 128-bit-lane
 * interleaving stages. */
static AI __attribute__((target(AVX512))) void transpose16_avx512(const float *src, int64_t ld, float *dst,
                                                                  int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ld);
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  /* s[4G + j]: lane L holds rows 4G..4G+3 of column 4L + j */
#pragma GCC unroll 4
  for (int G = 0; G < 4; G++) {
    __m512d a = _mm512_castps_pd(t[4 * G]), b = _mm512_castps_pd(t[4 * G + 1]);
    __m512d c = _mm512_castps_pd(t[4 * G + 2]), d = _mm512_castps_pd(t[4 * G + 3]);
    r[4 * G] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * G + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * G + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * G + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) { /* the 4x4 matrix of 128-bit lanes r[4G + j], transposed */
    __m512 x0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), x1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
    __m512 x2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44), x3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
    _mm512_storeu_ps(dst + (0 + j) * ldd, _mm512_shuffle_f32x4(x0, x2, 0x88));
    _mm512_storeu_ps(dst + (4 + j) * ldd, _mm512_shuffle_f32x4(x0, x2, 0xDD));
    _mm512_storeu_ps(dst + (8 + j) * ldd, _mm512_shuffle_f32x4(x1, x3, 0x88));
    _mm512_storeu_ps(dst + (12 + j) * ldd, _mm512_shuffle_f32x4(x1, x3, 0xDD));
  }
}

/* cpu_pack_x for 8 tokens (gemm_nt at this level): 8x8 blocks transposed in registers. Attention packs its
 * probabilities for p.v this way for every block of queries; the scalar strided loop was ~5% of a 1400-token
 * forward. */
__attribute__((target(AVX512))) static void pack_x_avx512(const float *x, int64_t ldx, int64_t K, int nt, int gnt,
                                                          float *xp) {
  if (nt != 8 || gnt != 8) {
    cpu_pack_x(x, ldx, K, nt, gnt, xp);
    return;
  }
  int64_t c = 0;
  for (; c + 8 <= K; c += 8) {
    __m256 col[8];
    transpose8_avx2(x + c, ldx, col);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(xp + (c + i) * 8, col[i]);
  }
  for (; c < K; c++)
    for (int i = 0; i < 8; i++) xp[c * 8 + i] = x[i * ldx + c];
}

/* The gemm's strided packs (cpu_internal.h, copy_cols): a transposed operand's K rows, each a short contiguous
 * piece cs floats apart; whole 64-byte pieces per load, four rows in flight. */
__attribute__((target(AVX512))) static void copy_cols_avx512(const float *p, int64_t cs, int64_t K, int w, float *d0,
                                                            float *d1) {
  int64_t c = 0;
  if (w == 32) {
    for (; c + 4 <= K; c += 4)
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) {
        __m512 a = _mm512_loadu_ps(p + (c + u) * cs), b = _mm512_loadu_ps(p + (c + u) * cs + 16);
        _mm512_storeu_ps(d0 + (c + u) * 32, a), _mm512_storeu_ps(d0 + (c + u) * 32 + 16, b);
      }
    for (; c < K; c++)
      _mm512_storeu_ps(d0 + c * 32, _mm512_loadu_ps(p + c * cs)),
          _mm512_storeu_ps(d0 + c * 32 + 16, _mm512_loadu_ps(p + c * cs + 16));
  } else if (d1) {
    for (; c + 4 <= K; c += 4)
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) {
        __m512 a = _mm512_loadu_ps(p + (c + u) * cs);
        _mm256_storeu_ps(d0 + (c + u) * 8, _mm512_castps512_ps256(a));
        _mm256_storeu_ps(d1 + (c + u) * 8, _mm512_extractf32x8_ps(a, 1));
      }
    for (; c < K; c++) {
      __m512 a = _mm512_loadu_ps(p + c * cs);
      _mm256_storeu_ps(d0 + c * 8, _mm512_castps512_ps256(a)), _mm256_storeu_ps(d1 + c * 8, _mm512_extractf32x8_ps(a, 1));
    }
  } else
    for (; c < K; c++) _mm256_storeu_ps(d0 + c * 8, _mm256_loadu_ps(p + c * cs));
}

__attribute__((target(AVX512))) static void pack_tile_avx512(const float *src, int64_t lds, int64_t K, float *wp) {
  int64_t c0 = 0;
  for (; c0 + 16 <= K; c0 += 16)
    for (int h = 0; h < 2; h++)
      transpose16_avx512(src + 16 * h * lds + c0, lds, wp + c0 * CPU_TILE_ROWS + 16 * h, CPU_TILE_ROWS);
  for (; c0 < K; c0++)
    for (int r = 0; r < CPU_TILE_ROWS; r++) wp[c0 * CPU_TILE_ROWS + r] = src[r * lds + c0];
}

/* gemm_tile on an unpacked tile: 16x16 blocks of the row-major tile are transposed in registers and
 * used at once, column by column, with the same fma sequence per (row, token) as gemm32_avx512, so
 * the results are bit-identical without writing and re-reading a packed tile (few tokens). */
static AI __attribute__((target(AVX512))) void rowtile32_avx512(const float *src, int64_t lds, int64_t K,
                                                                const float *xp, const int NT, float *y, int64_t ldy,
                                                                int nr) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  float col[16 * 16] __attribute__((aligned(64)));
  int64_t c0 = 0;
  for (; c0 + 16 <= K; c0 += 16) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      transpose16_avx512(src + 16 * h * lds + c0, lds, col, 16);
#pragma GCC unroll 16
      for (int j = 0; j < 16; j++) {
        __m512 w = _mm512_load_ps(col + 16 * j);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[t][h] = _mm512_fmadd_ps(w, _mm512_set1_ps(xp[(c0 + j) * 8 + t]), acc[t][h]);
      }
    }
  }
  for (; c0 < K; c0++) { /* columns past the last whole 16 */
    float w[32] __attribute__((aligned(64)));
    for (int r = 0; r < 32; r++) w[r] = src[r * lds + c0];
    col32_avx512(_mm512_load_ps(w), _mm512_load_ps(w + 16), xp + c0 * 8, NT, acc);
  }
  cpu_store32_avx512(acc, NT, y, ldy, nr);
}

__attribute__((target(AVX512))) static void gemm_rowtile_avx512(const float *src, int64_t lds, int64_t K,
                                                                const float *xp, int nt, float *y, int64_t ldy, int nr) {
  switch (nt) {
  case 1: rowtile32_avx512(src, lds, K, xp, 1, y, ldy, nr); break;
  case 2: rowtile32_avx512(src, lds, K, xp, 2, y, ldy, nr); break;
  case 3: rowtile32_avx512(src, lds, K, xp, 3, y, ldy, nr); break;
  default: rowtile32_avx512(src, lds, K, xp, 4, y, ldy, nr); break; /* nt <= CPU_ROWTILE_TOKS */
  }
}

__attribute__((target(AVX512))) static void gemm_tile_ld_avx512(const float *wp, int64_t ldw, int64_t K,
                                                                const float *xp, int nt, float *y, int64_t ldy, int nr) {
  gemm_tile_any_avx512(wp, ldw, K, xp, nt, 1, y, ldy, nr);
}

/* gemm32_avx512 on A and B in place (token t's value for column c at xp[c*ldx + t*ldt]; UNIT: ldt = 1, the tokens
 * of a column side by side), the sums starting from y's values when cont (gemm16s_avx2's contract). */
static AI __attribute__((target(AVX512))) void gemm32s_avx512(const float *wp, int64_t ldw, int64_t K,
                                                              const float *xp, int64_t ldx, int64_t ldt, const int NT,
                                                              const int UNIT, float *y, int64_t ldy, int nr, int cont) {
  __mmask16 m0 = cpu_lanes16(nr), m1 = cpu_lanes16(nr - 16);
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++)
    if (cont)
      acc[t][0] = _mm512_maskz_loadu_ps(m0, y + t * ldy), acc[t][1] = _mm512_maskz_loadu_ps(m1, y + t * ldy + 16);
    else acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t c = 0; c < K; c++) {
    const float *w = wp + c * ldw;
    __m512 w0 = _mm512_maskz_loadu_ps(m0, w), w1 = _mm512_maskz_loadu_ps(m1, w + 16);
    if (UNIT) col32_avx512(w0, w1, xp + c * ldx, NT, acc);
    else
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) { /* col32_avx512's fma steps, the values from NT rows */
        __m512 b = _mm512_set1_ps(xp[c * ldx + t * ldt]);
        acc[t][0] = _mm512_fmadd_ps(w0, b, acc[t][0]);
        acc[t][1] = _mm512_fmadd_ps(w1, b, acc[t][1]);
      }
  }
  cpu_store32_avx512(acc, NT, y, ldy, nr);
}

/* gemm32s_avx512 with nt as the compile-time token count (UNIT a constant at each call, inlined). */
static AI __attribute__((target(AVX512))) void gemm32s_nt_avx512(const float *wp, int64_t ldw, int64_t K,
                                                                 const float *xp, int64_t ldx, int64_t ldt, int nt,
                                                                 const int UNIT, float *y, int64_t ldy, int nr,
                                                                 int cont) {
#define G32S(N) gemm32s_avx512(wp, ldw, K, xp, ldx, ldt, N, UNIT, y, ldy, nr, cont)
  switch (nt) {
  case 1: G32S(1); break;
  case 2: G32S(2); break;
  case 3: G32S(3); break;
  case 4: G32S(4); break;
  case 5: G32S(5); break;
  case 6: G32S(6); break;
  case 7: G32S(7); break;
  default: G32S(8); break;
  }
#undef G32S
}

__attribute__((target(AVX512))) static void gemm_tile_2ld_avx512(const float *wp, int64_t ldw, int64_t K,
                                                                 const float *xp, int64_t ldx, int64_t ldt, int nt,
                                                                 float *y, int64_t ldy, int nr, int cont) {
  if (ldt == 1) gemm32s_nt_avx512(wp, ldw, K, xp, ldx, ldt, nt, 1, y, ldy, nr, cont);
  else gemm32s_nt_avx512(wp, ldw, K, xp, ldx, ldt, nt, 0, y, ldy, nr, cont);
}

__attribute__((target(AVX512))) static float dot_avx512(const float *a, const float *b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  if (i + 16 <= n) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    i += 16;
  }
  if (i < n) { /* masked tail: no scalar loop */
    __mmask16 m = cpu_lanes16(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target(AVX512))) static void axpy_avx512(float *y, float a, const float *x, int64_t n) {
  __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    __mmask16 m = cpu_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

/* Lane i = the sum of the lanes of a[i]: four levels of pairwise adds of interleaved halves. */
static AI __attribute__((target(AVX512))) __m512 hsum16_avx512(const __m512 a[16]) {
  __m512 b[8], c[4], d[2];
  for (int i = 0; i < 8; i++) /* per 128-bit chunk: a[2i] in positions 0 and 2, a[2i+1] in 1 and 3 */
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; i++) { /* per chunk: a[4i..4i+3], each summed over that chunk */
    __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
    c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  for (int i = 0; i < 2; i++) /* chunks summed in pairs */
    d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Decode's q.k: 16 keys at a time, their dots reduced together (a dot call and a reduction per key were
 * ~6% of FAST decode). Head sizes that are not a multiple of 16 take dot per key. */
__attribute__((target(AVX512))) static void qk_rows_avx512(const float *q, int ng, int64_t hd, const float *k,
                                                          int64_t ks, int64_t j0, int64_t j1, float *s, int64_t ss) {
  for (int g = 0; g < ng; g++) {
    const float *qg = q + g * hd;
    float *sg = s + g * ss;
    int64_t j = j0;
    for (; hd % 16 == 0 && j + 16 <= j1; j += 16) {
      __m512 a[16];
      for (int u = 0; u < 16; u++) a[u] = _mm512_setzero_ps();
      for (int64_t c = 0; c < hd; c += 16) {
        __m512 qv = _mm512_loadu_ps(qg + c);
        if (g == 0 && j + 32 <= j1) /* the next 16 keys: first touch, from memory */
          for (int u = 0; u < 16; u++) _mm_prefetch((const char *)(k + (j + 16 + u) * ks + c), _MM_HINT_T0);
        for (int u = 0; u < 16; u++) a[u] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + (j + u) * ks + c), a[u]);
      }
      _mm512_storeu_ps(sg + j, hsum16_avx512(a));
    }
    for (; j < j1; j++) sg[j] = dot_avx512(qg, k + j * ks, hd);
  }
}

/* Decode's p.v for NV = hd/16 (a constant): the output row stays in registers across the keys. */
static AI __attribute__((target(AVX512))) void pv_row_avx512(const float *p, const int NV, const float *v, int64_t vs,
                                                            int64_t j0, int64_t j1, float *o) {
  __m512 acc[16]; /* fully unrolled so it stays in registers (a loop kept it on the stack) */
#pragma GCC unroll 16
  for (int c = 0; c < NV; c++) acc[c] = _mm512_loadu_ps(o + 16 * c);
  for (int64_t j = j0; j < j1; j++) {
    if (p[j] == 0.0f) continue;
    __m512 w = _mm512_set1_ps(p[j]);
    const float *vj = v + j * vs;
    if (j + 8 < j1)
#pragma GCC unroll 16
      for (int c = 0; c < NV; c++) _mm_prefetch((const char *)(vj + 8 * vs + 16 * c), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int c = 0; c < NV; c++) acc[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vj + 16 * c), acc[c]);
  }
#pragma GCC unroll 16
  for (int c = 0; c < NV; c++) _mm512_storeu_ps(o + 16 * c, acc[c]);
}

__attribute__((target(AVX512))) static void pv_rows_avx512(const float *p, int64_t ps, int ng, int64_t hd,
                                                          const float *v, int64_t vs, int64_t j0, int64_t j1, float *o) {
  for (int g = 0; g < ng; g++) {
    const float *pg = p + g * ps;
    float *og = o + g * hd;
    switch (hd) {
    case 64: pv_row_avx512(pg, 4, v, vs, j0, j1, og); break;
    case 128: pv_row_avx512(pg, 8, v, vs, j0, j1, og); break;
    case 256: pv_row_avx512(pg, 16, v, vs, j0, j1, og); break;
    default:
      for (int64_t j = j0; j < j1; j++)
        if (pg[j] != 0.0f) axpy_avx512(og, pg[j], v + j * vs, hd);
    }
  }
}

/* As exp256, with scalef doing 2^n (it handles the subnormal range and overflow itself). */
static AI __attribute__((target(AVX512))) __m512 exp512(__m512 x) {
  /* below -110 the result rounds to exactly 0 (also for -inf); NaN propagates as in exp256 */
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-110.0f), x));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_C1), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_C2), r);
  __m512 p = _mm512_set1_ps(EXP_P0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

__attribute__((target(AVX512))) static void vexp_avx512(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp512(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = cpu_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m, exp512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

/* sigmoid_gate (cpu_ops.c) in one pass, the same operations in the same order per element. */
__attribute__((target(AVX512))) static void gate_avx512(int gelu, const float *x, const float *up, float *out,
                                                        int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), c3 = _mm512_set1_ps(0.044715f), cg = _mm512_set1_ps(-1.5957691216057308f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = cpu_lanes16(n - i);
    __m512 v = _mm512_maskz_loadu_ps(m, x + i), t;
    if (gelu) t = _mm512_mul_ps(cg, _mm512_add_ps(v, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(c3, v), v), v)));
    else t = _mm512_xor_ps(v, _mm512_set1_ps(-0.0f));
    __m512 y = _mm512_div_ps(v, _mm512_add_ps(one, exp512(t)));
    if (up) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, y);
  }
}

/* scale_mul_avx2 etc. 16 lanes at a time (masked tails: the same operations per lane). */
__attribute__((target(AVX512))) static void scale_mul_avx512(const float *x, float s, const float *w, float *y,
                                                             int64_t n) {
  __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = cpu_lanes16(n - i);
    __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
    if (w) r = _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

__attribute__((target(AVX512))) static void add_mul_avx512(int mul, const float *a, const float *b, float *y,
                                                           int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = cpu_lanes16(n - i);
    __m512 av = _mm512_maskz_loadu_ps(m, a + i), bv = _mm512_maskz_loadu_ps(m, b + i);
    _mm512_mask_storeu_ps(y + i, m, mul ? _mm512_mul_ps(av, bv) : _mm512_add_ps(av, bv));
  }
}

/* Interleaved pairs: lanes (2j, 2j + 1) hold (x0, x1) of pair j; with the pair swapped and cs, sn repeated per
 * pair, even lanes take x0*c - x1*s and odd lanes x1*c + x0*s (the loop's x0*s + x1*c: the same sum). */
__attribute__((target(AVX512))) static void rope_head_avx512(float *v, const float *cs, const float *sn, int half,
                                                             int neox) {
  int i = 0;
  if (neox) {
    for (; i + 16 <= half; i += 16) {
      __m512 x0 = _mm512_loadu_ps(v + i), x1 = _mm512_loadu_ps(v + i + half);
      __m512 c = _mm512_loadu_ps(cs + i), s = _mm512_loadu_ps(sn + i);
      _mm512_storeu_ps(v + i, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
      _mm512_storeu_ps(v + i + half, _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c)));
    }
  } else {
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    for (; i + 8 <= half; i += 8) {
      __m512 x = _mm512_loadu_ps(v + 2 * i);
      __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cs + i)));
      __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(sn + i)));
      __m512 p = _mm512_mul_ps(x, c), q = _mm512_mul_ps(_mm512_permute_ps(x, 0xB1), s);
      _mm512_storeu_ps(v + 2 * i, _mm512_mask_sub_ps(_mm512_add_ps(p, q), (__mmask16)0x5555, p, q));
    }
  }
  for (; i < half; i++) cpu_rope_pair(v, neox ? i : 2 * i, neox ? i + half : 2 * i + 1, cs[i], sn[i]);
}

/* quantize_q8_avx2 16 lanes at a time: the same d, rounding and sums, so the same blocks. */
__attribute__((target(AVX512))) static void quantize_q8_avx512(const float *x, cpu_q8 *q, int64_t n) {
  for (int64_t b = 0; b < n / 32; b++) {
    const float *xb = x + 32 * b;
    __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q8_store_avx2(&q[b], _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(i0)),
                                                 _mm512_cvtsepi32_epi8(i1), 1), d);
  }
}

__attribute__((target(AVX512))) static float scale_max_avx512(float *x, int64_t n, float s) {
  __m512 vs = _mm512_set1_ps(s), mx = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
    _mm512_storeu_ps(x + i, v);
    mx = _mm512_max_ps(mx, v);
  }
  if (i < n) {
    __mmask16 k = cpu_lanes16(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
    _mm512_mask_storeu_ps(x + i, k, v);
    mx = _mm512_mask_max_ps(mx, k, mx, v);
  }
  return _mm512_reduce_max_ps(mx);
}

__attribute__((target(AVX512))) static double exp_sum_avx512(float *x, int64_t n, float m) {
  __m512 vm = _mm512_set1_ps(m), acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    __mmask16 k = cpu_lanes16(n - i);
    __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm));
    _mm512_mask_storeu_ps(x + i, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

#define QD_TARGET AVX512
#define QD_SFX avx512
#define QD_DOT(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
#define QD_DOTACC(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define QG_NT 6
#define QG_Q8_0 1
#define QD_MASK_BITS 1
#include "cpu_qdot_x86.h"
#include "cpu_qgemm_x86.h"
#define XW_LANES 16
#include "cpu_xtile_x86.h"
#undef XW_LANES
#undef QG_NT
#undef QG_Q8_0
#undef QD_MASK_BITS
#undef QD_DOTACC
#undef QD_TARGET
#undef QD_SFX
#undef QD_DOT

void cpu_kernels_avx512(cpu_kernels *k) {
  cpu_kernels_avx2(k);
  k->name = "avx512";
  k->gemm_nt = 8;
  k->gemm_tile = gemm_tile_avx512;
  k->dot = dot_avx512;
  k->axpy = axpy_avx512;
  k->qk_rows = qk_rows_avx512;
  k->pv_rows = pv_rows_avx512;
  k->vexp = vexp_avx512;
  k->scale_max = scale_max_avx512;
  k->exp_sum = exp_sum_avx512;
  k->gate = gate_avx512;
  k->quantize_q8 = quantize_q8_avx512;
  k->scale_mul = scale_mul_avx512;
  k->add_mul = add_mul_avx512;
  k->rope_head = rope_head_avx512;
  qd_install_avx512(k);
  qg_install_avx512(k);
  k->pack_tile = pack_tile_avx512;
  k->pack_x = pack_x_avx512;
  k->gemm_rowtile = gemm_rowtile_avx512;
  k->gemm_tile_ld = gemm_tile_ld_avx512;
  k->gemm_tile_2ld = gemm_tile_2ld_avx512;
  k->copy_cols = copy_cols_avx512;
  xw_install_avx512(k);
  cpu_probes_avx512(k);
}

#endif
