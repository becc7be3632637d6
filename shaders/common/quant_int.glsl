// Integer decoding of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) for the integer-dot matmul.
// Include after quant.glsl (its fetch_block and field helpers). iq_block(row, blk, q, dm): block blk of the row
// starting at byte `row` as 8 words of 4 signed int8 codes (word i holds elements 4i..4i+3, element 4i in the
// low byte) and dm = (d, m) with element = d * code + m (m = 0 for the symmetric types).

uint sext4(uint y) { return y | ((y & 0x08080808u) * 0x1eu); } // 4-bit two's-complement fields -> int8 bytes
uint sext5(uint y) { return y | ((y & 0x10101010u) * 0x0eu); } // 5-bit ones
// bits first..first+3 of qh, each moved to bit 4 of its byte (the 5th bit of 4 codes)
uint hbits(uint qh, uint first) {
  uint b = (qh >> first) & 0xfu;
  return ((b & 1u) | ((b & 2u) << 7) | ((b & 4u) << 14) | ((b & 8u) << 21)) << 4;
}
const uint NIB = 0x0f0f0f0fu;

#if defined(TYPE_Q4_0)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm) {
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
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm) {
  uint w[5];
  fetch_block(row + blk * 20u, w);
  dm = unpackHalf2x16(w[0]);
  for (uint i = 0u; i < 4u; i++) {
    q[i] = w[i + 1u] & NIB;
    q[i + 4u] = (w[i + 1u] >> 4) & NIB;
  }
}
#elif defined(TYPE_Q5_0)
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm) {
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
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm) {
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
void iq_block(uint row, uint blk, out uint q[8], out vec2 dm) {
  uint w[9];
  fetch_block(row + blk * 34u, w);
  dm = vec2(unpackHalf2x16(w[0]).x, 0.0);
  for (uint i = 0u; i < 8u; i++) q[i] = mid(w[i], w[i + 1u]);
}
#else
#error "quant_int.glsl: a 32-element block type is needed"
#endif
