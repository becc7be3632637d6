// y = OP(x) elementwise, with a scalar s available to OP; in place allowed. The including file
// defines OP(v).
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint n, x_off, y_off;
  float s;
} p;

#include "util.glsl"
#include "eltwise.glsl"
#include "act.glsl"

void main() {
  uint e0 = elt_first();
  for (uint k = 0u; k < PER; k++) {
    uint e = e0 + k;
    if (e >= p.n) return;
    y[p.y_off + e] = OP(x[p.x_off + e]);
  }
}
