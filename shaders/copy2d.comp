#version 450
#extension GL_GOOGLE_include_directive : require
// 2-D strided f32 copy (hook captures): dst[dst_off + r*dst_stride + c] = src[src_off + r*src_stride + c].
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer S { float s[]; };
layout(std430, binding = 1) writeonly buffer D { float d[]; };

layout(push_constant) uniform P {
  uint rows, cols, src_off, src_stride, dst_off, dst_stride;
} p;

#include "util.glsl"
#include "eltwise.glsl"

void main() {
  uint e0 = elt_first();
  for (uint k = 0u; k < PER; k++) {
    uint e = e0 + k;
    if (e >= p.rows * p.cols) return;
    uint r = e / p.cols, c = e % p.cols;
    d[p.dst_off + r * p.dst_stride + c] = s[p.src_off + r * p.src_stride + c];
  }
}
