// A client tool round trip through the --serve front end (cli/serve_front_end, cli/serve_tools)
// and the real pipeline, with a scripted model (random weights never write a tool call) and the
// real Gemma 4 tokenizer: frames go in and come out through pipes exactly as over stdin/stdout.
// The model calls the declared tool: TOOL_CALL goes out on the GENERATE's id, TOOL_RESULT
// answers it (a second answer is OUT_OF_ORDER, an unknown call BAD_VALUE), TOOL_EVENT tool_ran
// says where the response went, its TOKENs carry the writer's ids there, the model goes on.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "cli/serve_front_end.h"
#include "cli/serve_tools.h"
#include "model/tool_format/format_pieces.h"
#include "model/tool_format/tool_writer.h"
#include "protocol/encode.h"
#include "protocol/frame.h"
#include "protocol/parse.h"
#include "test/actors/scripted_forward.h"
#include "test/test_paths.h"
#include "test/tools_vfs/temp_tree.h"

namespace infer::test {
namespace {

using json = nlohmann::json;
using protocol::ServerMessage;

constexpr int32_t kEndOfTurn = 106;  // <turn|>
constexpr int kWaitMs = 30'000;      // every read is bounded by this

const Tokenizer& vocab() {
  static const std::optional<Tokenizer> tok = [] {
    auto t = Tokenizer::load(shared_fixtures() / "gemma4-text" / "e2b-vocab" / "tokenizer.json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    return t.ok() ? std::optional<Tokenizer>(std::move(t).value()) : std::nullopt;
  }();
  if (!tok) std::abort();
  return *tok;
}

std::vector<int32_t> ids_of(const Result<FormatPieces>& pieces) {
  EXPECT_TRUE(pieces.ok());
  auto ids = encode_pieces(vocab(), *pieces);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

struct Received {
  uint32_t rid = 0;
  ServerMessage message;
};

// The client's end of the two pipes.
class WireClient {
 public:
  WireClient(int to_server, int from_server) : out_(to_server), in_(from_server) {}
  void send(const protocol::ClientMessage& m, uint32_t rid) {
    std::vector<uint8_t> bytes;
    protocol::encode(m, rid, bytes);
    ASSERT_EQ(::write(out_, bytes.data(), bytes.size()), ssize_t(bytes.size()));
  }
  // The next server frame; nullopt when none comes within kWaitMs.
  std::optional<Received> next() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    for (;;) {
      std::span<const uint8_t> in(buf_.data() + used_, buf_.size() - used_);
      const size_t before = in.size();
      std::optional<protocol::DecodeEvent> ev = decoder_.next(in);
      used_ += before - in.size();
      if (ev) {
        const auto* f = std::get_if<protocol::Frame>(&*ev);
        if (f == nullptr) return std::nullopt;
        Result<ServerMessage> m = protocol::parse_server(*f);
        EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
        if (!m) return std::nullopt;
        return Received{f->header.request_id, std::move(m).value()};
      }
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                               deadline - std::chrono::steady_clock::now())
                               .count());
      pollfd p{in_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) <= 0) return std::nullopt;
      uint8_t chunk[65536];
      const ssize_t n = ::read(in_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.erase(buf_.begin(), buf_.begin() + ptrdiff_t(used_));
      used_ = 0;
      buf_.insert(buf_.end(), chunk, chunk + n);
    }
  }
  // Frames until one of type T (returned), the others kept in `seen`.
  template <class T>
  std::optional<std::pair<uint32_t, T>> until(std::vector<Received>& seen) {
    while (std::optional<Received> r = next()) {
      if (const T* t = std::get_if<T>(&r->message)) return std::pair(r->rid, *t);
      seen.push_back(std::move(*r));
    }
    return std::nullopt;
  }

 private:
  int out_, in_;
  protocol::FrameDecoder decoder_;
  std::vector<uint8_t> buf_;
  size_t used_ = 0;
};

TEST(ServeToolsFrontEnd, AClientToolRoundTripsOverTheProtocolAndItsResponseIsSentAsTokens) {
  tools::test::TempTree tree;
  auto b = tools::BuiltinTools::open(tree.base(),
                                     [](std::string_view s) { return vocab().encode(s, false).size(); });
  ASSERT_TRUE(b.ok()) << b.error().message;
  Result<std::unique_ptr<cli::ServeTools>> tools = cli::ServeTools::open(tree.base());
  ASSERT_TRUE(tools.ok()) << tools.error().message;

  const std::vector<int32_t> the_call = ids_of(call_pieces("weather", {{"city", "Oslo"}}));
  std::vector<int32_t> script = the_call;
  const std::vector<int32_t> after = vocab().encode("Cold.", false);
  script.insert(script.end(), after.begin(), after.end());
  auto fwd = std::make_shared<ScriptedForward>(int64_t(262144), script, kEndOfTurn, 4096);
  actors::PipelineOptions o;
  o.engine.sampling.temperature = 0.0f;
  o.engine.end_ids = {1, kEndOfTurn};
  o.engine.max_positions = 4096;
  o.tokenizer = &vocab();
  o.tools.builtin = std::shared_ptr<const tools::BuiltinTools>(std::move(b).value());
  o.engine.boundary = (*tools)->injection(vocab());
  o.gate.pending_interrupts = &(*tools)->pending_counter();

  int to_server[2], from_server[2];
  ASSERT_EQ(::pipe2(to_server, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_server, O_CLOEXEC), 0);
  protocol::ServerHello hello;
  hello.vocab_size = 262144;
  hello.max_generate_tokens = 4096;
  hello.context_tokens = 4096;
  int status = -1;
  {
    cli::ServeFrontEnd front(from_server[1], hello, 64, 4096, 0, false);
    actors::Pipeline pipeline(fwd, o, front);
    front.attach(&pipeline);
    (*tools)->attach(&pipeline);
    front.set_tools(tools->get());
    std::thread server([&] { status = front.run(to_server[0]); });
    // On every way out (a failed ASSERT too): the server's input ends, so it shuts down as on
    // EOF, and its thread is joined before the front end goes.
    struct EndInput {
      std::thread& server;
      int& fd;
      ~EndInput() {
        if (fd >= 0) ::close(fd);
        fd = -1;
        server.join();
      }
    } end_input{server, to_server[1]};
    WireClient c(to_server[1], from_server[0]);
    std::vector<Received> seen;

    c.send(protocol::Hello{}, 1);
    ASSERT_TRUE(c.until<protocol::ServerHello>(seen));
    c.send(protocol::ToolEvents{protocol::tool_event_bit(protocol::ToolEventKind::kToolRan)}, 2);
    ASSERT_TRUE(c.until<protocol::ToolAck>(seen));
    c.send(protocol::ToolDeclare{R"([{"name":"weather","description":"The weather now"}])"}, 3);
    const auto declared = c.until<protocol::ToolDeclared>(seen);
    ASSERT_TRUE(declared);
    EXPECT_EQ(declared->second.n_tools, 1u);
    protocol::AppendIds prompt;
    for (const int32_t id : vocab().encode("<bos>Weather?", false)) prompt.ids.push_back(uint32_t(id));
    c.send(prompt, 4);
    c.send(protocol::Generate{}, 5);  // STOP_AT_EOT, greedy, the server's 64 tokens

    const auto tool_call = c.until<protocol::ToolCall>(seen);
    ASSERT_TRUE(tool_call);
    EXPECT_EQ(tool_call->first, 5u);  // the GENERATE's id
    EXPECT_EQ(tool_call->second.name, "weather");
    EXPECT_EQ(json::parse(tool_call->second.arguments), json({{"city", "Oslo"}}));
    const uint32_t call_id = tool_call->second.call_id;
    c.send(protocol::ToolResult{call_id + 40, protocol::ToolStatus::kOk, "{}"}, 6);
    const auto unknown = c.until<protocol::ErrorFrame>(seen);
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->second.code, protocol::WireError::kBadValue) << unknown->second.message;
    c.send(protocol::ToolResult{call_id, protocol::ToolStatus::kOk, R"({"celsius":-3})"}, 7);
    c.send(protocol::ToolResult{call_id, protocol::ToolStatus::kOk, "{}"}, 8);
    const auto again = c.until<protocol::ErrorFrame>(seen);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->first, 8u);
    EXPECT_EQ(again->second.code, protocol::WireError::kOutOfOrder) << again->second.message;
    const auto done = c.until<protocol::Done>(seen);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->second.reason, protocol::DoneReason::kEos);

    // Every frame of the generation, in order: the call's TOKENs, tool_ran, the response's
    // TOKENs (the writer's ids, at the positions tool_ran names), then the model going on.
    std::vector<protocol::Token> tokens;
    std::optional<protocol::ToolRanEvent> ran;
    size_t tokens_before_ran = 0;
    for (const Received& r : seen) {
      if (const auto* t = std::get_if<protocol::Token>(&r.message); t && r.rid == 5) {
        tokens.push_back(*t);
      }
      const auto* e = std::get_if<protocol::ToolEvent>(&r.message);
      if (e && e->kind() == protocol::ToolEventKind::kToolRan) {
        ran = std::get<protocol::ToolRanEvent>(e->event);
        tokens_before_ran = tokens.size();
        EXPECT_EQ(r.rid, 5u);
      }
    }
    ASSERT_TRUE(ran);
    EXPECT_EQ(ran->call_id, call_id);
    EXPECT_EQ(ran->client, 1u);
    EXPECT_EQ(ran->status, protocol::ToolStatus::kOk);
    EXPECT_EQ(ran->name, "weather");
    const std::vector<int32_t> resp = ids_of(response_pieces("weather", {{"celsius", -3}}));
    ASSERT_EQ(ran->n_tokens, resp.size());
    EXPECT_EQ(tokens_before_ran, the_call.size());
    ASSERT_GE(tokens.size(), tokens_before_ran + resp.size());
    for (size_t i = 0; i < resp.size(); ++i) {
      EXPECT_EQ(tokens[tokens_before_ran + i].id, uint32_t(resp[i])) << i;
      EXPECT_EQ(tokens[tokens_before_ran + i].pos, ran->pos + i) << i;
    }
    EXPECT_EQ(ran->pos, prompt.ids.size() + the_call.size());
    EXPECT_EQ(done->second.n_tokens, tokens.size());
    EXPECT_EQ(done->second.pos, tokens.back().pos + 1);
    // The model went on after the response: "Cold." and <turn|>.
    EXPECT_EQ(tokens.size(), the_call.size() + resp.size() + after.size() + 1);

    c.send(protocol::Shutdown{}, 9);
    EXPECT_TRUE(c.until<protocol::ShutdownAck>(seen));
  }
  EXPECT_EQ(status, 0);
  for (const int fd : {to_server[0], from_server[0], from_server[1]}) ::close(fd);
}

}  // namespace
}  // namespace infer::test
