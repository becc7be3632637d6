#version 450
#extension GL_GOOGLE_include_directive : require
// Per-head RMS norms of q [hd, nh, n] (weight w) and k [hd, nh2, n] (weight w2), in place, then RoPE of both at
// positions pos[n] (first n_rot dims of each head): Gemma 3's q/k norms with RoPE in one dispatch. One workgroup
// per head row (q's rows, then k's); the sum of squares is norm.glsl's (rms_norm.comp's order), each element
// x * inv * w as rms_norm stores it, then rotated as rope.comp rotates (rope.glsl), so the result is the bits of
// rms_norm, rms_norm, rope_pair.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pos { int pos[]; };
layout(std430, binding = 2) buffer X2 { float x2[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) readonly buffer W2 { float w2[]; };

layout(push_constant) uniform P {
  uint hd, nh, n, n_rot;
  float log2_base;
  uint neox, x_off, pos_off;
  uint nh2, x2_off, w_off, w2_off;
  float eps;
} p;

#include "util.glsl"
#include "rope.glsl"

bool g_k = false; // this workgroup's row is one of k's (uniform across the workgroup)
float xr(uint i) { return g_k ? x2[i] : x[i]; }
void xw(uint i, float v) {
  if (g_k) x2[i] = v;
  else x[i] = v;
}
float wr(uint i) { return g_k ? w2[p.w2_off + i] : w[p.w_off + i]; }
void load_x(uint o, uint valid, out vec4 v[8]) {
  for (uint i = 0u; i < 8u; i++)
    for (uint k = 0u; k < 4u; k++) v[i][k] = 4u * i + k < valid ? xr(o + 4u * i + k) : 0.0;
}
#include "norm.glsl"

void main() {
  uint row = group_index(), qrows = p.nh * p.n;
  if (row >= qrows + p.nh2 * p.n) return; // whole workgroup: uniform
  g_k = row >= qrows;
  uint r = g_k ? row - qrows : row, t = r / (g_k ? p.nh2 : p.nh);
  uint base = (g_k ? p.x2_off : p.x_off) + r * p.hd, half_rot = p.n_rot / 2u;
  float inv = norm_inv(base, p.hd, p.eps); // ends with a barrier: every read of the sum is done before any write
  int ps = pos[p.pos_off + t];
  for (uint i = gl_LocalInvocationID.x; i < half_rot; i += gl_WorkGroupSize.x) {
    uint ia = p.neox != 0u ? i : 2u * i, ib = p.neox != 0u ? i + half_rot : 2u * i + 1u;
    precise float h0 = xr(base + ia) * inv * wr(ia), h1 = xr(base + ib) * inv * wr(ib);
    float c, s, r0, r1;
    rope_cs(i, p.n_rot, p.log2_base, ps, c, s);
    rope_rot(h0, h1, c, s, r0, r1);
    xw(base + ia, r0);
    xw(base + ib, r1);
  }
  for (uint e = p.n_rot + gl_LocalInvocationID.x; e < p.hd; e += gl_WorkGroupSize.x) { // dims past n_rot: normed only
    precise float h = xr(base + e) * inv * wr(e);
    xw(base + e, h);
  }
}
