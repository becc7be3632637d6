#version 450
#extension GL_GOOGLE_include_directive : require
// y = (x - mean) / sqrt(var + eps) * w + b per row; w and b optional; in place allowed.
// Variance from the centred values (two reductions) so large means do not cancel.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) readonly buffer Bi { float bias[]; };
layout(std430, binding = 3) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint d, rows, has_w, has_b;
  float eps;
  uint x_off, w_off, b_off, y_off;
} p;

#include "util.glsl"
#include "reduce.glsl"
#include "rows.glsl"

void main() {
  uint row = group_index();
  if (row >= p.rows) return;
  uint per = row_per(p.d), xb = p.x_off + row * p.d, yb = p.y_off + row * p.d;
  float s = 0.0;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) s += x[xb + e];
  }
  float mean = wg_sum(s) / float(p.d), ss = 0.0;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) ss += (x[xb + e] - mean) * (x[xb + e] - mean);
  }
  float inv = inversesqrt(wg_sum(ss) / float(p.d) + p.eps);
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e >= p.d) continue;
    float v = (x[xb + e] - mean) * inv;
    if (p.has_w != 0u) v *= w[p.w_off + e];
    if (p.has_b != 0u) v += bias[p.b_off + e];
    y[yb + e] = v;
  }
}
