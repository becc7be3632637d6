// RoPE's arithmetic, shared by rope.comp and rms_rope.comp so the fused kernel rotates with the same bits.
// The angle is reduced to [-pi, pi) in turns before sin/cos, whose precision Vulkan only bounds on that interval.

// cos and sin of pair i's angle at position pos (n_rot rotated dims, log2 of the base).
void rope_cs(uint i, uint n_rot, float log2_base, int pos, out float c, out float s) {
  float inv_freq = exp2(-2.0 * float(i) / float(n_rot) * log2_base);
  float turns = float(pos) * (inv_freq * 0.15915494309189535);
  float theta = (turns - round(turns)) * 6.283185307179586;
  c = cos(theta), s = sin(theta);
}

// (x0, x1) rotated by the angle of (c, s); precise: no contraction that one kernel might make and not another.
void rope_rot(float x0, float x1, float c, float s, out float y0, out float y1) {
  precise float a = x0 * c - x1 * s, b = x0 * s + x1 * c;
  y0 = a, y1 = b;
}
