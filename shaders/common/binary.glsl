// y = OP(a, b) where b has a's row width d and either a's row count or one row (broadcast).
// The including file defines OP(a, b). In place (y == a) is fine: each element is read, then
// written, by the same invocation.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint n, d, b_bcast;  // elements of a; row width; 1 when b is a single row
  uint a_off, b_off, y_off;
} p;

#include "util.glsl"
#include "eltwise.glsl"

void main() {
  uint e0 = elt_first();
  for (uint k = 0u; k < PER; k++) {
    uint e = e0 + k;
    if (e >= p.n) return;
    uint be = p.b_bcast != 0u ? e % p.d : e;
    y[p.y_off + e] = OP(a[p.a_off + e], b[p.b_off + be]);
  }
}
