#version 450
#extension GL_GOOGLE_include_directive : require
// y = x / sqrt(mean(x^2) + eps) * w per row; w optional (has_w); in place allowed (each
// invocation reads, then writes, its own elements).
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint d, rows, has_w;
  float eps;
  uint x_off, w_off, y_off, pad;
} p;

#include "util.glsl"
#include "reduce.glsl"
#include "rows.glsl"

void main() {
  uint row = group_index();
  if (row >= p.rows) return; // whole workgroup: uniform
  uint per = row_per(p.d), xb = p.x_off + row * p.d, yb = p.y_off + row * p.d;
  float ss = 0.0;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) ss += x[xb + e] * x[xb + e];
  }
  float inv = inversesqrt(wg_sum(ss) / float(p.d) + p.eps);
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) y[yb + e] = x[xb + e] * inv * (p.has_w != 0u ? w[p.w_off + e] : 1.0);
  }
}
