// Reading f32 activations from a uniform buffer `vec4 xu[]` whose bound length is p.x_len vec4s
// (CPU-device kernels: on llvmpipe, uniform-buffer loads at addresses shared by the subgroup are
// several times cheaper than storage-buffer loads).

// 32 floats from word offset o of uniform array ARR bound with LEN vec4s (any alignment: the word shift is the
// same for every invocation, so the selects are cheap); elements at or past `valid` are zero.
#define UBO_LOAD32(NAME, ARR, LEN)                                  \
  void NAME(uint o, uint valid, out vec4 xv[8]) {                   \
    uint q = o >> 2, s = o & 3u;                                    \
    vec4 prev = ARR[q];                                             \
    for (uint i = 0u; i < 8u; i++) {                                \
      vec4 next = ARR[min(q + i + 1u, LEN - 1u)];                   \
      vec4 t = s == 0u   ? prev                                     \
               : s == 1u ? vec4(prev.yzw, next.x)                   \
               : s == 2u ? vec4(prev.zw, next.xy)                   \
                         : vec4(prev.w, next.xyz);                  \
      if (valid < 32u)                                              \
        for (uint k = 0u; k < 4u; k++)                              \
          if (4u * i + k >= valid) t[k] = 0.0;                      \
      xv[i] = t;                                                    \
      prev = next;                                                  \
    }                                                               \
  }
#ifndef UBO_X_OWN_LOAD // the includer defines load_x itself (matvec_cpu.comp with GROUP)
UBO_LOAD32(load_x, xu, p.x_len)
#endif

float dot32(vec4 a[8], vec4 b[8]) {
  vec4 s = a[0] * b[0];
  for (uint i = 1u; i < 8u; i++) s += a[i] * b[i];
  return (s.x + s.y) + (s.z + s.w);
}
