#version 450
#extension GL_GOOGLE_include_directive : require
// 2-D strided fill (ablation): dst[off + r*stride + c] = value.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) writeonly buffer D { float d[]; };

layout(push_constant) uniform P {
  uint rows, cols, off, stride;
  float value;
} p;

#include "util.glsl"
#include "eltwise.glsl"

void main() {
  uint e0 = elt_first();
  for (uint k = 0u; k < PER; k++) {
    uint e = e0 + k;
    if (e >= p.rows * p.cols) return;
    d[p.off + (e / p.cols) * p.stride + e % p.cols] = p.value;
  }
}
