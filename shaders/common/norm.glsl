// RMSNorm's sum of squares in one fixed order, whatever the workgroup or subgroup size: the squares of each
// 32-element chunk summed as ss32 does, then the chunks' partials added in chunk order. rms_norm.comp and the
// mat-vecs that fold the norm into their input (matvec.comp and matvec_cpu.comp built with GROUP, NORM = 1) all
// use it, so a folded norm gives the bits of the unfused one. `precise`: no multiply-add contraction, which a
// compiler might otherwise apply in one kernel and not in another.
// The includer defines load_x(word offset, valid, out vec4 v[8]) (elements at or past valid read as 0) before
// including, and NORM_SERIAL when each invocation must compute the sum alone (no barriers; CPU-device kernels).

float ss32(vec4 v[8]) {
  precise vec4 s = v[0] * v[0];
  for (uint i = 1u; i < 8u; i++) s += v[i] * v[i];
  precise float r = (s.x + s.y) + (s.z + s.w);
  return r;
}

#ifdef NORM_SERIAL
// The sum of squares of d floats from word xo, by one invocation.
float norm_ss(uint xo, uint d) {
  precise float t = 0.0;
  for (uint c = 0u; c < (d + 31u) / 32u; c++) {
    vec4 v[8];
    load_x(xo + 32u * c, min(32u, d - 32u * c), v);
    t += ss32(v);
  }
  return t;
}
#else
// The same sum by the whole workgroup (every invocation must call it; all receive the sum): the invocations share
// out the chunks of a window of NORM_WINDOW, then each adds the window's partials in order.
const uint NORM_WINDOW = 256u;
shared float norm_part[NORM_WINDOW];
float norm_ss(uint xo, uint d) {
  uint nch = (d + 31u) / 32u;
  precise float t = 0.0;
  for (uint c0 = 0u; c0 < nch; c0 += NORM_WINDOW) {
    uint n = min(NORM_WINDOW, nch - c0);
    for (uint c = gl_LocalInvocationID.x; c < n; c += gl_WorkGroupSize.x) {
      vec4 v[8];
      uint e = 32u * (c0 + c);
      load_x(xo + e, min(32u, d - e), v);
      norm_part[c] = ss32(v);
    }
    barrier();
    for (uint c = 0u; c < n; c++) t += norm_part[c];
    barrier(); // norm_part is refilled by the next window
  }
  return t;
}
#endif

// 1 / sqrt(mean of squares + eps): the factor every element of the row is multiplied by (then by its weight).
float norm_inv(uint xo, uint d, float eps) { return inversesqrt(norm_ss(xo, d) / float(d) + eps); }
