#version 450
#extension GL_GOOGLE_include_directive : require
// Bandwidth ceiling: stream a buffer once and sum it (the sums are written so the loads stay).
// CONTIG != 0: invocation g reads the contiguous vec4s [g*per, (g+1)*per) (the pattern lavapipe
// is fast at); CONTIG == 0: neighbouring invocations read neighbouring vec4s (GPU coalescing).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CONTIG = 1;

layout(std430, binding = 0) readonly buffer A { vec4 a[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint per, threads;
} p;

#include "util.glsl"

void main() {
  uint g = global_index();
  if (g >= p.threads) return;
  vec4 s = vec4(0.0);
  for (uint k = 0u; k < p.per; k++) s += a[CONTIG != 0u ? g * p.per + k : g + k * p.threads];
  o[g] = s.x + s.y + s.z + s.w;
}
