/* EXACT precision's repacked weights (AVX-512 and AVX2): the rows of a quantized weight, CPU_TILE_ROWS at a time, are
 * stored once per backend column-major in groups of 32 columns, so the f32 tile kernels get their [K][32] tile
 * by decoding 16 rows per instruction (no transpose), and few-token matmuls multiply straight from the codes.
 * Decoding is cpu_qdot_x86.h's (w = fma(u, a, c) with the same a and c, from the same functions), and every
 * (row, token) sees col32_avx512's fma sequence, so results are bit-identical to dequantizing the rows.
 * Included by cpu_kernels_x86.c after cpu_qdot_x86.h with the same QD_TARGET/QD_SFX and XW_LANES: 16 (AVX-512,
 * after col32_avx512/cpu_store32_avx512; also a kernel for one token on several tiles) or 8 (AVX2, gemm16_avx2's chains).
 * Group layout (cpu_xw_group_bytes): codes, then scales a[hs][32] and c[hs][32] (hs = 2 where scales cover 16
 * elements: element j uses half j/16; no c where it is a * cpu_xw_cfactor, computed here as the decoder does; f16
 * where cpu_xw_f16, else f32). Codes of 4-bit types: byte 32*(j/2) + r holds column j of row r in its low (j even)
 * or high (j odd) nibble; of the other types: byte 32*j + r. */

#define QD_ATTR static inline __attribute__((always_inline, target(QD_TARGET)))

/* Stores scale i of group grp (xw_load16_/xw_load8_ read it back): f16 where the type's scales are the file's
 * f16 values (exact), else f32. */
QD_ATTR void QD_FN(xw_put_scale_)(const int T, uint8_t *grp, int i, float v) {
  uint8_t *f = grp + cpu_xw_code_bytes(T);
  if (cpu_xw_f16(T)) {
    uint16_t h = _cvtss_sh(v, 0);
    memcpy(f + 2 * i, &h, 2);
  } else {
    memcpy(f + 4 * i, &v, 4);
  }
}

/* Stores the 32 codes u of row r, group grp, with the multipliers and offsets of its two halves. */
QD_ATTR void QD_FN(xw_put_)(const int T, uint8_t *grp, int r, __m256i u, float a0, float c0, float a1, float c1) {
  const int nib = cpu_xw_nibbles(T), hs = cpu_xw_halves(T);
  uint8_t ub[32];
  _mm256_storeu_si256((__m256i *)ub, u);
  if (nib)
    for (int j = 0; j < 32; j += 2) grp[32 * (j / 2) + r] = (uint8_t)(ub[j] | ub[j + 1] << 4);
  else
    for (int j = 0; j < 32; j++) grp[32 * j + r] = ub[j];
  QD_FN(xw_put_scale_)(T, grp, r, a0);
  if (hs == 2) QD_FN(xw_put_scale_)(T, grp, 32 + r, a1);
  if (cpu_xw_cfactor(T) == 0.0f) { /* else c = a * cfactor, as the decoder computed it */
    QD_FN(xw_put_scale_)(T, grp, hs * 32 + r, c0);
    if (hs == 2) QD_FN(xw_put_scale_)(T, grp, hs * 32 + 32 + r, c1);
  }
}

/* Repacks rows [0, nr) (wrb bytes apart) of K columns into K/32 groups; rows past nr decode to 0. */
QD_ATTR void QD_FN(xw_pack_body_)(const int T, const uint8_t *w, size_t wrb, int nr, int64_t K, uint8_t *tile) {
  const size_t gb = cpu_xw_group_bytes(T), bb = QD_FN(qd_block_bytes_)(T);
  memset(tile, 0, (size_t)(K / 32) * gb);
  for (int r = 0; r < nr; r++) {
    const uint8_t *row = w + (size_t)r * wrb;
    if (QD_FN(qd_is32_)(T)) {
      for (int64_t g = 0; g < K / 32; g++) {
        float d, c;
        __m256i u = QD_FN(qd_codes32_)(T, row + (size_t)g * bb, &d, &c);
        QD_FN(xw_put_)(T, tile + (size_t)g * gb, r, u, d, c, d, c);
      }
      continue;
    }
    for (int64_t sb = 0; sb < K / 256; sb++) {
      const uint8_t *blk = row + (size_t)sb * bb;
      float a[16], b[16];
      QD_FN(qk_scales_)(T, blk, a, b);
#pragma GCC unroll 8
      for (int g = 0; g < 8; g++)
        QD_FN(xw_put_)(T, tile + (size_t)(sb * 8 + g) * gb, r, QD_FN(qk_codes_)(T, blk, g), a[2 * g], -b[2 * g],
                       a[2 * g + 1], -b[2 * g + 1]);
    }
  }
}

#if XW_LANES == 16
/* Column j of group grp, decoded: rows 0-15 in w[0], 16-31 in w[1]. odd = j & 1, a constant, so the nibble
 * choice compiles away while the column loops stay rolled (unrolled 32 times they made this file take minutes to
 * compile under the sanitizers). */
QD_ATTR void QD_FN(xw_col_)(const int T, const uint8_t *grp, int j, const int odd, __m512 a[2], __m512 c[2],
                            __m512 w[2]) {
  const int nib = cpu_xw_nibbles(T);
  const uint8_t *p = grp + 32 * (nib ? j / 2 : j);
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    __m512i u = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(p + 16 * h)));
    if (nib) u = odd ? _mm512_srli_epi32(u, 4) : _mm512_and_si512(u, _mm512_set1_epi32(0xF));
    w[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u), a[h], c[h]);
  }
}

/* Scales i..i+15 of group grp as f32. */
QD_ATTR __m512 QD_FN(xw_load16_)(const int T, const uint8_t *grp, int i) {
  const uint8_t *f = grp + cpu_xw_code_bytes(T);
  if (cpu_xw_f16(T)) return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(f + 2 * i)));
  return _mm512_load_ps((const float *)f + i);
}

/* The multipliers and offsets of half hh of group grp (hh = 0 for types with one per 32 columns). */
QD_ATTR void QD_FN(xw_scales_)(const int T, const uint8_t *grp, int hh, __m512 a[2], __m512 c[2]) {
  const float cf = cpu_xw_cfactor(T);
  for (int h = 0; h < 2; h++) {
    a[h] = QD_FN(xw_load16_)(T, grp, hh * 32 + 16 * h);
    c[h] = cf != 0.0f ? _mm512_mul_ps(a[h], _mm512_set1_ps(cf)) : QD_FN(xw_load16_)(T, grp, cpu_xw_halves(T) * 32 + hh * 32 + 16 * h);
  }
}

/* pack_tile's layout wp[k*32 + r] from a repacked tile. */
QD_ATTR void QD_FN(xw_unpack_body_)(const int T, const uint8_t *tile, int64_t K, float *wp) {
  const size_t gb = cpu_xw_group_bytes(T);
  const int hs = cpu_xw_halves(T);
  for (int64_t g = 0; g < K / 32; g++, wp += 32 * CPU_TILE_ROWS) {
    const uint8_t *grp = tile + (size_t)g * gb;
    __m512 a[2], c[2], w[2];
    QD_FN(xw_scales_)(T, grp, 0, a, c);
    for (int j = 0; j < 32; j += 2) {
      if (hs == 2 && j == 16) QD_FN(xw_scales_)(T, grp, 1, a, c);
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++) {
        QD_FN(xw_col_)(T, grp, j + o, o, a, c, w);
        _mm512_store_ps(wp + (j + o) * CPU_TILE_ROWS, w[0]);
        _mm512_store_ps(wp + (j + o) * CPU_TILE_ROWS + 16, w[1]);
      }
    }
  }
}

/* gemm32_avx512 on a repacked tile: NT tokens of xp (packed with gemm_nt = 8). */
QD_ATTR void QD_FN(xw_gemm_body_)(const int T, const uint8_t *tile, int64_t K, const float *xp, const int NT,
                                  float *y, int64_t ldy, int nr) {
  const size_t gb = cpu_xw_group_bytes(T);
  const int hs = cpu_xw_halves(T);
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t g = 0; g < K / 32; g++, xp += 32 * 8) {
    const uint8_t *grp = tile + (size_t)g * gb;
    __m512 a[2], c[2], w[2];
    QD_FN(xw_scales_)(T, grp, 0, a, c);
    for (int j = 0; j < 32; j += 2) {
      if (hs == 2 && j == 16) QD_FN(xw_scales_)(T, grp, 1, a, c);
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++) {
        QD_FN(xw_col_)(T, grp, j + o, o, a, c, w);
        col32_avx512(w[0], w[1], xp + (j + o) * 8, NT, acc);
      }
    }
  }
  cpu_store32_avx512(acc, NT, y, ldy, nr);
}

/* One token times NTL repacked tiles (tile + i*tstride): 2*NTL independent fma chains instead of two, for decode,
 * where one tile's two chains wait on the fma latency, and NTL streams in flight. y[i] gets tile i's nr[i] rows.
 * x unpacked: column c's value is x[c] (xw_gemm_body_ reads it at xp[8c]; the same value, the same fmas). */
QD_ATTR void QD_FN(xw_gemmn_body_)(const int T, const int NTL, const uint8_t *tile, size_t tstride, int64_t K,
                                   const float *x, float *const *y, const int *nr) {
  const size_t gb = cpu_xw_group_bytes(T);
  const int hs = cpu_xw_halves(T);
  __m512 acc[CPU_XW_TILES][8][2];
#pragma GCC unroll 4
  for (int q = 0; q < NTL; q++) acc[q][0][0] = acc[q][0][1] = _mm512_setzero_ps();
  for (int64_t g = 0; g < K / 32; g++, x += 32) {
    const uint8_t *grp = tile + (size_t)g * gb;
    __m512 a[CPU_XW_TILES][2], c[CPU_XW_TILES][2], w[2];
#pragma GCC unroll 4
    for (int q = 0; q < NTL; q++) QD_FN(xw_scales_)(T, grp + q * tstride, 0, a[q], c[q]);
    for (int j = 0; j < 32; j += 2) {
      if (hs == 2 && j == 16)
#pragma GCC unroll 4
        for (int q = 0; q < NTL; q++) QD_FN(xw_scales_)(T, grp + q * tstride, 1, a[q], c[q]);
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++)
#pragma GCC unroll 4
        for (int q = 0; q < NTL; q++) {
          QD_FN(xw_col_)(T, grp + q * tstride, j + o, o, a[q], c[q], w);
          col32_avx512(w[0], w[1], x + j + o, 1, acc[q]);
        }
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < NTL; q++) cpu_store32_avx512(acc[q], 1, y[q], 0, nr[q]);
}

#else
/* AVX2: column j (odd = j & 1, a constant) of group grp, decoded for the 16 rows of half h (two ymm of 8 rows). */
QD_ATTR void QD_FN(xw_col8_)(const int T, const uint8_t *grp, int j, const int odd, int h, __m256 a[2], __m256 c[2],
                              __m256 w[2]) {
  const int nib = cpu_xw_nibbles(T);
  const uint8_t *p = grp + 32 * (nib ? j / 2 : j) + 16 * h;
#pragma GCC unroll 2
  for (int q = 0; q < 2; q++) {
    __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8 * q)));
    if (nib) u = odd ? _mm256_srli_epi32(u, 4) : _mm256_and_si256(u, _mm256_set1_epi32(0xF));
    w[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(u), a[q], c[q]);
  }
}

/* AVX2: scales i..i+7 of group grp as f32. */
QD_ATTR __m256 QD_FN(xw_load8_)(const int T, const uint8_t *grp, int i) {
  const uint8_t *f = grp + cpu_xw_code_bytes(T);
  if (cpu_xw_f16(T)) return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(f + 2 * i)));
  return _mm256_load_ps((const float *)f + i);
}

/* AVX2: the multipliers and offsets of the 16 rows of half h, for scale half hh. */
QD_ATTR void QD_FN(xw_scales8_)(const int T, const uint8_t *grp, int hh, int h, __m256 a[2], __m256 c[2]) {
  const float cf = cpu_xw_cfactor(T);
  for (int q = 0; q < 2; q++) {
    int i = hh * 32 + 16 * h + 8 * q;
    a[q] = QD_FN(xw_load8_)(T, grp, i);
    c[q] = cf != 0.0f ? _mm256_mul_ps(a[q], _mm256_set1_ps(cf)) : QD_FN(xw_load8_)(T, grp, cpu_xw_halves(T) * 32 + i);
  }
}

QD_ATTR void QD_FN(xw_unpack_body_)(const int T, const uint8_t *tile, int64_t K, float *wp) {
  const size_t gb = cpu_xw_group_bytes(T);
  const int hs = cpu_xw_halves(T);
  for (int64_t g = 0; g < K / 32; g++, wp += 32 * CPU_TILE_ROWS) {
    const uint8_t *grp = tile + (size_t)g * gb;
    for (int h = 0; h < 2; h++) {
      __m256 a[2], c[2], w[2];
      QD_FN(xw_scales8_)(T, grp, 0, h, a, c);
      for (int j = 0; j < 32; j += 2) {
        if (hs == 2 && j == 16) QD_FN(xw_scales8_)(T, grp, 1, h, a, c);
#pragma GCC unroll 2
        for (int o = 0; o < 2; o++) {
          QD_FN(xw_col8_)(T, grp, j + o, o, h, a, c, w);
          _mm256_store_ps(wp + (j + o) * CPU_TILE_ROWS + 16 * h, w[0]);
          _mm256_store_ps(wp + (j + o) * CPU_TILE_ROWS + 16 * h + 8, w[1]);
        }
      }
    }
  }
}

/* gemm16_avx2's chains (16 rows at a time) on a repacked tile; token t's column c at xp[c*XS + t] (XS = 6:
 * packed with gemm_nt; 1: one token as it lies, for xgemmn). */
QD_ATTR void QD_FN(xw_gemm_xs_body_)(const int T, const uint8_t *tile, int64_t K, const float *xp, const int NT,
                                     const int XS, float *y, int64_t ldy, int nr) {
  const size_t gb = cpu_xw_group_bytes(T);
  const int hs = cpu_xw_halves(T);
  for (int h = 0; h < 2 && 16 * h < nr; h++) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    const float *xc = xp;
    for (int64_t g = 0; g < K / 32; g++, xc += 32 * XS) {
      const uint8_t *grp = tile + (size_t)g * gb;
      __m256 a[2], c[2], w[2];
      QD_FN(xw_scales8_)(T, grp, 0, h, a, c);
      for (int j = 0; j < 32; j += 2) {
        if (hs == 2 && j == 16) QD_FN(xw_scales8_)(T, grp, 1, h, a, c);
#pragma GCC unroll 2
        for (int o = 0; o < 2; o++) {
          QD_FN(xw_col8_)(T, grp, j + o, o, h, a, c, w);
#pragma GCC unroll 4
          for (int t = 0; t < NT; t++) {
            __m256 b = _mm256_broadcast_ss(xc + (j + o) * XS + t);
            acc[t][0] = _mm256_fmadd_ps(w[0], b, acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(w[1], b, acc[t][1]);
          }
        }
      }
    }
    int n = nr - 16 * h < 16 ? nr - 16 * h : 16;
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      float tmp[16];
      _mm256_storeu_ps(tmp, acc[t][0]);
      _mm256_storeu_ps(tmp + 8, acc[t][1]);
      memcpy(y + t * ldy + 16 * h, tmp, (size_t)n * sizeof(float));
    }
  }
}

QD_ATTR void QD_FN(xw_gemm_body_)(const int T, const uint8_t *tile, int64_t K, const float *xp, const int NT,
                                  float *y, int64_t ldy, int nr) {
  QD_FN(xw_gemm_xs_body_)(T, tile, K, xp, NT, 6, y, ldy, nr);
}

#endif

#if XW_LANES == 16
#define XW_DEFINEN(tname, T)                                                                                      \
  __attribute__((target(QD_TARGET))) static void QD_FN(xw_gemmn_##tname##_)(                                     \
      const uint8_t *tile, size_t tstride, int64_t K, const float *x, float *const *y, const int *nr, int ntl) {  \
    switch (ntl) {                                                                                                \
    case 1: QD_FN(xw_gemmn_body_)(T, 1, tile, tstride, K, x, y, nr); break;                                       \
    case 2: QD_FN(xw_gemmn_body_)(T, 2, tile, tstride, K, x, y, nr); break;                                       \
    case 3: QD_FN(xw_gemmn_body_)(T, 3, tile, tstride, K, x, y, nr); break;                                       \
    default: QD_FN(xw_gemmn_body_)(T, CPU_XW_TILES, tile, tstride, K, x, y, nr); break;                           \
    }                                                                                                             \
  }
#define XW_SETN(k, tname, T) (k)->xgemmn[T] = QD_FN(xw_gemmn_##tname##_)
#else /* AVX2: tile by tile (the registers hold one tile's chains), on the unpacked token */
#define XW_DEFINEN(tname, T)                                                                                      \
  __attribute__((target(QD_TARGET))) static void QD_FN(xw_gemmn_##tname##_)(                                     \
      const uint8_t *tile, size_t tstride, int64_t K, const float *x, float *const *y, const int *nr, int ntl) {  \
    for (int q = 0; q < ntl; q++) QD_FN(xw_gemm_xs_body_)(T, tile + q * tstride, K, x, 1, 1, y[q], 0, nr[q]);     \
  }
#define XW_SETN(k, tname, T) (k)->xgemmn[T] = QD_FN(xw_gemmn_##tname##_)
#endif
#define XW_DEFINE(tname, T)                                                                                       \
  __attribute__((target(QD_TARGET))) static void QD_FN(xw_pack_##tname##_)(const uint8_t *w, size_t wrb, int nr, \
                                                                            int64_t K, uint8_t *tile) {          \
    QD_FN(xw_pack_body_)(T, w, wrb, nr, K, tile);                                                                 \
  }                                                                                                               \
  __attribute__((target(QD_TARGET))) static void QD_FN(xw_unpack_##tname##_)(const uint8_t *tile, int64_t K,      \
                                                                              float *wp) {                        \
    QD_FN(xw_unpack_body_)(T, tile, K, wp);                                                                       \
  }                                                                                                               \
  __attribute__((target(QD_TARGET))) static void QD_FN(xw_gemm_##tname##_)(                                      \
      const uint8_t *tile, int64_t K, const float *xp, int nt, float *y, int64_t ldy, int nr) {                   \
    switch (nt) {                                                                                                 \
    case 1: QD_FN(xw_gemm_body_)(T, tile, K, xp, 1, y, ldy, nr); break;                                           \
    case 2: QD_FN(xw_gemm_body_)(T, tile, K, xp, 2, y, ldy, nr); break;                                           \
    case 3: QD_FN(xw_gemm_body_)(T, tile, K, xp, 3, y, ldy, nr); break;                                           \
    default: QD_FN(xw_gemm_body_)(T, tile, K, xp, 4, y, ldy, nr); break; /* nt <= CPU_ROWTILE_TOKS */           \
    }                                                                                                             \
  }                                                                                                               \
  XW_DEFINEN(tname, T)
XW_DEFINE(q4_0, ICL_TYPE_Q4_0)
XW_DEFINE(q4_1, ICL_TYPE_Q4_1)
XW_DEFINE(q5_0, ICL_TYPE_Q5_0)
XW_DEFINE(q5_1, ICL_TYPE_Q5_1)
XW_DEFINE(q8_0, ICL_TYPE_Q8_0)
XW_DEFINE(q2_k, ICL_TYPE_Q2_K)
XW_DEFINE(q3_k, ICL_TYPE_Q3_K)
XW_DEFINE(q4_k, ICL_TYPE_Q4_K)
XW_DEFINE(q5_k, ICL_TYPE_Q5_K)
XW_DEFINE(q6_k, ICL_TYPE_Q6_K)
#undef XW_DEFINE

#define XW_INSTALL(k, tname, T)                     \
  do {                                              \
    (k)->xpack[T] = QD_FN(xw_pack_##tname##_);     \
    (k)->xunpack[T] = QD_FN(xw_unpack_##tname##_); \
    (k)->xgemm[T] = QD_FN(xw_gemm_##tname##_);     \
    XW_SETN(k, tname, T);                           \
  } while (0)

/* Installs this instruction set's repacked-weight kernels into k. */
static void QD_FN(xw_install_)(cpu_kernels *k) {
  XW_INSTALL(k, q4_0, ICL_TYPE_Q4_0);
  XW_INSTALL(k, q4_1, ICL_TYPE_Q4_1);
  XW_INSTALL(k, q5_0, ICL_TYPE_Q5_0);
  XW_INSTALL(k, q5_1, ICL_TYPE_Q5_1);
  XW_INSTALL(k, q8_0, ICL_TYPE_Q8_0);
  XW_INSTALL(k, q2_k, ICL_TYPE_Q2_K);
  XW_INSTALL(k, q3_k, ICL_TYPE_Q3_K);
  XW_INSTALL(k, q4_k, ICL_TYPE_Q4_K);
  XW_INSTALL(k, q5_k, ICL_TYPE_Q5_K);
  XW_INSTALL(k, q6_k, ICL_TYPE_Q6_K);
}
#undef XW_INSTALL
#undef XW_DEFINEN
#undef XW_SETN

#undef QD_ATTR
