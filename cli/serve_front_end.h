// ServeFrontEnd: the --serve session's I/O (docs/PROTOCOL.md). The session's rules are
// protocol::ServeSession; this class reads stdin on the caller's thread, takes the pipeline's
// events on the io actor's thread, feeds both to the session under one mutex, and carries out
// what it answers: frames written whole to stdout (so they never interleave), commands sent to
// the pipeline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/chrome_trace.h"
#include "actors/front_end.h"
#include "actors/pipeline.h"
#include "cli/serve_tools.h"
#include "protocol/serve_session.h"

namespace infer::cli {

class ServeFrontEnd : public actors::FrontEnd {
 public:
  // Frames go to `out_fd`; -n (the default GENERATE max_tokens) is `default_max_tokens`.
  // stream_capacity: ServeSession::set_stream_capacity.
  // memory: episodic memory is served (--memory); else its frames are NOT_AVAILABLE.
  ServeFrontEnd(int out_fd, protocol::ServerHello hello, int64_t default_max_tokens,
                int64_t stream_capacity, int64_t preamble_tokens, bool memory);

  // Must be called once, before run(); the pipeline must outlive run().
  void attach(actors::Pipeline* p) { pipeline_ = p; }
  // --trace: TRACE_MARK frames become instant events on the io track (nullptr: none).
  void set_trace(actors::ChromeTrace* trace) { trace_ = trace; }
  // --tools: the tool frames go to `tools` (it must outlive this object); before run(). Its
  // PTY output and interrupt transitions are fetched every kToolPollMs on a thread of ours.
  void set_tools(ServeTools* tools);
  ~ServeFrontEnd() override;

  // Reads `in_fd` (unbuffered read(2), so frames are handled as soon as they arrive, also while
  // tokens stream) until the session stops reading, then waits until every request is answered.
  // Returns the exit status.
  int run(int in_fd);

  // actors::FrontEnd, on the io actor's thread.
  void appended(const actors::InputAppended& a) override;
  void token(const actors::TokenEvent& t) override;
  void turn_end(const actors::TurnEnd& e) override;
  void reset_done() override;
  void error(const actors::ErrorEvent& e) override;
  void memory_reply(const actors::MemoryReply& r) override;
  void memory_event(const actors::MemoryNotice& n) override;
  void tool_event(const actors::ToolEvent& e) override;

 private:
  // Under mu_: writes out's frames in one write(2), then runs its commands.
  void carry_out(protocol::SessionOutput& out);
  bool write_all();
  // Under mu_: the tools' events since the last call, and what ServeTools put in order.
  void take_tool_events(protocol::SessionOutput& out);
  void apply(ToolStreamOutput& items, protocol::SessionOutput& out);
  void stop_tool_poll();

  static constexpr int kPollMs = 100;  // stdin waits at most this long between checks
  static constexpr int kToolPollMs = 20;  // PTY output and snoozes waking reach the client

  int out_fd_;
  actors::Pipeline* pipeline_ = nullptr;
  actors::ChromeTrace* trace_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;  // the session finished
  protocol::ServeSession session_;
  std::vector<uint8_t> buf_;

  ServeTools* tools_ = nullptr;
  bool tools_shut_ = false;      // every PTY ended and reaped (the session finished)
  bool stop_poll_ = false;       // under mu_
  std::condition_variable poll_cv_;
  std::thread tool_poll_;
};

}  // namespace infer::cli
