#version 450
#extension GL_GOOGLE_include_directive : require
// Causal attention for one (query, head) per workgroup, streaming the keys in chunks of WG with
// a running max and sum (online softmax), so any context length fits in registers:
//   score of key j (one invocation per key: a contiguous k row) = q.k * scale, soft-capped, plus
//   the mask; keys after the query's position or outside the window are skipped;
//   each invocation owns DPT output dims (contiguous on CPU devices, strided on GPUs) and adds
//   p_j * v_j over the chunk.
// With a pattern output the raw scores are written in the loop and normalised at the end by the
// same invocation that wrote them (so no barrier is needed between the two).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CONTIG = 0;
layout(constant_id = 2) const uint DPT = 8;   // output dims per invocation (hd <= DPT * WG)
layout(constant_id = 3) const uint MAXHD = 256;
layout(constant_id = 4) const uint PATTERN_ONLY = 0; // the pattern beside attention_flash.comp's output: o untouched

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer M { float mask[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };
layout(std430, binding = 5) buffer Pat { float pat[]; };

layout(push_constant) uniform P {
  uint hd, nh, nkvh, nq, nkv;
  int n_past;
  float scale;
  int window;
  float softcap;
  uint has_mask, has_pattern;
  uint q_off, k_off, v_off, m_off, o_off, p_off;
} p;

#include "util.glsl"
#include "reduce.glsl"

shared float qs[MAXHD];
shared float ps[gl_WorkGroupSize.x];

uint dim_of(uint k) {
  uint t = gl_LocalInvocationID.x;
  return CONTIG != 0u ? t * DPT + k : t + k * gl_WorkGroupSize.x;
}

float score(uint j, uint kv_base, uint mrow) {
  uint kb = p.k_off + j * p.nkvh * p.hd + kv_base;
  float s = 0.0;
  for (uint d = 0u; d < p.hd; d++) s += qs[d] * k[kb + d];
  s *= p.scale;
  if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);
  if (p.has_mask != 0u) s += mask[p.m_off + mrow + j];
  return s;
}

void main() {
  const float NEG_INF = -1.0 / 0.0;
  uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, t = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint kvh = h / (p.nh / p.nkvh), kv_base = kvh * p.hd, mrow = (h * p.nq + i) * p.nkv;
  int qpos = p.n_past + int(i);
  int lo = p.window > 0 ? max(0, qpos - p.window + 1) : 0;
  int hi = min(qpos, int(p.nkv) - 1); // last visible key
  for (uint d = t; d < p.hd; d += wg) qs[d] = q[p.q_off + (i * p.nh + h) * p.hd + d];
  barrier();
  float m = NEG_INF, l = 0.0, acc[DPT];
  for (uint c = 0u; c < DPT; c++) acc[c] = 0.0;
  for (int j0 = lo; j0 <= hi; j0 += int(wg)) {
    int j = j0 + int(t);
    float s = j <= hi ? score(uint(j), kv_base, mrow) : NEG_INF;
    if (p.has_pattern != 0u && j <= hi) pat[p.p_off + mrow + uint(j)] = s;
    // a NaN score (non-finite weights) takes the max to +inf, so every exp below and the row turn NaN: it must not
    // be read as a masked row (zeros, finite logits)
    float mn = max(m, wg_max(isnan(s) ? -NEG_INF : s));
    if (mn == NEG_INF) continue; // everything so far masked: nothing to add (uniform)
    float alpha = exp(m - mn), e = exp(s - mn);
    ps[t] = e;
    l = l * alpha + wg_sum(e); // wg_sum's barrier also publishes ps
    m = mn;
    int cnt = min(int(wg), hi - j0 + 1);
    for (uint c = 0u; c < DPT && PATTERN_ONLY == 0u; c++) {
      uint d = dim_of(c);
      if (d >= p.hd) break;
      float a = acc[c] * alpha;
      uint vb = p.v_off + uint(j0) * p.nkvh * p.hd + kv_base + d;
      for (int jj = 0; jj < cnt; jj++) a += ps[jj] * v[vb + uint(jj) * p.nkvh * p.hd];
      acc[c] = a;
    }
    barrier(); // ps is rewritten by the next chunk
  }
  bool live = l > 0.0 || isnan(l);
  float inv = live ? 1.0 / l : 0.0;
  for (uint c = 0u; c < DPT && PATTERN_ONLY == 0u; c++) {
    uint d = dim_of(c);
    if (d < p.hd) o[p.o_off + (i * p.nh + h) * p.hd + d] = acc[c] * inv;
  }
  if (p.has_pattern == 0u) return;
  for (int j = lo + int(t); j <= hi; j += int(wg)) // the keys this invocation scored
    pat[p.p_off + mrow + uint(j)] = live ? exp(pat[p.p_off + mrow + uint(j)] - m) * inv : 0.0;
  for (uint j = t; j < p.nkv; j += wg)
    if (int(j) < lo || int(j) > hi) pat[p.p_off + mrow + j] = 0.0;
}
