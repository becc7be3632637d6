/* Integer dot products of 32-block weight rows with cpu_q8 activations, written once and
 * instantiated per instruction set: the file that includes this defines
 *   QD_TARGET  the target attribute string ("avx2,fma,f16c", ...)
 *   QD_SFX     a name suffix (avx2, avx512)
 *   QD_DOT(u, s)  -> __m256i of 8 int32 sums of u8 u times int8 s over 4-byte groups
 * and may define QD_MASK_BITS (AVX-512BW+VL: bit masks as mask registers).
 * Each weight block is unpacked to 32 unsigned codes once and reused for up to 4 tokens.
 * Symmetric types (Q4_0, Q5_0) fold their -8/-16 bias into a per-block term on the activation
 * sum (cpu_q8.s); Q8_0 uses |w| and sign(x, w) so its codes stay unsigned. K types decode
 * each 32-element group to unsigned codes with a multiplier and an offset per 16-element half
 * (the offset meets the activations' half sums cpu_q8.h). */

#define QD_CAT2(a, b) a##b
#define QD_CAT(a, b) QD_CAT2(a, b)
#define QD_FN(name) QD_CAT(name, QD_SFX)
#define QD_ATTR static inline __attribute__((always_inline, target(QD_TARGET)))

/* One 16-bit load (x86 is little-endian), not two byte loads and a shift. */
QD_ATTR float QD_FN(qd_f16_)(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

QD_ATTR float QD_FN(qd_hsum_)(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* 16 bytes of packed nibbles -> 32 codes: element j is the low nibble of byte j, j+16 the high. */
QD_ATTR __m256i QD_FN(qd_nibbles_)(const uint8_t *qs) {
  __m128i q = _mm_loadu_si128((const __m128i *)qs);
  __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* 32 bits -> 32 bytes that are 16 where bit j is set (the fifth bit of Q5 codes). */
QD_ATTR __m256i QD_FN(qd_bit16_)(const uint8_t *qh) {
  uint32_t h;
  memcpy(&h, qh, 4);
  const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* 16 codes of nibbles plus the fifth bits qh (bit j -> element j worth 16). AVX-512BW takes the bits as a mask
 * register: one masked add instead of a broadcast, shuffle, compare and two ands (Q5_0 decode was compute-bound). */
QD_ATTR __m256i QD_FN(qd_add_bit16_)(__m256i nib, const uint8_t *qh) {
#ifdef QD_MASK_BITS
  uint32_t h;
  memcpy(&h, qh, 4);
  return _mm256_mask_add_epi8(nib, (__mmask32)h, nib, _mm256_set1_epi8(16));
#else
  return _mm256_or_si256(nib, QD_FN(qd_bit16_)(qh));
#endif
}

/* Whether T is a 32-element block type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) rather than a 256-element K type. */
QD_ATTR int QD_FN(qd_is32_)(const int T) {
  return T == ICL_TYPE_Q4_0 || T == ICL_TYPE_Q4_1 || T == ICL_TYPE_Q5_0 || T == ICL_TYPE_Q5_1 || T == ICL_TYPE_Q8_0;
}

/* Bytes of one block of T (32 elements, or 256 for the K types). */
QD_ATTR size_t QD_FN(qd_block_bytes_)(const int T) {
  switch (T) {
  case ICL_TYPE_Q4_0: return 18;
  case ICL_TYPE_Q4_1: return 20;
  case ICL_TYPE_Q5_0: return 22;
  case ICL_TYPE_Q5_1: return 24;
  case ICL_TYPE_Q8_0: return 34;
  case ICL_TYPE_Q2_K: return 84;
  case ICL_TYPE_Q3_K: return 110;
  case ICL_TYPE_Q4_K: return 144;
  case ICL_TYPE_Q5_K: return 176;
  default: return 210; /* Q6_K */
  }
}

/* Offset of the 16 nibble bytes (Q4_0/Q4_1/Q5_0/Q5_1) and of the fifth-bit word (0: none) in a block of T. */
QD_ATTR int QD_FN(qd_nib_off_)(const int T) {
  return T == ICL_TYPE_Q4_0 ? 2 : T == ICL_TYPE_Q4_1 ? 4 : T == ICL_TYPE_Q5_0 ? 6 : 8;
}
QD_ATTR int QD_FN(qd_bit_off_)(const int T) { return T == ICL_TYPE_Q5_0 ? 2 : T == ICL_TYPE_Q5_1 ? 4 : 0; }

/* Whether a 32-block type stores its offset m (Q4_1, Q5_1) rather than centring its codes. */
QD_ATTR int QD_FN(qd_asym_)(const int T) { return T == ICL_TYPE_Q4_1 || T == ICL_TYPE_Q5_1; }

/* The offset per unit of d of a symmetric 32-block type's unsigned codes (Q8_0's shifted by 128). */
QD_ATTR float QD_FN(qd_off_k_)(const int T) {
  return T == ICL_TYPE_Q4_0 ? -8.0f : T == ICL_TYPE_Q5_0 ? -16.0f : -128.0f;
}

/* The offset c of a 32-block type's block with multiplier d (w = d*u + c; Q8_0's codes shifted by 128). */
QD_ATTR float QD_FN(qd_off32_)(const int T, const uint8_t *blk, float d) {
  return QD_FN(qd_asym_)(T) ? QD_FN(qd_f16_)(blk + 2) : QD_FN(qd_off_k_)(T) * d;
}

/* The 32 unsigned codes u of one block of a 32-block type, with w = d*u + *c (Q8_0's signed codes shifted by 128). */
QD_ATTR __m256i QD_FN(qd_codes32_)(const int T, const uint8_t *blk, float *d, float *c) {
  *d = QD_FN(qd_f16_)(blk);
  *c = QD_FN(qd_off32_)(T, blk, *d);
  if (T == ICL_TYPE_Q8_0)
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), _mm256_set1_epi8((char)0x80));
  __m256i u = QD_FN(qd_nibbles_)(blk + QD_FN(qd_nib_off_)(T));
  return QD_FN(qd_bit_off_)(T) ? QD_FN(qd_add_bit16_)(u, blk + QD_FN(qd_bit_off_)(T)) : u;
}

/* The body for weight type T (a constant after inlining) and NT tokens. */
QD_ATTR void QD_FN(qd_body_)(const int T, const uint8_t *w, const cpu_q8 *x, int64_t nb, const int NT, int64_t xs,
                             float *out) {
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  __m256 acc[4];
  float bias[4];
#pragma GCC unroll 4
  for (int i = 0; i < NT; i++) {
    acc[i] = _mm256_setzero_ps();
    bias[i] = 0.0f;
  }
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * bb;
    float d, mb = 0.0f;
    __m256i u, raw = _mm256_setzero_si256();
    if (T == ICL_TYPE_Q8_0) { /* |w| against sign(x, w): the shifted codes would not fit maddubs */
      d = QD_FN(qd_f16_)(blk);
      raw = _mm256_loadu_si256((const __m256i *)(blk + 2));
      u = _mm256_abs_epi8(raw);
    } else {
      u = QD_FN(qd_codes32_)(T, blk, &d, &mb);
    }
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++) {
      const cpu_q8 *xb = x + i * xs + b;
      __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);
      if (T == ICL_TYPE_Q8_0) xv = _mm256_sign_epi8(xv, raw);
      __m256i p = QD_DOT(u, xv);
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * xb->d), acc[i]);
      if (T != ICL_TYPE_Q8_0) bias[i] += mb * xb->s;
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NT; i++) out[i] = QD_FN(qd_hsum_)(acc[i]) + bias[i];
}

#define QD_DEFINE(tname, T)                                                                                    \
  __attribute__((target(QD_TARGET))) static void QD_FN(qdot_##tname##_)(const uint8_t *w, const cpu_q8 *x,     \
                                                                         int64_t nb, int nt, int64_t xs,       \
                                                                         float *out) {                         \
    switch (nt) {                                                                                              \
    case 1: QD_FN(qd_body_)(T, w, x, nb, 1, xs, out); break;                                                   \
    case 2: QD_FN(qd_body_)(T, w, x, nb, 2, xs, out); break;                                                   \
    case 3: QD_FN(qd_body_)(T, w, x, nb, 3, xs, out); break;                                                   \
    default: QD_FN(qd_body_)(T, w, x, nb, 4, xs, out); break;                                                  \
    }                                                                                                          \
  }

QD_DEFINE(q4_0, ICL_TYPE_Q4_0)
QD_DEFINE(q4_1, ICL_TYPE_Q4_1)
QD_DEFINE(q5_0, ICL_TYPE_Q5_0)
QD_DEFINE(q5_1, ICL_TYPE_Q5_1)
QD_DEFINE(q8_0, ICL_TYPE_Q8_0)

/* A pair's scales and offset terms for the one-token pair dots below: [d0*xd0, c0*xs0, d1*xd1, c1*xs1] from the
 * four f16 words of blocks b0 and b1 (d, then m for Q4_1/Q5_1) in one conversion, with c = m, or qd_off_k_ * d
 * for the symmetric types (0 with signed: codes that carry the sign); ds: the token's d, s of the two blocks. */
QD_ATTR __m128 QD_FN(qp_scales_)(const int T, const int signed_codes, const uint8_t *b0, const uint8_t *b1, int has1,
                                 const float *ds) {
  const int asym = QD_FN(qd_asym_)(T);
  const float k = asym ? 1.0f : signed_codes ? 0.0f : QD_FN(qd_off_k_)(T);
  uint32_t w0, w1 = 0; /* f16 d, then m (asym) or the codes' first bytes (unused) */
  memcpy(&w0, b0, 4);
  if (has1) memcpy(&w1, b1, 4);
  __m128 dm = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)w0 | (uint64_t)w1 << 32)));
  if (!asym) dm = _mm_moveldup_ps(dm); /* d0 d0 d1 d1 */
  return _mm_mul_ps(_mm_mul_ps(dm, _mm_load_ps(ds)), _mm_setr_ps(1.0f, k, 1.0f, k));
}

/* The offset terms accumulated in lanes 1 (even blocks) and 3 (odd blocks), summed as the scalar code did. */
QD_ATTR float QD_FN(qp_offsum_)(__m128 off) {
  return _mm_cvtss_f32(_mm_shuffle_ps(off, off, 1)) + _mm_cvtss_f32(_mm_shuffle_ps(off, off, 3));
}

/* One token, Q4_0/Q4_1 (halves order), at both levels: a pair's low nibbles against the first 32 activation bytes
 * and its high nibbles against the next 32, both 256-bit dots into one integer sum per lane (lanes 0-3: block 2p,
 * 4-7: 2p+1) before one conversion; at AVX-512 this keeps the float work at half width (no 512-bit insert). */
QD_ATTR float QD_FN(qp_halves_)(const int T, const uint8_t *w, const cpu_q8p *xp) {
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  const int no = QD_FN(qd_nib_off_)(T);
  const __m256i pick = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2), m4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  __m128 off = _mm_setzero_ps(); /* lanes 1 and 3: the offsets' terms */
  const int64_t nb = xp->nb;
  for (int64_t b = 0; b < nb; b += 2) {
    const uint8_t *b0 = w + (size_t)b * bb, *b1 = b0 + bb;
    const int has1 = b + 1 < nb;
    __m128i n0 = _mm_loadu_si128((const __m128i *)(b0 + no));
    __m128i n1 = has1 ? _mm_loadu_si128((const __m128i *)(b1 + no)) : _mm_setzero_si128();
    __m256i n = _mm256_set_m128i(n1, n0);
    __m256i p = QD_DOTACC(QD_DOT(_mm256_and_si256(n, m4), _mm256_load_si256((const __m256i *)(xp->q + 32 * b))),
                          _mm256_and_si256(_mm256_srli_epi16(n, 4), m4),
                          _mm256_load_si256((const __m256i *)(xp->q + 32 * b + 32)));
    __m128 v = QD_FN(qp_scales_)(T, 0, b0, b1, has1, xp->ds + 2 * b);
    off = _mm_add_ps(off, v);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), pick), acc);
  }
  return QD_FN(qd_hsum_)(acc) + QD_FN(qp_offsum_)(off);
}

#ifdef QD_MASK_BITS
/* ---- one token, two 32-blocks per 512-bit dot (cpu_q8p) ----------------------------------------------------
 * Decode is one weight row after another against the same activations; a 512-bit dpbusd covers two blocks,
 * so the unpacking, conversion and scaling run once per pair (Q4_0/Q4_1: qp_halves_). Q8_0 takes its codes
 * shifted by 128 (dpbusd sums in int32, so unsigned codes cannot saturate). A pair's four f16 scale words (d
 * and, for Q4_1/Q5_1, the offset m of each block) are converted in one instruction and multiplied by the token's
 * (d, s) pairs: the products give the sums' scales and the offsets' terms (w = d*u + c, c = m or -8d, -16d,
 * -128d), without scalar work per block (which left Q5_0 decode compute-bound at ~24 GB/s). */

/* The codes of blocks b0 and b1 (b1 absent: has1 = 0) in cpu_q8p order. */
QD_ATTR __m512i QD_FN(qp_codes_)(const int T, const uint8_t *b0, const uint8_t *b1, int has1) {
  if (T == ICL_TYPE_Q8_0) {
    __m256i r0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
    __m256i r1 = has1 ? _mm256_loadu_si256((const __m256i *)(b1 + 2)) : _mm256_set1_epi8((char)0x80);
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1), _mm512_set1_epi8((char)0x80));
  }
  const int no = QD_FN(qd_nib_off_)(T), bo = QD_FN(qd_bit_off_)(T);
  __m128i n0 = _mm_loadu_si128((const __m128i *)(b0 + no));
  __m128i n1 = has1 ? _mm_loadu_si128((const __m128i *)(b1 + no)) : _mm_setzero_si128();
  __m256i n = _mm256_set_m128i(n1, n0);
  __m512i u = _mm512_inserti64x4(_mm512_castsi256_si512(n), _mm256_srli_epi16(n, 4), 1); /* lo0 lo1 hi0 hi1 */
  u = _mm512_and_si512(_mm512_shuffle_i64x2(u, u, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F)); /* elements */
  uint32_t h0, h1 = 0;
  memcpy(&h0, b0 + bo, 4);
  if (has1) memcpy(&h1, b1 + bo, 4);
  return _mm512_mask_add_epi8(u, (__mmask64)((uint64_t)h0 | (uint64_t)h1 << 32), u, _mm512_set1_epi8(16));
}

QD_ATTR float QD_FN(qp_body_)(const int T, const uint8_t *w, const cpu_q8p *xp) {
  if (!cpu_q8p_elements(T)) return QD_FN(qp_halves_)(T, w, xp);
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  /* lane i of the sums takes scale 0 (block 2p) or 2 (block 2p+1) of [d0*xd0, c0*xs0, d1*xd1, c1*xs1]; element
   * order (cpu_q8p_elements: Q5's fifth bits then form the mask in two loads) */
  const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
  __m512 acc = _mm512_setzero_ps();
  __m128 off = _mm_setzero_ps(); /* lanes 1 and 3: the offsets' terms */
  const int64_t nb = xp->nb;
  for (int64_t b = 0; b < nb; b += 2) {
    const uint8_t *b0 = w + (size_t)b * bb, *b1 = b0 + bb;
    const int has1 = b + 1 < nb;
    __m512i u = QD_FN(qp_codes_)(T, b0, b1, has1);
    __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_load_si512((const void *)(xp->q + 32 * b)));
    __m128 v = QD_FN(qp_scales_)(T, 0, b0, b1, has1, xp->ds + 2 * b);
    off = _mm_add_ps(off, v);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(pick, _mm512_castps128_ps512(v)), acc);
  }
  return _mm512_reduce_add_ps(acc) + QD_FN(qp_offsum_)(off);
}
#else
/* ---- AVX2, one token: the same pairs (cpu_q8p) and scaling, one 256-bit dot per block (Q4_0/Q4_1:
 * qp_halves_, the pair's two integer sums added before one conversion); Q8_0 keeps |w| against sign(x, w)
 * (maddubs saturates on codes shifted by 128), so it has no offset term. Without this, one token ran the
 * multi-token body with scalar scaling and no q/k/v grouping (SmolLM2 FAST decode at 41% of the read bandwidth). */
QD_ATTR float QD_FN(qp_body_)(const int T, const uint8_t *w, const cpu_q8p *xp) {
  if (!cpu_q8p_elements(T)) return QD_FN(qp_halves_)(T, w, xp);
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  const int no = QD_FN(qd_nib_off_)(T), bo = QD_FN(qd_bit_off_)(T);
  __m256 acc = _mm256_setzero_ps();
  __m128 off = _mm_setzero_ps(); /* lanes 1 and 3: the offsets' terms */
  const int64_t nb = xp->nb;
  for (int64_t b = 0; b < nb; b += 2) {
    const uint8_t *b0 = w + (size_t)b * bb, *b1 = b0 + bb;
    const int has1 = b + 1 < nb;
    __m256i x0 = _mm256_load_si256((const __m256i *)(xp->q + 32 * b)), x1 = _mm256_load_si256((const __m256i *)(xp->q + 32 * b + 32));
    __m128 v = QD_FN(qp_scales_)(T, T == ICL_TYPE_Q8_0, b0, b1, has1, xp->ds + 2 * b);
    off = _mm_add_ps(off, v);
    __m256 v8 = _mm256_set_m128(v, v);
    __m256 s0 = _mm256_permutevar8x32_ps(v8, _mm256_set1_epi32(0)), s1 = _mm256_permutevar8x32_ps(v8, _mm256_set1_epi32(2));
    __m256i u0, u1 = _mm256_setzero_si256();
    if (T == ICL_TYPE_Q8_0) {
      __m256i r0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
      __m256i r1 = has1 ? _mm256_loadu_si256((const __m256i *)(b1 + 2)) : _mm256_setzero_si256();
      u0 = _mm256_abs_epi8(r0), u1 = _mm256_abs_epi8(r1);
      x0 = _mm256_sign_epi8(x0, r0), x1 = _mm256_sign_epi8(x1, r1);
    } else {
      u0 = QD_FN(qd_add_bit16_)(QD_FN(qd_nibbles_)(b0 + no), b0 + bo);
      if (has1) u1 = QD_FN(qd_add_bit16_)(QD_FN(qd_nibbles_)(b1 + no), b1 + bo);
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(QD_DOT(u0, x0)), s0, acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(QD_DOT(u1, x1)), s1, acc);
  }
  return QD_FN(qd_hsum_)(acc) + QD_FN(qp_offsum_)(off);
}
#endif

/* The one-token pair dot qdot1 of type T from body (qp_body_ here, qk1_body_ for the K types below). */
#define Q1_DEFINE(tname, T, body)                                                                              \
  __attribute__((target(QD_TARGET))) static float QD_FN(qdot1_##tname##_)(const uint8_t *w, const cpu_q8p *xp) { \
    return QD_FN(body)(T, w, xp);                                                                              \
  }
Q1_DEFINE(q4_0, ICL_TYPE_Q4_0, qp_body_)
Q1_DEFINE(q4_1, ICL_TYPE_Q4_1, qp_body_)
Q1_DEFINE(q5_0, ICL_TYPE_Q5_0, qp_body_)
Q1_DEFINE(q5_1, ICL_TYPE_Q5_1, qp_body_)
Q1_DEFINE(q8_0, ICL_TYPE_Q8_0, qp_body_)

/* ---- K types: 8 groups of 32 codes per 256-block, multiplier a and offset b per 16-half ---- */

QD_ATTR int QD_FN(qk_scale3_)(const uint8_t *s, int j) {
  int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  return (lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

/* Q4_K/Q5_K: the 6-bit scales and mins of the 12 bytes at blk+4 as 8 bytes each (group order) in the low halves of
 * *sc and *m. Four groups per 32-bit word: groups 0-3 are the low 6 bits of words 0 (scales) and 1 (mins); groups
 * 4-7 the nibbles of word 2 with the top 2 bits of words 0 and 1 above them. */
QD_ATTR void QD_FN(qk_scale_bytes_)(const uint8_t *blk, __m128i *sc, __m128i *m) {
  uint32_t u[3];
  memcpy(u, blk + 4, 12);
  uint64_t s = (uint64_t)(u[0] & 0x3f3f3f3fu) | (uint64_t)((u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4) << 32;
  uint64_t n = (uint64_t)(u[1] & 0x3f3f3f3fu) | (uint64_t)(((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4) << 32;
  *sc = _mm_cvtsi64_si128((long long)s), *m = _mm_cvtsi64_si128((long long)n);
}

/* Multipliers a[2*g + h] and offsets b[2*g + h] of the 8 groups of one block. */
QD_ATTR void QD_FN(qk_scales_)(const int T, const uint8_t *blk, float *a, float *b) {
  switch (T) {
  case ICL_TYPE_Q2_K: {
    float d = QD_FN(qd_f16_)(blk + 80), dmin = QD_FN(qd_f16_)(blk + 82);
    for (int j = 0; j < 16; j++) {
      a[j] = d * (float)(blk[j] & 0xF);
      b[j] = dmin * (float)(blk[j] >> 4);
    }
    break;
  }
  case ICL_TYPE_Q3_K: {
    float d = QD_FN(qd_f16_)(blk + 108);
    for (int j = 0; j < 16; j++) {
      a[j] = d * (float)QD_FN(qk_scale3_)(blk + 96, j);
      b[j] = 4.0f * a[j];
    }
    break;
  }
  case ICL_TYPE_Q4_K: case ICL_TYPE_Q5_K: {
    __m128i scb, mb;
    QD_FN(qk_scale_bytes_)(blk, &scb, &mb);
    __m256 av = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scb)), _mm256_set1_ps(QD_FN(qd_f16_)(blk)));
    __m256 bv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mb)), _mm256_set1_ps(QD_FN(qd_f16_)(blk + 2)));
    /* a[2g] = a[2g+1] = av[g] */
    __m256 alo = _mm256_unpacklo_ps(av, av), ahi = _mm256_unpackhi_ps(av, av);
    __m256 blo = _mm256_unpacklo_ps(bv, bv), bhi = _mm256_unpackhi_ps(bv, bv);
    _mm256_storeu_ps(a, _mm256_permute2f128_ps(alo, ahi, 0x20));
    _mm256_storeu_ps(a + 8, _mm256_permute2f128_ps(alo, ahi, 0x31));
    _mm256_storeu_ps(b, _mm256_permute2f128_ps(blo, bhi, 0x20));
    _mm256_storeu_ps(b + 8, _mm256_permute2f128_ps(blo, bhi, 0x31));
    break;
  }
  default: { /* Q6_K: group g = 4*half + plane uses scales 8*half + 2*plane + h = 2g + h */
    float d = QD_FN(qd_f16_)(blk + 208);
    const int8_t *sc = (const int8_t *)(blk + 192);
    for (int j = 0; j < 16; j++) {
      a[j] = d * (float)sc[j];
      b[j] = 32.0f * a[j];
    }
    break;
  }
  }
}

/* The 32 unsigned codes of group g (a constant after unrolling). */
QD_ATTR __m256i QD_FN(qk_codes_)(const int T, const uint8_t *blk, const int g) {
  const int half = g / 4, plane = g % 4;
  const __m256i m2 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1), m4 = _mm256_set1_epi8(0x0F);
  __m256i u;
  switch (T) {
  case ICL_TYPE_Q2_K:
    u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * half)), 2 * plane), m2);
    break;
  case ICL_TYPE_Q3_K: {
    u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * half)), 2 * plane), m2);
    __m256i hb = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)blk), g), m1);
    u = _mm256_or_si256(u, _mm256_slli_epi16(hb, 2));
    break;
  }
  case ICL_TYPE_Q4_K:
    u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * (g / 2))), 4 * (g % 2)), m4);
    break;
  case ICL_TYPE_Q5_K: {
    u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * (g / 2))), 4 * (g % 2)), m4);
    __m256i hb = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(blk + 16)), g), m1);
    u = _mm256_or_si256(u, _mm256_slli_epi16(hb, 4));
    break;
  }
  default: { /* Q6_K */
    __m256i lo = _mm256_loadu_si256((const __m256i *)(blk + 64 * half + 32 * (plane & 1)));
    __m256i hi = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * half));
    u = _mm256_and_si256(_mm256_srli_epi16(lo, 4 * (plane >> 1)), m4);
    u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2 * plane), m2), 4));
    break;
  }
  }
  return u;
}

/* Whether K type T has one multiplier and offset per 32-element group (Q4_K, Q5_K) rather than per 16. */
QD_ATTR int QD_FN(qk_whole_)(const int T) { return T == ICL_TYPE_Q4_K || T == ICL_TYPE_Q5_K; }

QD_ATTR void QD_FN(qk_body_)(const int T, const uint8_t *w, const cpu_q8 *x, int64_t nb, const int NT, int64_t xs,
                             float *out) {
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  __m256 acc[4];
  float bias[4];
#pragma GCC unroll 4
  for (int i = 0; i < NT; i++) {
    acc[i] = _mm256_setzero_ps();
    bias[i] = 0.0f;
  }
  for (int64_t sb = 0; sb < nb / 8; sb++) {
    const uint8_t *blk = w + (size_t)sb * bb;
    float a[16], b[16];
    QD_FN(qk_scales_)(T, blk, a, b);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
      __m256i u = QD_FN(qk_codes_)(T, blk, g);
      /* lanes 0-3 of the int32 sums cover elements 0-15, lanes 4-7 elements 16-31 */
      __m256 av = _mm256_set_m128(_mm_set1_ps(a[2 * g + 1]), _mm_set1_ps(a[2 * g]));
#pragma GCC unroll 4
      for (int i = 0; i < NT; i++) {
        const cpu_q8 *xb = x + i * xs + 8 * sb + g;
        __m256i p = QD_DOT(u, _mm256_loadu_si256((const __m256i *)xb->q));
        if (QD_FN(qk_whole_)(T)) { /* one scale and offset for all 32: a broadcast, and the block sum s */
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(a[2 * g] * xb->d), acc[i]);
          bias[i] += b[2 * g] * xb->s;
        } else {
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(av, _mm256_set1_ps(xb->d)), acc[i]);
          bias[i] += b[2 * g] * xb->h[0] + b[2 * g + 1] * xb->h[1];
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NT; i++) out[i] = QD_FN(qd_hsum_)(acc[i]) - bias[i];
}

#ifdef QD_MASK_BITS
/* ---- K types, one token: a 256-block's eight 32-groups as four pairs in element order (cpu_q8p), one dpbusd
 * each; the block's 16 half multipliers and offsets as one vector each, the offsets against the token's half sums
 * in a vector accumulator. (The 256-bit body above spent most of its instructions on per-group scalar scaling:
 * Q4_K and Q6_K decode ran at ~22 GB/s.) Q4_K, Q5_K, Q6_K. */

/* The multipliers a[2g + h] of the block's 16 halves; *b: their offsets (w = a*u - b). */
QD_ATTR __m512 QD_FN(qk1_scales_)(const int T, const uint8_t *blk, __m512 *b) {
  if (T == ICL_TYPE_Q6_K) {
    __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192))));
    a = _mm512_mul_ps(a, _mm512_set1_ps(QD_FN(qd_f16_)(blk + 208)));
    *b = _mm512_mul_ps(a, _mm512_set1_ps(32.0f));
    return a;
  }
  __m128i scb, mb; /* Q4_K, Q5_K: each group's byte twice below (both its halves) */
  QD_FN(qk_scale_bytes_)(blk, &scb, &mb);
  __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(scb, scb)));
  *b = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(mb, mb))), _mm512_set1_ps(QD_FN(qd_f16_)(blk + 2)));
  return _mm512_mul_ps(a, _mm512_set1_ps(QD_FN(qd_f16_)(blk)));
}

/* The 64 codes of groups 2j and 2j+1 (a constant j after unrolling). */
QD_ATTR __m512i QD_FN(qk1_codes_)(const int T, const uint8_t *blk, const int j) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if (T == ICL_TYPE_Q6_K) { /* groups 2j, 2j+1: planes 2(j%2) and 2(j%2)+1 of half j/2 */
    const int half = j / 2, p0 = 2 * (j % 2);
    __m512i lo = _mm512_loadu_si512((const void *)(blk + 64 * half));
    __m512i u = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(lo, 4) : lo, m4);
    __m256i hi = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * half));
    __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(hi, 2 * p0)), _mm256_srli_epi16(hi, 2 * p0 + 2), 1);
    return _mm512_or_si512(u, _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi8(3)), 4));
  }
  __m256i qs = _mm256_loadu_si256((const __m256i *)(blk + (T == ICL_TYPE_Q5_K ? 48 : 16) + 32 * j));
  __m512i u = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qs), _mm256_srli_epi16(qs, 4), 1), m4);
  if (T == ICL_TYPE_Q5_K) { /* fifth bits: bit g of byte i is element i of group g */
    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
    __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * j))), _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
    u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(qh, bit), u, _mm512_set1_epi8(16));
  }
  return u;
}

QD_ATTR float QD_FN(qk1_body_)(const int T, const uint8_t *w, const cpu_q8p *xp) {
  const size_t bb = QD_FN(qd_block_bytes_)(T);
  const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2); /* d of group 2j, 2j+1 */
  __m512 acc = _mm512_setzero_ps(), off = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < xp->nb / 8; sb++) {
    const uint8_t *blk = w + (size_t)sb * bb;
    __m512 b, a = QD_FN(qk1_scales_)(T, blk, &b);
    off = _mm512_fmadd_ps(b, _mm512_loadu_ps(xp->h + 16 * sb), off);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      const int64_t pr = 4 * sb + j;
      __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), QD_FN(qk1_codes_)(T, blk, j),
                                      _mm512_load_si512((const void *)(xp->q + 64 * pr)));
      /* lane i: half 4j + i/4 of the block, group 2j + i/8 of the token */
      const __m512i hx = _mm512_setr_epi32(4 * j, 4 * j, 4 * j, 4 * j, 4 * j + 1, 4 * j + 1, 4 * j + 1, 4 * j + 1,
                                           4 * j + 2, 4 * j + 2, 4 * j + 2, 4 * j + 2, 4 * j + 3, 4 * j + 3, 4 * j + 3, 4 * j + 3);
      __m512 xd = _mm512_permutexvar_ps(pick, _mm512_castps128_ps512(_mm_load_ps(xp->ds + 4 * pr)));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(_mm512_permutexvar_ps(hx, a), xd), acc);
    }
  }
  return _mm512_reduce_add_ps(acc) - _mm512_reduce_add_ps(off);
}

Q1_DEFINE(q4_k, ICL_TYPE_Q4_K, qk1_body_)
Q1_DEFINE(q5_k, ICL_TYPE_Q5_K, qk1_body_)
Q1_DEFINE(q6_k, ICL_TYPE_Q6_K, qk1_body_)
#endif
#undef Q1_DEFINE

#define QK_DEFINE(tname, T)                                                                                    \
  __attribute__((target(QD_TARGET))) static void QD_FN(qdot_##tname##_)(const uint8_t *w, const cpu_q8 *x,     \
                                                                         int64_t nb, int nt, int64_t xs,       \
                                                                         float *out) {                         \
    switch (nt) {                                                                                              \
    case 1: QD_FN(qk_body_)(T, w, x, nb, 1, xs, out); break;                                                   \
    case 2: QD_FN(qk_body_)(T, w, x, nb, 2, xs, out); break;                                                   \
    case 3: QD_FN(qk_body_)(T, w, x, nb, 3, xs, out); break;                                                   \
    default: QD_FN(qk_body_)(T, w, x, nb, 4, xs, out); break;                                                  \
    }                                                                                                          \
  }

QK_DEFINE(q2_k, ICL_TYPE_Q2_K)
QK_DEFINE(q3_k, ICL_TYPE_Q3_K)
QK_DEFINE(q4_k, ICL_TYPE_Q4_K)
QK_DEFINE(q5_k, ICL_TYPE_Q5_K)
QK_DEFINE(q6_k, ICL_TYPE_Q6_K)

/* ---- dequantization to f32 (packing weight tiles for the prefill gemm) -------------------- */

/* 32 codes u to floats a*u + c, with a and c per 16-element half (K types) or per block. */
QD_ATTR void QD_FN(dq_store32_)(__m256i u, float a0, float c0, float a1, float c1, float *y) {
  __m128i lo = _mm256_castsi256_si128(u), hi = _mm256_extracti128_si256(u, 1);
  __m256 va0 = _mm256_set1_ps(a0), vc0 = _mm256_set1_ps(c0), va1 = _mm256_set1_ps(a1), vc1 = _mm256_set1_ps(c1);
  _mm256_storeu_ps(y, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), va0, vc0));
  _mm256_storeu_ps(y + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), va0, vc0));
  _mm256_storeu_ps(y + 16, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), va1, vc1));
  _mm256_storeu_ps(y + 24, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), va1, vc1));
}

QD_ATTR void QD_FN(dq_body_)(const int T, const uint8_t *w, float *y, int64_t n) {
  if (QD_FN(qd_is32_)(T)) {
    const size_t bb = QD_FN(qd_block_bytes_)(T);
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
      float d, c;
      __m256i u = QD_FN(qd_codes32_)(T, w + (size_t)b * bb, &d, &c);
      QD_FN(dq_store32_)(u, d, c, d, c, y);
    }
  } else {
    const size_t bb = QD_FN(qd_block_bytes_)(T);
    for (int64_t sb = 0; sb < n / 256; sb++) {
      const uint8_t *blk = w + (size_t)sb * bb;
      float a[16], b[16];
      QD_FN(qk_scales_)(T, blk, a, b);
#pragma GCC unroll 8
      for (int g = 0; g < 8; g++, y += 32)
        QD_FN(dq_store32_)(QD_FN(qk_codes_)(T, blk, g), a[2 * g], -b[2 * g], a[2 * g + 1], -b[2 * g + 1], y);
    }
  }
}

#define DQ_DEFINE(tname, T)                                                                                    \
  __attribute__((target(QD_TARGET))) static void QD_FN(dq_##tname##_)(const uint8_t *w, float *y, int64_t n) { \
    QD_FN(dq_body_)(T, w, y, n);                                                                               \
  }
DQ_DEFINE(q4_0, ICL_TYPE_Q4_0)
DQ_DEFINE(q4_1, ICL_TYPE_Q4_1)
DQ_DEFINE(q5_0, ICL_TYPE_Q5_0)
DQ_DEFINE(q5_1, ICL_TYPE_Q5_1)
DQ_DEFINE(q8_0, ICL_TYPE_Q8_0)
DQ_DEFINE(q2_k, ICL_TYPE_Q2_K)
DQ_DEFINE(q3_k, ICL_TYPE_Q3_K)
DQ_DEFINE(q4_k, ICL_TYPE_Q4_K)
DQ_DEFINE(q5_k, ICL_TYPE_Q5_K)
DQ_DEFINE(q6_k, ICL_TYPE_Q6_K)
#undef DQ_DEFINE

/* Installs this instruction set's integer dot products and dequantizers into k. */
static void QD_FN(qd_install_)(cpu_kernels *k) {
  k->qdot[ICL_TYPE_Q4_0] = QD_FN(qdot_q4_0_);
  k->qdot[ICL_TYPE_Q4_1] = QD_FN(qdot_q4_1_);
  k->qdot[ICL_TYPE_Q5_0] = QD_FN(qdot_q5_0_);
  k->qdot[ICL_TYPE_Q5_1] = QD_FN(qdot_q5_1_);
  k->qdot[ICL_TYPE_Q8_0] = QD_FN(qdot_q8_0_);
  k->qdot[ICL_TYPE_Q2_K] = QD_FN(qdot_q2_k_);
  k->qdot[ICL_TYPE_Q3_K] = QD_FN(qdot_q3_k_);
  k->qdot[ICL_TYPE_Q4_K] = QD_FN(qdot_q4_k_);
  k->qdot[ICL_TYPE_Q5_K] = QD_FN(qdot_q5_k_);
  k->qdot[ICL_TYPE_Q6_K] = QD_FN(qdot_q6_k_);
  k->qdot1[ICL_TYPE_Q4_0] = QD_FN(qdot1_q4_0_);
  k->qdot1[ICL_TYPE_Q4_1] = QD_FN(qdot1_q4_1_);
  k->qdot1[ICL_TYPE_Q5_0] = QD_FN(qdot1_q5_0_);
  k->qdot1[ICL_TYPE_Q5_1] = QD_FN(qdot1_q5_1_);
  k->qdot1[ICL_TYPE_Q8_0] = QD_FN(qdot1_q8_0_);
#ifdef QD_MASK_BITS
  k->qdot1[ICL_TYPE_Q4_K] = QD_FN(qdot1_q4_k_);
  k->qdot1[ICL_TYPE_Q5_K] = QD_FN(qdot1_q5_k_);
  k->qdot1[ICL_TYPE_Q6_K] = QD_FN(qdot1_q6_k_);
#endif
  k->dequant[ICL_TYPE_Q4_0] = QD_FN(dq_q4_0_);
  k->dequant[ICL_TYPE_Q4_1] = QD_FN(dq_q4_1_);
  k->dequant[ICL_TYPE_Q5_0] = QD_FN(dq_q5_0_);
  k->dequant[ICL_TYPE_Q5_1] = QD_FN(dq_q5_1_);
  k->dequant[ICL_TYPE_Q8_0] = QD_FN(dq_q8_0_);
  k->dequant[ICL_TYPE_Q2_K] = QD_FN(dq_q2_k_);
  k->dequant[ICL_TYPE_Q3_K] = QD_FN(dq_q3_k_);
  k->dequant[ICL_TYPE_Q4_K] = QD_FN(dq_q4_k_);
  k->dequant[ICL_TYPE_Q5_K] = QD_FN(dq_q5_k_);
  k->dequant[ICL_TYPE_Q6_K] = QD_FN(dq_q6_k_);
}

#undef QK_DEFINE
#undef QD_DEFINE
#undef QD_ATTR
