// Slicing-by-16 CRC-32 (crc32.h). Table s maps a byte to the CRC of that byte followed by s zero
// bytes, so 16 input bytes fold into the running CRC with 16 independent lookups (Intel's
// "slicing-by-8" paper, doubled); the bytes before the first aligned word and after the last go
// one at a time through table 0, the classic byte-wise loop.
#include "memory/crc32.h"

#include <array>
#include <bit>
#include <cstring>

namespace infer::memory {
namespace {

static_assert(std::endian::native == std::endian::little,
              "crc32: the word loop reads little-endian words");

constexpr uint32_t kPolyReflected = 0xEDB88320u;  // 0x04C11DB7 bit-reversed
constexpr int kSlices = 16;

using Tables = std::array<std::array<uint32_t, 256>, kSlices>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPolyReflected & (0u - (c & 1u)));
    t[0][i] = c;
  }
  for (int s = 1; s < kSlices; ++s)
    for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
  return t;
}

constexpr Tables kTables = make_tables();

inline uint32_t byte_step(uint32_t c, uint8_t b) { return (c >> 8) ^ kTables[0][(c ^ b) & 0xffu]; }

// The four bytes of w, each through its table: byte i of w at distance `last - i` from the end.
inline uint32_t fold4(uint32_t w, int last) {
  return kTables[last][w & 0xffu] ^ kTables[last - 1][(w >> 8) & 0xffu] ^
         kTables[last - 2][(w >> 16) & 0xffu] ^ kTables[last - 3][w >> 24];
}

}  // namespace

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
    c = byte_step(c, *p++);
    --n;
  }
  for (; n >= kSlices; p += kSlices, n -= kSlices) {
    uint32_t w[4];
    std::memcpy(w, p, sizeof w);
    c = fold4(w[0] ^ c, 15) ^ fold4(w[1], 11) ^ fold4(w[2], 7) ^ fold4(w[3], 3);
  }
  for (; n > 0; --n) c = byte_step(c, *p++);
  return ~c;
}

}  // namespace infer::memory
