/* The int8 gemm of FAST precision (many tokens): weight tiles of CPU_QTILE_ROWS rows are repacked
 * once into unsigned codes with a multiplier and an offset per row and 16-element half
 * (w = a*u + c, the decoding of cpu_qdot_x86.h), laid out so one 256-bit load holds four
 * consecutive codes of eight rows; each load meets a four-byte broadcast of one token's cpu_q8
 * codes. Integer sums over a 32-group (or a 16-half for types with 16-element scales) are then
 * scaled into f32 accumulators. Included by cpu_kernels_x86.c after cpu_qdot_x86.h with the same
 * QD_TARGET/QD_SFX and
 *   QD_DOTACC(acc, u, s) -> acc + the 8 int32 sums of u8 u times int8 s over 4-byte groups
 *   QG_NT                   tokens per kernel call (what the register file holds)
 * Tile layout per 32-group (CPU_QGROUP_BYTES): codes [8 quads][16 rows][4 bytes], then floats
 * a[2 halves][16 rows] and c[2 halves][16 rows]. */

#define QD_ATTR static inline __attribute__((always_inline, target(QD_TARGET)))

/* u[r] (8 dwords of row r) to u[j] (dword j of rows 0..7): unpack 32- and 64-bit, then swap 128-bit lanes. */
QD_ATTR void QD_FN(qg_t8_)(__m256i u[8]) {
  __m256i t[8], v[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_epi32(u[2 * i], u[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(u[2 * i], u[2 * i + 1]);
  }
  for (int h = 0; h < 2; h++) { /* v[4h + j]: per lane L, rows 4h..4h+3 of column 4L + j */
    v[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    v[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    v[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    v[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int j = 0; j < 4; j++) {
    u[j] = _mm256_permute2x128_si256(v[j], v[4 + j], 0x20);
    u[4 + j] = _mm256_permute2x128_si256(v[j], v[4 + j], 0x31);
  }
}

/* Whether T's multiplier changes every 16 elements (Q2_K, Q3_K, Q6_K: scaled per half), and the k of a symmetric
 * type (w = a*(u - k): qd_off_k_'s for the 32-block ones, and Q3_K's 4 and Q6_K's 32 of qk_scales_), else 0. */
QD_ATTR int QD_FN(qg_halves_)(const int T) { return T == ICL_TYPE_Q2_K || T == ICL_TYPE_Q3_K || T == ICL_TYPE_Q6_K; }
QD_ATTR int QD_FN(qg_koff_)(const int T) {
  if (QD_FN(qd_is32_)(T)) return QD_FN(qd_asym_)(T) ? 0 : -(int)QD_FN(qd_off_k_)(T);
  return T == ICL_TYPE_Q3_K ? 4 : T == ICL_TYPE_Q6_K ? 32 : 0;
}

/* Stores the codes u[r] of rows r0..r0+7 of group tg (transposed to [quad][row]) with the multipliers
 * a0, a1 and offsets c0, c1 of their halves; only what qg_span_ reads: the second half's only where HALVES, the
 * offsets only where !KOFF (skipping the rest saves a tile's pack one or three of its twelve lines). */
QD_ATTR void QD_FN(qg_put8_)(const int HALVES, const int KOFF, uint8_t *tg, int r0, __m256i u[8], const float *a0,
                             const float *a1, const float *c0, const float *c1) {
  QD_FN(qg_t8_)(u);
  for (int j = 0; j < 8; j++) _mm256_store_si256((__m256i *)(tg + j * 64 + r0 * 4), u[j]);
  float *fa = (float *)(tg + 512);
  _mm256_store_ps(fa + r0, _mm256_loadu_ps(a0));
  if (HALVES) _mm256_store_ps(fa + 16 + r0, _mm256_loadu_ps(a1));
  if (!KOFF) _mm256_store_ps(fa + 32 + r0, _mm256_loadu_ps(c0));
  if (!KOFF && HALVES) _mm256_store_ps(fa + 48 + r0, _mm256_loadu_ps(c1));
}

/* Repacks rows [0, nr) (wrb bytes apart) of K columns into one tile, a whole 32-group (both eight-row halves)
 * at a time, so each line of the tile is written once while it is in L1; rows past nr are zero. The decoding
 * is cpu_qdot_x86.h's (w = a*u + c). */
QD_ATTR void QD_FN(qg_pack_body_)(const int T, const int HALVES, const int KOFF, const uint8_t *w, size_t wrb, int nr,
                                  int64_t K, uint8_t *tile) {
  const int64_t G = K / 32;
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  /* the decode below jumps a row's length between rows: without this the loads wait on memory one at a time */
  for (size_t o = 0; o < (size_t)nr * wrb; o += 64) _mm_prefetch((const char *)w + o, _MM_HINT_T0);
  if (QD_FN(qd_is32_)(T)) {
    for (int64_t g = 0; g < G; g++) {
      for (int r0 = 0; r0 < CPU_QTILE_ROWS; r0 += 8) {
        __m256i u[8];
        float a[8] = {0}, c[8] = {0};
        for (int r = 0; r < 8; r++)
          u[r] = r0 + r < nr ? QD_FN(qd_codes32_)(T, w + (size_t)(r0 + r) * wrb + (size_t)g * bb, &a[r], &c[r])
                             : _mm256_setzero_si256();
        QD_FN(qg_put8_)(HALVES, KOFF, tile + (size_t)g * CPU_QGROUP_BYTES, r0, u, a, a, c, c);
      }
    }
    return;
  }
  for (int64_t sb = 0; sb < G / 8; sb++) {
    float a[16][CPU_QTILE_ROWS] = {{0}}, b[16][CPU_QTILE_ROWS] = {{0}}; /* [half of the block][row] */
    for (int r = 0; r < nr; r++) {
      float as[16], bs[16];
      QD_FN(qk_scales_)(T, w + (size_t)r * wrb + (size_t)sb * bb, as, bs);
      for (int j = 0; j < 16; j++) a[j][r] = as[j], b[j][r] = -bs[j];
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
      for (int r0 = 0; r0 < CPU_QTILE_ROWS; r0 += 8) {
        __m256i u[8];
        for (int r = 0; r < 8; r++)
          u[r] = r0 + r < nr ? QD_FN(qk_codes_)(T, w + (size_t)(r0 + r) * wrb + (size_t)sb * bb, g)
                             : _mm256_setzero_si256();
        QD_FN(qg_put8_)(HALVES, KOFF, tile + (size_t)(8 * sb + g) * CPU_QGROUP_BYTES, r0, u, a[2 * g] + r0,
                        a[2 * g + 1] + r0, b[2 * g] + r0, b[2 * g + 1] + r0);
      }
    }
  }
}

/* Quads [J0, J0 + NJ) of group tg into integer sums s, then scaled by half h's multipliers into f (constant J0,
 * NJ, h: fully unrolled, so s and f stay in registers). KOFF > 0: a symmetric type (w = a*(u - KOFF)), whose
 * offset enters exactly as the integer -KOFF*sum(q) the sums start from; 0: the offset term c*d*sum(q) in f32. */
QD_ATTR void QD_FN(qg_span_)(const uint8_t *tg, const cpu_q8 *xg, int64_t xs, const int NT, const int J0, const int NJ,
                             const int h, const int HALVES, const int KOFF, __m256 f[QG_NT][2]) {
  __m256i s[QG_NT][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    const cpu_q8 *xb = xg + t * xs;
    s[t][0] = s[t][1] =
        KOFF ? _mm256_set1_epi32(-KOFF * (HALVES ? xb->qs[h] : xb->qs[0] + xb->qs[1])) : _mm256_setzero_si256();
  }
#pragma GCC unroll 8
  for (int j = J0; j < J0 + NJ; j++) {
    __m256i w0 = _mm256_load_si256((const __m256i *)(tg + j * 64));
    __m256i w1 = _mm256_load_si256((const __m256i *)(tg + j * 64 + 32));
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      int32_t q4;
      memcpy(&q4, xg[t * xs].q + 4 * j, 4);
      __m256i xb = _mm256_set1_epi32(q4);
      s[t][0] = QD_DOTACC(s[t][0], w0, xb);
      s[t][1] = QD_DOTACC(s[t][1], w1, xb);
    }
  }
  const float *fa = (const float *)(tg + 512);
#pragma GCC unroll 2
  for (int v = 0; v < 2; v++) {
    __m256 av = _mm256_load_ps(fa + 16 * h + 8 * v), cv = _mm256_load_ps(fa + 32 + 16 * h + 8 * v);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      const cpu_q8 *xb = xg + t * xs;
      f[t][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][v]), _mm256_mul_ps(av, _mm256_set1_ps(xb->d)), f[t][v]);
      if (!KOFF) f[t][v] = _mm256_fmadd_ps(cv, _mm256_set1_ps(HALVES ? xb->h[h] : xb->s), f[t][v]);
    }
  }
}

/* One tile times NT tokens. HALVES: the multiplier changes every 16 elements (Q2_K, Q3_K, Q6_K),
 * so the integer sums are scaled per half; otherwise once per 32-group. KOFF: see qg_span_. */
QD_ATTR void QD_FN(qg_body_)(const int HALVES, const int KOFF, const uint8_t *tile, int64_t G, const cpu_q8 *x,
                             int64_t xs, const int NT, float *y, int64_t ldy, int nr) {
  __m256 f[QG_NT][2];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) f[t][0] = f[t][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; g++) {
    const uint8_t *tg = tile + (size_t)g * CPU_QGROUP_BYTES;
    if (HALVES) {
      QD_FN(qg_span_)(tg, x + g, xs, NT, 0, 4, 0, 1, KOFF, f);
      QD_FN(qg_span_)(tg, x + g, xs, NT, 4, 4, 1, 1, KOFF, f);
    } else {
      QD_FN(qg_span_)(tg, x + g, xs, NT, 0, 8, 0, 0, KOFF, f);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    float *yt = y + t * ldy;
    if (nr >= 16) {
      _mm256_storeu_ps(yt, f[t][0]);
      _mm256_storeu_ps(yt + 8, f[t][1]);
    } else {
      float tmp[16];
      _mm256_storeu_ps(tmp, f[t][0]);
      _mm256_storeu_ps(tmp + 8, f[t][1]);
      memcpy(yt, tmp, (size_t)nr * sizeof(float));
    }
  }
}

#define QG_DEFINE(tname, T)                                                                                    \
  __attribute__((target(QD_TARGET))) static void QD_FN(qg_pack_##tname##_)(const uint8_t *w, size_t wrb,       \
                                                                            int nr, int64_t K, uint8_t *tile) { \
    QD_FN(qg_pack_body_)(T, QD_FN(qg_halves_)(T), QD_FN(qg_koff_)(T), w, wrb, nr, K, tile);                   \
  }                                                                                                            \
  __attribute__((target(QD_TARGET))) static void QD_FN(qgemm_##tname##_)(const uint8_t *tile, int64_t G,       \
                                                                          const cpu_q8 *x, int64_t xs, int nt, \
                                                                          float *y, int64_t ldy, int nr) {     \
    const int H = QD_FN(qg_halves_)(T), KO = QD_FN(qg_koff_)(T);                                               \
    switch (nt) {                                                                                              \
    case 1: QD_FN(qg_body_)(H, KO, tile, G, x, xs, 1, y, ldy, nr); break;                                      \
    case 2: QD_FN(qg_body_)(H, KO, tile, G, x, xs, 2, y, ldy, nr); break;                                      \
    case 3: QD_FN(qg_body_)(H, KO, tile, G, x, xs, 3, y, ldy, nr); break;                                      \
    case 4: QD_FN(qg_body_)(H, KO, tile, G, x, xs, QG_NT < 4 ? QG_NT : 4, y, ldy, nr); break;                  \
    case 5: QD_FN(qg_body_)(H, KO, tile, G, x, xs, QG_NT < 5 ? QG_NT : 5, y, ldy, nr); break;                  \
    default: QD_FN(qg_body_)(H, KO, tile, G, x, xs, QG_NT, y, ldy, nr); break;                                 \
    }                                                                                                          \
  }

QG_DEFINE(q4_0, ICL_TYPE_Q4_0)
QG_DEFINE(q4_1, ICL_TYPE_Q4_1)
QG_DEFINE(q5_0, ICL_TYPE_Q5_0)
QG_DEFINE(q5_1, ICL_TYPE_Q5_1)
QG_DEFINE(q8_0, ICL_TYPE_Q8_0)
QG_DEFINE(q2_k, ICL_TYPE_Q2_K)
QG_DEFINE(q3_k, ICL_TYPE_Q3_K)
QG_DEFINE(q4_k, ICL_TYPE_Q4_K)
QG_DEFINE(q5_k, ICL_TYPE_Q5_K)
QG_DEFINE(q6_k, ICL_TYPE_Q6_K)
#undef QG_DEFINE

/* Installs the int8 gemm; Q8_0 only where the dot does not saturate (QG_Q8_0). */
static void QD_FN(qg_install_)(cpu_kernels *k) {
  k->qgemm_nt = QG_NT;
#define QG_SET(tname, T)                                                                                       \
  k->qpack[T] = QD_FN(qg_pack_##tname##_);                                                                     \
  k->qgemm[T] = QD_FN(qgemm_##tname##_);
  QG_SET(q4_0, ICL_TYPE_Q4_0)
  QG_SET(q4_1, ICL_TYPE_Q4_1)
  QG_SET(q5_0, ICL_TYPE_Q5_0)
  QG_SET(q5_1, ICL_TYPE_Q5_1)
  QG_SET(q2_k, ICL_TYPE_Q2_K)
  QG_SET(q3_k, ICL_TYPE_Q3_K)
  QG_SET(q4_k, ICL_TYPE_Q4_K)
  QG_SET(q5_k, ICL_TYPE_Q5_K)
  QG_SET(q6_k, ICL_TYPE_Q6_K)
  if (QG_Q8_0) {
    QG_SET(q8_0, ICL_TYPE_Q8_0)
  }
#undef QG_SET
}

#undef QD_ATTR
