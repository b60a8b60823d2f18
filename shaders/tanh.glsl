// tanh in f32 for the logit soft-cap (GEMMA4_TEXT.md §4.10), accurate to a few ulp over the whole
// range: GLSL's tanh may be exp-based without a clamp (NaN for large |x|) and lose relative
// precision near 0, where most soft-capped logits live.

float tanh_f32(float x) {
  const float a = abs(x);
  float r;
  if (a < 0.3) {
    // Taylor series to x^9: the next term is below 6e-8 of tanh(a) here.
    const float a2 = a * a;
    r = a * (1.0 + a2 * (-1.0 / 3.0 +
                         a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * (62.0 / 2835.0)))));
  } else {
    const float e = exp(-2.0 * a);  // in (0, 0.55): no overflow, little cancellation in 1 - e
    r = (1.0 - e) / (1.0 + e);
  }
  return x < 0.0 ? -r : r;
}
