// A driver for protocol::ServeSession in the tests: client frames and engine events in, the
// frames and commands it answers kept until taken.
#pragma once

#include <gtest/gtest.h>

#include <utility>
#include <variant>
#include <vector>

#include "protocol/encode.h"
#include "protocol/serve_session.h"

namespace infer::protocol::serve_test {

// Drives a ServeSession: each call's frames and commands are kept until taken.
class Driver {
 public:
  Driver() : session_(hello(), /*default_max_tokens=*/7, [this] { return now_ns_; }) {}

  static ServerHello hello() {
    ServerHello h;
    h.vocab_size = 100;
    h.max_generate_tokens = 50;
    h.context_tokens = 64;
    h.end_ids = {1};
    return h;
  }

  void send(uint32_t rid, const ClientMessage& m) {
    std::vector<uint8_t> bytes;
    encode(m, rid, bytes);
    session_.feed(bytes, out_);
  }
  void handshake() {
    send(1, Hello{});
    ASSERT_EQ(take_frames().size(), 1u);
  }
  // Handshaken, APPEND_IDS{5} (request 2, turn 1) in the context, then GENERATE (request 3,
  // turn 2) running; what that wrote and commanded taken.
  void start_generating(uint32_t max_tokens);
  void token(uint64_t turn, uint32_t id, uint64_t pos, GateDecision d = GateDecision::kSpeak) {
    EngineToken t;
    t.turn = turn;
    t.id = id;
    t.pos = pos;
    t.decision = d;
    session_.token(t, out_);
  }
  void turn_end(uint64_t turn, uint64_t pos, DoneReason reason = DoneReason::kLimit) {
    EngineTurnEnd e;
    e.turn = turn;
    e.pos = pos;
    e.reason = reason;
    session_.turn_end(e, out_);
  }
  void reset_done() { session_.reset_done(out_); }
  void appended(uint64_t turn, uint64_t pos, uint32_t n) {
    session_.appended(EngineAppended{turn, pos, n}, out_);
  }

  std::vector<Outgoing> take_frames() {
    std::vector<Outgoing> f;
    f.swap(out_.frames);
    return f;
  }
  std::vector<EngineCommand> take_commands() {
    std::vector<EngineCommand> c;
    c.swap(out_.commands);
    return c;
  }
  // The opcodes of the frames written since the last take, in order, with their request ids.
  std::vector<std::pair<Opcode, uint32_t>> take_opcodes() {
    std::vector<std::pair<Opcode, uint32_t>> ops;
    for (const Outgoing& f : take_frames()) ops.emplace_back(opcode_of(f.message), f.request_id);
    return ops;
  }

  ServeSession& session() { return session_; }
  SessionOutput& out() { return out_; }
  int64_t now_ns_ = 0;

 private:
  ServeSession session_;
  SessionOutput out_;
};

template <class T>
const T& only(const std::vector<Outgoing>& frames) {
  EXPECT_EQ(frames.size(), 1u);
  return std::get<T>(frames.at(0).message);
}

template <class T>
std::vector<T> commands_of(const std::vector<EngineCommand>& cs) {
  std::vector<T> out;
  for (const EngineCommand& c : cs) {
    if (const auto* x = std::get_if<T>(&c)) out.push_back(*x);
  }
  return out;
}

inline Generate generate(uint32_t max_tokens, uint32_t flags = kGenStopAtEot) {
  Generate g;
  g.max_tokens = max_tokens;
  g.flags = flags;
  return g;
}

inline void Driver::start_generating(uint32_t max_tokens) {
  handshake();
  send(2, AppendIds{{5}});
  turn_end(1, 1);
  send(3, generate(max_tokens));
  take_frames();
  take_commands();
}

}  // namespace infer::protocol::serve_test
