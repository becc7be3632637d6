// Integer decoding of 32-element blocks for the integer-dot matmul: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K types'
// 32-element sub-blocks (Q4_K, Q5_K; Q3_K, Q6_K with IQ_SCALED). Include after quant.glsl (its fetches and field
// helpers). iq_block(row, blk, q, dm, sc): block blk of the row starting at byte `row` as 8 words of 4 signed int8
// codes (word i holds elements 4i..4i+3, element 4i in the low byte) and dm = (d, m): element = d * code + m
// (m = 0 for the symmetric types); under IQ_SCALED element k = d * sc[k / 16] * code (integer half scales, which
// the matmul applies to the integer half dots), else sc = (1, 1).

uint sext4(uint y) { return y | ((y & 0x08080808u) * 0x1eu); } // 4-bit two's-complement fields -> int8 bytes
uint sext5(uint y) { return y | ((y & 0x10101010u) * 0x0eu); } // 5-bit ones
uint sext6(uint y) { return y | ((y & 0x20202020u) * 0x06u); } // 6-bit ones
uint sext3(uint y) { return y | ((y & 0x04040404u) * 0x3eu); } // 3-bit ones
// bits first..first+3 of qh, each moved to bit 4 of its byte (the 5th bit of 4 codes)
uint hbits(uint qh, uint first) {
  uint b = (qh >> first) & 0xfu;
  return ((b & 1u) | ((b & 2u) << 7) | ((b & 4u) << 14) | ((b & 8u) << 21)) << 4;
}
const uint NIB = 0x0f0f0f0fu;

#if defined(TYPE_Q4_0)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  sc = ivec2(1);
  uint w[5];
  fetch_block(row + blk * 18u, w);
  dm = vec2(unpackHalf2x16(w[0]).x, 0.0);
  for (uint i = 0u; i < 4u; i++) { // code x - 8 is x ^ 8 as a 4-bit two's complement
    uint v = mid(w[i], w[i + 1u]);
    q[i] = sext4((v & NIB) ^ 0x08080808u);
    q[i + 4u] = sext4(((v >> 4) & NIB) ^ 0x08080808u);
  }
}
#elif defined(TYPE_Q4_1)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  sc = ivec2(1);
  uint w[5];
  fetch_block(row + blk * 20u, w);
  dm = unpackHalf2x16(w[0]);
  for (uint i = 0u; i < 4u; i++) {
    q[i] = w[i + 1u] & NIB;
    q[i + 4u] = (w[i + 1u] >> 4) & NIB;
  }
}
#elif defined(TYPE_Q5_0)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  sc = ivec2(1);
  uint w[6];
  fetch_block(row + blk * 22u, w);
  dm = vec2(unpackHalf2x16(w[0]).x, 0.0);
  uint qh = mid(w[0], w[1]);
  for (uint i = 0u; i < 4u; i++) { // code x - 16 is x ^ 16 as a 5-bit two's complement
    uint v = mid(w[i + 1u], w[i + 2u]);
    q[i] = sext5(((v & NIB) | hbits(qh, 4u * i)) ^ 0x10101010u);
    q[i + 4u] = sext5((((v >> 4) & NIB) | hbits(qh, 16u + 4u * i)) ^ 0x10101010u);
  }
}
#elif defined(TYPE_Q5_1)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  sc = ivec2(1);
  uint w[6];
  fetch_block(row + blk * 24u, w);
  dm = unpackHalf2x16(w[0]);
  uint qh = w[1];
  for (uint i = 0u; i < 4u; i++) {
    q[i] = (w[i + 2u] & NIB) | hbits(qh, 4u * i);
    q[i + 4u] = ((w[i + 2u] >> 4) & NIB) | hbits(qh, 16u + 4u * i);
  }
}
#elif defined(TYPE_Q8_0)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  sc = ivec2(1);
  uint w[9];
  fetch_block(row + blk * 34u, w);
  dm = vec2(unpackHalf2x16(w[0]).x, 0.0);
  for (uint i = 0u; i < 8u; i++) q[i] = mid(w[i], w[i + 1u]);
}
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  sc = ivec2(1);
  uint b = row + (blk >> 3) * uint(QB), j = blk & 7u;
  uint h[4], w[8];
  fetch_head(b, h);
  vec2 dd = unpackHalf2x16(h[0]);
  float s, mn;
  scale_min_k4(h, j, s, mn);
  dm = vec2(dd.x * s, -(dd.y * mn)); // element = d * s * code - dmin * mn
#if defined(TYPE_Q4_K)
  fetch_32(b + 16u + 32u * (j >> 1), w);
#else
  uint qh[8];
  fetch_32(b + 16u, qh);
  fetch_32(b + 48u + 32u * (j >> 1), w);
#endif
  for (uint i = 0u; i < 8u; i++) {
    q[i] = (j & 1u) != 0u ? (w[i] >> 4) & NIB : w[i] & NIB;
#if defined(TYPE_Q5_K)
    q[i] |= ((qh[i] >> j) & 0x01010101u) << 4;
#endif
  }
}
#elif defined(TYPE_Q6_K)
#define IQ_SCALED 1
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  uint b = row + (blk >> 3) * 210u, sub = blk & 7u, h = sub >> 2, g = sub & 3u;
  uint ql[8], qh[8];
  fetch_32(b + 64u * h + 32u * (g & 1u), ql);
  fetch_32(b + 128u + 32u * h, qh);
  uint s = ld16(b + 192u + 8u * h + 2u * g); // the two int8 scales of this 32
  sc = ivec2(int(s << 24) >> 24, int(s << 16) >> 24);
  dm = vec2(ldh(b + 208u), 0.0);
  for (uint i = 0u; i < 8u; i++) { // code x - 32 is x ^ 32 as a 6-bit two's complement
    uint nib = g >= 2u ? (ql[i] >> 4) & NIB : ql[i] & NIB;
    q[i] = sext6((nib | (((qh[i] >> (2u * g)) & 0x03030303u) << 4)) ^ 0x20202020u);
  }
}
#elif defined(TYPE_Q3_K)
#define IQ_SCALED 1
int iscale_k3(uint s[4], uint is) { // scale_k3 as an integer
  uint lo = (byte16(s, is & 7u) >> (4u * (is >> 3))) & 0xfu;
  uint hi = (byte16(s, 8u + (is & 3u)) >> (2u * (is >> 2))) & 3u;
  return int(lo | (hi << 4)) - 32;
}
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm, out ivec2 sc) {
  uint b = row + (blk >> 3) * 110u, sub = blk & 7u, n = sub >> 2, j = sub & 3u;
  uint hm[8], w[8], s[4];
  fetch_32(b, hm);
  fetch_32(b + 32u + 32u * n, w);
  fetch_scales(b + 96u, s);
  dm = vec2(unpackHalf2x16(s[3]).x, 0.0);
  sc = ivec2(iscale_k3(s, 8u * n + 2u * j), iscale_k3(s, 8u * n + 2u * j + 1u));
  for (uint i = 0u; i < 8u; i++) { // crumb + 4 * hbit - 4: (crumb | hbit << 2) ^ 4 as a 3-bit two's complement
    uint v = ((w[i] >> (2u * j)) & 0x03030303u) | (((hm[i] >> (4u * n + j)) & 0x01010101u) << 2);
    q[i] = sext3(v ^ 0x04040404u);
  }
}
#else
#error "quant_int.glsl: a block type with integer codes is needed"
#endif
