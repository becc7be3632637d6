#version 450
#extension GL_GOOGLE_include_directive : require
// Matrix-vector product for CPU devices (lavapipe): y[row0 + r] = w[:, r] . x (n = 1).
// On llvmpipe a storage-buffer load costs about the same per instruction whatever its width or
// address pattern, while uniform-buffer loads at addresses shared by the subgroup are several
// times cheaper. So: x lives in a uniform buffer (the same chunk for every invocation), each
// invocation owns NR whole rows and decodes them with 16-byte loads, and each x chunk is reused
// for the NR rows. The host uses the GPU-shaped matvec.comp when x exceeds maxUniformBufferRange.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NR = 8;     // rows per invocation (at most 8)
layout(constant_id = 2) const uint XLEN = 16;  // declared vec4s of x (the bound range is x_len)
layout(constant_id = 3) const uint ACC = 0; // 1: y += the product (the residual add, fused: exactly what add gives)

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std140, binding = 1) uniform X { vec4 xu[XLEN]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x and y
  uint x_len;               // vec4s in the bound x range
  uint pad;
} p;

#include "util.glsl"
#include "quant.glsl"
#include "ubo_x.glsl"

// One row's contribution, written out per row (no dynamically indexed accumulator array, which
// llvmpipe would keep in per-lane scratch memory). Rows past the range re-read the last row.
#define ROW(r)                                                              \
  if (NR > r) {                                                             \
    dq_chunk(p.w_off + min(first + r, p.rows - 1u) * rb, ch, valid, wv);    \
    acc##r += dot32(wv, xv);                                                \
  }
#define STORE(r)                                 \
  if (NR > r && first + r < p.rows) {            \
    uint at = p.y_off + p.row0 + first + r;      \
    y[at] = ACC != 0u ? y[at] + acc##r : acc##r; \
  }

void main() {
  uint first = global_index() * NR, nch = (p.cols + 31u) / 32u, rb = row_bytes(p.cols);
  float acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0, acc4 = 0.0, acc5 = 0.0, acc6 = 0.0, acc7 = 0.0;
  for (uint ch = 0u; ch < nch; ch++) {
    uint valid = min(32u, p.cols - 32u * ch);
    vec4 xv[8], wv[8];
    load_x(p.x_off + 32u * ch, valid, xv);
    ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
  }
  STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5) STORE(6) STORE(7)
}
