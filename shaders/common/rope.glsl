// sin and cos of an f32 angle for RoPE (GEMMA4_TEXT.md §4.6), to ~1e-7 absolute for angles up
// to 2e5 (positions up to 2e5 times inv_freq <= 1): the built-in sin/cos promise only 2^-11
// inside [-pi, pi] (Vulkan precision table) and nothing beyond. Cody-Waite reduction by pi/2 in
// four parts (the first three short enough that k * part is exact for k < 2^17), then the
// cephes minimax polynomials on [-pi/4, pi/4]. Checked on the host against double sin/cos for
// every position < 2e5 and d = 16..512, with and without fused multiply-adds: 9.3e-8 at worst.

void rope_sincos(float a, out float s_out, out float c_out) {
  precise float k = floor(a * 0.636619772 + 0.5);  // nearest quadrant
  precise float r = a - k * 1.578125;              // 0x1.94p+0
  r = r + k * 0.00732421875;                       // 0x1.ep-8
  r = r + k * 4.470348358154297e-06;               // 0x1.2cp-18
  r = r - k * 1.5893254712295857e-08;              // 0x1.110b46p-26
  precise float z = r * r;
  precise float s =
      r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  precise float c = 1.0 - 0.5 * z +
                    z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 +
                                                         z * 2.443315711809948e-5));
  const uint q = uint(k) & 3u;
  s_out = q == 0u ? s : q == 1u ? c : q == 2u ? -s : -c;
  c_out = q == 0u ? c : q == 1u ? -s : q == 2u ? -c : s;
}
