#version 450
#extension GL_GOOGLE_include_directive : require
// Tiled matrix product for prefill: y[row0 + r, c] = w[:, r] . x[:, c] for n > 1 columns
// (w any weight type, one variant per type). A workgroup computes a BM x BN output tile; per
// 32-wide step of K it dequantizes BM weight chunks into shared memory (one contiguous block per
// invocation) and stages BN x 32 activations, then each invocation accumulates a TM x TN
// register tile, so every shared load feeds TM or TN multiply-adds.
layout(local_size_x_id = 0) in;            // must equal (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint TM = 8;  // at most 8
layout(constant_id = 4) const uint TN = 8;  // at most 8
layout(constant_id = 5) const uint ACC = 0; // 1: y += the product (the residual add, fused: exactly what add gives)

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint n;                   // columns (tokens) in this dispatch
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x and y
  uint y_stride;            // elements between columns of y
  uint x_len;               // (matmul_cpu.comp only)
} p;

#include "util.glsl"
#include "quant.glsl"

const uint LD = 33; // padded leading dimension of the shared tiles
shared float As[BM * LD];
shared float Bs[BN * LD];

void stage_w(uint r0, uint ch, uint valid, uint rb) {
  for (uint r = gl_LocalInvocationID.x; r < BM; r += gl_WorkGroupSize.x) {
    vec4 v[8];
    if (r0 + r < p.rows) dq_chunk(p.w_off + (r0 + r) * rb, ch, valid, v);
    else for (uint i = 0u; i < 8u; i++) v[i] = vec4(0.0);
    for (uint k = 0u; k < 32u; k++) As[r * LD + k] = v[k >> 2][k & 3u];
  }
}

void stage_x(uint c0, uint ch, uint valid) {
  // BN x 32 floats; invocation t loads a contiguous run of 8 of one column
  for (uint e = gl_LocalInvocationID.x; e < BN * 4u; e += gl_WorkGroupSize.x) {
    uint c = e >> 2, k0 = (e & 3u) * 8u;
    uint base = p.x_off + (c0 + c) * p.cols + 32u * ch + k0;
    for (uint k = 0u; k < 8u; k++)
      Bs[c * LD + k0 + k] = (c0 + c < p.n && k0 + k < valid) ? x[base + k] : 0.0;
  }
}

void main() {
  uint tiles_m = (p.rows + BM - 1u) / BM;
  uint r0 = (gl_WorkGroupID.x % tiles_m) * BM, c0 = gl_WorkGroupID.y * BN;
  uint tx = gl_LocalInvocationID.x % (BM / TM), ty = gl_LocalInvocationID.x / (BM / TM);
  uint nch = (p.cols + 31u) / 32u, rb = row_bytes(p.cols);
  float acc[8][8];
  for (uint i = 0u; i < TM; i++) for (uint j = 0u; j < TN; j++) acc[i][j] = 0.0;
  for (uint ch = 0u; ch < nch; ch++) {
    uint valid = min(32u, p.cols - 32u * ch);
    stage_w(r0, ch, valid, rb);
    stage_x(c0, ch, valid);
    barrier();
    for (uint k = 0u; k < 32u; k++) {
      float a[8], b[8];
      for (uint i = 0u; i < TM; i++) a[i] = As[(tx + i * (BM / TM)) * LD + k];
      for (uint j = 0u; j < TN; j++) b[j] = Bs[(ty + j * (BN / TN)) * LD + k];
      for (uint i = 0u; i < TM; i++) for (uint j = 0u; j < TN; j++) acc[i][j] += a[i] * b[j];
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
