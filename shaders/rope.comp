#version 450
#extension GL_GOOGLE_include_directive : require
// RoPE in place on x[hd, nh, n] at positions pos[n], first n_rot dims of each head. One
// invocation per rotated pair: (2i, 2i+1) in normal mode, (i, i + n_rot/2) in neox mode.
// The angle is reduced to [-pi, pi) in turns before sin/cos, whose precision Vulkan only
// bounds on that interval.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pos { int pos[]; };

layout(push_constant) uniform P {
  uint hd, nh, n, n_rot;
  float log2_base;
  uint neox, x_off, pos_off;
} p;

#include "util.glsl"

void main() {
  uint half_rot = p.n_rot / 2u, g = global_index();
  if (g >= half_rot * p.nh * p.n) return;
  uint i = g % half_rot, h = (g / half_rot) % p.nh, t = g / (half_rot * p.nh);
  float inv_freq = exp2(-2.0 * float(i) / float(p.n_rot) * p.log2_base);
  float turns = float(pos[p.pos_off + t]) * (inv_freq * 0.15915494309189535);
  float theta = (turns - round(turns)) * 6.283185307179586;
  float c = cos(theta), s = sin(theta);
  uint base = p.x_off + (t * p.nh + h) * p.hd;
  uint a = base + (p.neox != 0u ? i : 2u * i), b = base + (p.neox != 0u ? i + half_rot : 2u * i + 1u);
  float x0 = x[a], x1 = x[b];
  x[a] = x0 * c - x1 * s;
  x[b] = x0 * s + x1 * c;
}
