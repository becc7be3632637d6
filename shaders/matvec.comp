#version 450
#extension GL_GOOGLE_include_directive : require
// Matrix-vector product for decode: y[row0 + r, col] = w[:, r] . x[:, col] (w any weight type,
// one variant per type). Two shapes, chosen by the host per device type:
//   TPR == WG (GPUs): the workgroup shares NR rows; invocations stride over 32-element chunks,
//     then a subgroup + shared-memory reduction (any subgroup size).
//   TPR == 1 (CPU devices such as lavapipe): each invocation owns NR rows and walks them whole,
//     so it reads contiguous blocks, which is what llvmpipe's loads are fast at.
// Each loaded x chunk is reused for the NR rows.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 1;  // threads per row group: 1 or the workgroup size
layout(constant_id = 2) const uint NR = 1;   // rows per row group (at most 8)
layout(constant_id = 3) const uint ACC = 0; // 1: y += the product (the residual add, fused: exactly what add gives)

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x and y
  uint y_stride;            // elements between columns of y (all rows of the matrix)
  uint pad;
} p;

#include "util.glsl"
#include "reduce.glsl"
#include "quant.glsl"

void load_x(uint base, uint valid, out vec4 xv[8]) {
  for (uint i = 0u; i < 8u; i++) {
    vec4 t;
    for (uint k = 0u; k < 4u; k++) t[k] = 4u * i + k < valid ? x[base + 4u * i + k] : 0.0;
    xv[i] = t;
  }
}

void main() {
  uint groups = gl_WorkGroupSize.x / TPR, lane = gl_LocalInvocationID.x % TPR;
  uint first = (group_index() * groups + gl_LocalInvocationID.x / TPR) * NR;
  uint col = gl_WorkGroupID.z, nch = (p.cols + 31u) / 32u, rb = row_bytes(p.cols);
  uint xb = p.x_off + col * p.cols;
  float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  for (uint ch = lane; ch < nch; ch += TPR) {
    uint valid = min(32u, p.cols - 32u * ch);
    vec4 xv[8], wv[8];
    load_x(xb + 32u * ch, valid, xv);
    for (uint r = 0u; r < NR; r++) {
      if (first + r >= p.rows) break;
      dq_chunk(p.w_off + (first + r) * rb, ch, valid, wv);
      vec4 s = wv[0] * xv[0];
      for (uint i = 1u; i < 8u; i++) s += wv[i] * xv[i];
      acc[r] += s.x + s.y + s.z + s.w;
    }
  }
  for (uint r = 0u; r < NR; r++) {
    float t = TPR > 1u ? wg_sum(acc[r]) : acc[r]; // uniform branch: TPR is a constant
    uint at = p.y_off + col * p.y_stride + p.row0 + first + r;
    if (lane == 0u && first + r < p.rows) y[at] = ACC != 0u ? y[at] + t : t;
  }
}
