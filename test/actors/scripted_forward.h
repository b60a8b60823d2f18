// ScriptedForward: a Forward whose logits make a greedy sampler emit a given token sequence, one
// script entry per produced row of logits (a prefill's last row or a decode), whatever was fed.
// Random weights never write a tool call; this model writes exactly what a test scripts, so the
// real pipeline (actors, engine, tool loop) can be driven through calls. It records every id
// fed, so a test checks the context the "model" saw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "model/forward.h"

namespace infer::test {

class ScriptedForward : public Forward {
 public:
  // After the script: `after` for ever (an end id, usually).
  ScriptedForward(int64_t vocab, std::vector<int32_t> script, int32_t after, int64_t max_positions)
      : vocab_(vocab), script_(std::move(script)), after_(after), max_positions_(max_positions) {}

  Result<void> prefill(std::span<const int32_t> ids, float* logits, bool all_logits) override {
    if (position() + int64_t(ids.size()) > max_positions_) {
      return make_error(ErrorCode::kContextFull, "scripted forward: past max_positions");
    }
    {
      std::lock_guard lock(mu_);
      fed_.insert(fed_.end(), ids.begin(), ids.end());
    }
    const int64_t rows = all_logits ? int64_t(ids.size()) : 1;
    for (int64_t r = 0; r + 1 < rows; ++r) write_row(logits + r * vocab_, after_);
    write_row(logits + (rows - 1) * vocab_, next());
    return Ok{};
  }
  Result<void> decode(int32_t id, float* logits) override {
    return prefill(std::span(&id, 1), logits, false);
  }
  void reset() override {
    std::lock_guard lock(mu_);
    fed_.clear();
  }
  int64_t position() const override {
    std::lock_guard lock(mu_);
    return int64_t(fed_.size());
  }
  int64_t vocab_size() const override { return vocab_; }

  // Every id fed so far (the context the model has attended).
  std::vector<int32_t> fed() const {
    std::lock_guard lock(mu_);
    return fed_;
  }
  // Script entries produced so far.
  size_t produced() const {
    std::lock_guard lock(mu_);
    return produced_;
  }

 private:
  int32_t next() {
    std::lock_guard lock(mu_);
    const int32_t id = produced_ < script_.size() ? script_[produced_] : after_;
    ++produced_;
    return id;
  }
  void write_row(float* row, int32_t id) const {
    std::fill(row, row + vocab_, 0.0f);
    row[id] = 30.0f;  // the argmax, and a softmax with nearly all its mass here
  }

  const int64_t vocab_;
  const std::vector<int32_t> script_;
  const int32_t after_;
  const int64_t max_positions_;
  mutable std::mutex mu_;
  std::vector<int32_t> fed_;
  size_t produced_ = 0;
};

}  // namespace infer::test
