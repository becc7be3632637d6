// Row-wise ops: one workgroup per row of d elements. Element k of invocation t is
//   CONTIG != 0 (CPU devices): t * per + k, a contiguous run of per = ceil(d / WG) elements;
//   CONTIG == 0 (GPUs): t + k * WG, so neighbouring invocations touch neighbouring words.
// Include after util.glsl.
layout(constant_id = 1) const uint CONTIG = 0;

uint row_per(uint d) { return (d + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x; }
uint row_elem(uint k, uint per) {
  uint t = gl_LocalInvocationID.x;
  return CONTIG != 0u ? t * per + k : t + k * gl_WorkGroupSize.x;
}
