#version 450
// Causal attention for a block of BQ queries of one head per workgroup (prefill on GPU-shaped devices): keys
// and then values come through shared memory in tiles of BK rows, read once per block instead of once per
// query; the softmax is online (a running max and sum per query row). Semantics as attention.comp: scores
// scaled, soft-capped, masked; keys after a query's position or outside its window skipped; a row with no
// visible key gives zeros; a NaN score turns its row NaN. No pattern output: a captured pattern takes
// attention.comp.
//   scores: invocation t computes S[r][jj] for the (r, jj) pairs t, t + WG, ... (a K row read across a
//           subgroup: rows padded to KSTRIDE so neighbours hit different banks);
//   rows:   invocation r < BQ rescales row r (max, exp, sum) while the others load the V tile;
//   values: invocation t owns output elements e = t + c * WG (row e / MAXHD, dim e % MAXHD) in registers.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BQ = 16;     // queries per workgroup
layout(constant_id = 2) const uint BK = 16;     // keys per tile
layout(constant_id = 3) const uint MAXHD = 64;  // head_dim rounded up; BQ * MAXHD a multiple of the workgroup
layout(constant_id = 4) const uint NACC = 16;   // BQ * MAXHD / workgroup size

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer M { float mask[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };

layout(push_constant) uniform P {
  uint hd, nh, nkvh, nq, nkv;
  int n_past;
  float scale;
  int window;
  float softcap;
  uint has_mask, has_pattern;
  uint q_off, k_off, v_off, m_off, o_off, p_off;
} p;

const uint KSTRIDE = MAXHD + 1u;
shared float qs[BQ * MAXHD];
shared float kv[BK * KSTRIDE]; // the K tile, then the V tile
shared float sp[BQ * BK];      // scores, then probabilities
shared float row_m[BQ], row_l[BQ], row_a[BQ];

void main() {
  const float NEG_INF = -1.0 / 0.0;
  uint t = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, h = gl_WorkGroupID.y;
  uint i0 = gl_WorkGroupID.x * BQ, nrow = min(BQ, p.nq - i0);
  uint kvh = h / (p.nh / p.nkvh), kv_base = kvh * p.hd, kv_row = p.nkvh * p.hd;
  // keys any row of the block can see
  int qlast = p.n_past + int(i0 + nrow) - 1;
  int lo = p.window > 0 ? max(0, p.n_past + int(i0) - p.window + 1) : 0;
  int hi = min(qlast, int(p.nkv) - 1);

  for (uint e = t; e < BQ * MAXHD; e += wg) {
    uint r = e / MAXHD, d = e % MAXHD;
    qs[e] = r < nrow && d < p.hd ? q[p.q_off + ((i0 + r) * p.nh + h) * p.hd + d] : 0.0;
  }
  if (t < BQ) { row_m[t] = NEG_INF; row_l[t] = 0.0; }
  float acc[NACC];
  for (uint c = 0u; c < NACC; c++) acc[c] = 0.0;
  barrier();

  for (int j0 = lo; j0 <= hi; j0 += int(BK)) {
    for (uint e = t; e < BK * MAXHD; e += wg) {
      uint jj = e / MAXHD, d = e % MAXHD;
      int j = j0 + int(jj);
      kv[jj * KSTRIDE + d] = j <= hi && d < p.hd ? k[p.k_off + uint(j) * kv_row + kv_base + d] : 0.0;
    }
    barrier();
    for (uint e = t; e < BQ * BK; e += wg) {
      uint r = e / BK, jj = e % BK;
      int j = j0 + int(jj), qpos = p.n_past + int(i0 + r);
      bool vis = r < nrow && j <= min(qpos, hi) && (p.window <= 0 || j > qpos - p.window);
      float s = NEG_INF;
      if (vis) {
        s = 0.0;
        for (uint d = 0u; d < p.hd; d++) s += qs[r * MAXHD + d] * kv[jj * KSTRIDE + d];
        s *= p.scale;
        if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);
        if (p.has_mask != 0u) s += mask[p.m_off + ((h * p.nq + i0 + r) * p.nkv) + uint(j)];
      }
      sp[e] = s;
    }
    barrier();
    if (t < BQ) {
      // a NaN score takes the max to +inf, so the row's exps and sum turn NaN (as attention.comp)
      float m = row_m[t], mx = NEG_INF;
      for (uint jj = 0u; jj < BK; jj++) {
        float s = sp[t * BK + jj];
        mx = max(mx, isnan(s) ? -NEG_INF : s);
      }
      float mn = max(m, mx), alpha = 1.0, sum = 0.0;
      if (mn != NEG_INF) { // else everything so far masked: nothing to add
        alpha = exp(m - mn);
        for (uint jj = 0u; jj < BK; jj++) {
          float e = exp(sp[t * BK + jj] - mn);
          sp[t * BK + jj] = e;
          sum += e;
        }
        row_l[t] = row_l[t] * alpha + sum;
        row_m[t] = mn;
      } else {
        for (uint jj = 0u; jj < BK; jj++) sp[t * BK + jj] = 0.0;
      }
      row_a[t] = alpha;
    }
    for (uint e = t; e < BK * MAXHD; e += wg) { // K is no longer read: the V tile replaces it
      uint jj = e / MAXHD, d = e % MAXHD;
      int j = j0 + int(jj);
      kv[jj * KSTRIDE + d] = j <= hi && d < p.hd ? v[p.v_off + uint(j) * kv_row + kv_base + d] : 0.0;
    }
    barrier();
    for (uint c = 0u; c < NACC; c++) {
      uint e = t + c * wg, r = e / MAXHD, d = e % MAXHD;
      float a = acc[c] * row_a[r];
      for (uint jj = 0u; jj < BK; jj++) a += sp[r * BK + jj] * kv[jj * KSTRIDE + d];
      acc[c] = a;
    }
    barrier(); // kv and sp are rewritten by the next tile
  }
  for (uint c = 0u; c < NACC; c++) {
    uint e = t + c * wg, r = e / MAXHD, d = e % MAXHD;
    if (r >= nrow || d >= p.hd) continue;
    float l = row_l[r];
    bool live = l > 0.0 || isnan(l);
    o[p.o_off + ((i0 + r) * p.nh + h) * p.hd + d] = acc[c] * (live ? 1.0 / l : 0.0);
  }
}
