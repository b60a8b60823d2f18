// The call loop: a sink between the engine and the caller's that parses by id and ends the
// generation step at a finished call; between steps, the call runs and its response joins the
// context as the next step's input.
#include "actors/tool_loop.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "model/tool_format/format_pieces.h"
#include "model/tool_format/tool_writer.h"

namespace infer::actors {
namespace {

using json = nlohmann::json;

// The name a response carries when the call's own name is unreadable or not a tool name.
constexpr const char* kInvalidCallName = "invalid_call";

const std::string& call_name(const ToolCallOutcome& c) {
  if (const auto* call = std::get_if<ToolCall>(&c)) return call->name;
  return std::get<ToolCallError>(c).name;
}

}  // namespace

std::string tool_json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// One generation step's sink: every token through the parser; a finished call (or the model's
// own <|tool_response>) ends the step. Tokens of a call go to the caller marked in_call.
class ToolLoop::SegmentSink : public TokenSink {
 public:
  SegmentSink(ToolLoop& loop, ToolTurnSink& out, ToolCallParser& parser, StreamDecoder& decoder,
              int64_t base_index, bool first)
      : loop_(loop), out_(out), parser_(parser), decoder_(decoder), base_(base_index),
        first_(first) {}

  Verdict token(const Step& step) override {
    Step s = step;
    s.index += base_;
    piece_.clear();
    const bool was_in_call = parser_.in_call();
    if (was_in_call) decoder_.push(s.id, piece_);  // outside a call only ids matter
    ToolCallStep r = parser_.push(s.id, piece_);
    if (!was_in_call && parser_.in_call()) decoder_.reset();  // a call's text from its start
    if (!loop_.opts_.enabled) {  // reported, not run: the model's tokens go on as they are
      if (r.finished) loop_.respond(*r.finished, out_);
      return out_.token(s, false);
    }
    if (r.stop) {
      // The model's own <|tool_response> (after a call or not): the engine writes the response,
      // so this token never joins the context.
      stopped_ = true;
      if (r.finished) finished_ = std::move(r.finished);
      return Verdict::kRefuse;
    }
    const Verdict v = out_.token(s, !r.pass_through);
    if (r.finished) {
      finished_ = std::move(r.finished);
      return v == Verdict::kRefuse ? v : Verdict::kLast;
    }
    return v;
  }
  void appended(int64_t position, int64_t n) override {
    if (first_) {
      out_.appended(position, n);
    } else {
      out_.inserted(position, n, TokenOrigin::kToolResponse);  // a response the loop wrote after a call
    }
  }
  void injected(int64_t position, int64_t n) override {
    out_.inserted(position, n, TokenOrigin::kInterrupt);
  }

  std::optional<ToolCallOutcome> finished_;
  bool stopped_ = false;  // the model wrote <|tool_response>

 private:
  ToolLoop& loop_;
  ToolTurnSink& out_;
  ToolCallParser& parser_;
  StreamDecoder& decoder_;
  int64_t base_;
  bool first_;
  std::string piece_;
};

ToolLoop::ToolLoop(ToolLoopOptions options) : opts_(std::move(options)) {
  INFER_CHECK(opts_.tokenizer != nullptr, "the tool loop needs the tokenizer");
  INFER_CHECK(opts_.max_steps >= 0, "max_steps %lld", (long long)opts_.max_steps);
}

std::vector<int32_t> ToolLoop::response_ids(const std::string& name, const json& result) {
  const std::string& shown = is_tool_name(name) ? name : std::string(kInvalidCallName);
  Result<FormatPieces> pieces = response_pieces(shown, result);
  if (!pieces) {  // a result too deep to write: say so instead
    pieces = response_pieces(shown, json{{"error", "the result could not be written: " +
                                                       pieces.error().message}});
  }
  INFER_CHECK(pieces.ok(), "an error response could not be written");
  Result<std::vector<int32_t>> ids = encode_pieces(*opts_.tokenizer, *pieces);
  INFER_CHECK(ids.ok(), "the tokenizer lost its tool markers: %s", ids.error().message.c_str());
  return std::move(ids).value();
}

std::vector<int32_t> ToolLoop::respond(const ToolCallOutcome& outcome, ToolTurnSink& sink) {
  const int64_t steps = ++calls_;
  ToolEvent e;
  e.turn = turn_;
  e.call_id = next_call_id_++;
  e.name = call_name(outcome);
  json result;
  if (const auto* bad = std::get_if<ToolCallError>(&outcome)) {
    e.arguments = bad->raw;
    e.message = "malformed tool call: " + bad->what;
    result = json{{"error", e.message}};
  } else {
    const ToolCall& call = std::get<ToolCall>(outcome);
    e.arguments = call.arguments.dump();
    if (!opts_.enabled) {
      e.kind = ToolEventKind::kNotRun;
      e.message = "tools are off (start with --tools ROOT to run them)";
      sink.event(e);
      return {};
    }
    if (steps > opts_.max_steps) {
      e.message = "the limit of " + std::to_string(opts_.max_steps) +
                  " tool calls a turn is reached (--tool-steps): this call was not run";
      result = json{{"error", e.message}};
    } else {
      e.kind = ToolEventKind::kCall;
      sink.event(e);
      const ToolAnswer a = sink.run(e.call_id, call.name, call.arguments);
      result = a.result;
      e.ms = a.ms;
      if (a.error) {  // the tool's own words when it gave them as a string
        const auto it = result.is_object() ? result.find("error") : result.end();
        e.message = it != result.end() && it->is_string() ? it->get<std::string>()
                                                          : tool_json_text(result);
      }
      if (!a.error) e.kind = ToolEventKind::kResult;
    }
  }
  if (!opts_.enabled) {  // a malformed call while tools are off: reported only
    e.kind = ToolEventKind::kNotRun;
    sink.event(e);
    return {};
  }
  if (e.kind != ToolEventKind::kResult) e.kind = ToolEventKind::kError;
  e.result = tool_json_text(result);
  e.result_bytes = int64_t(e.result.size());
  sink.event(e);
  return response_ids(e.name, result);
}

TurnOutcome ToolLoop::run_turn(Engine& engine, const TurnRequest& req, uint64_t turn,
                               ToolTurnSink& sink) {
  ToolCallParser parser(opts_.tokens);
  StreamDecoder decoder(*opts_.tokenizer);
  turn_ = turn;
  calls_ = 0;
  TurnOutcome total;
  TurnRequest step = req;
  std::vector<int32_t> response;
  for (bool first = true;; first = false) {
    SegmentSink seg(*this, sink, parser, decoder, total.generated, first);
    const TurnOutcome o = engine.run_turn(step, seg);
    total.generated += o.generated;
    total.prefilled += o.prefilled;
    total.prefill_ms += o.prefill_ms;
    total.decode_ms += o.decode_ms;
    total.reason = o.reason;
    total.stop_id = o.stop_id;
    total.error = o.error;
    std::optional<ToolCallOutcome> call = std::move(seg.finished_);
    const bool step_ended = o.reason == StopReason::kSink && (call || seg.stopped_);
    if (!step_ended) {
      // Generation stopped elsewhere (end of turn, limit, interrupt, gate, error): a call left
      // open is truncated; it gets its error response without generating further.
      if (std::optional<ToolCallOutcome> open = parser.flush()) call = std::move(open);
      response.clear();
      if (call) response = respond(*call, sink);
      if (!response.empty() && o.reason != StopReason::kError) {
        TurnRequest tail;
        tail.input = response;
        tail.control = req.control;
        SegmentSink quiet(*this, sink, parser, decoder, total.generated, false);
        const TurnOutcome t = engine.run_turn(tail, quiet);
        total.prefilled += t.prefilled;
        total.prefill_ms += t.prefill_ms;
        if (t.error && !total.error) total.error = t.error;
      }
      return total;
    }
    if (!call) {  // <|tool_response> with no call before it
      call = ToolCallError{"", "the model wrote <|tool_response> without a call", "", 0};
    }
    response = respond(*call, sink);
    step = req;
    step.input = response;
    step.max_tokens = req.max_tokens - total.generated;
    if (step.max_tokens <= 0) step.max_tokens = 0;  // the response still joins the context
    if (calls_ > opts_.max_steps) step.max_tokens = 0;  // over the limit: answered, then stop
    if (step.max_tokens == 0) {
      SegmentSink quiet(*this, sink, parser, decoder, total.generated, false);
      const TurnOutcome t = engine.run_turn(step, quiet);
      total.prefilled += t.prefilled;
      total.prefill_ms += t.prefill_ms;
      if (t.error) {
        total.reason = StopReason::kError;
        total.error = t.error;
      } else {
        total.reason = calls_ > opts_.max_steps ? StopReason::kSink : StopReason::kTokenLimit;
      }
      return total;
    }
  }
}

}  // namespace infer::actors
