#version 450
#extension GL_GOOGLE_include_directive : require
// Activations for the integer-dot matmul (FAST precision): each 32-element block of each column of x[cols, n]
// becomes 10 words: 8 words of int8 codes q = roundEven(x / d) (4 per word, element 4i in word i's low byte),
// d = max|x| / 127 and s = d * sum(q), the term the weight types with a minimum need. One invocation per block.
// cols is a multiple of 32 (the weight types it serves have 32-element blocks).
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Q { uint q[]; };

layout(push_constant) uniform P {
  uint cols, n;
  uint x_off; // word offset of column 0 in X
  uint q_off; // word offset of column 0's first block in Q
} p;

#include "util.glsl"

void main() {
  uint nb = p.cols / 32u, g = global_index();
  if (g >= nb * p.n) return;
  uint base = p.x_off + g * 32u; // columns are contiguous, so block g of the whole x
  vec4 v[8];
  float amax = 0.0;
  for (uint i = 0u; i < 8u; i++) {
    v[i] = vec4(x[base + 4u * i], x[base + 4u * i + 1u], x[base + 4u * i + 2u], x[base + 4u * i + 3u]);
    vec4 a = abs(v[i]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  float d = amax / 127.0, id = d > 0.0 ? 1.0 / d : 0.0;
  int sum = 0;
  uint dst = p.q_off + g * 10u;
  for (uint i = 0u; i < 8u; i++) {
    ivec4 c = clamp(ivec4(roundEven(v[i] * id)), ivec4(-127), ivec4(127));
    sum += c.x + c.y + c.z + c.w;
    uvec4 b = uvec4(c) & 0xffu;
    q[dst + i] = b.x | (b.y << 8) | (b.z << 16) | (b.w << 24);
  }
  q[dst + 8u] = floatBitsToUint(d);
  q[dst + 9u] = floatBitsToUint(d * float(sum));
}
