// UTF-8 helpers for the tokenizer: the length of the character at a position (tolerating invalid
// input), decoding one code point, and Unicode White_Space as Rust's char::is_whitespace has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8_lead.h"

namespace infer::tok {

using infer::utf8_lead_len;

// Bytes of the character starting at s[i]. Text we encode may be invalid UTF-8 (our API takes
// bytes, not Rust's &str); an invalid or truncated sequence counts as one byte, so the BPE falls
// back to that byte's <0xNN> token instead of crashing or dropping text.
inline size_t utf8_char_len(std::string_view s, size_t i) {
  const size_t n = utf8_lead_len(static_cast<unsigned char>(s[i]));
  if (n <= 1 || i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

// Code point of a sequence of `len` bytes that utf8_char_len accepted (or one raw byte).
inline uint32_t utf8_decode(const char* p, size_t len) {
  const auto b = [p](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(p[k])); };
  switch (len) {
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    case 4:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    default:
      return b(0);
  }
}

inline void utf8_append(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Unicode White_Space (what lstrip/rstrip of added tokens strip in HF, via char::is_whitespace).
inline bool is_unicode_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Whether a complete byte string is valid UTF-8 (Rust's String::from_utf8 rules: no overlongs,
// no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Where a few bytes stand as the start of one character: a whole valid character, a prefix that
// may still become one, or bytes no continuation can make valid (same strict rules as above).
enum class Utf8Prefix { kComplete, kIncomplete, kInvalid };
Utf8Prefix classify_utf8_prefix(std::string_view bytes);

}  // namespace infer::tok
