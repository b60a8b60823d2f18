// Tokenizer encode/decode (HF tokenizers Tokenizer::encode / decode): added tokens split off the
// raw text, the rest normalized, pre-tokenized and run through BPE; the template's ids around it.
#include "model/tokenizer/tokenizer.h"

#include <algorithm>
#include <string>

#include "model/tokenizer/tokenizer_impl.h"

namespace infer {
namespace {

// Working buffers of one encode() call, kept together so each piece reuses them.
struct EncodeScratch {
  std::string normalized;
  std::vector<tok::TextSplit> normed_splits;
  std::vector<tok::ByteRange> pieces;
  tok::BpeScratch bpe;
};

// Pre-tokenizes and BPE-encodes normalized text that holds no added token.
void encode_normalized(const tok::TokenizerData& im, std::string_view text, EncodeScratch& s,
                       std::vector<int32_t>& out) {
  im.pre_tokenizer.split(text, s.pieces);
  for (const tok::ByteRange& p : s.pieces) {
    im.model.tokenize(text.substr(p.begin, p.end - p.begin), s.bpe, out);
  }
}

void encode_segment(const tok::TokenizerData& im, const tok::AddedTokenMatcher& normed_matcher,
                    std::string_view raw, EncodeScratch& s, std::vector<int32_t>& out) {
  std::string_view text = raw;
  if (!im.normalizer.is_identity()) {
    im.normalizer.apply(raw, s.normalized);
    text = s.normalized;
  }
  if (normed_matcher.empty()) {
    encode_normalized(im, text, s, out);
    return;
  }
  s.normed_splits.clear();
  normed_matcher.split(text, s.normed_splits);
  for (const tok::TextSplit& sp : s.normed_splits) {
    if (sp.id >= 0) {
      out.push_back(sp.id);
    } else {
      encode_normalized(im, text.substr(sp.begin, sp.end - sp.begin), s, out);
    }
  }
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<const tok::TokenizerData> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       SpecialText special) const {
  const tok::TokenizerData& im = *impl_;
  const bool match = special == SpecialText::kMatch;
  const tok::AddedTokenMatcher& raw_matcher = match ? im.raw_matcher : im.raw_plain_matcher;
  const tok::AddedTokenMatcher& normed_matcher =
      match ? im.normed_matcher : im.normed_plain_matcher;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out = im.prefix_ids;
  std::vector<tok::TextSplit> splits;
  raw_matcher.split(text, splits);
  EncodeScratch scratch;
  for (const tok::TextSplit& sp : splits) {
    if (sp.id >= 0) {
      out.push_back(sp.id);
    } else {
      encode_segment(im, normed_matcher, text.substr(sp.begin, sp.end - sp.begin), scratch, out);
    }
  }
  if (add_special_tokens) out.insert(out.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::string_view t;
    if (impl_->token_of(id, t)) tokens.emplace_back(t);
  }
  return impl_->decoder.decode(std::move(tokens));
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

int32_t Tokenizer::text_vocab_size() const {
  int32_t limit = impl_->model.vocab.id_limit();
  for (const tok::AddedToken& t : impl_->added) {
    if (!t.special) limit = std::max(limit, t.id + 1);
  }
  for (int32_t id : impl_->prefix_ids) limit = std::max(limit, id + 1);
  for (int32_t id : impl_->suffix_ids) limit = std::max(limit, id + 1);
  return limit;
}

Result<void> Tokenizer::check_fits(int64_t model_vocab_size, std::string_view where) const {
  if (text_vocab_size() <= model_vocab_size) return Ok{};
  return make_error(ErrorCode::kShape,
                    std::string(where) + ": the tokenizer's text ids go up to " +
                        std::to_string(text_vocab_size() - 1) + ", the model's vocab_size is " +
                        std::to_string(model_vocab_size) +
                        " (a tokenizer.json of another model?)");
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added_vocab.lookup(token)) return id;
  return impl_->model.vocab.lookup(token);
}

std::string_view Tokenizer::id_to_token(int32_t id) const {
  std::string_view t;
  return impl_->token_of(id, t) ? t : std::string_view();
}

int32_t Tokenizer::bos_id() const {
  return impl_->prefix_ids.empty() ? -1 : impl_->prefix_ids.front();
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->special[id];
}

}  // namespace infer
