#version 450
#extension GL_GOOGLE_include_directive : require
// y = gelu_tanh(gate) * up
#define ACT(v) gelu_tanh(v)
#include "glu.glsl"
