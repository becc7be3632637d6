#version 450
#extension GL_GOOGLE_include_directive : require
// y = gelu_tanh(x)
#define OP(v) gelu_tanh(v)
#include "unary.glsl"
