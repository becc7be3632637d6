#version 450
#extension GL_GOOGLE_include_directive : require
// y = silu(gate) * up
#define ACT(v) silu(v)
#include "glu.glsl"
