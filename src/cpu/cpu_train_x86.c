/* AVX-512 kernels of the trainer's ops (cpu_train_ops.c): the norm backward's per-row double sums with eight rows
 * in the eight double lanes of a register, each lane's sum in its own row's element order, with the very operations
 * (float products, then each term widened and added in double) the scalar loop does, so the bits are the scalar
 * loop's; the scalar loop waited on every add (one row's chain), here eight rows' adds are one instruction, the rows
 * turned into columns by 8x8 transposes in registers. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_simd_x86.h"

#define AVX512 "avx512f,avx512vl,avx2"

/* Columns j0 .. j0+7 of the eight rows at x (ld floats apart): c[u] = x[0..7][j0 + u], an 8x8 transpose in
 * registers (gathers are slow where microcode mitigates them); the last columns (nj < 8) one element at a time. */
static inline __attribute__((always_inline, target(AVX512))) void cols8(const float *x, int64_t ld, int64_t j0, int nj,
                                                                         __m256 c[8]) {
  if (nj < 8) {
    for (int u = 0; u < nj; u++) {
      const float *p = x + j0 + u;
      c[u] = _mm256_setr_ps(p[0], p[ld], p[2 * ld], p[3 * ld], p[4 * ld], p[5 * ld], p[6 * ld], p[7 * ld]);
    }
    return;
  }
  __m256 r[8], t[8]; /* unrolled so that r and t stay in registers (they were spilled to the stack) */
  #pragma GCC unroll 8
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(x + i * ld + j0);
  #pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2)
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  /* t[0] = a0 b0 a1 b1 | a4 b4 a5 b5, t[1] = a2 b2 a3 b3 | a6 b6 a7 b7 (rows a, b), likewise t[2..7] */
  #pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  /* r[0..3] = columns 0, 1, 2, 3 of rows 0-3 (low half) and columns 4..7 (high half); r[4..7] rows 4-7 */
  #pragma GCC unroll 4
  for (int u = 0; u < 4; u++) {
    c[u] = _mm256_permute2f128_ps(r[u], r[u + 4], 0x20);
    c[u + 4] = _mm256_permute2f128_ps(r[u], r[u + 4], 0x31);
  }
}

/* Sums of rows 0-7 (lanes of a) and 8-15 (lanes of b): two independent chains, so each add waits on half as many. */
#define SUM16(acc_a, acc_b, expr_a, expr_b) \
  ((acc_a) = _mm512_add_pd((acc_a), (expr_a)), (acc_b) = _mm512_add_pd((acc_b), (expr_b)))

/* Rows up to which the kernel keeps x's columns after the first pass instead of transposing them again. */
#define NORM_KEEP_COLS 256

/* Columns j0 .. j0+nj-1 of the eight rows at x: from keep where an earlier pass stored them (have), else
 * transposed (and stored into keep when there is one). */
static inline __attribute__((always_inline, target(AVX512))) void xcols(const float *x, int64_t ld, int64_t j0, int nj,
                                                                         __m256 c[8], __m256 *keep, int have) {
  if (have) {
    for (int u = 0; u < nj; u++) c[u] = keep[j0 + u];
    return;
  }
  cols8(x, ld, j0, nj, c);
  if (keep)
    for (int u = 0; u < nj; u++) keep[j0 + u] = c[u];
}

__attribute__((target(AVX512))) static void norm_bwd16_avx512(const float *x, const float *g, int64_t ld,
                                                               const float *w, int64_t d, int rms, float eps,
                                                               float *stats, int stats_in, float *dx) {
  const float *x8 = x + 8 * ld, *g8 = g + 8 * ld;
  __m256 c[8], c8[8], cg[8], cg8[8], kept[2][NORM_KEEP_COLS];
  __m256 *k0 = d <= NORM_KEEP_COLS ? kept[0] : NULL, *k1 = d <= NORM_KEEP_COLS ? kept[1] : NULL;
  int have = 0; /* x's columns are in kept */
  float m[16], r[16];
  if (stats_in) { /* given: the sums pass below transposes x itself */
    for (int i = 0; i < 16; i++) m[i] = stats[2 * i], r[i] = stats[2 * i + 1];
    k0 = k1 = NULL;
  } else {
    __m512d mean = _mm512_setzero_pd(), mean8 = mean, v = mean, v8 = mean;
    if (!rms) {
      for (int64_t j0 = 0; j0 < d; j0 += 8) {
        int nj = d - j0 < 8 ? (int)(d - j0) : 8;
        xcols(x, ld, j0, nj, c, k0, have), xcols(x8, ld, j0, nj, c8, k1, have);
        for (int u = 0; u < nj; u++) SUM16(mean, mean8, _mm512_cvtps_pd(c[u]), _mm512_cvtps_pd(c8[u]));
      }
      mean = _mm512_div_pd(mean, _mm512_set1_pd((double)d)), mean8 = _mm512_div_pd(mean8, _mm512_set1_pd((double)d));
      have = k0 != NULL;
    }
    for (int64_t j0 = 0; j0 < d; j0 += 8) {
      int nj = d - j0 < 8 ? (int)(d - j0) : 8;
      xcols(x, ld, j0, nj, c, k0, have), xcols(x8, ld, j0, nj, c8, k1, have);
      for (int u = 0; u < nj; u++) {
        __m512d t = _mm512_sub_pd(_mm512_cvtps_pd(c[u]), mean), t8 = _mm512_sub_pd(_mm512_cvtps_pd(c8[u]), mean8);
        SUM16(v, v8, _mm512_mul_pd(t, t), _mm512_mul_pd(t8, t8));
      }
    }
    have = k0 != NULL;
    double md[16], vd[16];
    _mm512_storeu_pd(md, mean), _mm512_storeu_pd(md + 8, mean8);
    _mm512_storeu_pd(vd, v), _mm512_storeu_pd(vd + 8, v8);
    for (int i = 0; i < 16; i++) {
      m[i] = (float)md[i];
      r[i] = (float)(1.0 / sqrt(vd[i] / (double)d + eps));
      stats[2 * i] = m[i], stats[2 * i + 1] = r[i];
    }
  }
  if (!dx) return;
  const __m256 mf = _mm256_loadu_ps(m), rf = _mm256_loadu_ps(r);
  const __m256 mf8 = _mm256_loadu_ps(m + 8), rf8 = _mm256_loadu_ps(r + 8);
  __m512d s1 = _mm512_setzero_pd(), s2 = s1, s18 = s1, s28 = s1;
  for (int64_t j0 = 0; j0 < d; j0 += 8) {
    int nj = d - j0 < 8 ? (int)(d - j0) : 8;
    xcols(x, ld, j0, nj, c, k0, have), xcols(x8, ld, j0, nj, c8, k1, have);
    cols8(g, ld, j0, nj, cg), cols8(g8, ld, j0, nj, cg8);
    for (int u = 0; u < nj; u++) {
      __m256 wj = _mm256_set1_ps(w ? w[j0 + u] : 1.0f), gh = _mm256_mul_ps(cg[u], wj), gh8 = _mm256_mul_ps(cg8[u], wj);
      __m256 t = _mm256_mul_ps(_mm256_mul_ps(gh, _mm256_sub_ps(c[u], mf)), rf);
      __m256 t8 = _mm256_mul_ps(_mm256_mul_ps(gh8, _mm256_sub_ps(c8[u], mf8)), rf8);
      SUM16(s1, s18, _mm512_cvtps_pd(gh), _mm512_cvtps_pd(gh8));
      SUM16(s2, s28, _mm512_cvtps_pd(t), _mm512_cvtps_pd(t8));
    }
  }
  double sg[16], sgx[16];
  _mm512_storeu_pd(sg, s1), _mm512_storeu_pd(sg + 8, s18), _mm512_storeu_pd(sgx, s2), _mm512_storeu_pd(sgx + 8, s28);
  /* dx += r * (g*w - a - (x - m) * r * b), row by row, 16 elements at a time (elementwise: the scalar loop's bits) */
  for (int i = 0; i < 16; i++) {
    const float *xi = x + i * ld, *gi = g + i * ld;
    float *di = dx + i * ld;
    const __m512 a = _mm512_set1_ps(rms ? 0.0f : (float)(sg[i] / (double)d));
    const __m512 b = _mm512_set1_ps((float)(sgx[i] / (double)d));
    const __m512 mi = _mm512_set1_ps(m[i]), ri = _mm512_set1_ps(r[i]), one = _mm512_set1_ps(1.0f);
    for (int64_t j = 0; j < d; j += 16) {
      __mmask16 k = cpu_lanes16(d - j);
      __m512 xv = _mm512_maskz_loadu_ps(k, xi + j), gv = _mm512_maskz_loadu_ps(k, gi + j);
      __m512 wv = w ? _mm512_maskz_loadu_ps(k, w + j) : one;
      __m512 xh = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(xv, mi), ri), b);
      __m512 e = _mm512_sub_ps(_mm512_sub_ps(_mm512_mul_ps(gv, wv), a), xh);
      _mm512_mask_storeu_ps(di + j, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, di + j), _mm512_mul_ps(ri, e)));
    }
  }
}

/* Attention backward's row sums (cpu_train_attn.c, row_dots): pdp[r] = sum over j <= i0 + r of P[i0+r][j] *
 * dP[i0+r][j] in double, j in order, for the nr <= 8 rows from i0 (rows T floats apart). The eight rows' common keys
 * j <= i0 run in the eight double lanes (each lane its row's chain; the products of two widened floats are exact),
 * the columns by 8x8 transposes; then each row's own last keys one at a time, in order. */
__attribute__((target(AVX512))) static void row_dots8_avx512(const float *P, const float *dP, int64_t T, int64_t i0,
                                                              int nr, double *pdp) {
  const float *p = P + i0 * T, *d = dP + i0 * T;
  float pb[8 * 8], db[8 * 8]; /* rows past nr repeat row 0 (read, never reported) */
  const float *pr = p, *dr = d;
  int64_t ld = T;
  __m512d acc = _mm512_setzero_pd();
  __m256 cp[8], cd[8];
  if (nr < 8) { /* the missing rows would read past the matrix: copy the rows into blocks as the prefix goes */
    for (int64_t j0 = 0; j0 <= i0; j0 += 8) {
      int nj = i0 + 1 - j0 < 8 ? (int)(i0 + 1 - j0) : 8;
      for (int r = 0; r < 8; r++)
        for (int u = 0; u < 8; u++) {
          int rr = r < nr ? r : 0;
          pb[r * 8 + u] = u < nj ? p[rr * T + j0 + u] : 0.0f, db[r * 8 + u] = u < nj ? d[rr * T + j0 + u] : 0.0f;
        }
      cols8(pb, 8, 0, 8, cp), cols8(db, 8, 0, 8, cd);
      for (int u = 0; u < nj; u++) acc = _mm512_add_pd(acc, _mm512_mul_pd(_mm512_cvtps_pd(cp[u]), _mm512_cvtps_pd(cd[u])));
    }
  } else
    for (int64_t j0 = 0; j0 <= i0; j0 += 8) {
      int nj = i0 + 1 - j0 < 8 ? (int)(i0 + 1 - j0) : 8;
      cols8(pr, ld, j0, nj, cp), cols8(dr, ld, j0, nj, cd);
      for (int u = 0; u < nj; u++) acc = _mm512_add_pd(acc, _mm512_mul_pd(_mm512_cvtps_pd(cp[u]), _mm512_cvtps_pd(cd[u])));
    }
  double s[8];
  _mm512_storeu_pd(s, acc);
  for (int r = 0; r < nr; r++) {
    for (int64_t j = i0 + 1; j <= i0 + r; j++) s[r] += (double)p[r * T + j] * d[r * T + j];
    pdp[r] = s[r];
  }
}

/* ni query rows of dP from i0 (NI: ni as a constant where it is 8, so the chains unroll without tests). */
static inline __attribute__((always_inline, target(AVX512))) void attb_dp_rows(const float *vt, const float *dz,
                                                                                int64_t ld, int64_t hd, int64_t i0,
                                                                                int ni, const int NI, __mmask16 keys,
                                                                                int64_t T, float *dP) {
  __m512 acc[8];
  for (int u = 0; u < 8; u++) acc[u] = _mm512_setzero_ps();
  for (int64_t c = 0; c < hd; c++) {
    __m512 a = _mm512_load_ps(vt + c * 16);
    #pragma GCC unroll 8
    for (int u = 0; u < 8; u++)
      if (u < (NI ? NI : ni)) acc[u] = _mm512_fmadd_ps(a, _mm512_set1_ps(dz[(i0 + u) * ld + c]), acc[u]);
  }
  for (int u = 0; u < ni; u++) _mm512_mask_storeu_ps(dP + (i0 + u) * T, keys, acc[u]);
}

/* Attention backward's dP = dz v^T for one item of T <= 16 keys: v's rows copied into a block of sixteen (the rows
 * past T zero) and turned into sixteen-key columns by 8x8 transposes, then each query's row is one register, the
 * keys in its lanes, summed over c = 0..hd-1 in order from +0 (the strided gemm's tile with v's rows as its rows and
 * dz's as its tokens: the same fma chains); eight queries at a time so the chains overlap. */
__attribute__((target(AVX512))) static void attb_dp16_avx512(const float *v, const float *dz, int64_t ld, int64_t hd,
                                                              int64_t T, float *dP) {
  float rows[16 * 256] __attribute__((aligned(64))), vt[256 * 16] __attribute__((aligned(64)));
  for (int64_t j = 0; j < 16; j++)
    if (j < T) memcpy(rows + j * hd, v + j * ld, (size_t)hd * sizeof(float));
    else memset(rows + j * hd, 0, (size_t)hd * sizeof(float));
  __m256 lo[8], hi[8];
  for (int64_t c0 = 0; c0 < hd; c0 += 8) {
    cols8(rows, hd, c0, 8, lo), cols8(rows + 8 * hd, hd, c0, 8, hi);
    for (int u = 0; u < 8; u++) _mm256_store_ps(vt + (c0 + u) * 16, lo[u]), _mm256_store_ps(vt + (c0 + u) * 16 + 8, hi[u]);
  }
  const __mmask16 keys = cpu_lanes16(T);
  for (int64_t i0 = 0; i0 < T; i0 += 8) {
    int ni = T - i0 < 8 ? (int)(T - i0) : 8;
    if (ni == 8) attb_dp_rows(vt, dz, ld, hd, i0, 8, 8, keys, T, dP);
    else attb_dp_rows(vt, dz, ld, hd, i0, ni, 0, keys, T, dP);
  }
}

/* One output row of attention backward's dq, dk or dv: out[0..hd) = sum over c in [c0, c1), in order from +0, of
 * a[c * ld + ..] times s[c * ss], the dims in lanes (the gemm kernel's chain for that output); NV: the chunk's
 * sixteen-float vectors as a constant where it is 8. */
static inline __attribute__((always_inline, target(AVX512))) void attb_chunk(const float *a, int64_t ld, int nv,
                                                                              const int NV, const float *s, int64_t ss,
                                                                              int64_t c0, int64_t c1, float *out) {
  __m512 acc[8];
  for (int u = 0; u < 8; u++) acc[u] = _mm512_setzero_ps();
  for (int64_t c = c0; c < c1; c++) {
    __m512 b = _mm512_set1_ps(s[c * ss]);
    const float *ac = a + c * ld;
    #pragma GCC unroll 8
    for (int u = 0; u < 8; u++)
      if (u < (NV ? NV : nv)) acc[u] = _mm512_fmadd_ps(_mm512_loadu_ps(ac + 16 * u), b, acc[u]);
  }
  for (int u = 0; u < nv; u++) _mm512_storeu_ps(out + 16 * u, acc[u]);
}
static inline __attribute__((always_inline, target(AVX512))) void attb_row(const float *a, int64_t ld, int64_t hd,
                                                                            const float *s, int64_t ss, int64_t c0,
                                                                            int64_t c1, float *out) {
  for (int64_t d0 = 0; d0 < hd; d0 += 128) {
    int nv = hd - d0 < 128 ? (int)((hd - d0) / 16) : 8;
    if (nv == 8) attb_chunk(a + d0, ld, 8, 8, s, ss, c0, c1, out + d0);
    else attb_chunk(a + d0, ld, nv, 0, s, ss, c0, c1, out + d0);
  }
}

/* dq_t = sum over keys c < c1(t) of dS[t][c] k_c, dk_j = sum over queries i >= c0(j) of dS[i][j] q_i, dv_j likewise
 * with P and dz: the ranges the gemm's causal modes give a token group of gnt (B_LOWER ends at the group's end,
 * B_UPPER starts at its start), so the terms, and the bits, of cpu_train_attn.c's gemm calls. */
__attribute__((target(AVX512))) static void attb_grads16_avx512(const float *q, const float *k, const float *dz,
                                                                 const float *P, const float *dS, int64_t ld,
                                                                 int64_t hd, int64_t T, int gnt, float *dq, float *dk,
                                                                 float *dv) {
  for (int64_t t = 0; t < T; t++) {
    int64_t g0 = t - t % gnt, g1 = g0 + gnt < T ? g0 + gnt : T;
    attb_row(k, ld, hd, dS + t * T, 1, 0, g1, dq + t * ld);
    attb_row(q, ld, hd, dS + t, T, g0, T, dk + t * ld);
    attb_row(dz, ld, hd, P + t, T, g0, T, dv + t * ld);
  }
}

__attribute__((target(AVX512))) static void pv_gemm_row_avx512(const float *v, int64_t ld, int64_t hd, const float *p,
                                                           int64_t n, float *out) {
  attb_row(v, ld, hd, p, 1, 0, n, out);
}

/* LayerNorm forward of sixteen rows: the stats by norm_bwd16's first passes (the forward loop's double sums, see
 * cpu_ops.c's layer_norm_tile; kept in stats when asked), then y = (x - m) * r * w + b sixteen floats at a time, the
 * scalar loop's float operations in its order (w absent: times 1, b absent: plus 0, as there). */
__attribute__((target(AVX512))) static void layer_norm16_avx512(const float *x, int64_t ld, const float *w,
                                                                 const float *b, int64_t d, float eps, float *y,
                                                                 float *stats) {
  float own[32], *st = stats ? stats : own;
  norm_bwd16_avx512(x, x, ld, NULL, d, 0, eps, st, 0, NULL); /* g is not read without dx */
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (int i = 0; i < 16; i++) {
    const float *xi = x + i * ld;
    float *yi = y + i * ld;
    const __m512 mi = _mm512_set1_ps(st[2 * i]), ri = _mm512_set1_ps(st[2 * i + 1]);
    for (int64_t j = 0; j < d; j += 16) {
      __mmask16 k = cpu_lanes16(d - j);
      __m512 wv = w ? _mm512_maskz_loadu_ps(k, w + j) : one, bv = b ? _mm512_maskz_loadu_ps(k, b + j) : zero;
      __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, xi + j), mi), ri), wv);
      _mm512_mask_storeu_ps(yi + j, k, _mm512_add_ps(t, bv));
    }
  }
}

/* norm_bwd_cols's loop, sixteen columns per register and up to four registers of dw and of db held over all the
 * rows: per column the same mul, mul and add per row, in row order. */
__attribute__((target(AVX512))) static void norm_cols_avx512(const float *x, const float *dy, const float *stats,
                                                             int64_t n, int64_t d, int64_t lo, int64_t hi, float *dw,
                                                             float *db) {
  for (int64_t j0 = lo; j0 < hi; j0 += 64) {
    __m512 aw[4], ab[4];
    __mmask16 km[4];
    int nv = (int)((hi - j0 < 64 ? hi - j0 : 64) + 15) / 16;
    for (int v = 0; v < nv; v++) {
      int64_t left = hi - j0 - 16 * v;
      km[v] = cpu_lanes16(left);
      aw[v] = dw ? _mm512_maskz_loadu_ps(km[v], dw + j0 + 16 * v) : _mm512_setzero_ps();
      ab[v] = db ? _mm512_maskz_loadu_ps(km[v], db + j0 + 16 * v) : _mm512_setzero_ps();
    }
    for (int64_t t = 0; t < n; t++) {
      const float *xt = x + t * d + j0, *gt = dy + t * d + j0;
      __m512 m = _mm512_set1_ps(stats[2 * t]), r = _mm512_set1_ps(stats[2 * t + 1]);
      for (int v = 0; v < nv; v++) {
        __m512 g = _mm512_maskz_loadu_ps(km[v], gt + 16 * v);
        if (dw) {
          __m512 xh = _mm512_mul_ps(_mm512_mul_ps(g, _mm512_sub_ps(_mm512_maskz_loadu_ps(km[v], xt + 16 * v), m)), r);
          aw[v] = _mm512_add_ps(aw[v], xh);
        }
        if (db) ab[v] = _mm512_add_ps(ab[v], g);
      }
    }
    for (int v = 0; v < nv; v++) {
      if (dw) _mm512_mask_storeu_ps(dw + j0 + 16 * v, km[v], aw[v]);
      if (db) _mm512_mask_storeu_ps(db + j0 + 16 * v, km[v], ab[v]);
    }
  }
}

/* upd_range's loop (cpu_train_ops.c), sixteen elements per register: each element's multiplies, adds, divides and
 * square root in the loop's order, none fused (the loop is ISO C, so no fma there either). */
__attribute__((target(AVX512))) static void optim_upd_avx512(float *w, const float *g, float *m1, float *m2, int64_t lo,
                                                             int64_t hi, const icl_optim_args *a) {
  const __m512 gs = _mm512_set1_ps(a->gscale), b1 = _mm512_set1_ps(a->b1), b2 = _mm512_set1_ps(a->b2);
  const __m512 nb1 = _mm512_set1_ps(1.0f - a->b1), nb2 = _mm512_set1_ps(1.0f - a->b2), c1 = _mm512_set1_ps(a->c1);
  const __m512 c2 = _mm512_set1_ps(a->c2), eps = _mm512_set1_ps(a->eps), lr = _mm512_set1_ps(a->lr);
  const __m512 wd = _mm512_set1_ps(a->wd), mom = _mm512_set1_ps(a->mom);
  for (int64_t i = lo; i < hi; i += 16) {
    __mmask16 k = cpu_lanes16(hi - i);
    __m512 gv = _mm512_maskz_loadu_ps(k, g + i), wv = _mm512_maskz_loadu_ps(k, w + i);
    __m512 m = _mm512_maskz_loadu_ps(k, m1 + i), step;
    if (a->adam) {
      __m512 gg = _mm512_mul_ps(gv, gs), v = _mm512_maskz_loadu_ps(k, m2 + i);
      m = _mm512_add_ps(_mm512_mul_ps(b1, m), _mm512_mul_ps(nb1, gg));
      v = _mm512_add_ps(_mm512_mul_ps(b2, v), _mm512_mul_ps(_mm512_mul_ps(nb2, gg), gg));
      _mm512_mask_storeu_ps(m2 + i, k, v);
      __m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_div_ps(v, c2)), eps);
      step = _mm512_add_ps(_mm512_div_ps(_mm512_div_ps(m, c1), den), _mm512_mul_ps(wd, wv));
    } else {
      m = _mm512_add_ps(_mm512_mul_ps(mom, m), _mm512_mul_ps(gv, gs));
      step = _mm512_add_ps(m, _mm512_mul_ps(wd, wv));
    }
    _mm512_mask_storeu_ps(m1 + i, k, m);
    _mm512_mask_storeu_ps(w + i, k, _mm512_sub_ps(wv, _mm512_mul_ps(lr, step)));
  }
}

void cpu_kernels_train_avx512(cpu_kernels *k) {
  k->optim_upd = optim_upd_avx512;
  k->norm_cols = norm_cols_avx512;
  k->norm_bwd16 = norm_bwd16_avx512;
  k->layer_norm16 = layer_norm16_avx512;
  k->row_dots8 = row_dots8_avx512;
  k->attb_dp16 = attb_dp16_avx512;
  k->attb_grads16 = attb_grads16_avx512;
  k->pv_gemm_row = pv_gemm_row_avx512;
}
#else
typedef int cpu_train_x86_empty; /* ISO C: a translation unit has a declaration */
#endif
