#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Causal attention for CPU devices (lavapipe); same contract as attention.comp. One query and G
// heads that share a kv head per workgroup of exactly one subgroup (the host sets the workgroup
// size to the subgroup size), so reductions are subgroup operations without barriers.
// Invocations split the keys: each keeps its own running max, sum and output vector per head over
// the keys j = lo + lane (mod WG), reading each k and v row once, with 16-byte loads, for all G
// heads (on llvmpipe the cost is per load instruction); the partial results are merged at the end.
// Needs head_dim % 4 == 0 and q, k, v, out at 16-byte-aligned word offsets (else attention.comp).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint HD4 = 16; // head_dim / 4
layout(constant_id = 2) const uint G = 1;     // query heads per workgroup (all of one kv head; <= 4)

layout(std430, binding = 0) readonly buffer Q { vec4 q[]; };
layout(std430, binding = 1) readonly buffer K { vec4 k[]; };
layout(std430, binding = 2) readonly buffer V { vec4 v[]; };
layout(std430, binding = 3) readonly buffer M { float mask[]; };
layout(std430, binding = 4) writeonly buffer O { vec4 o[]; };
layout(std430, binding = 5) buffer Pat { float pat[]; };

layout(push_constant) uniform P {
  uint hd, nh, nkvh, nq, nkv;
  int n_past;
  float scale;
  int window;
  float softcap;
  uint has_mask, has_pattern;
  uint q_off, k_off, v_off, m_off, o_off, p_off; // q, k, v, o in vec4s; mask, pattern in floats
} p;

// Per-head code is written out per head (macros over g = 0..3) so every private array is indexed
// by literals or the uniform d only: llvmpipe moves dynamically indexed private arrays to slow
// per-invocation scratch memory.
#define INIT(g)                                                                                 \
  if (G > g) {                                                                                  \
    uint qb = p.q_off + (i * p.nh + h0 + g) * HD4;                                              \
    for (uint d = 0u; d < HD4; d++) qv##g[d] = q[qb + d] * p.scale, acc##g[d] = vec4(0.0);      \
  }
#define DOT(g) if (G > g) s4[g] += qv##g[d] * kd;
#define SCORE(g)                                                                                \
  if (G > g) {                                                                                  \
    uint mrow = ((h0 + g) * p.nq + i) * p.nkv;                                                  \
    float s = (s4[g].x + s4[g].y) + (s4[g].z + s4[g].w);                                        \
    if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);                                   \
    if (p.has_mask != 0u) s += mask[p.m_off + mrow + uint(j)];                                  \
    if (p.has_pattern != 0u) pat[p.p_off + mrow + uint(j)] = s;                                 \
    e[g] = 0.0;                                                                                 \
    if (s != NEG_INF) {                                                                         \
      if (s > m[g]) { /* new running max: rescale what was summed so far */                     \
        float a = exp(m[g] - s);                                                                \
        l[g] *= a;                                                                              \
        for (uint d = 0u; d < HD4; d++) acc##g[d] *= a;                                         \
        m[g] = s;                                                                               \
      }                                                                                         \
      e[g] = exp(s - m[g]);                                                                     \
      l[g] += e[g];                                                                             \
    }                                                                                           \
  }
#define ACC(g) if (G > g) acc##g[d] += e[g] * vd;
/* merge the invocations' partial softmax sums of head g; write its output and pattern */
#define FINISH(g)                                                                               \
  if (G > g) {                                                                                  \
    uint h = h0 + g, mrow = (h * p.nq + i) * p.nkv, ob = p.o_off + (i * p.nh + h) * HD4;        \
    float mx = subgroupMax(m[g]), f = m[g] == NEG_INF ? 0.0 : exp(m[g] - mx);                   \
    float total = subgroupAdd(l[g] * f);                                                        \
    bool live = total > 0.0 || isnan(total); /* NaN scores (non-finite weights) stay NaN */      \
    float inv = live ? 1.0 / total : 0.0;                                                       \
    for (uint d = 0u; d < HD4; d++) {                                                           \
      vec4 t = subgroupAdd(acc##g[d] * f);                                                      \
      if (d % wg == lane) o[ob + d] = t * inv;                                                  \
    }                                                                                           \
    if (p.has_pattern != 0u) {                                                                  \
      for (int j = lo + int(lane); j <= hi; j += int(wg)) /* the keys this invocation scored */ \
        pat[p.p_off + mrow + uint(j)] = live ? exp(pat[p.p_off + mrow + uint(j)] - mx) * inv : 0.0; \
      for (uint j = lane; j < p.nkv; j += wg)                                                   \
        if (int(j) < lo || int(j) > hi) pat[p.p_off + mrow + j] = 0.0;                          \
    }                                                                                           \
  }

void main() {
  const float NEG_INF = -1.0 / 0.0;
  uint i = gl_WorkGroupID.x, h0 = gl_WorkGroupID.y * G, lane = gl_SubgroupInvocationID, wg = gl_SubgroupSize;
  uint kvh = h0 / (p.nh / p.nkvh), row4 = p.nkvh * HD4;
  int qpos = p.n_past + int(i);
  int lo = p.window > 0 ? max(0, qpos - p.window + 1) : 0, hi = min(qpos, int(p.nkv) - 1);
  vec4 qv0[HD4], qv1[HD4], qv2[HD4], qv3[HD4], acc0[HD4], acc1[HD4], acc2[HD4], acc3[HD4];
  float m[4] = float[4](NEG_INF, NEG_INF, NEG_INF, NEG_INF), l[4] = float[4](0.0, 0.0, 0.0, 0.0), e[4];
  INIT(0) INIT(1) INIT(2) INIT(3)
  for (int j = lo + int(lane); j <= hi; j += int(wg)) {
    uint kb = p.k_off + uint(j) * row4 + kvh * HD4, vb = p.v_off + uint(j) * row4 + kvh * HD4;
    vec4 s4[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    for (uint d = 0u; d < HD4; d++) {
      vec4 kd = k[kb + d]; // one load serves the G heads
      DOT(0) DOT(1) DOT(2) DOT(3)
    }
    SCORE(0) SCORE(1) SCORE(2) SCORE(3)
    for (uint d = 0u; d < HD4; d++) {
      vec4 vd = v[vb + d];
      ACC(0) ACC(1) ACC(2) ACC(3)
    }
  }
  FINISH(0) FINISH(1) FINISH(2) FINISH(3)
}
