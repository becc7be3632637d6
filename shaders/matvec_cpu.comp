#version 450
#extension GL_GOOGLE_include_directive : require
// Matrix-vector product for CPU devices (lavapipe): y[row0 + r] = w[:, r] . x (n = 1).
// On llvmpipe a storage-buffer load costs about the same per instruction whatever its width or
// address pattern, while uniform-buffer loads at addresses shared by the subgroup are several
// times cheaper. So: x lives in a uniform buffer (the same chunk for every invocation), each
// invocation owns NR whole rows and decodes them with 16-byte loads, and each x chunk is reused
// for the NR rows. The host uses the GPU-shaped matvec.comp when x exceeds maxUniformBufferRange.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NR = 8;     // rows per invocation (at most 8)
layout(constant_id = 2) const uint XLEN = 16;  // declared vec4s of x (the bound range is x_len)
layout(constant_id = 3) const uint ACC = 0; // 1: y += the product (the residual add, fused: exactly what add gives)
layout(constant_id = 4) const uint GLU = 0; // GROUP: 1 y0 = silu(w0 . x) * (w1 . x), 2 with gelu (what swiglu gives)
layout(constant_id = 5) const uint NORM = 0; // GROUP: 1 the product of rms_norm(x, nw, eps) (see matvec.comp)
layout(constant_id = 6) const uint POST = 0; // NORM: 1 x is t = x + rms_norm(o, pw, eps), written to t (matvec.comp)

#ifdef GROUP
// up to 3 weights of one type (MIX: of two types, see matvec.comp) on the same x in one dispatch: each workgroup
// works on one member's rows, with the lone kernel's arithmetic
layout(std430, binding = 0) readonly buffer W0 { uvec4 wq0[]; };
layout(std430, binding = 1) readonly buffer W1 { uvec4 wq1[]; };
layout(std430, binding = 2) readonly buffer W2 { uvec4 wq2[]; };
layout(std140, binding = 3) uniform X { vec4 xu[XLEN]; };
layout(std430, binding = 4) writeonly buffer Y0 { float y0[]; };
layout(std430, binding = 5) writeonly buffer Y1 { float y1[]; };
layout(std430, binding = 6) writeonly buffer Y2 { float y2[]; };
layout(std140, binding = 7) uniform NW { vec4 nwu[XLEN]; }; // NORM: the norm's weight (else a stand-in)
layout(std140, binding = 8) uniform O { vec4 ou[XLEN]; };    // POST: the sublayer output (else stand-ins)
layout(std140, binding = 9) uniform PW { vec4 pwu[XLEN]; };  // POST: its post-norm weight
layout(std430, binding = 10) writeonly buffer T { float tq[]; }; // POST: the new residual t

layout(push_constant) uniform P {
  uint cols, x_off, x_len;         // x: word offset, vec4s bound
  uint rows0, rows1, rows2;        // each member's rows
  uint w_off0, w_off1, w_off2;     // byte offsets of each member's first row
  uint y_off0, y_off1, y_off2;     // word offsets of each member's output
  uint g_end0, g_end1;             // workgroups of member 0, and of members 0 and 1
  uint nw_off, nw_len;             // NORM: nw's word offset and vec4s bound
  float eps;                       // NORM: the norm's epsilon
  uint tmask;                      // MIX: bit m set where member m is of the second type (TYPE2_<B>)
  uint o_off, o_len, pw_off, pw_len, t_off; // POST: word offsets of o, pw, t; vec4s bound of o and pw
} p;

uint g_m = 0u; // this workgroup's member
uvec4 wload(uint i) {
  if (g_m == 0u) return wq0[i];
  if (g_m == 1u) return wq1[i];
  return wq2[i];
}
#define WQ(i) wload(i)
uint mtype() { return (p.tmask >> g_m) & 1u; } // MIX: the type of the member being decoded
#else
layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std140, binding = 1) uniform X { vec4 xu[XLEN]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x and y
  uint x_len;               // vec4s in the bound x range
  uint pad;
} p;
#endif

#include "util.glsl"
#if defined(GROUP) && defined(MIX)
#include "quant_pair.glsl"
#else
#include "quant.glsl"
#endif
#ifdef GROUP
#define UBO_X_OWN_LOAD 1
#endif
#include "ubo_x.glsl"
#include "act.glsl"
#ifdef GROUP
UBO_LOAD32(load_xu, xu, p.x_len)
UBO_LOAD32(load_ou, ou, p.o_len)
UBO_LOAD32(load_pwu, pwu, p.pw_len)
uint g_src = 0u;    // POST: what load_x reads: 0 x, 1 o (for its norm), 2 t = x + o * g_pinv * pw
float g_pinv = 0.0; // POST: o's 1 / rms
void load_x(uint xo, uint valid, out vec4 xv[8]) {
  load_xu(xo, valid, xv);
  if (POST == 0u || g_src == 0u) return; // uniform: POST is a constant, g_src per phase
  vec4 ov[8], wv[8];
  load_ou(p.o_off + xo - p.x_off, valid, ov);
  if (g_src == 1u) {
    xv = ov;
    return;
  }
  load_pwu(p.pw_off + xo - p.x_off, valid, wv);
  for (uint i = 0u; i < 8u; i++) { // as rms_norm.comp with ADD: v = o * inv * w, then the residual plus v
    precise vec4 v = ov[i] * g_pinv * wv[i];
    precise vec4 s = xv[i] + v;
    if (valid < 32u) // zeros past valid even where g_pinv is not finite
      for (uint k = 0u; k < 4u; k++)
        if (4u * i + k >= valid) s[k] = 0.0;
    xv[i] = s;
  }
}
#define NORM_SERIAL 1 // each invocation sums the squares alone, in the order of rms_norm.comp
#include "norm.glsl"
UBO_LOAD32(load_nw, nwu, p.nw_len)
// NORM: a chunk of x normed in place, each element as rms_norm.comp stores it (past valid: zeros, as loaded).
void norm_chunk(uint e0, uint valid, float inv, inout vec4 xv[8]) {
  vec4 wv[8];
  load_nw(p.nw_off + e0, valid, wv);
  for (uint i = 0u; i < 8u; i++) {
    precise vec4 h = xv[i] * inv * wv[i];
    if (valid < 32u) // zeros past valid even where inv is not finite
      for (uint k = 0u; k < 4u; k++)
        if (4u * i + k >= valid) h[k] = 0.0;
    xv[i] = h;
  }
}
#endif

// One row's contribution, written out per row (no dynamically indexed accumulator array, which
// llvmpipe would keep in per-lane scratch memory). Rows past the range re-read the last row.
#ifdef GROUP
// GLU: the same row of the up weight (member 1) beside the gate row, as its lone mat-vec computes it
#define ROW_UP(r, DQU)                                                      \
  if (GLU != 0u) {                                                          \
    g_m = 1u;                                                               \
    DQU(p.w_off1 + min(first + r, rows - 1u) * rb1, ch, valid, wv);         \
    up##r += dot32(wv, xv);                                                 \
    g_m = 0u;                                                               \
  }
#else
#define ROW_UP(r, DQU)
#endif
// DQ, DQU: the decoders of the member's rows and of up's rows (MIX: each of one type, chosen outside the loop)
#define ROW(r, DQ, DQU)                                                     \
  if (NR > r) {                                                             \
    DQ(w_off + min(first + r, rows - 1u) * rb, ch, valid, wv);              \
    acc##r += dot32(wv, xv);                                                \
    ROW_UP(r, DQU)                                                          \
  }
#ifdef GROUP
#define NORM_CHUNK() \
  if (NORM != 0u) norm_chunk(32u * ch, valid, inv, xv);
#else
#define NORM_CHUNK()
#endif
#define CHUNKS(DQ, DQU)                                                                                   \
  for (uint ch = 0u; ch < nch; ch++) {                                                                    \
    uint valid = min(32u, p.cols - 32u * ch);                                                             \
    vec4 xv[8], wv[8];                                                                                    \
    load_x(p.x_off + 32u * ch, valid, xv);                                                                \
    NORM_CHUNK()                                                                                          \
    ROW(0, DQ, DQU) ROW(1, DQ, DQU) ROW(2, DQ, DQU) ROW(3, DQ, DQU)                                       \
    ROW(4, DQ, DQU) ROW(5, DQ, DQU) ROW(6, DQ, DQU) ROW(7, DQ, DQU)                                       \
  }
#define STORE(r) \
  if (NR > r && first + r < rows) store(first + r, GLU == 0u ? acc##r : glu(acc##r, up##r));

float glu(float g, float u) { return (GLU == 1u ? silu(g) : gelu_tanh(g)) * u; }

void store(uint r, float v) {
#ifdef GROUP
  if (g_m == 0u) y0[p.y_off0 + r] = v;
  else if (g_m == 1u) y1[p.y_off1 + r] = v;
  else y2[p.y_off2 + r] = v;
#else
  uint at = p.y_off + p.row0 + r;
  y[at] = ACC != 0u ? y[at] + v : v;
#endif
}

void main() {
  uint gi = group_index(), rows, w_off;
#ifdef GROUP
  g_m = gi < p.g_end0 ? 0u : gi < p.g_end1 ? 1u : 2u;
  gi -= g_m == 0u ? 0u : g_m == 1u ? p.g_end0 : p.g_end1;
  rows = g_m == 0u ? p.rows0 : g_m == 1u ? p.rows1 : p.rows2;
  w_off = g_m == 0u ? p.w_off0 : g_m == 1u ? p.w_off1 : p.w_off2;
#else
  rows = p.rows, w_off = p.w_off;
#endif
  uint first = (gi * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * NR, nch = (p.cols + 31u) / 32u;
  uint rb = row_bytes(p.cols), rb1 = rb;
#ifdef GROUP
  if (GLU != 0u) g_m = 1u, rb1 = row_bytes(p.cols), g_m = 0u; // MIX: up's type may differ from gate's
#endif
#ifdef GROUP
  if (first >= rows) return; // a member's last workgroup, or an absent member: no row to re-read
  if (POST != 0u) { // o's norm, then t's; the group's first invocation stores t (a pass of its own: x is short)
    g_src = 1u;
    g_pinv = norm_inv(p.x_off, p.cols, p.eps);
    g_src = 2u;
    if (gi == 0u && g_m == 0u && gl_LocalInvocationID.x == 0u)
      for (uint ch = 0u; ch < nch; ch++) {
        uint valid = min(32u, p.cols - 32u * ch);
        vec4 tv[8];
        load_x(p.x_off + 32u * ch, valid, tv);
        for (uint i = 0u; i < valid; i++) tq[p.t_off + 32u * ch + i] = tv[i / 4u][i % 4u];
      }
  }
  float inv = NORM != 0u ? norm_inv(p.x_off, p.cols, p.eps) : 1.0;
#endif
  float acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0, acc4 = 0.0, acc5 = 0.0, acc6 = 0.0, acc7 = 0.0;
  float up0 = 0.0, up1 = 0.0, up2 = 0.0, up3 = 0.0, up4 = 0.0, up5 = 0.0, up6 = 0.0, up7 = 0.0; // GLU
#if defined(GROUP) && defined(MIX)
  // The member's type (and up's) chosen once, outside the loop: the loop decodes with one type's decoder. A choice
  // per row inside it (dq_chunk of quant_pair.glsl) put both decoders in every row, which LLVM 19 (Mesa 25
  // lavapipe) took minutes to compile (docs/gpu.md, Measured). Each row is still its type's lone decode.
  uint tg = mtype(), tu = (p.tmask >> 1) & 1u; // tu: GLU's up, member 1 (the workgroup's member is then 0)
  if (GLU == 0u) {
    if (tg == 0u) CHUNKS(dq_chunk_a, dq_chunk_a) else CHUNKS(dq_chunk_b, dq_chunk_b)
  } else if (tg == 0u) {
    if (tu == 0u) CHUNKS(dq_chunk_a, dq_chunk_a) else CHUNKS(dq_chunk_a, dq_chunk_b)
  } else {
    if (tu == 0u) CHUNKS(dq_chunk_b, dq_chunk_a) else CHUNKS(dq_chunk_b, dq_chunk_b)
  }
#else
  CHUNKS(dq_chunk, dq_chunk)
#endif
  STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5) STORE(6) STORE(7)
}
