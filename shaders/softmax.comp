#version 450
#extension GL_GOOGLE_include_directive : require
// Row softmax over d; in place allowed. A row of -inf gives zeros rather than NaN.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint d, rows, x_off, y_off;
} p;

#include "util.glsl"
#include "reduce.glsl"
#include "rows.glsl"

void main() {
  uint row = group_index();
  if (row >= p.rows) return;
  uint per = row_per(p.d), xb = p.x_off + row * p.d, yb = p.y_off + row * p.d;
  float m = -1.0 / 0.0;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) m = max(m, x[xb + e]);
  }
  m = wg_max(m);
  float s = 0.0;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) s += exp(x[xb + e] - m);
  }
  s = wg_sum(s);
  float inv = s > 0.0 ? 1.0 / s : 0.0;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d) y[yb + e] = isinf(m) && m < 0.0 ? 0.0 : exp(x[xb + e] - m) * inv;
  }
}
