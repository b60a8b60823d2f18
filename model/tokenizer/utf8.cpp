// Strict UTF-8 validation (Rust's from_utf8 rules) for the byte-fallback decoder and the
// streaming decoder, which must agree on what counts as a broken sequence.
#include "model/tokenizer/utf8.h"

namespace infer::tok {
namespace {

// Allowed range of the second byte after a lead byte (RFC 3629 table 3-7), or false for a lead
// byte that cannot start a character.
bool second_byte_range(unsigned char lead, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) return true;
  if (lead == 0xE0)
    lo = 0xA0;
  else if (lead == 0xED)
    hi = 0x9F;  // no surrogates
  else if (lead == 0xF0)
    lo = 0x90;  // no overlongs
  else if (lead == 0xF4)
    hi = 0x8F;  // nothing above U+10FFFF
  else if (!((lead >= 0xE1 && lead <= 0xEF) || (lead >= 0xF1 && lead <= 0xF3)))
    return false;
  return true;
}

}  // namespace

Utf8Prefix classify_utf8_prefix(std::string_view bytes) {
  if (bytes.empty()) return Utf8Prefix::kIncomplete;
  const auto lead = static_cast<unsigned char>(bytes[0]);
  if (lead < 0x80) return bytes.size() == 1 ? Utf8Prefix::kComplete : Utf8Prefix::kInvalid;
  unsigned char lo = 0, hi = 0;
  if (!second_byte_range(lead, lo, hi)) return Utf8Prefix::kInvalid;
  const size_t need = utf8_lead_len(lead);
  if (bytes.size() > need) return Utf8Prefix::kInvalid;
  for (size_t k = 1; k < bytes.size(); ++k) {
    const auto c = static_cast<unsigned char>(bytes[k]);
    const bool ok = k == 1 ? (c >= lo && c <= hi) : (c & 0xC0) == 0x80;
    if (!ok) return Utf8Prefix::kInvalid;
  }
  return bytes.size() == need ? Utf8Prefix::kComplete : Utf8Prefix::kIncomplete;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_lead_len(static_cast<unsigned char>(s[i]));
    if (n == 0 || i + n > s.size()) return false;
    if (classify_utf8_prefix(s.substr(i, n)) != Utf8Prefix::kComplete) return false;
    i += n;
  }
  return true;
}

}  // namespace infer::tok
