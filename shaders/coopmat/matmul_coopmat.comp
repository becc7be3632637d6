#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// Cooperative-matrix product for prefill at FAST precision (ICL_VK_MATMUL=coopmat; any weight type, one variant
// per type): y[row0 + r, c] = w[:, r] . x[:, c]. A workgroup of 4 subgroups computes a 64 x 64 output tile; per
// 32-wide step of K it dequantizes 64 weight chunks to f16 and converts 64 x 32 activations to f16 in shared
// memory, then each subgroup multiplies its 32 x 32 quarter with CM x CN x CK f16 x f16 -> f32 cooperative
// matrices (a shape the device lists). Accumulators go through shared memory to y, so partial tiles and the
// residual add (ACC) are plain stores. Needs a glslang with GL_KHR_cooperative_matrix (cmake/shaders.cmake).
layout(local_size_x_id = 0) in;             // 4 x the subgroup size
layout(constant_id = 1) const uint CM = 16; // the cooperative-matrix shape; each divides 32
layout(constant_id = 2) const uint CN = 16;
layout(constant_id = 3) const uint CK = 16;
layout(constant_id = 4) const uint ACC = 0; // 1: y += the product (matmul_add)

layout(std430, binding = 0) readonly buffer W { uvec4 wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform P {
  uint cols, rows;          // rows in this binding range
  uint row0;                // global index of the range's first row (into y)
  uint n;                   // columns (tokens) in this dispatch
  uint w_off, x_off, y_off; // byte offset of the first row; word offsets of x and y
  uint y_stride;            // elements between columns of y
  uint x_len;               // unused
} p;

#include "util.glsl"
#include "quant.glsl"

const uint BM = 64u, BN = 64u, LD = 40u; // tile, and the padded row of 32 f16 in shared memory
shared float16_t As[BM * LD];            // weight rows, row-major
shared float16_t Bs[BN * LD];            // activation columns: B (K x N) column-major
shared float Cs[4u * 32u * 32u];         // each subgroup's 32 x 32 result, column-major

const uint WM = 32u / CM, WN = 32u / CN;

void main() {
  uint tiles_m = (p.rows + BM - 1u) / BM;
  uint r0 = (gl_WorkGroupID.x % tiles_m) * BM, c0 = gl_WorkGroupID.y * BN;
  uint sg = gl_SubgroupID, sm = (sg & 1u) * 32u, sn = (sg >> 1) * 32u;
  uint nch = (p.cols + 31u) / 32u, rb = row_bytes(p.cols), t = gl_LocalInvocationID.x;
  coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator> acc[WM * WN];
  for (uint i = 0u; i < WM * WN; i++) acc[i] = coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>(0.0);
  for (uint ch = 0u; ch < nch; ch++) {
    uint valid = min(32u, p.cols - 32u * ch);
    for (uint r = t; r < BM; r += gl_WorkGroupSize.x) {
      vec4 v[8];
      if (r0 + r < p.rows) dq_chunk(p.w_off + (r0 + r) * rb, ch, valid, v);
      else for (uint i = 0u; i < 8u; i++) v[i] = vec4(0.0);
      for (uint k = 0u; k < 32u; k++) As[r * LD + k] = float16_t(v[k >> 2][k & 3u]);
    }
    for (uint e = t; e < BN * 4u; e += gl_WorkGroupSize.x) { // a run of 8 of one column per invocation
      uint c = e >> 2, k0 = (e & 3u) * 8u, base = p.x_off + (c0 + c) * p.cols + 32u * ch + k0;
      for (uint k = 0u; k < 8u; k++)
        Bs[c * LD + k0 + k] = float16_t(c0 + c < p.n && k0 + k < valid ? x[base + k] : 0.0);
    }
    barrier();
    for (uint kk = 0u; kk < 32u; kk += CK) {
      coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA> a[WM];
      for (uint i = 0u; i < WM; i++)
        coopMatLoad(a[i], As, (sm + i * CM) * LD + kk, LD, gl_CooperativeMatrixLayoutRowMajor);
      for (uint j = 0u; j < WN; j++) {
        coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB> b;
        coopMatLoad(b, Bs, (sn + j * CN) * LD + kk, LD, gl_CooperativeMatrixLayoutColumnMajor);
        for (uint i = 0u; i < WM; i++) acc[i * WN + j] = coopMatMulAdd(a[i], b, acc[i * WN + j]);
      }
    }
    barrier();
  }
  uint cbase = sg * 1024u;
  for (uint i = 0u; i < WM; i++)
    for (uint j = 0u; j < WN; j++)
      coopMatStore(acc[i * WN + j], Cs, cbase + (j * CN) * 32u + i * CM, 32u, gl_CooperativeMatrixLayoutColumnMajor);
  barrier();
  for (uint e = gl_SubgroupInvocationID; e < 1024u; e += gl_SubgroupSize) {
    uint r = r0 + sm + (e & 31u), c = c0 + sn + (e >> 5);
    uint at = p.y_off + c * p.y_stride + p.row0 + r;
    if (r < p.rows && c < p.n) y[at] = ACC != 0u ? y[at] + Cs[cbase + e] : Cs[cbase + e];
  }
}
