#version 450
#extension GL_GOOGLE_include_directive : require
// y = x * sigmoid(x)
#define OP(v) silu(v)
#include "unary.glsl"
