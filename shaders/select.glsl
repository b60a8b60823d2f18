// The order argmax and top-k rank entries by: value descending, then index ascending (the lowest
// index wins ties); NaN ranks below -inf, as model/sampling.cpp's argmax never picks one.
// Values are compared as uint keys, so subgroupMax and integer compares do the work.

const uint kNoIndex = 0xffffffffu;  // the index of padding entries: loses every tie

// Order-preserving float -> uint: negative floats reversed below positive ones; -0 as +0 (they
// compare equal, so the index decides); NaN at 0, below -inf (key 0x007fffff).
uint value_key(float v) {
  if (isnan(v)) return 0u;
  const uint u = floatBitsToUint(v == 0.0 ? 0.0 : v);
  return (u & 0x80000000u) != 0u ? ~u : u | 0x80000000u;
}

float key_value(uint key) {
  return uintBitsToFloat((key & 0x80000000u) != 0u ? key & 0x7fffffffu : ~key);
}

bool ranks_before(uint key_a, uint idx_a, uint key_b, uint idx_b) {
  return key_a > key_b || (key_a == key_b && idx_a < idx_b);
}
