#version 450
#extension GL_GOOGLE_include_directive : require
// Matrix product for CPU devices (lavapipe), n > 1: y[row0 + r, t0 + t] = w[:, r] . x[:, t0 + t].
// Same reasoning as matvec_cpu.comp: storage loads are expensive per instruction and uniform-
// buffer loads shared by the subgroup are cheap, registers (private variables) are cheapest.
// The host binds a window of x columns as a uniform buffer; each workgroup takes TN of them and
// each invocation TM whole rows: per 32-wide step of K it decodes its TM weight chunks once
// (16-byte loads), then for each of the TN columns loads the x chunk (uniform) and does TM dot
// products. Accumulators are named per row and indexed by literal token numbers (macros), so
// nothing is kept in dynamically indexed arrays, which llvmpipe spills to per-lane scratch.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TM = 8;     // rows per invocation (1..8)
layout(constant_id = 2) const uint TN = 8;     // columns per workgroup (1..8)
layout(constant_id = 3) const uint XLEN = 16;  // declared vec4s of x (the bound window is x_len)
layout(constant_id = 4) const uint ACC = 0; // 1: y += the product (the residual add, fused: exactly what add gives)

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std140, binding = 1) uniform X { vec4 xu[XLEN]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint n;                   // columns in the x window
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x (in the window) and y
  uint y_stride;            // elements between columns of y
  uint x_len;               // vec4s in the bound x window
} p;

#include "util.glsl"
#include "quant.glsl"
#include "ubo_x.glsl"

#define DQ(r) if (TM > r) dq_chunk(p.w_off + min(first + r, p.rows - 1u) * rb, ch, valid, w##r);
#define TOK(t)                                                                  \
  if (TN > t) {                                                                 \
    load_x(p.x_off + min(c0 + t, p.n - 1u) * p.cols + 32u * ch, valid, xv);   \
    a0[t] += dot32(w0, xv);                                                     \
    if (TM > 1) a1[t] += dot32(w1, xv);                                         \
    if (TM > 2) a2[t] += dot32(w2, xv);                                         \
    if (TM > 3) a3[t] += dot32(w3, xv);                                         \
    if (TM > 4) a4[t] += dot32(w4, xv);                                         \
    if (TM > 5) a5[t] += dot32(w5, xv);                                         \
    if (TM > 6) a6[t] += dot32(w6, xv);                                         \
    if (TM > 7) a7[t] += dot32(w7, xv);                                         \
  }
#define STORE(r)                                                                \
  if (TM > r && first + r < p.rows)                                             \
    for (uint t = 0u; t < TN; t++)                                              \
      if (c0 + t < p.n) {                                                       \
        uint at = p.y_off + (c0 + t) * p.y_stride + p.row0 + first + r;         \
        y[at] = ACC != 0u ? y[at] + a##r[t] : a##r[t];                          \
      }

void main() {
  uint first = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TM, c0 = gl_WorkGroupID.y * TN;
  uint nch = (p.cols + 31u) / 32u, rb = row_bytes(p.cols);
  float a0[8], a1[8], a2[8], a3[8], a4[8], a5[8], a6[8], a7[8];
  for (uint t = 0u; t < 8u; t++) a0[t] = a1[t] = a2[t] = a3[t] = a4[t] = a5[t] = a6[t] = a7[t] = 0.0;
  for (uint ch = 0u; ch < nch; ch++) {
    uint valid = min(32u, p.cols - 32u * ch);
    vec4 w0[8], w1[8], w2[8], w3[8], w4[8], w5[8], w6[8], w7[8], xv[8];
    DQ(0) DQ(1) DQ(2) DQ(3) DQ(4) DQ(5) DQ(6) DQ(7)
    TOK(0) TOK(1) TOK(2) TOK(3) TOK(4) TOK(5) TOK(6) TOK(7)
  }
  STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5) STORE(6) STORE(7)
}
