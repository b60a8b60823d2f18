// StreamDecoder: the decoder's steps applied one token at a time, holding back the bytes of a
// character split over <0xNN> tokens until it is complete (see tokenizer.h for the contract).
#include "model/tokenizer/tokenizer_impl.h"
#include "model/tokenizer/utf8.h"

namespace infer {

using tok::DecoderStep;

StreamDecoder::StreamDecoder(const Tokenizer& tok) : tok_(tok.impl_.get()) {}

void StreamDecoder::reset() {
  pending_.clear();
  run_broken_ = false;
  emitted_any_ = false;
  stripped_ = 0;
  past_start_ = false;
}

// Steps after ByteFallback act on each finished piece; a Strip after Fuse sees the whole text,
// so in a stream it can only trim the start.
void StreamDecoder::emit(std::string piece, std::string& out) {
  const auto& steps = tok_->decoder.steps();
  size_t i = 0;
  while (i < steps.size() && steps[i].kind != DecoderStep::Kind::kByteFallback) ++i;
  if (i == steps.size()) i = 0;  // no ByteFallback: emit() gets tokens before any step
  bool fused = false;
  for (; i < steps.size(); ++i) {
    const DecoderStep& step = steps[i];
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        tok::Decoder::replace_in(piece, step);
        break;
      case DecoderStep::Kind::kFuse:
        fused = true;
        break;
      case DecoderStep::Kind::kByteFallback:
        break;
      case DecoderStep::Kind::kStrip:
        if (!fused) {
          tok::Decoder::strip_in(piece, step);
        } else {
          while (!past_start_ && stripped_ < step.start &&
                 piece.compare(0, step.content.size(), step.content) == 0) {
            piece.erase(0, step.content.size());
            ++stripped_;
          }
        }
        break;
    }
  }
  if (!piece.empty()) past_start_ = true;
  out += piece;
}

void StreamDecoder::push_byte(unsigned char byte, std::string& out) {
  if (run_broken_) {  // HF replaces every byte of a broken run
    emit(std::string(tok::kReplacementChar), out);
    return;
  }
  pending_.push_back(static_cast<char>(byte));
  switch (tok::classify_utf8_prefix(pending_)) {
    case tok::Utf8Prefix::kComplete:
      emit(std::move(pending_), out);
      pending_.clear();
      break;
    case tok::Utf8Prefix::kIncomplete:
      break;
    case tok::Utf8Prefix::kInvalid: {
      std::string fffd;
      for (size_t k = 0; k < pending_.size(); ++k) fffd += tok::kReplacementChar;
      pending_.clear();
      run_broken_ = true;
      emit(std::move(fffd), out);
      break;
    }
  }
}

void StreamDecoder::end_byte_run(std::string& out) {
  if (!pending_.empty()) {
    std::string fffd;
    for (size_t k = 0; k < pending_.size(); ++k) fffd += tok::kReplacementChar;
    pending_.clear();
    emit(std::move(fffd), out);
  }
  run_broken_ = false;
}

void StreamDecoder::push(int32_t id, std::string& out) {
  std::string_view text;
  if (!tok_->token_of(id, text)) return;  // as decode(): unknown ids are skipped
  if (!tok_->decoder.present()) {         // HF joins the tokens with spaces
    if (emitted_any_) out += ' ';
    out += text;
    emitted_any_ = true;
    return;
  }
  const auto& steps = tok_->decoder.steps();
  std::string piece(text);
  // Steps before ByteFallback act on each token alone.
  size_t i = 0;
  for (; i < steps.size() && steps[i].kind != DecoderStep::Kind::kByteFallback; ++i) {
    if (steps[i].kind == DecoderStep::Kind::kReplace) tok::Decoder::replace_in(piece, steps[i]);
    if (steps[i].kind == DecoderStep::Kind::kStrip) tok::Decoder::strip_in(piece, steps[i]);
  }
  if (i == steps.size()) {  // no ByteFallback: emit() runs all steps itself
    emit(std::string(text), out);
    return;
  }
  const int byte = tok::byte_token_value(piece);
  if (byte >= 0) {
    push_byte(static_cast<unsigned char>(byte), out);
    return;
  }
  end_byte_run(out);
  emit(std::move(piece), out);
}

void StreamDecoder::flush(std::string& out) { end_byte_run(out); }

}  // namespace infer
