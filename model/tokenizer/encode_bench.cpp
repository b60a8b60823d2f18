// The encode benchmark behind `infer --bench`: a deterministic mixed text and its encode rate.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>

#include "model/tokenizer/tokenizer.h"

namespace infer {
namespace {

// Snippets of the kinds of text a chat model sees; chosen pseudo-randomly so BPE words vary.
constexpr std::array<std::string_view, 12> kSnippets = {
    "The quick brown fox jumps over the lazy dog, and then it runs back across the field. ",
    "In 1969, astronauts landed on the Moon; millions watched the grainy broadcast live.\n",
    "Tokenizers split text into pieces that a language model can embed and predict. ",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];  // dot product\n}\n",
    "<div class=\"note\"><b>Note:</b> see https://example.com/docs?id=42&x=y</div>\n",
    "        \t\t    \n\n\n      ",
    "日本語の文章を正しく分割できるかどうかを確認します。東京は日本の首都です。",
    "人工智能正在改变我们的生活方式，语言模型可以理解和生成文本。",
    "Emoji test: 😀🚀👍🏽🎉 and flags 🇫🇷🇯🇵 with ZWJ 👩‍💻. ",
    "Résumé naïve café — “quoted” text… Ünïcödé ßtraße. ",
    "3.14159 2.71828 1,234,567 0xDEADBEEF -42 +17 1e-9 ",
};

}  // namespace

std::string make_encode_bench_text(size_t text_bytes) {
  std::string text;
  text.reserve(text_bytes + 128);
  uint64_t state = 0x2545F4914F6CDD1Dull;  // fixed seed: the same text on every run
  while (text.size() < text_bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += kSnippets[(state >> 33) % kSnippets.size()];
  }
  size_t cut = std::min(text_bytes, text.size());
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;  // never end inside a UTF-8 sequence
  }
  text.resize(cut);
  return text;
}

double measure_encode_mb_per_s(const Tokenizer& tok, size_t text_bytes) {
  const std::string text = make_encode_bench_text(text_bytes);
  double best_s = 1e30;
  size_t n_tokens = 0;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    n_tokens += tok.encode(text, false).size();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best_s = std::min(best_s, dt.count());
  }
  if (n_tokens == 0 || best_s <= 0) return 0.0;
  return static_cast<double>(text.size()) / 1e6 / best_s;
}

}  // namespace infer
