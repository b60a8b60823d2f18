// Tokenizer: Hugging Face tokenizer.json (BPE with byte fallback, as Gemma 3/4 ship it), equal to
// HF `tokenizers` on encode and decode; StreamDecoder: incremental detokenization for generation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace infer {
namespace tok {
struct TokenizerData;  // tokenizer_impl.h
}  // namespace tok

// Whether text that spells a special added token (<bos>, <|turn>, <turn|>, ...) becomes that
// token: kMatch for prompts written by the program (chat markers), kAsText for what a user typed
// (HF's split_special_tokens=True), so a user cannot forge a turn boundary.
enum class SpecialText { kMatch, kAsText };

class Tokenizer {
 public:
  static Result<Tokenizer> load(const std::filesystem::path& tokenizer_json);
  static Result<Tokenizer> parse(std::string_view json_text,
                                 std::string_view where = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Raw text -> ids. Added tokens are matched in the raw text; with add_special_tokens the
  // post-processor's tokens (<bos>) are added, as HF's default encode does. Bytes that are not
  // valid UTF-8 are encoded through their <0xNN> tokens. With SpecialText::kAsText the special
  // added tokens are not matched (the others still are).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens,
                              SpecialText special = SpecialText::kMatch) const;
  // ids -> text, as HF decode(ids, skip_special_tokens=False). Unknown ids are skipped.
  std::string decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const;  // including added tokens
  // One past the largest id ordinary text can produce: the BPE vocabulary, the non-special
  // added tokens and the post-processor's (<bos>). Special added tokens are left out: they need
  // their exact spelling, and a multimodal checkpoint's placeholders sit past the text model's
  // vocabulary (Gemma 4's <image_soft_token> is 262144 of a 262,144-id text model).
  int32_t text_vocab_size() const;
  // A kShape error naming `where` when text_vocab_size() exceeds the model's vocab_size.
  Result<void> check_fits(int64_t model_vocab_size, std::string_view where) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string_view id_to_token(int32_t id) const;  // "" when out of range
  int32_t bos_id() const;                          // -1 when none
  bool is_special(int32_t id) const;

 private:
  explicit Tokenizer(std::unique_ptr<const tok::TokenizerData> impl);
  friend class StreamDecoder;

  // Behind a pointer so the added-token matchers' pointers into it survive moves.
  std::unique_ptr<const tok::TokenizerData> impl_;
};

// Incremental detokenizer: push() appends to `out` the text that is complete after this id.
// Bytes of a character split over <0xNN> tokens are held back until the character is whole, so
// `out` never ends inside a UTF-8 sequence. The concatenated output equals Tokenizer::decode of
// all ids pushed, except where one run of byte tokens holds a valid character and then broken
// bytes: HF turns that whole run into U+FFFD, the stream has already shown the valid character.
// A decoder Strip after Fuse is applied to the start of the stream only (its `stop` is ignored).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok);
  void push(int32_t id, std::string& out);
  void flush(std::string& out);  // whatever is held back (incomplete bytes become U+FFFD)
  void reset();

 private:
  void push_byte(unsigned char byte, std::string& out);
  void end_byte_run(std::string& out);
  void emit(std::string piece, std::string& out);

  const tok::TokenizerData* tok_;
  std::string pending_;       // bytes of an incomplete character
  bool run_broken_ = false;   // the current run of byte tokens had invalid UTF-8
  bool emitted_any_ = false;  // for the joining " " when there is no decoder
  size_t stripped_ = 0;       // leading characters removed by a Strip after Fuse
  bool past_start_ = false;   // text other than stripped characters has been emitted
};

// Deterministic mixed text (English prose, code, whitespace runs, CJK, emoji) of about
// `text_bytes` bytes, cut at a character boundary: the input of the encode benchmark.
std::string make_encode_bench_text(size_t text_bytes);
// Encodes make_encode_bench_text(text_bytes) on this thread and returns MB/s (1 MB = 1e6
// bytes), the best of a few runs. For `infer --bench`.
double measure_encode_mb_per_s(const Tokenizer& tok, size_t text_bytes);

}  // namespace infer
