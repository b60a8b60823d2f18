// The model's tool calls through the real pipeline (actors, engine, tool loop, tools actor) with
// a scripted model (test/actors/scripted_forward.h) and the real Gemma 4 tokenizer (e2b-vocab):
// a read_file call runs and its response is injected with exactly the writer's ids, the model
// continues in the same turn; a malformed or truncated call gets an error response; --tool-steps
// caps the calls; with tools off a call is only reported; a client tool round-trips through a
// fake front end, and times out when the front end stays silent.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/pipeline.h"
#include "model/tool_format/format_pieces.h"
#include "model/tool_format/tool_writer.h"
#include "test/actors/recording_front_end.h"
#include "test/actors/scripted_forward.h"
#include "test/test_paths.h"
#include "test/tools_vfs/temp_tree.h"
#include "tools_vfs/builtin_tools.h"

namespace infer::test {
namespace {

using actors::Pipeline;
using actors::StopReason;
using actors::ToolEvent;
using actors::ToolEventKind;
using json = nlohmann::json;

constexpr int32_t kEndOfTurn = 106;  // <turn|> in Gemma 4's tokenizer

const Tokenizer& vocab() {
  static const std::optional<Tokenizer> tok = [] {
    auto t = Tokenizer::load(shared_fixtures() / "gemma4-text" / "e2b-vocab" / "tokenizer.json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    return t.ok() ? std::optional<Tokenizer>(std::move(t).value()) : std::nullopt;
  }();
  if (!tok) std::abort();  // every test here needs it; the failure above says why
  return *tok;
}

std::vector<int32_t> text(std::string_view s) { return vocab().encode(s, false); }
std::vector<int32_t> ids_of(const Result<FormatPieces>& pieces) {
  EXPECT_TRUE(pieces.ok());
  auto ids = encode_pieces(vocab(), *pieces);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<int32_t>{};
}
std::vector<int32_t> call(std::string_view name, const json& args) {
  return ids_of(call_pieces(name, args));
}
std::vector<int32_t> response(std::string_view name, const json& result) {
  return ids_of(response_pieces(name, result));
}
std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Where two id sequences part (gtest prints only their first 32 ids).
std::string first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  auto at = [&](const std::vector<int32_t>& v) {
    return i < v.size() ? std::to_string(v[i]) + " (" + vocab().decode(std::span(&v[i], 1)) + ")"
                        : std::string("the end");
  };
  return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
         ", first difference at " + std::to_string(i) + ": " + at(a) + " vs " + at(b);
}
#define EXPECT_IDS(a, b) EXPECT_TRUE((a) == (b)) << first_difference((a), (b))

// Records tool events too, and answers client calls through `on_client` when set.
class ToolFrontEnd : public RecordingFrontEnd {
 public:
  void tool_event(const ToolEvent& e) override {
    add([&] { events_.push_back(e); });
    if (e.kind == ToolEventKind::kClientCall && on_client) on_client(e);
  }
  std::vector<ToolEvent> events() {
    std::vector<ToolEvent> out;
    add([&] { out = events_; });
    return out;
  }
  std::function<void(const ToolEvent&)> on_client;

 private:
  std::vector<ToolEvent> events_;
};

struct TurnRun {
  std::vector<int32_t> context;  // the engine's, after the turn
  std::vector<int32_t> fed;      // what the scripted model was fed
  actors::TurnEnd end;
  std::vector<ToolEvent> events;
  std::vector<actors::TokenEvent> tokens;
};

class ToolPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.file("notes.txt", "hello from the tools\n");
    tools::BuiltinOptions bo;
    bo.subshell.landlock = tools::LandlockMode::kOff;
    auto b = tools::BuiltinTools::open(
        tree_.base(), [](std::string_view s) { return vocab().encode(s, false).size(); }, bo);
    ASSERT_TRUE(b.ok()) << b.error().message;
    builtin_ = std::shared_ptr<const tools::BuiltinTools>(std::move(b).value());
    setup_.builtin = builtin_;
  }

  // One turn of at most max_tokens after `prompt_`, the model writing `script` then <turn|>.
  TurnRun run(const std::vector<int32_t>& script, int64_t max_tokens = 256,
          const std::function<void(Pipeline&)>& before = {}, actors::Tracer* tracer = nullptr) {
    auto fwd = std::make_shared<ScriptedForward>(int64_t(262144), script, kEndOfTurn, 4096);
    actors::PipelineOptions o;
    o.engine.sampling.temperature = 0.0f;
    o.engine.end_ids = {1, kEndOfTurn};
    o.engine.max_positions = 4096;
    o.tokenizer = &vocab();
    o.tools = setup_;
    o.tracer = tracer;
    TurnRun r;
    Pipeline p(fwd, o, front_);
    pipeline_ = &p;
    if (before) before(p);
    const uint64_t turn = p.send("", prompt_, true, max_tokens);
    const auto end = front_.wait_turn(turn);
    EXPECT_TRUE(end.has_value());
    if (end) r.end = *end;
    auto st = p.stats(true);
    EXPECT_TRUE(st.ok());
    if (st.ok()) r.context = st->context;
    r.fed = fwd->fed();
    r.events = front_.events();
    r.tokens = front_.tokens(turn);
    pipeline_ = nullptr;
    return r;
  }
  std::string shown(const TurnRun& r) {  // the text the front end would print
    std::string s;
    for (const auto& t : r.tokens) s += t.text;
    return s;
  }

  tools::test::TempTree tree_;
  std::shared_ptr<const tools::BuiltinTools> builtin_;
  actors::ToolSetup setup_;
  ToolFrontEnd front_;
  Pipeline* pipeline_ = nullptr;
  const std::vector<int32_t> prompt_ = cat({{2}, text("Read my notes, please.")});
};

TEST_F(ToolPipelineTest, AReadFileCallRunsAndItsResponseJoinsTheSameTurn) {
  const json args = {{"path", "notes.txt"}};
  const auto before = text("Let me look.");
  const auto the_call = call("read_file", args);
  const auto after = text("It says hello.");
  const TurnRun r = run(cat({before, the_call, after}));

  // What the tool answers for this call, written back exactly as the writer spells it.
  const json result = builtin_->run("read_file", args);
  ASSERT_FALSE(result.contains("error")) << result.dump();
  const auto the_response = response("read_file", result);
  EXPECT_IDS(r.context, cat({prompt_, before, the_call, the_response, after}));
  EXPECT_EQ(r.end.reason, StopReason::kEndToken);
  EXPECT_EQ(r.end.generated, int64_t(before.size() + the_call.size() + after.size()));
  // The model saw the response before it went on: everything but its last token was fed.
  EXPECT_IDS(r.fed, cat({prompt_, before, the_call, the_response, after}));

  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].kind, ToolEventKind::kCall);
  EXPECT_EQ(r.events[0].name, "read_file");
  EXPECT_EQ(json::parse(r.events[0].arguments), args);
  EXPECT_EQ(r.events[1].kind, ToolEventKind::kResult);
  EXPECT_EQ(json::parse(r.events[1].result), result);
  EXPECT_EQ(r.events[1].result_bytes, int64_t(result.dump().size()));
  EXPECT_EQ(r.events[0].call_id, r.events[1].call_id);

  // The call's tokens are in the context but not shown; the step index runs across the call.
  EXPECT_EQ(shown(r), "Let me look.It says hello.");
  ASSERT_EQ(r.tokens.size(), size_t(r.end.generated));
  size_t hidden = 0;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    EXPECT_EQ(r.tokens[i].step, int64_t(i));
    hidden += r.tokens[i].tool_call;
  }
  EXPECT_EQ(hidden, the_call.size());
}

TEST_F(ToolPipelineTest, AResultWithInvalidUtf8ReachesTheModelWithoutACrash) {
  tree_.file("latin1.txt", "caf\xe9 au lait\n");  // Latin-1: text with one invalid byte
  const auto the_call = call("read_file", {{"path", "latin1.txt"}});
  const TurnRun r = run(cat({the_call, text("ok")}));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].kind, ToolEventKind::kResult);
  const json result = json::parse(r.events[1].result);  // the byte as U+FFFD
  EXPECT_NE(result.at("text").get<std::string>().find("caf\xef\xbf\xbd au lait"),
            std::string::npos);
  EXPECT_IDS(r.context, cat({prompt_, the_call, response("read_file", result), text("ok")}));
}

TEST_F(ToolPipelineTest, AMalformedCallGetsAnErrorResponseAndTheModelGoesOn) {
  // "call:read_file{path notes.txt}": no colon after the key.
  const auto bad = cat({{vocab().token_to_id("<|tool_call>").value()},
                        text("call:read_file{path notes.txt}"),
                        {vocab().token_to_id("<tool_call|>").value()}});
  const auto after = text("Sorry.");
  const TurnRun r = run(cat({bad, after}));
  ASSERT_EQ(r.events.size(), 1u);
  const ToolEvent& e = r.events[0];
  EXPECT_EQ(e.kind, ToolEventKind::kError);
  EXPECT_EQ(e.name, "read_file");
  EXPECT_NE(e.message.find("malformed"), std::string::npos) << e.message;
  const json result = json::parse(e.result);
  EXPECT_EQ(result.at("error"), e.message);
  EXPECT_IDS(r.context, cat({prompt_, bad, response("read_file", result), after}));
  EXPECT_EQ(r.end.reason, StopReason::kEndToken);
}

TEST_F(ToolPipelineTest, ACallCutByTheTokenLimitGetsAnErrorResponse) {
  const auto the_call = call("read_file", {{"path", "notes.txt"}});
  const std::vector<int32_t> cut(the_call.begin(), the_call.begin() + 4);
  const TurnRun r = run(the_call, int64_t(cut.size()));
  EXPECT_EQ(r.end.reason, StopReason::kTokenLimit);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].kind, ToolEventKind::kError);
  const json result = json::parse(r.events[0].result);
  const std::string name = r.events[0].name.empty() ? "invalid_call" : r.events[0].name;
  EXPECT_IDS(r.context, cat({prompt_, cut, response(name, result)}));
}

TEST_F(ToolPipelineTest, TheModelsOwnToolResponseEndsTheStepAndIsNotKept) {
  // The model closes its call with <|tool_response> instead of <tool_call|>.
  auto the_call = call("stat", {{"path", "notes.txt"}});
  the_call.back() = vocab().token_to_id("<|tool_response>").value();
  const auto after = text("ok");
  const TurnRun r = run(cat({the_call, after}));
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].kind, ToolEventKind::kResult);
  const json result = json::parse(r.events[1].result);
  EXPECT_EQ(result.at("size"), 21);
  std::vector<int32_t> kept(the_call.begin(), the_call.end() - 1);
  EXPECT_IDS(r.context, cat({prompt_, kept, response("stat", result), after}));
}

TEST_F(ToolPipelineTest, ToolStepsCapsTheCallsOfATurn) {
  setup_.max_steps = 1;
  const auto first = call("stat", {{"path", "notes.txt"}});
  const auto second = call("list_dir", json::object());
  const TurnRun r = run(cat({first, second, text("never written")}));
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[1].kind, ToolEventKind::kResult);
  EXPECT_EQ(r.events[2].kind, ToolEventKind::kError);
  EXPECT_NE(r.events[2].message.find("--tool-steps"), std::string::npos);
  EXPECT_EQ(r.end.reason, StopReason::kSink);
  EXPECT_IDS(r.context, cat({prompt_, first, response("stat", json::parse(r.events[1].result)),
                            second, response("list_dir", json::parse(r.events[2].result))}));
}

TEST_F(ToolPipelineTest, WithToolsOffACallIsReportedNotRun) {
  setup_.builtin = nullptr;
  const auto the_call = call("read_file", {{"path", "notes.txt"}});
  const TurnRun r = run(the_call);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].kind, ToolEventKind::kNotRun);
  EXPECT_NE(r.events[0].message.find("--tools"), std::string::npos);
  EXPECT_IDS(r.context, cat({prompt_, the_call}));  // nothing injected
  for (const auto& t : r.tokens) EXPECT_FALSE(t.tool_call);
}

TEST_F(ToolPipelineTest, AClientToolRoundTripsThroughTheFrontEnd) {
  front_.on_client = [this](const ToolEvent& e) {
    EXPECT_EQ(e.name, "weather");
    EXPECT_EQ(json::parse(e.arguments), json({{"city", "Oslo"}}));
    pipeline_->tool_result(e.call_id, R"({"celsius": -3})");
  };
  const auto the_call = call("weather", {{"city", "Oslo"}});
  const TurnRun r = run(cat({the_call, text("Cold.")}), 256, [](Pipeline& p) {
    ASSERT_TRUE(p.declare_client_tool({"weather", "The weather in a city.",
                                       json{{"type", "object"}}})
                    .ok());
    EXPECT_EQ(p.tool_declarations().back().name, "weather");
    EXPECT_EQ(p.declare_client_tool({"read_file", "x", json{{"type", "object"}}}).error().code,
              ErrorCode::kInvalidArgument);
  });
  ASSERT_EQ(r.events.size(), 3u);  // call, client call, result
  EXPECT_EQ(r.events[1].kind, ToolEventKind::kClientCall);
  EXPECT_EQ(r.events[2].kind, ToolEventKind::kResult);
  EXPECT_IDS(r.context, cat({prompt_, the_call, response("weather", {{"celsius", -3}}),
                            text("Cold.")}));
}

TEST_F(ToolPipelineTest, AClientToolThatNeverAnswersTimesOut) {
  setup_.client_timeout = std::chrono::milliseconds(200);
  const auto the_call = call("weather", {{"city", "Oslo"}});
  const TurnRun r = run(the_call, 256, [](Pipeline& p) {
    ASSERT_TRUE(p.declare_client_tool({"weather", "", json{{"type", "object"}}}).ok());
  });
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[2].kind, ToolEventKind::kError);
  EXPECT_NE(r.events[2].message.find("did not answer"), std::string::npos) << r.events[2].message;
}

// Spans by (actor, what), for --trace's "tools" track.
class SpanCounter : public actors::Tracer {
 public:
  void span(const char* actor, const char* what, int64_t, int64_t, int64_t) override {
    std::lock_guard lock(mu_);
    ++spans_[std::string(actor) + "/" + what];
  }
  int count(const std::string& key) {
    std::lock_guard lock(mu_);
    return spans_[key];
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> spans_;
};

TEST_F(ToolPipelineTest, CallsAreSpansOnTheToolsTrack) {
  SpanCounter spans;
  const auto the_call = call("stat", {{"path", "notes.txt"}});
  run(cat({the_call, the_call}), 256, {}, &spans);
  EXPECT_EQ(spans.count("tools/builtin call"), 2);
  EXPECT_EQ(spans.count("stream/tool wait"), 2);
  EXPECT_EQ(spans.count("io/tool event"), 4);  // call and result, twice
}

TEST_F(ToolPipelineTest, AnInterruptEndsTheWaitForATool) {
  front_.on_client = [this](const ToolEvent&) { pipeline_->interrupt(); };  // and no answer
  const auto the_call = call("weather", {{"city", "Oslo"}});
  const auto t0 = std::chrono::steady_clock::now();
  const TurnRun r = run(cat({the_call, text("never written")}), 256, [](Pipeline& p) {
    ASSERT_TRUE(p.declare_client_tool({"weather", "", json{{"type", "object"}}}).ok());
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0);  // not the client timeout (60 s)
  EXPECT_EQ(r.end.reason, StopReason::kInterrupted);
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[2].kind, ToolEventKind::kError);
  EXPECT_NE(r.events[2].message.find("interrupted"), std::string::npos) << r.events[2].message;
  // The call and its error response are in the context; nothing was generated after them.
  EXPECT_IDS(r.context,
             cat({prompt_, the_call, response("weather", json::parse(r.events[2].result))}));
}

TEST_F(ToolPipelineTest, WithToolsOffNoClientToolCanBeDeclared) {
  setup_.builtin = nullptr;
  run(text("hi"), 256, [](Pipeline& p) {
    EXPECT_FALSE(p.tools_enabled());
    EXPECT_EQ(p.declare_client_tool({"weather", "", json{{"type", "object"}}}).error().code,
              ErrorCode::kUnsupported);
    EXPECT_TRUE(p.tool_declarations().empty());
  });
}

}  // namespace
}  // namespace infer::test
