// A FrontEnd for the tests: records every event and lets the test thread wait for one (with a
// generous timeout, never a timed assertion).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/front_end.h"

namespace infer::test {

class RecordingFrontEnd : public actors::FrontEnd {
 public:
  static constexpr std::chrono::seconds kTimeout{60};

  void token(const actors::TokenEvent& t) override { add([&] { tokens_.push_back(t); }); }
  void turn_end(const actors::TurnEnd& e) override { add([&] { ends_.push_back(e); }); }
  void quiet(const actors::QuietSpan& q) override { add([&] { quiets_.push_back(q); }); }
  void reset_done() override { add([&] { ++resets_; }); }
  void error(const actors::ErrorEvent& e) override { add([&] { errors_.push_back(e); }); }

  // The end of turn `turn`, or nothing after kTimeout.
  std::optional<actors::TurnEnd> wait_turn(uint64_t turn) {
    std::optional<actors::TurnEnd> found;
    wait([&] {
      for (const auto& e : ends_) {
        if (e.turn == turn) found = e;
      }
      return found.has_value();
    });
    return found;
  }
  std::optional<actors::QuietSpan> wait_quiet(size_t n) {
    std::optional<actors::QuietSpan> q;
    if (wait([&] { return quiets_.size() >= n; })) q = quiets_[n - 1];
    return q;
  }
  bool wait_resets(int n) {
    return wait([&] { return resets_ >= n; });
  }

  // The turn's sampled tokens.
  std::vector<actors::TokenEvent> tokens(uint64_t turn) const {
    std::vector<actors::TokenEvent> out = all_tokens(turn);
    std::erase_if(out, [](const actors::TokenEvent& t) { return t.inserted(); });
    return out;
  }
  // With the ids the engine inserted (tool responses, injected interrupts), in context order.
  std::vector<actors::TokenEvent> all_tokens(uint64_t turn) const {
    std::lock_guard lock(mu_);
    std::vector<actors::TokenEvent> out;
    for (const auto& t : tokens_) {
      if (t.turn == turn) out.push_back(t);
    }
    return out;
  }
  std::vector<int32_t> ids(uint64_t turn) const {
    std::vector<int32_t> out;
    for (const auto& t : tokens(turn)) out.push_back(t.id);
    return out;
  }
  std::vector<actors::ErrorEvent> errors() const {
    std::lock_guard lock(mu_);
    return errors_;
  }

 protected:
  template <class F>
  void add(F f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }
  bool wait(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, done);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<actors::TokenEvent> tokens_;
  std::vector<actors::TurnEnd> ends_;
  std::vector<actors::QuietSpan> quiets_;
  std::vector<actors::ErrorEvent> errors_;
  int resets_ = 0;
};

}  // namespace infer::test
