#version 450
#extension GL_GOOGLE_include_directive : require
// out[cols, n] f32 = rows ids[i] of a weight matrix of any type (one variant per type).
// One invocation decodes one 32-element chunk of one selected row (a contiguous block read).
// A matrix above maxStorageBufferRange is bound in row ranges: this dispatch writes only the
// ids whose row lies in [row_lo, row_hi); w_off is the byte offset of row row_lo in the binding.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint cols, n_ids, row_lo, row_hi;
  uint w_off, ids_off, o_off, pad;
} p;

#include "util.glsl"
#include "quant.glsl"

void main() {
  uint nch = (p.cols + 31u) / 32u, g = global_index();
  if (g >= nch * p.n_ids) return;
  uint i = g / nch, ch = g % nch;
  int row = ids[p.ids_off + i];
  if (row < int(p.row_lo) || row >= int(p.row_hi)) return;
  uint valid = min(32u, p.cols - 32u * ch);
  vec4 v[8];
  dq_chunk(p.w_off + uint(row - int(p.row_lo)) * row_bytes(p.cols), ch, valid, v);
  uint dst = p.o_off + i * p.cols + 32u * ch;
  for (uint k = 0u; k < valid; k++) o[dst + k] = v[k >> 2][k & 3u];
}
