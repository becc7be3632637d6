// Workgroup reductions: a subgroup reduction, then one partial per subgroup through shared
// memory. Correct for any subgroup size (8 on lavapipe, 32 NVIDIA, 64 AMD) and for a last,
// partial subgroup. Every invocation of the workgroup must call them (they contain barriers),
// and every invocation receives the result.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

shared float red_f[gl_WorkGroupSize.x];
shared uint red_u[gl_WorkGroupSize.x];

float wg_sum(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) red_f[gl_SubgroupID] = v;
  barrier();
  float t = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; i++) t += red_f[i];
  barrier(); // red_f may be reused right after
  return t;
}

float wg_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) red_f[gl_SubgroupID] = v;
  barrier();
  float t = red_f[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++) t = max(t, red_f[i]);
  barrier();
  return t;
}

uint wg_min_u(uint v) {
  v = subgroupMin(v);
  if (subgroupElect()) red_u[gl_SubgroupID] = v;
  barrier();
  uint t = red_u[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++) t = min(t, red_u[i]);
  barrier();
  return t;
}
