// Activation functions.
float silu(float v) { return v / (1.0 + exp(-v)); }

// GELU, tanh approximation: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))). tanh is written
// via exp of a non-positive argument so large |v| cannot overflow to inf/inf.
float gelu_tanh(float v) {
  float t = 0.7978845608028654 * (v + 0.044715 * v * v * v);
  float e = exp(-2.0 * abs(t));
  float th = sign(t) * (1.0 - e) / (1.0 + e);
  return 0.5 * v * (1.0 + th);
}
