// Tanh-approximate GELU (GEMMA4_TEXT.md §4.8), torch gelu(approximate="tanh"), in f32.
// 0.5·z·(1 + tanh(a)) is written as z / (1 + exp(-2a)), the same function: it leaves tanh's
// precision to no driver and has no cancellation where tanh(a) nears -1.
float gelu_tanh(float z) {
  const float kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
  const float a = kSqrt2OverPi * (z + 0.044715 * z * z * z);
  return z / (1.0 + exp(-2.0 * a));
}
