#version 450
#extension GL_GOOGLE_include_directive : require
// y = x * s
#define OP(v) ((v) * p.s)
#include "unary.glsl"
