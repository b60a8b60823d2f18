// The call loop of one model turn (issue 30 item 7, docs/TOOLS.md "Running calls"): every
// generated token goes through a ToolCallParser (by id); when a call ends (<tool_call|>, or the
// model's own <|tool_response>) the generation step ends, the call runs, and its response
// (response_pieces, encode_pieces) is appended to the same model turn; generation goes on with
// what is left of the turn's token limit, up to max_steps calls. It re-enters Engine::run_turn
// with the response's ids as input, so the engine knows nothing of tools. No CAF: the stream
// actor and the tests drive it; the caller's sink runs the calls.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "actors/engine.h"
#include "actors/events.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tool_format/call_parser.h"
#include "model/tool_format/tool_tokens.h"

namespace infer::actors {

// Calls a turn may run by default (--tool-steps): enough for a read, a search and a fix, small
// enough that a model looping on a failing call stops soon.
inline constexpr int64_t kDefaultToolSteps = 8;

struct ToolLoopOptions {
  const Tokenizer* tokenizer = nullptr;  // must have the tool markers (ToolTokens::from)
  ToolTokens tokens;
  int64_t max_steps = kDefaultToolSteps;  // calls a turn; the next one gets an error response
  // false (no --tools): a call is reported (ToolEventKind::kNotRun) and its tokens shown like
  // any others; nothing runs, nothing is injected, generation goes on as the model writes.
  bool enabled = true;
};

// A tool value as JSON text. A tool's strings may hold invalid UTF-8 (a Latin-1 file read as
// text), which json::dump would throw on: such bytes become U+FFFD here.
std::string tool_json_text(const nlohmann::json& value);

// What a call's tool answered.
struct ToolAnswer {
  nlohmann::json result;  // the response's value; {error: ...} when it failed
  bool error = false;
  double ms = 0.0;
};

// Where the loop's turn goes: tokens (with whether they belong to a call, so not shown), events,
// and the calls themselves, run synchronously on the loop's thread.
class ToolTurnSink {
 public:
  virtual ~ToolTurnSink() = default;
  // step.index counts the whole turn's tokens from 0, across the calls.
  virtual Verdict token(const Step& step, bool in_call) = 0;
  // The turn's own input is in the context (not the responses the loop appends).
  virtual void appended(int64_t /*position*/, int64_t /*n*/) {}
  // Ids the engine wrote into the turn without sampling them (a tool's response, an injected
  // interrupt): the context now holds `position` ids, the last n of them these.
  virtual void inserted(int64_t /*position*/, int64_t /*n*/, TokenOrigin /*origin*/) {}
  virtual void event(const ToolEvent& e) = 0;
  // Runs a parsed call; blocks until it has an answer (the tool bounds its own time).
  virtual ToolAnswer run(uint64_t call_id, const std::string& name,
                         const nlohmann::json& arguments) = 0;
};

class ToolLoop {
 public:
  explicit ToolLoop(ToolLoopOptions options);

  // One model turn of req (its input, then generation of at most req.max_tokens, calls
  // included). The outcome adds up the segments between calls; `turn` numbers its events.
  TurnOutcome run_turn(Engine& engine, const TurnRequest& req, uint64_t turn,
                       ToolTurnSink& sink);

  const ToolLoopOptions& options() const { return opts_; }
  uint64_t calls() const { return next_call_id_ - 1; }

 private:
  class SegmentSink;
  // The response ids to one finished call (run, refused or malformed), its event sent; empty
  // when tools are off (reported only).
  std::vector<int32_t> respond(const ToolCallOutcome& call, ToolTurnSink& sink);
  std::vector<int32_t> response_ids(const std::string& name, const nlohmann::json& result);

  ToolLoopOptions opts_;
  uint64_t next_call_id_ = 1;
  uint64_t turn_ = 0;  // the turn run_turn is running
  int64_t calls_ = 0;  // calls finished in it so far
};

}  // namespace infer::actors
