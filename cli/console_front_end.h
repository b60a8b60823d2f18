// The REPL's and pipe mode's FrontEnd: prints tokens as they come (text, or ids with --output
// ids) and hands turn ends, input appends, errors and resets to the main thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "actors/front_end.h"
#include "cli/options.h"

namespace infer::cli {

class ConsoleFrontEnd : public actors::FrontEnd {
 public:
  explicit ConsoleFrontEnd(OutputMode mode) : mode_(mode) {}

  void token(const actors::TokenEvent& t) override;
  void appended(const actors::InputAppended& a) override;
  void turn_end(const actors::TurnEnd& e) override;
  void reset_done() override;
  void error(const actors::ErrorEvent& e) override;
  void memory_reply(const actors::MemoryReply& r) override;
  // One line on stderr per call and per result (stdout keeps the model's text).
  void tool_event(const actors::ToolEvent& e) override;

  actors::TurnEnd wait_turn(uint64_t turn);
  void wait_reset();
  actors::MemoryReply wait_memory(uint64_t ticket);
  // Whether the turn's input went into the context (a refused input leaves it as it was).
  bool was_appended(uint64_t turn);
  // ErrorEvents so far (each printed on stderr as it came).
  int errors();

 private:
  template <class F>
  void notify(F f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }

  OutputMode mode_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<actors::TurnEnd> ends_;
  std::vector<actors::MemoryReply> memory_;
  std::set<uint64_t> appended_;
  int resets_ = 0;
  int errors_ = 0;
};

// One tool event as the console shows it: "[tool 1: read_file {"path":"a.txt"}]", ...
std::string describe_tool_event(const actors::ToolEvent& e);

// /stats. The gate's counts only mean something when a --gate-* switch set it up.
void print_stats(const actors::PipelineStats& s, bool gate_on);
// The dim line after a reply on a terminal: tokens, decode speed, prefill.
void print_turn_speed(const actors::TurnEnd& e);
// The pipe mode's line on stderr: "turn N: ...".
void print_turn_line(uint64_t turn, const actors::TurnEnd& e);

}  // namespace infer::cli
