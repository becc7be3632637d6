// Elementwise launch shape: each invocation handles PER consecutive elements (PER = 1 on GPUs,
// where neighbouring invocations then touch neighbouring words; larger on CPU devices, where a
// contiguous run per invocation is what loads are fast at). Include after util.glsl.
layout(constant_id = 1) const uint PER = 1;

uint elt_first() { return global_index() * PER; }
