// Where text may be cut without splitting a UTF-8 sequence: the capped reader ends its chunks
// there and the subshell's head/tail capture trims its edges there. Bytes are bytes: an invalid
// or truncated sequence counts as single bytes, so any input has a cut point at every byte that
// is not inside a well-formed sequence (the same tolerance as the tokenizer's byte fallback).
#pragma once

#include <cstddef>
#include <string_view>

#include "base/utf8_lead.h"

namespace infer::tools {

using infer::utf8_lead_len;

inline bool utf8_is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Bytes of the well-formed sequence starting at s[i], or 1 for an invalid or truncated one.
inline size_t utf8_char_len(std::string_view s, size_t i) {
  const size_t n = utf8_lead_len(static_cast<unsigned char>(s[i]));
  if (n <= 1 || i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if (!utf8_is_continuation(static_cast<unsigned char>(s[i + k]))) return 1;
  }
  return n;
}

// The largest cut <= CUT that does not split a sequence of S. With more_follows, S is a prefix
// of longer text, so a lead byte near the end whose sequence would run past S.size() is also
// kept for the next piece (its continuation bytes are not here to check yet).
inline size_t utf8_cut_before(std::string_view s, size_t cut, bool more_follows) {
  if (cut > s.size()) cut = s.size();
  // A sequence is at most 4 bytes, so only a lead byte among the 3 before CUT can straddle it.
  for (size_t back = 1; back <= 3 && back <= cut; ++back) {
    const size_t i = cut - back;
    const auto b = static_cast<unsigned char>(s[i]);
    if (utf8_is_continuation(b)) continue;
    const size_t n = utf8_lead_len(b);
    if (n <= back) return cut;  // ASCII, invalid lead, or a sequence that ends at or before CUT
    if (i + n <= s.size()) return utf8_char_len(s, i) == n ? i : cut;  // whole in S: check it
    return more_follows ? i : cut;  // runs past S: the next piece may complete it
  }
  return cut;
}

// Continuation bytes (at most 3) at the front of S, which starts where earlier bytes were cut
// away: the rest of a sequence whose lead byte is gone.
inline size_t utf8_orphan_prefix(std::string_view s) {
  size_t n = 0;
  while (n < 3 && n < s.size() && utf8_is_continuation(static_cast<unsigned char>(s[n]))) ++n;
  return n;
}

}  // namespace infer::tools
