#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require
// Tiled integer-dot product for prefill at FAST precision: y[row0 + r, c] = w[:, r] . x[:, c] with x quantized
// per 32-element block by quantize_q8.comp (8 words of int8 codes, d, s) and w of a type quant_int.glsl decodes
// (one variant per type; the plain name is Q4_0). Per block, a workgroup stages BM weight blocks as int8 codes
// with (d, m) and BN activation blocks into shared memory; each invocation accumulates a TM x TN register tile:
// an exact int32 dot per block (packed 4 x int8 dots), then acc += float(dot) * (dw * dx), then acc += mw * sx,
// the order icl_ref_matmul_q8 states.
layout(local_size_x_id = 0) in;            // must equal (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint TM = 8;  // at most 8
layout(constant_id = 4) const uint TN = 8;  // at most 8
layout(constant_id = 5) const uint ACC = 0; // 1: y += the product (matmul_add)

#if !defined(TYPE_Q4_1) && !defined(TYPE_Q5_0) && !defined(TYPE_Q5_1) && !defined(TYPE_Q8_0) && \
    !defined(TYPE_Q3_K) && !defined(TYPE_Q4_K) && !defined(TYPE_Q5_K) && !defined(TYPE_Q6_K)
#define TYPE_Q4_0 1
#endif

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint n;                   // columns (tokens) in this dispatch
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of xq's first block and of y
  uint y_stride;            // elements between columns of y
  uint x_len;               // unused
} p;

#include "util.glsl"
#include "quant.glsl"
#include "quant_int.glsl"

// OpSDot (SPV_KHR_integer_dot_product) on 4 x int8 packed in each operand: glslang 12 (Debian 12) has no
// GL_EXT_integer_dot_product, so the instruction is named through GL_EXT_spirv_intrinsics.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int packed_format);

const uint LD = 9; // padded row of 8 code words
shared uint Aq[BM * LD];
shared vec2 Adm[BM];
#ifdef IQ_SCALED
shared ivec2 Asc[BM]; // integer scales of the two 16-element halves (Q3_K, Q6_K)
#endif
shared uint Bq[BN * LD];
shared vec2 Bds[BN];

void main() {
  uint tiles_m = (p.rows + BM - 1u) / BM;
  uint r0 = (gl_WorkGroupID.x % tiles_m) * BM, c0 = gl_WorkGroupID.y * BN;
  uint tx = gl_LocalInvocationID.x % (BM / TM), ty = gl_LocalInvocationID.x / (BM / TM);
  uint nb = p.cols / 32u, rb = row_bytes(p.cols);
  float acc[8][8];
  for (uint i = 0u; i < TM; i++) for (uint j = 0u; j < TN; j++) acc[i][j] = 0.0;
  for (uint blk = 0u; blk < nb; blk++) {
    for (uint r = gl_LocalInvocationID.x; r < BM; r += gl_WorkGroupSize.x) {
      uint q[8];
      vec2 dm = vec2(0.0);
      ivec2 sc = ivec2(0);
      if (r0 + r < p.rows) iq_block(p.w_off + (r0 + r) * rb, blk, q, dm, sc);
      else for (uint k = 0u; k < 8u; k++) q[k] = 0u;
      for (uint k = 0u; k < 8u; k++) Aq[r * LD + k] = q[k];
      Adm[r] = dm;
#ifdef IQ_SCALED
      Asc[r] = sc;
#endif
    }
    for (uint c = gl_LocalInvocationID.x; c < BN; c += gl_WorkGroupSize.x) {
      uint src = p.x_off + ((c0 + c) * nb + blk) * 10u;
      bool ok = c0 + c < p.n;
      for (uint k = 0u; k < 8u; k++) Bq[c * LD + k] = ok ? xq[src + k] : 0u;
      Bds[c] = ok ? uintBitsToFloat(uvec2(xq[src + 8u], xq[src + 9u])) : vec2(0.0);
    }
    barrier();
    int isum[8][8];
    for (uint i = 0u; i < TM; i++) for (uint j = 0u; j < TN; j++) isum[i][j] = 0;
    for (uint k = 0u; k < 8u; k++) {
      uint a[8], b[8];
      for (uint i = 0u; i < TM; i++) a[i] = Aq[(tx + i * (BM / TM)) * LD + k];
      for (uint j = 0u; j < TN; j++) b[j] = Bq[(ty + j * (BN / TN)) * LD + k];
#ifdef IQ_SCALED
      // each half's integer dot times its integer scale: still an exact int32 sum (|sum| < 2^24)
      for (uint i = 0u; i < TM; i++) {
        ivec2 sc = Asc[tx + i * (BM / TM)];
        int s = k < 4u ? sc.x : sc.y;
        for (uint j = 0u; j < TN; j++) isum[i][j] += s * sdot4x8(a[i], b[j], 0);
      }
#else
      for (uint i = 0u; i < TM; i++) for (uint j = 0u; j < TN; j++) isum[i][j] += sdot4x8(a[i], b[j], 0);
#endif
    }
    for (uint i = 0u; i < TM; i++) {
      vec2 dm = Adm[tx + i * (BM / TM)];
      for (uint j = 0u; j < TN; j++) {
        vec2 ds = Bds[ty + j * (BN / TN)];
        acc[i][j] += float(isum[i][j]) * (dm.x * ds.x);
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
        acc[i][j] += dm.y * ds.y;
#endif
      }
    }
    barrier();
  }
  for (uint i = 0u; i < TM; i++) {
    uint r = r0 + tx + i * (BM / TM);
    for (uint j = 0u; j < TN; j++) {
      uint c = c0 + ty + j * (BN / TN);
      uint at = p.y_off + c * p.y_stride + p.row0 + r;
      if (r < p.rows && c < p.n) y[at] = ACC != 0u ? y[at] + acc[i][j] : acc[i][j];
    }
  }
}
