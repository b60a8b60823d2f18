// The one-shot --chat --tools sink (cli/one_shot_tools.h) under the call loop, with a scripted
// model (test/actors/scripted_forward.h) and the e2b-vocab tokenizer: the call's tokens are not
// printed, the built-in tool runs inline and its response joins the turn, the events name it.
#include "cli/one_shot_tools.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "model/tool_format/format_pieces.h"
#include "model/tool_format/tool_writer.h"
#include "test/actors/scripted_forward.h"
#include "test/test_paths.h"
#include "test/tools_vfs/temp_tree.h"

namespace infer::cli {
namespace {

using json = nlohmann::json;

class Printed : public actors::TokenSink {
 public:
  actors::Verdict token(const actors::Step& s) override {
    ids.push_back(s.id);
    return actors::Verdict::kKeep;
  }
  std::vector<int32_t> ids;
};

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(OneShotTools, ACallRunsInlineAndOnlyTheTextIsPrinted) {
  auto loaded =
      Tokenizer::load(test::shared_fixtures() / "gemma4-text" / "e2b-vocab" / "tokenizer.json");
  ASSERT_TRUE(loaded.ok());
  const Tokenizer& tok = *loaded;
  tools::test::TempTree tree;
  tree.file("a.txt", "alpha\n");
  tools::BuiltinOptions bo;
  bo.subshell.landlock = tools::LandlockMode::kOff;
  auto builtin = tools::BuiltinTools::open(
      tree.base(), [&](std::string_view s) { return tok.encode(s, false).size(); }, bo);
  ASSERT_TRUE(builtin.ok());

  const auto call = encode_pieces(tok, *call_pieces("stat", {{"path", "a.txt"}}));
  ASSERT_TRUE(call.ok());
  const auto before = tok.encode("Checking.", false), after = tok.encode("Six bytes.", false);
  const std::vector<int32_t> prompt = {2, 100, 101};
  auto fwd = std::make_shared<test::ScriptedForward>(262144, cat({before, *call, after}), 106,
                                                     4096);
  actors::EngineOptions eo;
  eo.end_ids = {1, 106};
  eo.max_positions = 4096;
  actors::Engine engine(fwd, eo);
  actors::TurnRequest turn;
  turn.input = prompt;
  turn.max_tokens = 200;
  Printed printed;
  OneShotToolSink sink(printed, **builtin, false);
  actors::ToolLoop loop({&tok, *ToolTokens::from(tok), actors::kDefaultToolSteps, true});
  const actors::TurnOutcome out = loop.run_turn(engine, turn, 1, sink);

  EXPECT_EQ(out.reason, actors::StopReason::kEndToken);
  EXPECT_EQ(printed.ids, cat({before, after}));  // the call's tokens are not shown
  const json result = (*builtin)->run("stat", {{"path", "a.txt"}});
  EXPECT_EQ(result.at("size"), 6);
  const auto response = encode_pieces(tok, *response_pieces("stat", result));
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(engine.context(), cat({prompt, before, *call, *response, after}));
  EXPECT_EQ(loop.calls(), 1u);
}

}  // namespace
}  // namespace infer::cli
