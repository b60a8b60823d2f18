// ByteReader's bounds check and the strict UTF-8 validator of PROTOCOL.md §2.
#include "protocol/bytes.h"

#include "base/check.h"

namespace infer::protocol {

const uint8_t* ByteReader::take(size_t n) {
  INFER_CHECK(n <= remaining(), "payload read of %zu bytes with %zu left", n, remaining());
  const uint8_t* p = bytes_.data() + at_;
  at_ += n;
  return p;
}

size_t utf8_valid_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte (RFC 3629 §4 table)
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;  // continuation byte, C0/C1 or F5..FF as a lead byte
    }
    if (i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return i;
    }
    i += n;
  }
  return s.size();
}

size_t utf8_cut(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s.size();
  size_t cut = max_bytes;
  // Step back over continuation bytes (10xxxxxx) to the start of the character cut in two.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

}  // namespace infer::protocol
