#version 450
#extension GL_GOOGLE_include_directive : require
// y = x / sqrt(mean(x^2) + eps) * w per row; w optional (has_w); in place allowed (each invocation reads, then
// writes, its own elements; the sum of squares is complete before any write).
// ADD = 1 (rms_norm_add, Gemma's post-norms): y += that instead, x left as it is; each element the bits of the norm
// stored then add(y, normed, y).
layout(local_size_x_id = 0) in;
layout(constant_id = 2) const uint ADD = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint d, rows, has_w;
  float eps;
  uint x_off, w_off, y_off, pad;
} p;

#include "util.glsl"
#include "rows.glsl"

void load_x(uint o, uint valid, out vec4 v[8]) {
  for (uint i = 0u; i < 8u; i++)
    for (uint k = 0u; k < 4u; k++) v[i][k] = 4u * i + k < valid ? x[o + 4u * i + k] : 0.0;
}
#include "norm.glsl"

void main() {
  uint row = group_index();
  if (row >= p.rows) return; // whole workgroup: uniform
  uint per = row_per(p.d), xb = p.x_off + row * p.d, yb = p.y_off + row * p.d;
  float inv = norm_inv(xb, p.d, p.eps);
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e >= p.d) continue;
    precise float v = x[xb + e] * inv * (p.has_w != 0u ? w[p.w_off + e] : 1.0);
    if (ADD != 0u) {
      precise float s = y[yb + e] + v;
      y[yb + e] = s;
    } else {
      y[yb + e] = v;
    }
  }
}
