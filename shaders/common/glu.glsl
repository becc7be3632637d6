// y = ACT(gate) * up elementwise (gated FFN); y may alias gate. The including file defines ACT(v).
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint n, g_off, u_off, y_off;
} p;

#include "util.glsl"
#include "eltwise.glsl"
#include "act.glsl"

void main() {
  uint e0 = elt_first();
  for (uint k = 0u; k < PER; k++) {
    uint e = e0 + k;
    if (e >= p.n) return;
    y[p.y_off + e] = ACT(g[p.g_off + e]) * u[p.u_off + e];
  }
}
