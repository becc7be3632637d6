#version 450
#extension GL_GOOGLE_include_directive : require
// Reduced logits: per row of x [d], o = (x[ids[0]], ..., x[ids[k-1]], log sum exp x), so only k + 1 floats per
// row go back to the host. Max, then the shifted sum (two workgroup reductions); a row of -inf gives -inf.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint d, rows, k, x_off, ids_off, o_off;
} p;

#include "util.glsl"
#include "reduce.glsl"
#include "rows.glsl"

void main() {
  uint row = group_index();
  if (row >= p.rows) return;
  uint per = row_per(p.d), xb = p.x_off + row * p.d, ob = p.o_off + row * (p.k + 1u);
  float m = -1.0 / 0.0;
  for (uint e = 0u; e < per; e++) {
    uint i = row_elem(e, per);
    if (i < p.d) m = max(m, x[xb + i]);
  }
  m = wg_max(m);
  float s = 0.0;
  for (uint e = 0u; e < per; e++) {
    uint i = row_elem(e, per);
    if (i < p.d && !(isinf(m) && m < 0.0)) s += exp(x[xb + i] - m);
  }
  s = wg_sum(s);
  for (uint j = gl_LocalInvocationID.x; j < p.k; j += gl_WorkGroupSize.x) o[ob + j] = x[xb + uint(ids[p.ids_off + j])];
  if (gl_LocalInvocationID.x == 0u) o[ob + p.k] = isinf(m) && m < 0.0 ? m : m + log(s);
}
