// The demo model's tokenizer.json: Gemma's format (byte-fallback BPE, "▁" for spaces, <bos>
// template) over a small vocabulary whose merges are learned from a built-in English text.
#pragma once

#include <string>

namespace infer {

// Special ids of the demo vocabulary (Gemma's are 0-3 and 105/106 for the turn markers).
inline constexpr int kDemoPadId = 0;
inline constexpr int kDemoEosId = 1;
inline constexpr int kDemoBosId = 2;
inline constexpr int kDemoUnkId = 3;
inline constexpr int kDemoTurnStartId = 4;  // "<|turn>"
inline constexpr int kDemoTurnEndId = 5;    // "<turn|>", an end-of-generation id
inline constexpr int kDemoFirstByteId = 6;  // "<0x00>" .. "<0xFF>" are ids 6 .. 261

struct DemoTokenizer {
  std::string json;     // tokenizer.json text
  // ids [kDemoFirstByteId + 256, first_unused_id) are characters and merges; the rest are
  // "<unusedN>" and, last, Gemma 4's tool and channel markers (added tokens, not special)
  int first_unused_id;
};

// A tokenizer with exactly vocab_size entries (vocab_size >= 512): the specials, the 256 byte
// tokens, printable ASCII and the text's characters, the learned merges, then "<unusedN>" to
// fill, then the tool and channel markers as the last ids. Deterministic: the same vocab_size
// gives the same bytes.
DemoTokenizer build_demo_tokenizer(int vocab_size);
// build_demo_tokenizer(vocab_size).json
std::string demo_tokenizer_json(int vocab_size);

}  // namespace infer
