#version 450
#extension GL_GOOGLE_include_directive : require
// y = max(x, 0)
#define OP(v) max(v, 0.0)
#include "unary.glsl"
