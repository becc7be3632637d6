#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
// Element conversion between f32 and f16 (variants SRC_F16 / DST_F16 pick the sides). f16 is
// read and written as 16-bit storage so an odd element count never touches a neighbour's half.
layout(local_size_x_id = 0) in;

#if defined(SRC_F16)
layout(std430, binding = 0) readonly buffer X { float16_t x[]; };
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };
#endif
#if defined(DST_F16)
layout(std430, binding = 1) writeonly buffer Y { float16_t y[]; };
#else
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
#endif

layout(push_constant) uniform P {
  uint n, x_off, y_off, pad; // offsets in elements of each side's type
} p;

#include "util.glsl"
#include "eltwise.glsl"

void main() {
  uint e0 = elt_first();
  for (uint k = 0u; k < PER; k++) {
    uint e = e0 + k;
    if (e >= p.n) return;
#if defined(DST_F16)
    y[p.y_off + e] = float16_t(float(x[p.x_off + e]));
#else
    y[p.y_off + e] = float(x[p.x_off + e]);
#endif
  }
}
