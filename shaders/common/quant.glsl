// Weight decoding for every weight type, from a buffer the including shader declares as
// `uvec4 wq[]` (binding offsets are 16-byte aligned by the host), read through WQ(i), which a shader
// reading several weight buffers defines before the include (the grouped mat-vec).
//
// Why 16-byte loads: on lavapipe a storage-buffer load costs about the same per instruction
// whatever its width (each lane is fetched separately), so a block is fetched with as few uvec4
// loads as cover it and the fields are then cut out with shifts (ALU is cheap there). GPUs like
// wide loads too. Quant blocks of 18, 22, 34, 110 and 210 bytes start at 2-byte-aligned offsets,
// so a fetch shifts the loaded words by the block's offset inside its first uvec4.
//
// One variant per type via -DTYPE_<NAME>=1 (none: F32). Each defines
//   QK  elements per block (1 for plain float types), QB bytes per block,
//   dq_chunk(row, ch, valid, v): elements 32*ch .. 32*ch+31 of the row starting at byte `row`,
//       in order, as 8 vec4; `valid` (< 32 only for float types' last chunk) zeroes the rest.

#if !defined(TYPE_F16) && !defined(TYPE_BF16) && !defined(TYPE_Q4_0) && !defined(TYPE_Q4_1) && \
    !defined(TYPE_Q5_0) && !defined(TYPE_Q5_1) && !defined(TYPE_Q8_0) && !defined(TYPE_Q2_K) && \
    !defined(TYPE_Q3_K) && !defined(TYPE_Q4_K) && !defined(TYPE_Q5_K) && !defined(TYPE_Q6_K)
#define TYPE_F32 1 // the plain shader name (get_rows, matvec, matmul) is the F32 variant
#endif

#ifndef WQ
#define WQ(i) wq[i]
#endif

// The helpers below are type-independent; quant_pair.glsl includes this file once per type, so they are guarded.
#ifndef QUANT_HELPERS
#define QUANT_HELPERS 1

// ---- single words (one uvec4 load each; for scattered fields and row tails) ----
uint ldw(uint b) { return WQ(b >> 4)[(b >> 2) & 3u]; }                 // b % 4 == 0
uint ld16(uint b) { return (ldw(b & ~3u) >> ((b & 2u) * 8u)) & 0xffffu; } // b % 2 == 0
float ldh(uint b) { return unpackHalf2x16(ld16(b)).x; }

// ---- fetches: NW 32-bit words of the bytes [b, b + 4*NW), of which the first NB matter ----
// Words past NB bytes may be garbage. b must be even; ALIGN is 4 when b is known to be a
// multiple of 4 (no half-word shift), else 2. Loads ceil((16 - ALIGN + NB) / 16) uvec4.
uint pick4(uint a0, uint a1, uint a2, uint a3, uint ws) {
  return ws == 0u ? a0 : ws == 1u ? a1 : ws == 2u ? a2 : a3;
}
#define DEFINE_FETCH(NAME, NW, NB, ALIGN)                                                       \
  void NAME(uint b, out uint w[NW]) {                                                           \
    const uint K = (16u - ALIGN + NB + 15u) / 16u;                                              \
    uint raw[4u * K + 5u];                                                                      \
    uint base = b >> 4, ws = (b >> 2) & 3u, hs = (b & 2u) * 8u;                                \
    for (uint k = 0u; k < K; k++) {                                                             \
      uvec4 q = WQ(base + k);                                                                   \
      raw[4u * k] = q.x; raw[4u * k + 1u] = q.y; raw[4u * k + 2u] = q.z; raw[4u * k + 3u] = q.w; \
    }                                                                                           \
    for (uint k = 4u * K; k < 4u * K + 5u; k++) raw[k] = 0u;                                    \
    for (uint j = 0u; j < NW; j++) {                                                            \
      uint jj = min(j, 4u * K);                                                                 \
      uint lo = pick4(raw[jj], raw[jj + 1u], raw[jj + 2u], raw[jj + 3u], ws);                  \
      if (ALIGN == 4u) { w[j] = lo; continue; }                                                 \
      uint hi = pick4(raw[jj + 1u], raw[jj + 2u], raw[jj + 3u], raw[jj + 4u], ws);             \
      w[j] = hs == 0u ? lo : (lo >> 16) | (hi << 16);                                           \
    }                                                                                           \
  }

const uvec4 SH8 = uvec4(0u, 8u, 16u, 24u);
vec4 lo4(uint q) { return vec4((uvec4(q) >> SH8) & 0xfu); }   // low nibbles of 4 bytes
vec4 hi4(uint q) { return vec4((uvec4(q) >> (SH8 + 4u)) & 0xfu); }
vec4 s8x4(uint q) { return vec4(ivec4(uvec4(q) << uvec4(24u, 16u, 8u, 0u)) >> 24); } // int8 bytes
vec4 bits4(uint h, uint first) { return vec4((uvec4(h >> first) >> uvec4(0u, 1u, 2u, 3u)) & 1u); }
vec4 crumbs4(uint q, uint sh) { return vec4((uvec4(q) >> (SH8 + sh)) & 3u); } // 2-bit fields
uint mid(uint a, uint b) { return (a >> 16) | (b << 16); }  // the word 2 bytes into (a, b)

// byte k (dynamic, < 16) of 4 fetched words
uint byte16(uint w[4], uint k) { return (pick4(w[0], w[1], w[2], w[3], k >> 2) >> ((k & 3u) * 8u)) & 0xffu; }
#endif // QUANT_HELPERS

#if defined(TYPE_F32)
#define QK 1
#define QB 4
// The uvec4s covering the chunk, each vec4 cut from two neighbours by the word shift, loads clamped to the uvec4
// holding the row's last valid word (nothing past the row is read), words at or past `valid` zeroed: no branch
// and no array. A load under a condition per element (the row tail) and a loop over an array of 32 words made
// LLVM 19 (Mesa 25 lavapipe) compile the grouped CPU-shaped mat-vec for minutes (docs/gpu.md, Measured).
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint b = row + ch * 128u; // valid >= 1
  uint base = b >> 4, ws = (b >> 2) & 3u, last = (b + 4u * valid - 4u) >> 4;
  uvec4 prev = WQ(base);
  for (uint i = 0u; i < 8u; i++) {
    uvec4 next = WQ(min(base + i + 1u, last));
    uvec4 t = ws == 0u   ? prev
              : ws == 1u ? uvec4(prev.yzw, next.x)
              : ws == 2u ? uvec4(prev.zw, next.xy)
                         : uvec4(prev.w, next.xyz);
    vec4 f = uintBitsToFloat(t);
    if (valid < 32u)
      for (uint k = 0u; k < 4u; k++)
        if (4u * i + k >= valid) f[k] = 0.0;
    v[i] = f;
    prev = next;
  }
}
#elif defined(TYPE_F16) || defined(TYPE_BF16)
#define QK 1
#define QB 2
DEFINE_FETCH(fetch_chunk, 16u, 64u, 2u)
vec2 pair(uint w) {
#if defined(TYPE_F16)
  return unpackHalf2x16(w);
#else
  return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
#endif
}
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint b = row + ch * 64u;
  if (valid == 32u) {
    uint w[16];
    fetch_chunk(b, w);
    for (uint i = 0u; i < 8u; i++) v[i] = vec4(pair(w[2u * i]), pair(w[2u * i + 1u]));
    return;
  }
  for (uint i = 0u; i < 8u; i++) { // row tail: unconditional loads clamped to the last valid element (see F32)
    vec4 t;
    for (uint k = 0u; k < 4u; k++) {
      float f = pair(ld16(b + 2u * min(4u * i + k, valid - 1u))).x;
      t[k] = 4u * i + k < valid ? f : 0.0;
    }
    v[i] = t;
  }
}
#elif defined(TYPE_Q4_0)
#define QK 32
#define QB 18
DEFINE_FETCH(fetch_block, 5u, 18u, 2u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint w[5];
  fetch_block(row + ch * 18u, w);
  float d = unpackHalf2x16(w[0]).x, m = -8.0 * d;
  for (uint i = 0u; i < 4u; i++) {
    uint q = mid(w[i], w[i + 1u]); // qs start 2 bytes into the block
    v[i] = lo4(q) * d + m;
    v[i + 4u] = hi4(q) * d + m;
  }
}
#elif defined(TYPE_Q4_1)
#define QK 32
#define QB 20
DEFINE_FETCH(fetch_block, 5u, 20u, 4u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint w[5];
  fetch_block(row + ch * 20u, w);
  vec2 dm = unpackHalf2x16(w[0]);
  for (uint i = 0u; i < 4u; i++) {
    v[i] = lo4(w[i + 1u]) * dm.x + dm.y;
    v[i + 4u] = hi4(w[i + 1u]) * dm.x + dm.y;
  }
}
#elif defined(TYPE_Q5_0)
#define QK 32
#define QB 22
DEFINE_FETCH(fetch_block, 6u, 22u, 2u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint w[6];
  fetch_block(row + ch * 22u, w);
  float d = unpackHalf2x16(w[0]).x, m = -16.0 * d;
  uint qh = mid(w[0], w[1]);
  for (uint i = 0u; i < 4u; i++) {
    uint q = mid(w[i + 1u], w[i + 2u]); // qs start 6 bytes in
    v[i] = (lo4(q) + 16.0 * bits4(qh, 4u * i)) * d + m;
    v[i + 4u] = (hi4(q) + 16.0 * bits4(qh, 16u + 4u * i)) * d + m;
  }
}
#elif defined(TYPE_Q5_1)
#define QK 32
#define QB 24
DEFINE_FETCH(fetch_block, 6u, 24u, 4u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint w[6];
  fetch_block(row + ch * 24u, w);
  vec2 dm = unpackHalf2x16(w[0]);
  uint qh = w[1];
  for (uint i = 0u; i < 4u; i++) {
    v[i] = (lo4(w[i + 2u]) + 16.0 * bits4(qh, 4u * i)) * dm.x + dm.y;
    v[i + 4u] = (hi4(w[i + 2u]) + 16.0 * bits4(qh, 16u + 4u * i)) * dm.x + dm.y;
  }
}
#elif defined(TYPE_Q8_0)
#define QK 32
#define QB 34
DEFINE_FETCH(fetch_block, 9u, 34u, 2u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint w[9];
  fetch_block(row + ch * 34u, w);
  float d = unpackHalf2x16(w[0]).x;
  for (uint i = 0u; i < 8u; i++) v[i] = s8x4(mid(w[i], w[i + 1u])) * d;
}
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#define QK 256
#if defined(TYPE_Q4_K)
#define QB 144
#else
#define QB 176
#endif
DEFINE_FETCH(fetch_head, 4u, 16u, 4u)  // d, dmin, scales[12]
DEFINE_FETCH(fetch_32, 8u, 32u, 4u)
// 6-bit scale and min of sub-block j from the 12 packed bytes (bytes 4..15 of the head)
void scale_min_k4(uint h[4], uint j, out float sc, out float mn) {
  if (j < 4u) {
    sc = float(byte16(h, 4u + j) & 63u);
    mn = float(byte16(h, 8u + j) & 63u);
  } else {
    uint a = byte16(h, 8u + j);
    sc = float((a & 0xfu) | ((byte16(h, j) >> 6) << 4));
    mn = float((a >> 4) | ((byte16(h, 4u + j) >> 6) << 4));
  }
}
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint b = row + (ch >> 3) * uint(QB), j = ch & 7u, c = j >> 1;
  uint h[4], q[8];
  fetch_head(b, h);
  vec2 dm = unpackHalf2x16(h[0]);
  float sc, mn;
  scale_min_k4(h, j, sc, mn);
  float d = dm.x * sc, m = dm.y * mn;
#if defined(TYPE_Q4_K)
  fetch_32(b + 16u + 32u * c, q);
#else
  uint qh[8];
  fetch_32(b + 16u, qh);
  fetch_32(b + 48u + 32u * c, q);
#endif
  for (uint i = 0u; i < 8u; i++) {
    vec4 n = (j & 1u) != 0u ? hi4(q[i]) : lo4(q[i]);
#if defined(TYPE_Q5_K)
    n += 16.0 * vec4((uvec4(qh[i]) >> (SH8 + j)) & 1u);
#endif
    v[i] = n * d - m;
  }
}
#elif defined(TYPE_Q6_K)
#define QK 256
#define QB 210
DEFINE_FETCH(fetch_32, 8u, 32u, 2u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint b = row + (ch >> 3) * 210u, sub = ch & 7u, h = sub >> 2, g = sub & 3u;
  uint ql[8], qh[8];
  fetch_32(b + 64u * h + 32u * (g & 1u), ql);
  fetch_32(b + 128u + 32u * h, qh);
  uint sc = ld16(b + 192u + 8u * h + 2u * g); // two int8 scales
  float d = ldh(b + 208u);
  float s0 = d * float(int(sc << 24) >> 24), s1 = d * float(int(sc << 16) >> 24);
  for (uint i = 0u; i < 8u; i++) {
    vec4 n = g >= 2u ? hi4(ql[i]) : lo4(ql[i]);
    n += 16.0 * crumbs4(qh[i], 2u * g) - 32.0;
    v[i] = n * (i < 4u ? s0 : s1);
  }
}
#elif defined(TYPE_Q2_K)
#define QK 256
#define QB 84
DEFINE_FETCH(fetch_32, 8u, 32u, 4u)
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint b = row + (ch >> 3) * 84u, sub = ch & 7u, n = sub >> 2, j = sub & 3u;
  uint q[8];
  fetch_32(b + 16u + 32u * n, q);
  vec2 dm = unpackHalf2x16(ldw(b + 80u));
  uint s = ld16(b + 8u * n + 2u * j); // the two 4-bit scale/min bytes of this chunk
  float d0 = dm.x * float(s & 0xfu), m0 = dm.y * float((s >> 4) & 0xfu);
  float d1 = dm.x * float((s >> 8) & 0xfu), m1 = dm.y * float((s >> 12) & 0xfu);
  for (uint i = 0u; i < 8u; i++) v[i] = crumbs4(q[i], 2u * j) * (i < 4u ? d0 : d1) - (i < 4u ? m0 : m1);
}
#elif defined(TYPE_Q3_K)
#define QK 256
#define QB 110
DEFINE_FETCH(fetch_32, 8u, 32u, 2u)
DEFINE_FETCH(fetch_scales, 4u, 14u, 2u) // scales[12] and d
// signed 6-bit scale `is` (0..15): low 4 bits from bytes 0..7, high 2 bits from bytes 8..11
float scale_k3(uint s[4], uint is) {
  uint lo = (byte16(s, is & 7u) >> (4u * (is >> 3))) & 0xfu;
  uint hi = (byte16(s, 8u + (is & 3u)) >> (2u * (is >> 2))) & 3u;
  return float(int(lo | (hi << 4)) - 32);
}
void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  uint b = row + (ch >> 3) * 110u, sub = ch & 7u, n = sub >> 2, j = sub & 3u;
  uint hm[8], q[8], s[4];
  fetch_32(b, hm);
  fetch_32(b + 32u + 32u * n, q);
  fetch_scales(b + 96u, s);
  float d = unpackHalf2x16(s[3]).x; // bytes 12, 13 of the fetch
  float d0 = d * scale_k3(s, 8u * n + 2u * j), d1 = d * scale_k3(s, 8u * n + 2u * j + 1u);
  for (uint i = 0u; i < 8u; i++) {
    vec4 hbit = vec4((uvec4(hm[i]) >> (SH8 + 4u * n + j)) & 1u);
    v[i] = (crumbs4(q[i], 2u * j) - 4.0 + 4.0 * hbit) * (i < 4u ? d0 : d1);
  }
}
#endif

// Bytes of a row of `cols` elements.
uint row_bytes(uint cols) { return QK == 1 ? cols * uint(QB) : (cols / uint(QK)) * uint(QB); }
