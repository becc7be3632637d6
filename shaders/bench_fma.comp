#version 450
#extension GL_GOOGLE_include_directive : require
// Arithmetic ceiling: 8 independent vec4 multiply-add chains per invocation (enough to hide FMA
// latency), `iters` rounds; 64 flops per round per invocation.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint iters, threads;
  float m, c;
} p;

#include "util.glsl"

void main() {
  uint g = global_index();
  if (g >= p.threads) return;
  vec4 x[8];
  for (uint i = 0u; i < 8u; i++) x[i] = vec4(float(g + i), float(i), 1.0, -1.0) * 1e-3;
  for (uint it = 0u; it < p.iters; it++)
    for (uint i = 0u; i < 8u; i++) x[i] = fma(x[i], vec4(p.m), vec4(p.c));
  vec4 s = vec4(0.0);
  for (uint i = 0u; i < 8u; i++) s += x[i];
  o[g] = s.x + s.y + s.z + s.w;
}
