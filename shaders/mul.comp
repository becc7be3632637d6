#version 450
#extension GL_GOOGLE_include_directive : require
// y = a * b (b: one row broadcast, or a's shape)
#define OP(x, z) ((x) * (z))
#include "binary.glsl"
