#version 450
#extension GL_GOOGLE_include_directive : require
// out[row] = index of the first maximum of the row: the maximum value, then the smallest index
// holding it (two workgroup reductions).
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { int o[]; };

layout(push_constant) uniform P {
  uint d, rows, x_off, o_off;
} p;

#include "util.glsl"
#include "reduce.glsl"
#include "rows.glsl"

void main() {
  uint row = group_index();
  if (row >= p.rows) return;
  uint per = row_per(p.d), xb = p.x_off + row * p.d;
  float m = -1.0 / 0.0;
  uint best = 0xffffffffu;
  for (uint k = 0u; k < per; k++) {
    uint e = row_elem(k, per);
    if (e < p.d && (x[xb + e] > m || best == 0xffffffffu || (x[xb + e] == m && e < best))) {
      m = x[xb + e];
      best = e;
    }
  }
  float gm = wg_max(m);
  uint gi = wg_min_u(m == gm ? best : 0xffffffffu);
  if (gl_LocalInvocationID.x == 0u) o[p.o_off + row] = int(gi == 0xffffffffu ? 0u : gi);
}
