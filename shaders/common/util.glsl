// Launch helpers shared by all shaders. Include after the `layout(local_size_x_id = 0) in;` line.
//
// Grids larger than maxComputeWorkGroupCount[0] (65535 on many GPUs) are folded into x and y
// by the host (vk_grid); group_index() unfolds them.
uint group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint global_index() { return group_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x; }
