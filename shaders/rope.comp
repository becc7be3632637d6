#version 450
#extension GL_GOOGLE_include_directive : require
// RoPE in place on x[hd, nh, n] at positions pos[n], first n_rot dims of each head. One
// invocation per rotated pair: (2i, 2i+1) in normal mode, (i, i + n_rot/2) in neox mode.
// The angle and the rotation are rope.glsl's (rms_rope.comp uses the same).
// PAIR (variant rope_pair): queries and keys of the same positions in one dispatch, heads 0..nh-1 of x and
// then nh2 heads of x2, each element computed as the lone dispatch computes it.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pos { int pos[]; };
#ifdef PAIR
layout(std430, binding = 2) buffer X2 { float x2[]; };
#endif

layout(push_constant) uniform P {
  uint hd, nh, n, n_rot;
  float log2_base;
  uint neox, x_off, pos_off;
#ifdef PAIR
  uint nh2, x2_off;
#endif
} p;

#include "util.glsl"
#include "rope.glsl"

void main() {
  uint half_rot = p.n_rot / 2u, g = global_index();
#ifdef PAIR
  uint heads = p.nh + p.nh2;
#else
  uint heads = p.nh;
#endif
  if (g >= half_rot * heads * p.n) return;
  uint i = g % half_rot, h = (g / half_rot) % heads, t = g / (half_rot * heads);
  float c, s;
  rope_cs(i, p.n_rot, p.log2_base, pos[p.pos_off + t], c, s);
  uint ia = p.neox != 0u ? i : 2u * i, ib = p.neox != 0u ? i + half_rot : 2u * i + 1u;
#ifdef PAIR
  if (h >= p.nh) {
    uint base2 = p.x2_off + (t * p.nh2 + h - p.nh) * p.hd;
    float r0, r1;
    rope_rot(x2[base2 + ia], x2[base2 + ib], c, s, r0, r1);
    x2[base2 + ia] = r0;
    x2[base2 + ib] = r1;
    return;
  }
#endif
  uint base = p.x_off + (t * p.nh + h) * p.hd;
  float r0, r1;
  rope_rot(x[base + ia], x[base + ib], c, s, r0, r1);
  x[base + ia] = r0;
  x[base + ib] = r1;
}
