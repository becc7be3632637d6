#version 450
#extension GL_GOOGLE_include_directive : require
// Matrix-vector product for decode: y[row0 + r, col] = w[:, r] . x[:, col] (w any weight type,
// one variant per type). Two shapes, chosen by the host per device type:
//   TPR == WG (GPUs): the workgroup shares NR rows; invocations stride over 32-element chunks,
//     then a subgroup + shared-memory reduction (any subgroup size).
//   TPR == 1 (CPU devices such as lavapipe): each invocation owns NR rows and walks them whole,
//     so it reads contiguous blocks, which is what llvmpipe's loads are fast at.
// Each loaded x chunk is reused for the NR rows.
// GROUP (variants matvec_group_<type>): up to 3 weights of one type on the same x (q, k, v; gate,
// up) in one dispatch; each workgroup works on one member's rows (g_end: where each member's
// workgroups end), with exactly the arithmetic of the lone mat-vec, so each output is the same bits.
// MIX (GROUP only; variants matvec_group_<a>_<b>): members of two weight types, the second named by TYPE2_<B>,
// each member's type a bit of p.tmask; quant_pair.glsl decodes each with its type's own decoder (bit-identical).
// NORM (GROUP only): x is first RMS-normed with weight nw (norm.glsl: the sum of squares in rms_norm.comp's order,
// each element x * inv * nw as rms_norm stores it), so the pre-attention and pre-FFN norms cost no dispatch.
// POST (NORM only): the input is t = x + rms_norm(o, pw) (Gemma's post-norm and residual add, as rms_norm.comp with
// ADD computes it): every workgroup recomputes o's sum of squares and t itself; group 0 alone writes t, to its own
// buffer (the other workgroups still read x), which is the residual from then on.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 1;  // threads per row group: 1 or the workgroup size
layout(constant_id = 2) const uint NR = 1;   // rows per row group (at most 8)
layout(constant_id = 3) const uint ACC = 0; // 1: y += the product (the residual add, fused: exactly what add gives)
layout(constant_id = 4) const uint GLU = 0; // GROUP: 1 y0 = silu(w0 . x) * (w1 . x), 2 with gelu (what swiglu gives)
layout(constant_id = 5) const uint NORM = 0; // GROUP: 1 the product of rms_norm(x, nw, eps) instead of x
layout(constant_id = 6) const uint POST = 0; // NORM: 1 x is t = x + rms_norm(o, pw, eps), written to t

#ifdef GROUP
layout(std430, binding = 0) readonly buffer W0 { uvec4 wq0[]; };
layout(std430, binding = 1) readonly buffer W1 { uvec4 wq1[]; };
layout(std430, binding = 2) readonly buffer W2 { uvec4 wq2[]; };
layout(std430, binding = 3) readonly buffer X { float x[]; };
layout(std430, binding = 4) writeonly buffer Y0 { float y0[]; };
layout(std430, binding = 5) writeonly buffer Y1 { float y1[]; };
layout(std430, binding = 6) writeonly buffer Y2 { float y2[]; };
layout(std430, binding = 7) readonly buffer NW { float nw[]; }; // NORM: the norm's weight (else a stand-in)
layout(std430, binding = 8) readonly buffer O { float ob[]; };   // POST: the sublayer output (else stand-ins)
layout(std430, binding = 9) readonly buffer PW { float pwb[]; }; // POST: its post-norm weight
layout(std430, binding = 10) writeonly buffer T { float tq[]; }; // POST: the new residual t

layout(push_constant) uniform P {
  uint cols, x_off, x_len;         // x_off: word offset of x; x_len: unused here (the layout matvec_cpu's)
  uint rows0, rows1, rows2;        // each member's rows
  uint w_off0, w_off1, w_off2;     // byte offsets of each member's first row
  uint y_off0, y_off1, y_off2;     // word offsets of each member's output
  uint g_end0, g_end1;             // workgroups of member 0, and of members 0 and 1
  uint nw_off, nw_len;             // NORM: word offset of nw; nw_len unused here (matvec_cpu's layout)
  float eps;                       // NORM: the norm's epsilon
  uint tmask;                      // MIX: bit m set where member m is of the second type (TYPE2_<B>)
  uint o_off, o_len, pw_off, pw_len, t_off; // POST: word offsets of o, pw, t (the lens: matvec_cpu's layout)
} p;

uint g_m = 0u; // this workgroup's member (uniform across the workgroup)
uvec4 wload(uint i) {
  if (g_m == 0u) return wq0[i];
  if (g_m == 1u) return wq1[i];
  return wq2[i];
}
#define WQ(i) wload(i)
uint mtype() { return (p.tmask >> g_m) & 1u; } // MIX: the type of the member being decoded
#else
layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x and y
  uint y_stride;            // elements between columns of y (all rows of the matrix)
  uint pad;
} p;
#endif

#include "util.glsl"
#include "reduce.glsl"
#if defined(GROUP) && defined(MIX)
#include "quant_pair.glsl"
#else
#include "quant.glsl"
#endif
#include "act.glsl"

#ifdef GROUP
uint g_src = 0u;    // POST: what load_x reads: 0 x, 1 o (for its norm), 2 t = x + o * g_pinv * pw
float g_pinv = 0.0; // POST: o's 1 / rms
#endif
void load_x(uint base, uint valid, out vec4 xv[8]) {
  for (uint i = 0u; i < 8u; i++) {
    vec4 t;
    for (uint k = 0u; k < 4u; k++) {
      t[k] = 4u * i + k < valid ? x[base + 4u * i + k] : 0.0;
#ifdef GROUP
      if (POST != 0u && g_src != 0u && 4u * i + k < valid) { // uniform: POST is a constant, g_src per phase
        uint e = base - p.x_off + 4u * i + k;
        if (g_src == 1u) {
          t[k] = ob[p.o_off + e];
        } else { // as rms_norm.comp with ADD: v = o * inv * w, then the residual plus v
          precise float v = ob[p.o_off + e] * g_pinv * pwb[p.pw_off + e];
          precise float s = t[k] + v;
          t[k] = s;
        }
      }
#endif
    }
    xv[i] = t;
  }
}

#ifdef GROUP
#include "norm.glsl"
// NORM: the chunk of x starting at element e0 normed in place, each element as rms_norm.comp stores it.
void norm_chunk(uint e0, uint valid, float inv, inout vec4 xv[8]) {
  for (uint i = 0u; i < 8u; i++)
    for (uint k = 0u; k < 4u; k++)
      if (4u * i + k < valid) {
        precise float h = xv[i][k] * inv * nw[p.nw_off + e0 + 4u * i + k];
        xv[i][k] = h;
      } // past valid: load_x's zeros
}
#endif

// Row r of this dispatch's output gets v.
void store(uint col, uint r, float v) {
#ifdef GROUP
  if (g_m == 0u) y0[p.y_off0 + r] = v;
  else if (g_m == 1u) y1[p.y_off1 + r] = v;
  else y2[p.y_off2 + r] = v;
#else
  uint at = p.y_off + col * p.y_stride + p.row0 + r;
  y[at] = ACC != 0u ? y[at] + v : v;
#endif
}

void main() {
  uint gi = group_index(), rows, w_off, col, xb;
#ifdef GROUP
  g_m = gi < p.g_end0 ? 0u : gi < p.g_end1 ? 1u : 2u;
  gi -= g_m == 0u ? 0u : g_m == 1u ? p.g_end0 : p.g_end1;
  rows = g_m == 0u ? p.rows0 : g_m == 1u ? p.rows1 : p.rows2;
  w_off = g_m == 0u ? p.w_off0 : g_m == 1u ? p.w_off1 : p.w_off2;
  col = 0u, xb = p.x_off;
  if (POST != 0u) { // o's norm first, then t's; group 0 stores t (each lane its chunks, as the main loop reads them)
    g_src = 1u;
    g_pinv = norm_inv(xb, p.cols, p.eps);
    g_src = 2u;
    if (group_index() == 0u)
      for (uint ch = gl_LocalInvocationID.x; ch < (p.cols + 31u) / 32u; ch += gl_WorkGroupSize.x) {
        uint valid = min(32u, p.cols - 32u * ch);
        vec4 tv[8];
        load_x(xb + 32u * ch, valid, tv);
        for (uint i = 0u; i < valid; i++) tq[p.t_off + 32u * ch + i] = tv[i / 4u][i % 4u];
      }
  }
  float inv = NORM != 0u ? norm_inv(xb, p.cols, p.eps) : 1.0; // uniform: NORM is a constant
#else
  rows = p.rows, w_off = p.w_off, col = gl_WorkGroupID.z, xb = p.x_off + col * p.cols;
#endif
  uint groups = gl_WorkGroupSize.x / TPR, lane = gl_LocalInvocationID.x % TPR;
  uint first = (gi * groups + gl_LocalInvocationID.x / TPR) * NR;
  uint nch = (p.cols + 31u) / 32u, rb = row_bytes(p.cols), rb1 = rb;
#ifdef GROUP
  if (GLU != 0u) g_m = 1u, rb1 = row_bytes(p.cols), g_m = 0u; // MIX: up's type may differ from gate's
#endif
  float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  float acc2[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0); // GLU: the up rows
  for (uint ch = lane; ch < nch; ch += TPR) {
    uint valid = min(32u, p.cols - 32u * ch);
    vec4 xv[8], wv[8];
    load_x(xb + 32u * ch, valid, xv);
#ifdef GROUP
    if (NORM != 0u) norm_chunk(32u * ch, valid, inv, xv);
#endif
    for (uint r = 0u; r < NR; r++) {
      if (first + r >= rows) break;
#ifdef GROUP
      if (GLU != 0u) g_m = 0u;
#endif
      dq_chunk(w_off + (first + r) * rb, ch, valid, wv);
      vec4 s = wv[0] * xv[0];
      for (uint i = 1u; i < 8u; i++) s += wv[i] * xv[i];
      acc[r] += s.x + s.y + s.z + s.w;
#ifdef GROUP
      if (GLU != 0u) { // the same row of the up weight, computed as its lone mat-vec would
        g_m = 1u;
        dq_chunk(p.w_off1 + (first + r) * rb1, ch, valid, wv);
        vec4 s2 = wv[0] * xv[0];
        for (uint i = 1u; i < 8u; i++) s2 += wv[i] * xv[i];
        acc2[r] += s2.x + s2.y + s2.z + s2.w;
      }
#endif
    }
  }
#ifdef GROUP
  if (GLU != 0u) g_m = 0u;
#endif
  for (uint r = 0u; r < NR; r++) {
    float t = TPR > 1u ? wg_sum(acc[r]) : acc[r]; // uniform branch: TPR is a constant
    if (GLU != 0u) {                              // likewise: GLU is a constant
      float u = TPR > 1u ? wg_sum(acc2[r]) : acc2[r];
      t = (GLU == 1u ? silu(t) : gelu_tanh(t)) * u;
    }
    if (lane == 0u && first + r < rows) store(col, first + r, t);
  }
}
