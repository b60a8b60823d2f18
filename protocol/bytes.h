// Little-endian scalars in and out of byte buffers (PROTOCOL.md §2: every integer and float on
// the wire is little-endian; floats are IEEE 754 binary32/binary64). Written byte by byte, so the
// code is the same on any host and never reads unaligned.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace infer::protocol {

inline void put_u16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
inline void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_f32(std::vector<uint8_t>& out, float v) { put_u32(out, std::bit_cast<uint32_t>(v)); }
inline void put_f64(std::vector<uint8_t>& out, double v) { put_u64(out, std::bit_cast<uint64_t>(v)); }
inline void put_bytes(std::vector<uint8_t>& out, std::string_view s) {
  out.insert(out.end(), s.begin(), s.end());
}

inline uint16_t get_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads fixed fields front to back from a payload whose size the caller has already checked;
// reading past the end is a bug in that check and aborts.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t remaining() const { return bytes_.size() - at_; }
  uint16_t u16() { return get_u16(take(2)); }
  uint32_t u32() { return get_u32(take(4)); }
  uint64_t u64() { return get_u64(take(8)); }
  float f32() { return std::bit_cast<float>(u32()); }
  double f64() { return std::bit_cast<double>(u64()); }
  // The next n bytes, as text (validated by the caller).
  std::string_view text(size_t n) {
    return std::string_view(reinterpret_cast<const char*>(take(n)), n);
  }
  // The bytes not read yet, as text (validated by the caller).
  std::string_view rest() {
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + at_), remaining());
    at_ = bytes_.size();
    return s;
  }

 private:
  const uint8_t* take(size_t n);
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. Returns the
// offset of the first bad byte, or s.size() when all of `s` is valid.
size_t utf8_valid_prefix(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return utf8_valid_prefix(s) == s.size(); }
// The longest prefix of s[0, max_bytes) that does not cut a character of valid UTF-8 `s` in two.
size_t utf8_cut(std::string_view s, size_t max_bytes);

}  // namespace infer::protocol
