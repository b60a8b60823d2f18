// The length a UTF-8 lead byte announces: shared by the tokenizer (model/tokenizer/utf8.h) and
// the tools' cut points (tools_vfs/utf8_cut.h), which may depend on base/ only.
#pragma once

#include <cstddef>

namespace infer {

// Length of the sequence a lead byte announces; 0 for a continuation or invalid lead byte.
inline size_t utf8_lead_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return lead >= 0xC2 ? 2 : 0;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return lead <= 0xF4 ? 4 : 0;
  return 0;
}

}  // namespace infer
